/* SPDX-License-Identifier: Apache-2.0 */
/* Collectives: the choice of an algorithm among the loaded packs ([algorithm]
 * rules, else priority, within what each algorithm declares it serves), the
 * per-communicator algorithm state made lazily and kept, the primitive API
 * lent to packs, and weft-info's view of the choice. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>
#include <weft/info.h>
#include <weft/kit.h>

#include "base.h"
#include "coll.h"
#include "callsig.h"
#include "config.h"
#include "dtype.h"
#include "log.h"
#include "packs.h"
#include "registry.h"
#include "rules.h"
#include "topo.h"
#include "handles.h"

/* What an algorithm that says nothing of its reductions serves: ABI 0.2's five. */
#define BASE_REDOPS                                                                                   \
	((1u << WEFT_SUM) | (1u << WEFT_PROD) | (1u << WEFT_MIN) | (1u << WEFT_MAX) | (1u << WEFT_AVG))

/* --------------------------------------------------------- primitive API */

/* The packs call these while a communicator is made or destroyed, and from
 * inside a user's call on it: the unchecked twins (handles.h). */
static int prim_comm_rank(const weft_comm_t *comm)
{
	return comm ? comm->rank : -EINVAL;
}

static int prim_comm_size(const weft_comm_t *comm)
{
	return comm ? comm->nranks : -EINVAL;
}

static int prim_comm_status(const weft_comm_t *comm)
{
	return comm ? weft__bootstrap_status(comm->bs) : -EINVAL;
}

static const struct weft_prim_api prim_api = {
	.size = sizeof(struct weft_prim_api),
	.comm_rank = prim_comm_rank,
	.comm_size = prim_comm_size,
	.comm_status = prim_comm_status,
	.comm_barrier = weft__comm_barrier,
	.comm_allgather = weft__comm_allgather,
	.comm_send = weft__comm_send,
	.comm_recv = weft__comm_recv,
	.mem_register = weft__mem_register_user,
	.mem_deregister = weft_mem_deregister,
	.mem_exchange = weft_mem_exchange,
	.rmem_release = weft_rmem_release,
	.connect = weft__connect,
	.conn_close = weft_conn_close,
	.put = weft_put,
	.signal = weft_signal,
	.flush = weft_flush,
	.sem_create = weft__sem_create,
	.sem_destroy = weft_sem_destroy,
	.sem_value = weft_sem_value,
	.sem_wait = weft_sem_wait,
	.sem_exchange = weft_sem_exchange,
	.rsem_release = weft_rsem_release,
	.mem_alloc = weft__buf_alloc_quiet,
	.mem_free = weft__buf_free,
	.rmem_device_ptr = weft_rmem_device_ptr,
	.memchan_create = weft_memchan_create,
	.memchan_destroy = weft_memchan_destroy,
	.memchan_device_handle = weft_memchan_device_handle,
	.sem_create_on = weft__sem_create_on,
	.connect_mem = weft__connect_mem,
	.sem_wait_any = weft_sem_wait_any,
	.port_create = weft_port_create,
	.port_destroy = weft_port_destroy,
	.port_device_handle = weft_port_device_handle,
	.port_put = weft_port_put,
	.port_signal = weft_port_signal,
	.port_flush = weft_port_flush,
	.mem_port_id = weft_mem_port_id,
	.rmem_port_id = weft_rmem_port_id,
	.rsem_port_id = weft_rsem_port_id,
	.comm_progress = weft_comm_progress,
	.mem_in_alloc = weft__buf_in_alloc,
};

const struct weft_prim_api *weft__coll_prim_api(void)
{
	return &prim_api;
}

/* Whether to ask tp's mem_query on every call: only where it can answer other
 * than host, that is where its probe declares another memory type or cannot
 * tell. shm's answers "host" or "not mine", both host here, and asking it
 * costs two lock pairs and a segment walk per call, which small calls feel. */
static int mem_query_use(struct weft__tp *tp)
{
	int use = __atomic_load_n(&tp->mem_query_use, __ATOMIC_RELAXED);
	if (use < 0) {
		uint32_t mems = 0;
		use = WEFT__TP_HAS(tp, mem_query) &&
		      (weft__topo_declared_mems(tp->ops, &mems) != 0 || (mems & ~(1u << WEFT_MEM_HOST)) != 0);
		__atomic_store_n(&tp->mem_query_use, use, __ATOMIC_RELAXED);
	}
	return use;
}

