/* SPDX-License-Identifier: Apache-2.0 */
/* What the core gives ABI 0.3 packs, seen through a test pack
 * (tests/plugins/pack_failsetup.c) and forked ranks over shm:
 * - a setup that fails on rank 1 while every other rank is connecting to it
 *   falls back on every rank together, within 1 s of the failure, and the
 *   call returns the right sum (from algo-host); the failed algorithm is not
 *   tried again, and the pack's state made for it is torn down;
 * - where a rule requires that algorithm, every rank returns the failure;
 * - comm_setup's state reaches setup, comm_teardown runs once at destroy,
 *   and the topology (classes, hosts, local ranks, routes) is the core's;
 * - weft_info_algorithms lists the pack's algorithm as it declares it;
 * - the primitive API's port channels carry a pack's allgather. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "testlib.h"

#define PK_TIMEOUT_S 60
#define PK_COUNT 4097

static struct weft_unique_id g_id;
static char *g_dir;

struct pk_job {
	int expect_rc;          /* what every allreduce returns */
	const char *algo_prefix; /* the algorithm that must have served it */
};

static int32_t pk_value(int rank, size_t i)
{
	return (int32_t)((i * 2654435761u + (unsigned)rank * 40503u) % 1000u) - 500;
}

static int rank_main(int rank, int nranks, void *arg)
{
	const struct pk_job *j = arg;
	weft_comm_t *comm = NULL;
	int32_t *in = malloc(PK_COUNT * sizeof(*in)), *out = malloc(PK_COUNT * sizeof(*out));
	RCHECK(in && out, "out of memory");
	ROK(weft_comm_create(&g_id, nranks, rank, &comm));
	for (int round = 0; round < 2; round++) {
		size_t n = round == 0 ? PK_COUNT : 7;
		for (size_t i = 0; i < n; i++) {
			in[i] = pk_value(rank + round, i);
			out[i] = INT32_MIN;
		}
		int rc = weft_allreduce(in, out, n, WEFT_INT32, WEFT_SUM, comm, NULL);
		RCHECK(rc == j->expect_rc, "allreduce round %d returned %d (%s), expected %d", round, rc,
		       weft_strerror(rc), j->expect_rc);
		if (rc != 0)
			continue;
		const char *algo = weft_info_last_algorithm(comm);
		RCHECK(algo && strncmp(algo, j->algo_prefix, strlen(j->algo_prefix)) == 0,
		       "round %d was served by %s, expected %s...", round, algo ? algo : "(none)", j->algo_prefix);
		for (size_t i = 0; i < n; i++) {
			int32_t want = 0;
			for (int r = 0; r < nranks; r++)
				want += pk_value(r + round, i);
			RCHECK(out[i] == want, "round %d element %zu is %d, expected %d", round, i, out[i], want);
		}
	}
	weft_comm_destroy(comm);
	free(in);
	free(out);
	return 0;
}

/* The test pack's allgather-port: blocks pushed through port channels by
 * the core's proxy (prim->port_*) arrive whole, in place and out of place. */
static int port_rank(int rank, int nranks, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	const size_t counts[] = {PK_COUNT, 7, 1};
	int32_t *in = malloc(PK_COUNT * sizeof(*in)), *out = malloc(PK_COUNT * sizeof(*out) * (size_t)nranks);
	RCHECK(in && out, "out of memory");
	ROK(weft_comm_create(&g_id, nranks, rank, &comm));
	for (int round = 0; round < 6; round++) {
		size_t n = counts[round % 3];
		int in_place = round >= 3;
		for (size_t i = 0; i < n * (size_t)nranks; i++)
			out[i] = INT32_MIN;
		int32_t *src = in_place ? out + n * (size_t)rank : in;
		for (size_t i = 0; i < n; i++)
			src[i] = pk_value(rank + round, i);
		ROK(weft_allgather(src, out, n, WEFT_INT32, comm, NULL));
		const char *algo = weft_info_last_algorithm(comm);
		RCHECK(algo && strcmp(algo, "failsetup/allgather-port") == 0, "round %d was served by %s", round,
		       algo ? algo : "(none)");
		for (int r = 0; r < nranks; r++)
			for (size_t i = 0; i < n; i++)
				RCHECK(out[(size_t)r * n + i] == pk_value(r + round, i),
				       "round %d: rank %d's element %zu is %d, expected %d", round, r, i,
				       out[(size_t)r * n + i], pk_value(r + round, i));
	}
	ROK(weft_comm_destroy(comm));
	free(in);
	free(out);
	return 0;
}

