/* Plugin-level tests of the ucx transport: the built plugin is dlopen'ed and
 * driven through its ops table, in one process and by two forked ranks over
 * UCX's tcp (pinned to loopback) and shared-memory transports. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "testlib.h"

#ifndef WEFT_UCX_PLUGIN_PATH
#error "WEFT_UCX_PLUGIN_PATH must name the built plugin"
#endif

/* ------------------------------------------------ a minimal core for the plugin */
#define MAX_PARAMS 16
static struct weft_param_decl params[MAX_PARAMS];
static int nparams;
static int test_rank = -1;
static int log_errors; /* ERROR lines seen, for tests that expect one */

static void t_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	(void)self;
	if (level == WEFT_LOG_ERROR)
		log_errors++;
	const char *lv = getenv("WT_UCX_LOG");
	int max = lv ? atoi(lv) : WEFT_LOG_WARN;
	if ((int)level > max)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "[rank %d] ", test_rank);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int t_log_enabled(struct weft_plugin *self, enum weft_log_level level)
{
	(void)self;
	return level <= WEFT_LOG_WARN;
}

static int t_param_declare(struct weft_plugin *self, const struct weft_param_decl *d)
{
	(void)self;
	for (int i = 0; i < nparams; i++)
		if (strcmp(params[i].section, d->section) == 0 && strcmp(params[i].key, d->key) == 0)
			return -EEXIST;
	if (nparams == MAX_PARAMS)
		return -ENOMEM;
	params[nparams++] = *d;
	return 0;
}

/* Reads WEFT_<SECTION>_<KEY> as the core would, else the declared default. */
static int t_param_get(struct weft_plugin *self, const char *section, const char *key, enum weft_param_type type,
		       void *out, enum weft_param_source *source)
{
	(void)self;
	if (!section)
		section = "ucx";
	for (int i = 0; i < nparams; i++) {
		if (strcmp(params[i].section, section) != 0 || strcmp(params[i].key, key) != 0)
			continue;
		if (params[i].type != type)
			return -EINVAL;
		char env[128];
		snprintf(env, sizeof(env), "WEFT_%s_%s", section, key);
		for (char *c = env; *c; c++)
			*c = *c == '-' ? '_' : (char)toupper((unsigned char)*c);
		const char *v = getenv(env);
		if (source)
			*source = v ? WEFT_PARAM_SRC_ENV : WEFT_PARAM_SRC_DEFAULT;
		if (!v)
			v = params[i].default_value;
		switch (type) {
		case WEFT_PARAM_STRING:
			*(const char **)out = v;
			return 0;
		case WEFT_PARAM_INT:
			*(int64_t *)out = v ? strtoll(v, NULL, 0) : 0;
			return 0;
		default:
			return -EINVAL;
		}
	}
	return -ENOENT;
}

static const struct weft_core_api core = {
	.size = sizeof(struct weft_core_api),
	.self = NULL,
	.core_version = WEFT_VERSION_CODE,
	.log = t_log,
	.log_enabled = t_log_enabled,
	.param_declare = t_param_declare,
	.param_get = t_param_get,
	.alloc = malloc,
	.calloc = calloc,
	.free = free,
};

static const struct weft_transport_ops *ops;

static void load_plugin(void)
{
	if (ops)
		return;
	void *h = dlopen(WEFT_UCX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "dlopen: %s", dlerror());
	weft_plugin_init_fn init = (weft_plugin_init_fn)dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	ck_assert_ptr_nonnull(init);
	const struct weft_plugin_desc *const *d = init(&core);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(d[0]);
	ck_assert_ptr_null(d[1]);
	ck_assert_int_eq(d[0]->abi_major, WEFT_PLUGIN_ABI_MAJOR);
	ck_assert_int_eq(d[0]->kind, WEFT_PLUGIN_TRANSPORT);
	ck_assert_str_eq(d[0]->name, "ucx");
	ops = d[0]->ops;
	ck_assert_uint_ge(ops->size, offsetof(struct weft_transport_ops, ep_describe) + sizeof(ops->ep_describe));
	/* A second init (the core calls it once per file; a harness may not) keeps working. */
	ck_assert_ptr_eq(init(&core), d);
}

static int open_ctx(int rank, void **tc)
{
	struct weft_tp_open_args a = {
		.size = sizeof(a), .rank = rank, .nranks = 2, .comm_tag = 42, .local_addr = "127.0.0.1",
		.host_id = "testhost",
	};
	return ops->open(&a, tc);
}

/* ---------------------------------------------------------- rank helpers */
#define FAIL(...)                                                                    \
	do {                                                                         \
		fprintf(stderr, "[rank %d] %s:%d: ", test_rank, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                        \
		fputc('\n', stderr);                                                 \
		return __LINE__ & 0x7f ? __LINE__ & 0x7f : 1;                        \
	} while (0)
#define REQ(cond, ...)                     \
	do {                               \
		if (!(cond))               \
			FAIL(__VA_ARGS__); \
	} while (0)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int send_msg(int fd, const void *buf, uint32_t len)
{
	if (write(fd, &len, 4) != 4)
		return -1;
	return len == 0 || write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

static int read_full(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

/* Receives one message; while none is there, keeps the context progressing so
 * that data aimed at this rank lands (UCX's tcp and emulated operations need
 * the target's progress). */
static int recv_msg(int fd, void *tc, void *buf, uint32_t cap, uint32_t *len)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, tc ? 0 : 100) > 0)
			break;
		if (tc && ops->progress(tc) < 0)
			return -1;
	}
	uint32_t l;
	if (read_full(fd, &l, 4) < 0 || l > cap || read_full(fd, buf, l) < 0)
		return -1;
	if (len)
		*len = l;
	return 0;
}

