/* SPDX-License-Identifier: Apache-2.0 */
/* Shared harness of the plugin-level transport tests: the test-local core
 * (log, WEFT_<SECTION>_<KEY> parameters, allocation), plugin loading, and the
 * socketpair-connected 2-rank setup. */
#define _GNU_SOURCE
#include "tp_harness.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"

#define MAX_PARAMS 32
static struct weft_param_decl params[MAX_PARAMS];
static int nparams;
static struct th_options opts;
const struct weft_transport_ops *th_ops;
int th_rank = -1;
int th_log_errors;
char th_logbuf[1 << 16];
size_t th_loglen;

void th_configure(const struct th_options *o)
{
	opts = *o;
}

bool th_log_has(const char *s)
{
	return strstr(th_logbuf, s) != NULL;
}

static void t_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	(void)self;
	if (level == WEFT_LOG_ERROR)
		th_log_errors++;
	va_list ap;
	if (opts.capture) {
		static const char lv[] = "EWIDT";
		char line[512];
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		int n = snprintf(th_logbuf + th_loglen, sizeof(th_logbuf) - th_loglen, "[%c] %s\n", lv[level], line);
		if (n > 0 && th_loglen + (size_t)n < sizeof(th_logbuf))
			th_loglen += (size_t)n;
		if (opts.log_env && getenv(opts.log_env))
			fprintf(stderr, "[%c] %s\n", lv[level], line);
		return;
	}
	const char *lv = opts.log_env ? getenv(opts.log_env) : NULL;
	int max = lv ? atoi(lv) : WEFT_LOG_WARN;
	if ((int)level > max)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "[rank %d] ", th_rank);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int t_log_enabled(struct weft_plugin *self, enum weft_log_level level)
{
	(void)self;
	return opts.capture || level <= WEFT_LOG_WARN;
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
		section = opts.default_section;
	if (!section)
		return -ENOENT;
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
		case WEFT_PARAM_SIZE:
			*(uint64_t *)out = v ? strtoull(v, NULL, 0) : 0;
			return 0;
		case WEFT_PARAM_BOOL:
			/* "true" as the ib test writes it, any non-zero number as shm's does. */
			*(int *)out = v ? (strcmp(v, "true") == 0 || atoi(v) != 0) : 0;
			return 0;
		default:
			return -EINVAL;
		}
	}
	return -ENOENT;
}

const struct weft_core_api th_core = {
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

void th_load_plugin(const char *path, const char *name, const struct th_options *o)
{
	if (th_ops)
		return;
	th_configure(o);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(h != NULL, "dlopen: %s", dlerror());
	weft_plugin_init_fn init = (weft_plugin_init_fn)dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	ck_assert_ptr_nonnull(init);
	const struct weft_plugin_desc *const *d = init(&th_core);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(d[0]);
	ck_assert_ptr_null(d[1]);
	ck_assert_int_eq(d[0]->abi_major, WEFT_PLUGIN_ABI_MAJOR);
	ck_assert_int_eq(d[0]->kind, WEFT_PLUGIN_TRANSPORT);
	ck_assert_str_eq(d[0]->name, name);
	th_ops = d[0]->ops;
	ck_assert_uint_ge(th_ops->size,
			  offsetof(struct weft_transport_ops, ep_describe) + sizeof(th_ops->ep_describe));
	/* A second init (the core calls it once per file; a harness may not) keeps working. */
	if (opts.check_reinit)
		ck_assert_ptr_eq(init(&th_core), d);
}

int th_open_ctx(int rank, void **tc)
{
	struct weft_tp_open_args a = {
		.size = sizeof(a), .rank = rank, .nranks = 2, .comm_tag = 42, .local_addr = "127.0.0.1",
		.host_id = "testhost",
	};
	return th_ops->open(&a, tc);
}

/* ---------------------------------------------------------- rank helpers */
int th_send_msg(int fd, const void *buf, uint32_t len)
{
	if (write(fd, &len, 4) != 4)
		return -1;
	return len == 0 || write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

int th_read_full(int fd, void *buf, size_t len)
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
 * that data aimed at this rank lands (manual progress; UCX's tcp and emulated
 * operations need the target's progress). */
int th_recv_msg(int fd, void *tc, void *buf, uint32_t cap, uint32_t *len)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, tc ? 0 : 100) > 0)
			break;
		if (tc && th_ops->progress(tc) < 0)
			return -1;
	}
	uint32_t l;
	if (th_read_full(fd, &l, 4) < 0 || l > cap || th_read_full(fd, buf, l) < 0)
		return -1;
	if (len)
		*len = l;
	return 0;
}

