/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: the algorithms (one-shot and reduce-scatter + allgather allreduce,
 * allgather, reduce-scatter, broadcast, reduce, alltoall, fused send/recv) and
 * weft_plugin_init, which declares the pack's parameters. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ah.h"

const struct weft_core_api *ah_core;

/* ------------------------------------------------------------- helpers */

static size_t esize(enum weft_datatype t)
{
	static const size_t sz[WEFT_DATATYPE_COUNT] = {
		[WEFT_INT8] = 1, [WEFT_UINT8] = 1, [WEFT_INT32] = 4, [WEFT_UINT32] = 4,
		[WEFT_INT64] = 8, [WEFT_UINT64] = 8, [WEFT_FLOAT16] = 2, [WEFT_BFLOAT16] = 2,
		[WEFT_FLOAT32] = 4, [WEFT_FLOAT64] = 8, [WEFT_FP8_E4M3] = 1, [WEFT_FP8_E5M2] = 1,
	};
	return (int)t >= 0 && t < WEFT_DATATYPE_COUNT ? sz[t] : 0;
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/* Elements of chunk t of a block of len elements, cel per chunk (0 past its end). */
static size_t chunk_len(size_t len, size_t cel, uint64_t t)
{
	uint64_t off = t * cel;
	if (off >= len)
		return 0;
	return len - off < cel ? (size_t)(len - off) : cel;
}

/* dst = in[0] op in[1] op ... op in[n-1] in rank order, so every rank that
 * computes a block gets the same bits. Our own input is `own` (it may be dst
 * itself when in place); peers' are in rx_ptr. */
static void reduce_ordered(struct ah_ctx *c, enum weft_datatype t, enum weft_redop op, char *dst, const char *own,
			   size_t n)
{
	size_t bytes = n * esize(t);
	int k0 = 0;
	if (c->nranks >= 2 && (own != dst || c->rank <= 1)) {
		/* The first two inputs in one pass; our own input may be dst itself
		 * only if nothing later needs it (rank 0 or 1). */
		const char *in0 = c->rank == 0 ? own : c->rx_ptr[0];
		const char *in1 = c->rank == 1 ? own : c->rx_ptr[1];
		if (weft_kit_reduce3(t, op, dst, in0, in1, n) == 0)
			k0 = 2;
	}
	if (own == dst && c->rank >= k0 && c->rank != 0) {
		memcpy(c->temp, own, bytes);
		own = c->temp;
	}
	for (int k = k0; k < c->nranks; k++) {
		const char *src = k == c->rank ? own : c->rx_ptr[k];
		if (k == 0) {
			if (src != dst)
				memcpy(dst, src, bytes);
		} else {
			weft_kit_reduce(t, op, dst, src, n);
		}
	}
	weft_kit_finish(t, op, dst, n, c->nranks);
}

struct ah_ctx *ah_ready_ctx(void *state, const struct weft_coll_args *a, int *rc)
{
	struct ah_ctx *c = state;
	*rc = c->broken ? c->broken : ah_ensure_all(c);
	ah_call_begin(c, a);
	return c;
}

/* ------------------------------------------- reduce-scatter over blocks
 * Shared by allreduce (rsag) and reduce-scatter: block b of the input (off[b],
 * len[b] elements) is reduced on rank b. Chunk t of every block moves in round t. */

struct blocks {
	int n;
	size_t base, extra; /* len[b] = base + (b < extra) */
};

static size_t blk_off(const struct blocks *bl, int b)
{
	return (size_t)b * bl->base + ((size_t)b < bl->extra ? (size_t)b : bl->extra);
}

static size_t blk_len(const struct blocks *bl, int b)
{
	return bl->base + ((size_t)b < bl->extra ? 1 : 0);
}

struct rs_plan {
	const struct weft_coll_args *a;
	struct blocks bl;
	size_t es, cel;
	const char *in;
	char *out; /* our reduced block */
};

static int rs_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rs_plan *r = arg;
	size_t mine = chunk_len(blk_len(&r->bl, c->rank), r->cel, t);
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		size_t m = chunk_len(blk_len(&r->bl, p), r->cel, t);
		if (m) {
			c->tx_src[p] = r->in + (blk_off(&r->bl, p) + t * r->cel) * r->es;
			c->tx_bytes[p] = m * r->es;
		}
		c->rx_bytes[p] = mine * r->es;
	}
	return 0;
}

