/* algo-host: the per-communicator context (connections, scratch and staging
 * areas, semaphores; made once and shared by the pack's algorithms) and the
 * round engine that moves chunks through slots with flow control. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "ah.h"

const char *ah_strerror(int rc)
{
	/* The core's weft_strerror is out of reach (plugins link no core symbol). */
	static const char *const own[] = {"plugin error", "ABI mismatch", "configuration error", "peer failed",
					  "aborted", "protocol error", "authentication failed", "transport error",
					  "no device", "ranks disagree"};
	int e = rc < 0 ? -rc : rc;
	if (e >= WEFT_ERR_FIRST && (size_t)(e - WEFT_ERR_FIRST) < sizeof(own) / sizeof(own[0]))
		return own[e - WEFT_ERR_FIRST];
	return strerror(e);
}

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ah_ctx *ctx_list; /* one per communicator, keyed by its pointer */

/* Scratch and staging come from the core's allocator when a transport of the
 * comm offers host memory that peers can map (shm's segments): a put is then
 * a memcpy into the peer's pages. Otherwise plain page-aligned memory.
 * *from_tp says which, for ah_free_area. */
static void *ah_alloc_area(struct ah_ctx *c, size_t bytes, int *from_tp)
{
	void *p = NULL;
	const struct weft_prim_api *pr = c->prim;
	*from_tp = 0;
	if (WEFT_HAS_OP(pr, struct weft_prim_api, mem_alloc) && WEFT_HAS_OP(pr, struct weft_prim_api, mem_free)) {
		int rc = pr->mem_alloc(c->comm, WEFT_MEM_HOST, bytes ? bytes : 4096, &p);
		if (rc == 0 && p) {
			*from_tp = 1;
			return p; /* zero-filled */
		}
		if (rc != -ENOTSUP && rc != -ENOSYS)
			AH_LOG(WEFT_LOG_DEBUG, "mem_alloc of %zu bytes: %s; using plain memory", bytes, ah_strerror(rc));
		p = NULL;
	}
	/* Page alignment keeps registration cheap for transports that pin pages. */
	if (posix_memalign(&p, 4096, bytes ? bytes : 4096) != 0)
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static void ah_free_area(struct ah_ctx *c, void *p, int from_tp)
{
	if (from_tp)
		c->prim->mem_free(c->comm, p);
	else
		free(p);
}

static int read_params(struct ah_ctx *c)
{
	uint64_t chunk = 512 * 1024, scratch = 4 * 1024 * 1024;
	const char *tp = NULL;
	ah_core->param_get(ah_core->self, AH_NAME, "chunk", WEFT_PARAM_SIZE, &chunk, NULL);
	ah_core->param_get(ah_core->self, AH_NAME, "scratch", WEFT_PARAM_SIZE, &scratch, NULL);
	ah_core->param_get(ah_core->self, AH_NAME, "transport", WEFT_PARAM_STRING, &tp, NULL);
	uint64_t want = chunk;
	chunk &= ~(uint64_t)63;
	if (chunk < 4096)
		chunk = 4096;
	if (chunk > (64u << 20))
		chunk = 64u << 20;
	if (chunk != want)
		AH_LOG(WEFT_LOG_WARN, "chunk %llu is out of range or not a multiple of 64; using %llu",
		       (unsigned long long)want, (unsigned long long)chunk);
	uint64_t slots = scratch / chunk;
	if (slots < 2) {
		AH_LOG(WEFT_LOG_WARN, "scratch %llu holds fewer than two chunks of %llu; using two",
		       (unsigned long long)scratch, (unsigned long long)chunk);
		slots = 2;
	}
	if (slots > 1024)
		slots = 1024;
	c->chunk = (size_t)chunk;
	c->nslots = (unsigned)slots;
	c->area = c->chunk * c->nslots;
	if (tp && *tp && !(c->transport = strdup(tp)))
		return -ENOMEM;
	return 0;
}

static void peer_release(struct ah_ctx *c, struct ah_peer *p)
{
	const struct weft_prim_api *pr = c->prim;
	pr->rsem_release(p->free_rsem);
	pr->rsem_release(p->data_rsem);
	pr->sem_destroy(p->free_sem);
	pr->sem_destroy(p->data_sem);
	pr->rmem_release(p->rscratch);
	pr->conn_close(p->conn);
	memset(p, 0, sizeof(*p));
}

static void ctx_free(struct ah_ctx *c)
{
	if (c->peers)
		for (int p = 0; p < c->nranks; p++)
			if (c->peers[p].conn || c->peers[p].rscratch || c->peers[p].data_sem)
				peer_release(c, &c->peers[p]);
	c->prim->mem_deregister(c->staging_mem);
	c->prim->mem_deregister(c->scratch_mem);
	ah_free_area(c, c->staging, c->staging_tp);
	ah_free_area(c, c->scratch, c->scratch_tp);
	free(c->temp);
	free(c->transport);
	free(c->peers);
	free(c->tx_src);
	free(c->tx_bytes);
	free(c->rx_bytes);
	free(c->rx_ptr);
	free(c->rx_dst);
	free(c);
}

static int ctx_create(const struct weft_algo_comm *ac, struct ah_ctx **out)
{
	struct ah_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->comm = ac->comm;
	c->rank = ac->rank;
	c->nranks = ac->nranks;
	c->prim = ac->prim;
	c->refs = 1;
	int rc = read_params(c);
	if (rc)
		goto err_free;
	size_t n = (size_t)c->nranks;
	rc = -ENOMEM;
	if (c->area > SIZE_MAX / n)
		goto err_free;
	c->peers = calloc(n, sizeof(*c->peers));
	c->tx_src = calloc(n, sizeof(*c->tx_src));
	c->tx_bytes = calloc(n, sizeof(*c->tx_bytes));
	c->rx_bytes = calloc(n, sizeof(*c->rx_bytes));
	c->rx_ptr = calloc(n, sizeof(*c->rx_ptr));
	c->rx_dst = calloc(n, sizeof(*c->rx_dst));
	c->temp = malloc(c->chunk);
	c->scratch = ah_alloc_area(c, c->area * n, &c->scratch_tp);
	c->staging = ah_alloc_area(c, c->area * n, &c->staging_tp);
	if (!c->peers || !c->tx_src || !c->tx_bytes || !c->rx_bytes || !c->rx_ptr || !c->rx_dst || !c->temp ||
	    !c->scratch || !c->staging) {
		AH_LOG(WEFT_LOG_ERROR, "out of memory for %zu bytes of scratch and staging", 2 * c->area * n);
		goto err_free;
	}
	/* One registration each for the life of the communicator, never per call. */
	rc = c->prim->mem_register(c->comm, c->scratch, c->area * n, WEFT_MEM_HOST, &c->scratch_mem);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot register %zu bytes of scratch: %s", c->area * n, ah_strerror(rc));
		goto err_free;
	}
	rc = c->prim->mem_register(c->comm, c->staging, c->area * n, WEFT_MEM_HOST, &c->staging_mem);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot register %zu bytes of staging: %s", c->area * n, ah_strerror(rc));
		goto err_free;
	}
	AH_LOG(WEFT_LOG_DEBUG, "context for %d ranks: %u slots of %zu bytes per peer, transport %s", c->nranks,
	       c->nslots, c->chunk, c->transport ? c->transport : "(core's choice)");
	*out = c;
	return 0;

