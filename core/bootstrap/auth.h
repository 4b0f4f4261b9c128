/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication: the challenge-response handshake keyed by the job secret,
 * from either side, and the per-direction keys that MAC every frame after it. */
#ifndef WEFT_CORE_BOOTSTRAP_AUTH_H
#define WEFT_CORE_BOOTSTRAP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "link.h"

/* Accepted connections not yet identified, per listener, at most; fewer
 * where RLIMIT_NOFILE is low (an eighth of it, at least 8). */
#define MAX_PENDING 256

int weft__bs_fill_random(void *buf, size_t len);
/* The connecting side; blocks until the deadline. -EAGAIN: the other side
 * shed this connection (it is busy); -ECONNRESET or -EPIPE: reset. Each is
 * worth another try. -ECONNREFUSED: it closed the connection (refused us). */
int weft__bs_hs_initiate(struct link *l, const uint8_t secret[32], uint64_t id_nonce, double deadline);
void weft__bs_pending_start(struct link *l, double hs_timeout);
int weft__bs_pending_step(struct link *l, const uint8_t secret[32], uint64_t id_nonce, struct frame *f);
void weft__bs_pending_timeout_why(struct link *l, double hs_timeout);

/* A listener's pending set, shared by the root and each rank's service. When
 * it is full, a new connection evicts the oldest that has sent nothing, at a
 * bounded rate; past that rate, or out of file descriptors, the listener rests
 * and connections wait in the kernel's backlog. Lines about strangers are
 * logged once a second (after a burst of a few), with a count of those held
 * back. */
/* A token bucket: tokens now, and when they were last refilled. */
struct bs_bucket {
	double tokens, t;
};

struct bs_pending {
	struct link *l[MAX_PENDING];
	int n, cap;
	const uint8_t *secret; /* the owner's, outlives the set */
	uint64_t id_nonce;
	double hs_timeout;
	const char *root; /* names the root in warnings; NULL for a rank's service */
	struct bs_bucket evict;  /* evictions allowed now */
	double rest_until;       /* the listener is not polled before then */
	struct bs_bucket log;     /* strangers' lines that may print now */
	unsigned log_held;        /* lines held back since the last printed */
};

void weft__bs_pending_init(struct bs_pending *p, const uint8_t secret[32], uint64_t id_nonce, double hs_timeout,
			   const char *root);
void weft__bs_pending_clear(struct bs_pending *p);
/* The listener to poll now: lfd, or -1 while it rests. */
int weft__bs_pending_listen_fd(const struct bs_pending *p, int lfd);
void weft__bs_pending_accept(struct bs_pending *p, int lfd);
/* The earliest of next, the pending handshakes' deadlines and the listener's rest. */
double weft__bs_pending_deadline(const struct bs_pending *p, double next);
/* Called with a pending connection's first frame: the link is the callee's
 * now; f->buf is freed after it returns. */
typedef void weft__bs_first_fn(void *ctx, struct link *l, struct frame *f);
/* Advances every pending handshake; drops (and frees) those that fail or pass
 * their deadline, hands those done to first and removes them from the set. */
void weft__bs_pending_advance(struct bs_pending *p, weft__bs_first_fn *first, void *ctx);

#endif
