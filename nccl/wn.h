/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl's internal header: the communicator behind ncclComm_t, logging,
 * the mapping of weft's codes, types and operations to NCCL's, groups, and the
 * optional fallback to a real libnccl. */
#ifndef WEFT_NCCL_WN_H
#define WEFT_NCCL_WN_H

#include <pthread.h>

#include <weft/weft.h>

#include "nccl.h"

/* Exported names: everything else in this library is hidden (version script
 * and -fvisibility=hidden). */
#define WN_API __attribute__((visibility("default")))
/* Exports pncclX as a second name of ncclX. */
#define WN_ALIAS(name) \
	extern __typeof__(name) p##name __attribute__((alias(#name), visibility("default")))

#define WN_COMM_MAGIC 0x77656674u /* "weft" */

/* One operation made by ncclRedOpCreatePreMulSum: the value handed out is
 * ncclNumOps + its index in the comm's table. */
struct wn_premul {
	int used;
	ncclDataType_t type;
	ncclScalarResidence_t residence;
	unsigned char host[8]; /* ncclScalarHostImmediate: the value, read at creation */
	const void *dev;       /* ncclScalarDevice: read when each call runs */
};

/* Where a comm's initialization stands (state, under state_lock). */
enum wn_state {
	WN_READY = 0, /* wc is set (NULL again after ncclCommFinalize) */
	WN_QUEUED,    /* its init waits for the end of the group it was called in */
	WN_INIT,      /* a thread of this library makes its weft comm (non-blocking) */
	WN_FAILED,    /* the init failed: init_rc and why say how */
};

/* What ncclCommGetUniqueId made on a comm for ncclCommGrow. */
enum wn_grow { WN_GROW_NONE = 0, WN_GROW_ISSUED, WN_GROW_USED };

struct ncclComm {
	unsigned magic;     /* WN_COMM_MAGIC while alive: catches stale and foreign handles */
	weft_comm_t *wc;    /* NULL after ncclCommFinalize; written under state_lock while refs > 0 */
	int rank;
	int nranks;
	int device;         /* CUDA device recorded at init, -1 for none */
	int blocking;
	char name[64];      /* config->commName, for log lines */
	void *shadow;       /* the real NCCL's communicator (fallback), or NULL */
	pthread_mutex_t shadow_lock;
	int init_rc;        /* result of a failed grouped or non-blocking init, for ncclCommGetAsyncError */
	struct wn_clique *clique; /* ranks of this process initialized in one group, or NULL */
	int released;       /* destroyed by the application, waiting for its clique */
	int clique_total;   /* length of clique->members */
	pthread_mutex_t op_lock; /* guards premul and npremul */
	struct wn_premul *premul;
	int npremul;
	/* Non-blocking initialization (async.c). Threads of this library that
	 * use the struct in the background (an init, a split from it) or wait
	 * for it hold refs; ncclCommAbort meanwhile only marks it abandoned, and
	 * the last to leave tears it down. */
	pthread_mutex_t state_lock;
	pthread_cond_t state_cv; /* broadcast when state or busy change, or on abandon */
	int state;               /* enum wn_state */
	int refs;
	int busy;                /* splits from this comm running in the background */
	int abandoned;
	char why[256];           /* the failed init's reason, for ncclGetLastError */
	/* ncclCommGetUniqueId / ncclCommGrow (reshape.c); one thread per comm. */
	int grow;                /* enum wn_grow */
	struct weft_unique_id grow_id;
	int revoked;             /* ncclCommRevoke: wc is aborted, collectives are refused */
	/* Windows and one-sided calls (rma.c); one thread per comm. */
	struct ncclWindow_vidmem *windows; /* registered on this comm, newest first */
	struct wn_rma *rma;      /* signal counts, connections and semaphores; NULL until first needed */
};

/* A call queued in a group or issued now (coll.c, rma.c). */
enum wn_kind { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCE_SCATTER, K_ALLTOALL, K_GATHER, K_SCATTER,
	       K_SEND, K_RECV, K_WIN_REGISTER, K_PUT_SIGNAL, K_SIGNAL, K_WAIT_SIGNAL };

