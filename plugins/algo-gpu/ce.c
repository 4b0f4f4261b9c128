/* SPDX-License-Identifier: Apache-2.0 */
/* algo-gpu: the schedules on the callers' own buffers. Every rank's user
 * buffers are registered and swapped once per distinct set of buffers (a
 * "signature", kept in a small cache identical on every rank). Then either
 * the copy engines move the data (cudaMemcpyAsync between this GPU and the
 * peers' buffers mapped here, on side streams forked from the caller's stream
 * and joined back, so a call can be captured in a CUDA graph; kernels only
 * bracket a call with two barriers and reduce the chunks the engines pulled
 * in), or one direct kernel reads and writes the peers' buffers itself. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"

/* Signatures kept per communicator; the least recently used one beyond this
 * is released (one used inside a graph capture is kept until the end). */
#define CE_CACHE 8
/* Pipeline depth of the allreduce and reduce-scatter (chunks in flight). */
#define CE_DEPTH 4

/* What one rank says about its buffers for one call. */
struct ce_rec {
	uint64_t in, out, in_len, out_len, in_id, out_id;
	uint32_t ok;        /* both buffers can be mapped by the peers */
	uint32_t capturing; /* the call is being captured into a graph */
	uint64_t call;      /* the call's signature (weft_coll_args.sig), compared here */
};

/* One set of buffers of every rank, mapped here. */
struct ce_sig {
	struct ce_sig *next;
	struct ce_rec rec[WAG_MAX_RANKS];
	weft_mem_t *min, *mout;
	weft_rmem_t *rin[WAG_MAX_RANKS], *rout[WAG_MAX_RANKS];
	char *pin[WAG_MAX_RANKS], *pout[WAG_MAX_RANKS];
	void *done;  /* recorded after the last call that used it (not captured) */
	int pinned;  /* used by a captured graph: kept until the comm ends */
	uint64_t used;
};

struct wag_ce {
	struct ce_sig *sigs;
	int nsigs;
	uint64_t calls;
	void *side[2];
	void *ev_fork, *ev_join;
	void *ev_pull[CE_DEPTH], *ev_red[CE_DEPTH];
	struct ce_sig *wsig; /* the calls in windows (win_sig), refilled per call */
};

static void sig_free(struct wag_ctx *c, struct ce_sig *g)
{
	const struct weft_prim_api *p = c->prim;
	char err[256];
	if (g->done) {
		/* The last call using these mappings must be over before they go. */
		if (wag_cuda_event_sync(g->done, err, sizeof(err)))
			WAG_LOG(WEFT_LOG_WARN, "releasing user-buffer mappings: %s", err);
		wag_cuda_event_free(g->done);
	}
	for (int q = 0; q < c->nranks; q++) {
		if (g->rin[q])
			p->rmem_release(g->rin[q]);
		if (g->rout[q])
			p->rmem_release(g->rout[q]);
	}
	if (g->min)
		p->mem_deregister(g->min);
	if (g->mout)
		p->mem_deregister(g->mout);
	free(g);
}

void wag_ce_free(struct wag_ctx *c)
{
	struct wag_ce *e = c->ce;
	if (!e)
		return;
	while (e->sigs) {
		struct ce_sig *g = e->sigs;
		e->sigs = g->next;
		sig_free(c, g);
	}
	if (e->wsig)
		sig_free(c, e->wsig);
	for (int i = 0; i < 2; i++)
		wag_cuda_stream_free(e->side[i]);
	wag_cuda_event_free(e->ev_fork);
	wag_cuda_event_free(e->ev_join);
	for (int i = 0; i < CE_DEPTH; i++) {
		wag_cuda_event_free(e->ev_pull[i]);
		wag_cuda_event_free(e->ev_red[i]);
	}
	free(e);
	c->ce = NULL;
}

static int ce_state(struct wag_ctx *c, char *err, size_t errlen)
{
	if (c->ce)
		return 0;
	struct wag_ce *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	c->ce = e;
	int rc = 0;
	for (int i = 0; i < 2 && !rc; i++)
		rc = wag_cuda_stream_new(&e->side[i], err, errlen);
	if (!rc)
		rc = wag_cuda_event_new(&e->ev_fork, err, errlen);
	if (!rc)
		rc = wag_cuda_event_new(&e->ev_join, err, errlen);
	for (int i = 0; i < CE_DEPTH && !rc; i++)
		if (!(rc = wag_cuda_event_new(&e->ev_pull[i], err, errlen)))
			rc = wag_cuda_event_new(&e->ev_red[i], err, errlen);
	if (rc)
		wag_ce_free(c);
	return rc;
}

