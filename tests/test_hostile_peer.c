/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile peers that hold the job secret: rank 0 is a test-only protocol
 * speaker (hostile_peer.c) that completes the handshakes and the rendezvous
 * like a real rank, exchanges one good message, and then puts a malformed
 * frame on its authenticated link: a bad MAC, a replayed frame, a frame cut
 * short (then silence, or a close), a length beyond WEFT_CORE_BOOTSTRAP_MAX_MSG,
 * a bad magic, an unknown type, a second peer hello. Rank 1 is a real weft rank
 * (weft_comm_create). It must drop rank 0: its calls fail with the error of
 * the case, its log names the problem, the message sent after the bad frame is
 * never delivered, it neither crashes nor hangs, and its destroy returns. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "hostile_peer.h"
#include "testlib.h"
#include "le.h"

#define JOB_TIMEOUT_S 60
#define PEER_TIMEOUT_S 3
#define MAX_MSG (64 << 10) /* rank 1's WEFT_CORE_BOOTSTRAP_MAX_MSG */
#define TAG 7

enum kind {
	K_BAD_MAC,
	K_REPLAY,
	K_TRUNC_SILENT,
	K_TRUNC_CLOSE,
	K_OVERSIZE,
	K_HUGE,
	K_WRAP,
	K_BAD_MAGIC,
	K_UNKNOWN_TYPE,
	K_PEER_HELLO_AGAIN,
};

struct hcase {
	enum kind kind;
	int err;          /* what rank 1's calls return */
	const char *why;  /* what its log says about rank 0 */
	double max_s;     /* how long rank 1 may take to give up on rank 0 */
	const char *max_msg; /* rank 1's WEFT_CORE_BOOTSTRAP_MAX_MSG, if not 64K */
};

static const struct hcase cases[] = {
	{K_BAD_MAC, -WEFT_ERR_PROTOCOL, "failed authentication", 5, NULL},
	{K_REPLAY, -WEFT_ERR_PROTOCOL, "failed authentication", 5, NULL},
	{K_TRUNC_SILENT, -WEFT_ERR_PEER, "silent for", PEER_TIMEOUT_S + 4, NULL},
	{K_TRUNC_CLOSE, -WEFT_ERR_PEER, "closed the connection", 5, NULL},
	{K_OVERSIZE, -WEFT_ERR_PROTOCOL, "announced a 65537-byte message", 5, NULL},
	{K_HUGE, -WEFT_ERR_PROTOCOL, "announced a 9223372036854775808-byte message", 5, NULL},
	/* With no practical limit configured, a length whose allocation size
	 * (length + MAC) wraps past 2^64: it used to get a 23-byte buffer, then a
	 * MAC read out of its bounds (core/bootstrap/link.c, weft__bs_link_pump). */
	{K_WRAP, -WEFT_ERR_PROTOCOL, "announced a 18446744073709551607-byte message", 5, "0xffffffffffffffff"},
	{K_BAD_MAGIC, -WEFT_ERR_PROTOCOL, "bad frame magic", 5, NULL},
	{K_UNKNOWN_TYPE, -WEFT_ERR_PROTOCOL, "unexpected message of type 77", 5, NULL},
	{K_PEER_HELLO_AGAIN, -WEFT_ERR_PROTOCOL, "unexpected message of type 5", 5, NULL},
};

static struct weft_unique_id g_id;
static char *g_dir;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Sends a frame built on the link (sequence advances). */
static int send_frame(struct hp_rank *r, int type, uint32_t tag, const void *p, size_t n)
{
	size_t len;
	uint8_t *f = hp_frame(&r->peer, type, HP_CLS_USER, tag, p, n, &len);
	int rc = f ? hp_send(r->peer.fd, f, len) : -ENOMEM;
	free(f);
	return rc;
}

/* Marks that this rank's process runs; see wait_forked. */
static void mark_forked(int rank, const struct hcase *c)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/forked-%d-%d", g_dir, rank, (int)c->kind);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

/* Rank 0 first talks to the root only once rank 1's process runs, i.e. once
 * the parent made its last fork. The root is a thread of the parent: a fork
 * taken while it works can leave the child a lock it held, and the sanitizer
 * allocator of this toolchain is not fork-safe (an ASan run caught rank 1
 * stuck in its first malloc that way). wt_fork_ranks forks rank 0, then 1. */
static int wait_forked(int peer, const struct hcase *c, double timeout_s)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/forked-%d-%d", g_dir, peer, (int)c->kind);
	for (double t0 = now_s(); now_s() - t0 < timeout_s; usleep(10 * 1000))
		if (access(path, F_OK) == 0)
			return 0;
	return -ETIMEDOUT;
}

