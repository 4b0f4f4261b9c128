/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu's cross-host executor (plugins/algo-gpu/hx.c) on host memory,
 * through the hxtest pack (tests/plugins/pack_hxtest.c): forked ranks on 2
 * to 3 "hosts" (test host identities), shm inside a host and the network
 * transport named by WEFT_TEST_TRANSPORT (ofi or ucx, tcp on 127.0.0.1)
 * between, with 4 KiB ring slots two deep so every call wraps its rings.
 * Every collective on random data, in place and out of place, against a
 * reference computed from every rank's input; then a rank killed mid-call:
 * the survivors return an error and nothing hangs. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "netns_lib.h"
#include "testlib.h"

static struct weft_unique_id g_id;
static const char *g_transport = "ofi";
/* WEFT_TEST_NETNS=1: hosts a and b are network namespaces joined by a veth
 * pair; the bootstrap and the transports bind to each one's veth address,
 * and rank 0 makes the unique id inside its namespace. */
static int g_netns;
static struct wt_netns g_ns;
static struct wt_id_pipe g_pipe;

struct layout {
	int nranks;
	const char *hosts; /* one letter per rank: its host */
};

static double val(int rank, uint64_t i, int salt)
{
	uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank + 7) * 0xBF58476D1CE4E5B9ull ^ (uint64_t)salt;
	x ^= x >> 31;
	return (double)(x % 2001) - 1000.0; /* integers: every sum exact */
}

static int join(int rank, const struct layout *l, weft_comm_t **comm)
{
	char id[8];
	snprintf(id, sizeof(id), "h%c", l->hosts[rank]);
	setenv("WEFT_TEST_HOST_ID", id, 1);
	if (g_netns) {
		int i = l->hosts[rank] - 'a';
		if (i < 0 || i > 1 || wt_netns_enter(&g_ns, i) < 0)
			return -EINVAL;
		wt_netns_env(&g_ns, i);
		int rc = wt_id_share(&g_pipe, rank == 0, &g_id);
		if (rc)
			return rc;
	}
	return weft_comm_create(&g_id, l->nranks, rank, comm);
}

#define N 10007 /* elements: not a multiple of any slot */

/* Checks that the call was served by the pack under test. */
static int served(weft_comm_t *comm, const char *what)
{
	int rank = weft_comm_rank(comm);
	const char *a = weft_info_last_algorithm(comm);
	RCHECK(a && strncmp(a, "hxtest/", 7) == 0, "%s was served by %s, not hxtest", what, a ? a : "(none)");
	return 0;
}

static int check_allreduce(weft_comm_t *comm, int rank, int R, enum weft_redop op, int inplace)
{
	float *in = malloc(N * sizeof(float)), *out = malloc(N * sizeof(float));
	RCHECK(in && out, "alloc");
	for (uint64_t i = 0; i < N; i++) {
		in[i] = (float)val(rank, i, op);
		out[i] = NAN;
	}
	float *dst = inplace ? in : out;
	ROK(weft_allreduce(in, dst, N, WEFT_FLOAT32, op, comm, NULL));
	RCHECK(served(comm, "allreduce") == 0, "served");
	for (uint64_t i = 0; i < N; i++) {
		double w = val(0, i, op);
		for (int r = 1; r < R; r++) {
			double v = val(r, i, op);
			w = op == WEFT_MAX ? fmax(w, v) : op == WEFT_MIN ? fmin(w, v) : w + v;
		}
		if (op == WEFT_AVG)
			w /= R;
		RCHECK(fabs(dst[i] - w) <= 1e-3 * (fabs(w) + 1), "allreduce op %d%s: element %llu is %g, expected %g", op,
		       inplace ? " in place" : "", (unsigned long long)i, dst[i], w);
	}
	free(in);
	free(out);
	return 0;
}

