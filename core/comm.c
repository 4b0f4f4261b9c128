/* SPDX-License-Identifier: Apache-2.0 */
/* Communicators: creation (bootstrap + one context per loaded transport),
 * teardown of everything made from a comm, abort and status, and the
 * out-of-band helpers. The top floor of the core: it calls every module
 * down, and no module calls it (base.h says who drives progress). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "coll.h"
#include "config.h"
#include "conn.h"
#include "consist.h"
#include "devchan.h"
#include "log.h"
#include "mem.h"
#include "port.h"
#include "progress.h"
#include "registry.h"
#include "sem.h"
#include "topo.h"
#include "tpsel.h"
#include "sigkeep.h"

/* ------------------------------------------------------------ transports */
/* True when `name` is listed in [core] require (a comma or blank separated list). */
static int is_required(const char *name)
{
	const char *req = NULL;
	if (weft__param_get("core", "require", WEFT_PARAM_STRING, &req, NULL) != 0 || !req)
		return 0;
	size_t n = strlen(name);
	const char *p = req;
	while (*p) {
		while (*p == ',' || *p == ' ' || *p == '\t')
			p++;
		const char *w = p;
		while (*p && *p != ',' && *p != ' ' && *p != '\t')
			p++;
		if ((size_t)(p - w) == n && strncmp(w, name, n) == 0)
			return 1;
	}
	return 0;
}

static int cmp_entry_name(const void *a, const void *b)
{
	const struct weft__plugin_entry *ea = *(const struct weft__plugin_entry *const *)a;
	const struct weft__plugin_entry *eb = *(const struct weft__plugin_entry *const *)b;
	return strcmp(ea->name, eb->name);
}

static void close_transports(weft_comm_t *comm)
{
	for (int i = comm->ntp - 1; i >= 0; i--) {
		struct weft__tp *tp = &comm->tp[i];
		pthread_mutex_lock(&tp->lock);
		if (WEFT__TP_HAS(tp, close))
			tp->ops->close(tp->tc);
		pthread_mutex_unlock(&tp->lock);
		pthread_mutex_destroy(&tp->lock);
	}
	free(comm->tp);
	comm->tp = NULL;
	comm->ntp = 0;
}

/* Opens one context per loaded transport, in alphabetical order so that every
 * rank lists them alike. A transport that cannot open is skipped unless the
 * configuration requires it. */
static int open_transports(weft_comm_t *comm)
{
	const struct weft__plugin_entry *const *entries = NULL;
	int n = weft__registry_entries(&entries);
	if (n < 0)
		return n;
	const struct weft__plugin_entry **cand = calloc(n > 0 ? (size_t)n : 1, sizeof(*cand));
	if (!cand)
		return -ENOMEM;
	int nc = 0;
	for (int i = 0; i < n; i++) {
		const struct weft__plugin_entry *e = entries[i];
		if (e && e->state == WEFT_PLUGIN_LOADED && e->kind == WEFT_PLUGIN_TRANSPORT && e->name && e->ops)
			cand[nc++] = e;
	}
	qsort(cand, (size_t)nc, sizeof(*cand), cmp_entry_name);
	comm->tp = calloc(nc > 0 ? (size_t)nc : 1, sizeof(*comm->tp));
	if (!comm->tp) {
		free(cand);
		return -ENOMEM;
	}
	struct weft_tp_open_args args = {
		.size = sizeof(args),
		.rank = comm->rank,
		.nranks = comm->nranks,
		.comm_tag = weft__bootstrap_tag(comm->bs),
		.local_addr = weft__bootstrap_local_addr(comm->bs),
		.host_id = weft__bootstrap_host_id(comm->bs, comm->rank),
	};
	int rc = 0;
	for (int i = 0; i < nc; i++) {
		const struct weft_transport_ops *ops = cand[i]->ops;
		const char *name = cand[i]->name;
		if (strlen(name) >= WEFT__TP_NAME_MAX) {
			WEFT_WARN("transport '%s': name longer than %d characters; skipped", name,
				  WEFT__TP_NAME_MAX - 1);
			continue;
		}
		if (!WEFT_HAS_OP(ops, struct weft_transport_ops, open) ||
		    !WEFT_HAS_OP(ops, struct weft_transport_ops, close)) {
			WEFT_WARN("transport '%s' has no open/close op; skipped", name);
			continue;
		}
		void *tc = NULL;
		struct weft__sigkeep k;
		weft__sigkeep_save(&k);
		int orc = ops->open(&args, &tc);
		char who[WEFT__TP_NAME_MAX + 32];
		snprintf(who, sizeof(who), "opening transport '%s'", name);
		weft__sigkeep_restore(&k, who);
		if (orc != 0) {
			if (is_required(name)) {
				WEFT_ERROR("transport '%s' is required (core.require) but failed to open: %s", name,
					   weft_strerror(orc));
				rc = orc;
				goto err_close;
			}
			WEFT_INFO("transport '%s' did not open (%s); continuing without it", name, weft_strerror(orc));
			continue;
		}
		struct weft__tp *tp = &comm->tp[comm->ntp];
		snprintf(tp->name, sizeof(tp->name), "%s", name);
		tp->ops = ops;
		tp->tc = tc;
		tp->mem_query_use = -1;
		pthread_mutex_init(&tp->lock, NULL);
		comm->ntp++;
		WEFT_DEBUG("transport '%s' open", name);
	}
	free(cand);
	if (comm->ntp == 0)
		WEFT_WARN("no transport opened for this communicator: only the bootstrap helpers will work");
	return 0;

err_close:
	free(cand);
	close_transports(comm);
	return rc;
}

