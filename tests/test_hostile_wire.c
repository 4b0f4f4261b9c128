/* SPDX-License-Identifier: Apache-2.0 */
/* Regression tests for what the GPU transports parse from a peer (nvlink's and
 * xgmi's memory-blob section and endpoint address): the pure checks in
 * plugins/nvlink/nvlink_wire.c and plugins/xgmi/xgmi_wire.h, which run without
 * a device. Inputs kept in
 * fuzz/corpus/nvlink/regress-* (what fuzz_nvlink or review found) are fed as
 * they are; the rest are built here from a valid section. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvlink.h"
#include "xgmi_wire.h"

#include "testlib.h"

static struct nvl_wire nvl_valid(int kind, int nchunks, uint64_t export_size)
{
	struct nvl_wire w;
	memset(&w, 0, sizeof(w));
	w.magic = NVL_MAGIC;
	w.version = 1;
	w.kind = (uint16_t)kind;
	w.host_hash = 0x1234567890abcdefull;
	w.pid = 4242;
	w.device = 1;
	w.nchunks = nchunks;
	w.ptr = 0x7f0000100000ull;
	w.len = 4096;
	w.offset = 4096;
	w.export_id = 3;
	w.buffer_id = 77;
	w.export_size = export_size;
	return w;
}

/* Lays out a section at buf + at (at 1: not 8-byte aligned, as a section
 * following one of odd length sits in a blob). Returns its length. */
static size_t nvl_put(unsigned char *buf, size_t at, const struct nvl_wire *w, const uint64_t *chunk)
{
	memcpy(buf + at, w, sizeof(*w));
	for (int i = 0; i < w->nchunks; i++)
		memcpy(buf + at + sizeof(*w) + (size_t)i * 8, &chunk[i], 8);
	return sizeof(*w) + (size_t)w->nchunks * 8;
}

static int nvl_parse(const unsigned char *p, size_t n, struct nvl_wire *out, char *why)
{
	uint64_t chunk[NVL_MAX_CHUNKS];
	/* An exact-size copy, so that a read past the end is an ASan error. */
	unsigned char *copy = malloc(n ? n : 1);
	ck_assert_ptr_nonnull(copy);
	memcpy(copy, p, n);
	int rc = nvl_wire_parse(copy, n, out, chunk, why, 160);
	free(copy);
	return rc;
}

START_TEST(nvlink_valid_unaligned)
{
	unsigned char buf[512];
	uint64_t chunk[3] = {1 << 21, 1 << 21, 1 << 21};
	struct nvl_wire w = nvl_valid(NVL_KIND_VMM, 3, 3 << 21), out;
	char why[160] = "";
	size_t n = nvl_put(buf, 1, &w, chunk);
	uint64_t got[NVL_MAX_CHUNKS];
	ck_assert_int_eq(nvl_wire_parse(buf + 1, n, &out, got, why, sizeof(why)), 0);
	ck_assert_int_eq(out.nchunks, 3);
	ck_assert_uint_eq(out.export_size, 3 << 21);
	ck_assert_uint_eq(got[2], 1 << 21);
	/* IPC and host sections carry no chunks. */
	w = nvl_valid(NVL_KIND_IPC, 0, 1 << 21);
	n = nvl_put(buf, 3, &w, NULL);
	ck_assert_int_eq(nvl_wire_parse(buf + 3, n, &out, got, why, sizeof(why)), 0);
}
END_TEST

/* What nvl_mem_serialize sends must pass the peer's nvl_wire_parse. A host
 * registration's section once claimed a 0-byte export, which the parser
 * refused as malformed: on any machine where nvlink opened (one with a GPU),
 * every exchange of host memory failed, so host collectives could not start. */
