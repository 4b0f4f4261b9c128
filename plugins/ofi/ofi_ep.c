/* SPDX-License-Identifier: Apache-2.0 */
/* ofi plugin: endpoints (one per peer, sharing their provider's RDM endpoint),
 * puts, signals kept behind earlier puts, flush, and completion progress. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>

#include "ofi.h"

/* Endpoint address blob, little-endian: magic u32, version u16, name length u16,
 * provider name [16] (NUL-padded), then the provider's fi_getname bytes. */
#define OFI_ADDR_MAGIC 0x45494657u /* "WFIE" */
#define OFI_ADDR_VERSION 1
#define OFI_ADDR_HDR 24

/* One put or signal, from submission until every chunk of it has completed.
 * An endpoint keeps its ops in submission order; that order is what lets a
 * signal wait for exactly the ops posted before it. */
struct ofi_op {
	struct ofi_op *next, *prev;
	struct ofi_ep *ep;   /* NULL once orphaned by disconnect */
	bool is_signal;
	char *lbuf;          /* source; for a signal, &value */
	void *desc;          /* local MR descriptor (FI_MR_LOCAL) */
	uint64_t raddr;      /* target address of byte 0 (virtual or offset) */
	uint64_t rkey;
	size_t len;
	size_t posted;       /* bytes handed to the provider so far */
	int chunks_out;      /* posted chunks not yet completed */
	uint64_t value;      /* the signal's token */
	struct fid_mr *sig_mr; /* registration of value, only when FI_MR_LOCAL and no inject */
	struct ofi_req *reqs;  /* its posted chunks not yet completed (chunks_out of them) */
};

/* The context libfabric hands back in a completion: one per posted chunk, since
 * providers with FI_CONTEXT mode own the fi_context until it completes. */
struct ofi_req {
	struct fi_context2 fctx;
	struct ofi_op *op;
	struct ofi_req *next, *prev; /* in op->reqs */
};

static void req_unlink(struct ofi_req *req)
{
	if (req->prev)
		req->prev->next = req->next;
	else
		req->op->reqs = req->next;
	if (req->next)
		req->next->prev = req->prev;
}

struct ofi_ep {
	struct ofi_ctx *ctx;
	struct ofi_dom *dom;
	int dom_idx;
	int peer_rank;
	enum weft_peer_class peer_class;
	bool connected;
	fi_addr_t fiaddr;
	char peer_str[128];
	struct ofi_op *head, *tail;
	struct ofi_op *unposted; /* first op not yet fully posted, NULL if none */
	int64_t nops;            /* ops in the list */
	int error;               /* sticky: first failure of an op on this endpoint */
	struct ofi_ep *next, *prev;
};

static void list_unlink(struct ofi_op **head, struct ofi_op **tail, struct ofi_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		*head = op->next;
	if (op->next)
		op->next->prev = op->prev;
	else if (tail)
		*tail = op->prev;
	op->next = op->prev = NULL;
}

static void op_free(struct ofi_op *op)
{
	/* Chunks whose completion never came (an orphan freed at close, after its
	 * domain is gone and the provider has let go of their contexts). */
	while (op->reqs) {
		struct ofi_req *req = op->reqs;
		req_unlink(req);
		ofi_core->free(req);
	}
	if (op->sig_mr)
		fi_close(&op->sig_mr->fid);
	ofi_core->free(op);
}

/* Drops an op whose chunks have all completed (or that will post no more). */
static void op_retire(struct ofi_ctx *ctx, struct ofi_op *op)
{
	struct ofi_ep *ep = op->ep;
	if (ep) {
		if (ep->unposted == op)
			ep->unposted = op->next;
		list_unlink(&ep->head, &ep->tail, op);
		ep->nops--;
	} else {
		list_unlink(&ctx->orphans, NULL, op);
	}
	op_free(op);
}

