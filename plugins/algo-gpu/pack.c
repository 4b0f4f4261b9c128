/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the pack's host side: parameters, per-communicator setup (nvlink
 * connections to every peer, one scratch buffer per rank mapped into every
 * peer's GPU), the algorithm table and the launches on the caller's stream. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>
#include <weft/kit.h>
#include <weft/plugin.h>

#include "pack.h"

const struct weft_core_api *wag_core;
struct wag_cfg wag_cfg;

/* ---------------------------------------------------- per-comm context */

static uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

static uint32_t ll_blocks(uint64_t bytes)
{
	return (uint32_t)((wag_ll_packets(bytes) + WAG_LL_TPB - 1) / WAG_LL_TPB);
}

static void layout(int nranks, int sms, struct wag_layout *l)
{
	uint64_t maxb = (uint64_t)ll_blocks(wag_cfg.ll_max > wag_cfg.llx_max ? wag_cfg.ll_max : wag_cfg.llx_max);
	int64_t b[] = {wag_cfg.oneshot_blocks, wag_cfg.rsag_blocks, wag_cfg.ag_blocks, wag_cfg.direct_blocks,
		       wag_cfg.direct_reduce_blocks};
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if ((uint64_t)b[i] > maxb)
			maxb = (uint64_t)b[i];
	if (maxb > (uint64_t)sms)
		maxb = (uint64_t)sms;
	memset(l, 0, sizeof(*l));
	l->maxb = (uint32_t)(maxb ? maxb : 1);
	l->depth = (uint32_t)wag_cfg.depth;
	l->tile_bytes = wag_cfg.tile;
	/* Every channel of a send/recv batch (a send and a receive per peer, and
	 * the copies to itself) gets pblocks blocks, all resident at once: one
	 * block a multiprocessor at most. */
	uint64_t pb = (uint64_t)(sms > 0 ? sms : 1) / (2 * (uint64_t)nranks - 1);
	if (pb > (uint64_t)wag_cfg.p2p_blocks)
		pb = (uint64_t)wag_cfg.p2p_blocks;
	l->pblocks = (uint32_t)(pb ? pb : 1);
	l->fb = l->maxb > l->pblocks ? l->maxb : l->pblocks;
	l->p2p_tile = wag_cfg.p2p_tile > wag_cfg.tile ? wag_cfg.p2p_tile : wag_cfg.tile;
	l->ll_slot = round_up(2 * (wag_cfg.ll_max > wag_cfg.llx_max ? wag_cfg.ll_max : wag_cfg.llx_max), 256);
	l->os_slot = round_up(wag_cfg.oneshot_max > wag_cfg.ag_oneshot_max ? wag_cfg.oneshot_max : wag_cfg.ag_oneshot_max, 256);
	uint64_t off = 0;
	l->flags = off;
	off += round_up((uint64_t)WAG_F_COUNT * WAG_MAX_RANKS * l->fb * 8, 256);
	l->local = off;
	off += round_up((uint64_t)WAG_L_COUNT * l->fb * 8, 256);
	l->p2p_local = off;
	off += round_up(2ull * WAG_MAX_RANKS * l->fb * 8, 256);
	l->ll = off;
	off += 2 * (uint64_t)nranks * l->ll_slot;
	l->os = off;
	off += 2 * (uint64_t)nranks * l->os_slot;
	l->rs = off;
	off += (uint64_t)nranks * l->maxb * l->depth * l->tile_bytes;
	l->ag = off;
	off += (uint64_t)nranks * l->maxb * l->depth * l->tile_bytes;
	l->p2p = off;
	off += (uint64_t)nranks * l->pblocks * l->depth * l->p2p_tile;
	l->p2p_ll = off;
	l->p2p_ll_max = wag_cfg.p2p_ll_max;
	l->p2p_ll_slot = 2 * wag_p2p_ll_tile_max(l->p2p_ll_max, l->pblocks);
	off += (uint64_t)nranks * l->pblocks * l->depth * l->p2p_ll_slot;
	/* The signature slots: a half each for LL and one-shot, a ring slot
	 * for the rings and point-to-point (kernels.cu, sig_at). */
	off = round_up(off, 256); /* uint4 packets: 16-byte aligned whatever the tiles */
	l->sig = off;
	l->sig_slots = l->depth > 2 ? l->depth : 2;
	off += round_up((uint64_t)WAG_S_COUNT * WAG_MAX_RANKS * l->sig_slots * 16, 256);
	l->total = off;
}

static void ctx_free(struct wag_ctx *c)
{
	const struct weft_prim_api *p = c->prim;
	/* Kernels of this comm may still run on the caller's streams, and peers'
	 * kernels may still write flags into this rank's scratch: wait for the
	 * device, then for every rank, before anything is unmapped or freed. */
	if (c->ready) {
		wag_cuda_set_device(c->dev);
		wag_cuda_device_sync();
		p->comm_barrier(c->comm);
	}
	wag_ce_free(c);
	wag_win_free(c);
	wag_xh_free(c->xh);
	for (int q = 0; q < c->nranks && q < WAG_MAX_RANKS; q++) {
		struct wag_peer *pe = &c->peers[q];
		if (pe->chan)
			p->memchan_destroy(pe->chan);
		if (pe->rmem)
			p->rmem_release(pe->rmem);
		if (pe->conn)
			p->conn_close(pe->conn);
	}
	if (c->mem)
		p->mem_deregister(c->mem);
	if (c->scratch)
		p->mem_free(c->comm, c->scratch);
	if (c->sigerr) {
		wag_cuda_host_unregister(c->sigerr);
		free(c->sigerr);
	}
	free(c);
}

/* The word the kernels report a differing signature in: host memory the
 * GPU writes, so the host reads it at the next call without a copy or a
 * sync (a captured graph gets no node for it). Without it the kernels do
 * not compare (the heartbeats still compare the calls). */
static void sigerr_create(struct wag_ctx *c)
{
	char err[256] = "";
	void *w = NULL;
	if (posix_memalign(&w, 4096, 4096) != 0)
		return;
	memset(w, 0, 4096);
	if (wag_cuda_host_register(w, 4096, err, sizeof(err)) != 0) {
		WAG_LOG(WEFT_LOG_INFO, "the kernels cannot report differing calls (%s): the heartbeats compare them",
			err[0] ? err : "host memory not mappable");
		free(w);
		return;
	}
	c->sigerr = w;
	c->base.sigerr = w;
}

/* Whether this rank reaches rank q through nvlink with device memory (the
 * core's device routes: same host, nvlink open and not forbidden). */
static int nvlink_to(const struct weft_algo_comm *ac, int q)
{
	const struct weft_algo_peer *pe = weft_algo_peer_at(ac, q), *me = weft_algo_peer_at(ac, ac->rank);
	if (!pe || !me || ac->peer_size < offsetof(struct weft_algo_peer, dev_routes) + sizeof(pe->dev_routes) ||
	    pe->host != me->host)
		return 0;
	for (int k = 0; k < pe->ndev_routes; k++)
		if (pe->dev_routes[k].transport && strcmp(pe->dev_routes[k].transport, "nvlink") == 0)
			return 1;
	return 0;
}

/* The kernels' mesh, collectively: every rank connects to every peer through
 * nvlink (pairs in ascending (low, high) order, so no cycle of blocking
 * connects forms), swaps scratch registrations and maps each peer's scratch
 * into this GPU. */
