/* SPDX-License-Identifier: Apache-2.0 */
/* ucx plugin: memory. Maps a user buffer (host memory, or CUDA memory where the
 * context reaches it) with ucp_mem_map, writes and validates the plugin's
 * versioned section of a registered-memory blob (the packed remote key), and
 * unpacks a peer's key lazily, once per endpoint that uses it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ucx.h"

/* Blob layout, all little-endian:
 *   magic u32 | version u16 | reserved u16 (0) | rkey length u32 | reserved u32 (0)
 *   | base address u64 | region length u64 | rkey bytes (ucp_rkey_pack's output)
 * The blob is exactly UCX_MEM_HDR + rkey length bytes. */
#define UCX_MEM_MAGIC 0x4d435557u /* "WUCM" */
#define UCX_MEM_VERSION 1
#define UCX_MEM_HDR 32
/* ucp_ep_rkey_unpack takes no length: the copy we hand it is followed by this
 * many zero bytes, so that a key that lies about its own size is read as an
 * empty tail rather than past our allocation. */
#define UCX_RKEY_SLACK 512

int ucx_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	struct ucx_ctx *ctx = tc;
	ucs_status_t st;
	int rc;
	if (!ctx || !mh || !ptr || len == 0) {
		if (ucx_core)
			UCX_ERR("mem_register: %s", !ptr ? "NULL buffer" : len == 0 ? "zero length" : "NULL argument");
		return -EINVAL;
	}
	if (type != WEFT_MEM_HOST && type != WEFT_MEM_CUDA) {
		UCX_DBG("mem_register: memory type %d is not supported (host and CUDA memory only)", (int)type);
		return -ENOTSUP;
	}
	if (type == WEFT_MEM_CUDA && !ctx->has_cuda) {
		UCX_DBG("mem_register: CUDA memory at %p is not supported: UCX %s lists no CUDA memory type "
			"(ucp_context_query: UCX built or configured without CUDA); stage it through host memory",
			ptr, ucp_get_version_string());
		return -ENOTSUP;
	}
	struct ucx_mh *m = ucx_core->calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->base = ptr;
	m->len = len;
	m->mem_type = type == WEFT_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
	ucp_mem_map_params_t mp;
	memset(&mp, 0, sizeof(mp));
	mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
			UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
	mp.address = ptr;
	mp.length = len;
	mp.memory_type = m->mem_type;
	if ((st = ucx_sys->mem_map(ctx->context, &mp, &m->memh)) != UCS_OK) {
		UCX_ERR("ucp_mem_map of %s memory %p (%zu bytes) failed: %s (%d)",
			type == WEFT_MEM_CUDA ? "CUDA" : "host", ptr, len, ucs_status_string(st), (int)st);
		rc = ucx_code(st);
		goto err_free;
	}
	if ((st = ucp_rkey_pack(ctx->context, m->memh, &m->rkey, &m->rkey_len)) != UCS_OK) {
		rc = ucx_errno("ucp_rkey_pack", st);
		goto err_unmap;
	}
	if (m->rkey_len == 0 || m->rkey_len > UCX_RKEY_MAX) {
		UCX_ERR("ucp_rkey_pack gave a %zu-byte key (at most %d supported)", m->rkey_len, UCX_RKEY_MAX);
		rc = -WEFT_ERR_TRANSPORT;
		goto err_release_key;
	}
	ctx->nregions++;
	*mh = m;
	return 0;

err_release_key:
	ucp_rkey_buffer_release(m->rkey);
err_unmap:
	ucp_mem_unmap(ctx->context, m->memh);
err_free:
	ucx_core->free(m);
	return rc;
}

int ucx_mem_deregister(void *tc, void *mh)
{
	struct ucx_ctx *ctx = tc;
	struct ucx_mh *m = mh;
	int ret = 0;
	if (!m)
		return 0;
	if (!ctx)
		return -EINVAL;
	ucp_rkey_buffer_release(m->rkey);
	ucs_status_t st = ucp_mem_unmap(ctx->context, m->memh);
	if (st != UCS_OK)
		ret = ucx_errno("ucp_mem_unmap", st);
	ctx->nregions--;
	ucx_core->free(m);
	return ret;
}

int ucx_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	struct ucx_ctx *ctx = tc;
	struct ucx_mh *m = mh;
	if (!ctx || !m || !len)
		return -EINVAL;
	size_t need = UCX_MEM_HDR + m->rkey_len;
	if (!buf || *len < need) {
		*len = need;
		return -ENOSPC;
	}
	unsigned char *p = buf;
	memset(p, 0, UCX_MEM_HDR);
	weft_kit_le_put32(p, UCX_MEM_MAGIC);
	weft_kit_le_put16(p + 4, UCX_MEM_VERSION);
	weft_kit_le_put32(p + 8, (uint32_t)m->rkey_len);
	weft_kit_le_put64(p + 16, (uint64_t)(uintptr_t)m->base);
	weft_kit_le_put64(p + 24, (uint64_t)m->len);
	memcpy(p + UCX_MEM_HDR, m->rkey, m->rkey_len);
	*len = need;
	return 0;
}

/* Checks the frame of a packed key as UCX 1.x writes it: a 64-bit memory-domain
 * map, a memory-type byte, then per domain in the map a size byte and that many
 * bytes; anything after (system-device data) is UCX's. UCX parses keys without
 * a length, so a frame that runs past the key is refused here. Returns NULL or
 * what is wrong. */
