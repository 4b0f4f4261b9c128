/* SPDX-License-Identifier: Apache-2.0 */
/* ucx plugin: endpoints (one UCP endpoint per peer, from exchanged worker
 * addresses), puts, signals kept behind earlier puts, flush, progress, peer
 * failures, and the description of what UCX chose for a connection. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ucx.h"

/* Endpoint address blob, little-endian: magic u32 | version u16 | reserved u16
 * (0) | worker address length u32 | pid u32 | pid namespace u64 | worker
 * address bytes. pid and namespace (the inode of /proc/self/ns/pid, 0 if
 * unknown) let a same-host peer notice this process is gone where UCX cannot. */
#define UCX_ADDR_MAGIC 0x41435557u /* "WUCA" */
#define UCX_ADDR_VERSION 1
#define UCX_ADDR_HDR 24
/* How often an endpoint without UCX failure detection looks at its peer's pid. */
#define UCX_ALIVE_CHECK_NS 100000000ll
/* ucp_ep_create reads the address without a length: the copy it gets is
 * followed by zeros, so a lying address ends in them rather than past it. */
#define UCX_ADDR_SLACK 512

enum ucx_req_kind { UCX_REQ_PUT = 1, UCX_REQ_TOKEN = 2, UCX_REQ_FLUSH = 3 };

/* A signal: queued until the puts before it are flushed (UCX_SIG_FLUSH), then
 * posted as an atomic swap; value and reply stay here until it completes. */
struct ucx_sig {
	struct ucx_sig *next;
	uint64_t raddr;
	ucp_rkey_h rkey;
	uint64_t after; /* ops posted on the endpoint before this signal */
	uint64_t value;
	uint64_t reply;
};

/* The plugin's part of every UCP request (UCP_PARAM_FIELD_REQUEST_SIZE): set
 * when a call returns the request, read by the completion callback. */
struct ucx_req {
	struct ucx_ep *ep;
	struct ucx_req *next, *prev;
	enum ucx_req_kind kind;
	uint64_t seq;        /* FLUSH: the posted count it covers */
	struct ucx_sig *sig; /* TOKEN: its buffers */
};

struct ucx_ep {
	struct ucx_ctx *ctx;
	struct ucx_ep *next, *prev; /* ctx->eps, or ctx's closing list once disconnected */
	int peer_rank;
	enum weft_peer_class peer_class;
	ucp_ep_h uep;          /* NULL until connect, and once closed */
	bool connected;
	bool peer_mode;        /* UCP_ERR_HANDLING_MODE_PEER */
	pid_t peer_pid;        /* > 0: watch this process (same host, same pid namespace, no peer mode) */
	int64_t next_alive_check; /* CLOCK_MONOTONIC ns */
	bool closing;          /* disconnected: waiting for UCX to finish with it */
	void *close_req;
	int error;             /* sticky: first failure on this endpoint */
	bool lost_work;        /* the failure hit operations not known complete */
	int64_t fail_ns;       /* when the failure was seen (CLOCK_MONOTONIC) */
	struct ucx_req *reqs;  /* outstanding requests */
	int64_t inflight;      /* puts and signals not yet complete (queued ones too) */
	uint64_t posted;       /* ops handed to UCX */
	uint64_t flushed;      /* `posted` as it was when the last completed flush began */
	uint64_t last_token;   /* `posted` right after the latest token */
	bool flushing;         /* a flush request is outstanding */
	struct ucx_sig *sig_head, *sig_tail;
	struct ucx_rkey_ent *zombies; /* keys released while ops could still use them */
};

