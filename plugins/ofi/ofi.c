/* SPDX-License-Identifier: Apache-2.0 */
/* ofi plugin: the transport descriptor, its parameters, and the context: which
 * libfabric providers serve which peers, and opening each one's fabric, domain,
 * address vector, completion queue and RDM endpoint. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/random.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fi_cm.h>

#include "ofi.h"

const struct weft_core_api *ofi_core;

/* Settings read from the parameters once per open (or describe/probe). */
struct ofi_settings {
	char provider[OFI_PROV_NAME_MAX + 64]; /* "" when unset */
	char local[OFI_PROV_NAME_MAX];
	char remote[OFI_PROV_NAME_MAX];
	bool pinned;              /* `provider` was set: one provider for everything */
	char addr[64];            /* "" when unset */
	char iface[64];           /* "" when unset */
	int64_t max_inflight;
	char signal_order[16];
};

static const char *const ofi_signal_orders[] = {"auto", "ordered", "wait", NULL};

static const struct weft_kit_param ofi_params[] = {
	WEFT_KIT_P_STRBUF("provider", struct ofi_settings, provider, NULL, NULL,
			  "libfabric provider for every peer (overrides provider_local and provider_remote)"),
	WEFT_KIT_P_STRBUF("provider_local", struct ofi_settings, local, "shm", NULL,
			  "libfabric provider for peers on the same host"),
	WEFT_KIT_P_STRBUF("provider_remote", struct ofi_settings, remote, "tcp", NULL,
			  "libfabric provider for peers on other hosts"),
	WEFT_KIT_P_STRBUF("addr", struct ofi_settings, addr, NULL, NULL,
			  "numeric IP address the IP providers (tcp, udp, sockets) bind to; default: the bootstrap's "
			  "address"),
	WEFT_KIT_P_STRBUF("iface", struct ofi_settings, iface, NULL, NULL,
			  "libfabric domain (interface) name the IP providers must use, e.g. lo or eth0"),
	WEFT_KIT_P_INT("max_inflight", struct ofi_settings, max_inflight, "256", 1, 1 << 24,
		       "puts and signals outstanding per endpoint before put and signal return -EAGAIN"),
	WEFT_KIT_P_STRBUF("signal_order", struct ofi_settings, signal_order, "auto", ofi_signal_orders,
			  "how a signal stays behind earlier puts: auto, ordered (provider write ordering) or wait "
			  "(hold until delivered)"),
};

int ofi_errno_at(int fi_rc, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	int e = fi_rc < 0 ? -fi_rc : fi_rc;
	OFI_ERR("%s failed: %s (%d)", what, fi_strerror(e), -e);
	return ofi_code(fi_rc);
}

int ofi_errno(const char *call, int fi_rc)
{
	return ofi_errno_at(fi_rc, "%s", call);
}

int ofi_code(int fi_rc)
{
	int e = fi_rc < 0 ? -fi_rc : fi_rc;
	switch (e) {
	case FI_ENOMEM:
		return -ENOMEM;
	case FI_EINVAL:
		return -EINVAL;
	case FI_EAGAIN:
		return -EAGAIN;
	case FI_EHOSTUNREACH:
	case FI_ECONNREFUSED:
	case FI_ECONNRESET:
	case FI_ENOTCONN:
	case FI_ETIMEDOUT:
	case FI_ECONNABORTED:
	case FI_ENETUNREACH:
	case FI_EADDRNOTAVAIL:
		return -WEFT_ERR_PEER;
	default:
		return -WEFT_ERR_TRANSPORT;
	}
}

int ofi_prov_name_check(const unsigned char *field, char out[OFI_PROV_NAME_MAX])
{
	size_t n = 0;
	while (n < OFI_PROV_NAME_MAX && field[n] != '\0') {
		unsigned char c = field[n];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
			return -1;
		n++;
	}
	if (n == 0 || n == OFI_PROV_NAME_MAX)
		return -1;
	for (size_t i = n; i < OFI_PROV_NAME_MAX; i++)
		if (field[i] != '\0')
			return -1;
	memcpy(out, field, n + 1);
	return 0;
}

