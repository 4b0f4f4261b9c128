/* SPDX-License-Identifier: Apache-2.0 */
/* nvlink plugin: a transport between GPUs of one host (NVLink or PCIe peer
 * access). Peers' device buffers are mapped through CUDA IPC or VMM file
 * descriptors; put is a copy-engine copy on the endpoint's stream, signal a
 * stream-ordered 64-bit write behind it, flush an event test. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../gpurt/gpurt.h"
#include "nvlink.h"

const struct weft_core_api *nvl_core;

/* The parameters of [nvlink], read at each open. */
struct nvl_settings {
	int64_t device;
};

static const struct weft_kit_param nvl_params[] = {
	WEFT_KIT_P_INT("device", struct nvl_settings, device, "-1", -1, INT32_MAX,
		       "CUDA device this rank uses; -1: the calling thread's current device"),
};

/* ------------------------------------------------------------ objects */
struct nvl_ctx {
	int rank, nranks;
	uint64_t tag;
	uint64_t host_hash;
	int dev;
	pthread_mutex_t xlock; /* exports: shared with the fd server thread */
	struct nvl_export *exports;
	uint64_t next_export;
	struct nvl_fdsrv srv;
	struct nvl_import *imports; /* import cache */
	struct nvl_stage *stage;    /* streams and events of the stage ops (nvlink_stage.c) */
};

struct nvl_mh {
	struct nvl_export *x; /* NULL for host memory */
	void *ptr;
	size_t len;
	enum weft_mem_type type;
};

/* A peer's allocation mapped here, shared by every import inside it. */
struct nvl_import {
	struct nvl_import *next;
	int peer;
	uint64_t peer_pid, export_id, buffer_id;
	int kind;
	void *base; /* mapped start of the peer's export */
	int nchunks;
	size_t chunk[NVL_MAX_CHUNKS];
	int refs;
};

struct nvl_rmh {
	struct nvl_import *im; /* NULL when the pointer is reused (same process) */
	char *ptr;             /* the peer's registered start, as this process sees it */
	uint64_t len;
	int kind;
};

