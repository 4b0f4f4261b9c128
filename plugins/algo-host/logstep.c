/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: log-step algorithms for many ranks on one host, over the push
 * engine (ah_run): recursive-doubling allreduce, Bruck allgather and alltoall,
 * recursive-halving reduce-scatter, pipelined binomial-tree broadcast and
 * reduce. Ranks are numbered NUMA node by NUMA node (place.c); a reduction
 * combines contiguous groups of that numbering, the lower group first, so
 * every rank that receives a result gets the same bits, run after run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ah.h"
#include "place.h"

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Piece j of a span of len bytes cut in pieces of ch bytes: its length (0
 * past the end) and, in *off, where it starts. */
static size_t piece(size_t len, size_t ch, uint64_t j, size_t *off)
{
	if (j >= div_up(len, ch)) {
		*off = 0;
		return 0;
	}
	*off = (size_t)j * ch;
	return len - *off < ch ? len - *off : ch;
}

static int ceil_log2(int n)
{
	int k = 0;
	while ((1 << k) < n)
		k++;
	return k;
}

void *ah_work(struct ah_ctx *c, size_t bytes)
{
	if (c->work && c->work_len >= bytes)
		return c->work;
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0) {
		AH_LOG(WEFT_LOG_ERROR, "no memory for %zu bytes of work space", bytes);
		return NULL;
	}
	free(c->work);
	c->work = p;
	c->work_len = bytes;
	return p;
}

int ah_place_ready(struct ah_ctx *c)
{
	if (c->placed >= 0)
		return 0;
	int n = c->nranks, rc = -ENOMEM;
	int *node = calloc((size_t)n, sizeof(*node));
	int *vr = calloc((size_t)n, sizeof(*vr)), *rv = calloc((size_t)n, sizeof(*rv));
	if (!node || !vr || !rv)
		goto err;
	int mine = c->numa ? ah_numa_here() : -1;
	if ((rc = c->prim->comm_allgather(c->comm, &mine, node, sizeof(mine)))) {
		AH_LOG(WEFT_LOG_ERROR, "cannot share the ranks' NUMA nodes: %s", weft_kit_strerror(rc));
		goto err;
	}
	int nodes = ah_place(node, n, vr);
	for (int v = 0; v < n; v++)
		rv[vr[v]] = v;
	c->vr = vr;
	c->rv = rv;
	c->placed = nodes;
	AH_LOG(WEFT_LOG_DEBUG, "log-step algorithms: %d rank(s) on %d NUMA node(s)%s", n, nodes,
	       nodes > 1 ? ", numbered node by node" : "");
	free(node);
	return 0;

err:
	c->broken = rc;
	free(node);
	free(vr);
	free(rv);
	return rc;
}

/* The context of a log-step call: peers connected, the numbering agreed. */
static struct ah_ctx *ls_ctx(void *state, const struct weft_coll_args *a, int *rc)
{
	struct ah_ctx *c = ah_ready_ctx(state, a, rc);
	if (*rc == 0)
		*rc = ah_place_ready(c);
	return c;
}

/* ---------------------------------------------- recursive doubling
 * The 2^steps participants exchange their partial results with the one whose
 * index differs in bit k, in step k. With n not a power of two, ranks 2i and
 * 2i + 1 (of the numbering) below 2 * rem fold first: 2i sends its input to
 * 2i + 1, which takes part as i, and gets the result back at the end. Every
 * step moves the whole message: for latency-bound sizes. */

struct rd {
	const struct weft_coll_args *a;
	size_t es, cel;
	uint64_t nch; /* rounds per step */
	int v, rem, steps, fold;
	int q;       /* index among the participants, -1: folded out */
	int in_recv; /* the partial result is already in recvbuf at step 0 */
};

static int rd_rank(const struct ah_ctx *c, const struct rd *d, int q)
{
	return c->vr[q < d->rem ? 2 * q + 1 : q + d->rem];
}

/* Round t's step (-1: the fold before, steps: the one after) and chunk. */
static int rd_step(const struct rd *d, uint64_t t, uint64_t *j)
{
	*j = t % d->nch;
	return (int)(t / d->nch) - d->fold;
}

