/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: NCCL's collectives, point-to-point calls and groups, mapped to
 * weft's (types, operations, stream passed through). A group is queued here
 * and issued at its end, one thread per communicator, so that one thread can
 * drive several ranks of this process (ncclCommInitAll) as NCCL allows. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wn.h"

static const char *const kind_names[] = {
	[K_ALLREDUCE] = "ncclAllReduce", [K_BROADCAST] = "ncclBroadcast", [K_REDUCE] = "ncclReduce",
	[K_ALLGATHER] = "ncclAllGather", [K_REDUCE_SCATTER] = "ncclReduceScatter", [K_ALLTOALL] = "ncclAlltoAll",
	[K_GATHER] = "ncclGather", [K_SCATTER] = "ncclScatter", [K_SEND] = "ncclSend", [K_RECV] = "ncclRecv",
	[K_WIN_REGISTER] = "ncclCommWindowRegister", [K_PUT_SIGNAL] = "ncclPutSignal", [K_SIGNAL] = "ncclSignal",
	[K_WAIT_SIGNAL] = "ncclWaitSignal",
};

static int is_rma(enum wn_kind k)
{
	return k == K_WIN_REGISTER || k == K_PUT_SIGNAL || k == K_SIGNAL || k == K_WAIT_SIGNAL;
}

struct wn_init {
	struct ncclComm *comm;
	struct weft_unique_id id;
};

static _Thread_local struct {
	int depth;
	struct wn_op *ops;
	size_t nops, capops;
	struct wn_init *inits;
	size_t ninits, capinits;
} grp;

int wn_group_depth(void)
{
	return grp.depth;
}

ncclResult_t wn_group_add_init(struct ncclComm *comm, const struct weft_unique_id *id)
{
	if (grp.ninits == grp.capinits) {
		size_t c = grp.capinits ? grp.capinits * 2 : 8;
		struct wn_init *n = realloc(grp.inits, c * sizeof(*n));
		if (!n) {
			WN_ERROR("ncclGroupStart: out of memory queuing an init");
			return ncclSystemError;
		}
		grp.inits = n;
		grp.capinits = c;
	}
	grp.inits[grp.ninits].comm = comm;
	grp.inits[grp.ninits].id = *id;
	grp.ninits++;
	return ncclSuccess;
}

/* Frees what queued calls own (ncclWaitSignal's copied descriptors). */
static void free_ops(struct wn_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(ops[i].descs);
	free(ops);
}

static ncclResult_t group_push(const struct wn_op *op)
{
	if (grp.nops == grp.capops) {
		size_t c = grp.capops ? grp.capops * 2 : 16;
		struct wn_op *n = realloc(grp.ops, c * sizeof(*n));
		if (!n) {
			WN_ERROR("%s: out of memory queuing the call in a group", kind_names[op->kind]);
			return ncclSystemError;
		}
		grp.ops = n;
		grp.capops = c;
	}
	struct wn_op *q = &grp.ops[grp.nops];
	*q = *op;
	if (op->kind == K_WAIT_SIGNAL) {
		/* The caller's array need not outlive the call. */
		q->descs = malloc((size_t)op->ndesc * sizeof(*q->descs));
		if (!q->descs) {
			WN_ERROR("%s: out of memory queuing the call in a group", kind_names[op->kind]);
			return ncclSystemError;
		}
		memcpy(q->descs, op->descs, (size_t)op->ndesc * sizeof(*q->descs));
	} else {
		q->descs = NULL;
	}
	grp.nops++;
	return ncclSuccess;
}

/* Gather and scatter as fused sends and receives in one weft group. */
static int gather_scatter(const struct wn_op *o)
{
	weft_comm_t *wc = o->comm->wc;
	int n = o->comm->nranks, me = o->comm->rank;
	size_t blk = o->count * weft_datatype_size(o->type);
	int rc = weft_group_start();
	if (rc != 0)
		return rc;
	int first = 0;
	if (o->kind == K_GATHER) {
		if (me == o->root)
			for (int p = 0; p < n && !first; p++)
				first = weft_recv((char *)o->recvbuf + (size_t)p * blk, o->count, o->type, p, wc, o->stream);
		if (!first)
			first = weft_send(o->sendbuf, o->count, o->type, o->root, wc, o->stream);
	} else {
		if (me == o->root)
			for (int p = 0; p < n && !first; p++)
				first = weft_send((const char *)o->sendbuf + (size_t)p * blk, o->count, o->type, p, wc,
						  o->stream);
		if (!first)
			first = weft_recv(o->recvbuf, o->count, o->type, o->root, wc, o->stream);
	}
	rc = weft_group_end();
	return first ? first : rc;
}

