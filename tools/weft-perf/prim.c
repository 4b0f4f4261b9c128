/* SPDX-License-Identifier: Apache-2.0 */
/* Primitive benchmarks on host memory: weft_put bandwidth and put+signal
 * ping-pong latency between ranks 0 and 1, with their data check. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "wp.h"

/* Tags of weft-perf's own bootstrap messages (below the core's reserved range). */
#define TAG_READY 0x7065u
#define TAG_WRONG 0x7066u

/* Between ranks 0 and 1 over one connection. Each rank's buffer has two halves
 * of `half` bytes: [0, half) is where the peer writes, [half, 2 half) what this
 * rank sends from in the data check. */
struct prim {
	const struct run *r;
	const char *transport;
	int peer;
	weft_conn_t *conn;
	weft_sem_t *sem;
	weft_rsem_t *rsem;
	uint64_t sent, seen; /* last token signalled to the peer / awaited here */
	size_t half;
	unsigned char *buf;
	weft_mem_t *mem;
	weft_rmem_t *rmem;
};

static int prim_bufs_setup(struct prim *p, size_t half)
{
	int rc;
	/* Registration of 0 bytes is not a thing; a 0-byte benchmark moves nothing anyway. */
	half = half ? half : 1;
	p->half = half;
	p->buf = wp_alloc_buf(2 * half);
	if (!p->buf)
		return wp_fail(p->r, -ENOMEM, "allocating %zu bytes", 2 * half);
	rc = weft_mem_register(p->r->comm, p->buf, 2 * half, WEFT_MEM_HOST, &p->mem);
	if (rc != 0) {
		wp_fail(p->r, rc, "weft_mem_register of %zu bytes", 2 * half);
		goto err_free;
	}
	rc = weft_mem_exchange(p->mem, p->peer, &p->rmem);
	if (rc != 0) {
		wp_fail(p->r, rc, "weft_mem_exchange with rank %d", p->peer);
		goto err_dereg;
	}
	return 0;

err_dereg:
	weft_mem_deregister(p->mem);
	p->mem = NULL;
err_free:
	free(p->buf);
	p->buf = NULL;
	return rc;
}

/* The caller made sure the peer no longer writes here. */
static int prim_bufs_teardown(struct prim *p)
{
	int rc = p->conn ? weft_flush(p->conn) : 0;
	if (rc != 0)
		wp_fail(p->r, rc, "weft_flush");
	weft_rmem_release(p->rmem);
	weft_mem_deregister(p->mem);
	free(p->buf);
	p->rmem = NULL;
	p->mem = NULL;
	p->buf = NULL;
	return rc;
}

static int prim_signal(struct prim *p)
{
	int rc = weft_signal(p->conn, p->rsem, ++p->sent);
	return rc ? wp_fail(p->r, rc, "weft_signal of token %" PRIu64 " to rank %d", p->sent, p->peer) : 0;
}

/* Signal, then wait until it landed. Used where this rank next blocks outside
 * the transport (a bootstrap message, the end of a size): the core drives a
 * transport only inside weft calls that wait on it, and software providers
 * (ofi shm, tcp) deliver nothing without that. */
static int prim_signal_flushed(struct prim *p)
{
	int rc = prim_signal(p);
	if (rc == 0 && (rc = weft_flush(p->conn)) != 0)
		wp_fail(p->r, rc, "weft_flush");
	return rc;
}

static int prim_wait(struct prim *p)
{
	int rc = weft_sem_wait(p->sem, ++p->seen);
	return rc ? wp_fail(p->r, rc, "weft_sem_wait for token %" PRIu64 " from rank %d", p->seen, p->peer) : 0;
}

static int prim_put(struct prim *p, uint64_t dst_off, uint64_t src_off, size_t len)
{
	if (len == 0)
		return 0;
	int rc = weft_put(p->conn, p->rmem, dst_off, p->mem, src_off, len);
	return rc ? wp_fail(p->r, rc, "weft_put of %zu bytes to rank %d", len, p->peer) : 0;
}

/* Puts of one size per flush: many in flight, but one iteration moves at most
 * 16 MiB (or one put) so that large sizes do not take forever. */
static int puts_per_flush(const struct opts *o, size_t size)
{
	uint64_t cap = size ? (16u << 20) / size : (uint64_t)o->window;
	if (cap < 1)
		cap = 1;
	return (int)(cap < (uint64_t)o->window ? cap : (uint64_t)o->window);
}

/* Bandwidth of weft_put: rank 0 writes, rank 1 waits on its semaphore (which
 * drives its side's progress) until rank 0 signals the end. Returns the time
 * per put in microseconds on rank 0. */
