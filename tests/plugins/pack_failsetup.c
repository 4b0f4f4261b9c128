/* SPDX-License-Identifier: Apache-2.0 */
/* A test pack of ABI 0.3 (tests/test_packs.c): one allreduce of int32 sums
 * preferred over every other, with a per-communicator state (comm_setup).
 * With WEFT_TEST_FAILSETUP_RANK=R its setup fails on rank R after a pause,
 * while every other rank is connecting to R (with WEFT_TEST_FAILSETUP_IN=comm
 * its comm_setup fails there instead); without it, setup succeeds.
 * Each rank appends what it saw to WEFT_TEST_FAILSETUP_DIR/rank<N>: its
 * setup's outcome and time, the topology it was given, and its comm_setup
 * and comm_teardown calls, so the test can check them.
 * A second algorithm, allgather-port, moves data through the primitive API's
 * port channels alone (prim->port_*): each rank's block is pushed to every
 * peer by the core's proxy, then a signal, then a flush. */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <weft/kit.h>
#include <weft/plugin.h>

struct fs_pack {
	int rank;
	int setups; /* algorithm setups that saw this state */
};

struct fs_state {
	const struct weft_prim_api *prim;
	weft_comm_t *comm;
	int nranks;
};

static FILE *fs_open(int rank)
{
	const char *dir = getenv("WEFT_TEST_FAILSETUP_DIR");
	if (!dir || !*dir)
		return NULL;
	char path[512];
	snprintf(path, sizeof(path), "%s/rank%d", dir, rank);
	return fopen(path, "a");
}

static long long fs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The rank whose setup fails (-1: none), and whether comm_setup is where. */
static int fs_fail_rank(int nranks, int *in_comm)
{
	const char *fr = getenv("WEFT_TEST_FAILSETUP_RANK"), *in = getenv("WEFT_TEST_FAILSETUP_IN");
	int r = fr && *fr ? atoi(fr) : -1;
	*in_comm = in && strcmp(in, "comm") == 0;
	return r >= 0 && r < nranks ? r : -1;
}

static void fs_pause(void)
{
	/* Long enough that every other rank is inside its connect. */
	struct timespec pause = {0, 300 * 1000 * 1000};
	nanosleep(&pause, NULL);
}

static int fs_comm_setup(const struct weft_algo_comm *ac, void **pack_state)
{
	int in_comm;
	if (fs_fail_rank(ac->nranks, &in_comm) == ac->rank && in_comm) {
		fs_pause();
		FILE *f = fs_open(ac->rank);
		if (f) {
			fprintf(f, "comm_setup_failed %lld\n", fs_now_ns());
			fclose(f);
		}
		return -EIO;
	}
	struct fs_pack *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->rank = ac->rank;
	FILE *f = fs_open(ac->rank);
	if (f) {
		fprintf(f, "comm_setup nhosts=%d\n", ac->nhosts);
		for (int r = 0; r < ac->nranks; r++) {
			const struct weft_algo_peer *pe = weft_algo_peer_at(ac, r);
			if (!pe) {
				fprintf(f, "peer %d none\n", r);
				continue;
			}
			fprintf(f, "peer %d class=%d host=%d local_rank=%d local_size=%d routes=", r, (int)pe->peer_class,
				pe->host, pe->local_rank, pe->local_size);
			for (int k = 0; k < pe->nroutes; k++)
				fprintf(f, "%s%s:%u", k ? "," : "", pe->routes[k].transport, pe->routes[k].caps);
			fputc('\n', f);
		}
		fclose(f);
	}
	*pack_state = p;
	return 0;
}

static void fs_comm_teardown(void *pack_state)
{
	struct fs_pack *p = pack_state;
	FILE *f = fs_open(p->rank);
	if (f) {
		fprintf(f, "comm_teardown setups=%d\n", p->setups);
		fclose(f);
	}
	free(p);
}