static uint64_t pid_namespace(void)
{
	struct stat st;
	if (stat("/proc/self/ns/pid", &st) != 0)
		return 0;
	return ((uint64_t)st.st_dev << 32) ^ (uint64_t)st.st_ino;
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* True when pid is gone or a zombie (dead, not yet reaped). */
static bool process_gone(pid_t pid)
{
	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')'. */
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static void ep_fail_as(struct ucx_ep *ep, ucs_status_t st, const char *what, const char *why);

/* For endpoints UCX does not watch: a peer process that is gone fails the
 * endpoint as a lost connection would. Rate-limited. */
static void check_alive(struct ucx_ep *ep)
{
	if (ep->peer_pid <= 0 || ep->error)
		return;
	int64_t t = now_ns();
	if (t < ep->next_alive_check)
		return;
	ep->next_alive_check = t + UCX_ALIVE_CHECK_NS;
	if (process_gone(ep->peer_pid)) {
		char why[64];
		snprintf(why, sizeof(why), "its process %d is gone", (int)ep->peer_pid);
		ep_fail_as(ep, UCS_ERR_CONNECTION_RESET, "connection", why);
	}
}

size_t ucx_request_size(void)
{
	return sizeof(struct ucx_req);
}

bool ucx_ep_busy(const struct ucx_ep *ep)
{
	return ep->reqs || ep->sig_head || ep->closing;
}

void ucx_ep_add_zombie(struct ucx_ep *ep, struct ucx_rkey_ent *e)
{
	e->next = ep->zombies;
	ep->zombies = e;
}

static void drop_zombies(struct ucx_ep *ep)
{
	while (ep->zombies) {
		struct ucx_rkey_ent *e = ep->zombies;
		ep->zombies = e->next;
		ucp_rkey_destroy(e->rkey);
		ucx_core->free(e);
	}
}

/* Operations posted and not known to be complete at the peer. */
static bool has_work(const struct ucx_ep *ep)
{
	return ep->reqs || ep->sig_head || ep->inflight > 0 || ep->flushed < ep->posted;
}

/* Records the endpoint's first failure, logged once, with why (or UCX's
 * message where why is NULL). A failure while the endpoint had work is also
 * reported by the next progress. */
static void ep_fail_as(struct ucx_ep *ep, ucs_status_t st, const char *what, const char *why)
{
	if (ep->error)
		return;
	ep->error = ucx_code(st);
	if (ep->error == -EAGAIN || ep->error == 0)
		ep->error = -WEFT_ERR_TRANSPORT;
	ep->fail_ns = now_ns();
	/* A peer that closes its end after the last exchange looks the same as
	 * one that died; it only matters when work of ours was still open. */
	bool busy = has_work(ep) || ep->lost_work;
	char ucs[96];
	if (!why) {
		snprintf(ucs, sizeof(ucs), "%s (%d)", ucs_status_string(st), (int)st);
		why = ucs;
	}
	UCX_LOG(busy ? WEFT_LOG_ERROR : WEFT_LOG_INFO, "%s to rank %d failed%s: %s", what, ep->peer_rank,
		busy ? "" : " while idle (the peer closed or died)", why);
	if (busy) {
		ep->lost_work = true;
		if (!ep->ctx->pending_error) {
			ep->ctx->pending_error = ep->error;
			ep->ctx->pending_ns = ep->fail_ns;
		}
	}
}

static void ep_fail(struct ucx_ep *ep, ucs_status_t st, const char *what)
{
	ep_fail_as(ep, st, what, NULL);
}

static void req_link(struct ucx_ep *ep, struct ucx_req *rq, enum ucx_req_kind kind)
{
	rq->ep = ep;
	rq->kind = kind;
	rq->sig = NULL;
	rq->seq = 0;
	rq->prev = NULL;
	rq->next = ep->reqs;
	if (ep->reqs)
		ep->reqs->prev = rq;
	ep->reqs = rq;
}

static void req_unlink(struct ucx_ep *ep, struct ucx_req *rq)
{
	if (rq->prev)
		rq->prev->next = rq->next;
	else
		ep->reqs = rq->next;
	if (rq->next)
		rq->next->prev = rq->prev;
	rq->next = rq->prev = NULL;
}

/* Completion of every request the plugin makes (UCX calls it from progress). */
static void req_done(void *request, ucs_status_t status, void *user_data)
{
	(void)user_data;
	struct ucx_req *rq = request;
	struct ucx_ep *ep = rq->ep;
	req_unlink(ep, rq);
	switch (rq->kind) {
	case UCX_REQ_FLUSH:
		ep->flushing = false;
		if (status == UCS_OK) {
			if (rq->seq > ep->flushed)
				ep->flushed = rq->seq;
		} else {
			ep->lost_work = true;
			ep_fail(ep, status, "flush");
		}
		break;
	case UCX_REQ_TOKEN:
		ucx_core->free(rq->sig);
		/* A swap completes when its reply arrives, so it was performed at the
		 * peer; the ops before it were complete there first (a flush or a
		 * fence kept it behind them). */
		if (status == UCS_OK && rq->seq > ep->flushed)
			ep->flushed = rq->seq;
		/* fall through */
	case UCX_REQ_PUT:
		ep->inflight--;
		if (status != UCS_OK) {
			ep->lost_work = true;
			ep_fail(ep, status, rq->kind == UCX_REQ_PUT ? "put" : "signal");
		}
		break;
	}
	ucp_request_free(request);
}

static void ep_err_cb(void *arg, ucp_ep_h uep, ucs_status_t status)
{
	(void)uep;
	struct ucx_ep *ep = arg;
	if (ep->closing)
		return;
	ep_fail(ep, status, "connection");
}

/* Starts an endpoint flush covering every op posted so far. */
static int start_flush(struct ucx_ep *ep)
{
	ucp_request_param_t prm;
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK;
	prm.cb.send = req_done;
	uint64_t target = ep->posted;
	ucs_status_ptr_t sp = ucp_ep_flush_nbx(ep->uep, &prm);
	if (sp == NULL) {
		ep->flushed = target;
		return 0;
	}
	if (UCS_PTR_IS_ERR(sp)) {
		ep_fail(ep, UCS_PTR_STATUS(sp), "flush");
		return ep->error;
	}
	struct ucx_req *rq = sp;
	req_link(ep, rq, UCX_REQ_FLUSH);
	rq->seq = target;
	ep->flushing = true;
	return 0;
}

/* Posts a signal's token: one 64-bit atomic swap, so the peer sees the old
 * value or the new one, never a mix. */
static int post_token(struct ucx_ep *ep, struct ucx_sig *s)
{
	ucp_request_param_t prm;
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER |
			   UCP_OP_ATTR_FIELD_MEMORY_TYPE;
	prm.cb.send = req_done;
	prm.datatype = ucp_dt_make_contig(sizeof(uint64_t));
	prm.reply_buffer = &s->reply;
	prm.memory_type = UCS_MEMORY_TYPE_HOST;
	ucs_status_ptr_t sp = ucp_atomic_op_nbx(ep->uep, UCP_ATOMIC_OP_SWAP, &s->value, 1, s->raddr, s->rkey, &prm);
	ep->posted++;
	ep->last_token = ep->posted;
	if (sp == NULL) {
		ucx_core->free(s);
		ep->inflight--;
		if (ep->posted > ep->flushed && ep->flushed >= ep->posted - 1)
			ep->flushed = ep->posted;
		return 0;
	}
	if (UCS_PTR_IS_ERR(sp)) {
		ucx_core->free(s);
		ep->inflight--;
		ep->lost_work = true;
		ep_fail(ep, UCS_PTR_STATUS(sp), "signal");
		return ep->error;
	}
	struct ucx_req *rq = sp;
	req_link(ep, rq, UCX_REQ_TOKEN);
	rq->sig = s;
	rq->seq = ep->posted;
	return 0;
}

/* Posts queued signals whose earlier ops are flushed, starting flushes as
 * needed. A token must also stay behind the token before it (the peer's value
 * only grows), so that one counts as an earlier op too. */
static int ep_advance(struct ucx_ep *ep)
{
	while (ep->sig_head && !ep->error) {
		struct ucx_sig *s = ep->sig_head;
		uint64_t need = s->after > ep->last_token ? s->after : ep->last_token;
		if (ep->flushed < need) {
			if (ep->flushing)
				return 0;
			int rc = start_flush(ep);
			if (rc < 0)
				return rc;
			if (ep->flushed < need)
				return 0;
		}
		ep->sig_head = s->next;
		if (!ep->sig_head)
			ep->sig_tail = NULL;
		int rc = post_token(ep, s);
		if (rc < 0)
			return rc;
	}
	if (ep->zombies && !ucx_ep_busy(ep))
		drop_zombies(ep);
	return ep->error;
}

static void ep_free(struct ucx_ep *ep)
{
	ucx_rkeys_drop_ep(ep->ctx, ep);
	drop_zombies(ep);
	while (ep->sig_head) {
		struct ucx_sig *s = ep->sig_head;
		ep->sig_head = s->next;
		ucx_core->free(s);
	}
	ucx_core->free(ep);
}

static void list_remove(struct ucx_ep **head, struct ucx_ep *ep)
{
	if (ep->prev)
		ep->prev->next = ep->next;
	else
		*head = ep->next;
	if (ep->next)
		ep->next->prev = ep->prev;
	ep->next = ep->prev = NULL;
}

static void list_push(struct ucx_ep **head, struct ucx_ep *ep)
{
	ep->prev = NULL;
	ep->next = *head;
	if (*head)
		(*head)->prev = ep;
	*head = ep;
}

/* Frees disconnected endpoints once UCX has closed them and has no request of
 * theirs left. */
static void reap_closing(struct ucx_ctx *ctx)
{
	struct ucx_ep *ep = ctx->closing;
	while (ep) {
		struct ucx_ep *next = ep->next;
		if (ep->close_req) {
			ucs_status_t st = ucp_request_check_status(ep->close_req);
			if (st != UCS_INPROGRESS) {
				if (st != UCS_OK)
					UCX_DBG("closing the endpoint to rank %d: %s", ep->peer_rank,
						ucs_status_string(st));
				ucp_request_free(ep->close_req);
				ep->close_req = NULL;
				ep->uep = NULL;
			}
		}
		if (!ep->close_req && !ep->reqs) {
			list_remove(&ctx->closing, ep);
			ep_free(ep);
		}
		ep = next;
	}
}

int ucx_wait_fds(void *tc, int *fds, int max)
{
	struct ucx_ctx *ctx = tc;
	if (!ctx)
		return -EINVAL;
	if (!ctx->worker || ctx->efd < 0 || max < 1)
		return 0;
	for (struct ucx_ep *ep = ctx->eps; ep; ep = ep->next)
		if (ep->sig_head || ep->zombies)
			return -EAGAIN; /* queued work that progress advances, not the network */
	ucs_status_t st = ucp_worker_arm(ctx->worker);
	if (st == UCS_ERR_BUSY)
		return -EAGAIN;
	if (st != UCS_OK)
		return 0;
	fds[0] = ctx->efd;
	return 1;
}

int ucx_progress(void *tc)
{
	struct ucx_ctx *ctx = tc;
	if (!ctx)
		return -EINVAL;
	if (!ctx->worker)
		return 0; /* no endpoint yet, so nothing to progress */
	/* Bounded, so that progress stays non-blocking under a flood of events. */
	for (int i = 0; i < 64 && ucp_worker_progress(ctx->worker) != 0; i++)
		;
	for (struct ucx_ep *ep = ctx->eps; ep; ep = ep->next) {
		if (ep->reqs || ep->sig_head)
			check_alive(ep);
		if (ep->sig_head || ep->zombies)
			(void)ep_advance(ep);
	}
	if (ctx->closing)
		reap_closing(ctx);
	if (!ctx->pending_error || now_ns() - ctx->pending_ns < ctx->set.error_delay_ms * 1000000ll)
		return 0;
	int rc = ctx->pending_error;
	ctx->pending_error = 0;
	return rc;
}

int ucx_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **epp)
{
	struct ucx_ctx *ctx = tc;
	if (!ctx || !peer || !len || !epp || peer->size < offsetof(struct weft_tp_peer, addr) + sizeof(peer->addr))
		return -EINVAL;
	if ((int)peer->peer_class < 0 || peer->peer_class >= WEFT_PEER_CLASS_COUNT) {
		UCX_ERR("endpoint: unknown peer class %d for rank %d", (int)peer->peer_class, peer->rank);
		return -EINVAL;
	}
	int rc = ucx_worker_ensure(ctx);
	if (rc < 0)
		return rc;
	size_t need = UCX_ADDR_HDR + ctx->addrlen;
	if (!addr || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	struct ucx_ep *ep = ucx_core->calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->ctx = ctx;
	ep->peer_rank = peer->rank;
	ep->peer_class = peer->peer_class;
	unsigned char *p = addr;
	memset(p, 0, UCX_ADDR_HDR);
	weft_kit_le_put32(p, UCX_ADDR_MAGIC);
	weft_kit_le_put16(p + 4, UCX_ADDR_VERSION);
	weft_kit_le_put32(p + 8, (uint32_t)ctx->addrlen);
	weft_kit_le_put32(p + 12, (uint32_t)getpid());
	weft_kit_le_put64(p + 16, pid_namespace());
	memcpy(p + UCX_ADDR_HDR, ctx->addr, ctx->addrlen);
	list_push(&ctx->eps, ep);
	*len = need;
	*epp = ep;
	return 0;
}

int ucx_connect(void *epv, const void *peer_addr, size_t len)
{
	struct ucx_ep *ep = epv;
	const unsigned char *p = peer_addr;
	if (!ep || (!p && len > 0))
		return -EINVAL;
	if (ep->connected) {
		UCX_ERR("connect: endpoint to rank %d is already connected", ep->peer_rank);
		return -EINVAL;
	}
	if (len < UCX_ADDR_HDR || weft_kit_le_get32(p) != UCX_ADDR_MAGIC) {
		UCX_ERR("connect: address from rank %d is malformed (%zu bytes, bad header)", ep->peer_rank, len);
		return -WEFT_ERR_PROTOCOL;
	}
	if (weft_kit_le_get16(p + 4) != UCX_ADDR_VERSION) {
		UCX_ERR("connect: address from rank %d has version %u, this plugin reads version %d", ep->peer_rank,
			weft_kit_le_get16(p + 4), UCX_ADDR_VERSION);
		return -WEFT_ERR_PROTOCOL;
	}
	if (weft_kit_le_get16(p + 6) != 0) {
		UCX_ERR("connect: address from rank %d has a non-zero reserved field", ep->peer_rank);
		return -WEFT_ERR_PROTOCOL;
	}
	uint32_t pid = weft_kit_le_get32(p + 12);
	if (pid == 0 || pid > INT32_MAX) {
		UCX_ERR("connect: address from rank %d names process id %u", ep->peer_rank, pid);
		return -WEFT_ERR_PROTOCOL;
	}
	uint64_t pidns = weft_kit_le_get64(p + 16);
	size_t alen = weft_kit_le_get32(p + 8);
	if (alen == 0 || alen > UCX_ADDR_MAX || alen != len - UCX_ADDR_HDR) {
		UCX_ERR("connect: address from rank %d names %zu worker-address bytes but carries %zu", ep->peer_rank,
			alen, len - UCX_ADDR_HDR);
		return -WEFT_ERR_PROTOCOL;
	}
	unsigned char *copy = ucx_core->calloc(1, alen + UCX_ADDR_SLACK);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, p + UCX_ADDR_HDR, alen);
	ucp_ep_params_t prm;
	memset(&prm, 0, sizeof(prm));
	prm.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			 UCP_EP_PARAM_FIELD_ERR_HANDLER;
	prm.address = (const ucp_address_t *)copy;
	/* Peer mode: a dead or unreachable peer fails this endpoint's requests
	 * and calls ep_err_cb, instead of hanging them. UCX (1.13) cannot detect
	 * failures over its shared-memory transports and so leaves them out of
	 * peer-mode endpoints; in auto mode a same-host peer gets them, and its
	 * death is left to the core's liveness watch. Both ends decide alike:
	 * the peer class is symmetric and the configuration uniform. */
	const struct ucx_ctx *ctx = ep->ctx;
	bool same_host = ep->peer_class != WEFT_PEER_OTHER_HOST;
	ep->peer_mode = ctx->set.err_mode == UCX_ERRMODE_PEER ||
			(ctx->set.err_mode == UCX_ERRMODE_AUTO && !(same_host && ctx->has_shm));
	prm.err_mode = ep->peer_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
	/* Without UCX's detection, watch the peer's process where its pid means
	 * the same here: same host and same pid namespace. */
	uint64_t myns = pid_namespace();
	if (!ep->peer_mode && same_host && pidns != 0 && pidns == myns)
		ep->peer_pid = (pid_t)pid;
	prm.err_handler.cb = ep_err_cb;
	prm.err_handler.arg = ep;
	ucs_status_t st = ucp_ep_create(ep->ctx->worker, &prm, &ep->uep);
	ucx_core->free(copy);
	if (st != UCS_OK) {
		UCX_ERR("connect: ucp_ep_create for rank %d failed: %s (%d)", ep->peer_rank, ucs_status_string(st),
			(int)st);
		ep->uep = NULL;
		return st == UCS_ERR_INVALID_PARAM ? -WEFT_ERR_PROTOCOL : ucx_code(st);
	}
	ep->connected = true;
	return 0;
}

int ucx_disconnect(void *epv)
{
	struct ucx_ep *ep = epv;
	if (!ep)
		return 0;
	struct ucx_ctx *ctx = ep->ctx;
	list_remove(&ctx->eps, ep);
	/* Signals never posted are abandoned: the core calls this after a flush,
	 * or when the peer is gone. */
	while (ep->sig_head) {
		struct ucx_sig *s = ep->sig_head;
		ep->sig_head = s->next;
		ucx_core->free(s);
		ep->inflight--;
	}
	ep->sig_tail = NULL;
	ep->closing = true;
	if (ep->uep) {
		ucp_request_param_t prm;
		memset(&prm, 0, sizeof(prm));
		prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
		/* A failed endpoint, or one with work that will never complete, is
		 * torn down at once (its requests complete as canceled); a healthy
		 * idle one is flushed and closed in the background. */
		/* A peer whose death only the core saw (its liveness watch, not this
		 * endpoint) must not get a graceful close either: UCX 1.13 then
		 * asserts on the wire-up messages it can no longer exchange. */
		bool gone = ep->peer_pid > 0 && process_gone(ep->peer_pid);
		if (gone)
			ctx->peer_gone = true;
		prm.flags = (ep->error || ep->reqs || gone) ? UCP_EP_CLOSE_FLAG_FORCE : 0;
		ucs_status_ptr_t sp = ucp_ep_close_nbx(ep->uep, &prm);
		if (sp != NULL && !UCS_PTR_IS_ERR(sp)) {
			ep->close_req = sp;
		} else {
			if (UCS_PTR_IS_ERR(sp))
				UCX_DBG("closing the endpoint to rank %d: %s", ep->peer_rank,
					ucs_status_string(UCS_PTR_STATUS(sp)));
			ep->uep = NULL;
		}
	}
	if (!ep->close_req && !ep->reqs) {
		ep_free(ep);
		return 0;
	}
	list_push(&ctx->closing, ep);
	return 0;
}

void ucx_close_endpoints(struct ucx_ctx *ctx)
{
	while (ctx->eps)
		ucx_disconnect(ctx->eps);
	/* Give closes and their requests a moment to finish; a peer that is gone
	 * or not progressing does not hold close() up for longer. */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ctx->closing && ctx->worker) {
		ucp_worker_progress(ctx->worker);
		reap_closing(ctx);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > 1000)
			break;
	}
	/* What is left is abandoned: UCX stops reporting on freed requests, and
	 * the token buffers they may still read wait for the worker's end. Keys
	 * go now: UCX keeps them in the worker's memory pool. */
	for (struct ucx_ep *ep = ctx->closing; ep; ep = ep->next) {
		ucx_rkeys_drop_ep(ctx, ep);
		drop_zombies(ep);
		if (ep->close_req) {
			ucp_request_free(ep->close_req);
			ep->close_req = NULL;
		}
		while (ep->reqs) {
			struct ucx_req *rq = ep->reqs;
			req_unlink(ep, rq);
			if (rq->sig) {
				rq->sig->next = ctx->orphan_sigs;
				ctx->orphan_sigs = rq->sig;
			}
			ucp_request_free(rq);
		}
	}
}

