/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: memory windows (ncclCommWindowRegister, ncclCommWindowDeregister,
 * ncclWinGetUserPtr) and NCCL's one-sided calls (ncclPutSignal, ncclSignal,
 * ncclWaitSignal) on weft's primitives. A window is a weft_mem_t registered
 * with every transport of the comm, its serialized blob handed to every rank
 * (weft_comm_allgather) and imported there. The first window of a memory type
 * connects every pair of ranks for that type (weft_connect_mem, in increasing
 * peer order, so that each pair meets), and the first of all gives each pair
 * a semaphore per direction (weft_sem_exchange): rank p's signals to this
 * rank raise this rank's sem[p] to the count p sent so far, and a wait for n
 * more signals from p waits for the count it consumed plus n. A put is
 * weft_put into the peer's imported region, followed by the signal on the
 * host connection; the call flushes both before it returns, so the source may
 * be reused and the data is at the peer, as NCCL's calls once their stream
 * ran them. Each window is also the core's (weft_window_register), so that
 * collectives whose buffers lie in windows skip the packs' per-call swap of
 * buffer addresses. With a stream and the application's CUDA runtime, the stream is
 * synchronized first, so that the call sees what earlier work on it wrote. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wn.h"

#define WN_WIN_MAGIC 0x7766696eu /* "wfin" */

struct ncclWindow_vidmem {
	unsigned magic; /* WN_WIN_MAGIC while registered */
	struct ncclComm *comm;
	void *ptr; /* the caller's buffer (ncclWinGetUserPtr) */
	size_t size;
	int flags; /* winFlags, kept; weft serves every flag alike */
	enum weft_mem_type type;
	weft_mem_t *mem;
	int nranks;
	weft_rmem_t **rmem; /* [nranks]: each peer's region of this window; NULL at this rank */
	uint64_t *sizes;    /* [nranks]: each rank's size of it */
	weft_window_t *cw;  /* the core's window: collectives in it skip the packs' address swaps */
	struct ncclWindow_vidmem *next;
};

struct wn_rma {
	int nranks;
	uint64_t *sent;                          /* [nranks]: signals this rank sent to p (to itself at its own rank) */
	uint64_t *seen;                          /* [nranks]: signals of p that waits consumed */
	int ready[WEFT_MEM_TYPE_COUNT];          /* every pair is connected for that memory type */
	weft_conn_t **conn[WEFT_MEM_TYPE_COUNT]; /* [nranks] each */
	int sems;                                /* the semaphores below are exchanged */
	weft_sem_t **sem;                        /* [nranks]: raised by p */
	weft_rsem_t **rsem;                      /* [nranks]: p's semaphore for this rank's signals */
};

/* n entries of an array per rank (a comm has at least one). */
static size_t per_rank(int n)
{
	return n > 0 ? (size_t)n : 1;
}

static const char *mem_name(enum weft_mem_type t)
{
	return t == WEFT_MEM_HOST ? "host" : t == WEFT_MEM_CUDA ? "CUDA" : "HIP";
}

/* The bookkeeping's memory (what weft made for it goes with the comm). */
static void rma_release(struct wn_rma *r)
{
	if (!r)
		return;
	free(r->sent);
	free(r->seen);
	free(r->sem);
	free(r->rsem);
	for (int t = 0; t < WEFT_MEM_TYPE_COUNT; t++)
		free(r->conn[t]);
	free(r);
}

/* comm's one-sided bookkeeping, made on first use (local). NULL: no memory. */
static struct wn_rma *rma_get(struct ncclComm *comm)
{
	if (comm->rma)
		return comm->rma;
	int n = comm->nranks;
	struct wn_rma *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->nranks = n;
	r->sent = calloc(per_rank(n), sizeof(*r->sent));
	r->seen = calloc(per_rank(n), sizeof(*r->seen));
	r->sem = calloc(per_rank(n), sizeof(*r->sem));
	r->rsem = calloc(per_rank(n), sizeof(*r->rsem));
	for (int t = 0; t < WEFT_MEM_TYPE_COUNT; t++)
		r->conn[t] = calloc(per_rank(n), sizeof(*r->conn[t]));
	int ok = r->sent && r->seen && r->sem && r->rsem;
	for (int t = 0; t < WEFT_MEM_TYPE_COUNT; t++)
		ok = ok && r->conn[t];
	if (!ok) {
		rma_release(r);
		return NULL;
	}
	comm->rma = r;
	return r;
}

