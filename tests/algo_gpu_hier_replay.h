/* SPDX-License-Identifier: Apache-2.0 */
/* Part of test_algo_gpu_sched.c: the schedules of communicators that span
 * hosts (plugins/algo-gpu/hier.c), replayed on the CPU for 2 to 16 ranks on 1
 * to 4 hosts, uneven layouts included. Every element carries the set of
 * ranks summed into it and the index it came from, so a move that drops,
 * doubles, misroutes or races a value fails here; the bytes each rank sends
 * off its host are checked against what a hierarchical schedule must cost. */
#include "../plugins/algo-gpu/hier.h"

struct hel {
	uint64_t ranks; /* bit q: rank q's value is in it */
	uint64_t idx;   /* the input index it came from; UINT64_MAX: unset */
};

struct hsim {
	int n;
	size_t len; /* elements per buffer */
	struct hel *buf[WAG_HIER_MAX_RANKS][3];
	struct hel *snap[WAG_HIER_MAX_RANKS][3];
	uint32_t *mark[WAG_HIER_MAX_RANKS][3]; /* round+1 of the last write; top bit: by a copy */
};

static void hsim_init(struct hsim *m, int n, size_t len, size_t in_block)
{
	memset(m, 0, sizeof(*m));
	m->n = n;
	m->len = len ? len : 1;
	for (int r = 0; r < n; r++)
		for (int b = 0; b < 3; b++) {
			m->buf[r][b] = malloc(m->len * sizeof(struct hel));
			m->snap[r][b] = malloc(m->len * sizeof(struct hel));
			m->mark[r][b] = calloc(m->len, sizeof(uint32_t));
			REQ(m->buf[r][b] && m->snap[r][b] && m->mark[r][b], "out of memory");
			for (size_t i = 0; i < m->len; i++)
				m->buf[r][b][i] = b == WAG_HB_IN && i < in_block ? (struct hel){1ull << r, i}
										 : (struct hel){0, UINT64_MAX};
		}
}

static void hsim_free(struct hsim *m)
{
	for (int r = 0; r < m->n; r++)
		for (int b = 0; b < 3; b++) {
			free(m->buf[r][b]);
			free(m->snap[r][b]);
			free(m->mark[r][b]);
		}
}

#define HCOPY 0x80000000u

/* Runs the plan round by round: each move reads the round's snapshot and
 * writes the live buffers; two writes of one element in a round are a race
 * unless both are reductions (which commute). */
static void hsim_replay(struct hsim *m, const struct wag_hier_plan *p, const struct wag_hier_layout *l,
			const char *what)
{
	size_t i = 0;
	for (uint32_t round = 0; round < p->nrounds; round++) {
		for (int r = 0; r < m->n; r++)
			for (int b = 0; b < 3; b++)
				memcpy(m->snap[r][b], m->buf[r][b], m->len * sizeof(struct hel));
		REQ(i == p->n || p->moves[i].round >= round, "%s: moves out of round order", what);
		for (; i < p->n && p->moves[i].round == round; i++) {
			const struct wag_hier_move *v = &p->moves[i];
			REQ(v->src >= 0 && v->src < m->n && v->dst >= 0 && v->dst < m->n && v->sbuf < 3 && v->dbuf < 3,
			    "%s: move %zu names rank %d -> %d, buffers %u -> %u", what, i, v->src, v->dst, v->sbuf,
			    v->dbuf);
			REQ(v->soff + v->count <= m->len && v->doff + v->count <= m->len,
			    "%s: move %zu runs past a buffer of %zu elements", what, i, m->len);
			REQ_EQ(v->inter, l->host[v->src] != l->host[v->dst]);
			REQ(!(v->src == v->dst && v->sbuf == v->dbuf && v->soff == v->doff), "%s: move %zu onto itself",
			    what, i);
			for (uint64_t e = 0; e < v->count; e++) {
				const struct hel *s = &m->snap[v->src][v->sbuf][v->soff + e];
				struct hel *d = &m->buf[v->dst][v->dbuf][v->doff + e];
				uint32_t *mk = &m->mark[v->dst][v->dbuf][v->doff + e];
				int copy = v->kind == WAG_HM_COPY;
				REQ(s->idx != UINT64_MAX, "%s: round %u: rank %d reads unset element %llu of buffer %u",
				    what, round, v->src, (unsigned long long)(v->soff + e), v->sbuf);
				if ((*mk & ~HCOPY) == round + 1)
					REQ(!copy && !(*mk & HCOPY),
					    "%s: round %u: rank %d's element %llu of buffer %u written twice, by a "
					    "copy",
					    what, round, v->dst, (unsigned long long)(v->doff + e), v->dbuf);
				*mk = (round + 1) | (copy ? HCOPY : 0);
				if (copy) {
					*d = *s;
					continue;
				}
				REQ(d->idx == s->idx, "%s: round %u: rank %d sums index %llu into index %llu", what,
				    round, v->dst, (unsigned long long)s->idx, (unsigned long long)d->idx);
				REQ((d->ranks & s->ranks) == 0,
				    "%s: round %u: rank %d element %llu sums ranks %#llx twice", what, round, v->dst,
				    (unsigned long long)(v->doff + e), (unsigned long long)(d->ranks & s->ranks));
				d->ranks |= s->ranks;
			}
		}
	}
	REQ_EQ(i, p->n);
}

