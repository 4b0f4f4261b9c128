/* weft: the batch of point-to-point operations the core hands an algorithm
 * pack's WEFT_COLL_SENDRECV algorithm. Part of the plugin ABI (plugin.h); kept
 * in its own header until it moves into plugin.h's collective section. */
#ifndef WEFT_COLL_P2P_H
#define WEFT_COLL_P2P_H

#include <stddef.h>

#include <weft/plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One queued weft_send (is_send 1) or weft_recv (is_send 0), in bytes.
 *
 * Convention for coll == WEFT_COLL_SENDRECV: the core always passes a batch,
 * also for one send or recv outside a group:
 *   args->sendbuf  points to an array of struct weft_p2p_op (const),
 *   args->count    is the number of entries (at least 1),
 *   args->recvbuf  is NULL, args->dtype is WEFT_UINT8, args->root is -1,
 *   args->bytes    is the sum of the entries' bytes (what selection uses).
 * Entries keep the order of the calls. Between one pair of ranks, the k-th send
 * of one to the other matches the k-th recv of the other from it, and both name
 * the same byte count (as NCCL requires). No entry has bytes == 0 (the core
 * drops those), and peer may be the calling rank itself. */
struct weft_p2p_op {
	int peer;
	int is_send;
	void *buf; /* read for a send, written for a recv */
	size_t bytes;
};

#ifdef __cplusplus
}
#endif
#endif /* WEFT_COLL_P2P_H */
