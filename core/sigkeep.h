/* SPDX-License-Identifier: Apache-2.0 */
/* Signal dispositions kept across plugin code: the libraries a plugin brings in
 * (libucs, libfabric's providers, libpsm) install handlers for fatal signals
 * and SIGHUP on load, which then outlive any use of them. The core records
 * every disposition before a plugin file is loaded and before a transport is
 * opened, and puts back whatever changed ([core] keep_library_signal_handlers
 * = 1 leaves them). */
#ifndef WEFT_CORE_SIGKEEP_H
#define WEFT_CORE_SIGKEEP_H

#include <signal.h>

#define WEFT__SIGKEEP_N 32 /* the standard signals, 1..31 */

struct weft__sigkeep {
	int on; /* 0: keep_library_signal_handlers is set, nothing is recorded */
	struct sigaction act[WEFT__SIGKEEP_N];
};

/* Records every standard signal's disposition (unless the library handlers
 * are to be kept). */
void weft__sigkeep_save(struct weft__sigkeep *k);

/* Puts back every disposition that changed since save, logging at info what
 * `who` (e.g. "loading plugin /x/libweft-ucx.so") changed. Returns how many. */
int weft__sigkeep_restore(const struct weft__sigkeep *k, const char *who);

#endif
