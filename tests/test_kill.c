/* SPDX-License-Identifier: Apache-2.0 */
/* Kill tests: three forked ranks run one collective in a loop, over weft's
 * shm transport and over ofi's tcp provider; one rank is SIGKILLed mid-loop
 * (or SIGSTOPped: alive, silent, sockets open; or leaves main without
 * weft_comm_destroy). Every survivor must get an error from the collective
 * within the peer timeout plus slack, never a hang, and must then destroy its
 * communicator. Not over ofi's shm provider: libfabric 1.17 keeps spinlocks in
 * the shared region, and a rank killed while holding its own makes the next
 * write to it spin forever inside fi_writemsg (plugins/ofi/README.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

/* Present only in sanitizer builds: tells them apart at run time. */
extern void __lsan_disable(void) __attribute__((weak));

#define NRANKS 3
#define VICTIM 2
#define PEER_TIMEOUT_S 2
/* Detection may take the peer timeout; the rest is scheduling on a loaded
 * 2-core machine (and an ASan build). */
#define SLACK_S 8
#define DESTROY_MAX_S 10
#define JOB_TIMEOUT_S 40
#define COUNT (256 * 1024) /* floats per block: 1 MiB, long enough to be inside */
#define KILL_AFTER_MS 300

enum coll { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, ALLTOALL, SENDRECV, NCOLL };
static const char *const coll_names[NCOLL] = {"allreduce", "allgather", "reduce-scatter", "broadcast",
					      "reduce", "alltoall", "sendrecv"};

enum how { KILLED, EXIT_NO_DESTROY, STOPPED };
static const char *const how_names[] = {"SIGKILL", "exit without destroy", "SIGSTOP"};

struct job {
	enum coll coll;
	enum how how;
};

static struct weft_unique_id g_id;
/* The victim's pid, shared with the survivors: a stopped victim sends no EOF
 * and must be found out by missed heartbeats; rank 0 then kills it so the job
 * ends. */
static volatile pid_t *victim_pid;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

#define RFAIL(...) \
	do { \
		fprintf(stderr, "rank %d (%s): ", rank, coll_names[j->coll]); \
		fprintf(stderr, __VA_ARGS__); \
		fputc('\n', stderr); \
		return 1; \
	} while (0)

