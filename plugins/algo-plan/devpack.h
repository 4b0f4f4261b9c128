/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the pack's device half (devpack.c), which runs a plan on CUDA
 * buffers through the device interpreter (dev.cu). pack.c calls it; a build
 * without CUDA gets the stubs at the end of pack.c. */
#ifndef WP_DEVPACK_H
#define WP_DEVPACK_H

#include <weft/plugin.h>

#include "plan.h"

struct wpd_comm;

/* Whether this rank can run the plan on device buffers: a CUDA device, and
 * nvlink to every rank its plan reaches through channels (local, no
 * communication; the ranks then agree). Logs why not at info. */
int wpd_viable(const struct weft_algo_comm *ac, const struct wp_plan *plan, const char *name);

/* Collective: connections, channels, semaphores and the encoded plan. 0 and
 * *out, or a negative code (logged). */
int wpd_setup(const struct weft_algo_comm *ac, const struct wp_plan *plan, enum weft_collective coll,
	      const char *name, struct wpd_comm **out);

/* -ENOTSUP for a device call the interpreter does not run (type, sizes). */
int wpd_supports(struct wpd_comm *d, const struct weft_coll_args *a);

/* Runs one call on a->stream (NULL: complete before returning). */
int wpd_execute(struct wpd_comm *d, const struct weft_coll_args *a);

/* After the comm's last call; NULL is accepted. */
void wpd_teardown(struct wpd_comm *d);

#endif
