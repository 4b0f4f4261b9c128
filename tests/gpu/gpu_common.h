/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the GPU tests and weft-gpu-bench: loading the nvlink plugin with a
 * minimal core, a byte pipe between forked ranks (socketpairs made before the
 * fork), CUDA error checks, and deterministic random data. */
#ifndef WEFT_TESTS_GPU_COMMON_H
#define WEFT_TESTS_GPU_COMMON_H

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <weft/plugin.h>

#include "../../plugins/gpurt/gpurt.h"

/* Each program uses a different subset of these helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"

#define GMAX_RANKS 8

static int g_rank = -1;

#define GFAIL(...)                                                                  \
	do {                                                                        \
		fprintf(stderr, "[rank %d] %s:%d: ", g_rank, __FILE__, __LINE__);  \
		fprintf(stderr, __VA_ARGS__);                                       \
		fputc('\n', stderr);                                                \
		return 1;                                                           \
	} while (0)
#define CK(call)                                                                             \
	do {                                                                                 \
		cudaError_t e_ = (call);                                                     \
		if (e_ != cudaSuccess)                                                       \
			GFAIL("%s: %s", #call, cudaGetErrorString(e_));                      \
	} while (0)
#define OK(call)                                                                             \
	do {                                                                                 \
		int r_ = (call);                                                             \
		if (r_ != 0)                                                                 \
			GFAIL("%s returned %d", #call, r_);                                  \
	} while (0)

static void g_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	const char *lv = getenv("WT_NVLINK_LOG");
	int max = lv ? atoi(lv) : WEFT_LOG_WARN;
	if ((int)level > max)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[rank %d] ", g_rank);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
static int g_log_enabled(struct weft_plugin *self, enum weft_log_level level) { return level <= WEFT_LOG_WARN; }
/* Declared parameters read as their defaults, as the core gives them without
 * a config file or environment (nvlink's device: the current one). */
static struct weft_param_decl g_params[16];
static int g_nparams;
static int g_param_declare(struct weft_plugin *self, const struct weft_param_decl *d)
{
	for (int i = 0; i < g_nparams; i++)
		if (strcmp(g_params[i].key, d->key) == 0)
			return -EEXIST;
	if (g_nparams == (int)(sizeof(g_params) / sizeof(g_params[0])))
		return -ENOMEM;
	g_params[g_nparams++] = *d;
	return 0;
}
static int g_param_get(struct weft_plugin *self, const char *section, const char *key, enum weft_param_type type,
		       void *out, enum weft_param_source *source)
{
	for (int i = 0; i < g_nparams; i++) {
		if (strcmp(g_params[i].key, key) != 0)
			continue;
		if (g_params[i].type != type)
			return -EINVAL;
		const char *v = g_params[i].default_value;
		if (source)
			*source = WEFT_PARAM_SRC_DEFAULT;
		switch (type) {
		case WEFT_PARAM_INT: *(int64_t *)out = v ? strtoll(v, NULL, 0) : 0; return 0;
		case WEFT_PARAM_SIZE: *(uint64_t *)out = v ? strtoull(v, NULL, 0) : 0; return 0;
		case WEFT_PARAM_BOOL: *(int *)out = v && (strcmp(v, "true") == 0 || atoi(v) != 0); return 0;
		case WEFT_PARAM_DOUBLE: *(double *)out = v ? strtod(v, NULL) : 0; return 0;
		case WEFT_PARAM_STRING: *(const char **)out = v; return 0;
		}
		return -EINVAL;
	}
	return -ENOENT;
}

static const struct weft_core_api g_core = {
	sizeof(struct weft_core_api), NULL, WEFT_VERSION_CODE, g_log, g_log_enabled, g_param_declare, g_param_get,
	malloc, calloc, free,
};

static const struct weft_transport_ops *g_ops;

static int g_load_plugin(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		GFAIL("dlopen %s: %s", path, dlerror());
	weft_plugin_init_fn init = (weft_plugin_init_fn)dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	if (!init)
		GFAIL("no %s in %s", WEFT_PLUGIN_INIT_SYMBOL, path);
	const struct weft_plugin_desc *const *d = init(&g_core);
	if (!d || !d[0] || strcmp(d[0]->name, "nvlink") != 0)
		GFAIL("%s is not the nvlink plugin", path);
	g_ops = (const struct weft_transport_ops *)d[0]->ops;
	return 0;
}

/* 0: a GPU is here. 77 (skip) otherwise, or 1 (fail) when WEFT_REQUIRE_GPU=1. */
static int g_gpu_present(int *ndev)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && n > 0) {
		*ndev = n;
		return 0;
	}
	const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "0 devices";
	const char *req = getenv("WEFT_REQUIRE_GPU");
	if (req && strcmp(req, "1") == 0) {
		fprintf(stderr, "FAIL: WEFT_REQUIRE_GPU=1 but no CUDA device: %s\n", why);
		return 1;
	}
	printf("SKIP: no CUDA device (%s)\n", why);
	return 77;
}

/* g_gpu_present in a child process, for tests whose ranks fork and must
 * find CUDA uninitialized in their parent. The same results. */
