/* SPDX-License-Identifier: Apache-2.0 */
/* A test transport for tests/test_select.c: the shm plugin's data path
 * (plugins/shm/shm_mem.c and shm_ep.c, compiled in unchanged) under another
 * name, "fakefast", whose probe declares whatever its parameters say, so a
 * test can show that the core's choice follows declared properties:
 *   [fakefast] latency_us, bandwidth_gbps (0 = unknown), peer_classes (a list
 *   of same-process, same-host, other-host), numa_node, pci_path,
 *   mem_types (a list of host, cuda, hip), link (the link kind, e.g. nvlink),
 *   fail_connect (connect fails), fail_alloc (mem_alloc fails).
 * FF_VARIANT, a number a build may define, makes two builds of this file
 * differ (tests/select.cmake builds a second one for the consistency check).
 * Real data moves, so a connection it wins carries a real workload. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "shm.h"

#ifndef FF_VARIANT
#define FF_VARIANT 0
#endif

const struct weft_core_api *shm_core;

static const struct weft_param_decl ff_params[] = {
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "latency_us",
	 .type = WEFT_PARAM_DOUBLE, .default_value = "0",
	 .help = "latency the probe declares (0: unknown)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "bandwidth_gbps",
	 .type = WEFT_PARAM_DOUBLE, .default_value = "0",
	 .help = "bandwidth the probe declares (0: unknown)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "peer_classes",
	 .type = WEFT_PARAM_STRING, .default_value = "same-process,same-host",
	 .help = "peer classes the probe declares"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "numa_node",
	 .type = WEFT_PARAM_INT, .default_value = "-1",
	 .help = "NUMA node the probe declares for its device (-1: unknown)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "pci_path",
	 .type = WEFT_PARAM_STRING, .default_value = NULL,
	 .help = "PCI path the probe declares for its device (unset: none)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "fail_connect",
	 .type = WEFT_PARAM_BOOL, .default_value = "0",
	 .help = "make every connect fail with -EIO (to test the fall-back)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "fail_alloc",
	 .type = WEFT_PARAM_BOOL, .default_value = "0",
	 .help = "make every mem_alloc fail with -EIO (to show who is asked to allocate)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "mem_types",
	 .type = WEFT_PARAM_STRING, .default_value = "host",
	 .help = "memory types the probe declares its device reaches (host, cuda, hip)"},
	{.size = sizeof(struct weft_param_decl), .section = "fakefast", .key = "link",
	 .type = WEFT_PARAM_STRING, .default_value = "fake",
	 .help = "link kind the probe declares for its device"},
};

static int ff_open(const struct weft_tp_open_args *args, void **tc)
{
	if (!args || !tc)
		return -EINVAL;
	struct shm_ctx *ctx = shm_core->calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->rank = args->rank;
	ctx->pid = getpid();
	ctx->map = true;
	ctx->cma = true;
	/* As the shm plugin does under Yama ptrace_scope=1: let sibling ranks write us. */
	(void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	*tc = ctx;
	return 0;
}

static void ff_close(void *tc)
{
	shm_core->free(tc);
}

/* Whether the bool parameter [fakefast] key is set. */
static int ff_on(const char *key)
{
	int on = 0;
	return shm_core->param_get(shm_core->self, "fakefast", key, WEFT_PARAM_BOOL, &on, NULL) == 0 && on;
}

static int ff_connect(void *ep, const void *peer_addr, size_t len)
{
	return ff_on("fail_connect") ? -EIO : shm_connect(ep, peer_addr, len);
}

static int ff_mem_alloc(void *tc, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr)
{
	return ff_on("fail_alloc") ? -EIO : shm_mem_alloc(tc, type, bytes, host_ptr, dev_ptr);
}

