/* SPDX-License-Identifier: Apache-2.0 */
/* Staging: device data over a transport that cannot register it, in chunks
 * through pinned host bounce buffers (a GPU transport's stage ops copy), with
 * up to `depth` chunks in flight; the far side's agent, in its progress
 * thread, copies each chunk to the device and applies signals after them. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "config.h"
#include "le.h"
#include "log.h"
#include "mem.h"
#include "progress.h"
#include "stage.h"
#include "topo.h"

/* Each side's bounce block, one pinned allocation registered with every
 * transport, its blob swapped at connect time:
 *   credit u64 @0: descriptors of this side the peer has completed (peer writes)
 *   arrive u64 @64: descriptors the peer has posted here (peer writes)
 *   tx descriptors @128, rx descriptors, depth x 64 bytes each
 *   tx data, rx data (page-aligned), depth x chunk bytes each
 * Descriptor n (chunk or signal) uses slot n % depth of each ring; the sender
 * posts n only once credit > n - depth, so the peer has drained that slot. */
#define OFF_CREDIT 0
#define OFF_ARRIVE 64
#define OFF_DESC 128
#define DESC_BYTES 64
#define DEPTH_MAX 64
#define CHUNK_MIN 4096
#define CHUNK_MAX (1ull << 30)

/* Descriptor, little-endian: kind u32 | mem type u32 | seq u64 | addr u64 (the
 * receiver's address) | len or value u64. */
enum { DESC_CHUNK = 1, DESC_SIGNAL = 2 };

struct rx_slot {
	int kind;
	int started; /* a copy runs under ticket */
	uint64_t ticket;
	uint64_t *token; /* DESC_SIGNAL into host memory */
	uint64_t value;
};

struct weft__stage {
	struct weft__link link; /* in comm->stage's list, from attach to destroy */
	weft_conn_t *conn;
	struct weft__tp *stp; /* the transport whose stage ops copy */
	const struct weft_tp_stage_ops *ops;
	size_t chunk;
	unsigned depth;
	unsigned char *block;
	size_t off_rxdesc, off_txdata, off_rxdata, block_len;
	weft_mem_t *mem;   /* the block, registered */
	weft_rmem_t *rmem; /* the peer's block */
	int held;          /* this stage holds the progress thread */
	/* Send side, under tx_lock (the caller's thread, or a port proxy). */
	pthread_mutex_t tx_lock;
	uint64_t posted; /* descriptors posted */
	uint64_t chunks; /* chunks posted, for the trace */
	int post_step;   /* how far the head descriptor's post got (-EAGAIN) */
	/* A put or signal that answered -EAGAIN midway, to be resumed by the
	 * same caller (a port proxy's head trigger, or a blocked weft_signal):
	 * others wait until it completes, so descriptors never interleave. */
	const void *owner;
	struct stage_job {
		uint64_t base, n, started, done;
		int copied; /* the head chunk's copy completed; its post answered -EAGAIN */
	} job;
	uint64_t tickets[DEPTH_MAX];
	/* Receive side: the progress thread only. */
	uint64_t taken, consumed, credited;
	struct rx_slot rx[DEPTH_MAX];
	struct weft__stage_trace *trace;
	size_t trace_len;
};

struct weft__stage_comm {
	pthread_mutex_t lock;
	struct weft__link list;
};

/* --------------------------------------------------------------- params */
/* core.stage_chunk and core.stage_depth are declared with the core's other
 * parameters (config.c); the bounds are checked here, where they matter. */
