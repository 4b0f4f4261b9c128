/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin that needs a symbol nothing defines: dlopen(RTLD_NOW) must refuse it
 * and the registry must quote dlerror(), which names the symbol. */
#include <weft/plugin.h>

extern int rt_symbol_nobody_defines(void);

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	return rt_symbol_nobody_defines() ? NULL : NULL;
}
