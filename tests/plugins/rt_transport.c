/* SPDX-License-Identifier: Apache-2.0 */
/* A test transport for tests/test_registry.c, compiled into several plugins by
 * tests/registry.cmake; compile definitions pick the defect each one carries:
 * RT_NAME, RT_ABI_MAJOR, RT_ABI_MINOR, RT_DESCRIBE, RT_INIT_NULL, RT_NO_PUT,
 * RT_NEWER (ops beyond the core's struct), RT_BAD_DESCS, RT_WITH_ALGO. */
#include <string.h>

#include <weft/plugin.h>

#ifndef RT_NAME
#define RT_NAME "rt-good"
#endif
#ifndef RT_ABI_MAJOR
#define RT_ABI_MAJOR WEFT_PLUGIN_ABI_MAJOR
#endif
#ifndef RT_ABI_MINOR
#define RT_ABI_MINOR WEFT_PLUGIN_ABI_MINOR
#endif
#ifndef RT_DESCRIBE
#define RT_DESCRIBE "rt test transport"
#endif

/* The context open hands out: tests check it came back through the core's view
 * of the ops table, which proves the offsets agree. */
#define RT_TC ((void *)0x5eed)

static int rt_open(const struct weft_tp_open_args *args, void **tc)
{
	*tc = RT_TC;
	return 0;
}
static void rt_close(void *tc) {}
static int rt_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh) { return -ENOTSUP; }
static int rt_mem_deregister(void *tc, void *mh) { return 0; }
static int rt_mem_serialize(void *tc, void *mh, void *buf, size_t *len) { return -ENOTSUP; }
static int rt_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh) { return -ENOTSUP; }
static int rt_mem_release(void *tc, void *rmh) { return 0; }
static int rt_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	return -EHOSTUNREACH;
}
static int rt_connect(void *ep, const void *peer_addr, size_t len) { return -ENOTSUP; }
static int rt_disconnect(void *ep) { return 0; }
#ifndef RT_NO_PUT
static int rt_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len) { return -ENOTSUP; }
#endif
static int rt_signal(void *ep, void *rmh, uint64_t roff, uint64_t value) { return -ENOTSUP; }
static int rt_flush(void *ep) { return 0; }
static int rt_progress(void *tc) { return 0; }
static int rt_describe(void *tc, char *buf, size_t len)
{
	if (len == 0)
		return -ENOSPC;
	strncpy(buf, RT_DESCRIBE, len - 1);
	buf[len - 1] = '\0';
	return 0;
}
static int rt_probe(struct weft_tp_device *devs, int *n)
{
	*n = 0;
	return 0;
}
static int rt_ep_describe(void *ep, char *buf, size_t len) { return -ENOTSUP; }

#define RT_OPS_INIT \
	.open = rt_open, .close = rt_close, .mem_register = rt_mem_register, .mem_deregister = rt_mem_deregister, \
	.mem_serialize = rt_mem_serialize, .mem_import = rt_mem_import, .mem_release = rt_mem_release, \
	.endpoint = rt_endpoint, .connect = rt_connect, .disconnect = rt_disconnect, .signal = rt_signal, \
	.flush = rt_flush, .progress = rt_progress, .describe = rt_describe, .probe = rt_probe, \
	.ep_describe = rt_ep_describe

#ifdef RT_NEWER
/* A plugin of a later minor: its table has ops this core does not know. */
static int rt_future_op(void *tc) { return 0; }
static const struct {
	struct weft_transport_ops base;
	int (*future_op)(void *tc);
} rt_ops_newer = {
	.base = {.size = sizeof(rt_ops_newer), RT_OPS_INIT, .put = rt_put},
	.future_op = rt_future_op,
};
#define RT_OPS (&rt_ops_newer.base)
#else
static const struct weft_transport_ops rt_ops = {
	.size = sizeof(rt_ops),
	RT_OPS_INIT,
#ifndef RT_NO_PUT
	.put = rt_put,
#endif
};
#define RT_OPS (&rt_ops)
#endif

static const struct weft_plugin_desc rt_desc = {
	.size = sizeof(rt_desc),
	.abi_major = RT_ABI_MAJOR,
	.abi_minor = RT_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = RT_NAME,
	.ops = RT_OPS,
};