static uint64_t xs_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Byte i of stream `seed` depends only on (seed, i), so a receiver checks any
 * range without a copy of the sender's buffer. */
static unsigned char rnd_byte(uint64_t seed, uint64_t i)
{
	uint64_t x = (seed * 0x9E3779B97F4A7C15ull) ^ ((i >> 3) * 0xBF58476D1CE4E5B9ull);
	x ^= x >> 31;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 29;
	return (unsigned char)(x >> (8 * (i & 7)));
}

static void fill_random(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = rnd_byte(seed, i);
}

/* Index of the first byte that differs from the stream, or -1. */
static long check_random(const unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != rnd_byte(seed, i))
			return (long)i;
	return -1;
}

static int spin_flush(void *ep, void *tc)
{
	double t0 = now_s();
	for (;;) {
		int rc = ops->flush(ep);
		if (rc != -EAGAIN)
			return rc;
		int prc = ops->progress(tc);
		if (prc < 0)
			return prc;
		if (now_s() - t0 > 120)
			return -ETIMEDOUT;
	}
}

static int put_retry(void *ep, void *tc, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	for (;;) {
		int rc = ops->put(ep, rmh, roff, mh, loff, len);
		if (rc != -EAGAIN)
			return rc;
		ops->progress(tc);
	}
}

static int signal_retry(void *ep, void *tc, void *rmh, uint64_t roff, uint64_t v)
{
	for (;;) {
		int rc = ops->signal(ep, rmh, roff, v);
		if (rc != -EAGAIN)
			return rc;
		ops->progress(tc);
	}
}

/* --------------------------------------------------------- a 2-rank setup */
#define DATA_BYTES ((size_t)64 << 20)
#define DATA_SLACK 8192
#define TOK_BYTES 4096

struct mp_arg {
	int sv[2];
	enum weft_peer_class cls;
	const char *expect_class; /* "tcp", "shm", or NULL for UCX's choice */
};

struct side {
	int fd;
	void *tc;
	unsigned char *data; /* DATA_BYTES + DATA_SLACK */
	uint64_t *tok;       /* TOK_BYTES */
	void *mh_data, *mh_tok;
	void *rmh_data, *rmh_tok;
	void *ep;
	const struct mp_arg *arg;
};

static int exchange(struct side *s, const void *mine, uint32_t len, void *theirs, uint32_t cap, uint32_t *tlen)
{
	if (send_msg(s->fd, mine, len) < 0)
		return -1;
	return recv_msg(s->fd, NULL, theirs, cap, tlen);
}

static int import_peer(struct side *s, int peer, void *mh, void **rmh)
{
	unsigned char mine[4096], theirs[4096];
	size_t len = 0;
	uint32_t tlen;
	if (ops->mem_serialize(s->tc, mh, NULL, &len) != -ENOSPC || len == 0 || len > sizeof(mine))
		return -1;
	if (ops->mem_serialize(s->tc, mh, mine, &len) != 0)
		return -1;
	if (exchange(s, mine, (uint32_t)len, theirs, sizeof(theirs), &tlen) < 0)
		return -1;
	return ops->mem_import(s->tc, peer, theirs, tlen, rmh);
}

/* Checks what UCX really uses for the connection (after traffic, once wireup
 * has settled): every lane of the expected class. */
static int check_transport(struct side *s)
{
	char desc[1024];
	int rc = ops->ep_describe(s->ep, desc, sizeof(desc));
	REQ(rc == 0, "ep_describe: %d", rc);
	if (getenv("WT_UCX_VERBOSE"))
		fprintf(stderr, "[rank %d] %s\n", test_rank, desc);
	REQ(strstr(desc, "transports=") && !strstr(desc, "transports=none"), "no transports in '%s'", desc);
	const char *cls = s->arg->expect_class;
	if (cls) {
		char want[64];
		snprintf(want, sizeof(want), " classes=%s ", cls);
		REQ(strstr(desc, want) != NULL, "ep_describe '%s' lacks '%s'", desc, want);
	}
	/* Whatever UCX picked, tcp stays on loopback. */
	REQ(!strstr(desc, "tcp/") || strstr(desc, "tcp/lo"), "tcp not on loopback: %s", desc);
	REQ(!strstr(desc, "tcp/eth") && !strstr(desc, "tcp/en"), "tcp not on loopback: %s", desc);
	return 0;
}

static int setup(int rank, const struct mp_arg *a, struct side *s)
{
	test_rank = rank;
	memset(s, 0, sizeof(*s));
	s->arg = a;
	s->fd = a->sv[rank];
	close(a->sv[1 - rank]);
	int rc = open_ctx(rank, &s->tc);
	REQ(rc == 0, "open: %d", rc);
	s->data = malloc(DATA_BYTES + DATA_SLACK);
	REQ(posix_memalign((void **)&s->tok, 4096, TOK_BYTES) == 0 && s->data, "alloc");
	memset(s->data, 0xA5, DATA_BYTES + DATA_SLACK);
	memset(s->tok, 0, TOK_BYTES);
	REQ(ops->mem_register(s->tc, s->data, DATA_BYTES + DATA_SLACK, WEFT_MEM_HOST, &s->mh_data) == 0, "reg data");
	REQ(ops->mem_register(s->tc, s->tok, TOK_BYTES, WEFT_MEM_HOST, &s->mh_tok) == 0, "reg tok");
	REQ(import_peer(s, 1 - rank, s->mh_data, &s->rmh_data) == 0, "import data");
	REQ(import_peer(s, 1 - rank, s->mh_tok, &s->rmh_tok) == 0, "import tok");

	struct weft_tp_peer peer = {
		.size = sizeof(peer), .rank = 1 - rank, .peer_class = a->cls, .host_id = "testhost",
		.addr = "127.0.0.1",
	};
	unsigned char addr[8192], paddr[8192];
	size_t alen = 0;
	uint32_t plen;
	void *dummy;
	REQ(ops->endpoint(s->tc, &peer, NULL, &alen, &dummy) == -ENOSPC && alen > 24 && alen <= sizeof(addr),
	    "addr size %zu", alen);
	rc = ops->endpoint(s->tc, &peer, addr, &alen, &s->ep);
	REQ(rc == 0, "endpoint: %d", rc);
	REQ(exchange(s, addr, (uint32_t)alen, paddr, sizeof(paddr), &plen) == 0, "exchange addr");
	rc = ops->connect(s->ep, paddr, plen);
	REQ(rc == 0, "connect: %d", rc);
	REQ(ops->connect(s->ep, paddr, plen) == -EINVAL, "second connect accepted");
	return 0;
}

