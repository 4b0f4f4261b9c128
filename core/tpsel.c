/* SPDX-License-Identifier: Apache-2.0 */
/* Transport choice per peer: [transport] rules (forbid, require, use, prefer,
 * by peer class, memory type and rank count) over the scores topo.c derives
 * from what each transport's probe declares. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "config.h"
#include "log.h"
#include "registry.h"
#include "rules.h"
#include "topo.h"
#include "tpsel.h"

struct tp_rule {
	struct weft__rule r;
	int warned; /* "use X, but X cannot serve" said once (atomic) */
};

static pthread_once_t rules_once = PTHREAD_ONCE_INIT;
static struct tp_rule *rules;
static int nrules;
static int rules_err;

static const char *const mem_names[WEFT_MEM_TYPE_COUNT] = {"host", "cuda", "hip"};
/* The project's transports: a rule naming one of them that is not installed
 * here is not a typo, and a typo of one gets it suggested. */
static const char *const known_tps[] = {"ib", "nvlink", "ofi", "shm", "ucx", "xgmi"};

/* Where the [transport] rules came from, for "WHERE:N" in messages: the
 * file (N its line) or the variable (N the rule's place in it). */
static const char *cfg_name(void)
{
	const char *e = weft__config_rules_origin("transport");
	return e ? e : "config";
}

static const char *action_name(enum weft__rule_action a)
{
	switch (a) {
	case WEFT_RULE_USE: return "use";
	case WEFT_RULE_PREFER: return "prefer";
	case WEFT_RULE_FORBID: return "forbid";
	default: return "require";
	}
}

/* The closest known or loaded transport name to `name` within a typo's
 * distance, or NULL. */
static const char *closest_tp(const char *name)
{
	const char *best = NULL;
	int bestd = INT_MAX;
	for (size_t i = 0; i < sizeof(known_tps) / sizeof(known_tps[0]); i++) {
		int d = weft__edit_distance(name, known_tps[i]);
		if (d < bestd) {
			bestd = d;
			best = known_tps[i];
		}
	}
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	for (int i = 0; i < n; i++) {
		if (e[i]->kind != WEFT_PLUGIN_TRANSPORT || !e[i]->name)
			continue;
		int d = weft__edit_distance(name, e[i]->name);
		if (d < bestd) {
			bestd = d;
			best = e[i]->name;
		}
	}
	size_t len = strlen(name);
	return best && bestd > 0 && bestd <= 2 && (size_t)bestd < len ? best : NULL;
}

static int is_known_name(const char *name)
{
	for (size_t i = 0; i < sizeof(known_tps) / sizeof(known_tps[0]); i++)
		if (strcmp(name, known_tps[i]) == 0)
			return 1;
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	for (int i = 0; i < n; i++)
		if (e[i]->name && strcmp(e[i]->name, name) == 0)
			return 1;
	return 0;
}

static void rules_load(void)
{
	const char *const *lines = NULL;
	const int *linenos = NULL;
	int nl = weft__config_section_lines("transport", &lines, &linenos);
	if (nl <= 0)
		return;
	rules = calloc((size_t)nl, sizeof(*rules));
	if (!rules) {
		rules_err = -ENOMEM;
		return;
	}
	for (int i = 0; i < nl; i++) {
		struct tp_rule *tr = &rules[nrules];
		char err[256];
		if (weft__rule_parse(lines[i], &tr->r, err, sizeof(err)) != 0) {
			/* The config module checks rules at load; this is a second line of defence. */
			WEFT_ERROR("%s:%d: bad [transport] rule: %s", cfg_name(), linenos[i], err);
			rules_err = -WEFT_ERR_CONFIG;
			return;
		}
		tr->r.lineno = linenos[i];
		if (strchr(tr->r.target, '/') || tr->r.colls || tr->r.size_lo != 0 || tr->r.size_hi != UINT64_MAX)
			WEFT_WARN("%s:%d: [transport] rule '%s': transports are chosen per peer, not per call: its "
				  "target must be a transport name and 'coll'/'size' conditions never match",
				  cfg_name(), tr->r.lineno, lines[i]);
		if (!is_known_name(tr->r.target)) {
			/* A rule that can never match would leave the choice to the
			 * defaults without a word: refused, as a bad value is. A
			 * require of a missing transport fails creation anyway,
			 * naming the plugin file it looked for: a warning here. */
			int req = tr->r.action == WEFT_RULE_REQUIRE;
			enum weft_log_level lv = req ? WEFT_LOG_WARN : WEFT_LOG_ERROR;
			const char *sug = closest_tp(tr->r.target);
			if (sug)
				weft__log(lv, NULL, "%s:%d: [transport] names '%s', which is no transport; did you mean '%s'?",
					  cfg_name(), tr->r.lineno, tr->r.target, sug);
			else
				weft__log(lv, NULL,
					  "%s:%d: [transport] names '%s', which is no transport weft knows or found "
					  "(weft-info lists them)",
					  cfg_name(), tr->r.lineno, tr->r.target);
			if (!req)
				rules_err = -WEFT_ERR_CONFIG;
		}
		nrules++;
	}
}

