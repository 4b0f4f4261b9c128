/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the collectives of communicators whose GPUs cannot all map each
 * other (ranks on several hosts, nvlink forbidden, more than 8 ranks): the
 * schedules of hier.c run by the host-driven executor (hx.c) on CUDA
 * buffers. Pieces cross through rings: in device memory towards a peer both
 * sides reach over nvlink, else in registered host memory, so a network or
 * shm transport moves host bytes and the GPU's copy engine and a reduction
 * kernel (which reads a landing slot in place) do the device side. A call
 * runs in order on the caller's stream and returns once its result is there.
 *
 * A call captured into a CUDA graph becomes copies between the caller's
 * buffers and pinned host buffers of its own, around a host node that runs
 * the same schedule on those host buffers with a second executor (host rings
 * only, CPU reductions), since a host node may not call CUDA. Each replay
 * moves the data again; the executor's connections are made at capture. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "hx.h"
#include "pack.h"

struct xh_graph;

struct wag_xh {
	struct wag_ctx *c;
	struct wag_hier_layout lay;
	struct wag_hx *x;
	uint64_t dev_peers; /* bit q: the rings to rank q are device memory */
	/* Captured calls: their executor (made at the first capture), the
	 * calls themselves (kept until the comm ends, as graphs may replay
	 * them), and the first error a replay met, which every later call
	 * returns (a host node has no one to return it to). */
	struct wag_hx *hh;
	struct xh_graph *graphs;
	pthread_mutex_t glock; /* one replay at a time: hh's rings are shared */
	int gerr;
};

/* What every op of one call needs: its stream, where CUDA errors go. */
struct xh_call {
	struct wag_xh *h;
	void *stream;
};

static int xh_err(int rc, const char *err)
{
	if (rc)
		WAG_LOG(WEFT_LOG_ERROR, "cross-host schedule: %s", err[0] ? err : wag_errname(rc));
	return rc;
}

static int xh_copy(void *u, void *dst, const void *src, size_t bytes)
{
	const struct xh_call *k = u;
	char err[256] = "";
	return xh_err(wag_cuda_copy(dst, src, bytes, k->stream, err, sizeof(err)), err);
}

static uint32_t xh_blocks(const struct xh_call *k)
{
	return (uint32_t)(k->h->c->sms > 0 ? k->h->c->sms : 1);
}

static int xh_reduce(void *u, int dtype, int op, void *dst, const void *src, uint64_t n)
{
	const struct xh_call *k = u;
	char err[256] = "";
	return xh_err(wag_launch_hx_reduce(dtype, op, dst, src, n, xh_blocks(k), k->stream, err, sizeof(err)), err);
}

static int xh_divide(void *u, int dtype, void *buf, uint64_t n, int nranks)
{
	const struct xh_call *k = u;
	char err[256] = "";
	return xh_err(wag_launch_hx_divide(dtype, buf, n, nranks, xh_blocks(k), k->stream, err, sizeof(err)), err);
}

static int xh_sync(void *u)
{
	const struct xh_call *k = u;
	char err[256] = "";
	return xh_err(wag_cuda_sync_stream(k->stream, err, sizeof(err)), err);
}

/* Host rings come from the core's allocator (shm segments where shm is
 * open, so a same-host peer maps them), pinned and mapped for the GPU. */
static int xh_alloc(void *actx, enum weft_mem_type mem, size_t bytes, void **p)
{
	struct wag_xh *h = actx;
	const struct weft_prim_api *pr = h->c->prim;
	char err[256] = "";
	int rc = pr->mem_alloc(h->c->comm, mem, bytes ? bytes : 1, p);
	if (rc)
		return rc;
	if (mem == WEFT_MEM_HOST && (rc = wag_cuda_host_register_capture(*p, bytes ? bytes : 1, err, sizeof(err))) != 0) {
		WAG_LOG(WEFT_LOG_ERROR, "cross-host schedule: cannot pin %zu bytes of ring memory: %s", bytes, err);
		pr->mem_free(h->c->comm, *p);
		*p = NULL;
	}
	return rc;
}

