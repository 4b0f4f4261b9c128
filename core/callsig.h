/* SPDX-License-Identifier: Apache-2.0 */
/* Call signatures (docs/reliability.md, "Calls that disagree"): the 64 bits
 * every rank's call must match, handed to the algorithm in weft_coll_args.sig
 * and published on the heartbeats. */
#ifndef WEFT_CORE_CALLSIG_H
#define WEFT_CORE_CALLSIG_H

#include <weft/plugin.h>
#include <weft/weft.h>

/* Reads [core] check_calls and makes the per-peer counters. 0 or -ENOMEM. */
int weft__callsig_init(weft_comm_t *comm);
void weft__callsig_free(weft_comm_t *comm);
/* Numbers the call, fills a->sig (and a->p2p_sig for a send/recv batch, one
 * per message, pointing into the comm's scratch, valid until the next call:
 * the k-th send of a rank to another has the signature of the other's k-th
 * receive from it when their sizes agree) and tells the
 * bootstrap which call this rank is in. 0 or -ENOMEM. */
int weft__callsig_begin(weft_comm_t *comm, struct weft_coll_args *a);
/* The call returned (or, on a stream, was enqueued). */
void weft__callsig_end(weft_comm_t *comm, const struct weft_coll_args *a);

#endif
