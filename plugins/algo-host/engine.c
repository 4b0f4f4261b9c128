/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host: the per-communicator context (connections, scratch and staging
 * areas, semaphores; made once and shared by the pack's algorithms) and the
 * round engine that moves chunks through slots with flow control. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/random.h>
#include <sched.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <string.h>
#include <stdio.h>

#include "ah.h"


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
			AH_LOG(WEFT_LOG_DEBUG, "mem_alloc of %zu bytes: %s; using plain memory", bytes,
			       weft_kit_strerror(rc));
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

/* Parameters of [algo-host]: every key is a row of algos.c's ah_param_rows,
 * whose defaults are the only ones. */
static int read_params(struct ah_ctx *c)
{
	struct ah_params p;
	int rc = weft_kit_params_load(ah_core, AH_NAME, ah_param_rows, ah_nparams, &p);
	if (rc)
		return rc;
	c->pull = p.pull;
	c->pull_ok = -1;
	c->poll_ns = p.poll_us > UINT64_MAX / 1000 ? UINT64_MAX : p.poll_us * 1000;
	c->map = p.map;
	c->direct_min = p.direct_min;
	c->cached_min = p.cached_min;
	c->cached_max = p.cached_max;
	c->cached_oversub = p.cached_oversub;
	c->rsag_push_min = p.rsag_push_min;
	c->rsag_push_always = p.rsag_push_always;
	c->oneshot_push_max = p.oneshot_push_max;
	c->nt_min = p.nt_min;
	c->nudge = p.nudge;
	c->numa = p.numa;
	c->placed = -1;
	uint64_t chunk = p.chunk, scratch = p.scratch;
	const char *tp = p.transport;
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

/* A transfer failed: the pack refuses further calls on this communicator.
 * Failures the core or the signature check found and logged already (a
 * peer's death, an abort, calls that disagree, a stall timeout) are not
 * logged again as errors: one failure, one error line. */
static void ah_broken(struct ah_ctx *c, int rc)
{
	int known = rc == -WEFT_ERR_PEER || rc == -WEFT_ERR_ABORTED || rc == -WEFT_ERR_MISMATCH || rc == -ETIMEDOUT;
	AH_LOG(known ? WEFT_LOG_INFO : WEFT_LOG_ERROR,
	       "transfer failed: %s; the pack refuses further calls on this communicator", weft_kit_strerror(rc));
	c->broken = rc;
}

static void peer_release(struct ah_ctx *c, struct ah_peer *p)
{
	const struct weft_prim_api *pr = c->prim;
	pr->rmem_release(p->rdirect);
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
	/* A peer that maps this rank's scratch may still raise a token in its
	 * header after this rank's last collective returned (the "slot free" of a
	 * chunk it consumed); between ranks of one process its mapping is this
	 * very memory, which is about to be freed. Teardown runs on every rank in
	 * weft_comm_destroy, so once all have met here none writes any more. */
	int mapped = 0;
	for (int p = 0; c->peers && p < c->nranks; p++)
		mapped |= c->peers[p].rmap != NULL || c->peers[p].fast;
	if (mapped && c->prim->comm_status(c->comm) == 0) {
		int rc = c->prim->comm_barrier(c->comm);
		if (rc)
			AH_LOG(WEFT_LOG_WARN, "teardown: the ranks did not meet (%s); freeing anyway",
			       weft_kit_strerror(rc));
	}
	if (c->peers)
		for (int p = 0; p < c->nranks; p++)
			if (c->peers[p].conn || c->peers[p].rscratch || c->peers[p].data_sem)
				peer_release(c, &c->peers[p]);
	c->prim->mem_deregister(c->dir_mem);
	c->prim->mem_deregister(c->src_mem);
	c->prim->mem_deregister(c->staging_mem);
	c->prim->mem_deregister(c->scratch_mem);
	ah_free_area(c, c->staging, c->staging_tp);
	ah_free_area(c, c->scratch_base, c->scratch_tp);
	free(c->temp);
	free(c->premul);
	free(c->work);
	free(c->vr);
	free(c->rv);
	free(c->transport);
	free(c->peers);
	free(c->tx_src);
	free(c->tx_bytes);
	free(c->rx_bytes);
	free(c->rx_ptr);
	free(c->rx_dst);
	free(c->doff);
	free(c->dbytes);
	free(c->ssig);
	free(c->rsig);

	free(c);
}

/* This kernel's boot id: ranks that share it may map each other's memory. */
static void read_boot_id(char *out)
{
	memset(out, 0, AH_BOOT_ID);
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (!fgets(out, AH_BOOT_ID, f))
			memset(out, 0, AH_BOOT_ID);
		fclose(f);
	}
}

/* The capabilities of the transport that reaches peer r: the one the
 * transport parameter names, else weft_connect's first choice; none where
 * the core lists no routes (a 0.2 core). */
static uint32_t route_caps(const struct weft_algo_comm *ac, const char *tp, int r)
{
	const struct weft_algo_peer *pe = weft_algo_peer_at(ac, r);
	for (int i = 0; pe && pe->routes && i < pe->nroutes; i++)
		if (!tp || !*tp || (pe->routes[i].transport && strcmp(pe->routes[i].transport, tp) == 0))
			return pe->routes[i].caps;
	return 0;
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
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	c->spin = ncpu > 0 && c->nranks <= ncpu;
	int rc = read_params(c);
	if (rc)
		goto err_free;
	c->unpinned = 1;
	for (int r = 0; r < c->nranks; r++) {
		uint32_t caps = r == c->rank ? WEFT_TP_CAP_UNPINNED_WRITES : route_caps(ac, c->transport, r);
		c->unpinned &= (caps & WEFT_TP_CAP_UNPINNED_WRITES) != 0;
		c->maps_allocs |= (caps & WEFT_TP_CAP_HOST_MAPPABLE) != 0;
	}
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
	c->doff = calloc(n, sizeof(*c->doff));
	c->dbytes = calloc(n, sizeof(*c->dbytes));
	c->ssig = calloc(n, sizeof(*c->ssig));
	c->rsig = calloc(n, sizeof(*c->rsig));
	c->temp = malloc(c->chunk);
	c->hdr = AH_HDR_BYTES(n);
	c->scratch_base = ah_alloc_area(c, c->hdr + c->area * n, &c->scratch_tp);
	c->staging = ah_alloc_area(c, c->area * n, &c->staging_tp);
	if (!c->peers || !c->tx_src || !c->tx_bytes || !c->rx_bytes || !c->rx_ptr || !c->rx_dst || !c->temp || !c->doff || !c->dbytes || !c->ssig || !c->rsig ||
	    !c->scratch_base || !c->staging) {
		AH_LOG(WEFT_LOG_ERROR, "out of memory for %zu bytes of scratch and staging", 2 * c->area * n);
		goto err_free;
	}
	c->scratch = c->scratch_base + c->hdr;
	read_boot_id(c->boot_id);
	/* The canary peers compare with what their mapping of our scratch shows
	 * (see map_peer); never 0, which is what fresh memory holds. */
	while (c->canary == 0)
		if (getrandom(&c->canary, sizeof(c->canary), 0) != (ssize_t)sizeof(c->canary))
			c->canary = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)c;
	memcpy(c->scratch_base, &c->canary, sizeof(c->canary));
	/* One registration each for the life of the communicator, never per call. */
	rc = c->prim->mem_register(c->comm, c->scratch_base, c->hdr + c->area * n, WEFT_MEM_HOST, &c->scratch_mem);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot register %zu bytes of scratch: %s", c->area * n, weft_kit_strerror(rc));
		goto err_free;
	}
	rc = c->prim->mem_register(c->comm, c->staging, c->area * n, WEFT_MEM_HOST, &c->staging_mem);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot register %zu bytes of staging: %s", c->area * n, weft_kit_strerror(rc));
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

