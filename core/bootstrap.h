/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap: TCP rendezvous of a communicator's ranks, authenticated and
 * length-checked control messages between them, and peer liveness. One
 * instance per communicator; a service thread owns its sockets. */
#ifndef WEFT_CORE_BOOTSTRAP_H
#define WEFT_CORE_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

struct weft__bootstrap;

/* Wire protocol version, carried in the id, the handshake and every hello. */
#define WEFT__BOOTSTRAP_VERSION 2

/* Layout of struct weft_unique_id's 128 bytes (private to the core). */
struct weft__unique_id_layout {
	uint32_t magic;        /* "WFT1" */
	uint16_t version;      /* bootstrap protocol version */
	uint16_t family;       /* AF_INET */
	uint8_t addr[16];      /* root address, network order */
	uint16_t port;         /* network order */
	uint8_t has_secret;
	uint8_t pad[5];
	uint8_t secret[32];    /* random */
	uint64_t nonce;        /* distinguishes ids made by one root */
	uint8_t reserved[56];
};

/* Makes an id and starts a root serving it in this process (a thread); the root
 * lives until every rank of the job has fetched the peer table, or until
 * weft__bootstrap_root_stop. Picks the address from WEFT_CORE_BOOTSTRAP_ADDR,
 * else WEFT_CORE_BOOTSTRAP_IFNAME, else the first non-loopback up interface,
 * else loopback. */
int weft__bootstrap_make_id(struct weft_unique_id *id);

/* Stops the root serving id in this process, if any (it otherwise ends by itself
 * once every rank has its table, or a rank that had arrived gives up).
 * Thread safety: any thread. Blocking: no. */
void weft__bootstrap_root_stop(const struct weft_unique_id *id);

/* Joins the job. id NULL: root from WEFT_CORE_BOOTSTRAP_ROOT, secret from
 * WEFT_CORE_BOOTSTRAP_SECRET (unauthenticated with a warning when unset); rank 0
 * then serves the root itself. Returns -ETIMEDOUT when the rendezvous does not
 * complete within WEFT_CORE_BOOTSTRAP_TIMEOUT. On success the liveness watch
 * runs: a peer's EOF or missed heartbeats (WEFT_CORE_PEER_TIMEOUT) marks the
 * bootstrap failed with -WEFT_ERR_PEER. */
int weft__bootstrap_create(const struct weft_unique_id *id, int nranks, int rank, struct weft__bootstrap **bs);
void weft__bootstrap_destroy(struct weft__bootstrap *bs);

int weft__bootstrap_rank(const struct weft__bootstrap *bs);
int weft__bootstrap_size(const struct weft__bootstrap *bs);
/* 64-bit tag, the same on every rank of this communicator and unlikely on any other. */
uint64_t weft__bootstrap_tag(const struct weft__bootstrap *bs);
/* Numeric IP address this rank's bootstrap is bound to, and a peer's. */
const char *weft__bootstrap_local_addr(const struct weft__bootstrap *bs);
const char *weft__bootstrap_peer_addr(const struct weft__bootstrap *bs, int peer);
/* Port of this rank's listener, which stays open (and refuses strangers) for
 * the bootstrap's life. For tests and diagnostics. */
int weft__bootstrap_listen_port(const struct weft__bootstrap *bs);
/* Host identity (boot id + network-namespace inode): equal strings, one host. */
const char *weft__bootstrap_host_id(const struct weft__bootstrap *bs, int rank);
/* Process identity: equal for ranks in one process. */
uint64_t weft__bootstrap_proc_id(const struct weft__bootstrap *bs, int rank);

/* Messages: (peer, tag) ordered, any length up to WEFT_CORE_BOOTSTRAP_MAX_MSG.
 * recv blocks until the message arrives, the peer dies (-WEFT_ERR_PEER) or the
 * bootstrap is aborted (-WEFT_ERR_ABORTED); -EMSGSIZE when len differs. */
int weft__bootstrap_send(struct weft__bootstrap *bs, int peer, uint32_t tag, const void *buf, size_t len);
int weft__bootstrap_recv(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len);
int weft__bootstrap_allgather(struct weft__bootstrap *bs, const void *mine, void *all, size_t each);
/* send and recv whatever the bootstrap's status: the links of the peers still
 * alive outlive a failure, and the survivors meet over them (weft_comm_shrink).
 * A peer that is gone or said goodbye still fails them (-WEFT_ERR_PEER); an
 * abort does not end such a recv. */
