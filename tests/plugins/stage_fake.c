/* SPDX-License-Identifier: Apache-2.0 */
/* stagefake: a host-memory stand-in for a GPU transport's staging ops, for
 * tests/test_stage.c. It registers "CUDA" memory (any host memory declared
 * so), reaches no peer itself, and offers stage ops whose copies are memcpy
 * done by a worker thread. With WEFT_TEST_STAGE_TRACE it logs the start and
 * end of every copy into the shared trace (core/stage.h) and holds a copy to
 * the host until the event the test's order needs is in the trace, so the
 * order is decided by the pipeline, not by timing:
 *   copy k (to host) completes once copy k+1 started here (unless k is the
 *   last chunk of a put: trace->expect chunks per put), and once the far
 *   side's copy of chunk k-1 to the device started.
 * A hold that waits hold_ms (WEFT_STAGEFAKE_HOLD_MS) gives up, logs a
 * timeout and completes: an unpipelined stage then only runs slowly and fails
 * the order assertions instead of hanging. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "stage.h" /* the trace layout only */

static const struct weft_core_api *sf_core;

#define SF_MAGIC 0x46465347u /* "GSFF" */
#define SF_QUEUE 1024

struct sf_copy {
	uint64_t id; /* the ticket; 0: free */
	void *dst;
	const void *src;
	size_t len;
	enum weft_stage_dir dir;
	uint64_t chunk; /* this process's count of copies in dir */
	int done;
	struct timespec since;
};

struct sf_ctx {
	int rank;
	pthread_mutex_t mu;
	pthread_t worker;
	int stop;
	uint64_t next_id;
	uint64_t count[2];
	uint64_t head[2]; /* the oldest id per direction not yet completed (0: none) */
	struct sf_copy q[SF_QUEUE];
	struct weft__stage_trace *trace;
	size_t trace_len;
	int64_t hold_ms;
};

struct sf_region {
	uint32_t magic;
	void *ptr;
	size_t len;
};

static int sf_seen(const struct weft__stage_trace *t, int rank_is, int rank, uint32_t what, uint32_t arg,
		   uint64_t chunk)
{
	uint64_t n = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE);
	for (uint64_t i = 0; i < n && i < t->cap; i++) {
		const struct weft__stage_event *e = &t->ev[i];
		if (!__atomic_load_n(&e->valid, __ATOMIC_ACQUIRE))
			continue;
		if (e->what == what && e->arg == arg && e->chunk == chunk && ((int)e->rank == rank) == rank_is)
			return 1;
	}
	return 0;
}

/* Whether copy c may complete now; *gave_up when its hold timed out. */
static int sf_may_complete(struct sf_ctx *c, const struct sf_copy *cp, int *gave_up)
{
	*gave_up = 0;
	struct weft__stage_trace *t = c->trace;
	if (!t || cp->dir != WEFT_STAGE_TO_HOST || t->expect == 0)
		return 1;
	uint64_t k = cp->chunk;
	int next_ok = (k + 1) % t->expect == 0 || sf_seen(t, 1, c->rank, WEFT__EV_COPY_START, WEFT_STAGE_TO_HOST, k + 1);
	int far_ok = k == 0 || sf_seen(t, 0, c->rank, WEFT__EV_COPY_START, WEFT_STAGE_TO_DEVICE, k - 1);
	if (next_ok && far_ok)
		return 1;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t ms = (now.tv_sec - cp->since.tv_sec) * 1000 + (now.tv_nsec - cp->since.tv_nsec) / 1000000;
	*gave_up = ms >= c->hold_ms;
	return *gave_up;
}

