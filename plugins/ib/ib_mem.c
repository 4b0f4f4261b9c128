/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: memory regions. Registers a buffer with the protection domain of
 * every opened device (host memory by ibv_reg_mr, GPU memory by dma-buf from
 * ib_dmabuf.c or by peer memory) and writes/reads the plugin's versioned
 * section of a blob. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ibp.h"

/* Blob layout, all little-endian:
 *   header (32 bytes): magic u32 "WIBM", version u16, count u16, total length u32,
 *                      reserved u32 (0), address u64, region length u64
 *   count entries (16 bytes each): device node GUID u64, rkey u32, reserved u32 (0)
 * The address is the region's virtual address (verbs address remote memory by
 * the registering process's virtual address); a peer picks the rkey of the
 * device at the far end of its queue pair by that device's GUID. */

#define IBP_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

static void dereg_all(struct ibp_ctx *ctx, struct ibp_mh *m)
{
	for (int k = 0; k < IBP_MAX_DEVS; k++) {
		if (m->mr[k]) {
			int rc = ibp_verbs->dereg_mr(m->mr[k]);
			if (rc != 0)
				ibp_verbs_fail("ibv_dereg_mr", ctx->fab.devs[k].name, rc);
			m->mr[k] = NULL;
		}
	}
}

/* GPU memory: one dma-buf fd of the buffer's pages, registered with every
 * device; else plain ibv_reg_mr where ib.peer_memory says nvidia-peermem is
 * loaded; else -ENOTSUP, and the core goes on without this transport. */
static int reg_cuda(struct ibp_ctx *ctx, struct ibp_mh *m)
{
	struct ibp_dmabuf db;
	char why[320];
	int rc = ibp_dmabuf_export(m->base, m->len, &db, why, sizeof(why));
	if (rc == 0) {
		for (int k = 0; k < ctx->fab.ndevs && rc == 0; k++) {
			struct ibp_dev *d = &ctx->fab.devs[k];
			errno = 0;
			m->mr[k] = ibp_verbs->reg_dmabuf_mr(d->pd, db.offset, m->len, (uint64_t)(uintptr_t)m->base,
							    db.fd, IBP_ACCESS);
			if (!m->mr[k])
				rc = ibp_verbs_fail("ibv_reg_dmabuf_mr", d->name, errno);
		}
		/* Each MR holds its own reference to the dma-buf. */
		if (close(db.fd) != 0)
			IBP_WARN("mem_register: closing dma-buf fd %d failed: %s", db.fd, strerror(errno));
		return rc;
	}
	if (rc != -ENOTSUP) {
		IBP_ERR("mem_register: CUDA memory at %p (%zu bytes): %s", m->base, m->len, why);
		return rc;
	}
	if (!ctx->set.peer_memory) {
		/* Once per context: the core asks for every CUDA buffer. */
		IBP_LOG(ctx->cuda_warned ? WEFT_LOG_DEBUG : WEFT_LOG_WARN,
			"mem_register: CUDA memory at %p (%zu bytes) is not reachable: %s, and ib.peer_memory is 0 "
			"(set it to 1 where the nvidia-peermem module is loaded)",
			m->base, m->len, why);
		ctx->cuda_warned = true;
		return -ENOTSUP;
	}
	IBP_DBG("mem_register: no dma-buf (%s): CUDA memory through peer memory (ib.peer_memory=1)", why);
	for (int k = 0; k < ctx->fab.ndevs; k++) {
		struct ibp_dev *d = &ctx->fab.devs[k];
		errno = 0;
		m->mr[k] = ibp_verbs->reg_mr(d->pd, m->base, m->len, IBP_ACCESS);
		if (!m->mr[k]) {
			int e = errno;
			IBP_ERR("ibv_reg_mr of CUDA memory on %s failed: %s (ib.peer_memory=1 needs the nvidia-peermem "
				"module)",
				d->name, strerror(e ? e : EIO));
			return -WEFT_ERR_TRANSPORT;
		}
	}
	return 0;
}

static int reg_host(struct ibp_ctx *ctx, struct ibp_mh *m)
{
	for (int k = 0; k < ctx->fab.ndevs; k++) {
		struct ibp_dev *d = &ctx->fab.devs[k];
		errno = 0;
		m->mr[k] = ibp_verbs->reg_mr(d->pd, m->base, m->len, IBP_ACCESS);
		if (!m->mr[k])
			return ibp_verbs_fail("ibv_reg_mr", d->name, errno);
	}
	return 0;
}

int ibp_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	struct ibp_ctx *ctx = tc;
	int rc;
	if (!ctx || !mh || !ptr || len == 0) {
		if (ibp_core)
			IBP_ERR("mem_register: %s", !ptr ? "NULL buffer" : len == 0 ? "zero length" : "NULL argument");
		return -EINVAL;
	}
	if (type != WEFT_MEM_HOST && type != WEFT_MEM_CUDA) {
		IBP_DBG("mem_register: memory type %d is not supported", (int)type);
		return -ENOTSUP;
	}
	struct ibp_mh *m = ibp_core->calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base = ptr;
	m->len = len;
	m->type = type;
	if ((rc = type == WEFT_MEM_CUDA ? reg_cuda(ctx, m) : reg_host(ctx, m)) < 0)
		goto err_dereg;
	m->next = ctx->mhs;
	if (ctx->mhs)
		ctx->mhs->prev = m;
	ctx->mhs = m;
	ctx->nregions++;
	*mh = m;
	return 0;

err_dereg:
	dereg_all(ctx, m);
	ibp_core->free(m);
	return rc;
}

