/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: building the schedules of communicators that span hosts
 * (hier.h). The buffer is cut into one segment per local index of the
 * largest host; on a host of L ranks, local rank j owns the segments s with
 * s % L == j, so every segment has one owner on every host and the owners of
 * a segment are the ranks that meet across hosts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hier.h"

int wag_hier_layout_make(struct wag_hier_layout *l, int nranks, const int *host_label)
{
	if (!l || !host_label || nranks < 1 || nranks > WAG_HIER_MAX_RANKS)
		return -EINVAL;
	memset(l, 0, sizeof(*l));
	l->nranks = nranks;
	l->gran = 1;
	int label[WAG_HIER_MAX_HOSTS];
	for (int r = 0; r < nranks; r++) {
		int h = 0;
		while (h < l->nhosts && label[h] != host_label[r])
			h++;
		if (h == l->nhosts)
			label[l->nhosts++] = host_label[r];
		if (l->nlocal[h] == WAG_MAX_RANKS)
			return -EINVAL;
		l->host[r] = h;
		l->local[r] = l->nlocal[h];
		l->member[h][l->nlocal[h]++] = r;
	}
	return 0;
}

void wag_hier_plan_free(struct wag_hier_plan *p)
{
	if (!p)
		return;
	free(p->moves);
	memset(p, 0, sizeof(*p));
}

static int add(struct wag_hier_plan *p, const struct wag_hier_layout *l, enum wag_hier_kind kind, int src,
	       enum wag_hier_buf sb, uint64_t soff, int dst, enum wag_hier_buf db, uint64_t doff, uint64_t count)
{
	if (count == 0)
		return 0;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 64;
		struct wag_hier_move *m = realloc(p->moves, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		p->moves = m;
		p->cap = cap;
	}
	p->moves[p->n++] = (struct wag_hier_move){
		.round = p->nrounds,
		.kind = (uint8_t)kind,
		.inter = l->host[src] != l->host[dst],
		.sbuf = (uint8_t)sb,
		.dbuf = (uint8_t)db,
		.src = (int16_t)src,
		.dst = (int16_t)dst,
		.soff = soff,
		.doff = doff,
		.count = count,
	};
	return 0;
}

/* Closes the round being built: the next moves read what it wrote. */
static void end_round(struct wag_hier_plan *p)
{
	if (p->n && p->moves[p->n - 1].round == p->nrounds)
		p->nrounds++;
}

static int begin(struct wag_hier_plan *p, const struct wag_hier_layout *l)
{
	memset(p, 0, sizeof(*p));
	return l && l->nranks >= 1 && l->nhosts >= 1 ? 0 : -EINVAL;
}

/* Moves in round order (the tree's segments were built one after another),
 * stable within a round. */
static int finish(struct wag_hier_plan *p, int rc)
{
	struct wag_hier_move *sorted = rc || p->n == 0 ? NULL : malloc(p->n * sizeof(*sorted));
	if (rc == 0 && p->n && !sorted)
		rc = -ENOMEM;
	if (rc) {
		wag_hier_plan_free(p);
		return rc;
	}
	size_t k = 0;
	for (uint32_t r = 0; r < p->nrounds; r++)
		for (size_t i = 0; i < p->n; i++)
			if (p->moves[i].round == r)
				sorted[k++] = p->moves[i];
	free(p->moves);
	p->moves = sorted;
	p->cap = p->n;
	return 0;
}

static int nsegments(const struct wag_hier_layout *l)
{
	int s = 1;
	for (int h = 0; h < l->nhosts; h++)
		if (l->nlocal[h] > s)
			s = l->nlocal[h];
	return s;
}

static int owner(const struct wag_hier_layout *l, int h, int seg)
{
	return l->member[h][seg % l->nlocal[h]];
}

/* The inter-host ring over segment [off, off + len) of the owners' OUT: a
 * reduce-scatter then an allgather of H sub-chunks, H - 1 rounds each. */
