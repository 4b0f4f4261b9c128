/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: reads an MSCCL++ 0.9 execution plan from its JSON tree into
 * struct wp_plan, checking each field where it is read, so that every error
 * names the file, line, rank, threadblock and operation it is about. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/kit.h>

#include "json.h"
#include "plan.h"
#include "wp_sha256.h"

/* How an operation's src_buff or dst_buff entries must be: none at all, all
 * local buffers, all remote ones, or the first one (two) local and the rest
 * remote (MSCCL++'s kernels read them by position that way). */
enum refs { REFS_NONE, REFS_LOCAL, REFS_REMOTE, REFS_1LOCAL, REFS_2LOCAL };

#define F_MULTICAST (1u << 0)
#define F_CHAN (1u << 1)        /* needs channel_type memory or port */
#define F_MEM (1u << 2)         /* memory channels only */
#define F_PORT (1u << 3)        /* port channels only */
#define F_CHAN_IDS (1u << 4)    /* needs channel_ids */
#define F_IDS_PER_DST (1u << 5) /* on port channels, one channel id per destination */
#define F_SAME_COUNT (1u << 6)  /* as many sources as destinations, paired by position */
#define F_SEMS (1u << 7)
#define F_BARRIER (1u << 8)
#define F_PIPELINE (1u << 9)

