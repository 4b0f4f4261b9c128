/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host over shm, where every pair maps each other: the cached direct
 * gather (kept output registrations, the own block copied piece by piece as it
 * goes out) and publish-and-pull, checked against references computed here,
 * for blocks that span several pieces, in place and out of place, on the same
 * buffers again (kept registration), on new ones, and on outputs from
 * weft_mem_alloc freed and allocated again (never kept). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id g_id;

/* The value of element i of rank r's block in call k. */
static uint32_t val(int r, size_t i, int k)
{
	return (uint32_t)(i * 2654435761u) ^ ((uint32_t)r << 24) ^ (uint32_t)k * 977u;
}

/* Allgather of count uint32 per rank, out of place (fresh output each time
 * unless keep) or in place; returns 0 when every rank's block is right. */
static int gather_once(weft_comm_t *comm, int rank, int n, size_t count, int inplace, int k, uint32_t *out,
		       uint32_t *in)
{
	uint32_t *mine = inplace ? out + (size_t)rank * count : in;
	for (size_t i = 0; i < count; i++)
		mine[i] = val(rank, i, k);
	for (int p = 0; p < n; p++)
		if (p != rank || !inplace)
			memset(out + (size_t)p * count, 0xee, count * sizeof(*out));
	if (weft_allgather(mine, out, count, WEFT_UINT32, comm, NULL) != 0)
		return 10;
	for (int p = 0; p < n; p++)
		for (size_t i = 0; i < count; i++)
			if (out[(size_t)p * count + i] != val(p, i, k))
				return 11;
	return 0;
}

static int gathers(weft_comm_t *comm, int rank, int n)
{
	/* 16 KiB blocks (copied to their place first), 512 KiB + 4 B (below
	 * nt_min: one put from the input, then one memcpy), then pieces copied
	 * with streaming stores: 1 MiB + 12 B (three pieces, the last short),
	 * 3 MiB (six whole pieces), 8 MiB + 20 B. */
	static const size_t counts[] = {4096, (1u << 17) + 1, (1u << 18) + 3, 3u << 18, (2u << 20) + 5};
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t count = counts[c];
		uint32_t *out = malloc((size_t)n * count * sizeof(*out)), *in = malloc(count * sizeof(*in));
		if (!out || !in)
			return 2;
		int rc = 0;
		/* The same buffers three times (the registration is kept), in place
		 * on them, then new buffers of the same size. */
		for (int k = 0; k < 3 && !rc; k++)
			rc = gather_once(comm, rank, n, count, 0, k, out, in);
		if (!rc)
			rc = gather_once(comm, rank, n, count, 1, 3, out, in);
		free(out);
		free(in);
		if (rc)
			return rc;
		out = malloc((size_t)n * count * sizeof(*out) + 64);
		in = malloc(count * sizeof(*in));
		if (!out || !in)
			return 3;
		/* An output at another address, not page-aligned. */
		rc = gather_once(comm, rank, n, count, 0, 4, out + 5, in);
		free(out);
		free(in);
		if (rc)
			return rc + 10 * (int)c;
	}
	return 0;
}

/* Outputs from weft_mem_alloc, which shm lets peers map: each is freed
 * after its call and the next is allocated anew, most often at the same
 * address. A registration kept from the last call would have peers write
 * through their mapping of the freed segment, and this rank would read
 * stale or 0xee data. */
static int gathers_in_allocs(weft_comm_t *comm, int rank, int n)
{
	static const size_t counts[] = {4096, (1u << 17) + 1};
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		size_t count = counts[c];
		uint32_t *in = malloc(count * sizeof(*in));
		if (!in)
			return 40;
		int rc = 0;
		for (int k = 0; k < 4 && !rc; k++) {
			void *out = NULL;
			if (weft_mem_alloc(comm, WEFT_MEM_HOST, (size_t)n * count * sizeof(uint32_t), &out) != 0) {
				rc = 41;
				break;
			}
			rc = gather_once(comm, rank, n, count, k == 3, 10 + k, out, in);
			if (weft_mem_free(comm, out) != 0 && !rc)
				rc = 42;
		}
		free(in);
		if (rc)
			return rc + 100 * (int)c;
	}
	return 0;
}

/* rs+ag allreduce, whose allgather phase goes direct too: sums of int32. */
static int allreduce_big(weft_comm_t *comm, int rank, int n)
{
	size_t count = (3u << 20) + 7; /* blocks of unequal length */
	int32_t *buf = malloc(count * sizeof(*buf)), *out = malloc(count * sizeof(*out));
	if (!buf || !out)
		return 20;
	int rc = 0;
	for (int k = 0; k < 2 && !rc; k++) {
		for (size_t i = 0; i < count; i++)
			buf[i] = (int32_t)(val(rank, i, k) & 0xffff);
		if (weft_allreduce(buf, out, count, WEFT_INT32, WEFT_SUM, comm, NULL) != 0) {
			rc = 21;
			break;
		}
		for (size_t i = 0; i < count && !rc; i++) {
			int32_t want = 0;
			for (int p = 0; p < n; p++)
				want += (int32_t)(val(p, i, k) & 0xffff);
			if (out[i] != want)
				rc = 22;
		}
	}
	free(buf);
	free(out);
	return rc;
}

