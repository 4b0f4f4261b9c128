/* SPDX-License-Identifier: Apache-2.0 */
/* skelpack: the smallest complete weft algorithm pack, as a starting point for
 * a new one. It serves allreduce and allgather on host memory, in place and out
 * of place, for every type and reduction, through nothing but the primitive
 * API (struct weft_prim_api) and the support kit's reductions (weft/kit.h).
 * docs/plugin-abi.md section 8 is the specification. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <weft/kit.h>
#include <weft/plugin.h>

/* The pack's name: the config section, the WEFT_SKELPACK_ prefix of its
 * parameters and the "skelpack/<algorithm>" of [algorithm] rules. */
#define SP_NAME "skelpack"

/* Bytes of one rank's chunk. Calls larger than this run as several rounds;
 * small, so that the tests' calls cross chunk boundaries. */
#define SP_SLOT ((size_t)16 << 10)
/* Ahead of each slot's data, 64 bytes that carry the call's signature
 * (ABI 0.3's weft_coll_args.sig) in the first round of a call, so that
 * ranks whose calls disagree fail instead of mixing their data. */
#define SP_HDR ((size_t)64)
#define SP_STRIDE (SP_HDR + SP_SLOT)

/* How data moves: every rank has one registered buffer of nranks slots, slot r
 * holding rank r's current chunk. Each round a rank copies its chunk into its
 * own slot (no peer writes there), puts it into slot `rank` of every peer and
 * raises the peer's data token; once every peer's chunk has arrived, it
 * reduces (allreduce) or copies out (allgather) all slots in rank order. A
 * direct all-to-all: one round trip per chunk, each rank reading every input. */
struct sp_peer {
	weft_conn_t *conn;
	weft_rmem_t *rslots;    /* the peer's slots: ours is slot `rank` there */
	weft_sem_t *data_sem;   /* raised by the peer: its chunk is in our slot for it */
	weft_sem_t *free_sem;   /* raised by the peer: our slot there may be rewritten */
	weft_rsem_t *data_rsem; /* the peer's data_sem, for us to raise */
	weft_rsem_t *free_rsem; /* the peer's free_sem, for us to raise */
};

/* Per-communicator state, shared by both algorithms: comm_setup makes it and
 * comm_teardown frees it (ABI 0.3), so the pack keeps no process-wide list. */
struct sp_comm {
	const struct weft_prim_api *prim;
	const struct weft_core_api *core;
	weft_comm_t *comm;
	int rank, nranks;
	struct sp_peer *peers; /* nranks entries; our own is unused */
	char *slots;           /* nranks * SP_STRIDE bytes */
	weft_mem_t *mem;       /* slots, registered once for the life of the comm */
	uint64_t round;        /* rounds run so far: tokens only grow, across calls */
	int broken;            /* the error that left the ranks out of step, or 0 */
};

#define SP_LOG(s, level, ...) (s)->core->log((s)->core->self, (level), __VA_ARGS__)

static char *sp_slot(const struct sp_comm *s, int r)
{
	return s->slots + (size_t)r * SP_STRIDE + SP_HDR;
}

static uint64_t *sp_sig(const struct sp_comm *s, int r)
{
	return (uint64_t *)(s->slots + (size_t)r * SP_STRIDE);
}

/* ---------------------------------------------------- per-communicator state */

static void sp_peer_release(const struct sp_comm *s, struct sp_peer *p)
{
	const struct weft_prim_api *pr = s->prim;
	pr->rsem_release(p->free_rsem);
	pr->rsem_release(p->data_rsem);
	pr->sem_destroy(p->free_sem);
	pr->sem_destroy(p->data_sem);
	pr->rmem_release(p->rslots);
	pr->conn_close(p->conn);
	memset(p, 0, sizeof(*p));
}

/* Waits on nobody: comm_teardown may run on the ranks whose comm_setup
 * succeeded while another's failed (docs/plugin-abi.md, section 8). */
static void sp_comm_teardown(void *pack_state)
{
	struct sp_comm *s = pack_state;
	if (!s)
		return;
	for (int r = 0; s->peers && r < s->nranks; r++)
		sp_peer_release(s, &s->peers[r]);
	s->prim->mem_deregister(s->mem);
	s->core->free(s->slots);
	s->core->free(s->peers);
	s->core->free(s);
}

/* Both ranks of the pair make the same calls in the same order: each call
 * meets its twin on the peer. */
