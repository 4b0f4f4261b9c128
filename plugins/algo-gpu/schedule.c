/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: building the chunk schedules (schedule.h) from sizes and pack
 * parameters. Host code only; the accessors are inline in schedule.h. */
#include <errno.h>

#include "schedule.h"

int wag_sched_init(uint64_t count, int nranks, int rank, uint32_t esize, uint64_t tile_bytes, uint32_t max_blocks,
		   struct wag_sched *s)
{
	if (!s || nranks < 1 || nranks > WAG_MAX_RANKS || rank < 0 || rank >= nranks || esize == 0 || esize > 16 ||
	    tile_bytes < 16 || max_blocks == 0)
		return -EINVAL;
	/* Tiles hold whole elements and whole 16-byte vectors, so every tile of a
	 * 16-byte-aligned buffer starts aligned for the vector loads. */
	uint64_t tile = (tile_bytes / 16) * 16 / esize;
	if (tile == 0)
		return -EINVAL;
	uint64_t gran = esize < 16 ? 16 / esize : 1;
	uint64_t bo, longest;
	wag_block(count, nranks, 0, gran, &bo, &longest);
	struct wag_sched r = {
		.nranks = nranks,
		.rank = rank,
		.count = count,
		.gran = gran,
		.tile = tile,
		.nblocks = max_blocks,
		.ntiles = wag_div_up(longest, tile),
	};
	if (r.ntiles < r.nblocks)
		r.nblocks = r.ntiles ? (uint32_t)r.ntiles : 1;
	*s = r;
	return 0;
}

uint64_t wag_ll_packets(uint64_t bytes)
{
	return (bytes + 7) / 8;
}

uint32_t wag_segments(uint64_t bytes, uint32_t max_blocks, uint64_t min_bytes)
{
	if (max_blocks == 0)
		max_blocks = 1;
	if (min_bytes == 0)
		min_bytes = 1;
	uint64_t n = bytes / min_bytes;
	if (n < 1)
		n = 1;
	return n < max_blocks ? (uint32_t)n : max_blocks;
}
