/* SPDX-License-Identifier: Apache-2.0 */
/* The collective and point-to-point calls of weft.h: their argument checks,
 * and groups (calls queued per thread and issued at the outermost end). Each
 * call reaches the algorithm choice of coll.c. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "base.h"
#include "coll.h"
#include "dtype.h"
#include "log.h"
#include "handles.h"
#include "window.h"

/* ------------------------------------------------------------- groups
 * Per thread: the nesting depth and the calls queued since the outermost start. */

struct grp_op {
	weft_comm_t *comm;
	struct weft_coll_args args;
	int p2p;
	struct weft_p2p_op op;
	void *stream; /* of a point-to-point call */
};

static _Thread_local struct {
	int depth;
	struct grp_op *ops;
	size_t n, cap;
} grp;

static int grp_push(weft_comm_t *comm, const struct weft_coll_args *args, const struct weft_p2p_op *op, void *stream)
{
	if (grp.n == grp.cap) {
		size_t c = grp.cap ? grp.cap * 2 : 16;
		struct grp_op *n = realloc(grp.ops, c * sizeof(*n));
		if (!n) {
			WEFT_ERROR("group: out of memory queuing a call");
			return -ENOMEM;
		}
		grp.ops = n;
		grp.cap = c;
	}
	struct grp_op *g = &grp.ops[grp.n++];
	memset(g, 0, sizeof(*g));
	g->comm = comm;
	if (args)
		g->args = *args;
	if (op) {
		g->p2p = 1;
		g->op = *op;
		g->stream = stream;
	}
	return 0;
}

/* One fused batch on the stream of its first call (NULL: completes on the
 * host), so point-to-point calls can be captured in a CUDA graph as
 * collectives can. */
static int run_p2p_batch(weft_comm_t *comm, struct weft_p2p_op *ops, size_t n, void *stream)
{
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += ops[i].bytes;
	struct weft_coll_args a = {
		.size = sizeof(a),
		.coll = WEFT_COLL_SENDRECV,
		.sendbuf = ops,
		.recvbuf = NULL,
		.count = n,
		.dtype = WEFT_UINT8,
		.op = WEFT_SUM,
		.root = -1,
		.mem_type = weft__coll_mem_type(comm, ops[0].buf),
		.stream = stream,
		.bytes = total,
	};
	return weft__coll_run(comm, &a);
}

static int run_claimed(weft_comm_t *comm, const char *fn, struct weft_coll_args *args,
		       struct weft_p2p_op *ops, size_t n, void *stream);

WEFT_API int weft_group_start(void)
{
	if (grp.depth == INT_MAX)
		return -EINVAL;
	grp.depth++;
	return 0;
}

WEFT_API int weft_group_end(void)
{
	if (grp.depth <= 0) {
		WEFT_ERROR("weft_group_end without a matching weft_group_start");
		return -EINVAL;
	}
	if (--grp.depth > 0)
		return 0;
	struct grp_op *ops = grp.ops;
	size_t n = grp.n;
	grp.ops = NULL;
	grp.n = grp.cap = 0;

	/* Collectives first, in call order; then per comm (in order of its first
	 * point-to-point call) one fused batch of its sends and receives. Every rank
	 * applies the same rule, so ranks stay in step. */
	int first = 0;
	for (size_t i = 0; i < n; i++)
		if (!ops[i].p2p) {
			int rc = run_claimed(ops[i].comm, "weft_group_end", &ops[i].args, NULL, 0, NULL);
			if (rc && !first)
				first = rc;
		}
	struct weft_p2p_op *batch = n ? malloc(n * sizeof(*batch)) : NULL;
	if (n && !batch) {
		free(ops);
		WEFT_ERROR("group: out of memory fusing point-to-point calls");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ops[i].p2p || !ops[i].comm)
			continue;
		weft_comm_t *comm = ops[i].comm;
		void *stream = ops[i].stream;
		size_t nb = 0;
		for (size_t j = i; j < n; j++)
			if (ops[j].p2p && ops[j].comm == comm) {
				batch[nb++] = ops[j].op;
				ops[j].comm = NULL; /* taken */
			}
		int rc = run_claimed(comm, "weft_group_end", NULL, batch, nb, stream);
		if (rc && !first)
			first = rc;
	}
	free(batch);
	free(ops);
	return first;
}

