/* SPDX-License-Identifier: Apache-2.0 */
/* Staging as the connection module uses it: device data carried over a
 * transport that cannot register it, through pinned host bounce buffers that
 * a GPU transport's stage ops fill and drain (stage.c). */
#ifndef WEFT_CORE_STAGE_H
#define WEFT_CORE_STAGE_H

#include "base.h"

struct weft__stage;

/* Before a connection for memory type mem != host is negotiated: when a
 * transport of comm offers stage ops, makes this side's bounce buffers, so
 * that nothing of staging can fail once the endpoints are connected. *st is
 * NULL when staging is not offered (no such transport, or no memory). */
void weft__stage_prepare(weft_comm_t *comm, enum weft_mem_type mem, struct weft__stage **st);
/* Drops what prepare made, for a connection that does not stage. NULL is fine. */
void weft__stage_discard(weft_comm_t *comm, struct weft__stage *st);
/* After both sides connected conn: staging is used when both offered it
 * (peer_offers) and conn's transport does not declare memory type mem. Then
 * both sides swap their bounce buffers' blobs and conn->stage is set; else st
 * is discarded. Returns 0 or the error (logged); st is consumed either way. */
int weft__stage_attach(weft_conn_t *conn, struct weft__stage *st, int peer_offers, enum weft_mem_type mem);
/* Frees a staged connection's state (the peer's fin arrived, or the comm is
 * going): at conn_free, before the endpoint goes. */
void weft__stage_destroy(weft_conn_t *conn);
/* After every connection is freed: the comm's list of staged connections. */
void weft__stage_comm_free(weft_comm_t *comm);

/* 1 when a put of these regions on conn goes through the bounce buffers
 * (conn stages and conn's transport lacks one of the two registrations). */
int weft__stage_wants(const weft_conn_t *conn, const weft_rmem_t *dst, const weft_mem_t *src);
/* The staged put: the pipeline of copy to host, put, and the far side's copy,
 * until every chunk is posted. Blocking; progresses meanwhile. */
int weft__stage_put(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
		    size_t len);
/* The staged put a step at a time, for a port proxy: 0 once every chunk is
 * posted, -EAGAIN before (call again with the same arguments), or an error.
 * owner (the port) identifies the put across calls; others' puts and signals
 * on conn wait until it completes. */
int weft__stage_put_once(weft_conn_t *conn, const void *owner, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			 uint64_t src_off, size_t len);
/* One attempt to post a signal on a staged connection: the far side applies it
 * after its device copies of every earlier chunk completed. 0, -EAGAIN, or an
 * error; after -EAGAIN, the same owner resumes it. The value was claimed
 * already (weft__rsem_claim). */
int weft__stage_signal_once(weft_conn_t *conn, const void *owner, weft_rsem_t *rsem, uint64_t value);
/* One test of a staged connection's flush: 0 once the far side completed
 * every descriptor posted (its device copies included) and the transport's
 * flush is complete; -EAGAIN while not. */
int weft__stage_flush_once(weft_conn_t *conn, int retry);

/* Under WEFT_TEST_HOOKS: with WEFT_TEST_STAGE_TRACE naming a file of this
 * layout, every process that maps it appends events in one total order (a
 * shared counter), so a test asserts order across ranks, not time. The core
 * logs the posting of each staged chunk; a stage stand-in logs its copies. */
#define WEFT__STAGE_TRACE_MAGIC 0x45434152544757ull /* "WGTRACE" */
enum weft__stage_ev {
	WEFT__EV_COPY_START = 1, /* arg: enum weft_stage_dir */
	WEFT__EV_COPY_END = 2,
	WEFT__EV_PUT_START = 3, /* the core starts posting a chunk */
	WEFT__EV_PUT_END = 4,   /* the transport accepted its data, descriptor and token */
	WEFT__EV_HOLD_TIMEOUT = 5
};
struct weft__stage_event {
	uint32_t valid; /* set last (release) */
	uint32_t rank;
	uint32_t what;
	uint32_t arg;
	uint64_t chunk; /* per sender (puts, copies to host) or receiver (copies to device) */
};
struct weft__stage_trace {
	uint64_t magic;
	uint64_t next; /* atomic: the next free event */
	uint64_t cap;
	uint64_t expect; /* set by the test: chunks it will put (lets a stand-in release the last one) */
	uint64_t pad[4];
	struct weft__stage_event ev[];
};
/* Appends one event (no-op for a NULL or full trace). */
static inline void weft__stage_trace_add(struct weft__stage_trace *t, int rank, uint32_t what, uint32_t arg,
					 uint64_t chunk)
{
	if (!t)
		return;
	uint64_t i = __atomic_fetch_add(&t->next, 1, __ATOMIC_ACQ_REL);
	if (i >= t->cap)
		return;
	struct weft__stage_event *e = &t->ev[i];
	e->rank = (uint32_t)rank;
	e->what = what;
	e->arg = arg;
	e->chunk = chunk;
	__atomic_store_n(&e->valid, 1, __ATOMIC_RELEASE);
}

#endif
