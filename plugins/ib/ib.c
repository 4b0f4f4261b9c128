/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: the transport descriptor, its parameters, and the context (the
 * selected ports of each opened device and a protection domain per device);
 * describe and probe for weft-info and topology. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibp.h"

const struct weft_core_api *ibp_core;

static const char *const ibp_signal_names[] = {"auto", "atomic", "imm", NULL};

#define I(key, field, def, lo, hi, help) WEFT_KIT_P_INT(key, struct ibp_settings, field, def, lo, hi, help)
static const struct weft_kit_param ibp_params[] = {
	WEFT_KIT_P_STRBUF("devices", struct ibp_settings, devices, NULL, NULL,
			  "RDMA ports to use, as device:port or device (every port), comma-separated, e.g. "
			  "mlx5_0:1,mlx5_1:1; unset: every active port"),
	I("gid_index", gid_index, "-1", -1, 65535,
	  "GID table index used on every port; -1 picks one (RoCE v2 with an IPv4-mapped address first)"),
	I("sq_depth", sq_depth, "256", 2, 65536,
	  "send work requests outstanding per connection (queue pair send queue)"),
	I("rq_depth", rq_depth, "128", 1, 65536, "receives posted per connection, consumed by write-with-immediate signals"),
	I("cq_size", cq_size, "0", 0, 1 << 22, "completion queue entries per connection; 0: sq_depth + rq_depth"),
	I("signal_every", signal_every, "16", 1, 65536,
	  "request a completion every N send work requests (the others are unsignaled)"),
	WEFT_KIT_P_SIZE("max_msg_size", struct ibp_settings, max_msg_size, "0", 0, UINT64_MAX,
			"largest single RDMA write; longer puts are split; 0: the port's max_msg_sz"),
	I("mtu", mtu, "0", 0, 4096, "path MTU in bytes (256..4096); 0: the port's active MTU (the lower of both ends)"),
	I("timeout", timeout, "14", 0, 31, "local ACK timeout exponent: 4.096 us * 2^timeout (0..31)"),
	I("retry_cnt", retry_cnt, "7", 0, 7, "transport retries before a send fails with retry-exceeded (0..7)"),
	I("rnr_retry", rnr_retry, "7", 0, 7, "receiver-not-ready retries (0..7; 7 retries forever)"),
	I("min_rnr_timer", min_rnr_timer, "12", 0, 31, "receiver-not-ready NAK delay code (0..31)"),
	I("service_level", service_level, "0", 0, 15, "InfiniBand service level (0..15)"),
	I("traffic_class", traffic_class, "0", 0, 255, "GRH traffic class (RoCE DSCP << 2) (0..255)"),
	I("hop_limit", hop_limit, "64", 1, 255, "GRH hop limit (1..255)"),
	WEFT_KIT_P_BOOL("peer_memory", struct ibp_settings, peer_memory, "0",
			"ibv_reg_mr accepts CUDA device pointers (the nvidia-peermem module is loaded)"),
	WEFT_KIT_P_STRBUF("signal", struct ibp_settings, signal, "auto", ibp_signal_names,
			  "how signals reach the peer: auto, atomic (fenced fetch-and-add) or imm (write with immediate)"),
	I("imm_slots", imm_slots, "1024", 1, IBP_MAX_SLOTS,
	  "distinct tokens one connection can signal with write-with-immediate (1..4096)"),
};
#undef I

int ibp_verbs_fail(const char *verb, const char *where, int err)
{
	IBP_ERR("%s on %s failed: %s", verb, where, strerror(err > 0 ? err : EIO));
	return -WEFT_ERR_TRANSPORT;
}

