/* SPDX-License-Identifier: Apache-2.0 */
/* ofi plugin: memory regions. Registers a buffer in every opened domain (CUDA
 * memory in those opened with FI_HMEM) and writes/reads the plugin's
 * versioned section of a registered-memory blob. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sys/uio.h>

#include "ofi.h"

/* Blob layout, all little-endian:
 *   header (16 bytes): magic u32, version u16, count u16, total length u32, zero u32
 *   count entries:     provider name [16] (NUL-padded), flags u32 (OFI_RENT_*),
 *                      key length u32, address u64, region length u64,
 *                      raw base u64, key bytes padded to a multiple of 8.
 * "address" is the region's virtual address when the provider addresses RMA by
 * virtual address (FI_MR_VIRT_ADDR), else 0 and RMA uses offsets. "raw base" is
 * the base fi_mr_raw_attr reported (FI_MR_RAW), else 0. */
#define OFI_MEM_MAGIC 0x4d494657u /* "WFIM" */
#define OFI_MEM_VERSION 1
#define OFI_MEM_HDR 16
#define OFI_MEM_ENT 48

static size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* One domain's MR of m, of host memory with fi_mr_reg, of CUDA memory with
 * fi_mr_regattr naming the interface and device; bound and enabled where the
 * provider wants it (FI_MR_ENDPOINT). */
static int mr_make(struct ofi_ctx *ctx, struct ofi_dom *d, struct ofi_mh *m, int dev, struct fid_mr **out)
{
	uint64_t key = (d->mr_mode & FI_MR_PROV_KEY) ? 0 : ctx->next_key++;
	int rc;
	if (m->type == WEFT_MEM_CUDA) {
		struct iovec iov = {.iov_base = m->base, .iov_len = m->len};
		struct fi_mr_attr attr = {
			.mr_iov = &iov,
			.iov_count = 1,
			.access = FI_WRITE | FI_REMOTE_WRITE,
			.requested_key = key,
			.iface = FI_HMEM_CUDA,
		};
		attr.device.cuda = dev;
		if ((rc = ofi_sys->mr_regattr(d->domain, &attr, 0, out)) < 0) {
			OFI_ERR("fi_mr_regattr of CUDA memory %p (%zu bytes, device %d) on provider '%s' failed: %s",
				m->base, m->len, dev, d->prov, fi_strerror(-rc));
			return ofi_code(rc);
		}
	} else if ((rc = fi_mr_reg(d->domain, m->base, m->len, FI_WRITE | FI_REMOTE_WRITE, 0, key, 0, out, NULL)) < 0) {
		return ofi_errno("fi_mr_reg", rc);
	}
	if (d->mr_mode & FI_MR_ENDPOINT) {
		if ((rc = ofi_dom_ep_ensure(d)) < 0)
			return rc;
		if ((rc = fi_mr_bind(*out, &d->ep->fid, 0)) < 0)
			return ofi_errno("fi_mr_bind", rc);
		if ((rc = fi_mr_enable(*out)) < 0)
			return ofi_errno("fi_mr_enable", rc);
	}
	return 0;
}

