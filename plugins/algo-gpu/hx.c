/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the host-driven executor of the cross-host schedules (hx.h).
 * Per peer, both ways: a ring of `depth` slots of `chunk` bytes. Piece s of
 * the pair goes to slot s % depth; the sender may post it once the receiver
 * has consumed piece s - depth (its credit token counts consumed pieces), and
 * the receiver may apply it once the data token reaches s + 2 (it starts at
 * 1, the connection's first signal). Tokens only
 * grow, across calls, so nothing is reset between calls. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "hx.h"

struct hx_peer {
	int made;
	int sig_on_ctl; /* the data connection cannot raise host tokens (nvlink between processes) */
	weft_conn_t *data, *ctl;
	enum weft_mem_type mem; /* the rings' */
	void *land, *send; /* rings: land is written by the peer, send read by puts */
	weft_mem_t *mland, *msend;
	weft_rmem_t *rland;
	weft_sem_t *sdata, *scred;  /* this rank's: raised by the peer */
	weft_rsem_t *rdata, *rcred; /* the peer's */
	uint64_t sent, recvd;       /* pieces posted to it, pieces applied from it */
	/* Call signatures: {piece + 1, signature} per ring slot, in host memory
	 * (the rings may be device memory, which the host cannot read), put
	 * with the first piece of a call each way before its signal. One
	 * buffer: the landing slots, then the send slots. */
	uint64_t *sigs;
	weft_mem_t *msigs;
	weft_rmem_t *rsigs;
	int sigs_own; /* posix_memalign's, where no transport allocates host memory */
	uint64_t tx0, rx0;  /* pieces sent and applied before this call */
	uint64_t ssig, rsig; /* this call's signature each way, 0: not compared */
};

struct wag_hx {
	weft_comm_t *comm;
	const struct weft_prim_api *p;
	const struct weft_core_api *core;
	enum weft_mem_type mem;
	struct wag_hx_ops ops;
	struct wag_hx_cfg cfg;
	int rank, nranks;
	struct hx_peer *peers;
	void *tmp;
	uint64_t tmp_cap;
	void *snap; /* copies of sends whose bytes the same round overwrites */
	uint64_t snap_cap;
	int core_mem; /* without ops.alloc: the buffers come from prim->mem_alloc */
	int prepare_only; /* calls connect their peers and move nothing (wag_hx_prepare) */
};

#define HX_LOG(x, level, ...) (x)->core->log((x)->core->self, level, __VA_ARGS__)

/* Host memory from the core's allocator where it has one (shm), so that
 * after a failure it can be left to weft_comm_destroy (wag_hx_free). */
static int buf_alloc(struct wag_hx *x, enum weft_mem_type mem, size_t bytes, void **p)
{
	if (x->ops.alloc)
		return x->ops.alloc(x->ops.actx, mem, bytes, p);
	if (x->core_mem)
		return x->p->mem_alloc(x->comm, mem, bytes ? bytes : 1, p);
	if (posix_memalign(p, 4096, bytes ? bytes : 1) != 0)
		return -ENOMEM;
	memset(*p, 0, bytes);
	return 0;
}

static void buf_free(struct wag_hx *x, enum weft_mem_type mem, void *p)
{
	if (!p)
		return;
	if (x->ops.free)
		x->ops.free(x->ops.actx, mem, p);
	else if (x->core_mem)
		x->p->mem_free(x->comm, p);
	else
		free(p);
}

int wag_hx_create(weft_comm_t *comm, const struct weft_prim_api *prim, const struct weft_core_api *core,
		  enum weft_mem_type mem, const struct wag_hx_ops *ops, const struct wag_hx_cfg *cfg,
		  struct wag_hx **out)
{
	if (!prim || prim->size < offsetof(struct weft_prim_api, sem_wait_any) + sizeof(prim->sem_wait_any) ||
	    !prim->sem_wait_any || !cfg || cfg->chunk < 16 || cfg->chunk % 16 || cfg->depth < 1)
		return -EINVAL;
	struct wag_hx *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->comm = comm;
	x->p = prim;
	x->core = core;
	x->mem = mem;
	x->ops = *ops;
	x->cfg = *cfg;
	x->rank = prim->comm_rank(comm);
	/* Without ops.alloc: the core's memory where it allocates this type
	 * (a probe), else posix_memalign. */
	void *probe = NULL;
	if (!ops->alloc && mem == WEFT_MEM_HOST && prim->mem_alloc(comm, mem, 4096, &probe) == 0) {
		prim->mem_free(comm, probe);
		x->core_mem = 1;
	}
	x->nranks = prim->comm_size(comm);
	if (!(x->peers = calloc((size_t)x->nranks, sizeof(*x->peers)))) {
		free(x);
		return -ENOMEM;
	}
	*out = x;
	return 0;
}

/* Whether every buffer is the core's (ops.alloc's are, hx.h), which
 * weft_comm_destroy frees if this executor leaves it. */
static int core_owned(const struct wag_hx *x)
{
	return x->ops.alloc != NULL || x->core_mem;
}

/* keep: the comm failed, so peers may still write what this rank exposed. */
static void peer_free(struct wag_hx *x, struct hx_peer *pe, int keep)
{
	const struct weft_prim_api *p = x->p;
	p->rsem_release(pe->rdata);
	p->rsem_release(pe->rcred);
	if (pe->rland)
		p->rmem_release(pe->rland);
	if (pe->rsigs)
		p->rmem_release(pe->rsigs);
	if (keep) {
		/* A peer still inside its call may write these rings and tokens
		 * until its connections close: weft_comm_destroy releases them
		 * after closing every connection. */
		memset(pe, 0, sizeof(*pe));
		return;
	}
	p->sem_destroy(pe->sdata);
	p->sem_destroy(pe->scred);
	if (pe->mland)
		p->mem_deregister(pe->mland);
	if (pe->msend)
		p->mem_deregister(pe->msend);
	if (pe->msigs)
		p->mem_deregister(pe->msigs);
	buf_free(x, pe->mem, pe->land);
	buf_free(x, pe->mem, pe->send);
	if (pe->sigs_own)
		free(pe->sigs);
	else
		buf_free(x, WEFT_MEM_HOST, pe->sigs);
	if (pe->data)
		p->conn_close(pe->data);
	if (pe->ctl)
		p->conn_close(pe->ctl);
	memset(pe, 0, sizeof(*pe));
}

void wag_hx_free(struct wag_hx *x)
{
	if (!x)
		return;
	int keep = core_owned(x) && x->p->comm_status(x->comm) != 0;
	for (int q = 0; q < x->nranks; q++)
		peer_free(x, &x->peers[q], keep);
	if (!keep) {
		buf_free(x, x->mem, x->tmp);
		buf_free(x, x->mem, x->snap);
	}
	free(x->peers);
	free(x);
}

/* The signature slots of pe. Where no transport allocates host memory
 * (only device rings, no shm), plain memory serves: only puts reach it
 * (after a failure it stays allocated, as peers may still write it). */
static int sigs_make(struct wag_hx *x, struct hx_peer *pe)
{
	size_t bytes = 32 * (size_t)x->cfg.depth;
	int rc = buf_alloc(x, WEFT_MEM_HOST, bytes, (void **)&pe->sigs);
	if (rc == -ENOTSUP) {
		if (posix_memalign((void **)&pe->sigs, 4096, bytes) != 0)
			return -ENOMEM;
		pe->sigs_own = 1;
		rc = 0;
	}
	if (rc)
		return rc;
	memset(pe->sigs, 0, bytes);
	return x->p->mem_register(x->comm, pe->sigs, bytes, WEFT_MEM_HOST, &pe->msigs);
}

/* Pairwise with q, which makes its side in the same call: both sides do
 * the same steps in the same order. */
static int peer_make(struct wag_hx *x, int q)
{
	struct hx_peer *pe = &x->peers[q];
	if (pe->made)
		return 0;
	const struct weft_prim_api *p = x->p;
	size_t ring = (size_t)x->cfg.chunk * x->cfg.depth;
	const char *step = "connect";
	pe->mem = x->ops.peer_mem ? x->ops.peer_mem(x->ops.actx, q) : x->mem;
	int rc = p->connect_mem(x->comm, q, NULL, pe->mem, &pe->data);
	if (rc == 0)
		rc = p->connect(x->comm, q, NULL, &pe->ctl);
	if (rc == 0 && (step = "allocate its rings", 1))
		rc = buf_alloc(x, pe->mem, ring, &pe->land);
	if (rc == 0)
		rc = buf_alloc(x, pe->mem, ring, &pe->send);
	if (rc == 0 && (step = "register its rings", 1))
		rc = p->mem_register(x->comm, pe->land, ring, pe->mem, &pe->mland);
	if (rc == 0)
		rc = p->mem_register(x->comm, pe->send, ring, pe->mem, &pe->msend);
	if (rc == 0 && (step = "make its signature slots", 1))
		rc = sigs_make(x, pe);
	if (rc == 0 && (step = "exchange rings and semaphores", 1))
		rc = p->mem_exchange(pe->mland, q, &pe->rland);
	if (rc == 0)
		rc = p->mem_exchange(pe->msigs, q, &pe->rsigs);
	if (rc == 0)
		rc = p->sem_create(x->comm, &pe->sdata);
	if (rc == 0)
		rc = p->sem_create(x->comm, &pe->scred);
	if (rc == 0)
		rc = p->sem_exchange(pe->sdata, q, &pe->rdata);
	if (rc == 0)
		rc = p->sem_exchange(pe->scred, q, &pe->rcred);
	if (rc == 0 && (step = "signal", 1)) {
		/* The data token starts at 1 (it counts pieces from there). Host
		 * tokens are reached by a connection for host memory; one for
		 * device memory (nvlink between processes) may not reach them, so
		 * its pieces are flushed and signalled over ctl. */
		pe->sig_on_ctl = pe->mem != WEFT_MEM_HOST;
		rc = p->signal(pe->sig_on_ctl ? pe->ctl : pe->data, pe->rdata, 1);
	}
	if (rc) {
		HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: rank %d cannot %s with rank %d: %s", x->rank, step, q,
		       weft_kit_strerror(rc));
		peer_free(x, pe, 0);
		return rc;
	}
	pe->made = 1;
	return 0;
}

