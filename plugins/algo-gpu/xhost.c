/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the collectives of communicators whose GPUs cannot all map each
 * other (ranks on several hosts, nvlink forbidden, more than 8 ranks): the
 * schedules of hier.c run by the host-driven executor (hx.c) on CUDA
 * buffers. Pieces cross through rings: in device memory towards a peer both
 * sides reach over nvlink, else in registered host memory, so a network or
 * shm transport moves host bytes and the GPU's copy engine and a reduction
 * kernel (which reads a landing slot in place) do the device side. A call
 * runs in order on the caller's stream and returns once its result is there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "hx.h"
#include "pack.h"

struct wag_xh {
	struct wag_ctx *c;
	struct wag_hier_layout lay;
	struct wag_hx *x;
	uint64_t dev_peers; /* bit q: the rings to rank q are device memory */
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
	if (mem == WEFT_MEM_HOST && (rc = wag_cuda_host_register(*p, bytes ? bytes : 1, err, sizeof(err))) != 0) {
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

int wag_xh_create(struct wag_ctx *c, const struct weft_algo_comm *ac, uint64_t dev_peers, struct wag_xh **out)
{
	struct wag_xh *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->c = c;
	h->dev_peers = dev_peers;
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

void wag_xh_free(struct wag_xh *h)
{
	if (!h)
		return;
	wag_hx_free(h->x);
	free(h);
}

int wag_xh_supports(struct wag_ctx *c, const struct weft_coll_args *a)
{
	if (!c->xh || a->mem_type != WEFT_MEM_CUDA)
		return -ENOTSUP;
	/* The host drives every piece: nothing a graph could replay. */
	int cap = 0;
	char err[256];
	if (wag_cuda_capturing(a->stream, &cap, err, sizeof(err)) != 0 || cap)
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
	int rc = wag_hx_sendrecv(c->xh->x, a->sendbuf, a->count, k);
	return rc ? rc : xh_sync(k);
}

int wag_xh_run(struct wag_ctx *c, const struct weft_coll_args *a)
{
	if (wag_xh_supports(c, a)) {
		WAG_LOG(WEFT_LOG_ERROR, "the cross-host algorithms serve CUDA buffers of a call outside graph capture, of "
					"a known datatype and op; this call is not one");
		return -ENOTSUP;
	}
	int rc = wag_cuda_set_device(c->dev);
	if (rc)
		return rc;
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
