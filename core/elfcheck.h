/* SPDX-License-Identifier: Apache-2.0 */
/* A plugin file checked before dlopen (elfcheck.c). */
#ifndef WEFT_CORE_ELFCHECK_H
#define WEFT_CORE_ELFCHECK_H

#include <stddef.h>

/* 0 when path is a complete ELF shared object for this machine: its class,
 * byte order and machine match this process, and its program headers, every
 * segment's bytes and its section header table lie within the file.
 * Otherwise a negative code and why filled with a reason fit to follow the
 * file's name ("is truncated: ..."). */
int weft__elf_check(const char *path, char *why, size_t len);

#endif
