/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile peers after the rendezvous: an authenticated rank that sends more
 * than the receiver allows (WEFT_CORE_BOOTSTRAP_MAX_MSG), tries the core's
 * reserved tags, or hands over forged, truncated or corrupted memory blobs is
 * refused with an error, never obeyed, and never crashes its peer.
 * (Strangers before and after the rendezvous: tests/test_bootstrap.c; arbitrary
 * frames through the reader and checks: fuzz/fuzz_bootstrap.c.) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/weft.h>

#include "testlib.h"

#define JOB_TIMEOUT_S 60
#define SMALL_MAX (64 << 10) /* rank 1's limit on one bootstrap message */
#define BIG (1 << 20)
#define TAG 7

static struct weft_unique_id g_id;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Rank 0 sends a message larger than rank 1 accepts. Rank 1 must drop the link
 * (an error from its recv, within the peer timeout) rather than take it. */
static int oversized(int rank, int n, void *arg)
{
	if (rank == 1)
		setenv("WEFT_CORE_BOOTSTRAP_MAX_MSG", "64K", 1);
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	/* Within the limit: delivered. */
	char small[256] = "fits";
	if (rank == 0) {
		RCHECK(weft_comm_send(comm, 1, TAG, small, sizeof(small)) == 0, "small send");
		/* Rank 1 confirms it took the small one before the big one can break
		 * the link (messages queued behind a broken link are not promised). */
		RCHECK(weft_comm_recv(comm, 1, TAG, small, sizeof(small)) == 0, "ack");
		char *big = calloc(1, BIG);
		RCHECK(big, "no memory");
		/* The send itself may succeed (queued) or fail once rank 1 hangs up. */
		weft_comm_send(comm, 1, TAG + 1, big, BIG);
		free(big);
		/* Rank 1 drops this rank: the next exchange fails here too. */
		double t0 = now_s();
		char x[8];
		rc = weft_comm_recv(comm, 1, TAG + 2, x, sizeof(x));
		RCHECK(rc < 0, "rank 1 answered after being sent an oversized message (rc %d)", rc);
		RCHECK(now_s() - t0 < 15, "the error took %.1f s", now_s() - t0);
	} else {
		char got[256];
		RCHECK(weft_comm_recv(comm, 0, TAG, got, sizeof(got)) == 0 && strcmp(got, "fits") == 0, "small recv");
		RCHECK(weft_comm_send(comm, 0, TAG, got, sizeof(got)) == 0, "ack");
		char *big = malloc(BIG);
		RCHECK(big, "no memory");
		double t0 = now_s();
		rc = weft_comm_recv(comm, 0, TAG + 1, big, BIG);
		free(big);
		RCHECK(rc < 0, "a %d-byte message over the %d-byte limit was delivered", BIG, SMALL_MAX);
		RCHECK(now_s() - t0 < 15, "the refusal took %.1f s", now_s() - t0);
		fprintf(stderr, "rank 1: oversized message refused: %s\n", weft_strerror(rc));
	}
	weft_comm_destroy(comm);
	return 0;
}

/* A rank may not speak on the core's own tags, so it cannot forge the core's
 * exchanges (memory blobs, connect offers) through the public API. */
static int reserved_tags(int rank, int n, void *arg)
{
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	char b[16] = {0};
	static const uint32_t tags[] = {0xFFFF0000u, 0xFFFF0001u, 0xFFFF0002u, 0xFFFF1000u, 0xFFFFFFFFu};
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		RCHECK(weft_comm_send(comm, 1 - rank, tags[i], b, sizeof(b)) == -EINVAL, "send on tag 0x%x", tags[i]);
		RCHECK(weft_comm_recv(comm, 1 - rank, tags[i], b, sizeof(b)) == -EINVAL, "recv on tag 0x%x", tags[i]);
	}
	/* And the comm still works. */
	RCHECK(weft_comm_barrier(comm) == 0, "barrier after the refusals");
	RCHECK(weft_comm_destroy(comm) == 0, "destroy");
	return 0;
}