static int same_buffers(const struct ce_rec *a, const struct ce_rec *b, int n)
{
	for (int q = 0; q < n; q++)
		if (a[q].in != b[q].in || a[q].out != b[q].out || a[q].in_len != b[q].in_len ||
		    a[q].out_len != b[q].out_len || a[q].in_id != b[q].in_id || a[q].out_id != b[q].out_id)
			return 0;
	return 1;
}

/* Swaps this rank's registered buffers (g->min, g->mout) with every peer,
 * pairs in ascending (low, high) order as the setup does. Each side sends
 * before it maps, and a rank that cannot map one peer's buffers still swaps
 * with the rest, so a failure here never leaves a peer waiting; the ranks
 * then agree on the outcome (sig_attach). */
static int sig_map(struct wag_ctx *c, struct ce_sig *g)
{
	const struct weft_prim_api *p = c->prim;
	const struct ce_rec *me = &g->rec[c->rank];
	int rc = 0;
	g->pin[c->rank] = (char *)(uintptr_t)me->in;
	g->pout[c->rank] = (char *)(uintptr_t)me->out;
	for (int lo = 0; lo < c->nranks; lo++)
		for (int hi = lo + 1; hi < c->nranks; hi++) {
			if (c->rank != lo && c->rank != hi)
				continue;
			int q = c->rank == lo ? hi : lo, r;
			void *pi = NULL, *po = NULL;
			weft_conn_t *conn = c->peers[q].conn;
			if ((r = p->mem_exchange(g->min, q, &g->rin[q])) || (r = p->mem_exchange(g->mout, q, &g->rout[q])) ||
			    (r = p->rmem_device_ptr(conn, g->rin[q], &pi)) || (r = p->rmem_device_ptr(conn, g->rout[q], &po))) {
				WAG_LOG(WEFT_LOG_DEBUG, "cannot map rank %d's buffers of this call: %s", q, wag_errname(r));
				rc = rc ? rc : r;
				continue;
			}
			g->pin[q] = pi;
			g->pout[q] = po;
		}
	return rc;
}

static void sig_unlink(struct wag_ctx *c, struct ce_sig *g)
{
	for (struct ce_sig **pp = &c->ce->sigs; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			c->ce->nsigs--;
			return;
		}
}

static int capturing_any(const struct ce_rec *all, int n)
{
	for (int q = 0; q < n; q++)
		if (all[q].capturing)
			return 1;
	return 0;
}

/* The signature of the gathered records (new, unmapped, when none matches);
 * NULL when some rank cannot take part. The same on every rank. */
static int sig_find(struct wag_ctx *c, const struct ce_rec *all, struct ce_sig **out)
{
	struct wag_ce *e = c->ce;
	int ok = 1, capt = capturing_any(all, c->nranks);
	for (int q = 0; q < c->nranks; q++)
		ok &= all[q].ok != 0;
	e->calls++;
	if (!ok) {
		*out = NULL;
		return 0;
	}
	struct ce_sig *g;
	for (g = e->sigs; g; g = g->next)
		if (same_buffers(g->rec, all, c->nranks))
			break;
	if (!g) {
		/* No eviction while a graph is captured: releasing waits for the
		 * device, which a global-mode capture forbids. */
		if (e->nsigs >= CE_CACHE && !capt) {
			/* The least recently used, not pinned: the same on every rank. */
			struct ce_sig **victim = NULL;
			for (struct ce_sig **pp = &e->sigs; *pp; pp = &(*pp)->next)
				if (!(*pp)->pinned && (!victim || (*pp)->used < (*victim)->used))
					victim = pp;
			if (victim) {
				struct ce_sig *v = *victim;
				*victim = v->next;
				sig_free(c, v);
				e->nsigs--;
			}
		}
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		memcpy(g->rec, all, sizeof(all[0]) * (size_t)c->nranks);
		g->next = e->sigs;
		e->sigs = g;
		e->nsigs++;
	}
	g->used = e->calls;
	g->pinned |= capt;
	*out = g;
	return 0;
}