static int ring_segment_step(struct wag_hier_plan *p, const struct wag_hier_layout *l, int seg, uint64_t off,
			     uint64_t len, int t, int gather)
{
	int H = l->nhosts, rc = 0;
	for (int i = 0; i < H && rc == 0; i++) {
		int c = gather ? (i + 1 - t + 2 * H) % H : (i - t + H) % H;
		uint64_t co, cl;
		wag_block(len, H, c, l->gran, &co, &cl);
		rc = add(p, l, gather ? WAG_HM_COPY : WAG_HM_REDUCE, owner(l, i, seg), WAG_HB_OUT, off + co,
			 owner(l, (i + 1) % H, seg), WAG_HB_OUT, off + co, cl);
	}
	return rc;
}

/* The binomial tree over hosts, host `top` its root, on [off, off + len) of
 * the rank pick(h) on every host, in buffer b: toward the root (reduce) or
 * away from it (broadcast). */
static int tree_level(struct wag_hier_plan *p, const struct wag_hier_layout *l, const int *pick, int top,
		      enum wag_hier_buf b, uint64_t off, uint64_t len, int reduce, int m)
{
	int H = l->nhosts, rc = 0;
	for (int rel = 0; rel + m < H && rc == 0; rel += 2 * m) {
		int a = pick[(rel + top) % H], z = pick[(rel + m + top) % H];
		rc = reduce ? add(p, l, WAG_HM_REDUCE, z, b, off, a, b, off, len)
			    : add(p, l, WAG_HM_COPY, a, b, off, z, b, off, len);
	}
	end_round(p);
	return rc;
}

static int tree(struct wag_hier_plan *p, const struct wag_hier_layout *l, const int *pick, int top, enum wag_hier_buf b,
		uint64_t off, uint64_t len, int reduce)
{
	int H = l->nhosts, rc = 0, top_mask = 1;
	while (top_mask < H)
		top_mask <<= 1;
	if (reduce)
		for (int m = 1; m < H && rc == 0; m <<= 1)
			rc = tree_level(p, l, pick, top, b, off, len, 1, m);
	else
		for (int m = top_mask >> 1; m >= 1 && rc == 0; m >>= 1)
			rc = tree_level(p, l, pick, top, b, off, len, 0, m);
	return rc;
}

int wag_hier_allreduce(const struct wag_hier_layout *l, uint64_t count, enum wag_hier_inter how,
		       struct wag_hier_plan *p)
{
	int rc = begin(p, l);
	if (rc)
		return rc;
	int S = nsegments(l), H = l->nhosts;
	/* Intra-host reduce-scatter: each segment's owner sums its host's inputs. */
	for (int h = 0; h < H && rc == 0; h++)
		for (int s = 0; s < S && rc == 0; s++) {
			uint64_t o, n;
			wag_block(count, S, s, l->gran, &o, &n);
			rc = add(p, l, WAG_HM_COPY, owner(l, h, s), WAG_HB_IN, o, owner(l, h, s), WAG_HB_OUT, o, n);
		}
	end_round(p);
	for (int h = 0; h < H && rc == 0; h++)
		for (int s = 0; s < S && rc == 0; s++) {
			uint64_t o, n;
			wag_block(count, S, s, l->gran, &o, &n);
			for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
				if (l->member[h][j] != owner(l, h, s))
					rc = add(p, l, WAG_HM_REDUCE, l->member[h][j], WAG_HB_IN, o, owner(l, h, s),
						 WAG_HB_OUT, o, n);
		}
	end_round(p);
	/* Across hosts, among each segment's owners. */
	if (H > 1 && how == WAG_HI_RING) {
		for (int gather = 0; gather < 2 && rc == 0; gather++)
			for (int t = 0; t < H - 1 && rc == 0; t++) {
				for (int s = 0; s < S && rc == 0; s++) {
					uint64_t o, n;
					wag_block(count, S, s, l->gran, &o, &n);
					rc = ring_segment_step(p, l, s, o, n, t, gather);
				}
				end_round(p);
			}
	} else if (H > 1) {
		for (int dir = 1; dir >= 0 && rc == 0; dir--) {
			/* Every segment's tree in the same rounds: one round per level. */
			uint32_t first = p->nrounds, last = first;
			for (int s = 0; s < S && rc == 0; s++) {
				int pick[WAG_HIER_MAX_HOSTS];
				for (int h = 0; h < H; h++)
					pick[h] = owner(l, h, s);
				uint64_t o, n;
				wag_block(count, S, s, l->gran, &o, &n);
				p->nrounds = first;
				rc = tree(p, l, pick, 0, WAG_HB_OUT, o, n, dir);
				if (p->nrounds > last)
					last = p->nrounds;
			}
			p->nrounds = last;
		}
	}
	/* Intra-host allgather: each owner hands its segment to its host. */
	for (int h = 0; h < H && rc == 0; h++)
		for (int s = 0; s < S && rc == 0; s++) {
			uint64_t o, n;
			wag_block(count, S, s, l->gran, &o, &n);
			for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
				if (l->member[h][j] != owner(l, h, s))
					rc = add(p, l, WAG_HM_COPY, owner(l, h, s), WAG_HB_OUT, o, l->member[h][j],
						 WAG_HB_OUT, o, n);
		}
	end_round(p);
	return finish(p, rc);
}