int weft__bootstrap_send_any(struct weft__bootstrap *bs, int peer, uint32_t tag, const void *buf, size_t len);
int weft__bootstrap_recv_any(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len);
/* recv that also gives the message's arrival number from peer, for purge. */
int weft__bootstrap_recv_mark(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len,
			      uint64_t *mark);
/* Drops every message from peer that arrived before the one numbered mark,
 * except those tagged [keep_lo, keep_hi); returns how many it dropped. For the
 * setup agreement (core/packs.c): what a failed setup left unread. */
int weft__bootstrap_purge(struct weft__bootstrap *bs, int peer, uint64_t mark, uint32_t keep_lo, uint32_t keep_hi);
/* A cancel scope, per thread: until weft__bootstrap_cancel_end, this thread's
 * recvs on bs (any class) return -ECANCELED once a message tagged cancel_tag
 * has arrived from any rank; that message stays queued. One scope per
 * thread; used around a pack's setup so that one rank's failure releases the
 * others from waits on it. */
void weft__bootstrap_cancel_begin(struct weft__bootstrap *bs, uint32_t cancel_tag);
void weft__bootstrap_cancel_end(void);
int weft__bootstrap_barrier(struct weft__bootstrap *bs);

/* 0 while healthy, else the error that broke it. Cheap: an atomic load. */
int weft__bootstrap_status(const struct weft__bootstrap *bs);
/* Marks it failed with err (first error wins) and wakes every waiter. Any thread. */
void weft__bootstrap_fail(struct weft__bootstrap *bs, int err);

/* Waiters elsewhere in the core (semaphore waits, flush) register an eventfd-like
 * wake-up so that a peer failure or abort interrupts their sleep. Returns a
 * pointer to a counter that changes on every failure; compare and sleep. */
const volatile uint32_t *weft__bootstrap_fail_word(const struct weft__bootstrap *bs);

/* Call state, carried by the heartbeats (callstate.c): the thread in a call
 * says which call it is in; a peer in the same call with another signature,
 * one that passed this call as another, or one that left during it fails the
 * bootstrap (-WEFT_ERR_MISMATCH, -WEFT_ERR_PEER) on every rank. Cheap: a
 * few stores, no lock. One thread per comm (the one in the call). */
struct weft__bs_call {
	uint64_t seq, sig; /* the call's number (from 1) and signature (kit.h) */
	uint64_t count;    /* for the log: the signature holds only a hash of it */
};
void weft__bootstrap_call_begin(struct weft__bootstrap *bs, const struct weft__bs_call *c);
void weft__bootstrap_call_end(struct weft__bootstrap *bs);
/* A send/recv batch: once per peer in it, the messages posted to it and
 * from it so far (this batch's included) and the last one's signatures. */
void weft__bootstrap_p2p_begin(struct weft__bootstrap *bs, int peer, uint64_t sent, uint64_t ssig, uint64_t recvd,
			       uint64_t rsig);
void weft__bootstrap_p2p_end(struct weft__bootstrap *bs);
/* Where this rank is (its call, for how long) and where each peer is, as
 * their heartbeats said: text for weft-info --where, lines of two spaces'
 * indent. Any thread. */
void weft__bootstrap_where(struct weft__bootstrap *bs, char *buf, size_t len);
/* weft_comm_destroy begins: peers waiting for this rank in a call it never
 * made are told now, and fail that call. */
void weft__bootstrap_leaving(struct weft__bootstrap *bs);

/* Rank and size from the launcher's environment, first match wins:
 * OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH, Intel MPI),
 * SLURM_PROCID/SLURM_NTASKS (srun), RANK/WORLD_SIZE (torchrun). Returns 0,
 * -ENOENT when none is set, -EINVAL (logged) when a set pair is malformed.
 * Writes the outputs only on success. */
int weft__bootstrap_env_rank(int *rank, int *nranks);

/* Checks the bootstrap's parameters as weft__bootstrap_create would (timeouts
 * and heartbeat within their bounds), logging what is wrong: 0 or
 * -WEFT_ERR_CONFIG, for weft-info. */
int weft__bootstrap_params_check(void);

#endif