static int rd_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rd *d = arg;
	uint64_t j;
	int k = rd_step(d, t, &j);
	size_t off, m = piece(d->a->count * d->es, d->cel * d->es, j, &off);
	char *out = (char *)d->a->recvbuf + off;
	const char *in = (const char *)d->a->sendbuf + off;
	if (k < 0 || k == d->steps) {
		if (d->v >= 2 * d->rem)
			return 0;
		int p = c->vr[d->v ^ 1];
		if ((d->v & 1) == (k >= 0)) { /* in: the even one sends; out: the odd one */
			c->tx_src[p] = k < 0 ? in : out;
			c->tx_bytes[p] = m;
		} else {
			c->rx_bytes[p] = m;
			c->rx_dst[p] = out;
		}
		return 0;
	}
	if (d->q < 0)
		return 0;
	int p = rd_rank(c, d, d->q ^ (1 << k));
	c->tx_src[p] = k == 0 && !d->in_recv ? in : out;
	c->tx_bytes[p] = m;
	c->rx_bytes[p] = m;
	return 0;
}

static int rd_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rd *d = arg;
	uint64_t j;
	int k = rd_step(d, t, &j);
	size_t off, m = piece(d->a->count * d->es, d->cel * d->es, j, &off), ne = m / d->es;
	char *out = (char *)d->a->recvbuf + off;
	const char *in = (const char *)d->a->sendbuf + off;
	enum weft_datatype ty = d->a->dtype;
	if (k < 0 || k == d->steps) {
		if (d->v >= 2 * d->rem)
			return 0;
		const void *x = c->rx_ptr[c->vr[d->v ^ 1]];
		if (k < 0 && (d->v & 1))
			return weft_kit_reduce3(ty, d->a->op, out, x, in, ne); /* the even one's input first */
		if (k >= 0 && !(d->v & 1))
			memcpy(out, x, m);
		return 0;
	}
	if (d->q < 0)
		return 0;
	int qp = d->q ^ (1 << k);
	const char *mine = k == 0 && !d->in_recv ? in : out, *theirs = c->rx_ptr[rd_rank(c, d, qp)];
	return weft_kit_reduce3(ty, d->a->op, out, d->q < qp ? mine : theirs, d->q < qp ? theirs : mine, ne);
}

static int allreduce_rd(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, allreduce_rd);
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	struct rd d = {.a = a, .es = weft_kit_datatype_size(a->dtype), .v = c->rv[c->rank]};
	d.cel = c->chunk / d.es;
	while ((2 << d.steps) <= n)
		d.steps++;
	d.rem = n - (1 << d.steps);
	d.fold = d.rem > 0;
	d.q = d.v < 2 * d.rem ? ((d.v & 1) ? d.v / 2 : -1) : d.v - d.rem;
	d.in_recv = d.v < 2 * d.rem && (d.v & 1);
	d.nch = div_up(a->count, d.cel);
	if (n == 1 || !a->count) {
		if (a->count && a->sendbuf != a->recvbuf)
			memmove(a->recvbuf, a->sendbuf, a->count * d.es);
		return 0;
	}
	rc = ah_run(c, d.nch * (uint64_t)(d.steps + 2 * d.fold), rd_plan_fn, rd_consume_fn, &d);
	if (rc == 0)
		weft_kit_finish(a->dtype, a->op, a->recvbuf, a->count, n);
	return rc;
}

/* ---------------------------------------------------------- Bruck
 * In step k (d = 2^k) a rank sends the min(d, n - d) blocks it holds to the
 * rank d below it and receives as many from the rank d above: after
 * ceil(log2 n) steps it holds every block. The blocks gather in a work
 * buffer in the order of the numbering from this rank up, and go to their
 * places at the end. */

struct bk {
	size_t blk, chunk;
	char *tmp;
	int v, n, steps;
	uint64_t start[33]; /* first round of each step */
};

static int bk_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct bk *b = arg;
	int k = 0;
	while (t >= b->start[k + 1])
		k++;
	int d = 1 << k, cnt = d < b->n - d ? d : b->n - d;
	size_t off, m = piece((size_t)cnt * b->blk, b->chunk, t - b->start[k], &off);
	if (!m)
		return 0;
	int to = c->vr[(b->v - d + b->n) % b->n], from = c->vr[(b->v + d) % b->n];
	c->tx_src[to] = b->tmp + off;
	c->tx_bytes[to] = m;
	c->rx_bytes[from] = m;
	c->rx_dst[from] = b->tmp + (size_t)d * b->blk + off;
	return 0;
}

