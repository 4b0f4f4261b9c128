/* SPDX-License-Identifier: Apache-2.0 */
/* Links: one TCP connection each, with its keys, sequence numbers, output
 * queue and incremental reader; frames are built, sealed and read here. */
#ifndef WEFT_CORE_BOOTSTRAP_LINK_H
#define WEFT_CORE_BOOTSTRAP_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "sha256.h"
#include "wire.h"

/* A link is one TCP connection with its handshake state, keys, sequence
 * numbers and an incremental reader, so one thread can poll many of them. */

struct obuf {
	struct obuf *next;
	size_t len, off;
	uint8_t data[];
};

enum { IN_RAW, IN_HDR, IN_BODY };

struct link {
	int fd;
	char name[64];   /* remote ip:port, for logs */
	int stage;       /* acceptor handshake stage */
	double deadline; /* for the handshake */
	uint8_t nonce_l[32], nonce_r[32];
	uint8_t key_tx[32], key_rx[32];
	uint64_t seq_tx, seq_rx;
	uint64_t max_len; /* largest payload accepted */
	/* incremental input */
	int in;
	uint8_t raw[H2_LEN];
	size_t raw_need, have;
	uint8_t hdr[HDR_LEN];
	uint8_t *body;
	size_t body_len;
	struct weft__hmac rx_mac; /* fed as the payload arrives, so that verifying a
				   * large message never stalls the other links */
	int eof;
	char why[200];
	double last_rx;
	/* output queue: the owner thread writes it; others append under a lock */
	struct obuf *oq_head, *oq_tail;
};

struct frame {
	int type, cls;
	uint32_t tag;
	uint8_t *buf; /* payload (malloc'd, with the MAC after it), owned by the receiver */
	size_t len;
};

struct link *weft__bs_link_new(int fd, const char *name, uint64_t max_len);
void weft__bs_link_free(struct link *l);
void weft__bs_oq_free(struct link *l);
struct obuf *weft__bs_frame_build(const struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n,
				  struct weft__hmac *mac);
void weft__bs_frame_seal(struct link *l, struct obuf *b, struct weft__hmac *mac);
struct obuf *weft__bs_frame_make(struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n);
void weft__bs_oq_push(struct link *l, struct obuf *b);
int weft__bs_oq_flush(struct link *l);
int weft__bs_send_frame_now(struct link *l, int type, uint32_t tag, const void *p, size_t n, double deadline);
int weft__bs_link_pump(struct link *l, struct frame *f);
int weft__bs_link_wait(struct link *l, struct frame *f, double deadline);

#endif
