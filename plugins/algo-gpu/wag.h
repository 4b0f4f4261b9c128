/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: private declarations shared by the host side (pack.c) and the
 * kernels (kernels.cu): the scratch layout every rank computes alike, and the
 * kernel arguments, passed by value so a captured graph holds everything. */
#ifndef WAG_H
#define WAG_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

#define WAG_NAME "algo-gpu"

/* Flag arrays in every rank's scratch, written by peers: [kind][sender][block].
 * Each family of kernels has flags of its own, so calls of different
 * collectives never read each other's flags: the one-shot family (OS), the
 * reduce-scatter ring (RS), the allgather ring (AG) and the point-to-point
 * rings (P2P; block = the channel's block h). */
enum {
	WAG_F_OS = 0,
	WAG_F_RS_READY,
	WAG_F_RS_CRED,
	WAG_F_AG_READY,
	WAG_F_AG_CRED,
	WAG_F_P2P_READY,
	WAG_F_P2P_CRED,
	WAG_F_CE,     /* the copy-engine schedules' barriers (block 0 only) */
	WAG_F_CE_DATA, /* allreduce-ce's pushed chunks: (barrier epoch << 24) + chunk + 1 (block 0 only) */
	WAG_F_DIRECT, /* the direct kernels: 2 per call and block (start, end) */
	WAG_F_COUNT
};
/* Per-block counters in this rank's own part of scratch (no peer touches them):
 * [kind][block]. They advance inside kernels, so graph replays keep step. The
 * one-shot epoch (WAG_L_OS) is kept equal across all blocks (block 0 also
 * advances the blocks a call does not launch), so every one-shot call has one
 * epoch and one half of the double buffer. */
enum { WAG_L_LL = 0, WAG_L_OS, WAG_L_RS, WAG_L_AG, WAG_L_CE, WAG_L_DIRECT, WAG_L_COUNT };
/* Point-to-point sequence counters, [dir][peer][block h] in this rank's
 * scratch: dir 0 counts tiles sent to peer, dir 1 tiles received from it. */
enum { WAG_P2P_TX = 0, WAG_P2P_RX = 1 };
/* Call signatures (weft_coll_args.sig) travel as one LL16 packet per sender
 * in the receiver's scratch, [family][sender][slot], flagged like the data
 * they come with and in a slot that the family's own flow control frees:
 * the half for LL and one-shot calls, the sequence number of the call's
 * first tile (block 0) for the rings and point-to-point. */
enum { WAG_S_LL = 0, WAG_S_OS, WAG_S_RS, WAG_S_AG, WAG_S_P2P, WAG_S_COUNT };

/* Most entries of one send/recv batch one kernel takes (kernel parameters). */
#define WAG_P2P_MAX_OPS 64

enum { WAG_LL_ALLGATHER = 0, WAG_LL_ALLTOALL = 1, WAG_LL_BROADCAST = 2 };

#define WAG_LL_TPB 512  /* threads per LL block; one 8-byte packet each */
#define WAG_TPB 512     /* threads per block of the other kernels */

/* Byte offsets into every rank's scratch (identical on all ranks). */
struct wag_layout {
	uint32_t maxb;      /* most CUDA blocks of a collective kernel */
	uint32_t fb;        /* flag/counter entries per kind and sender: max(maxb, pblocks) */
	uint32_t depth;     /* ring slots per (sender, block) */
	uint64_t flags;     /* WAG_F_COUNT * WAG_MAX_RANKS * fb uint64 */
	uint64_t local;     /* WAG_L_COUNT * fb uint64 */
	uint64_t ll;        /* 2 halves * nranks senders * ll_slot */
	uint64_t ll_slot;   /* 2 * ll_max: LL16 packets double the bytes */
	uint64_t os;        /* 2 halves * nranks senders * os_slot */
	uint64_t os_slot;
	uint64_t rs;        /* nranks * maxb * depth * tile_bytes */
	uint64_t ag;
	uint64_t p2p;       /* nranks * pblocks * depth * p2p_tile */
	uint64_t p2p_local; /* 2 * WAG_MAX_RANKS * fb uint64 */
	uint32_t pblocks;   /* CUDA blocks per point-to-point channel */
	uint64_t tile_bytes;
	uint64_t p2p_tile;  /* a point-to-point ring slot (>= tile_bytes) */
	uint64_t p2p_ll;    /* nranks * pblocks * depth * p2p_ll_slot: LL16 slots */
	uint64_t p2p_ll_slot; /* 2 x the largest LL tile (packets double the bytes) */
	uint64_t p2p_ll_max; /* entries up to this many bytes move as LL packets */
	uint64_t sig;       /* WAG_S_COUNT * WAG_MAX_RANKS * sig_slots LL16 packets */
	uint32_t sig_slots; /* max(2, depth) */
	uint64_t total;
};