struct wn_op {
	enum wn_kind kind;
	struct ncclComm *comm;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	ncclDataType_t ntype;
	ncclRedOp_t nop;
	enum weft_datatype type;
	enum weft_redop op;
	int root; /* root, or peer for send/recv and the one-sided calls */
	void *stream;
	int premul;           /* nop is a pre-multiplied sum of comm's: */
	struct wn_premul pm;  /* its copy, taken at the call */
	/* One-sided calls and windows (rma.c). */
	struct ncclWindow_vidmem *win; /* ncclPutSignal's peerWin */
	size_t offset;                 /* its peerWinOffset */
	ncclWindow_t *win_out;         /* ncclCommWindowRegister's out-pointer, written when it runs */
	int flags;                     /* its winFlags */
	ncclWaitSignalDesc_t *descs;   /* ncclWaitSignal's; a copy the group frees when queued */
	int ndesc;
};
/* Checks a call on its comm, then issues it now or queues it in the calling
 * thread's group: what every collective, point-to-point and one-sided call
 * does (coll.c). reduces: the call takes a reduction operation. */
ncclResult_t wn_submit(struct wn_op *o, int reduces);

/* Windows and one-sided calls (rma.c). */
/* The checks of a one-sided call or a window registration beyond the comm's
 * (logged), done when it is called, also in a group. */
ncclResult_t wn_rma_check(struct wn_op *o);
/* Runs a registration or a one-sided call: 0 or a weft code (logged). */
int wn_rma_issue(const struct wn_op *o);
/* Frees comm's window and one-sided bookkeeping, without calling weft: its
 * weft comm, which owned what weft made for them, is gone already. */
void wn_rma_free(struct ncclComm *comm);

/* A caller's ncclConfig_t of any NCCL layout since 2.14 into *out, the
 * current layout: the bytes its `size` covers, newer fields than its
 * `version` and those it lacks set as NCCL_CONFIG_INITIALIZER sets them,
 * trailing fields this library does not know ignored. config NULL gives
 * the initializer's. ncclSuccess, or ncclInvalidArgument (logged with fn,
 * unless fn is NULL). */
ncclResult_t wn_config_read(const ncclConfig_t *config, ncclConfig_t *out, const char *fn);

/* The pre-multiplied sum `op` names on comm, copied into *out (a queued call
 * keeps it after the application destroys the operation): 1 when op is one
 * that comm made and has not destroyed, else 0. */
int wn_premul_get(struct ncclComm *comm, ncclRedOp_t op, struct wn_premul *out);

/* Ranks one thread initialized together (ncclCommInitAll, or several inits in
 * one group). weft's destroy waits for every connected peer to close, so the
 * same thread destroying them one after the other would wait forever: their
 * weft comms are destroyed together, on threads, when the last is released. */
struct wn_clique {
	pthread_mutex_t lock;
	int n;        /* members not yet aborted */
	int released; /* of which destroyed or finalized by the application */
	struct ncclComm *members[];
};
/* Makes a clique of comms (n >= 2). -ENOMEM leaves them independent. */
int wn_clique_make(struct ncclComm **comms, int n);

/* Logs and remembers the message for ncclGetLastError. level: 0 error, 1 warn,
 * 2 info, 3 debug; the threshold comes from WEFT_NCCL_LOG / NCCL_DEBUG. */
void wn_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define WN_ERROR(...) wn_log(0, __VA_ARGS__)
#define WN_WARN(...) wn_log(1, __VA_ARGS__)
#define WN_INFO(...) wn_log(2, __VA_ARGS__)
void wn_log_reset(void);
const char *wn_last_error(void);
/* How many errors the calling thread has logged: a caller that sees it grow
 * over a call knows the reason is logged already. */
unsigned long wn_error_count(void);

/* What a refused ncclRedOpCreatePreMulSum writes into *op: a value no
 * collective accepts, so that a caller who ignored the refusal gets an error
 * at its next call instead of a plain sum (the variable often starts at 0,
 * ncclSum). Never forwarded to a fallback NCCL. */
#define WN_OP_REFUSED ((ncclRedOp_t)ncclMaxRedOp)

/* weft's return code as an ncclResult_t (0 -> ncclSuccess). */
ncclResult_t wn_result(int rc);
/* A usable comm, or ncclInvalidArgument/ncclInvalidUsage with a message.
 * Waits while a non-blocking init of comm, or a split from it, runs. */
ncclResult_t wn_check_comm(struct ncclComm *comm, const char *fn);
int wn_map_type(ncclDataType_t t, enum weft_datatype *out);
int wn_map_op(ncclRedOp_t op, enum weft_redop *out);

/* Creates the comm object of a rank; the weft comm is made by the caller. */
struct ncclComm *wn_comm_new(int rank, int nranks, const ncclConfig_t *config, int device);
void wn_comm_free(struct ncclComm *comm);
/* What ncclCommAbort does to a comm no background thread uses: its shadow,
 * its weft comm (aborted first, so nothing waits for peers), its clique, the
 * struct. */
