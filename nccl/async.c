/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: non-blocking communicators (ncclConfig_t.blocking = 0). An
 * init or a split runs on a thread of its own and the call returns
 * ncclInProgress; ncclCommGetAsyncError reports it until the rendezvous is
 * over, calls on the comm wait for it, and ncclCommAbort leaves the
 * unfinished work to that thread, which then frees the comm. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wn.h"

void wn_comm_hold(struct ncclComm *c, int init)
{
	pthread_mutex_lock(&c->state_lock);
	c->refs++;
	if (init)
		c->state = WN_INIT;
	pthread_mutex_unlock(&c->state_lock);
}

void wn_comm_unref(struct ncclComm *c)
{
	pthread_mutex_lock(&c->state_lock);
	int last = --c->refs == 0 && c->abandoned;
	pthread_mutex_unlock(&c->state_lock);
	if (last)
		wn_comm_teardown(c);
}

ncclResult_t wn_comm_wait(struct ncclComm *c, const char *fn)
{
	pthread_mutex_lock(&c->state_lock);
	if (c->state != WN_INIT && c->busy == 0) {
		pthread_mutex_unlock(&c->state_lock);
		return ncclSuccess;
	}
	c->refs++;
	while ((c->state == WN_INIT || c->busy > 0) && !c->abandoned)
		pthread_cond_wait(&c->state_cv, &c->state_lock);
	int gone = c->abandoned;
	pthread_mutex_unlock(&c->state_lock);
	if (gone) {
		/* The struct lives until its last user leaves: the log line first. */
		WN_ERROR("%s: comm %p was aborted while it was being initialized", fn, (void *)c);
		wn_comm_unref(c);
		return ncclInvalidArgument;
	}
	wn_comm_unref(c);
	return ncclSuccess;
}

void wn_comm_publish(struct ncclComm *c, weft_comm_t *wc, int rc)
{
	pthread_mutex_lock(&c->state_lock);
	c->wc = wc;
	c->state = rc == 0 ? WN_READY : WN_FAILED;
	if (wc) {
		/* A split's new rank and size are known only now. */
		c->rank = weft_comm_rank(wc);
		c->nranks = weft_comm_size(wc);
	}
	if (rc != 0) {
		c->init_rc = wn_result(rc);
		snprintf(c->why, sizeof(c->why), "%s", wn_last_error());
	}
	pthread_cond_broadcast(&c->state_cv);
	pthread_mutex_unlock(&c->state_lock);
	/* An abandoned comm's weft comm, made after all, is aborted and destroyed
	 * with it by the last user (wn_comm_teardown). */
	wn_comm_unref(c);
}

int wn_comm_abandon(struct ncclComm *c)
{
	pthread_mutex_lock(&c->state_lock);
	if (c->refs == 0) {
		pthread_mutex_unlock(&c->state_lock);
		return 0;
	}
	int rank = c->rank; /* the struct is not this thread's to read once unlocked */
	c->abandoned = 1;
	c->magic = 0;       /* no further use by the application */
	/* A split's waits on the parent end now; a rendezvous in progress ends
	 * when it completes or times out (WEFT_CORE_BOOTSTRAP_TIMEOUT). */
	if (c->wc)
		weft_comm_abort(c->wc);
	pthread_cond_broadcast(&c->state_cv);
	pthread_mutex_unlock(&c->state_lock);
	WN_INFO("ncclCommAbort: rank %d: the init or split in progress ends in the background", rank);
	return 1;
}

/* --------------------------------------------------------------- init */

struct init_job {
	struct ncclComm *comm;
	struct weft_unique_id id;
	const char *fn;
};

static void *init_main(void *arg)
{
	struct init_job *j = arg;
	weft_comm_t *wc = NULL;
	int rc = wn_comm_make(j->comm, &j->id, j->fn, &wc);
	wn_comm_publish(j->comm, rc == 0 ? wc : NULL, rc);
	free(j);
	return NULL;
}