/* The reduction of one chunk by the copy-engine schedules: dst = src[0] op
 * src[1] ... over count elements, in rank order. */
struct wag_ce_red {
	const void *src[WAG_MAX_RANKS];
	void *dst;
	uint64_t count;
	int vec; /* every pointer 16-byte aligned */
	/* The pushing schedule: k_ce_signal tells peer that chunk seq - 1 of its
	 * block has landed; k_ce_reduce first waits for every peer's chunk seq - 1
	 * (0: nothing to wait for). */
	uint64_t seq;
	int peer;
};

/* The direct kernels: every rank's buffers of this call, mapped here (this
 * rank's own are its pointers), and what to do with them. */
enum { WAG_D_ALLREDUCE = 0, WAG_D_REDUCE_SCATTER, WAG_D_ALLGATHER, WAG_D_BROADCAST, WAG_D_ALLTOALL };
struct wag_direct {
	const char *in[WAG_MAX_RANKS];
	char *out[WAG_MAX_RANKS];
	int mode; /* WAG_D_* */
};

struct wag_kargs {
	int rank;
	int nranks;
	int dtype;  /* enum weft_datatype */
	int op;     /* enum weft_redop */
	int vec;    /* in and out (and every block of them) 16-byte aligned */
	int root;   /* broadcast, reduce */
	int mode;   /* k_ll_move: WAG_LL_ALLGATHER, WAG_LL_ALLTOALL or WAG_LL_BROADCAST */
	uint32_t nblocks;
	const void *in;
	void *out;
	uint64_t count;   /* elements: allreduce, broadcast, reduce the vector; allgather,
			   * reduce-scatter, alltoall one rank's block (bytes where the
			   * kernel moves bytes) */
	char *scr[WAG_MAX_RANKS];                     /* scratch of every rank, mapped here */
	const volatile uint32_t *abort[WAG_MAX_RANKS]; /* per peer, host-mapped */
	uint64_t sig;         /* the call's signature, 0: not compared */
	/* Host-mapped: {a peer's signature, this rank's, the peer} of the first
	 * call whose signatures differed; word 0 written last (NULL: none). */
	volatile uint64_t *sigerr;
	struct wag_layout lay;
	struct wag_sched s;
	struct wag_ce_red red; /* k_ce_reduce */
	struct wag_direct d;   /* k_direct_reduce, k_direct_move */
};

/* One entry of a point-to-point kernel: a send to peer, a receive from peer,
 * or (peer = this rank) a copy from src to buf. */
enum { WAG_P2P_SEND = 0, WAG_P2P_RECV = 1, WAG_P2P_SELF = 2 };
struct wag_p2p_op {
	char *buf;       /* send: read; recv, self: written */
	const char *src; /* self: read */
	uint64_t bytes;
	uint64_t sig;    /* send, recv: the message's signature (weft_coll_args.p2p_sig), 0: none */
	int peer;
	int kind;
};

/* A batch: channels (peer, kind) in a fixed order, pblocks CUDA blocks each;
 * each channel walks its entries in batch order. */
struct wag_p2p_args {
	uint32_t nops;
	uint32_t nch;
	int ch_peer[2 * WAG_MAX_RANKS];
	int ch_kind[2 * WAG_MAX_RANKS];
	struct wag_p2p_op ops[WAG_P2P_MAX_OPS];
};

