/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of algo-gpu's chunk schedules (plugins/algo-gpu/schedule.c) on
 * the CPU: the data flow of each algorithm is replayed for 2 to 8 ranks with
 * per-rank contribution counts, so a schedule that drops, doubles or
 * misroutes an element, or assumes two ranks, fails here without a GPU; the
 * schedules of communicators spanning hosts likewise, for 2 to 16 ranks on 1
 * to 4 hosts (algo_gpu_hier_replay.h).
 * Where the pack is built, also its parameters and the algorithm choice they
 * give (the pack loaded from the build tree; no GPU needed). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../plugins/algo-gpu/schedule.h"
#include "testlib.h"

/* Check's assertions report each pass to the parent process; the replays
 * assert millions of times, so they test first and call Check only to fail. */
#define REQ(cond, ...)                                  \
	do {                                            \
		if (!(cond))                            \
			ck_abort_msg(__VA_ARGS__);      \
	} while (0)
#define REQ_EQ(a, b) REQ((a) == (b), "%s:%d: %s (%llu) != %s (%llu)", __FILE__, __LINE__, #a, \
			 (unsigned long long)(a), #b, (unsigned long long)(b))

#include "algo_gpu_hier_replay.h"

static const uint64_t counts[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 100, 255, 1000, 4097, 65537};
static const uint32_t esizes[] = {2, 4, 8};
static const uint64_t tiles[] = {16, 48, 64, 1024};
static const uint32_t blocks[] = {1, 2, 3, 8};

/* contrib[r][i]: bit q set when rank q's element i was reduced into rank r's
 * result; adds counts how often (must be exactly once per rank). */
struct sim {
	int n;
	uint64_t count;
	uint32_t *contrib[WAG_MAX_RANKS];
	uint8_t *adds[WAG_MAX_RANKS][WAG_MAX_RANKS];
	uint8_t *writes[WAG_MAX_RANKS];
};

static void sim_init(struct sim *m, int n, uint64_t count)
{
	memset(m, 0, sizeof(*m));
	m->n = n;
	m->count = count;
	for (int r = 0; r < n; r++) {
		m->contrib[r] = calloc(count + 1, sizeof(uint32_t));
		m->writes[r] = calloc(count + 1, 1);
		for (int q = 0; q < n; q++)
			m->adds[r][q] = calloc(count + 1, 1);
		REQ(m->contrib[r] && m->writes[r], "%s:%d: check failed", __FILE__, __LINE__);
	}
}

static void sim_check_and_free(struct sim *m, const char *what)
{
	uint32_t all = (uint32_t)((1u << m->n) - 1);
	for (int r = 0; r < m->n; r++) {
		for (uint64_t i = 0; i < m->count; i++) {
			REQ(m->writes[r][i] == 1, "%s: n=%d count=%llu: rank %d element %llu written %d times",
				      what, m->n, (unsigned long long)m->count, r, (unsigned long long)i, m->writes[r][i]);
			REQ(m->contrib[r][i] == all, "%s: n=%d count=%llu: rank %d element %llu has contributions %#x",
				      what, m->n, (unsigned long long)m->count, r, (unsigned long long)i, m->contrib[r][i]);
			for (int q = 0; q < m->n; q++)
				REQ(m->adds[r][q][i] <= 1, "%s: rank %d element %llu reduced rank %d's value %d times",
					      what, r, (unsigned long long)i, q, m->adds[r][q][i]);
		}
		free(m->contrib[r]);
		free(m->writes[r]);
		for (int q = 0; q < m->n; q++)
			free(m->adds[r][q]);
	}
}

/* A tile in flight: what a sender put into a receiver's ring slot. */
struct slot {
	int valid;
	uint64_t off, len;
	uint32_t contrib[1]; /* unused: contributions travel through sim arrays */
};

/* Replays the reduce-scatter + allgather allreduce exactly as the kernel walks
 * it: per rank, per CUDA block g, per step i (tile t = g + i * nblocks):
 * send tile t of block p to p for each step s, reduce tile t of the own block
 * from every rank in rank order, send the result, receive everyone's result. */
