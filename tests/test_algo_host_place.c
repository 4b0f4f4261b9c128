/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host's NUMA placement (plugins/algo-host/place.c, linked in alone):
 * the node hwloc gives this process, with tests/topo_two_numa.xml read as
 * this machine's topology (CPU 0 on node 0, CPU 1 on node 1), and the
 * numbering of ranks node by node that every rank computes alike. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>

#include "../plugins/algo-host/place.h"
#include "testlib.h"

static void expect_order(const int *node, int n, const int *want, int nodes)
{
	int order[16];
	ck_assert_int_eq(ah_place(node, n, order), nodes);
	for (int v = 0; v < n; v++)
		ck_assert_msg(order[v] == want[v], "number %d: rank %d, expected rank %d", v, order[v], want[v]);
}

START_TEST(order_groups_nodes)
{
	/* Nodes in the order of their lowest rank, rank order within each. */
	expect_order((const int[]){0, 1, 0, 1, 1}, 5, (const int[]){0, 2, 1, 3, 4}, 2);
	expect_order((const int[]){1, 0, 1, 0}, 4, (const int[]){0, 2, 1, 3}, 2);
	expect_order((const int[]){3, 3, 0, 0, 3, 1}, 6, (const int[]){0, 1, 4, 2, 3, 5}, 3);
	/* One node: rank order. */
	expect_order((const int[]){0, 0, 0}, 3, (const int[]){0, 1, 2}, 1);
	/* A rank that cannot tell: rank order for everyone. */
	expect_order((const int[]){0, 1, -1, 1}, 4, (const int[]){0, 1, 2, 3}, 1);
}
END_TEST

/* Binds this process to the CPUs of mask bits and asks for its node. */
static int node_bound_to(unsigned bits)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	for (int i = 0; i < 2; i++)
		if (bits & (1u << i))
			CPU_SET(i, &set);
	ck_assert_int_eq(sched_setaffinity(0, sizeof(set), &set), 0);
	return ah_numa_here();
}

START_TEST(node_from_two_numa_xml)
{
	cpu_set_t all;
	ck_assert_int_eq(sched_getaffinity(0, sizeof(all), &all), 0);
	if (!CPU_ISSET(0, &all) || !CPU_ISSET(1, &all)) {
		fprintf(stderr, "skipped: CPUs 0 and 1 are not both allowed here\n");
		return;
	}
	setenv("HWLOC_XMLFILE", TT_TWO_NUMA, 1);
	setenv("HWLOC_THISSYSTEM", "1", 1);
#ifdef TT_HWLOC
	ck_assert_int_eq(node_bound_to(1), 0);
	ck_assert_int_eq(node_bound_to(2), 1);
	/* Bound to both nodes: the node of the CPU it runs on. */
	int n = node_bound_to(3);
	ck_assert_msg(n == 0 || n == 1, "node %d for a process on CPUs 0 and 1", n);
#else
	ck_assert_int_eq(node_bound_to(1), -1); /* built without hwloc: unknown */
#endif
	sched_setaffinity(0, sizeof(all), &all);
	unsetenv("HWLOC_XMLFILE");
	unsetenv("HWLOC_THISSYSTEM");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("algo_host_place");
	TCase *tc = tcase_create("place");
	tcase_add_test(tc, order_groups_nodes);
	tcase_add_test(tc, node_from_two_numa_xml);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
