/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap itself: create (rendezvous with the root, then a connection
 * to every peer) and destroy, the accessors, and the messages, allgather and
 * barrier over the peer links. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "auth.h"
#include "launcher.h"
#include "link.h"
#include "net.h"
#include "params.h"
#include "root.h"
#include "service.h"
#include "wire.h"
#include "hostid.h"
#include "log.h"
#include "le.h"

static int parse_table(struct weft__bootstrap *bs, const struct frame *f, const uint8_t *hello)
{
	if (f->len != TABLE_HDR + (size_t)bs->nranks * ENTRY_LEN || (int)get32(f->buf + 8) != bs->nranks) {
		WEFT_ERROR("bootstrap: the root sent a malformed peer table (%zu bytes for %d ranks)", f->len, bs->nranks);
		return -WEFT_ERR_PROTOCOL;
	}
	bs->tag = get64(f->buf);
	for (int i = 0; i < bs->nranks; i++) {
		const uint8_t *e = f->buf + TABLE_HDR + (size_t)i * ENTRY_LEN;
		struct peer *pe = &bs->peers[i];
		memcpy(&pe->addr_be, e, 4);
		pe->port = get16(e + 4);
		pe->proc = get64(e + 8);
		memcpy(pe->host, e + 16, WEFT_HOST_ID_LEN);
		pe->host[WEFT_HOST_ID_LEN - 1] = '\0';
		inet_ntop(AF_INET, &pe->addr_be, pe->addr, sizeof(pe->addr));
	}
	const uint8_t *me = f->buf + TABLE_HDR + (size_t)bs->rank * ENTRY_LEN;
	if (memcmp(me, hello + 12, 6) != 0 || memcmp(me + 8, hello + 20, 8) != 0) {
		WEFT_ERROR("bootstrap: the root's table does not match this rank's hello");
		return -WEFT_ERR_PROTOCOL;
	}
	return 0;
}

/* Connects, authenticates and sends the first frame. A connection the other
 * side shed (it was flooded) or reset is tried again, with backoff, until the
 * deadline. On failure *out is the link, whose why says what the other side
 * did, or NULL when no connection was made. */
static int dial(const struct weft__bootstrap *bs, uint32_t addr_be, uint16_t port, const char *name,
		uint64_t max_len, int type, const void *first, size_t len, double deadline, struct link **out)
{
	double pause = 0.01;
	for (;;) {
		int fd;
		*out = NULL;
		int rc = weft__bs_tcp_connect(addr_be, port, deadline, &fd);
		if (rc != 0)
			return rc;
		struct link *l = weft__bs_link_new(fd, name, max_len);
		if (!l) {
			close(fd);
			return -ENOMEM;
		}
		*out = l;
		rc = weft__bs_hs_initiate(l, bs->secret, bs->id_nonce, deadline);
		if (rc == 0)
			rc = weft__bs_send_frame_now(l, type, 0, first, len, deadline);
		if (rc == 0 || (rc != -EAGAIN && rc != -ECONNRESET && rc != -EPIPE) ||
		    weft__bs_now_s() + pause >= deadline)
			return rc;
		WEFT_DEBUG("bootstrap: %s %s; trying again in %.2f s", name, l->why, pause);
		weft__bs_link_free(l);
		usleep((useconds_t)(pause * 1e6));
		pause = pause * 2 < 1.0 ? pause * 2 : 1.0;
	}
}

