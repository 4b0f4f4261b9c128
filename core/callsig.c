/* SPDX-License-Identifier: Apache-2.0 */
/* Call signatures: the core numbers every collective call per communicator,
 * and every send/recv message per direction of its pair of ranks, and packs
 * the call's shape into 64 bits (kit.h's layout). Ranks that make different
 * calls then have different signatures, which packs compare in band and the
 * heartbeats compare out of band (bootstrap/callcheck.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "base.h"
#include "bootstrap.h"
#include "callsig.h"
#include "config.h"
#include "log.h"

int weft__callsig_init(weft_comm_t *comm)
{
	int on = 1;
	if (weft__param_get("core", "check_calls", WEFT_PARAM_BOOL, &on, NULL) != 0)
		on = 1;
	comm->check_calls = on;
	size_t n = (size_t)comm->nranks;
	comm->pair_msgs = calloc(2 * n, sizeof(*comm->pair_msgs));
	comm->pair_last = calloc(2 * n, sizeof(*comm->pair_last));
	return comm->pair_msgs && comm->pair_last ? 0 : -ENOMEM;
}

void weft__callsig_free(weft_comm_t *comm)
{
	free(comm->pair_msgs);
	free(comm->pair_last);
	free(comm->p2p_sig);
	comm->pair_msgs = comm->pair_last = comm->p2p_sig = NULL;
}

/* Send/recv: each message is numbered per direction of its pair, so the k-th
 * send of one rank to another and the other's k-th receive from it have the
 * same signature when they agree on the size, however the two ranks group
 * their calls. */
static int p2p_begin(weft_comm_t *comm, struct weft_coll_args *a)
{
	const struct weft_p2p_op *ops = a->sendbuf;
	size_t n = a->count;
	if (n > comm->p2p_cap) {
		uint64_t *s = realloc(comm->p2p_sig, n * sizeof(*s));
		if (!s)
			return -ENOMEM;
		comm->p2p_sig = s;
		comm->p2p_cap = n;
	}
	/* pair_last: per peer, the signature of the batch's last send to it
	 * and last receive from it (0: none; a signature never is). */
	for (size_t i = 0; i < n; i++) {
		int p = ops[i].peer, way = ops[i].is_send ? 0 : 1;
		uint64_t idx = ++comm->pair_msgs[2 * p + way];
		comm->p2p_sig[i] = weft_kit_sig_make(idx, WEFT_COLL_SENDRECV, 0, 0, -1,
						     weft_kit_sig_mix(0x70327073u, ops[i].bytes));
		comm->pair_last[2 * p + way] = comm->p2p_sig[i];
	}
	/* The heartbeats carry, per peer of the batch, its message counts and
	 * those last signatures; each peer is told once, then cleared. */
	for (size_t i = 0; i < n; i++) {
		int p = ops[i].peer;
		uint64_t *last = &comm->pair_last[2 * p];
		if (!last[0] && !last[1])
			continue;
		if (p != comm->rank)
			weft__bootstrap_p2p_begin(comm->bs, p, comm->pair_msgs[2 * p], last[0], comm->pair_msgs[2 * p + 1],
						  last[1]);
		last[0] = last[1] = 0;
	}
	a->p2p_sig = comm->p2p_sig;
	a->sig = weft_kit_sig_make(0, WEFT_COLL_SENDRECV, 0, 0, -1, 0);
	return 0;
}

int weft__callsig_begin(weft_comm_t *comm, struct weft_coll_args *a)
{
	if (!comm->check_calls) {
		a->sig = 0;
		a->p2p_sig = NULL;
		return 0;
	}
	if (a->coll == WEFT_COLL_SENDRECV)
		return p2p_begin(comm, a);
	int rooted = a->coll == WEFT_COLL_BROADCAST || a->coll == WEFT_COLL_REDUCE;
	int op = weft_kit_coll_reduces(a->coll) ? (int)a->op : 0;
	uint64_t seq = ++comm->calls;
	uint64_t h = weft_kit_sig_mix((uint64_t)a->coll, a->count);
	/* Windows (window.c): ranks whose buffers lie in different windows,
	 * or at different offsets, must not run the call (a pack reads a
	 * peer's buffer at its own offset). Calls outside windows keep their
	 * signature. */
	if (a->send_win || a->recv_win) {
		h = weft_kit_sig_mix(h, a->send_win ? a->send_win->id : 0);
		h = weft_kit_sig_mix(h, a->send_off);
		h = weft_kit_sig_mix(h, a->recv_win ? a->recv_win->id : 0);
		h = weft_kit_sig_mix(h, a->recv_off);
	}
	a->sig = weft_kit_sig_make(seq, a->coll, a->dtype, op, rooted ? a->root : -1, h);
	struct weft__bs_call c = {.seq = seq, .sig = a->sig, .count = a->count};
	weft__bootstrap_call_begin(comm->bs, &c);
	return 0;
}

void weft__callsig_end(weft_comm_t *comm, const struct weft_coll_args *a)
{
	if (!comm->check_calls)
		return;
	if (a->coll == WEFT_COLL_SENDRECV)
		weft__bootstrap_p2p_end(comm->bs);
	else
		weft__bootstrap_call_end(comm->bs);
}