int ah_comm_setup(const struct weft_algo_comm *ac, void **pack_state)
{
	if (!ac || !ac->comm || !ac->prim || ac->nranks < 1 || ac->rank < 0 || ac->rank >= ac->nranks)
		return -EINVAL;
	struct ah_ctx *c = NULL;
	int rc = ctx_create(ac, &c);
	if (rc == 0)
		*pack_state = c;
	return rc;
}

void ah_comm_teardown(void *pack_state)
{
	if (pack_state)
		ctx_free(pack_state);
}

/* Reads 8 bytes at ptr without trusting that it is host memory: a device
 * address (GPU transports' mem_map) makes the syscall fail with EFAULT where a
 * plain load would crash. */
static int probe_read(const void *ptr, uint64_t *out)
{
	uint64_t v = 0;
	struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)ptr, .iov_len = sizeof(v)};
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(v))
		return -errno;
	*out = v;
	return 0;
}

/* Looks for a host-usable mapping of the peer's scratch (shm maps its
 * segments), so that a chunk is copied straight from the caller's buffer into
 * the peer's slot: no staging copy, no put. The transport's mapping counts
 * only when it shows the canary the peer sent us out of band, which proves it
 * is that very memory and readable here. Both ranks of the pair exchange
 * canaries whatever their mapping, so they stay in step; a rank that finds no
 * usable mapping uses put through staging (what the peer does is its own
 * choice: both paths land in the same slots). */
static int map_peer(struct ah_ctx *c, int peer)
{
	struct ah_peer *p = &c->peers[peer];
	const struct weft_prim_api *pr = c->prim;
	if (!c->map || !WEFT_HAS_OP(pr, struct weft_prim_api, rmem_device_ptr) ||
	    !WEFT_HAS_OP(pr, struct weft_prim_api, comm_send))
		return 0;
	/* With the canary goes the kernel's boot id: only a peer under this
	 * kernel can be mapped, and asking a transport that cannot map makes the
	 * core log a failure (ofi to another host). */
	unsigned char msg[8 + AH_BOOT_ID], in[8 + AH_BOOT_ID];
	char boot[AH_BOOT_ID];
	uint64_t theirs = 0, seen = 0;
	memcpy(msg, &c->canary, 8);
	memcpy(msg + 8, c->boot_id, AH_BOOT_ID);
	int rc = pr->comm_send(c->comm, peer, AH_TAG_CANARY, msg, sizeof(msg));
	if (rc == 0)
		rc = pr->comm_recv(c->comm, peer, AH_TAG_CANARY, in, sizeof(in));
	memcpy(&theirs, in, 8);
	memcpy(boot, in + 8, AH_BOOT_ID);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot exchange the scratch canary with rank %d: %s", peer,
		       weft_kit_strerror(rc));
		return rc;
	}
	void *ptr = NULL;
	/* Only segment memory can be mapped by a peer; asking otherwise would
	 * just make the core log a failure. */
	if (!c->scratch_tp || strncmp(c->boot_id, boot, sizeof(boot)) != 0)
		return 0;
	rc = pr->rmem_device_ptr(p->conn, p->rscratch, &ptr);
	if (rc || !ptr) {
		AH_LOG(WEFT_LOG_DEBUG, "rank %d's scratch is not mapped here (%s): puts go through staging", peer,
		       rc ? weft_kit_strerror(rc) : "no address");
		return 0;
	}
	if ((rc = probe_read(ptr, &seen)) || seen != theirs) {
		AH_LOG(WEFT_LOG_DEBUG, "rank %d's scratch mapping is not host-usable here (%s): puts go through staging",
		       peer, rc ? weft_kit_strerror(rc) : "canary differs");
		return 0;
	}
	p->rmap = (char *)ptr + c->hdr + (size_t)c->rank * c->area;
	AH_LOG(WEFT_LOG_DEBUG, "rank %d's scratch is mapped: chunks are copied straight into it", peer);
	return 0;
}

