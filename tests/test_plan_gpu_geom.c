/* SPDX-License-Identifier: Apache-2.0 */
/* What the device interpreter of algo-plan shares with the CPU one, checked
 * on the CPU (no GPU needed): the offset arithmetic of geom.h, which both
 * run, and the encoding of a rank's plan into the kernel's table (enc.c),
 * on MSCCL++ 0.9's own plans, the project's plans and a plan with a
 * pipeline. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "geom.h"
#include "testlib.h"

/* Slices of every reference tile the buffer in order, whole alignment
 * units each, the longer ones first and one unit longer at most; a group's
 * slices tile their reference the same way. */
START_TEST(slices_tile_the_buffer)
{
	uint64_t seed = 12345;
	for (int iter = 0; iter < 20000; iter++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t align = 1ull << (seed >> 60) % 9;
		uint32_t nchunks = 1 + (uint32_t)(seed >> 40) % 16;
		/* One in four past 2^32 units: wp_div's 64-bit path. */
		uint64_t size = align * ((seed >> 20) % 5000) << (iter % 4 ? 0 : 24);
		uint32_t tbg = 1 + (uint32_t)(seed >> 8) % 4;
		uint64_t at = 0;
		for (uint32_t c = 0; c < nchunks; c++) {
			uint64_t o = 0, l = 0, sub = 0;
			wp_ref_range(align, size, nchunks, c, 1, 0, 1, &o, &l);
			ck_assert_uint_eq(o, at);
			ck_assert_uint_eq(l % align, 0);
			uint64_t units = size / align, each = units / nchunks;
			ck_assert_uint_eq(l / align, each + (c < units % nchunks));
			for (uint32_t g = 0; g < tbg; g++) {
				uint64_t go, gl;
				wp_ref_range(align, size, nchunks, c, 1, g, tbg, &go, &gl);
				ck_assert_uint_eq(go, o + sub);
				sub += gl;
			}
			ck_assert_uint_eq(sub, l);
			at += l;
		}
		ck_assert_uint_eq(at, size);
		/* A reference of several chunks is their union. */
		uint64_t o2, l2, oa, la, ob, lb;
		uint32_t first = (uint32_t)(seed % nchunks), n = nchunks - first;
		wp_ref_range(align, size, nchunks, first, n, 0, 1, &o2, &l2);
		wp_ref_range(align, size, nchunks, first, 1, 0, 1, &oa, &la);
		wp_ref_range(align, size, nchunks, nchunks - 1, 1, 0, 1, &ob, &lb);
		ck_assert_uint_eq(o2, oa);
		ck_assert_uint_eq(o2 + l2, ob + lb);
	}
}
END_TEST

/* Values worked by hand from MSCCL++'s calcOffset. */
START_TEST(known_offsets)
{
	/* 10 units in 3 slices: 4, 3, 3. */
	ck_assert_uint_eq(wp_slice_off(16, 160, 0, 3), 0);
	ck_assert_uint_eq(wp_slice_off(16, 160, 1, 3), 64);
	ck_assert_uint_eq(wp_slice_off(16, 160, 2, 3), 112);
	ck_assert_uint_eq(wp_slice_off(16, 160, 3, 3), 160);
	/* A size short of a unit rounds down. */
	ck_assert_uint_eq(wp_slice_off(16, 170, 3, 3), 160);
	/* 2^32 units in 3 slices: 1431655766, 1431655765, 1431655765. */
	ck_assert_uint_eq(wp_slice_off(16, 1ull << 36, 1, 3), 22906492256ull);
	ck_assert_uint_eq(wp_slice_off(16, 1ull << 36, 2, 3), 45812984496ull);
	uint64_t o, l;
	/* Chunk 1 of 4 over 1024 bytes is [256, 512); threadblock 2 of a group
	 * of 3 takes its last 5 units. */
	wp_ref_range(16, 1024, 4, 1, 1, 2, 3, &o, &l);
	ck_assert_uint_eq(o, 256 + 176);
	ck_assert_uint_eq(l, 80);
	/* Pipeline steps: a step past the reference is empty, the last short. */
	wp_step_span(16, 1024, 4, 1, 1, 0, 1, 200, 100, &o, &l);
	ck_assert_uint_eq(o, 456);
	ck_assert_uint_eq(l, 56);
	wp_step_span(16, 1024, 4, 1, 1, 0, 1, 300, 100, &o, &l);
	ck_assert_uint_eq(l, 0);
	wp_step_span(16, 1024, 4, 1, 1, 0, 1, 0, UINT64_MAX, &o, &l);
	ck_assert_uint_eq(o, 256);
	ck_assert_uint_eq(l, 256);
	/* 2 chunks of the largest chunk (1000 bytes of 7 chunks: 144) in 100s. */
	ck_assert_uint_eq(wp_pipeline_steps(16, 1008, 7, 2, 100), 3);
	ck_assert_uint_eq(wp_pipeline_steps(16, 1024, 4, 1, 256), 1);
	uint64_t size;
	uint32_t n;
	wp_geom_rank(0, 4, 64, 256, &size, &n);
	ck_assert_uint_eq(size, 256);
	ck_assert_uint_eq(n, 4);
	wp_geom_rank(2, 4, 64, 256, &size, &n);
	ck_assert_uint_eq(size, 64);
	ck_assert_uint_eq(n, 2);
}
END_TEST