static const struct op_spec {
	const char *name;
	unsigned flags;
	unsigned char src, src_min, src_max;
	unsigned char dst, dst_min, dst_max;
} specs[WP_OP_COUNT] = {
#define B WP_MAX_OP_BUFFS
	[WP_OP_NOP] = {"nop", 0, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_BARRIER] = {"barrier", F_BARRIER, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_PUT] = {"put", F_CHAN | F_IDS_PER_DST | F_SAME_COUNT, REFS_LOCAL, 1, B, REFS_REMOTE, 1, B},
	[WP_OP_PWS] = {"pws", F_CHAN | F_PORT | F_IDS_PER_DST | F_SAME_COUNT, REFS_LOCAL, 1, B, REFS_REMOTE, 1, B},
	[WP_OP_PWSF] = {"pwsf", F_CHAN | F_PORT | F_IDS_PER_DST | F_SAME_COUNT, REFS_LOCAL, 1, B, REFS_REMOTE, 1, B},
	[WP_OP_GET] = {"get", F_CHAN | F_MEM | F_SAME_COUNT, REFS_REMOTE, 1, B, REFS_LOCAL, 1, B},
	[WP_OP_COPY] = {"copy", 0, REFS_LOCAL, 1, 1, REFS_LOCAL, 1, 1},
	[WP_OP_SIGNAL] = {"signal", F_CHAN | F_CHAN_IDS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_WAIT] = {"wait", F_CHAN | F_CHAN_IDS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_FLUSH] = {"flush", F_CHAN | F_PORT | F_CHAN_IDS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_RE] = {"re", 0, REFS_LOCAL, 1, B, REFS_LOCAL, 1, 1},
	[WP_OP_RES] = {"res", F_MEM, REFS_LOCAL, 1, B, REFS_1LOCAL, 1, B},
	[WP_OP_RRE] = {"rre", F_MEM, REFS_1LOCAL, 1, B, REFS_LOCAL, 1, 1},
	[WP_OP_RRES] = {"rres", F_MEM, REFS_1LOCAL, 1, B, REFS_1LOCAL, 1, B},
	[WP_OP_PPKT] = {"ppkt", F_CHAN | F_IDS_PER_DST | F_SAME_COUNT, REFS_LOCAL, 1, B, REFS_REMOTE, 1, B},
	[WP_OP_RPPKT] = {"rppkt", F_CHAN | F_IDS_PER_DST, REFS_LOCAL, 1, 1, REFS_REMOTE, 1, B},
	[WP_OP_RESPKT] = {"respkt", F_MEM, REFS_LOCAL, 1, B, REFS_1LOCAL, 1, B},
	[WP_OP_CPKT] = {"cpkt", 0, REFS_LOCAL, 1, 1, REFS_LOCAL, 1, 1},
	[WP_OP_UPKT] = {"upkt", 0, REFS_LOCAL, 1, 1, REFS_LOCAL, 1, 1},
	[WP_OP_REPKT] = {"repkt", 0, REFS_LOCAL, 1, B, REFS_LOCAL, 1, 1},
	[WP_OP_RECPKT] = {"recpkt", 0, REFS_LOCAL, 1, B, REFS_LOCAL, 2, 2},
	[WP_OP_RECSPKT] = {"recspkt", F_MEM, REFS_LOCAL, 1, B, REFS_2LOCAL, 2, B},
	[WP_OP_GLRES] = {"glres", F_MULTICAST, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_GSTORE] = {"gstore", F_MULTICAST, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_GSTOREPKT] = {"gstorepkt", F_MULTICAST, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_RLXSIGNAL] = {"rlxsignal", F_CHAN | F_CHAN_IDS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_RLXWAIT] = {"rlxwait", F_CHAN | F_CHAN_IDS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_PIPELINE] = {"pipeline", F_PIPELINE, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_SEM_ACQUIRE] = {"sem_acquire", F_SEMS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
	[WP_OP_SEM_RELEASE] = {"sem_release", F_SEMS, REFS_NONE, 0, 0, REFS_NONE, 0, 0},
#undef B
};

/* The multicast instructions MSCCL++'s DSL can write: the three of the
 * table, and glre (group load-reduce), which 0.9's executor does not run. */
static const char *const multicast_ops[] = {"glres", "gstore", "gstorepkt", "glre"};

static const char *const chan_names[] = {"memory", "port", "none", "switch"};
static const char *const buf_names[] = {"i", "o", "s"};
static const char *const buf_words[] = {"input", "output", "scratch"};
static const char *const proto_names[] = {"Simple", "LL"};
static const char *const reduce_names[] = {"sum", "min", "max"};

const char *wp_op_name(enum wp_op_kind kind)
{
	return (unsigned)kind < WP_OP_COUNT ? specs[kind].name : "?";
}

/* One load: where messages go and what they are about. */
struct ld {
	const char *file;
	char *err;
	size_t errlen;
	int rank, tb, op, sub; /* -1 outside one; sub: the op's place in a pipeline */
	struct wp_plan *plan;
};

static int ld_fail(struct ld *l, const struct wp_json *at, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int ld_fail(struct ld *l, const struct wp_json *at, int rc, const char *fmt, ...)
{
	char ctx[96] = "";
	size_t n = 0;
	va_list ap;

	if (!l->err || !l->errlen)
		return rc;
	if (l->rank >= 0)
		n += (size_t)snprintf(ctx + n, sizeof(ctx) - n, "rank %d, ", l->rank);
	if (l->tb >= 0 && n < sizeof(ctx))
		n += (size_t)snprintf(ctx + n, sizeof(ctx) - n, "threadblock %d, ", l->tb);
	if (l->op >= 0 && n < sizeof(ctx)) {
		if (l->sub >= 0)
			n += (size_t)snprintf(ctx + n, sizeof(ctx) - n, "op %d.%d, ", l->op, l->sub);
		else
			n += (size_t)snprintf(ctx + n, sizeof(ctx) - n, "op %d, ", l->op);
	}
	if (n >= 2 && n < sizeof(ctx))
		ctx[n - 2] = 0; /* the last ", " becomes ": " below */
	int k;
	if (at)
		k = snprintf(l->err, l->errlen, "%s:%u:%u: %s%s", l->file, at->line, at->col, ctx, *ctx ? ": " : "");
	else
		k = snprintf(l->err, l->errlen, "%s: %s%s", l->file, ctx, *ctx ? ": " : "");
	if (k >= 0 && (size_t)k < l->errlen) {
		va_start(ap, fmt);
		vsnprintf(l->err + k, l->errlen - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return rc;
}

#define ld_bad(l, at, ...) ld_fail((l), (at), -EINVAL, __VA_ARGS__)

static int ld_nomem(struct ld *l)
{
	return ld_fail(l, NULL, -ENOMEM, "out of memory");
}

static int ld_want(struct ld *l, const struct wp_json *v, enum wp_json_type t, const char *what)
{
	if (v->type == t || (t == WP_JSON_INT && v->type == WP_JSON_UINT))
		return 0;
	return ld_bad(l, v, "%s must be %s, not %s", what, wp_json_type_name(t), wp_json_type_name(v->type));
}

/* An unsigned integer no larger than max. */
static int ld_uint_val(struct ld *l, const struct wp_json *v, const char *what, uint64_t max, uint64_t *out)
{
	uint64_t u;

	if (v->type == WP_JSON_INT) {
		if (v->i < 0)
			return ld_bad(l, v, "%s must not be negative (it is %lld)", what, (long long)v->i);
		u = (uint64_t)v->i;
	} else if (v->type == WP_JSON_UINT) {
		u = v->u;
	} else {
		return ld_want(l, v, WP_JSON_INT, what);
	}
	if (u > max)
		return ld_bad(l, v, "%s is %llu, more than %llu", what, (unsigned long long)u, (unsigned long long)max);
	*out = u;
	return 0;
}

/* The member key of object obj; when absent, an error if required, else
 * *out = NULL. */
static int ld_member(struct ld *l, const struct wp_json *obj, const char *key, int required, const struct wp_json **out)
{
	const struct wp_json *v = wp_json_get(obj, key);
	*out = v;
	if (!v && required)
		return ld_bad(l, obj, "missing '%s'", key);
	return 0;
}

static int ld_uint(struct ld *l, const struct wp_json *obj, const char *key, int required, uint64_t def, uint64_t max,
		   uint64_t *out)
{
	const struct wp_json *v;
	char what[64];
	int rc;

	if ((rc = ld_member(l, obj, key, required, &v)))
		return rc;
	if (!v) {
		*out = def;
		return 0;
	}
	snprintf(what, sizeof(what), "'%s'", key);
	return ld_uint_val(l, v, what, max, out);
}

static int ld_u32(struct ld *l, const struct wp_json *obj, const char *key, int required, uint32_t def, uint32_t max,
		  uint32_t *out)
{
	uint64_t u;
	int rc = ld_uint(l, obj, key, required, def, max, &u);
	if (!rc)
		*out = (uint32_t)u;
	return rc;
}

static int ld_bool(struct ld *l, const struct wp_json *obj, const char *key, int required, int def, int *out)
{
	const struct wp_json *v;
	char what[64];
	int rc;

	if ((rc = ld_member(l, obj, key, required, &v)))
		return rc;
	if (!v) {
		*out = def;
		return 0;
	}
	snprintf(what, sizeof(what), "'%s'", key);
	if ((rc = ld_want(l, v, WP_JSON_BOOL, what)))
		return rc;
	*out = v->b;
	return 0;
}

/* A string of 1 to WP_MAX_NAME bytes without NUL; *out points into the tree. */
static int ld_str_val(struct ld *l, const struct wp_json *v, const char *what, const char **out)
{
	int rc;

	if ((rc = ld_want(l, v, WP_JSON_STRING, what)))
		return rc;
	if (!v->str.len || v->str.len > WP_MAX_NAME || strlen(v->str.s) != v->str.len)
		return ld_bad(l, v, "%s must be 1 to %d characters without NUL", what, WP_MAX_NAME);
	*out = v->str.s;
	return 0;
}

/* One of names[0..n): its index in *out, or def when absent and optional. */
static int ld_enum_val(struct ld *l, const struct wp_json *v, const char *what, const char *const *names, int n,
		       int *out)
{
	const char *s;
	char list[128] = "";
	size_t used = 0;
	int rc;

	if ((rc = ld_str_val(l, v, what, &s)))
		return rc;
	for (int k = 0; k < n; k++)
		if (!strcmp(s, names[k])) {
			*out = k;
			return 0;
		}
	for (int k = 0; k < n && used < sizeof(list); k++)
		used += (size_t)snprintf(list + used, sizeof(list) - used, "%s\"%s\"", k ? ", " : "", names[k]);
	return ld_bad(l, v, "%s is \"%.40s\"; expected %s", what, s, list);
}

static int ld_enum(struct ld *l, const struct wp_json *obj, const char *key, int required, int def,
		   const char *const *names, int n, int *out)
{
	const struct wp_json *v;
	char what[64];
	int rc;

	if ((rc = ld_member(l, obj, key, required, &v)))
		return rc;
	if (!v) {
		*out = def;
		return 0;
	}
	snprintf(what, sizeof(what), "'%s'", key);
	return ld_enum_val(l, v, what, names, n, out);
}

/* An array of at most max entries (NULL when absent and optional). */
static int ld_array(struct ld *l, const struct wp_json *obj, const char *key, int required, size_t max,
		    const struct wp_json **out)
{
	const struct wp_json *v;
	char what[64];
	int rc;

	if ((rc = ld_member(l, obj, key, required, &v)))
		return rc;
	if (v) {
		snprintf(what, sizeof(what), "'%s'", key);
		if ((rc = ld_want(l, v, WP_JSON_ARRAY, what)))
			return rc;
		if (v->arr.n > max)
			return ld_bad(l, v, "'%s' has %zu entries, more than %zu", key, v->arr.n, max);
	}
	*out = v;
	return 0;
}

/* An array of unsigned integers below bound, copied into a new list. */
static int ld_id_list(struct ld *l, const struct wp_json *arr, const char *key, uint64_t bound, const char *bwhat,
		      uint32_t **out)
{
	uint32_t *v = NULL;
	char what[64];
	int rc;

	if (arr->arr.n && !(v = wp_malloc(arr->arr.n * sizeof(*v))))
		return ld_nomem(l);
	for (size_t k = 0; k < arr->arr.n; k++) {
		uint64_t u;
		snprintf(what, sizeof(what), "'%s'[%zu]", key, k);
		if ((rc = ld_uint_val(l, arr->arr.v[k], what, UINT32_MAX, &u)))
			goto err;
		if (u >= bound) {
			rc = ld_bad(l, arr->arr.v[k], "%s is %llu, but %s", what, (unsigned long long)u, bwhat);
			goto err;
		}
		v[k] = (uint32_t)u;
	}
	*out = v;
	return 0;
err:
	wp_free(v);
	return rc;
}

static int ld_object(struct ld *l, const struct wp_json *v, const char *what)
{
	return ld_want(l, v, WP_JSON_OBJECT, what);
}

static void op_fini(struct wp_op *op)
{
	for (uint32_t k = 0; k < op->nops; k++)
		op_fini(&op->ops[k]);
	wp_free(op->ops);
	wp_free(op->chan_ids);
	wp_free(op->src);
	wp_free(op->dst);
	wp_free(op->sem_ids);
}

static void rank_fini(struct wp_rank *r)
{
	for (uint32_t t = 0; t < r->ntbs; t++) {
		struct wp_threadblock *tb = &r->tbs[t];
		for (uint32_t k = 0; k < tb->nops; k++)
			op_fini(&tb->ops[k]);
		wp_free(tb->ops);
		for (int c = 0; c < WP_CHAN_KINDS; c++) {
			wp_free(tb->chans[c].v);
			wp_free(tb->rbufs[c].v);
		}
	}
	wp_free(r->tbs);
	for (int c = 0; c < WP_CHAN_KINDS; c++)
		wp_free(r->peers[c].v);
	wp_free(r->rbufs);
	wp_free(r->sem_init);
}

void wp_plan_free(struct wp_plan *plan)
{
	if (!plan)
		return;
	for (uint32_t r = 0; r < plan->nranks; r++)
		rank_fini(&plan->ranks[r]);
	wp_free(plan->ranks);
	wp_free(plan->file);
	wp_free(plan->name);
	wp_free(plan->collective);
	wp_free(plan);
}

static uint32_t op_count(const struct wp_op *ops, uint32_t n)
{
	uint32_t c = n;
	for (uint32_t k = 0; k < n; k++)
		c += op_count(ops[k].ops, ops[k].nops);
	return c;
}

uint32_t wp_tb_op_count(const struct wp_threadblock *tb)
{
	return op_count(tb->ops, tb->nops);
}

/* One src_buff or dst_buff entry of an op whose channel kind is known. */
static int ld_buff(struct ld *l, const struct wp_json *bv, const char *list, size_t k, const struct wp_rank *r,
		   const struct wp_threadblock *tb, enum wp_chan chan, struct wp_buff *b)
{
	const struct wp_json *type, *bid, *sw;
	char what[64];
	uint64_t u;
	int rc;

	snprintf(what, sizeof(what), "%s[%zu]", list, k);
	if ((rc = ld_object(l, bv, what)))
		return rc;
	if ((rc = ld_u32(l, bv, "index", 1, 0, UINT32_MAX, &b->index)) ||
	    (rc = ld_u32(l, bv, "size", 1, 0, UINT32_MAX, &b->size)))
		return rc;
	if (!b->size)
		return ld_bad(l, bv, "%s has size 0; a buffer reference covers at least one chunk", what);
	type = wp_json_get(bv, "type");
	bid = wp_json_get(bv, "buffer_id");
	if ((sw = wp_json_get(bv, "switch_channel_id")))
		return ld_fail(l, sw, -ENOTSUP,
			       "%s names a switch channel (NVLink multicast), which weft does not use; plan refused",
			       what);
	if (!type == !bid)
		return ld_bad(l, bv,
			      "%s needs exactly one of 'type' (a buffer of this rank) and 'buffer_id' (a "
			      "remote buffer)",
			      what);
	if (type) {
		int t;
		char tw[80];
		snprintf(tw, sizeof(tw), "%s 'type'", what);
		if ((rc = ld_enum_val(l, type, tw, buf_names, WP_BUF_KINDS, &t)))
			return rc;
		b->remote = 0;
		b->type = (enum wp_buf)t;
		b->peer = r->id;
	} else {
		char bw[80];
		snprintf(bw, sizeof(bw), "%s 'buffer_id'", what);
		if ((rc = ld_uint_val(l, bid, bw, UINT32_MAX, &u)))
			return rc;
		if (chan != WP_CHAN_MEMORY && chan != WP_CHAN_PORT)
			return ld_bad(l, bid,
				      "%s is a remote buffer, reached through the op's channels, but the op has no "
				      "'channel_type' memory or port",
				      what);
		if (u >= tb->rbufs[chan].n)
			return ld_bad(l, bid,
				      "%s is %llu, but the threadblock references %u remote buffers through %s "
				      "channels ('remote_buffer_refs')",
				      bw, (unsigned long long)u, tb->rbufs[chan].n, chan_names[chan]);
		const struct wp_remote_buf *rb = &r->rbufs[tb->rbufs[chan].v[u]];
		b->remote = 1;
		b->buffer_id = (uint32_t)u;
		b->type = rb->type;
		b->peer = rb->rank;
	}
	uint32_t have = l->plan->ranks[b->peer].chunks[b->type];
	if ((uint64_t)b->index + b->size > have) {
		if (b->remote)
			return ld_bad(l, bv, "%s covers chunks %u to %llu of rank %u's %s buffer, which has %u chunks",
				      what, b->index, (unsigned long long)b->index + b->size - 1, b->peer,
				      buf_words[b->type], have);
		return ld_bad(l, bv, "%s covers chunks %u to %llu of the %s buffer, which has %u chunks", what,
			      b->index, (unsigned long long)b->index + b->size - 1, buf_words[b->type], have);
	}
	return 0;
}

/* src_buff or dst_buff of an op: counts and which entries are local. */
static int ld_buffs(struct ld *l, const struct wp_json *ov, const char *key, unsigned refs, unsigned min, unsigned max,
		    const struct wp_rank *r, const struct wp_threadblock *tb, struct wp_op *op, struct wp_buff **out,
		    uint32_t *nout)
{
	const struct op_spec *sp = &specs[op->kind];
	const struct wp_json *arr;
	struct wp_buff *b = NULL;
	int rc;

	if ((rc = ld_array(l, ov, key, 0, WP_MAX_OP_BUFFS, &arr)))
		return rc;
	size_t n = arr ? arr->arr.n : 0;
	if (refs == REFS_NONE && arr)
		return ld_bad(l, arr, "operation '%s' takes no '%s'", sp->name, key);
	if (n < min || n > max) {
		if (min == max)
			return ld_bad(l, arr ? arr : ov, "operation '%s' needs %u '%s' entr%s, not %zu", sp->name, min,
				      key, min == 1 ? "y" : "ies", n);
		return ld_bad(l, arr ? arr : ov, "operation '%s' needs %u to %u '%s' entries, not %zu", sp->name, min,
			      max, key, n);
	}
	if (n && !(b = wp_calloc(n, sizeof(*b))))
		return ld_nomem(l);
	for (size_t k = 0; k < n; k++) {
		if ((rc = ld_buff(l, arr->arr.v[k], key, k, r, tb, op->chan, &b[k])))
			goto err;
		size_t nlocal = refs == REFS_LOCAL ? n : refs == REFS_1LOCAL ? 1 : refs == REFS_2LOCAL ? 2 : 0;
		if (b[k].remote && k < nlocal) {
			rc = ld_bad(l, arr->arr.v[k],
				    "%s[%zu] of operation '%s' must be a buffer of this rank ('type'), "
				    "not a remote one",
				    key, k, sp->name);
			goto err;
		}
		if (!b[k].remote && k >= nlocal) {
			rc = ld_bad(l, arr->arr.v[k], "%s[%zu] of operation '%s' must be a remote buffer ('buffer_id')",
				    key, k, sp->name);
			goto err;
		}
	}
	*out = b;
	*nout = (uint32_t)n;
	return 0;
err:
	wp_free(b);
	return rc;
}

static int ld_op(struct ld *l, const struct wp_json *ov, const struct wp_rank *r, const struct wp_threadblock *tb,
		 int nested, struct wp_op *op);

static int ld_pipeline(struct ld *l, const struct wp_json *ov, const struct wp_rank *r, const struct wp_threadblock *tb,
		       struct wp_op *op)
{
	const struct wp_json *ic, *body;
	int rc;

	if ((rc = ld_member(l, ov, "iter_context", 1, &ic)) || (rc = ld_object(l, ic, "'iter_context'")) ||
	    (rc = ld_u32(l, ic, "unit_size", 1, 0, UINT32_MAX, &op->unit_size)) ||
	    (rc = ld_u32(l, ic, "num_chunks", 1, 0, UINT32_MAX, &op->num_chunks)))
		return rc;
	if (!op->unit_size || !op->num_chunks)
		return ld_bad(l, ic, "'unit_size' and 'num_chunks' of a pipeline must be at least 1");
	if ((rc = ld_array(l, ov, "ops", 1, WP_MAX_LIST, &body)))
		return rc;
	if (body->arr.n && !(op->ops = wp_calloc(body->arr.n, sizeof(*op->ops))))
		return ld_nomem(l);
	op->nops = (uint32_t)body->arr.n;
	for (size_t k = 0; k < body->arr.n; k++) {
		l->sub = (int)k;
		if ((rc = ld_op(l, body->arr.v[k], r, tb, 1, &op->ops[k])))
			return rc;
	}
	l->sub = -1;
	return 0;
}

static int ld_op(struct ld *l, const struct wp_json *ov, const struct wp_rank *r, const struct wp_threadblock *tb,
		 int nested, struct wp_op *op)
{
	const struct wp_json *v, *arr;
	const char *name;
	int rc, k, t;

	op->chan = WP_CHAN_NONE;
	op->tbg_size = 1;
	if ((rc = ld_object(l, ov, "an operation")) || (rc = ld_member(l, ov, "name", 1, &v)) ||
	    (rc = ld_str_val(l, v, "'name'", &name)))
		return rc;
	for (k = 0; k < WP_OP_COUNT && strcmp(name, specs[k].name); k++)
		;
	if (k == WP_OP_COUNT)
		return ld_bad(l, v, "unknown operation '%.40s'", name);
	op->kind = (enum wp_op_kind)k;
	const struct op_spec *sp = &specs[k];
	if (sp->flags & F_MULTICAST)
		return ld_fail(l, v, -ENOTSUP,
			       "operation '%s' uses NVLink multicast, which weft does not use; plan refused", name);
	if (nested && op->kind == WP_OP_PIPELINE)
		return ld_bad(l, v, "a pipeline cannot hold another pipeline");
	/* MSCCL++ keeps these fields in one union per operation: on the wrong
	 * operation they would overwrite its channels or buffers. */
	if (!(sp->flags & F_PIPELINE) && ((v = wp_json_get(ov, "iter_context")) || (v = wp_json_get(ov, "ops"))))
		return ld_bad(l, v, "only a pipeline has 'iter_context' and 'ops', not operation '%s'", name);
	if (!(sp->flags & F_BARRIER) &&
	    ((v = wp_json_get(ov, "barrier_id")) || (v = wp_json_get(ov, "num_threadblocks"))))
		return ld_bad(l, v, "only a barrier has 'barrier_id' and 'num_threadblocks', not operation '%s'", name);
	if (!(sp->flags & F_SEMS) && (v = wp_json_get(ov, "semaphore_ids")))
		return ld_bad(l, v, "only sem_acquire and sem_release have 'semaphore_ids', not operation '%s'", name);

	if ((rc = ld_enum(l, ov, "channel_type", 0, WP_CHAN_NONE, chan_names, 4, &t)))
		return rc;
	op->chan = (enum wp_chan)t;
	if (op->chan == WP_CHAN_SWITCH)
		return ld_fail(l, wp_json_get(ov, "channel_type"), -ENOTSUP,
			       "operation '%s' runs on a switch channel (NVLink multicast), which weft does not use; "
			       "plan refused",
			       name);
	v = wp_json_get(ov, "channel_type");
	/* These read or write peers through memory channels whatever the op
	 * says; MSCCL++'s DSL leaves channel_type out when it fuses a reduce
	 * with a put into res. */
	if ((sp->flags & F_MEM) && op->chan == WP_CHAN_NONE)
		op->chan = WP_CHAN_MEMORY;
	if ((sp->flags & F_CHAN) && op->chan == WP_CHAN_NONE)
		return ld_bad(l, v ? v : ov, "operation '%s' needs 'channel_type' memory or port", name);
	if ((sp->flags & F_MEM) && op->chan == WP_CHAN_PORT)
		return ld_bad(l, v, "operation '%s' runs on memory channels only, not port", name);
	if ((sp->flags & F_PORT) && op->chan == WP_CHAN_MEMORY)
		return ld_bad(l, v, "operation '%s' runs on port channels only, not memory", name);

	if ((rc = ld_array(l, ov, "channel_ids", 0, WP_MAX_OP_CHANNELS, &arr)))
		return rc;
	if (arr) {
		char bw[96];
		if (op->chan == WP_CHAN_NONE)
			return ld_bad(l, arr, "'channel_ids' needs a 'channel_type' (memory or port)");
		snprintf(bw, sizeof(bw), "the threadblock has %u %s channels", tb->chans[op->chan].n,
			 chan_names[op->chan]);
		if ((rc = ld_id_list(l, arr, "channel_ids", tb->chans[op->chan].n, bw, &op->chan_ids)))
			return rc;
		op->nchan_ids = (uint32_t)arr->arr.n;
	}
	if ((sp->flags & F_CHAN_IDS) && !op->nchan_ids)
		return ld_bad(l, arr ? arr : ov, "operation '%s' needs at least one of 'channel_ids'", name);

	if ((rc = ld_enum(l, ov, "reduce_op", 0, -1, reduce_names, 3, &t)))
		return rc;
	op->reduce = t < 0 ? WP_REDUCE_NONE : (enum wp_reduce)(WP_REDUCE_SUM + t);

	if ((v = wp_json_get(ov, "tbg_info"))) {
		if ((rc = ld_object(l, v, "'tbg_info'")) ||
		    (rc = ld_u32(l, v, "tb_id", 1, 0, UINT32_MAX, &op->tbg_id)) ||
		    (rc = ld_u32(l, v, "tbg_size", 1, 0, UINT32_MAX, &op->tbg_size)))
			return rc;
		if (!op->tbg_size || op->tbg_id >= op->tbg_size)
			return ld_bad(l, v, "'tb_id' %u is not below 'tbg_size' %u", op->tbg_id, op->tbg_size);
	}

	if ((rc = ld_buffs(l, ov, "src_buff", sp->src, sp->src_min, sp->src_max, r, tb, op, &op->src, &op->nsrc)) ||
	    (rc = ld_buffs(l, ov, "dst_buff", sp->dst, sp->dst_min, sp->dst_max, r, tb, op, &op->dst, &op->ndst)))
		return rc;
	if ((sp->flags & F_SAME_COUNT) && op->nsrc != op->ndst)
		return ld_bad(l, ov, "operation '%s' pairs sources with destinations, but has %u and %u", name,
			      op->nsrc, op->ndst);
	if ((sp->flags & F_IDS_PER_DST) && op->chan == WP_CHAN_PORT && op->nchan_ids != op->ndst)
		return ld_bad(l, arr ? arr : ov,
			      "operation '%s' on port channels needs one of 'channel_ids' per destination: %u "
			      "destinations, %u ids",
			      name, op->ndst, op->nchan_ids);
	/* Every reference of an op moves the same amount: MSCCL++'s kernels
	 * take the size of the first for all of them. */
	for (uint32_t i = 0; i < op->nsrc + op->ndst; i++) {
		const struct wp_buff *b = i < op->nsrc ? &op->src[i] : &op->dst[i - op->nsrc];
		const struct wp_buff *f = op->nsrc ? &op->src[0] : &op->dst[0];
		if (b->size != f->size)
			return ld_bad(l, ov,
				      "operation '%s': %s[%u] covers %u chunks but %s[0] covers %u; the buffers of an "
				      "op move the same number of chunks",
				      name, i < op->nsrc ? "src_buff" : "dst_buff", i < op->nsrc ? i : i - op->nsrc,
				      b->size, op->nsrc ? "src_buff" : "dst_buff", f->size);
	}

	if (sp->flags & F_SEMS) {
		char bw[64];
		if ((rc = ld_array(l, ov, "semaphore_ids", 1, WP_MAX_OP_SEMAPHORES, &arr)))
			return rc;
		if (!arr->arr.n)
			return ld_bad(l, arr, "operation '%s' needs at least one of 'semaphore_ids'", name);
		snprintf(bw, sizeof(bw), "the rank has %u semaphores", r->nsems);
		if ((rc = ld_id_list(l, arr, "semaphore_ids", r->nsems, bw, &op->sem_ids)))
			return rc;
		op->nsems = (uint32_t)arr->arr.n;
	}
	if (sp->flags & F_BARRIER) {
		if ((rc = ld_u32(l, ov, "barrier_id", 1, 0, WP_MAX_BARRIERS - 1, &op->barrier_id)) ||
		    (rc = ld_u32(l, ov, "num_threadblocks", 1, 0, r->ntbs, &op->barrier_ntb)))
			return rc;
		if (!op->barrier_ntb)
			return ld_bad(l, wp_json_get(ov, "num_threadblocks"),
				      "a barrier needs 'num_threadblocks' >= 1");
	}
	if (sp->flags & F_PIPELINE)
		return ld_pipeline(l, ov, r, tb, op);
	return 0;
}

/* A threadblock's channels or remote_buffer_refs: per channel kind, the ids
 * of its entries concatenated in file order. */
static int ld_tb_lists(struct ld *l, const struct wp_json *tv, const struct wp_rank *r, int refs,
		       struct wp_list out[WP_CHAN_KINDS])
{
	const char *key = refs ? "remote_buffer_refs" : "channels";
	const char *tkey = refs ? "access_channel_type" : "channel_type";
	const char *ikey = refs ? "remote_buffer_ids" : "channel_ids";
	const struct wp_json *arr, *ids;
	size_t total[WP_CHAN_KINDS] = {0};
	char what[64], bw[128];
	int rc, t, buff;

	if ((rc = ld_array(l, tv, key, !refs, WP_MAX_LIST, &arr)))
		return rc;
	if (!arr)
		return 0;
	/* Check everything and count, then fill lists of the right size. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < arr->arr.n; k++) {
			const struct wp_json *e = arr->arr.v[k];
			uint32_t *got;
			snprintf(what, sizeof(what), "'%s'[%zu]", key, k);
			if ((rc = ld_object(l, e, what)) || (rc = ld_enum(l, e, tkey, 1, 0, chan_names, 4, &t)))
				return rc;
			if (t == WP_CHAN_SWITCH)
				return ld_fail(
					l, wp_json_get(e, tkey), -ENOTSUP,
					"%s is a switch channel (NVLink multicast), which weft does not use; plan "
					"refused",
					what);
			if (t == WP_CHAN_NONE)
				return ld_bad(l, wp_json_get(e, tkey), "%s must be of channel type memory or port",
					      what);
			/* "buff" serves switch channels only; checked, not kept. */
			if (!refs && (rc = ld_enum(l, e, "buff", 0, 0, buf_names, WP_BUF_KINDS, &buff)))
				return rc;
			if ((rc = ld_array(l, e, ikey, 1, WP_MAX_LIST, &ids)))
				return rc;
			if (pass == 0) {
				total[t] += ids->arr.n;
				if (total[t] > WP_MAX_LIST)
					return ld_bad(l, ids, "more than %d %s entries of kind %s", WP_MAX_LIST, ikey,
						      chan_names[t]);
				continue;
			}
			if (refs)
				snprintf(bw, sizeof(bw), "the rank has %u remote buffers", r->nrbufs);
			else
				snprintf(bw, sizeof(bw), "the rank has %u %s channels (one per 'connected_to' entry)",
					 r->peers[t].n, chan_names[t]);
			if ((rc = ld_id_list(l, ids, ikey, refs ? r->nrbufs : r->peers[t].n, bw, &got)))
				return rc;
			for (size_t i = 0; i < ids->arr.n; i++) {
				if (refs && !(r->rbufs[got[i]].access & (1u << t))) {
					rc = ld_bad(l, ids->arr.v[i],
						    "remote buffer %u is not reachable through %s channels (its "
						    "'access_channel_types')",
						    got[i], chan_names[t]);
					wp_free(got);
					return rc;
				}
				out[t].v[out[t].n++] = got[i];
			}
			wp_free(got);
		}
		if (pass == 0)
			for (t = 0; t < WP_CHAN_KINDS; t++)
				if (total[t] && !(out[t].v = wp_malloc(total[t] * sizeof(*out[t].v))))
					return ld_nomem(l);
	}
	return 0;
}

static int ld_threadblock(struct ld *l, const struct wp_json *tv, const struct wp_rank *r, uint32_t idx,
			  struct wp_threadblock *tb)
{
	const struct wp_json *ops;
	int rc;

	if ((rc = ld_object(l, tv, "a threadblock")) || (rc = ld_u32(l, tv, "id", 1, 0, UINT32_MAX, &tb->id)))
		return rc;
	if (tb->id != idx)
		return ld_bad(l, wp_json_get(tv, "id"),
			      "'id' is %u but this is threadblock %u of the list; ids follow the list's order", tb->id,
			      idx);
	if ((rc = ld_tb_lists(l, tv, r, 0, tb->chans)) || (rc = ld_tb_lists(l, tv, r, 1, tb->rbufs)) ||
	    (rc = ld_array(l, tv, "ops", 1, WP_MAX_LIST, &ops)))
		return rc;
	if (ops->arr.n && !(tb->ops = wp_calloc(ops->arr.n, sizeof(*tb->ops))))
		return ld_nomem(l);
	tb->nops = (uint32_t)ops->arr.n;
	for (size_t k = 0; k < ops->arr.n; k++) {
		l->op = (int)k;
		if ((rc = ld_op(l, ops->arr.v[k], r, tb, 0, &tb->ops[k])))
			return rc;
	}
	l->op = -1;
	return 0;
}

/* A rank's channels: per kind, one entry per connected_to element. */
static int ld_rank_channels(struct ld *l, const struct wp_json *gv, struct wp_rank *r)
{
	const struct wp_json *arr, *peers;
	size_t total[WP_CHAN_KINDS] = {0};
	char what[64], bw[64];
	int rc, t;

	if ((rc = ld_array(l, gv, "channels", 1, WP_MAX_LIST, &arr)))
		return rc;
	snprintf(bw, sizeof(bw), "the plan has %u ranks", l->plan->nranks);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < arr->arr.n; k++) {
			const struct wp_json *e = arr->arr.v[k];
			uint32_t *got;
			snprintf(what, sizeof(what), "'channels'[%zu]", k);
			if ((rc = ld_object(l, e, what)) ||
			    (rc = ld_enum(l, e, "channel_type", 1, 0, chan_names, 4, &t)))
				return rc;
			if (t == WP_CHAN_SWITCH)
				return ld_fail(
					l, wp_json_get(e, "channel_type"), -ENOTSUP,
					"%s is a switch channel (NVLink multicast), which weft does not use; plan "
					"refused",
					what);
			if (t == WP_CHAN_NONE)
				return ld_bad(l, wp_json_get(e, "channel_type"),
					      "%s must be of channel type memory or port", what);
			if ((rc = ld_array(l, e, "connected_to", 1, WP_MAX_LIST, &peers)))
				return rc;
			if (pass == 0) {
				total[t] += peers->arr.n;
				if (total[t] > WP_MAX_LIST)
					return ld_bad(l, peers, "more than %d %s channels", WP_MAX_LIST, chan_names[t]);
				continue;
			}
			if ((rc = ld_id_list(l, peers, "connected_to", l->plan->nranks, bw, &got)))
				return rc;
			for (size_t i = 0; i < peers->arr.n; i++) {
				if (got[i] == r->id) {
					wp_free(got);
					return ld_bad(l, peers->arr.v[i], "'connected_to'[%zu] is the rank itself", i);
				}
				r->peers[t].v[r->peers[t].n++] = got[i];
			}
			wp_free(got);
		}
		if (pass == 0)
			for (t = 0; t < WP_CHAN_KINDS; t++)
				if (total[t] && !(r->peers[t].v = wp_malloc(total[t] * sizeof(*r->peers[t].v))))
					return ld_nomem(l);
	}
	return 0;
}

