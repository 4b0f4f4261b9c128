/* SPDX-License-Identifier: Apache-2.0 */
/* The live-communicator set and the per-communicator claim (handles.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "handles.h"
#include "log.h"

/* Open addressing over a fixed table: lookups are lock-free loads, so a
 * check costs a hash and one or two loads. Removal leaves a tombstone that a
 * later insertion reuses; a table full of tombstones only slows the lookup of
 * a handle that is not there, which is an error path. */
#define LIVE_SLOTS (1u << 13)
#define WEFT__LIVE_MAX (LIVE_SLOTS / 2)
#define TOMB ((uintptr_t)1)

static _Atomic uintptr_t live[LIVE_SLOTS];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned live_n;

static unsigned home(uintptr_t p)
{
	uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull;
	return (unsigned)(h >> 40) & (LIVE_SLOTS - 1);
}

static int is_live(const weft_comm_t *comm)
{
	uintptr_t key = (uintptr_t)comm;
	unsigned i = home(key);
	for (unsigned k = 0; k < LIVE_SLOTS; k++, i = (i + 1) & (LIVE_SLOTS - 1)) {
		uintptr_t v = atomic_load_explicit(&live[i], memory_order_acquire);
		if (v == key)
			return 1;
		if (v == 0)
			return 0;
	}
	return 0;
}

int weft__comm_live_add(weft_comm_t *comm)
{
	uintptr_t key = (uintptr_t)comm;
	pthread_mutex_lock(&live_lock);
	if (live_n >= WEFT__LIVE_MAX || is_live(comm)) {
		int full = live_n >= WEFT__LIVE_MAX;
		pthread_mutex_unlock(&live_lock);
		if (full)
			WEFT_ERROR("more than %u communicators at once in this process", WEFT__LIVE_MAX);
		return full ? -ENOMEM : -EINVAL;
	}
	unsigned i = home(key);
	while (1) {
		uintptr_t v = atomic_load_explicit(&live[i], memory_order_relaxed);
		if (v == 0 || v == TOMB)
			break;
		i = (i + 1) & (LIVE_SLOTS - 1);
	}
	atomic_store_explicit(&live[i], key, memory_order_release);
	live_n++;
	pthread_mutex_unlock(&live_lock);
	return 0;
}

void weft__comm_live_remove(weft_comm_t *comm)
{
	uintptr_t key = (uintptr_t)comm;
	pthread_mutex_lock(&live_lock);
	unsigned i = home(key);
	for (unsigned k = 0; k < LIVE_SLOTS; k++, i = (i + 1) & (LIVE_SLOTS - 1)) {
		uintptr_t v = atomic_load_explicit(&live[i], memory_order_relaxed);
		if (v == 0)
			break;
		if (v == key) {
			atomic_store_explicit(&live[i], TOMB, memory_order_release);
			live_n--;
			break;
		}
	}
	pthread_mutex_unlock(&live_lock);
}

void weft__comm_live_each(void (*fn)(weft_comm_t *comm, void *arg), void *arg)
{
	pthread_mutex_lock(&live_lock);
	for (unsigned i = 0; i < LIVE_SLOTS; i++) {
		uintptr_t v = atomic_load_explicit(&live[i], memory_order_relaxed);
		if (v != 0 && v != TOMB)
			fn((weft_comm_t *)v, arg);
	}
	pthread_mutex_unlock(&live_lock);
}

int weft__comm_check(const weft_comm_t *comm, const char *fn)
{
	if (!comm) {
		WEFT_ERROR("%s: comm is NULL", fn);
		return -EINVAL;
	}
	if (!is_live(comm)) {
		WEFT_ERROR("%s: %p is not a live communicator (destroyed already, or never created)", fn,
			   (const void *)comm);
		return -EINVAL;
	}
	return 0;
}

/* A per-thread address names the thread that holds a communicator. */
static _Thread_local char self_token;
/* The outermost call this thread runs, and its error count at entry. */
static _Thread_local const char *call_fn;
static _Thread_local uint64_t call_errors;

int weft__comm_enter(weft_comm_t *comm, const char *fn)
{
	int rc = weft__comm_check(comm, fn);
	if (rc)
		return rc;
	uintptr_t me = (uintptr_t)&self_token, held = 0;
	if (atomic_compare_exchange_strong_explicit(&comm->busy_owner, &held, me, memory_order_acquire,
						    memory_order_relaxed)) {
		comm->busy_depth = 1;
		call_fn = fn;
		call_errors = weft__log_errors_kept();
		return 0;
	}
	if (held == me) {
		comm->busy_depth++;
		return 0;
	}
	WEFT_ERROR("%s: another thread is inside a call on this communicator (rank %d); calls on one communicator "
		   "must not overlap",
		   fn, comm->rank);
	return -EBUSY;
}

int weft__comm_leave(weft_comm_t *comm, int rc)
{
	if (--comm->busy_depth != 0)
		return rc;
	atomic_store_explicit(&comm->busy_owner, 0, memory_order_release);
	if (rc != 0 && weft__log_errors_kept() == call_errors)
		weft__log_keep_error(NULL, "%s on rank %d: %s%s", call_fn, comm->rank, weft_strerror(rc),
				     weft__bootstrap_status(comm->bs) != 0 ? " (the communicator failed: the log of the "
									     "rank that found it says why)"
									   : "");
	return rc;
}