static void hel_want(const struct hsim *m, int r, int b, uint64_t off, uint64_t count, uint64_t ranks, uint64_t idx0,
		     const char *what)
{
	for (uint64_t e = 0; e < count; e++) {
		const struct hel *h = &m->buf[r][b][off + e];
		REQ(h->ranks == ranks && h->idx == idx0 + e,
		    "%s: rank %d element %llu holds ranks %#llx of index %llu, not ranks %#llx of index %llu", what, r,
		    (unsigned long long)(off + e), (unsigned long long)h->ranks, (unsigned long long)h->idx,
		    (unsigned long long)ranks, (unsigned long long)(idx0 + e));
	}
}

/* Layouts: ranks per host; the labels below place them. */
struct hlay {
	int nhosts, per[4];
	int interleave; /* rank r on host r % nhosts, not in blocks */
};

static const struct hlay hlays[] = {
	{1, {2}, 0},          {1, {5}, 0},          {1, {8}, 0},          {2, {1, 1}, 0},       {2, {2, 2}, 0},
	{2, {4, 4}, 0},       {2, {8, 8}, 0},       {2, {3, 1}, 0},       {2, {1, 3}, 0},       {2, {4, 4}, 1},
	{3, {1, 1, 1}, 0},    {3, {2, 1, 1}, 0},    {3, {2, 2, 2}, 0},    {3, {5, 3, 1}, 0},    {4, {1, 1, 1, 1}, 0},
	{4, {2, 2, 2, 2}, 0}, {4, {4, 4, 4, 4}, 0}, {4, {2, 1, 1, 3}, 0}, {4, {3, 3, 3, 3}, 1},
};

static int hlay_make(const struct hlay *h, struct wag_hier_layout *l)
{
	int label[WAG_HIER_MAX_RANKS], n = 0;
	if (h->interleave) {
		for (int k = 0; k < h->per[0]; k++)
			for (int j = 0; j < h->nhosts; j++)
				label[n++] = 100 + j;
	} else {
		for (int j = 0; j < h->nhosts; j++)
			for (int k = 0; k < h->per[j]; k++)
				label[n++] = 100 + j;
	}
	REQ_EQ(wag_hier_layout_make(l, n, label), 0);
	REQ_EQ(l->nhosts, h->nhosts);
	return n;
}

static const uint64_t hcounts[] = {0, 1, 7, 64, 1000, 4097};

