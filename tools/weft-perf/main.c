/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf: the benchmark users run. Primitive benchmarks (one-sided put
 * bandwidth, put+signal ping-pong latency) and collectives, printed in
 * nccl-tests' layout, built on the public API of include/weft/weft.h only.
 * This part: main, what one rank does, and the helpers every part uses. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <weft/weft.h>

#include "cudart_dl.h"
#include "wp.h"

double wp_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Reports a failed weft call on this rank; returns rc so callers can pass it on. */
int wp_fail(const struct run *r, int rc, const char *fmt, ...)
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

void *wp_alloc_buf(size_t len)
{
	/* Page alignment is what registration likes best; never 0 bytes so every
	 * buffer has an address of its own. */
	void *p = NULL;
	size_t l = len ? (len + 4095) & ~(size_t)4095 : 4096;
	if (posix_memalign(&p, 4096, l) != 0)
		return NULL;
	return p;
}

/* Everything one rank does. Returns 0, or an error already reported; data
 * errors (#wrong) make rank 0 return 1. */
int wp_run_rank(const struct opts *o, weft_comm_t *comm, void *stream)
{
	struct run r = {
		.o = o, .comm = comm, .rank = weft_comm_rank(comm), .nranks = weft_comm_size(comm), .stream = stream};
	int rc = 0;
	uint64_t wrong_all = 0;

	if (o->bench == BENCH_ENTRY)
		return wp_entry_rank(&r);
	if (o->bench != BENCH_COLL && r.nranks < 2) {
		if (r.rank == 0)
			fprintf(stderr, "weft-perf: --op %s needs at least 2 ranks (this job has %d)\n",
				o->bench == BENCH_PUT ? "put" : "pingpong", r.nranks);
		return -EINVAL;
	}
	if (o->bench == BENCH_COLL && wp_colls[o->coll].rooted && o->root >= r.nranks) {
		if (r.rank == 0)
			fprintf(stderr, "weft-perf: -r %d: the root must be a rank below %d\n", o->root, r.nranks);
		return -EINVAL;
	}

	if (o->bench == BENCH_COLL)
		rc = wp_coll_rank(&r, &wrong_all);
	else if (o->mem_cuda)
		rc = wp_gpu_prim_rank(&r, &wrong_all);
	else
		rc = wp_prim_rank(&r, &wrong_all);
	if (rc != 0)
		return rc;
	if (r.rank == 0 && wrong_all) {
		fprintf(stderr, "weft-perf: the data check found %" PRIu64 " wrong %s\n", wrong_all,
			o->bench == BENCH_COLL ? "elements" : "bytes");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	wp_parse_args(argc, argv, &o);
	/* Rank 0 prints as it goes; keep the lines whole when several ranks share a pipe. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* One message, before any rank forks, where no GPU can be used. */
	if (o.mem_cuda && o.bench != BENCH_COLL && wp_gpu_lib_load(&o) != 0)
		return 1;
	if (o.np && o.mem_cuda && o.bench == BENCH_COLL && cudart_dl_probe_forked("weft-perf") != 0)
		return 1;
	if (o.np)
		return wp_run_forked(&o);
	return wp_run_one_process(&o);
}