/* A pre-multiplied sum: weft reads a device scalar when the call runs on
 * device buffers; for host buffers the scalar is copied to the host on the
 * call's stream first. */
static int issue_premul(const struct wn_op *o)
{
	weft_comm_t *wc = o->comm->wc;
	const void *scalar = o->pm.host;
	enum weft_mem_type smem = WEFT_MEM_HOST;
	unsigned char host[8];
	if (o->pm.residence == ncclScalarDevice) {
		if (wn_mem_type(o->recvbuf ? o->recvbuf : o->sendbuf) == WEFT_MEM_CUDA) {
			scalar = o->pm.dev;
			smem = WEFT_MEM_CUDA;
		} else {
			int rc = wn_copy_to_host(host, o->pm.dev, weft_datatype_size(o->type), o->stream);
			if (rc)
				return rc;
			scalar = host;
		}
	}
	switch (o->kind) {
	case K_ALLREDUCE:
		return weft_allreduce_premul(o->sendbuf, o->recvbuf, o->count, o->type, scalar, smem, wc, o->stream);
	case K_REDUCE:
		return weft_reduce_premul(o->sendbuf, o->recvbuf, o->count, o->type, scalar, smem, o->root, wc,
					  o->stream);
	case K_REDUCE_SCATTER:
		return weft_reduce_scatter_premul(o->sendbuf, o->recvbuf, o->count, o->type, scalar, smem, wc,
						  o->stream);
	default:
		return -EINVAL;
	}
}

static int issue(const struct wn_op *o)
{
	weft_comm_t *wc = o->comm->wc;
	if (is_rma(o->kind))
		return wn_rma_issue(o);
	if (o->premul)
		return issue_premul(o);
	switch (o->kind) {
	case K_ALLREDUCE: return weft_allreduce(o->sendbuf, o->recvbuf, o->count, o->type, o->op, wc, o->stream);
	case K_BROADCAST: return weft_broadcast(o->sendbuf, o->recvbuf, o->count, o->type, o->root, wc, o->stream);
	case K_REDUCE: return weft_reduce(o->sendbuf, o->recvbuf, o->count, o->type, o->op, o->root, wc, o->stream);
	case K_ALLGATHER: return weft_allgather(o->sendbuf, o->recvbuf, o->count, o->type, wc, o->stream);
	case K_REDUCE_SCATTER:
		return weft_reduce_scatter(o->sendbuf, o->recvbuf, o->count, o->type, o->op, wc, o->stream);
	case K_ALLTOALL: return weft_alltoall(o->sendbuf, o->recvbuf, o->count, o->type, wc, o->stream);
	case K_GATHER:
	case K_SCATTER: return gather_scatter(o);
	case K_SEND: return weft_send(o->sendbuf, o->count, o->type, o->root, wc, o->stream);
	case K_RECV: return weft_recv(o->recvbuf, o->count, o->type, o->root, wc, o->stream);
	default: break;
	}
	return -EINVAL;
}

/* Forwards a collective weft refused (-ENOTSUP) to the real NCCL's shadow
 * communicator, when WEFT_NCCL_FALLBACK allows it. Returns -ENOTSUP when it
 * does not. */
typedef ncclResult_t (*red_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*redroot_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
				   cudaStream_t);
typedef ncclResult_t (*root_fn)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*plain_fn)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);

static int forward(const struct wn_op *o, ncclResult_t *res)
{
	if (!getenv("WEFT_NCCL_FALLBACK") || o->kind == K_SEND || o->kind == K_RECV || is_rma(o->kind))
		return -ENOTSUP;
	void *f = wn_fallback_sym(kind_names[o->kind], "a call weft does not support");
	if (!f)
		return -ENOTSUP;
	void *sh = wn_fallback_shadow(o->comm);
	if (!sh)
		return -ENOTSUP;
	cudaStream_t s = (cudaStream_t)o->stream;
	switch (o->kind) {
	case K_ALLREDUCE:
	case K_REDUCE_SCATTER:
		*res = ((red_fn)f)(o->sendbuf, o->recvbuf, o->count, o->ntype, o->nop, sh, s);
		break;
	case K_REDUCE:
		*res = ((redroot_fn)f)(o->sendbuf, o->recvbuf, o->count, o->ntype, o->nop, o->root, sh, s);
		break;
	case K_BROADCAST:
	case K_GATHER:
	case K_SCATTER:
		*res = ((root_fn)f)(o->sendbuf, o->recvbuf, o->count, o->ntype, o->root, sh, s);
		break;
	default:
		*res = ((plain_fn)f)(o->sendbuf, o->recvbuf, o->count, o->ntype, sh, s);
		break;
	}
	WN_INFO("%s: weft does not support it; forwarded to the real NCCL (%s)", kind_names[o->kind],
		ncclGetErrorString(*res));
	return 0;
}