static int post_chunk(struct ofi_ep *ep, struct ofi_op *op)
{
	struct ofi_dom *d = ep->dom;
	size_t n = op->len - op->posted;
	if (n > d->chunk)
		n = d->chunk;
	struct ofi_req *req = ofi_core->calloc(1, sizeof(*req));
	if (!req)
		return -ENOMEM;
	req->op = op;
	struct iovec iov = {.iov_base = op->lbuf + op->posted, .iov_len = n};
	void *desc = op->desc;
	struct fi_rma_iov riov = {.addr = op->raddr + op->posted, .len = n, .key = op->rkey};
	struct fi_msg_rma msg = {
		.msg_iov = &iov,
		.desc = &desc,
		.iov_count = 1,
		.addr = ep->fiaddr,
		.rma_iov = &riov,
		.rma_iov_count = 1,
		.context = &req->fctx,
	};
	uint64_t flags = FI_COMPLETION | d->op_flags;
	if (op->is_signal && d->inject_size >= sizeof(uint64_t))
		flags |= FI_INJECT;
	ssize_t rc = fi_writemsg(d->ep, &msg, flags);
	if (rc < 0) {
		ofi_core->free(req);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		OFI_ERR("fi_writemsg of %zu bytes to rank %d at 0x%llx failed: %s (%d)", n, ep->peer_rank,
			(unsigned long long)riov.addr, fi_strerror((int)-rc), (int)rc);
		return ofi_code((int)rc);
	}
	/* Completions are read only by progress, under the same context lock, so
	 * linking after the post cannot race with req_done. */
	req->next = op->reqs;
	if (op->reqs)
		op->reqs->prev = req;
	op->reqs = req;
	op->posted += n;
	op->chunks_out++;
	return 0;
}

/* Posts queued ops in submission order until the provider pushes back or a
 * signal must wait. In OFI_SIG_WAIT mode a signal goes out only once it is the
 * oldest op of its endpoint, i.e. every op submitted before it has completed
 * with delivery-complete semantics, so its data is in the peer's memory. In
 * OFI_SIG_ORDERED mode the provider's write-after-write ordering (FI_ORDER_RMA_WAW,
 * for writes up to max_order_waw_size, which bounds our chunks) keeps the token
 * behind the data once the earlier writes are posted. Returns 0, -EAGAIN, or a
 * hard error (also made sticky on the endpoint). */
static int ep_post_pending(struct ofi_ep *ep)
{
	struct ofi_op *op = ep->unposted;
	while (op) {
		if (op->is_signal && ep->dom->sig_mode == OFI_SIG_WAIT && op != ep->head)
			break;
		while (op->posted < op->len) {
			int rc = post_chunk(ep, op);
			if (rc == -EAGAIN) {
				ep->unposted = op;
				return -EAGAIN;
			}
			if (rc < 0) {
				if (!ep->error)
					ep->error = rc;
				/* Post nothing more of it; it retires with its chunks. */
				op->len = op->posted;
				ep->unposted = op->next;
				if (op->chunks_out == 0)
					op_retire(ep->ctx, op);
				return rc;
			}
		}
		op = op->next;
	}
	ep->unposted = op;
	return 0;
}

static bool is_peer_errno(int e)
{
	switch (e) {
	case FI_EHOSTUNREACH:
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_ETIMEDOUT:
	case FI_ENETUNREACH:
	case FI_ENETDOWN:
	case EPIPE:
		return true;
	default:
		return false;
	}
}

/* A lost connection is the peer's failure, not the transport's. tcp (through
 * ofi_rxm) cancels the ops of a broken connection with FI_ECANCELED and puts the
 * socket's errno in prov_errno, so that is consulted too. */
static int cq_error_code(const struct fi_cq_err_entry *err)
{
	if (is_peer_errno(err->err) || (err->err == FI_ECANCELED && is_peer_errno(err->prov_errno)))
		return -WEFT_ERR_PEER;
	return -WEFT_ERR_TRANSPORT;
}

static void req_done(struct ofi_ctx *ctx, void *op_context, int err)
{
	if (!op_context)
		return;
	struct ofi_req *req = (struct ofi_req *)op_context;
	struct ofi_op *op = req->op;
	req_unlink(req);
	ofi_core->free(req);
	op->chunks_out--;
	if (err && op->ep && !op->ep->error)
		op->ep->error = err;
	if (op->chunks_out == 0 && op->posted == op->len)
		op_retire(ctx, op);
}