static int mesh_create(struct wag_ctx *c)
{
	const struct weft_prim_api *p = c->prim;
	int rc;
	if ((rc = p->mem_alloc(c->comm, WEFT_MEM_CUDA, c->lay.total, &c->scratch))) {
		WAG_LOG(WEFT_LOG_ERROR, "cannot allocate %llu bytes of device scratch: %s",
			(unsigned long long)c->lay.total, wag_errname(rc));
		return rc;
	}
	if ((rc = p->mem_register(c->comm, c->scratch, c->lay.total, WEFT_MEM_CUDA, &c->mem))) {
		WAG_LOG(WEFT_LOG_ERROR, "cannot register the scratch buffer: %s", wag_errname(rc));
		return rc;
	}
	c->base.scr[c->rank] = c->scratch;
	for (int lo = 0; lo < c->nranks; lo++)
		for (int hi = lo + 1; hi < c->nranks; hi++) {
			if (c->rank != lo && c->rank != hi)
				continue;
			int q = c->rank == lo ? hi : lo;
			struct wag_peer *pe = &c->peers[q];
			void *dptr = NULL;
			struct weft_memchan_dev dev;
			if ((rc = p->connect(c->comm, q, "nvlink", &pe->conn))) {
				WAG_LOG(WEFT_LOG_ERROR, "cannot connect to rank %d through nvlink: %s", q, wag_errname(rc));
				return rc;
			}
			if ((rc = p->mem_exchange(c->mem, q, &pe->rmem))) {
				WAG_LOG(WEFT_LOG_ERROR, "cannot exchange scratch with rank %d: %s", q, wag_errname(rc));
				return rc;
			}
			if ((rc = p->rmem_device_ptr(pe->conn, pe->rmem, &dptr))) {
				WAG_LOG(WEFT_LOG_ERROR, "cannot map rank %d's scratch into this GPU: %s", q, wag_errname(rc));
				return rc;
			}
			if ((rc = p->memchan_create(pe->conn, pe->rmem, c->mem, NULL, NULL, &pe->chan)) ||
			    (rc = p->memchan_device_handle(pe->chan, &dev))) {
				WAG_LOG(WEFT_LOG_ERROR, "cannot make a memory channel to rank %d: %s", q, wag_errname(rc));
				return rc;
			}
			c->base.scr[q] = dptr;
			c->base.abort[q] = dev.abort_flag;
		}
	sigerr_create(c);
	return 0;
}

/* Collective. Which pairs reach each other through nvlink is agreed first
 * (each rank's view, allgathered): the mesh is made only where every pair
 * does on one host, and a pair's cross-host rings are device memory only
 * where both of its ranks say so. */
static int ctx_create(const struct weft_algo_comm *ac, struct wag_ctx **out)
{
	const struct weft_prim_api *p = ac->prim;
	if (!p || p->size < offsetof(struct weft_prim_api, sem_wait_any) + sizeof(p->sem_wait_any)) {
		WAG_LOG(WEFT_LOG_ERROR, "the core's primitive API predates ABI 0.3 (no device channels or waits on "
					"several semaphores)");
		return -ENOTSUP;
	}
	if (ac->nranks > WAG_HIER_MAX_RANKS) {
		WAG_LOG(WEFT_LOG_ERROR, "%d ranks: the pack serves at most %d", ac->nranks, WAG_HIER_MAX_RANKS);
		return -ENOTSUP;
	}
	struct wag_ctx *c = calloc(1, sizeof(*c));
	uint64_t *all = calloc((size_t)ac->nranks, sizeof(*all));
	if (!c || !all) {
		free(c);
		free(all);
		return -ENOMEM;
	}
	c->comm = ac->comm;
	c->rank = ac->rank;
	c->nranks = ac->nranks;
	c->prim = p;
	int rc, sms = 0;
	if (wag_cuda_get_device(&c->dev) || wag_cuda_sm_count(c->dev, &sms)) {
		/* CUDA buffers where no CUDA device answers: a memory type this
		 * process cannot serve, which weft.h reports as -ENOTSUP. */
		WAG_LOG(WEFT_LOG_ERROR, "no CUDA device in this process: CUDA buffers cannot be served");
		rc = -ENOTSUP;
		goto err_free;
	}
	c->sms = sms;
	layout(c->nranks < WAG_MAX_RANKS ? c->nranks : WAG_MAX_RANKS, sms, &c->lay);
	c->base.rank = c->rank;
	c->base.nranks = c->nranks;
	c->base.lay = c->lay;
	uint64_t mine = 0, dev_peers = 0;
	for (int q = 0; q < c->nranks; q++)
		if (q != c->rank && nvlink_to(ac, q))
			mine |= 1ull << q;
	if ((rc = p->comm_allgather(c->comm, &mine, all, sizeof(mine)))) {
		WAG_LOG(WEFT_LOG_ERROR, "cannot agree on the ranks' nvlink peers: %s", wag_errname(rc));
		goto err_free;
	}
	c->mesh = c->nranks <= WAG_MAX_RANKS;
	for (int a = 0; a < c->nranks; a++)
		for (int b = 0; b < c->nranks; b++) {
			int both = a == b || (((all[a] >> b) & 1) && ((all[b] >> a) & 1));
			c->mesh &= both;
			if (a == c->rank && b != a && both)
				dev_peers |= 1ull << b;
		}
	if (c->mesh && (rc = mesh_create(c)) != 0)
		goto err_free;
	if ((rc = wag_xh_create(c, ac, dev_peers, &c->xh)) != 0) {
		if (!c->mesh) {
			WAG_LOG(WEFT_LOG_ERROR, "the cross-host algorithms cannot be set up: %s", wag_errname(rc));
			goto err_free;
		}
		c->xh = NULL; /* the kernels serve; the cross-host algorithms decline */
	}
	if (!c->mesh)
		WAG_LOG(WEFT_LOG_INFO, "some ranks cannot map each other's GPUs through nvlink (other hosts, or nvlink "
				       "forbidden or absent): only the cross-host algorithms serve this communicator");
	/* Ready only once every rank's half is made: a failure on any rank then
	 * ends this barrier everywhere (the core cancels setup waits), so the
	 * barrier in ctx_free is met by every rank or by none. */
	if ((rc = p->comm_barrier(c->comm))) {
		WAG_LOG(WEFT_LOG_ERROR, "the other ranks did not complete their context: %s", wag_errname(rc));
		goto err_free;
	}
	free(all);
	c->ready = 1;
	*out = c;
	return 0;
err_free:
	free(all);
	ctx_free(c);
	return rc;
}

/* The pack's per-communicator context: made by comm_setup, collectively
 * (see ctx_create), shared by every algorithm, freed by comm_teardown. */
static int wag_comm_setup(const struct weft_algo_comm *ac, void **pack_state)
{
	struct wag_ctx *c = NULL;
	int rc = ctx_create(ac, &c);
	if (rc == 0)
		*pack_state = c;
	return rc;
}

static void wag_comm_teardown(void *pack_state)
{
	if (pack_state)
		ctx_free(pack_state);
}

/* ------------------------------------------------------------ algorithms */

size_t wag_esize(enum weft_datatype t)
{
	static const size_t sz[WEFT_DATATYPE_COUNT] = {
		[WEFT_INT8] = 1,    [WEFT_UINT8] = 1,    [WEFT_INT32] = 4,   [WEFT_UINT32] = 4,
		[WEFT_INT64] = 8,   [WEFT_UINT64] = 8,   [WEFT_FLOAT16] = 2, [WEFT_BFLOAT16] = 2,
		[WEFT_FLOAT32] = 4, [WEFT_FLOAT64] = 8,  [WEFT_FP8_E4M3] = 1, [WEFT_FP8_E5M2] = 1,
	};
	return (int)t >= 0 && t < WEFT_DATATYPE_COUNT ? sz[t] : 0;
}

/* Every datatype has a kernel (kernels.cu: WAG_DISPATCH); the op must be known. */
static int reducible(enum weft_datatype t, enum weft_redop op)
{
	return (int)op >= 0 && op < WEFT_REDOP_COUNT && wag_esize(t) != 0;
}


