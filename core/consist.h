/* SPDX-License-Identifier: Apache-2.0 */
/* Consistency at communicator creation: ranks compare what must agree
 * (configuration that steers choices, plugin set and versions) and each
 * rank's local set-up result, so that a difference fails every rank at once
 * with the difference named, instead of a hang or wrong data later. */
#ifndef WEFT_CORE_CONSIST_H
#define WEFT_CORE_CONSIST_H

#include <stddef.h>

#include <weft/weft.h>

/* Collective over comm's bootstrap: every rank calls it once, after its
 * transports opened. local_status is this rank's set-up result so far (0, or
 * the error it hit) and local_err one line saying what (may be NULL). Returns
 * 0 when every rank succeeded and all agree; else on every rank the same kind
 * of error: -WEFT_ERR_MISMATCH (logged: which item differs, on which ranks),
 * or the failing rank's own error (logged: which rank, what). */
int weft__consist_check(weft_comm_t *comm, int local_status, const char *local_err);

/* The canonical text that is compared: one item per line, "key = value".
 * malloc'd (NULL: no memory). Exported for tests only. */
char *weft__consist_text(void);

#endif