static int dom_progress(struct ofi_ctx *ctx, struct ofi_dom *d)
{
	int ret = 0;
	/* Bounded, so that progress stays non-blocking under a flood of completions. */
	for (int iter = 0; iter < 64; iter++) {
		struct fi_cq_entry ents[32];
		ssize_t n = fi_cq_read(d->cq, ents, 32);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				req_done(ctx, ents[i].op_context, 0);
			continue;
		}
		if (n == -FI_EAGAIN)
			break;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err;
			memset(&err, 0, sizeof(err));
			ssize_t e = fi_cq_readerr(d->cq, &err, 0);
			if (e < 0) {
				if (e == -FI_EAGAIN)
					continue;
				return ofi_errno("fi_cq_readerr", (int)e);
			}
			char msg[256];
			const char *pm = fi_cq_strerror(d->cq, err.prov_errno, err.err_data, msg, sizeof(msg));
			int code = cq_error_code(&err);
			struct ofi_req *req = err.op_context;
			int rank = req && req->op && req->op->ep ? req->op->ep->peer_rank : -1;
			OFI_ERR("provider %s: operation to rank %d failed: %s (%d); provider says: %s", d->prov, rank,
				fi_strerror(err.err), err.err, pm ? pm : "-");
			req_done(ctx, err.op_context, code);
			if (!ret)
				ret = code;
			continue;
		}
		return ofi_errno("fi_cq_read", (int)n);
	}
	return ret;
}

int ofi_wait_fds(void *tc, int *fds, int max)
{
	struct ofi_ctx *ctx = tc;
	int n = 0;
	if (!ctx)
		return -EINVAL;
	for (struct ofi_ep *ep = ctx->eps; ep; ep = ep->next)
		if (ep->unposted)
			return -EAGAIN; /* posting them is progress's */
	for (int k = 0; k < ctx->ndoms && n < max; k++) {
		struct ofi_dom *d = &ctx->doms[k];
		if (d->wait_fd < 0 || !d->cq)
			continue;
		struct fid *f = &d->cq->fid;
		int rc = fi_trywait(d->fabric, &f, 1);
		if (rc == -FI_EAGAIN)
			return -EAGAIN;
		if (rc == 0)
			fds[n++] = d->wait_fd;
	}
	return n;
}

int ofi_progress(void *tc)
{
	struct ofi_ctx *ctx = tc;
	int ret = 0;
	if (!ctx)
		return -EINVAL;
	for (int k = 0; k < ctx->ndoms; k++) {
		int rc = dom_progress(ctx, &ctx->doms[k]);
		if (rc < 0 && !ret)
			ret = rc;
	}
	for (struct ofi_ep *ep = ctx->eps; ep; ep = ep->next) {
		if (ep->unposted) {
			int rc = ep_post_pending(ep);
			if (rc < 0 && rc != -EAGAIN && !ret)
				ret = rc;
		}
	}
	return ret;
}

