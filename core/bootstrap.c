/* SPDX-License-Identifier: Apache-2.0 */
/* The bootstrap: a root collects every rank's hello and hands out the peer table;
 * then each pair of ranks holds one authenticated TCP connection, owned by a
 * per-bootstrap service thread that queues messages and watches liveness. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap.h"
#include "config.h"
#include "hostid.h"
#include "log.h"
#include "sha256.h"
#include "le.h"

#define ID_MAGIC 0x31544657u    /* "WFT1" in memory on little-endian hosts */
#define FRAME_MAGIC 0x4d544657u /* "WFTM" */
#define HS_MAGIC 0x48544657u    /* "WFTH" */
#define HDR_LEN 24
#define MAC_LEN WEFT_SHA256_BYTES
#define H1_LEN 48 /* magic, version, id nonce, initiator nonce */
#define H2_LEN 72 /* magic, version, acceptor nonce, acceptor proof */
#define H3_LEN 32 /* initiator proof */
#define HELLO_LEN 92
#define ENTRY_LEN 80
#define TABLE_HDR 16
#define MAX_RANKS (1 << 20)
#define MAX_PENDING 256
#define SMALL_FRAME 4096 /* limit on frames other than peer messages and the table */
#define HS_TIMEOUT_MAX 5.0
#define PUMP_BUDGET (1 << 20) /* bytes read from one link before serving the others */

enum frame_type {
	T_HELLO = 1,  /* rank -> root */
	T_TABLE,      /* root -> rank */
	T_FAIL,       /* root -> rank: the rendezvous cannot complete */
	T_GIVEUP,     /* rank -> root: this rank stops waiting */
	T_PEER_HELLO, /* lower rank -> higher rank */
	T_PEER_ACK,
	T_DATA,
	T_HEARTBEAT,
	T_BYE,
};

/* Message classes keep the collectives' traffic apart from user tags. */
enum { CLS_USER = 0, CLS_ALLGATHER = 1, CLS_BARRIER = 2 };

/* ------------------------------------------------------------ small helpers */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fill_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = getrandom(p, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int err = errno;
			WEFT_ERROR("getrandom: %s", strerror(err));
			return -err;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void fmt_addr(uint32_t addr_be, uint16_t port, char *buf, size_t len)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = {.s_addr = addr_be};
	inet_ntop(AF_INET, &in, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, (unsigned)port);
}

static int ms_until(double deadline)
{
	double left = deadline - now_s();
	if (left <= 0)
		return 0;
	if (left > 3600)
		return 3600 * 1000;
	return (int)(left * 1000) + 1;
}

/* ------------------------------------------------------------- parameters */

struct bs_params {
	double timeout;      /* rendezvous */
	double peer_timeout;
	double hb_interval;
	double hs_timeout;   /* one handshake */
	uint64_t max_msg;
	const char *root;    /* strings are owned by the config module */
	const char *secret;
	const char *addr;
	const char *ifname;
};

static int param_double(const char *key, double *out)
{
	int rc = weft__param_get("core", key, WEFT_PARAM_DOUBLE, out, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.%s: %s", key, weft_strerror(rc));
		return rc;
	}
	if (!(*out > 0)) {
		char env[96];
		weft__param_env_name("core", key, env, sizeof(env));
		WEFT_ERROR("bootstrap: %s (core.%s) must be a positive number of seconds, not %g", env, key, *out);
		return -WEFT_ERR_CONFIG;
	}
	return 0;
}

static int param_string(const char *key, const char **out)
{
	const char *s = NULL;
	int rc = weft__param_get("core", key, WEFT_PARAM_STRING, &s, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.%s: %s", key, weft_strerror(rc));
		return rc;
	}
	*out = s && *s ? s : NULL;
	return 0;
}

static int params_load(struct bs_params *p)
{
	int rc = weft__config_load();
	if (rc != 0)
		return rc;
	if ((rc = param_double("bootstrap_timeout", &p->timeout)) || (rc = param_double("peer_timeout", &p->peer_timeout)) ||
	    (rc = param_double("heartbeat_interval", &p->hb_interval)))
		return rc;
	rc = weft__param_get("core", "bootstrap_max_msg", WEFT_PARAM_SIZE, &p->max_msg, NULL);
	if (rc != 0) {
		if (rc != -WEFT_ERR_CONFIG)
			WEFT_ERROR("bootstrap: cannot read parameter core.bootstrap_max_msg: %s", weft_strerror(rc));
		return rc;
	}
	if (p->max_msg < 64) {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_MAX_MSG (%llu) is too small; it must be at least 64 bytes",
			   (unsigned long long)p->max_msg);
		return -WEFT_ERR_CONFIG;
	}
	if ((rc = param_string("bootstrap_root", &p->root)) || (rc = param_string("bootstrap_secret", &p->secret)) ||
	    (rc = param_string("bootstrap_addr", &p->addr)) || (rc = param_string("bootstrap_ifname", &p->ifname)))
		return rc;
	if (p->hb_interval * 2 > p->peer_timeout)
		WEFT_WARN("bootstrap: heartbeat_interval %g s is more than half of peer_timeout %g s; "
			  "healthy peers may be declared dead",
			  p->hb_interval, p->peer_timeout);
	/* A stranger's connection must not hold a slot for the whole rendezvous. */
	p->hs_timeout = p->timeout < HS_TIMEOUT_MAX ? p->timeout : HS_TIMEOUT_MAX;
	return 0;
}

/* ------------------------------------------------------------- addresses */

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
static int choose_addr(const struct bs_params *p, uint32_t root_be, uint32_t *out)
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

static int tcp_listen(uint32_t addr_be, uint16_t port, int *fd_out, uint16_t *port_out)
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
	fmt_addr(addr_be, port, name, sizeof(name));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 512) != 0 ||
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

static void tune_socket(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connects with retries until the deadline: the other end may not listen yet. */
static int tcp_connect(uint32_t addr_be, uint16_t port, double deadline, int *fd_out)
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
			int n = poll(&pfd, 1, ms_until(deadline));
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
			tune_socket(fd);
			*fd_out = fd;
			return 0;
		}
		last = errno;
		close(fd);
		if (last != ECONNREFUSED && last != ECONNRESET && last != ETIMEDOUT && last != EHOSTUNREACH &&
		    last != ENETUNREACH && last != EAGAIN && last != EINTR)
			return -last;
		usleep(50 * 1000);
	} while (now_s() < deadline);
	return last == ECONNREFUSED ? -ETIMEDOUT : -last;
}

/* ---------------------------------------------------------------- links
 * A link is one TCP connection with its handshake state, keys, sequence
 * numbers and an incremental reader, so one thread can poll many of them. */

struct obuf {
	struct obuf *next;
	size_t len, off;
	uint8_t data[];
};

enum { IN_RAW, IN_HDR, IN_BODY };
enum { HS_H1, HS_H3, HS_FIRST, HS_DONE };

struct link {
	int fd;
	char name[64];   /* remote ip:port, for logs */
	int stage;       /* acceptor handshake stage */
	double deadline; /* for the handshake */
	uint8_t nonce_l[32], nonce_r[32];
	uint8_t key_tx[32], key_rx[32];
	uint64_t seq_tx, seq_rx;
	uint64_t max_len; /* largest payload accepted */
	/* incremental input */
	int in;
	uint8_t raw[H2_LEN];
	size_t raw_need, have;
	uint8_t hdr[HDR_LEN];
	uint8_t *body;
	size_t body_len;
	struct weft__hmac rx_mac; /* fed as the payload arrives, so that verifying a
				   * large message never stalls the other links */
	int eof;
	char why[200];
	double last_rx;
	/* output queue: the owner thread writes it; others append under a lock */
	struct obuf *oq_head, *oq_tail;
};

struct frame {
	int type, cls;
	uint32_t tag;
	uint8_t *buf; /* payload (malloc'd, with the MAC after it), owned by the receiver */
	size_t len;
};

static struct link *link_new(int fd, const char *name, uint64_t max_len)
{
	struct link *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->fd = fd;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->max_len = max_len;
	l->in = IN_HDR;
	l->last_rx = now_s();
	return l;
}

static void oq_free(struct link *l)
{
	while (l->oq_head) {
		struct obuf *b = l->oq_head;
		l->oq_head = b->next;
		free(b);
	}
	l->oq_tail = NULL;
}

static void link_free(struct link *l)
{
	if (!l)
		return;
	if (l->fd >= 0)
		close(l->fd);
	free(l->body);
	oq_free(l);
	free(l);
}

static void name_of_fd(int fd, char *buf, size_t len)
{
	struct sockaddr_in a;
	socklen_t sl = sizeof(a);
	if (getpeername(fd, (struct sockaddr *)&a, &sl) == 0 && a.sin_family == AF_INET)
		fmt_addr(a.sin_addr.s_addr, ntohs(a.sin_port), buf, len);
	else
		snprintf(buf, len, "(unknown address)");
}

/* Frames are built in two steps. frame_build copies the payload and feeds header
 * and payload to the HMAC: the expensive part, done by the sending thread with
 * no lock held. frame_seal appends the link's next sequence number to the MAC
 * and finishes it: cheap, and done under the lock that also queues the frame,
 * so sequence order is queue order. The sequence number makes a replayed,
 * dropped or reordered frame fail:
 *   MAC = HMAC-SHA256(direction key, header | payload | u64 sequence) */
static struct obuf *frame_build(const struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n,
				struct weft__hmac *mac)
{
	struct obuf *b = malloc(sizeof(*b) + HDR_LEN + n + MAC_LEN);
	if (!b)
		return NULL;
	b->next = NULL;
	b->len = HDR_LEN + n + MAC_LEN;
	b->off = 0;
	uint8_t *h = b->data;
	put32(h, FRAME_MAGIC);
	put16(h + 4, (uint16_t)type);
	put16(h + 6, (uint16_t)cls);
	put32(h + 8, tag);
	put32(h + 12, 0);
	put64(h + 16, n);
	if (n)
		memcpy(h + HDR_LEN, p, n);
	weft__hmac_init(mac, l->key_tx, 32);
	weft__hmac_update(mac, h, HDR_LEN + n);
	return b;
}

static void frame_seal(struct link *l, struct obuf *b, struct weft__hmac *mac)
{
	uint8_t s8[8];
	put64(s8, l->seq_tx++);
	weft__hmac_update(mac, s8, sizeof(s8));
	weft__hmac_final(mac, b->data + b->len - MAC_LEN);
}

