/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the encoding of one rank's plan for the device interpreter
 * (dev.h): threadblock-relative channel and remote-buffer ids resolved to
 * the rank's, pipelines flattened with their bodies after them. Plain C, so
 * a CPU test checks it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

static int enc_ref(const struct wp_threadblock *tb, const struct wp_op *op, const struct wp_buff *b, struct wpd_ref *r)
{
	memset(r, 0, sizeof(*r));
	r->type = (uint8_t)b->type;
	r->index = b->index;
	r->size = b->size;
	if (!b->remote)
		return 0;
	if ((int)op->chan < 0 || op->chan >= WP_CHAN_KINDS || b->buffer_id >= tb->rbufs[op->chan].n)
		return -EINVAL;
	r->remote = 1;
	r->rbuf = tb->rbufs[op->chan].v[b->buffer_id];
	return 0;
}

static int enc_op(const struct wp_threadblock *tb, const struct wp_op *op, struct wpd_op *d)
{
	memset(d, 0, sizeof(*d));
	if (op->nsrc > WP_MAX_OP_BUFFS || op->ndst > WP_MAX_OP_BUFFS || op->nchan_ids > WP_MAX_OP_CHANNELS ||
	    op->nsems > WP_MAX_OP_SEMAPHORES)
		return -E2BIG;
	d->kind = (uint8_t)op->kind;
	d->chan = (uint8_t)op->chan;
	d->nsrc = (uint8_t)op->nsrc;
	d->ndst = (uint8_t)op->ndst;
	d->nchan = (uint8_t)op->nchan_ids;
	d->nsems = (uint8_t)op->nsems;
	d->tbg_id = op->tbg_id;
	d->tbg_size = op->tbg_size ? op->tbg_size : 1;
	d->barrier_id = op->barrier_id;
	d->barrier_ntb = op->barrier_ntb;
	d->unit_size = op->unit_size;
	d->num_chunks = op->num_chunks;
	for (uint32_t i = 0; i < op->nchan_ids; i++) {
		if ((int)op->chan < 0 || op->chan >= WP_CHAN_KINDS || op->chan_ids[i] >= tb->chans[op->chan].n)
			return -EINVAL;
		d->ch[i] = tb->chans[op->chan].v[op->chan_ids[i]];
	}
	for (uint32_t i = 0; i < op->nsems; i++)
		d->sem[i] = op->sem_ids[i];
	int rc = 0;
	for (uint32_t i = 0; i < op->nsrc && !rc; i++)
		rc = enc_ref(tb, op, &op->src[i], &d->src[i]);
	for (uint32_t i = 0; i < op->ndst && !rc; i++)
		rc = enc_ref(tb, op, &op->dst[i], &d->dst[i]);
	return rc;
}

/* Whether two references of this rank's own buffers may share a byte: in
 * place, input and output are views of one buffer, chunked apart. */
static int ref_clash(const struct wpd_ref *x, const struct wpd_ref *y, int inplace)
{
	if (x->remote || y->remote)
		return 1;
	if (x->type != y->type)
		return inplace && x->type != WP_BUF_SCRATCH && y->type != WP_BUF_SCRATCH;
	return x->index < y->index + y->size && y->index < x->index + x->size;
}

/* Copies and reductions that read and write local buffers only. */
static int local_data_op(const struct wpd_op *o)
{
	if (o->kind != WP_OP_COPY && o->kind != WP_OP_RE)
		return 0;
	for (uint32_t j = 0; j < (uint32_t)o->nsrc + o->ndst; j++)
		if ((j < o->nsrc ? o->src[j] : o->dst[j - o->nsrc]).remote)
			return 0;
	return 1;
}

/* b may run beside a: neither writes what the other reads or writes. */
static int independent(const struct wpd_op *a, const struct wpd_op *b, int inplace)
{
	if (!local_data_op(a) || !local_data_op(b))
		return 0;
	for (uint32_t i = 0; i < (uint32_t)a->nsrc + a->ndst; i++)
		for (uint32_t j = 0; j < (uint32_t)b->nsrc + b->ndst; j++) {
			int aw = i >= a->nsrc, bw = j >= b->nsrc;
			const struct wpd_ref *x = aw ? &a->dst[i - a->nsrc] : &a->src[i];
			const struct wpd_ref *y = bw ? &b->dst[j - b->nsrc] : &b->src[j];
			if ((aw || bw) && ref_clash(x, y, inplace))
				return 0;
		}
	return 1;
}

/* Marks nosync the threadblock's operations (not pipelines' bodies) that
 * the next one does not depend on, nor on any since the last barrier: all
 * of those may still be running. The last keeps its barrier. */
static void mark_nosync(struct wpd_op *ops, uint32_t n, int inplace)
{
	for (uint32_t k = 0, from = 0, next; k < n; k = next) {
		next = k + 1 + (ops[k].kind == WP_OP_PIPELINE ? ops[k].nops : 0);
		int go_on = next < n;
		/* Past from, the window holds local data operations only: no pipeline. */
		for (uint32_t j = from; go_on && j <= k; j++)
			go_on = independent(&ops[j], &ops[next], inplace);
		ops[k].nosync = (uint8_t)go_on;
		if (!go_on)
			from = next;
	}
}

