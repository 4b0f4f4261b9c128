/* SPDX-License-Identifier: Apache-2.0 */
/* The base floor of the core: struct weft_comm and the objects made from it
 * (memory, connections, semaphores, port channels), the per-transport
 * contexts, and the services every module uses (status, progress of the
 * transports, waiting, id tables, abort flags). Every module above includes
 * it; it includes only the bootstrap below it.
 *
 * Who drives transport progress: the calling thread, inside weft_* calls that
 * wait (weft_put/weft_signal on a full queue, weft_flush, weft_sem_wait), and
 * the communicator's proxy thread while at least one port channel exists or a
 * thread of the comm waits in the bootstrap (exchanges, connect, barrier,
 * allgather, recv: weft__progress_hold). The bootstrap's liveness thread never
 * calls a transport. Every call into one
 * transport context goes through that context's mutex (struct weft__tp.lock),
 * because the user thread and the proxy thread both drive it.
 *
 * Lock order: comm->port_lock, then a staged connection's send lock, then the
 * staging list's lock, then comm->lock, then a weft__tp lock. No code
 * takes comm->lock or port_lock while holding a transport lock. */
#ifndef WEFT_CORE_BASE_H
#define WEFT_CORE_BASE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "bootstrap.h"

/* ---------------------------------------------------------- intrusive lists */
struct weft__link {
	struct weft__link *prev, *next;
};

static inline void weft__list_init(struct weft__link *head)
{
	head->prev = head->next = head;
}

static inline int weft__list_empty(const struct weft__link *head)
{
	return head->next == head;
}

static inline void weft__list_push(struct weft__link *head, struct weft__link *l)
{
	l->prev = head->prev;
	l->next = head;
	head->prev->next = l;
	head->prev = l;
}

