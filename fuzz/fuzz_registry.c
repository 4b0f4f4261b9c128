/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for the registry's descriptor checks (take_desc in core/registry.c):
 * the bytes become a plugin's descriptor array (sizes, ABI version, name,
 * kind, ops table with ops present or missing), checked exactly as a dlopen'ed
 * file's would be. registry.c is compiled in to reach its static checker. */
#include "registry.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("WEFT_LOG_FILE", "/dev/null", 1);
	return 0;
}

static int dummy_op(void)
{
	return 0;
}

/* Forgets every entry, so that each input starts from an empty registry. */
static void reg_reset(void)
{
	for (int i = 0; i < reg_n; i++) {
		struct reg_entry *e = reg_list[i];
		free(e->pub.path);
		free(e->pub.name);
		free(e->pub.reason);
		free(e->stem);
		free(e);
	}
	reg_n = 0;
}

struct cursor {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct cursor *c, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes && c->n; i++, c->p++, c->n--)
		v |= (uint64_t)*c->p << (8 * i);
	return v;
}

#define FZ_MAX_DESCS 4

/* A heap block of exactly `claimed` bytes (at least its size field, at most
 * the core's own struct) holding the start of the struct: a plugin built against an older minor
 * owns only what it claims, so ASan catches any read past that. */
static void *exact_copy(const void *full, size_t full_len, size_t claimed, void **heap, int *nheap)
{
	size_t n = claimed < sizeof(size_t) ? sizeof(size_t) : claimed > full_len ? full_len : claimed;
	uint8_t *b = calloc(1, n);
	if (!b)
		abort();
	memcpy(b, full, n < full_len ? n : full_len);
	heap[(*nheap)++] = b;
	return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = {data, size};
	int ndesc = (int)(take(&c, 1) % FZ_MAX_DESCS) + 1;
	struct weft_plugin_desc descs[FZ_MAX_DESCS];
	struct weft_transport_ops tops[FZ_MAX_DESCS];
	struct weft_algo_ops aops[FZ_MAX_DESCS];
	char names[FZ_MAX_DESCS][80];
	static const struct weft_algo *const no_algos[] = {NULL};
	void *heap[2 * FZ_MAX_DESCS];
	int nheap = 0;
	for (int i = 0; i < ndesc; i++) {
		struct weft_plugin_desc *d = &descs[i];
		memset(d, 0, sizeof(*d));
		uint8_t shape = (uint8_t)take(&c, 1);
		/* Sizes near the real one, and the odd wild value. */
		d->size = (shape & 1) ? sizeof(*d) : (size_t)take(&c, 1);
		d->abi_major = (shape & 2) ? WEFT_PLUGIN_ABI_MAJOR : (uint16_t)take(&c, 2);
		d->abi_minor = (uint16_t)take(&c, 1);
		size_t nl = (size_t)take(&c, 1) % 79;
		if (shape & 4) {
			d->name = NULL;
		} else {
			size_t k = nl < c.n ? nl : c.n;
			memcpy(names[i], c.p, k);
			names[i][k] = '\0';
			c.p += k;
			c.n -= k;
			d->name = names[i];
		}
		d->kind = (enum weft_plugin_kind)(take(&c, 1) % 4);
		uint64_t present = take(&c, 4);
		if (shape & 8) {
			d->ops = NULL;
		} else if (d->kind == WEFT_PLUGIN_ALGO_PACK) {
			struct weft_algo_ops *a = &aops[i];
			memset(a, 0, sizeof(*a));
			a->size = (shape & 16) ? sizeof(*a) : (size_t)take(&c, 1);
			a->algos = (present & 1) ? no_algos : NULL;
			d->ops = exact_copy(a, sizeof(*a), a->size, heap, &nheap);
		} else {
			/* Each op slot after size: set or NULL by one bit. Filled only up
			 * to the size the table claims, as a real older plugin would. */
			struct weft_transport_ops *t = &tops[i];
			memset(t, 0, sizeof(*t));
			t->size = (shape & 16) ? sizeof(*t) : (size_t)take(&c, 1);
			void (**slot)(void) = (void (**)(void))((char *)t + sizeof(t->size));
			size_t nslots = (sizeof(*t) - sizeof(t->size)) / sizeof(*slot);
			for (size_t s = 0; s < nslots; s++)
				if ((present >> (s % 32)) & 1)
					slot[s] = (void (*)(void))dummy_op;
			d->ops = exact_copy(t, sizeof(*t), t->size, heap, &nheap);
		}
	}
	/* The descriptors too, each in a block of exactly the size it claims. */
	const struct weft_plugin_desc *dp[FZ_MAX_DESCS];
	for (int i = 0; i < ndesc; i++)
		dp[i] = exact_copy(&descs[i], sizeof(descs[i]), descs[i].size, heap, &nheap);
	pthread_mutex_lock(&reg_lock);
	int dir = (int)(take(&c, 1) % 2);
	for (int i = 0; i < ndesc; i++)
		take_desc(i % 2 ? "/fuzz/b/libweft-b.so" : "/fuzz/a/libweft-a.so", dir + i % 2, i, dp[i]);
	/* Whatever was accepted must be a name the checks allow. */
	for (int i = 0; i < reg_n; i++)
		if (reg_list[i]->pub.state == WEFT_PLUGIN_LOADED && !valid_name(reg_list[i]->pub.name))
			__builtin_trap();
	reg_reset();
	pthread_mutex_unlock(&reg_lock);
	for (int i = 0; i < nheap; i++)
		free(heap[i]);
	return 0;
}