static int bench_put(struct prim *p, size_t size, double *us)
{
	const struct opts *o = p->r->o;
	int nput = puts_per_flush(o, size), rc = 0;
	double t0 = 0;
	for (int it = -o->warmup; it < o->iters; it++) {
		if (it == 0)
			t0 = wp_now_us();
		if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
			return rc;
		if (p->r->rank == 0) {
			uint64_t slots = size ? p->half / size : 1;
			for (int j = 0; j < nput && rc == 0; j++)
				rc = prim_put(p, (j % slots) * size, p->half, size);
			if (rc == 0 && (rc = weft_flush(p->conn)) != 0)
				wp_fail(p->r, rc, "weft_flush");
			if (rc == 0 && o->fresh)
				rc = prim_signal(p); /* lets rank 1 release its buffer */
		} else if (o->fresh) {
			rc = prim_wait(p);
		}
		if (o->fresh) {
			int trc = prim_bufs_teardown(p);
			rc = rc ? rc : trc;
		}
		if (rc != 0)
			return rc;
	}
	double t1 = wp_now_us();
	if (!o->fresh)
		rc = p->r->rank == 0 ? prim_signal_flushed(p) : prim_wait(p);
	*us = o->iters ? (t1 - t0) / o->iters / nput : 0;
	return rc;
}

/* Latency: rank 0 puts size bytes and signals; rank 1 waits, puts the same
 * back and signals; half the round trip, on rank 0. */
static int bench_pingpong(struct prim *p, size_t size, double *us)
{
	const struct opts *o = p->r->o;
	int rc = 0;
	double t0 = 0;
	for (int it = -o->warmup; it < o->iters; it++) {
		if (it == 0)
			t0 = wp_now_us();
		if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
			return rc;
		if (p->r->rank == 0) {
			if ((rc = prim_put(p, 0, 0, size)) == 0 && (rc = prim_signal(p)) == 0)
				rc = prim_wait(p);
		} else {
			if ((rc = prim_wait(p)) == 0 && (rc = prim_put(p, 0, 0, size)) == 0)
				rc = prim_signal(p);
		}
		if (o->fresh) {
			int trc = prim_bufs_teardown(p);
			rc = rc ? rc : trc;
		}
		if (rc != 0)
			return rc;
	}
	*us = o->iters ? (wp_now_us() - t0) / o->iters / 2 : 0;
	return 0;
}

static void random_bytes(unsigned char *buf, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = wp_splitmix64(seed ^ (i / 8));
		memcpy(buf + i, &v, len - i < 8 ? len - i : 8);
	}
}

static uint64_t count_wrong_bytes(const unsigned char *got, size_t len, uint64_t seed)
{
	uint64_t wrong = 0;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = wp_splitmix64(seed ^ (i / 8));
		size_t n = len - i < 8 ? len - i : 8;
		for (size_t k = 0; k < n; k++)
			wrong += got[i + k] != ((unsigned char *)&v)[k];
	}
	return wrong;
}

/* One checked transfer per direction the benchmark uses: random bytes into a
 * poisoned destination, compared by the receiver. The total is on rank 0. */
static int check_prim(struct prim *p, size_t size, int both_ways, uint64_t *wrong)
{
	const struct run *r = p->r;
	const struct opts *o = r->o;
	uint64_t seed0 = wp_splitmix64(o->seed ^ size ^ 0x1000), seed1 = wp_splitmix64(o->seed ^ size ^ 0x2000);
	uint64_t w1 = 0, w0 = 0;
	int rc;
	char ready = 1;

	if (o->fresh && (rc = prim_bufs_setup(p, size)) != 0)
		return rc;
	wp_poison(p->buf, size);
	if (r->rank == 1) {
		if ((rc = weft_comm_send(r->comm, 0, TAG_READY, &ready, 1)) != 0) {
			wp_fail(r, rc, "weft_comm_send to rank 0");
			goto out;
		}
		if ((rc = prim_wait(p)) != 0)
			goto out;
		w1 = count_wrong_bytes(p->buf, size, seed0);
		if (both_ways) {
			random_bytes(p->buf + p->half, size, seed1);
			if ((rc = prim_put(p, 0, p->half, size)) != 0 || (rc = prim_signal_flushed(p)) != 0)
				goto out;
		}
		if ((rc = weft_comm_send(r->comm, 0, TAG_WRONG, &w1, sizeof(w1))) != 0)
			wp_fail(r, rc, "weft_comm_send to rank 0");
	} else {
		if ((rc = weft_comm_recv(r->comm, 1, TAG_READY, &ready, 1)) != 0) {
			wp_fail(r, rc, "weft_comm_recv from rank 1");
			goto out;
		}
		random_bytes(p->buf + p->half, size, seed0);
		if ((rc = prim_put(p, 0, p->half, size)) != 0 || (rc = prim_signal_flushed(p)) != 0)
			goto out;
		if (both_ways) {
			if ((rc = prim_wait(p)) != 0)
				goto out;
			w0 = count_wrong_bytes(p->buf, size, seed1);
		}
		if ((rc = weft_comm_recv(r->comm, 1, TAG_WRONG, &w1, sizeof(w1))) != 0) {
			wp_fail(r, rc, "weft_comm_recv from rank 1");
			goto out;
		}
		*wrong = w0 + w1;
	}
out:
	if (o->fresh) {
		/* Rank 1 must not release its buffer before rank 0's put landed:
		 * it has, since rank 1 saw the signal behind it. */
		int trc = prim_bufs_teardown(p);
		rc = rc ? rc : trc;
	}
	return rc;
}

