/* SPDX-License-Identifier: Apache-2.0 */
/* Transport conformance suite: forks real ranks that drive one transport
 * through the public API only (include/weft/weft.h), so it runs against any
 * transport plugin: put of every size at odd offsets, signal ordering, flush,
 * port channels, bad arguments, a peer killed mid-transfer, abort.
 * WEFT_TEST_TRANSPORT names the transport (default "ofi"), WEFT_TEST_NRANKS the
 * rank count (default: 2, 3 and 4). Exits 77 when the transport is not loaded or
 * has no device to open here. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#define MAX_RANKS 16
#define RANKS_TIMEOUT 100 /* seconds for one forked run */
#define PEER_TIMEOUT_S 3  /* WEFT_CORE_PEER_TIMEOUT set below */

static const char *g_tp = "ofi";
static int g_nranks[3] = {2, 3, 4};
static int g_nn = 3;
static struct weft_unique_id g_id;

/* ------------------------------------------------------------ helpers */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Inside a rank: report and fail the rank (its exit status fails the test). */

/* Position-addressable pseudo-random bytes, so a receiver can compute what any
 * byte of a sender's buffer should be without a copy. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t pattern_word(uint64_t seed, uint64_t w)
{
	return mix64(seed ^ (w * 0x100000001b3ull));
}

static unsigned char pattern_byte(uint64_t seed, uint64_t i)
{
	return (unsigned char)(pattern_word(seed, i >> 3) >> (8 * (i & 7)));
}

/* Writes the pattern's bytes [from, to) into buf[from, to). */
static void fill_pattern(unsigned char *buf, uint64_t from, uint64_t to, uint64_t seed)
{
	uint64_t i = from;
	for (; i < to && (i & 7); i++)
		buf[i] = pattern_byte(seed, i);
	for (; i + 8 <= to; i += 8) {
		uint64_t w = pattern_word(seed, i >> 3);
		for (int k = 0; k < 8; k++)
			buf[i + k] = (unsigned char)(w >> (8 * k));
	}
	for (; i < to; i++)
		buf[i] = pattern_byte(seed, i);
}

/* First index in [0, len) where buf differs from the pattern's bytes
 * [off, off+len), or -1. */
static long long check_pattern(const unsigned char *buf, size_t len, uint64_t seed, uint64_t off)
{
	uint64_t cw = UINT64_MAX, w = 0;
	for (size_t i = 0; i < len; i++) {
		uint64_t pos = off + i;
		if ((pos >> 3) != cw) {
			cw = pos >> 3;
			w = pattern_word(seed, cw);
		}
		if (buf[i] != (unsigned char)(w >> (8 * (pos & 7))))
			return (long long)i;
	}
	return -1;
}

static void *xalloc(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 1) != 0)
		return NULL;
	return p;
}

/* A rank's view: the comm and one connection to every peer. */
struct world {
	int rank, n;
	weft_comm_t *comm;
	weft_conn_t *conn[MAX_RANKS];
};

static int world_up(int rank, int n, struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->rank = rank;
	w->n = n;
	ROK(weft_comm_create(&g_id, n, rank, &w->comm));
	RCHECK(weft_comm_rank(w->comm) == rank && weft_comm_size(w->comm) == n, "rank/size wrong");
	/* Every rank connects in increasing peer order: each pair meets. */
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_connect(w->comm, p, g_tp, &w->conn[p]));
		const char *t = weft_conn_transport(w->conn[p]);
		RCHECK(t && strcmp(t, g_tp) == 0, "connection to %d is carried by '%s', not '%s'", p, t ? t : "(null)",
		       g_tp);
		char desc[256];
		int rc = weft_conn_describe(w->conn[p], desc, sizeof(desc));
		RCHECK(rc == 0 || rc == -ENOSYS, "weft_conn_describe returned %d", rc);
		if (rc == 0 && rank == 0 && p == 1)
			printf("conformance: %s connection: %s\n", g_tp, desc);
	}
	return 0;
}

static int world_down(struct world *w)
{
	int rank = w->rank;
	for (int p = 0; p < w->n; p++)
		ROK(weft_conn_close(w->conn[p]));
	ROK(weft_comm_destroy(w->comm));
	return 0;
}

/* Runs fn on n forked ranks, with a fresh id (and bootstrap root) in this process. */
static void run_ranks(int n, wt_rank_fn fn, void *arg)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(n, fn, arg, RANKS_TIMEOUT);
	ck_assert_msg(bad == 0, "%d of %d ranks failed (transport %s)", bad, n, g_tp);
}

/* ------------------------------------------------------------ put sizes */
#define PUT_MAX (64u << 20)
#define GUARD 64
static const size_t put_sizes[] = {
	1, 3, 4, 7, 16, 64, 256, 1000, 1024, 4096, 4097, 16384, 65521, 65536, 262144,
	1048573, 1048576, 4194304, 5000011, 16777216, 67108864,
};
#define NSIZES (sizeof(put_sizes) / sizeof(put_sizes[0]))

/* In round r every rank writes to rank+r and receives from rank-r, so one
 * destination buffer per rank suffices; barriers separate the rounds. */