static void replay_rsag(int n, uint64_t count, uint32_t esize, uint64_t tile_bytes, uint32_t maxb)
{
	struct wag_sched s[WAG_MAX_RANKS];
	for (int r = 0; r < n; r++)
		REQ_EQ(wag_sched_init(count, n, r, esize, tile_bytes, maxb, &s[r]), 0);
	/* Every rank must walk the same tiles with the same blocks. */
	for (int r = 1; r < n; r++) {
		REQ_EQ(s[r].nblocks, s[0].nblocks);
		REQ_EQ(s[r].ntiles, s[0].ntiles);
	}
	/* Rank blocks partition [0, count), 16-byte aligned starts. */
	uint64_t next = 0;
	for (int p = 0; p < n; p++) {
		uint64_t o, l;
		wag_block(count, n, p, s[0].gran, &o, &l);
		REQ_EQ(o, next);
		REQ((o * esize) % 16 == 0 || l == 0, "%s:%d: check failed", __FILE__, __LINE__);
		next = o + l;
	}
	REQ_EQ(next, count);

	struct sim m;
	sim_init(&m, n, count);
	/* Peer pairing: what r sends in step k, its peer receives in step k. */
	for (int r = 0; r < n; r++)
		for (int k = 1; k < n; k++) {
			int p = wag_send_peer(r, n, k);
			REQ((p) != (r), "step peer is the rank itself");
			REQ_EQ(wag_recv_peer(p, n, k), r);
		}
	uint64_t covered = 0;
	for (uint32_t g = 0; g < s[0].nblocks; g++) {
		uint64_t nt = wag_block_tiles(&s[0], g);
		for (uint64_t i = 0; i < nt; i++) {
			uint64_t t = g + i * s[0].nblocks;
			REQ((t) < (s[0].ntiles), "tile index out of range");
			/* rs[dst][src]: the tile src put into dst's ring. */
			struct slot rs[WAG_MAX_RANKS][WAG_MAX_RANKS], ag[WAG_MAX_RANKS][WAG_MAX_RANKS];
			memset(rs, 0, sizeof(rs));
			memset(ag, 0, sizeof(ag));
			for (int r = 0; r < n; r++)
				for (int k = 1; k < n; k++) {
					int p = wag_send_peer(r, n, k);
					uint64_t o, l;
					wag_tile(&s[r], p, t, &o, &l);
					REQ(!rs[p][r].valid, "%s:%d: check failed", __FILE__, __LINE__);
					rs[p][r] = (struct slot){1, o, l, {0}};
				}
			for (int r = 0; r < n; r++) {
				uint64_t o, l;
				wag_tile(&s[r], r, t, &o, &l);
				covered += l;
				for (int q = 0; q < n; q++) {
					if (q != r) {
						REQ(rs[r][q].valid, "%s:%d: check failed", __FILE__, __LINE__);
						REQ_EQ(rs[r][q].off, o);
						REQ_EQ(rs[r][q].len, l);
					}
					for (uint64_t e = o; e < o + l; e++) {
						m.contrib[r][e] |= 1u << q;
						m.adds[r][q][e]++;
					}
				}
				for (uint64_t e = o; e < o + l; e++)
					m.writes[r][e]++;
				for (int k = 1; k < n; k++) {
					int p = wag_send_peer(r, n, k);
					ag[p][r] = (struct slot){1, o, l, {0}};
				}
			}
			for (int r = 0; r < n; r++)
				for (int k = 1; k < n; k++) {
					int q = wag_recv_peer(r, n, k);
					uint64_t o, l;
					wag_tile(&s[r], q, t, &o, &l);
					REQ(ag[r][q].valid, "%s:%d: check failed", __FILE__, __LINE__);
					REQ_EQ(ag[r][q].off, o);
					REQ_EQ(ag[r][q].len, l);
					for (uint64_t e = o; e < o + l; e++) {
						m.contrib[r][e] |= m.contrib[q][e];
						m.writes[r][e]++;
					}
				}
		}
	}
	REQ_EQ(covered, count);
	sim_check_and_free(&m, "rsag");
}

START_TEST(rsag_all_sizes)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
				for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++)
					for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
						replay_rsag(n, counts[c], esizes[e], tiles[t], blocks[b]);
}
END_TEST

/* Allgather: count is the per-rank block; the vector of the schedule is the
 * whole output (n * count), so tile t of block q is q's input tile t. */
static void replay_allgather(int n, uint64_t count, uint32_t esize, uint64_t tile_bytes, uint32_t maxb)
{
	struct wag_sched s;
	REQ_EQ(wag_sched_init(count, 1, 0, esize, tile_bytes, maxb, &s), 0);
	uint64_t total = count * (uint64_t)n;
	uint8_t *w[WAG_MAX_RANKS];
	for (int r = 0; r < n; r++)
		REQ(w[r] = calloc(total + 1, 1), "%s:%d: check failed", __FILE__, __LINE__);
	for (uint32_t g = 0; g < s.nblocks; g++)
		for (uint64_t i = 0; i < wag_block_tiles(&s, g); i++) {
			uint64_t o, l;
			wag_tile(&s, 0, g + i * s.nblocks, &o, &l);
			for (int r = 0; r < n; r++) {
				/* own tile copied locally; peer q's tile received in step k */
				for (uint64_t e = o; e < o + l; e++)
					w[r][(uint64_t)r * count + e]++;
				for (int k = 1; k < n; k++) {
					int q = wag_recv_peer(r, n, k);
					REQ_EQ(wag_send_peer(q, n, k), r);
					for (uint64_t e = o; e < o + l; e++)
						w[r][(uint64_t)q * count + e]++;
				}
			}
		}
	for (int r = 0; r < n; r++) {
		for (uint64_t e = 0; e < total; e++)
			REQ(w[r][e] == 1, "allgather n=%d count=%llu: rank %d element %llu written %d times", n,
				      (unsigned long long)count, r, (unsigned long long)e, w[r][e]);
		free(w[r]);
	}
}