/* Meets the root: hello out, table (or the reason there is none) back. */
static int rendezvous(struct weft__bootstrap *bs, const struct weft__unique_id_layout *u, double deadline)
{
	uint32_t root_be;
	uint16_t root_port = ntohs(u->port);
	char rname[64];
	memcpy(&root_be, u->addr, 4);
	weft__bs_fmt_addr(root_be, root_port, rname, sizeof(rname));

	uint8_t hello[HELLO_LEN] = {0};
	uint32_t me_be;
	inet_pton(AF_INET, bs->local_addr, &me_be);
	put32(hello, WEFT__BOOTSTRAP_VERSION);
	put32(hello + 4, (uint32_t)bs->rank);
	put32(hello + 8, (uint32_t)bs->nranks);
	memcpy(hello + 12, &me_be, 4);
	put16(hello + 16, bs->lport);
	put16(hello + 18, 0);
	put64(hello + 20, bs->peers[bs->rank].proc);
	memcpy(hello + 28, bs->peers[bs->rank].host, WEFT_HOST_ID_LEN);

	struct link *l = NULL;
	int rc = dial(bs, root_be, root_port, rname, TABLE_HDR + (uint64_t)bs->nranks * ENTRY_LEN, T_HELLO, hello,
		      sizeof(hello), deadline, &l);
	if (rc != 0) {
		if (rc == -ETIMEDOUT && !l)
			WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): "
				   "no root answers at %s",
				   bs->p.timeout, rname);
		else if (!l)
			WEFT_ERROR("bootstrap: cannot connect to the root at %s: %s", rname, strerror(-rc));
		else if (rc == -ETIMEDOUT)
			WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT) during the "
				   "handshake with the root at %s",
				   bs->p.timeout, rname);
		else
			WEFT_ERROR("bootstrap: the root at %s %s", rname, l->why);
		weft__bs_link_free(l);
		return rc;
	}
	struct frame f = {0};
	rc = weft__bs_link_wait(l, &f, deadline);
	if (rc == -ETIMEDOUT) {
		/* Tell the root, so that it tells everyone else now. */
		uint8_t e[4];
		put32(e, (uint32_t)-ETIMEDOUT);
		weft__bs_send_frame_now(l, T_GIVEUP, 0, e, 4, weft__bs_now_s() + 0.5);
		WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): not all %d ranks "
			   "reached the root at %s",
			   bs->p.timeout, bs->nranks, rname);
	} else if (rc < 0) {
		WEFT_ERROR("bootstrap: lost the root at %s before the rendezvous completed: %s", rname, l->why);
		rc = -WEFT_ERR_PEER;
	} else if (f.type == T_FAIL && f.len >= 4) {
		rc = (int)get32(f.buf);
		if (rc >= 0)
			rc = -WEFT_ERR_PROTOCOL;
		WEFT_ERROR("bootstrap: the root at %s ended the rendezvous: %.*s", rname, (int)(f.len - 4), f.buf + 4);
	} else if (f.type == T_TABLE) {
		rc = parse_table(bs, &f, hello);
	} else {
		WEFT_ERROR("bootstrap: the root at %s sent message type %d instead of the peer table", rname, f.type);
		rc = -WEFT_ERR_PROTOCOL;
	}
	free(f.buf);
	weft__bs_link_free(l);
	return rc;
}

/* Connects to a higher rank's listener; on success the link joins the service thread. */
static int connect_peer(struct weft__bootstrap *bs, int j, double deadline)
{
	struct peer *pe = &bs->peers[j];
	char name[64];
	uint8_t m[16];
	weft__bs_fmt_addr(pe->addr_be, pe->port, name, sizeof(name));
	put32(m, (uint32_t)bs->rank);
	put32(m + 4, (uint32_t)bs->nranks);
	put64(m + 8, bs->tag);
	struct link *l = NULL;
	int rc = dial(bs, pe->addr_be, pe->port, name, SMALL_FRAME, T_PEER_HELLO, m, sizeof(m), deadline, &l);
	if (!l) {
		WEFT_ERROR("bootstrap: cannot connect to rank %d at %s: %s", j, name, strerror(-rc));
		return rc;
	}
	struct frame f = {0};
	if (rc == 0) {
		rc = weft__bs_link_wait(l, &f, deadline);
		if (rc == 1 && (f.type != T_PEER_ACK || f.len != 16 || get32(f.buf) != (uint32_t)j || get64(f.buf + 8) != bs->tag)) {
			snprintf(l->why, sizeof(l->why), "answered with something other than its acknowledgement");
			rc = -WEFT_ERR_PROTOCOL;
		} else if (rc == 1) {
			rc = 0;
		} else if (rc == -1) {
			rc = -WEFT_ERR_PEER;
		}
		free(f.buf);
	}
	if (rc != 0) {
		WEFT_ERROR("bootstrap: connecting to rank %d at %s: it %s", j, name, l->why);
		weft__bs_link_free(l);
		return rc;
	}
	l->max_len = bs->p.max_msg;
	l->last_rx = weft__bs_now_s();
	weft__bs_fmt_addr(pe->addr_be, pe->port, l->name, sizeof(l->name));
	pthread_mutex_lock(&bs->mu);
	pe->link = l;
	pe->up = 1;
	bs->connected++;
	pthread_mutex_unlock(&bs->mu);
	weft__bs_wake(bs);
	return 0;
}