static const char *const kind_name[] = {
	[WAG_AR_LL] = "allreduce-ll",
	[WAG_AG_LL] = "allgather-ll",
	[WAG_RS_LL] = "reduce-scatter-ll",
	[WAG_A2A_LL] = "alltoall-ll",
	[WAG_BC_LL] = "broadcast-ll",
	[WAG_AR_ONESHOT] = "allreduce-oneshot",
	[WAG_AR_RSAG] = "allreduce-rsag",
	[WAG_AG_ONESHOT] = "allgather-oneshot",
	[WAG_AG_RING] = "allgather-ring",
	[WAG_RS_ONESHOT] = "reduce-scatter-oneshot",
	[WAG_RS_RING] = "reduce-scatter-ring",
	[WAG_RED_ONESHOT] = "reduce-oneshot",
	[WAG_RED_RING] = "reduce-ring",
	[WAG_BC_ONESHOT] = "broadcast-oneshot",
	[WAG_BC_RING] = "broadcast-ring",
	[WAG_A2A_ONESHOT] = "alltoall-oneshot",
	[WAG_A2A_RING] = "alltoall-ring",
	[WAG_AR_CE] = "allreduce-ce",
	[WAG_RS_CE] = "reduce-scatter-ce",
	[WAG_AG_CE] = "allgather-ce",
	[WAG_BC_CE] = "broadcast-ce",
	[WAG_A2A_CE] = "alltoall-ce",
	[WAG_AR_DIRECT] = "allreduce-direct",
	[WAG_RS_DIRECT] = "reduce-scatter-direct",
	[WAG_AG_DIRECT] = "allgather-direct",
	[WAG_BC_DIRECT] = "broadcast-direct",
	[WAG_A2A_DIRECT] = "alltoall-direct",
};

static int capacity_ok(const struct wag_ctx *c, enum wag_kind k, const struct weft_coll_args *a)
{
	uint64_t bytes = (uint64_t)a->count * wag_esize(a->dtype);
	switch (k) {
	case WAG_AR_LL:
		return bytes <= c->lay.ll_slot / 2 && ll_blocks(bytes) <= c->lay.maxb;
	case WAG_AG_LL:
	case WAG_RS_LL:
	case WAG_A2A_LL:
	case WAG_BC_LL:
		/* The message to each peer is one rank's block (count; broadcast: the vector). */
		return bytes <= wag_cfg.llx_max && bytes <= c->lay.ll_slot / 2 && ll_blocks(bytes) <= c->lay.maxb;
	case WAG_AR_ONESHOT:
	case WAG_AG_ONESHOT:
	case WAG_RS_ONESHOT:
	case WAG_RED_ONESHOT:
	case WAG_BC_ONESHOT:
	case WAG_A2A_ONESHOT:
		/* One peer's share (a vector, or one rank's block) per slot. */
		return bytes <= c->lay.os_slot;
	default:
		return 1;
	}
}

static int supports_kind(void *state, const struct weft_coll_args *a, enum wag_kind k)
{
	struct wag_ctx *c = state;
	if (!c->mesh || a->mem_type != WEFT_MEM_CUDA || !wag_esize(a->dtype))
		return -ENOTSUP;
	int reducing = weft_kit_coll_reduces(a->coll);
	if (reducing && !reducible(a->dtype, a->op))
		return -ENOTSUP;
	/* A device scalar of this call's device, or the host value. */
	if (reducing && a->op == WEFT_PREMUL_SUM && a->scalar_mem != WEFT_MEM_HOST && a->scalar_mem != WEFT_MEM_CUDA)
		return -ENOTSUP;
	if (!capacity_ok(c, k, a))
		return -ENOTSUP;
	return 0;
}

static int sup_ll(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AR_LL); }
static int sup_agll(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AG_LL); }
static int sup_rsll(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_RS_LL); }
static int sup_a2all(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_A2A_LL); }
static int sup_bcll(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_BC_LL); }
static int sup_os(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AR_ONESHOT); }
static int sup_rsag(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AR_RSAG); }
static int sup_agos(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AG_ONESHOT); }
static int sup_agring(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_AG_RING); }
static int sup_rsos(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_RS_ONESHOT); }
static int sup_rsring(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_RS_RING); }
static int sup_redos(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_RED_ONESHOT); }
static int sup_redring(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_RED_RING); }
static int sup_bcos(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_BC_ONESHOT); }
static int sup_bcring(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_BC_RING); }
static int sup_a2aos(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_A2A_ONESHOT); }
static int sup_a2aring(void *s, const struct weft_coll_args *a) { return supports_kind(s, a, WAG_A2A_RING); }

static uint32_t os_blocks(const struct wag_ctx *c, uint64_t bytes)
{
	uint32_t nb = wag_segments(bytes, (uint32_t)wag_cfg.oneshot_blocks, wag_cfg.min_seg);
	return nb > c->lay.maxb ? c->lay.maxb : nb;
}

static uint32_t cap_blocks(const struct wag_ctx *c, int64_t want)
{
	return (uint32_t)want < c->lay.maxb ? (uint32_t)want : c->lay.maxb;
}

/* A pre-multiplied sum: this rank's input times its scalar goes where the
 * sum then reads it (the output itself for allreduce and on reduce's root,
 * else stream-ordered memory of the call's stream, which premul_end frees
 * after the call on that stream: capturable, and where it cannot be shared
 * the ranks fall back together as for any such buffer), and the algorithm
 * then runs a plain sum on it, in its usual order. */
int wag_premul_begin(struct wag_ctx *c, const struct weft_coll_args *a, struct weft_coll_args *b, void **tmp)
{
	char err[256] = "";
	size_t es = wag_esize(a->dtype);
	uint64_t n = a->coll == WEFT_COLL_REDUCE_SCATTER ? a->count * (uint64_t)c->nranks : a->count;
	*b = *a;
	b->op = WEFT_SUM;
	*tmp = NULL;
	void *dst = a->recvbuf;
	int rc = wag_cuda_set_device(c->dev);
	if (rc == 0 && (a->coll == WEFT_COLL_REDUCE_SCATTER || (a->coll == WEFT_COLL_REDUCE && c->rank != a->root))) {
		rc = wag_cuda_alloc_async(tmp, n * es, a->stream, err, sizeof(err));
		dst = *tmp;
	}
	uint64_t bits = 0;
	memcpy(&bits, a->scalar_host, sizeof(bits));
	if (rc == 0)
		rc = wag_launch_premul((int)a->dtype, a->sendbuf, dst, n,
				       a->scalar_mem == WEFT_MEM_HOST ? NULL : a->scalar_dev, bits,
				       c->lay.maxb ? c->lay.maxb : 1, a->stream, err, sizeof(err));
	if (rc) {
		WAG_LOG(WEFT_LOG_ERROR, "pre-multiplied sum: %s", err[0] ? err : wag_errname(rc));
		if (*tmp)
			wag_cuda_free_async(*tmp, a->stream, err, sizeof(err));
		*tmp = NULL;
		return rc;
	}
	b->sendbuf = dst;
	return 0;
}

int wag_premul_end(const struct weft_coll_args *a, void *tmp, int rc)
{
	char err[256] = "";
	if (tmp && wag_cuda_free_async(tmp, a->stream, err, sizeof(err)) != 0) {
		WAG_LOG(WEFT_LOG_ERROR, "pre-multiplied sum: %s", err);
		if (rc == 0)
			rc = -WEFT_ERR_TRANSPORT;
	}
	return rc;
}

/* A call without a stream completes before it returns. Kernels stop early
 * when the comm is aborted or a peer dies, and the sync cannot tell that
 * apart from completion; the comm's status can, so it decides. */
int wag_sync_call(struct wag_ctx *c, char *err, size_t errlen)
{
	int rc = wag_cuda_sync_stream(NULL, err, errlen);
	if (rc == 0 && (rc = wag_sig_status(c)) != 0)
		snprintf(err, errlen, "the ranks' calls differ");
	else if (rc == 0 && (rc = c->prim->comm_status(c->comm)) != 0)
		snprintf(err, errlen, "the call stopped early: %s", wag_errname(rc));
	return rc;
}

uint64_t wag_call_sig(const struct weft_coll_args *a)
{
	return a->size >= offsetof(struct weft_coll_args, sig) + sizeof(a->sig) ? a->sig : 0;
}

