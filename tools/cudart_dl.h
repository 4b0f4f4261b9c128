/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA runtime, found at run time: the tools that can drive device
 * buffers (weft-perf, weft-nccl-driver) never link CUDA, so they run on
 * machines without it and say so when asked for device memory. */
#ifndef WEFT_TOOLS_CUDART_DL_H
#define WEFT_TOOLS_CUDART_DL_H

#include <stddef.h>

/* The runtime's entry points, with its own types reduced to void * and int
 * (every cudaError_t is an int; 0 is success). */
struct cudart_dl {
	int (*malloc_)(void **, size_t);
	int (*free_)(void *);
	int (*memcpy_)(void *, const void *, size_t, int);
	int (*memset_)(void *, int, size_t);
	int (*stream_create)(void **);
	int (*stream_destroy)(void *);
	int (*stream_sync)(void *);
	int (*set_device)(int);
	int (*get_device)(int *);
	int (*device_count)(int *);
	int (*event_create)(void **);
	int (*event_destroy)(void *);
	int (*event_record)(void *, void *);
	int (*event_sync)(void *);
	int (*event_elapsed)(float *, void *, void *);
	int (*begin_capture)(void *, int);
	int (*end_capture)(void *, void **);
	int (*instantiate)(void **, void *, unsigned long long);
	int (*graph_launch)(void *, void *);
	int (*exec_destroy)(void *);
	int (*graph_destroy)(void *);
	const char *(*error_string)(int);
};

enum { CUDART_H2D = 1, CUDART_D2H = 2 };   /* cudaMemcpyKind */
enum { CUDART_CAPTURE_RELAXED = 2 };       /* cudaStreamCaptureModeRelaxed */

/* Fills rt from the process's own runtime if it has one, else from
 * libcudart.so.13/.12/.so. 0, -ENOENT (no runtime or an entry missing, *why
 * says which), or -ENODEV (a runtime that sees no device). */
int cudart_dl_load(struct cudart_dl *rt, const char **why);

/* Whether cudart_dl_load would succeed, asked in a child process so that the
 * caller (about to fork ranks) never initializes CUDA itself: a process that
 * did cannot use CUDA in its forked children. The child prints
 * "<prog>: --mem cuda: <why>" when it fails. 0 or -ENODEV. */
int cudart_dl_probe_forked(const char *prog);

/* The local rank of a launched job (Open MPI, MPICH, Slurm, torchrun), else
 * fallback: it picks the GPU of a process. */
int cudart_dl_local_rank(int fallback);

#endif