void ucx_free_closed(struct ucx_ctx *ctx)
{
	while (ctx->closing) {
		struct ucx_ep *ep = ctx->closing;
		list_remove(&ctx->closing, ep);
		ep_free(ep);
	}
	while (ctx->orphan_sigs) {
		struct ucx_sig *s = ctx->orphan_sigs;
		ctx->orphan_sigs = s->next;
		ucx_core->free(s);
	}
}

/* Shared checks of put and signal. */
static int check_op(struct ucx_ep *ep, const struct ucx_rmh *r, uint64_t roff, size_t len, const char *what)
{
	if (!ep || !r)
		return -EINVAL;
	if (!ep->connected || ep->closing) {
		UCX_ERR("%s: endpoint to rank %d is not connected", what, ep->peer_rank);
		return -EINVAL;
	}
	if (ep->error) {
		/* Work refused is work lost: flush reports the failure from now on. */
		ep->lost_work = true;
		return ep->error;
	}
	if (r->ctx != ep->ctx) {
		UCX_ERR("%s: rank %d's region was imported into another context", what, r->peer);
		return -EINVAL;
	}
	if (roff > r->len || len > r->len - roff) {
		UCX_ERR("%s: remote range %llu+%zu is outside rank %d's %llu-byte region", what,
			(unsigned long long)roff, len, r->peer, (unsigned long long)r->len);
		return -EINVAL;
	}
	return 0;
}