static int valid_prov(const char *key, const char *name)
{
	unsigned char field[OFI_PROV_NAME_MAX] = {0};
	char tmp[OFI_PROV_NAME_MAX];
	if (strlen(name) >= OFI_PROV_NAME_MAX) {
		OFI_ERR("parameter ofi.%s='%s' is no provider name", key, name);
		return -WEFT_ERR_CONFIG;
	}
	memcpy(field, name, strlen(name));
	if (ofi_prov_name_check(field, tmp) < 0) {
		OFI_ERR("parameter ofi.%s='%s' is no provider name (fi_info -l lists them)", key, name);
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

static int read_settings(struct ofi_settings *s)
{
	int rc;
	memset(s, 0, sizeof(*s));
	if ((rc = weft_kit_params_load(ofi_core, "ofi", ofi_params, WEFT_KIT_NROWS(ofi_params), s)) < 0)
		return rc;
	if (s->provider[0] != '\0') {
		if ((rc = valid_prov("provider", s->provider)) < 0)
			return rc;
		strcpy(s->local, s->provider);
		strcpy(s->remote, s->provider);
		s->pinned = true;
	}
	if (s->local[0] == '\0')
		strcpy(s->local, "shm");
	if (s->remote[0] == '\0')
		strcpy(s->remote, "tcp");
	if ((rc = valid_prov("provider_local", s->local)) < 0 ||
	    (rc = valid_prov("provider_remote", s->remote)) < 0)
		return rc;
	return 0;
}

/* "tcp;ofi_rxm" -> "tcp": the core provider is what users name. */
static void core_prov_name(const struct fi_info *fi, char out[OFI_PROV_NAME_MAX])
{
	const char *p = fi->fabric_attr && fi->fabric_attr->prov_name ? fi->fabric_attr->prov_name : "";
	size_t n = strcspn(p, ";");
	if (n >= OFI_PROV_NAME_MAX)
		n = OFI_PROV_NAME_MAX - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

static bool is_ip_provider(const char *prov)
{
	/* shm names endpoints by process; every other provider we know of here
	 * (tcp, udp, sockets, verbs, ...) binds an IP address. */
	return strcmp(prov, "shm") != 0;
}

/* fi_getinfo for one provider with our hints. want_dc / want_order add
 * FI_DELIVERY_COMPLETE and write-after-write ordering to the hints, want_hmem
 * FI_HMEM and FI_MR_HMEM. Returns 0 with *out (caller frees) or a negative
 * code (-ENODATA: no match). */
static int query_prov(const char *prov, const struct ofi_settings *s, const char *addr, bool want_dc,
		      bool want_order, bool want_hmem, struct fi_info **out)
{
	struct fi_info *hints = fi_allocinfo();
	struct fi_info *list = NULL;
	int rc;
	if (!hints)
		return -ENOMEM;
	hints->caps = FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
				      FI_MR_ENDPOINT | FI_MR_RAW;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->fabric_attr->prov_name = strdup(prov);
	if (!hints->fabric_attr->prov_name) {
		fi_freeinfo(hints);
		return -ENOMEM;
	}
	if (want_dc)
		hints->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
	if (want_order) {
		hints->tx_attr->msg_order = FI_ORDER_RMA_WAW;
		hints->rx_attr->msg_order = FI_ORDER_RMA_WAW;
	}
	if (want_hmem) {
		hints->caps |= FI_HMEM;
		hints->domain_attr->mr_mode |= FI_MR_HMEM;
	}
	bool ip = is_ip_provider(prov);
	if (ip && s->iface[0] != '\0') {
		hints->domain_attr->name = strdup(s->iface);
		if (!hints->domain_attr->name) {
			fi_freeinfo(hints);
			return -ENOMEM;
		}
	}
	const char *node = ip && addr && addr[0] != '\0' ? addr : NULL;
	rc = ofi_sys->getinfo(OFI_FI_VERSION, node, NULL, node ? FI_SOURCE : 0, hints, &list);
	fi_freeinfo(hints);
	if (rc < 0)
		return rc == -FI_ENODATA ? -ENODATA : rc;
	/* fi_getinfo matches prov_name against any layer; keep only entries whose
	 * core provider is the one asked for. */
	struct fi_info *pick = NULL;
	for (struct fi_info *fi = list; fi; fi = fi->next) {
		char name[OFI_PROV_NAME_MAX];
		core_prov_name(fi, name);
		if (strcmp(name, prov) == 0) {
			pick = fi;
			break;
		}
	}
	if (!pick) {
		fi_freeinfo(list);
		return -ENODATA;
	}
	*out = fi_dupinfo(pick);
	fi_freeinfo(list);
	return *out ? 0 : -ENOMEM;
}

/* Picks the best hints a provider accepts: delivery-complete first, then write
 * ordering, as signal_order allows. */
static int query_best(const char *prov, const struct ofi_settings *s, const char *addr, struct fi_info **out,
		      bool *dc, bool *ordered)
{
	static const bool tries[4][2] = {{true, true}, {true, false}, {false, true}, {false, false}};
	int rc = -ENODATA;
	for (int i = 0; i < 4; i++) {
		bool want_dc = tries[i][0], want_order = tries[i][1];
		if (want_order && strcmp(s->signal_order, "wait") == 0)
			continue;
		if (!want_order && strcmp(s->signal_order, "ordered") == 0)
			continue;
		rc = query_prov(prov, s, addr, want_dc, want_order, false, out);
		if (rc == 0) {
			*dc = want_dc;
			*ordered = want_order;
			return 0;
		}
		if (rc != -ENODATA)
			return ofi_errno("fi_getinfo", rc);
	}
	return rc;
}

/* Whether this libfabric registers CUDA memory in a domain of fi, asked with
 * a zero-length registration of iface FI_HMEM_CUDA. libfabric refuses an
 * interface it was built or started without with -FI_ENOSYS, and its shm
 * grants FI_HMEM even then (for host memory alone). Any other answer comes
 * from the interface itself, refusing or taking a host address: it is there. */
static bool cuda_iface_present(const char *prov, struct fi_info *fi)
{
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_mr *mr = NULL;
	bool present = false;
	int rc;
	if ((rc = fi_fabric(fi->fabric_attr, &fabric, NULL)) < 0)
		goto out;
	if ((rc = ofi_sys->domain(fabric, fi, &domain, NULL)) < 0)
		goto out;
	unsigned char byte = 0;
	struct iovec iov = {.iov_base = &byte, .iov_len = 0};
	struct fi_mr_attr attr = {
		.mr_iov = &iov,
		.iov_count = 1,
		.access = FI_WRITE | FI_REMOTE_WRITE,
		.requested_key = 1,
		.iface = FI_HMEM_CUDA,
	};
	rc = ofi_sys->mr_regattr(domain, &attr, 0, &mr);
	if (rc == 0)
		fi_close(&mr->fid);
	present = rc != -FI_ENOSYS && rc != -FI_EOPNOTSUPP;
out:
	if (!present)
		OFI_DBG("provider '%s' grants FI_HMEM, but this libfabric registers no CUDA memory there: %s (%d)",
			prov, fi_strerror(rc < 0 ? -rc : rc), rc);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	return present;
}

/* query_best, then the same hints with FI_HMEM as one more try, kept where
 * the provider grants FI_HMEM with FI_MR_HMEM and registers CUDA memory
 * (*cuda true); else the answer without it, so that providers lacking
 * FI_HMEM serve host memory as before. */
static int query_dom(const char *prov, const struct ofi_settings *s, const char *addr, struct fi_info **out,
		     bool *dc, bool *ordered, bool *cuda)
{
	struct fi_info *fi = NULL, *hm = NULL;
	int rc = query_best(prov, s, addr, &fi, dc, ordered);
	if (rc < 0)
		return rc;
	*cuda = false;
	rc = query_prov(prov, s, addr, *dc, *ordered, true, &hm);
	if (rc == 0 && (hm->caps & FI_HMEM) && (hm->domain_attr->mr_mode & FI_MR_HMEM) &&
	    cuda_iface_present(prov, hm)) {
		fi_freeinfo(fi);
		*out = hm;
		*cuda = true;
		return 0;
	}
	if (rc == 0 && !((hm->caps & FI_HMEM) && (hm->domain_attr->mr_mode & FI_MR_HMEM)))
		OFI_DBG("provider '%s' answers FI_HMEM hints with caps 0x%llx mr_mode 0x%llx: no device memory", prov,
			(unsigned long long)hm->caps, (unsigned long long)hm->domain_attr->mr_mode);
	else if (rc < 0 && rc != -ENODATA)
		OFI_DBG("provider '%s': fi_getinfo with FI_HMEM failed: %s (%d)", prov, fi_strerror(-rc), rc);
	if (hm)
		fi_freeinfo(hm);
	*out = fi;
	return 0;
}

static void dom_close(struct ofi_dom *d)
{
	if (d->ep)
		fi_close(&d->ep->fid);
	if (d->av)
		fi_close(&d->av->fid);
	if (d->cq)
		fi_close(&d->cq->fid);
	if (d->domain)
		fi_close(&d->domain->fid);
	if (d->fabric)
		fi_close(&d->fabric->fid);
	if (d->info)
		fi_freeinfo(d->info);
	memset(d, 0, sizeof(*d));
}

/* shm names its segment in /dev/shm after the process id by default. A
 * process killed with SIGKILL leaves its segment behind, and once pids wrap (at
 * 32768 on many machines) a new process with the same pid fails fi_enable with
 * EBUSY. So every endpoint gets a name of its own, "weft_<pid>_<random>", and
 * segments of that form whose process is gone are removed first. */
#define SHM_NAME_PREFIX "weft_"

static void shm_sweep_stale(void)
{
	DIR *dir = opendir("/dev/shm");
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL) {
		if (strncmp(e->d_name, SHM_NAME_PREFIX, strlen(SHM_NAME_PREFIX)) != 0)
			continue;
		char *end;
		long pid = strtol(e->d_name + strlen(SHM_NAME_PREFIX), &end, 10);
		if (pid <= 0 || *end != '_')
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue; /* alive, or not ours to judge */
		if (unlinkat(dirfd(dir), e->d_name, 0) == 0)
			OFI_DBG("removed stale shm segment /dev/shm/%s of dead process %ld", e->d_name, pid);
	}
	closedir(dir);
}

static int shm_name_endpoint(struct ofi_ctx *ctx, struct ofi_dom *d)
{
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint64_t)(uintptr_t)d ^ ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);
	char name[64];
	int n = snprintf(name, sizeof(name), SHM_NAME_PREFIX "%d_%016" PRIx64, (int)getpid(), rnd);
	shm_sweep_stale();
	int rc = fi_setname(&d->ep->fid, name, (size_t)n + 1);
	if (rc < 0)
		return ofi_errno("fi_setname", rc);
	return 0;
}

