/* Device channels: memory the comm's GPU transport allocates (device memory,
 * mapped pinned host memory), memory channels whose handles kernels use
 * (include/weft/device.h), and the host-mapped abort flags their waits poll. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>

#include "comm.h"
#include "log.h"

/* Allocations made through a transport, so weft_mem_free finds which one and
 * both views. Process-wide and locked, because struct weft_comm has no field
 * for them yet (a hook in comm.h would move this list onto the comm). */
struct devmem {
	struct devmem *next;
	weft_comm_t *comm;
	struct weft__tp *tp;
	void *user; /* what the caller got */
	void *host, *dev;
	enum weft_mem_type type;
};

struct weft_memchan {
	struct devmem_chan_link {
		struct weft_memchan *next;
	} link;
	weft_conn_t *conn;
	struct weft_memchan_dev dev; /* filled at create */
	void *state;                 /* device memory: expected, outbound, epoch */
	void *abort_host;            /* host view of this channel's abort flag */
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct devmem *g_mem;
static struct weft_memchan *g_chans;

/* The transport of comm that allocates `type`: the first with mem_alloc that
 * succeeds. */
static int tp_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, struct devmem *m)
{
	int rc = -ENOTSUP;
	for (int i = 0; i < comm->ntp; i++) {
		struct weft__tp *tp = &comm->tp[i];
		if (!WEFT__TP_HAS(tp, mem_alloc))
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
			return 0;
		}
		if (rc != -ENOTSUP)
			return rc;
	}
	return rc;
}

static void tp_free(struct devmem *m)
{
	pthread_mutex_lock(&m->tp->lock);
	WEFT__TP_CALL(m->tp, mem_free, m->tp->tc, m->host, m->dev);
	pthread_mutex_unlock(&m->tp->lock);
}

WEFT_API int weft_mem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **ptr)
{
	if (!comm || !ptr || (unsigned)type >= WEFT_MEM_TYPE_COUNT) {
		WEFT_ERROR("weft_mem_alloc: %s", !comm ? "NULL comm" : !ptr ? "NULL ptr" : "unknown memory type");
		return -EINVAL;
	}
	struct devmem *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	int rc = tp_alloc(comm, type, bytes, m);
	if (rc != 0) {
		if (rc == -ENOTSUP)
			WEFT_ERROR("weft_mem_alloc: no transport of this comm allocates memory of type %d "
				   "(a GPU transport such as nvlink is needed)", (int)type);
		free(m);
		return rc;
	}
	pthread_mutex_lock(&g_lock);
	m->next = g_mem;
	g_mem = m;
	pthread_mutex_unlock(&g_lock);
	*ptr = m->user;
	return 0;
}

WEFT_API int weft_mem_free(weft_comm_t *comm, void *ptr)
{
	if (!ptr)
		return 0;
	struct devmem *m = NULL;
	pthread_mutex_lock(&g_lock);
	for (struct devmem **pp = &g_mem; *pp; pp = &(*pp)->next)
		if ((*pp)->user == ptr && (*pp)->comm == comm) {
			m = *pp;
			*pp = m->next;
			break;
		}
	pthread_mutex_unlock(&g_lock);
	if (!m) {
		WEFT_ERROR("weft_mem_free: %p was not allocated by weft_mem_alloc on this comm", ptr);
		return -EINVAL;
	}
	tp_free(m);
	free(m);
	return 0;
}

WEFT_API int weft_sem_create_on(weft_comm_t *comm, enum weft_mem_type type, weft_sem_t **sem)
{
	if (type == WEFT_MEM_HOST)
		return weft_sem_create(comm, sem);
	/* A semaphore pool in device memory needs sem.c to allocate its pools
	 * through weft_mem_alloc and to read tokens through the transport. */
	WEFT_ERROR("weft_sem_create_on: semaphores in memory type %d are not supported yet", (int)type);
	return -ENOTSUP;
}

/* Maps an imported region of conn's transport into this GPU. */
static int map_rmem(weft_conn_t *conn, weft_rmem_t *r, void **dev)
{
	if (r->comm != conn->comm || r->peer != conn->peer) {
		WEFT_ERROR("weft_rmem_device_ptr: the region was imported from rank %d, the connection goes to rank %d",
			   r->peer, conn->peer);
		return -EINVAL;
	}
	void *rmh = r->rmh ? r->rmh[conn->tpi] : NULL;
	if (!rmh) {
		WEFT_ERROR("weft_memchan_create: rank %d's region was not imported by transport %s", r->peer,
			   conn->tp->name);
		return -ENOTSUP;
	}
	pthread_mutex_lock(&conn->tp->lock);
	int rc = WEFT__TP_CALL(conn->tp, mem_map, conn->tp->tc, rmh, dev);
	pthread_mutex_unlock(&conn->tp->lock);
	if (rc == -ENOSYS)
		rc = -ENOTSUP;
	if (rc != 0)
		WEFT_ERROR("weft_memchan_create: transport %s cannot map rank %d's memory: %s", conn->tp->name,
			   r->peer, weft_strerror(rc));
	return rc;
}

