/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the CPU interpreter (interp.h). Offsets and sizes follow MSCCL++
 * 0.9's executor (execution_plan.cc): every buffer of a rank is cut into
 * chunks of one size, counted in units of buffer_alignment, and a
 * threadblock group splits each reference evenly among its members. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "geom.h"
#include "interp.h"

#define WP_TMP_BYTES (64u << 10)

void wp_chan_pair(const struct wp_plan *plan, uint32_t rank, enum wp_chan kind, uint32_t chan, uint32_t *peer,
		  uint32_t *k)
{
	const struct wp_list *l = &plan->ranks[rank].peers[kind];
	*peer = l->v[chan];
	*k = 0;
	for (uint32_t i = 0; i < chan; i++)
		*k += l->v[i] == *peer;
}

static uint32_t count_to(const struct wp_plan *plan, uint32_t a, uint32_t b, enum wp_chan kind)
{
	const struct wp_list *l = &plan->ranks[a].peers[kind];
	uint32_t n = 0;
	for (uint32_t i = 0; i < l->n; i++)
		n += l->v[i] == b;
	return n;
}

uint32_t wp_pair_count(const struct wp_plan *plan, uint32_t a, uint32_t b, enum wp_chan kind)
{
	uint32_t x = count_to(plan, a, b, kind), y = count_to(plan, b, a, kind);
	return x > y ? x : y;
}

/* Whether rank a's plan reaches b (a channel or a remote buffer). */
int wp_reaches(const struct wp_plan *p, uint32_t a, uint32_t b)
{
	const struct wp_rank *r = &p->ranks[a];
	for (int k = 0; k < WP_CHAN_KINDS; k++)
		for (uint32_t i = 0; i < r->peers[k].n; i++)
			if (r->peers[k].v[i] == b)
				return 1;
	for (uint32_t i = 0; i < r->nrbufs; i++)
		if (r->rbufs[i].rank == b)
			return 1;
	return 0;
}

/* Whether the pair needs a channel kind: channels of it, or a remote
 * buffer either side reaches through it. */
int wp_pair_needs(const struct wp_plan *p, uint32_t a, uint32_t b, enum wp_chan kind)
{
	if (wp_pair_count(p, a, b, kind))
		return 1;
	for (int side = 0; side < 2; side++) {
		const struct wp_rank *r = &p->ranks[side ? b : a];
		uint32_t other = side ? a : b;
		for (uint32_t i = 0; i < r->nrbufs; i++)
			if (r->rbufs[i].rank == other && (r->rbufs[i].access & (1u << kind)))
				return 1;
	}
	return 0;
}

int wp_state_init(struct wp_state *st, const struct wp_plan *plan, uint32_t rank)
{
	memset(st, 0, sizeof(*st));
	const struct wp_rank *rk = &plan->ranks[rank];
	for (int k = 0; k < WP_CHAN_KINDS; k++) {
		st->nchan[k] = rk->peers[k].n;
		if (!(st->waited[k] = calloc(rk->peers[k].n + 1, sizeof(uint64_t)))) {
			wp_state_fini(st);
			return -ENOMEM;
		}
	}
	st->nsems = rk->nsems;
	if (!(st->sems = calloc(rk->nsems + 1, sizeof(int64_t)))) {
		wp_state_fini(st);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < rk->nsems; i++)
		st->sems[i] = rk->sem_init[i];
	return 0;
}

void wp_state_fini(struct wp_state *st)
{
	for (int k = 0; k < WP_CHAN_KINDS; k++)
		free(st->waited[k]);
	free(st->sems);
	memset(st, 0, sizeof(*st));
}

/* ------------------------------------------------------------- geometry */
/* geom.h holds the arithmetic, shared with the device interpreter. */
static void rank_geometry(const struct wp_rank *rk, uint64_t in, uint64_t out, uint64_t *size, uint32_t *n)
{
	wp_geom_rank(rk->chunks[WP_BUF_INPUT], rk->chunks[WP_BUF_OUTPUT], in, out, size, n);
}