ncclResult_t wn_submit(struct wn_op *o, int reduces)
{
	const char *fn = kind_names[o->kind];
	/* A comm still initializing (non-blocking) is waited for here: the call
	 * then runs, it never fails for that. */
	ncclResult_t r = wn_check_comm(o->comm, fn);
	if (r != ncclSuccess)
		return r;
	if (o->comm->revoked) {
		WN_ERROR("%s: comm %p was revoked (ncclCommRevoke); only destroy, abort and shrink serve it now", fn,
			 (void *)o->comm);
		return ncclInvalidUsage;
	}
	if (is_rma(o->kind)) {
		if ((r = wn_rma_check(o)) != ncclSuccess)
			return r;
	} else if (wn_map_type(o->ntype, &o->type) != 0) {
		WN_ERROR("%s: datatype %d is not one of NCCL 2.30's", fn, (int)o->ntype);
		return ncclInvalidArgument;
	}
	if (reduces && o->nop == WN_OP_REFUSED) {
		WN_ERROR("%s: reduction operation %d is what a refused ncclRedOpCreatePreMulSum leaves; it names no "
			 "operation", fn, (int)o->nop);
		return ncclInvalidArgument;
	}
	if (reduces && wn_premul_get(o->comm, o->nop, &o->pm)) {
		/* NCCL's rule: an operation serves the datatype it was made for. */
		if (o->pm.type != o->ntype) {
			WN_ERROR("%s: operation %d was made for datatype %d by ncclRedOpCreatePreMulSum; the call's is %d",
				 fn, (int)o->nop, (int)o->pm.type, (int)o->ntype);
			return ncclInvalidArgument;
		}
		o->premul = 1;
		o->op = WEFT_PREMUL_SUM;
	} else if (reduces && wn_map_op(o->nop, &o->op) != 0) {
		/* Why the fallback could not take it either, for the message. */
		char fb[256] = "";
		if (grp.depth == 0 && o->comm->wc && getenv("WEFT_NCCL_FALLBACK")) {
			ncclResult_t fr;
			unsigned long before = wn_error_count();
			if (forward(o, &fr) == 0)
				return fr;
			if (wn_error_count() != before)
				snprintf(fb, sizeof(fb), "; the fallback could not take it: %s", wn_last_error());
		}
		if ((int)o->nop >= ncclNumOps && (int)o->nop <= ncclMaxRedOp)
			WN_ERROR("%s: reduction operation %d was not made by ncclRedOpCreatePreMulSum on this comm, or was "
				 "destroyed%s", fn, (int)o->nop, fb);
		else
			WN_ERROR("%s: reduction operation %d is not one of NCCL's%s", fn, (int)o->nop, fb);
		return ncclInvalidArgument;
	}
	if ((o->kind == K_GATHER || o->kind == K_SCATTER) && (o->root < 0 || o->root >= o->comm->nranks)) {
		WN_ERROR("%s: root %d is outside the communicator's %d ranks", fn, o->root, o->comm->nranks);
		return ncclInvalidArgument;
	}
	if (grp.depth > 0)
		return group_push(o);
	int prev = wn_device_enter(o->comm->device);
	unsigned long logged = wn_error_count();
	int rc = issue(o);
	wn_device_leave(prev);
	if (rc == -ENOTSUP) {
		ncclResult_t fr;
		if (forward(o, &fr) == 0)
			return fr;
	}
	/* Said once: where this library found the reason, it is the message. */
	if (rc != 0 && wn_error_count() == logged)
		WN_ERROR("%s on rank %d: %s", fn, o->comm->rank, weft_strerror(rc));
	return wn_result(rc);
}

/* ------------------------------------------------------------- groups */

