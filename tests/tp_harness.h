/* SPDX-License-Identifier: Apache-2.0 */
/* Shared harness of the plugin-level transport tests (ofi, shm, ucx, ib): a
 * minimal core for the plugin, plugin loading, and the 2-rank socketpair setup. */
#ifndef WEFT_TESTS_TP_HARNESS_H
#define WEFT_TESTS_TP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <weft/plugin.h>

struct th_options {
	const char *log_env;         /* capture=0: max level printed (default WARN); capture=1: print if set */
	const char *default_section; /* section used when the plugin passes NULL */
	bool capture;                /* keep "[L] line" records in th_logbuf; every level enabled */
	bool check_reinit;           /* th_load_plugin asserts a second init returns the same table */
	double flush_timeout_s;      /* >0: th_spin_flush gives up (-ETIMEDOUT) and returns progress errors */
};

extern const struct weft_core_api th_core;
extern const struct weft_transport_ops *th_ops;
extern int th_rank;
extern int th_log_errors; /* ERROR lines seen, for tests that expect one */
extern char th_logbuf[1 << 16];
extern size_t th_loglen;

void th_configure(const struct th_options *o);
bool th_log_has(const char *s);
void th_load_plugin(const char *path, const char *name, const struct th_options *o);
int th_open_ctx(int rank, void **tc);

#define TH_FAIL(...)                                                               \
	do {                                                                       \
		fprintf(stderr, "[rank %d] %s:%d: ", th_rank, __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                      \
		fputc('\n', stderr);                                               \
		return __LINE__ & 0x7f ? __LINE__ & 0x7f : 1;                      \
	} while (0)
#define TH_REQ(cond, ...)                     \
	do {                                  \
		if (!(cond))                  \
			TH_FAIL(__VA_ARGS__); \
	} while (0)

int th_send_msg(int fd, const void *buf, uint32_t len);
int th_read_full(int fd, void *buf, size_t len);
int th_recv_msg(int fd, void *tc, void *buf, uint32_t cap, uint32_t *len);
uint64_t th_xs_next(uint64_t *s);
void th_fill_random(unsigned char *p, size_t n, uint64_t seed);
long th_check_random(const unsigned char *p, size_t n, uint64_t seed);
int th_spin_flush(void *ep, void *tc);
int th_put_retry(void *ep, void *tc, void *rmh, uint64_t roff, void *mh, uint64_t loff, size_t len);
int th_signal_retry(void *ep, void *tc, void *rmh, uint64_t roff, uint64_t v);

/* ------------------------------------------------------- a 2-rank setup */
#define TH_DATA_BYTES ((size_t)64 << 20)
#define TH_DATA_SLACK 8192
#define TH_TOK_BYTES 4096

struct th_side {
	int fd;
	void *tc;
	unsigned char *data; /* TH_DATA_BYTES + TH_DATA_SLACK */
	uint64_t *tok;       /* TH_TOK_BYTES */
	void *mh_data, *mh_tok;
	void *rmh_data, *rmh_tok;
	void *ep;
	int mapped;      /* data/tok came from mem_alloc: teardown mem_frees them */
	const void *arg; /* the test's own argument */
};

int th_exchange(struct th_side *s, const void *mine, uint32_t len, void *theirs, uint32_t cap, uint32_t *tlen);
int th_import_peer(struct th_side *s, int peer, void *mh, void **rmh);
/* Takes this rank's end of sv and opens a context. */
int th_side_open(int rank, const int sv[2], struct th_side *s);
/* Plain memory for data and tok. */
int th_side_alloc(struct th_side *s);
/* Fills, registers and swaps both buffers with the peer. */
int th_side_register(struct th_side *s, int rank);
/* Endpoint of at least min_alen+1 address bytes, swapped and connected. */
int th_side_connect(struct th_side *s, int rank, enum weft_peer_class cls, size_t min_alen, char *paddr,
		    size_t paddr_cap, uint32_t *plen);
/* flush_first: flush before the final handshake rather than after. */
int th_side_close(struct th_side *s, bool flush_first);

/* Cases every transport runs, on a side set up by the test (rank 0 writes,
 * rank 1 checks); 0 or the failing line, as TH_REQ returns. */
/* Puts of 1 B .. 64 MiB at odd offsets; rank 1 checks every byte and the guard
 * bytes (0xA5) around them after rank 0's flush returned 0. */
int th_case_puts(struct th_side *s, int rank);
/* Many puts in flight, then one signal: once rank 1 sees the token, every byte
 * of every put must be there, with no other synchronisation. Without
 * flush_after_signal the signal alone must carry the data out. */
int th_case_signal(struct th_side *s, int rank, bool flush_after_signal);
/* 200 back-to-back signals to one token: the last value wins, never an older one. */
int th_case_signal_burst(struct th_side *s, int rank);

#endif
