/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin registry: the one process-wide object. It finds libweft-*.so files
 * along the search path, loads them with dlopen, checks their descriptors, and
 * remembers every file it saw, loaded or not, with the reason. */
#ifndef WEFT_CORE_REGISTRY_H
#define WEFT_CORE_REGISTRY_H

#include <stdio.h>
#include <weft/plugin.h>

enum weft__plugin_state {
	WEFT_PLUGIN_LOADED = 0,
	WEFT_PLUGIN_REJECTED = 1, /* reason says why */
	WEFT_PLUGIN_SHADOWED = 2, /* the same name was loaded earlier in the search order */
	WEFT_PLUGIN_EXCLUDED = 3  /* [core] plugins keeps it out: never opened */
};

/* One entry per descriptor loaded, and one per file rejected or shadowed. */
struct weft__plugin_entry {
	enum weft__plugin_state state;
	char *path;       /* the file */
	char *name;       /* descriptor name; NULL when rejected before one was read */
	enum weft_plugin_kind kind;
	unsigned abi_major, abi_minor;
	const void *ops;  /* struct weft_transport_ops / struct weft_algo_ops */
	char *reason;     /* for REJECTED, SHADOWED and EXCLUDED */
	/* The services table lent to the file this came from (e.g. for
	 * weft_algo_comm.core); NULL when its init never ran. */
	const struct weft_core_api *core;
};

/* The functions marked WEFT_API below are test hooks: libweft.so exports them
 * only when built with WEFT_TEST_HOOKS (tests/test_registry.c reaches loaded
 * plugins' ops through them). Tools and bindings use include/weft/info.h. */

/* Loads the config (config.h) and scans the search path once:
 * WEFT_PLUGIN_PATH (colon list), then <dir of libweft.so>/weft/, then the build
 * tree's plugin folder. Idempotent: later calls return the first result.
 * Thread safety: any thread. Returns 0, or the config error. A required plugin
 * ([core] require = a,b) that did not load returns -WEFT_ERR_PLUGIN naming it;
 * the scan still completes, so every entry is there to be shown. */
WEFT_API int weft__registry_load(void);

/* All entries in search order; returns their count. Loads first when nothing
 * was loaded yet. The array and entries are valid until exit. */
WEFT_API int weft__registry_entries(const struct weft__plugin_entry *const **entries);

/* The loaded plugin of that kind and name, or NULL. Loads first when needed. */
const struct weft__plugin_entry *weft__registry_find(enum weft_plugin_kind kind, const char *name);

/* The search path actually used, as a malloc'd colon list (NULL: no memory). */
WEFT_API char *weft__registry_search_path(void);

/* Why weft__registry_load failed, one line per problem, or NULL when it
 * succeeded (or has not run). Valid until exit. */
const char *weft__registry_error(void);


#endif
