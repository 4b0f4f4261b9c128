/* SPDX-License-Identifier: Apache-2.0 */
/* What the collective layer (coll.c) gives packs beyond the primitive API:
 * the topology of weft_algo_comm.peers, and the agreement on each setup's
 * outcome that makes a failure fall back on every rank together. */
#ifndef WEFT_CORE_PACKS_H
#define WEFT_CORE_PACKS_H

#include <stdint.h>

#include <weft/plugin.h>

#include "base.h"

/* weft_algo_comm's topology for one comm: nranks peers, their routes. */
struct weft__pack_topo {
	struct weft_algo_peer *peers;
	struct weft_algo_route *routes;
	struct weft_algo_route *dev_routes;
	int nhosts;
};

/* Builds it from the bootstrap's host identities, the core's peer classes and
 * the transport order weft_connect would offer for host memory. 0 or -ENOMEM. */
int weft__pack_topo_make(weft_comm_t *comm, struct weft__pack_topo *t);
void weft__pack_topo_free(struct weft__pack_topo *t);

/* Brackets one setup (a pack's comm_setup and an algorithm's setup) on this
 * thread: inside, a wait on the bootstrap ends with -ECANCELED once another
 * rank reported its setup failed. */
void weft__pack_setup_begin(weft_comm_t *comm);
void weft__pack_setup_end(void);

/* The outcome of one setup, agreed by every rank of comm: this rank's rc in,
 * 0 out when every rank's setup succeeded; else the first failing rank's
 * code, with *who that rank (-ECANCELED ranks only followed another's
 * failure). made: this rank's pack comm_setup ran in this setup and
 * succeeded; *all_made: it did on every rank. A failure also drops what the
 * failed setups left unread on the bootstrap and resyncs connection counts,
 * so that the next setup starts clean. seq numbers this comm's setups (the
 * same on every rank). The function's own result is 0, or the bootstrap's
 * error when a peer died or the comm was aborted meanwhile. */
int weft__pack_agree(weft_comm_t *comm, uint32_t seq, int rc, int made, int *agreed, int *who, int *all_made);

#endif