static int rank_main(int rank, int n, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	if (weft_comm_create(&g_id, n, rank, &comm) != 0)
		return 1;
	int rc = gathers(comm, rank, n);
	if (!rc)
		rc = gathers_in_allocs(comm, rank, n);
	if (!rc)
		rc = allreduce_big(comm, rank, n);
	/* A failing rank leaves without destroying its comm: the peers then see a
	 * dead peer instead of waiting for it. */
	if (rc)
		return rc;
	return weft_comm_destroy(comm) == 0 ? 0 : 30;
}

static void run(int n)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(n, rank_main, NULL, 90);
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, n);
}

/* The cached direct gather at every block size, whatever the CPU count. */
START_TEST(direct_np2)
{
	setenv("WEFT_ALGO_HOST_CACHED_OVERSUB", "1", 1);
	setenv("WEFT_ALGO_HOST_CACHED_MIN", "16K", 1);
	run(2);
}
END_TEST

START_TEST(direct_np3)
{
	setenv("WEFT_ALGO_HOST_CACHED_OVERSUB", "1", 1);
	setenv("WEFT_ALGO_HOST_CACHED_MIN", "16K", 1);
	run(3);
}
END_TEST

/* Publish and pull only (no direct gather, no pushed reduce-scatter). */
START_TEST(pull_np3)
{
	setenv("WEFT_ALGO_HOST_CACHED_MIN", "0", 1);
	setenv("WEFT_ALGO_HOST_DIRECT_MIN", "0", 1);
	setenv("WEFT_ALGO_HOST_RSAG_PUSH_MIN", "0", 1);
	run(3);
}
END_TEST

/* allreduce-rsag pushing both phases between ranks that could pull. */
START_TEST(rsag_push_np3)
{
	setenv("WEFT_ALGO_HOST_CACHED_MIN", "0", 1);
	setenv("WEFT_ALGO_HOST_DIRECT_MIN", "0", 1);
	setenv("WEFT_ALGO_HOST_RSAG_PUSH_MIN", "64K", 1);
	setenv("WEFT_ALGO_HOST_RSAG_PUSH_ALWAYS", "1", 1);
	run(3);
}
END_TEST

/* Ranks as threads of one process, where a peer's mapping of this rank's
 * scratch is this very memory: a rank that destroys its comm right after its
 * last allreduce must not free the scratch a slower peer still raises a
 * token in (that peer crashed, or wrote into freed memory). */
struct th_rank {
	struct weft_unique_id id;
	int rank, rc;
};

static void *th_main(void *arg)
{
	struct th_rank *t = arg;
	weft_comm_t *comm = NULL;
	if ((t->rc = weft_comm_create(&t->id, 2, t->rank, &comm)) != 0)
		return NULL;
	for (int k = 0; k < 3 && !t->rc; k++) {
		uint32_t v[64], want = 0;
		for (int i = 0; i < 64; i++)
			v[i] = val(t->rank, (size_t)i, k);
		t->rc = weft_allreduce(v, v, 64, WEFT_UINT32, WEFT_SUM, comm, NULL);
		for (int i = 0; i < 64 && !t->rc; i++)
			if (v[i] != (want = val(0, (size_t)i, k) + val(1, (size_t)i, k)))
				t->rc = 40;
	}
	int drc = weft_comm_destroy(comm);
	if (!t->rc)
		t->rc = drc;
	return NULL;
}

START_TEST(thread_ranks_destroy_after_allreduce)
{
	for (int it = 0; it < 40; it++) {
		struct th_rank t[2] = {{.rank = 0}, {.rank = 1}};
		ck_assert_int_eq(weft_get_unique_id(&t[0].id), 0);
		t[1].id = t[0].id;
		ck_assert_int_eq(wt_run_threads(2, th_main, t, sizeof(t[0])), 0);
		ck_assert_msg(t[0].rc == 0 && t[1].rc == 0, "iteration %d: ranks returned %d, %d", it, t[0].rc, t[1].rc);
	}
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_ALGO_HOST_TRANSPORT", "shm", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "20", 1);
	setenv("WEFT_CONFIG", "/dev/null", 1);
	Suite *s = suite_create("algo_host");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, direct_np2);
	tcase_add_test(tc, direct_np3);
	tcase_add_test(tc, pull_np3);
	tcase_add_test(tc, rsag_push_np3);
	tcase_add_test(tc, thread_ranks_destroy_after_allreduce);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
