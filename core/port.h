/* SPDX-License-Identifier: Apache-2.0 */
/* Port channels as the module above uses them: teardown. */
#ifndef WEFT_CORE_PORT_H
#define WEFT_CORE_PORT_H

#include "base.h"

/* Teardown used by weft_comm_destroy: every port channel left. */
void weft__port_destroy_all(weft_comm_t *comm);

#endif
