/* SPDX-License-Identifier: Apache-2.0 */
/* Wire format of the bootstrap: magic numbers, the lengths of the handshake
 * messages, frame headers, hellos and peer tables, frame types and message
 * classes, and the limits a reader holds its input to. */
#ifndef WEFT_CORE_BOOTSTRAP_WIRE_H
#define WEFT_CORE_BOOTSTRAP_WIRE_H

#include "sha256.h"

#define ID_MAGIC 0x31544657u    /* "WFT1" in memory on little-endian hosts */
#define FRAME_MAGIC 0x4d544657u /* "WFTM" */
#define HS_MAGIC 0x48544657u    /* "WFTH" */
#define HS_BUSY 0x42544657u     /* "WFTB": sent before a shed connection closes; try again */
#define HDR_LEN 24
#define MAC_LEN WEFT_SHA256_BYTES
#define H1_LEN 48 /* magic, version, id nonce, initiator nonce */
#define H2_LEN 72 /* magic, version, acceptor nonce, acceptor proof */
#define H3_LEN 32 /* initiator proof */
#define HELLO_LEN 92
#define ENTRY_LEN 80
#define TABLE_HDR 16
#define MAX_RANKS (1 << 20)
#define SMALL_FRAME 4096 /* limit on frames other than peer messages and the table */

enum frame_type {
	T_HELLO = 1,  /* rank -> root */
	T_TABLE,      /* root -> rank */
	T_FAIL,       /* root -> rank: the rendezvous cannot complete */
	T_GIVEUP,     /* rank -> root: this rank stops waiting */
	T_PEER_HELLO, /* lower rank -> higher rank */
	T_PEER_ACK,
	T_DATA,
	T_HEARTBEAT,
	T_BYE,
};

/* Message classes keep the collectives' traffic apart from user tags. */
enum { CLS_USER = 0, CLS_ALLGATHER = 1, CLS_BARRIER = 2 };

#endif