START_TEST(allgather_all_sizes)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
				for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++)
					for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
						replay_allgather(n, counts[c], esizes[e], tiles[t], blocks[b]);
}
END_TEST

/* One-shot and LL: segment g of every rank's vector goes to every peer, and
 * each rank reduces every segment from all ranks in rank order. */
START_TEST(oneshot_segments)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
				for (uint32_t nb = 1; nb <= 9; nb += 4) {
					uint64_t count = counts[c], gran = 16 / esizes[e];
					struct sim m;
					sim_init(&m, n, count);
					for (int r = 0; r < n; r++)
						for (uint32_t g = 0; g < nb; g++) {
							uint64_t o, l;
							wag_segment(count, gran, nb, g, &o, &l);
							for (int q = 0; q < n; q++)
								for (uint64_t x = o; x < o + l; x++) {
									m.contrib[r][x] |= 1u << q;
									m.adds[r][q][x]++;
								}
							for (uint64_t x = o; x < o + l; x++)
								m.writes[r][x]++;
						}
					sim_check_and_free(&m, "oneshot");
				}
}
END_TEST

/* Reduce-scatter (count = one rank's block): rank r's output element e must
 * reduce element q * count + e of every rank q's input exactly once. The ring
 * replays tile t of block g as the kernel does (sender r writes block p's tile
 * into p's slot, p reduces its own tile); the one-shot its segments. */
static void replay_reduce_scatter(int n, uint64_t count, uint32_t esize, uint64_t tile_bytes, uint32_t maxb,
				  int oneshot)
{
	struct wag_sched s;
	REQ_EQ(wag_sched_init(count, 1, 0, esize, tile_bytes, maxb, &s), 0);
	uint64_t gran = esize < 16 ? 16 / esize : 1;
	uint32_t nb = oneshot ? maxb : s.nblocks;
	struct sim m;
	sim_init(&m, n, count);
	for (uint32_t g = 0; g < nb; g++) {
		uint64_t steps = oneshot ? 1 : wag_block_tiles(&s, g);
		for (uint64_t i = 0; i < steps; i++) {
			uint64_t o, l;
			if (oneshot)
				wag_segment(count, gran, nb, g, &o, &l);
			else
				wag_tile(&s, 0, g + i * s.nblocks, &o, &l);
			/* sent[p][r]: input index rank r put into p's slot */
			uint64_t sent[WAG_MAX_RANKS][WAG_MAX_RANKS];
			for (int r = 0; r < n; r++)
				for (int p = 0; p < n; p++)
					sent[p][r] = wag_peer_block(count, p) + o;
			for (int p = 0; p < n; p++) {
				for (int r = 0; r < n; r++) {
					uint64_t from = r == p ? wag_peer_block(count, p) + o : sent[p][r];
					REQ_EQ(from, (uint64_t)p * count + o);
					for (uint64_t e = 0; e < l; e++) {
						m.contrib[p][o + e] |= 1u << r;
						m.adds[p][r][o + e]++;
					}
				}
				for (uint64_t e = 0; e < l; e++)
					m.writes[p][o + e]++;
			}
		}
	}
	sim_check_and_free(&m, oneshot ? "reduce-scatter-oneshot" : "reduce-scatter-ring");
}

START_TEST(reduce_scatter_all_sizes)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
				for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
					replay_reduce_scatter(n, counts[c], esizes[e], 64, blocks[b], 1);
					for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++)
						replay_reduce_scatter(n, counts[c], esizes[e], tiles[t], blocks[b], 0);
				}
}
END_TEST

/* Rooted collectives: broadcast (the root's tile reaches every other rank
 * once, the root's own output comes from its input) and reduce (the root
 * reduces every rank's tile once; nobody else writes its output). */
