/* SPDX-License-Identifier: Apache-2.0 */
/* mpi_bench: times MPI_Allreduce and MPI_Allgather with weft-perf's sizes and
 * output columns, so that tools/bench-vs-mpi.sh can set the two side by side.
 * Not part of the build: the script compiles it with mpicc. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, ALLGATHER };

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
		fprintf(stderr, "usage: mpi_bench [--collective all_reduce|all_gather] [-b SIZE] [-e SIZE] [-f N]\n"
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

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, n;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &n);

	uint64_t minb = 1024, maxb = 1 << 20, factor = 2;
	int warmup = 5, iters = 20, check = 1;
	enum coll coll = ALLREDUCE;
	const struct type_info *t = &types[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v)
			usage_exit(rank, "a flag needs a value");
		if (!strcmp(a, "--collective")) {
			if (!strcmp(v, "all_reduce") || !strcmp(v, "allreduce"))
				coll = ALLREDUCE;
			else if (!strcmp(v, "all_gather") || !strcmp(v, "allgather"))
				coll = ALLGATHER;
			else
				usage_exit(rank, "--collective: all_reduce or all_gather");
		} else if (!strcmp(a, "-b") || !strcmp(a, "-e")) {
			if (parse_size(v, !strcmp(a, "-b") ? &minb : &maxb) != 0)
				usage_exit(rank, "bad size");
		} else if (!strcmp(a, "-f")) {
			factor = strtoull(v, NULL, 10);
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

	size_t ts = t->size;
	char *sbuf = malloc(maxb + 64), *rbuf = malloc(maxb + 64);
	if (!sbuf || !rbuf) {
		fprintf(stderr, "mpi_bench: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		printf("# mpi_bench: %s, %d ranks, MPI library: ", coll == ALLREDUCE ? "all_reduce" : "all_gather", n);
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
	for (uint64_t size = minb; size <= maxb; size *= factor) {
		size_t count, send_n, recv_n;
		if (coll == ALLREDUCE) {
			count = send_n = recv_n = size / ts;
		} else {
			count = (size / ts / n) & ~(16 / ts - 1);
			send_n = count;
			recv_n = count * n;
		}
		size_t bytes = recv_n * ts;
		double us[2];
		long wrong[2];
		for (int ip = 0; ip < 2; ip++) {
			void *s = ip ? MPI_IN_PLACE : sbuf;
			/* This rank's input, inside rbuf in place. */
			char *in = ip ? (coll == ALLGATHER ? rbuf + (size_t)rank * count * ts : rbuf) : sbuf;
			double t0 = 0;
			/* The timed calls move laid-out data, as weft-perf's do: pages
			 * of a fresh malloc that were never written all map the
			 * kernel's one zero page, which every read then finds in
			 * cache. */
			prepare(t, in, send_n, rank, rbuf, recv_n);
			for (int it = -warmup; it < iters; it++) {
				if (it == 0)
					MPI_Barrier(MPI_COMM_WORLD);
				if (it == 0)
					t0 = MPI_Wtime();
				if (coll == ALLREDUCE)
					MPI_Allreduce(s, rbuf, (int)count, t->mpi, MPI_SUM, MPI_COMM_WORLD);
				else if (ip)
					MPI_Allgather(MPI_IN_PLACE, 0, t->mpi, rbuf, (int)count, t->mpi, MPI_COMM_WORLD);
				else
					MPI_Allgather(sbuf, (int)count, t->mpi, rbuf, (int)count, t->mpi, MPI_COMM_WORLD);
				if (it == iters - 1) {
					double mine = (MPI_Wtime() - t0) * 1e6 / iters;
					MPI_Allreduce(&mine, &us[ip], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				}
			}
			wrong[ip] = 0;
			if (check) {
				/* Fresh input, poisoned output, one call, compare. */
				prepare(t, in, send_n, rank, rbuf, recv_n);
				if (coll == ALLREDUCE)
					MPI_Allreduce(s, rbuf, (int)count, t->mpi, MPI_SUM, MPI_COMM_WORLD);
				else if (ip)
					MPI_Allgather(MPI_IN_PLACE, 0, t->mpi, rbuf, (int)count, t->mpi, MPI_COMM_WORLD);
				else
					MPI_Allgather(sbuf, (int)count, t->mpi, rbuf, (int)count, t->mpi, MPI_COMM_WORLD);
				long w = 0;
				for (size_t i = 0; i < recv_n; i++) {
					double want = 0;
					if (coll == ALLREDUCE)
						for (int r = 0; r < n; r++)
							want += val(r, i);
					else
						want = val((int)(i / count), i % count);
					w += get(t, rbuf, i) != want;
				}
				MPI_Allreduce(&w, &wrong[ip], 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
			}
		}
		if (rank == 0) {
			double f = coll == ALLREDUCE ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
			printf("%12zu  %12zu  %8s  %6s  %6d", bytes, count, t->nccl_name, coll == ALLREDUCE ? "sum" : "none",
			       -1);
			for (int ip = 0; ip < 2; ip++) {
				double algbw = us[ip] > 0 ? bytes / (us[ip] * 1e3) : 0;
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