int ofi_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	struct ofi_ctx *ctx = tc;
	int rc, dev = -1;
	if (!ctx || !mh || !ptr || len == 0) {
		if (ofi_core)
			OFI_ERR("mem_register: %s", !ptr ? "NULL buffer" : len == 0 ? "zero length" : "NULL argument");
		return -EINVAL;
	}
	if (type != WEFT_MEM_HOST && type != WEFT_MEM_CUDA) {
		OFI_DBG("mem_register: memory type %d is not supported (host and CUDA memory only)", (int)type);
		return -ENOTSUP;
	}
	if (type == WEFT_MEM_CUDA) {
		int n = 0;
		for (int k = 0; k < ctx->ndoms; k++)
			n += ctx->doms[k].hmem_cuda;
		if (n == 0) {
			OFI_DBG("mem_register: CUDA memory at %p is not supported: of providers %s%s%s none has "
				"FI_HMEM with FI_MR_HMEM and libfabric's CUDA interface; stage it through host memory",
				ptr, ctx->doms[0].prov, ctx->ndoms > 1 ? ", " : "",
				ctx->ndoms > 1 ? ctx->doms[1].prov : "");
			return -ENOTSUP;
		}
		if ((rc = ofi_sys->cuda_device(ptr, &dev)) < 0)
			return rc;
	}
	struct ofi_mh *m = ofi_core->calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base = ptr;
	m->len = len;
	m->type = type;
	for (int k = 0; k < ctx->ndoms; k++) {
		struct ofi_dom *d = &ctx->doms[k];
		if (type == WEFT_MEM_CUDA && !d->hmem_cuda) {
			/* The region stays usable through the other provider; puts
			 * through this one refuse it (ofi_put). */
			OFI_DBG("mem_register: CUDA memory at %p is not registered with provider '%s' (no FI_HMEM)",
				ptr, d->prov);
			continue;
		}
		if ((rc = mr_make(ctx, d, m, dev, &m->mr[k])) < 0)
			goto err_close_mrs;
	}
	ctx->nregions++;
	*mh = m;
	return 0;

err_close_mrs:
	for (int k = 0; k < OFI_MAX_DOMS; k++)
		if (m->mr[k])
			fi_close(&m->mr[k]->fid);
	ofi_core->free(m);
	return rc;
}

int ofi_mem_deregister(void *tc, void *mh)
{
	struct ofi_ctx *ctx = tc;
	struct ofi_mh *m = mh;
	int ret = 0;
	if (!m)
		return 0;
	for (int k = 0; k < OFI_MAX_DOMS; k++) {
		if (m->mr[k]) {
			int rc = fi_close(&m->mr[k]->fid);
			if (rc < 0 && ret == 0)
				ret = ofi_errno("fi_close(mr)", rc);
		}
	}
	if (ctx)
		ctx->nregions--;
	ofi_core->free(m);
	return ret;
}

/* The key bytes (raw or 8-byte) and raw base of one MR. */
static int mr_key(const struct ofi_dom *d, struct fid_mr *mr, unsigned char *key, size_t *keylen, uint64_t *rawbase)
{
	if (d->mr_mode & FI_MR_RAW) {
		size_t n = OFI_RAW_KEY_MAX;
		uint64_t base = 0;
		int rc = fi_mr_raw_attr(mr, &base, key, &n, 0);
		if (rc < 0)
			return ofi_errno("fi_mr_raw_attr", rc);
		if (n == 0 || n > OFI_RAW_KEY_MAX) {
			OFI_ERR("provider '%s' reports a raw key of %zu bytes (at most %d supported)", d->prov, n,
				OFI_RAW_KEY_MAX);
			return -WEFT_ERR_TRANSPORT;
		}
		*keylen = n;
		*rawbase = base;
		return 0;
	}
	weft_kit_le_put64(key, fi_mr_key(mr));
	*keylen = 8;
	*rawbase = 0;
	return 0;
}