static int allgather_bruck(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	size_t blk = a->count * weft_kit_datatype_size(a->dtype);
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	if (!blk)
		return 0;
	struct bk b = {.blk = blk, .chunk = c->chunk, .n = n, .v = c->rv[c->rank], .steps = ceil_log2(n)};
	if (!(b.tmp = ah_work(c, (size_t)n * blk)))
		return -ENOMEM;
	memcpy(b.tmp, in, blk);
	for (int k = 0; k < b.steps; k++) {
		int d = 1 << k, cnt = d < n - d ? d : n - d;
		b.start[k + 1] = b.start[k] + div_up((size_t)cnt * blk, b.chunk);
	}
	if ((rc = ah_run(c, b.start[b.steps], bk_plan_fn, NULL, &b)))
		return rc;
	/* Our own block first: in place it is already there, and out of place
	 * the input may overlap what the others overwrite. */
	for (int i = 0; i < n; i++) {
		char *dst = out + (size_t)c->vr[(b.v + i) % n] * blk;
		if (i)
			memcpy(dst, b.tmp + (size_t)i * blk, blk);
		else if (dst != in)
			memmove(dst, in, blk);
	}
	return 0;
}

/* Bruck's alltoall: the blocks start rotated (position i holds the block for
 * the rank numbered i above this one); in step k every block whose position
 * has bit k set goes to the rank 2^k above, packed into one span, and what
 * the rank 2^k below sends takes those positions. After ceil(log2 n) steps
 * position i holds the block from the rank i below. Every block moves up to
 * log2 n times: for small blocks, where each round's handoff costs more than
 * the copies. */

struct ba {
	size_t blk, chunk;
	char *tmp, *pack;
	int v, n, steps;
	uint64_t start[33];
};

static int ba_step(const struct ba *b, uint64_t t, uint64_t *j)
{
	int k = 0;
	while (t >= b->start[k + 1])
		k++;
	*j = t - b->start[k];
	return k;
}

/* Blocks whose position has bit k set, of n. */
static int ba_count(int n, int k)
{
	int cnt = 0;
	for (int i = 0; i < n; i++)
		cnt += (i >> k) & 1;
	return cnt;
}

static int ba_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct ba *b = arg;
	uint64_t j;
	int k = ba_step(b, t, &j), d = 1 << k;
	size_t off, m = piece((size_t)ba_count(b->n, k) * b->blk, b->chunk, j, &off);
	if (!m)
		return 0;
	if (j == 0) /* the step's first round: what it sends is final now */
		for (int i = 0, x = 0; i < b->n; i++)
			if ((i >> k) & 1)
				memcpy(b->pack + (size_t)x++ * b->blk, b->tmp + (size_t)i * b->blk, b->blk);
	int to = c->vr[(b->v + d) % b->n], from = c->vr[(b->v - d + b->n) % b->n];
	c->tx_src[to] = b->pack + off;
	c->tx_bytes[to] = m;
	c->rx_bytes[from] = m;
	return 0;
}

static int ba_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct ba *b = arg;
	uint64_t j;
	int k = ba_step(b, t, &j), d = 1 << k;
	size_t off, m = piece((size_t)ba_count(b->n, k) * b->blk, b->chunk, j, &off);
	if (!m)
		return 0;
	const char *x = c->rx_ptr[c->vr[(b->v - d + b->n) % b->n]];
	/* Packed block x of the span goes to the x-th position with bit k set. */
	for (size_t o = off; o < off + m;) {
		size_t xb = o / b->blk, within = o - xb * b->blk;
		size_t len = b->blk - within < off + m - o ? b->blk - within : off + m - o;
		int i = 0;
		for (size_t seen = 0;; i++)
			if (((i >> k) & 1) && seen++ == xb)
				break;
		memcpy(b->tmp + (size_t)i * b->blk + within, x + (o - off), len);
		o += len;
	}
	return 0;
}

