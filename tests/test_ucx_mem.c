/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the ucx transport's device memory: its sources are linked in
 * (weft-ucx-testable) and the calls of ucx_sys.c swapped for a double. No UCX
 * here is built with CUDA, so the double adds UCS_MEMORY_TYPE_CUDA to what the
 * real ucp_context_query reports, and its ucp_mem_map records the memory type
 * it is asked for, then maps the host buffer that stands in for CUDA memory
 * as host memory, so that keys and imports are real. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/plugin.h>

#include "testlib.h"
#include "tp_harness.h"
#include "ucx.h"

static const struct th_options opts = {.log_env = "WT_UCX_LOG", .default_section = "ucx", .capture = true};
static const struct weft_transport_ops *ops;

/* ---------------------------------------------------------------- the double */
#define FX_MAXMAP 16
static struct {
	bool cuda;             /* context_query adds UCS_MEMORY_TYPE_CUDA */
	ucs_status_t query_rc; /* or fails with this */
	int nqueries;
	ucs_status_t map_rc; /* mem_map of CUDA memory fails with this */
	struct {
		uint64_t field_mask;
		ucs_memory_type_t type;
		void *address;
		size_t length;
	} maps[FX_MAXMAP];
	int nmaps;
} fx;

static const struct ucx_sys_ops *real;

static ucs_status_t d_context_query(ucp_context_h context, ucp_context_attr_t *attr)
{
	fx.nqueries++;
	if (fx.query_rc != UCS_OK)
		return fx.query_rc;
	ucs_status_t st = real->context_query(context, attr);
	if (st == UCS_OK && fx.cuda && (attr->field_mask & UCP_ATTR_FIELD_MEMORY_TYPES))
		attr->memory_types |= UCS_BIT(UCS_MEMORY_TYPE_CUDA);
	return st;
}

static ucs_status_t d_mem_map(ucp_context_h context, const ucp_mem_map_params_t *params, ucp_mem_h *memh)
{
	ck_assert_int_lt(fx.nmaps, FX_MAXMAP);
	fx.maps[fx.nmaps].field_mask = params->field_mask;
	fx.maps[fx.nmaps].type = params->memory_type;
	fx.maps[fx.nmaps].address = params->address;
	fx.maps[fx.nmaps].length = params->length;
	fx.nmaps++;
	if (params->memory_type != UCS_MEMORY_TYPE_CUDA)
		return real->mem_map(context, params, memh);
	if (fx.map_rc != UCS_OK)
		return fx.map_rc;
	/* The stand-in is host memory: the real UCX maps it as such. */
	ucp_mem_map_params_t host = *params;
	host.memory_type = UCS_MEMORY_TYPE_HOST;
	return real->mem_map(context, &host, memh);
}

static const struct ucx_sys_ops dbl = {
	.context_query = d_context_query,
	.mem_map = d_mem_map,
};

/* ------------------------------------------------------------------ fixtures */
static void setup(void)
{
	unsetenv("WEFT_UCX_TLS");
	setenv("WEFT_UCX_NET_DEVICES", "lo", 1);
	memset(&fx, 0, sizeof(fx));
	fx.query_rc = UCS_OK;
	fx.map_rc = UCS_OK;
	th_loglen = 0;
	th_logbuf[0] = '\0';
	th_configure(&opts);
	ucx_set_sys_ops(NULL);
	real = ucx_sys;
	ucx_set_sys_ops(&dbl);
	const struct weft_plugin_desc *const *d = weft_plugin_init(&th_core);
	ck_assert_ptr_nonnull(d);
	ck_assert_str_eq(d[0]->name, "ucx");
	ops = d[0]->ops;
	th_ops = ops; /* for th_open_ctx */
}

static void teardown(void)
{
	ucx_set_sys_ops(NULL);
}

/* Every device the probe lists has exactly these memory types. */
static void assert_probe(uint32_t want)
{
	struct weft_tp_device devs[4];
	int n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_gt(n, 0);
	for (int i = 0; i < n; i++)
		ck_assert_msg(devs[i].mem_types == want, "device %s (%s): mem_types 0x%x, want 0x%x", devs[i].name,
			      devs[i].link, devs[i].mem_types, want);
}

static const uint32_t HOST = 1u << WEFT_MEM_HOST;
static const uint32_t HOST_CUDA = (1u << WEFT_MEM_HOST) | (1u << WEFT_MEM_CUDA);

static unsigned char standin[(1 << 20) + 64];
#define FAKE_CUDA ((void *)(standin + 5))
#define FAKE_LEN ((size_t)1 << 20)

