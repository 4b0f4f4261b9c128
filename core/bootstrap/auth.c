/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication: nonces, the handshake's MACs and keys, the connecting side
 * (blocking) and the accepting side (a step function for a poll loop, and
 * the pending set it runs over). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "auth.h"
#include "net.h"
#include "wire.h"
#include "log.h"
#include "le.h"

/* Stages of the accepting side (struct link's stage). */
enum { HS_H1, HS_H3, HS_FIRST, HS_DONE };

int weft__bs_fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int err = errno;
			WEFT_ERROR("getrandom: %s", strerror(err));
			return -err;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Challenge-response both ways with HMAC-SHA256 keyed by the job secret:
 *   initiator -> H1 {magic, version, id nonce, Ni}
 *   acceptor  -> H2 {magic, version, Na, HMAC(s, "acceptor"|id|Ni|Na)}
 *   initiator -> H3 {HMAC(s, "initiator"|id|Ni|Na)}
 * Each direction then MACs frames with its own key derived from both nonces,
 * so no frame of one connection or direction is valid in another. */

static void hs_mac(const uint8_t secret[32], const char *label, uint64_t id_nonce, const uint8_t ni[32],
		   const uint8_t na[32], uint8_t out[32])
{
	struct weft__hmac h;
	uint8_t n8[8];
	put64(n8, id_nonce);
	weft__hmac_init(&h, secret, 32);
	weft__hmac_update(&h, label, strlen(label) + 1);
	weft__hmac_update(&h, n8, sizeof(n8));
	weft__hmac_update(&h, ni, 32);
	weft__hmac_update(&h, na, 32);
	weft__hmac_final(&h, out);
}

static void hs_keys(struct link *l, const uint8_t secret[32], uint64_t id_nonce, const uint8_t ni[32],
		    const uint8_t na[32], int initiator)
{
	uint8_t i2a[32], a2i[32];
	hs_mac(secret, "weft-key-i2a", id_nonce, ni, na, i2a);
	hs_mac(secret, "weft-key-a2i", id_nonce, ni, na, a2i);
	memcpy(l->key_tx, initiator ? i2a : a2i, 32);
	memcpy(l->key_rx, initiator ? a2i : i2a, 32);
	l->seq_tx = l->seq_rx = 0;
	l->in = IN_HDR;
	l->have = 0;
}

/* The connecting side; blocks until the deadline. Logs nothing: the caller
 * knows what the other end was meant to be. */
int weft__bs_hs_initiate(struct link *l, const uint8_t secret[32], uint64_t id_nonce, double deadline)
{
	uint8_t m[H2_LEN];
	int rc = weft__bs_fill_random(l->nonce_l, 32);
	if (rc)
		return rc;
	put32(m, HS_MAGIC);
	put32(m + 4, WEFT__BOOTSTRAP_VERSION);
	put64(m + 8, id_nonce);
	memcpy(m + 16, l->nonce_l, 32);
	if ((rc = weft__bs_write_all(l->fd, m, H1_LEN, deadline)) != 0) {
		snprintf(l->why, sizeof(l->why), "send: %s", strerror(-rc));
		return rc;
	}
	l->in = IN_RAW;
	l->raw_need = H2_LEN;
	l->have = 0;
	rc = weft__bs_link_wait(l, NULL, deadline);
	if (rc != 1 && l->have >= 4 && get32(l->raw) == HS_BUSY) {
		snprintf(l->why, sizeof(l->why), "is busy and shed this connection");
		return -EAGAIN;
	}
	if (rc != 1) {
		if (l->eof)
			snprintf(l->why, sizeof(l->why),
				 "closed the connection during the handshake (another job, another weft version, or "
				 "a wrong secret: see that side's log)");
		return rc == -ETIMEDOUT ? -ETIMEDOUT : l->eof ? -ECONNREFUSED : -ECONNRESET;
	}
	if (get32(l->raw) != HS_MAGIC) {
		snprintf(l->why, sizeof(l->why), "is not a weft bootstrap endpoint");
		return -WEFT_ERR_PROTOCOL;
	}
	if (get32(l->raw + 4) != WEFT__BOOTSTRAP_VERSION) {
		snprintf(l->why, sizeof(l->why), "speaks bootstrap protocol %u, this process %u",
			 get32(l->raw + 4), WEFT__BOOTSTRAP_VERSION);
		return -WEFT_ERR_MISMATCH;
	}
	memcpy(l->nonce_r, l->raw + 8, 32);
	uint8_t mac[32];
	hs_mac(secret, "weft-acceptor", id_nonce, l->nonce_l, l->nonce_r, mac);
	if (!weft__ct_equal(mac, l->raw + 40, 32)) {
		snprintf(l->why, sizeof(l->why), "does not hold this job's secret (failed authentication)");
		return -WEFT_ERR_AUTH;
	}
	hs_mac(secret, "weft-initiator", id_nonce, l->nonce_l, l->nonce_r, mac);
	if ((rc = weft__bs_write_all(l->fd, mac, H3_LEN, deadline)) != 0) {
		snprintf(l->why, sizeof(l->why), "send: %s", strerror(-rc));
		return rc;
	}
	hs_keys(l, secret, id_nonce, l->nonce_l, l->nonce_r, 1);
	return 0;
}

