/* SPDX-License-Identifier: Apache-2.0 */
/* weft-plan-check FILE...: checks MSCCL++ 0.9 execution plans as algo-plan
 * would run them. The loader checks the schema, bounds and references; then
 * every rank of the plan runs in this one process through algo-plan's own
 * CPU interpreter, round robin over ranks and (inside each) threadblocks, as
 * the pack interleaves them: a round in which no threadblock of any rank
 * moves is a deadlock, reported per waiting threadblock. Two calls in a row
 * run on random data at two message sizes, and each result is compared with
 * the collective's definition (allreduce, allgather, reducescatter,
 * alltoall: int32 sums). Exit 0 when every file passes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kit.h>

#include "interp.h"
#include "plan.h"

struct simrank {
	char *buf[WP_BUF_KINDS]; /* views of the call: input and output may share an area */
	char *in_area, *out_area, *scratch;
	uint64_t in, out, scratch_len, half;
	char **rbuf;
	/* inbound counters: [kind][peer] arrays of wp_pair_count entries */
	uint64_t **inbound[WP_CHAN_KINDS];
	struct wp_env env;
	struct wp_state st;
	struct wp_run run;
};

struct sim {
	const struct wp_plan *plan;
	enum weft_collective coll;
	int known; /* coll is one the pack serves: results are checked */
	uint32_t n;
	struct simrank *r;
};

struct simctx {
	struct sim *s;
	uint32_t rank;
};

static char *scratch_at(struct sim *s, uint32_t rank, enum wp_buf t)
{
	struct simrank *r = &s->r[rank];
	return t == WP_BUF_SCRATCH ? r->scratch + r->half : r->buf[t];
}

static int sim_put(void *ctx, uint32_t chan, uint32_t rbuf, uint64_t dst_off, enum wp_buf src, uint64_t src_off,
		   uint64_t len)
{
	struct simctx *c = ctx;
	const struct wp_rank *rk = &c->s->plan->ranks[c->rank];
	(void)chan;
	const struct wp_remote_buf *rb = &rk->rbufs[rbuf];
	memmove(scratch_at(c->s, rb->rank, rb->type) + dst_off, scratch_at(c->s, c->rank, src) + src_off, len);
	return 0;
}

static int sim_signal(void *ctx, enum wp_chan kind, uint32_t chan)
{
	struct simctx *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->s->plan, c->rank, kind, chan, &peer, &k);
	c->s->r[peer].inbound[kind][c->rank][k]++;
	return 0;
}

static int sim_poll(void *ctx, enum wp_chan kind, uint32_t chan, uint64_t want)
{
	struct simctx *c = ctx;
	uint32_t peer, k;
	wp_chan_pair(c->s->plan, c->rank, kind, chan, &peer, &k);
	return c->s->r[c->rank].inbound[kind][peer][k] >= want;
}

static int sim_flush(void *ctx, uint32_t chan)
{
	(void)ctx;
	(void)chan;
	return 0;
}

static void sim_free(struct sim *s)
{
	for (uint32_t i = 0; s->r && i < s->n; i++) {
		struct simrank *r = &s->r[i];
		free(r->in_area);
		free(r->out_area);
		free(r->scratch);
		free(r->rbuf);
		for (int k = 0; k < WP_CHAN_KINDS; k++) {
			for (uint32_t p = 0; r->inbound[k] && p < s->n; p++)
				free(r->inbound[k][p]);
			free(r->inbound[k]);
		}
		wp_state_fini(&r->st);
	}
	free(s->r);
}

/* Areas for a call of unit bytes per block; in place, the input is the
 * rank's block of the output (allgather), the output the rank's block of
 * the input (reducescatter), or the same bytes. */
static int sim_alloc(struct sim *s, uint64_t unit)
{
	for (uint32_t i = 0; i < s->n; i++) {
		struct simrank *r = &s->r[i];
		free(r->in_area);
		free(r->out_area);
		free(r->scratch);
		wp_call_bytes(s->coll, s->n, unit, &r->in, &r->out);
		r->scratch_len = wp_scratch_bytes(s->plan, i, r->in, r->out);
		r->in_area = calloc(1, r->in + 16);
		r->out_area = calloc(1, r->out + 16);
		r->scratch = calloc(1, r->scratch_len + 16);
		if (!r->in_area || !r->out_area || !r->scratch)
			return -ENOMEM;
		r->buf[WP_BUF_INPUT] = r->in_area;
		r->buf[WP_BUF_OUTPUT] = r->out_area;
		if (s->plan->inplace && s->coll == WEFT_COLL_ALLGATHER)
			r->buf[WP_BUF_INPUT] = r->out_area + i * r->in;
		else if (s->plan->inplace && s->coll == WEFT_COLL_REDUCE_SCATTER)
			r->buf[WP_BUF_OUTPUT] = r->in_area + i * r->out;
		else if (s->plan->inplace)
			r->buf[WP_BUF_OUTPUT] = r->in_area;
	}
	return 0;
}

