/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap's parameters: read and checked from the config module, with
 * the handshake timeout derived from the rendezvous timeout. */
#define _GNU_SOURCE
#include <weft/weft.h>

#include "params.h"
#include "config.h"
#include "log.h"

#define HS_TIMEOUT_MAX 5.0
/* Bounds of the liveness values (seconds); docs/configuration.md states them. */
#define PEER_TIMEOUT_MIN 0.1
#define PEER_TIMEOUT_MAX 86400.0
#define HB_INTERVAL_MIN 0.01

static int param_double(const char *key, double *out)
{
	int rc = weft__param_get("core", key, WEFT_PARAM_DOUBLE, out, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.%s: %s", key, weft_strerror(rc));
		return rc;
	}
	if (!(*out > 0)) {
		char env[96];
		weft__param_env_name("core", key, env, sizeof(env));
		WEFT_ERROR("bootstrap: %s (core.%s) must be a positive number of seconds, not %g", env, key, *out);
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

static int param_string(const char *key, const char **out)
{
	const char *s = NULL;
	int rc = weft__param_get("core", key, WEFT_PARAM_STRING, &s, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.%s: %s", key, weft_strerror(rc));
		return rc;
	}
	*out = s && *s ? s : NULL;
	return 0;
}

int weft__bs_params_load(struct bs_params *p)
{
	int rc = weft__config_load();
	if (rc != 0)
		return rc;
	if ((rc = param_double("bootstrap_timeout", &p->timeout)) || (rc = param_double("peer_timeout", &p->peer_timeout)) ||
	    (rc = param_double("heartbeat_interval", &p->hb_interval)))
		return rc;
	rc = weft__param_get("core", "bootstrap_max_msg", WEFT_PARAM_SIZE, &p->max_msg, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.bootstrap_max_msg: %s", weft_strerror(rc));
		return rc;
	}
	if (p->max_msg < 64) {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_MAX_MSG (%llu) is too small; it must be at least 64 bytes",
			   (unsigned long long)p->max_msg);
		return -WEFT_ERR_CONFIG;
	}
	if ((rc = param_string("bootstrap_root", &p->root)) || (rc = param_string("bootstrap_secret", &p->secret)) ||
	    (rc = param_string("bootstrap_addr", &p->addr)) || (rc = param_string("bootstrap_ifname", &p->ifname)))
		return rc;
	/* Refused, not warned about: a heartbeat so fast it costs a core, a
	 * timeout so long a dead peer holds a job for a day, or a heartbeat that
	 * does not fit three times into the timeout (then one late heartbeat
	 * declares a healthy peer dead). */
	if (p->peer_timeout < PEER_TIMEOUT_MIN || p->peer_timeout > PEER_TIMEOUT_MAX) {
		WEFT_ERROR("bootstrap: core.peer_timeout (WEFT_CORE_PEER_TIMEOUT) is %g s; it must lie in [%g, %g] s",
			   p->peer_timeout, PEER_TIMEOUT_MIN, PEER_TIMEOUT_MAX);
		return -WEFT_ERR_CONFIG;
	}
	if (p->hb_interval < HB_INTERVAL_MIN || p->hb_interval > p->peer_timeout / 3) {
		WEFT_ERROR("bootstrap: core.heartbeat_interval (WEFT_CORE_HEARTBEAT_INTERVAL) is %g s; it must lie in "
			   "[%g, peer_timeout / 3 = %g] s",
			   p->hb_interval, HB_INTERVAL_MIN, p->peer_timeout / 3);
		return -WEFT_ERR_CONFIG;
	}
	/* 0 turns each off; their declared bounds refused the rest. */
	if ((rc = weft__param_get("core", "stall_warn", WEFT_PARAM_DOUBLE, &p->stall_warn, NULL)) ||
	    (rc = weft__param_get("core", "stall_timeout", WEFT_PARAM_DOUBLE, &p->stall_timeout, NULL)))
		return rc;
	/* A stranger's connection must not hold a slot for the whole rendezvous. */
	p->hs_timeout = p->timeout < HS_TIMEOUT_MAX ? p->timeout : HS_TIMEOUT_MAX;
	return 0;
}
