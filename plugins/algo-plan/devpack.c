/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the device half of the pack. Per communicator and plan: nvlink
 * connections to the ranks the plan reaches, a device semaphore per channel
 * (paired as the host half pairs them), a port per peer of port channels,
 * the rank's encoded plan in device memory, and input, output and scratch
 * areas in device memory that peers map. A call stages the caller's buffers
 * through the areas on its stream (or runs on them directly where no peer
 * reads them), then launches the interpreter: nothing waits on the host, so
 * calls can be captured in a CUDA graph. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>
#include <weft/kit.h>
#include <weft/plugin.h>

#include "dev.h"
#include "devpack.h"
#include "geom.h"
#include "interp.h"

#define WPD_PORT_DEPTH 256
#define WPD_LOG(d, level, ...) (d)->core->log((d)->core->self, (level), __VA_ARGS__)

struct wpd_area {
	char *p;
	weft_mem_t *mem;
	uint32_t port_id;
};

/* Areas a captured graph may still use: kept until teardown. */
struct wpd_old {
	struct wpd_old *next;
	char *p;
	weft_mem_t *mem;
	weft_rmem_t *rmem;
};

struct wpd_peer {
	int related;
	weft_conn_t *mconn; /* nvlink: memory channels, and the device tokens of every channel */
	weft_conn_t *pconn; /* port channels' connection (the core's choice for CUDA memory) */
	weft_port_t *port;
	struct weft_port_dev pdev;
	uint32_t nsem[WP_CHAN_KINDS];
	weft_sem_t **sem[WP_CHAN_KINDS];
	weft_rsem_t **rsem[WP_CHAN_KINDS];
	weft_memchan_t **mc[WP_CHAN_KINDS];
	weft_rmem_t *rmem[WP_BUF_KINDS];
	char *map[WP_BUF_KINDS];
	uint32_t rport[WP_BUF_KINDS];
};

struct wpd_comm {
	const struct weft_core_api *core;
	const struct weft_prim_api *pr;
	weft_comm_t *comm;
	const struct wp_plan *plan;
	const struct wp_rank *rk;
	const char *name;
	enum weft_collective coll;
	int rank, n, dev, ready;
	int direct;  /* no peer reads this rank's input or output, and the plan writes no input */
	int shared_io; /* some rank reaches another's input or output: those areas are exchanged */
	int uses_port;
	int flagged; /* the plan has packets or a double scratch: calls count LL flags */
	int captured; /* a graph captured a call on the current areas */
	struct wpd_peer *peers;
	/* One block of device memory: the tables below, by offset. */
	char *tab;
	weft_mem_t *tabmem;
	size_t off_ops, off_tbs, off_mch, off_pch, off_ctl, off_sems, off_rbufs, off_pstate, off_refs, off_img, tab_len;
	uint32_t nops;
	uint32_t rng_cap; /* references a block resolves at its start */
	uint32_t img_stride, img_ops; /* the threadblocks' images (dev.h); stride 0: none */
	struct wpd_rbuf *h_rbufs;
	const volatile uint32_t *abort;
	struct wpd_area area[WP_BUF_KINDS];
	uint64_t (*caps)[WP_BUF_KINDS];
	uint64_t in, out;
	struct wpd_old *old;
};

static uint64_t up256(uint64_t x)
{
	return (x + 255) / 256 * 256;
}

/* Whether this rank reaches rank q through nvlink with device memory. */
static int nvlink_to(const struct weft_algo_comm *ac, int q)
{
	const struct weft_algo_peer *pe = weft_algo_peer_at(ac, q), *me = weft_algo_peer_at(ac, ac->rank);
	if (!pe || !me || ac->peer_size < offsetof(struct weft_algo_peer, dev_routes) + sizeof(pe->dev_routes) ||
	    pe->host != me->host)
		return 0;
	for (int k = 0; k < pe->ndev_routes; k++)
		if (pe->dev_routes[k].transport && !strcmp(pe->dev_routes[k].transport, "nvlink"))
			return 1;
	return 0;
}

