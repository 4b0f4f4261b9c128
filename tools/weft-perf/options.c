/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf's command line: the flags, their defaults and their errors,
 * the help text, and the names users type for collectives, types and
 * reductions. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "wp.h"

/* The collectives (wp.h says what the fields mean). */
const struct coll_info wp_colls[C_COUNT] = {
	[C_ALLREDUCE] = {"all_reduce", "allreduce", 1, 0, 2},
	[C_ALLGATHER] = {"all_gather", "allgather", 0, 0, 1},
	[C_REDUCE_SCATTER] = {"reduce_scatter", "reducescatter", 1, 0, 1},
	[C_BROADCAST] = {"broadcast", "bcast", 0, 1, 0},
	[C_REDUCE] = {"reduce", "reduce", 1, 1, 0},
	[C_ALLTOALL] = {"alltoall", "all_to_all", 0, 0, 1},
	[C_SENDRECV] = {"sendrecv", "send_recv", 0, 0, 0},
};

/* The element types -d names; the rest of weft-perf reaches them through opts. */
static const struct type_info types[] = {
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

const char *const wp_redop_names[PERF_NREDOPS] = {"sum", "prod", "min", "max", "avg"};

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

/* Sizes of the sweep: min, then times factor (or plus step) up to max. */
uint64_t wp_next_size(const struct opts *o, uint64_t s)
{
	if (o->factor > 1)
		return s ? (s > UINT64_MAX / o->factor ? UINT64_MAX : s * o->factor) : 1;
	return s > UINT64_MAX - o->step_bytes ? UINT64_MAX : s + o->step_bytes;
}

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
		"      --op entry            nanoseconds per call of weft_comm_status and of a zero-count\n"
		"                            weft_allreduce: the public entry's handle check and claim\n"
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

/* The defaults, before any flag. */
static void set_defaults(struct opts *o)
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
}

/* -b, -e and -i. */
static void parse_size_flag(int c, const char *flag, const char *arg, struct opts *o)
{
	uint64_t v;
	int rc;
	if ((rc = parse_size(arg, &v)) != 0)
		usage_error("%s: '%s' is not a size (a number with an optional K, M or G suffix)", flag, arg);
	if (c == 'b')
		o->min_bytes = v, o->sizes_set = 1;
	else if (c == 'e')
		o->max_bytes = v, o->sizes_set = 1;
	else if (v == 0)
		usage_error("%s: the step must be at least 1 byte", flag);
	else
		o->step_bytes = v;
}

/* -d. */
static const struct type_info *parse_type(const char *flag, const char *arg)
{
	const struct type_info *t = NULL;
	for (size_t k = 0; k < NTYPES && !t; k++)
		if (!strcasecmp(arg, types[k].name) || !strcasecmp(arg, types[k].alias))
			t = &types[k];
	if (!t)
		usage_error("%s: unknown type '%s' (int8 uint8 int32 uint32 int64 uint64 half/float16 "
			    "bfloat16 float/float32 double/float64)",
			    flag, arg);
	return t;
}

/* -o. */
static enum weft_redop parse_redop(const char *flag, const char *arg)
{
	int k;
	for (k = 0; k < PERF_NREDOPS && strcasecmp(arg, wp_redop_names[k]); k++)
		;
	if (k == PERF_NREDOPS)
		usage_error("%s: unknown reduction '%s' (sum prod min max avg)", flag, arg);
	return (enum weft_redop)k;
}

/* --collective. */
static enum coll parse_collective(const char *flag, const char *arg)
{
	int k;
	for (k = 0; k < C_COUNT; k++)
		if (name_eq(arg, wp_colls[k].name) || name_eq(arg, wp_colls[k].alias))
			break;
	if (k == C_COUNT)
		usage_error("%s: unknown collective '%s' (all_reduce all_gather reduce_scatter broadcast "
			    "reduce alltoall sendrecv)",
			    flag, arg);
	return (enum coll)k;
}

/* --transport NAME[,NAME...]. */
static void parse_transports(const char *flag, const char *arg, struct opts *o)
{
	/* Names are copied into the options: nothing to free on any exit path. */
	const char *p = arg;
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
		usage_error("%s: '%s' names no transport", flag, arg);
}

