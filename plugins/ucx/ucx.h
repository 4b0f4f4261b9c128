/* SPDX-License-Identifier: Apache-2.0 */
/* ucx plugin: private declarations shared by its sources (descriptor, parameters
 * and contexts in ucx.c, memory in ucx_mem.c, endpoints and RMA in ucx_ep.c,
 * the calls that decide device memory in ucx_sys.c). */
#ifndef WEFT_UCX_H
#define WEFT_UCX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include <weft/kit.h>
#include <weft/plugin.h>

/* Longest value of a string parameter we pass on to UCX. */
#define UCX_PARAM_MAX 256
/* Largest packed remote key and worker address we accept from a peer. UCX's
 * own are a few hundred bytes; the limits only bound what a bad peer can make
 * us allocate. */
#define UCX_RKEY_MAX 4096
#define UCX_ADDR_MAX 65536

/* How a signal stays behind the puts posted before it on its endpoint. */
/* Which of UCX's protocol layers carries the ops (parameter protocols). */
enum ucx_proto {
	UCX_PROTO_V1 = 0,  /* UCX_PROTO_ENABLE=n where UCX has the key */
	UCX_PROTO_UCX = 1  /* UCX's own default */
};

enum ucx_sig_mode {
	UCX_SIG_FLUSH = 0, /* wait for an endpoint flush covering them, then post the token */
	UCX_SIG_FENCE = 1  /* ucp_worker_fence, then post the token at once */
};

/* Whether endpoints ask UCX to detect peer failures (UCP_ERR_HANDLING_MODE_PEER). */
enum ucx_err_mode {
	UCX_ERRMODE_AUTO = 0, /* peer, except toward same-host peers when shared memory is available */
	UCX_ERRMODE_PEER = 1,
	UCX_ERRMODE_NONE = 2
};

/* Core services, set once by weft_plugin_init. The only process-wide state: the
 * core lends one table per plugin file for the life of the process. */
extern const struct weft_core_api *ucx_core;

#define UCX_LOG(lvl, ...) WEFT_KIT_LOG(ucx_core, (lvl), __VA_ARGS__)
#define UCX_ERR(...) UCX_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define UCX_WARN(...) UCX_LOG(WEFT_LOG_WARN, __VA_ARGS__)
#define UCX_INFO(...) UCX_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define UCX_DBG(...) UCX_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

struct ucx_ep;
struct ucx_sig;

/* The UCX calls that decide device memory: which memory types a context
 * reaches, and mapping a buffer of one. One table, so that a test can stand
 * in a UCX built with CUDA, which no library on our machines is. */
struct ucx_sys_ops {
	ucs_status_t (*context_query)(ucp_context_h context, ucp_context_attr_t *attr);
	ucs_status_t (*mem_map)(ucp_context_h context, const ucp_mem_map_params_t *params, ucp_mem_h *memh);
};
extern const struct ucx_sys_ops *ucx_sys;
#ifdef WEFT_TEST_HOOKS
/* Swaps the table (tests/test_ucx_mem.c); NULL restores the real one. */
void ucx_set_sys_ops(const struct ucx_sys_ops *ops);
#endif

/* Settings read from the parameters once per open (or describe/probe). */
struct ucx_settings {
	char tls[UCX_PARAM_MAX];         /* "" when unset: UCX's choice */
	char net_devices[UCX_PARAM_MAX]; /* "" when unset */
	char options[UCX_PARAM_MAX];     /* "" or "KEY=VALUE;KEY=VALUE" for ucp_config_modify */
	int64_t max_inflight;
	enum ucx_sig_mode sig_mode;
	enum ucx_err_mode err_mode;
	int64_t error_delay_ms;
	enum ucx_proto protocols;
};

/* One weft context (one communicator): a UCP context and its one worker. */
struct ucx_ctx {
	int rank;
	struct ucx_settings set;
	ucp_context_h context;
	ucp_worker_h worker; /* NULL until the first endpoint (ucx_worker_ensure) */
	bool has_shm;        /* the context has a cross-process shared-memory transport */
	bool has_cuda;       /* ucp_context_query lists UCS_MEMORY_TYPE_CUDA */
	ucp_address_t *addr; /* this worker's address, for endpoint() */
	size_t addrlen;
	struct ucx_ep *eps;         /* every endpoint, for progress */
	struct ucx_ep *closing;     /* disconnected endpoints UCX is not done with */
	struct ucx_sig *orphan_sigs; /* token buffers of abandoned signals, freed at close */
	int pending_error;          /* a failure of queued work, for progress to report */
	int64_t pending_ns;         /* when it was seen */
	struct ucx_rmh *rmhs;       /* every imported region, to drop an ep's keys at disconnect */
	int nregions;               /* live registrations, for close's sanity check */
	bool peer_gone;             /* an endpoint was torn down after its peer's process ended */
	int efd;                    /* the worker's event descriptor (ucp_worker_get_efd), -1 if none */
};

