/* SPDX-License-Identifier: Apache-2.0 */
/* Two "hosts" on one machine: network namespaces joined by a veth pair, one
 * rank in each, the bootstrap on the veth addresses and a connection through
 * the transport named by WEFT_TEST_TRANSPORT (ofi or ucx) that must really run
 * over tcp on the veth, not shared memory and not loopback. Needs root and
 * `ip netns`; skips (77) without them unless WEFT_REQUIRE_NETNS=1. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#include "netns_lib.h"
#include "testlib.h"

static struct wt_netns g_ns;
static const char *transport = "ucx";

static unsigned char pat(uint64_t seed, uint64_t i)
{
	uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);
	x ^= x >> 29;
	x *= 0x94D049BB133111EBull;
	return (unsigned char)(x >> 32);
}


#define BUF (8u << 20)

static int rank_main(int rank, int n, void *argp)
{
	struct wt_id_pipe *a = argp;
	if (wt_netns_enter(&g_ns, rank) < 0)
		return 2;
	/* The bootstrap and the transport's tcp on this namespace's veth, nothing else. */
	wt_netns_env(&g_ns, rank);
	struct weft_unique_id id;
	ROK(wt_id_share(a, rank == 0, &id));
	weft_comm_t *comm;
	ROK(weft_comm_create(&id, n, rank, &comm));
	int peer = 1 - rank;
	weft_conn_t *conn;
	ROK(weft_connect(comm, peer, transport, &conn));
	unsigned char *src = NULL, *dst = NULL;
	RCHECK(posix_memalign((void **)&src, 4096, BUF) == 0 && posix_memalign((void **)&dst, 4096, BUF) == 0, "alloc");
	memset(dst, 0, BUF);
	for (uint64_t i = 0; i < BUF; i++)
		src[i] = pat((uint64_t)rank, i);
	weft_mem_t *msrc, *mdst;
	ROK(weft_mem_register(comm, src, BUF, WEFT_MEM_HOST, &msrc));
	ROK(weft_mem_register(comm, dst, BUF, WEFT_MEM_HOST, &mdst));
	weft_rmem_t *rdst;
	ROK(weft_mem_exchange(mdst, peer, &rdst));
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	ROK(weft_sem_create(comm, &sem));
	ROK(weft_sem_exchange(sem, peer, &rsem));
	/* Both directions at once: many puts at odd offsets, then the signal. */
	static const size_t sizes[] = {1, 7, 4097, 65539, (1u << 20) + 3, (5u << 20) + 11};
	uint64_t off = 1;
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		ROK(weft_put(conn, rdst, off, msrc, off, sizes[k]));
		off += sizes[k] + 13;
	}
	ROK(weft_signal(conn, rsem, 1));
	ROK(weft_sem_wait(sem, 1));
	off = 1;
	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		for (uint64_t i = off; i < off + sizes[k]; i++)
			RCHECK(dst[i] == pat((uint64_t)peer, i), "put %u: byte %llu differs when the signal arrived", k,
			       (unsigned long long)i);
		RCHECK(dst[off + sizes[k]] == 0, "put %u wrote past its end", k);
		off += sizes[k] + 13;
	}
	ROK(weft_flush(conn));
	char desc[1024];
	ROK(weft_conn_describe(conn, desc, sizeof(desc)));
	printf("netns: rank %d (%s in %s): %s\n", rank, g_ns.addr[rank], g_ns.ns[rank], desc);
	if (strcmp(transport, "ucx") == 0) {
		char want[64];
		snprintf(want, sizeof(want), "tcp/%s", g_ns.veth[rank]);
		RCHECK(strstr(desc, " classes=tcp ") && strstr(desc, want), "UCX did not carry this over tcp on %s: %s",
		       g_ns.veth[rank], desc);
		RCHECK(!strstr(desc, "tcp/lo"), "tcp over loopback across namespaces: %s", desc);
	} else {
		/* ofi: the provider must be tcp, and the peer's address the other
		 * namespace's veth address, so neither shm nor loopback carried it. */
		RCHECK(strstr(desc, "provider=tcp") != NULL, "libfabric did not use its tcp provider: %s", desc);
		RCHECK(strstr(desc, g_ns.addr[peer]) != NULL, "the peer is not reached at %s: %s", g_ns.addr[peer], desc);
	}
	ROK(weft_comm_barrier(comm));
	ROK(weft_rsem_release(rsem));
	ROK(weft_sem_destroy(sem));
	ROK(weft_rmem_release(rdst));
	ROK(weft_mem_deregister(msrc));
	ROK(weft_mem_deregister(mdst));
	ROK(weft_conn_close(conn));
	ROK(weft_comm_destroy(comm));
	free(src);
	free(dst);
	return 0;
}

START_TEST(transport_over_veth)
{
	struct wt_id_pipe a;
	ck_assert_int_eq(wt_id_pipe_open(&a, 1), 0);
	int bad = wt_fork_ranks(2, rank_main, &a, 100);
	wt_id_pipe_close(&a);
	ck_assert_msg(bad == 0, "%d rank(s) failed", bad);
}
END_TEST

int main(void)
{
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (t && *t)
		transport = t;
	int prc = wt_netns_prepare(&g_ns, transport);
	if (prc)
		return prc;
	/* The ranks share no host id (one per network namespace), so the
	 * transports treat each other as other hosts. */
	setenv("WEFT_CORE_PEER_TIMEOUT", "10", 0);
	Suite *s = suite_create("netns");
	TCase *tc = tcase_create("veth");
	tcase_set_timeout(tc, 110);
	tcase_add_test(tc, transport_over_veth);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_netns_cleanup(&g_ns);
	return rc;
}