START_TEST(hier_allreduce)
{
	const struct hlay *h = &hlays[_i];
	struct wag_hier_layout l;
	int n = hlay_make(h, &l);
	uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
	for (int how = 0; how < 2; how++)
		for (size_t c = 0; c < sizeof(hcounts) / sizeof(hcounts[0]); c++)
			for (uint64_t gran = 1; gran <= 8; gran *= 8) {
				uint64_t count = hcounts[c];
				struct wag_hier_plan p;
				l.gran = gran;
				REQ_EQ(wag_hier_allreduce(&l, count, (enum wag_hier_inter)how, &p), 0);
				struct hsim m;
				hsim_init(&m, n, count, count);
				char what[96];
				snprintf(what, sizeof(what), "allreduce %s, %d hosts, %d ranks, %llu elements",
					 how ? "tree" : "ring", l.nhosts, n, (unsigned long long)count);
				hsim_replay(&m, &p, &l, what);
				for (int r = 0; r < n; r++)
					hel_want(&m, r, WAG_HB_OUT, 0, count, all, 0, what);
				/* Across hosts only the ranks of one segment meet: on even
				 * layouts, those of the same local index. The ring's cost:
				 * 2 (N / L) (H - 1) / H bytes off the host per rank where that
				 * divides, never a flat ring's 2 N (R - 1) / R. */
				int L = l.nlocal[0], H = l.nhosts, even = 1;
				for (int j = 0; j < H; j++)
					even &= l.nlocal[j] == L;
				for (size_t i = 0; i < p.n && even; i++)
					if (p.moves[i].inter)
						REQ_EQ(l.local[p.moves[i].src], l.local[p.moves[i].dst]);
				for (int r = 0; r < n && how == 0 && count; r++) {
					uint64_t got = wag_hier_off_host_bytes(&p, r, 4);
					if (even && gran == 1 && count % (uint64_t)(L * H) == 0)
						REQ(got == 2 * (count / (uint64_t)L) * (uint64_t)(H - 1) / (uint64_t)H *
								    4,
						    "%s: rank %d sends %llu bytes off its host, not 2 (N/L)(H-1)/H",
						    what, r, (unsigned long long)got);
					uint64_t flat = 2 * count * (uint64_t)(n - 1) / (uint64_t)n * 4;
					uint64_t slack = 2 * (uint64_t)(H * L) * gran * 4;
					REQ(got <= flat + slack,
					    "%s: rank %d sends %llu bytes off its host, past a flat ring's %llu", what,
					    r, (unsigned long long)got, (unsigned long long)flat);
				}
				if (H == 1)
					for (int r = 0; r < n; r++)
						REQ_EQ(wag_hier_off_host_bytes(&p, r, 4), 0);
				hsim_free(&m);
				wag_hier_plan_free(&p);
			}
}
END_TEST