enum weft_mem_type weft__coll_mem_type(weft_comm_t *comm, const void *buf)
{
	/* The core knows no GPU runtime: it asks each transport that can tell
	 * (mem_query, the cudaPointerGetAttributes of GPU transports). A pointer
	 * none of them recognizes is host memory. */
	for (int i = 0; buf && i < comm->ntp; i++) {
		struct weft__tp *tp = &comm->tp[i];
		if (!mem_query_use(tp))
			continue;
		enum weft_mem_type type = WEFT_MEM_HOST;
		pthread_mutex_lock(&tp->lock);
		int rc = tp->ops->mem_query(tp->tc, buf, &type);
		pthread_mutex_unlock(&tp->lock);
		if (rc == 0 && type != WEFT_MEM_HOST)
			return type;
	}
	return WEFT_MEM_HOST;
}

/* --------------------------------------------------- catalog and rules
 * Built once per process from the registry, which never changes after its
 * one load. Guarded by cat_once; read-only afterwards except the warned flags. */

/* Where the [algorithm] rules came from, for "WHERE:N" in messages: the
 * file (N its line) or WEFT_ALGORITHM_RULES (N the rule's place in it). */
static const char *rules_origin(void)
{
	const char *o = weft__config_rules_origin("algorithm");
	return o ? o : "config";
}

/* A loaded pack, with the ABI minor it was built for (what the core may read
 * of its ops and hand it). */
struct cat_pack {
	const char *name;
	const struct weft_algo_ops *ops;
	unsigned abi_minor;
};

struct cat_algo {
	const struct weft_algo *algo;
	uint32_t redops; /* bit per enum weft_redop it may be handed */
	int max_hosts;   /* most hosts a comm it serves may span; 0 = no limit */
	int pack_idx;    /* into packs */
	const char *pack;
	const struct weft_core_api *core; /* the services table the pack's file was given */
	char full[160]; /* "pack/algo" */
};

struct coll_rule {
	struct weft__rule r;
	int known;  /* the target names at least one algorithm of the catalog */
	int warned; /* "cannot serve" said once (atomic) */
};

static pthread_once_t cat_once = PTHREAD_ONCE_INIT;
static struct cat_algo *cat;
static int ncat;
static struct cat_pack *packs;
static int npacks;
static struct coll_rule *rules;
static int nrules;
static int cat_err; /* a config or memory error that makes every collective fail */
/* Catalog indices by collective, then priority (highest first), then catalog
 * order: collective c's are by_prio[coll_start[c] .. coll_start[c + 1] - 1]. */
static int *by_prio;
static int coll_start[WEFT_COLL_COUNT + 1];

static int algo_well_formed(const char *pack, const struct weft_algo *a)
{
	if (!a || a->size < offsetof(struct weft_algo, teardown) + sizeof(a->teardown)) {
		WEFT_WARN("algorithm pack %s: an algorithm entry is too small for this core's ABI; skipped", pack);
		return 0;
	}
	if (!a->name || !a->name[0] || (int)a->coll < 0 || a->coll >= WEFT_COLL_COUNT || !a->execute) {
		WEFT_WARN("algorithm pack %s: algorithm '%s' has no name, an unknown collective or no execute; skipped",
			  pack, a->name ? a->name : "(null)");
		return 0;
	}
	return 1;
}

static int target_matches(const char *target, const struct cat_algo *c)
{
	if (strchr(target, '/'))
		return strcmp(target, c->full) == 0;
	return strcmp(target, c->algo->name) == 0;
}