/* Rank b's block is collected on host h by the rank of b's local index
 * modulo h's size: b itself on its own host. */
static int collector(const struct wag_hier_layout *l, int h, int b)
{
	return l->member[h][l->local[b] % l->nlocal[h]];
}

int wag_hier_reduce_scatter(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p)
{
	int rc = begin(p, l);
	if (rc)
		return rc;
	int R = l->nranks, H = l->nhosts;
	/* Each host sums every block at its collector (b's own output on b's host). */
	for (int h = 0; h < H && rc == 0; h++)
		for (int b = 0; b < R && rc == 0; b++) {
			int c = collector(l, h, b);
			rc = add(p, l, WAG_HM_COPY, c, WAG_HB_IN, (uint64_t)b * count, c,
				 c == b ? WAG_HB_OUT : WAG_HB_TMP, c == b ? 0 : (uint64_t)b * count, count);
		}
	end_round(p);
	for (int h = 0; h < H && rc == 0; h++)
		for (int b = 0; b < R && rc == 0; b++) {
			int c = collector(l, h, b);
			for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
				if (l->member[h][j] != c)
					rc = add(p, l, WAG_HM_REDUCE, l->member[h][j], WAG_HB_IN, (uint64_t)b * count,
						 c, c == b ? WAG_HB_OUT : WAG_HB_TMP, c == b ? 0 : (uint64_t)b * count,
						 count);
		}
	end_round(p);
	/* Then every other host's partial sum goes to b, once per host. */
	for (int b = 0; b < R && rc == 0; b++)
		for (int h = 0; h < H && rc == 0; h++)
			if (h != l->host[b])
				rc = add(p, l, WAG_HM_REDUCE, collector(l, h, b), WAG_HB_TMP, (uint64_t)b * count, b,
					 WAG_HB_OUT, 0, count);
	end_round(p);
	return finish(p, rc);
}

int wag_hier_allgather(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p)
{
	int rc = begin(p, l);
	if (rc)
		return rc;
	int R = l->nranks, H = l->nhosts;
	/* Each block to its own place and to its collector on every other host. */
	for (int b = 0; b < R && rc == 0; b++)
		for (int h = 0; h < H && rc == 0; h++)
			rc = add(p, l, WAG_HM_COPY, b, WAG_HB_IN, 0, collector(l, h, b), WAG_HB_OUT,
				 (uint64_t)b * count, count);
	end_round(p);
	for (int h = 0; h < H && rc == 0; h++)
		for (int b = 0; b < R && rc == 0; b++) {
			int c = collector(l, h, b);
			for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
				if (l->member[h][j] != c)
					rc = add(p, l, WAG_HM_COPY, c, WAG_HB_OUT, (uint64_t)b * count, l->member[h][j],
						 WAG_HB_OUT, (uint64_t)b * count, count);
		}
	end_round(p);
	return finish(p, rc);
}

