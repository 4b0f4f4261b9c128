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
#include "callsig.h"
#include "status.h"
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
#include "window.h"
#include "tpsel.h"
#include "sigkeep.h"
#include "handles.h"

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
		if (orc == -WEFT_ERR_CONFIG) {
			WEFT_ERROR("transport '%s' refused its configuration (see above); a value that is set must be "
				   "honoured, not skipped",
				   name);
			rc = orc;
			goto err_close;
		}
		if (orc != 0) {
			if (is_required(name)) {
				WEFT_ERROR("transport '%s' is required (core.require) but failed to open: %s", name,
					   weft_strerror(orc));
				rc = orc;
				goto err_close;
			}
			WEFT_INFO("transport '%s' did not open (%s); continuing without it", name, weft_strerror(orc));
			if (comm->ntp_failed < (int)(sizeof(comm->tp_failed) / sizeof(comm->tp_failed[0]))) {
				snprintf(comm->tp_failed[comm->ntp_failed].name, WEFT__TP_NAME_MAX, "%s", name);
				comm->tp_failed[comm->ntp_failed++].rc = orc;
			}
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
	/* An explicit value that cannot be honoured fails here, not when (or
	 * whether) its owner reads it. */
	rc = weft__config_check_values();
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
	if (!comm->pair_seq || weft__callsig_init(comm) != 0) {
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
	rc = weft__comm_live_add(comm);
	if (rc != 0) {
		weft__topo_comm_detach(comm);
		goto err_close_transports;
	}
	weft__status_start();
	*out = comm;
	return 0;

err_close_transports:
	close_transports(comm);
	weft__bootstrap_destroy(comm->bs);
err_free_comm:
	free(comm->pair_seq);
	weft__callsig_free(comm);
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
	/* A destroyed handle fails here, before anything is read through it; so
	 * does a communicator another thread is inside a call on. */
	int rc = weft__comm_enter(comm, "weft_comm_destroy");
	if (rc != 0)
		return rc;
	weft__comm_live_remove(comm);
	weft__log_set_rank(comm->rank);
	/* Peers still waiting for this rank in a call it never made fail that
	 * call now, rather than wait for ever. */
	weft__bootstrap_leaving(comm->bs);
	/* Algorithm packs release what they made through the primitive API, so
	 * they go first, while connections and memory still work. */
	weft__window_free_all(comm);
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
	weft__callsig_free(comm);
	pthread_mutex_destroy(&comm->port_lock);
	pthread_mutex_destroy(&comm->lock);
	free(comm);
	return 0;
}

/* Abort is meant for another thread than the one blocked in a call, so it
 * checks the handle but claims nothing. */
WEFT_API int weft_comm_abort(weft_comm_t *comm)
{
	int rc = weft__comm_check(comm, "weft_comm_abort");
	if (rc != 0)
		return rc;
	weft__bootstrap_fail(comm->bs, -WEFT_ERR_ABORTED);
	/* Kernels poll host-mapped flags, not the bootstrap's state. */
	weft__abort_flags_raise(comm);
	return 0;
}

/* Queries read what does not change, or the bootstrap's atomic state: any
 * thread may ask, only the handle is checked. */
WEFT_API int weft_comm_rank(const weft_comm_t *comm)
{
	int rc = weft__comm_check(comm, "weft_comm_rank");
	return rc ? rc : comm->rank;
}

WEFT_API int weft_comm_size(const weft_comm_t *comm)
{
	int rc = weft__comm_check(comm, "weft_comm_size");
	return rc ? rc : comm->nranks;
}

WEFT_API int weft_comm_status(const weft_comm_t *comm)
{
	int rc = weft__comm_check(comm, "weft_comm_status");
	return rc ? rc : weft__bootstrap_status(comm->bs);
}

/* ----------------------------------------------------- out-of-band helpers */
int weft__comm_barrier(weft_comm_t *comm)
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

int weft__comm_allgather(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each)
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

int weft__comm_send(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len)
{
	int rc = check_p2p(comm, "weft_comm_send", peer, tag, buf, len);
	return rc ? rc : weft__bootstrap_send(comm->bs, peer, tag, buf, len);
}

int weft__comm_recv(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len)
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

/* ------------------------------------------------ public, checked entries */
/* Each checks the handle and claims the communicator (handles.h) around its
 * unchecked twin, which the core and the plugins' primitive API call. */
#define CHECKED_CALL(fn, comm, call)                         \
	do {                                                 \
		int rc_ = weft__comm_enter((comm), fn);      \
		if (rc_ != 0)                                \
			return rc_;                          \
		rc_ = (call);                                \
		return weft__comm_leave(comm, rc_);          \
	} while (0)

WEFT_API int weft_comm_barrier(weft_comm_t *comm)
{
	CHECKED_CALL("weft_comm_barrier", comm, weft__comm_barrier(comm));
}

WEFT_API int weft_comm_allgather(weft_comm_t *comm, const void *mine, void *all, size_t bytes_each)
{
	CHECKED_CALL("weft_comm_allgather", comm, weft__comm_allgather(comm, mine, all, bytes_each));
}

WEFT_API int weft_comm_send(weft_comm_t *comm, int peer, uint32_t tag, const void *buf, size_t len)
{
	CHECKED_CALL("weft_comm_send", comm, weft__comm_send(comm, peer, tag, buf, len));
}

WEFT_API int weft_comm_recv(weft_comm_t *comm, int peer, uint32_t tag, void *buf, size_t len)
{
	CHECKED_CALL("weft_comm_recv", comm, weft__comm_recv(comm, peer, tag, buf, len));
}

WEFT_API int weft_connect_mem(weft_comm_t *comm, int peer, const char *transport, enum weft_mem_type mem,
			      weft_conn_t **conn)
{
	CHECKED_CALL("weft_connect_mem", comm, weft__connect_mem(comm, peer, transport, mem, conn));
}

WEFT_API int weft_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn)
{
	CHECKED_CALL("weft_connect", comm, weft__connect(comm, peer, transport, conn));
}

WEFT_API int weft_mem_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, weft_mem_t **mem)
{
	CHECKED_CALL("weft_mem_register", comm, weft__mem_register_user(comm, ptr, len, type, mem));
}

WEFT_API int weft_mem_import(weft_comm_t *comm, int peer, const void *buf, size_t len, weft_rmem_t **rmem)
{
	CHECKED_CALL("weft_mem_import", comm, weft__mem_import_user(comm, peer, buf, len, rmem));
}

WEFT_API int weft_sem_create(weft_comm_t *comm, weft_sem_t **sem)
{
	CHECKED_CALL("weft_sem_create", comm, weft__sem_create(comm, sem));
}

WEFT_API int weft_sem_create_on(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **sem)
{
	CHECKED_CALL("weft_sem_create_on", comm, weft__sem_create_on(comm, type, sem));
}

WEFT_API int weft_mem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr)
{
	CHECKED_CALL("weft_mem_alloc", comm, weft__buf_alloc(comm, type, bytes, ptr));
}

/* NULL is accepted, as by free(), for any comm the caller holds. */
WEFT_API int weft_mem_free(weft_comm_t *comm, void *ptr)
{
	CHECKED_CALL("weft_mem_free", comm, weft__buf_free(comm, ptr));
}