static int stage_params_get(size_t *chunk, unsigned *depth)
{
	uint64_t c = 0;
	int64_t d = 0;
	int rc = weft__param_get("core", "stage_chunk", WEFT_PARAM_SIZE, &c, NULL);
	if (rc == 0)
		rc = weft__param_get("core", "stage_depth", WEFT_PARAM_INT, &d, NULL);
	if (rc != 0)
		return rc;
	if (c < CHUNK_MIN || c > CHUNK_MAX || d < 1 || d > DEPTH_MAX) {
		WEFT_ERROR("staging: core.stage_chunk %llu (%u..%llu) or core.stage_depth %lld (1..%d) out of range",
			   (unsigned long long)c, CHUNK_MIN, CHUNK_MAX, (long long)d, DEPTH_MAX);
		return -WEFT_ERR_CONFIG;
	}
	*chunk = (size_t)c;
	*depth = (unsigned)d;
	return 0;
}

/* ---------------------------------------------------------------- trace */
static void trace_open(struct weft__stage *st)
{
#ifdef WEFT_TEST_HOOKS
	const char *path = getenv("WEFT_TEST_STAGE_TRACE");
	if (!path || !*path)
		return;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(struct weft__stage_trace)) {
		if (fd >= 0)
			close(fd);
		WEFT_WARN("staging: WEFT_TEST_STAGE_TRACE=%s cannot be mapped", path);
		return;
	}
	void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	if (((struct weft__stage_trace *)p)->magic != WEFT__STAGE_TRACE_MAGIC) {
		munmap(p, (size_t)sb.st_size);
		return;
	}
	st->trace = p;
	st->trace_len = (size_t)sb.st_size;
#else
	(void)st;
#endif
}

static void trace_close(struct weft__stage *st)
{
	if (st->trace)
		munmap(st->trace, st->trace_len);
}

/* ------------------------------------------------------------ lifecycle */
static int stage_tp(weft_comm_t *comm)
{
	for (int i = 0; i < comm->ntp; i++) {
		const struct weft_tp_stage_ops *so =
			WEFT__TP_HAS(&comm->tp[i], stage) ? comm->tp[i].ops->stage : NULL;
		if (so && WEFT_HAS_OP(so, struct weft_tp_stage_ops, host_alloc) &&
		    WEFT_HAS_OP(so, struct weft_tp_stage_ops, host_free) &&
		    WEFT_HAS_OP(so, struct weft_tp_stage_ops, copy_start) &&
		    WEFT_HAS_OP(so, struct weft_tp_stage_ops, copy_test))
			return i;
	}
	return -1;
}

static void stage_free(weft_comm_t *comm, struct weft__stage *st)
{
	if (st->rmem)
		weft__rmem_free(st->rmem);
	if (st->mem)
		weft__mem_free(st->mem);
	if (st->block) {
		pthread_mutex_lock(&st->stp->lock);
		int rc = st->ops->host_free(st->stp->tc, st->block);
		pthread_mutex_unlock(&st->stp->lock);
		if (rc != 0)
			WEFT_WARN("transport %s: freeing a staging buffer failed: %s", st->stp->name, weft_strerror(rc));
	}
	if (st->held)
		weft__progress_release(comm);
	trace_close(st);
	pthread_mutex_destroy(&st->tx_lock);
	free(st);
}