void wn_rma_free(struct ncclComm *comm)
{
	for (struct ncclWindow_vidmem *w = comm->windows, *next; w; w = next) {
		next = w->next;
		w->magic = 0;
		free(w->rmem);
		free(w->sizes);
		free(w);
	}
	comm->windows = NULL;
	rma_release(comm->rma);
	comm->rma = NULL;
}

/* ----------------------------------------------------------- CUDA glue */

/* Waits for the work queued on stream when the application has a CUDA
 * runtime: what the call reads was written there. 0 or a weft code. */
static int stream_sync(void *stream, const char *fn)
{
	typedef int (*sync_fn)(void *);
	if (!stream)
		return 0;
	sync_fn sync = (sync_fn)dlsym(RTLD_DEFAULT, "cudaStreamSynchronize");
	if (!sync)
		return 0; /* no CUDA in the process: the stream names no work */
	int err = sync(stream);
	if (err != 0) {
		WN_ERROR("%s: synchronizing the call's stream failed (CUDA error %d): weft runs one-sided calls on the "
			 "host after their stream, which a stream being captured into a graph cannot give",
			 fn, err);
		return -ENOTSUP;
	}
	return 0;
}

/* Copies n bytes within this rank's memory of type t. 0 or a weft code. */
static int local_copy(void *dst, const void *src, size_t n, enum weft_mem_type t, const char *fn)
{
	if (n == 0 || dst == src)
		return 0;
	if (t == WEFT_MEM_HOST) {
		memmove(dst, src, n);
		return 0;
	}
	typedef int (*copy_fn)(void *, const void *, size_t, int);
	copy_fn copy = (copy_fn)dlsym(RTLD_DEFAULT, "cudaMemcpy");
	int err = copy ? copy(dst, src, n, 4 /* cudaMemcpyDefault */) : -1;
	if (err != 0) {
		WN_ERROR("%s: copying %zu bytes of %s memory to this rank's own window failed (%s)", fn, n, mem_name(t),
			 copy ? "cudaMemcpy failed" : "no CUDA runtime in this process");
		return -WEFT_ERR_TRANSPORT;
	}
	return 0;
}

/* ----------------------------------------------------------- windows */

static struct ncclWindow_vidmem *win_of(struct ncclComm *comm, ncclWindow_t win)
{
	for (struct ncclWindow_vidmem *w = comm->windows; w; w = w->next)
		if (w == win)
			return w;
	return NULL;
}

/* A window handle of comm, or NULL with a logged reason. */
static struct ncclWindow_vidmem *check_win(struct ncclComm *comm, ncclWindow_t win, const char *fn, const char *what)
{
	if (!win) {
		WN_ERROR("%s: %s is NULL (what a refused ncclCommWindowRegister leaves)", fn, what);
		return NULL;
	}
	struct ncclWindow_vidmem *w = win_of(comm, win);
	if (!w || w->magic != WN_WIN_MAGIC) {
		WN_ERROR("%s: %s %p is not a window registered on comm %p (deregistered, or made on another comm)", fn,
			 what, (void *)win, (void *)comm);
		return NULL;
	}
	return w;
}

/* Agrees on the status of one step: 0 when every rank's is 0, else the first
 * failure (logged with the rank it happened on, where another). */
