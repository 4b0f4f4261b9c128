/* SPDX-License-Identifier: Apache-2.0 */
/* weft_comm_split and weft_comm_shrink: the parent's bootstrap carries each
 * rank's color and key (split) or exclude list (shrink, point to point among
 * the ranks that remain, also after the parent failed), and the first rank of
 * every new comm hands its members the id of a new rendezvous; the new comm
 * owes the parent nothing afterwards. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "le.h"
#include "bootstrap.h"
#include "log.h"
#include "progress.h"
#include "handles.h"

/* The members of one color in new-rank order (by key, then parent rank, a
 * stable insertion sort): how many, and this rank's place among them. */
static int members_of(const unsigned char *all, int n, int color, int me, int *members, int *myrank)
{
	int m = 0;
	*myrank = -1;
	for (int p = 0; p < n; p++) {
		if ((int32_t)get32(all + 8 * (size_t)p) != color)
			continue;
		int32_t key = (int32_t)get32(all + 8 * (size_t)p + 4);
		int i = m++;
		while (i > 0 && (int32_t)get32(all + 8 * (size_t)members[i - 1] + 4) > key) {
			members[i] = members[i - 1];
			i--;
		}
		members[i] = p;
	}
	for (int i = 0; i < m; i++)
		if (members[i] == me)
			*myrank = i;
	return m;
}

/* The first member makes the id and sends it to the others; a failure to
 * make it is sent as zeros, which the members refuse, so none is left
 * waiting for an id that will not come. */
static int hand_over_id(weft_comm_t *comm, const int *members, int m, int myrank, struct weft_unique_id *id)
{
	static const struct weft_unique_id zero;
	int rc = 0;
	if (myrank == 0) {
		if ((rc = weft_get_unique_id(id)) != 0) {
			WEFT_ERROR("weft_comm_split: cannot make the new comm's id: %s", weft_strerror(rc));
			memset(id, 0, sizeof(*id));
		}
		for (int i = 1; i < m; i++) {
			int src = weft__bootstrap_send(comm->bs, members[i], WEFT__TAG_SPLIT, id, sizeof(*id));
			if (src != 0) {
				WEFT_ERROR("weft_comm_split: sending the new comm's id to rank %d failed: %s",
					   members[i], weft_strerror(src));
				rc = rc ? rc : src;
			}
		}
		return rc;
	}
	if ((rc = weft__progress_hold(comm)) != 0)
		return rc;
	rc = weft__bootstrap_recv(comm->bs, members[0], WEFT__TAG_SPLIT, id, sizeof(*id));
	weft__progress_release(comm);
	if (rc != 0) {
		WEFT_ERROR("weft_comm_split: receiving the new comm's id from rank %d failed: %s", members[0],
			   weft_strerror(rc));
		return rc;
	}
	if (memcmp(id, &zero, sizeof(*id)) == 0) {
		WEFT_ERROR("weft_comm_split: rank %d, the new comm's first, could not make its id", members[0]);
		return -WEFT_ERR_PEER;
	}
	return 0;
}

static int split(weft_comm_t *comm, int color, int key, weft_comm_t **newcomm)
{
	if (!comm || !newcomm) {
		WEFT_ERROR("weft_comm_split: NULL %s", !comm ? "comm" : "newcomm");
		return -EINVAL;
	}
	if (color < 0 && color != WEFT_SPLIT_NOCOLOR) {
		WEFT_ERROR("weft_comm_split: color %d is negative and not WEFT_SPLIT_NOCOLOR", color);
		return -EINVAL;
	}
	int rc = weft__comm_status(comm);
	if (rc != 0)
		return rc;
	int n = comm->nranks;
	unsigned char mine[8], *all = malloc(8 * (size_t)n);
	int *members = malloc(sizeof(int) * (size_t)n);
	if (!all || !members) {
		free(all);
		free(members);
		return -ENOMEM;
	}
	put32(mine, (uint32_t)color);
	put32(mine + 4, (uint32_t)key);
	rc = weft__comm_allgather(comm, mine, all, sizeof(mine));
	if (rc != 0) {
		WEFT_ERROR("weft_comm_split: exchanging colors failed: %s", weft_strerror(rc));
		goto out;
	}
	if (color == WEFT_SPLIT_NOCOLOR)
		goto out;
	int myrank, m = members_of(all, n, color, comm->rank, members, &myrank);
	struct weft_unique_id id;
	if ((rc = hand_over_id(comm, members, m, myrank, &id)) != 0)
		goto out;
	rc = weft_comm_create(&id, m, myrank, newcomm);
	if (rc != 0)
		WEFT_ERROR("weft_comm_split: color %d: rank %d of %d: creating the new comm failed: %s", color, myrank,
			   m, weft_strerror(rc));
out:
	free(all);
	free(members);
	return rc;
}

WEFT_API int weft_comm_split(weft_comm_t *comm, int color, int key, weft_comm_t **newcomm)
{
	if (newcomm)
		*newcomm = NULL;
	int rc = weft__comm_enter(comm, "weft_comm_split");
	if (rc != 0)
		return rc;
	rc = split(comm, color, key, newcomm);
	return weft__comm_leave(comm, rc);
}

