/* SPDX-License-Identifier: Apache-2.0 */
/* Who can change a plugin file ([core] plugin_trust, trust.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weft/weft.h>

#include "config.h"
#include "log.h"
#include "trust.h"

/* Why st (of what, at path) may be changed by someone other than root or this
 * process's user, or "" when it may not. */
static const char *untrusted(const struct stat *st)
{
	if (st->st_mode & S_IWOTH)
		return "is writable by others";
	if (st->st_mode & S_IWGRP)
		return "is writable by its group";
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return "is owned by neither root nor this process's user";
	return "";
}

/* 0 when the plugin file, its folder and every folder above may be changed
 * only by root or this user (a folder above may be writable by others with
 * the sticky bit, as /tmp is); else the reason, in why. */
int weft__plugin_trust_check(const char *path, const struct stat *fst, char *why, size_t len)
{
	const char *r = untrusted(fst);
	if (*r) {
		snprintf(why, len, "the file %s", r);
		return -1;
	}
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		snprintf(why, len, "its real path cannot be resolved: %s", strerror(errno));
		return -1;
	}
	char *slash = strrchr(real, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	struct stat st;
	if (stat(real[0] ? real : "/", &st) != 0) {
		snprintf(why, len, "its folder cannot be read: %s", strerror(errno));
		return -1;
	}
	if (*(r = untrusted(&st))) {
		snprintf(why, len, "its folder %s %s", real[0] ? real : "/", r);
		return -1;
	}
	/* Above the folder, another user who can write without the sticky bit
	 * can swap the folder itself. */
	while ((slash = strrchr(real, '/')) != NULL) {
		*slash = '\0';
		const char *anc = real[0] ? real : "/";
		if (stat(anc, &st) != 0)
			continue;
		if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
			snprintf(why, len, "the folder %s above it is writable by others without the sticky bit", anc);
			return -1;
		}
		if (!real[0])
			break;
	}
	return 0;
}

/* [core] plugin_trust: strict (refuse what trust_check finds) or relaxed
 * (load it, with a warning). */
int weft__plugin_trust_relaxed(void)
{
	const char *v = NULL;
	if (weft__param_get("core", "plugin_trust", WEFT_PARAM_STRING, &v, NULL) != 0 || !v || !*v)
		return 0;
	if (strcmp(v, "relaxed") == 0)
		return 1;
	if (strcmp(v, "strict") != 0)
		WEFT_WARN("core.plugin_trust = '%s' is neither strict nor relaxed: strict holds", v);
	return 0;
}

