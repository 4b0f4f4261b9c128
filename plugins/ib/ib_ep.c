/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: endpoints (one RC queue pair per peer and its own completion
 * queue), connection bring-up (INIT, RTR, RTS), puts as RDMA writes, signals
 * (fenced fetch-and-add, or write-with-immediate that the receiver turns into
 * a token write), flush, and completion progress. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ibp.h"

/* Endpoint address, little-endian, IBP_ADDR_LEN (64) bytes:
 *   0 magic u32 "WIBE" | 4 version u16 | 6 length u16 (64)
 *   8 qpn u32 | 12 psn u32 | 16 lid u16 | 18 link layer u8 | 19 mtu u8 (enum ibv_mtu)
 *  20 port u8 | 21 flags u8 (IBP_EPF_*) | 22 max_rd_atomic u8 (as responder) | 23 zero
 *  24 gid [16] | 40 device node GUID u64
 *  48 mailbox address u64 | 56 mailbox rkey u32 | 60 mailbox slots u32
 * The mailbox is the receiving side of imm signals (see signal_post_imm). */

/* Signals by write-with-immediate. The sender gives each distinct token it
 * signals through an endpoint a slot s (0..mailbox slots-1). A signal to value V
 * posts IBV_WR_RDMA_WRITE_WITH_IMM of the token's 8-byte address into the
 * peer's mailbox[s], with imm = s << 20 | (V & 0xfffff). The receiver's
 * progress, on the receive completion (which RC delivers after every earlier
 * write of the queue pair is in memory), reads mailbox[s] (always the same
 * address for s, so a rewrite cannot tear it), checks that it lies in one of
 * its registered regions, rebuilds V from the last value of the slot and the
 * 20 low bits, and stores V into the token. A jump of 2^20 or more is sent as
 * several signals, each raising the token by less than 2^20. Both ends start
 * every slot at 0: a token is assumed to be raised only through this endpoint,
 * as with the atomic scheme, whose increments are likewise counted from 0. */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint32_t new_psn(const void *salt)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)salt ^
		     ((uint64_t)getpid() << 40);
	return (uint32_t)mix64(x) & IBP_PSN_MASK;
}

static bool gid_needs_grh(const struct ibp_port *p)
{
	if (p->attr.link_layer == IBV_LINK_LAYER_ETHERNET)
		return true;
	/* An InfiniBand GID outside the link-local prefix fe80::/64 is routed. */
	return p->gid_index >= 0 && !(p->gid.raw[0] == 0xfe && (p->gid.raw[1] & 0xc0) == 0x80);
}

static enum ibv_mtu mtu_enum(int64_t bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	default:
		return IBV_MTU_4096;
	}
}

int ibp_wc_code(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return 0;
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
	case IBV_WC_REM_ACCESS_ERR:
		return -WEFT_ERR_PEER;
	default:
		return -WEFT_ERR_TRANSPORT;
	}
}

static struct ibp_port *ep_port(const struct ibp_ep *ep)
{
	return &ep->ctx->fab.ports[ep->port];
}

static struct ibp_dev *ep_dev(const struct ibp_ep *ep)
{
	return &ep->ctx->fab.devs[ep_port(ep)->dev];
}

/* Responder depth for incoming atomics (also what the peer may use as its
 * initiator depth toward us). */
static uint8_t dest_rd_atomic(const struct ibp_dev *d)
{
	int v = d->attr.max_qp_rd_atom;
	return (uint8_t)(v < 0 ? 0 : v > 16 ? 16 : v);
}

static int post_recvs(struct ibp_ep *ep, int n)
{
	struct ibv_recv_wr wrs[32];
	while (n > 0) {
		int k = n < 32 ? n : 32;
		for (int i = 0; i < k; i++) {
			memset(&wrs[i], 0, sizeof(wrs[i]));
			wrs[i].wr_id = IBP_WRID_RECV;
			wrs[i].next = i + 1 < k ? &wrs[i + 1] : NULL;
		}
		struct ibv_recv_wr *bad = NULL;
		int rc = ibp_verbs->post_recv(ep->qp, wrs, &bad);
		if (rc != 0)
			return ibp_verbs_fail("ibv_post_recv", ep_port(ep)->name, rc);
		ep->recv_posted += k;
		n -= k;
	}
	return 0;
}