void weft__stage_prepare(weft_comm_t *comm, enum weft_mem_type mem, struct weft__stage **out)
{
	*out = NULL;
	int si = mem == WEFT_MEM_HOST ? -1 : stage_tp(comm);
	if (si < 0)
		return;
	struct weft__stage *st = calloc(1, sizeof(*st));
	if (!st)
		return;
	pthread_mutex_init(&st->tx_lock, NULL);
	st->stp = &comm->tp[si];
	st->ops = st->stp->ops->stage;
	int rc = stage_params_get(&st->chunk, &st->depth);
	if (rc == 0) {
		st->off_rxdesc = OFF_DESC + (size_t)st->depth * DESC_BYTES;
		st->off_txdata = (st->off_rxdesc + (size_t)st->depth * DESC_BYTES + 4095) & ~(size_t)4095;
		st->off_rxdata = st->off_txdata + (size_t)st->depth * st->chunk;
		st->block_len = st->off_rxdata + (size_t)st->depth * st->chunk;
		void *p = NULL;
		pthread_mutex_lock(&st->stp->lock);
		rc = st->ops->host_alloc(st->stp->tc, st->block_len, &p);
		pthread_mutex_unlock(&st->stp->lock);
		if (rc != 0)
			WEFT_WARN("transport %s: no pinned staging buffer of %zu bytes: %s; device data is not staged",
				  st->stp->name, st->block_len, weft_strerror(rc));
		st->block = p;
	}
	if (rc == 0)
		rc = weft__mem_register(comm, st->block, st->block_len, WEFT_MEM_HOST, 1, &st->mem);
	/* The far side's agent needs the progress thread for as long as the
	 * connection lives, also between this rank's weft calls. */
	if (rc == 0 && (rc = weft__progress_hold(comm)) == 0)
		st->held = 1;
	if (rc != 0) {
		stage_free(comm, st);
		return;
	}
	trace_open(st);
	*out = st;
}

void weft__stage_discard(weft_comm_t *comm, struct weft__stage *st)
{
	if (st)
		stage_free(comm, st);
}

static int stage_drain(weft_comm_t *comm, int *pending);

static int stage_comm_get(weft_comm_t *comm, struct weft__stage_comm **out)
{
	struct weft__stage_comm *sc = __atomic_load_n(&comm->stage, __ATOMIC_ACQUIRE);
	if (!sc) {
		/* Connections are made by one thread of the comm at a time (each
		 * meets its peer's), so only the first one gets here. */
		sc = calloc(1, sizeof(*sc));
		if (!sc)
			return -ENOMEM;
		pthread_mutex_init(&sc->lock, NULL);
		weft__list_init(&sc->list);
		__atomic_store_n(&comm->stage, sc, __ATOMIC_RELEASE);
		weft__progress_set_stage_drain(comm, stage_drain);
	}
	*out = sc;
	return 0;
}

/* Swaps the blocks' blobs with the peer, and both sides' outcome. */
static int swap_blocks(weft_conn_t *conn, struct weft__stage *st)
{
	weft_comm_t *comm = conn->comm;
	void *blob = NULL;
	size_t blen = 0;
	int rc = weft__mem_blob(st->mem, &blob, &blen);
	uint64_t hdr[3] = {rc == 0 ? blen : 0, st->chunk, st->depth}, phdr[3] = {0, 0, 0};
	int brc = weft__bootstrap_send(comm->bs, conn->peer, WEFT__TAG_CONN, hdr, sizeof(hdr));
	if (brc == 0 && rc == 0)
		brc = weft__bootstrap_send(comm->bs, conn->peer, WEFT__TAG_CONN, blob, blen);
	free(blob);
	if (brc == 0)
		brc = weft__bootstrap_recv(comm->bs, conn->peer, WEFT__TAG_CONN, phdr, sizeof(phdr));
	if (brc != 0)
		return brc;
	if (phdr[0] > (1u << 20)) {
		WEFT_ERROR("staging: rank %d announces a %llu-byte blob", conn->peer, (unsigned long long)phdr[0]);
		return -WEFT_ERR_PROTOCOL;
	}
	/* A side that failed sends no blob; both still swap their outcome. */
	void *pblob = phdr[0] ? malloc((size_t)phdr[0]) : NULL;
	if (phdr[0] && !pblob)
		return -ENOMEM;
	if (phdr[0])
		brc = weft__bootstrap_recv(comm->bs, conn->peer, WEFT__TAG_CONN, pblob, (size_t)phdr[0]);
	if (brc == 0 && rc == 0 && !phdr[0])
		rc = -WEFT_ERR_PEER;
	if (brc == 0 && rc == 0 && (phdr[1] != st->chunk || phdr[2] != st->depth)) {
		WEFT_ERROR("staging: rank %d stages %llu-byte chunks %llu deep, this rank %zu deep %u (core.stage_*)",
			   conn->peer, (unsigned long long)phdr[1], (unsigned long long)phdr[2], st->chunk, st->depth);
		rc = -WEFT_ERR_MISMATCH;
	}
	if (brc == 0 && rc == 0)
		rc = weft__mem_import(comm, conn->peer, pblob, (size_t)phdr[0], 1, &st->rmem);
	free(pblob);
	if (brc != 0)
		return brc;
	if (rc == 0 && (st->rmem->len != st->block_len || !st->rmem->rmh[conn->tpi])) {
		WEFT_ERROR("staging: rank %d's staging buffer does not match this rank's or %s cannot reach it",
			   conn->peer, conn->tp->name);
		rc = -WEFT_ERR_PROTOCOL;
	}
	int32_t ack = rc, pack = 0;
	brc = weft__bootstrap_send(comm->bs, conn->peer, WEFT__TAG_CONN, &ack, sizeof(ack));
	if (brc == 0)
		brc = weft__bootstrap_recv(comm->bs, conn->peer, WEFT__TAG_CONN, &pack, sizeof(pack));
	if (brc != 0)
		return brc;
	return rc != 0 ? rc : pack != 0 ? -WEFT_ERR_PEER : 0;
}

