/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf --op entry: what a public call's entry costs, the live-handle check
 * (weft_comm_status: check and one atomic load) and the check with the
 * communicator's claim and release (a zero-count weft_allreduce, which returns
 * right after). Each rank times its own calls; rank 0 prints the slowest. */
#define _GNU_SOURCE
#include <stdio.h>
#include <time.h>

#include "wp.h"

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Nanoseconds per call of `what` over n calls, best of 5 rounds. */
static double time_calls(const struct run *r, int what, long n)
{
	double best = 1e30;
	int v = 0;
	for (int round = 0; round < 5; round++) {
		double t0 = now_ns();
		for (long i = 0; i < n; i++) {
			int rc = what == 0 ? weft_comm_status(r->comm)
					   : weft_allreduce(&v, &v, 0, WEFT_INT32, WEFT_SUM, r->comm, NULL);
			if (rc != 0)
				return -1;
		}
		double t = (now_ns() - t0) / (double)n;
		best = t < best ? t : best;
	}
	return best;
}

int wp_entry_rank(const struct run *r)
{
	long n = r->o->iters > 0 ? (long)r->o->iters * 100000L : 2000000L;
	double t[2];
	for (int w = 0; w < 2; w++) {
		t[w] = time_calls(r, w, n);
		if (t[w] < 0)
			return wp_fail(r, -1, "a timed call failed");
		/* The slowest rank's figure, as the other tables print. */
		double all[256];
		int np = r->nranks < 256 ? r->nranks : 256;
		if (np == r->nranks && weft_comm_allgather(r->comm, &t[w], all, sizeof(double)) == 0)
			for (int i = 0; i < np; i++)
				t[w] = all[i] > t[w] ? all[i] : t[w];
	}
	if (r->rank == 0) {
		printf("# entry: %d rank%s, %ld calls a round, best of 5 rounds, slowest rank\n", r->nranks,
		       r->nranks == 1 ? "" : "s", n);
		printf("%-44s %10.1f ns\n", "weft_comm_status (handle check)", t[0]);
		printf("%-44s %10.1f ns\n", "weft_allreduce, count 0 (check, claim, release)", t[1]);
	}
	return 0;
}
