/* SPDX-License-Identifier: Apache-2.0 */
/* Sockets and addresses for the bootstrap: the monotonic clock its deadlines
 * use, choosing the address to bind, listening, connecting, blocking writes. */
#ifndef WEFT_CORE_BOOTSTRAP_NET_H
#define WEFT_CORE_BOOTSTRAP_NET_H

#include <stddef.h>
#include <stdint.h>

#include "params.h"

double weft__bs_now_s(void);
int weft__bs_ms_until(double deadline);
void weft__bs_fmt_addr(uint32_t addr_be, uint16_t port, char *buf, size_t len);
void weft__bs_name_of_fd(int fd, char *buf, size_t len);
int weft__bs_choose_addr(const struct bs_params *p, uint32_t root_be, uint32_t *out);
int weft__bs_tcp_listen(uint32_t addr_be, uint16_t port, int *fd_out, uint16_t *port_out);
void weft__bs_tune_socket(int fd);
int weft__bs_tcp_connect(uint32_t addr_be, uint16_t port, double deadline, int *fd_out);
int weft__bs_write_all(int fd, const void *buf, size_t len, double deadline);

#endif
