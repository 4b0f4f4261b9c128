/* SPDX-License-Identifier: Apache-2.0 */
/* [core] plugins: the list of plugin files the registry may load (plugsel.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "cfgtext.h"
#include "config.h"
#include "log.h"
#include "plugsel.h"

static int add_name(struct weft__plugsel *s, const char *name)
{
	char **v = realloc(s->names, (size_t)(s->n + 1) * sizeof(*v));
	int *m = v ? realloc(s->matched, (size_t)(s->n + 1) * sizeof(*m)) : NULL;
	if (v)
		s->names = v;
	if (!v || !m)
		return -ENOMEM;
	s->matched = m;
	if (!(s->names[s->n] = strdup(name)))
		return -ENOMEM;
	s->matched[s->n++] = 0;
	return 0;
}

static int parse(struct weft__plugsel *s, const char *value)
{
	char *copy = strdup(value);
	if (!copy)
		return -ENOMEM;
	char *text = weft__cfg_trim(copy);
	int rc = 0, none = 0;
	if (*text == '^') {
		s->mode = WEFT_PLUGSEL_NOT;
		text++;
	} else {
		s->mode = WEFT_PLUGSEL_ONLY;
	}
	char *save = NULL;
	for (char *tok = strtok_r(text, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
		tok = weft__cfg_trim(tok);
		if (strcmp(tok, "none") == 0) {
			none = 1;
			continue;
		}
		if (!weft__cfg_valid_name(tok, 0)) {
			WEFT_ERROR("core.plugins = '%s': '%s' is not a plugin name ([a-z0-9-]+; '^' only before the "
				   "first, to exclude; 'none' alone)",
				   value, tok);
			rc = -WEFT_ERR_CONFIG;
		} else {
			rc = add_name(s, tok);
		}
	}
	if (rc == 0 && none && (s->n > 0 || s->mode == WEFT_PLUGSEL_NOT)) {
		WEFT_ERROR("core.plugins = '%s': 'none' stands alone", value);
		rc = -WEFT_ERR_CONFIG;
	} else if (rc == 0 && none) {
		s->mode = WEFT_PLUGSEL_NONE;
	} else if (rc == 0 && s->n == 0) {
		WEFT_ERROR("core.plugins = '%s' names no plugin (leave it unset to load every plugin, or say 'none')",
			   value);
		rc = -WEFT_ERR_CONFIG;
	}
	free(copy);
	return rc;
}

int weft__plugsel_load(struct weft__plugsel *s)
{
	memset(s, 0, sizeof(*s));
	const char *v = NULL;
	int rc = weft__param_get("core", "plugins", WEFT_PARAM_STRING, &v, NULL);
	if (rc == 0 && v && *v) {
		if (!(s->text = strdup(v)))
			rc = -ENOMEM;
		else
			rc = parse(s, v);
	}
	if (rc != 0) {
		weft__plugsel_free(s);
		return rc;
	}
	return 0;
}

int weft__plugsel_allows(struct weft__plugsel *s, const char *name)
{
	int listed = 0;
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->names[i], name) == 0) {
			s->matched[i] = 1;
			listed = 1;
		}
	switch (s->mode) {
	case WEFT_PLUGSEL_ONLY: return listed;
	case WEFT_PLUGSEL_NOT: return !listed;
	case WEFT_PLUGSEL_NONE: return 0;
	default: return 1;
	}
}

void weft__plugsel_warn_unmatched(const struct weft__plugsel *s, const char *const *names, int n)
{
	for (int i = 0; i < s->n; i++) {
		if (s->matched[i])
			continue;
		const char *near = weft__cfg_closest(s->names[i], names, n);
		WEFT_WARN("core.plugins = '%s' names '%s', which no plugin file in the search path has%s%s%s", s->text,
			  s->names[i], near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
	}
}

void weft__plugsel_free(struct weft__plugsel *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->names[i]);
	free(s->names);
	free(s->matched);
	free(s->text);
	memset(s, 0, sizeof(*s));
}