static int alltoall_bruck(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	size_t blk = a->count * weft_kit_datatype_size(a->dtype);
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	if (!blk)
		return 0;
	struct ba b = {.blk = blk, .chunk = c->chunk, .n = n, .v = c->rv[c->rank], .steps = ceil_log2(n)};
	if (!(b.tmp = ah_work(c, 2 * (size_t)n * blk)))
		return -ENOMEM;
	b.pack = b.tmp + (size_t)n * blk;
	for (int i = 0; i < n; i++)
		memcpy(b.tmp + (size_t)i * blk, in + (size_t)c->vr[(b.v + i) % n] * blk, blk);
	for (int k = 0; k < b.steps; k++)
		b.start[k + 1] = b.start[k] + div_up((size_t)ba_count(n, k) * blk, b.chunk);
	if ((rc = ah_run(c, b.start[b.steps], ba_plan_fn, ba_consume_fn, &b)))
		return rc;
	for (int i = 0; i < n; i++)
		memcpy(out + (size_t)c->vr[(b.v - i + n) % n] * blk, b.tmp + (size_t)i * blk, blk);
	return 0;
}

/* ------------------------------------------------ recursive halving
 * The participants (as in recursive doubling, ranks 2i and 2i + 1 below
 * 2 * rem folded into one) start with the distance 1 and double it: in step
 * k a participant keeps the blocks of the participants whose index agrees
 * with its own in bits 0..k, sends the rest of what it holds to the partner
 * that differs in bit k, and reduces what that partner sends. In a work
 * buffer the participants' blocks lie in the bit-reversed order of their
 * indices, so what is kept and what is sent are each one span. */

struct rh {
	const struct weft_coll_args *a;
	size_t es, blk, chunk;
	char *tmp;
	size_t *pos; /* pos[i]: where position i starts in tmp (1 << steps, and the end) */
	int n, v, rem, steps, q;
	uint64_t pre, start[33], post; /* rounds: the fold-in, each step's first, the fold-out */
};

static int bitrev(int i, int bits)
{
	int r = 0;
	for (int b = 0; b < bits; b++)
		r |= ((i >> b) & 1) << (bits - 1 - b);
	return r;
}

/* Where the block of the rank numbered w lies in tmp. */
static size_t rh_block(const struct rh *h, int w)
{
	int q = w < 2 * h->rem ? w / 2 : w - h->rem;
	return h->pos[bitrev(q, h->steps)] + (w < 2 * h->rem ? (size_t)(w & 1) * h->blk : 0);
}

/* Step k's spans: what this participant keeps and what it sends, as
 * [pos[lo], pos[lo + half]). */
static void rh_spans(const struct rh *h, int k, int *keep, int *send, int *half)
{
	int b = h->steps - 1 - k, ip = bitrev(h->q, h->steps);
	*half = 1 << b;
	*keep = (ip >> b) << b;
	*send = ((ip ^ (1 << b)) >> b) << b;
}

/* Which part of the schedule round t is: -1 the fold-in, 0..steps-1 a step,
 * steps the fold-out; *j the round within it. */
static int rh_step(const struct rh *h, uint64_t t, uint64_t *j)
{
	if (t < h->pre) {
		*j = t;
		return -1;
	}
	int k = 0;
	while (k < h->steps && t >= h->start[k + 1])
		k++;
	*j = t - h->start[k];
	return k;
}

static int rh_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rh *h = arg;
	uint64_t j;
	int k = rh_step(h, t, &j);
	size_t off, m;
	if (k < 0 || k == h->steps) {
		if (h->v >= 2 * h->rem)
			return 0;
		int p = c->vr[h->v ^ 1];
		if (k < 0 && (m = piece((size_t)h->n * h->blk, h->chunk, j, &off))) {
			if (h->v & 1)
				c->rx_bytes[p] = m;
			else {
				c->tx_src[p] = (const char *)h->a->sendbuf + off;
				c->tx_bytes[p] = m;
			}
		}
		if (k >= 0 && (m = piece(h->blk, h->chunk, j, &off))) {
			if (h->v & 1) {
				c->tx_src[p] = h->tmp + rh_block(h, h->v - 1) + off;
				c->tx_bytes[p] = m;
			} else {
				c->rx_bytes[p] = m;
			}
		}
		return 0;
	}
	if (h->q < 0)
		return 0;
	int keep, send, half, qp = h->q ^ (1 << k);
	rh_spans(h, k, &keep, &send, &half);
	int p = c->vr[qp < h->rem ? 2 * qp + 1 : qp + h->rem];
	if ((m = piece(h->pos[send + half] - h->pos[send], h->chunk, j, &off))) {
		c->tx_src[p] = h->tmp + h->pos[send] + off;
		c->tx_bytes[p] = m;
	}
	if ((m = piece(h->pos[keep + half] - h->pos[keep], h->chunk, j, &off)))
		c->rx_bytes[p] = m;
	return 0;
}

