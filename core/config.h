/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration: the INI file, the environment and the typed parameters that
 * core and plugins declare; every value keeps its source. Part of the one
 * process-wide object (see registry.h); every function locks internally. */
#ifndef WEFT_CORE_CONFIG_H
#define WEFT_CORE_CONFIG_H

#include <stdio.h>
#include <weft/plugin.h>

#include "cfgtext.h" /* weft__param_env_name */

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

/* After every plugin is loaded: warns once about file sections and keys that
 * nothing declared, with the closest known name ("did you mean ...?"). Sections
 * named in `known_sections` (loaded plugins, core, transport, algorithm) are valid
 * even where no parameter of theirs is declared. */
void weft__config_warn_unknown(const char *const *known_sections, int n);

/* Every declared parameter, sorted as weft__config_print sorts them (section,
 * then key): fills out[0 .. min(count, max)) and returns the count, or
 * -ENOMEM. The strings live until exit. */
struct weft_info_param;
int weft__config_params(struct weft_info_param *out, int max);

/* Prints every declared parameter, one per line: section.key = value (source) and
 * the help text, for weft-info -c. */
void weft__config_print(FILE *out);
/* Every declared parameter set in the file or the environment to a value its
 * type or its bounds refuse is logged (error, file:line or variable, once):
 * -WEFT_ERR_CONFIG when there is one, else 0. */
int weft__config_check_values(void);

/* The core's own parameters, declared at load (core_params.c). */
extern const struct weft_param_decl weft__core_params[];
extern const size_t weft__core_nparams;

/* Raw lines of a rule section ([transport] or [algorithm]), in file order,
 * or the rules of its environment variable (WEFT_TRANSPORT_RULES,
 * WEFT_ALGORITHM_RULES), which replace the file's. Returns the count;
 * *lines and *linenos (file lines, or places in the variable) stay valid
 * until exit. */
int weft__config_section_lines(const char *section, const char *const **lines, const int **linenos);
/* Where that section's rules came from: the variable's name, else the
 * file's path; NULL with neither. */
const char *weft__config_rules_origin(const char *section);

#endif