/* Every rank's yes/no: *all = 1 when every rank said yes. */
static int agree(struct wag_ctx *c, int yes, int *all)
{
	int32_t mine = yes != 0, v[WAG_MAX_RANKS];
	int rc = c->prim->comm_allgather(c->comm, &mine, v, sizeof(mine));
	if (rc) {
		WAG_LOG(WEFT_LOG_ERROR, "cannot gather the ranks' mapping results: %s", wag_errname(rc));
		return rc;
	}
	*all = 1;
	for (int q = 0; q < c->nranks; q++)
		*all &= v[q] != 0;
	return 0;
}

/* Gives the new signature g this rank's registrations (made here when *min,
 * *mout are NULL) and maps every peer's; *ok = 1 when every rank mapped all
 * of its peers. Otherwise g is released on every rank. */
static int sig_attach(struct wag_ctx *c, struct ce_sig *g, weft_mem_t **min, weft_mem_t **mout, int *ok)
{
	const struct weft_prim_api *p = c->prim;
	const struct ce_rec *me = &g->rec[c->rank];
	int rc = 0, fresh = !*min || !*mout;
	if (!*min)
		rc = p->mem_register(c->comm, (void *)(uintptr_t)me->in, me->in_len, WEFT_MEM_CUDA, min);
	if (!rc && !*mout)
		rc = p->mem_register(c->comm, (void *)(uintptr_t)me->out, me->out_len, WEFT_MEM_CUDA, mout);
	g->min = *min;
	g->mout = *mout;
	*min = *mout = NULL;
	/* Registered here (a retry): every rank must have both before any swaps. */
	if (fresh && ((rc = agree(c, rc == 0, ok)) || !*ok))
		goto drop;
	if ((rc = agree(c, sig_map(c, g) == 0, ok)) || !*ok)
		goto drop;
	return 0;
drop:
	sig_unlink(c, g);
	sig_free(c, g);
	return rc;
}

/* Releases every signature no captured graph uses (the same on every rank),
 * so that the mappings of buffers since freed go; the number released. */
static int evict_idle(struct wag_ctx *c)
{
	int n = 0;
	for (struct ce_sig **pp = &c->ce->sigs; *pp;) {
		struct ce_sig *g = *pp;
		if (g->pinned) {
			pp = &g->next;
			continue;
		}
		*pp = g->next;
		c->ce->nsigs--;
		sig_free(c, g);
		n++;
	}
	return n;
}

/* The copy-engine kind whose buffers a direct kind uses (itself otherwise). */
static enum wag_kind ce_twin(enum wag_kind k)
{
	switch (k) {
	case WAG_AR_DIRECT:
		return WAG_AR_CE;
	case WAG_RS_DIRECT:
		return WAG_RS_CE;
	case WAG_AG_DIRECT:
		return WAG_AG_CE;
	case WAG_BC_DIRECT:
		return WAG_BC_CE;
	case WAG_A2A_DIRECT:
		return WAG_A2A_CE;
	default:
		return k;
	}
}

void wag_ce_quiesce(struct wag_ctx *c)
{
	struct ce_sig *g = c->ce ? c->ce->wsig : NULL;
	char err[256];
	if (g && g->done && wag_cuda_event_sync(g->done, err, sizeof(err)))
		WAG_LOG(WEFT_LOG_WARN, "releasing a window's mappings: %s", err);
}

/* A call whose buffers lie in windows (weft_coll_args.send_win/recv_win):
 * the peers' buffers are their mapped parts at this rank's offsets, which
 * the call's signature makes the same on every rank, so no swap is needed.
 * *out NULL (and 0) where the call takes the usual path: the same on every
 * rank, as it rests on the signature and the ranks' agreed mappings. */
static int win_sig(struct wag_ctx *c, const struct weft_coll_args *a, enum wag_kind k, uint64_t in_len,
		   uint64_t out_len, int capturing, struct ce_sig **out)
{
	char *pin[WAG_MAX_RANKS], *pout[WAG_MAX_RANKS];
	int rc;
	*out = NULL;
	if (a->size < offsetof(struct weft_coll_args, recv_off) + sizeof(a->recv_off) || !a->send_win ||
	    !a->recv_win || k == WAG_BC_CE ||
	    (k == WAG_A2A_CE && a->send_win == a->recv_win && a->send_off < a->recv_off + out_len &&
	     a->recv_off < a->send_off + in_len))
		return 0;
	if ((rc = wag_win_parts(c, a->send_win, pin)) || (rc = wag_win_parts(c, a->recv_win, pout)))
		return rc == -ENOENT ? 0 : rc;
	struct wag_ce *e = c->ce;
	if (!e->wsig && !(e->wsig = calloc(1, sizeof(*e->wsig))))
		return -ENOMEM;
	struct ce_sig *g = e->wsig;
	for (int q = 0; q < c->nranks; q++) {
		g->pin[q] = pin[q] + a->send_off;
		g->pout[q] = pout[q] + a->recv_off;
		g->rec[q] = (struct ce_rec){.in = (uintptr_t)g->pin[q], .out = (uintptr_t)g->pout[q], .in_len = in_len,
					    .out_len = out_len, .ok = 1, .capturing = (uint32_t)capturing};
	}
	*out = g;
	return 0;
}