static void xh_free(void *actx, enum weft_mem_type mem, void *p)
{
	struct wag_xh *h = actx;
	if (mem == WEFT_MEM_HOST)
		wag_cuda_host_unregister(p);
	h->c->prim->mem_free(h->c->comm, p);
}

static enum weft_mem_type xh_peer_mem(void *actx, int peer)
{
	const struct wag_xh *h = actx;
	return (h->dev_peers >> peer) & 1 ? WEFT_MEM_CUDA : WEFT_MEM_HOST;
}

/* The captured calls' executor works on host memory with the CPU. */
static int hh_copy(void *u, void *dst, const void *src, size_t bytes)
{
	(void)u;
	memmove(dst, src, bytes);
	return 0;
}

static int hh_reduce(void *u, int dtype, int op, void *dst, const void *src, uint64_t n)
{
	(void)u;
	if (!weft_kit_reduce_supported((enum weft_datatype)dtype, (enum weft_redop)op))
		return -ENOTSUP;
	weft_kit_reduce((enum weft_datatype)dtype, (enum weft_redop)op, dst, src, n);
	return 0;
}

static int hh_divide(void *u, int dtype, void *buf, uint64_t n, int nranks)
{
	(void)u;
	weft_kit_finish((enum weft_datatype)dtype, WEFT_AVG, buf, n, nranks);
	return 0;
}

static int hh_sync(void *u)
{
	(void)u;
	return 0;
}

int wag_xh_create(struct wag_ctx *c, const struct weft_algo_comm *ac, uint64_t dev_peers, struct wag_xh **out)
{
	struct wag_xh *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->c = c;
	h->dev_peers = dev_peers;
	pthread_mutex_init(&h->glock, NULL);
	int rc = wag_hx_layout(ac, &h->lay);
	if (rc) {
		/* More ranks on one host than the layout holds. */
		WAG_LOG(WEFT_LOG_WARN, "cross-host schedules: a host holds more than %d ranks of the communicator",
			WAG_MAX_RANKS);
		free(h);
		return rc;
	}
	static const struct wag_hx_ops ops0 = {
		.copy = xh_copy, .reduce = xh_reduce, .divide = xh_divide, .sync = xh_sync,
		.alloc = xh_alloc, .free = xh_free, .peer_mem = xh_peer_mem};
	struct wag_hx_ops ops = ops0;
	ops.actx = h;
	struct wag_hx_cfg cfg = {.chunk = wag_cfg.hier_chunk, .depth = (uint32_t)wag_cfg.hier_depth};
	if ((rc = wag_hx_create(ac->comm, ac->prim, wag_core, WEFT_MEM_CUDA, &ops, &cfg, &h->x)) != 0) {
		free(h);
		return rc;
	}
	*out = h;
	return 0;
}

static void graphs_free(struct wag_xh *h);

void wag_xh_free(struct wag_xh *h)
{
	if (!h)
		return;
	wag_hx_free(h->x);
	if (h->hh)
		wag_hx_free(h->hh);
	graphs_free(h);
	pthread_mutex_destroy(&h->glock);
	free(h);
}

int wag_xh_supports(struct wag_ctx *c, const struct weft_coll_args *a)
{
	if (!c->xh || a->mem_type != WEFT_MEM_CUDA)
		return -ENOTSUP;
	if (a->coll == WEFT_COLL_SENDRECV) {
		const struct weft_p2p_op *ops = a->sendbuf;
		for (size_t i = 0; ops && i < a->count; i++)
			if (ops[i].peer < 0 || ops[i].peer >= c->nranks || (ops[i].bytes && !ops[i].buf))
				return -ENOTSUP;
		return ops ? 0 : -ENOTSUP;
	}
	if (!wag_esize(a->dtype))
		return -ENOTSUP;
	int reducing = weft_kit_coll_reduces(a->coll);
	if (reducing && ((int)a->op < 0 || a->op >= WEFT_REDOP_COUNT))
		return -ENOTSUP;
	if (reducing && a->op == WEFT_PREMUL_SUM && a->scalar_mem != WEFT_MEM_HOST && a->scalar_mem != WEFT_MEM_CUDA)
		return -ENOTSUP;
	return 0;
}

