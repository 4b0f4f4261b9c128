/* SPDX-License-Identifier: Apache-2.0 */
/* weft: the public API of the core library (libweft.so).
 * Communicators, the primitive interface (registered memory, connections,
 * one-sided put, 64-bit semaphores, flush, port channels), errors, version. */
#ifndef WEFT_WEFT_H
#define WEFT_WEFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define WEFT_API __attribute__((visibility("default")))
#else
#define WEFT_API
#endif

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
/* One integer that orders versions: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define WEFT_VERSION_CODE (WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

/* ------------------------------------------------------------------ errors
 * Every function returns 0 on success or a negative code: a negative errno
 * (-EINVAL, -ENOMEM, -ETIMEDOUT, -ECONNRESET, -ENOSYS, -ENOTSUP, ...) or the
 * negation of one of weft's own codes below. weft_strerror() names both. */
enum weft_error {
	WEFT_ERR_FIRST = 256,
	WEFT_ERR_PLUGIN = 256,    /* a plugin could not be loaded, or a required one is missing */
	WEFT_ERR_ABI = 257,       /* a plugin speaks another ABI major */
	WEFT_ERR_CONFIG = 258,    /* the configuration file or a parameter value is invalid */
	WEFT_ERR_PEER = 259,      /* a peer died or broke its connection */
	WEFT_ERR_ABORTED = 260,   /* the communicator was aborted */
	WEFT_ERR_PROTOCOL = 261,  /* a peer sent a malformed or unexpected message */
	WEFT_ERR_AUTH = 262,      /* a peer did not prove it holds the job's secret */
	WEFT_ERR_TRANSPORT = 263, /* the transport reported a failure (its message is in the log) */
	WEFT_ERR_NO_DEVICE = 264, /* no device of the needed kind is present */
	WEFT_ERR_MISMATCH = 265,  /* ranks disagree (configuration, plugin set, versions) */
	WEFT_ERR_LAST
};

/* Returns a static, human-readable name for any code weft returns (0 included).
 * Thread safety: any thread. Blocking: no. */
WEFT_API const char *weft_strerror(int err);

/* The message of the last error weft logged on the calling thread (what its
 * last failing call said, with the module that said it; a call on a
 * communicator that failed for a cause another thread found leaves its own
 * name, rank and error instead of an older message), copied into buf,
 * truncated to len - 1 bytes and NUL-terminated. Returns the message's full
 * length, 0 when this thread has had no error. buf may be NULL with len 0.
 * Thread safety: any thread; each thread has its own. Blocking: no. */
WEFT_API size_t weft_last_error(char *buf, size_t len);

/* Returns WEFT_VERSION_CODE of the library actually loaded, which may differ
 * from the header the caller was compiled against. Thread safety: any thread. */
WEFT_API int weft_get_version(void);

/* --------------------------------------------------------------- handles */
/* Communicator handles are checked on entry to every call that takes one,
 * before anything is read through them:
 * - a handle that is not a live communicator (destroyed already, twice, or
 *   never made) gets -EINVAL, deterministically, from every such call; a
 *   later communicator may reuse a destroyed one's address, as with malloc;
 * - calls on one communicator do not overlap: a thread entering a call while
 *   another thread is inside one on the same communicator gets -EBUSY (a
 *   call is not made; try again once the other returned). weft_comm_abort,
 *   weft_comm_rank, weft_comm_size and weft_comm_status are exempt: any thread
 *   may call them at any time. */
typedef struct weft_comm weft_comm_t; /* a communicator: a group of ranks that met through the bootstrap */
typedef struct weft_mem weft_mem_t;   /* a local memory region registered with every transport of a comm */
typedef struct weft_rmem weft_rmem_t; /* a peer's registered region, imported from its serialized blob */
typedef struct weft_conn weft_conn_t; /* a connection to one peer through one transport */
typedef struct weft_sem weft_sem_t;   /* a local semaphore: a 64-bit token that peers raise */
typedef struct weft_rsem weft_rsem_t; /* a peer's semaphore, imported, that this rank can signal */
typedef struct weft_port weft_port_t; /* a port channel: a trigger FIFO drained by a CPU proxy thread */