int weft__stage_attach(weft_conn_t *conn, struct weft__stage *st, int peer_offers, enum weft_mem_type mem)
{
	weft_comm_t *comm = conn->comm;
	if (!st)
		return 0;
	/* Both sides reach the same answer: both offered, and the same
	 * transport's declared memory types. */
	if (!peer_offers || conn->tp == st->stp || weft__topo_declares_mem(conn->tp->ops, mem) == 1) {
		stage_free(comm, st);
		return 0;
	}
	struct weft__stage_comm *sc = NULL;
	int rc = swap_blocks(conn, st);
	if (rc == 0)
		rc = stage_comm_get(comm, &sc);
	if (rc != 0) {
		WEFT_ERROR("staging: setting up the staged connection to rank %d failed: %s", conn->peer,
			   weft_strerror(rc));
		stage_free(comm, st);
		return rc;
	}
	st->conn = conn;
	pthread_mutex_lock(&sc->lock);
	weft__list_push(&sc->list, &st->link);
	pthread_mutex_unlock(&sc->lock);
	conn->stage = st;
	WEFT_DEBUG("staging device data to rank %d over %s through %s: %zu-byte chunks, %u in flight", conn->peer,
		   conn->tp->name, st->stp->name, st->chunk, st->depth);
	return 0;
}

void weft__stage_destroy(weft_conn_t *conn)
{
	struct weft__stage *st = conn->stage;
	if (!st)
		return;
	struct weft__stage_comm *sc = conn->comm->stage;
	pthread_mutex_lock(&sc->lock);
	weft__list_del(&st->link);
	pthread_mutex_unlock(&sc->lock);
	conn->stage = NULL;
	stage_free(conn->comm, st);
}

void weft__stage_comm_free(weft_comm_t *comm)
{
	struct weft__stage_comm *sc = comm->stage;
	if (!sc)
		return;
	weft__progress_set_stage_drain(comm, NULL);
	pthread_mutex_destroy(&sc->lock);
	free(sc);
	comm->stage = NULL;
}

/* ------------------------------------------------------------ send side */
int weft__stage_wants(const weft_conn_t *conn, const weft_rmem_t *dst, const weft_mem_t *src)
{
	return conn->stage && (!dst->rmh[conn->tpi] || !src->mh[conn->tpi]);
}

static uint64_t credit(const struct weft__stage *st)
{
	return __atomic_load_n((const uint64_t *)(const void *)(st->block + OFF_CREDIT), __ATOMIC_ACQUIRE);
}

static unsigned char *txdesc(struct weft__stage *st, uint64_t seq)
{
	return st->block + OFF_DESC + (seq % st->depth) * DESC_BYTES;
}