/* After map_peer: when both ranks map each other, the pair's tokens become
 * plain stores into the headers, which costs a store and a load where a
 * semaphore costs a call into the core on each side. Both sides must agree,
 * so they tell each other what they found. */
static int pair_mode(struct ah_ctx *c, int peer)
{
	struct ah_peer *p = &c->peers[peer];
	const struct weft_prim_api *pr = c->prim;
	if (!c->map || !WEFT_HAS_OP(pr, struct weft_prim_api, rmem_device_ptr) ||
	    !WEFT_HAS_OP(pr, struct weft_prim_api, comm_send))
		return 0; /* the same on both sides: map_peer exchanged nothing either */
	uint8_t mine = p->rmap != NULL, theirs = 0;
	int rc = pr->comm_send(c->comm, peer, AH_TAG_CANARY, &mine, 1);
	if (rc == 0)
		rc = pr->comm_recv(c->comm, peer, AH_TAG_CANARY, &theirs, 1);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot agree on the channel mode with rank %d: %s", peer,
		       weft_kit_strerror(rc));
		return rc;
	}
	if (!mine || !theirs)
		return 0;
	char *rbase = p->rmap - c->hdr - (size_t)c->rank * c->area;
	p->rdata = (uint64_t *)(rbase + 64 + (size_t)c->rank * 128);
	p->rfree = (uint64_t *)(rbase + 64 + (size_t)c->rank * 128 + 64);
	p->ldata = (uint64_t *)(c->scratch_base + 64 + (size_t)peer * 128);
	p->lfree = (uint64_t *)(c->scratch_base + 64 + (size_t)peer * 128 + 64);
	p->rcpu = (const uint32_t *)(rbase + 8);
	p->rpub = (const uint64_t *)(rbase + AH_PUB_OFF(c->nranks));
	p->rpubc = (uint64_t *)(rbase + AH_PUBC_OFF(c->nranks, c->rank));
	p->lpubc = (const uint64_t *)(c->scratch_base + AH_PUBC_OFF(c->nranks, peer));
	p->rpubarea = rbase + c->hdr + (size_t)peer * c->area;
	p->rdir = (const uint64_t *)(rbase + AH_DIR_OFF(c->nranks));
	p->fast = 1;
	return 0;
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
		       c->transport ? c->transport : "", weft_kit_strerror(rc));
		goto err_release;
	}
	if ((rc = pr->mem_exchange(c->scratch_mem, peer, &p->rscratch)) ||
	    (rc = pr->sem_create(c->comm, &p->data_sem)) || (rc = pr->sem_create(c->comm, &p->free_sem)) ||
	    (rc = pr->sem_exchange(p->data_sem, peer, &p->data_rsem)) ||
	    (rc = pr->sem_exchange(p->free_sem, peer, &p->free_rsem))) {
		AH_LOG(WEFT_LOG_ERROR, "cannot set up channels with rank %d: %s", peer, weft_kit_strerror(rc));
		goto err_release;
	}
	if ((rc = map_peer(c, peer)) || (rc = pair_mode(c, peer)))
		goto err_release;
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

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The pair's tokens. "data": chunks sent to the peer, raised by the sender;
 * "free": chunks consumed, raised by the receiver. On a fast pair a token is
 * an atomic store into the peer's header (release: after the chunk's bytes,
 * or after we are done reading its slot) and a load from ours; otherwise a
 * semaphore of the core. */
enum tok { TOK_DATA, TOK_FREE };

static int tok_raise(struct ah_ctx *c, struct ah_peer *p, enum tok t, uint64_t value)
{
	if (p->fast) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_sfence(); /* memcpy may have used non-temporal stores */
#endif
		__atomic_store_n(t == TOK_DATA ? p->rdata : p->rfree, value, __ATOMIC_RELEASE);
		return 0;
	}
	return c->prim->signal(p->conn, t == TOK_DATA ? p->data_rsem : p->free_rsem, value);
}

static uint64_t tok_value(struct ah_ctx *c, struct ah_peer *p, enum tok t)
{
	if (p->fast)
		return __atomic_load_n(t == TOK_DATA ? p->ldata : p->lfree, __ATOMIC_ACQUIRE);
	return c->prim->sem_value(t == TOK_DATA ? p->data_sem : p->free_sem);
}

/* How a wait polls. A mapped peer's token is a plain store
 * into our memory (no progress needed to land it), so the wait polls it
 * itself, as Open MPI's shared-memory path does. When every rank of the comm
 * has a CPU it spins for AH_SPIN_NS first (a yield may hand the CPU to some
 * other process for a whole time slice), then yields between polls: ranks
 * are not bound to CPUs, and a rank spinning on the CPU its peer waits for
 * would hold it until the next scheduler tick (4 ms at HZ=250), per round.
 * When ranks outnumber CPUs it yields from the start. The core's wait
 * sleeps after 0.2 ms, which adds up to a millisecond to a round whenever a
 * peer loses its CPU for a moment. The comm's status is checked while
 * polling, so a dead peer is still reported. After poll_us the wait sleeps
 * between polls (fast pairs) or hands over to the core's weft_sem_wait, which
 * progresses transports and sleeps; peers reached otherwise go there at once. */
#define AH_SPIN_NS 50000u

/* Polls *word (ours, or a peer's through the mapping), or with word NULL
 * the semaphore sem, until it reaches value, by the policy above. A word is
 * the only way its value comes, so after poll_us the wait sleeps between
 * polls; for a semaphore it returns 1 and the caller hands over to the
 * core's wait. */