static int check_int_colls(weft_comm_t *comm, int rank, int R)
{
	size_t n = N, total = (size_t)R * n;
	int32_t *in = malloc(total * sizeof(int32_t)), *out = malloc(total * sizeof(int32_t));
	RCHECK(in && out, "alloc");
	/* reduce-scatter: rank r's block of the sum. */
	for (size_t i = 0; i < total; i++)
		in[i] = (int32_t)val(rank, i, 1);
	memset(out, 0x5a, total * sizeof(int32_t));
	ROK(weft_reduce_scatter(in, out, n, WEFT_INT32, WEFT_SUM, comm, NULL));
	RCHECK(served(comm, "reduce_scatter") == 0, "served");
	for (size_t i = 0; i < n; i++) {
		int32_t w = 0;
		for (int r = 0; r < R; r++)
			w += (int32_t)val(r, (size_t)rank * n + i, 1);
		RCHECK(out[i] == w, "reduce_scatter: element %zu is %d, expected %d", i, out[i], w);
	}
	/* allgather, in place: each rank's block already sits at its place. */
	for (size_t i = 0; i < n; i++)
		out[(size_t)rank * n + i] = (int32_t)val(rank, i, 2);
	ROK(weft_allgather(out + (size_t)rank * n, out, n, WEFT_INT32, comm, NULL));
	RCHECK(served(comm, "allgather") == 0, "served");
	for (int r = 0; r < R; r++)
		for (size_t i = 0; i < n; i++)
			RCHECK(out[(size_t)r * n + i] == (int32_t)val(r, i, 2), "allgather: block %d element %zu is %d", r,
			       i, out[(size_t)r * n + i]);
	/* broadcast from the last rank, out of place. */
	int root = R - 1;
	for (size_t i = 0; i < n; i++) {
		in[i] = rank == root ? (int32_t)val(root, i, 3) : -1;
		out[i] = 0;
	}
	ROK(weft_broadcast(in, out, n, WEFT_INT32, root, comm, NULL));
	RCHECK(served(comm, "broadcast") == 0, "served");
	for (size_t i = 0; i < n; i++)
		RCHECK(out[i] == (int32_t)val(root, i, 3), "broadcast: element %zu is %d", i, out[i]);
	/* reduce (max) to rank 1. */
	for (size_t i = 0; i < n; i++) {
		in[i] = (int32_t)val(rank, i, 4);
		out[i] = INT32_MIN;
	}
	ROK(weft_reduce(in, out, n, WEFT_INT32, WEFT_MAX, 1, comm, NULL));
	RCHECK(served(comm, "reduce") == 0, "served");
	if (rank == 1)
		for (size_t i = 0; i < n; i++) {
			int32_t w = INT32_MIN;
			for (int r = 0; r < R; r++)
				w = (int32_t)val(r, i, 4) > w ? (int32_t)val(r, i, 4) : w;
			RCHECK(out[i] == w, "reduce: element %zu is %d, expected %d", i, out[i], w);
		}
	/* alltoall: block q of rank r goes to rank q's block r. In place, the
	 * block received from q lands where the block for q waited to go, over
	 * more pieces than the ring holds. */
	for (int ip = 0; ip < 2; ip++) {
		int salt = 5 + ip;
		int32_t *src = ip ? out : in;
		for (size_t i = 0; i < total; i++) {
			out[i] = -7;
			src[i] = (int32_t)val(rank, i, salt);
		}
		ROK(weft_alltoall(src, out, n, WEFT_INT32, comm, NULL));
		RCHECK(served(comm, "alltoall") == 0, "served");
		for (int r = 0; r < R; r++)
			for (size_t i = 0; i < n; i++)
				RCHECK(out[(size_t)r * n + i] == (int32_t)val(r, (size_t)rank * n + i, salt),
				       "alltoall%s: block from %d element %zu is %d", ip ? " in place" : "", r, i,
				       out[(size_t)r * n + i]);
	}
	/* send/recv around the ring, and one to itself, in one group. */
	int next = (rank + 1) % R, prev = (rank + R - 1) % R;
	for (size_t i = 0; i < n; i++) {
		in[i] = (int32_t)val(rank, i, 6);
		out[i] = out[n + i] = 0;
	}
	ROK(weft_group_start());
	ROK(weft_send(in, n * sizeof(int32_t), WEFT_UINT8, next, comm, NULL));
	ROK(weft_recv(out, n * sizeof(int32_t), WEFT_UINT8, prev, comm, NULL));
	ROK(weft_send(in, 100, WEFT_UINT8, rank, comm, NULL));
	ROK(weft_recv(out + n, 100, WEFT_UINT8, rank, comm, NULL));
	ROK(weft_group_end());
	RCHECK(served(comm, "sendrecv") == 0, "served");
	for (size_t i = 0; i < n; i++)
		RCHECK(out[i] == (int32_t)val(prev, i, 6), "recv from %d: element %zu is %d", prev, i, out[i]);
	RCHECK(memcmp(out + n, in, 100) == 0, "the send to itself did not arrive");
	/* The ring shift in place: one buffer sent to next and received from
	 * prev in one group, over more pieces than the ring holds. */
	for (size_t i = 0; i < n; i++)
		out[i] = (int32_t)val(rank, i, 7);
	ROK(weft_group_start());
	ROK(weft_send(out, n * sizeof(int32_t), WEFT_UINT8, next, comm, NULL));
	ROK(weft_recv(out, n * sizeof(int32_t), WEFT_UINT8, prev, comm, NULL));
	ROK(weft_group_end());
	for (size_t i = 0; i < n; i++)
		RCHECK(out[i] == (int32_t)val(prev, i, 7), "in-place recv from %d: element %zu is %d", prev, i, out[i]);
	free(in);
	free(out);
	return 0;
}

