/* SPDX-License-Identifier: Apache-2.0 */
/* The services table (struct weft_core_api) the core lends each plugin file,
 * and the core's record of that file (struct weft_plugin). */
#ifndef WEFT_CORE_PLUGIN_API_H
#define WEFT_CORE_PLUGIN_API_H

#include <weft/plugin.h>

/* One per plugin file that reached weft_plugin_init. Never freed: the plugin may
 * keep `api` and `self` for the life of the process. */
struct weft_plugin {
	char tag[64];             /* name its log lines and parameters carry */
	struct weft_core_api api; /* api.self points back here */
	struct weft_plugin *next; /* the registry's list of every record it made */
};

/* Makes the record for one file, tagged `tag` (truncated to fit). Returns 0 or
 * -ENOMEM; *out is written only on success. */
int weft__plugin_api_create(const char *tag, struct weft_plugin **out);

#endif
