/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf's private header: the options, one rank's view of a run, and what
 * its parts (main, options, launch, coll, prim, gpu, nccl, output, pattern)
 * call across files. Not installed; nothing here is weft's API. */
#ifndef WEFT_PERF_WP_H
#define WEFT_PERF_WP_H

#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

#include "cudart_dl.h"

#define MAX_TRANSPORTS 8
#define EXIT_USAGE 2

enum bench { BENCH_COLL, BENCH_PUT, BENCH_PINGPONG, BENCH_ENTRY };

enum coll { C_ALLREDUCE, C_ALLGATHER, C_REDUCE_SCATTER, C_BROADCAST, C_REDUCE, C_ALLTOALL, C_SENDRECV, C_COUNT };

/* Per collective: names (nccl-tests' first), whether it reduces, whether it has a
 * root, and nccl-tests' bus bandwidth factor as (num * (n - sub)) / (den * n). */
struct coll_info {
	const char *name, *alias;
	int reduces, rooted;
	int busbw_kind; /* 0: 1, 1: (n-1)/n, 2: 2(n-1)/n */
};
extern const struct coll_info wp_colls[C_COUNT];

/* Element types weft-perf can generate and verify. `limit` is the largest
 * integer the type holds exactly, which bounds the generated values so that
 * sums stay exact in any order. */
struct type_info {
	enum weft_datatype type;
	const char *name, *alias, *nccl_name;
	size_t size;
	double limit;
	int is_float;
	int nccl; /* ncclDataType_t, for --peer nccl */
};

/* The plain reductions weft-perf times (not the pre-multiplied sum, whose
 * scalar it has no option for). */
#define PERF_NREDOPS 5
extern const char *const wp_redop_names[PERF_NREDOPS];

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

/* Element counts of one size, as nccl-tests counts them: -b/-e give the whole
 * buffer, and collectives that split it give each rank size/type/nranks
 * elements, aligned down to 16 bytes. */
struct coll_shape {
	size_t count;          /* the count argument of the call, printed as "count" */
	size_t send_n, recv_n; /* elements in the send and receive buffers */
	size_t bytes;          /* printed "size": the larger buffer */
};

/* The buffers of one call. In place, one buffer serves both, laid out as the
 * API's in-place rules say. With --mem cuda each buffer has a host mirror
 * where the input is laid out and the output read back. */
struct coll_bufs {
	unsigned char *send, *recv; /* what the call gets */
	unsigned char *alloc[2];
	unsigned char *host[2]; /* host views of alloc[] (alloc[] itself for host memory) */
	size_t len[2];
};

/* What one rank measured at one size, [0] out of place and [1] in place;
 * coll.c gathers them over the comm for rank 0's table. */
struct rank_result {
	double us[2];
	uint64_t wrong[2];
	double nccl_us[2]; /* --peer nccl: the same calls through NCCL */
	uint64_t nccl_wrong[2];
};

/* Which library a timed collective call goes through. */
enum lib { LIB_WEFT, LIB_NCCL };
extern const char *const wp_lib_names[];

/* main.c: the entry point, what one rank does, and helpers of every part. */
double wp_now_us(void);
int wp_fail(const struct run *r, int rc, const char *fmt, ...);
void *wp_alloc_buf(size_t len);
int wp_run_rank(const struct opts *o, weft_comm_t *comm, void *stream);

/* options.c: the command line. Exits 0 after --help, EXIT_USAGE on a bad flag. */
void wp_parse_args(int argc, char **argv, struct opts *o);
uint64_t wp_next_size(const struct opts *o, uint64_t s);

/* launch.c: the ranks, from a launcher's environment or forked by --np. */
int wp_run_one_process(const struct opts *o);
int wp_run_forked(const struct opts *o);

/* pattern.c: the data every rank can compute for every rank, and its check. */
struct pattern {
	const struct type_info *t;
	enum weft_redop op;
	int reduces;
	uint64_t seed, range; /* values are 0..range-1 (or 1..2 for prod) */
};
uint64_t wp_splitmix64(uint64_t x);
void wp_pattern_init(struct pattern *p, const struct opts *o, int nranks, uint64_t size);
void wp_pattern_fill(const struct pattern *p, void *buf, int rank, uint64_t first, size_t n);
void wp_pattern_reduce(const struct pattern *p, void *buf, size_t i, int nranks, uint64_t idx);
uint64_t wp_count_wrong(const struct type_info *t, enum weft_redop op, int reduces, const void *got,
			const void *want, size_t n);
void wp_poison(void *buf, size_t bytes);

/* coll.c: collectives, timed and checked. */
int wp_lib_call(const struct run *r, enum lib lib, const struct coll_shape *s, const void *sbuf, void *rbuf);
int wp_coll_rank(struct run *r, uint64_t *wrong_all);

/* prim.c: put bandwidth and put+signal ping-pong on host memory. */
int wp_prim_rank(const struct run *r, uint64_t *wrong_all);
/* --op entry (entry.c): the cost of a public call's handle check and claim. */
int wp_entry_rank(const struct run *r);

/* gpu.c: device memory, CUDA graphs, and libweft-perf-gpu.so. */
extern struct cudart_dl wp_cu;
void *wp_dev_alloc(const struct opts *o, size_t len);
void wp_dev_free(const struct opts *o, void *p);
int wp_dev_put(const struct opts *o, void *dst, const void *src, size_t n);
int wp_dev_get(const struct opts *o, void *dst, const void *src, size_t n);
int wp_coll_sync(const struct run *r);
int wp_coll_time_graph(const struct run *r, enum lib lib, const struct coll_shape *s, const struct coll_bufs *b,
		       double *us);
int wp_cuda_rank_setup(const struct opts *o, int local_rank, void **stream);
void wp_cuda_rank_teardown(void *stream);
int wp_gpu_lib_load(const struct opts *o);
int wp_gpu_prim_rank(const struct run *r, uint64_t *wrong_all);

/* nccl.c: --peer nccl, the same calls through NCCL in the same run. */
int wp_nccl_setup(struct run *r);
void wp_nccl_teardown(struct run *r);
int wp_nccl_call(const struct run *r, const struct coll_shape *s, const void *sbuf, void *rbuf);

/* output.c: headers, tables and footers, printed by rank 0. */
void wp_print_header_common(const struct run *r, const char *what);
void wp_print_prim_header(const struct run *r, const char *transport, const char *desc);
double wp_print_prim_row(const struct opts *o, uint64_t size, double us, uint64_t wrong);
void wp_print_coll_header(const struct run *r);
void wp_print_coll_row(const struct run *r, const struct coll_shape *s, const struct rank_result *all,
		       double *bw_sum, int *bw_n, uint64_t *wrong_total);
void wp_print_footer(const struct run *r, double bw_sum, int bw_n, uint64_t wrong_total, const char *bw_name);

#endif