/* Two ranks of a comm that has a CPU for each rank found waiting on one CPU:
 * the scheduler put them there (ranks are not bound, as mpirun binds Open
 * MPI's) and a busy host may leave them so for whole runs, every round then
 * costing two context switches. The higher rank of the pair steps off: it
 * narrows its affinity to the other CPUs it may use, which moves it at once,
 * and restores the mask at once (so nothing stays bound). At most every 50 ms.
 * Returns 1 when it moved. */
static int nudge_off(struct ah_ctx *c, struct ah_peer *p, int cpu, uint64_t now)
{
	if (!c->nudge || !c->spin || p - c->peers > c->rank || now - c->nudged_ns < 50000000ull)
		return 0;
	c->nudged_ns = now;
	cpu_set_t mask, others;
	if (cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof(mask), &mask) != 0 || !CPU_ISSET(cpu, &mask) ||
	    CPU_COUNT(&mask) < 2)
		return 0;
	others = mask;
	CPU_CLR(cpu, &others);
	if (sched_setaffinity(0, sizeof(others), &others) != 0)
		return 0;
	sched_setaffinity(0, sizeof(mask), &mask);
	AH_LOG(WEFT_LOG_DEBUG, "rank %d waited on CPU %d with rank %d: moved to CPU %d", c->rank, cpu,
	       (int)(p - c->peers), sched_getcpu());
	return 1;
}

/* Polls before poll_wait reads the clock and the CPU: on a fast pair with a
 * CPU per rank most waits end within a few hundred nanoseconds, and the clock
 * read, the CPU lookup and the header store were a tenth of a 2 KiB
 * allreduce (perf, 2-core VM). A few polls cost little where the peer needs
 * this CPU (oversubscribed, or the peer on it): the yield follows. */
#define AH_QUICK_POLLS 32

static int poll_wait(struct ah_ctx *c, struct ah_peer *p, const uint64_t *word, weft_sem_t *sem, uint64_t value)
{
	const struct weft_prim_api *pr = c->prim;
	if (word && c->spin)
		for (unsigned i = 0; i < AH_QUICK_POLLS; i++) {
			if (__atomic_load_n(word, __ATOMIC_ACQUIRE) >= value)
				return 0;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
	uint64_t t0 = now_ns(), limit = c->poll_ns;
	unsigned sleep_us = 0;
	int yielding = 0;
	if (p->fast) {
		/* A peer that last waited on this very CPU needs it to get on:
		 * yield at once instead of spinning (or move, see nudge_off). */
		int cpu = sched_getcpu();
		if (cpu >= 0 && __atomic_load_n(p->rcpu, __ATOMIC_RELAXED) == (uint32_t)cpu + 1) {
			yielding = 1;
			if (nudge_off(c, p, cpu, t0)) {
				cpu = sched_getcpu();
				yielding = 0;
			}
		}
		if (cpu >= 0)
			__atomic_store_n((uint32_t *)(c->scratch_base + 8), (uint32_t)cpu + 1, __ATOMIC_RELAXED);
	}
	for (unsigned i = 1;; i++) {
		if ((word ? __atomic_load_n(word, __ATOMIC_ACQUIRE) : pr->sem_value(sem)) >= value)
			return 0;
		if (sleep_us) {
			struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)sleep_us * 1000};
			nanosleep(&ts, NULL);
			if (sleep_us < 1000)
				sleep_us *= 2;
		} else if (c->spin && !yielding) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		} else {
			sched_yield();
		}
		if (i % 256 == 0 || sleep_us) {
			int rc = pr->comm_status(c->comm);
			if (rc)
				return rc;
			uint64_t dt = now_ns() - t0;
			yielding = yielding || dt > AH_SPIN_NS;
			if (!sleep_us && dt > limit) {
				if (!word)
					return 1;
				sleep_us = 1;
			}
		}
	}
}

static int tok_wait(struct ah_ctx *c, struct ah_peer *p, enum tok t, uint64_t value)
{
	if (tok_value(c, p, t) >= value)
		return 0;
	if (p->fast)
		return poll_wait(c, p, t == TOK_DATA ? p->ldata : p->lfree, NULL, value);
	weft_sem_t *sem = t == TOK_DATA ? p->data_sem : p->free_sem;
	if (p->rmap) {
		int rc = poll_wait(c, p, NULL, sem, value);
		if (rc <= 0)
			return rc;
	}
	return c->prim->sem_wait(sem, value);
}

/* ------------------------------------------------------ call signatures
 * An entry {number, signature} is written before the token (or publish count,
 * or direct line) that announces the number, and read after it: number 0
 * first, so a reader that sees the same number before and after reading the
 * signature has a signature written with it. An entry rewritten for a later
 * call before this rank read it is simply not checked here (the heartbeats
 * still compare the calls). */

void ah_call_begin(struct ah_ctx *c, const struct weft_coll_args *a)
{
	int has = a->size >= offsetof(struct weft_coll_args, p2p_sig) + sizeof(a->p2p_sig);
	c->call_no++;
	c->csig = has ? a->sig : 0;
	int p2p = has && a->coll == WEFT_COLL_SENDRECV;
	for (int p = 0; p < c->nranks; p++)
		c->ssig[p] = c->rsig[p] = p2p ? 0 : c->csig;
	if (p2p && a->p2p_sig) {
		/* The first message each way: what the first chunk carries. */
		const struct weft_p2p_op *ops = a->sendbuf;
		for (size_t i = 0; i < a->count; i++) {
			uint64_t *s = ops[i].is_send ? &c->ssig[ops[i].peer] : &c->rsig[ops[i].peer];
			if (!*s)
				*s = a->p2p_sig[i];
		}
	}
}

