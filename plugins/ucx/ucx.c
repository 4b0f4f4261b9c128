/* SPDX-License-Identifier: Apache-2.0 */
/* ucx plugin: the transport descriptor, its parameters, and the context: one UCP
 * context and worker per communicator, configured through ucp_config_modify
 * (never the environment), plus describe and probe. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ucx.h"

const struct weft_core_api *ucx_core;

/* The values of signal_order and error_mode, in their enums' order. */
static const char *const ucx_sig_names[] = {"flush", "fence", NULL};
static const char *const ucx_errmode_names[] = {"auto", "peer", "none", NULL};
static const char *const ucx_proto_names[] = {"v1", "ucx", NULL};

static const struct weft_kit_param ucx_params[] = {
	WEFT_KIT_P_STRBUF("tls", struct ucx_settings, tls, NULL, NULL,
			  "UCX transports to use, as UCX_TLS takes them (e.g. tcp, sm, posix,cma, ^tcp); unset: UCX's "
			  "choice"),
	WEFT_KIT_P_STRBUF("net_devices", struct ucx_settings, net_devices, NULL, NULL,
			  "network devices UCX may use, as UCX_NET_DEVICES takes them (e.g. lo, eth0, mlx5_0:1); unset: "
			  "the bootstrap's interface and every non-IP device"),
	WEFT_KIT_P_STRBUF("options", struct ucx_settings, options, NULL, NULL,
			  "further UCX settings, KEY=VALUE;KEY=VALUE with UCX's names less the UCX_ prefix (e.g. "
			  "TCP_SNDBUF=4M)"),
	WEFT_KIT_P_INT("max_inflight", struct ucx_settings, max_inflight, "256", 1, 1 << 24,
		       "puts and signals outstanding per endpoint before put and signal return -EAGAIN"),
	WEFT_KIT_P_ENUM("signal_order", struct ucx_settings, sig_mode, "flush", ucx_sig_names,
			"how a signal stays behind earlier puts: flush (wait for an endpoint flush) or fence "
			"(ucp_worker_fence)"),
	WEFT_KIT_P_INT("error_delay_ms", struct ucx_settings, error_delay_ms, "0", 0, 3600 * 1000,
		       "how long a peer failure seen by UCX is held back (put, signal, flush and progress return -EAGAIN) "
		       "before it is reported; 0 reports it at once (the core then fails the whole communicator)"),
	WEFT_KIT_P_ENUM("error_mode", struct ucx_settings, err_mode, "auto", ucx_errmode_names,
			"UCX peer-failure handling per endpoint: peer, none, or auto (none toward same-host peers when "
			"shared memory is available, which UCX cannot use with peer mode; peer otherwise)"),
	WEFT_KIT_P_ENUM("protocols", struct ucx_settings, protocols, "v1", ucx_proto_names,
			"UCX's protocol layer: v1 (UCX_PROTO_ENABLE=n, where UCX still has it) or ucx (UCX's default; "
			"UCX 1.16's protocols v2 busy-loop over tcp until an endpoint's wire-up is over)"),
};

int ucx_code(ucs_status_t st)
{
	switch (st) {
	case UCS_OK:
		return 0;
	case UCS_INPROGRESS:
	case UCS_ERR_NO_RESOURCE:
		return -EAGAIN;
	case UCS_ERR_NO_MEMORY:
		return -ENOMEM;
	case UCS_ERR_UNREACHABLE:
	case UCS_ERR_CONNECTION_RESET:
	case UCS_ERR_ENDPOINT_TIMEOUT:
	case UCS_ERR_REJECTED:
	case UCS_ERR_NOT_CONNECTED:
	case UCS_ERR_CANCELED:
	case UCS_ERR_TIMED_OUT:
		return -WEFT_ERR_PEER;
	default:
		return -WEFT_ERR_TRANSPORT;
	}
}

int ucx_errno(const char *what, ucs_status_t st)
{
	UCX_ERR("%s failed: %s (%d)", what, ucs_status_string(st), (int)st);
	return ucx_code(st);
}