enum weft_mem_type {
	WEFT_MEM_HOST = 0, /* ordinary host memory */
	WEFT_MEM_CUDA = 1, /* CUDA device memory */
	WEFT_MEM_HIP = 2,  /* HIP device memory */
	WEFT_MEM_TYPE_COUNT
};

/* ---------------------------------------------------------- communicators */
#define WEFT_UNIQUE_ID_BYTES 128
/* Created by one rank (weft_get_unique_id) and handed to the others out of band.
 * It holds the root's address and the job's random secret: treat it as a
 * password. Same size as NCCL's ncclUniqueId. */
struct weft_unique_id {
	unsigned char internal[WEFT_UNIQUE_ID_BYTES];
};

/* Starts a bootstrap root in the calling process and describes it in *id.
 * One id serves one rendezvous: once every rank has its peer table, the root
 * answers any rank that comes with the same id "the rendezvous for this id is
 * over" for WEFT_CORE_BOOTSTRAP_TIMEOUT, then ends (at once when a communicator
 * of this process made with the id is destroyed). Make a new id per communicator.
 * Errors: -EADDRNOTAVAIL (no usable interface), -errno of socket calls.
 * Thread safety: any thread. Blocking: no. */
WEFT_API int weft_get_unique_id(struct weft_unique_id *id);

/* Creates a communicator of nranks ranks; this is rank `rank`. Every rank calls it
 * with the same id. When id is NULL the root comes from WEFT_CORE_BOOTSTRAP_ROOT
 * (host:port, rank 0 listens there) and the secret from WEFT_CORE_BOOTSTRAP_SECRET.
 * Returns -ETIMEDOUT when not every rank arrives within WEFT_CORE_BOOTSTRAP_TIMEOUT,
 * -EALREADY when the id's rendezvous is over (the id was used already).
 * On success *comm is owned by the caller (weft_comm_destroy).
 * Thread safety: any thread; a comm is then used by one thread at a time, except
 * weft_comm_abort. Blocking: yes (until all ranks arrive). */
WEFT_API int weft_comm_create(const struct weft_unique_id *id, int nranks, int rank, weft_comm_t **comm);

/* As weft_comm_create with id NULL, taking rank and size from the launcher's
 * environment (Open MPI, Slurm, torchrun; see docs/launching.md).
 * Errors: -ENOENT when no launcher variables are set. */
WEFT_API int weft_comm_create_from_env(weft_comm_t **comm);

/* Splits comm: the ranks that pass the same color form a new communicator,
 * ranked by key, then by their rank in comm. A rank passing
 * WEFT_SPLIT_NOCOLOR takes part but gets *newcomm NULL. Every rank of comm
 * calls it; the new comm meets through its own rendezvous (its first rank's
 * id, handed over comm's bootstrap) and lives on when comm is destroyed.
 * Errors: -EINVAL (a negative color other than WEFT_SPLIT_NOCOLOR), those of
 * weft_comm_create, and comm's own when it is broken.
 * Thread safety: one thread per comm. Blocking: yes, until every rank of comm
 * called it and the new comm is made. */
#define WEFT_SPLIT_NOCOLOR (-1)
WEFT_API int weft_comm_split(weft_comm_t *comm, int color, int key, weft_comm_t **newcomm);

/* Makes a new communicator of comm's ranks less the nexclude listed in
 * exclude, in comm's order; also after a rank of comm died. Only the ranks
 * that remain call it. They meet point to point over comm's bootstrap links
 * among themselves, never through a collective of comm: each tells every
 * other rank its list, the lists must be the same, and the first remaining
 * rank hands the others the id of a new rendezvous. WEFT_SHRINK_ABORT aborts
 * comm first (weft_comm_abort: calls pending on it return); without it a
 * healthy comm stays usable. The new comm lives on when comm is destroyed.
 * Errors: -EINVAL (a listed rank out of range, listed twice or the caller's
 * own, unknown flags, remaining ranks whose lists differ), -WEFT_ERR_PEER (a
 * rank the list keeps died or left), those of weft_comm_create.
 * Thread safety: one thread per comm. Blocking: yes, until every remaining
 * rank called it and the new comm is made; a rank the list keeps that is
 * alive but never calls it is waited for until it leaves. */