const uint64_t *wag_call_p2p_sig(const struct weft_coll_args *a)
{
	int has = a->size >= offsetof(struct weft_coll_args, p2p_sig) + sizeof(a->p2p_sig);
	return has && a->sig ? a->p2p_sig : NULL;
}

void wag_sig_report(struct wag_ctx *c, int peer, uint64_t mine, uint64_t theirs)
{
	char m[128], t[128];
	const char *field = weft_kit_sig_diff(mine, theirs);
	weft_kit_sig_describe(mine, m, sizeof(m));
	weft_kit_sig_describe(theirs, t, sizeof(t));
	WAG_LOG(WEFT_LOG_ERROR, "rank %d's call differs from rank %d's: %s there, %s here: the %s differs", peer, c->rank,
		t, m, field ? field : "signature");
}

/* The kernels write words 1 and 2 before word 0 (kernels.cu, sig_check). */
int wag_sig_status(struct wag_ctx *c)
{
	if (!c->sigerr)
		return 0;
	uint64_t theirs = __atomic_load_n(&c->sigerr[0], __ATOMIC_ACQUIRE);
	if (!theirs)
		return 0;
	if (!c->sig_logged) {
		c->sig_logged = 1;
		wag_sig_report(c, (int)__atomic_load_n(&c->sigerr[2], __ATOMIC_RELAXED),
			       __atomic_load_n(&c->sigerr[1], __ATOMIC_RELAXED), theirs);
	}
	return -WEFT_ERR_MISMATCH;
}

int wag_run(struct wag_ctx *c, const struct weft_coll_args *a, enum wag_kind k)
{
	int rc = supports_kind(c, a, k);
	if (rc) {
		WAG_LOG(WEFT_LOG_ERROR, "%s cannot serve %zu elements of datatype %d (op %d)", kind_name[k], a->count,
			(int)a->dtype, (int)a->op);
		return rc;
	}
	if (a->count == 0)
		return 0;
	/* A call after one whose signatures differed fails at once. */
	if ((rc = wag_sig_status(c)))
		return rc;
	if (a->op == WEFT_PREMUL_SUM) {
		struct weft_coll_args b;
		void *tmp;
		if ((rc = wag_premul_begin(c, a, &b, &tmp)))
			return rc;
		return wag_premul_end(a, tmp, wag_run(c, &b, k));
	}
	struct wag_kargs ka = c->base;
	size_t es = wag_esize(a->dtype);
	ka.dtype = (int)a->dtype;
	ka.op = (int)a->op;
	ka.in = a->sendbuf;
	ka.out = a->recvbuf;
	ka.root = a->root;
	ka.sig = wag_call_sig(a);
	ka.vec = (((uintptr_t)a->sendbuf | (uintptr_t)a->recvbuf) & 15) == 0;
	char err[256] = "";
	if ((rc = wag_cuda_set_device(c->dev)))
		return rc;
	switch (k) {
	case WAG_AR_LL:
		ka.count = a->count;
		ka.nblocks = ll_blocks(a->count * es);
		rc = wag_launch_allreduce_ll(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AG_LL:
	case WAG_A2A_LL:
	case WAG_BC_LL:
		ka.count = a->count * es;
		ka.mode = k == WAG_AG_LL ? WAG_LL_ALLGATHER : k == WAG_A2A_LL ? WAG_LL_ALLTOALL : WAG_LL_BROADCAST;
		ka.nblocks = ll_blocks(ka.count);
		rc = wag_launch_ll_move(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_RS_LL:
		ka.count = a->count;
		ka.nblocks = ll_blocks(a->count * es);
		rc = wag_launch_reduce_scatter_ll(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AR_ONESHOT:
		ka.count = a->count;
		ka.nblocks = wag_segments(a->count * es, (uint32_t)wag_cfg.oneshot_blocks, wag_cfg.min_seg);
		if (ka.nblocks > c->lay.maxb)
			ka.nblocks = c->lay.maxb;
		rc = wag_launch_allreduce_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AR_RSAG:
		ka.count = a->count;
		rc = wag_sched_init(a->count, c->nranks, c->rank, (uint32_t)es, c->lay.tile_bytes,
				    (uint32_t)wag_cfg.rsag_blocks < c->lay.maxb ? (uint32_t)wag_cfg.rsag_blocks : c->lay.maxb, &ka.s);
		if (rc == 0)
			rc = wag_launch_allreduce_rsag(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AG_ONESHOT:
		/* Allgather moves bytes: no datatype needed past the size. */
		ka.count = a->count * es;
		ka.vec = 0;
		ka.nblocks = wag_segments(ka.count, (uint32_t)wag_cfg.oneshot_blocks, wag_cfg.min_seg);
		if (ka.nblocks > c->lay.maxb)
			ka.nblocks = c->lay.maxb;
		rc = wag_launch_allgather_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AG_RING:
		ka.count = a->count * es;
		ka.vec = 0;
		rc = wag_sched_init(ka.count, 1, 0, 1, c->lay.tile_bytes,
				    (uint32_t)wag_cfg.ag_blocks < c->lay.maxb ? (uint32_t)wag_cfg.ag_blocks : c->lay.maxb, &ka.s);
		if (rc == 0)
			rc = wag_launch_allgather_ring(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_RS_ONESHOT:
		/* count is one rank's block: every block must start aligned too. */
		ka.count = a->count;
		ka.vec = ka.vec && (a->count * es) % 16 == 0;
		ka.nblocks = os_blocks(c, a->count * es);
		rc = wag_launch_reduce_scatter_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_RS_RING:
		ka.count = a->count;
		ka.vec = ka.vec && (a->count * es) % 16 == 0;
		rc = wag_sched_init(a->count, 1, 0, (uint32_t)es, c->lay.tile_bytes, cap_blocks(c, wag_cfg.rsag_blocks), &ka.s);
		if (rc == 0)
			rc = wag_launch_reduce_scatter_ring(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_RED_ONESHOT:
		ka.count = a->count;
		ka.nblocks = os_blocks(c, a->count * es);
		rc = wag_launch_reduce_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_RED_RING:
		ka.count = a->count;
		rc = wag_sched_init(a->count, 1, 0, (uint32_t)es, c->lay.tile_bytes, cap_blocks(c, wag_cfg.rsag_blocks), &ka.s);
		if (rc == 0)
			rc = wag_launch_reduce_ring(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_BC_ONESHOT:
		ka.count = a->count * es;
		ka.vec = 0;
		ka.nblocks = os_blocks(c, ka.count);
		rc = wag_launch_broadcast_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_BC_RING:
		ka.count = a->count * es;
		ka.vec = 0;
		rc = wag_sched_init(ka.count, 1, 0, 1, c->lay.tile_bytes, cap_blocks(c, wag_cfg.ag_blocks), &ka.s);
		if (rc == 0)
			rc = wag_launch_broadcast_ring(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_A2A_ONESHOT:
		ka.count = a->count * es;
		ka.vec = 0;
		ka.nblocks = os_blocks(c, ka.count);
		rc = wag_launch_alltoall_oneshot(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_A2A_RING:
		ka.count = a->count * es;
		ka.vec = 0;
		rc = wag_sched_init(ka.count, 1, 0, 1, c->lay.tile_bytes, cap_blocks(c, wag_cfg.ag_blocks), &ka.s);
		if (rc == 0)
			rc = wag_launch_alltoall_ring(&ka, a->stream, err, sizeof(err));
		break;
	case WAG_AR_CE:
	case WAG_RS_CE:
	case WAG_AG_CE:
	case WAG_BC_CE:
	case WAG_A2A_CE:
	case WAG_AR_DIRECT:
	case WAG_RS_DIRECT:
	case WAG_AG_DIRECT:
	case WAG_BC_DIRECT:
	case WAG_A2A_DIRECT:
		/* ce.c's: they run on the callers' buffers, through wag_ce_run. */
		rc = -EINVAL;
		break;
	}
	if (rc == 0 && !a->stream)
		rc = wag_sync_call(c, err, sizeof(err));
	if (rc)
		WAG_LOG(WEFT_LOG_ERROR, "%s", err[0] ? err : wag_errname(rc));
	return rc;
}

static int ex_ll(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AR_LL); }
/* The copy-engine algorithms and the kernel algorithm each falls back to
 * where a rank's buffers cannot be shared (staging through the scratch). */
static int ex_ce(void *s, const struct weft_coll_args *a, enum wag_kind k, enum wag_kind fallback)
{
	int rc = supports_kind(s, a, fallback);
	if (rc) {
		WAG_LOG(WEFT_LOG_ERROR, "%s cannot serve %zu elements of datatype %d (op %d)", kind_name[k], a->count,
			(int)a->dtype, (int)a->op);
		return rc;
	}
	if (!a->count)
		return 0;
	if (a->op == WEFT_PREMUL_SUM) {
		struct weft_coll_args b;
		void *tmp;
		if ((rc = wag_premul_begin(s, a, &b, &tmp)))
			return rc;
		return wag_premul_end(a, tmp, wag_ce_run(s, &b, k, fallback));
	}
	return wag_ce_run(s, a, k, fallback);
}
static int ex_arce(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_AR_CE, WAG_AR_RSAG); }
static int ex_rsce(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_RS_CE, WAG_RS_RING); }
static int ex_agce(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_AG_CE, WAG_AG_RING); }
static int ex_bcce(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_BC_CE, WAG_BC_RING); }
static int ex_a2ace(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_A2A_CE, WAG_A2A_RING); }
static int ex_ardirect(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_AR_DIRECT, WAG_AR_RSAG); }
static int ex_rsdirect(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_RS_DIRECT, WAG_RS_RING); }
static int ex_agdirect(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_AG_DIRECT, WAG_AG_RING); }
static int ex_bcdirect(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_BC_DIRECT, WAG_BC_RING); }
static int ex_a2adirect(void *s, const struct weft_coll_args *a) { return ex_ce(s, a, WAG_A2A_DIRECT, WAG_A2A_RING); }
static int ex_agll(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AG_LL); }
static int ex_rsll(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_RS_LL); }
static int ex_a2all(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_A2A_LL); }
static int ex_bcll(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_BC_LL); }
static int ex_os(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AR_ONESHOT); }
static int ex_rsag(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AR_RSAG); }
static int ex_agos(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AG_ONESHOT); }
static int ex_agring(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_AG_RING); }
static int ex_rsos(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_RS_ONESHOT); }
static int ex_rsring(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_RS_RING); }
static int ex_redos(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_RED_ONESHOT); }
static int ex_redring(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_RED_RING); }
static int ex_bcos(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_BC_ONESHOT); }
static int ex_bcring(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_BC_RING); }
static int ex_a2aos(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_A2A_ONESHOT); }
static int ex_a2aring(void *s, const struct weft_coll_args *a) { return wag_run(s, a, WAG_A2A_RING); }

