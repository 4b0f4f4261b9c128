/* SPDX-License-Identifier: Apache-2.0 */
/* Semaphores: 64-bit tokens that peers raise with weft_signal, in host memory
 * (waited on by host threads) or in device memory (weft_sem_create_on; waited
 * on by kernels). Tokens live in per-comm pools of one memory type, each
 * registered once with every transport, one cache line per token; a host wait
 * drives every transport of the comm. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "devchan.h"
#include "le.h"
#include "log.h"
#include "mem.h"
#include "progress.h"
#include "sem.h"
#include "handles.h"

#define SLOT_BYTES 64 /* a cache line per token: no false sharing between waiters */
#define POOL_SLOTS 64
#define POOL_BYTES (SLOT_BYTES * POOL_SLOTS)

struct weft__sem_pool {
	struct weft__link link;
	weft_comm_t *comm;
	uint32_t id; /* distinguishes pools in exchange messages and logs */
	enum weft_mem_type type;
	unsigned char *base; /* host memory, or the device's view of device memory */
	int from_tp;         /* host memory from a transport's mem_alloc (weft__devmem_free it) */
	weft_mem_t *mem;
	uint64_t used; /* bit per slot; device pools never clear one (see weft_sem_destroy) */
};

/* Exchange message, little-endian: pool id u32 | slot u32 | slot count u32 |
 * blob length u32, then the pool's memory blob. */
#define SEM_MSG_HDR 16
#define SEM_MAX_BLOB (1u << 20)

static void pool_base_free(struct weft__sem_pool *pool)
{
	if (pool->type == WEFT_MEM_HOST && pool->from_tp)
		weft__devmem_free(pool->comm, pool->base, NULL);
	else if (pool->type == WEFT_MEM_HOST)
		free(pool->base);
	else
		weft__devmem_free(pool->comm, NULL, pool->base);
}

static void pool_free(struct weft__sem_pool *pool)
{
	weft__mem_free(pool->mem);
	pool_base_free(pool);
	free(pool);
}

/* Called with comm->lock held. Device pools come from the transport that
 * allocates that memory type (zero-filled), so peers' GPUs reach them. */
static int pool_new(weft_comm_t *comm, enum weft_mem_type type, struct weft__sem_pool **out)
{
	struct weft__sem_pool *pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->comm = comm;
	pool->type = type;
	int rc = 0;
	if (type == WEFT_MEM_HOST) {
		/* Host tokens go where peers can map them when a transport offers
		 * such memory (shm's segments): a signal is then one store, not a
		 * round trip. Plain memory otherwise. */
		void *host = NULL, *dev = NULL;
		if (weft__devmem_alloc(comm, WEFT_MEM_HOST, POOL_BYTES, &host, &dev) == 0 && host) {
			pool->base = host;
			pool->from_tp = 1;
		} else if (posix_memalign((void **)&pool->base, 4096, POOL_BYTES) != 0) {
			rc = -ENOMEM;
		} else {
			memset(pool->base, 0, POOL_BYTES);
		}
	} else {
		void *host = NULL, *dev = NULL;
		rc = weft__devmem_alloc(comm, type, POOL_BYTES, &host, &dev);
		pool->base = dev;
	}
	if (rc != 0) {
		free(pool);
		return rc;
	}
	rc = weft__mem_register(comm, pool->base, POOL_BYTES, type, 1, &pool->mem);
	if (rc != 0) {
		pool_base_free(pool);
		free(pool);
		return rc;
	}
	uint32_t id = 0;
	for (struct weft__link *l = comm->pools.next; l != &comm->pools; l = l->next) {
		struct weft__sem_pool *p = weft__container_of(l, struct weft__sem_pool, link);
		if (p->id >= id)
			id = p->id + 1;
	}
	pool->id = id;
	weft__list_push(&comm->pools, &pool->link);
	*out = pool;
	return 0;
}

