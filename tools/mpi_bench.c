/* SPDX-License-Identifier: Apache-2.0 */
/* mpi_bench: times MPI's allreduce, allgather, reduce-scatter, broadcast,
 * reduce and alltoall with weft-perf's sizes (the whole buffer for allgather,
 * reduce-scatter and alltoall) and output columns, so that
 * tools/bench-vs-mpi.sh can set them side by side; --collective membw
 * measures the host's memory bandwidth with every rank copying and reducing
 * at once, for the script's floors. Not part of the build: the script
 * compiles it with mpicc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, MEMBW };

static const char *const coll_names[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
					  "alltoall", "membw"};

struct type_info {
	const char *name, *nccl_name;
	MPI_Datatype mpi;
	size_t size;
};

static const struct type_info types[] = {
	{"float", "float", MPI_FLOAT, 4},
	{"double", "double", MPI_DOUBLE, 8},
	{"int32", "int32", MPI_INT32_T, 4},
	{"int64", "int64", MPI_INT64_T, 8},
};

static void usage_exit(int rank, const char *msg)
{
	if (rank == 0) {
		if (msg)
			fprintf(stderr, "mpi_bench: %s\n", msg);
		fprintf(stderr, "usage: mpi_bench [--collective all_reduce|all_gather|reduce_scatter|broadcast|reduce|\n"
				"                 alltoall|membw] [-b SIZE] [-e SIZE] [-f N]\n"
				"                 [--large SIZE --iters-large N --warmup-large N]\n"
				"                 [-d float|double|int32|int64] [-w N] [-n N] [-c 0|1]\n");
	}
	MPI_Finalize();
	exit(2);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || *s == '-')
		return -1;
	int shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

/* Element i of rank r's input: a small integer, so sums are exact in any type. */
static double val(int r, size_t i)
{
	return (double)((i * 7 + (size_t)r * 13) % 9);
}

static void put(const struct type_info *t, void *b, size_t i, double v)
{
	if (t->mpi == MPI_FLOAT)
		((float *)b)[i] = (float)v;
	else if (t->mpi == MPI_DOUBLE)
		((double *)b)[i] = v;
	else if (t->mpi == MPI_INT32_T)
		((int32_t *)b)[i] = (int32_t)v;
	else
		((int64_t *)b)[i] = (int64_t)v;
}

static double get(const struct type_info *t, const void *b, size_t i)
{
	if (t->mpi == MPI_FLOAT)
		return ((const float *)b)[i];
	if (t->mpi == MPI_DOUBLE)
		return ((const double *)b)[i];
	if (t->mpi == MPI_INT32_T)
		return ((const int32_t *)b)[i];
	return (double)((const int64_t *)b)[i];
}

/* Poisons the output (recv_n elements of rbuf), then writes this rank's input
 * (send_n elements at in, which lies inside rbuf in place). */
static void prepare(const struct type_info *t, void *in, size_t send_n, int rank, void *rbuf, size_t recv_n)
{
	memset(rbuf, 0xff, recv_n * t->size);
	for (size_t i = 0; i < send_n; i++)
		put(t, in, i, val(rank, i));
}

/* The counts of one size, as weft-perf counts them: the whole buffer for
 * allgather (its output), reduce-scatter and alltoall (their input), in
 * elements rounded down to 16 bytes per rank. */
struct shape {
	size_t count, send_n, recv_n, bytes;
};

static void shape_of(enum coll coll, uint64_t size, size_t ts, int n, struct shape *s)
{
	size_t elems = size / ts, per = (elems / (size_t)n) & ~(16 / ts - 1);
	s->count = coll == ALLGATHER || coll == REDUCE_SCATTER || coll == ALLTOALL ? per : elems;
	s->send_n = coll == REDUCE_SCATTER || coll == ALLTOALL ? per * (size_t)n : s->count;
	s->recv_n = coll == ALLGATHER || coll == ALLTOALL ? per * (size_t)n : s->count;
	s->bytes = (s->send_n > s->recv_n ? s->send_n : s->recv_n) * ts;
}

/* This rank's input: sbuf out of place; in place, inside rbuf where
 * MPI_IN_PLACE (or, for broadcast and reduce, the buffer argument) reads it. */
static char *in_of(enum coll coll, int ip, const struct shape *s, size_t ts, int rank, char *sbuf, char *rbuf)
{
	if (!ip)
		return sbuf;
	return coll == ALLGATHER ? rbuf + (size_t)rank * s->count * ts : rbuf;
}

