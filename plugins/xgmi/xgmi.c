/* SPDX-License-Identifier: Apache-2.0 */
/* xgmi plugin: a transport between AMD GPUs of one host (xGMI / Infinity
 * Fabric, or PCIe peer access), for WEFT_MEM_HIP memory. Peers' buffers are
 * mapped through HIP IPC handles; put is a copy on the endpoint's stream,
 * signal a stream-ordered 64-bit write behind it, flush an event test. All
 * runtime calls go through gpurt's HIP backend. Never run on AMD hardware. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/kit.h>

#include "../gpurt/gpurt.h"
#include "xgmi_wire.h"

static const struct weft_core_api *xg_core;

#define XG_LOG(lv, ...) xg_core->log(xg_core->self, (lv), "xgmi: " __VA_ARGS__)
#define XG_ERR(...) XG_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define XG_INFO(...) XG_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define XG_DBG(...) XG_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

/* The parameters of [xgmi], read at each open. */
struct xg_settings {
	int64_t device;
};

static const struct weft_kit_param xg_params[] = {
	WEFT_KIT_P_INT("device", struct xg_settings, device, "-1", -1, INT32_MAX,
		       "HIP device this rank uses; -1: the calling thread's current device"),
};

/* ------------------------------------------------------------ objects */
/* A local allocation exported once (one IPC handle) and shared by every
 * registration inside it (the registration cache). */
struct xg_export {
	struct xg_export *next;
	uintptr_t base;     /* allocation start */
	size_t size;        /* allocation size */
	uint64_t buffer_id; /* the runtime's id (0 when it has none): a freed and reused address differs */
	uint64_t id;        /* this context's number for it, named by importers */
	unsigned char ipc[GRT_IPC_HANDLE_BYTES];
	int refs;
};

struct xg_ctx {
	int rank, nranks;
	uint64_t host_hash;
	int dev;
	pthread_mutex_t xlock; /* exports */
	struct xg_export *exports;
	uint64_t next_export;
	struct xg_import *imports; /* import cache */
};

struct xg_mh {
	struct xg_export *x; /* NULL for host memory */
	void *ptr;
	size_t len;
};

/* A peer's allocation mapped here, shared by every import inside it. */
struct xg_import {
	struct xg_import *next;
	int peer;
	uint64_t peer_pid, export_id, buffer_id;
	void *base; /* mapped start of the peer's allocation */
	int refs;
};

struct xg_rmh {
	struct xg_import *im; /* NULL when the pointer is reused (same process) */
	char *ptr;            /* the peer's registered start, as this process sees it */
	uint64_t len;
	int kind;
};

