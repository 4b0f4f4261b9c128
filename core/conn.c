/* SPDX-License-Identifier: Apache-2.0 */
/* Connections: both ranks swap their candidate transports over the bootstrap,
 * agree on one, make its endpoints, swap their addresses and connect; then one-sided put, signal and flush,
 * which the caller drives (progress and retry on a full queue, no timeouts:
 * the bootstrap reports dead peers and aborts). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "conn.h"
#include "fault.h"
#include "le.h"
#include "log.h"
#include "mem.h"
#include "progress.h"
#include "registry.h"
#include "sem.h"
#include "sigkeep.h"
#include "stage.h"
#include "topo.h"
#include "tpsel.h"
#include "handles.h"

/* A connection is settled in two steps, so that only the transport chosen
 * makes an endpoint (a UCX worker or a libfabric endpoint listens, and holds
 * descriptors, for every peer that could reach it).
 * The offer, little-endian:
 *   magic u32 "WFTC" | status i32 (0, or this side's error) | flags u32 (bit 0: the
 *   caller named a transport; bits 8-15: how many leading candidates a use or
 *   require rule pinned, whose connect failure is an error, not a fall-back;
 *   bits 16-23: the memory type the caller asked for; bit 24: this side can
 *   stage device data through host memory, stage.c) |
 *   candidate count u32 |
 *   per candidate: name char[32] | u32 0 (formerly its address length)
 * Then, per transport tried: status i32 | address length u32 | address bytes. */
#define CONN_MAGIC 0x43544657u /* "WFTC" */
#define CONN_HDR 16
#define CAND_HDR (WEFT__TP_NAME_MAX + 4)
#define MAX_ADDR (64u << 10)
#define MAX_CONN_MSG (1u << 20)

struct cand {
	int tpi;
	void *ep;
	unsigned char *addr;
	size_t addr_len;
};

static void ep_destroy(struct weft__tp *tp, void *ep)
{
	if (!ep)
		return;
	pthread_mutex_lock(&tp->lock);
	int rc = WEFT__TP_CALL(tp, disconnect, ep);
	pthread_mutex_unlock(&tp->lock);
	if (rc != 0 && rc != -ENOSYS)
		WEFT_WARN("transport %s: disconnect failed: %s", tp->name, weft_strerror(rc));
}

/* Makes an endpoint of transport tpi for peer; its address lands in c. */
static int make_endpoint(weft_comm_t *comm, int tpi, const struct weft_tp_peer *tpeer, struct cand *c)
{
	struct weft__tp *tp = &comm->tp[tpi];
	if (!WEFT__TP_HAS(tp, endpoint) || !WEFT__TP_HAS(tp, connect)) {
		WEFT_INFO("transport %s cannot make connections (no endpoint/connect op)", tp->name);
		return -EHOSTUNREACH;
	}
	size_t cap = 512;
	for (;;) {
		unsigned char *addr = malloc(cap);
		if (!addr)
			return -ENOMEM;
		size_t len = cap;
		void *ep = NULL;
		/* A transport's first endpoint may start its library's machinery
		 * (a UCX worker, a libfabric endpoint), which installs signal
		 * handlers as the plugin's load and open may. */
		struct weft__sigkeep k;
		char who[WEFT__TP_NAME_MAX + 48];
		snprintf(who, sizeof(who), "making an endpoint of transport '%s'", tp->name);
		weft__sigkeep_save(&k);
		pthread_mutex_lock(&tp->lock);
		int rc = tp->ops->endpoint(tp->tc, tpeer, addr, &len, &ep);
		pthread_mutex_unlock(&tp->lock);
		weft__sigkeep_restore(&k, who);
		if (rc == -ENOSPC && len > cap && len <= MAX_ADDR) {
			free(addr);
			cap = len;
			continue;
		}
		if (rc != 0) {
			free(addr);
			if (rc == -ENOSPC)
				WEFT_ERROR("transport %s: endpoint address of %zu bytes exceeds %u", tp->name, len,
					   MAX_ADDR);
			return rc == -ENOSPC ? -WEFT_ERR_TRANSPORT : rc;
		}
		if (len > cap) {
			free(addr);
			WEFT_ERROR("transport %s: endpoint reports %zu address bytes in a %zu-byte buffer", tp->name,
				   len, cap);
			ep_destroy(tp, ep);
			return -WEFT_ERR_TRANSPORT;
		}
		c->tpi = tpi;
		c->ep = ep;
		c->addr = addr;
		c->addr_len = len;
		return 0;
	}
}

