/* SPDX-License-Identifier: Apache-2.0 */
/* Algorithm-pack conformance checks: forks real ranks (shm and the other
 * transports of the search path) that drive one pack's algorithms through
 * the public API only. Each algorithm is forced by a generated config
 * (`[algorithm] require PACK/ALGO when coll=C`, put before the caller's own
 * file, WEFT_CONFIG pointing at it before the ranks fork) and called only
 * within the limits it declares (weft_info_algorithms: sizes, max_peer_bytes,
 * ranks, memory types, reductions); every result is compared with a
 * reference computed here, and weft_info_last_algorithm must name the forced
 * algorithm after every call.
 *
 * The check binary of tools/weft-plugin-check.c for algorithm packs, with
 * the protocol of tests/conformance.c:
 *   weft-pack-conformance --list [--target PACK]
 *   weft-pack-conformance --run CHECK --np N [--target PACK] [--result FILE] [-v]
 *                         [--hosts 2 [--netns NS,ADDR,DEV --netns NS,ADDR,DEV]]
 * --list prints "name<TAB>description" per check: first `declares` (the
 * gate: the pack loaded and its declarations are coherent), then for each
 * algorithm the pack declares:
 *   ALGO/dtypes-ops   every datatype (int8 .. fp8_e5m2) and every reduction
 *                     it declares (premul_sum through the *_premul calls),
 *                     in place and out of place, outputs and the bytes around
 *                     them poisoned, inputs seeded and small integers, so
 *                     that each result is exact in its type;
 *   ALGO/sizes        counts at its edges: min_bytes, max_bytes and
 *                     max_bytes x (ranks - 1) <= max_peer_bytes, each edge
 *                     and one element inside (and one element outside,
 *                     which the core must refuse), 0, and 1, 7, 4097 and a
 *                     count past 1 MiB where they fit (`bytes` as nccl-tests
 *                     counts it: the whole buffer of allgather,
 *                     reduce-scatter and alltoall; a batch's sum for
 *                     sendrecv);
 *   ALGO/groups       several calls in one group, nested too, give what
 *                     they give alone (sendrecv: also every pair at once);
 *   ALGO/abort        rank 0 calls weft_comm_abort from another thread while
 *                     inside a call (the last rank enters it only after):
 *                     that call returns -WEFT_ERR_ABORTED within 3 s, and so
 *                     does the next; on every other rank a call fails within
 *                     the peer timeout plus 8 s (calls that return 0 before
 *                     must be right: they needed nothing more from rank 0),
 *                     the comm is broken and destroy returns;
 *   ALGO/peer-killed  rank 1 dies by SIGKILL right before a large call: the
 *                     survivors as above;
 *   ALGO/mismatch     the last rank makes the call with another datatype of
 *                     the same size (send/recv: one more element): every
 *                     rank that waits on that rank's data (or is it) gets
 *                     -WEFT_ERR_MISMATCH from that call, every other rank
 *                     from it or a later one, within 3 s: the pack compares
 *                     the call's signature;
 *   ALGO/device       CUDA buffers on a stream, device scalars for
 *                     premul_sum (skipped without a GPU, and for algorithms
 *                     that declare no device memory).
 * The data checks use host memory where the algorithm declares it, else CUDA
 * memory without a stream (skipped without a GPU).
 * Without --target the pack is the one loaded from the first folder of the
 * search path (weft-plugin-check's private folder), when exactly one is.
 * --hosts 2 puts rank r on host r % 2 (tools/keep_crashes.h: the network
 * namespaces --netns names, else the test host identity), so the comm spans
 * hosts and the core joins them with a network transport (ofi, ucx); an
 * algorithm that refuses such a comm is a skip with its reason, as below.
 * --run runs one check at N ranks and exits 0 (pass), 1 (fail), 3 (a rank
 * died by a signal it was not meant to), 77 (skip: N outside the
 * algorithm's rank range, no memory type it declares is usable here, its
 * smallest call above the 64 MiB the checker makes, or it refused every call
 * the check made) or 2 (usage), and writes the one-line reason to FILE (an empty line on a pass).
 * The core's log goes to a file of the run, printed (its tail) only when the
 * check fails, since the abort and dead-peer checks log expected errors;
 * with -v it goes to stderr with every call the ranks make.
 * Environment: WEFT_CONFIG (kept, after the forced rule), WEFT_PLUGIN_PATH,
 * WEFT_PACK_CONFORMANCE_CATALOG (a file that keeps what the plugins declare
 * from one run to the next, for a loop of runs in one unchanged setup),
 * WEFT_CORE_PEER_TIMEOUT (3 unless set), WEFT_REQUIRE_GPU=1 (device checks
 * fail instead of skipping without a GPU), WEFT_LOG_LEVEL, WEFT_LOG_FILE,
 * TMPDIR. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "cudart_dl.h"
#include "keep_crashes.h"

#define MAX_RANKS 16
#define MAX_ALGOS 128
#define MAX_PACKS 32
#define RANKS_TIMEOUT 100   /* seconds for one forked run */
#define QUERY_TIMEOUT 60    /* seconds for the catalog query */
#define PEER_TIMEOUT_S 3    /* WEFT_CORE_PEER_TIMEOUT set below */
#define GUARD 64            /* poisoned bytes around every buffer */
#define CAP_BYTES (2u << 20) /* calls go up to this past the lower edge */
#define EDGE_CAP (64ull << 20) /* the largest lower edge the checker calls at */
#define LARGE_BYTES (1u << 20)
#define DT_COUNT 1031       /* elements of a dtypes-ops call, where it fits */
#define ABORT_AFTER_S 0.2   /* rank 0's abort, after it entered the call */
#define ABORT_BOUND_S 3.0
#define DEAD_BOUND_S (PEER_TIMEOUT_S + 8.0)
#define LOG_TAIL_LINES 40

enum { PK_PASS = KC_PASS, PK_FAIL = KC_FAIL, PK_USAGE = KC_USAGE, PK_CRASH = KC_CRASH, PK_SKIP = KC_SKIP };

/* --------------------------------------------------------- the catalog */
struct pk_algo {
	char pack[64], name[64];
	int coll;
	uint64_t min_bytes, max_bytes, max_peer_bytes;
	int min_ranks, max_ranks;
	unsigned mem_types, redops;
	int priority;
};

struct pk_pack {
	char name[64], path[512], reason[256];
	int state;
	unsigned abi_major, abi_minor;
};

/* What a child process read through weft/info.h, so that this process loads
 * nothing before it writes the config the ranks read. */
struct pk_catalog {
	int done, rc;
	char error[512];
	char first_dir[512];
	int npacks, n;
	struct pk_pack packs[MAX_PACKS];
	struct pk_algo a[MAX_ALGOS];
};

static struct pk_catalog *g_cat;
static const char *g_pack;      /* the pack under test */
static struct pk_algo g_algo;   /* the algorithm under test, in the ranks */
static char g_full[160];        /* "pack/algo", as weft_info_last_algorithm names it */
static int g_verbose;
static struct weft_unique_id g_id;
static char g_tmp[512];         /* the run's folder: config and log */
static char g_log[600];

static const char *const coll_names[WEFT_COLL_COUNT] = {"allreduce", "allgather", "reduce-scatter", "broadcast",
							 "reduce",    "alltoall",  "sendrecv"};

static int reducing(int coll)
{
	return coll == WEFT_COLL_ALLREDUCE || coll == WEFT_COLL_REDUCE_SCATTER || coll == WEFT_COLL_REDUCE;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void catalog_fill(struct pk_catalog *c)
{
	if ((c->rc = weft_info_load()) != 0) {
		const char *e = weft_info_load_error();
		snprintf(c->error, sizeof(c->error), "%s", e ? e : weft_strerror(c->rc));
		if (c->rc == -WEFT_ERR_CONFIG)
			return;
	}
	char *sp = weft_info_search_path();
	if (sp) {
		snprintf(c->first_dir, sizeof(c->first_dir), "%.*s", (int)strcspn(sp, ":"), sp);
		free(sp);
	}
	int np = weft_info_plugins(NULL, 0);
	struct weft_info_plugin *pl = np > 0 ? calloc((size_t)np, sizeof(*pl)) : NULL;
	if (pl)
		np = weft_info_plugins(pl, np);
	for (int i = 0; pl && i < np && c->npacks < MAX_PACKS; i++) {
		if (pl[i].kind != WEFT_PLUGIN_ALGO_PACK || !pl[i].name)
			continue;
		struct pk_pack *p = &c->packs[c->npacks++];
		snprintf(p->name, sizeof(p->name), "%s", pl[i].name);
		snprintf(p->path, sizeof(p->path), "%s", pl[i].path ? pl[i].path : "");
		snprintf(p->reason, sizeof(p->reason), "%s", pl[i].reason ? pl[i].reason : "");
		p->state = (int)pl[i].state;
		p->abi_major = pl[i].abi_major;
		p->abi_minor = pl[i].abi_minor;
	}
	free(pl);
	static struct weft_info_algo ia[MAX_ALGOS];
	int n = weft_info_algorithms(ia, MAX_ALGOS);
	if (n < 0) {
		c->rc = n;
		snprintf(c->error, sizeof(c->error), "weft_info_algorithms: %s", weft_strerror(n));
		return;
	}
	for (int i = 0; i < n && i < MAX_ALGOS; i++) {
		struct pk_algo *a = &c->a[c->n++];
		snprintf(a->pack, sizeof(a->pack), "%s", ia[i].pack ? ia[i].pack : "");
		snprintf(a->name, sizeof(a->name), "%s", ia[i].name ? ia[i].name : "");
		a->coll = ia[i].coll;
		a->min_bytes = ia[i].min_bytes;
		a->max_bytes = ia[i].max_bytes;
		a->max_peer_bytes = ia[i].max_peer_bytes;
		a->min_ranks = ia[i].min_ranks;
		a->max_ranks = ia[i].max_ranks;
		a->mem_types = ia[i].mem_types;
		a->redops = ia[i].redops;
		a->priority = ia[i].priority;
	}
}

#define CATALOG_MAGIC 0x706b63617431ull /* "pkcat1" */

/* WEFT_PACK_CONFORMANCE_CATALOG names a file that keeps the catalog from
 * one process to the next (pack_conformance.sh: one load for all its runs
 * instead of one per run). Read when it holds one of this build's layout. */
static int catalog_cached(const char *path)
{
	FILE *f = path && *path ? fopen(path, "rb") : NULL;
	uint64_t magic = 0, size = 0;
	int ok = f && fread(&magic, sizeof(magic), 1, f) == 1 && fread(&size, sizeof(size), 1, f) == 1 &&
		 magic == CATALOG_MAGIC && size == sizeof(*g_cat) && fread(g_cat, sizeof(*g_cat), 1, f) == 1;
	if (f)
		fclose(f);
	return ok;
}

static void catalog_keep(const char *path)
{
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "wb");
	uint64_t magic = CATALOG_MAGIC, size = sizeof(*g_cat);
	if (!f)
		return;
	int ok = fwrite(&magic, sizeof(magic), 1, f) == 1 && fwrite(&size, sizeof(size), 1, f) == 1 &&
		 fwrite(g_cat, sizeof(*g_cat), 1, f) == 1;
	if (fclose(f) == 0 && ok)
		rename(tmp, path);
	else
		unlink(tmp);
}

