/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: private declarations. The pack runs collectives on host memory
 * through nothing but the primitive API (struct weft_prim_api). */
#ifndef AH_H
#define AH_H

#include <stddef.h>
#include <stdint.h>

#include <weft/kit.h>
#include <weft/plugin.h>

#define AH_NAME "algo-host"

/* Ahead of the scratch areas, a header: a random canary (8 bytes) the peers
 * compare with what they read through their mapping of this rank's scratch,
 * and the CPU this rank last waited on (4 bytes at offset 8), in the first 64
 * bytes; then per rank q two 64-byte lines: the token q writes when it has
 * sent us chunks, and the one it writes when it has consumed ours. */
/* Rounded up to whole pages, so that the slots keep the page alignment of
 * the allocation (what transports that pin or bounce pages prefer). */
#define AH_HDR_BYTES(nranks) \
	(((64 + (size_t)(nranks) * 128 + 64 + (size_t)(nranks) * 64 + 64 + (size_t)(nranks) * 64) + 4095) & \
	 ~(size_t)4095)
/* The publish lines that follow (see ah_pull_run): how many chunks this rank
 * has published, then per rank q how many of them q has consumed. */
#define AH_PUB_OFF(nranks) (64 + (size_t)(nranks) * 128)
#define AH_PUBC_OFF(nranks, q) (AH_PUB_OFF(nranks) + 64 + (size_t)(q) * 64)
/* Last, the direct line (see ah_direct_gather): how many cached direct
 * gathers this rank has entered, and the generation of its output buffer's
 * registration. */
#define AH_DIR_OFF(nranks) AH_PUBC_OFF(nranks, nranks)
/* Call signatures (ABI 0.3's weft_coll_args.sig) ride in those lines: the
 * first chunk of a call to each peer, the first publish and the first direct
 * line of a call carry the call's signature, in one of AH_SIG_ENTRIES entries
 * {number of the chunk, publish or line; signature} after the line's first
 * word (the direct line's first two). The receiver compares it with its own
 * (see engine.c). Then per rank q a line this rank puts its entries for q
 * from, where q's header is reached by put rather than by store. */
#define AH_SIG_ENTRIES 3
#define AH_SIGOUT_OFF(nranks, q) (AH_DIR_OFF(nranks) + 64 + (size_t)(q) * 64)
/* Out-of-band tag of the canary message (below the core's reserved tags). */
#define AH_TAG_CANARY 0x41480001u
#define AH_BOOT_ID 40

/* The services table weft_plugin_init received; valid until exit. */
extern const struct weft_core_api *ah_core;

/* The pack's parameters, section [algo-host] or WEFT_ALGO_HOST_<KEY>: the
 * rows of algos.c declare them (their defaults live there only) and
 * weft_kit_params_load reads them into this struct. */
struct ah_params {
	size_t chunk, scratch, small_max, direct_min, cached_min, cached_max;
	size_t oneshot_push_max, nt_min, rsag_push_min;
	size_t rd_max, bruck_max, a2a_bruck_max, halving_max, tree_min;
	uint64_t poll_us;
	int map, pull, nudge, cached_oversub, rsag_push_always, numa;
	int many_ranks;
	const char *transport;
};
extern const struct weft_kit_param ah_param_rows[];
extern const size_t ah_nparams;

#define AH_LOG(level, ...) ah_core->log(ah_core->self, level, __VA_ARGS__)

/* One peer's half of the channels between this rank and it. Data from us to the
 * peer lands in its scratch area (our rank's slots); "slot free" comes back on
 * free_sem. Counters run over the life of the communicator, so tokens only grow. */
