/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap's parameters (timeouts, message limit, root, secret, address),
 * read once per bootstrap from the config module. */
#ifndef WEFT_CORE_BOOTSTRAP_PARAMS_H
#define WEFT_CORE_BOOTSTRAP_PARAMS_H

#include <stdint.h>

struct bs_params {
	double timeout;      /* rendezvous */
	double peer_timeout;
	double hb_interval;
	double hs_timeout;   /* one handshake */
	double stall_warn;   /* 0: off */
	double stall_timeout; /* 0: off */
	uint64_t max_msg;
	const char *root;    /* strings are owned by the config module */
	const char *secret;
	const char *addr;
	const char *ifname;
};

int weft__bs_params_load(struct bs_params *p);

#endif
