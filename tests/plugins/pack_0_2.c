/* SPDX-License-Identifier: Apache-2.0 */
/* A pack built against the frozen ABI 0.2 header (tests/abi/0.2): one
 * allreduce of int32 sums, gathered through the bootstrap and summed in rank
 * order. Its algorithm declares no reductions (0.2 has no such field), so a
 * 0.3 core must never hand it an operation that 0.2 did not have: should it,
 * the pack aborts the process, which fails the test that drives it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

#if WEFT_PLUGIN_ABI_MINOR != 2
#error "pack_0_2.c must be built against tests/abi/0.2/weft/plugin.h"
#endif

#define P02_NAME "abi02"
#define P02_OPS_OF_0_2 5 /* sum, prod, min, max, avg */

static const struct weft_core_api *p02_core;

struct p02_state {
	const struct weft_prim_api *prim;
	weft_comm_t *comm;
	int nranks;
};

static void p02_check_op(const struct weft_coll_args *a)
{
	if ((int)a->op < 0 || (int)a->op >= P02_OPS_OF_0_2) {
		p02_core->log(p02_core->self, WEFT_LOG_ERROR, "a 0.2 algorithm was handed operation %d", (int)a->op);
		abort();
	}
}

static int p02_setup(const struct weft_algo_comm *ac, void **state)
{
	struct p02_state *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->prim = ac->prim;
	s->comm = ac->comm;
	s->nranks = ac->nranks;
	*state = s;
	return 0;
}

static int p02_supports(void *state, const struct weft_coll_args *a)
{
	p02_check_op(a);
	return a->mem_type == WEFT_MEM_HOST && a->dtype == WEFT_INT32 && a->op == WEFT_SUM ? 0 : -ENOTSUP;
}

static int p02_execute(void *state, const struct weft_coll_args *a)
{
	struct p02_state *s = state;
	p02_check_op(a);
	size_t bytes = a->count * sizeof(int32_t);
	int32_t *all = malloc(bytes * (size_t)s->nranks);
	if (!all)
		return -ENOMEM;
	int rc = s->prim->comm_allgather(s->comm, a->sendbuf, all, bytes);
	if (rc == 0) {
		int32_t *out = a->recvbuf;
		for (size_t i = 0; i < a->count; i++) {
			uint32_t v = 0;
			for (int r = 0; r < s->nranks; r++)
				v += (uint32_t)all[(size_t)r * a->count + i];
			out[i] = (int32_t)v;
		}
	}
	free(all);
	return rc;
}

static void p02_teardown(void *state)
{
	free(state);
}

static const struct weft_algo p02_allreduce = {
	.size = sizeof(struct weft_algo),
	.name = "allreduce-gather",
	.coll = WEFT_COLL_ALLREDUCE,
	.min_ranks = 1,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 1,
	.setup = p02_setup,
	.supports = p02_supports,
	.execute = p02_execute,
	.teardown = p02_teardown,
};

static const struct weft_algo *const p02_algos[] = {&p02_allreduce, NULL};
static const struct weft_algo_ops p02_ops = {.size = sizeof(struct weft_algo_ops), .algos = p02_algos};
static const struct weft_plugin_desc p02_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = P02_NAME,
	.ops = &p02_ops,
};
static const struct weft_plugin_desc *const p02_descs[] = {&p02_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	p02_core = core;
	return p02_descs;
}