static void sig_store(uint64_t *ent, uint64_t no, uint64_t sig)
{
	uint64_t *w = ent + 2 * (no % AH_SIG_ENTRIES);
	__atomic_store_n(&w[0], 0, __ATOMIC_RELAXED);
#ifndef __SANITIZE_THREAD__
	__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
	__atomic_store_n(&w[1], sig, __ATOMIC_RELAXED);
	__atomic_store_n(&w[0], no, __ATOMIC_RELEASE);
}

static int sig_check(const uint64_t *ent, uint64_t no, int peer, uint64_t mine)
{
	const uint64_t *w = ent + 2 * (no % AH_SIG_ENTRIES);
	uint64_t a = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
	uint64_t theirs = __atomic_load_n(&w[1], __ATOMIC_ACQUIRE);
	uint64_t b = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
	if (!mine || !theirs || a != no || b != no || theirs == mine)
		return 0;
	char m[128], t[128];
	weft_kit_sig_describe(mine, m, sizeof(m));
	weft_kit_sig_describe(theirs, t, sizeof(t));
	const char *field = weft_kit_sig_diff(mine, theirs);
	AH_LOG(WEFT_LOG_ERROR, "rank %d's call differs from this rank's: %s here, %s there: the %s differs", peer, m,
	       t, field ? field : "signature");
	return -WEFT_ERR_MISMATCH;
}

/* The first chunk of a call to peer carries the call's signature: stored in
 * the peer's header where it is mapped, else put there from our out line
 * (before the chunk's signal, which orders it). No put of an earlier call
 * reads that line any more: ah_run flushes before it returns. */
static int sig_send(struct ah_ctx *c, int peer, uint64_t no)
{
	struct ah_peer *p = &c->peers[peer];
	uint64_t sig = c->ssig[peer];
	if (!sig || p->run_sent == c->call_no)
		return 0;
	p->run_sent = c->call_no;
	size_t line = 64 + (size_t)c->rank * 128;
	if (p->rmap) {
		char *rbase = p->rmap - c->hdr - (size_t)c->rank * c->area;
		sig_store((uint64_t *)(rbase + line) + 1, no, sig);
		return 0;
	}
	size_t out = AH_SIGOUT_OFF(c->nranks, peer);
	sig_store((uint64_t *)(c->scratch_base + out) + 1, no, sig);
	size_t e = 8 + 16 * (size_t)(no % AH_SIG_ENTRIES);
	return c->prim->put(p->conn, p->rscratch, line + e, c->scratch_mem, out + e, 16);
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
		if ((rc = tok_wait(c, p, TOK_FREE, n - k + 1)))
			return rc;
		/* ...and our staging slot once the put that read it is complete. */
		if (!p->rmap && p->tx_flushed < n - k + 1) {
			if ((rc = pr->flush(p->conn)))
				return rc;
			p->tx_flushed = n;
		}
	}
	if ((rc = sig_send(c, peer, n + 1)))
		return rc;
	if (p->rmap) {
		/* One copy, straight into the peer's slot. The release fence (and
		 * sfence: memcpy may use non-temporal stores) orders it before the
		 * token, whatever the transport's signal does. */
		memcpy(p->rmap + slot * c->chunk, src, bytes);
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_sfence();
#endif
#ifndef __SANITIZE_THREAD__
		/* ThreadSanitizer models no fences (gcc refuses them there); the
		 * token's own release store orders the copy on the mapped paths. */
		__atomic_thread_fence(__ATOMIC_RELEASE);
#endif
		p->tx_sent = p->tx_flushed = n + 1;
		return tok_raise(c, p, TOK_DATA, n + 1);
	}
	size_t soff = (size_t)peer * c->area + slot * c->chunk;
	size_t doff = c->hdr + (size_t)c->rank * c->area + slot * c->chunk;
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
	int rc = tok_wait(c, p, TOK_DATA, n + 1);
	if (rc)
		return rc;
	if (p->run_seen != c->call_no) {
		p->run_seen = c->call_no;
		const uint64_t *line = (const uint64_t *)(c->scratch_base + 64 + (size_t)peer * 128);
		if ((rc = sig_check(line + 1, n + 1, peer, c->rsig[peer])))
			return rc;
	}
	*ptr = c->scratch + (size_t)peer * c->area + (size_t)(n % c->nslots) * c->chunk;
	return 0;
}

/* One more chunk from peer p is consumed. Where we map the peer's memory, our
 * signal to it is a store into its pages that lands without its help, so
 * "slot free" goes back at once and the sender never waits for us to reach
 * the round (a second rendezvous per round). Elsewhere ah_run sends it lazily
 * (see there). */
static int consumed(struct ah_ctx *c, int peer)
{
	struct ah_peer *p = &c->peers[peer];
	p->rx_done++;
	if (!p->rmap)
		return 0;
	int rc = tok_raise(c, p, TOK_FREE, p->rx_done);
	if (rc == 0)
		p->free_sent = p->rx_done;
	return rc;
}

/* Whether [p, p + len) lies in an allocation of the core's allocator that a
 * transport of ours lets peers map: a peer's mapping outlives the
 * allocation's reuse of the same address, so its registration is not kept.
 * Unknown (a core without the query): not kept either. */
static int in_mapped_alloc(const struct ah_ctx *c, const void *p, size_t len)
{
	if (!c->maps_allocs)
		return 0;
	if (!WEFT_HAS_OP(c->prim, struct weft_prim_api, mem_in_alloc))
		return 1;
	return c->prim->mem_in_alloc(p, len) != 0;
}

/* Whether registrations may be kept across calls: every pair maps each other
 * and every rank's transports write by address (the same on every rank). */
static int cache_ok(struct ah_ctx *c)
{
	return ah_pull_ready(c) && c->cached_min && c->unpinned_all;
}

