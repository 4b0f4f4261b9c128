/* SPDX-License-Identifier: Apache-2.0 */
/* [core] status_socket (status.c): a per-process Unix socket that tells a
 * process of the same user where this one's communicators are; weft-info
 * --where reads it through weft_info_where (info.h). */
#ifndef WEFT_CORE_STATUS_H
#define WEFT_CORE_STATUS_H

/* Starts the socket's thread once per process when [core] status_socket is
 * set; a failure is logged and ignored (diagnostics only). Returns 0. */
int weft__status_start(void);

#endif