static int g_gpu_present_forked(int *ndev)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int n = 0, rc = g_gpu_present(&n);
		fflush(NULL);
		_exit(rc == 0 ? 100 + (n > 50 ? 50 : n) : rc);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st))
		return 1;
	if (WEXITSTATUS(st) >= 100) {
		*ndev = WEXITSTATUS(st) - 100;
		return 0;
	}
	return WEXITSTATUS(st);
}

/* ------------------------------------------------------- the rank mesh */
/* fd[a][b]: a's end of the socketpair between a and b. */
struct gmesh {
	int n;
	int fd[GMAX_RANKS][GMAX_RANKS];
};

static int gmesh_make(struct gmesh *m, int n)
{
	m->n = n;
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++) {
			int sv[2];
			if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
				return -errno;
			m->fd[a][b] = sv[0];
			m->fd[b][a] = sv[1];
		}
	return 0;
}

/* In the child: close the ends that belong to other ranks. */
static void gmesh_keep(struct gmesh *m, int me)
{
	for (int a = 0; a < m->n; a++)
		for (int b = 0; b < m->n; b++)
			if (a != b && a != me)
				close(m->fd[a][b]);
	/* The parent holds every end too, so a dead peer never reads as EOF:
	 * bounded waits instead. */
	struct timeval tv = {120, 0};
	for (int b = 0; b < m->n; b++)
		if (b != me)
			setsockopt(m->fd[me][b], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int g_sendall(int fd, const void *p, size_t n)
{
	const char *c = (const char *)p;
	while (n) {
		ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

static int g_recvall(int fd, void *p, size_t n)
{
	char *c = (char *)p;
	while (n) {
		ssize_t k = recv(fd, c, n, 0);
		if (k <= 0)
			return -1;
		c += k;
		n -= (size_t)k;
	}
	return 0;
}

/* Swap a variable-size message with peer. */
static int g_swap(struct gmesh *m, int me, int peer, const void *mine, size_t len, void *theirs, size_t *tlen)
{
	uint64_t l = len, tl = 0;
	int fd = m->fd[me][peer];
	if (g_sendall(fd, &l, 8) || g_sendall(fd, mine, len) || g_recvall(fd, &tl, 8) || tl > *tlen ||
	    g_recvall(fd, theirs, tl))
		return -1;
	*tlen = tl;
	return 0;
}

static int g_barrier(struct gmesh *m, int me)
{
	char b = 1;
	for (int p = 0; p < m->n; p++)
		if (p != me && g_sendall(m->fd[me][p], &b, 1))
			return -1;
	for (int p = 0; p < m->n; p++)
		if (p != me && g_recvall(m->fd[me][p], &b, 1))
			return -1;
	return 0;
}

/* ------------------------------------------------------------ the plugin */
struct gpeer {
	void *ep;
	void *rmh; /* the peer's buffer */
};

static int g_open(int rank, int nranks, uint64_t tag, void **tc)
{
	struct weft_tp_open_args a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.rank = rank;
	a.nranks = nranks;
	a.comm_tag = tag;
	a.local_addr = "127.0.0.1";
	a.host_id = "gpuhost";
	return g_ops->open(&a, tc);
}

static int g_connect(struct gmesh *m, void *tc, int me, int peer, void **ep)
{
	struct weft_tp_peer p;
	memset(&p, 0, sizeof(p));
	p.size = sizeof(p);
	p.rank = peer;
	p.peer_class = WEFT_PEER_SAME_HOST;
	p.host_id = "gpuhost";
	p.addr = "127.0.0.1";
	char addr[256], paddr[256];
	size_t len = sizeof(addr), plen = sizeof(paddr);
	OK(g_ops->endpoint(tc, &p, addr, &len, ep));
	if (g_swap(m, me, peer, addr, len, paddr, &plen))
		GFAIL("address swap with %d", peer);
	OK(g_ops->connect(*ep, paddr, plen));
	return 0;
}

/* Registers and swaps a buffer's blob with peer, importing the peer's. */
static int g_exchange(struct gmesh *m, void *tc, int me, int peer, void *mh, void **rmh)
{
	char blob[4096], pblob[4096];
	size_t len = sizeof(blob), plen = sizeof(pblob);
	OK(g_ops->mem_serialize(tc, mh, blob, &len));
	if (g_swap(m, me, peer, blob, len, pblob, &plen))
		GFAIL("blob swap with %d", peer);
	OK(g_ops->mem_import(tc, peer, pblob, plen, rmh));
	return 0;
}

/* Waits (bounded) for a put/signal flush. */
static int g_flush(void *ep)
{
	for (long i = 0; i < 200000000L; i++) {
		int rc = g_ops->flush(ep);
		if (rc == 0)
			return 0;
		if (rc != -EAGAIN)
			GFAIL("flush returned %d", rc);
	}
	GFAIL("flush did not complete");
}

/* xorshift64* stream: the same on both ranks for a given seed. */
static uint64_t g_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

static void g_fill(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t s = seed | 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = g_rand(&s);
		memcpy(p + i, &v, 8);
	}
	uint64_t v = g_rand(&s);
	for (; i < n; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

#endif