/* With every pair fast and every rank on a CPU of its own, the cached direct
 * gather beats publish-and-pull from 8K blocks up: no line written by one
 * core has to reach the other, which pull needs and which some hosts do
 * slowly. Oversubscribed, pull wins at every size. Elsewhere a per-call
 * registration pays from direct_min up
 * (docs/perf/2026-11-30-vm2core-cpu-collectives-vs-openmpi-2.md, -4.md). */
int ah_use_direct(struct ah_ctx *c, size_t block)
{
	if (cache_ok(c))
		return (c->spin || c->cached_oversub) && block >= c->cached_min &&
		       (!c->cached_max || block <= c->cached_max);
	return c->direct_min && block >= c->direct_min;
}

/* Bytes of our part copied and put at a time where it goes in pieces (see
 * ah_direct_gather): small enough to stay in a core's L2 between the put and
 * the copy (piece sizes compared in
 * docs/perf/2026-11-30-vm2core-cpu-collectives-vs-openmpi-2.md); in place
 * the part goes in one put (each put is a syscall for shm). */
#define AH_DIRECT_PIECE ((size_t)512 * 1024)
/* Smallest part that the cached direct gather puts from the input itself. */
#define AH_DIRECT_SRC_MIN ((size_t)128 << 10)

/* dst = src (n bytes) with streaming stores where the ISA has them, ordered
 * by the sfence at the end: for data this core will not read again soon. */
static void copy_nt(char *dst, const char *src, size_t n)
{
#if defined(__x86_64__)
	size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
	if (head > n)
		head = n;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16));
		__m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48));
		_mm_stream_si128((__m128i *)(void *)(dst + i), a);
		_mm_stream_si128((__m128i *)(void *)(dst + i + 16), b);
		_mm_stream_si128((__m128i *)(void *)(dst + i + 32), d);
		_mm_stream_si128((__m128i *)(void *)(dst + i + 48), e);
	}
	memcpy(dst + i, src + i, n - i);
	_mm_sfence();
#else
	memcpy(dst, src, n);
#endif
}

/* The registration of the input the cached direct gather puts from, kept for
 * the next call on the same (src, len) like the output's. Only this rank
 * uses it (a put's source), so nothing is exchanged; one in a shared segment
 * is registered for the call only (see in_mapped_alloc). */
static int src_registration(struct ah_ctx *c, const void *src, size_t len)
{
	const struct weft_prim_api *pr = c->prim;
	if (c->src_mem && c->src_ptr == src && c->src_len == len)
		return 0;
	pr->mem_deregister(c->src_mem);
	c->src_mem = NULL;
	int rc = pr->mem_register(c->comm, (void *)(uintptr_t)src, len, WEFT_MEM_HOST, &c->src_mem);
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot register the %zu-byte input buffer: %s", len, weft_kit_strerror(rc));
		return rc;
	}
	c->src_ptr = src;
	c->src_len = len;
	c->src_volatile = in_mapped_alloc(c, src, len);
	return 0;
}

/* Every rank owns one part [off[p], off[p] + bytes[p]) of buf (len bytes, the
 * same on every rank) and writes it straight into every peer's buf: one copy
 * per byte, with no slot in between (for shm, process_vm_writev from our
 * buffer into theirs). Each part counts as one chunk of the pair's data
 * stream (the token is raised after the put), so the engine's counters stay
 * in step; it takes no slot.
 *
 * buf must be registered and exchanged, which costs a bootstrap round trip
 * per peer. Where every pair is fast (ah_pull_ready), the registration is
 * kept for the next call on the same (buf, len), as Open MPI's registration
 * cache does: each rank numbers its registrations (generations) and, on
 * entering, publishes the number of its current one in its header; a pair
 * exchanges again only when either side's generation differs from the pair
 * it last exchanged, which both sides see alike. Keeping is safe only where
 * every rank's transports write unmapped memory by address without pinning
 * (WEFT_TP_CAP_UNPINNED_WRITES; shm's CMA): whatever buffer lives at that
 * address when both ranks name it again is the one to write. A peer's buffer that this rank reaches through a
 * mapping (a shared segment, which can be freed and replaced at the same
 * address) is not kept: this rank then moves to a new generation, so the
 * next call exchanges afresh. Elsewhere buf is registered for the call only. */
