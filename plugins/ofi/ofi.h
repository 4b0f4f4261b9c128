/* SPDX-License-Identifier: Apache-2.0 */
/* ofi plugin: private declarations shared by its sources (context and domains
 * in ofi.c, memory regions in ofi_mem.c, endpoints and RMA in ofi_ep.c, the
 * calls that decide device memory in ofi_sys.c). */
#ifndef WEFT_OFI_H
#define WEFT_OFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <weft/kit.h>
#include <weft/plugin.h>

#define OFI_FI_VERSION FI_VERSION(1, 17)
/* A context opens at most two providers: the local one (same host) and the
 * remote one (other hosts); they are one and the same when both name it. */
#define OFI_MAX_DOMS 2
#define OFI_PROV_NAME_MAX 16
#define OFI_RAW_KEY_MAX 64
#define OFI_EP_NAME_MAX 256

/* How a signal is kept behind the puts posted before it on its endpoint. */
enum ofi_sig_mode {
	OFI_SIG_ORDERED = 0, /* the provider orders writes (FI_ORDER_RMA_WAW): post at once */
	OFI_SIG_WAIT = 1     /* hold the signal until every earlier op is delivery-complete */
};

/* Core services, set once by weft_plugin_init. The only process-wide state: the
 * core lends one table per plugin file for the life of the process. */
extern const struct weft_core_api *ofi_core;

#define OFI_LOG(lvl, ...) WEFT_KIT_LOG(ofi_core, (lvl), __VA_ARGS__)
#define OFI_ERR(...) OFI_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define OFI_WARN(...) OFI_LOG(WEFT_LOG_WARN, __VA_ARGS__)
#define OFI_INFO(...) OFI_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define OFI_DBG(...) OFI_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

struct ofi_ctx;
struct ofi_ep;
struct ofi_op;

/* The calls that decide whether device memory (FI_HMEM) works: the libfabric
 * ones whose answer depends on the provider, and the CUDA driver's lookup of
 * a pointer's device. One table, so that a test can stand in a provider with
 * FI_HMEM, which no library on our machines has. Each returns what the call
 * it wraps returns (libfabric: 0 or a negative FI_ code). */
struct ofi_sys_ops {
	int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
		       const struct fi_info *hints, struct fi_info **info);
	int (*domain)(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context);
	int (*endpoint)(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context);
	int (*mr_regattr)(struct fid_domain *domain, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr);
	/* The CUDA device ordinal of ptr: 0, or a negative code, logged. */
	int (*cuda_device)(const void *ptr, int *dev);
};
extern const struct ofi_sys_ops *ofi_sys;
#ifdef WEFT_TEST_HOOKS
/* Swaps the table (tests/test_ofi_mem.c); NULL restores the real one. */
void ofi_set_sys_ops(const struct ofi_sys_ops *ops);
#endif

/* One opened provider: fabric, domain, and the single RDM endpoint, address
 * vector and completion queue that every weft endpoint of that provider shares. */
struct ofi_dom {
	struct ofi_ctx *ctx;
	char prov[OFI_PROV_NAME_MAX]; /* the core provider's name: "shm", "tcp" */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	int wait_fd;       /* the CQ's FI_WAIT_FD descriptor, -1 where it has none */
	struct fid_ep *ep; /* NULL until the first connection needs it (ofi_dom_ep_ensure) */
	uint64_t mr_mode;
	size_t chunk;       /* largest single write: max_msg_size (and max_order_waw_size when ordered) */
	size_t inject_size;
	uint64_t op_flags;  /* FI_DELIVERY_COMPLETE when the provider accepted it */
	enum ofi_sig_mode sig_mode;
	bool hmem_cuda;             /* opened with FI_HMEM: CUDA memory registers with fi_mr_regattr */
	char name[OFI_EP_NAME_MAX]; /* fi_getname of ep */
	size_t namelen;
};

/* One weft context (one communicator). */
struct ofi_ctx {
	int rank;
	struct ofi_dom doms[OFI_MAX_DOMS];
	int ndoms;
	int local_dom;  /* index into doms serving same-host peers, -1 if none */
	int remote_dom; /* index serving other hosts, -1 if none */
	int64_t max_inflight;
	uint64_t next_key;     /* requested MR keys when the provider does not pick them */
	struct ofi_ep *eps;    /* every endpoint, for progress */
	struct ofi_op *orphans; /* ops of disconnected endpoints still owned by a provider */
	int nregions;          /* live registrations, for close's sanity check */
};

/* A local registration: one MR per opened domain, except that CUDA memory
 * has none in a domain without FI_HMEM (mr[k] NULL: its peers cannot reach it). */
struct ofi_mh {
	void *base;
	size_t len;
	enum weft_mem_type type;
	struct fid_mr *mr[OFI_MAX_DOMS];
};

/* A peer's region as imported: one entry per provider it was registered with. */
struct ofi_rmh_ent {
	char prov[OFI_PROV_NAME_MAX];
	uint32_t flags;    /* OFI_RENT_* */
	uint64_t addr;     /* base address (FI_MR_VIRT_ADDR) or 0 */
	uint64_t len;
	uint64_t key;      /* usable key (mapped from raw when OFI_RENT_RAW) */
	int mapped_dom;    /* index of the domain that mapped the raw key, -1 if none */
};
#define OFI_RENT_VIRT 0x1u
#define OFI_RENT_RAW 0x2u

struct ofi_rmh {
	int peer;
	int count;
	struct ofi_rmh_ent ent[OFI_MAX_DOMS];
};

/* ofi.c */
/* Logs "<call> failed: <fi_strerror>" and maps a libfabric code to weft's. */
int ofi_errno(const char *call, int fi_rc);
/* The same with a formatted call, for failures toward a peer: the line names
 * its rank, as every transport's does ("signal to rank 1: fi_mr_reg ..."). */
int ofi_errno_at(int fi_rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The mapping alone, for callers that log their own line. */
int ofi_code(int fi_rc);

/* ofi_mem.c */
int ofi_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh);
int ofi_mem_deregister(void *tc, void *mh);
int ofi_mem_serialize(void *tc, void *mh, void *buf, size_t *len);
int ofi_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh);
int ofi_mem_release(void *tc, void *rmh);

/* ofi.c: opens the domain's endpoint if it has none yet; 0 or -errno (logged). */
int ofi_dom_ep_ensure(struct ofi_dom *d);

/* ofi_ep.c */
int ofi_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep);
int ofi_connect(void *ep, const void *peer_addr, size_t len);
int ofi_disconnect(void *ep);
int ofi_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
int ofi_signal(void *ep, void *rmh, uint64_t roff, uint64_t value);
int ofi_flush(void *ep);
int ofi_progress(void *tc);
int ofi_wait_fds(void *tc, int *fds, int max);
int ofi_ep_describe(void *ep, char *buf, size_t len);
/* Frees ops orphaned by disconnect; only after their domains' endpoints are closed. */
void ofi_free_orphans(struct ofi_ctx *ctx);

/* Copies a provider name field (NUL-padded, OFI_PROV_NAME_MAX bytes) and checks
 * it is a NUL-terminated [a-z0-9_] name. Returns 0 or -1. */
int ofi_prov_name_check(const unsigned char *field, char out[OFI_PROV_NAME_MAX]);

#endif /* WEFT_OFI_H */
