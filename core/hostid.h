/* SPDX-License-Identifier: Apache-2.0 */
/* Host and process identity: which ranks share a kernel and network namespace
 * (one "host" for transports), and which share an address space. */
#ifndef WEFT_CORE_HOSTID_H
#define WEFT_CORE_HOSTID_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_HOST_ID_LEN 64 /* bytes, NUL included */

/* "<boot id>-<net namespace inode>": equal strings mean one kernel and one
 * network namespace, so two namespaces of one machine are two hosts. Falls back
 * to the host name when /proc is unreadable (logged once). Writes at most len
 * bytes, always NUL-terminated. Returns 0 or -ENOSPC. Thread safety: any thread. */
int weft__host_id(char *buf, size_t len);

/* A 64-bit identity of this process: host id, pid namespace, pid and start time
 * hashed, so that it is equal only for threads of one process. Computed on each
 * call because a forked child is another process. Thread safety: any thread. */
uint64_t weft__proc_id(void);

#endif
