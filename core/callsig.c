/* SPDX-License-Identifier: Apache-2.0 */
/* Call signatures: the core numbers every collective call per communicator,
 * and every send/recv batch per pair of ranks that exchange in it, and packs
 * the call's shape into 64 bits (kit.h's layout). Ranks that make different
 * calls then have different signatures, which packs compare in band and the
 * heartbeats compare out of band (bootstrap/callstate.c). */
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
	comm->pair_mark = calloc(n, sizeof(*comm->pair_mark));
	return comm->pair_msgs && comm->pair_mark ? 0 : -ENOMEM;
}

void weft__callsig_free(weft_comm_t *comm)
{
	free(comm->pair_msgs);
	free(comm->pair_mark);
	free(comm->p2p_sig);
	comm->pair_msgs = comm->p2p_sig = NULL;
	comm->pair_mark = NULL;
}

static int reducing(enum weft_collective c)
{
	return c == WEFT_COLL_ALLREDUCE || c == WEFT_COLL_REDUCE_SCATTER || c == WEFT_COLL_REDUCE;
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
	for (size_t i = 0; i < n; i++) {
		int p = ops[i].peer;
		uint64_t idx = ++comm->pair_msgs[2 * p + (ops[i].is_send ? 0 : 1)];
		comm->p2p_sig[i] = weft_kit_sig_make(idx, WEFT_COLL_SENDRECV, 0, 0, -1,
						     weft_kit_sig_mix(0x70327073u, ops[i].bytes));
	}
	/* The heartbeats carry, per peer of the batch, the last send and the
	 * last receive of it (after this batch's numbering). */
	for (size_t i = 0; i < n; i++) {
		int p = ops[i].peer;
		if (p == comm->rank || comm->pair_mark[p])
			continue;
		comm->pair_mark[p] = 1;
		uint64_t ssig = 0, rsig = 0;
		for (size_t j = i; j < n; j++)
			if (ops[j].peer == p)
				*(ops[j].is_send ? &ssig : &rsig) = comm->p2p_sig[j];
		weft__bootstrap_p2p_begin(comm->bs, p, comm->pair_msgs[2 * p], ssig, comm->pair_msgs[2 * p + 1], rsig);
	}
	for (size_t i = 0; i < n; i++)
		comm->pair_mark[ops[i].peer] = 0;
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
	int op = reducing(a->coll) ? (int)a->op : 0;
	uint64_t seq = ++comm->calls;
	a->sig = weft_kit_sig_make(seq, a->coll, a->dtype, op, rooted ? a->root : -1,
				   weft_kit_sig_mix((uint64_t)a->coll, a->count));
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