/* Posts descriptor seq (already written) and, for a chunk, its data: put
 * the data, put the descriptor, raise the peer's arrival token. Resumable
 * after -EAGAIN through st->post_step. Called with tx_lock and no other. */
static int post_desc(struct weft__stage *st, uint64_t seq, size_t data_len)
{
	weft_conn_t *conn = st->conn;
	struct weft__tp *tp = conn->tp;
	void *rmh = st->rmem->rmh[conn->tpi], *mh = st->mem->mh[conn->tpi];
	uint64_t slot = seq % st->depth;
	int rc = 0;
	pthread_mutex_lock(&tp->lock);
	if (st->post_step == 0 && data_len > 0)
		rc = tp->ops->put(conn->ep, rmh, st->off_rxdata + slot * st->chunk, mh,
				  st->off_txdata + slot * st->chunk, data_len);
	if (rc == 0 && st->post_step <= 1) {
		st->post_step = 1;
		rc = tp->ops->put(conn->ep, rmh, st->off_rxdesc + slot * DESC_BYTES, mh, OFF_DESC + slot * DESC_BYTES,
				  DESC_BYTES);
	}
	if (rc == 0) {
		st->post_step = 2;
		rc = tp->ops->signal(conn->ep, rmh, OFF_ARRIVE, seq + 1);
	}
	pthread_mutex_unlock(&tp->lock);
	if (rc == 0) {
		st->post_step = 0;
		st->posted = seq + 1;
	}
	return rc;
}

static void write_desc(unsigned char *d, uint32_t kind, enum weft_mem_type type, uint64_t seq, uint64_t addr,
		       uint64_t arg)
{
	memset(d, 0, DESC_BYTES);
	put32(d, kind);
	put32(d + 4, (uint32_t)type);
	put64(d + 8, seq);
	put64(d + 16, addr);
	put64(d + 24, arg);
}

static int copy_start(struct weft__stage *st, void *dst, const void *src, size_t len, enum weft_stage_dir dir,
		      uint64_t *ticket)
{
	pthread_mutex_lock(&st->stp->lock);
	int rc = st->ops->copy_start(st->stp->tc, dst, src, len, dir, ticket);
	pthread_mutex_unlock(&st->stp->lock);
	if (rc != 0)
		WEFT_ERROR("transport %s: starting a staging copy of %zu bytes failed: %s", st->stp->name, len,
			   weft_strerror(rc));
	return rc;
}

static int copy_test(struct weft__stage *st, uint64_t ticket)
{
	pthread_mutex_lock(&st->stp->lock);
	int rc = st->ops->copy_test(st->stp->tc, ticket);
	pthread_mutex_unlock(&st->stp->lock);
	if (rc != 0 && rc != -EAGAIN)
		WEFT_ERROR("transport %s: a staging copy failed: %s", st->stp->name, weft_strerror(rc));
	return rc;
}

/* While the pipeline waits: the comm's health, the data transport's
 * progress, a polite pause. */
static int put_wait(weft_conn_t *conn, struct weft__backoff *b)
{
	int rc = weft__comm_status(conn->comm);
	if (rc == 0)
		rc = weft__tp_progress(conn->tp);
	weft__comm_note_error(conn->comm, rc);
	if (rc == 0)
		weft__backoff_wait(b);
	return rc;
}

/* The pipeline: copies to the host start as soon as a slot is free (up to
 * depth ahead of the far side's drain), and chunks are posted in order as
 * their copies complete; so the copy of chunk k+1 runs while chunk k is on
 * the wire and chunk k-1 is copied to the far device. One pass, never
 * waiting: 0 once every chunk of j is posted, -EAGAIN before (*moved says
 * whether the pass advanced), or an error. Called with tx_lock. */