static int dom_open(struct ofi_ctx *ctx, struct ofi_dom *d, const char *prov, const struct ofi_settings *s,
		    const char *addr, bool explicit)
{
	bool dc = false, ordered = false, cuda = false;
	int rc;
	memset(d, 0, sizeof(*d));
	d->ctx = ctx;
	snprintf(d->prov, sizeof(d->prov), "%s", prov);
	rc = query_dom(prov, s, addr, &d->info, &dc, &ordered, &cuda);
	if (rc == -ENODATA) {
		OFI_LOG(explicit ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG,
			"provider '%s' offers no FI_EP_RDM endpoint with FI_RMA%s%s%s%s", prov,
			is_ip_provider(prov) && addr && addr[0] ? " on address " : "",
			is_ip_provider(prov) && addr && addr[0] ? addr : "",
			s->iface[0] && is_ip_provider(prov) ? " interface " : "",
			s->iface[0] && is_ip_provider(prov) ? s->iface : "");
		return -WEFT_ERR_NO_DEVICE;
	}
	if (rc < 0)
		return rc;
	struct fi_info *fi = d->info;
	d->mr_mode = (uint64_t)fi->domain_attr->mr_mode;
	d->inject_size = fi->tx_attr->inject_size;
	d->op_flags = dc ? FI_DELIVERY_COMPLETE : 0;
	d->hmem_cuda = cuda;
	d->chunk = fi->ep_attr->max_msg_size ? fi->ep_attr->max_msg_size : SIZE_MAX;
	/* Ordered signals need the provider to order both the RMA writes and their
	 * data up to max_order_waw_size bytes; each write is cut to that size.
	 * tcp (tcp;ofi_rxm) grants FI_ORDER_RMA_WAW of any size: one TCP stream per
	 * peer, applied in order. shm grants it only when asked, by giving up its
	 * unordered fast path (the sender's process_vm_writev) and sending every
	 * write through the peer's in-order command queue. Without the grant,
	 * signals wait for the delivery-complete completion of every earlier op
	 * (see ep_post_pending in ofi_ep.c). */
	bool waw = (fi->tx_attr->msg_order & (FI_ORDER_RMA_WAW | FI_ORDER_WAW)) &&
		   (fi->rx_attr->msg_order & (FI_ORDER_RMA_WAW | FI_ORDER_WAW)) &&
		   fi->ep_attr->max_order_waw_size >= sizeof(uint64_t);
	if (ordered && waw) {
		d->sig_mode = OFI_SIG_ORDERED;
		if (fi->ep_attr->max_order_waw_size < d->chunk)
			d->chunk = fi->ep_attr->max_order_waw_size;
	} else {
		if (strcmp(s->signal_order, "ordered") == 0) {
			OFI_ERR("provider '%s' does not order RMA writes, but ofi.signal_order=ordered", prov);
			rc = -WEFT_ERR_CONFIG;
			goto err_info;
		}
		d->sig_mode = OFI_SIG_WAIT;
	}
	if (!dc)
		OFI_WARN("provider '%s' refuses FI_DELIVERY_COMPLETE: a completion means the data left this "
			 "process, not that it reached the peer's memory", prov);

	if ((rc = fi_fabric(fi->fabric_attr, &d->fabric, NULL)) < 0) {
		rc = ofi_errno("fi_fabric", rc);
		goto err_info;
	}
	if ((rc = ofi_sys->domain(d->fabric, fi, &d->domain, NULL)) < 0) {
		rc = ofi_errno("fi_domain", rc);
		goto err_close;
	}
	struct fi_av_attr av_attr = {.type = fi->domain_attr->av_type};
	if ((rc = fi_av_open(d->domain, &av_attr, &d->av, NULL)) < 0) {
		rc = ofi_errno("fi_av_open", rc);
		goto err_close;
	}
	/* With a descriptor to wait on, a waiting rank wakes when a peer's
	 * traffic arrives instead of at its next timer tick: with manual progress
	 * (tcp;ofi_rxm) a large put completes only when its target progresses.
	 * A provider without one gets the timer alone. */
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD};
	d->wait_fd = -1;
	if (fi_cq_open(d->domain, &cq_attr, &d->cq, NULL) == 0) {
		if (fi_control(&d->cq->fid, FI_GETWAIT, &d->wait_fd) != 0)
			d->wait_fd = -1;
	} else {
		cq_attr.wait_obj = FI_WAIT_NONE;
		if ((rc = fi_cq_open(d->domain, &cq_attr, &d->cq, NULL)) < 0) {
			rc = ofi_errno("fi_cq_open", rc);
			goto err_close;
		}
	}
	OFI_DBG("opened provider=%s fabric=%s domain=%s mr_mode=0x%llx chunk=%zu signal=%s delivery_complete=%d "
		"cuda=%d",
		prov, fi->fabric_attr->name, fi->domain_attr->name, (unsigned long long)d->mr_mode, d->chunk,
		d->sig_mode == OFI_SIG_ORDERED ? "ordered" : "wait", dc, cuda);
	return 0;

