/* SPDX-License-Identifier: Apache-2.0 */
/* Windows (weft_window_register): memory registered by every rank together,
 * found again in the collective calls whose buffers lie in it. */
#ifndef WEFT_CORE_WINDOW_H
#define WEFT_CORE_WINDOW_H

#include <weft/plugin.h>
#include <weft/weft.h>

/* Fills a's send_win/recv_win and offsets from comm's windows (none for
 * broadcast, reduce and send/recv), before the call is signed. */
void weft__window_locate(weft_comm_t *comm, struct weft_coll_args *a);
/* Releases every window of comm (its destroy), while packs still run. */
void weft__window_free_all(weft_comm_t *comm);

#endif