/* Points the ranks at the test pack and a config holding rules. */
static void pk_env(const char *rules, const char *fail_rank)
{
	const char *dir = getenv("WEFT_TEST_FAILSETUP_PLUGIN_DIR");
	ck_assert_msg(dir && *dir, "WEFT_TEST_FAILSETUP_PLUGIN_DIR is not set");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", dir, 1), 0);
	g_dir = wt_mkdtemp("packs");
	ck_assert_ptr_nonnull(g_dir);
	char *conf = wt_write_file(g_dir, "weft.conf", rules);
	ck_assert_ptr_nonnull(conf);
	ck_assert_int_eq(setenv("WEFT_CONFIG", conf, 1), 0);
	free(conf);
	ck_assert_int_eq(setenv("WEFT_TEST_FAILSETUP_DIR", g_dir, 1), 0);
	if (fail_rank)
		ck_assert_int_eq(setenv("WEFT_TEST_FAILSETUP_RANK", fail_rank, 1), 0);
	else
		unsetenv("WEFT_TEST_FAILSETUP_RANK");
	unsetenv("WEFT_TEST_FAILSETUP_IN");
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
}

/* Rank r's record; fails the test when it is missing. */
static char *pk_record(int r)
{
	char name[32];
	snprintf(name, sizeof(name), "%s/rank%d", g_dir, r);
	char *text = wt_read_file(name);
	ck_assert_msg(text != NULL, "rank %d left no record in %s", r, name);
	return text;
}

static int pk_count(const char *text, const char *word)
{
	int n = 0;
	for (const char *p = text; (p = strstr(p, word)); p += strlen(word))
		if (p == text || p[-1] == '\n')
			n++;
	return n;
}

/* The one "setup <ns> <rc>" line of a record. */
static void pk_setup_line(const char *text, int r, long long *ns, int *rc)
{
	ck_assert_msg(pk_count(text, "setup ") == 1, "rank %d ran the pack's setup %d times, expected once:\n%s", r,
		      pk_count(text, "setup "), text);
	const char *p = strstr(text, "\nsetup ");
	p = p ? p + 1 : text;
	ck_assert_msg(sscanf(p, "setup %lld %d", ns, rc) == 2, "rank %d: unreadable record:\n%s", r, text);
}

static const int pk_nranks[] = {2, 3, 4};

START_TEST(setup_failure_falls_back)
{
	int n = pk_nranks[_i];
	pk_env("", "1");
	struct pk_job j = {.expect_rc = 0, .algo_prefix = "algo-host/"};
	ck_assert_int_eq(wt_fork_ranks(n, rank_main, &j, PK_TIMEOUT_S), 0);
	long long t_fail = 0, t;
	int rc;
	char *rec1 = pk_record(1);
	pk_setup_line(rec1, 1, &t_fail, &rc);
	ck_assert_msg(rc == -EIO, "rank 1's setup returned %d, expected the pack's -EIO", rc);
	free(rec1);
	for (int r = 0; r < n; r++) {
		char *text = pk_record(r);
		pk_setup_line(text, r, &t, &rc);
		if (r != 1) {
			ck_assert_msg(rc == -ECANCELED, "rank %d's connect to the failed rank ended with %d, expected -ECANCELED",
				      r, rc);
			ck_assert_msg(t - t_fail < 1000000000LL, "rank %d fell back %.3f s after rank 1 failed (limit 1 s)",
				      r, (double)(t - t_fail) * 1e-9);
		}
		/* The pack's state, made for the failed setup, is undone with it. */
		ck_assert_msg(pk_count(text, "comm_setup") == 1 && pk_count(text, "comm_teardown setups=1") == 1,
			      "rank %d: expected one comm_setup and one comm_teardown:\n%s", r, text);
		ck_assert_msg(strstr(text, "pack_state=yes") != NULL, "rank %d: setup did not get the pack state", r);
		free(text);
	}
	wt_rmdir(g_dir);
}
END_TEST

/* The pack's comm_setup fails on rank 1: the others, connecting to it from
 * their algorithm setup, fall back too, and tear down the pack state they
 * made, since not every rank has one. */
START_TEST(comm_setup_failure_falls_back)
{
	const int n = 3;
	pk_env("", "1");
	ck_assert_int_eq(setenv("WEFT_TEST_FAILSETUP_IN", "comm", 1), 0);
	struct pk_job j = {.expect_rc = 0, .algo_prefix = "algo-host/"};
	ck_assert_int_eq(wt_fork_ranks(n, rank_main, &j, PK_TIMEOUT_S), 0);
	char *rec1 = pk_record(1);
	long long t_fail = 0, t;
	int rc;
	ck_assert_msg(sscanf(rec1, "comm_setup_failed %lld", &t_fail) == 1 && pk_count(rec1, "setup ") == 0,
		      "rank 1 should have failed its comm_setup only:\n%s", rec1);
	free(rec1);
	for (int r = 0; r < n; r += 2) {
		char *text = pk_record(r);
		pk_setup_line(text, r, &t, &rc);
		ck_assert_msg(rc == -ECANCELED && t - t_fail < 1000000000LL,
			      "rank %d: setup ended with %d %.3f s after rank 1 failed:\n%s", r, rc,
			      (double)(t - t_fail) * 1e-9, text);
		ck_assert_msg(pk_count(text, "comm_setup ") == 1 && pk_count(text, "comm_teardown setups=1") == 1,
			      "rank %d: expected one comm_setup and one comm_teardown:\n%s", r, text);
		free(text);
	}
	wt_rmdir(g_dir);
}
END_TEST

