/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin-level tests of the shm transport: the built plugin is dlopen'ed and
 * driven through its ops table by forked ranks, over both of its paths:
 * mapped segments (mem_alloc) and cross-memory attach (plain memory). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "testlib.h"
#include "tp_harness.h"
#ifndef WEFT_SHM_PLUGIN_PATH
#error "WEFT_SHM_PLUGIN_PATH must name the built plugin"
#endif

/* ------------------------------------------------ a minimal core for the plugin */
static const struct th_options opts = {.log_env = "WT_SHM_LOG"};

static void load_plugin(void)
{
	th_load_plugin(WEFT_SHM_PLUGIN_PATH, "shm", &opts);
}

/* --------------------------------------------------------- a 2-rank setup */
#define DATA_BYTES TH_DATA_BYTES
#define DATA_SLACK TH_DATA_SLACK
#define TOK_BYTES TH_TOK_BYTES

struct mp_arg {
	int sv[2];
	enum weft_peer_class cls;
	int mapped; /* 1: buffers from mem_alloc (segments), 0: plain memory (CMA),
		     * 2: segments, written with CMA (shm.map=0) */
};

static int setup(int rank, const struct mp_arg *a, struct th_side *s)
{
	int rc = th_side_open(rank, a->sv, s);
	if (rc)
		return rc;
	s->mapped = a->mapped;
	if (a->mapped) {
		void *dev;
		TH_REQ(th_ops->mem_alloc(s->tc, WEFT_MEM_HOST, DATA_BYTES + DATA_SLACK, (void **)&s->data, &dev) == 0,
		       "mem_alloc data");
		TH_REQ(dev == s->data, "host and device views differ for host memory");
		TH_REQ(th_ops->mem_alloc(s->tc, WEFT_MEM_HOST, TOK_BYTES, (void **)&s->tok, &dev) == 0, "mem_alloc tok");
		for (size_t i = 0; i < TOK_BYTES / 8; i++)
			TH_REQ(s->tok[i] == 0, "mem_alloc'd memory is not zero-filled");
		enum weft_mem_type t;
		TH_REQ(th_ops->mem_query(s->tc, s->data + 5, &t) == 0 && t == WEFT_MEM_HOST, "mem_query");
	} else if ((rc = th_side_alloc(s))) {
		return rc;
	}
	char paddr[512];
	uint32_t plen;
	if ((rc = th_side_register(s, rank)) || (rc = th_side_connect(s, rank, a->cls, 0, paddr, sizeof(paddr), &plen)))
		return rc;
	char desc[512];
	TH_REQ(th_ops->ep_describe(s->ep, desc, sizeof(desc)) == 0, "ep_describe");
	void *mp = NULL;
	rc = th_ops->mem_map(s->tc, s->rmh_data, &mp);
	TH_REQ(a->mapped == 1 ? rc == 0 && mp != NULL : rc == -ENOTSUP, "mem_map of the peer's data: %d", rc);
	if (getenv("WT_SHM_VERBOSE"))
		fprintf(stderr, "[rank %d] %s\n", rank, desc);
	return 0;
}

static int teardown(struct th_side *s)
{
	return th_side_close(s, false);
}

/* The shared cases (tests/tp_harness.c) on this transport's setup. */
static int rank_puts(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc || (rc = th_case_puts(&s, rank)))
		return rc;
	return teardown(&s);
}

static int rank_signal(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc || (rc = th_case_signal(&s, rank, true)))
		return rc;
	return teardown(&s);
}

/* The path the endpoint took is the one the buffers call for. */
static int rank_path(int rank, int nranks, void *arg)
{
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char desc[256], want[64];
	TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, 0, s.mh_data, 0, 16) == 0, "put");
	TH_REQ(th_ops->ep_describe(s.ep, desc, sizeof(desc)) == 0, "ep_describe");
	snprintf(want, sizeof(want), "shm peer=%d pid=", 1 - rank);
	TH_REQ(strstr(desc, want) == desc, "ep_describe '%s' lacks '%s'", desc, want);
	TH_REQ(strstr(desc, s.mapped == 1 ? "path=mapped" : "path=cma") != NULL, "ep_describe '%s': wrong path", desc);
	/* Out of bounds and misaligned tokens are refused, and the endpoint stays usable. */
	TH_REQ(th_ops->put(s.ep, s.rmh_data, DATA_BYTES + DATA_SLACK - 3, s.mh_data, 0, 4) == -EINVAL, "put past end");
	TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, DATA_BYTES + DATA_SLACK, 1) == -EINVAL, "local past end");
	TH_REQ(th_ops->signal(s.ep, s.rmh_tok, TOK_BYTES - 4, 1) == -EINVAL, "signal past end");
	TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 3, 1) == -EINVAL, "misaligned signal");
	TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, 0, s.mh_data, 0, 16) == 0, "put after refusals");
	return teardown(&s);
}