static void bs_free(struct weft__bootstrap *bs)
{
	if (bs->thread_started) {
		pthread_mutex_lock(&bs->mu);
		if (!bs->closing)
			bs->quit = 1;
		pthread_mutex_unlock(&bs->mu);
		weft__bs_wake(bs);
		pthread_join(bs->thread, NULL);
	}
	/* This process's root for the id has served its ranks; one made by
	 * weft_get_unique_id here stops too, rather than linger for late ranks. */
	if (bs->has_root)
		weft__bs_root_stop_where(weft__bs_match_serial, &bs->root_serial);
	else if (bs->joined) {
		struct bs_root_key k = {.id_nonce = bs->id_nonce};
		memcpy(k.secret, bs->secret, 32);
		weft__bs_root_stop_where(weft__bs_match_key, &k);
	}
	weft__bs_pending_clear(&bs->pend);
	if (bs->peers) {
		for (int i = 0; i < bs->nranks; i++) {
			struct peer *pe = &bs->peers[i];
			weft__bs_link_free(pe->link);
			while (pe->rq_head) {
				struct msg *m = pe->rq_head;
				pe->rq_head = m->next;
				free(m->data);
				free(m);
			}
		}
	}
	free(bs->peers);
	weft__bs_cs_free(bs);
	if (bs->lfd >= 0)
		close(bs->lfd);
	if (bs->wake_fd >= 0)
		close(bs->wake_fd);
	pthread_cond_destroy(&bs->cv);
	pthread_mutex_destroy(&bs->mu);
	free(bs);
}

/* The id to meet at: the one passed, checked to be a weft id of this
 * protocol, else one made from the launcher's environment. */
static int bs_take_id(struct weft__bootstrap *bs, const struct weft_unique_id *id,
		      struct weft__unique_id_layout *u)
{
	int rc;
	if (id) {
		memcpy(u, id->internal, sizeof(*u));
		if (u->magic != ID_MAGIC || u->family != AF_INET) {
			WEFT_ERROR("bootstrap: the unique id is not a weft unique id (bad magic); was it made by "
				   "weft_get_unique_id and passed intact?");
			return -EINVAL;
		}
		if (u->version != WEFT__BOOTSTRAP_VERSION) {
			WEFT_ERROR("bootstrap: the unique id is of bootstrap protocol %u; this library speaks %u",
				   u->version, WEFT__BOOTSTRAP_VERSION);
			return -WEFT_ERR_MISMATCH;
		}
	} else if ((rc = weft__bs_id_from_env(&bs->p, u, bs->rank)) != 0) {
		return rc;
	}
	memcpy(bs->secret, u->secret, 32);
	bs->id_nonce = u->nonce;
	return 0;
}

/* This rank's own end: its address and listener, the service thread's
 * wake-up eventfd, and its host and process identity for the table. */
