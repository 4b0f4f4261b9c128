/* SPDX-License-Identifier: Apache-2.0 */
/* The rendezvous root: its thread registers each rank's hello, refuses
 * strangers and late or conflicting ranks, and sends every rank the table. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "root.h"
#include "auth.h"
#include "link.h"
#include "net.h"
#include "params.h"
#include "wire.h"
#include "log.h"
#include "le.h"

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
	struct bs_pending pend;
	double linger;   /* after the table: how long late ranks are told it is over */
	double over_at;  /* when the table went out; 0 before */
	int stop;
	struct pollfd *pfd; /* the thread's poll set, kept here so that a forked
			     * child, where the thread is gone, still reaches it */
	sem_t *started; /* posted once the thread has set itself up; see weft__bs_root_start */
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
/* Roots inherited by a child: their memory stays reachable, their sockets closed. */
static struct root *roots_inherited;

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void roots_child(void)
{
	/* A root's thread does not exist in the child: forget the list, and let
	 * go of its sockets, or the child would hold the root's port open (a
	 * rank would then wait in the backlog for nobody instead of being refused). */
	pthread_mutex_init(&roots_mu, NULL);
	for (struct root *r = roots; r; r = r->next) {
		close_fd(&r->lfd);
		close_fd(&r->wake_fd);
		for (int i = 0; i < r->pend.n; i++)
			close_fd(&r->pend.l[i]->fd);
		for (int i = 0; r->ranks && i < r->nranks; i++)
			if (r->ranks[i])
				close_fd(&r->ranks[i]->fd);
		if (!r->next) {
			r->next = roots_inherited;
			roots_inherited = roots;
			break;
		}
	}
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
	weft__bs_pending_clear(&r->pend);
	if (r->ranks)
		for (int i = 0; i < r->nranks; i++)
			weft__bs_link_free(r->ranks[i]);
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
	weft__bs_send_frame_now(l, T_FAIL, 0, m, 4 + n, deadline);
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
	double deadline = weft__bs_now_s() + 1.0;
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
	send_fail(l, err, text, weft__bs_now_s() + 0.5);
	weft__bs_link_free(l);
}

/* A hello arrived on a pending connection: register the rank or refuse it. */
static void root_hello(void *ctx, struct link *l, struct frame *f)
{
	struct root *r = ctx;
	if (r->over_at) {
		/* It holds the secret: a rank reusing an id, or one far too late. */
		root_refuse(r, l, -EALREADY,
			    "the rendezvous for this id is over (all %d ranks joined %.1f s ago); each communicator "
			    "needs a new id from weft_get_unique_id",
			    r->nranks, weft__bs_now_s() - r->over_at);
		return;
	}
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
	int rc = weft__bs_fill_random(&tag, sizeof(tag));
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
		struct obuf *b = weft__bs_frame_make(r->ranks[i], T_TABLE, 0, 0, t, len);
		if (!b) {
			free(t);
			return -ENOMEM;
		}
		weft__bs_oq_push(r->ranks[i], b);
	}
	free(t);
	return 0;
}

/* Makes room for this turn's poll set. Returns -1 when out of memory. */
static int root_grow(struct root *r, struct pollfd **pfd, int *cap)
{
	int n = 2 + r->pend.n + r->nranks;
	if (n > *cap) {
		struct pollfd *np = realloc(*pfd, (size_t)n * sizeof(**pfd));
		if (!np) {
			WEFT_ERROR("bootstrap root %s: out of memory; stopping", r->name);
			return -1;
		}
		*pfd = np;
		*cap = n;
	}
	return 0;
}

/* Builds this turn's poll set: the wake-up eventfd, the listener (unless it
 * rests), the pending connections, then the ranks. Returns its size. */