/* Finds or makes the signature of this call's buffers; *g NULL (and 0) when
 * some rank's buffers cannot be shared: the call then falls back. Every rank
 * takes the same path: the decision rests on the records all ranks gathered. */
static int sig_get(struct wag_ctx *c, const struct weft_coll_args *a, uint64_t in_len, uint64_t out_len,
		   int capturing, enum wag_kind k, struct ce_sig **out)
{
	const struct weft_prim_api *p = c->prim;
	k = ce_twin(k);
	struct ce_sig *w = NULL;
	int wrc = win_sig(c, a, k, in_len, out_len, capturing, &w);
	if (wrc || w) {
		*out = w;
		return wrc;
	}
	/* A broadcast's non-roots only receive: their send buffer may be anything. */
	const void *in = k == WAG_BC_CE && c->rank != a->root ? a->recvbuf : a->sendbuf;
	if (k == WAG_BC_CE && c->rank != a->root)
		in_len = out_len;
	struct ce_rec mine = {.in = (uintptr_t)in, .out = (uintptr_t)a->recvbuf, .in_len = in_len,
			      .out_len = out_len, .ok = 1, .capturing = (uint32_t)capturing, .call = wag_call_sig(a)};
	int sh_in = 0, sh_out = 0;
	if (wag_cuda_buffer(in, &mine.in_id, &sh_in) || wag_cuda_buffer(a->recvbuf, &mine.out_id, &sh_out) ||
	    !sh_in || !sh_out)
		mine.ok = 0;
	/* In-place alltoall: a peer's copy into this rank's buffer would land
	 * on data this rank still has to send. */
	if (k == WAG_A2A_CE && mine.in < mine.out + out_len && mine.out < mine.in + in_len)
		mine.ok = 0;
	/* Registered before the ranks decide, so that a buffer nvlink cannot
	 * export makes every rank fall back rather than leave a peer waiting
	 * for a swap. Cheap when the allocation is exported already. */
	weft_mem_t *min = NULL, *mout = NULL;
	int rc = 0;
	if (mine.ok && ((rc = p->mem_register(c->comm, (void *)(uintptr_t)in, in_len, WEFT_MEM_CUDA, &min)) ||
			(rc = p->mem_register(c->comm, a->recvbuf, out_len, WEFT_MEM_CUDA, &mout)))) {
		WAG_LOG(WEFT_LOG_DEBUG, "the buffers of this call cannot be registered for the copy engines: %s",
			wag_errname(rc));
		mine.ok = 0;
	}
	struct ce_rec all[WAG_MAX_RANKS];
	rc = p->comm_allgather(c->comm, &mine, all, sizeof(mine));
	if (rc)
		WAG_LOG(WEFT_LOG_ERROR, "cannot gather the ranks' buffers: %s", wag_errname(rc));
	/* The records carry the calls' signatures: every rank sees every
	 * difference, so all fail this call together. */
	for (int q = 0; rc == 0 && mine.call && q < c->nranks; q++)
		if (all[q].call && all[q].call != mine.call) {
			wag_sig_report(c, q, mine.call, all[q].call);
			rc = -WEFT_ERR_MISMATCH;
		}
	struct ce_sig *g = NULL;
	rc = rc ? rc : sig_find(c, all, &g);
	if (rc == 0 && g && !g->min) {
		/* New: it keeps these registrations and maps the peers'. A mapping
		 * can fail where an earlier one of memory since freed and reused
		 * still holds its place (CUDA maps an IPC allocation once per
		 * process: "already mapped"): the idle signatures then go and the
		 * ranks try once more, and fall back together if that fails too. */
		int ok = 0;
		rc = sig_attach(c, g, &min, &mout, &ok);
		if (rc == 0 && !ok && !capturing_any(all, c->nranks) && evict_idle(c) > 0 &&
		    (rc = sig_find(c, all, &g)) == 0) {
			rc = sig_attach(c, g, &min, &mout, &ok);
		}
		if (rc == 0 && !ok) {
			WAG_LOG(WEFT_LOG_DEBUG, "some rank cannot map its peers' buffers of this call: staging instead");
			g = NULL;
		}
		if (rc)
			g = NULL;
	}
	if (min)
		p->mem_deregister(min);
	if (mout)
		p->mem_deregister(mout);
	if (rc == 0)
		*out = g;
	return rc;
}

