/* SPDX-License-Identifier: Apache-2.0 */
/* A test-only bootstrap speaker (see hostile_peer.h). It follows core/bootstrap/
 * byte for byte: handshake H1/H2/H3 with HMAC-SHA256 proofs keyed by the job
 * secret, per-direction keys, frames MAC'd over header, payload and sequence
 * number, the hello to the root and the peer hello. The constants repeat the
 * core's (they are private to it); should the protocol change, hp_join fails
 * and says at which step. */
#define _GNU_SOURCE
#include "hostile_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h" /* struct weft__unique_id_layout, WEFT__BOOTSTRAP_VERSION */
#include "sha256.h"
#include "le.h"

#define FRAME_MAGIC 0x4d544657u
#define HS_MAGIC 0x48544657u
#define H1_LEN 48
#define H2_LEN 72
#define H3_LEN 32
#define HELLO_LEN 92
#define ENTRY_LEN 80
#define TABLE_HDR 16

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Says what failed in r->why; the protocol did not go as core/bootstrap/'s does. */
static int fail(struct hp_rank *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	return -EPROTO;
}

int hp_send(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads exactly len bytes before the deadline. 0, -ETIMEDOUT, or -errno
 * (-ECONNRESET at EOF). */
static int recv_all(int fd, void *buf, size_t len, double deadline)
{
	uint8_t *p = buf;
	while (len) {
		double left = deadline - now_s();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		ssize_t n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A connected socket, retried until the deadline; -1 if none. */
static int tcp_to(uint32_t addr_be, uint16_t port, double deadline)
{
	while (now_s() < deadline) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = addr_be};
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		usleep(20 * 1000);
	}
	return -1;
}

static void hs_mac(const uint8_t secret[32], const char *label, uint64_t id_nonce, const uint8_t ni[32],
		   const uint8_t na[32], uint8_t out[32])
{
	struct weft__hmac h;
	uint8_t n8[8];
	put64(n8, id_nonce);
	weft__hmac_init(&h, secret, 32);
	weft__hmac_update(&h, label, strlen(label) + 1);
	weft__hmac_update(&h, n8, sizeof(n8));
	weft__hmac_update(&h, ni, 32);
	weft__hmac_update(&h, na, 32);
	weft__hmac_final(&h, out);
}

/* The initiator's side of the handshake on a connected socket. */
static int handshake(struct hp_rank *r, struct hp_link *l, const uint8_t secret[32], uint64_t id_nonce,
		     double deadline, const char *who)
{
	uint8_t ni[32], m[H2_LEN], mac[32];
	if (getrandom(ni, sizeof(ni), 0) != (ssize_t)sizeof(ni))
		return fail(r, "getrandom failed");
	put32(m, HS_MAGIC);
	put32(m + 4, WEFT__BOOTSTRAP_VERSION);
	put64(m + 8, id_nonce);
	memcpy(m + 16, ni, 32);
	if (hp_send(l->fd, m, H1_LEN) != 0 || recv_all(l->fd, m, H2_LEN, deadline) != 0)
		return fail(r, "%s: handshake: no answer to H1", who);
	if (get32(m) != HS_MAGIC || get32(m + 4) != WEFT__BOOTSTRAP_VERSION)
		return fail(r, "%s: handshake: H2 has magic 0x%08x version %u", who, get32(m), get32(m + 4));
	const uint8_t *na = m + 8;
	hs_mac(secret, "weft-acceptor", id_nonce, ni, na, mac);
	if (!weft__ct_equal(mac, m + 40, 32))
		return fail(r, "%s: handshake: the acceptor's proof does not verify", who);
	hs_mac(secret, "weft-initiator", id_nonce, ni, na, mac);
	if (hp_send(l->fd, mac, H3_LEN) != 0)
		return fail(r, "%s: handshake: cannot send H3", who);
	hs_mac(secret, "weft-key-i2a", id_nonce, ni, na, l->key_tx);
	hs_mac(secret, "weft-key-a2i", id_nonce, ni, na, l->key_rx);
	l->seq_tx = l->seq_rx = 0;
	return 0;
}

uint8_t *hp_frame(struct hp_link *l, int type, int cls, uint32_t tag, const void *p, size_t n, size_t *len)
{
	uint8_t *b = malloc(HP_HDR_LEN + n + HP_MAC_LEN);
	if (!b)
		return NULL;
	put32(b, FRAME_MAGIC);
	put16(b + 4, (uint16_t)type);
	put16(b + 6, (uint16_t)cls);
	put32(b + 8, tag);
	put32(b + 12, 0);
	put64(b + 16, n);
	if (n)
		memcpy(b + HP_HDR_LEN, p, n);
	struct weft__hmac h;
	uint8_t s8[8];
	put64(s8, l->seq_tx++);
	weft__hmac_init(&h, l->key_tx, 32);
	weft__hmac_update(&h, b, HP_HDR_LEN + n);
	weft__hmac_update(&h, s8, sizeof(s8));
	weft__hmac_final(&h, b + HP_HDR_LEN + n);
	*len = HP_HDR_LEN + n + HP_MAC_LEN;
	return b;
}

/* Reads one frame and checks its MAC. Returns the payload (malloc'd) or NULL. */
static uint8_t *read_frame(struct hp_rank *r, struct hp_link *l, double deadline, int *type, int *cls,
			   uint32_t *tag, size_t *len, const char *who)
{
	uint8_t h[HP_HDR_LEN];
	if (recv_all(l->fd, h, sizeof(h), deadline) != 0) {
		fail(r, "%s: no frame arrived", who);
		return NULL;
	}
	uint64_t n = get64(h + 16);
	if (get32(h) != FRAME_MAGIC || n > (1u << 24)) {
		fail(r, "%s: bad frame header (magic 0x%08x, %llu bytes)", who, get32(h), (unsigned long long)n);
		return NULL;
	}
	uint8_t *b = malloc((size_t)n + HP_MAC_LEN);
	if (!b || recv_all(l->fd, b, (size_t)n + HP_MAC_LEN, deadline) != 0) {
		free(b);
		fail(r, "%s: frame body did not arrive", who);
		return NULL;
	}
	struct weft__hmac hm;
	uint8_t s8[8], mac[32];
	put64(s8, l->seq_rx++);
	weft__hmac_init(&hm, l->key_rx, 32);
	weft__hmac_update(&hm, h, sizeof(h));
	weft__hmac_update(&hm, b, (size_t)n);
	weft__hmac_update(&hm, s8, sizeof(s8));
	weft__hmac_final(&hm, mac);
	if (!weft__ct_equal(mac, b + n, 32)) {
		free(b);
		fail(r, "%s: a frame's MAC does not verify (this helper and core/bootstrap/link.c disagree)", who);
		return NULL;
	}
	*type = get16(h + 4);
	if (cls)
		*cls = get16(h + 6);
	if (tag)
		*tag = get32(h + 8);
	*len = (size_t)n;
	return b;
}

uint8_t *hp_recv_frame(struct hp_rank *r, double timeout_s, int *type, int *cls, uint32_t *tag, size_t *len)
{
	return read_frame(r, &r->peer, now_s() + timeout_s, type, cls, tag, len, "rank 1");
}

int hp_join(const struct weft_unique_id *id, int nranks, double timeout_s, struct hp_rank *r)
{
	struct weft__unique_id_layout u;
	memset(r, 0, sizeof(*r));
	r->peer.fd = -1;
	r->rank = 0;
	r->nranks = nranks;
	if (nranks != 2)
		return fail(r, "only a 2-rank job is supported");
	memcpy(&u, id->internal, sizeof(u));
	if (!u.has_secret)
		return fail(r, "the id carries no secret");
	double deadline = now_s() + timeout_s;
	uint32_t root_be, me_be;
	memcpy(&root_be, u.addr, 4);
	inet_pton(AF_INET, "127.0.0.1", &me_be);

	/* The rendezvous: hello to the root, the peer table back. */
	struct hp_link root = {.fd = tcp_to(root_be, ntohs(u.port), deadline)};
	if (root.fd < 0)
		return fail(r, "cannot connect to the root");
	if (handshake(r, &root, u.secret, u.nonce, deadline, "root") != 0)
		goto err_root;
	uint8_t hello[HELLO_LEN] = {0};
	uint64_t proc;
	if (getrandom(&proc, sizeof(proc), 0) != (ssize_t)sizeof(proc)) {
		fail(r, "getrandom failed");
		goto err_root;
	}
	put32(hello, WEFT__BOOTSTRAP_VERSION);
	put32(hello + 4, 0);
	put32(hello + 8, (uint32_t)nranks);
	memcpy(hello + 12, &me_be, 4);
	put16(hello + 16, 9); /* no one connects to rank 0 */
	put64(hello + 20, proc | 1);
	snprintf((char *)hello + 28, 64, "hostile-peer-%llx", (unsigned long long)proc);
	size_t flen;
	uint8_t *f = hp_frame(&root, HP_T_HELLO, 0, 0, hello, sizeof(hello), &flen);
	if (!f || hp_send(root.fd, f, flen) != 0) {
		free(f);
		fail(r, "root: cannot send the hello");
		goto err_root;
	}
	free(f);
	int type;
	size_t tlen;
	uint8_t *t = read_frame(r, &root, deadline, &type, NULL, NULL, &tlen, "root");
	if (!t)
		goto err_root;
	if (type != HP_T_TABLE || tlen != TABLE_HDR + (size_t)nranks * ENTRY_LEN) {
		free(t);
		fail(r, "root: answered with type %d of %zu bytes, not the table", type, tlen);
		goto err_root;
	}
	r->tag = get64(t);
	uint32_t peer_be;
	memcpy(&peer_be, t + TABLE_HDR + ENTRY_LEN, 4);
	uint16_t peer_port = get16(t + TABLE_HDR + ENTRY_LEN + 4);
	free(t);
	close(root.fd);

	/* The peer link: handshake, peer hello, acknowledgement. */
	r->peer.fd = tcp_to(peer_be, peer_port, deadline);
	if (r->peer.fd < 0)
		return fail(r, "cannot connect to rank 1 at port %u", peer_port);
	if (handshake(r, &r->peer, u.secret, u.nonce, deadline, "rank 1") != 0)
		goto err_peer;
	uint8_t m[16];
	put32(m, 0);
	put32(m + 4, (uint32_t)nranks);
	put64(m + 8, r->tag);
	f = hp_frame(&r->peer, HP_T_PEER_HELLO, 0, 0, m, sizeof(m), &flen);
	if (!f || hp_send(r->peer.fd, f, flen) != 0) {
		free(f);
		fail(r, "rank 1: cannot send the peer hello");
		goto err_peer;
	}
	free(f);
	uint8_t *ack = read_frame(r, &r->peer, deadline, &type, NULL, NULL, &tlen, "rank 1");
	if (!ack)
		goto err_peer;
	int ok = type == HP_T_PEER_ACK && tlen == 16 && get32(ack) == 1 && get64(ack + 8) == r->tag;
	free(ack);
	if (!ok) {
		fail(r, "rank 1: answered the peer hello with type %d, not its acknowledgement", type);
		goto err_peer;
	}
	return 0;

err_root:
	close(root.fd);
	return -EPROTO;
err_peer:
	close(r->peer.fd);
	r->peer.fd = -1;
	return -EPROTO;
}

int hp_wait_eof(int fd, double timeout_s, double *secs)
{
	double t0 = now_s(), deadline = t0 + timeout_s;
	uint8_t buf[4096];
	for (;;) {
		double left = deadline - now_s();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*secs = now_s() - t0;
			return 0;
		}
	}
}

void hp_close(struct hp_rank *r)
{
	if (r && r->peer.fd >= 0) {
		close(r->peer.fd);
		r->peer.fd = -1;
	}
}