static int root_prepare(struct root *r, struct pollfd *pfd)
{
	int k = 0;
	pfd[k++] = (struct pollfd){.fd = r->wake_fd, .events = POLLIN};
	pfd[k++] = (struct pollfd){.fd = weft__bs_pending_listen_fd(&r->pend, r->lfd), .events = POLLIN};
	for (int i = 0; i < r->pend.n; i++)
		pfd[k++] = (struct pollfd){.fd = r->pend.l[i]->fd, .events = POLLIN};
	for (int i = 0; i < r->nranks; i++) {
		struct link *l = r->ranks[i];
		pfd[k++] = (struct pollfd){.fd = l ? l->fd : -1, .events = (short)(POLLIN | (l && l->oq_head ? POLLOUT : 0))};
	}
	return k;
}

/* Waits for the next event or a handshake's deadline. Returns -1 when poll fails. */
static int root_poll(struct root *r, struct pollfd *pfd, int k)
{
	double next = weft__bs_pending_deadline(&r->pend, weft__bs_now_s() + 1.0);
	if (poll(pfd, (nfds_t)k, weft__bs_ms_until(next)) < 0 && errno != EINTR) {
		WEFT_ERROR("bootstrap root %s: poll: %s", r->name, strerror(errno));
		return -1;
	}
	return 0;
}

/* Registered ranks: before the table, anything they send or their leaving
 * ends the rendezvous (returns 1); after it, their tables are written out. */
static int root_on_ranks(struct root *r, int sent)
{
	int abandon = 0;
	for (int i = 0; i < r->nranks && !abandon; i++) {
		struct link *l = r->ranks[i];
		if (!l)
			continue;
		struct frame f = {0};
		int rc = weft__bs_link_pump(l, &f);
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
				weft__bs_link_free(l);
				r->ranks[i] = NULL;
			}
		} else if (l->oq_head && weft__bs_oq_flush(l) != 0) {
			weft__bs_link_free(l);
			r->ranks[i] = NULL;
		}
	}
	return abandon;
}

/* Every rank has arrived: queue the tables. The listener stays a while, to
 * tell a rank that reuses the id why it cannot join. Returns -1 when out of
 * memory. */
static int root_on_complete(struct root *r)
{
	if (root_send_tables(r) != 0) {
		WEFT_ERROR("bootstrap root %s: out of memory building the peer table", r->name);
		return -1;
	}
	WEFT_DEBUG("bootstrap root %s: all %d ranks arrived; table sent", r->name, r->nranks);
	r->over_at = weft__bs_now_s();
	return 0;
}

/* After the tables: lets go of each rank whose table is written out. Returns 1
 * when none is left, and the root's work is done. */
static int root_drained(struct root *r)
{
	int done = 1;
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i] && !r->ranks[i]->oq_head) {
			weft__bs_link_free(r->ranks[i]);
			r->ranks[i] = NULL;
		}
	for (int i = 0; i < r->nranks; i++)
		if (r->ranks[i])
			done = 0;
	return done;
}