/* Admission: at most max_inflight puts and signals per endpoint. */
static int admit(struct ucx_ep *ep)
{
	if (ep->inflight < ep->ctx->set.max_inflight)
		return 0;
	for (int i = 0; i < 8 && ucp_worker_progress(ep->ctx->worker) != 0; i++)
		;
	(void)ep_advance(ep);
	if (ep->error)
		return ep->error;
	return ep->inflight < ep->ctx->set.max_inflight ? 0 : -EAGAIN;
}

static int put_impl(struct ucx_ep *ep, void *rmhv, uint64_t roff, void *mhv, uint64_t loff, size_t len)
{
	struct ucx_rmh *r = rmhv;
	struct ucx_mh *m = mhv;
	int rc;
	if (!m)
		return -EINVAL;
	if ((rc = check_op(ep, r, roff, len, "put")) < 0)
		return rc;
	if (loff > m->len || len > m->len - loff) {
		UCX_ERR("put to rank %d: local range %llu+%zu is outside the %zu-byte region", ep->peer_rank,
			(unsigned long long)loff, len, m->len);
		return -EINVAL;
	}
	if (len == 0)
		return 0;
	if ((rc = admit(ep)) < 0)
		return rc;
	ucp_rkey_h rkey;
	if ((rc = ucx_rkey_get(r, ep, ep->uep, &rkey)) < 0)
		return rc;
	ucp_request_param_t prm;
	memset(&prm, 0, sizeof(prm));
	prm.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_MEMH;
	prm.cb.send = req_done;
	prm.memory_type = m->mem_type;
	prm.memh = m->memh;
	ucs_status_ptr_t sp = ucp_put_nbx(ep->uep, (char *)m->base + loff, len, r->base + roff, rkey, &prm);
	ep->posted++;
	if (sp == NULL)
		return 0;
	if (UCS_PTR_IS_ERR(sp)) {
		ep->lost_work = true;
		ep_fail(ep, UCS_PTR_STATUS(sp), "put");
		return ep->error;
	}
	req_link(ep, sp, UCX_REQ_PUT);
	ep->inflight++;
	return 0;
}

