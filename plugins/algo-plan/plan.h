/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the model of an MSCCL++ 0.9 execution plan and its loader, which
 * checks the schema and every cross-reference before a plan is kept. */
#ifndef WP_PLAN_H
#define WP_PLAN_H

#include <stddef.h>
#include <stdint.h>

#define WP_NAME "algo-plan"

/* The operations of the format, in the order of the table. */
enum wp_op_kind {
	WP_OP_NOP,
	WP_OP_BARRIER,
	WP_OP_PUT,
	WP_OP_PWS,  /* put with signal */
	WP_OP_PWSF, /* put with signal and flush */
	WP_OP_GET,
	WP_OP_COPY,
	WP_OP_SIGNAL,
	WP_OP_WAIT,
	WP_OP_FLUSH,
	WP_OP_RE,   /* reduce */
	WP_OP_RES,  /* reduce, send */
	WP_OP_RRE,  /* read remote, reduce */
	WP_OP_RRES, /* read remote, reduce, send */
	WP_OP_PPKT,
	WP_OP_RPPKT,
	WP_OP_RESPKT,
	WP_OP_CPKT,
	WP_OP_UPKT,
	WP_OP_REPKT,
	WP_OP_RECPKT,
	WP_OP_RECSPKT,
	WP_OP_GLRES, /* NVLink multicast: refused */
	WP_OP_GSTORE,
	WP_OP_GSTOREPKT,
	WP_OP_RLXSIGNAL,
	WP_OP_RLXWAIT,
	WP_OP_PIPELINE,
	WP_OP_SEM_ACQUIRE,
	WP_OP_SEM_RELEASE,
	WP_OP_COUNT
};

/* The first two kinds are those a rank and a threadblock keep lists of. */
enum wp_chan { WP_CHAN_MEMORY, WP_CHAN_PORT, WP_CHAN_NONE, WP_CHAN_SWITCH };
#define WP_CHAN_KINDS 2

enum wp_buf { WP_BUF_INPUT, WP_BUF_OUTPUT, WP_BUF_SCRATCH };
#define WP_BUF_KINDS 3

enum wp_proto { WP_PROTO_SIMPLE, WP_PROTO_LL };

/* reduce_op, which MSCCL++'s own kernels ignore (they sum). */
enum wp_reduce { WP_REDUCE_NONE, WP_REDUCE_SUM, WP_REDUCE_MIN, WP_REDUCE_MAX };

/* Per-operation lists are capped as in MSCCL++ 0.9's device operation (two
 * local buffers and eight channels' worth of references, eight channels,
 * sixteen semaphores), so a plan accepted here also fits its executor and a
 * fixed-size device encoding. Barriers: its sixteen device syncers. */
#define WP_MAX_OP_BUFFS 10
#define WP_MAX_OP_CHANNELS 8
#define WP_MAX_OP_SEMAPHORES 16
#define WP_MAX_BARRIERS 16
/* Sanity bounds on list lengths, far above any plan's, so that counts and
 * ids fit 32 bits and a hostile file cannot ask for absurd tables. */
#define WP_MAX_RANKS 4096
#define WP_MAX_LIST 65536
#define WP_MAX_NAME 256

/* A chunk range of a buffer: local (by type) or a peer's, reached through a
 * remote buffer reference of the threadblock. */
struct wp_buff {
	int remote;
	enum wp_buf type;     /* local: the buffer named; remote: the remote buffer's type */
	uint32_t buffer_id;   /* remote: index into the threadblock's references of the op's channel kind */
	uint32_t peer;        /* remote: the rank that owns the buffer (resolved) */
	uint32_t index, size; /* in chunks of that buffer */
};

struct wp_op {
	enum wp_op_kind kind;
	enum wp_chan chan; /* WP_CHAN_NONE when the op names none */
	enum wp_reduce reduce;
	uint32_t nchan_ids, nsrc, ndst, nsems;
	uint32_t *chan_ids; /* into the threadblock's list of kind chan */
	struct wp_buff *src, *dst;
	uint32_t *sem_ids;                /* into the rank's semaphores */
	uint32_t tbg_id, tbg_size;        /* 0 and 1 without tbg_info */
	uint32_t barrier_id, barrier_ntb; /* barrier only */
	/* pipeline only: the body, run over the chunks unit_size bytes at a time */
	uint32_t unit_size, num_chunks;
	uint32_t nops;
	struct wp_op *ops;
};

struct wp_list {
	uint32_t n;
	uint32_t *v;
};

struct wp_remote_buf {
	uint32_t rank;
	enum wp_buf type;
	unsigned access; /* bit (1 << enum wp_chan) per channel kind that may reach it */
};

struct wp_threadblock {
	uint32_t id;
	/* Per channel kind, the threadblock's channels (indexes into the rank's
	 * list of that kind) and remote buffers (indexes into rank->rbufs), in
	 * the order of the file: what an op's channel_ids and buffer_id index. */
	struct wp_list chans[WP_CHAN_KINDS];
	struct wp_list rbufs[WP_CHAN_KINDS];
	uint32_t nops;
	struct wp_op *ops;
};

struct wp_rank {
	uint32_t id;
	uint32_t chunks[WP_BUF_KINDS]; /* input_chunks, output_chunks, scratch_chunks */
	/* Per channel kind, one entry per connected_to element of the rank's
	 * channels of that kind, in file order: the peer it connects to. */
	struct wp_list peers[WP_CHAN_KINDS];
	uint32_t nrbufs;
	struct wp_remote_buf *rbufs;
	uint32_t nsems;
	uint32_t *sem_init;
	uint32_t ntbs;
	struct wp_threadblock *tbs;
};

struct wp_plan {
	char *file; /* the path or name it was loaded as, for messages */
	char *name;
	char *collective; /* as written: "allreduce", "allgather", ... */
	enum wp_proto protocol;
	int inplace;
	int reuse_resources;
	int double_scratch; /* use_double_scratch_buffer */
	uint32_t threads_per_block;
	uint32_t buffer_alignment;
	uint64_t min_message_size, max_message_size;
	uint32_t nranks;
	struct wp_rank *ranks;
	unsigned char sha256[32]; /* of the file's bytes, for the ranks' agreement */
};

/* Loads and checks the plan at path: the JSON, the schema of MSCCL++ 0.9's
 * execution plans, chunk bounds, and every channel, remote buffer, semaphore
 * and rank reference. Multicast plans (glres, gstore, gstorepkt, switch
 * channels) are refused.
 * Returns 0 and sets *out (freed with wp_plan_free); on error *out is
 * untouched and err (errlen bytes, may be 0) says "FILE:LINE:COL: rank R,
 * threadblock T, op O: what is wrong" with the parts that apply:
 * -EINVAL for a malformed or inconsistent plan, -ENOTSUP for NVLink multicast,
 * -ENOMEM, or the negative errno of opening or reading the file.
 * Thread safety: any thread. Blocking: reads the file. */
int wp_plan_load(const char *path, struct wp_plan **out, char *err, size_t errlen);

/* The same from len bytes at buf, named name in messages (the fuzzer's way
 * in). buf needs no NUL and is not kept. */
int wp_plan_load_mem(const char *name, const void *buf, size_t len, struct wp_plan **out, char *err, size_t errlen);

/* Frees a plan; NULL is accepted. */
void wp_plan_free(struct wp_plan *plan);

/* The name an operation has in plan files ("rres"); static. */
const char *wp_op_name(enum wp_op_kind kind);

/* Operations of a threadblock counted through pipelines (a pipeline counts
 * as one, plus its body). */
uint32_t wp_tb_op_count(const struct wp_threadblock *tb);

#endif
