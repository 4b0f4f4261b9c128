/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the ofi transport's device memory (FI_HMEM): its sources are
 * linked in (weft-ofi-testable) and the calls of ofi_sys.c swapped for a
 * provider double. No libfabric here registers CUDA memory, so the double
 * grants FI_HMEM on the machine's own shm and tcp and stands a host buffer in
 * for CUDA memory: it records what fi_mr_regattr is asked, then registers the
 * buffer as host memory, so keys, imports and puts are real. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

#include "ofi.h"
#include "testlib.h"
#include "tp_harness.h"

static const struct th_options opts = {.log_env = "WT_OFI_LOG", .default_section = "ofi", .capture = true};
static const struct weft_transport_ops *ops;

/* ------------------------------------------------------ the provider double */
enum fx_mode {
	FX_REAL, /* every call goes to this machine's libfabric */
	FX_NONE, /* no provider grants FI_HMEM */
	FX_GRANT /* providers grant FI_HMEM (as fx says) on top of the real ones */
};

struct fx_reg {
	enum fi_hmem_iface iface;
	int device;
	size_t iov_count;
	void *base;
	size_t len;
	uint64_t access;
};

#define FX_MAXREG 16
static struct {
	enum fx_mode mode;
	bool mr_hmem;          /* FI_MR_HMEM in the granted mr_mode */
	bool cuda_iface;       /* a zero-length CUDA registration succeeds (else -FI_ENOSYS) */
	const char *only_prov; /* grant FI_HMEM to this provider alone; NULL: every one */
	int dev;               /* what cuda_device answers */
	int dev_rc;            /* ... or this error */
	int dev_calls;
	const void *dev_ptr;
	int fail_at, fail_rc;          /* the fail_at-th CUDA registration of a region (from 1) fails with fail_rc */
	struct fx_reg regs[FX_MAXREG]; /* CUDA registrations of a region (not the zero-length check) */
	int nregs;
	int nchecks; /* zero-length CUDA registrations (the interface check) */
} fx;

static const struct ofi_sys_ops *real;

static bool granted(const char *prov)
{
	return fx.mode == FX_GRANT &&
	       (!fx.only_prov || (prov && strncmp(prov, fx.only_prov, strlen(fx.only_prov)) == 0));
}

/* The info with the bits the double added taken out, for the real provider. */
static struct fi_info *stripped(const struct fi_info *info)
{
	struct fi_info *c = fi_dupinfo(info);
	ck_assert_ptr_nonnull(c);
	c->caps &= ~FI_HMEM;
	c->domain_attr->mr_mode &= ~FI_MR_HMEM;
	return c;
}

static int d_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		     const struct fi_info *hints, struct fi_info **info)
{
	if (fx.mode == FX_REAL || !hints || !(hints->caps & FI_HMEM))
		return real->getinfo(version, node, service, flags, hints, info);
	if (!granted(hints->fabric_attr->prov_name))
		return -FI_ENODATA;
	struct fi_info *h = stripped(hints);
	int rc = real->getinfo(version, node, service, flags, h, info);
	fi_freeinfo(h);
	if (rc < 0)
		return rc;
	for (struct fi_info *fi = *info; fi; fi = fi->next) {
		fi->caps |= FI_HMEM;
		if (fx.mr_hmem)
			fi->domain_attr->mr_mode |= FI_MR_HMEM;
	}
	return 0;
}

static int d_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **domain, void *context)
{
	if (fx.mode != FX_GRANT || !(info->caps & FI_HMEM))
		return real->domain(fabric, info, domain, context);
	struct fi_info *c = stripped(info);
	int rc = real->domain(fabric, c, domain, context);
	fi_freeinfo(c);
	return rc;
}

static int d_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context)
{
	if (fx.mode != FX_GRANT || !(info->caps & FI_HMEM))
		return real->endpoint(domain, info, ep, context);
	struct fi_info *c = stripped(info);
	int rc = real->endpoint(domain, c, ep, context);
	fi_freeinfo(c);
	return rc;
}