static void call(enum coll coll, int ip, const struct shape *s, const struct type_info *t, int rank, char *sbuf,
		 char *rbuf)
{
	int c = (int)s->count;
	MPI_Comm w = MPI_COMM_WORLD;
	switch (coll) {
	case ALLREDUCE:
		MPI_Allreduce(ip ? MPI_IN_PLACE : sbuf, rbuf, c, t->mpi, MPI_SUM, w);
		break;
	case ALLGATHER:
		if (ip)
			MPI_Allgather(MPI_IN_PLACE, 0, t->mpi, rbuf, c, t->mpi, w);
		else
			MPI_Allgather(sbuf, c, t->mpi, rbuf, c, t->mpi, w);
		break;
	case REDUCE_SCATTER:
		MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : sbuf, rbuf, c, t->mpi, MPI_SUM, w);
		break;
	case BROADCAST:
		/* MPI broadcasts in place; out of place the root first copies its
		 * input to the output, as weft's root does. */
		if (!ip && rank == 0)
			memcpy(rbuf, sbuf, s->count * t->size);
		MPI_Bcast(rbuf, c, t->mpi, 0, w);
		break;
	case REDUCE:
		if (!ip)
			MPI_Reduce(sbuf, rbuf, c, t->mpi, MPI_SUM, 0, w);
		else if (rank == 0)
			MPI_Reduce(MPI_IN_PLACE, rbuf, c, t->mpi, MPI_SUM, 0, w);
		else
			MPI_Reduce(rbuf, NULL, c, t->mpi, MPI_SUM, 0, w);
		break;
	case ALLTOALL:
		if (ip)
			MPI_Alltoall(MPI_IN_PLACE, 0, t->mpi, rbuf, c, t->mpi, w);
		else
			MPI_Alltoall(sbuf, c, t->mpi, rbuf, c, t->mpi, w);
		break;
	default:
		break;
	}
}

/* Element i of this rank's output (root 0 for broadcast and reduce). */
static double expected(enum coll coll, const struct shape *s, int n, int rank, size_t i)
{
	double want = 0;
	switch (coll) {
	case ALLGATHER: return val((int)(i / s->count), i % s->count);
	case BROADCAST: return val(0, i);
	case ALLTOALL: return val((int)(i / s->count), (size_t)rank * s->count + i % s->count);
	case REDUCE_SCATTER:
		for (int r = 0; r < n; r++)
			want += val(r, (size_t)rank * s->count + i);
		return want;
	default:
		for (int r = 0; r < n; r++)
			want += val(r, i);
		return want;
	}
}

/* The host's memory bandwidth with every rank busy at once, as the script's
 * floors need it: each rank copies bytes from one buffer to another, then
 * adds one float buffer into another, iters times each; the rates are the
 * bytes written by all ranks per second (the slowest rank's time). */