static int rank_put_sizes(int rank, int n, void *arg)
{
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	size_t blen = PUT_MAX + 4 * GUARD; /* room for the guards around the largest put at its offset */
	unsigned char *src = xalloc(blen), *dst = xalloc(blen);
	RCHECK(src && dst, "out of memory");
	weft_mem_t *msrc, *mdst;
	ROK(weft_mem_register(w.comm, src, blen, WEFT_MEM_HOST, &msrc));
	ROK(weft_mem_register(w.comm, dst, blen, WEFT_MEM_HOST, &mdst));
	weft_rmem_t *rdst[MAX_RANKS] = {0};
	weft_sem_t *sem[MAX_RANKS] = {0};
	weft_rsem_t *rsem[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(mdst, p, &rdst[p]));
		ROK(weft_sem_create(w.comm, &sem[p]));
		ROK(weft_sem_exchange(sem[p], p, &rsem[p]));
	}
	uint64_t sent[MAX_RANKS] = {0}, got[MAX_RANKS] = {0};
	for (size_t k = 0; k < NSIZES; k++) {
		size_t len = put_sizes[k];
		uint64_t soff = 1 + 2 * (k % 3), doff = GUARD + 1 + 2 * (k % 5);
		for (int r = 1; r < n; r++) {
			int to = (rank + r) % n, from = (rank - r + n) % n;
			uint64_t seed = ((uint64_t)rank << 40) ^ ((uint64_t)k << 20) ^ (uint64_t)r;
			fill_pattern(src, soff, soff + len, seed);
			memset(dst + doff - GUARD, 0xa5, len + 2 * GUARD);
			ROK(weft_comm_barrier(w.comm)); /* every dst is primed */
			ROK(weft_put(w.conn[to], rdst[to], doff, msrc, soff, len));
			ROK(weft_signal(w.conn[to], rsem[to], ++sent[to]));
			ROK(weft_sem_wait(sem[from], ++got[from]));
			uint64_t pseed = ((uint64_t)from << 40) ^ ((uint64_t)k << 20) ^ (uint64_t)r;
			long long bad = check_pattern(dst + doff, len, pseed, soff);
			RCHECK(bad < 0, "%zu-byte put from rank %d: byte %lld is 0x%02x, expected 0x%02x", len, from, bad,
			       bad < 0 ? 0 : dst[doff + bad], bad < 0 ? 0 : pattern_byte(pseed, soff + bad));
			for (size_t g = doff - GUARD; g < doff; g++)
				RCHECK(dst[g] == 0xa5, "%zu-byte put from rank %d wrote before its offset", len, from);
			for (size_t g = doff + len; g < doff + len + GUARD; g++)
				RCHECK(dst[g] == 0xa5, "%zu-byte put from rank %d wrote past its end", len, from);
			ROK(weft_flush(w.conn[to]));
			ROK(weft_comm_barrier(w.comm)); /* every check is done before src/dst change */
		}
	}
	for (int p = 0; p < n; p++) {
		ROK(weft_rsem_release(rsem[p]));
		ROK(weft_sem_destroy(sem[p]));
		ROK(weft_rmem_release(rdst[p]));
	}
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	int rc = world_down(&w);
	free(src);
	free(dst);
	return rc;
}

START_TEST(put_sizes_all_peers)
{
	run_ranks(g_nranks[_i], rank_put_sizes, NULL);
}
END_TEST

/* --------------------------------------------------- signal ordering */
#define ORD_PUTS 256
#define ORD_CHUNK 4096
#define ORD_ITERS 6

/* Per peer: ORD_PUTS puts in flight, then one signal; the receiver must see all
 * of them once it sees the token. Ports do the same through the proxy. */
struct ord_arg {
	int use_port;
};