static int agree(struct ncclComm *comm, int mine, const char *fn, const char *step)
{
	int n = comm->nranks;
	int32_t m = mine, *all = calloc(per_rank(n), sizeof(*all));
	int rc = all ? weft_comm_allgather(comm->wc, &m, all, sizeof(m)) : -ENOMEM;
	if (rc != 0)
		WN_ERROR("%s: rank %d: agreeing on %s failed: %s", fn, comm->rank, step, weft_strerror(rc));
	for (int p = 0; rc == 0 && p < n; p++)
		if (all[p] != 0) {
			rc = all[p] < 0 && all[p] > -WEFT_ERR_LAST ? all[p] : -WEFT_ERR_PROTOCOL;
			if (p != comm->rank)
				WN_ERROR("%s: %s failed on rank %d: %s", fn, step, p, weft_strerror(rc));
		}
	free(all);
	return rc;
}

/* Connects every pair of ranks for memory of type t (and makes the
 * semaphores once, with the host connections). Collective: every rank of
 * comm calls it at the same point. Every rank goes through every peer even
 * after a failure, so that no peer waits for it; the ranks then agree on the
 * outcome, and a failure anywhere is a failure everywhere. 0 or a weft code. */
static int rma_setup(struct ncclComm *comm, struct wn_rma *r, enum weft_mem_type t, const char *fn)
{
	weft_comm_t *wc = comm->wc;
	int me = comm->rank, n = comm->nranks, first = 0;
	int need_sems = !r->sems;
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		int rc = weft_connect_mem(wc, p, NULL, t, &r->conn[t][p]);
		if (rc != 0 && !first) {
			first = rc;
			WN_ERROR("%s: rank %d cannot connect to rank %d for %s memory: %s", fn, me, p, mem_name(t),
				 weft_strerror(rc));
		}
		if (!need_sems)
			continue;
		rc = weft_sem_create(wc, &r->sem[p]);
		if (rc == 0)
			rc = weft_sem_exchange(r->sem[p], p, &r->rsem[p]);
		if (rc != 0 && !first) {
			first = rc;
			WN_ERROR("%s: rank %d cannot exchange semaphores with rank %d: %s", fn, me, p,
				 weft_strerror(rc));
		}
	}
	int rc = agree(comm, first, fn,
		       t == WEFT_MEM_HOST ? "connecting the ranks for host memory"
					  : "connecting the ranks for device memory");
	if (rc != 0) {
		/* What was made is closed everywhere alike; the next window tries again. */
		for (int p = 0; p < n; p++) {
			if (r->conn[t][p])
				weft_conn_close(r->conn[t][p]);
			r->conn[t][p] = NULL;
			if (need_sems) {
				weft_rsem_release(r->rsem[p]);
				weft_sem_destroy(r->sem[p]);
				r->rsem[p] = NULL;
				r->sem[p] = NULL;
			}
		}
		return rc;
	}
	r->ready[t] = 1;
	if (need_sems)
		r->sems = 1;
	return 0;
}

/* What each rank tells the others of its part of a window. */
struct win_hdr {
	int32_t status; /* 0, or the weft code of this rank's failure */
	int32_t type;   /* enum weft_mem_type */
	int32_t flags;
	int32_t pad;
	uint64_t size;
	uint64_t bloblen;
};

static void win_free(struct ncclWindow_vidmem *w)
{
	if (!w)
		return;
	weft_window_deregister(w->cw);
	for (int p = 0; w->rmem && p < w->nranks; p++)
		weft_rmem_release(w->rmem[p]);
	weft_mem_deregister(w->mem);
	w->magic = 0;
	free(w->rmem);
	free(w->sizes);
	free(w);
}

/* The collective registration. 0 and *out, or a weft code (logged) on every
 * rank alike: a rank that fails tells the others in the next exchange rather
 * than leave them waiting for it. */
