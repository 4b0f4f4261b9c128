/* SPDX-License-Identifier: Apache-2.0 */
/* weft-nccl-driver: an nccl-tests-style driver that calls the NCCL API
 * directly (libweft_nccl.so, or any libnccl.so.2 put in its place), one
 * process per rank (forked with --np, or started by a launcher and meeting
 * through --id-file) or several ranks in one process (--init-all, groups). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "cudart_dl.h"

enum coll { C_ALLREDUCE, C_ALLGATHER, C_BROADCAST, C_REDUCESCATTER, C_ALLTOALL, C_SENDRECV, C_COUNT };
static const char *const coll_names[C_COUNT] = {"allreduce", "allgather", "broadcast", "reducescatter",
						 "alltoall", "sendrecv"};

struct opts {
	int colls[C_COUNT];
	size_t minb, maxb;
	double factor;
	int iters, warmup, check;
	int cuda;
	int graph;      /* calls captured per CUDA graph launch (0: no graph) */
	int nccl_mem;   /* --nccl-mem: device buffers from ncclMemAlloc */
	int window;     /* --window: send and receive buffers registered as windows */
	int np;         /* fork this many ranks */
	int init_all;   /* ranks in this process through ncclCommInitAll */
	const char *id_file;
};

/* ---------------------------------------------- CUDA, only when present */
static struct cudart_dl cu;

enum { H2D = CUDART_H2D, D2H = CUDART_D2H, CAPTURE_RELAXED = CUDART_CAPTURE_RELAXED };


/* ------------------------------------------------------------ one rank */

struct rank_ctx {
	ncclComm_t comm;
	int rank, nranks;
	void *send, *recv;  /* device or host */
	int32_t *hs, *hr;   /* host staging */
	void *stream;
	int dev;            /* --mem cuda: this rank's GPU */
	void *graph_exec;   /* --graph: the captured calls of the current size */
	ncclWindow_t wsend, wrecv; /* --window */
	size_t cap;         /* bytes of send and recv */
};

/* Makes a rank's GPU current before CUDA work of that rank: under --init-all
 * one thread drives the ranks of several GPUs. */