int ofi_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	struct ofi_ctx *ctx = tc;
	struct ofi_mh *m = mh;
	unsigned char keys[OFI_MAX_DOMS][OFI_RAW_KEY_MAX];
	size_t keylen[OFI_MAX_DOMS];
	uint64_t rawbase[OFI_MAX_DOMS];
	int rc;
	if (!ctx || !m || !len)
		return -EINVAL;
	size_t need = OFI_MEM_HDR;
	int count = 0;
	for (int k = 0; k < ctx->ndoms; k++) {
		if (!m->mr[k])
			continue; /* CUDA memory in a domain without FI_HMEM */
		if ((rc = mr_key(&ctx->doms[k], m->mr[k], keys[k], &keylen[k], &rawbase[k])) < 0)
			return rc;
		need += OFI_MEM_ENT + pad8(keylen[k]);
		count++;
	}
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	unsigned char *p = buf;
	memset(p, 0, need);
	weft_kit_le_put32(p, OFI_MEM_MAGIC);
	weft_kit_le_put16(p + 4, OFI_MEM_VERSION);
	weft_kit_le_put16(p + 6, (uint16_t)count);
	weft_kit_le_put32(p + 8, (uint32_t)need);
	p += OFI_MEM_HDR;
	for (int k = 0; k < ctx->ndoms; k++) {
		const struct ofi_dom *d = &ctx->doms[k];
		uint32_t flags = 0;
		if (!m->mr[k])
			continue;
		if (d->mr_mode & FI_MR_VIRT_ADDR)
			flags |= OFI_RENT_VIRT;
		if (d->mr_mode & FI_MR_RAW)
			flags |= OFI_RENT_RAW;
		memcpy(p, d->prov, strlen(d->prov));
		weft_kit_le_put32(p + 16, flags);
		weft_kit_le_put32(p + 20, (uint32_t)keylen[k]);
		weft_kit_le_put64(p + 24, (flags & OFI_RENT_VIRT) ? (uint64_t)(uintptr_t)m->base : 0);
		weft_kit_le_put64(p + 32, (uint64_t)m->len);
		weft_kit_le_put64(p + 40, rawbase[k]);
		memcpy(p + OFI_MEM_ENT, keys[k], keylen[k]);
		p += OFI_MEM_ENT + pad8(keylen[k]);
	}
	*len = need;
	return 0;
}

static int find_dom(const struct ofi_ctx *ctx, const char *prov)
{
	for (int k = 0; k < ctx->ndoms; k++)
		if (strcmp(ctx->doms[k].prov, prov) == 0)
			return k;
	return -1;
}

static void unmap_raw(struct ofi_ctx *ctx, struct ofi_rmh *r)
{
	for (int i = 0; i < r->count; i++) {
		struct ofi_rmh_ent *e = &r->ent[i];
		if (e->mapped_dom >= 0) {
			int rc = fi_mr_unmap_key(ctx->doms[e->mapped_dom].domain, e->key);
			if (rc < 0)
				ofi_errno_at(rc, "mem_release of rank %d's region: fi_mr_unmap_key", r->peer);
			e->mapped_dom = -1;
		}
	}
}

#define BAD(...)                                                                        \
	do {                                                                            \
		char why_[192];                                                         \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                              \
		OFI_ERR("mem_import from rank %d: malformed blob: %s", peer, why_);     \
		rc = -WEFT_ERR_PROTOCOL;                                                \
		goto err_free;                                                          \
	} while (0)