static int signal_impl(struct ucx_ep *ep, void *rmhv, uint64_t roff, uint64_t value)
{
	struct ucx_rmh *r = rmhv;
	int rc;
	if ((rc = check_op(ep, r, roff, sizeof(uint64_t), "signal")) < 0)
		return rc;
	uint64_t raddr = r->base + roff;
	/* One aligned 64-bit word: what an atomic swap needs. */
	if (raddr % sizeof(uint64_t) != 0) {
		UCX_ERR("signal: token at offset %llu of rank %d's region is not 8-byte aligned",
			(unsigned long long)roff, r->peer);
		return -EINVAL;
	}
	if ((rc = admit(ep)) < 0)
		return rc;
	ucp_rkey_h rkey;
	if ((rc = ucx_rkey_get(r, ep, ep->uep, &rkey)) < 0)
		return rc;
	struct ucx_sig *s = ucx_core->calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->raddr = raddr;
	s->rkey = rkey;
	s->value = value;
	s->after = ep->posted;
	ep->inflight++;
	if (ep->ctx->set.sig_mode == UCX_SIG_FENCE && !ep->sig_head) {
		/* UCX orders everything posted after a worker fence behind
		 * everything posted before it. */
		ucs_status_t st = ucp_worker_fence(ep->ctx->worker);
		if (st != UCS_OK) {
			ucx_core->free(s);
			ep->inflight--;
			ep_fail(ep, st, "ucp_worker_fence");
			return ep->error;
		}
		return post_token(ep, s);
	}
	if (ep->sig_tail)
		ep->sig_tail->next = s;
	else
		ep->sig_head = s;
	ep->sig_tail = s;
	rc = ep_advance(ep);
	return rc == -EAGAIN ? 0 : rc;
}