WEFT_API int weft_rmem_device_ptr(weft_conn_t *conn, weft_rmem_t *rmem, void **ptr)
{
	if (!conn || !rmem || !ptr) {
		WEFT_ERROR("weft_rmem_device_ptr: NULL %s", !conn ? "conn" : !rmem ? "rmem" : "out-pointer");
		return -EINVAL;
	}
	void *dev = NULL;
	int rc = map_rmem(conn, rmem, &dev);
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
	weft_comm_t *comm = conn->comm;
	weft_memchan_t *ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->conn = conn;
	struct weft_memchan_dev *d = &ch->dev;
	d->version = WEFT_DEVICE_HANDLE_VERSION;
	int rc = 0;
	if (dst) {
		if ((rc = map_rmem(conn, dst, &d->dst)) != 0)
			goto err_free;
		d->dst_len = dst->len;
	}
	if (src) {
		d->src = src->ptr;
		d->src_len = src->len;
	}
	if (sem) {
		enum weft_mem_type t = WEFT_MEM_HOST;
		pthread_mutex_lock(&conn->tp->lock);
		int q = WEFT__TP_CALL(conn->tp, mem_query, conn->tp->tc, sem->token, &t);
		pthread_mutex_unlock(&conn->tp->lock);
		if (q != 0 || t != WEFT_MEM_CUDA) {
			WEFT_ERROR("weft_memchan_create: the semaphore's token is not in device memory "
				   "(make it with weft_sem_create_on(WEFT_MEM_CUDA))");
			rc = -ENOTSUP;
			goto err_free;
		}
		d->sem = sem->token;
	}
	if (rsem) {
		void *p;
		if ((rc = map_rmem(conn, rsem->rmem, &p)) != 0)
			goto err_free;
		d->rsem = (uint64_t *)((char *)p + rsem->off);
	}
	if ((rc = weft_mem_alloc(comm, WEFT_MEM_CUDA, 64, &ch->state)) != 0)
		goto err_free;
	if ((rc = weft_mem_alloc(comm, WEFT_MEM_HOST, 64, &ch->abort_host)) != 0)
		goto err_state;
	d->expected = (uint64_t *)ch->state;
	d->outbound = d->expected + 1;
	d->epoch = (uint32_t *)(d->expected + 2);
	/* The device view of the abort flag. */
	pthread_mutex_lock(&g_lock);
	for (struct devmem *m = g_mem; m; m = m->next)
		if (m->user == ch->abort_host)
			d->abort_flag = m->dev;
	ch->link.next = g_chans;
	g_chans = ch;
	pthread_mutex_unlock(&g_lock);
	*out = ch;
	return 0;
err_state:
	weft_mem_free(comm, ch->state);
err_free:
	free(ch);
	return rc;
}

WEFT_API int weft_memchan_destroy(weft_memchan_t *ch)
{
	if (!ch)
		return 0;
	pthread_mutex_lock(&g_lock);
	for (weft_memchan_t **pp = &g_chans; *pp; pp = &(*pp)->link.next)
		if (*pp == ch) {
			*pp = ch->link.next;
			break;
		}
	pthread_mutex_unlock(&g_lock);
	weft_mem_free(ch->conn->comm, ch->abort_host);
	weft_mem_free(ch->conn->comm, ch->state);
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

WEFT_API int weft_port_device_handle(weft_port_t *port, struct weft_port_dev *dev)
{
	/* The FIFO must live in mapped pinned memory with a device-side head:
	 * port.c allocates it with malloc today (see plugins/nvlink/README.md). */
	WEFT_ERROR("weft_port_device_handle: device producers need the port FIFO in mapped memory; not supported yet");
	return -ENOTSUP;
}

/* Raises the abort flag of every memory channel of comm, so waiting kernels
 * return WEFT_DEV_ABORTED. For weft_comm_abort and peer failure. */
void weft__devchan_abort(weft_comm_t *comm)
{
	pthread_mutex_lock(&g_lock);
	for (weft_memchan_t *ch = g_chans; ch; ch = ch->link.next)
		if (ch->conn->comm == comm)
			__atomic_store_n((uint32_t *)ch->abort_host, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_lock);
}