/* Reads the catalog in a child (or from WEFT_PACK_CONFORMANCE_CATALOG's
 * file). 0, or -1 with why. */
static int catalog_query(char *why, size_t len)
{
	g_cat = mmap(NULL, sizeof(*g_cat), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (g_cat == MAP_FAILED) {
		g_cat = NULL;
		snprintf(why, len, "mmap: %s", strerror(errno));
		return -1;
	}
	const char *cache = getenv("WEFT_PACK_CONFORMANCE_CATALOG");
	if (catalog_cached(cache))
		return 0;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		alarm(QUERY_TIMEOUT);
		catalog_fill(g_cat);
		__atomic_store_n(&g_cat->done, 1, __ATOMIC_RELEASE);
		_exit(0);
	}
	int st = 0;
	double t0 = now_s();
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_s() - t0 > QUERY_TIMEOUT + 5) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(2000);
	}
	if (!__atomic_load_n(&g_cat->done, __ATOMIC_ACQUIRE)) {
		snprintf(why, len, "loading the plugins %s (wait status 0x%x)",
			 WIFSIGNALED(st) ? "died by a signal" : "did not finish", st);
		return -1;
	}
	if (cache && *cache && g_cat->rc == 0)
		catalog_keep(cache);
	return 0;
}

static const struct pk_pack *find_pack(const char *name)
{
	for (int i = 0; i < g_cat->npacks; i++)
		if (strcmp(g_cat->packs[i].name, name) == 0 && g_cat->packs[i].state == WEFT_INFO_LOADED)
			return &g_cat->packs[i];
	for (int i = 0; i < g_cat->npacks; i++)
		if (strcmp(g_cat->packs[i].name, name) == 0)
			return &g_cat->packs[i];
	return NULL;
}

/* Without --target: the one pack loaded from the first folder of the path. */
static const char *default_pack(void)
{
	const char *found = NULL;
	size_t dl = strlen(g_cat->first_dir);
	for (int i = 0; i < g_cat->npacks; i++) {
		const struct pk_pack *p = &g_cat->packs[i];
		if (p->state != WEFT_INFO_LOADED || !dl || strncmp(p->path, g_cat->first_dir, dl) != 0 ||
		    p->path[dl] != '/' || strchr(p->path + dl + 1, '/'))
			continue;
		if (found)
			return NULL;
		found = p->name;
	}
	return found;
}

/* ------------------------------------------------------------ the checks */
struct pk_kind {
	const char *name;
	int (*rank_fn)(int rank, int n, void *arg);
	int victim; /* rank expected to die of SIGKILL, or -1 */
};

static void describe_kind(const struct pk_algo *a, const char *kind, char *buf, size_t len);

/* ------------------------------------------------------------ datatypes */
static const enum weft_datatype all_types[] = {WEFT_INT8,   WEFT_UINT8,    WEFT_INT32,   WEFT_UINT32,
					       WEFT_INT64,  WEFT_UINT64,   WEFT_FLOAT16, WEFT_BFLOAT16,
					       WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FP8_E4M3, WEFT_FP8_E5M2};
#define NTYPES (int)(sizeof(all_types) / sizeof(all_types[0]))

static int dt_signed(enum weft_datatype t)
{
	return t != WEFT_UINT8 && t != WEFT_UINT32 && t != WEFT_UINT64;
}

/* Every integer of magnitude up to this is exact in the type, so sums and
 * products kept within it are exact in any order. */
static int64_t dt_exact(enum weft_datatype t)
{
	switch (t) {
	case WEFT_INT8: return 127;
	case WEFT_UINT8: return 255;
	case WEFT_FLOAT16: return 2048;
	case WEFT_BFLOAT16: return 256;
	case WEFT_FP8_E4M3: return 16;
	case WEFT_FP8_E5M2: return 8;
	default: return 1 << 20;
	}
}

/* An integer of magnitude within dt_exact as a binary float of the layout. */
static uint64_t enc_fp(int64_t v, int ebits, int mbits, int bias)
{
	if (v == 0)
		return 0;
	uint64_t s = v < 0, a = (uint64_t)(v < 0 ? -v : v);
	int e = 63 - __builtin_clzll(a);
	uint64_t frac = a - (1ull << e);
	uint64_t m = e >= mbits ? frac >> (e - mbits) : frac << (mbits - e);
	return s << (ebits + mbits) | (uint64_t)(e + bias) << mbits | m;
}

static double dec_fp(uint64_t b, int ebits, int mbits, int bias)
{
	uint64_t m = b & ((1ull << mbits) - 1), e = (b >> mbits) & ((1ull << ebits) - 1);
	double f = (double)m / (double)(1ull << mbits);
	double v = e ? ldexp(1.0 + f, (int)e - bias) : ldexp(f, 1 - bias);
	return (b >> (ebits + mbits)) & 1 ? -v : v;
}

static void enc(enum weft_datatype t, int64_t v, unsigned char *o)
{
	uint64_t b = 0;
	float f;
	double d;
	switch (t) {
	case WEFT_FLOAT16: b = enc_fp(v, 5, 10, 15); break;
	case WEFT_BFLOAT16: b = enc_fp(v, 8, 7, 127); break;
	case WEFT_FP8_E4M3: b = enc_fp(v, 4, 3, 7); break;
	case WEFT_FP8_E5M2: b = enc_fp(v, 5, 2, 15); break;
	case WEFT_FLOAT32:
		f = (float)v;
		memcpy(o, &f, 4);
		return;
	case WEFT_FLOAT64:
		d = (double)v;
		memcpy(o, &d, 8);
		return;
	default: b = (uint64_t)v; break;
	}
	for (size_t i = 0; i < weft_datatype_size(t); i++)
		o[i] = (unsigned char)(b >> (8 * i));
}

/* One element as text: its bytes and its value. */
static void fmt_elem(enum weft_datatype t, const unsigned char *p, char *buf, size_t len)
{
	size_t es = weft_datatype_size(t);
	uint64_t b = 0;
	for (size_t i = 0; i < es; i++)
		b |= (uint64_t)p[i] << (8 * i);
	double v;
	float f;
	switch (t) {
	case WEFT_INT8: v = (int8_t)b; break;
	case WEFT_INT32: v = (int32_t)b; break;
	case WEFT_INT64: v = (double)(int64_t)b; break;
	case WEFT_FLOAT16: v = dec_fp(b, 5, 10, 15); break;
	case WEFT_BFLOAT16: v = dec_fp(b, 8, 7, 127); break;
	case WEFT_FP8_E4M3: v = dec_fp(b, 4, 3, 7); break;
	case WEFT_FP8_E5M2: v = dec_fp(b, 5, 2, 15); break;
	case WEFT_FLOAT32:
		memcpy(&f, p, 4);
		v = f;
		break;
	case WEFT_FLOAT64: memcpy(&v, p, 8); break;
	default: v = (double)b; break;
	}
	snprintf(buf, len, "%g (0x%0*" PRIx64 ")", v, (int)(2 * es), b);
}

/* ------------------------------------------------------- seeded values */
static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Position-addressable pseudo-random bytes: byte i of the stream of seed. */
static uint64_t pattern_word(uint64_t seed, uint64_t w)
{
	return mix64(seed ^ (w * 0x100000001b3ull));
}

static void pattern_fill(unsigned char *p, uint64_t seed, uint64_t off, size_t len)
{
	uint64_t cw = UINT64_MAX, w = 0;
	for (size_t i = 0; i < len; i++) {
		uint64_t pos = off + i;
		if ((pos >> 3) != cw) {
			cw = pos >> 3;
			w = pattern_word(seed, cw);
		}
		p[i] = (unsigned char)(w >> (8 * (pos & 7)));
	}
}

/* The draws of one element, one per rank in rank order: a mixed start,
 * then a linear congruential step per rank (cheap: every rank computes
 * every rank's values for its reference). */
struct draws {
	uint64_t h;
};

static void draws_start(struct draws *d, uint64_t seed, uint64_t j)
{
	d->h = mix64(seed + j * 0x9e3779b97f4a7c15ull);
}

static uint64_t draw_next(struct draws *d)
{
	d->h = d->h * 6364136223846793005ull + 1442695040888963407ull;
	return d->h >> 24;
}

static int64_t in_range(uint64_t d, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(d % (uint64_t)(hi - lo + 1));
}

/* The pre-multiplied sum's scalar of rank r. */
static int64_t premul_scalar(uint64_t seed, int r)
{
	return 1 + (int64_t)(((seed >> 7) + (uint64_t)r) % 3);
}

/* Element j of every rank's input of a reduction, kept so that every partial
 * result is an integer exact in t, in whatever order the algorithm combines
 * them: sums and pre-multiplied sums within a budget of magnitude, products
 * of 1s and 2s (and signs), averages of multiples of the rank count. */
static void gen_vals(uint64_t seed, uint64_t j, int n, enum weft_datatype t, int op, int64_t *v)
{
	int64_t m = dt_exact(t), lo;
	int sg = dt_signed(t);
	struct draws dr;
	draws_start(&dr, seed, j);
	if (op == WEFT_PROD) {
		int k = 63 - __builtin_clzll((uint64_t)m);
		for (int r = 0; r < n; r++) {
			uint64_t d = draw_next(&dr);
			int64_t f = k > 0 && (d & 1) ? 2 : 1;
			k -= f == 2;
			v[r] = sg && (d & 2) ? -f : f;
		}
	} else if (op == WEFT_MIN || op == WEFT_MAX) {
		int64_t rr = m < 1000 ? m : 1000;
		for (int r = 0; r < n; r++)
			v[r] = in_range(draw_next(&dr), sg ? -rr : 0, rr);
	} else if (op == WEFT_AVG) {
		int64_t b = m / n, cap = b / n > 1 ? b / n : 1;
		for (int r = 0; r < n; r++) {
			int64_t lim = cap < b ? cap : b;
			int64_t y = in_range(draw_next(&dr), sg ? -lim : 0, lim);
			b -= y < 0 ? -y : y;
			v[r] = y * n;
		}
	} else {
		int64_t b = m, cap = m / n > 1 ? m / n : 1;
		for (int r = 0; r < n; r++) {
			int64_t s = op == WEFT_PREMUL_SUM ? premul_scalar(seed, r) : 1;
			int64_t lim = (cap < b ? cap : b) / s;
			lo = sg ? -lim : 0;
			int64_t x = in_range(draw_next(&dr), lo, lim);
			b -= (x < 0 ? -x : x) * s;
			v[r] = x;
		}
	}
}