err_close:
	dom_close(d);
	return rc;
err_info:
	fi_freeinfo(d->info);
	d->info = NULL;
	return rc;
}

/* The endpoint is what listens (tcp) or makes a file in /dev/shm (shm): made
 * at the domain's first use by a connection, so that a communicator whose
 * peers all use other transports has neither. */
int ofi_dom_ep_ensure(struct ofi_dom *d)
{
	int rc;
	if (d->ep)
		return 0;
	if ((rc = ofi_sys->endpoint(d->domain, d->info, &d->ep, NULL)) < 0) {
		d->ep = NULL;
		return ofi_errno("fi_endpoint", rc);
	}
	if ((rc = fi_ep_bind(d->ep, &d->av->fid, 0)) < 0) {
		rc = ofi_errno("fi_ep_bind(av)", rc);
		goto err_close;
	}
	/* FI_RECV too: with manual progress, reading this CQ is what lets the
	 * provider land the writes that peers aim at us. */
	if ((rc = fi_ep_bind(d->ep, &d->cq->fid, FI_TRANSMIT | FI_RECV)) < 0) {
		rc = ofi_errno("fi_ep_bind(cq)", rc);
		goto err_close;
	}
	if (strcmp(d->prov, "shm") == 0 && (rc = shm_name_endpoint(d->ctx, d)) < 0)
		goto err_close;
	if ((rc = fi_enable(d->ep)) < 0) {
		rc = ofi_errno("fi_enable", rc);
		goto err_close;
	}
	d->namelen = sizeof(d->name);
	if ((rc = fi_getname(&d->ep->fid, d->name, &d->namelen)) < 0) {
		rc = ofi_errno("fi_getname", rc);
		goto err_close;
	}
	OFI_DBG("provider %s: endpoint enabled, name %zu bytes", d->prov, d->namelen);
	return 0;

err_close:
	fi_close(&d->ep->fid);
	d->ep = NULL;
	d->namelen = 0;
	return rc;
}

