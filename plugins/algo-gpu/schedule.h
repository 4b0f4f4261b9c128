/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: chunk schedules, kept apart from the kernels. Plain C that nvcc
 * also compiles for the device (WAG_HD): which part of a buffer a rank sends
 * to whom, in which step, and which CUDA block moves it. tests/test_algo_gpu_sched.c
 * checks them on the CPU for 2 to 8 ranks. */
#ifndef WAG_SCHEDULE_H
#define WAG_SCHEDULE_H

#include <stdint.h>

#if defined(__CUDACC__)
#define WAG_HD static __host__ __device__ __forceinline__
#else
#define WAG_HD static inline
#endif

#define WAG_MAX_RANKS 8

/* a / b rounded up (b > 0). */
WAG_HD uint64_t wag_div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* The tiled schedule of the pipelined algorithms (reduce-scatter + allgather
 * allreduce, allgather). The vector is cut into nranks rank blocks (balanced:
 * lengths differ by at most one element); each rank block into tiles of `tile`
 * elements; tile t of every rank block is moved by CUDA block t % nblocks, as
 * that block's (t / nblocks)-th step. */
struct wag_sched {
	int nranks;
	int rank;
	uint64_t count;   /* elements of the whole vector */
	uint64_t gran;    /* elements per 16 bytes (1 for elements over 16 bytes) */
	uint64_t tile;    /* elements per tile, > 0 */
	uint32_t nblocks; /* CUDA blocks, > 0 */
	uint64_t ntiles;  /* tiles of the longest rank block */
};

/* Part b of count elements split over n parts in units of gran elements
 * (gran = 16 bytes' worth, so every part but the last starts 16-byte aligned
 * in an aligned buffer): offset and length. Part lengths differ by at most one
 * unit; the last non-empty part takes the remainder; tail parts may be empty. */
WAG_HD void wag_block(uint64_t count, int n, int b, uint64_t gran, uint64_t *off, uint64_t *len)
{
	uint64_t units = wag_div_up(count, gran);
	uint64_t base = units / (uint64_t)n, extra = units % (uint64_t)n;
	uint64_t ub = (uint64_t)b;
	uint64_t o = (ub * base + (ub < extra ? ub : extra)) * gran;
	uint64_t l = (base + (ub < extra ? 1 : 0)) * gran;
	if (o > count)
		o = count;
	if (l > count - o)
		l = count - o;
	*off = o;
	*len = l;
}

/* The peer this rank sends to in step s (1..n-1), and the one it receives from.
 * Every pair meets once; no kernel assumes two ranks. */
WAG_HD int wag_send_peer(int rank, int n, int s)
{
	return (rank + s) % n;
}

WAG_HD int wag_recv_peer(int rank, int n, int s)
{
	return (rank - s + n) % n;
}

/* Tiles CUDA block g handles. */
WAG_HD uint64_t wag_block_tiles(const struct wag_sched *s, uint32_t g)
{
	return g < s->ntiles ? wag_div_up(s->ntiles - g, s->nblocks) : 0;
}

/* Tile t of rank block p: offset (elements, into the whole vector) and length
 * (0 when that block is shorter than the others). */
WAG_HD void wag_tile(const struct wag_sched *s, int p, uint64_t t, uint64_t *off, uint64_t *len)
{
	uint64_t bo, bl;
	wag_block(s->count, s->nranks, p, s->gran, &bo, &bl);
	uint64_t to = t * s->tile;
	*off = bo + (to < bl ? to : bl);
	*len = to >= bl ? 0 : (bl - to < s->tile ? bl - to : s->tile);
}

/* The one-shot and LL schedules: every rank gets the whole vector of every
 * peer. CUDA block g of nblocks owns segment g (wag_block over nblocks). */
WAG_HD void wag_segment(uint64_t count, uint64_t gran, uint32_t nblocks, uint32_t g, uint64_t *off, uint64_t *len)
{
	wag_block(count, (int)nblocks, (int)g, gran, off, len);
}

/* Buffers of nranks blocks of count elements (reduce-scatter input, alltoall
 * input and output, allgather output): rank q's block starts here. The
 * pipelined kernels over such buffers tile one block (a wag_sched over count
 * elements and one rank) and move tile t of block q at wag_peer_block + the
 * tile's offset. */
