/* SPDX-License-Identifier: Apache-2.0 */
/* Device-channel API on hosts without a GPU transport (CI): the calls that
 * need one refuse with -ENOTSUP and say why, argument errors are -EINVAL,
 * port ids name what triggers carry, and a port whose device handle was
 * refused still serves host producers. Where a GPU transport opened, the
 * refusals are skipped (the GPU tests cover that side). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>
#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id g_id;

static int gpu_transport(weft_comm_t *comm)
{
	void *p = NULL;
	if (weft_mem_alloc(comm, WEFT_MEM_CUDA, 64, &p) != 0)
		return 0;
	weft_mem_free(comm, p);
	return 1;
}

static int rank_main(int rank, int n, void *arg)
{
	weft_comm_t *comm;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	int gpu = gpu_transport(comm);
	weft_sem_t *sem = NULL;
	RCHECK(weft_sem_create_on(comm, WEFT_MEM_TYPE_COUNT, &sem) == -EINVAL, "unknown type accepted");
	RCHECK(weft_sem_create_on(NULL, WEFT_MEM_HOST, &sem) == -EINVAL, "NULL comm accepted");
	if (!gpu)
		RCHECK(weft_sem_create_on(comm, WEFT_MEM_CUDA, &sem) == -ENOTSUP,
		       "a device semaphore without a GPU transport");
	/* A host semaphore made this way is an ordinary one. */
	ROK(weft_sem_create_on(comm, WEFT_MEM_HOST, &sem));
	RCHECK(weft_sem_value(sem) == 0, "fresh token %llu", (unsigned long long)weft_sem_value(sem));

	/* Host memory and a connection through whatever CPU transport is here. */
	size_t len = 1 << 16;
	unsigned char *buf = malloc(2 * len);
	RCHECK(buf, "malloc");
	memset(buf, rank + 1, len);
	memset(buf + len, 0, len);
	weft_mem_t *mem;
	weft_rmem_t *rmem;
	weft_rsem_t *rsem;
	weft_conn_t *conn;
	weft_port_t *port;
	int peer = 1 - rank;
	ROK(weft_mem_register(comm, buf, 2 * len, WEFT_MEM_HOST, &mem));
	ROK(weft_mem_exchange(mem, peer, &rmem));
	ROK(weft_sem_exchange(sem, peer, &rsem));
	ROK(weft_connect(comm, peer, NULL, &conn));
	ROK(weft_port_create(conn, 4, &port));

	uint32_t id = 99;
	RCHECK(weft_mem_port_id(NULL, &id) == -EINVAL && id == 99, "NULL mem");
	RCHECK(weft_rmem_port_id(rmem, NULL) == -EINVAL, "NULL out-pointer");
	uint32_t mid, rid, sid;
	ROK(weft_mem_port_id(mem, &mid));
	ROK(weft_rmem_port_id(rmem, &rid));
	ROK(weft_rsem_port_id(rsem, &sid));
	RCHECK(mid < (1u << 14) && rid < (1u << 14) && sid < (1u << 14), "ids %u %u %u", mid, rid, sid);

	struct weft_port_dev pd;
	weft_memchan_t *ch;
	RCHECK(weft_port_device_handle(NULL, &pd) == -EINVAL, "NULL port");
	RCHECK(weft_port_device_handle(port, NULL) == -EINVAL, "NULL dev");
	if (!gpu) {
		RCHECK(weft_port_device_handle(port, &pd) == -ENOTSUP, "device handle of a malloc'd FIFO");
		RCHECK(weft_memchan_create(conn, rmem, mem, NULL, rsem, &ch) == -ENOTSUP,
		       "a memory channel over %s", weft_conn_transport(conn));
	}
	/* The port still serves host producers after the refusal. */
	ROK(weft_port_put(port, rmem, len, mem, 0, len));
	ROK(weft_port_signal(port, rsem, 1));
	ROK(weft_port_flush(port));
	ROK(weft_sem_wait(sem, 1));
	for (size_t i = 0; i < len; i++)
		RCHECK(buf[len + i] == (unsigned char)(peer + 1), "byte %zu is %d", i, buf[len + i]);

	ROK(weft_comm_barrier(comm));
	ROK(weft_port_destroy(port));
	ROK(weft_comm_barrier(comm));
	/* Abort with device channels absent is harmless; later calls see it.
	 * Rank 0 aborts first: a rank that aborts leaves without a goodbye, and
	 * the peer's death, seen first, would be the status instead. */
	if (rank == 0) {
		ROK(weft_comm_abort(comm));
		RCHECK(weft_comm_status(comm) == -WEFT_ERR_ABORTED, "status after abort");
	} else {
		char x;
		RCHECK(weft_comm_recv(comm, 0, 7, &x, 1) < 0, "rank 0 answered after its abort");
		ROK(weft_comm_abort(comm));
		RCHECK(weft_comm_status(comm) != 0, "status after abort");
	}
	ROK(weft_comm_destroy(comm));
	free(buf);
	return 0;
}

START_TEST(devchan_without_gpu)
{
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_main, NULL, 60), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("devchan_nodev");
	TCase *tc = tcase_create("devchan");
	tcase_add_test(tc, devchan_without_gpu);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