static int sp_peer_setup(struct sp_comm *s, int peer)
{
	const struct weft_prim_api *pr = s->prim;
	struct sp_peer *p = &s->peers[peer];
	int rc;
	if ((rc = pr->connect(s->comm, peer, NULL, &p->conn)) || (rc = pr->mem_exchange(s->mem, peer, &p->rslots)) ||
	    (rc = pr->sem_create(s->comm, &p->data_sem)) || (rc = pr->sem_create(s->comm, &p->free_sem)) ||
	    (rc = pr->sem_exchange(p->data_sem, peer, &p->data_rsem)) ||
	    (rc = pr->sem_exchange(p->free_sem, peer, &p->free_rsem))) {
		/* -ECANCELED: another rank's setup failed, and it said why. */
		SP_LOG(s, rc == -ECANCELED ? WEFT_LOG_DEBUG : WEFT_LOG_WARN, "cannot set up channels with rank %d: %s",
		       peer, weft_kit_strerror(rc));
		return rc;
	}
	return 0;
}

static int sp_comm_setup(const struct weft_algo_comm *ac, void **pack_state)
{
	const struct weft_core_api *core = ac->core;
	struct sp_comm *s = core->calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->prim = ac->prim;
	s->core = core;
	s->comm = ac->comm;
	s->rank = ac->rank;
	s->nranks = ac->nranks;
	int rc = -ENOMEM;
	s->peers = core->calloc((size_t)ac->nranks, sizeof(*s->peers));
	s->slots = core->calloc((size_t)ac->nranks, SP_STRIDE);
	if (!s->peers || !s->slots) {
		SP_LOG(s, WEFT_LOG_ERROR, "out of memory for %d slots of %zu bytes", ac->nranks, SP_SLOT);
		goto err_teardown;
	}
	/* Plain memory: a pack that wants shm's mapped segments asks
	 * prim->mem_alloc for it instead (algo-host does). */
	rc = s->prim->mem_register(s->comm, s->slots, (size_t)s->nranks * SP_STRIDE, WEFT_MEM_HOST, &s->mem);
	if (rc) {
		SP_LOG(s, WEFT_LOG_ERROR, "cannot register %zu bytes of slots: %s", (size_t)s->nranks * SP_STRIDE,
		       weft_kit_strerror(rc));
		goto err_teardown;
	}
	/* Ascending peers on every rank: each rank meets its pairs in one global
	 * order, so no cycle of blocking connects (a ring order would deadlock). */
	for (int r = 0; r < s->nranks; r++)
		if (r != s->rank && (rc = sp_peer_setup(s, r)))
			goto err_teardown;
	SP_LOG(s, WEFT_LOG_DEBUG, "rank %d of %d: connected to every peer", s->rank, s->nranks);
	*pack_state = s;
	return 0;

err_teardown:
	sp_comm_teardown(s);
	return rc;
}

/* ------------------------------------------------------------ the exchange */

/* A failure leaves the ranks in different rounds, so every later call fails
 * with the same error rather than mixing chunks of different calls. The core
 * has already logged the primitive's own error; this adds where it struck. */
static int sp_fail(struct sp_comm *s, int rc, const char *what, int peer)
{
	if (!s->broken)
		SP_LOG(s, WEFT_LOG_INFO, "round %llu: %s rank %d failed: %s", (unsigned long long)s->round, what, peer,
		       weft_kit_strerror(rc));
	s->broken = rc;
	return rc;
}

/* The call's signature, when the core gives one (ABI 0.3; 0: unchecked). */
static uint64_t sp_call_sig(const struct weft_coll_args *a)
{
	return a->size >= offsetof(struct weft_coll_args, sig) + sizeof(a->sig) ? a->sig : 0;
}

/* Every peer's signature, which came with its chunk, against ours. */
static int sp_check_sigs(struct sp_comm *s, uint64_t sig)
{
	for (int r = 0; r < s->nranks; r++) {
		uint64_t theirs = *sp_sig(s, r);
		if (r == s->rank || theirs == sig)
			continue;
		char m[128], t[128];
		weft_kit_sig_describe(sig, m, sizeof(m));
		weft_kit_sig_describe(theirs, t, sizeof(t));
		const char *field = weft_kit_sig_diff(sig, theirs);
		SP_LOG(s, WEFT_LOG_ERROR, "rank %d's call differs from this rank's: %s here, %s there: the %s differs",
		       r, m, t, field ? field : "signature");
		s->broken = -WEFT_ERR_MISMATCH;
		return -WEFT_ERR_MISMATCH;
	}
	return 0;
}