static int rs_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rs_plan *r = arg;
	size_t mine = chunk_len(blk_len(&r->bl, c->rank), r->cel, t);
	if (mine)
		reduce_ordered(c, r->a->dtype, r->a->op, r->out + t * r->cel * r->es,
			       r->in + (blk_off(&r->bl, c->rank) + t * r->cel) * r->es, mine);
	return 0;
}

/* Allgather of blocks: our block (at `mine`) goes to everyone; block p lands at
 * out + off(p). */
struct ag_plan {
	struct blocks bl;
	size_t es, cel;
	const char *mine;
	char *out;
	const char *src; /* publish and pull: where our block still is (copied to mine as it goes); NULL: at mine */
};

/* a = b = src (our block goes to our slot and our output). Two memcpy calls:
 * the second reads src from cache, and libc's vector copy beats a fused loop
 * that reads src once (docs/perf/2026-11-30-vm2core-cpu-collectives-vs-openmpi-2.md). */
static void copy2(char *a, char *b, const char *src, size_t n)
{
	memcpy(a, src, n);
	memcpy(b, src, n);
}

static int ag_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct ag_plan *g = arg;
	size_t m = chunk_len(blk_len(&g->bl, c->rank), g->cel, t);
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		if (m) {
			c->tx_src[p] = g->mine + t * g->cel * g->es;
			c->tx_bytes[p] = m * g->es;
		}
		size_t k = chunk_len(blk_len(&g->bl, p), g->cel, t);
		if (k) {
			c->rx_bytes[p] = k * g->es;
			c->rx_dst[p] = g->out + (blk_off(&g->bl, p) + t * g->cel) * g->es;
		}
	}
	return 0;
}

/* ------------------------------------------ publish and pull versions
 * Used when every pair maps each other (ah_pull_ready): each rank writes its
 * chunk once into its own slot and the peers read it there. */

/* Allgather of blocks: round t publishes chunk t of our block; peers' chunks
 * go to their place in out. */
static int pl_gather_fill(void *arg, struct ah_ctx *c, uint64_t t, char *slot)
{
	struct ag_plan *g = arg;
	size_t m = chunk_len(blk_len(&g->bl, c->rank), g->cel, t);
	size_t off = t * g->cel * g->es;
	if (!m)
		return 0;
	if (g->src && g->src != g->mine)
		copy2(slot, (char *)g->mine + off, g->src + off, m * g->es); /* mine is our output block */
	else
		memcpy(slot, g->mine + off, m * g->es);
	return 0;
}

static int pl_gather_consume(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct ag_plan *g = arg;
	for (int i = 1; i < c->nranks; i++) {
		int p = (c->rank + i) % c->nranks;
		size_t k = chunk_len(blk_len(&g->bl, p), g->cel, t);
		if (k)
			memcpy(g->out + (blk_off(&g->bl, p) + t * g->cel) * g->es, c->rx_ptr[p], k * g->es);
	}
	return 0;
}

/* Reduce-scatter of blocks: a round's slot holds chunk t (cel elements) of
 * every block but ours, block b at b * cel; we reduce chunk t of ours from
 * every peer's slot. */
static int pl_rs_fill(void *arg, struct ah_ctx *c, uint64_t t, char *slot)
{
	struct rs_plan *r = arg;
	for (int b = 0; b < c->nranks; b++) {
		size_t m = chunk_len(blk_len(&r->bl, b), r->cel, t);
		if (b != c->rank && m)
			memcpy(slot + (size_t)b * r->cel * r->es, r->in + (blk_off(&r->bl, b) + t * r->cel) * r->es,
			       m * r->es);
	}
	return 0;
}

static int pl_rs_consume(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct rs_plan *r = arg;
	size_t mine = chunk_len(blk_len(&r->bl, c->rank), r->cel, t);
	if (!mine)
		return 0;
	for (int p = 0; p < c->nranks; p++)
		if (p != c->rank)
			c->rx_ptr[p] = (const char *)c->rx_ptr[p] + (size_t)c->rank * r->cel * r->es;
	reduce_ordered(c, r->a->dtype, r->a->op, r->out + t * r->cel * r->es,
		       r->in + (blk_off(&r->bl, c->rank) + t * r->cel) * r->es, mine);
	return 0;
}

/* ------------------------------------------------------------ supports */

int ah_supports(void *state, const struct weft_coll_args *a)
{
	if (a->mem_type != WEFT_MEM_HOST || !esize(a->dtype))
		return -ENOTSUP;
	if (weft_kit_coll_reduces(a->coll) && !weft_kit_reduce_supported(a->dtype, a->op))
		return -ENOTSUP;
	if (a->op == WEFT_PREMUL_SUM && weft_kit_coll_reduces(a->coll) && a->scalar_mem != WEFT_MEM_HOST)
		return -ENOTSUP;
	return 0;
}