static int sem_create(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **out)
{
	weft_sem_t *sem = calloc(1, sizeof(*sem));
	if (!sem)
		return -ENOMEM;
	int rc = 0;
	pthread_mutex_lock(&comm->lock);
	struct weft__sem_pool *pool = NULL;
	for (struct weft__link *l = comm->pools.next; l != &comm->pools; l = l->next) {
		struct weft__sem_pool *p = weft__container_of(l, struct weft__sem_pool, link);
		if (p->type == type && p->used != UINT64_MAX) {
			pool = p;
			break;
		}
	}
	if (!pool)
		rc = pool_new(comm, type, &pool);
	if (rc == 0) {
		unsigned slot = (unsigned)__builtin_ctzll(~pool->used);
		pool->used |= 1ull << slot;
		sem->comm = comm;
		sem->pool = pool;
		sem->slot = slot;
		sem->type = type;
		sem->token = (uint64_t *)(pool->base + (size_t)slot * SLOT_BYTES);
		/* A device slot is fresh (zero-filled, never reused); a host one is reset. */
		if (type == WEFT_MEM_HOST)
			__atomic_store_n(sem->token, 0, __ATOMIC_RELEASE);
		weft__list_push(&comm->sems, &sem->link);
	}
	pthread_mutex_unlock(&comm->lock);
	if (rc != 0) {
		free(sem);
		return rc;
	}
	*out = sem;
	return 0;
}

int weft__sem_create(weft_comm_t *comm, weft_sem_t **out)
{
	if (!comm || !out) {
		WEFT_ERROR("weft_sem_create: NULL %s", comm ? "sem out-pointer" : "comm");
		return -EINVAL;
	}
	return sem_create(comm, WEFT_MEM_HOST, out);
}

int weft__sem_create_on(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **out)
{
	if (!comm || !out || (unsigned)type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_sem_create_on: %s", !comm ? "NULL comm" : !out ? "NULL sem out-pointer"
									  : "unknown memory type");
		return -EINVAL;
	}
	int rc = sem_create(comm, type, out);
	if (rc == -ENOTSUP)
		WEFT_ERROR("weft_sem_create_on: no transport of this comm allocates memory of type %d for "
			   "semaphores (a GPU transport such as nvlink is needed)", (int)type);
	return rc;
}

WEFT_API int weft_sem_destroy(weft_sem_t *sem)
{
	if (!sem)
		return 0;
	weft_comm_t *comm = sem->comm;
	pthread_mutex_lock(&comm->lock);
	weft__list_del(&sem->link);
	/* A host slot is reused (reset at its next create); the pool stays
	 * registered until the comm goes, since peers may still hold imports of
	 * it. A device slot is retired: the host cannot reset device memory. */
	if (sem->type == WEFT_MEM_HOST)
		sem->pool->used &= ~(1ull << sem->slot);
	pthread_mutex_unlock(&comm->lock);
	free(sem);
	return 0;
}

/* The token is written outside the C memory model (a NIC, or a transport's
 * memcpy of the peer's bytes), so ThreadSanitizer cannot pair this load with a
 * store; the pairing is sync_with_progress below. */
__attribute__((no_sanitize_thread)) static uint64_t token_load(const uint64_t *token)
{
	return __atomic_load_n(token, __ATOMIC_ACQUIRE);
}

WEFT_API uint64_t weft_sem_value(const weft_sem_t *sem)
{
	/* A device token is not host-readable; kernels read it (weft.h says 0). */
	return sem && sem->type == WEFT_MEM_HOST ? token_load(sem->token) : 0;
}

/* A software transport lands data and token with plain copies, possibly in
 * this process's proxy thread, under the transport's lock. Passing through
 * each lock once after the token is seen orders the caller's later reads of
 * the data after those copies (and lets ThreadSanitizer see it). */
static void sync_with_progress(weft_comm_t *comm)
{
	for (int i = 0; i < comm->ntp; i++) {
		pthread_mutex_lock(&comm->tp[i].lock);
		pthread_mutex_unlock(&comm->tp[i].lock);
	}
}