/* The fold-in: the even rank's input bytes [off, off + m) (in rank order,
 * at x) meet ours in tmp's order, the even one's first. */
static int rh_fold_in(const struct ah_ctx *c, struct rh *h, const char *x, size_t off, size_t m)
{
	const char *in = (const char *)h->a->sendbuf;
	for (size_t o = off; o < off + m;) {
		size_t r = o / h->blk, within = o - r * h->blk;
		size_t len = h->blk - within < off + m - o ? h->blk - within : off + m - o;
		char *dst = h->tmp + rh_block(h, c->rv[r]) + within;
		int rc = weft_kit_reduce3(h->a->dtype, h->a->op, dst, x + (o - off), in + o, len / h->es);
		if (rc)
			return rc;
		o += len;
	}
	return 0;
}

static int rh_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rh *h = arg;
	uint64_t j;
	int k = rh_step(h, t, &j);
	size_t off, m;
	if (k < 0 || k == h->steps) {
		if (h->v >= 2 * h->rem)
			return 0;
		const char *x = c->rx_ptr[c->vr[h->v ^ 1]];
		if (k < 0 && (h->v & 1) && (m = piece((size_t)h->n * h->blk, h->chunk, j, &off)))
			return rh_fold_in(c, h, x, off, m);
		if (k >= 0 && !(h->v & 1) && (m = piece(h->blk, h->chunk, j, &off)))
			memcpy((char *)h->a->recvbuf + off, x, m);
		return 0;
	}
	if (h->q < 0)
		return 0;
	int keep, send, half, qp = h->q ^ (1 << k);
	rh_spans(h, k, &keep, &send, &half);
	if (!(m = piece(h->pos[keep + half] - h->pos[keep], h->chunk, j, &off)))
		return 0;
	char *dst = h->tmp + h->pos[keep] + off;
	const char *x = c->rx_ptr[c->vr[qp < h->rem ? 2 * qp + 1 : qp + h->rem]];
	/* The partner's group is the lower one when our bit k is set. */
	int theirs_first = (h->q >> k) & 1;
	return weft_kit_reduce3(h->a->dtype, h->a->op, dst, theirs_first ? x : dst, theirs_first ? dst : x,
				m / h->es);
}