static int teardown(struct side *s)
{
	char b;
	/* Both ranks must be done with each other's memory before either leaves. */
	REQ(spin_flush(s->ep, s->tc) == 0, "final flush");
	if (send_msg(s->fd, "x", 1) < 0 || recv_msg(s->fd, s->tc, &b, 1, NULL) < 0)
		FAIL("final handshake");
	REQ(ops->disconnect(s->ep) == 0, "disconnect");
	REQ(ops->mem_release(s->tc, s->rmh_data) == 0 && ops->mem_release(s->tc, s->rmh_tok) == 0, "release");
	REQ(ops->mem_deregister(s->tc, s->mh_data) == 0 && ops->mem_deregister(s->tc, s->mh_tok) == 0, "dereg");
	ops->close(s->tc);
	free(s->data);
	free(s->tok);
	close(s->fd);
	return 0;
}

/* Puts of 1 B .. 64 MiB at odd offsets; rank 1 checks every byte and the guard
 * bytes around it after rank 0's flush returned 0. */
static int rank_puts(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	static const size_t sizes[] = {1, 3, 8, 63, 4097, 65541, (1u << 20) + 7, (size_t)64 << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint64_t loff = 4095 - 2 * i, roff = 1 + 2 * i * 7;
		uint64_t seed = 1000 + i;
		char m;
		if (rank == 0) {
			fill_random(s.data + loff, n, seed);
			rc = put_retry(s.ep, s.tc, s.rmh_data, roff, s.mh_data, loff, n);
			REQ(rc == 0, "put %zu: %d", n, rc);
			rc = spin_flush(s.ep, s.tc);
			REQ(rc == 0, "flush after put %zu: %d", n, rc);
			REQ(send_msg(s.fd, "d", 1) == 0, "send");
			REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv ack");
		} else {
			REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv done");
			long bad = check_random(s.data + roff, n, seed);
			REQ(bad < 0, "put of %zu bytes: byte %ld differs", n, bad);
			REQ(s.data[roff - 1] == 0xA5 && s.data[roff + n] == 0xA5, "put of %zu bytes wrote outside", n);
			memset(s.data + roff - 1, 0xA5, n + 2);
			REQ(send_msg(s.fd, "a", 1) == 0, "send ack");
		}
	}
	if (rank == 0 && (rc = check_transport(&s)) != 0)
		return rc;
	return teardown(&s);
}

/* Many puts in flight, then one signal: once rank 1 sees the token, every byte
 * of every put must already be there, with no other synchronisation. */
static int rank_signal(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	enum { NPUT = 300, PSZ = 65539, ROUNDS = 5 };
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t token = 7000 + (uint64_t)round;
		size_t psz = round == 0 ? 1 : round == 1 ? 200 : PSZ; /* small ones first */
		char m;
		if (rank == 0) {
			for (int k = 0; k < NPUT; k++) {
				uint64_t off = 3 + (uint64_t)k * (PSZ + 2);
				fill_random(s.data + off, psz, (uint64_t)round * 100000 + (uint64_t)k);
				rc = put_retry(s.ep, s.tc, s.rmh_data, off, s.mh_data, off, psz);
				REQ(rc == 0, "put %d: %d", k, rc);
			}
			rc = signal_retry(s.ep, s.tc, s.rmh_tok, 8 * (uint64_t)(round % 3 + 1), token);
			REQ(rc == 0, "signal: %d", rc);
			/* No flush here: the signal alone must carry the data. */
			REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv ack");
		} else {
			volatile uint64_t *t = &s.tok[round % 3 + 1];
			double t0 = now_s();
			while (*t != token) {
				uint64_t v = *t;
				REQ(v == 0 || (v >= 7000 && v < token), "token went to %llu", (unsigned long long)v);
				rc = ops->progress(s.tc);
				REQ(rc == 0, "progress: %d", rc);
				REQ(now_s() - t0 < 60, "token %llu never arrived", (unsigned long long)token);
			}
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			for (int k = 0; k < NPUT; k++) {
				uint64_t off = 3 + (uint64_t)k * (PSZ + 2);
				long bad = check_random(s.data + off, psz, (uint64_t)round * 100000 + (uint64_t)k);
				REQ(bad < 0, "round %d: put %d byte %ld not there when the token was", round, k, bad);
			}
			REQ(send_msg(s.fd, "a", 1) == 0, "send ack");
		}
	}
	/* Back-to-back signals, no puts between: the last value wins, never an older one. */
	if (rank == 0) {
		for (uint64_t v = 1; v <= 200; v++)
			REQ(signal_retry(s.ep, s.tc, s.rmh_tok, 0, v) == 0, "signal %llu", (unsigned long long)v);
		REQ(spin_flush(s.ep, s.tc) == 0, "flush after signals");
		REQ(send_msg(s.fd, "d", 1) == 0, "send");
		if ((rc = check_transport(&s)) != 0)
			return rc;
	} else {
		char m;
		uint64_t last = 0;
		double t0 = now_s();
		while (last != 200) {
			uint64_t v = __atomic_load_n(&s.tok[0], __ATOMIC_ACQUIRE);
			REQ(v >= last && v <= 200, "token went from %llu to %llu", (unsigned long long)last,
			    (unsigned long long)v);
			last = v;
			REQ(ops->progress(s.tc) == 0, "progress");
			REQ(now_s() - t0 < 60, "token stuck at %llu", (unsigned long long)last);
		}
		REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv");
	}
	return teardown(&s);
}