static int ofi_open(const struct weft_tp_open_args *args, void **tc)
{
	struct ofi_settings s;
	int rc;
	if (!args || !tc || args->size < offsetof(struct weft_tp_open_args, host_id) + sizeof(args->host_id))
		return -EINVAL;
	if ((rc = read_settings(&s)) < 0)
		return rc;
	struct ofi_ctx *ctx = ofi_core->calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->rank = args->rank;
	ctx->max_inflight = s.max_inflight;
	ctx->local_dom = ctx->remote_dom = -1;
	ctx->next_key = 1;
	const char *addr = s.addr[0] ? s.addr : args->local_addr;

	const char *want[2] = {s.local, s.remote};
	/* A provider the operator named must open: a default may fall back. */
	const bool named[2] = {s.pinned || weft_kit_param_is_set(ofi_core, "ofi", "provider_local", WEFT_PARAM_STRING),
			       s.pinned || weft_kit_param_is_set(ofi_core, "ofi", "provider_remote", WEFT_PARAM_STRING)};
	for (int i = 0; i < 2; i++) {
		int found = -1;
		for (int k = 0; k < ctx->ndoms; k++)
			if (strcmp(ctx->doms[k].prov, want[i]) == 0)
				found = k;
		if (found < 0 && !(i == 1 && strcmp(want[0], want[1]) == 0)) {
			rc = dom_open(ctx, &ctx->doms[ctx->ndoms], want[i], &s, addr, named[i]);
			if (rc == 0) {
				found = ctx->ndoms++;
			} else if (rc == -WEFT_ERR_NO_DEVICE && named[i]) {
				OFI_ERR("provider '%s' (%s) cannot be opened here; it was set, so ofi does not fall back",
					want[i], s.pinned ? "ofi.provider" : i == 0 ? "ofi.provider_local" : "ofi.provider_remote");
				rc = -WEFT_ERR_CONFIG;
				goto err_close_doms;
			} else if (rc != -WEFT_ERR_NO_DEVICE) {
				goto err_close_doms;
			}
		}
		if (i == 0)
			ctx->local_dom = found;
		else
			ctx->remote_dom = found;
	}
	/* Same-host peers are reachable through the remote provider too; every rank
	 * on this host falls back alike, so both ends of a connection agree. */
	if (ctx->local_dom < 0 && ctx->remote_dom >= 0) {
		OFI_INFO("provider '%s' is unavailable: same-host peers use '%s'", s.local, s.remote);
		ctx->local_dom = ctx->remote_dom;
	}
	if (ctx->ndoms == 0) {
		OFI_ERR("neither provider '%s' nor '%s' can be opened (fi_info -l lists the providers)", s.local,
			s.remote);
		rc = -WEFT_ERR_NO_DEVICE;
		goto err_free;
	}
	*tc = ctx;
	return 0;

err_close_doms:
	for (int k = 0; k < ctx->ndoms; k++)
		dom_close(&ctx->doms[k]);
err_free:
	ofi_core->free(ctx);
	return rc;
}