/* Rank 0: the hostile peer. */
static int hostile(int rank, int n, const struct hcase *c)
{
	struct hp_rank r;
	RCHECK(wait_forked(1, c, 20) == 0, "rank 1's process never started");
	RCHECK(hp_join(&g_id, n, 20, &r) == 0, "joining as rank 0: %s", r.why);
	size_t len;
	uint8_t *first = hp_frame(&r.peer, HP_T_DATA, HP_CLS_USER, TAG, "first", 6, &len);
	RCHECK(first && hp_send(r.peer.fd, first, len) == 0, "sending the good message");
	/* Rank 1 answers once it has the good message: only then may the bad
	 * frame break the link (what was queued behind a broken link is not
	 * promised). Before that, its comm creation allgathers (the consistency
	 * check): this rank echoes what rank 1 sent, so the two look alike.
	 * Heartbeats come in between. */
	for (;;) {
		int type, cls;
		uint32_t tag;
		size_t plen;
		uint8_t *p = hp_recv_frame(&r, 20, &type, &cls, &tag, &plen);
		RCHECK(p, "waiting for rank 1's answer: %s", r.why);
		int echo = type == HP_T_DATA && cls != HP_CLS_USER, done = type == HP_T_DATA && cls == HP_CLS_USER;
		if (echo) {
			size_t elen;
			uint8_t *e = hp_frame(&r.peer, HP_T_DATA, cls, tag, p, plen, &elen);
			RCHECK(e && hp_send(r.peer.fd, e, elen) == 0, "echoing rank 1's collective message");
			free(e);
		}
		free(p);
		if (done) {
			RCHECK(tag == TAG, "rank 1 answered on tag %u", tag);
			break;
		}
		RCHECK(echo || type == HP_T_HEARTBEAT, "rank 1 sent type %d", type);
	}

	uint8_t *f = NULL;
	size_t flen = 0;
	uint8_t hello[16];
	switch (c->kind) {
	case K_BAD_MAC: /* the message rank 1 waits for, with one MAC byte flipped */
		f = hp_frame(&r.peer, HP_T_DATA, HP_CLS_USER, TAG + 1, "obey", 5, &flen);
		f[flen - 1] ^= 0x01;
		break;
	case K_REPLAY: /* the good message again, as it was: its sequence number is spent */
		f = malloc(len);
		memcpy(f, first, len);
		flen = len;
		break;
	case K_TRUNC_SILENT:
	case K_TRUNC_CLOSE: /* a header announcing 100 bytes, then 10 of them */
		f = hp_frame(&r.peer, HP_T_DATA, HP_CLS_USER, TAG + 1, "0123456789abcdefghij0123456789abcdefghij"
								    "0123456789abcdefghij0123456789abcdefghij"
								    "0123456789abcdefghij",
			     100, &flen);
		flen = HP_HDR_LEN + 10;
		break;
	case K_OVERSIZE:
	case K_HUGE:
	case K_WRAP: /* a header announcing more than rank 1 takes; no body follows */
		f = hp_frame(&r.peer, HP_T_DATA, HP_CLS_USER, TAG + 1, NULL, 0, &flen);
		put64(f + 16, c->kind == K_OVERSIZE ? MAX_MSG + 1ull : c->kind == K_HUGE ? 1ull << 63 : UINT64_MAX - 8);
		flen = HP_HDR_LEN;
		if (c->kind == K_WRAP) {
			/* Enough bytes for the 23-byte buffer the old code allocated. */
			memset(f + HP_HDR_LEN, 0, 23);
			flen += 23;
		}
		break;
	case K_BAD_MAGIC:
		f = hp_frame(&r.peer, HP_T_DATA, HP_CLS_USER, TAG + 1, "obey", 5, &flen);
		f[0] ^= 0xff;
		break;
	case K_UNKNOWN_TYPE: /* authenticated, of a type no rank sends */
		f = hp_frame(&r.peer, 77, HP_CLS_USER, TAG + 1, "obey", 5, &flen);
		break;
	case K_PEER_HELLO_AGAIN: /* authenticated: "I am rank 0" once more, on an established link */
		memset(hello, 0, sizeof(hello)); /* rank 0 */
		hello[4] = (uint8_t)n;           /* nranks */
		put64(hello + 8, r.tag);
		f = hp_frame(&r.peer, HP_T_PEER_HELLO, HP_CLS_USER, 0, hello, sizeof(hello), &flen);
		break;
	}
	free(first);
	RCHECK(f && hp_send(r.peer.fd, f, flen) == 0, "sending the bad frame");
	free(f);
	if (c->kind == K_TRUNC_CLOSE) {
		hp_close(&r);
		return 0;
	}
	if (c->kind != K_TRUNC_SILENT) {
		/* What rank 1 waits for, well formed: it must not arrive. (Rank 1 may
		 * have hung up already: then the send fails, which is fine.) */
		send_frame(&r, HP_T_DATA, TAG + 1, "obey", 5);
	}
	/* Rank 1 drops this link: it closes the connection. */
	double secs = 0;
	RCHECK(hp_wait_eof(r.peer.fd, c->max_s + 5, &secs) == 0, "rank 1 kept the link open for %.0f s after a bad frame",
	       c->max_s + 5);
	fprintf(stderr, "rank 0: rank 1 closed the link %.2f s after the bad frame\n", secs);
	hp_close(&r);
	return 0;
}