/* Out-of-range puts and signals are refused, and leave the endpoint usable. */
static int rank_bounds(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	if (rank == 0) {
		size_t dl = DATA_BYTES + DATA_SLACK;
		REQ(ops->put(s.ep, s.rmh_data, dl - 10, s.mh_data, 0, 11) == -EINVAL, "remote overrun");
		REQ(ops->put(s.ep, s.rmh_data, dl + 1, s.mh_data, 0, 0) == -EINVAL, "remote offset past end");
		REQ(ops->put(s.ep, s.rmh_data, 0, s.mh_data, dl - 10, 11) == -EINVAL, "local overrun");
		REQ(ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, SIZE_MAX) == -EINVAL, "huge length");
		REQ(ops->put(s.ep, s.rmh_data, UINT64_MAX, s.mh_data, 0, 2) == -EINVAL, "offset wrap");
		REQ(ops->put(s.ep, s.rmh_data, 0, s.mh_tok, 0, TOK_BYTES + 1) == -EINVAL, "local overrun tok");
		REQ(ops->put(s.ep, NULL, 0, s.mh_data, 0, 1) == -EINVAL, "NULL remote");
		REQ(ops->put(s.ep, s.rmh_data, 0, NULL, 0, 1) == -EINVAL, "NULL local");
		REQ(ops->signal(s.ep, s.rmh_tok, TOK_BYTES - 4, 1) == -EINVAL, "signal overrun");
		REQ(ops->signal(s.ep, s.rmh_tok, TOK_BYTES, 1) == -EINVAL, "signal past end");
		REQ(ops->signal(s.ep, s.rmh_tok, UINT64_MAX - 3, 1) == -EINVAL, "signal offset wrap");
		REQ(ops->signal(s.ep, s.rmh_tok, 3, 1) == -EINVAL, "unaligned signal");
		REQ(ops->flush(s.ep) == 0, "flush with nothing posted");
		REQ(ops->put(s.ep, s.rmh_data, dl, s.mh_data, 0, 0) == 0, "empty put at the end");
		/* The endpoint still works: last byte of the region, then a signal at its end. */
		s.data[0] = 0x5A;
		REQ(put_retry(s.ep, s.tc, s.rmh_data, dl - 1, s.mh_data, 0, 1) == 0, "edge put");
		REQ(signal_retry(s.ep, s.tc, s.rmh_tok, TOK_BYTES - 8, 99) == 0, "edge signal");
		REQ(spin_flush(s.ep, s.tc) == 0, "flush");
		REQ(send_msg(s.fd, "d", 1) == 0, "send");
	} else {
		char m;
		REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv");
		REQ(s.data[DATA_BYTES + DATA_SLACK - 1] == 0x5A, "edge byte");
		REQ(s.tok[TOK_BYTES / 8 - 1] == 99, "edge token");
		REQ(s.data[DATA_BYTES + DATA_SLACK - 2] == 0xA5, "byte before edge");
	}
	return teardown(&s);
}

/* max_inflight=1 (set by the test): with the target not progressing, a second
 * signal behind an unflushed put must see -EAGAIN, and flush must not report
 * completion; once the target progresses, everything completes. */
static int rank_inflight(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 0) {
		fill_random(s.data, 1 << 20, 5);
		REQ(ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 1 << 20) == 0, "first put");
		/* The put may complete locally at once; the signal waits for its
		 * remote completion, which needs the (sleeping) target over tcp. */
		rc = ops->signal(s.ep, s.rmh_tok, 0, 1);
		REQ(rc == 0 || rc == -EAGAIN, "signal: %d", rc);
		bool sig_posted = rc == 0;
		if (sig_posted)
			REQ(ops->signal(s.ep, s.rmh_tok, 8, 2) == -EAGAIN, "second signal with max_inflight=1");
		REQ(ops->flush(s.ep) == -EAGAIN, "flush before the target progressed");
		REQ(send_msg(s.fd, "g", 1) == 0, "send go");
		if (!sig_posted)
			REQ(signal_retry(s.ep, s.tc, s.rmh_tok, 0, 1) == 0, "signal");
		REQ(signal_retry(s.ep, s.tc, s.rmh_tok, 8, 2) == 0, "second signal");
		REQ(spin_flush(s.ep, s.tc) == 0, "flush");
		REQ(send_msg(s.fd, "d", 1) == 0, "send done");
	} else {
		/* Blocking read: no progress until rank 0 says so. */
		uint32_t l;
		REQ(read_full(s.fd, &l, 4) == 0 && l == 1 && read_full(s.fd, &m, 1) == 0, "recv go");
		REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv done");
		REQ(check_random(s.data, 1 << 20, 5) < 0, "data");
		REQ(s.tok[0] == 1 && s.tok[1] == 2, "tokens %llu %llu", (unsigned long long)s.tok[0],
		    (unsigned long long)s.tok[1]);
	}
	return teardown(&s);
}