static int rank_colls(int rank, int nranks, void *arg)
{
	const struct layout *l = arg;
	weft_comm_t *comm;
	ROK(join(rank, l, &comm));
	static const enum weft_redop ops[] = {WEFT_SUM, WEFT_MAX, WEFT_AVG};
	for (unsigned k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		for (int inplace = 0; inplace < 2; inplace++)
			if (check_allreduce(comm, rank, nranks, ops[k], inplace))
				return 1;
	if (check_int_colls(comm, rank, nranks))
		return 1;
	ROK(weft_comm_destroy(comm));
	return 0;
}

/* The id: made here, or by rank 0 in its namespace. */
static void id_begin(int nranks)
{
	if (g_netns)
		ck_assert_int_eq(wt_id_pipe_open(&g_pipe, nranks - 1), 0);
	else
		ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
}

static void id_end(void)
{
	if (g_netns)
		wt_id_pipe_close(&g_pipe);
}

static void run_layout(const char *hosts)
{
	struct layout l = {.nranks = (int)strlen(hosts), .hosts = hosts};
	id_begin(l.nranks);
	int bad = wt_fork_ranks(l.nranks, rank_colls, &l, 100);
	id_end();
	ck_assert_msg(bad == 0, "%d rank(s) of layout %s failed", bad, hosts);
}

START_TEST(two_hosts_one_each) { run_layout("ab"); }
END_TEST
START_TEST(two_hosts_two_each) { run_layout("aabb"); }
END_TEST
START_TEST(uneven_three_one) { run_layout("aaab"); }
END_TEST
START_TEST(three_hosts_two_one_one) { run_layout("abca"); }
END_TEST
START_TEST(tree_two_hosts)
{
	setenv("WEFT_HXTEST_TREE", "1", 1);
	run_layout("abab");
	unsetenv("WEFT_HXTEST_TREE");
}
END_TEST

/* Rank 2 (of 4 on 2 hosts) dies in the middle of a long allreduce loop:
 * every survivor's call returns an error within the peer timeout. */
static int rank_killed(int rank, int nranks, void *arg)
{
	const struct layout *l = arg;
	weft_comm_t *comm;
	ROK(join(rank, l, &comm));
	size_t n = 1 << 20;
	float *buf = calloc(n, sizeof(float));
	RCHECK(buf != NULL, "alloc");
	int rc = 0;
	for (int it = 0; it < 200 && rc == 0; it++) {
		if (rank == 2 && it == 3)
			raise(SIGKILL);
		rc = weft_allreduce(buf, buf, n, WEFT_FLOAT32, WEFT_SUM, comm, NULL);
	}
	RCHECK(rc != 0, "rank %d: 200 allreduces succeeded although rank 2 was killed", rank);
	printf("hier: rank %d saw the death as: %s\n", rank, weft_strerror(rc));
	weft_comm_destroy(comm);
	free(buf);
	return 0;
}

START_TEST(peer_killed_mid_call)
{
	struct layout l = {.nranks = 4, .hosts = "aabb"};
	id_begin(4);
	int status[4];
	int bad = wt_fork_ranks_status(4, rank_killed, &l, 60, status);
	id_end();
	ck_assert_msg(WIFSIGNALED(status[2]) && WTERMSIG(status[2]) == SIGKILL, "rank 2 was not the one killed");
	for (int r = 0; r < 4; r++)
		if (r != 2)
			ck_assert_msg(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0, "survivor %d failed", r);
	(void)bad;
}
END_TEST

int main(void)
{
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (t && *t)
		g_transport = t;
	const char *dir = getenv("WEFT_TEST_HXTEST_PLUGIN_DIR");
	if (!dir || !*dir) {
		fprintf(stderr, "WEFT_TEST_HXTEST_PLUGIN_DIR is not set\n");
		return 1;
	}
	setenv("WEFT_PLUGIN_PATH", dir, 1);
	const char *ns = getenv("WEFT_TEST_NETNS");
	g_netns = ns && strcmp(ns, "1") == 0;
	int prc = g_netns ? wt_netns_prepare(&g_ns, g_transport) : 0;
	if (prc)
		return prc;
	/* shm inside a host, the transport under test between hosts. */
	char *tmp = wt_mkdtemp("hier");
	char conf[256];
	snprintf(conf, sizeof(conf), "[transport]\nuse shm when peer=same-process,same-host\nrequire %s when peer=other-host\n",
		 g_transport);
	char *path = wt_write_file(tmp, "weft.conf", conf);
	setenv("WEFT_CONFIG", path, 1);
	free(path);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_OFI_ADDR", "127.0.0.1", 1);
	unsetenv("WEFT_OFI_IFACE"); /* the interface follows the address */
	setenv("WEFT_CORE_PEER_TIMEOUT", "10", 0);
	Suite *s = suite_create("hier_exec");
	TCase *tc = tcase_create("layouts");
	tcase_set_timeout(tc, 110);
	tcase_add_test(tc, two_hosts_one_each);
	tcase_add_test(tc, two_hosts_two_each);
	tcase_add_test(tc, uneven_three_one);
	if (!g_netns) /* a veth pair joins two namespaces */
		tcase_add_test(tc, three_hosts_two_one_one);
	tcase_add_test(tc, tree_two_hosts);
	tcase_add_test(tc, peer_killed_mid_call);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_netns_cleanup(&g_ns);
	wt_rmdir(tmp);
	free(tmp);
	return rc;
}