static void drop_cands(weft_comm_t *comm, struct cand *c, int n, int keep)
{
	for (int i = 0; i < n; i++) {
		if (i != keep)
			ep_destroy(&comm->tp[c[i].tpi], c[i].ep);
		free(c[i].addr);
	}
}

static unsigned char *build_msg(weft_comm_t *comm, int status, int named, const struct cand *c, int n,
				size_t *len)
{
	size_t total = CONN_HDR + (size_t)n * CAND_HDR;
	unsigned char *m = calloc(1, total);
	if (!m)
		return NULL;
	put32(m, CONN_MAGIC);
	put32(m + 4, (uint32_t)status);
	put32(m + 8, (uint32_t)named);
	put32(m + 12, (uint32_t)n);
	size_t off = CONN_HDR;
	for (int i = 0; i < n; i++) {
		const char *name = comm->tp[c[i].tpi].name;
		memcpy(m + off, name, strlen(name));
		put32(m + off + WEFT__TP_NAME_MAX, 0); /* the offer names; addresses follow per try */
		off += CAND_HDR;
	}
	*len = total;
	return m;
}

/* Swaps connect messages with peer: length first, then the message. */
static int swap_msgs(weft_comm_t *comm, int peer, const unsigned char *mine, size_t mlen, unsigned char **theirs,
		     size_t *tlen)
{
	uint64_t l = mlen, pl = 0;
	int rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_CONN, &l, sizeof(l));
	if (rc == 0)
		rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_CONN, mine, mlen);
	if (rc == 0)
		rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_CONN, &pl, sizeof(pl));
	if (rc != 0)
		return rc;
	if (pl < CONN_HDR || pl > MAX_CONN_MSG) {
		WEFT_ERROR("weft_connect: rank %d sent a connect message of %llu bytes", peer, (unsigned long long)pl);
		return -WEFT_ERR_PROTOCOL;
	}
	unsigned char *m = malloc((size_t)pl);
	if (!m)
		return -ENOMEM;
	rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_CONN, m, (size_t)pl);
	if (rc != 0) {
		free(m);
		return rc;
	}
	*theirs = m;
	*tlen = (size_t)pl;
	return 0;
}

/* Finds the peer's candidate named `name`: its address, or NULL. Validates the
 * whole message on the way (-WEFT_ERR_PROTOCOL). */
static int find_peer_cand(int peer, const unsigned char *m, size_t len, const char *name, const unsigned char **addr,
			  size_t *alen, uint32_t *pos)
{
	uint32_t n = get32(m + 12);
	size_t off = CONN_HDR;
	*addr = NULL;
	for (uint32_t i = 0; i < n; i++) {
		if (len - off < CAND_HDR) {
			WEFT_ERROR("weft_connect: connect message of rank %d is truncated", peer);
			return -WEFT_ERR_PROTOCOL;
		}
		char cname[WEFT__TP_NAME_MAX];
		memcpy(cname, m + off, sizeof(cname));
		uint32_t al = get32(m + off + WEFT__TP_NAME_MAX);
		if (!memchr(cname, '\0', sizeof(cname)) || al > len - off - CAND_HDR) {
			WEFT_ERROR("weft_connect: connect message of rank %d has a malformed candidate", peer);
			return -WEFT_ERR_PROTOCOL;
		}
		if (!*addr && strcmp(cname, name) == 0) {
			*addr = m + off + CAND_HDR;
			*alen = al;
			*pos = i;
		}
		off += CAND_HDR + al;
	}
	return 0;
}

static int connect_peer(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			weft_conn_t **out);

int weft__connect_mem(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			      weft_conn_t **out)
{
	if (!comm || !out) {
		WEFT_ERROR("weft_connect: NULL %s", comm ? "conn out-pointer" : "comm");
		return -EINVAL;
	}
	if ((unsigned)mem >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_connect_mem: %d is not a memory type (0..%d)", (int)mem, WEFT_MEM_TYPE_COUNT - 1);
		return -EINVAL;
	}
	int rc = weft__progress_hold(comm);
	if (rc != 0)
		return rc;
	rc = connect_peer(comm, peer, transport, mem, out);
	weft__progress_release(comm);
	return rc;
}

int weft__connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **out)
{
	return weft__connect_mem(comm, peer, transport, WEFT_MEM_HOST, out);
}

static const char *mem_name(enum weft_mem_type mem)
{
	static const char *const names[WEFT_MEM_TYPE_COUNT] = {"host", "cuda", "hip"};
	return (unsigned)mem < WEFT_MEM_TYPE_COUNT ? names[mem] : "?";
}

/* This side's candidates for a connection to peer, best first: the named
 * transport alone, or every open transport that weft__tp_plan orders (the
 * [transport] rules, then scores) and that can make an endpoint. `status` is
 * this side's error, sent to the peer rather than returned, so that it is not
 * left waiting; `npinned` counts the leading candidates rules pinned. */
