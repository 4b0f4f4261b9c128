/* SPDX-License-Identifier: Apache-2.0 */
/* weft-info --topo and --select as a user sees them (core/topo.c, tpsel.c):
 * the NUMA view (hwloc, or a line saying the build has none), the NVML line,
 * each transport's probed devices, and the transport order per peer class
 * (same-gpu-link included) with the rule or the score behind each place. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testlib.h"

#ifndef TT_WEFT_INFO
#error "TT_WEFT_INFO (path of weft-info) must be defined"
#endif

static char *dir;

/* Runs weft-info with a config text (NULL: empty) and arguments. */
static char *info(const char *conf, const char *args, int *status)
{
	char *path = wt_write_file(dir, "weft.conf", conf ? conf : "");
	ck_assert_ptr_nonnull(path);
	char cmd[8192];
	snprintf(cmd, sizeof(cmd), "WEFT_CONFIG='%s' '%s' %s 2>&1", path, TT_WEFT_INFO, args);
	free(path);
	char *out = wt_run_capture(cmd, status);
	ck_assert_ptr_nonnull(out);
	return out;
}

#define HAS(out, s) ck_assert_msg(strstr((out), (s)) != NULL, "output lacks '%s':\n%s", (s), (out))

START_TEST(topo_shows_numa_nvml_and_devices)
{
	int st = 0;
	char *out = info(NULL, "--topo", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --topo failed:\n%s", out);
#ifdef TT_HWLOC
	HAS(out, "numa (hwloc ");
	HAS(out, "this process runs on node(s)");
#else
	HAS(out, "numa: weft was built without hwloc");
#endif
	ck_assert_msg(strstr(out, "nvlink: no NVML") || strstr(out, "nvlink (NVML): "), "no NVML line:\n%s", out);
	if (strstr(out, "nvlink: no NVML"))
		HAS(out, "NVLink connectivity unknown, no peer is same-gpu-link\n");
	/* shm declares its figures; they are shown as declared. */
	HAS(out, "  shm: 1 device(s)");
	HAS(out, "link shm      latency 0.2 us     bandwidth 8 GB/s");
	HAS(out, "reaches same-process,same-host peers; memory host");
	free(out);
}
END_TEST

#ifdef TT_HWLOC
START_TEST(topo_numa_from_hwloc)
{
	/* A two-node topology (tests/topo_two_numa.xml) read as this machine's,
	 * and the test plugin declaring its device at a PCI path that the
	 * topology puts on node 1. */
	int st = 0;
	char args[4096];
	snprintf(args, sizeof(args), "--topo");
	setenv("HWLOC_XMLFILE", TT_TWO_NUMA, 1);
	setenv("HWLOC_THISSYSTEM", "1", 1);
	setenv("WEFT_FAKEFAST_PCI_PATH", "0000:3b:00.0", 1);
	char *out = info(NULL, args, &st);
	unsetenv("HWLOC_XMLFILE");
	unsetenv("HWLOC_THISSYSTEM");
	unsetenv("WEFT_FAKEFAST_PCI_PATH");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --topo failed:\n%s", out);
	HAS(out, "numa (hwloc ");
	HAS(out, ": 2 node(s)");
	HAS(out, "    node 0     10   21\n    node 1     21   10\n");
	HAS(out, "  fakefast: 1 device(s)\n    fake0 ");
	HAS(out, "  1 PCI device(s) seen");
	HAS(out, "NUMA node 1 (hwloc, from the PCI path, distance x");
	HAS(out, " pci 0000:3b:00.0");
	free(out);
}
END_TEST
#endif

START_TEST(select_shows_scores)
{
	int st = 0;
	char *out = info(NULL, "--select --np 4", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --select failed:\n%s", out);
	HAS(out, "([transport] has no rules: scores decide)");
	HAS(out, "  same-host peers:\n    (ranks 1..3)\n    1. shm      score 8.39 us for 64 KiB");
	HAS(out, "latency 10 us (assumed), 1 GB/s (assumed)");
	HAS(out, "Algorithm choice for 4 ranks on 1 host, host memory");
	free(out);
}
END_TEST

START_TEST(select_shows_rules)
{
	int st = 0;
	char *out = info("[transport]\nforbid shm when peer=same-host\nuse ucx when peer=same-host\n"
			 "require ofi when peer=other-host\n",
			 "--select", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --select failed:\n%s", out);
	HAS(out, "  same-host peers:\n    (ranks 1..1)\n    1. ucx      'use ucx' at ");
	HAS(out, ":3 [pinned]\n    2. ");
	HAS(out, "  other-host peers:\n    1. ofi      required by ");
	/* The forbidden shm is not offered to same-host peers at all. */
	char *a = strstr(out, "  same-host peers:"), *b = a ? strstr(a, "  other-host peers:") : NULL;
	ck_assert_ptr_nonnull(b);
	*b = '\0';
	ck_assert_msg(!strstr(a, ". shm "), "shm offered to same-host peers though forbidden:\n%s", a);
	free(out);
}
END_TEST

START_TEST(topo_shows_fake_nvml)
{
	/* The test hook is named where NVML would be, so nobody mistakes it for a real GPU. */
	int st = 0;
	setenv("WEFT_TEST_FAKE_NVML", "gpu=0000:01:00.0 link=0000:02:00.0*2", 1);
	char *out = info(NULL, "--topo", &st);
	unsetenv("WEFT_TEST_FAKE_NVML");
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --topo failed:\n%s", out);
	HAS(out, "nvlink: WEFT_TEST_FAKE_NVML='gpu=0000:01:00.0 link=0000:02:00.0*2' (a test hook) stands in for NVML");
	free(out);
}
END_TEST

START_TEST(select_shows_gpu_link_class)
{
	int st = 0;
	char *out = info("[transport]\nuse ofi when peer=same-gpu-link\n", "--select", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --select failed:\n%s", out);
	HAS(out, "  same-gpu-link peers:\n    (ranks on this host whose GPUs NVML shows joined by NVLink; none without "
		 "NVML or a GPU");
	HAS(out, "\n    1. ofi      'use ofi' at ");
	/* The rule is about GPU-linked peers only. */
	char *a = strstr(out, "  same-host peers:"), *b = a ? strstr(a, "  other-host peers:") : NULL;
	ck_assert_ptr_nonnull(b);
	*b = '\0';
	ck_assert_msg(strstr(a, "1. shm "), "same-host peers do not get shm first:\n%s", a);
	free(out);
}
END_TEST

START_TEST(select_misspelled_peer_class)
{
	int st = 0;
	char *out = info("[transport]\nuse ofi when peer=same-gpu-lnk\n", "--select", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "weft-info --select exited 0x%x, not 2:\n%s", st, out);
	HAS(out, "same-gpu-lnk");
	HAS(out, "did you mean 'same-gpu-link'?");
	free(out);
}
END_TEST

/* The preflight opens transports as a job does (issue 30 item 4): those that
 * do not open are listed with why, a required one among them fails it as it
 * fails the job, and a forbidden one is named with its rule's file:line. */
START_TEST(select_preflight_opens_transports)
{
	int st = 0;
	char *out = info("[transport]\nforbid shm when peer=same-host\n", "--select", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "weft-info --select exited 0x%x:\n%s", st, out);
	HAS(out, "transports opened as a communicator opens them");
	HAS(out, "-  shm      forbidden by ");
	HAS(out, "weft.conf:2");
	free(out);
	out = info("[transport]\nrequire ib when peer=other-host\n", "--select", &st);
	if (strstr(out, "not opened here: ib (")) {
		/* No RDMA device here: the job would fail, so the preflight does. */
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "weft-info --select exited 0x%x, not 2:\n%s", st,
			      out);
		HAS(out, "ERROR: 'ib' is required");
	} else {
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ib opened, but --select exited 0x%x:\n%s", st,
			      out);
		HAS(out, "1. ib ");
	}
	free(out);
}
END_TEST

START_TEST(select_names_missing_required)
{
	int st = 0;
	char *out = info("[transport]\nrequire ucxx when peer=other-host\n", "--select", &st);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "weft-info --select exited 0x%x, not 2:\n%s", st, out);
	HAS(out, "[transport] names 'ucxx', which is no transport; did you mean 'ucx'?");
	HAS(out, "  other-host peers:\n    ERROR: 'ucxx' is required (");
	HAS(out, "it is not installed (no libweft-ucxx.so on the search path");
	free(out);
}
END_TEST

int main(void)
{
	dir = wt_mkdtemp("topo");
	if (!dir)
		return 1;
	Suite *s = suite_create("topo");
	TCase *tc = tcase_create("weft-info");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, topo_shows_numa_nvml_and_devices);
#ifdef TT_HWLOC
	tcase_add_test(tc, topo_numa_from_hwloc);
#endif
	tcase_add_test(tc, select_shows_scores);
	tcase_add_test(tc, select_shows_rules);
	tcase_add_test(tc, select_names_missing_required);
	tcase_add_test(tc, select_preflight_opens_transports);
	tcase_add_test(tc, topo_shows_fake_nvml);
	tcase_add_test(tc, select_shows_gpu_link_class);
	tcase_add_test(tc, select_misspelled_peer_class);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_rmdir(dir);
	free(dir);
	return rc;
}
