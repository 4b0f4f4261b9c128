/* SPDX-License-Identifier: Apache-2.0 */
/* Transport conformance suite: forks real ranks that drive one transport
 * through the public API only (include/weft/weft.h), so it runs against any
 * transport plugin: connect, put of every size at odd offsets, signal
 * ordering, flush (also toward a target that is stopped, for remote
 * completion), port channels, bad arguments, a peer killed mid-transfer,
 * abort, and puts between CUDA buffers where a GPU is present.
 *
 * Two ways to run it:
 *  - with no arguments, as a Check suite (the tree's ctest entries):
 *    WEFT_TEST_TRANSPORT names the transport (default "ofi"), WEFT_TEST_NRANKS
 *    the rank count (default: 2, 3 and 4); exits 77 when the transport cannot
 *    connect two ranks here (not loaded, or no device to open);
 *  - as the check binary of tools/weft-plugin-check.c, one check per run:
 *      weft-conformance --list
 *      weft-conformance --run CHECK --np N --target TRANSPORT [--result FILE]
 *                       [--hosts 2 [--netns NS,ADDR,DEV --netns NS,ADDR,DEV]]
 *    --list prints "name<TAB>description" per check; --run exits 0 (pass),
 *    1 (fail), 3 (a rank died by a signal) or 77 (skip), and writes the
 *    one-line reason to FILE. --hosts 2 puts rank r on host r % 2, in the
 *    network namespaces --netns names, else by the test host identity
 *    (tools/keep_crashes.h); a transport that reaches no rank of the other
 *    host cannot run (77). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "keep_crashes.h"
#include "testlib.h"

#define MAX_RANKS 16
#define MAX_NP 8          /* rank counts one Check run covers */
#define RANKS_TIMEOUT 100 /* seconds for one forked run */
#define PEER_TIMEOUT_S 3  /* WEFT_CORE_PEER_TIMEOUT set below */

static const char *g_tp = "ofi";
static int g_nranks[MAX_NP] = {2, 3, 4};
static int g_nn = 3;
static struct weft_unique_id g_id;

/* A rank that fails says why on stderr (as testlib's RCHECK does) and also in
 * the run's shared page (kc_note), so the check's reason is the first failure. */