static int64_t ref_reduce(uint64_t seed, int op, const int64_t *v, int n)
{
	int64_t acc = op == WEFT_PROD ? 1 : 0;
	for (int r = 0; r < n; r++) {
		switch (op) {
		case WEFT_PROD: acc *= v[r]; break;
		case WEFT_MIN: acc = r == 0 || v[r] < acc ? v[r] : acc; break;
		case WEFT_MAX: acc = r == 0 || v[r] > acc ? v[r] : acc; break;
		case WEFT_PREMUL_SUM: acc += v[r] * premul_scalar(seed, r); break;
		default: acc += v[r]; break;
		}
	}
	return op == WEFT_AVG ? acc / n : acc;
}

/* A rank that fails says why on stderr and in the run's shared page
 * (kc_note, tools/keep_crashes.h), so the check's reason is the first failure. */
__attribute__((format(printf, 2, 3))) static void note_fail(int rank, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kc_vnote(rank, 0, "", fmt, ap);
	va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void note_skip(int rank, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	kc_vnote(rank, 1, "", fmt, ap);
	va_end(ap);
}

/* In a rank body (anything with an int `rank` in scope that returns int). */
#define RCHECK(cond, ...)                             \
	do {                                          \
		if (!(cond)) {                        \
			note_fail(rank, __VA_ARGS__); \
			return 1;                     \
		}                                     \
	} while (0)
/* Where the algorithm refused every call the check tried (its supports op
 * may refuse what it cannot do here, a topology say), nothing of it could
 * be checked: a skip that says so, not a pass. */
#define RSKIP_NONE(cond, R, ...)                                 \
	do {                                                     \
		if (!(cond)) {                                   \
			note_skip(rank, __VA_ARGS__);            \
			weft_comm_destroy((R)->comm);            \
			return PK_SKIP;                          \
		}                                                \
	} while (0)
#define ROK(call)                                                                        \
	do {                                                                             \
		int rc_ = (call);                                                        \
		RCHECK(rc_ == 0, "%s returned %d (%s)", #call, rc_, weft_strerror(rc_)); \
	} while (0)

/* --------------------------------------------------------- a rank's view */
struct rk {
	int rank, n;
	weft_comm_t *comm;
	enum weft_mem_type mem;
	struct cudart_dl cu;
	void *stream; /* device check: calls go on it */
};

static enum weft_mem_type g_mem; /* memory the check's buffers are in */

static int rk_up(struct rk *R, int rank, int n)
{
	memset(R, 0, sizeof(*R));
	R->rank = rank;
	R->n = n;
	R->mem = g_mem;
	if (R->mem == WEFT_MEM_CUDA) {
		const char *why = "";
		int ndev = 0;
		if (cudart_dl_load(&R->cu, &why) != 0) {
			const char *req = getenv("WEFT_REQUIRE_GPU");
			RCHECK(!(req && strcmp(req, "1") == 0), "WEFT_REQUIRE_GPU=1, but %s", why);
			note_skip(rank, "%s is checked in CUDA memory here, and there is no usable GPU: %s", g_full, why);
			return PK_SKIP;
		}
		RCHECK(R->cu.device_count(&ndev) == 0 && ndev > 0, "cudaGetDeviceCount");
		int cerr = R->cu.set_device(rank % ndev);
		RCHECK(cerr == 0, "cudaSetDevice(%d): %s", rank % ndev, R->cu.error_string(cerr));
	}
	ROK(weft_comm_create(&g_id, n, rank, &R->comm));
	char hw[512];
	RCHECK(kc_hosts_verify(R->comm, hw, sizeof(hw)) == 0, "%s", hw);
	return 0;
}

static void *rk_alloc(struct rk *R, size_t len)
{
	void *p = NULL;
	if (R->mem == WEFT_MEM_CUDA)
		return R->cu.malloc_(&p, len ? len : 1) == 0 ? p : NULL;
	return posix_memalign(&p, 4096, len ? len : 1) == 0 ? p : NULL;
}

static void rk_free(struct rk *R, void *p)
{
	if (p && R->mem == WEFT_MEM_CUDA)
		R->cu.free_(p);
	else
		free(p);
}

/* Copies between the host and the check's memory. 0 or the runtime's error. */
static int rk_copy(struct rk *R, void *dst, const void *src, size_t len, int to_dev)
{
	if (R->mem == WEFT_MEM_CUDA)
		return R->cu.memcpy_(dst, src, len, to_dev ? CUDART_H2D : CUDART_D2H);
	memcpy(dst, src, len);
	return 0;
}

/* ---------------------------------------------------------- one call */
struct pk_call {
	enum weft_datatype dt;
	int op; /* enum weft_redop; -1 for collectives that do not reduce */
	int inplace;
	size_t count;
	int root;
	uint64_t seed;
	int dev_scalar; /* premul_sum: the scalar in device memory */
};

/* A prepared call: its buffers in one region, [guard][send][guard][recv][guard]
 * (in place: [guard][buffer][guard]), and the host image they started from. */
struct pk_op {
	struct pk_call c;
	size_t es, in_n, out_n, len, in_off, out_off;
	unsigned char *img, *back;
	void *region;
	unsigned char scalar[8];
	void *dscalar;
};

/* Elements per count: bytes = count x size x this (nccl-tests' convention). */
static size_t coll_unit(int coll, int n)
{
	switch (coll) {
	case WEFT_COLL_ALLGATHER:
	case WEFT_COLL_REDUCE_SCATTER:
	case WEFT_COLL_ALLTOALL: return (size_t)n;
	case WEFT_COLL_SENDRECV: return 2; /* the batch: one send and one receive */
	default: return 1;
	}
}

static size_t align64(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

static void describe_call(const struct pk_call *c, int n, char *buf, size_t len)
{
	int k = snprintf(buf, len, "%s %s%s%s %s, %zu element%s", coll_names[g_algo.coll], weft_datatype_name(c->dt),
			 c->op >= 0 ? " " : "", c->op >= 0 ? weft_redop_name((enum weft_redop)c->op) : "",
			 c->inplace ? "in place" : "out of place", c->count, c->count == 1 ? "" : "s");
	if (k > 0 && (size_t)k < len && (g_algo.coll == WEFT_COLL_BROADCAST || g_algo.coll == WEFT_COLL_REDUCE))
		k += snprintf(buf + k, len - (size_t)k, ", root %d", c->root);
	if (k > 0 && (size_t)k < len && c->dev_scalar)
		snprintf(buf + k, len - (size_t)k, ", device scalar");
	(void)n;
}

/* Bytes of element j of rank r's input. */
static void input_elem(const struct pk_op *o, int n, int r, size_t j, unsigned char *e)
{
	if (o->c.op < 0) {
		pattern_fill(e, o->c.seed ^ mix64((uint64_t)r + 1), j * o->es, o->es);
		return;
	}
	int64_t v[MAX_RANKS];
	gen_vals(o->c.seed, j, n, o->c.dt, o->c.op, v);
	enc(o->c.dt, v[r], e);
}

/* Bytes of element k of this rank's output. */
static void output_elem(const struct pk_op *o, int me, int n, size_t k, unsigned char *e)
{
	size_t c = o->c.count;
	int64_t v[MAX_RANKS];
	switch (g_algo.coll) {
	case WEFT_COLL_ALLGATHER: input_elem(o, n, (int)(k / c), k % c, e); return;
	case WEFT_COLL_BROADCAST: input_elem(o, n, o->c.root, k, e); return;
	case WEFT_COLL_ALLTOALL: input_elem(o, n, (int)(k / c), (size_t)me * c + k % c, e); return;
	case WEFT_COLL_SENDRECV: input_elem(o, n, (me - 1 + n) % n, k, e); return;
	case WEFT_COLL_REDUCE_SCATTER: k += (size_t)me * c; break;
	default: break;
	}
	gen_vals(o->c.seed, k, n, o->c.dt, o->c.op, v);
	enc(o->c.dt, ref_reduce(o->c.seed, o->c.op, v, n), e);
}

static void op_free(struct rk *R, struct pk_op *o)
{
	free(o->img);
	free(o->back);
	rk_free(R, o->region);
	rk_free(R, o->dscalar);
	memset(o, 0, sizeof(*o));
}

/* Lays out, poisons and fills the call's buffers. 0, or 1 (noted). */
static int op_prepare(struct rk *R, const struct pk_call *c, struct pk_op *o)
{
	int rank = R->rank, n = R->n, coll = g_algo.coll;
	memset(o, 0, sizeof(*o));
	o->c = *c;
	o->es = weft_datatype_size(c->dt);
	size_t u = coll == WEFT_COLL_SENDRECV ? 1 : (size_t)n;
	o->in_n = coll == WEFT_COLL_REDUCE_SCATTER || coll == WEFT_COLL_ALLTOALL ? u * c->count : c->count;
	o->out_n = coll == WEFT_COLL_ALLGATHER || coll == WEFT_COLL_ALLTOALL ? u * c->count : c->count;
	size_t inb = o->in_n * o->es, outb = o->out_n * o->es;
	if (c->inplace) {
		size_t big = inb > outb ? inb : outb;
		o->len = GUARD + align64(big) + GUARD;
		o->in_off = o->out_off = GUARD;
		if (coll == WEFT_COLL_ALLGATHER)
			o->in_off += (size_t)rank * c->count * o->es;
		if (coll == WEFT_COLL_REDUCE_SCATTER)
			o->out_off += (size_t)rank * c->count * o->es;
	} else {
		o->in_off = GUARD;
		o->out_off = GUARD + align64(inb) + GUARD;
		o->len = o->out_off + align64(outb) + GUARD;
	}
	o->img = malloc(o->len);
	o->back = malloc(o->len);
	o->region = rk_alloc(R, o->len);
	RCHECK(o->img && o->back && o->region, "no memory for %zu bytes", o->len);
	pattern_fill(o->img, c->seed ^ 0xa5a5a5a5a5a5a5a5ull, 0, o->len);
	for (size_t j = 0; j < o->in_n; j++)
		input_elem(o, n, rank, j, o->img + o->in_off + j * o->es);
	int cerr = rk_copy(R, o->region, o->img, o->len, 1);
	RCHECK(cerr == 0, "cudaMemcpy to the device: %s", R->cu.error_string(cerr));
	if (c->op == WEFT_PREMUL_SUM) {
		enc(c->dt, premul_scalar(c->seed, rank), o->scalar);
		if (c->dev_scalar) {
			o->dscalar = rk_alloc(R, 8);
			RCHECK(o->dscalar, "no device memory for the scalar");
			cerr = rk_copy(R, o->dscalar, o->scalar, o->es, 1);
			RCHECK(cerr == 0, "cudaMemcpy of the scalar: %s", R->cu.error_string(cerr));
		}
	}
	return 0;
}

/* The public call the check makes; sendrecv is a ring in a group. */
static int op_issue(struct rk *R, struct pk_op *o)
{
	char *base = o->region;
	const void *s = base + o->in_off;
	void *d = base + o->out_off;
	const struct pk_call *c = &o->c;
	const void *sc = c->dev_scalar ? o->dscalar : (const void *)o->scalar;
	enum weft_mem_type sm = c->dev_scalar ? R->mem : WEFT_MEM_HOST;
	int premul = c->op == WEFT_PREMUL_SUM, rc, r1, r2;
	enum weft_redop op = c->op >= 0 ? (enum weft_redop)c->op : WEFT_SUM;
	weft_comm_t *comm = R->comm;
	switch (g_algo.coll) {
	case WEFT_COLL_ALLREDUCE:
		return premul ? weft_allreduce_premul(s, d, c->count, c->dt, sc, sm, comm, R->stream)
			      : weft_allreduce(s, d, c->count, c->dt, op, comm, R->stream);
	case WEFT_COLL_ALLGATHER: return weft_allgather(s, d, c->count, c->dt, comm, R->stream);
	case WEFT_COLL_REDUCE_SCATTER:
		return premul ? weft_reduce_scatter_premul(s, d, c->count, c->dt, sc, sm, comm, R->stream)
			      : weft_reduce_scatter(s, d, c->count, c->dt, op, comm, R->stream);
	case WEFT_COLL_BROADCAST: return weft_broadcast(s, d, c->count, c->dt, c->root, comm, R->stream);
	case WEFT_COLL_REDUCE:
		return premul ? weft_reduce_premul(s, d, c->count, c->dt, sc, sm, c->root, comm, R->stream)
			      : weft_reduce(s, d, c->count, c->dt, op, c->root, comm, R->stream);
	case WEFT_COLL_ALLTOALL: return weft_alltoall(s, d, c->count, c->dt, comm, R->stream);
	case WEFT_COLL_SENDRECV:
		if ((rc = weft_group_start()) != 0)
			return rc;
		r1 = weft_send(s, c->count, c->dt, (R->rank + 1) % R->n, comm, R->stream);
		r2 = weft_recv(d, c->count, c->dt, (R->rank - 1 + R->n) % R->n, comm, R->stream);
		rc = weft_group_end();
		return r1 ? r1 : r2 ? r2 : rc;
	default: return -EINVAL;
	}
}

/* Reads the region back (after the stream, if any). 0, or 1 (noted). */
static int op_read_back(struct rk *R, struct pk_op *o)
{
	int rank = R->rank, cerr;
	if (R->stream) {
		cerr = R->cu.stream_sync(R->stream);
		RCHECK(cerr == 0, "cudaStreamSynchronize: %s", R->cu.error_string(cerr));
	}
	cerr = rk_copy(R, o->back, o->region, o->len, 0);
	RCHECK(cerr == 0, "cudaMemcpy from the device: %s", R->cu.error_string(cerr));
	return 0;
}

/* Whether the output of this rank is defined (reduce writes the root's only). */
static int output_defined(const struct pk_op *o, int rank)
{
	return g_algo.coll != WEFT_COLL_REDUCE || rank == o->c.root;
}

/* Compares the region read back with what the call must leave. 0, or 1. */
static int op_verify(struct rk *R, struct pk_op *o)
{
	int rank = R->rank, n = R->n;
	char what[200];
	describe_call(&o->c, n, what, sizeof(what));
	size_t ob = o->out_n * o->es, ib = o->in_n * o->es;
	int rs_inplace = o->c.inplace && g_algo.coll == WEFT_COLL_REDUCE_SCATTER;
	int out_def = output_defined(o, rank);
	size_t bad = 0, first = 0;
	unsigned char e[8];
	if (out_def)
		for (size_t k = 0; k < o->out_n; k++) {
			output_elem(o, rank, n, k, e);
			if (memcmp(o->back + o->out_off + k * o->es, e, o->es) != 0 && bad++ == 0)
				first = k;
		}
	if (bad) {
		char got[64], want[64];
		output_elem(o, rank, n, first, e);
		fmt_elem(o->c.dt, o->back + o->out_off + first * o->es, got, sizeof(got));
		fmt_elem(o->c.dt, e, want, sizeof(want));
		note_fail(rank, "%s: %zu of %zu output elements wrong; element %zu is %s, expected %s", what, bad,
			  o->out_n, first, got, want);
		return 1;
	}
	/* Everything else is as it was: guards, padding, the input out of place,
	 * a reduce's output off the root; an in-place reduce-scatter may use its
	 * whole buffer. */
	for (size_t i = 0; i < o->len; i++) {
		int in_out = out_def && i >= o->out_off && i < o->out_off + ob;
		int in_in = rs_inplace && i >= o->in_off && i < o->in_off + ib;
		if (in_out || in_in || o->back[i] == o->img[i])
			continue;
		const char *where = i >= o->in_off && i < o->in_off + ib
					    ? (o->c.inplace ? "the buffer, where it must stay as it was"
							    : "the input buffer (sendbuf is const)")
				    : i >= o->out_off && i < o->out_off + ob
					    ? "the output buffer of a non-root rank (reduce writes only the root's)"
					    : "the bytes around the buffers";
		note_fail(rank, "%s: byte %zd relative to recvbuf was written: it is in %s", what,
			  (ssize_t)i - (ssize_t)o->out_off, where);
		return 1;
	}
	return 0;
}

static int check_served_by(struct rk *R, const char *what)
{
	int rank = R->rank;
	const char *la = weft_info_last_algorithm(R->comm);
	RCHECK(la && strcmp(la, g_full) == 0, "%s was served by %s, not by the forced %s", what,
	       la ? la : "no algorithm", g_full);
	return 0;
}

/* Runs one call alone: 0 served and right, 2 refused (-ENOTSUP), 1 failed. */
static int run_call(struct rk *R, const struct pk_call *c)
{
	int rank = R->rank;
	struct pk_op o;
	char what[200];
	describe_call(c, R->n, what, sizeof(what));
	if (op_prepare(R, c, &o) != 0) {
		op_free(R, &o);
		return 1;
	}
	double t0 = now_s();
	int rc = op_issue(R, &o);
	double t1 = now_s();
	int res = rc == -ENOTSUP ? 2 : 0;
	if (rc != 0 && rc != -ENOTSUP) {
		note_fail(rank, "%s returned %d (%s)", what, rc, weft_strerror(rc));
		res = 1;
	}
	if (rc == 0 && c->count > 0)
		res = check_served_by(R, what);
	if (res != 1 && op_read_back(R, &o) != 0)
		res = 1;
	if (rc == 0 && res == 0) {
		res = op_verify(R, &o);
	} else if (res == 2 || (rc == 0 && c->count == 0)) {
		/* A refused or empty call leaves every byte as it was. */
		for (size_t i = 0; i < o.len && res != 1; i++)
			if (o.back[i] != o.img[i]) {
				note_fail(rank, "%s returned %s, yet wrote byte %zd relative to recvbuf", what,
					  weft_strerror(rc), (ssize_t)i - (ssize_t)o.out_off);
				res = 1;
			}
	}
	if (g_verbose && rank == 0)
		printf("  %s: %s (call %.3f s, check %.3f s)\n", what, rc == 0 ? "ok" : weft_strerror(rc), t1 - t0,
		       now_s() - t1);
	op_free(R, &o);
	return res;
}

/* ------------------------------------------------------- size limits */
/* Counts of type t whose calls fit the algorithm's limits at n ranks:
 * [*lo, *hi], hi capped at CAP_BYTES past the lower edge (*hi_edge says
 * whether hi is the algorithm's own edge). 0, or -1 when none fits, or the
 * lower edge is above EDGE_CAP. */
static int fit_counts(enum weft_datatype t, int n, size_t *lo, size_t *hi, int *hi_edge)
{
	uint64_t per = weft_datatype_size(t) * coll_unit(g_algo.coll, n);
	uint64_t maxb = UINT64_MAX;
	if (g_algo.max_bytes)
		maxb = g_algo.max_bytes;
	if (g_algo.max_peer_bytes && n > 1 && g_algo.max_peer_bytes / (uint64_t)(n - 1) < maxb)
		maxb = g_algo.max_peer_bytes / (uint64_t)(n - 1);
	uint64_t cmin = (g_algo.min_bytes + per - 1) / per;
	if (cmin == 0)
		cmin = 1;
	uint64_t cap = cmin * per + CAP_BYTES;
	uint64_t cmax = (maxb < cap ? maxb : cap) / per;
	*hi_edge = maxb <= cap;
	if (cmin > cmax || cmin * per > EDGE_CAP)
		return -1;
	*lo = (size_t)cmin;
	*hi = (size_t)cmax;
	return 0;
}

static size_t clamp_count(size_t want, size_t lo, size_t hi)
{
	return want < lo ? lo : want > hi ? hi : want;
}

/* The reduction a data check uses: sum where declared, else the first. */
static int plain_op(void)
{
	if (!reducing(g_algo.coll))
		return -1;
	if (g_algo.redops & (1u << WEFT_SUM))
		return WEFT_SUM;
	for (int op = 0; op < WEFT_REDOP_COUNT; op++)
		if (g_algo.redops & (1u << op))
			return op;
	return WEFT_SUM;
}

/* A type the algorithm serves, tried in this order with a call of about
 * want_bytes; fills *c (its seed and placement are the caller's). 0, 1
 * (failed), or PK_SKIP (every type refused; the comm is destroyed). */
static int pick_served(struct rk *R, size_t want_bytes, struct pk_call *c)
{
	static const enum weft_datatype order[] = {WEFT_FLOAT32,  WEFT_INT32,   WEFT_FLOAT64,  WEFT_INT64,
						   WEFT_FLOAT16,  WEFT_BFLOAT16, WEFT_INT8,     WEFT_UINT8,
						   WEFT_UINT32,   WEFT_UINT64,  WEFT_FP8_E4M3, WEFT_FP8_E5M2};
	int rank = R->rank;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		size_t lo, hi;
		int edge;
		if (fit_counts(order[i], R->n, &lo, &hi, &edge) != 0)
			continue;
		size_t per = weft_datatype_size(order[i]) * coll_unit(g_algo.coll, R->n);
		struct pk_call t = {.dt = order[i], .op = plain_op(), .count = clamp_count(want_bytes / per, lo, hi),
				    .seed = c->seed, .root = c->root};
		int res = run_call(R, &t);
		if (res == 1)
			return 1;
		if (res == 0) {
			*c = t;
			return 0;
		}
	}
	note_skip(rank, "%s refused every datatype (-ENOTSUP) at a size within its limits here", g_full);
	weft_comm_destroy(R->comm);
	return PK_SKIP;
}

/* ---------------------------------------------------------- dtypes-ops */
static int rank_dtypes(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	unsigned char refused[NTYPES * (WEFT_REDOP_COUNT + 1) * 2];
	memset(refused, 0, sizeof(refused));
	int served = 0, nref = 0, k = 0;
	char list[600] = "";
	size_t ll = 0;
	for (int ti = 0; ti < NTYPES; ti++) {
		enum weft_datatype t = all_types[ti];
		size_t lo, hi;
		int edge;
		if (fit_counts(t, n, &lo, &hi, &edge) != 0) {
			if (rank == 0)
				printf("pack-conformance: no count of %s fits %s's limits at %d ranks\n",
				       weft_datatype_name(t), g_full, n);
			continue;
		}
		for (int op = reducing(g_algo.coll) ? 0 : -1; op < (reducing(g_algo.coll) ? WEFT_REDOP_COUNT : 0); op++) {
			if (op >= 0 && !(g_algo.redops & (1u << op)))
				continue;
			for (int ip = 0; ip < 2; ip++, k++) {
				struct pk_call c = {.dt = t, .op = op, .inplace = ip, .count = clamp_count(DT_COUNT, lo, hi),
						    .root = k % n, .seed = mix64(0x7e57ull + (uint64_t)k)};
				int res = run_call(&R, &c);
				if (res == 1)
					return 1;
				served += res == 0;
				if (res == 2) {
					refused[(ti * (WEFT_REDOP_COUNT + 1) + op + 1) * 2 + ip] = 1;
					nref++;
					if (ll < sizeof(list) - 64)
						ll += (size_t)snprintf(list + ll, sizeof(list) - ll, "%s%s%s%s %s",
								       ll ? ", " : "", weft_datatype_name(t), op >= 0 ? " " : "",
								       op >= 0 ? weft_redop_name((enum weft_redop)op) : "",
								       ip ? "in place" : "out of place");
				}
			}
		}
	}
	/* Every rank refused the same calls (a refusal is the algorithm's
	 * supports op, asked on each rank alone). */
	unsigned char all[MAX_RANKS][sizeof(refused)];
	ROK(weft_comm_allgather(R.comm, refused, all, sizeof(refused)));
	for (int r = 0; r < n; r++)
		RCHECK(memcmp(all[r], refused, sizeof(refused)) == 0, "rank %d refused other calls than this rank (%s)", r,
		       nref ? list : "none");
	RSKIP_NONE(served > 0, &R, "%s refused every datatype and reduction here (-ENOTSUP)", g_full);
	if (rank == 0) {
		printf("pack-conformance: %s: %d calls served and right, %d refused (-ENOTSUP)%s%s\n", g_full, served, nref,
		       nref ? ": " : "", list);
		fflush(stdout);
	}
	ROK(weft_comm_destroy(R.comm));
	return 0;
}

/* --------------------------------------------------------------- sizes */
/* A call one element past an edge: the core must refuse it (-ENOTSUP, the
 * forced rule) and leave the buffers alone. */
static int run_outside(struct rk *R, struct pk_call *c, const char *edge)
{
	int rank = R->rank;
	struct pk_op o;
	char what[200];
	describe_call(c, R->n, what, sizeof(what));
	if (op_prepare(R, c, &o) != 0) {
		op_free(R, &o);
		return 1;
	}
	int rc = op_issue(R, &o);
	op_free(R, &o);
	RCHECK(rc == -ENOTSUP, "%s, one element past %s, returned %d (%s): the limit it declares is not the one "
	       "the core applies, or the checker computed its edge wrong", what, edge, rc, weft_strerror(rc));
	return 0;
}

static int sizes_for_type(struct rk *R, enum weft_datatype t, uint64_t *seed, int *calls)
{
	int rank = R->rank, n = R->n;
	size_t lo, hi;
	int hi_edge;
	if (fit_counts(t, n, &lo, &hi, &hi_edge) != 0)
		return 2;
	size_t per = weft_datatype_size(t) * coll_unit(g_algo.coll, n);
	size_t counts[16];
	int nc = 0;
	if (g_algo.min_bytes == 0)
		counts[nc++] = 0;
	counts[nc++] = lo;
	counts[nc++] = lo + 1;
	if (hi_edge) {
		counts[nc++] = hi;
		counts[nc++] = hi - 1;
	}
	size_t fixed[] = {1, 7, 4097, LARGE_BYTES / per + 3};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		counts[nc++] = fixed[i];
	int first = 1;
	for (int i = 0; i < nc; i++) {
		size_t cnt = counts[i];
		if (cnt != 0 && (cnt < lo || cnt > hi))
			continue;
		int dup = 0;
		for (int j = 0; j < i; j++)
			dup |= counts[j] == cnt;
		if (dup)
			continue;
		for (int ip = 0; ip < 2; ip++) {
			struct pk_call c = {.dt = t, .op = plain_op(), .inplace = ip, .count = cnt,
					    .root = (int)(*seed % (uint64_t)n), .seed = mix64((*seed)++)};
			int res = run_call(R, &c);
			if (res == 2 && first)
				return 2; /* the type is refused: the caller tries another */
			RCHECK(res != 2, "%s refused %s %s at %zu elements (-ENOTSUP) but served it at others", g_full,
			       weft_datatype_name(t), ip ? "in place" : "out of place", cnt);
			if (res)
				return 1;
			first = first && cnt == 0;
			(*calls)++;
		}
	}
	struct pk_call c = {.dt = t, .op = plain_op(), .seed = mix64((*seed)++)};
	if (g_algo.min_bytes > 0 && lo > 1) {
		c.count = lo - 1;
		if (run_outside(R, &c, "min_bytes"))
			return 1;
	}
	if (hi_edge) {
		c.count = hi + 1;
		if (run_outside(R, &c, g_algo.max_peer_bytes ? "max_bytes or max_peer_bytes" : "max_bytes"))
			return 1;
	}
	if (rank == 0 && !hi_edge && (g_algo.max_bytes || g_algo.max_peer_bytes))
		printf("pack-conformance: %s's upper edge in %s lies more than %u bytes past its lower one, beyond "
		       "what this checker calls with\n", g_full, weft_datatype_name(t), CAP_BYTES);
	return 0;
}

static int rank_sizes(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	/* A one-byte type (odd byte counts) and an eight-byte one, the first of
	 * each the algorithm serves. */
	static const enum weft_datatype small[] = {WEFT_INT8, WEFT_UINT8, WEFT_FP8_E4M3, WEFT_FP8_E5M2, WEFT_FLOAT16,
						   WEFT_BFLOAT16, WEFT_INT32, WEFT_FLOAT32};
	static const enum weft_datatype big[] = {WEFT_FLOAT64, WEFT_INT64, WEFT_UINT64, WEFT_FLOAT32, WEFT_INT32};
	const enum weft_datatype *lists[2] = {small, big};
	size_t lens[2] = {sizeof(small) / sizeof(small[0]), sizeof(big) / sizeof(big[0])};
	uint64_t seed = 0x5153ull;
	int calls = 0, done[2] = {0, 0};
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; i < lens[l] && !done[l]; i++) {
			int res = sizes_for_type(&R, lists[l][i], &seed, &calls);
			if (res == 1)
				return 1;
			done[l] = res == 0;
		}
	RSKIP_NONE(done[0] || done[1], &R,
		   "%s refused every datatype tried here (-ENOTSUP), or none fits its limits at %d ranks", g_full, n);
	if (rank == 0)
		printf("pack-conformance: %s: %d calls at its edges and odd counts served and right\n", g_full, calls);
	ROK(weft_comm_destroy(R.comm));
	return 0;
}

/* -------------------------------------------------------------- groups */
#define GRP_CALLS 4

/* Issues ops[from, to) in one group (nest: with a nested group around the
 * middle ones) and verifies them all. 0 or 1. */
static int group_run(struct rk *R, struct pk_op *ops, int cnt, int nest)
{
	int rank = R->rank;
	ROK(weft_group_start());
	int rc = 0;
	for (int i = 0; i < cnt && rc == 0; i++) {
		if (nest && i == 1)
			rc = weft_group_start();
		if (rc == 0)
			rc = op_issue(R, &ops[i]);
		if (nest && i == cnt - 2 && rc == 0)
			rc = weft_group_end();
	}
	int end = weft_group_end();
	RCHECK(rc == 0, "queuing a call in a group returned %d (%s)", rc, weft_strerror(rc));
	RCHECK(end == 0, "weft_group_end of %d calls%s returned %d (%s)", cnt, nest ? " (nested)" : "", end,
	       weft_strerror(end));
	if (check_served_by(R, "the last call of a group"))
		return 1;
	for (int i = 0; i < cnt; i++)
		if (op_read_back(R, &ops[i]) || op_verify(R, &ops[i]))
			return 1;
	return 0;
}

/* Sendrecv: in one group every rank sends a block to every rank (itself
 * too) and receives one from each; block sizes differ by pair. 0 or 1. */
static int allpairs(struct rk *R, enum weft_datatype t, size_t base)
{
	int rank = R->rank, n = R->n;
	size_t es = weft_datatype_size(t), total = 0;
	for (int p = 0; p < n; p++)
		total += 2 * (base + (size_t)((rank + p) % 5)) * es;
	if (total < g_algo.min_bytes || (g_algo.max_bytes && total > g_algo.max_bytes) ||
	    (g_algo.max_peer_bytes && total > g_algo.max_peer_bytes / (uint64_t)(n - 1))) {
		if (rank == 0)
			printf("pack-conformance: the every-pair batch does not fit %s's sizes; left out\n", g_full);
		return 0;
	}
	unsigned char *sb[MAX_RANKS] = {0}, *rb[MAX_RANKS] = {0}, *hb = malloc(2 * total + 64);
	RCHECK(hb, "out of memory");
	int rc = weft_group_start();
	for (int p = 0; p < n && rc == 0; p++) {
		size_t len = (base + (size_t)((rank + p) % 5)) * es;
		sb[p] = rk_alloc(R, len);
		rb[p] = rk_alloc(R, len);
		RCHECK(sb[p] && rb[p], "out of memory");
		pattern_fill(hb, mix64((uint64_t)(rank * 64 + p)), 0, len);
		if (rk_copy(R, sb[p], hb, len, 1) == 0 && (rc = weft_send(sb[p], len / es, t, p, R->comm, NULL)) == 0)
			rc = weft_recv(rb[p], len / es, t, p, R->comm, NULL);
	}
	int end = weft_group_end();
	RCHECK(rc == 0 && end == 0, "a group of a send and a receive with every rank returned %d (%s)", rc ? rc : end,
	       weft_strerror(rc ? rc : end));
	if (check_served_by(R, "the every-pair batch"))
		return 1;
	for (int p = 0; p < n; p++) {
		size_t len = (base + (size_t)((rank + p) % 5)) * es;
		RCHECK(rk_copy(R, hb, rb[p], len, 0) == 0, "cudaMemcpy from the device");
		pattern_fill(hb + len, mix64((uint64_t)(p * 64 + rank)), 0, len);
		RCHECK(memcmp(hb, hb + len, len) == 0, "every-pair batch: the %zu bytes received from rank %d are wrong",
		       len, p);
		rk_free(R, sb[p]);
		rk_free(R, rb[p]);
	}
	free(hb);
	return 0;
}

static int rank_groups(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	/* The calls, alone first: varied types, reductions, placements, counts. */
	static const enum weft_datatype types[] = {WEFT_FLOAT32, WEFT_INT32, WEFT_FLOAT16, WEFT_UINT8, WEFT_FLOAT64,
						   WEFT_BFLOAT16, WEFT_INT64, WEFT_INT8};
	static const size_t want[] = {DT_COUNT, 7, 1, 4097, 300, 64, 5, 2049};
	static const int ops_pref[] = {WEFT_SUM, WEFT_MAX, WEFT_MIN, WEFT_PROD, WEFT_AVG, WEFT_PREMUL_SUM};
	struct pk_call calls[GRP_CALLS];
	int nc = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]) && nc < GRP_CALLS; i++) {
		size_t lo, hi;
		int edge;
		if (fit_counts(types[i], n, &lo, &hi, &edge) != 0)
			continue;
		int op = -1;
		if (reducing(g_algo.coll))
			for (int k = 0; k < 6 && op < 0; k++)
				if (g_algo.redops & (1u << ops_pref[(k + (int)i) % 6]))
					op = ops_pref[(k + (int)i) % 6];
		struct pk_call c = {.dt = types[i], .op = op, .inplace = (int)(i & 1),
				    .count = clamp_count(want[i] / (g_algo.coll == WEFT_COLL_SENDRECV ? 4 : 1), lo, hi),
				    .root = (int)(i % (size_t)n), .seed = mix64(0x6709ull + i)};
		int res = run_call(&R, &c);
		if (res == 1)
			return 1;
		if (res == 0)
			calls[nc++] = c;
	}
	RSKIP_NONE(nc > 0, &R, "%s refused every call tried here (-ENOTSUP)", g_full);
	/* A group's batch of sends and receives is one call: its sizes add up. */
	if (g_algo.coll == WEFT_COLL_SENDRECV && g_algo.max_bytes) {
		while (nc > 1) {
			uint64_t sum = 0;
			for (int i = 0; i < nc; i++)
				sum += 2 * calls[i].count * weft_datatype_size(calls[i].dt);
			if (sum <= g_algo.max_bytes &&
			    (!g_algo.max_peer_bytes || sum <= g_algo.max_peer_bytes / (uint64_t)(n - 1)))
				break;
			nc--;
		}
	}
	struct pk_op ops[GRP_CALLS];
	for (int nest = 0; nest < 2; nest++) {
		for (int i = 0; i < nc; i++) {
			calls[i].seed = mix64(calls[i].seed + 1);
			if (op_prepare(&R, &calls[i], &ops[i]) != 0)
				return 1;
		}
		if (group_run(&R, ops, nc, nest && nc >= 3))
			return 1;
		for (int i = 0; i < nc; i++)
			op_free(&R, &ops[i]);
	}
	if (g_algo.coll == WEFT_COLL_SENDRECV && allpairs(&R, calls[0].dt, 33))
		return 1;
	if (rank == 0)
		printf("pack-conformance: %s: %d calls in one group, then nested, gave what they give alone\n", g_full, nc);
	ROK(weft_comm_destroy(R.comm));
	return 0;
}

