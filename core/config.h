/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration: the INI file, the environment and the typed parameters that
 * core and plugins declare; every value keeps its source. Part of the one
 * process-wide object (see registry.h); every function locks internally. */
#ifndef WEFT_CORE_CONFIG_H
#define WEFT_CORE_CONFIG_H

#include <stdio.h>
#include <weft/plugin.h>

/* Loads the config file once: WEFT_CONFIG, else ~/.config/weft/weft.conf, else
 * /etc/weft.conf (a missing default file is not an error; a missing WEFT_CONFIG
 * file is). Returns 0, or -WEFT_ERR_CONFIG after logging "<file>:<line>: <what>".
 * Later calls return the first result. Thread safety: any thread. */
int weft__config_load(void);

/* Path of the file in use, or NULL when none. Valid until exit. */
const char *weft__config_path(void);

/* Declares a parameter (see struct weft_param_decl). owner is who declares it
 * (a plugin name, or "core"), shown by weft-info. Errors: -EEXIST (same section
 * and key, or another parameter that maps to the same environment name),
 * -EINVAL (bad name, or a default that does not parse as its type). */
int weft__param_declare(const char *owner, const struct weft_param_decl *decl);

/* Resolves a declared parameter: environment > file > default. out points to the
 * C type of `type` (int64_t, uint64_t, int, double, const char *). A value that
 * does not parse is logged once, naming the variable or file:line, and the call
 * returns -WEFT_ERR_CONFIG. Errors: -ENOENT (not declared), -EINVAL (type differs). */
int weft__param_get(const char *section, const char *key, enum weft_param_type type, void *out,
		    enum weft_param_source *source);

/* The environment variable name of section/key: WEFT_<SECTION>_<KEY>, upper-cased,
 * '-' as '_'. Writes at most len bytes; returns 0 or -ENOSPC. */
int weft__param_env_name(const char *section, const char *key, char *buf, size_t len);

/* After every plugin is loaded: warns once about file sections and keys that
 * nothing declared, with the closest known name ("did you mean ...?"). Sections
 * named in `known_sections` (loaded plugins, core, transport, algorithm) are valid
 * even where no parameter of theirs is declared. */
void weft__config_warn_unknown(const char *const *known_sections, int n);

/* Prints every declared parameter, one per line: section.key = value (source) and
 * the help text, for weft-info -c. */
void weft__config_print(FILE *out);

/* Raw lines of a rule section ([transport] or [algorithm]), in file order.
 * Returns the count; *lines and *linenos stay valid until exit. */
int weft__config_section_lines(const char *section, const char *const **lines, const int **linenos);

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
	uint32_t peer_classes; /* bit per peer class (topo.h's WEFT__PEER_CLASSES); 0 = any */
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
