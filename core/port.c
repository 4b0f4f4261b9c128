/* SPDX-License-Identifier: Apache-2.0 */
/* Port channels: a FIFO of 16-byte triggers that a producer (host threads, or
 * GPU kernels after weft_port_device_handle) fills, and their drain into the
 * transports, which the comm's progress thread (progress.c) runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/device.h>

#include "base.h"
#include "config.h"
#include "conn.h"
#include "devchan.h"
#include "log.h"
#include "mem.h"
#include "port.h"
#include "progress.h"
#include "sem.h"

/* A trigger is two 64-bit words. Word 0 is written last, with release order,
 * and is never 0 for a valid trigger (its low 4 bits are the kind); the proxy
 * sets it back to 0 after consuming the slot.
 *   put:    w0 = kind | dst rmem id << 4 | src mem id << 18 | len << 32
 *           w1 = dst offset | src offset << 32
 *   signal: w0 = kind | rsem id << 4      w1 = value
 *   flush:  w0 = kind                     w1 = 0
 * So a put moves less than 4 GiB at offsets below 4 GiB, as in MSCCL++; larger
 * transfers go through weft_put. Ids are below WEFT__ID_MAX (14 bits). */
enum trigger_kind { TRIG_PUT = 1, TRIG_SIGNAL = 2, TRIG_FLUSH = 3 };

struct weft__trigger {
	uint64_t w0, w1;
};

/* The FIFO: plain memory and counters, so a device producer can share it.
 * head: slots reserved by host producers (fetch-add). tail: slots the proxy
 * has consumed and cleared. done: one past the position of the last flush
 * trigger the proxy completed. A producer may write slot h once h - tail < depth.
 * When a transport of the comm allocates mapped pinned memory, the FIFO lives
 * there, so kernels write slots and read tail and done over PCIe; their
 * reservation counter is a separate word in device memory (head_dev), since
 * atomics on host memory across PCIe are not safe for reservation. */
struct weft__fifo {
	_Alignas(64) uint64_t head;
	_Alignas(64) uint64_t tail;
	_Alignas(64) uint64_t done;
	_Alignas(64) struct weft__trigger slot[];
};

struct weft_port {
	struct weft__link link;
	weft_conn_t *conn;
	uint64_t depth;
	struct weft__fifo *fifo;
	uint64_t next;  /* proxy only: the next position to consume */
	int head_retry; /* proxy only: the trigger at next answered -EAGAIN before */
	void *fifo_dev; /* the device's view of fifo; NULL when it is plain malloc'd memory */
	/* Device producers (weft_port_device_handle): from then on only kernels push. */
	int device_mode;
	uint64_t *head_dev;   /* device memory: kernels' reservation counter */
	uint32_t *abort_host; /* host-mapped abort flag, and its device view */
	void *abort_dev;
};

#define DRAIN_BATCH 64
#define DEPTH_MAX (1u << 20)