static int rules_get(void)
{
	pthread_once(&rules_once, rules_load);
	return rules_err;
}

/* Does rule r apply to a connection question? coll and size never match: a
 * connection serves every call. */
static int rule_applies(const struct weft__rule *r, enum weft_peer_class cls, enum weft_mem_type mem, int nranks)
{
	if (r->colls || r->size_lo != 0 || r->size_hi != UINT64_MAX)
		return 0;
	struct weft__rule_query q = {.coll = -1, .bytes = 0, .nranks = nranks, .mem_type = (int)mem,
				     .peer_class = (int)cls};
	return weft__rule_matches(r, &q);
}

static int cand_index(const struct weft__tp_cand *c, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(c[i].name, name) == 0)
			return i;
	return -1;
}

/* Why a transport that a rule names is not among the candidates. */
static void absent_reason(const char *name, char *buf, size_t len)
{
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	for (int i = 0; i < n; i++)
		if (e[i]->name && strcmp(e[i]->name, name) == 0 && e[i]->kind == WEFT_PLUGIN_TRANSPORT &&
		    e[i]->state == WEFT_PLUGIN_LOADED) {
			snprintf(buf, len,
				 "it is installed (%s) but did not open for this communicator (weft-info --select says "
				 "why)",
				 e[i]->path);
			return;
		}
	for (int i = 0; i < n; i++)
		if (e[i]->name && strcmp(e[i]->name, name) == 0) {
			snprintf(buf, len, "%s was not loaded: %s", e[i]->path, e[i]->reason ? e[i]->reason : "rejected");
			return;
		}
	char *path = weft__registry_search_path();
	const char *sug = closest_tp(name);
	snprintf(buf, len, "it is not installed (no libweft-%s.so on the search path %s)%s%s%s", name,
		 path && *path ? path : "(empty)", sug ? "; did you mean '" : "", sug ? sug : "", sug ? "'?" : "");
	free(path);
}

int weft__tp_rules_check(void)
{
	return rules_get();
}