/* The channels of either kind the pair uses. */
static int pair_channels(const struct wp_plan *p, uint32_t a, uint32_t b)
{
	return wp_pair_needs(p, a, b, WP_CHAN_MEMORY) || wp_pair_needs(p, a, b, WP_CHAN_PORT);
}

int wpd_viable(const struct weft_algo_comm *ac, const struct wp_plan *plan, const char *name)
{
	const struct weft_prim_api *pr = ac->prim;
	const struct weft_core_api *core = ac->core;
	int dev;
	if (!pr || pr->size < offsetof(struct weft_prim_api, rsem_port_id) + sizeof(pr->rsem_port_id))
		return 0;
	if (wpd_cuda_device(&dev))
		return 0; /* no CUDA device here: host buffers only, nothing to say */
	for (int q = 0; q < ac->nranks; q++)
		if (q != ac->rank && pair_channels(plan, (uint32_t)ac->rank, (uint32_t)q) && !nvlink_to(ac, q)) {
			core->log(core->self, WEFT_LOG_INFO,
				  "%s: rank %d is not reached through nvlink: the plan's channels to it need it on "
				  "device buffers; device calls go to other algorithms", name, q);
			return 0;
		}
	return 1;
}

/* ------------------------------------------------------------- channels */
/* The device handle of channel k of kind to peer q: its tokens, through a
 * memory channel of the nvlink connection (which also maps the peer's). */
static int peer_channels(struct wpd_comm *d, int q)
{
	const struct weft_prim_api *pr = d->pr;
	struct wpd_peer *p = &d->peers[q];
	int rc;
	if ((rc = pr->connect(d->comm, q, "nvlink", &p->mconn))) {
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot connect to rank %d through nvlink: %s", d->name, q,
			weft_kit_strerror(rc));
		return rc;
	}
	if (wp_pair_needs(d->plan, (uint32_t)d->rank, (uint32_t)q, WP_CHAN_PORT)) {
		if (pr->size < offsetof(struct weft_prim_api, connect_mem) + sizeof(pr->connect_mem) ||
		    (rc = pr->connect_mem(d->comm, q, NULL, WEFT_MEM_CUDA, &p->pconn)) ||
		    (rc = pr->port_create(p->pconn, WPD_PORT_DEPTH, &p->port)) ||
		    (rc = pr->port_device_handle(p->port, &p->pdev))) {
			rc = rc ? rc : -ENOTSUP;
			WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot make a device port channel to rank %d: %s", d->name, q,
				weft_kit_strerror(rc));
			return rc;
		}
		d->abort = p->pdev.abort_flag;
	}
	for (int k = 0; k < WP_CHAN_KINDS; k++) {
		uint32_t n = wp_pair_count(d->plan, (uint32_t)d->rank, (uint32_t)q, k);
		p->nsem[k] = n;
		p->sem[k] = calloc(n + 1, sizeof(*p->sem[k]));
		p->rsem[k] = calloc(n + 1, sizeof(*p->rsem[k]));
		p->mc[k] = calloc(n + 1, sizeof(*p->mc[k]));
		if (!p->sem[k] || !p->rsem[k] || !p->mc[k])
			return -ENOMEM;
		for (uint32_t j = 0; j < n; j++) {
			/* A port signal reaches the token through the port's own
			 * connection; the memory channel then only lends its address. */
			if ((rc = pr->sem_create_on(d->comm, WEFT_MEM_CUDA, &p->sem[k][j])) ||
			    (rc = pr->sem_exchange(p->sem[k][j], q, &p->rsem[k][j])) ||
			    (rc = pr->memchan_create(p->mconn, NULL, d->tabmem, p->sem[k][j],
						     k == WP_CHAN_MEMORY ? p->rsem[k][j] : NULL, &p->mc[k][j]))) {
				WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot make the semaphores of a channel to rank %d: %s",
					d->name, q, weft_kit_strerror(rc));
				return rc;
			}
		}
	}
	return 0;
}