/* A local registration. */
struct ucx_mh {
	void *base;
	size_t len;
	ucs_memory_type_t mem_type; /* what it was mapped as; put passes it on */
	ucp_mem_h memh;
	void *rkey;       /* packed remote key (ucp_rkey_pack), released at deregister */
	size_t rkey_len;
};

/* A peer's unpacked remote key on one endpoint (ucp_ep_rkey_unpack needs the ep). */
struct ucx_rkey_ent {
	struct ucx_rkey_ent *next;
	struct ucx_ep *ep;
	ucp_rkey_h rkey;
};

/* A peer's region as imported: the validated packed key, unpacked lazily per endpoint. */
struct ucx_rmh {
	struct ucx_rmh *next, *prev;
	struct ucx_ctx *ctx;
	int peer;
	uint64_t base;
	uint64_t len;
	unsigned char *rkey; /* rkey_len bytes, followed by zero slack (see ucx_mem.c) */
	size_t rkey_len;
	struct ucx_rkey_ent *unpacked;
};

/* ucx.c */
/* Maps a UCX status to weft's code: peer failures to -WEFT_ERR_PEER, the rest
 * to -WEFT_ERR_TRANSPORT (or -ENOMEM, -EAGAIN). */
int ucx_code(ucs_status_t st);
/* Logs "<what> failed: <ucs_status_string>" once and returns ucx_code. */
int ucx_errno(const char *what, ucs_status_t st);
/* The class of a UCX transport name: "shm", "tcp", "ib", "gpu" or "other". */
const char *ucx_tl_class(const char *tl);
/* Creates the context's worker if it has none yet; 0 or -errno (logged). */
int ucx_worker_ensure(struct ucx_ctx *ctx);
/* Whether a context reaches CUDA memory (UCP_ATTR_FIELD_MEMORY_TYPES); a
 * failed query is logged at debug and reads as no. */
bool ucx_context_cuda(ucp_context_h context);

/* ucx_mem.c */
int ucx_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh);
int ucx_mem_deregister(void *tc, void *mh);
int ucx_mem_serialize(void *tc, void *mh, void *buf, size_t *len);
int ucx_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh);
int ucx_mem_release(void *tc, void *rmh);
/* The remote key of r on ep, unpacked on first use. */
int ucx_rkey_get(struct ucx_rmh *r, struct ucx_ep *ep, ucp_ep_h uep, ucp_rkey_h *out);
/* Destroys every key unpacked on ep (before the UCP endpoint goes away). */
void ucx_rkeys_drop_ep(struct ucx_ctx *ctx, struct ucx_ep *ep);

/* ucx_ep.c */
int ucx_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep);
int ucx_connect(void *ep, const void *peer_addr, size_t len);
int ucx_disconnect(void *ep);
int ucx_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
int ucx_signal(void *ep, void *rmh, uint64_t roff, uint64_t value);
int ucx_flush(void *ep);
int ucx_progress(void *tc);
int ucx_wait_fds(void *tc, int *fds, int max);
int ucx_ep_describe(void *ep, char *buf, size_t len);
/* Size of the plugin's part of every UCP request (UCP_PARAM_FIELD_REQUEST_SIZE). */
size_t ucx_request_size(void);
/* True while UCX may still use keys unpacked on ep (requests, queued signals, a close). */
bool ucx_ep_busy(const struct ucx_ep *ep);
/* Hands ep a released key to destroy once it is idle. */
void ucx_ep_add_zombie(struct ucx_ep *ep, struct ucx_rkey_ent *e);
/* close(): disconnects every endpoint and waits a bounded time for UCX to
 * finish with them; what remains is abandoned to the worker's destruction. */
void ucx_close_endpoints(struct ucx_ctx *ctx);
/* close(), after ucp_worker_destroy: frees what ucx_close_endpoints left. */
void ucx_free_closed(struct ucx_ctx *ctx);

#endif /* WEFT_UCX_H */
