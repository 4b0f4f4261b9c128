/* SPDX-License-Identifier: Apache-2.0 */
/* Connections as the other modules use them: one attempt at a put, signal or
 * flush (the port proxy retries), and the two-sided teardown. */
#ifndef WEFT_CORE_CONN_H
#define WEFT_CORE_CONN_H

#include "base.h"

/* One attempt to post a put / signal / flush on conn: the transport's code,
 * -EAGAIN included. retry: the same operation again after -EAGAIN, which test
 * fault injection (fault.h) does not count as another operation. On a staged
 * connection a put or signal may answer -EAGAIN midway: owner (a port, or the
 * blocked caller) names it, and only the same owner resumes it. */
int weft__conn_put_once(weft_conn_t *conn, const void *owner, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			uint64_t src_off, size_t len, int retry);
int weft__conn_signal_once(weft_conn_t *conn, const void *owner, weft_rsem_t *rsem, uint64_t value);
int weft__conn_flush_once(weft_conn_t *conn, int retry);
/* Flushes (while the comm is healthy) and closes every open connection,
 * telling each peer; then waits for every peer's word that its side is
 * flushed too; then destroys every endpoint. */
void weft__conn_retire_all(weft_comm_t *comm);
void weft__conn_await_fins(weft_comm_t *comm);
void weft__conn_close_all(weft_comm_t *comm);
/* After a failed setup agreement (packs.c): peer made `theirs` connections
 * with this rank. A cancelled connect may have completed on one side only;
 * this rank's connections numbered from theirs up are then orphans, whose
 * fin is never awaited, and both sides count on from the larger number. */
void weft__conn_pair_resync(weft_comm_t *comm, int peer, uint32_t theirs);

#endif