/* ------------------------------------------------------ public calls */

static int check_comm(const weft_comm_t *comm, const char *fn)
{
	int rc = weft__comm_check(comm, fn);
	return rc ? rc : weft__bootstrap_status(comm->bs);
}

static int check_type(enum weft_datatype type, const char *fn)
{
	if (!weft__dtype_valid((int)type)) {
		WEFT_ERROR("%s: unknown datatype %d", fn, (int)type);
		return -EINVAL;
	}
	return 0;
}

static int check_op(enum weft_redop op, const char *fn)
{
	if (!weft__redop_valid((int)op)) {
		WEFT_ERROR("%s: unknown reduction operation %d", fn, (int)op);
		return -EINVAL;
	}
	if (op == WEFT_PREMUL_SUM) {
		WEFT_ERROR("%s: WEFT_PREMUL_SUM needs its scalar: call %s_premul", fn, fn);
		return -EINVAL;
	}
	return 0;
}

/* The scalar of a pre-multiplied sum, into the call's arguments: a host
 * scalar's bytes are copied now (the call may be queued in a group); a device
 * one stays a pointer, read when the call runs. */
static int set_scalar(struct weft_coll_args *a, const void *scalar, enum weft_mem_type smem, const char *fn)
{
	if (!scalar) {
		WEFT_ERROR("%s: scalar is NULL", fn);
		return -EINVAL;
	}
	if ((int)smem < 0 || smem >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("%s: unknown memory type %d for the scalar", fn, (int)smem);
		return -EINVAL;
	}
	if (smem != WEFT_MEM_HOST && smem != a->mem_type) {
		WEFT_ERROR("%s: the scalar is in %s memory but the buffers are in %s memory; a device scalar needs "
			   "buffers of that device",
			   fn, weft__mem_name((int)smem), weft__mem_name((int)a->mem_type));
		return -EINVAL;
	}
	a->op = WEFT_PREMUL_SUM;
	a->scalar_mem = smem;
	if (smem == WEFT_MEM_HOST)
		memcpy(a->scalar_host, scalar, weft_datatype_size(a->dtype));
	else
		a->scalar_dev = scalar;
	return 0;
}

static int check_buf(const void *buf, size_t count, const char *fn, const char *which)
{
	if (count > 0 && !buf) {
		WEFT_ERROR("%s: %s is NULL with count %zu", fn, which, count);
		return -EINVAL;
	}
	return 0;
}

static int check_rank(int r, int nranks, const char *fn, const char *which)
{
	if (r < 0 || r >= nranks) {
		WEFT_ERROR("%s: %s %d is outside the communicator's %d ranks", fn, which, r, nranks);
		return -EINVAL;
	}
	return 0;
}

/* No process maps more than this: 64-bit Linux user space ends at 2^47, or
 * 2^56 with five-level paging. A span past it can only be a bad count, which
 * a pack's memcpy would otherwise take to a crash. */
#define SPAN_MAX (1ull << 57)

/* bytes = count * size of type * mult, refusing overflow and spans no
 * process can have. */
static int bytes_of(size_t count, enum weft_datatype type, size_t mult, const char *fn, uint64_t *out)
{
	size_t es = weft_datatype_size(type);
	if (count && (mult > SIZE_MAX / es || count > SIZE_MAX / (es * mult) || count * es * mult > SPAN_MAX)) {
		WEFT_ERROR("%s: count %zu is too large: its bytes lie beyond any process's address space", fn, count);
		return -EINVAL;
	}
	*out = (uint64_t)count * es * mult;
	return 0;
}

/* A call runs with the communicator claimed for this thread (handles.h); a
 * grouped one is claimed when weft_group_end runs it. */
