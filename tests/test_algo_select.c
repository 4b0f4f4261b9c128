/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the collective layer without processes: float16/bfloat16
 * conversions and reductions of algo-host (reduce.c built in), names and
 * parsers, and algorithm selection as weft-info --select shows it, with the
 * real algo-host pack loaded from the build tree and [algorithm] rules. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "../plugins/algo-host/ah.h"
#include "coll.h"
#include "testlib.h"

/* reduce.c names the pack's services table; nothing here logs through it. */
const struct weft_core_api *ah_core;

static float bits_f(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

START_TEST(half_round_trip)
{
	/* Every half that is not a NaN survives half -> float -> half. */
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
			continue;
		uint16_t back = ah_float_to_half(ah_half_to_float((uint16_t)h));
		ck_assert_msg(back == h, "half 0x%04x came back as 0x%04x", h, back);
	}
	ck_assert_float_eq(ah_half_to_float(0x3c00), 1.0f);
	ck_assert_float_eq(ah_half_to_float(0xc000), -2.0f);
	ck_assert_float_eq(ah_half_to_float(0x7bff), 65504.0f);
	ck_assert_float_eq(ah_half_to_float(0x0001), ldexpf(1.0f, -24));
}
END_TEST

START_TEST(half_rounding)
{
	/* Ties go to the even neighbour, others to the nearest. */
	ck_assert_uint_eq(ah_float_to_half(1.0f + ldexpf(1.0f, -11)), 0x3c00);
	ck_assert_uint_eq(ah_float_to_half(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
	ck_assert_uint_eq(ah_float_to_half(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
	ck_assert_uint_eq(ah_float_to_half(65504.0f), 0x7bff);
	ck_assert_uint_eq(ah_float_to_half(65519.0f), 0x7bff);
	ck_assert_uint_eq(ah_float_to_half(65520.0f), 0x7c00);
	ck_assert_uint_eq(ah_float_to_half(-1e9f), 0xfc00);
	ck_assert_uint_eq(ah_float_to_half(bits_f(0x7f800000u)), 0x7c00);
	uint16_t nan = ah_float_to_half(bits_f(0x7fc00000u));
	ck_assert_msg((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff), "NaN became 0x%04x", nan);
	/* Subnormals: 2^-25 is a tie between 0 and 2^-24 (goes to 0), 3 * 2^-25
	 * a tie between 2^-24 and 2^-23 (goes to 2^-23). */
	ck_assert_uint_eq(ah_float_to_half(ldexpf(1.0f, -25)), 0x0000);
	ck_assert_uint_eq(ah_float_to_half(3 * ldexpf(1.0f, -25)), 0x0002);
	ck_assert_uint_eq(ah_float_to_half(ldexpf(1.0f, -14)), 0x0400);
	ck_assert_uint_eq(ah_float_to_half(-0.0f), 0x8000);
}
END_TEST

START_TEST(bf16_conversions)
{
	for (uint32_t h = 0; h < 0x10000; h++) {
		if ((h & 0x7f80) == 0x7f80 && (h & 0x7f))
			continue;
		uint16_t back = ah_float_to_bf16(ah_bf16_to_float((uint16_t)h));
		ck_assert_msg(back == h, "bfloat16 0x%04x came back as 0x%04x", h, back);
	}
	ck_assert_uint_eq(ah_float_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
	ck_assert_uint_eq(ah_float_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
	ck_assert_uint_eq(ah_float_to_bf16(bits_f(0x7f7fffffu)), 0x7f80);
	uint16_t nan = ah_float_to_bf16(bits_f(0x7f800001u));
	ck_assert_msg((nan & 0x7f80) == 0x7f80 && (nan & 0x7f), "NaN became 0x%04x", nan);
}
END_TEST

START_TEST(reductions)
{
	int8_t a[3] = {100, -128, 7}, b[3] = {100, -1, -7};
	ah_reduce(WEFT_INT8, WEFT_SUM, a, b, 3); /* wraps instead of undefined behaviour */
	ck_assert_int_eq(a[0], -56);
	ck_assert_int_eq(a[1], 127);
	ck_assert_int_eq(a[2], 0);
	int32_t s[2] = {-7, 9};
	ah_finish(WEFT_INT32, WEFT_AVG, s, 2, 2);
	ck_assert_int_eq(s[0], -3); /* integer division truncates */
	ck_assert_int_eq(s[1], 4);
	uint64_t m[2] = {5, UINT64_MAX}, n2[2] = {9, 1};
	ah_reduce(WEFT_UINT64, WEFT_MIN, m, n2, 2);
	ck_assert_uint_eq(m[0], 5);
	ck_assert_uint_eq(m[1], 1);
	uint16_t h[2] = {ah_float_to_half(1000.0f), ah_float_to_half(-3.0f)};
	uint16_t g[2] = {ah_float_to_half(24.0f), ah_float_to_half(5.0f)};
	ah_reduce(WEFT_FLOAT16, WEFT_SUM, h, g, 2);
	ck_assert_float_eq(ah_half_to_float(h[0]), 1024.0f);
	ck_assert_float_eq(ah_half_to_float(h[1]), 2.0f);
	ah_reduce(WEFT_FLOAT16, WEFT_PROD, h, g, 2);
	ck_assert_float_eq(ah_half_to_float(h[0]), 24576.0f);
	ck_assert_float_eq(ah_half_to_float(h[1]), 10.0f);
	uint16_t bf[1] = {ah_float_to_bf16(3.0f)};
	ah_finish(WEFT_BFLOAT16, WEFT_AVG, bf, 1, 4);
	ck_assert_float_eq(ah_bf16_to_float(bf[0]), 0.75f);
	double d[1] = {2.0}, e[1] = {-8.5};
	ah_reduce(WEFT_FLOAT64, WEFT_MAX, d, e, 1);
	ck_assert_double_eq(d[0], 2.0);
	ck_assert(ah_reduce_supported(WEFT_BFLOAT16, WEFT_AVG));
	ck_assert(!ah_reduce_supported(WEFT_FP8_E4M3, WEFT_SUM));
	ck_assert(!ah_reduce_supported(WEFT_FP8_E5M2, WEFT_MAX));
}
END_TEST

START_TEST(names)
{
	enum weft_datatype t;
	enum weft_redop op;
	ck_assert_int_eq(weft_datatype_parse("half", &t), 0);
	ck_assert_int_eq(t, WEFT_FLOAT16);
	ck_assert_int_eq(weft_datatype_parse("double", &t), 0);
	ck_assert_int_eq(t, WEFT_FLOAT64);
	ck_assert_int_eq(weft_datatype_parse("fp8_e5m2", &t), 0);
	ck_assert_int_eq(t, WEFT_FP8_E5M2);
	ck_assert_int_eq(weft_datatype_parse("float128", &t), -EINVAL);
	ck_assert_int_eq(weft_redop_parse("avg", &op), 0);
	ck_assert_int_eq(op, WEFT_AVG);
	ck_assert_int_eq(weft_redop_parse("mean", &op), -EINVAL);
	for (int i = 0; i < WEFT_DATATYPE_COUNT; i++) {
		ck_assert_int_eq(weft_datatype_parse(weft_datatype_name(i), &t), 0);
		ck_assert_int_eq((int)t, i);
	}
	ck_assert_uint_eq(weft_datatype_size(WEFT_BFLOAT16), 2);
	ck_assert_uint_eq(weft_datatype_size(WEFT_UINT64), 8);
	ck_assert_uint_eq(weft_datatype_size(WEFT_FP8_E4M3), 1);
	ck_assert_uint_eq(weft_datatype_size((enum weft_datatype)99), 0);
	ck_assert_str_eq(weft_datatype_name((enum weft_datatype)-1), "unknown");
	/* Outside any group, end is a usage error; nesting works. */
	ck_assert_int_eq(weft_group_end(), -EINVAL);
	ck_assert_int_eq(weft_group_start(), 0);
	ck_assert_int_eq(weft_group_start(), 0);
	ck_assert_int_eq(weft_group_end(), 0);
	ck_assert_int_eq(weft_group_end(), 0);
	ck_assert_int_eq(weft_allreduce(NULL, NULL, 0, WEFT_FLOAT32, WEFT_SUM, NULL, NULL), -EINVAL);
}
END_TEST

/* Writes a config with the given [algorithm] lines, points WEFT_CONFIG at it and
 * returns what weft__coll_print_choices prints for nranks host ranks. Each Check
 * test runs in its own process, so the config loads fresh. */
static char *choices_with(const char *algorithm_section, int nranks)
{
	char *dir = wt_mkdtemp("algsel");
	ck_assert_ptr_nonnull(dir);
	char text[2048];
	snprintf(text, sizeof(text), "[algorithm]\n%s", algorithm_section);
	char *path = wt_write_file(dir, "weft.conf", text);
	ck_assert_ptr_nonnull(path);
	setenv("WEFT_CONFIG", path, 1);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ck_assert_ptr_nonnull(f);
	weft_info_print_algorithm_choice(f, nranks, WEFT_MEM_HOST);
	fclose(f);
	free(path);
	wt_rmdir(dir);
	free(dir);
	printf("%s", out);
	return out;
}

/* The line of `out` that covers size `sz` ("64 KiB") within collective `coll`. */
static char *line_for(const char *out, const char *coll, const char *sz)
{
	char head[64];
	snprintf(head, sizeof(head), "  %s:\n", coll);
	const char *p = strstr(out, head);
	ck_assert_msg(p != NULL, "no section for %s", coll);
	p += strlen(head);
	while (*p == ' ' && p[1] == ' ' && p[2] == ' ') {
		const char *e = strchr(p, '\n');
		ck_assert_ptr_nonnull(e);
		char *line = strndup(p, (size_t)(e - p));
		char lo[32] = "", hi[32] = "";
		/* "      1 B .. 64 KiB  ..." */
		unsigned long long a, b;
		char ua[8], ub[8];
		if (sscanf(line, " %llu %7s .. %llu %7s", &a, ua, &b, ub) == 4) {
			snprintf(lo, sizeof(lo), "%llu %s", a, ua);
			snprintf(hi, sizeof(hi), "%llu %s", b, ub);
			if (strcmp(lo, sz) == 0 || strcmp(hi, sz) == 0)
				return line;
		}
		free(line);
		p = e + 1;
	}
	return NULL;
}

static int have_pack(const char *out)
{
	return strstr(out, "algo-host/") != NULL;
}

START_TEST(select_by_priority)
{
	char *out = choices_with("", 2);
	ck_assert_msg(have_pack(out), "the algo-host pack was not loaded from the build tree");
	/* Up to small_max (16 KiB) on 2 ranks the one-shot allreduce wins on
	 * priority; above it only reduce-scatter + allgather fits. */
	char *l = line_for(out, "allreduce", "1 B");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-oneshot") && strstr(l, "priority 20") && strstr(l, "16 KiB"),
		      "%s", l);
	free(l);
	l = line_for(out, "allreduce", "32 KiB");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-rsag"), "%s", l);
	free(l);
	free(out);
	/* On 4 ranks each rank reads three peers' inputs: the one-shot stops at
	 * small_max / 3 (5461 B, so 4 KiB is the last size shown). */
	out = choices_with("", 4);
	l = line_for(out, "allreduce", "1 B");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-oneshot") && strstr(l, "4 KiB"), "%s", l);
	free(l);
	l = line_for(out, "allreduce", "8 KiB");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-rsag"), "%s", l);
	free(l);
	l = line_for(out, "allreduce", "1 GiB");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-rsag") && strstr(l, "priority 10") && strstr(l, "1 GiB"), "%s",
		      l);
	free(l);
	const char *colls[] = {"allgather", "reduce_scatter", "broadcast", "reduce", "alltoall", "sendrecv"};
	for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++) {
		l = line_for(out, colls[i], "1 B");
		ck_assert_msg(l && strstr(l, "algo-host/") && strstr(l, "1 GiB"), "%s: %s", colls[i], l ? l : "(none)");
		free(l);
	}
	free(out);
}
END_TEST

START_TEST(select_by_rule)
{
	char *out = choices_with("# pin the large-message algorithm for small sizes\n"
				 "use algo-host/allreduce-rsag when coll=allreduce and size=..4K\n"
				 "forbid allgather-direct when size=1M..\n",
				 3);
	char *l = line_for(out, "allreduce", "1 B");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strstr(l, "algo-host/allreduce-rsag") && strstr(l, "rule line 3") && strstr(l, "4 KiB"), "%s",
		      l);
	free(l);
	l = line_for(out, "allreduce", "8 KiB");
	ck_assert_msg(l && strstr(l, "allreduce-oneshot") && strstr(l, "priority 20"), "%s", l ? l : "(none)");
	free(l);
	/* Forbidden from 1 MiB on, with nothing else to take over. */
	l = line_for(out, "allgather", "1 MiB");
	ck_assert_msg(l && strstr(l, "no algorithm fits") && strstr(l, "1 GiB"), "%s", l ? l : "(none)");
	free(l);
	free(out);
}
END_TEST

START_TEST(select_rule_cannot_serve)
{
	/* A use rule naming an algorithm of another collective is ignored (priority
	 * decides); a require rule that cannot be met refuses. */
	char *out = choices_with("use algo-host/allgather-direct when coll=broadcast\n"
				 "require algo-host/reduce-flat when coll=alltoall and ranks=3..\n",
				 4);
	char *l = line_for(out, "broadcast", "1 B");
	ck_assert_msg(l && strstr(l, "broadcast-flat") && strstr(l, "priority 10"), "%s", l ? l : "(none)");
	free(l);
	l = line_for(out, "alltoall", "1 B");
	ck_assert_msg(l && strstr(l, "rule line 3 requires"), "%s", l ? l : "(none)");
	free(l);
	free(out);
	/* With 2 ranks the require rule does not apply. */
	out = choices_with("require algo-host/reduce-flat when coll=alltoall and ranks=3..\n", 2);
	l = line_for(out, "alltoall", "1 B");
	ck_assert_msg(l && strstr(l, "alltoall-direct"), "%s", l ? l : "(none)");
	free(l);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("algo_select");
	TCase *tc = tcase_create("conversions");
	tcase_add_test(tc, half_round_trip);
	tcase_add_test(tc, half_rounding);
	tcase_add_test(tc, bf16_conversions);
	tcase_add_test(tc, reductions);
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	tc = tcase_create("selection");
	tcase_add_test(tc, select_by_priority);
	tcase_add_test(tc, select_by_rule);
	tcase_add_test(tc, select_rule_cannot_serve);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