static void ep_free(struct ibp_ep *ep)
{
	const char *where = ep_port(ep)->name;
	int rc;
	if (ep->qp && (rc = ibp_verbs->destroy_qp(ep->qp)) != 0)
		ibp_verbs_fail("ibv_destroy_qp", where, rc);
	if (ep->cq && (rc = ibp_verbs->destroy_cq(ep->cq)) != 0)
		ibp_verbs_fail("ibv_destroy_cq", where, rc);
	if (ep->mailbox_mr && (rc = ibp_verbs->dereg_mr(ep->mailbox_mr)) != 0)
		ibp_verbs_fail("ibv_dereg_mr", where, rc);
	if (ep->scratch_mr && (rc = ibp_verbs->dereg_mr(ep->scratch_mr)) != 0)
		ibp_verbs_fail("ibv_dereg_mr", where, rc);
	while (ep->pend_head) {
		struct ibp_op *op = ep->pend_head;
		ep->pend_head = op->next;
		ibp_core->free(op);
	}
	ibp_core->free(ep->mailbox);
	ibp_core->free(ep->scratch);
	ibp_core->free(ep->slot_last);
	ibp_core->free(ep->tokens);
	ibp_core->free(ep);
}

int ibp_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **epp)
{
	struct ibp_ctx *ctx = tc;
	int rc;
	if (!ctx || !peer || !len || !epp || peer->size < offsetof(struct weft_tp_peer, rank) + sizeof(peer->rank) ||
	    peer->rank < 0)
		return -EINVAL;
	if (!addr || *len < IBP_ADDR_LEN) {
		*len = IBP_ADDR_LEN;
		return -ENOSPC;
	}
	const struct ibp_settings *s = &ctx->set;
	struct ibp_ep *ep = ibp_core->calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->ctx = ctx;
	/* Peers spread over the selected ports; nothing ties a NIC to a GPU. */
	ep->port = peer->rank % ctx->fab.nports;
	ep->peer_rank = peer->rank;
	struct ibp_port *p = ep_port(ep);
	struct ibp_dev *d = ep_dev(ep);
	ep->nslots = (uint32_t)s->imm_slots;
	ep->scratch = ibp_core->calloc((size_t)s->sq_depth, sizeof(uint64_t));
	ep->mailbox = ibp_core->calloc((size_t)ep->nslots + 1, sizeof(uint64_t));
	ep->slot_last = ibp_core->calloc(ep->nslots, sizeof(uint64_t));
	if (!ep->scratch || !ep->mailbox || !ep->slot_last) {
		rc = -ENOMEM;
		goto err_free_ep;
	}
	errno = 0;
	ep->scratch_mr = ibp_verbs->reg_mr(d->pd, ep->scratch, (size_t)s->sq_depth * sizeof(uint64_t),
					   IBV_ACCESS_LOCAL_WRITE);
	if (!ep->scratch_mr) {
		rc = ibp_verbs_fail("ibv_reg_mr", p->name, errno);
		goto err_free_ep;
	}
	errno = 0;
	ep->mailbox_mr = ibp_verbs->reg_mr(d->pd, ep->mailbox, ((size_t)ep->nslots + 1) * sizeof(uint64_t),
					   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ep->mailbox_mr) {
		rc = ibp_verbs_fail("ibv_reg_mr", p->name, errno);
		goto err_free_ep;
	}
	int cqe = (int)(s->cq_size ? s->cq_size : s->sq_depth + s->rq_depth);
	errno = 0;
	ep->cq = ibp_verbs->create_cq(d->vctx, cqe);
	if (!ep->cq) {
		rc = ibp_verbs_fail("ibv_create_cq", p->name, errno);
		goto err_free_ep;
	}
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ep->cq;
	ia.recv_cq = ep->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 0;
	ia.cap.max_send_wr = (uint32_t)s->sq_depth;
	ia.cap.max_recv_wr = (uint32_t)s->rq_depth;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	errno = 0;
	ep->qp = ibp_verbs->create_qp(d->pd, &ia);
	if (!ep->qp) {
		rc = ibp_verbs_fail("ibv_create_qp", p->name, errno);
		goto err_free_ep;
	}
	struct ibv_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = p->num;
	qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	rc = ibp_verbs->modify_qp(ep->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc != 0) {
		rc = ibp_verbs_fail("ibv_modify_qp(INIT)", p->name, rc);
		goto err_free_ep;
	}
	/* Receives are consumed only by imm signals; posting them in INIT means
	 * none can arrive before they are there. */
	if ((rc = post_recvs(ep, (int)s->rq_depth)) < 0)
		goto err_free_ep;
	ep->psn = new_psn(ep);
	ep->mtu = p->attr.active_mtu;
	if (s->mtu && mtu_enum(s->mtu) < ep->mtu)
		ep->mtu = mtu_enum(s->mtu);

	unsigned char *a = addr;
	memset(a, 0, IBP_ADDR_LEN);
	weft_kit_le_put32(a, IBP_ADDR_MAGIC);
	weft_kit_le_put16(a + 4, IBP_ADDR_VERSION);
	weft_kit_le_put16(a + 6, IBP_ADDR_LEN);
	weft_kit_le_put32(a + 8, ep->qp->qp_num);
	weft_kit_le_put32(a + 12, ep->psn);
	weft_kit_le_put16(a + 16, p->attr.lid);
	a[18] = p->attr.link_layer;
	a[19] = (unsigned char)ep->mtu;
	a[20] = p->num;
	a[21] = (unsigned char)((d->attr.atomic_cap != IBV_ATOMIC_NONE && dest_rd_atomic(d) > 0 ? IBP_EPF_ATOMICS : 0) |
				(gid_needs_grh(p) ? IBP_EPF_GRH : 0));
	a[22] = dest_rd_atomic(d);
	memcpy(a + 24, p->gid.raw, 16);
	weft_kit_le_put64(a + 40, d->attr.node_guid);
	weft_kit_le_put64(a + 48, (uint64_t)(uintptr_t)ep->mailbox);
	weft_kit_le_put32(a + 56, ep->mailbox_mr->rkey);
	weft_kit_le_put32(a + 60, ep->nslots);

	ep->next = ctx->eps;
	if (ctx->eps)
		ctx->eps->prev = ep;
	ctx->eps = ep;
	*len = IBP_ADDR_LEN;
	*epp = ep;
	return 0;

err_free_ep:
	ep_free(ep);
	return rc;
}

