/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan running plans on host buffers, as an operator would use it: a
 * config names the plans folder and a `require` rule hands the collective to
 * one plan; forked ranks over shm run it four times at growing and shrinking sizes on
 * random data and compare with a reference, and weft_info_last_algorithm
 * must name the plan. Covered: MSCCL++ 0.9's 8 plans without multicast
 * (tests/data/mscclpp-0.9-plans, unchanged), the reductions besides sum on
 * one of them, an out-of-place call refused by an in-place plan (an error,
 * not a copy), the multicast plans refused at load naming file and
 * operation, and weft-plan-check on the same files plus a plan that can
 * only deadlock. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "testlib.h"

#define PR_TIMEOUT_S 120

static struct weft_unique_id g_id;
static const char *g_plan;   /* algorithm name of the plan under test */
static const char *g_coll;   /* its collective */
static enum weft_redop g_op; /* allreduce's reduction */
static int g_inplace;        /* what the plan declares */
static char *g_dir;

static const char *const mscclpp_plans[] = {
	"allreduce", "allreduce_packet", "reduce", "reduce_pack", "reduce_pack_tbg", "reduce_tbg",
	"transfer_pack", "transfer_pack_tbg",
};
static const char *const multicast_plans[] = {"allreduce_pipeline", "reduce_nvls", "reduce_nvls_pipeline"};

/* Chunk counts of these plans divide these element counts (int32, 16-byte
 * alignment, up to 16 chunks, 3 ranks). Calls grow and shrink: the pack's
 * areas grow twice, and LL calls of different sizes follow each other; the
 * largest crosses the interpreter's 64 KiB reduction block. */
static const size_t pr_counts[] = {192 * 21, 192, 192 * 343, 192 * 5};
#define PR_CALLS ((int)(sizeof(pr_counts) / sizeof(pr_counts[0])))
#define PR_MAX_COUNT (192 * 343)

static int32_t pr_val(int call, int r, size_t i)
{
	uint64_t x = (uint64_t)call * 0x9e3779b97f4a7c15ull ^ (uint64_t)r << 40 ^ i;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (int32_t)(x % 41) - 20;
}

/* The element rank `rank` must hold at out[e] after the call, from every
 * rank's inputs pr_val(call, r, index). */
static int32_t pr_want(int call, int rank, int n, size_t count, size_t e)
{
	if (!strcmp(g_coll, "allgather"))
		return pr_val(call, (int)(e / count), e % count);
	if (!strcmp(g_coll, "alltoall"))
		return pr_val(call, (int)(e / count), (size_t)rank * count + e % count);
	size_t at = !strcmp(g_coll, "reducescatter") ? (size_t)rank * count + e : e;
	int32_t acc = pr_val(call, 0, at);
	for (int r = 1; r < n; r++) {
		int32_t v = pr_val(call, r, at);
		switch (g_op) {
		case WEFT_PROD: acc = (int32_t)((uint32_t)acc * (uint32_t)v); break;
		case WEFT_MIN: acc = v < acc ? v : acc; break;
		case WEFT_MAX: acc = v > acc ? v : acc; break;
		default: acc += v; break;
		}
	}
	return acc;
}

/* One call of the plan's collective, count elements per block, in place
 * as the plan declares: allreduce in one buffer, allgather from the rank's
 * block of the output. */
