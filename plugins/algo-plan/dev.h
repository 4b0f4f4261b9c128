/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the device interpreter's view of a plan and of a call, plain C
 * shared by the encoder (enc.c), the host side (devpack.c) and the kernel
 * (dev.cu). A rank's plan becomes one flat table of fixed-size operations in
 * device memory; what changes with a call travels as kernel arguments, and
 * what changes from call to call inside a captured graph (the LL flag, wait
 * counts, semaphores, barriers) lives in device memory the kernel advances. */
#ifndef WP_DEV_H
#define WP_DEV_H

#include <stddef.h>
#include <stdint.h>

#include <weft/device.h>

#include "plan.h"

/* One buffer reference: a local buffer (type) or the rank's remote buffer
 * rbuf (an index into wpd_args.rbufs). */
struct wpd_ref {
	uint8_t type;   /* enum wp_buf */
	uint8_t remote;
	uint16_t pad;
	uint32_t rbuf;
	uint32_t index, size; /* chunks */
};

/* One operation. A pipeline is followed in the table by its nops body
 * operations; the threadblock's walk steps over them. */
struct wpd_op {
	uint8_t kind; /* enum wp_op_kind */
	uint8_t chan; /* enum wp_chan */
	uint8_t nsrc, ndst, nchan, nsems;
	uint8_t nosync; /* 1: no block barrier after it (wpd_encode) */
	uint8_t pad;
	uint32_t tbg_id, tbg_size;
	uint32_t barrier_id, barrier_ntb;
	uint32_t unit_size, num_chunks, nops;
	uint32_t ref0; /* its first reference in its threadblock's list (wpd_tb) */
	uint32_t ch[WP_MAX_OP_CHANNELS]; /* the rank's channels of kind chan */
	uint32_t sem[WP_MAX_OP_SEMAPHORES];
	struct wpd_ref src[WP_MAX_OP_BUFFS], dst[WP_MAX_OP_BUFFS];
};

/* A threadblock: its operations are ops[first, first + nops), and the
 * buffer references of those operations (sources, then destinations, op by
 * op) are refs[ref_first, ref_first + nrefs): the kernel resolves them all
 * at once when it starts, instead of every thread at every operation. */
struct wpd_tb {
	uint32_t first, nops;
	uint32_t ref_first, nrefs;
};

/* A threadblock's reference with what resolving it needs (its op's group),
 * so that a block's start waits on one load, not on the op's too. */
struct wpd_refloc {
	struct wpd_ref ref;
	uint32_t tbg_id, tbg_size;
};

/* Stamps the kernel writes where a call asks (wpd_args.stamps): per block,
 * clock64() at entry, after staging the arguments (and the threadblock's
 * image), after resolving the references, after each of its first WPD_STAMP_OPS operations, and at the
 * end. A benchmark reads them to tell the phases apart. */
#define WPD_STAMP_OPS 11
#define WPD_STAMPS (WPD_STAMP_OPS + 4)
#define WPD_ST_ENTRY 0
#define WPD_ST_ARGS 1
#define WPD_ST_REFS 2
#define WPD_ST_OP0 3
#define WPD_ST_END (WPD_STAMPS - 1)

/* References resolved per block at most (24 bytes of shared memory each);
 * a threadblock with more resolves its references op by op. */
#define WPD_RNG_CAP 1536

/* A threadblock's image: what its block needs of the plan in one place, so
 * that it comes into shared memory with one round of vector loads at the
 * start, instead of a chain of dependent loads (the threadblock, then its
 * references, then each operation as the block reaches it). At
 * blockIdx x stride: the wpd_tb, its wpd_refloc list from WPD_IMG_REFS (each
 * resolved in place into the kernel's 24-byte range), its wpd_op list from
 * wpd_args.img_ops (ref0 and pipeline bodies as in the table). A plan whose
 * longest image is over WPD_IMG_CAP bytes (the shared memory a block gets
 * without asking) runs from the tables instead. */
#define WPD_IMG_REFS 16
#define WPD_IMG_CAP (46u * 1024)

/* A remote buffer as this rank reaches it, for the areas of the moment:
 * through a memory channel, the peer's area mapped here (NULL where only a
 * port channel reaches it); through a port channel, the port id of the
 * peer's area. Scratch: the offset of the peer's second half. */
struct wpd_rbuf {
	char *base;
	uint64_t half;
	uint32_t peer;
	uint32_t type; /* enum wp_buf */
	uint32_t port_id;
	uint32_t pad;
};

/* A memory channel: this rank's token (the peer raises it), the peer's
 * token mapped here, and the count this rank has waited for. */
struct wpd_mch {
	uint64_t *sem;
	uint64_t *rsem;
	uint64_t *expected;
};

/* A port channel: the FIFO to push triggers into, this rank's token and
 * the count waited for, the peer's token by port id and the last value
 * signalled to it; lock serializes signals of one channel. */