/* One transfer of a round as this rank sees it: to or from a peer, or a
 * local move (peer == this rank), over elements of the call. */
struct hx_item {
	int peer;
	int send; /* 1: this rank sends buf; 0: receives into buf */
	int kind; /* enum wag_hier_kind for what is received or moved locally */
	char *buf;
	const char *src; /* local moves */
	uint64_t n;      /* elements */
};

struct hx_round {
	struct hx_item *it;
	size_t n;
};

/* Per peer and direction, the next item and how far into it. */
struct hx_cursor {
	size_t *idx; /* items of this peer and direction, in order */
	size_t n, k;
	uint64_t done; /* elements of idx[k] already handled */
};

struct hx_run {
	struct wag_hx *x;
	const struct hx_round *r;
	size_t esize;
	int dtype, op;
	void *u;
	struct hx_cursor *tx, *rx; /* nranks each */
	size_t *pool;
	uint64_t *lens; /* [peer][depth]: elements of each piece tx_step copied */
};

static int apply(struct hx_run *h, int kind, void *dst, const void *src, uint64_t n)
{
	if (kind == WAG_HM_REDUCE)
		return h->x->ops.reduce(h->u, h->dtype, h->op, dst, src, n);
	return dst == src ? 0 : h->x->ops.copy(h->u, dst, src, n * h->esize);
}