/* Both steps at once, for a link only the calling thread uses. */
static struct obuf *frame_make(struct link *l, int type, int cls, uint32_t tag, const void *p, size_t n)
{
	struct weft__hmac mac;
	struct obuf *b = frame_build(l, type, cls, tag, p, n, &mac);
	if (b)
		frame_seal(l, b, &mac);
	return b;
}

static void oq_push(struct link *l, struct obuf *b)
{
	if (l->oq_tail)
		l->oq_tail->next = b;
	else
		l->oq_head = b;
	l->oq_tail = b;
}

/* Writes what the socket takes now. Returns 0, or -errno when the link broke. */
static int oq_flush(struct link *l)
{
	while (l->oq_head) {
		struct obuf *b = l->oq_head;
		ssize_t n = send(l->fd, b->data + b->off, b->len - b->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		b->off += (size_t)n;
		if (b->off == b->len) {
			l->oq_head = b->next;
			if (!l->oq_head)
				l->oq_tail = NULL;
			free(b);
		}
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len, double deadline)
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
			if (poll(&pfd, 1, ms_until(deadline)) == 0)
				return -ETIMEDOUT;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_frame_now(struct link *l, int type, uint32_t tag, const void *p, size_t n, double deadline)
{
	struct obuf *b = frame_make(l, type, CLS_USER, tag, p, n);
	if (!b)
		return -ENOMEM;
	int rc = write_all(l->fd, b->data, b->len, deadline);
	free(b);
	return rc;
}

/* Reads what is available without blocking. Returns 1 when the raw handshake
 * message or a frame is complete (a frame lands in *f), 0 when the socket has
 * no more for now, -1 when the link is broken or misbehaved (l->why says how).
 * Never reads past the current item, so a blocking caller can hand the socket
 * over to a poll loop between frames. */
static int link_pump(struct link *l, struct frame *f)
{
	size_t budget = PUMP_BUDGET;
	for (;;) {
		uint8_t *dst;
		size_t want;
		if (l->in == IN_RAW) {
			dst = l->raw + l->have;
			want = l->raw_need - l->have;
		} else if (l->in == IN_HDR) {
			dst = l->hdr + l->have;
			want = HDR_LEN - l->have;
		} else {
			dst = l->body + l->have;
			want = l->body_len + MAC_LEN - l->have;
		}
		ssize_t n = recv(l->fd, dst, want, MSG_DONTWAIT);
		if (n == 0) {
			l->eof = 1;
			snprintf(l->why, sizeof(l->why), "closed the connection");
			return -1;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			snprintf(l->why, sizeof(l->why), "recv: %s", strerror(errno));
			return -1;
		}
		l->last_rx = now_s();
		if (l->in == IN_BODY && l->have < l->body_len) {
			size_t pay = (size_t)n < l->body_len - l->have ? (size_t)n : l->body_len - l->have;
			weft__hmac_update(&l->rx_mac, dst, pay);
		}
		l->have += (size_t)n;
		if ((size_t)n < want) {
			/* Come back on the next poll round: it reports the rest at once. */
			if ((size_t)n >= budget)
				return 0;
			budget -= (size_t)n;
			continue;
		}
		l->have = 0;
		if (l->in == IN_RAW)
			return 1;
		if (l->in == IN_HDR) {
			uint64_t len = get64(l->hdr + 16);
			if (get32(l->hdr) != FRAME_MAGIC) {
				snprintf(l->why, sizeof(l->why), "sent garbage (bad frame magic 0x%08x)", get32(l->hdr));
				return -1;
			}
			/* Checked before allocating: the length comes from the wire, and the
			 * MAC that would vouch for it arrives only after the payload. The
			 * limit holds whatever WEFT_CORE_BOOTSTRAP_MAX_MSG says: past
			 * SIZE_MAX - MAC_LEN, len + MAC_LEN wraps to a small allocation. */
			uint64_t limit = l->max_len < SIZE_MAX - MAC_LEN ? l->max_len : SIZE_MAX - MAC_LEN;
			if (len > limit) {
				snprintf(l->why, sizeof(l->why),
					 "announced a %llu-byte message, more than the %llu bytes allowed here "
					 "(peer messages: WEFT_CORE_BOOTSTRAP_MAX_MSG)",
					 (unsigned long long)len, (unsigned long long)limit);
				return -1;
			}
			l->body = malloc((size_t)len + MAC_LEN);
			if (!l->body) {
				snprintf(l->why, sizeof(l->why), "no memory for a %llu-byte message",
					 (unsigned long long)len);
				return -1;
			}
			l->body_len = (size_t)len;
			l->in = IN_BODY;
			weft__hmac_init(&l->rx_mac, l->key_rx, 32);
			weft__hmac_update(&l->rx_mac, l->hdr, HDR_LEN);
			continue;
		}
		uint8_t mac[MAC_LEN];
		uint8_t s8[8];
		put64(s8, l->seq_rx);
		weft__hmac_update(&l->rx_mac, s8, sizeof(s8));
		weft__hmac_final(&l->rx_mac, mac);
		if (!weft__ct_equal(mac, l->body + l->body_len, MAC_LEN)) {
			snprintf(l->why, sizeof(l->why),
				 "sent a message that failed authentication (wrong secret, tampered or replayed)");
			return -1;
		}
		l->seq_rx++;
		f->type = get16(l->hdr + 4);
		f->cls = get16(l->hdr + 6);
		f->tag = get32(l->hdr + 8);
		f->buf = l->body;
		f->len = l->body_len;
		l->body = NULL;
		l->in = IN_HDR;
		return 1;
	}
}

/* Blocking form of link_pump: 1 done, -1 broken, -ETIMEDOUT at the deadline. */
static int link_wait(struct link *l, struct frame *f, double deadline)
{
	for (;;) {
		int rc = link_pump(l, f);
		if (rc != 0)
			return rc;
		struct pollfd pfd = {.fd = l->fd, .events = POLLIN};
		int ms = ms_until(deadline);
		if (ms == 0 || poll(&pfd, 1, ms) == 0) {
			snprintf(l->why, sizeof(l->why), "timed out");
			return -ETIMEDOUT;
		}
	}
}

/* ------------------------------------------------------------ handshake
 * Challenge-response both ways with HMAC-SHA256 keyed by the job secret:
 *   initiator -> H1 {magic, version, id nonce, Ni}
 *   acceptor  -> H2 {magic, version, Na, HMAC(s, "acceptor"|id|Ni|Na)}
 *   initiator -> H3 {HMAC(s, "initiator"|id|Ni|Na)}
 * Each direction then MACs frames with its own key derived from both nonces,
 * so no frame of one connection or direction is valid in another. */

static void hs_mac(const uint8_t secret[32], const char *label, uint64_t id_nonce, const uint8_t ni[32],
		   const uint8_t na[32], uint8_t out[32])
{
	struct weft__hmac h;
	uint8_t n8[8];
	put64(n8, id_nonce);
	weft__hmac_init(&h, secret, 32);
	weft__hmac_update(&h, label, strlen(label) + 1);
	weft__hmac_update(&h, n8, sizeof(n8));
	weft__hmac_update(&h, ni, 32);
	weft__hmac_update(&h, na, 32);
	weft__hmac_final(&h, out);
}

static void hs_keys(struct link *l, const uint8_t secret[32], uint64_t id_nonce, const uint8_t ni[32],
		    const uint8_t na[32], int initiator)
{
	uint8_t i2a[32], a2i[32];
	hs_mac(secret, "weft-key-i2a", id_nonce, ni, na, i2a);
	hs_mac(secret, "weft-key-a2i", id_nonce, ni, na, a2i);
	memcpy(l->key_tx, initiator ? i2a : a2i, 32);
	memcpy(l->key_rx, initiator ? a2i : i2a, 32);
	l->seq_tx = l->seq_rx = 0;
	l->in = IN_HDR;
	l->have = 0;
}

/* The connecting side; blocks until the deadline. Logs nothing: the caller
 * knows what the other end was meant to be. */
static int hs_initiate(struct link *l, const uint8_t secret[32], uint64_t id_nonce, double deadline)
{
	uint8_t m[H2_LEN];
	int rc = fill_random(l->nonce_l, 32);
	if (rc)
		return rc;
	put32(m, HS_MAGIC);
	put32(m + 4, WEFT__BOOTSTRAP_VERSION);
	put64(m + 8, id_nonce);
	memcpy(m + 16, l->nonce_l, 32);
	if ((rc = write_all(l->fd, m, H1_LEN, deadline)) != 0) {
		snprintf(l->why, sizeof(l->why), "send: %s", strerror(-rc));
		return rc;
	}
	l->in = IN_RAW;
	l->raw_need = H2_LEN;
	l->have = 0;
	rc = link_wait(l, NULL, deadline);
	if (rc != 1) {
		if (l->eof)
			snprintf(l->why, sizeof(l->why),
				 "closed the connection during the handshake (another job, another weft version, or "
				 "a wrong secret: see that side's log)");
		return rc == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	}
	if (get32(l->raw) != HS_MAGIC) {
		snprintf(l->why, sizeof(l->why), "is not a weft bootstrap endpoint");
		return -WEFT_ERR_PROTOCOL;
	}
	if (get32(l->raw + 4) != WEFT__BOOTSTRAP_VERSION) {
		snprintf(l->why, sizeof(l->why), "speaks bootstrap protocol %u, this process %u",
			 get32(l->raw + 4), WEFT__BOOTSTRAP_VERSION);
		return -WEFT_ERR_MISMATCH;
	}
	memcpy(l->nonce_r, l->raw + 8, 32);
	uint8_t mac[32];
	hs_mac(secret, "weft-acceptor", id_nonce, l->nonce_l, l->nonce_r, mac);
	if (!weft__ct_equal(mac, l->raw + 40, 32)) {
		snprintf(l->why, sizeof(l->why), "does not hold this job's secret (failed authentication)");
		return -WEFT_ERR_AUTH;
	}
	hs_mac(secret, "weft-initiator", id_nonce, l->nonce_l, l->nonce_r, mac);
	if ((rc = write_all(l->fd, mac, H3_LEN, deadline)) != 0) {
		snprintf(l->why, sizeof(l->why), "send: %s", strerror(-rc));
		return rc;
	}
	hs_keys(l, secret, id_nonce, l->nonce_l, l->nonce_r, 1);
	return 0;
}

static void pending_start(struct link *l, double hs_timeout)
{
	l->stage = HS_H1;
	l->in = IN_RAW;
	l->raw_need = H1_LEN;
	l->have = 0;
	l->deadline = now_s() + hs_timeout;
}

/* Advances an accepted connection that has not yet identified itself.
 * Returns 1 when its first frame arrived (in *f), 0 to keep waiting, -1 to
 * drop it (l->why says why). Never blocks. */
static int pending_step(struct link *l, const uint8_t secret[32], uint64_t id_nonce, struct frame *f)
{
	for (;;) {
		int rc = link_pump(l, f);
		if (rc <= 0) {
			if (rc < 0 && l->eof && l->stage == HS_H1)
				snprintf(l->why, sizeof(l->why), "closed the connection before the handshake");
			return rc;
		}
		if (l->stage == HS_FIRST) {
			l->stage = HS_DONE;
			return 1;
		}
		if (l->stage == HS_H1) {
			if (get32(l->raw) != HS_MAGIC) {
				snprintf(l->why, sizeof(l->why), "sent garbage (not a weft bootstrap handshake)");
				return -1;
			}
			if (get32(l->raw + 4) != WEFT__BOOTSTRAP_VERSION) {
				snprintf(l->why, sizeof(l->why), "speaks bootstrap protocol %u, this process %u",
					 get32(l->raw + 4), WEFT__BOOTSTRAP_VERSION);
				return -1;
			}
			if (get64(l->raw + 8) != id_nonce) {
				snprintf(l->why, sizeof(l->why), "belongs to another job (its unique id differs)");
				return -1;
			}
			memcpy(l->nonce_r, l->raw + 16, 32);
			if (fill_random(l->nonce_l, 32) != 0) {
				snprintf(l->why, sizeof(l->why), "getrandom failed");
				return -1;
			}
			uint8_t m[H2_LEN];
			put32(m, HS_MAGIC);
			put32(m + 4, WEFT__BOOTSTRAP_VERSION);
			memcpy(m + 8, l->nonce_l, 32);
			hs_mac(secret, "weft-acceptor", id_nonce, l->nonce_r, l->nonce_l, m + 40);
			/* 72 bytes into a fresh socket's empty buffer: never partial. */
			if (send(l->fd, m, H2_LEN, MSG_DONTWAIT | MSG_NOSIGNAL) != H2_LEN) {
				snprintf(l->why, sizeof(l->why), "could not be answered (%s)", strerror(errno));
				return -1;
			}
			l->stage = HS_H3;
			l->raw_need = H3_LEN;
			continue;
		}
		/* HS_H3 */
		uint8_t mac[32];
		hs_mac(secret, "weft-initiator", id_nonce, l->nonce_r, l->nonce_l, mac);
		if (!weft__ct_equal(mac, l->raw, 32)) {
			snprintf(l->why, sizeof(l->why), "failed authentication (wrong secret)");
			return -1;
		}
		hs_keys(l, secret, id_nonce, l->nonce_r, l->nonce_l, 0);
		l->stage = HS_FIRST;
	}
}

static void pending_timeout_why(struct link *l, double hs_timeout)
{
	const char *what = l->stage == HS_H1 && l->have == 0 ? "sent nothing"
			   : l->stage == HS_FIRST                ? "sent no hello after the handshake"
								 : "did not complete the handshake";
	snprintf(l->why, sizeof(l->why), "%s within %.1f s", what, hs_timeout);
}

/* ------------------------------------------------------------- the root */

struct root {
	struct root *next; /* in the process-wide list */
	uint64_t serial;
	int lfd;
	int wake_fd;
	char name[64];
	uint8_t secret[32];
	uint64_t id_nonce;
	double hs_timeout;
	int nranks;
	int arrived;
	struct link **ranks; /* by rank, after its hello */
	uint8_t (*hellos)[HELLO_LEN];
	struct link *pending[MAX_PENDING];
	int npending;
	int stop;
	sem_t *started; /* posted once the thread has set itself up; see root_start */
};

/* The roots this process serves. The only process-wide state of the bootstrap:
 * a root outlives the call that made its id, and weft__bootstrap_root_stop must
 * find it. */
static pthread_mutex_t roots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct root *roots;
static uint64_t roots_serial;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void roots_prepare(void)
{
	pthread_mutex_lock(&roots_mu);
}
static void roots_parent(void)
{
	pthread_mutex_unlock(&roots_mu);
}
static void roots_child(void)
{
	/* A root's thread does not exist in the child: forget the list. */
	pthread_mutex_init(&roots_mu, NULL);
	roots = NULL;
}
static void atfork_init(void)
{
	pthread_atfork(roots_prepare, roots_parent, roots_child);
}

static void root_free(struct root *r)
{
	if (r->lfd >= 0)
		close(r->lfd);
	if (r->wake_fd >= 0)
		close(r->wake_fd);
	for (int i = 0; i < r->npending; i++)
		link_free(r->pending[i]);
	if (r->ranks)
		for (int i = 0; i < r->nranks; i++)
			link_free(r->ranks[i]);
	free(r->ranks);
	free(r->hellos);
	free(r);
}

static void send_fail(struct link *l, int err, const char *text, double deadline)
{
	uint8_t m[260];
	size_t n = strlen(text);
	if (n > sizeof(m) - 4)
		n = sizeof(m) - 4;
	put32(m, (uint32_t)err);
	memcpy(m + 4, text, n);
	send_frame_now(l, T_FAIL, 0, m, 4 + n, deadline);
}

static void missing_list(struct root *r, char *buf, size_t len)
{
	size_t o = 0;
	int listed = 0, missing = 0;
	buf[0] = '\0';
	for (int i = 0; i < r->nranks; i++) {
		if (r->ranks[i])
			continue;
		missing++;
		if (listed < 16 && o < len) {
			int n = snprintf(buf + o, len - o, "%s%d", listed ? "," : "", i);
			if (n > 0)
				o += (size_t)n;
			listed++;
		}
	}
	if (missing > listed && o < len)
		snprintf(buf + o, len - o, ",... (%d in all)", missing);
}

/* A registered rank left before the table went out: nobody can complete, so
 * every other rank hears why at once instead of waiting for its own timeout. */
static void root_abandon(struct root *r, int who, int err, const char *why)
{
	char missing[160], text[256];
	missing_list(r, missing, sizeof(missing));
	WEFT_WARN("bootstrap root %s: rank %d (%s) %s before all %d ranks arrived; missing ranks: %s; "
		  "ending this rendezvous",
		  r->name, who, r->ranks[who]->name, why, r->nranks, missing[0] ? missing : "none");
	snprintf(text, sizeof(text), "rank %d %s before all %d ranks arrived (missing ranks: %s)", who, why, r->nranks,
		 missing[0] ? missing : "none");
	double deadline = now_s() + 1.0;
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i] && i != who)
			send_fail(r->ranks[i], err, text, deadline);
}