/* ------------------------------------------------------------ triggers */
/* Executes one trigger: 0 done, -EAGAIN try again later, other errors fatal. */
static int run_trigger(weft_port_t *port, uint64_t w0, uint64_t w1)
{
	weft_conn_t *conn = port->conn;
	weft_comm_t *comm = conn->comm;
	switch (w0 & 0xf) {
	case TRIG_PUT: {
		uint32_t dst_id = (uint32_t)(w0 >> 4) & (WEFT__ID_MAX - 1);
		uint32_t src_id = (uint32_t)(w0 >> 18) & (WEFT__ID_MAX - 1);
		size_t len = (size_t)(w0 >> 32);
		uint64_t dst_off = w1 & 0xffffffffu, src_off = w1 >> 32;
		pthread_mutex_lock(&comm->lock);
		weft_rmem_t *dst = weft__idtab_get(&comm->rmem_ids, dst_id);
		weft_mem_t *src = weft__idtab_get(&comm->mem_ids, src_id);
		pthread_mutex_unlock(&comm->lock);
		if (!dst || !src) {
			WEFT_ERROR("port proxy: put trigger names unknown %s id %u", !dst ? "remote memory" : "memory",
				   !dst ? dst_id : src_id);
			return -EINVAL;
		}
		int rc = weft__put_check(conn, dst, dst_off, src, src_off, len);
		if (rc != 0 || len == 0)
			return rc;
		return weft__conn_put_once(conn, port, dst, dst_off, src, src_off, len, port->head_retry);
	}
	case TRIG_SIGNAL: {
		uint32_t id = (uint32_t)(w0 >> 4) & (WEFT__ID_MAX - 1);
		pthread_mutex_lock(&comm->lock);
		weft_rsem_t *rsem = weft__idtab_get(&comm->rsem_ids, id);
		pthread_mutex_unlock(&comm->lock);
		if (!rsem) {
			WEFT_ERROR("port proxy: signal trigger names unknown semaphore id %u", id);
			return -EINVAL;
		}
		return weft__conn_signal_once(conn, port, rsem, w1);
	}
	case TRIG_FLUSH:
		return weft__conn_flush_once(conn, port->head_retry);
	default:
		WEFT_ERROR("port proxy: trigger of unknown kind %u", (unsigned)(w0 & 0xf));
		return -WEFT_ERR_PROTOCOL;
	}
}

/* Consumes what is ready in one port, in order. Returns the number of triggers
 * consumed, or a negative error; *pending is set when the head trigger answered
 * -EAGAIN (a full queue, or a flush not complete yet). */
static int drain_port(weft_port_t *port, int *pending)
{
	struct weft__fifo *f = port->fifo;
	int n = 0;
	while (n < DRAIN_BATCH) {
		struct weft__trigger *t = &f->slot[port->next % port->depth];
		uint64_t w0 = __atomic_load_n(&t->w0, __ATOMIC_ACQUIRE);
		if (w0 == 0)
			break;
		uint64_t w1 = __atomic_load_n(&t->w1, __ATOMIC_RELAXED);
		int rc = run_trigger(port, w0, w1);
		if (rc == -EAGAIN) {
			port->head_retry = 1;
			*pending = 1;
			break;
		}
		if (rc != 0)
			return rc;
		port->head_retry = 0;
		uint64_t pos = port->next++;
		__atomic_store_n(&t->w1, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&t->w0, 0, __ATOMIC_RELAXED);
		if ((w0 & 0xf) == TRIG_FLUSH)
			__atomic_store_n(&f->done, pos + 1, __ATOMIC_RELEASE);
		__atomic_store_n(&f->tail, port->next, __ATOMIC_RELEASE);
		n++;
	}
	return n;
}

/* The progress thread's drain (progress.h): every port of comm once, under
 * port_lock, which port_free takes too. */
static int drain_all(weft_comm_t *comm, int *pending)
{
	int worked = 0;
	pthread_mutex_lock(&comm->port_lock);
	for (struct weft__link *l = comm->ports.next; l != &comm->ports; l = l->next) {
		weft_port_t *port = weft__container_of(l, weft_port_t, link);
		int rc = drain_port(port, pending);
		if (rc < 0) {
			worked = rc;
			break;
		}
		worked += rc;
	}
	pthread_mutex_unlock(&comm->port_lock);
	return worked;
}

/* -------------------------------------------------------------- ports */
static void fifo_free(weft_port_t *port)
{
	if (port->fifo_dev)
		weft__devmem_free(port->conn->comm, port->fifo, port->fifo_dev);
	else
		free(port->fifo);
}