/* CMA to a process that is gone: -WEFT_ERR_PEER, at once, no hang. */
static int rank_peer_death(int rank, int nranks, void *arg)
{
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 1) {
		TH_REQ(th_recv_msg(s.fd, NULL, &m, 1, NULL) == 0, "recv");
		pid_t me = getpid();
		TH_REQ(th_send_msg(s.fd, &me, sizeof(me)) == 0, "send pid");
		_exit(0);
	}
	th_fill_random(s.data, 65536, 9);
	TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, 0, s.mh_data, 0, 65536) == 0, "first put");
	TH_REQ(th_send_msg(s.fd, "k", 1) == 0, "send");
	pid_t peer;
	TH_REQ(th_recv_msg(s.fd, NULL, &peer, sizeof(peer), NULL) == 0, "recv pid");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (kill(peer, 0) == 0) {
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		TH_REQ(t1.tv_sec - t0.tv_sec < 30, "rank 1 does not exit");
	}
	TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 65536) == -WEFT_ERR_PEER, "put to a dead peer");
	TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 8, 5) == -WEFT_ERR_PEER, "signal to a dead peer");
	TH_REQ(th_ops->disconnect(s.ep) == 0, "disconnect");
	th_ops->mem_release(s.tc, s.rmh_data);
	th_ops->mem_release(s.tc, s.rmh_tok);
	th_ops->mem_deregister(s.tc, s.mh_data);
	th_ops->mem_deregister(s.tc, s.mh_tok);
	th_ops->close(s.tc);
	return 0;
}

static void run_mp(wt_rank_fn fn, int mapped)
{
	load_plugin();
	struct mp_arg a = {.cls = WEFT_PEER_SAME_HOST, .mapped = mapped};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a.sv), 0);
	int failed = wt_fork_ranks(2, fn, &a, 240);
	close(a.sv[0]);
	close(a.sv[1]);
	ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
}

START_TEST(puts_mapped) { run_mp(rank_puts, 1); }
END_TEST
START_TEST(puts_cma) { run_mp(rank_puts, 0); }
END_TEST
START_TEST(signal_mapped) { run_mp(rank_signal, 1); }
END_TEST
START_TEST(signal_cma) { run_mp(rank_signal, 0); }
END_TEST
START_TEST(path_mapped) { run_mp(rank_path, 1); }
END_TEST
START_TEST(path_cma) { run_mp(rank_path, 0); }
END_TEST
START_TEST(peer_death_cma) { run_mp(rank_peer_death, 0); }
END_TEST
/* shm.map=0: segments are written with CMA too; the data arrives all the same. */
START_TEST(segments_without_map)
{
	setenv("WEFT_SHM_MAP", "0", 1);
	run_mp(rank_path, 2);
	run_mp(rank_signal, 2);
	unsetenv("WEFT_SHM_MAP");
}
END_TEST