struct wpd_pch {
	struct weft_port_dev port;
	uint64_t *sem;
	uint64_t *expected;
	uint64_t *outbound;
	uint32_t *lock;
	uint32_t rsem_id;
	uint32_t pad;
};

/* Device memory the kernel keeps from call to call. */
struct wpd_ctl {
	uint32_t flag;   /* the last call's LL flag (0 before any) */
	uint32_t done;   /* blocks finished in the running call */
	uint32_t status; /* non-zero: a call stopped on an abort */
	uint32_t pad;
	uint64_t barrier[WP_MAX_BARRIERS]; /* arrivals, ever */
};

/* One call. */
struct wpd_args {
	const struct wpd_op *ops;
	const struct wpd_tb *tbs;
	const struct wpd_rbuf *rbufs;
	const struct wpd_mch *mch;
	const struct wpd_pch *pch;
	struct wpd_ctl *ctl;
	int64_t *sems;
	const volatile uint32_t *abort; /* the comm's, host-mapped; NULL without channels */
	char *buf[2];                   /* this call's input and output */
	char *scr;                      /* this rank's scratch, first half */
	uint64_t scr_half;              /* where its second half starts; 0 without a double scratch */
	/* Port puts: the port id of the area holding each local buffer and
	 * where the buffer's view starts in it (scratch: its first half). */
	uint32_t port_mem[3];
	uint64_t port_base[3];
	/* A peer's input and output views start at peer x these (in place). */
	uint64_t vstride[2];
	uint64_t rank_size;
	uint64_t align;
	uint32_t nchunks;
	int dtype, op;
	const struct wpd_refloc *refs;
	uint64_t *stamps; /* NULL, or WPD_STAMPS a block (a benchmark's) */
	uint32_t rng_cap; /* references a block resolves at its start (dynamic shared memory) */
	uint32_t flagged; /* 0: the plan uses no LL flag (no packets, one scratch): ctl->flag stays */
	const char *img;     /* the threadblocks' images, or NULL: from the tables (ops, tbs, refs) */
	uint32_t img_stride; /* bytes from one image to the next, a multiple of 16 */
	uint32_t img_ops;    /* where an image's operations start */
};

/* The encoding of one rank's plan (enc.c): ntbs threadblocks, nops table
 * entries. Of two operations in a row that only move or reduce this rank's
 * own buffers, touching no chunk the other writes, the first is marked
 * nosync: the block's threads go on to the second without a barrier,
 * overlapping their memory latencies (MSCCL++ plans sync only at nops).
 * Returns 0 and the tables (malloc'd: free both), -ENOMEM, or -E2BIG where
 * the plan needs more than the encoding holds. */
int wpd_encode(const struct wp_plan *plan, uint32_t rank, struct wpd_tb **tbs, struct wpd_op **ops, uint32_t *nops);

/* The reference lists of the encoded threadblocks: fills each op's ref0 and
 * each threadblock's ref_first and nrefs, and returns the table (malloc'd)
 * in *refs, its length in *nrefs and the longest list in *maxrefs; 0, or
 * -ENOMEM. */
int wpd_encode_refs(struct wpd_tb *tbs, uint32_t ntbs, struct wpd_op *ops, struct wpd_refloc **refs, uint32_t *nrefs,
		    uint32_t *maxrefs);

/* The threadblocks' images (see WPD_IMG_REFS) of the encoded tables: 0 and
 * the images (malloc'd, ntbs x *stride bytes) in *img, with *stride and
 * *ops_at; -E2BIG where one is over WPD_IMG_CAP, -ENOMEM. */
int wpd_encode_images(const struct wpd_tb *tbs, uint32_t ntbs, const struct wpd_op *ops,
		      const struct wpd_refloc *refs, char **img, uint32_t *stride, uint32_t *ops_at);

/* The kernel (dev.cu). Launches the interpreter on stream with ntbs blocks
 * of threads threads (and a->rng_cap resolved references' shared memory);
 * 0, or -WEFT_ERR_TRANSPORT with the CUDA error in err. */
#ifdef __cplusplus
extern "C" {
#endif
int wpd_launch(const struct wpd_args *a, uint32_t ntbs, uint32_t threads, void *stream, char *err, size_t errlen);
/* The CUDA runtime calls the host side makes (C cannot include it). */
int wpd_cuda_device(int *dev);
int wpd_cuda_set_device(int dev);
int wpd_cuda_copy(void *dst, const void *src, size_t bytes, void *stream, char *err, size_t errlen);
int wpd_cuda_copy_sync(void *dst, const void *src, size_t bytes, char *err, size_t errlen);
int wpd_cuda_sync(void *stream, char *err, size_t errlen);
int wpd_cuda_device_sync(void);
int wpd_cuda_capturing(void *stream, int *yes, char *err, size_t errlen);
#ifdef __cplusplus
}
#endif

#endif
