/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: communicators made from others. ncclCommSplit and
 * ncclCommShrink (weft_comm_split, weft_comm_shrink: the latter also after a
 * rank died, its survivors meeting among themselves), and ncclCommGrow with
 * the id of ncclCommGetUniqueId (NCCL 2.29's API). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wn.h"

/* The comm object of a new weft comm made from parent (or NULL, for a rank
 * that joins a grow): the config's settings, else the parent's. */
static struct ncclComm *wrap(const struct ncclComm *parent, weft_comm_t *wc, const ncclConfig_t *config, int device,
			     const char *fn)
{
	struct ncclComm *c = wn_comm_new(weft_comm_rank(wc), weft_comm_size(wc), config, device);
	if (!c) {
		WN_ERROR("%s: out of memory", fn);
		weft_comm_destroy(wc);
		return NULL;
	}
	if (!config && parent) {
		c->blocking = parent->blocking;
		memcpy(c->name, parent->name, sizeof(c->name));
	}
	c->wc = wc;
	WN_INFO("%s: rank %d of %d ready%s%s (device %d)", fn, c->rank, c->nranks, c->name[0] ? ", comm " : "",
		c->name, c->device);
	return c;
}

/* Logs a failed weft call with the core's own reason, which names the rank
 * or the list at fault. */
static ncclResult_t weft_failed(const char *fn, const char *call, int rc)
{
	char detail[256] = "";
	weft_last_error(detail, sizeof(detail));
	WN_ERROR("%s: %s failed: %s%s%s", fn, call, weft_strerror(rc), detail[0] ? ": " : "", detail);
	return wn_result(rc);
}

/* The checks split, shrink and an existing rank's grow share. */
static ncclResult_t check_derive(struct ncclComm *comm, ncclComm_t *newcomm, const ncclConfig_t *config,
				 const char *fn)
{
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!newcomm) {
		WN_ERROR("%s: newcomm is NULL", fn);
		return ncclInvalidArgument;
	}
	if ((r = wn_check_config(config, fn)) != ncclSuccess)
		return r;
	if (wn_group_depth() > 0) {
		WN_ERROR("%s: inside ncclGroupStart/End; weft makes new comms from others outside groups only", fn);
		return ncclInvalidUsage;
	}
	return ncclSuccess;
}

/* ncclCommSplit: weft_comm_split, which orders a color's ranks by key, then
 * by parent rank, and meets them through a rendezvous of their own. */
WN_API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config)
{
	static const char fn[] = "ncclCommSplit";
	if (newcomm)
		*newcomm = NULL;
	ncclResult_t r = check_derive(comm, newcomm, config, fn);
	if (r != ncclSuccess)
		return r;
	if (color < 0 && color != NCCL_SPLIT_NOCOLOR) {
		WN_ERROR("%s: color %d is negative and not NCCL_SPLIT_NOCOLOR", fn, color);
		return ncclInvalidArgument;
	}
	if (comm->revoked) {
		WN_ERROR("%s: comm %p was revoked: weft's split runs over the parent's connections, which the revoke "
			 "stopped; ncclCommShrink with no rank excluded makes a new comm of the same ranks", fn,
			 (void *)comm);
		return ncclInvalidUsage;
	}
	int wcolor = color == NCCL_SPLIT_NOCOLOR ? WEFT_SPLIT_NOCOLOR : color;
	ncclConfig_t cfg; /* read by size and version: checked by check_derive */
	wn_config_read(config, &cfg, NULL);
	int blocking = config && cfg.blocking != NCCL_CONFIG_UNDEF_INT ? cfg.blocking : comm->blocking;
	if (!blocking)
		return wn_split_start(comm, wcolor, key, config, newcomm);
	weft_comm_t *wc = NULL;
	/* The new comm's transports open on the parent's GPU, as an init's do. */
	int prev = wn_device_enter(comm->device);
	int rc = weft_comm_split(comm->wc, wcolor, key, &wc);
	wn_device_leave(prev);
	if (rc != 0)
		return weft_failed(fn, "weft_comm_split", rc);
	if (!wc)
		return ncclSuccess; /* NCCL_SPLIT_NOCOLOR */
	struct ncclComm *c = wrap(comm, wc, config, comm->device, fn);
	if (!c)
		return ncclSystemError;
	*newcomm = c;
	return ncclSuccess;
}
WN_ALIAS(ncclCommSplit);

/* ncclCommShrink: weft_comm_shrink. The ranks that remain meet point to
 * point over the parent's bootstrap links among themselves, so a parent
 * that failed (a rank died) serves as well as a healthy one. */