static void root_refuse(struct root *r, struct link *l, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void root_refuse(struct root *r, struct link *l, int err, const char *fmt, ...)
{
	char text[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	WEFT_WARN("bootstrap root %s: refusing %s: %s", r->name, l->name, text);
	send_fail(l, err, text, now_s() + 0.5);
	link_free(l);
}

/* A hello arrived on a pending connection: register the rank or refuse it. */
static void root_hello(struct root *r, struct link *l, const struct frame *f)
{
	if (f->type != T_HELLO || f->len != HELLO_LEN) {
		root_refuse(r, l, -WEFT_ERR_PROTOCOL, "expected a hello, got message type %d of %zu bytes", f->type,
			    f->len);
		return;
	}
	const uint8_t *h = f->buf;
	int rank = (int)get32(h + 4), nranks = (int)get32(h + 8);
	if (nranks < 1 || nranks > MAX_RANKS) {
		root_refuse(r, l, -EINVAL, "announced %d ranks (1..%d allowed)", nranks, MAX_RANKS);
		return;
	}
	if (r->nranks == 0) {
		r->ranks = calloc((size_t)nranks, sizeof(*r->ranks));
		r->hellos = calloc((size_t)nranks, HELLO_LEN);
		if (!r->ranks || !r->hellos) {
			free(r->ranks);
			free(r->hellos);
			r->ranks = NULL;
			r->hellos = NULL;
			root_refuse(r, l, -ENOMEM, "no memory for %d ranks", nranks);
			return;
		}
		r->nranks = nranks;
	}
	if (nranks != r->nranks) {
		root_refuse(r, l, -WEFT_ERR_MISMATCH, "rank %d says the job has %d ranks, others said %d", rank, nranks,
			    r->nranks);
		return;
	}
	if (rank < 0 || rank >= nranks) {
		root_refuse(r, l, -EINVAL, "rank %d is out of range for %d ranks", rank, nranks);
		return;
	}
	if (r->ranks[rank]) {
		root_refuse(r, l, -WEFT_ERR_MISMATCH, "rank %d already joined from %s", rank, r->ranks[rank]->name);
		return;
	}
	WEFT_DEBUG("bootstrap root %s: rank %d/%d arrived from %s", r->name, rank, nranks, l->name);
	r->ranks[rank] = l;
	memcpy(r->hellos[rank], h, HELLO_LEN);
	r->arrived++;
}

static int root_send_tables(struct root *r)
{
	size_t len = TABLE_HDR + (size_t)r->nranks * ENTRY_LEN;
	uint8_t *t = malloc(len);
	uint64_t tag;
	if (!t)
		return -ENOMEM;
	int rc = fill_random(&tag, sizeof(tag));
	if (rc) {
		free(t);
		return rc;
	}
	put64(t, tag);
	put32(t + 8, (uint32_t)r->nranks);
	put32(t + 12, 0);
	for (int i = 0; i < r->nranks; i++) {
		uint8_t *e = t + TABLE_HDR + (size_t)i * ENTRY_LEN;
		const uint8_t *h = r->hellos[i];
		memcpy(e, h + 12, 4);      /* address */
		memcpy(e + 4, h + 16, 2);  /* port */
		put16(e + 6, 0);
		memcpy(e + 8, h + 20, 8);  /* proc id */
		memcpy(e + 16, h + 28, 64); /* host id */
	}
	for (int i = 0; i < r->nranks; i++) {
		struct obuf *b = frame_make(r->ranks[i], T_TABLE, 0, 0, t, len);
		if (!b) {
			free(t);
			return -ENOMEM;
		}
		oq_push(r->ranks[i], b);
	}
	free(t);
	return 0;
}

static void *root_main(void *arg)
{
	struct root *r = arg;
	int cap = 2 + MAX_PENDING, sent = 0;
	struct pollfd *pfd = malloc((size_t)cap * sizeof(*pfd));

	weft__log_set_rank(-1);
	sem_post(r->started);
	if (!pfd) {
		WEFT_ERROR("bootstrap root %s: out of memory; stopping", r->name);
		goto out;
	}
	for (;;) {
		int n = 2 + r->npending + r->nranks;
		if (n > cap) {
			struct pollfd *np = realloc(pfd, (size_t)n * sizeof(*pfd));
			if (!np) {
				WEFT_ERROR("bootstrap root %s: out of memory; stopping", r->name);
				break;
			}
			pfd = np;
			cap = n;
		}
		int k = 0;
		pfd[k++] = (struct pollfd){.fd = r->wake_fd, .events = POLLIN};
		pfd[k++] = (struct pollfd){.fd = sent ? -1 : r->lfd, .events = POLLIN};
		for (int i = 0; i < r->npending; i++)
			pfd[k++] = (struct pollfd){.fd = r->pending[i]->fd, .events = POLLIN};
		for (int i = 0; i < r->nranks; i++) {
			struct link *l = r->ranks[i];
			pfd[k++] = (struct pollfd){.fd = l ? l->fd : -1, .events = (short)(POLLIN | (l && l->oq_head ? POLLOUT : 0))};
		}
		double next = now_s() + 1.0;
		for (int i = 0; i < r->npending; i++)
			if (r->pending[i]->deadline < next)
				next = r->pending[i]->deadline;
		if (poll(pfd, (nfds_t)k, ms_until(next)) < 0 && errno != EINTR) {
			WEFT_ERROR("bootstrap root %s: poll: %s", r->name, strerror(errno));
			break;
		}
		if (pfd[0].revents || __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
			break;
		/* New connections join the pending set; a flood beyond MAX_PENDING is shed. */
		if (pfd[1].revents) {
			for (;;) {
				int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd < 0)
					break;
				char name[64];
				name_of_fd(fd, name, sizeof(name));
				if (r->npending == MAX_PENDING) {
					WEFT_WARN("bootstrap root %s: refusing %s: %d connections already pending", r->name,
						  name, MAX_PENDING);
					close(fd);
					continue;
				}
				struct link *l = link_new(fd, name, SMALL_FRAME);
				if (!l) {
					close(fd);
					continue;
				}
				tune_socket(fd);
				pending_start(l, r->hs_timeout);
				r->pending[r->npending++] = l;
			}
		}
		double t = now_s();
		for (int i = 0; i < r->npending;) {
			struct link *l = r->pending[i];
			struct frame f = {0};
			int rc = pending_step(l, r->secret, r->id_nonce, &f);
			if (rc == 0 && t > l->deadline) {
				pending_timeout_why(l, r->hs_timeout);
				rc = -1;
			}
			if (rc == 0) {
				i++;
				continue;
			}
			r->pending[i] = r->pending[--r->npending];
			if (rc < 0) {
				WEFT_WARN("bootstrap root %s: dropped connection from %s: %s", r->name, l->name, l->why);
				link_free(l);
			} else {
				root_hello(r, l, &f);
			}
			free(f.buf);
		}
		int done = 0, abandon = 0;
		for (int i = 0; i < r->nranks && !abandon; i++) {
			struct link *l = r->ranks[i];
			if (!l)
				continue;
			struct frame f = {0};
			int rc = link_pump(l, &f);
			if (rc == 1) {
				int err = f.type == T_GIVEUP && f.len >= 4 ? (int)get32(f.buf) : -WEFT_ERR_PROTOCOL;
				free(f.buf);
				if (!sent) {
					root_abandon(r, i, err, f.type == T_GIVEUP ? "gave up waiting" : "sent an unexpected message");
					abandon = 1;
				}
			} else if (rc < 0) {
				if (!sent) {
					char why[240];
					snprintf(why, sizeof(why), "left (%s)", l->why);
					root_abandon(r, i, -WEFT_ERR_PEER, why);
					abandon = 1;
				} else {
					/* It has its table (or never will); either way we are done with it. */
					link_free(l);
					r->ranks[i] = NULL;
				}
			} else if (l->oq_head && oq_flush(l) != 0) {
				link_free(l);
				r->ranks[i] = NULL;
			}
		}
		if (abandon)
			break;
		if (!sent && r->nranks && r->arrived == r->nranks) {
			if (root_send_tables(r) != 0) {
				WEFT_ERROR("bootstrap root %s: out of memory building the peer table", r->name);
				break;
			}
			sent = 1;
			WEFT_DEBUG("bootstrap root %s: all %d ranks arrived; table sent", r->name, r->nranks);
			/* Nobody else may join a complete job. */
			close(r->lfd);
			r->lfd = -1;
			for (int i = 0; i < r->npending; i++)
				link_free(r->pending[i]);
			r->npending = 0;
		}
		if (sent) {
			for (int i = 0; i < r->nranks; i++)
				if (r->ranks[i] && !r->ranks[i]->oq_head) {
					link_free(r->ranks[i]);
					r->ranks[i] = NULL;
				}
			done = 1;
			for (int i = 0; i < r->nranks; i++)
				if (r->ranks[i])
					done = 0;
			if (done)
				break;
		}
	}
out:
	free(pfd);
	pthread_mutex_lock(&roots_mu);
	for (struct root **p = &roots; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&roots_mu);
	root_free(r);
	return NULL;
}

/* Starts a root listening on addr:port (port 0: any). */
static int root_start(const struct bs_params *p, uint32_t addr_be, uint16_t port, const uint8_t secret[32],
		      uint64_t id_nonce, uint16_t *port_out, uint64_t *serial_out)
{
	pthread_once(&atfork_once, atfork_init);
	struct root *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->lfd = r->wake_fd = -1;
	int rc = tcp_listen(addr_be, port, &r->lfd, &port);
	if (rc != 0 && port != 0 && rc == -EADDRNOTAVAIL) {
		/* host:port named another of this host's names (or a NAT'd one): listen on all. */
		rc = tcp_listen(htonl(INADDR_ANY), port, &r->lfd, &port);
	}
	if (rc != 0)
		goto err_free;
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->wake_fd < 0) {
		rc = -errno;
		WEFT_ERROR("bootstrap: eventfd: %s", strerror(errno));
		goto err_free;
	}
	fmt_addr(addr_be, port, r->name, sizeof(r->name));
	memcpy(r->secret, secret, 32);
	r->id_nonce = id_nonce;
	r->hs_timeout = p->hs_timeout;

	/* root_start returns only once the thread has made its first allocations:
	 * a process that forks right after weft_get_unique_id (tests do) must not
	 * fork while that thread holds an allocator lock, which fork-unsafe
	 * allocators (sanitizers') would leave locked in the child. */
	sem_t started;
	char name[64];
	uint64_t serial;
	snprintf(name, sizeof(name), "%s", r->name);
	sem_init(&started, 0, 0);
	r->started = &started;
	pthread_attr_t attr;
	pthread_t th;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&roots_mu);
	r->serial = serial = ++roots_serial;
	r->next = roots;
	roots = r;
	rc = -pthread_create(&th, &attr, root_main, r);
	if (rc != 0)
		roots = r->next;
	pthread_mutex_unlock(&roots_mu);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		sem_destroy(&started);
		WEFT_ERROR("bootstrap: cannot start the root thread: %s", strerror(-rc));
		goto err_free;
	}
	while (sem_wait(&started) != 0 && errno == EINTR)
		;
	sem_destroy(&started);
	/* r is the thread's now, and may be gone: only copies from here on. */
	WEFT_INFO("bootstrap root listening on %s", name);
	*port_out = port;
	if (serial_out)
		*serial_out = serial;
	return 0;