/* A rooted schedule's start: each host's leader is the root's collector
 * there (the root itself on its own host). */
static int rooted_begin(struct wag_hier_plan *p, const struct wag_hier_layout *l, int root, int *lead)
{
	int rc = begin(p, l);
	if (rc || root < 0 || root >= l->nranks)
		return rc ? rc : -EINVAL;
	for (int h = 0; h < l->nhosts; h++)
		lead[h] = collector(l, h, root);
	return 0;
}

int wag_hier_broadcast(const struct wag_hier_layout *l, uint64_t count, int root, struct wag_hier_plan *p)
{
	int H = l ? l->nhosts : 0, lead[WAG_HIER_MAX_HOSTS];
	int rc = rooted_begin(p, l, root, lead);
	if (rc)
		return rc;
	rc = add(p, l, WAG_HM_COPY, root, WAG_HB_IN, 0, root, WAG_HB_OUT, 0, count);
	end_round(p);
	if (rc == 0)
		rc = tree(p, l, lead, l->host[root], WAG_HB_OUT, 0, count, 0);
	for (int h = 0; h < H && rc == 0; h++)
		for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
			if (l->member[h][j] != lead[h])
				rc = add(p, l, WAG_HM_COPY, lead[h], WAG_HB_OUT, 0, l->member[h][j], WAG_HB_OUT, 0,
					 count);
	end_round(p);
	return finish(p, rc);
}

int wag_hier_reduce(const struct wag_hier_layout *l, uint64_t count, int root, struct wag_hier_plan *p)
{
	int H = l ? l->nhosts : 0, lead[WAG_HIER_MAX_HOSTS];
	int rc = rooted_begin(p, l, root, lead);
	if (rc)
		return rc;
	/* Partial sums in the leaders' scratch, the root's output last. */
	for (int h = 0; h < H && rc == 0; h++)
		rc = add(p, l, WAG_HM_COPY, lead[h], WAG_HB_IN, 0, lead[h], WAG_HB_TMP, 0, count);
	end_round(p);
	for (int h = 0; h < H && rc == 0; h++)
		for (int j = 0; j < l->nlocal[h] && rc == 0; j++)
			if (l->member[h][j] != lead[h])
				rc = add(p, l, WAG_HM_REDUCE, l->member[h][j], WAG_HB_IN, 0, lead[h], WAG_HB_TMP, 0,
					 count);
	end_round(p);
	if (rc == 0)
		rc = tree(p, l, lead, l->host[root], WAG_HB_TMP, 0, count, 1);
	if (rc == 0)
		rc = add(p, l, WAG_HM_COPY, root, WAG_HB_TMP, 0, root, WAG_HB_OUT, 0, count);
	end_round(p);
	return finish(p, rc);
}

int wag_hier_alltoall(const struct wag_hier_layout *l, uint64_t count, struct wag_hier_plan *p)
{
	int rc = begin(p, l);
	if (rc)
		return rc;
	for (int r = 0; r < l->nranks && rc == 0; r++)
		for (int q = 0; q < l->nranks && rc == 0; q++)
			rc = add(p, l, WAG_HM_COPY, r, WAG_HB_IN, (uint64_t)q * count, q, WAG_HB_OUT,
				 (uint64_t)r * count, count);
	end_round(p);
	return finish(p, rc);
}

uint64_t wag_hier_off_host_bytes(const struct wag_hier_plan *p, int r, uint32_t esize)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < p->n; i++)
		if (p->moves[i].inter && p->moves[i].src == r)
			sum += p->moves[i].count * esize;
	return sum;
}