static int win_register(struct ncclComm *comm, void *buff, size_t size, int flags, ncclWindow_t *out)
{
	static const char fn[] = "ncclCommWindowRegister";
	weft_comm_t *wc = comm->wc;
	int me = comm->rank, n = comm->nranks;
	struct wn_rma *r = rma_get(comm);
	struct win_hdr mine = {0}, *hdrs = calloc(per_rank(n), sizeof(*hdrs));
	struct ncclWindow_vidmem *w = calloc(1, sizeof(*w));
	unsigned char *blob = NULL, *blobs = NULL;
	if (w) {
		w->rmem = calloc(per_rank(n), sizeof(*w->rmem));
		w->sizes = calloc(per_rank(n), sizeof(*w->sizes));
	}
	if (!r || !hdrs || !w || !w->rmem || !w->sizes) {
		WN_ERROR("%s: rank %d: out of memory", fn, me);
		free(hdrs);
		win_free(w);
		return -ENOMEM;
	}
	w->magic = WN_WIN_MAGIC;
	w->comm = comm;
	w->ptr = buff;
	w->size = size;
	w->flags = flags;
	w->nranks = n;
	w->type = wn_mem_type(buff);
	size_t len = 0;
	int rc = weft_mem_register(wc, buff, size, w->type, &w->mem);
	if (rc != 0) {
		WN_ERROR("%s: rank %d: weft_mem_register of %zu bytes of %s memory failed: %s", fn, me, size,
			 mem_name(w->type), weft_strerror(rc));
	} else {
		rc = weft_mem_serialize(w->mem, NULL, &len);
		if (rc == 0 || rc == -ENOSPC) {
			blob = malloc(len ? len : 1);
			rc = blob ? weft_mem_serialize(w->mem, blob, &len) : -ENOMEM;
		}
		if (rc != 0)
			WN_ERROR("%s: rank %d: describing the window for its peers failed: %s", fn, me,
				 weft_strerror(rc));
	}
	mine = (struct win_hdr){
		.status = rc, .type = (int32_t)w->type, .flags = flags, .size = size, .bloblen = rc == 0 ? len : 0};
	rc = weft_comm_allgather(wc, &mine, hdrs, sizeof(mine));
	if (rc != 0) {
		WN_ERROR("%s: rank %d: exchanging window descriptions failed: %s", fn, me, weft_strerror(rc));
		goto fail;
	}
	uint64_t maxlen = 1;
	for (int p = 0; p < n; p++) {
		if (hdrs[p].status != 0) {
			rc = hdrs[p].status < 0 && hdrs[p].status > -WEFT_ERR_LAST ? hdrs[p].status
										   : -WEFT_ERR_PROTOCOL;
			if (p != me)
				WN_ERROR("%s: rank %d could not register its part of the window: %s", fn, p,
					 weft_strerror(rc));
			goto fail;
		}
		if (hdrs[p].type != hdrs[me].type) {
			WN_ERROR("%s: rank %d registers %s memory, rank %d %s memory: a window is of one memory type",
				 fn, p, mem_name((enum weft_mem_type)hdrs[p].type), me, mem_name(w->type));
			rc = -EINVAL;
			goto fail;
		}
		if (hdrs[p].bloblen > maxlen)
			maxlen = hdrs[p].bloblen;
	}
	/* The blobs, each padded to the longest. */
	unsigned char *pad = calloc(1, maxlen);
	blobs = calloc(per_rank(n), maxlen);
	if (!pad || !blobs) {
		free(pad);
		WN_ERROR("%s: rank %d: out of memory", fn, me);
		rc = -ENOMEM;
		goto fail;
	}
	memcpy(pad, blob, mine.bloblen);
	rc = weft_comm_allgather(wc, pad, blobs, maxlen);
	free(pad);
	if (rc != 0) {
		WN_ERROR("%s: rank %d: exchanging window descriptions failed: %s", fn, me, weft_strerror(rc));
		goto fail;
	}
	/* Connections for this memory type, once per comm; the host ones carry
	 * the signals. */
	if (!r->ready[WEFT_MEM_HOST] && (rc = rma_setup(comm, r, WEFT_MEM_HOST, fn)) != 0)
		goto fail;
	if (!r->ready[w->type] && (rc = rma_setup(comm, r, w->type, fn)) != 0)
		goto fail;
	int lrc = 0;
	for (int p = 0; p < n; p++) {
		w->sizes[p] = hdrs[p].size;
		if (p == me || lrc)
			continue;
		lrc = weft_mem_import(wc, p, blobs + (size_t)p * maxlen, hdrs[p].bloblen, &w->rmem[p]);
		if (lrc != 0)
			WN_ERROR("%s: rank %d: importing rank %d's part of the window failed: %s", fn, me, p,
				 weft_strerror(lrc));
	}
	if ((rc = agree(comm, lrc, fn, "importing the window")) != 0)
		goto fail;
	/* Collective and agreed by the core: a failure is every rank's. */
	if ((rc = weft_window_register(wc, buff, size, w->type, &w->cw)) != 0) {
		WN_ERROR("%s: rank %d: registering the window for collectives failed: %s", fn, me, weft_strerror(rc));
		goto fail;
	}
	free(hdrs);
	free(blob);
	free(blobs);
	w->next = comm->windows;
	comm->windows = w;
	*out = w;
	WN_INFO("%s: rank %d: window %p of %zu bytes of %s memory at %p (flags 0x%x)", fn, me, (void *)w, size,
		mem_name(w->type), buff, (unsigned)flags);
	return 0;

fail:
	free(hdrs);
	free(blob);
	free(blobs);
	win_free(w);
	return rc;
}