#ifdef __cplusplus
extern "C" {
#endif
/* Kernel launches on stream (a cudaStream_t). Return 0 or -WEFT_ERR_TRANSPORT
 * with the CUDA error written to err (at least 128 bytes). */
int wag_launch_allreduce_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_ll_move(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_reduce_scatter_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allreduce_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allreduce_rsag(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allgather_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allgather_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_reduce_scatter_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_reduce_scatter_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_reduce_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_reduce_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_broadcast_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_broadcast_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_alltoall_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_alltoall_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_p2p(const struct wag_kargs *a, const struct wag_p2p_args *p, void *stream, char *err, size_t errlen);
/* The copy-engine schedules' kernels: a barrier of every rank (one block),
 * and a reduction of a->red over a->nblocks blocks. */
int wag_launch_ce_barrier(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_ce_reduce(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_ce_signal(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
/* The direct kernels: a->nblocks blocks read and write the peers' buffers of
 * this call (a->d) themselves; a->count as for the kernels above. */
int wag_launch_direct(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
/* out[i] = in[i] * scalar over n elements of dtype, on at most max_blocks
 * blocks: the scalar is read from scalar_dev when not NULL (when the kernel
 * runs), else its bytes are the first of scalar_bits (little-endian). */
int wag_launch_premul(int dtype, const void *in, void *out, uint64_t n, const void *scalar_dev, uint64_t scalar_bits,
		      uint32_t max_blocks, void *stream, char *err, size_t errlen);
/* The cross-host executor's kernels (xhost.c): dst = dst op src over n
 * elements (src may be registered host memory), and buf = buf / nranks. */
int wag_launch_hx_reduce(int dtype, int op, void *dst, const void *src, uint64_t n, uint32_t max_blocks, void *stream,
			 char *err, size_t errlen);
int wag_launch_hx_divide(int dtype, void *buf, uint64_t n, int nranks, uint32_t max_blocks, void *stream, char *err,
			 size_t errlen);
/* Pins host memory for copies and maps it for kernels at its own address;
 * -ENOTSUP where the GPU cannot use it there. */
int wag_cuda_host_register(void *p, size_t bytes, char *err, size_t errlen);
void wag_cuda_host_unregister(void *p);
/* The same while a stream of this thread may be capturing a graph. */
int wag_cuda_host_register_capture(void *p, size_t bytes, char *err, size_t errlen);
/* fn(arg) on a host thread of CUDA's once stream reaches this point
 * (a host node when captured); fn must not call CUDA. */
int wag_cuda_host_fn(void *stream, void (*fn)(void *), void *arg, char *err, size_t errlen);
/* Streams, events and copies for them: 0 or -WEFT_ERR_TRANSPORT with the CUDA
 * error in err. */
int wag_cuda_stream_new(void **stream, char *err, size_t errlen);
void wag_cuda_stream_free(void *stream);
int wag_cuda_event_new(void **event, char *err, size_t errlen);
void wag_cuda_event_free(void *event);
int wag_cuda_record(void *event, void *stream, char *err, size_t errlen);
int wag_cuda_wait(void *stream, void *event, char *err, size_t errlen);
int wag_cuda_event_sync(void *event, char *err, size_t errlen);
int wag_cuda_copy(void *dst, const void *src, size_t bytes, void *stream, char *err, size_t errlen);
/* Stream-ordered device memory (capturable in a graph). */
int wag_cuda_alloc_async(void **p, size_t bytes, void *stream, char *err, size_t errlen);
int wag_cuda_free_async(void *p, void *stream, char *err, size_t errlen);
/* *yes = 1 while stream is being captured into a graph. */
int wag_cuda_capturing(void *stream, int *yes, char *err, size_t errlen);
/* The allocation holding ptr: its process-wide id, and whether another
 * process can map it (cudaMalloc IPC, or a VMM buffer with a POSIX fd
 * handle). -ENOENT when ptr is not device memory. */
int wag_cuda_buffer(const void *ptr, uint64_t *id, int *shareable);
/* Device, stream and sync helpers the host side needs (cudart is C++-linked here). */
int wag_cuda_get_device(int *dev);
int wag_cuda_set_device(int dev);
int wag_cuda_sync_stream(void *stream, char *err, size_t errlen);
int wag_cuda_sm_count(int dev, int *n);
int wag_cuda_device_sync(void);
/* 1 when ptr is device (or managed) memory of CUDA, else 0. */
int wag_cuda_is_device_ptr(const void *ptr);
#ifdef __cplusplus
}
#endif
#endif