#define BADADDR(...)                                                                                \
	do {                                                                                        \
		char why_[160];                                                                     \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                                          \
		IBP_ERR("connect: address from rank %d is malformed: %s", ep->peer_rank, why_); \
		return -WEFT_ERR_PROTOCOL;                                                          \
	} while (0)

/* Validates every field of a peer's address into r. */
static int parse_addr(const struct ibp_ep *ep, const unsigned char *a, size_t len, struct ibp_remote *r)
{
	if (len < 8)
		BADADDR("%zu bytes, shorter than its header", len);
	if (weft_kit_le_get32(a) != IBP_ADDR_MAGIC)
		BADADDR("magic 0x%08x, expected 0x%08x", weft_kit_le_get32(a), IBP_ADDR_MAGIC);
	if (weft_kit_le_get16(a + 4) != IBP_ADDR_VERSION)
		BADADDR("version %u, this plugin reads version %d", weft_kit_le_get16(a + 4), IBP_ADDR_VERSION);
	if (weft_kit_le_get16(a + 6) != IBP_ADDR_LEN || len != IBP_ADDR_LEN)
		BADADDR("%zu bytes (header says %u), expected %d", len, weft_kit_le_get16(a + 6), IBP_ADDR_LEN);
	memset(r, 0, sizeof(*r));
	r->qpn = weft_kit_le_get32(a + 8);
	r->psn = weft_kit_le_get32(a + 12);
	r->lid = weft_kit_le_get16(a + 16);
	r->link_layer = a[18];
	r->mtu = a[19];
	r->port = a[20];
	r->flags = a[21];
	r->max_rd_atomic = a[22];
	memcpy(r->gid.raw, a + 24, 16);
	r->guid = weft_kit_le_get64(a + 40);
	r->mailbox_addr = weft_kit_le_get64(a + 48);
	r->mailbox_rkey = weft_kit_le_get32(a + 56);
	r->mailbox_slots = weft_kit_le_get32(a + 60);
	if (r->qpn == 0 || r->qpn > 0xffffff)
		BADADDR("queue pair number 0x%x is not a 24-bit QPN", r->qpn);
	if (r->psn > IBP_PSN_MASK)
		BADADDR("packet sequence number 0x%x exceeds 24 bits", r->psn);
	if (r->link_layer != IBV_LINK_LAYER_INFINIBAND && r->link_layer != IBV_LINK_LAYER_ETHERNET)
		BADADDR("unknown link layer %u", r->link_layer);
	if (r->mtu < IBV_MTU_256 || r->mtu > IBV_MTU_4096)
		BADADDR("MTU code %u is outside 1..5", r->mtu);
	if (r->port == 0)
		BADADDR("port 0");
	if (r->flags & ~(IBP_EPF_ATOMICS | IBP_EPF_GRH))
		BADADDR("unknown flags 0x%x", r->flags);
	if (a[23] != 0)
		BADADDR("reserved byte is 0x%x, expected 0", a[23]);
	if (r->max_rd_atomic > 16)
		BADADDR("atomic depth %u exceeds 16", r->max_rd_atomic);
	if (r->guid == 0)
		BADADDR("device GUID is zero");
	if (r->mailbox_addr == 0 || r->mailbox_addr % 8 != 0)
		BADADDR("mailbox address 0x%llx is not 8-byte aligned", (unsigned long long)r->mailbox_addr);
	if (r->mailbox_slots < 1 || r->mailbox_slots > IBP_MAX_SLOTS)
		BADADDR("%u mailbox slots, expected 1..%d", r->mailbox_slots, IBP_MAX_SLOTS);
	bool zero_gid = true;
	for (int i = 0; i < 16; i++)
		if (r->gid.raw[i])
			zero_gid = false;
	if ((r->flags & IBP_EPF_GRH) && zero_gid)
		BADADDR("a GRH is needed but the GID is zero");
	if (r->link_layer == IBV_LINK_LAYER_ETHERNET && !(r->flags & IBP_EPF_GRH))
		BADADDR("an Ethernet (RoCE) address without a GID");
	if (!(r->flags & IBP_EPF_GRH) && r->lid == 0)
		BADADDR("an InfiniBand address with neither a LID nor a routable GID");
	return 0;
}