static int rank_ordering(int rank, int n, void *argp)
{
	const struct ord_arg *arg = argp;
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	size_t slice = (size_t)ORD_PUTS * ORD_CHUNK; /* one slice per peer */
	unsigned char *src = xalloc(slice * n), *dst = xalloc(slice * n);
	RCHECK(src && dst, "out of memory");
	memset(dst, 0, slice * n);
	weft_mem_t *msrc, *mdst;
	ROK(weft_mem_register(w.comm, src, slice * n, WEFT_MEM_HOST, &msrc));
	ROK(weft_mem_register(w.comm, dst, slice * n, WEFT_MEM_HOST, &mdst));
	weft_rmem_t *rdst[MAX_RANKS] = {0};
	weft_sem_t *data[MAX_RANKS] = {0}, *ack[MAX_RANKS] = {0};
	weft_rsem_t *rdata[MAX_RANKS] = {0}, *rack[MAX_RANKS] = {0};
	weft_port_t *port[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(mdst, p, &rdst[p]));
		ROK(weft_sem_create(w.comm, &data[p]));
		ROK(weft_sem_create(w.comm, &ack[p]));
		ROK(weft_sem_exchange(data[p], p, &rdata[p]));
		ROK(weft_sem_exchange(ack[p], p, &rack[p]));
		if (arg->use_port)
			ROK(weft_port_create(w.conn[p], 0, &port[p]));
	}
	for (uint64_t it = 1; it <= ORD_ITERS; it++) {
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			unsigned char *s = src + slice * p;
			uint64_t seed = ((uint64_t)rank << 32) ^ ((uint64_t)p << 16) ^ it;
			fill_pattern(s, 0, slice, seed);
			for (int c = 0; c < ORD_PUTS; c++) {
				/* Chunks in a scrambled order, so a transport that reorders shows it. */
				uint64_t ci = (uint64_t)((c * 97) % ORD_PUTS) * ORD_CHUNK;
				uint64_t doff = slice * rank + ci, soff = slice * p + ci;
				if (arg->use_port)
					ROK(weft_port_put(port[p], rdst[p], doff, msrc, soff, ORD_CHUNK));
				else
					ROK(weft_put(w.conn[p], rdst[p], doff, msrc, soff, ORD_CHUNK));
			}
			if (arg->use_port)
				ROK(weft_port_signal(port[p], rdata[p], it));
			else
				ROK(weft_signal(w.conn[p], rdata[p], it));
		}
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			ROK(weft_sem_wait(data[p], it));
			RCHECK(weft_sem_value(data[p]) >= it, "token went back");
			uint64_t pseed = ((uint64_t)p << 32) ^ ((uint64_t)rank << 16) ^ it;
			long long bad = check_pattern(dst + slice * p, slice, pseed, 0);
			RCHECK(bad < 0, "iteration %" PRIu64 ": data from rank %d at byte %lld not visible with its signal",
			       it, p, bad);
			if (arg->use_port)
				ROK(weft_port_signal(port[p], rack[p], it));
			else
				ROK(weft_signal(w.conn[p], rack[p], it));
		}
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			ROK(weft_sem_wait(ack[p], it));
			if (arg->use_port)
				ROK(weft_port_flush(port[p]));
			else
				ROK(weft_flush(w.conn[p]));
		}
	}
	for (int p = 0; p < n; p++) {
		ROK(weft_port_destroy(port[p]));
		ROK(weft_rsem_release(rdata[p]));
		ROK(weft_rsem_release(rack[p]));
		ROK(weft_sem_destroy(data[p]));
		ROK(weft_sem_destroy(ack[p]));
		ROK(weft_rmem_release(rdst[p]));
	}
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	int rc = world_down(&w);
	free(src);
	free(dst);
	return rc;
}

START_TEST(signal_orders_puts)
{
	struct ord_arg a = {.use_port = 0};
	run_ranks(g_nranks[_i], rank_ordering, &a);
}
END_TEST

START_TEST(port_put_signal_flush)
{
	struct ord_arg a = {.use_port = 1};
	run_ranks(g_nranks[_i], rank_ordering, &a);
}
END_TEST

/* ------------------------------------------------------------ flush */
#define FL_OPS 1024
#define FL_CHUNK 1000 /* odd-sized, unaligned chunks */

/* Many outstanding puts, one flush. Then (a) the source is scribbled over at
 * once and only afterwards signalled: flush must mean "source read"; and (b)
 * the sender announces completion through the bootstrap alone while the
 * receiver's only progress is its port channel's proxy: flush must mean
 * "written into the target's memory". */