/* In place, an allgather's input is the rank's block of its output, a
 * reduce-scatter's output the rank's block of its input. */
START_TEST(in_place_views)
{
	ck_assert_int_eq(wp_view_area(0, 0, WP_GEOM_INPUT), WP_GEOM_INPUT);
	ck_assert_int_eq(wp_view_area(1, 0, WP_GEOM_INPUT), WP_GEOM_OUTPUT);
	ck_assert_int_eq(wp_view_area(1, 1, WP_GEOM_OUTPUT), WP_GEOM_INPUT);
	ck_assert_int_eq(wp_view_area(1, 1, WP_GEOM_SCRATCH), WP_GEOM_SCRATCH);
	ck_assert_uint_eq(wp_view_stride(1, 1, 0, WP_GEOM_INPUT, 64, 256), 64);
	ck_assert_uint_eq(wp_view_stride(1, 1, 0, WP_GEOM_OUTPUT, 64, 256), 0);
	ck_assert_uint_eq(wp_view_stride(1, 0, 1, WP_GEOM_OUTPUT, 256, 64), 64);
	ck_assert_uint_eq(wp_view_stride(0, 1, 0, WP_GEOM_INPUT, 64, 256), 0);
}
END_TEST

/* The threadblocks' images a block stages at its start: each holds its
 * threadblock, then its references, then its ops, as the tables do, at a
 * 16-byte stride that fits the shared memory a block gets; or none where a
 * threadblock would not fit. */