/* The chunk of the pipelined schedules: a multiple of 64K, at most ce_chunk,
 * about an eighth of this rank's block, and CE_DEPTH of them per peer must
 * fit the one-shot area the pulls land in (0: it does not). */
static uint64_t chunk_of(const struct wag_ctx *c, uint64_t block, uint32_t *depth)
{
	const uint64_t g = 64 << 10;
	uint64_t area = 2ull * (uint64_t)c->nranks * c->lay.os_slot, per = (uint64_t)(c->nranks - 1);
	uint64_t ch = block / 8 / g * g;
	if (ch < (1 << 20))
		ch = 1 << 20;
	if (ch > wag_cfg.ce_chunk)
		ch = wag_cfg.ce_chunk;
	uint32_t d = CE_DEPTH;
	while (d >= 2 && ch * per * d > area) {
		if (ch > g)
			ch = (ch / 2 + g - 1) / g * g;
		else
			d--;
	}
	*depth = d;
	return d >= 2 ? ch : 0;
}

#define CK(call)                  \
	do {                      \
		if ((rc = (call))) \
			goto out;  \
	} while (0)

/* Pushes this rank's piece into every peer's output (allgather, broadcast,
 * alltoall): the side stream moves to the peers while the caller's stream
 * copies the own piece, if it is not in place. */
static int ce_push(struct wag_ctx *c, struct ce_sig *g, const struct weft_coll_args *a, enum wag_kind k,
		   uint64_t block, char *err, size_t errlen)
{
	struct wag_ce *e = c->ce;
	void *s = a->stream;
	int me = c->rank, rc = 0;
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	int sends = k != WAG_BC_CE || me == a->root;
	if (!sends)
		return 0;
	CK(wag_cuda_record(e->ev_fork, s, err, errlen));
	CK(wag_cuda_wait(e->side[0], e->ev_fork, err, errlen));
	for (int i = 1; i < c->nranks; i++) {
		int q = (me + i) % c->nranks;
		const char *src = k == WAG_A2A_CE ? in + (uint64_t)q * block : in;
		char *dst = g->pout[q] + (k == WAG_BC_CE ? 0 : (uint64_t)me * block);
		CK(wag_cuda_copy(dst, src, block, e->side[0], err, errlen));
	}
	{
		const char *src = k == WAG_A2A_CE ? in + (uint64_t)me * block : in;
		char *dst = out + (k == WAG_BC_CE ? 0 : (uint64_t)me * block);
		if (dst != src)
			CK(wag_cuda_copy(dst, src, block, s, err, errlen));
	}
	CK(wag_cuda_record(e->ev_join, e->side[0], err, errlen));
	CK(wag_cuda_wait(s, e->ev_join, err, errlen));
out:
	return rc;
}

/* The reduction of one chunk (ka's sources set) into dst: a block per 256K,
 * at most cap blocks. */
static int launch_reduce(const struct wag_ctx *c, struct wag_kargs *ka, char *dst, uint64_t len, uint64_t cap,
			 void *s, char *err, size_t errlen)
{
	ka->red.dst = dst;
	ka->red.count = len / wag_esize(ka->dtype);
	uintptr_t al = (uintptr_t)dst;
	for (int q = 0; q < c->nranks; q++)
		al |= (uintptr_t)ka->red.src[q];
	ka->red.vec = (al & 15) == 0;
	uint64_t nb = (len + (256 << 10) - 1) / (256 << 10);
	ka->nblocks = (uint32_t)(nb < cap ? nb : cap);
	if (ka->nblocks == 0)
		ka->nblocks = 1;
	return wag_launch_ce_reduce(ka, s, err, errlen);
}

/* Reduce-scatter, and allreduce as reduce-scatter + push: this rank's block
 * is pulled chunk by chunk from every peer's input into the one-shot area
 * (side stream 0), reduced with its own input on the caller's stream, and for
 * allreduce pushed into every peer's output (side stream 1), CE_DEPTH chunks
 * in flight. */