/* Serializes a segment-backed region of this process into blob. */
static void make_blob(void *tc, void **mem, void **mh, unsigned char *blob, size_t *len)
{
	void *dev;
	ck_assert_int_eq(th_ops->mem_alloc(tc, WEFT_MEM_HOST, 8192, mem, &dev), 0);
	ck_assert_int_eq(th_ops->mem_register(tc, (char *)*mem + 64, 4096, WEFT_MEM_HOST, mh), 0);
	*len = 0;
	ck_assert_int_eq(th_ops->mem_serialize(tc, *mh, NULL, len), -ENOSPC);
	ck_assert_uint_eq(*len, 64);
	ck_assert_int_eq(th_ops->mem_serialize(tc, *mh, blob, len), 0);
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

START_TEST(import_rejects_malformed)
{
	load_plugin();
	void *tc, *mem, *mh, *rmh;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	unsigned char good[64], b[64];
	size_t len;
	make_blob(tc, &mem, &mh, good, &len);
	ck_assert_int_eq(th_ops->mem_import(tc, 1, good, len, &rmh), 0);
	ck_assert_int_eq(th_ops->mem_release(tc, rmh), 0);
	struct {
		size_t off;
		int width;
		uint64_t val;
		const char *what;
	} cases[] = {
		{0, 4, 0x12345678, "magic"},       {4, 4, 2, "version"},
		{8, 4, 0x6, "flags"},              {12, 4, 0, "pid 0"},
		{12, 4, 99999999, "pid range"},    {16, 8, 0, "base 0"},
		{24, 8, 0, "length 0"},            {24, 8, UINT64_MAX, "wrapping length"},
		{32, 8, 0, "segment id 0"},        {40, 4, 0x80000000u, "segment fd"},
		{44, 4, 1, "reserved"},            {48, 8, 4097, "segment length not a page multiple"},
		{48, 8, 0, "segment length 0"},    {56, 8, 8192, "region past its segment"},
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, good, sizeof(b));
		if (cases[i].width == 4) {
			uint32_t v = (uint32_t)cases[i].val;
			for (int k = 0; k < 4; k++)
				b[cases[i].off + (size_t)k] = (unsigned char)(v >> (8 * k));
		} else {
			put64(b + cases[i].off, cases[i].val);
		}
		ck_assert_msg(th_ops->mem_import(tc, 1, b, sizeof(b), &rmh) == -WEFT_ERR_PROTOCOL, "%s accepted",
			      cases[i].what);
	}
	/* Plain-memory flag with segment fields left set. */
	memcpy(b, good, sizeof(b));
	b[8] = 0;
	ck_assert_int_eq(th_ops->mem_import(tc, 1, b, sizeof(b), &rmh), -WEFT_ERR_PROTOCOL);
	for (size_t l = 0; l < sizeof(good); l += 7)
		ck_assert_int_eq(th_ops->mem_import(tc, 1, good, l, &rmh), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(th_ops->mem_import(tc, 1, NULL, 0, &rmh), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(th_ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(th_ops->mem_free(tc, mem, mem), 0);
	ck_assert_int_eq(th_ops->mem_alloc(tc, WEFT_MEM_CUDA, 4096, &mem, &mem), -ENOTSUP);
	ck_assert_int_eq(th_ops->mem_register(tc, good, sizeof(good), WEFT_MEM_CUDA, &mh), -ENOTSUP);
	th_ops->close(tc);
}
END_TEST

/* Two contexts in one process (SAME_PROCESS): writes are direct copies. */
START_TEST(same_process)
{
	load_plugin();
	void *tc[2], *mh[2], *rmh[2], *ep[2];
	unsigned char buf[2][4096], blob[64], addr[2][64];
	size_t len;
	memset(buf, 0, sizeof(buf));
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_open_ctx(r, &tc[r]), 0);
		ck_assert_int_eq(th_ops->mem_register(tc[r], buf[r], sizeof(buf[r]), WEFT_MEM_HOST, &mh[r]), 0);
	}
	for (int r = 0; r < 2; r++) {
		len = sizeof(blob);
		ck_assert_int_eq(th_ops->mem_serialize(tc[1 - r], mh[1 - r], blob, &len), 0);
		ck_assert_int_eq(th_ops->mem_import(tc[r], 1 - r, blob, len, &rmh[r]), 0);
		struct weft_tp_peer p = {.size = sizeof(p), .rank = 1 - r, .peer_class = WEFT_PEER_SAME_PROCESS};
		len = sizeof(addr[r]);
		ck_assert_int_eq(th_ops->endpoint(tc[r], &p, addr[r], &len, &ep[r]), 0);
	}
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(th_ops->connect(ep[r], addr[1 - r], sizeof(addr[1 - r])), 0);
	memset(buf[0] + 100, 0x5C, 777);
	ck_assert_int_eq(th_ops->put(ep[0], rmh[0], 3, mh[0], 100, 777), 0);
	ck_assert_int_eq(th_ops->signal(ep[0], rmh[0], 4088, 42), 0);
	ck_assert_int_eq(th_ops->flush(ep[0]), 0);
	for (int i = 0; i < 777; i++)
		ck_assert_int_eq(buf[1][3 + i], 0x5C);
	ck_assert_int_eq(buf[1][2], 0);
	ck_assert_int_eq(buf[1][780], 0);
	uint64_t tok;
	memcpy(&tok, buf[1] + 4088, 8);
	ck_assert_uint_eq(tok, 42);
	void *mp;
	ck_assert_int_eq(th_ops->mem_map(tc[0], rmh[0], &mp), 0);
	ck_assert_ptr_eq(mp, buf[1]);
	/* A blob that claims this process but names memory no rank here
	 * registered (a peer steering this rank's writes into its own memory)
	 * is refused, and the registered region next to it still imports. */
	unsigned char stray[256];
	void *bad_rmh = NULL;
	len = sizeof(blob);
	ck_assert_int_eq(th_ops->mem_serialize(tc[1], mh[1], blob, &len), 0);
	put64(blob + 16, (uint64_t)(uintptr_t)stray);
	put64(blob + 24, sizeof(stray));
	ck_assert_int_eq(th_ops->mem_import(tc[0], 1, blob, len, &bad_rmh), -WEFT_ERR_PROTOCOL);
	put64(blob + 16, (uint64_t)(uintptr_t)buf[1] + 4000);
	put64(blob + 24, 200); /* runs 104 bytes past the registered 4 KiB */
	ck_assert_int_eq(th_ops->mem_import(tc[0], 1, blob, len, &bad_rmh), -WEFT_ERR_PROTOCOL);
	put64(blob + 24, 96);
	ck_assert_int_eq(th_ops->mem_import(tc[0], 1, blob, len, &bad_rmh), 0);
	ck_assert_int_eq(th_ops->mem_release(tc[0], bad_rmh), 0);
	/* A peer on another host is out of reach. */
	struct weft_tp_peer far = {.size = sizeof(far), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST};
	void *e2;
	len = sizeof(addr[0]);
	ck_assert_int_eq(th_ops->endpoint(tc[0], &far, addr[0], &len, &e2), -EHOSTUNREACH);
	/* Addresses that are malformed or from another kernel are refused. */
	struct weft_tp_peer near = {.size = sizeof(near), .rank = 1, .peer_class = WEFT_PEER_SAME_HOST};
	unsigned char a2[64];
	len = sizeof(a2);
	ck_assert_int_eq(th_ops->endpoint(tc[0], &near, a2, &len, &e2), 0);
	unsigned char bad[64];
	memcpy(bad, addr[1], 64);
	bad[30] ^= 1; /* boot id */
	ck_assert_int_eq(th_ops->connect(e2, bad, 64), -EHOSTUNREACH);
	ck_assert_int_eq(th_ops->connect(e2, addr[1], 63), -WEFT_ERR_PROTOCOL);
	memcpy(bad, addr[1], 64);
	bad[0] ^= 1;
	ck_assert_int_eq(th_ops->connect(e2, bad, 64), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(th_ops->disconnect(e2), 0);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_ops->disconnect(ep[r]), 0);
		ck_assert_int_eq(th_ops->mem_release(tc[r], rmh[r]), 0);
		ck_assert_int_eq(th_ops->mem_deregister(tc[r], mh[r]), 0);
		th_ops->close(tc[r]);
	}
}
END_TEST

