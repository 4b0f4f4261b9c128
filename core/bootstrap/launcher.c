/* SPDX-License-Identifier: Apache-2.0 */
/* Launcher environments: rank and size from mpirun, srun or torchrun, and
 * the root and secret from WEFT_CORE_BOOTSTRAP_* or torchrun's MASTER_*. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bootstrap.h"
#include "launcher.h"
#include "params.h"
#include "wire.h"
#include "log.h"
#include "sha256.h"

/* Reads WEFT_CORE_BOOTSTRAP_ROOT (or torchrun's MASTER_ADDR/MASTER_PORT + 1) and
 * the secret into a synthetic id. */
int weft__bs_id_from_env(const struct bs_params *p, struct weft__unique_id_layout *u, int rank)
{
	char host[256], portbuf[16];
	const char *root = p->root;
	char synth[300];
	memset(u, 0, sizeof(*u));
	if (!root) {
		const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
		char *end;
		long port = mp ? strtol(mp, &end, 10) : 0;
		if (!ma || !*ma || !mp || *end || port < 1 || port >= 65535) {
			WEFT_ERROR("bootstrap: no root given: pass a unique id, or set WEFT_CORE_BOOTSTRAP_ROOT=host:port "
				   "(under torchrun, MASTER_ADDR and MASTER_PORT imply MASTER_PORT+1)");
			return -EINVAL;
		}
		/* torchrun's own store listens on MASTER_PORT itself. */
		snprintf(synth, sizeof(synth), "%s:%ld", ma, port + 1);
		root = synth;
		if (rank == 0)
			WEFT_INFO("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT unset; using MASTER_ADDR:MASTER_PORT+1 = %s", root);
	}
	const char *colon = strrchr(root, ':');
	char *end;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;
	if (!colon || colon == root || (size_t)(colon - root) >= sizeof(host) || *end || port < 1 || port > 65535) {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT '%s' is not host:port", root);
		return -WEFT_ERR_CONFIG;
	}
	memcpy(host, root, (size_t)(colon - root));
	host[colon - root] = '\0';
	if (host[0] == '[') {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT '%s': IPv6 is not supported; use an IPv4 address", root);
		return -WEFT_ERR_CONFIG;
	}
	snprintf(portbuf, sizeof(portbuf), "%ld", port);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int gai = getaddrinfo(host, portbuf, &hints, &ai);
	if (gai != 0) {
		WEFT_ERROR("bootstrap: cannot resolve the root host '%s': %s", host, gai_strerror(gai));
		return -EHOSTUNREACH;
	}
	memcpy(u->addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr, 4);
	freeaddrinfo(ai);
	u->magic = ID_MAGIC;
	u->version = WEFT__BOOTSTRAP_VERSION;
	u->family = AF_INET;
	u->port = htons((uint16_t)port);
	if (p->secret) {
		size_t n = strlen(p->secret);
		int hex = n == 64;
		for (size_t i = 0; hex && i < n; i++)
			hex = (p->secret[i] >= '0' && p->secret[i] <= '9') || ((p->secret[i] | 32) >= 'a' && (p->secret[i] | 32) <= 'f');
		if (hex) {
			for (int i = 0; i < 32; i++) {
				unsigned v;
				sscanf(p->secret + 2 * i, "%2x", &v);
				u->secret[i] = (uint8_t)v;
			}
		} else {
			weft__sha256(p->secret, n, u->secret);
		}
		u->has_secret = 1;
	} else if (rank == 0) {
		WEFT_WARN("bootstrap: WEFT_CORE_BOOTSTRAP_SECRET is unset: bootstrap connections are not authenticated; "
			  "anyone who reaches %s can join or disturb this job",
			  root);
	}
	return 0;
}

static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return -ENOENT;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX) {
		WEFT_ERROR("bootstrap: %s='%s' is not a non-negative integer", name, s);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

int weft__bootstrap_env_rank(int *rank, int *nranks)
{
	static const char *const pairs[][2] = {
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
		{"RANK", "WORLD_SIZE"},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		int r, n;
		int rc = env_int(pairs[i][0], &r);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if ((rc = env_int(pairs[i][1], &n)) != 0) {
			if (rc == -ENOENT)
				WEFT_ERROR("bootstrap: %s is set but %s is not", pairs[i][0], pairs[i][1]);
			return -EINVAL;
		}
		if (n < 1 || r >= n) {
			WEFT_ERROR("bootstrap: %s=%d is out of range for %s=%d", pairs[i][0], r, pairs[i][1], n);
			return -EINVAL;
		}
		*rank = r;
		*nranks = n;
		return 0;
	}
	return -ENOENT;
}