static int fs_setup(const struct weft_algo_comm *ac, void **state)
{
	struct fs_pack *p = ac->pack_state;
	int in_comm, fail_rank = fs_fail_rank(ac->nranks, &in_comm);
	int rc = 0;
	weft_conn_t *conn = NULL;
	if (p)
		p->setups++;
	if (fail_rank >= 0) {
		if (ac->rank == fail_rank) {
			fs_pause();
			rc = -EIO;
		} else {
			rc = ac->prim->connect(ac->comm, fail_rank, NULL, &conn);
			if (rc == 0)
				ac->prim->conn_close(conn);
		}
	}
	FILE *f = fs_open(ac->rank);
	if (f) {
		fprintf(f, "setup %lld %d pack_state=%s\n", fs_now_ns(), rc, p ? "yes" : "no");
		fclose(f);
	}
	if (rc != 0)
		return rc;
	struct fs_state *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->prim = ac->prim;
	s->comm = ac->comm;
	s->nranks = ac->nranks;
	*state = s;
	return 0;
}

static int fs_supports(void *state, const struct weft_coll_args *a)
{
	(void)state;
	return a->dtype == WEFT_INT32 && a->op == WEFT_SUM ? 0 : -ENOTSUP;
}

/* WEFT_TEST_FAILSETUP_SLEEP=R:MS: rank R sleeps MS ms inside every call
 * this algorithm serves, a rank stuck inside a call (tests/test_stall.c). */