struct ah_peer {
	int ready;
	weft_conn_t *conn;
	weft_rmem_t *rscratch;   /* the peer's scratch area */
	weft_sem_t *data_sem;    /* raised by the peer: chunks it has sent us */
	weft_sem_t *free_sem;    /* raised by the peer: our chunks it has consumed */
	weft_rsem_t *data_rsem;  /* the peer's data_sem for us */
	weft_rsem_t *free_rsem;  /* the peer's free_sem for us */
	char *rmap;              /* the peer's scratch slots for us, mapped into this
				  * process and checked host-usable; NULL: put through staging */
	/* Both ranks of the pair map each other: tokens are plain stores into
	 * the headers (see engine.c), not semaphores. */
	int fast;
	uint64_t *rdata, *rfree; /* in the peer's header: our tokens for it */
	uint64_t *ldata, *lfree; /* in our header: its tokens for us */
	const uint32_t *rcpu;    /* in the peer's header: the CPU it last waited on */
	const uint64_t *rpub;    /* in the peer's header: chunks it has published */
	uint64_t *rpubc;         /* in the peer's header: how many of those we consumed */
	const uint64_t *lpubc;   /* in our header: how many of ours the peer consumed */
	const char *rpubarea;    /* the peer's publish area (its own area of its scratch) */
	weft_rmem_t *rdirect;    /* the peer's output buffer (kept while cached, see ah_direct_gather) */
	uint64_t rd_mine, rd_theirs; /* the generations exchanged for rdirect */
	const uint64_t *rdir;    /* in the peer's header: its direct line */
	uint64_t tx_sent;        /* chunks sent to the peer */
	uint64_t tx_flushed;     /* of those, how many are known complete (staging reusable) */
	uint64_t rx_done;        /* chunks from the peer consumed */
	uint64_t free_sent;      /* the last "slot free" token sent to the peer */
	/* Call signatures: the call (ah_ctx.call_no) whose signature this peer was
	 * last sent, and last checked, on each channel. */
	uint64_t run_sent, run_seen, pull_seen, dir_seen;
};

/* Per-communicator state, shared by every algorithm of the pack: the pack's
 * comm_setup makes it and comm_teardown frees it (ABI 0.3). */
struct ah_ctx {
	weft_comm_t *comm;
	int rank, nranks;
	const struct weft_prim_api *prim;
	size_t chunk;     /* bytes per slot, a multiple of 64 */
	unsigned nslots;  /* slots per peer, at least 2 */
	size_t area;      /* chunk * nslots: one peer's part of scratch and staging */
	char *transport;  /* NULL: the core chooses */
	char *scratch;    /* nranks areas; area p receives from rank p */
	char *scratch_base; /* hdr bytes of header (canary, tokens), then scratch */
	size_t hdr;         /* AH_HDR_BYTES(nranks) */
	weft_mem_t *scratch_mem;
	char *staging;    /* nranks areas; area p holds what goes to rank p */
	weft_mem_t *staging_mem;
	int scratch_tp, staging_tp; /* from prim->mem_alloc (else posix_memalign) */
	char *temp;       /* one chunk, for our own input when it would be overwritten */
	void *premul;     /* this rank's scaled input of a pre-multiplied sum (grows, kept) */
	size_t premul_len;
	void *work;       /* the log-step algorithms' own buffer (grows, kept; see ah_work) */
	size_t work_len;
	/* The log-step algorithms' numbering (see ah_place_ready): vr[v] is the
	 * rank numbered v, rv[r] rank r's number. placed: -1 not yet agreed. */
	int *vr, *rv;
	int placed;
	int numa;         /* parameter numa */
	struct ah_peer *peers;
	int broken;       /* a transfer failed half-way: channels are out of step */
	int map;          /* parameter map: copy straight into peers' mapped scratch */
	uint64_t canary;  /* at scratch_base, see map_peer */
	size_t direct_min; /* parameter direct_min: smallest part ah_direct_gather moves (0: never) */
	size_t *doff, *dbytes; /* per rank, for ah_direct_gather */
	size_t cached_min, cached_max; /* parameters: block sizes for the cached direct gather (min 0: none) */
	int cached_oversub; /* parameter: the cached direct gather also when ranks outnumber CPUs */
	int nudge;        /* parameter nudge: move off a CPU shared with a waiting peer */
	char boot_id[40]; /* this kernel's boot id (AH_BOOT_ID bytes): peers under another cannot map */
	uint64_t nudged_ns; /* when this rank last did */
	weft_mem_t *dir_mem; /* the cached registration of our output buffer */
	void *dir_ptr;
	size_t dir_len;
	uint64_t dir_gen, dir_seq;
	int dir_volatile; /* dir_mem lies in a shared segment: register anew each call */
	weft_mem_t *src_mem; /* the kept registration of the input ah_direct_gather puts from */
	const void *src_ptr;
	size_t src_len;
	int src_volatile; /* src_mem lies in a shared segment: register anew each call */
	uint64_t poll_ns; /* parameter poll_us: how long ah_wait polls a mapped peer's token */
	int spin;         /* no more ranks than CPUs: a wait may spin before it yields */
	int pull;         /* parameter pull */
	int pull_ok;      /* -1 not yet agreed; 1 every pair is fast: ah_pull_run may run */
	size_t rsag_push_min; /* parameter: see ah_rsag_pushes (0: never) */
	int rsag_push_always; /* parameter: rsag_push_min applies with a CPU per rank too */
	int spin_all;         /* set with pull_ok: every rank has a CPU */
	/* From the transports' capabilities (weft_algo_route.caps): every peer is
	 * reached by one that writes by address without pinning (so a kept
	 * registration stays valid), on this rank and, once agreed with
	 * pull_ok, on every rank; and some peer by one that maps its peers'
	 * allocations (so a buffer in one is not kept). */
	int unpinned, unpinned_all, maps_allocs;
	size_t oneshot_push_max; /* parameter: see ah_oneshot_pushes */
	size_t nt_min; /* parameter: see ah_direct_gather (0: never) */
	uint64_t pub_seq; /* chunks this rank has published (the same on every rank) */
	char *pub_slot;   /* during ah_pull_run's consume: this round's own slot */
	/* The call in progress: its number here (from 1), its signature (0:
	 * unchecked), per peer the signature of its first chunk out and of the
	 * first one in (a send/recv batch: of the first message each way; a
	 * collective: csig), and the call whose signature this rank's publish and
	 * direct lines last carried. */
	uint64_t call_no;
	uint64_t csig;
	uint64_t *ssig, *rsig;
	uint64_t pull_sent, dir_sent;
	/* One round's plan, indexed by peer (see ah_run). */
	const void **tx_src;
	size_t *tx_bytes;
	size_t *rx_bytes;
	const void **rx_ptr;
	void **rx_dst;
};