int ofi_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **epp)
{
	struct ofi_ctx *ctx = tc;
	if (!ctx || !peer || !len || !epp || peer->size < offsetof(struct weft_tp_peer, addr) + sizeof(peer->addr))
		return -EINVAL;
	int idx;
	switch (peer->peer_class) {
	case WEFT_PEER_SAME_PROCESS:
	case WEFT_PEER_SAME_HOST:
		idx = ctx->local_dom;
		break;
	case WEFT_PEER_OTHER_HOST:
		idx = ctx->remote_dom;
		break;
	default:
		OFI_ERR("endpoint: unknown peer class %d for rank %d", (int)peer->peer_class, peer->rank);
		return -EINVAL;
	}
	if (idx < 0) {
		OFI_DBG("endpoint: no provider opened for peer class %d (rank %d)", (int)peer->peer_class, peer->rank);
		return -EHOSTUNREACH;
	}
	struct ofi_dom *d = &ctx->doms[idx];
	int rc = ofi_dom_ep_ensure(d);
	if (rc < 0)
		return rc;
	size_t need = OFI_ADDR_HDR + d->namelen;
	if (!addr || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	struct ofi_ep *ep = ofi_core->calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->ctx = ctx;
	ep->dom = d;
	ep->dom_idx = idx;
	ep->peer_rank = peer->rank;
	ep->peer_class = peer->peer_class;
	ep->fiaddr = FI_ADDR_NOTAVAIL;
	unsigned char *p = addr;
	memset(p, 0, OFI_ADDR_HDR);
	weft_kit_le_put32(p, OFI_ADDR_MAGIC);
	weft_kit_le_put16(p + 4, OFI_ADDR_VERSION);
	weft_kit_le_put16(p + 6, (uint16_t)d->namelen);
	memcpy(p + 8, d->prov, strlen(d->prov));
	memcpy(p + OFI_ADDR_HDR, d->name, d->namelen);
	ep->next = ctx->eps;
	if (ctx->eps)
		ctx->eps->prev = ep;
	ctx->eps = ep;
	*len = need;
	*epp = ep;
	return 0;
}

int ofi_connect(void *epv, const void *peer_addr, size_t len)
{
	struct ofi_ep *ep = epv;
	const unsigned char *p = peer_addr;
	char prov[OFI_PROV_NAME_MAX];
	if (!ep || (!p && len > 0))
		return -EINVAL;
	if (ep->connected) {
		OFI_ERR("connect: endpoint to rank %d is already connected", ep->peer_rank);
		return -EINVAL;
	}
	if (len < OFI_ADDR_HDR || weft_kit_le_get32(p) != OFI_ADDR_MAGIC || weft_kit_le_get16(p + 4) != OFI_ADDR_VERSION) {
		OFI_ERR("connect: address from rank %d is malformed (%zu bytes, bad header)", ep->peer_rank, len);
		return -WEFT_ERR_PROTOCOL;
	}
	size_t namelen = weft_kit_le_get16(p + 6);
	if (namelen == 0 || namelen > OFI_EP_NAME_MAX || namelen != len - OFI_ADDR_HDR) {
		OFI_ERR("connect: address from rank %d names %zu address bytes but carries %zu", ep->peer_rank, namelen,
			len - OFI_ADDR_HDR);
		return -WEFT_ERR_PROTOCOL;
	}
	if (ofi_prov_name_check(p + 8, prov) < 0) {
		OFI_ERR("connect: address from rank %d has no valid provider name", ep->peer_rank);
		return -WEFT_ERR_PROTOCOL;
	}
	if (strcmp(prov, ep->dom->prov) != 0) {
		OFI_ERR("connect: rank %d reaches this rank through provider '%s', this endpoint uses '%s' "
			"(set ofi.provider* alike on every rank)",
			ep->peer_rank, prov, ep->dom->prov);
		return -WEFT_ERR_PROTOCOL;
	}
	const unsigned char *name = p + OFI_ADDR_HDR;
	uint32_t fmt = ep->dom->info->addr_format;
	/* A string address must end inside the buffer, or the provider reads past it. */
	if (fmt == FI_ADDR_STR && memchr(name, '\0', namelen) == NULL) {
		OFI_ERR("connect: string address from rank %d is not NUL-terminated", ep->peer_rank);
		return -WEFT_ERR_PROTOCOL;
	}
	if (fmt == FI_SOCKADDR_IN && namelen != sizeof(struct sockaddr_in)) {
		OFI_ERR("connect: rank %d sent a %zu-byte address, %s uses %zu-byte IPv4 addresses", ep->peer_rank,
			namelen, ep->dom->prov, sizeof(struct sockaddr_in));
		return -WEFT_ERR_PROTOCOL;
	}
	unsigned char copy[OFI_EP_NAME_MAX + 1];
	memcpy(copy, name, namelen);
	copy[namelen] = '\0';
	fi_addr_t fa = FI_ADDR_NOTAVAIL;
	int rc = fi_av_insert(ep->dom->av, copy, 1, &fa, 0, NULL);
	if (rc < 0)
		return ofi_errno_at(rc, "connect: fi_av_insert of rank %d's address into the %s address vector",
				    ep->peer_rank, ep->dom->prov);
	if (rc != 1) {
		OFI_ERR("connect: cannot add rank %d's address to the %s address vector (fi_av_insert added %d)",
			ep->peer_rank, ep->dom->prov, rc);
		return -WEFT_ERR_PROTOCOL;
	}
	size_t slen = sizeof(ep->peer_str);
	if (!fi_av_straddr(ep->dom->av, copy, ep->peer_str, &slen))
		snprintf(ep->peer_str, sizeof(ep->peer_str), "?");
	ep->peer_str[sizeof(ep->peer_str) - 1] = '\0';
	ep->fiaddr = fa;
	ep->connected = true;
	return 0;
}

int ofi_disconnect(void *epv)
{
	struct ofi_ep *ep = epv;
	if (!ep)
		return 0;
	struct ofi_ctx *ctx = ep->ctx;
	bool orphaned = false;
	/* Ops still owned by the provider must outlive this endpoint: their
	 * completions arrive later and are retired from the context's list. */
	while (ep->head) {
		struct ofi_op *op = ep->head;
		list_unlink(&ep->head, &ep->tail, op);
		if (op->chunks_out > 0) {
			op->ep = NULL;
			op->len = op->posted;
			op->next = ctx->orphans;
			if (ctx->orphans)
				ctx->orphans->prev = op;
			ctx->orphans = op;
			orphaned = true;
		} else {
			op_free(op);
		}
	}
	if (ep->connected && !orphaned) {
		int rc = fi_av_remove(ep->dom->av, &ep->fiaddr, 1, 0);
		if (rc < 0)
			ofi_errno_at(rc, "disconnect: fi_av_remove of rank %d's address", ep->peer_rank);
	}
	if (ep->prev)
		ep->prev->next = ep->next;
	else
		ctx->eps = ep->next;
	if (ep->next)
		ep->next->prev = ep->prev;
	ofi_core->free(ep);
	return 0;
}

void ofi_free_orphans(struct ofi_ctx *ctx)
{
	while (ctx->orphans) {
		struct ofi_op *op = ctx->orphans;
		ctx->orphans = op->next;
		op_free(op);
	}
}

static const struct ofi_rmh_ent *remote_entry(const struct ofi_ep *ep, const struct ofi_rmh *r)
{
	for (int i = 0; i < r->count; i++) {
		const struct ofi_rmh_ent *e = &r->ent[i];
		if (strcmp(e->prov, ep->dom->prov) != 0)
			continue;
		if ((e->flags & OFI_RENT_RAW) && e->mapped_dom != ep->dom_idx)
			return NULL;
		return e;
	}
	return NULL;
}

/* Shared checks of put and signal; sets *e to the peer's entry. */
static int check_op(struct ofi_ep *ep, const struct ofi_rmh *r, uint64_t roff, size_t len, const char *what,
		    const struct ofi_rmh_ent **e)
{
	if (!ep || !r)
		return -EINVAL;
	if (!ep->connected) {
		OFI_ERR("%s: endpoint to rank %d is not connected", what, ep->peer_rank);
		return -EINVAL;
	}
	if (ep->error)
		return ep->error;
	*e = remote_entry(ep, r);
	if (!*e) {
		/* A peer registers CUDA memory only with its providers that have
		 * FI_HMEM (ofi_mem_register): the region is real, this path is not. */
		OFI_ERR("%s: rank %d's region has no key for provider '%s' (registered with '%s'%s%s only: device "
			"memory where '%s' has no FI_HMEM)", what, r->peer, ep->dom->prov, r->ent[0].prov,
			r->count > 1 ? ", " : "", r->count > 1 ? r->ent[1].prov : "", ep->dom->prov);
		return -ENOTSUP;
	}
	if (roff > (*e)->len || len > (*e)->len - roff) {
		OFI_ERR("%s: remote range %llu+%zu is outside rank %d's %llu-byte region", what,
			(unsigned long long)roff, len, r->peer, (unsigned long long)(*e)->len);
		return -EINVAL;
	}
	return 0;
}

/* Admission: at most max_inflight ops per endpoint (progressing first). */
static int admit(struct ofi_ep *ep)
{
	if (ep->nops < ep->ctx->max_inflight)
		return 0;
	int rc = ofi_progress(ep->ctx);
	if (ep->error)
		return ep->error;
	(void)rc;
	return ep->nops < ep->ctx->max_inflight ? 0 : -EAGAIN;
}

static void op_append(struct ofi_ep *ep, struct ofi_op *op)
{
	op->ep = ep;
	op->prev = ep->tail;
	if (ep->tail)
		ep->tail->next = op;
	else
		ep->head = op;
	ep->tail = op;
	ep->nops++;
	if (!ep->unposted)
		ep->unposted = op;
}

int ofi_put(void *epv, void *rmhv, uint64_t roff, void *mhv, uint64_t loff, size_t len)
{
	struct ofi_ep *ep = epv;
	struct ofi_mh *m = mhv;
	const struct ofi_rmh_ent *e = NULL; /* set by check_op; gcc -O3 cannot see that */
	int rc;
	if (!m)
		return -EINVAL;
	if ((rc = check_op(ep, rmhv, roff, len, "put", &e)) < 0)
		return rc;
	if (loff > m->len || len > m->len - loff) {
		OFI_ERR("put to rank %d: local range %llu+%zu is outside the %zu-byte region", ep->peer_rank,
			(unsigned long long)loff, len, m->len);
		return -EINVAL;
	}
	if (!m->mr[ep->dom_idx]) {
		if (m->type == WEFT_MEM_CUDA) {
			OFI_ERR("put: the local region is CUDA memory, which provider '%s' (toward rank %d) cannot "
				"register: it has no FI_HMEM", ep->dom->prov, ep->peer_rank);
			return -ENOTSUP;
		}
		OFI_ERR("put to rank %d: local region is not registered with provider '%s'", ep->peer_rank,
			ep->dom->prov);
		return -EINVAL;
	}
	if (len == 0)
		return 0;
	if ((rc = admit(ep)) < 0)
		return rc;
	struct ofi_op *op = ofi_core->calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->lbuf = (char *)m->base + loff;
	op->desc = fi_mr_desc(m->mr[ep->dom_idx]);
	op->raddr = ((e->flags & OFI_RENT_VIRT) ? e->addr : 0) + roff;
	op->rkey = e->key;
	op->len = len;
	op_append(ep, op);
	rc = ep_post_pending(ep);
	return rc == -EAGAIN ? 0 : rc;
}

int ofi_signal(void *epv, void *rmhv, uint64_t roff, uint64_t value)
{
	struct ofi_ep *ep = epv;
	const struct ofi_rmh_ent *e = NULL; /* set by check_op; gcc -O3 cannot see that */
	int rc;
	if ((rc = check_op(ep, rmhv, roff, sizeof(uint64_t), "signal", &e)) < 0)
		return rc;
	uint64_t raddr = ((e->flags & OFI_RENT_VIRT) ? e->addr : 0) + roff;
	/* One aligned 8-byte write: the token must never be seen half-written. */
	if (raddr % sizeof(uint64_t) != 0) {
		OFI_ERR("signal: token at offset %llu of rank %d's region is not 8-byte aligned",
			(unsigned long long)roff, ((const struct ofi_rmh *)rmhv)->peer);
		return -EINVAL;
	}
	if ((rc = admit(ep)) < 0)
		return rc;
	struct ofi_op *op = ofi_core->calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->is_signal = true;
	op->value = value;
	op->lbuf = (char *)&op->value;
	op->raddr = raddr;
	op->rkey = e->key;
	op->len = sizeof(uint64_t);
	if ((ep->dom->mr_mode & FI_MR_LOCAL) && ep->dom->inject_size < sizeof(uint64_t)) {
		rc = fi_mr_reg(ep->dom->domain, &op->value, sizeof(op->value), FI_WRITE, 0,
			       (ep->dom->mr_mode & FI_MR_PROV_KEY) ? 0 : ep->ctx->next_key++, 0, &op->sig_mr, NULL);
		if (rc < 0) {
			ofi_core->free(op);
			return ofi_errno_at(rc, "signal to rank %d: fi_mr_reg of the token", ep->peer_rank);
		}
		op->desc = fi_mr_desc(op->sig_mr);
	}
	op_append(ep, op);
	rc = ep_post_pending(ep);
	return rc == -EAGAIN ? 0 : rc;
}

int ofi_flush(void *epv)
{
	struct ofi_ep *ep = epv;
	if (!ep)
		return -EINVAL;
	if (!ep->error && ep->head)
		ofi_progress(ep->ctx);
	if (ep->error)
		return ep->error;
	return ep->head ? -EAGAIN : 0;
}

int ofi_ep_describe(void *epv, char *buf, size_t len)
{
	struct ofi_ep *ep = epv;
	if (!ep || !buf || len == 0)
		return -EINVAL;
	const struct fi_info *fi = ep->dom->info;
	int n = snprintf(buf, len, "provider=%s fabric=%s domain=%s peer=%s rank=%d signal=%s", ep->dom->prov,
			 fi->fabric_attr->name, fi->domain_attr->name, ep->connected ? ep->peer_str : "(unconnected)",
			 ep->peer_rank, ep->dom->sig_mode == OFI_SIG_ORDERED ? "ordered" : "wait");
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}