static void replay_rooted(int n, uint64_t count, uint32_t esize, uint64_t tile_bytes, uint32_t maxb)
{
	struct wag_sched s;
	REQ_EQ(wag_sched_init(count, 1, 0, esize, tile_bytes, maxb, &s), 0);
	/* First, last and a middle root: the roles depend on nothing else. */
	const int roots[3] = {0, n - 1, n / 2};
	for (int ri = 0; ri < 3; ri++) {
		int root = roots[ri];
		uint8_t *bw[WAG_MAX_RANKS];
		struct sim m;
		sim_init(&m, n, count);
		for (int r = 0; r < n; r++)
			REQ(bw[r] = calloc(count + 1, 1), "%s:%d: check failed", __FILE__, __LINE__);
		for (uint32_t g = 0; g < s.nblocks; g++)
			for (uint64_t i = 0; i < wag_block_tiles(&s, g); i++) {
				uint64_t o, l;
				wag_tile(&s, 0, g + i * s.nblocks, &o, &l);
				for (int r = 0; r < n; r++) {
					int got = r == root;
					for (int q = 0; q < n; q++)
						got += wag_bcast_sends(q, root, r);
					REQ_EQ(got, 1);
					for (uint64_t e = o; e < o + l; e++)
						bw[r][e]++;
				}
				/* reduce: what reaches the root */
				for (int q = 0; q < n; q++) {
					int to = 0;
					for (int r = 0; r < n; r++)
						to += wag_reduce_sends(q, root, r);
					REQ_EQ(to, q == root ? 0 : 1);
					REQ(q == root || wag_reduce_sends(q, root, root), "non-root %d does not send to the root", q);
					for (uint64_t e = o; e < o + l; e++) {
						m.contrib[root][e] |= 1u << q;
						m.adds[root][q][e]++;
					}
				}
				for (uint64_t e = o; e < o + l; e++)
					m.writes[root][e]++;
			}
		for (int r = 0; r < n; r++) {
			for (uint64_t e = 0; e < count; e++)
				REQ(bw[r][e] == 1, "broadcast n=%d root=%d count=%llu: rank %d element %llu written %d times", n,
				    root, (unsigned long long)count, r, (unsigned long long)e, bw[r][e]);
			free(bw[r]);
			if (r != root) /* only the root's result is checked: fill the others */
				for (uint64_t e = 0; e < count; e++) {
					m.contrib[r][e] = (1u << n) - 1;
					m.writes[r][e] = 1;
				}
		}
		sim_check_and_free(&m, "reduce");
	}
}

START_TEST(rooted_all_sizes)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t e = 0; e < sizeof(esizes) / sizeof(esizes[0]); e++)
				for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++)
					for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
						replay_rooted(n, counts[c], esizes[e], tiles[t], blocks[b]);
}
END_TEST

/* Alltoall in bytes (count = one block): rank r's output block p must hold
 * rank p's input block r, every byte written once, ring and one-shot. */
static void replay_alltoall(int n, uint64_t count, uint64_t tile_bytes, uint32_t maxb, int oneshot)
{
	struct wag_sched s;
	REQ_EQ(wag_sched_init(count, 1, 0, 1, tile_bytes, maxb, &s), 0);
	uint32_t nb = oneshot ? maxb : s.nblocks;
	uint64_t total = count * (uint64_t)n;
	uint64_t *src[WAG_MAX_RANKS]; /* which (rank, input index) landed: rank * total + index + 1 */
	uint8_t *w[WAG_MAX_RANKS];
	for (int r = 0; r < n; r++) {
		REQ(src[r] = calloc(total + 1, sizeof(uint64_t)), "%s:%d: check failed", __FILE__, __LINE__);
		REQ(w[r] = calloc(total + 1, 1), "%s:%d: check failed", __FILE__, __LINE__);
	}
	for (uint32_t g = 0; g < nb; g++) {
		uint64_t steps = oneshot ? 1 : wag_block_tiles(&s, g);
		for (uint64_t i = 0; i < steps; i++) {
			uint64_t o, l;
			if (oneshot)
				wag_segment(count, 16, nb, g, &o, &l);
			else
				wag_tile(&s, 0, g + i * s.nblocks, &o, &l);
			for (int r = 0; r < n; r++)     /* sender */
				for (int q = 0; q < n; q++) { /* receiver (r itself: the local copy) */
					uint64_t from = wag_peer_block(count, q) + o, to = wag_peer_block(count, r) + o;
					for (uint64_t e = 0; e < l; e++) {
						src[q][to + e] = (uint64_t)r * total + from + e + 1;
						w[q][to + e]++;
					}
				}
		}
	}
	for (int r = 0; r < n; r++) {
		for (int p = 0; p < n; p++)
			for (uint64_t e = 0; e < count; e++) {
				uint64_t at = (uint64_t)p * count + e;
				REQ(w[r][at] == 1, "alltoall n=%d count=%llu: rank %d byte %llu written %d times", n,
				    (unsigned long long)count, r, (unsigned long long)at, w[r][at]);
				REQ_EQ(src[r][at], (uint64_t)p * total + (uint64_t)r * count + e + 1);
			}
		free(src[r]);
		free(w[r]);
	}
}

START_TEST(alltoall_all_sizes)
{
	for (int n = 2; n <= WAG_MAX_RANKS; n++)
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
				replay_alltoall(n, counts[c], 64, blocks[b], 1);
				for (size_t t = 0; t < sizeof(tiles) / sizeof(tiles[0]); t++)
					replay_alltoall(n, counts[c], tiles[t], blocks[b], 0);
			}
}
END_TEST

/* Point to point: one channel (sender -> receiver) carries a stream of
 * entries; the sender groups them into batches one way, the receiver
 * another. Each side walks its batches as the kernel does (per block h, per
 * entry, its tiles, one sequence number each, counters kept across batches);
 * the tile at (h, seq) must be the same entry, offset and length on both
 * sides, and every byte of every entry must move once. */