static void on_dev(const struct rank_ctx *c)
{
	if (c->dev >= 0)
		cu.set_device(c->dev);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int32_t val(int r, size_t i)
{
	return (int32_t)((r * 7919u + i * 104729u) % 2001u) - 1000;
}

static int ctx_alloc(struct rank_ctx *c, const struct opts *o)
{
	c->cap = o->maxb * (size_t)c->nranks;
	c->hs = malloc(c->cap);
	c->hr = malloc(c->cap);
	if (!c->hs || !c->hr)
		return -ENOMEM;
	if (!o->cuda) {
		c->send = c->hs;
		c->recv = c->hr;
		return 0;
	}
	if (cu.set_device(c->dev)) {
		fprintf(stderr, "rank %d: cudaSetDevice failed\n", c->rank);
		return -ENODEV;
	}
	if (o->nccl_mem) {
		if (ncclMemAlloc(&c->send, c->cap) || ncclMemAlloc(&c->recv, c->cap)) {
			fprintf(stderr, "rank %d: ncclMemAlloc failed: %s\n", c->rank, ncclGetLastError(NULL));
			return -ENOMEM;
		}
	} else if (cu.malloc_(&c->send, c->cap) || cu.malloc_(&c->recv, c->cap)) {
		fprintf(stderr, "rank %d: cudaMalloc failed\n", c->rank);
		return -ENOMEM;
	}
	if (cu.stream_create(&c->stream)) {
		fprintf(stderr, "rank %d: cudaStreamCreate failed\n", c->rank);
		return -ENOMEM;
	}
	return 0;
}

/* --window: both buffers of every local rank, collectively (a group for
 * several ranks of this thread). */
static int windows_register(struct rank_ctx *cs, int nlocal)
{
	ncclResult_t r = ncclGroupStart();
	for (int l = 0; l < nlocal && !r; l++) {
		r = ncclCommWindowRegister(cs[l].comm, cs[l].send, cs[l].cap, &cs[l].wsend, NCCL_WIN_COLL_SYMMETRIC);
		if (!r)
			r = ncclCommWindowRegister(cs[l].comm, cs[l].recv, cs[l].cap, &cs[l].wrecv,
						   NCCL_WIN_COLL_SYMMETRIC);
	}
	ncclResult_t e = ncclGroupEnd();
	if (r || e) {
		fprintf(stderr, "ncclCommWindowRegister failed: %s (%s)\n", ncclGetErrorString(r ? r : e),
			ncclGetLastError(NULL));
		return 1;
	}
	return 0;
}

static void ctx_free(struct rank_ctx *c, const struct opts *o)
{
	if (c->wsend)
		ncclCommWindowDeregister(c->comm, c->wsend);
	if (c->wrecv)
		ncclCommWindowDeregister(c->comm, c->wrecv);
	if (o->cuda && o->nccl_mem) {
		ncclMemFree(c->send);
		ncclMemFree(c->recv);
	} else if (o->cuda) {
		cu.free_(c->send);
		cu.free_(c->recv);
	}
	free(c->hs);
	free(c->hr);
}

/* count: elements per rank block (nccl-tests' convention per collective). */
static ncclResult_t issue(struct rank_ctx *c, enum coll k, size_t count)
{
	cudaStream_t s = (cudaStream_t)c->stream;
	switch (k) {
	case C_ALLREDUCE: return ncclAllReduce(c->send, c->recv, count, ncclInt32, ncclSum, c->comm, s);
	case C_ALLGATHER: return ncclAllGather(c->send, c->recv, count, ncclInt32, c->comm, s);
	case C_BROADCAST: return ncclBroadcast(c->send, c->recv, count, ncclInt32, 0, c->comm, s);
	case C_REDUCESCATTER: return ncclReduceScatter(c->send, c->recv, count, ncclInt32, ncclSum, c->comm, s);
	case C_ALLTOALL: return ncclAlltoAll(c->send, c->recv, count, ncclInt32, c->comm, s);
	case C_SENDRECV: {
		int right = (c->rank + 1) % c->nranks, left = (c->rank + c->nranks - 1) % c->nranks;
		ncclResult_t r = ncclGroupStart();
		if (!r)
			r = ncclSend(c->send, count, ncclInt32, right, c->comm, s);
		if (!r)
			r = ncclRecv(c->recv, count, ncclInt32, left, c->comm, s);
		ncclResult_t e = ncclGroupEnd();
		return r ? r : e;
	}
	default: return ncclInvalidArgument;
	}
}

/* One call of k on every local rank: in a group when there are several. */
static ncclResult_t issue_all(struct rank_ctx *cs, int nlocal, enum coll k, size_t count)
{
	ncclResult_t r = nlocal > 1 ? ncclGroupStart() : ncclSuccess;
	for (int l = 0; l < nlocal && !r; l++)
		r = issue(&cs[l], k, count);
	if (nlocal > 1) {
		ncclResult_t e = ncclGroupEnd();
		r = r ? r : e;
	}
	return r;
}

/* --graph: captures o->graph rounds of k on every local stream into one graph
 * per rank, the way nccl-tests' -G does. */
static int capture(struct rank_ctx *cs, int nlocal, const struct opts *o, enum coll k, size_t count)
{
	int rc = 0;
	/* One round outside the capture first: a library may set things up on
	 * its first call (as NCCL does), which a capture cannot hold. */
	ncclResult_t r0 = issue_all(cs, nlocal, k, count);
	for (int l = 0; l < nlocal; l++)
		cu.stream_sync(cs[l].stream);
	if (r0) {
		fprintf(stderr, "%s: %s (%s)\n", coll_names[k], ncclGetErrorString(r0), ncclGetLastError(NULL));
		return -EIO;
	}
	for (int l = 0; l < nlocal; l++)
		if (on_dev(&cs[l]), cu.begin_capture(cs[l].stream, CAPTURE_RELAXED)) {
			fprintf(stderr, "rank %d: cudaStreamBeginCapture failed\n", cs[l].rank);
			return -EIO;
		}
	for (int i = 0; i < o->graph && !rc; i++) {
		ncclResult_t r = issue_all(cs, nlocal, k, count);
		if (r) {
			fprintf(stderr, "%s captured: %s (%s)\n", coll_names[k], ncclGetErrorString(r), ncclGetLastError(NULL));
			rc = -EIO;
		}
	}
	for (int l = 0; l < nlocal; l++) {
		void *g = NULL;
		on_dev(&cs[l]);
		if (cu.end_capture(cs[l].stream, &g) || !g) {
			fprintf(stderr, "rank %d: cudaStreamEndCapture failed\n", cs[l].rank);
			rc = -EIO;
			continue;
		}
		if (!rc && cu.instantiate(&cs[l].graph_exec, g, 0)) {
			fprintf(stderr, "rank %d: cudaGraphInstantiate failed\n", cs[l].rank);
			rc = -EIO;
		}
		cu.graph_destroy(g);
	}
	return rc;
}

static void uncapture(struct rank_ctx *cs, int nlocal)
{
	for (int l = 0; l < nlocal; l++)
		if (cs[l].graph_exec) {
			cu.exec_destroy(cs[l].graph_exec);
			cs[l].graph_exec = NULL;
		}
}

static size_t send_elems(enum coll k, size_t count, int n)
{
	return k == C_REDUCESCATTER || k == C_ALLTOALL ? count * (size_t)n : count;
}

static size_t recv_elems(enum coll k, size_t count, int n)
{
	return k == C_ALLGATHER || k == C_ALLTOALL ? count * (size_t)n : count;
}

static int32_t expect(const struct rank_ctx *c, enum coll k, size_t count, size_t i)
{
	int n = c->nranks;
	int64_t s = 0;
	switch (k) {
	case C_ALLREDUCE:
		for (int r = 0; r < n; r++)
			s += val(r, i);
		return (int32_t)s;
	case C_ALLGATHER: return val((int)(i / count), i % count);
	case C_BROADCAST: return val(0, i);
	case C_REDUCESCATTER:
		for (int r = 0; r < n; r++)
			s += val(r, (size_t)c->rank * count + i);
		return (int32_t)s;
	case C_ALLTOALL: return val((int)(i / count), (size_t)c->rank * count + i % count);
	case C_SENDRECV: return val((c->rank + n - 1) % n, i);
	default: return 0;
	}
}

static int prepare(struct rank_ctx *c, const struct opts *o, enum coll k, size_t count)
{
	size_t ns = send_elems(k, count, c->nranks);
	for (size_t i = 0; i < ns; i++)
		c->hs[i] = val(c->rank, i);
	on_dev(c);
	if (o->cuda && cu.memcpy_(c->send, c->hs, ns * 4, H2D))
		return -EIO;
	return 0;
}

static long verify(struct rank_ctx *c, const struct opts *o, enum coll k, size_t count)
{
	size_t nr = recv_elems(k, count, c->nranks);
	on_dev(c);
	if (o->cuda && (cu.stream_sync(c->stream) || cu.memcpy_(c->hr, c->recv, nr * 4, D2H)))
		return -1;
	long wrong = 0;
	for (size_t i = 0; i < nr; i++)
		if (c->hr[i] != expect(c, k, count, i))
			wrong++;
	return wrong;
}

/* Runs every size of one collective on the ranks in cs (one, or all of this
 * process's under --init-all, driven through groups). Rank 0 of cs prints. */
static int run_coll(struct rank_ctx *cs, int nlocal, const struct opts *o, enum coll k)
{
	int n = cs[0].nranks, print = cs[0].rank == 0;
	if (print)
		printf("# %s: %d ranks, int32, sum, %s memory%s%s\n#%12s %12s %10s %10s %10s %8s\n", coll_names[k], n,
		       o->cuda ? "cuda" : "host", o->nccl_mem ? ", ncclMemAlloc" : "", o->window ? ", in windows" : "",
		       "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
	for (size_t bytes = o->minb; bytes <= o->maxb; bytes = (size_t)ceil((double)bytes * o->factor)) {
		/* bytes is the per-rank buffer nccl-tests reports; count per block. */
		size_t count = bytes / 4;
		if (k == C_ALLGATHER || k == C_REDUCESCATTER || k == C_ALLTOALL)
			count /= (size_t)n;
		if (count == 0)
			count = 1;
		long wrong = 0;
		for (int l = 0; l < nlocal; l++)
			if (prepare(&cs[l], o, k, count))
				return 1;
		if (o->graph && capture(cs, nlocal, o, k, count)) {
			uncapture(cs, nlocal);
			return 1;
		}
		/* Timed: the calls and the wait for them, not the checks between. */
		double elapsed = 0;
		for (int it = 0; it < o->warmup + o->iters; it++) {
			double t0 = now_us();
			ncclResult_t r = ncclSuccess;
			if (o->graph) {
				for (int l = 0; l < nlocal && !r; l++)
					if (on_dev(&cs[l]), cu.graph_launch(cs[l].graph_exec, cs[l].stream))
						r = ncclUnhandledCudaError;
			} else {
				r = issue_all(cs, nlocal, k, count);
			}
			if (r) {
				uncapture(cs, nlocal);
				fprintf(stderr, "%s of %zu B failed: %s (%s)\n", coll_names[k], bytes, ncclGetErrorString(r),
					ncclGetLastError(NULL));
				return 1;
			}
			if (o->cuda)
				for (int l = 0; l < nlocal; l++)
					cu.stream_sync(cs[l].stream);
			if (it >= o->warmup)
				elapsed += now_us() - t0;
			/* The first and the last round are checked: a graph replayed
			 * many times must keep giving the right answer. */
			if ((it == 0 || it == o->warmup + o->iters - 1) && o->check)
				for (int l = 0; l < nlocal; l++)
					wrong += verify(&cs[l], o, k, count);
		}
		uncapture(cs, nlocal);
		/* Per call: a graph launch runs o->graph calls. */
		double us = elapsed / (o->iters > 0 ? o->iters : 1) / (o->graph ? o->graph : 1);
		/* algbw over the per-rank data size; busbw with nccl-tests' factors. */
		double data = (double)count * 4 * (k == C_ALLGATHER || k == C_REDUCESCATTER || k == C_ALLTOALL ? n : 1);
		double alg = data / us / 1e3;
		double f = k == C_ALLREDUCE ? 2.0 * (n - 1) / n
			   : (k == C_ALLGATHER || k == C_REDUCESCATTER || k == C_ALLTOALL) ? (double)(n - 1) / n
											  : 1.0;
		if (print)
			printf(" %12.0f %12zu %10.1f %10.3f %10.3f %8ld\n", data, count, us, alg, alg * f, wrong);
		if (wrong)
			return 2;
		if (bytes == o->maxb)
			break;
		if ((size_t)ceil((double)bytes * o->factor) > o->maxb)
			bytes = (size_t)(o->maxb / o->factor); /* end exactly at maxb */
	}
	return 0;
}

static int run_ranks(struct rank_ctx *cs, int nlocal, const struct opts *o)
{
	int rc = 0;
	for (int l = 0; l < nlocal && !rc; l++)
		if (ctx_alloc(&cs[l], o))
			rc = 1;
	if (!rc && o->window)
		rc = windows_register(cs, nlocal);
	for (int k = 0; k < C_COUNT && !rc; k++)
		if (o->colls[k])
			rc = run_coll(cs, nlocal, o, (enum coll)k);
	for (int l = 0; l < nlocal; l++)
		ctx_free(&cs[l], o);
	return rc;
}

static int one_rank(const ncclUniqueId *id, int rank, int n, const struct opts *o)
{
	struct rank_ctx c = {.rank = rank, .nranks = n, .dev = -1};
	if (o->cuda) {
		/* CUDA is loaded here, in the rank's own process (a forked child
		 * cannot use a parent's CUDA). One GPU per process: the local rank
		 * (launcher variables) picks it, else the rank, modulo the devices
		 * this process sees. */
		const char *why = "";
		if (cudart_dl_load(&cu, &why) != 0) {
			fprintf(stderr, "rank %d: --mem cuda: %s\n", rank, why);
			return 1;
		}
		int ndev = 1;
		cu.device_count(&ndev);
		c.dev = cudart_dl_local_rank(rank) % (ndev > 0 ? ndev : 1);
		if (cu.set_device(c.dev) != 0) {
			fprintf(stderr, "rank %d: cudaSetDevice(%d) failed\n", rank, c.dev);
			return 1;
		}
	}
	ncclResult_t r = ncclCommInitRank(&c.comm, n, *id, rank);
	if (r) {
		fprintf(stderr, "rank %d: ncclCommInitRank: %s (%s)\n", rank, ncclGetErrorString(r), ncclGetLastError(NULL));
		return 1;
	}
	int rc = run_ranks(&c, 1, o);
	if (rc) {
		ncclCommAbort(c.comm);
		return rc;
	}
	r = ncclCommDestroy(c.comm);
	return r ? 1 : 0;
}

/* Launcher environment: Open MPI, MPICH/PMI, Slurm, torchrun. */
static int env_rank(int *rank, int *size)
{
	static const char *const pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
					       {"PMI_RANK", "PMI_SIZE"},
					       {"SLURM_PROCID", "SLURM_NTASKS"},
					       {"RANK", "WORLD_SIZE"}};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		const char *r = getenv(pairs[i][0]), *s = getenv(pairs[i][1]);
		if (r && s) {
			*rank = atoi(r);
			*size = atoi(s);
			return *size > 0 && *rank >= 0 && *rank < *size ? 0 : -EINVAL;
		}
	}
	return -ENOENT;
}