static int run_coll(weft_comm_t *comm, int rank, int n, int call, size_t count, int32_t *in, int32_t *out)
{
	int ag = !strcmp(g_coll, "allgather"), rs = !strcmp(g_coll, "reducescatter"), a2a = !strcmp(g_coll, "alltoall");
	size_t nin = rs || a2a ? count * (size_t)n : count, nout = ag || a2a ? count * (size_t)n : count;
	memset(out, 0xa5, nout * 4 + 64);
	int32_t *send = !g_inplace ? in : ag ? out + (size_t)rank * count : out;
	for (size_t i = 0; i < nin; i++)
		send[i] = pr_val(call, rank, i);
	int rc;
	if (ag)
		rc = weft_allgather(send, out, count, WEFT_INT32, comm, NULL);
	else if (rs)
		rc = weft_reduce_scatter(send, out, count, WEFT_INT32, g_op, comm, NULL);
	else if (a2a)
		rc = weft_alltoall(send, out, count, WEFT_INT32, comm, NULL);
	else
		rc = weft_allreduce(send, out, count, WEFT_INT32, g_op, comm, NULL);
	RCHECK(rc == 0, "%s, %zu elements: %s", g_plan, count, weft_strerror(rc));
	for (size_t e = 0; e < nout; e++)
		RCHECK(out[e] == pr_want(call, rank, n, count, e), "%s, %zu elements: element %zu is %d, want %d",
		       g_plan, count, e, out[e], pr_want(call, rank, n, count, e));
	RCHECK(((unsigned char *)out)[nout * 4] == 0xa5, "%s: wrote past the output", g_plan);
	return 0;
}

static int rank_main(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	size_t max = PR_MAX_COUNT * 4 * (size_t)n + 64;
	int32_t *in = malloc(max), *out = malloc(max);
	RCHECK(in && out, "out of memory");
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	for (int call = 0; call < PR_CALLS; call++) {
		if (run_coll(comm, rank, n, call, pr_counts[call], in, out))
			return 1;
		char want[96];
		snprintf(want, sizeof(want), "algo-plan/%s", g_plan);
		const char *algo = weft_info_last_algorithm(comm);
		RCHECK(algo && !strcmp(algo, want), "the call was served by %s, not %s", algo ? algo : "(none)", want);
	}
	ROK(weft_comm_destroy(comm));
	free(in);
	free(out);
	return 0;
}

/* A config that offers the test data's plans and requires one of them. */
static void use_plan_in(const char *dir, const char *plan, const char *coll, const char *transport)
{
	char text[1024];
	static const struct {
		const char *plan, *weft;
	} colls[] = {{"reducescatter", "reduce_scatter"}};
	const char *wc = coll;
	for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
		if (!strcmp(coll, colls[i].plan))
			wc = colls[i].weft;
	snprintf(text, sizeof(text), "[algo-plan]\nplans = %s\n[algorithm]\nrequire algo-plan/%s when coll=%s\n%s%s%s",
		 dir, plan, wc, transport ? "[transport]\nuse " : "", transport ? transport : "", transport ? "\n" : "");
	char *conf = wt_write_file(g_dir, "plan.conf", text);
	ck_assert_int_eq(setenv("WEFT_CONFIG", conf, 1), 0);
	free(conf);
	g_plan = plan;
	g_coll = coll;
	g_inplace = !strcmp(dir, PLAN_DATA_DIR);
}

static void use_plan(const char *plan, const char *coll)
{
	use_plan_in(PLAN_DATA_DIR, plan, coll, NULL);
}

static void fork_n(int n)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_msg(wt_fork_ranks(n, rank_main, NULL, PR_TIMEOUT_S) == 0, "%s: a rank failed (see above)", g_plan);
}

static void fork_ranks(void)
{
	fork_n(2);
}

/* The project's own plans (plugins/algo-plan/plans, tools/plangen.py):
 * memory-channel plans over shm, port-channel plans over ofi and ucx. */