struct p2p_tile {
	uint32_t entry;
	uint64_t off, len;
};

static size_t p2p_walk(const uint64_t *sizes, size_t nent, const size_t *cuts, size_t ncuts, uint64_t ll_max,
		       uint64_t small, uint64_t big, uint32_t pb, struct p2p_tile *map, uint64_t maxseq)
{
	uint64_t ctr[64] = {0};
	size_t begin = 0, moved = 0;
	for (size_t b = 0; b <= ncuts; b++) {
		size_t end = b < ncuts ? cuts[b] : nent;
		for (uint32_t h = 0; h < pb; h++)
			for (size_t k = begin; k < end; k++) {
				uint64_t tile = wag_p2p_entry_tile(sizes[k], ll_max, small, big, pb);
				for (uint64_t i = 0; i < wag_p2p_block_tiles(sizes[k], tile, pb, h); i++) {
					uint64_t o, l;
					wag_p2p_tile(sizes[k], tile, pb, h, i, &o, &l);
					REQ(l <= (sizes[k] <= ll_max ? wag_p2p_ll_tile_max(ll_max, pb) : big),
					    "p2p: a tile larger than its ring slot");
					REQ(l > 0, "p2p: empty tile");
					REQ(ctr[h] < maxseq, "p2p: too many tiles");
					map[h * maxseq + ctr[h]++] = (struct p2p_tile){(uint32_t)k, o, l};
					moved += l;
				}
			}
		begin = end;
	}
	return moved;
}

START_TEST(p2p_channels)
{
	uint64_t seed = 12345;
	const uint64_t tiles_b[] = {256, 4096, 65536};
	for (int iter = 0; iter < 400; iter++) {
		uint64_t sizes[24];
		size_t nent = 1 + (size_t)(seed % 24);
		uint64_t sum = 0;
		for (size_t k = 0; k < nent; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			uint64_t r = seed >> 33;
			sizes[k] = (r % 3 == 0) ? 1 + r % 17 : (r % 3 == 1) ? 1 + r % 5000 : 1 + r % 300000;
			sum += sizes[k];
		}
		/* Entries of at least big * pb bytes move in big tiles (the ring
		 * slot), the others in small ones: both kinds in one stream. */
		uint64_t tile = tiles_b[iter % 3], big = tile * (1 + (uint64_t)(iter % 2) * 3);
		/* and the smaller ones as LL tiles on some iterations */
		uint64_t ll_max = iter % 4 == 3 ? 3000 : iter % 4 == 1 ? 100000 : 0;
		uint32_t pb = 1 + (uint32_t)(iter % 5);
		size_t cs[24], cr[24], ncs = 0, ncr = 0;
		for (size_t k = 1; k < nent; k++) {
			if ((seed >> (k % 60)) & 1)
				cs[ncs++] = k;
			if ((seed >> ((k + 7) % 60)) & 2)
				cr[ncr++] = k;
		}
		uint64_t maxseq = 0;
		for (size_t k = 0; k < nent; k++)
			maxseq += (sizes[k] + 255) / 256; /* no tile is smaller than 256 bytes (or the entry) */
		struct p2p_tile *ms = calloc(pb * maxseq + 1, sizeof(*ms)), *mr = calloc(pb * maxseq + 1, sizeof(*mr));
		REQ(ms && mr, "%s:%d: out of memory", __FILE__, __LINE__);
		REQ_EQ(p2p_walk(sizes, nent, cs, ncs, ll_max, tile, big, pb, ms, maxseq), sum);
		REQ_EQ(p2p_walk(sizes, nent, cr, ncr, ll_max, tile, big, pb, mr, maxseq), sum);
		for (uint64_t x = 0; x < pb * maxseq; x++)
			REQ(ms[x].entry == mr[x].entry && ms[x].off == mr[x].off && ms[x].len == mr[x].len,
			    "p2p iter %d: slot %llu differs between sender and receiver", iter, (unsigned long long)x);
		/* every byte of every entry once */
		for (size_t k = 0; k < nent; k++) {
			uint8_t *cov = calloc(sizes[k], 1);
			REQ(cov, "%s:%d: out of memory", __FILE__, __LINE__);
			for (uint64_t x = 0; x < pb * maxseq; x++)
				if (ms[x].len && ms[x].entry == k)
					for (uint64_t b = ms[x].off; b < ms[x].off + ms[x].len; b++)
						cov[b]++;
			for (uint64_t b = 0; b < sizes[k]; b++)
				REQ(cov[b] == 1, "p2p: entry %zu byte %llu moved %d times", k, (unsigned long long)b, cov[b]);
			free(cov);
		}
		free(ms);
		free(mr);
	}
}
END_TEST

