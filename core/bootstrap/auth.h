/* SPDX-License-Identifier: Apache-2.0 */
/* Authentication: the challenge-response handshake keyed by the job secret,
 * from either side, and the per-direction keys that MAC every frame after it. */
#ifndef WEFT_CORE_BOOTSTRAP_AUTH_H
#define WEFT_CORE_BOOTSTRAP_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "link.h"

/* Accepted connections not yet identified, per listener; a flood beyond is shed. */
#define MAX_PENDING 256

int weft__bs_fill_random(void *buf, size_t len);
int weft__bs_hs_initiate(struct link *l, const uint8_t secret[32], uint64_t id_nonce, double deadline);
void weft__bs_pending_start(struct link *l, double hs_timeout);
int weft__bs_pending_step(struct link *l, const uint8_t secret[32], uint64_t id_nonce, struct frame *f);
void weft__bs_pending_timeout_why(struct link *l, double hs_timeout);

/* A listener's pending set, shared by the root and each rank's service.
 * root names the root in warnings; NULL for a rank's service. */
void weft__bs_pending_accept(int lfd, struct link **pending, int *npending, double hs_timeout, const char *root);
/* The earliest of next and the pending handshakes' deadlines. */
double weft__bs_pending_deadline(struct link *const *pending, int npending, double next);
/* Called with a pending connection's first frame: the link is the callee's
 * now; f->buf is freed after it returns. */
typedef void weft__bs_first_fn(void *ctx, struct link *l, struct frame *f);
/* Advances every pending handshake; drops (and frees) those that fail or pass
 * their deadline, hands those done to first and removes them from the set. */
void weft__bs_pending_advance(struct link **pending, int *npending, const uint8_t secret[32], uint64_t id_nonce,
			      double hs_timeout, const char *root, weft__bs_first_fn *first, void *ctx);

#endif
