/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: level and sink come from WEFT_LOG_LEVEL and WEFT_LOG_FILE, read once.
 * Lines are written whole with one write(2) so ranks sharing a file interleave
 * by line, not by byte. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level_value = WEFT_LOG_WARN;
static int log_fd = 2;
static _Thread_local int log_rank = -1;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

int weft__log_parse_level(const char *s)
{
	if (!s || !*s)
		return -1;
	if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
		return s[0] - '0';
	for (int i = 0; i <= WEFT_LOG_TRACE; i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return i;
	if (strcasecmp(s, "warning") == 0)
		return WEFT_LOG_WARN;
	return -1;
}

static void log_init(void)
{
	const char *lvl = getenv("WEFT_LOG_LEVEL");
	const char *file = getenv("WEFT_LOG_FILE");
	if (file && *file) {
		/* %p in the name becomes the pid, so each rank can have its own file. */
		char path[4096];
		const char *p = strstr(file, "%p");
		if (p)
			snprintf(path, sizeof(path), "%.*s%d%s", (int)(p - file), file, (int)getpid(), p + 2);
		else
			snprintf(path, sizeof(path), "%s", file);
		int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0)
			log_fd = fd;
		else
			dprintf(2, "weft WARN: cannot open WEFT_LOG_FILE '%s': %s; logging to stderr\n", path,
				strerror(errno));
	}
	if (lvl && *lvl) {
		int l = weft__log_parse_level(lvl);
		if (l < 0)
			dprintf(log_fd, "weft WARN: WEFT_LOG_LEVEL '%s' is not one of error, warn, info, debug, trace; using warn\n",
				lvl);
		else
			log_level_value = l;
	}
}

int weft__log_level(void)
{
	pthread_once(&log_once, log_init);
	return log_level_value;
}

void weft__log_set_rank(int rank)
{
	log_rank = rank;
}

int weft__log_get_rank(void)
{
	return log_rank;
}

/* weft_last_error's: the calling thread's last error line, without the
 * pid and rank prefix. */
static _Thread_local char last_error[1024];
static _Thread_local size_t last_error_len;
static _Thread_local uint64_t errors_kept; /* how many this thread kept */

static void keep_error(const char *who, const char *fmt, va_list ap)
{
	errors_kept++;
	int n = snprintf(last_error, sizeof(last_error), "%s: ", who ? who : "core");
	if (n < 0 || (size_t)n >= sizeof(last_error))
		return;
	int m = vsnprintf(last_error + n, sizeof(last_error) - (size_t)n, fmt, ap);
	last_error_len = (size_t)n + (m > 0 ? (size_t)m : 0);
	/* A message that ends in a newline is kept without it. */
	size_t have = strlen(last_error);
	if (have && last_error[have - 1] == '\n') {
		last_error[have - 1] = '\0';
		last_error_len--;
	}
}

uint64_t weft__log_errors_kept(void)
{
	return errors_kept;
}

void weft__log_keep_error(const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	keep_error(who, fmt, ap);
	va_end(ap);
}

WEFT_API size_t weft_last_error(char *buf, size_t len)
{
	if (buf && len) {
		size_t n = strlen(last_error);
		n = n < len - 1 ? n : len - 1;
		memcpy(buf, last_error, n);
		buf[n] = '\0';
	}
	return last_error_len;
}

void weft__vlog(enum weft_log_level level, const char *who, const char *fmt, va_list ap)
{
	if (level == WEFT_LOG_ERROR) {
		va_list cp;
		va_copy(cp, ap);
		keep_error(who, fmt, cp);
		va_end(cp);
	}
	if ((int)level > weft__log_level())
		return;
	char line[2048];
	int n;
	if (log_rank >= 0)
		n = snprintf(line, sizeof(line), "weft %d:%d %s %s%s", (int)getpid(), log_rank,
			     level_names[level < 0 ? 0 : level > 4 ? 4 : level], who ? who : "core", ": ");
	else
		n = snprintf(line, sizeof(line), "weft %d %s %s%s", (int)getpid(),
			     level_names[level < 0 ? 0 : level > 4 ? 4 : level], who ? who : "core", ": ");
	if (n < 0)
		return;
	if ((size_t)n < sizeof(line)) {
		int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		if (m > 0)
			n += m;
	}
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	if (n > 0 && line[n - 1] == '\n')
		n--;
	line[n++] = '\n';
	ssize_t w = write(log_fd, line, (size_t)n);
	(void)w;
}

void weft__log(enum weft_log_level level, const char *who, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	weft__vlog(level, who, fmt, ap);
	va_end(ap);
}