#define WEFT_SHRINK_ABORT 0x1
WEFT_API int weft_comm_shrink(weft_comm_t *comm, const int *exclude, int nexclude, int flags, weft_comm_t **newcomm);

/* Destroys a communicator and everything created from it. Accepts NULL.
 * Each connection is closed on both sides: destroy waits until every connected
 * peer has flushed its side too (closed its connection, destroyed its comm,
 * died or left), so no data in flight toward this rank is lost. A dead peer is
 * never awaited beyond the peer timeout; a live peer that never closes is.
 * Thread safety: one thread per comm. Blocking: yes. */
WEFT_API int weft_comm_destroy(weft_comm_t *comm);

/* Makes every pending and later call on comm return -WEFT_ERR_ABORTED.
 * Thread safety: any thread, also while another thread is inside a call on comm.
 * Blocking: no. */
WEFT_API int weft_comm_abort(weft_comm_t *comm);

WEFT_API int weft_comm_rank(const weft_comm_t *comm);
WEFT_API int weft_comm_size(const weft_comm_t *comm);

/* Returns 0 while the communicator is healthy, else the error that broke it
 * (-WEFT_ERR_PEER, -WEFT_ERR_ABORTED, ...). Thread safety: any thread. */
WEFT_API int weft_comm_status(const weft_comm_t *comm);

/* Out-of-band helpers over the bootstrap: small control messages, not data paths.
 * Tags from 0xFFFF0000 up are the core's own: send/recv refuse them (-EINVAL).
 * Thread safety: one thread per comm. Blocking: yes, until done or a peer fails. */
WEFT_API int weft_comm_barrier(weft_comm_t *comm);
WEFT_API int weft_comm_allgather(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each);
WEFT_API int weft_comm_send(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len);
WEFT_API int weft_comm_recv(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len);

/* ----------------------------------------------------------------- memory */
/* Registers [ptr, ptr+len) with every transport the communicator has opened.
 * The memory stays owned by the caller and must outlive the registration.
 * Errors: -EINVAL (NULL ptr with len > 0, unknown type), -ENOTSUP (no transport
 * reaches this memory type), -WEFT_ERR_TRANSPORT. Thread safety: one thread per comm. */
WEFT_API int weft_mem_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type,
			       weft_mem_t **mem);
/* Accepts NULL. The region must not be the target or source of unflushed work. */
WEFT_API int weft_mem_deregister(weft_mem_t *mem);

/* Writes the region's portable description (one versioned section per transport)
 * into buf. With buf NULL, or *len too small (-ENOSPC), sets *len to the size needed. */
WEFT_API int weft_mem_serialize(const weft_mem_t *mem, void *buf, size_t *len);

/* Imports a peer's blob. Errors: -WEFT_ERR_PROTOCOL (malformed blob, named in the log). */
WEFT_API int weft_mem_import(weft_comm_t *comm, int peer, const void *buf, size_t len, weft_rmem_t **rmem);
/* Accepts NULL. */
WEFT_API int weft_rmem_release(weft_rmem_t *rmem);
/* Serializes mem, swaps blobs with peer over the bootstrap and imports the peer's.
 * Both ranks call it. */
WEFT_API int weft_mem_exchange(weft_mem_t *mem, int peer, weft_rmem_t **rmem);

/* A window: [ptr, ptr+len) of every rank of comm, registered together, each
 * rank's part imported by every other. A collective call whose buffers lie
 * in windows (each whole, at the same offset on every rank, within every
 * rank's part) hands the packs the windows, so they skip the per-call
 * exchange of buffer addresses (algo-gpu's direct and copy-engine paths).
 * The window ids and offsets are part of the call's signature: ranks whose
 * buffers are in different windows, or at different offsets, fail the call
 * on every rank rather than compute on the wrong data ([core] check_calls
 * on). Every rank calls it, in the same order among its windows, with its
 * own ptr and len of one memory type; the memory stays the caller's and
 * must outlive the window. On success *win is owned by the caller
 * (weft_window_deregister, or the comm's destroy).
 * Errors: -EINVAL (NULL comm, ptr or win, len 0, unknown type), those of
 * weft_mem_register and weft_mem_exchange; -WEFT_ERR_MISMATCH where ranks
 * passed different memory types; a failure on one rank is returned on
 * every rank. Thread safety: one thread per comm. Blocking: yes (all ranks). */