static void cat_build(void)
{
	const struct weft__plugin_entry *const *ents = NULL;
	int n = weft__registry_entries(&ents);
	int cap = 0;
	for (int i = 0; i < n; i++) {
		const struct weft__plugin_entry *e = ents[i];
		if (e->state != WEFT_PLUGIN_LOADED || e->kind != WEFT_PLUGIN_ALGO_PACK || !e->ops)
			continue;
		const struct weft_algo_ops *ops = e->ops;
		if (!WEFT_HAS_OP(ops, struct weft_algo_ops, algos))
			continue;
		struct cat_pack *np = realloc(packs, (size_t)(npacks + 1) * sizeof(*np));
		if (!np) {
			cat_err = -ENOMEM;
			return;
		}
		packs = np;
		packs[npacks] = (struct cat_pack){.name = e->name, .ops = ops, .abi_minor = e->abi_minor};
		npacks++;
		for (int k = 0; ops->algos[k]; k++) {
			const struct weft_algo *a = ops->algos[k];
			if (!algo_well_formed(e->name, a))
				continue;
			if (ncat == cap) {
				int c = cap ? cap * 2 : 16;
				struct cat_algo *nc = realloc(cat, (size_t)c * sizeof(*nc));
				if (!nc) {
					cat_err = -ENOMEM;
					return;
				}
				cat = nc;
				cap = c;
			}
			struct cat_algo *ca = &cat[ncat];
			ca->algo = a;
			/* Only a pack built for 0.3 or later knows of the operations 0.3
			 * added, so only its declared set counts. */
			ca->redops = BASE_REDOPS;
			if (e->abi_minor >= 3 && WEFT_HAS_FIELD(a, struct weft_algo, redops) && a->redops)
				ca->redops = a->redops;
			ca->max_hosts = 0;
			if (e->abi_minor >= 3 && WEFT_HAS_FIELD(a, struct weft_algo, max_hosts))
				ca->max_hosts = a->max_hosts;
			if (ca->max_hosts < 0) {
				WEFT_WARN("algorithm pack %s: algorithm '%s' declares max_hosts %d (0 means no limit); skipped",
					  e->name, a->name, ca->max_hosts);
				continue;
			}
			ca->pack = e->name;
			ca->pack_idx = npacks - 1;
			ca->core = e->core;
			snprintf(ca->full, sizeof(ca->full), "%s/%s", e->name, a->name);
			for (int j = 0; j < ncat; j++)
				if (strcmp(cat[j].full, ca->full) == 0) {
					WEFT_WARN("algorithm %s is listed twice; the second is ignored", ca->full);
					ca = NULL;
					break;
				}
			if (ca)
				ncat++;
		}
	}

	if (!(by_prio = malloc((ncat > 0 ? (size_t)ncat : 1) * sizeof(*by_prio)))) {
		cat_err = -ENOMEM;
		return;
	}
	int k = 0;
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		coll_start[c] = k;
		for (int i = 0; i < ncat; i++) {
			if ((int)cat[i].algo->coll != c)
				continue;
			int j = k++; /* insertion, after every entry of equal or higher priority */
			while (j > coll_start[c] && cat[by_prio[j - 1]].algo->priority < cat[i].algo->priority) {
				by_prio[j] = by_prio[j - 1];
				j--;
			}
			by_prio[j] = i;
		}
	}
	coll_start[WEFT_COLL_COUNT] = k;

	const char *const *lines = NULL;
	const int *linenos = NULL;
	int nl = weft__config_section_lines("algorithm", &lines, &linenos);
	if (nl > 0 && !(rules = calloc((size_t)nl, sizeof(*rules)))) {
		cat_err = -ENOMEM;
		return;
	}
	for (int i = 0; i < nl; i++) {
		struct coll_rule *cr = &rules[nrules];
		char err[256];
		if (weft__rule_parse(lines[i], &cr->r, err, sizeof(err)) != 0) {
			/* The config module checks rules at load; this is a second line of defence. */
			WEFT_ERROR("%s:%d: bad [algorithm] rule: %s", rules_origin(),
				   linenos[i], err);
			cat_err = -WEFT_ERR_CONFIG;
			return;
		}
		cr->r.lineno = linenos[i];
		for (int j = 0; j < ncat && !cr->known; j++)
			cr->known = target_matches(cr->r.target, &cat[j]);
		if (!cr->known) {
			const char *best = NULL;
			int bestd = INT_MAX;
			for (int j = 0; j < ncat; j++) {
				int d1 = weft__edit_distance(cr->r.target, cat[j].full);
				int d2 = weft__edit_distance(cr->r.target, cat[j].algo->name);
				int d = d1 < d2 ? d1 : d2;
				if (d < bestd) {
					bestd = d;
					best = cat[j].full;
				}
			}
			if (best && bestd <= 3)
				WEFT_WARN("%s:%d: [algorithm] names '%s', which no loaded pack offers (did you mean %s?); the rule is ignored",
					  rules_origin(), cr->r.lineno, cr->r.target,
					  best);
			else
				WEFT_WARN("%s:%d: [algorithm] names '%s', which no loaded pack offers; the rule is ignored",
					  rules_origin(), cr->r.lineno, cr->r.target);
		}
		nrules++;
	}
}

static int cat_load(void)
{
	pthread_once(&cat_once, cat_build);
	return cat_err;
}

/* ------------------------------------------------------------- choosing */

struct query {
	int coll;
	uint64_t bytes;
	int nranks;
	int nhosts; /* hosts the comm spans, 1 or more */
	int mem;
	int op; /* the reduction of a reducing collective, else -1 */
};

/* What the static part of the choice decided: candidates in the order to try,
 * and the rule that put the first one there (or -1). */
struct choice {
	int *order;
	int n;
	int rule;     /* index into rules of the use/prefer/require rule that pinned order[0], or -1 */
	int required; /* order holds only the required algorithm */
	int hosts_refused; /* the failed require: its algorithm that only max_hosts kept out, or -1 */
};

