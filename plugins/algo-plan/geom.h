/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the offset arithmetic both interpreters share, the CPU one
 * (interp.c) and the device one (dev.cu), so that CI checks on the CPU the
 * very functions a kernel runs. Offsets follow MSCCL++ 0.9's executor: every
 * buffer of a rank is cut into chunks of one size, counted in units of
 * buffer_alignment, and a threadblock group splits each reference evenly. */
#ifndef WP_GEOM_H
#define WP_GEOM_H

#include <stdint.h>

#if defined(__CUDACC__)
#define WP_HD static __host__ __device__ __forceinline__
#else
#define WP_HD static inline
#endif

/* The buffers' order, as in plan.h's enum wp_buf. */
#define WP_GEOM_INPUT 0
#define WP_GEOM_OUTPUT 1
#define WP_GEOM_SCRATCH 2

/* The size the chunks of a rank divide, and how many: the input's, or the
 * output's when the rank has no input chunks (getSizeAndChunks). */
WP_HD void wp_geom_rank(uint32_t in_chunks, uint32_t out_chunks, uint64_t in, uint64_t out, uint64_t *size,
			uint32_t *n)
{
	if (in_chunks) {
		*size = in;
		*n = in_chunks;
	} else {
		*size = out;
		*n = out_chunks;
	}
}

/* a / b, in 32 bits where both fit: a GPU has no 64-bit divide, and its
 * emulation at every reference of a block's start is in each call's time. */
WP_HD uint64_t wp_div(uint64_t a, uint64_t b)
{
	return ((a | b) >> 32) == 0 ? (uint64_t)((uint32_t)a / (uint32_t)b) : a / b;
}

/* Where slice index of slices starts in size bytes, in whole alignment
 * units, the first (units % slices) slices one unit longer (calcOffset). */
WP_HD uint64_t wp_slice_off(uint64_t align, uint64_t size, uint64_t index, uint64_t slices)
{
	uint64_t units = wp_div(size, align), each = wp_div(units, slices), rem = units - each * slices;
	return (index * each + (index < rem ? index : rem)) * align;
}

/* The bytes of a reference (chunk index, size chunks) that threadblock
 * tbg_id of a group of tbg_size handles. */
WP_HD void wp_ref_range(uint64_t align, uint64_t rank_size, uint32_t nchunks, uint32_t index, uint32_t size,
			uint32_t tbg_id, uint32_t tbg_size, uint64_t *off, uint64_t *len)
{
	uint64_t begin = wp_slice_off(align, rank_size, index, nchunks);
	uint64_t bytes = wp_slice_off(align, rank_size, (uint64_t)index + size, nchunks) - begin;
	uint64_t s0 = wp_slice_off(align, bytes, tbg_id, tbg_size);
	*off = begin + s0;
	*len = wp_slice_off(align, bytes, (uint64_t)tbg_id + 1, tbg_size) - s0;
}

/* The part of a reference's range (o, l) a pipeline step works on: from
 * `at` within it, at most unit bytes (at 0 and unit UINT64_MAX outside
 * pipelines). len is 0 where the reference ends before at. */
WP_HD void wp_step_clip(uint64_t o, uint64_t l, uint64_t at, uint64_t unit, uint64_t *off, uint64_t *len)
{
	*off = o + at;
	*len = at < l ? (l - at < unit ? l - at : unit) : 0;
}

WP_HD void wp_step_span(uint64_t align, uint64_t rank_size, uint32_t nchunks, uint32_t index, uint32_t size,
			uint32_t tbg_id, uint32_t tbg_size, uint64_t at, uint64_t unit, uint64_t *off, uint64_t *len)
{
	uint64_t o, l;
	wp_ref_range(align, rank_size, nchunks, index, size, tbg_id, tbg_size, &o, &l);
	wp_step_clip(o, l, at, unit, off, len);
}

/* Steps of a pipeline: num_chunks of the largest chunk, unit_size bytes at
 * a time (the executor's nIterations). */
WP_HD uint64_t wp_pipeline_steps(uint64_t align, uint64_t rank_size, uint32_t nchunks, uint32_t num_chunks,
				 uint32_t unit_size)
{
	uint64_t units = rank_size / align;
	uint64_t chunk = (units + nchunks - 1) / nchunks * align;
	return ((uint64_t)num_chunks * chunk + unit_size - 1) / unit_size;
}

/* In place, a rank's buffers are views of one user buffer: an allgather's
 * input is the rank's block of its output, a reduce-scatter's output the
 * rank's block of its input, any other collective's input its output. The
 * area (WP_GEOM_*) that holds buffer t, and how far rank r's view of it
 * starts: r times the stride. rs: the collective is a reduce-scatter; ag:
 * an allgather. */
WP_HD int wp_view_area(int inplace, int rs, int t)
{
	if (!inplace || t == WP_GEOM_SCRATCH)
		return t;
	return rs ? WP_GEOM_INPUT : WP_GEOM_OUTPUT;
}

WP_HD uint64_t wp_view_stride(int inplace, int ag, int rs, int t, uint64_t in, uint64_t out)
{
	if (!inplace)
		return 0;
	if (ag && t == WP_GEOM_INPUT)
		return in;
	if (rs && t == WP_GEOM_OUTPUT)
		return out;
	return 0;
}

#endif