void wn_comm_teardown(struct ncclComm *comm);
/* Checks a config as every init, split, shrink and grow does (logged). */
ncclResult_t wn_check_config(const ncclConfig_t *config, const char *fn);
/* Makes comm's weft comm from id, on comm's device, into *wc: 0 or a weft
 * code, logged with fn. Does not touch comm->wc. */
int wn_comm_make(struct ncclComm *comm, const struct weft_unique_id *id, const char *fn, weft_comm_t **wc);
/* ncclCommInitRankConfig's body: checks, creates the comm, and connects it
 * now, at the group's end, or on a thread (config->blocking == 0). *wrc: the
 * weft code of a failed connection, else 0. */
ncclResult_t wn_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank, const ncclConfig_t *config,
			  int device, const char *fn, int *wrc);
/* Sets the calling thread's last error (ncclGetLastError) without logging:
 * a reason found and logged on another thread, handed over. */
void wn_set_last_error(const char *msg);

/* Non-blocking communicators (async.c). */
/* Waits while comm's init or a split from it runs in the background. 0, or
 * ncclInvalidArgument (logged) when comm was aborted meanwhile. */
ncclResult_t wn_comm_wait(struct ncclComm *comm, const char *fn);
/* Starts comm's init on a thread; returns ncclInProgress (or the init's own
 * result when no thread could be started and it ran here). */
ncclResult_t wn_init_start(struct ncclComm *comm, const struct weft_unique_id *id, const char *fn);
/* A background thread begins using comm (holds a ref, state WN_INIT when
 * init is set); wn_comm_publish or wn_comm_unref ends it. */
void wn_comm_hold(struct ncclComm *comm, int init);
/* Ends a background init: comm gets wc (0 = rc) or the failure, waiters
 * wake; an abandoned comm is torn down instead, once its last user left. */
void wn_comm_publish(struct ncclComm *comm, weft_comm_t *wc, int rc);
/* Drops a ref; the last one of an abandoned comm tears it down. */
void wn_comm_unref(struct ncclComm *comm);
/* ncclCommAbort of a comm a background thread uses: marks it abandoned,
 * aborts its weft comm and wakes its waiters. 1 when it did (the struct is
 * the background's to free), 0 when no background thread holds it. */
int wn_comm_abandon(struct ncclComm *comm);
/* Runs a non-blocking ncclCommSplit: *newcomm is made (rank unknown until
 * the split completes) and ncclInProgress returned; ncclSuccess for
 * NCCL_SPLIT_NOCOLOR (*newcomm NULL). wcolor is weft's color. */
ncclResult_t wn_split_start(struct ncclComm *parent, int wcolor, int key, const ncclConfig_t *config,
			    ncclComm_t *newcomm);
/* The CUDA device the calling thread has current: WEFT_NCCL_DEVICE, else the
 * application's CUDA runtime (when loaded), else -1. */
int wn_current_device(void);
/* Makes dev the calling thread's current CUDA device, as NCCL does inside
 * each call on a comm, so one thread can drive the ranks of several GPUs.
 * Returns the device to restore with wn_device_leave, or -1 when nothing
 * changed (dev < 0, no CUDA runtime in the process, or dev already current). */
int wn_device_enter(int dev);
void wn_device_leave(int prev);

/* The memory type of a buffer, from the application's CUDA runtime when it
 * has one loaded (host otherwise). */
enum weft_mem_type wn_mem_type(const void *buf);
/* The CUDA runtime's name of error err, or its number (api.c). */
const char *wn_cuda_error_name(int err);
/* Copies n bytes of device memory to dst on stream and waits for them,
 * through the application's CUDA runtime: 0, or a weft code (logged). */
int wn_copy_to_host(void *dst, const void *src, size_t n, void *stream);

/* Group nesting of the calling thread (coll.c). */
int wn_group_depth(void);
/* Queues a communicator initialization for the group's end (coll.c). */
ncclResult_t wn_group_add_init(struct ncclComm *comm, const struct weft_unique_id *id);

/* Fallback (fallback.c). The real library's function `name`, loaded on first
 * use; NULL (and a logged reason naming `why`) when it cannot be used. */
void *wn_fallback_sym(const char *name, const char *why);
/* The real NCCL communicator shadowing comm, made on first use (collective:
 * every rank must reach this call). NULL on failure, logged. */
void *wn_fallback_shadow(struct ncclComm *comm);
void wn_fallback_shadow_destroy(struct ncclComm *comm, int abort);

#endif