__attribute__((format(printf, 5, 6))) static void cf_note_fail(int rank, const char *file, int line,
							      const char *cond, const char *fmt, ...)
{
	char where[256];
	snprintf(where, sizeof(where), "%s:%d: (%s) ", file, line, cond);
	va_list ap;
	va_start(ap, fmt);
	kc_vnote(rank, 0, where, fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void cf_note_skip(int rank, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kc_vnote(rank, 1, "", fmt, ap);
	va_end(ap);
}

/* testlib's RCHECK, also recording the message for the check's reason. */
#undef RCHECK
#define RCHECK(cond, ...)                                                            \
	do {                                                                         \
		if (!(cond)) {                                                       \
			cf_note_fail(rank, __FILE__, __LINE__, #cond, __VA_ARGS__); \
			return 1;                                                    \
		}                                                                    \
	} while (0)

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

/* Whether the transport carries host memory at all (a GPU transport may
 * serve device memory alone): a one-byte put to each peer. The checks that
 * use host buffers skip (WT_SKIP) where it does not. */
static int host_memory_probe(struct world *w)
{
	int rank = w->rank, n = w->n, skip = 0, rc;
	unsigned char *buf = xalloc(64);
	RCHECK(buf, "out of memory");
	memset(buf, 0, 64);
	weft_mem_t *mem = NULL;
	weft_rmem_t *rmem[MAX_RANKS] = {0};
	rc = weft_mem_register(w->comm, buf, 64, WEFT_MEM_HOST, &mem);
	skip = rc == -ENOTSUP;
	RCHECK(rc == 0 || skip, "weft_mem_register of host memory returned %d (%s)", rc, weft_strerror(rc));
	for (int p = 0; p < n && !skip; p++)
		if (p != rank)
			ROK(weft_mem_exchange(mem, p, &rmem[p]));
	for (int p = 0; p < n && !skip; p++) {
		if (p == rank)
			continue;
		rc = weft_put(w->conn[p], rmem[p], (uint64_t)rank, mem, 0, 1);
		skip = rc == -ENOTSUP;
		RCHECK(rc == 0 || skip, "a 1-byte put of host memory to rank %d returned %d (%s)", p, rc,
		       weft_strerror(rc));
		if (rc == 0)
			ROK(weft_flush(w->conn[p]));
	}
	ROK(weft_comm_barrier(w->comm)); /* every put into buf is done before it goes */
	for (int p = 0; p < n; p++)
		ROK(weft_rmem_release(rmem[p]));
	ROK(weft_mem_deregister(mem));
	free(buf);
	if (skip) {
		cf_note_skip(rank, "'%s' does not carry host memory here (%s): the host-memory checks need it", g_tp,
			     weft_strerror(-ENOTSUP));
		weft_comm_destroy(w->comm);
		return WT_SKIP;
	}
	return 0;
}

/* Prints rank 0's connections' descriptions: to rank 1, and with two hosts
 * to rank 2 as well (rank 1 on the other host, rank 2 on this one). */
static void print_conn(int rank, int p, const char *desc)
{
	if (rank != 0 || (p != 1 && (p != 2 || kc_hosts() == 1)))
		return;
	if (kc_hosts() == 1)
		printf("conformance: %s connection: %s\n", g_tp, desc);
	else
		printf("conformance: %s connection to rank %d (%s host): %s\n", g_tp, p,
		       kc_host_of(p) == kc_host_of(rank) ? "this" : "the other", desc);
}

static int world_up(int rank, int n, struct world *w)
{
	memset(w, 0, sizeof(*w));
	w->rank = rank;
	w->n = n;
	ROK(weft_comm_create(&g_id, n, rank, &w->comm));
	RCHECK(weft_comm_rank(w->comm) == rank && weft_comm_size(w->comm) == n, "rank/size wrong");
	char hw[512];
	RCHECK(kc_hosts_verify(w->comm, hw, sizeof(hw)) == 0, "%s", hw);
	/* Every rank connects in increasing peer order: each pair meets. */
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_connect(w->comm, p, g_tp, &w->conn[p]));
		const char *t = weft_conn_transport(w->conn[p]);
		RCHECK(t && strcmp(t, g_tp) == 0, "connection to %d is carried by '%s', not '%s'", p, t ? t : "(null)",
		       g_tp);
		char desc[1024];
		int rc = weft_conn_describe(w->conn[p], desc, sizeof(desc));
		RCHECK(rc == 0 || rc == -ENOSYS, "weft_conn_describe returned %d", rc);
		if (rc == 0)
			print_conn(rank, p, desc);
	}
	return host_memory_probe(w);
}

static int world_down(struct world *w)
{
	int rank = w->rank;
	for (int p = 0; p < w->n; p++)
		ROK(weft_conn_close(w->conn[p]));
	ROK(weft_comm_destroy(w->comm));
	return 0;
}

/* ------------------------------------------------------- forking ranks */
/* Runs fn on n forked ranks (tools/keep_crashes.c), with a fresh id (and
 * bootstrap root) in this process, and judges them: the check's status, with
 * *res filled. victim is a rank expected to die of SIGKILL, or -1. */
static int cf_ranks_watched(int n, wt_rank_fn fn, void *arg, kc_watch_fn watch, void *warg, int victim,
			    struct kc_result *res)
{
	struct kc_run run = {.n = n,
			     .fn = fn,
			     .arg = arg,
			     .timeout_s = RANKS_TIMEOUT,
			     .watch = watch,
			     .warg = warg,
			     .victim = victim,
			     .id = &g_id};
	return kc_run_ranks(&run, res);
}

static int cf_ranks(int n, wt_rank_fn fn, void *arg, struct kc_result *res)
{
	return cf_ranks_watched(n, fn, arg, NULL, NULL, -1, res);
}

/* ------------------------------------------------------------ connect */
/* Every rank connects to every other through the transport. Errors that
 * mean "this transport cannot run here" are a skip: not loaded or no context
 * opened (no device), or no reach to a rank of another process or another
 * host. Such a refusal is noted and the rank goes on to its next peer, which
 * may still be waiting for it (a connect always meets its peer's), and all
 * meet at the barrier before the skip. */
static int rank_connect(int rank, int n, void *arg)
{
	weft_comm_t *comm;
	char hw[512];
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	RCHECK(kc_hosts_verify(comm, hw, sizeof(hw)) == 0, "%s", hw);
	weft_conn_t *conn[MAX_RANKS] = {0};
	int skip = 0;
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		int rc = weft_connect(comm, p, g_tp, &conn[p]);
		int other = kc_host_of(p) != kc_host_of(rank);
		const char *why = NULL;
		if (rc == -WEFT_ERR_PLUGIN)
			why = "the transport is not loaded here, or it opened no context (no device?)";
		else if (rc == -EHOSTUNREACH)
			why = other ? "it reaches no rank on another host"
				    : "it reaches no rank in another process of this host";
		else if (rc == -WEFT_ERR_NO_DEVICE || rc == -ENODEV)
			why = "no device of its kind here";
		if (why) {
			if (kc_hosts() > 1)
				cf_note_skip(
					rank,
					"weft_connect to rank %d (host %d; this rank on host %d) through '%s': %s: %s",
					p, kc_host_of(p), kc_host_of(rank), g_tp, weft_strerror(rc), why);
			else
				cf_note_skip(rank, "weft_connect to rank %d through '%s': %s: %s", p, g_tp,
					     weft_strerror(rc), why);
			skip = 1;
			continue;
		}
		RCHECK(rc == 0, "weft_connect to rank %d through '%s' returned %d (%s)", p, g_tp, rc, weft_strerror(rc));
		const char *t = weft_conn_transport(conn[p]);
		RCHECK(t && strcmp(t, g_tp) == 0, "connection to %d is carried by '%s', not '%s'", p, t ? t : "(null)",
		       g_tp);
		char desc[1024];
		rc = weft_conn_describe(conn[p], desc, sizeof(desc));
		RCHECK(rc == 0 || rc == -ENOSYS, "weft_conn_describe returned %d", rc);
		if (rc == 0)
			print_conn(rank, p, desc);
	}
	ROK(weft_comm_barrier(comm));
	for (int p = 0; p < n; p++)
		ROK(weft_conn_close(conn[p]));
	ROK(weft_comm_destroy(comm));
	return skip ? WT_SKIP : 0;
}

