/* SPDX-License-Identifier: Apache-2.0 */
/* A shared object named like a plugin that exports no weft_plugin_init (here a
 * misspelled one). */
#include <weft/plugin.h>

const struct weft_plugin_desc *const *weft_plugin_initialize(const struct weft_core_api *core);

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_initialize(const struct weft_core_api *core)
{
	return NULL;
}
