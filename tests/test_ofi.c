/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin-level tests of the ofi transport: the built plugin is dlopen'ed and
 * driven through its ops table by forked ranks over shm and tcp (loopback). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "testlib.h"
#include "tp_harness.h"

#ifndef WEFT_OFI_PLUGIN_PATH
#error "WEFT_OFI_PLUGIN_PATH must name the built plugin"
#endif

/* ------------------------------------------------ a minimal core for the plugin */
static const struct th_options opts = {.log_env = "WT_OFI_LOG"};

static void load_plugin(void)
{
	th_load_plugin(WEFT_OFI_PLUGIN_PATH, "ofi", &opts);
}

/* --------------------------------------------------------- a 2-rank setup */
#define DATA_BYTES TH_DATA_BYTES
#define DATA_SLACK TH_DATA_SLACK
#define TOK_BYTES TH_TOK_BYTES

struct mp_arg {
	int sv[2];
	enum weft_peer_class cls;
	const char *expect_prov;
};

static int setup(int rank, const struct mp_arg *a, struct th_side *s)
{
	int rc;
	if ((rc = th_side_open(rank, a->sv, s)) || (rc = th_side_alloc(s)) || (rc = th_side_register(s, rank)))
		return rc;
	char paddr[512];
	uint32_t plen;
	if ((rc = th_side_connect(s, rank, a->cls, 0, paddr, sizeof(paddr), &plen)))
		return rc;
	char desc[512];
	TH_REQ(th_ops->ep_describe(s->ep, desc, sizeof(desc)) == 0, "ep_describe");
	char want[64];
	snprintf(want, sizeof(want), "provider=%s ", a->expect_prov);
	TH_REQ(strstr(desc, want) != NULL, "ep_describe '%s' lacks '%s'", desc, want);
	/* tcp stays on the bootstrap's loopback address. */
	TH_REQ(strcmp(a->expect_prov, "tcp") != 0 || strstr(desc, "peer=fi_sockaddr_in://127.0.0.1:") != NULL,
	       "tcp endpoint not on loopback: %s", desc);
	if (getenv("WT_OFI_VERBOSE"))
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

/* Out-of-range puts and signals are refused, and leave the endpoint usable. */
static int rank_bounds(int rank, int nranks, void *arg)
{
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	if (rank == 0) {
		size_t dl = DATA_BYTES + DATA_SLACK;
		TH_REQ(th_ops->put(s.ep, s.rmh_data, dl - 10, s.mh_data, 0, 11) == -EINVAL, "remote overrun");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, dl + 1, s.mh_data, 0, 0) == -EINVAL, "remote offset past end");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, dl - 10, 11) == -EINVAL, "local overrun");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, SIZE_MAX) == -EINVAL, "huge length");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, UINT64_MAX, s.mh_data, 0, 2) == -EINVAL, "offset wrap");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_tok, 0, TOK_BYTES + 1) == -EINVAL, "local overrun tok");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, TOK_BYTES - 4, 1) == -EINVAL, "signal overrun");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, TOK_BYTES, 1) == -EINVAL, "signal past end");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 3, 1) == -EINVAL, "unaligned signal");
		TH_REQ(th_ops->flush(s.ep) == 0, "flush with nothing posted");
		/* The endpoint still works: last byte of the region, then a signal at its end. */
		s.data[0] = 0x5A;
		TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, dl - 1, s.mh_data, 0, 1) == 0, "edge put");
		TH_REQ(th_signal_retry(s.ep, s.tc, s.rmh_tok, TOK_BYTES - 8, 99) == 0, "edge signal");
		TH_REQ(th_spin_flush(s.ep, s.tc) == 0, "flush");
		TH_REQ(th_send_msg(s.fd, "d", 1) == 0, "send");
	} else {
		char m;
		TH_REQ(th_recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv");
		TH_REQ(s.data[DATA_BYTES + DATA_SLACK - 1] == 0x5A, "edge byte");
		TH_REQ(s.tok[TOK_BYTES / 8 - 1] == 99, "edge token");
		TH_REQ(s.data[DATA_BYTES + DATA_SLACK - 2] == 0xA5, "byte before edge");
	}
	return teardown(&s);
}

/* max_inflight=1 (set by the test): with the target not progressing, a second
 * put must see -EAGAIN; once the target progresses, everything completes. */
