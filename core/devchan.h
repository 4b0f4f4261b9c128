/* SPDX-License-Identifier: Apache-2.0 */
/* Device channels as the other modules use them: memory a transport allocates
 * in both views, and teardown. */
#ifndef WEFT_CORE_DEVCHAN_H
#define WEFT_CORE_DEVCHAN_H

#include "base.h"

/* Memory of a transport's mem_alloc, both views: host_ptr is NULL for device
 * memory. Tracked like weft_mem_alloc's, freed by weft__devmem_free (or at
 * comm destroy). -ENOTSUP when no transport of comm allocates `type`. */
int weft__devmem_alloc(weft_comm_t *comm, enum weft_mem_type type, size_t bytes, void **host_ptr, void **dev_ptr);
void weft__devmem_free(weft_comm_t *comm, void *host_ptr, void *dev_ptr);
/* Destroys the memory channels the user left and frees what weft_mem_alloc
 * allocated on comm; before the transports close. */
void weft__devchan_destroy_all(weft_comm_t *comm);

#endif
