/* SPDX-License-Identifier: Apache-2.0 */
/* The base floor's services (base.h): id tables, polite waiting, the comm's
 * status, progress of its transports, and the abort flags device waits poll. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "log.h"

/* -------------------------------------------------------------- id tables */
int weft__idtab_add(struct weft__idtab *t, void *obj, uint32_t *id)
{
	for (uint32_t i = 0; i < t->cap; i++)
		if (!t->slot[i]) {
			t->slot[i] = obj;
			*id = i;
			return 0;
		}
	if (t->cap >= WEFT__ID_MAX) {
		WEFT_ERROR("too many objects of one kind in a communicator (limit %u ids for port channels)",
			   WEFT__ID_MAX);
		return -ENOSPC;
	}
	uint32_t ncap = t->cap ? t->cap * 2 : 16;
	if (ncap > WEFT__ID_MAX)
		ncap = WEFT__ID_MAX;
	void **ns = realloc(t->slot, ncap * sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	memset(ns + t->cap, 0, (ncap - t->cap) * sizeof(*ns));
	uint32_t i = t->cap;
	t->slot = ns;
	t->cap = ncap;
	t->slot[i] = obj;
	*id = i;
	return 0;
}

void weft__idtab_del(struct weft__idtab *t, uint32_t id)
{
	if (id < t->cap)
		t->slot[id] = NULL;
}

void *weft__idtab_get(const struct weft__idtab *t, uint32_t id)
{
	return id < t->cap ? t->slot[id] : NULL;
}

void weft__idtab_free(struct weft__idtab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = 0;
}

/* ---------------------------------------------------------------- backoff */
/* Spinning a little keeps latency low when the answer is near; beyond that a
 * rank sleeps, because ranks may outnumber cores and the peer it waits for may
 * need this very core to make progress. A sleep costs at least the timer
 * slack (~50 us) and many waits end within microseconds, so the first
 * stretch only yields: with more ranks than cores, sched_yield still hands
 * the core over. */
#define WEFT__SPIN_NS 200000ull

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* No clock read here: most operations never wait, so the yield window starts
 * at the first wait (UINT64_MAX: not started). */
void weft__backoff_init(struct weft__backoff *b, unsigned max_us)
{
	b->spin_until_ns = UINT64_MAX;
	b->sleep_us = 1;
	b->max_us = max_us ? max_us : 1000;
}

/* Within the yield window: yields and returns 1. */
static int backoff_yield(struct weft__backoff *b)
{
	if (b->spin_until_ns == UINT64_MAX)
		b->spin_until_ns = mono_ns() + WEFT__SPIN_NS;
	if (b->spin_until_ns != 0) {
		if (mono_ns() < b->spin_until_ns) {
			sched_yield();
			return 1;
		}
		b->spin_until_ns = 0;
	}
	return 0;
}

static void backoff_grow(struct weft__backoff *b)
{
	if (b->sleep_us < b->max_us) {
		b->sleep_us *= 2;
		if (b->sleep_us > b->max_us)
			b->sleep_us = b->max_us;
	}
}

void weft__backoff_wait(struct weft__backoff *b)
{
	if (backoff_yield(b))
		return;
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)b->sleep_us * 1000};
	nanosleep(&ts, NULL);
	backoff_grow(b);
}

#define WEFT__WAIT_FDS 16

void weft__comm_backoff_wait(weft_comm_t *comm, struct weft__backoff *b)
{
	if (backoff_yield(b))
		return;
	int fds[WEFT__WAIT_FDS], n = 0;
	for (int i = 0; i < comm->ntp && n < WEFT__WAIT_FDS; i++) {
		struct weft__tp *tp = &comm->tp[i];
		if (!WEFT__TP_HAS(tp, wait_fds))
			continue;
		pthread_mutex_lock(&tp->lock);
		int k = tp->ops->wait_fds(tp->tc, fds + n, WEFT__WAIT_FDS - n);
		pthread_mutex_unlock(&tp->lock);
		if (k == -EAGAIN)
			return; /* progress is due: the caller's loop makes it */
		if (k > 0)
			n += k < WEFT__WAIT_FDS - n ? k : WEFT__WAIT_FDS - n;
	}
	struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)b->sleep_us * 1000};
	if (n == 0) {
		nanosleep(&ts, NULL);
	} else {
		struct pollfd pfd[WEFT__WAIT_FDS];
		for (int i = 0; i < n; i++)
			pfd[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
		ppoll(pfd, (nfds_t)n, &ts, NULL);
	}
	backoff_grow(b);
}