typedef struct weft_window weft_window_t;
WEFT_API int weft_window_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type,
				  weft_window_t **win);
/* Releases a window; accepts NULL. Every rank calls it once the calls using
 * the window completed (on their streams too); it does not wait for peers.
 * Thread safety: one thread per comm. Blocking: no. */
WEFT_API int weft_window_deregister(weft_window_t *win);

/* ------------------------------------------------------------ connections */
/* Connects to peer. transport names a loaded transport plugin ("ofi", "ucx", ...)
 * or is NULL to let the core choose. Both ranks call it with the same transport.
 * Errors: -WEFT_ERR_PLUGIN (named transport not loaded), -EHOSTUNREACH (it cannot
 * reach that peer), -WEFT_ERR_PEER. Blocking: yes. */
WEFT_API int weft_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn);
/* As weft_connect, for a connection that will carry memory of type mem (the
 * buffers its puts read and write): with transport NULL, the [transport] rules
 * with a mem= condition and the transports' scores for that memory type decide
 * (weft_connect is this with WEFT_MEM_HOST). Both ranks call it with the same
 * transport and memory type. Errors: those of weft_connect, -EINVAL (unknown
 * memory type), -WEFT_ERR_MISMATCH (the peer asked for another memory type).
 * Thread safety: one thread per comm. Blocking: yes. */
WEFT_API int weft_connect_mem(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			      weft_conn_t **conn);
/* Accepts NULL. Flushes first. */
WEFT_API int weft_conn_close(weft_conn_t *conn);
/* Name of the transport carrying conn. The string lives as long as conn. */
WEFT_API const char *weft_conn_transport(const weft_conn_t *conn);
/* One line saying what carries conn, from the transport (e.g. "ofi provider=tcp
 * fabric=127.0.0.0/8 domain=lo"). -ENOSYS when the transport cannot say. */
WEFT_API int weft_conn_describe(const weft_conn_t *conn, char *buf, size_t len);

/* One-sided write of len bytes from src+src_off to dst+dst_off at the peer.
 * Returns when the operation is posted; the source may be reused and the data is
 * guaranteed at the peer only after weft_flush (or a later signal the peer waits on).
 * Errors: -EINVAL (out of bounds), -WEFT_ERR_PEER, -WEFT_ERR_ABORTED. Blocking: only
 * while the transport's queue is full. */
WEFT_API int weft_put(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
		      uint64_t src_off, size_t len);

/* Makes the peer's semaphore token equal value. Tokens only grow: value must be
 * greater than any earlier value signalled to it. Every put posted on conn before
 * the signal is visible at the peer when the new token is. */
WEFT_API int weft_signal(weft_conn_t *conn, weft_rsem_t *sem, uint64_t value);

/* Waits until every operation posted on conn is complete at the peer (written
 * into its memory) and every source buffer may be reused. Blocking: yes, until
 * done, the peer dies (-WEFT_ERR_PEER) or the comm is aborted. */
WEFT_API int weft_flush(weft_conn_t *conn);

/* ------------------------------------------------------------- semaphores */
WEFT_API int weft_sem_create(weft_comm_t *comm, weft_sem_t **sem);
WEFT_API int weft_sem_destroy(weft_sem_t *sem); /* accepts NULL */
/* Current token value. Blocking: no. */
WEFT_API uint64_t weft_sem_value(const weft_sem_t *sem);
/* Progresses every transport of comm once, without blocking, and returns 0
 * or the error that broke the comm. For host threads that poll what a
 * transport lands (weft_sem_value, a put's data) instead of waiting in
 * weft_sem_wait, which progresses on its own: a transport with manual
 * progress (ofi's tcp) lands nothing until someone calls it.
 * Thread safety: any thread. */