/* A pre-multiplied sum: this rank's input times its scalar goes where the
 * sum then reads it (the output itself for allreduce and on reduce's root,
 * else a buffer of the context's), and the algorithm runs a plain sum on it,
 * in its usual order. */
int ah_premul_then(void *state, const struct weft_coll_args *a,
		   int (*run)(void *state, const struct weft_coll_args *a))
{
	struct ah_ctx *c = state;
	size_t es = esize(a->dtype);
	size_t n = a->coll == WEFT_COLL_REDUCE_SCATTER ? a->count * (size_t)c->nranks : a->count;
	struct weft_coll_args b = *a;
	b.op = WEFT_SUM;
	void *dst = a->recvbuf;
	if (a->coll == WEFT_COLL_REDUCE_SCATTER || (a->coll == WEFT_COLL_REDUCE && c->rank != a->root)) {
		if (c->premul_len < n * es) {
			void *p = NULL;
			if (posix_memalign(&p, 4096, n * es) != 0) {
				AH_LOG(WEFT_LOG_ERROR, "pre-multiplied sum: no memory for %zu bytes of scaled input", n * es);
				return -ENOMEM;
			}
			free(c->premul);
			c->premul = p;
			c->premul_len = n * es;
		}
		dst = c->premul;
	}
	int rc = weft_kit_scale(a->dtype, dst, a->sendbuf, a->scalar_host, n);
	if (rc)
		return rc;
	b.sendbuf = dst;
	return run(state, &b);
}

/* Every algorithm runs on the pack's per-communicator context. */
int ah_setup(const struct weft_algo_comm *ac, void **state)
{
	if (ac->size < offsetof(struct weft_algo_comm, pack_state) + sizeof(ac->pack_state) || !ac->pack_state)
		return -EINVAL;
	*state = ac->pack_state;
	return 0;
}

/* ----------------------------------------------------------- allreduce */

struct os_plan {
	const struct weft_coll_args *a;
	size_t es, cel;
};

static int os_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct os_plan *o = arg;
	size_t m = chunk_len(o->a->count, o->cel, t);
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		c->tx_src[p] = (const char *)o->a->sendbuf + t * o->cel * o->es;
		c->tx_bytes[p] = m * o->es;
		c->rx_bytes[p] = m * o->es;
	}
	return 0;
}

static int os_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct os_plan *o = arg;
	size_t m = chunk_len(o->a->count, o->cel, t);
	size_t off = t * o->cel * o->es;
	reduce_ordered(c, o->a->dtype, o->a->op, (char *)o->a->recvbuf + off, (const char *)o->a->sendbuf + off, m);
	return 0;
}

/* One shot: every rank sends its whole input to every peer and reduces all of
 * them locally. Latency-bound sizes; (n-1) times the data on the wire. */
static int os_fill_fn(void *arg, struct ah_ctx *c, uint64_t t, char *slot)
{
	struct os_plan *o = arg;
	size_t m = chunk_len(o->a->count, o->cel, t);
	memcpy(slot, (const char *)o->a->sendbuf + t * o->cel * o->es, m * o->es);
	return 0;
}

static int os_pull_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct os_plan *o = arg;
	size_t m = chunk_len(o->a->count, o->cel, t);
	/* Our own input is read from our slot, a copy: in place needs no temp. */
	reduce_ordered(c, o->a->dtype, o->a->op, (char *)o->a->recvbuf + t * o->cel * o->es, c->pub_slot, m);
	return 0;
}

static int allreduce_oneshot(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, allreduce_oneshot);
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	struct os_plan o = {.a = a, .es = esize(a->dtype)};
	o.cel = c->chunk / o.es;
	if (ah_pull_ready(c) && !ah_oneshot_pushes(c, a->count * o.es))
		return ah_pull_run(c, div_up(a->count, o.cel), os_fill_fn, os_pull_consume_fn, &o);
	return ah_run(c, div_up(a->count, o.cel), os_plan_fn, os_consume_fn, &o);
}

/* Reduce-scatter then allgather, all pairs at once: each rank reduces one block
 * and sends it to the others. Bandwidth-optimal: 2(n-1)/n of the data each way. */