/* --------------------------------------------------------------- progress */
int weft__comm_status(const weft_comm_t *comm)
{
	return weft__bootstrap_status(comm->bs);
}

int weft__tp_progress(struct weft__tp *tp)
{
	if (!WEFT__TP_HAS(tp, progress))
		return 0;
	pthread_mutex_lock(&tp->lock);
	int rc = tp->ops->progress(tp->tc);
	pthread_mutex_unlock(&tp->lock);
	if (rc == -EAGAIN)
		rc = 0;
	return rc;
}

void weft__comm_note_error(weft_comm_t *comm, int rc)
{
	/* A transport that saw a peer die reports it before the bootstrap's
	 * liveness watch may have: either way the whole communicator is broken, so
	 * every pending and later call must see it, not only the one that noticed. */
	if (rc == -WEFT_ERR_PEER) {
		weft__bootstrap_fail(comm->bs, rc);
		weft__abort_flags_raise(comm);
	}
}

int weft__comm_progress(weft_comm_t *comm)
{
	int first = 0;
	for (int i = 0; i < comm->ntp; i++) {
		int rc = weft__tp_progress(&comm->tp[i]);
		weft__comm_note_error(comm, rc);
		if (rc < 0 && first == 0) {
			WEFT_DEBUG("transport %s: progress failed: %s", comm->tp[i].name, weft_strerror(rc));
			first = rc;
		}
	}
	return first;
}

int weft__comm_tp_index(const weft_comm_t *comm, const char *name)
{
	for (int i = 0; i < comm->ntp; i++)
		if (strcmp(comm->tp[i].name, name) == 0)
			return i;
	return -1;
}

/* ------------------------------------------------------------ abort flags
 * Process-wide and locked (af_lock, a leaf: nothing is taken under it), so
 * that raising can run from any thread under any core lock. */
struct aflag {
	struct aflag *next;
	weft_comm_t *comm;
	uint32_t *host;
};

static pthread_mutex_t af_lock = PTHREAD_MUTEX_INITIALIZER;
static struct aflag *af_list;

int weft__abort_flag_add(weft_comm_t *comm, uint32_t *host_flag)
{
	struct aflag *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->comm = comm;
	f->host = host_flag;
	pthread_mutex_lock(&af_lock);
	f->next = af_list;
	af_list = f;
	/* A channel made after the failure must not let a kernel wait forever. */
	if (weft__comm_status(comm) != 0)
		__atomic_store_n(host_flag, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&af_lock);
	return 0;
}

void weft__abort_flag_del(uint32_t *host_flag)
{
	struct aflag *f = NULL;
	pthread_mutex_lock(&af_lock);
	for (struct aflag **pp = &af_list; *pp; pp = &(*pp)->next)
		if ((*pp)->host == host_flag) {
			f = *pp;
			*pp = f->next;
			break;
		}
	pthread_mutex_unlock(&af_lock);
	free(f);
}

void weft__abort_flags_raise(weft_comm_t *comm)
{
	int n = 0;
	pthread_mutex_lock(&af_lock);
	for (struct aflag *f = af_list; f; f = f->next)
		if (f->comm == comm && !__atomic_exchange_n(f->host, 1, __ATOMIC_ACQ_REL))
			n++;
	pthread_mutex_unlock(&af_lock);
	if (n)
		WEFT_DEBUG("raised the abort flag of %d device channel%s", n, n == 1 ? "" : "s");
}

void weft__abort_flags_drop(weft_comm_t *comm)
{
	pthread_mutex_lock(&af_lock);
	for (struct aflag **pp = &af_list; *pp;) {
		struct aflag *f = *pp;
		if (f->comm == comm) {
			*pp = f->next;
			free(f);
		} else {
			pp = &f->next;
		}
	}
	pthread_mutex_unlock(&af_lock);
}