int weft__tp_plan(const struct weft__tp_cand *c, int n, enum weft_peer_class cls, enum weft_mem_type mem,
		  const struct weft__gpu_link *gl, int nranks, int quiet, struct weft__tp_plan *plan)
{
	int rc = rules_get();
	if (rc != 0)
		return rc;
	if (n > 64)
		n = 64;
	int forbidden[64] = {0}, placed[64] = {0};
	int forbid_line[64] = {0};
	struct weft__tp_score sc[64];
	plan->n = 0;
	plan->pinned = 0;
	for (int r = 0; r < nrules; r++) {
		if (rules[r].r.action != WEFT_RULE_FORBID || !rule_applies(&rules[r].r, cls, mem, nranks))
			continue;
		int i = cand_index(c, n, rules[r].r.target);
		if (i >= 0 && !forbidden[i]) {
			forbidden[i] = 1;
			forbid_line[i] = rules[r].r.lineno;
		}
	}
	for (int r = 0; r < nrules; r++) {
		const struct weft__rule *ru = &rules[r].r;
		if (ru->action != WEFT_RULE_REQUIRE || !rule_applies(ru, cls, mem, nranks))
			continue;
		int i = cand_index(c, n, ru->target);
		if (i < 0) {
			if (!quiet) {
				char why[512];
				absent_reason(ru->target, why, sizeof(why));
				WEFT_ERROR("transport '%s' is required (%s:%d) for %s peers with %s memory, but %s",
					   ru->target, cfg_name(), ru->lineno, weft__peer_class_name(cls), mem_names[mem], why);
			}
			return -WEFT_ERR_PLUGIN;
		}
		if (forbidden[i]) {
			if (!quiet)
				WEFT_ERROR("transport '%s' is required (%s:%d) and forbidden (%s:%d) for %s peers",
					   ru->target, cfg_name(), ru->lineno, cfg_name(), forbid_line[i], weft__peer_class_name(cls));
			return -WEFT_ERR_CONFIG;
		}
		plan->order[0] = i;
		plan->n = plan->pinned = 1;
		snprintf(plan->why[0], WEFT__WHY_MAX, "required by %s:%d (no fall-back)", cfg_name(), ru->lineno);
		return 0;
	}
	for (int r = 0; r < nrules; r++) {
		struct tp_rule *tr = &rules[r];
		const struct weft__rule *ru = &tr->r;
		if ((ru->action != WEFT_RULE_USE && ru->action != WEFT_RULE_PREFER) ||
		    !rule_applies(ru, cls, mem, nranks))
			continue;
		int i = cand_index(c, n, ru->target);
		if (i < 0 || forbidden[i]) {
			if (ru->action == WEFT_RULE_USE && !quiet && !__atomic_exchange_n(&tr->warned, 1, __ATOMIC_RELAXED))
				WEFT_WARN("%s:%d: 'use %s' cannot serve %s peers: %s; the next rules and the scores decide",
					  cfg_name(), ru->lineno, ru->target, weft__peer_class_name(cls),
					  i < 0 ? "it is not open for this communicator" : "it is forbidden");
			continue;
		}
		if (placed[i])
			continue;
		placed[i] = 1;
		if (ru->action == WEFT_RULE_USE && plan->pinned == plan->n)
			plan->pinned++;
		snprintf(plan->why[plan->n], WEFT__WHY_MAX, "'%s %s' at %s:%d", action_name(ru->action), ru->target,
			 cfg_name(), ru->lineno);
		plan->order[plan->n++] = i;
	}
	/* The rest by score, best first; ties by name so that every rank agrees. */
	int rest[64], nr = 0;
	for (int i = 0; i < n; i++) {
		if (forbidden[i] || placed[i])
			continue;
		weft__topo_score(c[i].ops, cls, mem, gl, &sc[i]);
		rest[nr++] = i;
	}
	for (int a = 1; a < nr; a++) {
		int k = rest[a], j = a - 1;
		while (j >= 0 && (sc[rest[j]].score_us > sc[k].score_us ||
				  (sc[rest[j]].score_us == sc[k].score_us && strcmp(c[rest[j]].name, c[k].name) > 0))) {
			rest[j + 1] = rest[j];
			j--;
		}
		rest[j + 1] = k;
	}
	for (int a = 0; a < nr; a++) {
		weft__topo_score_text(&sc[rest[a]], plan->why[plan->n], WEFT__WHY_MAX);
		plan->order[plan->n++] = rest[a];
	}
	if (plan->n == 0) {
		if (!quiet && n > 0)
			WEFT_ERROR("every transport open for %s peers is forbidden by [transport] rules (%s)",
				   weft__peer_class_name(cls), cfg_name());
		return -EHOSTUNREACH;
	}
	return 0;
}

enum weft_peer_class weft__peer_class(const weft_comm_t *comm, int peer)
{
	if (weft__bootstrap_proc_id(comm->bs, peer) == weft__bootstrap_proc_id(comm->bs, comm->rank))
		return WEFT_PEER_SAME_PROCESS;
	const char *a = weft__bootstrap_host_id(comm->bs, peer);
	const char *b = weft__bootstrap_host_id(comm->bs, comm->rank);
	if (!a || !b || strcmp(a, b) != 0)
		return WEFT_PEER_OTHER_HOST;
	struct weft__gpu_link gl;
	weft__topo_gpu_link(comm, peer, &gl);
	return gl.links > 0 ? WEFT__PEER_SAME_GPU_LINK : WEFT_PEER_SAME_HOST;
}