WEFT_API int weft_port_create(weft_conn_t *conn, unsigned depth, weft_port_t **out)
{
	if (!conn || !out) {
		WEFT_ERROR("weft_port_create: NULL %s", conn ? "port out-pointer" : "conn");
		return -EINVAL;
	}
	weft_comm_t *comm = conn->comm;
	if (depth == 0) {
		int64_t v = 1024;
		int rc = weft__param_get("core", "fifo_depth", WEFT_PARAM_INT, &v, NULL);
		if (rc == -WEFT_ERR_CONFIG)
			return rc;
		if (rc != 0)
			v = 1024; /* not declared (a core built without the config module's parameter) */
		if (v < 1 || v > DEPTH_MAX) {
			WEFT_ERROR("core.fifo_depth = %lld is out of range (1..%u)", (long long)v, DEPTH_MAX);
			return -WEFT_ERR_CONFIG;
		}
		depth = (unsigned)v;
	}
	if (depth > DEPTH_MAX) {
		WEFT_ERROR("weft_port_create: depth %u exceeds %u", depth, DEPTH_MAX);
		return -EINVAL;
	}
	weft_port_t *port = calloc(1, sizeof(*port));
	if (!port)
		return -ENOMEM;
	size_t bytes = sizeof(struct weft__fifo) + (size_t)depth * sizeof(struct weft__trigger);
	/* Mapped pinned memory when a GPU transport offers it (zero-filled), so
	 * kernels can produce; plain memory otherwise (host producers only). */
	void *host = NULL, *dev = NULL;
	int arc = weft__devmem_alloc(comm, WEFT_MEM_HOST, bytes, &host, &dev);
	if (arc == 0) {
		port->fifo = host;
		port->fifo_dev = dev;
	} else {
		if (arc != -ENOTSUP)
			WEFT_DEBUG("weft_port_create: no mapped FIFO (%s); host producers only", weft_strerror(arc));
		if (posix_memalign((void **)&port->fifo, 64, bytes) != 0) {
			free(port);
			return -ENOMEM;
		}
		memset(port->fifo, 0, bytes);
	}
	port->conn = conn;
	port->depth = depth;
	/* The progress thread drains this port from now on: one hold per port. */
	weft__progress_set_drain(comm, drain_all);
	int rc = weft__progress_hold(comm);
	if (rc == 0) {
		pthread_mutex_lock(&comm->port_lock);
		weft__list_push(&comm->ports, &port->link);
		conn->nports++;
		pthread_mutex_unlock(&comm->port_lock);
	}
	if (rc != 0) {
		fifo_free(port);
		free(port);
		return rc;
	}
	*out = port;
	return 0;
}

static void port_free(weft_port_t *port)
{
	weft_comm_t *comm = port->conn->comm;
	pthread_mutex_lock(&comm->port_lock);
	weft__list_del(&port->link);
	port->conn->nports--;
	pthread_mutex_unlock(&comm->port_lock);
	weft__progress_release(comm);
	if (port->abort_host) {
		weft__abort_flag_del(port->abort_host);
		weft__devmem_free(comm, port->abort_host, port->abort_dev);
	}
	weft__devmem_free(comm, NULL, port->head_dev);
	fifo_free(port);
	free(port);
}

/* Kernels pushed into a device-mode port: wait until the proxy has consumed
 * every trigger they wrote (the caller's kernels are done), then until the
 * transport completed what those triggers posted. */
static int drain_device(weft_port_t *port)
{
	weft_comm_t *comm = port->conn->comm;
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	for (;;) {
		int rc = weft__comm_status(comm);
		if (rc != 0)
			return rc;
		pthread_mutex_lock(&comm->port_lock);
		uint64_t w0 = __atomic_load_n(&port->fifo->slot[port->next % port->depth].w0, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&comm->port_lock);
		if (w0 == 0)
			break;
		weft__backoff_wait(&b);
	}
	return weft_flush(port->conn);
}

WEFT_API int weft_port_destroy(weft_port_t *port)
{
	if (!port)
		return 0;
	/* Drain: everything pushed before is completed at the peer, unless the
	 * comm has failed (then nobody waits on the dead peer). */
	int rc = 0;
	if (weft__comm_status(port->conn->comm) == 0)
		rc = port->device_mode ? drain_device(port) : weft_port_flush(port);
	port_free(port);
	return rc;
}

void weft__port_destroy_all(weft_comm_t *comm)
{
	while (!weft__list_empty(&comm->ports))
		weft_port_destroy(weft__container_of(comm->ports.prev, weft_port_t, link));
}

