/* SPDX-License-Identifier: Apache-2.0 */
/* The rendezvous root: a thread that collects every rank's hello and hands
 * out the peer table, and the process-wide list that finds it to stop it. */
#ifndef WEFT_CORE_BOOTSTRAP_ROOT_H
#define WEFT_CORE_BOOTSTRAP_ROOT_H

#include <stdint.h>

#include "params.h"

struct root;

int weft__bs_root_start(const struct bs_params *p, uint32_t addr_be, uint16_t port, const uint8_t secret[32],
			uint64_t id_nonce, uint16_t *port_out, uint64_t *serial_out);
void weft__bs_root_stop_where(int (*match)(const struct root *, const void *), const void *arg);
int weft__bs_match_serial(const struct root *r, const void *arg);
/* arg: a struct bs_root_key, the id's secret and nonce. */
struct bs_root_key {
	uint8_t secret[32];
	uint64_t id_nonce;
};
int weft__bs_match_key(const struct root *r, const void *arg);

#endif