/* The tables of the rank's channels, in its own channel order. */
static int fill_channels(struct wpd_comm *d, char *img)
{
	const struct weft_prim_api *pr = d->pr;
	struct wpd_mch *mch = (struct wpd_mch *)(void *)(img + d->off_mch);
	struct wpd_pch *pch = (struct wpd_pch *)(void *)(img + d->off_pch);
	uint64_t *pstate = (uint64_t *)(void *)(d->tab + d->off_pstate);
	for (int k = 0; k < WP_CHAN_KINDS; k++)
		for (uint32_t ch = 0; ch < d->rk->peers[k].n; ch++) {
			uint32_t q, j;
			wp_chan_pair(d->plan, (uint32_t)d->rank, k, ch, &q, &j);
			struct wpd_peer *p = &d->peers[q];
			struct weft_memchan_dev h;
			int rc = pr->memchan_device_handle(p->mc[k][j], &h);
			if (rc)
				return rc;
			d->abort = h.abort_flag;
			if (k == WP_CHAN_MEMORY) {
				mch[ch] = (struct wpd_mch){h.sem, h.rsem, h.expected};
				continue;
			}
			uint32_t id = 0;
			if ((rc = pr->rsem_port_id(p->rsem[k][j], &id)))
				return rc;
			pch[ch] = (struct wpd_pch){.port = p->pdev, .sem = h.sem, .expected = pstate + 3 * ch,
						   .outbound = pstate + 3 * ch + 1,
						   .lock = (uint32_t *)(void *)(pstate + 3 * ch + 2), .rsem_id = id};
		}
	return 0;
}

/* The plan's shape: whether peers reach input or output, and this rank's
 * plan writes its input (then an out-of-place call cannot run on the
 * caller's buffer). */
static void plan_shape(struct wpd_comm *d)
{
	const struct wp_plan *p = d->plan;
	int writes_input = 0;
	for (uint32_t r = 0; r < p->nranks; r++) {
		const struct wp_rank *rk = &p->ranks[r];
		for (uint32_t i = 0; i < rk->nrbufs; i++)
			d->shared_io |= rk->rbufs[i].type != WP_BUF_SCRATCH;
		d->uses_port |= rk->peers[WP_CHAN_PORT].n != 0;
	}
	/* Every rank decides flagged alike: the plan's, not the rank's. */
	d->flagged = p->double_scratch;
	for (uint32_t r = 0; r < p->nranks; r++)
		for (uint32_t t = 0; t < p->ranks[r].ntbs; t++)
			for (uint32_t i = 0; i < p->ranks[r].tbs[t].nops; i++) {
				const struct wp_op *op = &p->ranks[r].tbs[t].ops[i];
				for (uint32_t k = 0; k <= op->nops; k++) {
					const struct wp_op *o = k ? &op->ops[k - 1] : op;
					d->flagged |= o->kind >= WP_OP_PPKT && o->kind <= WP_OP_RECSPKT;
					for (uint32_t j = 0; r == (uint32_t)d->rank && j < o->ndst; j++)
						writes_input |= !o->dst[j].remote && o->dst[j].type == WP_BUF_INPUT;
				}
			}
	d->direct = !d->shared_io && !d->uses_port && (p->inplace || !writes_input);
}