static const char *rkey_frame_check(const unsigned char *k, size_t n)
{
	if (n < 9)
		return "shorter than UCX's 9-byte key header";
	uint64_t md_map;
	memcpy(&md_map, k, sizeof(md_map)); /* UCX packs it in host order */
	if (k[8] != (unsigned char)UCS_MEMORY_TYPE_HOST)
		return "the key is not for host memory";
	size_t at = 9;
	for (int bit = 0; bit < 64; bit++) {
		if (!(md_map & (1ull << bit)))
			continue;
		if (at >= n)
			return "memory-domain entries run past the key";
		at += 1 + (size_t)k[at];
		if (at > n)
			return "a memory-domain entry runs past the key";
	}
	return NULL;
}

#define BAD(...)                                                                        \
	do {                                                                            \
		char why_[192];                                                         \
		snprintf(why_, sizeof(why_), __VA_ARGS__);                              \
		UCX_ERR("mem_import from rank %d: malformed blob: %s", peer, why_);     \
		return -WEFT_ERR_PROTOCOL;                                              \
	} while (0)

int ucx_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct ucx_ctx *ctx = tc;
	const unsigned char *p = buf;
	if (!ctx || !rmh || (!buf && len > 0))
		return -EINVAL;
	if (len < UCX_MEM_HDR)
		BAD("%zu bytes, shorter than its %d-byte header", len, UCX_MEM_HDR);
	if (weft_kit_le_get32(p) != UCX_MEM_MAGIC)
		BAD("magic 0x%08x, expected 0x%08x", weft_kit_le_get32(p), UCX_MEM_MAGIC);
	if (weft_kit_le_get16(p + 4) != UCX_MEM_VERSION)
		BAD("version %u, this plugin reads version %d", weft_kit_le_get16(p + 4), UCX_MEM_VERSION);
	if (weft_kit_le_get16(p + 6) != 0 || weft_kit_le_get32(p + 12) != 0)
		BAD("reserved header fields are not zero");
	uint32_t klen = weft_kit_le_get32(p + 8);
	if (klen == 0 || klen > UCX_RKEY_MAX)
		BAD("remote key length %u, expected 1..%d", klen, UCX_RKEY_MAX);
	if (len != UCX_MEM_HDR + (size_t)klen)
		BAD("%zu bytes, but the header says %u + %u", len, UCX_MEM_HDR, klen);
	uint64_t base = weft_kit_le_get64(p + 16), rlen = weft_kit_le_get64(p + 24);
	if (rlen == 0)
		BAD("zero-length region");
	if (base == 0)
		BAD("region at address 0");
	if (base + rlen < base)
		BAD("region 0x%llx+%llu wraps around", (unsigned long long)base, (unsigned long long)rlen);
	const char *why = rkey_frame_check(p + UCX_MEM_HDR, klen);
	if (why)
		BAD("remote key: %s", why);

	struct ucx_rmh *r = ucx_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->rkey = ucx_core->calloc(1, (size_t)klen + UCX_RKEY_SLACK);
	if (!r->rkey) {
		ucx_core->free(r);
		return -ENOMEM;
	}
	memcpy(r->rkey, p + UCX_MEM_HDR, klen);
	r->rkey_len = klen;
	r->ctx = ctx;
	r->peer = peer;
	r->base = base;
	r->len = rlen;
	r->next = ctx->rmhs;
	if (ctx->rmhs)
		ctx->rmhs->prev = r;
	ctx->rmhs = r;
	*rmh = r;
	return 0;
}

int ucx_mem_release(void *tc, void *rmh)
{
	struct ucx_ctx *ctx = tc;
	struct ucx_rmh *r = rmh;
	if (!r)
		return 0;
	if (!ctx || r->ctx != ctx)
		return -EINVAL;
	while (r->unpacked) {
		struct ucx_rkey_ent *e = r->unpacked;
		r->unpacked = e->next;
		/* UCX reads a key until the ops that use it complete. */
		if (ucx_ep_busy(e->ep)) {
			ucx_ep_add_zombie(e->ep, e);
			continue;
		}
		ucp_rkey_destroy(e->rkey);
		ucx_core->free(e);
	}
	if (r->prev)
		r->prev->next = r->next;
	else
		ctx->rmhs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	ucx_core->free(r->rkey);
	ucx_core->free(r);
	return 0;
}

int ucx_rkey_get(struct ucx_rmh *r, struct ucx_ep *ep, ucp_ep_h uep, ucp_rkey_h *out)
{
	for (struct ucx_rkey_ent *e = r->unpacked; e; e = e->next) {
		if (e->ep == ep) {
			*out = e->rkey;
			return 0;
		}
	}
	struct ucx_rkey_ent *e = ucx_core->calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	ucs_status_t st = ucp_ep_rkey_unpack(uep, r->rkey, &e->rkey);
	if (st != UCS_OK) {
		UCX_ERR("cannot unpack rank %d's remote key: %s (%d)", r->peer, ucs_status_string(st), (int)st);
		ucx_core->free(e);
		/* A key that a healthy UCX cannot read came from a bad blob. */
		return st == UCS_ERR_NO_MEMORY ? -ENOMEM : -WEFT_ERR_PROTOCOL;
	}
	e->ep = ep;
	e->next = r->unpacked;
	r->unpacked = e;
	*out = e->rkey;
	return 0;
}

void ucx_rkeys_drop_ep(struct ucx_ctx *ctx, struct ucx_ep *ep)
{
	for (struct ucx_rmh *r = ctx->rmhs; r; r = r->next) {
		struct ucx_rkey_ent **pp = &r->unpacked;
		while (*pp) {
			struct ucx_rkey_ent *e = *pp;
			if (e->ep == ep) {
				*pp = e->next;
				ucp_rkey_destroy(e->rkey);
				ucx_core->free(e);
			} else {
				pp = &e->next;
			}
		}
	}
}
