/* SPDX-License-Identifier: Apache-2.0 */
/* Plugin-level tests of the ucx transport: the built plugin is dlopen'ed and
 * driven through its ops table, in one process and by two forked ranks over
 * UCX's tcp (pinned to loopback) and shared-memory transports. */
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "testlib.h"
#include "tp_harness.h"

#ifndef WEFT_UCX_PLUGIN_PATH
#error "WEFT_UCX_PLUGIN_PATH must name the built plugin"
#endif

/* ------------------------------------------------ a minimal core for the plugin */
static const struct th_options opts = {
	.log_env = "WT_UCX_LOG", .default_section = "ucx", .check_reinit = true, .flush_timeout_s = 120,
};

static void load_plugin(void)
{
	th_load_plugin(WEFT_UCX_PLUGIN_PATH, "ucx", &opts);
}

/* ---------------------------------------------------------- rank helpers */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* --------------------------------------------------------- a 2-rank setup */
#define DATA_BYTES TH_DATA_BYTES
#define DATA_SLACK TH_DATA_SLACK
#define TOK_BYTES TH_TOK_BYTES

struct mp_arg {
	int sv[2];
	enum weft_peer_class cls;
	const char *expect_class; /* "tcp", "shm", or NULL for UCX's choice */
};

/* Checks what UCX really uses for the connection (after traffic, once wireup
 * has settled): every lane of the expected class. */
static int check_transport(struct th_side *s)
{
	char desc[1024];
	int rc = th_ops->ep_describe(s->ep, desc, sizeof(desc));
	TH_REQ(rc == 0, "ep_describe: %d", rc);
	if (getenv("WT_UCX_VERBOSE"))
		fprintf(stderr, "[rank %d] %s\n", th_rank, desc);
	TH_REQ(strstr(desc, "transports=") && !strstr(desc, "transports=none"), "no transports in '%s'", desc);
	const char *cls = ((const struct mp_arg *)s->arg)->expect_class;
	if (cls) {
		char want[64];
		snprintf(want, sizeof(want), " classes=%s ", cls);
		TH_REQ(strstr(desc, want) != NULL, "ep_describe '%s' lacks '%s'", desc, want);
	}
	/* Whatever UCX picked, tcp stays on loopback. */
	TH_REQ(!strstr(desc, "tcp/") || strstr(desc, "tcp/lo"), "tcp not on loopback: %s", desc);
	TH_REQ(!strstr(desc, "tcp/eth") && !strstr(desc, "tcp/en"), "tcp not on loopback: %s", desc);
	return 0;
}

static int setup(int rank, const struct mp_arg *a, struct th_side *s)
{
	int rc;
	if ((rc = th_side_open(rank, a->sv, s)))
		return rc;
	s->arg = a;
	char paddr[8192];
	uint32_t plen;
	if ((rc = th_side_alloc(s)) || (rc = th_side_register(s, rank)) ||
	    (rc = th_side_connect(s, rank, a->cls, 24, paddr, sizeof(paddr), &plen)))
		return rc;
	TH_REQ(th_ops->connect(s->ep, paddr, plen) == -EINVAL, "second connect accepted");
	return 0;
}

static int teardown(struct th_side *s)
{
	return th_side_close(s, true);
}

/* The shared cases (tests/tp_harness.c) on ucx; rank 0 then checks which
 * UCX transport carried them. The signal case does not flush after the
 * signal: the signal alone must carry the data out. */
static int rank_puts(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc || (rc = th_case_puts(&s, rank)))
		return rc;
	if (rank == 0 && (rc = check_transport(&s)) != 0)
		return rc;
	return teardown(&s);
}

static int rank_signal(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc || (rc = th_case_signal(&s, rank, false)) || (rc = th_case_signal_burst(&s, rank)))
		return rc;
	if (rank == 0 && (rc = check_transport(&s)) != 0)
		return rc;
	return teardown(&s);
}

