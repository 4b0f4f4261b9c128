/* SPDX-License-Identifier: Apache-2.0 */
/* The rule sections of the configuration, from the file or the environment
 * (cfgrules.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "cfgrules.h"
#include "cfgtext.h"
#include "log.h"
#include "rules.h"

struct cfg_rules {
	const char *name, *env;
	const char **lines;
	int *linenos;
	int n, cap;
	int from_env; /* the variable replaced the file's rules */
};

static struct cfg_rules sections[2] = {{.name = "transport", .env = "WEFT_TRANSPORT_RULES"},
				       {.name = "algorithm", .env = "WEFT_ALGORITHM_RULES"}};

static struct cfg_rules *find(const char *name)
{
	for (int i = 0; name && i < 2; i++)
		if (strcmp(sections[i].name, name) == 0)
			return &sections[i];
	return NULL;
}

int weft__cfgrules_is_section(const char *section)
{
	return find(section) != NULL;
}

const char *weft__cfgrules_closest_section(const char *section)
{
	static const char *const names[] = {"transport", "algorithm"};
	return find(section) ? NULL : weft__cfg_closest(section, names, 2);
}

static int add(struct cfg_rules *rs, const char *line, int lineno)
{
	if (rs->n == rs->cap) {
		int cap = rs->cap ? rs->cap * 2 : 8;
		const char **l = realloc(rs->lines, (size_t)cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		rs->lines = l;
		int *ln = realloc(rs->linenos, (size_t)cap * sizeof(*ln));
		if (!ln)
			return -ENOMEM;
		rs->linenos = ln;
		rs->cap = cap;
	}
	char *dup = strdup(line);
	if (!dup)
		return -ENOMEM;
	rs->lines[rs->n] = dup;
	rs->linenos[rs->n++] = lineno;
	return 0;
}

int weft__cfgrules_add(const char *section, const char *line, int lineno)
{
	struct cfg_rules *rs = find(section);
	return rs ? add(rs, line, lineno) : -EINVAL;
}

static void forget(struct cfg_rules *rs)
{
	for (int i = 0; i < rs->n; i++)
		free((void *)rs->lines[i]);
	rs->n = 0;
}

void weft__cfgrules_clear(void)
{
	for (int s = 0; s < 2; s++)
		forget(&sections[s]);
}

/* One section from its variable: every rule is checked; the first bad one
 * fails the whole configuration, as a bad line of the file does. */
static int from_env(struct cfg_rules *rs, const char *value)
{
	char *copy = strdup(value);
	if (!copy)
		return -ENOMEM;
	forget(rs);
	rs->from_env = 1;
	int rc = 0, no = 0;
	/* strsep keeps empty fields, so a rule's number is its place as written. */
	char *rest = copy;
	for (char *tok; rc == 0 && (tok = strsep(&rest, ";")) != NULL;) {
		char *rule = weft__cfg_trim(tok);
		no++;
		if (!*rule)
			continue;
		struct weft__rule r;
		char err[512];
		memset(&r, 0, sizeof(r));
		if (weft__rule_parse(rule, &r, err, sizeof(err)) != 0) {
			WEFT_ERROR("%s, rule %d ('%s'): bad rule in [%s]: %s", rs->env, no, rule, rs->name, err);
			rc = -WEFT_ERR_CONFIG;
		} else {
			rc = add(rs, rule, no);
		}
	}
	free(copy);
	return rc;
}

int weft__cfgrules_from_env(void)
{
	int rc = 0;
	for (int s = 0; s < 2 && rc == 0; s++) {
		const char *v = getenv(sections[s].env);
		if (v)
			rc = from_env(&sections[s], v);
	}
	return rc;
}

int weft__cfgrules_lines(const char *section, const char *const **lines, const int **linenos)
{
	static const char *const no_lines[1] = {NULL};
	static const int no_linenos[1] = {0};
	const struct cfg_rules *rs = find(section);
	int n = rs ? rs->n : 0;
	if (lines)
		*lines = n ? (const char *const *)rs->lines : no_lines;
	if (linenos)
		*linenos = n ? rs->linenos : no_linenos;
	return n;
}

const char *weft__cfgrules_env(const char *section)
{
	const struct cfg_rules *rs = find(section);
	return rs && rs->from_env ? rs->env : NULL;
}

void weft__cfgrules_print(FILE *out, const char *file)
{
	int any = 0;
	for (int s = 0; s < 2; s++) {
		const struct cfg_rules *rs = &sections[s];
		if (rs->n == 0 && !rs->from_env)
			continue;
		if (!any++)
			fprintf(out, "rules:\n");
		if (rs->from_env)
			fprintf(out, "[%s]  (env %s)\n", rs->name, rs->env);
		else
			fprintf(out, "[%s]  (file %s)\n", rs->name, file ? file : "?");
		for (int i = 0; i < rs->n; i++)
			fprintf(out, "  %s %d: %s\n", rs->from_env ? "rule" : "line", rs->linenos[i], rs->lines[i]);
	}
}
