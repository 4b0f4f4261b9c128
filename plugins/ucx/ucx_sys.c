/* SPDX-License-Identifier: Apache-2.0 */
/* ucx plugin: the table of UCX calls that decide device memory (struct
 * ucx_sys_ops), pointing at the UCX the plugin is linked with. */
#include "ucx.h"

static const struct ucx_sys_ops ucx_sys_real = {
	.context_query = ucp_context_query,
	.mem_map = ucp_mem_map,
};

const struct ucx_sys_ops *ucx_sys = &ucx_sys_real;

#ifdef WEFT_TEST_HOOKS
void ucx_set_sys_ops(const struct ucx_sys_ops *ops)
{
	ucx_sys = ops ? ops : &ucx_sys_real;
}
#endif