static int rank_flush(int rank, int n, void *argp)
{
	const struct ord_arg *arg = argp;
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	size_t slice = (size_t)FL_OPS * FL_CHUNK + 1;
	unsigned char *src = xalloc(slice * n), *dst = xalloc(slice * n);
	RCHECK(src && dst, "out of memory");
	memset(dst, 0, slice * n);
	weft_mem_t *msrc, *mdst;
	ROK(weft_mem_register(w.comm, src, slice * n, WEFT_MEM_HOST, &msrc));
	ROK(weft_mem_register(w.comm, dst, slice * n, WEFT_MEM_HOST, &mdst));
	weft_rmem_t *rdst[MAX_RANKS] = {0};
	weft_sem_t *sem[MAX_RANKS] = {0};
	weft_rsem_t *rsem[MAX_RANKS] = {0};
	weft_port_t *port[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(mdst, p, &rdst[p]));
		ROK(weft_sem_create(w.comm, &sem[p]));
		ROK(weft_sem_exchange(sem[p], p, &rsem[p]));
		if (arg->use_port)
			ROK(weft_port_create(w.conn[p], 0, &port[p]));
	}
	/* (a) flush, scribble, signal. */
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		unsigned char *s = src + slice * p;
		fill_pattern(s, 0, slice, 0xf1u ^ ((uint64_t)rank << 8) ^ (uint64_t)p);
		for (int c = 0; c < FL_OPS; c++) {
			uint64_t off = (uint64_t)c * FL_CHUNK + 1;
			if (arg->use_port)
				ROK(weft_port_put(port[p], rdst[p], slice * rank + off, msrc, slice * p + off, FL_CHUNK));
			else
				ROK(weft_put(w.conn[p], rdst[p], slice * rank + off, msrc, slice * p + off, FL_CHUNK));
		}
		if (arg->use_port)
			ROK(weft_port_flush(port[p]));
		else
			ROK(weft_flush(w.conn[p]));
		memset(s, 0xee, slice);
		if (arg->use_port)
			ROK(weft_port_signal(port[p], rsem[p], 1));
		else
			ROK(weft_signal(w.conn[p], rsem[p], 1));
	}
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_sem_wait(sem[p], 1));
		uint64_t pseed = 0xf1u ^ ((uint64_t)p << 8) ^ (uint64_t)rank;
		long long bad = check_pattern(dst + slice * p + 1, slice - 1, pseed, 1);
		RCHECK(bad < 0, "after flush, data from rank %d differs at byte %lld (source reused too early?)", p, bad);
	}
	ROK(weft_comm_barrier(w.comm));
	/* (b) flush, then tell the peer over the bootstrap only. */
	memset(dst, 0, slice * n);
	weft_port_t *keeper = NULL;
	if (!arg->use_port) /* something must progress this rank while it sits in weft_comm_recv */
		ROK(weft_port_create(w.conn[(rank + 1) % n], 0, &keeper));
	ROK(weft_comm_barrier(w.comm));
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		fill_pattern(src + slice * p, 0, slice, 0xb2u ^ ((uint64_t)rank << 8) ^ (uint64_t)p);
		for (int c = 0; c < FL_OPS; c++) {
			uint64_t off = (uint64_t)c * FL_CHUNK + 1;
			if (arg->use_port)
				ROK(weft_port_put(port[p], rdst[p], slice * rank + off, msrc, slice * p + off, FL_CHUNK));
			else
				ROK(weft_put(w.conn[p], rdst[p], slice * rank + off, msrc, slice * p + off, FL_CHUNK));
		}
		if (arg->use_port)
			ROK(weft_port_flush(port[p]));
		else
			ROK(weft_flush(w.conn[p]));
		uint32_t done = 1;
		ROK(weft_comm_send(w.comm, p, 7, &done, sizeof(done)));
	}
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		uint32_t done = 0;
		ROK(weft_comm_recv(w.comm, p, 7, &done, sizeof(done)));
		uint64_t pseed = 0xb2u ^ ((uint64_t)p << 8) ^ (uint64_t)rank;
		long long bad = check_pattern(dst + slice * p + 1, slice - 1, pseed, 1);
		RCHECK(bad < 0, "flush returned at rank %d but its data differs here at byte %lld", p, bad);
	}
	ROK(weft_comm_barrier(w.comm));
	ROK(weft_port_destroy(keeper));
	for (int p = 0; p < n; p++) {
		ROK(weft_port_destroy(port[p]));
		ROK(weft_rsem_release(rsem[p]));
		ROK(weft_sem_destroy(sem[p]));
		ROK(weft_rmem_release(rdst[p]));
	}
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	int rc = world_down(&w);
	free(src);
	free(dst);
	return rc;
}

START_TEST(flush_many_outstanding)
{
	struct ord_arg a = {.use_port = 0};
	run_ranks(g_nranks[_i], rank_flush, &a);
}
END_TEST

START_TEST(port_flush_many_outstanding)
{
	struct ord_arg a = {.use_port = 1};
	run_ranks(g_nranks[_i], rank_flush, &a);
}
END_TEST