/* The call's signature with its first piece to q: over the connection that
 * signals the piece, which orders it before the signal. Its slot is the
 * piece's, free again once the piece's credit came back. */
static int sig_put(struct wag_hx *x, int q)
{
	struct hx_peer *pe = &x->peers[q];
	size_t off = 16 * (size_t)(pe->tx0 % x->cfg.depth), soff = 16 * (size_t)x->cfg.depth + off;
	uint64_t *e = pe->sigs + soff / 8;
	e[0] = pe->tx0 + 1;
	e[1] = pe->ssig;
	int rc = x->p->put(pe->sig_on_ctl ? pe->ctl : pe->data, pe->rsigs, off, pe->msigs, soff, 16);
	if (rc)
		HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: signature to rank %d: %s", q, weft_kit_strerror(rc));
	return rc;
}

/* Before the call's first piece from q is applied: its signature against
 * this rank's. A slot of another piece (q sent none with it) is not
 * compared; the heartbeats still compare the calls. */
static int sig_check(struct wag_hx *x, int q)
{
	struct hx_peer *pe = &x->peers[q];
	const uint64_t *e = pe->sigs + 2 * (pe->rx0 % x->cfg.depth);
	uint64_t no = __atomic_load_n(&e[0], __ATOMIC_ACQUIRE), theirs = __atomic_load_n(&e[1], __ATOMIC_ACQUIRE);
	if (no != pe->rx0 + 1 || !theirs || theirs == pe->rsig)
		return 0;
	char m[128], t[128];
	const char *field = weft_kit_sig_diff(pe->rsig, theirs);
	weft_kit_sig_describe(pe->rsig, m, sizeof(m));
	weft_kit_sig_describe(theirs, t, sizeof(t));
	HX_LOG(x, WEFT_LOG_ERROR, "rank %d's call differs from rank %d's: %s there, %s here: the %s differs", q, x->rank,
	       t, m, field ? field : "signature");
	return -WEFT_ERR_MISMATCH;
}