static int stage_put_pass(struct weft__stage *st, struct stage_job *j, const weft_rmem_t *dst, uint64_t dst_off,
			  const weft_mem_t *src, uint64_t src_off, size_t len, int *moved)
{
	weft_conn_t *conn = st->conn;
	int rc = 0;
	*moved = 0;
	for (uint64_t c = credit(st); j->started < j->n && j->base + j->started - c < st->depth; j->started++) {
		uint64_t seq = j->base + j->started, off = j->started * st->chunk;
		size_t clen = len - off < st->chunk ? len - off : st->chunk;
		rc = copy_start(st, st->block + st->off_txdata + (seq % st->depth) * st->chunk,
				(const char *)src->ptr + src_off + off, clen, WEFT_STAGE_TO_HOST,
				&st->tickets[seq % st->depth]);
		if (rc != 0)
			return rc;
		*moved = 1;
	}
	if (j->done < j->started) {
		uint64_t seq = j->base + j->done, off = j->done * st->chunk;
		size_t clen = len - off < st->chunk ? len - off : st->chunk;
		rc = j->copied ? 0 : copy_test(st, st->tickets[seq % st->depth]);
		if (rc == 0 && !j->copied) {
			j->copied = 1;
			write_desc(txdesc(st, seq), DESC_CHUNK, dst->type, seq, dst->base + dst_off + off, clen);
			weft__stage_trace_add(st->trace, conn->comm->rank, WEFT__EV_PUT_START, 0, st->chunks);
		}
		if (rc == 0)
			rc = post_desc(st, seq, clen);
		if (rc == 0) {
			weft__stage_trace_add(st->trace, conn->comm->rank, WEFT__EV_PUT_END, 0, st->chunks);
			st->chunks++;
			j->copied = 0;
			j->done++;
			*moved = 1;
		} else if (rc != -EAGAIN) {
			return rc;
		}
	}
	return j->done == j->n ? 0 : -EAGAIN;
}

static void job_init(struct weft__stage *st, struct stage_job *j, size_t len)
{
	*j = (struct stage_job){.base = st->posted, .n = (len + st->chunk - 1) / st->chunk};
}

int weft__stage_put(weft_conn_t *conn, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
		    size_t len)
{
	struct weft__stage *st = conn->stage;
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	int rc;
	pthread_mutex_lock(&st->tx_lock);
	while (st->owner) { /* a port's put or a signal is midway */
		pthread_mutex_unlock(&st->tx_lock);
		if ((rc = put_wait(conn, &b)) != 0)
			return rc;
		pthread_mutex_lock(&st->tx_lock);
	}
	struct stage_job j;
	job_init(st, &j, len);
	weft__backoff_init(&b, 1000);
	for (;;) {
		int moved;
		rc = stage_put_pass(st, &j, dst, dst_off, src, src_off, len, &moved);
		if (rc != -EAGAIN)
			break;
		if (moved)
			weft__backoff_init(&b, 1000);
		else if ((rc = put_wait(conn, &b)) != 0)
			break;
	}
	pthread_mutex_unlock(&st->tx_lock);
	return rc;
}

/* The port proxy's staged put: a pass at a time, so that the proxy serves
 * its other ports (and the receive side) while this one's chunks flow. */
int weft__stage_put_once(weft_conn_t *conn, const void *owner, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src,
			 uint64_t src_off, size_t len)
{
	struct weft__stage *st = conn->stage;
	if (pthread_mutex_trylock(&st->tx_lock) != 0)
		return -EAGAIN;
	int rc = -EAGAIN, moved;
	if (!st->owner) {
		st->owner = owner;
		job_init(st, &st->job, len);
	}
	if (st->owner == owner) {
		rc = stage_put_pass(st, &st->job, dst, dst_off, src, src_off, len, &moved);
		if (rc != -EAGAIN)
			st->owner = NULL;
	}
	pthread_mutex_unlock(&st->tx_lock);
	return rc;
}