static int allreduce_rsag(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, allreduce_rsag);
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	size_t es = esize(a->dtype), cel = c->chunk / es;
	struct blocks bl = {.n = c->nranks, .base = a->count / (size_t)c->nranks, .extra = a->count % (size_t)c->nranks};
	char *mine = (char *)a->recvbuf + blk_off(&bl, c->rank) * es;
	uint64_t rounds = div_up(blk_len(&bl, 0), cel);
	struct rs_plan r = {.a = a, .bl = bl, .es = es, .cel = cel, .in = a->sendbuf, .out = mine};
	int pull = ah_pull_ready(c) && cel / (size_t)c->nranks > 0 && !ah_rsag_pushes(c, blk_len(&bl, 0) * es);
	if (pull) {
		/* One slot carries chunk t of every peer's block. */
		r.cel = cel / (size_t)c->nranks;
		rc = ah_pull_run(c, div_up(blk_len(&bl, 0), r.cel), pl_rs_fill, pl_rs_consume, &r);
	} else {
		rc = ah_run(c, rounds, rs_plan_fn, rs_consume_fn, &r);
	}
	if (rc)
		return rc;
	if (ah_use_direct(c, blk_len(&bl, 0) * es)) {
		for (int p = 0; p < c->nranks; p++) {
			c->doff[p] = blk_off(&bl, p) * es;
			c->dbytes[p] = blk_len(&bl, p) * es;
		}
		return ah_direct_gather(c, a->recvbuf, a->count * es, c->doff, c->dbytes, NULL);
	}
	struct ag_plan g = {.bl = bl, .es = es, .cel = cel, .mine = mine, .out = a->recvbuf};
	if (pull)
		return ah_pull_run(c, rounds, pl_gather_fill, pl_gather_consume, &g);
	return ah_run(c, rounds, ag_plan_fn, NULL, &g);
}

/* ------------------------------------------------------ reduce-scatter */

static int reduce_scatter_direct(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, reduce_scatter_direct);
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	size_t es = esize(a->dtype), cel = c->chunk / es;
	struct blocks bl = {.n = c->nranks, .base = a->count, .extra = 0};
	struct rs_plan r = {.a = a, .bl = bl, .es = es, .cel = cel, .in = a->sendbuf, .out = a->recvbuf};
	return ah_run(c, div_up(a->count, cel), rs_plan_fn, rs_consume_fn, &r);
}

/* ----------------------------------------------------------- allgather */

static int allgather_direct(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	size_t es = esize(a->dtype), cel = c->chunk / es;
	struct blocks bl = {.n = c->nranks, .base = a->count, .extra = 0};
	char *own = (char *)a->recvbuf + (size_t)c->rank * a->count * es;
	int direct = ah_use_direct(c, a->count * es);
	int pull = !direct && ah_pull_ready(c);
	/* Pulling or direct, our block is copied to its place as it goes out
	 * (while it is in cache), unless the two overlap. */
	const char *in = a->sendbuf;
	int overlap = in < own + a->count * es && own < in + a->count * es;
	if (in != own && (!(pull || direct) || overlap))
		memmove(own, in, a->count * es);
	if (direct) {
		for (int p = 0; p < c->nranks; p++) {
			c->doff[p] = (size_t)p * a->count * es;
			c->dbytes[p] = a->count * es;
		}
		return ah_direct_gather(c, a->recvbuf, (size_t)c->nranks * a->count * es, c->doff, c->dbytes,
					in != own && !overlap ? in : NULL);
	}
	struct ag_plan g = {.bl = bl, .es = es, .cel = cel, .mine = own, .out = a->recvbuf,
			    .src = pull && !overlap ? in : NULL};
	if (pull)
		return ah_pull_run(c, div_up(a->count, cel), pl_gather_fill, pl_gather_consume, &g);
	return ah_run(c, div_up(a->count, cel), ag_plan_fn, NULL, &g);
}

/* ----------------------------------------------------- broadcast, reduce */

struct root_plan {
	const struct weft_coll_args *a;
	size_t es, cel;
};

static int bcast_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct root_plan *b = arg;
	size_t m = chunk_len(b->a->count, b->cel, t);
	size_t off = t * b->cel * b->es;
	if (c->rank == b->a->root) {
		for (int p = 0; p < c->nranks; p++)
			if (p != c->rank) {
				c->tx_src[p] = (const char *)b->a->sendbuf + off;
				c->tx_bytes[p] = m * b->es;
			}
	} else {
		c->rx_bytes[b->a->root] = m * b->es;
		c->rx_dst[b->a->root] = (char *)b->a->recvbuf + off;
	}
	return 0;
}