int weft__tp_check_required(const weft_comm_t *comm, char *err, size_t errlen)
{
	int rc = rules_get();
	if (rc != 0) {
		snprintf(err, errlen, "the [transport] rules could not be read: %s", weft_strerror(rc));
		return rc;
	}
	unsigned present = 0;
	for (int p = 0; p < comm->nranks; p++)
		if (p != comm->rank)
			present |= 1u << weft__peer_class(comm, p);
	for (int r = 0; r < nrules; r++) {
		const struct weft__rule *ru = &rules[r].r;
		if (ru->action != WEFT_RULE_REQUIRE || weft__comm_tp_index(comm, ru->target) >= 0)
			continue;
		/* Every connection can carry host memory (weft_connect chooses for
		 * it), so that is the memory type a require rule must serve here; a
		 * rule for device memory is checked by the weft_connect_mem call
		 * that asks for it. */
		for (int cls = 0; cls < WEFT__PEER_CLASSES; cls++) {
			if (!(present & (1u << cls)) || !rule_applies(ru, cls, WEFT_MEM_HOST, comm->nranks))
				continue;
			char why[512];
			absent_reason(ru->target, why, sizeof(why));
			snprintf(err, errlen, "transport '%s' is required (%s:%d, for %s peers) but %s", ru->target,
				 cfg_name(), ru->lineno, weft__peer_class_name(cls), why);
			WEFT_ERROR("%s", err);
			return -WEFT_ERR_PLUGIN;
		}
	}
	return 0;
}

char *weft__tp_rules_text(void)
{
	const char *const *lines = NULL;
	const int *linenos = NULL;
	int nl = weft__config_section_lines("transport", &lines, &linenos);
	size_t total = 1;
	for (int i = 0; i < nl; i++)
		total += strlen(lines[i]) + 16;
	char *s = malloc(total);
	if (!s)
		return NULL;
	size_t at = 0;
	s[0] = '\0';
	for (int i = 0; i < nl; i++)
		at += (size_t)snprintf(s + at, total - at, "%s\n", lines[i]);
	return s;
}

/* ------------------------------------------------------------- weft-info */
/* The candidates a plan left out, each with the rule that did it (file:line)
 * or the reason it cannot serve the class. */
static void print_left_out(FILE *out, const char *indent, const struct weft__tp_cand *c, int n,
			   const struct weft__tp_plan *plan, enum weft_peer_class cls, enum weft_mem_type mem, int nranks)
{
	for (int i = 0; plan && i < n; i++) {
		int in = 0;
		for (int k = 0; k < plan->n && !in; k++)
			in = plan->order[k] == i;
		if (in)
			continue;
		const struct weft__rule *by = NULL;
		for (int r = 0; r < nrules && !by; r++)
			if ((rules[r].r.action == WEFT_RULE_FORBID ? strcmp(rules[r].r.target, c[i].name) == 0
								   : rules[r].r.action == WEFT_RULE_REQUIRE) &&
			    rule_applies(&rules[r].r, cls, mem, nranks))
				by = &rules[r].r;
		if (by && by->action == WEFT_RULE_FORBID)
			fprintf(out, "%s-  %-8s forbidden by %s:%d\n", indent, c[i].name, cfg_name(), by->lineno);
		else if (by)
			fprintf(out, "%s-  %-8s left out: %s:%d requires %s\n", indent, c[i].name, cfg_name(), by->lineno,
				by->target);
		else
			fprintf(out, "%s-  %-8s does not serve these peers or this memory type\n", indent, c[i].name);
	}
}

static int print_plan(FILE *out, const char *indent, const struct weft__tp_cand *c, int n, enum weft_peer_class cls,
		       enum weft_mem_type mem, const struct weft__gpu_link *gl, int nranks)
{
	struct weft__tp_plan *plan = malloc(sizeof(*plan));
	if (!plan)
		return -ENOMEM;
	int rc = weft__tp_plan(c, n, cls, mem, gl, nranks, 1, plan);
	if (rc == -WEFT_ERR_PLUGIN || rc == -WEFT_ERR_CONFIG) {
		/* Say it the way a communicator would. */
		for (int r = 0; r < nrules; r++) {
			const struct weft__rule *ru = &rules[r].r;
			if (ru->action == WEFT_RULE_REQUIRE && rule_applies(ru, cls, mem, nranks)) {
				char why[512] = "";
				if (cand_index(c, n, ru->target) < 0)
					absent_reason(ru->target, why, sizeof(why));
				else
					snprintf(why, sizeof(why), "it is also forbidden");
				fprintf(out, "%sERROR: '%s' is required (%s:%d) but %s\n", indent, ru->target, cfg_name(),
					ru->lineno, why);
				break;
			}
		}
	} else if (rc != 0) {
		fprintf(out, "%sno transport: %s\n", indent, weft_strerror(rc));
	} else {
		for (int k = 0; k < plan->n; k++)
			fprintf(out, "%s%d. %-8s %s%s\n", indent, k + 1, c[plan->order[k]].name, plan->why[k],
				k < plan->pinned ? " [pinned]" : "");
	}
	print_left_out(out, indent, c, n, rc == 0 ? plan : NULL, cls, mem, nranks);
	free(plan);
	return rc;
}

