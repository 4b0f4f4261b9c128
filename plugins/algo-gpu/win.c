/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: windows (weft_window_register). The core has imported every
 * rank's part at registration; here each peer's part is mapped into this GPU
 * once per window (at registration when the pack is set up by then, else at
 * the window's first call), and the ranks agree on the outcome, so that the
 * copy-engine and direct schedules find the peers' buffers of a call in
 * windows without swapping addresses (ce.c). */
#include <errno.h>
#include <stdlib.h>

#include "pack.h"

struct wag_win {
	struct wag_win *next;
	uint64_t id;
	int ok;                      /* every rank mapped every peer's part */
	char *base[WAG_MAX_RANKS];   /* rank q's part, mapped here */
};

static struct wag_win *win_find(struct wag_ctx *c, uint64_t id)
{
	for (struct wag_win *x = c->wins; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

/* Maps every peer's part of w and agrees with every rank; collective. */
static int win_map(struct wag_ctx *c, const struct weft_algo_window *w, struct wag_win **out)
{
	const struct weft_prim_api *p = c->prim;
	/* Without its record this rank still takes part, saying no, so that no
	 * peer waits; its call then fails here. */
	struct wag_win *x = calloc(1, sizeof(*x)), none;
	int32_t mine = x && c->mesh && w->mem_type == WEFT_MEM_CUDA && c->nranks <= WAG_MAX_RANKS;
	int32_t all[WAG_MAX_RANKS];
	if (!x)
		x = &none;
	x->id = w->id;
	x->base[c->rank] = w->base;
	for (int q = 0; q < c->nranks && mine; q++) {
		void *ptr = NULL;
		int rc = q == c->rank ? 0 : p->rmem_device_ptr(c->peers[q].conn, w->rmem[q], &ptr);
		if (rc != 0) {
			WAG_LOG(WEFT_LOG_DEBUG, "window %llu: cannot map rank %d's part: %s", (unsigned long long)w->id,
				q, wag_errname(rc));
			mine = 0;
		} else if (q != c->rank) {
			x->base[q] = ptr;
		}
	}
	int rc = p->comm_allgather(c->comm, &mine, all, sizeof(mine));
	if (x == &none)
		return rc ? rc : -ENOMEM;
	if (rc != 0) {
		WAG_LOG(WEFT_LOG_ERROR, "window %llu: cannot gather the ranks' mapping results: %s",
			(unsigned long long)w->id, wag_errname(rc));
		free(x);
		return rc;
	}
	x->ok = 1;
	for (int q = 0; q < c->nranks; q++)
		x->ok &= all[q] != 0;
	if (!x->ok)
		WAG_LOG(WEFT_LOG_INFO, "window %llu: some rank cannot map its peers' parts: its calls swap "
				       "buffer addresses as others do", (unsigned long long)w->id);
	x->next = c->wins;
	c->wins = x;
	*out = x;
	return 0;
}

int wag_win_register(void *pack_state, const struct weft_algo_window *w)
{
	struct wag_win *x;
	return pack_state ? win_map(pack_state, w, &x) : 0;
}

void wag_win_deregister(void *pack_state, const struct weft_algo_window *w)
{
	struct wag_ctx *c = pack_state;
	if (!c)
		return;
	for (struct wag_win **pp = &c->wins; *pp; pp = &(*pp)->next)
		if ((*pp)->id == w->id) {
			struct wag_win *x = *pp;
			*pp = x->next;
			/* The last call on the peers' mappings must be over first. */
			wag_ce_quiesce(c);
			free(x);
			return;
		}
}

void wag_win_free(struct wag_ctx *c)
{
	while (c->wins) {
		struct wag_win *x = c->wins;
		c->wins = x->next;
		free(x);
	}
}

int wag_win_parts(struct wag_ctx *c, const struct weft_algo_window *w, char **base)
{
	struct wag_win *x = win_find(c, w->id);
	int rc = x ? 0 : win_map(c, w, &x);
	if (rc != 0)
		return rc;
	if (!x->ok)
		return -ENOENT;
	for (int q = 0; q < c->nranks; q++)
		base[q] = x->base[q];
	return 0;
}
