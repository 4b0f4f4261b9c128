/* Fuzzer for what a transport reads from a peer: its section of a memory blob
 * (mem_import) and, where the transport's connect only parses before handing
 * the address to its library, its endpoint address (connect). The plugin built
 * in this tree is dlopen'ed and driven through its ops table with a minimal
 * core, as tests/test_ofi.c does. The first input byte picks the parser.
 * FUZZ_WRITE_SEEDS=<dir> writes a real blob and addresses there and exits. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void f_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	if (!getenv("FUZZ_VERBOSE"))
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int f_log_enabled(struct weft_plugin *self, enum weft_log_level level)
{
	return getenv("FUZZ_VERBOSE") != NULL;
}

#define MAX_PARAMS 64
static struct weft_param_decl params[MAX_PARAMS];
static int nparams;

static int f_param_declare(struct weft_plugin *self, const struct weft_param_decl *d)
{
	if (nparams == MAX_PARAMS)
		return -ENOMEM;
	params[nparams++] = *d;
	return 0;
}

/* Defaults only, parsed as the core would for the types plugins use. */
static int f_param_get(struct weft_plugin *self, const char *section, const char *key, enum weft_param_type type,
		       void *out, enum weft_param_source *source)
{
	for (int i = 0; i < nparams; i++) {
		if (strcmp(params[i].section, section) != 0 || strcmp(params[i].key, key) != 0)
			continue;
		if (params[i].type != type)
			return -EINVAL;
		const char *v = params[i].default_value;
		if (source)
			*source = WEFT_PARAM_SRC_DEFAULT;
		switch (type) {
		case WEFT_PARAM_STRING:
			*(const char **)out = v;
			return 0;
		case WEFT_PARAM_INT:
			*(int64_t *)out = v ? strtoll(v, NULL, 0) : 0;
			return 0;
		case WEFT_PARAM_SIZE:
			*(uint64_t *)out = v ? strtoull(v, NULL, 0) : 0;
			return 0;
		case WEFT_PARAM_BOOL:
			*(int *)out = v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0);
			return 0;
		case WEFT_PARAM_DOUBLE:
			*(double *)out = v ? strtod(v, NULL) : 0;
			return 0;
		default:
			return -EINVAL;
		}
	}
	return -ENOENT;
}

static const struct weft_core_api core = {
	.size = sizeof(struct weft_core_api),
	.core_version = WEFT_VERSION_CODE,
	.log = f_log,
	.log_enabled = f_log_enabled,
	.param_declare = f_param_declare,
	.param_get = f_param_get,
	.alloc = malloc,
	.calloc = calloc,
	.free = free,
};

static const struct weft_transport_ops *ops;
static void *tc;
static int connect_parses_only;

static struct weft_tp_peer peer_of(int cls)
{
	struct weft_tp_peer p = {.size = sizeof(p), .rank = 1, .peer_class = cls, .host_id = "fuzzhost",
				 .addr = "127.0.0.1"};
	return p;
}

static void write_seed(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n)
		fprintf(stderr, "cannot write %s\n", path);
	if (f)
		fclose(f);
}

/* Closed at exit, so that the leak check at exit sees only what the inputs left. */
static void close_ctx(void)
{
	if (tc)
		ops->close(tc);
	tc = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	void *h = dlopen(FUZZ_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fuzz_%s: dlopen: %s\n", FUZZ_PLUGIN_NAME, dlerror());
		abort();
	}
	weft_plugin_init_fn init = (weft_plugin_init_fn)dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	const struct weft_plugin_desc *const *d = init ? init(&core) : NULL;
	if (!d || !d[0]) {
		fprintf(stderr, "fuzz_%s: the plugin declined to load\n", FUZZ_PLUGIN_NAME);
		abort();
	}
	ops = d[0]->ops;
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .comm_tag = 42,
				      .local_addr = "127.0.0.1", .host_id = "fuzzhost"};
	int rc = ops->open(&a, &tc);
	if (rc) {
		fprintf(stderr, "fuzz_%s: open: %d\n", FUZZ_PLUGIN_NAME, rc);
		abort();
	}
	atexit(close_ctx);
	/* ofi's connect validates the address and then only inserts it into an
	 * address vector (no traffic); UCX's hands the worker address to UCX itself
	 * after the header checks, which would fuzz UCX rather than weft. */
	connect_parses_only = strcmp(FUZZ_PLUGIN_NAME, "ofi") == 0;

	const char *seeds = getenv("FUZZ_WRITE_SEEDS");
	if (seeds) {
		static char buf[4096];
		unsigned char blob[4096], addr[1024];
		void *mh;
		size_t len = sizeof(blob);
		if (ops->mem_register(tc, buf, sizeof(buf), WEFT_MEM_HOST, &mh) == 0 &&
		    ops->mem_serialize(tc, mh, blob + 1, &len) == 0) {
			blob[0] = 0;
			write_seed(seeds, "valid-blob", blob, len + 1);
		}
		for (int cls = 0; cls < 3; cls++) {
			struct weft_tp_peer p = peer_of(cls);
			void *ep;
			size_t alen = sizeof(addr) - 1;
			if (ops->endpoint(tc, &p, addr + 1, &alen, &ep) == 0) {
				char name[32];
				addr[0] = (unsigned char)(1 + cls);
				snprintf(name, sizeof(name), "valid-addr-%d", cls);
				write_seed(seeds, name, addr, alen + 1);
				ops->disconnect(ep);
			}
		}
		exit(0);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0] % 4;
	/* An exact-size heap copy, so that ASan sees any read past the input. */
	size_t n = size - 1;
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, n);
	if (mode == 0 || !connect_parses_only) {
		void *rmh = NULL;
		int rc = ops->mem_import(tc, 1, buf, n, &rmh);
		if (rc == 0)
			ops->mem_release(tc, rmh);
		else if (rmh)
			__builtin_trap(); /* out-params are written only on success */
	} else {
		/* mode 1..3: an endpoint for a peer of that class, then its address. */
		struct weft_tp_peer p = peer_of(mode - 1);
		void *ep = NULL;
		uint8_t mine[1024];
		size_t alen = sizeof(mine);
		if (ops->endpoint(tc, &p, mine, &alen, &ep) == 0) {
			ops->connect(ep, buf, n);
			ops->disconnect(ep);
		}
	}
	free(buf);
	return 0;
}
