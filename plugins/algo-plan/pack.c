/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the pack. At load it reads every *.json of the folders named by
 * [algo-plan] plans and offers each plan that loads as one algorithm, named
 * after its file, for the collective and rank count it declares. On host
 * buffers the CPU interpreter (interp.c) runs it: this file is its
 * environment, the communicator's connections, semaphores and areas. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/kit.h>
#include <weft/plugin.h>

#include "devpack.h"
#include "geom.h"
#include "interp.h"
#include "plan.h"

static const struct weft_core_api *wk_core;

#ifdef WP_HAVE_CUDA
#define WP_DEVICE_MEM_TYPES (1u << WEFT_MEM_CUDA)
#else
/* Built without CUDA: device buffers are never offered to the plans. */
#define WP_DEVICE_MEM_TYPES 0u
int wpd_viable(const struct weft_algo_comm *ac, const struct wp_plan *plan, const char *name)
{
	(void)ac, (void)plan, (void)name;
	return 0;
}
int wpd_setup(const struct weft_algo_comm *ac, const struct wp_plan *plan, enum weft_collective coll,
	      const char *name, struct wpd_comm **out)
{
	(void)ac, (void)plan, (void)coll, (void)name, (void)out;
	return -ENOTSUP;
}
int wpd_supports(struct wpd_comm *d, const struct weft_coll_args *a)
{
	(void)d, (void)a;
	return -ENOTSUP;
}
int wpd_execute(struct wpd_comm *d, const struct weft_coll_args *a)
{
	(void)d, (void)a;
	return -ENOTSUP;
}
void wpd_teardown(struct wpd_comm *d)
{
	(void)d;
}
#endif

#define WK_LOG(level, ...) wk_core->log(wk_core->self, (level), __VA_ARGS__)
#define WK_MAX_PLANS 256
#define WK_NAME_MAX 64

/* One plan offered as an algorithm. */
struct wk_algo {
	struct weft_algo algo;
	struct wp_plan *plan;
	char name[WK_NAME_MAX];
};

static struct wk_algo wk_algos[WK_MAX_PLANS];
static const struct weft_algo *wk_list[WK_MAX_PLANS + 1];
static unsigned wk_nalgos;

struct wk_params {
	const char *plans;
	int64_t priority;
};

static const struct weft_kit_param wk_param_rows[] = {
	WEFT_KIT_P_STRING("plans", struct wk_params, plans, NULL, NULL,
			  "Folders of MSCCL++ 0.9 execution plans (*.json), separated by ':'; each plan that loads "
			  "becomes an algorithm named after its file."),
	WEFT_KIT_P_INT("priority", struct wk_params, priority, "0", -1000, 1000,
		       "Priority of the plans where no [algorithm] rule chooses (the highest fitting algorithm wins)."),
};

/* ------------------------------------------------------- per-communicator */
struct wk_area {
	char *p;
	uint64_t cap;
	int from_tp;
	weft_mem_t *mem;
};

struct wk_peer {
	int related;
	weft_conn_t *conn[WP_CHAN_KINDS]; /* memory: a host-mappable transport; port: any */
	uint32_t nsem[WP_CHAN_KINDS];
	weft_sem_t **sem[WP_CHAN_KINDS];   /* ours, which the peer raises */
	weft_rsem_t **rsem[WP_CHAN_KINDS]; /* the peer's, which we raise */
	uint64_t *sent[WP_CHAN_KINDS];
	weft_rmem_t *rmem[WP_BUF_KINDS];
	char *map[WP_BUF_KINDS]; /* the peer's areas mapped here, or NULL */
	int dirty;               /* puts posted on the port connection since its last flush */
};