static int check_connect(int n, struct kc_result *res)
{
	return cf_ranks(n, rank_connect, NULL, res);
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
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_put_sizes(int n, struct kc_result *res)
{
	return cf_ranks(n, rank_put_sizes, NULL, res);
}

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
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_signal_ordering(int n, struct kc_result *res)
{
	struct ord_arg a = {.use_port = 0};
	return cf_ranks(n, rank_ordering, &a, res);
}

static int check_port_ordering(int n, struct kc_result *res)
{
	struct ord_arg a = {.use_port = 1};
	return cf_ranks(n, rank_ordering, &a, res);
}

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
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_flush(int n, struct kc_result *res)
{
	struct ord_arg a = {.use_port = 0};
	return cf_ranks(n, rank_flush, &a, res);
}

static int check_port_flush(int n, struct kc_result *res)
{
	struct ord_arg a = {.use_port = 1};
	return cf_ranks(n, rank_flush, &a, res);
}

/* ------------------------------------------- remote completion, target stopped
 * Whether weft_flush (or a port flush) returning 0 means the data is in the
 * target's memory, tested so that a transport that only handed the data to
 * its network fails every time. Each rank's target region lies in memory
 * shared with the checking process (MAP_SHARED, anonymous, mapped before the
 * fork), so the data is compared through that mapping, not by the target.
 * Round k: rank k puts to rank k+1 (mod n).
 *   1. The target primes its region, says ready and waits on a semaphore
 *      (weft_sem_wait progresses its transport while it waits).
 *   2. The origin posts the first batch of puts and says so.
 *   3. The checker stops the target (SIGSTOP), sees the stop (waitpid), and
 *      says so: the target now lands nothing by itself.
 *   4. The origin posts the second batch and flushes. The moment the flush
 *      returns 0 it compares both batches through the mapping: all must be
 *      there. A transport whose flush needs the target's progress keeps it
 *      from returning until the checker continues the target (SIGCONT),
 *      SF_STOP_S after the stop; then it must complete.
 *   5. The origin signals the target, which checks the data again and
 *      signals back; the checker starts the next round. */
#define SF_REGION ((size_t)2 << 20)
#define SF_CTL 4096
#define SF_STOP_S 1.0
#define SF_WAIT_S 30.0
#define SF_NA 16
#define SF_LEN_A 4099
static const size_t sf_len_b[] = {1, 8, 4093, 65536, 1048577};
#define SF_NB (sizeof(sf_len_b) / sizeof(sf_len_b[0]))
#define SF_NPUTS (SF_NA + SF_NB)

/* Flags in the shared page; each only grows, written by one side. */
struct sf_ctl {
	int round;       /* checker: the round the ranks may play; n when all are done */
	int stopped;     /* checker: k+1 once round k's target is stopped */
	int continued;   /* checker: k+1 just before round k's target is continued */
	int failed;      /* checker: it gave up; ranks stop waiting */
	int ready;       /* target: k+1 once its region is primed and it waits */
	int posted;      /* origin: k+1 once the first batch is posted */
	int flushed;     /* origin: k+1 once the flush returned */
	int origin_done; /* origin: k+1 once the target's answer came */
	int target_done; /* target: k+1 once it answered */
	double t_flushed; /* origin: when the flush returned (CLOCK_MONOTONIC) */
};

struct sf_arg {
	struct sf_ctl *ctl;
	unsigned char *regions; /* n * SF_REGION, after the page of flags */
	int use_port;
};

/* Where put i lands (and reads from): SF_NA before the stop, then SF_NB. */
static void sf_layout(uint64_t off[SF_NPUTS], size_t len[SF_NPUTS])
{
	uint64_t at = GUARD;
	for (size_t i = 0; i < SF_NPUTS; i++) {
		len[i] = i < SF_NA ? SF_LEN_A : sf_len_b[i - SF_NA];
		off[i] = at + 2 * (i % 4) + 1; /* odd offsets */
		at = (off[i] + len[i] + GUARD + 63) & ~(uint64_t)63;
	}
}

static uint64_t sf_seed(int k, int o)
{
	return 0x5f0000u ^ ((uint64_t)k << 8) ^ (uint64_t)o;
}

static int sf_get(const int *flag)
{
	return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}

static void sf_set(int *flag, int v)
{
	__atomic_store_n(flag, v, __ATOMIC_RELEASE);
}

/* Waits until *flag >= value: 0, or -ETIMEDOUT, or -ECANCELED when the
 * checker gave up. */
static int sf_wait(const int *flag, int value, const struct sf_ctl *ctl)
{
	double end = now_s() + SF_WAIT_S;
	while (sf_get(flag) < value) {
		if (sf_get(&ctl->failed))
			return -ECANCELED;
		if (now_s() > end)
			return -ETIMEDOUT;
		usleep(200);
	}
	return 0;
}

/* What the comparison found: bytes of the puts not (yet) at the target, the
 * first of them, and guard bytes written. */
struct sf_miss {
	size_t bytes, total, first_put, first_byte, guard_at;
	int guard_bad;
};

static void sf_compare(const unsigned char *region, uint64_t seed, struct sf_miss *m)
{
	uint64_t off[SF_NPUTS];
	size_t len[SF_NPUTS];
	sf_layout(off, len);
	memset(m, 0, sizeof(*m));
	uint64_t prev_end = 0;
	for (size_t i = 0; i < SF_NPUTS; i++) {
		for (uint64_t g = prev_end; g < off[i] && !m->guard_bad; g++)
			if (region[g] != 0xa5) {
				m->guard_bad = 1;
				m->guard_at = (size_t)g;
			}
		prev_end = off[i] + len[i];
		m->total += len[i];
		const unsigned char *p = region + off[i];
		long long at = check_pattern(p, len[i], seed, off[i]);
		if (at < 0)
			continue;
		if (m->bytes == 0) {
			m->first_put = i;
			m->first_byte = (size_t)at;
		}
		for (size_t b = (size_t)at; b < len[i]; b++)
			m->bytes += p[b] != pattern_byte(seed, off[i] + b);
	}
}

/* Posts puts [from, to) of the layout toward one peer. */
static int sf_put(int use_port, weft_conn_t *conn, weft_port_t *port, weft_rmem_t *dst, weft_mem_t *src,
		  size_t from, size_t to)
{
	uint64_t off[SF_NPUTS];
	size_t len[SF_NPUTS];
	sf_layout(off, len);
	int rc = 0;
	for (size_t i = from; i < to && rc == 0; i++)
		rc = use_port ? weft_port_put(port, dst, off[i], src, off[i], len[i])
			      : weft_put(conn, dst, off[i], src, off[i], len[i]);
	return rc;
}

/* Handles every rank needs for the rounds, toward each peer p: the peer's
 * region, a token the origin raises at the target and one back. */
struct sf_rank {
	struct world w;
	unsigned char *src;
	weft_mem_t *msrc, *mdst;
	weft_rmem_t *rdst[MAX_RANKS];
	weft_sem_t *tok[MAX_RANKS], *back[MAX_RANKS];
	weft_rsem_t *rtok[MAX_RANKS], *rback[MAX_RANKS];
	weft_port_t *port[MAX_RANKS];
};

static int sf_signal(const struct sf_arg *a, struct sf_rank *s, int p, weft_rsem_t *sem, uint64_t v)
{
	return a->use_port ? weft_port_signal(s->port[p], sem, v) : weft_signal(s->w.conn[p], sem, v);
}

static int sf_flush(const struct sf_arg *a, struct sf_rank *s, int p)
{
	return a->use_port ? weft_port_flush(s->port[p]) : weft_flush(s->w.conn[p]);
}

/* The origin's part of round k toward target t. */
static int sf_origin(int rank, int k, int t, const struct sf_arg *a, struct sf_rank *s)
{
	struct sf_ctl *ctl = a->ctl;
	const unsigned char *region = a->regions + (size_t)t * SF_REGION;
	uint64_t seed = sf_seed(k, rank);
	fill_pattern(s->src, 0, SF_REGION, seed);
	RCHECK(sf_wait(&ctl->ready, k + 1, ctl) == 0, "round %d: rank %d never got ready", k, t);
	ROK(sf_put(a->use_port, s->w.conn[t], s->port[t], s->rdst[t], s->msrc, 0, SF_NA));
	sf_set(&ctl->posted, k + 1);
	RCHECK(sf_wait(&ctl->stopped, k + 1, ctl) == 0, "round %d: the checker did not stop rank %d", k, t);
	ROK(sf_put(a->use_port, s->w.conn[t], s->port[t], s->rdst[t], s->msrc, SF_NA, SF_NPUTS));
	int frc = sf_flush(a, s, t);
	double tf = now_s();
	/* Read the flag before comparing: 0 means the target had not been
	 * continued when the flush returned, so it could not write since. */
	int cont = sf_get(&ctl->continued) >= k + 1;
	struct sf_miss m = {0};
	if (frc == 0)
		sf_compare(region, seed, &m);
	ctl->t_flushed = tf;
	sf_set(&ctl->flushed, k + 1);
	RCHECK(frc == 0, "round %d: %s toward rank %d returned %d (%s)", k, a->use_port ? "weft_port_flush" : "weft_flush",
	       t, frc, weft_strerror(frc));
	if (m.bytes > 0) {
		uint64_t off[SF_NPUTS];
		size_t len[SF_NPUTS];
		sf_layout(off, len);
		RCHECK(m.bytes == 0,
		       "%s returned 0 %s, but %zu of the %zu bytes put to rank %d were not in its memory (first: byte %zu "
		       "of the %zu-byte put at offset %" PRIu64 ", posted %s the stop)",
		       a->use_port ? "weft_port_flush" : "weft_flush",
		       cont ? "after the target was continued" : "while the target was stopped", m.bytes, m.total, t,
		       m.first_byte, len[m.first_put], off[m.first_put], m.first_put < SF_NA ? "before" : "after");
	}
	RCHECK(!m.guard_bad, "round %d: a put to rank %d wrote outside its bytes (at offset %zu)", k, t, m.guard_at);
	ROK(sf_signal(a, s, t, s->rtok[t], (uint64_t)k + 1));
	ROK(weft_sem_wait(s->back[t], (uint64_t)k + 1)); /* progresses this side until the answer */
	sf_set(&ctl->origin_done, k + 1);
	return 0;
}

/* The target's part of round k, puts coming from rank o. */
static int sf_target(int rank, int k, int o, const struct sf_arg *a, struct sf_rank *s)
{
	struct sf_ctl *ctl = a->ctl;
	unsigned char *region = a->regions + (size_t)rank * SF_REGION;
	memset(region, 0xa5, SF_REGION);
	sf_set(&ctl->ready, k + 1);
	ROK(weft_sem_wait(s->tok[o], (uint64_t)k + 1)); /* stopped and continued in here */
	struct sf_miss m;
	sf_compare(region, sf_seed(k, o), &m);
	RCHECK(m.bytes == 0 && !m.guard_bad, "round %d: the data from rank %d was not all there with its signal", k, o);
	ROK(sf_signal(a, s, o, s->rback[o], (uint64_t)k + 1));
	ROK(sf_flush(a, s, o)); /* nothing progresses this side after it */
	sf_set(&ctl->target_done, k + 1);
	return 0;
}

static int rank_stopped_flush(int rank, int n, void *argp)
{
	const struct sf_arg *a = argp;
	struct sf_ctl *ctl = a->ctl;
	struct sf_rank s;
	memset(&s, 0, sizeof(s));
	int wrc = world_up(rank, n, &s.w);
	if (wrc)
		return wrc;
	s.src = xalloc(SF_REGION);
	RCHECK(s.src, "out of memory");
	ROK(weft_mem_register(s.w.comm, s.src, SF_REGION, WEFT_MEM_HOST, &s.msrc));
	ROK(weft_mem_register(s.w.comm, a->regions + (size_t)rank * SF_REGION, SF_REGION, WEFT_MEM_HOST, &s.mdst));
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		ROK(weft_mem_exchange(s.mdst, p, &s.rdst[p]));
		ROK(weft_sem_create(s.w.comm, &s.tok[p]));
		ROK(weft_sem_create(s.w.comm, &s.back[p]));
		ROK(weft_sem_exchange(s.tok[p], p, &s.rtok[p]));
		ROK(weft_sem_exchange(s.back[p], p, &s.rback[p]));
		if (a->use_port)
			ROK(weft_port_create(s.w.conn[p], 0, &s.port[p]));
	}
	ROK(weft_comm_barrier(s.w.comm)); /* every rank registered and exchanged */
	for (int k = 0; k < n; k++) {
		int o = k, t = (k + 1) % n;
		RCHECK(sf_wait(&ctl->round, k, ctl) == 0, "round %d never started", k);
		if (rank == t && sf_target(rank, k, o, a, &s))
			return 1;
		if (rank == o && sf_origin(rank, k, t, a, &s))
			return 1;
	}
	RCHECK(sf_wait(&ctl->round, n, ctl) == 0, "the rounds never ended");
	ROK(weft_comm_barrier(s.w.comm));
	for (int p = 0; p < n; p++) {
		ROK(weft_port_destroy(s.port[p]));
		ROK(weft_rsem_release(s.rtok[p]));
		ROK(weft_rsem_release(s.rback[p]));
		ROK(weft_sem_destroy(s.tok[p]));
		ROK(weft_sem_destroy(s.back[p]));
		ROK(weft_rmem_release(s.rdst[p]));
	}
	ROK(weft_mem_deregister(s.msrc));
	ROK(weft_mem_deregister(s.mdst));
	int rc = world_down(&s.w);
	free(s.src);
	return rc;
}