/* ---------------------------------------------------------- bad input */
static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int rank_bad_args(int rank, int n, void *arg)
{
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	int peer = (rank + 1) % n, prev = (rank - 1 + n) % n;
	size_t len = 4096;
	unsigned char *buf = xalloc(len);
	RCHECK(buf, "out of memory");
	memset(buf, 0, len);
	weft_mem_t *mem;
	weft_rmem_t *rnext, *rprev;
	ROK(weft_mem_register(w.comm, buf, len, WEFT_MEM_HOST, &mem));
	/* Pairwise in a ring: send to next, receive from previous, in rank order. */
	if (rank % 2 == 0) {
		ROK(weft_mem_exchange(mem, peer, &rnext));
		ROK(n == 2 ? 0 : weft_mem_exchange(mem, prev, &rprev));
	} else {
		ROK(weft_mem_exchange(mem, prev, &rprev));
		ROK(n == 2 ? 0 : weft_mem_exchange(mem, peer, &rnext));
	}
	if (n == 2 && rank % 2 == 0)
		rprev = rnext;
	else if (n == 2)
		rnext = rprev;
	weft_conn_t *c = w.conn[peer];

	/* Memory registration and handles. */
	weft_mem_t *m2 = NULL;
	RCHECK(weft_mem_register(w.comm, NULL, 16, WEFT_MEM_HOST, &m2) == -EINVAL, "NULL ptr accepted");
	RCHECK(weft_mem_register(NULL, buf, 16, WEFT_MEM_HOST, &m2) == -EINVAL, "NULL comm accepted");
	RCHECK(weft_mem_register(w.comm, buf, 16, (enum weft_mem_type)42, &m2) == -EINVAL, "bad type accepted");
	RCHECK(weft_mem_register(w.comm, buf, 16, WEFT_MEM_HOST, NULL) == -EINVAL, "NULL out accepted");
	RCHECK(m2 == NULL, "out-parameter written on failure");

	/* Bounds of put: remote, local, overflowing offsets, NULL handles. */
	RCHECK(weft_put(c, rnext, len - 10, mem, 0, 11) == -EINVAL, "remote overrun accepted");
	RCHECK(weft_put(c, rnext, len + 1, mem, 0, 0) == -EINVAL, "remote offset past the end accepted");
	RCHECK(weft_put(c, rnext, 0, mem, len - 10, 11) == -EINVAL, "local overrun accepted");
	RCHECK(weft_put(c, rnext, UINT64_MAX, mem, 0, 16) == -EINVAL, "wrapping remote offset accepted");
	RCHECK(weft_put(c, rnext, 16, mem, UINT64_MAX - 8, 16) == -EINVAL, "wrapping local offset accepted");
	RCHECK(weft_put(c, rnext, 0, mem, 0, SIZE_MAX) == -EINVAL, "huge length accepted");
	RCHECK(weft_put(NULL, rnext, 0, mem, 0, 1) == -EINVAL, "NULL conn accepted");
	RCHECK(weft_put(c, NULL, 0, mem, 0, 1) == -EINVAL, "NULL dst accepted");
	RCHECK(weft_put(c, rnext, 0, NULL, 0, 1) == -EINVAL, "NULL src accepted");
	if (n > 2)
		RCHECK(weft_put(c, rprev, 0, mem, 0, 1) == -EINVAL, "region of another rank accepted on this conn");
	ROK(weft_put(c, rnext, len - 11, mem, 0, 11)); /* exactly to the end is fine */
	ROK(weft_flush(c));
	RCHECK(weft_flush(NULL) == -EINVAL, "flush(NULL) accepted");

	/* Semaphores: NULL, and tokens that do not grow. */
	weft_sem_t *sem;
	weft_rsem_t *rsem_next, *rsem_prev;
	ROK(weft_sem_create(w.comm, &sem));
	if (rank % 2 == 0) {
		ROK(weft_sem_exchange(sem, peer, &rsem_next));
		ROK(n == 2 ? 0 : weft_sem_exchange(sem, prev, &rsem_prev));
	} else {
		ROK(weft_sem_exchange(sem, prev, &rsem_prev));
		ROK(n == 2 ? 0 : weft_sem_exchange(sem, peer, &rsem_next));
	}
	if (n == 2 && rank % 2 == 0)
		rsem_prev = rsem_next;
	else if (n == 2)
		rsem_next = rsem_prev;
	RCHECK(weft_sem_wait(NULL, 1) == -EINVAL, "sem_wait(NULL) accepted");
	RCHECK(weft_signal(c, NULL, 1) == -EINVAL, "signal(NULL sem) accepted");
	RCHECK(weft_signal(NULL, rsem_next, 1) == -EINVAL, "signal(NULL conn) accepted");
	RCHECK(weft_signal(c, rsem_next, 0) == -EINVAL, "token 0 accepted");
	ROK(weft_signal(c, rsem_next, 5));
	RCHECK(weft_signal(c, rsem_next, 5) == -EINVAL, "repeated token accepted");
	RCHECK(weft_signal(c, rsem_next, 4) == -EINVAL, "smaller token accepted");
	ROK(weft_signal(c, rsem_next, 6));
	ROK(weft_sem_wait(sem, 6));
	RCHECK(weft_sem_value(sem) == 6, "token is %" PRIu64 ", expected 6", weft_sem_value(sem));
	/* The previous rank signals 7 below (port): not before every rank read 6. */
	ROK(weft_comm_barrier(w.comm));

	/* Connections: bad peers, unknown transport (both ranks of a pair call). */
	weft_conn_t *c2 = NULL;
	RCHECK(weft_connect(w.comm, rank, g_tp, &c2) == -EINVAL, "connect to self accepted");
	RCHECK(weft_connect(w.comm, n, g_tp, &c2) == -EINVAL, "connect to rank n accepted");
	RCHECK(weft_connect(w.comm, -1, g_tp, &c2) == -EINVAL, "connect to rank -1 accepted");
	RCHECK(weft_connect(NULL, peer, g_tp, &c2) == -EINVAL, "connect on NULL comm accepted");
	if (rank < 2) {
		int rc = weft_connect(w.comm, 1 - rank, "no-such-transport", &c2);
		RCHECK(rc == -WEFT_ERR_PLUGIN, "unknown transport: %d (%s)", rc, weft_strerror(rc));
	}
	RCHECK(c2 == NULL, "out-parameter written on failure");

	/* Ports. */
	weft_port_t *port;
	ROK(weft_port_create(c, 4, &port));
	RCHECK(weft_port_put(port, rnext, len - 10, mem, 0, 11) == -EINVAL, "port: remote overrun accepted");
	RCHECK(weft_port_put(port, rnext, 0, mem, UINT64_MAX, 1) == -EINVAL, "port: wrapping offset accepted");
	RCHECK(weft_port_put(NULL, rnext, 0, mem, 0, 1) == -EINVAL, "port: NULL port accepted");
	RCHECK(weft_port_signal(port, rsem_next, 6) == -EINVAL, "port: non-growing token accepted");
	RCHECK(weft_port_signal(port, NULL, 7) == -EINVAL, "port: NULL sem accepted");
	for (int i = 0; i < 20; i++) /* more than the depth: pushes wait for the proxy */
		ROK(weft_port_put(port, rnext, (uint64_t)i, mem, 0, 100));
	ROK(weft_port_signal(port, rsem_next, 7));
	ROK(weft_port_flush(port));
	ROK(weft_sem_wait(sem, 7));
	ROK(weft_port_destroy(port));
	RCHECK(weft_port_destroy(NULL) == 0, "port_destroy(NULL)");

	/* Malformed blobs: each is refused with -WEFT_ERR_PROTOCOL, never crashes.
	 * The blob is the previous rank's own, sent over the bootstrap. */
	size_t mylen = 0;
	ROK(weft_mem_serialize(mem, NULL, &mylen));
	RCHECK(mylen >= 32, "blob of %zu bytes", mylen);
	unsigned char *mine = malloc(mylen);
	RCHECK(mine, "out of memory");
	size_t small = 4;
	RCHECK(weft_mem_serialize(mem, mine, &small) == -ENOSPC && small == mylen, "ENOSPC rule");
	size_t mgot = mylen;
	ROK(weft_mem_serialize(mem, mine, &mgot));
	uint64_t l64 = mgot, p64 = 0;
	ROK(weft_comm_send(w.comm, peer, 11, &l64, sizeof(l64)));
	ROK(weft_comm_send(w.comm, peer, 11, mine, mgot));
	ROK(weft_comm_recv(w.comm, prev, 11, &p64, sizeof(p64)));
	RCHECK(p64 >= 32 && p64 < (1u << 20), "peer blob of %" PRIu64 " bytes", p64);
	size_t got = (size_t)p64;
	unsigned char *blob = malloc(got + 64), *bad = malloc(got + 64);
	RCHECK(blob && bad, "out of memory");
	ROK(weft_comm_recv(w.comm, prev, 11, blob, got));
	free(mine);
	weft_rmem_t *rm = NULL;
	ROK(weft_mem_import(w.comm, prev, blob, got, &rm)); /* the valid blob imports */
	ROK(weft_rmem_release(rm));
	rm = NULL;
	for (size_t cut = 0; cut < got; cut += (cut < 80 ? 1 : 13))
		RCHECK(weft_mem_import(w.comm, prev, blob, cut, &rm) == -WEFT_ERR_PROTOCOL, "truncated to %zu accepted",
		       cut);
	memcpy(bad, blob, got);
	bad[got] = 0;
	RCHECK(weft_mem_import(w.comm, prev, bad, got + 1, &rm) == -WEFT_ERR_PROTOCOL, "trailing byte accepted");
	memcpy(bad, blob, got);
	bad[0] ^= 0xff;
	RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL, "bad magic accepted");
	memcpy(bad, blob, got);
	bad[4] = 99;
	RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL, "unknown version accepted");
	memcpy(bad, blob, got);
	put_le32(bad + 24, 0xffffffffu);
	RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL, "huge section count accepted");
	uint32_t nsec = (uint32_t)blob[24] | (uint32_t)blob[25] << 8 | (uint32_t)blob[26] << 16 | (uint32_t)blob[27] << 24;
	memcpy(bad, blob, got);
	put_le32(bad + 24, nsec + 1);
	RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL, "missing section accepted");
	if (got > 32 + 40) {
		memcpy(bad, blob, got);
		put_le32(bad + 32 + 32, 0x7fffffffu); /* first section's length */
		RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL,
		       "section length past the end accepted");
		memcpy(bad, blob, got);
		memset(bad + 32, 'x', 32); /* unterminated transport name */
		RCHECK(weft_mem_import(w.comm, prev, bad, got, &rm) == -WEFT_ERR_PROTOCOL,
		       "unterminated section name accepted");
		/* The transport's own section, corrupted: its mem_import must refuse it.
		 * Sections: name[32], length u32, reserved u32, then the bytes. */
		size_t off = 32, sec = 0, slen = 0;
		for (uint32_t k = 0; k < nsec && off + 40 <= got; k++) {
			uint32_t l = (uint32_t)blob[off + 32] | (uint32_t)blob[off + 33] << 8 |
				     (uint32_t)blob[off + 34] << 16 | (uint32_t)blob[off + 35] << 24;
			if (strncmp((const char *)blob + off, g_tp, 32) == 0) {
				sec = off + 40;
				slen = l;
			}
			off += 40 + l;
		}
		RCHECK(sec > 0 && slen > 0, "the blob has no section for %s", g_tp);
		memcpy(bad, blob, got);
		for (size_t i = sec; i < sec + slen; i++)
			bad[i] ^= 0x5a;
		int rc = weft_mem_import(w.comm, prev, bad, got, &rm);
		RCHECK(rc != 0, "a corrupted %s section was accepted", g_tp);
	}
	RCHECK(rm == NULL, "out-parameter written on failure");
	RCHECK(weft_mem_import(w.comm, n + 3, blob, got, &rm) == -EINVAL, "bad peer accepted");
	RCHECK(weft_mem_import(w.comm, prev, NULL, 10, &rm) == -EINVAL, "NULL blob accepted");
	free(blob);
	free(bad);

	/* Releases accept NULL; the rest is left for weft_comm_destroy to clean up. */
	RCHECK(weft_mem_deregister(NULL) == 0 && weft_rmem_release(NULL) == 0 && weft_sem_destroy(NULL) == 0 &&
		       weft_rsem_release(NULL) == 0 && weft_conn_close(NULL) == 0 && weft_comm_destroy(NULL) == 0,
	       "a release refused NULL");
	RCHECK(weft_comm_abort(NULL) == -EINVAL, "abort(NULL)");
	RCHECK(weft_comm_status(w.comm) == 0, "comm broken by bad arguments: %d", weft_comm_status(w.comm));
	ROK(weft_comm_barrier(w.comm));
	ROK(weft_comm_destroy(w.comm)); /* with memory, semaphores and connections still alive */
	free(buf);
	return 0;
}