START_TEST(describe_and_probe)
{
	load_plugin();
	struct weft_tp_device d[2];
	int n = 0;
	ck_assert_int_eq(th_ops->probe(d, &n), -ENOSPC);
	ck_assert_int_eq(n, 1);
	n = 2;
	ck_assert_int_eq(th_ops->probe(d, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(d[0].link, "shm");
	ck_assert(d[0].latency_us > 0 && d[0].latency_us < 1);
	ck_assert(d[0].bandwidth_gbps > 0);
	ck_assert_uint_eq(d[0].peer_classes, (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST));
	ck_assert_uint_eq(d[0].mem_types, 1u << WEFT_MEM_HOST);
	char buf[128];
	ck_assert_int_eq(th_ops->describe(NULL, buf, sizeof(buf)), 0);
	void *tc;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(th_ops->describe(tc, buf, sizeof(buf)), 0);
	ck_assert_ptr_nonnull(strstr(buf, "map=1 cma=1"));
	th_ops->close(tc);
	setenv("WEFT_SHM_MAP", "0", 1);
	setenv("WEFT_SHM_CMA", "0", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_SHM_MAP");
	unsetenv("WEFT_SHM_CMA");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shm");
	TCase *single = tcase_create("single");
	tcase_add_test(single, import_rejects_malformed);
	tcase_add_test(single, same_process);
	tcase_add_test(single, describe_and_probe);
	suite_add_tcase(s, single);
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, 280);
	tcase_add_test(mp, puts_mapped);
	tcase_add_test(mp, puts_cma);
	tcase_add_test(mp, signal_mapped);
	tcase_add_test(mp, signal_cma);
	tcase_add_test(mp, path_mapped);
	tcase_add_test(mp, path_cma);
	tcase_add_test(mp, peer_death_cma);
	tcase_add_test(mp, segments_without_map);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