/* --------------------------------------------------------- abort, death */
struct abort_arg {
	weft_comm_t *comm;
	double delay_s, at;
};

static void *abort_later(void *p)
{
	struct abort_arg *a = p;
	sleep_s(a->delay_s);
	a->at = now_s();
	weft_comm_abort(a->comm);
	return NULL;
}

/* Ends a rank whose call is still blocked past its bound, saying so: the
 * check then fails at once with that reason instead of at the timeout. */
struct watchdog {
	int done, rank;
	double start, bound;
	const char *event;
	pthread_t th;
};

static void *watchdog_fn(void *p)
{
	struct watchdog *w = p;
	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (now_s() - w->start > w->bound) {
			note_fail(w->rank, "a call was still blocked %.1f s after %s (bound %.0f s)", now_s() - w->start,
				  w->event, w->bound);
			fflush(NULL);
			_exit(1);
		}
		usleep(20 * 1000);
	}
	return NULL;
}

static int watchdog_start(struct watchdog *w, int rank, double bound, const char *event)
{
	*w = (struct watchdog){.rank = rank, .start = now_s(), .bound = bound, .event = event};
	RCHECK(pthread_create(&w->th, NULL, watchdog_fn, w) == 0, "pthread_create");
	return 0;
}

static void watchdog_stop(struct watchdog *w)
{
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	pthread_join(w->th, NULL);
}

