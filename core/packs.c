/* SPDX-License-Identifier: Apache-2.0 */
/* Packs' side of a communicator beyond the primitive API: the topology they
 * see (weft_algo_comm.peers) and the agreement on every setup's outcome. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "conn.h"
#include "log.h"
#include "packs.h"
#include "progress.h"
#include "topo.h"
#include "tpsel.h"

void weft__pack_topo_free(struct weft__pack_topo *t)
{
	if (!t)
		return;
	free(t->peers);
	free(t->routes);
	free(t->dev_routes);
	memset(t, 0, sizeof(*t));
}

int weft__pack_topo_make(weft_comm_t *comm, struct weft__pack_topo *t)
{
	int n = comm->nranks, ntp = comm->ntp;
	memset(t, 0, sizeof(*t));
	t->peers = calloc((size_t)n, sizeof(*t->peers));
	t->routes = calloc((size_t)n * (size_t)(ntp > 0 ? ntp : 1), sizeof(*t->routes));
	t->dev_routes = calloc((size_t)n * (size_t)(ntp > 0 ? ntp : 1), sizeof(*t->dev_routes));
	struct weft__tp_cand *cand = calloc(ntp > 0 ? (size_t)ntp : 1, sizeof(*cand));
	struct weft__tp_plan *plan = malloc(sizeof(*plan));
	int *host = calloc((size_t)n, sizeof(*host));
	if (!t->peers || !t->routes || !t->dev_routes || !cand || !plan || !host) {
		free(cand);
		free(plan);
		free(host);
		weft__pack_topo_free(t);
		return -ENOMEM;
	}
	for (int i = 0; i < ntp; i++) {
		cand[i].name = comm->tp[i].name;
		cand[i].ops = comm->tp[i].ops;
	}
	/* Hosts are numbered in order of their lowest rank, so every rank numbers
	 * them alike. */
	for (int r = 0; r < n; r++) {
		const char *hr = weft__bootstrap_host_id(comm->bs, r);
		host[r] = -1;
		for (int q = 0; q < r && host[r] < 0; q++) {
			const char *hq = weft__bootstrap_host_id(comm->bs, q);
			if (hr && hq && strcmp(hr, hq) == 0)
				host[r] = host[q];
		}
		if (host[r] < 0)
			host[r] = t->nhosts++;
	}
	for (int r = 0; r < n; r++) {
		struct weft_algo_peer *p = &t->peers[r];
		p->host = host[r];
		for (int q = 0; q < n; q++)
			if (host[q] == host[r]) {
				if (q < r)
					p->local_rank++;
				p->local_size++;
			}
		p->peer_class = r == comm->rank ? WEFT_PEER_SAME_PROCESS : weft__peer_class(comm, r);
		/* Transports see a peer joined by GPU links as same-host; the plan
		 * takes the refined class and the link, as weft_connect's does. */
		struct weft__gpu_link gl = {0};
		if (r != comm->rank)
			weft__topo_gpu_link(comm, r, &gl);
		p->routes = &t->routes[(size_t)r * (size_t)(ntp > 0 ? ntp : 1)];
		if (ntp == 0 || weft__tp_plan(cand, ntp, p->peer_class, WEFT_MEM_HOST, &gl, n, 1, plan) != 0)
			continue;
		struct weft_algo_route *ro = (struct weft_algo_route *)p->routes;
		for (int k = 0; k < plan->n; k++) {
			const struct weft_transport_ops *ops = cand[plan->order[k]].ops;
			ro[k].transport = cand[plan->order[k]].name;
			ro[k].caps = WEFT_HAS_FIELD(ops, struct weft_transport_ops, caps) ? ops->caps : 0;
		}
		p->nroutes = plan->n;
		/* Device memory: only the transports that declare CUDA for this
		 * peer's class (the plan also lists those that cannot reach it). */
		p->dev_routes = &t->dev_routes[(size_t)r * (size_t)(ntp > 0 ? ntp : 1)];
		if (r == comm->rank || weft__tp_plan(cand, ntp, p->peer_class, WEFT_MEM_CUDA, &gl, n, 1, plan) != 0)
			continue;
		struct weft_algo_route *dr = (struct weft_algo_route *)p->dev_routes;
		for (int k = 0; k < plan->n; k++) {
			const struct weft_transport_ops *ops = cand[plan->order[k]].ops;
			struct weft__tp_score sc;
			weft__topo_score(ops, p->peer_class, WEFT_MEM_CUDA, &gl, &sc);
			if (!sc.probed || !sc.reach)
				continue;
			dr[p->ndev_routes].transport = cand[plan->order[k]].name;
			dr[p->ndev_routes++].caps = WEFT_HAS_FIELD(ops, struct weft_transport_ops, caps) ? ops->caps : 0;
		}
	}
	free(cand);
	free(plan);
	free(host);
	return 0;
}