static int sim_init(struct sim *s, const struct wp_plan *plan)
{
	memset(s, 0, sizeof(*s));
	s->plan = plan;
	/* An unknown collective runs as allreduce's sizes (one block in, one
	 * out), unchecked. */
	s->known = wp_collective(plan->collective, &s->coll) == 0;
	s->n = plan->nranks;
	if (!(s->r = calloc(s->n, sizeof(*s->r))))
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		struct simrank *r = &s->r[i];
		int rc = wp_state_init(&r->st, plan, i);
		if (rc)
			return rc;
		if (!(r->rbuf = calloc(plan->ranks[i].nrbufs + 1, sizeof(char *))))
			return -ENOMEM;
		for (int k = 0; k < WP_CHAN_KINDS; k++) {
			if (!(r->inbound[k] = calloc(s->n, sizeof(uint64_t *))))
				return -ENOMEM;
			for (uint32_t p = 0; p < s->n; p++)
				if (!(r->inbound[k][p] = calloc(wp_pair_count(plan, i, p, k) + 1, sizeof(uint64_t))))
					return -ENOMEM;
		}
	}
	return 0;
}

static uint32_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)*x;
}

/* Fills inputs with small random int32 values (sums stay exact) and the
 * outputs with a poison, runs one call on every rank, and compares. */
static int sim_call(struct sim *s, struct simctx *ctx, uint32_t flag, uint64_t seed, const char *file)
{
	const struct wp_plan *p = s->plan;
	uint64_t x = seed | 1;
	for (uint32_t i = 0; i < s->n; i++) {
		struct simrank *r = &s->r[i];
		memset(r->out_area, 0xA5, r->out);
		int32_t *in = (int32_t *)(void *)r->buf[WP_BUF_INPUT];
		for (uint64_t e = 0; e < r->in / 4; e++)
			in[e] = (int32_t)(rnd(&x) % 1000) - 500;
	}
	/* The inputs as written, before an in-place call overwrites them. */
	uint64_t in_bytes = s->r[0].in, out_bytes = s->r[0].out;
	int32_t *ref_in = malloc(s->n * in_bytes + 4);
	if (!ref_in)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n; i++)
		memcpy((char *)ref_in + i * in_bytes, s->r[i].buf[WP_BUF_INPUT], in_bytes);
	int rc = 0;
	for (uint32_t i = 0; i < s->n; i++)
		s->r[i].half = wp_scratch_half(p, i, s->r[i].in, s->r[i].out, flag);
	for (uint32_t i = 0; i < s->n && !rc; i++) {
		struct simrank *r = &s->r[i];
		for (uint32_t b = 0; b < p->ranks[i].nrbufs; b++) {
			const struct wp_remote_buf *rb = &p->ranks[i].rbufs[b];
			r->rbuf[b] = scratch_at(s, rb->rank, rb->type);
		}
		r->buf[WP_BUF_SCRATCH] = r->scratch + r->half;
		ctx[i] = (struct simctx){s, i};
		r->env = (struct wp_env){.ctx = &ctx[i], .rbuf = r->rbuf, .port_put = sim_put, .signal = sim_signal,
					 .poll = sim_poll, .flush = sim_flush};
		memcpy(r->env.buf, r->buf, sizeof(r->buf));
		struct wp_call call = {r->in, r->out, WEFT_INT32, WEFT_SUM, flag};
		rc = wp_run_init(&r->run, p, i, &call, &r->env, &r->st);
	}
	uint32_t left = s->n;
	int *done = calloc(s->n, sizeof(int));
	if (!done)
		rc = -ENOMEM;
	while (!rc && left) {
		int moved = 0;
		for (uint32_t i = 0; i < s->n && !rc; i++) {
			if (done[i])
				continue;
			int st = wp_run_step(&s->r[i].run);
			if (st == 1) {
				done[i] = 1;
				left--;
				moved = 1;
			} else if (st == 0) {
				moved = 1;
			} else if (st != -EAGAIN) {
				fprintf(stderr, "%s\n", s->r[i].run.err);
				rc = st;
			}
		}
		if (!rc && !moved) {
			fprintf(stderr, "%s: deadlock in call %u of %llu bytes in, %llu out:\n", file, flag,
				(unsigned long long)in_bytes, (unsigned long long)out_bytes);
			for (uint32_t i = 0; i < s->n; i++) {
				char where[1024];
				if (done[i])
					continue;
				wp_run_where(&s->r[i].run, where, sizeof(where));
				fprintf(stderr, "  rank %u: %s\n", i, where);
			}
			rc = -EDEADLK;
		}
	}
	free(done);
	for (uint32_t i = 0; i < s->n; i++)
		wp_run_fini(&s->r[i].run);
	/* Compare with the definition. */
	uint64_t ne = out_bytes / 4, blk = s->coll == WEFT_COLL_ALLTOALL ? in_bytes / 4 / s->n : 0;
	for (uint32_t i = 0; i < s->n && !rc && s->known; i++) {
		const int32_t *out = (const int32_t *)(const void *)s->r[i].buf[WP_BUF_OUTPUT];
		for (uint64_t e = 0; e < ne; e++) {
			int64_t want = 0;
			if (s->coll == WEFT_COLL_ALLREDUCE || s->coll == WEFT_COLL_REDUCE_SCATTER) {
				uint64_t at = s->coll == WEFT_COLL_ALLREDUCE ? e : i * ne + e;
				for (uint32_t q = 0; q < s->n; q++)
					want += ref_in[q * (in_bytes / 4) + at];
			} else if (s->coll == WEFT_COLL_ALLGATHER) {
				want = ref_in[e];
			} else {
				uint64_t q = e / blk;
				want = ref_in[q * (in_bytes / 4) + i * blk + e % blk];
			}
			if ((int32_t)want != out[e]) {
				fprintf(stderr,
					"%s: call %u of %llu bytes in: rank %u's output element %llu is %d, want %d\n",
					file, flag, (unsigned long long)in_bytes, i, (unsigned long long)e, out[e],
					(int32_t)want);
				rc = -EIO;
				break;
			}
		}
	}
	free(ref_in);
	return rc;
}

