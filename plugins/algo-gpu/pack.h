/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: host-side declarations shared by the pack (pack.c) and its
 * copy-engine schedules (ce.c): the parameters, the per-communicator context
 * and the entry points between the two files. */
#ifndef WAG_PACK_H
#define WAG_PACK_H

#include <weft/kit.h>
#include <weft/plugin.h>

#include "hier.h"
#include "wag.h"

/* The pack's parameters, read once in weft_plugin_init. */
struct wag_cfg {
	uint64_t ll_max, llx_max, oneshot_max, ag_oneshot_max, min_seg, tile, p2p_tile, p2p_ll_max;
	int64_t oneshot_blocks, rsag_blocks, ag_blocks, depth, p2p_blocks;
	uint64_t ce_chunk;             /* largest pipeline chunk of the copy-engine schedules */
	uint64_t ce_min[WEFT_COLL_COUNT]; /* smallest call (selection bytes) per collective; 0 = off */
	uint64_t direct_min[WEFT_COLL_COUNT]; /* the same for the direct kernels */
	int64_t direct_blocks, direct_reduce_blocks;
	int64_t ce_allreduce_push;     /* two ranks: allreduce-ce pushes only (the output is the staging) */
	uint64_t hier_chunk, hier_tree_max; /* the cross-host executor's ring slots; its tree's largest call */
	int64_t hier_depth;
};
extern struct wag_cfg wag_cfg;
extern const struct weft_core_api *wag_core;

#define WAG_LOG(level, ...) wag_core->log(wag_core->self, level, __VA_ARGS__)

struct wag_peer {
	weft_conn_t *conn;
	weft_rmem_t *rmem;
	weft_memchan_t *chan; /* only for the abort flag its device handle carries */
};

struct wag_ce;
struct wag_xh;
struct wag_win;

/* Per-communicator state of the pack, made by its comm_setup (ABI 0.3). */
struct wag_ctx {
	weft_comm_t *comm;
	int rank, nranks, dev, sms;
	int ready; /* setup completed on this rank: teardown meets the others */
	const struct weft_prim_api *prim;
	void *scratch;
	weft_mem_t *mem;
	struct wag_peer peers[WAG_MAX_RANKS];
	struct wag_layout lay;
	struct wag_kargs base; /* rank, nranks, scr, abort, lay filled */
	struct wag_ce *ce;     /* the copy-engine schedules' state (ce.c), made on first use */
	/* Every pair of ranks reaches each other through nvlink on one host:
	 * the kernels' mesh (scratch mapped everywhere) is made; else only the
	 * cross-host algorithms (xhost.c) serve. */
	int mesh;
	struct wag_xh *xh; /* the cross-host algorithms' state */
	struct wag_win *wins; /* windows mapped here (win.c) */
	/* The kernels' report of a call whose signatures differed (wag.h's
	 * sigerr), pinned and mapped; NULL where the GPU cannot map it. */
	uint64_t *sigerr;
	int sig_logged;
};

/* The pack's kinds of algorithm (pack.c's table). */
enum wag_kind {
	WAG_AR_LL,
	WAG_AG_LL,
	WAG_RS_LL,
	WAG_A2A_LL,
	WAG_BC_LL,
	WAG_AR_ONESHOT,
	WAG_AR_RSAG,
	WAG_AG_ONESHOT,
	WAG_AG_RING,
	WAG_RS_ONESHOT,
	WAG_RS_RING,
	WAG_RED_ONESHOT,
	WAG_RED_RING,
	WAG_BC_ONESHOT,
	WAG_BC_RING,
	WAG_A2A_ONESHOT,
	WAG_A2A_RING,
	WAG_AR_CE,
	WAG_RS_CE,
	WAG_AG_CE,
	WAG_BC_CE,
	WAG_A2A_CE,
	/* The direct kernels on the callers' buffers (ce.c shares their mapping). */
	WAG_AR_DIRECT,
	WAG_RS_DIRECT,
	WAG_AG_DIRECT,
	WAG_BC_DIRECT,
	WAG_A2A_DIRECT,
};

/* A code's description for the log: the kit's, which has every name. */
static inline const char *wag_errname(int rc)
{
	return weft_kit_strerror(rc);
}
size_t wag_esize(enum weft_datatype t);
/* Syncs a stream-less call and returns the comm's status if it stopped early. */
int wag_sync_call(struct wag_ctx *c, char *err, size_t errlen);
/* The call's signature (weft_coll_args.sig; 0 from a core before ABI 0.3). */
uint64_t wag_call_sig(const struct weft_coll_args *a);
/* Send/recv: the batch entries' signatures (weft_coll_args.p2p_sig), or NULL. */
const uint64_t *wag_call_p2p_sig(const struct weft_coll_args *a);
/* Logs that rank peer's call (theirs) differs from this rank's (mine). */
void wag_sig_report(struct wag_ctx *c, int peer, uint64_t mine, uint64_t theirs);
/* -WEFT_ERR_MISMATCH once a kernel of this comm found a peer's call to
 * differ (logged once), else 0. Reads host memory only: no CUDA call. */
int wag_sig_status(struct wag_ctx *c);
/* Runs one call with a kernel algorithm of the pack (pack.c). */
int wag_run(struct wag_ctx *c, const struct weft_coll_args *a, enum wag_kind k);
/* Runs one call on the callers' own buffers (ce.c): on the copy engines
 * (WAG_*_CE) or with the direct kernels (WAG_*_DIRECT); falls back to
 * `fallback` on every rank at once where some rank's buffers cannot be shared. */
int wag_ce_run(struct wag_ctx *c, const struct weft_coll_args *a, enum wag_kind k, enum wag_kind fallback);
/* Releases the copy-engine state (after the device and every rank are idle). */
void wag_ce_free(struct wag_ctx *c);
/* Waits for the last call that read or wrote peers' windows (win.c). */
void wag_ce_quiesce(struct wag_ctx *c);

/* Windows (win.c): the pack's hooks (weft_algo_ops), and each rank's part of
 * window w mapped here into base[nranks]: 0, -ENOENT where some rank cannot
 * map its peers' parts (agreed: the same on every rank), or the exchange's
 * error. Collective at a window's first use only. */
int wag_win_register(void *pack_state, const struct weft_algo_window *w);
void wag_win_deregister(void *pack_state, const struct weft_algo_window *w);
int wag_win_parts(struct wag_ctx *c, const struct weft_algo_window *w, char **base);
void wag_win_free(struct wag_ctx *c);

/* A pre-multiplied sum turned into a plain one (b), its scaled input in
 * the output or in stream-ordered memory *tmp; premul_end releases that and
 * passes rc on. */
int wag_premul_begin(struct wag_ctx *c, const struct weft_coll_args *a, struct weft_coll_args *b, void **tmp);
int wag_premul_end(const struct weft_coll_args *a, void *tmp, int rc);

/* The cross-host algorithms (xhost.c). dev_peers: bit q where the rings to
 * rank q are device memory (both reach each other through nvlink). */
int wag_xh_create(struct wag_ctx *c, const struct weft_algo_comm *ac, uint64_t dev_peers, struct wag_xh **out);
/* After every rank's last call (ctx_free's barrier). */
void wag_xh_free(struct wag_xh *h);
int wag_xh_supports(struct wag_ctx *c, const struct weft_coll_args *a);
int wag_xh_run(struct wag_ctx *c, const struct weft_coll_args *a);

#endif
