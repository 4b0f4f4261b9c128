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

#define P(key, type, def, help) {sizeof(struct weft_param_decl), "ib", key, type, def, help}
static const struct weft_param_decl ibp_params[] = {
	P("devices", WEFT_PARAM_STRING, NULL,
	  "RDMA ports to use, as device:port or device (every port), comma-separated, e.g. mlx5_0:1,mlx5_1:1; "
	  "unset: every active port"),
	P("gid_index", WEFT_PARAM_INT, "-1",
	  "GID table index used on every port; -1 picks one (RoCE v2 with an IPv4-mapped address first)"),
	P("sq_depth", WEFT_PARAM_INT, "256", "send work requests outstanding per connection (queue pair send queue)"),
	P("rq_depth", WEFT_PARAM_INT, "128",
	  "receives posted per connection, consumed by write-with-immediate signals"),
	P("cq_size", WEFT_PARAM_INT, "0", "completion queue entries per connection; 0: sq_depth + rq_depth"),
	P("signal_every", WEFT_PARAM_INT, "16",
	  "request a completion every N send work requests (the others are unsignaled)"),
	P("max_msg_size", WEFT_PARAM_SIZE, "0",
	  "largest single RDMA write; longer puts are split; 0: the port's max_msg_sz"),
	P("mtu", WEFT_PARAM_INT, "0", "path MTU in bytes (256..4096); 0: the port's active MTU (the lower of both ends)"),
	P("timeout", WEFT_PARAM_INT, "14", "local ACK timeout exponent: 4.096 us * 2^timeout (0..31)"),
	P("retry_cnt", WEFT_PARAM_INT, "7", "transport retries before a send fails with retry-exceeded (0..7)"),
	P("rnr_retry", WEFT_PARAM_INT, "7", "receiver-not-ready retries (0..7; 7 retries forever)"),
	P("min_rnr_timer", WEFT_PARAM_INT, "12", "receiver-not-ready NAK delay code (0..31)"),
	P("service_level", WEFT_PARAM_INT, "0", "InfiniBand service level (0..15)"),
	P("traffic_class", WEFT_PARAM_INT, "0", "GRH traffic class (RoCE DSCP << 2) (0..255)"),
	P("hop_limit", WEFT_PARAM_INT, "64", "GRH hop limit (1..255)"),
	P("peer_memory", WEFT_PARAM_BOOL, "0",
	  "ibv_reg_mr accepts CUDA device pointers (the nvidia-peermem module is loaded)"),
	P("signal", WEFT_PARAM_STRING, "auto",
	  "how signals reach the peer: auto, atomic (fenced fetch-and-add) or imm (write with immediate)"),
	P("imm_slots", WEFT_PARAM_INT, "1024",
	  "distinct tokens one connection can signal with write-with-immediate (1..4096)"),
};
#undef P

int ibp_verbs_fail(const char *verb, const char *where, int err)
{
	IBP_ERR("%s on %s failed: %s", verb, where, strerror(err > 0 ? err : EIO));
	return -WEFT_ERR_TRANSPORT;
}

static int get_int(const char *key, int64_t *out, int64_t lo, int64_t hi)
{
	int rc = ibp_core->param_get(ibp_core->self, "ib", key, WEFT_PARAM_INT, out, NULL);
	if (rc < 0) {
		IBP_ERR("cannot read parameter ib.%s: %d", key, rc);
		return rc;
	}
	if (*out < lo || *out > hi) {
		IBP_ERR("parameter ib.%s=%lld is out of range %lld..%lld", key, (long long)*out, (long long)lo,
			(long long)hi);
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

static int get_string(const char *key, char *out, size_t cap)
{
	const char *v = NULL;
	int rc = ibp_core->param_get(ibp_core->self, "ib", key, WEFT_PARAM_STRING, &v, NULL);
	if (rc < 0) {
		IBP_ERR("cannot read parameter ib.%s: %d", key, rc);
		return rc;
	}
	if (!v) {
		out[0] = '\0';
		return 0;
	}
	if (strlen(v) >= cap) {
		IBP_ERR("parameter ib.%s is too long (%zu bytes, at most %zu)", key, strlen(v), cap - 1);
		return -WEFT_ERR_CONFIG;
	}
	strcpy(out, v);
	return 0;
}

int ibp_read_settings(struct ibp_settings *s)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if ((rc = get_string("devices", s->devices, sizeof(s->devices))) < 0 ||
	    (rc = get_int("gid_index", &s->gid_index, -1, 65535)) < 0 ||
	    (rc = get_int("sq_depth", &s->sq_depth, 2, 65536)) < 0 ||
	    (rc = get_int("rq_depth", &s->rq_depth, 1, 65536)) < 0 ||
	    (rc = get_int("cq_size", &s->cq_size, 0, 1 << 22)) < 0 ||
	    (rc = get_int("signal_every", &s->signal_every, 1, 65536)) < 0 ||
	    (rc = get_int("mtu", &s->mtu, 0, 4096)) < 0 || (rc = get_int("timeout", &s->timeout, 0, 31)) < 0 ||
	    (rc = get_int("retry_cnt", &s->retry_cnt, 0, 7)) < 0 ||
	    (rc = get_int("rnr_retry", &s->rnr_retry, 0, 7)) < 0 ||
	    (rc = get_int("min_rnr_timer", &s->min_rnr_timer, 0, 31)) < 0 ||
	    (rc = get_int("service_level", &s->service_level, 0, 15)) < 0 ||
	    (rc = get_int("traffic_class", &s->traffic_class, 0, 255)) < 0 ||
	    (rc = get_int("hop_limit", &s->hop_limit, 1, 255)) < 0 ||
	    (rc = get_int("imm_slots", &s->imm_slots, 1, IBP_MAX_SLOTS)) < 0 ||
	    (rc = get_string("signal", s->signal, sizeof(s->signal))) < 0)
		return rc;
	rc = ibp_core->param_get(ibp_core->self, "ib", "max_msg_size", WEFT_PARAM_SIZE, &s->max_msg_size, NULL);
	if (rc < 0) {
		IBP_ERR("cannot read parameter ib.max_msg_size: %d", rc);
		return rc;
	}
	rc = ibp_core->param_get(ibp_core->self, "ib", "peer_memory", WEFT_PARAM_BOOL, &s->peer_memory, NULL);
	if (rc < 0) {
		IBP_ERR("cannot read parameter ib.peer_memory: %d", rc);
		return rc;
	}
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
	if (s->signal[0] == '\0')
		strcpy(s->signal, "auto");
	if (strcmp(s->signal, "auto") != 0 && strcmp(s->signal, "atomic") != 0 && strcmp(s->signal, "imm") != 0) {
		IBP_ERR("parameter ib.signal='%s' is none of auto, atomic, imm", s->signal);
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
	else
		describe_ports(&fab, buf, len, &at);
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
		if (s.peer_memory || ibp_dmabuf)
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
	size_t bad = 0;
	int rc = weft_plugin_declare_params(core, ibp_params, sizeof(ibp_params) / sizeof(ibp_params[0]), &bad);
	if (rc != 0) {
		IBP_ERR("cannot declare parameter ib.%s: %d", ibp_params[bad].key, rc);
		return NULL;
	}
	return ibp_descs;
}
