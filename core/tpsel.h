/* SPDX-License-Identifier: Apache-2.0 */
/* Transport choice: the [transport] rules applied to the transports' scores,
 * giving for one peer (class, memory type) the order in which to offer them. */
#ifndef WEFT_CORE_TPSEL_H
#define WEFT_CORE_TPSEL_H

#include <stdio.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "topo.h"

#define WEFT__WHY_MAX 200

/* A transport the choice may take. */
struct weft__tp_cand {
	const char *name;
	const struct weft_transport_ops *ops;
};

/* The order for one question. order[] holds indexes into the candidates, best
 * first; the first `pinned` of them were placed by a use or require rule, so a
 * connection failure there is an error rather than a fall-back. why[k] says
 * why order[k] stands where it does. */
struct weft__tp_plan {
	int n;
	int pinned;
	int order[64];
	char why[64][WEFT__WHY_MAX];
};

/* The [transport] rules as creation reads them: 0, or -WEFT_ERR_CONFIG (logged
 * with file:line) for a rule that does not parse or names no transport. */
int weft__tp_rules_check(void);

/* Applies the rules to candidates c[0..n) for a peer of class cls, buffers of
 * memory type mem, GPUs joined as gl says (may be NULL), on a comm of nranks
 * ranks: forbid rules drop their targets,
 * the first matching require rule leaves only its target, otherwise matching
 * use/prefer rules go first in file order and the rest follow by score (ties by
 * name). Returns 0, -WEFT_ERR_PLUGIN (a matching require rule names a transport
 * that is not among the candidates; logged unless quiet), -WEFT_ERR_CONFIG (it
 * requires a transport that a forbid rule forbids), -EHOSTUNREACH (every
 * candidate is forbidden). Thread safety: any thread. */
int weft__tp_plan(const struct weft__tp_cand *c, int n, enum weft_peer_class cls, enum weft_mem_type mem,
		  const struct weft__gpu_link *gl, int nranks, int quiet, struct weft__tp_plan *plan);

/* The peer class of peer as seen from comm's rank: same-process, then
 * same-gpu-link (same host, GPUs joined by NVLink: topo.h), same-host,
 * other-host. */
enum weft_peer_class weft__peer_class(const weft_comm_t *comm, int peer);

/* At comm creation, on this rank: every require rule that applies to a peer of
 * this comm names a transport that is open. Returns 0, or -WEFT_ERR_PLUGIN
 * with a line naming the transport and the reason (not installed, rejected,
 * did not open) in err. */
int weft__tp_check_required(const weft_comm_t *comm, char *err, size_t errlen);

/* The [transport] rules in force, one "line N: rule" per line, for the
 * consistency check. Returns a malloc'd string (NULL: no memory). */
char *weft__tp_rules_text(void);

/* For weft-info --select (not API): per peer class (or, with a comm and not
 * per_class, per peer), the transport order and why, and the transports left
 * out with the rule that did it. comm may be NULL; then the loaded transports
 * are the candidates and nranks the assumed size; with a comm, its open ones,
 * and those that did not open are listed with why. Returns 0, or the error the first
 * question that has no answer would give a connection (a required transport
 * missing: -WEFT_ERR_PLUGIN; every one forbidden: -EHOSTUNREACH). Thread
 * safety: any thread. */
int weft__tp_print_choices(FILE *out, weft_comm_t *comm, int per_class, int nranks, enum weft_mem_type mem);

#endif