START_TEST(bad_arguments)
{
	run_ranks(g_nranks[_i], rank_bad_args, NULL);
}
END_TEST

/* -------------------------------------------------------- dead peer */
/* The last rank dies by SIGKILL while its put is in flight. Every survivor is
 * inside a wait (a semaphore the victim would raise) or a flush toward it, and
 * must get an error within the peer timeout plus slack; destroy then returns. */
#define KILL_LEN (16u << 20)

static int rank_killed(int rank, int n, void *arg)
{
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	int victim = n - 1;
	unsigned char *buf = xalloc(KILL_LEN);
	RCHECK(buf, "out of memory");
	memset(buf, rank, KILL_LEN);
	weft_mem_t *mem;
	ROK(weft_mem_register(w.comm, buf, KILL_LEN, WEFT_MEM_HOST, &mem));
	weft_rmem_t *r[MAX_RANKS] = {0};
	weft_sem_t *sem[MAX_RANKS] = {0};
	weft_rsem_t *rsem[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(mem, p, &r[p]));
		ROK(weft_sem_create(w.comm, &sem[p]));
		ROK(weft_sem_exchange(sem[p], p, &rsem[p]));
	}
	ROK(weft_comm_barrier(w.comm));
	if (rank == victim) {
		ROK(weft_put(w.conn[0], r[0], 0, mem, 0, KILL_LEN));
		usleep(200 * 1000);
		raise(SIGKILL);
		return 1;
	}
	double t0 = now_s();
	int rc;
	if (rank == 0 || rank % 2 == 1) {
		rc = weft_sem_wait(sem[victim], 1);
	} else {
		/* Puts and flushes toward the victim until one fails. */
		do {
			rc = weft_put(w.conn[victim], r[victim], 0, mem, 0, KILL_LEN);
			if (rc == 0)
				rc = weft_flush(w.conn[victim]);
		} while (rc == 0 && now_s() - t0 < 30);
	}
	double dt = now_s() - t0;
	RCHECK(rc < 0, "the wait on a dead peer returned %d", rc);
	RCHECK(dt < PEER_TIMEOUT_S + 8.0, "the error took %.1f s (peer timeout %d s)", dt, PEER_TIMEOUT_S);
	RCHECK(weft_comm_status(w.comm) != 0, "comm still healthy after a peer died");
	/* Later calls fail too, promptly. */
	RCHECK(weft_flush(w.conn[victim]) != 0, "flush toward a dead peer succeeded");
	RCHECK(weft_sem_wait(sem[victim], 1) != 0, "wait after the failure succeeded");
	printf("conformance: rank %d saw the dead peer after %.2f s: %s\n", rank, dt, weft_strerror(rc));
	double t1 = now_s();
	ROK(weft_comm_destroy(w.comm));
	dt = now_s() - t1;
	RCHECK(dt < PEER_TIMEOUT_S + 5.0, "weft_comm_destroy took %.1f s", dt);
	free(buf);
	return 0;
}