static int ce_reduce(struct wag_ctx *c, struct ce_sig *g, const struct weft_coll_args *a, enum wag_kind k,
		     uint64_t boff, uint64_t blen, uint64_t ch, uint32_t depth, char *err, size_t errlen)
{
	struct wag_ce *e = c->ce;
	void *s = a->stream;
	int me = c->rank, n = c->nranks, rc = 0;
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	char *dst_base = k == WAG_AR_CE ? out + boff : out;
	char *stage = (char *)c->scratch + c->lay.os;
	int ar = k == WAG_AR_CE;
	CK(wag_cuda_record(e->ev_fork, s, err, errlen));
	CK(wag_cuda_wait(e->side[0], e->ev_fork, err, errlen));
	if (ar)
		CK(wag_cuda_wait(e->side[1], e->ev_fork, err, errlen));
	uint64_t nch = (blen + ch - 1) / ch;
	for (uint64_t i = 0; i < nch; i++) {
		uint32_t j = (uint32_t)(i % depth);
		uint64_t off = i * ch, len = blen - off < ch ? blen - off : ch;
		char *slot = stage + (uint64_t)j * (uint64_t)(n - 1) * ch;
		if (i >= depth)
			CK(wag_cuda_wait(e->side[0], e->ev_red[j], err, errlen));
		struct wag_kargs ka = c->base;
		ka.dtype = (int)a->dtype;
		ka.op = (int)a->op;
		int qi = 0;
		for (int q = 0; q < n; q++) {
			if (q == me) {
				ka.red.src[q] = in + boff + off;
				continue;
			}
			char *sl = slot + (uint64_t)qi++ * ch;
			CK(wag_cuda_copy(sl, g->pin[q] + boff + off, len, e->side[0], err, errlen));
			ka.red.src[q] = sl;
		}
		CK(wag_cuda_record(e->ev_pull[j], e->side[0], err, errlen));
		CK(wag_cuda_wait(s, e->ev_pull[j], err, errlen));
		ka.red.seq = 0;
		CK(launch_reduce(c, &ka, dst_base + off, len, (uint64_t)c->sms, s, err, errlen));
		CK(wag_cuda_record(e->ev_red[j], s, err, errlen));
		if (ar) {
			CK(wag_cuda_wait(e->side[1], e->ev_red[j], err, errlen));
			for (int t = 1; t < n; t++) {
				int q = (me + t) % n;
				CK(wag_cuda_copy(g->pout[q] + boff + off, out + boff + off, len, e->side[1], err, errlen));
			}
		}
	}
	if (ar) {
		CK(wag_cuda_record(e->ev_join, e->side[1], err, errlen));
		CK(wag_cuda_wait(s, e->ev_join, err, errlen));
	}
out:
	return rc;
}

/* Allreduce on two ranks by pushes only: each rank's copy engine pushes the
 * peer's block of its input, chunk by chunk, into the peer's output, where the
 * peer's result goes (side stream 0; a one-thread kernel flags each chunk);
 * the peer reduces each chunk into place with its own input as it lands (the
 * caller's stream; the kernel waits for the flag), and its copy engine pushes
 * the result into this rank's output (side stream 1). Every transfer is a
 * write over the link, as in allgather-ce; the output doubles as the staging
 * area, which more ranks would share, so they keep the pulling schedule. */
