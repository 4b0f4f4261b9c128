/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: NUMA placement of the log-step algorithms (logstep.c). Each rank
 * learns its NUMA node from hwloc; the ranks share them and number
 * themselves node by node, so that a tree's or a doubling's early steps stay
 * within a node and only its last ones cross. No libweft symbol is used
 * here, so the unit test (tests/test_algo_host_place.c) links this file
 * alone. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>

#include "place.h"

#ifdef AH_HAVE_HWLOC
#include <hwloc.h>

/* The node whose CPUs hold cpus entirely, or -1 when they span several. */
static int node_of(hwloc_topology_t topo, hwloc_const_cpuset_t cpus)
{
	int found = -1, nn = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
	for (int i = 0; i < nn; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
		if (!o || !o->cpuset || hwloc_bitmap_iszero(o->cpuset) || !hwloc_bitmap_isincluded(cpus, o->cpuset))
			continue;
		if (found >= 0)
			return -1;
		found = (int)o->os_index;
	}
	return found;
}

int ah_numa_here(void)
{
	hwloc_topology_t topo;
	if (hwloc_topology_init(&topo) != 0)
		return -1;
	int node = -1;
	hwloc_cpuset_t cpus = hwloc_bitmap_alloc();
	if (hwloc_topology_load(topo) != 0 || !cpus)
		goto out;
	/* A process bound within one node stays there; an unbound one is
	 * placed where it runs now, where the scheduler's NUMA balancing tends
	 * to keep it. */
	if (hwloc_get_cpubind(topo, cpus, HWLOC_CPUBIND_PROCESS) == 0 && (node = node_of(topo, cpus)) >= 0)
		goto out;
	if (hwloc_get_last_cpu_location(topo, cpus, HWLOC_CPUBIND_THREAD) == 0)
		node = node_of(topo, cpus);
out:
	hwloc_bitmap_free(cpus);
	hwloc_topology_destroy(topo);
	return node;
}
#else
int ah_numa_here(void)
{
	return -1;
}
#endif

int ah_place(const int *node, int n, int *order)
{
	int known = 0, nodes = 0;
	if (n <= 0)
		return 0;
	for (int r = 0; r < n; r++)
		known += node[r] >= 0;
	/* One node, or any rank that cannot tell: rank order. */
	for (int r = 0; r < n; r++)
		order[r] = r;
	if (known < n)
		return 1;
	/* Nodes in the order of their lowest rank, ranks in rank order within
	 * each: a stable grouping that every rank computes alike. */
	int k = 0;
	char *taken = calloc((size_t)n, 1);
	if (!taken)
		return 1;
	for (int r = 0; r < n; r++) {
		if (taken[r])
			continue;
		nodes++;
		for (int s = r; s < n; s++)
			if (!taken[s] && node[s] == node[r]) {
				taken[s] = 1;
				order[k++] = s;
			}
	}
	free(taken);
	return nodes;
}