/* Out-of-range puts and signals are refused, and leave the endpoint usable. */
static int rank_bounds(int rank, int nranks, void *arg)
{
	(void)nranks;
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
		TH_REQ(th_ops->put(s.ep, NULL, 0, s.mh_data, 0, 1) == -EINVAL, "NULL remote");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, NULL, 0, 1) == -EINVAL, "NULL local");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, TOK_BYTES - 4, 1) == -EINVAL, "signal overrun");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, TOK_BYTES, 1) == -EINVAL, "signal past end");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, UINT64_MAX - 3, 1) == -EINVAL, "signal offset wrap");
		TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 3, 1) == -EINVAL, "unaligned signal");
		TH_REQ(th_ops->flush(s.ep) == 0, "flush with nothing posted");
		TH_REQ(th_ops->put(s.ep, s.rmh_data, dl, s.mh_data, 0, 0) == 0, "empty put at the end");
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
 * signal behind an unflushed put must see -EAGAIN, and flush must not report
 * completion; once the target progresses, everything completes. */
static int rank_inflight(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct th_side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 0) {
		th_fill_random(s.data, 1 << 20, 5);
		TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 1 << 20) == 0, "first put");
		/* The put may complete locally at once; the signal waits for its
		 * remote completion, which needs the (sleeping) target over tcp. */
		rc = th_ops->signal(s.ep, s.rmh_tok, 0, 1);
		TH_REQ(rc == 0 || rc == -EAGAIN, "signal: %d", rc);
		bool sig_posted = rc == 0;
		if (sig_posted)
			TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 8, 2) == -EAGAIN, "second signal with max_inflight=1");
		TH_REQ(th_ops->flush(s.ep) == -EAGAIN, "flush before the target progressed");
		TH_REQ(th_send_msg(s.fd, "g", 1) == 0, "send go");
		if (!sig_posted)
			TH_REQ(th_signal_retry(s.ep, s.tc, s.rmh_tok, 0, 1) == 0, "signal");
		TH_REQ(th_signal_retry(s.ep, s.tc, s.rmh_tok, 8, 2) == 0, "second signal");
		TH_REQ(th_spin_flush(s.ep, s.tc) == 0, "flush");
		TH_REQ(th_send_msg(s.fd, "d", 1) == 0, "send done");
	} else {
		/* Blocking read: no progress until rank 0 says so. */
		uint32_t l;
		TH_REQ(th_read_full(s.fd, &l, 4) == 0 && l == 1 && th_read_full(s.fd, &m, 1) == 0, "recv go");
		TH_REQ(th_recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv done");
		TH_REQ(th_check_random(s.data, 1 << 20, 5) < 0, "data");
		TH_REQ(s.tok[0] == 1 && s.tok[1] == 2, "tokens %llu %llu", (unsigned long long)s.tok[0],
		    (unsigned long long)s.tok[1]);
	}
	return teardown(&s);
}

/* Rank 1 dies without closing anything: rank 0's next operations must fail
 * with -WEFT_ERR_PEER within a bounded time, without crashing or hanging. */
static int rank_peer_death(int rank, int nranks, void *arg)
{
	(void)nranks;
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
	double t0 = now_s();
	while (kill(peer, 0) == 0) {
		usleep(10000);
		TH_REQ(now_s() - t0 < 30, "rank 1 does not exit");
	}
	t0 = now_s();
	int prc = 0, errors0 = th_log_errors;
	for (;;) {
		rc = th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 65536);
		if (rc == 0 || rc == -EAGAIN)
			rc = th_ops->signal(s.ep, s.rmh_tok, 0, 5);
		if (rc == 0 || rc == -EAGAIN)
			rc = th_ops->flush(s.ep);
		if (rc != 0 && rc != -EAGAIN)
			break;
		int p = th_ops->progress(s.tc);
		if (p < 0 && prc == 0)
			prc = p;
		TH_REQ(now_s() - t0 < 60, "no error 60 s after the peer died");
	}
	TH_REQ(rc == -WEFT_ERR_PEER, "after the peer died: %d", rc);
	TH_REQ(prc == 0 || prc == -WEFT_ERR_PEER, "progress reported %d", prc);
	/* One failure, at most one error line however many ops ran into it;
	 * exactly one where the plugin itself finds the process gone (shm). UCX's
	 * own detection may come while the endpoint is idle (an info line). */
	const char *cls = ((const struct mp_arg *)arg)->expect_class;
	int lines = th_log_errors - errors0;
	TH_REQ(lines <= 1 && (lines == 1 || !cls || strcmp(cls, "shm") != 0), "%d error lines for the peer's death",
	       lines);
	/* The error sticks, and tearing down still works. */
	TH_REQ(th_ops->flush(s.ep) == -WEFT_ERR_PEER, "flush after failure");
	TH_REQ(th_ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 8) == -WEFT_ERR_PEER, "put after failure");
	TH_REQ(th_ops->signal(s.ep, s.rmh_tok, 0, 6) == -WEFT_ERR_PEER, "signal after failure");
	char desc[512];
	TH_REQ(th_ops->ep_describe(s.ep, desc, sizeof(desc)) == 0 && strstr(desc, "state=failed"), "describe: %s", desc);
	/* progress reports a failure once (unless put/signal/flush got it first). */
	rc = th_ops->progress(s.tc);
	TH_REQ(rc == 0 || (prc == 0 && rc == -WEFT_ERR_PEER), "progress after the failure: %d", rc);
	TH_REQ(th_ops->progress(s.tc) == 0, "progress after the failure was reported");
	t0 = now_s();
	TH_REQ(th_ops->disconnect(s.ep) == 0, "disconnect");
	th_ops->mem_release(s.tc, s.rmh_data);
	th_ops->mem_release(s.tc, s.rmh_tok);
	th_ops->mem_deregister(s.tc, s.mh_data);
	th_ops->mem_deregister(s.tc, s.mh_tok);
	th_ops->close(s.tc);
	TH_REQ(now_s() - t0 < 10, "teardown after the failure took %.1f s", now_s() - t0);
	return 0;
}

