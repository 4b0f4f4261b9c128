/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for what a transport reads from a peer: its section of a memory blob
 * (mem_import) and, where the transport's connect only parses before handing
 * the address to its library, its endpoint address (connect). The plugin built
 * in this tree is dlopen'ed and driven through its ops table with a minimal
 * core, as tests/test_ofi.c does; with FUZZ_PLUGIN_STATIC the plugin's sources
 * are linked in instead and fuzz_tp_prepare() runs before its init (fuzz_ib:
 * a verbs stand-in, so no RDMA device is needed). The first input byte picks
 * the parser. FUZZ_WRITE_SEEDS=<dir> writes a real blob and addresses there
 * and exits. Modes: 0 mem_import, 1..3 connect to a peer of class mode-1,
 * 4 (static builds) the stand-in's fuzz_tp_mode4. */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/plugin.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#ifdef FUZZ_PLUGIN_STATIC
void fuzz_tp_prepare(void);
const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core);
/* Mode 4: the stand-in's own parser of peer input (fuzz_ib: the mailbox and
 * immediate data of write-with-immediate signals). */
void fuzz_tp_mode4(const struct weft_transport_ops *ops, void *tc, const uint8_t *buf, size_t n);
#define FUZZ_MODES 5
#else
#define FUZZ_MODES 4
#endif

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
static int ucx_connect_mode;

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

/* UCX's endpoint address: a 24-byte header (magic, version, reserved,
 * worker-address length, pid, pid namespace) and the worker address. An input
 * in ucx_connect_mode is the header (zero-padded when shorter; an input
 * shorter than the header is passed as it is) and a u16 length L; the address
 * handed to connect is that header and L bytes: this worker's own address
 * (from mine, an address this context just made), cut to L or zero-extended.
 * So weft's header and length checks see every combination, and whatever gets
 * past them reaches ucp_ep_create as a real address, cut or not. */
#define UCX_HDR 24
static size_t ucx_connect_input(const uint8_t *in, size_t n, const uint8_t *mine, size_t mlen, uint8_t **out)
{
	if (n < UCX_HDR) {
		*out = malloc(n ? n : 1);
		if (*out && n)
			memcpy(*out, in, n);
		return n;
	}
	size_t wlen = mlen > UCX_HDR ? mlen - UCX_HDR : 0;
	size_t l = n >= UCX_HDR + 2 ? (size_t)(in[UCX_HDR] | in[UCX_HDR + 1] << 8) : wlen;
	l %= wlen + 17;
	uint8_t *a = calloc(1, UCX_HDR + l);
	if (!a) {
		*out = NULL;
		return 0;
	}
	memcpy(a, in, UCX_HDR);
	memcpy(a + UCX_HDR, mine + UCX_HDR, l < wlen ? l : wlen);
	/* A valid pid (1..INT32_MAX, offset 12) is made this process's own: a pid
	 * of a dead process in this pid namespace makes disconnect force-close an
	 * endpoint that UCX (1.13) only force-closes in peer error mode; it then
	 * refuses, and the endpoint stays in UCX until the worker is destroyed
	 * (reported in docs/reliability.md, a fix for plugins/ucx/ucx_ep.c). */
	uint32_t pid = (uint32_t)a[12] | (uint32_t)a[13] << 8 | (uint32_t)a[14] << 16 | (uint32_t)a[15] << 24;
	if (pid != 0 && pid <= INT32_MAX) {
		pid = (uint32_t)getpid();
		for (int i = 0; i < 4; i++)
			a[12 + i] = (uint8_t)(pid >> (8 * i));
	}
	*out = a;
	return UCX_HDR + l;
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
#ifdef FUZZ_PLUGIN_STATIC
	fuzz_tp_prepare();
	const struct weft_plugin_desc *const *d = weft_plugin_init(&core);
#else
	void *h = dlopen(FUZZ_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "fuzz_%s: dlopen: %s\n", FUZZ_PLUGIN_NAME, dlerror());
		abort();
	}
	weft_plugin_init_fn init = (weft_plugin_init_fn)dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	const struct weft_plugin_desc *const *d = init ? init(&core) : NULL;
#endif
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
	 * address vector (no traffic); shm's checks the peer process with kill(pid,
	 * 0); ib's (here on the verbs stand-in) moves its queue pair through states
	 * that only the stand-in sees. UCX's hands the worker address to UCX itself
	 * after its header checks, and garbage there would fuzz UCX rather than
	 * weft: its inputs carry a header and a length, and the worker address
	 * bytes are this worker's own, cut to that length (see ucx_connect_input). */
	connect_parses_only = strcmp(FUZZ_PLUGIN_NAME, "ofi") == 0 || strcmp(FUZZ_PLUGIN_NAME, "shm") == 0 ||
			      strcmp(FUZZ_PLUGIN_NAME, "ib") == 0;
	ucx_connect_mode = strcmp(FUZZ_PLUGIN_NAME, "ucx") == 0;

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
				if (ucx_connect_mode && alen >= UCX_HDR) {
					/* Header, then the worker address's length. */
					size_t wlen = alen - UCX_HDR;
					addr[1 + UCX_HDR] = (unsigned char)wlen;
					addr[2 + UCX_HDR] = (unsigned char)(wlen >> 8);
					alen = UCX_HDR + 2;
				}
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
	int mode = data[0] % FUZZ_MODES;
	/* An exact-size heap copy, so that ASan sees any read past the input. */
	size_t n = size - 1;
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, n);
#ifdef FUZZ_PLUGIN_STATIC
	if (mode == 4) {
		fuzz_tp_mode4(ops, tc, buf, n);
		free(buf);
		return 0;
	}
#endif
	if (mode == 0 || (!connect_parses_only && !ucx_connect_mode)) {
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
			if (ucx_connect_mode) {
				uint8_t *a = NULL;
				size_t an = ucx_connect_input(buf, n, mine, alen, &a);
				if (a)
					ops->connect(ep, a, an);
				free(a);
			} else {
				ops->connect(ep, buf, n);
			}
			ops->disconnect(ep);
			/* Until the endpoint it closed is reaped. */
			for (int i = 0; ucx_connect_mode && i < 100; i++)
				ops->progress(tc);
		}
	}
	free(buf);
	return 0;
}
