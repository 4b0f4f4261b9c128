/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: private declarations shared by its sources (descriptor and
 * context in ib.c, discovery in ib_dev.c, memory in ib_mem.c, endpoints and
 * operations in ib_ep.c, the libibverbs table in ib_verbs.c; the CUDA side of
 * dma-buf is ib_dmabuf.c, declared in ib_dmabuf.h). */
#ifndef WEFT_IBP_H
#define WEFT_IBP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include <weft/kit.h>
#include <weft/plugin.h>

#include "ib_dmabuf.h"

#define IBP_MAX_DEVS 16   /* verbs devices one context opens */
#define IBP_MAX_PORTS 32  /* ports one context uses */
#define IBP_MAX_SLOTS 4096 /* token slots of the imm signal scheme (12 bits of imm) */
#define IBP_IMM_SLOT_SHIFT 20
#define IBP_IMM_VALUE_MASK ((1u << IBP_IMM_SLOT_SHIFT) - 1) /* low bits of a token carried in imm */
#define IBP_WRID_RECV UINT64_MAX /* wr_id of every posted receive; sends carry their sequence */
#define IBP_PSN_MASK 0xffffffu

/* Every verbs call goes through this table, so that unit tests can drive the
 * plugin with a double on machines without RDMA hardware. Conventions: calls
 * returning int return 0 or a positive errno value (what libibverbs documents
 * for most verbs; the wrappers normalise the others); calls returning a pointer
 * return NULL with errno set. poll_cq returns a count or a negative value. */
