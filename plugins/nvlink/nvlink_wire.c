/* SPDX-License-Identifier: Apache-2.0 */
/* nvlink plugin: what goes on the wire in a memory-blob section, and the
 * checks on what a peer sends (that section and its endpoint address), apart
 * from the GPU code so that they run, and are fuzzed (fuzz/fuzz_gpu_wire.c),
 * on hosts without a device. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nvlink.h"

static int bad(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return -WEFT_ERR_PROTOCOL;
}

int nvl_wire_parse(const void *buf, size_t len, struct nvl_wire *out, uint64_t chunk[NVL_MAX_CHUNKS], char *why,
		   size_t why_len)
{
	struct nvl_wire w;
	if (!buf || len < sizeof(w))
		return bad(why, why_len, "shorter than its %zu-byte header", sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (w.magic != NVL_MAGIC || w.version != 1)
		return bad(why, why_len, "magic 0x%08x version %u, expected 0x%08x version 1", w.magic, w.version,
			   NVL_MAGIC);
	if (w.kind < NVL_KIND_IPC || w.kind > NVL_KIND_HOST)
		return bad(why, why_len, "unknown kind %u", w.kind);
	if (w.nchunks < 0 || w.nchunks > NVL_MAX_CHUNKS)
		return bad(why, why_len, "%d chunks, expected 0..%d", w.nchunks, NVL_MAX_CHUNKS);
	if (len != sizeof(w) + (size_t)w.nchunks * sizeof(uint64_t))
		return bad(why, why_len, "%d chunks need %zu bytes", w.nchunks,
			   sizeof(w) + (size_t)w.nchunks * sizeof(uint64_t));
	if ((w.kind == NVL_KIND_VMM) != (w.nchunks > 0))
		return bad(why, why_len, "kind %u with %d chunks", w.kind, w.nchunks);
	if (w.offset > w.export_size || w.len > w.export_size - w.offset)
		return bad(why, why_len, "region %llu+%llu lies outside its %llu-byte export",
			   (unsigned long long)w.offset, (unsigned long long)w.len, (unsigned long long)w.export_size);
	/* Each chunk is counted against what is left, so the sum cannot wrap. */
	uint64_t left = w.export_size;
	for (int i = 0; i < w.nchunks; i++) {
		uint64_t c;
		memcpy(&c, (const unsigned char *)buf + sizeof(w) + (size_t)i * sizeof(c), sizeof(c));
		if (c == 0 || c > left)
			return bad(why, why_len, "chunk %d of %llu bytes does not fit the %llu-byte export", i,
				   (unsigned long long)c, (unsigned long long)w.export_size);
		left -= c;
		chunk[i] = c;
	}
	if (w.kind == NVL_KIND_VMM && left != 0)
		return bad(why, why_len, "chunk sizes do not add up to the %llu-byte export",
			   (unsigned long long)w.export_size);
	*out = w;
	return 0;
}

void nvl_wire_make(struct nvl_wire *w, const struct nvl_export *x, const void *ptr, size_t len, uint64_t host_hash,
		   int dev, uint64_t pid)
{
	memset(w, 0, sizeof(*w));
	w->magic = NVL_MAGIC;
	w->version = 1;
	w->kind = x ? (uint16_t)x->kind : NVL_KIND_HOST;
	w->host_hash = host_hash;
	w->pid = pid;
	w->device = dev;
	w->nchunks = x && x->kind == NVL_KIND_VMM ? x->nchunks : 0;
	w->ptr = (uint64_t)(uintptr_t)ptr;
	w->len = len;
	if (x) {
		w->offset = (uintptr_t)ptr - x->base;
		w->export_id = x->id;
		w->buffer_id = x->buffer_id;
		w->export_size = x->size;
		memcpy(w->ipc, x->ipc, sizeof(w->ipc));
	} else {
		w->export_size = len;
	}
}

int nvl_addr_parse(const void *buf, size_t len, int peer_rank, struct nvl_addr *out, char *why, size_t why_len)
{
	struct nvl_addr a;
	if (!buf || len != sizeof(a))
		return bad(why, why_len, "%zu bytes, expected %zu", len, sizeof(a));
	memcpy(&a, buf, sizeof(a));
	if (a.magic != NVL_MAGIC)
		return bad(why, why_len, "magic 0x%08x, expected 0x%08x", a.magic, NVL_MAGIC);
	if (a.rank != peer_rank)
		return bad(why, why_len, "it names rank %d", a.rank);
	if (a.device < 0)
		return bad(why, why_len, "device %d", a.device);
	*out = a;
	return 0;
}