/* One call of the collective under test; every rank calls the same. */
static int one(enum coll c, int rank, float *send, float *recv, weft_comm_t *comm)
{
	int rc;
	switch (c) {
	case ALLREDUCE:
		return weft_allreduce(send, recv, COUNT, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case ALLGATHER:
		return weft_allgather(send, recv, COUNT, WEFT_FLOAT32, comm, NULL);
	case REDUCE_SCATTER:
		return weft_reduce_scatter(send, recv, COUNT, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	case BROADCAST:
		return weft_broadcast(send, recv, COUNT, WEFT_FLOAT32, 0, comm, NULL);
	case REDUCE:
		return weft_reduce(send, recv, COUNT, WEFT_FLOAT32, WEFT_SUM, 0, comm, NULL);
	case ALLTOALL:
		return weft_alltoall(send, recv, COUNT, WEFT_FLOAT32, comm, NULL);
	case SENDRECV:
		/* A ring: send to the next rank, receive from the previous, fused. */
		rc = weft_group_start();
		if (rc)
			return rc;
		int s = weft_send(send, COUNT, WEFT_FLOAT32, (rank + 1) % NRANKS, comm, NULL);
		int r = weft_recv(recv, COUNT, WEFT_FLOAT32, (rank + NRANKS - 1) % NRANKS, comm, NULL);
		rc = weft_group_end();
		return s ? s : r ? r : rc;
	default:
		return -EINVAL;
	}
}

static void *killer(void *arg)
{
	int sig = *(const int *)arg;
	usleep(KILL_AFTER_MS * 1000);
	raise(sig);
	return NULL;
}

static int rank_main(int rank, int n, void *arg)
{
	const struct job *j = arg;
	float *send = malloc(sizeof(float) * COUNT * NRANKS);
	float *recv = malloc(sizeof(float) * COUNT * NRANKS);
	if (!send || !recv)
		RFAIL("no memory");
	for (size_t i = 0; i < (size_t)COUNT * NRANKS; i++)
		send[i] = (float)(rank + 1);
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	if (rc)
		RFAIL("weft_comm_create: %s", weft_strerror(rc));
	/* One round that everybody completes: the collective works here. */
	rc = one(j->coll, rank, send, recv, comm);
	if (rc)
		RFAIL("first %s failed before any rank left: %s", coll_names[j->coll], weft_strerror(rc));

	if (rank == VICTIM) {
		if (j->how == EXIT_NO_DESTROY) {
			usleep(KILL_AFTER_MS * 1000);
			/* Leaves main without weft_comm_destroy: exit handlers run, the
			 * communicator is never closed. In sanitizer builds the process
			 * ends with _exit instead: LeakSanitizer's exit-time check cannot
			 * suspend the comm's threads that still run (its tracer crashes),
			 * and what the peers see, the sockets closing with no goodbye, is
			 * the same either way. */
			if (__lsan_disable)
				_exit(0);
			exit(0);
		}
		static int sig;
		sig = j->how == STOPPED ? SIGSTOP : SIGKILL;
		*victim_pid = getpid();
		pthread_t t;
		if (pthread_create(&t, NULL, killer, &sig))
			RFAIL("pthread_create");
		for (;;)
			one(j->coll, rank, send, recv, comm);
	}

	/* Survivors: loop until the collective fails; the victim dies meanwhile. */
	double t0 = now_s();
	long rounds = 0;
	for (;;) {
		rc = one(j->coll, rank, send, recv, comm);
		if (rc)
			break;
		rounds++;
		if (now_s() - t0 > KILL_AFTER_MS / 1000.0 + PEER_TIMEOUT_S + SLACK_S)
			RFAIL("%ld rounds succeeded after rank %d was gone: no error within %d s", rounds, VICTIM,
			      PEER_TIMEOUT_S + SLACK_S);
	}
	double t_err = now_s() - t0;
	/* A stopped victim holds its sockets open: only the liveness watch (no
	 * heartbeat within WEFT_CORE_PEER_TIMEOUT) can have found it. */
	if (j->how == STOPPED && rank == 0 && *victim_pid > 0)
		kill(*victim_pid, SIGKILL);
	if (rc >= 0)
		RFAIL("failed with %d, not a negative error code", rc);
	if (t_err > KILL_AFTER_MS / 1000.0 + PEER_TIMEOUT_S + SLACK_S)
		RFAIL("the error (%s) came after %.1f s", weft_strerror(rc), t_err);
	/* Once broken, it stays broken: the next call fails too, at once. */
	double t1 = now_s();
	int rc2 = one(j->coll, rank, send, recv, comm);
	if (rc2 == 0)
		RFAIL("a collective succeeded after the communicator failed");
	if (now_s() - t1 > PEER_TIMEOUT_S + SLACK_S)
		RFAIL("a call on the failed communicator took %.1f s", now_s() - t1);
	double t2 = now_s();
	int drc = weft_comm_destroy(comm);
	double t_destroy = now_s() - t2;
	if (t_destroy > DESTROY_MAX_S)
		RFAIL("weft_comm_destroy took %.1f s", t_destroy);
	fprintf(stderr, "rank %d (%s, %s): error %d (%s) after %ld rounds, %.2f s; destroy %.2f s (rc %d)\n", rank,
		coll_names[j->coll], how_names[j->how], rc, weft_strerror(rc),
		rounds, t_err, t_destroy, drc);
	free(send);
	free(recv);
	return 0;
}

static void run(enum coll c, enum how how)
{
	struct job j = {.coll = c, .how = how};
	int status[NRANKS];
	*victim_pid = 0;
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	double t0 = now_s();
	wt_fork_ranks_status(NRANKS, rank_main, &j, JOB_TIMEOUT_S, status);
	double dt = now_s() - t0;
	for (int r = 0; r < NRANKS; r++) {
		if (r == VICTIM) {
			if (how == KILLED || how == STOPPED)
				ck_assert_msg(WIFSIGNALED(status[r]) && WTERMSIG(status[r]) == SIGKILL,
					      "%s: the victim was not killed as planned (status 0x%x)", coll_names[c],
					      status[r]);
			else
				ck_assert_msg(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
					      "%s: the victim did not exit cleanly (status 0x%x)", coll_names[c],
					      status[r]);
			continue;
		}
		ck_assert_msg(status[r] != -1, "%s: survivor rank %d hung (killed at the %d s job timeout)",
			      coll_names[c], r, JOB_TIMEOUT_S);
		ck_assert_msg(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
			      "%s: survivor rank %d failed (status 0x%x)", coll_names[c], r, status[r]);
	}
	fprintf(stderr, "kill test %s (%s): passed in %.1f s\n", coll_names[c], how_names[how], dt);
}

START_TEST(killed_in_collective)
{
	run((enum coll)_i, KILLED);
}
END_TEST

START_TEST(exit_without_destroy)
{
	run(ALLREDUCE, EXIT_NO_DESTROY);
}
END_TEST

START_TEST(stopped_in_collective)
{
	run(_i == 0 ? ALLREDUCE : ALLTOALL, STOPPED);
}
END_TEST

/* The transport of each case, chosen by a [transport] rule. */
static char *conf_shm, *conf_ofi;

static void use_shm(void)
{
	setenv("WEFT_CONFIG", conf_shm, 1);
}

static void use_ofi_tcp(void)
{
	setenv("WEFT_CONFIG", conf_ofi, 1);
	setenv("WEFT_OFI_PROVIDER", "tcp", 1);
}

static void no_ofi_tcp(void)
{
	unsetenv("WEFT_OFI_PROVIDER");
}

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "2", 1);
	setenv("WEFT_CORE_HEARTBEAT_INTERVAL", "0.5", 1);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "30", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	/* Every connection over the case's transport, whatever else the build
	 * tree holds. */
	char *dir = wt_mkdtemp("kill");
	conf_shm = dir ? wt_write_file(dir, "shm.conf", "[transport]\nuse shm\n") : NULL;
	conf_ofi = dir ? wt_write_file(dir, "ofi.conf", "[transport]\nuse ofi\n") : NULL;
	if (!conf_shm || !conf_ofi)
		return 1;
	victim_pid = mmap(NULL, sizeof(*victim_pid), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (victim_pid == MAP_FAILED)
		return 1;
	Suite *s = suite_create("kill");
	static const struct {
		const char *name;
		void (*setup)(void), (*teardown)(void);
	} tps[] = {{"shm", use_shm, NULL}, {"ofi_tcp", use_ofi_tcp, no_ofi_tcp}};
	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		TCase *tc = tcase_create(tps[i].name);
		tcase_add_unchecked_fixture(tc, tps[i].setup, tps[i].teardown);
		tcase_set_timeout(tc, JOB_TIMEOUT_S + 20);
		tcase_add_loop_test(tc, killed_in_collective, 0, NCOLL);
		tcase_add_test(tc, exit_without_destroy);
		tcase_add_loop_test(tc, stopped_in_collective, 0, 2);
		suite_add_tcase(s, tc);
	}
	int rc = wt_run_suite(s);
	wt_rmdir(dir);
	free(conf_shm);
	free(conf_ofi);
	free(dir);
	return rc;
}