/* ------------------------------------------------------------ lifecycle */
WEFT_API int weft_comm_create(const struct weft_unique_id *id, int nranks, int rank, weft_comm_t **out)
{
	if (!out) {
		WEFT_ERROR("weft_comm_create: comm out-pointer is NULL");
		return -EINVAL;
	}
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		WEFT_ERROR("weft_comm_create: rank %d of %d is out of range", rank, nranks);
		return -EINVAL;
	}
	weft__log_set_rank(rank);
	int rc = weft__registry_load();
	if (rc != 0)
		return rc;

	weft_comm_t *comm = calloc(1, sizeof(*comm));
	if (!comm)
		return -ENOMEM;
	comm->rank = rank;
	comm->nranks = nranks;
	pthread_mutex_init(&comm->lock, NULL);
	pthread_mutex_init(&comm->port_lock, NULL);
	weft__list_init(&comm->mems);
	weft__list_init(&comm->rmems);
	weft__list_init(&comm->conns);
	weft__list_init(&comm->sems);
	weft__list_init(&comm->rsems);
	weft__list_init(&comm->pools);
	weft__list_init(&comm->ports);
	weft__list_init(&comm->closed);
	comm->pair_seq = calloc((size_t)nranks, sizeof(*comm->pair_seq));
	if (!comm->pair_seq) {
		rc = -ENOMEM;
		goto err_free_comm;
	}

	rc = weft__bootstrap_create(id, nranks, rank, &comm->bs);
	if (rc != 0)
		goto err_free_comm;
	/* Every rank reports its own set-up result to the consistency check, so
	 * that one rank's failure (a required transport missing on its host) or a
	 * configuration that differs fails creation on all of them at once. */
	char err[256] = "";
	int lrc = open_transports(comm);
	if (lrc != 0)
		snprintf(err, sizeof(err), "a transport named in core.require did not open: %s", weft_strerror(lrc));
	else
		lrc = weft__tp_check_required(comm, err, sizeof(err));
	rc = weft__consist_check(comm, lrc, err);
	if (rc != 0)
		goto err_close_transports;
	/* Which peers are joined by NVLink: every rank's GPU facts, gathered
	 * once, for the peer class transport choice uses. */
	rc = weft__topo_comm_attach(comm);
	if (rc != 0)
		goto err_close_transports;
	*out = comm;
	return 0;

err_close_transports:
	close_transports(comm);
	weft__bootstrap_destroy(comm->bs);
err_free_comm:
	free(comm->pair_seq);
	pthread_mutex_destroy(&comm->port_lock);
	pthread_mutex_destroy(&comm->lock);
	free(comm);
	return rc;
}

WEFT_API int weft_comm_create_from_env(weft_comm_t **comm)
{
	int rank = 0, size = 0;
	if (!comm) {
		WEFT_ERROR("weft_comm_create_from_env: comm out-pointer is NULL");
		return -EINVAL;
	}
	int rc = weft__bootstrap_env_rank(&rank, &size);
	if (rc == -ENOENT) {
		WEFT_ERROR("weft_comm_create_from_env: no launcher variables (OMPI_COMM_WORLD_RANK, PMI_RANK, "
			   "SLURM_PROCID or RANK/WORLD_SIZE) are set");
		return rc;
	}
	if (rc != 0)
		return rc;
	return weft_comm_create(NULL, size, rank, comm);
}