err_free:
	root_free(r);
	return rc;
}

static void root_stop_where(int (*match)(const struct root *, const void *), const void *arg)
{
	pthread_once(&atfork_once, atfork_init);
	pthread_mutex_lock(&roots_mu);
	for (struct root *r = roots; r; r = r->next)
		if (match(r, arg)) {
			uint64_t one = 1;
			__atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
			if (write(r->wake_fd, &one, sizeof(one)) < 0) {
				/* The counter cannot overflow from this; nothing to do. */
			}
		}
	pthread_mutex_unlock(&roots_mu);
}

static int match_serial(const struct root *r, const void *arg)
{
	return r->serial == *(const uint64_t *)arg;
}

static int match_id(const struct root *r, const void *arg)
{
	const struct weft__unique_id_layout *u = arg;
	return r->id_nonce == u->nonce && !memcmp(r->secret, u->secret, 32);
}

void weft__bootstrap_root_stop(const struct weft_unique_id *id)
{
	struct weft__unique_id_layout u;
	if (!id)
		return;
	memcpy(&u, id->internal, sizeof(u));
	root_stop_where(match_id, &u);
}

int weft__bootstrap_make_id(struct weft_unique_id *id)
{
	struct bs_params p;
	struct weft__unique_id_layout u;
	uint32_t addr;
	uint16_t port;
	int rc;

	if (!id) {
		WEFT_ERROR("weft_get_unique_id: id is NULL");
		return -EINVAL;
	}
	_Static_assert(sizeof(u) == WEFT_UNIQUE_ID_BYTES, "unique id layout must be 128 bytes");
	if ((rc = params_load(&p)) != 0)
		return rc;
	if ((rc = choose_addr(&p, 0, &addr)) != 0)
		return rc;
	memset(&u, 0, sizeof(u));
	u.magic = ID_MAGIC;
	u.version = WEFT__BOOTSTRAP_VERSION;
	u.family = AF_INET;
	memcpy(u.addr, &addr, 4);
	u.has_secret = 1;
	if ((rc = fill_random(u.secret, sizeof(u.secret))) != 0 || (rc = fill_random(&u.nonce, sizeof(u.nonce))) != 0)
		return rc;
	if ((rc = root_start(&p, addr, 0, u.secret, u.nonce, &port, NULL)) != 0)
		return rc;
	u.port = htons(port);
	memcpy(id->internal, &u, sizeof(u));
	return 0;
}

