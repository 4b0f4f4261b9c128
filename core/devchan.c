/* SPDX-License-Identifier: Apache-2.0 */
/* Device channels: memory the comm's GPU transport allocates (device memory,
 * mapped pinned host memory), memory channels whose handles kernels use
 * (include/weft/device.h), and the host-mapped abort flags their waits poll. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>

#include "base.h"
#include "devchan.h"
#include "log.h"
#include "progress.h"
#include "topo.h"
#include "handles.h"

/* Allocations made through a transport, so weft_mem_free finds which one and
 * both views. Process-wide and locked (g_lock, a leaf: nothing is taken under
 * it). */
struct devmem {
	struct devmem *next;
	weft_comm_t *comm;
	struct weft__tp *tp;
	void *user; /* what the caller got */
	void *host, *dev;
	size_t bytes;
	enum weft_mem_type type;
};

struct weft_memchan {
	struct weft_memchan *next;
	weft_conn_t *conn;
	struct weft_memchan_dev dev; /* filled at create */
	void *state;                 /* device memory: expected, outbound, epoch */
	uint32_t *abort_host;        /* host view of this channel's abort flag */
	void *abort_dev;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct devmem *g_mem;
static struct weft_memchan *g_chans;

/* The transport of comm that allocates `type`: the first with mem_alloc that
 * succeeds; with `declared`, first those whose probe declares the type (a
 * GPU transport may allocate host memory too, pinned and mapped for its
 * device, which the core's own channels want, but its peers cannot map it as
 * they map shm's segments). */
static int tp_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, struct devmem *m, int declared)
{
	int rc = -ENOTSUP;
	/* With `declared`, pass 0 asks the declaring transports, pass 1 the rest. */
	for (int pass = 0; pass < (declared ? 2 : 1); pass++)
		for (int i = 0; i < comm->ntp; i++) {
			struct weft__tp *tp = &comm->tp[i];
			if (!WEFT__TP_HAS(tp, mem_alloc) ||
			    (declared && (weft__topo_declares_mem(tp->ops, type) == 1) != (pass == 0)))
				continue;
			void *host = NULL, *dev = NULL;
			pthread_mutex_lock(&tp->lock);
			rc = WEFT__TP_CALL(tp, mem_alloc, tp->tc, type, bytes, &host, &dev);
			pthread_mutex_unlock(&tp->lock);
			if (rc == 0) {
				m->comm = comm;
				m->tp = tp;
				m->host = host;
				m->dev = dev;
				m->type = type;
				m->user = type == WEFT_MEM_HOST ? host : dev;
				m->bytes = bytes;
				return 0;
			}
			if (rc != -ENOTSUP && rc != -ENOSYS)
				return rc;
			rc = -ENOTSUP;
		}
	return rc;
}

static void tp_free(struct devmem *m)
{
	pthread_mutex_lock(&m->tp->lock);
	WEFT__TP_CALL(m->tp, mem_free, m->tp->tc, m->host, m->dev);
	pthread_mutex_unlock(&m->tp->lock);
}

static int devmem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, int declared, void **host_ptr,
			void **dev_ptr)
{
	struct devmem *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	int rc = tp_alloc(comm, type, bytes, m, declared);
	if (rc != 0) {
		free(m);
		return rc;
	}
	pthread_mutex_lock(&g_lock);
	m->next = g_mem;
	g_mem = m;
	pthread_mutex_unlock(&g_lock);
	*host_ptr = m->host;
	*dev_ptr = m->dev;
	return 0;
}

int weft__devmem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr)
{
	return devmem_alloc(comm, type, bytes, 0, host_ptr, dev_ptr);
}

/* Unlinks the allocation of comm whose user pointer (or, with user NULL, whose
 * host or device view) matches. */
static struct devmem *devmem_take(weft_comm_t *comm, const void *user, const void *host, const void *dev)
{
	struct devmem *m = NULL;
	pthread_mutex_lock(&g_lock);
	for (struct devmem **pp = &g_mem; *pp; pp = &(*pp)->next) {
		struct devmem *e = *pp;
		if (e->comm != comm)
			continue;
		if (user ? e->user == user : (host ? e->host == host : e->dev == dev)) {
			m = e;
			*pp = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return m;
}

void weft__devmem_free(weft_comm_t *comm, void *host_ptr, void *dev_ptr)
{
	if (!host_ptr && !dev_ptr)
		return;
	struct devmem *m = devmem_take(comm, NULL, host_ptr, dev_ptr);
	if (m) {
		tp_free(m);
		free(m);
	}
}

/* quiet: a pack's allocation (prim->mem_alloc), which asks and falls back,
 * so "no transport allocates" is its answer, logged at debug; the pack logs
 * where it is an error for it. */
static int buf_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr, int quiet)
{
	if (!comm || !ptr || (unsigned)type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_mem_alloc: %s", !comm ? "NULL comm" : !ptr ? "NULL ptr" : "unknown memory type");
		return -EINVAL;
	}
	void *host = NULL, *dev = NULL;
	int rc = devmem_alloc(comm, type, bytes, 1, &host, &dev);
	enum weft_log_level lvl = quiet ? WEFT_LOG_DEBUG : WEFT_LOG_ERROR;
	if (rc == -ENOTSUP && type == WEFT_MEM_HOST)
		weft__log(lvl, NULL, "weft_mem_alloc: no transport of this comm allocates host memory its peers can map "
				     "(the shm transport does)");
	else if (rc == -ENOTSUP)
		weft__log(lvl, NULL, "weft_mem_alloc: no transport of this comm allocates memory of type %d "
				     "(a GPU transport such as nvlink is needed)", (int)type);
	if (rc != 0)
		return rc;
	*ptr = type == WEFT_MEM_HOST ? host : dev;
	return 0;
}

int weft__buf_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr)
{
	return buf_alloc(comm, type, bytes, ptr, 0);
}