/* The smallest block size of at least min bytes that every rank's chunks
 * divide, within the plan's message-size range; 0 when none up to 64 MiB. */
static uint64_t pick_unit(struct sim *s, uint64_t min)
{
	const struct wp_plan *p = s->plan;
	char err[256];
	for (uint64_t u = p->buffer_alignment; u <= (64u << 20); u += p->buffer_alignment) {
		if (u < min)
			u = (min + p->buffer_alignment - 1) / p->buffer_alignment * p->buffer_alignment;
		if (!wp_call_fits(p, s->coll, u, err, sizeof(err)))
			return u;
	}
	return 0;
}

static int check_file(const char *file)
{
	struct wp_plan *p = NULL;
	char err[512];
	int rc = wp_plan_load(file, &p, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return rc;
	}
	struct sim s;
	struct simctx *ctx = calloc(p->nranks, sizeof(*ctx));
	rc = ctx ? sim_init(&s, p) : -ENOMEM;
	if (!rc && !s.known)
		printf("%s: collective '%s' has no reference here: checked for deadlocks only\n", file, p->collective);
	static const uint64_t mins[] = {1, 200u << 10};
	uint32_t flag = 0;
	for (size_t m = 0; m < 2 && !rc; m++) {
		uint64_t u = pick_unit(&s, mins[m]);
		if (!u) {
			if (m == 0) {
				fprintf(stderr, "%s: no message size up to 64 MiB fits the plan's chunks and range\n",
					file);
				rc = -EINVAL;
			}
			break;
		}
		if ((rc = sim_alloc(&s, u)))
			break;
		for (int call = 0; call < 2 && !rc; call++) {
			flag++;
			rc = sim_call(&s, ctx, flag, 0x9E3779B97F4A7C15ull * flag, file);
		}
	}
	if (!rc)
		printf("%s: ok (%u ranks, %s, %s, %u calls)\n", file, p->nranks, p->collective,
		       p->protocol == WP_PROTO_LL ? "LL" : "Simple", flag);
	if (ctx)
		sim_free(&s);
	free(ctx);
	wp_plan_free(p);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fprintf(argc < 2 ? stderr : stdout,
			"usage: weft-plan-check FILE...\n"
			"Loads each MSCCL++ 0.9 execution plan as algo-plan does, runs every rank in this\n"
			"process with algo-plan's CPU interpreter, and reports schema errors, deadlocks\n"
			"(naming rank, threadblock and operation) and wrong results. Exit 0: all pass.\n");
		return argc < 2 ? 2 : 0;
	}
	int bad = 0;
	for (int i = 1; i < argc; i++)
		bad += check_file(argv[i]) != 0;
	return bad ? 1 : 0;
}