WN_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags)
{
	if (win)
		*win = NULL;
	struct wn_op o = {.kind = K_WIN_REGISTER,
			  .comm = comm,
			  .recvbuf = buff,
			  .count = size,
			  .win_out = win,
			  .flags = winFlags};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclCommWindowRegister);

WN_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	static const char fn[] = "ncclCommWindowDeregister";
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	struct ncclWindow_vidmem *w = check_win(comm, win, fn, "win");
	if (!w)
		return ncclInvalidArgument;
	/* Local, as NCCL's: the caller has made sure no call still uses it. */
	for (struct ncclWindow_vidmem **pp = &comm->windows; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	win_free(w);
	return ncclSuccess;
}
WN_ALIAS(ncclCommWindowDeregister);

WN_API ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr)
{
	static const char fn[] = "ncclWinGetUserPtr";
	if (outUserPtr)
		*outUserPtr = NULL;
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!outUserPtr) {
		WN_ERROR("%s: outUserPtr is NULL", fn);
		return ncclInvalidArgument;
	}
	struct ncclWindow_vidmem *w = check_win(comm, win, fn, "win");
	if (!w)
		return ncclInvalidArgument;
	*outUserPtr = w->ptr;
	return ncclSuccess;
}
WN_ALIAS(ncclWinGetUserPtr);

/* ------------------------------------------------------- one-sided calls */