int ibp_connect(void *epv, const void *peer_addr, size_t len)
{
	struct ibp_ep *ep = epv;
	struct ibp_remote r;
	int rc;
	if (!ep || (!peer_addr && len > 0))
		return -EINVAL;
	if (ep->connected) {
		IBP_ERR("connect: endpoint to rank %d is already connected", ep->peer_rank);
		return -EINVAL;
	}
	if ((rc = parse_addr(ep, peer_addr, len, &r)) < 0)
		return rc;
	struct ibp_port *p = ep_port(ep);
	struct ibp_dev *d = ep_dev(ep);
	const struct ibp_settings *s = &ep->ctx->set;
	if (r.link_layer != p->attr.link_layer) {
		IBP_ERR("connect: rank %d's port is %s, %s is %s: they cannot reach each other (set ib.devices)",
			ep->peer_rank, ibp_link_name(r.link_layer), p->name, ibp_link_name(p->attr.link_layer));
		return -WEFT_ERR_PROTOCOL;
	}
	bool grh = gid_needs_grh(p) || (r.flags & IBP_EPF_GRH);
	if (grh && p->gid_index < 0) {
		IBP_ERR("connect: rank %d needs a GRH but %s has no GID", ep->peer_rank, p->name);
		return -WEFT_ERR_TRANSPORT;
	}
	enum ibv_mtu mtu = ep->mtu < (enum ibv_mtu)r.mtu ? ep->mtu : (enum ibv_mtu)r.mtu;
	uint8_t init_depth = (uint8_t)(d->attr.max_qp_init_rd_atom < 0 ? 0 : d->attr.max_qp_init_rd_atom > 16 ? 16
							     : d->attr.max_qp_init_rd_atom);
	if (r.max_rd_atomic < init_depth)
		init_depth = r.max_rd_atomic;
	bool atomics = d->attr.atomic_cap != IBV_ATOMIC_NONE && (r.flags & IBP_EPF_ATOMICS) && init_depth > 0;
	if (strcmp(s->signal, "atomic") == 0 && !atomics) {
		IBP_ERR("connect: ib.signal=atomic, but %s to rank %d cannot do remote atomics (atomic_cap %s here, "
			"%s there)",
			p->name, ep->peer_rank, d->attr.atomic_cap != IBV_ATOMIC_NONE ? "yes" : "none",
			(r.flags & IBP_EPF_ATOMICS) ? "yes" : "none");
		return -WEFT_ERR_CONFIG;
	}
	ep->sig_mode = atomics && strcmp(s->signal, "imm") != 0 ? IBP_SIG_ATOMIC : IBP_SIG_IMM;

	struct ibv_qp_attr qa;
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = mtu;
	qa.dest_qp_num = r.qpn;
	qa.rq_psn = r.psn;
	qa.max_dest_rd_atomic = dest_rd_atomic(d);
	qa.min_rnr_timer = (uint8_t)s->min_rnr_timer;
	qa.ah_attr.dlid = r.lid;
	qa.ah_attr.sl = (uint8_t)s->service_level;
	qa.ah_attr.src_path_bits = 0;
	qa.ah_attr.port_num = p->num;
	if (grh) {
		qa.ah_attr.is_global = 1;
		qa.ah_attr.grh.dgid = r.gid;
		qa.ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
		qa.ah_attr.grh.hop_limit = (uint8_t)s->hop_limit;
		qa.ah_attr.grh.traffic_class = (uint8_t)s->traffic_class;
		qa.ah_attr.grh.flow_label = 0;
	}
	rc = ibp_verbs->modify_qp(ep->qp, &qa,
				  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (rc != 0)
		return ibp_verbs_fail("ibv_modify_qp(RTR)", p->name, rc);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = ep->psn;
	qa.timeout = (uint8_t)s->timeout;
	qa.retry_cnt = (uint8_t)s->retry_cnt;
	qa.rnr_retry = (uint8_t)s->rnr_retry;
	qa.max_rd_atomic = init_depth;
	rc = ibp_verbs->modify_qp(ep->qp, &qa,
				  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc != 0)
		return ibp_verbs_fail("ibv_modify_qp(RTS)", p->name, rc);

	uint64_t chunk = p->attr.max_msg_sz ? p->attr.max_msg_sz : (1u << 30);
	if (s->max_msg_size && s->max_msg_size < chunk)
		chunk = s->max_msg_size;
	if (chunk > (1u << 31))
		chunk = 1u << 31;
	ep->chunk = (size_t)chunk;
	ep->rem = r;
	ep->mtu = mtu;
	ep->connected = true;
	IBP_DBG("connected %s qpn 0x%x to rank %d qpn 0x%x: mtu %d, %s, signal %s", p->name, ep->qp->qp_num,
		ep->peer_rank, r.qpn, ibp_mtu_bytes(mtu), grh ? "GRH" : "LID", ep->sig_mode == IBP_SIG_ATOMIC ? "atomic" : "imm");
	return 0;
}

int ibp_disconnect(void *epv)
{
	struct ibp_ep *ep = epv;
	if (!ep)
		return 0;
	struct ibp_ctx *ctx = ep->ctx;
	if (ep->prev)
		ep->prev->next = ep->next;
	else
		ctx->eps = ep->next;
	if (ep->next)
		ep->next->prev = ep->prev;
	ep_free(ep);
	return 0;
}

static void ep_fail(struct ibp_ep *ep, int code)
{
	if (!ep->error)
		ep->error = code;
}

static bool sq_full(const struct ibp_ep *ep)
{
	return ep->posted - ep->completed >= (uint64_t)ep->ctx->set.sq_depth;
}

/* Posts one send WR. It asks for a completion every signal_every WRs, when it
 * fills the send queue (so a full queue always drains), or when forced. */
static int ep_post(struct ibp_ep *ep, struct ibv_send_wr *wr, bool force, const char *what)
{
	const struct ibp_settings *s = &ep->ctx->set;
	uint64_t seq = ep->posted;
	bool sig = force || ep->since_signal + 1 >= s->signal_every || seq + 1 - ep->completed >= (uint64_t)s->sq_depth;
	wr->wr_id = seq;
	wr->next = NULL;
	if (sig)
		wr->send_flags |= IBV_SEND_SIGNALED;
	struct ibv_send_wr *bad = NULL;
	int rc = ibp_verbs->post_send(ep->qp, wr, &bad);
	if (rc != 0) {
		IBP_ERR("ibv_post_send (%s) on %s to rank %d failed: %s", what, ep_port(ep)->name, ep->peer_rank,
			strerror(rc));
		ep_fail(ep, -WEFT_ERR_TRANSPORT);
		return -WEFT_ERR_TRANSPORT;
	}
	ep->posted++;
	if (sig) {
		ep->since_signal = 0;
		ep->sig_end = seq + 1;
	} else {
		ep->since_signal++;
	}
	return 0;
}

static uint64_t *scratch_slot(struct ibp_ep *ep)
{
	return &ep->scratch[ep->posted % (uint64_t)ep->ctx->set.sq_depth];
}

static int post_put_chunks(struct ibp_ep *ep, struct ibp_op *op)
{
	while (op->posted < op->len) {
		if (sq_full(ep))
			return -EAGAIN;
		size_t n = op->len - op->posted;
		if (n > ep->chunk)
			n = ep->chunk;
		struct ibv_sge sge = {
			.addr = (uint64_t)(uintptr_t)(op->laddr + op->posted), .length = (uint32_t)n, .lkey = op->lkey};
		struct ibv_send_wr wr;
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr.rdma.remote_addr = op->raddr + op->posted;
		wr.wr.rdma.rkey = op->rkey;
		int rc = ep_post(ep, &wr, false, "RDMA write");
		if (rc < 0)
			return rc;
		op->posted += n;
	}
	return 0;
}

static int post_signal(struct ibp_ep *ep, struct ibp_op *op)
{
	struct ibp_token *t = &ep->tokens[op->token];
	while (t->last < op->value) {
		if (sq_full(ep))
			return -EAGAIN;
		uint64_t *slot = scratch_slot(ep);
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)slot, .length = 8, .lkey = ep->scratch_mr->lkey};
		struct ibv_send_wr wr;
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = &sge;
		wr.num_sge = 1;
		uint64_t next;
		int rc;
		if (ep->sig_mode == IBP_SIG_ATOMIC) {
			/* The fence holds the atomic until every earlier WR of the queue
			 * pair has completed, so the token moves after the data. */
			next = op->value;
			*slot = 0;
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.send_flags = IBV_SEND_FENCE;
			wr.wr.atomic.remote_addr = t->raddr;
			wr.wr.atomic.compare_add = next - t->last;
			wr.wr.atomic.rkey = t->rkey;
			rc = ep_post(ep, &wr, false, "atomic fetch-and-add");
		} else {
			uint64_t step = op->value - t->last;
			next = t->last + (step > IBP_IMM_VALUE_MASK ? IBP_IMM_VALUE_MASK : step);
			*slot = t->raddr;
			wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
			wr.imm_data = htonl((t->slot << IBP_IMM_SLOT_SHIFT) | (uint32_t)(next & IBP_IMM_VALUE_MASK));
			wr.wr.rdma.remote_addr = ep->rem.mailbox_addr + (uint64_t)t->slot * 8;
			wr.wr.rdma.rkey = ep->rem.mailbox_rkey;
			rc = ep_post(ep, &wr, false, "RDMA write with immediate");
		}
		if (rc < 0)
			return rc;
		t->last = next;
	}
	return 0;
}