WEFT_API int weft_get_unique_id(struct weft_unique_id *id)
{
	return weft__bootstrap_make_id(id);
}

/* ------------------------------------------------------------ the ranks */

struct msg {
	struct msg *next;
	uint64_t key; /* class << 32 | tag */
	size_t len;
	uint8_t *data;
};

struct peer {
	struct link *link;  /* NULL until connected, and for this rank itself */
	int up;             /* link installed */
	int gone;           /* closed; nothing more will come */
	int bye_rcvd, bye_sent, wr_shut;
	struct msg *rq_head, *rq_tail;
	char addr[INET_ADDRSTRLEN];
	uint16_t port;
	uint32_t addr_be;
	char host[WEFT_HOST_ID_LEN];
	uint64_t proc;
};

struct weft__bootstrap {
	int rank, nranks;
	uint64_t tag;
	struct bs_params p;
	uint8_t secret[32];
	uint64_t id_nonce;
	char local_addr[INET_ADDRSTRLEN];
	int lfd;
	uint16_t lport;
	int wake_fd;
	pthread_t thread;
	int thread_started;
	pthread_mutex_t mu; /* peers' queues and flags, status */
	pthread_cond_t cv;
	int status;
	uint32_t fail_word;
	int closing; /* destroy: say bye and drain */
	int quit;    /* failed create: stop at once */
	int connected;
	int has_root;
	uint64_t root_serial;
	struct peer *peers;
	struct link *pending[MAX_PENDING];
	int npending;
};

