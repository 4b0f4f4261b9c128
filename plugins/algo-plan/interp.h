/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the CPU interpreter of a loaded plan. A rank's threadblocks run
 * as coroutines on the calling thread: each keeps its place (op, pipeline
 * step, how far a multi-channel wait got) and yields wherever it would wait,
 * so one threadblock may wait on another. What a rank touches outside its
 * own buffers (peers' mapped buffers, port puts, signals) goes through an
 * environment: the pack's is the communicator's transports, weft-plan-check's
 * is every rank in one process. */
#ifndef WP_INTERP_H
#define WP_INTERP_H

#include <stddef.h>
#include <stdint.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "plan.h"

/* One call as a rank runs it. */
struct wp_call {
	uint64_t in_bytes, out_bytes; /* this rank's input and output sizes */
	enum weft_datatype dtype;
	enum weft_redop op;   /* sum, prod, min or max */
	uint32_t flag;        /* LL packets' flag for this call, never 0 */
};

/* A rank's way out. Offsets are within the buffer as this call sees it (a
 * double scratch buffer's current half included: the environment adds the
 * half's offset where it addresses scratch itself). Callbacks return 0 or a
 * negative errno, which fails the call. */
struct wp_env {
	void *ctx;
	char *buf[WP_BUF_KINDS]; /* this rank's input, output and scratch of the call */
	/* Per entry of the rank's remote_buffers: the peer's buffer mapped here
	 * for memory-channel ops (the current scratch half for scratch), NULL
	 * where it is not mapped (port access only). */
	char **rbuf;
	int (*port_put)(void *ctx, uint32_t chan, uint32_t rbuf, uint64_t dst_off, enum wp_buf src, uint64_t src_off,
			uint64_t len);
	/* Raises the peer's counter paired with this rank's channel chan of
	 * kind, after every earlier put and store of the rank on it. */
	int (*signal)(void *ctx, enum wp_chan kind, uint32_t chan);
	/* 1 when this rank's counter of channel chan of kind is at least want,
	 * 0 when not yet. */
	int (*poll)(void *ctx, enum wp_chan kind, uint32_t chan, uint64_t want);
	int (*flush)(void *ctx, uint32_t chan);
};

/* What lasts from call to call for one rank of one plan: the wait counts of
 * its channels and its semaphores (MSCCL++ keeps both across launches). */
struct wp_state {
	uint32_t nchan[WP_CHAN_KINDS];
	uint64_t *waited[WP_CHAN_KINDS];
	uint32_t nsems;
	int64_t *sems;
};

/* Channels pair per ordered rank pair and kind: the k-th channel of a to b
 * with the k-th of b to a, and a side with fewer gets the missing ones
 * unlisted (MSCCL++ builds its semaphores so). wp_chan_pair gives the peer
 * of a rank's channel and its k; wp_pair_count the channels of the pair. */
void wp_chan_pair(const struct wp_plan *plan, uint32_t rank, enum wp_chan kind, uint32_t chan, uint32_t *peer,
		  uint32_t *k);
uint32_t wp_pair_count(const struct wp_plan *plan, uint32_t a, uint32_t b, enum wp_chan kind);

/* Whether rank a's plan reaches rank b (a channel or a remote buffer), and
 * whether the pair needs a channel kind: channels of it, or a remote buffer
 * either side reaches through it. */
int wp_reaches(const struct wp_plan *plan, uint32_t a, uint32_t b);
int wp_pair_needs(const struct wp_plan *plan, uint32_t a, uint32_t b, enum wp_chan kind);

int wp_state_init(struct wp_state *st, const struct wp_plan *plan, uint32_t rank);
void wp_state_fini(struct wp_state *st);

/* Where a threadblock is: its op, a pipeline's step and body op, and the
 * progress inside a multi-part op (channels waited, semaphores acquired). */
struct wp_tb_run {
	uint32_t pc, iter, sub, part;
	uint32_t bar_gen;
	int bar_in, done;
};

struct wp_barrier {
	uint32_t count, gen;
};

struct wp_run {
	const struct wp_plan *plan;
	const struct wp_rank *rank;
	uint32_t rank_id;
	struct wp_call call;
	const struct wp_env *env;
	struct wp_state *st;
	struct wp_tb_run *tbs;
	uint32_t ndone;
	struct wp_barrier bars[WP_MAX_BARRIERS];
	/* the chunk geometry of this call */
	uint64_t rank_size;
	uint32_t nchunks;
	char *tmp; /* reduction block */
	size_t tmp_len;
	/* Signals raised during the current pass, sent when it ends. */
	struct wp_sig {
		enum wp_chan kind;
		uint32_t chan;
	} *sigs;
	uint32_t nsigs, sigcap;
	char err[256];
};

/* The weft collective a plan's "collective" names: 0, or -ENOTSUP for one
 * the pack does not serve. */
int wp_collective(const char *name, enum weft_collective *c);

/* A rank's input and output bytes for a call of `block` bytes per rank
 * block: allgather's output and reduce-scatter's input hold one block per
 * rank, alltoall's both. */
void wp_call_bytes(enum weft_collective c, uint32_t nranks, uint64_t block, uint64_t *in, uint64_t *out);

/* Whether the plan runs a call of `block` bytes per rank block: every
 * rank's sizes divide into its chunks (wp_sizes_ok) and the message size
 * (the input's; the output's for allgather, as MSCCL++ counts it) lies in
 * the plan's range. 0 or -EINVAL with why in err. */
int wp_call_fits(const struct wp_plan *plan, enum weft_collective c, uint64_t block, char *err, size_t errlen);

/* Bytes of scratch the rank needs for the call (both halves of a double
 * scratch buffer) and where this call's half starts. */
uint64_t wp_scratch_bytes(const struct wp_plan *plan, uint32_t rank, uint64_t in_bytes, uint64_t out_bytes);
uint64_t wp_scratch_half(const struct wp_plan *plan, uint32_t rank, uint64_t in_bytes, uint64_t out_bytes,
			 uint32_t flag);

/* Whether the plan can run a call of these sizes on this rank: the sizes
 * divide into its chunks at its alignment (as MSCCL++ requires) and fit
 * every chunk reference. 0 or -EINVAL with why in err. */
int wp_sizes_ok(const struct wp_plan *plan, uint32_t rank, uint64_t in_bytes, uint64_t out_bytes, char *err,
		size_t errlen);

int wp_run_init(struct wp_run *r, const struct wp_plan *plan, uint32_t rank, const struct wp_call *call,
		const struct wp_env *env, struct wp_state *st);
void wp_run_fini(struct wp_run *r);

/* One pass over the rank's threadblocks, each running until it waits or
 * ends; the signals they raise go out when the pass ends, in order, so a
 * peer never sees a signal while a sibling threadblock still has stores of
 * the pass to make (the interleaving weft-plan-check checks). Returns 1 when every threadblock has ended, 0 when some op ran,
 * -EAGAIN when every unfinished one is waiting, another negative errno on
 * failure (r->err says where). */
int wp_run_step(struct wp_run *r);

/* "threadblock T op O (name): waiting for ..." for each waiting threadblock,
 * separated by "; ", into buf. */
void wp_run_where(const struct wp_run *r, char *buf, size_t len);

/* The kind of every wait the rank is blocked in: bit 0 a channel (a
 * transport can wake it), bit 1 packets (only polling sees them), bit 2
 * another threadblock of the rank. */
unsigned wp_run_waits(const struct wp_run *r);

#endif
