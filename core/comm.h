/* SPDX-License-Identifier: Apache-2.0 */
/* The communicator as the core's modules see it: struct weft_comm and the
 * objects made from it (memory, connections, semaphores, port channels), the
 * per-transport contexts, and helpers comm.c, mem.c, conn.c, sem.c and port.c share.
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
 * Lock order: comm->port_lock, then comm->lock, then a weft__tp lock. No code
 * takes comm->lock or port_lock while holding a transport lock. */
#ifndef WEFT_CORE_COMM_H
#define WEFT_CORE_COMM_H

#include <pthread.h>
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

struct weft_comm {
	struct weft__bootstrap *bs;
	int rank, nranks;
	int ntp;
	struct weft__tp *tp; /* open transports, in alphabetical order of name */

	pthread_mutex_t lock; /* the lists and id tables below */
	struct weft__link mems, rmems, conns, sems, rsems, pools;
	struct weft__link closed; /* closed connections whose endpoints wait for the peer's fin */
	uint32_t *pair_seq;       /* per peer: connections made so far (see conn.c) */
	struct weft__idtab mem_ids, rmem_ids, rsem_ids;

	pthread_mutex_t port_lock; /* the port list; held by the proxy while it drains */
	struct weft__link ports;
	struct weft__proxy *proxy; /* started with the first port channel */

	struct weft__coll_comm *coll; /* the collective layer's state (coll.c), set by its first call (atomic) */
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

/* Internal registration and import: `internal` objects are not listed for the
 * user and get no id (semaphore pools and the pools peers expose). */
int weft__mem_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, int internal,
		       weft_mem_t **mem);
int weft__mem_import(weft_comm_t *comm, int peer, const void *buf, size_t len, int internal, weft_rmem_t **rmem);
/* Serializes into a malloc'd buffer. */
int weft__mem_blob(const weft_mem_t *mem, void **blob, size_t *len);
/* Bounds check shared by weft_put and the proxy: 0 or -EINVAL (logged). */
int weft__put_check(const weft_conn_t *conn, const weft_rmem_t *dst, uint64_t dst_off, const weft_mem_t *src,
		    uint64_t src_off, size_t len);
/* One attempt to post a put / signal / flush on conn: the transport's code,
 * -EAGAIN included. retry: the same operation again after -EAGAIN, which test
 * fault injection (fault.h) does not count as another operation. */
int weft__conn_put_once(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			uint64_t src_off, size_t len, int retry);
int weft__conn_signal_once(weft_conn_t *conn, weft_rsem_t *rsem, uint64_t value);
int weft__conn_flush_once(weft_conn_t *conn, int retry);
/* Checks that rsem may be signalled on conn and that value exceeds every value
 * claimed before, and claims it. 0 or -EINVAL (logged). */
int weft__rsem_claim(const weft_conn_t *conn, weft_rsem_t *rsem, uint64_t value);

/* Around waits in the bootstrap: the comm's proxy thread progresses the
 * transports meanwhile (see port.c). hold returns 0 or an error; release
 * undoes one successful hold. */
int weft__progress_hold(weft_comm_t *comm);
void weft__progress_release(weft_comm_t *comm);

/* Teardown used by weft_comm_destroy, each releasing every object of its kind. */
void weft__port_destroy_all(weft_comm_t *comm);
/* Flushes (while the comm is healthy) and closes every open connection,
 * telling each peer; then waits for every peer's word that its side is
 * flushed too; then destroys every endpoint. See conn.c. */
void weft__conn_retire_all(weft_comm_t *comm);
void weft__conn_await_fins(weft_comm_t *comm);
void weft__conn_close_all(weft_comm_t *comm);
/* Stops the proxy thread (after every port is gone and no hold is left). */
void weft__proxy_stop(weft_comm_t *comm);
void weft__sem_destroy_all(weft_comm_t *comm);
void weft__mem_destroy_all(weft_comm_t *comm);
/* Destroys the memory channels the user left and frees what weft_mem_alloc
 * allocated on comm (devchan.c); before the transports close. */
void weft__devchan_destroy_all(weft_comm_t *comm);
/* Releases one memory handle / import without touching the user lists. */
void weft__mem_free(weft_mem_t *mem);
void weft__rmem_free(weft_rmem_t *rmem);

/* ------------------------------------------------------ device channels
 * (devchan.c) Memory of a transport's mem_alloc, both views: host_ptr is NULL
 * for device memory. Tracked like weft_mem_alloc's, freed by weft__devmem_free
 * (or at comm destroy). -ENOTSUP when no transport of comm allocates `type`. */
int weft__devmem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr);
void weft__devmem_free(weft_comm_t *comm, void *host_ptr, void *dev_ptr);
/* Host-mapped abort flags that device waits poll. add records one (its host
 * view; raised at once when comm has already failed); del forgets it. */
int weft__devchan_flag_add(weft_comm_t *comm, uint32_t *host_flag);
void weft__devchan_flag_del(uint32_t *host_flag);
/* Raises every abort flag of comm, so waiting kernels return WEFT_DEV_ABORTED.
 * Called on weft_comm_abort, on a peer failure a transport reports, and by the
 * proxy thread when it sees the bootstrap failed. Takes only a leaf lock: safe
 * from any thread, under any core lock. */
void weft__devchan_abort(weft_comm_t *comm);

#endif