/* Reserves a slot, waiting only while the FIFO is full, and publishes the
 * trigger: w1 first, then w0 with release order. Returns the position. */
static int push(weft_port_t *port, uint64_t w0, uint64_t w1, uint64_t *pos)
{
	struct weft__fifo *f = port->fifo;
	weft_comm_t *comm = port->conn->comm;
	int rc = weft__comm_status(comm);
	if (rc != 0)
		return rc;
	if (port->device_mode) {
		WEFT_ERROR("port channel: kernels produce into this port (weft_port_device_handle was called); "
			   "host threads cannot push into it too");
		return -EBUSY;
	}
	uint64_t h = __atomic_fetch_add(&f->head, 1, __ATOMIC_RELAXED);
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	while (h - __atomic_load_n(&f->tail, __ATOMIC_ACQUIRE) >= port->depth) {
		rc = weft__comm_status(comm);
		if (rc != 0)
			return rc;
		weft__backoff_wait(&b);
	}
	struct weft__trigger *t = &f->slot[h % port->depth];
	__atomic_store_n(&t->w1, w1, __ATOMIC_RELAXED);
	__atomic_store_n(&t->w0, w0, __ATOMIC_RELEASE);
	*pos = h;
	return 0;
}

WEFT_API int weft_port_put(weft_port_t *port, weft_rmem_t *dst, uint64_t dst_off, weft_mem_t *src, uint64_t src_off,
			   size_t len)
{
	if (!port || !dst || !src) {
		WEFT_ERROR("weft_port_put: NULL %s", !port ? "port" : !dst ? "dst" : "src");
		return -EINVAL;
	}
	int rc = weft__put_check(port->conn, dst, dst_off, src, src_off, len);
	if (rc != 0)
		return rc;
	if (dst_off > UINT32_MAX || src_off > UINT32_MAX || len > UINT32_MAX) {
		WEFT_ERROR("weft_port_put: port triggers carry offsets and lengths below 4 GiB; use weft_put "
			   "(dst_off %llu, src_off %llu, len %zu)",
			   (unsigned long long)dst_off, (unsigned long long)src_off, len);
		return -EINVAL;
	}
	uint64_t w0 = TRIG_PUT | (uint64_t)dst->id << 4 | (uint64_t)src->id << 18 | (uint64_t)len << 32;
	uint64_t pos;
	return push(port, w0, dst_off | src_off << 32, &pos);
}

WEFT_API int weft_port_signal(weft_port_t *port, weft_rsem_t *sem, uint64_t value)
{
	if (!port || !sem) {
		WEFT_ERROR("weft_port_signal: NULL %s", port ? "sem" : "port");
		return -EINVAL;
	}
	int rc = weft__rsem_claim(port->conn, sem, value);
	if (rc != 0)
		return rc;
	uint64_t pos;
	return push(port, TRIG_SIGNAL | (uint64_t)sem->id << 4, value, &pos);
}

WEFT_API int weft_port_flush(weft_port_t *port)
{
	if (!port) {
		WEFT_ERROR("weft_port_flush: NULL port");
		return -EINVAL;
	}
	uint64_t pos;
	int rc = push(port, TRIG_FLUSH, 0, &pos);
	if (rc != 0)
		return rc;
	weft_comm_t *comm = port->conn->comm;
	struct weft__backoff b;
	weft__backoff_init(&b, 1000);
	while (__atomic_load_n(&port->fifo->done, __ATOMIC_ACQUIRE) <= pos) {
		rc = weft__comm_status(comm);
		if (rc != 0)
			return rc;
		weft__backoff_wait(&b);
	}
	return 0;
}

/* ------------------------------------------------------ device producers */
/* Device memory of the comm's GPU transport, whichever runtime it serves. */
static int devmem_any(weft_comm_t *comm, size_t bytes, void **dev)
{
	void *host = NULL;
	int rc = weft__devmem_alloc(comm, WEFT_MEM_CUDA, bytes, &host, dev);
	if (rc == -ENOTSUP)
		rc = weft__devmem_alloc(comm, WEFT_MEM_HIP, bytes, &host, dev);
	return rc;
}

