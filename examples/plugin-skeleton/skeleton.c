/* SPDX-License-Identifier: Apache-2.0 */
/* skeleton: the smallest complete weft transport, as a starting point for a new
 * one. It reaches only ranks of the same process and moves data with memcpy,
 * so every op is real and short. docs/plugin-abi.md is the specification. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <weft/plugin.h>

/* The core's services. init runs once per file, so one static is enough; the
 * table stays valid until the process exits. */
static const struct weft_core_api *sk_core;

#define SK_LOG(level, ...) sk_core->log(sk_core->self, (level), __VA_ARGS__)

/* Identifies this process in blobs and endpoint addresses: a pid alone can
 * repeat across PID namespaces, the address of a static rarely does as well. */
static uint64_t sk_cookie(void)
{
	return ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&sk_core;
}

struct sk_context {
	int rank;
};

/* A local registration and an imported one look alike: base and length. */
struct sk_region {
	char *base;
	size_t len;
};

struct sk_endpoint {
	struct sk_context *tc;
	int peer;
	int connected;
};

/* This transport's section of a registered-memory blob. Versioned and fixed-size,
 * so that mem_import can check every field. */
#define SK_BLOB_MAGIC 0x534b4c31u /* "SKL1" */
#define SK_BLOB_VERSION 1
struct sk_blob {
	uint32_t magic;
	uint16_t version;
	uint16_t reserved; /* 0 */
	uint64_t cookie;   /* sk_cookie() of the process that registered it */
	uint64_t addr;
	uint64_t len;
};

static int sk_open(const struct weft_tp_open_args *args, void **tc)
{
	struct sk_context *c = sk_core->calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->rank = args->rank;
	*tc = c;
	return 0;
}

static void sk_close(void *tc)
{
	sk_core->free(tc);
}

static int sk_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	/* memcpy reaches host memory only; the core tries another transport. */
	if (type != WEFT_MEM_HOST)
		return -ENOTSUP;
	struct sk_region *r = sk_core->alloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->base = ptr;
	r->len = len;
	*mh = r;
	return 0;
}

static int sk_mem_deregister(void *tc, void *mh)
{
	sk_core->free(mh);
	return 0;
}

static int sk_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	const struct sk_region *r = mh;
	if (!buf || *len < sizeof(struct sk_blob)) {
		*len = sizeof(struct sk_blob);
		return -ENOSPC;
	}
	struct sk_blob b = {
		.magic = SK_BLOB_MAGIC,
		.version = SK_BLOB_VERSION,
		.cookie = sk_cookie(),
		.addr = (uint64_t)(uintptr_t)r->base,
		.len = r->len,
	};
	memcpy(buf, &b, sizeof(b));
	*len = sizeof(b);
	return 0;
}

static int sk_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct sk_blob b;
	/* The blob came from a peer: check every field before trusting any. */
	if (len != sizeof(b)) {
		SK_LOG(WEFT_LOG_ERROR, "rank %d's blob section is %zu bytes, expected %zu", peer, len, sizeof(b));
		return -WEFT_ERR_PROTOCOL;
	}
	memcpy(&b, buf, sizeof(b));
	if (b.magic != SK_BLOB_MAGIC || b.version != SK_BLOB_VERSION || b.reserved != 0) {
		SK_LOG(WEFT_LOG_ERROR, "rank %d's blob section has magic 0x%x version %u: not a skeleton v%d section",
		       peer, b.magic, b.version, SK_BLOB_VERSION);
		return -WEFT_ERR_PROTOCOL;
	}
	if (b.addr == 0 && b.len != 0) {
		SK_LOG(WEFT_LOG_ERROR, "rank %d's blob section describes %llu bytes at address 0", peer,
		       (unsigned long long)b.len);
		return -WEFT_ERR_PROTOCOL;
	}
	/* An address from another process means nothing here. */
	if (b.cookie != sk_cookie())
		return -EHOSTUNREACH;
	struct sk_region *r = sk_core->alloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->base = (char *)(uintptr_t)b.addr;
	r->len = (size_t)b.len;
	*rmh = r;
	return 0;
}

static int sk_mem_release(void *tc, void *rmh)
{
	sk_core->free(rmh);
	return 0;
}

static int sk_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	if (peer->peer_class != WEFT_PEER_SAME_PROCESS)
		return -EHOSTUNREACH;
	uint64_t cookie = sk_cookie();
	if (!addr || *len < sizeof(cookie)) {
		*len = sizeof(cookie);
		return -ENOSPC;
	}
	struct sk_endpoint *e = sk_core->calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->tc = tc;
	e->peer = peer->rank;
	memcpy(addr, &cookie, sizeof(cookie));
	*len = sizeof(cookie);
	*ep = e;
	return 0;
}