int ibp_mem_deregister(void *tc, void *mh)
{
	struct ibp_ctx *ctx = tc;
	struct ibp_mh *m = mh;
	if (!m)
		return 0;
	if (!ctx)
		return -EINVAL;
	int ret = 0;
	for (int k = 0; k < IBP_MAX_DEVS; k++) {
		if (m->mr[k]) {
			int rc = ibp_verbs->dereg_mr(m->mr[k]);
			if (rc != 0 && ret == 0)
				ret = ibp_verbs_fail("ibv_dereg_mr", ctx->fab.devs[k].name, rc);
		}
	}
	if (m->prev)
		m->prev->next = m->next;
	else
		ctx->mhs = m->next;
	if (m->next)
		m->next->prev = m->prev;
	ctx->nregions--;
	ibp_core->free(m);
	return ret;
}

bool ibp_mem_contains(const struct ibp_ctx *ctx, uint64_t addr, size_t len)
{
	for (const struct ibp_mh *m = ctx->mhs; m; m = m->next) {
		uint64_t base = (uint64_t)(uintptr_t)m->base;
		if (m->type == WEFT_MEM_HOST && addr >= base && addr - base <= m->len && len <= m->len - (addr - base))
			return true;
	}
	return false;
}

int ibp_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	struct ibp_ctx *ctx = tc;
	struct ibp_mh *m = mh;
	if (!ctx || !m || !len)
		return -EINVAL;
	size_t need = IBP_MEM_HDR + (size_t)ctx->fab.ndevs * IBP_MEM_ENT;
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	unsigned char *p = buf;
	memset(p, 0, need);
	weft_kit_le_put32(p, IBP_MEM_MAGIC);
	weft_kit_le_put16(p + 4, IBP_MEM_VERSION);
	weft_kit_le_put16(p + 6, (uint16_t)ctx->fab.ndevs);
	weft_kit_le_put32(p + 8, (uint32_t)need);
	weft_kit_le_put64(p + 16, (uint64_t)(uintptr_t)m->base);
	weft_kit_le_put64(p + 24, (uint64_t)m->len);
	for (int k = 0; k < ctx->fab.ndevs; k++) {
		unsigned char *e = p + IBP_MEM_HDR + (size_t)k * IBP_MEM_ENT;
		weft_kit_le_put64(e, ctx->fab.devs[k].attr.node_guid);
		weft_kit_le_put32(e + 8, m->mr[k]->rkey);
	}
	*len = need;
	return 0;
}

#define BAD(...)                                                                    \
	do {                                                                        \
		char why_[192];                                                     \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                          \
		IBP_ERR("mem_import from rank %d: malformed blob: %s", peer, why_); \
		rc = -WEFT_ERR_PROTOCOL;                                            \
		goto err_free;                                                      \
	} while (0)

int ibp_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct ibp_ctx *ctx = tc;
	const unsigned char *p = buf;
	int rc;
	if (!ctx || !rmh || (!buf && len > 0))
		return -EINVAL;
	struct ibp_rmh *r = ibp_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->peer = peer;
	if (len < IBP_MEM_HDR)
		BAD("%zu bytes, shorter than its %d-byte header", len, IBP_MEM_HDR);
	if (weft_kit_le_get32(p) != IBP_MEM_MAGIC)
		BAD("magic 0x%08x, expected 0x%08x", weft_kit_le_get32(p), IBP_MEM_MAGIC);
	if (weft_kit_le_get16(p + 4) != IBP_MEM_VERSION)
		BAD("version %u, this plugin reads version %d", weft_kit_le_get16(p + 4), IBP_MEM_VERSION);
	unsigned count = weft_kit_le_get16(p + 6);
	if (count < 1 || count > IBP_MAX_DEVS)
		BAD("%u device entries, expected 1..%d", count, IBP_MAX_DEVS);
	if (weft_kit_le_get32(p + 8) != len)
		BAD("header says %u bytes, got %zu", weft_kit_le_get32(p + 8), len);
	if (len != IBP_MEM_HDR + (size_t)count * IBP_MEM_ENT)
		BAD("%zu bytes for %u entries, expected %zu", len, count, IBP_MEM_HDR + (size_t)count * IBP_MEM_ENT);
	if (weft_kit_le_get32(p + 12) != 0)
		BAD("reserved header field is 0x%x, expected 0", weft_kit_le_get32(p + 12));
	r->addr = weft_kit_le_get64(p + 16);
	r->len = weft_kit_le_get64(p + 24);
	if (r->len == 0)
		BAD("zero-length region");
	if (r->addr == 0)
		BAD("region at address 0");
	if (r->addr + r->len < r->addr)
		BAD("region 0x%llx+%llu wraps around", (unsigned long long)r->addr, (unsigned long long)r->len);
	for (unsigned i = 0; i < count; i++) {
		const unsigned char *e = p + IBP_MEM_HDR + (size_t)i * IBP_MEM_ENT;
		r->keys[i].guid = weft_kit_le_get64(e);
		r->keys[i].rkey = weft_kit_le_get32(e + 8);
		if (r->keys[i].guid == 0)
			BAD("entry %u: device GUID is zero", i);
		if (weft_kit_le_get32(e + 12) != 0)
			BAD("entry %u: reserved field is 0x%x, expected 0", i, weft_kit_le_get32(e + 12));
		for (unsigned j = 0; j < i; j++)
			if (r->keys[j].guid == r->keys[i].guid)
				BAD("entry %u: device GUID 0x%016llx appears twice", i, (unsigned long long)r->keys[i].guid);
	}
	r->count = (int)count;
	*rmh = r;
	return 0;

err_free:
	ibp_core->free(r);
	return rc;
}

int ibp_mem_release(void *tc, void *rmh)
{
	(void)tc;
	if (rmh)
		ibp_core->free(rmh);
	return 0;
}