/* Rank 0 writes the id to path (atomically, by rename); the others wait for it. */
static int share_id(const char *path, int rank, ncclUniqueId *id)
{
	if (rank == 0) {
		if (ncclGetUniqueId(id))
			return -1;
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid());
		FILE *f = fopen(tmp, "wb");
		if (!f || fwrite(id, sizeof(*id), 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
			fprintf(stderr, "rank 0: cannot write %s: %s\n", path, strerror(errno));
			return -1;
		}
		return 0;
	}
	for (int i = 0; i < 6000; i++) { /* 60 s */
		FILE *f = fopen(path, "rb");
		if (f) {
			size_t got = fread(id, sizeof(*id), 1, f);
			fclose(f);
			if (got == 1)
				return 0;
		}
		usleep(10000);
	}
	fprintf(stderr, "rank %d: no id in %s after 60 s\n", rank, path);
	return -1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: weft-nccl-driver [-o COLL[,COLL..]|all] [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP]\n"
		   "                        [-c 0|1] [--mem host|cuda] [--graph N] [--nccl-mem] [--window]\n"
		   "                        (--np N | --init-all N | --id-file PATH)\n"
		   "  COLL: allreduce allgather broadcast reducescatter alltoall sendrecv (int32, sum)\n"
		   "  --np N        fork N ranks, one process each (ncclCommInitRank)\n"
		   "  --init-all N  N ranks in this process (ncclCommInitAll, calls in groups)\n"
		   "  --id-file P   one rank of a launched job (mpirun/srun/torchrun env); rank 0 writes the id to P\n"
		   "  --mem cuda    device buffers and a stream (needs the CUDA runtime; else refused)\n"
		   "  --graph N     with --mem cuda: capture N calls in a CUDA graph and time its launches\n"
		   "                (per call, as nccl-tests' -G); the first and last launch are checked\n"
		   "  --nccl-mem    with --mem cuda: buffers from ncclMemAlloc (CUDA VMM), not cudaMalloc\n"
		   "  --window      register the send and receive buffers as windows (ncclCommWindowRegister)\n");
}