/* A send/recv batch: the executor sends from copies where the batch's
 * receives overwrite its sends' bytes (hx.h). */
static int xh_sendrecv(struct wag_ctx *c, const struct weft_coll_args *a, struct xh_call *k)
{
	int rc = wag_hx_sendrecv(c->xh->x, a->sendbuf, wag_call_p2p_sig(a), a->count, k);
	return rc ? rc : xh_sync(k);
}

/* ------------------------------------------------------- captured calls */

/* One captured call: the caller's buffers are copied to and from pinned host
 * buffers around a host node that runs the schedule on them. */
struct xh_graph {
	struct xh_graph *next;
	struct wag_xh *h;
	struct weft_coll_args a;   /* on the host buffers (mem_type host) */
	struct weft_p2p_op *ops;   /* send/recv: the batch, on the host buffers */
	uint64_t *sigs;            /* and its signatures (the call's are gone by then) */
	enum wag_hier_inter how;
	size_t esize;
	char *host;                /* pinned: input, output, then the scalar */
	void *out;                 /* the output's part of host */
	uint64_t out_bytes;
	uint64_t scale_elems;      /* pre-multiplied sum: input elements to scale */
	unsigned char *scalar;
};

static void graphs_free(struct wag_xh *h)
{
	while (h->graphs) {
		struct xh_graph *g = h->graphs;
		h->graphs = g->next;
		if (g->host)
			xh_free(h, WEFT_MEM_HOST, g->host);
		free(g->ops);
		free(g->sigs);
		free(g);
	}
}

/* The bytes of the caller's input and output of a collective on this rank. */
static void coll_bytes(int nranks, const struct weft_coll_args *a, size_t es, uint64_t *in, uint64_t *out)
{
	uint64_t n = (uint64_t)a->count * es, all = n * (uint64_t)nranks;
	*in = a->coll == WEFT_COLL_REDUCE_SCATTER || a->coll == WEFT_COLL_ALLTOALL ? all : n;
	*out = a->coll == WEFT_COLL_ALLGATHER || a->coll == WEFT_COLL_ALLTOALL ? all : n;
}

/* The schedule on the host buffers; prepare: connect only (at capture). */
static int graph_run(struct xh_graph *g, int prepare)
{
	struct wag_hx *x = g->h->hh;
	wag_hx_prepare(x, prepare);
	int rc = 0;
	if (g->a.coll == WEFT_COLL_SENDRECV) {
		rc = wag_hx_sendrecv(x, g->ops, g->sigs, g->a.count, NULL);
	} else {
		if (g->scale_elems && !prepare)
			rc = weft_kit_scale(g->a.dtype, (void *)(uintptr_t)g->a.sendbuf, g->a.sendbuf, g->scalar,
					    g->scale_elems);
		if (rc == 0)
			rc = wag_hx_coll(x, &g->h->lay, &g->a, g->esize, g->how, NULL);
	}
	wag_hx_prepare(x, 0);
	return rc;
}

/* The host node. A failure fails every later call, and the output of this
 * replay reads as all-ones bits (NaN for floats) rather than stale data. */
static void graph_replay(void *arg)
{
	struct xh_graph *g = arg;
	struct wag_xh *h = g->h;
	pthread_mutex_lock(&h->glock);
	int rc = __atomic_load_n(&h->gerr, __ATOMIC_ACQUIRE);
	if (rc == 0 && (rc = graph_run(g, 0)) != 0) {
		static const char *const names[] = {"allreduce", "allgather", "reduce-scatter", "broadcast",
						    "reduce",    "alltoall",  "send/recv"};
		WAG_LOG(WEFT_LOG_ERROR, "a replay of a captured cross-host %s failed: %s; every later call on this "
					"communicator fails",
			(unsigned)g->a.coll < 7 ? names[g->a.coll] : "call", wag_errname(rc));
		__atomic_store_n(&h->gerr, rc, __ATOMIC_RELEASE);
	}
	if (rc)
		memset(g->out, 0xff, g->out_bytes);
	pthread_mutex_unlock(&h->glock);
}