static int reduce_scatter_halving(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, reduce_scatter_halving);
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	struct rh h = {.a = a, .es = weft_kit_datatype_size(a->dtype), .chunk = c->chunk, .n = n,
		       .v = c->rv[c->rank]};
	h.blk = a->count * h.es;
	while ((2 << h.steps) <= n)
		h.steps++;
	h.rem = n - (1 << h.steps);
	h.q = h.v < 2 * h.rem ? ((h.v & 1) ? h.v / 2 : -1) : h.v - h.rem;
	if (!h.blk)
		return 0;
	if (n == 1) {
		if (a->sendbuf != a->recvbuf)
			memmove(a->recvbuf, a->sendbuf, h.blk);
		return 0;
	}
	size_t np = (size_t)1 << h.steps, head = ((np + 1) * sizeof(size_t) + 63) & ~(size_t)63;
	char *w = ah_work(c, head + (size_t)n * h.blk);
	if (!w)
		return -ENOMEM;
	h.pos = (size_t *)(void *)w;
	h.tmp = w + head;
	h.pos[0] = 0;
	for (size_t i = 0; i < np; i++)
		h.pos[i + 1] = h.pos[i] + (bitrev((int)i, h.steps) < h.rem ? 2 : 1) * h.blk;
	if (h.v >= 2 * h.rem)
		for (int r = 0; r < n; r++)
			memcpy(h.tmp + rh_block(&h, c->rv[r]), (const char *)a->sendbuf + (size_t)r * h.blk, h.blk);
	h.pre = h.rem ? div_up((size_t)n * h.blk, h.chunk) : 0;
	h.start[0] = h.pre;
	/* Every pair must agree on where a step starts: each step takes the
	 * rounds its largest span needs. */
	for (int k = 0; k < h.steps; k++)
		h.start[k + 1] = h.start[k] + div_up(((size_t)1 << (h.steps - 1 - k)) * (h.rem ? 2 : 1) * h.blk, h.chunk);
	h.post = h.rem ? div_up(h.blk, h.chunk) : 0;
	if ((rc = ah_run(c, h.start[h.steps] + h.post, rh_plan_fn, rh_consume_fn, &h)))
		return rc;
	if (h.q >= 0)
		memcpy(a->recvbuf, h.tmp + rh_block(&h, h.v), h.blk);
	weft_kit_finish(a->dtype, a->op, a->recvbuf, a->count, n);
	return 0;
}

/* ------------------------------------------------- binomial trees
 * Numbered from the root (rel = 0): in step k the ranks below 2^k send to the
 * one 2^k above them (broadcast), or the ones 2^k above send to them
 * (reduce). Chunk j moves in step k in round j + k, so chunks stream down
 * (or up) the tree: each rank moves at most ceil(log2 n) copies of the
 * message, where the flat algorithms' root moves n - 1. */

struct tree {
	const struct weft_coll_args *a;
	size_t es, bytes, chunk;
	int n, rel, vroot, steps;
	int up;         /* broadcast: the step it receives in; reduce: sends in; -1 at the root */
	char *part;     /* reduce: where its partial result grows (NULL: a leaf sends its input) */
};

static int tree_rank(const struct ah_ctx *c, const struct tree *tr, int rel)
{
	return c->vr[(rel + tr->vroot) % tr->n];
}

static int bc_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct tree *tr = arg;
	size_t off, m;
	char *out = tr->a->recvbuf;
	if (tr->up >= 0 && t >= (uint64_t)tr->up && (m = piece(tr->bytes, tr->chunk, t - (uint64_t)tr->up, &off))) {
		int p = tree_rank(c, tr, tr->rel - (1 << tr->up));
		c->rx_bytes[p] = m;
		c->rx_dst[p] = out + off;
	}
	for (int k = tr->up + 1; k < tr->steps && tr->rel + (1 << k) < tr->n; k++) {
		if (t < (uint64_t)k || !(m = piece(tr->bytes, tr->chunk, t - (uint64_t)k, &off)))
			continue;
		int p = tree_rank(c, tr, tr->rel + (1 << k));
		c->tx_src[p] = (tr->rel ? out : (const char *)tr->a->sendbuf) + off;
		c->tx_bytes[p] = m;
	}
	return 0;
}

static int broadcast_tree(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	struct tree tr = {.a = a, .bytes = a->count * weft_kit_datatype_size(a->dtype), .chunk = c->chunk, .n = n,
			  .vroot = c->rv[a->root], .steps = ceil_log2(n)};
	tr.rel = (c->rv[c->rank] - tr.vroot + n) % n;
	tr.up = -1;
	for (int k = 0; k < tr.steps; k++)
		if (tr.rel >> k)
			tr.up = k; /* the highest bit of rel */
	if (c->rank == a->root && a->sendbuf != a->recvbuf && tr.bytes)
		memmove(a->recvbuf, a->sendbuf, tr.bytes);
	if (n == 1 || !tr.bytes)
		return 0;
	return ah_run(c, div_up(tr.bytes, tr.chunk) + (uint64_t)tr.steps - 1, bc_plan_fn, NULL, &tr);
}

/* The steps a reduce-tree rank receives in: 0 up to (not including) lim,
 * while the child exists. */
static int rt_lim(const struct tree *tr)
{
	return tr->rel ? tr->up : tr->steps;
}

