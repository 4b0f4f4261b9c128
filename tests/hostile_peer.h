/* SPDX-License-Identifier: Apache-2.0 */
/* A test-only rank that speaks weft's bootstrap protocol (core/bootstrap/) by
 * itself: it holds the job secret, completes the handshakes, the rendezvous
 * and the peer hello like a real rank, and then lets a test put any bytes on
 * its authenticated link (frames no real rank would send). Used by
 * tests/test_hostile_peer.c. Blocking sockets, 127.0.0.1 only. */
#ifndef WEFT_TESTS_HOSTILE_PEER_H
#define WEFT_TESTS_HOSTILE_PEER_H

#include <stddef.h>
#include <stdint.h>

#include <weft/weft.h>

/* Frame types and classes, as core/bootstrap/wire.h numbers them. */
enum {
	HP_T_HELLO = 1,
	HP_T_TABLE = 2,
	HP_T_PEER_HELLO = 5,
	HP_T_PEER_ACK = 6,
	HP_T_DATA = 7,
	HP_T_HEARTBEAT = 8,
	HP_T_BYE = 9,
};
#define HP_CLS_USER 0
#define HP_HDR_LEN 24
#define HP_MAC_LEN 32

/* One authenticated link: its socket, direction keys and sequence numbers. */
struct hp_link {
	int fd;
	uint8_t key_tx[32], key_rx[32];
	uint64_t seq_tx, seq_rx;
};

/* Rank 0 of a job, connected to rank 1 (the only peer it talks to). */
struct hp_rank {
	int rank, nranks;
	uint64_t tag;        /* the communicator's tag, from the root's table */
	struct hp_link peer; /* to rank 1 */
	char why[200];       /* what failed, for the test's message */
};

/* Joins the job of id as rank 0 of nranks (only rank 0 is supported: it
 * connects to the higher ranks and accepts no connection) and brings up the
 * link to rank 1: handshake, peer hello, acknowledgement. Returns 0, or
 * -EPROTO with r->why saying which step failed. */
int hp_join(const struct weft_unique_id *id, int nranks, double timeout_s, struct hp_rank *r);

/* Builds one frame (header, payload, MAC over both and the link's next
 * sequence number) into a malloc'd buffer; the sequence advances. *len gets its
 * length: HP_HDR_LEN + n + HP_MAC_LEN. */
uint8_t *hp_frame(struct hp_link *l, int type, int cls, uint32_t tag, const void *p, size_t n, size_t *len);

/* Reads the next frame from rank 1 and checks its MAC and sequence. Returns
 * its payload (malloc'd; *len bytes) with its type, class and tag, or NULL
 * with r->why set. */
uint8_t *hp_recv_frame(struct hp_rank *r, double timeout_s, int *type, int *cls, uint32_t *tag, size_t *len);

/* Writes all of buf. 0 or -errno (-EPIPE when the peer is gone). */
int hp_send(int fd, const void *buf, size_t len);

/* Reads and discards what the peer sends until it closes the connection (0,
 * with the seconds it took in *secs) or timeout_s passes (-ETIMEDOUT). */
int hp_wait_eof(int fd, double timeout_s, double *secs);

void hp_close(struct hp_rank *r);

#endif