/* Rank 0 registers memory and sends its blob; rank 1 imports every truncation
 * and header corruption of it (each must be refused as a protocol error), then
 * the real one, and writes through it to prove the comm is unharmed. */
static int forged_blobs(int rank, int n, void *arg)
{
	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	static unsigned char buf[4096];
	weft_mem_t *mem = NULL;
	RCHECK(weft_mem_register(comm, buf, sizeof(buf), WEFT_MEM_HOST, &mem) == 0, "register");
	unsigned char blob[8192];
	size_t len = sizeof(blob);
	uint32_t len32;
	if (rank == 0) {
		RCHECK(weft_mem_serialize(mem, blob, &len) == 0, "serialize");
		len32 = (uint32_t)len;
		RCHECK(weft_comm_send(comm, 1, TAG, &len32, sizeof(len32)) == 0, "send len");
		RCHECK(weft_comm_send(comm, 1, TAG, blob, len) == 0, "send blob");
	} else {
		RCHECK(weft_comm_recv(comm, 0, TAG, &len32, sizeof(len32)) == 0 && len32 <= sizeof(blob), "len");
		len = len32;
		RCHECK(weft_comm_recv(comm, 0, TAG, blob, len) == 0, "recv blob");
		weft_rmem_t *r = NULL;
		int refused = 0;
		for (size_t cut = 0; cut < len; cut++) {
			unsigned char *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
			RCHECK(copy, "no memory");
			memcpy(copy, blob, cut);
			rc = weft_mem_import(comm, 0, copy, cut, &r);
			free(copy);
			RCHECK(rc == -WEFT_ERR_PROTOCOL && r == NULL, "a blob cut to %zu of %zu bytes: rc %d", cut, len, rc);
			refused++;
		}
		/* Every byte of the core's header (magic, version, type, reserved,
		 * section count) and the first section header's reserved field. */
		static const size_t must_fail[] = {0, 1, 2, 3, 4, 5, 6, 7, 25, 26, 27, 28, 29, 30, 31, 68, 69, 70, 71};
		for (size_t i = 0; i < sizeof(must_fail) / sizeof(must_fail[0]); i++) {
			size_t at = must_fail[i];
			if (at >= len)
				continue;
			unsigned char copy[8192];
			memcpy(copy, blob, len);
			copy[at] ^= at == 6 || at == 7 ? 0x80 : 0x5a;
			rc = weft_mem_import(comm, 0, copy, len, &r);
			RCHECK(rc < 0 && r == NULL, "a blob with byte %zu corrupted was imported (rc %d)", at, rc);
			refused++;
		}
		fprintf(stderr, "rank 1: %d forged blobs refused\n", refused);
		RCHECK(weft_mem_import(comm, 0, blob, len, &r) == 0, "the real blob");
		RCHECK(weft_rmem_release(r) == 0, "release");
	}
	RCHECK(weft_comm_barrier(comm) == 0, "barrier");
	RCHECK(weft_mem_deregister(mem) == 0, "deregister");
	RCHECK(weft_comm_destroy(comm) == 0, "destroy");
	return 0;
}

static void run(wt_rank_fn fn)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, fn, NULL, JOB_TIMEOUT_S), 0);
}

START_TEST(oversized_message_dropped)
{
	run(oversized);
}
END_TEST

START_TEST(reserved_tags_refused)
{
	run(reserved_tags);
}
END_TEST

START_TEST(forged_blobs_refused)
{
	run(forged_blobs);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 1);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	char *dir = wt_mkdtemp("hostile");
	char *conf = dir ? wt_write_file(dir, "weft.conf", "[transport]\nuse ofi\n") : NULL;
	if (!conf)
		return 1;
	setenv("WEFT_CONFIG", conf, 1);
	Suite *s = suite_create("hostile");
	TCase *tc = tcase_create("after-rendezvous");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 20);
	tcase_add_test(tc, reserved_tags_refused);
	tcase_add_test(tc, oversized_message_dropped);
	tcase_add_test(tc, forged_blobs_refused);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_rmdir(dir);
	free(conf);
	free(dir);
	return rc;
}
