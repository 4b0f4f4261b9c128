/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for what the GPU transports read from a peer: nvlink's and xgmi's
 * memory-blob section and endpoint address. Their import and connect need a
 * device before they parse, so the pure checks they call first
 * (plugins/nvlink/nvlink_wire.c, plugins/xgmi/xgmi_wire.h) are fuzzed directly, with the invariants
 * the rest of the plugin relies on asserted on every input they accept. Built
 * twice: FUZZ_NVLINK (fuzz_nvlink) and FUZZ_XGMI (fuzz_xgmi). The first input
 * byte picks the parser (even: section, odd: address); the second is the rank
 * the address must name. FUZZ_WRITE_SEEDS=<dir> writes valid inputs there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(FUZZ_NVLINK)
#include "nvlink.h"
#define WIRE struct nvl_wire
#define ADDR struct nvl_addr
#define MAGIC NVL_MAGIC
#elif defined(FUZZ_XGMI)
#include "xgmi_wire.h"
#define WIRE struct xg_wire
#define ADDR struct xg_addr
#define MAGIC XG_MAGIC
#else
#error "define FUZZ_NVLINK or FUZZ_XGMI"
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                         \
	do {                             \
		if (!(c))                \
			__builtin_trap(); \
	} while (0)

static void write_seed(const char *dir, const char *name, uint8_t mode, const void *p, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(&mode, 1, 1, f) != 1 || fwrite(p, 1, n, f) != n)
		fprintf(stderr, "cannot write %s\n", path);
	if (f)
		fclose(f);
}

/* Sections and addresses as the plugins' serialize and endpoint write them. */
static void write_seeds(const char *dir)
{
	unsigned char buf[sizeof(WIRE) + 4 * sizeof(uint64_t)];
	WIRE w;
	memset(&w, 0, sizeof(w));
	w.magic = MAGIC;
	w.version = 1;
	w.host_hash = 0x1234567890abcdefull;
	w.pid = 4242;
	w.device = 1;
	w.ptr = 0x7f0000100000ull;
	w.len = 4096;
	w.offset = 4096;
	w.export_id = 3;
	w.buffer_id = 77;
	w.export_size = 1 << 21;
	memset(w.ipc, 0xab, sizeof(w.ipc));
	w.kind = 1; /* IPC */
	memcpy(buf, &w, sizeof(w));
	write_seed(dir, "valid-ipc", 0, buf, sizeof(w));
	w.kind = 3; /* host */
	w.offset = 0;
	w.export_size = 4096;
	memcpy(buf, &w, sizeof(w));
	write_seed(dir, "valid-host", 0, buf, sizeof(w));
#if defined(FUZZ_NVLINK)
	w.kind = NVL_KIND_VMM;
	w.nchunks = 3;
	w.offset = 4096;
	w.export_size = 3 << 21;
	memcpy(buf, &w, sizeof(w));
	for (int i = 0; i < 3; i++) {
		uint64_t c = 1 << 21;
		memcpy(buf + sizeof(w) + (size_t)i * 8, &c, 8);
	}
	write_seed(dir, "valid-vmm", 0, buf, sizeof(w) + 3 * 8);
#endif
	ADDR a;
	memset(&a, 0, sizeof(a));
	a.magic = MAGIC;
	a.rank = 1;
	a.device = 2;
	a.pid = 4242;
	a.host_hash = 0x1234567890abcdefull;
	unsigned char ab[1 + sizeof(a)];
	ab[0] = 1; /* the rank the address must name */
	memcpy(ab + 1, &a, sizeof(a));
	write_seed(dir, "valid-addr", 1, ab, sizeof(ab));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("FUZZ_WRITE_SEEDS");
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int mode = data[0] & 1;
	/* An exact-size heap copy, so that ASan sees any read past the input. */
	size_t n = size - 1;
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, n);
	char why[160];
	if (mode == 0) {
		WIRE w;
		memset(&w, 0x5a, sizeof(w));
		WIRE before = w;
#if defined(FUZZ_NVLINK)
		uint64_t chunk[NVL_MAX_CHUNKS];
		int rc = nvl_wire_parse(buf, n, &w, chunk, why, sizeof(why));
#else
		int rc = xg_wire_parse(buf, n, &w, why, sizeof(why));
#endif
		if (rc != 0) {
			CHECK(rc == -WEFT_ERR_PROTOCOL && memchr(why, '\0', sizeof(why)) && why[0]);
			CHECK(memcmp(&w, &before, sizeof(w)) == 0); /* written only on success */
		} else {
			/* What import goes on to trust. */
			CHECK(w.magic == MAGIC && w.version == 1);
			CHECK(w.offset <= w.export_size && w.len <= w.export_size - w.offset);
#if defined(FUZZ_NVLINK)
			CHECK(w.kind >= NVL_KIND_IPC && w.kind <= NVL_KIND_HOST);
			CHECK(w.nchunks >= 0 && w.nchunks <= NVL_MAX_CHUNKS);
			CHECK(n == sizeof(w) + (size_t)w.nchunks * 8);
			CHECK((w.kind == NVL_KIND_VMM) == (w.nchunks > 0));
			uint64_t sum = 0;
			for (int i = 0; i < w.nchunks; i++) {
				CHECK(chunk[i] > 0 && chunk[i] <= w.export_size - sum);
				sum += chunk[i];
			}
			CHECK(w.kind != NVL_KIND_VMM || sum == w.export_size);
#else
			CHECK(w.kind == XG_KIND_IPC || w.kind == XG_KIND_HOST);
			CHECK(n == sizeof(w));
#endif
		}
	} else {
		int peer = n > 0 ? buf[0] : 0;
		ADDR a;
		memset(&a, 0x5a, sizeof(a));
		ADDR before = a;
		const uint8_t *p = n > 0 ? buf + 1 : buf;
		size_t len = n > 0 ? n - 1 : 0;
#if defined(FUZZ_NVLINK)
		int rc = nvl_addr_parse(p, len, peer, &a, why, sizeof(why));
#else
		int rc = xg_addr_parse(p, len, peer, &a, why, sizeof(why));
#endif
		if (rc != 0) {
			CHECK(rc == -WEFT_ERR_PROTOCOL && memchr(why, '\0', sizeof(why)) && why[0]);
			CHECK(memcmp(&a, &before, sizeof(a)) == 0);
		} else {
			CHECK(len == sizeof(a) && a.magic == MAGIC && a.rank == peer && a.device >= 0);
		}
	}
	free(buf);
	return 0;
}