struct wk_comm {
	const struct wk_algo *wa;
	const struct wp_plan *plan;
	const struct weft_prim_api *pr;
	weft_comm_t *comm;
	int rank, n;
	struct wk_peer *peers;
	struct wp_state st;
	struct wk_area area[WP_BUF_KINDS];
	uint64_t in, out; /* sizes of the current call */
	/* Every rank's area capacities, which every rank computes alike from
	 * the calls: so all grow (and swap) at the same call, and each knows
	 * where a peer's second scratch half starts. */
	uint64_t (*caps)[WP_BUF_KINDS];
	uint32_t flag;
	char **rbuf;
	int broken;
	int host_ok;          /* every rank's plan can run on host buffers here */
	struct wpd_comm *dev; /* the device half (devpack.c); NULL: host buffers only */
};

static int is_inplace(const struct weft_coll_args *a, int rank)
{
	size_t b = a->count * weft_kit_datatype_size(a->dtype);
	const char *s = a->sendbuf, *r = a->recvbuf;
	if (a->coll == WEFT_COLL_ALLGATHER)
		return s == r + (size_t)rank * b;
	if (a->coll == WEFT_COLL_REDUCE_SCATTER)
		return s + (size_t)rank * b == r;
	return s == r;
}

/* Where rank's view of a buffer starts in its area (geom.h): in place, the
 * input of an allgather is the rank's block of the output, the output of a
 * reduce-scatter the rank's block of the input, otherwise they coincide. */
static enum wp_buf view_area(const struct wk_comm *c, enum wp_buf t)
{
	return (enum wp_buf)wp_view_area(c->plan->inplace, c->wa->algo.coll == WEFT_COLL_REDUCE_SCATTER, (int)t);
}

static uint64_t view_off(const struct wk_comm *c, uint32_t rank, enum wp_buf t)
{
	return rank * wp_view_stride(c->plan->inplace, c->wa->algo.coll == WEFT_COLL_ALLGATHER,
				     c->wa->algo.coll == WEFT_COLL_REDUCE_SCATTER, (int)t, c->in, c->out);
}

/* Even calls use the second half of a double scratch area, at half its
 * capacity: fixed while the area lasts, so calls of different sizes never
 * share packet slots, as halves cut at each call's own size would. */
static uint64_t scratch_half(const struct wk_comm *c, uint32_t rank)
{
	if (!c->plan->double_scratch || (c->flag & 1))
		return 0;
	return c->caps[rank][WP_BUF_SCRATCH] / 2;
}

/* ------------------------------------------------------------ environment */
static int env_put(void *ctx, uint32_t chan, uint32_t rbuf, uint64_t dst_off, enum wp_buf src, uint64_t src_off,
		   uint64_t len)
{
	struct wk_comm *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->plan, (uint32_t)c->rank, WP_CHAN_PORT, chan, &peer, &k);
	const struct wp_remote_buf *rb = &c->plan->ranks[c->rank].rbufs[rbuf];
	struct wk_peer *p = &c->peers[rb->rank];
	uint64_t d = dst_off + view_off(c, rb->rank, rb->type) +
		     (rb->type == WP_BUF_SCRATCH ? scratch_half(c, rb->rank) : 0);
	uint64_t s = src_off + view_off(c, (uint32_t)c->rank, src) +
		     (src == WP_BUF_SCRATCH ? scratch_half(c, (uint32_t)c->rank) : 0);
	if (rb->rank != peer)
		return -EINVAL;
	p->dirty = 1;
	return c->pr->put(c->peers[peer].conn[WP_CHAN_PORT], p->rmem[view_area(c, rb->type)], d,
			  c->area[view_area(c, src)].mem, s, len);
}

static int env_signal(void *ctx, enum wp_chan kind, uint32_t chan)
{
	struct wk_comm *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->plan, (uint32_t)c->rank, kind, chan, &peer, &k);
	struct wk_peer *p = &c->peers[peer];