/* ------------------------------------------------------------------ shrink
 * One message layout, of one length per parent: magic, the sender's shrink
 * number on this parent (so that what an earlier, refused shrink left unread
 * is skipped), its kind, the number of ranks listed, then the exclude list
 * as a bitmap (SHR_LIST) or the new comm's id (SHR_ID). */
#define SHR_MAGIC 0x52485357u /* "WSHR" */
#define SHR_HDR 16
enum { SHR_LIST = 1, SHR_BAD = 2, SHR_ID = 3, SHR_NOID = 4 };

static size_t shr_len(int n)
{
	size_t bm = ((size_t)n + 7) / 8;
	return SHR_HDR + (bm > WEFT_UNIQUE_ID_BYTES ? bm : WEFT_UNIQUE_ID_BYTES);
}

static int shr_has(const unsigned char *bm, int r)
{
	return (bm[r / 8] >> (r % 8)) & 1;
}

/* The ranks set in bm, as "{2, 5}" (the first few), for error lines. */
static void shr_fmt(const unsigned char *bm, int n, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "{");
	int k = 0;
	for (int r = 0; r < n && o + 16 < len; r++)
		if (shr_has(bm, r))
			o += (size_t)snprintf(buf + o, len - o, "%s%d", k++ ? ", " : "", r);
	snprintf(buf + o, len - o, "}");
}

/* The exclude list as a bitmap in bm (zeroed by the caller): 0, or -EINVAL
 * with the reason logged. */
static int shr_list(const weft_comm_t *comm, const int *exclude, int nexclude, unsigned char *bm)
{
	if (nexclude < 0 || (nexclude > 0 && !exclude)) {
		WEFT_ERROR("weft_comm_shrink: %d ranks to exclude from %s list", nexclude, exclude ? "a" : "a NULL");
		return -EINVAL;
	}
	for (int i = 0; i < nexclude; i++) {
		int r = exclude[i];
		const char *why = NULL;
		if (r < 0 || r >= comm->nranks)
			why = "is not a rank of the communicator";
		else if (r == comm->rank)
			why = "is the calling rank: excluded ranks do not call weft_comm_shrink";
		else if (shr_has(bm, r))
			why = "is listed twice";
		if (why) {
			WEFT_ERROR("weft_comm_shrink: rank %d: exclude list entry %d, rank %d of 0..%d, %s", comm->rank,
				   i, r, comm->nranks - 1, why);
			return -EINVAL;
		}
		bm[r / 8] |= (unsigned char)(1u << (r % 8));
	}
	return 0;
}

/* peer's message of this shrink (number gen) into msg, skipping those an
 * earlier shrink left unread. */
static int shr_recv(weft_comm_t *comm, int peer, uint32_t gen, unsigned char *msg, size_t len)
{
	for (;;) {
		int rc = weft__bootstrap_recv_any(comm->bs, peer, WEFT__TAG_SHRINK, msg, len);
		if (rc == -WEFT_ERR_PEER) {
			WEFT_ERROR("weft_comm_shrink: rank %d, which the exclude list keeps, has died or left; exclude it "
				   "too",
				   peer);
			return rc;
		}
		if (rc != 0) {
			WEFT_ERROR("weft_comm_shrink: receiving from rank %d failed: %s", peer, weft_strerror(rc));
			return rc;
		}
		uint32_t g = get32(msg + 4);
		if (get32(msg) != SHR_MAGIC) {
			WEFT_ERROR("weft_comm_shrink: rank %d sent a malformed message", peer);
			return -WEFT_ERR_PROTOCOL;
		}
		if (g == gen)
			return 0;
		if (g > gen) {
			WEFT_ERROR("weft_comm_shrink: rank %d is in its shrink number %u of this communicator, this rank "
				   "in its number %u: the ranks did not make the same calls",
				   peer, g, gen);
			return -EINVAL;
		}
		WEFT_DEBUG("weft_comm_shrink: skipped what rank %d sent in an earlier shrink (%u)", peer, g);
	}
}

/* Every rank that remains must list the same ranks: each has told every
 * other its list, and this rank hears the ones it keeps, in rank order. */
static int shr_agree(weft_comm_t *comm, const unsigned char *mine, unsigned char *msg, size_t len, uint32_t gen)
{
	const unsigned char *bm = mine + SHR_HDR;
	for (int p = 0; p < comm->nranks; p++) {
		if (p == comm->rank || shr_has(bm, p))
			continue;
		int rc = shr_recv(comm, p, gen, msg, len);
		if (rc != 0)
			return rc;
		if (get32(msg + 8) == SHR_BAD) {
			WEFT_ERROR("weft_comm_shrink: rank %d refused its own exclude list (its log says why)", p);
			return -EINVAL;
		}
		if (memcmp(msg + SHR_HDR, bm, len - SHR_HDR) != 0) {
			char a[128], b[128];
			shr_fmt(bm, comm->nranks, a, sizeof(a));
			shr_fmt(msg + SHR_HDR, comm->nranks, b, sizeof(b));
			WEFT_ERROR("weft_comm_shrink: exclude lists differ: rank %d excludes %s, rank %d excludes %s; every "
				   "remaining rank must pass the same list",
				   comm->rank, a, p, b);
			return -EINVAL;
		}
	}
	return 0;
}