/* Posts queued ops in submission order while the send queue has room.
 * Returns 0 when all are posted, -EAGAIN when some wait, or a hard error. */
static int ep_drain(struct ibp_ep *ep)
{
	struct ibp_op *op;
	while ((op = ep->pend_head) != NULL) {
		int rc = op->kind == IBP_OP_PUT ? post_put_chunks(ep, op) : post_signal(ep, op);
		if (rc < 0)
			return rc;
		ep->pend_head = op->next;
		if (!ep->pend_head)
			ep->pend_tail = NULL;
		ep->npend--;
		ibp_core->free(op);
	}
	return 0;
}

static void bad_imm(struct ibp_ep *ep, const char *why)
{
	if (!ep->error)
		IBP_ERR("signal from rank %d on %s is malformed: %s", ep->peer_rank, ep_port(ep)->name, why);
	ep_fail(ep, -WEFT_ERR_PROTOCOL);
}

/* The receiving side of an imm signal (see the scheme at the top). */
static void handle_imm(struct ibp_ep *ep, const struct ibv_wc *wc)
{
	char why[160];
	if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		snprintf(why, sizeof(why), "receive completion of opcode %d without immediate data", (int)wc->opcode);
		bad_imm(ep, why);
		return;
	}
	uint32_t imm = ntohl(wc->imm_data);
	uint32_t slot = imm >> IBP_IMM_SLOT_SHIFT;
	if (slot >= ep->nslots) {
		snprintf(why, sizeof(why), "token slot %u is outside the mailbox (%u slots)", slot, ep->nslots);
		bad_imm(ep, why);
		return;
	}
	uint64_t addr = __atomic_load_n(&ep->mailbox[slot], __ATOMIC_ACQUIRE);
	if (addr % 8 != 0 || !ibp_mem_contains(ep->ctx, addr, 8)) {
		snprintf(why, sizeof(why), "slot %u names token address 0x%llx, outside every registered region", slot,
			 (unsigned long long)addr);
		bad_imm(ep, why);
		return;
	}
	uint32_t delta = ((imm & IBP_IMM_VALUE_MASK) - (uint32_t)(ep->slot_last[slot] & IBP_IMM_VALUE_MASK)) &
			 IBP_IMM_VALUE_MASK;
	if (delta == 0) {
		snprintf(why, sizeof(why), "slot %u: the value does not grow past %llu", slot,
			 (unsigned long long)ep->slot_last[slot]);
		bad_imm(ep, why);
		return;
	}
	ep->slot_last[slot] += delta;
	__atomic_store_n((uint64_t *)(uintptr_t)addr, ep->slot_last[slot], __ATOMIC_RELEASE);
}

