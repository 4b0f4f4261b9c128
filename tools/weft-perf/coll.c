/* SPDX-License-Identifier: Apache-2.0 */
/* Collectives: each size laid out, timed out of place and in place through
 * weft (and NCCL with --peer nccl), checked, and reduced over the ranks. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "wp.h"

/* Sums per-rank counts and takes the max of per-rank times over the comm. */
static int gather_results(const struct run *r, struct rank_result *mine, struct rank_result *total)
{
	struct rank_result *all = calloc((size_t)r->nranks, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = weft_comm_allgather(r->comm, mine, all, sizeof(*mine));
	if (rc != 0) {
		free(all);
		return wp_fail(r, rc, "weft_comm_allgather of the results");
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

/* The counts of one size (wp.h's struct coll_shape says how they are counted). */
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

/* The name each library goes by in messages. */
const char *const wp_lib_names[] = {"weft", "nccl"};

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

/* One call of the collective being timed, through weft or NCCL. */
int wp_lib_call(const struct run *r, enum lib lib, const struct coll_shape *s, const void *sbuf, void *rbuf)
{
	return lib == LIB_NCCL ? wp_nccl_call(r, s, sbuf, rbuf) : coll_call(r, s, sbuf, rbuf);
}

static void coll_bufs_free(const struct opts *o, struct coll_bufs *b)
{
	for (int k = 0; k < 2; k++) {
		if (b->host[k] != b->alloc[k])
			free(b->host[k]);
		wp_dev_free(o, b->alloc[k]);
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
		b->alloc[k] = wp_dev_alloc(o, b->len[k]);
		b->host[k] = o->mem_cuda ? wp_alloc_buf(b->len[k]) : b->alloc[k];
		if (!b->alloc[k] || !b->host[k]) {
			coll_bufs_free(o, b);
			return wp_fail(r, -ENOMEM, "allocating %zu bytes of %s memory", b->len[k],
				       o->mem_cuda ? "cuda" : "host");
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
		if (b->alloc[k] && wp_dev_put(r->o, b->alloc[k], b->host[k], b->len[k]) != 0)
			return wp_fail(r, -EIO, "copying %zu bytes to the device", b->len[k]);
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
			wp_pattern_reduce(p, w, i, n, i);
		break;
	case C_REDUCE_SCATTER:
		for (size_t i = 0; i < c; i++)
			wp_pattern_reduce(p, w, i, n, (uint64_t)me * c + i);
		break;
	case C_ALLGATHER:
		for (int q = 0; q < n; q++)
			wp_pattern_fill(p, w + (size_t)q * c * ts, q, 0, c);
		break;
	case C_BROADCAST: wp_pattern_fill(p, w, r->o->root, 0, c); break;
	case C_ALLTOALL:
		for (int q = 0; q < n; q++)
			wp_pattern_fill(p, w + (size_t)q * c * ts, q, (uint64_t)me * c, c);
		break;
	case C_SENDRECV: wp_pattern_fill(p, w, (me + n - 1) % n, 0, c); break;
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
			wp_poison(b->host[0], len);
		if (!inplace || r->o->coll != C_BROADCAST || r->rank == r->o->root)
			wp_pattern_fill(p, coll_host(b, b->send), in_rank, 0, s->send_n);
		prep_keep(p, s, inplace, in, len);
	}
	if (!inplace)
		wp_poison(coll_host(b, b->recv), s->recv_n * ts);
	return coll_bufs_upload(r, b);
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
		return wp_fail(r, rc, "the allreduce that starts the clock");
	if (all != (uint32_t)r->nranks)
		return wp_fail(r, -EPROTO, "the allreduce that starts the clock gave %u, not %d", all, r->nranks);
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
	if (o->mem_cuda && !o->fresh && (wp_cu.event_create(&ev[0]) != 0 || wp_cu.event_create(&ev[1]) != 0)) {
		rc = wp_fail(r, -EIO, "cudaEventCreate");
		goto out;
	}
	int timed_iters = o->graph > 0 ? 0 : o->iters;
	for (int it = -o->warmup; it < timed_iters; it++) {
		if (it == 0) {
			if ((rc = wp_coll_sync(r)) != 0)
				goto out;
			if ((rc = weft_comm_barrier(r->comm)) != 0) {
				wp_fail(r, rc, "weft_comm_barrier");
				goto out;
			}
			if (!o->mem_cuda && (rc = start_line(r)) != 0)
				goto out;
			t0 = wp_now_us();
			if (ev[0])
				wp_cu.event_record(ev[0], r->stream);
		}
		if (o->fresh) {
			/* New buffers before the old are freed, so their addresses differ. */
			if ((rc = coll_bufs_make(r, s, inplace, &fresh)) != 0)
				goto out;
			coll_bufs_free(o, &b);
			b = fresh;
		}
		rc = wp_lib_call(r, lib, s, b.send, b.recv);
		if (rc != 0) {
			wp_fail(r, rc, "%s %s %s of %zu bytes (%s)", wp_lib_names[lib], wp_colls[o->coll].name, mode,
				s->bytes, o->type->name);
			goto out;
		}
	}
	if (o->graph > 0) {
		if ((rc = wp_coll_sync(r)) != 0 || (rc = wp_coll_time_graph(r, lib, s, &b, us)) != 0)
			goto out;
	} else if (ev[0]) {
		float ms = 0;
		wp_cu.event_record(ev[1], r->stream);
		if (wp_cu.event_sync(ev[1]) != 0 || wp_cu.event_elapsed(&ms, ev[0], ev[1]) != 0) {
			rc = wp_fail(r, -EIO, "timing with CUDA events");
			goto out;
		}
		*us = o->iters ? ms * 1e3 / o->iters : 0;
	} else {
		if ((rc = wp_coll_sync(r)) != 0)
			goto out;
		*us = o->iters ? (wp_now_us() - t0) / o->iters : 0;
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
		rc = wp_lib_call(r, lib, s, b.send, b.recv);
		if (rc != 0) {
			wp_fail(r, rc, "checked %s %s %s of %zu bytes (%s)", wp_lib_names[lib], wp_colls[o->coll].name,
				mode, s->bytes, o->type->name);
			goto out;
		}
		if ((rc = wp_coll_sync(r)) != 0)
			goto out;
		if (coll_has_output(r)) {
			unsigned char *h = coll_host(&b, b.recv);
			if (wp_dev_get(o, h, b.recv, s->recv_n * o->type->size) != 0) {
				rc = wp_fail(r, -EIO, "copying the output from the device");
				goto out;
			}
			*wrong = wp_count_wrong(p->t, p->op, p->reduces, h, want, s->recv_n);
		}
	}
out:
	for (int k = 0; k < 2; k++)
		if (ev[k])
			wp_cu.event_destroy(ev[k]);
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
		return wp_fail(r, -ENOMEM, "allocating %d timings", n);
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
	int rc = 0;
	void *want = NULL;

	if (r->rank == 0)
		wp_print_coll_header(r);
	for (uint64_t size = o->min_bytes; size <= o->max_bytes; size = wp_next_size(o, size)) {
		struct coll_shape s;
		struct pattern p;
		struct rank_result mine, all;
		memset(&mine, 0, sizeof(mine));
		coll_shape(o, r->nranks, size, &s);
		wp_pattern_init(&p, o, r->nranks, size);
		if (o->check) {
			want = wp_alloc_buf(s.recv_n * o->type->size);
			if (!want) {
				rc = wp_fail(r, -ENOMEM, "allocating %zu bytes", s.recv_n * o->type->size);
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
		if (r->rank == 0)
			wp_print_coll_row(r, &s, &all, bw_sum, bw_n, wrong_total);
		if (size == o->max_bytes || wp_next_size(o, size) <= size)
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
	/* algo-host carries its collectives over the transport its own
	 * parameter names, when set, not over the core's default choice. */
	char pinned[64] = "";
	if (weft_info_param_string("algo-host", "transport", pinned, sizeof(pinned)) != 0)
		pinned[0] = '\0';
	if (r->nranks >= 2 && r->rank < 2) {
		weft_conn_t *conn = NULL;
		rc = weft_connect(r->comm, 1 - r->rank, pinned[0] ? pinned : NULL, &conn);
		if (rc == 0) {
			snprintf(mine, sizeof(mine), "%s", weft_conn_transport(conn));
			if (weft_conn_describe(conn, desc, sizeof(desc)) != 0)
				snprintf(desc, sizeof(desc), "%s", weft_conn_transport(conn));
			desc[sizeof(desc) - 1] = '\0';
			if (r->rank == 0)
				printf("# transport: %s (rank 0 -> rank 1: %s)\n", mine, desc);
			weft_conn_close(conn);
		} else if (rc == -WEFT_ERR_PEER || rc == -WEFT_ERR_ABORTED) {
			return wp_fail(r, rc, "weft_connect to rank %d", 1 - r->rank);
		} else if (r->rank == 0) {
			printf("# transport: none connects rank 0 and rank 1 (%s)\n", weft_strerror(rc));
		}
	}
	char *all = calloc((size_t)r->nranks, sizeof(mine));
	if (!all)
		return wp_fail(r, -ENOMEM, "allocating");
	rc = weft_comm_allgather(r->comm, mine, all, sizeof(mine));
	if (rc == 0) {
		all[sizeof(mine) - 1] = '\0';
		snprintf(name, len, "%s", all);
	} else {
		wp_fail(r, rc, "weft_comm_allgather");
	}
	free(all);
	return rc;
}


/* What one rank does for --collective: says what carries it, refuses a
 * --transport the core would not pick, and runs the sweep (with NCCL beside
 * it for --peer nccl). wrong_all gets the wrong elements of all ranks. */
int wp_coll_rank(struct run *r, uint64_t *wrong_all)
{
	const struct opts *o = r->o;
	int rc = 0;

	if (r->rank == 0)
		wp_print_header_common(r, wp_colls[o->coll].name);
	char tname[64] = "";
	if (o->mem_cuda) {
		/* The host-memory choice says nothing here: a pack for device
		 * memory connects the ranks its own way (algo-gpu: nvlink). */
		if (r->rank == 0)
			printf("# transport: the algorithm pack's own for device memory "
			       "(weft-info --select --mem cuda shows the choice per size)\n");
		snprintf(tname, sizeof(tname), "(the pack's)");
	} else if ((rc = describe_default_transport(r, tname, sizeof(tname))) != 0) {
		return rc;
	}
	/* The core picks the transport of a collective by itself; the public API
	 * has no way to pin it, so --transport is honoured only when it names
	 * what the core picks anyway (see the help text). */
	for (int i = 0; i < o->ntransports; i++) {
		if (r->nranks >= 2 && strcmp(o->transports[i], tname) != 0) {
			if (r->rank == 0)
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
	if (o->peer_nccl && (rc = wp_nccl_setup(r)) != 0)
		return rc;
	rc = run_coll(r, &bw_sum, &bw_n, wrong_all);
	wp_nccl_teardown(r);
	if (rc != 0)
		return rc;
	wp_print_footer(r, bw_sum, bw_n, *wrong_all, "bus bandwidth");
	return 0;
}