int wpd_encode(const struct wp_plan *plan, uint32_t rank, struct wpd_tb **tbs_out, struct wpd_op **ops_out,
	       uint32_t *nops_out)
{
	const struct wp_rank *rk = &plan->ranks[rank];
	uint64_t total = 0;
	for (uint32_t t = 0; t < rk->ntbs; t++)
		total += wp_tb_op_count(&rk->tbs[t]);
	if (total > UINT32_MAX / 2)
		return -E2BIG;
	struct wpd_tb *tbs = calloc(rk->ntbs + 1, sizeof(*tbs));
	struct wpd_op *ops = calloc(total + 1, sizeof(*ops));
	if (!tbs || !ops) {
		free(tbs);
		free(ops);
		return -ENOMEM;
	}
	uint32_t n = 0;
	int rc = 0;
	for (uint32_t t = 0; t < rk->ntbs && !rc; t++) {
		const struct wp_threadblock *tb = &rk->tbs[t];
		tbs[t].first = n;
		for (uint32_t i = 0; i < tb->nops && !rc; i++) {
			const struct wp_op *op = &tb->ops[i];
			struct wpd_op *d = &ops[n++];
			rc = enc_op(tb, op, d);
			if (rc || op->kind != WP_OP_PIPELINE)
				continue;
			d->nops = op->nops;
			for (uint32_t j = 0; j < op->nops && !rc; j++) {
				if (op->ops[j].kind == WP_OP_PIPELINE)
					rc = -EINVAL; /* the loader refuses nested pipelines */
				else
					rc = enc_op(tb, &op->ops[j], &ops[n++]);
			}
		}
		tbs[t].nops = n - tbs[t].first;
		if (!rc)
			mark_nosync(ops + tbs[t].first, tbs[t].nops, plan->inplace);
	}
	if (rc) {
		free(tbs);
		free(ops);
		return rc;
	}
	*tbs_out = tbs;
	*ops_out = ops;
	*nops_out = n;
	return 0;
}

int wpd_encode_refs(struct wpd_tb *tbs, uint32_t ntbs, struct wpd_op *ops, struct wpd_refloc **refs_out,
		    uint32_t *nrefs_out, uint32_t *maxrefs)
{
	uint64_t total = 0;
	for (uint32_t t = 0; t < ntbs; t++)
		for (uint32_t i = 0; i < tbs[t].nops; i++)
			total += (uint64_t)ops[tbs[t].first + i].nsrc + ops[tbs[t].first + i].ndst;
	struct wpd_refloc *refs = calloc(total + 1, sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	uint32_t n = 0, most = 0;
	for (uint32_t t = 0; t < ntbs; t++) {
		tbs[t].ref_first = n;
		for (uint32_t i = 0; i < tbs[t].nops; i++) {
			uint32_t k = tbs[t].first + i;
			ops[k].ref0 = n - tbs[t].ref_first;
			const struct wpd_op *o = &ops[k];
			for (uint32_t j = 0; j < (uint32_t)o->nsrc + o->ndst; j++)
				refs[n++] = (struct wpd_refloc){j < o->nsrc ? o->src[j] : o->dst[j - o->nsrc], o->tbg_id,
								o->tbg_size};
		}
		tbs[t].nrefs = n - tbs[t].ref_first;
		most = tbs[t].nrefs > most ? tbs[t].nrefs : most;
	}
	*refs_out = refs;
	*nrefs_out = n;
	*maxrefs = most;
	return 0;
}

static uint64_t up16(uint64_t n)
{
	return (n + 15) & ~(uint64_t)15;
}

int wpd_encode_images(const struct wpd_tb *tbs, uint32_t ntbs, const struct wpd_op *ops,
		      const struct wpd_refloc *refs, char **img_out, uint32_t *stride_out, uint32_t *ops_out)
{
	uint64_t most_refs = 0, most_ops = 0;
	for (uint32_t t = 0; t < ntbs; t++) {
		most_refs = tbs[t].nrefs > most_refs ? tbs[t].nrefs : most_refs;
		most_ops = tbs[t].nops > most_ops ? tbs[t].nops : most_ops;
	}
	uint64_t at = up16(WPD_IMG_REFS + most_refs * sizeof(struct wpd_refloc));
	uint64_t stride = up16(at + most_ops * sizeof(struct wpd_op));
	if (stride > WPD_IMG_CAP)
		return -E2BIG;
	char *img = calloc(ntbs ? ntbs : 1, stride);
	if (!img)
		return -ENOMEM;
	for (uint32_t t = 0; t < ntbs; t++) {
		char *b = img + (uint64_t)t * stride;
		memcpy(b, &tbs[t], sizeof(tbs[t]));
		memcpy(b + WPD_IMG_REFS, refs + tbs[t].ref_first, tbs[t].nrefs * sizeof(*refs));
		memcpy(b + at, ops + tbs[t].first, tbs[t].nops * sizeof(*ops));
	}
	*img_out = img;
	*stride_out = (uint32_t)stride;
	*ops_out = (uint32_t)at;
	return 0;
}