static void handle_wc(struct ibp_ep *ep, const struct ibv_wc *wc, int *consumed)
{
	bool recv = wc->wr_id == IBP_WRID_RECV;
	if (recv) {
		ep->recv_posted--;
		(*consumed)++;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		/* After the first failure the queue pair is in the error state and
		 * flushes everything else (IBV_WC_WR_FLUSH_ERR): log the cause once. */
		if (!ep->error)
			IBP_ERR("%s to rank %d on %s failed: %s (status %d, vendor error 0x%x)",
				recv ? "receive" : "work request", ep->peer_rank, ep_port(ep)->name,
				ibv_wc_status_str(wc->status), (int)wc->status, wc->vendor_err);
		ep_fail(ep, ibp_wc_code(wc->status));
		return;
	}
	if (recv) {
		handle_imm(ep, wc);
		return;
	}
	if (wc->wr_id >= ep->posted) {
		if (!ep->error)
			IBP_ERR("completion for work request %llu on %s, but only %llu were posted",
				(unsigned long long)wc->wr_id, ep_port(ep)->name, (unsigned long long)ep->posted);
		ep_fail(ep, -WEFT_ERR_TRANSPORT);
		return;
	}
	if (wc->wr_id + 1 > ep->completed)
		ep->completed = wc->wr_id + 1;
}

/* Polls the endpoint's completions (bounded, so progress stays non-blocking),
 * reposts the receives imm signals consumed, and posts queued ops. */
static void ep_progress(struct ibp_ep *ep)
{
	int consumed = 0;
	for (int iter = 0; iter < 16; iter++) {
		struct ibv_wc wc[16];
		int n = ibp_verbs->poll_cq(ep->cq, 16, wc);
		if (n < 0) {
			if (!ep->error)
				IBP_ERR("ibv_poll_cq on %s failed: %s", ep_port(ep)->name, strerror(errno ? errno : EIO));
			ep_fail(ep, -WEFT_ERR_TRANSPORT);
			return;
		}
		for (int i = 0; i < n; i++)
			handle_wc(ep, &wc[i], &consumed);
		if (n < 16)
			break;
	}
	if (ep->error)
		return;
	if (consumed > 0) {
		int rc = post_recvs(ep, consumed);
		if (rc < 0) {
			ep_fail(ep, rc);
			return;
		}
	}
	if (ep->connected && ep->pend_head)
		ep_drain(ep);
}