void weft__bs_pending_start(struct link *l, double hs_timeout)
{
	l->stage = HS_H1;
	l->in = IN_RAW;
	l->raw_need = H1_LEN;
	l->have = 0;
	l->deadline = weft__bs_now_s() + hs_timeout;
}

/* Advances an accepted connection that has not yet identified itself.
 * Returns 1 when its first frame arrived (in *f), 0 to keep waiting, -1 to
 * drop it (l->why says why). Never blocks. */
int weft__bs_pending_step(struct link *l, const uint8_t secret[32], uint64_t id_nonce, struct frame *f)
{
	for (;;) {
		int rc = weft__bs_link_pump(l, f);
		if (rc <= 0) {
			if (rc < 0 && l->eof && l->stage == HS_H1)
				snprintf(l->why, sizeof(l->why), "closed the connection before the handshake");
			return rc;
		}
		if (l->stage == HS_FIRST) {
			l->stage = HS_DONE;
			return 1;
		}
		if (l->stage == HS_H1) {
			if (get32(l->raw) != HS_MAGIC) {
				snprintf(l->why, sizeof(l->why), "sent garbage (not a weft bootstrap handshake)");
				return -1;
			}
			if (get32(l->raw + 4) != WEFT__BOOTSTRAP_VERSION) {
				snprintf(l->why, sizeof(l->why), "speaks bootstrap protocol %u, this process %u",
					 get32(l->raw + 4), WEFT__BOOTSTRAP_VERSION);
				return -1;
			}
			if (get64(l->raw + 8) != id_nonce) {
				snprintf(l->why, sizeof(l->why), "belongs to another job (its unique id differs)");
				return -1;
			}
			memcpy(l->nonce_r, l->raw + 16, 32);
			if (weft__bs_fill_random(l->nonce_l, 32) != 0) {
				snprintf(l->why, sizeof(l->why), "getrandom failed");
				return -1;
			}
			uint8_t m[H2_LEN];
			put32(m, HS_MAGIC);
			put32(m + 4, WEFT__BOOTSTRAP_VERSION);
			memcpy(m + 8, l->nonce_l, 32);
			hs_mac(secret, "weft-acceptor", id_nonce, l->nonce_r, l->nonce_l, m + 40);
			/* 72 bytes into a fresh socket's empty buffer: never partial. */
			if (send(l->fd, m, H2_LEN, MSG_DONTWAIT | MSG_NOSIGNAL) != H2_LEN) {
				snprintf(l->why, sizeof(l->why), "could not be answered (%s)", strerror(errno));
				return -1;
			}
			l->stage = HS_H3;
			l->raw_need = H3_LEN;
			continue;
		}
		/* HS_H3 */
		uint8_t mac[32];
		hs_mac(secret, "weft-initiator", id_nonce, l->nonce_r, l->nonce_l, mac);
		if (!weft__ct_equal(mac, l->raw, 32)) {
			snprintf(l->why, sizeof(l->why), "failed authentication (wrong secret)");
			return -1;
		}
		hs_keys(l, secret, id_nonce, l->nonce_r, l->nonce_l, 0);
		l->stage = HS_FIRST;
	}
}