/* Trylock: a port proxy must never block behind a caller's long put. */
int weft__stage_signal_once(weft_conn_t *conn, const void *owner, weft_rsem_t *rsem, uint64_t value)
{
	struct weft__stage *st = conn->stage;
	if (pthread_mutex_trylock(&st->tx_lock) != 0)
		return -EAGAIN;
	int rc = -EAGAIN;
	uint64_t seq = st->posted;
	if (st->owner == owner || (!st->owner && seq - credit(st) < st->depth)) {
		if (!st->owner) {
			write_desc(txdesc(st, seq), DESC_SIGNAL, rsem->rmem->type, seq, rsem->rmem->base + rsem->off,
				   value);
			st->post_step = 1;
			st->owner = owner;
		}
		rc = post_desc(st, seq, 0);
		if (rc != -EAGAIN)
			st->owner = NULL;
	}
	pthread_mutex_unlock(&st->tx_lock);
	return rc;
}

int weft__stage_flush_once(weft_conn_t *conn, int retry)
{
	(void)retry;
	struct weft__stage *st = conn->stage;
	if (pthread_mutex_trylock(&st->tx_lock) != 0)
		return -EAGAIN;
	int rc = !st->owner && credit(st) >= st->posted ? 0 : -EAGAIN;
	pthread_mutex_unlock(&st->tx_lock);
	if (rc != 0)
		return rc;
	struct weft__tp *tp = conn->tp;
	pthread_mutex_lock(&tp->lock);
	rc = tp->ops->flush(conn->ep);
	pthread_mutex_unlock(&tp->lock);
	return rc;
}

/* --------------------------------------------------------- receive side */
/* [addr, addr + len) must lie in one region this rank registered: the peer
 * names addresses, and a wrong one must not be written. */
static int rx_dst_ok(weft_comm_t *comm, uint64_t addr, uint64_t len)
{
	int ok = 0;
	pthread_mutex_lock(&comm->lock);
	for (struct weft__link *l = comm->mems.next; !ok && l != &comm->mems; l = l->next) {
		const weft_mem_t *m = weft__container_of(l, weft_mem_t, link);
		uint64_t b = (uint64_t)(uintptr_t)m->ptr;
		ok = addr >= b && addr - b <= m->len && len <= m->len - (addr - b);
	}
	pthread_mutex_unlock(&comm->lock);
	return ok;
}

/* Takes descriptor seq from the rx ring: a chunk's copy to its destination
 * starts; a signal waits for its turn. */
static int rx_take(struct weft__stage *st, uint64_t seq)
{
	weft_conn_t *conn = st->conn;
	const unsigned char *d = st->block + st->off_rxdesc + (seq % st->depth) * DESC_BYTES;
	struct rx_slot *s = &st->rx[seq % st->depth];
	uint32_t kind = get32(d), type = get32(d + 4);
	uint64_t dseq = get64(d + 8), addr = get64(d + 16), arg = get64(d + 24);
	memset(s, 0, sizeof(*s));
	if (dseq != seq || (kind != DESC_CHUNK && kind != DESC_SIGNAL) || type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("staging: rank %d sent a malformed descriptor #%llu", conn->peer, (unsigned long long)seq);
		return -WEFT_ERR_PROTOCOL;
	}
	s->kind = (int)kind;
	if (kind == DESC_CHUNK) {
		if (arg == 0 || arg > st->chunk || !rx_dst_ok(conn->comm, addr, arg)) {
			WEFT_ERROR("staging: rank %d names %llu bytes at 0x%llx, not inside a region of this rank",
				   conn->peer, (unsigned long long)arg, (unsigned long long)addr);
			return -WEFT_ERR_PROTOCOL;
		}
		s->started = 1;
		return copy_start(st, (void *)(uintptr_t)addr, st->block + st->off_rxdata + (seq % st->depth) * st->chunk,
				  (size_t)arg, WEFT_STAGE_TO_DEVICE, &s->ticket);
	}
	if (addr % 8 != 0) {
		WEFT_ERROR("staging: rank %d signals a token at unaligned 0x%llx", conn->peer, (unsigned long long)addr);
		return -WEFT_ERR_PROTOCOL;
	}
	s->token = (uint64_t *)(uintptr_t)addr;
	s->value = arg;
	s->started = type != WEFT_MEM_HOST ? 0 : -1; /* -1: a host store, no copy */
	return 0;
}