static int run_claimed(weft_comm_t *comm, const char *fn, struct weft_coll_args *args,
		       struct weft_p2p_op *ops, size_t n, void *stream)
{
	int rc = weft__comm_enter(comm, fn);
	if (rc != 0)
		return rc;
	if (args)
		weft__window_locate(comm, args);
	rc = args ? weft__coll_run(comm, args) : run_p2p_batch(comm, ops, n, stream);
	return weft__comm_leave(comm, rc);
}

static int submit(weft_comm_t *comm, struct weft_coll_args *args)
{
	if (grp.depth > 0)
		return grp_push(comm, args, NULL, NULL);
	return run_claimed(comm, weft__coll_name(args->coll), args, NULL, 0, NULL);
}

static void args_init(struct weft_coll_args *a, enum weft_collective coll, weft_comm_t *comm, const void *sendbuf,
		      void *recvbuf, size_t count, enum weft_datatype type, enum weft_redop op, int root, void *stream)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->coll = coll;
	a->sendbuf = sendbuf;
	a->recvbuf = recvbuf;
	a->count = count;
	a->dtype = type;
	a->op = op;
	a->root = root;
	a->mem_type = weft__coll_mem_type(comm, recvbuf ? recvbuf : sendbuf);
	a->stream = stream;
}

/* allreduce, reduce_scatter and reduce, plain (premul 0: scalar unused) or
 * pre-multiplied by scalar (op is then WEFT_SUM). count is per rank for
 * reduce_scatter; root matters to reduce alone. */
static int reduction(const char *fn, enum weft_collective kind, const void *sendbuf, void *recvbuf, size_t count,
		     enum weft_datatype type, enum weft_redop op, int root, int premul, const void *scalar,
		     enum weft_mem_type scalar_mem, weft_comm_t *comm, void *stream)
{
	struct weft_coll_args a;
	int rc, rooted = kind == WEFT_COLL_REDUCE;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)) || (rc = check_op(op, fn)) ||
	    (rooted && (rc = check_rank(root, comm->nranks, fn, "root"))) ||
	    (rc = check_buf(sendbuf, count, fn, "sendbuf")) ||
	    ((!rooted || root == comm->rank) && (rc = check_buf(recvbuf, count, fn, "recvbuf"))))
		return rc;
	args_init(&a, kind, comm, sendbuf, recvbuf, count, type, op, root, stream);
	size_t parts = kind == WEFT_COLL_REDUCE_SCATTER ? (size_t)comm->nranks : 1;
	if ((premul && (rc = set_scalar(&a, scalar, scalar_mem, fn))) || (rc = bytes_of(count, type, parts, fn, &a.bytes)))
		return rc;
	return submit(comm, &a);
}

WEFT_API int weft_allreduce(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			    enum weft_redop op, weft_comm_t *comm, void *stream)
{
	return reduction("weft_allreduce", WEFT_COLL_ALLREDUCE, sendbuf, recvbuf, count, type, op, 0, 0, NULL,
			 WEFT_MEM_HOST, comm, stream);
}

WEFT_API int weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, enum weft_datatype type,
			    weft_comm_t *comm, void *stream)
{
	static const char fn[] = "weft_allgather";
	struct weft_coll_args a;
	int rc;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)) ||
	    (rc = check_buf(sendbuf, sendcount, fn, "sendbuf")) || (rc = check_buf(recvbuf, sendcount, fn, "recvbuf")))
		return rc;
	args_init(&a, WEFT_COLL_ALLGATHER, comm, sendbuf, recvbuf, sendcount, type, WEFT_SUM, 0, stream);
	if ((rc = bytes_of(sendcount, type, (size_t)comm->nranks, fn, &a.bytes)))
		return rc;
	return submit(comm, &a);
}

WEFT_API int weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, enum weft_datatype type,
				 enum weft_redop op, weft_comm_t *comm, void *stream)
{
	return reduction("weft_reduce_scatter", WEFT_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, type, op, 0, 0,
			 NULL, WEFT_MEM_HOST, comm, stream);
}