/* Without CUDA in the context: -ENOTSUP, saying why, and nothing mapped. */
static void assert_cuda_refused(void)
{
	void *tc, *mh = NULL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	char desc[1024];
	ck_assert_int_eq(ops->describe(tc, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, " mem=host ") != NULL, "%s", desc);
	th_loglen = 0;
	th_logbuf[0] = '\0';
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA, FAKE_LEN, WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_ptr_null(mh);
	ck_assert_msg(th_log_has("CUDA memory at") && th_log_has("lists no CUDA memory type") &&
			      th_log_has("stage it through host memory"),
		      "log: %s", th_logbuf);
	ck_assert_int_eq(fx.nmaps, 0);
	ck_assert_int_eq(ops->mem_register(tc, standin, 4096, WEFT_MEM_HOST, &mh), 0);
	ck_assert_int_eq(fx.maps[0].type, UCS_MEMORY_TYPE_HOST);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
}

/* -------------------------------------------------------------------- cases */
START_TEST(init_logs_version)
{
	unsigned major, minor, release;
	ucp_get_version(&major, &minor, &release);
	char want[64];
	snprintf(want, sizeof(want), "[I] UCX %u.%u.%u (built against", major, minor, release);
	ck_assert_msg(th_log_has(want), "log: %s", th_logbuf);
}
END_TEST

/* This machine's UCX, as it answers: no CUDA. */
START_TEST(without_cuda)
{
	assert_probe(HOST);
	ck_assert_int_gt(fx.nqueries, 0);
	assert_cuda_refused();
}
END_TEST

START_TEST(query_fails)
{
	fx.cuda = true;
	fx.query_rc = UCS_ERR_UNSUPPORTED;
	assert_probe(HOST);
	assert_cuda_refused();
}
END_TEST

START_TEST(with_cuda)
{
	fx.cuda = true;
	assert_probe(HOST_CUDA);
	void *tc, *mh, *hm;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	char desc[1024];
	ck_assert_int_eq(ops->describe(tc, desc, sizeof(desc)), 0);
	ck_assert_msg(strstr(desc, " mem=host,cuda ") != NULL, "%s", desc);
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA, FAKE_LEN, WEFT_MEM_CUDA, &mh), 0);
	ck_assert_int_eq(fx.nmaps, 1);
	ck_assert(fx.maps[0].field_mask & UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE);
	ck_assert_int_eq(fx.maps[0].type, UCS_MEMORY_TYPE_CUDA);
	ck_assert_ptr_eq(fx.maps[0].address, FAKE_CUDA);
	ck_assert_uint_eq(fx.maps[0].length, FAKE_LEN);
	/* Host memory is still mapped as host memory. */
	ck_assert_int_eq(ops->mem_register(tc, standin, 4096, WEFT_MEM_HOST, &hm), 0);
	ck_assert_int_eq(fx.nmaps, 2);
	ck_assert_int_eq(fx.maps[1].type, UCS_MEMORY_TYPE_HOST);
	/* The region's section serializes and imports. */
	unsigned char blob[8192];
	size_t len = sizeof(blob);
	void *rmh;
	ck_assert_int_eq(ops->mem_serialize(tc, mh, blob, &len), 0);
	ck_assert_int_eq(ops->mem_import(tc, 1, blob, len, &rmh), 0);
	ck_assert_int_eq(ops->mem_release(tc, rmh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, hm), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	/* HIP memory stays refused. */
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA, FAKE_LEN, WEFT_MEM_HIP, &mh), -ENOTSUP);
	ops->close(tc);
}
END_TEST

START_TEST(map_fails)
{
	fx.cuda = true;
	fx.map_rc = UCS_ERR_NO_MEMORY;
	void *tc, *mh = NULL;
	ck_assert_int_eq(th_open_ctx(0, &tc), 0);
	ck_assert_int_eq(ops->mem_register(tc, FAKE_CUDA, FAKE_LEN, WEFT_MEM_CUDA, &mh), -ENOMEM);
	ck_assert_ptr_null(mh);
	ck_assert_msg(th_log_has("ucp_mem_map of CUDA memory") && th_log_has(ucs_status_string(UCS_ERR_NO_MEMORY)),
		      "log: %s", th_logbuf);
	ops->close(tc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ucx_mem");
	TCase *t = tcase_create("memtypes");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, init_logs_version);
	tcase_add_test(t, without_cuda);
	tcase_add_test(t, query_fails);
	tcase_add_test(t, with_cuda);
	tcase_add_test(t, map_fails);
	suite_add_tcase(s, t);
	return wt_run_suite(s);
}