int ibp_read_settings(struct ibp_settings *s)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if ((rc = weft_kit_params_load(ibp_core, "ib", ibp_params, WEFT_KIT_NROWS(ibp_params), s)) < 0)
		return rc;
	if (s->mtu != 0 && s->mtu != 256 && s->mtu != 512 && s->mtu != 1024 && s->mtu != 2048 && s->mtu != 4096) {
		IBP_ERR("parameter ib.mtu=%lld is none of 0, 256, 512, 1024, 2048, 4096", (long long)s->mtu);
		return -WEFT_ERR_CONFIG;
	}
	if (s->signal_every > s->sq_depth) {
		IBP_ERR("parameter ib.signal_every=%lld exceeds ib.sq_depth=%lld: the send queue would fill "
			"before a completion is requested",
			(long long)s->signal_every, (long long)s->sq_depth);
		return -WEFT_ERR_CONFIG;
	}
	if (s->cq_size != 0 && s->cq_size < s->sq_depth + s->rq_depth) {
		IBP_ERR("parameter ib.cq_size=%lld is below ib.sq_depth + ib.rq_depth = %lld: completions would overflow",
			(long long)s->cq_size, (long long)(s->sq_depth + s->rq_depth));
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

static int ibp_open(const struct weft_tp_open_args *args, void **tc)
{
	int rc;
	if (!args || !tc || args->size < offsetof(struct weft_tp_open_args, host_id) + sizeof(args->host_id))
		return -EINVAL;
	struct ibp_ctx *ctx = ibp_core->calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->rank = args->rank;
	if ((rc = ibp_read_settings(&ctx->set)) < 0)
		goto err_free;
	if ((rc = ibp_fabric_open(&ctx->fab, &ctx->set)) < 0)
		goto err_free;
	if (ctx->fab.ndevices_found == 0) {
		IBP_INFO("no RDMA device found");
		rc = -WEFT_ERR_NO_DEVICE;
		goto err_close_fabric;
	}
	if (ctx->fab.nports == 0) {
		IBP_LOG(ctx->set.devices[0] ? WEFT_LOG_WARN : WEFT_LOG_INFO,
			"no usable RDMA port (%d device%s found, %d port%s down%s%s)", ctx->fab.ndevices_found,
			ctx->fab.ndevices_found == 1 ? "" : "s", ctx->fab.nports_down, ctx->fab.nports_down == 1 ? "" : "s",
			ctx->set.devices[0] ? ", ib.devices=" : "", ctx->set.devices);
		rc = -WEFT_ERR_NO_DEVICE;
		goto err_close_fabric;
	}
	for (int i = 0; i < ctx->fab.ndevs; i++) {
		struct ibp_dev *d = &ctx->fab.devs[i];
		errno = 0;
		d->pd = ibp_verbs->alloc_pd(d->vctx);
		if (!d->pd) {
			rc = ibp_verbs_fail("ibv_alloc_pd", d->name, errno);
			goto err_close_fabric;
		}
		if (ctx->set.sq_depth > d->attr.max_qp_wr || ctx->set.rq_depth > d->attr.max_qp_wr) {
			IBP_ERR("parameters ib.sq_depth=%lld / ib.rq_depth=%lld exceed %s's limit of %d work requests",
				(long long)ctx->set.sq_depth, (long long)ctx->set.rq_depth, d->name, d->attr.max_qp_wr);
			rc = -WEFT_ERR_CONFIG;
			goto err_close_fabric;
		}
	}
	*tc = ctx;
	return 0;

err_close_fabric:
	ibp_fabric_close(&ctx->fab);
err_free:
	ibp_core->free(ctx);
	return rc;
}

static void ibp_close(void *tc)
{
	struct ibp_ctx *ctx = tc;
	if (!ctx)
		return;
	if (ctx->eps || ctx->nregions)
		IBP_WARN("closing a context that still has endpoints or registrations");
	while (ctx->eps)
		ibp_disconnect(ctx->eps);
	while (ctx->mhs)
		ibp_mem_deregister(ctx, ctx->mhs);
	ibp_fabric_close(&ctx->fab);
	ibp_core->free(ctx);
}

static int append(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*at < len ? buf + *at : NULL, *at < len ? len - *at : 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	*at += (size_t)n;
	return 0;
}

static void describe_ports(const struct ibp_fabric *fab, char *buf, size_t len, size_t *at)
{
	for (int i = 0; i < fab->nports; i++) {
		const struct ibp_port *p = &fab->ports[i];
		const struct ibp_dev *d = &fab->devs[p->dev];
		append(buf, len, at, "%s%s %s %.1fGB/s mtu=%d", i ? "; " : "", p->name, ibp_link_name(p->attr.link_layer),
		       p->gbytes, ibp_mtu_bytes(p->attr.active_mtu));
		if (p->gid_index >= 0)
			append(buf, len, at, " gid=%d%s%s", p->gid_index, p->gid_type[0] ? "/" : "", p->gid_type);
		append(buf, len, at, " atomics=%s", d->attr.atomic_cap != IBV_ATOMIC_NONE ? "yes" : "no");
		if (p->numa_node >= 0)
			append(buf, len, at, " numa=%d", p->numa_node);
	}
}

static int ibp_describe(void *tc, char *buf, size_t len)
{
	struct ibp_ctx *ctx = tc;
	size_t at = 0;
	if (!buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (ctx) {
		describe_ports(&ctx->fab, buf, len, &at);
		append(buf, len, &at, " signal=%s", ctx->set.signal);
		return at < len ? 0 : -ENOSPC;
	}
	struct ibp_settings s;
	struct ibp_fabric fab;
	int rc = ibp_read_settings(&s);
	if (rc < 0)
		return rc;
	if ((rc = ibp_fabric_open(&fab, &s)) < 0)
		return rc;
	if (fab.ndevices_found == 0)
		append(buf, len, &at, "no RDMA device");
	else if (fab.nports == 0)
		append(buf, len, &at, "no usable RDMA port (%d device%s, %d port%s down%s%s)", fab.ndevices_found,
		       fab.ndevices_found == 1 ? "" : "s", fab.nports_down, fab.nports_down == 1 ? "" : "s",
		       s.devices[0] ? ", ib.devices=" : "", s.devices);
	else {
		describe_ports(&fab, buf, len, &at);
		/* How mem_register would take CUDA memory (dma-buf first, as it tries). */
		char why[256] = "";
		if (ibp_dmabuf_devices(why, sizeof(why)) > 0)
			append(buf, len, &at, " cuda=dma-buf");
		else if (s.peer_memory)
			append(buf, len, &at, " cuda=peer-memory");
		else
			append(buf, len, &at, " cuda=no (%s)", why);
	}
	ibp_fabric_close(&fab);
	return at < len ? 0 : -ENOSPC;
}

static int ibp_probe(struct weft_tp_device *devs, int *n)
{
	struct ibp_settings s;
	struct ibp_fabric fab;
	int rc;
	if (!n || *n < 0 || (*n > 0 && !devs))
		return -EINVAL;
	if ((rc = ibp_read_settings(&s)) < 0)
		return rc;
	if ((rc = ibp_fabric_open(&fab, &s)) < 0)
		return rc;
	int count = fab.nports;
	/* The CUDA driver is asked only where there are ports, so that a host
	 * without RDMA never loads it for this plugin. */
	bool cuda = s.peer_memory;
	if (!cuda && count > 0 && *n > 0) {
		char why[256] = "";
		cuda = ibp_dmabuf_devices(why, sizeof(why)) > 0;
		if (!cuda)
			IBP_DBG("probe: CUDA memory not reachable: %s, and ib.peer_memory is 0", why);
	}
	for (int i = 0; i < count && i < *n; i++) {
		const struct ibp_port *p = &fab.ports[i];
		struct weft_tp_device *d = &devs[i];
		memset(d, 0, sizeof(*d));
		d->size = sizeof(*d);
		snprintf(d->name, sizeof(d->name), "%s", p->name);
		snprintf(d->link, sizeof(d->link), "%s", p->attr.link_layer == IBV_LINK_LAYER_ETHERNET ? "roce" : "ib");
		d->bandwidth_gbps = p->gbytes;
		d->numa_node = p->numa_node;
		snprintf(d->pci_path, sizeof(d->pci_path), "%s", p->pci_path);
		d->mem_types = 1u << WEFT_MEM_HOST;
		if (cuda)
			d->mem_types |= 1u << WEFT_MEM_CUDA;
		d->peer_classes = (1u << WEFT_PEER_CLASS_COUNT) - 1;
	}
	ibp_fabric_close(&fab);
	if (count > *n) {
		*n = count;
		return -ENOSPC;
	}
	*n = count;
	return 0;
}

const struct weft_transport_ops ibp_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = ibp_open,
	.close = ibp_close,
	.mem_register = ibp_mem_register,
	.mem_deregister = ibp_mem_deregister,
	.mem_serialize = ibp_mem_serialize,
	.mem_import = ibp_mem_import,
	.mem_release = ibp_mem_release,
	.endpoint = ibp_endpoint,
	.connect = ibp_connect,
	.disconnect = ibp_disconnect,
	.put = ibp_put,
	.signal = ibp_signal,
	.flush = ibp_flush,
	.progress = ibp_progress,
	.describe = ibp_describe,
	.probe = ibp_probe,
	.ep_describe = ibp_ep_describe,
};

static const struct weft_plugin_desc ibp_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "ib",
	.ops = &ibp_ops,
};

static const struct weft_plugin_desc *const ibp_descs[] = {&ibp_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	ibp_core = core;
	if (weft_kit_params_declare(core, "ib", ibp_params, WEFT_KIT_NROWS(ibp_params)) < 0)
		return NULL; /* logged, naming the parameter */
	return ibp_descs;
}
