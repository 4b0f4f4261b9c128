/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for algo-plan's JSON reader and plan loader (plugins/algo-plan/json.c
 * and plan.c, compiled in): any input is refused with a terminated message or
 * gives a plan whose every index the loader checked, which this target checks
 * again. An input that starts with byte 0xA7 fails the loader's allocation
 * number input[1] + 1 and loads the rest, so the unwinding runs too; every
 * allocation must be freed whatever happened. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL_MARK 0xA7

static void check_buff(const struct wp_plan *p, const struct wp_rank *r, const struct wp_threadblock *tb,
		       const struct wp_op *op, const struct wp_buff *b)
{
	if (b->peer >= p->nranks || (unsigned)b->type >= WP_BUF_KINDS || !b->size)
		__builtin_trap();
	if ((uint64_t)b->index + b->size > p->ranks[b->peer].chunks[b->type])
		__builtin_trap();
	if (!b->remote) {
		if (b->peer != r->id)
			__builtin_trap();
		return;
	}
	if ((unsigned)op->chan >= WP_CHAN_KINDS || b->buffer_id >= tb->rbufs[op->chan].n)
		__builtin_trap();
	const struct wp_remote_buf *rb = &r->rbufs[tb->rbufs[op->chan].v[b->buffer_id]];
	if (rb->rank != b->peer || rb->type != b->type || !(rb->access & (1u << op->chan)))
		__builtin_trap();
}

static void check_op(const struct wp_plan *p, const struct wp_rank *r, const struct wp_threadblock *tb,
		     const struct wp_op *op, int nested)
{
	if ((unsigned)op->kind >= WP_OP_COUNT || op->kind == WP_OP_GLRES || op->kind == WP_OP_GSTORE ||
	    op->kind == WP_OP_GSTOREPKT || op->chan == WP_CHAN_SWITCH)
		__builtin_trap(); /* multicast never loads */
	if (op->nchan_ids > WP_MAX_OP_CHANNELS || op->nsrc > WP_MAX_OP_BUFFS || op->ndst > WP_MAX_OP_BUFFS ||
	    op->nsems > WP_MAX_OP_SEMAPHORES || op->tbg_id >= op->tbg_size)
		__builtin_trap();
	for (uint32_t k = 0; k < op->nchan_ids; k++)
		if ((unsigned)op->chan >= WP_CHAN_KINDS || op->chan_ids[k] >= tb->chans[op->chan].n)
			__builtin_trap();
	for (uint32_t k = 0; k < op->nsrc; k++)
		check_buff(p, r, tb, op, &op->src[k]);
	for (uint32_t k = 0; k < op->ndst; k++)
		check_buff(p, r, tb, op, &op->dst[k]);
	for (uint32_t k = 0; k < op->nsems; k++)
		if (op->sem_ids[k] >= r->nsems)
			__builtin_trap();
	if (op->kind == WP_OP_BARRIER &&
	    (op->barrier_id >= WP_MAX_BARRIERS || !op->barrier_ntb || op->barrier_ntb > r->ntbs))
		__builtin_trap();
	if (op->nops && (nested || op->kind != WP_OP_PIPELINE))
		__builtin_trap();
	for (uint32_t k = 0; k < op->nops; k++)
		check_op(p, r, tb, &op->ops[k], 1);
}

static void check_plan(const struct wp_plan *p)
{
	if (!p->nranks || !p->name[0] || !p->collective[0] || p->min_message_size > p->max_message_size ||
	    !p->buffer_alignment || (p->buffer_alignment & (p->buffer_alignment - 1)))
		__builtin_trap();
	for (uint32_t i = 0; i < p->nranks; i++) {
		const struct wp_rank *r = &p->ranks[i];
		if (r->id != i)
			__builtin_trap();
		for (int c = 0; c < WP_CHAN_KINDS; c++)
			for (uint32_t k = 0; k < r->peers[c].n; k++)
				if (r->peers[c].v[k] >= p->nranks || r->peers[c].v[k] == i)
					__builtin_trap();
		for (uint32_t k = 0; k < r->nrbufs; k++)
			if (r->rbufs[k].rank >= p->nranks || r->rbufs[k].rank == i)
				__builtin_trap();
		for (uint32_t t = 0; t < r->ntbs; t++) {
			const struct wp_threadblock *tb = &r->tbs[t];
			for (int c = 0; c < WP_CHAN_KINDS; c++) {
				for (uint32_t k = 0; k < tb->chans[c].n; k++)
					if (tb->chans[c].v[k] >= r->peers[c].n)
						__builtin_trap();
				for (uint32_t k = 0; k < tb->rbufs[c].n; k++)
					if (tb->rbufs[c].v[k] >= r->nrbufs)
						__builtin_trap();
			}
			for (uint32_t k = 0; k < tb->nops; k++)
				check_op(p, r, tb, &tb->ops[k], 0);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	long base = wp_alloc_live;
	struct wp_plan *p = NULL;
	char err[512], small[6];

	if (size >= 2 && data[0] == FAIL_MARK) {
		wp_alloc_fail_countdown = data[1] + 1;
		data += 2;
		size -= 2;
	}
	memset(err, 0x55, sizeof(err));
	int rc = wp_plan_load_mem("fuzz.json", data, size, &p, err, sizeof(err));
	wp_alloc_fail_countdown = 0;
	if (rc == 0) {
		check_plan(p);
		for (uint32_t r = 0; r < p->nranks; r++)
			for (uint32_t t = 0; t < p->ranks[r].ntbs; t++)
				if (wp_tb_op_count(&p->ranks[r].tbs[t]) < p->ranks[r].tbs[t].nops)
					__builtin_trap();
		wp_plan_free(p);
	} else if (!memchr(err, 0, sizeof(err)) || !err[0] || (rc != -EINVAL && rc != -ENOTSUP && rc != -ENOMEM)) {
		__builtin_trap(); /* every refusal says why, in a terminated message */
	}
	if (wp_alloc_live != base)
		__builtin_trap();

	/* The reader alone, under tight limits, so that they are reached. */
	struct wp_json_limits lim = {.max_bytes = 4096, .max_depth = 6, .max_values = 64};
	struct wp_json_error je;
	struct wp_json *v;
	if (!wp_json_parse((const char *)data, size, &lim, &v, &je)) {
		wp_json_free(v);
	} else if (!memchr(je.msg, 0, sizeof(je.msg)) || !je.msg[0]) {
		__builtin_trap();
	}
	/* A short message buffer stays terminated. */
	memset(small, 0x55, sizeof(small));
	if (wp_plan_load_mem("fuzz.json", data, size, &p, small, 4) == 0)
		wp_plan_free(p);
	else if (small[3] != 0 || small[4] != 0x55)
		__builtin_trap();
	if (wp_alloc_live != base)
		__builtin_trap();
	return 0;
}