void weft__pack_setup_begin(weft_comm_t *comm)
{
	weft__bootstrap_cancel_begin(comm->bs, WEFT__TAG_SETUP_FAIL);
}

void weft__pack_setup_end(void)
{
	weft__bootstrap_cancel_end();
}

/* One rank's word on one setup. */
struct agree_msg {
	uint32_t seq;
	int32_t rc;
	uint32_t pairs; /* connections the sender made with the receiver so far */
	uint32_t made;  /* its pack's comm_setup ran in this setup and succeeded */
};

static int pack_agree(weft_comm_t *comm, uint32_t seq, int rc, int made, int *agreed, int *who, int *all_made);

/* The agreement blocks in the bootstrap, so the progress thread drives the
 * transports meanwhile: a signal this rank's last call left queued (ucx
 * orders it after a flush) may be what a peer still inside that call waits
 * for, as in every other bootstrap wait of the core. */
int weft__pack_agree(weft_comm_t *comm, uint32_t seq, int rc, int made, int *agreed, int *who, int *all_made)
{
	int brc = weft__progress_hold(comm);
	if (brc != 0)
		return brc;
	brc = pack_agree(comm, seq, rc, made, agreed, who, all_made);
	weft__progress_release(comm);
	return brc;
}

static int pack_agree(weft_comm_t *comm, uint32_t seq, int rc, int made, int *agreed, int *who, int *all_made)
{
	int n = comm->nranks, me = comm->rank, brc = 0;
	struct weft__bootstrap *bs = comm->bs;
	struct agree_msg *all = calloc((size_t)n, sizeof(*all));
	uint64_t *mark = calloc((size_t)n, sizeof(*mark));
	if (!all || !mark) {
		free(all);
		free(mark);
		return -ENOMEM;
	}
	/* A failure is told at once, so that ranks still in their setup and
	 * waiting on this one stop (their bootstrap waits are cancel scopes);
	 * then every rank tells its outcome. Per pair the link keeps order, so a
	 * rank's status arrives after everything its setup sent. */
	if (rc != 0) {
		struct agree_msg f = {.seq = seq, .rc = rc};
		for (int i = 1; i < n && brc == 0; i++)
			brc = weft__bootstrap_send(bs, (me + i) % n, WEFT__TAG_SETUP_FAIL, &f, sizeof(f));
	}
	for (int i = 1; i < n && brc == 0; i++) {
		int to = (me + i) % n;
		pthread_mutex_lock(&comm->lock);
		struct agree_msg m = {.seq = seq, .rc = rc, .pairs = comm->pair_seq[to], .made = made != 0};
		pthread_mutex_unlock(&comm->lock);
		brc = weft__bootstrap_send(bs, to, WEFT__TAG_SETUP_STATUS, &m, sizeof(m));
	}
	all[me].seq = seq;
	all[me].rc = rc;
	all[me].made = made != 0;
	for (int i = 1; i < n && brc == 0; i++) {
		int from = (me - i + n) % n;
		brc = weft__bootstrap_recv_mark(bs, from, WEFT__TAG_SETUP_STATUS, &all[from], sizeof(all[from]),
						&mark[from]);
		if (brc == 0 && all[from].seq != seq) {
			WEFT_ERROR("setup agreement: rank %d answered for setup #%u, this rank is at #%u (ranks run "
				   "different collectives)",
				   from, all[from].seq, seq);
			brc = -WEFT_ERR_MISMATCH;
		}
	}
	if (brc != 0) {
		free(all);
		free(mark);
		return brc;
	}
	/* The first rank that failed by itself names the cause; a cancelled
	 * rank only followed it. */
	int first = -1;
	for (int r = 0; r < n; r++)
		if (all[r].rc != 0 && (first < 0 || (all[first].rc == -ECANCELED && all[r].rc != -ECANCELED)))
			first = r;
	if (first >= 0) {
		for (int r = 0; r < n; r++) {
			if (r == me)
				continue;
			int dropped = weft__bootstrap_purge(bs, r, mark[r], WEFT__TAG_FIN_BASE,
							    WEFT__TAG_FIN_BASE + WEFT__TAG_FIN_RANGE);
			if (dropped > 0)
				WEFT_DEBUG("setup agreement: dropped %d unread message(s) from rank %d", dropped, r);
			weft__conn_pair_resync(comm, r, all[r].pairs);
		}
	}
	int every = 1;
	for (int r = 0; r < n; r++)
		every &= all[r].made != 0;
	*all_made = every;
	*agreed = first >= 0 ? all[first].rc : 0;
	*who = first;
	free(all);
	free(mark);
	return 0;
}
