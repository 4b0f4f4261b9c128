/* SPDX-License-Identifier: Apache-2.0 */
/* Links: framing and sealing of outgoing messages, the output queue, and the
 * incremental reader that checks each frame's length and MAC. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "link.h"
#include "net.h"
#include "le.h"

#define PUMP_BUDGET (1 << 20) /* bytes read from one link before serving the others */

struct link *weft__bs_link_new(int fd, const char *name, uint64_t max_len)
{
	struct link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->fd = fd;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->max_len = max_len;
	l->in = IN_HDR;
	l->last_rx = weft__bs_now_s();
	return l;
}

void weft__bs_oq_free(struct link *l)
{
	while (l->oq_head) {
		struct obuf *b = l->oq_head;
		l->oq_head = b->next;
		free(b);
	}
	l->oq_tail = NULL;
}

void weft__bs_link_free(struct link *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	free(l->body);
	weft__bs_oq_free(l);
	free(l);
}

/* Frames are built in two steps. weft__bs_frame_build copies the payload and
 * feeds header and payload to the HMAC: the expensive part, done by the sending
 * thread with no lock held. weft__bs_frame_seal appends the link's next sequence
 * number to the MAC and finishes it: cheap, and done under the lock that also
 * queues the frame, so sequence order is queue order. The sequence number makes
 * a replayed, dropped or reordered frame fail:
 *   MAC = HMAC-SHA256(direction key, header | payload | u64 sequence) */
struct obuf *weft__bs_frame_build(const struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n,
				  struct weft__hmac *mac)
{
	struct obuf *b = malloc(sizeof(*b) + HDR_LEN + n + MAC_LEN);
	if (!b)
		return NULL;
	b->next = NULL;
	b->len = HDR_LEN + n + MAC_LEN;
	b->off = 0;
	uint8_t *h = b->data;
	put32(h, FRAME_MAGIC);
	put16(h + 4, (uint16_t)type);
	put16(h + 6, (uint16_t)cls);
	put32(h + 8, tag);
	put32(h + 12, 0);
	put64(h + 16, n);
	if (n)
		memcpy(h + HDR_LEN, p, n);
	weft__hmac_init(mac, l->key_tx, 32);
	weft__hmac_update(mac, h, HDR_LEN + n);
	return b;
}

void weft__bs_frame_seal(struct link *l, struct obuf *b, struct weft__hmac *mac)
{
	uint8_t s8[8];
	put64(s8, l->seq_tx++);
	weft__hmac_update(mac, s8, sizeof(s8));
	weft__hmac_final(mac, b->data + b->len - MAC_LEN);
}

/* Both steps at once, for a link only the calling thread uses. */
struct obuf *weft__bs_frame_make(struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n)
{
	struct weft__hmac mac;
	struct obuf *b = weft__bs_frame_build(l, type, cls, tag, p, n, &mac);
	if (b)
		weft__bs_frame_seal(l, b, &mac);
	return b;
}

void weft__bs_oq_push(struct link *l, struct obuf *b)
{
	if (l->oq_tail)
		l->oq_tail->next = b;
	else
		l->oq_head = b;
	l->oq_tail = b;
}

