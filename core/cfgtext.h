/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's text, without state: names, typed values, the file's
 * lines and near-miss names. config.c keeps the state and the locking. */
#ifndef WEFT_CORE_CFGTEXT_H
#define WEFT_CORE_CFGTEXT_H

#include <stddef.h>
#include <weft/plugin.h>

/* A line longer than this is refused, naming the line: no sane config needs
 * more, and a bounded line keeps every later buffer bounded too. */
#define CFG_LINE_MAX 4096
#define CFG_NAME_MAX 64

/* Whether s is a section or key name: [a-z0-9-] (and '_' when allowed),
 * non-empty, shorter than CFG_NAME_MAX. */
int weft__cfg_valid_name(const char *s, int allow_underscore);

/* The environment variable name of section/key: WEFT_<SECTION>_<KEY>, upper-cased,
 * '-' as '_'. Writes at most len bytes; returns 0 or -ENOSPC. */
int weft__param_env_name(const char *section, const char *key, char *buf, size_t len);

/* Whether the len bytes at name are an environment variable of weft itself or
 * of its tests (WEFT_LOG_LEVEL, WEFT_TEST_..), which no parameter may take. */
int weft__cfg_reserved_env(const char *name, size_t len);

/* "INT", "SIZE", "BOOL", "DOUBLE" or "STRING". */
const char *weft__cfg_type_name(enum weft_param_type t);

/* Parses text as type into out (int64_t, uint64_t, int, double, const char *).
 * Returns 0, or -EINVAL with a short reason in *why. */
int weft__cfg_parse_value(enum weft_param_type type, const char *text, void *out, const char **why);
/* Makes room in *arr (of *cap elements of elem bytes) for need: 0 or -ENOMEM. */
int weft__cfg_grow(void **arr, int *cap, int need, size_t elem);
/* name lower-cased into buf, when that makes it a valid section name and
 * differs from name (for "did you mean"); else NULL. */
const char *weft__cfg_lower_name(const char *name, char *buf, size_t len);
/* A NULL-terminated copy of names (each string copied): 0 or -ENOMEM. */
int weft__cfg_copy_names(const char *const *names, char ***out);
/* Why a value that parsed as type (into v) is still not one a declaration
 * accepts (bounded: min..max; names: one of them), in buf; NULL when it is.
 * An empty string takes the default where names are given. */
const char *weft__cfg_outside(enum weft_param_type type, int bounded, union weft_param_bound min,
			      union weft_param_bound max, char *const *names, const char *text, const void *v, char *buf,
			      size_t len);

/* Cuts an inline comment: '#' or ';' that starts the text or follows a blank,
 * outside double quotes. */
void weft__cfg_strip_comment(char *s);

/* Strips blanks at both ends, in place; returns the first non-blank. */
char *weft__cfg_trim(char *s);

/* The closest of n names to word, or NULL when none is close enough to be a typo. */
const char *weft__cfg_closest(const char *word, const char *const *names, int n);

/* Reads path whole (at most max bytes: -EFBIG beyond) into a malloc'd,
 * NUL-terminated *text of *len bytes. *missing is set when it does not exist,
 * which is not an error for the default locations; *kind is set (and -EINVAL
 * returned) for a path that is no regular file (/dev/null reads as empty).
 * Returns 0 or -errno. */
int weft__cfg_read_file(const char *path, size_t max, char **text, size_t *len, int *missing, const char **kind);

#endif