static void fs_sleep_inside(weft_comm_t *comm, const struct weft_prim_api *p)
{
	const char *v = getenv("WEFT_TEST_FAILSETUP_SLEEP");
	int r = -1;
	long ms = 0;
	if (!v || sscanf(v, "%d:%ld", &r, &ms) != 2 || r != p->comm_rank(comm) || ms <= 0)
		return;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static int fs_execute(void *state, const struct weft_coll_args *a)
{
	struct fs_state *s = state;
	fs_sleep_inside(s->comm, s->prim);
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

static void fs_teardown(void *state)
{
	free(state);
}

/* ---------------------------------------------------- allgather-port */
struct pt_peer {
	weft_conn_t *conn;
	weft_port_t *port;
	weft_sem_t *sem;   /* the peer signals it when its block has landed here */
	weft_rsem_t *rsem; /* the peer's, signalled by this rank */
};

struct pt_state {
	const struct weft_prim_api *prim;
	weft_comm_t *comm;
	int rank, nranks;
	uint64_t calls;
	struct pt_peer *peers;
};

static void pt_teardown(void *state)
{
	struct pt_state *s = state;
	if (!s)
		return;
	const struct weft_prim_api *p = s->prim;
	for (int q = 0; s->peers && q < s->nranks; q++) {
		struct pt_peer *e = &s->peers[q];
		if (e->port)
			p->port_destroy(e->port);
		if (e->rsem)
			p->rsem_release(e->rsem);
		if (e->sem)
			p->sem_destroy(e->sem);
		if (e->conn)
			p->conn_close(e->conn);
	}
	free(s->peers);
	free(s);
}

/* Pairs in ascending (low, high) order on every rank, so that the blocking
 * pairwise steps (connect, exchanges) never wait in a cycle. */
#define PT_EACH_PAIR(s, q)                                                                                       \
	for (int lo_ = 0; lo_ < (s)->nranks; lo_++)                                                              \
		for (int hi_ = lo_ + 1, q = -1; hi_ < (s)->nranks; hi_++)                                        \
			if ((q = (s)->rank == lo_ ? hi_ : (s)->rank == hi_ ? lo_ : -1) >= 0)

static int pt_setup(const struct weft_algo_comm *ac, void **state)
{
	const struct weft_prim_api *p = ac->prim;
	if (!p || p->size < offsetof(struct weft_prim_api, rsem_port_id) + sizeof(p->rsem_port_id))
		return -ENOTSUP;
	struct pt_state *s = calloc(1, sizeof(*s));
	if (!s || !(s->peers = calloc((size_t)ac->nranks, sizeof(*s->peers)))) {
		free(s);
		return -ENOMEM;
	}
	s->prim = p;
	s->comm = ac->comm;
	s->rank = ac->rank;
	s->nranks = ac->nranks;
	int rc = 0;
	PT_EACH_PAIR(s, q)
	{
		struct pt_peer *e = &s->peers[q];
		if (rc == 0)
			rc = p->connect(s->comm, q, NULL, &e->conn);
		if (rc == 0)
			rc = p->sem_create(s->comm, &e->sem);
		if (rc == 0)
			rc = p->sem_exchange(e->sem, q, &e->rsem);
		if (rc == 0)
			rc = p->port_create(e->conn, 0, &e->port);
	}
	if (rc != 0) {
		pt_teardown(s);
		return rc;
	}
	*state = s;
	return 0;
}

static int pt_execute(void *state, const struct weft_coll_args *a)
{
	struct pt_state *s = state;
	const struct weft_prim_api *p = s->prim;
	size_t block = a->count * weft_kit_datatype_size(a->dtype), total = block * (size_t)s->nranks;
	weft_mem_t *mem = NULL;
	weft_rmem_t **rmem = calloc((size_t)s->nranks, sizeof(*rmem));
	if (!rmem)
		return -ENOMEM;
	memmove((char *)a->recvbuf + block * (size_t)s->rank, a->sendbuf, block);
	uint64_t v = ++s->calls;
	int rc = p->mem_register(s->comm, a->recvbuf, total, WEFT_MEM_HOST, &mem);
	PT_EACH_PAIR(s, q)
	if (rc == 0)
		rc = p->mem_exchange(mem, q, &rmem[q]);
	for (int q = 0; rc == 0 && q < s->nranks; q++)
		if (q != s->rank) {
			uint64_t off = block * (size_t)s->rank;
			rc = p->port_put(s->peers[q].port, rmem[q], off, mem, off, block);
			if (rc == 0)
				rc = p->port_signal(s->peers[q].port, s->peers[q].rsem, v);
		}
	for (int q = 0; rc == 0 && q < s->nranks; q++)
		if (q != s->rank)
			rc = p->port_flush(s->peers[q].port);
	for (int q = 0; rc == 0 && q < s->nranks; q++)
		if (q != s->rank)
			rc = p->sem_wait(s->peers[q].sem, v);
	/* Every peer's puts into this buffer and this rank's into theirs are
	 * done before any rank lets its registration go. */
	if (rc == 0)
		rc = p->comm_barrier(s->comm);
	for (int q = 0; q < s->nranks; q++)
		if (rmem[q])
			p->rmem_release(rmem[q]);
	if (mem)
		p->mem_deregister(mem);
	free(rmem);
	return rc;
}

static const struct weft_algo pt_allgather = {
	.size = sizeof(struct weft_algo),
	.name = "allgather-port",
	.coll = WEFT_COLL_ALLGATHER,
	.min_ranks = 2,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 1000,
	.setup = pt_setup,
	.execute = pt_execute,
	.teardown = pt_teardown,
};

static const struct weft_algo fs_allreduce = {
	.size = sizeof(struct weft_algo),
	.name = "allreduce-connect",
	.coll = WEFT_COLL_ALLREDUCE,
	.min_ranks = 2,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 1000,
	.setup = fs_setup,
	.supports = fs_supports,
	.execute = fs_execute,
	.teardown = fs_teardown,
	.redops = 1u << WEFT_SUM,
};

static const struct weft_algo *const fs_algos[] = {&fs_allreduce, &pt_allgather, NULL};
static const struct weft_algo_ops fs_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = fs_algos,
	.comm_setup = fs_comm_setup,
	.comm_teardown = fs_comm_teardown,
};
static const struct weft_plugin_desc fs_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = "failsetup",
	.ops = &fs_ops,
};
static const struct weft_plugin_desc *const fs_descs[] = {&fs_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	return weft_core_api_usable(core) ? fs_descs : NULL;
}