static int rank_inflight(int rank, int nranks, void *arg)
{
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 0) {
		char desc[512];
		TH_REQ(th_ops->describe(s.tc, desc, sizeof(desc)) == 0, "describe");
		bool dc = strstr(desc, "delivery_complete") != NULL;
		th_fill_random(s.data, 4096, 5);
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 4096) == 0, "first put");
		rc = th_ops->put(s.ep, s.rmh_data, 8192, s.mh_data, 0, 4096);
		/* Delivery-complete needs the target's progress, which it is not making. */
		if (dc)
			TH_REQ(rc == -EAGAIN, "second put with max_inflight=1: %d", rc);
		TH_REQ(th_ops->flush(s.ep) == -EAGAIN || !dc, "flush before the target progressed");
		TH_REQ(th_send_msg(s.fd, "g", 1) == 0, "send go");
		if (rc == -EAGAIN)
			TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, 8192, s.mh_data, 0, 4096) == 0, "second put");
		TH_REQ(th_spin_flush(s.ep, s.tc) == 0, "flush");
		TH_REQ(th_send_msg(s.fd, "d", 1) == 0, "send done");
	} else {
		/* Blocking read: no progress until rank 0 says so. */
		uint32_t l;
		TH_REQ(th_read_full(s.fd, &l, 4) == 0 && l == 1 && th_read_full(s.fd, &m, 1) == 0, "recv go");
		TH_REQ(th_recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv done");
		TH_REQ(th_check_random(s.data, 4096, 5) < 0 && th_check_random(s.data + 8192, 4096, 5) < 0, "data");
	}
	return teardown(&s);
}

/* Rank 1 dies without closing anything: rank 0's next operations must fail
 * with -WEFT_ERR_PEER within a bounded time, without crashing or hanging. */
static int rank_peer_death(int rank, int nranks, void *arg)
{
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 1) {
		TH_REQ(th_recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv");
		pid_t me = getpid();
		TH_REQ(th_send_msg(s.fd, &me, sizeof(me)) == 0, "send pid");
		_exit(0);
	}
	th_fill_random(s.data, 65536, 9);
	TH_REQ(th_put_retry(s.ep, s.tc, s.rmh_data, 0, s.mh_data, 0, 65536) == 0, "first put");
	TH_REQ(th_spin_flush(s.ep, s.tc) == 0, "first flush");
	TH_REQ(th_send_msg(s.fd, "k", 1) == 0, "send");
	/* Wait until rank 1 is gone (reaped by the test's parent). */
	pid_t peer;
	TH_REQ(th_recv_msg(s.fd, NULL, &peer, sizeof(peer), NULL) == 0, "recv pid");
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (kill(peer, 0) == 0) {
		usleep(10000);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		TH_REQ(t1.tv_sec - t0.tv_sec < 30, "rank 1 does not exit");
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		rc = th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 65536);
		if (rc == 0 || rc == -EAGAIN)
			rc = th_ops->flush(s.ep);
		if (rc != 0 && rc != -EAGAIN)
			break;
		th_ops->progress(s.tc);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		TH_REQ(t1.tv_sec - t0.tv_sec < 30, "no error 30 s after the peer died");
	}
	TH_REQ(rc == -WEFT_ERR_PEER, "after the peer died: %d", rc);
	/* The error sticks, and tearing down still works. */
	TH_REQ(th_ops->flush(s.ep) == -WEFT_ERR_PEER, "flush after failure");
	TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 8) == -WEFT_ERR_PEER, "put after failure");
	TH_REQ(th_ops->disconnect(s.ep) == 0, "disconnect");
	th_ops->mem_release(s.tc, s.rmh_data);
	th_ops->mem_release(s.tc, s.rmh_tok);
	th_ops->mem_deregister(s.tc, s.mh_data);
	th_ops->mem_deregister(s.tc, s.mh_tok);
	th_ops->close(s.tc);
	return 0;
}

static void run_mp(wt_rank_fn fn, enum weft_peer_class cls, const char *prov)
{
	load_plugin();
	struct mp_arg a = {.cls = cls, .expect_prov = prov};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a.sv), 0);
	int failed = wt_fork_ranks(2, fn, &a, 240);
	close(a.sv[0]);
	close(a.sv[1]);
	ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
}