/* The device tables: the encoded plan, channels, semaphores' start values. */
static int make_tables(struct wpd_comm *d)
{
	struct wpd_tb *tbs = NULL;
	struct wpd_op *ops = NULL;
	struct wpd_refloc *refs = NULL;
	char *imgs = NULL;
	uint32_t nops = 0, nrefs = 0, maxrefs = 0;
	char err[256];
	int rc = wpd_encode(d->plan, (uint32_t)d->rank, &tbs, &ops, &nops);
	if (!rc)
		rc = wpd_encode_refs(tbs, d->rk->ntbs, ops, &refs, &nrefs, &maxrefs);
	/* Without images (a threadblock too long for shared memory) blocks read the tables. */
	if (!rc)
		rc = wpd_encode_images(tbs, d->rk->ntbs, ops, refs, &imgs, &d->img_stride, &d->img_ops);
	if (rc == -E2BIG) {
		d->img_stride = 0;
		rc = 0;
	}
	if (rc) {
		free(refs);
		free(tbs);
		free(ops);
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: rank %d's plan does not fit the device encoding: %s", d->name, d->rank,
			weft_kit_strerror(rc));
		return rc;
	}
	const struct wp_rank *rk = d->rk;
	size_t off = 0;
	d->off_ops = off;
	off += up256((uint64_t)(nops + 1) * sizeof(struct wpd_op));
	d->off_tbs = off;
	off += up256((uint64_t)(rk->ntbs + 1) * sizeof(struct wpd_tb));
	d->off_mch = off;
	off += up256((uint64_t)(rk->peers[WP_CHAN_MEMORY].n + 1) * sizeof(struct wpd_mch));
	d->off_pch = off;
	off += up256((uint64_t)(rk->peers[WP_CHAN_PORT].n + 1) * sizeof(struct wpd_pch));
	d->off_ctl = off;
	off += up256(sizeof(struct wpd_ctl));
	d->off_sems = off;
	off += up256((uint64_t)(rk->nsems + 1) * sizeof(int64_t));
	d->off_rbufs = off;
	off += up256((uint64_t)(rk->nrbufs + 1) * sizeof(struct wpd_rbuf));
	d->off_pstate = off;
	off += up256((uint64_t)(rk->peers[WP_CHAN_PORT].n + 1) * 3 * sizeof(uint64_t));
	d->off_refs = off;
	off += up256((uint64_t)(nrefs + 1) * sizeof(struct wpd_refloc));
	d->off_img = off;
	off += up256((uint64_t)rk->ntbs * d->img_stride);
	d->tab_len = off;
	d->nops = nops;
	d->rng_cap = maxrefs < WPD_RNG_CAP ? maxrefs : WPD_RNG_CAP;
	char *img = calloc(1, off);
	rc = -ENOMEM;
	if (!img || !(d->h_rbufs = calloc(rk->nrbufs + 1, sizeof(*d->h_rbufs))))
		goto out;
	if ((rc = d->pr->mem_alloc(d->comm, WEFT_MEM_CUDA, off, (void **)&d->tab)) ||
	    (rc = d->pr->mem_register(d->comm, d->tab, off, WEFT_MEM_CUDA, &d->tabmem))) {
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot allocate %zu bytes of device memory for the plan: %s", d->name,
			off, weft_kit_strerror(rc));
		goto out;
	}
	for (int q = 0; q < d->n; q++)
		if (d->peers[q].related && pair_channels(d->plan, (uint32_t)d->rank, (uint32_t)q) &&
		    (rc = peer_channels(d, q)))
			goto out;
	if ((rc = fill_channels(d, img)))
		goto out;
	memcpy(img + d->off_ops, ops, (size_t)nops * sizeof(*ops));
	memcpy(img + d->off_tbs, tbs, (size_t)rk->ntbs * sizeof(*tbs));
	memcpy(img + d->off_refs, refs, (size_t)nrefs * sizeof(*refs));
	if (d->img_stride)
		memcpy(img + d->off_img, imgs, (size_t)rk->ntbs * d->img_stride);
	int64_t *sems = (int64_t *)(void *)(img + d->off_sems);
	for (uint32_t i = 0; i < rk->nsems; i++)
		sems[i] = rk->sem_init[i];
	if ((rc = wpd_cuda_copy_sync(d->tab, img, off, err, sizeof(err))))
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: %s", d->name, err);
out:
	free(img);
	free(tbs);
	free(ops);
	free(refs);
	free(imgs);
	return rc;
}

/* ---------------------------------------------------------------- areas */
static void area_drop(struct wpd_comm *d, struct wpd_area *a, int keep)
{
	struct wpd_old *o = keep ? calloc(1, sizeof(*o)) : NULL;
	if (o) {
		o->p = a->p;
		o->mem = a->mem;
		o->next = d->old;
		d->old = o;
	} else {
		if (a->mem)
			d->pr->mem_deregister(a->mem);
		if (a->p)
			d->pr->mem_free(d->comm, a->p);
	}
	memset(a, 0, sizeof(*a));
}

