/* SPDX-License-Identifier: Apache-2.0 */
/* Registered memory as the other modules use it: internal registrations and
 * imports (semaphore pools), blobs, the put bounds check, teardown. */
#ifndef WEFT_CORE_MEM_H
#define WEFT_CORE_MEM_H

#include "base.h"

/* Internal registration and import: `internal` objects are not listed for the
 * user and get no id (semaphore pools and the pools peers expose). */
int weft__mem_register(weft_comm_t *comm, void *ptr, size_t len, enum weft_mem_type type, int internal,
		       weft_mem_t **mem);
int weft__mem_import(weft_comm_t *comm, int peer, const void *buf, size_t len, int internal, weft_rmem_t **rmem);
/* Serializes into a malloc'd buffer. */
int weft__mem_blob(const weft_mem_t *mem, void **blob, size_t *len);
/* Bounds check shared by weft_put and the proxy: 0 or -EINVAL (logged). */
int weft__put_check(const weft_conn_t *conn, const weft_rmem_t *dst, uint64_t dst_off, const weft_mem_t *src,
		    uint64_t src_off, size_t len);
/* Releases one memory handle / import without touching the user lists. */
void weft__mem_free(weft_mem_t *mem);
void weft__rmem_free(weft_rmem_t *rmem);
/* Teardown used by weft_comm_destroy: every registration and import left. */
void weft__mem_destroy_all(weft_comm_t *comm);

#endif