START_TEST(hier_blocks)
{
	const struct hlay *h = &hlays[_i];
	struct wag_hier_layout l;
	int n = hlay_make(h, &l);
	uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
	int L = l.nlocal[0], H = l.nhosts, even = 1;
	for (int j = 0; j < H; j++)
		even &= l.nlocal[j] == L;
	for (size_t c = 0; c < sizeof(hcounts) / sizeof(hcounts[0]); c++) {
		uint64_t count = hcounts[c], R = (uint64_t)n;
		char what[96];
		struct wag_hier_plan p;
		struct hsim m;
		/* Reduce-scatter: rank r's output is block r of everyone's sum. */
		REQ_EQ(wag_hier_reduce_scatter(&l, count, &p), 0);
		hsim_init(&m, n, R * count, R * count);
		snprintf(what, sizeof(what), "reduce-scatter, %d hosts, %d ranks, %llu elements", H, n,
			 (unsigned long long)count);
		hsim_replay(&m, &p, &l, what);
		for (int r = 0; r < n; r++) {
			hel_want(&m, r, WAG_HB_OUT, 0, count, all, (uint64_t)r * count, what);
			if (even)
				REQ_EQ(wag_hier_off_host_bytes(&p, r, 4), (uint64_t)(H - 1) * count * 4);
		}
		hsim_free(&m);
		wag_hier_plan_free(&p);
		/* Allgather: block q of every output is rank q's input. */
		REQ_EQ(wag_hier_allgather(&l, count, &p), 0);
		hsim_init(&m, n, R * count, count);
		snprintf(what, sizeof(what), "allgather, %d hosts, %d ranks, %llu elements", H, n,
			 (unsigned long long)count);
		hsim_replay(&m, &p, &l, what);
		for (int r = 0; r < n; r++) {
			for (int q = 0; q < n; q++)
				hel_want(&m, r, WAG_HB_OUT, (uint64_t)q * count, count, 1ull << q, 0, what);
			REQ_EQ(wag_hier_off_host_bytes(&p, r, 4), (uint64_t)(H - 1) * count * 4);
		}
		hsim_free(&m);
		wag_hier_plan_free(&p);
		/* Alltoall: block q of rank r's output is block r of rank q's input. */
		REQ_EQ(wag_hier_alltoall(&l, count, &p), 0);
		hsim_init(&m, n, R * count, R * count);
		snprintf(what, sizeof(what), "alltoall, %d hosts, %d ranks, %llu elements", H, n,
			 (unsigned long long)count);
		hsim_replay(&m, &p, &l, what);
		for (int r = 0; r < n; r++)
			for (int q = 0; q < n; q++)
				hel_want(&m, r, WAG_HB_OUT, (uint64_t)q * count, count, 1ull << q, (uint64_t)r * count,
					 what);
		hsim_free(&m);
		wag_hier_plan_free(&p);
		/* Broadcast and reduce from every root: each host's data crosses
		 * to another host once (broadcast) or leaves it once (reduce). */
		for (int root = 0; root < n; root++) {
			REQ_EQ(wag_hier_broadcast(&l, count, root, &p), 0);
			hsim_init(&m, n, count, count);
			snprintf(what, sizeof(what), "broadcast root %d, %d hosts, %d ranks, %llu elements", root, H, n,
				 (unsigned long long)count);
			hsim_replay(&m, &p, &l, what);
			uint64_t off_sum = 0;
			for (int r = 0; r < n; r++) {
				hel_want(&m, r, WAG_HB_OUT, 0, count, 1ull << root, 0, what);
				off_sum += wag_hier_off_host_bytes(&p, r, 4);
			}
			REQ_EQ(off_sum, (uint64_t)(H - 1) * count * 4);
			hsim_free(&m);
			wag_hier_plan_free(&p);
			REQ_EQ(wag_hier_reduce(&l, count, root, &p), 0);
			hsim_init(&m, n, count, count);
			snprintf(what, sizeof(what), "reduce root %d, %d hosts, %d ranks, %llu elements", root, H, n,
				 (unsigned long long)count);
			hsim_replay(&m, &p, &l, what);
			hel_want(&m, root, WAG_HB_OUT, 0, count, all, 0, what);
			off_sum = 0;
			for (int r = 0; r < n; r++)
				off_sum += wag_hier_off_host_bytes(&p, r, 4);
			REQ_EQ(off_sum, (uint64_t)(H - 1) * count * 4);
			hsim_free(&m);
			wag_hier_plan_free(&p);
		}
	}
}
END_TEST

START_TEST(hier_layouts)
{
	struct wag_hier_layout l;
	int label[WAG_HIER_MAX_RANKS + 1];
	for (int i = 0; i <= WAG_HIER_MAX_RANKS; i++)
		label[i] = i / 8;
	REQ_EQ(wag_hier_layout_make(&l, 64, label), 0);
	REQ_EQ(l.nhosts, 8);
	REQ_EQ(wag_hier_layout_make(&l, 65, label), -EINVAL);
	/* Nine ranks on one host: past the per-host limit. */
	for (int i = 0; i < 9; i++)
		label[i] = 7;
	REQ_EQ(wag_hier_layout_make(&l, 9, label), -EINVAL);
	/* Hosts are numbered by their lowest rank, whatever their labels. */
	int mixed[] = {42, 7, 42, 7, 9};
	REQ_EQ(wag_hier_layout_make(&l, 5, mixed), 0);
	REQ_EQ(l.nhosts, 3);
	REQ_EQ(l.host[0], 0);
	REQ_EQ(l.host[1], 1);
	REQ_EQ(l.host[3], 1);
	REQ_EQ(l.host[4], 2);
	REQ_EQ(l.local[2], 1);
	REQ_EQ(l.member[1][1], 3);
	struct wag_hier_plan p;
	REQ_EQ(wag_hier_broadcast(&l, 8, 5, &p), -EINVAL);
	REQ_EQ(wag_hier_reduce(&l, 8, -1, &p), -EINVAL);
}
END_TEST