WN_API ncclResult_t ncclGroupStart(void)
{
	if (grp.depth == INT_MAX) {
		WN_ERROR("ncclGroupStart: groups nested too deeply");
		return ncclInvalidUsage;
	}
	grp.depth++;
	return ncclSuccess;
}
WN_ALIAS(ncclGroupStart);

struct worker {
	pthread_t th;
	int started;
	struct wn_init *init;  /* an init to run (its weft comm lands in wc), or */
	weft_comm_t *wc;
	struct ncclComm *comm; /* the comm whose queued ops to issue */
	struct wn_op *ops;
	size_t nops;
	int rc;                /* weft code */
	ncclResult_t res;
	int whole_clique;      /* every rank of comm is issued by this group */
};

static void *run_init(void *arg)
{
	struct worker *w = arg;
	w->rc = wn_comm_make(w->init->comm, &w->init->id, "ncclCommInitRank (group)", &w->wc);
	w->res = wn_result(w->rc);
	return NULL;
}

/* One comm's share of a group, in one weft group, in call order. */
static void *run_ops(void *arg)
{
	struct worker *w = arg;
	/* This comm's GPU for its calls (a worker thread, or the caller's
	 * thread when the group spans one comm). */
	int prev = wn_device_enter(w->comm->device);
	int first = weft_group_start();
	for (size_t i = 0; i < w->nops && !first; i++) {
		struct wn_op *o = &w->ops[i];
		if (o->comm != w->comm)
			continue;
		first = issue(o);
		if (first)
			WN_ERROR("%s on rank %d (in a group): %s", kind_names[o->kind], o->comm->rank,
				 weft_strerror(first));
	}
	int rc = weft_group_end();
	if (rc)
		WN_ERROR("ncclGroupEnd on rank %d: %s", w->comm->rank, weft_strerror(rc));
	/* weft progresses a comm's transport only while some call waits on that
	 * comm, and a host collective may return on one rank before its last
	 * data has left. When every rank of the comm is in this group (a clique
	 * driven from one thread) nothing else would wait on it: a barrier keeps
	 * each rank progressing until all have finished. */
	if (!first && !rc && w->whole_clique) {
		rc = weft_comm_barrier(w->comm->wc);
		if (rc)
			WN_ERROR("ncclGroupEnd on rank %d: closing barrier: %s", w->comm->rank, weft_strerror(rc));
	}
	wn_device_leave(prev);
	w->rc = first ? first : rc;
	w->res = wn_result(w->rc);
	return NULL;
}

/* Runs fn on each worker: inline when there is one, else one thread each. */
static ncclResult_t run_workers(struct worker *ws, size_t n, void *(*fn)(void *))
{
	ncclResult_t r = ncclSuccess;
	if (n == 1) {
		fn(&ws[0]);
		return ws[0].res;
	}
	for (size_t i = 0; i < n; i++) {
		if (pthread_create(&ws[i].th, NULL, fn, &ws[i]) != 0) {
			/* Cannot start it in parallel: run it here, which still works
			 * when the others it waits for are already running. */
			WN_WARN("ncclGroupEnd: could not start a thread; running one rank's work on the caller's");
			fn(&ws[i]);
			continue;
		}
		ws[i].started = 1;
	}
	for (size_t i = 0; i < n; i++) {
		if (ws[i].started)
			pthread_join(ws[i].th, NULL);
		if (ws[i].res != ncclSuccess && r == ncclSuccess)
			r = ws[i].res;
	}
	return r;
}

/* Runs a group's queued inits, one thread per rank, makes a clique of them
 * and publishes each comm (those abandoned meanwhile are torn down). The
 * comms are held (wn_comm_hold) by the caller. */
static ncclResult_t run_inits(struct wn_init *inits, size_t ninits)
{
	ncclResult_t r = ncclSuccess;
	struct worker *ws = calloc(ninits, sizeof(*ws));
	if (!ws) {
		WN_ERROR("ncclGroupEnd: out of memory");
		for (size_t i = 0; i < ninits; i++)
			wn_comm_publish(inits[i].comm, NULL, -ENOMEM);
		return ncclSystemError;
	}
	for (size_t i = 0; i < ninits; i++)
		ws[i].init = &inits[i];
	r = run_workers(ws, ninits, run_init);
	if (r == ncclSuccess && ninits > 1) {
		struct ncclComm **cs = malloc(ninits * sizeof(*cs));
		for (size_t i = 0; cs && i < ninits; i++)
			cs[i] = inits[i].comm;
		if (!cs || wn_clique_make(cs, (int)ninits) != 0)
			WN_WARN("ncclGroupEnd: out of memory; destroy these %zu ranks from threads of their own", ninits);
		free(cs);
	}
	for (size_t i = 0; i < ninits; i++)
		wn_comm_publish(inits[i].comm, ws[i].rc == 0 ? ws[i].wc : NULL, ws[i].rc);
	free(ws);
	return r;
}