static void ofi_close(void *tc)
{
	struct ofi_ctx *ctx = tc;
	if (!ctx)
		return;
	if (ctx->eps || ctx->nregions)
		OFI_WARN("closing a context that still has endpoints or registrations");
	while (ctx->eps)
		ofi_disconnect(ctx->eps);
	for (int k = 0; k < ctx->ndoms; k++)
		dom_close(&ctx->doms[k]);
	ofi_free_orphans(ctx);
	ofi_core->free(ctx);
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

static int ofi_describe(void *tc, char *buf, size_t len)
{
	struct ofi_ctx *ctx = tc;
	size_t at = 0;
	if (!buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (ctx) {
		for (int k = 0; k < ctx->ndoms; k++) {
			struct ofi_dom *d = &ctx->doms[k];
			append(buf, len, &at, "%sprovider=%s fabric=%s domain=%s signal=%s%s%s", k ? "; " : "", d->prov,
			       d->info->fabric_attr->name, d->info->domain_attr->name,
			       d->sig_mode == OFI_SIG_ORDERED ? "ordered" : "wait",
			       d->op_flags & FI_DELIVERY_COMPLETE ? " delivery_complete" : "",
			       d->hmem_cuda ? " hmem=cuda" : "");
		}
	} else {
		struct ofi_settings s;
		int rc = read_settings(&s);
		if (rc < 0)
			return rc;
		const char *want[2] = {s.local, s.remote};
		for (int i = 0; i < 2; i++) {
			struct fi_info *fi = NULL;
			bool dc, ordered;
			if (i == 1 && strcmp(want[0], want[1]) == 0)
				break;
			if (query_best(want[i], &s, s.addr, &fi, &dc, &ordered) < 0) {
				append(buf, len, &at, "%sprovider=%s unavailable", at ? "; " : "", want[i]);
				continue;
			}
			append(buf, len, &at, "%sprovider=%s fabric=%s domain=%s", at ? "; " : "", want[i],
			       fi->fabric_attr->name, fi->domain_attr->name);
			fi_freeinfo(fi);
		}
	}
	return at < len ? 0 : -ENOSPC;
}

static int ofi_probe(struct weft_tp_device *devs, int *n)
{
	struct ofi_settings s;
	int rc, count = 0;
	if (!n || *n < 0 || (*n > 0 && !devs))
		return -EINVAL;
	if ((rc = read_settings(&s)) < 0)
		return rc;
	const char *want[2] = {s.local, s.remote};
	for (int i = 0; i < 2; i++) {
		struct fi_info *fi = NULL;
		bool dc, ordered, cuda;
		if (i == 1 && strcmp(want[0], want[1]) == 0)
			break;
		if (query_dom(want[i], &s, s.addr, &fi, &dc, &ordered, &cuda) < 0)
			continue;
		if (count < *n) {
			struct weft_tp_device *d = &devs[count];
			memset(d, 0, sizeof(*d));
			d->size = sizeof(*d);
			snprintf(d->name, sizeof(d->name), "%s", fi->domain_attr->name ? fi->domain_attr->name : want[i]);
			snprintf(d->link, sizeof(d->link), "%s", want[i]);
			d->numa_node = -1;
			d->mem_types = (1u << WEFT_MEM_HOST) | (cuda ? 1u << WEFT_MEM_CUDA : 0);
			if (s.pinned)
				d->peer_classes = (1u << WEFT_PEER_CLASS_COUNT) - 1;
			else if (i == 0)
				d->peer_classes = (1u << WEFT_PEER_SAME_PROCESS) | (1u << WEFT_PEER_SAME_HOST);
			else
				d->peer_classes = 1u << WEFT_PEER_OTHER_HOST;
		}
		count++;
		fi_freeinfo(fi);
	}
	if (count > *n) {
		*n = count;
		return -ENOSPC;
	}
	*n = count;
	return 0;
}

static const struct weft_transport_ops ofi_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = ofi_open,
	.close = ofi_close,
	.mem_register = ofi_mem_register,
	.mem_deregister = ofi_mem_deregister,
	.mem_serialize = ofi_mem_serialize,
	.mem_import = ofi_mem_import,
	.mem_release = ofi_mem_release,
	.endpoint = ofi_endpoint,
	.connect = ofi_connect,
	.disconnect = ofi_disconnect,
	.put = ofi_put,
	.signal = ofi_signal,
	.flush = ofi_flush,
	.progress = ofi_progress,
	.wait_fds = ofi_wait_fds,
	.describe = ofi_describe,
	.probe = ofi_probe,
	.ep_describe = ofi_ep_describe,
};

static const struct weft_plugin_desc ofi_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "ofi",
	.ops = &ofi_ops,
};

static const struct weft_plugin_desc *const ofi_descs[] = {&ofi_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	ofi_core = core;
	if (weft_kit_params_declare(core, "ofi", ofi_params, WEFT_KIT_NROWS(ofi_params)) < 0)
		return NULL; /* logged, naming the parameter */
	uint32_t v = fi_version();
	OFI_INFO("libfabric %u.%u (built against %u.%u)", FI_MAJOR(v), FI_MINOR(v), FI_MAJOR_VERSION,
		 FI_MINOR_VERSION);
	return ofi_descs;
}