START_TEST(sizes_and_errors)
{
	struct wag_sched s;
	ck_assert_int_eq(wag_sched_init(10, 0, 0, 4, 64, 4, &s), -EINVAL);
	ck_assert_int_eq(wag_sched_init(10, WAG_MAX_RANKS + 1, 0, 4, 64, 4, &s), -EINVAL);
	ck_assert_int_eq(wag_sched_init(10, 2, 2, 4, 64, 4, &s), -EINVAL);
	ck_assert_int_eq(wag_sched_init(10, 2, 0, 0, 64, 4, &s), -EINVAL);
	ck_assert_int_eq(wag_sched_init(10, 2, 0, 4, 8, 4, &s), -EINVAL);
	ck_assert_int_eq(wag_sched_init(10, 2, 0, 4, 64, 0, &s), -EINVAL);
	/* Tiles hold whole 16-byte vectors; never more blocks than tiles. */
	ck_assert_int_eq(wag_sched_init(1000, 2, 1, 2, 100, 64, &s), 0);
	ck_assert_uint_eq(s.tile, 48);
	ck_assert_uint_eq(s.ntiles, (500 + 47) / 48);
	ck_assert_uint_eq(s.nblocks, s.ntiles);
	ck_assert_uint_eq(wag_ll_packets(0), 0);
	ck_assert_uint_eq(wag_ll_packets(1), 1);
	ck_assert_uint_eq(wag_ll_packets(9), 2);
	ck_assert_uint_eq(wag_segments(1 << 20, 16, 64 << 10), 16);
	ck_assert_uint_eq(wag_segments(100, 16, 64 << 10), 1);
	ck_assert_uint_eq(wag_segments(256 << 10, 16, 64 << 10), 4);
}
END_TEST

#ifdef WAG_HAVE_PACK
#include <weft/info.h>
#include <weft/weft.h>

#include "coll.h"

/* weft-info --select for CUDA memory, as text (the catalog is built once per
 * process; Check runs each test in a process of its own). */
static char *choices_hosts(int nranks, int nhosts, enum weft_mem_type mem)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ck_assert_ptr_nonnull(f);
	weft_info_print_algorithm_choice_hosts(f, nranks, nhosts, mem);
	fclose(f);
	printf("%s", out);
	return out;
}

static char *choices(int nranks, enum weft_mem_type mem)
{
	return choices_hosts(nranks, 1, mem);
}

/* True when the line of collective coll that starts at size lo names algo and ends at hi. */
static int has_range(const char *out, const char *coll, const char *lo, const char *hi, const char *algo)
{
	char head[64];
	snprintf(head, sizeof(head), "  %s:\n", coll);
	const char *p = strstr(out, head);
	if (!p)
		return 0;
	p += strlen(head);
	while (p[0] == ' ' && p[1] == ' ' && p[2] == ' ') {
		const char *e = strchr(p, '\n');
		if (!e)
			return 0;
		char line[256];
		snprintf(line, sizeof(line), "%.*s", (int)(e - p), p);
		char a[16], ua[8], b[16], ub[8], name[128];
		if (sscanf(line, " %15s %7s .. %15s %7s %127s", a, ua, b, ub, name) == 5) {
			char l[32], h[32];
			snprintf(l, sizeof(l), "%s %s", a, ua);
			snprintf(h, sizeof(h), "%s %s", b, ub);
			if (!strcmp(l, lo) && !strcmp(h, hi) && !strcmp(name, algo))
				return 1;
		}
		p = e + 1;
	}
	return 0;
}

/* The kernels need every peer mapped into this GPU: they declare one host
 * (max_hosts), so a communicator over two hosts never selects them. */
START_TEST(select_hosts)
{
	setenv("WEFT_CONFIG", "/dev/null", 1);
	char *one = choices_hosts(4, 1, WEFT_MEM_CUDA);
	ck_assert_ptr_nonnull(strstr(one, "Algorithm choice for 4 ranks on 1 host, cuda memory"));
	ck_assert(has_range(one, "allreduce", "1 B", "64 KiB", "algo-gpu/allreduce-ll"));
	free(one);
	char *two = choices_hosts(4, 2, WEFT_MEM_CUDA);
	ck_assert_ptr_nonnull(strstr(two, "Algorithm choice for 4 ranks on 2 hosts, cuda memory"));
	ck_assert_ptr_null(strstr(two, "algo-gpu/allreduce-ll"));
	ck_assert_ptr_null(strstr(two, "algo-gpu/allgather-direct"));
	ck_assert_ptr_null(strstr(two, "algo-gpu/sendrecv-ring"));
	/* Across hosts the cross-host schedules serve every collective, every size. */
	const char *colls[] = {"allreduce", "reduce_scatter", "allgather", "broadcast", "reduce", "alltoall", "sendrecv"};
	const char *names[] = {"allreduce-hier", "reduce-scatter-hier", "allgather-hier", "broadcast-hier",
			       "reduce-hier", "alltoall-hier", "sendrecv-hier"};
	char want[64];
	for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
		snprintf(want, sizeof(want), "algo-gpu/%s", names[i]);
		ck_assert_msg(has_range(two, colls[i], "1 B", "1 GiB", want), "%s on 2 hosts is not %s", colls[i], want);
	}
	free(two);
}
END_TEST