/* The root sends every chunk to each rank directly. */
static int broadcast_flat(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	struct root_plan b = {.a = a, .es = esize(a->dtype)};
	b.cel = c->chunk / b.es;
	if (c->rank == a->root && a->sendbuf != a->recvbuf)
		memmove(a->recvbuf, a->sendbuf, a->count * b.es);
	return ah_run(c, div_up(a->count, b.cel), bcast_plan_fn, NULL, &b);
}

static int reduce_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct root_plan *b = arg;
	size_t m = chunk_len(b->a->count, b->cel, t);
	if (c->rank == b->a->root) {
		for (int p = 0; p < c->nranks; p++)
			if (p != c->rank)
				c->rx_bytes[p] = m * b->es;
	} else {
		c->tx_src[b->a->root] = (const char *)b->a->sendbuf + t * b->cel * b->es;
		c->tx_bytes[b->a->root] = m * b->es;
	}
	return 0;
}

static int reduce_consume_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct root_plan *b = arg;
	if (c->rank != b->a->root)
		return 0;
	size_t m = chunk_len(b->a->count, b->cel, t);
	size_t off = t * b->cel * b->es;
	reduce_ordered(c, b->a->dtype, b->a->op, (char *)b->a->recvbuf + off, (const char *)b->a->sendbuf + off, m);
	return 0;
}

/* Every rank sends to the root, which reduces in rank order. */
static int reduce_flat(void *state, const struct weft_coll_args *a)
{
	if (a->op == WEFT_PREMUL_SUM)
		return ah_premul_then(state, a, reduce_flat);
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	struct root_plan b = {.a = a, .es = esize(a->dtype)};
	b.cel = c->chunk / b.es;
	return ah_run(c, div_up(a->count, b.cel), reduce_plan_fn, reduce_consume_fn, &b);
}

/* ------------------------------------------------------------ alltoall */

static int a2a_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct root_plan *b = arg;
	size_t m = chunk_len(b->a->count, b->cel, t);
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		size_t off = ((size_t)p * b->a->count + t * b->cel) * b->es;
		c->tx_src[p] = (const char *)b->a->sendbuf + off;
		c->tx_bytes[p] = m * b->es;
		c->rx_bytes[p] = m * b->es;
		c->rx_dst[p] = (char *)b->a->recvbuf + off;
	}
	return 0;
}

/* Block p goes straight to rank p. In place works because a round sends its
 * chunk of block p before it overwrites that chunk with what p sent. */
static int alltoall_direct(void *state, const struct weft_coll_args *a)
{
	int rc;
	struct ah_ctx *c = ah_ready_ctx(state, a, &rc);
	if (rc)
		return rc;
	struct root_plan b = {.a = a, .es = esize(a->dtype)};
	b.cel = c->chunk / b.es;
	size_t blk = a->count * b.es, own = (size_t)c->rank * blk;
	if (a->sendbuf != a->recvbuf)
		memmove((char *)a->recvbuf + own, (const char *)a->sendbuf + own, blk);
	return ah_run(c, div_up(a->count, b.cel), a2a_plan_fn, NULL, &b);
}

/* ------------------------------------------------------------ sendrecv
 * One batch of sends and receives (struct weft_p2p_op in include/weft/plugin.h). Per peer the sends
 * form one stream of chunks (each operation starts a new chunk), and so do the
 * receives; the k-th chunk of a stream moves in round k. */

struct p2p_cursor {
	size_t tx_op, tx_off; /* next send to this peer: index into ops, offset */
	size_t rx_op, rx_off;
};

struct p2p_plan {
	const struct weft_p2p_op *ops;
	size_t nops;
	struct p2p_cursor *cur;
};

static size_t next_op(const struct p2p_plan *s, size_t from, int peer, int is_send)
{
	while (from < s->nops && (s->ops[from].peer != peer || !s->ops[from].is_send != !is_send))
		from++;
	return from;
}

static int p2p_plan_fn(void *arg, struct ah_ctx *c, uint64_t t)
{
	struct p2p_plan *s = arg;
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		struct p2p_cursor *cu = &s->cur[p];
		if (cu->tx_op < s->nops) {
			const struct weft_p2p_op *op = &s->ops[cu->tx_op];
			size_t m = op->bytes - cu->tx_off < c->chunk ? op->bytes - cu->tx_off : c->chunk;
			c->tx_src[p] = (const char *)op->buf + cu->tx_off;
			c->tx_bytes[p] = m;
			if ((cu->tx_off += m) == op->bytes) {
				cu->tx_op = next_op(s, cu->tx_op + 1, p, 1);
				cu->tx_off = 0;
			}
		}
		if (cu->rx_op < s->nops) {
			const struct weft_p2p_op *op = &s->ops[cu->rx_op];
			size_t m = op->bytes - cu->rx_off < c->chunk ? op->bytes - cu->rx_off : c->chunk;
			c->rx_dst[p] = (char *)op->buf + cu->rx_off;
			c->rx_bytes[p] = m;
			if ((cu->rx_off += m) == op->bytes) {
				cu->rx_op = next_op(s, cu->rx_op + 1, p, 0);
				cu->rx_off = 0;
			}
		}
	}
	return 0;
}