static size_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'K': case 'k': v *= 1024; break;
	case 'M': case 'm': v *= 1024 * 1024; break;
	case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
	default: break;
	}
	return v < 4 ? 4 : (size_t)v;
}

int main(int argc, char **argv)
{
	struct opts o = {.minb = 4, .maxb = 1 << 20, .factor = 2, .iters = 20, .warmup = 5, .check = 1};
	static const struct option lo[] = {{"mem", 1, 0, 'm'}, {"np", 1, 0, 'N'}, {"init-all", 1, 0, 'A'},
					   {"id-file", 1, 0, 'I'}, {"graph", 1, 0, 'G'},
					   {"nccl-mem", 0, 0, 'M'}, {"window", 0, 0, 'W'},
					   {"help", 0, 0, 'h'},     {0, 0, 0, 0}};
	int c, any = 0;
	while ((c = getopt_long(argc, argv, "o:b:e:f:n:w:c:h", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				int found = 0;
				for (int k = 0; k < C_COUNT; k++)
					if (!strcmp(t, "all") || !strcmp(t, coll_names[k]))
						o.colls[k] = found = 1;
				if (!found) {
					fprintf(stderr, "unknown collective '%s'\n", t);
					return 2;
				}
				any = 1;
			}
			break;
		case 'b': o.minb = parse_size(optarg); break;
		case 'e': o.maxb = parse_size(optarg); break;
		case 'f': o.factor = atof(optarg); break;
		case 'n': o.iters = atoi(optarg); break;
		case 'w': o.warmup = atoi(optarg); break;
		case 'c': o.check = atoi(optarg); break;
		case 'm':
			if (!strcmp(optarg, "cuda"))
				o.cuda = 1;
			else if (strcmp(optarg, "host")) {
				fprintf(stderr, "--mem takes host or cuda\n");
				return 2;
			}
			break;
		case 'N': o.np = atoi(optarg); break;
		case 'A': o.init_all = atoi(optarg); break;
		case 'I': o.id_file = optarg; break;
		case 'G': o.graph = atoi(optarg); break;
		case 'M': o.nccl_mem = 1; break;
		case 'W': o.window = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!any)
		o.colls[C_ALLREDUCE] = 1;
	if (o.nccl_mem && !o.cuda) {
		fprintf(stderr, "--nccl-mem needs --mem cuda (ncclMemAlloc gives device memory)\n");
		return 2;
	}
	if (o.graph < 0 || (o.graph && !o.cuda)) {
		fprintf(stderr, "--graph N needs N >= 0 and --mem cuda (graphs capture CUDA streams)\n");
		return 2;
	}
	if (o.factor <= 1.0 || o.minb > o.maxb || o.iters < 1 || o.warmup < 0 || (!o.np && !o.init_all && !o.id_file)) {
		usage(stderr);
		return 2;
	}
	/* --np forks the ranks, which load CUDA themselves: ask a child first.
	 * The other modes run the ranks in this process. */
	const char *why = "";
	int cerr = 0;
	if (o.cuda && o.np)
		cerr = cudart_dl_probe_forked("weft-nccl-driver");
	else if (o.cuda && (cerr = cudart_dl_load(&cu, &why)) != 0)
		fprintf(stderr, "weft-nccl-driver: --mem cuda: %s\n", why);
	if (cerr)
		return 77;
	int v = 0;
	ncclGetVersion(&v);
	printf("# weft-nccl-driver: NCCL API version code %d\n", v);
	fflush(stdout);
	if (o.init_all) {
		ncclComm_t comms[o.init_all];
		int ndev = 1, devs[o.init_all];
		if (o.cuda)
			cu.device_count(&ndev);
		/* Rank i on GPU i modulo the GPUs seen: one GPU may hold several ranks. */
		for (int i = 0; i < o.init_all; i++)
			devs[i] = i % (ndev > 0 ? ndev : 1);
		ncclResult_t r = ncclCommInitAll(comms, o.init_all, o.cuda ? devs : NULL);
		if (r) {
			fprintf(stderr, "ncclCommInitAll: %s (%s)\n", ncclGetErrorString(r), ncclGetLastError(NULL));
			return 1;
		}
		struct rank_ctx cs[o.init_all];
		memset(cs, 0, sizeof(cs));
		for (int i = 0; i < o.init_all; i++) {
			cs[i].comm = comms[i];
			cs[i].rank = i;
			cs[i].nranks = o.init_all;
			int d = -1;
			if (o.cuda && (ncclCommCuDevice(comms[i], &d) != ncclSuccess || d < 0))
				d = i % (ndev > 0 ? ndev : 1);
			cs[i].dev = d;
		}
		int rc = run_ranks(cs, o.init_all, &o);
		for (int i = 0; i < o.init_all; i++)
			rc ? ncclCommAbort(comms[i]) : ncclCommDestroy(comms[i]);
		return rc;
	}
	if (o.id_file) {
		int rank = 0, size = 0;
		if (env_rank(&rank, &size)) {
			fprintf(stderr, "--id-file: no launcher rank/size in the environment (OMPI_COMM_WORLD_*, PMI_*, SLURM_*, RANK/WORLD_SIZE)\n");
			return 2;
		}
		ncclUniqueId id;
		if (share_id(o.id_file, rank, &id))
			return 1;
		return one_rank(&id, rank, size, &o);
	}
	ncclUniqueId id;
	ncclResult_t r = ncclGetUniqueId(&id);
	if (r) {
		fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetErrorString(r));
		return 1;
	}
	fflush(NULL);
	for (int i = 0; i < o.np; i++)
		if (fork() == 0) {
			int rc = one_rank(&id, i, o.np, &o);
			fflush(NULL); /* _exit does not flush stdio */
			_exit(rc);
		}
	int bad = 0, st;
	for (int i = 0; i < o.np; i++)
		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			bad++;
	if (bad)
		fprintf(stderr, "%d of %d ranks failed\n", bad, o.np);
	return bad ? 1 : 0;
}