/* Rank 1: a real rank. Its log goes to a file the check reads. */
static int victim(int rank, int n, const struct hcase *c)
{
	mark_forked(rank, c);
	char path[4096];
	snprintf(path, sizeof(path), "%s/rank1-%d.log", g_dir, (int)c->kind);
	int lfd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int err_fd = dup(2);
	RCHECK(lfd >= 0 && err_fd >= 0 && dup2(lfd, 2) == 2, "cannot redirect the log to %s", path);
	close(lfd);
	setenv("WEFT_CORE_BOOTSTRAP_MAX_MSG", c->max_msg ? c->max_msg : "64K", 1);

	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(&g_id, n, rank, &comm);
	int ok = rc == 0;
	char got[8] = "";
	if (ok)
		ok = weft_comm_recv(comm, 0, TAG, got, 6) == 0 && strcmp(got, "first") == 0 &&
		     weft_comm_send(comm, 0, TAG, "ack", 4) == 0;
	double t0 = now_s();
	char obey[8] = "";
	int rrc = ok ? weft_comm_recv(comm, 0, TAG + 1, obey, 5) : 0;
	double took = now_s() - t0;
	int status = comm ? weft_comm_status(comm) : 0;
	int src = comm ? weft_comm_send(comm, 0, TAG + 2, "x", 2) : 0;
	double d0 = now_s();
	int drc = weft_comm_destroy(comm);
	double dtook = now_s() - d0;

	dup2(err_fd, 2);
	close(err_fd);
	char *log = wt_read_file(path);
	fprintf(stderr, "rank 1 log:\n%s", log ? log : "(none)\n");
	RCHECK(rc == 0, "weft_comm_create: %s", weft_strerror(rc));
	RCHECK(ok, "the good message did not arrive");
	RCHECK(rrc == c->err, "recv after the bad frame returned %d (%s), expected %d (%s)", rrc, weft_strerror(rrc),
	       c->err, weft_strerror(c->err));
	RCHECK(strcmp(obey, "obey") != 0, "the frame after the bad one was delivered");
	RCHECK(took < c->max_s, "giving up on rank 0 took %.1f s", took);
	RCHECK(status == c->err, "weft_comm_status is %d", status);
	RCHECK(src < 0, "a send to the dropped rank returned %d", src);
	RCHECK(drc == 0 && dtook < 10, "weft_comm_destroy: %d after %.1f s", drc, dtook);
	RCHECK(log && strstr(log, "peer rank 0") && strstr(log, c->why), "the log does not say '%s' about rank 0",
	       c->why);
	free(log);
	fprintf(stderr, "rank 1: dropped rank 0 after %.2f s: %s\n", took, weft_strerror(rrc));
	return 0;
}

static int rank_main(int rank, int n, void *arg)
{
	return rank == 0 ? hostile(rank, n, arg) : victim(rank, n, arg);
}

START_TEST(malformed_frame_after_rendezvous)
{
	const struct hcase *c = &cases[_i];
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_main, (void *)c, JOB_TIMEOUT_S), 0);
}
END_TEST

int main(void)
{
	unsetenv("WEFT_LOG_FILE");
	setenv("WEFT_CORE_PEER_TIMEOUT", "3", 1);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	g_dir = wt_mkdtemp("hostile-peer");
	char *conf = g_dir ? wt_write_file(g_dir, "weft.conf", "[transport]\nuse ofi\n") : NULL;
	if (!conf)
		return 1;
	setenv("WEFT_CONFIG", conf, 1);
	Suite *s = suite_create("hostile_peer");
	TCase *tc = tcase_create("authenticated-peer");
	tcase_set_timeout(tc, JOB_TIMEOUT_S + 20);
	tcase_add_loop_test(tc, malformed_frame_after_rendezvous, 0, (int)(sizeof(cases) / sizeof(cases[0])));
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	wt_rmdir(g_dir);
	free(conf);
	free(g_dir);
	return rc;
}