static void wake(struct weft__bootstrap *bs)
{
	uint64_t one = 1;
	if (write(bs->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN means a wake-up is already pending. */
	}
}

/* Records the first failure; callers hold bs->mu. */
static void fail_locked(struct weft__bootstrap *bs, int err)
{
	int zero = 0;
	__atomic_compare_exchange_n(&bs->status, &zero, err, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
	__atomic_add_fetch(&bs->fail_word, 1, __ATOMIC_ACQ_REL);
	pthread_cond_broadcast(&bs->cv);
}

void weft__bootstrap_fail(struct weft__bootstrap *bs, int err)
{
	if (!bs)
		return;
	if (err >= 0)
		err = -WEFT_ERR_ABORTED;
	pthread_mutex_lock(&bs->mu);
	fail_locked(bs, err);
	pthread_mutex_unlock(&bs->mu);
	wake(bs);
}

int weft__bootstrap_status(const struct weft__bootstrap *bs)
{
	return bs ? __atomic_load_n(&bs->status, __ATOMIC_ACQUIRE) : -EINVAL;
}

const volatile uint32_t *weft__bootstrap_fail_word(const struct weft__bootstrap *bs)
{
	return &bs->fail_word;
}

/* Whether fd has bytes (or EOF, or an error) waiting to be read right now. */
static int readable_now(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}

/* The peer's link broke (EOF, error, silence, a bad frame). Called by the
 * service thread with bs->mu held. */
static void peer_down(struct weft__bootstrap *bs, int i, int err, const char *why)
{
	struct peer *pe = &bs->peers[i];
	if (pe->gone)
		return;
	if (pe->bye_rcvd || bs->closing) {
		WEFT_DEBUG("bootstrap: rank %d (%s) closed after goodbye", i, pe->link->name);
	} else {
		WEFT_ERROR("bootstrap: peer rank %d (%s) failed: %s", i, pe->link->name, why);
		fail_locked(bs, err);
	}
	pe->gone = 1;
	close(pe->link->fd);
	pe->link->fd = -1;
	oq_free(pe->link);
	pthread_cond_broadcast(&bs->cv);
}

static void deliver(struct weft__bootstrap *bs, int i, struct frame *f)
{
	struct peer *pe = &bs->peers[i];
	if (f->type == T_DATA) {
		struct msg *m = malloc(sizeof(*m));
		if (!m) {
			WEFT_ERROR("bootstrap: no memory to queue a %zu-byte message from rank %d", f->len, i);
			fail_locked(bs, -ENOMEM);
			free(f->buf);
			return;
		}
		m->next = NULL;
		m->key = (uint64_t)f->cls << 32 | f->tag;
		m->len = f->len;
		m->data = f->buf;
		f->buf = NULL;
		if (pe->rq_tail)
			pe->rq_tail->next = m;
		else
			pe->rq_head = m;
		pe->rq_tail = m;
		pthread_cond_broadcast(&bs->cv);
	} else if (f->type == T_BYE) {
		WEFT_DEBUG("bootstrap: rank %d said goodbye", i);
		pe->bye_rcvd = 1;
		/* It will read no more: drop what we still had for it, and let it see
		 * our EOF so that its destroy need not wait. */
		oq_free(pe->link);
		if (!pe->wr_shut) {
			shutdown(pe->link->fd, SHUT_WR);
			pe->wr_shut = 1;
		}
		pthread_cond_broadcast(&bs->cv);
	} else if (f->type != T_HEARTBEAT) {
		char why[64];
		snprintf(why, sizeof(why), "sent an unexpected message of type %d", f->type);
		peer_down(bs, i, -WEFT_ERR_PROTOCOL, why);
	}
	free(f->buf);
	f->buf = NULL;
}

/* A lower rank finished its handshake on our listener and says who it is. */
static void accept_peer(struct weft__bootstrap *bs, struct link *l, struct frame *f)
{
	char why[160] = "";
	int r = -1;
	if (f->type != T_PEER_HELLO || f->len != 16)
		snprintf(why, sizeof(why), "sent message type %d instead of a peer hello", f->type);
	else if (get64(f->buf + 8) != bs->tag)
		snprintf(why, sizeof(why), "belongs to another communicator (tag differs)");
	else if ((int)get32(f->buf + 4) != bs->nranks)
		snprintf(why, sizeof(why), "says the job has %d ranks, not %d", (int)get32(f->buf + 4), bs->nranks);
	else if ((r = (int)get32(f->buf)) < 0 || r >= bs->rank)
		snprintf(why, sizeof(why), "claims rank %d, which should not connect to rank %d", r, bs->rank);
	if (!why[0]) {
		pthread_mutex_lock(&bs->mu);
		if (bs->peers[r].up)
			snprintf(why, sizeof(why), "claims rank %d, which is already connected", r);
		pthread_mutex_unlock(&bs->mu);
	}
	if (why[0]) {
		WEFT_WARN("bootstrap: dropped connection from %s: %s", l->name, why);
		link_free(l);
		return;
	}
	uint8_t ack[16];
	put32(ack, (uint32_t)bs->rank);
	put32(ack + 4, 0);
	put64(ack + 8, bs->tag);
	struct obuf *b = frame_make(l, T_PEER_ACK, 0, 0, ack, sizeof(ack));
	if (!b) {
		WEFT_WARN("bootstrap: no memory to answer rank %d", r);
		link_free(l);
		return;
	}
	l->max_len = bs->p.max_msg;
	l->last_rx = now_s();
	fmt_addr(bs->peers[r].addr_be, bs->peers[r].port, l->name, sizeof(l->name));
	pthread_mutex_lock(&bs->mu);
	oq_push(l, b);
	bs->peers[r].link = l;
	bs->peers[r].up = 1;
	bs->connected++;
	pthread_cond_broadcast(&bs->cv);
	pthread_mutex_unlock(&bs->mu);
}

static void *service_main(void *arg)
{
	struct weft__bootstrap *bs = arg;
	struct pollfd *pfd = NULL;
	int *who = NULL; /* pfd index -> peer rank, or -1 - pending index */
	int cap = 0;
	double next_hb = now_s() + bs->p.hb_interval;
	double close_deadline = 0;
	int n = bs->nranks;

	weft__log_set_rank(bs->rank);
	for (;;) {
		int want = 2 + n + bs->npending;
		if (want > cap) {
			struct pollfd *np = realloc(pfd, (size_t)want * sizeof(*pfd));
			int *nw = np ? realloc(who, (size_t)want * sizeof(*who)) : NULL;
			if (np)
				pfd = np;
			if (!nw) {
				pthread_mutex_lock(&bs->mu);
				WEFT_ERROR("bootstrap: service thread out of memory");
				fail_locked(bs, -ENOMEM);
				pthread_mutex_unlock(&bs->mu);
				break;
			}
			who = nw;
			cap = want;
		}
		int k = 0;
		pfd[k] = (struct pollfd){.fd = bs->wake_fd, .events = POLLIN};
		who[k++] = INT_MIN;
		pthread_mutex_lock(&bs->mu);
		int quit = bs->quit, closing = bs->closing, open = 0;
		pfd[k] = (struct pollfd){.fd = closing ? -1 : bs->lfd, .events = POLLIN};
		who[k++] = INT_MIN;
		/* A failed communicator (aborted, or a peer died) leaves without a
		 * goodbye: its peers must see the failure too, or one of them waiting
		 * for this rank would wait forever. */
		if (closing && weft__bootstrap_status(bs) != 0)
			quit = 1;
		if (closing && !quit && !close_deadline) {
			close_deadline = now_s() + bs->p.peer_timeout;
			for (int i = 0; i < n; i++) {
				struct peer *pe = &bs->peers[i];
				if (!pe->up || pe->gone || pe->bye_rcvd || pe->bye_sent)
					continue;
				struct obuf *b = frame_make(pe->link, T_BYE, 0, 0, NULL, 0);
				if (b)
					oq_push(pe->link, b);
				pe->bye_sent = 1;
			}
		}
		for (int i = 0; i < n; i++) {
			struct peer *pe = &bs->peers[i];
			if (!pe->up || pe->gone)
				continue;
			open++;
			if (pe->bye_sent && !pe->link->oq_head && !pe->wr_shut) {
				shutdown(pe->link->fd, SHUT_WR);
				pe->wr_shut = 1;
			}
			pfd[k] = (struct pollfd){.fd = pe->link->fd,
						 .events = (short)(POLLIN | (pe->link->oq_head ? POLLOUT : 0))};
			who[k++] = i;
		}
		pthread_mutex_unlock(&bs->mu);
		if (quit || (closing && (open == 0 || now_s() > close_deadline)))
			break;
		for (int i = 0; i < bs->npending; i++) {
			pfd[k] = (struct pollfd){.fd = bs->pending[i]->fd, .events = POLLIN};
			who[k++] = -1 - i;
		}
		double t = now_s();
		double next = next_hb;
		for (int i = 0; i < bs->npending; i++)
			if (bs->pending[i]->deadline < next)
				next = bs->pending[i]->deadline;
		if (next > t + 0.1)
			next = t + 0.1; /* also the resolution of the silence check */
		if (poll(pfd, (nfds_t)k, ms_until(next)) < 0 && errno != EINTR) {
			pthread_mutex_lock(&bs->mu);
			WEFT_ERROR("bootstrap: poll: %s", strerror(errno));
			fail_locked(bs, -errno);
			pthread_mutex_unlock(&bs->mu);
			break;
		}
		if (pfd[0].revents) {
			uint64_t v;
			if (read(bs->wake_fd, &v, sizeof(v)) < 0) {
				/* Nothing pending: spurious. */
			}
		}
		if (pfd[1].revents) {
			for (;;) {
				int fd = accept4(bs->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd < 0)
					break;
				char name[64];
				name_of_fd(fd, name, sizeof(name));
				if (bs->npending == MAX_PENDING) {
					WEFT_WARN("bootstrap: refusing %s: %d connections already pending", name, MAX_PENDING);
					close(fd);
					continue;
				}
				struct link *l = link_new(fd, name, SMALL_FRAME);
				if (!l) {
					close(fd);
					continue;
				}
				tune_socket(fd);
				pending_start(l, bs->p.hs_timeout);
				bs->pending[bs->npending++] = l;
			}
		}
		/* Peers: read everything available, write what the sockets take. */
		for (int j = 2; j < k; j++) {
			if (who[j] < 0 || !pfd[j].revents)
				continue;
			int i = who[j];
			struct peer *pe = &bs->peers[i];
			struct link *l = pe->link;
			if (pfd[j].revents & (POLLIN | POLLHUP | POLLERR)) {
				for (;;) {
					struct frame f = {0};
					int rc = link_pump(l, &f);
					if (rc == 0)
						break;
					pthread_mutex_lock(&bs->mu);
					if (rc == 1) {
						deliver(bs, i, &f);
					} else {
						char why[320];
						snprintf(why, sizeof(why), "%s%s", l->why,
							 l->eof ? " without saying goodbye (the process died or exited without "
								  "destroying its communicator)"
								: "");
						peer_down(bs, i, l->eof || !strncmp(l->why, "recv", 4) ? -WEFT_ERR_PEER
												       : -WEFT_ERR_PROTOCOL,
							  why);
					}
					int stop = pe->gone;
					pthread_mutex_unlock(&bs->mu);
					/* A heartbeat that falls due between frames goes out
					 * first: a peer streaming big frames must not keep
					 * this thread from the others' liveness. The rest
					 * is read on the next turn (poll is level-triggered). */
					if (stop || (rc == 1 && now_s() >= next_hb))
						break;
				}
			}
			pthread_mutex_lock(&bs->mu);
			if (!pe->gone && l->oq_head) {
				int rc = oq_flush(l);
				if (rc != 0) {
					char why[120];
					snprintf(why, sizeof(why), "send: %s", strerror(-rc));
					peer_down(bs, i, -WEFT_ERR_PEER, why);
				}
			}
			pthread_mutex_unlock(&bs->mu);
		}
		/* Pending connections: handshakes of lower ranks, and strangers. */
		t = now_s();
		for (int i = 0; i < bs->npending;) {
			struct link *l = bs->pending[i];
			struct frame f = {0};
			int rc = pending_step(l, bs->secret, bs->id_nonce, &f);
			if (rc == 0 && t > l->deadline) {
				pending_timeout_why(l, bs->p.hs_timeout);
				rc = -1;
			}
			if (rc == 0) {
				i++;
				continue;
			}
			bs->pending[i] = bs->pending[--bs->npending];
			if (rc < 0) {
				WEFT_WARN("bootstrap: dropped connection from %s: %s", l->name, l->why);
				link_free(l);
			} else {
				accept_peer(bs, l, &f);
			}
			free(f.buf);
		}
		/* Liveness: heartbeats out, silence in. */
		t = now_s();
		int beat = t >= next_hb;
		if (beat)
			next_hb = t + bs->p.hb_interval;
		for (int i = 0; i < n; i++) {
			struct peer *pe = &bs->peers[i];
			pthread_mutex_lock(&bs->mu);
			int live = pe->up && !pe->gone && !pe->bye_rcvd && !pe->bye_sent;
			int idle = live && !pe->link->oq_head;
			/* Silence is judged on the socket, not on this thread: bytes
			 * that wait unread (this thread was busy with other peers' big
			 * frames, or starved of CPU) mean the peer is alive; they are
			 * read, EOF included, on the next turn. */
			if (live && t - pe->link->last_rx > bs->p.peer_timeout && !readable_now(pe->link->fd)) {
				char why[120];
				snprintf(why, sizeof(why), "silent for %.1f s (WEFT_CORE_PEER_TIMEOUT is %g s)",
					 t - pe->link->last_rx, bs->p.peer_timeout);
				peer_down(bs, i, -WEFT_ERR_PEER, why);
				idle = 0;
			}
			/* A queue that is not empty carries bytes, which count as a
			 * heartbeat. A heartbeat costs one HMAC block: made under the lock. */
			if (beat && idle) {
				struct obuf *b = frame_make(pe->link, T_HEARTBEAT, 0, 0, NULL, 0);
				if (b) {
					oq_push(pe->link, b);
					if (oq_flush(pe->link) != 0)
						peer_down(bs, i, -WEFT_ERR_PEER, "send failed");
				}
			}
			pthread_mutex_unlock(&bs->mu);
		}
	}
	free(pfd);
	free(who);
	return NULL;
}

/* Reads WEFT_CORE_BOOTSTRAP_ROOT (or torchrun's MASTER_ADDR/MASTER_PORT + 1) and
 * the secret into a synthetic id. */
static int id_from_env(const struct bs_params *p, struct weft__unique_id_layout *u, int rank)
{
	char host[256], portbuf[16];
	const char *root = p->root;
	char synth[300];
	memset(u, 0, sizeof(*u));
	if (!root) {
		const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
		char *end;
		long port = mp ? strtol(mp, &end, 10) : 0;
		if (!ma || !*ma || !mp || *end || port < 1 || port >= 65535) {
			WEFT_ERROR("bootstrap: no root given: pass a unique id, or set WEFT_CORE_BOOTSTRAP_ROOT=host:port "
				   "(under torchrun, MASTER_ADDR and MASTER_PORT imply MASTER_PORT+1)");
			return -EINVAL;
		}
		/* torchrun's own store listens on MASTER_PORT itself. */
		snprintf(synth, sizeof(synth), "%s:%ld", ma, port + 1);
		root = synth;
		if (rank == 0)
			WEFT_INFO("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT unset; using MASTER_ADDR:MASTER_PORT+1 = %s", root);
	}
	const char *colon = strrchr(root, ':');
	char *end;
	long port = colon ? strtol(colon + 1, &end, 10) : 0;
	if (!colon || colon == root || (size_t)(colon - root) >= sizeof(host) || *end || port < 1 || port > 65535) {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT '%s' is not host:port", root);
		return -WEFT_ERR_CONFIG;
	}
	memcpy(host, root, (size_t)(colon - root));
	host[colon - root] = '\0';
	if (host[0] == '[') {
		WEFT_ERROR("bootstrap: WEFT_CORE_BOOTSTRAP_ROOT '%s': IPv6 is not supported; use an IPv4 address", root);
		return -WEFT_ERR_CONFIG;
	}
	snprintf(portbuf, sizeof(portbuf), "%ld", port);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
	int gai = getaddrinfo(host, portbuf, &hints, &ai);
	if (gai != 0) {
		WEFT_ERROR("bootstrap: cannot resolve the root host '%s': %s", host, gai_strerror(gai));
		return -EHOSTUNREACH;
	}
	memcpy(u->addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr, 4);
	freeaddrinfo(ai);
	u->magic = ID_MAGIC;
	u->version = WEFT__BOOTSTRAP_VERSION;
	u->family = AF_INET;
	u->port = htons((uint16_t)port);
	if (p->secret) {
		size_t n = strlen(p->secret);
		int hex = n == 64;
		for (size_t i = 0; hex && i < n; i++)
			hex = (p->secret[i] >= '0' && p->secret[i] <= '9') || ((p->secret[i] | 32) >= 'a' && (p->secret[i] | 32) <= 'f');
		if (hex) {
			for (int i = 0; i < 32; i++) {
				unsigned v;
				sscanf(p->secret + 2 * i, "%2x", &v);
				u->secret[i] = (uint8_t)v;
			}
		} else {
			weft__sha256(p->secret, n, u->secret);
		}
		u->has_secret = 1;
	} else if (rank == 0) {
		WEFT_WARN("bootstrap: WEFT_CORE_BOOTSTRAP_SECRET is unset: bootstrap connections are not authenticated; "
			  "anyone who reaches %s can join or disturb this job",
			  root);
	}
	return 0;
}

static int parse_table(struct weft__bootstrap *bs, const struct frame *f, const uint8_t *hello)
{
	if (f->len != TABLE_HDR + (size_t)bs->nranks * ENTRY_LEN || (int)get32(f->buf + 8) != bs->nranks) {
		WEFT_ERROR("bootstrap: the root sent a malformed peer table (%zu bytes for %d ranks)", f->len, bs->nranks);
		return -WEFT_ERR_PROTOCOL;
	}
	bs->tag = get64(f->buf);
	for (int i = 0; i < bs->nranks; i++) {
		const uint8_t *e = f->buf + TABLE_HDR + (size_t)i * ENTRY_LEN;
		struct peer *pe = &bs->peers[i];
		memcpy(&pe->addr_be, e, 4);
		pe->port = get16(e + 4);
		pe->proc = get64(e + 8);
		memcpy(pe->host, e + 16, WEFT_HOST_ID_LEN);
		pe->host[WEFT_HOST_ID_LEN - 1] = '\0';
		inet_ntop(AF_INET, &pe->addr_be, pe->addr, sizeof(pe->addr));
	}
	const uint8_t *me = f->buf + TABLE_HDR + (size_t)bs->rank * ENTRY_LEN;
	if (memcmp(me, hello + 12, 6) != 0 || memcmp(me + 8, hello + 20, 8) != 0) {
		WEFT_ERROR("bootstrap: the root's table does not match this rank's hello");
		return -WEFT_ERR_PROTOCOL;
	}
	return 0;
}

/* Meets the root: hello out, table (or the reason there is none) back. */
static int rendezvous(struct weft__bootstrap *bs, const struct weft__unique_id_layout *u, double deadline)
{
	uint32_t root_be;
	uint16_t root_port = ntohs(u->port);
	char rname[64];
	memcpy(&root_be, u->addr, 4);
	fmt_addr(root_be, root_port, rname, sizeof(rname));

	uint8_t hello[HELLO_LEN] = {0};
	uint32_t me_be;
	inet_pton(AF_INET, bs->local_addr, &me_be);
	put32(hello, WEFT__BOOTSTRAP_VERSION);
	put32(hello + 4, (uint32_t)bs->rank);
	put32(hello + 8, (uint32_t)bs->nranks);
	memcpy(hello + 12, &me_be, 4);
	put16(hello + 16, bs->lport);
	put16(hello + 18, 0);
	put64(hello + 20, bs->peers[bs->rank].proc);
	memcpy(hello + 28, bs->peers[bs->rank].host, WEFT_HOST_ID_LEN);

	int fd, rc;
	rc = tcp_connect(root_be, root_port, deadline, &fd);
	if (rc != 0) {
		if (rc == -ETIMEDOUT)
			WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): "
				   "no root answers at %s",
				   bs->p.timeout, rname);
		else
			WEFT_ERROR("bootstrap: cannot connect to the root at %s: %s", rname, strerror(-rc));
		return rc;
	}
	struct link *l = link_new(fd, rname, TABLE_HDR + (uint64_t)bs->nranks * ENTRY_LEN);
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	rc = hs_initiate(l, bs->secret, bs->id_nonce, deadline);
	if (rc == 0)
		rc = send_frame_now(l, T_HELLO, 0, hello, sizeof(hello), deadline);
	if (rc != 0) {
		if (rc == -ETIMEDOUT)
			WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT) during the "
				   "handshake with the root at %s",
				   bs->p.timeout, rname);
		else
			WEFT_ERROR("bootstrap: the root at %s %s", rname, l->why);
		link_free(l);
		return rc;
	}
	struct frame f = {0};
	rc = link_wait(l, &f, deadline);
	if (rc == -ETIMEDOUT) {
		/* Tell the root, so that it tells everyone else now. */
		uint8_t e[4];
		put32(e, (uint32_t)-ETIMEDOUT);
		send_frame_now(l, T_GIVEUP, 0, e, 4, now_s() + 0.5);
		WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): not all %d ranks "
			   "reached the root at %s",
			   bs->p.timeout, bs->nranks, rname);
	} else if (rc < 0) {
		WEFT_ERROR("bootstrap: lost the root at %s before the rendezvous completed: %s", rname, l->why);
		rc = -WEFT_ERR_PEER;
	} else if (f.type == T_FAIL && f.len >= 4) {
		rc = (int)get32(f.buf);
		if (rc >= 0)
			rc = -WEFT_ERR_PROTOCOL;
		WEFT_ERROR("bootstrap: the root at %s ended the rendezvous: %.*s", rname, (int)(f.len - 4), f.buf + 4);
	} else if (f.type == T_TABLE) {
		rc = parse_table(bs, &f, hello);
	} else {
		WEFT_ERROR("bootstrap: the root at %s sent message type %d instead of the peer table", rname, f.type);
		rc = -WEFT_ERR_PROTOCOL;
	}
	free(f.buf);
	link_free(l);
	return rc;
}

