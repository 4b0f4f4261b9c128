/* SPDX-License-Identifier: Apache-2.0 */
/* Who can change a plugin file: the registry refuses one that someone other
 * than root or this process's user can change ([core] plugin_trust). */
#ifndef WEFT_CORE_TRUST_H
#define WEFT_CORE_TRUST_H

#include <stddef.h>
#include <sys/stat.h>

/* 0 when the file at path (fst: its stat), its folder and every folder above
 * may be changed only by root or this user (a folder above may be writable by
 * others with the sticky bit, as /tmp is); else -1 and the reason in why. */
int weft__plugin_trust_check(const char *path, const struct stat *fst, char *why, size_t len);

/* 1 when [core] plugin_trust = relaxed: untrusted files load, with a warning. */
int weft__plugin_trust_relaxed(void);

#endif