/* ---------------------------------------------------------- send/recv
 * A batch (struct weft_p2p_op, plugin.h) becomes one kernel: sends and
 * receives keep the batch order per peer; a send to this rank itself pairs
 * with its receive from itself in order, as a device copy. */

static int sup_p2p(void *state, const struct weft_coll_args *a)
{
	struct wag_ctx *c = state;
	const struct weft_p2p_op *ops = a->sendbuf;
	if (!c->mesh || a->mem_type != WEFT_MEM_CUDA || !ops || a->count == 0)
		return -ENOTSUP;
	/* Refusals the core then reports as "no algorithm serves": say why here. */
	if (a->count > WAG_P2P_MAX_OPS) {
		WAG_LOG(WEFT_LOG_WARN, "sendrecv-ring: a batch of %zu sends and receives exceeds its %d entries", a->count,
			WAG_P2P_MAX_OPS);
		return -ENOTSUP;
	}
	for (size_t i = 0; i < a->count; i++)
		if (ops[i].peer < 0 || ops[i].peer >= c->nranks || !ops[i].buf || !wag_cuda_is_device_ptr(ops[i].buf)) {
			WAG_LOG(WEFT_LOG_WARN, "sendrecv-ring: entry %zu (peer %d) is not a CUDA device buffer of a rank of "
					       "the communicator", i, ops[i].peer);
			return -ENOTSUP;
		}
	return 0;
}

static int ex_p2p(void *state, const struct weft_coll_args *a)
{
	struct wag_ctx *c = state;
	const struct weft_p2p_op *ops = a->sendbuf;
	size_t nops = a->count;
	if (sup_p2p(state, a)) {
		WAG_LOG(WEFT_LOG_ERROR,
			"sendrecv-ring serves batches of 1 to %d sends and receives on CUDA device buffers of valid peers; "
			"this one has %zu (or a buffer that is not device memory)",
			WAG_P2P_MAX_OPS, nops);
		return -ENOTSUP;
	}
	int rc = wag_sig_status(c);
	if (rc)
		return rc;
	const uint64_t *psig = wag_call_p2p_sig(a);
	/* A send whose bytes a receive of the same batch overwrites ("in place";
	 * NCCL leaves it undefined): the peer's data would land while this rank
	 * still reads them, so that send reads a stream-ordered copy taken before
	 * the kernel (freed after it; both capturable). A copy to itself onto its
	 * own source needs none (nothing moves). */
	char *tmp[WAG_P2P_MAX_OPS] = {NULL};
	unsigned char dup[WAG_P2P_MAX_OPS] = {0};
	int ndup = 0;
	for (size_t j = 0; j < nops; j++) {
		const char *s0 = ops[j].buf, *s1 = s0 + ops[j].bytes;
		if (!ops[j].is_send || !ops[j].bytes)
			continue;
		for (size_t i = 0; i < nops && !dup[j]; i++) {
			const char *r0 = ops[i].buf, *r1 = r0 + ops[i].bytes;
			if (ops[i].is_send || !ops[i].bytes || r1 <= s0 || s1 <= r0 ||
			    (ops[i].peer == c->rank && ops[j].peer == c->rank && r0 == s0))
				continue;
			dup[j] = 1;
			ndup++;
		}
	}
	struct wag_p2p_args p;
	memset(&p, 0, sizeof(p));
	int tx[WAG_MAX_RANKS] = {0}, rx[WAG_MAX_RANKS] = {0}, self = 0;
	int from[WAG_P2P_MAX_OPS]; /* the batch entry of each kernel entry (its send side) */
	size_t si = 0, ri = 0;
	for (size_t i = 0; i < nops; i++) {
		const struct weft_p2p_op *o = &ops[i];
		if (o->peer != c->rank) {
			p.ops[p.nops] = (struct wag_p2p_op){
				.buf = o->buf, .src = NULL, .bytes = o->bytes, .sig = psig ? psig[i] : 0,
				.peer = o->peer, .kind = o->is_send ? WAG_P2P_SEND : WAG_P2P_RECV,
			};
			from[p.nops++] = (int)i;
			*(o->is_send ? &tx[o->peer] : &rx[o->peer]) = 1;
			continue;
		}
		if (!o->is_send)
			continue;
		/* The k-th send to itself meets the k-th receive from itself. */
		while (ri < nops && (ops[ri].peer != c->rank || ops[ri].is_send))
			ri++;
		if (ri == nops || ops[ri].bytes != o->bytes) {
			WAG_LOG(WEFT_LOG_ERROR, "sendrecv: the sends of rank %d to itself do not match its receives "
						"from itself (count or sizes)", c->rank);
			return -EINVAL;
		}
		p.ops[p.nops] = (struct wag_p2p_op){
			.buf = ops[ri].buf, .src = o->buf, .bytes = o->bytes, .peer = c->rank, .kind = WAG_P2P_SELF,
		};
		from[p.nops++] = (int)i;
		ri++;
		si++;
		self = 1;
	}
	size_t nrecv_self = 0;
	for (size_t i = 0; i < nops; i++)
		nrecv_self += ops[i].peer == c->rank && !ops[i].is_send;
	if (nrecv_self != si) {
		WAG_LOG(WEFT_LOG_ERROR, "sendrecv: rank %d receives from itself %zu times but sends to itself %zu times",
			c->rank, nrecv_self, si);
		return -EINVAL;
	}
	for (int q = 0; q < c->nranks; q++) {
		if (tx[q]) {
			p.ch_peer[p.nch] = q;
			p.ch_kind[p.nch++] = WAG_P2P_SEND;
		}
		if (rx[q]) {
			p.ch_peer[p.nch] = q;
			p.ch_kind[p.nch++] = WAG_P2P_RECV;
		}
	}
	if (self) {
		p.ch_peer[p.nch] = c->rank;
		p.ch_kind[p.nch++] = WAG_P2P_SELF;
	}
	char err[256] = "";
	if ((rc = wag_cuda_set_device(c->dev)))
		return rc;
	for (size_t j = 0; j < nops && rc == 0; j++) {
		void *t = NULL;
		if (!dup[j] || (rc = wag_cuda_alloc_async(&t, ops[j].bytes, a->stream, err, sizeof(err))))
			continue;
		tmp[j] = t;
		rc = wag_cuda_copy(t, ops[j].buf, ops[j].bytes, a->stream, err, sizeof(err));
	}
	if (ndup && rc == 0)
		WAG_LOG(WEFT_LOG_DEBUG, "sendrecv: %d send(s) of rank %d overlap a receive of the same group: sent from "
					"a copy", ndup, c->rank);
	for (uint32_t k = 0; k < p.nops; k++) {
		char *t = tmp[from[k]];
		if (t && p.ops[k].kind == WAG_P2P_SELF)
			p.ops[k].src = t;
		else if (t && p.ops[k].kind == WAG_P2P_SEND)
			p.ops[k].buf = t;
	}
	if (rc == 0)
		rc = wag_launch_p2p(&c->base, &p, a->stream, err, sizeof(err));
	for (size_t j = 0; j < nops; j++) {
		char e2[256];
		if (tmp[j] && wag_cuda_free_async(tmp[j], a->stream, e2, sizeof(e2)))
			WAG_LOG(WEFT_LOG_WARN, "sendrecv: releasing a send's copy: %s", e2);
	}
	if (rc == 0 && !a->stream)
		rc = wag_sync_call(c, err, sizeof(err));
	if (rc)
		WAG_LOG(WEFT_LOG_ERROR, "%s", err[0] ? err : wag_errname(rc));
	return rc;
}