static int ld_rank(struct ld *l, const struct wp_json *gv, struct wp_rank *r)
{
	const struct wp_json *arr;
	char what[64];
	int rc, t;

	if ((rc = ld_rank_channels(l, gv, r)) || (rc = ld_array(l, gv, "remote_buffers", 1, WP_MAX_LIST, &arr)))
		return rc;
	if (arr->arr.n && !(r->rbufs = wp_calloc(arr->arr.n, sizeof(*r->rbufs))))
		return ld_nomem(l);
	r->nrbufs = (uint32_t)arr->arr.n;
	for (size_t k = 0; k < arr->arr.n; k++) {
		const struct wp_json *e = arr->arr.v[k], *acc;
		struct wp_remote_buf *rb = &r->rbufs[k];
		snprintf(what, sizeof(what), "'remote_buffers'[%zu]", k);
		if ((rc = ld_object(l, e, what)) || (rc = ld_u32(l, e, "rank", 1, 0, UINT32_MAX, &rb->rank)))
			return rc;
		if (rb->rank >= l->plan->nranks || rb->rank == r->id)
			return ld_bad(l, wp_json_get(e, "rank"), "%s 'rank' is %u: %s", what, rb->rank,
				      rb->rank == r->id ? "the rank itself" : "no rank of the plan");
		if ((rc = ld_enum(l, e, "type", 1, 0, buf_names, WP_BUF_KINDS, &t)))
			return rc;
		rb->type = (enum wp_buf)t;
		if ((rc = ld_array(l, e, "access_channel_types", 1, 8, &acc)))
			return rc;
		for (size_t i = 0; i < acc->arr.n; i++) {
			char aw[128];
			snprintf(aw, sizeof(aw), "%s 'access_channel_types'[%zu]", what, i);
			if ((rc = ld_enum_val(l, acc->arr.v[i], aw, chan_names, 4, &t)))
				return rc;
			if (t == WP_CHAN_SWITCH)
				return ld_fail(
					l, acc->arr.v[i], -ENOTSUP,
					"%s is a switch channel (NVLink multicast), which weft does not use; plan "
					"refused",
					aw);
			if (t == WP_CHAN_NONE)
				return ld_bad(l, acc->arr.v[i], "%s must be memory or port", aw);
			rb->access |= 1u << t;
		}
	}

	if ((rc = ld_array(l, gv, "semaphores", 0, WP_MAX_LIST, &arr)))
		return rc;
	if (arr && arr->arr.n) {
		if (!(r->sem_init = wp_malloc(arr->arr.n * sizeof(*r->sem_init))))
			return ld_nomem(l);
		r->nsems = (uint32_t)arr->arr.n;
		for (size_t k = 0; k < arr->arr.n; k++) {
			snprintf(what, sizeof(what), "'semaphores'[%zu]", k);
			if ((rc = ld_object(l, arr->arr.v[k], what)) ||
			    (rc = ld_u32(l, arr->arr.v[k], "init_value", 1, 0, UINT32_MAX, &r->sem_init[k])))
				return rc;
		}
	}

	if ((rc = ld_array(l, gv, "threadblocks", 1, WP_MAX_LIST, &arr)))
		return rc;
	if (arr->arr.n && !(r->tbs = wp_calloc(arr->arr.n, sizeof(*r->tbs))))
		return ld_nomem(l);
	r->ntbs = (uint32_t)arr->arr.n;
	for (size_t k = 0; k < arr->arr.n; k++) {
		l->tb = (int)k;
		if ((rc = ld_threadblock(l, arr->arr.v[k], r, (uint32_t)k, &r->tbs[k])))
			return rc;
	}
	l->tb = -1;
	return 0;
}