START_TEST(puts_shm) { run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm"); }
END_TEST
START_TEST(puts_tcp) { run_mp(rank_puts, WEFT_PEER_OTHER_HOST, "tcp"); }
END_TEST
START_TEST(signal_shm) { run_mp(rank_signal, WEFT_PEER_SAME_HOST, "shm"); }
END_TEST
START_TEST(signal_tcp) { run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp"); }
END_TEST
START_TEST(signal_tcp_wait)
{
	/* The other mechanism on tcp: hold signals until earlier puts are delivered. */
	setenv("WEFT_OFI_SIGNAL_ORDER", "wait", 1);
	run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(signal_shm_wait)
{
	setenv("WEFT_OFI_SIGNAL_ORDER", "wait", 1);
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(shm_without_cma)
{
	/* shm's other data path: segments through bounce buffers instead of
	 * process_vm_writev (FI_SHM_DISABLE_CMA is libfabric's own variable). */
	setenv("FI_SHM_DISABLE_CMA", "1", 1);
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm");
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(peer_death_tcp) { run_mp(rank_peer_death, WEFT_PEER_OTHER_HOST, "tcp"); }
END_TEST
START_TEST(bounds_shm) { run_mp(rank_bounds, WEFT_PEER_SAME_HOST, "shm"); }
END_TEST
START_TEST(bounds_tcp) { run_mp(rank_bounds, WEFT_PEER_OTHER_HOST, "tcp"); }
END_TEST
START_TEST(inflight_tcp)
{
	setenv("WEFT_OFI_MAX_INFLIGHT", "1", 1);
	run_mp(rank_inflight, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(pinned_provider)
{
	/* ofi.provider=tcp carries a same-host peer over tcp. */
	setenv("WEFT_OFI_PROVIDER", "tcp", 1);
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "tcp");
}
END_TEST

/* ------------------------------------------------------ single-process tests */
static void *reg_ctx;
static void *reg_mh;
static unsigned char reg_buf[8192];

START_TEST(import_rejects_malformed)
{
	load_plugin();
	void *tc, *rmh;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	void *mh;
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &mh), 0);
	unsigned char blob[1024], bad[1100];
	size_t len = sizeof(blob);
	ck_assert_int_eq(th_ops->mem_serialize(tc, mh, blob, &len), 0);
	ck_assert_int_eq(th_ops->mem_import(tc, 1, blob, len, &rmh), 0);
	ck_assert_int_eq(th_ops->mem_release(tc, rmh), 0);
	/* Every truncation. */
	for (size_t l = 0; l < len; l++)
		ck_assert_int_eq(th_ops->mem_import(tc, 1, blob, l, &rmh), -WEFT_ERR_PROTOCOL);
	/* One extra byte. */
	memcpy(bad, blob, len);
	bad[len] = 0;
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len + 1, &rmh), -WEFT_ERR_PROTOCOL);
	/* Field by field: magic, version, count, total length, name, flags, key length, region length. */
	static const struct { size_t at; unsigned char v; } muts[] = {
		{0, 0x00}, {4, 0x02}, {6, 0x00}, {6, 0x03}, {7, 0x01}, {8, 0x01}, {12, 0x01},
		{16, 0x00}, {16, 'A'}, {31, 'x'}, {32, 0x80}, {36, 0x00}, {36, 0x09}, {39, 0x01},
		{48, 0x00}, {55, 0x00}, {56, 0x01},
	};
	for (unsigned i = 0; i < sizeof(muts) / sizeof(muts[0]); i++) {
		memcpy(bad, blob, len);
		if (muts[i].at == 48) {
			memset(bad + 48, 0, 8); /* region length 0 */
		} else if (muts[i].at == 55) {
			memset(bad + 48, 0xff, 8); /* region length that wraps past the address space */
			if (bad[32] & 0x01) /* virtually addressed */
				ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
			continue;
		} else if (muts[i].at == 56) {
			bad[56] ^= 0x01; /* raw base on a non-raw key, or a changed raw base */
			int rc = th_ops->mem_import(tc, 1, bad, len, &rmh);
			ck_assert_msg(rc == -WEFT_ERR_PROTOCOL || rc == 0, "rc %d", rc);
			if (rc == 0)
				th_ops->mem_release(tc, rmh);
			continue;
		} else {
			bad[muts[i].at] = muts[i].v;
		}
		if (memcmp(bad, blob, len) == 0)
			continue;
		ck_assert_msg(th_ops->mem_import(tc, 1, bad, len, &rmh) == -WEFT_ERR_PROTOCOL, "mutation %u accepted", i);
	}
	/* Random bytes, and random single-byte corruptions: never a crash. */
	uint64_t s = 12345;
	for (int i = 0; i < 2000; i++) {
		size_t l = th_xs_next(&s) % sizeof(bad);
		for (size_t k = 0; k < l; k++)
			bad[k] = (unsigned char)th_xs_next(&s);
		ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, l, &rmh), -WEFT_ERR_PROTOCOL);
		memcpy(bad, blob, len);
		bad[th_xs_next(&s) % len] ^= (unsigned char)(1u << (th_xs_next(&s) % 8));
		int rc = th_ops->mem_import(tc, 1, bad, len, &rmh);
		ck_assert_msg(rc == 0 || rc == -WEFT_ERR_PROTOCOL, "rc %d", rc);
		if (rc == 0)
			th_ops->mem_release(tc, rmh);
	}
	ck_assert_int_eq(th_ops->mem_deregister(tc, mh), 0);
	th_ops->close(tc);
}
END_TEST