static int hh_create(struct wag_xh *h)
{
	static const struct wag_hx_ops ops = {
		.copy = hh_copy, .reduce = hh_reduce, .divide = hh_divide, .sync = hh_sync};
	struct wag_hx_cfg cfg = {.chunk = wag_cfg.hier_chunk, .depth = (uint32_t)wag_cfg.hier_depth};
	return wag_hx_create(h->c->comm, h->c->prim, wag_core, WEFT_MEM_HOST, &ops, &cfg, &h->hh);
}

/* Lays out g's host buffers for a send/recv batch: each entry's bytes. */
static int graph_p2p(struct xh_graph *g, const struct weft_coll_args *a, uint64_t *bytes)
{
	const struct weft_p2p_op *ops = a->sendbuf;
	const uint64_t *sigs = wag_call_p2p_sig(a);
	if (!(g->ops = calloc(a->count, sizeof(*g->ops))) || (sigs && !(g->sigs = calloc(a->count, sizeof(*sigs)))))
		return -ENOMEM;
	if (sigs)
		memcpy(g->sigs, sigs, a->count * sizeof(*sigs));
	*bytes = 0;
	for (size_t i = 0; i < a->count; i++) {
		g->ops[i] = ops[i];
		g->ops[i].buf = (void *)(uintptr_t)*bytes; /* an offset until host exists */
		*bytes += (ops[i].bytes + 63) & ~(uint64_t)63;
	}
	g->a.sendbuf = g->ops;
	return 0;
}

/* The copies and the host node of a captured call, on its stream. */
static int graph_enqueue(struct xh_graph *g, const struct weft_coll_args *a, uint64_t in_bytes)
{
	void *st = a->stream;
	char err[256] = "";
	int rc = 0, me = g->h->c->rank;
	if (a->coll == WEFT_COLL_SENDRECV) {
		const struct weft_p2p_op *ops = a->sendbuf;
		for (size_t i = 0; i < a->count && rc == 0; i++)
			if (ops[i].is_send)
				rc = wag_cuda_copy(g->ops[i].buf, ops[i].buf, ops[i].bytes, st, err, sizeof(err));
	} else if (a->coll != WEFT_COLL_BROADCAST || a->root == me) {
		rc = wag_cuda_copy((void *)(uintptr_t)g->a.sendbuf, a->sendbuf, in_bytes, st, err, sizeof(err));
	}
	if (rc == 0 && g->scale_elems && a->scalar_mem == WEFT_MEM_CUDA)
		rc = wag_cuda_copy(g->scalar, a->scalar_dev, g->esize, st, err, sizeof(err));
	if (rc == 0)
		rc = wag_cuda_host_fn(st, graph_replay, g, err, sizeof(err));
	if (a->coll == WEFT_COLL_SENDRECV) {
		const struct weft_p2p_op *ops = a->sendbuf;
		for (size_t i = 0; i < a->count && rc == 0; i++)
			if (!ops[i].is_send)
				rc = wag_cuda_copy(ops[i].buf, g->ops[i].buf, ops[i].bytes, st, err, sizeof(err));
	} else if (rc == 0 && (a->coll != WEFT_COLL_REDUCE || a->root == me)) {
		rc = wag_cuda_copy(a->recvbuf, g->out, g->out_bytes, st, err, sizeof(err));
	}
	return xh_err(rc, err);
}

/* A call made while its stream is captured: its host buffers and its
 * executor's connections now (every rank captures the same calls in the same
 * order, as it makes them), its copies and host node on the stream. */