static const char *const own_plans[] = {
	"allgather_ring_2r_ll_mem", "allgather_ring_2r_simple_mem", "allgather_ring_4r_ll_mem",
	"allgather_ring_4r_simple_mem", "allgather_ring_8r_ll_mem", "allgather_ring_8r_simple_mem",
	"allreduce_oneshot_2r_ll_mem", "allreduce_oneshot_2r_ll_port", "allreduce_oneshot_2r_simple_mem",
	"allreduce_oneshot_2r_simple_port", "allreduce_oneshot_3r_ll_mem", "allreduce_oneshot_3r_ll_port",
	"allreduce_oneshot_3r_simple_mem", "allreduce_oneshot_3r_simple_port", "allreduce_oneshot_4r_ll_mem",
	"allreduce_oneshot_4r_ll_port", "allreduce_oneshot_4r_simple_mem", "allreduce_oneshot_4r_simple_port",
	"allreduce_oneshot_8r_ll_mem", "allreduce_oneshot_8r_ll_port", "allreduce_oneshot_8r_simple_mem",
	"allreduce_oneshot_8r_simple_port", "allreduce_ring_2r_ll_mem", "allreduce_ring_2r_ll_port",
	"allreduce_ring_2r_simple_mem", "allreduce_ring_2r_simple_port", "allreduce_ring_3r_ll_mem",
	"allreduce_ring_3r_ll_port", "allreduce_ring_3r_simple_mem", "allreduce_ring_3r_simple_port",
	"allreduce_ring_4r_ll_mem", "allreduce_ring_4r_ll_port", "allreduce_ring_4r_simple_mem",
	"allreduce_ring_4r_simple_port", "allreduce_ring_8r_ll_mem", "allreduce_ring_8r_ll_port",
	"allreduce_ring_8r_simple_mem", "allreduce_ring_8r_simple_port", "alltoall_ring_2r_ll_mem",
	"alltoall_ring_2r_simple_mem", "alltoall_ring_4r_ll_mem", "alltoall_ring_4r_simple_mem",
	"alltoall_ring_8r_ll_mem", "alltoall_ring_8r_simple_mem", "reducescatter_ring_2r_ll_mem",
	"reducescatter_ring_2r_simple_mem", "reducescatter_ring_4r_ll_mem", "reducescatter_ring_4r_simple_mem",
	"reducescatter_ring_8r_ll_mem", "reducescatter_ring_8r_simple_mem",
};
#define N_OWN ((int)(sizeof(own_plans) / sizeof(own_plans[0])))

static void run_own(const char *plan, const char *transport)
{
	char coll[32];
	snprintf(coll, sizeof(coll), "%.*s", (int)strcspn(plan, "_"), plan);
	int n = atoi(strstr(plan, "r_") - 1);
	g_op = WEFT_SUM;
	use_plan_in(PLAN_OWN_DIR, plan, coll, transport);
	fork_n(n);
}

/* Each plan once: a memory plan over shm, a port plan over ofi (tcp) or ucx
 * (tcp), alternating so that each runs LL and Simple, ring and one-shot. */
START_TEST(own_plan_runs)
{
	const char *plan = own_plans[_i];
	int port = strstr(plan, "_port") != NULL;
	run_own(plan, !port ? NULL : (_i / 4) % 2 ? "ucx" : "ofi");
}
END_TEST

START_TEST(mscclpp_plan_runs_over_shm)
{
	const char *plan = mscclpp_plans[_i];
	use_plan(plan, strncmp(plan, "transfer", 8) ? "allreduce" : "allgather");
	g_op = WEFT_SUM;
	fork_ranks();
}
END_TEST

START_TEST(plan_applies_the_calls_reduction)
{
	static const enum weft_redop ops[] = {WEFT_PROD, WEFT_MIN, WEFT_MAX};
	use_plan(_i % 2 ? "reduce_pack" : "allreduce", "allreduce");
	g_op = ops[_i % 3];
	fork_ranks();
}
END_TEST

static int rank_out_of_place(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	int32_t in[256], out[256];
	for (int i = 0; i < 256; i++)
		in[i] = out[i] = rank + 1;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	int rc = weft_allreduce(in, out, 256, WEFT_INT32, WEFT_SUM, comm, NULL);
	RCHECK(rc == -ENOTSUP, "an out-of-place call of an in-place plan returned %d (%s), want -ENOTSUP", rc,
	       weft_strerror(rc));
	for (int i = 0; i < 256; i++)
		RCHECK(out[i] == rank + 1, "the refused call wrote element %d", i);
	weft_comm_destroy(comm);
	return 0;
}

