/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: one sink per process (stderr or WEFT_LOG_FILE), a level from
 * WEFT_LOG_LEVEL, and each line tagged with rank and the plugin that spoke. */
#ifndef WEFT_CORE_LOG_H
#define WEFT_CORE_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <weft/plugin.h>

/* Level in force; reads the environment on first use. Thread safety: any thread. */
int weft__log_level(void);
/* Logs one line tagged with `who` (a plugin name, or NULL for the core). */
void weft__log(enum weft_log_level level, const char *who, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void weft__vlog(enum weft_log_level level, const char *who, const char *fmt, va_list ap);
/* The rank shown in this thread's log lines (-1: none). Set by the core when a
 * thread works for a communicator. */
void weft__log_set_rank(int rank);
int weft__log_get_rank(void);
/* How many error lines this thread has kept for weft_last_error, and a way
 * to keep one without logging it (a call failing for a cause another
 * thread found and logged). */
uint64_t weft__log_errors_kept(void);
void weft__log_keep_error(const char *who, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a level name ("error".."trace", or a digit); -1 if unknown. */
int weft__log_parse_level(const char *s);

#define WEFT_ERROR(...) weft__log(WEFT_LOG_ERROR, NULL, __VA_ARGS__)
#define WEFT_WARN(...) weft__log(WEFT_LOG_WARN, NULL, __VA_ARGS__)
#define WEFT_INFO(...) weft__log(WEFT_LOG_INFO, NULL, __VA_ARGS__)
#define WEFT_DEBUG(...) \
	do { \
		if (weft__log_level() >= WEFT_LOG_DEBUG) \
			weft__log(WEFT_LOG_DEBUG, NULL, __VA_ARGS__); \
	} while (0)
#define WEFT_TRACE(...) \
	do { \
		if (weft__log_level() >= WEFT_LOG_TRACE) \
			weft__log(WEFT_LOG_TRACE, NULL, __VA_ARGS__); \
	} while (0)

#endif