static int run_prim(const struct run *r, const char *transport, double *bw_sum, int *bw_n, uint64_t *wrong_total)
{
	const struct opts *o = r->o;
	struct prim p = {.r = r, .transport = transport, .peer = 1 - r->rank};
	int rc = 0;
	char desc[512] = "";

	if (r->rank >= 2)
		goto out_barrier;
	rc = weft_connect(r->comm, p.peer, transport, &p.conn);
	if (rc != 0) {
		wp_fail(r, rc, "weft_connect to rank %d over %s%s%s", p.peer, transport ? "transport '" : "",
			transport ? transport : "the transport the core chooses", transport ? "'" : "");
		goto out_barrier;
	}
	if (weft_conn_describe(p.conn, desc, sizeof(desc)) != 0)
		snprintf(desc, sizeof(desc), "%s", weft_conn_transport(p.conn));
	desc[sizeof(desc) - 1] = '\0';
	if ((rc = weft_sem_create(r->comm, &p.sem)) != 0) {
		wp_fail(r, rc, "weft_sem_create");
		goto err_close;
	}
	if ((rc = weft_sem_exchange(p.sem, p.peer, &p.rsem)) != 0) {
		wp_fail(r, rc, "weft_sem_exchange with rank %d", p.peer);
		goto err_sem;
	}
	if (!o->fresh && (rc = prim_bufs_setup(&p, o->max_bytes)) != 0)
		goto err_rsem;

	if (r->rank == 0)
		wp_print_prim_header(r, weft_conn_transport(p.conn), desc);
	for (uint64_t size = o->min_bytes; size <= o->max_bytes; size = wp_next_size(o, size)) {
		double us = 0;
		uint64_t wrong = 0;
		rc = o->bench == BENCH_PUT ? bench_put(&p, size, &us) : bench_pingpong(&p, size, &us);
		if (rc == 0 && o->check)
			rc = check_prim(&p, size, o->bench == BENCH_PINGPONG, &wrong);
		if (rc != 0)
			break;
		if (r->rank == 0) {
			double bw = wp_print_prim_row(o, size, us, wrong);
			*bw_sum += bw;
			(*bw_n)++;
			*wrong_total += wrong;
		}
		if (size == o->max_bytes || wp_next_size(o, size) <= size)
			break;
	}
	if (!o->fresh) {
		int trc = prim_bufs_teardown(&p);
		rc = rc ? rc : trc;
	}
err_rsem:
	weft_rsem_release(p.rsem);
err_sem:
	weft_sem_destroy(p.sem);
err_close:
	weft_conn_close(p.conn);
	if (rc != 0)
		return rc;
out_barrier:
	if (rc == 0 && (rc = weft_comm_barrier(r->comm)) != 0)
		wp_fail(r, rc, "weft_comm_barrier");
	return rc;
}


/* What one rank does for --op put|pingpong on host memory: one table per
 * --transport (or the core's choice). wrong_all gets the wrong bytes. */
int wp_prim_rank(const struct run *r, uint64_t *wrong_all)
{
	const struct opts *o = r->o;
	int rc;
	if (r->rank == 0)
		wp_print_header_common(r, o->bench == BENCH_PUT ? "put" : "pingpong");
	int n = o->ntransports ? o->ntransports : 1;
	for (int i = 0; i < n; i++) {
		double bw_sum = 0;
		int bw_n = 0;
		uint64_t wrong = 0;
		if (r->rank == 0)
			printf("#\n");
		rc = run_prim(r, o->ntransports ? o->transports[i] : NULL, &bw_sum, &bw_n, &wrong);
		if (rc != 0)
			return rc;
		wp_print_footer(r, bw_sum, bw_n, wrong, "bandwidth");
		*wrong_all += wrong;
	}
	return 0;
}