START_TEST(in_place_plan_refuses_out_of_place_calls)
{
	use_plan("allreduce", "allreduce");
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_out_of_place, NULL, PR_TIMEOUT_S), 0);
}
END_TEST

START_TEST(multicast_plans_refused_at_load)
{
	use_plan("allreduce", "allreduce");
	int st = 0;
	char *out = wt_run_capture(WEFT_INFO_BIN " 2>&1", &st);
	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < sizeof(multicast_plans) / sizeof(multicast_plans[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want), "%s.json:", multicast_plans[i]);
		const char *at = strstr(out, want);
		ck_assert_msg(at, "weft-info does not name %s:\n%s", want, out);
		const char *eol = strchr(at, '\n');
		ck_assert_msg(strstr(at, "'glres' uses NVLink multicast") && (!eol || strstr(at, "glres") < eol),
			      "the refusal of %s does not name glres:\n%s", multicast_plans[i], out);
	}
	ck_assert_msg(strstr(out, "algo-plan        algorithm"), "algo-plan is not loaded:\n%s", out);
	free(out);
}
END_TEST

START_TEST(plan_check_accepts_mscclpp_plans)
{
	for (size_t i = 0; i < sizeof(mscclpp_plans) / sizeof(mscclpp_plans[0]); i++) {
		char cmd[1024];
		int st = 0;
		snprintf(cmd, sizeof(cmd), "%s %s/%s.json 2>&1", PLAN_CHECK_BIN, PLAN_DATA_DIR, mscclpp_plans[i]);
		char *out = wt_run_capture(cmd, &st);
		ck_assert_ptr_nonnull(out);
		ck_assert_msg(st == 0 && strstr(out, ": ok ("), "weft-plan-check on %s: status %d:\n%s",
			      mscclpp_plans[i], st, out);
		free(out);
	}
}
END_TEST

/* Rank 0 waits on its channel to rank 1 before signalling; rank 1 does the
 * same: each waits for the other, whatever the interleaving. */
static const char deadlock_plan[] =
	"{\"name\":\"dl\",\"collective\":\"allreduce\",\"protocol\":\"Simple\",\"inplace\":true,\"gpus\":["
	"{\"id\":0,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
	"\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[1]}],\"remote_buffers\":[],"
	"\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],"
	"\"ops\":[{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]},"
	"{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]},"
	"{\"id\":1,\"input_chunks\":1,\"output_chunks\":1,\"scratch_chunks\":0,"
	"\"channels\":[{\"channel_type\":\"memory\",\"connected_to\":[0]}],\"remote_buffers\":[],"
	"\"threadblocks\":[{\"id\":0,\"channels\":[{\"channel_type\":\"memory\",\"channel_ids\":[0]}],"
	"\"ops\":[{\"name\":\"wait\",\"channel_type\":\"memory\",\"channel_ids\":[0]},"
	"{\"name\":\"signal\",\"channel_type\":\"memory\",\"channel_ids\":[0]}]}]}]}\n";

START_TEST(plan_check_reports_a_deadlock)
{
	char *f = wt_write_file(g_dir, "deadlock.json", deadlock_plan);
	char cmd[1024];
	int st = 0;
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", PLAN_CHECK_BIN, f);
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st != 0, "weft-plan-check passed a plan that deadlocks:\n%s", out);
	ck_assert_msg(strstr(out, "deadlock") && strstr(out, "rank 0: threadblock 0 op 0 (wait) waits for a signal") &&
			      strstr(out, "rank 1: threadblock 0 op 0 (wait) waits for a signal"),
		      "weft-plan-check does not name both waits:\n%s", out);
	free(out);
	free(f);
}
END_TEST