static int ce_allreduce_push(struct wag_ctx *c, struct ce_sig *g, const struct weft_coll_args *a, uint64_t boff,
			     uint64_t blen, uint64_t ch, char *err, size_t errlen)
{
	struct wag_ce *e = c->ce;
	void *s = a->stream;
	int me = c->rank, peer = (me + 1) % c->nranks, rc = 0;
	size_t es = wag_esize(a->dtype);
	uint64_t al = 16 / es ? 16 / es : 1, o, l;
	const char *in = a->sendbuf;
	char *out = a->recvbuf;
	CK(wag_cuda_record(e->ev_fork, s, err, errlen));
	CK(wag_cuda_wait(e->side[0], e->ev_fork, err, errlen));
	CK(wag_cuda_wait(e->side[1], e->ev_fork, err, errlen));
	/* The peer's block, pushed: chunk i is flagged i + 1. */
	wag_block(a->count, c->nranks, peer, al, &o, &l);
	uint64_t poff = o * es, plen = l * es;
	struct wag_kargs ks = c->base;
	ks.red.peer = peer;
	for (uint64_t i = 0, off = 0; off < plen; i++, off += ch) {
		uint64_t len = plen - off < ch ? plen - off : ch;
		CK(wag_cuda_copy(g->pout[peer] + poff + off, in + poff + off, len, e->side[0], err, errlen));
		ks.red.seq = i + 1;
		CK(wag_launch_ce_signal(&ks, e->side[0], err, errlen));
	}
	/* This rank's block, reduced in place as the peer's chunks land. */
	struct wag_kargs ka = c->base;
	ka.dtype = (int)a->dtype;
	ka.op = (int)a->op;
	for (uint64_t i = 0, off = 0; off < blen; i++, off += ch) {
		uint64_t len = blen - off < ch ? blen - off : ch;
		uint32_t j = (uint32_t)(i % CE_DEPTH);
		ka.red.src[me] = in + boff + off;
		ka.red.src[peer] = out + boff + off;
		ka.red.seq = i + 1;
		/* Its blocks wait for the peer's chunk: half the multiprocessors
		 * at most leaves room for the signal kernels of ranks sharing
		 * this GPU. */
		CK(launch_reduce(c, &ka, out + boff + off, len, c->sms >= 2 ? (uint64_t)c->sms / 2 : 1, s, err,
				 errlen));
		CK(wag_cuda_record(e->ev_red[j], s, err, errlen));
		CK(wag_cuda_wait(e->side[1], e->ev_red[j], err, errlen));
		CK(wag_cuda_copy(g->pout[peer] + boff + off, out + boff + off, len, e->side[1], err, errlen));
	}
	CK(wag_cuda_record(e->ev_join, e->side[1], err, errlen));
	CK(wag_cuda_wait(s, e->ev_join, err, errlen));
	/* Side stream 0 joins too (this schedule pulls nothing: a pull event serves). */
	CK(wag_cuda_record(e->ev_pull[0], e->side[0], err, errlen));
	CK(wag_cuda_wait(s, e->ev_pull[0], err, errlen));
out:
	return rc;
}

/* One direct kernel on the mapped buffers of signature g. */
static int direct_launch(struct wag_ctx *c, struct ce_sig *g, const struct weft_coll_args *a, enum wag_kind k,
			 uint64_t bytes, char *err, size_t errlen)
{
	static const int mode[] = {[WAG_AR_DIRECT] = WAG_D_ALLREDUCE, [WAG_RS_DIRECT] = WAG_D_REDUCE_SCATTER,
				   [WAG_AG_DIRECT] = WAG_D_ALLGATHER, [WAG_BC_DIRECT] = WAG_D_BROADCAST,
				   [WAG_A2A_DIRECT] = WAG_D_ALLTOALL};
	struct wag_kargs ka = c->base;
	int reduces = k == WAG_AR_DIRECT || k == WAG_RS_DIRECT;
	ka.dtype = (int)a->dtype;
	ka.op = (int)a->op;
	ka.root = a->root;
	ka.in = g->pin[c->rank];
	ka.out = a->recvbuf;
	ka.d.mode = mode[k];
	/* Reductions count elements; the movers bytes (one rank's block, or the
	 * broadcast vector). */
	ka.count = reduces ? a->count : bytes;
	uintptr_t al = (uintptr_t)ka.in | (uintptr_t)ka.out;
	for (int q = 0; q < c->nranks; q++) {
		ka.d.in[q] = g->pin[q];
		ka.d.out[q] = g->pout[q];
		al |= (uintptr_t)g->pin[q] | (uintptr_t)g->pout[q];
	}
	/* Every rank's block starts 16-byte aligned too (reduce-scatter's blocks
	 * follow each other at count elements). */
	ka.vec = (al & 15) == 0 && (k != WAG_RS_DIRECT || bytes % 16 == 0);
	/* The blocks a call uses depend on its size only, the same on every rank. */
	uint64_t work = k == WAG_AR_DIRECT ? bytes / (uint64_t)c->nranks : bytes;
	ka.nblocks = wag_segments(work, (uint32_t)(reduces ? wag_cfg.direct_reduce_blocks : wag_cfg.direct_blocks),
				  wag_cfg.min_seg);
	if (ka.nblocks > c->lay.maxb)
		ka.nblocks = c->lay.maxb;
	/* A reduction block fills a multiprocessor: two of these kernels (ranks
	 * sharing this GPU) must fit at once. */
	if (reduces && c->sms >= 2 && ka.nblocks > (uint32_t)c->sms / 2)
		ka.nblocks = (uint32_t)c->sms / 2;
	if (ka.nblocks == 0)
		ka.nblocks = 1;
	return wag_launch_direct(&ka, a->stream, err, errlen);
}

