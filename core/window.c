/* SPDX-License-Identifier: Apache-2.0 */
/* Windows: one registration per rank, made and imported by every rank
 * together, and the lookup that hands a collective's packs the windows its
 * buffers lie in (weft_coll_args.send_win/recv_win), so that they need not
 * swap buffer addresses per call. The lookup is local; ranks that disagree
 * are caught by the call's signature, which folds in the windows and
 * offsets (callsig.c). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "base.h"
#include "coll.h"
#include "dtype.h"
#include "handles.h"
#include "log.h"
#include "window.h"

struct weft_window {
	struct weft_window *next;
	struct weft_window *live_next; /* in g_live */
	weft_comm_t *comm;
	struct weft_algo_window w;
	weft_rmem_t **rmem; /* [nranks] */
};

/* Every live window of the process: a comm's destroy frees its windows, so
 * a later weft_window_deregister of such a handle must be refused without
 * reading through it (as with comm handles, handles.c). */
static pthread_mutex_t g_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_window *g_live;

/* win's comm if win is in the live set, else NULL (reading nothing through
 * win); removes it from the set when unlink is set. */
static weft_comm_t *win_live(struct weft_window *win, int unlink)
{
	weft_comm_t *comm = NULL;
	pthread_mutex_lock(&g_live_lock);
	for (struct weft_window **pp = &g_live; *pp; pp = &(*pp)->live_next)
		if (*pp == win) {
			comm = win->comm;
			if (unlink)
				*pp = win->live_next;
			break;
		}
	pthread_mutex_unlock(&g_live_lock);
	return comm;
}

/* What each rank says of its part, twice: after registering, after importing. */
struct win_hdr {
	int32_t status; /* 0 or this rank's negative code */
	int32_t type;
	uint64_t len;
};

static void win_free(struct weft_window *win)
{
	if (!win)
		return;
	for (int q = 0; win->rmem && q < win->comm->nranks; q++)
		weft_rmem_release(win->rmem[q]);
	weft_mem_deregister(win->w.mem);
	free(win->rmem);
	free(win);
}

/* Gathers every rank's header; 0 when each rank's status is 0, else the
 * first failing rank's code (named in the log where it is another rank's). */
static int win_agree(weft_comm_t *comm, const struct win_hdr *mine, struct win_hdr *all, const char *step)
{
	int rc = weft__comm_allgather(comm, mine, all, sizeof(*mine));
	if (rc != 0) {
		WEFT_ERROR("weft_window_register: %s: the ranks' exchange failed: %s", step, weft_strerror(rc));
		return rc;
	}
	for (int q = 0; q < comm->nranks; q++)
		if (all[q].status != 0) {
			rc = all[q].status < 0 && all[q].status > -WEFT_ERR_LAST ? all[q].status : -WEFT_ERR_PROTOCOL;
			if (q != comm->rank)
				WEFT_ERROR("weft_window_register: %s failed on rank %d: %s", step, q, weft_strerror(rc));
			return rc;
		}
	return 0;
}

/* Every rank swaps its part with every peer, pairs in ascending (low, high)
 * order so that each pair meets; a failed import does not stop the others,
 * so that no peer waits. The first failure, or 0. */
static int win_swap(struct weft_window *win)
{
	weft_comm_t *comm = win->comm;
	int me = comm->rank, first = 0;
	for (int lo = 0; lo < comm->nranks; lo++)
		for (int hi = lo + 1; hi < comm->nranks; hi++) {
			if (me != lo && me != hi)
				continue;
			int q = me == lo ? hi : lo;
			int rc = weft_mem_exchange(win->w.mem, q, &win->rmem[q]);
			if (rc != 0 && !first) {
				WEFT_ERROR("weft_window_register: importing rank %d's part failed: %s", q,
					   weft_strerror(rc));
				first = rc;
			}
		}
	return first;
}