struct conn_plan {
	struct cand *c;
	int nc, status, npinned;
};

static int plan_cands(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
		      enum weft_peer_class cls, const struct weft__gpu_link *gl, struct conn_plan *pl)
{
	pl->c = calloc(comm->ntp > 0 ? (size_t)comm->ntp : 1, sizeof(*pl->c));
	if (!pl->c)
		return -ENOMEM;
	pl->nc = pl->status = pl->npinned = 0;
	struct cand *c = pl->c;
	if (transport) {
		int tpi = weft__comm_tp_index(comm, transport);
		if (tpi < 0) {
			if (weft__registry_find(WEFT_PLUGIN_TRANSPORT, transport))
				WEFT_ERROR("weft_connect: transport '%s' is loaded but did not open for this communicator",
					   transport);
			else
				WEFT_ERROR("weft_connect: no transport named '%s' is loaded", transport);
			pl->status = -WEFT_ERR_PLUGIN;
		} else {
			c[0].tpi = tpi;
			pl->nc = 1;
		}
		return 0;
	}
	struct weft__tp_cand *tc = calloc(comm->ntp > 0 ? (size_t)comm->ntp : 1, sizeof(*tc));
	struct weft__tp_plan *plan = malloc(sizeof(*plan));
	if (!tc || !plan) {
		free(tc);
		free(plan);
		free(pl->c);
		pl->c = NULL;
		return -ENOMEM;
	}
	for (int i = 0; i < comm->ntp; i++) {
		tc[i].name = comm->tp[i].name;
		tc[i].ops = comm->tp[i].ops;
	}
	/* The memory type the caller named (host for weft_connect): rules
	 * with a mem= condition and the per-memory-type scores follow it. */
	pl->status = weft__tp_plan(tc, comm->ntp, cls, mem, gl, comm->nranks, 0, plan);
	for (int k = 0; pl->status == 0 && k < plan->n; k++) {
		int i = plan->order[k];
		if (!WEFT__TP_HAS(&comm->tp[i], endpoint) || !WEFT__TP_HAS(&comm->tp[i], connect)) {
			WEFT_INFO("transport %s cannot make connections (no endpoint/connect op)", comm->tp[i].name);
			continue;
		}
		WEFT_DEBUG("weft_connect: offering %s to rank %d: %s", comm->tp[i].name, peer, plan->why[k]);
		if (k < plan->pinned)
			pl->npinned++;
		c[pl->nc++].tpi = i;
	}
	free(tc);
	free(plan);
	return 0;
}

/* The peer's connect message against this side's: 0, or the error that ends
 * the call (logged). *pinned is the lower rank's count of pinned candidates. */
static int check_peer_msg(weft_comm_t *comm, int peer, const unsigned char *theirs, const char *transport,
			  enum weft_mem_type mem, const struct conn_plan *pl, int *pinned)
{
	if (get32(theirs) != CONN_MAGIC) {
		WEFT_ERROR("weft_connect: rank %d sent something that is not a connect message", peer);
		return -WEFT_ERR_PROTOCOL;
	}
	if (pl->status != 0)
		return pl->status;
	int pstatus = (int32_t)get32(theirs + 4);
	if (pstatus != 0) {
		WEFT_ERROR("weft_connect: rank %d could not offer %s%s%s: %s", peer, transport ? "transport '" : "",
			   transport ? transport : "any transport", transport ? "'" : "", weft_strerror(pstatus));
		return pstatus < 0 && pstatus > -WEFT_ERR_LAST ? pstatus : -WEFT_ERR_PROTOCOL;
	}
	uint32_t pflags = get32(theirs + 8);
	if ((pflags & 1) != (transport != NULL)) {
		WEFT_ERROR("weft_connect: rank %d %s a transport but this rank %s", peer,
			   (pflags & 1) ? "named" : "did not name", transport ? "did" : "did not");
		return -WEFT_ERR_MISMATCH;
	}
	uint32_t pmem = (pflags >> 16) & 0xff;
	if (pmem != (uint32_t)mem) {
		WEFT_ERROR("weft_connect: rank %d asked for a connection for %s memory but this rank for %s memory",
			   peer, mem_name((enum weft_mem_type)pmem), mem_name(mem));
		return -WEFT_ERR_MISMATCH;
	}
	/* The lower rank's list also says how many of its first candidates rules
	 * pinned: a connect failure there ends the call; past them, both sides
	 * drop the transport that failed and take the next common one. */
	*pinned = comm->rank < peer ? pl->npinned : (int)((pflags >> 8) & 0xff);
	return 0;
}