struct ibp_verbs_ops {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd,
					int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	int (*poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
	/* Reads a sysfs attribute (one short line) into buf, NUL-terminated, with
	 * the trailing newline removed. Returns 0 or a positive errno value. */
	int (*read_sysfs)(const char *path, char *buf, size_t len);
	/* Resolves a sysfs link (the device's PCI path). Returns 0 or a positive errno. */
	int (*real_path)(const char *path, char *buf, size_t len);
};

/* Core services and the verbs table: the plugin's process-wide state, with the
 * CUDA driver's in ib_dmabuf.c. The core lends one services table per plugin
 * file for the life of the process. */
extern const struct weft_core_api *ibp_core;
extern const struct ibp_verbs_ops *ibp_verbs;
extern const struct ibp_verbs_ops ibp_verbs_real;

/* Test hooks (internal; not exported from the module, which exports only
 * weft_plugin_init). NULL restores the default. The CUDA driver's is
 * ibp_set_cuda (ib_dmabuf.h). */
void ibp_set_verbs(const struct ibp_verbs_ops *ops);

#define IBP_LOG(lvl, ...) WEFT_KIT_LOG(ibp_core, (lvl), __VA_ARGS__)
#define IBP_ERR(...) IBP_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define IBP_WARN(...) IBP_LOG(WEFT_LOG_WARN, __VA_ARGS__)
#define IBP_INFO(...) IBP_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define IBP_DBG(...) IBP_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

/* How a signal reaches the peer's token. */
enum ibp_sig_mode {
	IBP_SIG_ATOMIC = 0, /* fenced IBV_WR_ATOMIC_FETCH_AND_ADD of the increment */
	IBP_SIG_IMM = 1     /* IBV_WR_RDMA_WRITE_WITH_IMM; the peer's progress writes the token */
};

/* Parameters, read once per open (or describe/probe). */
struct ibp_settings {
	char devices[256];      /* "" = every active port */
	int64_t gid_index;      /* -1 = automatic */
	int64_t sq_depth;
	int64_t rq_depth;
	int64_t cq_size;        /* 0 = sq_depth + rq_depth */
	int64_t signal_every;
	uint64_t max_msg_size;  /* 0 = the port's max_msg_sz */
	int64_t mtu;            /* bytes; 0 = the port's active MTU */
	int64_t timeout;
	int64_t retry_cnt;
	int64_t rnr_retry;
	int64_t min_rnr_timer;
	int64_t service_level;
	int64_t traffic_class;
	int64_t hop_limit;
	int peer_memory;        /* nvidia-peermem: ibv_reg_mr accepts CUDA pointers */
	char signal[16];        /* auto, atomic, imm */
	int64_t imm_slots;
};

/* One opened verbs device. */
struct ibp_dev {
	struct ibv_context *vctx;
	struct ibv_pd *pd;      /* only in a context (open) */
	char name[IBV_SYSFS_NAME_MAX];
	struct ibv_device_attr attr;
};

/* One usable (active) port of an opened device, with what discovery learnt. */
struct ibp_port {
	int dev;                /* index into ibp_fabric.devs */
	uint8_t num;
	char name[IBV_SYSFS_NAME_MAX + 8]; /* "mlx5_0:1" */
	struct ibv_port_attr attr;
	double gbytes;          /* GB/s: active_speed x active_width */
	int numa_node;          /* -1 unknown */
	char pci_path[64];      /* "" unknown */
	int gid_index;          /* -1: none usable (InfiniBand without a GID works by LID) */
	union ibv_gid gid;
	char gid_type[16];      /* "RoCE v2", "IB/RoCE v1", "" */
};

/* What discovery found: devices opened, ports selected. */
struct ibp_fabric {
	int ndevices_found;     /* devices libibverbs listed (0: no RDMA device) */
	struct ibp_dev devs[IBP_MAX_DEVS];
	int ndevs;
	struct ibp_port ports[IBP_MAX_PORTS];
	int nports;
	int nports_down;
};

struct ibp_ep;
struct ibp_mh;

/* One weft context (one communicator). */
struct ibp_ctx {
	int rank;
	struct ibp_settings set;
	struct ibp_fabric fab;
	struct ibp_ep *eps;     /* every endpoint, for progress */
	struct ibp_mh *mhs;     /* every registration, for the imm receiver's checks */
	int nregions;
	bool cuda_warned;       /* said once why CUDA memory is not reachable */
};

/* A local registration: one MR per opened device. */
struct ibp_mh {
	void *base;
	size_t len;
	enum weft_mem_type type;
	struct ibv_mr *mr[IBP_MAX_DEVS];
	struct ibp_mh *next, *prev;
};

/* A peer's region as imported. */
struct ibp_rkey {
	uint64_t guid;          /* node GUID of the device the key belongs to */
	uint32_t rkey;
};
struct ibp_rmh {
	int peer;
	uint64_t addr;
	uint64_t len;
	int count;
	struct ibp_rkey keys[IBP_MAX_DEVS];
};

/* One queued put or signal, kept in submission order until fully posted. */
enum ibp_op_kind { IBP_OP_PUT = 0, IBP_OP_SIGNAL = 1 };
struct ibp_op {
	struct ibp_op *next;
	enum ibp_op_kind kind;
	char *laddr;
	uint32_t lkey;
	uint64_t raddr;
	uint32_t rkey;
	size_t len;
	size_t posted;
	int token;              /* signal: index into ep->tokens */
	uint64_t value;         /* signal: the target value */
};

/* A remote token this endpoint has signalled: the last value (the increments
 * of the atomic scheme start from it) and its slot in the peer's mailbox. */
struct ibp_token {
	uint64_t raddr;
	uint32_t rkey;
	uint64_t last;          /* value the posted work requests bring it to */
	uint64_t queued;        /* highest value accepted, posted or not */
	uint32_t slot;
};

/* The peer's endpoint address, as carried in the connect blob. */
struct ibp_remote {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint8_t link_layer;
	uint8_t mtu;
	uint8_t port;
	uint8_t flags;
	uint8_t max_rd_atomic;
	union ibv_gid gid;
	uint64_t guid;
	uint64_t mailbox_addr;
	uint32_t mailbox_rkey;
	uint32_t mailbox_slots;
};
#define IBP_EPF_ATOMICS 0x1u /* the device accepts remote atomics */
#define IBP_EPF_GRH 0x2u     /* the address needs a GRH (RoCE, or a routed IB GID) */

struct ibp_ep {
	struct ibp_ctx *ctx;
	int port;               /* index into ctx->fab.ports */
	int peer_rank;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t psn;
	bool connected;
	int error;              /* sticky: the first failure on this endpoint */
	enum ibp_sig_mode sig_mode;
	enum ibv_mtu mtu;
	struct ibp_remote rem;
	size_t chunk;           /* largest single RDMA write */
	/* Send queue accounting: WR n carries wr_id n when signalled; a signalled
	 * completion retires it and every WR before it (RC completes in order). */
	uint64_t posted;
	uint64_t completed;
	uint64_t sig_end;       /* 1 + the sequence of the last signalled WR */
	int64_t since_signal;
	/* Local buffers the HCA reads or writes per WR: a signal's payload, an
	 * atomic's fetched value. One 8-byte slot per send-queue entry. */
	uint64_t *scratch;
	struct ibv_mr *scratch_mr;
	/* Receiving side of imm signals: slot -> token address, written by the
	 * peer, plus one word that flush writes to; and the last value per slot. */
	uint64_t *mailbox;
	struct ibv_mr *mailbox_mr;
	uint32_t nslots;
	uint64_t *slot_last;
	int recv_posted;
	/* Sending side: tokens signalled through this endpoint. */
	struct ibp_token *tokens;
	int ntokens, cap_tokens;
	/* Ops not yet fully posted. */
	struct ibp_op *pend_head, *pend_tail;
	int npend;
	struct ibp_ep *next, *prev;
};

/* ib.c */
/* The module's one export (also reachable from the test library). */
WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core);
int ibp_read_settings(struct ibp_settings *s);
/* Logs "<verb> on <where> failed: <strerror>" once and returns -WEFT_ERR_TRANSPORT. */
int ibp_verbs_fail(const char *verb, const char *where, int err);
extern const struct weft_transport_ops ibp_ops;