#if !defined(__SANITIZE_THREAD__)
	/* Stores into the peer's mapped memory come before the token it sees. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
	return c->pr->signal(p->conn[kind], p->rsem[kind][k], ++p->sent[kind][k]);
}

static int env_poll(void *ctx, enum wp_chan kind, uint32_t chan, uint64_t want)
{
	struct wk_comm *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->plan, (uint32_t)c->rank, kind, chan, &peer, &k);
	return c->pr->sem_value(c->peers[peer].sem[kind][k]) >= want;
}

static int env_flush(void *ctx, uint32_t chan)
{
	struct wk_comm *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->plan, (uint32_t)c->rank, WP_CHAN_PORT, chan, &peer, &k);
	c->peers[peer].dirty = 0;
	return c->pr->flush(c->peers[peer].conn[WP_CHAN_PORT]);
}

/* A put is only sure to land once flushed or followed by a signal, and LL
 * packets are followed by neither: when every threadblock waits, the puts
 * posted since are flushed, so the packets a peer polls for arrive. */
static int flush_dirty(struct wk_comm *c)
{
	for (int q = 0; q < c->n; q++) {
		struct wk_peer *p = &c->peers[q];
		if (!p->dirty)
			continue;
		p->dirty = 0;
		int rc = c->pr->flush(p->conn[WP_CHAN_PORT]);
		if (rc)
			return rc;
	}
	return 0;
}

/* ----------------------------------------------------------------- setup */
static const char *mappable_route(const struct weft_algo_comm *ac, int peer)
{
	const struct weft_algo_peer *ap = weft_algo_peer_at(ac, peer);
	for (int i = 0; ap && i < ap->nroutes; i++)
		if (ap->routes[i].caps & WEFT_TP_CAP_HOST_MAPPABLE)
			return ap->routes[i].transport;
	return NULL;
}

static int peer_setup(struct wk_comm *c, const struct weft_algo_comm *ac, int q)
{
	const struct weft_prim_api *pr = c->pr;
	struct wk_peer *p = &c->peers[q];
	uint32_t me = (uint32_t)c->rank;
	int rc;
	if (wp_pair_needs(c->plan, me, (uint32_t)q, WP_CHAN_MEMORY)) {
		const char *tp = mappable_route(ac, q);
		if (!tp) {
			WK_LOG(WEFT_LOG_INFO, "%s: memory channels to rank %d need a transport that maps host memory "
					      "(shm); none reaches it: the plan is not used on this communicator",
			       c->wa->name, q);
			return -ENOTSUP;
		}
		if ((rc = pr->connect(c->comm, q, tp, &p->conn[WP_CHAN_MEMORY])))
			return rc;
	}
	if (wp_pair_needs(c->plan, me, (uint32_t)q, WP_CHAN_PORT)) {
		if ((rc = pr->connect(c->comm, q, NULL, &p->conn[WP_CHAN_PORT])))
			return rc;
	}
	for (int k = 0; k < WP_CHAN_KINDS; k++) {
		uint32_t n = wp_pair_count(c->plan, me, (uint32_t)q, k);
		p->nsem[k] = n;
		p->sem[k] = calloc(n + 1, sizeof(*p->sem[k]));
		p->rsem[k] = calloc(n + 1, sizeof(*p->rsem[k]));
		p->sent[k] = calloc(n + 1, sizeof(uint64_t));
		if (!p->sem[k] || !p->rsem[k] || !p->sent[k])
			return -ENOMEM;
		for (uint32_t j = 0; j < n; j++)
			if ((rc = pr->sem_create(c->comm, &p->sem[k][j])) ||
			    (rc = pr->sem_exchange(p->sem[k][j], q, &p->rsem[k][j])))
				return rc;
	}
	return 0;
}

static void area_free(struct wk_comm *c, struct wk_area *a)
{
	if (a->mem)
		c->pr->mem_deregister(a->mem);
	if (a->from_tp)
		c->pr->mem_free(c->comm, a->p);
	else
		free(a->p);
	memset(a, 0, sizeof(*a));
}

