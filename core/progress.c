/* SPDX-License-Identifier: Apache-2.0 */
/* The comm's progress thread (progress.h): it runs while it has users, drives
 * the transports, drains what the port channels and staging registered, and
 * raises the device abort flags when the comm fails. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "log.h"
#include "progress.h"

/* The comm's progress thread. It runs while it has users: port channels, and
 * threads of the comm waiting in the bootstrap (weft__progress_hold); with
 * none it sleeps on its condition variable. */
struct weft__proxy {
	pthread_t thread;
	weft_comm_t *comm;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;  /* under mu */
	int users; /* under mu */
};

/* ------------------------------------------------------------ the proxy */
/* kept: this thread's error count before the step. A transport (or the
 * drain) that logged the failure named it better: one line a failure. */
static void proxy_fail(weft_comm_t *comm, int rc, const char *what, uint64_t kept)
{
	if (weft__log_errors_kept() == kept)
		WEFT_ERROR("port proxy: %s failed: %s; failing the communicator", what, weft_strerror(rc));
	weft__bootstrap_fail(comm->bs, rc);
}

void weft__progress_set_drain(weft_comm_t *comm, weft__drain_fn drain)
{
	__atomic_store_n(&comm->drain, drain, __ATOMIC_RELEASE);
}

void weft__progress_set_stage_drain(weft_comm_t *comm, weft__drain_fn drain)
{
	__atomic_store_n(&comm->stage_drain, drain, __ATOMIC_RELEASE);
}

static void *proxy_main(void *arg)
{
	struct weft__proxy *px = arg;
	weft_comm_t *comm = px->comm;
	weft__log_set_rank(comm->rank);
	/* Idle, the proxy sleeps up to 1 ms; with work in flight (a flush not yet
	 * complete) it polls faster, because on transports that need progress to
	 * move data, its sleep is the transfer's stall. */
	struct weft__backoff idle, busy;
	weft__backoff_init(&idle, 1000);
	weft__backoff_init(&busy, 50);
	int raised = 0;
	for (;;) {
		pthread_mutex_lock(&px->mu);
		while (!px->stop && px->users == 0)
			pthread_cond_wait(&px->cv, &px->mu);
		int stop = px->stop;
		pthread_mutex_unlock(&px->mu);
		if (stop)
			break;
		int worked = 0, pending = 0;
		/* After a failure the triggers are left alone: every producer's wait
		 * watches the comm status and returns its error; kernels watch their
		 * abort flags, which the bootstrap cannot raise itself (its liveness
		 * thread has no hook), so this thread raises them once it sees the
		 * failure: within the peer timeout plus one idle sleep. */
		if (weft__comm_status(comm) != 0) {
			if (!raised) {
				weft__abort_flags_raise(comm);
				raised = 1;
			}
		} else {
			weft__drain_fn drain = __atomic_load_n(&comm->drain, __ATOMIC_ACQUIRE);
			uint64_t kept = weft__log_errors_kept();
			int rc = drain ? drain(comm, &pending) : 0;
			if (rc < 0)
				proxy_fail(comm, rc, "a trigger", kept);
			else
				worked += rc;
			weft__drain_fn sdrain = __atomic_load_n(&comm->stage_drain, __ATOMIC_ACQUIRE);
			kept = weft__log_errors_kept();
			rc = sdrain ? sdrain(comm, &pending) : 0;
			if (rc < 0)
				proxy_fail(comm, rc, "a staged receive", kept);
			else
				worked += rc;
			kept = weft__log_errors_kept();
			rc = weft__comm_progress(comm);
			if (rc != 0)
				proxy_fail(comm, rc, "transport progress", kept);
		}
		if (worked) {
			weft__backoff_init(&idle, 1000);
			weft__backoff_init(&busy, 50);
		} else if (pending) {
			weft__comm_backoff_wait(comm, &busy);
		} else {
			weft__comm_backoff_wait(comm, &idle);
		}
	}
	return NULL;
}

/* Starts the thread once; called with comm->port_lock held. */
static int proxy_start(weft_comm_t *comm)
{
	if (comm->proxy)
		return 0;
	struct weft__proxy *px = calloc(1, sizeof(*px));
	if (!px)
		return -ENOMEM;
	px->comm = comm;
	pthread_mutex_init(&px->mu, NULL);
	pthread_cond_init(&px->cv, NULL);
	int rc = pthread_create(&px->thread, NULL, proxy_main, px);
	if (rc != 0) {
		WEFT_ERROR("port proxy: pthread_create failed: %s", strerror(rc));
		pthread_cond_destroy(&px->cv);
		pthread_mutex_destroy(&px->mu);
		free(px);
		return -rc;
	}
	comm->proxy = px;
	return 0;
}

static void proxy_users(struct weft__proxy *px, int delta)
{
	pthread_mutex_lock(&px->mu);
	px->users += delta;
	pthread_cond_signal(&px->cv);
	pthread_mutex_unlock(&px->mu);
}

void weft__proxy_stop(weft_comm_t *comm)
{
	struct weft__proxy *px = comm->proxy;
	if (!px)
		return;
	pthread_mutex_lock(&px->mu);
	px->stop = 1;
	pthread_cond_signal(&px->cv);
	pthread_mutex_unlock(&px->mu);
	pthread_join(px->thread, NULL);
	pthread_cond_destroy(&px->cv);
	pthread_mutex_destroy(&px->mu);
	free(px);
	comm->proxy = NULL;
}

/* A thread about to block in the bootstrap (an exchange, a barrier) cannot
 * progress its transports meanwhile; a peer flushing toward it on a transport
 * that lands data only when the target progresses would then wait on it while
 * it waits on the peer. The proxy thread progresses for it. */
int weft__progress_hold(weft_comm_t *comm)
{
	if (comm->ntp == 0)
		return 0;
	pthread_mutex_lock(&comm->port_lock);
	int rc = proxy_start(comm);
	pthread_mutex_unlock(&comm->port_lock);
	if (rc == 0)
		proxy_users(comm->proxy, 1);
	return rc;
}

void weft__progress_release(weft_comm_t *comm)
{
	if (comm->ntp > 0 && comm->proxy)
		proxy_users(comm->proxy, -1);
}

