/* SPDX-License-Identifier: Apache-2.0 */
/* Collectives: the choice of an algorithm from the loaded algorithm packs
 * (coll.c), for the public calls (calls.c), the core and weft's tools. */
#ifndef WEFT_CORE_COLL_H
#define WEFT_CORE_COLL_H

#include <stdio.h>

#include <weft/plugin.h>
#include <weft/weft.h>

/* Tears down every algorithm state made for comm (the packs' teardown ops) and
 * forgets the comm. weft_comm_destroy must call it first, while connections and
 * memory still work, because packs release what they made through the primitive
 * API. Accepts NULL and comms that never ran a collective.
 * Thread safety: one thread per comm. */
void weft__coll_comm_cleanup(weft_comm_t *comm);
/* Tells each pack set up on comm of window w, registered (reg 1, on every
 * rank in the same order: weft_algo_ops.window_register) or going (reg 0). */
void weft__coll_window(weft_comm_t *comm, const struct weft_algo_window *w, int reg);

/* Runs one collective call (or a fused point-to-point batch) whose arguments
 * are checked: numbers and signs it (args->sig, args->p2p_sig), picks the
 * algorithm, sets it up on first use, executes it. 0 or the error (logged
 * where it is found). Used by calls.c. */
int weft__coll_run(weft_comm_t *comm, struct weft_coll_args *args);

/* The primitive API table lent to packs (weft.h's own functions). */
const struct weft_prim_api *weft__coll_prim_api(void);

/* The memory type of a collective's buffers. Host only for now: the GPU work
 * adds detection through a transport op (pointer attributes). */
enum weft_mem_type weft__coll_mem_type(weft_comm_t *comm, const void *buf);

/* weft-info and bindings reach the next two through include/weft/info.h. */

/* For weft-info --select: per collective, which algorithm each message size from
 * 1 B to 1 GiB (powers of two, coalesced into ranges) would get on a comm of
 * nranks ranks with buffers of memory type mem, and why (the [algorithm] rule
 * and its line, or the priority). Datatype-specific refusals (`supports`) need a
 * communicator and are not shown. Thread safety: any thread. */
void weft__coll_print_choices(FILE *out, int nranks, int nhosts, enum weft_mem_type mem);

/* Runs one collective with fully formed arguments (args->mem_type included), as
 * the public calls do after their checks. A test hook (exported only with
 * WEFT_TEST_HOOKS, see core/CMakeLists.txt), for paths the public calls cannot
 * reach (other memory types). Same errors as the public calls. */
WEFT_API int weft__coll_execute(weft_comm_t *comm, const struct weft_coll_args *args);

/* weft_info_algorithms (include/weft/info.h). */
struct weft_info_algo;
int weft__coll_catalog(struct weft_info_algo *out, int max);

/* "pack/algo" of the algorithm that served the last collective on comm, or NULL
 * when none ran. The string lives until exit. Thread safety: one thread per comm. */
const char *weft__coll_last_algo(weft_comm_t *comm);

#endif