static int win_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, weft_window_t **out)
{
	int n = comm->nranks, rc = 0;
	/* Numbered before anything can fail, so that ids stay the same on every rank. */
	uint64_t id = ++comm->window_seq;
	/* On the stack, so that a rank out of memory still tells the others. */
	struct win_hdr all[n];
	struct weft_window *win = calloc(1, sizeof(*win));
	if (win)
		win->comm = comm;
	if (!win || !(win->rmem = calloc((size_t)n, sizeof(*win->rmem))))
		rc = -ENOMEM;
	if (rc == 0)
		rc = weft__mem_register_user(comm, ptr, len, type, &win->w.mem);
	struct win_hdr mine = {.status = rc, .type = (int32_t)type, .len = len};
	if ((rc = win_agree(comm, &mine, all, "registering each rank's part")) != 0)
		goto err_free;
	size_t min_len = len;
	for (int q = 0; q < n; q++) {
		if (all[q].type != (int32_t)type) {
			WEFT_ERROR("weft_window_register: rank %d registers %s memory, this rank %s memory: a window is "
				   "of one memory type", q, weft__mem_name(all[q].type), weft__mem_name(type));
			rc = -WEFT_ERR_MISMATCH;
			goto err_free;
		}
		if (all[q].len < min_len)
			min_len = (size_t)all[q].len;
	}
	mine.status = win_swap(win);
	if ((rc = win_agree(comm, &mine, all, "importing the parts")) != 0)
		goto err_free;
	win->w = (struct weft_algo_window){.size = sizeof(win->w), .id = id, .base = ptr, .len = len,
					   .min_len = min_len, .mem_type = type, .mem = win->w.mem,
					   .rmem = win->rmem};
	weft__coll_window(comm, &win->w, 1);
	win->next = comm->windows;
	comm->windows = win;
	pthread_mutex_lock(&g_live_lock);
	win->live_next = g_live;
	g_live = win;
	pthread_mutex_unlock(&g_live_lock);
	WEFT_DEBUG("window %llu: %zu bytes of %s memory at %p (every rank's at least %zu)", (unsigned long long)id,
		   len, weft__mem_name(type), ptr, min_len);
	*out = win;
	return 0;
err_free:
	win_free(win);
	return rc;
}

WEFT_API int weft_window_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type,
				  weft_window_t **win)
{
	int rc = weft__comm_enter(comm, "weft_window_register");
	if (rc != 0)
		return rc;
	if (!ptr || !win || len == 0 || (int)type < 0 || type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_window_register: %s", !ptr ? "NULL pointer" : !win ? "NULL window out-pointer"
						   : len == 0 ? "length 0" : "unknown memory type");
		return weft__comm_leave(comm, -EINVAL);
	}
	return weft__comm_leave(comm, win_register(comm, ptr, len, type, win));
}

/* Unlinks win from its comm's list and releases it; the packs first. */
static void win_drop(struct weft_window *win)
{
	weft_comm_t *comm = win->comm;
	win_live(win, 1);
	for (struct weft_window **pp = &comm->windows; *pp; pp = &(*pp)->next)
		if (*pp == win) {
			*pp = win->next;
			break;
		}
	weft__coll_window(comm, &win->w, 0);
	win_free(win);
}

WEFT_API int weft_window_deregister(weft_window_t *win)
{
	if (!win)
		return 0;
	/* The comm is read only from a window still in the live set; once the
	 * comm is claimed, no destroy or other deregister can free it. */
	weft_comm_t *comm = win_live(win, 0);
	if (!comm) {
		WEFT_ERROR("weft_window_deregister: %p is not a registered window (deregistered already, or its "
			   "communicator destroyed?)", (void *)win);
		return -EINVAL;
	}
	int rc = weft__comm_enter(comm, "weft_window_deregister");
	if (rc != 0)
		return rc;
	if (!win_live(win, 0)) {
		WEFT_ERROR("weft_window_deregister: window %p went away while this call waited", (void *)win);
		return weft__comm_leave(comm, -EINVAL);
	}
	win_drop(win);
	return weft__comm_leave(comm, 0);
}

void weft__window_free_all(weft_comm_t *comm)
{
	while (comm->windows)
		win_drop(comm->windows);
}

/* The window holding [p, p+len) whole, within every rank's part; NULL if none. */
static const struct weft_algo_window *win_find(weft_comm_t *comm, const void *p, uint64_t len, uint64_t *off)
{
	uintptr_t a = (uintptr_t)p;
	for (struct weft_window *w = comm->windows; w && p; w = w->next) {
		uintptr_t b = (uintptr_t)w->w.base;
		if (a >= b && a - b <= w->w.min_len && len <= w->w.min_len - (a - b)) {
			*off = a - b;
			return &w->w;
		}
	}
	return NULL;
}

void weft__window_locate(weft_comm_t *comm, struct weft_coll_args *a)
{
	a->send_win = a->recv_win = NULL;
	a->send_off = a->recv_off = 0;
	if (!comm->windows)
		return;
	uint64_t b = (uint64_t)a->count * weft_kit_datatype_size(a->dtype), n = (uint64_t)comm->nranks;
	uint64_t in = b, out = b;
	switch (a->coll) {
	case WEFT_COLL_ALLREDUCE:
		break;
	case WEFT_COLL_REDUCE_SCATTER:
		in = b * n;
		break;
	case WEFT_COLL_ALLGATHER:
		out = b * n;
		break;
	case WEFT_COLL_ALLTOALL:
		in = out = b * n;
		break;
	default:
		/* Broadcast's and reduce's non-roots pass buffers NCCL ignores:
		 * folding them into the signature would fail good calls. */
		return;
	}
	a->send_win = win_find(comm, a->sendbuf, in, &a->send_off);
	a->recv_win = win_find(comm, a->recvbuf, out, &a->recv_off);
}
