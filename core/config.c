/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration: reads the INI file once, keeps every value with its file and
 * line, and resolves declared parameters as environment > file > default.
 * All state is process-wide, kept until exit, and guarded by one mutex. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "cfgtext.h"
#include "config.h"
#include "log.h"
#include "cfgrules.h"
#include "rules.h"

extern char **environ;

/* A bigger file is almost surely the wrong file. */
#define CFG_FILE_MAX (16u << 20)
#define CFG_ENV_MAX 160

/* One key = value line of the file. */
struct cfg_entry {
	char *section;
	char *key;
	char *value;
	int lineno;
};

/* One [section] header (the first, when a section is opened twice). */
struct cfg_section {
	char *name;
	int lineno;
};

struct cfg_param {
	char *owner;
	char *section;
	char *key;
	char *help;
	char *def; /* NULL: unset (strings only) */
	enum weft_param_type type;
	char env[CFG_ENV_MAX];
	int bad_logged;   /* the bad value has been logged once already */
	int bounded;      /* INT, SIZE, DOUBLE: min..max applies (ABI 0.3) */
	union weft_param_bound min, max;
	char **names;     /* STRING: the accepted values, NULL-terminated; NULL: any */
	struct env_copy *env_copy; /* environment strings handed out, newest first */
};

/* A copy of an environment string that get handed out. Copies are chained and
 * never freed: a caller may hold any of them until exit. */
struct env_copy {
	struct env_copy *older;
	char text[];
};

static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;
static int cfg_load_rc;
static char *cfg_path;
static struct cfg_entry *cfg_entries;
static int cfg_nentries, cfg_capentries;
static struct cfg_section *cfg_sections;
static int cfg_nsections, cfg_capsections;
static struct cfg_param *cfg_params;
static int cfg_nparams, cfg_capparams;
static int cfg_warned;

/* ------------------------------------------------------------ small helpers */

/* The value union every reader parses into. */
union cfg_value {
	int64_t i;
	uint64_t u;
	int b;
	double d;
	const char *s;
};

/* The prefix WEFT_<SECTION>_ of a section's variables. */
static void env_prefix(const char *section, char *buf, size_t len)
{
	if (weft__param_env_name(section, "", buf, len))
		buf[0] = '\0';
}

/* ------------------------------------------------------------ declarations */

static struct cfg_param *find_param(const char *section, const char *key)
{
	for (int i = 0; i < cfg_nparams; i++)
		if (strcmp(cfg_params[i].section, section) == 0 && strcmp(cfg_params[i].key, key) == 0)
			return &cfg_params[i];
	return NULL;
}