static int ld_dup(struct ld *l, const char *s, char **out)
{
	size_t n = strlen(s) + 1;
	if (!(*out = wp_malloc(n)))
		return ld_nomem(l);
	memcpy(*out, s, n);
	return 0;
}

/* Multicast is refused before the schema is read, so that a plan written for
 * NVLink SHARP is named as that even where its other fields differ (older
 * switch channels have "buff" instead of "buffer_type"). Operations first, in
 * file order, then switch channels. */
static int ld_refuse_multicast(struct ld *l, const struct wp_json *root)
{
	const struct wp_json *gpus = wp_json_get(root, "gpus");

	if (!gpus || gpus->type != WP_JSON_ARRAY)
		return 0;
	for (size_t r = 0; r < gpus->arr.n; r++) {
		const struct wp_json *tbs = wp_json_get(gpus->arr.v[r], "threadblocks");
		for (size_t t = 0; tbs && tbs->type == WP_JSON_ARRAY && t < tbs->arr.n; t++) {
			const struct wp_json *ops = wp_json_get(tbs->arr.v[t], "ops");
			for (size_t o = 0; ops && ops->type == WP_JSON_ARRAY && o < ops->arr.n; o++) {
				const struct wp_json *body = wp_json_get(ops->arr.v[o], "ops");
				size_t nb = body && body->type == WP_JSON_ARRAY ? body->arr.n : 0;
				for (size_t s = 0; s <= nb; s++) {
					const struct wp_json *op = s ? body->arr.v[s - 1] : ops->arr.v[o];
					const struct wp_json *name = wp_json_get(op, "name");
					if (!name || name->type != WP_JSON_STRING)
						continue;
					for (size_t m = 0; m < sizeof(multicast_ops) / sizeof(multicast_ops[0]); m++) {
						if (strcmp(name->str.s, multicast_ops[m]))
							continue;
						l->rank = (int)r;
						l->tb = (int)t;
						l->op = (int)o;
						l->sub = s ? (int)s - 1 : -1;
						return ld_fail(l, name, -ENOTSUP,
							       "operation '%s' uses NVLink multicast, which weft does "
							       "not use; plan refused",
							       multicast_ops[m]);
					}
				}
			}
		}
	}
	for (size_t r = 0; r < gpus->arr.n; r++) {
		const struct wp_json *ch = wp_json_get(gpus->arr.v[r], "channels");
		for (size_t k = 0; ch && ch->type == WP_JSON_ARRAY && k < ch->arr.n; k++) {
			const struct wp_json *ct = wp_json_get(ch->arr.v[k], "channel_type");
			if (ct && ct->type == WP_JSON_STRING && !strcmp(ct->str.s, "switch")) {
				l->rank = (int)r;
				return ld_fail(
					l, ct, -ENOTSUP,
					"'channels'[%zu] is a switch channel (NVLink multicast), which weft does "
					"not use; plan refused",
					k);
			}
		}
	}
	return 0;
}