/* How long a host wait spins on its token before it yields and sleeps: with
 * no more ranks of the comm than online CPUs a spinning rank takes no core
 * from a peer, and a token stored into a mapped segment (shm) arrives within
 * a microsecond or so of the peer's signal, while a yield-then-sleep policy
 * (sleeps up to 1 ms) adds itself to every collective round. Oversubscribed,
 * spinning would steal the peer's core: no spin. */
#ifndef SEM_SPIN_NS
#define SEM_SPIN_NS 200000L
#endif

static long spin_budget_ns(const weft_comm_t *comm)
{
	static long ncpu;
	long n = __atomic_load_n(&ncpu, __ATOMIC_RELAXED);
	if (n == 0) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		if (n < 1)
			n = 1;
		__atomic_store_n(&ncpu, n, __ATOMIC_RELAXED);
	}
	return comm->nranks <= n ? SEM_SPIN_NS : 0;
}

static long elapsed_ns(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* The spinning phase of weft_sem_wait: 0 when the token arrived, a negative
 * code when the comm failed, 1 when the budget ran out. Transports and the
 * comm's status are polled every SPIN_POLL loads, so a transport that needs
 * progress to land the token and a dead peer are still served. */
#define SPIN_POLL 256
static int spin_wait(weft_sem_t *sem, uint64_t value)
{
	weft_comm_t *comm = sem->comm;
	long budget = spin_budget_ns(comm);
	struct timespec t0;
	if (budget == 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 1;; i++) {
		if (token_load(sem->token) >= value) {
			sync_with_progress(comm);
			return 0;
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		if (i % SPIN_POLL != 0)
			continue;
		int rc = weft__comm_status(comm);
		if (rc == 0)
			rc = weft__comm_progress(comm);
		if (rc != 0)
			return rc;
		if (elapsed_ns(&t0) > budget)
			return 1;
	}
}

WEFT_API int weft_comm_progress(weft_comm_t *comm)
{
	if (!comm)
		return -EINVAL;
	int rc = weft__comm_status(comm);
	if (rc == 0)
		rc = weft__comm_progress(comm);
	if (rc == 0)
		sync_with_progress(comm);
	return rc;
}

/* The token is written by a transport (a peer's RMA write, landed by a
 * progress call here or by the NIC), so the wait keeps every transport of the
 * comm progressing and watches the comm's status between polls. */
WEFT_API int weft_sem_wait(weft_sem_t *sem, uint64_t value)
{
	if (!sem) {
		WEFT_ERROR("weft_sem_wait: NULL sem");
		return -EINVAL;
	}
	if (sem->type != WEFT_MEM_HOST) {
		WEFT_ERROR("weft_sem_wait: the semaphore's token is in device memory (weft_sem_create_on); "
			   "kernels wait on it (weft_memchan_wait), host threads cannot");
		return -ENOTSUP;
	}
	weft_comm_t *comm = sem->comm;
	int rc = spin_wait(sem, value);
	if (rc <= 0)
		return rc;
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	for (;;) {
		if (token_load(sem->token) >= value) {
			sync_with_progress(comm);
			return 0;
		}
		rc = weft__comm_status(comm);
		if (rc != 0)
			return rc;
		rc = weft__comm_progress(comm);
		if (rc != 0) {
			WEFT_ERROR("weft_sem_wait: transport progress failed: %s", weft_strerror(rc));
			return rc;
		}
		if (token_load(sem->token) >= value)
			return 0;
		weft__comm_backoff_wait(comm, &b);
	}
}

/* The first of sems[] whose token reached its value, or -1. */
static int first_ready(weft_sem_t *const *sems, const uint64_t *values, int n)
{
	for (int i = 0; i < n; i++)
		if (token_load(sems[i]->token) >= values[i])
			return i;
	return -1;
}

/* As weft_sem_wait, for whichever of n tokens arrives first: a host thread
 * that drives several peers at once (a pack's proxy) must not sleep on one
 * of them while another's arrival would let it go on. */
WEFT_API int weft_sem_wait_any(weft_sem_t *const *sems, const uint64_t *values, int n, int *which)
{
	if (!sems || !values || n < 1 || !which) {
		WEFT_ERROR("weft_sem_wait_any: %s", !sems ? "NULL sems" : !values ? "NULL values" : !which ? "NULL which"
												: "no semaphore to wait on");
		return -EINVAL;
	}
	for (int i = 0; i < n; i++) {
		if (!sems[i] || sems[i]->type != WEFT_MEM_HOST || sems[i]->comm != sems[0]->comm) {
			WEFT_ERROR("weft_sem_wait_any: semaphore %d is %s", i,
				   !sems[i] ? "NULL" : sems[i]->type != WEFT_MEM_HOST ? "in device memory (kernels wait on it)"
										: "of another communicator");
			return -EINVAL;
		}
	}
	weft_comm_t *comm = sems[0]->comm;
	long budget = spin_budget_ns(comm);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct weft__backoff b;
	weft__backoff_init(&b, 200);
	for (unsigned i = 1;; i++) {
		int k = first_ready(sems, values, n);
		if (k >= 0) {
			sync_with_progress(comm);
			*which = k;
			return 0;
		}
		int spinning = budget > 0 && elapsed_ns(&t0) < budget;
		if (spinning && i % SPIN_POLL != 0) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
			continue;
		}
		int rc = weft__comm_status(comm);
		if (rc == 0)
			rc = weft__comm_progress(comm);
		if (rc != 0)
			return rc;
		if (!spinning && first_ready(sems, values, n) < 0)
			weft__comm_backoff_wait(comm, &b);
	}
}

static int sem_exchange(weft_sem_t *sem, int peer, weft_rsem_t **out);

WEFT_API int weft_sem_exchange(weft_sem_t *sem, int peer, weft_rsem_t **out)
{
	if (!sem || !out) {
		WEFT_ERROR("weft_sem_exchange: NULL %s", sem ? "rsem out-pointer" : "sem");
		return -EINVAL;
	}
	int rc = weft__progress_hold(sem->comm);
	if (rc != 0)
		return rc;
	rc = sem_exchange(sem, peer, out);
	weft__progress_release(sem->comm);
	return rc;
}

static int sem_exchange(weft_sem_t *sem, int peer, weft_rsem_t **out)
{
	if (!sem || !out) {
		WEFT_ERROR("weft_sem_exchange: NULL %s", sem ? "rsem out-pointer" : "sem");
		return -EINVAL;
	}
	weft_comm_t *comm = sem->comm;
	if (peer < 0 || peer >= comm->nranks || peer == comm->rank) {
		WEFT_ERROR("weft_sem_exchange: peer %d is not another rank (size %d)", peer, comm->nranks);
		return -EINVAL;
	}
	void *blob = NULL;
	size_t blen = 0;
	int rc = weft__mem_blob(sem->pool->mem, &blob, &blen);
	if (rc != 0)
		return rc;
	unsigned char hdr[SEM_MSG_HDR], phdr[SEM_MSG_HDR];
	put32(hdr, sem->pool->id);
	put32(hdr + 4, sem->slot);
	put32(hdr + 8, POOL_SLOTS);
	put32(hdr + 12, (uint32_t)blen);
	rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_SEM, hdr, sizeof(hdr));
	if (rc == 0)
		rc = weft__bootstrap_send(comm->bs, peer, WEFT__TAG_SEM, blob, blen);
	free(blob);
	if (rc == 0)
		rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_SEM, phdr, sizeof(phdr));
	if (rc != 0)
		return rc;
	uint32_t pslot = get32(phdr + 4), pslots = get32(phdr + 8), pblen = get32(phdr + 12);
	if (pblen > SEM_MAX_BLOB) {
		WEFT_ERROR("weft_sem_exchange: rank %d announces a %u-byte pool blob (limit %u)", peer, pblen,
			   SEM_MAX_BLOB);
		return -WEFT_ERR_PROTOCOL;
	}
	unsigned char *pblob = malloc(pblen ? pblen : 1);
	if (!pblob)
		return -ENOMEM;
	rc = weft__bootstrap_recv(comm->bs, peer, WEFT__TAG_SEM, pblob, pblen);
	if (rc != 0)
		goto err_free_blob;
	if (pslot >= pslots) {
		WEFT_ERROR("weft_sem_exchange: rank %d names slot %u of a %u-slot pool", peer, pslot, pslots);
		rc = -WEFT_ERR_PROTOCOL;
		goto err_free_blob;
	}
	weft_rsem_t *rsem = calloc(1, sizeof(*rsem));
	if (!rsem) {
		rc = -ENOMEM;
		goto err_free_blob;
	}
	rc = weft__mem_import(comm, peer, pblob, pblen, 1, &rsem->rmem);
	if (rc != 0)
		goto err_free_rsem;
	rsem->off = (uint64_t)pslot * SLOT_BYTES;
	if (rsem->rmem->len < sizeof(uint64_t) || rsem->off > rsem->rmem->len - sizeof(uint64_t)) {
		WEFT_ERROR("weft_sem_exchange: rank %d names slot %u outside its %llu-byte pool", peer, pslot,
			   (unsigned long long)rsem->rmem->len);
		rc = -WEFT_ERR_PROTOCOL;
		goto err_release_rmem;
	}
	rsem->comm = comm;
	rsem->peer = peer;
	pthread_mutex_lock(&comm->lock);
	rc = weft__idtab_add(&comm->rsem_ids, rsem, &rsem->id);
	if (rc == 0)
		weft__list_push(&comm->rsems, &rsem->link);
	pthread_mutex_unlock(&comm->lock);
	if (rc != 0)
		goto err_release_rmem;
	free(pblob);
	*out = rsem;
	return 0;