WAG_HD uint64_t wag_peer_block(uint64_t count, int q)
{
	return (uint64_t)q * count;
}

/* Who moves data in the rooted collectives. Broadcast: the root writes into
 * every peer; reduce: every non-root writes into the root. */
WAG_HD int wag_bcast_sends(int rank, int root, int q)
{
	return rank == root && q != root;
}

WAG_HD int wag_reduce_sends(int rank, int root, int q)
{
	return rank != root && q == root;
}

/* Point-to-point: an entry of bytes is cut into tiles of tile bytes; tile k
 * goes through the channel's CUDA block k % nblocks, as that block's next
 * sequence number. The mapping depends only on the entry's size, so sender
 * and receiver agree however their calls were grouped. */
WAG_HD uint64_t wag_p2p_block_tiles(uint64_t bytes, uint64_t tile, uint32_t nblocks, uint32_t h)
{
	uint64_t nt = wag_div_up(bytes, tile);
	return h < nt ? wag_div_up(nt - h, nblocks) : 0;
}

/* Data bytes per thread-wide row of a point-to-point LL tile: one 8-byte
 * packet per thread of a 512-thread block. */
#define WAG_P2P_LL_TILE 4096

/* The largest LL tile an entry of up to ll_max bytes uses: enough 4K rows
 * that such an entry needs no more tiles than the channel has blocks. */
WAG_HD uint64_t wag_p2p_ll_tile_max(uint64_t ll_max, uint32_t nblocks)
{
	uint64_t rows = wag_div_up(ll_max ? ll_max : 1, (uint64_t)nblocks * WAG_P2P_LL_TILE);
	return rows * WAG_P2P_LL_TILE;
}

/* The tile of an entry of bytes, from its size only, so both sides agree
 * however their calls were grouped. Up to ll_max: LL tiles of whole 4K rows,
 * as few rows as keep the tiles within the blocks (64K on 44 blocks: 16
 * tiles of 4K; 256K: 32 of 8K). Larger: up to cap bytes a tile (big, the
 * ring slot, once every block gets at least one such tile, else small), cut
 * so that every block moves the same number of tiles (16M on 44 blocks: 86
 * tiles of 192K, not 64 of 256K with 20 blocks moving two), in multiples of
 * 4K unless cap is smaller. */
WAG_HD uint64_t wag_p2p_entry_tile(uint64_t bytes, uint64_t ll_max, uint64_t small, uint64_t big, uint32_t nblocks)
{
	uint64_t nb = nblocks ? nblocks : 1;
	if (bytes <= ll_max)
		return wag_div_up(wag_div_up(bytes ? bytes : 1, nb), WAG_P2P_LL_TILE) * WAG_P2P_LL_TILE;
	uint64_t cap = big > small && bytes >= big * nb ? big : small;
	uint64_t rounds = wag_div_up(bytes, nb * cap);
	uint64_t t = wag_div_up(wag_div_up(bytes, nb * rounds), 4096) * 4096;
	return t < cap ? t : cap;
}

/* The i-th tile block h moves of an entry of bytes: offset and length. */
WAG_HD void wag_p2p_tile(uint64_t bytes, uint64_t tile, uint32_t nblocks, uint32_t h, uint64_t i, uint64_t *off,
			 uint64_t *len)
{
	uint64_t o = ((uint64_t)h + i * nblocks) * tile;
	*off = o < bytes ? o : bytes;
	*len = o >= bytes ? 0 : (bytes - o < tile ? bytes - o : tile);
}

#ifdef __cplusplus
extern "C" {
#endif

/* Fills *s for a vector of count elements on n ranks: tiles of at most
 * tile_bytes (whole elements, a multiple of 16 bytes), at most max_blocks CUDA
 * blocks and never more blocks than tiles. -EINVAL for bad arguments. */
int wag_sched_init(uint64_t count, int nranks, int rank, uint32_t esize, uint64_t tile_bytes, uint32_t max_blocks,
		   struct wag_sched *s);

/* LL packets (8 data bytes each) needed for bytes. */
uint64_t wag_ll_packets(uint64_t bytes);

/* CUDA blocks for a one-shot segment split: at most max_blocks, at least one
 * and no segment under min_bytes unless only one block remains. */
uint32_t wag_segments(uint64_t bytes, uint32_t max_blocks, uint64_t min_bytes);

#ifdef __cplusplus
}
#endif
#endif