START_TEST(register_args)
{
	load_plugin();
	ck_assert_int_eq(th_open_ctx(0, &reg_ctx), 0);
	ck_assert_int_eq(th_ops->mem_register(reg_ctx, reg_buf, sizeof(reg_buf), WEFT_MEM_CUDA, &reg_mh), -ENOTSUP);
	ck_assert_int_eq(th_ops->mem_register(reg_ctx, NULL, 8, WEFT_MEM_HOST, &reg_mh), -EINVAL);
	ck_assert_int_eq(th_ops->mem_register(reg_ctx, reg_buf, 0, WEFT_MEM_HOST, &reg_mh), -EINVAL);
	ck_assert_int_eq(th_ops->mem_register(reg_ctx, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &reg_mh), 0);
	size_t len = 4;
	unsigned char small[4];
	ck_assert_int_eq(th_ops->mem_serialize(reg_ctx, reg_mh, small, &len), -ENOSPC);
	ck_assert_uint_gt(len, 4);
	ck_assert_int_eq(th_ops->mem_deregister(reg_ctx, reg_mh), 0);
	ck_assert_int_eq(th_ops->mem_deregister(reg_ctx, NULL), 0);
	ck_assert_int_eq(th_ops->mem_release(reg_ctx, NULL), 0);
	ck_assert_int_eq(th_ops->disconnect(NULL), 0);
	th_ops->close(reg_ctx);
	th_ops->close(NULL);
}
END_TEST

