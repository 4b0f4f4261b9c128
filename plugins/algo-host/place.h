/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: NUMA placement (place.c), apart from ah.h so that its unit test
 * needs nothing else of the pack. */
#ifndef AH_PLACE_H
#define AH_PLACE_H

/* The NUMA node (OS index) this process runs on, by hwloc: the one node its
 * CPU binding lies within, else the node of the CPU it last ran on; -1 when
 * unknown (built without hwloc, no topology, or CPUs of several nodes).
 * Honours HWLOC_XMLFILE, as every hwloc user does. */
int ah_numa_here(void);

/* order[v] = the rank numbered v when node[r] is rank r's NUMA node (n
 * ranks): ranks grouped by node, nodes in the order of their lowest rank,
 * rank order within a node. Where any node is unknown (-1), rank order.
 * Returns the number of nodes seen (1 for rank order). */
int ah_place(const int *node, int n, int *order);

#endif