static int rt_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct tree *tr = arg;
	size_t off, m;
	for (int k = 0; k < rt_lim(tr) && tr->rel + (1 << k) < tr->n; k++)
		if (t >= (uint64_t)k && (m = piece(tr->bytes, tr->chunk, t - (uint64_t)k, &off)))
			c->rx_bytes[tree_rank(c, tr, tr->rel + (1 << k))] = m;
	if (tr->rel && t >= (uint64_t)tr->up && (m = piece(tr->bytes, tr->chunk, t - (uint64_t)tr->up, &off))) {
		int p = tree_rank(c, tr, tr->rel - (1 << tr->up));
		c->tx_src[p] = (tr->part ? tr->part : (const char *)tr->a->sendbuf) + off;
		c->tx_bytes[p] = m;
	}
	return 0;
}

static int rt_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct tree *tr = arg;
	size_t off, m;
	/* For one chunk the children come in ascending steps, each the next
	 * group of the numbering: (ours op child 0) op child 1 ... */
	for (int k = 0; k < rt_lim(tr) && tr->rel + (1 << k) < tr->n; k++) {
		if (t < (uint64_t)k || !(m = piece(tr->bytes, tr->chunk, t - (uint64_t)k, &off)))
			continue;
		const void *x = c->rx_ptr[tree_rank(c, tr, tr->rel + (1 << k))];
		char *dst = tr->part + off;
		int rc = weft_kit_reduce3(tr->a->dtype, tr->a->op, dst,
					  k ? dst : (const char *)tr->a->sendbuf + off, x, m / tr->es);
		if (rc)
			return rc;
	}
	return 0;
}

static int reduce_tree(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, reduce_tree);
	int rc;
	struct ah_ctx *c = ls_ctx(state, a, &rc);
	if (rc)
		return rc;
	int n = c->nranks;
	struct tree tr = {.a = a, .es = weft_kit_datatype_size(a->dtype), .chunk = c->chunk, .n = n,
			  .vroot = c->rv[a->root], .steps = ceil_log2(n)};
	tr.bytes = a->count * tr.es;
	tr.rel = (c->rv[c->rank] - tr.vroot + n) % n;
	tr.up = -1;
	for (int k = tr.steps - 1; k >= 0; k--)
		if ((tr.rel >> k) & 1)
			tr.up = k; /* the lowest bit of rel */
	if (n == 1 || !tr.bytes) {
		if (tr.bytes && a->sendbuf != a->recvbuf)
			memmove(a->recvbuf, a->sendbuf, tr.bytes);
		return 0;
	}
	if (!tr.rel)
		tr.part = a->recvbuf;
	else if (tr.up > 0 && tr.rel + 1 < n && !(tr.part = ah_work(c, tr.bytes)))
		return -ENOMEM;
	rc = ah_run(c, div_up(tr.bytes, tr.chunk) + (uint64_t)tr.steps - 1, rt_plan_fn, rt_consume_fn, &tr);
	if (rc == 0 && !tr.rel)
		weft_kit_finish(a->dtype, a->op, a->recvbuf, a->count, n);
	return rc;
}

/* ----------------------------------------------------------- the table
 * Ranks and sizes come from the parameters (ah_algos_configure). */

struct weft_algo ah_algo_rd = AH_ALGO_INIT("allreduce-rd", WEFT_COLL_ALLREDUCE, 30, allreduce_rd);
struct weft_algo ah_algo_bruck = AH_ALGO_INIT("allgather-bruck", WEFT_COLL_ALLGATHER, 30, allgather_bruck);
struct weft_algo ah_algo_a2a_bruck = AH_ALGO_INIT("alltoall-bruck", WEFT_COLL_ALLTOALL, 30, alltoall_bruck);
struct weft_algo ah_algo_halving =
	AH_ALGO_INIT("reduce-scatter-halving", WEFT_COLL_REDUCE_SCATTER, 30, reduce_scatter_halving);
struct weft_algo ah_algo_bcast_tree = AH_ALGO_INIT("broadcast-tree", WEFT_COLL_BROADCAST, 30, broadcast_tree);
struct weft_algo ah_algo_reduce_tree = AH_ALGO_INIT("reduce-tree", WEFT_COLL_REDUCE, 30, reduce_tree);