/* Copies every piece credit allows into send slots, then puts and signals them. */
static int tx_step(struct hx_run *h, int *moved)
{
	struct wag_hx *x = h->x;
	const struct weft_prim_api *p = x->p;
	uint64_t per = x->cfg.chunk / h->esize, first[x->nranks > 0 ? x->nranks : 1];
	int any = 0, rc = 0;
	for (int q = 0; q < x->nranks && rc == 0; q++) {
		struct hx_cursor *c = &h->tx[q];
		struct hx_peer *pe = &x->peers[q];
		first[q] = pe->sent;
		uint64_t cred = c->k < c->n ? p->sem_value(pe->scred) : 0;
		while (c->k < c->n && pe->sent < cred + x->cfg.depth && rc == 0) {
			const struct hx_item *it = &h->r->it[c->idx[c->k]];
			uint64_t n = it->n - c->done < per ? it->n - c->done : per;
			char *slot = (char *)pe->send + (pe->sent % x->cfg.depth) * x->cfg.chunk;
			rc = x->ops.copy(h->u, slot, it->buf + c->done * h->esize, n * h->esize);
			h->lens[(size_t)q * x->cfg.depth + (pe->sent - first[q])] = n;
			pe->sent++;
			any = 1;
			if ((c->done += n) == it->n) {
				c->k++;
				c->done = 0;
			}
		}
	}
	if (!any || rc)
		return rc;
	if ((rc = x->ops.sync(h->u)) != 0)
		return rc;
	for (int q = 0; q < x->nranks && rc == 0; q++) {
		struct hx_peer *pe = &x->peers[q];
		if (pe->sent == first[q])
			continue;
		const uint64_t *lens = h->lens + (size_t)q * x->cfg.depth;
		for (uint64_t s = first[q]; s < pe->sent && rc == 0; s++) {
			uint64_t off = (s % x->cfg.depth) * x->cfg.chunk;
			rc = p->put(pe->data, pe->rland, off, pe->msend, off, lens[s - first[q]] * h->esize);
			if (rc)
				HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: put to rank %d: %s", q,
				       weft_kit_strerror(rc));
		}
		if (rc == 0 && pe->sig_on_ctl && (rc = p->flush(pe->data)) != 0)
			HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: flush to rank %d: %s", q, weft_kit_strerror(rc));
		if (rc == 0 && pe->ssig && first[q] <= pe->tx0 && pe->tx0 < pe->sent)
			rc = sig_put(x, q);
		if (rc == 0 && (rc = p->signal(pe->sig_on_ctl ? pe->ctl : pe->data, pe->rdata, pe->sent + 1)) != 0)
			HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: signal to rank %d: %s", q, weft_kit_strerror(rc));
	}
	*moved = 1;
	return rc;
}