/* Each test fixes its UCX transports through the plugin's parameters (the
 * env names are the core's, WEFT_UCX_*): tcp always on loopback. */
static void use_tls(const char *tls)
{
	if (tls)
		setenv("WEFT_UCX_TLS", tls, 1);
	else
		unsetenv("WEFT_UCX_TLS");
	setenv("WEFT_UCX_NET_DEVICES", "lo", 1);
}

static void run_mp(wt_rank_fn fn, enum weft_peer_class cls, const char *expect_class)
{
	load_plugin();
	struct mp_arg a = {.cls = cls, .expect_class = expect_class};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a.sv), 0);
	int failed = wt_fork_ranks(2, fn, &a, 240);
	close(a.sv[0]);
	close(a.sv[1]);
	ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
}

START_TEST(puts_tcp)
{
	use_tls("tcp");
	run_mp(rank_puts, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(puts_shm)
{
	use_tls("sm,self");
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(puts_default)
{
	/* UCX's own choice of transports (tcp kept on loopback). */
	use_tls(NULL);
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, NULL);
}
END_TEST
START_TEST(puts_shm_posix_only)
{
	/* shm's other data path: copies through posix segments, no CMA. */
	use_tls("posix,self");
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(signal_tcp)
{
	use_tls("tcp");
	run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(signal_shm)
{
	use_tls("sm,self");
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(signal_default)
{
	use_tls(NULL);
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, NULL);
}
END_TEST
START_TEST(signal_tcp_fence)
{
	/* The other ordering mechanism: ucp_worker_fence instead of a flush. */
	use_tls("tcp");
	setenv("WEFT_UCX_SIGNAL_ORDER", "fence", 1);
	run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(bounds_tcp)
{
	use_tls("tcp");
	run_mp(rank_bounds, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(bounds_shm)
{
	use_tls("sm,self");
	run_mp(rank_bounds, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(inflight_tcp)
{
	use_tls("tcp");
	setenv("WEFT_UCX_MAX_INFLIGHT", "1", 1);
	run_mp(rank_inflight, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(peer_death_tcp)
{
	use_tls("tcp");
	run_mp(rank_peer_death, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(peer_death_default)
{
	/* Same host: shared memory, which UCX does not watch; the plugin does. */
	use_tls(NULL);
	run_mp(rank_peer_death, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(peer_death_peer_mode)
{
	/* error_mode=peer toward a same-host peer: UCX leaves shared memory out
	 * and detects the death itself. */
	use_tls(NULL);
	setenv("WEFT_UCX_ERROR_MODE", "peer", 1);
	run_mp(rank_peer_death, WEFT_PEER_SAME_HOST, "tcp");
}
END_TEST

/* ------------------------------------------------------ single-process tests */
static unsigned char reg_buf[8192];

START_TEST(import_rejects_malformed)
{
	load_plugin();
	use_tls(NULL);
	void *tc, *rmh, *mh;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &mh), 0);
	unsigned char blob[4096], bad[4200];
	size_t len = sizeof(blob);
	ck_assert_int_eq(th_ops->mem_serialize(tc, mh, blob, &len), 0);
	ck_assert_uint_gt(len, 32);
	ck_assert_int_eq(th_ops->mem_import(tc, 1, blob, len, &rmh), 0);
	ck_assert_int_eq(th_ops->mem_release(tc, rmh), 0);
	/* Every truncation, and one extra byte. */
	for (size_t l = 0; l < len; l++)
		ck_assert_int_eq(th_ops->mem_import(tc, 1, blob, l, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	bad[len] = 0;
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len + 1, &rmh), -WEFT_ERR_PROTOCOL);
	/* Field by field: magic, version, reserved, key length, reserved, address,
	 * region length, key memory type. */
	static const struct {
		size_t at;
		unsigned char xor;
	} muts[] = {
		{0, 0xff}, {3, 0x01}, {4, 0x01}, {5, 0x80}, {6, 0x01}, {7, 0x80}, {8, 0x01}, {9, 0x01},
		{11, 0x80}, {12, 0x01}, {15, 0x80}, {32 + 8, 0x01},
	};
	for (unsigned i = 0; i < sizeof(muts) / sizeof(muts[0]); i++) {
		memcpy(bad, blob, len);
		bad[muts[i].at] ^= muts[i].xor;
		ck_assert_msg(th_ops->mem_import(tc, 1, bad, len, &rmh) == -WEFT_ERR_PROTOCOL, "mutation %u accepted", i);
	}
	memcpy(bad, blob, len);
	memset(bad + 16, 0, 8); /* address 0 */
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 24, 0, 8); /* zero length */
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 24, 0xff, 8); /* wraps past the address space */
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 32, 0xff, 8); /* key naming 64 memory domains it does not carry */
	ck_assert_int_eq(th_ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	/* Random bytes, and random single-bit corruptions: never a crash. */
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
	use_tls(NULL);
	void *tc, *mh;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HIP, &mh), -ENOTSUP);
	ck_assert_int_eq(th_ops->mem_register(tc, NULL, 8, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, 0, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(th_ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &mh), 0);
	size_t len = 4;
	unsigned char small[4];
	ck_assert_int_eq(th_ops->mem_serialize(tc, mh, small, &len), -ENOSPC);
	ck_assert_uint_gt(len, 32);
	ck_assert_int_eq(th_ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(th_ops->mem_deregister(tc, NULL), 0);
	ck_assert_int_eq(th_ops->mem_release(tc, NULL), 0);
	ck_assert_int_eq(th_ops->disconnect(NULL), 0);
	ck_assert_int_eq(th_ops->flush(NULL), -EINVAL);
	ck_assert_int_eq(th_ops->progress(NULL), -EINVAL);
	th_ops->close(tc);
	th_ops->close(NULL);
}
END_TEST

START_TEST(connect_rejects_malformed)
{
	load_plugin();
	use_tls(NULL);
	void *tc, *ep;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	struct weft_tp_peer p = {.size = sizeof(p), .rank = 1, .peer_class = WEFT_PEER_SAME_HOST,
				 .host_id = "testhost", .addr = "127.0.0.1"};
	unsigned char a[8192], bad[8300];
	size_t l = sizeof(a);
	ck_assert_int_eq(th_ops->endpoint(tc, &p, a, &l, &ep), 0);
	for (size_t k = 0; k < l; k += (k < 64 ? 1 : 37))
		ck_assert_int_eq(th_ops->connect(ep, a, k), -WEFT_ERR_PROTOCOL);
	memcpy(bad, a, l);
	bad[l] = 0;
	ck_assert_int_eq(th_ops->connect(ep, bad, l + 1), -WEFT_ERR_PROTOCOL);
	/* magic, version, reserved, address length */
	static const size_t at[] = {0, 3, 4, 5, 6, 7, 8, 9, 11};
	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		memcpy(bad, a, l);
		bad[at[i]] ^= 0x01;
		ck_assert_msg(th_ops->connect(ep, bad, l) == -WEFT_ERR_PROTOCOL, "mutation at %zu accepted", at[i]);
	}
	memcpy(bad, a, l);
	memset(bad + 12, 0, 4); /* process id 0 */
	ck_assert_int_eq(th_ops->connect(ep, bad, l), -WEFT_ERR_PROTOCOL);
	memset(bad + 12, 0xff, 4); /* negative process id */
	ck_assert_int_eq(th_ops->connect(ep, bad, l), -WEFT_ERR_PROTOCOL);
	struct weft_tp_peer q = p;
	q.peer_class = (enum weft_peer_class)7;
	void *ep2;
	size_t l2 = sizeof(a);
	ck_assert_int_eq(th_ops->endpoint(tc, &q, a, &l2, &ep2), -EINVAL);
	/* Unconnected: nothing to flush; put and signal are refused. */
	ck_assert_int_eq(th_ops->flush(ep), 0);
	char desc[256];
	ck_assert_int_eq(th_ops->ep_describe(ep, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "state=unconnected"), "%s", desc);
	ck_assert_int_eq(th_ops->disconnect(ep), 0);
	th_ops->close(tc);
}
END_TEST

/* Two contexts in one process, both progressed by this thread. */
static void same_process(const char *tls, const char *expect_class)
{
	load_plugin();
	use_tls(tls);
	void *tc[2], *ep[2], *mh[2], *rmh[2];
	static unsigned char buf[2][1 << 20];
	unsigned char addr[2][8192], blob[2][4096];
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
	th_fill_random(buf[0], sizeof(buf[0]), 77);
	memset(buf[1], 0, sizeof(buf[1]));
	int rc;
	while ((rc = th_ops->put(ep[0], rmh[0], 9, mh[0], 9, sizeof(buf[0]) - 9)) == -EAGAIN)
		th_ops->progress(tc[1]);
	ck_assert_int_eq(rc, 0);
	while ((rc = th_ops->signal(ep[0], rmh[0], 0, 0x1122334455667788ull)) == -EAGAIN)
		th_ops->progress(tc[1]);
	ck_assert_int_eq(rc, 0);
	double t0 = now_s();
	while ((rc = th_ops->flush(ep[0])) == -EAGAIN) {
		ck_assert_int_eq(th_ops->progress(tc[0]), 0);
		ck_assert_int_eq(th_ops->progress(tc[1]), 0);
		ck_assert_msg(now_s() - t0 < 60, "flush does not complete");
	}
	ck_assert_int_eq(rc, 0);
	uint64_t tok;
	memcpy(&tok, buf[1], 8);
	ck_assert_uint_eq(tok, 0x1122334455667788ull);
	ck_assert_int_eq(buf[1][8], 0);
	ck_assert_int_eq(memcmp(buf[0] + 9, buf[1] + 9, sizeof(buf[0]) - 9), 0);
	char desc[1024];
	ck_assert_int_eq(th_ops->ep_describe(ep[0], desc, sizeof(desc)), 0);
	if (getenv("WT_UCX_VERBOSE"))
		fprintf(stderr, "%s\n", desc);
	char want[64];
	snprintf(want, sizeof(want), " classes=%s ", expect_class);
	ck_assert_msg(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
	ck_assert_int_eq(th_ops->ep_describe(ep[0], desc, 8), -ENOSPC);
	/* Release the import before the endpoint, then the rest: any order works. */
	ck_assert_int_eq(th_ops->mem_release(tc[0], rmh[0]), 0);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_ops->disconnect(ep[r]), 0);
		if (r == 1)
			ck_assert_int_eq(th_ops->mem_release(tc[r], rmh[r]), 0);
		ck_assert_int_eq(th_ops->mem_deregister(tc[r], mh[r]), 0);
	}
	for (int r = 0; r < 2; r++)
		th_ops->close(tc[r]);
}

START_TEST(same_process_shm) { same_process("sm,self", "shm"); }
END_TEST
START_TEST(same_process_tcp) { same_process("tcp", "tcp"); }
END_TEST

START_TEST(describe_and_probe)
{
	load_plugin();
	use_tls(NULL);
	char buf[2048];
	ck_assert_int_eq(th_ops->describe(NULL, buf, sizeof(buf)), 0);
	ck_assert_msg(strstr(buf, "ucx=1.") && strstr(buf, " tls=default net_devices=lo signal=flush"), "%s", buf);
	void *tc;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(th_ops->describe(tc, buf, sizeof(buf)), 0);
	/* net_devices=lo: UCX offers tcp on loopback only. */
	ck_assert_msg(strstr(buf, "resources=") && strstr(buf, "tcp/lo") && !strstr(buf, "tcp/eth"), "%s", buf);
	ck_assert_int_eq(th_ops->describe(tc, buf, 8), -ENOSPC);
	th_ops->close(tc);
	use_tls("tcp");
	ck_assert_int_eq(th_ops->describe(NULL, buf, sizeof(buf)), 0);
	ck_assert_msg(strstr(buf, " tls=tcp "), "%s", buf);

	struct weft_tp_device devs[4];
	int n = 0;
	ck_assert_int_eq(th_ops->probe(devs, &n), -ENOSPC);
	ck_assert_int_eq(n, 1);
	n = 4;
	ck_assert_int_eq(th_ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(devs[0].link, "tcp");
	ck_assert_str_eq(devs[0].name, "lo");
	ck_assert_uint_eq(devs[0].peer_classes, (1u << WEFT_PEER_CLASS_COUNT) - 1);
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);

	use_tls("sm,self,tcp");
	n = 4;
	ck_assert_int_eq(th_ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(devs[0].link, "shm");
	ck_assert_uint_eq(devs[0].peer_classes, (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST));
	ck_assert_str_eq(devs[1].link, "tcp");
	ck_assert_uint_eq(devs[1].peer_classes, 1u << WEFT_PEER_OTHER_HOST);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(devs[i].mem_types, 1u << WEFT_MEM_HOST);
}
END_TEST

START_TEST(bad_parameters)
{
	load_plugin();
	use_tls(NULL);
	void *tc = NULL;
	setenv("WEFT_UCX_MAX_INFLIGHT", "0", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_MAX_INFLIGHT");
	setenv("WEFT_UCX_SIGNAL_ORDER", "sometimes", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_SIGNAL_ORDER");
	setenv("WEFT_UCX_TLS", "tcp;rm -rf", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "NOEQUALS", 1);
	use_tls(NULL);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "TLS", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "RNDV_THRESH=notasize", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_OPTIONS");
	setenv("WEFT_UCX_ERROR_MODE", "sometimes", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_ERROR_MODE");
	/* A real UCX setting passes. */
	setenv("WEFT_UCX_OPTIONS", "UCX_RNDV_THRESH=64K;MAX_EAGER_LANES=1", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	th_ops->close(tc);
	unsetenv("WEFT_UCX_OPTIONS");
	/* A transport UCX does not have: nothing to open. */
	use_tls("nosuchtl");
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_NO_DEVICE);
	/* A device that does not exist, likewise. */
	use_tls("tcp");
	setenv("WEFT_UCX_NET_DEVICES", "nosuchdev0", 1);
	ck_assert_int_eq(th_open_ctx(0, &tc), -WEFT_ERR_NO_DEVICE);
	use_tls(NULL);
}
END_TEST

/* WT_UCX_ONLY=<name> runs one test (a debugging aid). */
#define ADD(tc, t)                                                             \
	do {                                                                   \
		const char *only_ = getenv("WT_UCX_ONLY");                      \
		if (!only_ || strcmp(only_, #t) == 0)                          \
			tcase_add_test(tc, t);                                 \
	} while (0)

int main(void)
{
	Suite *s = suite_create("ucx");
	TCase *single = tcase_create("single");
	tcase_set_timeout(single, 120);
	ADD(single, register_args);
	ADD(single, import_rejects_malformed);
	ADD(single, connect_rejects_malformed);
	ADD(single, same_process_shm);
	ADD(single, same_process_tcp);
	ADD(single, describe_and_probe);
	ADD(single, bad_parameters);
	suite_add_tcase(s, single);
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, 280);
	ADD(mp, puts_tcp);
	ADD(mp, puts_shm);
	ADD(mp, puts_default);
	ADD(mp, puts_shm_posix_only);
	ADD(mp, signal_tcp);
	ADD(mp, signal_shm);
	ADD(mp, signal_default);
	ADD(mp, signal_tcp_fence);
	ADD(mp, bounds_tcp);
	ADD(mp, bounds_shm);
	ADD(mp, inflight_tcp);
	ADD(mp, peer_death_tcp);
	ADD(mp, peer_death_default);
	ADD(mp, peer_death_peer_mode);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