static void wk_teardown(void *state)
{
	struct wk_comm *c = state;
	if (!c)
		return;
	const struct weft_prim_api *pr = c->pr;
	wpd_teardown(c->dev);
	for (int q = 0; c->peers && q < c->n; q++) {
		struct wk_peer *p = &c->peers[q];
		for (int t = 0; t < WP_BUF_KINDS; t++)
			pr->rmem_release(p->rmem[t]);
		for (int k = 0; k < WP_CHAN_KINDS; k++) {
			for (uint32_t j = 0; j < p->nsem[k]; j++) {
				if (p->rsem[k] && p->rsem[k][j])
					pr->rsem_release(p->rsem[k][j]);
				if (p->sem[k] && p->sem[k][j])
					pr->sem_destroy(p->sem[k][j]);
			}
			free(p->sem[k]);
			free(p->rsem[k]);
			free(p->sent[k]);
		}
		for (int k = 0; k < WP_CHAN_KINDS; k++)
			if (p->conn[k])
				pr->conn_close(p->conn[k]);
	}
	for (int t = 0; t < WP_BUF_KINDS; t++)
		area_free(c, &c->area[t]);
	free(c->peers);
	free(c->caps);
	free(c->rbuf);
	wp_state_fini(&c->st);
	free(c);
}

/* Whether this rank's memory channels reach every peer through a transport
 * that maps host memory. */
static int host_viable(const struct wk_comm *c, const struct weft_algo_comm *ac)
{
	for (int q = 0; q < c->n; q++)
		if (q != c->rank && wp_pair_needs(c->plan, (uint32_t)c->rank, (uint32_t)q, WP_CHAN_MEMORY) &&
		    !mappable_route(ac, q)) {
			WK_LOG(WEFT_LOG_INFO, "%s: memory channels to rank %d need a transport that maps host memory "
					      "(shm); none reaches it: host buffers go to other algorithms",
			       c->wa->name, q);
			return 0;
		}
	return 1;
}

/* The ranks agree which halves serve: host buffers where every rank's
 * memory channels map host memory, device buffers where every rank can run
 * the device interpreter; with neither, the plan declines the comm. */
static int agree_halves(struct wk_comm *c, const struct weft_algo_comm *ac, unsigned *both)
{
	unsigned mine = (unsigned)host_viable(c, ac) | (wpd_viable(ac, c->plan, c->wa->name) ? 2u : 0u);
	unsigned *all = calloc((size_t)c->n, sizeof(*all));
	if (!all)
		return -ENOMEM;
	int rc = c->pr->comm_allgather(c->comm, &mine, all, sizeof(mine));
	*both = 3;
	for (int r = 0; r < c->n && !rc; r++)
		*both &= all[r];
	free(all);
	if (!rc && !*both) {
		WK_LOG(WEFT_LOG_INFO, "%s: neither host nor device buffers can be served on every rank of this "
				      "communicator: the plan is not used on it", c->wa->name);
		rc = -ENOTSUP;
	}
	return rc;
}

static int wk_setup(const struct weft_algo_comm *ac, void **state, const struct wk_algo *wa)
{
	struct wk_comm *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->wa = wa;
	c->plan = wa->plan;
	c->pr = ac->prim;
	c->comm = ac->comm;
	c->rank = ac->rank;
	c->n = ac->nranks;
	int rc = -ENOMEM;
	unsigned both = 0;
	if (!(c->peers = calloc((size_t)c->n, sizeof(*c->peers))) || !(c->caps = calloc((size_t)c->n, sizeof(*c->caps))) ||
	    !(c->rbuf = calloc(c->plan->ranks[c->rank].nrbufs + 1, sizeof(char *))))
		goto out;
	if ((rc = wp_state_init(&c->st, c->plan, (uint32_t)c->rank)) || (rc = agree_halves(c, ac, &both)))
		goto out;
	c->host_ok = both & 1;
	for (int q = 0; q < c->n; q++) {
		if (q == c->rank)
			continue;
		c->peers[q].related = wp_reaches(c->plan, (uint32_t)c->rank, (uint32_t)q) ||
				      wp_reaches(c->plan, (uint32_t)q, (uint32_t)c->rank);
		if (c->host_ok && c->peers[q].related && (rc = peer_setup(c, ac, q)))
			goto out;
	}
	if (both & 2)
		rc = wpd_setup(ac, c->plan, wa->algo.coll, wa->name, &c->dev);
out:
	if (rc) {
		wk_teardown(c);
		return rc;
	}
	*state = c;
	return 0;
}