static void rmem_drop(struct wpd_comm *d, weft_rmem_t *r, int keep)
{
	struct wpd_old *o = keep && r ? calloc(1, sizeof(*o)) : NULL;
	if (o) {
		o->rmem = r;
		o->next = d->old;
		d->old = o;
	} else if (r) {
		d->pr->rmem_release(r);
	}
}

/* The exchanged areas: scratch always, input and output where peers reach them. */
static int exchanged(const struct wpd_comm *d, int t)
{
	return t == WP_BUF_SCRATCH || d->shared_io;
}

/* After growing: the remote buffers' table, for the new areas. */
static int rbufs_update(struct wpd_comm *d)
{
	char err[256];
	int dbl = d->plan->double_scratch;
	for (uint32_t i = 0; i < d->rk->nrbufs; i++) {
		const struct wp_remote_buf *rb = &d->rk->rbufs[i];
		int t = wp_view_area(d->plan->inplace, d->coll == WEFT_COLL_REDUCE_SCATTER, (int)rb->type);
		const struct wpd_peer *p = &d->peers[rb->rank];
		d->h_rbufs[i] = (struct wpd_rbuf){.base = p->map[t],
						  .half = dbl ? d->caps[rb->rank][WP_BUF_SCRATCH] / 2 : 0,
						  .peer = rb->rank, .type = rb->type, .port_id = p->rport[t]};
		if ((rb->access & (1u << WP_CHAN_MEMORY)) && !p->map[t]) {
			WPD_LOG(d, WEFT_LOG_ERROR, "%s: rank %u's buffer is not mapped into this GPU", d->name, rb->rank);
			return -ENOTSUP;
		}
	}
	int rc = wpd_cuda_copy_sync(d->tab + d->off_rbufs, d->h_rbufs, (size_t)d->rk->nrbufs * sizeof(*d->h_rbufs),
				    err, sizeof(err));
	if (rc)
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: %s", d->name, err);
	return rc;
}

/* Grows the areas to what this call needs on any rank, the same decision on
 * every rank, and swaps the exchanged ones anew. Collective when it grows,
 * which a call being captured cannot be. */
static int areas_fit(struct wpd_comm *d, int capturing)
{
	const struct weft_prim_api *pr = d->pr;
	int grow = !d->area[0].p;
	for (int r = 0; r < d->n && !grow; r++) {
		uint64_t need[WP_BUF_KINDS] = {d->in, d->out, wp_scratch_bytes(d->plan, (uint32_t)r, d->in, d->out)};
		for (int t = 0; t < WP_BUF_KINDS; t++)
			grow |= d->caps[r][t] < need[t];
	}
	if (!grow)
		return 0;
	if (capturing) {
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: a call of this size needs larger device areas, which cannot be made "
					   "while a graph is captured: make one such call before capturing", d->name);
		return -EBUSY;
	}
	for (int r = 0; r < d->n; r++) {
		uint64_t need[WP_BUF_KINDS] = {d->in, d->out, wp_scratch_bytes(d->plan, (uint32_t)r, d->in, d->out)};
		for (int t = 0; t < WP_BUF_KINDS; t++) {
			uint64_t cap = d->caps[r][t] > 4096 ? d->caps[r][t] : 4096;
			while (cap < need[t])
				cap *= 2;
			d->caps[r][t] = cap;
		}
	}
	/* Kernels of any rank may still use the old areas. */
	int rc = wpd_cuda_device_sync();
	if (!rc)
		rc = pr->comm_barrier(d->comm);
	if (rc)
		return rc;
	for (int q = 0; q < d->n; q++)
		for (int t = 0; t < WP_BUF_KINDS; t++) {
			rmem_drop(d, d->peers[q].rmem[t], d->captured);
			d->peers[q].rmem[t] = NULL;
			d->peers[q].map[t] = NULL;
		}
	for (int t = 0; t < WP_BUF_KINDS; t++) {
		struct wpd_area *a = &d->area[t];
		area_drop(d, a, d->captured);
		uint64_t cap = d->caps[d->rank][t];
		if ((rc = pr->mem_alloc(d->comm, WEFT_MEM_CUDA, cap, (void **)&a->p)) ||
		    (rc = pr->mem_register(d->comm, a->p, cap, WEFT_MEM_CUDA, &a->mem)) ||
		    (d->uses_port && (rc = pr->mem_port_id(a->mem, &a->port_id)))) {
			WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot allocate a device area of %llu bytes: %s", d->name,
				(unsigned long long)cap, weft_kit_strerror(rc));
			return rc;
		}
	}
	d->captured = 0;
	for (int q = 0; q < d->n; q++) {
		struct wpd_peer *p = &d->peers[q];
		for (int t = 0; p->related && t < WP_BUF_KINDS; t++) {
			if (!exchanged(d, t))
				continue;
			if ((rc = pr->mem_exchange(d->area[t].mem, q, &p->rmem[t])))
				return rc;
			void *m = NULL;
			if (p->mconn && pr->rmem_device_ptr(p->mconn, p->rmem[t], &m) == 0)
				p->map[t] = m;
			if (d->uses_port && (rc = pr->rmem_port_id(p->rmem[t], &p->rport[t])))
				return rc;
		}
	}
	return rbufs_update(d);
}