static int d_mr_regattr(struct fid_domain *domain, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	if (fx.mode == FX_REAL || attr->iface != FI_HMEM_CUDA)
		return real->mr_regattr(domain, attr, flags, mr);
	if (attr->iov_count == 1 && attr->mr_iov[0].iov_len == 0) {
		fx.nchecks++;
		if (!fx.cuda_iface)
			return -FI_ENOSYS;
	} else {
		ck_assert_int_lt(fx.nregs, FX_MAXREG);
		struct fx_reg *r = &fx.regs[fx.nregs++];
		r->iface = attr->iface;
		r->device = attr->device.cuda;
		r->iov_count = attr->iov_count;
		r->base = attr->iov_count ? attr->mr_iov[0].iov_base : NULL;
		r->len = attr->iov_count ? attr->mr_iov[0].iov_len : 0;
		r->access = attr->access;
		if (fx.nregs == fx.fail_at)
			return fx.fail_rc;
	}
	/* The stand-in is host memory: the real provider registers it as such. */
	struct fi_mr_attr host = *attr;
	host.iface = FI_HMEM_SYSTEM;
	host.device.reserved = 0;
	return real->mr_regattr(domain, &host, flags, mr);
}

static int d_cuda_device(const void *ptr, int *dev)
{
	fx.dev_calls++;
	fx.dev_ptr = ptr;
	if (fx.dev_rc)
		return fx.dev_rc;
	*dev = fx.dev;
	return 0;
}

static struct ofi_sys_ops dbl = {
	.getinfo = d_getinfo,
	.domain = d_domain,
	.endpoint = d_endpoint,
	.mr_regattr = d_mr_regattr,
	.cuda_device = d_cuda_device,
};

/* ------------------------------------------------------------------ fixtures */
static const char *const env_keys[] = {"WEFT_OFI_PROVIDER", "WEFT_OFI_PROVIDER_LOCAL", "WEFT_OFI_PROVIDER_REMOTE",
				       "WEFT_OFI_ADDR",     "WEFT_OFI_IFACE",          NULL};

static void setup(void)
{
	for (int i = 0; env_keys[i]; i++)
		unsetenv(env_keys[i]);
	memset(&fx, 0, sizeof(fx));
	fx.mode = FX_GRANT;
	fx.mr_hmem = true;
	fx.cuda_iface = true;
	fx.dev = 3;
	th_loglen = 0;
	th_logbuf[0] = '\0';
	th_configure(&opts);
	ofi_set_sys_ops(NULL);
	real = ofi_sys;
	ofi_set_sys_ops(&dbl);
	const struct weft_plugin_desc *const *d = weft_plugin_init(&th_core);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d[0]->name, "ofi");
	ops = d[0]->ops;
	th_ops = ops; /* for th_open_ctx and the put helpers */
}

static void teardown(void)
{
	ofi_set_sys_ops(NULL);
}

/* The probe's mem_types of the device whose link is prov; fails if absent. */
static uint32_t probe_mem(const char *prov)
{
	struct weft_tp_device devs[4];
	int n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	for (int i = 0; i < n; i++)
		if (strcmp(devs[i].link, prov) == 0)
			return devs[i].mem_types;
	ck_abort_msg("probe lists no %s device", prov);
	return 0;
}

static const uint32_t HOST = 1u << WEFT_MEM_HOST;
static const uint32_t HOST_CUDA = (1u << WEFT_MEM_HOST) | (1u << WEFT_MEM_CUDA);

/* A host buffer standing in for CUDA memory, at an odd offset. */
static unsigned char standin[2][(1 << 20) + 64];
#define FAKE_CUDA(i) ((void *)(standin[i] + 3))
#define FAKE_LEN ((size_t)1 << 20)

/* Without the capability, CUDA registration is refused with -ENOTSUP, says
 * why, and touches neither the driver nor fi_mr_regattr. */
