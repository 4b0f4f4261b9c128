/* SPDX-License-Identifier: Apache-2.0 */
/* weft: the plugin ABI. A plugin is a shared object libweft-<name>.so exporting
 * one symbol, weft_plugin_init, which returns descriptors of transports and
 * collective-algorithm packs. docs/plugin-abi.md is the specification. */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0.x is unstable: majors may still break until the GPU collectives land and
 * the ABI is frozen as 1.0. Minors only append fields and ops. */
#define WEFT_PLUGIN_ABI_MAJOR 0
#define WEFT_PLUGIN_ABI_MINOR 3

#define WEFT_PLUGIN_INIT_SYMBOL "weft_plugin_init"

/* True when an ops table (or any size-prefixed struct) is large enough to hold
 * `field` and that field is set. The core calls optional ops only through these. */
#define WEFT_HAS_FIELD(tbl, type, field) \
	((tbl) != NULL && (tbl)->size >= offsetof(type, field) + sizeof(((type *)0)->field))
#define WEFT_HAS_OP(tbl, type, field) (WEFT_HAS_FIELD(tbl, type, field) && (tbl)->field != NULL)
/* Calls an op when present, else evaluates to -ENOSYS. */
#define WEFT_CALL_OP(tbl, type, field, ...) \
	(WEFT_HAS_OP(tbl, type, field) ? (tbl)->field(__VA_ARGS__) : -ENOSYS)

/* ------------------------------------------------------------ core services */
enum weft_log_level {
	WEFT_LOG_ERROR = 0,
	WEFT_LOG_WARN = 1,
	WEFT_LOG_INFO = 2,
	WEFT_LOG_DEBUG = 3,
	WEFT_LOG_TRACE = 4
};

enum weft_param_type {
	WEFT_PARAM_INT = 0,    /* int64_t; decimal or 0x hex */
	WEFT_PARAM_SIZE = 1,   /* uint64_t; accepts K, M, G, T suffixes (powers of 1024) */
	WEFT_PARAM_BOOL = 2,   /* int; 1/0, true/false, yes/no, on/off */
	WEFT_PARAM_DOUBLE = 3, /* double */
	WEFT_PARAM_STRING = 4  /* const char *, owned by the core */
};

enum weft_param_source {
	WEFT_PARAM_SRC_DEFAULT = 0,
	WEFT_PARAM_SRC_FILE = 1,
	WEFT_PARAM_SRC_ENV = 2
};

/* A typed, documented parameter. Its value comes from the environment variable
 * WEFT_<SECTION>_<KEY> (upper-cased, '-' as '_'), else the config file's
 * [section] key, else default_value. */
struct weft_param_decl {
	size_t size;               /* sizeof(struct weft_param_decl) */
	const char *section;       /* the plugin's name (NULL means the declaring file's own name) */
	const char *key;           /* [a-z0-9_-]+ */
	enum weft_param_type type;
	const char *default_value; /* text parsed as `type`; NULL means "unset" for strings */
	const char *help;          /* one sentence, shown by weft-info -c */
	/* ABI 0.3: what the plugin accepts, so that the core refuses anything else
	 * where it reads the value (naming the file and line or the variable) and
	 * weft-info -c exits 2 on it. Zero: no bound beyond the type. */
	int bounded;                           /* INT, SIZE, DOUBLE: the value lies in min..max */
	union weft_param_bound {
		int64_t i;                     /* INT */
		uint64_t u;                    /* SIZE */
		double d;                      /* DOUBLE */
	} min, max;                            /* inclusive */
	const char *const *names;              /* STRING: the accepted values, NULL-terminated
						* (copied); NULL: any text */
};

struct weft_plugin; /* opaque: the core's record of one loaded plugin file */

/* Services the core lends a plugin. One table per plugin file, valid until the
 * process exits. Every function may be called from any thread. */