START_TEST(peer_killed_mid_transfer)
{
	int n = g_nranks[_i];
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int st[MAX_RANKS];
	ck_assert_int_eq(wt_fork_ranks_status(n, rank_killed, NULL, RANKS_TIMEOUT, st), 0);
	for (int r = 0; r < n - 1; r++)
		ck_assert_msg(st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == 0,
			      "survivor rank %d failed (status 0x%x)", r, st[r]);
	ck_assert_msg(st[n - 1] != -1 && WIFSIGNALED(st[n - 1]) && WTERMSIG(st[n - 1]) == SIGKILL,
		      "the victim did not die of SIGKILL (status 0x%x)", st[n - 1]);
}
END_TEST

/* ------------------------------------------------------------- abort */
struct abort_arg {
	weft_comm_t *comm;
	unsigned delay_us;
};

static void *abort_later(void *p)
{
	struct abort_arg *a = p;
	usleep(a->delay_us);
	weft_comm_abort(a->comm);
	return NULL;
}

/* Every rank blocks in weft_sem_wait on a token nobody raises; a second thread
 * aborts the comm (rank 0 first). The wait must return -WEFT_ERR_ABORTED
 * promptly (on other ranks, a peer's failure may be seen first). */
static int rank_abort(int rank, int n, void *arg)
{
	struct world w;
	if (world_up(rank, n, &w))
		return 1;
	weft_sem_t *sem;
	ROK(weft_sem_create(w.comm, &sem));
	ROK(weft_comm_barrier(w.comm));
	struct abort_arg a = {.comm = w.comm, .delay_us = rank == 0 ? 300000 : 600000};
	pthread_t t;
	RCHECK(pthread_create(&t, NULL, abort_later, &a) == 0, "pthread_create");
	double t0 = now_s();
	int rc = weft_sem_wait(sem, 1);
	double dt = now_s() - t0;
	pthread_join(t, NULL);
	if (rank == 0)
		RCHECK(rc == -WEFT_ERR_ABORTED, "sem_wait returned %d (%s), expected -WEFT_ERR_ABORTED", rc,
		       weft_strerror(rc));
	else
		RCHECK(rc == -WEFT_ERR_ABORTED || rc == -WEFT_ERR_PEER, "sem_wait returned %d (%s)", rc,
		       weft_strerror(rc));
	RCHECK(dt < 3.0, "the wait took %.1f s to return after abort", dt);
	RCHECK(weft_comm_status(w.comm) == rc, "status %d, wait returned %d", weft_comm_status(w.comm), rc);
	RCHECK(weft_flush(w.conn[(rank + 1) % n]) == rc, "flush after abort");
	RCHECK(weft_comm_barrier(w.comm) != 0, "barrier after abort succeeded");
	ROK(weft_comm_destroy(w.comm));
	return 0;
}