/* UCX list values: names, commas, '^' (negation), ':' (port), '-', '_', '.'. */
static int check_list(const char *key, const char *v)
{
	for (const char *c = v; *c; c++) {
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		      strchr(",^:-_.", *c))) {
			UCX_ERR("parameter ucx.%s='%s' has an invalid character '%c' (expected a comma list as UCX_%s takes)",
				key, v, *c, strcmp(key, "tls") == 0 ? "TLS" : "NET_DEVICES");
			return -WEFT_ERR_CONFIG;
		}
	}
	return 0;
}

static int read_settings(struct ucx_settings *s)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if ((rc = weft_kit_params_load(ucx_core, "ucx", ucx_params, WEFT_KIT_NROWS(ucx_params), s)) < 0)
		return rc;
	if ((rc = check_list("tls", s->tls)) < 0 || (rc = check_list("net_devices", s->net_devices)) < 0)
		return rc;
	return 0;
}

static int config_set(ucp_config_t *cfg, const char *name, const char *value, const char *param)
{
	ucs_status_t st = ucp_config_modify(cfg, name, value);
	if (st != UCS_OK) {
		UCX_ERR("UCX refuses %s=%s (from parameter ucx.%s): %s", name, value, param, ucs_status_string(st));
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

/* Applies the settings to a UCX configuration. */
static int apply_settings(ucp_config_t *cfg, const struct ucx_settings *s)
{
	int rc;
	if (s->tls[0] && (rc = config_set(cfg, "TLS", s->tls, "tls")) < 0)
		return rc;
	if (s->net_devices[0] && (rc = config_set(cfg, "NET_DEVICES", s->net_devices, "net_devices")) < 0)
		return rc;
	/* UCX 1.16's protocols v2 retry an op on an endpoint whose wire-up is not
	 * over inside the posting call, without progress; two ranks signalling each
	 * other first over tcp then spin for ever. v1 queues the op instead. A UCX
	 * without the key has only one layer, so its refusal is not an error. */
	if (s->protocols == UCX_PROTO_V1) {
		ucs_status_t st = ucp_config_modify(cfg, "PROTO_ENABLE", "n");
		if (st != UCS_OK)
			UCX_LOG(WEFT_LOG_DEBUG, "protocols=v1: this UCX has no PROTO_ENABLE (%s); using its one layer",
				ucs_status_string(st));
	}
	/* options: KEY=VALUE pairs separated by ';'. */
	char buf[UCX_PARAM_MAX];
	strcpy(buf, s->options);
	char *save = NULL;
	for (char *pair = strtok_r(buf, ";", &save); pair; pair = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(pair, '=');
		if (!eq || eq == pair) {
			UCX_ERR("parameter ucx.options: '%s' is not KEY=VALUE", pair);
			return -WEFT_ERR_CONFIG;
		}
		*eq = '\0';
		const char *key = pair;
		if (strncmp(key, "UCX_", 4) == 0)
			key += 4;
		if ((rc = config_set(cfg, key, eq + 1, "options")) < 0)
			return rc;
	}
	return 0;
}

/* A UCP context with the settings applied. */
static int context_create(const struct ucx_settings *s, size_t est_eps, ucp_context_h *out)
{
	ucp_config_t *cfg = NULL;
	ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
	if (st != UCS_OK)
		return ucx_errno("ucp_config_read", st);
	int rc = apply_settings(cfg, s);
	if (rc < 0) {
		ucp_config_release(cfg);
		return rc;
	}
	ucp_params_t p;
	memset(&p, 0, sizeof(p));
	p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
		       UCP_PARAM_FIELD_NAME;
	/* RMA for puts; AMO64 for the token, which is one atomic swap so the peer
	 * never sees it half-written (a tcp put may land in pieces). */
	p.features = UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
	/* WAKEUP: a waiting rank sleeps on the worker's descriptor and wakes
	 * for a peer's traffic, which puts emulated over active messages (tcp,
	 * shared memory without cma) need this side's progress to land. */
	p.features |= UCP_FEATURE_WAKEUP;
	p.request_size = ucx_request_size();
	p.mt_workers_shared = 0;
	p.name = "weft";
	if (est_eps > 0) {
		p.field_mask |= UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
		p.estimated_num_eps = est_eps;
	}
	ucp_context_h ctx;
	st = ucp_init(&p, cfg, &ctx);
	ucp_config_release(cfg);
	if (st != UCS_OK) {
		UCX_LOG(WEFT_LOG_ERROR, "ucp_init failed: %s (%d) (tls=%s net_devices=%s; ucx_info -d lists transports)",
			ucs_status_string(st), (int)st, s->tls[0] ? s->tls : "(UCX's choice)",
			s->net_devices[0] ? s->net_devices : "(all)");
		if (st == UCS_ERR_NO_DEVICE || st == UCS_ERR_NO_ELEM || st == UCS_ERR_UNSUPPORTED)
			return -WEFT_ERR_NO_DEVICE;
		return ucx_code(st);
	}
	*out = ctx;
	return 0;
}

/* The transport resources of a context, "tl/dev" each, as ucp_context_print_info
 * lists them ("#  resource 1  :  md 1  dev 1  flags -- tcp/lo"). UCP has no
 * query for them; the printout is its one public window. */
#define UCX_MAX_RES 32
struct ucx_res {
	char tl[32];
	char dev[32];
};

static int context_resources(ucp_context_h ctx, struct ucx_res *res, int max)
{
	char *text = NULL;
	size_t tlen = 0;
	FILE *f = open_memstream(&text, &tlen);
	if (!f)
		return -ENOMEM;
	ucp_context_print_info(ctx, f);
	fclose(f);
	int n = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, "resource ") || !strstr(line, "--"))
			continue;
		const char *td = strrchr(line, ' ');
		td = td ? td + 1 : line;
		const char *slash = strchr(td, '/');
		if (!slash || n >= max)
			continue;
		snprintf(res[n].tl, sizeof(res[n].tl), "%.*s", (int)(slash - td), td);
		snprintf(res[n].dev, sizeof(res[n].dev), "%s", slash + 1);
		n++;
	}
	free(text);
	return n;
}