/* The checker's side: one round at a time, stop, wait, continue. */
struct sf_watch {
	struct sf_ctl *ctl;
	const char *what;
	int k, phase;
	double t_phase, t_stop, t_cont;
};

static int sf_give_up(struct sf_watch *sw, struct kc_result *res, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int sf_give_up(struct sf_watch *sw, struct kc_result *res, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->reason, sizeof(res->reason), fmt, ap);
	va_end(ap);
	res->status = KC_FAIL;
	sf_set(&sw->ctl->failed, 1);
	return -1;
}

static int sf_watch_step(void *arg, int n, const pid_t *pids, int *stopped, struct kc_result *res)
{
	struct sf_watch *sw = arg;
	struct sf_ctl *ctl = sw->ctl;
	int k = sw->k, o = k, t = (k + 1) % n;
	double now = now_s();
	if (pids[o] <= 0 || pids[t] <= 0) {
		/* A rank of the round ended early: its status says why. */
		if (pids[t] > 0 && sw->phase >= 1 && sw->phase < 3)
			kill(pids[t], SIGCONT);
		sf_set(&ctl->failed, 1);
		return 1;
	}
	if (sw->phase > 0 && sw->phase < 3 && now - sw->t_phase > SF_WAIT_S) {
		kill(pids[t], SIGCONT);
		return sf_give_up(sw, res, "round %d: rank %d %s within %.0f s", k, t,
				  sw->phase == 1 ? "did not stop (SIGSTOP)" : "did not flush", SF_WAIT_S);
	}
	switch (sw->phase) {
	case 0: /* both ranks set for the round (their own waits are bounded): stop the target */
		if (sf_get(&ctl->ready) < k + 1 || sf_get(&ctl->posted) < k + 1)
			return 0;
		stopped[t] = 0;
		kill(pids[t], SIGSTOP);
		sw->phase = 1;
		sw->t_phase = now;
		return 0;
	case 1: /* the stop is seen by waitpid: let the origin flush */
		if (!stopped[t])
			return 0;
		sw->t_stop = now;
		sf_set(&ctl->stopped, k + 1);
		sw->phase = 2;
		sw->t_phase = now;
		return 0;
	case 2: /* flushed, or SF_STOP_S passed: continue the target */
		if (sf_get(&ctl->flushed) < k + 1 && now - sw->t_stop < SF_STOP_S)
			return 0;
		sf_set(&ctl->continued, k + 1); /* before the signal: see sf_origin */
		kill(pids[t], SIGCONT);
		sw->t_cont = now;
		sw->phase = 3;
		sw->t_phase = now;
		return 0;
	default: /* the round's answers */
		if (sf_get(&ctl->flushed) < k + 1) {
			if (now - sw->t_cont > SF_WAIT_S)
				return sf_give_up(sw, res,
						  "round %d: %s at rank %d did not return within %.0f s after rank %d was "
						  "continued",
						  k, sw->what, o, SF_WAIT_S, t);
			return 0;
		}
		if (sf_get(&ctl->origin_done) < k + 1 || sf_get(&ctl->target_done) < k + 1) {
			if (now - sw->t_phase > SF_WAIT_S)
				return sf_give_up(sw, res, "round %d: the signals between ranks %d and %d did not arrive "
						  "within %.0f s", k, o, t, SF_WAIT_S);
			return 0;
		}
		double tf = ctl->t_flushed;
		if (tf < sw->t_cont)
			printf("conformance: %s, round %d (rank %d to %d): returned %.3f s after the stop, the target "
			       "still stopped\n", sw->what, k, o, t, tf - sw->t_stop);
		else
			printf("conformance: %s, round %d (rank %d to %d): returned %.3f s after the target was "
			       "continued (it waited for the target's progress)\n", sw->what, k, o, t, tf - sw->t_cont);
		sw->k = ++k;
		sw->phase = 0;
		sw->t_phase = now;
		sf_set(&ctl->round, k);
		return k == n ? 1 : 0;
	}
}