int ah_direct_gather(struct ah_ctx *c, void *buf, size_t len, const size_t *off, const size_t *bytes, const void *src)
{
	const struct weft_prim_api *pr = c->prim;
	int n = c->nranks, me = c->rank, rc;
	weft_mem_t *mem = NULL;
	int cached = cache_ok(c);
	if (c->broken)
		return c->broken;
	if (cached && c->dir_mem && c->dir_ptr == buf && c->dir_len == len && !c->dir_volatile) {
		mem = c->dir_mem;
	} else {
		if ((rc = pr->mem_register(c->comm, buf, len, WEFT_MEM_HOST, &mem))) {
			AH_LOG(WEFT_LOG_ERROR, "cannot register the %zu-byte output buffer: %s", len,
			       weft_kit_strerror(rc));
			return rc;
		}
		if (cached) {
			pr->mem_deregister(c->dir_mem);
			c->dir_mem = mem;
			c->dir_ptr = buf;
			c->dir_len = len;
			c->dir_gen++;
			c->dir_volatile = in_mapped_alloc(c, buf, len);
		}
	}
	if (cached) {
		uint64_t *line = (uint64_t *)(c->scratch_base + AH_DIR_OFF(n));
		uint64_t seq = ++c->dir_seq;
		if (c->csig && c->dir_sent != c->call_no) {
			c->dir_sent = c->call_no;
			sig_store(line + 2, seq, c->csig);
		}
		__atomic_store_n(&line[1], c->dir_gen, __ATOMIC_RELAXED);
		__atomic_store_n(&line[0], seq, __ATOMIC_RELEASE);
		/* A peer rewrites its line only after this call, which needs our
		 * token: its generation stays readable until we raise it. */
		for (int p = 0; p < n; p++) {
			struct ah_peer *pp = &c->peers[p];
			if (p == me)
				continue;
			if ((rc = poll_wait(c, pp, &pp->rdir[0], NULL, seq)))
				goto err_broken;
			if (pp->dir_seen != c->call_no) {
				pp->dir_seen = c->call_no;
				if ((rc = sig_check(pp->rdir + 2, seq, p, c->csig)))
					goto err_broken;
			}
			uint64_t theirs = __atomic_load_n(&pp->rdir[1], __ATOMIC_RELAXED);
			if (pp->rdirect && pp->rd_mine == c->dir_gen && pp->rd_theirs == theirs)
				continue;
			pr->rmem_release(pp->rdirect);
			pp->rdirect = NULL;
			/* Ascending peers: the global (lower, higher) order of ah_ensure_all. */
			if ((rc = pr->mem_exchange(mem, p, &pp->rdirect))) {
				AH_LOG(WEFT_LOG_ERROR, "cannot exchange the output buffer with rank %d: %s", p,
				       weft_kit_strerror(rc));
				c->broken = rc;
				return rc;
			}
			pp->rd_mine = c->dir_gen;
			pp->rd_theirs = theirs;
		}
	} else {
		for (int p = 0; p < n; p++) {
			if (p != me && (rc = pr->mem_exchange(mem, p, &c->peers[p].rdirect))) {
				AH_LOG(WEFT_LOG_ERROR, "cannot exchange the output buffer with rank %d: %s", p,
				       weft_kit_strerror(rc));
				goto err_release;
			}
		}
	}
	if (cached && src && bytes[me] >= AH_DIRECT_SRC_MIN) {
		/* Cached (shm): the puts read src itself, registered and kept as
		 * the output is, and our part is copied to its place after them,
		 * the order of Open MPI's two-rank allgather (send from the input,
		 * then the local copy), faster than copying first for large
		 * blocks. From nt_min bytes it goes in pieces, each copied with
		 * streaming stores right after its puts read it into cache: the
		 * copy then neither reads its destination nor evicts what the next
		 * piece needs (both measured in
		 * docs/perf/2026-11-30-vm2core-cpu-collectives-vs-openmpi-2.md; the
		 * default of nt_min in docs/perf/2026-12-01-host-allreduce-tuning.md). */
		if ((rc = src_registration(c, src, bytes[me])))
			goto err_broken;
		size_t piece = c->nt_min && bytes[me] >= c->nt_min ? AH_DIRECT_PIECE : bytes[me];
		for (size_t o = 0; piece && o < bytes[me]; o += piece) {
			size_t m = bytes[me] - o < piece ? bytes[me] - o : piece;
			for (int i = 1; i < n; i++) {
				struct ah_peer *pp = &c->peers[(me + i) % n];
				if ((rc = pr->put(pp->conn, pp->rdirect, off[me] + o, c->src_mem, o, m)))
					goto err_broken;
			}
			if (piece < bytes[me])
				copy_nt((char *)buf + off[me] + o, (const char *)src + o, m);
			else
				memcpy((char *)buf + off[me] + o, (const char *)src + o, m);
		}
		if (c->src_volatile) {
			pr->mem_deregister(c->src_mem);
			c->src_mem = NULL;
		}
	} else {
		/* Piece by piece: the copy of a piece from src to its place leaves
		 * it in this core's cache for the puts that read it next, where
		 * copying the whole part first reads it back from memory once it
		 * outgrows the cache. In place, one put. */
		size_t piece = src ? AH_DIRECT_PIECE : bytes[me];
		for (size_t o = 0; piece && o < bytes[me]; o += piece) {
			size_t m = bytes[me] - o < piece ? bytes[me] - o : piece;
			if (src)
				memcpy((char *)buf + off[me] + o, (const char *)src + o, m);
			for (int i = 1; i < n; i++) {
				struct ah_peer *pp = &c->peers[(me + i) % n];
				if ((rc = pr->put(pp->conn, pp->rdirect, off[me] + o, mem, off[me] + o, m)))
					goto err_broken;
			}
		}
	}
	for (int i = 1; i < n; i++) {
		int p = (me + i) % n;
		struct ah_peer *pp = &c->peers[p];
		/* A fast pair's token is our own store: the put must be complete first. */
		if (pp->fast && bytes[me] && (rc = pr->flush(pp->conn)))
			goto err_broken;
		if ((rc = tok_raise(c, pp, TOK_DATA, pp->tx_sent + 1)))
			goto err_broken;
		pp->tx_sent++;
	}
	for (int i = 1; i < n; i++) {
		int p = (me - i + n) % n;
		struct ah_peer *pp = &c->peers[p];
		if ((rc = tok_wait(c, pp, TOK_DATA, pp->rx_done + 1)) || (rc = consumed(c, p)))
			goto err_broken;
	}
	/* Our puts read buf and write the peers' buffers: both must be done
	 * before the handles go (and the caller may reuse buf). */
	for (int p = 0; p < n; p++) {
		struct ah_peer *pp = &c->peers[p];
		if (p != me && (rc = pr->flush(pp->conn)))
			goto err_broken;
		pp->tx_flushed = pp->tx_sent;
	}
	if (cached)
		return 0; /* kept for the next call */
	goto out_release;

err_broken:
	ah_broken(c, rc);
	if (cached)
		return rc; /* ctx_free releases what is kept */
	goto out_release;
err_release:
	/* The exchange is pairwise and blocking: a failed one leaves later
	 * pairs out of step too. */
	c->broken = rc;
out_release:
	for (int p = 0; p < n; p++) {
		pr->rmem_release(c->peers[p].rdirect);
		c->peers[p].rdirect = NULL;
	}
	pr->mem_deregister(mem);
	return rc;
}