/* NCCL 2.30's rule for sigIdx, ctx and flags: 0 for now. */
static ncclResult_t check_zero(const char *fn, int sigIdx, int ctx, unsigned flags)
{
	if (sigIdx != 0 || ctx != 0 || flags != 0) {
		WN_ERROR("%s: %s is %d; NCCL 2.30's API has only 0", fn,
			 sigIdx ? "sigIdx"
			 : ctx  ? "ctx"
				: "flags",
			 sigIdx ? sigIdx
			 : ctx  ? ctx
				: (int)flags);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}

static ncclResult_t check_peer(struct ncclComm *comm, int peer, const char *fn)
{
	if (peer < 0 || peer >= comm->nranks) {
		WN_ERROR("%s: peer %d is outside the communicator's %d ranks", fn, peer, comm->nranks);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}

/* Signals to or from another rank need the semaphores of the first window:
 * 0, or -ENOSYS (logged). */
static int setup_ready(struct ncclComm *comm, int peer, const char *fn)
{
	if (peer == comm->rank || (comm->rma && comm->rma->sems))
		return 0;
	WN_ERROR("%s: no window was registered on comm %p yet; weft sets up one-sided calls between ranks "
		 "collectively in the first ncclCommWindowRegister",
		 fn, (void *)comm);
	return -ENOSYS;
}

/* setup_ready when the call is made; in a group, a registration queued
 * before it may set things up, so it is checked when the call runs. */
static ncclResult_t check_setup(struct ncclComm *comm, int peer, const char *fn)
{
	if (wn_group_depth() > 0)
		return ncclSuccess;
	return setup_ready(comm, peer, fn) ? ncclInvalidUsage : ncclSuccess;
}

ncclResult_t wn_rma_check(struct wn_op *o)
{
	struct ncclComm *comm = o->comm;
	ncclResult_t r;
	switch (o->kind) {
	case K_WIN_REGISTER: {
		static const char fn[] = "ncclCommWindowRegister";
		if (!o->win_out || !o->recvbuf || o->count == 0) {
			WN_ERROR("%s: %s", fn,
				 !o->win_out   ? "win is NULL"
				 : !o->recvbuf ? "buff is NULL"
					       : "size is 0");
			return ncclInvalidArgument;
		}
		int known = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING;
		if (o->flags & ~known) {
			WN_ERROR("%s: winFlags 0x%x has bits NCCL 2.30 does not define (it knows 0x%x)", fn,
				 (unsigned)o->flags, (unsigned)known);
			return ncclInvalidArgument;
		}
		return ncclSuccess;
	}
	case K_PUT_SIGNAL: {
		static const char fn[] = "ncclPutSignal";
		if ((r = check_peer(comm, o->root, fn)) != ncclSuccess ||
		    (r = check_setup(comm, o->root, fn)) != ncclSuccess)
			return r;
		if (wn_map_type(o->ntype, &o->type) != 0) {
			WN_ERROR("%s: datatype %d is not one of NCCL 2.30's", fn, (int)o->ntype);
			return ncclInvalidArgument;
		}
		struct ncclWindow_vidmem *w = check_win(comm, o->win, fn, "peerWin");
		if (!w)
			return ncclInvalidArgument;
		size_t es = weft_datatype_size(o->type);
		if (o->count > SIZE_MAX / es) {
			WN_ERROR("%s: %zu elements of %zu bytes overflow", fn, o->count, es);
			return ncclInvalidArgument;
		}
		size_t bytes = o->count * es;
		uint64_t room = w->sizes[o->root];
		if (o->offset > room || bytes > room - o->offset) {
			WN_ERROR("%s: %zu bytes at offset %zu run past rank %d's part of the window (%llu bytes)", fn,
				 bytes, o->offset, o->root, (unsigned long long)room);
			return ncclInvalidArgument;
		}
		if (bytes && !o->sendbuf) {
			WN_ERROR("%s: localbuff is NULL", fn);
			return ncclInvalidArgument;
		}
		return ncclSuccess;
	}
	case K_SIGNAL: {
		static const char fn[] = "ncclSignal";
		if ((r = check_peer(comm, o->root, fn)) != ncclSuccess)
			return r;
		return check_setup(comm, o->root, fn);
	}
	case K_WAIT_SIGNAL: {
		static const char fn[] = "ncclWaitSignal";
		if (o->ndesc <= 0 || !o->descs) {
			WN_ERROR("%s: %s", fn, !o->descs ? "signalDescs is NULL" : "nDesc must be at least 1");
			return ncclInvalidArgument;
		}
		for (int i = 0; i < o->ndesc; i++) {
			const ncclWaitSignalDesc_t *d = &o->descs[i];
			if (d->opCnt <= 0) {
				WN_ERROR("%s: descriptor %d asks for %d signals; it must be at least 1", fn, i,
					 d->opCnt);
				return ncclInvalidArgument;
			}
			if ((r = check_zero(fn, d->sigIdx, d->ctx, 0)) != ncclSuccess ||
			    (r = check_peer(comm, d->peer, fn)) != ncclSuccess ||
			    (r = check_setup(comm, d->peer, fn)) != ncclSuccess)
				return r;
		}
		return ncclSuccess;
	}
	default: return ncclInvalidArgument;
	}
}

/* The local region a put reads: the window of comm holding [buf, buf+len),
 * else buf registered for this call (*tmp, to deregister). 0 or a weft code. */
static int source_mem(struct ncclComm *comm, const void *buf, size_t len, enum weft_mem_type t, weft_mem_t **mem,
		      uint64_t *off, weft_mem_t **tmp, const char *fn)
{
	*tmp = NULL;
	for (struct ncclWindow_vidmem *w = comm->windows; w; w = w->next) {
		const char *b = w->ptr, *p = buf;
		if (w->type == t && p >= b && (size_t)(p - b) <= w->size && len <= w->size - (size_t)(p - b)) {
			*mem = w->mem;
			*off = (uint64_t)(p - b);
			return 0;
		}
	}
	enum weft_mem_type bt = wn_mem_type(buf);
	if (bt != t) {
		WN_ERROR("%s: localbuff is %s memory and the window %s memory", fn, mem_name(bt), mem_name(t));
		return -EINVAL;
	}
	/* NCCL wants localbuff in a window; weft registers it for the call. */
	int rc = weft_mem_register(comm->wc, (void *)buf, len, t, tmp);
	if (rc != 0) {
		WN_ERROR("%s: registering localbuff (%zu bytes of %s memory) failed: %s", fn, len, mem_name(t),
			 weft_strerror(rc));
		return rc;
	}
	*mem = *tmp;
	*off = 0;
	return 0;
}

/* Raises peer's semaphore for this rank by one, through the host connection,
 * and waits until it is raised there. */
static int signal_peer(struct ncclComm *comm, struct wn_rma *r, int peer, const char *fn)
{
	if (peer == comm->rank) {
		r->sent[peer]++;
		return 0;
	}
	weft_conn_t *c = r->conn[WEFT_MEM_HOST][peer];
	int rc = weft_signal(c, r->rsem[peer], r->sent[peer] + 1);
	if (rc == 0)
		rc = weft_flush(c);
	if (rc != 0) {
		WN_ERROR("%s: rank %d: signalling rank %d failed: %s", fn, comm->rank, peer, weft_strerror(rc));
		return rc;
	}
	r->sent[peer]++;
	return 0;
}

static int put_signal(const struct wn_op *o, struct wn_rma *r)
{
	static const char fn[] = "ncclPutSignal";
	struct ncclComm *comm = o->comm;
	struct ncclWindow_vidmem *w = o->win;
	int peer = o->root;
	size_t bytes = o->count * weft_datatype_size(o->type);
	int rc;
	if (peer == comm->rank) {
		rc = local_copy((char *)w->ptr + o->offset, o->sendbuf, bytes, w->type, fn);
		return rc ? rc : signal_peer(comm, r, peer, fn);
	}
	if (bytes) {
		weft_mem_t *src = NULL, *tmp = NULL;
		uint64_t soff = 0;
		if ((rc = source_mem(comm, o->sendbuf, bytes, w->type, &src, &soff, &tmp, fn)) != 0)
			return rc;
		weft_conn_t *c = r->conn[w->type][peer];
		rc = weft_put(c, w->rmem[peer], o->offset, src, soff, bytes);
		/* Done at the peer (and the source free) before the signal says so. */
		if (rc == 0)
			rc = weft_flush(c);
		if (rc != 0)
			WN_ERROR("%s: rank %d: writing %zu bytes to rank %d's window failed: %s", fn, comm->rank, bytes,
				 peer, weft_strerror(rc));
		weft_mem_deregister(tmp);
		if (rc != 0)
			return rc;
	}
	return signal_peer(comm, r, peer, fn);
}

static int wait_signal(const struct wn_op *o, struct wn_rma *r)
{
	static const char fn[] = "ncclWaitSignal";
	struct ncclComm *comm = o->comm;
	int me = comm->rank;
	/* What this rank sent itself is all it will ever get from itself: a
	 * wait for more would never end. Checked before anything is waited. */
	uint64_t self = r->seen[me];
	for (int i = 0; i < o->ndesc; i++)
		if (o->descs[i].peer == me)
			self += (uint64_t)o->descs[i].opCnt;
	if (self > r->sent[me]) {
		WN_ERROR("%s: rank %d waits for %llu signals from itself but has sent itself %llu: it would wait "
			 "forever",
			 fn, me, (unsigned long long)(self - r->seen[me]),
			 (unsigned long long)(r->sent[me] - r->seen[me]));
		return -EPERM;
	}
	for (int i = 0; i < o->ndesc; i++) {
		int p = o->descs[i].peer;
		uint64_t want = r->seen[p] + (uint64_t)o->descs[i].opCnt;
		if (p != me) {
			int rc = weft_sem_wait(r->sem[p], want);
			if (rc != 0) {
				WN_ERROR("%s: rank %d: waiting for rank %d's signals failed: %s", fn, me, p,
					 weft_strerror(rc));
				return rc;
			}
		}
		r->seen[p] = want;
	}
	return 0;
}

int wn_rma_issue(const struct wn_op *o)
{
	struct ncclComm *comm = o->comm;
	struct wn_rma *r = rma_get(comm);
	if (!r) {
		WN_ERROR("ncclPutSignal/ncclSignal/ncclWaitSignal: out of memory");
		return -ENOMEM;
	}
	int rc;
	switch (o->kind) {
	case K_WIN_REGISTER: {
		ncclWindow_t w = NULL;
		rc = win_register(comm, o->recvbuf, o->count, o->flags, &w);
		*o->win_out = w;
		return rc;
	}
	case K_PUT_SIGNAL:
		if ((rc = stream_sync(o->stream, "ncclPutSignal")) != 0)
			return rc;
		/* The window may have been deregistered while the call sat in a group. */
		if (!check_win(comm, o->win, "ncclPutSignal", "peerWin"))
			return -EINVAL;
		return put_signal(o, r);
	case K_SIGNAL:
		if ((rc = setup_ready(comm, o->root, "ncclSignal")) != 0 ||
		    (rc = stream_sync(o->stream, "ncclSignal")) != 0)
			return rc;
		return signal_peer(comm, r, o->root, "ncclSignal");
	case K_WAIT_SIGNAL:
		for (int i = 0; i < o->ndesc; i++)
			if ((rc = setup_ready(comm, o->descs[i].peer, "ncclWaitSignal")) != 0)
				return rc;
		if ((rc = stream_sync(o->stream, "ncclWaitSignal")) != 0)
			return rc;
		return wait_signal(o, r);
	default: return -EINVAL;
	}
}

WN_API ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
				  ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags,
				  ncclComm_t comm, cudaStream_t stream)
{
	ncclResult_t r = check_zero("ncclPutSignal", sigIdx, ctx, flags);
	if (r != ncclSuccess)
		return r;
	struct wn_op o = {.kind = K_PUT_SIGNAL,
			  .comm = comm,
			  .sendbuf = localbuff,
			  .count = count,
			  .ntype = datatype,
			  .root = peer,
			  .win = peerWin,
			  .offset = peerWinOffset,
			  .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclPutSignal);

WN_API ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream)
{
	ncclResult_t r = check_zero("ncclSignal", sigIdx, ctx, flags);
	if (r != ncclSuccess)
		return r;
	struct wn_op o = {.kind = K_SIGNAL, .comm = comm, .root = peer, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclSignal);

WN_API ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream)
{
	struct wn_op o = {.kind = K_WAIT_SIGNAL, .comm = comm, .descs = signalDescs, .ndesc = nDesc, .stream = stream};
	return wn_submit(&o, 0);
}
WN_ALIAS(ncclWaitSignal);