static void assert_cuda_refused(void)
{
	void *tc, *mh = NULL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	th_loglen = 0;
	th_logbuf[0] = '\0';
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_ptr_null(mh);
	ck_assert_msg(th_log_has("CUDA memory at") && th_log_has("none has FI_HMEM") &&
			      th_log_has("stage it through host memory"),
		      "log: %s", th_logbuf);
	ck_assert_int_eq(fx.nregs, 0);
	ck_assert_int_eq(fx.dev_calls, 0);
	/* Host memory is unaffected. */
	ck_assert_int_eq(ops->mem_register(tc, standin[0], 4096, WEFT_MEM_HOST, &mh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
}

/* -------------------------------------------------------------------- cases */
START_TEST(init_logs_version)
{
	char want[64];
	uint32_t v = fi_version();
	snprintf(want, sizeof(want), "[I] libfabric %u.%u (built against", FI_MAJOR(v), FI_MINOR(v));
	ck_assert_msg(th_log_has(want), "log: %s", th_logbuf);
}
END_TEST

START_TEST(probe_without_hmem)
{
	fx.mode = FX_NONE;
	ck_assert_uint_eq(probe_mem("shm"), HOST);
	ck_assert_uint_eq(probe_mem("tcp"), HOST);
	assert_cuda_refused();
}
END_TEST

/* This machine's libfabric, undoubled: its shm grants FI_HMEM but has no CUDA
 * interface, and tcp has no FI_HMEM. The probe must not claim CUDA, and
 * registration must agree with it. */
START_TEST(real_library_agrees)
{
	fx.mode = FX_REAL;
	uint32_t shm = probe_mem("shm"), tcp = probe_mem("tcp");
	void *tc, *mh = NULL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	char desc[1024];
	ck_assert_int_eq(ops->describe(tc, desc, sizeof(desc)), 0);
	int rc = ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh);
	if (!((shm | tcp) & (1u << WEFT_MEM_CUDA))) {
		ck_assert_int_eq(rc, -ENOTSUP);
		ck_assert_msg(strstr(desc, "hmem=cuda") == NULL, "%s", desc);
	} else {
		/* A libfabric with CUDA: a host pointer is no CUDA memory. */
		ck_assert_msg(strstr(desc, "hmem=cuda") != NULL, "%s", desc);
		ck_assert_int_ne(rc, -ENOTSUP);
		if (rc == 0)
			ops->mem_deregister(tc, mh);
	}
	ops->close(tc);
}
END_TEST

START_TEST(probe_and_register_with_hmem)
{
	ck_assert_uint_eq(probe_mem("shm"), HOST_CUDA);
	ck_assert_uint_eq(probe_mem("tcp"), HOST_CUDA);
	ck_assert_int_gt(fx.nchecks, 0);
	void *tc, *mh;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	char desc[1024];
	ck_assert_int_eq(ops->describe(tc, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, "provider=shm") && strstr(desc, "provider=tcp"), "%s", desc);
	ck_assert_msg(strstr(desc, "hmem=cuda") && strstr(strstr(desc, "hmem=cuda") + 1, "hmem=cuda"), "%s", desc);
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh), 0);
	ck_assert_int_eq(fx.dev_calls, 1);
	ck_assert_ptr_eq(fx.dev_ptr, FAKE_CUDA(0));
	ck_assert_int_eq(fx.nregs, 2); /* one per provider */
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(fx.regs[i].iface, FI_HMEM_CUDA);
		ck_assert_int_eq(fx.regs[i].device, 3);
		ck_assert_uint_eq(fx.regs[i].iov_count, 1);
		ck_assert_ptr_eq(fx.regs[i].base, FAKE_CUDA(0));
		ck_assert_uint_eq(fx.regs[i].len, FAKE_LEN);
		ck_assert_uint_eq(fx.regs[i].access, FI_WRITE | FI_REMOTE_WRITE);
	}
	/* Host memory does not take the HMEM path. */
	void *hm;
	ck_assert_int_eq(ops->mem_register(tc, standin[1], 4096, WEFT_MEM_HOST, &hm), 0);
	ck_assert_int_eq(fx.nregs, 2);
	ck_assert_int_eq(fx.dev_calls, 1);
	/* Its blob names both providers and imports. */
	unsigned char blob[1024];
	size_t len = sizeof(blob);
	ck_assert_int_eq(ops->mem_serialize(tc, mh, blob, &len), 0);
	ck_assert_uint_eq(blob[6] | blob[7] << 8, 2);
	void *rmh;
	ck_assert_int_eq(ops->mem_import(tc, 1, blob, len, &rmh), 0);
	ck_assert_int_eq(ops->mem_release(tc, rmh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, hm), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
}
END_TEST

START_TEST(hmem_without_mr_hmem)
{
	fx.mr_hmem = false;
	ck_assert_uint_eq(probe_mem("shm"), HOST);
	ck_assert_uint_eq(probe_mem("tcp"), HOST);
	assert_cuda_refused();
}
END_TEST

