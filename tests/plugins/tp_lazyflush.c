/* SPDX-License-Identifier: Apache-2.0 */
/* lazyflush: a test transport for weft-plugin-check, made from
 * examples/plugin-skeleton/skeleton.c. It reaches ranks of other processes on
 * this host over TCP on loopback: put and signal are messages that the
 * target's progress lands in its memory. Its flush is wrong on purpose: it
 * returns 0 at once, before the target landed anything, so a check of remote
 * completion must catch it. Parameters (WEFT_LAZYFLUSH_<KEY>):
 *   correct = 1   flush waits for the target's acknowledgement of every put
 *                 and signal: a correct transport that needs target progress;
 *   crash = init|connect|put   dies by SIGSEGV there, for the checker's crash
 *                 reports (LF_CRASH_AT_INIT builds a file that always does). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/plugin.h>

static const struct weft_core_api *lf_core;
static int lf_correct;
static char lf_crash[16];

#define LF_LOG(level, ...) lf_core->log(lf_core->self, (level), __VA_ARGS__)
#define LF_CONNECT_TIMEOUT_MS 20000
#define LF_TXQ_MAX ((size_t)512 << 20) /* queued bytes before put answers -EAGAIN */
#define LF_RX_BUDGET ((size_t)8 << 20) /* bytes landed per endpoint per progress call */

static void lf_maybe_crash(const char *where)
{
	if (strcmp(lf_crash, where) == 0)
		raise(SIGSEGV);
}

/* A registered region; the blob names it by id, which the target looks up. */
struct lf_region {
	struct lf_region *next;
	uint64_t id;
	char *base;
	size_t len;
};

/* An imported region: the peer's id and length. */
struct lf_rregion {
	uint64_t id;
	uint64_t len;
};

enum { LF_PUT = 1, LF_SIG = 2, LF_ACK = 3 };

/* One message on the stream; a PUT is followed by len payload bytes. */
struct lf_hdr {
	uint32_t type;
	uint32_t reserved;
	uint64_t id;  /* target region */
	uint64_t off;
	uint64_t arg; /* PUT: length; SIG: token; ACK: sequence acknowledged */
	uint64_t seq;
};

struct lf_context;

struct lf_endpoint {
	struct lf_endpoint *next;
	struct lf_context *tc;
	int peer;
	int lfd, fd; /* listening socket until connected, then the stream */
	int broken;  /* 0, or the error every later call returns */
	int closed;  /* the peer closed the stream with nothing in flight */
	/* Outgoing bytes, sent from tx_head on. */
	unsigned char *tx;
	size_t tx_head, tx_len, tx_cap;
	uint64_t posted, acked; /* sequence numbers of PUT and SIG messages */
	/* Incoming message being read. */
	struct lf_hdr rh;
	size_t rh_got;
	char *rdst;
	size_t rleft;
	int rdrop; /* the payload is for a region no longer registered: read and dropped */
};

struct lf_context {
	pthread_mutex_t mu;
	int rank;
	uint64_t comm_tag;
	struct in_addr addr;
	uint64_t next_id;
	struct lf_region *regions;
	struct lf_endpoint *eps;
};

/* Sent by the connecting side so that the listener knows who called. */
#define LF_HELLO_MAGIC 0x4c465a31u /* "LFZ1" */
struct lf_hello {
	uint32_t magic;
	int32_t rank;
	uint64_t comm_tag;
};

struct lf_addr {
	uint32_t magic;
	uint32_t ip;   /* network order */
	uint16_t port; /* network order */
	uint16_t reserved;
	int32_t rank;
};

#define LF_BLOB_MAGIC 0x4c464231u /* "LFB1" */
struct lf_blob {
	uint32_t magic;
	uint32_t version; /* 1 */
	uint64_t id;
	uint64_t len;
};

/* ------------------------------------------------------------ context */

static int lf_open(const struct weft_tp_open_args *args, void **tc)
{
	struct lf_context *c = lf_core->calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	if (!args->local_addr || inet_pton(AF_INET, args->local_addr, &c->addr) != 1)
		c->addr.s_addr = htonl(INADDR_LOOPBACK);
	pthread_mutex_init(&c->mu, NULL);
	c->rank = args->rank;
	c->comm_tag = args->comm_tag;
	c->next_id = 1;
	*tc = c;
	return 0;
}