/* Rank 1 offers an allreduce.json one byte longer than rank 0's, from
 * another folder: creation must fail on both, naming the plan and both
 * hashes. Each rank reads its own config, so the ranks meet through the
 * root of the environment, not an id this process would have to make. */
static int rank_differing_plans(int rank, int n, void *arg)
{
	(void)arg;
	char path[512], text[1024];
	snprintf(path, sizeof(path), "%s/rank%d.log", g_dir, rank);
	RCHECK(freopen(path, "w", stderr), "cannot redirect stderr");
	snprintf(text, sizeof(text), "[algo-plan]\nplans = %s/plans%d\n", g_dir, rank);
	snprintf(path, sizeof(path), "%s/rank%d.conf", g_dir, rank);
	FILE *f = fopen(path, "w");
	RCHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "cannot write %s", path);
	setenv("WEFT_CONFIG", path, 1);
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(NULL, n, rank, &comm);
	RCHECK(rc == -WEFT_ERR_MISMATCH, "creation with different plans returned %d (%s)", rc, weft_strerror(rc));
	return 0;
}

START_TEST(ranks_with_different_plans_fail_creation)
{
	char *src = wt_read_file(PLAN_DATA_DIR "/allreduce.json");
	ck_assert_ptr_nonnull(src);
	for (int r = 0; r < 2; r++) {
		char dir[512], *longer = NULL;
		snprintf(dir, sizeof(dir), "%s/plans%d", g_dir, r);
		ck_assert_int_eq(mkdir(dir, 0700), 0);
		ck_assert_int_ge(asprintf(&longer, "%s%s", src, r ? " " : ""), 0);
		free(wt_write_file(dir, "allreduce.json", longer));
		free(longer);
	}
	free(src);
	char root[64];
	snprintf(root, sizeof(root), "127.0.0.1:%d", wt_free_port());
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", root, 1);
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "test-plan-run", 1);
	ck_assert_int_eq(wt_fork_ranks(2, rank_differing_plans, NULL, PR_TIMEOUT_S), 0);
	for (int r = 0; r < 2; r++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/rank%d.log", g_dir, r);
		char *log = wt_read_file(path);
		ck_assert_ptr_nonnull(log);
		ck_assert_msg(strstr(log, "ranks disagree: pack algo-plan plan allreduce is 'allreduce.json sha256 ") &&
				      strstr(log, "' on rank 0 but 'allreduce.json sha256 "),
			      "rank %d did not name the differing plan:\n%s", r, log);
		free(log);
	}
}
END_TEST

int main(void)
{
	g_dir = wt_mkdtemp("plan-run");
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	Suite *s = suite_create("plan_run");
	TCase *tc = tcase_create("mscclpp");
	tcase_set_timeout(tc, PR_TIMEOUT_S + 30);
	tcase_add_loop_test(tc, mscclpp_plan_runs_over_shm, 0, (int)(sizeof(mscclpp_plans) / sizeof(mscclpp_plans[0])));
	tcase_add_loop_test(tc, plan_applies_the_calls_reduction, 0, 3);
	tcase_add_test(tc, in_place_plan_refuses_out_of_place_calls);
	tcase_add_test(tc, multicast_plans_refused_at_load);
	tcase_add_test(tc, ranks_with_different_plans_fail_creation);
	suite_add_tcase(s, tc);
	TCase *to = tcase_create("own");
	tcase_set_timeout(to, PR_TIMEOUT_S + 30);
	tcase_add_loop_test(to, own_plan_runs, 0, N_OWN);
	suite_add_tcase(s, to);
	TCase *tk = tcase_create("plan_check");
	tcase_add_test(tk, plan_check_accepts_mscclpp_plans);
	tcase_add_test(tk, plan_check_reports_a_deadlock);
	suite_add_tcase(s, tk);
	int rc = wt_run_suite(s);
	wt_rmdir(g_dir);
	return rc;
}