static int fits(const struct cat_algo *c, const struct query *q)
{
	const struct weft_algo *a = c->algo;
	if ((int)a->coll != q->coll)
		return 0;
	if (q->bytes < a->min_bytes || (a->max_bytes && q->bytes > a->max_bytes))
		return 0;
	if (q->nranks < a->min_ranks || (a->max_ranks && q->nranks > a->max_ranks))
		return 0;
	if (WEFT_HAS_FIELD(a, struct weft_algo, max_peer_bytes) && a->max_peer_bytes && q->nranks > 1 &&
	    q->bytes > a->max_peer_bytes / (uint64_t)(q->nranks - 1))
		return 0;
	if (q->mem < 0 || q->mem >= 32 || !(a->mem_types & (1u << q->mem)))
		return 0;
	if (q->op >= 0 && !(c->redops & (1u << q->op)))
		return 0;
	return 1;
}

/* Whether the comm spans more hosts than c serves; kept apart from fits so
 * that refusals can name it. */
static int over_hosts(const struct cat_algo *c, const struct query *q)
{
	return c->max_hosts > 0 && q->nhosts > c->max_hosts;
}

/* The first algorithm that target names and that only its host limit keeps
 * from q (fit[] holds fits() and the forbid rules), or -1. */
static int hosts_limited(const char *target, const int *fit, const struct query *q)
{
	for (int i = 0; i < ncat; i++)
		if (fit[i] && over_hosts(&cat[i], q) && target_matches(target, &cat[i]))
			return i;
	return -1;
}

static void rule_cannot_serve(struct coll_rule *cr, const struct query *q, const char *why)
{
	if (__atomic_exchange_n(&cr->warned, 1, __ATOMIC_RELAXED))
		return;
	WEFT_WARN("%s:%d: [algorithm] rule '%s %s': it cannot serve %s of %" PRIu64 " B on %d ranks in %s memory (%s); ignored",
		  rules_origin(), cr->r.lineno,
		  cr->r.action == WEFT_RULE_USE ? "use" : cr->r.action == WEFT_RULE_PREFER ? "prefer" : "require",
		  cr->r.target, weft__coll_name(q->coll), q->bytes, q->nranks, weft__mem_name(q->mem), why);
}

/* Fills ch (ch->order has room for ncat entries). Returns 0, or -ENOTSUP when a
 * `require` rule names an algorithm that cannot serve the query (logged unless
 * quiet). Deterministic in (query, rules, catalog): every rank gets the same. */
static int choose(const struct query *q, int quiet, struct choice *ch)
{
	/* fit: what the algorithm declares and the forbid rules allow, hosts
	 * aside; ok: that and the host limit, what may serve. */
	int ok[ncat > 0 ? ncat : 1], fit[ncat > 0 ? ncat : 1];
	memset(fit, 0, sizeof(fit));
	int first = coll_start[q->coll], end = coll_start[q->coll + 1];
	for (int k = first; k < end; k++)
		fit[by_prio[k]] = fits(&cat[by_prio[k]], q);
	struct weft__rule_query rq = {.coll = q->coll, .bytes = q->bytes, .nranks = q->nranks, .mem_type = q->mem,
				       .peer_class = -1};
	for (int r = 0; r < nrules; r++)
		if (rules[r].r.action == WEFT_RULE_FORBID && weft__rule_matches(&rules[r].r, &rq))
			for (int i = 0; i < ncat; i++)
				if (target_matches(rules[r].r.target, &cat[i]))
					fit[i] = 0;
	for (int i = 0; i < ncat; i++)
		ok[i] = fit[i] && !over_hosts(&cat[i], q);

	ch->n = 0;
	ch->rule = -1;
	ch->required = 0;
	ch->hosts_refused = -1;
	for (int r = 0; r < nrules && ch->rule < 0; r++) {
		struct coll_rule *cr = &rules[r];
		if (cr->r.action == WEFT_RULE_FORBID || !cr->known || !weft__rule_matches(&cr->r, &rq))
			continue;
		int pick = -1;
		for (int i = 0; i < ncat && pick < 0; i++)
			if (ok[i] && target_matches(cr->r.target, &cat[i]))
				pick = i;
		if (pick < 0) {
			int lim = hosts_limited(cr->r.target, fit, q);
			char why[320];
			if (lim >= 0)
				snprintf(why, sizeof(why), "%s serves at most %d host%s, the communicator spans %d",
					 cat[lim].full, cat[lim].max_hosts, cat[lim].max_hosts == 1 ? "" : "s", q->nhosts);
			else
				snprintf(why, sizeof(why), "forbidden, or outside its sizes, ranks or memory types");
			if (cr->r.action == WEFT_RULE_REQUIRE) {
				if (!quiet)
					WEFT_ERROR("%s:%d: [algorithm] requires %s, which cannot serve %s of %" PRIu64
						   " B on %d ranks in %s memory (%s)",
						   rules_origin(), cr->r.lineno,
						   cr->r.target, weft__coll_name(q->coll), q->bytes, q->nranks,
						   weft__mem_name(q->mem), why);
				ch->rule = r;
				ch->required = 1;
				ch->hosts_refused = lim;
				return -ENOTSUP;
			}
			if (cr->r.action == WEFT_RULE_USE && !quiet)
				rule_cannot_serve(cr, q, why);
			continue;
		}
		ch->rule = r;
		ch->order[ch->n++] = pick;
		ok[pick] = 0;
		if (cr->r.action == WEFT_RULE_REQUIRE) {
			ch->required = 1;
			return 0;
		}
	}
	/* The rest by priority, highest first; catalog order breaks ties, so that
	 * the search path order (the same on every rank) decides. */
	for (int k = first; k < end; k++)
		if (ok[by_prio[k]])
			ch->order[ch->n++] = by_prio[k];
	return 0;
}