int wag_ce_run(struct wag_ctx *c, const struct weft_coll_args *a, enum wag_kind k, enum wag_kind fallback)
{
	char err[256] = "";
	int rc, capturing = 0, n = c->nranks, me = c->rank;
	size_t es = wag_esize(a->dtype);
	uint64_t count = a->count, bytes = count * es;
	/* Each rank's buffer lengths, and this rank's block of the reduction. */
	uint64_t in_len = bytes, out_len = bytes, boff = 0, blen = 0, ch = 0;
	uint32_t depth = 0;
	int direct = ce_twin(k) != k;
	switch (ce_twin(k)) {
	case WAG_AR_CE: {
		uint64_t o, l;
		wag_block(count, n, me, 16 / es ? 16 / es : 1, &o, &l);
		boff = o * es;
		blen = l * es;
		uint64_t b0o, b0l;
		wag_block(count, n, 0, 16 / es ? 16 / es : 1, &b0o, &b0l);
		ch = chunk_of(c, b0l * es, &depth);
		break;
	}
	case WAG_RS_CE:
		in_len = bytes * (uint64_t)n;
		boff = (uint64_t)me * bytes;
		blen = bytes;
		ch = chunk_of(c, bytes, &depth);
		break;
	case WAG_AG_CE:
		out_len = bytes * (uint64_t)n;
		break;
	case WAG_A2A_CE:
		in_len = out_len = bytes * (uint64_t)n;
		break;
	default:
		break;
	}
	if ((rc = wag_sig_status(c)) || (rc = wag_cuda_set_device(c->dev)))
		return rc;
	if ((rc = ce_state(c, err, sizeof(err))) || (rc = wag_cuda_capturing(a->stream, &capturing, err, sizeof(err)))) {
		WAG_LOG(WEFT_LOG_ERROR, "%s", err[0] ? err : wag_errname(rc));
		return rc;
	}
	struct ce_sig *g = NULL;
	if ((rc = sig_get(c, a, in_len, out_len, capturing, k, &g)))
		return rc;
	if (!g || (!direct && (k == WAG_AR_CE || k == WAG_RS_CE) && !ch)) {
		/* Every rank got the same records, so every rank falls back. */
		WAG_LOG(WEFT_LOG_DEBUG, "a rank's buffers cannot be mapped by its peers (not cudaMalloc or shareable "
					"VMM memory, or an in-place alltoall), or no room for the pipeline: staging "
					"through the pack's scratch instead");
		return wag_run(c, a, fallback);
	}
	/* In place (on any rank: the records are every rank's, so all decide
	 * alike), the copy-engine allreduce lost to the direct kernel at 1 GiB on
	 * two H200s (3400 against 3141 us): the direct kernel serves it. */
	for (int q = 0; q < n && k == WAG_AR_CE; q++)
		if (g->rec[q].in == g->rec[q].out) {
			k = WAG_AR_DIRECT;
			direct = 1;
		}
	struct wag_kargs kb = c->base;
	if (direct) {
		rc = direct_launch(c, g, a, k, bytes, err, sizeof(err));
		goto done;
	}
	if ((rc = wag_launch_ce_barrier(&kb, a->stream, err, sizeof(err))))
		goto out;
	if (k == WAG_AR_CE && n == 2 && wag_cfg.ce_allreduce_push)
		rc = ce_allreduce_push(c, g, a, boff, blen, ch, err, sizeof(err));
	else if (k == WAG_AR_CE || k == WAG_RS_CE)
		rc = blen ? ce_reduce(c, g, a, k, boff, blen, ch, depth, err, sizeof(err)) : 0;
	else
		rc = ce_push(c, g, a, k, bytes, err, sizeof(err));
	if (rc == 0)
		rc = wag_launch_ce_barrier(&kb, a->stream, err, sizeof(err));
done:
	if (rc == 0 && !capturing) {
		if (!g->done)
			rc = wag_cuda_event_new(&g->done, err, sizeof(err));
		if (rc == 0)
			rc = wag_cuda_record(g->done, a->stream, err, sizeof(err));
	}
	if (rc == 0 && !a->stream)
		rc = wag_sync_call(c, err, sizeof(err));
out:
	if (rc)
		WAG_LOG(WEFT_LOG_ERROR, "%s: %s",
			direct ? "direct collective" : k == WAG_AR_CE ? "allreduce-ce" : "copy-engine collective",
			err[0] ? err : wag_errname(rc));
	return rc;
}