/* Called with cfg_lock held. */
static int declare_locked(const char *owner, const struct weft_param_decl *decl)
{
	if (!owner || !decl || decl->size < offsetof(struct weft_param_decl, help) + sizeof(decl->help)) {
		WEFT_ERROR("parameter declaration from %s: missing or too small", owner ? owner : "(nobody)");
		return -EINVAL;
	}
	if (!weft__cfg_valid_name(decl->section, 0) || !weft__cfg_valid_name(decl->key, 1)) {
		WEFT_ERROR("%s declares parameter '%s.%s': section must be [a-z0-9-]+ and key [a-z0-9_-]+, "
			   "each under %d characters",
			   owner, decl->section ? decl->section : "(null)", decl->key ? decl->key : "(null)",
			   CFG_NAME_MAX);
		return -EINVAL;
	}
	if ((unsigned)decl->type > WEFT_PARAM_STRING) {
		WEFT_ERROR("%s declares parameter %s.%s with unknown type %d", owner, decl->section, decl->key,
			   (int)decl->type);
		return -EINVAL;
	}
	if (!decl->default_value && decl->type != WEFT_PARAM_STRING) {
		WEFT_ERROR("%s declares parameter %s.%s of type %s without a default (only strings may be unset)",
			   owner, decl->section, decl->key, weft__cfg_type_name(decl->type));
		return -EINVAL;
	}
	if (decl->default_value) {
		union cfg_value v;
		const char *why = "";
		if (weft__cfg_parse_value(decl->type, decl->default_value, &v, &why)) {
			WEFT_ERROR("%s declares parameter %s.%s with default '%s': %s", owner, decl->section,
				   decl->key, decl->default_value, why);
			return -EINVAL;
		}
	}
	char env[CFG_ENV_MAX];
	if (weft__param_env_name(decl->section, decl->key, env, sizeof(env)))
		return -EINVAL; /* cannot happen: names are bounded above */
	if (weft__cfg_reserved_env(env, strlen(env))) {
		WEFT_ERROR("%s declares parameter %s.%s, whose variable %s is reserved by weft", owner,
			   decl->section, decl->key, env);
		return -EINVAL;
	}
	for (int i = 0; i < cfg_nparams; i++) {
		struct cfg_param *p = &cfg_params[i];
		if (strcmp(p->section, decl->section) == 0 && strcmp(p->key, decl->key) == 0) {
			WEFT_ERROR("%s declares parameter %s.%s, already declared by %s", owner, decl->section,
				   decl->key, p->owner);
			return -EEXIST;
		}
		if (strcmp(p->env, env) == 0) {
			WEFT_ERROR("%s declares parameter %s.%s, whose variable %s is already that of %s.%s (declared by %s)",
				   owner, decl->section, decl->key, env, p->section, p->key, p->owner);
			return -EEXIST;
		}
	}
	if (weft__cfg_grow((void **)&cfg_params, &cfg_capparams, cfg_nparams + 1, sizeof(*cfg_params)))
		return -ENOMEM;
	struct cfg_param p;
	memset(&p, 0, sizeof(p));
	p.owner = strdup(owner);
	p.section = strdup(decl->section);
	p.key = strdup(decl->key);
	p.help = strdup(decl->help ? decl->help : "");
	p.def = decl->default_value ? strdup(decl->default_value) : NULL;
	if (!p.owner || !p.section || !p.key || !p.help || (decl->default_value && !p.def))
		goto err_free_strings;
	p.type = decl->type;
	memcpy(p.env, env, sizeof(env));
	if (decl->size >= offsetof(struct weft_param_decl, names) + sizeof(decl->names)) {
		p.bounded = decl->bounded && decl->type != WEFT_PARAM_STRING && decl->type != WEFT_PARAM_BOOL;
		p.min = decl->min;
		p.max = decl->max;
		if (decl->names && decl->type == WEFT_PARAM_STRING && weft__cfg_copy_names(decl->names, &p.names) != 0)
			goto err_free_strings;
	}
	cfg_params[cfg_nparams++] = p;
	return 0;

err_free_strings:
	free(p.owner);
	free(p.section);
	free(p.key);
	free(p.help);
	free(p.def);
	return -ENOMEM;
}

/* ------------------------------------------------------------ the file */