START_TEST(connect_rejects_mismatch)
{
	load_plugin();
	void *tc, *ep_shm, *ep_tcp;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	struct weft_tp_peer local = {.size = sizeof(local), .rank = 1, .peer_class = WEFT_PEER_SAME_HOST,
				     .host_id = "testhost", .addr = "127.0.0.1"};
	struct weft_tp_peer remote = local;
	remote.peer_class = WEFT_PEER_OTHER_HOST;
	unsigned char a_shm[512], a_tcp[512], bad[600];
	size_t l_shm = sizeof(a_shm), l_tcp = sizeof(a_tcp);
	ck_assert_int_eq(th_ops->endpoint(tc, &local, a_shm, &l_shm, &ep_shm), 0);
	ck_assert_int_eq(th_ops->endpoint(tc, &remote, a_tcp, &l_tcp, &ep_tcp), 0);
	/* Providers differ: shm endpoint given a tcp address and vice versa. */
	ck_assert_int_eq(th_ops->connect(ep_shm, a_tcp, l_tcp), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(th_ops->connect(ep_tcp, a_shm, l_shm), -WEFT_ERR_PROTOCOL);
	for (size_t l = 0; l < l_tcp; l++)
		ck_assert_int_eq(th_ops->connect(ep_tcp, a_tcp, l), -WEFT_ERR_PROTOCOL);
	memcpy(bad, a_tcp, l_tcp);
	bad[l_tcp] = 0;
	ck_assert_int_eq(th_ops->connect(ep_tcp, bad, l_tcp + 1), -WEFT_ERR_PROTOCOL);
	memcpy(bad, a_shm, l_shm);
	bad[l_shm - 1] = 'x'; /* string address without its NUL */
	ck_assert_int_eq(th_ops->connect(ep_shm, bad, l_shm), -WEFT_ERR_PROTOCOL);
	memcpy(bad, a_shm, l_shm);
	bad[0] ^= 1;
	ck_assert_int_eq(th_ops->connect(ep_shm, bad, l_shm), -WEFT_ERR_PROTOCOL);
	/* Not connected: put and signal are refused. */
	ck_assert_int_eq(th_ops->flush(ep_shm), 0);
	ck_assert_int_eq(th_ops->disconnect(ep_shm), 0);
	ck_assert_int_eq(th_ops->disconnect(ep_tcp), 0);
	th_ops->close(tc);
}
END_TEST

/* A failure toward a peer names its rank, in one line: here the tcp address
 * vector refuses an IPv4-sized address that claims to be IPv6. */
START_TEST(connect_failure_names_rank)
{
	load_plugin();
	th_configure(&(struct th_options){.log_env = "WT_OFI_LOG", .capture = true});
	void *tc, *ep;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	struct weft_tp_peer remote = {.size = sizeof(remote), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST,
				      .host_id = "testhost", .addr = "127.0.0.1"};
	unsigned char a[512];
	size_t l = sizeof(a);
	ck_assert_int_eq(th_ops->endpoint(tc, &remote, a, &l, &ep), 0);
	/* The address ends with the provider's sockaddr_in. */
	unsigned char *sin = a + l - sizeof(struct sockaddr_in);
	sa_family_t fam;
	memcpy(&fam, sin + offsetof(struct sockaddr_in, sin_family), sizeof(fam));
	ck_assert_int_eq(fam, AF_INET);
	fam = AF_INET6;
	memcpy(sin + offsetof(struct sockaddr_in, sin_family), &fam, sizeof(fam));
	int errors0 = th_log_errors;
	ck_assert_int_eq(th_ops->connect(ep, a, l), -EINVAL);
	ck_assert_msg(th_log_errors - errors0 == 1, "%d error lines:\n%s", th_log_errors - errors0, th_logbuf);
	ck_assert_msg(th_log_has("[E] connect: fi_av_insert of rank 1's address into the tcp address vector failed: "),
		      "%s", th_logbuf);
	ck_assert_int_eq(th_ops->disconnect(ep), 0);
	th_ops->close(tc);
}
END_TEST

START_TEST(same_process_shm)
{
	/* Two contexts in one process (SAME_PROCESS), both progressed by this thread. */
	load_plugin();
	void *tc[2], *ep[2], *mh[2], *rmh[2];
	static unsigned char buf[2][1 << 20];
	unsigned char addr[2][512], blob[2][1024];
	size_t alen[2], blen[2];
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_open_ctx(r, &tc[r]), 0);
		ck_assert_int_eq(th_ops->mem_register(tc[r], buf[r], sizeof(buf[r]), WEFT_MEM_HOST, &mh[r]), 0);
		blen[r] = sizeof(blob[r]);
		ck_assert_int_eq(th_ops->mem_serialize(tc[r], mh[r], blob[r], &blen[r]), 0);
		struct weft_tp_peer p = {.size = sizeof(p), .rank = 1 - r, .peer_class = WEFT_PEER_SAME_PROCESS,
					 .host_id = "testhost", .addr = "127.0.0.1"};
		alen[r] = sizeof(addr[r]);
		ck_assert_int_eq(th_ops->endpoint(tc[r], &p, addr[r], &alen[r], &ep[r]), 0);
	}
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_ops->connect(ep[r], addr[1 - r], alen[1 - r]), 0);
		ck_assert_int_eq(th_ops->mem_import(tc[r], 1 - r, blob[1 - r], blen[1 - r], &rmh[r]), 0);
	}
	char desc[512];
	ck_assert_int_eq(th_ops->ep_describe(ep[0], desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "provider=shm ") != NULL, "%s", desc);
	th_fill_random(buf[0], sizeof(buf[0]), 77);
	memset(buf[1], 0, sizeof(buf[1]));
	ck_assert_int_eq(th_put_retry(ep[0], tc[0], rmh[0], 1, mh[0], 1, sizeof(buf[0]) - 1), 0);
	ck_assert_int_eq(th_signal_retry(ep[0], tc[0], rmh[0], 0, 0x1122334455667788ull), 0);
	int rc;
	while ((rc = th_ops->flush(ep[0])) == -EAGAIN)
		ck_assert_int_eq(th_ops->progress(tc[1]), 0);
	ck_assert_int_eq(rc, 0);
	uint64_t tok;
	memcpy(&tok, buf[1], 8);
	ck_assert_uint_eq(tok, 0x1122334455667788ull);
	ck_assert_int_eq(memcmp(buf[0] + 8, buf[1] + 8, sizeof(buf[0]) - 8), 0);
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
	char buf[1024];
	ck_assert_int_eq(th_ops->describe(NULL, buf, sizeof(buf)), 0);
	ck_assert_msg(strstr(buf, "provider=shm fabric=") && strstr(buf, "provider=tcp fabric="), "%s", buf);
	void *tc;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(th_ops->describe(tc, buf, sizeof(buf)), 0);
	/* Pinned to the bootstrap's 127.0.0.1: tcp is on loopback. */
	ck_assert_msg(strstr(buf, "provider=shm ") && strstr(buf, "provider=tcp fabric=127.0.0.1/32 domain=lo"), "%s",
		      buf);
	ck_assert_int_eq(th_ops->describe(tc, buf, 8), -ENOSPC);
	th_ops->close(tc);

	struct weft_tp_device devs[4];
	int n = 0;
	ck_assert_int_eq(th_ops->probe(devs, &n), -ENOSPC);
	ck_assert_int_eq(n, 2);
	n = 4;
	ck_assert_int_eq(th_ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(devs[0].link, "shm");
	ck_assert_uint_eq(devs[0].peer_classes, (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST));
	ck_assert_str_eq(devs[1].link, "tcp");
	ck_assert_uint_eq(devs[1].peer_classes, 1u << WEFT_PEER_OTHER_HOST);
	for (int i = 0; i < 2; i++)
		ck_assert_uint_eq(devs[i].mem_types, 1u << WEFT_MEM_HOST);
}
END_TEST