static int check_stopped_flush(int n, int use_port, struct kc_result *res)
{
	size_t len = SF_CTL + (size_t)n * SF_REGION;
	void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED) {
		memset(res, 0, sizeof(*res));
		snprintf(res->reason, sizeof(res->reason), "mmap of %zu shared bytes: %s", len, strerror(errno));
		return res->status = KC_FAIL;
	}
	struct sf_arg a = {.ctl = map, .regions = (unsigned char *)map + SF_CTL, .use_port = use_port};
	/* Across simulated hosts the comparison still holds: they are
	 * processes of one machine, forked after the mapping was made. */
	if (kc_hosts() > 1)
		printf("conformance: the hosts are simulated on one machine, so the target's memory is still compared "
		       "through the mapping it shares with this process\n");
	struct sf_watch sw = {.ctl = map, .what = use_port ? "weft_port_flush" : "weft_flush", .t_phase = now_s()};
	/* A stopped target is silent on the bootstrap: keep the peer timeout
	 * well above the stop. */
	const char *pt = getenv("WEFT_CORE_PEER_TIMEOUT");
	char *saved = pt ? strdup(pt) : NULL;
	if (!pt || atof(pt) < 10)
		setenv("WEFT_CORE_PEER_TIMEOUT", "10", 1);
	int st = cf_ranks_watched(n, rank_stopped_flush, &a, sf_watch_step, &sw, -1, res);
	if (saved)
		setenv("WEFT_CORE_PEER_TIMEOUT", saved, 1);
	else
		unsetenv("WEFT_CORE_PEER_TIMEOUT");
	free(saved);
	munmap(map, len);
	return st;
}