/* Connects to a higher rank's listener; on success the link joins the service thread. */
static int connect_peer(struct weft__bootstrap *bs, int j, double deadline)
{
	struct peer *pe = &bs->peers[j];
	char name[64];
	int fd, rc;
	fmt_addr(pe->addr_be, pe->port, name, sizeof(name));
	rc = tcp_connect(pe->addr_be, pe->port, deadline, &fd);
	if (rc != 0) {
		WEFT_ERROR("bootstrap: cannot connect to rank %d at %s: %s", j, name, strerror(-rc));
		return rc;
	}
	struct link *l = link_new(fd, name, SMALL_FRAME);
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	uint8_t m[16];
	put32(m, (uint32_t)bs->rank);
	put32(m + 4, (uint32_t)bs->nranks);
	put64(m + 8, bs->tag);
	struct frame f = {0};
	rc = hs_initiate(l, bs->secret, bs->id_nonce, deadline);
	if (rc == 0)
		rc = send_frame_now(l, T_PEER_HELLO, 0, m, sizeof(m), deadline);
	if (rc == 0) {
		rc = link_wait(l, &f, deadline);
		if (rc == 1 && (f.type != T_PEER_ACK || f.len != 16 || get32(f.buf) != (uint32_t)j || get64(f.buf + 8) != bs->tag)) {
			snprintf(l->why, sizeof(l->why), "answered with something other than its acknowledgement");
			rc = -WEFT_ERR_PROTOCOL;
		} else if (rc == 1) {
			rc = 0;
		} else if (rc == -1) {
			rc = -WEFT_ERR_PEER;
		}
		free(f.buf);
	}
	if (rc != 0) {
		WEFT_ERROR("bootstrap: connecting to rank %d at %s: it %s", j, name, l->why);
		link_free(l);
		return rc;
	}
	l->max_len = bs->p.max_msg;
	l->last_rx = now_s();
	fmt_addr(pe->addr_be, pe->port, l->name, sizeof(l->name));
	pthread_mutex_lock(&bs->mu);
	pe->link = l;
	pe->up = 1;
	bs->connected++;
	pthread_mutex_unlock(&bs->mu);
	wake(bs);
	return 0;
}

static void bs_free(struct weft__bootstrap *bs)
{
	if (bs->thread_started) {
		pthread_mutex_lock(&bs->mu);
		if (!bs->closing)
			bs->quit = 1;
		pthread_mutex_unlock(&bs->mu);
		wake(bs);
		pthread_join(bs->thread, NULL);
	}
	if (bs->has_root)
		root_stop_where(match_serial, &bs->root_serial);
	for (int i = 0; i < bs->npending; i++)
		link_free(bs->pending[i]);
	if (bs->peers) {
		for (int i = 0; i < bs->nranks; i++) {
			struct peer *pe = &bs->peers[i];
			link_free(pe->link);
			while (pe->rq_head) {
				struct msg *m = pe->rq_head;
				pe->rq_head = m->next;
				free(m->data);
				free(m);
			}
		}
	}
	free(bs->peers);
	if (bs->lfd >= 0)
		close(bs->lfd);
	if (bs->wake_fd >= 0)
		close(bs->wake_fd);
	pthread_cond_destroy(&bs->cv);
	pthread_mutex_destroy(&bs->mu);
	free(bs);
}

int weft__bootstrap_create(const struct weft_unique_id *id, int nranks, int rank, struct weft__bootstrap **out)
{
	struct weft__unique_id_layout u;
	struct weft__bootstrap *bs;
	uint32_t addr;
	int rc;

	if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks) {
		WEFT_ERROR("bootstrap: invalid arguments: rank %d of %d ranks%s", rank, nranks, out ? "" : ", out NULL");
		return -EINVAL;
	}
	bs = calloc(1, sizeof(*bs));
	if (!bs)
		return -ENOMEM;
	bs->lfd = bs->wake_fd = -1;
	bs->rank = rank;
	bs->nranks = nranks;
	pthread_mutex_init(&bs->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&bs->cv, &ca);
	pthread_condattr_destroy(&ca);
	bs->peers = calloc((size_t)nranks, sizeof(*bs->peers));
	if (!bs->peers) {
		rc = -ENOMEM;
		goto err_free;
	}
	if ((rc = params_load(&bs->p)) != 0)
		goto err_free;
	double deadline = now_s() + bs->p.timeout;

	if (id) {
		memcpy(&u, id->internal, sizeof(u));
		if (u.magic != ID_MAGIC || u.family != AF_INET) {
			WEFT_ERROR("bootstrap: the unique id is not a weft unique id (bad magic); was it made by "
				   "weft_get_unique_id and passed intact?");
			rc = -EINVAL;
			goto err_free;
		}
		if (u.version != WEFT__BOOTSTRAP_VERSION) {
			WEFT_ERROR("bootstrap: the unique id is of bootstrap protocol %u; this library speaks %u",
				   u.version, WEFT__BOOTSTRAP_VERSION);
			rc = -WEFT_ERR_MISMATCH;
			goto err_free;
		}
	} else if ((rc = id_from_env(&bs->p, &u, rank)) != 0) {
		goto err_free;
	}
	memcpy(bs->secret, u.secret, 32);
	bs->id_nonce = u.nonce;

	uint32_t root_be;
	memcpy(&root_be, u.addr, 4);
	if ((rc = choose_addr(&bs->p, root_be, &addr)) != 0)
		goto err_free;
	inet_ntop(AF_INET, &addr, bs->local_addr, sizeof(bs->local_addr));
	if ((rc = tcp_listen(addr, 0, &bs->lfd, &bs->lport)) != 0)
		goto err_free;
	bs->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (bs->wake_fd < 0) {
		rc = -errno;
		WEFT_ERROR("bootstrap: eventfd: %s", strerror(errno));
		goto err_free;
	}
	if (weft__host_id(bs->peers[rank].host, WEFT_HOST_ID_LEN) != 0) {
		rc = -ENOSPC;
		goto err_free;
	}
	bs->peers[rank].proc = weft__proc_id();
	if (!id && rank == 0) {
		uint16_t port;
		rc = root_start(&bs->p, root_be, ntohs(u.port), u.secret, u.nonce, &port, &bs->root_serial);
		if (rc != 0)
			goto err_free;
		bs->has_root = 1;
	}

	if ((rc = rendezvous(bs, &u, deadline)) != 0)
		goto err_free;
	rc = -pthread_create(&bs->thread, NULL, service_main, bs);
	if (rc != 0) {
		WEFT_ERROR("bootstrap: cannot start the service thread: %s", strerror(-rc));
		goto err_free;
	}
	bs->thread_started = 1;
	for (int j = rank + 1; j < nranks; j++)
		if ((rc = connect_peer(bs, j, deadline)) != 0)
			goto err_free;
	/* The lower ranks connect to us; the service thread accepts them. */
	pthread_mutex_lock(&bs->mu);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double left = deadline - now_s();
	if (left < 0)
		left = 0;
	ts.tv_sec += (time_t)left;
	ts.tv_nsec += (long)((left - (double)(time_t)left) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	rc = 0;
	while (bs->connected < nranks - 1 && !bs->status && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&bs->cv, &bs->mu, &ts);
	if (bs->status)
		rc = bs->status;
	else if (bs->connected < nranks - 1)
		rc = -ETIMEDOUT;
	else
		rc = 0;
	pthread_mutex_unlock(&bs->mu);
	if (rc == -ETIMEDOUT) {
		char missing[128] = "";
		size_t o = 0;
		for (int i = 0; i < rank && o < sizeof(missing) - 8; i++)
			if (!bs->peers[i].up)
				o += (size_t)snprintf(missing + o, sizeof(missing) - o, "%s%d", o ? "," : "", i);
		WEFT_ERROR("bootstrap: rendezvous timed out after %g s (WEFT_CORE_BOOTSTRAP_TIMEOUT): ranks %s never "
			   "connected to this rank",
			   bs->p.timeout, missing);
	}
	if (rc != 0)
		goto err_free;
	WEFT_DEBUG("bootstrap: rank %d of %d connected to every peer (tag %016llx)", rank, nranks,
		   (unsigned long long)bs->tag);
	*out = bs;
	return 0;

err_free:
	bs_free(bs);
	return rc;
}