struct xg_ep {
	struct xg_ctx *tc;
	int peer, peer_dev;
	int same_process;
	char link[16];
	void *stream;
	void *event;
	int posted; /* operations since the last completed flush */
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* Every call runs on the context's device: the proxy thread and user threads
 * may have another current device. */
static int on_dev(struct xg_ctx *tc)
{
	return grt_set_device(tc->dev);
}

/* ------------------------------------------------------------ context */
static int xg_open(const struct weft_tp_open_args *args, void **out)
{
	int rc = grt_init();
	if (rc != 0) {
		XG_INFO("not available: %s", grt_init_error());
		return -WEFT_ERR_NO_DEVICE;
	}
	struct xg_settings set;
	if ((rc = weft_kit_params_load(xg_core, "xgmi", xg_params, WEFT_KIT_NROWS(xg_params), &set)) < 0)
		return rc;
	int64_t want = set.device;
	int ndev = 0, dev = 0;
	rc = grt_device_count(&ndev);
	if (rc != 0)
		return rc;
	if (want >= 0) {
		if (want >= ndev) {
			XG_ERR("xgmi.device = %lld, but only %d HIP devices are visible", (long long)want, ndev);
			return -WEFT_ERR_CONFIG;
		}
		dev = (int)want;
	} else if ((rc = grt_get_device(&dev)) != 0) {
		return rc;
	}
	struct xg_ctx *tc = xg_core->calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	tc->rank = args->rank;
	tc->nranks = args->nranks;
	tc->host_hash = hash_str(args->host_id);
	tc->dev = dev;
	tc->next_export = 1;
	pthread_mutex_init(&tc->xlock, NULL);
	if ((rc = on_dev(tc)) != 0) {
		pthread_mutex_destroy(&tc->xlock);
		xg_core->free(tc);
		return rc;
	}
	XG_DBG("rank %d uses GPU%d", tc->rank, dev);
	*out = tc;
	return 0;
}

static void xg_close(void *ctx)
{
	struct xg_ctx *tc = ctx;
	if (!tc)
		return;
	/* Handles are released before close; whatever is left is freed anyway. */
	while (tc->imports) {
		struct xg_import *im = tc->imports;
		tc->imports = im->next;
		xg_core->free(im);
	}
	while (tc->exports) {
		struct xg_export *x = tc->exports;
		tc->exports = x->next;
		xg_core->free(x);
	}
	pthread_mutex_destroy(&tc->xlock);
	xg_core->free(tc);
}

/* ----------------------------------------------------------- memory */
/* Makes (or finds in the cache) the export of the allocation holding ptr. */
static int export_get(struct xg_ctx *tc, void *ptr, size_t len, struct xg_export **out)
{
	struct grt_ptr_info pi;
	int rc = grt_ptr_info(ptr, &pi);
	if (rc != 0 || pi.kind != GRT_MEM_DEVICE) {
		XG_ERR("mem_register: %p is not HIP device memory (%s)", ptr,
		       rc ? "unknown pointer" : pi.kind == GRT_MEM_MANAGED ? "managed memory" : "host memory");
		return -EINVAL;
	}
	if (!pi.legacy_ipc || (uintptr_t)ptr + len > pi.base + pi.size) {
		XG_ERR("mem_register: %p+%zu is not inside one hipMalloc allocation, which HIP IPC needs", ptr, len);
		return -ENOTSUP;
	}
	if (pi.device != tc->dev)
		XG_DBG("mem_register: %p lives on GPU%d, this rank uses GPU%d", ptr, pi.device, tc->dev);
	struct xg_export *x = NULL;
	pthread_mutex_lock(&tc->xlock);
	/* Without the runtime's buffer id, a freed and reallocated buffer at the
	 * same address would look cached: then every registration exports anew. */
	for (struct xg_export *e = pi.buffer_id ? tc->exports : NULL; e; e = e->next) {
		if (e->base == pi.base && e->size == pi.size && e->buffer_id == pi.buffer_id) {
			x = e;
			x->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&tc->xlock);
	if (x) {
		XG_DBG("mem_register: %p+%zu reuses export %llu", ptr, len, (unsigned long long)x->id);
		*out = x;
		return 0;
	}
	x = xg_core->calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->buffer_id = pi.buffer_id;
	x->base = pi.base;
	x->size = pi.size;
	x->refs = 1;
	rc = grt_ipc_get((void *)pi.base, x->ipc);
	if (rc != 0) {
		xg_core->free(x);
		return rc;
	}
	pthread_mutex_lock(&tc->xlock);
	x->id = tc->next_export++;
	x->next = tc->exports;
	tc->exports = x;
	pthread_mutex_unlock(&tc->xlock);
	XG_DBG("mem_register: export %llu ipc base %p size %zu", (unsigned long long)x->id, (void *)x->base, x->size);
	*out = x;
	return 0;
}

static void export_put(struct xg_ctx *tc, struct xg_export *x)
{
	pthread_mutex_lock(&tc->xlock);
	int last = --x->refs == 0;
	if (last)
		for (struct xg_export **pp = &tc->exports; *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				break;
			}
	pthread_mutex_unlock(&tc->xlock);
	if (last)
		xg_core->free(x);
}

static int xg_mem_register(void *ctx, void *ptr, size_t len, enum weft_mem_type type, void **out)
{
	struct xg_ctx *tc = ctx;
	if (type != WEFT_MEM_HIP && type != WEFT_MEM_HOST)
		return -ENOTSUP;
	struct xg_mh *mh = xg_core->calloc(1, sizeof(*mh));
	if (!mh)
		return -ENOMEM;
	mh->ptr = ptr;
	mh->len = len;
	if (type == WEFT_MEM_HIP) {
		int rc = on_dev(tc);
		if (rc == 0)
			rc = export_get(tc, ptr, len, &mh->x);
		if (rc != 0) {
			xg_core->free(mh);
			return rc;
		}
	}
	*out = mh;
	return 0;
}

static int xg_mem_deregister(void *ctx, void *handle)
{
	struct xg_mh *mh = handle;
	if (mh && mh->x)
		export_put(ctx, mh->x);
	xg_core->free(mh);
	return 0;
}

static int xg_mem_serialize(void *ctx, void *handle, void *buf, size_t *len)
{
	struct xg_ctx *tc = ctx;
	struct xg_mh *mh = handle;
	struct xg_export *x = mh->x;
	size_t need = sizeof(struct xg_wire);
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	/* Built aside and copied: a blob section has no alignment. */
	struct xg_wire wire;
	struct xg_wire *w = &wire;
	memset(w, 0, need);
	w->magic = XG_MAGIC;
	w->version = 1;
	w->kind = x ? XG_KIND_IPC : XG_KIND_HOST;
	w->host_hash = tc->host_hash;
	w->pid = (uint64_t)getpid();
	w->device = tc->dev;
	w->ptr = (uint64_t)(uintptr_t)mh->ptr;
	w->len = mh->len;
	if (x) {
		w->offset = (uintptr_t)mh->ptr - x->base;
		w->export_id = x->id;
		w->buffer_id = x->buffer_id;
		w->export_size = x->size;
		memcpy(w->ipc, x->ipc, sizeof(w->ipc));
	} else {
		w->export_size = mh->len;
	}
	memcpy(buf, w, need);
	*len = need;
	return 0;
}

static void import_put(struct xg_ctx *tc, struct xg_import *im)
{
	if (--im->refs > 0)
		return;
	for (struct xg_import **pp = &tc->imports; *pp; pp = &(*pp)->next)
		if (*pp == im) {
			*pp = im->next;
			break;
		}
	grt_ipc_close(im->base);
	xg_core->free(im);
}

/* Maps (or finds in the cache) the peer's export a section names. */
static int import_get(struct xg_ctx *tc, int peer, const struct xg_wire *w, struct xg_import **out)
{
	for (struct xg_import *im = tc->imports; im; im = im->next) {
		if (im->peer == peer && im->peer_pid == w->pid && im->export_id == w->export_id &&
		    im->buffer_id == w->buffer_id) {
			im->refs++;
			*out = im;
			return 0;
		}
	}
	struct xg_import *im = xg_core->calloc(1, sizeof(*im));
	if (!im)
		return -ENOMEM;
	im->peer = peer;
	im->peer_pid = w->pid;
	im->export_id = w->export_id;
	im->buffer_id = w->buffer_id;
	im->refs = 1;
	int rc = grt_ipc_open(w->ipc, &im->base);
	if (rc != 0) {
		XG_ERR("mem_import: cannot map rank %d's buffer (export %llu): %s", peer,
		       (unsigned long long)w->export_id, weft_kit_errname(rc));
		xg_core->free(im);
		return rc;
	}
	im->next = tc->imports;
	tc->imports = im;
	*out = im;
	return 0;
}

static int xg_mem_import(void *ctx, int peer, const void *buf, size_t len, void **out)
{
	struct xg_ctx *tc = ctx;
	struct xg_wire wire;
	char why[160];
	if (xg_wire_parse(buf, len, &wire, why, sizeof(why)) != 0) {
		XG_ERR("mem_import: malformed section from rank %d (%zu bytes): %s", peer, len, why);
		return -WEFT_ERR_PROTOCOL;
	}
	const struct xg_wire *w = &wire;
	if (w->host_hash != tc->host_hash)
		return -EHOSTUNREACH;
	int same_process = w->pid == (uint64_t)getpid();
	if (w->kind == XG_KIND_HOST && !same_process)
		return -EHOSTUNREACH; /* pageable host memory of another process: no mapping */
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	struct xg_rmh *r = xg_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->len = w->len;
	r->kind = w->kind;
	if (same_process) {
		r->ptr = (char *)(uintptr_t)w->ptr;
	} else {
		rc = import_get(tc, peer, w, &r->im);
		if (rc != 0) {
			xg_core->free(r);
			return rc;
		}
		r->ptr = (char *)r->im->base + w->offset;
	}
	*out = r;
	return 0;
}

static int xg_mem_release(void *ctx, void *handle)
{
	struct xg_rmh *r = handle;
	if (!r)
		return 0;
	if (r->im) {
		on_dev(ctx);
		import_put(ctx, r->im);
	}
	xg_core->free(r);
	return 0;
}

static int xg_mem_map(void *ctx, void *handle, void **dev_ptr)
{
	struct xg_rmh *r = handle;
	if (r->kind == XG_KIND_HOST)
		return -ENOTSUP;
	*dev_ptr = r->ptr;
	return 0;
}

static int xg_mem_alloc(void *ctx, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr)
{
	struct xg_ctx *tc = ctx;
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	if (type == WEFT_MEM_HOST)
		return grt_host_alloc_mapped(bytes ? bytes : 1, host_ptr, dev_ptr);
	if (type != WEFT_MEM_HIP)
		return -ENOTSUP;
	void *p;
	rc = grt_malloc(&p, bytes ? bytes : 1);
	if (rc != 0)
		return rc;
	rc = grt_memset(p, 0, bytes ? bytes : 1);
	if (rc != 0) {
		grt_free(p);
		return rc;
	}
	*host_ptr = NULL;
	*dev_ptr = p;
	return 0;
}

static int xg_mem_free(void *ctx, void *host_ptr, void *dev_ptr)
{
	on_dev(ctx);
	if (host_ptr)
		grt_host_free(host_ptr);
	else if (dev_ptr)
		grt_free(dev_ptr);
	return 0;
}

static int xg_mem_query(void *ctx, const void *ptr, enum weft_mem_type *type)
{
	struct grt_ptr_info pi;
	if (grt_init() != 0 || grt_ptr_info(ptr, &pi) != 0)
		return -ENOENT;
	switch (pi.kind) {
	case GRT_MEM_DEVICE:
	case GRT_MEM_MANAGED:
		*type = WEFT_MEM_HIP;
		return 0;
	case GRT_MEM_HOST:
		*type = WEFT_MEM_HOST;
		return 0;
	default:
		return -ENOENT;
	}
}

/* ---------------------------------------------------------- endpoints */
static int xg_endpoint(void *ctx, const struct weft_tp_peer *peer, void *addr, size_t *len, void **out)
{
	struct xg_ctx *tc = ctx;
	if (peer->peer_class == WEFT_PEER_OTHER_HOST)
		return -EHOSTUNREACH;
	if (!addr || *len < sizeof(struct xg_addr)) {
		*len = sizeof(struct xg_addr);
		return -ENOSPC;
	}
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	struct xg_ep *ep = xg_core->calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->tc = tc;
	ep->peer = peer->rank;
	ep->peer_dev = -1;
	if ((rc = grt_stream_create(&ep->stream)) != 0)
		goto err_free;
	if ((rc = grt_event_create(&ep->event)) != 0)
		goto err_stream;
	struct xg_addr a = {.magic = XG_MAGIC, .rank = tc->rank, .device = tc->dev,
			    .pid = (uint64_t)getpid(), .host_hash = tc->host_hash};
	memcpy(addr, &a, sizeof(a));
	*len = sizeof(a);
	*out = ep;
	return 0;
err_stream:
	grt_stream_destroy(ep->stream);
err_free:
	xg_core->free(ep);
	return rc;
}

static int xg_connect(void *handle, const void *peer_addr, size_t len)
{
	struct xg_ep *ep = handle;
	struct xg_addr a;
	char why[160];
	if (xg_addr_parse(peer_addr, len, ep->peer, &a, why, sizeof(why)) != 0) {
		XG_ERR("connect: malformed address from rank %d: %s", ep->peer, why);
		return -WEFT_ERR_PROTOCOL;
	}
	if (a.host_hash != ep->tc->host_hash)
		return -EHOSTUNREACH;
	ep->peer_dev = a.device;
	ep->same_process = a.pid == (uint64_t)getpid();
	int rc = on_dev(ep->tc);
	if (rc != 0)
		return rc;
	if (a.device == ep->tc->dev) {
		snprintf(ep->link, sizeof(ep->link), "same-gpu");
		return 0;
	}
	const char *link = "none";
	int access = 0, rank = 0;
	rc = grt_p2p_info(ep->tc->dev, a.device, &access, &link, &rank);
	if (rc != 0)
		return rc;
	snprintf(ep->link, sizeof(ep->link), "%s", link);
	if (!access) {
		XG_ERR("connect: GPU%d cannot access GPU%d (no peer access); rank %d is unreachable", ep->tc->dev,
		       a.device, ep->peer);
		return -EHOSTUNREACH;
	}
	/* Same-process peers share pointers, which need peer access enabled;
	 * IPC-opened memory is mapped for this device by the runtime. */
	return grt_enable_peer(a.device);
}

static int xg_disconnect(void *handle)
{
	struct xg_ep *ep = handle;
	if (!ep)
		return 0;
	on_dev(ep->tc);
	grt_stream_sync(ep->stream);
	grt_event_destroy(ep->event);
	grt_stream_destroy(ep->stream);
	xg_core->free(ep);
	return 0;
}

static int xg_put(void *handle, void *rhandle, uint64_t roff, void *lhandle, uint64_t loff, size_t len)
{
	struct xg_ep *ep = handle;
	struct xg_rmh *r = rhandle;
	struct xg_mh *l = lhandle;
	if (roff > r->len || len > r->len - roff || loff > l->len || len > l->len - loff) {
		XG_ERR("put: out of bounds (remote %llu+%zu of %llu, local %llu+%zu of %zu)", (unsigned long long)roff,
		       len, (unsigned long long)r->len, (unsigned long long)loff, len, l->len);
		return -EINVAL;
	}
	if (r->kind == XG_KIND_HOST && !ep->same_process)
		return -ENOTSUP;
	if (len == 0)
		return 0;
	int rc = on_dev(ep->tc);
	if (rc == 0)
		rc = grt_memcpy_async(r->ptr + roff, (char *)l->ptr + loff, len, ep->stream);
	if (rc == 0)
		rc = grt_event_record(ep->event, ep->stream);
	if (rc == 0)
		ep->posted++;
	return rc;
}

static int xg_signal(void *handle, void *rhandle, uint64_t roff, uint64_t value)
{
	struct xg_ep *ep = handle;
	struct xg_rmh *r = rhandle;
	if (roff > r->len || r->len - roff < 8 || (roff & 7) != 0) {
		XG_ERR("signal: token at %llu outside the peer's %llu-byte region or unaligned",
		       (unsigned long long)roff, (unsigned long long)r->len);
		return -EINVAL;
	}
	int rc = on_dev(ep->tc);
	if (rc != 0)
		return rc;
	if (r->kind == XG_KIND_HOST) {
		if (!ep->same_process)
			return -ENOTSUP;
		/* A host token in this process: after the data, in stream order. */
		rc = grt_stream_sync(ep->stream);
		if (rc == 0)
			__atomic_store_n((uint64_t *)(r->ptr + roff), value, __ATOMIC_RELEASE);
		return rc;
	}
	rc = grt_write_value64(ep->stream, r->ptr + roff, value);
	if (rc == 0)
		rc = grt_event_record(ep->event, ep->stream);
	if (rc == 0)
		ep->posted++;
	return rc;
}

static int xg_flush(void *handle)
{
	struct xg_ep *ep = handle;
	if (ep->posted == 0)
		return 0;
	int rc = on_dev(ep->tc);
	if (rc == 0)
		rc = grt_event_query(ep->event);
	if (rc == 0)
		ep->posted = 0;
	return rc;
}

static int xg_progress(void *ctx)
{
	return 0; /* DMA engines and peer stores need no help */
}

/* ---------------------------------------------------------- describe */
static int xg_describe(void *ctx, char *buf, size_t len)
{
	if (grt_init() != 0) {
		snprintf(buf, len, "no AMD GPU (%s)", grt_init_error());
		return 0;
	}
	int n = 0;
	int rc = grt_device_count(&n);
	if (rc != 0)
		return rc;
	size_t o = 0;
	char name[64] = "";
	grt_device_name(0, name, sizeof(name));
	o += (size_t)snprintf(buf + o, len - o, "%d AMD GPU%s (%s)", n, n == 1 ? "" : "s", name);
	for (int i = 0; i < n && o < len; i++)
		for (int j = i + 1; j < n && o < len; j++) {
			int acc = 0, rk = 0;
			const char *link = "none";
			if (grt_p2p_info(i, j, &acc, &link, &rk) == 0)
				o += (size_t)snprintf(buf + o, len - o, ", GPU%d-GPU%d %s", i, j, link);
		}
	if (ctx && o < len)
		snprintf(buf + o, len - o, "; this rank GPU%d", ((struct xg_ctx *)ctx)->dev);
	return 0;
}

static int xg_probe(struct weft_tp_device *devs, int *n)
{
	if (grt_init() != 0) {
		*n = 0;
		return 0;
	}
	int ndev = 0;
	int rc = grt_device_count(&ndev);
	if (rc != 0)
		return rc;
	int k = 0;
	for (int i = 0; i < ndev && k < *n; i++, k++) {
		struct weft_tp_device *d = &devs[k];
		memset(d, 0, sizeof(*d));
		d->size = sizeof(*d);
		snprintf(d->name, sizeof(d->name), "GPU%d", i);
		snprintf(d->link, sizeof(d->link), "pcie");
		for (int j = 0; j < ndev; j++) {
			int acc = 0, rk = 0;
			const char *link = "none";
			if (j != i && grt_p2p_info(i, j, &acc, &link, &rk) == 0 && strcmp(link, "xgmi") == 0)
				snprintf(d->link, sizeof(d->link), "xgmi");
		}
		d->numa_node = -1;
		grt_device_pci(i, d->pci_path, sizeof(d->pci_path));
		d->mem_types = 1u << WEFT_MEM_HIP;
		d->peer_classes = 1u << WEFT_PEER_SAME_PROCESS | 1u << WEFT_PEER_SAME_HOST;
	}
	*n = k;
	return 0;
}

static int xg_ep_describe(void *handle, char *buf, size_t len)
{
	struct xg_ep *ep = handle;
	snprintf(buf, len, "xgmi GPU%d->GPU%d p2p=%s%s", ep->tc->dev, ep->peer_dev, ep->link,
		 ep->same_process ? " same-process" : "");
	return 0;
}

/* -------------------------------------------------------- descriptor */
static const struct weft_transport_ops xg_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = xg_open,
	.close = xg_close,
	.mem_register = xg_mem_register,
	.mem_deregister = xg_mem_deregister,
	.mem_serialize = xg_mem_serialize,
	.mem_import = xg_mem_import,
	.mem_release = xg_mem_release,
	.endpoint = xg_endpoint,
	.connect = xg_connect,
	.disconnect = xg_disconnect,
	.put = xg_put,
	.signal = xg_signal,
	.flush = xg_flush,
	.progress = xg_progress,
	.describe = xg_describe,
	.probe = xg_probe,
	.ep_describe = xg_ep_describe,
	.mem_map = xg_mem_map,
	.mem_alloc = xg_mem_alloc,
	.mem_free = xg_mem_free,
	.mem_query = xg_mem_query,
};

static const struct weft_plugin_desc xg_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "xgmi",
	.ops = &xg_ops,
};

static const struct weft_plugin_desc *const xg_descs[] = {&xg_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	xg_core = core;
	grt_set_logger(core, "xgmi");
	if (weft_kit_params_declare(core, "xgmi", xg_params, WEFT_KIT_NROWS(xg_params)) < 0)
		return NULL; /* logged, naming the parameter */
	return xg_descs;
}
