/* SPDX-License-Identifier: Apache-2.0 */
/* Which plugin files the registry may load at all ([core] plugins): an
 * excluded file is never dlopen'ed, so nothing it links (and no signal
 * handler or thread its libraries install) enters the process. */
#ifndef WEFT_CORE_PLUGSEL_H
#define WEFT_CORE_PLUGSEL_H

#include <stddef.h>

enum weft__plugsel_mode {
	WEFT_PLUGSEL_ALL = 0,  /* unset or empty: every plugin file found */
	WEFT_PLUGSEL_ONLY = 1, /* "a,b": only these */
	WEFT_PLUGSEL_NOT = 2,  /* "^a,b": all but these */
	WEFT_PLUGSEL_NONE = 3  /* "none": no plugin at all */
};

struct weft__plugsel {
	enum weft__plugsel_mode mode;
	char **names;
	int n;
	int *matched; /* per name: a plugin file of that name was found */
	char *text;   /* the value as given, for messages */
};

/* Reads [core] plugins (env WEFT_CORE_PLUGINS > file > unset). Returns 0, or
 * -WEFT_ERR_CONFIG with the reason logged (a bad name, '^' inside the list,
 * "none" beside names), or -ENOMEM. On error *s allows every plugin. */
int weft__plugsel_load(struct weft__plugsel *s);
/* Whether the plugin file of that name (libweft-<name>.so) may load; notes
 * that the name was seen. */
int weft__plugsel_allows(struct weft__plugsel *s, const char *name);
/* After the scan: a warn line per listed name that no plugin file has, with
 * the closest one seen (names: every file name seen, n of them). */
void weft__plugsel_warn_unmatched(const struct weft__plugsel *s, const char *const *names, int n);
void weft__plugsel_free(struct weft__plugsel *s);

#endif