WN_API ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
				   ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags)
{
	static const char fn[] = "ncclCommShrink";
	if (newcomm)
		*newcomm = NULL;
	ncclResult_t r = check_derive(comm, newcomm, config, fn);
	if (r != ncclSuccess)
		return r;
	if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
		WN_ERROR("%s: shrinkFlags 0x%x is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT", fn,
			 (unsigned)shrinkFlags);
		return ncclInvalidArgument;
	}
	weft_comm_t *wc = NULL;
	int prev = wn_device_enter(comm->device);
	int rc = weft_comm_shrink(comm->wc, excludeRanksList, excludeRanksCount,
				  shrinkFlags == NCCL_SHRINK_ABORT ? WEFT_SHRINK_ABORT : 0, &wc);
	wn_device_leave(prev);
	if (rc != 0)
		return weft_failed(fn, "weft_comm_shrink", rc);
	struct ncclComm *c = wrap(comm, wc, config, comm->device, fn);
	if (!c)
		return ncclSystemError;
	*newcomm = c;
	return ncclSuccess;
}
WN_ALIAS(ncclCommShrink);

/* --------------------------------------------------------------- grow */

WN_API ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId)
{
	static const char fn[] = "ncclCommGetUniqueId";
	/* All zeros until it succeeds: ncclCommGrow refuses that id by name. */
	if (uniqueId)
		memset(uniqueId, 0, sizeof(*uniqueId));
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!uniqueId) {
		WN_ERROR("%s: uniqueId is NULL", fn);
		return ncclInvalidArgument;
	}
	if (comm->grow == WN_GROW_ISSUED) {
		WN_ERROR("%s: rank %d: the id this comm made before has not been used by ncclCommGrow yet; a comm has "
			 "one unused id at a time",
			 fn, comm->rank);
		return ncclInvalidUsage;
	}
	int rc = weft_get_unique_id(&comm->grow_id);
	if (rc != 0)
		return weft_failed(fn, "weft_get_unique_id", rc);
	comm->grow = WN_GROW_ISSUED;
	_Static_assert(sizeof(comm->grow_id.internal) == sizeof(uniqueId->internal), "unique id sizes differ");
	memcpy(uniqueId->internal, comm->grow_id.internal, sizeof(uniqueId->internal));
	return ncclSuccess;
}
WN_ALIAS(ncclCommGetUniqueId);

/* What each existing rank tells the others at a grow (weft_comm_allgather
 * on the parent): its arguments, and the id when it is the coordinator. */
struct grow_msg {
	uint32_t magic;
	int32_t nranks;
	uint32_t flags;
	unsigned char id[WEFT_UNIQUE_ID_BYTES];
};
#define GROW_MAGIC 0x574f5247u /* "GROW" */
#define GROW_HAS_ID 0x1u
#define GROW_BAD 0x2u          /* refused its own arguments (logged there) */

/* An existing rank's own arguments: 0 (and the id copied when it passed
 * one), or GROW_BAD with the reason logged. */
static uint32_t grow_check_mine(struct ncclComm *comm, int nRanks, const ncclUniqueId *uid, int rank,
				struct grow_msg *mine, const char *fn)
{
	if (rank != -1) {
		WN_ERROR("%s: rank %d of the parent passes rank %d; an existing rank passes -1 and keeps its rank", fn,
			 comm->rank, rank);
		return GROW_BAD;
	}
	if (nRanks <= comm->nranks) {
		WN_ERROR("%s: nRanks %d does not exceed the parent's %d ranks", fn, nRanks, comm->nranks);
		return GROW_BAD;
	}
	if (!uid)
		return 0;
	int same = memcmp(uid->internal, comm->grow_id.internal, sizeof(uid->internal)) == 0;
	if (same && comm->grow == WN_GROW_ISSUED) {
		memcpy(mine->id, uid->internal, sizeof(mine->id));
		return GROW_HAS_ID;
	}
	if (same && comm->grow == WN_GROW_USED)
		WN_ERROR("%s: rank %d: this id served a grow already; an id of ncclCommGetUniqueId serves one grow "
			 "(make a new one)",
			 fn, comm->rank);
	else
		WN_ERROR("%s: rank %d: this id was not made by ncclCommGetUniqueId on this comm; existing ranks other "
			 "than the coordinator pass NULL",
			 fn, comm->rank);
	return GROW_BAD;
}

/* Every existing rank draws the same verdict from what all passed: the
 * coordinator's entry, or -1 (logged). */