WEFT_API int weft_broadcast(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type, int root,
			    weft_comm_t *comm, void *stream)
{
	static const char fn[] = "weft_broadcast";
	struct weft_coll_args a;
	int rc;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)) ||
	    (rc = check_rank(root, comm->nranks, fn, "root")) ||
	    (root == comm->rank && (rc = check_buf(sendbuf, count, fn, "sendbuf"))) ||
	    (rc = check_buf(recvbuf, count, fn, "recvbuf")))
		return rc;
	args_init(&a, WEFT_COLL_BROADCAST, comm, sendbuf, recvbuf, count, type, WEFT_SUM, root, stream);
	if ((rc = bytes_of(count, type, 1, fn, &a.bytes)))
		return rc;
	return submit(comm, &a);
}

WEFT_API int weft_reduce(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			 enum weft_redop op, int root, weft_comm_t *comm, void *stream)
{
	return reduction("weft_reduce", WEFT_COLL_REDUCE, sendbuf, recvbuf, count, type, op, root, 0, NULL,
			 WEFT_MEM_HOST, comm, stream);
}

WEFT_API int weft_allreduce_premul(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
				   const void *scalar, enum weft_mem_type scalar_mem, weft_comm_t *comm, void *stream)
{
	return reduction("weft_allreduce_premul", WEFT_COLL_ALLREDUCE, sendbuf, recvbuf, count, type, WEFT_SUM, 0, 1,
			 scalar, scalar_mem, comm, stream);
}

WEFT_API int weft_reduce_scatter_premul(const void *sendbuf, void *recvbuf, size_t recvcount,
					enum weft_datatype type, const void *scalar, enum weft_mem_type scalar_mem,
					weft_comm_t *comm, void *stream)
{
	return reduction("weft_reduce_scatter_premul", WEFT_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, type,
			 WEFT_SUM, 0, 1, scalar, scalar_mem, comm, stream);
}

WEFT_API int weft_reduce_premul(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
				const void *scalar, enum weft_mem_type scalar_mem, int root, weft_comm_t *comm,
				void *stream)
{
	return reduction("weft_reduce_premul", WEFT_COLL_REDUCE, sendbuf, recvbuf, count, type, WEFT_SUM, root, 1,
			 scalar, scalar_mem, comm, stream);
}

WEFT_API int weft_alltoall(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			   weft_comm_t *comm, void *stream)
{
	static const char fn[] = "weft_alltoall";
	struct weft_coll_args a;
	int rc;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)) ||
	    (rc = check_buf(sendbuf, count, fn, "sendbuf")) || (rc = check_buf(recvbuf, count, fn, "recvbuf")))
		return rc;
	args_init(&a, WEFT_COLL_ALLTOALL, comm, sendbuf, recvbuf, count, type, WEFT_SUM, 0, stream);
	if ((rc = bytes_of(count, type, (size_t)comm->nranks, fn, &a.bytes)))
		return rc;
	return submit(comm, &a);
}

static int p2p(const char *fn, int is_send, void *buf, size_t count, enum weft_datatype type, int peer,
	       weft_comm_t *comm, void *stream)
{
	int rc;
	uint64_t bytes;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)) ||
	    (rc = check_rank(peer, comm->nranks, fn, "peer")) || (rc = check_buf(buf, count, fn, "buf")) ||
	    (rc = bytes_of(count, type, 1, fn, &bytes)))
		return rc;
	if (bytes == 0)
		return 0; /* both sides of a pair pass the same count, so both skip */
	struct weft_p2p_op op = {.peer = peer, .is_send = is_send, .buf = buf, .bytes = (size_t)bytes};
	if (grp.depth > 0)
		return grp_push(comm, NULL, &op, stream);
	if (peer == comm->rank) {
		WEFT_ERROR("%s: a send or recv to the calling rank itself needs a group (weft_group_start/end)", fn);
		return -EINVAL;
	}
	return run_claimed(comm, fn, NULL, &op, 1, stream);
}