static int ff_describe(void *tc, char *buf, size_t len)
{
	int n = snprintf(buf, len, "fakefast (test transport: shm's data path, declared properties; build variant %d)",
			 FF_VARIANT);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static int ff_probe(struct weft_tp_device *devs, int *n)
{
	if (!n || *n < 0 || (*n > 0 && !devs))
		return -EINVAL;
	if (*n < 1) {
		*n = 1;
		return -ENOSPC;
	}
	double lat = 0, bw = 0;
	const char *cls = NULL, *mem = NULL, *link = NULL;
	int64_t numa = -1;
	shm_core->param_get(shm_core->self, "fakefast", "numa_node", WEFT_PARAM_INT, &numa, NULL);
	const char *pci = NULL;
	shm_core->param_get(shm_core->self, "fakefast", "pci_path", WEFT_PARAM_STRING, &pci, NULL);
	shm_core->param_get(shm_core->self, "fakefast", "latency_us", WEFT_PARAM_DOUBLE, &lat, NULL);
	shm_core->param_get(shm_core->self, "fakefast", "bandwidth_gbps", WEFT_PARAM_DOUBLE, &bw, NULL);
	shm_core->param_get(shm_core->self, "fakefast", "peer_classes", WEFT_PARAM_STRING, &cls, NULL);
	shm_core->param_get(shm_core->self, "fakefast", "mem_types", WEFT_PARAM_STRING, &mem, NULL);
	shm_core->param_get(shm_core->self, "fakefast", "link", WEFT_PARAM_STRING, &link, NULL);
	struct weft_tp_device *d = &devs[0];
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	snprintf(d->name, sizeof(d->name), "fake0");
	snprintf(d->link, sizeof(d->link), "%s", link ? link : "fake");
	d->latency_us = lat;
	d->bandwidth_gbps = bw;
	d->numa_node = (int)numa;
	if (pci)
		snprintf(d->pci_path, sizeof(d->pci_path), "%s", pci);
	if (mem && strstr(mem, "host"))
		d->mem_types |= 1u << WEFT_MEM_HOST;
	if (mem && strstr(mem, "cuda"))
		d->mem_types |= 1u << WEFT_MEM_CUDA;
	if (mem && strstr(mem, "hip"))
		d->mem_types |= 1u << WEFT_MEM_HIP;
	if (cls && strstr(cls, "same-process"))
		d->peer_classes |= 1u << WEFT_PEER_SAME_PROCESS;
	if (cls && strstr(cls, "same-host"))
		d->peer_classes |= 1u << WEFT_PEER_SAME_HOST;
	if (cls && strstr(cls, "other-host"))
		d->peer_classes |= 1u << WEFT_PEER_OTHER_HOST;
	*n = 1;
	return 0;
}

static const struct weft_transport_ops ff_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = ff_open,
	.close = ff_close,
	.mem_register = shm_mem_register,
	.mem_deregister = shm_mem_deregister,
	.mem_serialize = shm_mem_serialize,
	.mem_import = shm_mem_import,
	.mem_release = shm_mem_release,
	.endpoint = shm_endpoint,
	.connect = ff_connect,
	.disconnect = shm_disconnect,
	.put = shm_put,
	.signal = shm_signal,
	.flush = shm_flush,
	.progress = shm_progress,
	.describe = ff_describe,
	.probe = ff_probe,
	.ep_describe = shm_ep_describe,
	.mem_map = shm_mem_map,
	.mem_alloc = ff_mem_alloc,
	.mem_free = shm_mem_free,
	.mem_query = shm_mem_query,
};

static const struct weft_plugin_desc ff_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "fakefast",
	.ops = &ff_ops,
};

static const struct weft_plugin_desc *const ff_descs[] = {&ff_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!core || !core->log || !core->param_declare || !core->param_get || !core->calloc || !core->free)
		return NULL;
	shm_core = core;
	for (size_t i = 0; i < sizeof(ff_params) / sizeof(ff_params[0]); i++)
		if (core->param_declare(core->self, &ff_params[i]) < 0)
			return NULL;
	return ff_descs;
}