static void *sf_worker(void *arg)
{
	struct sf_ctx *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		int worked = 0;
		/* Per direction, in start order: a held copy to the host never
		 * blocks a copy to the device. */
		for (int d = 0; d < 2; d++) {
			uint64_t id = c->head[d];
			if (!id)
				continue;
			struct sf_copy *cp = &c->q[id % SF_QUEUE];
			int gave_up = 0;
			if (!sf_may_complete(c, cp, &gave_up))
				continue;
			memcpy(cp->dst, cp->src, cp->len);
			if (gave_up)
				weft__stage_trace_add(c->trace, c->rank, WEFT__EV_HOLD_TIMEOUT, (uint32_t)d, cp->chunk);
			weft__stage_trace_add(c->trace, c->rank, WEFT__EV_COPY_END, (uint32_t)d, cp->chunk);
			cp->done = 1;
			/* The next copy of this direction, if one was started. */
			c->head[d] = 0;
			for (uint64_t j = id + 1; j < c->next_id; j++) {
				struct sf_copy *n = &c->q[j % SF_QUEUE];
				if (n->id == j && !n->done && (int)n->dir == d) {
					c->head[d] = j;
					break;
				}
			}
			worked = 1;
		}
		if (!worked) {
			pthread_mutex_unlock(&c->mu);
			usleep(20);
			pthread_mutex_lock(&c->mu);
		}
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

static void sf_trace_open(struct sf_ctx *c)
{
	const char *path = getenv("WEFT_TEST_STAGE_TRACE");
	int fd = path && *path ? open(path, O_RDWR | O_CLOEXEC) : -1;
	struct stat sb;
	if (fd < 0)
		return;
	if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= sizeof(struct weft__stage_trace)) {
		void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (p != MAP_FAILED) {
			c->trace = p;
			c->trace_len = (size_t)sb.st_size;
		}
	}
	close(fd);
}

static int sf_open(const struct weft_tp_open_args *args, void **tc)
{
	struct sf_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->rank = args->rank;
	c->next_id = 1;
	if (sf_core->param_get(sf_core->self, NULL, "hold_ms", WEFT_PARAM_INT, &c->hold_ms, NULL) != 0)
		c->hold_ms = 5000;
	pthread_mutex_init(&c->mu, NULL);
	sf_trace_open(c);
	if (pthread_create(&c->worker, NULL, sf_worker, c) != 0) {
		free(c);
		return -EAGAIN;
	}
	*tc = c;
	return 0;
}

static void sf_close(void *tc)
{
	struct sf_ctx *c = tc;
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->worker, NULL);
	if (c->trace)
		munmap(c->trace, c->trace_len);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static int sf_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	(void)tc;
	if (type != WEFT_MEM_CUDA)
		return -ENOTSUP;
	struct sf_region *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	*r = (struct sf_region){SF_MAGIC, ptr, len};
	*mh = r;
	return 0;
}

static int sf_mem_deregister(void *tc, void *mh)
{
	(void)tc;
	free(mh);
	return 0;
}

static int sf_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	(void)tc;
	(void)mh;
	uint32_t magic = SF_MAGIC;
	if (!buf || *len < sizeof(magic)) {
		*len = sizeof(magic);
		return -ENOSPC;
	}
	memcpy(buf, &magic, sizeof(magic));
	*len = sizeof(magic);
	return 0;
}

static int sf_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	(void)tc;
	(void)peer;
	uint32_t magic = 0;
	if (len != sizeof(magic))
		return -WEFT_ERR_PROTOCOL;
	memcpy(&magic, buf, sizeof(magic));
	if (magic != SF_MAGIC)
		return -WEFT_ERR_PROTOCOL;
	/* Another process's memory: this stand-in cannot write there. */
	(void)rmh;
	return -EHOSTUNREACH;
}

static int sf_mem_release(void *tc, void *rmh)
{
	(void)tc;
	(void)rmh;
	return 0;
}

/* Like two GPUs that cannot map each other: no peer is reachable. */
static int sf_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	(void)tc, (void)peer, (void)addr, (void)len, (void)ep;
	return -EHOSTUNREACH;
}

static int sf_connect(void *ep, const void *addr, size_t len)
{
	(void)ep, (void)addr, (void)len;
	return -ENOTSUP;
}

static int sf_disconnect(void *ep)
{
	(void)ep;
	return 0;
}

static int sf_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	(void)ep, (void)rmh, (void)roff, (void)mh, (void)loff, (void)len;
	return -ENOTSUP;
}

static int sf_signal(void *ep, void *rmh, uint64_t roff, uint64_t value)
{
	(void)ep, (void)rmh, (void)roff, (void)value;
	return -ENOTSUP;
}

static int sf_flush(void *ep)
{
	(void)ep;
	return 0;
}

static int sf_progress(void *tc)
{
	(void)tc;
	return 0;
}