/* ---------------------------------------------------------------- setup */
int wpd_setup(const struct weft_algo_comm *ac, const struct wp_plan *plan, enum weft_collective coll,
	      const char *name, struct wpd_comm **out)
{
	struct wpd_comm *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->core = ac->core;
	d->pr = ac->prim;
	d->comm = ac->comm;
	d->plan = plan;
	d->rk = &plan->ranks[ac->rank];
	d->name = name;
	d->coll = coll;
	d->rank = ac->rank;
	d->n = ac->nranks;
	int rc = -ENOMEM;
	if (!(d->peers = calloc((size_t)d->n, sizeof(*d->peers))) || !(d->caps = calloc((size_t)d->n, sizeof(*d->caps))))
		goto err;
	if ((rc = wpd_cuda_device(&d->dev))) {
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: no CUDA device in this process", name);
		goto err;
	}
	for (int q = 0; q < d->n; q++)
		d->peers[q].related = q != d->rank && (wp_reaches(plan, (uint32_t)d->rank, (uint32_t)q) ||
						       wp_reaches(plan, (uint32_t)q, (uint32_t)d->rank));
	plan_shape(d);
	if ((rc = make_tables(d)))
		goto err;
	d->ready = 1;
	*out = d;
	return 0;
err:
	wpd_teardown(d);
	return rc;
}

void wpd_teardown(struct wpd_comm *d)
{
	if (!d)
		return;
	const struct weft_prim_api *pr = d->pr;
	/* Kernels of every rank may still use what goes: wait for this GPU,
	 * then for the others. */
	if (d->ready) {
		wpd_cuda_set_device(d->dev);
		wpd_cuda_device_sync();
		pr->comm_barrier(d->comm);
	}
	for (int q = 0; d->peers && q < d->n; q++) {
		struct wpd_peer *p = &d->peers[q];
		for (int k = 0; k < WP_CHAN_KINDS; k++) {
			for (uint32_t j = 0; j < p->nsem[k]; j++) {
				if (p->mc[k] && p->mc[k][j])
					pr->memchan_destroy(p->mc[k][j]);
				if (p->rsem[k] && p->rsem[k][j])
					pr->rsem_release(p->rsem[k][j]);
				if (p->sem[k] && p->sem[k][j])
					pr->sem_destroy(p->sem[k][j]);
			}
			free(p->mc[k]);
			free(p->rsem[k]);
			free(p->sem[k]);
		}
		if (p->port)
			pr->port_destroy(p->port);
		for (int t = 0; t < WP_BUF_KINDS; t++)
			if (p->rmem[t])
				pr->rmem_release(p->rmem[t]);
		if (p->pconn)
			pr->conn_close(p->pconn);
		if (p->mconn)
			pr->conn_close(p->mconn);
	}
	for (int t = 0; t < WP_BUF_KINDS; t++)
		area_drop(d, &d->area[t], 0);
	while (d->old) {
		struct wpd_old *o = d->old;
		d->old = o->next;
		if (o->rmem)
			pr->rmem_release(o->rmem);
		if (o->mem)
			pr->mem_deregister(o->mem);
		if (o->p)
			pr->mem_free(d->comm, o->p);
		free(o);
	}
	if (d->tabmem)
		pr->mem_deregister(d->tabmem);
	if (d->tab)
		pr->mem_free(d->comm, d->tab);
	free(d->h_rbufs);
	free(d->peers);
	free(d->caps);
	free(d);
}