/* One round: our slot holds len bytes of our chunk; on return every slot holds
 * its rank's chunk. Every token a rank raises is awaited by its target within
 * the same round, so nothing lands here after a call has returned. sig, when
 * not 0, goes ahead of our chunk and is compared with every peer's (the
 * call's first round). */
static int sp_exchange(struct sp_comm *s, size_t len, uint64_t sig)
{
	const struct weft_prim_api *pr = s->prim;
	const uint64_t k = ++s->round;
	const uint64_t off = (uint64_t)s->rank * SP_STRIDE;
	int rc;
	*sp_sig(s, s->rank) = sig;
	/* Round k-1 is consumed: each peer may rewrite its slot here. Raised
	 * before any wait, so no rank waits on one that is itself waiting. */
	for (int r = 0; r < s->nranks; r++)
		if (r != s->rank && (rc = pr->signal(s->peers[r].conn, s->peers[r].free_rsem, k)))
			return sp_fail(s, rc, "signal to", r);
	for (int r = 0; r < s->nranks; r++) {
		struct sp_peer *p = &s->peers[r];
		if (r == s->rank)
			continue;
		if ((rc = pr->sem_wait(p->free_sem, k)))
			return sp_fail(s, rc, "waiting for", r);
		if ((rc = pr->put(p->conn, p->rslots, off, s->mem, off, SP_HDR + len)))
			return sp_fail(s, rc, "put to", r);
		/* Ordered after the put: the peer sees the data by the time it sees k. */
		if ((rc = pr->signal(p->conn, p->data_rsem, k)))
			return sp_fail(s, rc, "signal to", r);
	}
	for (int r = 0; r < s->nranks; r++)
		if (r != s->rank && (rc = pr->sem_wait(s->peers[r].data_sem, k)))
			return sp_fail(s, rc, "waiting for", r);
	/* Our slot is the puts' source: the next round may rewrite it only once
	 * the transports are done reading it. */
	for (int r = 0; r < s->nranks; r++)
		if (r != s->rank && (rc = pr->flush(s->peers[r].conn)))
			return sp_fail(s, rc, "flush to", r);
	return sig ? sp_check_sigs(s, sig) : 0;
}

/* ---------------------------------------------------------- the algorithms */

/* An older core gives no pack state: decline, and the core picks another. */
static int sp_setup(const struct weft_algo_comm *ac, void **state)
{
	if (ac->size < offsetof(struct weft_algo_comm, pack_state) + sizeof(ac->pack_state) || !ac->pack_state) {
		ac->core->log(ac->core->self, WEFT_LOG_WARN, "needs a core of plugin ABI 0.3 or later (comm_setup)");
		return -ENOTSUP;
	}
	*state = ac->pack_state;
	return 0;
}

/* The only refusal: what the kit cannot reduce (nothing weft.h names). */
static int sp_supports(void *state, const struct weft_coll_args *a)
{
	if (a->coll == WEFT_COLL_ALLGATHER)
		return weft_kit_datatype_size(a->dtype) ? 0 : -ENOTSUP;
	return weft_kit_reduce_supported(a->dtype, a->op) ? 0 : -ENOTSUP;
}

/* In place is sendbuf == recvbuf: our chunk is copied into our slot before
 * the output is written, so both give the same result. */
static int sp_allreduce(void *state, const struct weft_coll_args *a)
{
	struct sp_comm *s = state;
	if (s->broken)
		return s->broken;
	const size_t es = weft_kit_datatype_size(a->dtype), per = SP_SLOT / es;
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	for (size_t at = 0; at < a->count; at += per) {
		size_t n = a->count - at < per ? a->count - at : per;
		/* A pre-multiplied sum scales our input by our own scalar (the core
		 * copied it into scalar_host), then sums. */
		if (a->op == WEFT_PREMUL_SUM)
			weft_kit_scale(a->dtype, sp_slot(s, s->rank), in + at * es, a->scalar_host, n);
		else
			memcpy(sp_slot(s, s->rank), in + at * es, n * es);
		int rc = sp_exchange(s, n * es, at == 0 ? sp_call_sig(a) : 0);
		if (rc)
			return rc;
		/* Rank order on every rank, so that every rank gets the same bits. */
		char *dst = out + at * es;
		if (s->nranks == 1)
			memcpy(dst, sp_slot(s, 0), n * es);
		else
			weft_kit_reduce3(a->dtype, a->op, dst, sp_slot(s, 0), sp_slot(s, 1), n);
		for (int r = 2; r < s->nranks; r++)
			weft_kit_reduce(a->dtype, a->op, dst, sp_slot(s, r), n);
		weft_kit_finish(a->dtype, a->op, dst, n, s->nranks); /* avg's divide */
	}
	return 0;
}