static int bs_listen(struct weft__bootstrap *bs, uint32_t root_be)
{
	uint32_t addr;
	int rc;
	if ((rc = weft__bs_choose_addr(&bs->p, root_be, &addr)) != 0)
		return rc;
	inet_ntop(AF_INET, &addr, bs->local_addr, sizeof(bs->local_addr));
	if ((rc = weft__bs_tcp_listen(addr, 0, &bs->lfd, &bs->lport)) != 0)
		return rc;
	bs->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (bs->wake_fd < 0) {
		rc = -errno;
		WEFT_ERROR("bootstrap: eventfd: %s", strerror(errno));
		return rc;
	}
	if (weft__host_id(bs->peers[bs->rank].host, WEFT_HOST_ID_LEN) != 0)
		return -ENOSPC;
	bs->peers[bs->rank].proc = weft__proc_id();
	return 0;
}

/* The lower ranks connect to us; the service thread accepts them. Waits
 * until all have, the bootstrap fails, or the rendezvous deadline passes. */
static int wait_lower_ranks(struct weft__bootstrap *bs, double deadline)
{
	int rank = bs->rank, nranks = bs->nranks;
	int rc;
	pthread_mutex_lock(&bs->mu);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double left = deadline - weft__bs_now_s();
	if (left < 0)
		left = 0;
	ts.tv_sec += (time_t)left;
	ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	rc = 0;
	while (bs->connected < nranks - 1 && !bs->status && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&bs->cv, &bs->mu, &ts);
	if (bs->status)
		rc = bs->status;
	else if (bs->connected < nranks - 1)
		rc = -ETIMEDOUT;
	else
		rc = 0;
	pthread_mutex_unlock(&bs->mu);
	if (rc == -ETIMEDOUT) {
		char missing[128] = "";
		size_t o = 0;
		for (int i = 0; i < rank && o < sizeof(missing) - 8; i++)
			if (!bs->peers[i].up)
				o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d", o ? "," : "", i);
		WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): ranks %s never "
			   "connected to this rank",
			   bs->p.timeout, missing);
	}
	return rc;
}

int weft__bootstrap_create(const struct weft_unique_id *id, int nranks, int rank, struct weft__bootstrap **out)
{
	struct weft__unique_id_layout u;
	struct weft__bootstrap *bs;
	int rc;

	if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
		WEFT_ERROR("bootstrap: invalid arguments: rank %d of %d ranks%s", rank, nranks, out ? "" : ", out NULL");
		return -EINVAL;
	}
	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	bs->lfd = bs->wake_fd = -1;
	bs->rank = rank;
	bs->nranks = nranks;
	pthread_mutex_init(&bs->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bs->cv, &ca);
	pthread_condattr_destroy(&ca);
	bs->peers = calloc((size_t)nranks, sizeof(*bs->peers));
	if (!bs->peers || weft__bs_cs_init(bs) != 0) {
		rc = -ENOMEM;
		goto err_free;
	}
	if ((rc = weft__bs_params_load(&bs->p)) != 0)
		goto err_free;
	double deadline = weft__bs_now_s() + bs->p.timeout;

	if ((rc = bs_take_id(bs, id, &u)) != 0)
		goto err_free;
	weft__bs_pending_init(&bs->pend, bs->secret, bs->id_nonce, bs->p.hs_timeout, NULL);
	uint32_t root_be;
	memcpy(&root_be, u.addr, 4);
	if ((rc = bs_listen(bs, root_be)) != 0)
		goto err_free;
	if (!id && rank == 0) {
		uint16_t port;
		rc = weft__bs_root_start(&bs->p, root_be, ntohs(u.port), u.secret, u.nonce, &port, &bs->root_serial);
		if (rc != 0)
			goto err_free;
		bs->has_root = 1;
	}

	if ((rc = rendezvous(bs, &u, deadline)) != 0)
		goto err_free;
	bs->joined = 1;
	rc = -pthread_create(&bs->thread, NULL, weft__bs_service_main, bs);
	if (rc != 0) {
		WEFT_ERROR("bootstrap: cannot start the service thread: %s", strerror(-rc));
		goto err_free;
	}
	bs->thread_started = 1;
	for (int j = rank + 1; j < nranks; j++)
		if ((rc = connect_peer(bs, j, deadline)) != 0)
			goto err_free;
	if ((rc = wait_lower_ranks(bs, deadline)) != 0)
		goto err_free;
	WEFT_DEBUG("bootstrap: rank %d of %d connected to every peer (tag %016llx)", rank, nranks,
		   (unsigned long long)bs->tag);
	*out = bs;
	return 0;