WEFT_API int weft_comm_progress(weft_comm_t *comm);
/* Waits until the token is >= value. Spins briefly, then sleeps between polls, so
 * more ranks than cores still progress. No timeout: returns -WEFT_ERR_PEER when a
 * peer of the comm dies, -WEFT_ERR_ABORTED after weft_comm_abort. */
WEFT_API int weft_sem_wait(weft_sem_t *sem, uint64_t value);
/* Waits until any of the n tokens sems[i] is >= values[i] and sets *which to
 * the first such i; the semaphores are host ones of one comm. Spins and
 * sleeps as weft_sem_wait does, with its errors; -EINVAL on bad arguments. */
WEFT_API int weft_sem_wait_any(weft_sem_t *const *sems, const uint64_t *values, int n, int *which);
/* Swaps semaphores with peer over the bootstrap: *rsem is the peer's semaphore. */
WEFT_API int weft_sem_exchange(weft_sem_t *sem, int peer, weft_rsem_t **rsem);
WEFT_API int weft_rsem_release(weft_rsem_t *rsem); /* accepts NULL */

/* ---------------------------------------------------------- port channels */
/* A port channel is a FIFO of fixed-size triggers (put, signal, flush) over one
 * connection. A producer pushes; a proxy thread of the core drains the FIFO into
 * the transport. On CPU the producer is a host thread; on GPU, a kernel.
 * depth is the number of FIFO slots (0 = WEFT_CORE_FIFO_DEPTH). */
WEFT_API int weft_port_create(weft_conn_t *conn, unsigned depth, weft_port_t **port);
WEFT_API int weft_port_destroy(weft_port_t *port); /* accepts NULL; drains first */
/* Push a trigger. Blocks only while the FIFO is full. */
WEFT_API int weft_port_put(weft_port_t *port, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			   uint64_t src_off, size_t len);
WEFT_API int weft_port_signal(weft_port_t *port, weft_rsem_t *sem, uint64_t value);
/* Push a flush trigger and wait until the proxy has completed it. */
WEFT_API int weft_port_flush(weft_port_t *port);

/* ------------------------------------------------------- device channels
 * GPU kernels drive communication through plain C structs the host fills and
 * copies to the device; include/weft/device.h has the device functions that use
 * them. These need a transport with the ABI 0.2 device ops (nvlink); others
 * return -ENOTSUP. */
typedef struct weft_memchan weft_memchan_t; /* a memory channel: peer-mapped buffer + semaphores */
struct weft_memchan_dev;                    /* device.h */
struct weft_port_dev;                       /* device.h */

/* Allocates zero-filled memory of `type` through the comm's transport that serves
 * it (device memory for WEFT_MEM_CUDA), asking first the transports whose devices
 * declare that memory type (for host memory: shm, whose segments the peers map;
 * a GPU transport's pinned host memory only where none of those allocates). The
 * caller owns it: weft_mem_free. */
WEFT_API int weft_mem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr);
WEFT_API int weft_mem_free(weft_comm_t *comm, void *ptr); /* accepts NULL */

/* A semaphore whose token lives in memory of `type` (device memory, so kernels
 * wait on it without crossing PCIe). weft_sem_create is this with WEFT_MEM_HOST.
 * Peers raise it with weft_signal / weft_port_signal or in kernels (memory
 * channels); exchange it with weft_sem_exchange as any semaphore. Only kernels
 * wait on a device token (weft_memchan_wait): the host cannot read device
 * memory, so weft_sem_wait on it returns -ENOTSUP and weft_sem_value returns 0.
 * Its slot is not reused after weft_sem_destroy (the pool's memory goes with
 * the comm). Errors: -EINVAL, -ENOTSUP (no transport of comm allocates `type`:
 * a GPU transport such as nvlink is needed). Thread safety: one thread per comm. */
WEFT_API int weft_sem_create_on(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **sem);

/* A memory channel over conn: GPU threads of this rank write dst (the peer's
 * region, mapped), read src, signal rsem (the peer's semaphore) and wait on sem
 * (this rank's, which the peer signals). Errors: -ENOTSUP when conn's transport
 * cannot map peer memory. */