START_TEST(nvlink_made_sections_parse)
{
	unsigned char buf[1024];
	char why[160] = "";
	struct nvl_wire w, out;
	uint64_t got[NVL_MAX_CHUNKS];
	static char host[8392704];
	nvl_wire_make(&w, NULL, host + 64, sizeof(host) - 64, 0x1234, 0, 4242);
	size_t n = nvl_put(buf, 1, &w, NULL);
	ck_assert_msg(nvl_wire_parse(buf + 1, n, &out, got, why, sizeof(why)) == 0, "host section: %s", why);
	ck_assert_int_eq(out.kind, NVL_KIND_HOST);
	ck_assert_uint_eq(out.len, sizeof(host) - 64);

	struct nvl_export x;
	memset(&x, 0, sizeof(x));
	x.base = 0x7f0000000000ull;
	x.size = 6u << 20;
	x.kind = NVL_KIND_VMM;
	x.nchunks = 3;
	uint64_t chunk[3];
	for (int i = 0; i < 3; i++)
		x.chunk[i] = chunk[i] = 2u << 20;
	nvl_wire_make(&w, &x, (void *)(uintptr_t)(x.base + 4096), (4u << 20) - 4096, 0x1234, 1, 4242);
	n = nvl_put(buf, 3, &w, chunk);
	ck_assert_msg(nvl_wire_parse(buf + 3, n, &out, got, why, sizeof(why)) == 0, "VMM section: %s", why);
	ck_assert_int_eq(out.nchunks, 3);
	ck_assert_uint_eq(out.offset, 4096);

	x.kind = NVL_KIND_IPC;
	nvl_wire_make(&w, &x, (void *)(uintptr_t)x.base, x.size, 0x1234, 1, 4242);
	n = nvl_put(buf, 0, &w, NULL);
	ck_assert_msg(nvl_wire_parse(buf, n, &out, got, why, sizeof(why)) == 0, "IPC section: %s", why);
	ck_assert_int_eq(out.nchunks, 0);
}
END_TEST

/* Chunk sizes whose sum wraps past 2^64 to the export size: the old check (a
 * plain sum) let them through to the VMM import. */
START_TEST(nvlink_chunk_sum_wraps)
{
	unsigned char buf[512];
	uint64_t export_size = 3 << 21;
	uint64_t chunk[2] = {UINT64_MAX - (1 << 20) + 1, export_size + (1 << 20)};
	ck_assert_uint_eq(chunk[0] + chunk[1], export_size); /* the wrap */
	struct nvl_wire w = nvl_valid(NVL_KIND_VMM, 2, export_size), out;
	char why[160] = "";
	size_t n = nvl_put(buf, 0, &w, chunk);
	ck_assert_int_eq(nvl_parse(buf, n, &out, why), -WEFT_ERR_PROTOCOL);
	ck_assert_msg(strstr(why, "does not fit"), "why: %s", why);
}
END_TEST

START_TEST(nvlink_chunk_zero_or_short)
{
	unsigned char buf[512];
	char why[160] = "";
	struct nvl_wire out;
	uint64_t zero[2] = {3 << 21, 0};
	struct nvl_wire w = nvl_valid(NVL_KIND_VMM, 2, 3 << 21);
	size_t n = nvl_put(buf, 0, &w, zero);
	ck_assert_int_eq(nvl_parse(buf, n, &out, why), -WEFT_ERR_PROTOCOL);
	uint64_t shrt[2] = {1 << 21, 1 << 21};
	n = nvl_put(buf, 0, &w, shrt);
	ck_assert_int_eq(nvl_parse(buf, n, &out, why), -WEFT_ERR_PROTOCOL);
	ck_assert_msg(strstr(why, "add up"), "why: %s", why);
}
END_TEST

START_TEST(nvlink_every_truncation_and_field)
{
	unsigned char buf[512];
	uint64_t chunk[2] = {1 << 21, 1 << 21};
	struct nvl_wire w = nvl_valid(NVL_KIND_VMM, 2, 2 << 21), out;
	char why[160];
	size_t n = nvl_put(buf, 0, &w, chunk);
	for (size_t cut = 0; cut < n; cut++) {
		why[0] = '\0';
		ck_assert_int_eq(nvl_parse(buf, cut, &out, why), -WEFT_ERR_PROTOCOL);
		ck_assert(why[0] != '\0');
	}
	ck_assert_int_eq(nvl_parse(buf, n, &out, why), 0);
	struct nvl_wire bad[7];
	for (int i = 0; i < 7; i++)
		bad[i] = w;
	bad[0].magic ^= 1;
	bad[1].version = 2;
	bad[2].kind = 4;
	bad[3].nchunks = NVL_MAX_CHUNKS + 1;
	bad[4].kind = NVL_KIND_IPC; /* chunks on a kind that has none */
	bad[5].offset = bad[5].export_size + 1;
	bad[6].len = bad[6].export_size - bad[6].offset + 1;
	for (int i = 0; i < 7; i++) {
		memcpy(buf, &bad[i], sizeof(bad[i]));
		ck_assert_msg(nvl_parse(buf, n, &out, why) == -WEFT_ERR_PROTOCOL, "field case %d accepted", i);
	}
}
END_TEST

