/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for what the bootstrap reads from the network: the acceptor's side of
 * the handshake (a stranger's first bytes), the frame reader (magic, announced
 * length against the limit, MAC and sequence), and what authenticated frames
 * are checked for afterwards (peer hello, the root's table, peer messages),
 * also on a link with no practical length limit (mode 3).
 * The bytes travel through a real socketpair into the same weft__bs_link_pump
 * the service thread runs; the bootstrap modules whose static parts it calls
 * (hs_keys, accept_peer, deliver, parse_table) are compiled in. */
#include "bootstrap/auth.c"
#include "bootstrap/service.c"
#include "bootstrap/bootstrap.c"

#include <signal.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NRANKS 4
#define FZ_RANK 2
#define FZ_MAX_LEN 8192 /* the limit links carry (peer links: bootstrap_max_msg) */
static const uint8_t fz_secret[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
static const uint64_t fz_nonce = 0x1122334455667788ull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("WEFT_LOG_FILE", "/dev/null", 1);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Writes what the socket takes without blocking; the reader drains between. */
static size_t push(int fd, const uint8_t *p, size_t n)
{
	ssize_t w = send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	return w > 0 ? (size_t)w : 0;
}

static struct weft__bootstrap *stub_bs(void)
{
	struct weft__bootstrap *bs = calloc(1, sizeof(*bs));
	bs->rank = FZ_RANK;
	bs->nranks = FZ_NRANKS;
	bs->tag = 0xfeedfacecafebeefull;
	bs->p.max_msg = FZ_MAX_LEN;
	pthread_mutex_init(&bs->mu, NULL);
	pthread_cond_init(&bs->cv, NULL);
	bs->peers = calloc(FZ_NRANKS, sizeof(*bs->peers));
	bs->peers[0].link = weft__bs_link_new(-1, "peer0", FZ_MAX_LEN);
	return bs;
}

static void stub_free(struct weft__bootstrap *bs)
{
	for (int i = 0; i < FZ_NRANKS; i++) {
		struct peer *pe = &bs->peers[i];
		while (pe->rq_head) {
			struct msg *m = pe->rq_head;
			pe->rq_head = m->next;
			free(m->data);
			free(m);
		}
		weft__bs_link_free(pe->link);
	}
	free(bs->peers);
	pthread_mutex_destroy(&bs->mu);
	pthread_cond_destroy(&bs->cv);
	free(bs);
}

/* What the receiving rank does with an authenticated frame. */
static void checks(struct weft__bootstrap *bs, struct frame *f)
{
	uint8_t hello[HELLO_LEN] = {0};
	parse_table(bs, f, hello);
	/* accept_peer either frees the link or installs it as the peer's. */
	struct link *l = weft__bs_link_new(-1, "stranger", SMALL_FRAME);
	struct frame copy = *f;
	struct link *saved[FZ_NRANKS];
	for (int i = 0; i < FZ_NRANKS; i++)
		saved[i] = bs->peers[i].link;
	accept_peer(bs, l, &copy);
	for (int i = 0; i < FZ_NRANKS; i++) {
		if (bs->peers[i].link != saved[i]) {
			/* Installed: a real hello; undo it so the next frame starts fresh. */
			weft__bs_link_free(bs->peers[i].link);
			bs->peers[i].link = saved[i];
			bs->peers[i].up = 0;
			bs->connected--;
		}
	}
	deliver(bs, 0, f); /* frees f->buf */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	int mode = data[0] % 4;
	data++;
	size--;
	/* mode 3: mode 2 on a link whose limit is WEFT_CORE_BOOTSTRAP_MAX_MSG at its
	 * largest (2^64 - 1), with the first frame's magic set and its length
	 * forced into the top 32 values, where length + MAC wraps (lower lengths would be legitimate
	 * allocations of terabytes, which libFuzzer counts as out of memory). The
	 * reader must refuse them; it once allocated the wrapped size instead. */
	uint8_t *own = NULL;
	if (mode == 3) {
		if (size < 24 || !(own = malloc(size))) {
			close(sv[0]);
			close(sv[1]);
			return 0;
		}
		memcpy(own, data, size);
		put32(own, FRAME_MAGIC);
		memset(own + 17, 0xff, 7);
		own[16] |= 0xe0;
		data = own;
	}
	struct link *rx = weft__bs_link_new(sv[0], "fuzz", mode == 3 ? UINT64_MAX : FZ_MAX_LEN);
	struct weft__bootstrap *bs = stub_bs();
	struct frame f = {0};

	if (mode == 0) {
		/* A stranger on the listener: raw handshake bytes. */
		weft__bs_pending_start(rx, 5.0);
		size_t off = 0;
		for (int rounds = 0; rounds < 64; rounds++) {
			off += push(sv[1], data + off, size - off);
			if (off == size)
				shutdown(sv[1], SHUT_WR);
			int rc = weft__bs_pending_step(rx, fz_secret, fz_nonce, &f);
			if (rc == 1) {
				checks(bs, &f);
				continue;
			}
			if (rc < 0)
				break;
			/* Drain what the acceptor answered so its sends never fail. */
			uint8_t sink[256];
			while (recv(sv[1], sink, sizeof(sink), MSG_DONTWAIT) > 0) {
			}
		}
	} else {
		/* An authenticated peer: keys agreed. mode 1 seals each frame the input
		 * describes (so the checks after the MAC are reached), modes 2 and 3
		 * send the bytes as they are (header, length and MAC checks). */
		struct link *tx = weft__bs_link_new(sv[1], "fuzz-tx", FZ_MAX_LEN);
		uint8_t ni[32] = {7}, na[32] = {9};
		hs_keys(rx, fz_secret, fz_nonce, ni, na, 0);
		hs_keys(tx, fz_secret, fz_nonce, ni, na, 1);
		size_t off = 0;
		int open = 1;
		while (open) {
			if (mode == 1) {
				/* type u8, cls u8, tag u8, len u16, flip u16, payload */
				if (size - off < 7)
					break;
				const uint8_t *h = data + off;
				size_t n = (size_t)h[3] | (size_t)h[4] << 8;
				uint16_t flip = (uint16_t)(h[5] | h[6] << 8);
				off += 7;
				if (n > size - off)
					n = size - off;
				struct obuf *b = weft__bs_frame_make(tx, h[0] % 12, h[1] % 4, 0xFFFF0000u | h[2], data + off,
								     n);
				off += n;
				if (!b)
					break;
				/* A flip names one byte to corrupt (0: none): a tampered frame. */
				if (flip && flip - 1u < b->len)
					b->data[flip - 1u] ^= 0x5a;
				size_t w = 0;
				while (w < b->len) {
					size_t k = push(sv[1], b->data + w, b->len - w);
					w += k;
					if (!k)
						break;
				}
				size_t blen = b->len;
				free(b);
				if (w < blen)
					open = 0; /* the reader's buffer is full: read what is there */
			} else {
				off += push(sv[1], data + off, size - off);
				open = 0;
			}
			if (!open || off >= size)
				shutdown(sv[1], SHUT_WR);
			for (;;) {
				int rc = weft__bs_link_pump(rx, &f);
				if (rc == 1) {
					checks(bs, &f);
					continue;
				}
				if (rc < 0)
					open = 0;
				break;
			}
			if (off >= size)
				open = 0;
		}
		tx->fd = -1;
		weft__bs_link_free(tx);
	}
	weft__bs_link_free(rx); /* closes sv[0] */
	close(sv[1]);
	stub_free(bs);
	free(own);
	return 0;
}