static int sendrecv_direct(void *state, const struct weft_coll_args *a)
{
	struct ah_ctx *c = state;
	const struct weft_p2p_op *ops = a->sendbuf;
	size_t nops = a->count;
	if (c->broken)
		return c->broken;
	if (!ops || !nops)
		return 0;
	for (size_t i = 0; i < nops; i++)
		if (ops[i].peer < 0 || ops[i].peer >= c->nranks || (ops[i].bytes && !ops[i].buf)) {
			AH_LOG(WEFT_LOG_ERROR, "sendrecv: operation %zu names peer %d of %d ranks or a NULL buffer", i,
			       ops[i].peer, c->nranks);
			return -EINVAL;
		}
	/* Sends to ourselves pair with receives from ourselves, in order. */
	size_t si = next_op(&(struct p2p_plan){ops, nops, NULL}, 0, c->rank, 1);
	size_t ri = next_op(&(struct p2p_plan){ops, nops, NULL}, 0, c->rank, 0);
	while (si < nops || ri < nops) {
		if (si >= nops || ri >= nops || ops[si].bytes != ops[ri].bytes) {
			AH_LOG(WEFT_LOG_ERROR, "sendrecv: sends to this rank itself do not match its receives from itself");
			return -EINVAL;
		}
		memmove(ops[ri].buf, ops[si].buf, ops[si].bytes);
		si = next_op(&(struct p2p_plan){ops, nops, NULL}, si + 1, c->rank, 1);
		ri = next_op(&(struct p2p_plan){ops, nops, NULL}, ri + 1, c->rank, 0);
	}
	struct p2p_plan s = {.ops = ops, .nops = nops, .cur = calloc((size_t)c->nranks, sizeof(*s.cur))};
	if (!s.cur)
		return -ENOMEM;
	uint64_t rounds = 0;
	int rc = 0;
	for (int p = 0; p < c->nranks; p++) {
		if (p == c->rank)
			continue;
		uint64_t tx = 0, rx = 0;
		for (size_t i = 0; i < nops; i++)
			if (ops[i].peer == p && ops[i].bytes)
				*(ops[i].is_send ? &tx : &rx) += div_up(ops[i].bytes, c->chunk);
		if (tx > rounds)
			rounds = tx;
		if (rx > rounds)
			rounds = rx;
		s.cur[p].tx_op = next_op(&s, 0, p, 1);
		s.cur[p].rx_op = next_op(&s, 0, p, 0);
		/* Only the pairs this batch uses meet, in ascending order (see ah_ensure_all). */
		if ((tx || rx) && (rc = ah_ensure_peer(c, p)))
			goto out_free;
	}
	ah_call_begin(c, a);
	rc = ah_run(c, rounds, p2p_plan_fn, NULL, &s);
out_free:
	free(s.cur);
	return rc;
}

/* ----------------------------------------------------------- the table */

#define AH_ALGO(var, nm, cl, prio, fn) static struct weft_algo var = AH_ALGO_INIT(nm, cl, prio, fn)

AH_ALGO(algo_oneshot, "allreduce-oneshot", WEFT_COLL_ALLREDUCE, 20, allreduce_oneshot);
AH_ALGO(algo_rsag, "allreduce-rsag", WEFT_COLL_ALLREDUCE, 10, allreduce_rsag);
AH_ALGO(algo_allgather, "allgather-direct", WEFT_COLL_ALLGATHER, 10, allgather_direct);
AH_ALGO(algo_rs, "reduce-scatter-direct", WEFT_COLL_REDUCE_SCATTER, 10, reduce_scatter_direct);
AH_ALGO(algo_bcast, "broadcast-flat", WEFT_COLL_BROADCAST, 10, broadcast_flat);
AH_ALGO(algo_reduce, "reduce-flat", WEFT_COLL_REDUCE, 10, reduce_flat);
AH_ALGO(algo_a2a, "alltoall-direct", WEFT_COLL_ALLTOALL, 10, alltoall_direct);
AH_ALGO(algo_p2p, "sendrecv-direct", WEFT_COLL_SENDRECV, 10, sendrecv_direct);