int ofi_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct ofi_ctx *ctx = tc;
	const unsigned char *p = buf;
	int rc;
	if (!ctx || !rmh || (!buf && len > 0))
		return -EINVAL;
	struct ofi_rmh *r = ofi_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->peer = peer;
	if (len < OFI_MEM_HDR)
		BAD("%zu bytes, shorter than its %d-byte header", len, OFI_MEM_HDR);
	if (weft_kit_le_get32(p) != OFI_MEM_MAGIC)
		BAD("magic 0x%08x, expected 0x%08x", weft_kit_le_get32(p), OFI_MEM_MAGIC);
	if (weft_kit_le_get16(p + 4) != OFI_MEM_VERSION)
		BAD("version %u, this plugin reads version %d", weft_kit_le_get16(p + 4), OFI_MEM_VERSION);
	unsigned count = weft_kit_le_get16(p + 6);
	if (count < 1 || count > OFI_MAX_DOMS)
		BAD("%u entries, expected 1..%d", count, OFI_MAX_DOMS);
	if (weft_kit_le_get32(p + 8) != len)
		BAD("header says %u bytes, got %zu", weft_kit_le_get32(p + 8), len);
	if (weft_kit_le_get32(p + 12) != 0)
		BAD("reserved header field is 0x%x, expected 0", weft_kit_le_get32(p + 12));
	size_t at = OFI_MEM_HDR;
	for (unsigned i = 0; i < count; i++) {
		struct ofi_rmh_ent *e = &r->ent[i];
		e->mapped_dom = -1;
		if (len - at < OFI_MEM_ENT)
			BAD("entry %u truncated (%zu bytes left, entry needs %d)", i, len - at, OFI_MEM_ENT);
		const unsigned char *q = p + at;
		if (ofi_prov_name_check(q, e->prov) < 0)
			BAD("entry %u: provider name field is not a NUL-padded name", i);
		for (unsigned j = 0; j < i; j++)
			if (strcmp(r->ent[j].prov, e->prov) == 0)
				BAD("entry %u: provider '%s' appears twice", i, e->prov);
		e->flags = weft_kit_le_get32(q + 16);
		if (e->flags & ~(OFI_RENT_VIRT | OFI_RENT_RAW))
			BAD("entry %u: unknown flags 0x%x", i, e->flags);
		uint32_t keylen = weft_kit_le_get32(q + 20);
		if ((e->flags & OFI_RENT_RAW) ? (keylen < 1 || keylen > OFI_RAW_KEY_MAX) : keylen != 8)
			BAD("entry %u: key length %u is invalid", i, keylen);
		if (len - at - OFI_MEM_ENT < pad8(keylen))
			BAD("entry %u: key of %u bytes runs past the end", i, keylen);
		e->addr = weft_kit_le_get64(q + 24);
		e->len = weft_kit_le_get64(q + 32);
		uint64_t rawbase = weft_kit_le_get64(q + 40);
		if (e->len == 0)
			BAD("entry %u: zero-length region", i);
		if (!(e->flags & OFI_RENT_VIRT) && e->addr != 0)
			BAD("entry %u: offset-addressed region with address 0x%llx", i, (unsigned long long)e->addr);
		if (e->addr + e->len < e->addr)
			BAD("entry %u: region 0x%llx+%llu wraps around", i, (unsigned long long)e->addr,
			    (unsigned long long)e->len);
		if (!(e->flags & OFI_RENT_RAW) && rawbase != 0)
			BAD("entry %u: raw base set on a non-raw key", i);
		for (size_t b = keylen; b < pad8(keylen); b++)
			if (q[OFI_MEM_ENT + b] != 0)
				BAD("entry %u: key padding is not zero", i);
		/* Peers running one provider share its MR mode; a mismatch means the
		 * blob is corrupt or from an incompatible build. */
		int k = find_dom(ctx, e->prov);
		if (k >= 0) {
			uint32_t want = ((ctx->doms[k].mr_mode & FI_MR_VIRT_ADDR) ? OFI_RENT_VIRT : 0) |
					((ctx->doms[k].mr_mode & FI_MR_RAW) ? OFI_RENT_RAW : 0);
			if (e->flags != want)
				BAD("entry %u: provider '%s' flags 0x%x, this rank's domain needs 0x%x", i, e->prov,
				    e->flags, want);
		}
		if (e->flags & OFI_RENT_RAW) {
			if (k >= 0) {
				unsigned char raw[OFI_RAW_KEY_MAX];
				memcpy(raw, q + OFI_MEM_ENT, keylen);
				rc = fi_mr_map_raw(ctx->doms[k].domain, rawbase, raw, keylen, &e->key, 0);
				if (rc < 0) {
					rc = ofi_errno_at(rc, "mem_import from rank %d: fi_mr_map_raw of entry %u (%s)",
							  peer, i, e->prov);
					r->count = (int)i;
					goto err_unmap;
				}
				e->mapped_dom = k;
			}
		} else {
			e->key = weft_kit_le_get64(q + OFI_MEM_ENT);
		}
		r->count = (int)i + 1;
		at += OFI_MEM_ENT + pad8(keylen);
	}
	if (at != len) {
		unmap_raw(ctx, r);
		BAD("%zu trailing bytes after %u entries", len - at, count);
	}
	*rmh = r;
	return 0;

err_unmap:
	unmap_raw(ctx, r);
err_free:
	if (rc == -WEFT_ERR_PROTOCOL)
		unmap_raw(ctx, r);
	ofi_core->free(r);
	return rc;
}

int ofi_mem_release(void *tc, void *rmh)
{
	struct ofi_ctx *ctx = tc;
	struct ofi_rmh *r = rmh;
	if (!r)
		return 0;
	if (ctx)
		unmap_raw(ctx, r);
	ofi_core->free(r);
	return 0;
}