/* --op, --mem and --peer: a word from a short list. */
static void parse_word_flag(int c, const char *flag, const char *arg, struct opts *o)
{
	switch (c) {
	case OPT_OP:
		if (!strcmp(arg, "put"))
			o->bench = BENCH_PUT;
		else if (!strcmp(arg, "pingpong") || !strcmp(arg, "ping-pong"))
			o->bench = BENCH_PINGPONG;
		else if (!strcmp(arg, "entry"))
			o->bench = BENCH_ENTRY;
		else
			usage_error("%s: unknown primitive benchmark '%s' (put pingpong entry)", flag, arg);
		o->op_set = 1;
		break;
	case OPT_MEM:
		if (!strcmp(arg, "host"))
			o->mem_cuda = 0;
		else if (!strcmp(arg, "cuda"))
			o->mem_cuda = 1;
		else
			usage_error("%s: unknown memory type '%s' (host cuda)", flag, arg);
		break;
	case OPT_PEER:
		if (strcmp(arg, "nccl") != 0)
			usage_error("%s: unknown peer library '%s' (nccl)", flag, arg);
		o->peer_nccl = 1;
		break;
	default: break;
	}
}

/* One flag getopt_long returned, its value in optarg. */
static void parse_flag(int c, const char *flag, char **argv, struct opts *o)
{
	switch (c) {
	case 'b':
	case 'e':
	case 'i': parse_size_flag(c, flag, optarg, o); break;
	case 'f': o->factor = (uint64_t)parse_int(flag, optarg, 1, 1 << 20); break;
	case 'd': o->type = parse_type(flag, optarg); break;
	case 'o': o->op = parse_redop(flag, optarg); break;
	case 'w': o->warmup = (int)parse_int(flag, optarg, 0, INT_MAX); break;
	case 'n': o->iters = (int)parse_int(flag, optarg, 1, INT_MAX); break;
	case 'c': o->check = (int)parse_int(flag, optarg, 0, 1); break;
	case 'r': o->root = (int)parse_int(flag, optarg, 0, INT_MAX); break;
	case 'h': usage(stdout); exit(0);
	case OPT_COLLECTIVE:
		o->coll = parse_collective(flag, optarg);
		o->coll_set = 1;
		break;
	case OPT_OP:
	case OPT_MEM:
	case OPT_PEER: parse_word_flag(c, flag, optarg, o); break;
	case OPT_TRANSPORT: parse_transports(flag, optarg, o); break;
	case OPT_NP: o->np = (int)parse_int(flag, optarg, 1, 4096); break;
	case OPT_FRESH: o->fresh = 1; break;
	case OPT_GRAPH: o->graph = (int)parse_int(flag, optarg, 1, INT_MAX); break;
	case OPT_WINDOW: o->window = (int)parse_int(flag, optarg, 1, 1 << 16); break;
	case OPT_SEED: o->seed = (uint64_t)parse_int(flag, optarg, 0, LONG_MAX); break;
	case OPT_REPEAT: o->repeat = (int)parse_int(flag, optarg, 1, 1000); break;
	case ':': usage_error("%s needs a value", argv[optind - 1]);
	case '?':
	default:
		if (optopt && optopt < 256)
			usage_error("unknown flag '-%c'", optopt);
		usage_error("unknown flag '%s'", argv[optind - 1]);
	}
}

/* Flags that each parse but do not go together, checked once all are read. */
static void check_combinations(const struct opts *o)
{
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
	if (o->bench == BENCH_ENTRY && o->mem_cuda)
		usage_error("--op entry times host calls: no --mem cuda");
	if (o->np && o->bench != BENCH_COLL && o->bench != BENCH_ENTRY && o->np < 2)
		usage_error("--np %d: --op %s needs at least 2 ranks", o->np,
			    o->bench == BENCH_PUT ? "put" : "pingpong");
	if (o->np && o->bench == BENCH_COLL && wp_colls[o->coll].rooted && o->root >= o->np)
		usage_error("-r %d: the root must be a rank below --np %d", o->root, o->np);
}

void wp_parse_args(int argc, char **argv, struct opts *o)
{
	set_defaults(o);

	size_t pos = 0;
	for (int i = 0; i < argc && pos < sizeof(o->cmdline) - 1; i++)
		pos += (size_t)snprintf(o->cmdline + pos, sizeof(o->cmdline) - pos, "%s%s", i ? " " : "", argv[i]);

	opterr = 0;
	int c, li;
	char fl[64];
	while ((c = getopt_long(argc, argv, ":b:e:f:i:d:o:w:n:c:r:h", long_opts, &li)) != -1) {
		const char *flag = (c == '?' || c == ':') ? "" : flag_name(c, fl, sizeof(fl));
		parse_flag(c, flag, argv, o);
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	check_combinations(o);
}