static int ld_plan(struct ld *l, const struct wp_json *root, struct wp_plan *p)
{
	const struct wp_json *gpus, *v;
	const char *s;
	int rc, t;

	if ((rc = ld_object(l, root, "the top level")))
		return rc;
	if ((rc = ld_refuse_multicast(l, root)))
		return rc;
	if ((rc = ld_member(l, root, "name", 1, &v)) || (rc = ld_str_val(l, v, "'name'", &s)) ||
	    (rc = ld_dup(l, s, &p->name)) || (rc = ld_member(l, root, "collective", 1, &v)) ||
	    (rc = ld_str_val(l, v, "'collective'", &s)) || (rc = ld_dup(l, s, &p->collective)))
		return rc;
	if ((rc = ld_enum(l, root, "protocol", 1, 0, proto_names, 2, &t)))
		return rc;
	p->protocol = (enum wp_proto)t;
	if ((rc = ld_bool(l, root, "inplace", 1, 0, &p->inplace)) ||
	    (rc = ld_bool(l, root, "reuse_resources", 0, 0, &p->reuse_resources)) ||
	    (rc = ld_bool(l, root, "use_double_scratch_buffer", 0, 0, &p->double_scratch)) ||
	    (rc = ld_u32(l, root, "num_threads_per_block", 0, 1024, 1024, &p->threads_per_block)) ||
	    (rc = ld_u32(l, root, "buffer_alignment", 0, 16, UINT32_MAX, &p->buffer_alignment)) ||
	    (rc = ld_uint(l, root, "min_message_size", 0, 0, UINT64_MAX, &p->min_message_size)) ||
	    (rc = ld_uint(l, root, "max_message_size", 0, UINT64_MAX, UINT64_MAX, &p->max_message_size)))
		return rc;
	if (!p->threads_per_block)
		return ld_bad(l, wp_json_get(root, "num_threads_per_block"),
			      "'num_threads_per_block' must be 1 to 1024");
	if (!p->buffer_alignment || (p->buffer_alignment & (p->buffer_alignment - 1)))
		return ld_bad(l, wp_json_get(root, "buffer_alignment"), "'buffer_alignment' %u is not a power of two",
			      p->buffer_alignment);
	if (p->min_message_size > p->max_message_size)
		return ld_bad(l, wp_json_get(root, "min_message_size"),
			      "'min_message_size' %llu is above 'max_message_size' %llu",
			      (unsigned long long)p->min_message_size, (unsigned long long)p->max_message_size);

	if ((rc = ld_array(l, root, "gpus", 1, WP_MAX_RANKS, &gpus)))
		return rc;
	if (!gpus->arr.n)
		return ld_bad(l, gpus, "'gpus' lists no rank");
	if (!(p->ranks = wp_calloc(gpus->arr.n, sizeof(*p->ranks))))
		return ld_nomem(l);
	p->nranks = (uint32_t)gpus->arr.n;
	/* Chunk counts first: buffer references reach other ranks' buffers. */
	for (uint32_t r = 0; r < p->nranks; r++) {
		const struct wp_json *gv = gpus->arr.v[r];
		struct wp_rank *rk = &p->ranks[r];
		l->rank = (int)r;
		if ((rc = ld_object(l, gv, "a rank ('gpus' entry)")) ||
		    (rc = ld_u32(l, gv, "id", 1, 0, UINT32_MAX, &rk->id)))
			return rc;
		if (rk->id != r)
			return ld_bad(l, wp_json_get(gv, "id"),
				      "'id' is %u but this is entry %u of 'gpus'; ids follow the list's order", rk->id,
				      r);
		if ((rc = ld_u32(l, gv, "input_chunks", 1, 0, UINT32_MAX, &rk->chunks[WP_BUF_INPUT])) ||
		    (rc = ld_u32(l, gv, "output_chunks", 1, 0, UINT32_MAX, &rk->chunks[WP_BUF_OUTPUT])) ||
		    (rc = ld_u32(l, gv, "scratch_chunks", 1, 0, UINT32_MAX, &rk->chunks[WP_BUF_SCRATCH])))
			return rc;
		if (!rk->chunks[WP_BUF_INPUT] && !rk->chunks[WP_BUF_OUTPUT])
			return ld_bad(l, gv, "'input_chunks' and 'output_chunks' are both 0");
	}
	for (uint32_t r = 0; r < p->nranks; r++) {
		l->rank = (int)r;
		if ((rc = ld_rank(l, gpus->arr.v[r], &p->ranks[r])))
			return rc;
	}
	l->rank = -1;
	return 0;
}