/* Runs fn(arg) on a detached thread: 0, or -1 when none could start. */
static int start_detached(void *(*fn)(void *), void *arg)
{
	pthread_attr_t a;
	pthread_t th;
	if (pthread_attr_init(&a) != 0)
		return -1;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&th, &a, fn, arg);
	pthread_attr_destroy(&a);
	return rc == 0 ? 0 : -1;
}

ncclResult_t wn_init_start(struct ncclComm *c, const struct weft_unique_id *id, const char *fn)
{
	struct init_job *j = malloc(sizeof(*j));
	wn_comm_hold(c, 1);
	if (j) {
		j->comm = c;
		j->id = *id;
		j->fn = fn;
		if (start_detached(init_main, j) == 0)
			return ncclInProgress;
	}
	/* No thread: the init runs here, which a non-blocking caller must accept. */
	WN_WARN("%s: could not start a thread for the non-blocking init; it runs in this call", fn);
	weft_comm_t *wc = NULL;
	int rc = wn_comm_make(c, id, fn, &wc);
	free(j);
	wn_comm_publish(c, rc == 0 ? wc : NULL, rc);
	return wn_result(rc);
}

/* -------------------------------------------------------------- split */

struct split_job {
	struct ncclComm *parent, *child; /* child NULL: NCCL_SPLIT_NOCOLOR */
	int color, key;
};

static void *split_main(void *arg)
{
	struct split_job *j = arg;
	struct ncclComm *p = j->parent;
	weft_comm_t *wc = NULL;
	int prev = wn_device_enter(p->device);
	int rc = weft_comm_split(p->wc, j->color, j->key, &wc);
	wn_device_leave(prev);
	if (rc != 0) {
		char detail[256] = "";
		weft_last_error(detail, sizeof(detail));
		WN_ERROR("ncclCommSplit: weft_comm_split failed: %s%s%s", weft_strerror(rc), detail[0] ? ": " : "",
			 detail);
	}
	if (j->child)
		wn_comm_publish(j->child, rc == 0 ? wc : NULL, rc);
	else if (wc)
		weft_comm_destroy(wc); /* cannot happen: no color, no comm */
	pthread_mutex_lock(&p->state_lock);
	p->busy--;
	pthread_cond_broadcast(&p->state_cv);
	pthread_mutex_unlock(&p->state_lock);
	wn_comm_unref(p);
	free(j);
	return NULL;
}

ncclResult_t wn_split_start(struct ncclComm *parent, int wcolor, int key, const ncclConfig_t *config,
			    ncclComm_t *newcomm)
{
	static const char fn[] = "ncclCommSplit";
	struct split_job *j = calloc(1, sizeof(*j));
	struct ncclComm *c = NULL;
	if (j && wcolor != WEFT_SPLIT_NOCOLOR) {
		c = wn_comm_new(-1, 0, config, parent->device);
		if (c && !config) {
			c->blocking = parent->blocking;
			memcpy(c->name, parent->name, sizeof(c->name));
		}
	}
	if (!j || (wcolor != WEFT_SPLIT_NOCOLOR && !c)) {
		WN_ERROR("%s: out of memory", fn);
		free(j);
		wn_comm_free(c);
		return ncclSystemError;
	}
	*j = (struct split_job){.parent = parent, .child = c, .color = wcolor, .key = key};
	if (c)
		wn_comm_hold(c, 1);
	pthread_mutex_lock(&parent->state_lock);
	parent->refs++;
	parent->busy++;
	pthread_mutex_unlock(&parent->state_lock);
	if (start_detached(split_main, j) != 0) {
		WN_WARN("%s: could not start a thread for the non-blocking split; it runs in this call", fn);
		split_main(j);
		*newcomm = c;
		return c ? wn_check_comm(c, fn) : ncclSuccess;
	}
	*newcomm = c;
	return c ? ncclInProgress : ncclSuccess;
}