const struct weft_algo *const ah_algos[] = {
	&algo_oneshot, &algo_rsag, &algo_allgather, &algo_rs, &algo_bcast, &algo_reduce, &algo_a2a, &algo_p2p,
	&ah_algo_rd, &ah_algo_bruck, &ah_algo_a2a_bruck, &ah_algo_halving, &ah_algo_bcast_tree, &ah_algo_reduce_tree, NULL,
};

/* A log-step algorithm serves from many_ranks ranks up, sizes up to max (or
 * from min); a limit of 0 (or many_ranks 0) turns it off. */
static void logstep_range(struct weft_algo *a, int many_ranks, uint64_t min, uint64_t max, int off)
{
	a->min_ranks = many_ranks > 0 ? many_ranks : 1;
	a->min_bytes = min;
	a->max_bytes = max;
	if (many_ranks <= 0 || off)
		a->mem_types = 0;
}

void ah_algos_configure(const struct ah_params *p)
{
	/* The one-shot allreduce serves sizes up to small_max / (ranks - 1): each
	 * rank reads and reduces every peer's input. 0 turns it off. */
	if (p->small_max == 0) {
		algo_oneshot.mem_types = 0;
	} else {
		algo_oneshot.max_bytes = p->small_max;
		algo_oneshot.max_peer_bytes = p->small_max;
	}
	logstep_range(&ah_algo_rd, p->many_ranks, 0, p->rd_max, p->rd_max == 0);
	logstep_range(&ah_algo_bruck, p->many_ranks, 0, p->bruck_max, p->bruck_max == 0);
	logstep_range(&ah_algo_a2a_bruck, p->many_ranks, 0, p->a2a_bruck_max, p->a2a_bruck_max == 0);
	logstep_range(&ah_algo_halving, p->many_ranks, 0, p->halving_max, p->halving_max == 0);
	logstep_range(&ah_algo_bcast_tree, p->many_ranks, p->tree_min, 0, 0);
	logstep_range(&ah_algo_reduce_tree, p->many_ranks, p->tree_min, 0, 0);
}

/* ----------------------------------------------------------- the plugin */

static const struct weft_algo_ops ah_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = ah_algos,
	.comm_setup = ah_comm_setup,
	.comm_teardown = ah_comm_teardown,
};

static const struct weft_plugin_desc ah_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = AH_NAME,
	.ops = &ah_ops,
};

static const struct weft_plugin_desc *const ah_descs[] = {&ah_desc, NULL};

