/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the collective layer without processes: names and parsers,
 * and algorithm selection as weft-info --select shows it, with the real
 * algo-host pack loaded from the build tree and [algorithm] rules. The
 * pack's conversions and reductions are include/weft/kit.h's (test_kit). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "coll.h"
#include "testlib.h"

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
	ck_assert_msg(strstr(l, "algo-host/allreduce-rsag") && strstr(l, "(rule /") && strstr(l, ".conf:3)") &&
			  strstr(l, "4 KiB"),
		      "%s", l);
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
	ck_assert_msg(l && strstr(l, ".conf:3 requires"), "%s", l ? l : "(none)");
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
	TCase *tc = tcase_create("names");
	tcase_add_test(tc, names);
	suite_add_tcase(s, tc);
	tc = tcase_create("selection");
	tcase_add_test(tc, select_by_priority);
	tcase_add_test(tc, select_by_rule);
	tcase_add_test(tc, select_rule_cannot_serve);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
