/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's text: names, values, lines (see cfgtext.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cfgtext.h"
#include "rules.h"

int weft__cfg_valid_name(const char *s, int allow_underscore)
{
	if (!s || !*s || strlen(s) >= CFG_NAME_MAX)
		return 0;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' ||
		      (allow_underscore && *s == '_')))
			return 0;
	return 1;
}

int weft__param_env_name(const char *section, const char *key, char *buf, size_t len)
{
	if (!section || !key || !buf)
		return -EINVAL;
	size_t need = 5 + strlen(section) + 1 + strlen(key) + 1;
	if (need > len)
		return -ENOSPC;
	size_t o = 0;
	memcpy(buf, "WEFT_", 5);
	o = 5;
	for (const char *s = section; *s; s++)
		buf[o++] = *s == '-' ? '_' : (char)toupper((unsigned char)*s);
	buf[o++] = '_';
	for (const char *s = key; *s; s++)
		buf[o++] = *s == '-' ? '_' : (char)toupper((unsigned char)*s);
	buf[o] = '\0';
	return 0;
}


const char *weft__cfg_type_name(enum weft_param_type t)
{
	switch (t) {
	case WEFT_PARAM_INT: return "INT";
	case WEFT_PARAM_SIZE: return "SIZE";
	case WEFT_PARAM_BOOL: return "BOOL";
	case WEFT_PARAM_DOUBLE: return "DOUBLE";
	case WEFT_PARAM_STRING: return "STRING";
	}
	return "?";
}

int weft__cfg_parse_value(enum weft_param_type type, const char *text, void *out, const char **why)
{
	char buf[CFG_LINE_MAX + 1];
	const char *s = text;
	if (type == WEFT_PARAM_STRING) {
		*(const char **)out = text;
		return 0;
	}
	/* Blanks around a number are harmless; environment values keep them. */
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	if (n >= sizeof(buf)) {
		*why = "value too long";
		return -EINVAL;
	}
	memcpy(buf, s, n);
	buf[n] = '\0';
	switch (type) {
	case WEFT_PARAM_INT: {
		const char *p = buf;
		int neg = 0;
		if (*p == '-' || *p == '+')
			neg = *p++ == '-';
		int base = 10;
		if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
			base = 16;
			p += 2;
		}
		/* Decimal or hex only: base 0 would read "010" as octal 8. */
		if (!(base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))) {
			*why = "not an integer";
			return -EINVAL;
		}
		char *end;
		errno = 0;
		unsigned long long u = strtoull(p, &end, base);
		if (*end) {
			*why = "not an integer";
			return -EINVAL;
		}
		if (errno == ERANGE || (!neg && u > (unsigned long long)INT64_MAX) ||
		    (neg && u > (unsigned long long)INT64_MAX + 1ull)) {
			*why = "integer out of range";
			return -EINVAL;
		}
		int64_t v = neg ? (u == (unsigned long long)INT64_MAX + 1ull ? INT64_MIN : -(int64_t)u) : (int64_t)u;
		*(int64_t *)out = v;
		return 0;
	}
	case WEFT_PARAM_SIZE: {
		uint64_t v;
		if (weft__parse_size(buf, &v)) {
			*why = "not a size (a non-negative integer with an optional K, M, G or T suffix)";
			return -EINVAL;
		}
		*(uint64_t *)out = v;
		return 0;
	}
	case WEFT_PARAM_BOOL: {
		static const char *const t[] = {"1", "true", "yes", "on"};
		static const char *const f[] = {"0", "false", "no", "off"};
		for (int i = 0; i < 4; i++) {
			if (strcasecmp(buf, t[i]) == 0) {
				*(int *)out = 1;
				return 0;
			}
			if (strcasecmp(buf, f[i]) == 0) {
				*(int *)out = 0;
				return 0;
			}
		}
		*why = "not a boolean (1/0, true/false, yes/no, on/off)";
		return -EINVAL;
	}
	case WEFT_PARAM_DOUBLE: {
		char *end;
		errno = 0;
		double d = strtod(buf, &end);
		if (!buf[0] || *end || end == buf) {
			*why = "not a number";
			return -EINVAL;
		}
		if (!isfinite(d) || errno == ERANGE) {
			*why = "number out of range";
			return -EINVAL;
		}
		*(double *)out = d;
		return 0;
	}
	default:
		*why = "unknown type";
		return -EINVAL;
	}
}


void weft__cfg_strip_comment(char *s)
{
	int inq = 0;
	for (char *p = s; *p; p++) {
		if (inq && *p == '\\' && p[1]) {
			p++;
			continue;
		}
		if (*p == '"')
			inq = !inq;
		else if (!inq && (*p == '#' || *p == ';') && (p == s || isspace((unsigned char)p[-1]))) {
			*p = '\0';
			return;
		}
	}
}

char *weft__cfg_trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}