static int sf_probe(struct weft_tp_device *devs, int *n)
{
	if (*n < 1) {
		*n = 1;
		return -ENOSPC;
	}
	memset(&devs[0], 0, sizeof(devs[0]));
	devs[0].size = sizeof(devs[0]);
	strcpy(devs[0].name, "fakegpu0");
	strcpy(devs[0].link, "fakegpu");
	devs[0].bandwidth_gbps = 100;
	devs[0].latency_us = 1;
	devs[0].numa_node = -1;
	devs[0].mem_types = 1u << WEFT_MEM_CUDA;
	devs[0].peer_classes = (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST);
	*n = 1;
	return 0;
}

/* ------------------------------------------------------------ stage ops */
static int sf_host_alloc(void *tc, size_t bytes, void **host_ptr)
{
	(void)tc;
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes) != 0)
		return -ENOMEM;
	memset(p, 0, bytes);
	*host_ptr = p;
	return 0;
}

static int sf_host_free(void *tc, void *host_ptr)
{
	(void)tc;
	free(host_ptr);
	return 0;
}

static int sf_copy_start(void *tc, void *dst, const void *src, size_t len, enum weft_stage_dir dir, uint64_t *ticket)
{
	struct sf_ctx *c = tc;
	if ((unsigned)dir > WEFT_STAGE_TO_DEVICE)
		return -EINVAL;
	pthread_mutex_lock(&c->mu);
	uint64_t id = c->next_id;
	struct sf_copy *cp = &c->q[id % SF_QUEUE];
	if (cp->id != 0) {
		pthread_mutex_unlock(&c->mu);
		return -ENOSPC; /* a ticket never tested: the core's bug */
	}
	c->next_id++;
	*cp = (struct sf_copy){.id = id, .dst = dst, .src = src, .len = len, .dir = dir, .chunk = c->count[dir]++};
	clock_gettime(CLOCK_MONOTONIC, &cp->since);
	weft__stage_trace_add(c->trace, c->rank, WEFT__EV_COPY_START, (uint32_t)dir, cp->chunk);
	if (!c->head[dir])
		c->head[dir] = id;
	pthread_mutex_unlock(&c->mu);
	*ticket = id;
	return 0;
}

static int sf_copy_test(void *tc, uint64_t ticket)
{
	struct sf_ctx *c = tc;
	pthread_mutex_lock(&c->mu);
	struct sf_copy *cp = &c->q[ticket % SF_QUEUE];
	int rc = cp->id != ticket ? -EINVAL : cp->done ? 0 : -EAGAIN;
	if (rc == 0)
		cp->id = 0;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static const struct weft_tp_stage_ops sf_stage = {
	.size = sizeof(struct weft_tp_stage_ops),
	.host_alloc = sf_host_alloc,
	.host_free = sf_host_free,
	.copy_start = sf_copy_start,
	.copy_test = sf_copy_test,
};

static const struct weft_transport_ops sf_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = sf_open,
	.close = sf_close,
	.mem_register = sf_mem_register,
	.mem_deregister = sf_mem_deregister,
	.mem_serialize = sf_mem_serialize,
	.mem_import = sf_mem_import,
	.mem_release = sf_mem_release,
	.endpoint = sf_endpoint,
	.connect = sf_connect,
	.disconnect = sf_disconnect,
	.put = sf_put,
	.signal = sf_signal,
	.flush = sf_flush,
	.progress = sf_progress,
	.probe = sf_probe,
	.stage = &sf_stage,
};

static const struct weft_plugin_desc sf_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "stagefake",
	.ops = &sf_ops,
};

static const struct weft_param_decl sf_params[] = {
	{.size = sizeof(struct weft_param_decl), .section = NULL, .key = "hold_ms",
	 .type = WEFT_PARAM_INT, .default_value = "5000",
	 .help = "Milliseconds a held copy waits for the event the test's order needs."},
};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	static const struct weft_plugin_desc *const descs[] = {&sf_desc, NULL};
	if (!weft_core_api_usable(core))
		return NULL;
	sf_core = core;
	size_t bad = 0;
	if (weft_plugin_declare_params(core, sf_params, 1, &bad) != 0)
		return NULL;
	return descs;
}