err_free:
	ctx_free(c);
	return rc;
}

int ah_ctx_get(const struct weft_algo_comm *ac, struct ah_ctx **out)
{
	if (!ac || !ac->comm || !ac->prim || ac->nranks < 1 || ac->rank < 0 || ac->rank >= ac->nranks)
		return -EINVAL;
	pthread_mutex_lock(&ctx_lock);
	struct ah_ctx *c = ctx_list;
	while (c && c->comm != ac->comm)
		c = c->next;
	int rc = 0;
	if (c) {
		c->refs++;
	} else if ((rc = ctx_create(ac, &c)) == 0) {
		c->next = ctx_list;
		ctx_list = c;
	}
	pthread_mutex_unlock(&ctx_lock);
	if (rc == 0)
		*out = c;
	return rc;
}

void ah_ctx_put(struct ah_ctx *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&ctx_lock);
	int last = --c->refs == 0;
	if (last) {
		struct ah_ctx **pp = &ctx_list;
		while (*pp && *pp != c)
			pp = &(*pp)->next;
		if (*pp)
			*pp = c->next;
	}
	pthread_mutex_unlock(&ctx_lock);
	if (last)
		ctx_free(c);
}

int ah_ensure_peer(struct ah_ctx *c, int peer)
{
	struct ah_peer *p = &c->peers[peer];
	if (p->ready || peer == c->rank)
		return 0;
	const struct weft_prim_api *pr = c->prim;
	/* Both ranks of the pair make the same calls in the same order. */
	int rc = pr->connect(c->comm, peer, c->transport, &p->conn);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot connect to rank %d%s%s: %s", peer, c->transport ? " over " : "",
		       c->transport ? c->transport : "", ah_strerror(rc));
		goto err_release;
	}
	if ((rc = pr->mem_exchange(c->scratch_mem, peer, &p->rscratch)) ||
	    (rc = pr->sem_create(c->comm, &p->data_sem)) || (rc = pr->sem_create(c->comm, &p->free_sem)) ||
	    (rc = pr->sem_exchange(p->data_sem, peer, &p->data_rsem)) ||
	    (rc = pr->sem_exchange(p->free_sem, peer, &p->free_rsem))) {
		AH_LOG(WEFT_LOG_ERROR, "cannot set up channels with rank %d: %s", peer, ah_strerror(rc));
		goto err_release;
	}
	/* Fresh semaphores start at 0, matching the zeroed counters. */
	p->tx_sent = p->tx_flushed = p->rx_done = p->free_sent = 0;
	p->ready = 1;
	return 0;

err_release:
	peer_release(c, p);
	c->broken = rc;
	return rc;
}