int ah_comm_setup(const struct weft_algo_comm *ac, void **pack_state);
/* A call begins: numbers it and takes its signatures (per peer for send/recv). */
void ah_call_begin(struct ah_ctx *c, const struct weft_coll_args *a);
void ah_comm_teardown(void *pack_state);
/* Connects to a peer (both ranks call it; pairs are set up in ascending order of
 * (lower rank, higher rank) so that no cycle of waits can form). */
int ah_ensure_peer(struct ah_ctx *c, int peer);
int ah_ensure_all(struct ah_ctx *c);

/* Runs `rounds` rounds. In round t, plan(arg, c, t) fills, per peer p, at most one
 * chunk to send (tx_src[p], tx_bytes[p] <= chunk) and at most one to receive
 * (rx_bytes[p], rx_dst[p]); the engine sends, then waits for every expected chunk
 * (rx_ptr[p] points into scratch), then calls consume (or, when consume is NULL,
 * copies each chunk to rx_dst[p]). A sender learns that its slots are free at the
 * start of the round in which it needs them (see engine.c).
 * Both ranks of a pair must plan the same chunks in the same rounds; a chunk sent
 * in round t may depend on chunks received in earlier rounds only. That keeps
 * every rank at most one round ahead of what its slots allow: no deadlock. */
typedef int (*ah_plan_fn)(void *arg, struct ah_ctx *c, uint64_t t);
int ah_run(struct ah_ctx *c, uint64_t rounds, ah_plan_fn plan, ah_plan_fn consume, void *arg);

/* Each rank writes its part [off[p], +bytes[p]) of buf (len bytes on every
 * rank) straight into every peer's buf, after registering and exchanging buf
 * for this call (see engine.c). src, when not NULL, is where our part still
 * is (not overlapping buf): it is copied to its place as it goes out.
 * Collective: every rank calls it together. */
int ah_direct_gather(struct ah_ctx *c, void *buf, size_t len, const size_t *off, const size_t *bytes,
		     const void *src);