/* Rank 1 dies without closing anything: rank 0's next operations must fail
 * with -WEFT_ERR_PEER within a bounded time, without crashing or hanging. */
static int rank_peer_death(int rank, int nranks, void *arg)
{
	(void)nranks;
	struct side s;
	int rc = setup(rank, arg, &s);
	if (rc)
		return rc;
	char m;
	if (rank == 1) {
		REQ(recv_msg(s.fd, s.tc, &m, 1, NULL) == 0, "recv");
		pid_t me = getpid();
		REQ(send_msg(s.fd, &me, sizeof(me)) == 0, "send pid");
		_exit(0);
	}
	fill_random(s.data, 65536, 9);
	REQ(put_retry(s.ep, s.tc, s.rmh_data, 0, s.mh_data, 0, 65536) == 0, "first put");
	REQ(spin_flush(s.ep, s.tc) == 0, "first flush");
	REQ(send_msg(s.fd, "k", 1) == 0, "send");
	/* Wait until rank 1 is gone (reaped by the test's parent). */
	pid_t peer;
	REQ(recv_msg(s.fd, NULL, &peer, sizeof(peer), NULL) == 0, "recv pid");
	double t0 = now_s();
	while (kill(peer, 0) == 0) {
		usleep(10000);
		REQ(now_s() - t0 < 30, "rank 1 does not exit");
	}
	t0 = now_s();
	int prc = 0;
	for (;;) {
		rc = ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 65536);
		if (rc == 0 || rc == -EAGAIN)
			rc = ops->signal(s.ep, s.rmh_tok, 0, 5);
		if (rc == 0 || rc == -EAGAIN)
			rc = ops->flush(s.ep);
		if (rc != 0 && rc != -EAGAIN)
			break;
		int p = ops->progress(s.tc);
		if (p < 0 && prc == 0)
			prc = p;
		REQ(now_s() - t0 < 60, "no error 60 s after the peer died");
	}
	REQ(rc == -WEFT_ERR_PEER, "after the peer died: %d", rc);
	REQ(prc == 0 || prc == -WEFT_ERR_PEER, "progress reported %d", prc);
	/* The error sticks, and tearing down still works. */
	REQ(ops->flush(s.ep) == -WEFT_ERR_PEER, "flush after failure");
	REQ(ops->put(s.ep, s.rmh_data, 0, s.mh_data, 0, 8) == -WEFT_ERR_PEER, "put after failure");
	REQ(ops->signal(s.ep, s.rmh_tok, 0, 6) == -WEFT_ERR_PEER, "signal after failure");
	char desc[512];
	REQ(ops->ep_describe(s.ep, desc, sizeof(desc)) == 0 && strstr(desc, "state=failed"), "describe: %s", desc);
	/* progress reports a failure once (unless put/signal/flush got it first). */
	rc = ops->progress(s.tc);
	REQ(rc == 0 || (prc == 0 && rc == -WEFT_ERR_PEER), "progress after the failure: %d", rc);
	REQ(ops->progress(s.tc) == 0, "progress after the failure was reported");
	t0 = now_s();
	REQ(ops->disconnect(s.ep) == 0, "disconnect");
	ops->mem_release(s.tc, s.rmh_data);
	ops->mem_release(s.tc, s.rmh_tok);
	ops->mem_deregister(s.tc, s.mh_data);
	ops->mem_deregister(s.tc, s.mh_tok);
	ops->close(s.tc);
	REQ(now_s() - t0 < 10, "teardown after the failure took %.1f s", now_s() - t0);
	return 0;
}

/* Each test fixes its UCX transports through the plugin's parameters (the
 * env names are the core's, WEFT_UCX_*): tcp always on loopback. */
static void use_tls(const char *tls)
{
	if (tls)
		setenv("WEFT_UCX_TLS", tls, 1);
	else
		unsetenv("WEFT_UCX_TLS");
	setenv("WEFT_UCX_NET_DEVICES", "lo", 1);
}

static void run_mp(wt_rank_fn fn, enum weft_peer_class cls, const char *expect_class)
{
	load_plugin();
	struct mp_arg a = {.cls = cls, .expect_class = expect_class};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, a.sv), 0);
	int failed = wt_fork_ranks(2, fn, &a, 240);
	close(a.sv[0]);
	close(a.sv[1]);
	ck_assert_msg(failed == 0, "%d rank(s) failed", failed);
}

