/* SPDX-License-Identifier: Apache-2.0 */
/* What weft-perf prints: the run's header, the tables in nccl-tests' layout
 * (collectives) and its own (put, pingpong), and the footer. Rank 0 prints. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "wp.h"

static void print_time(double us, char *out, size_t len)
{
	if (us >= 100000.0)
		snprintf(out, len, "%7.0f", us);
	else if (us >= 10000.0)
		snprintf(out, len, "%7.1f", us);
	else
		snprintf(out, len, "%7.2f", us);
}

void wp_print_header_common(const struct run *r, const char *what)
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

static double busbw_factor(enum coll c, int n)
{
	switch (wp_colls[c].busbw_kind) {
	case 1: return (double)(n - 1) / n;
	case 2: return 2.0 * (n - 1) / n;
	default: return 1.0;
	}
}

/* The table of --op put|pingpong: which transport, what is timed, and the
 * column heads. */
void wp_print_prim_header(const struct run *r, const char *transport, const char *desc)
{
	const struct opts *o = r->o;
	printf("# transport: %s (rank 0 -> rank 1: %s)\n", transport, desc);
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

/* One size of --op put|pingpong; returns the bandwidth it printed. */
double wp_print_prim_row(const struct opts *o, uint64_t size, double us, uint64_t wrong)
{
	char ts[32], ws[32];
	double bw = us > 0 ? size / (us * 1e3) : 0;
	print_time(us, ts, sizeof(ts));
	if (o->check)
		snprintf(ws, sizeof(ws), "%6" PRIu64, wrong);
	else
		snprintf(ws, sizeof(ws), "%6s", "N/A");
	printf("%12" PRIu64 "  %7s  %6.2f  %6s\n", size, ts, bw, ws);
	fflush(stdout);
	return bw;
}

/* The head of the collective table, nccl-tests' columns (and NCCL's time and
 * the ratio beside each mode with --peer nccl). */
void wp_print_coll_header(const struct run *r)
{
	const struct opts *o = r->o;
	int peer = o->peer_nccl;
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

/* One size of the collective table, from the results of all ranks; adds its
 * bus bandwidths and wrong elements to the footer's totals. */
void wp_print_coll_row(const struct run *r, const struct coll_shape *s, const struct rank_result *all,
		       double *bw_sum, int *bw_n, uint64_t *wrong_total)
{
	const struct opts *o = r->o;
	const struct coll_info *ci = &wp_colls[o->coll];
	int peer = o->peer_nccl;

	printf("%12zu  %12zu  %8s  %6s  %6d", s->bytes, s->count, o->type->nccl_name,
	       ci->reduces ? wp_redop_names[o->op] : "none", ci->rooted ? o->root : -1);
	for (int ip = 0; ip < 2; ip++) {
		char ts[32], ws[32];
		double algbw = all->us[ip] > 0 ? s->bytes / (all->us[ip] * 1e3) : 0;
		double busbw = algbw * busbw_factor(o->coll, r->nranks);
		uint64_t wrong = all->wrong[ip] + all->nccl_wrong[ip];
		print_time(all->us[ip], ts, sizeof(ts));
		if (o->check)
			snprintf(ws, sizeof(ws), "%6" PRIu64, wrong);
		else
			snprintf(ws, sizeof(ws), "%6s", "N/A");
		printf("  %7s  %6.2f  %6.2f  %6s", ts, algbw, busbw, ws);
		if (peer) {
			if (all->nccl_us[ip] > 0) {
				print_time(all->nccl_us[ip], ts, sizeof(ts));
				printf("  %7s  %6.2f", ts, all->us[ip] > 0 ? all->nccl_us[ip] / all->us[ip] : 0);
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

/* Under each table: the data check's verdict and the average bandwidth. */
void wp_print_footer(const struct run *r, double bw_sum, int bw_n, uint64_t wrong_total, const char *bw_name)
{
	if (r->rank != 0)
		return;
	printf("# Out of bounds values : %" PRIu64 " %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
	printf("# Avg %s    : %g \n", bw_name, bw_n ? bw_sum / bw_n : 0.0);
	printf("#\n");
	fflush(stdout);
}