WEFT_API int weft_send(const void *buf, size_t count, enum weft_datatype type, int peer, weft_comm_t *comm,
		       void *stream)
{
	return p2p("weft_send", 1, (void *)buf, count, type, peer, comm, stream);
}

WEFT_API int weft_recv(void *buf, size_t count, enum weft_datatype type, int peer, weft_comm_t *comm, void *stream)
{
	return p2p("weft_recv", 0, buf, count, type, peer, comm, stream);
}


/* ------------------------------------------------------ v-collectives */

/* The element offset off + count within SPAN_MAX bytes. */
static int span_ok(size_t off, size_t count, size_t es)
{
	return off <= SPAN_MAX / es && count <= SPAN_MAX / es - off;
}

/* One send and one recv per rank as a group; on a bad entry nothing runs. */
static int run_v(const char *fn, const void *sendbuf, const size_t *scounts, const size_t *sdispls, size_t scount,
		 void *recvbuf, const size_t *rcounts, const size_t *rdispls, enum weft_datatype type,
		 weft_comm_t *comm, void *stream)
{
	int rc;
	if ((rc = check_comm(comm, fn)) || (rc = check_type(type, fn)))
		return rc;
	if (!rcounts || !rdispls || (!scounts && sdispls)) {
		WEFT_ERROR("%s: NULL %s", fn, !rcounts ? "recvcounts" : !rdispls ? "displacements" : "sendcounts");
		return -EINVAL;
	}
	int n = comm->nranks, me = comm->rank;
	size_t es = weft_datatype_size(type);
	for (int p = 0; p < n; p++) {
		size_t sc = scounts ? scounts[p] : scount, so = sdispls ? sdispls[p] : 0;
		if (!span_ok(so, sc, es) || !span_ok(rdispls[p], rcounts[p], es)) {
			WEFT_ERROR("%s: rank %d's count or displacement is too large", fn, p);
			return -EINVAL;
		}
		if ((rc = check_buf(sendbuf, sc, fn, "sendbuf")) || (rc = check_buf(recvbuf, rcounts[p], fn, "recvbuf")))
			return rc;
	}
	size_t own = scounts ? scounts[me] : scount;
	if (own != rcounts[me]) {
		WEFT_ERROR("%s: this rank sends itself %zu elements but expects %zu from itself", fn, own, rcounts[me]);
		return -EINVAL;
	}
	weft_group_start();
	int first = 0;
	for (int i = 0; i < n; i++) {
		/* From the next rank up, as the collectives start, so not all begin at rank 0. */
		int p = (me + i) % n;
		size_t sc = scounts ? scounts[p] : scount, so = sdispls ? sdispls[p] : 0;
		rc = weft_send((const char *)sendbuf + so * es, sc, type, p, comm, stream);
		first = first ? first : rc;
		rc = weft_recv((char *)recvbuf + rdispls[p] * es, rcounts[p], type, p, comm, stream);
		first = first ? first : rc;
	}
	rc = weft_group_end();
	return first ? first : rc;
}

WEFT_API int weft_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
			    const size_t *recvcounts, const size_t *rdispls, enum weft_datatype type,
			    weft_comm_t *comm, void *stream)
{
	if (!sendcounts || !sdispls) {
		WEFT_ERROR("weft_alltoallv: NULL %s", !sendcounts ? "sendcounts" : "sdispls");
		return -EINVAL;
	}
	return run_v("weft_alltoallv", sendbuf, sendcounts, sdispls, 0, recvbuf, recvcounts, rdispls, type, comm,
		     stream);
}

WEFT_API int weft_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
			     const size_t *displs, enum weft_datatype type, weft_comm_t *comm, void *stream)
{
	return run_v("weft_allgatherv", sendbuf, NULL, NULL, sendcount, recvbuf, recvcounts, displs, type, comm,
		     stream);
}