/* Swaps the endpoint step of one transport: this side's status and address
 * for the peer's. *paddr is malloc'd (NULL when the peer has none). */
static int swap_addr(weft_comm_t *comm, int peer, int status, const struct cand *c, int32_t *pstatus,
		     unsigned char **paddr, size_t *palen)
{
	unsigned char h[8], ph[8];
	put32(h, (uint32_t)status);
	put32(h + 4, status == 0 ? (uint32_t)c->addr_len : 0);
	*paddr = NULL;
	*palen = 0;
	int rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_CONN, h, sizeof(h));
	if (rc == 0 && status == 0)
		rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_CONN, c->addr, c->addr_len);
	if (rc == 0)
		rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_CONN, ph, sizeof(ph));
	if (rc != 0)
		return rc;
	*pstatus = (int32_t)get32(ph);
	uint32_t al = get32(ph + 4);
	if (*pstatus == 0 && (al == 0 || al > MAX_ADDR)) {
		WEFT_ERROR("weft_connect: rank %d sent an endpoint address of %u bytes", peer, al);
		return -WEFT_ERR_PROTOCOL;
	}
	if (*pstatus != 0)
		return al == 0 ? 0 : -WEFT_ERR_PROTOCOL;
	*paddr = malloc(al);
	if (!*paddr)
		return -ENOMEM;
	rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_CONN, *paddr, al);
	if (rc != 0) {
		free(*paddr);
		*paddr = NULL;
		return rc;
	}
	*palen = al;
	return 0;
}

/* An error code from the peer, as far as it can be trusted. */
static int peer_err(int32_t e)
{
	return e < 0 && e > -WEFT_ERR_LAST ? e : -WEFT_ERR_PEER;
}

/* Both sides settle on one candidate, make its endpoints and connect them: the
 * lower rank takes its first candidate the peer offers too; the higher rank
 * takes, of its candidates, the one the peer listed first. Both learn whether
 * the other made its endpoint and connected, so neither keeps a half-open
 * connection. A transport that cannot make an endpoint for this peer is
 * dropped on both sides; past the pinned ones so is one that fails to
 * connect, and the next common one is tried. Returns 0 with *chosen, or the
 * error (logged). */
static int negotiate(weft_comm_t *comm, int peer, const char *transport, const struct weft_tp_peer *tpeer,
		     struct conn_plan *pl, const unsigned char *theirs, size_t tlen, int pinned, int *chosen)
{
	struct cand *c = pl->c;
	int nc = pl->nc, rc = 0, ep_err = 0;
	int *failed = calloc(nc > 0 ? (size_t)nc : 1, sizeof(*failed));
	if (!failed)
		return -ENOMEM;
	for (;;) {
		int pick = -1;
		uint32_t best_pos = UINT32_MAX, low_pos = 0;
		for (int i = 0; i < nc && (pick < 0 || comm->rank > peer); i++) {
			const unsigned char *a = NULL;
			size_t al = 0;
			uint32_t pos = 0;
			if (failed[i])
				continue;
			rc = find_peer_cand(peer, theirs, tlen, comm->tp[c[i].tpi].name, &a, &al, &pos);
			if (rc != 0)
				goto out;
			if (a && (comm->rank < peer || pos < best_pos)) {
				pick = i;
				best_pos = pos;
				low_pos = comm->rank < peer ? (uint32_t)i : pos;
			}
		}
		if (pick < 0) {
			if (ep_err) {
				rc = ep_err;
			} else if (transport) {
				WEFT_ERROR("weft_connect: rank %d asked for another transport than '%s'", peer, transport);
				rc = -WEFT_ERR_MISMATCH;
			} else {
				WEFT_ERROR("weft_connect: no transport reaches rank %d from both sides%s", peer,
					   rc != 0 ? " (every common one failed to connect)" : "");
				rc = -EHOSTUNREACH;
			}
			goto out;
		}
		struct weft__tp *tp = &comm->tp[c[pick].tpi];
		int erc = make_endpoint(comm, c[pick].tpi, tpeer, &c[pick]);
		int32_t perc = 0;
		unsigned char *paddr = NULL;
		size_t palen = 0;
		rc = swap_addr(comm, peer, erc, &c[pick], &perc, &paddr, &palen);
		if (rc != 0)
			goto out;
		if (erc != 0 || perc != 0) {
			int pin = (int)low_pos < pinned;
			if (erc != 0)
				weft__log(transport || pin ? WEFT_LOG_ERROR : WEFT_LOG_INFO, NULL,
					  "weft_connect: transport %s cannot make an endpoint for rank %d: %s", tp->name, peer,
					  weft_strerror(erc));
			else
				weft__log(transport || pin ? WEFT_LOG_ERROR : WEFT_LOG_INFO, NULL,
					  "weft_connect: rank %d could not make an endpoint of %s: %s", peer, tp->name,
					  weft_strerror(peer_err(perc)));
			ep_err = erc != 0 ? erc : peer_err(perc);
			free(paddr);
			ep_destroy(tp, c[pick].ep);
			c[pick].ep = NULL;
			free(c[pick].addr);
			c[pick].addr = NULL;
			failed[pick] = 1;
			rc = 0;
			if (transport) {
				rc = ep_err;
				goto out;
			}
			continue;
		}
		pthread_mutex_lock(&tp->lock);
		rc = weft__fault_should_fail(WEFT_FAULT_CONNECT) ? weft__fault_error(WEFT_FAULT_CONNECT)
								  : tp->ops->connect(c[pick].ep, paddr, palen);
		pthread_mutex_unlock(&tp->lock);
		free(paddr);
		if (rc != 0)
			WEFT_ERROR("weft_connect: transport %s: connecting to rank %d failed: %s", tp->name, peer,
				   weft_strerror(rc));
		int32_t ack = rc, pack = 0;
		int brc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_CONN, &ack, sizeof(ack));
		if (brc == 0)
			brc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_CONN, &pack, sizeof(pack));
		if (brc != 0) {
			rc = brc;
			goto out;
		}
		if (rc == 0 && pack == 0) {
			*chosen = pick;
			goto out;
		}
		if (rc == 0) {
			WEFT_ERROR("weft_connect: rank %d failed to connect its side of %s: %s", peer, tp->name,
				   weft_strerror(pack));
			rc = -WEFT_ERR_PEER;
		}
		if (transport || (int)low_pos < pinned)
			goto out;
		/* Both sides saw both acks, so both fall back now, to the same next choice. */
		WEFT_WARN("weft_connect: %s failed between this rank and rank %d; both fall back to the next transport",
			  tp->name, peer);
		ep_destroy(tp, c[pick].ep);
		c[pick].ep = NULL;
		failed[pick] = 1;
	}