int ah_ensure_all(struct ah_ctx *c)
{
	/* Ascending peers on every rank: each rank meets its pairs in the global
	 * order of (lower rank, higher rank), so no cycle of blocking exchanges. */
	for (int p = 0; p < c->nranks; p++) {
		int rc = ah_ensure_peer(c, p);
		if (rc)
			return rc;
	}
	return 0;
}

static int send_chunk(struct ah_ctx *c, int peer, const void *src, size_t bytes)
{
	struct ah_peer *p = &c->peers[peer];
	const struct weft_prim_api *pr = c->prim;
	uint64_t n = p->tx_sent, k = c->nslots;
	size_t slot = (size_t)(n % k);
	int rc;
	if (n >= k) {
		/* The peer's slot is ours again once it consumed chunk n - k... */
		if ((rc = pr->sem_wait(p->free_sem, n - k + 1)))
			return rc;
		/* ...and our staging slot once the put that read it is complete. */
		if (p->tx_flushed < n - k + 1) {
			if ((rc = pr->flush(p->conn)))
				return rc;
			p->tx_flushed = n;
		}
	}
	size_t soff = (size_t)peer * c->area + slot * c->chunk;
	size_t doff = (size_t)c->rank * c->area + slot * c->chunk;
	memcpy(c->staging + soff, src, bytes);
	if ((rc = pr->put(p->conn, p->rscratch, doff, c->staging_mem, soff, bytes)))
		return rc;
	p->tx_sent = n + 1;
	return pr->signal(p->conn, p->data_rsem, n + 1);
}

static int wait_chunk(struct ah_ctx *c, int peer, const void **ptr)
{
	struct ah_peer *p = &c->peers[peer];
	uint64_t n = p->rx_done;
	int rc = c->prim->sem_wait(p->data_sem, n + 1);
	if (rc)
		return rc;
	*ptr = c->scratch + (size_t)peer * c->area + (size_t)(n % c->nslots) * c->chunk;
	return 0;
}

int ah_run(struct ah_ctx *c, uint64_t rounds, ah_plan_fn plan, ah_plan_fn consume, void *arg)
{
	int n = c->nranks, me = c->rank, rc = 0;
	if (c->broken)
		return c->broken;
	for (uint64_t t = 0; t < rounds; t++) {
		for (int p = 0; p < n; p++) {
			c->tx_bytes[p] = c->rx_bytes[p] = 0;
			c->tx_src[p] = c->rx_ptr[p] = NULL;
			c->rx_dst[p] = NULL;
		}
		if ((rc = plan(arg, c, t)))
			goto err;
		/* "Slot free" goes back only when the sender needs it for a chunk we
		 * expect now, so every operation we post is one its target waits for
		 * and no peer has to progress for us after it has left the call. */
		for (int p = 0; p < n; p++) {
			struct ah_peer *pp = &c->peers[p];
			uint64_t idx = pp->rx_done;
			if (!c->rx_bytes[p] || idx < c->nslots || pp->free_sent >= idx - c->nslots + 1)
				continue;
			if ((rc = c->prim->signal(pp->conn, pp->free_rsem, idx)))
				goto err;
			pp->free_sent = idx;
		}
		/* Start with the next rank up, so that not everyone sends to rank 0 first. */
		for (int i = 1; i < n; i++) {
			int p = (me + i) % n;
			if (c->tx_bytes[p] && (rc = send_chunk(c, p, c->tx_src[p], c->tx_bytes[p])))
				goto err;
		}
		for (int i = 1; i < n; i++) {
			int p = (me - i + n) % n;
			if (c->rx_bytes[p] && (rc = wait_chunk(c, p, &c->rx_ptr[p])))
				goto err;
		}
		if (consume) {
			if ((rc = consume(arg, c, t)))
				goto err;
		} else {
			for (int p = 0; p < n; p++)
				if (c->rx_bytes[p])
					memcpy(c->rx_dst[p], c->rx_ptr[p], c->rx_bytes[p]);
		}
		for (int p = 0; p < n; p++)
			if (c->rx_bytes[p])
				c->peers[p].rx_done++;
	}
	/* A host call completes before it returns: what this rank sent must have
	 * reached its peers, because nothing moves this comm's data once the
	 * caller blocks elsewhere (another comm, its own work) and some transports
	 * land data only while the sender progresses. The peers are still in this
	 * call or have consumed the data already, so the flush needs nothing more
	 * from them. */
	for (int p = 0; p < n; p++) {
		struct ah_peer *pp = &c->peers[p];
		if (pp->ready && pp->tx_flushed < pp->tx_sent) {
			if ((rc = c->prim->flush(pp->conn)))
				goto err;
			pp->tx_flushed = pp->tx_sent;
		}
	}
	return 0;

err:
	/* Our counters and the peers' no longer agree: refuse further calls on this
	 * communicator rather than deliver wrong data. */
	AH_LOG(WEFT_LOG_ERROR, "transfer failed: %s; the pack refuses further calls on this communicator",
	       ah_strerror(rc));
	c->broken = rc;
	return rc;
}
