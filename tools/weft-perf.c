/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf: the benchmark users run. Primitive benchmarks (one-sided put
 * bandwidth, put+signal ping-pong latency) and collectives, printed in
 * nccl-tests' layout, built on the public API of include/weft/weft.h only. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "cudart_dl.h"
#include "perf_gpu.h"

#define MAX_TRANSPORTS 8
#define EXIT_USAGE 2
/* Tags of weft-perf's own bootstrap messages (below the core's reserved range). */
#define TAG_READY 0x7065u
#define TAG_WRONG 0x7066u
/* Seconds the --np parent lets the other ranks exit on their own after one failed. */
#define FAIL_GRACE_S 30

enum bench { BENCH_COLL, BENCH_PUT, BENCH_PINGPONG };

enum coll { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BROADCAST, C_REDUCE, C_ALLTOALL, C_SENDRECV, C_COUNT };

/* Per collective: names (nccl-tests' first), whether it reduces, whether it has a
 * root, and nccl-tests' bus bandwidth factor as (num * (n - sub)) / (den * n). */
static const struct coll_info {
	const char *name, *alias;
	int reduces, rooted;
	int busbw_kind; /* 0: 1, 1: (n-1)/n, 2: 2(n-1)/n */
} colls[C_COUNT] = {
	[C_ALLREDUCE] = {"all_reduce", "allreduce", 1, 0, 2},
	[C_ALLGATHER] = {"all_gather", "allgather", 0, 0, 1},
	[C_REDUCE_SCATTER] = {"reduce_scatter", "reducescatter", 1, 0, 1},
	[C_BROADCAST] = {"broadcast", "bcast", 0, 1, 0},
	[C_REDUCE] = {"reduce", "reduce", 1, 1, 0},
	[C_ALLTOALL] = {"alltoall", "all_to_all", 0, 0, 1},
	[C_SENDRECV] = {"sendrecv", "send_recv", 0, 0, 0},
};

/* Element types weft-perf can generate and verify. `limit` is the largest
 * integer the type holds exactly, which bounds the generated values so that
 * sums stay exact in any order. */
static const struct type_info {
	enum weft_datatype type;
	const char *name, *alias, *nccl_name;
	size_t size;
	double limit;
	int is_float;
	int nccl; /* ncclDataType_t, for --peer nccl */
} types[] = {
	{WEFT_INT8, "int8", "char", "int8", 1, 127, 0, 0},
	{WEFT_UINT8, "uint8", "uchar", "uint8", 1, 255, 0, 1},
	{WEFT_INT32, "int32", "int", "int32", 4, 2147483647.0, 0, 2},
	{WEFT_UINT32, "uint32", "uint", "uint32", 4, 4294967295.0, 0, 3},
	{WEFT_INT64, "int64", "long", "int64", 8, 9007199254740992.0, 0, 4},
	{WEFT_UINT64, "uint64", "ulong", "uint64", 8, 9007199254740992.0, 0, 5},
	{WEFT_FLOAT16, "float16", "half", "half", 2, 2048, 1, 6},
	{WEFT_BFLOAT16, "bfloat16", "bf16", "bfloat16", 2, 256, 1, 9},
	{WEFT_FLOAT32, "float32", "float", "float", 4, 16777216.0, 1, 7},
	{WEFT_FLOAT64, "float64", "double", "double", 8, 9007199254740992.0, 1, 8},
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* The plain reductions weft-perf times (not the pre-multiplied sum, whose
 * scalar it has no option for). */
#define PERF_NREDOPS 5
static const char *const redop_names[PERF_NREDOPS] = {"sum", "prod", "min", "max", "avg"};
/* ncclRedOp_t of each weft_redop (NCCL orders max before min). */
static const int nccl_redops[PERF_NREDOPS] = {0, 1, 3, 2, 4};

struct opts {
	uint64_t min_bytes, max_bytes, step_bytes;
	uint64_t factor;
	int sizes_set; /* -b or -e given */
	const struct type_info *type;
	enum weft_redop op;
	int warmup, iters, check, root;
	enum bench bench;
	enum coll coll;
	int coll_set, op_set; /* --collective / --op given */
	char transports[MAX_TRANSPORTS][64];
	int ntransports;
	int np;
	int mem_cuda;
	int fresh;
	int graph;
	int peer_nccl; /* --peer nccl */
	int repeat;    /* --repeat R: alternating timed runs per size, median */
	int window;
	uint64_t seed;
	char cmdline[4096];
};

/* One rank's view of a run. */
struct run {
	const struct opts *o;
	weft_comm_t *comm;
	int rank, nranks;
	void *stream; /* --mem cuda: the stream every call is enqueued on */
	void *nccl;   /* --peer nccl: this rank's ncclComm_t */
};

/* --mem cuda: the CUDA runtime, found at run time (tools/cudart_dl.c). */
static struct cudart_dl cu;

/* --op put|pingpong --mem cuda: libweft-perf-gpu.so (tools/perf_gpu.cu), loaded
 * before the ranks fork; it links CUDA, weft-perf does not. */
static struct gpu_lib {
	void *handle;
	weft_perf_gpu_probe_fn probe;
	weft_perf_gpu_rank_setup_fn rank_setup;
	weft_perf_gpu_run_fn run;
} gpu;

/* --peer nccl: NVIDIA's NCCL, dlopen'ed (never linked) so that the same calls
 * run through both libraries in one run with the same timing. Its types are
 * reduced to int and void *; ncclUniqueId is 128 bytes. */
struct nccl_id {
	char internal[128];
};
static struct nccl_dl {
	int (*get_unique_id)(struct nccl_id *);
	int (*comm_init_rank)(void **, int, struct nccl_id, int);
	int (*comm_destroy)(void *);
	int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
	int (*all_gather)(const void *, void *, size_t, int, void *, void *);
	int (*reduce_scatter)(const void *, void *, size_t, int, int, void *, void *);
	int (*broadcast)(const void *, void *, size_t, int, int, void *, void *);
	int (*reduce)(const void *, void *, size_t, int, int, int, void *, void *);
	int (*alltoall)(const void *, void *, size_t, int, void *, void *);
	int (*send)(const void *, size_t, int, int, void *, void *);
	int (*recv)(void *, size_t, int, int, void *, void *);
	int (*group_start)(void);
	int (*group_end)(void);
	const char *(*error_string)(int);
	int (*get_version)(int *);
} nccl;

/* ---------------------------------------------------------------- helpers */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Reports a failed weft call on this rank; returns rc so callers can pass it on. */
static int fail(const struct run *r, int rc, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (r)
		fprintf(stderr, "weft-perf: rank %d: %s: %s\n", r->rank, what, weft_strerror(rc));
	else
		fprintf(stderr, "weft-perf: %s: %s\n", what, weft_strerror(rc));
	fflush(stderr);
	return rc;
}

static void usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("weft-perf: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (weft-perf -h lists the flags)\n", stderr);
	exit(EXIT_USAGE);
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static void *alloc_buf(size_t len)
{
	/* Page alignment is what registration likes best; never 0 bytes so every
	 * buffer has an address of its own. */
	void *p = NULL;
	size_t l = len ? (len + 4095) & ~(size_t)4095 : 4096;
	if (posix_memalign(&p, 4096, l) != 0)
		return NULL;
	return p;
}

/* Buffers the benchmark hands to weft: host memory, or device memory with
 * --mem cuda. The host fills and checks them through dev_put/dev_get. */
static void *dev_alloc(const struct opts *o, size_t len)
{
	if (!o->mem_cuda)
		return alloc_buf(len);
	void *p = NULL;
	return cu.malloc_(&p, len ? len : 1) == 0 ? p : NULL;
}

static void dev_free(const struct opts *o, void *p)
{
	if (!p)
		return;
	if (o->mem_cuda)
		cu.free_(p);
	else
		free(p);
}

/* Host bytes into a buffer of dev_alloc, and back. Returns 0 or -EIO. */
static int dev_put(const struct opts *o, void *dst, const void *src, size_t n)
{
	if (!o->mem_cuda) {
		if (dst != src)
			memmove(dst, src, n);
		return 0;
	}
	return n == 0 || cu.memcpy_(dst, src, n, CUDART_H2D) == 0 ? 0 : -EIO;
}

static int dev_get(const struct opts *o, void *dst, const void *src, size_t n)
{
	if (!o->mem_cuda) {
		if (dst != src)
			memmove(dst, src, n);
		return 0;
	}
	return n == 0 || cu.memcpy_(dst, src, n, CUDART_D2H) == 0 ? 0 : -EIO;
}

/* ---------------------------------------------------- half-precision types */

static uint16_t f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
	int e = (int)((x >> 23) & 0xff);
	if (e == 0xff)
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	int exp = e - 127 + 15;
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		unsigned shift = (unsigned)(14 - exp);
		uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* a carry into the exponent is the correct rounding, up to infinity */
	return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
	unsigned sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	float v;
	if (exp == 0)
		v = ldexpf((float)mant, -24);
	else if (exp == 31)
		v = mant ? NAN : INFINITY;
	else
		v = ldexpf((float)(mant | 0x400), (int)exp - 25);
	return sign ? -v : v;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* Stores v (an integer value, or a float result) as element i of buf. Integer
 * types keep the low bits (two's complement wrap), as the reduction would. */
static void store(const struct type_info *t, void *buf, size_t i, double v, uint64_t iv)
{
	switch (t->type) {
	case WEFT_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)iv; break;
	case WEFT_UINT8: ((uint8_t *)buf)[i] = (uint8_t)iv; break;
	case WEFT_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)iv; break;
	case WEFT_UINT32: ((uint32_t *)buf)[i] = (uint32_t)iv; break;
	case WEFT_INT64: ((int64_t *)buf)[i] = (int64_t)iv; break;
	case WEFT_UINT64: ((uint64_t *)buf)[i] = iv; break;
	case WEFT_FLOAT16: ((uint16_t *)buf)[i] = f32_to_f16((float)v); break;
	case WEFT_BFLOAT16: ((uint16_t *)buf)[i] = f32_to_bf16((float)v); break;
	case WEFT_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case WEFT_FLOAT64: ((double *)buf)[i] = v; break;
	default: break;
	}
}

static double load_f(const struct type_info *t, const void *buf, size_t i)
{
	switch (t->type) {
	case WEFT_FLOAT16: return f16_to_f32(((const uint16_t *)buf)[i]);
	case WEFT_BFLOAT16: return bf16_to_f32(((const uint16_t *)buf)[i]);
	case WEFT_FLOAT32: return ((const float *)buf)[i];
	case WEFT_FLOAT64: return ((const double *)buf)[i];
	default: return 0;
	}
}

/* ----------------------------------------------------------- data pattern
 * Every rank can compute every rank's input from (seed, rank, index), so each
 * verifies its own output against a reference computed locally. Values are
 * small non-negative integers: reductions of them are exact in every type and
 * in any order (products use 1 and 2 only, so they stay powers of two). */
struct pattern {
	const struct type_info *t;
	enum weft_redop op;
	int reduces;
	uint64_t seed, range; /* values are 0..range-1 (or 1..2 for prod) */
};