err_release_rmem:
	weft__rmem_free(rsem->rmem);
err_free_rsem:
	free(rsem);
err_free_blob:
	free(pblob);
	return rc;
}

WEFT_API int weft_rsem_release(weft_rsem_t *rsem)
{
	if (!rsem)
		return 0;
	weft_comm_t *comm = rsem->comm;
	pthread_mutex_lock(&comm->lock);
	weft__list_del(&rsem->link);
	weft__idtab_del(&comm->rsem_ids, rsem->id);
	pthread_mutex_unlock(&comm->lock);
	weft__rmem_free(rsem->rmem);
	free(rsem);
	return 0;
}

int weft__rsem_claim(const weft_conn_t *conn, weft_rsem_t *rsem, uint64_t value)
{
	if (rsem->comm != conn->comm || rsem->peer != conn->peer) {
		WEFT_ERROR("signal: the semaphore belongs to rank %d but the connection goes to rank %d", rsem->peer,
			   conn->peer);
		return -EINVAL;
	}
	/* A staged connection's signal travels as a descriptor the far side
	 * applies (stage.c), so the transport needs no handle of the semaphore. */
	if (!conn->stage && !rsem->rmem->rmh[conn->tpi]) {
		WEFT_ERROR("signal: rank %d's semaphore is not reachable through transport %s", rsem->peer,
			   conn->tp->name);
		return -ENOTSUP;
	}
	uint64_t last = __atomic_load_n(&rsem->last, __ATOMIC_RELAXED);
	do {
		if (value <= last) {
			WEFT_ERROR("signal: value %llu does not exceed %llu, signalled before (tokens only grow)",
				   (unsigned long long)value, (unsigned long long)last);
			return -EINVAL;
		}
	} while (!__atomic_compare_exchange_n(&rsem->last, &last, value, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 0;
}

void weft__sem_destroy_all(weft_comm_t *comm)
{
	while (!weft__list_empty(&comm->rsems))
		weft_rsem_release(weft__container_of(comm->rsems.prev, weft_rsem_t, link));
	while (!weft__list_empty(&comm->sems))
		weft_sem_destroy(weft__container_of(comm->sems.prev, weft_sem_t, link));
	while (!weft__list_empty(&comm->pools)) {
		struct weft__sem_pool *pool = weft__container_of(comm->pools.prev, struct weft__sem_pool, link);
		weft__list_del(&pool->link);
		pool_free(pool);
	}
}