err_free:
	bs_free(bs);
	return rc;
}

void weft__bootstrap_destroy(struct weft__bootstrap *bs)
{
	if (!bs)
		return;
	if (bs->thread_started) {
		pthread_mutex_lock(&bs->mu);
		bs->closing = 1;
		pthread_mutex_unlock(&bs->mu);
		weft__bs_wake(bs);
	}
	bs_free(bs);
}

int weft__bootstrap_rank(const struct weft__bootstrap *bs)
{
	return bs->rank;
}

int weft__bootstrap_size(const struct weft__bootstrap *bs)
{
	return bs->nranks;
}

uint64_t weft__bootstrap_tag(const struct weft__bootstrap *bs)
{
	return bs->tag;
}

const char *weft__bootstrap_local_addr(const struct weft__bootstrap *bs)
{
	return bs->local_addr;
}

const char *weft__bootstrap_peer_addr(const struct weft__bootstrap *bs, int peer)
{
	if (peer < 0 || peer >= bs->nranks)
		return NULL;
	return bs->peers[peer].addr;
}

const char *weft__bootstrap_host_id(const struct weft__bootstrap *bs, int rank)
{
	if (rank < 0 || rank >= bs->nranks)
		return NULL;
	return bs->peers[rank].host;
}

uint64_t weft__bootstrap_proc_id(const struct weft__bootstrap *bs, int rank)
{
	if (rank < 0 || rank >= bs->nranks)
		return 0;
	return bs->peers[rank].proc;
}

int weft__bootstrap_listen_port(const struct weft__bootstrap *bs)
{
	return bs->lport;
}

/* ------------------------------------------------------------ messages */

/* any: whatever the bootstrap's status (weft__bootstrap_send_any). */
static int bs_send_opt(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, const void *buf, size_t len,
		       int any)
{
	if (peer < 0 || peer >= bs->nranks || (len && !buf)) {
		WEFT_ERROR("bootstrap: send to rank %d of %d with %s buffer: invalid", peer, bs->nranks, buf ? "a" : "no");
		return -EINVAL;
	}
	if (len > bs->p.max_msg) {
		WEFT_ERROR("bootstrap: a %zu-byte message to rank %d is larger than WEFT_CORE_BOOTSTRAP_MAX_MSG (%llu)",
			   len, peer, (unsigned long long)bs->p.max_msg);
		return -EMSGSIZE;
	}
	int rc = any ? 0 : weft__bootstrap_status(bs);
	if (rc)
		return rc;
	struct peer *pe = &bs->peers[peer];
	if (peer == bs->rank) {
		struct msg *m = malloc(sizeof(*m));
		uint8_t *d = malloc(len ? len : 1);
		if (!m || !d) {
			free(m);
			free(d);
			return -ENOMEM;
		}
		if (len)
			memcpy(d, buf, len);
		*m = (struct msg){.key = (uint64_t)cls << 32 | tag, .len = len, .data = d};
		pthread_mutex_lock(&bs->mu);
		weft__bs_rq_push_locked(bs, pe, m);
		pthread_mutex_unlock(&bs->mu);
		return 0;
	}
	/* The payload is MAC'd with no lock held, so that neither the service
	 * thread (heartbeats, reads) nor other senders wait for it. */
	struct weft__hmac mac;
	struct obuf *b = weft__bs_frame_build(pe->link, T_DATA, cls, tag, buf, len, &mac);
	if (!b)
		return -ENOMEM;
	pthread_mutex_lock(&bs->mu);
	if (bs->status && !any)
		rc = bs->status;
	else if (pe->gone || pe->bye_rcvd)
		rc = -WEFT_ERR_PEER;
	if (rc == 0) {
		weft__bs_frame_seal(pe->link, b, &mac);
		weft__bs_oq_push(pe->link, b);
	}
	pthread_mutex_unlock(&bs->mu);
	if (rc != 0) {
		free(b);
		return rc;
	}
	weft__bs_wake(bs);
	return 0;
}