out:
	free(failed);
	return rc;
}

static int connect_peer(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			weft_conn_t **out)
{
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		WEFT_ERROR("weft_connect: peer %d is not another rank of this communicator (size %d)", peer,
			   comm->nranks);
		return -EINVAL;
	}
	int rc = weft__comm_status(comm);
	if (rc != 0)
		return rc;

	/* The core's own class same-gpu-link is handed to transports as
	 * same-host (topo.h): the plugin ABI knows only the first three. */
	enum weft_peer_class cls = weft__peer_class(comm, peer);
	struct weft__gpu_link gl;
	weft__topo_gpu_link(comm, peer, &gl);
	struct weft_tp_peer tpeer = {
		.size = sizeof(tpeer),
		.rank = peer,
		.peer_class = cls == WEFT__PEER_SAME_GPU_LINK ? WEFT_PEER_SAME_HOST : cls,
		.host_id = weft__bootstrap_host_id(comm->bs, peer),
		.addr = weft__bootstrap_peer_addr(comm->bs, peer),
	};
	struct conn_plan pl;
	if ((rc = plan_cands(comm, peer, transport, mem, cls, &gl, &pl)) != 0)
		return rc;

	/* The connection is allocated before the peers connect: once both sides
	 * have, nothing may fail, because an endpoint the peer already writes to
	 * cannot be torn down at once (ofi's shm provider unmaps the peer's region
	 * in fi_av_remove, and the peer's puts arriving later crash its progress). */
	weft_conn_t *conn = NULL;
	if (pl.status == 0) {
		conn = weft__fault_should_fail(WEFT_FAULT_ALLOC) ? NULL : calloc(1, sizeof(*conn));
		if (!conn) {
			WEFT_ERROR("weft_connect: no memory for a connection to rank %d", peer);
			pl.status = -ENOMEM;
		}
	}

	/* Staging's buffers are made now, since nothing may fail once connected,
	 * where a candidate may need them: one that does not declare mem. */
	struct weft__stage *st = NULL;
	int may_stage = 0;
	for (int i = 0; pl.status == 0 && mem != WEFT_MEM_HOST && i < pl.nc; i++)
		may_stage |= weft__topo_declares_mem(comm->tp[pl.c[i].tpi].ops, mem) != 1;
	if (may_stage)
		weft__stage_prepare(comm, mem, &st);

	/* Always send, even on a local failure, so the peer is not left waiting. */
	size_t mlen = 0, tlen = 0;
	uint32_t flags = (transport != NULL) | ((uint32_t)(pl.npinned > 255 ? 255 : pl.npinned) << 8) |
			 ((uint32_t)mem << 16) | (st ? 1u << 24 : 0);
	unsigned char *mine = build_msg(comm, pl.status, (int)flags, pl.c, pl.nc, &mlen), *theirs = NULL;
	int chosen = -1, pinned = 0;
	if (!mine) {
		rc = -ENOMEM;
		goto err;
	}
	rc = swap_msgs(comm, peer, mine, mlen, &theirs, &tlen);
	free(mine);
	if (rc == 0)
		rc = check_peer_msg(comm, peer, theirs, transport, mem, &pl, &pinned);
	if (rc == 0)
		rc = negotiate(comm, peer, transport, &tpeer, &pl, theirs, tlen, pinned, &chosen);
	if (rc != 0)
		goto err;

	struct weft__tp *tp = &comm->tp[pl.c[chosen].tpi];
	conn->comm = comm;
	conn->peer = peer;
	conn->tpi = pl.c[chosen].tpi;
	conn->tp = tp;
	conn->ep = pl.c[chosen].ep;
	/* Connections between two ranks are made in the same order on both (each
	 * weft_connect meets its peer's), so this count names the pair's connection
	 * alike on both sides. */
	conn->pair_seq = comm->pair_seq[peer]++;
	rc = weft__stage_attach(conn, st, (get32(theirs + 8) >> 24) & 1, mem);
	free(theirs);
	drop_cands(comm, pl.c, pl.nc, chosen);
	free(pl.c);
	pthread_mutex_lock(&comm->lock);
	/* A staged setup that failed leaves a connected endpoint: it waits with
	 * the closed ones for the comm's end, and no fin is awaited for it. */
	conn->orphan = rc != 0;
	weft__list_push(rc != 0 ? &comm->closed : &comm->conns, &conn->link);
	pthread_mutex_unlock(&comm->lock);
	if (rc != 0)
		return rc;
	/* At info: which transport carries what is the first thing to know. */
	WEFT_INFO("connected to rank %d through %s (%s peer, %s memory)", peer, tp->name, weft__peer_class_name(cls),
		  mem_name(mem));
	*out = conn;
	return 0;