/* Completes the oldest taken descriptor: 0 done, -EAGAIN not yet. A signal is
 * applied only here, so after every earlier chunk's copy completed. */
static int rx_complete(struct weft__stage *st, uint64_t seq)
{
	struct rx_slot *s = &st->rx[seq % st->depth];
	if (s->kind == DESC_SIGNAL && s->started == -1) {
		__atomic_store_n(s->token, s->value, __ATOMIC_RELEASE);
		return 0;
	}
	if (s->kind == DESC_SIGNAL && !s->started) {
		/* A device token: the value's bytes sit in the pinned rx descriptor,
		 * which stays put until this descriptor is credited. */
		const unsigned char *d = st->block + st->off_rxdesc + (seq % st->depth) * DESC_BYTES;
		int rc = copy_start(st, s->token, d + 24, 8, WEFT_STAGE_TO_DEVICE, &s->ticket);
		if (rc != 0)
			return rc;
		s->started = 1;
	}
	return copy_test(st, s->ticket);
}

/* One round of one staged connection's receive side: how much moved. */
static int rx_round(struct weft__stage *st, int *pending)
{
	weft_conn_t *conn = st->conn;
	int moved = 0, rc = 0;
	uint64_t arrived = __atomic_load_n((uint64_t *)(void *)(st->block + OFF_ARRIVE), __ATOMIC_ACQUIRE);
	if (arrived - st->consumed > st->depth) {
		WEFT_ERROR("staging: rank %d posted %llu descriptors past the %u it was credited", conn->peer,
			   (unsigned long long)(arrived - st->consumed), st->depth);
		return -WEFT_ERR_PROTOCOL;
	}
	for (; st->taken < arrived; st->taken++, moved++)
		if ((rc = rx_take(st, st->taken)) != 0)
			return rc;
	while (st->consumed < st->taken) {
		rc = rx_complete(st, st->consumed);
		if (rc == -EAGAIN)
			break;
		if (rc != 0)
			return rc;
		st->consumed++;
		moved++;
	}
	if (st->credited < st->consumed) {
		struct weft__tp *tp = conn->tp;
		pthread_mutex_lock(&tp->lock);
		rc = tp->ops->signal(conn->ep, st->rmem->rmh[conn->tpi], OFF_CREDIT, st->consumed);
		pthread_mutex_unlock(&tp->lock);
		if (rc == 0)
			st->credited = st->consumed;
		else if (rc != -EAGAIN)
			return rc;
	}
	if (st->consumed < st->taken || st->credited < st->consumed)
		*pending = 1;
	return moved;
}

/* The progress thread's round over every staged connection. */
static int stage_drain(weft_comm_t *comm, int *pending)
{
	struct weft__stage_comm *sc = __atomic_load_n(&comm->stage, __ATOMIC_ACQUIRE);
	if (!sc)
		return 0;
	int worked = 0;
	pthread_mutex_lock(&sc->lock);
	for (struct weft__link *l = sc->list.next; l != &sc->list; l = l->next) {
		struct weft__stage *st = weft__container_of(l, struct weft__stage, link);
		int rc = rx_round(st, pending);
		if (rc < 0) {
			pthread_mutex_unlock(&sc->lock);
			WEFT_ERROR("staging: receiving from rank %d failed: %s", st->conn->peer, weft_strerror(rc));
			return rc;
		}
		worked += rc;
	}
	pthread_mutex_unlock(&sc->lock);
	return worked;
}