/* Writes what the socket takes now. Returns 0, or -errno when the link broke. */
int weft__bs_oq_flush(struct link *l)
{
	while (l->oq_head) {
		struct obuf *b = l->oq_head;
		ssize_t n = send(l->fd, b->data + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		b->off += (size_t)n;
		if (b->off == b->len) {
			l->oq_head = b->next;
			if (!l->oq_head)
				l->oq_tail = NULL;
			free(b);
		}
	}
	return 0;
}

int weft__bs_send_frame_now(struct link *l, int type, uint32_t tag, const void *p, size_t n, double deadline)
{
	struct obuf *b = weft__bs_frame_make(l, type, CLS_USER, tag, p, n);
	if (!b)
		return -ENOMEM;
	int rc = weft__bs_write_all(l->fd, b->data, b->len, deadline);
	free(b);
	return rc;
}

/* Reads what is available without blocking. Returns 1 when the raw handshake
 * message or a frame is complete (a frame lands in *f), 0 when the socket has
 * no more for now, -1 when the link is broken or misbehaved (l->why says how).
 * Never reads past the current item, so a blocking caller can hand the socket
 * over to a poll loop between frames. */
int weft__bs_link_pump(struct link *l, struct frame *f)
{
	size_t budget = PUMP_BUDGET;
	for (;;) {
		uint8_t *dst;
		size_t want;
		if (l->in == IN_RAW) {
			dst = l->raw + l->have;
			want = l->raw_need - l->have;
		} else if (l->in == IN_HDR) {
			dst = l->hdr + l->have;
			want = HDR_LEN - l->have;
		} else {
			dst = l->body + l->have;
			want = l->body_len + MAC_LEN - l->have;
		}
		ssize_t n = recv(l->fd, dst, want, MSG_DONTWAIT);
		if (n == 0) {
			l->eof = 1;
			snprintf(l->why, sizeof(l->why), "closed the connection");
			return -1;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			snprintf(l->why, sizeof(l->why), "recv: %s", strerror(errno));
			return -1;
		}
		l->last_rx = weft__bs_now_s();
		if (l->in == IN_BODY && l->have < l->body_len) {
			size_t pay = (size_t)n < l->body_len - l->have ? (size_t)n : l->body_len - l->have;
			weft__hmac_update(&l->rx_mac, dst, pay);
		}
		l->have += (size_t)n;
		if ((size_t)n < want) {
			/* Come back on the next poll round: it reports the rest at once. */
			if ((size_t)n >= budget)
				return 0;
			budget -= (size_t)n;
			continue;
		}
		l->have = 0;
		if (l->in == IN_RAW)
			return 1;
		if (l->in == IN_HDR) {
			uint64_t len = get64(l->hdr + 16);
			if (get32(l->hdr) != FRAME_MAGIC) {
				snprintf(l->why, sizeof(l->why), "sent garbage (bad frame magic 0x%08x)", get32(l->hdr));
				return -1;
			}
			/* Checked before allocating: the length comes from the wire, and the
			 * MAC that would vouch for it arrives only after the payload. The
			 * limit holds whatever WEFT_CORE_BOOTSTRAP_MAX_MSG says: past
			 * SIZE_MAX - MAC_LEN, len + MAC_LEN wraps to a small allocation. */
			uint64_t limit = l->max_len < SIZE_MAX - MAC_LEN ? l->max_len : SIZE_MAX - MAC_LEN;
			if (len > limit) {
				snprintf(l->why, sizeof(l->why),
					 "announced a %llu-byte message, more than the %llu bytes allowed here "
					 "(peer messages: WEFT_CORE_BOOTSTRAP_MAX_MSG)",
					 (unsigned long long)len, (unsigned long long)limit);
				return -1;
			}
			l->body = malloc((size_t)len + MAC_LEN);
			if (!l->body) {
				snprintf(l->why, sizeof(l->why), "no memory for a %llu-byte message",
					 (unsigned long long)len);
				return -1;
			}
			l->body_len = (size_t)len;
			l->in = IN_BODY;
			weft__hmac_init(&l->rx_mac, l->key_rx, 32);
			weft__hmac_update(&l->rx_mac, l->hdr, HDR_LEN);
			continue;
		}
		uint8_t mac[MAC_LEN];
		uint8_t s8[8];
		put64(s8, l->seq_rx);
		weft__hmac_update(&l->rx_mac, s8, sizeof(s8));
		weft__hmac_final(&l->rx_mac, mac);
		if (!weft__ct_equal(mac, l->body + l->body_len, MAC_LEN)) {
			snprintf(l->why, sizeof(l->why),
				 "sent a message that failed authentication (wrong secret, tampered or replayed)");
			return -1;
		}
		l->seq_rx++;
		f->type = get16(l->hdr + 4);
		f->cls = get16(l->hdr + 6);
		f->tag = get32(l->hdr + 8);
		f->buf = l->body;
		f->len = l->body_len;
		l->body = NULL;
		l->in = IN_HDR;
		return 1;
	}
}

/* Blocking form of weft__bs_link_pump: 1 done, -1 broken, -ETIMEDOUT at the deadline. */
int weft__bs_link_wait(struct link *l, struct frame *f, double deadline)
{
	for (;;) {
		int rc = weft__bs_link_pump(l, f);
		if (rc != 0)
			return rc;
		struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
		int ms = weft__bs_ms_until(deadline);
		if (ms == 0 || poll(&pfd, 1, ms) == 0) {
			snprintf(l->why, sizeof(l->why), "timed out");
			return -ETIMEDOUT;
		}
	}
}