static void check_images(const struct wpd_tb *tbs, uint32_t ntbs, const struct wpd_op *ops,
			 const struct wpd_refloc *refs)
{
	char *img;
	uint32_t stride, at;
	int rc = wpd_encode_images(tbs, ntbs, ops, refs, &img, &stride, &at);
	uint64_t need = 0;
	for (uint32_t t = 0; t < ntbs; t++) {
		uint64_t n = WPD_IMG_REFS + (uint64_t)tbs[t].nrefs * sizeof(*refs) + 15 + tbs[t].nops * sizeof(*ops);
		need = n > need ? n : need;
	}
	if (rc == -E2BIG) {
		ck_assert_uint_gt(need, WPD_IMG_CAP - 15);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(stride % 16, 0);
	ck_assert_uint_eq(at % 16, 0);
	ck_assert_uint_le(stride, WPD_IMG_CAP);
	for (uint32_t t = 0; t < ntbs; t++) {
		const char *b = img + (uint64_t)t * stride;
		ck_assert_mem_eq(b, &tbs[t], sizeof(tbs[t]));
		ck_assert_uint_le(WPD_IMG_REFS + tbs[t].nrefs * sizeof(*refs), at);
		ck_assert_uint_le(at + tbs[t].nops * sizeof(*ops), stride);
		if (tbs[t].nrefs)
			ck_assert_mem_eq(b + WPD_IMG_REFS, refs + tbs[t].ref_first, tbs[t].nrefs * sizeof(*refs));
		if (tbs[t].nops)
			ck_assert_mem_eq(b + at, ops + tbs[t].first, tbs[t].nops * sizeof(*ops));
	}
	free(img);
}

/* The reference lists the kernel resolves at its start: each threadblock's
 * list holds every source and destination of its ops, in order, and each op
 * finds its own at ref0. */
static void check_refs(struct wpd_tb *tbs, uint32_t ntbs, struct wpd_op *ops)
{
	struct wpd_refloc *refs;
	uint32_t nrefs, most, at = 0, longest = 0;
	ck_assert_int_eq(wpd_encode_refs(tbs, ntbs, ops, &refs, &nrefs, &most), 0);
	for (uint32_t t = 0; t < ntbs; t++) {
		ck_assert_uint_eq(tbs[t].ref_first, at);
		for (uint32_t i = 0; i < tbs[t].nops; i++) {
			const struct wpd_op *o = &ops[tbs[t].first + i];
			ck_assert_uint_eq(o->ref0, at - tbs[t].ref_first);
			for (uint32_t j = 0; j < (uint32_t)o->nsrc + o->ndst; j++, at++) {
				const struct wpd_ref *e = j < o->nsrc ? &o->src[j] : &o->dst[j - o->nsrc];
				ck_assert_mem_eq(&refs[at].ref, e, sizeof(*e));
				ck_assert_uint_eq(refs[at].tbg_id, o->tbg_id);
				ck_assert_uint_eq(refs[at].tbg_size, o->tbg_size);
			}
		}
		ck_assert_uint_eq(tbs[t].nrefs, at - tbs[t].ref_first);
		longest = tbs[t].nrefs > longest ? tbs[t].nrefs : longest;
	}
	ck_assert_uint_eq(nrefs, at);
	ck_assert_uint_eq(most, longest);
	check_images(tbs, ntbs, ops, refs);
	free(refs);
}

/* Every op of the encoding matches the plan's, its channels and remote
 * buffers resolved to the rank's own lists, pipelines followed by their
 * bodies. */
static void check_encoding(const struct wp_plan *p)
{
	for (uint32_t r = 0; r < p->nranks; r++) {
		const struct wp_rank *rk = &p->ranks[r];
		struct wpd_tb *tbs;
		struct wpd_op *ops;
		uint32_t nops;
		ck_assert_int_eq(wpd_encode(p, r, &tbs, &ops, &nops), 0);
		uint32_t at = 0;
		for (uint32_t t = 0; t < rk->ntbs; t++) {
			const struct wp_threadblock *tb = &rk->tbs[t];
			ck_assert_uint_eq(tbs[t].first, at);
			ck_assert_uint_eq(tbs[t].nops, wp_tb_op_count(tb));
			for (uint32_t i = 0; i < tb->nops; i++) {
				const struct wp_op *op = &tb->ops[i];
				for (uint32_t k = 0; k <= (op->kind == WP_OP_PIPELINE ? op->nops : 0); k++) {
					const struct wp_op *o = k ? &op->ops[k - 1] : op;
					const struct wpd_op *d = &ops[at++];
					ck_assert_int_eq(d->kind, o->kind);
					ck_assert_uint_eq(d->nsrc, o->nsrc);
					ck_assert_uint_eq(d->ndst, o->ndst);
					ck_assert_uint_eq(d->nchan, o->nchan_ids);
					ck_assert_uint_eq(d->tbg_size, o->tbg_size ? o->tbg_size : 1);
					if (o->kind == WP_OP_PIPELINE)
						ck_assert_uint_eq(d->nops, o->nops);
					for (uint32_t c = 0; c < o->nchan_ids; c++) {
						uint32_t ch = d->ch[c];
						ck_assert_uint_lt(ch, rk->peers[o->chan].n);
						ck_assert_uint_eq(ch, tb->chans[o->chan].v[o->chan_ids[c]]);
					}
					for (uint32_t j = 0; j < o->nsrc + o->ndst; j++) {
						const struct wp_buff *b = j < o->nsrc ? &o->src[j] : &o->dst[j - o->nsrc];
						const struct wpd_ref *e = j < o->nsrc ? &d->src[j] : &d->dst[j - o->nsrc];
						ck_assert_uint_eq(e->remote, b->remote);
						ck_assert_uint_eq(e->index, b->index);
						ck_assert_uint_eq(e->size, b->size);
						if (!b->remote) {
							ck_assert_uint_eq(e->type, b->type);
							continue;
						}
						ck_assert_uint_lt(e->rbuf, rk->nrbufs);
						ck_assert_uint_eq(rk->rbufs[e->rbuf].rank, b->peer);
						ck_assert_uint_eq(rk->rbufs[e->rbuf].type, b->type);
					}
				}
			}
		}
		ck_assert_uint_eq(at, nops);
		check_refs(tbs, rk->ntbs, ops);
		free(tbs);
		free(ops);
	}
}

static void check_file(const char *path)
{
	struct wp_plan *p = NULL;
	char err[512];
	int rc = wp_plan_load(path, &p, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s: %s", path, err);
	check_encoding(p);
	wp_plan_free(p);
}

/* A threadblock whose image would pass the shared memory a block gets runs
 * from the tables: no images for its plan; one op less fits. */
START_TEST(long_threadblocks_have_no_image)
{
	uint32_t fit = (WPD_IMG_CAP - WPD_IMG_REFS) / sizeof(struct wpd_op);
	struct wpd_op *ops = calloc(fit + 1, sizeof(*ops));
	struct wpd_refloc ref;
	struct wpd_tb tb = {0, fit + 1, 0, 0};
	char *img = NULL;
	uint32_t stride = 0, at = 0;
	ck_assert_ptr_nonnull(ops);
	ck_assert_int_eq(wpd_encode_images(&tb, 1, ops, &ref, &img, &stride, &at), -E2BIG);
	ck_assert_ptr_null(img);
	tb.nops = fit;
	ck_assert_int_eq(wpd_encode_images(&tb, 1, ops, &ref, &img, &stride, &at), 0);
	ck_assert_uint_eq(at, WPD_IMG_REFS);
	ck_assert_uint_le(stride, WPD_IMG_CAP);
	free(img);
	free(ops);
}
END_TEST

static const char *const mscclpp_plans[] = {
	"allreduce", "allreduce_packet", "reduce", "reduce_pack", "reduce_pack_tbg", "reduce_tbg",
	"transfer_pack", "transfer_pack_tbg",
};

START_TEST(encodes_mscclpp_plans)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.json", PLAN_DATA_DIR, mscclpp_plans[_i]);
	check_file(path);
}
END_TEST

static const char *const own_plans[] = {
	"allreduce_ring_4r_ll_mem", "allreduce_ring_3r_simple_port", "allreduce_oneshot_8r_ll_port",
	"allgather_ring_8r_simple_mem", "reducescatter_ring_4r_ll_mem", "alltoall_ring_4r_simple_mem",
};

START_TEST(encodes_own_plans)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s.json", PLAN_OWN_DIR, own_plans[_i]);
	check_file(path);
}
END_TEST