void weft__bs_pending_timeout_why(struct link *l, double hs_timeout)
{
	const char *what = l->stage == HS_H1 && l->have == 0 ? "sent nothing"
			   : l->stage == HS_FIRST                ? "sent no hello after the handshake"
								 : "did not complete the handshake";
	snprintf(l->why, sizeof(l->why), "%s within %.1f s", what, hs_timeout);
}

/* Evictions a second when the set is full, and the burst: a flood then costs
 * the listener's thread a few percent of a core at most, and a real rank
 * behind a full backlog of 4096 strangers waits about 8 s. */
#define EVICT_RATE 500.0
#define EVICT_BURST 50.0
/* How long the listener rests when the process is out of file descriptors. */
#define FD_REST_S 0.1
#define LOG_BURST 8.0

void weft__bs_pending_init(struct bs_pending *p, const uint8_t secret[32], uint64_t id_nonce, double hs_timeout,
			   const char *root)
{
	memset(p, 0, sizeof(*p));
	p->secret = secret;
	p->id_nonce = id_nonce;
	p->hs_timeout = hs_timeout;
	p->root = root;
	p->cap = MAX_PENDING;
	struct rlimit rl;
	/* Strangers must not take the descriptors the job itself needs. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 8 < MAX_PENDING)
		p->cap = rl.rlim_cur / 8 < 8 ? 8 : (int)(rl.rlim_cur / 8);
	double t = weft__bs_now_s();
	p->evict = (struct bs_bucket){EVICT_BURST, t};
	p->log = (struct bs_bucket){LOG_BURST, t};
}

void weft__bs_pending_clear(struct bs_pending *p)
{
	for (int i = 0; i < p->n; i++)
		weft__bs_link_free(p->l[i]);
	p->n = 0;
}

int weft__bs_pending_listen_fd(const struct bs_pending *p, int lfd)
{
	return p->rest_until && weft__bs_now_s() < p->rest_until ? -1 : lfd;
}

/* Adds what rate per second has earned since the last refill, up to burst;
 * returns the tokens now. */
static double refill(struct bs_bucket *b, double now, double rate, double burst)
{
	b->tokens += (now - b->t) * rate;
	if (b->tokens > burst)
		b->tokens = burst;
	b->t = now;
	return b->tokens;
}

/* Lines about connections that have not proven the secret: one a second,
 * after a burst of LOG_BURST. */
static void stranger_log(struct bs_pending *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void stranger_log(struct bs_pending *p, const char *fmt, ...)
{
	double t = weft__bs_now_s();
	if (refill(&p->log, t, 1.0, LOG_BURST) < 1.0) {
		p->log_held++;
		return;
	}
	p->log.tokens -= 1.0;
	char text[320], held[80] = "";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (p->log_held)
		snprintf(held, sizeof(held), " (and %u more such lines not shown)", p->log_held);
	WEFT_WARN("bootstrap%s%s: %s%s", p->root ? " root " : "", p->root ? p->root : "", text, held);
	p->log_held = 0;
}

static void remove_at(struct bs_pending *p, int i)
{
	p->l[i] = p->l[--p->n];
}

/* The connection to shed: the oldest that has sent nothing, else the oldest
 * whose first message stopped short. One with unread bytes may be a rank
 * whose handshake is about to start: it stays. */
static int victim(struct bs_pending *p)
{
	int silent = -1, partial = -1;
	for (int i = 0; i < p->n; i++) {
		struct link *l = p->l[i];
		if (l->stage != HS_H1)
			continue;
		if (l->have != 0) {
			if (partial < 0 || l->deadline < p->l[partial]->deadline)
				partial = i;
			continue;
		}
		if (silent >= 0 && l->deadline >= p->l[silent]->deadline)
			continue;
		char c;
		if (recv(l->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) <= 0)
			silent = i;
	}
	return silent >= 0 ? silent : partial;
}

static void shed(struct bs_pending *p, struct link *l, const char *what)
{
	uint32_t busy = 0;
	put32((uint8_t *)&busy, HS_BUSY);
	/* Four bytes into an idle socket: never partial. The initiator retries. */
	if (send(l->fd, &busy, 4, MSG_DONTWAIT | MSG_NOSIGNAL) != 4) {
		/* It is gone already, or its buffer is full: it sees the close. */
	}
	stranger_log(p, "shed connection from %s: %s", l->name, what);
	weft__bs_link_free(l);
}

/* Frees a slot in a full set within the eviction budget. Returns 0, or -1
 * (the listener then rests until the budget allows one more). */
static int make_room(struct bs_pending *p)
{
	double t = weft__bs_now_s();
	double budget = refill(&p->evict, t, EVICT_RATE, EVICT_BURST);
	int v = budget >= 1.0 ? victim(p) : -1;
	if (v < 0) {
		/* No budget, or every connection is a handshake under way, which
		 * ends by its deadline at the latest. */
		p->rest_until = t + (budget >= 1.0 ? FD_REST_S : (EVICT_BURST - budget) / EVICT_RATE);
		return -1;
	}
	p->evict.tokens -= 1.0;
	struct link *l = p->l[v];
	remove_at(p, v);
	char what[96];
	snprintf(what, sizeof(what), "%d connections pending and it had not begun a handshake", p->cap);
	shed(p, l, what);
	return 0;
}

void weft__bs_pending_accept(struct bs_pending *p, int lfd)
{
	p->rest_until = 0;
	for (;;) {
		if (p->n >= p->cap && make_room(p) != 0)
			return;
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				/* The connection waits in the backlog; polling the listener
				 * now would only spin. */
				stranger_log(p, "not accepting connections for %.1f s: %s", FD_REST_S, strerror(errno));
				p->rest_until = weft__bs_now_s() + FD_REST_S;
			}
			return;
		}
		char name[64];
		weft__bs_name_of_fd(fd, name, sizeof(name));
		struct link *l = weft__bs_link_new(fd, name, SMALL_FRAME);
		if (!l) {
			close(fd);
			continue;
		}
		weft__bs_tune_socket(fd);
		weft__bs_pending_start(l, p->hs_timeout);
		p->l[p->n++] = l;
	}
}

double weft__bs_pending_deadline(const struct bs_pending *p, double next)
{
	for (int i = 0; i < p->n; i++)
		if (p->l[i]->deadline < next)
			next = p->l[i]->deadline;
	if (p->rest_until > weft__bs_now_s() && p->rest_until < next)
		next = p->rest_until;
	return next;
}

void weft__bs_pending_advance(struct bs_pending *p, weft__bs_first_fn *first, void *ctx)
{
	double t = weft__bs_now_s();
	for (int i = 0; i < p->n;) {
		struct link *l = p->l[i];
		struct frame f = {0};
		int rc = weft__bs_pending_step(l, p->secret, p->id_nonce, &f);
		if (rc == 0 && t > l->deadline) {
			weft__bs_pending_timeout_why(l, p->hs_timeout);
			rc = -1;
		}
		if (rc == 0) {
			i++;
			continue;
		}
		remove_at(p, i);
		if (rc < 0) {
			stranger_log(p, "dropped connection from %s: %s", l->name, l->why);
			weft__bs_link_free(l);
		} else {
			first(ctx, l, &f);
		}
		free(f.buf);
	}
}