err:
	weft__stage_discard(comm, st);
	free(theirs);
	free(conn);
	drop_cands(comm, pl.c, pl.nc, -1);
	free(pl.c);
	return rc;
}

WEFT_API const char *weft_conn_transport(const weft_conn_t *conn)
{
	return conn ? conn->tp->name : NULL;
}

WEFT_API int weft_conn_describe(const weft_conn_t *conn, char *buf, size_t len)
{
	if (!conn || !buf || len == 0)
		return -EINVAL;
	struct weft__tp *tp = conn->tp;
	pthread_mutex_lock(&tp->lock);
	int rc = WEFT__TP_CALL(tp, ep_describe, conn->ep, buf, len);
	pthread_mutex_unlock(&tp->lock);
	return rc;
}

static void conn_free(weft_conn_t *conn)
{
	weft_comm_t *comm = conn->comm;
	pthread_mutex_lock(&comm->lock);
	weft__list_del(&conn->link);
	pthread_mutex_unlock(&comm->lock);
	weft__stage_destroy(conn);
	ep_destroy(conn->tp, conn->ep);
	free(conn);
}

/* Closing is two-sided without blocking on the peer: a closed connection
 * tells its peer "my side is flushed" (a fin message tagged with the pair's
 * connection number) and is parked with its endpoint intact. Endpoints are
 * destroyed only in weft_comm_destroy, after the peer's fin arrived (or the
 * peer died or left): until then the peer may still be flushing toward this
 * rank, and a transport may need this rank's progress and this endpoint to
 * complete that (delivery acknowledgements), or may misbehave on traffic for
 * an endpoint already gone. */
static uint32_t fin_tag(const weft_conn_t *conn)
{
	return WEFT__TAG_FIN_BASE + conn->pair_seq % WEFT__TAG_FIN_RANGE;
}

static void conn_retire(weft_conn_t *conn)
{
	weft_comm_t *comm = conn->comm;
	if (weft__comm_status(comm) == 0) {
		uint32_t seq = conn->pair_seq;
		conn->fin_sent = weft__bootstrap_send(comm->bs, conn->peer, fin_tag(conn), &seq, sizeof(seq)) == 0;
	}
	pthread_mutex_lock(&comm->lock);
	weft__list_del(&conn->link);
	weft__list_push(&comm->closed, &conn->link);
	pthread_mutex_unlock(&comm->lock);
}

