/* SPDX-License-Identifier: Apache-2.0 */
/* A host collective is complete when it returns: a broadcast root that goes
 * on to block in another communicator must not leave its receiver waiting.
 * Three ranks share comm A; ranks 0 and 1 also share comm B, over ofi (its
 * shm provider moves large writes in segments that the sender must progress). */
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id id_a, id_b;

#define BYTES (8u << 20)

static int rank_main(int rank, int nranks, void *arg)
{
	weft_comm_t *a = NULL, *b = NULL;
	if (weft_comm_create(&id_a, nranks, rank, &a) != 0)
		return 2;
	unsigned char *buf = NULL;
	if (rank < 2) {
		if (weft_comm_create(&id_b, 2, rank, &b) != 0)
			return 3;
		buf = malloc(BYTES);
		if (!buf)
			return 4;
		for (size_t i = 0; i < BYTES; i++)
			buf[i] = rank == 0 ? (unsigned char)(i * 131u + 7u) : 0;
		/* Root 0 sends; rank 1 receives. The root then blocks in comm A
		 * until rank 1 arrives there, which it does only with the data. */
		if (weft_broadcast(buf, buf, BYTES, WEFT_UINT8, 0, b, NULL) != 0)
			return 5;
		for (size_t i = 0; i < BYTES; i++)
			if (buf[i] != (unsigned char)(i * 131u + 7u))
				return 6;
	}
	int mine = rank, all[3];
	if (weft_comm_allgather(a, &mine, all, sizeof(mine)) != 0)
		return 7;
	weft_comm_destroy(b);
	weft_comm_destroy(a);
	free(buf);
	return 0;
}

START_TEST(broadcast_root_blocks_elsewhere)
{
	ck_assert_int_eq(weft_get_unique_id(&id_a), 0);
	ck_assert_int_eq(weft_get_unique_id(&id_b), 0);
	ck_assert_int_eq(wt_fork_ranks(3, rank_main, NULL, 60), 0);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_ALGO_HOST_TRANSPORT", "ofi", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "20", 1);
	Suite *s = suite_create("coll_complete");
	TCase *tc = tcase_create("complete");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, broadcast_root_blocks_elsewhere);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