const struct weft_kit_param ah_param_rows[] = {
	WEFT_KIT_P_SIZE("chunk", struct ah_params, chunk, "512K", 0, SIZE_MAX,
			"Bytes per pipeline chunk (one slot of a peer's scratch area); larger messages move in chunks of this size."),
	WEFT_KIT_P_SIZE("scratch", struct ah_params, scratch, "4M", 0, SIZE_MAX,
			"Bytes of receive slots per peer, registered once per communicator (at least two chunks)."),
	WEFT_KIT_P_SIZE("small_max", struct ah_params, small_max, "16K", 0, SIZE_MAX,
			"Largest allreduce the one-shot algorithm serves on 2 ranks; on n ranks small_max / (n - 1), since each rank reads every peer's input. 0 turns it off."),
	WEFT_KIT_P_BOOL("map", struct ah_params, map, "1",
			"Copy chunks straight into a peer's scratch where the transport maps it into this process (shm); 0 always puts through staging."),
	WEFT_KIT_P_SIZE("direct_min", struct ah_params, direct_min, "4M", 0, SIZE_MAX,
			"Smallest block (bytes per rank) that allgather and allreduce's allgather phase write straight into the peers' output buffers, registered for the call; 0 never."),
	WEFT_KIT_P_SIZE("cached_min", struct ah_params, cached_min, "8K", 0, SIZE_MAX,
			"Where every pair of ranks maps each other (shm) and has a CPU, smallest block that allgather and allreduce's allgather phase write straight into the peers' outputs, keeping the output buffer's registration for the next call on it; 0 never does (direct_min applies)."),
	WEFT_KIT_P_SIZE("cached_max", struct ah_params, cached_max, "0", 0, SIZE_MAX,
			"Largest block the cached direct gather serves (see cached_min); larger ones publish and pull. 0: no limit."),
	WEFT_KIT_P_BOOL("nudge", struct ah_params, nudge, "1",
			"When two ranks of a comm with a CPU per rank wait on the same CPU, the higher one moves to another CPU it may use (its affinity mask is narrowed and restored at once)."),
	WEFT_KIT_P_BOOL("cached_oversub", struct ah_params, cached_oversub, "0",
			"Use the cached direct gather also when ranks outnumber CPUs (slower there; for tests)."),
	WEFT_KIT_P_SIZE("poll_us", struct ah_params, poll_us, "20000", 0, UINT64_MAX,
			"Microseconds a wait for a peer whose scratch is mapped polls its token (spinning, then yielding the CPU) before the core's sleeping wait takes over; 0 never polls."),
	WEFT_KIT_P_SIZE("oneshot_push_max", struct ah_params, oneshot_push_max, "16K", 0, SIZE_MAX,
			"On two ranks that map each other, each with a CPU, largest allreduce that allreduce-oneshot pushes into the peers' slots instead of publishing and pulling; 0 never."),
	WEFT_KIT_P_SIZE("nt_min", struct ah_params, nt_min, "1M", 0, SIZE_MAX,
			"Out of place, smallest block that the cached direct gather puts in pieces, copying each piece to its own place with streaming stores after its puts; 0 never (one put, then one memcpy)."),
	WEFT_KIT_P_SIZE("rsag_push_min", struct ah_params, rsag_push_min, "2M", 0, SIZE_MAX,
			"Where ranks outnumber CPUs and every pair maps each other, smallest block (bytes per rank) that allreduce-rsag pushes into the peers' slots instead of publishing and pulling; 0 never."),
	WEFT_KIT_P_BOOL("rsag_push_always", struct ah_params, rsag_push_always, "0",
			"Apply rsag_push_min also where every rank has a CPU (slower there; for tests)."),
	WEFT_KIT_P_BOOL("pull", struct ah_params, pull, "1",
			"Where every pair of ranks maps each other's scratch, allreduce and allgather publish each chunk once in the rank's own slot and peers read it there; 0 always pushes."),
	WEFT_KIT_P_INT("many_ranks", struct ah_params, many_ranks, "8", 0, 1 << 20,
		       "Smallest rank count the log-step algorithms (allreduce-rd, allgather-bruck, alltoall-bruck, reduce-scatter-halving, broadcast-tree, reduce-tree) serve, and are chosen at by default within their sizes; 0 turns them off."),
	WEFT_KIT_P_SIZE("rd_max", struct ah_params, rd_max, "16K", 0, SIZE_MAX,
			"Largest allreduce that allreduce-rd (recursive doubling) serves; 0 turns it off."),
	WEFT_KIT_P_SIZE("bruck_max", struct ah_params, bruck_max, "64K", 0, SIZE_MAX,
			"Largest allgather (bytes of the whole output) that allgather-bruck serves; 0 turns it off."),
	WEFT_KIT_P_SIZE("a2a_bruck_max", struct ah_params, a2a_bruck_max, "16K", 0, SIZE_MAX,
			"Largest alltoall (bytes of the whole input) that alltoall-bruck serves; 0 turns it off."),
	WEFT_KIT_P_SIZE("halving_max", struct ah_params, halving_max, "64K", 0, SIZE_MAX,
			"Largest reduce-scatter (bytes of the whole input) that reduce-scatter-halving (recursive halving) serves; 0 turns it off."),
	WEFT_KIT_P_SIZE("tree_min", struct ah_params, tree_min, "16K", 0, SIZE_MAX,
			"Smallest broadcast and reduce that broadcast-tree and reduce-tree (pipelined binomial trees) serve."),
	WEFT_KIT_P_BOOL("numa", struct ah_params, numa, "1",
			"Number the ranks of the log-step algorithms NUMA node by NUMA node (hwloc), so that their first steps stay within a node; 0: rank order."),
	WEFT_KIT_P_STRING("transport", struct ah_params, transport, NULL, NULL,
			  "Transport the pack connects through (e.g. ofi); unset lets the core choose per peer."),
};
const size_t ah_nparams = WEFT_KIT_NROWS(ah_param_rows);

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!core || core->size < offsetof(struct weft_core_api, free) + sizeof(core->free))
		return NULL;
	ah_core = core;
	if (weft_kit_params_declare(core, AH_NAME, ah_param_rows, ah_nparams))
		return NULL; /* logged, naming the parameter */
	struct ah_params p; /* the rows' defaults, or what the user set */
	if (weft_kit_params_load(core, AH_NAME, ah_param_rows, ah_nparams, &p)) {
		AH_LOG(WEFT_LOG_ERROR, "the pack declines to load");
		return NULL;
	}
	ah_algos_configure(&p);
	return ah_descs;
}