/* ---------------------------------------------------------------- calls */
int wpd_supports(struct wpd_comm *d, const struct weft_coll_args *a)
{
	if ((int)a->dtype < 0 || a->dtype >= WEFT_DATATYPE_COUNT)
		return -ENOTSUP;
	size_t es = weft_kit_datatype_size(a->dtype);
	if (!es || d->plan->buffer_alignment % es)
		return -ENOTSUP;
	if (weft_kit_coll_reduces(a->coll) && a->op != WEFT_SUM && a->op != WEFT_PROD && a->op != WEFT_MIN &&
	    a->op != WEFT_MAX)
		return -ENOTSUP;
	uint64_t in, out, block = (uint64_t)a->count * es;
	char err[256];
	if (wp_call_fits(d->plan, a->coll, block, err, sizeof(err)))
		return -ENOTSUP;
	/* Port triggers carry 32-bit offsets and lengths: areas stay below 4 GiB. */
	wp_call_bytes(a->coll, d->plan->nranks, block, &in, &out);
	if (d->uses_port && (in > (1ull << 30) || out > (1ull << 30) ||
			     wp_scratch_bytes(d->plan, (uint32_t)d->rank, in, out) > (1ull << 30)))
		return -ENOTSUP;
	return 0;
}

/* Threads a block: the plan's, fewer for a small call. Every operation
 * strides over its bytes by the block's threads, so any count is correct;
 * each warp more repeats an operation's bookkeeping, which is what a small
 * call's time is made of. Enough threads for one 16-byte vector each of the
 * larger buffer, in whole warps, at least WPD_MIN_THREADS. */
#define WPD_MIN_THREADS 128
static uint32_t launch_threads(uint32_t plan, uint64_t in, uint64_t out)
{
	uint64_t v = ((in > out ? in : out) + 15) / 16;
	uint64_t t = (v + 31) / 32 * 32;
	t = t < WPD_MIN_THREADS ? WPD_MIN_THREADS : t;
	return t < plan ? (uint32_t)t : plan;
}

static int inplace_call(const struct weft_coll_args *a, int rank)
{
	size_t b = a->count * weft_kit_datatype_size(a->dtype);
	const char *s = a->sendbuf, *r = a->recvbuf;
	if (a->coll == WEFT_COLL_ALLGATHER)
		return s == r + (size_t)rank * b;
	if (a->coll == WEFT_COLL_REDUCE_SCATTER)
		return s + (size_t)rank * b == r;
	return s == r;
}