/* ib_dev.c */
/* One entry of the `devices` parameter: a device name and a port (0 = any). */
struct ibp_dev_sel {
	char name[IBV_SYSFS_NAME_MAX];
	int port;
};
#define IBP_MAX_SEL 32
/* Parses "mlx5_0:1,mlx5_1" into sel. -WEFT_ERR_CONFIG (logged) when malformed. */
int ibp_parse_devices(const char *spec, struct ibp_dev_sel *sel, int *n);
/* Lists devices, opens them, keeps the active ports the settings select and
 * picks each port's GID. Down ports are skipped with an info message. Returns
 * 0 (possibly with no port: see fab->ndevices_found), -WEFT_ERR_CONFIG, or a
 * verbs failure. */
int ibp_fabric_open(struct ibp_fabric *fab, const struct ibp_settings *s);
void ibp_fabric_close(struct ibp_fabric *fab);
/* Picks a port's GID index: `forced` >= 0 takes that entry; else InfiniBand
 * uses a GID only when the port has one at index 0 and Ethernet prefers RoCE v2
 * with an IPv4-mapped address, then RoCE v2, then RoCE v1. Sets gid_index, gid
 * and gid_type. Returns 0, -WEFT_ERR_CONFIG (bad forced index) or
 * -WEFT_ERR_NO_DEVICE (an Ethernet port without a usable GID). */
int ibp_choose_gid(struct ibp_fabric *fab, struct ibp_port *p, int64_t forced);
/* GB/s of a port from active_speed and active_width (0 when unknown). */
double ibp_port_gbytes(const struct ibv_port_attr *a);
const char *ibp_link_name(uint8_t link_layer);
int ibp_mtu_bytes(enum ibv_mtu m);

/* ib_mem.c */
int ibp_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh);
int ibp_mem_deregister(void *tc, void *mh);
int ibp_mem_serialize(void *tc, void *mh, void *buf, size_t *len);
int ibp_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh);
int ibp_mem_release(void *tc, void *rmh);
/* True when [addr, addr+len) lies inside one host-memory registration of ctx. */
bool ibp_mem_contains(const struct ibp_ctx *ctx, uint64_t addr, size_t len);

/* ib_ep.c */
int ibp_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep);
int ibp_connect(void *ep, const void *peer_addr, size_t len);
int ibp_disconnect(void *ep);
int ibp_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
int ibp_signal(void *ep, void *rmh, uint64_t roff, uint64_t value);
int ibp_flush(void *ep);
int ibp_progress(void *tc);
int ibp_ep_describe(void *ep, char *buf, size_t len);
/* Maps an error completion to weft's code: the peer's fault (retries
 * exhausted, remote access refused) is -WEFT_ERR_PEER, anything else
 * -WEFT_ERR_TRANSPORT. */
int ibp_wc_code(enum ibv_wc_status st);

/* Endpoint address and memory blob sizes (see ib_ep.c and ib_mem.c). */
#define IBP_ADDR_MAGIC 0x45424957u /* "WIBE" */
#define IBP_ADDR_VERSION 1
#define IBP_ADDR_LEN 64
#define IBP_MEM_MAGIC 0x4d424957u /* "WIBM" */
#define IBP_MEM_VERSION 1
#define IBP_MEM_HDR 32
#define IBP_MEM_ENT 16

#endif /* WEFT_IBP_H */