static int wag_setup(const struct weft_algo_comm *ac, void **state)
{
	if (ac->size < offsetof(struct weft_algo_comm, pack_state) + sizeof(ac->pack_state) || !ac->pack_state)
		return -EINVAL;
	*state = ac->pack_state;
	return 0;
}

#define WAG_ALGO(var, nm, cl, prio, sup, fn)                                            \
	static struct weft_algo var = {                                                 \
		.size = sizeof(struct weft_algo),                                       \
		.name = nm,                                                             \
		.coll = cl,                                                             \
		.min_bytes = 0,                                                         \
		.max_bytes = 0,                                                         \
		.min_ranks = 2,                                                         \
		.max_ranks = WAG_MAX_RANKS,                                             \
		.mem_types = 1u << WEFT_MEM_CUDA,                                       \
		.priority = prio,                                                       \
		.setup = wag_setup,                                                     \
		.supports = sup,                                                        \
		.execute = fn,                                                          \
		.teardown = NULL,                                                       \
		.redops = WAG_REDOPS,                                                   \
		.max_hosts = 1, /* the kernels map every peer's scratch */              \
	}

/* Every reduction, the pre-multiplied sum included (premul_begin). */
#define WAG_REDOPS                                                                        \
	((1u << WEFT_SUM) | (1u << WEFT_PROD) | (1u << WEFT_MIN) | (1u << WEFT_MAX) | (1u << WEFT_AVG) | \
	 (1u << WEFT_PREMUL_SUM))

WAG_ALGO(algo_ll, "allreduce-ll", WEFT_COLL_ALLREDUCE, 30, sup_ll, ex_ll);
WAG_ALGO(algo_arce, "allreduce-ce", WEFT_COLL_ALLREDUCE, 40, sup_rsag, ex_arce);
WAG_ALGO(algo_rsce, "reduce-scatter-ce", WEFT_COLL_REDUCE_SCATTER, 40, sup_rsring, ex_rsce);
WAG_ALGO(algo_agce, "allgather-ce", WEFT_COLL_ALLGATHER, 40, sup_agring, ex_agce);
WAG_ALGO(algo_bcce, "broadcast-ce", WEFT_COLL_BROADCAST, 40, sup_bcring, ex_bcce);
WAG_ALGO(algo_a2ace, "alltoall-ce", WEFT_COLL_ALLTOALL, 40, sup_a2aring, ex_a2ace);
WAG_ALGO(algo_ardirect, "allreduce-direct", WEFT_COLL_ALLREDUCE, 35, sup_rsag, ex_ardirect);
WAG_ALGO(algo_rsdirect, "reduce-scatter-direct", WEFT_COLL_REDUCE_SCATTER, 35, sup_rsring, ex_rsdirect);
WAG_ALGO(algo_agdirect, "allgather-direct", WEFT_COLL_ALLGATHER, 35, sup_agring, ex_agdirect);
WAG_ALGO(algo_bcdirect, "broadcast-direct", WEFT_COLL_BROADCAST, 35, sup_bcring, ex_bcdirect);
WAG_ALGO(algo_a2adirect, "alltoall-direct", WEFT_COLL_ALLTOALL, 35, sup_a2aring, ex_a2adirect);
WAG_ALGO(algo_agll, "allgather-ll", WEFT_COLL_ALLGATHER, 30, sup_agll, ex_agll);
WAG_ALGO(algo_rsll, "reduce-scatter-ll", WEFT_COLL_REDUCE_SCATTER, 30, sup_rsll, ex_rsll);
WAG_ALGO(algo_a2all, "alltoall-ll", WEFT_COLL_ALLTOALL, 30, sup_a2all, ex_a2all);
WAG_ALGO(algo_bcll, "broadcast-ll", WEFT_COLL_BROADCAST, 30, sup_bcll, ex_bcll);
WAG_ALGO(algo_os, "allreduce-oneshot", WEFT_COLL_ALLREDUCE, 20, sup_os, ex_os);
WAG_ALGO(algo_rsag, "allreduce-rsag", WEFT_COLL_ALLREDUCE, 10, sup_rsag, ex_rsag);
WAG_ALGO(algo_agos, "allgather-oneshot", WEFT_COLL_ALLGATHER, 20, sup_agos, ex_agos);
WAG_ALGO(algo_agring, "allgather-ring", WEFT_COLL_ALLGATHER, 10, sup_agring, ex_agring);
WAG_ALGO(algo_rsos, "reduce-scatter-oneshot", WEFT_COLL_REDUCE_SCATTER, 20, sup_rsos, ex_rsos);
WAG_ALGO(algo_rsring, "reduce-scatter-ring", WEFT_COLL_REDUCE_SCATTER, 10, sup_rsring, ex_rsring);
WAG_ALGO(algo_redos, "reduce-oneshot", WEFT_COLL_REDUCE, 20, sup_redos, ex_redos);
WAG_ALGO(algo_redring, "reduce-ring", WEFT_COLL_REDUCE, 10, sup_redring, ex_redring);
WAG_ALGO(algo_bcos, "broadcast-oneshot", WEFT_COLL_BROADCAST, 20, sup_bcos, ex_bcos);
WAG_ALGO(algo_bcring, "broadcast-ring", WEFT_COLL_BROADCAST, 10, sup_bcring, ex_bcring);
WAG_ALGO(algo_a2aos, "alltoall-oneshot", WEFT_COLL_ALLTOALL, 20, sup_a2aos, ex_a2aos);
WAG_ALGO(algo_a2aring, "alltoall-ring", WEFT_COLL_ALLTOALL, 10, sup_a2aring, ex_a2aring);
WAG_ALGO(algo_p2p, "sendrecv-ring", WEFT_COLL_SENDRECV, 10, sup_p2p, ex_p2p);