/* Releases in reverse order of dependence: collective state, port channels,
 * connections, semaphores, memory, then the transport contexts and the
 * bootstrap. A failed comm skips every flush and wait, so no dead peer is
 * awaited.
 *
 * A peer's last operations toward this rank may complete only while this rank
 * progresses (delivery-complete acknowledgements, target-side landing), and
 * that peer may still be flushing when this rank is done. So every connection
 * is closed two-sided (conn.c): endpoints and transports go only after each
 * connected peer said its side is flushed, or died, or left; meanwhile the
 * proxy thread progresses the transports. */
WEFT_API int weft_comm_destroy(weft_comm_t *comm)
{
	if (!comm)
		return 0;
	weft__log_set_rank(comm->rank);
	/* Algorithm packs release what they made through the primitive API, so
	 * they go first, while connections and memory still work. */
	weft__coll_comm_cleanup(comm);
	weft__port_destroy_all(comm);
	weft__conn_retire_all(comm);
	weft__conn_await_fins(comm);
	weft__proxy_stop(comm);
	weft__conn_close_all(comm);
	weft__sem_destroy_all(comm);
	weft__mem_destroy_all(comm);
	weft__devchan_destroy_all(comm);
	close_transports(comm);
	weft__topo_comm_detach(comm);
	weft__bootstrap_destroy(comm->bs);
	weft__idtab_free(&comm->mem_ids);
	weft__idtab_free(&comm->rmem_ids);
	weft__idtab_free(&comm->rsem_ids);
	free(comm->pair_seq);
	pthread_mutex_destroy(&comm->port_lock);
	pthread_mutex_destroy(&comm->lock);
	free(comm);
	return 0;
}

WEFT_API int weft_comm_abort(weft_comm_t *comm)
{
	if (!comm)
		return -EINVAL;
	weft__bootstrap_fail(comm->bs, -WEFT_ERR_ABORTED);
	/* Kernels poll host-mapped flags, not the bootstrap's state. */
	weft__abort_flags_raise(comm);
	return 0;
}

WEFT_API int weft_comm_rank(const weft_comm_t *comm)
{
	return comm ? comm->rank : -EINVAL;
}

WEFT_API int weft_comm_size(const weft_comm_t *comm)
{
	return comm ? comm->nranks : -EINVAL;
}

WEFT_API int weft_comm_status(const weft_comm_t *comm)
{
	return comm ? weft__bootstrap_status(comm->bs) : -EINVAL;
}

/* ----------------------------------------------------- out-of-band helpers */
WEFT_API int weft_comm_barrier(weft_comm_t *comm)
{
	if (!comm)
		return -EINVAL;
	int rc = weft__progress_hold(comm);
	if (rc != 0)
		return rc;
	rc = weft__bootstrap_barrier(comm->bs);
	weft__progress_release(comm);
	return rc;
}

WEFT_API int weft_comm_allgather(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each)
{
	if (!comm || (bytes_each > 0 && (!mine || !all))) {
		WEFT_ERROR("weft_comm_allgather: NULL argument");
		return -EINVAL;
	}
	int rc = weft__progress_hold(comm);
	if (rc != 0)
		return rc;
	rc = weft__bootstrap_allgather(comm->bs, mine, all, bytes_each);
	weft__progress_release(comm);
	return rc;
}

static int check_p2p(const weft_comm_t *comm, const char *what, int peer, uint32_t tag, const void *buf,
		     size_t len)
{
	if (!comm || (len > 0 && !buf)) {
		WEFT_ERROR("%s: NULL argument", what);
		return -EINVAL;
	}
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		WEFT_ERROR("%s: peer %d is not another rank of this communicator (size %d)", what, peer,
			   comm->nranks);
		return -EINVAL;
	}
	if (tag >= WEFT__TAG_RESERVED) {
		WEFT_ERROR("%s: tag 0x%x is reserved for the core (use tags below 0x%x)", what, tag,
			   WEFT__TAG_RESERVED);
		return -EINVAL;
	}
	return 0;
}

WEFT_API int weft_comm_send(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len)
{
	int rc = check_p2p(comm, "weft_comm_send", peer, tag, buf, len);
	return rc ? rc : weft__bootstrap_send(comm->bs, peer, tag, buf, len);
}

WEFT_API int weft_comm_recv(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len)
{
	int rc = check_p2p(comm, "weft_comm_recv", peer, tag, buf, len);
	if (rc == 0)
		rc = weft__progress_hold(comm);
	if (rc != 0)
		return rc;
	rc = weft__bootstrap_recv(comm->bs, peer, tag, buf, len);
	weft__progress_release(comm);
	return rc;
}