static void lf_close(void *tc)
{
	struct lf_context *c = tc;
	pthread_mutex_destroy(&c->mu);
	lf_core->free(c);
}

/* ------------------------------------------------------------ memory */

static int lf_mem_register(void *tc, void *ptr, size_t len, enum weft_mem_type type, void **mh)
{
	struct lf_context *c = tc;
	if (type != WEFT_MEM_HOST)
		return -ENOTSUP;
	struct lf_region *r = lf_core->calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->base = ptr;
	r->len = len;
	pthread_mutex_lock(&c->mu);
	r->id = c->next_id++;
	r->next = c->regions;
	c->regions = r;
	pthread_mutex_unlock(&c->mu);
	*mh = r;
	return 0;
}

static int lf_mem_deregister(void *tc, void *mh)
{
	struct lf_context *c = tc;
	pthread_mutex_lock(&c->mu);
	for (struct lf_region **p = &c->regions; *p; p = &(*p)->next)
		if (*p == mh) {
			*p = ((struct lf_region *)mh)->next;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	lf_core->free(mh);
	return 0;
}

static int lf_mem_serialize(void *tc, void *mh, void *buf, size_t *len)
{
	const struct lf_region *r = mh;
	if (!buf || *len < sizeof(struct lf_blob)) {
		*len = sizeof(struct lf_blob);
		return -ENOSPC;
	}
	struct lf_blob b = {.magic = LF_BLOB_MAGIC, .version = 1, .id = r->id, .len = r->len};
	memcpy(buf, &b, sizeof(b));
	*len = sizeof(b);
	return 0;
}

static int lf_mem_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	struct lf_blob b;
	if (len != sizeof(b)) {
		LF_LOG(WEFT_LOG_ERROR, "rank %d's blob section is %zu bytes, expected %zu", peer, len, sizeof(b));
		return -WEFT_ERR_PROTOCOL;
	}
	memcpy(&b, buf, sizeof(b));
	if (b.magic != LF_BLOB_MAGIC || b.version != 1 || b.id == 0) {
		LF_LOG(WEFT_LOG_ERROR, "rank %d's blob section has magic 0x%x version %u id %llu: not a lazyflush v1 "
		       "section", peer, b.magic, b.version, (unsigned long long)b.id);
		return -WEFT_ERR_PROTOCOL;
	}
	struct lf_rregion *r = lf_core->alloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->id = b.id;
	r->len = b.len;
	*rmh = r;
	return 0;
}

static int lf_mem_release(void *tc, void *rmh)
{
	lf_core->free(rmh);
	return 0;
}

/* ---------------------------------------------------------- endpoints */

static int lf_endpoint(void *tc, const struct weft_tp_peer *peer, void *addr, size_t *len, void **ep)
{
	struct lf_context *c = tc;
	if (peer->peer_class == WEFT_PEER_OTHER_HOST)
		return -EHOSTUNREACH;
	if (!addr || *len < sizeof(struct lf_addr)) {
		*len = sizeof(struct lf_addr);
		return -ENOSPC;
	}
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = c->addr};
	socklen_t sl = sizeof(sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 4) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
		int err = errno;
		LF_LOG(WEFT_LOG_ERROR, "cannot listen on %s: %s", inet_ntoa(c->addr), strerror(err));
		close(fd);
		return -err;
	}
	struct lf_endpoint *e = lf_core->calloc(1, sizeof(*e));
	if (!e) {
		close(fd);
		return -ENOMEM;
	}
	e->tc = c;
	e->peer = peer->rank;
	e->lfd = fd;
	e->fd = -1;
	struct lf_addr a = {.magic = LF_HELLO_MAGIC, .ip = sa.sin_addr.s_addr, .port = sa.sin_port, .rank = c->rank};
	memcpy(addr, &a, sizeof(a));
	*len = sizeof(a);
	*ep = e;
	return 0;
}

static int lf_wait_fd(int fd, short ev)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int rc;
	do
		rc = poll(&p, 1, LF_CONNECT_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	return rc > 0 ? 0 : rc == 0 ? -ETIMEDOUT : -errno;
}

