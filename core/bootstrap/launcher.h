/* SPDX-License-Identifier: Apache-2.0 */
/* What launchers say in the environment: the root (WEFT_CORE_BOOTSTRAP_ROOT,
 * or torchrun's MASTER_ADDR/MASTER_PORT) and the secret, as a synthetic id. */
#ifndef WEFT_CORE_BOOTSTRAP_LAUNCHER_H
#define WEFT_CORE_BOOTSTRAP_LAUNCHER_H

#include "bootstrap.h"
#include "params.h"

int weft__bs_id_from_env(const struct bs_params *p, struct weft__unique_id_layout *u, int rank);

#endif