/* Rank 1 waits in a pipeline after a barrier; rank 0 copies and signals. */
static const char pipeline_plan[] =
	"{\"name\":\"p\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":false,\"gpus\":["
	"{\"id\":0,\"input_chunks\":2,\"output_chunks\":2,\"scratch_chunks\":0,"
	"\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[1,1]}],\"remote_buffers\":[],"
	"\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[1,0]}],"
	"\"ops\":[{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":2}],"
	"\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":2}]},"
	"{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0,1]}]}]},"
	"{\"id\":1,\"input_chunks\":2,\"output_chunks\":2,\"scratch_chunks\":0,"
	"\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[0,0]}],\"remote_buffers\":[],"
	"\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0,1]}],"
	"\"ops\":[{\"name\":\"barrier\",\"barrier_id\":3,\"num_threadblocks\":1},"
	"{\"name\":\"pipeline\",\"iter_context\":{\"unit_size\":4096,\"num_chunks\":1},\"ops\":["
	"{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":1,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"o\",\"index\":1,\"size\":1}]},"
	"{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[1]}]},"
	"{\"name\":\"nop\"}]}]}]}\n";

START_TEST(encodes_a_pipeline)
{
	struct wp_plan *p = NULL;
	char err[512];
	int rc = wp_plan_load_mem("pipeline.json", pipeline_plan, strlen(pipeline_plan), &p, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
	check_encoding(p);
	struct wpd_tb *tbs;
	struct wpd_op *ops;
	uint32_t nops;
	ck_assert_int_eq(wpd_encode(p, 1, &tbs, &ops, &nops), 0);
	ck_assert_uint_eq(nops, 5);
	ck_assert_int_eq(ops[1].kind, WP_OP_PIPELINE);
	ck_assert_uint_eq(ops[1].nops, 2);
	ck_assert_uint_eq(ops[1].unit_size, 4096);
	ck_assert_int_eq(ops[3].kind, WP_OP_WAIT);
	ck_assert_uint_eq(ops[3].ch[0], 1);
	ck_assert_int_eq(ops[4].kind, WP_OP_NOP);
	ck_assert_uint_eq(ops[0].barrier_id, 3);
	free(tbs);
	free(ops);
	/* Rank 0's threadblock lists its channels in reverse: the encoding
	 * names the rank's channels. */
	ck_assert_int_eq(wpd_encode(p, 0, &tbs, &ops, &nops), 0);
	ck_assert_uint_eq(ops[1].ch[0], 1);
	ck_assert_uint_eq(ops[1].ch[1], 0);
	free(tbs);
	free(ops);
	wp_plan_free(p);
}
END_TEST

/* A one-rank plan of local copies and a reduction, out of place or in
 * place (%s): weft-plan-gpu-bench's, then a copy that depends on nothing
 * before it, then one that depends on the reduction, not on that copy. */
static const char local_plan[] =
	"{\"name\":\"l\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":%s,\"gpus\":["
	"{\"id\":0,\"input_chunks\":2,\"output_chunks\":2,\"scratch_chunks\":2,\"channels\":[],"
	"\"remote_buffers\":[],\"threadblocks\":[{\"id\":0,\"channels\":[],\"ops\":["
	"{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"o\",\"index\":0,\"size\":1}]},"
	"{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":1,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}]},"
	"{\"name\":\"re\",\"src_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"o\",\"index\":1,\"size\":1}]},"
	"{\"name\":\"copy\",\"src_buff\":[{\"type\":\"i\",\"index\":0,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"s\",\"index\":1,\"size\":1}]},"
	"{\"name\":\"copy\",\"src_buff\":[{\"type\":\"o\",\"index\":1,\"size\":1}],"
	"\"dst_buff\":[{\"type\":\"s\",\"index\":0,\"size\":1}]}]}]}]}\n";