/* The root leaves the process-wide list and is freed. */
static void root_exit(struct root *r)
{
	pthread_mutex_lock(&roots_mu);
	for (struct root **p = &roots; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	pthread_mutex_unlock(&roots_mu);
	root_free(r);
}

/* The root's thread: one poll loop over the wake-up eventfd, the listener,
 * the pending connections and the ranks, dispatching each kind of event. */
static void *root_main(void *arg)
{
	struct root *r = arg;
	int cap = 2 + MAX_PENDING, sent = 0;
	struct pollfd *pfd = malloc((size_t)cap * sizeof(*pfd));

	r->pfd = pfd;
	weft__log_set_rank(-1);
	sem_post(r->started);
	if (!pfd) {
		WEFT_ERROR("bootstrap root %s: out of memory; stopping", r->name);
		goto out;
	}
	for (;;) {
		if (root_grow(r, &pfd, &cap) != 0)
			break;
		r->pfd = pfd;
		int k = root_prepare(r, pfd);
		if (root_poll(r, pfd, k) != 0)
			break;
		if (pfd[0].revents || __atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
			break;
		if (pfd[1].revents)
			weft__bs_pending_accept(&r->pend, r->lfd);
		/* Pending connections advance their handshakes; a hello registers a
		 * rank, or after the table is refused. */
		weft__bs_pending_advance(&r->pend, root_hello, r);
		if (root_on_ranks(r, sent))
			break;
		if (!sent && r->nranks && r->arrived == r->nranks) {
			if (root_on_complete(r) != 0)
				break;
			sent = 1;
		}
		if (sent && root_drained(r) && weft__bs_now_s() >= r->over_at + r->linger)
			break;
	}
out:
	r->pfd = NULL;
	free(pfd);
	root_exit(r);
	return NULL;
}

/* Starts a root listening on addr:port (port 0: any). */
int weft__bs_root_start(const struct bs_params *p, uint32_t addr_be, uint16_t port, const uint8_t secret[32],
			uint64_t id_nonce, uint16_t *port_out, uint64_t *serial_out)
{
	pthread_once(&atfork_once, atfork_init);
	struct root *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->lfd = r->wake_fd = -1;
	int rc = weft__bs_tcp_listen(addr_be, port, &r->lfd, &port);
	if (rc != 0 && port != 0 && rc == -EADDRNOTAVAIL) {
		/* host:port named another of this host's names (or a NAT'd one): listen on all. */
		rc = weft__bs_tcp_listen(htonl(INADDR_ANY), port, &r->lfd, &port);
	}
	if (rc != 0)
		goto err_free;
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->wake_fd < 0) {
		rc = -errno;
		WEFT_ERROR("bootstrap: eventfd: %s", strerror(errno));
		goto err_free;
	}
	weft__bs_fmt_addr(addr_be, port, r->name, sizeof(r->name));
	memcpy(r->secret, secret, 32);
	r->id_nonce = id_nonce;
	r->hs_timeout = p->hs_timeout;
	r->linger = p->timeout;
	weft__bs_pending_init(&r->pend, r->secret, r->id_nonce, r->hs_timeout, r->name);

	/* weft__bs_root_start returns only once the thread has made its first
	 * allocations: a process that forks right after weft_get_unique_id (tests
	 * do) must not fork while that thread holds an allocator lock, which
	 * fork-unsafe allocators (sanitizers') would leave locked in the child. */
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

void weft__bs_root_stop_where(int (*match)(const struct root *, const void *), const void *arg)
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

int weft__bs_match_serial(const struct root *r, const void *arg)
{
	return r->serial == *(const uint64_t *)arg;
}

int weft__bs_match_key(const struct root *r, const void *arg)
{
	const struct bs_root_key *k = arg;
	return r->id_nonce == k->id_nonce && !memcmp(r->secret, k->secret, 32);
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
	weft__bs_root_stop_where(match_id, &u);
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
	if ((rc = weft__bs_params_load(&p)) != 0)
		return rc;
	if ((rc = weft__bs_choose_addr(&p, 0, &addr)) != 0)
		return rc;
	memset(&u, 0, sizeof(u));
	u.magic = ID_MAGIC;
	u.version = WEFT__BOOTSTRAP_VERSION;
	u.family = AF_INET;
	memcpy(u.addr, &addr, 4);
	u.has_secret = 1;
	if ((rc = weft__bs_fill_random(u.secret, sizeof(u.secret))) != 0 ||
	    (rc = weft__bs_fill_random(&u.nonce, sizeof(u.nonce))) != 0)
		return rc;
	if ((rc = weft__bs_root_start(&p, addr, 0, u.secret, u.nonce, &port, NULL)) != 0)
		return rc;
	u.port = htons(port);
	memcpy(id->internal, &u, sizeof(u));
	return 0;
}

WEFT_API int weft_get_unique_id(struct weft_unique_id *id)
{
	return weft__bootstrap_make_id(id);
}
