/* SPDX-License-Identifier: Apache-2.0 */
/* --peer nccl: NVIDIA's NCCL, dlopen'ed (never linked), set up beside weft's
 * communicator and called with the same arguments, so that both libraries
 * are timed the same way in one run. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "wp.h"

/* ncclRedOp_t of each weft_redop (NCCL orders max before min). */
static const int nccl_redops[PERF_NREDOPS] = {0, 1, 3, 2, 4};

/* --peer nccl: NVIDIA's NCCL, dlopen'ed (never linked) so that the same calls
 * run through both libraries in one run with the same timing. Its types are
 * reduced to int and void *; ncclUniqueId is 128 bytes. */
struct nccl_id {
	char internal[128];
};
static struct nccl_dl {
	int (*get_unique_id)(struct nccl_id *);
	int (*comm_init_rank)(void **, int, struct nccl_id, int);
	int (*comm_destroy)(void *);
	int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
	int (*all_gather)(const void *, void *, size_t, int, void *, void *);
	int (*reduce_scatter)(const void *, void *, size_t, int, int, void *, void *);
	int (*broadcast)(const void *, void *, size_t, int, int, void *, void *);
	int (*reduce)(const void *, void *, size_t, int, int, int, void *, void *);
	int (*alltoall)(const void *, void *, size_t, int, void *, void *);
	int (*send)(const void *, size_t, int, int, void *, void *);
	int (*recv)(void *, size_t, int, int, void *, void *);
	int (*group_start)(void);
	int (*group_end)(void);
	const char *(*error_string)(int);
	int (*get_version)(int *);
} nccl;

/* The same call through NCCL (--peer nccl). */
int wp_nccl_call(const struct run *r, const struct coll_shape *s, const void *sbuf, void *rbuf)
{
	const struct opts *o = r->o;
	int t = o->type->nccl, op = nccl_redops[o->op], n = r->nranks, rc, erc;
	void *c = r->nccl, *st = r->stream;
	switch (o->coll) {
	case C_ALLREDUCE: rc = nccl.all_reduce(sbuf, rbuf, s->count, t, op, c, st); break;
	case C_ALLGATHER: rc = nccl.all_gather(sbuf, rbuf, s->count, t, c, st); break;
	case C_REDUCE_SCATTER: rc = nccl.reduce_scatter(sbuf, rbuf, s->count, t, op, c, st); break;
	case C_BROADCAST: rc = nccl.broadcast(sbuf, rbuf, s->count, t, o->root, c, st); break;
	case C_REDUCE: rc = nccl.reduce(sbuf, rbuf, s->count, t, op, o->root, c, st); break;
	case C_ALLTOALL: rc = nccl.alltoall(sbuf, rbuf, s->count, t, c, st); break;
	case C_SENDRECV:
		rc = nccl.group_start();
		if (rc == 0)
			rc = nccl.send(sbuf, s->count, t, (r->rank + 1) % n, c, st);
		if (rc == 0)
			rc = nccl.recv(rbuf, s->count, t, (r->rank + n - 1) % n, c, st);
		erc = nccl.group_end();
		rc = rc ? rc : erc;
		break;
	default: return -EINVAL;
	}
	if (rc != 0)
		return wp_fail(r, -EIO, "NCCL %s: %s", wp_colls[o->coll].name, nccl.error_string(rc));
	return 0;
}

/* --peer nccl: loads NCCL (WEFT_PERF_NCCL_LIB, else libnccl.so.2) and makes
 * this rank's communicator, its id shared over weft's bootstrap. Refused
 * unless NCCL_NVLS_ENABLE=0: NVLink multicast must never run here. */
int wp_nccl_setup(struct run *r)
{
	const char *nvls = getenv("NCCL_NVLS_ENABLE");
	if (!nvls || strcmp(nvls, "0") != 0)
		return wp_fail(r, -EPERM, "--peer nccl: set NCCL_NVLS_ENABLE=0 first (NVLink multicast stays off)");
	const char *path = getenv("WEFT_PERF_NCCL_LIB");
	if (!path || !*path)
		path = "libnccl.so.2";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return wp_fail(r, -ENOENT, "--peer nccl: cannot load %s: %s (set WEFT_PERF_NCCL_LIB)", path, dlerror());
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define SYM(field, name) {name, offsetof(struct nccl_dl, field)}
		SYM(get_unique_id, "ncclGetUniqueId"),   SYM(comm_init_rank, "ncclCommInitRank"),
		SYM(comm_destroy, "ncclCommDestroy"),    SYM(all_reduce, "ncclAllReduce"),
		SYM(all_gather, "ncclAllGather"),        SYM(reduce_scatter, "ncclReduceScatter"),
		SYM(broadcast, "ncclBroadcast"),         SYM(reduce, "ncclReduce"),
		SYM(alltoall, "ncclAlltoAll"),           SYM(send, "ncclSend"),
		SYM(recv, "ncclRecv"),                   SYM(group_start, "ncclGroupStart"),
		SYM(group_end, "ncclGroupEnd"),          SYM(error_string, "ncclGetErrorString"),
		SYM(get_version, "ncclGetVersion"),
#undef SYM
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);
		if (!f)
			return wp_fail(r, -ENOENT, "--peer nccl: %s has no %s", path, syms[i].name);
		*(void **)((char *)&nccl + syms[i].off) = f;
	}
	struct nccl_id id, *all = calloc((size_t)r->nranks, sizeof(id));
	if (!all)
		return wp_fail(r, -ENOMEM, "allocating the NCCL ids");
	memset(&id, 0, sizeof(id));
	int rc = r->rank == 0 ? nccl.get_unique_id(&id) : 0;
	if (rc != 0) {
		free(all);
		return wp_fail(r, -EIO, "ncclGetUniqueId: %s", nccl.error_string(rc));
	}
	if ((rc = weft_comm_allgather(r->comm, &id, all, sizeof(id))) != 0) {
		free(all);
		return wp_fail(r, rc, "sharing the NCCL id");
	}
	rc = nccl.comm_init_rank(&r->nccl, r->nranks, all[0], r->rank);
	free(all);
	if (rc != 0)
		return wp_fail(r, -EIO, "ncclCommInitRank: %s", nccl.error_string(rc));
	int v = 0;
	nccl.get_version(&v);
	if (r->rank == 0)
		printf("# peer: NCCL %d.%d.%d from %s\n", v / 10000, v / 100 % 100, v % 100, path);
	return 0;
}


/* Destroys what wp_nccl_setup made, if it made anything. */
void wp_nccl_teardown(struct run *r)
{
	if (r->nccl)
		nccl.comm_destroy(r->nccl);
}