WEFT_API int weft_conn_close(weft_conn_t *conn)
{
	if (!conn)
		return 0;
	weft_comm_t *comm = conn->comm;
	pthread_mutex_lock(&comm->port_lock);
	int nports = conn->nports;
	pthread_mutex_unlock(&comm->port_lock);
	if (nports > 0) {
		WEFT_ERROR("weft_conn_close: %d port channel(s) still use this connection; destroy them first", nports);
		return -EBUSY;
	}
	/* A failed comm is not flushed: its peer may be dead. The flush error is
	 * returned, but the connection is closed all the same. */
	int rc = weft__comm_status(comm) == 0 ? weft_flush(conn) : 0;
	conn_retire(conn);
	return rc;
}

void weft__conn_retire_all(weft_comm_t *comm)
{
	while (!weft__list_empty(&comm->conns)) {
		weft_conn_t *conn = weft__container_of(comm->conns.next, weft_conn_t, link);
		if (weft__comm_status(comm) == 0)
			(void)weft_flush(conn);
		conn_retire(conn);
	}
}

void weft__conn_await_fins(weft_comm_t *comm)
{
	if (weft__comm_status(comm) != 0 || weft__list_empty(&comm->closed))
		return;
	/* Every fin of this rank is sent before any is awaited, and peers do the
	 * same, so the waits cannot form a cycle. */
	if (weft__progress_hold(comm) != 0)
		return;
	for (struct weft__link *l = comm->closed.next; l != &comm->closed; l = l->next) {
		weft_conn_t *conn = weft__container_of(l, weft_conn_t, link);
		if (!conn->fin_sent || conn->orphan)
			continue;
		uint32_t seq = 0;
		int rc = weft__bootstrap_recv(comm->bs, conn->peer, fin_tag(conn), &seq, sizeof(seq));
		if (rc == 0 && seq != conn->pair_seq)
			WEFT_WARN("rank %d closed connection #%u where #%u was expected", conn->peer, seq,
				  conn->pair_seq);
		if (rc != 0 && weft__comm_status(comm) != 0)
			break; /* a peer died or the comm was aborted: nobody else is awaited */
	}
	weft__progress_release(comm);
}

void weft__conn_pair_resync(weft_comm_t *comm, int peer, uint32_t theirs)
{
	pthread_mutex_lock(&comm->lock);
	uint32_t mine = comm->pair_seq[peer];
	if (mine != theirs) {
		struct weft__link *lists[2] = {&comm->conns, &comm->closed};
		for (int i = 0; i < 2; i++)
			for (struct weft__link *l = lists[i]->next; l != lists[i]; l = l->next) {
				weft_conn_t *conn = weft__container_of(l, weft_conn_t, link);
				if (conn->peer == peer && conn->pair_seq >= theirs)
					conn->orphan = 1;
			}
		comm->pair_seq[peer] = mine > theirs ? mine : theirs;
	}
	pthread_mutex_unlock(&comm->lock);
	if (mine != theirs)
		WEFT_INFO("rank %d and this rank counted %u and %u connections after a cancelled setup; resynced",
			  peer, theirs, mine);
}

void weft__conn_close_all(weft_comm_t *comm)
{
	while (!weft__list_empty(&comm->conns))
		conn_free(weft__container_of(comm->conns.prev, weft_conn_t, link));
	while (!weft__list_empty(&comm->closed))
		conn_free(weft__container_of(comm->closed.prev, weft_conn_t, link));
	weft__stage_comm_free(comm);
}

/* -------------------------------------------------------- data movement */
int weft__conn_put_once(weft_conn_t *conn, const void *owner, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			uint64_t src_off, size_t len, int retry)
{
	if (weft__stage_wants(conn, dst, src))
		return weft__stage_put_once(conn, owner, dst, dst_off, src, src_off, len);
	struct weft__tp *tp = conn->tp;
	pthread_mutex_lock(&tp->lock);
	int rc = !retry && weft__fault_should_fail(WEFT_FAULT_PUT)
			 ? weft__fault_error(WEFT_FAULT_PUT)
			 : WEFT__TP_CALL(tp, put, conn->ep, dst->rmh[conn->tpi], dst_off, src->mh[conn->tpi], src_off, len);
	pthread_mutex_unlock(&tp->lock);
	return rc;
}

int weft__conn_signal_once(weft_conn_t *conn, const void *owner, weft_rsem_t *rsem, uint64_t value)
{
	if (conn->stage)
		return weft__stage_signal_once(conn, owner, rsem, value);
	struct weft__tp *tp = conn->tp;
	pthread_mutex_lock(&tp->lock);
	int rc = WEFT__TP_CALL(tp, signal, conn->ep, rsem->rmem->rmh[conn->tpi], rsem->off, value);
	pthread_mutex_unlock(&tp->lock);
	return rc;
}

