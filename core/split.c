/* SPDX-License-Identifier: Apache-2.0 */
/* weft_comm_split: the parent's bootstrap carries each rank's color and key,
 * and the first rank of every color hands its members the id of a new
 * rendezvous; the new comm owes the parent nothing afterwards. */
#include <errno.h>
#include <stdint.h>
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
