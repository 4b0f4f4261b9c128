/* SPDX-License-Identifier: Apache-2.0 */
/* The per-rank state of a bootstrap and its service thread, which owns the
 * peer links: it accepts lower ranks, queues messages, and watches liveness. */
#ifndef WEFT_CORE_BOOTSTRAP_SERVICE_H
#define WEFT_CORE_BOOTSTRAP_SERVICE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "link.h"
#include "params.h"
#include "hostid.h"
#include "callstate.h"

struct msg {
	struct msg *next;
	uint64_t key; /* class << 32 | tag */
	uint64_t mark; /* arrival number from its peer, from 1 (weft__bootstrap_purge) */
	size_t len;
	uint8_t *data;
};

struct peer {
	struct link *link;  /* NULL until connected, and for this rank itself */
	int up;             /* link installed */
	int gone;           /* closed; nothing more will come */
	int bye_rcvd, bye_sent, wr_shut;
	struct msg *rq_head, *rq_tail;
	uint64_t rq_marks; /* messages queued from this peer so far */
	char addr[INET_ADDRSTRLEN];
	uint16_t port;
	uint32_t addr_be;
	char host[WEFT_HOST_ID_LEN];
	uint64_t proc;
	struct bs_peer_state cs; /* what its last heartbeat said */
};

struct weft__bootstrap {
	int rank, nranks;
	uint64_t tag;
	struct bs_params p;
	uint8_t secret[32];
	uint64_t id_nonce;
	char local_addr[INET_ADDRSTRLEN];
	int lfd;
	uint16_t lport;
	int wake_fd;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu; /* peers' queues and flags, status */
	pthread_cond_t cv;
	int status;
	uint32_t fail_word;
	int closing; /* destroy: say bye and drain */
	int quit;    /* failed create: stop at once */
	int connected;
	int has_root;
	int joined; /* the rendezvous completed */
	uint64_t root_serial;
	struct peer *peers;
	struct bs_pending pend; /* accepted connections not yet identified */
	struct bs_callstate cs; /* this rank's calls, for the heartbeats */
};

void weft__bs_wake(struct weft__bootstrap *bs);
void weft__bs_fail_locked(struct weft__bootstrap *bs, int err);
void weft__bs_rq_push_locked(struct weft__bootstrap *bs, struct peer *pe, struct msg *m);
void *weft__bs_service_main(void *arg);

#endif
