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

#endif