int ibp_progress(void *tc)
{
	struct ibp_ctx *ctx = tc;
	int ret = 0;
	if (!ctx)
		return -EINVAL;
	for (struct ibp_ep *ep = ctx->eps; ep; ep = ep->next) {
		int before = ep->error;
		ep_progress(ep);
		if (!before && ep->error && !ret)
			ret = ep->error;
	}
	return ret;
}

static int find_rkey(const struct ibp_ep *ep, const struct ibp_rmh *r, uint32_t *rkey, const char *what)
{
	for (int i = 0; i < r->count; i++) {
		if (r->keys[i].guid == ep->rem.guid) {
			*rkey = r->keys[i].rkey;
			return 0;
		}
	}
	IBP_ERR("%s: rank %d's region has no key for the device (GUID 0x%016llx) this connection reaches", what,
		r->peer, (unsigned long long)ep->rem.guid);
	return -WEFT_ERR_PROTOCOL;
}

static int check_op(struct ibp_ep *ep, const struct ibp_rmh *r, uint64_t roff, size_t len, const char *what,
		    uint32_t *rkey)
{
	if (!ep || !r)
		return -EINVAL;
	if (!ep->connected) {
		IBP_ERR("%s: endpoint to rank %d is not connected", what, ep->peer_rank);
		return -EINVAL;
	}
	if (ep->error)
		return ep->error;
	int rc = find_rkey(ep, r, rkey, what);
	if (rc < 0)
		return rc;
	if (roff > r->len || len > r->len - roff) {
		IBP_ERR("%s: remote range %llu+%zu is outside rank %d's %llu-byte region", what, (unsigned long long)roff,
			len, r->peer, (unsigned long long)r->len);
		return -EINVAL;
	}
	return 0;
}

/* Admission: at most sq_depth ops wait in software per endpoint. */
static int admit(struct ibp_ep *ep)
{
	if (ep->npend < ep->ctx->set.sq_depth)
		return 0;
	ep_progress(ep);
	if (ep->error)
		return ep->error;
	return ep->npend < ep->ctx->set.sq_depth ? 0 : -EAGAIN;
}

static int enqueue(struct ibp_ep *ep, struct ibp_op *op)
{
	op->next = NULL;
	if (ep->pend_tail)
		ep->pend_tail->next = op;
	else
		ep->pend_head = op;
	ep->pend_tail = op;
	ep->npend++;
	int rc = ep_drain(ep);
	return rc == -EAGAIN ? 0 : rc;
}

int ibp_put(void *epv, void *rmhv, uint64_t roff, void *mhv, uint64_t loff, size_t len)
{
	struct ibp_ep *ep = epv;
	struct ibp_rmh *r = rmhv;
	struct ibp_mh *m = mhv;
	uint32_t rkey = 0; /* set by check_op; gcc -O3 cannot see that */
	int rc;
	if (!m)
		return -EINVAL;
	if ((rc = check_op(ep, r, roff, len, "put", &rkey)) < 0)
		return rc;
	if (loff > m->len || len > m->len - loff) {
		IBP_ERR("put to rank %d: local range %llu+%zu is outside the %zu-byte region", ep->peer_rank,
			(unsigned long long)loff, len, m->len);
		return -EINVAL;
	}
	struct ibv_mr *mr = m->mr[ep_port(ep)->dev];
	if (!mr) {
		IBP_ERR("put to rank %d: local region is not registered with %s", ep->peer_rank, ep_dev(ep)->name);
		return -EINVAL;
	}
	if (len == 0)
		return 0;
	if ((rc = admit(ep)) < 0)
		return rc;
	struct ibp_op *op = ibp_core->calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->kind = IBP_OP_PUT;
	op->laddr = (char *)m->base + loff;
	op->lkey = mr->lkey;
	op->raddr = r->addr + roff;
	op->rkey = rkey;
	op->len = len;
	return enqueue(ep, op);
}