uint64_t th_xs_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

void th_fill_random(unsigned char *p, size_t n, uint64_t seed)
{
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = th_xs_next(&s);
		memcpy(p + i, &v, 8);
	}
	uint64_t v = th_xs_next(&s);
	for (; i < n; i++, v >>= 8)
		p[i] = (unsigned char)v;
}

/* Index of the first byte that differs from the seed's random bytes, or -1. */
long th_check_random(const unsigned char *p, size_t n, uint64_t seed)
{
	enum { BLK = 1 << 16 };
	static unsigned char tmp[BLK];
	uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
	size_t i = 0;
	/* Regenerate in blocks with the same stream as th_fill_random. */
	while (i < n) {
		size_t m = n - i < BLK ? n - i : BLK;
		size_t j = 0;
		for (; j + 8 <= m; j += 8) {
			uint64_t v = th_xs_next(&s);
			memcpy(tmp + j, &v, 8);
		}
		if (j < m) {
			uint64_t v = th_xs_next(&s);
			for (; j < m; j++, v >>= 8)
				tmp[j] = (unsigned char)v;
		}
		if (memcmp(tmp, p + i, m) != 0)
			for (size_t k = 0; k < m; k++)
				if (tmp[k] != p[i + k])
					return (long)(i + k);
		i += m;
	}
	return -1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int th_spin_flush(void *ep, void *tc)
{
	double t0 = now_s();
	for (;;) {
		int rc = th_ops->flush(ep);
		if (rc != -EAGAIN)
			return rc;
		int prc = th_ops->progress(tc);
		if (opts.flush_timeout_s <= 0)
			continue;
		if (prc < 0)
			return prc;
		if (now_s() - t0 > opts.flush_timeout_s)
			return -ETIMEDOUT;
	}
}

int th_put_retry(void *ep, void *tc, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	for (;;) {
		int rc = th_ops->put(ep, rmh, roff, mh, loff, len);
		if (rc != -EAGAIN)
			return rc;
		th_ops->progress(tc);
	}
}

int th_signal_retry(void *ep, void *tc, void *rmh, uint64_t roff, uint64_t v)
{
	for (;;) {
		int rc = th_ops->signal(ep, rmh, roff, v);
		if (rc != -EAGAIN)
			return rc;
		th_ops->progress(tc);
	}
}

/* --------------------------------------------------------- a 2-rank setup */
int th_exchange(struct th_side *s, const void *mine, uint32_t len, void *theirs, uint32_t cap, uint32_t *tlen)
{
	if (th_send_msg(s->fd, mine, len) < 0)
		return -1;
	return th_recv_msg(s->fd, NULL, theirs, cap, tlen);
}

int th_import_peer(struct th_side *s, int peer, void *mh, void **rmh)
{
	unsigned char mine[4096], theirs[4096];
	size_t len = 0;
	uint32_t tlen;
	if (th_ops->mem_serialize(s->tc, mh, NULL, &len) != -ENOSPC || len == 0 || len > sizeof(mine))
		return -1;
	if (th_ops->mem_serialize(s->tc, mh, mine, &len) != 0)
		return -1;
	if (th_exchange(s, mine, (uint32_t)len, theirs, sizeof(theirs), &tlen) < 0)
		return -1;
	return th_ops->mem_import(s->tc, peer, theirs, tlen, rmh);
}

int th_side_open(int rank, const int sv[2], struct th_side *s)
{
	th_rank = rank;
	memset(s, 0, sizeof(*s));
	s->fd = sv[rank];
	close(sv[1 - rank]);
	int rc = th_open_ctx(rank, &s->tc);
	TH_REQ(rc == 0, "open: %d", rc);
	return 0;
}

int th_side_alloc(struct th_side *s)
{
	s->data = malloc(TH_DATA_BYTES + TH_DATA_SLACK);
	TH_REQ(posix_memalign((void **)&s->tok, 4096, TH_TOK_BYTES) == 0 && s->data, "alloc");
	return 0;
}

int th_side_register(struct th_side *s, int rank)
{
	memset(s->data, 0xA5, TH_DATA_BYTES + TH_DATA_SLACK);
	memset(s->tok, 0, TH_TOK_BYTES);
	TH_REQ(th_ops->mem_register(s->tc, s->data, TH_DATA_BYTES + TH_DATA_SLACK, WEFT_MEM_HOST, &s->mh_data) == 0,
	       "reg data");
	TH_REQ(th_ops->mem_register(s->tc, s->tok, TH_TOK_BYTES, WEFT_MEM_HOST, &s->mh_tok) == 0, "reg tok");
	TH_REQ(th_import_peer(s, 1 - rank, s->mh_data, &s->rmh_data) == 0, "import data");
	TH_REQ(th_import_peer(s, 1 - rank, s->mh_tok, &s->rmh_tok) == 0, "import tok");
	return 0;
}

int th_side_connect(struct th_side *s, int rank, enum weft_peer_class cls, size_t min_alen, char *paddr,
		    size_t paddr_cap, uint32_t *plen)
{
	struct weft_tp_peer peer = {
		.size = sizeof(peer), .rank = 1 - rank, .peer_class = cls, .host_id = "testhost",
		.addr = "127.0.0.1",
	};
	unsigned char addr[8192];
	size_t alen = 0;
	void *dummy;
	TH_REQ(th_ops->endpoint(s->tc, &peer, NULL, &alen, &dummy) == -ENOSPC && alen > min_alen &&
		       alen <= sizeof(addr) && alen <= paddr_cap,
	       "addr size %zu", alen);
	int rc = th_ops->endpoint(s->tc, &peer, addr, &alen, &s->ep);
	TH_REQ(rc == 0, "endpoint: %d", rc);
	TH_REQ(th_exchange(s, addr, (uint32_t)alen, paddr, (uint32_t)paddr_cap, plen) == 0, "exchange addr");
	rc = th_ops->connect(s->ep, paddr, *plen);
	TH_REQ(rc == 0, "connect: %d", rc);
	return 0;
}

int th_side_close(struct th_side *s, bool flush_first)
{
	char b;
	/* Both ranks must be done with each other's memory before either leaves. */
	if (flush_first)
		TH_REQ(th_spin_flush(s->ep, s->tc) == 0, "final flush");
	if (th_send_msg(s->fd, "x", 1) < 0 || th_recv_msg(s->fd, s->tc, &b, 1, NULL) < 0)
		TH_FAIL("final handshake");
	if (!flush_first)
		TH_REQ(th_spin_flush(s->ep, s->tc) == 0, "final flush");
	TH_REQ(th_ops->disconnect(s->ep) == 0, "disconnect");
	TH_REQ(th_ops->mem_release(s->tc, s->rmh_data) == 0 && th_ops->mem_release(s->tc, s->rmh_tok) == 0,
	       "release");
	TH_REQ(th_ops->mem_deregister(s->tc, s->mh_data) == 0 && th_ops->mem_deregister(s->tc, s->mh_tok) == 0,
	       "dereg");
	if (s->mapped) {
		TH_REQ(th_ops->mem_free(s->tc, s->data, s->data) == 0 && th_ops->mem_free(s->tc, s->tok, s->tok) == 0,
		       "mem_free");
		th_ops->close(s->tc);
	} else {
		th_ops->close(s->tc);
		free(s->data);
		free(s->tok);
	}
	close(s->fd);
	return 0;
}

/* ------------------------------------------- cases shared by the transports */
int th_case_puts(struct th_side *s, int rank)
{
	static const size_t sizes[] = {1, 3, 8, 63, 4097, 65541, (1u << 20) + 7, (size_t)64 << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint64_t loff = 4095 - 2 * i, roff = 1 + 2 * i * 7;
		uint64_t seed = 1000 + i;
		char m;
		int rc;
		if (rank == 0) {
			th_fill_random(s->data + loff, n, seed);
			rc = th_put_retry(s->ep, s->tc, s->rmh_data, roff, s->mh_data, loff, n);
			TH_REQ(rc == 0, "put %zu: %d", n, rc);
			rc = th_spin_flush(s->ep, s->tc);
			TH_REQ(rc == 0, "flush after put %zu: %d", n, rc);
			TH_REQ(th_send_msg(s->fd, "d", 1) == 0, "send");
			TH_REQ(th_recv_msg(s->fd, s->tc, &m, 1, NULL) == 0, "recv ack");
		} else {
			TH_REQ(th_recv_msg(s->fd, s->tc, &m, 1, NULL) == 0, "recv done");
			long bad = th_check_random(s->data + roff, n, seed);
			TH_REQ(bad < 0, "put of %zu bytes: byte %ld differs", n, bad);
			TH_REQ(s->data[roff - 1] == 0xA5 && s->data[roff + n] == 0xA5, "put of %zu bytes wrote outside", n);
			memset(s->data + roff - 1, 0xA5, n + 2);
			TH_REQ(th_send_msg(s->fd, "a", 1) == 0, "send ack");
		}
	}
	return 0;
}

/* Rank 1 waits for token in *t, reading it once per test: it may land between
 * two reads, and it never goes back or past. */
static int wait_token(struct th_side *s, volatile uint64_t *t, uint64_t token, uint64_t lowest)
{
	double t0 = now_s();
	uint64_t v;
	while ((v = *t) != token) {
		TH_REQ(v == 0 || (v >= lowest && v < token), "token went to %llu", (unsigned long long)v);
		int rc = th_ops->progress(s->tc);
		TH_REQ(rc == 0, "progress: %d", rc);
		TH_REQ(now_s() - t0 < 60, "token %llu never arrived", (unsigned long long)token);
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return 0;
}

int th_case_signal(struct th_side *s, int rank, bool flush_after_signal)
{
	enum { NPUT = 300, PSZ = 65539, ROUNDS = 5, FIRST = 7000 };
	for (int round = 0; round < ROUNDS; round++) {
		uint64_t token = FIRST + (uint64_t)round;
		size_t psz = round == 0 ? 1 : round == 1 ? 200 : PSZ; /* small ones first */
		char m;
		int rc;
		if (rank == 0) {
			for (int k = 0; k < NPUT; k++) {
				uint64_t off = 3 + (uint64_t)k * (PSZ + 2);
				th_fill_random(s->data + off, psz, (uint64_t)round * 100000 + (uint64_t)k);
				rc = th_put_retry(s->ep, s->tc, s->rmh_data, off, s->mh_data, off, psz);
				TH_REQ(rc == 0, "put %d: %d", k, rc);
			}
			rc = th_signal_retry(s->ep, s->tc, s->rmh_tok, 8 * (uint64_t)(round % 3 + 1), token);
			TH_REQ(rc == 0, "signal: %d", rc);
			if (flush_after_signal) {
				rc = th_spin_flush(s->ep, s->tc);
				TH_REQ(rc == 0, "flush: %d", rc);
			}
			TH_REQ(th_recv_msg(s->fd, s->tc, &m, 1, NULL) == 0, "recv ack");
		} else {
			if ((rc = wait_token(s, &s->tok[round % 3 + 1], token, FIRST)))
				return rc;
			for (int k = 0; k < NPUT; k++) {
				uint64_t off = 3 + (uint64_t)k * (PSZ + 2);
				long bad = th_check_random(s->data + off, psz, (uint64_t)round * 100000 + (uint64_t)k);
				TH_REQ(bad < 0, "round %d: put %d byte %ld not there when the token was", round, k, bad);
			}
			TH_REQ(th_send_msg(s->fd, "a", 1) == 0, "send ack");
		}
	}
	return 0;
}

int th_case_signal_burst(struct th_side *s, int rank)
{
	if (rank == 0) {
		for (uint64_t v = 1; v <= 200; v++)
			TH_REQ(th_signal_retry(s->ep, s->tc, s->rmh_tok, 0, v) == 0, "signal %llu", (unsigned long long)v);
		TH_REQ(th_spin_flush(s->ep, s->tc) == 0, "flush after signals");
		TH_REQ(th_send_msg(s->fd, "d", 1) == 0, "send");
		return 0;
	}
	char m;
	uint64_t last = 0;
	double t0 = now_s();
	while (last != 200) {
		uint64_t v = __atomic_load_n(&s->tok[0], __ATOMIC_ACQUIRE);
		TH_REQ(v >= last && v <= 200, "token went from %llu to %llu", (unsigned long long)last,
		       (unsigned long long)v);
		last = v;
		TH_REQ(th_ops->progress(s->tc) == 0, "progress");
		TH_REQ(now_s() - t0 < 60, "token stuck at %llu", (unsigned long long)last);
	}
	TH_REQ(th_recv_msg(s->fd, s->tc, &m, 1, NULL) == 0, "recv");
	return 0;
}