/* The cross-host algorithms (xhost.c): any number of hosts, up to 64 ranks
 * and 8 a host; below every kernel algorithm, so they serve where the mesh
 * cannot (the kernels decline there). */
static int sup_xh(void *s, const struct weft_coll_args *a) { return wag_xh_supports(s, a); }
static int ex_xh(void *s, const struct weft_coll_args *a) { return wag_xh_run(s, a); }
#define WAG_XH_ALGO(var, nm, cl)                                                  \
	static struct weft_algo var = {                                           \
		.size = sizeof(struct weft_algo),                                 \
		.name = nm,                                                       \
		.coll = cl,                                                       \
		.min_ranks = 2,                                                   \
		.max_ranks = WAG_HIER_MAX_RANKS,                                  \
		.mem_types = 1u << WEFT_MEM_CUDA,                                 \
		.priority = 5,                                                    \
		.setup = wag_setup,                                               \
		.supports = sup_xh,                                               \
		.execute = ex_xh,                                                 \
		.redops = WAG_REDOPS,                                             \
		.max_hosts = 0,                                                   \
	}
WAG_XH_ALGO(algo_xh_ar, "allreduce-hier", WEFT_COLL_ALLREDUCE);
WAG_XH_ALGO(algo_xh_rs, "reduce-scatter-hier", WEFT_COLL_REDUCE_SCATTER);
WAG_XH_ALGO(algo_xh_ag, "allgather-hier", WEFT_COLL_ALLGATHER);
WAG_XH_ALGO(algo_xh_bc, "broadcast-hier", WEFT_COLL_BROADCAST);
WAG_XH_ALGO(algo_xh_red, "reduce-hier", WEFT_COLL_REDUCE);
WAG_XH_ALGO(algo_xh_a2a, "alltoall-hier", WEFT_COLL_ALLTOALL);
WAG_XH_ALGO(algo_xh_p2p, "sendrecv-hier", WEFT_COLL_SENDRECV);

static const struct weft_algo *const wag_algos[] = {
	&algo_ll,    &algo_agll,  &algo_rsll,   &algo_a2all,   &algo_bcll,   &algo_os,    &algo_rsag,    &algo_agos,    &algo_agring,  &algo_rsos,  &algo_rsring,
	&algo_redos, &algo_redring, &algo_bcos, &algo_bcring, &algo_a2aos, &algo_a2aring, &algo_p2p,
	&algo_arce,  &algo_rsce,   &algo_agce,  &algo_bcce,   &algo_a2ace,
	&algo_ardirect, &algo_rsdirect, &algo_agdirect, &algo_bcdirect, &algo_a2adirect,
	&algo_xh_ar, &algo_xh_rs, &algo_xh_ag, &algo_xh_bc, &algo_xh_red, &algo_xh_a2a, &algo_xh_p2p, NULL};

static const struct weft_algo_ops wag_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = wag_algos,
	.comm_setup = wag_comm_setup,
	.comm_teardown = wag_comm_teardown,
	.window_register = wag_win_register,
	.window_deregister = wag_win_deregister,
};

static const struct weft_plugin_desc wag_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = WAG_NAME,
	.ops = &wag_ops,
};

static const struct weft_plugin_desc *const wag_descs[] = {&wag_desc, NULL};

/* The pack's parameters, each bound to its field of wag_cfg. */
#define S(key, field, def, help) WEFT_KIT_P_SIZE(key, struct wag_cfg, field, def, 0, UINT64_MAX, help)
#define I(key, field, lo, hi, def, help) WEFT_KIT_P_INT(key, struct wag_cfg, field, def, lo, hi, help)
static const struct weft_kit_param wag_params[] = {
	S("ll_max", ll_max, "64K", "Largest allreduce (bytes) the LL-packet algorithm serves; 0 turns it off."),
	S("ll_exchange_max", llx_max, "128K",
	  "Largest message per peer (one rank's block, bytes) of the LL-packet allgather, reduce-scatter and "
	  "alltoall, and largest broadcast of the LL-packet one; 0 turns them off."),
	S("oneshot_max", oneshot_max, "16M",
	  "Largest allreduce (bytes) the one-shot algorithm serves; larger ones use reduce-scatter + allgather. "
	  "Scratch holds 2 x ranks x this."),
	S("allgather_oneshot_max", ag_oneshot_max, "1M",
	  "Largest allgather (output bytes) the one-shot algorithm serves; larger ones use the ring."),
	/* Below the copy-engine minimums the direct kernels are faster
	 * (reduce-scatter: at every size measured, so off); the direct ones are
	 * where they overtake the LL and one-shot algorithms (docs/perf, two H200s). */
	S("ce_allreduce_min", ce_min[WEFT_COLL_ALLREDUCE], "256M",
	  "Smallest allreduce (bytes) moved by the copy engines (allreduce-ce); 0 turns it off."),
	S("ce_reduce_scatter_min", ce_min[WEFT_COLL_REDUCE_SCATTER], "0",
	  "Smallest reduce-scatter (input bytes) moved by the copy engines; 0 (the default: the direct kernel "
	  "was faster at every size measured) turns it off."),
	S("ce_allgather_min", ce_min[WEFT_COLL_ALLGATHER], "512M",
	  "Smallest allgather (output bytes) moved by the copy engines; 0 turns it off."),
	S("ce_broadcast_min", ce_min[WEFT_COLL_BROADCAST], "512M",
	  "Smallest broadcast (bytes) moved by the copy engines; 0 turns it off."),
	S("ce_alltoall_min", ce_min[WEFT_COLL_ALLTOALL], "512M",
	  "Smallest alltoall (bytes per rank) moved by the copy engines; 0 turns it off."),
	S("direct_allreduce_min", direct_min[WEFT_COLL_ALLREDUCE], "2M",
	  "Smallest allreduce (bytes) served by the direct kernel (GPU threads read and write the peers' buffers "
	  "of the call, registered once per set of buffers); 0 turns it off."),
	S("direct_reduce_scatter_min", direct_min[WEFT_COLL_REDUCE_SCATTER], "2M",
	  "Smallest reduce-scatter (input bytes) served by the direct kernel; 0 turns it off."),
	S("direct_allgather_min", direct_min[WEFT_COLL_ALLGATHER], "2M",
	  "Smallest allgather (output bytes) served by the direct kernel; 0 turns it off."),
	S("direct_broadcast_min", direct_min[WEFT_COLL_BROADCAST], "4M",
	  "Smallest broadcast (bytes) served by the direct kernel; 0 turns it off."),
	S("direct_alltoall_min", direct_min[WEFT_COLL_ALLTOALL], "1M",
	  "Smallest alltoall (bytes per rank) served by the direct kernel; 0 turns it off."),
	I("direct_blocks", direct_blocks, 1, 1024, "64",
	  "Most CUDA blocks of the direct data movers (allgather, broadcast, alltoall)."),
	I("direct_reduce_blocks", direct_reduce_blocks, 1, 1024, "64",
	  "Most CUDA blocks of the direct reductions (allreduce, reduce-scatter). Each takes a whole multiprocessor "
	  "(118 registers a thread): two such kernels running at once on one GPU (ranks sharing a GPU, two "
	  "communicators) must fit together, so a call never takes more than half the multiprocessors."),
	S("ce_chunk", ce_chunk, "16M",
	  "Largest pipeline chunk (bytes) of the copy-engine allreduce and reduce-scatter (a multiple of 64K)."),
	I("ce_allreduce_push", ce_allreduce_push, 0, 1, "0",
	  "1: allreduce-ce on two ranks moves everything by pushes (each rank's copy engine writes the peer's block "
	  "of its input into the peer's output, which the peer reduces in place, then writes the result back); 0: "
	  "each rank pulls its block of the peer's input. More ranks always pull."),
	S("hier_chunk", hier_chunk, "1M",
	  "Bytes per ring slot of the cross-host algorithms (*-hier): each piece of a move between two ranks that "
	  "cannot map each other's GPUs crosses in slots of this size (a multiple of 16)."),
	I("hier_depth", hier_depth, 1, 64, "4",
	  "Ring slots per peer and direction of the cross-host algorithms: pieces in flight to one peer."),
	S("hier_tree_max", hier_tree_max, "64K",
	  "Largest allreduce (bytes) the cross-host algorithms run as binomial trees between hosts (latency); "
	  "larger ones use rings (bandwidth)."),
	I("oneshot_blocks", oneshot_blocks, 1, 1024, "32", "Most CUDA blocks of the one-shot kernels."),
	S("oneshot_min_segment", min_seg, "16K", "Fewest bytes per CUDA block in the one-shot kernels."),
	I("rsag_blocks", rsag_blocks, 1, 1024, "64", "CUDA blocks of the reduce-scatter + allgather allreduce."),
	I("allgather_blocks", ag_blocks, 1, 1024, "64", "CUDA blocks of the ring allgather."),
	S("tile", tile, "64K", "Bytes per pipeline tile (one ring slot) of the large-message kernels."),
	I("depth", depth, 2, 16, "4", "Ring slots per peer and CUDA block (2 to 16)."),
	I("p2p_blocks", p2p_blocks, 1, 1024, "64",
	  "CUDA blocks per peer and direction of a send/recv batch (fewer where the blocks of every channel would "
	  "not fit one a multiprocessor: sms / (2 * ranks - 1))."),
	S("p2p_ll_max", p2p_ll_max, "256K",
	  "Largest send/recv entry (bytes) moved as LL packets (data and flag in one store: no handshake per tile); "
	  "0 turns LL off."),
	S("p2p_tile", p2p_tile, "256K",
	  "Bytes per ring slot of a send/recv channel: an entry of at least p2p_tile times the channel's blocks moves "
	  "in tiles of this size, a smaller one spread over the blocks in tiles of at most `tile` bytes."),
};
#undef S
#undef I

