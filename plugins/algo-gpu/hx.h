/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the host-driven executor of the cross-host schedules (hier.h).
 * A host thread walks a plan round by round; each move between ranks goes
 * through per-peer rings of registered slots: the sender copies a piece into
 * its send slot and puts it into the receiver's landing slot over whatever
 * connection the core chose for the buffers' memory type (a network
 * transport stages device data itself), then raises the receiver's data
 * semaphore; the receiver applies the piece and returns a credit. Buffers are
 * touched only through the ops below, so the same executor runs on device
 * memory (pack.c, CUDA) and on host memory (the CI test pack). */
#ifndef WAG_HX_H
#define WAG_HX_H

#include <stddef.h>
#include <stdint.h>

#include <weft/plugin.h>

#include "hier.h"

/* How the executor touches the buffers of one memory type. copy and reduce
 * may be asynchronous (enqueued on the call's stream); sync waits for every
 * one enqueued so far. reduce: dst = dst op src over n elements. */
struct wag_hx_ops {
	int (*copy)(void *u, void *dst, const void *src, size_t bytes);
	int (*reduce)(void *u, int dtype, int op, void *dst, const void *src, uint64_t n);
	/* buf = buf / nranks over n elements (an average's last step). */
	int (*divide)(void *u, int dtype, void *buf, uint64_t n, int nranks);
	int (*sync)(void *u);
	/* Memory of type mem for the rings (which the executor registers) and
	 * the scratch, from the core's allocator (prim->mem_alloc), so that
	 * after a failure wag_hx_free can leave it to weft_comm_destroy; NULL:
	 * prim->mem_alloc itself, else posix_memalign (host memory). */
	int (*alloc)(void *actx, enum weft_mem_type mem, size_t bytes, void **p);
	void (*free)(void *actx, enum weft_mem_type mem, void *p);
	/* The memory type of the rings to and from peer, which must be the same
	 * on both sides of the pair; NULL: the buffers' type. A GPU keeps its
	 * rings in host memory where the link to the peer would stage anyway. */
	enum weft_mem_type (*peer_mem)(void *actx, int peer);
	void *actx;
};

struct wag_hx_cfg {
	uint64_t chunk; /* bytes per ring slot (a piece of a move) */
	uint32_t depth; /* slots per peer and direction */
};

struct wag_hx;

/* Made once per communicator; connects nothing until a call needs a peer.
 * mem: the memory type of the buffers served (the rings' too). */
int wag_hx_create(weft_comm_t *comm, const struct weft_prim_api *prim, const struct weft_core_api *core,
		  enum weft_mem_type mem, const struct wag_hx_ops *ops, const struct wag_hx_cfg *cfg,
		  struct wag_hx **out);
/* After every rank's last call (the caller's barrier): releases everything.
 * Where the comm has failed (a peer dead, an abort), peers still inside a
 * call may write this rank's rings and tokens until the connections close:
 * what came from the core's allocator, its registrations and the tokens are
 * then left to weft_comm_destroy, which releases them after closing every
 * connection. */
void wag_hx_free(struct wag_hx *x);

/* One call: the layout and plan of every rank alike, this rank's buffers
 * (tmp: scratch of the call's whole size, made by the executor when NULL and
 * the plan uses it), elements of esize bytes, dtype/op for reductions (op
 * -1: the plan has none). u goes to every op. Blocks until this rank's part
 * of the plan is done. 0, or the first error (logged, naming the peer). */
struct wag_hx_call {
	const struct wag_hier_plan *plan;
	const void *in;
	void *out;
	uint64_t tmp_bytes; /* what the plan's TMP needs */
	size_t esize;
	int dtype, op;
	void *u;
	uint64_t sig; /* the call's signature (weft_coll_args.sig), 0: not compared */
};
int wag_hx_run(struct wag_hx *x, const struct wag_hx_call *c);

/* One collective call (any but send/recv, which goes to wag_hx_sendrecv):
 * plans it on l, runs it and ends an average with the division. Its buffers
 * are of x's memory type; elements of esize bytes; u goes to every op. An
 * operation of PREMUL_SUM must have been turned into a sum by the caller. */
int wag_hx_coll(struct wag_hx *x, const struct wag_hier_layout *l, const struct weft_coll_args *a, size_t esize,
		enum wag_hier_inter how, void *u);
/* One send/recv batch (weft_p2p_op entries, the core's convention; sigs:
 * their signatures, weft_coll_args.p2p_sig, or NULL). Here
 * and in wag_hx_run, a send whose bytes a receive of the same batch (or
 * round) writes goes from a copy taken first, so buffers may overlap. */
int wag_hx_sendrecv(struct wag_hx *x, const struct weft_p2p_op *ops, const uint64_t *sigs, size_t nops, void *u);
/* on = 1: the calls above make the connections, rings and scratch their
 * plan needs, and move nothing, so that later calls only move data (the
 * captured calls of xhost.c, whose moves run where nothing may connect). */
void wag_hx_prepare(struct wag_hx *x, int on);

/* The layout of a pack's communicator from the core's host indices: 0,
 * -ENOTSUP (over 64 ranks, a 0.2 core without topology) or -EINVAL (more
 * than WAG_MAX_RANKS on one host). */
int wag_hx_layout(const struct weft_algo_comm *ac, struct wag_hier_layout *l);

/* Builds the plan of collective coll (WEFT_COLL_*) for count elements on
 * layout l (how: ring or tree for allreduce). 0, -ENOMEM or -EINVAL. */
int wag_hx_plan(const struct wag_hier_layout *l, int coll, uint64_t count, int root, enum wag_hier_inter how,
		struct wag_hier_plan *p, uint64_t *tmp_elems);

#endif