struct inits_job {
	struct wn_init *inits;
	size_t n;
};

static void *inits_main(void *arg)
{
	struct inits_job *j = arg;
	run_inits(j->inits, j->n);
	free(j->inits);
	free(j);
	return NULL;
}

/* A group of non-blocking inits only, with no calls queued: its inits run
 * on a thread, and ncclGroupEnd returns ncclInProgress. Takes inits. */
static ncclResult_t inits_start(struct wn_init *inits, size_t ninits)
{
	struct inits_job *j = malloc(sizeof(*j));
	pthread_attr_t a;
	pthread_t th;
	if (j && pthread_attr_init(&a) == 0) {
		*j = (struct inits_job){.inits = inits, .n = ninits};
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&th, &a, inits_main, j);
		pthread_attr_destroy(&a);
		if (rc == 0)
			return ncclInProgress;
	}
	free(j);
	WN_WARN("ncclGroupEnd: could not start a thread for the non-blocking inits; they run in this call");
	ncclResult_t r = run_inits(inits, ninits);
	free(inits);
	return r;
}

WN_API ncclResult_t ncclGroupEnd(void)
{
	if (grp.depth <= 0) {
		WN_ERROR("ncclGroupEnd without a matching ncclGroupStart");
		return ncclInvalidUsage;
	}
	if (--grp.depth > 0)
		return ncclSuccess;
	struct wn_init *inits = grp.inits;
	size_t ninits = grp.ninits;
	struct wn_op *ops = grp.ops;
	size_t nops = grp.nops;
	memset(&grp, 0, sizeof(grp));

	ncclResult_t r = ncclSuccess;
	if (ninits) {
		int nonblocking = nops == 0;
		for (size_t i = 0; i < ninits; i++) {
			wn_comm_hold(inits[i].comm, 1);
			nonblocking = nonblocking && !inits[i].comm->blocking;
		}
		if (nonblocking)
			return inits_start(inits, ninits);
		r = run_inits(inits, ninits);
	}
	if (nops && r == ncclSuccess) {
		/* One worker per distinct comm, in order of first appearance. */
		struct worker *ws = calloc(nops, sizeof(*ws));
		size_t nw = 0;
		if (!ws) {
			WN_ERROR("ncclGroupEnd: out of memory");
			r = ncclSystemError;
		} else {
			for (size_t i = 0; i < nops; i++) {
				size_t k = 0;
				while (k < nw && ws[k].comm != ops[i].comm)
					k++;
				if (k == nw) {
					ws[nw].comm = ops[i].comm;
					ws[nw].ops = ops;
					ws[nw].nops = nops;
					nw++;
				}
			}
			for (size_t k = 0; k < nw; k++)
				if (!ws[k].comm->wc) {
					WN_ERROR("ncclGroupEnd: a queued call uses rank %d's comm, which is not initialized",
						 ws[k].comm->rank);
					r = ncclInvalidUsage;
				}
			for (size_t k = 0; k < nw; k++) {
				struct wn_clique *cl = ws[k].comm->clique;
				int all = cl != NULL && ws[k].comm->clique_total == ws[k].comm->nranks;
				for (int m = 0; all && m < ws[k].comm->clique_total; m++) {
					size_t j = 0;
					while (j < nw && ws[j].comm != cl->members[m])
						j++;
					all = j < nw;
				}
				ws[k].whole_clique = all;
			}
			if (r == ncclSuccess)
				r = run_workers(ws, nw, run_ops);
			free(ws);
		}
	}
	free(inits);
	free_ops(ops, nops);
	return r;
}
WN_ALIAS(ncclGroupEnd);

/* ------------------------------------------------------------ collectives */

WN_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_ALLREDUCE, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .nop = op, .stream = stream};
	return wn_submit(&o, 1);
}
WN_ALIAS(ncclAllReduce);

WN_API ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				  int root, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_BROADCAST, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .root = root, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclBroadcast);

WN_API ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
			      cudaStream_t stream)
{
	return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}
WN_ALIAS(ncclBcast);

