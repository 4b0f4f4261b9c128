/* SPDX-License-Identifier: Apache-2.0 */
/* Semaphores as the other modules use them: claiming a signal's value, teardown. */
#ifndef WEFT_CORE_SEM_H
#define WEFT_CORE_SEM_H

#include "base.h"

/* Checks that rsem may be signalled on conn and that value exceeds every value
 * claimed before, and claims it. 0 or -EINVAL (logged). */
int weft__rsem_claim(const weft_conn_t *conn, weft_rsem_t *rsem, uint64_t value);
/* Teardown used by weft_comm_destroy: every semaphore, import and pool left. */
void weft__sem_destroy_all(weft_comm_t *comm);

#endif