/* As shm on this machine: FI_HMEM granted, but libfabric has no CUDA. */
START_TEST(hmem_without_cuda_iface)
{
	fx.cuda_iface = false;
	ck_assert_uint_eq(probe_mem("shm"), HOST);
	ck_assert_uint_eq(probe_mem("tcp"), HOST);
	ck_assert_int_gt(fx.nchecks, 0);
	ck_assert_msg(th_log_has("grants FI_HMEM, but this libfabric registers no CUDA memory"), "log: %s", th_logbuf);
	assert_cuda_refused();
}
END_TEST

START_TEST(device_lookup_fails)
{
	void *tc, *mh = NULL;
	fx.dev_rc = -EINVAL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh), -EINVAL);
	ck_assert_ptr_null(mh);
	ck_assert_int_eq(fx.nregs, 0);
	/* A provider refusing the registration: the error, logged with the
	 * provider's words, and the other provider's MR undone. */
	fx.dev_rc = 0;
	fx.fail_at = 2;
	fx.fail_rc = -FI_EINVAL;
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh), -EINVAL);
	ck_assert_msg(th_log_has("fi_mr_regattr of CUDA memory") && th_log_has("device 3"), "log: %s", th_logbuf);
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
}
END_TEST

/* The real driver lookup: no CUDA driver here (-ENOTSUP, saying so), or one
 * that knows a host buffer is no CUDA memory (-EINVAL). */
START_TEST(device_lookup_real)
{
	dbl.cuda_device = real->cuda_device;
	void *tc, *mh = NULL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	int rc = ops->mem_register(tc, FAKE_CUDA(0), FAKE_LEN, WEFT_MEM_CUDA, &mh);
	ck_assert_msg(rc == -ENOTSUP || rc == -EINVAL, "rc %d", rc);
	ck_assert_msg(th_log_has(rc == -ENOTSUP ? "cannot find the CUDA device" : "is no CUDA memory"), "log: %s",
		      th_logbuf);
	ck_assert_int_eq(fx.nregs, 0);
	ops->close(tc);
}
END_TEST

/* Two contexts of this process, connected; the endpoints of rank 0. */
struct pair {
	void *tc[2];
	void *ep[2];
};

static void pair_open(struct pair *p, enum weft_peer_class cls)
{
	unsigned char addr[2][512];
	size_t alen[2];
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(th_open_ctx(r, &p->tc[r]), 0);
		struct weft_tp_peer peer = {.size = sizeof(peer),
					    .rank = 1 - r,
					    .peer_class = cls,
					    .host_id = cls == WEFT_PEER_OTHER_HOST ? (r ? "h0" : "h1") : "testhost",
					    .addr = "127.0.0.1"};
		alen[r] = sizeof(addr[r]);
		ck_assert_int_eq(ops->endpoint(p->tc[r], &peer, addr[r], &alen[r], &p->ep[r]), 0);
	}
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->connect(p->ep[r], addr[1 - r], alen[1 - r]), 0);
}

static void pair_close(struct pair *p)
{
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ops->disconnect(p->ep[r]), 0);
		ops->close(p->tc[r]);
	}
}

/* Rank `from`'s region mh as imported by to_tc. */
static void *import_into(void *from_tc, int from, void *mh, void *to_tc)
{
	unsigned char blob[1024];
	size_t len = sizeof(blob);
	void *rmh;
	ck_assert_int_eq(ops->mem_serialize(from_tc, mh, blob, &len), 0);
	ck_assert_int_eq(ops->mem_import(to_tc, from, blob, len, &rmh), 0);
	return rmh;
}

/* A CUDA registration is usable: a put from one region so registered to
 * another, over tcp, carries every byte (the double's stand-in is host memory). */
START_TEST(put_between_cuda_regions)
{
	setenv("WEFT_OFI_PROVIDER", "tcp", 1);
	struct pair p;
	pair_open(&p, WEFT_PEER_OTHER_HOST);
	void *mh[2];
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->mem_register(p.tc[r], FAKE_CUDA(r), FAKE_LEN, WEFT_MEM_CUDA, &mh[r]), 0);
	ck_assert_int_eq(fx.nregs, 2);
	void *rmh = import_into(p.tc[1], 1, mh[1], p.tc[0]);
	th_fill_random(FAKE_CUDA(0), FAKE_LEN, 5);
	memset(FAKE_CUDA(1), 0, FAKE_LEN);
	ck_assert_int_eq(th_put_retry(p.ep[0], p.tc[0], rmh, 0, mh[0], 0, FAKE_LEN), 0);
	int rc;
	while ((rc = ops->flush(p.ep[0])) == -EAGAIN)
		ck_assert_int_eq(ops->progress(p.tc[1]), 0);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(th_check_random(FAKE_CUDA(1), FAKE_LEN, 5), -1);
	ck_assert_int_eq(ops->mem_release(p.tc[0], rmh), 0);
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->mem_deregister(p.tc[r], mh[r]), 0);
	pair_close(&p);
}
END_TEST