/* Each collective's algorithm of one family serves calls of mins[coll]
 * selection bytes and more; 0 (and a collective without a threshold) turns
 * it off. */
static void set_mins(struct weft_algo *const algos[WEFT_COLL_COUNT], const uint64_t mins[WEFT_COLL_COUNT])
{
	for (int i = 0; i < WEFT_COLL_COUNT; i++) {
		if (!algos[i])
			continue;
		algos[i]->min_bytes = mins[i];
		algos[i]->mem_types = mins[i] ? 1u << WEFT_MEM_CUDA : 0;
	}
}

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	wag_core = core;
	if (weft_kit_params_declare(core, WAG_NAME, wag_params, WEFT_KIT_NROWS(wag_params)) < 0)
		return NULL; /* logged, naming the parameter */
	/* Every value comes from its row in wag_params (or the environment and
	 * config file over it): the defaults live there only. */
	if (weft_kit_params_load(core, WAG_NAME, wag_params, WEFT_KIT_NROWS(wag_params), &wag_cfg) < 0) {
		WAG_LOG(WEFT_LOG_ERROR, "the pack declines to load");
		return NULL;
	}
	struct weft_algo *const ce[WEFT_COLL_COUNT] = {
		[WEFT_COLL_ALLREDUCE] = &algo_arce, [WEFT_COLL_REDUCE_SCATTER] = &algo_rsce,
		[WEFT_COLL_ALLGATHER] = &algo_agce, [WEFT_COLL_BROADCAST] = &algo_bcce, [WEFT_COLL_ALLTOALL] = &algo_a2ace,
	};
	struct weft_algo *const direct[WEFT_COLL_COUNT] = {
		[WEFT_COLL_ALLREDUCE] = &algo_ardirect, [WEFT_COLL_REDUCE_SCATTER] = &algo_rsdirect,
		[WEFT_COLL_ALLGATHER] = &algo_agdirect, [WEFT_COLL_BROADCAST] = &algo_bcdirect,
		[WEFT_COLL_ALLTOALL] = &algo_a2adirect,
	};
	set_mins(ce, wag_cfg.ce_min);
	set_mins(direct, wag_cfg.direct_min);
	if (wag_cfg.ce_chunk < (64 << 10) || wag_cfg.ce_chunk % (64 << 10)) {
		WAG_LOG(WEFT_LOG_ERROR, "%s.ce_chunk must be a multiple of 64K; the pack declines to load", WAG_NAME);
		return NULL;
	}
	if (wag_cfg.hier_chunk < 4096 || wag_cfg.hier_chunk % 16 || wag_cfg.hier_chunk > (256ull << 20)) {
		WAG_LOG(WEFT_LOG_ERROR, "%s.hier_chunk must be a multiple of 16 bytes from 4K to 256M; the pack declines "
					"to load", WAG_NAME);
		return NULL;
	}
	if (wag_cfg.tile < 256 || wag_cfg.tile % 16 || wag_cfg.p2p_tile % 16 || wag_cfg.p2p_tile > (64ull << 20) ||
	    wag_cfg.p2p_ll_max > (1ull << 20) || wag_cfg.ll_max > (64ull << 20) || wag_cfg.llx_max > (64ull << 20)) {
		WAG_LOG(WEFT_LOG_ERROR, "algo-gpu.tile must be a multiple of 16 bytes, at least 256; p2p_tile a multiple "
				       "of 16 bytes, at most 64M; p2p_ll_max at most 1M (its LL slots grow with it); "
				       "and ll_max and ll_exchange_max at most 64M; the pack declines to load");
		return NULL;
	}
	/* Each algorithm serves the sizes its threshold gives it; a threshold of 0
	 * turns the smaller algorithm off. */
	if (wag_cfg.ll_max == 0)
		algo_ll.mem_types = 0;
	algo_ll.max_bytes = wag_cfg.ll_max;
	if (wag_cfg.llx_max == 0)
		algo_agll.mem_types = algo_rsll.mem_types = algo_a2all.mem_types = algo_bcll.mem_types = 0;
	/* A broadcast's selection bytes are its vector: the message itself. */
	algo_bcll.max_bytes = wag_cfg.llx_max;
	/* Their selection bytes are ranks x the message per peer: exact for two
	 * ranks, and supports() refuses a larger message with more. */
	algo_agll.max_bytes = algo_rsll.max_bytes = algo_a2all.max_bytes = 2 * wag_cfg.llx_max;
	if (wag_cfg.oneshot_max == 0)
		algo_os.mem_types = 0;
	algo_os.max_bytes = wag_cfg.oneshot_max;
	if (wag_cfg.ag_oneshot_max == 0)
		algo_agos.mem_types = 0;
	algo_agos.max_bytes = wag_cfg.ag_oneshot_max;
	/* The rooted and reduce-scatter one-shots follow the allreduce threshold,
	 * alltoall (a data mover) the allgather one. */
	struct weft_algo *os_like[] = {&algo_rsos, &algo_redos, &algo_bcos};
	for (size_t i = 0; i < sizeof(os_like) / sizeof(os_like[0]); i++) {
		if (wag_cfg.oneshot_max == 0)
			os_like[i]->mem_types = 0;
		os_like[i]->max_bytes = wag_cfg.oneshot_max;
	}
	if (wag_cfg.ag_oneshot_max == 0)
		algo_a2aos.mem_types = 0;
	algo_a2aos.max_bytes = wag_cfg.ag_oneshot_max;
	return wag_descs;
}