/* The inputs kept in the fuzz corpus: mode byte, then the section. */
START_TEST(nvlink_corpus_regressions)
{
	static const char *const files[] = {"regress-chunk-wrap", "regress-chunk-zero"};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[1024];
		snprintf(path, sizeof(path), "%s/fuzz/corpus/nvlink/%s", WEFT_SOURCE_DIR, files[i]);
		FILE *f = fopen(path, "rb");
		ck_assert_msg(f != NULL, "cannot open %s", path);
		unsigned char buf[4096];
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		ck_assert_uint_gt(n, 1);
		struct nvl_wire out;
		char why[160] = "";
		ck_assert_msg(nvl_parse(buf + 1, n - 1, &out, why) == -WEFT_ERR_PROTOCOL, "%s accepted", files[i]);
	}
}
END_TEST

START_TEST(nvlink_addr)
{
	struct nvl_addr a = {.magic = NVL_MAGIC, .rank = 3, .device = 0, .pid = 1, .host_hash = 2}, out;
	unsigned char buf[64];
	char why[160];
	memcpy(buf + 1, &a, sizeof(a));
	ck_assert_int_eq(nvl_addr_parse(buf + 1, sizeof(a), 3, &out, why, sizeof(why)), 0);
	ck_assert_int_eq(out.rank, 3);
	ck_assert_int_eq(nvl_addr_parse(buf + 1, sizeof(a), 2, &out, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(nvl_addr_parse(buf + 1, sizeof(a) - 1, 3, &out, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(nvl_addr_parse(NULL, 0, 3, &out, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
	a.device = -1;
	memcpy(buf + 1, &a, sizeof(a));
	ck_assert_int_eq(nvl_addr_parse(buf + 1, sizeof(a), 3, &out, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
}
END_TEST

START_TEST(xgmi_section_and_addr)
{
	struct xg_wire w, out;
	memset(&w, 0, sizeof(w));
	w.magic = XG_MAGIC;
	w.version = 1;
	w.kind = XG_KIND_IPC;
	w.len = 4096;
	w.offset = 4096;
	w.export_size = 1 << 21;
	unsigned char buf[512];
	char why[160];
	memcpy(buf + 5, &w, sizeof(w));
	ck_assert_int_eq(xg_wire_parse(buf + 5, sizeof(w), &out, why, sizeof(why)), 0);
	ck_assert_uint_eq(out.export_size, 1 << 21);
	for (size_t cut = 0; cut < sizeof(w); cut++)
		ck_assert_int_eq(xg_wire_parse(buf + 5, cut, &out, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
	struct xg_wire bad[5] = {w, w, w, w, w};
	bad[0].magic ^= 1;
	bad[1].version = 0;
	bad[2].kind = 2; /* nvlink's VMM kind */
	bad[3].offset = bad[3].export_size + 1;
	bad[4].len = UINT64_MAX; /* offset + len wraps */
	for (int i = 0; i < 5; i++)
		ck_assert_msg(xg_wire_parse(&bad[i], sizeof(w), &out, why, sizeof(why)) == -WEFT_ERR_PROTOCOL,
			      "field case %d accepted", i);
	struct xg_addr a = {.magic = XG_MAGIC, .rank = 1, .device = 2}, ao;
	memcpy(buf + 1, &a, sizeof(a));
	ck_assert_int_eq(xg_addr_parse(buf + 1, sizeof(a), 1, &ao, why, sizeof(why)), 0);
	ck_assert_int_eq(xg_addr_parse(buf + 1, sizeof(a), 0, &ao, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(xg_addr_parse(buf + 1, sizeof(a) + 1, 1, &ao, why, sizeof(why)), -WEFT_ERR_PROTOCOL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_wire");
	TCase *tc = tcase_create("gpu-transport-parsers");
	tcase_add_test(tc, nvlink_valid_unaligned);
	tcase_add_test(tc, nvlink_made_sections_parse);
	tcase_add_test(tc, nvlink_chunk_sum_wraps);
	tcase_add_test(tc, nvlink_chunk_zero_or_short);
	tcase_add_test(tc, nvlink_every_truncation_and_field);
	tcase_add_test(tc, nvlink_corpus_regressions);
	tcase_add_test(tc, nvlink_addr);
	tcase_add_test(tc, xgmi_section_and_addr);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