struct nvl_ep {
	struct nvl_ctx *tc;
	int peer, peer_dev;
	int same_process;
	char link[16];
	int p2p;
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
static int on_dev(struct nvl_ctx *tc)
{
	return grt_set_device(tc->dev);
}

int nvl_ctx_stage(void *ctx, struct nvl_stage ***slot)
{
	struct nvl_ctx *tc = ctx;
	*slot = &tc->stage;
	return on_dev(tc);
}

/* ------------------------------------------------------------ context */
static int nvl_open(const struct weft_tp_open_args *args, void **out)
{
	int rc = grt_init();
	if (rc != 0) {
		NVL_INFO("not available: %s", grt_init_error());
		return -WEFT_ERR_NO_DEVICE;
	}
	struct nvl_settings set;
	if ((rc = weft_kit_params_load(nvl_core, "nvlink", nvl_params, WEFT_KIT_NROWS(nvl_params), &set)) < 0)
		return rc;
	int64_t want = set.device;
	int ndev = 0, dev = 0;
	rc = grt_device_count(&ndev);
	if (rc != 0)
		return rc;
	if (want >= 0) {
		if (want >= ndev) {
			NVL_ERR("nvlink.device = %lld, but only %d CUDA devices are visible", (long long)want, ndev);
			return -WEFT_ERR_CONFIG;
		}
		dev = (int)want;
	} else if ((rc = grt_get_device(&dev)) != 0) {
		return rc;
	}
	struct nvl_ctx *tc = nvl_core->calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	tc->rank = args->rank;
	tc->nranks = args->nranks;
	tc->tag = args->comm_tag;
	tc->host_hash = hash_str(args->host_id);
	tc->dev = dev;
	tc->next_export = 1;
	pthread_mutex_init(&tc->xlock, NULL);
	tc->srv.lock = &tc->xlock;
	tc->srv.exports = &tc->exports;
	if ((rc = on_dev(tc)) != 0) {
		pthread_mutex_destroy(&tc->xlock);
		nvl_core->free(tc);
		return rc;
	}
	NVL_DBG("rank %d uses GPU%d", tc->rank, dev);
	*out = tc;
	return 0;
}

static void nvl_close(void *ctx)
{
	struct nvl_ctx *tc = ctx;
	if (!tc)
		return;
	nvl_fdsrv_stop(&tc->srv);
	if (tc->stage && on_dev(tc) == 0)
		nvl_stage_free(tc->stage);
	/* Handles are released before close; whatever is left is freed anyway. */
	while (tc->imports) {
		struct nvl_import *im = tc->imports;
		tc->imports = im->next;
		nvl_core->free(im);
	}
	pthread_mutex_destroy(&tc->xlock);
	nvl_core->free(tc);
}

/* ----------------------------------------------------------- memory */
static void export_free(struct nvl_export *x)
{
	for (int i = 0; i < x->nchunks; i++)
		if (x->fd[i] >= 0)
			close(x->fd[i]);
	nvl_core->free(x);
}

/* Makes (or finds in the cache) the export of the allocation holding ptr. */
static int export_get(struct nvl_ctx *tc, void *ptr, size_t len, struct nvl_export **out)
{
	struct grt_ptr_info pi;
	int rc = grt_ptr_info(ptr, &pi);
	if (rc != 0 || pi.kind != GRT_MEM_DEVICE) {
		NVL_ERR("mem_register: %p is not CUDA device memory (%s)", ptr,
			rc ? "unknown pointer" : pi.kind == GRT_MEM_MANAGED ? "managed memory" : "host memory");
		return -EINVAL;
	}
	if (pi.device != tc->dev)
		NVL_DBG("mem_register: %p lives on GPU%d, this rank uses GPU%d", ptr, pi.device, tc->dev);
	struct nvl_export *x = NULL;
	pthread_mutex_lock(&tc->xlock);
	for (struct nvl_export **pp = &tc->exports; *pp; pp = &(*pp)->next) {
		struct nvl_export *e = *pp;
		if ((uintptr_t)ptr >= e->base && (uintptr_t)ptr + len <= e->base + e->size) {
			if (e->buffer_id == pi.buffer_id) {
				x = e;
				x->refs++;
				break;
			}
		}
	}
	pthread_mutex_unlock(&tc->xlock);
	if (x) {
		NVL_DBG("mem_register: %p+%zu reuses export %llu", ptr, len, (unsigned long long)x->id);
		*out = x;
		return 0;
	}
	x = nvl_core->calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->buffer_id = pi.buffer_id;
	x->refs = 1;
	for (int i = 0; i < NVL_MAX_CHUNKS; i++)
		x->fd[i] = -1;
	if (pi.legacy_ipc) {
		x->kind = NVL_KIND_IPC;
		x->base = pi.base;
		x->size = pi.size;
		rc = grt_ipc_get((void *)pi.base, x->ipc);
	} else if (pi.vmm_fd) {
		/* A VMM buffer may span several physical chunks (expandable segments):
		 * walk the mappings from ptr's chunk until the range is covered. */
		x->kind = NVL_KIND_VMM;
		uintptr_t at = (uintptr_t)ptr, end = (uintptr_t)ptr + (len ? len : 1);
		while (rc == 0 && at < end) {
			uintptr_t b;
			size_t s;
			if (x->nchunks == NVL_MAX_CHUNKS) {
				NVL_ERR("mem_register: %p+%zu spans more than %d VMM chunks", ptr, len, NVL_MAX_CHUNKS);
				rc = -ENOTSUP;
				break;
			}
			rc = grt_vmm_range((void *)at, &b, &s);
			if (rc != 0)
				break;
			if (x->nchunks == 0)
				x->base = b;
			else if (b != x->base + x->size) {
				NVL_ERR("mem_register: VMM chunks of %p are not contiguous", ptr);
				rc = -ENOTSUP;
				break;
			}
			rc = grt_vmm_export_fd(b, &x->fd[x->nchunks]);
			if (rc != 0)
				break;
			x->chunk[x->nchunks++] = s;
			x->size += s;
			at = b + s;
		}
	} else {
		/* Staging through weft's own buffers is not implemented yet. */
		NVL_LOG(WEFT_LOG_DEBUG, "mem_register: %p can be neither IPC-exported (not cudaMalloc) nor "
					"exported as a POSIX fd (VMM without that handle type)", ptr);
		rc = -ENOTSUP;
	}
	if (rc != 0) {
		export_free(x);
		return rc;
	}
	pthread_mutex_lock(&tc->xlock);
	x->id = tc->next_export++;
	x->next = tc->exports;
	tc->exports = x;
	pthread_mutex_unlock(&tc->xlock);
	if (x->kind == NVL_KIND_VMM && (rc = nvl_fdsrv_start(&tc->srv, tc->tag, tc->rank)) != 0)
		NVL_ERR("mem_register: VMM buffers cannot be shared: the fd server did not start");
	NVL_DBG("mem_register: export %llu %s base %p size %zu (%d chunks)", (unsigned long long)x->id,
		x->kind == NVL_KIND_IPC ? "ipc" : "vmm", (void *)x->base, x->size, x->nchunks);
	*out = x;
	return 0;
}

static void export_put(struct nvl_ctx *tc, struct nvl_export *x)
{
	pthread_mutex_lock(&tc->xlock);
	int last = --x->refs == 0;
	if (last)
		for (struct nvl_export **pp = &tc->exports; *pp; pp = &(*pp)->next)
			if (*pp == x) {
				*pp = x->next;
				break;
			}
	pthread_mutex_unlock(&tc->xlock);
	if (last)
		export_free(x);
}

static int nvl_mem_register(void *ctx, void *ptr, size_t len, enum weft_mem_type type, void **out)
{
	struct nvl_ctx *tc = ctx;
	if (type != WEFT_MEM_CUDA && type != WEFT_MEM_HOST)
		return -ENOTSUP;
	struct nvl_mh *mh = nvl_core->calloc(1, sizeof(*mh));
	if (!mh)
		return -ENOMEM;
	mh->ptr = ptr;
	mh->len = len;
	mh->type = type;
	if (type == WEFT_MEM_CUDA) {
		int rc = on_dev(tc);
		if (rc == 0)
			rc = export_get(tc, ptr, len, &mh->x);
		if (rc != 0) {
			nvl_core->free(mh);
			return rc;
		}
	}
	*out = mh;
	return 0;
}

static int nvl_mem_deregister(void *ctx, void *handle)
{
	struct nvl_mh *mh = handle;
	if (mh && mh->x)
		export_put(ctx, mh->x);
	nvl_core->free(mh);
	return 0;
}

static int nvl_mem_serialize(void *ctx, void *handle, void *buf, size_t *len)
{
	struct nvl_ctx *tc = ctx;
	struct nvl_mh *mh = handle;
	struct nvl_export *x = mh->x;
	/* Built aside and copied: a blob section has no alignment. */
	struct nvl_wire w;
	nvl_wire_make(&w, x, mh->ptr, mh->len, tc->host_hash, tc->dev, (uint64_t)getpid());
	size_t need = sizeof(w) + (size_t)w.nchunks * sizeof(uint64_t);
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	memcpy(buf, &w, sizeof(w));
	for (int i = 0; i < w.nchunks; i++) {
		uint64_t c = x->chunk[i];
		memcpy((unsigned char *)buf + sizeof(w) + (size_t)i * sizeof(c), &c, sizeof(c));
	}
	*len = need;
	return 0;
}

static void import_put(struct nvl_ctx *tc, struct nvl_import *im)
{
	if (--im->refs > 0)
		return;
	for (struct nvl_import **pp = &tc->imports; *pp; pp = &(*pp)->next)
		if (*pp == im) {
			*pp = im->next;
			break;
		}
	if (im->kind == NVL_KIND_IPC)
		grt_ipc_close(im->base);
	else
		grt_vmm_unmap(im->base, im->chunk, im->nchunks);
	nvl_core->free(im);
}

/* Maps (or finds in the cache) the peer's export a section names. */
static int import_get(struct nvl_ctx *tc, int peer, const struct nvl_wire *w, const uint64_t *chunk,
		      struct nvl_import **out)
{
	for (struct nvl_import *im = tc->imports; im; im = im->next) {
		if (im->peer == peer && im->peer_pid == w->pid && im->export_id == w->export_id &&
		    im->buffer_id == w->buffer_id) {
			im->refs++;
			*out = im;
			return 0;
		}
	}
	struct nvl_import *im = nvl_core->calloc(1, sizeof(*im));
	if (!im)
		return -ENOMEM;
	im->peer = peer;
	im->peer_pid = w->pid;
	im->export_id = w->export_id;
	im->buffer_id = w->buffer_id;
	im->kind = w->kind;
	im->refs = 1;
	int rc;
	if (w->kind == NVL_KIND_IPC) {
		rc = grt_ipc_open(w->ipc, &im->base);
	} else {
		int fds[NVL_MAX_CHUNKS];
		im->nchunks = w->nchunks;
		for (int i = 0; i < w->nchunks; i++)
			im->chunk[i] = chunk[i];
		rc = nvl_fd_fetch(tc->tag, peer, w->export_id, fds, w->nchunks);
		if (rc == 0) {
			rc = grt_vmm_import_fds(fds, im->chunk, im->nchunks, tc->dev, &im->base);
			for (int i = 0; i < w->nchunks; i++)
				close(fds[i]);
		}
	}
	if (rc == -EEXIST) {
		NVL_DBG("mem_import: rank %d's buffer (export %llu) is mapped in this process already (a freed buffer "
			 "whose mapping is still open, or another library's mapping): not mapped again",
			 peer, (unsigned long long)w->export_id);
		nvl_core->free(im);
		return rc;
	}
	if (rc != 0) {
		NVL_ERR("mem_import: cannot map rank %d's buffer (export %llu): %s", peer,
			(unsigned long long)w->export_id, weft_kit_errname(rc));
		nvl_core->free(im);
		return rc;
	}
	im->next = tc->imports;
	tc->imports = im;
	*out = im;
	return 0;
}

static int nvl_mem_import(void *ctx, int peer, const void *buf, size_t len, void **out)
{
	struct nvl_ctx *tc = ctx;
	struct nvl_wire wire;
	uint64_t chunk[NVL_MAX_CHUNKS];
	char why[160];
	if (nvl_wire_parse(buf, len, &wire, chunk, why, sizeof(why)) != 0) {
		NVL_ERR("mem_import: malformed section from rank %d (%zu bytes): %s", peer, len, why);
		return -WEFT_ERR_PROTOCOL;
	}
	const struct nvl_wire *w = &wire;
	if (w->host_hash != tc->host_hash)
		return -EHOSTUNREACH;
	int same_process = w->pid == (uint64_t)getpid();
	if (w->kind == NVL_KIND_HOST && !same_process)
		return -EHOSTUNREACH; /* pageable host memory of another process: no mapping */
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	struct nvl_rmh *r = nvl_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->len = w->len;
	r->kind = w->kind;
	if (same_process) {
		r->ptr = (char *)(uintptr_t)w->ptr;
	} else {
		rc = import_get(tc, peer, w, chunk, &r->im);
		if (rc != 0) {
			nvl_core->free(r);
			return rc;
		}
		r->ptr = (char *)r->im->base + w->offset;
	}
	*out = r;
	return 0;
}

static int nvl_mem_release(void *ctx, void *handle)
{
	struct nvl_rmh *r = handle;
	if (!r)
		return 0;
	if (r->im) {
		on_dev(ctx);
		import_put(ctx, r->im);
	}
	nvl_core->free(r);
	return 0;
}

static int nvl_mem_map(void *ctx, void *handle, void **dev_ptr)
{
	struct nvl_rmh *r = handle;
	if (r->kind == NVL_KIND_HOST)
		return -ENOTSUP;
	*dev_ptr = r->ptr;
	return 0;
}

static int nvl_mem_alloc(void *ctx, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr)
{
	struct nvl_ctx *tc = ctx;
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	if (type == WEFT_MEM_HOST)
		return grt_host_alloc_mapped(bytes ? bytes : 1, host_ptr, dev_ptr);
	if (type != WEFT_MEM_CUDA)
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

static int nvl_mem_free(void *ctx, void *host_ptr, void *dev_ptr)
{
	on_dev(ctx);
	if (host_ptr)
		grt_host_free(host_ptr);
	else if (dev_ptr)
		grt_free(dev_ptr);
	return 0;
}

static int nvl_mem_query(void *ctx, const void *ptr, enum weft_mem_type *type)
{
	struct grt_ptr_info pi;
	if (grt_init() != 0 || grt_ptr_info(ptr, &pi) != 0)
		return -ENOENT;
	switch (pi.kind) {
	case GRT_MEM_DEVICE:
	case GRT_MEM_MANAGED:
		*type = WEFT_MEM_CUDA;
		return 0;
	case GRT_MEM_HOST:
		*type = WEFT_MEM_HOST;
		return 0;
	default:
		return -ENOENT;
	}
}

/* ---------------------------------------------------------- endpoints */
static int nvl_endpoint(void *ctx, const struct weft_tp_peer *peer, void *addr, size_t *len, void **out)
{
	struct nvl_ctx *tc = ctx;
	if (peer->peer_class == WEFT_PEER_OTHER_HOST)
		return -EHOSTUNREACH;
	if (!addr || *len < sizeof(struct nvl_addr)) {
		*len = sizeof(struct nvl_addr);
		return -ENOSPC;
	}
	int rc = on_dev(tc);
	if (rc != 0)
		return rc;
	struct nvl_ep *ep = nvl_core->calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->tc = tc;
	ep->peer = peer->rank;
	ep->peer_dev = -1;
	if ((rc = grt_stream_create(&ep->stream)) != 0)
		goto err_free;
	if ((rc = grt_event_create(&ep->event)) != 0)
		goto err_stream;
	struct nvl_addr a = {.magic = NVL_MAGIC, .rank = tc->rank, .device = tc->dev,
			     .pid = (uint64_t)getpid(), .host_hash = tc->host_hash};
	memcpy(addr, &a, sizeof(a));
	*len = sizeof(a);
	*out = ep;
	return 0;
err_stream:
	grt_stream_destroy(ep->stream);
err_free:
	nvl_core->free(ep);
	return rc;
}

static int nvl_connect(void *handle, const void *peer_addr, size_t len)
{
	struct nvl_ep *ep = handle;
	struct nvl_addr a;
	char why[160];
	if (nvl_addr_parse(peer_addr, len, ep->peer, &a, why, sizeof(why)) != 0) {
		NVL_ERR("connect: malformed address from rank %d: %s", ep->peer, why);
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
		ep->p2p = 1;
		return 0;
	}
	const char *link = "none";
	int rank = 0;
	rc = grt_p2p_info(ep->tc->dev, a.device, &ep->p2p, &link, &rank);
	if (rc != 0)
		return rc;
	snprintf(ep->link, sizeof(ep->link), "%s", link);
	if (!ep->p2p) {
		NVL_ERR("connect: GPU%d cannot access GPU%d (no peer access); rank %d is unreachable", ep->tc->dev,
			a.device, ep->peer);
		return -EHOSTUNREACH;
	}
	/* Same-process peers share pointers, which need peer access enabled;
	 * IPC-opened memory enables it lazily. */
	return grt_enable_peer(a.device);
}

static int nvl_disconnect(void *handle)
{
	struct nvl_ep *ep = handle;
	if (!ep)
		return 0;
	on_dev(ep->tc);
	grt_stream_sync(ep->stream);
	grt_event_destroy(ep->event);
	grt_stream_destroy(ep->stream);
	nvl_core->free(ep);
	return 0;
}

static int nvl_put(void *handle, void *rhandle, uint64_t roff, void *lhandle, uint64_t loff, size_t len)
{
	struct nvl_ep *ep = handle;
	struct nvl_rmh *r = rhandle;
	struct nvl_mh *l = lhandle;
	if (roff > r->len || len > r->len - roff || loff > l->len || len > l->len - loff) {
		NVL_ERR("put: out of bounds (remote %llu+%zu of %llu, local %llu+%zu of %zu)", (unsigned long long)roff,
			len, (unsigned long long)r->len, (unsigned long long)loff, len, l->len);
		return -EINVAL;
	}
	if (r->kind == NVL_KIND_HOST && !ep->same_process)
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

static int nvl_signal(void *handle, void *rhandle, uint64_t roff, uint64_t value)
{
	struct nvl_ep *ep = handle;
	struct nvl_rmh *r = rhandle;
	if (roff > r->len || r->len - roff < 8 || (roff & 7) != 0) {
		NVL_ERR("signal: token at %llu outside the peer's %llu-byte region or unaligned",
			(unsigned long long)roff, (unsigned long long)r->len);
		return -EINVAL;
	}
	int rc = on_dev(ep->tc);
	if (rc != 0)
		return rc;
	if (r->kind == NVL_KIND_HOST) {
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

static int nvl_flush(void *handle)
{
	struct nvl_ep *ep = handle;
	if (ep->posted == 0)
		return 0;
	int rc = on_dev(ep->tc);
	if (rc == 0)
		rc = grt_event_query(ep->event);
	if (rc == 0)
		ep->posted = 0;
	return rc;
}

static int nvl_progress(void *ctx)
{
	return 0; /* copy engines and peer stores need no help */
}

/* ---------------------------------------------------------- describe */
static int nvl_describe(void *ctx, char *buf, size_t len)
{
	if (grt_init() != 0) {
		snprintf(buf, len, "no CUDA device (%s)", grt_init_error());
		return 0;
	}
	int n = 0;
	int rc = grt_device_count(&n);
	if (rc != 0)
		return rc;
	size_t o = 0;
	char name[64] = "";
	grt_device_name(0, name, sizeof(name));
	o += (size_t)snprintf(buf + o, len - o, "%d CUDA device%s (%s)", n, n == 1 ? "" : "s", name);
	for (int i = 0; i < n && o < len; i++)
		for (int j = i + 1; j < n && o < len; j++) {
			int acc = 0, rk = 0;
			const char *link = "none";
			if (grt_p2p_info(i, j, &acc, &link, &rk) == 0)
				o += (size_t)snprintf(buf + o, len - o, ", GPU%d-GPU%d %s", i, j, link);
		}
	if (ctx && o < len)
		snprintf(buf + o, len - o, "; this rank GPU%d", ((struct nvl_ctx *)ctx)->dev);
	return 0;
}

static int nvl_probe(struct weft_tp_device *devs, int *n)
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
			if (j != i && grt_p2p_info(i, j, &acc, &link, &rk) == 0 && strcmp(link, "nvlink") == 0)
				snprintf(d->link, sizeof(d->link), "nvlink");
		}
		d->numa_node = -1;
		grt_device_pci(i, d->pci_path, sizeof(d->pci_path));
		d->mem_types = 1u << WEFT_MEM_CUDA;
		d->peer_classes = 1u << WEFT_PEER_SAME_PROCESS | 1u << WEFT_PEER_SAME_HOST;
	}
	*n = k;
	return 0;
}

static int nvl_ep_describe(void *handle, char *buf, size_t len)
{
	struct nvl_ep *ep = handle;
	snprintf(buf, len, "nvlink GPU%d->GPU%d p2p=%s%s", ep->tc->dev, ep->peer_dev, ep->link,
		 ep->same_process ? " same-process" : "");
	return 0;
}

/* -------------------------------------------------------- descriptor */
static const struct weft_transport_ops nvl_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = nvl_open,
	.close = nvl_close,
	.mem_register = nvl_mem_register,
	.mem_deregister = nvl_mem_deregister,
	.mem_serialize = nvl_mem_serialize,
	.mem_import = nvl_mem_import,
	.mem_release = nvl_mem_release,
	.endpoint = nvl_endpoint,
	.connect = nvl_connect,
	.disconnect = nvl_disconnect,
	.put = nvl_put,
	.signal = nvl_signal,
	.flush = nvl_flush,
	.progress = nvl_progress,
	.describe = nvl_describe,
	.probe = nvl_probe,
	.ep_describe = nvl_ep_describe,
	.mem_map = nvl_mem_map,
	.mem_alloc = nvl_mem_alloc,
	.mem_free = nvl_mem_free,
	.mem_query = nvl_mem_query,
	.stage = &nvl_stage_ops,
};

static const struct weft_plugin_desc nvl_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "nvlink",
	.ops = &nvl_ops,
};

static const struct weft_plugin_desc *const nvl_descs[] = {&nvl_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	nvl_core = core;
	grt_set_logger(core, "nvlink");
	if (weft_kit_params_declare(core, "nvlink", nvl_params, WEFT_KIT_NROWS(nvl_params)) < 0)
		return NULL; /* logged, naming the parameter */
	return nvl_descs;
}