int weft__buf_alloc_quiet(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr)
{
	return buf_alloc(comm, type, bytes, ptr, 1);
}

int weft__buf_in_alloc(const void *ptr, size_t len)
{
	uintptr_t a = (uintptr_t)ptr;
	int in = 0;
	pthread_mutex_lock(&g_lock);
	for (struct devmem *m = g_mem; m && !in; m = m->next) {
		uintptr_t b = (uintptr_t)m->user;
		in = ptr && a >= b && len <= m->bytes && a - b <= m->bytes - len;
	}
	pthread_mutex_unlock(&g_lock);
	return in;
}

int weft__buf_free(weft_comm_t *comm, void *ptr)
{
	if (!ptr)
		return 0;
	struct devmem *m = devmem_take(comm, ptr, NULL, NULL);
	if (!m) {
		WEFT_ERROR("weft_mem_free: %p was not allocated by weft_mem_alloc on this comm", ptr);
		return -EINVAL;
	}
	tp_free(m);
	free(m);
	return 0;
}

/* Maps an imported region of conn's transport into this GPU. who names
 * the caller in the log; a query (weft_rmem_device_ptr) logs a transport
 * that cannot map at debug only: packs ask it of every connection. */
static int map_rmem(weft_conn_t *conn, weft_rmem_t *r, void **dev, const char *who, int query)
{
	if (r->comm != conn->comm || r->peer != conn->peer) {
		WEFT_ERROR("%s: the region was imported from rank %d, the connection goes to rank %d", who, r->peer,
			   conn->peer);
		return -EINVAL;
	}
	enum weft_log_level cannot = query ? WEFT_LOG_DEBUG : WEFT_LOG_ERROR;
	void *rmh = r->rmh ? r->rmh[conn->tpi] : NULL;
	if (!rmh) {
		weft__log(cannot, NULL, "%s: rank %d's region was not imported by transport %s", who, r->peer,
			  conn->tp->name);
		return -ENOTSUP;
	}
	pthread_mutex_lock(&conn->tp->lock);
	int rc = WEFT__TP_CALL(conn->tp, mem_map, conn->tp->tc, rmh, dev);
	pthread_mutex_unlock(&conn->tp->lock);
	if (rc == -ENOSYS)
		rc = -ENOTSUP;
	if (rc != 0)
		weft__log(rc == -ENOTSUP ? cannot : WEFT_LOG_ERROR, NULL,
			  "%s: transport %s cannot map rank %d's memory: %s", who, conn->tp->name, r->peer,
			  weft_strerror(rc));
	return rc;
}

WEFT_API int weft_rmem_device_ptr(weft_conn_t *conn, weft_rmem_t *rmem, void **ptr)
{
	if (!conn || !rmem || !ptr) {
		WEFT_ERROR("weft_rmem_device_ptr: NULL %s", !conn ? "conn" : !rmem ? "rmem" : "out-pointer");
		return -EINVAL;
	}
	void *dev = NULL;
	int rc = map_rmem(conn, rmem, &dev, "weft_rmem_device_ptr", 1);
	if (rc == 0)
		*ptr = dev;
	return rc;
}

