/* SPDX-License-Identifier: Apache-2.0 */
/* nvlink plugin: private declarations shared by its files (the transport in
 * nvlink.c, the file-descriptor exchange in nvlink_fd.c). */
#ifndef WEFT_NVLINK_H
#define WEFT_NVLINK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <weft/kit.h>
#include <weft/plugin.h>

extern const struct weft_core_api *nvl_core;

#define NVL_LOG(lv, ...) nvl_core->log(nvl_core->self, (lv), "nvlink: " __VA_ARGS__)
#define NVL_ERR(...) NVL_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define NVL_INFO(...) NVL_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define NVL_DBG(...) NVL_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

#define NVL_MAX_CHUNKS 64 /* physical chunks one VMM buffer may span */

/* A local allocation exported once and shared by every registration inside it
 * (the registration cache). */
struct nvl_export {
	struct nvl_export *next;
	uintptr_t base;      /* allocation (or first chunk) start */
	size_t size;         /* bytes from base the export covers */
	uint64_t buffer_id;  /* the driver's id: a freed and reused address differs */
	uint64_t id;         /* this context's number for it, named by importers */
	int kind;            /* NVL_KIND_* */
	unsigned char ipc[64];
	int nchunks;
	size_t chunk[NVL_MAX_CHUNKS];
	int fd[NVL_MAX_CHUNKS];
	int refs;
};

enum { NVL_KIND_IPC = 1, NVL_KIND_VMM = 2, NVL_KIND_HOST = 3 };

/* Blob section, little-endian fixed layout (x86-64 and aarch64 hosts), then
 * nchunks u64 chunk sizes (VMM). */
#define NVL_MAGIC 0x314c564eu /* "NVL1" */
struct nvl_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint64_t host_hash;
	uint64_t pid;
	int32_t device;
	int32_t nchunks;
	uint64_t ptr;       /* the registered start in the exporter's address space */
	uint64_t len;       /* registered length */
	uint64_t offset;    /* ptr - export base */
	uint64_t export_id;
	uint64_t buffer_id;
	uint64_t export_size;
	unsigned char ipc[64];
};

/* Endpoint address. */
struct nvl_addr {
	uint32_t magic;
	int32_t rank;
	int32_t device;
	uint32_t pad;
	uint64_t pid;
	uint64_t host_hash;
};

/* nvlink_wire.c: checks what a peer sent before anything uses it, copying it
 * out (a section or address has no alignment). Pure functions, no device
 * needed. Return 0, or -WEFT_ERR_PROTOCOL with the reason in why. */
int nvl_wire_parse(const void *buf, size_t len, struct nvl_wire *w, uint64_t chunk[NVL_MAX_CHUNKS], char *why,
		   size_t why_len);
int nvl_addr_parse(const void *buf, size_t len, int peer_rank, struct nvl_addr *a, char *why, size_t why_len);
/* The section's header for a registration of [ptr, ptr + len): inside export
 * x, or host memory where x is NULL (a region of its own, export_size len, so
 * that it passes nvl_wire_parse as every section must). */
void nvl_wire_make(struct nvl_wire *w, const struct nvl_export *x, const void *ptr, size_t len, uint64_t host_hash,
		   int dev, uint64_t pid);

/* The fd server: answers other processes' requests for an export's fds over an
 * abstract-namespace Unix socket named from the comm tag and rank. */
struct nvl_fdsrv {
	int lsock;
	pthread_t thread;
	int running;
	pthread_mutex_t *lock; /* the context's export lock */
	struct nvl_export **exports;
};

/* nvlink_stage.c: the stage ops, and their per-context state. */
struct nvl_stage;
extern const struct weft_tp_stage_ops nvl_stage_ops;
void nvl_stage_free(struct nvl_stage *s);
/* nvlink.c: makes ctx's device current and points *slot at its stage state. */
int nvl_ctx_stage(void *ctx, struct nvl_stage ***slot);

void nvl_sock_name(uint64_t tag, int rank, char *name, size_t len);
int nvl_fdsrv_start(struct nvl_fdsrv *s, uint64_t tag, int rank);
void nvl_fdsrv_stop(struct nvl_fdsrv *s);
/* Fetches the fds of export `id` from rank's server (pid checks the peer). */
int nvl_fd_fetch(uint64_t tag, int rank, uint64_t id, int *fds, int n);

#endif
