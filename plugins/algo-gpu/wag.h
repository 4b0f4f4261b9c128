/* algo-gpu: private declarations shared by the host side (pack.c) and the
 * kernels (kernels.cu): the scratch layout every rank computes alike, and the
 * kernel arguments, passed by value so a captured graph holds everything. */
#ifndef WAG_H
#define WAG_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"

#define WAG_NAME "algo-gpu"

/* Flag arrays in every rank's scratch, written by peers: [kind][sender][block]. */
enum { WAG_F_OS = 0, WAG_F_RS_READY, WAG_F_RS_CRED, WAG_F_AG_READY, WAG_F_AG_CRED, WAG_F_COUNT };
/* Per-block counters in this rank's own part of scratch (no peer touches them):
 * [kind][block]. They advance inside kernels, so graph replays keep step. */
enum { WAG_L_LL = 0, WAG_L_OS, WAG_L_RS, WAG_L_AG, WAG_L_COUNT };

#define WAG_LL_TPB 512  /* threads per LL block; one 8-byte packet each */
#define WAG_TPB 512     /* threads per block of the other kernels */

/* Byte offsets into every rank's scratch (identical on all ranks). */
struct wag_layout {
	uint32_t maxb;      /* flag/counter entries per kind and sender */
	uint32_t depth;     /* ring slots per (sender, block) */
	uint64_t flags;     /* WAG_F_COUNT * WAG_MAX_RANKS * maxb uint64 */
	uint64_t local;     /* WAG_L_COUNT * maxb uint64 */
	uint64_t ll;        /* 2 halves * nranks senders * ll_slot */
	uint64_t ll_slot;   /* 2 * ll_max: LL16 packets double the bytes */
	uint64_t os;        /* 2 halves * nranks senders * os_slot */
	uint64_t os_slot;
	uint64_t rs;        /* nranks * maxb * depth * tile_bytes */
	uint64_t ag;
	uint64_t tile_bytes;
	uint64_t total;
};

struct wag_kargs {
	int rank;
	int nranks;
	int dtype;  /* enum weft_datatype */
	int op;     /* enum weft_redop */
	int vec;    /* in and out 16-byte aligned */
	uint32_t nblocks;
	const void *in;
	void *out;
	uint64_t count;   /* elements: allreduce the vector; allgather one rank's block */
	char *scr[WAG_MAX_RANKS];                     /* scratch of every rank, mapped here */
	const volatile uint32_t *abort[WAG_MAX_RANKS]; /* per peer, host-mapped */
	struct wag_layout lay;
	struct wag_sched s;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Kernel launches on stream (a cudaStream_t). Return 0 or -WEFT_ERR_TRANSPORT
 * with the CUDA error written to err (at least 128 bytes). */
int wag_launch_allreduce_ll(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allreduce_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allreduce_rsag(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allgather_oneshot(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
int wag_launch_allgather_ring(const struct wag_kargs *a, void *stream, char *err, size_t errlen);
/* Device, stream and sync helpers the host side needs (cudart is C++-linked here). */
int wag_cuda_get_device(int *dev);
int wag_cuda_set_device(int dev);
int wag_cuda_sync_stream(void *stream, char *err, size_t errlen);
int wag_cuda_sm_count(int dev, int *n);
int wag_cuda_device_sync(void);
#ifdef __cplusplus
}
#endif
#endif