/* Grows the three areas to what a call of these sizes needs on any rank,
 * the same decision on every rank (the sizes follow from the call), and
 * swaps them anew with every related peer, mapping where the memory
 * channel's transport can. */
static int areas_fit(struct wk_comm *c)
{
	const struct weft_prim_api *pr = c->pr;
	int grow = !c->area[0].p;
	for (int r = 0; r < c->n; r++) {
		uint64_t need[WP_BUF_KINDS] = {c->in, c->out, wp_scratch_bytes(c->plan, (uint32_t)r, c->in, c->out)};
		for (int t = 0; t < WP_BUF_KINDS; t++) {
			uint64_t cap = c->caps[r][t] > 4096 ? c->caps[r][t] : 4096;
			while (cap < need[t])
				cap *= 2;
			grow |= cap != c->caps[r][t];
			c->caps[r][t] = cap;
		}
	}
	if (!grow)
		return 0;
	for (int q = 0; q < c->n; q++)
		for (int t = 0; t < WP_BUF_KINDS; t++) {
			pr->rmem_release(c->peers[q].rmem[t]);
			c->peers[q].rmem[t] = NULL;
			c->peers[q].map[t] = NULL;
		}
	for (int t = 0; t < WP_BUF_KINDS; t++) {
		uint64_t cap = c->caps[c->rank][t];
		area_free(c, &c->area[t]);
		struct wk_area *a = &c->area[t];
		a->cap = cap;
		if (pr->mem_alloc(c->comm, WEFT_MEM_HOST, cap, (void **)&a->p) == 0 && a->p)
			a->from_tp = 1;
		else if (!(a->p = calloc(1, cap)))
			return -ENOMEM;
		int rc = pr->mem_register(c->comm, a->p, cap, WEFT_MEM_HOST, &a->mem);
		if (rc)
			return rc;
	}
	for (int q = 0; q < c->n; q++) {
		struct wk_peer *p = &c->peers[q];
		if (!p->related)
			continue;
		for (int t = 0; t < WP_BUF_KINDS; t++) {
			int rc = pr->mem_exchange(c->area[t].mem, q, &p->rmem[t]);
			if (rc)
				return rc;
			void *m = NULL;
			if (p->conn[WP_CHAN_MEMORY] && c->peers[q].rmem[t] &&
			    pr->rmem_device_ptr(p->conn[WP_CHAN_MEMORY], p->rmem[t], &m) == 0)
				p->map[t] = m;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- calls */
static int wk_supports(void *state, const struct weft_coll_args *a)
{
	struct wk_comm *c = state;
	if (a->mem_type == WEFT_MEM_CUDA) {
		if (!c->dev || is_inplace(a, c->rank) != !!c->plan->inplace)
			return -ENOTSUP;
		return wpd_supports(c->dev, a);
	}
	if (a->mem_type != WEFT_MEM_HOST || !c->host_ok || !weft_kit_reduce_supported(a->dtype, WEFT_SUM))
		return -ENOTSUP;
	size_t es = weft_kit_datatype_size(a->dtype);
	if (c->plan->buffer_alignment % es)
		return -ENOTSUP;
	if (is_inplace(a, c->rank) != !!c->plan->inplace)
		return -ENOTSUP; /* a plan serves the in-place mode it declares, and only that */
	char err[256];
	return wp_call_fits(c->plan, a->coll, (uint64_t)a->count * es, err, sizeof(err)) ? -ENOTSUP : 0;
}

/* Every threadblock waits: a short spin, then yielding, then short sleeps,
 * so ranks sharing cores progress; a failed communicator ends the call. */
static int idle(struct wk_comm *c, unsigned *spins)
{
	unsigned s = ++*spins;
	if (s == 1) {
		int rc = flush_dirty(c);
		if (rc)
			return rc;
	}
	/* Tokens and packets a transport with manual progress lands need
	 * this thread to progress it (sem_wait would, polling does not). */
	if (s % 16 == 0) {
		int rc = WEFT_HAS_OP(c->pr, struct weft_prim_api, comm_progress) ? c->pr->comm_progress(c->comm)
										 : c->pr->comm_status(c->comm);
		if (rc)
			return rc;
	}
	if (s < 256)
		return 0;
	if (s < 2048) {
		sched_yield();
		return 0;
	}
	struct timespec ts = {0, 20000};
	nanosleep(&ts, NULL);
	return 0;
}

static int run_call(struct wk_comm *c, const struct weft_coll_args *a)
{
	const struct wp_plan *p = c->plan;
	const struct wp_rank *rk = &p->ranks[c->rank];
	struct wp_env env = {.ctx = c, .rbuf = c->rbuf, .port_put = env_put, .signal = env_signal,
			     .poll = env_poll, .flush = env_flush};
	for (int t = 0; t < WP_BUF_KINDS; t++)
		env.buf[t] = c->area[view_area(c, t)].p + view_off(c, (uint32_t)c->rank, t) +
			     (t == WP_BUF_SCRATCH ? scratch_half(c, (uint32_t)c->rank) : 0);
	for (uint32_t i = 0; i < rk->nrbufs; i++) {
		const struct wp_remote_buf *rb = &rk->rbufs[i];
		char *m = c->peers[rb->rank].map[view_area(c, rb->type)];
		c->rbuf[i] = m ? m + view_off(c, rb->rank, rb->type) +
					 (rb->type == WP_BUF_SCRATCH ? scratch_half(c, rb->rank) : 0)
			       : NULL;
	}
	/* The call's input into the input view; in place, the user's buffer
	 * holds it where the view is. */
	memcpy(env.buf[WP_BUF_INPUT], a->sendbuf, c->in);
	struct wp_call call = {c->in, c->out, a->dtype, a->op, c->flag};
	struct wp_run run;
	int rc = wp_run_init(&run, p, (uint32_t)c->rank, &call, &env, &c->st);
	unsigned spins = 0;
	while (!rc) {
		int st = wp_run_step(&run);
		if (st == 1)
			break;
		if (st == 0)
			spins = 0;
		else if (st == -EAGAIN)
			rc = idle(c, &spins);
		else
			rc = st;
	}
	if (rc && run.err[0])
		WK_LOG(WEFT_LOG_ERROR, "%s", run.err);
	wp_run_fini(&run);
	if (!rc)
		memcpy(a->recvbuf, env.buf[WP_BUF_OUTPUT], c->out);
	return rc;
}

static int wk_execute(void *state, const struct weft_coll_args *a)
{
	struct wk_comm *c = state;
	if (c->broken)
		return c->broken;
	int rc;
	if (a->mem_type == WEFT_MEM_CUDA || !c->host_ok) {
		rc = c->dev && a->mem_type == WEFT_MEM_CUDA ? wpd_execute(c->dev, a) : -ENOTSUP;
		/* Refused before anything ran (a call the plan does not serve,
		 * areas that cannot grow while a graph is captured): the
		 * communicator's later calls are not affected. */
		if (rc == -ENOTSUP || rc == -EBUSY)
			return rc;
		goto out;
	}
	wp_call_bytes(a->coll, (uint32_t)c->n, (uint64_t)a->count * weft_kit_datatype_size(a->dtype), &c->in, &c->out);
	if (++c->flag == 0)
		c->flag = 1; /* 0 is the flag of never-written scratch */
	rc = areas_fit(c);
	if (!rc)
		rc = run_call(c, a);
out:
	if (rc) {
		int known = rc == -WEFT_ERR_PEER || rc == -WEFT_ERR_ABORTED || rc == -ETIMEDOUT;
		WK_LOG(known ? WEFT_LOG_INFO : WEFT_LOG_ERROR,
		       "%s: the call failed: %s; the plan refuses further calls on this communicator", c->wa->name,
		       weft_kit_strerror(rc));
		c->broken = rc;
	}
	return rc;
}

/* setup is not told its algorithm: one trampoline per slot of the table
 * hands its plan over. */
#define WK_S(a, b)                                                                    \
	static int wk_setup_##a##b(const struct weft_algo_comm *ac, void **state)     \
	{                                                                             \
		return wk_setup(ac, state, &wk_algos[(a) * 8 + (b)]);                 \
	}
#define WK_S8(a) WK_S(a, 0) WK_S(a, 1) WK_S(a, 2) WK_S(a, 3) WK_S(a, 4) WK_S(a, 5) WK_S(a, 6) WK_S(a, 7)
WK_S8(0) WK_S8(1) WK_S8(2) WK_S8(3) WK_S8(4) WK_S8(5) WK_S8(6) WK_S8(7)
#define WK_T(a, b) wk_setup_##a##b,
#define WK_T8(a) WK_T(a, 0) WK_T(a, 1) WK_T(a, 2) WK_T(a, 3) WK_T(a, 4) WK_T(a, 5) WK_T(a, 6) WK_T(a, 7)
static int (*const wk_setups[WK_MAX_PLANS])(const struct weft_algo_comm *, void **) = {
	WK_T8(0) WK_T8(1) WK_T8(2) WK_T8(3) WK_T8(4) WK_T8(5) WK_T8(6) WK_T8(7)};

/* ------------------------------------------------------------ the plugin */
/* An algorithm name from a file name: its base without ".json", lower case,
 * anything outside [a-z0-9_-] made '-'. */
static void algo_name(const char *file, char *out, size_t len)
{
	const char *b = strrchr(file, '/');
	b = b ? b + 1 : file;
	size_t n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".json"))
		n -= 5;
	size_t i = 0;
	for (; i < n && i + 1 < len; i++) {
		char ch = (char)tolower((unsigned char)b[i]);
		out[i] = (isalnum((unsigned char)ch) || ch == '_' || ch == '-') ? ch : '-';
	}
	out[i] = 0;
}

static void add_plan(const char *path, int prio)
{
	struct wp_plan *p = NULL;
	char err[512];
	int rc = wp_plan_load(path, &p, err, sizeof(err));
	if (rc) {
		WK_LOG(WEFT_LOG_WARN, "%s", err);
		return;
	}
	enum weft_collective coll;
	if (wp_collective(p->collective, &coll)) {
		WK_LOG(WEFT_LOG_WARN, "%s: collective '%s' is not one the pack serves (allreduce, allgather, "
				      "reducescatter, alltoall); plan not offered", path, p->collective);
		wp_plan_free(p);
		return;
	}
	if (wk_nalgos == WK_MAX_PLANS) {
		WK_LOG(WEFT_LOG_WARN, "%s: more than %d plans; this one is not offered", path, WK_MAX_PLANS);
		wp_plan_free(p);
		return;
	}
	struct wk_algo *wa = &wk_algos[wk_nalgos];
	algo_name(path, wa->name, sizeof(wa->name));
	for (unsigned i = 0; i < wk_nalgos; i++)
		if (!strcmp(wk_algos[i].name, wa->name)) {
			WK_LOG(WEFT_LOG_WARN, "%s: a plan named '%s' is loaded already (%s); this one is not offered",
			       path, wa->name, wk_algos[i].plan->file);
			wp_plan_free(p);
			return;
		}
	wa->plan = p;
	wa->algo = (struct weft_algo){
		.size = sizeof(struct weft_algo),
		.name = wa->name,
		.coll = coll,
		.min_ranks = (int)p->nranks,
		.max_ranks = (int)p->nranks,
		.mem_types = 1u << WEFT_MEM_HOST | WP_DEVICE_MEM_TYPES,
		.priority = prio,
		.setup = wk_setups[wk_nalgos],
		.supports = wk_supports,
		.execute = wk_execute,
		.teardown = wk_teardown,
		/* MSCCL++'s kernels only sum; the interpreter applies any of these. */
		.redops = 1u << WEFT_SUM | 1u << WEFT_PROD | 1u << WEFT_MIN | 1u << WEFT_MAX,
		.max_hosts = 0,
	};
	wk_list[wk_nalgos++] = &wa->algo;
	WK_LOG(WEFT_LOG_DEBUG, "%s: offered as %s/%s (%s, %u ranks, %s, %s)", path, "algo-plan", wa->name,
	       p->collective, p->nranks, p->protocol == WP_PROTO_LL ? "LL" : "Simple",
	       p->inplace ? "in place only" : "out of place only");
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.json of dir, in name order, so that every rank offers the same
 * algorithms in the same order. */
static void add_folder(const char *dir, int prio)
{
	DIR *d = opendir(dir);
	if (!d) {
		WK_LOG(WEFT_LOG_WARN, "plans folder %s: %s", dir, strerror(errno));
		return;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= 5 || strcmp(e->d_name + l - 5, ".json"))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 32) * sizeof(*names));
			if (!nn)
				break;
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0)
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		add_plan(names[i], prio);
		free(names[i]);
	}
	free(names);
}