struct weft_core_api {
	size_t size;
	struct weft_plugin *self; /* pass back as the first argument */
	int core_version;         /* WEFT_VERSION_CODE of the core */
	/* ABI 0.0 */
	void (*log)(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	int (*log_enabled)(struct weft_plugin *self, enum weft_log_level level);
	/* Declares a parameter. -EEXIST when the key (or another key mapping to the same
	 * environment name) is already declared; -EINVAL for a bad name or a default that
	 * does not parse. Declare in weft_plugin_init. */
	int (*param_declare)(struct weft_plugin *self, const struct weft_param_decl *decl);
	/* Reads a declared parameter. -ENOENT when not declared, -EINVAL when the type
	 * differs. `out` points to the type named by weft_param_type. The source may be NULL.
	 * section NULL means the plugin's own section. */
	int (*param_get)(struct weft_plugin *self, const char *section, const char *key,
			 enum weft_param_type type, void *out, enum weft_param_source *source);
	void *(*alloc)(size_t bytes);
	void *(*calloc)(size_t n, size_t bytes);
	void (*free)(void *ptr);
};

/* --------------------------------------------------------------- transports */
/* Peer classes, from nearest to farthest. */
enum weft_peer_class {
	WEFT_PEER_SAME_PROCESS = 0,
	WEFT_PEER_SAME_HOST = 1,
	WEFT_PEER_OTHER_HOST = 2,
	WEFT_PEER_CLASS_COUNT
};
/* ABI 0.3: the core's refinement of same-host that packs see in
 * weft_algo_peer (transports are handed such a peer as same-host): another
 * process on this host whose GPU is joined to this rank's by NVLink or
 * xGMI, directly or through a switch. */
#define WEFT_PEER_SAME_GPU_LINK ((enum weft_peer_class)WEFT_PEER_CLASS_COUNT)

/* ABI 0.3: what a transport can do beyond the required ops, so that packs
 * ask for a property instead of a transport's name (weft_transport_ops.caps,
 * weft_algo_route.caps). A transport built for 0.2 reads as 0: none. */
/* Host memory a peer allocated through this transport's mem_alloc (and so
 * any region of it the peer registers) can be mapped here by mem_map, and then
 * read and written by this rank's CPU with plain loads and stores, not only
 * through put (shm's segments). Other peer memory may still be unmappable. */
#define WEFT_TP_CAP_HOST_MAPPABLE (1u << 0)
/* put writes by address without pinning or registering pages with a
 * device, so keeping a registration costs nothing and one may be cached
 * across calls for as long as the memory stays mapped (shm's cross-memory
 * writes). */
#define WEFT_TP_CAP_UNPINNED_WRITES (1u << 1)

/* A device a transport offers, as reported by probe (for topology and weft-info). */
struct weft_tp_device {
	size_t size;
	char name[64];          /* "lo", "mlx5_0:1", "GPU0", ... */
	char link[32];          /* "shm", "tcp", "nvlink", "ib", ... */
	double bandwidth_gbps;  /* GB/s, one direction, 0 if unknown */
	double latency_us;      /* one-way, 0 if unknown */
	int numa_node;          /* -1 if unknown */
	char pci_path[64];      /* "" if none */
	uint32_t mem_types;     /* bit (1u << enum weft_mem_type) per reachable memory type */
	uint32_t peer_classes;  /* bit (1u << enum weft_peer_class) per reachable class */
};

/* Arguments of open: one transport context per communicator. */
struct weft_tp_open_args {
	size_t size;
	int rank;
	int nranks;
	uint64_t comm_tag;      /* unique per communicator; the same on every rank */
	const char *local_addr; /* numeric IP address the bootstrap is bound to */
	const char *host_id;    /* this host's identity: equal strings mean one host */
};

/* The peer an endpoint is made for. */
struct weft_tp_peer {
	size_t size;
	int rank;
	enum weft_peer_class peer_class;
	const char *host_id;
	const char *addr; /* numeric IP address of the peer's bootstrap */
};

/* ABI 0.3: staging of device data through pinned host memory
 * (weft_transport_ops.stage), offered by a GPU transport so that the core,
 * which calls no GPU runtime, can carry device buffers over a transport that
 * cannot register them (docs/plugin-abi.md, "Staging"). Calls on one context
 * never overlap (the core holds its lock); they may come from any thread. */
enum weft_stage_dir {
	WEFT_STAGE_TO_HOST = 0,  /* src is device memory, dst pinned host memory */
	WEFT_STAGE_TO_DEVICE = 1 /* src is pinned host memory, dst device memory */
};

struct weft_tp_stage_ops {
	size_t size;
	/* Pinned host memory, mapped into the device, zero-filled, for bounce
	 * buffers: copies from and to it run asynchronously at full speed. */
	int (*host_alloc)(void *tc, size_t bytes, void **host_ptr);
	int (*host_free)(void *tc, void *host_ptr);
	/* Starts an asynchronous copy of len bytes and names it by *ticket;
	 * copies of one direction may run in order, the two directions apart. */
	int (*copy_start)(void *tc, void *dst, const void *src, size_t len, enum weft_stage_dir dir,
			  uint64_t *ticket);
	/* Non-blocking: 0 when the copy is complete (dst holds the bytes, src
	 * may be reused), -EAGAIN while not, another code when it failed. After
	 * 0 or an error the ticket is spent: it is never tested again. */
	int (*copy_test)(void *tc, uint64_t ticket);
};

/* A transport. Contexts (`tc`), memory handles (`mh`, `rmh`) and endpoints (`ep`)
 * are the plugin's own opaque objects. Unless marked otherwise, the core never
 * calls into one context from two threads at once. Calls marked "non-blocking"
 * must return promptly: the core drives waiting, so that it can watch peer
 * liveness and abort. Return 0 or a negative code (see weft.h). */
struct weft_transport_ops {
	size_t size;
	/* ABI 0.0 */
	/* Open a context for one communicator. Required. */
	int (*open)(const struct weft_tp_open_args *args, void **tc);
	/* Close it; every handle made from it has been released first. Required. */
	void (*close)(void *tc);
	/* Register [ptr, ptr+len). -ENOTSUP for a memory type it cannot reach. Required. */
	int (*mem_register)(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh);
	int (*mem_deregister)(void *tc, void *mh);
	/* Write this transport's section of a registered-memory blob into buf. With buf
	 * NULL or *len too small: set *len to the size needed and return -ENOSPC. */
	int (*mem_serialize)(void *tc, void *mh, void *buf, size_t *len);
	/* Import a peer's section. Must validate every field: -WEFT_ERR_PROTOCOL on
	 * anything malformed. peer is the rank that serialized it. */
	int (*mem_import)(void *tc, int peer, const void *buf, size_t len, void **rmh);
	int (*mem_release)(void *tc, void *rmh);
	/* Make an endpoint for one peer and write the address the peer's endpoint needs
	 * into addr (same -ENOSPC rule as mem_serialize). -EHOSTUNREACH when this
	 * transport cannot reach that peer. */
	int (*endpoint)(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep);
	/* Complete an endpoint with the peer's address. May be called once. */
	int (*connect)(void *ep, const void *peer_addr, size_t len);
	/* Destroy an endpoint; operations on it have been flushed or abandoned. */
	int (*disconnect)(void *ep);
	/* One-sided write. Non-blocking: -EAGAIN when the queue is full (the core
	 * progresses and retries). Local buffers may be reused only after flush. */
	int (*put)(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
	/* Write value into the peer's 8-byte token at rmh+roff, so that every put
	 * posted on ep before it is visible at the peer no later than the token.
	 * Non-blocking, -EAGAIN as put. */
	int (*signal)(void *ep, void *rmh, uint64_t roff, uint64_t value);
	/* Non-blocking test: 0 when every operation posted on ep is complete at the
	 * peer and every local buffer is reusable; -EAGAIN while some are not. */
	int (*flush)(void *ep);
	/* Advance the context's operations, both sides (a target whose transport needs
	 * its help to land incoming data depends on this). Non-blocking. A failure that
	 * concerns one peer may be reported as -WEFT_ERR_PEER. */
	int (*progress)(void *tc);
	/* ABI 0.1 */
	/* Describe what is in use (provider, fabric, domain, ...) in one line for
	 * weft-info; tc may be NULL for what a new context would use. Optional. */
	int (*describe)(void *tc, char *buf, size_t len);
	/* Report the devices it offers; *n is in: capacity, out: count. Optional. */
	int (*probe)(struct weft_tp_device *devs, int *n);
	/* Describe one connected endpoint in one line ("provider=tcp fabric=... peer=..."),
	 * so users and tests can see what really carries a connection. Optional. */
	int (*ep_describe)(void *ep, char *buf, size_t len);
	/* ABI 0.2: what GPU transports add so that device-side channels can be built.
	 * All optional; a transport without them serves host-driven operations only. */
	/* Map a peer's imported region into this rank's device address space, so GPU
	 * threads can load and store it directly (memory channels). The pointer stays
	 * valid until mem_release. -ENOTSUP when the link cannot do that. */
	int (*mem_map)(void *tc, void *rmh, void **dev_ptr);
	/* Allocate / free memory of `type` the transport's device can reach: device
	 * memory for semaphores and scratch, or, with WEFT_MEM_HOST, pinned host memory
	 * mapped into the device (FIFOs, abort flags). *dev_ptr is the device's view;
	 * *host_ptr the host's (NULL for device memory). Zero-filled. */
	int (*mem_alloc)(void *tc, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr);
	int (*mem_free)(void *tc, void *host_ptr, void *dev_ptr);
	/* Which memory type ptr is, as far as this transport knows (cudaPointerGetAttributes).
	 * -ENOENT when it does not recognize the pointer. */
	int (*mem_query)(void *tc, const void *ptr, enum weft_mem_type *type);
	/* ABI 0.3: WEFT_TP_CAP_* bits of what this transport does; the core reads
	 * it only from a plugin built for 0.3 or later. */
	uint32_t caps;
	/* Optional staging ops, for GPU transports (NULL: none). */
	const struct weft_tp_stage_ops *stage; /* ABI 0.3 */
	/* ABI 0.3, optional: descriptors that turn readable when traffic arrives
	 * that only this side's progress completes (a peer's put on a provider
	 * with manual progress), so that a waiting rank sleeps in poll() on them
	 * and wakes for the traffic instead of at its next timer tick. Writes at
	 * most max into fds and returns how many (0: none now); -EAGAIN when
	 * progress is due now and blocking could miss an event (fi_trywait and
	 * ucp_worker_arm say so). Called under the transport's lock. */
	int (*wait_fds)(void *tc, int *fds, int max);
};

/* ------------------------------------------------------- algorithm packs */
enum weft_collective {
	WEFT_COLL_ALLREDUCE = 0,
	WEFT_COLL_ALLGATHER = 1,
	WEFT_COLL_REDUCE_SCATTER = 2,
	WEFT_COLL_BROADCAST = 3,
	WEFT_COLL_REDUCE = 4,
	WEFT_COLL_ALLTOALL = 5,
	WEFT_COLL_SENDRECV = 6,
	WEFT_COLL_COUNT
};

/* ABI 0.3: a window (weft_window_register): memory every rank of a
 * communicator registered together, each rank's part imported by every
 * other at registration. Packs see it in weft_coll_args.send_win/recv_win
 * and in weft_algo_ops.window_register/window_deregister; it is the core's,
 * read-only, valid until window_deregister returns. */
struct weft_algo_window {
	size_t size;
	uint64_t id;                 /* from 1 per comm, the same on every rank, never reused */
	void *base;                  /* this rank's part */
	size_t len;
	size_t min_len;              /* the smallest part of any rank */
	enum weft_mem_type mem_type; /* the same on every rank */
	weft_mem_t *mem;             /* this rank's part, registered */
	weft_rmem_t *const *rmem;    /* nranks entries: rank q's part imported here; NULL at this rank */
};

/* One collective call as the core hands it to an algorithm. */
struct weft_coll_args {
	size_t size;
	enum weft_collective coll;
	const void *sendbuf;
	void *recvbuf;
	size_t count;             /* elements, as the public call takes it */
	enum weft_datatype dtype;
	enum weft_redop op;
	int root;                 /* broadcast, reduce; the peer for send/recv */
	enum weft_mem_type mem_type;
	void *stream;             /* NULL: complete on the host before returning */
	uint64_t bytes;           /* the size algorithms are chosen by (nccl-tests' convention) */
	/* ABI 0.3: the scalar of WEFT_PREMUL_SUM (op is never that value for an
	 * algorithm that did not declare it, see weft_algo.redops). One element
	 * of dtype: with scalar_mem WEFT_MEM_HOST its bytes are scalar_host (the
	 * core copied them at the call); otherwise scalar_dev is device memory
	 * of that type, to be read on stream when the call runs. */
	enum weft_mem_type scalar_mem;
	const void *scalar_dev;
	unsigned char scalar_host[8];
	/* ABI 0.3: the call's signature (kit.h's "call signatures"), 0 when
	 * [core] check_calls is off. An algorithm sends it with its first flag,
	 * packet or message to each peer it waits on and fails the call with
	 * -WEFT_ERR_MISMATCH when a peer's differs; the core then fails the
	 * communicator on every rank. */
	uint64_t sig;
	/* ABI 0.3, WEFT_COLL_SENDRECV only: per entry of the batch (count of
	 * them), the signature of that message: messages are numbered per
	 * direction of each pair, so the k-th send of a rank to a peer and the
	 * peer's k-th receive from it have the same signature when their byte
	 * counts agree, however the ranks group their calls. NULL when the check
	 * is off. */
	const uint64_t *p2p_sig;
	/* ABI 0.3: the windows holding this rank's send and receive buffers
	 * whole, within every rank's part (min_len), and the buffers' offsets
	 * in them; NULL and 0 where none does, and always for broadcast, reduce
	 * and send/recv. The ids and offsets are folded into sig, so ranks that
	 * disagree on them fail the call; NCCL requires the same offsets on
	 * every rank, so a peer's buffer is its part's start plus this rank's
	 * offset. Read only where size covers them. */
	const struct weft_algo_window *send_win;
	const struct weft_algo_window *recv_win;
	uint64_t send_off, recv_off;
};

/* One queued weft_send (is_send 1) or weft_recv (is_send 0), in bytes.
 *
 * Convention for coll == WEFT_COLL_SENDRECV: the core always passes a batch,
 * also for one send or recv outside a group:
 *   args->sendbuf  points to an array of struct weft_p2p_op (const),
 *   args->count    is the number of entries (at least 1),
 *   args->recvbuf  is NULL, args->dtype is WEFT_UINT8, args->root is -1,
 *   args->bytes    is the sum of the entries' bytes (what selection uses).
 * Entries keep the order of the calls. Between one pair of ranks, the k-th send
 * of one to the other matches the k-th recv of the other from it, and both name
 * the same byte count (as NCCL requires). No entry has bytes == 0 (the core
 * drops those), and peer may be the calling rank itself. */
struct weft_p2p_op {
	int peer;
	int is_send;
	void *buf; /* read for a send, written for a recv */
	size_t bytes;
};

/* The primitive API, lent to algorithm packs: the functions of weft.h, so a
 * pack builds on exactly what applications can use, without linking the core. */
struct weft_prim_api {
	size_t size;
	/* ABI 0.1 */
	int (*comm_rank)(const weft_comm_t *comm);
	int (*comm_size)(const weft_comm_t *comm);
	int (*comm_status)(const weft_comm_t *comm);
	int (*comm_barrier)(weft_comm_t *comm);
	int (*comm_allgather)(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each);
	int (*comm_send)(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len);
	int (*comm_recv)(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len);
	int (*mem_register)(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, weft_mem_t **mem);
	int (*mem_deregister)(weft_mem_t *mem);
	int (*mem_exchange)(weft_mem_t *mem, int peer, weft_rmem_t **rmem);
	int (*rmem_release)(weft_rmem_t *rmem);
	int (*connect)(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn);
	int (*conn_close)(weft_conn_t *conn);
	int (*put)(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
		   size_t len);
	int (*signal)(weft_conn_t *conn, weft_rsem_t *sem, uint64_t value);
	int (*flush)(weft_conn_t *conn);
	int (*sem_create)(weft_comm_t *comm, weft_sem_t **sem);
	int (*sem_destroy)(weft_sem_t *sem);
	uint64_t (*sem_value)(const weft_sem_t *sem);
	int (*sem_wait)(weft_sem_t *sem, uint64_t value);
	int (*sem_exchange)(weft_sem_t *sem, int peer, weft_rsem_t **rsem);
	int (*rsem_release)(weft_rsem_t *rsem);
	/* ABI 0.2 */
	int (*mem_alloc)(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr);
	int (*mem_free)(weft_comm_t *comm, void *ptr);
	int (*rmem_device_ptr)(weft_conn_t *conn, weft_rmem_t *rmem, void **ptr);
	int (*memchan_create)(weft_conn_t *conn, weft_rmem_t *dst, weft_mem_t *src, weft_sem_t *sem,
			      weft_rsem_t *rsem, weft_memchan_t **chan);
	int (*memchan_destroy)(weft_memchan_t *chan);
	int (*memchan_device_handle)(const weft_memchan_t *chan, struct weft_memchan_dev *dev);
	int (*sem_create_on)(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **sem);
	/* Appended within ABI 0.2: a pack checks size before using it. The
	 * connection chosen for buffers of memory type mem (weft_connect_mem). */
	int (*connect_mem)(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			   weft_conn_t **conn);
	/* ABI 0.3: weft_sem_wait_any, for packs that drive several peers from
	 * one host thread. */
	int (*sem_wait_any)(weft_sem_t *const *sems, const uint64_t *values, int n, int *which);
	/* ABI 0.3: port channels (weft_port_*, device.h), so that a pack's
	 * kernels drive a transport that cannot map peer memory (ib, ofi, ucx,
	 * shm) through the core's proxy, device data staged where the transport
	 * cannot register it; the ids name objects in device triggers. */
	int (*port_create)(weft_conn_t *conn, unsigned depth, weft_port_t **port);
	int (*port_destroy)(weft_port_t *port);
	int (*port_device_handle)(weft_port_t *port, struct weft_port_dev *dev);
	int (*port_put)(weft_port_t *port, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
			size_t len);
	int (*port_signal)(weft_port_t *port, weft_rsem_t *sem, uint64_t value);
	int (*port_flush)(weft_port_t *port);
	int (*mem_port_id)(const weft_mem_t *mem, uint32_t *id);
	int (*rmem_port_id)(const weft_rmem_t *rmem, uint32_t *id);
	int (*rsem_port_id)(const weft_rsem_t *rsem, uint32_t *id);
	/* ABI 0.3: weft_comm_progress, for packs that poll tokens or landed
	 * data from a host thread instead of waiting in sem_wait. */
	int (*comm_progress)(weft_comm_t *comm);
	/* ABI 0.3: 1 when [ptr, ptr + len) lies in one allocation of mem_alloc
	 * (of any communicator of this process), else 0. Such memory is what a
	 * WEFT_TP_CAP_HOST_MAPPABLE transport lets peers map, so a pack that
	 * keeps a registration across calls asks before keeping one. */
	int (*mem_in_alloc)(const void *ptr, size_t len);
};

/* ABI 0.3: one transport that reaches a peer, with what it can do. */
struct weft_algo_route {
	const char *transport; /* its name, as weft_connect takes it */
	uint32_t caps;         /* WEFT_TP_CAP_* */
};

/* ABI 0.3: what a pack knows of one rank of its communicator
 * (weft_algo_comm.peers). The values are the core's own: the peer class and
 * routes are what weft_connect would use for host memory. */
struct weft_algo_peer {
	enum weft_peer_class peer_class; /* WEFT_PEER_SAME_GPU_LINK included; same-process for itself */
	int host;                        /* index of its host: hosts numbered 0.. in order of their lowest rank */
	int local_rank;                  /* its index among its host's ranks, in rank order */
	int local_size;                  /* ranks on its host */
	int nroutes;
	const struct weft_algo_route *routes; /* the transports that reach it, in weft_connect's order */
	/* ABI 0.3: those that reach it with CUDA memory registered directly,
	 * in weft_connect_mem's order (a transport that would stage device data
	 * is not among them); read only where peer_size covers them. */
	int ndev_routes;
	const struct weft_algo_route *dev_routes;
};

/* The pack's view of a communicator, given to comm_setup and setup. */
struct weft_algo_comm {
	size_t size;
	weft_comm_t *comm;
	int rank;
	int nranks;
	const struct weft_prim_api *prim;
	const struct weft_core_api *core; /* the pack's own services (log, params) */
	/* ABI 0.3 (read only where size covers them). */
	void *pack_state;                    /* what the pack's comm_setup made; NULL without one */
	int nhosts;
	size_t peer_size;                    /* stride of peers[]: use weft_algo_peer_at */
	const struct weft_algo_peer *peers;  /* nranks entries, valid until comm_teardown */
};

/* Rank r's entry of ac->peers, or NULL where the core gives none (0.2 core). */
static inline const struct weft_algo_peer *weft_algo_peer_at(const struct weft_algo_comm *ac, int r)
{
	if (!ac || ac->size < offsetof(struct weft_algo_comm, peers) + sizeof(ac->peers) || !ac->peers || r < 0 ||
	    r >= ac->nranks || ac->peer_size < sizeof(struct weft_algo_peer))
		return NULL;
	return (const struct weft_algo_peer *)(const void *)((const char *)ac->peers + (size_t)r * ac->peer_size);
}

/* One algorithm: what it serves and how to run it. The core calls setup once per
 * communicator, lazily, collectively (every rank at the same call), then execute
 * for each call it selects this algorithm for, and teardown at comm destroy.
 * Every rank's outcome of setup is agreed before the call goes on: where one
 * failed, every rank falls back to the next algorithm (docs/plugin-abi.md). */
struct weft_algo {
	size_t size;
	const char *name;            /* unique within its pack */
	enum weft_collective coll;
	uint64_t min_bytes, max_bytes; /* message sizes it accepts (max 0 = no limit) */
	int min_ranks, max_ranks;      /* max 0 = no limit */
	uint32_t mem_types;            /* bit (1u << enum weft_mem_type) */
	/* Preference when several algorithms fit a call and no rule picks one:
	 * the highest wins. */
	int priority;
	/* Per-communicator state, made once. */
	int (*setup)(const struct weft_algo_comm *comm, void **state);
	/* Optional refusal of one call (type/op it cannot do): -ENOTSUP. */
	int (*supports)(void *state, const struct weft_coll_args *args);
	int (*execute)(void *state, const struct weft_coll_args *args);
	void (*teardown)(void *state);
	/* Appended within ABI 0.2 (the core checks size): the largest
	 * bytes x (nranks - 1) it accepts, 0 = no limit. For algorithms whose
	 * traffic per rank grows with the peer count, as a one-shot's does. */
	uint64_t max_peer_bytes;
	/* ABI 0.3: the reductions it serves, bit (1u << enum weft_redop) each;
	 * 0 means sum, prod, min, max and avg, what ABI 0.2 algorithms serve.
	 * WEFT_PREMUL_SUM reaches only algorithms of packs built for ABI 0.3 or
	 * later that set its bit; the core never hands an algorithm an operation
	 * outside its set. */
	uint32_t redops;
	/* ABI 0.3: the most hosts the communicator may span; 0 = no limit. A
	 * pack whose kernels need every peer mapped serves one host, its
	 * cross-host algorithms any; the core never chooses it for a
	 * communicator over more hosts than this. */
	int max_hosts;
};

struct weft_algo_ops {
	size_t size;
	/* ABI 0.0 */
	const struct weft_algo *const *algos; /* NULL-terminated */
	/* ABI 0.3, both optional. The pack's per-communicator state: comm_setup
	 * runs once per communicator, collectively, just before the first setup
	 * of any of the pack's algorithms there, and its *pack_state reaches every
	 * setup as ac->pack_state; comm_teardown runs at comm destroy after the
	 * teardown of each of the pack's algorithms. A failed comm_setup fails
	 * the pack's setups on that comm, agreed as a failed setup is
	 * (docs/plugin-abi.md, section 8). */
	int (*comm_setup)(const struct weft_algo_comm *ac, void **pack_state);
	void (*comm_teardown)(void *pack_state);
	/* ABI 0.3, optional: what else must agree across the ranks of a
	 * communicator (algo-plan: each plan's file and SHA-256), as lines
	 * "key = value"; valid while the pack is loaded. The core compares it
	 * with the rest of the set-up at communicator creation, which fails on
	 * every rank naming the first differing key. */
	const char *(*agreement)(void);
	/* ABI 0.3, both optional: windows (weft_window_register). The core
	 * calls window_register on every rank, in the same order of packs, for
	 * each pack whose comm_setup ran on that comm (its pack_state), right
	 * after the window is registered and imported everywhere, so a pack
	 * may talk to its peers there (to map the window ahead of its first
	 * call, agreeing on the outcome). A pack set up later meets the window
	 * first in a call's send_win/recv_win. A failure is logged and the
	 * window still serves the calls: the pack must then take its usual
	 * path on every rank alike. window_deregister runs before the core
	 * releases the window, on each rank, not collectively: the pack drops
	 * what it made of it once its last call on it completed. */
	int (*window_register)(void *pack_state, const struct weft_algo_window *w);
	void (*window_deregister)(void *pack_state, const struct weft_algo_window *w);
};

/* ------------------------------------------------------------ descriptors */
enum weft_plugin_kind {
	WEFT_PLUGIN_TRANSPORT = 1,
	WEFT_PLUGIN_ALGO_PACK = 2
};

struct weft_plugin_desc {
	size_t size;        /* sizeof(struct weft_plugin_desc) */
	uint16_t abi_major; /* WEFT_PLUGIN_ABI_MAJOR the plugin was built against */
	uint16_t abi_minor;
	enum weft_plugin_kind kind;
	const char *name;   /* [a-z0-9-]+, the config section and WEFT_<NAME>_ prefix */
	const void *ops;    /* struct weft_transport_ops or struct weft_algo_ops */
};

/* The one symbol a plugin exports. Returns a NULL-terminated array of descriptors
 * that stay valid until the process exits, or NULL to decline loading (log why
 * through core->log first). Called once per file, under the registry's lock. */
typedef const struct weft_plugin_desc *const *(*weft_plugin_init_fn)(const struct weft_core_api *core);
/* Declared here so that a plugin's definition is checked against it. */
const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core);

#if defined(__GNUC__)
#define WEFT_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_PLUGIN_EXPORT
#endif

/* Helpers for weft_plugin_init, inline so that a plugin links nothing of the
 * core. Whether the core lends what every plugin of this ABI relies on
 * (logging, parameters, allocation): a plugin declines an older or broken core
 * instead of calling through a missing entry. */
static inline int weft_core_api_usable(const struct weft_core_api *core)
{
	return core && core->size >= offsetof(struct weft_core_api, free) + sizeof(core->free) && core->log &&
	       core->param_declare && core->param_get && core->alloc && core->calloc && core->free;
}

/* Declares the plugin's n parameters. -EEXIST (this file initialized twice, as
 * a test harness may do) leaves the first declaration standing. Returns 0, or
 * the first other error with *failed set to the index of that parameter. */
static inline int weft_plugin_declare_params(const struct weft_core_api *core, const struct weft_param_decl *params,
					     size_t n, size_t *failed)
{
	for (size_t i = 0; i < n; i++) {
		int rc = core->param_declare(core->self, &params[i]);
		if (rc < 0 && rc != -EEXIST) {
			*failed = i;
			return rc;
		}
	}
	return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* WEFT_PLUGIN_H */