/* The endpoint's record of a remote token, made on first use. */
static int token_index(struct ibp_ep *ep, uint64_t raddr, uint32_t rkey, int *out)
{
	for (int i = 0; i < ep->ntokens; i++) {
		if (ep->tokens[i].raddr == raddr && ep->tokens[i].rkey == rkey) {
			*out = i;
			return 0;
		}
	}
	if (ep->sig_mode == IBP_SIG_IMM && (uint32_t)ep->ntokens >= ep->rem.mailbox_slots) {
		IBP_ERR("signal: rank %d offers %u token slots for write-with-immediate signals and all are in use "
			"(raise ib.imm_slots on that rank)",
			ep->peer_rank, ep->rem.mailbox_slots);
		return -ENOSPC;
	}
	if (ep->ntokens == ep->cap_tokens) {
		int cap = ep->cap_tokens ? ep->cap_tokens * 2 : 16;
		struct ibp_token *t = ibp_core->calloc((size_t)cap, sizeof(*t));
		if (!t)
			return -ENOMEM;
		if (ep->ntokens)
			memcpy(t, ep->tokens, (size_t)ep->ntokens * sizeof(*t));
		ibp_core->free(ep->tokens);
		ep->tokens = t;
		ep->cap_tokens = cap;
	}
	struct ibp_token *t = &ep->tokens[ep->ntokens];
	memset(t, 0, sizeof(*t));
	t->raddr = raddr;
	t->rkey = rkey;
	t->slot = (uint32_t)ep->ntokens;
	*out = ep->ntokens++;
	return 0;
}

int ibp_signal(void *epv, void *rmhv, uint64_t roff, uint64_t value)
{
	struct ibp_ep *ep = epv;
	struct ibp_rmh *r = rmhv;
	uint32_t rkey = 0; /* set by check_op; gcc -O3 cannot see that */
	int rc, ti;
	if ((rc = check_op(ep, r, roff, sizeof(uint64_t), "signal", &rkey)) < 0)
		return rc;
	uint64_t raddr = r->addr + roff;
	/* Atomics need natural alignment; the token must never be seen torn. */
	if (raddr % sizeof(uint64_t) != 0) {
		IBP_ERR("signal: token at offset %llu of rank %d's region is not 8-byte aligned", (unsigned long long)roff,
			r->peer);
		return -EINVAL;
	}
	if ((rc = token_index(ep, raddr, rkey, &ti)) < 0)
		return rc;
	struct ibp_token *t = &ep->tokens[ti];
	if (value <= t->queued) {
		IBP_ERR("signal: value %llu does not exceed %llu, signalled before on this connection (tokens only grow)",
			(unsigned long long)value, (unsigned long long)t->queued);
		return -EINVAL;
	}
	if ((rc = admit(ep)) < 0)
		return rc;
	struct ibp_op *op = ibp_core->calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->kind = IBP_OP_SIGNAL;
	op->token = ti;
	op->value = value;
	ep->tokens[ti].queued = value;
	return enqueue(ep, op);
}

int ibp_flush(void *epv)
{
	struct ibp_ep *ep = epv;
	if (!ep)
		return -EINVAL;
	if (ep->error)
		return ep->error;
	if (!ep->connected)
		return 0;
	ep_progress(ep);
	if (ep->error)
		return ep->error;
	if (!ep->pend_head && ep->posted == ep->completed)
		return 0;
	/* Unsignaled WRs complete only through a later signalled one: when the
	 * tail of the queue asked for no completion, write the peer's flush word
	 * (the mailbox's last entry) with one that does. */
	if (!ep->pend_head && ep->sig_end < ep->posted && !sq_full(ep)) {
		uint64_t *slot = scratch_slot(ep);
		*slot = ep->posted;
		struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)slot, .length = 8, .lkey = ep->scratch_mr->lkey};
		struct ibv_send_wr wr;
		memset(&wr, 0, sizeof(wr));
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.wr.rdma.remote_addr = ep->rem.mailbox_addr + (uint64_t)ep->rem.mailbox_slots * 8;
		wr.wr.rdma.rkey = ep->rem.mailbox_rkey;
		int rc = ep_post(ep, &wr, true, "flush write");
		if (rc < 0)
			return rc;
	}
	return -EAGAIN;
}

int ibp_ep_describe(void *epv, char *buf, size_t len)
{
	struct ibp_ep *ep = epv;
	if (!ep || !buf || len == 0)
		return -EINVAL;
	const struct ibp_port *p = ep_port(ep);
	char gid[48] = "-";
	if (p->gid_index >= 0)
		inet_ntop(AF_INET6, p->gid.raw, gid, sizeof(gid));
	int n;
	if (ep->connected)
		n = snprintf(buf, len, "device=%s link=%s qpn=0x%x peer=rank %d qpn=0x%x mtu=%d gid=%s signal=%s", p->name,
			     ibp_link_name(p->attr.link_layer), ep->qp->qp_num, ep->peer_rank, ep->rem.qpn,
			     ibp_mtu_bytes(ep->mtu), gid, ep->sig_mode == IBP_SIG_ATOMIC ? "atomic" : "imm");
	else
		n = snprintf(buf, len, "device=%s link=%s qpn=0x%x peer=rank %d (unconnected)", p->name,
			     ibp_link_name(p->attr.link_layer), ep->qp->qp_num, ep->peer_rank);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}