int weft__conn_flush_once(weft_conn_t *conn, int retry)
{
	if (conn->stage)
		return weft__stage_flush_once(conn, retry);
	struct weft__tp *tp = conn->tp;
	pthread_mutex_lock(&tp->lock);
	int rc = !retry && weft__fault_should_fail(WEFT_FAULT_FLUSH) ? weft__fault_error(WEFT_FAULT_FLUSH)
								     : WEFT__TP_CALL(tp, flush, conn->ep);
	pthread_mutex_unlock(&tp->lock);
	return rc;
}

/* While a transport answers -EAGAIN: check the comm, progress, back off. Returns
 * 0 to retry, or the error that ends the wait. */
static int wait_step(weft_conn_t *conn, struct weft__backoff *b)
{
	int rc = weft__comm_status(conn->comm);
	if (rc != 0)
		return rc;
	uint64_t kept = weft__log_errors_kept();
	rc = weft__tp_progress(conn->tp);
	weft__comm_note_error(conn->comm, rc);
	if (rc != 0) {
		if (weft__log_errors_kept() == kept) /* else the transport said more */
			WEFT_ERROR("transport %s: progress failed while waiting on rank %d: %s", conn->tp->name,
				   conn->peer, weft_strerror(rc));
		return rc;
	}
	weft__comm_backoff_wait(conn->comm, b);
	return 0;
}

/* kept: this thread's error count before the op. A transport that already
 * logged the failure said more than this line would: one line a failure. A
 * peer failure the communicator already had was named where it was found. */
static int report_op(weft_conn_t *conn, const char *op, int rc, uint64_t kept)
{
	int known = rc == -WEFT_ERR_PEER && weft__comm_status(conn->comm) != 0;
	weft__comm_note_error(conn->comm, rc);
	if (rc != 0 && rc != -WEFT_ERR_ABORTED && !known && weft__log_errors_kept() == kept)
		WEFT_ERROR("transport %s: %s to rank %d failed: %s", conn->tp->name, op, conn->peer, weft_strerror(rc));
	return rc;
}

WEFT_API int weft_put(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
		      size_t len)
{
	if (!conn || !dst || !src) {
		WEFT_ERROR("weft_put: NULL %s", !conn ? "conn" : !dst ? "dst" : "src");
		return -EINVAL;
	}
	int staged = weft__stage_wants(conn, dst, src);
	uint64_t kept = weft__log_errors_kept();
	int rc = weft__put_check(conn, dst, dst_off, src, src_off, len);
	if (rc != 0)
		return rc;
	rc = weft__comm_status(conn->comm);
	if (rc != 0 || len == 0)
		return rc;
	if (staged)
		return report_op(conn, "staged put", weft__stage_put(conn, dst, dst_off, src, src_off, len), kept);
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	for (int retry = 0; (rc = weft__conn_put_once(conn, &b, dst, dst_off, src, src_off, len, retry)) == -EAGAIN;
	     retry = 1) {
		rc = wait_step(conn, &b);
		if (rc != 0)
			return rc;
	}
	return report_op(conn, "put", rc, kept);
}

WEFT_API int weft_signal(weft_conn_t *conn, weft_rsem_t *sem, uint64_t value)
{
	if (!conn || !sem) {
		WEFT_ERROR("weft_signal: NULL %s", !conn ? "conn" : "sem");
		return -EINVAL;
	}
	int rc = weft__comm_status(conn->comm);
	if (rc != 0)
		return rc;
	rc = weft__rsem_claim(conn, sem, value);
	if (rc != 0)
		return rc;
	uint64_t kept = weft__log_errors_kept();
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	while ((rc = weft__conn_signal_once(conn, &b, sem, value)) == -EAGAIN) {
		rc = wait_step(conn, &b);
		if (rc != 0)
			return rc;
	}
	return report_op(conn, "signal", rc, kept);
}

WEFT_API int weft_flush(weft_conn_t *conn)
{
	if (!conn) {
		WEFT_ERROR("weft_flush: NULL conn");
		return -EINVAL;
	}
	uint64_t kept = weft__log_errors_kept();
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	int rc;
	for (int retry = 0;; retry = 1) {
		rc = weft__comm_status(conn->comm);
		if (rc != 0)
			return rc;
		rc = weft__conn_flush_once(conn, retry);
		if (rc != -EAGAIN)
			break;
		rc = wait_step(conn, &b);
		if (rc != 0)
			return rc;
	}
	return report_op(conn, "flush", rc, kept);
}