int weft__tp_print_choices(FILE *out, weft_comm_t *comm, int per_class, int nranks, enum weft_mem_type mem)
{
	if (!out)
		return -EINVAL;
	struct weft__tp_cand c[64];
	int n = 0;
	if (comm) {
		for (int i = 0; i < comm->ntp && n < 64; i++, n++) {
			c[n].name = comm->tp[i].name;
			c[n].ops = comm->tp[i].ops;
		}
		if (!per_class)
			nranks = comm->nranks;
	} else {
		const struct weft__plugin_entry *const *e = NULL;
		int ne = weft__registry_entries(&e);
		for (int i = 0; i < ne && n < 64; i++)
			if (e[i]->state == WEFT_PLUGIN_LOADED && e[i]->kind == WEFT_PLUGIN_TRANSPORT && e[i]->name &&
			    e[i]->ops) {
				c[n].name = e[i]->name;
				c[n].ops = e[i]->ops;
				n++;
			}
		/* Sorted by name, as a communicator opens them. */
		for (int a = 1; a < n; a++) {
			struct weft__tp_cand k = c[a];
			int j = a - 1;
			while (j >= 0 && strcmp(c[j].name, k.name) > 0) {
				c[j + 1] = c[j];
				j--;
			}
			c[j + 1] = k;
		}
	}
	int rc = rules_get(), first = 0;
	if (rc != 0) {
		fprintf(out, "transport selection unavailable: %s\n", weft_strerror(rc));
		return rc;
	}
	fprintf(out, "Transport choice, %s memory (offered best first; the lower rank of a pair decides; a failed "
		     "connect falls back to the next unless pinned by a use/require rule):\n",
		mem_names[mem]);
	if (mem != WEFT_MEM_HOST)
		fprintf(out, "  (weft_connect chooses for host memory; this is the order weft_connect_mem gives %s "
			     "memory)\n",
			mem_names[mem]);
	if (nrules == 0)
		fprintf(out, "  ([transport] has no rules: scores decide)\n");
	for (int i = 0; comm && i < comm->ntp_failed; i++)
		fprintf(out, "  not opened here: %s (%s)\n", comm->tp_failed[i].name,
			weft_strerror(comm->tp_failed[i].rc));
	if (comm && !per_class) {
		char gtext[384];
		weft__topo_gpu_text(comm, gtext, sizeof(gtext));
		fprintf(out, "  GPU links of rank %d: %s\n", comm->rank, gtext);
		fprintf(out, "  rank %d of %d:\n", comm->rank, comm->nranks);
		for (int p = 0; p < comm->nranks; p++) {
			if (p == comm->rank)
				continue;
			enum weft_peer_class cls = weft__peer_class(comm, p);
			struct weft__gpu_link gl;
			weft__topo_gpu_link(comm, p, &gl);
			if (cls == WEFT__PEER_SAME_GPU_LINK)
				fprintf(out, "  peer %d (%s: %d NVLink(s)%s):\n", p, weft__peer_class_name(cls), gl.links,
					gl.via_switch ? " through NVSwitch" : "");
			else
				fprintf(out, "  peer %d (%s):\n", p, weft__peer_class_name(cls));
			rc = print_plan(out, "    ", c, n, cls, mem, &gl, nranks);
			if (rc != 0 && first == 0)
				first = rc;
		}
		return first;
	}
	fprintf(out, "  rank 0 of %d, every peer on this host (run under a launcher to see the real peers)%s:\n",
		nranks, comm ? "; transports opened as a communicator opens them" : "");
	for (int cls = 0; cls < WEFT__PEER_CLASSES; cls++) {
		fprintf(out, "  %s peers:\n", weft__peer_class_name(cls));
		if (cls == WEFT_PEER_SAME_HOST && nranks > 1)
			fprintf(out, "    (ranks 1..%d)\n", nranks - 1);
		if (cls == WEFT__PEER_SAME_GPU_LINK)
			fprintf(out, "    (ranks on this host whose GPUs NVML shows joined by NVLink; none without NVML or "
				     "a GPU, and outside a communicator the link count is unknown)\n");
		rc = print_plan(out, "    ", c, n, (enum weft_peer_class)cls, mem, NULL, nranks);
		if (rc != 0 && first == 0)
			first = rc;
	}
	return first;
}