/* A survivor's calls after another rank left: each that returns 0 gave the
 * right result (it needed nothing more from that rank), and one fails within
 * the bound; then the comm is broken and destroy returns. 0 or 1. */
static int survivor_call(struct rk *R, const struct pk_call *c, double bound, const char *event)
{
	int rank = R->rank, rc, served = 0;
	struct watchdog w;
	if (watchdog_start(&w, rank, bound, event))
		return 1;
	do {
		struct pk_op o;
		if (op_prepare(R, c, &o) != 0)
			return 1;
		rc = op_issue(R, &o);
		if (rc == 0) {
			if (op_read_back(R, &o) || op_verify(R, &o))
				return 1;
			served++;
			usleep(20 * 1000);
		}
		op_free(R, &o);
	} while (rc == 0);
	double dt = now_s() - w.start;
	watchdog_stop(&w);
	if (served)
		printf("pack-conformance: rank %d completed %d call%s after %s before one failed\n", rank, served,
		       served == 1 ? "" : "s", event);
	RCHECK(weft_comm_status(R->comm) != 0, "a call failed after %s (%s), yet the comm is still healthy", event,
	       weft_strerror(rc));
	if (g_verbose)
		printf("pack-conformance: rank %d: %s after %.2f s\n", rank, weft_strerror(rc), dt);
	double t0 = now_s();
	ROK(weft_comm_destroy(R->comm));
	dt = now_s() - t0;
	RCHECK(dt < PEER_TIMEOUT_S + 5.0, "weft_comm_destroy took %.1f s after %s", dt, event);
	return 0;
}