static int membw(int rank, int n, uint64_t bytes, int iters)
{
	size_t nf = bytes / sizeof(float);
	float *a = malloc(nf * sizeof(float)), *b = malloc(nf * sizeof(float));
	if (!a || !b) {
		fprintf(stderr, "mpi_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (size_t i = 0; i < nf; i++) {
		a[i] = (float)(i % 7);
		b[i] = 1.0f;
	}
	double rate[2];
	for (int pass = 0; pass < 2; pass++) {
		memcpy(b, a, nf * sizeof(float)); /* warm-up: pages mapped, caches alike */
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int it = 0; it < iters; it++) {
			if (pass == 0)
				memcpy(b, a, nf * sizeof(float));
			else
				for (size_t i = 0; i < nf; i++)
					b[i] += a[i];
		}
		double mine = MPI_Wtime() - t0, slowest;
		MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		rate[pass] = (double)n * (double)(nf * sizeof(float)) * iters / slowest / 1e9;
	}
	if (rank == 0)
		printf("# membw: ranks %d bytes %zu iters %d copy_GBps %.2f reduce_GBps %.2f check %g\n", n,
		       nf * sizeof(float), iters, rate[0], rate[1], (double)b[nf / 2]);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);

	uint64_t minb = 1024, maxb = 1 << 20, factor = 2;
	int warmup = 5, iters = 20, check = 1, warmup_large = -1, iters_large = -1;
	uint64_t large = UINT64_MAX;
	enum coll coll = ALLREDUCE;
	const struct type_info *t = &types[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage_exit(rank, "a flag needs a value");
		if (!strcmp(a, "--collective")) {
			int found = -1;
			for (int k = 0; k <= MEMBW; k++) {
				char bare[32];
				size_t o = 0;
				for (const char *q = coll_names[k]; *q && o + 1 < sizeof(bare); q++)
					if (*q != '_')
						bare[o++] = *q;
				bare[o] = '\0';
				if (!strcmp(v, coll_names[k]) || !strcmp(v, bare))
					found = k;
			}
			if (found < 0)
				usage_exit(rank, "--collective: all_reduce all_gather reduce_scatter broadcast reduce alltoall membw");
			coll = (enum coll)found;
		} else if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
			if (parse_size(v, !strcmp(a, "-b") ? &minb : &maxb) != 0)
				usage_exit(rank, "bad size");
		} else if (!strcmp(a, "-f")) {
			factor = strtoull(v, NULL, 10);
		} else if (!strcmp(a, "--large")) {
			if (parse_size(v, &large) != 0)
				usage_exit(rank, "bad size");
		} else if (!strcmp(a, "--iters-large")) {
			iters_large = atoi(v);
		} else if (!strcmp(a, "--warmup-large")) {
			warmup_large = atoi(v);
		} else if (!strcmp(a, "-w")) {
			warmup = atoi(v);
		} else if (!strcmp(a, "-n")) {
			iters = atoi(v);
		} else if (!strcmp(a, "-c")) {
			check = atoi(v);
		} else if (!strcmp(a, "-d")) {
			t = NULL;
			for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
				if (!strcmp(v, types[k].name))
					t = &types[k];
			if (!t)
				usage_exit(rank, "-d: float double int32 int64");
		} else {
			usage_exit(rank, "unknown flag");
		}
		i++;
	}
	if (factor < 2 || iters < 1 || warmup < 0 || minb < 1 || minb > maxb)
		usage_exit(rank, "need -f >= 2, -n >= 1, 1 <= -b <= -e");

	if (coll == MEMBW)
		return membw(rank, n, maxb, iters);
	size_t ts = t->size;
	char *sbuf = malloc(maxb + 64), *rbuf = malloc(maxb + 64);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "mpi_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		printf("# mpi_bench: %s, %d ranks, MPI library: ", coll_names[coll], n);
		char ver[MPI_MAX_LIBRARY_VERSION_STRING];
		int len;
		MPI_Get_library_version(ver, &len);
		char *nl = strchr(ver, '\n');
		if (nl)
			*nl = '\0';
		printf("%s\n", ver);
		printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size", "count", "type",
		       "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
	}
	double bw_sum = 0;
	int bw_n = 0;
	long wrong_total = 0;
	int reduces = coll == ALLREDUCE || coll == REDUCE_SCATTER || coll == REDUCE;
	for (uint64_t size = minb; size <= maxb; size *= factor) {
		struct shape sh;
		shape_of(coll, size, ts, n, &sh);
		double us[2];
		long wrong[2];
		/* Sizes above --large run fewer iterations, in the same launch. */
		int iters_now = size > large && iters_large > 0 ? iters_large : iters;
		int warmup_now = size > large && warmup_large >= 0 ? warmup_large : warmup;
		for (int ip = 0; ip < 2; ip++) {
			double t0 = 0;
			/* The timed calls move laid-out data, as weft-perf's do: pages
			 * of a fresh malloc that were never written all map the
			 * kernel's one zero page, which every read then finds in
			 * cache. */
			prepare(t, in_of(coll, ip, &sh, ts, rank, sbuf, rbuf), sh.send_n, rank, rbuf, sh.recv_n);
			for (int it = -warmup_now; it < iters_now; it++) {
				if (it == 0)
					MPI_Barrier(MPI_COMM_WORLD);
				if (it == 0)
					t0 = MPI_Wtime();
				call(coll, ip, &sh, t, rank, sbuf, rbuf);
				if (it == iters_now - 1) {
					double mine = (MPI_Wtime() - t0) * 1e6 / iters_now;
					MPI_Allreduce(&mine, &us[ip], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				}
			}
			wrong[ip] = 0;
			if (check) {
				/* Fresh input, poisoned output, one call, compare. */
				prepare(t, in_of(coll, ip, &sh, ts, rank, sbuf, rbuf), sh.send_n, rank, rbuf, sh.recv_n);
				call(coll, ip, &sh, t, rank, sbuf, rbuf);
				long w = 0;
				for (size_t i = 0; i < sh.recv_n && (coll != REDUCE || rank == 0); i++)
					w += get(t, rbuf, i) != expected(coll, &sh, n, rank, i);
				MPI_Allreduce(&w, &wrong[ip], 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			double f = coll == ALLREDUCE ? 2.0 * (n - 1) / n
				   : coll == BROADCAST || coll == REDUCE ? 1.0 : (double)(n - 1) / n;
			printf("%12zu  %12zu  %8s  %6s  %6d", sh.bytes, sh.count, t->nccl_name, reduces ? "sum" : "none",
			       coll == BROADCAST || coll == REDUCE ? 0 : -1);
			for (int ip = 0; ip < 2; ip++) {
				double algbw = us[ip] > 0 ? sh.bytes / (us[ip] * 1e3) : 0;
				char ws[16];
				if (check)
					snprintf(ws, sizeof(ws), "%ld", wrong[ip]);
				else
					snprintf(ws, sizeof(ws), "N/A");
				/* nccl-tests' time format: fewer decimals as the time grows. */
				int prec = us[ip] >= 100000.0 ? 0 : us[ip] >= 10000.0 ? 1 : 2;
				printf("  %7.*f  %6.2f  %6.2f  %6s", prec, us[ip], algbw, algbw * f, ws);
				bw_sum += algbw * f;
				bw_n++;
				wrong_total += wrong[ip];
			}
			printf("\n");
			fflush(stdout);
		}
		if (size > maxb / factor)
			break;
	}
	if (rank == 0) {
		printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
		printf("# Avg bus bandwidth    : %g \n", bw_n ? bw_sum / bw_n : 0.0);
	}
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return wrong_total ? 1 : 0;
}