static void pattern_init(struct pattern *p, const struct opts *o, int nranks, uint64_t size)
{
	p->t = o->type;
	p->op = o->op;
	p->reduces = colls[o->coll].reduces;
	/* A different pattern per size, so a stale result of the previous size is wrong. */
	p->seed = splitmix64(o->seed ^ (size * 0x100000001B3ull));
	double lim = o->type->limit;
	if (!p->reduces) {
		/* Below the type's largest value: all ones is the poison. */
		p->range = lim >= 256 ? 256 : (uint64_t)lim;
	} else {
		/* Keep the sum of all ranks within the exact range; avg needs the sum too. */
		double r = floor(lim / nranks);
		p->range = r >= 9 ? 9 : r >= 1 ? (uint64_t)r + 1 : 1;
	}
}

static inline uint64_t pattern_val(const struct pattern *p, int rank, uint64_t i)
{
	uint64_t h = splitmix64(p->seed ^ ((uint64_t)(rank + 1) << 48) ^ i);
	if (p->reduces && p->op == WEFT_PROD)
		return 1 + (h & 1);
	return h % p->range;
}

/* Writes rank's input elements [first, first+n) into buf[0..n). */
static void pattern_fill(const struct pattern *p, void *buf, int rank, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = pattern_val(p, rank, first + i);
		store(p->t, buf, i, (double)v, v);
	}
}

/* The reduction over all ranks of element idx, stored as element i of buf. */
static void pattern_reduce(const struct pattern *p, void *buf, size_t i, int nranks, uint64_t idx)
{
	uint64_t acc = pattern_val(p, 0, idx);
	for (int r = 1; r < nranks; r++) {
		uint64_t v = pattern_val(p, r, idx);
		switch (p->op) {
		case WEFT_SUM:
		case WEFT_AVG: acc += v; break;
		case WEFT_PROD: acc *= v; break; /* wraps like the integer types do */
		case WEFT_MIN: acc = v < acc ? v : acc; break;
		case WEFT_MAX: acc = v > acc ? v : acc; break;
		default: break;
		}
	}
	double f = (double)acc;
	if (p->op == WEFT_PROD && p->t->is_float) {
		/* The product of 1s and 2s is 2^k; uint64 wraps past 2^63, so count the 2s. */
		int k = 0;
		for (int r = 0; r < nranks; r++)
			k += pattern_val(p, r, idx) == 2;
		f = ldexp(1.0, k);
	}
	if (p->op == WEFT_AVG) {
		f /= nranks;
		acc /= (uint64_t)nranks;
	}
	store(p->t, buf, i, f, acc);
}

/* Counts elements of got that differ from want. Exact, except the average of
 * floating-point types, where the division may round either way. */
static uint64_t count_wrong(const struct type_info *t, enum weft_redop op, int reduces, const void *got,
			    const void *want, size_t n)
{
	uint64_t wrong = 0;
	if (reduces && op == WEFT_AVG && t->is_float) {
		double tol = t->type == WEFT_FLOAT16 ? 2e-3 : t->type == WEFT_BFLOAT16 ? 1.6e-2
			     : t->type == WEFT_FLOAT32 ? 2.5e-7 : 1e-15;
		for (size_t i = 0; i < n; i++) {
			double g = load_f(t, got, i), w = load_f(t, want, i);
			if (!(fabs(g - w) <= tol * fabs(w)))
				wrong++;
		}
		return wrong;
	}
	const unsigned char *a = got, *b = want;
	for (size_t i = 0; i < n; i++)
		if (memcmp(a + i * t->size, b + i * t->size, t->size) != 0)
			wrong++;
	return wrong;
}

/* Fills with a value the pattern never produces (NaN for floats, all ones for
 * integers, whose patterns stay far below it). */
static void poison(void *buf, size_t bytes)
{
	memset(buf, 0xff, bytes);
}

/* ------------------------------------------------------------------ output */

static void print_time(double us, char *out, size_t len)
{
	if (us >= 100000.0)
		snprintf(out, len, "%7.0f", us);
	else if (us >= 10000.0)
		snprintf(out, len, "%7.1f", us);
	else
		snprintf(out, len, "%7.2f", us);
}