/* Switches the port to device producers: drains what host threads pushed,
 * then restarts every position at 0 (the device counter starts zero-filled),
 * which is safe because the FIFO is empty and the proxy is held off by
 * port_lock. */
static int enter_device_mode(weft_port_t *port)
{
	weft_comm_t *comm = port->conn->comm;
	int rc;
	if (__atomic_load_n(&port->fifo->head, __ATOMIC_ACQUIRE) != 0 && (rc = weft_port_flush(port)) != 0)
		return rc;
	if ((rc = devmem_any(comm, 64, (void **)&port->head_dev)) != 0)
		return rc;
	void *host = NULL;
	if ((rc = weft__devmem_alloc(comm, WEFT_MEM_HOST, 64, &host, &port->abort_dev)) != 0)
		goto err_head;
	port->abort_host = host;
	if ((rc = weft__abort_flag_add(comm, port->abort_host)) != 0)
		goto err_abort;
	pthread_mutex_lock(&comm->port_lock);
	struct weft__fifo *f = port->fifo;
	port->next = 0;
	__atomic_store_n(&f->head, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&f->tail, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&f->done, 0, __ATOMIC_RELEASE);
	port->device_mode = 1;
	pthread_mutex_unlock(&comm->port_lock);
	return 0;
err_abort:
	weft__devmem_free(comm, port->abort_host, port->abort_dev);
	port->abort_host = NULL;
	port->abort_dev = NULL;
err_head:
	weft__devmem_free(comm, NULL, port->head_dev);
	port->head_dev = NULL;
	return rc;
}

WEFT_API int weft_port_device_handle(weft_port_t *port, struct weft_port_dev *dev)
{
	if (!port || !dev) {
		WEFT_ERROR("weft_port_device_handle: NULL %s", port ? "dev" : "port");
		return -EINVAL;
	}
	if (!port->fifo_dev) {
		WEFT_ERROR("weft_port_device_handle: this port's FIFO is not in device-mapped memory (no transport "
			   "of the comm allocates mapped pinned memory: a GPU transport such as nvlink is needed)");
		return -ENOTSUP;
	}
	if (!port->device_mode) {
		int rc = enter_device_mode(port);
		if (rc != 0)
			return rc;
	}
	char *fd = port->fifo_dev;
	memset(dev, 0, sizeof(*dev));
	dev->version = WEFT_DEVICE_HANDLE_VERSION;
	dev->depth = (uint32_t)port->depth;
	dev->head = port->head_dev;
	dev->tail = (volatile uint64_t *)(fd + offsetof(struct weft__fifo, tail));
	dev->done = (volatile uint64_t *)(fd + offsetof(struct weft__fifo, done));
	dev->slots = (uint64_t *)(fd + offsetof(struct weft__fifo, slot));
	dev->abort_flag = (volatile uint32_t *)port->abort_dev;
	return 0;
}

/* The ids triggers name objects by, for kernels that build them. */
static int port_id(const char *what, const void *obj, int internal, uint32_t id, uint32_t *out)
{
	if (!obj || !out) {
		WEFT_ERROR("weft_%s_port_id: NULL %s", what, obj ? "out-pointer" : what);
		return -EINVAL;
	}
	if (internal) {
		WEFT_ERROR("weft_%s_port_id: an internal object has no port id", what);
		return -EINVAL;
	}
	*out = id;
	return 0;
}

WEFT_API int weft_mem_port_id(const weft_mem_t *mem, uint32_t *id)
{
	return port_id("mem", mem, mem && mem->internal, mem ? mem->id : 0, id);
}

WEFT_API int weft_rmem_port_id(const weft_rmem_t *rmem, uint32_t *id)
{
	return port_id("rmem", rmem, rmem && rmem->internal, rmem ? rmem->id : 0, id);
}

WEFT_API int weft_rsem_port_id(const weft_rsem_t *rsem, uint32_t *id)
{
	return port_id("rsem", rsem, 0, rsem ? rsem->id : 0, id);
}