int wpd_execute(struct wpd_comm *d, const struct weft_coll_args *a)
{
	const struct wp_plan *p = d->plan;
	char err[256] = "";
	size_t es = weft_kit_datatype_size(a->dtype);
	if (wpd_supports(d, a) || inplace_call(a, d->rank) != !!p->inplace) {
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: cannot run this call on device buffers (type, size or in-place mode)",
			d->name);
		return -ENOTSUP;
	}
	if (!a->count)
		return 0;
	wp_call_bytes(a->coll, (uint32_t)d->n, (uint64_t)a->count * es, &d->in, &d->out);
	int capturing = 0, rc;
	if ((rc = wpd_cuda_set_device(d->dev)) || (rc = wpd_cuda_capturing(a->stream, &capturing, err, sizeof(err))) ||
	    (rc = areas_fit(d, capturing)))
		goto out;
	d->captured |= capturing;
	int rs = d->coll == WEFT_COLL_REDUCE_SCATTER, ag = d->coll == WEFT_COLL_ALLGATHER;
	/* The callers' buffers serve as they are where the kernel's vector and
	 * packet accesses find them aligned. */
	int direct = d->direct && (((uintptr_t)a->sendbuf | (uintptr_t)a->recvbuf) & 15) == 0;
	struct wpd_args k;
	memset(&k, 0, sizeof(k));
	k.ops = (const struct wpd_op *)(const void *)(d->tab + d->off_ops);
	k.tbs = (const struct wpd_tb *)(const void *)(d->tab + d->off_tbs);
	k.rbufs = (const struct wpd_rbuf *)(const void *)(d->tab + d->off_rbufs);
	k.mch = (const struct wpd_mch *)(const void *)(d->tab + d->off_mch);
	k.pch = (const struct wpd_pch *)(const void *)(d->tab + d->off_pch);
	k.ctl = (struct wpd_ctl *)(void *)(d->tab + d->off_ctl);
	k.sems = (int64_t *)(void *)(d->tab + d->off_sems);
	k.abort = d->abort;
	k.refs = (const struct wpd_refloc *)(const void *)(d->tab + d->off_refs);
	k.rng_cap = d->rng_cap;
	k.flagged = (uint32_t)d->flagged;
	if (d->img_stride) {
		k.img = d->tab + d->off_img;
		k.img_stride = d->img_stride;
		k.img_ops = d->img_ops;
	}
	for (int t = 0; t < 2; t++) {
		int area = wp_view_area(p->inplace, rs, t);
		k.vstride[t] = wp_view_stride(p->inplace, ag, rs, t, d->in, d->out);
		k.port_mem[t] = d->area[area].port_id;
		k.port_base[t] = (uint64_t)d->rank * k.vstride[t];
		k.buf[t] = d->area[area].p + k.port_base[t];
	}
	if (direct) {
		k.buf[0] = (char *)(uintptr_t)a->sendbuf;
		k.buf[1] = a->recvbuf;
	}
	k.scr = d->area[WP_BUF_SCRATCH].p;
	k.scr_half = p->double_scratch ? d->caps[d->rank][WP_BUF_SCRATCH] / 2 : 0;
	k.port_mem[2] = d->area[WP_BUF_SCRATCH].port_id;
	wp_geom_rank(d->rk->chunks[WP_BUF_INPUT], d->rk->chunks[WP_BUF_OUTPUT], d->in, d->out, &k.rank_size,
		     &k.nchunks);
	k.align = p->buffer_alignment;
	k.dtype = (int)a->dtype;
	k.op = (int)a->op;
	if (!direct && (rc = wpd_cuda_copy(k.buf[0], a->sendbuf, d->in, a->stream, err, sizeof(err))))
		goto out;
	/* A rank without threadblocks only lends its areas to its peers. */
	if (d->rk->ntbs && (rc = wpd_launch(&k, d->rk->ntbs, launch_threads(p->threads_per_block, d->in, d->out),
					    a->stream, err, sizeof(err))))
		goto out;
	if (!direct && (rc = wpd_cuda_copy(a->recvbuf, k.buf[1], d->out, a->stream, err, sizeof(err))))
		goto out;
	/* A call without a stream completes here; a kernel stopped by an abort
	 * looks complete, so the comm's status decides. */
	if (!a->stream && !(rc = wpd_cuda_sync(NULL, err, sizeof(err))) && (rc = d->pr->comm_status(d->comm)))
		snprintf(err, sizeof(err), "the call stopped early: %s", weft_kit_strerror(rc));
out:
	if (rc && err[0])
		WPD_LOG(d, WEFT_LOG_ERROR, "%s: %s", d->name, err);
	return rc;
}