int ah_pull_ready(struct ah_ctx *c)
{
	if (c->pull_ok >= 0)
		return c->pull_ok;
	if (c->nranks < 2 || !WEFT_HAS_OP(c->prim, struct weft_prim_api, comm_allgather)) {
		c->pull_ok = 0; /* the same on every rank */
		return 0;
	}
	/* Every rank gets here in the same collective call, whatever its own
	 * parameters say, so the allgather always pairs up. Bit 0: pull (the
	 * parameter, and every pair of ours fast); bit 1: a CPU per rank. */
	uint8_t mine = (uint8_t)(c->pull && !c->broken), *all = (uint8_t *)c->dbytes; /* n bytes at least */
	for (int p = 0; p < c->nranks; p++)
		if (p != c->rank && !c->peers[p].fast)
			mine = 0;
	mine |= (uint8_t)(c->spin << 1 | (c->unpinned != 0) << 2);
	int rc = c->prim->comm_allgather(c->comm, &mine, all, 1);
	int ok = rc == 0, spin_all = 1, unpinned_all = 1;
	for (int p = 0; ok && p < c->nranks; p++) {
		ok = (all[p] & 1) != 0;
		spin_all &= (all[p] >> 1) & 1;
		unpinned_all &= (all[p] >> 2) & 1;
	}
	if (rc) {
		AH_LOG(WEFT_LOG_ERROR, "cannot agree on the publish-and-pull mode: %s", weft_kit_strerror(rc));
		c->broken = rc;
	}
	c->spin_all = ok && spin_all;
	c->unpinned_all = ok && unpinned_all;
	c->pull_ok = ok;
	AH_LOG(WEFT_LOG_DEBUG, "publish-and-pull %s", ok ? "on: every pair maps each other" : "off");
	return ok;
}

/* Where lines written by one core reach another slowly, pushing each chunk
 * into the reducer's slot beats publish-and-pull from rsag_push_min up; where
 * they move fast, pulling is faster, and pushing still ahead of Open MPI
 * (docs/perf/2026-12-01-vm2core-rsag-push-oversub.md). */
int ah_rsag_pushes(struct ah_ctx *c, size_t block)
{
	return (!c->spin_all || c->rsag_push_always) && c->rsag_push_min && block >= c->rsag_push_min;
}

/* Pushing the one-shot allreduce's input into the peer's slot beats
 * publish-and-pull with two ranks, each with a CPU, up to small_max; with 4
 * and 8 ranks, or more ranks than CPUs, pulling wins
 * (docs/perf/2026-12-01-vm2core-rsag-push-oversub.md,
 * docs/perf/2026-12-01-host-allreduce-tuning.md). */
int ah_oneshot_pushes(struct ah_ctx *c, size_t bytes)
{
	return c->nranks == 2 && c->spin_all && c->oneshot_push_max && bytes <= c->oneshot_push_max;
}

/* Publish and pull. Every rank writes each chunk once, into its own slot
 * (memory its cache already owns), and every peer reads it from there: one
 * pass across cores per chunk and reader, where pushing into the reader's
 * slot and reading it back takes two. A slot is reused once every peer has
 * consumed the chunk it held (their counters in our header); every rank
 * publishes in every round, so one sequence number serves all peers. */
int ah_pull_run(struct ah_ctx *c, uint64_t rounds, ah_fill_fn fill, ah_plan_fn consume, void *arg)
{
	int n = c->nranks, me = c->rank, rc = 0;
	uint64_t k = c->nslots;
	uint64_t *mypub = (uint64_t *)(c->scratch_base + AH_PUB_OFF(n));
	if (c->broken)
		return c->broken;
	for (uint64_t t = 0; t < rounds; t++) {
		uint64_t m = c->pub_seq;
		if (m >= k)
			for (int i = 1; i < n; i++) {
				struct ah_peer *pp = &c->peers[(me + i) % n];
				if ((rc = poll_wait(c, pp, pp->lpubc, NULL, m - k + 1)))
					goto err;
			}
		size_t soff = (size_t)(m % k) * c->chunk;
		c->pub_slot = c->scratch + (size_t)me * c->area + soff;
		if ((rc = fill(arg, c, t, c->pub_slot)))
			goto err;
		if (c->csig && c->pull_sent != c->call_no) {
			c->pull_sent = c->call_no;
			sig_store(mypub + 1, m + 1, c->csig);
		}
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_sfence();
#endif
		__atomic_store_n(mypub, m + 1, __ATOMIC_RELEASE);
		for (int i = 1; i < n; i++) {
			int p = (me - i + n) % n;
			struct ah_peer *pp = &c->peers[p];
			if ((rc = poll_wait(c, pp, pp->rpub, NULL, m + 1)))
				goto err;
			if (pp->pull_seen != c->call_no) {
				pp->pull_seen = c->call_no;
				if ((rc = sig_check(pp->rpub + 1, m + 1, p, c->csig)))
					goto err;
			}
			c->rx_ptr[p] = pp->rpubarea + soff;
		}
		c->rx_ptr[me] = c->pub_slot;
		if ((rc = consume(arg, c, t)))
			goto err;
		for (int i = 1; i < n; i++) {
			struct ah_peer *pp = &c->peers[(me + i) % n];
			__atomic_store_n(pp->rpubc, m + 1, __ATOMIC_RELEASE);
		}
		c->pub_seq = m + 1;
	}
	return 0;

err:
	ah_broken(c, rc);
	return rc;
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
			if ((rc = tok_raise(c, pp, TOK_FREE, idx)))
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
			if (c->rx_bytes[p] && (rc = consumed(c, p)))
				goto err;
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
	ah_broken(c, rc);
	return rc;
}
