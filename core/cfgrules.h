/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's rule sections, [transport] and [algorithm]: their raw
 * rules, from the file or, replacing the file's section, from the
 * environment (WEFT_TRANSPORT_RULES, WEFT_ALGORITHM_RULES: rules in the
 * file's grammar, separated by ';'). No lock of its own: config.c calls it
 * under its lock. */
#ifndef WEFT_CORE_CFGRULES_H
#define WEFT_CORE_CFGRULES_H

#include <stdio.h>

/* Whether section is a rule section. */
int weft__cfgrules_is_section(const char *section);
/* The rule section a misspelt section name is closest to, or NULL. */
const char *weft__cfgrules_closest_section(const char *section);
/* Appends one rule line of the file (already checked by its parser). 0 or -ENOMEM. */
int weft__cfgrules_add(const char *section, const char *line, int lineno);
/* After the file: each section whose variable is set takes the variable's
 * rules instead of the file's, numbered from 1. 0, -WEFT_ERR_CONFIG (a bad
 * rule, logged naming the variable and the rule's number) or -ENOMEM. */
int weft__cfgrules_from_env(void);
/* The section's rules and their numbers (file lines, or positions in the
 * variable); returns how many. The arrays stay valid until exit. */
int weft__cfgrules_lines(const char *section, const char *const **lines, const int **linenos);
/* The variable the section's rules came from, or NULL when from the file. */
const char *weft__cfgrules_env(const char *section);
/* Prints each non-empty section with its source, for weft-info -c. */
void weft__cfgrules_print(FILE *out, const char *file);
/* Forgets the file's rules (a file that failed to parse). */
void weft__cfgrules_clear(void);

#endif