void weft__bootstrap_destroy(struct weft__bootstrap *bs)
{
	if (!bs)
		return;
	if (bs->thread_started) {
		pthread_mutex_lock(&bs->mu);
		bs->closing = 1;
		pthread_mutex_unlock(&bs->mu);
		wake(bs);
	}
	bs_free(bs);
}

int weft__bootstrap_rank(const struct weft__bootstrap *bs)
{
	return bs->rank;
}

int weft__bootstrap_size(const struct weft__bootstrap *bs)
{
	return bs->nranks;
}

uint64_t weft__bootstrap_tag(const struct weft__bootstrap *bs)
{
	return bs->tag;
}

const char *weft__bootstrap_local_addr(const struct weft__bootstrap *bs)
{
	return bs->local_addr;
}

const char *weft__bootstrap_peer_addr(const struct weft__bootstrap *bs, int peer)
{
	if (peer < 0 || peer >= bs->nranks)
		return NULL;
	return bs->peers[peer].addr;
}

const char *weft__bootstrap_host_id(const struct weft__bootstrap *bs, int rank)
{
	if (rank < 0 || rank >= bs->nranks)
		return NULL;
	return bs->peers[rank].host;
}

uint64_t weft__bootstrap_proc_id(const struct weft__bootstrap *bs, int rank)
{
	if (rank < 0 || rank >= bs->nranks)
		return 0;
	return bs->peers[rank].proc;
}

int weft__bootstrap_listen_port(const struct weft__bootstrap *bs)
{
	return bs->lport;
}

/* ------------------------------------------------------------ messages */

static int bs_send(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, const void *buf, size_t len)
{
	if (peer < 0 || peer >= bs->nranks || (len && !buf)) {
		WEFT_ERROR("bootstrap: send to rank %d of %d with %s buffer: invalid", peer, bs->nranks, buf ? "a" : "no");
		return -EINVAL;
	}
	if (len > bs->p.max_msg) {
		WEFT_ERROR("bootstrap: a %zu-byte message to rank %d is larger than WEFT_CORE_BOOTSTRAP_MAX_MSG (%llu)",
			   len, peer, (unsigned long long)bs->p.max_msg);
		return -EMSGSIZE;
	}
	int rc = weft__bootstrap_status(bs);
	if (rc)
		return rc;
	struct peer *pe = &bs->peers[peer];
	if (peer == bs->rank) {
		struct msg *m = malloc(sizeof(*m));
		uint8_t *d = malloc(len ? len : 1);
		if (!m || !d) {
			free(m);
			free(d);
			return -ENOMEM;
		}
		if (len)
			memcpy(d, buf, len);
		*m = (struct msg){.key = (uint64_t)cls << 32 | tag, .len = len, .data = d};
		pthread_mutex_lock(&bs->mu);
		if (pe->rq_tail)
			pe->rq_tail->next = m;
		else
			pe->rq_head = m;
		pe->rq_tail = m;
		pthread_cond_broadcast(&bs->cv);
		pthread_mutex_unlock(&bs->mu);
		return 0;
	}
	/* The payload is MAC'd with no lock held, so that neither the service
	 * thread (heartbeats, reads) nor other senders wait for it. */
	struct weft__hmac mac;
	struct obuf *b = frame_build(pe->link, T_DATA, cls, tag, buf, len, &mac);
	if (!b)
		return -ENOMEM;
	pthread_mutex_lock(&bs->mu);
	if (bs->status)
		rc = bs->status;
	else if (pe->gone || pe->bye_rcvd)
		rc = -WEFT_ERR_PEER;
	if (rc == 0) {
		frame_seal(pe->link, b, &mac);
		oq_push(pe->link, b);
	}
	pthread_mutex_unlock(&bs->mu);
	if (rc != 0) {
		free(b);
		return rc;
	}
	wake(bs);
	return 0;
}

static int bs_recv(struct weft__bootstrap *bs, int peer, int cls, uint32_t tag, void *buf, size_t len)
{
	if (peer < 0 || peer >= bs->nranks || (len && !buf)) {
		WEFT_ERROR("bootstrap: recv from rank %d of %d with %s buffer: invalid", peer, bs->nranks, buf ? "a" : "no");
		return -EINVAL;
	}
	uint64_t key = (uint64_t)cls << 32 | tag;
	struct peer *pe = &bs->peers[peer];
	struct msg *m = NULL;
	int rc = 0;
	pthread_mutex_lock(&bs->mu);
	for (;;) {
		if ((rc = bs->status) != 0)
			break;
		struct msg **pp = &pe->rq_head, *prev = NULL;
		for (; *pp; prev = *pp, pp = &(*pp)->next)
			if ((*pp)->key == key)
				break;
		if (*pp) {
			m = *pp;
			*pp = m->next;
			if (pe->rq_tail == m)
				pe->rq_tail = prev;
			break;
		}
		if (peer != bs->rank && (pe->gone || pe->bye_rcvd)) {
			rc = -WEFT_ERR_PEER;
			break;
		}
		pthread_cond_wait(&bs->cv, &bs->mu);
	}
	pthread_mutex_unlock(&bs->mu);
	if (rc == -WEFT_ERR_PEER && !bs->status)
		WEFT_ERROR("bootstrap: recv from rank %d (tag %u): that rank has closed its bootstrap", peer, tag);
	if (!m)
		return rc;
	if (m->len != len) {
		WEFT_ERROR("bootstrap: recv from rank %d (tag %u): message of %zu bytes, expected %zu", peer, tag, m->len,
			   len);
		rc = -EMSGSIZE;
	} else if (len) {
		memcpy(buf, m->data, len);
	}
	free(m->data);
	free(m);
	return rc;
}

int weft__bootstrap_send(struct weft__bootstrap *bs, int peer, uint32_t tag, const void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_send(bs, peer, CLS_USER, tag, buf, len);
}

int weft__bootstrap_recv(struct weft__bootstrap *bs, int peer, uint32_t tag, void *buf, size_t len)
{
	if (!bs)
		return -EINVAL;
	return bs_recv(bs, peer, CLS_USER, tag, buf, len);
}

static int gather(struct weft__bootstrap *bs, int cls, const void *mine, void *all, size_t each)
{
	int rc;
	uint8_t *out = all;
	if (each && (!mine || !all))
		return -EINVAL;
	/* All-to-all: the bootstrap is a full mesh already, and every message is
	 * queued, so no ordering between ranks can deadlock. */
	for (int i = 1; i < bs->nranks; i++) {
		int to = (bs->rank + i) % bs->nranks;
		if ((rc = bs_send(bs, to, cls, 0, mine, each)) != 0)
			return rc;
	}
	if (each)
		memmove(out + (size_t)bs->rank * each, mine, each);
	for (int i = 1; i < bs->nranks; i++) {
		int from = (bs->rank - i + bs->nranks) % bs->nranks;
		if ((rc = bs_recv(bs, from, cls, 0, out + (size_t)from * each, each)) != 0)
			return rc;
	}
	return 0;
}

int weft__bootstrap_allgather(struct weft__bootstrap *bs, const void *mine, void *all, size_t each)
{
	if (!bs)
		return -EINVAL;
	return gather(bs, CLS_ALLGATHER, mine, all, each);
}

int weft__bootstrap_barrier(struct weft__bootstrap *bs)
{
	if (!bs)
		return -EINVAL;
	uint8_t one = 1;
	for (int i = 1; i < bs->nranks; i++)
		if (bs_send(bs, (bs->rank + i) % bs->nranks, CLS_BARRIER, 0, &one, 1) != 0)
			return weft__bootstrap_status(bs) ? weft__bootstrap_status(bs) : -WEFT_ERR_PEER;
	for (int i = 1; i < bs->nranks; i++) {
		int rc = bs_recv(bs, (bs->rank - i + bs->nranks) % bs->nranks, CLS_BARRIER, 0, &one, 1);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------- launcher helpers */

static int env_int(const char *name, int *out)
{
	const char *s = getenv(name);
	char *end;
	if (!s || !*s)
		return -ENOENT;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 0 || v > INT_MAX) {
		WEFT_ERROR("bootstrap: %s='%s' is not a non-negative integer", name, s);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

int weft__bootstrap_env_rank(int *rank, int *nranks)
{
	static const char *const pairs[][2] = {
		{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
		{"PMI_RANK", "PMI_SIZE"},
		{"SLURM_PROCID", "SLURM_NTASKS"},
		{"RANK", "WORLD_SIZE"},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		int r, n;
		int rc = env_int(pairs[i][0], &r);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if ((rc = env_int(pairs[i][1], &n)) != 0) {
			if (rc == -ENOENT)
				WEFT_ERROR("bootstrap: %s is set but %s is not", pairs[i][0], pairs[i][1]);
			return -EINVAL;
		}
		if (n < 1 || r >= n) {
			WEFT_ERROR("bootstrap: %s=%d is out of range for %s=%d", pairs[i][0], r, pairs[i][1], n);
			return -EINVAL;
		}
		*rank = r;
		*nranks = n;
		return 0;
	}
	return -ENOENT;
}