int wp_plan_load_mem(const char *name, const void *buf, size_t len, struct wp_plan **out, char *err, size_t errlen)
{
	struct ld l = {.file = name ? name : "(plan)",
		       .err = err,
		       .errlen = errlen,
		       .rank = -1,
		       .tb = -1,
		       .op = -1,
		       .sub = -1};
	struct wp_json_error je;
	struct wp_json *root;
	struct wp_plan *p;
	int rc;

	if (err && errlen)
		err[0] = 0;
	if ((rc = wp_json_parse(buf, len, NULL, &root, &je))) {
		if (err && errlen) {
			if (je.line)
				snprintf(err, errlen, "%s:%u:%u: %s", l.file, je.line, je.col, je.msg);
			else
				snprintf(err, errlen, "%s: %s", l.file, je.msg);
		}
		return rc;
	}
	if (!(p = wp_calloc(1, sizeof(*p)))) {
		wp_json_free(root);
		return ld_nomem(&l);
	}
	l.plan = p;
	if ((rc = ld_dup(&l, l.file, &p->file)) || (rc = ld_plan(&l, root, p))) {
		wp_json_free(root);
		wp_plan_free(p);
		return rc;
	}
	wp_json_free(root);
	wp_sha256(buf, len, p->sha256);
	*out = p;
	return 0;
}