static int flush_impl(struct ucx_ep *ep)
{
	if (!ep)
		return -EINVAL;
	if (ep->error)
		return ep->lost_work || has_work(ep) ? ep->error : 0;
	if (!ep->connected || ep->closing)
		return 0;
	if (has_work(ep))
		check_alive(ep);
	if (ep->error)
		return ep->lost_work || has_work(ep) ? ep->error : 0;
	if (ep->reqs || ep->sig_head || ep->flushed < ep->posted) {
		for (int i = 0; i < 8 && ucp_worker_progress(ep->ctx->worker) != 0; i++)
			;
		int rc = ep_advance(ep);
		if (rc < 0)
			return rc;
		if (!ep->sig_head && ep->flushed < ep->posted && !ep->flushing && (rc = start_flush(ep)) < 0)
			return rc;
	}
	if (ep->error)
		return ep->error;
	return ep->sig_head || ep->inflight > 0 || ep->flushed < ep->posted ? -EAGAIN : 0;
}

/* A peer failure is reported only error_delay_ms after UCX saw it (-EAGAIN
 * until then): the core's liveness watch, which fails the whole communicator,
 * sees a dead process through its bootstrap sockets as fast as UCX does, and
 * should be the one to report it. A failure the core does not see (a broken
 * UCX connection to a live peer) still surfaces after the delay. */