WN_API ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
			       ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_REDUCE, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .nop = op, .root = root, .stream = stream};
	return wn_submit(&o, 1);
}
WN_ALIAS(ncclReduce);

WN_API ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
				  ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_ALLGATHER, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff,
			  .count = sendcount, .ntype = datatype, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclAllGather);

WN_API ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
				      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_REDUCE_SCATTER, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff,
			  .count = recvcount, .ntype = datatype, .nop = op, .stream = stream};
	return wn_submit(&o, 1);
}
WN_ALIAS(ncclReduceScatter);

WN_API ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				 ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_ALLTOALL, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclAlltoAll);

WN_API ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
			       ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_GATHER, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .root = root, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclGather);

WN_API ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
				int root, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_SCATTER, .comm = comm, .sendbuf = sendbuff, .recvbuf = recvbuff, .count = count,
			  .ntype = datatype, .root = root, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclScatter);

WN_API ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			     cudaStream_t stream)
{
	struct wn_op o = {.kind = K_SEND, .comm = comm, .sendbuf = sendbuff, .count = count, .ntype = datatype,
			  .root = peer, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclSend);

WN_API ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
			     cudaStream_t stream)
{
	struct wn_op o = {.kind = K_RECV, .comm = comm, .recvbuf = recvbuff, .count = count, .ntype = datatype,
			  .root = peer, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclRecv);

/* RCCL's and MSCCL++'s v-alltoall (counts and displacements in elements,
 * one per rank): a send and a receive per rank with a nonzero count, in one
 * group, so it may also sit inside the caller's group. */
WN_API ncclResult_t ncclAllToAllv(const void *sendbuff, const size_t sendcounts[], const size_t sdispls[],
				  void *recvbuff, const size_t recvcounts[], const size_t rdispls[],
				  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
	int n = 0;
	ncclResult_t r = ncclCommCount(comm, &n);
	if (r != ncclSuccess)
		return r;
	if (!sendcounts || !sdispls || !recvcounts || !rdispls) {
		WN_ERROR("ncclAllToAllv: NULL %s", !sendcounts ? "sendcounts"
						   : !sdispls	 ? "sdispls"
						   : !recvcounts ? "recvcounts"
								 : "rdispls");
		return ncclInvalidArgument;
	}
	enum weft_datatype wt;
	size_t es = wn_map_type(datatype, &wt) == 0 ? weft_datatype_size(wt) : 0;
	if (!es) {
		WN_ERROR("ncclAllToAllv: unknown datatype %d", (int)datatype);
		return ncclInvalidArgument;
	}
	if ((r = ncclGroupStart()) != ncclSuccess)
		return r;
	for (int p = 0; p < n && r == ncclSuccess; p++) {
		if (sendcounts[p])
			r = ncclSend((const char *)sendbuff + sdispls[p] * es, sendcounts[p], datatype, p, comm, stream);
		if (r == ncclSuccess && recvcounts[p])
			r = ncclRecv((char *)recvbuff + rdispls[p] * es, recvcounts[p], datatype, p, comm, stream);
	}
	ncclResult_t e = ncclGroupEnd();
	return r != ncclSuccess ? r : e;
}
WN_ALIAS(ncclAllToAllv);

WN_API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
	if (grp.depth <= 0) {
		WN_ERROR("ncclGroupSimulateEnd without a matching ncclGroupStart");
		return ncclInvalidUsage;
	}
	/* NCCL ends the group without running it and estimates its time; weft has
	 * no cost model, so it ends the group the same way (dropping what was
	 * queued, as a simulation does) and says it cannot estimate. */
	if (--grp.depth == 0) {
		/* The comms of queued inits were handed out: they stay allocated,
		 * never initialized, so every later use fails by name and
		 * ncclCommDestroy frees them. */
		for (size_t i = 0; i < grp.ninits; i++) {
			grp.inits[i].comm->init_rc = ncclInvalidUsage;
			grp.inits[i].comm->state = WN_FAILED;
		}
		free(grp.inits);
		free_ops(grp.ops, grp.nops);
		memset(&grp, 0, sizeof(grp));
	}
	if (simInfo)
		simInfo->estimatedTime = NCCL_UNDEF_FLOAT;
	WN_ERROR("ncclGroupSimulateEnd: not supported: weft has no cost model to estimate the group's time; the "
		 "group was ended without running it");
	return ncclInvalidUsage;
}
WN_ALIAS(ncclGroupSimulateEnd);