/* Reads or writes exactly len bytes of a blocking exchange, bounded in time. */
static int lf_xfer(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	while (done < len) {
		int rc = lf_wait_fd(fd, out ? POLLOUT : POLLIN);
		if (rc != 0)
			return rc;
		ssize_t n = out ? send(fd, (char *)buf + done, len - done, MSG_NOSIGNAL)
				: recv(fd, (char *)buf + done, len - done, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (n > 0)
			done += (size_t)n;
	}
	return 0;
}

/* The lower rank calls the higher one, which accepts: both ends made their
 * listening socket before the addresses were swapped, so neither waits on
 * the other's connect call. */
static int lf_connect(void *ep, const void *peer_addr, size_t len)
{
	struct lf_endpoint *e = ep;
	struct lf_context *c = e->tc;
	struct lf_addr a;
	lf_maybe_crash("connect");
	if (e->fd >= 0)
		return -EISCONN;
	if (len != sizeof(a)) {
		LF_LOG(WEFT_LOG_ERROR, "rank %d's endpoint address is %zu bytes, expected %zu", e->peer, len, sizeof(a));
		return -WEFT_ERR_PROTOCOL;
	}
	memcpy(&a, peer_addr, sizeof(a));
	if (a.magic != LF_HELLO_MAGIC || a.rank != e->peer)
		return -WEFT_ERR_PROTOCOL;
	int fd = -1, rc;
	struct lf_hello h = {.magic = LF_HELLO_MAGIC, .rank = c->rank, .comm_tag = c->comm_tag};
	if (c->rank < e->peer) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = a.port, .sin_addr.s_addr = a.ip};
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
			rc = -errno;
		else
			rc = lf_xfer(fd, &h, sizeof(h), 1);
	} else {
		rc = lf_wait_fd(e->lfd, POLLIN);
		if (rc == 0 && (fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			rc = -errno;
		struct lf_hello got;
		if (rc == 0)
			rc = lf_xfer(fd, &got, sizeof(got), 0);
		if (rc == 0 && (got.magic != LF_HELLO_MAGIC || got.rank != e->peer || got.comm_tag != c->comm_tag))
			rc = -WEFT_ERR_PROTOCOL;
	}
	if (rc != 0) {
		LF_LOG(WEFT_LOG_ERROR, "connecting to rank %d: %s", e->peer, strerror(rc < 0 && rc > -256 ? -rc : EPROTO));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	close(e->lfd);
	e->lfd = -1;
	pthread_mutex_lock(&c->mu);
	e->fd = fd;
	e->next = c->eps;
	c->eps = e;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static int lf_disconnect(void *ep)
{
	struct lf_endpoint *e = ep;
	struct lf_context *c = e->tc;
	pthread_mutex_lock(&c->mu);
	for (struct lf_endpoint **p = &c->eps; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	if (e->fd >= 0)
		close(e->fd);
	if (e->lfd >= 0)
		close(e->lfd);
	lf_core->free(e->tx);
	lf_core->free(e);
	return 0;
}

/* ------------------------------------------------------------ the wire */

static int lf_fail(struct lf_endpoint *e, int rc, const char *what)
{
	if (!e->broken) {
		LF_LOG(WEFT_LOG_ERROR, "rank %d: %s", e->peer, what);
		e->broken = rc;
	}
	return rc;
}

/* Sends what the queue holds, as far as the socket takes it. */
static int lf_send_some(struct lf_endpoint *e)
{
	while (e->tx_head < e->tx_len) {
		ssize_t n = send(e->fd, e->tx + e->tx_head, e->tx_len - e->tx_head, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return lf_fail(e, -WEFT_ERR_PEER, "the peer closed its connection (send)");
		e->tx_head += (size_t)n;
	}
	e->tx_head = e->tx_len = 0;
	return 0;
}

/* Appends one message to the queue: 0, -EAGAIN (full) or -ENOMEM. */
static int lf_append(struct lf_endpoint *e, const struct lf_hdr *h, const void *payload, size_t plen)
{
	size_t need = sizeof(*h) + plen, used = e->tx_len - e->tx_head;
	if (plen > 0 && used > 0 && used + need > LF_TXQ_MAX)
		return -EAGAIN;
	if (e->tx_head > 0 && e->tx_len + need > e->tx_cap) {
		memmove(e->tx, e->tx + e->tx_head, used);
		e->tx_len = used;
		e->tx_head = 0;
	}
	if (e->tx_len + need > e->tx_cap) {
		size_t cap = e->tx_cap ? e->tx_cap : 65536;
		while (cap < e->tx_len + need)
			cap *= 2;
		unsigned char *nb = lf_core->alloc(cap);
		if (!nb)
			return -ENOMEM;
		if (e->tx_len)
			memcpy(nb, e->tx, e->tx_len);
		lf_core->free(e->tx);
		e->tx = nb;
		e->tx_cap = cap;
	}
	memcpy(e->tx + e->tx_len, h, sizeof(*h));
	if (plen)
		memcpy(e->tx + e->tx_len + sizeof(*h), payload, plen);
	e->tx_len += need;
	return 0;
}

/* A message that must not wait (an acknowledgement): appended and sent. */
static int lf_queue(struct lf_endpoint *e, const struct lf_hdr *h)
{
	int rc = lf_append(e, h, NULL, 0);
	return rc == 0 ? lf_send_some(e) : rc;
}

static const struct lf_region *lf_find(const struct lf_context *c, uint64_t id)
{
	for (const struct lf_region *r = c->regions; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

/* A complete header arrived: check it and land what it says. */
static int lf_take_header(struct lf_endpoint *e)
{
	const struct lf_hdr *h = &e->rh;
	if (h->type == LF_ACK) {
		if (h->arg > e->acked)
			e->acked = h->arg;
		return 0;
	}
	const struct lf_region *r = lf_find(e->tc, h->id);
	uint64_t n = h->type == LF_PUT ? h->arg : sizeof(uint64_t);
	if ((h->type != LF_PUT && h->type != LF_SIG) || (r && (h->off > r->len || n > r->len - h->off)))
		return lf_fail(e, -WEFT_ERR_PROTOCOL, "malformed message (unknown type, or out of bounds)");
	if (!r) {
		/* Its flush let the origin go on before this landed, and the target
		 * has deregistered the region since: the late bytes are dropped. */
		static char scratch[65536];
		if (h->type == LF_PUT && n > 0) {
			e->rdst = scratch;
			e->rleft = (size_t)n;
			e->rdrop = 1;
		}
		return 0;
	}
	if (h->type == LF_SIG) {
		__atomic_store_n((uint64_t *)(void *)(r->base + h->off), h->arg, __ATOMIC_RELEASE);
		struct lf_hdr ack = {.type = LF_ACK, .arg = h->seq};
		return lf_queue(e, &ack);
	}
	e->rdst = r->base + h->off;
	e->rleft = (size_t)n;
	return 0;
}

/* Lands what arrived, bounded so that a call returns promptly. */
static int lf_recv_some(struct lf_endpoint *e)
{
	size_t budget = LF_RX_BUDGET;
	while (budget > 0) {
		ssize_t n;
		if (e->rdst) {
			size_t want = e->rleft < budget ? e->rleft : budget;
			if (e->rdrop && want > 65536)
				want = 65536;
			n = recv(e->fd, e->rdst, want, MSG_DONTWAIT);
		} else {
			n = recv(e->fd, (char *)&e->rh + e->rh_got, sizeof(e->rh) - e->rh_got, MSG_DONTWAIT);
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 && !e->rdst && e->rh_got == 0 && e->tx_len == e->tx_head) {
			/* An orderly close (the peer's disconnect): not an error until
			 * something is sent to it. */
			e->closed = 1;
			return 0;
		}
		if (n <= 0)
			return lf_fail(e, -WEFT_ERR_PEER, "the peer closed its connection mid-message");
		budget -= (size_t)n < budget ? (size_t)n : budget;
		if (e->rdst) {
			if (!e->rdrop)
				e->rdst += n;
			e->rleft -= (size_t)n;
			if (e->rleft == 0) {
				e->rdst = NULL;
				e->rdrop = 0;
				struct lf_hdr ack = {.type = LF_ACK, .arg = e->rh.seq};
				int rc = lf_queue(e, &ack);
				if (rc != 0)
					return rc;
			}
			continue;
		}
		e->rh_got += (size_t)n;
		if (e->rh_got < sizeof(e->rh))
			continue;
		e->rh_got = 0;
		int rc = lf_take_header(e);
		if (rc != 0)
			return rc;
		if (e->rdst && e->rleft == 0)
			e->rdst = NULL;
	}
	return 0;
}

static int lf_ep_progress(struct lf_endpoint *e)
{
	if (e->broken)
		return e->broken;
	if (e->closed)
		return e->tx_len > e->tx_head ? lf_fail(e, -WEFT_ERR_PEER, "the peer closed its connection") : 0;
	int rc = lf_send_some(e);
	if (rc == 0)
		rc = lf_recv_some(e);
	return rc;
}

/* True when [off, off+len) lies inside a region of rlen bytes, without overflow. */
static int lf_in_bounds(uint64_t rlen, uint64_t off, uint64_t len)
{
	return off <= rlen && len <= rlen - off;
}

static int lf_put(void *ep, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len)
{
	struct lf_endpoint *e = ep;
	const struct lf_rregion *dst = rmh;
	const struct lf_region *src = mh;
	lf_maybe_crash("put");
	if (e->fd < 0)
		return -ENOTCONN;
	if (e->broken || e->closed)
		return e->broken ? e->broken : -WEFT_ERR_PEER;
	if (!lf_in_bounds(dst->len, roff, len) || !lf_in_bounds(src->len, loff, len))
		return -EINVAL;
	if (len == 0)
		return 0;
	pthread_mutex_lock(&e->tc->mu);
	struct lf_hdr h = {.type = LF_PUT, .id = dst->id, .off = roff, .arg = len, .seq = e->posted + 1};
	/* The payload is copied into the queue: the source is reusable at once. */
	int rc = lf_append(e, &h, src->base + loff, len);
	if (rc == 0) {
		e->posted++;
		rc = lf_send_some(e);
	}
	pthread_mutex_unlock(&e->tc->mu);
	return rc;
}

static int lf_signal(void *ep, void *rmh, uint64_t roff, uint64_t value)
{
	struct lf_endpoint *e = ep;
	const struct lf_rregion *dst = rmh;
	if (e->fd < 0)
		return -ENOTCONN;
	if (e->broken || e->closed)
		return e->broken ? e->broken : -WEFT_ERR_PEER;
	if (!lf_in_bounds(dst->len, roff, sizeof(uint64_t)) || roff % sizeof(uint64_t) != 0)
		return -EINVAL;
	pthread_mutex_lock(&e->tc->mu);
	struct lf_hdr h = {.type = LF_SIG, .id = dst->id, .off = roff, .arg = value, .seq = e->posted + 1};
	int rc = lf_append(e, &h, NULL, 0);
	if (rc == 0) {
		e->posted++;
		rc = lf_send_some(e);
	}
	pthread_mutex_unlock(&e->tc->mu);
	return rc;
}

/* The bug under test: without `correct`, 0 at once, while the messages may
 * still sit in the queue or the socket and the target has landed nothing. */
static int lf_flush(void *ep)
{
	struct lf_endpoint *e = ep;
	if (e->fd < 0)
		return -ENOTCONN;
	if (e->broken)
		return e->broken;
	if (!lf_correct)
		return 0;
	pthread_mutex_lock(&e->tc->mu);
	int rc = 0;
	if (e->tx_len > e->tx_head || e->acked < e->posted) {
		rc = lf_ep_progress(e);
		if (rc == 0 && (e->tx_len > e->tx_head || e->acked < e->posted))
			rc = e->closed ? lf_fail(e, -WEFT_ERR_PEER, "the peer closed with puts unacknowledged") : -EAGAIN;
	}
	pthread_mutex_unlock(&e->tc->mu);
	return rc;
}

static int lf_progress(void *tc)
{
	struct lf_context *c = tc;
	int rc = 0;
	pthread_mutex_lock(&c->mu);
	for (struct lf_endpoint *e = c->eps; e; e = e->next) {
		int erc = lf_ep_progress(e);
		if (erc != 0 && rc == 0)
			rc = erc == -WEFT_ERR_PROTOCOL ? erc : -WEFT_ERR_PEER;
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static int lf_describe(void *tc, char *buf, size_t len)
{
	int n = snprintf(buf, len, "TCP on loopback, landed by the target's progress; flush %s (test transport)",
			 lf_correct ? "waits for acknowledgements" : "does not wait");
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static int lf_probe(struct weft_tp_device *devs, int *n)
{
	if (*n < 1) {
		*n = 1;
		return -ENOSPC;
	}
	memset(&devs[0], 0, sizeof(devs[0]));
	devs[0].size = sizeof(devs[0]);
	snprintf(devs[0].name, sizeof(devs[0].name), "lo");
	snprintf(devs[0].link, sizeof(devs[0].link), "tcp");
	devs[0].numa_node = -1;
	devs[0].mem_types = 1u << WEFT_MEM_HOST;
	devs[0].peer_classes = 1u << WEFT_PEER_SAME_PROCESS | 1u << WEFT_PEER_SAME_HOST;
	*n = 1;
	return 0;
}

static int lf_ep_describe(void *ep, char *buf, size_t len)
{
	const struct lf_endpoint *e = ep;
	int n = snprintf(buf, len, "tcp peer=%d", e->peer);
	return n >= 0 && (size_t)n < len ? 0 : -ENOSPC;
}

static const struct weft_transport_ops lf_ops = {
	.size = sizeof(struct weft_transport_ops),
	.open = lf_open,
	.close = lf_close,
	.mem_register = lf_mem_register,
	.mem_deregister = lf_mem_deregister,
	.mem_serialize = lf_mem_serialize,
	.mem_import = lf_mem_import,
	.mem_release = lf_mem_release,
	.endpoint = lf_endpoint,
	.connect = lf_connect,
	.disconnect = lf_disconnect,
	.put = lf_put,
	.signal = lf_signal,
	.flush = lf_flush,
	.progress = lf_progress,
	.describe = lf_describe,
	.probe = lf_probe,
	.ep_describe = lf_ep_describe,
};

static const struct weft_plugin_desc lf_desc = {
	.size = sizeof(struct weft_plugin_desc),
	.abi_major = WEFT_PLUGIN_ABI_MAJOR,
	.abi_minor = WEFT_PLUGIN_ABI_MINOR,
	.kind = WEFT_PLUGIN_TRANSPORT,
	.name = "lazyflush",
	.ops = &lf_ops,
};

static const struct weft_plugin_desc *const lf_descs[] = {&lf_desc, NULL};

WEFT_PLUGIN_EXPORT const struct weft_plugin_desc *const *weft_plugin_init(const struct weft_core_api *core)
{
	if (!weft_core_api_usable(core))
		return NULL;
	lf_core = core;
#ifdef LF_CRASH_AT_INIT
	raise(SIGSEGV);
#endif
	static const struct weft_param_decl params[] = {
		{.size = sizeof(struct weft_param_decl), .section = "lazyflush", .key = "correct",
		 .type = WEFT_PARAM_BOOL, .default_value = "0",
		 .help = "Make flush wait for the target's acknowledgements (a correct transport)."},
		{.size = sizeof(struct weft_param_decl), .section = "lazyflush", .key = "crash",
		 .type = WEFT_PARAM_STRING, .default_value = "",
		 .help = "Die by SIGSEGV in init, connect or put (checker tests)."},
	};
	size_t bad = 0;
	const char *crash = NULL;
	int rc = weft_plugin_declare_params(core, params, 2, &bad);
	if (rc == 0)
		rc = core->param_get(core->self, "lazyflush", "correct", WEFT_PARAM_BOOL, &lf_correct, NULL);
	if (rc == 0)
		rc = core->param_get(core->self, "lazyflush", "crash", WEFT_PARAM_STRING, &crash, NULL);
	if (rc != 0) {
		core->log(core->self, WEFT_LOG_ERROR, "cannot read the lazyflush parameters: %d", rc);
		return NULL;
	}
	snprintf(lf_crash, sizeof(lf_crash), "%s", crash ? crash : "");
	lf_maybe_crash("init");
	return lf_descs;
}