static int surface(struct ucx_ep *ep, int rc)
{
	if (rc < 0 && rc != -EAGAIN && ep && ep->error == rc &&
	    now_ns() - ep->fail_ns < ep->ctx->set.error_delay_ms * 1000000ll)
		return -EAGAIN;
	return rc;
}

int ucx_put(void *epv, void *rmhv, uint64_t roff, void *mhv, uint64_t loff, size_t len)
{
	return surface(epv, put_impl(epv, rmhv, roff, mhv, loff, len));
}

int ucx_signal(void *epv, void *rmhv, uint64_t roff, uint64_t value)
{
	return surface(epv, signal_impl(epv, rmhv, roff, value));
}

int ucx_flush(void *epv)
{
	return surface(epv, flush_impl(epv));
}

/* The lanes of an endpoint, from ucp_ep_print_info (UCP has no query for its
 * transports in this version): "lane[0]:  1:tcp/lo.0 md[1] -> ... am rma_bw#0". */
int ucx_ep_describe(void *epv, char *buf, size_t len)
{
	struct ucx_ep *ep = epv;
	if (!ep || !buf || len == 0)
		return -EINVAL;
	int n;
	if (!ep->connected || !ep->uep) {
		n = snprintf(buf, len, "ucx=%s rank=%d state=unconnected", ucp_get_version_string(), ep->peer_rank);
		return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
	}
	if (ep->error) {
		n = snprintf(buf, len, "ucx=%s rank=%d state=failed error=%s", ucp_get_version_string(), ep->peer_rank,
			     weft_kit_strerror(ep->error));
		return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
	}
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (!f)
		return -ENOMEM;
	ucp_ep_print_info(ep->uep, f);
	fclose(f);
	char tls[256] = "", classes[64] = "", lanes[512] = "";
	int nlanes = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *l = strstr(line, "lane[");
		if (!l || !(l = strstr(l, "]:")))
			continue;
		l += 2;
		char tl[64] = "", dev[64] = "";
		/* "  1:tcp/lo.0 md[1] ..." */
		if (sscanf(l, " %*[0-9]:%63[^/]/%63s", tl, dev) != 2)
			continue;
		char *dot = strrchr(dev, '.');
		if (dot)
			*dot = '\0';
		/* Usage words follow "->  md[..]/tl/sysdev[..]". */
		char use[160] = "";
		const char *arrow = strstr(l, "->");
		if (arrow) {
			const char *w = strchr(arrow + 2, ' ');
			while (w && *w == ' ')
				w++;
			w = w ? strchr(w, ' ') : NULL;
			if (w) {
				snprintf(use, sizeof(use), "%s", w + 1);
				for (char *c = use; *c; c++)
					if (*c == ' ')
						*c = '+';
			}
		}
		char item[160];
		snprintf(item, sizeof(item), "%s/%s", tl, dev);
		if (!strstr(tls, item) && strlen(tls) + strlen(item) + 2 < sizeof(tls)) {
			if (tls[0])
				strcat(tls, ",");
			strcat(tls, item);
		}
		const char *cls = ucx_tl_class(tl);
		if (!strstr(classes, cls) && strlen(classes) + strlen(cls) + 2 < sizeof(classes)) {
			if (classes[0])
				strcat(classes, ",");
			strcat(classes, cls);
		}
		size_t at = strlen(lanes);
		snprintf(lanes + at, sizeof(lanes) - at, "%s%s:%s", at ? ";" : "", item, use);
		nlanes++;
	}
	free(text);
	n = snprintf(buf, len, "ucx=%s rank=%d transports=%s classes=%s error_mode=%s lanes=%d [%s]",
		     ucp_get_version_string(), ep->peer_rank, tls[0] ? tls : "none", classes[0] ? classes : "none",
		     ep->peer_mode ? "peer" : "none", nlanes, lanes);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}