/* "plan <name> = <file> sha256 <hex>" per plan offered: the core's check at
 * communicator creation then fails where ranks loaded different plans. */
static char *wk_agree_text;

static const char *wk_agreement(void)
{
	return wk_agree_text ? wk_agree_text : "";
}

static void build_agreement(void)
{
	size_t cap = (size_t)wk_nalgos * (WK_NAME_MAX + 2 * WP_MAX_NAME + 96) + 1, len = 0;
	if (!(wk_agree_text = calloc(1, cap)))
		return;
	for (unsigned i = 0; i < wk_nalgos; i++) {
		const struct wp_plan *p = wk_algos[i].plan;
		const char *b = strrchr(p->file, '/');
		char hex[65];
		for (int k = 0; k < 32; k++)
			snprintf(hex + 2 * k, 3, "%02x", p->sha256[k]);
		int n = snprintf(wk_agree_text + len, cap - len, "plan %s = %.*s sha256 %s\n", wk_algos[i].name,
				 WP_MAX_NAME, b ? b + 1 : p->file, hex);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
	}
}

static const struct weft_algo_ops wk_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = wk_list,
	.agreement = wk_agreement,
};

static const struct weft_plugin_desc wk_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = WP_NAME,
	.ops = &wk_ops,
};

static const struct weft_plugin_desc *const wk_descs[] = {&wk_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	wk_core = core;
	size_t nrows = sizeof(wk_param_rows) / sizeof(wk_param_rows[0]);
	struct wk_params prm;
	if (weft_kit_params_declare(core, WP_NAME, wk_param_rows, nrows) ||
	    weft_kit_params_load(core, WP_NAME, wk_param_rows, nrows, &prm))
		return NULL; /* logged, naming the parameter */
	if (wk_nalgos)
		return wk_descs; /* initialized once already (a harness loading twice) */
	/* Loaded with nothing to offer rather than declined: no plans is the
	 * default, not a fault. */
	if (!prm.plans || !*prm.plans) {
		WK_LOG(WEFT_LOG_DEBUG, "no plan folders ([algo-plan] plans): the pack offers nothing");
		return wk_descs;
	}
	char *dirs = strdup(prm.plans), *save = NULL;
	for (char *d = dirs ? strtok_r(dirs, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save))
		add_folder(d, (int)prm.priority);
	free(dirs);
	if (!wk_nalgos)
		WK_LOG(WEFT_LOG_WARN, "no plan of %s could be offered (see above)", prm.plans);
	build_agreement();
	return wk_descs;
}