static int rank_abort(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	/* Rank 0 waits in the call for the last rank, which enters only once
	 * rank 0's aborted call has returned (told through the checker's shared
	 * page), so that call cannot complete; a broadcast's root is that last
	 * rank, a reduce's rank 0. */
	int root = g_algo.coll == WEFT_COLL_BROADCAST ? n - 1 : 0;
	struct pk_call c = {.seed = 0xab0ull, .root = root};
	if ((rc = pick_served(&R, 64u << 10, &c)) != 0)
		return rc;
	c.seed = 0xab1ull;
	ROK(weft_comm_barrier(R.comm));
	if (rank != 0) {
		for (double t0 = now_s(); rank == n - 1 && !__atomic_load_n(&kc_note->flag, __ATOMIC_ACQUIRE);
		     usleep(1000))
			RCHECK(now_s() - t0 < DEAD_BOUND_S, "rank 0's aborted call did not return within %.0f s",
			       DEAD_BOUND_S);
		return survivor_call(&R, &c, DEAD_BOUND_S, "rank 0's abort");
	}
	struct pk_op o;
	char what[200];
	describe_call(&c, n, what, sizeof(what));
	if (op_prepare(&R, &c, &o) != 0)
		return 1;
	struct abort_arg a = {.comm = R.comm, .delay_s = ABORT_AFTER_S};
	pthread_t th;
	struct watchdog w;
	if (watchdog_start(&w, rank, ABORT_AFTER_S + ABORT_BOUND_S, "rank 0's abort"))
		return 1;
	RCHECK(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create");
	rc = op_issue(&R, &o);
	double t1 = now_s();
	pthread_join(th, NULL);
	watchdog_stop(&w);
	__atomic_store_n(&kc_note->flag, 1, __ATOMIC_RELEASE);
	RCHECK(rc == -WEFT_ERR_ABORTED, "%s returned %d (%s) when its comm was aborted inside it, not "
	       "-WEFT_ERR_ABORTED", what, rc, weft_strerror(rc));
	RCHECK(t1 - a.at < ABORT_BOUND_S, "%s returned %.1f s after weft_comm_abort", what, t1 - a.at);
	double t2 = now_s();
	int rc2 = op_issue(&R, &o);
	RCHECK(rc2 == -WEFT_ERR_ABORTED && now_s() - t2 < 1.0, "the call after abort returned %d (%s) after %.1f s",
	       rc2, weft_strerror(rc2), now_s() - t2);
	RCHECK(weft_comm_status(R.comm) == -WEFT_ERR_ABORTED, "status %d after abort", weft_comm_status(R.comm));
	op_free(&R, &o);
	t2 = now_s();
	ROK(weft_comm_destroy(R.comm));
	RCHECK(now_s() - t2 < PEER_TIMEOUT_S + 5.0, "weft_comm_destroy of the aborted comm took %.1f s", now_s() - t2);
	return 0;
}

#define VICTIM 1

static int rank_killed(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	/* A broadcast's root is the victim, so every survivor waits on it. */
	int root = g_algo.coll == WEFT_COLL_BROADCAST ? VICTIM : 0;
	struct pk_call c = {.seed = 0xdeadull, .root = root};
	if ((rc = pick_served(&R, LARGE_BYTES, &c)) != 0)
		return rc;
	c.seed = 0xdeae;
	/* The victim dies only once every survivor has heard from it after the
	 * warm-up, so no survivor sees the death before its own call. */
	uint32_t word = 1;
	if (rank == VICTIM) {
		for (int p = 0; p < n; p++)
			if (p != VICTIM)
				ROK(weft_comm_recv(R.comm, p, 27, &word, sizeof(word)));
		fflush(NULL);
		raise(SIGKILL);
		return 1;
	}
	ROK(weft_comm_send(R.comm, VICTIM, 27, &word, sizeof(word)));
	return survivor_call(&R, &c, DEAD_BOUND_S, "rank 1's death");
}

/* ------------------------------------------------------------ mismatch */
#define MISMATCH_BOUND_S 3.0 /* two heartbeat intervals and a margin */

/* Whether rank's own call must fail when the last rank's call differs: it
 * waits on data from that rank, or is that rank and waits on another's
 * (send/recv: the ring of op_issue, each rank sending to the next). The
 * other ranks' calls agree with the ranks they wait on, so theirs may
 * succeed, with the right data; their later calls fail. */
static int fails_at_once(int rank, int n, int root)
{
	switch (g_algo.coll) {
	case WEFT_COLL_BROADCAST: return rank == n - 1 && rank != root;
	case WEFT_COLL_REDUCE: return rank == root;
	case WEFT_COLL_SENDRECV: return rank == 0 || rank == n - 1;
	default: return 1;
	}
}

/* Another datatype of the same size, so that every rank's call moves the
 * same bytes and only the signature tells them apart. */
static enum weft_datatype twin_type(enum weft_datatype t)
{
	switch (t) {
	case WEFT_FLOAT32: return WEFT_INT32;
	case WEFT_INT32: return WEFT_FLOAT32;
	case WEFT_FLOAT64: return WEFT_INT64;
	case WEFT_INT64: return WEFT_FLOAT64;
	case WEFT_FLOAT16: return WEFT_BFLOAT16;
	case WEFT_BFLOAT16: return WEFT_FLOAT16;
	case WEFT_INT8: return WEFT_UINT8;
	case WEFT_UINT8: return WEFT_INT8;
	case WEFT_UINT32: return WEFT_INT32;
	case WEFT_UINT64: return WEFT_INT64;
	case WEFT_FP8_E4M3: return WEFT_FP8_E5M2;
	default: return WEFT_FP8_E4M3;
	}
}

/* The last rank makes the call with another datatype of the same size (a
 * send/recv batch: one more element): the pack must compare the call's
 * signature (weft_coll_args.sig, ABI 0.3) and fail with -WEFT_ERR_MISMATCH
 * rather than return what it moved (fails_at_once says where); every other
 * rank's calls fail within the bound too. */
static int rank_mismatch(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	struct pk_call c = {.seed = 0x5161ull, .root = 0};
	if ((rc = pick_served(&R, 4096, &c)) != 0)
		return rc;
	/* Every rank is done with that call before one disagrees. A rank still
	 * leaving the barrier when the others found the disagreement sees the
	 * communicator's failure there: it made no call that could go wrong. */
	double t0 = now_s();
	rc = weft_comm_barrier(R.comm);
	if (rc == -WEFT_ERR_MISMATCH) {
		weft_comm_destroy(R.comm);
		return 0;
	}
	RCHECK(rc == 0, "weft_comm_barrier returned %d (%s)", rc, weft_strerror(rc));
	if (n == 1) {
		note_skip(rank, "one rank: no peer to disagree with");
		weft_comm_destroy(R.comm);
		return PK_SKIP;
	}
	struct pk_call d = c;
	if (rank == n - 1) {
		if (g_algo.coll == WEFT_COLL_SENDRECV)
			d.count++;
		else
			d.dt = twin_type(c.dt);
	}
	char what[200];
	describe_call(&d, n, what, sizeof(what));
	struct pk_op o;
	if (op_prepare(&R, &d, &o) != 0)
		return 1;
	struct watchdog w;
	if (watchdog_start(&w, rank, MISMATCH_BOUND_S + 2.0, "a call the ranks made differently"))
		return 1;
	rc = op_issue(&R, &o);
	while (rc == 0 && !fails_at_once(rank, n, c.root) && now_s() - t0 < MISMATCH_BOUND_S) {
		usleep(20 * 1000);
		rc = op_issue(&R, &o);
	}
	double dt = now_s() - t0;
	watchdog_stop(&w);
	op_free(&R, &o);
	RCHECK(rc == -WEFT_ERR_MISMATCH,
	       "%s on rank %d, against %s on rank %d, returned %d (%s), not -WEFT_ERR_MISMATCH: the pack must "
	       "compare the call's signature (weft_coll_args.sig) with its peers'",
	       what, rank, rank == n - 1 ? "the other type" : "another type", n - 1, rc, weft_strerror(rc));
	RCHECK(dt < MISMATCH_BOUND_S, "%s: -WEFT_ERR_MISMATCH only after %.1f s", what, dt);
	weft_comm_destroy(R.comm);
	return 0;
}

/* -------------------------------------------------------------- device */
static int rank_device(int rank, int n, void *arg)
{
	struct rk R;
	int rc = rk_up(&R, rank, n);
	if (rc)
		return rc;
	int cerr = R.cu.stream_create(&R.stream);
	RCHECK(cerr == 0, "cudaStreamCreate: %s", R.cu.error_string(cerr));
	static const enum weft_datatype types[] = {WEFT_FLOAT32, WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_INT8,
						   WEFT_INT32,   WEFT_FLOAT64, WEFT_UINT8,    WEFT_FP8_E4M3};
	int served = 0, k = 0;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		size_t lo, hi;
		int edge;
		if (fit_counts(types[i], n, &lo, &hi, &edge) != 0)
			continue;
		size_t counts[3] = {1, clamp_count(4097, lo, hi), hi};
		for (int op = reducing(g_algo.coll) ? 0 : -1; op < (reducing(g_algo.coll) ? WEFT_REDOP_COUNT : 0); op++) {
			if (op >= 0 && !(g_algo.redops & (1u << op)))
				continue;
			for (int ci = 0; ci < 3; ci++, k++) {
				if (counts[ci] < lo || (ci == 2 && !edge))
					continue;
				struct pk_call c = {.dt = types[i], .op = op, .inplace = k & 1, .count = counts[ci],
						    .root = k % n, .seed = mix64(0xdef1ceull + (uint64_t)k),
						    .dev_scalar = op == WEFT_PREMUL_SUM && (k & 2)};
				int res = run_call(&R, &c);
				if (res == 1)
					return 1;
				served += res == 0;
			}
		}
	}
	RSKIP_NONE(served > 0, &R, "%s refused every call on CUDA buffers here (-ENOTSUP)", g_full);
	if (rank == 0)
		printf("pack-conformance: %s: %d calls on CUDA buffers and a stream served and right\n", g_full, served);
	R.cu.stream_destroy(R.stream);
	ROK(weft_comm_destroy(R.comm));
	return 0;
}