int wp_sizes_ok(const struct wp_plan *plan, uint32_t rank, uint64_t in, uint64_t out, char *err, size_t errlen)
{
	const struct wp_rank *rk = &plan->ranks[rank];
	uint64_t a = plan->buffer_alignment;
	uint32_t ic = rk->chunks[WP_BUF_INPUT], oc = rk->chunks[WP_BUF_OUTPUT];
	const char *why = NULL;
	if (in % a || out % a)
		why = "a size is not a multiple of buffer_alignment";
	else if ((ic && (in / a) % ic) || (oc && (out / a) % oc))
		why = "a size does not divide into the plan's chunks";
	else if (ic && oc && in / ic != out / oc)
		why = "input and output chunks would differ in size";
	else if (plan->protocol == WP_PROTO_LL && a % 8)
		why = "LL packets need buffer_alignment to be a multiple of 8";
	if (!why)
		return 0;
	snprintf(err, errlen, "%s: rank %u: input %llu and output %llu bytes: %s (alignment %llu, %u and %u chunks)",
		 plan->file, rank, (unsigned long long)in, (unsigned long long)out, why, (unsigned long long)a, ic, oc);
	return -EINVAL;
}

int wp_collective(const char *name, enum weft_collective *c)
{
	static const struct {
		const char *name;
		enum weft_collective c;
	} map[] = {{"allreduce", WEFT_COLL_ALLREDUCE},
		   {"allgather", WEFT_COLL_ALLGATHER},
		   {"reducescatter", WEFT_COLL_REDUCE_SCATTER},
		   {"alltoall", WEFT_COLL_ALLTOALL}};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(name, map[i].name)) {
			*c = map[i].c;
			return 0;
		}
	return -ENOTSUP;
}

void wp_call_bytes(enum weft_collective c, uint32_t nranks, uint64_t block, uint64_t *in, uint64_t *out)
{
	*in = *out = block;
	if (c == WEFT_COLL_ALLGATHER)
		*out = block * nranks;
	else if (c == WEFT_COLL_REDUCE_SCATTER)
		*in = block * nranks;
	else if (c == WEFT_COLL_ALLTOALL)
		*in = *out = block * nranks;
}

