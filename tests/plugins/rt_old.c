/* SPDX-License-Identifier: Apache-2.0 */
/* A transport built against the frozen ABI 0.0 header (tests/abi): its ops
 * table ends after `progress`. Right after the table sit functions that abort,
 * where ABI 0.1 put describe, probe and ep_describe: a core that read past the
 * table's size would call them and the test would die. */
#include <stdlib.h>

#include "weft_plugin_0_0.h"

#define RT_TC ((void *)0x01d)

static int old_open(const struct weft_tp_open_args *args, void **tc)
{
	*tc = RT_TC;
	return 0;
}
static void old_close(void *tc) {}
static int old_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh) { return -ENOTSUP; }
static int old_mem_deregister(void *tc, void *mh) { return 0; }
static int old_mem_serialize(void *tc, void *mh, void *buf, size_t *len) { return -ENOTSUP; }
static int old_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh) { return -ENOTSUP; }
static int old_mem_release(void *tc, void *rmh) { return 0; }
static int old_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	return -EHOSTUNREACH;
}
static int old_connect(void *ep, const void *peer_addr, size_t len) { return -ENOTSUP; }
static int old_disconnect(void *ep) { return 0; }
static int old_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len) { return -ENOTSUP; }
static int old_signal(void *ep, void *rmh, uint64_t roff, uint64_t value) { return -ENOTSUP; }
static int old_flush(void *ep) { return 0; }
static int old_progress(void *tc) { return 0; }

static int poison_describe(void *tc, char *buf, size_t len) { abort(); }
static int poison_probe(struct weft_tp_device *devs, int *n) { abort(); }
static int poison_ep_describe(void *ep, char *buf, size_t len) { abort(); }

static const struct {
	struct weft_transport_ops ops;
	int (*describe)(void *tc, char *buf, size_t len);
	int (*probe)(struct weft_tp_device *devs, int *n);
	int (*ep_describe)(void *ep, char *buf, size_t len);
} old_table = {
	.ops = {
		.size = sizeof(struct weft_transport_ops),
		.open = old_open, .close = old_close, .mem_register = old_mem_register,
		.mem_deregister = old_mem_deregister, .mem_serialize = old_mem_serialize,
		.mem_import = old_mem_import, .mem_release = old_mem_release, .endpoint = old_endpoint,
		.connect = old_connect, .disconnect = old_disconnect, .put = old_put, .signal = old_signal,
		.flush = old_flush, .progress = old_progress,
	},
	.describe = poison_describe,
	.probe = poison_probe,
	.ep_describe = poison_ep_describe,
};

static const struct weft_plugin_desc old_desc = {
	.size = sizeof(old_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "rt-old",
	.ops = &old_table.ops,
};

static const struct weft_plugin_desc *const old_descs[] = {&old_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	core->log(core->self, WEFT_LOG_INFO, "init of rt-old, built for ABI %d.%d", WEFT_PLUGIN_ABI_MAJOR,
		  WEFT_PLUGIN_ABI_MINOR);
	return old_descs;
}