static inline void weft__list_del(struct weft__link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

#define weft__container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------ transports */
#define WEFT__TP_NAME_MAX 32 /* fixed name field in blobs and connect messages */

/* One transport opened for one communicator. */
struct weft__tp {
	char name[WEFT__TP_NAME_MAX];
	const struct weft_transport_ops *ops;
	void *tc;
	pthread_mutex_t lock; /* serializes every call into tc and its handles */
	/* Whether weft__coll_mem_type asks this transport's mem_query: 1, 0, or -1
	 * until its first call decides (atomic). See there. */
	int mem_query_use;
};

#define WEFT__TP_CALL(tp, op, ...) WEFT_CALL_OP((tp)->ops, struct weft_transport_ops, op, __VA_ARGS__)
#define WEFT__TP_HAS(tp, op) WEFT_HAS_OP((tp)->ops, struct weft_transport_ops, op)

/* Bootstrap tags the core uses for its own exchanges. User tags of
 * weft_comm_send/recv must stay below WEFT__TAG_RESERVED. */
#define WEFT__TAG_RESERVED 0xFFFF0000u
#define WEFT__TAG_MEM (WEFT__TAG_RESERVED + 1)
#define WEFT__TAG_CONN (WEFT__TAG_RESERVED + 2)
#define WEFT__TAG_SEM (WEFT__TAG_RESERVED + 3)
#define WEFT__TAG_SETUP_FAIL (WEFT__TAG_RESERVED + 4)   /* a setup failed here: waits on this rank end */
#define WEFT__TAG_SETUP_STATUS (WEFT__TAG_RESERVED + 5) /* each rank's outcome of one setup */
#define WEFT__TAG_SPLIT (WEFT__TAG_RESERVED + 6)        /* weft_comm_split: the new comm's id */
#define WEFT__TAG_SHRINK (WEFT__TAG_RESERVED + 7)       /* weft_comm_shrink: lists and the new comm's id */
#define WEFT__TAG_FIN_BASE (WEFT__TAG_RESERVED + 0x1000) /* + a connection's number in its pair */
#define WEFT__TAG_FIN_RANGE 0xE000u

/* ---------------------------------------------------------------- id tables
 * Port-channel triggers name memory and semaphores by small integers, so that
 * a GPU producer needs no pointers. Guarded by comm->lock. */
#define WEFT__ID_MAX (1u << 14)

struct weft__idtab {
	void **slot;
	uint32_t cap;
};

int weft__idtab_add(struct weft__idtab *t, void *obj, uint32_t *id);
void weft__idtab_del(struct weft__idtab *t, uint32_t id);
void *weft__idtab_get(const struct weft__idtab *t, uint32_t id);
void weft__idtab_free(struct weft__idtab *t);

/* -------------------------------------------------------------- the comm */
struct weft__proxy;
struct weft__sem_pool;

struct weft__coll_comm;
struct weft_window;

struct weft_comm {
	struct weft__bootstrap *bs;
	int rank, nranks;
	int ntp;
	struct weft__tp *tp; /* open transports, in alphabetical order of name */
	/* Transports loaded but not opened for this comm, and why (weft-info
	 * --select's preflight lists them). */
	int ntp_failed;
	struct {
		char name[WEFT__TP_NAME_MAX];
		int rc;
	} tp_failed[8];

	pthread_mutex_t lock; /* the lists and id tables below */
	struct weft__link mems, rmems, conns, sems, rsems, pools;
	struct weft__link closed; /* closed connections whose endpoints wait for the peer's fin */
	uint32_t *pair_seq;       /* per peer: connections made so far (see conn.c) */
	struct weft__idtab mem_ids, rmem_ids, rsem_ids;

	pthread_mutex_t port_lock; /* the port list; held by the proxy while it drains */
	struct weft__link ports;
	struct weft__proxy *proxy; /* the progress thread (progress.c), started at the first hold */
	/* What the progress thread drains each round (progress.h's weft__drain_fn),
	 * set by the port channels' module (atomic). */
	int (*drain)(weft_comm_t *comm, int *pending);
	/* The same for the receive side of staged connections (stage.c), which
	 * sets it with their list at its first one (atomic). */
	int (*stage_drain)(weft_comm_t *comm, int *pending);
	struct weft__stage_comm *stage;

	struct weft__coll_comm *coll; /* the collective layer's state (coll.c), set by its first call (atomic) */

	/* Call signatures (callsig.c): [core] check_calls, the collective calls
	 * made, per peer the messages sent to it and received from it (two
	 * counters each), and scratch. */
	int check_calls;
	uint64_t calls;
	uint64_t *pair_msgs;
	uint64_t *pair_last; /* two per peer, scratch of a batch */
	uint64_t *p2p_sig;
	size_t p2p_cap;

	/* The thread inside a public call on this communicator, and how deep
	 * (handles.c); only that thread touches busy_depth. */
	_Atomic uintptr_t busy_owner;
	int busy_depth;
	uint32_t shrinks; /* weft_comm_shrink calls begun here (split.c): stale messages of older ones are skipped */
	/* Windows (window.c): the live ones, newest first, and the ids given. */
	struct weft_window *windows;
	uint64_t window_seq;
};

struct weft_mem {
	struct weft__link link;
	weft_comm_t *comm;
	void *ptr;
	size_t len;
	enum weft_mem_type type;
	void **mh; /* one per comm->tp; NULL where that transport skipped it */
	uint32_t id;
	int internal; /* a semaphore pool: in no user list, no id */
};

struct weft_rmem {
	struct weft__link link;
	weft_comm_t *comm;
	int peer;
	uint64_t base, len;
	enum weft_mem_type type;
	void **rmh; /* one per comm->tp; NULL where the blob had no section for it */
	uint32_t id;
	int internal;
};

struct weft_conn {
	struct weft__link link;
	weft_comm_t *comm;
	int peer;
	struct weft__tp *tp;
	int tpi; /* index of tp in comm->tp */
	void *ep;
	int nports; /* guarded by comm->port_lock */
	uint32_t pair_seq; /* this connection's number among those of its pair */
	int fin_sent;      /* closed, and the peer was told */
	int orphan;        /* the peer never completed it (a cancelled setup): no fin is awaited */
	struct weft__stage *stage; /* device data through bounce buffers (stage.c); NULL: direct */
};

struct weft_sem {
	struct weft__link link;
	weft_comm_t *comm;
	struct weft__sem_pool *pool;
	unsigned slot;
	enum weft_mem_type type; /* where the token lives (device tokens: kernels wait) */
	uint64_t *token;         /* written by transports; host tokens read with acquire loads */
};

struct weft_rsem {
	struct weft__link link;
	weft_comm_t *comm;
	int peer;
	weft_rmem_t *rmem; /* the peer's pool, imported for this rsem alone */
	uint64_t off;
	uint64_t last; /* highest value claimed so far (atomic) */
	uint32_t id;
};

/* ------------------------------------------------------------ helpers */
/* Polite waiting: a short spin with sched_yield, then sleeps that double up to
 * max_us, so that more ranks than cores still make progress. */
struct weft__backoff {
	uint64_t spin_until_ns; /* CLOCK_MONOTONIC: yield, not sleep, until then (set at the first wait) */
	unsigned sleep_us;
	unsigned max_us;
};
void weft__backoff_init(struct weft__backoff *b, unsigned max_us);
void weft__backoff_wait(struct weft__backoff *b);
/* weft__backoff_wait for a rank waiting on comm: past the yield window it
 * sleeps in poll() on the transports' wait_fds, where they have any. */
void weft__comm_backoff_wait(weft_comm_t *comm, struct weft__backoff *b);

/* Status of the comm (0 healthy, else the error that broke it). */
int weft__comm_status(const weft_comm_t *comm);

/* Progresses every open transport once. Returns 0 or the first error. */
int weft__comm_progress(weft_comm_t *comm);
/* Fails the comm when rc says a peer died (-WEFT_ERR_PEER); other codes pass. */
void weft__comm_note_error(weft_comm_t *comm, int rc);
/* Progresses one transport. */
int weft__tp_progress(struct weft__tp *tp);

/* Index of the transport named `name` in comm->tp, or -1. */
int weft__comm_tp_index(const weft_comm_t *comm, const char *name);

/* Host-mapped abort flags that device waits poll (memory and port channels).
 * add records one (its host view; raised at once when comm has already
 * failed); del forgets it; raise sets every flag of comm, so waiting kernels
 * return WEFT_DEV_ABORTED (on weft_comm_abort, on a peer failure a transport
 * reports, and by the progress thread when it sees the bootstrap failed);
 * drop forgets every flag of comm (at destroy). A leaf lock: safe from any
 * thread, under any core lock. */
int weft__abort_flag_add(weft_comm_t *comm, uint32_t *host_flag);
void weft__abort_flag_del(uint32_t *host_flag);
void weft__abort_flags_raise(weft_comm_t *comm);
void weft__abort_flags_drop(weft_comm_t *comm);

#endif
