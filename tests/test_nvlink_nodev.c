/* SPDX-License-Identifier: Apache-2.0 */
/* The nvlink plugin on a host without a GPU or driver (CI): it loads, weft-info
 * lists it and says "no CUDA device"; on a GPU host it says what it found. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#ifndef WEFT_INFO_PATH
#error "WEFT_INFO_PATH must name the built weft-info"
#endif

static int have_nvidia_smi(void)
{
	int st = 0;
	char *out = wt_run_capture("command -v nvidia-smi", &st);
	free(out);
	return st == 0;
}

START_TEST(test_info_lists_nvlink)
{
	char cmd[4096];
	snprintf(cmd, sizeof(cmd), "WEFT_PLUGIN_PATH='%s' '%s'", WEFT_NVLINK_PLUGIN_DIR, WEFT_INFO_PATH);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0, "weft-info failed (%d):\n%s", st, out);
	const char *line = strstr(out, "nvlink");
	ck_assert_msg(line != NULL, "weft-info does not list nvlink:\n%s", out);
	int nodev = strstr(out, "no CUDA device") != NULL;
	if (!have_nvidia_smi()) {
		ck_assert_msg(nodev, "no nvidia-smi here, yet weft-info does not say \"no CUDA device\":\n%s", out);
	} else {
		/* A GPU host: either a device list or, without a usable driver, the same text. */
		ck_assert_msg(nodev || strstr(out, "CUDA device") != NULL,
			      "weft-info says neither what nvlink found nor that it found nothing:\n%s", out);
	}
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nvlink_nodev");
	TCase *tc = tcase_create("info");
	tcase_add_test(tc, test_info_lists_nvlink);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