WEFT_API int weft_memchan_create(weft_conn_t *conn, weft_rmem_t *dst, weft_mem_t *src, weft_sem_t *sem,
				 weft_rsem_t *rsem, weft_memchan_t **chan);
WEFT_API int weft_memchan_destroy(weft_memchan_t *chan); /* accepts NULL */
/* The peer's region of rmem mapped into this rank's device address space through
 * conn's transport, for kernels that load and store it directly. Valid until
 * rmem is released. Errors: -ENOTSUP when the transport cannot map it (a
 * query: logged at debug only). */
WEFT_API int weft_rmem_device_ptr(weft_conn_t *conn, weft_rmem_t *rmem, void **ptr);
/* Fills *dev (host memory) with what a kernel needs; copy it to the device. Its
 * in-kernel state (expected token values, epochs) lives in device memory owned by
 * the channel, so a captured graph replays correctly. */
WEFT_API int weft_memchan_device_handle(const weft_memchan_t *chan, struct weft_memchan_dev *dev);
/* Fills *dev with the port channel's FIFO as a kernel sees it (host-pinned and
 * device-mapped). -ENOTSUP when no transport of the comm can map host memory. */
WEFT_API int weft_port_device_handle(weft_port_t *port, struct weft_port_dev *dev);

/* ------------------------------------------------------------ collectives
 * NCCL's semantics: every rank of the comm makes the same calls in the same
 * order. `stream` is a cudaStream_t (or hipStream_t) for device buffers: the
 * call is enqueued there and returns; with stream NULL the call completes on the
 * host before it returns (host buffers always do). Counts are elements.
 * An unsupported combination (type, op, memory type) returns -ENOTSUP with a
 * message naming it, never a wrong result.
 * Thread safety: one thread per comm. Blocking: see stream above; a dead peer or
 * abort returns -WEFT_ERR_PEER / -WEFT_ERR_ABORTED. */
enum weft_datatype {
	WEFT_INT8 = 0,
	WEFT_UINT8 = 1,
	WEFT_INT32 = 2,
	WEFT_UINT32 = 3,
	WEFT_INT64 = 4,
	WEFT_UINT64 = 5,
	WEFT_FLOAT16 = 6,  /* IEEE half */
	WEFT_BFLOAT16 = 7,
	WEFT_FLOAT32 = 8,
	WEFT_FLOAT64 = 9,
	WEFT_FP8_E4M3 = 10,
	WEFT_FP8_E5M2 = 11,
	WEFT_DATATYPE_COUNT
};

enum weft_redop {
	WEFT_SUM = 0,
	WEFT_PROD = 1,
	WEFT_MIN = 2,
	WEFT_MAX = 3,
	WEFT_AVG = 4, /* sum divided by the rank count, in the element type */
	/* Pre-multiplied sum: each rank's input times that rank's own scalar, the
	 * product rounded to the element type, then summed. Only through the
	 * *_premul calls below, which carry the scalar; the plain calls refuse it. */
	WEFT_PREMUL_SUM = 5,
	WEFT_REDOP_COUNT
};

/* Bytes per element; 0 for an unknown type. */
WEFT_API size_t weft_datatype_size(enum weft_datatype type);
/* Names: "int8" "uint8" "int32" "uint32" "int64" "uint64" "float16"/"half"
 * "bfloat16" "float32"/"float" "float64"/"double" "fp8_e4m3" "fp8_e5m2";
 * "sum" "prod" "min" "max" "avg" "premul_sum". Parsers return -EINVAL for
 * unknown names. */
WEFT_API const char *weft_datatype_name(enum weft_datatype type);
WEFT_API int weft_datatype_parse(const char *name, enum weft_datatype *type);
WEFT_API const char *weft_redop_name(enum weft_redop op);
WEFT_API int weft_redop_parse(const char *name, enum weft_redop *op);

/* In place when sendbuf == recvbuf (for allgather: sendbuf == recvbuf + rank *
 * count elements; for reduce-scatter: sendbuf + rank * count == recvbuf). */
WEFT_API int weft_allreduce(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			    enum weft_redop op, weft_comm_t *comm, void *stream);
/* recvbuf holds nranks * sendcount elements, rank r's block at r * sendcount. */
WEFT_API int weft_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, enum weft_datatype type,
			    weft_comm_t *comm, void *stream);