/* Applies every piece that has landed, then returns the credits. */
static int rx_step(struct hx_run *h, int *moved)
{
	struct wag_hx *x = h->x;
	const struct weft_prim_api *p = x->p;
	uint64_t per = x->cfg.chunk / h->esize, first[x->nranks > 0 ? x->nranks : 1];
	int any = 0, rc = 0;
	for (int q = 0; q < x->nranks && rc == 0; q++) {
		struct hx_cursor *c = &h->rx[q];
		struct hx_peer *pe = &x->peers[q];
		first[q] = pe->recvd;
		uint64_t tok = c->k < c->n ? p->sem_value(pe->sdata) : 0, avail = tok ? tok - 1 : 0;
		while (c->k < c->n && pe->recvd < avail && rc == 0) {
			if (pe->recvd == pe->rx0 && pe->rsig && (rc = sig_check(x, q)) != 0)
				break;
			const struct hx_item *it = &h->r->it[c->idx[c->k]];
			uint64_t n = it->n - c->done < per ? it->n - c->done : per;
			const char *slot = (const char *)pe->land + (pe->recvd % x->cfg.depth) * x->cfg.chunk;
			rc = apply(h, it->kind, it->buf + c->done * h->esize, slot, n);
			pe->recvd++;
			any = 1;
			if ((c->done += n) == it->n) {
				c->k++;
				c->done = 0;
			}
		}
	}
	if (!any || rc)
		return rc;
	if ((rc = x->ops.sync(h->u)) != 0)
		return rc;
	for (int q = 0; q < x->nranks && rc == 0; q++) {
		struct hx_peer *pe = &x->peers[q];
		if (pe->recvd != first[q] && (rc = p->signal(pe->ctl, pe->rcred, pe->recvd)) != 0)
			HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: credit to rank %d: %s", q, weft_kit_strerror(rc));
	}
	*moved = 1;
	return rc;
}

/* Sleeps until a piece from some peer lands or some peer returns a credit
 * this rank waits for. */
static int wait_any(struct hx_run *h)
{
	struct wag_hx *x = h->x;
	weft_sem_t *sems[2 * x->nranks];
	uint64_t vals[2 * x->nranks];
	int n = 0, which;
	for (int q = 0; q < x->nranks; q++) {
		struct hx_peer *pe = &x->peers[q];
		if (h->rx[q].k < h->rx[q].n) {
			sems[n] = pe->sdata;
			vals[n++] = pe->recvd + 2; /* the token is 1 + pieces landed */
		}
		if (h->tx[q].k < h->tx[q].n && pe->sent + 1 >= x->cfg.depth) {
			sems[n] = pe->scred;
			vals[n++] = pe->sent + 1 - x->cfg.depth;
		}
	}
	return n ? x->p->sem_wait_any(sems, vals, n, &which) : 0;
}

static int run_round(struct hx_run *h)
{
	struct wag_hx *x = h->x;
	int rc = 0;
	size_t used = 0;
	for (int q = 0; q < x->nranks; q++) {
		h->tx[q] = (struct hx_cursor){.idx = h->pool + used};
		for (size_t i = 0; i < h->r->n; i++)
			if (h->r->it[i].peer == q && q != x->rank && h->r->it[i].send)
				h->tx[q].idx[h->tx[q].n++] = i;
		used += h->tx[q].n;
		h->rx[q] = (struct hx_cursor){.idx = h->pool + used};
		for (size_t i = 0; i < h->r->n; i++)
			if (h->r->it[i].peer == q && q != x->rank && !h->r->it[i].send)
				h->rx[q].idx[h->rx[q].n++] = i;
		used += h->rx[q].n;
	}
	/* The moves of a round read what earlier rounds left: local ones first. */
	for (size_t i = 0; i < h->r->n && rc == 0; i++)
		if (h->r->it[i].peer == x->rank)
			rc = apply(h, h->r->it[i].kind, h->r->it[i].buf, h->r->it[i].src, h->r->it[i].n);
	for (;;) {
		if (rc)
			return rc;
		int moved = 0, left = 0;
		if ((rc = tx_step(h, &moved)) != 0 || (rc = rx_step(h, &moved)) != 0)
			return rc;
		for (int q = 0; q < x->nranks; q++)
			left |= h->tx[q].k < h->tx[q].n || h->rx[q].k < h->rx[q].n;
		if (!left)
			break;
		if (!moved)
			rc = wait_any(h);
	}
	/* Local moves and applied pieces must be done before the next round reads them. */
	return x->ops.sync(h->u);
}

static char *buf_of(const struct wag_hx_call *c, void *tmp, int b, uint64_t off)
{
	char *base = b == WAG_HB_IN ? (char *)(uintptr_t)c->in : b == WAG_HB_OUT ? (char *)c->out : (char *)tmp;
	return base + off * c->esize;
}