START_TEST(select_defaults)
{
	setenv("WEFT_CONFIG", "/dev/null", 1);
	char *out = choices(2, WEFT_MEM_CUDA);
	ck_assert(has_range(out, "allreduce", "1 B", "64 KiB", "algo-gpu/allreduce-ll"));
	ck_assert(has_range(out, "allreduce", "128 KiB", "1 MiB", "algo-gpu/allreduce-oneshot"));
	ck_assert(has_range(out, "allreduce", "2 MiB", "128 MiB", "algo-gpu/allreduce-direct"));
	ck_assert(has_range(out, "allreduce", "256 MiB", "1 GiB", "algo-gpu/allreduce-ce"));
	ck_assert_ptr_null(strstr(out, "allreduce-rsag"));
	ck_assert(has_range(out, "allgather", "1 B", "256 KiB", "algo-gpu/allgather-ll"));
	ck_assert(has_range(out, "allgather", "512 KiB", "1 MiB", "algo-gpu/allgather-oneshot"));
	ck_assert(has_range(out, "allgather", "2 MiB", "256 MiB", "algo-gpu/allgather-direct"));
	ck_assert(has_range(out, "allgather", "512 MiB", "1 GiB", "algo-gpu/allgather-ce"));
	/* Every collective of the API is served on CUDA buffers. */
	ck_assert(has_range(out, "reduce_scatter", "1 B", "256 KiB", "algo-gpu/reduce-scatter-ll"));
	ck_assert(has_range(out, "reduce_scatter", "512 KiB", "1 MiB", "algo-gpu/reduce-scatter-oneshot"));
	ck_assert(has_range(out, "reduce_scatter", "2 MiB", "1 GiB", "algo-gpu/reduce-scatter-direct"));
	ck_assert_ptr_null(strstr(out, "reduce-scatter-ce"));
	ck_assert(has_range(out, "broadcast", "1 B", "128 KiB", "algo-gpu/broadcast-ll"));
	ck_assert(has_range(out, "broadcast", "256 KiB", "2 MiB", "algo-gpu/broadcast-oneshot"));
	ck_assert(has_range(out, "broadcast", "4 MiB", "256 MiB", "algo-gpu/broadcast-direct"));
	ck_assert(has_range(out, "broadcast", "512 MiB", "1 GiB", "algo-gpu/broadcast-ce"));
	ck_assert(has_range(out, "reduce", "1 B", "16 MiB", "algo-gpu/reduce-oneshot"));
	ck_assert(has_range(out, "reduce", "32 MiB", "1 GiB", "algo-gpu/reduce-ring"));
	ck_assert(has_range(out, "alltoall", "1 B", "256 KiB", "algo-gpu/alltoall-ll"));
	ck_assert(has_range(out, "alltoall", "512 KiB", "512 KiB", "algo-gpu/alltoall-oneshot"));
	ck_assert(has_range(out, "alltoall", "1 MiB", "256 MiB", "algo-gpu/alltoall-direct"));
	ck_assert(has_range(out, "alltoall", "512 MiB", "1 GiB", "algo-gpu/alltoall-ce"));
	ck_assert(has_range(out, "sendrecv", "1 B", "1 GiB", "algo-gpu/sendrecv-ring"));
	free(out);
	/* Host buffers are not the pack's; more than 8 ranks only its cross-host
	 * schedules serve (the kernels' mesh holds 8). */
	out = choices(2, WEFT_MEM_HOST);
	ck_assert_ptr_null(strstr(out, "algo-gpu/"));
	free(out);
	out = choices(9, WEFT_MEM_CUDA);
	ck_assert(has_range(out, "allreduce", "1 B", "1 GiB", "algo-gpu/allreduce-hier"));
	ck_assert_ptr_null(strstr(out, "allreduce-ll"));
	free(out);
}
END_TEST

