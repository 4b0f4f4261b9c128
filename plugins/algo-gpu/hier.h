/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the schedules of communicators that span hosts, as data. Each
 * schedule is a list of moves between ranks' buffers in rounds: an intra-host
 * phase (over NVLink), an inter-host phase among the ranks of the same local
 * index on every host (over the network), then an intra-host phase again.
 * Plain host C: the executor walks the moves, and tests/test_algo_gpu_sched.c
 * replays them on the CPU for 2 to 16 ranks on 1 to 4 hosts. */
#ifndef WAG_HIER_H
#define WAG_HIER_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

#define WAG_HIER_MAX_RANKS 64
#define WAG_HIER_MAX_HOSTS WAG_HIER_MAX_RANKS

/* Who sits where. Hosts are numbered 0..nhosts-1 in the order of their lowest
 * rank; a rank's local index is its place among its host's ranks. */
struct wag_hier_layout {
	int nranks, nhosts;
	uint64_t gran; /* segments start at multiples of it (elements per 16 bytes); 1 by default */
	int host[WAG_HIER_MAX_RANKS];
	int local[WAG_HIER_MAX_RANKS];
	int nlocal[WAG_HIER_MAX_HOSTS];
	int member[WAG_HIER_MAX_HOSTS][WAG_MAX_RANKS]; /* rank of each local index */
};

/* Builds the layout from any host labels (equal label, same host): 0, or
 * -EINVAL (more than 64 ranks, more than WAG_MAX_RANKS on one host). */
int wag_hier_layout_make(struct wag_hier_layout *l, int nranks, const int *host_label);

/* A rank's three buffers: the caller's input and output, and a scratch of
 * the call's whole size (reduce-scatter and reduce collect partial sums
 * there). */
enum wag_hier_buf { WAG_HB_IN = 0, WAG_HB_OUT = 1, WAG_HB_TMP = 2 };

enum wag_hier_kind {
	WAG_HM_COPY = 0,   /* dst = src */
	WAG_HM_REDUCE = 1, /* dst = dst op src */
};

/* One move of `count` elements. Every move of a round reads what the earlier
 * rounds left, so the moves of one round may run in any order, at once. */
struct wag_hier_move {
	uint32_t round;
	uint8_t kind;  /* enum wag_hier_kind */
	uint8_t inter; /* src and dst are on different hosts */
	uint8_t sbuf, dbuf;
	int16_t src, dst;
	uint64_t soff, doff, count;
};

struct wag_hier_plan {
	struct wag_hier_move *moves;
	size_t n, cap;
	uint32_t nrounds;
};

/* How the ranks of one local index exchange across hosts. */
enum wag_hier_inter {
	WAG_HI_RING = 0, /* bandwidth: each moves 2 (H - 1) / H of its share */
	WAG_HI_TREE = 1, /* latency: binomial reduce and broadcast, log2 H rounds each */
};

/* The schedules. Counts are elements: allreduce, broadcast and reduce move
 * `count`; reduce-scatter's input and allgather's output are nranks * count,
 * rank r's block at r * count; alltoall sends count to each rank. Each returns
 * 0 or -ENOMEM / -EINVAL; plan_free releases what they made. */
int wag_hier_allreduce(const struct wag_hier_layout *l, uint64_t count, enum wag_hier_inter how,
		       struct wag_hier_plan *p);
int wag_hier_reduce_scatter(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p);
int wag_hier_allgather(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p);
int wag_hier_broadcast(const struct wag_hier_layout *l, uint64_t count, int root, struct wag_hier_plan *p);
int wag_hier_reduce(const struct wag_hier_layout *l, uint64_t count, int root, struct wag_hier_plan *p);
int wag_hier_alltoall(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p);
void wag_hier_plan_free(struct wag_hier_plan *p);

/* Bytes rank r sends to other hosts under plan p (elements of esize bytes). */
uint64_t wag_hier_off_host_bytes(const struct wag_hier_plan *p, int r, uint32_t esize);

#endif
