/* SPDX-License-Identifier: Apache-2.0 */
/* hxtest: algo-gpu's cross-host executor (plugins/algo-gpu/hx.c) and its
 * schedules (hier.c) on host memory, so that CI runs them across "hosts"
 * (test host identities, real tcp) without a GPU: the ops are memcpy and the
 * kit's reductions. Every collective, preferred over every other pack.
 * Ring slots are WEFT_HXTEST_CHUNK bytes (default 4096), WEFT_HXTEST_DEPTH
 * deep (default 2), small so that a call wraps its rings many times. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>
#include <weft/plugin.h>

#include "hx.h"

static const struct weft_core_api *hxt_core;

struct hxt_comm {
	struct wag_hier_layout lay;
	struct wag_hx *x;
	const struct weft_prim_api *prim;
	weft_comm_t *comm;
};

/* WEFT_HXTEST_ASYNC=1 makes the ops behave as a GPU stream's do: copy,
 * reduce and divide only queue, and sync runs the queue in order, so an
 * executor step that reads a buffer before syncing what writes it reads
 * stale bytes and the test fails. */
enum { HXT_COPY, HXT_REDUCE, HXT_DIVIDE };
struct hxt_op {
	int kind, dtype, op, nranks;
	void *dst;
	const void *src;
	uint64_t n; /* bytes for copies, elements otherwise */
};
static struct hxt_op *hxt_q;
static size_t hxt_nq, hxt_capq;
static int hxt_async;

static void hxt_do(const struct hxt_op *o)
{
	if (o->kind == HXT_COPY)
		memmove(o->dst, o->src, (size_t)o->n);
	else if (o->kind == HXT_REDUCE)
		weft_kit_reduce((enum weft_datatype)o->dtype, (enum weft_redop)o->op, o->dst, o->src, (size_t)o->n);
	else
		weft_kit_finish((enum weft_datatype)o->dtype, WEFT_AVG, o->dst, (size_t)o->n, o->nranks);
}

static int hxt_push(struct hxt_op o)
{
	if (!hxt_async) {
		hxt_do(&o);
		return 0;
	}
	if (hxt_nq == hxt_capq) {
		size_t cap = hxt_capq ? 2 * hxt_capq : 64;
		struct hxt_op *q = realloc(hxt_q, cap * sizeof(*q));
		if (!q)
			return -ENOMEM;
		hxt_q = q;
		hxt_capq = cap;
	}
	hxt_q[hxt_nq++] = o;
	return 0;
}

static int hxt_copy(void *u, void *dst, const void *src, size_t bytes)
{
	(void)u;
	return hxt_push((struct hxt_op){.kind = HXT_COPY, .dst = dst, .src = src, .n = bytes});
}

static int hxt_reduce(void *u, int dtype, int op, void *dst, const void *src, uint64_t n)
{
	(void)u;
	if (!weft_kit_reduce_supported((enum weft_datatype)dtype, (enum weft_redop)op))
		return -EINVAL;
	return hxt_push((struct hxt_op){.kind = HXT_REDUCE, .dtype = dtype, .op = op, .dst = dst, .src = src, .n = n});
}

static int hxt_divide(void *u, int dtype, void *buf, uint64_t n, int nranks)
{
	(void)u;
	return hxt_push((struct hxt_op){.kind = HXT_DIVIDE, .dtype = dtype, .dst = buf, .n = n, .nranks = nranks});
}

static int hxt_sync(void *u)
{
	(void)u;
	for (size_t i = 0; i < hxt_nq; i++)
		hxt_do(&hxt_q[i]);
	hxt_nq = 0;
	return 0;
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : def;
}

static int hxt_comm_setup(const struct weft_algo_comm *ac, void **pack_state)
{
	struct hxt_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int rc = wag_hx_layout(ac, &c->lay);
	hxt_async = env_u64("WEFT_HXTEST_ASYNC", 0) != 0;
	static const struct wag_hx_ops ops = {
		.copy = hxt_copy, .reduce = hxt_reduce, .divide = hxt_divide, .sync = hxt_sync};
	struct wag_hx_cfg cfg = {.chunk = env_u64("WEFT_HXTEST_CHUNK", 4096),
				 .depth = (uint32_t)env_u64("WEFT_HXTEST_DEPTH", 2)};
	if (rc == 0)
		rc = wag_hx_create(ac->comm, ac->prim, hxt_core, WEFT_MEM_HOST, &ops, &cfg, &c->x);
	if (rc) {
		free(c);
		return rc;
	}
	c->prim = ac->prim;
	c->comm = ac->comm;
	*pack_state = c;
	return 0;
}