static int grow_verdict(const struct grow_msg *all, int n, int me, const char *fn)
{
	int coord = -1;
	for (int p = 0; p < n; p++) {
		if (all[p].magic != GROW_MAGIC || (all[p].flags & GROW_BAD)) {
			if (p != me)
				WN_ERROR("%s: rank %d of the parent refused its arguments (its log says why)", fn, p);
			return -1;
		}
		if (all[p].nranks != all[0].nranks) {
			WN_ERROR("%s: rank 0 of the parent asks for %d ranks, rank %d for %d", fn, all[0].nranks, p,
				 all[p].nranks);
			return -1;
		}
		if (all[p].flags & GROW_HAS_ID) {
			if (coord >= 0) {
				WN_ERROR("%s: ranks %d and %d of the parent both pass an id; only the coordinator does", fn,
					 coord, p);
				return -1;
			}
			coord = p;
		}
	}
	if (coord < 0)
		WN_ERROR("%s: no rank of the parent passes the id of ncclCommGetUniqueId (the coordinator must)", fn);
	return coord;
}

static ncclResult_t grow_existing(struct ncclComm *comm, int nRanks, const ncclUniqueId *uid, int rank,
				  ncclComm_t *newcomm, const ncclConfig_t *config)
{
	static const char fn[] = "ncclCommGrow";
	struct grow_msg mine = {.magic = GROW_MAGIC, .nranks = nRanks};
	mine.flags = grow_check_mine(comm, nRanks, uid, rank, &mine, fn);
	struct grow_msg *all = calloc((size_t)comm->nranks, sizeof(*all));
	if (!all) {
		WN_ERROR("%s: out of memory", fn);
		return ncclSystemError;
	}
	/* Even a rank that refused its own arguments takes part, so that the
	 * others refuse too rather than wait for it. */
	int rc = weft_comm_allgather(comm->wc, &mine, all, sizeof(mine));
	/* The id is spent by this grow, whatever comes of it. */
	if (mine.flags & GROW_HAS_ID)
		comm->grow = WN_GROW_USED;
	int coord = rc == 0 ? grow_verdict(all, comm->nranks, comm->rank, fn) : -1;
	struct weft_unique_id id;
	if (coord >= 0)
		memcpy(id.internal, all[coord].id, sizeof(id.internal));
	free(all);
	if (rc != 0)
		return weft_failed(fn, "exchanging the arguments over the parent (weft_comm_allgather)", rc);
	if (coord < 0)
		return ncclInvalidArgument;
	struct ncclComm *c = wn_comm_new(comm->rank, nRanks, config, comm->device);
	if (!c) {
		WN_ERROR("%s: out of memory", fn);
		return ncclSystemError;
	}
	if (!config) {
		c->blocking = comm->blocking;
		memcpy(c->name, comm->name, sizeof(c->name));
	}
	weft_comm_t *wc = NULL;
	if ((rc = wn_comm_make(c, &id, fn, &wc)) != 0) {
		wn_comm_free(c);
		return wn_result(rc);
	}
	c->wc = wc;
	*newcomm = c;
	return ncclSuccess;
}

/* ncclCommGrow: the existing ranks keep their ranks and learn the
 * coordinator's id over the parent; the new ranks come with that id and
 * their rank; all meet at the id's rendezvous, which serves once. */
WN_API ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
				 ncclComm_t *newcomm, ncclConfig_t *config)
{
	static const char fn[] = "ncclCommGrow";
	if (newcomm)
		*newcomm = NULL;
	if (comm) {
		ncclResult_t r = check_derive(comm, newcomm, config, fn);
		if (r == ncclSuccess && comm->revoked) {
			WN_ERROR("%s: comm %p was revoked: the existing ranks agree over the parent's connections, "
				 "which the revoke stopped", fn, (void *)comm);
			r = ncclInvalidUsage;
		}
		return r != ncclSuccess ? r : grow_existing(comm, nRanks, uniqueId, rank, newcomm, config);
	}
	static const ncclUniqueId zero;
	if (!uniqueId || !memcmp(uniqueId, &zero, sizeof(zero))) {
		WN_ERROR("%s: a new rank (comm NULL) needs the coordinator's id; it is %s", fn,
			 uniqueId ? "all zeros (what a refused ncclCommGetUniqueId leaves)" : "NULL");
		return ncclInvalidArgument;
	}
	int wrc = 0;
	ncclResult_t r = wn_init_rank(newcomm, nRanks, uniqueId, rank, config, wn_current_device(), fn, &wrc);
	if (wrc == -EALREADY)
		WN_ERROR("%s: rank %d: this id served a grow already; an id of ncclCommGetUniqueId serves one grow (ask "
			 "the coordinator for a new one)",
			 fn, rank);
	return r;
}
WN_ALIAS(ncclCommGrow);