/* The first remaining rank makes the new comm's id and sends it to the
 * others (SHR_NOID when it cannot, or when it refused the lists, so that
 * none waits for an id that will not come); they receive it. */
static int shr_id(weft_comm_t *comm, const unsigned char *bm, int first, int rc, unsigned char *msg, size_t len,
		  uint32_t gen, struct weft_unique_id *id)
{
	if (comm->rank == first) {
		if (rc == 0 && (rc = weft_get_unique_id(id)) != 0)
			WEFT_ERROR("weft_comm_shrink: cannot make the new comm's id: %s", weft_strerror(rc));
		memset(msg, 0, len);
		put32(msg, SHR_MAGIC);
		put32(msg + 4, gen);
		put32(msg + 8, rc == 0 ? SHR_ID : SHR_NOID);
		if (rc == 0)
			memcpy(msg + SHR_HDR, id, sizeof(*id));
		for (int p = first + 1; p < comm->nranks; p++)
			if (p != comm->rank && !shr_has(bm, p))
				weft__bootstrap_send_any(comm->bs, p, WEFT__TAG_SHRINK, msg, len);
		return rc;
	}
	if (rc != 0)
		return rc;
	if ((rc = shr_recv(comm, first, gen, msg, len)) != 0)
		return rc;
	if (get32(msg + 8) != SHR_ID) {
		WEFT_ERROR("weft_comm_shrink: rank %d, the new comm's first, refused or could not make its id (its log "
			   "says why)",
			   first);
		return -EINVAL;
	}
	memcpy(id, msg + SHR_HDR, sizeof(*id));
	return 0;
}

static int shrink(weft_comm_t *comm, const int *exclude, int nexclude, int flags, weft_comm_t **newcomm)
{
	int n = comm->nranks;
	size_t len = shr_len(n);
	unsigned char *mine = calloc(1, len), *msg = calloc(1, len);
	if (!mine || !msg) {
		free(mine);
		free(msg);
		return -ENOMEM;
	}
	uint32_t gen = ++comm->shrinks;
	if (flags & WEFT_SHRINK_ABORT)
		weft_comm_abort(comm);
	int rc = shr_list(comm, exclude, nexclude, mine + SHR_HDR);
	put32(mine, SHR_MAGIC);
	put32(mine + 4, gen);
	put32(mine + 8, rc == 0 ? SHR_LIST : SHR_BAD);
	put32(mine + 12, (uint32_t)nexclude);
	/* Every other rank hears this one, excluded or not: a rank that keeps
	 * one this rank excludes then sees the lists differ instead of waiting.
	 * A dead rank's send fails, which is expected. */
	for (int p = 0; p < n; p++)
		if (p != comm->rank)
			weft__bootstrap_send_any(comm->bs, p, WEFT__TAG_SHRINK, mine, len);
	if (rc != 0)
		goto out;
	int first = -1, m = 0, myrank = 0;
	for (int p = 0; p < n; p++)
		if (!shr_has(mine + SHR_HDR, p)) {
			if (first < 0)
				first = p;
			if (p == comm->rank)
				myrank = m;
			m++;
		}
	/* A healthy parent's transports keep progressing meanwhile, as in split. */
	int held = weft__comm_status(comm) == 0 && weft__progress_hold(comm) == 0;
	rc = shr_agree(comm, mine, msg, len, gen);
	struct weft_unique_id id;
	rc = shr_id(comm, mine + SHR_HDR, first, rc, msg, len, gen, &id);
	if (held)
		weft__progress_release(comm);
	if (rc != 0)
		goto out;
	rc = weft_comm_create(&id, m, myrank, newcomm);
	if (rc != 0)
		WEFT_ERROR("weft_comm_shrink: rank %d of %d: creating the new comm failed: %s", myrank, m,
			   weft_strerror(rc));
out:
	free(mine);
	free(msg);
	return rc;
}

WEFT_API int weft_comm_shrink(weft_comm_t *comm, const int *exclude, int nexclude, int flags, weft_comm_t **newcomm)
{
	if (newcomm)
		*newcomm = NULL;
	int rc = weft__comm_enter(comm, "weft_comm_shrink");
	if (rc != 0)
		return rc;
	if (!newcomm || (flags & ~WEFT_SHRINK_ABORT)) {
		if (!newcomm)
			WEFT_ERROR("weft_comm_shrink: newcomm is NULL");
		else
			WEFT_ERROR("weft_comm_shrink: flags 0x%x: only WEFT_SHRINK_ABORT (0x%x) is known", (unsigned)flags,
				   WEFT_SHRINK_ABORT);
		rc = -EINVAL;
	} else {
		rc = shrink(comm, exclude, nexclude, flags, newcomm);
	}
	return weft__comm_leave(comm, rc);
}