int wp_call_fits(const struct wp_plan *plan, enum weft_collective c, uint64_t block, char *err, size_t errlen)
{
	uint64_t in, out;
	wp_call_bytes(c, plan->nranks, block, &in, &out);
	uint64_t msg = c == WEFT_COLL_ALLGATHER ? out : in;
	if (msg < plan->min_message_size || msg > plan->max_message_size) {
		snprintf(err, errlen, "%s: a message of %llu bytes is outside the plan's range %llu..%llu", plan->file,
			 (unsigned long long)msg, (unsigned long long)plan->min_message_size,
			 (unsigned long long)plan->max_message_size);
		return -EINVAL;
	}
	for (uint32_t r = 0; r < plan->nranks; r++) {
		int rc = wp_sizes_ok(plan, r, in, out, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

uint64_t wp_scratch_bytes(const struct wp_plan *plan, uint32_t rank, uint64_t in, uint64_t out)
{
	const struct wp_rank *rk = &plan->ranks[rank];
	uint64_t size, a = plan->buffer_alignment;
	uint32_t n;
	rank_geometry(rk, in, out, &size, &n);
	uint64_t bytes = (size + n - 1) / n * rk->chunks[WP_BUF_SCRATCH];
	if (plan->protocol == WP_PROTO_LL)
		bytes *= 2; /* a packet carries 8 bytes of data in 16 */
	bytes = (bytes + a - 1) / a * a;
	return plan->double_scratch ? 2 * bytes : bytes;
}

/* Odd calls take the first half, even ones the second (the executor's
 * flag parity), so consecutive calls never share packet slots. */
uint64_t wp_scratch_half(const struct wp_plan *plan, uint32_t rank, uint64_t in, uint64_t out, uint32_t flag)
{
	if (!plan->double_scratch || (flag & 1))
		return 0;
	return wp_scratch_bytes(plan, rank, in, out) / 2;
}

/* -------------------------------------------------------------- running */
static int fail(struct wp_run *r, uint32_t tb, const struct wp_op *op, int rc, const char *fmt, ...)
{
	int n = snprintf(r->err, sizeof(r->err), "%s: rank %u, threadblock %u, op %s: ", r->plan->file, r->rank_id,
			 tb, wp_op_name(op->kind));
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(r->err))
		vsnprintf(r->err + n, sizeof(r->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

int wp_run_init(struct wp_run *r, const struct wp_plan *plan, uint32_t rank, const struct wp_call *call,
		const struct wp_env *env, struct wp_state *st)
{
	memset(r, 0, sizeof(*r));
	r->plan = plan;
	r->rank = &plan->ranks[rank];
	r->rank_id = rank;
	r->call = *call;
	r->env = env;
	r->st = st;
	rank_geometry(r->rank, call->in_bytes, call->out_bytes, &r->rank_size, &r->nchunks);
	r->tmp_len = WP_TMP_BYTES;
	r->tbs = calloc(r->rank->ntbs + 1, sizeof(*r->tbs));
	r->tmp = malloc(2 * r->tmp_len);
	if (!r->tbs || !r->tmp) {
		wp_run_fini(r);
		return -ENOMEM;
	}
	return 0;
}

void wp_run_fini(struct wp_run *r)
{
	free(r->tbs);
	free(r->tmp);
	free(r->sigs);
	r->tbs = NULL;
	r->tmp = NULL;
	r->sigs = NULL;
}

static int defer_signal(struct wp_run *r, enum wp_chan kind, uint32_t chan)
{
	if (r->nsigs == r->sigcap) {
		uint32_t cap = r->sigcap ? 2 * r->sigcap : 16;
		struct wp_sig *g = realloc(r->sigs, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		r->sigs = g;
		r->sigcap = cap;
	}
	r->sigs[r->nsigs++] = (struct wp_sig){kind, chan};
	return 0;
}

static int send_signals(struct wp_run *r)
{
	const struct wp_env *e = r->env;
	int rc = 0;
	for (uint32_t i = 0; i < r->nsigs && !rc; i++)
		if ((rc = e->signal(e->ctx, r->sigs[i].kind, r->sigs[i].chan)))
			snprintf(r->err, sizeof(r->err), "%s: rank %u: signalling %s channel %u: %s", r->plan->file,
				 r->rank_id, r->sigs[i].kind == WP_CHAN_PORT ? "port" : "memory", r->sigs[i].chan,
				 weft_kit_strerror(rc));
	r->nsigs = 0;
	return rc;
}

/* The byte range of an op's reference in a pipeline step: at offset within
 * it, at most unit bytes (the whole of it outside pipelines). */
struct span {
	uint64_t off, len;
};

static struct span step_span(const struct wp_run *r, const struct wp_buff *b, const struct wp_op *op, uint64_t at,
			     uint64_t unit)
{
	struct span s;
	wp_step_span(r->plan->buffer_alignment, r->rank_size, r->nchunks, b->index, b->size, op->tbg_id, op->tbg_size,
		     at, unit, &s.off, &s.len);
	return s;
}

static char *local_buf(const struct wp_run *r, enum wp_buf t)
{
	return r->env->buf[t];
}

/* The rank's remote buffer a reference names, mapped; NULL and an error
 * when it is not (a port-only peer). */
static char *remote_buf(struct wp_run *r, uint32_t tb, const struct wp_op *op, const struct wp_buff *b, int *rc)
{
	const struct wp_threadblock *t = &r->rank->tbs[tb];
	uint32_t idx = t->rbufs[op->chan].v[b->buffer_id];
	char *p = r->env->rbuf ? r->env->rbuf[idx] : NULL;
	if (!p)
		*rc = fail(r, tb, op, -ENOTSUP, "rank %u's buffer is not mapped into this process", b->peer);
	return p;
}

static uint32_t rbuf_index(const struct wp_run *r, uint32_t tb, const struct wp_op *op, const struct wp_buff *b)
{
	return r->rank->tbs[tb].rbufs[op->chan].v[b->buffer_id];
}

static uint32_t chan_of(const struct wp_run *r, uint32_t tb, const struct wp_op *op, uint32_t i)
{
	return r->rank->tbs[tb].chans[op->chan].v[op->chan_ids[i]];
}

/* --------------------------------------------------------------- packets */
/* LL16: per 16 bytes, two 8-byte words of 4 data bytes and the flag. Each
 * word is stored and loaded whole, so a reader that sees the flag sees the
 * data stored with it. */
static int pkts_ready(const char *p, uint64_t npkts, uint32_t flag)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (uint64_t i = 0; i < 2 * npkts; i++)
		if ((uint32_t)(__atomic_load_n(&w[i], __ATOMIC_ACQUIRE) >> 32) != flag)
			return 0;
	return 1;
}

/* The data of packets pkts_ready found; each word's flag is checked again
 * as it is read, so packets overwritten in between (a peer that ran ahead
 * of what the plan allows) fail the call instead of giving wrong data. */
static int pkts_read(const char *p, char *data, uint64_t npkts, uint32_t flag)
{
	const uint64_t *w = (const uint64_t *)(const void *)p;
	for (uint64_t i = 0; i < 2 * npkts; i++) {
		uint64_t v = __atomic_load_n(&w[i], __ATOMIC_ACQUIRE);
		if ((uint32_t)(v >> 32) != flag)
			return -EPROTO;
		uint32_t d = (uint32_t)v;
		memcpy(data + 4 * i, &d, 4);
	}
	return 0;
}

static void pkts_write(char *p, const char *data, uint64_t npkts, uint32_t flag)
{
	uint64_t *w = (uint64_t *)(void *)p;
	for (uint64_t i = 0; i < 2 * npkts; i++) {
		uint32_t d;
		memcpy(&d, data + 4 * i, 4);
		__atomic_store_n(&w[i], (uint64_t)d | (uint64_t)flag << 32, __ATOMIC_RELEASE);
	}
}

/* ------------------------------------------------------------- data ops */
static int copy_op(struct wp_run *r, uint32_t tb, const struct wp_op *op, uint64_t at, uint64_t unit)
{
	int rc = 0;
	for (uint32_t i = 0; i < op->ndst; i++) {
		const struct wp_buff *s = &op->src[op->nsrc == op->ndst ? i : 0], *d = &op->dst[i];
		struct span ss = step_span(r, s, op, at, unit), ds = step_span(r, d, op, at, unit);
		char *sp = s->remote ? remote_buf(r, tb, op, s, &rc) : local_buf(r, s->type);
		char *dp = d->remote ? remote_buf(r, tb, op, d, &rc) : local_buf(r, d->type);
		if (!sp || !dp)
			return rc;
		memmove(dp + ds.off, sp + ss.off, ss.len < ds.len ? ss.len : ds.len);
	}
	return 1;
}

static int port_put_op(struct wp_run *r, uint32_t tb, const struct wp_op *op, uint64_t at, uint64_t unit)
{
	const struct wp_env *e = r->env;
	for (uint32_t i = 0; i < op->ndst; i++) {
		const struct wp_buff *s = &op->src[i], *d = &op->dst[i];
		struct span ss = step_span(r, s, op, at, unit), ds = step_span(r, d, op, at, unit);
		uint32_t ch = chan_of(r, tb, op, i);
		int rc = ds.len ? e->port_put(e->ctx, ch, rbuf_index(r, tb, op, d), ds.off, s->type, ss.off, ds.len) : 0;
		if (!rc && op->kind != WP_OP_PUT)
			rc = defer_signal(r, WP_CHAN_PORT, ch);
		if (!rc && op->kind == WP_OP_PWSF)
			rc = e->flush(e->ctx, ch);
		if (rc)
			return fail(r, tb, op, rc, "on port channel %u: %s", ch, weft_kit_strerror(rc));
	}
	return 1;
}

/* dst[0] (and, with send, the remote destinations after the first nlocal)
 * get src[0] reduced with every other source, in source order; the sources
 * after the first are remote for rre/rres. Blocks of the temporary keep
 * any overlap of sources and destinations harmless. */
static int reduce_op(struct wp_run *r, uint32_t tb, const struct wp_op *op, uint64_t at, uint64_t unit)
{
	int rc = 0, remote_srcs = op->kind == WP_OP_RRE || op->kind == WP_OP_RRES;
	size_t es = weft_kit_datatype_size(r->call.dtype);
	const char *src[WP_MAX_OP_BUFFS];
	char *dst[WP_MAX_OP_BUFFS];
	struct span sp[WP_MAX_OP_BUFFS], dp[WP_MAX_OP_BUFFS];
	for (uint32_t i = 0; i < op->nsrc; i++) {
		sp[i] = step_span(r, &op->src[i], op, at, unit);
		src[i] = i && remote_srcs ? remote_buf(r, tb, op, &op->src[i], &rc) : local_buf(r, op->src[i].type);
		if (!src[i])
			return rc;
	}
	for (uint32_t i = 0; i < op->ndst; i++) {
		dp[i] = step_span(r, &op->dst[i], op, at, unit);
		dst[i] = op->dst[i].remote ? remote_buf(r, tb, op, &op->dst[i], &rc) : local_buf(r, op->dst[i].type);
		if (!dst[i])
			return rc;
	}
	uint64_t len = sp[0].len, blk = r->tmp_len - r->tmp_len % es;
	for (uint64_t o = 0; o < len; o += blk) {
		uint64_t n = len - o < blk ? len - o : blk;
		memcpy(r->tmp, src[0] + sp[0].off + o, n);
		for (uint32_t i = 1; i < op->nsrc; i++)
			weft_kit_reduce(r->call.dtype, r->call.op, r->tmp, src[i] + sp[i].off + o, n / es);
		for (uint32_t i = 0; i < op->ndst; i++)
			memcpy(dst[i] + dp[i].off + o, r->tmp, n);
	}
	return 1;
}

/* Packet ops. Scratch holds packets at twice the data offset; sizes are of
 * the data. Sources after the first are packets in this rank's scratch,
 * which must all have arrived before the op runs (a yield otherwise). */
static int packet_reduce_op(struct wp_run *r, uint32_t tb, const struct wp_op *op)
{
	int rc = 0;
	uint32_t flag = r->call.flag;
	size_t es = weft_kit_datatype_size(r->call.dtype);
	char *scratch = local_buf(r, WP_BUF_SCRATCH);
	struct span s0 = step_span(r, &op->src[0], op, 0, UINT64_MAX);
	uint64_t npk = s0.len / 8;
	for (uint32_t i = 1; i < op->nsrc; i++)
		if (!pkts_ready(scratch + 2 * step_span(r, &op->src[i], op, 0, UINT64_MAX).off, npk, flag))
			return 0;
	int keep = op->kind == WP_OP_RECPKT || op->kind == WP_OP_RECSPKT;
	int send = op->kind == WP_OP_RESPKT || op->kind == WP_OP_RECSPKT;
	uint32_t first_remote = keep ? 2 : 1;
	char *acc = r->tmp, *in = r->tmp + r->tmp_len;
	uint64_t blk = r->tmp_len / 8;
	for (uint64_t p = 0; p < npk; p += blk) {
		uint64_t n = npk - p < blk ? npk - p : blk;
		for (uint32_t i = 1; i < op->nsrc; i++) {
			const char *pk = scratch + 2 * step_span(r, &op->src[i], op, 0, UINT64_MAX).off + 16 * p;
			if (pkts_read(pk, i == 1 ? acc : in, n, flag))
				return fail(r, tb, op, -EPROTO, "packets changed while read: a peer ran ahead");
			if (i > 1)
				weft_kit_reduce(r->call.dtype, r->call.op, acc, in, 8 * n / es);
		}
		const char *plain = local_buf(r, op->src[0].type) + s0.off + 8 * p;
		if (op->nsrc > 1)
			weft_kit_reduce(r->call.dtype, r->call.op, acc, plain, 8 * n / es);
		else
			memcpy(acc, plain, 8 * n);
		struct span d0 = step_span(r, &op->dst[0], op, 0, UINT64_MAX);
		memcpy(local_buf(r, op->dst[0].type) + d0.off + 8 * p, acc, 8 * n);
		if (keep) {
			struct span d1 = step_span(r, &op->dst[1], op, 0, UINT64_MAX);
			pkts_write(local_buf(r, op->dst[1].type) + 2 * d1.off + 16 * p, acc, n, flag);
		}
		for (uint32_t i = first_remote; send && i < op->ndst; i++) {
			char *rp = remote_buf(r, tb, op, &op->dst[i], &rc);
			if (!rp)
				return rc;
			pkts_write(rp + 2 * step_span(r, &op->dst[i], op, 0, UINT64_MAX).off + 16 * p, acc, n, flag);
		}
	}
	return 1;
}

static int packet_op(struct wp_run *r, uint32_t tb, const struct wp_op *op)
{
	const struct wp_env *e = r->env;
	uint32_t flag = r->call.flag;
	int rc = 0;
	switch (op->kind) {
	case WP_OP_PPKT:
		for (uint32_t i = 0; i < op->ndst; i++) {
			struct span s = step_span(r, &op->src[i], op, 0, UINT64_MAX);
			struct span d = step_span(r, &op->dst[i], op, 0, UINT64_MAX);
			if (op->chan == WP_CHAN_PORT) {
				/* The source is packets already (cpkt made them), put as bytes. */
				uint32_t ch = chan_of(r, tb, op, i);
				if ((rc = e->port_put(e->ctx, ch, rbuf_index(r, tb, op, &op->dst[i]), 2 * d.off,
						      op->src[i].type, 2 * s.off, 2 * s.len)))
					return fail(r, tb, op, rc, "on port channel %u: %s", ch, weft_kit_strerror(rc));
				continue;
			}
			char *rp = remote_buf(r, tb, op, &op->dst[i], &rc);
			if (!rp)
				return rc;
			pkts_write(rp + 2 * d.off, local_buf(r, op->src[i].type) + s.off, s.len / 8, flag);
		}
		return 1;
	case WP_OP_RPPKT: {
		struct span s = step_span(r, &op->src[0], op, 0, UINT64_MAX);
		char *pk = local_buf(r, WP_BUF_SCRATCH) + 2 * s.off;
		if (!pkts_ready(pk, s.len / 8, flag))
			return 0;
		for (uint32_t i = 0; i < op->ndst; i++) {
			struct span d = step_span(r, &op->dst[i], op, 0, UINT64_MAX);
			if (op->chan == WP_CHAN_PORT) {
				uint32_t ch = chan_of(r, tb, op, i);
				if ((rc = e->port_put(e->ctx, ch, rbuf_index(r, tb, op, &op->dst[i]), 2 * d.off,
						      WP_BUF_SCRATCH, 2 * s.off, 2 * s.len)))
					return fail(r, tb, op, rc, "on port channel %u: %s", ch, weft_kit_strerror(rc));
				continue;
			}
			char *rp = remote_buf(r, tb, op, &op->dst[i], &rc);
			if (!rp)
				return rc;
			/* Forwarded whole: the data with this call's flag. */
			memcpy(rp + 2 * d.off, pk, 2 * s.len);
		}
		return 1;
	}
	case WP_OP_CPKT: {
		struct span s = step_span(r, &op->src[0], op, 0, UINT64_MAX);
		struct span d = step_span(r, &op->dst[0], op, 0, UINT64_MAX);
		pkts_write(local_buf(r, op->dst[0].type) + 2 * d.off, local_buf(r, op->src[0].type) + s.off, s.len / 8,
			   flag);
		return 1;
	}
	case WP_OP_UPKT: {
		struct span s = step_span(r, &op->src[0], op, 0, UINT64_MAX);
		struct span d = step_span(r, &op->dst[0], op, 0, UINT64_MAX);
		char *pk = local_buf(r, WP_BUF_SCRATCH) + 2 * s.off;
		if (!pkts_ready(pk, s.len / 8, flag))
			return 0;
		if (pkts_read(pk, local_buf(r, op->dst[0].type) + d.off, s.len / 8, flag))
			return fail(r, tb, op, -EPROTO, "packets changed while read: a peer ran ahead");
		return 1;
	}
	default:
		return packet_reduce_op(r, tb, op);
	}
}

/* ------------------------------------------------------------ sync ops */
static int wait_op(struct wp_run *r, uint32_t tb, const struct wp_op *op, struct wp_tb_run *t)
{
	const struct wp_env *e = r->env;
	for (; t->part < op->nchan_ids; t->part++) {
		uint32_t ch = chan_of(r, tb, op, t->part);
		uint64_t want = r->st->waited[op->chan][ch] + 1;
		int rc = e->poll(e->ctx, op->chan, ch, want);
		if (rc < 0)
			return fail(r, tb, op, rc, "waiting on %s channel %u: %s",
				    op->chan == WP_CHAN_PORT ? "port" : "memory", ch, weft_kit_strerror(rc));
		if (rc == 0)
			return 0;
		r->st->waited[op->chan][ch] = want;
	}
	return 1;
}

static int barrier_op(struct wp_run *r, const struct wp_op *op, struct wp_tb_run *t)
{
	struct wp_barrier *b = &r->bars[op->barrier_id];
	if (!t->bar_in) {
		t->bar_in = 1;
		t->bar_gen = b->gen;
		if (++b->count >= op->barrier_ntb) {
			b->count = 0;
			b->gen++;
		}
	}
	if (b->gen == t->bar_gen)
		return 0;
	t->bar_in = 0;
	return 1;
}

static int run_op(struct wp_run *r, uint32_t tb, const struct wp_op *op, uint64_t at, uint64_t unit,
		  struct wp_tb_run *t)
{
	const struct wp_env *e = r->env;
	int rc;
	switch (op->kind) {
	case WP_OP_NOP:
		return 1;
	case WP_OP_BARRIER:
		return barrier_op(r, op, t);
	case WP_OP_SIGNAL:
	case WP_OP_RLXSIGNAL:
		for (uint32_t i = 0; i < op->nchan_ids; i++) {
			uint32_t ch = chan_of(r, tb, op, i);
			if ((rc = defer_signal(r, op->chan, ch)))
				return fail(r, tb, op, rc, "signalling channel %u: %s", ch, weft_kit_strerror(rc));
		}
		return 1;
	case WP_OP_WAIT:
	case WP_OP_RLXWAIT:
		return wait_op(r, tb, op, t);
	case WP_OP_FLUSH:
		for (uint32_t i = 0; i < op->nchan_ids; i++) {
			uint32_t ch = chan_of(r, tb, op, i);
			if ((rc = e->flush(e->ctx, ch)))
				return fail(r, tb, op, rc, "flushing port channel %u: %s", ch, weft_kit_strerror(rc));
		}
		return 1;
	case WP_OP_PUT:
	case WP_OP_PWS:
	case WP_OP_PWSF:
		if (op->chan == WP_CHAN_PORT)
			return port_put_op(r, tb, op, at, unit);
		return copy_op(r, tb, op, at, unit);
	case WP_OP_GET:
	case WP_OP_COPY:
		return copy_op(r, tb, op, at, unit);
	case WP_OP_RE:
	case WP_OP_RES:
	case WP_OP_RRE:
	case WP_OP_RRES:
		return reduce_op(r, tb, op, at, unit);
	case WP_OP_PPKT:
	case WP_OP_RPPKT:
	case WP_OP_RESPKT:
	case WP_OP_CPKT:
	case WP_OP_UPKT:
	case WP_OP_REPKT:
	case WP_OP_RECPKT:
	case WP_OP_RECSPKT:
		return packet_op(r, tb, op);
	case WP_OP_SEM_ACQUIRE:
		for (; t->part < op->nsems; t->part++) {
			int64_t *s = &r->st->sems[op->sem_ids[t->part]];
			if (*s <= 0)
				return 0;
			(*s)--;
		}
		return 1;
	case WP_OP_SEM_RELEASE:
		for (uint32_t i = 0; i < op->nsems; i++)
			r->st->sems[op->sem_ids[i]]++;
		return 1;
	default:
		return fail(r, tb, op, -ENOTSUP, "not run on host buffers");
	}
}

static uint64_t pipeline_steps(const struct wp_run *r, const struct wp_op *op)
{
	return wp_pipeline_steps(r->plan->buffer_alignment, r->rank_size, r->nchunks, op->num_chunks, op->unit_size);
}

/* Runs threadblock tb until it waits or ends: 1 ran something, 0 waits,
 * negative on failure. */
static int run_tb(struct wp_run *r, uint32_t tb)
{
	struct wp_tb_run *t = &r->tbs[tb];
	const struct wp_threadblock *b = &r->rank->tbs[tb];
	int ran = 0;
	while (t->pc < b->nops) {
		const struct wp_op *op = &b->ops[t->pc];
		int rc;
		if (op->kind == WP_OP_PIPELINE) {
			uint64_t steps = pipeline_steps(r, op);
			rc = 1;
			while (t->iter < steps) {
				while (t->sub < op->nops) {
					rc = run_op(r, tb, &op->ops[t->sub], (uint64_t)t->iter * op->unit_size,
						    op->unit_size, t);
					if (rc <= 0)
						return rc < 0 ? rc : ran;
					ran = 1;
					t->part = 0;
					t->sub++;
				}
				t->sub = 0;
				t->iter++;
			}
			t->iter = 0;
		} else if ((rc = run_op(r, tb, op, 0, UINT64_MAX, t)) <= 0) {
			return rc < 0 ? rc : ran;
		}
		ran = 1;
		t->part = 0;
		t->pc++;
	}
	if (!t->done) {
		t->done = 1;
		r->ndone++;
		ran = 1;
	}
	return ran;
}

int wp_run_step(struct wp_run *r)
{
	int any = 0;
	for (uint32_t tb = 0; tb < r->rank->ntbs; tb++) {
		if (r->tbs[tb].done)
			continue;
		int rc = run_tb(r, tb);
		if (rc < 0)
			return rc;
		any |= rc;
	}
	int rc = send_signals(r);
	if (rc)
		return rc;
	if (r->ndone == r->rank->ntbs)
		return 1;
	return any ? 0 : -EAGAIN;
}

static const struct wp_op *current_op(const struct wp_run *r, uint32_t tb, uint32_t *sub_out)
{
	const struct wp_tb_run *t = &r->tbs[tb];
	const struct wp_op *op = &r->rank->tbs[tb].ops[t->pc];
	*sub_out = UINT32_MAX;
	if (op->kind == WP_OP_PIPELINE) {
		*sub_out = t->sub;
		op = &op->ops[t->sub];
	}
	return op;
}

static unsigned wait_kind(const struct wp_op *op)
{
	switch (op->kind) {
	case WP_OP_WAIT:
	case WP_OP_RLXWAIT:
		return 1;
	case WP_OP_BARRIER:
	case WP_OP_SEM_ACQUIRE:
		return 4;
	default:
		return 2;
	}
}

unsigned wp_run_waits(const struct wp_run *r)
{
	unsigned k = 0;
	uint32_t sub;
	for (uint32_t tb = 0; tb < r->rank->ntbs; tb++)
		if (!r->tbs[tb].done)
			k |= wait_kind(current_op(r, tb, &sub));
	return k;
}

void wp_run_where(const struct wp_run *r, char *buf, size_t len)
{
	size_t n = 0;
	if (len)
		buf[0] = 0;
	for (uint32_t tb = 0; tb < r->rank->ntbs && n < len; tb++) {
		if (r->tbs[tb].done)
			continue;
		uint32_t sub;
		const struct wp_op *op = current_op(r, tb, &sub);
		static const char *const what[] = {"", "a signal", "packets", "", "other threadblocks"};
		char at[32];
		if (sub == UINT32_MAX)
			snprintf(at, sizeof(at), "%u", r->tbs[tb].pc);
		else
			snprintf(at, sizeof(at), "%u.%u", r->tbs[tb].pc, sub);
		int w = snprintf(buf + n, len - n, "%sthreadblock %u op %s (%s) waits for %s", n ? "; " : "", tb, at,
				 wp_op_name(op->kind), what[wait_kind(op)]);
		if (w < 0)
			break;
		n += (size_t)w;
	}
}
