/* SPDX-License-Identifier: Apache-2.0 */
/* xgmi plugin: what a peer sends (its memory-blob section and its endpoint
 * address) and the checks on it, apart from the HIP code. */
#ifndef WEFT_XGMI_WIRE_H
#define WEFT_XGMI_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <weft/plugin.h>

#include "../gpurt/gpurt.h"

enum { XG_KIND_IPC = 1, XG_KIND_HOST = 3 }; /* 2 is nvlink's VMM kind: not used here */

/* Blob section, little-endian fixed layout (x86-64 hosts). */
#define XG_MAGIC 0x31494d47u /* "GMI1" */
struct xg_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint64_t host_hash;
	uint64_t pid;
	int32_t device;
	uint32_t pad;
	uint64_t ptr;    /* the registered start in the exporter's address space */
	uint64_t len;    /* registered length */
	uint64_t offset; /* ptr - export base */
	uint64_t export_id;
	uint64_t buffer_id;
	uint64_t export_size;
	unsigned char ipc[GRT_IPC_HANDLE_BYTES];
};

struct xg_addr {
	uint32_t magic;
	int32_t rank;
	int32_t device;
	uint32_t pad;
	uint64_t pid;
	uint64_t host_hash;
};

/* The checks on what a peer sent, made before anything uses it, copying it out
 * (a section or address has no alignment). Pure functions, no device needed
 * (fuzzed by fuzz/fuzz_gpu_wire.c); static inline here, so that every build of
 * xgmi.c (also the no-ROCm copy tests/xgmi.cmake makes) has them with no source
 * list to change. Return 0, or -WEFT_ERR_PROTOCOL with the reason in why. */
/* Inside the functions below: the reason into why, and the error out. */
#define XG_BAD(...)                                  \
	do {                                         \
		snprintf(why, why_len, __VA_ARGS__); \
		return -WEFT_ERR_PROTOCOL;           \
	} while (0)

static inline int xg_wire_parse(const void *buf, size_t len, struct xg_wire *out, char *why, size_t why_len)
{
	struct xg_wire w;
	if (!buf || len != sizeof(w))
		XG_BAD("expected %zu bytes", sizeof(w));
	memcpy(&w, buf, sizeof(w));
	if (w.magic != XG_MAGIC || w.version != 1)
		XG_BAD("magic 0x%08x version %u, expected 0x%08x version 1", w.magic, w.version, XG_MAGIC);
	if (w.kind != XG_KIND_IPC && w.kind != XG_KIND_HOST)
		XG_BAD("unknown kind %u", w.kind);
	if (w.offset > w.export_size || w.len > w.export_size - w.offset)
		XG_BAD("region %llu+%llu lies outside its %llu-byte export", (unsigned long long)w.offset,
		       (unsigned long long)w.len, (unsigned long long)w.export_size);
	*out = w;
	return 0;
}

static inline int xg_addr_parse(const void *buf, size_t len, int peer_rank, struct xg_addr *out, char *why,
				size_t why_len)
{
	struct xg_addr a;
	if (!buf || len != sizeof(a))
		XG_BAD("%zu bytes, expected %zu", len, sizeof(a));
	memcpy(&a, buf, sizeof(a));
	if (a.magic != XG_MAGIC)
		XG_BAD("magic 0x%08x, expected 0x%08x", a.magic, XG_MAGIC);
	if (a.rank != peer_rank)
		XG_BAD("it names rank %d", a.rank);
	if (a.device < 0)
		XG_BAD("device %d", a.device);
	*out = a;
	return 0;
}

#undef XG_BAD

#endif
