/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers that config.c and rules.c share: the size syntax both the SIZE
 * parameter type and the rule grammar accept. Internal to the config module. */
#ifndef WEFT_CORE_RULES_H
#define WEFT_CORE_RULES_H

#include <stdint.h>

/* Parses a non-negative size: decimal or 0x hex digits, optional blanks, then an
 * optional suffix K, M, G, T (powers of 1024), also KiB/MiB/GiB/TiB, any case,
 * and an optional trailing B ("4KB"). Returns 0 and writes *out, or -EINVAL for
 * anything else (sign, junk, overflow). */
int weft__parse_size(const char *s, uint64_t *out);

#endif
