/* SPDX-License-Identifier: Apache-2.0 */
/* Ranks alive but stuck: rank 1 stops making calls while rank 0 waits in
 * one, either back in application code (asleep) or spinning there. With
 * core.stall_warn = 0.5 s, rank 0's log names rank 1 as not having reached
 * the call ("not in weft for"); with core.stall_timeout = 3 s the call
 * returns -ETIMEDOUT on rank 0 and rank 1's next call does too. Neither is
 * ever declared dead (-WEFT_ERR_PEER): a stuck rank still heartbeats. While
 * asleep, rank 1 asks rank 0 where it is, as a user would: weft-info --where
 * PID through rank 0's status socket (core.status_socket = 1).
 * Third, rank 1 is stuck inside the call itself: the test pack's execute
 * (tests/plugins/pack_failsetup.c) sleeps there, so every rank reached the
 * call and the warning says where each one is. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id g_id;
static char *g_dir;

enum how { ASLEEP, SPINNING, IN_CALL };

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rank_main(int rank, int nranks, void *arg)
{
	enum how how = *(const enum how *)arg;
	char log[600];
	snprintf(log, sizeof(log), "%s/rank%d.log", g_dir, rank);
	/* The log is set up before the fork (stderr): catch this rank's. */
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || dup2(fd, 2) < 0)
		return 7;
	close(fd);
	weft_comm_t *comm = NULL;
	if (weft_comm_create(&g_id, nranks, rank, &comm) != 0)
		return 2;
	float x[16] = {0}, y[16];
	long pid = (long)getpid(), pids[2];
	if (weft_comm_allgather(comm, &pid, pids, sizeof(pid)) != 0)
		return 8;
	if (weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL) != 0)
		return 3;
	double t0 = now_s();
	if (how == IN_CALL) {
		int32_t a[16] = {0}, b[16];
		int rc = weft_allreduce(a, b, 16, WEFT_INT32, WEFT_SUM, comm, NULL);
		double dt = now_s() - t0;
		const char *algo = weft_info_last_algorithm(comm);
		weft_comm_destroy(comm);
		if (rc != -ETIMEDOUT || (rank == 0 && (dt < 2.9 || dt > 4.2))) {
			fprintf(stderr, "rank %d: %d (%s) after %.2f s (%s), not -ETIMEDOUT after 3 s\n", rank, rc,
				weft_strerror(rc), dt, algo ? algo : "no algorithm");
			return 5;
		}
		if (rank == 1)
			return 0;
		char *text = wt_read_file(log);
		int ok = text && strstr(text, "call 2 has waited") &&
			 strstr(text, "every peer reached it: rank 1 in call 2 for") &&
			 strstr(text, "past core.stall_timeout") && !strstr(text, "failed: silent");
		if (!ok)
			fprintf(stderr, "rank 0's log lacks the stall lines, or declared a peer dead:\n%s\n",
				text ? text : "");
		free(text);
		return ok ? 0 : 6;
	}
	if (rank == 1) {
		/* Back in application code, making no call, for longer than
		 * the stall timeout. */
		if (how == ASLEEP) {
			usleep(800 * 1000);
			char cmd[700];
			int status = 0;
			snprintf(cmd, sizeof(cmd), "%s --where %ld", RT_WEFT_INFO, pids[0]);
			char *out = wt_run_capture(cmd, &status);
			int ok = out && status == 0 && strstr(out, "rank 0 of 2") && strstr(out, "in call 2 (allreduce") &&
				 strstr(out, "rank 1: not in weft for");
			if (!ok)
				fprintf(stderr, "rank 1: weft-info --where %ld (status %d) said:\n%s\n", pids[0], status,
					out ? out : "");
			free(out);
			if (!ok)
				return 9;
			usleep(4200 * 1000);
		} else
			while (now_s() - t0 < 5.0)
				__asm__ volatile("" ::: "memory");
		int rc = weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
		weft_comm_destroy(comm);
		if (rc != -ETIMEDOUT) {
			fprintf(stderr, "rank 1: its next call returned %d (%s), not -ETIMEDOUT\n", rc, weft_strerror(rc));
			return 4;
		}
		return 0;
	}
	int rc = weft_allreduce(x, y, 16, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	double dt = now_s() - t0;
	weft_comm_destroy(comm);
	if (rc != -ETIMEDOUT || dt < 2.9 || dt > 4.2) {
		fprintf(stderr, "rank 0: %d (%s) after %.2f s, not -ETIMEDOUT after 3 s\n", rc, weft_strerror(rc), dt);
		return 5;
	}
	char *text = wt_read_file(log);
	int ok = text && strstr(text, "call 2 has waited") && strstr(text, "not reached by rank 1 not in weft for") &&
		 strstr(text, "past core.stall_timeout") && !strstr(text, "failed: silent");
	if (!ok)
		fprintf(stderr, "rank 0's log lacks the stall lines, or declared a peer dead:\n%s\n", text ? text : "");
	free(text);
	return ok ? 0 : 6;
}

static void run(enum how how)
{
	if (how == IN_CALL) {
		const char *dir = getenv("WEFT_TEST_FAILSETUP_PLUGIN_DIR");
		ck_assert_msg(dir && *dir, "WEFT_TEST_FAILSETUP_PLUGIN_DIR is not set");
		setenv("WEFT_PLUGIN_PATH", dir, 1);
		setenv("WEFT_CORE_PLUGINS", "shm,algo-host,failsetup", 1);
		setenv("WEFT_TEST_FAILSETUP_SLEEP", "1:5000", 1);
	}
	g_dir = wt_mkdtemp("stall");
	ck_assert_ptr_nonnull(g_dir);
	/* The status sockets go in a folder of this run. */
	setenv("XDG_RUNTIME_DIR", g_dir, 1);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(2, rank_main, &how, 30);
	for (int r = 0; bad && r < 2; r++) {
		char path[600];
		snprintf(path, sizeof(path), "%s/rank%d.log", g_dir, r);
		char *text = wt_read_file(path);
		fprintf(stderr, "--- rank %d's stderr:\n%s\n", r, text ? text : "(none)");
		free(text);
	}
	wt_rmdir(g_dir);
	free(g_dir);
	ck_assert_int_eq(bad, 0);
}

START_TEST(rank_back_in_application_asleep)
{
	run(ASLEEP);
}
END_TEST

START_TEST(rank_spinning_in_application)
{
	run(SPINNING);
}
END_TEST

START_TEST(rank_asleep_inside_a_call)
{
	run(IN_CALL);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_CORE_PLUGINS", "shm,algo-host", 1);
	setenv("WEFT_CORE_HEARTBEAT_INTERVAL", "0.1", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "1", 1);
	setenv("WEFT_CORE_STALL_WARN", "0.5", 1);
	setenv("WEFT_CORE_STALL_TIMEOUT", "3", 1);
	setenv("WEFT_CORE_STATUS_SOCKET", "1", 1);
	Suite *s = suite_create("stall");
	TCase *tc = tcase_create("stall");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, rank_back_in_application_asleep);
	tcase_add_test(tc, rank_spinning_in_application);
	tcase_add_test(tc, rank_asleep_inside_a_call);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