WEFT_API int weft_memchan_create(weft_conn_t *conn, weft_rmem_t *dst, weft_mem_t *src, weft_sem_t *sem,
				 weft_rsem_t *rsem, weft_memchan_t **out)
{
	if (!conn || !out || (!dst && !src)) {
		WEFT_ERROR("weft_memchan_create: NULL %s", !conn ? "conn" : !out ? "chan out-pointer" : "dst and src");
		return -EINVAL;
	}
	if (!WEFT__TP_HAS(conn->tp, mem_map) || !WEFT__TP_HAS(conn->tp, mem_alloc)) {
		WEFT_ERROR("weft_memchan_create: transport %s cannot map peer memory into a GPU", conn->tp->name);
		return -ENOTSUP;
	}
	if (sem && (sem->comm != conn->comm || sem->type == WEFT_MEM_HOST)) {
		WEFT_ERROR("weft_memchan_create: %s", sem->comm != conn->comm
				? "the semaphore belongs to another communicator"
				: "the semaphore's token is in host memory (make it with weft_sem_create_on(WEFT_MEM_CUDA))");
		return sem->comm != conn->comm ? -EINVAL : -ENOTSUP;
	}
	weft_comm_t *comm = conn->comm;
	weft_memchan_t *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->conn = conn;
	struct weft_memchan_dev *d = &ch->dev;
	d->version = WEFT_DEVICE_HANDLE_VERSION;
	int rc = 0;
	if (dst) {
		if ((rc = map_rmem(conn, dst, &d->dst, "weft_memchan_create", 0)) != 0)
			goto err_free;
		d->dst_len = dst->len;
	}
	if (src) {
		d->src = src->ptr;
		d->src_len = src->len;
	}
	if (sem)
		d->sem = sem->token;
	if (rsem) {
		void *p;
		if ((rc = map_rmem(conn, rsem->rmem, &p, "weft_memchan_create", 0)) != 0)
			goto err_free;
		d->rsem = (uint64_t *)((char *)p + rsem->off);
	}
	void *host = NULL;
	/* The state lives beside the semaphore; without one, in whichever device
	 * memory the comm's GPU transport allocates. */
	rc = weft__devmem_alloc(comm, sem ? sem->type : WEFT_MEM_CUDA, 64, &host, &ch->state);
	if (rc == -ENOTSUP && !sem)
		rc = weft__devmem_alloc(comm, WEFT_MEM_HIP, 64, &host, &ch->state);
	if (rc != 0)
		goto err_free;
	if ((rc = weft__devmem_alloc(comm, WEFT_MEM_HOST, 64, &host, &ch->abort_dev)) != 0)
		goto err_state;
	ch->abort_host = host;
	d->expected = (uint64_t *)ch->state;
	d->outbound = d->expected + 1;
	d->epoch = (uint32_t *)(d->expected + 2);
	d->abort_flag = (volatile uint32_t *)ch->abort_dev;
	/* The proxy thread runs while channels exist, so that it notices a peer
	 * failure the bootstrap sees and raises the flag (see port.c). */
	if ((rc = weft__progress_hold(comm)) != 0)
		goto err_abort;
	if ((rc = weft__abort_flag_add(comm, ch->abort_host)) != 0)
		goto err_release;
	pthread_mutex_lock(&g_lock);
	ch->next = g_chans;
	g_chans = ch;
	pthread_mutex_unlock(&g_lock);
	*out = ch;
	return 0;
err_release:
	weft__progress_release(comm);
err_abort:
	weft__devmem_free(comm, ch->abort_host, ch->abort_dev);
err_state:
	weft__devmem_free(comm, NULL, ch->state);
err_free:
	free(ch);
	return rc;
}

WEFT_API int weft_memchan_destroy(weft_memchan_t *ch)
{
	if (!ch)
		return 0;
	pthread_mutex_lock(&g_lock);
	for (weft_memchan_t **pp = &g_chans; *pp; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	pthread_mutex_unlock(&g_lock);
	weft_comm_t *comm = ch->conn->comm;
	weft__abort_flag_del(ch->abort_host);
	weft__progress_release(comm);
	weft__devmem_free(comm, ch->abort_host, ch->abort_dev);
	weft__devmem_free(comm, NULL, ch->state);
	free(ch);
	return 0;
}

WEFT_API int weft_memchan_device_handle(const weft_memchan_t *ch, struct weft_memchan_dev *dev)
{
	if (!ch || !dev) {
		WEFT_ERROR("weft_memchan_device_handle: NULL %s", ch ? "dev" : "chan");
		return -EINVAL;
	}
	*dev = ch->dev;
	return 0;
}

void weft__devchan_destroy_all(weft_comm_t *comm)
{
	for (;;) {
		weft_memchan_t *ch = NULL;
		pthread_mutex_lock(&g_lock);
		for (weft_memchan_t *c = g_chans; c && !ch; c = c->next)
			if (c->conn->comm == comm)
				ch = c;
		pthread_mutex_unlock(&g_lock);
		if (!ch)
			break;
		weft_memchan_destroy(ch);
	}
	/* What the user allocated and did not free goes with the transports. */
	for (;;) {
		struct devmem *m = NULL;
		pthread_mutex_lock(&g_lock);
		for (struct devmem **pp = &g_mem; *pp; pp = &(*pp)->next)
			if ((*pp)->comm == comm) {
				m = *pp;
				*pp = m->next;
				break;
			}
		pthread_mutex_unlock(&g_lock);
		if (!m)
			break;
		tp_free(m);
		free(m);
	}
	weft__abort_flags_drop(comm);
}