static int check_flush_stopped(int n, struct kc_result *res)
{
	return check_stopped_flush(n, 0, res);
}

static int check_port_flush_stopped(int n, struct kc_result *res)
{
	return check_stopped_flush(n, 1, res);
}

/* ---------------------------------------------------------- bad input */
static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int rank_bad_args(int rank, int n, void *arg)
{
	struct world w;
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_bad_args(int n, struct kc_result *res)
{
	return cf_ranks(n, rank_bad_args, NULL, res);
}

/* -------------------------------------------------------- dead peer */
/* The last rank dies by SIGKILL while its put is in flight. Every survivor is
 * inside a wait (a semaphore the victim would raise) or a flush toward it, and
 * must get an error within the peer timeout plus slack; destroy then returns. */
#define KILL_LEN (16u << 20)

static int rank_killed(int rank, int n, void *arg)
{
	struct world w;
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_peer_killed(int n, struct kc_result *res)
{
	return cf_ranks_watched(n, rank_killed, NULL, NULL, NULL, n - 1, res);
}

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
	int wrc = world_up(rank, n, &w);
	if (wrc)
		return wrc;
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


static int check_abort(int n, struct kc_result *res)
{
	return cf_ranks(n, rank_abort, NULL, res);
}

/* --------------------------------------------------------- CUDA memory */
/* Puts between CUDA buffers, in a ring, checked byte by byte after a copy
 * back. The CUDA runtime is found at run time (each rank loads it: a process
 * that initialized CUDA cannot use it in its forked children). Without a
 * device the check skips, or fails under WEFT_REQUIRE_GPU=1. */
#define CU_LEN ((size_t)(1u << 20) + 3)
#define CU_H2D 1
#define CU_D2H 2

struct cu_rt {
	int (*device_count)(int *);
	int (*set_device)(int);
	int (*malloc_)(void **, size_t);
	int (*free_)(void *);
	int (*memcpy_)(void *, const void *, size_t, int);
	const char *(*error_string)(int);
};

/* 0, or -ENODEV with why filled (no runtime, or no device). */
static int cu_load(struct cu_rt *rt, int *ndev, char *why, size_t len)
{
	static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};
	void *h = NULL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(why, len, "no CUDA runtime (libcudart.so: %s)", dlerror());
		return -ENODEV;
	}
	struct {
		const char *sym;
		void **slot;
	} syms[] = {
		{"cudaGetDeviceCount", (void **)&rt->device_count}, {"cudaSetDevice", (void **)&rt->set_device},
		{"cudaMalloc", (void **)&rt->malloc_},              {"cudaFree", (void **)&rt->free_},
		{"cudaMemcpy", (void **)&rt->memcpy_},              {"cudaGetErrorString", (void **)&rt->error_string},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].sym);
		if (!f) {
			snprintf(why, len, "the CUDA runtime lacks %s", syms[i].sym);
			return -ENODEV;
		}
		memcpy(syms[i].slot, &f, sizeof(f));
	}
	int rc = rt->device_count(ndev);
	if (rc != 0 || *ndev < 1) {
		snprintf(why, len, "no CUDA device (cudaGetDeviceCount: %s)", rc ? rt->error_string(rc) : "0 devices");
		return -ENODEV;
	}
	return 0;
}

