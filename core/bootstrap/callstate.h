/* SPDX-License-Identifier: Apache-2.0 */
/* Call state on the heartbeats (callcheck.c): what call each rank is in, so
 * that ranks whose calls disagree, or a peer that leaves during a call, fail
 * the call instead of hanging it (docs/reliability.md, "Calls that disagree").
 * Types and functions only: service.h holds the state. */
#ifndef WEFT_CORE_BOOTSTRAP_CALLSTATE_H
#define WEFT_CORE_BOOTSTRAP_CALLSTATE_H

#include <stddef.h>
#include <stdint.h>

/* How many of its last collectives' signatures a heartbeat carries: a peer
 * up to this many calls ahead is compared exactly, whatever calls it made
 * (a broadcast's or reduce's senders run ahead of the receivers). */
#define CS_HIST 8

/* This rank's state, written by the thread in the call (one per comm) and
 * read by the service thread: a sequence lock (gen odd while writing), every
 * field an atomic, so a write costs a few plain stores and no lock. */
struct bs_p2p_state {
	uint64_t sent, ssig;   /* messages posted to the peer so far, the last one's signature */
	uint64_t recvd, rsig;  /* receives posted from the peer so far, the last one's signature */
	uint32_t in;           /* in a batch with this peer now */
};

struct bs_callstate {
	uint32_t gen;
	uint32_t in_call; /* inside collective seq now */
	uint32_t in_p2p;  /* inside a send/recv batch now */
	uint64_t batches; /* send/recv batches completed */
	uint32_t leaving; /* weft_comm_destroy has begun */
	uint64_t seq;            /* the last collective */
	uint64_t hist[CS_HIST];  /* the signatures of the last CS_HIST, call k at k % CS_HIST */
	uint64_t count;          /* its count, for the log (the signature holds a hash) */
	struct bs_p2p_state *p2p; /* per peer */
	int *active;              /* the peers of the batch in progress (caller's thread only) */
	int nactive;
	int push; /* tell every peer now (a mismatch, a destroy); service thread and mu */
	/* Service thread only: the state it last saw (number, in a call) and
	 * since when, and when it next warns of a stall. */
	uint64_t obs_seq, obs_batches;
	uint32_t obs_in;
	double obs_since, next_warn;
};

/* What a peer's last heartbeat said; service thread only. */
struct bs_peer_state {
	int have;
	uint32_t flags;
	int32_t fail;
	uint64_t seq, count;
	uint64_t hist[CS_HIST];
	uint64_t psent, pssig, precvd, prsig; /* its messages to this rank, its receives from it */
	double in_state_s; /* how long it had been in that state when it said so */
};

/* Heartbeat payload bytes (bootstrap protocol 2). */
#define CS_LEN (64 + 8 * CS_HIST)

struct weft__bootstrap;

int weft__bs_cs_init(struct weft__bootstrap *bs);
void weft__bs_cs_free(struct weft__bootstrap *bs);
/* Encodes this rank's state for peer into out (CS_LEN bytes). */
void weft__bs_cs_encode(struct weft__bootstrap *bs, int peer, uint8_t *out);
/* A peer's heartbeat payload; returns a reason when malformed, else NULL.
 * Service thread, bs->mu held. */
const char *weft__bs_cs_heard(struct weft__bootstrap *bs, int peer, const uint8_t *p, size_t len);
/* Compares this rank's state with every peer's, failing the bootstrap on a
 * mismatch or a peer that left during this rank's call. Service thread,
 * bs->mu held. */
void weft__bs_cs_check(struct weft__bootstrap *bs, double now);
/* The same for one peer alone, before its link goes down (callers hold mu). */
void weft__bs_cs_check_peer(struct weft__bootstrap *bs, int peer);

#endif