/* A block skips the barrier after an op only where the next touches none
 * of the chunks it, or any op since the last barrier, writes, nor writes
 * any they read: the reduction reads what the second copy wrote, the last
 * copy what the reduction wrote; in place, input and output are one
 * buffer; the last op keeps its barrier. */
static void check_nosync(const char *inplace, const uint8_t *want)
{
	char text[2048];
	snprintf(text, sizeof(text), local_plan, inplace);
	struct wp_plan *p = NULL;
	char err[512];
	int rc = wp_plan_load_mem("local.json", text, strlen(text), &p, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
	struct wpd_tb *tbs;
	struct wpd_op *ops;
	uint32_t nops;
	ck_assert_int_eq(wpd_encode(p, 0, &tbs, &ops, &nops), 0);
	ck_assert_uint_eq(nops, 5);
	for (uint32_t i = 0; i < nops; i++)
		ck_assert_msg(ops[i].nosync == want[i], "inplace %s, op %u: nosync %u", inplace, i, ops[i].nosync);
	free(tbs);
	free(ops);
	wp_plan_free(p);
}

START_TEST(independent_ops_skip_the_barrier)
{
	static const uint8_t out_of_place[] = {1, 0, 1, 0, 0}, in_place[] = {0, 0, 0, 1, 0};
	check_nosync("false", out_of_place);
	check_nosync("true", in_place);
	/* Operations with channels keep theirs. */
	struct wp_plan *p = NULL;
	char err[512];
	ck_assert_int_eq(wp_plan_load_mem("pipeline.json", pipeline_plan, strlen(pipeline_plan), &p, err, sizeof(err)),
			 0);
	struct wpd_tb *tbs;
	struct wpd_op *ops;
	uint32_t nops;
	for (uint32_t r = 0; r < 2; r++) {
		ck_assert_int_eq(wpd_encode(p, r, &tbs, &ops, &nops), 0);
		for (uint32_t i = 0; i < nops; i++)
			ck_assert_uint_eq(ops[i].nosync, 0);
		free(tbs);
		free(ops);
	}
	wp_plan_free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("plan_gpu_geom");
	TCase *tc = tcase_create("geom");
	tcase_add_test(tc, slices_tile_the_buffer);
	tcase_add_test(tc, known_offsets);
	tcase_add_test(tc, in_place_views);
	suite_add_tcase(s, tc);
	tc = tcase_create("encode");
	tcase_add_loop_test(tc, encodes_mscclpp_plans, 0, (int)(sizeof(mscclpp_plans) / sizeof(mscclpp_plans[0])));
	tcase_add_loop_test(tc, encodes_own_plans, 0, (int)(sizeof(own_plans) / sizeof(own_plans[0])));
	tcase_add_test(tc, encodes_a_pipeline);
	tcase_add_test(tc, long_threadblocks_have_no_image);
	tcase_add_test(tc, independent_ops_skip_the_barrier);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