int wp_plan_load(const char *path, struct wp_plan **out, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, rc;

	if (err && errlen)
		err[0] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot open: %s", path, weft_kit_strerror(rc));
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		if (err && errlen)
			snprintf(err, errlen, "%s: cannot stat: %s", path, weft_kit_strerror(rc));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		if (err && errlen)
			snprintf(err, errlen, "%s: not a regular file", path);
		goto out_close;
	}
	if ((uint64_t)st.st_size > WP_JSON_MAX_BYTES) {
		rc = -EINVAL;
		if (err && errlen)
			snprintf(err, errlen, "%s: %lld bytes, more than the limit of %zu for a plan", path,
				 (long long)st.st_size, WP_JSON_MAX_BYTES);
		goto out_close;
	}
	/* One byte more than the size, to see a file that grew meanwhile. */
	size_t cap = (size_t)st.st_size + 1;
	if (!(buf = wp_malloc(cap))) {
		rc = -ENOMEM;
		if (err && errlen)
			snprintf(err, errlen, "%s: out of memory", path);
		goto out_close;
	}
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			if (err && errlen)
				snprintf(err, errlen, "%s: cannot read: %s", path, weft_kit_strerror(rc));
			goto out_free;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == cap) {
			rc = -EAGAIN;
			if (err && errlen)
				snprintf(err, errlen, "%s: the file changed while it was read", path);
			goto out_free;
		}
	}
	close(fd);
	rc = wp_plan_load_mem(path, buf, len, out, err, errlen);
	wp_free(buf);
	return rc;
out_free:
	wp_free(buf);
out_close:
	close(fd);
	return rc;
}
