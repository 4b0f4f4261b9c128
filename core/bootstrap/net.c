/* SPDX-License-Identifier: Apache-2.0 */
/* Sockets and addresses for the bootstrap: which address a rank binds to,
 * non-blocking listen and connect with retries, and writes bounded by a deadline. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/weft.h>

#include "net.h"
#include "log.h"

double weft__bs_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void weft__bs_fmt_addr(uint32_t addr_be, uint16_t port, char *buf, size_t len)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = {.s_addr = addr_be};
	inet_ntop(AF_INET, &in, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, (unsigned)port);
}

int weft__bs_ms_until(double deadline)
{
	double left = deadline - weft__bs_now_s();
	if (left <= 0)
		return 0;
	if (left > 3600)
		return 3600 * 1000;
	return (int)(left * 1000) + 1;
}

void weft__bs_name_of_fd(int fd, char *buf, size_t len)
{
	struct sockaddr_in a;
	socklen_t sl = sizeof(a);
	if (getpeername(fd, (struct sockaddr *)&a, &sl) == 0 && a.sin_family == AF_INET)
		weft__bs_fmt_addr(a.sin_addr.s_addr, ntohs(a.sin_port), buf, len);
	else
		snprintf(buf, len, "(unknown address)");
}

static int is_loopback(uint32_t addr_be)
{
	return (ntohl(addr_be) >> 24) == 127;
}

static int first_iface_addr(const char *ifname, uint32_t *out)
{
	struct ifaddrs *ifs, *i;
	if (getifaddrs(&ifs) != 0) {
		int err = errno;
		WEFT_ERROR("bootstrap: getifaddrs: %s", strerror(err));
		return -err;
	}
	int rc = -EADDRNOTAVAIL;
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		if (ifname) {
			if (strcmp(i->ifa_name, ifname) != 0)
				continue;
		} else if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK)) {
			continue;
		}
		*out = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
		rc = 0;
		break;
	}
	freeifaddrs(ifs);
	return rc;
}

/* The address this rank binds to; see docs/launching.md for the order.
 * root_be is the root's address, or 0 while making an id. */
int weft__bs_choose_addr(const struct bs_params *p, uint32_t root_be, uint32_t *out)
{
	struct in_addr in;
	if (p->addr) {
		if (inet_pton(AF_INET, p->addr, &in) != 1) {
			WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_ADDR '%s' is not a numeric IPv4 address", p->addr);
			return -WEFT_ERR_CONFIG;
		}
		*out = in.s_addr;
		return 0;
	}
	if (p->ifname) {
		if (first_iface_addr(p->ifname, out) != 0) {
			WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_IFNAME '%s' names no interface with an IPv4 address",
				   p->ifname);
			return -EADDRNOTAVAIL;
		}
		return 0;
	}
	if (root_be && is_loopback(root_be)) {
		*out = htonl(INADDR_LOOPBACK);
		return 0;
	}
	if (root_be) {
		/* The source address of the route to the root is on a network the root
		 * reaches, which the first interface in the list need not be. */
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9), .sin_addr.s_addr = root_be};
			socklen_t len = sizeof(a);
			int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
				 getsockname(fd, (struct sockaddr *)&a, &len) == 0 && a.sin_addr.s_addr != 0;
			close(fd);
			if (ok) {
				*out = a.sin_addr.s_addr;
				return 0;
			}
		}
	}
	if (first_iface_addr(NULL, out) == 0)
		return 0;
	*out = htonl(INADDR_LOOPBACK);
	return 0;
}

int weft__bs_tcp_listen(uint32_t addr_be, uint16_t port, int *fd_out, uint16_t *port_out)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int err = errno;
		WEFT_ERROR("bootstrap: socket: %s", strerror(err));
		return -err;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = addr_be};
	socklen_t len = sizeof(a);
	char name[64];
	weft__bs_fmt_addr(addr_be, port, name, sizeof(name));
	/* A deep backlog: a flood of strangers waits there, costing no descriptor,
	 * and a rank behind them still gets in (the kernel caps it at somaxconn). */
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 4096) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		int err = errno;
		WEFT_ERROR("bootstrap: cannot listen on %s: %s", name, strerror(err));
		close(fd);
		return -err;
	}
	*fd_out = fd;
	*port_out = ntohs(a.sin_port);
	return 0;
}

void weft__bs_tune_socket(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connects with retries until the deadline: the other end may not listen yet. */
int weft__bs_tcp_connect(uint32_t addr_be, uint16_t port, double deadline, int *fd_out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = addr_be};
	int last = ETIMEDOUT;
	do {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
		if (rc != 0 && errno == EINPROGRESS) {
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			int n = poll(&pfd, 1, weft__bs_ms_until(deadline));
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			if (n <= 0) {
				close(fd);
				return -ETIMEDOUT;
			}
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
			rc = soerr ? -1 : 0;
			errno = soerr;
		}
		if (rc == 0) {
			weft__bs_tune_socket(fd);
			*fd_out = fd;
			return 0;
		}
		last = errno;
		close(fd);
		if (last != ECONNREFUSED && last != ECONNRESET && last != ETIMEDOUT && last != EHOSTUNREACH &&
		    last != ENETUNREACH && last != EAGAIN && last != EINTR)
			return -last;
		usleep(50 * 1000);
	} while (weft__bs_now_s() < deadline);
	return last == ECONNREFUSED ? -ETIMEDOUT : -last;
}

int weft__bs_write_all(int fd, const void *buf, size_t len, double deadline)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			struct pollfd pfd = {.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, weft__bs_ms_until(deadline)) == 0)
				return -ETIMEDOUT;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