static void print_header_common(const struct run *r, const char *what)
{
	const struct opts *o = r->o;
	int v = weft_get_version();
	char date[64];
	time_t t = time(NULL);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %z", localtime(&t));
	char host[256] = "?";
	gethostname(host, sizeof(host) - 1);
	printf("# weft-perf: weft %d.%d.%d (built with %d.%d.%d)\n", v / 10000, v / 100 % 100, v % 100,
	       WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
	printf("# Test starting: %s\n", what);
	printf("# nranks %d minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu64 "(%s) warmup iters: %d "
	       "iters: %d validation: %d mem: %s fresh-buffers: %d\n",
	       r->nranks, o->min_bytes, o->max_bytes, o->factor > 1 ? o->factor : o->step_bytes,
	       o->factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check, o->mem_cuda ? "cuda" : "host",
	       o->fresh);
	printf("# command: %s\n", o->cmdline);
	printf("# date: %s host: %s\n", date, host);
}

/* Sizes of the sweep: min, then times factor (or plus step) up to max. */
static uint64_t next_size(const struct opts *o, uint64_t s)
{
	if (o->factor > 1)
		return s ? (s > UINT64_MAX / o->factor ? UINT64_MAX : s * o->factor) : 1;
	return s > UINT64_MAX - o->step_bytes ? UINT64_MAX : s + o->step_bytes;
}

/* Sums per-rank counts and takes the max of per-rank times over the comm. */
struct rank_result {
	double us[2];
	uint64_t wrong[2];
	double nccl_us[2]; /* --peer nccl: the same calls through NCCL */
	uint64_t nccl_wrong[2];
};

static int gather_results(const struct run *r, struct rank_result *mine, struct rank_result *total)
{
	struct rank_result *all = calloc((size_t)r->nranks, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = weft_comm_allgather(r->comm, mine, all, sizeof(*mine));
	if (rc != 0) {
		free(all);
		return fail(r, rc, "weft_comm_allgather of the results");
	}
	memset(total, 0, sizeof(*total));
	for (int i = 0; i < r->nranks; i++)
		for (int k = 0; k < 2; k++) {
			total->us[k] = all[i].us[k] > total->us[k] ? all[i].us[k] : total->us[k];
			total->wrong[k] += all[i].wrong[k];
			total->nccl_us[k] = all[i].nccl_us[k] > total->nccl_us[k] ? all[i].nccl_us[k] : total->nccl_us[k];
			total->nccl_wrong[k] += all[i].nccl_wrong[k];
		}
	free(all);
	return 0;
}

/* ------------------------------------------------------ primitive benchmarks
 * Between ranks 0 and 1 over one connection. Each rank's buffer has two halves
 * of `half` bytes: [0, half) is where the peer writes, [half, 2 half) what this
 * rank sends from in the data check. */
struct prim {
	const struct run *r;
	const char *transport;
	int peer;
	weft_conn_t *conn;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	uint64_t sent, seen; /* last token signalled to the peer / awaited here */
	size_t half;
	unsigned char *buf;
	weft_mem_t *mem;
	weft_rmem_t *rmem;
};

static int prim_bufs_setup(struct prim *p, size_t half)
{
	int rc;
	/* Registration of 0 bytes is not a thing; a 0-byte benchmark moves nothing anyway. */
	half = half ? half : 1;
	p->half = half;
	p->buf = alloc_buf(2 * half);
	if (!p->buf)
		return fail(p->r, -ENOMEM, "allocating %zu bytes", 2 * half);
	rc = weft_mem_register(p->r->comm, p->buf, 2 * half, WEFT_MEM_HOST, &p->mem);
	if (rc != 0) {
		fail(p->r, rc, "weft_mem_register of %zu bytes", 2 * half);
		goto err_free;
	}
	rc = weft_mem_exchange(p->mem, p->peer, &p->rmem);
	if (rc != 0) {
		fail(p->r, rc, "weft_mem_exchange with rank %d", p->peer);
		goto err_dereg;
	}
	return 0;

err_dereg:
	weft_mem_deregister(p->mem);
	p->mem = NULL;
err_free:
	free(p->buf);
	p->buf = NULL;
	return rc;
}

/* The caller made sure the peer no longer writes here. */
static int prim_bufs_teardown(struct prim *p)
{
	int rc = p->conn ? weft_flush(p->conn) : 0;
	if (rc != 0)
		fail(p->r, rc, "weft_flush");
	weft_rmem_release(p->rmem);
	weft_mem_deregister(p->mem);
	free(p->buf);
	p->rmem = NULL;
	p->mem = NULL;
	p->buf = NULL;
	return rc;
}

static int prim_signal(struct prim *p)
{
	int rc = weft_signal(p->conn, p->rsem, ++p->sent);
	return rc ? fail(p->r, rc, "weft_signal of token %" PRIu64 " to rank %d", p->sent, p->peer) : 0;
}

/* Signal, then wait until it landed. Used where this rank next blocks outside
 * the transport (a bootstrap message, the end of a size): the core drives a
 * transport only inside weft calls that wait on it, and software providers
 * (ofi shm, tcp) deliver nothing without that. */
static int prim_signal_flushed(struct prim *p)
{
	int rc = prim_signal(p);
	if (rc == 0 && (rc = weft_flush(p->conn)) != 0)
		fail(p->r, rc, "weft_flush");
	return rc;
}

static int prim_wait(struct prim *p)
{
	int rc = weft_sem_wait(p->sem, ++p->seen);
	return rc ? fail(p->r, rc, "weft_sem_wait for token %" PRIu64 " from rank %d", p->seen, p->peer) : 0;
}

static int prim_put(struct prim *p, uint64_t dst_off, uint64_t src_off, size_t len)
{
	if (len == 0)
		return 0;
	int rc = weft_put(p->conn, p->rmem, dst_off, p->mem, src_off, len);
	return rc ? fail(p->r, rc, "weft_put of %zu bytes to rank %d", len, p->peer) : 0;
}

/* Puts of one size per flush: many in flight, but one iteration moves at most
 * 16 MiB (or one put) so that large sizes do not take forever. */
static int puts_per_flush(const struct opts *o, size_t size)
{
	uint64_t cap = size ? (16u << 20) / size : (uint64_t)o->window;
	if (cap < 1)
		cap = 1;
	return (int)(cap < (uint64_t)o->window ? cap : (uint64_t)o->window);
}

/* Bandwidth of weft_put: rank 0 writes, rank 1 waits on its semaphore (which
 * drives its side's progress) until rank 0 signals the end. Returns the time
 * per put in microseconds on rank 0. */
static int bench_put(struct prim *p, size_t size, double *us)
{
	const struct opts *o = p->r->o;
	int nput = puts_per_flush(o, size), rc = 0;
	double t0 = 0;
	for (int it = -o->warmup; it < o->iters; it++) {
		if (it == 0)
			t0 = now_us();
		if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
			return rc;
		if (p->r->rank == 0) {
			uint64_t slots = size ? p->half / size : 1;
			for (int j = 0; j < nput && rc == 0; j++)
				rc = prim_put(p, (j % slots) * size, p->half, size);
			if (rc == 0 && (rc = weft_flush(p->conn)) != 0)
				fail(p->r, rc, "weft_flush");
			if (rc == 0 && o->fresh)
				rc = prim_signal(p); /* lets rank 1 release its buffer */
		} else if (o->fresh) {
			rc = prim_wait(p);
		}
		if (o->fresh) {
			int trc = prim_bufs_teardown(p);
			rc = rc ? rc : trc;
		}
		if (rc != 0)
			return rc;
	}
	double t1 = now_us();
	if (!o->fresh)
		rc = p->r->rank == 0 ? prim_signal_flushed(p) : prim_wait(p);
	*us = o->iters ? (t1 - t0) / o->iters / nput : 0;
	return rc;
}

/* Latency: rank 0 puts size bytes and signals; rank 1 waits, puts the same
 * back and signals; half the round trip, on rank 0. */
static int bench_pingpong(struct prim *p, size_t size, double *us)
{
	const struct opts *o = p->r->o;
	int rc = 0;
	double t0 = 0;
	for (int it = -o->warmup; it < o->iters; it++) {
		if (it == 0)
			t0 = now_us();
		if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
			return rc;
		if (p->r->rank == 0) {
			if ((rc = prim_put(p, 0, 0, size)) == 0 && (rc = prim_signal(p)) == 0)
				rc = prim_wait(p);
		} else {
			if ((rc = prim_wait(p)) == 0 && (rc = prim_put(p, 0, 0, size)) == 0)
				rc = prim_signal(p);
		}
		if (o->fresh) {
			int trc = prim_bufs_teardown(p);
			rc = rc ? rc : trc;
		}
		if (rc != 0)
			return rc;
	}
	*us = o->iters ? (now_us() - t0) / o->iters / 2 : 0;
	return 0;
}

static void random_bytes(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = splitmix64(seed ^ (i / 8));
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static uint64_t count_wrong_bytes(const unsigned char *got, size_t len, uint64_t seed)
{
	uint64_t wrong = 0;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = splitmix64(seed ^ (i / 8));
		size_t n = len - i < 8 ? len - i : 8;
		for (size_t k = 0; k < n; k++)
			wrong += got[i + k] != ((unsigned char *)&v)[k];
	}
	return wrong;
}

/* One checked transfer per direction the benchmark uses: random bytes into a
 * poisoned destination, compared by the receiver. The total is on rank 0. */
static int check_prim(struct prim *p, size_t size, int both_ways, uint64_t *wrong)
{
	const struct run *r = p->r;
	const struct opts *o = r->o;
	uint64_t seed0 = splitmix64(o->seed ^ size ^ 0x1000), seed1 = splitmix64(o->seed ^ size ^ 0x2000);
	uint64_t w1 = 0, w0 = 0;
	int rc;
	char ready = 1;

	if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
		return rc;
	poison(p->buf, size);
	if (r->rank == 1) {
		if ((rc = weft_comm_send(r->comm, 0, TAG_READY, &ready, 1)) != 0) {
			fail(r, rc, "weft_comm_send to rank 0");
			goto out;
		}
		if ((rc = prim_wait(p)) != 0)
			goto out;
		w1 = count_wrong_bytes(p->buf, size, seed0);
		if (both_ways) {
			random_bytes(p->buf + p->half, size, seed1);
			if ((rc = prim_put(p, 0, p->half, size)) != 0 || (rc = prim_signal_flushed(p)) != 0)
				goto out;
		}
		if ((rc = weft_comm_send(r->comm, 0, TAG_WRONG, &w1, sizeof(w1))) != 0)
			fail(r, rc, "weft_comm_send to rank 0");
	} else {
		if ((rc = weft_comm_recv(r->comm, 1, TAG_READY, &ready, 1)) != 0) {
			fail(r, rc, "weft_comm_recv from rank 1");
			goto out;
		}
		random_bytes(p->buf + p->half, size, seed0);
		if ((rc = prim_put(p, 0, p->half, size)) != 0 || (rc = prim_signal_flushed(p)) != 0)
			goto out;
		if (both_ways) {
			if ((rc = prim_wait(p)) != 0)
				goto out;
			w0 = count_wrong_bytes(p->buf, size, seed1);
		}
		if ((rc = weft_comm_recv(r->comm, 1, TAG_WRONG, &w1, sizeof(w1))) != 0) {
			fail(r, rc, "weft_comm_recv from rank 1");
			goto out;
		}
		*wrong = w0 + w1;
	}
out:
	if (o->fresh) {
		/* Rank 1 must not release its buffer before rank 0's put landed:
		 * it has, since rank 1 saw the signal behind it. */
		int trc = prim_bufs_teardown(p);
		rc = rc ? rc : trc;
	}
	return rc;
}

static int run_prim(const struct run *r, const char *transport, double *bw_sum, int *bw_n, uint64_t *wrong_total)
{
	const struct opts *o = r->o;
	struct prim p = {.r = r, .transport = transport, .peer = 1 - r->rank};
	int rc = 0;
	char desc[512] = "";

	if (r->rank >= 2)
		goto out_barrier;
	rc = weft_connect(r->comm, p.peer, transport, &p.conn);
	if (rc != 0) {
		fail(r, rc, "weft_connect to rank %d over %s%s%s", p.peer, transport ? "transport '" : "",
		     transport ? transport : "the transport the core chooses", transport ? "'" : "");
		goto out_barrier;
	}
	if (weft_conn_describe(p.conn, desc, sizeof(desc)) != 0)
		snprintf(desc, sizeof(desc), "%s", weft_conn_transport(p.conn));
	desc[sizeof(desc) - 1] = '\0';
	if ((rc = weft_sem_create(r->comm, &p.sem)) != 0) {
		fail(r, rc, "weft_sem_create");
		goto err_close;
	}
	if ((rc = weft_sem_exchange(p.sem, p.peer, &p.rsem)) != 0) {
		fail(r, rc, "weft_sem_exchange with rank %d", p.peer);
		goto err_sem;
	}
	if (!o->fresh && (rc = prim_bufs_setup(&p, o->max_bytes)) != 0)
		goto err_rsem;

	if (r->rank == 0) {
		printf("# transport: %s (rank 0 -> rank 1: %s)\n", weft_conn_transport(p.conn), desc);
		if (o->bench == BENCH_PUT)
			printf("# put: rank 0 writes into rank 1, up to %d puts in flight per weft_flush (at most 16 MiB);"
			       " time per put\n", o->window);
		else
			printf("# pingpong: put + signal from rank 0 to rank 1 and back; time is half the round trip\n");
		printf("#\n");
		printf("# %10s  %7s  %6s  %6s\n", "size", "time", "bw", "#wrong");
		printf("# %10s  %7s  %6s  %6s\n", "(B)", "(us)", "(GB/s)", "");
		fflush(stdout);
	}
	for (uint64_t size = o->min_bytes; size <= o->max_bytes; size = next_size(o, size)) {
		double us = 0;
		uint64_t wrong = 0;
		rc = o->bench == BENCH_PUT ? bench_put(&p, size, &us) : bench_pingpong(&p, size, &us);
		if (rc == 0 && o->check)
			rc = check_prim(&p, size, o->bench == BENCH_PINGPONG, &wrong);
		if (rc != 0)
			break;
		if (r->rank == 0) {
			char ts[32], ws[32];
			double bw = us > 0 ? size / (us * 1e3) : 0;
			print_time(us, ts, sizeof(ts));
			if (o->check)
				snprintf(ws, sizeof(ws), "%6" PRIu64, wrong);
			else
				snprintf(ws, sizeof(ws), "%6s", "N/A");
			printf("%12" PRIu64 "  %7s  %6.2f  %6s\n", size, ts, bw, ws);
			fflush(stdout);
			*bw_sum += bw;
			(*bw_n)++;
			*wrong_total += wrong;
		}
		if (size == o->max_bytes || next_size(o, size) <= size)
			break;
	}
	if (!o->fresh) {
		int trc = prim_bufs_teardown(&p);
		rc = rc ? rc : trc;
	}
err_rsem:
	weft_rsem_release(p.rsem);
err_sem:
	weft_sem_destroy(p.sem);
err_close:
	weft_conn_close(p.conn);
	if (rc != 0)
		return rc;
out_barrier:
	if (rc == 0 && (rc = weft_comm_barrier(r->comm)) != 0)
		fail(r, rc, "weft_comm_barrier");
	return rc;
}

/* -------------------------------------------------------------- collectives */

/* Element counts of one size, as nccl-tests counts them: -b/-e give the whole
 * buffer, and collectives that split it give each rank size/type/nranks
 * elements, aligned down to 16 bytes. */
struct coll_shape {
	size_t count;          /* the count argument of the call, printed as "count" */
	size_t send_n, recv_n; /* elements in the send and receive buffers */
	size_t bytes;          /* printed "size": the larger buffer */
};

static void coll_shape(const struct opts *o, int n, uint64_t size, struct coll_shape *s)
{
	size_t ts = o->type->size, elems = size / ts;
	size_t align = 16 / ts;
	switch (o->coll) {
	case C_ALLGATHER:
		s->count = (elems / n) & ~(align - 1);
		s->send_n = s->count;
		s->recv_n = s->count * n;
		break;
	case C_REDUCE_SCATTER:
		s->count = (elems / n) & ~(align - 1);
		s->send_n = s->count * n;
		s->recv_n = s->count;
		break;
	case C_ALLTOALL:
		s->count = (elems / n) & ~(align - 1);
		s->send_n = s->recv_n = s->count * n;
		break;
	default:
		s->count = s->send_n = s->recv_n = elems;
		break;
	}
	s->bytes = (s->send_n > s->recv_n ? s->send_n : s->recv_n) * ts;
}

static double busbw_factor(enum coll c, int n)
{
	switch (colls[c].busbw_kind) {
	case 1: return (double)(n - 1) / n;
	case 2: return 2.0 * (n - 1) / n;
	default: return 1.0;
	}
}

/* The same call through NCCL (--peer nccl). */
static int nccl_call(const struct run *r, const struct coll_shape *s, const void *sbuf, void *rbuf)
{
	const struct opts *o = r->o;
	int t = o->type->nccl, op = nccl_redops[o->op], n = r->nranks, rc, erc;
	void *c = r->nccl, *st = r->stream;
	switch (o->coll) {
	case C_ALLREDUCE: rc = nccl.all_reduce(sbuf, rbuf, s->count, t, op, c, st); break;
	case C_ALLGATHER: rc = nccl.all_gather(sbuf, rbuf, s->count, t, c, st); break;
	case C_REDUCE_SCATTER: rc = nccl.reduce_scatter(sbuf, rbuf, s->count, t, op, c, st); break;
	case C_BROADCAST: rc = nccl.broadcast(sbuf, rbuf, s->count, t, o->root, c, st); break;
	case C_REDUCE: rc = nccl.reduce(sbuf, rbuf, s->count, t, op, o->root, c, st); break;
	case C_ALLTOALL: rc = nccl.alltoall(sbuf, rbuf, s->count, t, c, st); break;
	case C_SENDRECV:
		rc = nccl.group_start();
		if (rc == 0)
			rc = nccl.send(sbuf, s->count, t, (r->rank + 1) % n, c, st);
		if (rc == 0)
			rc = nccl.recv(rbuf, s->count, t, (r->rank + n - 1) % n, c, st);
		erc = nccl.group_end();
		rc = rc ? rc : erc;
		break;
	default: return -EINVAL;
	}
	if (rc != 0)
		return fail(r, -EIO, "NCCL %s: %s", colls[o->coll].name, nccl.error_string(rc));
	return 0;
}

enum lib { LIB_WEFT, LIB_NCCL };
static const char *const lib_names[] = {"weft", "nccl"};

static int coll_call(const struct run *r, const struct coll_shape *s, const void *sbuf, void *rbuf);

static int lib_call(const struct run *r, enum lib lib, const struct coll_shape *s, const void *sbuf, void *rbuf)
{
	return lib == LIB_NCCL ? nccl_call(r, s, sbuf, rbuf) : coll_call(r, s, sbuf, rbuf);
}

static int coll_call(const struct run *r, const struct coll_shape *s, const void *sbuf, void *rbuf)
{
	const struct opts *o = r->o;
	enum weft_datatype t = o->type->type;
	int rc, n = r->nranks;
	void *st = r->stream;
	switch (o->coll) {
	case C_ALLREDUCE: return weft_allreduce(sbuf, rbuf, s->count, t, o->op, r->comm, st);
	case C_ALLGATHER: return weft_allgather(sbuf, rbuf, s->count, t, r->comm, st);
	case C_REDUCE_SCATTER: return weft_reduce_scatter(sbuf, rbuf, s->count, t, o->op, r->comm, st);
	case C_BROADCAST: return weft_broadcast(sbuf, rbuf, s->count, t, o->root, r->comm, st);
	case C_REDUCE: return weft_reduce(sbuf, rbuf, s->count, t, o->op, o->root, r->comm, st);
	case C_ALLTOALL: return weft_alltoall(sbuf, rbuf, s->count, t, r->comm, st);
	case C_SENDRECV:
		/* nccl-tests' pattern: send to the next rank, receive from the previous. */
		if ((rc = weft_group_start()) != 0)
			return rc;
		rc = weft_send(sbuf, s->count, t, (r->rank + 1) % n, r->comm, st);
		if (rc == 0)
			rc = weft_recv(rbuf, s->count, t, (r->rank + n - 1) % n, r->comm, st);
		int erc = weft_group_end();
		return rc ? rc : erc;
	default: return -EINVAL;
	}
}

/* The buffers of one call. In place, one buffer serves both, laid out as the
 * API's in-place rules say. With --mem cuda each buffer has a host mirror
 * where the input is laid out and the output read back. */
struct coll_bufs {
	unsigned char *send, *recv; /* what the call gets */
	unsigned char *alloc[2];
	unsigned char *host[2]; /* host views of alloc[] (alloc[] itself for host memory) */
	size_t len[2];
};

static void coll_bufs_free(const struct opts *o, struct coll_bufs *b)
{
	for (int k = 0; k < 2; k++) {
		if (b->host[k] != b->alloc[k])
			free(b->host[k]);
		dev_free(o, b->alloc[k]);
	}
	memset(b, 0, sizeof(*b));
}

static int coll_bufs_make(const struct run *r, const struct coll_shape *s, int inplace, struct coll_bufs *b)
{
	const struct opts *o = r->o;
	size_t ts = o->type->size;
	memset(b, 0, sizeof(*b));
	if (inplace) {
		b->len[0] = (s->send_n > s->recv_n ? s->send_n : s->recv_n) * ts;
	} else {
		b->len[0] = s->send_n * ts;
		b->len[1] = s->recv_n * ts;
	}
	for (int k = 0; k < (inplace ? 1 : 2); k++) {
		b->alloc[k] = dev_alloc(o, b->len[k]);
		b->host[k] = o->mem_cuda ? alloc_buf(b->len[k]) : b->alloc[k];
		if (!b->alloc[k] || !b->host[k]) {
			coll_bufs_free(o, b);
			return fail(r, -ENOMEM, "allocating %zu bytes of %s memory", b->len[k], o->mem_cuda ? "cuda" : "host");
		}
	}
	if (!inplace) {
		b->send = b->alloc[0];
		b->recv = b->alloc[1];
		return 0;
	}
	b->send = b->recv = b->alloc[0];
	if (o->coll == C_ALLGATHER)
		b->send = b->recv + (size_t)r->rank * s->count * ts;
	else if (o->coll == C_REDUCE_SCATTER)
		b->recv = b->send + (size_t)r->rank * s->count * ts;
	return 0;
}

/* The host view of a pointer into one of b's buffers. */
static unsigned char *coll_host(const struct coll_bufs *b, const unsigned char *p)
{
	int k = b->alloc[1] && p >= b->alloc[1] && p < b->alloc[1] + b->len[1];
	return b->host[k] + (p - b->alloc[k]);
}

/* Copies the host views to the device (--mem cuda). */
static int coll_bufs_upload(const struct run *r, const struct coll_bufs *b)
{
	for (int k = 0; k < 2; k++)
		if (b->alloc[k] && dev_put(r->o, b->alloc[k], b->host[k], b->len[k]) != 0)
			return fail(r, -EIO, "copying %zu bytes to the device", b->len[k]);
	return 0;
}

/* Whether this rank's output is defined (reduce writes on the root only). */
static int coll_has_output(const struct run *r)
{
	return r->o->coll != C_REDUCE || r->rank == r->o->root;
}

/* The reference output of this rank: recv_n elements into want. */
static void coll_expected(const struct run *r, const struct pattern *p, const struct coll_shape *s, void *want)
{
	int n = r->nranks, me = r->rank;
	size_t c = s->count, ts = p->t->size;
	unsigned char *w = want;
	switch (r->o->coll) {
	case C_ALLREDUCE:
	case C_REDUCE:
		for (size_t i = 0; i < c; i++)
			pattern_reduce(p, w, i, n, i);
		break;
	case C_REDUCE_SCATTER:
		for (size_t i = 0; i < c; i++)
			pattern_reduce(p, w, i, n, (uint64_t)me * c + i);
		break;
	case C_ALLGATHER:
		for (int q = 0; q < n; q++)
			pattern_fill(p, w + (size_t)q * c * ts, q, 0, c);
		break;
	case C_BROADCAST: pattern_fill(p, w, r->o->root, 0, c); break;
	case C_ALLTOALL:
		for (int q = 0; q < n; q++)
			pattern_fill(p, w + (size_t)q * c * ts, q, (uint64_t)me * c, c);
		break;
	case C_SENDRECV: pattern_fill(p, w, (me + n - 1) % n, 0, c); break;
	default: break;
	}
}

/* This rank's input as coll_prepare last laid it out, for one size and mode:
 * every measurement of a size starts from the same input, and hashing it
 * element by element takes seconds at 1 GiB where copying it takes a tenth. */
static struct {
	unsigned char *img;
	size_t len, send_n, recv_n;
	uint64_t seed, range;
	int inplace;
} prep_cache;

static int prep_cached(const struct pattern *p, const struct coll_shape *s, int inplace, size_t len)
{
	return prep_cache.img && prep_cache.len == len && prep_cache.send_n == s->send_n &&
	       prep_cache.recv_n == s->recv_n && prep_cache.inplace == inplace && prep_cache.seed == p->seed &&
	       prep_cache.range == p->range;
}

static void prep_keep(const struct pattern *p, const struct coll_shape *s, int inplace, const unsigned char *from,
		      size_t len)
{
	free(prep_cache.img);
	memset(&prep_cache, 0, sizeof(prep_cache));
	if (len == 0 || !(prep_cache.img = malloc(len)))
		return; /* no copy kept: the next call fills again */
	memcpy(prep_cache.img, from, len);
	prep_cache.len = len;
	prep_cache.send_n = s->send_n;
	prep_cache.recv_n = s->recv_n;
	prep_cache.inplace = inplace;
	prep_cache.seed = p->seed;
	prep_cache.range = p->range;
}

/* Lays out this rank's input for one checked call and poisons the output. */
static int coll_prepare(const struct run *r, const struct pattern *p, const struct coll_shape *s, int inplace,
			struct coll_bufs *b)
{
	size_t ts = p->t->size;
	int in_rank = r->rank;
	if (r->o->coll == C_BROADCAST)
		in_rank = r->o->root;
	/* In place the output region may overlap the input: the whole buffer is
	 * poisoned, then the input written; out of place the send buffer. */
	unsigned char *in = inplace ? b->host[0] : coll_host(b, b->send);
	size_t len = inplace ? (s->send_n > s->recv_n ? s->send_n : s->recv_n) * ts : s->send_n * ts;
	if (prep_cached(p, s, inplace, len)) {
		memcpy(in, prep_cache.img, len);
	} else {
		if (inplace)
			poison(b->host[0], len);
		if (!inplace || r->o->coll != C_BROADCAST || r->rank == r->o->root)
			pattern_fill(p, coll_host(b, b->send), in_rank, 0, s->send_n);
		prep_keep(p, s, inplace, in, len);
	}
	if (!inplace)
		poison(coll_host(b, b->recv), s->recv_n * ts);
	return coll_bufs_upload(r, b);
}

/* Waits for what this rank enqueued (--mem cuda); host calls completed already. */
static int coll_sync(const struct run *r)
{
	if (!r->stream || cu.stream_sync(r->stream) == 0)
		return 0;
	return fail(r, -EIO, "cudaStreamSynchronize");
}

/* --graph N: o->iters calls captured in one CUDA graph, launched N times and
 * timed with CUDA events, as nccl-tests' -G does. Returns us per call. */
static int coll_time_graph(const struct run *r, enum lib lib, const struct coll_shape *s, const struct coll_bufs *b,
			   double *us)
{
	const struct opts *o = r->o;
	void *g = NULL, *exec = NULL, *ev[2] = {NULL, NULL};
	int rc = 0;
	if (cu.begin_capture(r->stream, CUDART_CAPTURE_RELAXED) != 0)
		return fail(r, -EIO, "cudaStreamBeginCapture");
	for (int it = 0; it < o->iters && rc == 0; it++)
		if ((rc = lib_call(r, lib, s, b->send, b->recv)) != 0)
			fail(r, rc, "%s %s of %zu bytes under graph capture", lib_names[lib], colls[o->coll].name, s->bytes);
	if (cu.end_capture(r->stream, &g) != 0 || !g)
		return rc ? rc : fail(r, -EIO, "cudaStreamEndCapture");
	if (rc == 0 && cu.instantiate(&exec, g, 0) != 0)
		rc = fail(r, -EIO, "cudaGraphInstantiate");
	if (rc == 0 && (cu.event_create(&ev[0]) != 0 || cu.event_create(&ev[1]) != 0))
		rc = fail(r, -EIO, "cudaEventCreate");
	/* One launch to warm the graph up, then the timed ones. */
	if (rc == 0 && (cu.graph_launch(exec, r->stream) != 0 || (rc = coll_sync(r)) != 0))
		rc = rc ? rc : fail(r, -EIO, "cudaGraphLaunch");
	if (rc == 0 && (rc = weft_comm_barrier(r->comm)) != 0)
		fail(r, rc, "weft_comm_barrier");
	if (rc == 0) {
		cu.event_record(ev[0], r->stream);
		for (int l = 0; l < o->graph && rc == 0; l++)
			if (cu.graph_launch(exec, r->stream) != 0)
				rc = fail(r, -EIO, "cudaGraphLaunch");
		cu.event_record(ev[1], r->stream);
		float ms = 0;
		if (rc == 0 && (cu.event_sync(ev[1]) != 0 || cu.event_elapsed(&ms, ev[0], ev[1]) != 0))
			rc = fail(r, -EIO, "timing the graph launches with CUDA events");
		*us = o->graph && o->iters ? ms * 1e3 / ((double)o->graph * o->iters) : 0;
	}
	for (int k = 0; k < 2; k++)
		if (ev[k])
			cu.event_destroy(ev[k]);
	if (exec)
		cu.exec_destroy(exec);
	cu.graph_destroy(g);
	return rc;
}

/* Host memory: the ranks leave weft_comm_barrier (the bootstrap's TCP and a
 * service thread) up to tens of microseconds apart, which the first timed
 * call then absorbs: with 20 iterations, a microsecond per call at small
 * sizes. A one-element allreduce through the comm's own path (what the timed
 * calls use) releases them within a cache line's latency, as mpi_bench's
 * MPI_Barrier in shared memory does. */
static int start_line(const struct run *r)
{
	uint32_t one = 1, all = 0;
	int rc = weft_allreduce(&one, &all, 1, WEFT_UINT32, WEFT_SUM, r->comm, NULL);
	if (rc != 0)
		return fail(r, rc, "the allreduce that starts the clock");
	if (all != (uint32_t)r->nranks)
		return fail(r, -EPROTO, "the allreduce that starts the clock gave %u, not %d", all, r->nranks);
	return 0;
}

/* Times one mode (out of place or in place) of one size and checks it. Host
 * memory: wall clock over the calls. Device memory: CUDA events around calls
 * enqueued on the stream after warm-up, or graph launches (--graph). */
static int coll_measure(const struct run *r, enum lib lib, const struct coll_shape *s, const struct pattern *p,
			int inplace, const void *want, double *us, uint64_t *wrong)
{
	const struct opts *o = r->o;
	struct coll_bufs b, fresh;
	int rc;
	double t0 = 0;
	void *ev[2] = {NULL, NULL};
	const char *mode = inplace ? "in place" : "out of place";

	if ((rc = coll_bufs_make(r, s, inplace, &b)) != 0)
		return rc;
	/* Defined contents for the timed calls, so that no float op meets garbage. */
	if ((rc = coll_prepare(r, p, s, inplace, &b)) != 0)
		goto out;
	if (o->mem_cuda && !o->fresh && (cu.event_create(&ev[0]) != 0 || cu.event_create(&ev[1]) != 0)) {
		rc = fail(r, -EIO, "cudaEventCreate");
		goto out;
	}
	int timed_iters = o->graph > 0 ? 0 : o->iters;
	for (int it = -o->warmup; it < timed_iters; it++) {
		if (it == 0) {
			if ((rc = coll_sync(r)) != 0)
				goto out;
			if ((rc = weft_comm_barrier(r->comm)) != 0) {
				fail(r, rc, "weft_comm_barrier");
				goto out;
			}
			if (!o->mem_cuda && (rc = start_line(r)) != 0)
				goto out;
			t0 = now_us();
			if (ev[0])
				cu.event_record(ev[0], r->stream);
		}
		if (o->fresh) {
			/* New buffers before the old are freed, so their addresses differ. */
			if ((rc = coll_bufs_make(r, s, inplace, &fresh)) != 0)
				goto out;
			coll_bufs_free(o, &b);
			b = fresh;
		}
		rc = lib_call(r, lib, s, b.send, b.recv);
		if (rc != 0) {
			fail(r, rc, "%s %s %s of %zu bytes (%s)", lib_names[lib], colls[o->coll].name, mode, s->bytes,
			     o->type->name);
			goto out;
		}
	}
	if (o->graph > 0) {
		if ((rc = coll_sync(r)) != 0 || (rc = coll_time_graph(r, lib, s, &b, us)) != 0)
			goto out;
	} else if (ev[0]) {
		float ms = 0;
		cu.event_record(ev[1], r->stream);
		if (cu.event_sync(ev[1]) != 0 || cu.event_elapsed(&ms, ev[0], ev[1]) != 0) {
			rc = fail(r, -EIO, "timing with CUDA events");
			goto out;
		}
		*us = o->iters ? ms * 1e3 / o->iters : 0;
	} else {
		if ((rc = coll_sync(r)) != 0)
			goto out;
		*us = o->iters ? (now_us() - t0) / o->iters : 0;
	}

	*wrong = 0;
	if (o->check) {
		if (o->fresh) {
			if ((rc = coll_bufs_make(r, s, inplace, &fresh)) != 0)
				goto out;
			coll_bufs_free(o, &b);
			b = fresh;
		}
		if ((rc = coll_prepare(r, p, s, inplace, &b)) != 0)
			goto out;
		rc = lib_call(r, lib, s, b.send, b.recv);
		if (rc != 0) {
			fail(r, rc, "checked %s %s %s of %zu bytes (%s)", lib_names[lib], colls[o->coll].name, mode,
			     s->bytes, o->type->name);
			goto out;
		}
		if ((rc = coll_sync(r)) != 0)
			goto out;
		if (coll_has_output(r)) {
			unsigned char *h = coll_host(&b, b.recv);
			if (dev_get(o, h, b.recv, s->recv_n * o->type->size) != 0) {
				rc = fail(r, -EIO, "copying the output from the device");
				goto out;
			}
			*wrong = count_wrong(p->t, p->op, p->reduces, h, want, s->recv_n);
		}
	}
out:
	for (int k = 0; k < 2; k++)
		if (ev[k])
			cu.event_destroy(ev[k]);
	coll_bufs_free(o, &b);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One mode of one size: --repeat timed runs, weft and NCCL alternating, each
 * library's median kept. */
static int coll_measure_repeated(const struct run *r, const struct coll_shape *s, const struct pattern *p,
				 int inplace, const void *want, struct rank_result *mine)
{
	const struct opts *o = r->o;
	int n = o->repeat, rc = 0;
	double *t = calloc(2 * (size_t)n, sizeof(*t));
	if (!t)
		return fail(r, -ENOMEM, "allocating %d timings", n);
	for (int k = 0; k < n && rc == 0; k++) {
		uint64_t w = 0;
		if ((rc = coll_measure(r, LIB_WEFT, s, p, inplace, want, &t[k], &w)) != 0)
			break;
		mine->wrong[inplace] += w;
		/* NCCL defines no in-place alltoall or send/recv (weft's is exact: a
		 * send the same group overwrites goes from a copy): nothing to compare. */
		if (!o->peer_nccl || (inplace && (o->coll == C_ALLTOALL || o->coll == C_SENDRECV)))
			continue;
		w = 0;
		if ((rc = coll_measure(r, LIB_NCCL, s, p, inplace, want, &t[n + k], &w)) != 0)
			break;
		mine->nccl_wrong[inplace] += w;
	}
	if (rc == 0) {
		qsort(t, (size_t)n, sizeof(*t), cmp_double);
		qsort(t + n, (size_t)n, sizeof(*t), cmp_double);
		mine->us[inplace] = t[n / 2];
		mine->nccl_us[inplace] = t[n + n / 2]; /* 0 where NCCL did not run */
	}
	free(t);
	return rc;
}

static int run_coll(const struct run *r, double *bw_sum, int *bw_n, uint64_t *wrong_total)
{
	const struct opts *o = r->o;
	const struct coll_info *ci = &colls[o->coll];
	int rc = 0;
	void *want = NULL;
	int peer = o->peer_nccl;

	if (r->rank == 0) {
		const char *blank = peer ? "                  " : "";
		printf("#\n");
		if (peer)
			printf("# nccl: the same calls through NCCL, timed the same way; ratio = nccl time / weft time "
			       "(above 1: weft is faster)%s\n",
			       o->repeat > 1 ? "; times are medians of the alternating runs" : "");
		printf("# %10s  %12s  %8s  %6s  %6s           out-of-place         %s              in-place          %s\n",
		       "", "", "", "", "", blank, blank);
		printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s", "size", "count", "type", "redop", "root", "time",
		       "algbw", "busbw", "#wrong");
		if (peer)
			printf("  %7s  %6s", "nccl", "ratio");
		printf("  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
		if (peer)
			printf("  %7s  %6s", "nccl", "ratio");
		printf("\n# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)", "(elements)", "", "", "", "(us)",
		       "(GB/s)", "(GB/s)", "");
		if (peer)
			printf("  %7s  %6s", "(us)", "");
		printf("  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
		if (peer)
			printf("  %7s  %6s", "(us)", "");
		printf("\n");
		fflush(stdout);
	}
	for (uint64_t size = o->min_bytes; size <= o->max_bytes; size = next_size(o, size)) {
		struct coll_shape s;
		struct pattern p;
		struct rank_result mine, all;
		memset(&mine, 0, sizeof(mine));
		coll_shape(o, r->nranks, size, &s);
		pattern_init(&p, o, r->nranks, size);
		if (o->check) {
			want = alloc_buf(s.recv_n * o->type->size);
			if (!want) {
				rc = fail(r, -ENOMEM, "allocating %zu bytes", s.recv_n * o->type->size);
				break;
			}
			if (coll_has_output(r))
				coll_expected(r, &p, &s, want);
		}
		for (int ip = 0; ip < 2 && rc == 0; ip++)
			rc = coll_measure_repeated(r, &s, &p, ip, want, &mine);
		free(want);
		want = NULL;
		if (rc != 0)
			break;
		if ((rc = gather_results(r, &mine, &all)) != 0)
			break;
		if (r->rank == 0) {
			printf("%12zu  %12zu  %8s  %6s  %6d", s.bytes, s.count, o->type->nccl_name,
			       ci->reduces ? redop_names[o->op] : "none", ci->rooted ? o->root : -1);
			for (int ip = 0; ip < 2; ip++) {
				char ts[32], ws[32];
				double algbw = all.us[ip] > 0 ? s.bytes / (all.us[ip] * 1e3) : 0;
				double busbw = algbw * busbw_factor(o->coll, r->nranks);
				uint64_t wrong = all.wrong[ip] + all.nccl_wrong[ip];
				print_time(all.us[ip], ts, sizeof(ts));
				if (o->check)
					snprintf(ws, sizeof(ws), "%6" PRIu64, wrong);
				else
					snprintf(ws, sizeof(ws), "%6s", "N/A");
				printf("  %7s  %6.2f  %6.2f  %6s", ts, algbw, busbw, ws);
				if (peer) {
					if (all.nccl_us[ip] > 0) {
						print_time(all.nccl_us[ip], ts, sizeof(ts));
						printf("  %7s  %6.2f", ts, all.us[ip] > 0 ? all.nccl_us[ip] / all.us[ip] : 0);
					} else {
						printf("  %7s  %6s", "n/a", "n/a");
					}
				}
				*bw_sum += busbw;
				(*bw_n)++;
				*wrong_total += wrong;
			}
			printf("\n");
			fflush(stdout);
		}
		if (size == o->max_bytes || next_size(o, size) <= size)
			break;
	}
	return rc;
}

/* Says on rank 0 what carries the collectives: the transport the core picks
 * between ranks 0 and 1 (both ranks connect; the others need not). Every rank
 * learns rank 0's answer in name. Not fatal when no transport connects: the
 * collective itself then reports what is wrong. */
static int describe_default_transport(const struct run *r, char *name, size_t len)
{
	char mine[64] = "?", desc[512] = "";
	int rc = 0;
	if (r->nranks >= 2 && r->rank < 2) {
		weft_conn_t *conn = NULL;
		rc = weft_connect(r->comm, 1 - r->rank, NULL, &conn);
		if (rc == 0) {
			snprintf(mine, sizeof(mine), "%s", weft_conn_transport(conn));
			if (weft_conn_describe(conn, desc, sizeof(desc)) != 0)
				snprintf(desc, sizeof(desc), "%s", weft_conn_transport(conn));
			desc[sizeof(desc) - 1] = '\0';
			if (r->rank == 0)
				printf("# transport: %s (rank 0 -> rank 1: %s)\n", mine, desc);
			weft_conn_close(conn);
		} else if (rc == -WEFT_ERR_PEER || rc == -WEFT_ERR_ABORTED) {
			return fail(r, rc, "weft_connect to rank %d", 1 - r->rank);
		} else if (r->rank == 0) {
			printf("# transport: none connects rank 0 and rank 1 (%s)\n", weft_strerror(rc));
		}
	}
	char *all = calloc((size_t)r->nranks, sizeof(mine));
	if (!all)
		return fail(r, -ENOMEM, "allocating");
	rc = weft_comm_allgather(r->comm, mine, all, sizeof(mine));
	if (rc == 0) {
		all[sizeof(mine) - 1] = '\0';
		snprintf(name, len, "%s", all);
	} else {
		fail(r, rc, "weft_comm_allgather");
	}
	free(all);
	return rc;
}

static void print_footer(const struct run *r, double bw_sum, int bw_n, uint64_t wrong_total, const char *bw_name)
{
	if (r->rank != 0)
		return;
	printf("# Out of bounds values : %" PRIu64 " %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
	printf("# Avg %s    : %g \n", bw_name, bw_n ? bw_sum / bw_n : 0.0);
	printf("#\n");
	fflush(stdout);
}

/* --peer nccl: loads NCCL (WEFT_PERF_NCCL_LIB, else libnccl.so.2) and makes
 * this rank's communicator, its id shared over weft's bootstrap. Refused
 * unless NCCL_NVLS_ENABLE=0: NVLink multicast must never run here. */
static int nccl_setup(struct run *r)
{
	const char *nvls = getenv("NCCL_NVLS_ENABLE");
	if (!nvls || strcmp(nvls, "0") != 0)
		return fail(r, -EPERM, "--peer nccl: set NCCL_NVLS_ENABLE=0 first (NVLink multicast stays off)");
	const char *path = getenv("WEFT_PERF_NCCL_LIB");
	if (!path || !*path)
		path = "libnccl.so.2";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return fail(r, -ENOENT, "--peer nccl: cannot load %s: %s (set WEFT_PERF_NCCL_LIB)", path, dlerror());
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define SYM(field, name) {name, offsetof(struct nccl_dl, field)}
		SYM(get_unique_id, "ncclGetUniqueId"),   SYM(comm_init_rank, "ncclCommInitRank"),
		SYM(comm_destroy, "ncclCommDestroy"),    SYM(all_reduce, "ncclAllReduce"),
		SYM(all_gather, "ncclAllGather"),        SYM(reduce_scatter, "ncclReduceScatter"),
		SYM(broadcast, "ncclBroadcast"),         SYM(reduce, "ncclReduce"),
		SYM(alltoall, "ncclAlltoAll"),           SYM(send, "ncclSend"),
		SYM(recv, "ncclRecv"),                   SYM(group_start, "ncclGroupStart"),
		SYM(group_end, "ncclGroupEnd"),          SYM(error_string, "ncclGetErrorString"),
		SYM(get_version, "ncclGetVersion"),
#undef SYM
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);
		if (!f)
			return fail(r, -ENOENT, "--peer nccl: %s has no %s", path, syms[i].name);
		*(void **)((char *)&nccl + syms[i].off) = f;
	}
	struct nccl_id id, *all = calloc((size_t)r->nranks, sizeof(id));
	if (!all)
		return fail(r, -ENOMEM, "allocating the NCCL ids");
	memset(&id, 0, sizeof(id));
	int rc = r->rank == 0 ? nccl.get_unique_id(&id) : 0;
	if (rc != 0) {
		free(all);
		return fail(r, -EIO, "ncclGetUniqueId: %s", nccl.error_string(rc));
	}
	if ((rc = weft_comm_allgather(r->comm, &id, all, sizeof(id))) != 0) {
		free(all);
		return fail(r, rc, "sharing the NCCL id");
	}
	rc = nccl.comm_init_rank(&r->nccl, r->nranks, all[0], r->rank);
	free(all);
	if (rc != 0)
		return fail(r, -EIO, "ncclCommInitRank: %s", nccl.error_string(rc));
	int v = 0;
	nccl.get_version(&v);
	if (r->rank == 0)
		printf("# peer: NCCL %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100, path);
	return 0;
}

/* Everything one rank does. Returns 0, or an error already reported; data
 * errors (#wrong) make rank 0 return 1. */
static int run_rank(const struct opts *o, weft_comm_t *comm, void *stream)
{
	struct run r = {
		.o = o, .comm = comm, .rank = weft_comm_rank(comm), .nranks = weft_comm_size(comm), .stream = stream};
	int rc = 0;
	uint64_t wrong_all = 0;

	if (o->bench != BENCH_COLL && r.nranks < 2) {
		if (r.rank == 0)
			fprintf(stderr, "weft-perf: --op %s needs at least 2 ranks (this job has %d)\n",
				o->bench == BENCH_PUT ? "put" : "pingpong", r.nranks);
		return -EINVAL;
	}
	if (o->bench == BENCH_COLL && colls[o->coll].rooted && o->root >= r.nranks) {
		if (r.rank == 0)
			fprintf(stderr, "weft-perf: -r %d: the root must be a rank below %d\n", o->root, r.nranks);
		return -EINVAL;
	}

	if (o->bench == BENCH_COLL) {
		if (r.rank == 0)
			print_header_common(&r, colls[o->coll].name);
		char tname[64] = "";
		if (o->mem_cuda) {
			/* The host-memory choice says nothing here: a pack for device
			 * memory connects the ranks its own way (algo-gpu: nvlink). */
			if (r.rank == 0)
				printf("# transport: the algorithm pack's own for device memory "
				       "(weft-info --select --mem cuda shows the choice per size)\n");
			snprintf(tname, sizeof(tname), "(the pack's)");
		} else if ((rc = describe_default_transport(&r, tname, sizeof(tname))) != 0) {
			return rc;
		}
		/* The core picks the transport of a collective by itself; the public API
		 * has no way to pin it, so --transport is honoured only when it names
		 * what the core picks anyway (see the help text). */
		for (int i = 0; i < o->ntransports; i++) {
			if (r.nranks >= 2 && strcmp(o->transports[i], tname) != 0) {
				if (r.rank == 0)
					fprintf(stderr,
						"weft-perf: --transport %s: collectives run over the transport the core "
						"chooses (%s here); weft cannot pin another one yet. Use --op put or "
						"--op pingpong to compare transports.\n",
						o->transports[i], tname);
				return -ENOTSUP;
			}
		}
		double bw_sum = 0;
		int bw_n = 0;
		if (o->peer_nccl && (rc = nccl_setup(&r)) != 0)
			return rc;
		rc = run_coll(&r, &bw_sum, &bw_n, &wrong_all);
		if (r.nccl)
			nccl.comm_destroy(r.nccl);
		if (rc != 0)
			return rc;
		print_footer(&r, bw_sum, bw_n, wrong_all, "bus bandwidth");
	} else if (o->mem_cuda) {
		/* Device memory: libweft-perf-gpu.so drives the GPUs (tools/perf_gpu.cu). */
		struct opts go = *o;
		struct run gr = r;
		if (!o->sizes_set) {
			go.min_bytes = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT_BYTES : WEFT_PERF_GPU_PINGPONG_MIN;
			go.max_bytes = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT_BYTES : WEFT_PERF_GPU_PINGPONG_MAX;
		}
		gr.o = &go;
		if (r.rank == 0)
			print_header_common(&gr, o->bench == BENCH_PUT ? "put (device memory)" : "pingpong (device memory)");
		struct weft_perf_gpu_args ga = {
			.abi = WEFT_PERF_GPU_ABI,
			.op = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT : WEFT_PERF_GPU_PINGPONG,
			.min_bytes = go.min_bytes,
			.max_bytes = go.max_bytes,
			.step_bytes = o->step_bytes,
			.factor = o->factor,
			.sizes_set = o->sizes_set,
			.warmup = o->warmup,
			.iters = o->iters,
			.check = o->check,
			.seed = o->seed,
			.transport = o->ntransports ? o->transports[0] : NULL,
		};
		if ((rc = gpu.run(&ga, comm, &wrong_all)) != 0)
			return rc;
	} else {
		if (r.rank == 0)
			print_header_common(&r, o->bench == BENCH_PUT ? "put" : "pingpong");
		int n = o->ntransports ? o->ntransports : 1;
		for (int i = 0; i < n; i++) {
			double bw_sum = 0;
			int bw_n = 0;
			uint64_t wrong = 0;
			if (r.rank == 0)
				printf("#\n");
			rc = run_prim(&r, o->ntransports ? o->transports[i] : NULL, &bw_sum, &bw_n, &wrong);
			if (rc != 0)
				return rc;
			print_footer(&r, bw_sum, bw_n, wrong, "bandwidth");
			wrong_all += wrong;
		}
	}
	if (r.rank == 0 && wrong_all) {
		fprintf(stderr, "weft-perf: the data check found %" PRIu64 " wrong %s\n", wrong_all,
			o->bench == BENCH_COLL ? "elements" : "bytes");
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------- launching */

/* --mem cuda, in each rank's process before its communicator exists (CUDA
 * must not be touched before --np forks): the runtime, the GPU of the local
 * rank, and the stream every call is enqueued on. 0, or 1 after a message. */
static int cuda_rank_setup(const struct opts *o, int local_rank, void **stream)
{
	*stream = NULL;
	if (!o->mem_cuda)
		return 0;
	if (o->bench != BENCH_COLL) {
		/* put/pingpong: the GPU library owns CUDA and its streams. */
		char why[512] = "";
		if (gpu.rank_setup(local_rank, why, sizeof(why)) != 0) {
			fprintf(stderr, "weft-perf: --mem cuda: %s\n", why);
			return 1;
		}
		return 0;
	}
	const char *why = "";
	int rc = cudart_dl_load(&cu, &why);
	if (rc != 0) {
		fprintf(stderr, "weft-perf: --mem cuda: %s\n", why);
		return 1;
	}
	int ndev = 0;
	cu.device_count(&ndev);
	int dev = local_rank % ndev;
	if ((rc = cu.set_device(dev)) != 0 || (rc = cu.stream_create(stream)) != 0) {
		fprintf(stderr, "weft-perf: rank with local rank %d: GPU %d: %s\n", local_rank, dev, cu.error_string(rc));
		return 1;
	}
	return 0;
}

static void cuda_rank_teardown(void *stream)
{
	if (stream)
		cu.stream_destroy(stream);
}

static int run_one_process(const struct opts *o)
{
	weft_comm_t *comm = NULL;
	void *stream = NULL;
	if (cuda_rank_setup(o, cudart_dl_local_rank(0), &stream) != 0)
		return 1;
	int rc = weft_comm_create_from_env(&comm);
	if (rc == -ENOENT) {
		fprintf(stderr, "weft-perf: no launcher environment found (mpirun, srun or torchrun); "
				"run under a launcher, or pass --np N to fork N local ranks\n");
		return EXIT_USAGE;
	}
	if (rc != 0) {
		fail(NULL, rc, "weft_comm_create_from_env");
		cuda_rank_teardown(stream);
		return 1;
	}
	rc = run_rank(o, comm, stream);
	if (rc < 0) {
		/* Tell the peers at once rather than through their liveness timeout. */
		weft_comm_abort(comm);
	}
	int drc = weft_comm_destroy(comm);
	if (rc == 0 && drc != 0)
		rc = fail(NULL, drc, "weft_comm_destroy");
	cuda_rank_teardown(stream);
	return rc == 0 ? 0 : 1;
}

static int child_main(const struct opts *o, const struct weft_unique_id *id, int rank)
{
	weft_comm_t *comm = NULL;
	void *stream = NULL;
	if (cuda_rank_setup(o, rank, &stream) != 0)
		return 1;
	int rc = weft_comm_create(id, o->np, rank, &comm);
	if (rc != 0) {
		struct run r = {.rank = rank};
		fail(&r, rc, "weft_comm_create (rank %d of %d)", rank, o->np);
		cuda_rank_teardown(stream);
		return 1;
	}
	rc = run_rank(o, comm, stream);
	if (rc < 0)
		weft_comm_abort(comm);
	int drc = weft_comm_destroy(comm);
	if (rc == 0 && drc != 0) {
		struct run r = {.rank = rank};
		rc = fail(&r, drc, "weft_comm_destroy");
	}
	cuda_rank_teardown(stream);
	return rc == 0 ? 0 : 1;
}

static void describe_status(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit code %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else
		snprintf(buf, len, "status 0x%x", st);
}

/* A signal that asks the --np parent to stop (SIGINT, SIGTERM, SIGHUP). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
}

/* --np: the parent makes the unique id, forks the ranks, and waits; when one
 * fails, the rest get FAIL_GRACE_S seconds to notice and exit before they are
 * killed, so that the parent never hangs. */
static int run_forked(const struct opts *o)
{
	struct weft_unique_id id;
	int rc = weft_get_unique_id(&id);
	if (rc != 0) {
		fail(NULL, rc, "weft_get_unique_id");
		return 1;
	}
	pid_t *pids = calloc((size_t)o->np, sizeof(*pids));
	int *done = calloc((size_t)o->np, sizeof(*done));
	if (!pids || !done) {
		fprintf(stderr, "weft-perf: out of memory\n");
		return 1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t parent = getpid();
	struct sigaction sa = {.sa_handler = on_stop_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	int nforked = 0, failed = 0;
	for (int i = 0; i < o->np; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			fprintf(stderr, "weft-perf: fork of rank %d failed: %s\n", i, strerror(errno));
			failed++;
			break;
		}
		if (pid == 0) {
			/* A rank must not outlive the parent (killed by a timeout, say):
			 * nobody would wait for it, and it may be blocked for good. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			signal(SIGINT, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGHUP, SIG_DFL);
			int crc = child_main(o, &id, i);
			fflush(stdout);
			fflush(stderr);
			_exit(crc);
		}
		pids[i] = pid;
		nforked++;
	}
	int left = nforked;
	double fail_since = failed ? now_us() : 0;
	while (left > 0) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid < 0 && errno != EINTR)
			break;
		if (pid <= 0) {
			if (stop_signal) {
				/* Stopped from outside: take the ranks down with us. */
				fprintf(stderr, "weft-perf: %s; stopping the ranks\n", strsignal(stop_signal));
				for (int i = 0; i < nforked; i++)
					if (!done[i])
						kill(pids[i], SIGKILL);
				while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
					;
				free(pids);
				free(done);
				return 128 + stop_signal;
			}
			if (fail_since > 0 && now_us() - fail_since > FAIL_GRACE_S * 1e6) {
				for (int i = 0; i < nforked; i++)
					if (!done[i]) {
						fprintf(stderr, "weft-perf: rank %d still running %d s after a rank failed; killing it\n",
							i, FAIL_GRACE_S);
						kill(pids[i], SIGKILL);
					}
				fail_since = now_us() + 1e12; /* kill once */
			}
			usleep(20000);
			continue;
		}
		int i;
		for (i = 0; i < nforked && pids[i] != pid; i++)
			;
		if (i == nforked)
			continue;
		done[i] = 1;
		left--;
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			char how[128];
			describe_status(st, how, sizeof(how));
			fprintf(stderr, "weft-perf: rank %d failed (%s)\n", i, how);
			failed++;
			if (fail_since == 0)
				fail_since = now_us();
		}
	}
	free(pids);
	free(done);
	return failed ? 1 : 0;
}

/* --op put|pingpong --mem cuda: loads libweft-perf-gpu.so from
 * WEFT_PERF_GPU_LIB, else from beside libweft.so (lib/ of the build tree and
 * of the install alike), then asks it in a child process (CUDA must stay
 * uninitialized here before --np forks) whether a GPU is there. 0, or 1 after
 * a message. */
static int gpu_lib_load(const struct opts *o)
{
	const char *op = o->bench == BENCH_PUT ? "put" : "pingpong";
	char path[4096];
	const char *env = getenv("WEFT_PERF_GPU_LIB");
	Dl_info di;
	if (env && *env) {
		snprintf(path, sizeof(path), "%s", env);
	} else if (dladdr((void *)weft_get_version, &di) && di.dli_fname && strrchr(di.dli_fname, '/')) {
		const char *slash = strrchr(di.dli_fname, '/');
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - di.dli_fname), di.dli_fname,
			 WEFT_PERF_GPU_LIB_NAME);
	} else {
		snprintf(path, sizeof(path), "%s", WEFT_PERF_GPU_LIB_NAME);
	}
	gpu.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!gpu.handle) {
		fprintf(stderr,
			"weft-perf: --op %s --mem cuda needs %s, which could not be loaded: %s (it is built where a "
			"CUDA compiler is found; WEFT_PERF_GPU_LIB names another path)\n",
			op, path, dlerror());
		return 1;
	}
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		{WEFT_PERF_GPU_PROBE, offsetof(struct gpu_lib, probe)},
		{WEFT_PERF_GPU_RANK_SETUP, offsetof(struct gpu_lib, rank_setup)},
		{WEFT_PERF_GPU_RUN, offsetof(struct gpu_lib, run)},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(gpu.handle, syms[i].name);
		if (!f) {
			fprintf(stderr, "weft-perf: %s has no %s: not weft-perf's GPU library\n", path, syms[i].name);
			return 1;
		}
		*(void **)((char *)&gpu + syms[i].off) = f;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 0; /* the ranks will tell */
	if (pid == 0) {
		char why[512] = "";
		int rc = gpu.probe(WEFT_PERF_GPU_ABI, why, sizeof(why));
		if (rc != 0)
			fprintf(stderr, "weft-perf: --op %s --mem cuda: %s\n", op, why);
		fflush(NULL);
		_exit(rc ? 1 : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		fprintf(stderr, "weft-perf: --op %s --mem cuda: the GPU check died (%s)\n", op, strsignal(WTERMSIG(st)));
	return 1;
}

/* ----------------------------------------------------------------- options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: weft-perf [options]\n"
		"Benchmarks weft's collectives (nccl-tests' layout and bus bandwidth) or its primitives\n"
		"(one-sided put bandwidth, put+signal ping-pong latency between ranks 0 and 1).\n"
		"\n"
		"  -b, --minbytes SIZE       smallest size (default 1K); sizes take K, M, G suffixes\n"
		"  -e, --maxbytes SIZE       largest size (default 1M)\n"
		"  -f, --stepfactor N        multiply the size by N each step (default 2)\n"
		"  -i, --stepbytes SIZE      with -f 1: add SIZE each step (default 1M)\n"
		"  -d, --datatype TYPE       int8 uint8 int32 uint32 int64 uint64 half|float16 bfloat16\n"
		"                            float|float32 double|float64 (default float)\n"
		"  -o, --redop OP            sum prod min max avg (default sum)\n"
		"  -w, --warmup_iters N      warm-up iterations per size and mode (default 5)\n"
		"  -n, --iters N             timed iterations (default 20)\n"
		"  -c, --check 0|1           verify the data once per size and mode (default 1)\n"
		"  -r, --root N              root of broadcast and reduce (default 0)\n"
		"      --collective NAME     all_reduce all_gather reduce_scatter broadcast reduce alltoall\n"
		"                            sendrecv (also without underscores; default all_reduce)\n"
		"      --op put|pingpong     a primitive benchmark instead of a collective\n"
		"      --transport NAME[,NAME...]\n"
		"                            transports for --op put/pingpong, one table each (default:\n"
		"                            the one the core chooses). Collectives run over the transport\n"
		"                            the core chooses; naming another one is refused.\n"
		"      --np N                fork N local ranks (default: one rank per process, from the\n"
		"                            launcher's environment: mpirun, srun, torchrun)\n"
		"      --mem host|cuda       buffer memory (default host). cuda: one GPU per rank (the local\n"
		"                            rank's). Collectives: calls on a stream timed with CUDA events.\n"
		"                            --op put|pingpong: ranks 0 and 1 over nvlink, driven by\n"
		"                            libweft-perf-gpu.so (beside libweft.so, or WEFT_PERF_GPU_LIB).\n"
		"                            put: memory-channel push and pull by block count, one way and\n"
		"                            both ways, then copy-engine weft_put + weft_flush (default\n"
		"                            1 GiB); pingpong: LL8 packets and semaphores, one persistent\n"
		"                            kernel and one launch per round trip (default 4 B to 64 KiB).\n"
		"                            Waits are bounded by WEFT_PERF_GPU_TIMEOUT s (default 60)\n"
		"      --fresh-buffers       allocate (and for put/pingpong register) new buffers every\n"
		"                            iteration; the time includes that\n"
		"      --graph N             with --mem cuda: capture the -n iterations in a CUDA graph and\n"
		"                            time N launches of it (nccl-tests' -G); time per call\n"
		"      --window N            put: most puts in flight per weft_flush (default 64)\n"
		"      --peer nccl           with --mem cuda: run every call through NCCL too (dlopen'ed:\n"
		"                            WEFT_PERF_NCCL_LIB, else libnccl.so.2; needs NCCL_NVLS_ENABLE=0),\n"
		"                            timed the same way, and print its time and the ratio\n"
		"      --repeat R            time each size and mode R times (weft and the peer\n"
		"                            alternating) and print the medians (default 1)\n"
		"      --seed N              seed of the data pattern (default 1)\n"
		"  -h, --help                print this help\n"
		"\n"
		"Sizes count the whole buffer (for all_gather, reduce_scatter and alltoall too). Times are\n"
		"per iteration, the slowest rank's; #wrong counts wrong elements (bytes for put/pingpong)\n"
		"over all ranks. Exit status: 0, 1 on a failure or wrong data, 2 on a bad flag.\n");
}

/* Parses a size with an optional K/M/G/T suffix (powers of 1024, optional "B"/"iB"). */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static long parse_int(const char *flag, const char *s, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		usage_error("%s: '%s' is not an integer from %ld to %ld", flag, s, lo, hi);
	return v;
}

static int name_eq(const char *a, const char *b)
{
	/* "all_reduce", "allreduce", "all-reduce" and "AllReduce" are one name. */
	for (;;) {
		while (*a == '_' || *a == '-')
			a++;
		while (*b == '_' || *b == '-')
			b++;
		if (!*a || !*b)
			return !*a && !*b;
		if ((*a | 0x20) != (*b | 0x20))
			return 0;
		a++, b++;
	}
}

enum {
	OPT_COLLECTIVE = 256,
	OPT_OP,
	OPT_TRANSPORT,
	OPT_NP,
	OPT_MEM,
	OPT_FRESH,
	OPT_GRAPH,
	OPT_WINDOW,
	OPT_SEED,
	OPT_PEER,
	OPT_REPEAT,
};

static const struct option long_opts[] = {
	{"minbytes", required_argument, NULL, 'b'},
	{"maxbytes", required_argument, NULL, 'e'},
	{"stepfactor", required_argument, NULL, 'f'},
	{"stepbytes", required_argument, NULL, 'i'},
	{"datatype", required_argument, NULL, 'd'},
	{"redop", required_argument, NULL, 'o'},
	{"warmup_iters", required_argument, NULL, 'w'},
	{"iters", required_argument, NULL, 'n'},
	{"check", required_argument, NULL, 'c'},
	{"root", required_argument, NULL, 'r'},
	{"help", no_argument, NULL, 'h'},
	{"collective", required_argument, NULL, OPT_COLLECTIVE},
	{"op", required_argument, NULL, OPT_OP},
	{"transport", required_argument, NULL, OPT_TRANSPORT},
	{"np", required_argument, NULL, OPT_NP},
	{"mem", required_argument, NULL, OPT_MEM},
	{"fresh-buffers", no_argument, NULL, OPT_FRESH},
	{"graph", required_argument, NULL, OPT_GRAPH},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"seed", required_argument, NULL, OPT_SEED},
	{"peer", required_argument, NULL, OPT_PEER},
	{"repeat", required_argument, NULL, OPT_REPEAT},
	{NULL, 0, NULL, 0},
};

static const char *flag_name(int c, char *buf, size_t len)
{
	for (const struct option *lo = long_opts; lo->name; lo++)
		if (lo->val == c) {
			if (c < 256)
				snprintf(buf, len, "-%c/--%s", c, lo->name);
			else
				snprintf(buf, len, "--%s", lo->name);
			return buf;
		}
	snprintf(buf, len, "-%c", c);
	return buf;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_bytes = 1024;
	o->max_bytes = 1 << 20;
	o->factor = 2;
	o->step_bytes = 1 << 20;
	o->type = &types[8]; /* float */
	o->op = WEFT_SUM;
	o->warmup = 5;
	o->iters = 20;
	o->check = 1;
	o->root = 0;
	o->bench = BENCH_COLL;
	o->coll = C_ALLREDUCE;
	o->graph = -1; /* not given; 0 is refused below by parse_int's range */
	o->window = 64;
	o->seed = 1;
	o->repeat = 1;

	size_t pos = 0;
	for (int i = 0; i < argc && pos < sizeof(o->cmdline) - 1; i++)
		pos += (size_t)snprintf(o->cmdline + pos, sizeof(o->cmdline) - pos, "%s%s", i ? " " : "", argv[i]);

	opterr = 0;
	int c, li;
	char fl[64];
	while ((c = getopt_long(argc, argv, ":b:e:f:i:d:o:w:n:c:r:h", long_opts, &li)) != -1) {
		const char *flag = (c == '?' || c == ':') ? "" : flag_name(c, fl, sizeof(fl));
		int rc;
		switch (c) {
		case 'b':
		case 'e':
		case 'i': {
			uint64_t v;
			if ((rc = parse_size(optarg, &v)) != 0)
				usage_error("%s: '%s' is not a size (a number with an optional K, M or G suffix)", flag,
					    optarg);
			if (c == 'b')
				o->min_bytes = v, o->sizes_set = 1;
			else if (c == 'e')
				o->max_bytes = v, o->sizes_set = 1;
			else if (v == 0)
				usage_error("%s: the step must be at least 1 byte", flag);
			else
				o->step_bytes = v;
			break;
		}
		case 'f': o->factor = (uint64_t)parse_int(flag, optarg, 1, 1 << 20); break;
		case 'd': {
			const struct type_info *t = NULL;
			for (size_t k = 0; k < NTYPES && !t; k++)
				if (!strcasecmp(optarg, types[k].name) || !strcasecmp(optarg, types[k].alias))
					t = &types[k];
			if (!t)
				usage_error("%s: unknown type '%s' (int8 uint8 int32 uint32 int64 uint64 half/float16 "
					    "bfloat16 float/float32 double/float64)",
					    flag, optarg);
			o->type = t;
			break;
		}
		case 'o': {
			int k;
			for (k = 0; k < PERF_NREDOPS && strcasecmp(optarg, redop_names[k]); k++)
				;
			if (k == PERF_NREDOPS)
				usage_error("%s: unknown reduction '%s' (sum prod min max avg)", flag, optarg);
			o->op = (enum weft_redop)k;
			break;
		}
		case 'w': o->warmup = (int)parse_int(flag, optarg, 0, INT_MAX); break;
		case 'n': o->iters = (int)parse_int(flag, optarg, 1, INT_MAX); break;
		case 'c': o->check = (int)parse_int(flag, optarg, 0, 1); break;
		case 'r': o->root = (int)parse_int(flag, optarg, 0, INT_MAX); break;
		case 'h': usage(stdout); exit(0);
		case OPT_COLLECTIVE: {
			int k;
			for (k = 0; k < C_COUNT; k++)
				if (name_eq(optarg, colls[k].name) || name_eq(optarg, colls[k].alias))
					break;
			if (k == C_COUNT)
				usage_error("%s: unknown collective '%s' (all_reduce all_gather reduce_scatter broadcast "
					    "reduce alltoall sendrecv)",
					    flag, optarg);
			o->coll = (enum coll)k;
			o->coll_set = 1;
			break;
		}
		case OPT_OP:
			if (!strcmp(optarg, "put"))
				o->bench = BENCH_PUT;
			else if (!strcmp(optarg, "pingpong") || !strcmp(optarg, "ping-pong"))
				o->bench = BENCH_PINGPONG;
			else
				usage_error("%s: unknown primitive benchmark '%s' (put pingpong)", flag, optarg);
			o->op_set = 1;
			break;
		case OPT_TRANSPORT: {
			/* Names are copied into the options: nothing to free on any exit path. */
			const char *p = optarg;
			while (*p) {
				size_t n = strcspn(p, ",");
				if (n > 0) {
					if (o->ntransports == MAX_TRANSPORTS)
						usage_error("%s: at most %d transports", flag, MAX_TRANSPORTS);
					if (n >= sizeof(o->transports[0]))
						usage_error("%s: transport name '%.*s' is too long", flag, (int)n, p);
					memcpy(o->transports[o->ntransports], p, n);
					o->transports[o->ntransports++][n] = '\0';
				}
				p += n + (p[n] == ',');
			}
			if (o->ntransports == 0)
				usage_error("%s: '%s' names no transport", flag, optarg);
			break;
		}
		case OPT_NP: o->np = (int)parse_int(flag, optarg, 1, 4096); break;
		case OPT_MEM:
			if (!strcmp(optarg, "host"))
				o->mem_cuda = 0;
			else if (!strcmp(optarg, "cuda"))
				o->mem_cuda = 1;
			else
				usage_error("%s: unknown memory type '%s' (host cuda)", flag, optarg);
			break;
		case OPT_FRESH: o->fresh = 1; break;
		case OPT_GRAPH: o->graph = (int)parse_int(flag, optarg, 1, INT_MAX); break;
		case OPT_WINDOW: o->window = (int)parse_int(flag, optarg, 1, 1 << 16); break;
		case OPT_SEED: o->seed = (uint64_t)parse_int(flag, optarg, 0, LONG_MAX); break;
		case OPT_PEER:
			if (strcmp(optarg, "nccl") != 0)
				usage_error("%s: unknown peer library '%s' (nccl)", flag, optarg);
			o->peer_nccl = 1;
			break;
		case OPT_REPEAT: o->repeat = (int)parse_int(flag, optarg, 1, 1000); break;
		case ':': usage_error("%s needs a value", argv[optind - 1]);
		case '?':
		default:
			if (optopt && optopt < 256)
				usage_error("unknown flag '-%c'", optopt);
			usage_error("unknown flag '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (o->coll_set && o->op_set)
		usage_error("--collective and --op exclude each other: choose a collective or a primitive benchmark");
	if (o->min_bytes > o->max_bytes)
		usage_error("-b %" PRIu64 " is larger than -e %" PRIu64, o->min_bytes, o->max_bytes);
	if (o->bench == BENCH_COLL && o->min_bytes < o->type->size && o->max_bytes < o->type->size)
		usage_error("-e %" PRIu64 ": smaller than one %s element", o->max_bytes, o->type->name);
	if (o->graph >= 0 && !o->mem_cuda)
		usage_error("--graph needs --mem cuda (CUDA graphs capture device work only)");
	if (o->graph >= 0 && o->bench != BENCH_COLL)
		usage_error("--graph times collectives; --op %s drives transfers from the host",
			    o->bench == BENCH_PUT ? "put" : "pingpong");
	if (o->mem_cuda && o->bench != BENCH_COLL && o->fresh)
		usage_error("--op %s --mem cuda: --fresh-buffers is for host memory (the GPU benchmarks register "
			    "one buffer per run)",
			    o->bench == BENCH_PUT ? "put" : "pingpong");
	if (o->mem_cuda && o->bench != BENCH_COLL && o->ntransports > 1)
		usage_error("--op %s --mem cuda: one --transport at most (a GPU transport: nvlink, the default)",
			    o->bench == BENCH_PUT ? "put" : "pingpong");
	if (o->peer_nccl && (!o->mem_cuda || o->bench != BENCH_COLL))
		usage_error("--peer nccl compares collectives on device memory: it needs --mem cuda and no --op");
	if (o->graph >= 0 && o->fresh)
		usage_error("--graph and --fresh-buffers exclude each other: a graph replays the buffers it captured");
	if (o->np && o->bench != BENCH_COLL && o->np < 2)
		usage_error("--np %d: --op %s needs at least 2 ranks", o->np,
			    o->bench == BENCH_PUT ? "put" : "pingpong");
	if (o->np && o->bench == BENCH_COLL && colls[o->coll].rooted && o->root >= o->np)
		usage_error("-r %d: the root must be a rank below --np %d", o->root, o->np);
}

int main(int argc, char **argv)
{
	struct opts o;
	parse_args(argc, argv, &o);
	/* Rank 0 prints as it goes; keep the lines whole when several ranks share a pipe. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* One message, before any rank forks, where no GPU can be used. */
	if (o.mem_cuda && o.bench != BENCH_COLL && gpu_lib_load(&o) != 0)
		return 1;
	if (o.np && o.mem_cuda && o.bench == BENCH_COLL && cudart_dl_probe_forked("weft-perf") != 0)
		return 1;
	if (o.np)
		return run_forked(&o);
	return run_one_process(&o);
}