/* Only tcp has FI_HMEM: the probe says so per device, CUDA memory registers
 * with tcp alone, and puts through shm refuse it, saying why. */
START_TEST(one_provider_with_hmem)
{
	fx.only_prov = "tcp";
	ck_assert_uint_eq(probe_mem("shm"), HOST);
	ck_assert_uint_eq(probe_mem("tcp"), HOST_CUDA);
	struct pair p;
	pair_open(&p, WEFT_PEER_SAME_HOST);
	void *cm[2], *hm[2];
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ops->mem_register(p.tc[r], FAKE_CUDA(r), FAKE_LEN, WEFT_MEM_CUDA, &cm[r]), 0);
		ck_assert_int_eq(ops->mem_register(p.tc[r], standin[r], 8, WEFT_MEM_HOST, &hm[r]), 0);
	}
	ck_assert_int_eq(fx.nregs, 2); /* one per context: tcp */
	ck_assert_msg(th_log_has("is not registered with provider 'shm' (no FI_HMEM)"), "log: %s", th_logbuf);
	unsigned char blob[1024];
	size_t len = sizeof(blob);
	ck_assert_int_eq(ops->mem_serialize(p.tc[1], cm[1], blob, &len), 0);
	ck_assert_uint_eq(blob[6] | blob[7] << 8, 1);
	ck_assert_str_eq((const char *)blob + 16, "tcp");
	void *rcuda = import_into(p.tc[1], 1, cm[1], p.tc[0]);
	void *rhost = import_into(p.tc[1], 1, hm[1], p.tc[0]);
	th_loglen = 0;
	th_logbuf[0] = '\0';
	/* To the peer's CUDA region over shm: it has no shm key. */
	ck_assert_int_eq(ops->put(p.ep[0], rcuda, 0, hm[0], 0, 8), -ENOTSUP);
	ck_assert_msg(th_log_has("no key for provider 'shm'") && th_log_has("registered with 'tcp' only"), "log: %s",
		      th_logbuf);
	/* From this rank's CUDA region over shm. */
	ck_assert_int_eq(ops->put(p.ep[0], rhost, 0, cm[0], 0, 8), -ENOTSUP);
	ck_assert_msg(th_log_has("CUDA memory, which provider 'shm'"), "log: %s", th_logbuf);
	/* Host to host still works on the same endpoint. */
	ck_assert_int_eq(th_put_retry(p.ep[0], p.tc[0], rhost, 0, hm[0], 0, 8), 0);
	int rc;
	while ((rc = ops->flush(p.ep[0])) == -EAGAIN)
		ck_assert_int_eq(ops->progress(p.tc[1]), 0);
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(ops->mem_release(p.tc[0], rcuda), 0);
	ck_assert_int_eq(ops->mem_release(p.tc[0], rhost), 0);
	for (int r = 0; r < 2; r++) {
		ck_assert_int_eq(ops->mem_deregister(p.tc[r], cm[r]), 0);
		ck_assert_int_eq(ops->mem_deregister(p.tc[r], hm[r]), 0);
	}
	pair_close(&p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ofi_mem");
	TCase *t = tcase_create("hmem");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, init_logs_version);
	tcase_add_test(t, probe_without_hmem);
	tcase_add_test(t, real_library_agrees);
	tcase_add_test(t, probe_and_register_with_hmem);
	tcase_add_test(t, hmem_without_mr_hmem);
	tcase_add_test(t, hmem_without_cuda_iface);
	tcase_add_test(t, device_lookup_fails);
	tcase_add_test(t, device_lookup_real);
	tcase_add_test(t, put_between_cuda_regions);
	tcase_add_test(t, one_provider_with_hmem);
	suite_add_tcase(s, t);
	return wt_run_suite(s);
}
