/* SPDX-License-Identifier: Apache-2.0 */
/* A deliberately wrong pack (tests/pack_conformance.cmake): weft-pack-conformance
 * must fail it. Its one allreduce gathers every rank's input over the
 * bootstrap and sums it here, right for int32 and float32, but for float16
 * its loop stops one rank short, so the last rank's input is left out. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

struct pw_state {
	const struct weft_prim_api *prim;
	weft_comm_t *comm;
	int nranks;
};

static float pw_half_to_float(uint16_t h)
{
	uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
	if (e == 0 && m == 0) {
		bits = s;
	} else if (e == 0) { /* subnormal: normalize */
		int k = 0;
		while (!(m & 0x400)) {
			m <<= 1;
			k++;
		}
		bits = s | (uint32_t)(127 - 15 + 1 - k) << 23 | (m & 0x3ff) << 13;
	} else if (e == 0x1f) {
		bits = s | 0x7f800000u | m << 13;
	} else {
		bits = s | (e - 15 + 127) << 23 | m << 13;
	}
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* Round to nearest even; enough for the finite values of a test. */
static uint16_t pw_float_to_half(float f)
{
	uint32_t b;
	memcpy(&b, &f, sizeof(b));
	uint32_t s = (b >> 16) & 0x8000;
	int e = (int)((b >> 23) & 0xff) - 127 + 15;
	uint32_t m = b & 0x7fffff;
	if (e >= 0x1f)
		return (uint16_t)(s | 0x7c00);
	if (e <= 0)
		return (uint16_t)s;
	uint32_t h = s | (uint32_t)e << 10 | m >> 13, rest = m & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++;
	return (uint16_t)h;
}

static int pw_setup(const struct weft_algo_comm *ac, void **state)
{
	struct pw_state *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->prim = ac->prim;
	s->comm = ac->comm;
	s->nranks = ac->nranks;
	*state = s;
	return 0;
}

static int pw_supports(void *state, const struct weft_coll_args *a)
{
	(void)state;
	return a->op == WEFT_SUM && (a->dtype == WEFT_INT32 || a->dtype == WEFT_FLOAT32 || a->dtype == WEFT_FLOAT16)
		       ? 0
		       : -ENOTSUP;
}

static int pw_execute(void *state, const struct weft_coll_args *a)
{
	struct pw_state *s = state;
	size_t es = a->dtype == WEFT_FLOAT16 ? 2 : 4, bytes = a->count * es;
	unsigned char *all = malloc(bytes * (size_t)s->nranks);
	if (!all)
		return -ENOMEM;
	int rc = s->prim->comm_allgather(s->comm, a->sendbuf, all, bytes);
	for (size_t i = 0; rc == 0 && i < a->count; i++) {
		if (a->dtype == WEFT_INT32) {
			uint32_t v = 0;
			for (int r = 0; r < s->nranks; r++)
				v += ((const uint32_t *)(const void *)all)[(size_t)r * a->count + i];
			((uint32_t *)a->recvbuf)[i] = v;
		} else if (a->dtype == WEFT_FLOAT32) {
			float v = 0;
			for (int r = 0; r < s->nranks; r++)
				v += ((const float *)(const void *)all)[(size_t)r * a->count + i];
			((float *)a->recvbuf)[i] = v;
		} else {
			float v = 0;
			for (int r = 0; r < s->nranks - 1; r++) /* the bug: one rank short */
				v += pw_half_to_float(((const uint16_t *)(const void *)all)[(size_t)r * a->count + i]);
			((uint16_t *)a->recvbuf)[i] = pw_float_to_half(v);
		}
	}
	free(all);
	return rc;
}

static void pw_teardown(void *state)
{
	free(state);
}

static const struct weft_algo pw_allreduce = {
	.size = sizeof(struct weft_algo),
	.name = "allreduce-offbyone",
	.coll = WEFT_COLL_ALLREDUCE,
	.min_bytes = 0,
	.max_bytes = 64 << 10,
	.min_ranks = 2,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 0,
	.setup = pw_setup,
	.supports = pw_supports,
	.execute = pw_execute,
	.teardown = pw_teardown,
	.redops = 1u << WEFT_SUM,
};

static const struct weft_algo *const pw_algos[] = {&pw_allreduce, NULL};
static const struct weft_algo_ops pw_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = pw_algos,
};
static const struct weft_plugin_desc pw_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = "pack-wrong",
	.ops = &pw_ops,
};
static const struct weft_plugin_desc *const pw_descs[] = {&pw_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	return weft_core_api_usable(core) ? pw_descs : NULL;
}