START_TEST(puts_tcp)
{
	use_tls("tcp");
	run_mp(rank_puts, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(puts_shm)
{
	use_tls("sm,self");
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(puts_default)
{
	/* UCX's own choice of transports (tcp kept on loopback). */
	use_tls(NULL);
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, NULL);
}
END_TEST
START_TEST(puts_shm_posix_only)
{
	/* shm's other data path: copies through posix segments, no CMA. */
	use_tls("posix,self");
	run_mp(rank_puts, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(signal_tcp)
{
	use_tls("tcp");
	run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(signal_shm)
{
	use_tls("sm,self");
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(signal_default)
{
	use_tls(NULL);
	run_mp(rank_signal, WEFT_PEER_SAME_HOST, NULL);
}
END_TEST
START_TEST(signal_tcp_fence)
{
	/* The other ordering mechanism: ucp_worker_fence instead of a flush. */
	use_tls("tcp");
	setenv("WEFT_UCX_SIGNAL_ORDER", "fence", 1);
	run_mp(rank_signal, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(bounds_tcp)
{
	use_tls("tcp");
	run_mp(rank_bounds, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(bounds_shm)
{
	use_tls("sm,self");
	run_mp(rank_bounds, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(inflight_tcp)
{
	use_tls("tcp");
	setenv("WEFT_UCX_MAX_INFLIGHT", "1", 1);
	run_mp(rank_inflight, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(peer_death_tcp)
{
	use_tls("tcp");
	run_mp(rank_peer_death, WEFT_PEER_OTHER_HOST, "tcp");
}
END_TEST
START_TEST(peer_death_default)
{
	/* Same host: shared memory, which UCX does not watch; the plugin does. */
	use_tls(NULL);
	run_mp(rank_peer_death, WEFT_PEER_SAME_HOST, "shm");
}
END_TEST
START_TEST(peer_death_peer_mode)
{
	/* error_mode=peer toward a same-host peer: UCX leaves shared memory out
	 * and detects the death itself. */
	use_tls(NULL);
	setenv("WEFT_UCX_ERROR_MODE", "peer", 1);
	run_mp(rank_peer_death, WEFT_PEER_SAME_HOST, "tcp");
}
END_TEST

/* ------------------------------------------------------ single-process tests */
static unsigned char reg_buf[8192];

START_TEST(import_rejects_malformed)
{
	load_plugin();
	use_tls(NULL);
	void *tc, *rmh, *mh;
	ck_assert_int_eq(open_ctx(0, &tc), 0);
	ck_assert_int_eq(ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &mh), 0);
	unsigned char blob[4096], bad[4200];
	size_t len = sizeof(blob);
	ck_assert_int_eq(ops->mem_serialize(tc, mh, blob, &len), 0);
	ck_assert_uint_gt(len, 32);
	ck_assert_int_eq(ops->mem_import(tc, 1, blob, len, &rmh), 0);
	ck_assert_int_eq(ops->mem_release(tc, rmh), 0);
	/* Every truncation, and one extra byte. */
	for (size_t l = 0; l < len; l++)
		ck_assert_int_eq(ops->mem_import(tc, 1, blob, l, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	bad[len] = 0;
	ck_assert_int_eq(ops->mem_import(tc, 1, bad, len + 1, &rmh), -WEFT_ERR_PROTOCOL);
	/* Field by field: magic, version, reserved, key length, reserved, address,
	 * region length, key memory type. */
	static const struct {
		size_t at;
		unsigned char xor;
	} muts[] = {
		{0, 0xff}, {3, 0x01}, {4, 0x01}, {5, 0x80}, {6, 0x01}, {7, 0x80}, {8, 0x01}, {9, 0x01},
		{11, 0x80}, {12, 0x01}, {15, 0x80}, {32 + 8, 0x01},
	};
	for (unsigned i = 0; i < sizeof(muts) / sizeof(muts[0]); i++) {
		memcpy(bad, blob, len);
		bad[muts[i].at] ^= muts[i].xor;
		ck_assert_msg(ops->mem_import(tc, 1, bad, len, &rmh) == -WEFT_ERR_PROTOCOL, "mutation %u accepted", i);
	}
	memcpy(bad, blob, len);
	memset(bad + 16, 0, 8); /* address 0 */
	ck_assert_int_eq(ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 24, 0, 8); /* zero length */
	ck_assert_int_eq(ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 24, 0xff, 8); /* wraps past the address space */
	ck_assert_int_eq(ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(bad, blob, len);
	memset(bad + 32, 0xff, 8); /* key naming 64 memory domains it does not carry */
	ck_assert_int_eq(ops->mem_import(tc, 1, bad, len, &rmh), -WEFT_ERR_PROTOCOL);
	/* Random bytes, and random single-bit corruptions: never a crash. */
	uint64_t s = 12345;
	for (int i = 0; i < 2000; i++) {
		size_t l = xs_next(&s) % sizeof(bad);
		for (size_t k = 0; k < l; k++)
			bad[k] = (unsigned char)xs_next(&s);
		ck_assert_int_eq(ops->mem_import(tc, 1, bad, l, &rmh), -WEFT_ERR_PROTOCOL);
		memcpy(bad, blob, len);
		bad[xs_next(&s) % len] ^= (unsigned char)(1u << (xs_next(&s) % 8));
		int rc = ops->mem_import(tc, 1, bad, len, &rmh);
		ck_assert_msg(rc == 0 || rc == -WEFT_ERR_PROTOCOL, "rc %d", rc);
		if (rc == 0)
			ops->mem_release(tc, rmh);
	}
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
}
END_TEST

START_TEST(register_args)
{
	load_plugin();
	use_tls(NULL);
	void *tc, *mh;
	ck_assert_int_eq(open_ctx(0, &tc), 0);
	ck_assert_int_eq(ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_int_eq(ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HIP, &mh), -ENOTSUP);
	ck_assert_int_eq(ops->mem_register(tc, NULL, 8, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(ops->mem_register(tc, reg_buf, 0, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(ops->mem_register(tc, reg_buf, sizeof(reg_buf), WEFT_MEM_HOST, &mh), 0);
	size_t len = 4;
	unsigned char small[4];
	ck_assert_int_eq(ops->mem_serialize(tc, mh, small, &len), -ENOSPC);
	ck_assert_uint_gt(len, 32);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, NULL), 0);
	ck_assert_int_eq(ops->mem_release(tc, NULL), 0);
	ck_assert_int_eq(ops->disconnect(NULL), 0);
	ck_assert_int_eq(ops->flush(NULL), -EINVAL);
	ck_assert_int_eq(ops->progress(NULL), -EINVAL);
	ops->close(tc);
	ops->close(NULL);
}
END_TEST

START_TEST(connect_rejects_malformed)
{
	load_plugin();
	use_tls(NULL);
	void *tc, *ep;
	ck_assert_int_eq(open_ctx(0, &tc), 0);
	struct weft_tp_peer p = {.size = sizeof(p), .rank = 1, .peer_class = WEFT_PEER_SAME_HOST,
				 .host_id = "testhost", .addr = "127.0.0.1"};
	unsigned char a[8192], bad[8300];
	size_t l = sizeof(a);
	ck_assert_int_eq(ops->endpoint(tc, &p, a, &l, &ep), 0);
	for (size_t k = 0; k < l; k += (k < 64 ? 1 : 37))
		ck_assert_int_eq(ops->connect(ep, a, k), -WEFT_ERR_PROTOCOL);
	memcpy(bad, a, l);
	bad[l] = 0;
	ck_assert_int_eq(ops->connect(ep, bad, l + 1), -WEFT_ERR_PROTOCOL);
	/* magic, version, reserved, address length */
	static const size_t at[] = {0, 3, 4, 5, 6, 7, 8, 9, 11};
	for (unsigned i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		memcpy(bad, a, l);
		bad[at[i]] ^= 0x01;
		ck_assert_msg(ops->connect(ep, bad, l) == -WEFT_ERR_PROTOCOL, "mutation at %zu accepted", at[i]);
	}
	memcpy(bad, a, l);
	memset(bad + 12, 0, 4); /* process id 0 */
	ck_assert_int_eq(ops->connect(ep, bad, l), -WEFT_ERR_PROTOCOL);
	memset(bad + 12, 0xff, 4); /* negative process id */
	ck_assert_int_eq(ops->connect(ep, bad, l), -WEFT_ERR_PROTOCOL);
	struct weft_tp_peer q = p;
	q.peer_class = (enum weft_peer_class)7;
	void *ep2;
	size_t l2 = sizeof(a);
	ck_assert_int_eq(ops->endpoint(tc, &q, a, &l2, &ep2), -EINVAL);
	/* Unconnected: nothing to flush; put and signal are refused. */
	ck_assert_int_eq(ops->flush(ep), 0);
	char desc[256];
	ck_assert_int_eq(ops->ep_describe(ep, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "state=unconnected"), "%s", desc);
	ck_assert_int_eq(ops->disconnect(ep), 0);
	ops->close(tc);
}
END_TEST

/* Two contexts in one process, both progressed by this thread. */
static void same_process(const char *tls, const char *expect_class)
{
	load_plugin();
	use_tls(tls);
	void *tc[2], *ep[2], *mh[2], *rmh[2];
	static unsigned char buf[2][1 << 20];
	unsigned char addr[2][8192], blob[2][4096];
	size_t alen[2], blen[2];
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(open_ctx(r, &tc[r]), 0);
		ck_assert_int_eq(ops->mem_register(tc[r], buf[r], sizeof(buf[r]), WEFT_MEM_HOST, &mh[r]), 0);
		blen[r] = sizeof(blob[r]);
		ck_assert_int_eq(ops->mem_serialize(tc[r], mh[r], blob[r], &blen[r]), 0);
		struct weft_tp_peer p = {.size = sizeof(p), .rank = 1 - r, .peer_class = WEFT_PEER_SAME_PROCESS,
					 .host_id = "testhost", .addr = "127.0.0.1"};
		alen[r] = sizeof(addr[r]);
		ck_assert_int_eq(ops->endpoint(tc[r], &p, addr[r], &alen[r], &ep[r]), 0);
	}
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ops->connect(ep[r], addr[1 - r], alen[1 - r]), 0);
		ck_assert_int_eq(ops->mem_import(tc[r], 1 - r, blob[1 - r], blen[1 - r], &rmh[r]), 0);
	}
	fill_random(buf[0], sizeof(buf[0]), 77);
	memset(buf[1], 0, sizeof(buf[1]));
	int rc;
	while ((rc = ops->put(ep[0], rmh[0], 9, mh[0], 9, sizeof(buf[0]) - 9)) == -EAGAIN)
		ops->progress(tc[1]);
	ck_assert_int_eq(rc, 0);
	while ((rc = ops->signal(ep[0], rmh[0], 0, 0x1122334455667788ull)) == -EAGAIN)
		ops->progress(tc[1]);
	ck_assert_int_eq(rc, 0);
	double t0 = now_s();
	while ((rc = ops->flush(ep[0])) == -EAGAIN) {
		ck_assert_int_eq(ops->progress(tc[0]), 0);
		ck_assert_int_eq(ops->progress(tc[1]), 0);
		ck_assert_msg(now_s() - t0 < 60, "flush does not complete");
	}
	ck_assert_int_eq(rc, 0);
	uint64_t tok;
	memcpy(&tok, buf[1], 8);
	ck_assert_uint_eq(tok, 0x1122334455667788ull);
	ck_assert_int_eq(buf[1][8], 0);
	ck_assert_int_eq(memcmp(buf[0] + 9, buf[1] + 9, sizeof(buf[0]) - 9), 0);
	char desc[1024];
	ck_assert_int_eq(ops->ep_describe(ep[0], desc, sizeof(desc)), 0);
	if (getenv("WT_UCX_VERBOSE"))
		fprintf(stderr, "%s\n", desc);
	char want[64];
	snprintf(want, sizeof(want), " classes=%s ", expect_class);
	ck_assert_msg(strstr(desc, want) != NULL, "'%s' lacks '%s'", desc, want);
	ck_assert_int_eq(ops->ep_describe(ep[0], desc, 8), -ENOSPC);
	/* Release the import before the endpoint, then the rest: any order works. */
	ck_assert_int_eq(ops->mem_release(tc[0], rmh[0]), 0);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ops->disconnect(ep[r]), 0);
		if (r == 1)
			ck_assert_int_eq(ops->mem_release(tc[r], rmh[r]), 0);
		ck_assert_int_eq(ops->mem_deregister(tc[r], mh[r]), 0);
	}
	for (int r = 0; r < 2; r++)
		ops->close(tc[r]);
}

START_TEST(same_process_shm) { same_process("sm,self", "shm"); }
END_TEST
START_TEST(same_process_tcp) { same_process("tcp", "tcp"); }
END_TEST

START_TEST(describe_and_probe)
{
	load_plugin();
	use_tls(NULL);
	char buf[2048];
	ck_assert_int_eq(ops->describe(NULL, buf, sizeof(buf)), 0);
	ck_assert_msg(strstr(buf, "ucx=1.") && strstr(buf, " tls=default net_devices=lo signal=flush"), "%s", buf);
	void *tc;
	ck_assert_int_eq(open_ctx(0, &tc), 0);
	ck_assert_int_eq(ops->describe(tc, buf, sizeof(buf)), 0);
	/* net_devices=lo: UCX offers tcp on loopback only. */
	ck_assert_msg(strstr(buf, "resources=") && strstr(buf, "tcp/lo") && !strstr(buf, "tcp/eth"), "%s", buf);
	ck_assert_int_eq(ops->describe(tc, buf, 8), -ENOSPC);
	ops->close(tc);
	use_tls("tcp");
	ck_assert_int_eq(ops->describe(NULL, buf, sizeof(buf)), 0);
	ck_assert_msg(strstr(buf, " tls=tcp "), "%s", buf);

	struct weft_tp_device devs[4];
	int n = 0;
	ck_assert_int_eq(ops->probe(devs, &n), -ENOSPC);
	ck_assert_int_eq(n, 1);
	n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(devs[0].link, "tcp");
	ck_assert_str_eq(devs[0].name, "lo");
	ck_assert_uint_eq(devs[0].peer_classes, (1u << WEFT_PEER_CLASS_COUNT) - 1);
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);

	use_tls("sm,self,tcp");
	n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(devs[0].link, "shm");
	ck_assert_uint_eq(devs[0].peer_classes, (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST));
	ck_assert_str_eq(devs[1].link, "tcp");
	ck_assert_uint_eq(devs[1].peer_classes, 1u << WEFT_PEER_OTHER_HOST);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(devs[i].mem_types, 1u << WEFT_MEM_HOST);
}
END_TEST

START_TEST(bad_parameters)
{
	load_plugin();
	use_tls(NULL);
	void *tc = NULL;
	setenv("WEFT_UCX_MAX_INFLIGHT", "0", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_MAX_INFLIGHT");
	setenv("WEFT_UCX_SIGNAL_ORDER", "sometimes", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_SIGNAL_ORDER");
	setenv("WEFT_UCX_TLS", "tcp;rm -rf", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "NOEQUALS", 1);
	use_tls(NULL);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "TLS", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	setenv("WEFT_UCX_OPTIONS", "RNDV_THRESH=notasize", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_OPTIONS");
	setenv("WEFT_UCX_ERROR_MODE", "sometimes", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_CONFIG);
	unsetenv("WEFT_UCX_ERROR_MODE");
	/* A real UCX setting passes. */
	setenv("WEFT_UCX_OPTIONS", "UCX_RNDV_THRESH=64K;MAX_EAGER_LANES=1", 1);
	ck_assert_int_eq(open_ctx(0, &tc), 0);
	ops->close(tc);
	unsetenv("WEFT_UCX_OPTIONS");
	/* A transport UCX does not have: nothing to open. */
	use_tls("nosuchtl");
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_NO_DEVICE);
	/* A device that does not exist, likewise. */
	use_tls("tcp");
	setenv("WEFT_UCX_NET_DEVICES", "nosuchdev0", 1);
	ck_assert_int_eq(open_ctx(0, &tc), -WEFT_ERR_NO_DEVICE);
	use_tls(NULL);
}
END_TEST

/* WT_UCX_ONLY=<name> runs one test (a debugging aid). */
#define ADD(tc, t)                                                             \
	do {                                                                   \
		const char *only_ = getenv("WT_UCX_ONLY");                      \
		if (!only_ || strcmp(only_, #t) == 0)                          \
			tcase_add_test(tc, t);                                 \
	} while (0)

int main(void)
{
	Suite *s = suite_create("ucx");
	TCase *single = tcase_create("single");
	tcase_set_timeout(single, 120);
	ADD(single, register_args);
	ADD(single, import_rejects_malformed);
	ADD(single, connect_rejects_malformed);
	ADD(single, same_process_shm);
	ADD(single, same_process_tcp);
	ADD(single, describe_and_probe);
	ADD(single, bad_parameters);
	suite_add_tcase(s, single);
	TCase *mp = tcase_create("mp");
	tcase_set_timeout(mp, 280);
	ADD(mp, puts_tcp);
	ADD(mp, puts_shm);
	ADD(mp, puts_default);
	ADD(mp, puts_shm_posix_only);
	ADD(mp, signal_tcp);
	ADD(mp, signal_shm);
	ADD(mp, signal_default);
	ADD(mp, signal_tcp_fence);
	ADD(mp, bounds_tcp);
	ADD(mp, bounds_shm);
	ADD(mp, inflight_tcp);
	ADD(mp, peer_death_tcp);
	ADD(mp, peer_death_default);
	ADD(mp, peer_death_peer_mode);
	suite_add_tcase(s, mp);
	return wt_run_suite(s);
}
