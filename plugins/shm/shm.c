/* SPDX-License-Identifier: Apache-2.0 */
/* shm plugin: the transport descriptor, its parameters, and the context (one
 * per communicator): what a same-host peer needs to reach this process. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "shm.h"

const struct weft_core_api *shm_core;

/* The parameters of [shm], read at each open. */
struct shm_settings {
	int map, cma, ptracer_any;
};

static const struct weft_kit_param shm_params[] = {
	WEFT_KIT_P_BOOL("map", struct shm_settings, map, "1",
			"map peers' shared-memory segments and write them with memcpy (0: every write uses cross-memory "
			"attach)"),
	WEFT_KIT_P_BOOL("cma", struct shm_settings, cma, "1",
			"write regions that are not in a segment with process_vm_writev (cross-memory attach)"),
	WEFT_KIT_P_BOOL("ptracer_any", struct shm_settings, ptracer_any, "1",
			"under Yama ptrace_scope=1, let peer processes of this user write this one with CMA "
			"(PR_SET_PTRACER_ANY)"),
};

/* Yama's ptrace_scope 1 lets a process attach only to its descendants, and
 * process_vm_writev needs attach rights: ranks are siblings, so each one
 * declares any process a permitted tracer, as Open MPI's vader does. The
 * kernel still requires the same uid (or CAP_SYS_PTRACE). */
static void allow_cma(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int scope = 0;
	if (!f)
		return;
	if (fscanf(f, "%d", &scope) != 1)
		scope = 0;
	fclose(f);
	if (scope == 1 && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0)
		SHM_WARN("prctl(PR_SET_PTRACER_ANY) failed (%s): peers may not write unmapped memory of "
			 "this process", strerror(errno));
	else if (scope >= 2)
		SHM_INFO("Yama ptrace_scope=%d forbids cross-memory attach: only regions in shared-memory "
			 "segments (weft_mem_alloc) are reachable", scope);
}

static int shm_open_ctx(const struct weft_tp_open_args *args, void **tc)
{
	if (!args || !tc || args->size < offsetof(struct weft_tp_open_args, nranks) + sizeof(args->nranks))
		return -EINVAL;
	struct shm_settings set;
	int rc = weft_kit_params_load(shm_core, "shm", shm_params, WEFT_KIT_NROWS(shm_params), &set);
	if (rc < 0)
		return rc;
	bool map = set.map, cma = set.cma, ptracer = set.ptracer_any;
	if (!map && !cma) {
		SHM_ERR("shm.map=0 and shm.cma=0 leave no way to write a peer's memory");
		return -WEFT_ERR_CONFIG;
	}
	struct shm_ctx *ctx = shm_core->calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->rank = args->rank;
	ctx->pid = getpid();
	ctx->map = map;
	ctx->cma = cma;
	if (cma && ptracer)
		allow_cma();
	*tc = ctx;
	return 0;
}

static void shm_close(void *tc)
{
	struct shm_ctx *ctx = tc;
	if (!ctx)
		return;
	if (ctx->neps || ctx->nregions)
		SHM_WARN("closing a context that still has %d endpoint(s) and %d region(s)", ctx->neps,
			 ctx->nregions);
	shm_core->free(ctx);
}

static int shm_describe(void *tc, char *buf, size_t len)
{
	struct shm_ctx *ctx = tc;
	if (!buf || len == 0)
		return -EINVAL;
	int n;
	if (ctx)
		n = snprintf(buf, len, "shm pid=%d map=%d cma=%d", (int)ctx->pid, ctx->map, ctx->cma);
	else
		n = snprintf(buf, len, "shm (memfd segments, process_vm_writev)");
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static int shm_probe(struct weft_tp_device *devs, int *n)
{
	if (!n || *n < 0 || (*n > 0 && !devs))
		return -EINVAL;
	if (*n < 1) {
		*n = 1;
		return -ENOSPC;
	}
	struct weft_tp_device *d = &devs[0];
	memset(d, 0, sizeof(*d));
	d->size = sizeof(*d);
	snprintf(d->name, sizeof(d->name), "shm");
	snprintf(d->link, sizeof(d->link), "shm");
	/* A store to a mapped page plus the peer's load of it: a cache-line
	 * transfer, well under a microsecond. Bandwidth: a conservative figure
	 * for one memcpy stream (docs/perf/2026-11-30-vm2core-transports.md). */
	d->latency_us = 0.2;
	d->bandwidth_gbps = 8.0;
	d->numa_node = -1;
	d->mem_types = 1u << WEFT_MEM_HOST;
	d->peer_classes = (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST);
	*n = 1;
	return 0;
}

static const struct weft_transport_ops shm_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = shm_open_ctx,
	.close = shm_close,
	.mem_register = shm_mem_register,
	.mem_deregister = shm_mem_deregister,
	.mem_serialize = shm_mem_serialize,
	.mem_import = shm_mem_import,
	.mem_release = shm_mem_release,
	.endpoint = shm_endpoint,
	.connect = shm_connect,
	.disconnect = shm_disconnect,
	.put = shm_put,
	.signal = shm_signal,
	.flush = shm_flush,
	.progress = shm_progress,
	.describe = shm_describe,
	.probe = shm_probe,
	.ep_describe = shm_ep_describe,
	.mem_map = shm_mem_map,
	.mem_alloc = shm_mem_alloc,
	.mem_free = shm_mem_free,
	.mem_query = shm_mem_query,
	/* ABI 0.3: segments from mem_alloc map into peers; other memory is
	 * written with process_vm_writev, which pins nothing. */
	.caps = WEFT_TP_CAP_HOST_MAPPABLE | WEFT_TP_CAP_UNPINNED_WRITES,
};

static const struct weft_plugin_desc shm_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "shm",
	.ops = &shm_ops,
};

static const struct weft_plugin_desc *const shm_descs[] = {&shm_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	shm_core = core;
	if (weft_kit_params_declare(core, "shm", shm_params, WEFT_KIT_NROWS(shm_params)) < 0)
		return NULL; /* logged, naming the parameter */
	return shm_descs;
}