START_TEST(required_setup_failure_fails_everywhere)
{
	pk_env("[algorithm]\nrequire failsetup/allreduce-connect when coll=allreduce\n", "1");
	struct pk_job j = {.expect_rc = -EIO};
	ck_assert_int_eq(wt_fork_ranks(3, rank_main, &j, PK_TIMEOUT_S), 0);
	wt_rmdir(g_dir);
}
END_TEST

START_TEST(pack_state_and_topology)
{
	const int n = 3;
	pk_env("", NULL);
	struct pk_job j = {.expect_rc = 0, .algo_prefix = "failsetup/allreduce-connect"};
	ck_assert_int_eq(wt_fork_ranks(n, rank_main, &j, PK_TIMEOUT_S), 0);
	char want[160];
	for (int r = 0; r < n; r++) {
		char *text = pk_record(r);
		long long t;
		int rc;
		pk_setup_line(text, r, &t, &rc);
		ck_assert_int_eq(rc, 0);
		ck_assert_msg(strstr(text, "comm_setup nhosts=1\n") != NULL, "rank %d: not one host:\n%s", r, text);
		ck_assert_msg(pk_count(text, "comm_teardown setups=1") == 1, "rank %d: comm_teardown not once:\n%s", r,
			      text);
		for (int q = 0; q < n; q++) {
			/* Forked ranks of one host: same-host peers, one host, local
			 * rank = rank; shm reaches each with both of its capabilities. */
			snprintf(want, sizeof(want), "peer %d class=%d host=0 local_rank=%d local_size=%d routes=", q,
				 q == r ? (int)WEFT_PEER_SAME_PROCESS : (int)WEFT_PEER_SAME_HOST, q, n);
			const char *line = strstr(text, want);
			ck_assert_msg(line != NULL, "rank %d: no line '%s' in:\n%s", r, want, text);
			const char *eol = strchr(line, '\n');
			snprintf(want, sizeof(want), "shm:%u", WEFT_TP_CAP_HOST_MAPPABLE | WEFT_TP_CAP_UNPINNED_WRITES);
			const char *shm = strstr(line, want);
			ck_assert_msg(q == r || (shm && (!eol || shm < eol)), "rank %d: peer %d's routes lack %s:\n%s", r, q,
				      want, text);
		}
		free(text);
	}
	wt_rmdir(g_dir);
}
END_TEST

START_TEST(port_channels_through_prim)
{
	pk_env("", NULL);
	ck_assert_int_eq(wt_fork_ranks(pk_nranks[_i], port_rank, NULL, PK_TIMEOUT_S), 0);
	wt_rmdir(g_dir);
}
END_TEST

/* weft_info_algorithms shows the test pack as it declares itself. */
START_TEST(info_lists_algorithms)
{
	pk_env("", NULL);
	int n = weft_info_algorithms(NULL, 0);
	ck_assert_int_gt(n, 1);
	struct weft_info_algo *a = calloc((size_t)n, sizeof(*a));
	ck_assert_ptr_nonnull(a);
	ck_assert_int_eq(weft_info_algorithms(a, n), n);
	int found = 0, host = 0;
	for (int i = 0; i < n; i++) {
		ck_assert_uint_eq(a[i].size, sizeof(a[i]));
		if (strcmp(a[i].pack, "algo-host") == 0)
			host++;
		if (strcmp(a[i].pack, "failsetup") != 0)
			continue;
		found++;
		if (strcmp(a[i].name, "allgather-port") == 0) {
			ck_assert_int_eq(a[i].coll, WEFT_COLL_ALLGATHER);
			continue;
		}
		ck_assert_str_eq(a[i].name, "allreduce-connect");
		ck_assert_int_eq(a[i].coll, WEFT_COLL_ALLREDUCE);
		ck_assert_int_eq(a[i].min_ranks, 2);
		ck_assert_int_eq(a[i].priority, 1000);
		ck_assert_uint_eq(a[i].mem_types, 1u << WEFT_MEM_HOST);
		ck_assert_uint_eq(a[i].redops, 1u << WEFT_SUM);
	}
	ck_assert_int_eq(found, 2);
	ck_assert_int_gt(host, 0);
	ck_assert_int_eq(weft_info_algorithms(NULL, 1), -EINVAL);
	free(a);
	wt_rmdir(g_dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("packs");
	TCase *tc = tcase_create("packs");
	tcase_set_timeout(tc, 150);
	tcase_add_loop_test(tc, setup_failure_falls_back, 0, 3);
	tcase_add_test(tc, comm_setup_failure_falls_back);
	tcase_add_test(tc, required_setup_failure_fails_everywhere);
	tcase_add_test(tc, pack_state_and_topology);
	tcase_add_test(tc, info_lists_algorithms);
	tcase_add_loop_test(tc, port_channels_through_prim, 0, 3);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