START_TEST(select_thresholds)
{
	setenv("WEFT_CONFIG", "/dev/null", 1);
	setenv("WEFT_ALGO_GPU_LL_MAX", "4K", 1);
	setenv("WEFT_ALGO_GPU_ONESHOT_MAX", "1M", 1);
	setenv("WEFT_ALGO_GPU_ALLGATHER_ONESHOT_MAX", "0", 1);
	setenv("WEFT_ALGO_GPU_LL_EXCHANGE_MAX", "0", 1);
	setenv("WEFT_ALGO_GPU_CE_ALLREDUCE_MIN", "512M", 1);
	setenv("WEFT_ALGO_GPU_CE_ALLGATHER_MIN", "64M", 1);
	const char *direct[] = {"ALLREDUCE", "REDUCE_SCATTER", "ALLGATHER", "BROADCAST", "ALLTOALL"};
	char key[64];
	for (size_t i = 0; i < sizeof(direct) / sizeof(direct[0]); i++) {
		snprintf(key, sizeof(key), "WEFT_ALGO_GPU_DIRECT_%s_MIN", direct[i]);
		setenv(key, i == 0 ? "4M" : "0", 1);
	}
	char *out = choices(4, WEFT_MEM_CUDA);
	ck_assert(has_range(out, "allreduce", "1 B", "4 KiB", "algo-gpu/allreduce-ll"));
	ck_assert(has_range(out, "allreduce", "8 KiB", "1 MiB", "algo-gpu/allreduce-oneshot"));
	ck_assert(has_range(out, "allreduce", "2 MiB", "2 MiB", "algo-gpu/allreduce-rsag"));
	ck_assert(has_range(out, "allreduce", "4 MiB", "256 MiB", "algo-gpu/allreduce-direct"));
	ck_assert(has_range(out, "allreduce", "512 MiB", "1 GiB", "algo-gpu/allreduce-ce"));
	ck_assert_ptr_null(strstr(out, "allgather-direct"));
	ck_assert_ptr_null(strstr(out, "alltoall-direct"));
	ck_assert(has_range(out, "allgather", "1 B", "32 MiB", "algo-gpu/allgather-ring"));
	ck_assert(has_range(out, "allgather", "64 MiB", "1 GiB", "algo-gpu/allgather-ce"));
	ck_assert_ptr_null(strstr(out, "allgather-oneshot"));
	ck_assert_ptr_null(strstr(out, "allgather-ll"));
	ck_assert(has_range(out, "reduce_scatter", "1 B", "1 MiB", "algo-gpu/reduce-scatter-oneshot"));
	ck_assert(has_range(out, "reduce", "2 MiB", "1 GiB", "algo-gpu/reduce-ring"));
	ck_assert(has_range(out, "alltoall", "1 B", "256 MiB", "algo-gpu/alltoall-ring"));
	ck_assert_ptr_null(strstr(out, "alltoall-oneshot"));
	free(out);
}
END_TEST

/* A parameter the pack cannot work with makes it refuse to load: no algo-gpu
 * algorithm is offered at all. */
static const struct {
	const char *var, *value; /* why it is refused */
} bad_params[] = {
	{"WEFT_ALGO_GPU_DEPTH", "1"},                /* the rings could deadlock */
	{"WEFT_ALGO_GPU_CE_CHUNK", "100K"},          /* not a multiple of 64K */
	{"WEFT_ALGO_GPU_LL_EXCHANGE_MAX", "128M"},   /* LL messages at most 64M */
	{"WEFT_ALGO_GPU_P2P_BLOCKS", "0"},           /* a channel needs a block */
	{"WEFT_ALGO_GPU_P2P_LL_MAX", "2M"},          /* the LL slots grow with it */
	{"WEFT_ALGO_GPU_CE_ALLREDUCE_PUSH", "2"},    /* a switch: 0 or 1 */
};

START_TEST(bad_parameter_declines)
{
	setenv("WEFT_CONFIG", "/dev/null", 1);
	setenv(bad_params[_i].var, bad_params[_i].value, 1);
	char *out = choices(2, WEFT_MEM_CUDA);
	ck_assert_msg(!strstr(out, "algo-gpu/"), "%s=%s: the pack still loads:\n%s", bad_params[_i].var,
		      bad_params[_i].value, out);
	free(out);
}
END_TEST
#endif

int main(void)
{
	Suite *s = suite_create("algo_gpu_sched");
	TCase *tc = tcase_create("schedules");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, rsag_all_sizes);
	tcase_add_test(tc, allgather_all_sizes);
	tcase_add_test(tc, oneshot_segments);
	tcase_add_test(tc, reduce_scatter_all_sizes);
	tcase_add_test(tc, rooted_all_sizes);
	tcase_add_test(tc, alltoall_all_sizes);
	tcase_add_test(tc, p2p_channels);
	tcase_add_test(tc, sizes_and_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("across_hosts");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, hier_allreduce, 0, (int)(sizeof(hlays) / sizeof(hlays[0])));
	tcase_add_loop_test(tc, hier_blocks, 0, (int)(sizeof(hlays) / sizeof(hlays[0])));
	tcase_add_test(tc, hier_layouts);
	suite_add_tcase(s, tc);
#ifdef WAG_HAVE_PACK
	tc = tcase_create("selection");
	tcase_add_test(tc, select_defaults);
	tcase_add_test(tc, select_hosts);
	tcase_add_test(tc, select_thresholds);
	tcase_add_loop_test(tc, bad_parameter_declines, 0, (int)(sizeof(bad_params) / sizeof(bad_params[0])));
	suite_add_tcase(s, tc);
#endif
	return wt_run_suite(s);
}