/* Whether a gather of blocks of `block` bytes goes direct (collective: may
 * call ah_pull_ready). */
int ah_use_direct(struct ah_ctx *c, size_t block);

/* Whether the publish-and-pull engine can run: every pair maps each other.
 * Collective the first time (the ranks agree through the bootstrap). */
int ah_pull_ready(struct ah_ctx *c);
/* Whether allreduce-rsag pushes a block of this many bytes instead of
 * publishing and pulling it (ah_pull_ready must be 1). */
int ah_rsag_pushes(struct ah_ctx *c, size_t block);
/* Whether allreduce-oneshot pushes an input of this many bytes instead of
 * publishing and pulling it (ah_pull_ready must be 1). */
int ah_oneshot_pushes(struct ah_ctx *c, size_t bytes);
/* Runs `rounds` rounds of publish and pull: in round t this rank's fill(arg,
 * c, t, slot) writes at most one chunk into its own publish slot (local
 * memory, read by every peer through its mapping); then, once every peer has
 * published its round-t chunk, rx_ptr[p] points at it (in p's memory) and
 * consume(arg, c, t) reads what it needs. Every rank runs the same rounds. */
typedef int (*ah_fill_fn)(void *arg, struct ah_ctx *c, uint64_t t, char *slot);
int ah_pull_run(struct ah_ctx *c, uint64_t rounds, ah_fill_fn fill, ah_plan_fn consume, void *arg);

/* Reductions: weft_kit_reduce and its kin (include/weft/kit.h), every type
 * and operation; a pre-multiplied sum is weft_kit_scale, then a sum. */

/* The algorithms (algos.c) and the table of them. */
extern const struct weft_algo *const ah_algos[];
void ah_algos_configure(const struct ah_params *p);

/* Shared by the algorithms of algos.c and logstep.c. The context of a call,
 * its peers connected (*rc: 0, or why not), the call numbered. */
struct ah_ctx *ah_ready_ctx(void *state, const struct weft_coll_args *a, int *rc);
/* A pre-multiplied sum: scales this rank's input where the sum then reads
 * it, and runs run on it as a plain sum (see algos.c). */
int ah_premul_then(void *state, const struct weft_coll_args *a,
		   int (*run)(void *state, const struct weft_coll_args *a));
/* The pack's supports op and setup, shared by every algorithm. */
int ah_supports(void *state, const struct weft_coll_args *a);
int ah_setup(const struct weft_algo_comm *ac, void **state);
/* c->work, grown to at least bytes (kept for later calls); NULL: out of
 * memory (logged). */
void *ah_work(struct ah_ctx *c, size_t bytes);
/* Agrees, the first time, on c->vr and c->rv: every rank's NUMA node
 * (place.c; rank order where parameter numa is 0) goes to every rank, which
 * numbers the ranks node by node. Collective the first time. */
int ah_place_ready(struct ah_ctx *c);

/* The log-step algorithms (logstep.c), chosen from many_ranks up. */
extern struct weft_algo ah_algo_rd, ah_algo_bruck, ah_algo_a2a_bruck, ah_algo_halving, ah_algo_bcast_tree,
	ah_algo_reduce_tree;

/* The reductions every algorithm serves, the pre-multiplied sum included
 * (ah_premul_then). */
#define AH_REDOPS                                                                                        \
	((1u << WEFT_SUM) | (1u << WEFT_PROD) | (1u << WEFT_MIN) | (1u << WEFT_MAX) | (1u << WEFT_AVG) | \
	 (1u << WEFT_PREMUL_SUM))

#define AH_ALGO_INIT(nm, cl, prio, fn)                                                                 \
	{                                                                                              \
		.size = sizeof(struct weft_algo), .name = nm, .coll = cl, .min_bytes = 0, .max_bytes = 0, \
		.min_ranks = 1, .max_ranks = 0, .mem_types = 1u << WEFT_MEM_HOST, .priority = prio,    \
		.setup = ah_setup, .supports = ah_supports, .execute = fn, .teardown = NULL,           \
		.redops = AH_REDOPS,                                                                   \
	}

#endif