/* ------------------------------------------------------ per-comm state
 * Hung on comm->coll by the first collective call on the comm; weft_comm_destroy
 * calls weft__coll_comm_cleanup, which tears it down. */

struct coll_inst {
	int done; /* setup ran */
	int rc;   /* its result */
	void *state;
	int announced; /* the first use was logged */
};

/* A pack's own state on one comm (weft_algo_ops.comm_setup). */
struct pack_inst {
	int done; /* comm_setup ran and every rank's setup with it succeeded */
	void *state;
};

struct weft__coll_comm {
	struct coll_inst *inst; /* ncat entries */
	struct pack_inst *pk;   /* npacks entries */
	int last;               /* catalog index of the last algorithm used, or -1 */
	uint32_t setup_seq;     /* setups agreed on this comm (packs.h) */
	/* Made with the state: every call's choice reads its host count, and
	 * every setup hands packs its peers. */
	struct weft__pack_topo topo;
};

static struct weft__coll_comm *comm_state(weft_comm_t *comm, int create)
{
	struct weft__coll_comm *cc = __atomic_load_n(&comm->coll, __ATOMIC_ACQUIRE);
	if (cc || !create)
		return cc;
	if (!(cc = calloc(1, sizeof(*cc))) || !(cc->inst = calloc(ncat > 0 ? (size_t)ncat : 1, sizeof(*cc->inst))) ||
	    !(cc->pk = calloc(npacks > 0 ? (size_t)npacks : 1, sizeof(*cc->pk))) ||
	    weft__pack_topo_make(comm, &cc->topo) != 0) {
		if (cc) {
			free(cc->inst);
			free(cc->pk);
		}
		free(cc);
		return NULL;
	}
	cc->last = -1;
	/* Two threads calling on one comm at once is the caller's error, but
	 * neither may leak or lose the state: the first to publish wins. */
	struct weft__coll_comm *prev = NULL;
	if (!__atomic_compare_exchange_n(&comm->coll, &prev, cc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		weft__pack_topo_free(&cc->topo);
		free(cc->inst);
		free(cc->pk);
		free(cc);
		return prev;
	}
	return cc;
}

/* Whether the core may call the pack's comm_setup: only one built for 0.3
 * or later has the field. */
static int pack_has_comm_setup(const struct cat_pack *p)
{
	return p->abi_minor >= 3 && WEFT_HAS_OP(p->ops, struct weft_algo_ops, comm_setup);
}

static void pack_teardown(const struct cat_pack *p, struct pack_inst *pk)
{
	if (pk->done && p->abi_minor >= 3 && WEFT_HAS_OP(p->ops, struct weft_algo_ops, comm_teardown))
		p->ops->comm_teardown(pk->state);
	pk->done = 0;
	pk->state = NULL;
}

void weft__coll_comm_cleanup(weft_comm_t *comm)
{
	if (!comm)
		return;
	struct weft__coll_comm *cc = __atomic_exchange_n(&comm->coll, NULL, __ATOMIC_ACQ_REL);
	if (!cc)
		return;
	/* Reverse catalog order, so that packs see teardown mirror setup roughly. */
	for (int i = ncat - 1; i >= 0; i--) {
		struct coll_inst *in = &cc->inst[i];
		if (in->done && in->rc == 0 && WEFT_HAS_OP(cat[i].algo, struct weft_algo, teardown))
			cat[i].algo->teardown(in->state);
	}
	/* Each pack after all of its algorithms, as weft_algo_ops promises. */
	for (int i = npacks - 1; i >= 0; i--)
		pack_teardown(&packs[i], &cc->pk[i]);
	weft__pack_topo_free(&cc->topo);
	free(cc->inst);
	free(cc->pk);
	free(cc);
}

void weft__coll_window(weft_comm_t *comm, const struct weft_algo_window *w, int reg)
{
	struct weft__coll_comm *cc = comm_state(comm, 0);
	for (int i = 0; cc && i < npacks; i++) {
		const struct weft_algo_ops *o = packs[i].ops;
		if (!cc->pk[i].done || packs[i].abi_minor < 3)
			continue;
		int rc = 0;
		if (reg && WEFT_HAS_OP(o, struct weft_algo_ops, window_register))
			rc = o->window_register(cc->pk[i].state, w);
		else if (!reg && WEFT_HAS_OP(o, struct weft_algo_ops, window_deregister))
			o->window_deregister(cc->pk[i].state, w);
		if (rc != 0)
			WEFT_WARN("%s: window %llu: %s; its calls take the pack's usual path", packs[i].name,
				  (unsigned long long)w->id, weft_strerror(rc));
	}
}

const char *weft__coll_last_algo(weft_comm_t *comm)
{
	if (!comm)
		return NULL;
	struct weft__coll_comm *cc = comm_state(comm, 0);
	return cc && cc->last >= 0 ? cat[cc->last].full : NULL;
}

/* Logs an agreed setup failure once per rank: at warn where it happened, at
 * info where the rank only follows it. */
static void setup_failed(const char *full, int rc, int agreed, int who)
{
	if (rc != 0 && rc != -ECANCELED)
		WEFT_WARN("%s: setup failed: %s; every rank falls back to the next algorithm", full, weft_strerror(rc));
	else
		WEFT_INFO("%s: setup failed on rank %d: %s; falling back to the next algorithm", full, who,
			  weft_strerror(agreed));
}

/* Sets up algorithm idx on comm (and its pack, the first time), collectively,
 * and agrees the outcome with every rank. Returns 0, the agreed failure (every
 * rank then tries the next algorithm), or with *fatal set the error that
 * broke the comm during the agreement. */
static int inst_setup(weft_comm_t *comm, struct weft__coll_comm *cc, int idx, int *fatal)
{
	struct coll_inst *in = &cc->inst[idx];
	*fatal = 0;
	if (in->done)
		return in->rc;
	const struct weft_algo *a = cat[idx].algo;
	const struct cat_pack *p = &packs[cat[idx].pack_idx];
	struct pack_inst *pk = &cc->pk[cat[idx].pack_idx];
	int rc = 0;
	struct weft_algo_comm ac = {
		.size = sizeof(ac),
		.comm = comm,
		.rank = comm->rank,
		.nranks = comm->nranks,
		.prim = &prim_api,
		.core = cat[idx].core,
		.pack_state = pk->state,
		.nhosts = cc->topo.nhosts,
		.peer_size = sizeof(struct weft_algo_peer),
		.peers = cc->topo.peers,
	};
	void *state = NULL, *pstate = NULL;
	int pack_made = 0, made = 0;
	weft__pack_setup_begin(comm);
	if (rc == 0 && !pk->done && pack_has_comm_setup(p) && (rc = p->ops->comm_setup(&ac, &pstate)) == 0) {
		pack_made = 1;
		pk->done = 1;
		pk->state = ac.pack_state = pstate;
	}
	if (rc == 0 && WEFT_HAS_OP(a, struct weft_algo, setup))
		made = (rc = a->setup(&ac, &state)) == 0;
	weft__pack_setup_end();
	/* Point-to-point calls are made by some ranks only, so their setups are
	 * neither collective nor agreed. */
	int agreed = rc, who = ac.rank, brc = 0, all_made = 0;
	if (a->coll != WEFT_COLL_SENDRECV)
		brc = weft__pack_agree(comm, ++cc->setup_seq, rc, pack_made, &agreed, &who, &all_made);
	if (brc != 0 || agreed != 0) {
		/* What this rank made is undone, so that every rank stands where it
		 * stood before and tries the next. A pack state that every rank
		 * made stays (its teardown may be collective, as algo-gpu's is);
		 * one that only some made goes where it was made. */
		if (made && WEFT_HAS_OP(a, struct weft_algo, teardown))
			a->teardown(state);
		if (pack_made && (brc != 0 || !all_made))
			pack_teardown(p, pk);
		if (brc != 0) {
			*fatal = 1;
			return brc;
		}
		setup_failed(cat[idx].full, rc, agreed, who);
		in->done = 1;
		in->rc = agreed;
		return agreed;
	}
	in->done = 1;
	in->rc = 0;
	in->state = state;
	return 0;
}

static void describe_call(const struct weft_coll_args *a, char *buf, size_t len)
{
	if (a->coll == WEFT_COLL_SENDRECV)
		snprintf(buf, len, "sendrecv of %zu operation%s, %" PRIu64 " B in %s memory", a->count,
			 a->count == 1 ? "" : "s", a->bytes, weft__mem_name(a->mem_type));
	else if (a->coll == WEFT_COLL_ALLREDUCE || a->coll == WEFT_COLL_REDUCE_SCATTER || a->coll == WEFT_COLL_REDUCE)
		snprintf(buf, len, "%s of %s (%s), %" PRIu64 " B in %s memory", weft__coll_name(a->coll),
			 weft_datatype_name(a->dtype), weft_redop_name(a->op), a->bytes, weft__mem_name(a->mem_type));
	else
		snprintf(buf, len, "%s of %s, %" PRIu64 " B in %s memory", weft__coll_name(a->coll),
			 weft_datatype_name(a->dtype), a->bytes, weft__mem_name(a->mem_type));
}

static int coll_run(weft_comm_t *comm, const struct weft_coll_args *args);

/* Every call is numbered and signed, a call of count 0 too, so that a rank
 * that passes 0 where its peers pass more is caught rather than skipped. */
int weft__coll_run(weft_comm_t *comm, struct weft_coll_args *args)
{
	int rc = prim_comm_status(comm);
	if (rc != 0)
		return rc;
	if ((rc = weft__callsig_begin(comm, args)) != 0)
		return rc;
	rc = args->count == 0 ? 0 : coll_run(comm, args);
	weft__callsig_end(comm, args);
	if (rc != 0) {
		/* A pack that found the ranks' calls disagree fails the
		 * communicator on every rank; any error after the communicator
		 * failed is that failure. */
		if (rc == -WEFT_ERR_MISMATCH)
			weft__bootstrap_fail(comm->bs, rc);
		int st = prim_comm_status(comm);
		if (st != 0)
			rc = st;
	}
	return rc;
}

static int coll_run(weft_comm_t *comm, const struct weft_coll_args *args)
{
	int rc;
	if ((rc = cat_load()) != 0)
		return rc;
	struct weft__coll_comm *cc = comm_state(comm, 1);
	if (!cc)
		return -ENOMEM;
	int nranks = comm->nranks;
	int reducing = weft_kit_coll_reduces(args->coll);
	struct query q = {.coll = (int)args->coll, .bytes = args->bytes, .nranks = nranks, .nhosts = cc->topo.nhosts,
			  .mem = (int)args->mem_type, .op = reducing ? (int)args->op : -1};
	int order[ncat > 0 ? ncat : 1];
	struct choice ch = {.order = order};
	/* The call's description is formatted only where a line is logged: a
	 * snprintf per call was a visible part of a 2 KiB allreduce over shm. */
	char what[160];
	if ((rc = choose(&q, 0, &ch)) != 0)
		return rc;
	for (int k = 0; k < ch.n; k++) {
		int idx = ch.order[k];
		const struct weft_algo *a = cat[idx].algo;
		int fatal = 0;
		if ((rc = inst_setup(comm, cc, idx, &fatal)) != 0) {
			if (fatal)
				return rc;
			if (k == 0 && ch.required) {
				describe_call(args, what, sizeof(what));
				WEFT_ERROR("%s:%d: [algorithm] requires %s, whose setup failed for %s: %s",
					   rules_origin(), rules[ch.rule].r.lineno,
					   cat[idx].full, what, weft_strerror(rc));
				return rc;
			}
			continue;
		}
		void *state = cc->inst[idx].state;
		if (WEFT_HAS_OP(a, struct weft_algo, supports) && a->supports(state, args) != 0) {
			if (k == 0 && ch.rule >= 0) {
				if (ch.required) {
					describe_call(args, what, sizeof(what));
					WEFT_ERROR("%s:%d: [algorithm] requires %s, which refuses %s",
						   rules_origin(),
						   rules[ch.rule].r.lineno, cat[idx].full, what);
					return -ENOTSUP;
				}
				if (rules[ch.rule].r.action == WEFT_RULE_USE)
					rule_cannot_serve(&rules[ch.rule], &q, "the algorithm refuses this type or operation");
			}
			continue;
		}
		int announce = !cc->inst[idx].announced;
		if (announce || weft__log_level() >= WEFT_LOG_DEBUG) {
			char why[64];
			if (k == 0 && ch.rule >= 0)
				snprintf(why, sizeof(why), "rule %s:%d", rules_origin(), rules[ch.rule].r.lineno);
			else
				snprintf(why, sizeof(why), "priority %d", a->priority);
			describe_call(args, what, sizeof(what));
			cc->inst[idx].announced = 1;
			weft__log(announce ? WEFT_LOG_INFO : WEFT_LOG_DEBUG, NULL, "%s: using %s (%s)", what,
				  cat[idx].full, why);
		}
		cc->last = idx;
		return a->execute(state, args);
	}
	describe_call(args, what, sizeof(what));
	WEFT_ERROR("%s on %d ranks of %d host%s: no algorithm of the loaded packs serves it (%d loaded algorithm%s, %d "
		   "fit%s the collective, operation, size, ranks, hosts and memory type)",
		   what, nranks, q.nhosts, q.nhosts == 1 ? "" : "s", ncat, ncat == 1 ? "" : "s", ch.n,
		   ch.n == 1 ? "s" : "");
	return -ENOTSUP;
}

WEFT_API int weft__coll_execute(weft_comm_t *comm, const struct weft_coll_args *args)
{
	if (!comm || !args || args->size < sizeof(*args) || (int)args->coll < 0 || args->coll >= WEFT_COLL_COUNT ||
	    (int)args->mem_type < 0 || args->mem_type >= WEFT_MEM_TYPE_COUNT)
		return -EINVAL;
	struct weft_coll_args a = *args;
	return weft__coll_run(comm, &a);
}

/* ------------------------------------------------------------ weft-info */

int weft__coll_catalog(struct weft_info_algo *out, int max)
{
	int rc = cat_load();
	if (rc != 0)
		return rc;
	for (int i = 0; i < ncat && i < max && out; i++) {
		const struct weft_algo *a = cat[i].algo;
		out[i] = (struct weft_info_algo){
			.size = sizeof(out[i]),
			.pack = cat[i].pack,
			.name = a->name,
			.coll = (int)a->coll,
			.min_bytes = a->min_bytes,
			.max_bytes = a->max_bytes,
			.max_peer_bytes = WEFT_HAS_FIELD(a, struct weft_algo, max_peer_bytes) ? a->max_peer_bytes : 0,
			.min_ranks = a->min_ranks,
			.max_ranks = a->max_ranks,
			.mem_types = a->mem_types,
			.redops = a->coll == WEFT_COLL_ALLREDUCE || a->coll == WEFT_COLL_REDUCE ||
						  a->coll == WEFT_COLL_REDUCE_SCATTER
					  ? cat[i].redops
					  : 0,
			.priority = a->priority,
		};
	}
	return ncat;
}

static void fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (b >= 1024 && b % 1024 == 0 && u < 4) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, "%" PRIu64 " %s", b, units[u]);
}

