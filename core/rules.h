/* SPDX-License-Identifier: Apache-2.0 */
/* The rule grammar that [transport] and [algorithm] share, the size syntax
 * that rules and SIZE parameters accept, and the edit distance behind every
 * "did you mean" suggestion. A leaf above peer.h: config reads rules, never
 * the other way. */
#ifndef WEFT_CORE_RULES_H
#define WEFT_CORE_RULES_H

#include <stddef.h>
#include <stdint.h>

/* Parses a non-negative size: decimal or 0x hex digits, optional blanks, then an
 * optional suffix K, M, G, T (powers of 1024), also KiB/MiB/GiB/TiB, any case,
 * and an optional trailing B ("4KB"). Returns 0 and writes *out, or -EINVAL for
 * anything else (sign, junk, overflow). */
int weft__parse_size(const char *s, uint64_t *out);
/* ---- rules: the grammar [transport] and [algorithm] share ----
 * A rule line is:   <action> <target> [when <cond> [and <cond>]...]
 *   action:  use | prefer | forbid | require
 *   target:  a transport or algorithm name (pack/name for algorithms)
 *   cond:    coll=<collective>[,<collective>...]
 *            size=<lo>..<hi>   (sizes with K/M/G suffixes; either end may be empty)
 *            ranks=<lo>..<hi>
 *            mem=host|cuda|hip[,...]
 *            peer=same-process|same-host|other-host|same-gpu-link[,...]
 *            (same-host also matches same-gpu-link peers, which are on this host)
 * Example:  use algo-host/ring when coll=allreduce and size=1M.. and mem=host
 * Rules are read top to bottom; the first that matches a question answers it. */
enum weft__rule_action { WEFT_RULE_USE, WEFT_RULE_PREFER, WEFT_RULE_FORBID, WEFT_RULE_REQUIRE };

struct weft__rule {
	enum weft__rule_action action;
	char target[64];
	uint32_t colls;      /* bit per enum weft_collective; 0 = any */
	uint64_t size_lo, size_hi; /* inclusive; hi UINT64_MAX = no bound */
	int ranks_lo, ranks_hi;    /* inclusive; hi INT_MAX = no bound */
	uint32_t mem_types;  /* bit per enum weft_mem_type; 0 = any */
	uint32_t peer_classes; /* bit per peer class (peer.h's WEFT__PEER_CLASSES); 0 = any */
	int lineno;
};

/* Parses one rule line. On error returns -WEFT_ERR_CONFIG and writes a message
 * naming the offending word into err. */
int weft__rule_parse(const char *line, struct weft__rule *rule, char *err, size_t errlen);

/* The question a rule answers. Fields left at -1 / 0 match any rule condition. */
struct weft__rule_query {
	int coll;            /* enum weft_collective or -1 */
	uint64_t bytes;
	int nranks;          /* or -1 */
	int mem_type;        /* or -1 */
	int peer_class;      /* or -1 */
};
int weft__rule_matches(const struct weft__rule *rule, const struct weft__rule_query *q);

/* Levenshtein distance, for "did you mean" suggestions everywhere. */
int weft__edit_distance(const char *a, const char *b);

#endif