static int sk_connect(void *ep, const void *peer_addr, size_t len)
{
	struct sk_endpoint *e = ep;
	uint64_t cookie;
	if (e->connected)
		return -EISCONN;
	if (len != sizeof(cookie)) {
		SK_LOG(WEFT_LOG_ERROR, "rank %d's endpoint address is %zu bytes, expected %zu", e->peer, len,
		       sizeof(cookie));
		return -WEFT_ERR_PROTOCOL;
	}
	memcpy(&cookie, peer_addr, sizeof(cookie));
	if (cookie != sk_cookie())
		return -EHOSTUNREACH;
	e->connected = 1;
	return 0;
}

static int sk_disconnect(void *ep)
{
	sk_core->free(ep);
	return 0;
}

/* True when [off, off+len) lies inside a region of rlen bytes, without overflow. */
static int sk_in_bounds(size_t rlen, uint64_t off, uint64_t len)
{
	return off <= rlen && len <= rlen - off;
}

static int sk_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	const struct sk_endpoint *e = ep;
	const struct sk_region *dst = rmh, *src = mh;
	if (!e->connected)
		return -ENOTCONN;
	if (!sk_in_bounds(dst->len, roff, len) || !sk_in_bounds(src->len, loff, len))
		return -EINVAL;
	/* Complete on return, which the ABI allows: flush then has nothing to wait for. */
	memmove(dst->base + roff, src->base + loff, len);
	return 0;
}

static int sk_signal(void *ep, void *rmh, uint64_t roff, uint64_t value)
{
	const struct sk_endpoint *e = ep;
	const struct sk_region *dst = rmh;
	if (!e->connected)
		return -ENOTCONN;
	if (!sk_in_bounds(dst->len, roff, sizeof(uint64_t)) || roff % sizeof(uint64_t) != 0)
		return -EINVAL;
	/* Release: a waiter that reads the new token also sees every earlier put. */
	__atomic_store_n((uint64_t *)(void *)(dst->base + roff), value, __ATOMIC_RELEASE);
	return 0;
}

static int sk_flush(void *ep)
{
	const struct sk_endpoint *e = ep;
	return e->connected ? 0 : -ENOTCONN;
}

static int sk_progress(void *tc)
{
	return 0; /* nothing is ever in flight */
}

static int sk_describe(void *tc, char *buf, size_t len)
{
	int n = snprintf(buf, len, "memcpy between ranks of one process (example transport)");
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static int sk_probe(struct weft_tp_device *devs, int *n)
{
	if (*n < 1) {
		*n = 1;
		return -ENOSPC;
	}
	memset(&devs[0], 0, sizeof(devs[0]));
	devs[0].size = sizeof(devs[0]);
	snprintf(devs[0].name, sizeof(devs[0].name), "self");
	snprintf(devs[0].link, sizeof(devs[0].link), "memcpy");
	devs[0].numa_node = -1;
	devs[0].mem_types = 1u << WEFT_MEM_HOST;
	devs[0].peer_classes = 1u << WEFT_PEER_SAME_PROCESS;
	*n = 1;
	return 0;
}

static int sk_ep_describe(void *ep, char *buf, size_t len)
{
	const struct sk_endpoint *e = ep;
	int n = snprintf(buf, len, "memcpy peer=%d", e->peer);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static const struct weft_transport_ops sk_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = sk_open,
	.close = sk_close,
	.mem_register = sk_mem_register,
	.mem_deregister = sk_mem_deregister,
	.mem_serialize = sk_mem_serialize,
	.mem_import = sk_mem_import,
	.mem_release = sk_mem_release,
	.endpoint = sk_endpoint,
	.connect = sk_connect,
	.disconnect = sk_disconnect,
	.put = sk_put,
	.signal = sk_signal,
	.flush = sk_flush,
	.progress = sk_progress,
	.describe = sk_describe,
	.probe = sk_probe,
	.ep_describe = sk_ep_describe,
};

static const struct weft_plugin_desc sk_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "skeleton",
	.ops = &sk_ops,
};

static const struct weft_plugin_desc *const sk_descs[] = { &sk_desc, NULL };

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	/* An older or broken core lacks entries every plugin uses: decline. */
	if (!weft_core_api_usable(core))
		return NULL;
	sk_core = core;
	/* A parameter, to show the pattern: WEFT_SKELETON_ENABLE=0 (or enable = 0 in
	 * the config file's [skeleton] section) makes the plugin decline to load. */
	const struct weft_param_decl enable = {
		.size = sizeof(enable),
		.section = "skeleton",
		.key = "enable",
		.type = WEFT_PARAM_BOOL,
		.default_value = "1",
		.help = "Load the skeleton example transport.",
	};
	int on = 1;
	size_t bad = 0;
	int rc = weft_plugin_declare_params(core, &enable, 1, &bad);
	if (rc == 0)
		rc = core->param_get(core->self, "skeleton", "enable", WEFT_PARAM_BOOL, &on, NULL);
	if (rc != 0) {
		core->log(core->self, WEFT_LOG_ERROR, "cannot read parameter skeleton.enable: %d", rc);
		return NULL;
	}
	if (!on) {
		core->log(core->self, WEFT_LOG_INFO, "disabled by skeleton.enable = 0");
		return NULL;
	}
	return sk_descs;
}