static int rank_cuda(int rank, int n, void *arg)
{
	struct cu_rt rt;
	char why[300];
	int ndev = 0;
	if (cu_load(&rt, &ndev, why, sizeof(why)) != 0) {
		const char *req = getenv("WEFT_REQUIRE_GPU");
		RCHECK(!(req && strcmp(req, "1") == 0), "WEFT_REQUIRE_GPU=1, but %s", why);
		cf_note_skip(rank, "%s", why);
		return WT_SKIP;
	}
	int cerr = rt.set_device(rank % ndev);
	RCHECK(cerr == 0, "cudaSetDevice(%d): %s", rank % ndev, rt.error_string(cerr));
	weft_comm_t *comm;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	int to = (rank + 1) % n, from = (rank - 1 + n) % n;
	weft_conn_t *conn[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		int rc = weft_connect_mem(comm, p, g_tp, WEFT_MEM_CUDA, &conn[p]);
		if (rc == -ENOTSUP || rc == -EHOSTUNREACH || rc == -WEFT_ERR_PLUGIN) {
			cf_note_skip(rank, "'%s' does not carry CUDA memory to rank %d here (weft_connect_mem: %s)", g_tp, p,
				     weft_strerror(rc));
			weft_comm_destroy(comm);
			return WT_SKIP;
		}
		RCHECK(rc == 0, "weft_connect_mem(CUDA) to rank %d returned %d (%s)", p, rc, weft_strerror(rc));
	}
	void *dsrc = NULL, *ddst = NULL;
	unsigned char *host = malloc(CU_LEN);
	RCHECK(host, "out of memory");
	cerr = rt.malloc_(&dsrc, CU_LEN);
	if (cerr == 0)
		cerr = rt.malloc_(&ddst, CU_LEN);
	RCHECK(cerr == 0, "cudaMalloc of %zu bytes: %s", CU_LEN, rt.error_string(cerr));
	uint64_t seed = 0xc0da0000u ^ (uint64_t)rank;
	fill_pattern(host, 0, CU_LEN, seed);
	cerr = rt.memcpy_(dsrc, host, CU_LEN, CU_H2D);
	memset(host, 0xa5, CU_LEN);
	if (cerr == 0)
		cerr = rt.memcpy_(ddst, host, CU_LEN, CU_H2D);
	RCHECK(cerr == 0, "cudaMemcpy to the device: %s", rt.error_string(cerr));
	weft_mem_t *msrc = NULL, *mdst = NULL;
	int rc = weft_mem_register(comm, dsrc, CU_LEN, WEFT_MEM_CUDA, &msrc);
	if (rc == -ENOTSUP) {
		cf_note_skip(rank, "no transport of the comm registers CUDA memory here (weft_mem_register: %s)",
			     weft_strerror(rc));
		weft_comm_destroy(comm);
		return WT_SKIP;
	}
	RCHECK(rc == 0, "weft_mem_register(CUDA) returned %d (%s)", rc, weft_strerror(rc));
	ROK(weft_mem_register(comm, ddst, CU_LEN, WEFT_MEM_CUDA, &mdst));
	weft_rmem_t *rdst[MAX_RANKS] = {0};
	for (int p = 0; p < n; p++)
		if (p != rank)
			ROK(weft_mem_exchange(mdst, p, &rdst[p]));
	ROK(weft_comm_barrier(comm));
	/* Flush, then say so over the bootstrap alone: a GPU transport's host
	 * semaphores may not be reachable, and the flush must suffice. */
	rc = weft_put(conn[to], rdst[to], 1, msrc, 1, CU_LEN - 2);
	if (rc == -ENOTSUP) {
		cf_note_skip(rank, "'%s' does not carry CUDA memory here (weft_put: %s)", g_tp, weft_strerror(rc));
		ROK(weft_comm_barrier(comm));
		weft_comm_destroy(comm);
		return WT_SKIP;
	}
	RCHECK(rc == 0, "weft_put of CUDA memory to rank %d returned %d (%s)", to, rc, weft_strerror(rc));
	ROK(weft_flush(conn[to]));
	uint32_t done = 1;
	ROK(weft_comm_send(comm, to, 21, &done, sizeof(done)));
	ROK(weft_comm_recv(comm, from, 21, &done, sizeof(done)));
	cerr = rt.memcpy_(host, ddst, CU_LEN, CU_D2H);
	RCHECK(cerr == 0, "cudaMemcpy from the device: %s", rt.error_string(cerr));
	long long bad = check_pattern(host + 1, CU_LEN - 2, 0xc0da0000u ^ (uint64_t)from, 1);
	RCHECK(bad < 0, "flush returned at rank %d, but its put of CUDA memory differs here at byte %lld", from, bad);
	RCHECK(host[0] == 0xa5 && host[CU_LEN - 1] == 0xa5, "the put of CUDA memory from rank %d wrote outside its bytes",
	       from);
	ROK(weft_comm_barrier(comm));
	for (int p = 0; p < n; p++) {
		ROK(weft_rmem_release(rdst[p]));
		ROK(weft_conn_close(conn[p]));
	}
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	ROK(weft_comm_destroy(comm));
	rt.free_(dsrc);
	rt.free_(ddst);
	free(host);
	return 0;
}

static int check_cuda(int n, struct kc_result *res)
{
	return cf_ranks(n, rank_cuda, NULL, res);
}

/* ------------------------------------------------------------ the checks */
struct cf_check {
	const char *name; /* what a result line names; weft-plugin-check --check matches it */
	const char *desc;
	int (*run)(int n, struct kc_result *res);
};

