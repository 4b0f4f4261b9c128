/* SPDX-License-Identifier: Apache-2.0 */
/* shm plugin: private declarations shared by its sources (descriptor, params
 * and context in shm.c, segments and regions in shm_mem.c, endpoints and data
 * movement in shm_ep.c). */
#ifndef WEFT_SHM_H
#define WEFT_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <weft/kit.h>
#include <weft/plugin.h>

extern const struct weft_core_api *shm_core;

#define SHM_LOG(lvl, ...) WEFT_KIT_LOG(shm_core, (lvl), __VA_ARGS__)
#define SHM_ERR(...) SHM_LOG(WEFT_LOG_ERROR, __VA_ARGS__)
#define SHM_WARN(...) SHM_LOG(WEFT_LOG_WARN, __VA_ARGS__)
#define SHM_INFO(...) SHM_LOG(WEFT_LOG_INFO, __VA_ARGS__)
#define SHM_DBG(...) SHM_LOG(WEFT_LOG_DEBUG, __VA_ARGS__)

/* One context per communicator. */
struct shm_ctx {
	int rank;
	pid_t pid;
	bool map;        /* shm.map: map peers' segments (else every write goes through CMA) */
	bool cma;        /* shm.cma: cross-memory attach allowed for unmapped regions */
	int nregions;    /* live registrations and imports, for close's sanity check */
	int neps;
};

/* A local registration. seg_id 0: plain memory (CMA only). */
struct shm_mh {
	char *base;
	size_t len;
	uint64_t seg_id;  /* the segment holding the region, 0 if none */
	int seg_fd;       /* that segment's memfd in this process */
	size_t seg_len;
	size_t seg_off;   /* base - segment start */
	struct shm_mh *next; /* this process's registered regions (shm_mem.c) */
};

/* A peer's region as imported. */
struct shm_rmh {
	pid_t pid;
	uint64_t base;    /* the region's address in the peer */
	uint64_t len;
	char *map;        /* the region in this process (segment mapping + offset, or
			   * base itself for a peer in this process), NULL: CMA */
	void *map_base;   /* what to munmap, NULL when nothing was mapped */
	size_t map_len;
};

enum shm_path { SHM_PATH_NONE = 0, SHM_PATH_MAPPED = 1, SHM_PATH_CMA = 2 };

struct shm_ep {
	struct shm_ctx *ctx;
	int peer;
	pid_t peer_pid;   /* 0 until connected */
	enum shm_path last;
};

/* shm_mem.c */
int shm_mem_alloc(void *tc, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr);
int shm_mem_free(void *tc, void *host_ptr, void *dev_ptr);
int shm_mem_query(void *tc, const void *ptr, enum weft_mem_type *type);
int shm_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh);
int shm_mem_deregister(void *tc, void *mh);
int shm_mem_serialize(void *tc, void *mh, void *buf, size_t *len);
int shm_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh);
int shm_mem_release(void *tc, void *rmh);
int shm_mem_map(void *tc, void *rmh, void **dev_ptr);

/* shm_ep.c */
int shm_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep);
int shm_connect(void *ep, const void *peer_addr, size_t len);
int shm_disconnect(void *ep);
int shm_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
int shm_signal(void *ep, void *rmh, uint64_t roff, uint64_t value);
int shm_flush(void *ep);
int shm_progress(void *tc);
int shm_ep_describe(void *ep, char *buf, size_t len);

#endif /* WEFT_SHM_H */
