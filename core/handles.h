/* SPDX-License-Identifier: Apache-2.0 */
/* Communicator handles from outside (weft.h, "Handles"): a process-wide set of
 * the live ones, checked before a public call reads anything through its
 * handle, and a per-communicator claim that keeps two threads out of calls on
 * one communicator at once. The core's own paths and the plugins' primitive
 * API use the unchecked twins below: packs call them while a communicator is
 * still being created or destroyed, and from inside a user's call. */
#ifndef WEFT_CORE_HANDLES_H
#define WEFT_CORE_HANDLES_H

#include <weft/weft.h>

/* Adds a fully built communicator to the live set; -ENOMEM when the set is
 * full (WEFT__LIVE_MAX communicators at once). */
int weft__comm_live_add(weft_comm_t *comm);
void weft__comm_live_remove(weft_comm_t *comm);
/* Calls fn on every live communicator, with the set locked: none is
 * destroyed meanwhile (weft_comm_destroy removes it first). */
void weft__comm_live_each(void (*fn)(weft_comm_t *comm, void *arg), void *arg);

/* 0 for a live communicator; -EINVAL, logged with fn, for NULL or a handle that
 * is not (destroyed, or never made). Reads nothing through the handle. */
int weft__comm_check(const weft_comm_t *comm, const char *fn);

/* weft__comm_check, then claims the communicator for this thread (nested
 * claims by the same thread count). -EBUSY, logged, when another thread holds
 * it. Every successful enter is paired with one leave, which is given the
 * call's result and returns it: a call that failed without an error line of
 * this thread (its cause found by another thread) still leaves
 * weft_last_error a message of its own, never an older call's. */
int weft__comm_enter(weft_comm_t *comm, const char *fn);
int weft__comm_leave(weft_comm_t *comm, int rc);

/* The unchecked twins of public calls (same arguments and results). */
int weft__comm_barrier(weft_comm_t *comm);
int weft__comm_allgather(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each);
int weft__comm_send(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len);
int weft__comm_recv(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len);
int weft__connect_mem(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
		      weft_conn_t **conn);
int weft__connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn);
int weft__mem_register_user(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, weft_mem_t **mem);
int weft__mem_import_user(weft_comm_t *comm, int peer, const void *buf, size_t len, weft_rmem_t **rmem);
int weft__sem_create(weft_comm_t *comm, weft_sem_t **sem);
int weft__sem_create_on(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **sem);
int weft__buf_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr);
/* The same for packs (prim->mem_alloc): "no transport allocates" at debug. */
int weft__buf_alloc_quiet(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr);
int weft__buf_free(weft_comm_t *comm, void *ptr);
/* 1 when [ptr, ptr + len) lies in one of this process's mem_alloc allocations. */
int weft__buf_in_alloc(const void *ptr, size_t len);

#endif