static int bs_send(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, const void *buf, size_t len)
{
	return bs_send_opt(bs, peer, cls, tag, buf, len, 0);
}

/* This thread's cancel scope (weft__bootstrap_cancel_begin). */
static _Thread_local struct weft__bootstrap *cancel_bs;
static _Thread_local uint64_t cancel_key;

void weft__bootstrap_cancel_begin(struct weft__bootstrap *bs, uint32_t cancel_tag)
{
	cancel_bs = bs;
	cancel_key = (uint64_t)CLS_USER << 32 | cancel_tag;
}

void weft__bootstrap_cancel_end(void)
{
	cancel_bs = NULL;
}

/* Whether a cancel message waits in any peer's queue; callers hold bs->mu. */
static int cancelled_locked(const struct weft__bootstrap *bs)
{
	for (int r = 0; r < bs->nranks; r++)
		for (const struct msg *m = bs->peers[r].rq_head; m; m = m->next)
			if (m->key == cancel_key)
				return 1;
	return 0;
}

static int bs_recv_opt(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, void *buf, size_t len,
		       uint64_t *mark, int any);

static int bs_recv(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, void *buf, size_t len)
{
	return bs_recv_opt(bs, peer, cls, tag, buf, len, NULL, 0);
}

static int bs_recv_mark(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, void *buf, size_t len,
			uint64_t *mark)
{
	return bs_recv_opt(bs, peer, cls, tag, buf, len, mark, 0);
}

/* any: whatever the bootstrap's status (weft__bootstrap_recv_any). */
static int bs_recv_opt(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, void *buf, size_t len,
		       uint64_t *mark, int any)
{
	if (peer < 0 || peer >= bs->nranks || (len && !buf)) {
		WEFT_ERROR("bootstrap: recv from rank %d of %d with %s buffer: invalid", peer, bs->nranks, buf ? "a" : "no");
		return -EINVAL;
	}
	uint64_t key = (uint64_t)cls << 32 | tag;
	struct peer *pe = &bs->peers[peer];
	struct msg *m = NULL;
	int rc = 0;
	pthread_mutex_lock(&bs->mu);
	for (;;) {
		if (!any && (rc = bs->status) != 0)
			break;
		struct msg **pp = &pe->rq_head, *prev = NULL;
		for (; *pp; prev = *pp, pp = &(*pp)->next)
			if ((*pp)->key == key)
				break;
		if (*pp) {
			m = *pp;
			*pp = m->next;
			if (pe->rq_tail == m)
				pe->rq_tail = prev;
			break;
		}
		if (peer != bs->rank && (pe->gone || pe->bye_rcvd)) {
			rc = -WEFT_ERR_PEER;
			break;
		}
		if (cancel_bs == bs && key != cancel_key && cancelled_locked(bs)) {
			rc = -ECANCELED;
			break;
		}
		pthread_cond_wait(&bs->cv, &bs->mu);
	}
	pthread_mutex_unlock(&bs->mu);
	if (rc == -WEFT_ERR_PEER && !bs->status && !any)
		WEFT_ERROR("bootstrap: recv from rank %d (tag %u): that rank has closed its bootstrap", peer, tag);
	if (!m)
		return rc;
	if (mark)
		*mark = m->mark;
	if (m->len != len) {
		WEFT_ERROR("bootstrap: recv from rank %d (tag %u): message of %zu bytes, expected %zu", peer, tag, m->len,
			   len);
		rc = -EMSGSIZE;
	} else if (len) {
		memcpy(buf, m->data, len);
	}
	free(m->data);
	free(m);
	return rc;
}