START_TEST(abort_unblocks_wait)
{
	run_ranks(g_nranks[_i], rank_abort, NULL);
}
END_TEST

/* ------------------------------------------------------------- main */
static int probe_rank(int rank, int n, void *arg)
{
	weft_comm_t *comm;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	if (rc != 0) {
		fprintf(stderr, "rank %d: weft_comm_create: %s\n", rank, weft_strerror(rc));
		return 1;
	}
	weft_conn_t *conn = NULL;
	rc = weft_connect(comm, 1 - rank, g_tp, &conn);
	weft_conn_close(conn);
	weft_comm_destroy(comm);
	if (rc == -WEFT_ERR_PLUGIN)
		return WT_SKIP;
	if (rc != 0)
		fprintf(stderr, "rank %d: weft_connect(%s): %s\n", rank, g_tp, weft_strerror(rc));
	return rc == 0 ? 0 : 1;
}

int main(void)
{
	/* Short failure detection, a pinned address; the caller may override them. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (t && *t)
		g_tp = t;
	const char *ns = getenv("WEFT_TEST_NRANKS");
	if (ns && *ns) {
		char *end;
		long v = strtol(ns, &end, 10);
		if (*end || v < 2 || v > MAX_RANKS) {
			fprintf(stderr, "WEFT_TEST_NRANKS='%s': give a rank count from 2 to %d\n", ns, MAX_RANKS);
			return 2;
		}
		g_nranks[0] = (int)v;
		g_nn = 1;
	}
	printf("conformance: transport '%s', ranks:", g_tp);
	for (int i = 0; i < g_nn; i++)
		printf(" %d", g_nranks[i]);
	printf("\n");

	/* Is the transport there at all? Two ranks try to connect through it. */
	if (weft_get_unique_id(&g_id) != 0) {
		fprintf(stderr, "conformance: weft_get_unique_id failed\n");
		return 1;
	}
	int st[2];
	if (wt_fork_ranks_status(2, probe_rank, NULL, 60, st) != 0)
		return 1;
	for (int r = 0; r < 2; r++) {
		if (st[r] != -1 && WIFEXITED(st[r]) && WEXITSTATUS(st[r]) == WT_SKIP) {
			printf("conformance: SKIP: transport '%s' is not loaded, or loaded but found no device to open "
			       "(weft-info lists what was found, what each transport sees, and why anything was "
			       "rejected)\n",
			       g_tp);
			return WT_SKIP;
		}
		if (st[r] == -1 || !WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0) {
			fprintf(stderr, "conformance: two ranks could not connect through '%s' (rank %d status 0x%x)\n",
				g_tp, r, st[r]);
			return 1;
		}
	}

	/* One case per test, so CK_RUN_CASE=<name> runs one of them. */
	Suite *s = suite_create("conformance");
	const struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{"put_sizes", put_sizes_all_peers},
		{"signal_ordering", signal_orders_puts},
		{"flush", flush_many_outstanding},
		{"port_ordering", port_put_signal_flush},
		{"port_flush", port_flush_many_outstanding},
		{"bad_arguments", bad_arguments},
		{"peer_killed", peer_killed_mid_transfer},
		{"abort", abort_unblocks_wait},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_loop_test(tc, cases[i].test, 0, g_nn);
		tcase_set_timeout(tc, RANKS_TIMEOUT + 20);
		suite_add_tcase(s, tc);
	}
	return wt_run_suite(s);
}