const char *ucx_tl_class(const char *tl)
{
	static const char *const shm[] = {"self", "posix", "sysv", "cma", "knem", "xpmem", "mm"};
	for (size_t i = 0; i < sizeof(shm) / sizeof(shm[0]); i++)
		if (strcmp(tl, shm[i]) == 0)
			return "shm";
	if (strcmp(tl, "tcp") == 0)
		return "tcp";
	if (strncmp(tl, "rc", 2) == 0 || strncmp(tl, "ud", 2) == 0 || strncmp(tl, "dc", 2) == 0)
		return "ib";
	if (strncmp(tl, "cuda", 4) == 0 || strncmp(tl, "gdr", 3) == 0 || strncmp(tl, "rocm", 4) == 0)
		return "gpu";
	return "other";
}

bool ucx_context_cuda(ucp_context_h context)
{
	ucp_context_attr_t attr;
	memset(&attr, 0, sizeof(attr));
	attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
	ucs_status_t st = ucx_sys->context_query(context, &attr);
	if (st != UCS_OK) {
		UCX_DBG("ucp_context_query(UCP_ATTR_FIELD_MEMORY_TYPES) failed: %s (%d): host memory only",
			ucs_status_string(st), (int)st);
		return false;
	}
	return (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

/* The interface that holds the IPv4 address addr ("" when none does). */
static void iface_of(const char *addr, char *name, size_t len)
{
	struct ifaddrs *ifs = NULL, *i;
	struct in_addr want;
	name[0] = '\0';
	if (!addr || inet_pton(AF_INET, addr, &want) != 1 || getifaddrs(&ifs) != 0)
		return;
	for (i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == want.s_addr) {
			snprintf(name, len, "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifs);
}

/* UCX's tcp listens on every network device it may use. Unless net_devices
 * (or the user's UCX_NET_DEVICES) names them, they are cut to the bootstrap's
 * interface and the non-IP devices (InfiniBand); the context is then made
 * again with that list. Returns the number of resources of the context kept. */
static int keep_tcp_to_bootstrap(struct ucx_ctx *ctx, const char *local_addr, size_t est_eps, struct ucx_res *res,
				 int nres)
{
	char ifname[IF_NAMESIZE + 1], list[UCX_PARAM_MAX];
	if (ctx->set.net_devices[0] || getenv("UCX_NET_DEVICES"))
		return nres;
	iface_of(local_addr, ifname, sizeof(ifname));
	if (!ifname[0])
		return nres;
	int other = 0;
	size_t at = (size_t)snprintf(list, sizeof(list), "%s", ifname);
	for (int i = 0; i < nres && at < sizeof(list); i++) {
		const char *cls = ucx_tl_class(res[i].tl);
		if (strcmp(cls, "tcp") == 0) {
			other |= strcmp(res[i].dev, ifname) != 0;
		} else if ((strcmp(cls, "ib") == 0 || strcmp(cls, "other") == 0) && !strstr(list, res[i].dev)) {
			at += (size_t)snprintf(list + at, sizeof(list) - at, ",%s", res[i].dev);
		}
	}
	if (!other || at >= sizeof(list))
		return nres;
	struct ucx_settings s = ctx->set;
	snprintf(s.net_devices, sizeof(s.net_devices), "%s", list);
	ucp_context_h again;
	if (context_create(&s, est_eps, &again) < 0)
		return nres; /* logged; the first context stays */
	ucp_cleanup(ctx->context);
	ctx->context = again;
	ctx->set = s;
	UCX_LOG(WEFT_LOG_INFO, "tcp kept to the bootstrap's interface %s (net_devices=%s; set ucx.net_devices to "
		"choose)", ifname, list);
	return context_resources(ctx->context, res, UCX_MAX_RES);
}

static int ucx_open(const struct weft_tp_open_args *args, void **tc)
{
	int rc;
	if (!args || !tc || args->size < offsetof(struct weft_tp_open_args, host_id) + sizeof(args->host_id))
		return -EINVAL;
	struct ucx_ctx *ctx = ucx_core->calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->rank = args->rank;
	if ((rc = read_settings(&ctx->set)) < 0)
		goto err_free;
	if ((rc = context_create(&ctx->set, args->nranks > 0 ? (size_t)args->nranks : 0, &ctx->context)) < 0)
		goto err_free;
	struct ucx_res res[UCX_MAX_RES];
	int nres = context_resources(ctx->context, res, UCX_MAX_RES);
	nres = keep_tcp_to_bootstrap(ctx, args->local_addr, args->nranks > 0 ? (size_t)args->nranks : 0, res, nres);
	for (int i = 0; i < nres; i++)
		if (strcmp(ucx_tl_class(res[i].tl), "shm") == 0 && strcmp(res[i].tl, "self") != 0)
			ctx->has_shm = true;
	ctx->has_cuda = ucx_context_cuda(ctx->context);
	UCX_DBG("opened context for rank %d: UCX %s, tls=%s net_devices=%s cuda=%d (its worker waits for the first "
		"endpoint)",
		ctx->rank, ucp_get_version_string(), ctx->set.tls[0] ? ctx->set.tls : "(default)",
		ctx->set.net_devices[0] ? ctx->set.net_devices : "(all)", ctx->has_cuda);
	*tc = ctx;
	return 0;

err_free:
	ucx_core->free(ctx);
	return rc;
}

/* The worker opens UCX's listening sockets and its shared-memory segments:
 * made for the first endpoint, so that a communicator whose peers all use
 * other transports has none. */
int ucx_worker_ensure(struct ucx_ctx *ctx)
{
	int rc;
	ucs_status_t st;
	if (ctx->worker)
		return 0;
	ucp_worker_params_t wp;
	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	/* The core serializes calls into one context but may make them from
	 * different threads (the caller's, the proxy's): UCX calls that
	 * "serialized"; "single" promises one thread only. */
	wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
	if ((st = ucp_worker_create(ctx->context, &wp, &ctx->worker)) != UCS_OK) {
		ctx->worker = NULL;
		return ucx_errno("ucp_worker_create", st);
	}
	if ((st = ucp_worker_get_address(ctx->worker, &ctx->addr, &ctx->addrlen)) != UCS_OK) {
		rc = ucx_errno("ucp_worker_get_address", st);
		goto err_destroy_worker;
	}
	if (ctx->addrlen == 0 || ctx->addrlen > UCX_ADDR_MAX) {
		UCX_ERR("ucp_worker_get_address gave %zu bytes (at most %d supported)", ctx->addrlen, UCX_ADDR_MAX);
		rc = -WEFT_ERR_TRANSPORT;
		goto err_release_addr;
	}
	if (ucp_worker_get_efd(ctx->worker, &ctx->efd) != UCS_OK)
		ctx->efd = -1; /* a wait then sleeps on the core's timer */
	UCX_DBG("rank %d: worker created, address %zu bytes", ctx->rank, ctx->addrlen);
	return 0;

err_release_addr:
	ucp_worker_release_address(ctx->worker, ctx->addr);
err_destroy_worker:
	ucp_worker_destroy(ctx->worker);
	ctx->worker = NULL;
	ctx->addr = NULL;
	ctx->addrlen = 0;
	return rc;
}

/* A worker whose peer process ended is not destroyed. Destroying it purges
 * what is still queued toward that peer, and UCX 1.13 aborts the process
 * (ucp_request.c:684, "got REP message") when that includes its reply to the
 * peer's wire-up request, queued because the dead peer's shared-memory FIFO is
 * full (another rank flooded it before the death was seen). The worker and its
 * context stay until the process exits (their memory, and shared-memory
 * segments the kernel releases then); the list keeps them reachable. */
struct ucx_abandoned {
	struct ucx_abandoned *next;
	ucp_worker_h worker;
	ucp_context_h context;
	struct ucx_ep *closing;
	struct ucx_sig *orphan_sigs;
};
static struct ucx_abandoned *abandoned;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;

static void abandon(struct ucx_ctx *ctx)
{
	struct ucx_abandoned *a = ucx_core->calloc(1, sizeof(*a));
	UCX_LOG(WEFT_LOG_INFO, "rank %d: a peer's process ended; this communicator's UCX worker is left to the process's "
		"exit (destroying it can abort the process in UCX 1.13)", ctx->rank);
	if (!a) {
		/* Nothing to hold it by: it stays all the same. */
		return;
	}
	a->worker = ctx->worker;
	a->context = ctx->context;
	a->closing = ctx->closing;
	a->orphan_sigs = ctx->orphan_sigs;
	ctx->closing = NULL;
	ctx->orphan_sigs = NULL;
	pthread_mutex_lock(&abandoned_lock);
	a->next = abandoned;
	abandoned = a;
	pthread_mutex_unlock(&abandoned_lock);
}

static void ucx_close(void *tc)
{
	struct ucx_ctx *ctx = tc;
	if (!ctx)
		return;
	if (ctx->eps || ctx->nregions || ctx->rmhs)
		UCX_WARN("closing a context that still has endpoints, registrations or imports");
	ucx_close_endpoints(ctx);
	while (ctx->rmhs)
		ucx_mem_release(ctx, ctx->rmhs);
	if (ctx->worker)
		ucp_worker_release_address(ctx->worker, ctx->addr);
	if (ctx->peer_gone) {
		abandon(ctx);
	} else {
		if (ctx->worker)
			ucp_worker_destroy(ctx->worker);
		ucx_free_closed(ctx);
		ucp_cleanup(ctx->context);
	}
	ucx_core->free(ctx);
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

static int ucx_describe(void *tc, char *buf, size_t len)
{
	struct ucx_ctx *ctx = tc;
	struct ucx_settings s;
	const struct ucx_settings *sp;
	size_t at = 0;
	int rc;
	if (!buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (ctx) {
		sp = &ctx->set;
	} else {
		if ((rc = read_settings(&s)) < 0)
			return rc;
		sp = &s;
	}
	static const char *const emodes[] = {"auto", "peer", "none"};
	append(buf, len, &at, "ucx=%s tls=%s net_devices=%s signal=%s error_mode=%s", ucp_get_version_string(),
	       sp->tls[0] ? sp->tls : "default", sp->net_devices[0] ? sp->net_devices : "all",
	       sp->sig_mode == UCX_SIG_FENCE ? "fence" : "flush", emodes[sp->err_mode]);
	if (ctx) {
		append(buf, len, &at, " mem=host%s", ctx->has_cuda ? ",cuda" : "");
		struct ucx_res res[UCX_MAX_RES];
		int n = context_resources(ctx->context, res, UCX_MAX_RES);
		append(buf, len, &at, " resources=");
		for (int i = 0; i < n; i++)
			append(buf, len, &at, "%s%s/%s", i ? "," : "", res[i].tl, res[i].dev);
	}
	return at < len ? 0 : -ENOSPC;
}

/* One device per transport class the configured UCX can use (shm, tcp, ib). */
static int ucx_probe(struct weft_tp_device *devs, int *n)
{
	struct ucx_settings s;
	ucp_context_h context;
	int rc;
	if (!n || *n < 0 || (*n > 0 && !devs))
		return -EINVAL;
	if ((rc = read_settings(&s)) < 0)
		return rc;
	if ((rc = context_create(&s, 0, &context)) < 0)
		return rc == -WEFT_ERR_NO_DEVICE ? (*n = 0, 0) : rc;
	struct ucx_res res[UCX_MAX_RES];
	int nres = context_resources(context, res, UCX_MAX_RES);
	/* The memory types are the context's, not a transport's: UCX moves CUDA
	 * memory over any of them (its cuda_copy stages what a network cannot
	 * reach directly). */
	bool cuda = ucx_context_cuda(context);
	ucp_cleanup(context);
	if (nres < 0)
		return nres;
	static const char *const classes[] = {"shm", "tcp", "ib"};
	char names[3][64] = {{0}};
	bool have[3] = {false, false, false};
	bool shm_cross_process = false;
	for (int i = 0; i < nres; i++) {
		const char *cls = ucx_tl_class(res[i].tl);
		for (int c = 0; c < 3; c++) {
			if (strcmp(cls, classes[c]) != 0)
				continue;
			/* shm lists its transports (the device is "memory"), the
			 * networks their devices. */
			const char *item = c == 0 ? res[i].tl : res[i].dev;
			if (!strstr(names[c], item) && strlen(names[c]) + strlen(item) + 2 < sizeof(names[c])) {
				if (names[c][0])
					strcat(names[c], ",");
				strcat(names[c], item);
			}
			have[c] = true;
			if (c == 0 && strcmp(res[i].tl, "self") != 0)
				shm_cross_process = true;
		}
	}
	int count = 0;
	for (int c = 0; c < 3; c++) {
		if (!have[c])
			continue;
		if (count < *n) {
			struct weft_tp_device *d = &devs[count];
			memset(d, 0, sizeof(*d));
			d->size = sizeof(*d);
			snprintf(d->name, sizeof(d->name), "%s", names[c]);
			snprintf(d->link, sizeof(d->link), "%s", classes[c]);
			d->numa_node = -1;
			d->mem_types = (1u << WEFT_MEM_HOST) | (cuda ? 1u << WEFT_MEM_CUDA : 0);
			if (c == 0)
				d->peer_classes = (1u << WEFT_PEER_SAME_PROCESS) |
						  (shm_cross_process ? 1u << WEFT_PEER_SAME_HOST : 0);
			else
				d->peer_classes = (1u << WEFT_PEER_OTHER_HOST) |
						  (shm_cross_process ? 0 : (1u << WEFT_PEER_SAME_PROCESS) |
									       (1u << WEFT_PEER_SAME_HOST));
		}
		count++;
	}
	if (count > *n) {
		*n = count;
		return -ENOSPC;
	}
	*n = count;
	return 0;
}

static const struct weft_transport_ops ucx_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = ucx_open,
	.close = ucx_close,
	.mem_register = ucx_mem_register,
	.mem_deregister = ucx_mem_deregister,
	.mem_serialize = ucx_mem_serialize,
	.mem_import = ucx_mem_import,
	.mem_release = ucx_mem_release,
	.endpoint = ucx_endpoint,
	.connect = ucx_connect,
	.disconnect = ucx_disconnect,
	.put = ucx_put,
	.signal = ucx_signal,
	.flush = ucx_flush,
	.progress = ucx_progress,
	.wait_fds = ucx_wait_fds,
	.describe = ucx_describe,
	.probe = ucx_probe,
	.ep_describe = ucx_ep_describe,
};

static const struct weft_plugin_desc ucx_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "ucx",
	.ops = &ucx_ops,
};

static const struct weft_plugin_desc *const ucx_descs[] = {&ucx_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	ucx_core = core;
	if (weft_kit_params_declare(core, "ucx", ucx_params, WEFT_KIT_NROWS(ucx_params)) < 0)
		return NULL; /* logged, naming the parameter */
	unsigned major = 0, minor = 0, release = 0;
	ucp_get_version(&major, &minor, &release);
	UCX_INFO("UCX %u.%u.%u (built against %d.%d)", major, minor, release, UCP_API_MAJOR, UCP_API_MINOR);
	return ucx_descs;
}