static const struct pk_kind kinds[] = {
	{"dtypes-ops", rank_dtypes, -1}, {"sizes", rank_sizes, -1},         {"groups", rank_groups, -1},
	{"abort", rank_abort, -1},       {"peer-killed", rank_killed, VICTIM}, {"device", rank_device, -1},
	{"mismatch", rank_mismatch, -1},
};
#define NKINDS (int)(sizeof(kinds) / sizeof(kinds[0]))

static void redops_text(unsigned redops, char *buf, size_t len)
{
	size_t k = 0;
	buf[0] = '\0';
	for (int op = 0; op < WEFT_REDOP_COUNT && k < len; op++)
		if (redops & (1u << op))
			k += (size_t)snprintf(buf + k, len - k, "%s%s", k ? " " : "", weft_redop_name((enum weft_redop)op));
}

static void describe_kind(const struct pk_algo *a, const char *kind, char *buf, size_t len)
{
	char ops[80];
	const char *cn = a->coll >= 0 && a->coll < WEFT_COLL_COUNT ? coll_names[a->coll] : "?";
	redops_text(a->redops, ops, sizeof(ops));
	if (strcmp(kind, "dtypes-ops") == 0)
		snprintf(buf, len,
			 "%s: every datatype%s%s%s, in and out of place, outputs poisoned, against a reference; "
			 "refusals (-ENOTSUP) listed",
			 cn, reducing(a->coll) ? " and reduction (" : "", reducing(a->coll) ? ops : "",
			 reducing(a->coll) ? ")" : "");
	else if (strcmp(kind, "sizes") == 0)
		snprintf(buf, len,
			 "%s: counts at its edges (min_bytes, max_bytes, max_peer_bytes: the edge, one element inside, "
			 "one past refused), 0, 1, 7, 4097 and past 1 MiB where they fit",
			 cn);
	else if (strcmp(kind, "groups") == 0)
		snprintf(buf, len, "%s: several calls in one group, then nested, give what they give alone", cn);
	else if (strcmp(kind, "abort") == 0)
		snprintf(buf, len,
			 "%s: rank 0 aborts its comm inside a call: -WEFT_ERR_ABORTED there, every other rank's call "
			 "ends within the peer timeout",
			 cn);
	else if (strcmp(kind, "mismatch") == 0)
		snprintf(buf, len,
			 "%s: the last rank makes the call with another datatype of the same size (send/recv: one more "
			 "element): -WEFT_ERR_MISMATCH on every rank within %.0f s (the pack compares signatures)",
			 cn, MISMATCH_BOUND_S);
	else if (strcmp(kind, "peer-killed") == 0)
		snprintf(buf, len, "%s: rank 1 dies by SIGKILL before a large call: the survivors' calls end within the "
			 "peer timeout plus 8 s", cn);
	else
		snprintf(buf, len, "%s: CUDA buffers on a stream, device scalars (skipped without a GPU or device memory)",
			 cn);
}

/* ------------------------------------------------------- forking ranks */
/* tools/keep_crashes.c forks and judges the ranks; once one fails, the
 * others get the dead-peer bound, not the whole timeout. */
static int run_ranks(int n, const struct pk_kind *k, struct kc_result *res)
{
	struct kc_run run = {.n = n,
			     .fn = k->rank_fn,
			     .timeout_s = RANKS_TIMEOUT,
			     .victim = k->victim,
			     .fail_grace_s = DEAD_BOUND_S + 2,
			     .id = &g_id};
	return kc_run_ranks(&run, res);
}

/* ---------------------------------------------------- the run's files */
static const char *user_config(void)
{
	static char path[600];
	const char *c = getenv("WEFT_CONFIG"), *home = getenv("HOME");
	struct stat st;
	if (c && *c)
		return c;
	if (home && *home) {
		snprintf(path, sizeof(path), "%s/.config/weft/weft.conf", home);
		if (stat(path, &st) == 0)
			return path;
	}
	return stat("/etc/weft.conf", &st) == 0 ? "/etc/weft.conf" : NULL;
}

/* The forced rule first, then the caller's own file (the first matching
 * rule answers). 0, or -1 with why. */
static int write_config(char *why, size_t len)
{
	const char *t = getenv("TMPDIR");
	snprintf(g_tmp, sizeof(g_tmp), "%s/weft-pack-conformance-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(g_tmp)) {
		snprintf(why, len, "mkdtemp %s: %s", g_tmp, strerror(errno));
		g_tmp[0] = '\0';
		return -1;
	}
	char conf[600];
	snprintf(conf, sizeof(conf), "%s/weft.conf", g_tmp);
	FILE *f = fopen(conf, "w");
	if (!f) {
		snprintf(why, len, "%s: %s", conf, strerror(errno));
		return -1;
	}
	fprintf(f, "# written by weft-pack-conformance: %s forced\n[algorithm]\nrequire %s when coll=%s\n", g_full,
		g_full, coll_names[g_algo.coll]);
	const char *uc = user_config();
	FILE *in = uc ? fopen(uc, "r") : NULL;
	if (uc && !in) {
		snprintf(why, len, "%s: %s", uc, strerror(errno));
		fclose(f);
		return -1;
	}
	if (in) {
		char buf[4096];
		size_t k;
		fprintf(f, "# %s follows\n", uc);
		while ((k = fread(buf, 1, sizeof(buf), in)) > 0)
			fwrite(buf, 1, k, f);
		fclose(in);
	}
	if (fclose(f) != 0) {
		snprintf(why, len, "%s: %s", conf, strerror(errno));
		return -1;
	}
	setenv("WEFT_CONFIG", conf, 1);
	const char *lf = getenv("WEFT_LOG_FILE");
	if (!g_verbose && !(lf && *lf)) {
		snprintf(g_log, sizeof(g_log), "%s/weft.log", g_tmp);
		setenv("WEFT_LOG_FILE", g_log, 1);
	}
	return 0;
}

static void print_log_tail(void)
{
	FILE *f = g_log[0] ? fopen(g_log, "r") : NULL;
	if (!f)
		return;
	static char lines[LOG_TAIL_LINES][512];
	int k = 0;
	while (fgets(lines[k % LOG_TAIL_LINES], sizeof(lines[0]), f))
		k++;
	fclose(f);
	if (k)
		fprintf(stderr, "pack-conformance: the core's log (%s, last %d lines):\n", g_log,
			k < LOG_TAIL_LINES ? k : LOG_TAIL_LINES);
	for (int i = k > LOG_TAIL_LINES ? k - LOG_TAIL_LINES : 0; i < k; i++)
		fprintf(stderr, "  %s", lines[i % LOG_TAIL_LINES]);
}