static int connect_peers(struct wag_hx *x, const struct hx_round *r)
{
	/* Peers in ascending order: every pair's connection steps meet. */
	for (int q = 0; q < x->nranks; q++) {
		int need = 0;
		for (size_t i = 0; i < r->n && !need; i++)
			need = r->it[i].peer == q && q != x->rank;
		int rc = need ? peer_make(x, q) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* Grows one of the executor's scratch buffers to at least bytes. */
static int reserve(struct wag_hx *x, void **buf, uint64_t *cap, uint64_t bytes)
{
	if (bytes <= *cap)
		return 0;
	buf_free(x, x->mem, *buf);
	*buf = NULL;
	*cap = 0;
	int rc = buf_alloc(x, x->mem, bytes, buf);
	if (rc) {
		HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: cannot allocate %llu bytes of scratch: %s",
		       (unsigned long long)bytes, weft_kit_strerror(rc));
		return rc;
	}
	*cap = bytes;
	return 0;
}

static int overlap(const char *a, uint64_t an, const char *b, uint64_t bn)
{
	return a < b + bn && b < a + an;
}

/* A send reads its bytes piece by piece while the round runs, so where a
 * receive or a local move of the same round writes any of them (an
 * alltoall in place: the block from q lands where the block for q waits),
 * the send goes from a copy taken before anything of the round is applied;
 * the copy is ordered before those writes as every op of the call is. */
static int snapshot_sends(struct wag_hx *x, struct hx_round *r, size_t esize, void *u)
{
	uint64_t need = 0;
	unsigned char *mark = calloc(r->n ? r->n : 1, 1);
	if (!mark)
		return -ENOMEM;
	for (size_t j = 0; j < r->n; j++) {
		const struct hx_item *s = &r->it[j];
		if (!s->send || !s->n)
			continue;
		for (size_t i = 0; i < r->n && !mark[j]; i++) {
			const struct hx_item *d = &r->it[i];
			mark[j] = !d->send && d->n && overlap(s->buf, s->n * esize, d->buf, d->n * esize);
		}
		need += mark[j] ? s->n * esize : 0;
	}
	int rc = need ? reserve(x, &x->snap, &x->snap_cap, need) : 0;
	uint64_t off = 0;
	for (size_t j = 0; j < r->n && rc == 0; j++) {
		if (!mark[j])
			continue;
		char *copy = (char *)x->snap + off;
		rc = x->ops.copy(u, copy, r->it[j].buf, r->it[j].n * esize);
		r->it[j].buf = copy;
		off += r->it[j].n * esize;
	}
	free(mark);
	return rc;
}

/* A call's start: its first piece each way with q carries a signature. */
static void call_begin(struct wag_hx *x, int q, uint64_t ssig, uint64_t rsig)
{
	struct hx_peer *pe = &x->peers[q];
	pe->tx0 = pe->sent;
	pe->rx0 = pe->recvd;
	pe->ssig = ssig;
	pe->rsig = rsig;
}

int wag_hx_run(struct wag_hx *x, const struct wag_hx_call *c)
{
	const struct wag_hier_plan *pl = c->plan;
	int rc0 = x->prepare_only ? 0 : reserve(x, &x->tmp, &x->tmp_cap, c->tmp_bytes);
	if (rc0)
		return rc0;
	struct hx_item *it = calloc(pl->n ? pl->n : 1, sizeof(*it));
	size_t *pool = calloc(pl->n ? pl->n : 1, sizeof(*pool));
	struct hx_cursor *cur = calloc(2 * (size_t)x->nranks, sizeof(*cur));
	uint64_t *lens = calloc((size_t)x->nranks * x->cfg.depth, sizeof(*lens));
	int rc = it && pool && cur && lens ? 0 : -ENOMEM;
	/* Every peer of the whole plan first, so no round waits on a connect. */
	struct hx_round all = {.it = it, .n = 0};
	for (size_t i = 0; i < pl->n && rc == 0; i++) {
		const struct wag_hier_move *m = &pl->moves[i];
		if (m->src == x->rank && m->dst != x->rank)
			it[all.n++] = (struct hx_item){.peer = m->dst, .send = 1};
		else if (m->dst == x->rank && m->src != x->rank)
			it[all.n++] = (struct hx_item){.peer = m->src};
	}
	if (rc == 0)
		rc = connect_peers(x, &all);
	/* Preparing, a replay of another call may be using the peers' state. */
	for (int q = 0; q < x->nranks && !x->prepare_only; q++)
		call_begin(x, q, c->sig, c->sig);
	struct hx_run h = {.x = x, .esize = c->esize, .dtype = c->dtype, .op = c->op, .u = c->u, .tx = cur,
			   .rx = cur ? cur + x->nranks : NULL, .pool = pool, .lens = lens};
	for (size_t i = 0; i < pl->n && rc == 0 && !x->prepare_only;) {
		uint32_t round = pl->moves[i].round;
		struct hx_round r = {.it = it, .n = 0};
		for (; i < pl->n && pl->moves[i].round == round; i++) {
			const struct wag_hier_move *m = &pl->moves[i];
			if (m->src == x->rank && m->dst == x->rank)
				it[r.n++] = (struct hx_item){.peer = x->rank, .kind = m->kind,
							     .buf = buf_of(c, x->tmp, m->dbuf, m->doff),
							     .src = buf_of(c, x->tmp, m->sbuf, m->soff), .n = m->count};
			else if (m->src == x->rank)
				it[r.n++] = (struct hx_item){.peer = m->dst, .send = 1, .kind = m->kind,
							     .buf = buf_of(c, x->tmp, m->sbuf, m->soff), .n = m->count};
			else if (m->dst == x->rank)
				it[r.n++] = (struct hx_item){.peer = m->src, .kind = m->kind,
							     .buf = buf_of(c, x->tmp, m->dbuf, m->doff), .n = m->count};
		}
		h.r = &r;
		if (r.n && (rc = snapshot_sends(x, &r, c->esize, c->u)) != 0)
			break;
		rc = r.n ? run_round(&h) : 0;
	}
	free(it);
	free(pool);
	free(cur);
	free(lens);
	return rc;
}

int wag_hx_sendrecv(struct wag_hx *x, const struct weft_p2p_op *ops, const uint64_t *sigs, size_t nops, void *u)
{
	struct hx_item *it = calloc(nops ? nops : 1, sizeof(*it));
	size_t *pool = calloc(nops ? nops : 1, sizeof(*pool));
	struct hx_cursor *cur = calloc(2 * (size_t)x->nranks, sizeof(*cur));
	uint64_t *lens = calloc((size_t)x->nranks * x->cfg.depth, sizeof(*lens));
	int rc = it && pool && cur && lens ? 0 : -ENOMEM;
	struct hx_round r = {.it = it, .n = 0};
	/* The k-th send to itself pairs with its k-th receive from itself: one
	 * local copy each, at the receive's place. */
	size_t self_send = 0, nself = 0; /* receives from itself matched, sends to itself */
	for (size_t i = 0; i < nops && rc == 0; i++) {
		const struct weft_p2p_op *o = &ops[i];
		if (o->peer != x->rank) {
			it[r.n++] = (struct hx_item){.peer = o->peer, .send = o->is_send, .kind = WAG_HM_COPY,
						     .buf = o->buf, .n = o->bytes};
			continue;
		}
		if (o->is_send) {
			nself++;
			continue;
		}
		size_t seen = 0, j = 0;
		for (; j < nops; j++)
			if (ops[j].peer == x->rank && ops[j].is_send && seen++ == self_send)
				break;
		if (j == nops || ops[j].bytes != o->bytes) {
			HX_LOG(x, WEFT_LOG_ERROR, "sendrecv: a receive from this rank itself has no send of %zu bytes to match",
			       o->bytes);
			rc = -EINVAL;
			break;
		}
		self_send++;
		it[r.n++] = (struct hx_item){.peer = x->rank, .kind = WAG_HM_COPY, .buf = o->buf, .src = ops[j].buf,
					     .n = o->bytes};
	}
	if (rc == 0 && nself != self_send) {
		HX_LOG(x, WEFT_LOG_ERROR, "sendrecv: rank %d sends to itself %zu times but receives from itself %zu times",
		       x->rank, nself, self_send);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = connect_peers(x, &r);
	/* Each way, the first message's signature (what its first piece carries). */
	for (int q = 0; q < x->nranks && !x->prepare_only; q++)
		call_begin(x, q, 0, 0);
	for (size_t i = 0; sigs && i < nops && !x->prepare_only; i++) {
		struct hx_peer *pe = &x->peers[ops[i].peer];
		uint64_t *s = ops[i].is_send ? &pe->ssig : &pe->rsig;
		if (ops[i].peer != x->rank && ops[i].bytes && !*s)
			*s = sigs[i];
	}
	struct hx_run h = {.x = x, .r = &r, .esize = 1, .dtype = WEFT_UINT8, .op = -1, .u = u, .tx = cur,
			   .rx = cur ? cur + x->nranks : NULL, .pool = pool, .lens = lens};
	if (rc == 0 && !x->prepare_only)
		rc = snapshot_sends(x, &r, 1, u);
	if (rc == 0 && !x->prepare_only)
		rc = run_round(&h);
	free(it);
	free(pool);
	free(cur);
	free(lens);
	return rc;
}

void wag_hx_prepare(struct wag_hx *x, int on)
{
	x->prepare_only = on;
}

int wag_hx_layout(const struct weft_algo_comm *ac, struct wag_hier_layout *l)
{
	int label[WAG_HIER_MAX_RANKS];
	if (ac->nranks > WAG_HIER_MAX_RANKS)
		return -ENOTSUP;
	for (int r = 0; r < ac->nranks; r++) {
		const struct weft_algo_peer *pe = weft_algo_peer_at(ac, r);
		if (!pe)
			return -ENOTSUP;
		label[r] = pe->host;
	}
	return wag_hier_layout_make(l, ac->nranks, label);
}

int wag_hx_plan(const struct wag_hier_layout *l, int coll, uint64_t count, int root, enum wag_hier_inter how,
		struct wag_hier_plan *p, uint64_t *tmp_elems)
{
	*tmp_elems = 0;
	switch (coll) {
	case WEFT_COLL_ALLREDUCE:
		return wag_hier_allreduce(l, count, how, p);
	case WEFT_COLL_REDUCE_SCATTER:
		*tmp_elems = count * (uint64_t)l->nranks;
		return wag_hier_reduce_scatter(l, count, p);
	case WEFT_COLL_ALLGATHER:
		return wag_hier_allgather(l, count, p);
	case WEFT_COLL_BROADCAST:
		return wag_hier_broadcast(l, count, root, p);
	case WEFT_COLL_REDUCE:
		*tmp_elems = count;
		return wag_hier_reduce(l, count, root, p);
	case WEFT_COLL_ALLTOALL:
		return wag_hier_alltoall(l, count, p);
	default:
		return -EINVAL;
	}
}

int wag_hx_coll(struct wag_hx *x, const struct wag_hier_layout *l, const struct weft_coll_args *a, size_t esize,
		enum wag_hier_inter how, void *u)
{
	int has = a->size >= offsetof(struct weft_coll_args, p2p_sig) + sizeof(a->p2p_sig);
	if (a->coll == WEFT_COLL_SENDRECV)
		return wag_hx_sendrecv(x, (const struct weft_p2p_op *)a->sendbuf, has && a->sig ? a->p2p_sig : NULL,
				       a->count, u);
	int reducing = weft_kit_coll_reduces(a->coll);
	struct wag_hier_plan plan;
	uint64_t tmp = 0;
	int rc = wag_hx_plan(l, (int)a->coll, a->count, a->root, how, &plan, &tmp);
	if (rc) {
		HX_LOG(x, WEFT_LOG_ERROR, "cross-host schedule: cannot build the plan: %s", weft_kit_strerror(rc));
		return rc;
	}
	/* An average sums, then divides where the sum ends up. */
	int op = reducing ? (a->op == WEFT_AVG ? WEFT_SUM : (int)a->op) : -1;
	struct wag_hx_call c = {.plan = &plan, .in = a->sendbuf, .out = a->recvbuf, .tmp_bytes = tmp * esize,
				.esize = esize, .dtype = (int)a->dtype, .op = op, .u = u, .sig = has ? a->sig : 0};
	rc = wag_hx_run(x, &c);
	wag_hier_plan_free(&plan);
	if (rc == 0 && reducing && a->op == WEFT_AVG && (a->coll != WEFT_COLL_REDUCE || a->root == x->rank)) {
		rc = x->ops.divide(u, (int)a->dtype, a->recvbuf, a->count, x->nranks);
		if (rc == 0)
			rc = x->ops.sync(u);
	}
	return rc;
}