/* sendbuf holds nranks * recvcount elements; rank r receives the reduction of block r. */
WEFT_API int weft_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
				 enum weft_datatype type, enum weft_redop op, weft_comm_t *comm, void *stream);
/* sendbuf is read on root only. */
WEFT_API int weft_broadcast(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			    int root, weft_comm_t *comm, void *stream);
/* recvbuf is written on root only. */
WEFT_API int weft_reduce(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			 enum weft_redop op, int root, weft_comm_t *comm, void *stream);
/* Pre-multiplied sums (WEFT_PREMUL_SUM): as weft_allreduce, weft_reduce_scatter
 * and weft_reduce with the sum, after each rank multiplies its own input by
 * *scalar, one element of `type` (ranks may pass different scalars). Where the
 * scalar lives is scalar_mem:
 *   WEFT_MEM_HOST: read during the call (the caller may reuse it at once);
 *   the buffers' device type (WEFT_MEM_CUDA): a device pointer read on
 *   `stream` when the call runs there, so a captured graph's replays see its
 *   value at each replay. Device scalars need device buffers (-EINVAL).
 * The sum's order is the algorithm's usual one, the same on every run.
 * -ENOTSUP when no loaded algorithm serves the type (logged). Thread and
 * blocking rules as the plain calls. */
WEFT_API int weft_allreduce_premul(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
				   const void *scalar, enum weft_mem_type scalar_mem, weft_comm_t *comm, void *stream);
WEFT_API int weft_reduce_scatter_premul(const void *sendbuf, void *recvbuf, size_t recvcount,
					enum weft_datatype type, const void *scalar, enum weft_mem_type scalar_mem,
					weft_comm_t *comm, void *stream);
WEFT_API int weft_reduce_premul(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
				const void *scalar, enum weft_mem_type scalar_mem, int root, weft_comm_t *comm,
				void *stream);
/* count elements go to each peer: block p of sendbuf to rank p, block p of recvbuf from rank p. */
WEFT_API int weft_alltoall(const void *sendbuf, void *recvbuf, size_t count, enum weft_datatype type,
			   weft_comm_t *comm, void *stream);
/* Point to point. Outside a group a send and its matching recv must not both be
 * issued by one thread; inside a group they are fused and may pair up freely. A
 * recv may overwrite bytes that a send of the same group reads: the send carries
 * them as they were when the group started (NCCL leaves that case undefined). */
WEFT_API int weft_send(const void *buf, size_t count, enum weft_datatype type, int peer, weft_comm_t *comm,
		       void *stream);
WEFT_API int weft_recv(void *buf, size_t count, enum weft_datatype type, int peer, weft_comm_t *comm,
		       void *stream);
/* Calls between start and end are queued and run at end; groups nest (only the
 * outermost end runs them). At end the queued collectives run in call order,
 * then each comm's sends and receives as one fused batch, so pairs may be
 * issued in any order. A send and its matching recv name the same byte count.
 * Per calling thread. */
WEFT_API int weft_group_start(void);
WEFT_API int weft_group_end(void);
/* v-collectives, counts and displacements in elements, one per rank:
 * alltoallv sends sendcounts[p] elements from sendbuf + sdispls[p] to rank p
 * and receives recvcounts[p] from rank p at recvbuf + rdispls[p]; allgatherv
 * sends sendcount elements to every rank and receives recvcounts[p] from rank
 * p at recvbuf + displs[p]. What p sends this rank is what this rank expects
 * from p (as NCCL requires); the own entries must agree (-EINVAL). They run as
 * one group of sends and receives, so any pack's send/recv algorithm serves
 * them, and they may sit inside an outer group. Thread and blocking rules as
 * the collectives. */
WEFT_API int weft_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
			    const size_t *recvcounts, const size_t *rdispls, enum weft_datatype type,
			    weft_comm_t *comm, void *stream);
WEFT_API int weft_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t *recvcounts,
			     const size_t *displs, enum weft_datatype type, weft_comm_t *comm, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_WEFT_H */