static void cfg_error(const char *path, int lineno, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void cfg_error(const char *path, int lineno, const char *fmt, ...)
{
	char msg[CFG_LINE_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	WEFT_ERROR("%s:%d: %s", path, lineno, msg);
}

static struct cfg_entry *find_entry(const char *section, const char *key)
{
	for (int i = 0; i < cfg_nentries; i++)
		if (strcmp(cfg_entries[i].section, section) == 0 && strcmp(cfg_entries[i].key, key) == 0)
			return &cfg_entries[i];
	return NULL;
}

/* Parses one line (NUL-terminated, no newline). *section is the open section. */
static int parse_line(const char *path, int lineno, char *line, char *section)
{
	weft__cfg_strip_comment(line);
	char *s = weft__cfg_trim(line);
	if (!*s)
		return 0;
	if (*s == '[') {
		char *close = strchr(s, ']');
		if (!close) {
			cfg_error(path, lineno, "bad section header '%s': no closing ']'", s);
			return -WEFT_ERR_CONFIG;
		}
		if (close[1]) {
			cfg_error(path, lineno, "bad section header '%s': text after ']'", s);
			return -WEFT_ERR_CONFIG;
		}
		*close = '\0';
		char *name = weft__cfg_trim(s + 1);
		if (!weft__cfg_valid_name(name, 0)) {
			char low[CFG_NAME_MAX];
			if (weft__cfg_lower_name(name, low, sizeof(low)))
				cfg_error(path, lineno, "bad section header '[%s]': names are lower case; did you mean '[%s]'?",
					  name, low);
			else
				cfg_error(path, lineno, "bad section header '[%s]': names are [a-z0-9-]+", name);
			return -WEFT_ERR_CONFIG;
		}
		snprintf(section, CFG_NAME_MAX, "%s", name);
		for (int i = 0; i < cfg_nsections; i++)
			if (strcmp(cfg_sections[i].name, name) == 0)
				return 0; /* reopened: keys still may not repeat */
		if (weft__cfg_grow((void **)&cfg_sections, &cfg_capsections, cfg_nsections + 1, sizeof(*cfg_sections)))
			return -ENOMEM;
		char *dup = strdup(name);
		if (!dup)
			return -ENOMEM;
		cfg_sections[cfg_nsections].name = dup;
		cfg_sections[cfg_nsections].lineno = lineno;
		cfg_nsections++;
		return 0;
	}
	if (!section[0]) {
		cfg_error(path, lineno, "'%s' is outside any section (start one with [core] or [<plugin>])", s);
		return -WEFT_ERR_CONFIG;
	}
	if (weft__cfgrules_is_section(section)) {
		struct weft__rule rule;
		char err[512];
		memset(&rule, 0, sizeof(rule));
		rule.lineno = lineno;
		if (weft__rule_parse(s, &rule, err, sizeof(err))) {
			cfg_error(path, lineno, "bad rule in [%s]: %s", section, err);
			return -WEFT_ERR_CONFIG;
		}
		return weft__cfgrules_add(section, s, lineno);
	}
	char *eq = strchr(s, '=');
	if (!eq) {
		/* A rule under a misspelt rule section: the mistake is the header. */
		const char *sug = weft__cfgrules_closest_section(section);
		for (int i = 0; sug && i < cfg_nsections; i++)
			if (strcmp(cfg_sections[i].name, section) == 0) {
				cfg_error(path, cfg_sections[i].lineno, "unknown section [%s]; did you mean [%s]? (line %d, "
					  "'%s', is a rule, which only [transport] and [algorithm] take)",
					  section, sug, lineno, s);
				return -WEFT_ERR_CONFIG;
			}
		cfg_error(path, lineno, "expected 'key = value', found '%s'", s);
		return -WEFT_ERR_CONFIG;
	}
	*eq = '\0';
	char *key = weft__cfg_trim(s);
	char *val = weft__cfg_trim(eq + 1);
	if (!*key) {
		cfg_error(path, lineno, "missing key before '='");
		return -WEFT_ERR_CONFIG;
	}
	if (!weft__cfg_valid_name(key, 1)) {
		cfg_error(path, lineno, "bad key '%s': keys are [a-z0-9_-]+", key);
		return -WEFT_ERR_CONFIG;
	}
	if (*val == '"') {
		/* A quoted value keeps its blanks and may hold '#' or ';'; \" and \\ escape. */
		char *w = val, *r = val + 1;
		int closed = 0;
		for (; *r; r++) {
			if (*r == '\\' && (r[1] == '"' || r[1] == '\\')) {
				*w++ = *++r;
				continue;
			}
			if (*r == '"') {
				closed = 1;
				r++;
				break;
			}
			*w++ = *r;
		}
		if (!closed) {
			cfg_error(path, lineno, "unterminated quoted value for '%s'", key);
			return -WEFT_ERR_CONFIG;
		}
		if (*weft__cfg_trim(r)) {
			cfg_error(path, lineno, "text after the closing quote of '%s'", key);
			return -WEFT_ERR_CONFIG;
		}
		*w = '\0';
	}
	struct cfg_entry *old = find_entry(section, key);
	if (old) {
		cfg_error(path, lineno, "duplicate key '%s' in [%s] (first set on line %d)", key, section, old->lineno);
		return -WEFT_ERR_CONFIG;
	}
	if (weft__cfg_grow((void **)&cfg_entries, &cfg_capentries, cfg_nentries + 1, sizeof(*cfg_entries)))
		return -ENOMEM;
	struct cfg_entry e = {strdup(section), strdup(key), strdup(val), lineno};
	if (!e.section || !e.key || !e.value) {
		free(e.section);
		free(e.key);
		free(e.value);
		return -ENOMEM;
	}
	cfg_entries[cfg_nentries++] = e;
	return 0;
}

/* Drops what a failed parse left behind, so that a broken file contributes
 * nothing rather than half of itself. */
static void forget_file(void)
{
	for (int i = 0; i < cfg_nentries; i++) {
		free(cfg_entries[i].section);
		free(cfg_entries[i].key);
		free(cfg_entries[i].value);
	}
	cfg_nentries = 0;
	for (int i = 0; i < cfg_nsections; i++)
		free(cfg_sections[i].name);
	cfg_nsections = 0;
	weft__cfgrules_clear();
}

static int parse_text(const char *path, char *text, size_t len)
{
	char section[CFG_NAME_MAX] = "";
	int lineno = 0;
	size_t pos = 0;
	while (pos < len) {
		lineno++;
		size_t start = pos;
		while (pos < len && text[pos] != '\n')
			pos++;
		size_t end = pos;
		if (pos < len)
			pos++; /* the newline; the last line may lack one */
		if (end > start && text[end - 1] == '\r')
			end--;
		if (end - start > CFG_LINE_MAX) {
			cfg_error(path, lineno, "line is longer than %d bytes", CFG_LINE_MAX);
			return -WEFT_ERR_CONFIG;
		}
		if (memchr(text + start, '\0', end - start)) {
			cfg_error(path, lineno, "NUL byte in line (is this a text file?)");
			return -WEFT_ERR_CONFIG;
		}
		char line[CFG_LINE_MAX + 1];
		memcpy(line, text + start, end - start);
		line[end - start] = '\0';
		int rc = parse_line(path, lineno, line, section);
		if (rc == -ENOMEM)
			cfg_error(path, lineno, "out of memory");
		if (rc)
			return rc == -ENOMEM ? -WEFT_ERR_CONFIG : rc;
	}
	return 0;
}

static void load_once(void)
{
	pthread_mutex_lock(&cfg_lock);
	/* The core's own parameters exist whatever the file says, so that weft-info
	 * can show them even when the file is broken. */
	for (size_t i = 0; i < weft__core_nparams; i++)
		declare_locked("core", &weft__core_params[i]);

	const char *env = getenv("WEFT_CONFIG");
	char home_path[PATH_MAX];
	const char *cands[2];
	int ncands = 0, explicit_file = 0;
	if (env && *env) {
		cands[ncands++] = env;
		explicit_file = 1;
	} else {
		const char *home = getenv("HOME");
		if (home && *home &&
		    (size_t)snprintf(home_path, sizeof(home_path), "%s/.config/weft/weft.conf", home) < sizeof(home_path))
			cands[ncands++] = home_path;
		cands[ncands++] = "/etc/weft.conf";
	}
	int rc = 0;
	for (int i = 0; i < ncands; i++) {
		char *text = NULL;
		size_t len = 0;
		int missing = 0;
		const char *kind;
		int r = weft__cfg_read_file(cands[i], CFG_FILE_MAX, &text, &len, &missing, &kind);
		if (r) {
			if (missing && !explicit_file)
				continue;
			WEFT_ERROR("%s: cannot read config file%s: %s%s", cands[i],
				   explicit_file ? " named by WEFT_CONFIG" : "", kind ? "it is " : "",
				   kind ? kind : r == -EFBIG ? "larger than 16 MiB" : strerror(-r));
			rc = -WEFT_ERR_CONFIG;
			break;
		}
		cfg_path = strdup(cands[i]);
		if (!cfg_path) {
			free(text);
			rc = -ENOMEM;
			break;
		}
		rc = parse_text(cfg_path, text, len);
		free(text);
		if (rc)
			forget_file();
		break;
	}
	/* The environment's rules replace the file's, as its values do. */
	if (rc == 0)
		rc = weft__cfgrules_from_env();
	cfg_load_rc = rc;
	pthread_mutex_unlock(&cfg_lock);
}

int weft__config_load(void)
{
	pthread_once(&cfg_once, load_once);
	return cfg_load_rc;
}

const char *weft__config_path(void)
{
	weft__config_load();
	return cfg_path;
}

const char *weft__config_rules_origin(const char *section)
{
	weft__config_load();
	const char *e = weft__cfgrules_env(section);
	return e ? e : cfg_path;
}

int weft__param_declare(const char *owner, const struct weft_param_decl *decl)
{
	/* Load first, so the core's own parameters are declared before anyone else's. */
	weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	int rc = declare_locked(owner, decl);
	pthread_mutex_unlock(&cfg_lock);
	return rc;
}

/* ------------------------------------------------------------ resolution */

/* Where a parameter's value comes from now, and its text. Lock held. */
static const char *resolve_text(struct cfg_param *p, enum weft_param_source *src, const struct cfg_entry **ent)
{
	const char *e = getenv(p->env);
	*ent = NULL;
	/* An empty variable counts as unset, so that `WEFT_X= cmd` clears nothing by accident. */
	if (e && *e) {
		*src = WEFT_PARAM_SRC_ENV;
		return e;
	}
	const struct cfg_entry *f = find_entry(p->section, p->key);
	if (f) {
		*src = WEFT_PARAM_SRC_FILE;
		*ent = f;
		return f->value;
	}
	*src = WEFT_PARAM_SRC_DEFAULT;
	return p->def;
}

/* Why p's text (from src) is refused, parsing it into v on the way: its type,
 * or, for a value that was set, its declared bounds. NULL when it is fine. */
static const char *bad_value(const struct cfg_param *p, const char *text, enum weft_param_source src,
			     union cfg_value *v, char *buf, size_t len)
{
	const char *why = NULL;
	if (weft__cfg_parse_value(p->type, text, v, &why))
		return why;
	if (src == WEFT_PARAM_SRC_DEFAULT)
		return NULL;
	return weft__cfg_outside(p->type, p->bounded, p->min, p->max, p->names, text, v, buf, len);
}

/* Logs p's refused value once, by its variable or its file and line. */
static void log_bad(struct cfg_param *p, const char *text, enum weft_param_source src, const struct cfg_entry *ent,
		    const char *why)
{
	if (p->bad_logged)
		return;
	p->bad_logged = 1;
	if (src == WEFT_PARAM_SRC_ENV)
		WEFT_ERROR("%s='%s': %s (%s.%s is %s)", p->env, text, why, p->section, p->key,
			   weft__cfg_type_name(p->type));
	else
		WEFT_ERROR("%s:%d: %s = '%s': %s (%s.%s is %s)", cfg_path, ent ? ent->lineno : 0, p->key, text, why,
			   p->section, p->key, weft__cfg_type_name(p->type));
}

int weft__param_get(const char *section, const char *key, enum weft_param_type type, void *out,
		    enum weft_param_source *source)
{
	if (!section || !key || !out)
		return -EINVAL;
	int lrc = weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	int rc = 0;
	struct cfg_param *p = find_param(section, key);
	if (!p) {
		rc = -ENOENT;
		goto out_unlock;
	}
	if (p->type != type) {
		rc = -EINVAL;
		goto out_unlock;
	}
	if (lrc) {
		/* The file is broken (already logged): a value from it would be a guess. */
		rc = lrc;
		goto out_unlock;
	}
	enum weft_param_source src;
	const struct cfg_entry *ent;
	const char *text = resolve_text(p, &src, &ent);
	union cfg_value v;
	const char *why = NULL;
	char wbuf[256];
	if (!text) {
		v.s = NULL; /* an unset string */
	} else if ((why = bad_value(p, text, src, &v, wbuf, sizeof(wbuf))) != NULL) {
		log_bad(p, text, src, ent, why);
		rc = -WEFT_ERR_CONFIG;
		goto out_unlock;
	} else if (type == WEFT_PARAM_STRING && src == WEFT_PARAM_SRC_ENV) {
		/* getenv's string may change under a later setenv; hand out a copy
		 * that lives until exit (old copies are kept, never freed). */
		if (!p->env_copy || strcmp(p->env_copy->text, text) != 0) {
			size_t n = strlen(text) + 1;
			struct env_copy *c = malloc(sizeof(*c) + n);
			if (!c) {
				rc = -ENOMEM;
				goto out_unlock;
			}
			memcpy(c->text, text, n);
			c->older = p->env_copy;
			p->env_copy = c;
		}
		v.s = p->env_copy->text;
	}
	switch (type) {
	case WEFT_PARAM_INT: *(int64_t *)out = v.i; break;
	case WEFT_PARAM_SIZE: *(uint64_t *)out = v.u; break;
	case WEFT_PARAM_BOOL: *(int *)out = v.b; break;
	case WEFT_PARAM_DOUBLE: *(double *)out = v.d; break;
	case WEFT_PARAM_STRING: *(const char **)out = v.s; break;
	}
	if (source)
		*source = src;
out_unlock:
	pthread_mutex_unlock(&cfg_lock);
	return rc;
}

int weft__config_section_lines(const char *section, const char *const **lines, const int **linenos)
{
	weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	int n = weft__cfgrules_lines(section, lines, linenos);
	pthread_mutex_unlock(&cfg_lock);
	return n;
}

/* ------------------------------------------------------------ unknown names */

static int section_known(const char *name, const char *const *known, int n)
{
	static const char *const builtin[] = {"core", "transport", "algorithm"};
	for (int i = 0; i < 3; i++)
		if (strcmp(name, builtin[i]) == 0)
			return 1;
	for (int i = 0; i < n; i++)
		if (known[i] && strcmp(name, known[i]) == 0)
			return 1;
	for (int i = 0; i < cfg_nparams; i++)
		if (strcmp(cfg_params[i].section, name) == 0)
			return 1;
	return 0;
}

/* Every known section name, builtin, given or declared, without repeats. */
static int known_list(const char *const *known, int n, const char ***out)
{
	int cap = 3 + (n > 0 ? n : 0) + cfg_nparams;
	const char **l = malloc((size_t)cap * sizeof(*l));
	if (!l)
		return -ENOMEM;
	int m = 0;
	const char *builtin[] = {"core", "transport", "algorithm"};
	for (int i = 0; i < 3 + n + cfg_nparams; i++) {
		const char *s = i < 3 ? builtin[i] : i < 3 + n ? known[i - 3] : cfg_params[i - 3 - n].section;
		if (!s || !weft__cfg_valid_name(s, 0))
			continue;
		int dup = 0;
		for (int k = 0; k < m; k++)
			dup |= strcmp(l[k], s) == 0;
		if (!dup)
			l[m++] = s;
	}
	*out = l;
	return m;
}

static void warn_env(const char **sections, int nsec)
{
	const char **names = malloc((size_t)(cfg_nparams ? cfg_nparams : 1) * sizeof(*names));
	if (!names)
		return;
	for (char **ep = environ; ep && *ep; ep++) {
		const char *var = *ep;
		const char *eq = strchr(var, '=');
		size_t vlen = eq ? (size_t)(eq - var) : strlen(var);
		if (vlen < 5 || strncmp(var, "WEFT_", 5) != 0 || weft__cfg_reserved_env(var, vlen) || vlen >= CFG_ENV_MAX)
			continue;
		char name[CFG_ENV_MAX];
		memcpy(name, var, vlen);
		name[vlen] = '\0';
		int declared = 0;
		for (int i = 0; i < cfg_nparams && !declared; i++)
			declared = strcmp(cfg_params[i].env, name) == 0;
		/* The longest section prefix wins: WEFT_ALGO_HOST_X is algo-host's. */
		const char *sec = NULL;
		size_t best = 0;
		for (int s = 0; s < nsec; s++) {
			char pre[CFG_ENV_MAX];
			env_prefix(sections[s], pre, sizeof(pre));
			size_t pl = strlen(pre);
			if (pl && pl > best && strncmp(name, pre, pl) == 0) {
				best = pl;
				sec = sections[s];
			}
		}
		if (declared || !sec)
			continue;
		int nn = 0;
		for (int i = 0; i < cfg_nparams; i++)
			if (strcmp(cfg_params[i].section, sec) == 0)
				names[nn++] = cfg_params[i].env;
		if (nn == 0) /* its plugin is not loaded here: unknown, not wrong */
			continue;
		const char *sug = weft__cfg_closest(name, names, nn);
		WEFT_WARN("environment variable %s is not a parameter of [%s]%s%s%s", name, sec,
			  sug ? "; did you mean '" : " (weft-info -c lists them)", sug ? sug : "", sug ? "'?" : "");
	}
	free(names);
}

void weft__config_warn_unknown(const char *const *known_sections, int n)
{
	if (n < 0 || !known_sections)
		n = 0;
	weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	if (cfg_warned)
		goto out_unlock;
	cfg_warned = 1;
	const char **secs;
	int nsec = known_list(known_sections, n, &secs);
	if (nsec < 0)
		goto out_unlock;
	for (int i = 0; i < cfg_nsections; i++) {
		const char *name = cfg_sections[i].name;
		if (section_known(name, known_sections, n))
			continue;
		const char *sug = weft__cfg_closest(name, secs, nsec);
		if (sug)
			WEFT_WARN("%s:%d: unknown section [%s]; did you mean '%s'?", cfg_path, cfg_sections[i].lineno,
				  name, sug);
		else
			WEFT_WARN("%s:%d: unknown section [%s] (no loaded plugin has that name)", cfg_path,
				  cfg_sections[i].lineno, name);
	}
	const char **keys = malloc((size_t)(cfg_nparams ? cfg_nparams : 1) * sizeof(*keys));
	for (int i = 0; keys && i < cfg_nentries; i++) {
		const struct cfg_entry *e = &cfg_entries[i];
		if (!section_known(e->section, known_sections, n) || find_param(e->section, e->key))
			continue;
		int nk = 0;
		for (int k = 0; k < cfg_nparams; k++)
			if (strcmp(cfg_params[k].section, e->section) == 0)
				keys[nk++] = cfg_params[k].key;
		const char *sug = weft__cfg_closest(e->key, keys, nk);
		if (sug)
			WEFT_WARN("%s:%d: unknown key '%s' in [%s]; did you mean '%s'?", cfg_path, e->lineno, e->key,
				  e->section, sug);
		else
			WEFT_WARN("%s:%d: unknown key '%s' in [%s] (weft-info -c lists the parameters)", cfg_path,
				  e->lineno, e->key, e->section);
	}
	free(keys);
	warn_env(secs, nsec);
	free(secs);
out_unlock:
	pthread_mutex_unlock(&cfg_lock);
}

/* ------------------------------------------------------------ printing */

static int param_cmp(const void *a, const void *b)
{
	const struct cfg_param *const *x = a, *const *y = b;
	int c = strcmp((*x)->section, (*y)->section);
	return c ? c : strcmp((*x)->key, (*y)->key);
}

int weft__config_check_values(void)
{
	int lrc = weft__config_load();
	if (lrc)
		return lrc;
	int bad = 0;
	pthread_mutex_lock(&cfg_lock);
	for (int i = 0; i < cfg_nparams; i++) {
		struct cfg_param *p = &cfg_params[i];
		enum weft_param_source src;
		const struct cfg_entry *ent;
		const char *text = resolve_text(p, &src, &ent);
		union cfg_value v;
		char wbuf[256];
		const char *why = text && src != WEFT_PARAM_SRC_DEFAULT ? bad_value(p, text, src, &v, wbuf, sizeof(wbuf))
								       : NULL;
		if (why) {
			bad++;
			log_bad(p, text, src, ent, why);
		}
	}
	pthread_mutex_unlock(&cfg_lock);
	return bad ? -WEFT_ERR_CONFIG : 0;
}

int weft__config_params(struct weft_info_param *out, int max)
{
	weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	int n = cfg_nparams;
	struct cfg_param **sorted = malloc((size_t)(n ? n : 1) * sizeof(*sorted));
	if (!sorted) {
		pthread_mutex_unlock(&cfg_lock);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++)
		sorted[i] = &cfg_params[i];
	qsort(sorted, (size_t)n, sizeof(*sorted), param_cmp);
	/* The strings are the declaration's own copies, never freed. */
	for (int i = 0; out && i < n && i < max; i++)
		out[i] = (struct weft_info_param){.size = sizeof(out[i]),
						  .section = sorted[i]->section,
						  .key = sorted[i]->key,
						  .type = (int)sorted[i]->type,
						  .owner = sorted[i]->owner,
						  .help = sorted[i]->help};
	free(sorted);
	pthread_mutex_unlock(&cfg_lock);
	return n;
}

void weft__config_print(FILE *out)
{
	if (!out)
		return;
	weft__config_load();
	pthread_mutex_lock(&cfg_lock);
	struct cfg_param **sorted = malloc((size_t)(cfg_nparams ? cfg_nparams : 1) * sizeof(*sorted));
	if (!sorted) {
		pthread_mutex_unlock(&cfg_lock);
		return;
	}
	for (int i = 0; i < cfg_nparams; i++)
		sorted[i] = &cfg_params[i];
	qsort(sorted, (size_t)cfg_nparams, sizeof(*sorted), param_cmp);
	const char *last = NULL;
	for (int i = 0; i < cfg_nparams; i++) {
		struct cfg_param *p = sorted[i];
		/* A blank line between sections keeps groups apart for the eye. */
		if (last && strcmp(last, p->section) != 0)
			fputc('\n', out);
		last = p->section;
		enum weft_param_source src;
		const struct cfg_entry *ent;
		const char *text = resolve_text(p, &src, &ent);
		union cfg_value v;
		char wbuf[256];
		const char *why = text ? bad_value(p, text, src, &v, wbuf, sizeof(wbuf)) : NULL;
		int bad = why != NULL;
		fprintf(out, "%s.%s = %s  (", p->section, p->key, text ? text : "(unset)");
		if (src == WEFT_PARAM_SRC_ENV)
			fprintf(out, "env %s", p->env);
		else if (src == WEFT_PARAM_SRC_FILE)
			fprintf(out, "file %s:%d", cfg_path, ent->lineno);
		else
			fprintf(out, "default");
		if (bad)
			fprintf(out, "; INVALID: %s", why);
		fprintf(out, ")\n    %s [%s, %s]\n", p->help, weft__cfg_type_name(p->type), p->owner);
	}
	free(sorted);
	weft__cfgrules_print(out, cfg_path);
	pthread_mutex_unlock(&cfg_lock);
}