const char *weft__cfg_closest(const char *word, const char *const *names, int n)
{
	const char *best = NULL;
	int bestd = INT_MAX;
	for (int i = 0; i < n; i++) {
		int d = weft__edit_distance(word, names[i]);
		if (d < bestd) {
			bestd = d;
			best = names[i];
		}
	}
	int wl = (int)strlen(word);
	if (best && bestd <= (wl > 12 ? 4 : 3) && bestd < wl)
		return best;
	return NULL;
}

/* Environment variables that belong to weft itself or to tests, never to a
 * parameter: the unknown-variable check leaves them alone and no parameter may
 * take their names. */
static const char *const reserved_env[] = {
	"WEFT_LOG_LEVEL", "WEFT_LOG_FILE", "WEFT_CONFIG", "WEFT_PLUGIN_PATH", "WEFT_REQUIRE_GPU",
	"WEFT_REQUIRE_NETNS", "WEFT_TRANSPORT_RULES", "WEFT_ALGORITHM_RULES",
};
static const char *const reserved_env_prefix[] = {"WEFT_TEST_", "WEFT_NCCL_"};

int weft__cfg_reserved_env(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof(reserved_env) / sizeof(reserved_env[0]); i++)
		if (strlen(reserved_env[i]) == len && strncmp(name, reserved_env[i], len) == 0)
			return 1;
	for (size_t i = 0; i < sizeof(reserved_env_prefix) / sizeof(reserved_env_prefix[0]); i++)
		if (strncmp(name, reserved_env_prefix[i], strlen(reserved_env_prefix[i])) == 0)
			return 1;
	return 0;
}

int weft__cfg_copy_names(const char *const *names, char ***out)
{
	int n = 0;
	while (names[n])
		n++;
	char **c = calloc((size_t)n + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		if (!(c[i] = strdup(names[i]))) {
			while (i--)
				free(c[i]);
			free(c);
			return -ENOMEM;
		}
	*out = c;
	return 0;
}

const char *weft__cfg_outside(enum weft_param_type type, int bounded, union weft_param_bound min,
			      union weft_param_bound max, char *const *names, const char *text, const void *v, char *buf,
			      size_t len)
{
	if (names && text && *text) {
		for (char *const *n = names; *n; n++)
			if (strcmp(*n, text) == 0)
				return NULL;
		size_t at = (size_t)snprintf(buf, len, "not one of: ");
		for (char *const *n = names; *n && at < len; n++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", n == names ? "" : ", ", *n);
		return buf;
	}
	if (!bounded)
		return NULL;
	switch (type) {
	case WEFT_PARAM_INT: {
		int64_t x = *(const int64_t *)v;
		if (x >= min.i && x <= max.i)
			return NULL;
		snprintf(buf, len, "outside %lld..%lld", (long long)min.i, (long long)max.i);
		return buf;
	}
	case WEFT_PARAM_SIZE: {
		uint64_t x = *(const uint64_t *)v;
		if (x >= min.u && x <= max.u)
			return NULL;
		snprintf(buf, len, "outside %llu..%llu", (unsigned long long)min.u, (unsigned long long)max.u);
		return buf;
	}
	case WEFT_PARAM_DOUBLE: {
		double x = *(const double *)v;
		if (x >= min.d && x <= max.d)
			return NULL;
		snprintf(buf, len, "outside %g..%g", min.d, max.d);
		return buf;
	}
	default:
		return NULL;
	}
}

int weft__cfg_grow(void **arr, int *cap, int need, size_t elem)
{
	if (need <= *cap)
		return 0;
	int ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	void *p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

const char *weft__cfg_lower_name(const char *name, char *buf, size_t len)
{
	size_t n = 0;
	if (!len)
		return NULL;
	for (; name[n] && n + 1 < len; n++)
		buf[n] = (char)tolower((unsigned char)name[n]);
	buf[n] = '\0';
	return !name[n] && strcmp(buf, name) != 0 && weft__cfg_valid_name(buf, 0) ? buf : NULL;
}

/* What a path that is no regular file is, for the error. */
static const char *file_kind(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m) || S_ISBLK(m))
		return "a device";
	return "no regular file";
}

int weft__cfg_read_file(const char *path, size_t max, char **text, size_t *len, int *missing, const char **kind)
{
	*missing = 0;
	*kind = NULL;
	/* Non-blocking, so that opening a FIFO returns instead of waiting for a
	 * writer; only a regular file is read, and it never blocks. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT || e == ENOTDIR)
			*missing = 1;
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return -e;
	}
	/* /dev/null (device 1,3) is the usual way to say "no file": it reads as empty. */
	int devnull = S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3;
	if (!S_ISREG(st.st_mode) && !devnull) {
		*kind = file_kind(st.st_mode);
		close(fd);
		return -EINVAL;
	}
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		if (n == cap) {
			if (cap >= max) {
				free(buf);
				close(fd);
				return -EFBIG;
			}
			cap *= 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*text = buf;
	*len = n;
	return 0;
}