static const struct cf_check cf_checks[] = {
	{"connect", "every rank connects to every other through the transport, which carries the connection",
	 check_connect},
	{"put/sizes", "puts of 1 B to 64 MiB at odd offsets to every peer land exactly, the bytes around intact",
	 check_put_sizes},
	{"put/signal ordering", "256 puts in scrambled order then a signal: all are visible once its token is",
	 check_signal_ordering},
	{"put/flush outstanding",
	 "1024 unaligned puts, one flush: the source is reusable at once, and the data is at the target when "
	 "told over the bootstrap",
	 check_flush},
	{"put/flush remote completion",
	 "the target is stopped (SIGSTOP) around the puts; when weft_flush returns 0 the data must already be in "
	 "its memory, compared through a shared mapping; it is continued after 1 s",
	 check_flush_stopped},
	{"port/signal ordering", "as put/signal ordering, through port channels and their proxy", check_port_ordering},
	{"port/flush outstanding", "as put/flush outstanding, through port channels", check_port_flush},
	{"port/flush remote completion", "as put/flush remote completion, with weft_port_put and weft_port_flush",
	 check_port_flush_stopped},
	{"bad arguments",
	 "out-of-bounds puts, NULL handles, tokens that do not grow, malformed blobs: refused with the documented "
	 "code, the comm still healthy",
	 check_bad_args},
	{"peer killed", "a rank killed mid-transfer: every wait and flush toward it fails within the peer timeout",
	 check_peer_killed},
	{"abort", "weft_comm_abort unblocks a semaphore wait with -WEFT_ERR_ABORTED", check_abort},
	{"cuda/put", "puts between CUDA buffers where a GPU is present (skipped without one)", check_cuda},
};
#define CF_NCHECKS (sizeof(cf_checks) / sizeof(cf_checks[0]))

/* One Check test per check and rank count: _i is check * MAX_NP + count index. */
START_TEST(cf_case)
{
	const struct cf_check *c = &cf_checks[_i / MAX_NP];
	int n = g_nranks[_i % MAX_NP];
	struct kc_result r;
	int st = c->run(n, &r);
	if (st == KC_SKIP)
		printf("conformance: %s np=%d skipped: %s\n", c->name, n, r.reason);
	ck_assert_msg(st == KC_PASS || st == KC_SKIP, "%s np=%d: %s", c->name, n, r.reason);
}
END_TEST

static void setup_env(void)
{
	/* Short failure detection, a pinned address; the caller may override them. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
}

static int usage(void)
{
	fprintf(stderr, "usage: weft-conformance                        (Check suite: WEFT_TEST_TRANSPORT, "
			"WEFT_TEST_NRANKS)\n"
			"       weft-conformance --list\n"
			"       weft-conformance --run CHECK --np N --target TRANSPORT [--result FILE]\n"
			"                        [--hosts 2 [--netns NAMESPACE,ADDRESS,DEVICE (once per host)]]\n");
	return KC_USAGE;
}

/* --list and --run: the protocol tools/weft-plugin-check.c speaks. */
static int protocol_main(int argc, char **argv)
{
	const char *run = NULL, *target = NULL, *result = NULL;
	int np = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--list") == 0) {
			for (size_t k = 0; k < CF_NCHECKS; k++)
				printf("%s\t%s\n", cf_checks[k].name, cf_checks[k].desc);
			return 0;
		}
		if (i + 1 >= argc)
			return usage();
		int h = kc_hosts_arg(a, argv[i + 1]);
		if (h < 0)
			return usage();
		if (h == 0)
			i++;
		else if (strcmp(a, "--run") == 0)
			run = argv[++i];
		else if (strcmp(a, "--target") == 0)
			target = argv[++i];
		else if (strcmp(a, "--result") == 0)
			result = argv[++i];
		else if (strcmp(a, "--np") == 0)
			np = atoi(argv[++i]);
		else
			return usage();
	}
	if (!run || !target || np < 2 || np > MAX_RANKS || kc_hosts_ready() != 0)
		return usage();
	const struct cf_check *c = NULL;
	for (size_t k = 0; k < CF_NCHECKS && !c; k++)
		if (strcmp(cf_checks[k].name, run) == 0)
			c = &cf_checks[k];
	if (!c) {
		fprintf(stderr, "weft-conformance: no check named '%s' (--list names them)\n", run);
		return KC_USAGE;
	}
	g_tp = target;
	printf("conformance: %s, transport '%s', %d ranks%s%s\n", c->name, g_tp, np, kc_hosts() > 1 ? "; " : "",
	       kc_hosts_text());
	struct kc_result r;
	int st = c->run(np, &r);
	printf("conformance: %s np=%d: %s%s%s\n", c->name, np,
	       st == KC_PASS ? "passed" : st == KC_SKIP ? "skipped" : st == KC_CRASH ? "CRASHED" : "FAILED",
	       st == KC_PASS ? "" : ": ", st == KC_PASS ? "" : r.reason);
	if (result) {
		FILE *f = fopen(result, "w");
		if (f) {
			fprintf(f, "%s\n", st == KC_PASS ? "" : r.reason);
			fclose(f);
		}
	}
	return st;
}

int main(int argc, char **argv)
{
	setup_env();
	if (argc > 1)
		return protocol_main(argc, argv);
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

	/* Can the transport run here at all? Two ranks try to connect through it. */
	struct kc_result r;
	int st = check_connect(2, &r);
	if (st == KC_SKIP) {
		printf("conformance: SKIP: %s (weft-info lists what was found, what each transport sees, and why "
		       "anything was rejected)\n",
		       r.reason);
		return WT_SKIP;
	}
	if (st != KC_PASS) {
		fprintf(stderr, "conformance: two ranks could not connect through '%s': %s\n", g_tp, r.reason);
		return 1;
	}

	/* One case per check, so CK_RUN_CASE=<name> runs one of them. */
	Suite *s = suite_create("conformance");
	for (size_t k = 0; k < CF_NCHECKS; k++) {
		TCase *tc = tcase_create(cf_checks[k].name);
		tcase_add_loop_test(tc, cf_case, (int)k * MAX_NP, (int)k * MAX_NP + g_nn);
		tcase_set_timeout(tc, RANKS_TIMEOUT + 20);
		suite_add_tcase(s, tc);
	}
	return wt_run_suite(s);
}