START_TEST(bad_parameters)
{
	load_plugin();
	void *tc = NULL;
	setenv("WEFT_OFI_MAX_INFLIGHT", "0", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_OFI_MAX_INFLIGHT");
	setenv("WEFT_OFI_SIGNAL_ORDER", "sometimes", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_OFI_SIGNAL_ORDER");
	setenv("WEFT_OFI_PROVIDER", "no such/provider", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	/* A provider that is set must open: no fall-back (the default local
	 * provider, shm, still falls back to the remote one where it is missing). */
	setenv("WEFT_OFI_PROVIDER", "nosuchprov", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_OFI_PROVIDER");
	setenv("WEFT_OFI_PROVIDER_LOCAL", "nosuchprov", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_OFI_PROVIDER_LOCAL");
	setenv("WEFT_OFI_PROVIDER_REMOTE", "nosuchprov2", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_OFI_PROVIDER_REMOTE");
	unsetenv("WEFT_OFI_PROVIDER_LOCAL");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ofi");
	TCase *single = tcase_create("single");
	tcase_add_test(single, register_args);
	tcase_add_test(single, import_rejects_malformed);
	tcase_add_test(single, connect_rejects_mismatch);
	tcase_add_test(single, connect_failure_names_rank);
	tcase_add_test(single, same_process_shm);
	tcase_add_test(single, describe_and_probe);
	tcase_add_test(single, bad_parameters);
	suite_add_tcase(s, single);
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, 280);
	tcase_add_test(mp, puts_shm);
	tcase_add_test(mp, puts_tcp);
	tcase_add_test(mp, signal_shm);
	tcase_add_test(mp, signal_tcp);
	tcase_add_test(mp, signal_tcp_wait);
	tcase_add_test(mp, signal_shm_wait);
	tcase_add_test(mp, shm_without_cma);
	tcase_add_test(mp, peer_death_tcp);
	tcase_add_test(mp, bounds_shm);
	tcase_add_test(mp, bounds_tcp);
	tcase_add_test(mp, inflight_tcp);
	tcase_add_test(mp, pinned_provider);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