int weft__bootstrap_send(struct weft__bootstrap *bs, int peer, uint32_t tag, const void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_send(bs, peer, CLS_USER, tag, buf, len);
}

int weft__bootstrap_recv(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_recv(bs, peer, CLS_USER, tag, buf, len);
}

int weft__bootstrap_send_any(struct weft__bootstrap *bs, int peer, uint32_t tag, const void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_send_opt(bs, peer, CLS_USER, tag, buf, len, 1);
}

int weft__bootstrap_recv_any(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_recv_opt(bs, peer, CLS_USER, tag, buf, len, NULL, 1);
}

int weft__bootstrap_recv_mark(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len,
			      uint64_t *mark)
{
	if (!bs)
		return -EINVAL;
	return bs_recv_mark(bs, peer, CLS_USER, tag, buf, len, mark);
}

int weft__bootstrap_purge(struct weft__bootstrap *bs, int peer, uint64_t mark, uint32_t keep_lo, uint32_t keep_hi)
{
	if (!bs || peer < 0 || peer >= bs->nranks)
		return -EINVAL;
	int n = 0;
	pthread_mutex_lock(&bs->mu);
	struct peer *pe = &bs->peers[peer];
	struct msg **pp = &pe->rq_head, *prev = NULL;
	while (*pp) {
		struct msg *m = *pp;
		uint32_t t = (uint32_t)m->key;
		int keep = m->mark >= mark || ((m->key >> 32) == CLS_USER && t >= keep_lo && t < keep_hi);
		if (keep) {
			prev = m;
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		if (pe->rq_tail == m)
			pe->rq_tail = prev;
		free(m->data);
		free(m);
		n++;
	}
	pthread_mutex_unlock(&bs->mu);
	return n;
}

static int gather(struct weft__bootstrap *bs, int cls, const void *mine, void *all, size_t each)
{
	int rc;
	uint8_t *out = all;
	if (each && (!mine || !all))
		return -EINVAL;
	/* All-to-all: the bootstrap is a full mesh already, and every message is
	 * queued, so no ordering between ranks can deadlock. */
	for (int i = 1; i < bs->nranks; i++) {
		int to = (bs->rank + i) % bs->nranks;
		if ((rc = bs_send(bs, to, cls, 0, mine, each)) != 0)
			return rc;
	}
	if (each)
		memmove(out + (size_t)bs->rank * each, mine, each);
	for (int i = 1; i < bs->nranks; i++) {
		int from = (bs->rank - i + bs->nranks) % bs->nranks;
		if ((rc = bs_recv(bs, from, cls, 0, out + (size_t)from * each, each)) != 0)
			return rc;
	}
	return 0;
}

int weft__bootstrap_allgather(struct weft__bootstrap *bs, const void *mine, void *all, size_t each)
{
	if (!bs)
		return -EINVAL;
	return gather(bs, CLS_ALLGATHER, mine, all, each);
}

int weft__bootstrap_barrier(struct weft__bootstrap *bs)
{
	if (!bs)
		return -EINVAL;
	uint8_t one = 1;
	for (int i = 1; i < bs->nranks; i++)
		if (bs_send(bs, (bs->rank + i) % bs->nranks, CLS_BARRIER, 0, &one, 1) != 0)
			return weft__bootstrap_status(bs) ? weft__bootstrap_status(bs) : -WEFT_ERR_PEER;
	for (int i = 1; i < bs->nranks; i++) {
		int rc = bs_recv(bs, (bs->rank - i + bs->nranks) % bs->nranks, CLS_BARRIER, 0, &one, 1);
		if (rc)
			return rc;
	}
	return 0;
}

int weft__bootstrap_params_check(void)
{
	struct bs_params p;
	return weft__bs_params_load(&p);
}
