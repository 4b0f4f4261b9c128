/* SPDX-License-Identifier: Apache-2.0 */
/* The per-rank service thread: accepts and authenticates lower ranks, reads
 * and queues their messages, writes the output queues, sends heartbeats and
 * declares silent or broken peers dead. Also the bootstrap's failure status. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "service.h"
#include "auth.h"
#include "link.h"
#include "net.h"
#include "wire.h"
#include "log.h"
#include "le.h"

void weft__bs_wake(struct weft__bootstrap *bs)
{
	uint64_t one = 1;
	if (write(bs->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN means a wake-up is already pending. */
	}
}

/* Records the first failure; callers hold bs->mu. */
void weft__bs_fail_locked(struct weft__bootstrap *bs, int err)
{
	int zero = 0;
	__atomic_compare_exchange_n(&bs->status, &zero, err, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	__atomic_add_fetch(&bs->fail_word, 1, __ATOMIC_ACQ_REL);
	/* Ranks whose calls disagree fail together: the peers learn it from
	 * this rank's next heartbeat, sent at once. */
	if (err == -WEFT_ERR_MISMATCH)
		bs->cs.push = 1;
	pthread_cond_broadcast(&bs->cv);
}

/* Queues a message received from pe (or sent to oneself) for recv; callers
 * hold bs->mu. */
void weft__bs_rq_push_locked(struct weft__bootstrap *bs, struct peer *pe, struct msg *m)
{
	m->next = NULL;
	m->mark = ++pe->rq_marks;
	if (pe->rq_tail)
		pe->rq_tail->next = m;
	else
		pe->rq_head = m;
	pe->rq_tail = m;
	pthread_cond_broadcast(&bs->cv);
}

void weft__bootstrap_fail(struct weft__bootstrap *bs, int err)
{
	if (!bs)
		return;
	if (err >= 0)
		err = -WEFT_ERR_ABORTED;
	pthread_mutex_lock(&bs->mu);
	weft__bs_fail_locked(bs, err);
	pthread_mutex_unlock(&bs->mu);
	weft__bs_wake(bs);
}

int weft__bootstrap_status(const struct weft__bootstrap *bs)
{
	return bs ? __atomic_load_n(&bs->status, __ATOMIC_ACQUIRE) : -EINVAL;
}

const volatile uint32_t *weft__bootstrap_fail_word(const struct weft__bootstrap *bs)
{
	return &bs->fail_word;
}

/* Whether fd has bytes (or EOF, or an error) waiting to be read right now. */
static int readable_now(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* The peer's link broke (EOF, error, silence, a bad frame). Called by the
 * service thread with bs->mu held. */
static void peer_down(struct weft__bootstrap *bs, int i, int err, const char *why)
{
	struct peer *pe = &bs->peers[i];
	if (pe->gone)
		return;
	/* What its last heartbeat said comes first: a peer that failed on a
	 * mismatch and left at once fails this rank with that mismatch, not
	 * with its closed socket (which may be read before the next tick). */
	if (weft__bootstrap_status(bs) == 0 && !pe->bye_rcvd && !bs->closing)
		weft__bs_cs_check_peer(bs, i);
	if (pe->bye_rcvd || bs->closing) {
		WEFT_DEBUG("bootstrap: rank %d (%s) closed after goodbye", i, pe->link->name);
	} else if (weft__bootstrap_status(bs) != 0) {
		/* The communicator failed already, and that was logged where it
		 * was found; a failed peer leaves without a goodbye on purpose. */
		WEFT_INFO("bootstrap: peer rank %d (%s) left the failed communicator: %s", i, pe->link->name, why);
	} else {
		WEFT_ERROR("bootstrap: peer rank %d (%s) failed: %s", i, pe->link->name, why);
		weft__bs_fail_locked(bs, err);
	}
	pe->gone = 1;
	close(pe->link->fd);
	pe->link->fd = -1;
	weft__bs_oq_free(pe->link);
	pthread_cond_broadcast(&bs->cv);
}

static void deliver(struct weft__bootstrap *bs, int i, struct frame *f)
{
	struct peer *pe = &bs->peers[i];
	if (f->type == T_DATA) {
		struct msg *m = malloc(sizeof(*m));
		if (!m) {
			WEFT_ERROR("bootstrap: no memory to queue a %zu-byte message from rank %d", f->len, i);
			weft__bs_fail_locked(bs, -ENOMEM);
			free(f->buf);
			return;
		}
		*m = (struct msg){.key = (uint64_t)f->cls << 32 | f->tag, .len = f->len, .data = f->buf};
		f->buf = NULL;
		weft__bs_rq_push_locked(bs, pe, m);
	} else if (f->type == T_BYE) {
		WEFT_DEBUG("bootstrap: rank %d said goodbye", i);
		pe->bye_rcvd = 1;
		/* It will read no more: drop what we still had for it, and let it see
		 * our EOF so that its destroy need not wait. */
		weft__bs_oq_free(pe->link);
		if (!pe->wr_shut) {
			shutdown(pe->link->fd, SHUT_WR);
			pe->wr_shut = 1;
		}
		pthread_cond_broadcast(&bs->cv);
	} else if (f->type == T_HEARTBEAT) {
		const char *why = weft__bs_cs_heard(bs, i, f->buf, f->len);
		if (why)
			peer_down(bs, i, -WEFT_ERR_PROTOCOL, why);
	} else {
		char why[64];
		snprintf(why, sizeof(why), "sent an unexpected message of type %d", f->type);
		peer_down(bs, i, -WEFT_ERR_PROTOCOL, why);
	}
	free(f->buf);
	f->buf = NULL;
}

/* A lower rank finished its handshake on our listener and says who it is. */
static void accept_peer(void *ctx, struct link *l, struct frame *f)
{
	struct weft__bootstrap *bs = ctx;
	char why[160] = "";
	int r = -1;
	if (f->type != T_PEER_HELLO || f->len != 16)
		snprintf(why, sizeof(why), "sent message type %d instead of a peer hello", f->type);
	else if (get64(f->buf + 8) != bs->tag)
		snprintf(why, sizeof(why), "belongs to another communicator (tag differs)");
	else if ((int)get32(f->buf + 4) != bs->nranks)
		snprintf(why, sizeof(why), "says the job has %d ranks, not %d", (int)get32(f->buf + 4), bs->nranks);
	else if ((r = (int)get32(f->buf)) < 0 || r >= bs->rank)
		snprintf(why, sizeof(why), "claims rank %d, which should not connect to rank %d", r, bs->rank);
	if (!why[0]) {
		pthread_mutex_lock(&bs->mu);
		if (bs->peers[r].up)
			snprintf(why, sizeof(why), "claims rank %d, which is already connected", r);
		pthread_mutex_unlock(&bs->mu);
	}
	if (why[0]) {
		WEFT_WARN("bootstrap: dropped connection from %s: %s", l->name, why);
		weft__bs_link_free(l);
		return;
	}
	uint8_t ack[16];
	put32(ack, (uint32_t)bs->rank);
	put32(ack + 4, 0);
	put64(ack + 8, bs->tag);
	struct obuf *b = weft__bs_frame_make(l, T_PEER_ACK, 0, 0, ack, sizeof(ack));
	if (!b) {
		WEFT_WARN("bootstrap: no memory to answer rank %d", r);
		weft__bs_link_free(l);
		return;
	}
	l->max_len = bs->p.max_msg;
	l->last_rx = weft__bs_now_s();
	weft__bs_fmt_addr(bs->peers[r].addr_be, bs->peers[r].port, l->name, sizeof(l->name));
	pthread_mutex_lock(&bs->mu);
	weft__bs_oq_push(l, b);
	bs->peers[r].link = l;
	bs->peers[r].up = 1;
	bs->connected++;
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
}

/* The service thread's poll set, rebuilt on every turn: index 0 is the
 * wake-up eventfd, 1 the listener, then the peers and pending connections. */
struct svc_loop {
	struct pollfd *pfd;
	int *who; /* pfd index -> peer rank, or -1 - pending index */
	int cap, k;
	double next_hb;
	double close_deadline;
};

/* Makes room for this turn's poll set. Returns -1 (bootstrap failed) when out of memory. */
static int svc_grow(struct weft__bootstrap *bs, struct svc_loop *s)
{
	int want = 2 + bs->nranks + bs->pend.n;
	if (want > s->cap) {
		struct pollfd *np = realloc(s->pfd, (size_t)want * sizeof(*s->pfd));
		int *nw = np ? realloc(s->who, (size_t)want * sizeof(*s->who)) : NULL;
		if (np)
			s->pfd = np;
		if (!nw) {
			pthread_mutex_lock(&bs->mu);
			WEFT_ERROR("bootstrap: service thread out of memory");
			weft__bs_fail_locked(bs, -ENOMEM);
			pthread_mutex_unlock(&bs->mu);
			return -1;
		}
		s->who = nw;
		s->cap = want;
	}
	return 0;
}

/* Shutdown begins: queue a goodbye to every live peer, and give them
 * WEFT_CORE_PEER_TIMEOUT to answer. Called with bs->mu held. */
static void svc_on_close(struct weft__bootstrap *bs, struct svc_loop *s)
{
	s->close_deadline = weft__bs_now_s() + bs->p.peer_timeout;
	for (int i = 0; i < bs->nranks; i++) {
		struct peer *pe = &bs->peers[i];
		if (!pe->up || pe->gone || pe->bye_rcvd || pe->bye_sent)
			continue;
		struct obuf *b = weft__bs_frame_make(pe->link, T_BYE, 0, 0, NULL, 0);
		if (b)
			weft__bs_oq_push(pe->link, b);
		pe->bye_sent = 1;
	}
}

/* Builds this turn's poll set. Returns 1 when the thread should leave: told
 * to quit, or closing with every peer gone or out of time. */
static int svc_prepare(struct weft__bootstrap *bs, struct svc_loop *s)
{
	int n = bs->nranks;
	int k = 0;
	s->pfd[k] = (struct pollfd){.fd = bs->wake_fd, .events = POLLIN};
	s->who[k++] = INT_MIN;
	pthread_mutex_lock(&bs->mu);
	int quit = bs->quit, closing = bs->closing, open = 0;
	s->pfd[k] = (struct pollfd){.fd = closing ? -1 : weft__bs_pending_listen_fd(&bs->pend, bs->lfd),
				    .events = POLLIN};
	s->who[k++] = INT_MIN;
	/* A failed communicator (aborted, or a peer died) leaves without a
	 * goodbye: its peers must see the failure too, or one of them waiting
	 * for this rank would wait forever. A heartbeat still to go out (a
	 * mismatch found here, svc_on_tick) goes first, or a peer would see
	 * only the closed socket and fail with -WEFT_ERR_PEER instead. */
	int failed = closing && weft__bootstrap_status(bs) != 0;
	if (failed && !bs->cs.push)
		quit = 1;
	if (closing && !failed && !quit && !s->close_deadline)
		svc_on_close(bs, s);
	for (int i = 0; i < n; i++) {
		struct peer *pe = &bs->peers[i];
		if (!pe->up || pe->gone)
			continue;
		open++;
		if (pe->bye_sent && !pe->link->oq_head && !pe->wr_shut) {
			shutdown(pe->link->fd, SHUT_WR);
			pe->wr_shut = 1;
		}
		s->pfd[k] = (struct pollfd){.fd = pe->link->fd,
					    .events = (short)(POLLIN | (pe->link->oq_head ? POLLOUT : 0))};
		s->who[k++] = i;
	}
	pthread_mutex_unlock(&bs->mu);
	if (quit || (closing && !failed && (open == 0 || weft__bs_now_s() > s->close_deadline)))
		return 1;
	for (int i = 0; i < bs->pend.n; i++) {
		s->pfd[k] = (struct pollfd){.fd = bs->pend.l[i]->fd, .events = POLLIN};
		s->who[k++] = -1 - i;
	}
	s->k = k;
	return 0;
}

/* Waits for the next event, the next heartbeat or a handshake's deadline.
 * Returns -1 (bootstrap failed) when poll itself fails. */
static int svc_poll(struct weft__bootstrap *bs, struct svc_loop *s)
{
	double t = weft__bs_now_s();
	double next = weft__bs_pending_deadline(&bs->pend, s->next_hb);
	if (next > t + 0.1)
		next = t + 0.1; /* also the resolution of the silence check */
	if (poll(s->pfd, (nfds_t)s->k, weft__bs_ms_until(next)) < 0 && errno != EINTR) {
		pthread_mutex_lock(&bs->mu);
		WEFT_ERROR("bootstrap: poll: %s", strerror(errno));
		weft__bs_fail_locked(bs, -errno);
		pthread_mutex_unlock(&bs->mu);
		return -1;
	}
	return 0;
}

/* Another thread queued a message or changed the state: consume the wake-up. */
static void svc_on_wake(struct weft__bootstrap *bs)
{
	uint64_t v;
	if (read(bs->wake_fd, &v, sizeof(v)) < 0) {
		/* Nothing pending: spurious. */
	}
}

/* Reads every frame the peer's socket holds now and delivers it; a broken or
 * misbehaving link takes the peer down. */
static void svc_read_peer(struct weft__bootstrap *bs, int i, double next_hb)
{
	struct peer *pe = &bs->peers[i];
	struct link *l = pe->link;
	for (;;) {
		struct frame f = {0};
		int rc = weft__bs_link_pump(l, &f);
		if (rc == 0)
			break;
		pthread_mutex_lock(&bs->mu);
		if (rc == 1) {
			deliver(bs, i, &f);
		} else {
			char why[320];
			snprintf(why, sizeof(why), "%s%s", l->why,
				 l->eof ? " without saying goodbye (the process died or exited without "
					  "destroying its communicator)"
					: "");
			peer_down(bs, i, l->eof || !strncmp(l->why, "recv", 4) ? -WEFT_ERR_PEER : -WEFT_ERR_PROTOCOL,
				  why);
		}
		int stop = pe->gone;
		pthread_mutex_unlock(&bs->mu);
		/* A heartbeat that falls due between frames goes out
		 * first: a peer streaming big frames must not keep
		 * this thread from the others' liveness. The rest
		 * is read on the next turn (poll is level-triggered). */
		if (stop || (rc == 1 && weft__bs_now_s() >= next_hb))
			break;
	}
}

/* A peer's socket is readable (or broken) or can take more of its queue. */
static void svc_on_peer(struct weft__bootstrap *bs, int i, short revents, double next_hb)
{
	struct peer *pe = &bs->peers[i];
	struct link *l = pe->link;
	if (revents & (POLLIN | POLLHUP | POLLERR))
		svc_read_peer(bs, i, next_hb);
	pthread_mutex_lock(&bs->mu);
	if (!pe->gone && l->oq_head) {
		int rc = weft__bs_oq_flush(l);
		if (rc != 0) {
			char why[120];
			snprintf(why, sizeof(why), "send: %s", strerror(-rc));
			peer_down(bs, i, -WEFT_ERR_PEER, why);
		}
	}
	pthread_mutex_unlock(&bs->mu);
}

/* Liveness, on every turn: heartbeats out when due, silence in. */
static void svc_on_tick(struct weft__bootstrap *bs, struct svc_loop *s)
{
	double t = weft__bs_now_s();
	int beat = t >= s->next_hb;
	if (beat)
		s->next_hb = t + bs->p.hb_interval;
	pthread_mutex_lock(&bs->mu);
	weft__bs_cs_check(bs, t);
	/* A mismatch found here, or a destroy begun, goes out now, behind
	 * whatever the queues hold. */
	int push = bs->cs.push;
	bs->cs.push = 0;
	pthread_mutex_unlock(&bs->mu);
	for (int i = 0; i < bs->nranks; i++) {
		struct peer *pe = &bs->peers[i];
		pthread_mutex_lock(&bs->mu);
		int live = pe->up && !pe->gone && !pe->bye_rcvd && !pe->bye_sent;
		int idle = live && !pe->link->oq_head;
		/* Silence is judged on the socket, not on this thread: bytes
		 * that wait unread (this thread was busy with other peers' big
		 * frames, or starved of CPU) mean the peer is alive; they are
		 * read, EOF included, on the next turn. */
		if (live && t - pe->link->last_rx > bs->p.peer_timeout && !readable_now(pe->link->fd)) {
			char why[120];
			snprintf(why, sizeof(why), "silent for %.1f s (WEFT_CORE_PEER_TIMEOUT is %g s)",
				 t - pe->link->last_rx, bs->p.peer_timeout);
			peer_down(bs, i, -WEFT_ERR_PEER, why);
			idle = 0;
		}
		/* A queue that is not empty carries bytes, which count as a
		 * heartbeat. A heartbeat costs one HMAC block: made under the lock. */
		if ((beat && idle) || (push && live)) {
			uint8_t st[CS_LEN];
			weft__bs_cs_encode(bs, i, st);
			struct obuf *b = weft__bs_frame_make(pe->link, T_HEARTBEAT, 0, 0, st, sizeof(st));
			if (b) {
				weft__bs_oq_push(pe->link, b);
				if (weft__bs_oq_flush(pe->link) != 0)
					peer_down(bs, i, -WEFT_ERR_PEER, "send failed");
			}
		}
		pthread_mutex_unlock(&bs->mu);
	}
}

/* The service thread: one poll loop over the wake-up eventfd, the listener,
 * the peers and the pending connections, dispatching each kind of event. */
void *weft__bs_service_main(void *arg)
{
	struct weft__bootstrap *bs = arg;
	struct svc_loop s = {.next_hb = weft__bs_now_s() + bs->p.hb_interval};

	weft__log_set_rank(bs->rank);
	for (;;) {
		if (svc_grow(bs, &s) != 0 || svc_prepare(bs, &s) != 0 || svc_poll(bs, &s) != 0)
			break;
		if (s.pfd[0].revents)
			svc_on_wake(bs);
		/* New connections join the pending set until they identify themselves. */
		if (s.pfd[1].revents)
			weft__bs_pending_accept(&bs->pend, bs->lfd);
		/* Peers: read everything available, write what the sockets take. */
		for (int j = 2; j < s.k; j++)
			if (s.who[j] >= 0 && s.pfd[j].revents)
				svc_on_peer(bs, s.who[j], s.pfd[j].revents, s.next_hb);
		/* Handshakes of lower ranks, and strangers: each advances, becomes a
		 * peer, or is dropped (at its deadline, at the latest). */
		weft__bs_pending_advance(&bs->pend, accept_peer, bs);
		svc_on_tick(bs, &s);
	}
	free(s.pfd);
	free(s.who);
	return NULL;
}