static int xh_capture(struct wag_ctx *c, const struct weft_coll_args *a)
{
	struct wag_xh *h = c->xh;
	int rc = h->hh ? 0 : hh_create(h);
	struct xh_graph *g = rc ? NULL : calloc(1, sizeof(*g));
	if (rc || !g)
		return rc ? rc : -ENOMEM;
	g->next = h->graphs;
	h->graphs = g;
	g->h = h;
	g->a = *a;
	g->a.mem_type = WEFT_MEM_HOST;
	g->a.stream = NULL;
	uint64_t in = 0, out = 0;
	if (a->coll == WEFT_COLL_SENDRECV) {
		g->esize = 1;
		rc = graph_p2p(g, a, &in);
	} else {
		g->esize = wag_esize(a->dtype);
		coll_bytes(c->nranks, a, g->esize, &in, &out);
		g->how = (uint64_t)a->count * g->esize <= wag_cfg.hier_tree_max ? WAG_HI_TREE : WAG_HI_RING;
	}
	uint64_t in_al = (in + 63) & ~(uint64_t)63;
	if (rc == 0)
		rc = xh_alloc(h, WEFT_MEM_HOST, in_al + out + 64, (void **)&g->host);
	if (rc)
		return rc;
	g->out = g->host + in_al;
	g->out_bytes = out;
	g->scalar = (unsigned char *)g->host + in_al + ((out + 63) & ~(uint64_t)63);
	if (a->coll == WEFT_COLL_SENDRECV) {
		for (size_t i = 0; i < a->count; i++)
			g->ops[i].buf = g->host + (uintptr_t)g->ops[i].buf;
	} else {
		g->a.sendbuf = g->host;
		g->a.recvbuf = g->out;
	}
	if (a->op == WEFT_PREMUL_SUM && weft_kit_coll_reduces(a->coll)) {
		g->a.op = WEFT_SUM;
		g->scale_elems = in / g->esize;
		memcpy(g->scalar, a->scalar_host, sizeof(a->scalar_host));
	}
	if ((rc = graph_run(g, 1)) != 0)
		return rc;
	return graph_enqueue(g, a, in);
}

int wag_xh_run(struct wag_ctx *c, const struct weft_coll_args *a)
{
	if (wag_xh_supports(c, a)) {
		WAG_LOG(WEFT_LOG_ERROR, "the cross-host algorithms serve CUDA buffers of a known datatype and op; this "
					"call is not one");
		return -ENOTSUP;
	}
	/* A kernel of this comm found calls that differ: so does this one. */
	int rc = wag_sig_status(c);
	if (rc || (rc = wag_cuda_set_device(c->dev)))
		return rc;
	int cap = 0;
	char err[256] = "";
	if ((rc = wag_cuda_capturing(a->stream, &cap, err, sizeof(err))) != 0)
		return xh_err(rc, err);
	if ((rc = __atomic_load_n(&c->xh->gerr, __ATOMIC_ACQUIRE)) != 0) {
		WAG_LOG(WEFT_LOG_ERROR, "a replay of a captured cross-host call failed earlier (%s); the communicator "
					"cannot go on", wag_errname(rc));
		return rc;
	}
	if (cap)
		return xh_capture(c, a);
	struct xh_call k = {.h = c->xh, .stream = a->stream};
	if (a->coll == WEFT_COLL_SENDRECV)
		return xh_sendrecv(c, a, &k);
	if (a->count == 0)
		return 0;
	enum wag_hier_inter how = (uint64_t)a->count * wag_esize(a->dtype) <= wag_cfg.hier_tree_max ? WAG_HI_TREE
												: WAG_HI_RING;
	size_t es = wag_esize(a->dtype);
	if (a->op == WEFT_PREMUL_SUM &&
	    (a->coll == WEFT_COLL_ALLREDUCE || a->coll == WEFT_COLL_REDUCE_SCATTER || a->coll == WEFT_COLL_REDUCE)) {
		struct weft_coll_args b;
		void *tmp;
		if ((rc = wag_premul_begin(c, a, &b, &tmp)) != 0)
			return rc;
		rc = wag_hx_coll(c->xh->x, &c->xh->lay, &b, es, how, &k);
		return wag_premul_end(a, tmp, rc);
	}
	return wag_hx_coll(c->xh->x, &c->xh->lay, a, es, how, &k);
}