/* In place is sendbuf == recvbuf + rank * count: our own block is then copied
 * onto itself from our slot, unchanged. */
static int sp_allgather(void *state, const struct weft_coll_args *a)
{
	struct sp_comm *s = state;
	if (s->broken)
		return s->broken;
	const size_t es = weft_kit_datatype_size(a->dtype), per = SP_SLOT / es;
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	for (size_t at = 0; at < a->count; at += per) {
		size_t n = a->count - at < per ? a->count - at : per;
		memcpy(sp_slot(s, s->rank), in + at * es, n * es);
		int rc = sp_exchange(s, n * es, at == 0 ? sp_call_sig(a) : 0);
		if (rc)
			return rc;
		for (int r = 0; r < s->nranks; r++)
			memcpy(out + ((size_t)r * a->count + at) * es, sp_slot(s, r), n * es);
	}
	return 0;
}

/* The pack's state is comm_teardown's: nothing is the algorithm's own. */
static void sp_teardown(void *state)
{
}

/* Every reduction weft names, the pre-multiplied sum included (ABI 0.3). */
#define SP_REDOPS                                                                                        \
	((1u << WEFT_SUM) | (1u << WEFT_PROD) | (1u << WEFT_MIN) | (1u << WEFT_MAX) | (1u << WEFT_AVG) | \
	 (1u << WEFT_PREMUL_SUM))

/* Priority 0, below the tree's own packs: dropped on a search path, the
 * skeleton serves only the calls an [algorithm] rule gives it. */
static const struct weft_algo sp_algo_allreduce = {
	.size = sizeof(struct weft_algo),
	.name = "allreduce",
	.coll = WEFT_COLL_ALLREDUCE,
	.min_ranks = 1,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 0,
	.setup = sp_setup,
	.supports = sp_supports,
	.execute = sp_allreduce,
	.teardown = sp_teardown,
	.redops = SP_REDOPS,
};

static const struct weft_algo sp_algo_allgather = {
	.size = sizeof(struct weft_algo),
	.name = "allgather",
	.coll = WEFT_COLL_ALLGATHER,
	.min_ranks = 1,
	.mem_types = 1u << WEFT_MEM_HOST,
	.priority = 0,
	.setup = sp_setup,
	.supports = sp_supports,
	.execute = sp_allgather,
	.teardown = sp_teardown,
};

/* ------------------------------------------------------------- the plugin */

static const struct weft_algo *const sp_algos[] = {&sp_algo_allreduce, &sp_algo_allgather, NULL};

static const struct weft_algo_ops sp_ops = {
	.size = sizeof(struct weft_algo_ops),
	.algos = sp_algos,
	.comm_setup = sp_comm_setup,
	.comm_teardown = sp_comm_teardown,
};

static const struct weft_plugin_desc sp_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = SP_NAME,
	.ops = &sp_ops,
};

static const struct weft_plugin_desc *const sp_descs[] = {&sp_desc, NULL};

/* One parameter, to show the machinery: WEFT_SKELPACK_ENABLE=0 (or
 * `enable = 0` under [skelpack] in the config file) declines the load. */
static const struct weft_param_decl sp_params[] = {
	{
		.size = sizeof(struct weft_param_decl),
		.section = SP_NAME,
		.key = "enable",
		.type = WEFT_PARAM_BOOL,
		.default_value = "1",
		.help = "Load the skeleton example algorithm pack.",
	},
};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	/* An older or broken core lacks entries every plugin uses: decline. */
	if (!weft_core_api_usable(core))
		return NULL;
	size_t bad = 0;
	int on = 1;
	int rc = weft_plugin_declare_params(core, sp_params, sizeof(sp_params) / sizeof(sp_params[0]), &bad);
	if (rc == 0)
		rc = core->param_get(core->self, SP_NAME, "enable", WEFT_PARAM_BOOL, &on, NULL);
	if (rc != 0) {
		core->log(core->self, WEFT_LOG_ERROR, "cannot read parameter " SP_NAME ".%s: %s", sp_params[bad].key,
			  weft_kit_strerror(rc));
		return NULL;
	}
	if (!on) {
		char env[64];
		weft_kit_param_env(SP_NAME, "enable", env, sizeof(env));
		core->log(core->self, WEFT_LOG_INFO, "disabled by %s=0 or " SP_NAME ".enable = 0", env);
		return NULL;
	}
	return sp_descs;
}