static void hxt_comm_teardown(void *pack_state)
{
	struct hxt_comm *c = pack_state;
	if (!c)
		return;
	/* Every rank's last puts have landed before any ring is freed. */
	c->prim->comm_barrier(c->comm);
	wag_hx_free(c->x);
	free(c);
}

static int hxt_setup(const struct weft_algo_comm *ac, void **state)
{
	*state = ac->pack_state;
	return ac->pack_state ? 0 : -EINVAL;
}

static int hxt_supports(void *state, const struct weft_coll_args *a)
{
	(void)state;
	int reducing = a->coll == WEFT_COLL_ALLREDUCE || a->coll == WEFT_COLL_REDUCE_SCATTER ||
		       a->coll == WEFT_COLL_REDUCE;
	if (a->coll != WEFT_COLL_SENDRECV && !weft_kit_datatype_size(a->dtype))
		return -ENOTSUP;
	return reducing && !weft_kit_reduce_supported(a->dtype, a->op) ? -ENOTSUP : 0;
}

static int hxt_execute(void *state, const struct weft_coll_args *a)
{
	struct hxt_comm *c = state;
	size_t es = a->coll == WEFT_COLL_SENDRECV ? 1 : weft_kit_datatype_size(a->dtype);
	enum wag_hier_inter how = env_u64("WEFT_HXTEST_TREE", 0) ? WAG_HI_TREE : WAG_HI_RING;
	return wag_hx_coll(c->x, &c->lay, a, es, how, NULL);
}

#define HXT_ALGO(var, nm, cl)                                                                 \
	static const struct weft_algo var = {                                                 \
		.size = sizeof(struct weft_algo),                                             \
		.name = nm,                                                                   \
		.coll = cl,                                                                   \
		.min_ranks = 2,                                                               \
		.max_ranks = WAG_HIER_MAX_RANKS,                                              \
		.mem_types = 1u << WEFT_MEM_HOST,                                             \
		.priority = 1000,                                                             \
		.setup = hxt_setup,                                                           \
		.supports = hxt_supports,                                                     \
		.execute = hxt_execute,                                                       \
		.redops = (1u << WEFT_SUM) | (1u << WEFT_PROD) | (1u << WEFT_MIN) | (1u << WEFT_MAX) | \
			  (1u << WEFT_AVG),                                                   \
	}

HXT_ALGO(hxt_ar, "allreduce-hier", WEFT_COLL_ALLREDUCE);
HXT_ALGO(hxt_rs, "reduce-scatter-hier", WEFT_COLL_REDUCE_SCATTER);
HXT_ALGO(hxt_ag, "allgather-hier", WEFT_COLL_ALLGATHER);
HXT_ALGO(hxt_bc, "broadcast-hier", WEFT_COLL_BROADCAST);
HXT_ALGO(hxt_red, "reduce-hier", WEFT_COLL_REDUCE);
HXT_ALGO(hxt_a2a, "alltoall-hier", WEFT_COLL_ALLTOALL);
HXT_ALGO(hxt_p2p, "sendrecv-hier", WEFT_COLL_SENDRECV);

static const struct weft_algo *const hxt_algos[] = {&hxt_ar, &hxt_rs, &hxt_ag, &hxt_bc, &hxt_red, &hxt_a2a, &hxt_p2p,
						    NULL};

static const struct weft_algo_ops hxt_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = hxt_algos,
	.comm_setup = hxt_comm_setup,
	.comm_teardown = hxt_comm_teardown,
};

static const struct weft_plugin_desc hxt_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = "hxtest",
	.ops = &hxt_ops,
};

static const struct weft_plugin_desc *const hxt_descs[] = {&hxt_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	hxt_core = core;
	return hxt_descs;
}