void weft__coll_print_choices(FILE *out, int nranks, int nhosts, enum weft_mem_type mem)
{
	if (!out)
		return;
	int rc = cat_load();
	if (rc != 0) {
		fprintf(out, "algorithm selection unavailable: %s\n", weft_strerror(rc));
		return;
	}
	if (nhosts < 1)
		nhosts = 1;
	fprintf(out, "Algorithm choice for %d ranks on %d host%s, %s memory (sizes sampled at powers of two):\n",
		nranks, nhosts, nhosts == 1 ? "" : "s", weft__mem_name((int)mem));
	int order[ncat > 0 ? ncat : 1];
	for (int c = 0; c < WEFT_COLL_COUNT; c++) {
		fprintf(out, "  %s:\n", weft__coll_name(c));
		int prev_idx = -2, prev_rule = -2, prev_req = 0;
		uint64_t lo = 0, hi = 0;
		for (int s = 0; s <= 31; s++) {
			uint64_t bytes = s <= 30 ? (uint64_t)1 << s : 0;
			int idx = -1, rule = -1, req = 0;
			if (s <= 30) {
				struct query q = {.coll = c, .bytes = bytes, .nranks = nranks, .nhosts = nhosts,
						  .mem = (int)mem, .op = -1};
				struct choice ch = {.order = order};
				int r = choose(&q, 1, &ch);
				idx = r == 0 && ch.n > 0 ? ch.order[0] : -1;
				rule = ch.rule;
				req = r != 0;
			}
			if (s <= 30 && idx == prev_idx && rule == prev_rule && req == prev_req) {
				hi = bytes;
				continue;
			}
			if (prev_idx != -2) {
				char a[32], b[32], why[96];
				fmt_size(lo, a, sizeof(a));
				fmt_size(hi, b, sizeof(b));
				if (prev_req)
					snprintf(why, sizeof(why), "rule %s:%d requires an algorithm that cannot serve", rules_origin(),
						 rules[prev_rule].r.lineno);
				else if (prev_idx < 0)
					snprintf(why, sizeof(why), "no algorithm fits");
				else if (prev_rule >= 0)
					snprintf(why, sizeof(why), "rule %s:%d", rules_origin(), rules[prev_rule].r.lineno);
				else
					snprintf(why, sizeof(why), "priority %d", cat[prev_idx].algo->priority);
				fprintf(out, "    %10s .. %-10s  %-32s  (%s)\n", a, b,
					prev_idx >= 0 ? cat[prev_idx].full : "-", why);
			}
			prev_idx = idx;
			prev_rule = rule;
			prev_req = req;
			lo = hi = bytes;
		}
	}
}