#ifdef RT_WITH_ALGO
static const struct weft_algo *const rt_algo_list[] = {NULL};
static const struct weft_algo_ops rt_algo_ops = {.size = sizeof(rt_algo_ops), .algos = rt_algo_list};
static const struct weft_plugin_desc rt_algo_desc = {
	.size = sizeof(rt_algo_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_ALGO_PACK,
	.name = RT_NAME "-algos",
	.ops = &rt_algo_ops,
};
#endif

#ifdef RT_BAD_DESCS
/* One file offering every kind of broken descriptor next to a good one: each
 * bad one is refused on its own and the good one still loads. */
static const struct weft_plugin_desc rt_small = {.size = 4};
static const struct weft_plugin_desc rt_short = {.size = offsetof(struct weft_plugin_desc, name),
						 .abi_major = WEFT_PLUGIN_ABI_MAJOR};
static const struct weft_plugin_desc rt_noname = {
	.size = sizeof(rt_noname), .abi_major = WEFT_PLUGIN_ABI_MAJOR, .kind = WEFT_PLUGIN_TRANSPORT, .ops = RT_OPS};
static const struct weft_plugin_desc rt_badname = {.size = sizeof(rt_badname),
						   .abi_major = WEFT_PLUGIN_ABI_MAJOR,
						   .kind = WEFT_PLUGIN_TRANSPORT,
						   .name = "Bad_Name",
						   .ops = RT_OPS};
static const struct weft_plugin_desc rt_badkind = {
	.size = sizeof(rt_badkind), .abi_major = WEFT_PLUGIN_ABI_MAJOR, .kind = 7, .name = RT_NAME "-badkind", .ops = RT_OPS};
static const struct weft_plugin_desc rt_noops = {.size = sizeof(rt_noops),
						 .abi_major = WEFT_PLUGIN_ABI_MAJOR,
						 .kind = WEFT_PLUGIN_TRANSPORT,
						 .name = RT_NAME "-noops"};
static const struct weft_transport_ops rt_tiny_ops = {.size = sizeof(size_t)};
static const struct weft_plugin_desc rt_tinyops = {.size = sizeof(rt_tinyops),
						   .abi_major = WEFT_PLUGIN_ABI_MAJOR,
						   .kind = WEFT_PLUGIN_TRANSPORT,
						   .name = RT_NAME "-tinyops",
						   .ops = &rt_tiny_ops};
/* The file's own name again (refused: further names take a suffix), and a
 * well-named second transport given twice (the second refused as a twin). */
static const struct weft_plugin_desc rt_twin = {.size = sizeof(rt_twin),
						.abi_major = WEFT_PLUGIN_ABI_MAJOR,
						.kind = WEFT_PLUGIN_TRANSPORT,
						.name = RT_NAME,
						.ops = RT_OPS};
static const struct weft_plugin_desc rt_second = {.size = sizeof(rt_second),
						  .abi_major = WEFT_PLUGIN_ABI_MAJOR,
						  .kind = WEFT_PLUGIN_TRANSPORT,
						  .name = RT_NAME "-second",
						  .ops = RT_OPS};
#endif

static const struct weft_plugin_desc *const rt_descs[] = {
	&rt_desc,
#ifdef RT_WITH_ALGO
	&rt_algo_desc,
#endif
#ifdef RT_BAD_DESCS
	&rt_small, &rt_short, &rt_noname, &rt_badname, &rt_badkind, &rt_noops, &rt_tinyops, &rt_twin, &rt_second, &rt_second,
#endif
	NULL,
};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	core->log(core->self, WEFT_LOG_INFO, "init of " RT_NAME " (" RT_DESCRIBE ", core version %d)",
		  core->core_version);
#ifdef RT_INIT_NULL
	core->log(core->self, WEFT_LOG_WARN, "declining to load: this test plugin always does");
	(void)rt_descs;
	return NULL;
#else
	/* One documented parameter, which weft-info -c shows with its source. */
	static const struct weft_param_decl depth = {
		.size = sizeof(depth),
		.section = RT_NAME,
		.key = "depth",
		.type = WEFT_PARAM_INT,
		.default_value = "4",
		.help = "Queue depth of the test transport.",
	};
	int rc = core->param_declare(core->self, &depth);
	if (rc != 0 && rc != -EEXIST)
		core->log(core->self, WEFT_LOG_WARN, "declaring " RT_NAME ".depth failed: %d", rc);
	/* Read back through the plugin's own section (section NULL). */
	int64_t v = 0;
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	if (core->param_get(core->self, NULL, "depth", WEFT_PARAM_INT, &v, &src) == 0)
		core->log(core->self, WEFT_LOG_INFO, "depth %lld from %s", (long long)v,
			  src == WEFT_PARAM_SRC_ENV ? "env" : src == WEFT_PARAM_SRC_FILE ? "file" : "default");
	return rt_descs;
#endif
}