static void cleanup_tmp(void)
{
	if (!g_tmp[0])
		return;
	char p[700];
	snprintf(p, sizeof(p), "%s/weft.conf", g_tmp);
	unlink(p);
	if (g_log[0])
		unlink(g_log);
	rmdir(g_tmp);
	g_tmp[0] = '\0';
}

/* ------------------------------------------------------------ declares */
static int name_ok(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_' || *s == '.'))
			return 0;
	return 1;
}

/* The gate: the pack is loaded and declares algorithms coherently. */
static int check_declares(struct kc_result *res)
{
	char *why = res->reason;
	size_t wl = sizeof(res->reason);
	const struct pk_pack *p = find_pack(g_pack);
	res->status = PK_FAIL;
	if (!p) {
		snprintf(why, wl, "no algorithm pack named '%s' was found (weft-info lists what was)", g_pack);
		return res->status;
	}
	if (p->state != WEFT_INFO_LOADED) {
		snprintf(why, wl, "'%s' (%s) was not loaded: %s", g_pack, p->path, p->reason);
		return res->status;
	}
	int cnt = 0, usable = 0;
	for (int i = 0; i < g_cat->n; i++) {
		const struct pk_algo *a = &g_cat->a[i];
		if (strcmp(a->pack, g_pack) != 0)
			continue;
		cnt++;
		const char *bad = NULL;
		for (int j = 0; j < i; j++)
			if (strcmp(g_cat->a[j].pack, g_pack) == 0 && strcmp(g_cat->a[j].name, a->name) == 0)
				bad = "its name is declared twice";
		if (!name_ok(a->name))
			bad = "its name is empty or not [A-Za-z0-9._-] (a rule cannot name it)";
		else if (a->coll < 0 || a->coll >= WEFT_COLL_COUNT)
			bad = "its collective is unknown";
		else if (a->max_bytes && a->min_bytes > a->max_bytes)
			bad = "min_bytes is above max_bytes";
		else if (a->min_ranks < 0 || (a->max_ranks && a->min_ranks > a->max_ranks))
			bad = "its rank range is empty";
		else if (a->mem_types & ~((1u << WEFT_MEM_TYPE_COUNT) - 1))
			bad = "mem_types has bits of no memory type";
		else if (a->redops & ~((1u << WEFT_REDOP_COUNT) - 1))
			bad = "redops has bits of no reduction";
		else if (reducing(a->coll) && !a->redops)
			bad = "it reduces but serves no reduction";
		if (bad) {
			snprintf(why, wl, "%s/%s: %s", g_pack, a->name, bad);
			return res->status;
		}
		usable += a->mem_types != 0;
	}
	if (cnt == 0) {
		snprintf(why, wl, "'%s' declares no algorithm", g_pack);
		return res->status;
	}
	printf("pack-conformance: '%s' (ABI %u.%u, %s): %d algorithm%s, %d with a memory type\n", g_pack, p->abi_major,
	       p->abi_minor, p->path, cnt, cnt == 1 ? "" : "s", usable);
	why[0] = '\0';
	return res->status = PK_PASS;
}

/* ---------------------------------------------------------- one check */
static const struct pk_algo *find_algo(const char *name)
{
	for (int i = 0; i < g_cat->n; i++)
		if (strcmp(g_cat->a[i].pack, g_pack) == 0 && strcmp(g_cat->a[i].name, name) == 0)
			return &g_cat->a[i];
	return NULL;
}

/* The memory the check's buffers are in, or -1 with why (a skip). */
static int choose_mem(const struct pk_algo *a, const char *kind, char *why, size_t wl)
{
	if (strcmp(kind, "device") == 0) {
		if (a->mem_types & (1u << WEFT_MEM_CUDA))
			return WEFT_MEM_CUDA;
		snprintf(why, wl, "%s declares no CUDA memory (mem_types 0x%x)", g_full, a->mem_types);
		return -1;
	}
	if (a->mem_types & (1u << WEFT_MEM_HOST))
		return WEFT_MEM_HOST;
	if (a->mem_types & (1u << WEFT_MEM_CUDA))
		return WEFT_MEM_CUDA;
	snprintf(why, wl, "%s declares %s", g_full,
		 a->mem_types ? "only memory types this checker does not drive (hip)" : "no memory type: it serves nothing");
	return -1;
}

static int run_check(const char *name, int np, struct kc_result *res)
{
	memset(res, 0, sizeof(*res));
	if (strcmp(name, "declares") == 0)
		return check_declares(res);
	const char *slash = strrchr(name, '/');
	const struct pk_kind *k = NULL;
	for (int i = 0; slash && i < NKINDS && !k; i++)
		if (strcmp(kinds[i].name, slash + 1) == 0)
			k = &kinds[i];
	char an[128];
	snprintf(an, sizeof(an), "%.*s", slash ? (int)(slash - name) : 0, name);
	const struct pk_algo *a = k ? find_algo(an) : NULL;
	if (!a) {
		fprintf(stderr, "weft-pack-conformance: no check named '%s' for '%s' (--list names them)\n", name, g_pack);
		return res->status = PK_USAGE;
	}
	g_algo = *a;
	snprintf(g_full, sizeof(g_full), "%s/%s", a->pack, a->name);
	res->status = PK_SKIP;
	if (np < a->min_ranks || (a->max_ranks && np > a->max_ranks)) {
		snprintf(res->reason, sizeof(res->reason), "%s serves %d to %d ranks, not %d", g_full, a->min_ranks,
			 a->max_ranks, np);
		return res->status;
	}
	int mem = choose_mem(a, k->name, res->reason, sizeof(res->reason));
	if (mem < 0)
		return res->status;
	g_mem = (enum weft_mem_type)mem;
	int fits = 0;
	for (int i = 0; i < NTYPES && !fits; i++) {
		size_t lo, hi;
		int edge;
		fits = fit_counts(all_types[i], np, &lo, &hi, &edge) == 0;
	}
	if (!fits) {
		snprintf(res->reason, sizeof(res->reason),
			 "no call of %s fits at %d ranks below %llu MiB, the largest lower edge this checker calls at "
			 "(min_bytes %llu, max_bytes %llu, max_peer_bytes %llu)",
			 g_full, np, (unsigned long long)(EDGE_CAP >> 20), (unsigned long long)a->min_bytes,
			 (unsigned long long)a->max_bytes, (unsigned long long)a->max_peer_bytes);
		return res->status;
	}
	if (write_config(res->reason, sizeof(res->reason)) != 0) {
		cleanup_tmp();
		return res->status = PK_FAIL;
	}
	if (g_verbose)
		printf("pack-conformance: WEFT_CONFIG=%s forces %s for every %s\n", getenv("WEFT_CONFIG"), g_full,
		       coll_names[a->coll]);
	run_ranks(np, k, res);
	if (res->status == PK_FAIL || res->status == PK_CRASH)
		print_log_tail();
	cleanup_tmp();
	return res->status;
}

/* ---------------------------------------------------------------- main */
static int usage(void)
{
	fprintf(stderr,
		"usage: weft-pack-conformance --list [--target PACK]\n"
		"       weft-pack-conformance --run CHECK --np N [--target PACK] [--result FILE] [-v]\n"
		"                             [--hosts 2 [--netns NAMESPACE,ADDRESS,DEVICE (once per host)]]\n");
	return PK_USAGE;
}

static void list_checks(void)
{
	printf("declares\tthe pack is loaded and every algorithm's declaration is coherent (collective, sizes, ranks, "
	       "memory types, reductions)\n");
	for (int i = 0; i < g_cat->n; i++) {
		const struct pk_algo *a = &g_cat->a[i];
		if (strcmp(a->pack, g_pack) != 0)
			continue;
		for (int k = 0; k < NKINDS; k++) {
			char d[400];
			describe_kind(a, kinds[k].name, d, sizeof(d));
			printf("%s/%s\t%s\n", a->name, kinds[k].name, d);
		}
	}
}

int main(int argc, char **argv)
{
	/* Short failure detection and a pinned address; the caller may override them. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	const char *run = NULL, *result = NULL;
	int np = 0, list = 0, h;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--list") == 0)
			list = 1;
		else if (strcmp(a, "-v") == 0)
			g_verbose = 1;
		else if (i + 1 >= argc)
			return usage();
		else if ((h = kc_hosts_arg(a, argv[i + 1])) <= 0) {
			if (h < 0)
				return usage();
			i++;
		} else if (strcmp(a, "--run") == 0)
			run = argv[++i];
		else if (strcmp(a, "--target") == 0)
			g_pack = argv[++i];
		else if (strcmp(a, "--result") == 0)
			result = argv[++i];
		else if (strcmp(a, "--np") == 0)
			np = atoi(argv[++i]);
		else
			return usage();
	}
	if ((!list && (!run || np < 2 || np > MAX_RANKS)) || kc_hosts_ready() != 0)
		return usage();
	if (g_verbose && !getenv("WEFT_LOG_LEVEL"))
		setenv("WEFT_LOG_LEVEL", "info", 1);
	char why[600];
	if (catalog_query(why, sizeof(why)) != 0) {
		fprintf(stderr, "weft-pack-conformance: %s\n", why);
		return PK_FAIL;
	}
	if (g_cat->rc == -WEFT_ERR_CONFIG) {
		fprintf(stderr, "weft-pack-conformance: the configuration does not load: %s\n", g_cat->error);
		return PK_FAIL;
	}
	if (!g_pack && !(g_pack = default_pack())) {
		fprintf(stderr, "weft-pack-conformance: name the pack with --target (loaded packs:");
		for (int i = 0; i < g_cat->npacks; i++)
			fprintf(stderr, " %s", g_cat->packs[i].name);
		fprintf(stderr, ")\n");
		return PK_USAGE;
	}
	if (list) {
		list_checks();
		return 0;
	}
	printf("pack-conformance: %s, pack '%s', %d ranks%s%s\n", run, g_pack, np, kc_hosts() > 1 ? "; " : "",
	       kc_hosts_text());
	fflush(stdout);
	struct kc_result r;
	double t0 = now_s();
	int st = run_check(run, np, &r);
	if (st == PK_USAGE)
		return st;
	printf("pack-conformance: %s np=%d: %s%s%s (%.1f s)\n", run, np,
	       st == PK_PASS ? "passed" : st == PK_SKIP ? "skipped" : st == PK_CRASH ? "CRASHED" : "FAILED",
	       st == PK_PASS ? "" : ": ", st == PK_PASS ? "" : r.reason, now_s() - t0);
	if (result) {
		FILE *f = fopen(result, "w");
		if (f) {
			fprintf(f, "%s\n", st == PK_PASS ? "" : r.reason);
			fclose(f);
		}
	}
	return st;
}
