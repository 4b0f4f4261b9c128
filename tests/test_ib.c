/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the ib transport: its sources are linked in (weft-ib-testable)
 * and driven through a verbs double: fake devices, ports, GID tables and sysfs;
 * queue pairs that record every state change; and a small in-process "wire"
 * that executes posted work requests between two contexts of this process
 * (writes, atomics, write-with-immediate with its receive completion), or
 * holds them, and completion queues a test can script. Plus: the built module
 * loads through the real registry (weft-info). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/plugin.h>

#include "ibp.h"
#include "testlib.h"
#include "tp_harness.h"

#ifndef WEFT_INFO_BIN
#error "WEFT_INFO_BIN must name build/bin/weft-info"
#endif
#ifndef WEFT_IB_PLUGIN_DIR
#error "WEFT_IB_PLUGIN_DIR must name the folder of libweft-ib.so"
#endif

/* ------------------------------------------------ a minimal core for the plugin */
static const struct th_options opts = {.log_env = "WT_IB_LOG", .default_section = "ib", .capture = true};

/* ------------------------------------------------------------ the verbs double */
#define MAXD 4
#define MAXP 2
#define MAXGID 8
#define MAXOBJ 256
#define MAXLOG 4096
#define CQCAP 8192

struct fport {
	enum ibv_port_state state;
	uint8_t link;
	uint16_t lid;
	enum ibv_mtu mtu;
	uint8_t speed, width;
	uint32_t max_msg;
	int ngid;
	union ibv_gid gid[MAXGID];
	const char *type[MAXGID];
};

struct fdev {
	char name[32];
	uint64_t guid;
	enum ibv_atomic_cap atomic;
	int max_qp_wr;
	int nports;
	struct fport port[MAXP];
	const char *numa;
	const char *pci;
};

struct fmr {
	struct ibv_mr mr;
	int access;
	bool dmabuf;
	int fd;
	uint64_t offset, iova;
	bool live;
};

struct fcq {
	struct ibv_cq cq;
	struct {
		struct ibv_wc wc;
		int logidx; /* send completions: the WR's index in its QP's log */
	} q[CQCAP];
	int head, tail;
	int cqe;
	bool overflow;
};

struct wrrec {
	uint64_t wr_id;
	enum ibv_wr_opcode op;
	unsigned flags;
	uint64_t laddr;
	uint32_t len, lkey;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t add;
	uint32_t imm; /* host order */
	bool done;
};

struct fmod {
	enum ibv_qp_state from;
	struct ibv_qp_attr attr;
	int mask;
};

struct fqp {
	struct ibv_qp qp;
	struct fcq *cq;
	struct ibv_qp_cap cap;
	struct fmod mods[8];
	int nmods;
	int recvs;      /* posted receives not yet consumed */
	int max_sq_used;
	int retired;    /* log entries whose send-queue slot was freed by a polled completion */
	struct wrrec log[MAXLOG];
	int nlog;
	uint32_t dest_qpn;
	bool live;
};

static struct fdev fdevs[MAXD];
static int nfdevs;
static int list_errno;          /* get_device_list returns NULL with this errno */
static struct ibv_device fibdev[MAXD];
static int n_ctx, n_pd, n_cq, n_qp, n_lists, n_mr;
static struct fmr *mrs[MAXOBJ];
static int nmrs;
static struct fqp *qps[MAXOBJ];
static int nqps;
static uint32_t next_qpn = 0x100;
static bool hold;               /* log work requests without executing them */
static const char *fail_name;   /* the next call of this verb fails with fail_err */
static int fail_err;
static int fail_skip;

struct fctx {
	struct ibv_context c;
	struct fdev *d;
};

static bool should_fail(const char *name)
{
	if (fail_name && strcmp(fail_name, name) == 0) {
		if (fail_skip > 0) {
			fail_skip--;
			return false;
		}
		fail_name = NULL;
		return true;
	}
	return false;
}

static struct fdev *ctx_dev(struct ibv_context *c)
{
	return ((struct fctx *)c)->d;
}

static struct ibv_device **f_get_device_list(int *num)
{
	if (list_errno) {
		errno = list_errno;
		return NULL;
	}
	struct ibv_device **l = calloc((size_t)nfdevs + 1, sizeof(*l));
	for (int i = 0; i < nfdevs; i++) {
		memset(&fibdev[i], 0, sizeof(fibdev[i]));
		memcpy(fibdev[i].name, fdevs[i].name, sizeof(fdevs[i].name));
		l[i] = &fibdev[i];
	}
	n_lists++;
	if (num)
		*num = nfdevs;
	return l;
}

static void f_free_device_list(struct ibv_device **l)
{
	n_lists--;
	free(l);
}

static struct ibv_context *f_open_device(struct ibv_device *dev)
{
	if (should_fail("open_device")) {
		errno = fail_err;
		return NULL;
	}
	struct fctx *c = calloc(1, sizeof(*c));
	c->c.device = dev;
	c->d = &fdevs[dev - fibdev];
	n_ctx++;
	return &c->c;
}

static int f_close_device(struct ibv_context *c)
{
	n_ctx--;
	free(c);
	return 0;
}

static int f_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	struct fdev *d = ctx_dev(c);
	memset(a, 0, sizeof(*a));
	a->node_guid = d->guid;
	a->max_qp_wr = d->max_qp_wr;
	a->max_cqe = 1 << 16;
	a->atomic_cap = d->atomic;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->phys_port_cnt = (uint8_t)d->nports;
	return 0;
}

static int f_query_port(struct ibv_context *c, uint8_t pn, struct ibv_port_attr *a)
{
	struct fdev *d = ctx_dev(c);
	if (pn < 1 || pn > d->nports)
		return EINVAL;
	const struct fport *p = &d->port[pn - 1];
	memset(a, 0, sizeof(*a));
	a->state = p->state;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = p->mtu;
	a->gid_tbl_len = p->ngid;
	a->max_msg_sz = p->max_msg;
	a->lid = p->lid;
	a->active_speed = p->speed;
	a->active_width = p->width;
	a->link_layer = p->link;
	return 0;
}

static int f_query_gid(struct ibv_context *c, uint8_t pn, int idx, union ibv_gid *g)
{
	struct fdev *d = ctx_dev(c);
	if (pn < 1 || pn > d->nports || idx < 0 || idx >= d->port[pn - 1].ngid)
		return EINVAL;
	*g = d->port[pn - 1].gid[idx];
	return 0;
}

static struct ibv_pd *f_alloc_pd(struct ibv_context *c)
{
	if (should_fail("alloc_pd")) {
		errno = fail_err;
		return NULL;
	}
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	pd->context = c;
	n_pd++;
	return pd;
}

static int f_dealloc_pd(struct ibv_pd *pd)
{
	n_pd--;
	free(pd);
	return 0;
}

static struct fmr *new_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	ck_assert_int_lt(nmrs, MAXOBJ);
	struct fmr *m = calloc(1, sizeof(*m));
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = 0x1000u + (uint32_t)nmrs;
	m->mr.rkey = 0x80000u + (uint32_t)nmrs;
	m->access = access;
	m->live = true;
	mrs[nmrs++] = m;
	n_mr++;
	return m;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	if (should_fail("reg_mr")) {
		errno = fail_err;
		return NULL;
	}
	return &new_mr(pd, addr, len, access)->mr;
}

static struct ibv_mr *f_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd, int access)
{
	if (should_fail("reg_dmabuf_mr")) {
		errno = fail_err;
		return NULL;
	}
	/* As the kernel does: the fd must be open and the MR inside the dma-buf. */
	struct stat sb;
	if (fstat(fd, &sb) != 0) {
		errno = EBADF;
		return NULL;
	}
	if (off + len < off || off + len > (uint64_t)sb.st_size) {
		errno = EINVAL;
		return NULL;
	}
	struct fmr *m = new_mr(pd, (void *)(uintptr_t)iova, len, access);
	m->dmabuf = true;
	m->fd = fd;
	m->offset = off;
	m->iova = iova;
	return &m->mr;
}

static int f_dereg_mr(struct ibv_mr *mr)
{
	struct fmr *m = (struct fmr *)mr;
	ck_assert(m->live);
	m->live = false;
	n_mr--;
	return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe)
{
	if (should_fail("create_cq")) {
		errno = fail_err;
		return NULL;
	}
	struct fcq *q = calloc(1, sizeof(*q));
	q->cq.context = c;
	q->cqe = cqe;
	n_cq++;
	return &q->cq;
}

static int f_destroy_cq(struct ibv_cq *cq)
{
	n_cq--;
	free(cq);
	return 0;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	if (should_fail("create_qp")) {
		errno = fail_err;
		return NULL;
	}
	ck_assert_int_eq(ia->qp_type, IBV_QPT_RC);
	ck_assert_ptr_eq(ia->send_cq, ia->recv_cq);
	struct fqp *q = calloc(1, sizeof(*q));
	q->qp.context = pd->context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.qp_num = next_qpn++;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	q->cq = (struct fcq *)ia->send_cq;
	q->cap = ia->cap;
	q->live = true;
	/* Every completion the queue pair can owe must fit its CQ. */
	ck_assert_int_ge(q->cq->cqe, (int)(ia->cap.max_send_wr + ia->cap.max_recv_wr));
	ck_assert_int_le((int)ia->cap.max_send_wr, ctx_dev(pd->context)->max_qp_wr);
	ck_assert_int_lt(nqps, MAXOBJ);
	qps[nqps++] = q;
	n_qp++;
	return &q->qp;
}

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct fqp *q = (struct fqp *)qp;
	static const char *names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
	char name[32];
	snprintf(name, sizeof(name), "modify_qp:%s", a->qp_state <= IBV_QPS_ERR ? names[a->qp_state] : "?");
	if (should_fail(name))
		return fail_err;
	ck_assert_int_lt(q->nmods, 8);
	q->mods[q->nmods].from = qp->state;
	q->mods[q->nmods].attr = *a;
	q->mods[q->nmods].mask = mask;
	q->nmods++;
	/* Only the bring-up path the RC state machine allows, with its required attributes. */
	int need;
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		if (qp->state != IBV_QPS_RESET)
			return EINVAL;
		need = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		if (qp->state != IBV_QPS_INIT)
			return EINVAL;
		need = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		q->dest_qpn = a->dest_qp_num;
		break;
	case IBV_QPS_RTS:
		if (qp->state != IBV_QPS_RTR)
			return EINVAL;
		need = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		return EINVAL;
	}
	if ((mask & need) != need)
		return EINVAL;
	qp->state = a->qp_state;
	return 0;
}

static int f_destroy_qp(struct ibv_qp *qp)
{
	struct fqp *q = (struct fqp *)qp;
	q->live = false;
	n_qp--;
	return 0;
}

static struct fmr *find_mr(uint32_t key, bool remote)
{
	for (int i = 0; i < nmrs; i++)
		if (mrs[i]->live && (remote ? mrs[i]->mr.rkey : mrs[i]->mr.lkey) == key)
			return mrs[i];
	return NULL;
}

static bool mr_covers(const struct fmr *m, uint64_t addr, uint64_t len)
{
	uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;
	return addr >= base && addr + len <= base + m->mr.length;
}

static struct fqp *find_qp(uint32_t qpn)
{
	for (int i = 0; i < nqps; i++)
		if (qps[i]->live && qps[i]->qp.qp_num == qpn)
			return qps[i];
	return NULL;
}

static void cq_push(struct fcq *cq, const struct ibv_wc *wc, int logidx)
{
	if (cq->tail - cq->head >= cq->cqe || cq->tail == CQCAP) {
		cq->overflow = true;
		return;
	}
	cq->q[cq->tail].wc = *wc;
	cq->q[cq->tail].logidx = logidx;
	cq->tail++;
}

static void complete(struct fqp *q, int idx, enum ibv_wc_status st, enum ibv_wc_opcode op)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = q->log[idx].wr_id;
	wc.status = st;
	wc.opcode = op;
	wc.qp_num = q->qp.qp_num;
	wc.vendor_err = st == IBV_WC_SUCCESS ? 0 : 0x81;
	cq_push(q->cq, &wc, idx);
}

/* Carries out one logged WR against the peer's memory, as an RC responder would. */
static void execute(struct fqp *q, int idx)
{
	struct wrrec *w = &q->log[idx];
	w->done = true;
	if (q->qp.state == IBV_QPS_ERR) {
		complete(q, idx, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE);
		return;
	}
	struct fqp *peer = find_qp(q->dest_qpn);
	struct fmr *lm = find_mr(w->lkey, false);
	struct fmr *rm = find_mr(w->rkey, true);
	enum ibv_wc_status st = IBV_WC_SUCCESS;
	if (!peer)
		st = IBV_WC_RETRY_EXC_ERR;
	else if (!lm || !mr_covers(lm, w->laddr, w->len))
		st = IBV_WC_LOC_PROT_ERR;
	else if (!rm || !mr_covers(rm, w->raddr, w->op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : w->len))
		st = IBV_WC_REM_ACCESS_ERR;
	else if (w->op == IBV_WR_ATOMIC_FETCH_AND_ADD &&
		 (!(rm->access & IBV_ACCESS_REMOTE_ATOMIC) || w->raddr % 8 || ctx_dev(q->qp.context)->atomic == IBV_ATOMIC_NONE))
		st = IBV_WC_REM_ACCESS_ERR;
	else if (w->op != IBV_WR_ATOMIC_FETCH_AND_ADD && !(rm->access & IBV_ACCESS_REMOTE_WRITE))
		st = IBV_WC_REM_ACCESS_ERR;
	else if (w->op == IBV_WR_RDMA_WRITE_WITH_IMM && peer->recvs == 0)
		st = IBV_WC_RNR_RETRY_EXC_ERR;
	if (st != IBV_WC_SUCCESS) {
		complete(q, idx, st, IBV_WC_RDMA_WRITE);
		q->qp.state = IBV_QPS_ERR;
		return;
	}
	enum ibv_wc_opcode op = IBV_WC_RDMA_WRITE;
	switch (w->op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		memcpy((void *)(uintptr_t)w->raddr, (void *)(uintptr_t)w->laddr, w->len);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		uint64_t *t = (uint64_t *)(uintptr_t)w->raddr;
		uint64_t old = *t;
		*t = old + w->add;
		memcpy((void *)(uintptr_t)w->laddr, &old, 8);
		op = IBV_WC_FETCH_ADD;
		break;
	}
	default:
		ck_abort_msg("unexpected opcode %d", (int)w->op);
	}
	if (w->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		struct ibv_wc wc;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = IBP_WRID_RECV;
		wc.status = IBV_WC_SUCCESS;
		wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = htonl(w->imm);
		wc.qp_num = peer->qp.qp_num;
		peer->recvs--;
		cq_push(peer->cq, &wc, -1);
	}
	if (w->flags & IBV_SEND_SIGNALED)
		complete(q, idx, IBV_WC_SUCCESS, op);
}

/* Executes every held WR, in order, queue pair by queue pair. */
static void run_all(void)
{
	for (int i = 0; i < nqps; i++)
		for (int k = 0; k < qps[i]->nlog; k++)
			if (!qps[i]->log[k].done && qps[i]->live)
				execute(qps[i], k);
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct fqp *q = (struct fqp *)qp;
	for (; wr; wr = wr->next) {
		if (should_fail("post_send") || qp->state != IBV_QPS_RTS) {
			*bad = wr;
			return qp->state != IBV_QPS_RTS ? EINVAL : fail_err;
		}
		/* A WR's slot stays taken until a completion of it or a later WR is polled. */
		if (q->nlog - q->retired >= (int)q->cap.max_send_wr) {
			*bad = wr;
			return ENOMEM;
		}
		ck_assert_int_lt(q->nlog, MAXLOG);
		ck_assert_int_eq(wr->num_sge, 1);
		struct wrrec *w = &q->log[q->nlog];
		memset(w, 0, sizeof(*w));
		w->wr_id = wr->wr_id;
		w->op = wr->opcode;
		w->flags = wr->send_flags;
		w->laddr = wr->sg_list[0].addr;
		w->len = wr->sg_list[0].length;
		w->lkey = wr->sg_list[0].lkey;
		if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->raddr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->add = wr->wr.atomic.compare_add;
		} else {
			w->raddr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
		}
		if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
			w->imm = ntohl(wr->imm_data);
		q->nlog++;
		if (q->nlog - q->retired > q->max_sq_used)
			q->max_sq_used = q->nlog - q->retired;
		if (!hold)
			execute(q, q->nlog - 1);
	}
	return 0;
}

static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct fqp *q = (struct fqp *)qp;
	for (; wr; wr = wr->next) {
		if (qp->state == IBV_QPS_RESET || q->recvs >= (int)q->cap.max_recv_wr) {
			*bad = wr;
			return EINVAL;
		}
		ck_assert_uint_eq(wr->wr_id, IBP_WRID_RECV);
		q->recvs++;
	}
	return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct fcq *q = (struct fcq *)cq;
	int k = 0;
	while (k < n && q->head < q->tail) {
		wc[k] = q->q[q->head].wc;
		int idx = q->q[q->head].logidx;
		if (idx >= 0) {
			struct fqp *qp = find_qp(wc[k].qp_num);
			if (qp && idx + 1 > qp->retired)
				qp->retired = idx + 1;
		}
		q->head++;
		k++;
	}
	return k;
}

/* sysfs: numa_node, the device link, and GID types. */
static int f_read_sysfs(const char *path, char *buf, size_t len)
{
	for (int i = 0; i < nfdevs; i++) {
		char pre[128];
		int n = snprintf(pre, sizeof(pre), "/sys/class/infiniband/%s/", fdevs[i].name);
		if (strncmp(path, pre, (size_t)n) != 0)
			continue;
		const char *rest = path + n;
		if (strcmp(rest, "device/numa_node") == 0 && fdevs[i].numa) {
			snprintf(buf, len, "%s", fdevs[i].numa);
			return 0;
		}
		unsigned port;
		int idx;
		if (sscanf(rest, "ports/%u/gid_attrs/types/%d", &port, &idx) == 2 && port >= 1 &&
		    port <= (unsigned)fdevs[i].nports && idx >= 0 && idx < fdevs[i].port[port - 1].ngid &&
		    fdevs[i].port[port - 1].type[idx]) {
			snprintf(buf, len, "%s", fdevs[i].port[port - 1].type[idx]);
			return 0;
		}
	}
	return ENOENT;
}

static int f_real_path(const char *path, char *buf, size_t len)
{
	for (int i = 0; i < nfdevs; i++) {
		const char *pre = "/sys/class/infiniband/";
		size_t nl = strlen(fdevs[i].name);
		if (strncmp(path, pre, strlen(pre)) == 0 && strncmp(path + strlen(pre), fdevs[i].name, nl) == 0 &&
		    strcmp(path + strlen(pre) + nl, "/device") == 0 && fdevs[i].pci) {
			snprintf(buf, len, "%s", fdevs[i].pci);
			return 0;
		}
	}
	return ENOENT;
}

static const struct ibp_verbs_ops fake = {
	.get_device_list = f_get_device_list,
	.free_device_list = f_free_device_list,
	.open_device = f_open_device,
	.close_device = f_close_device,
	.query_device = f_query_device,
	.query_port = f_query_port,
	.query_gid = f_query_gid,
	.alloc_pd = f_alloc_pd,
	.dealloc_pd = f_dealloc_pd,
	.reg_mr = f_reg_mr,
	.reg_dmabuf_mr = f_reg_dmabuf_mr,
	.dereg_mr = f_dereg_mr,
	.create_cq = f_create_cq,
	.destroy_cq = f_destroy_cq,
	.create_qp = f_create_qp,
	.modify_qp = f_modify_qp,
	.destroy_qp = f_destroy_qp,
	.post_send = f_post_send,
	.post_recv = f_post_recv,
	.poll_cq = f_poll_cq,
	.read_sysfs = f_read_sysfs,
	.real_path = f_real_path,
};

/* ------------------------------------------------------ the CUDA driver double */
/* Pointers in [fcu.lo, fcu.hi) are "device memory" of CUDA device fcu.gpu: a
 * page-aligned host buffer. The export checks what the real driver documents
 * (a current context, page-aligned range inside an allocation) and returns a
 * memfd of the range's size, so fd handling is real. */
#define FCU_DEV0 100 /* CUdevice handles differ from ordinals, to catch a mix-up */
#define FCU_MEM_CTX ((void *)0xc0c0)
#define FCU_PRIMARY_CTX ((void *)0xd0d0)
static struct {
	int init_rc; /* cuInit's answer */
	int ndev;
	int dmabuf[4]; /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED per ordinal */
	int attr_rc;   /* cuDeviceGetAttribute's answer */
	int export_rc; /* cuMemGetHandleForAddressRange's answer */
	uintptr_t lo, hi;
	int gpu;
	bool own_ctx; /* the memory has a context (cudaMalloc), not (cuMemCreate) */
	/* What the plugin did. */
	int inits, exports, attr_calls;
	uint64_t base, size; /* the last export's range */
	int type;
	unsigned long long flags;
	int fd; /* the last fd handed out */
	int depth, pushes, retains, releases;
	void *pushed;
} fcu;

static int fcu_init(unsigned flags)
{
	ck_assert_uint_eq(flags, 0);
	fcu.inits++;
	return fcu.init_rc;
}

static int fcu_error_name(int err, const char **name)
{
	switch (err) {
	case 0: *name = "CUDA_SUCCESS"; return 0;
	case 1: *name = "CUDA_ERROR_INVALID_VALUE"; return 0;
	case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 801: *name = "CUDA_ERROR_NOT_SUPPORTED"; return 0;
	case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
	}
	*name = NULL;
	return 1;
}

static int fcu_error_string(int err, const char **text)
{
	switch (err) {
	case 0: *text = "no error"; return 0;
	case 1: *text = "invalid argument"; return 0;
	case 100: *text = "no CUDA-capable device is detected"; return 0;
	case 801: *text = "operation not supported"; return 0;
	case 999: *text = "unknown error"; return 0;
	}
	*text = NULL;
	return 1;
}

static int fcu_device_get_count(int *n)
{
	ck_assert_int_gt(fcu.inits, 0);
	*n = fcu.ndev;
	return 0;
}

static int fcu_device_get(int *dev, int ordinal)
{
	if (ordinal < 0 || ordinal >= fcu.ndev)
		return 101; /* CUDA_ERROR_INVALID_DEVICE */
	*dev = FCU_DEV0 + ordinal;
	return 0;
}

static int fcu_device_get_attribute(int *value, int attr, int dev)
{
	ck_assert_int_eq(attr, IBP_CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED);
	ck_assert_int_ge(dev, FCU_DEV0);
	ck_assert_int_lt(dev, FCU_DEV0 + fcu.ndev);
	fcu.attr_calls++;
	if (fcu.attr_rc)
		return fcu.attr_rc;
	*value = fcu.dmabuf[dev - FCU_DEV0];
	return 0;
}

static int fcu_pointer_get_attribute(void *data, int attr, unsigned long long ptr)
{
	if (ptr < fcu.lo || ptr >= fcu.hi)
		return IBP_CUDA_ERROR_INVALID_VALUE;
	if (attr == IBP_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
		*(int *)data = fcu.gpu;
	else if (attr == IBP_CU_POINTER_ATTRIBUTE_CONTEXT)
		*(void **)data = fcu.own_ctx ? FCU_MEM_CTX : NULL;
	else
		return IBP_CUDA_ERROR_INVALID_VALUE;
	return 0;
}

static int fcu_primary_ctx_retain(void **ctx, int dev)
{
	ck_assert_int_eq(dev, FCU_DEV0 + fcu.gpu);
	fcu.retains++;
	*ctx = FCU_PRIMARY_CTX;
	return 0;
}

static int fcu_primary_ctx_release(int dev)
{
	ck_assert_int_eq(dev, FCU_DEV0 + fcu.gpu);
	fcu.releases++;
	return 0;
}

static int fcu_ctx_push(void *ctx)
{
	ck_assert_ptr_nonnull(ctx);
	fcu.depth++;
	fcu.pushes++;
	fcu.pushed = ctx;
	return 0;
}

static int fcu_ctx_pop(void **ctx)
{
	ck_assert_int_gt(fcu.depth, 0);
	fcu.depth--;
	*ctx = fcu.pushed;
	return 0;
}

static int fcu_get_handle(void *handle, unsigned long long dptr, size_t size, int type, unsigned long long flags)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	fcu.exports++;
	fcu.base = dptr;
	fcu.size = size;
	fcu.type = type;
	fcu.flags = flags;
	if (fcu.depth == 0)
		return 201; /* CUDA_ERROR_INVALID_CONTEXT */
	if (fcu.export_rc)
		return fcu.export_rc;
	if (dptr % pg || size % pg || size == 0 || dptr < fcu.lo || dptr + size > fcu.hi)
		return IBP_CUDA_ERROR_INVALID_VALUE;
	int fd = memfd_create("fake-dmabuf", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	fcu.fd = fd;
	*(int *)handle = fd;
	return 0;
}

static struct ibp_cuda_ops fcu_ops = {
	.init = fcu_init,
	.get_error_name = fcu_error_name,
	.get_error_string = fcu_error_string,
	.device_get_count = fcu_device_get_count,
	.device_get = fcu_device_get,
	.device_get_attribute = fcu_device_get_attribute,
	.pointer_get_attribute = fcu_pointer_get_attribute,
	.primary_ctx_retain = fcu_primary_ctx_retain,
	.primary_ctx_release = fcu_primary_ctx_release,
	.ctx_push_current = fcu_ctx_push,
	.ctx_pop_current = fcu_ctx_pop,
	.mem_get_handle_for_address_range = fcu_get_handle,
};

/* A driver with no device, as every test starts; fcu_gpu adds one. */
static void fcu_reset(void)
{
	memset(&fcu, 0, sizeof(fcu));
	fcu.init_rc = IBP_CUDA_ERROR_NO_DEVICE;
	fcu.fd = -1;
	fcu.own_ctx = true;
	fcu_ops.mem_get_handle_for_address_range = fcu_get_handle;
	ibp_set_cuda(&fcu_ops);
}

/* One CUDA device (ordinal 0, dma-buf as given) whose memory is npages host
 * pages, returned. Freed by the test. */
static unsigned char *fcu_gpu(int dmabuf, size_t npages)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *mem = aligned_alloc(pg, npages * pg);
	ck_assert_ptr_nonnull(mem);
	fcu.init_rc = 0;
	fcu.ndev = 1;
	fcu.dmabuf[0] = dmabuf;
	fcu.gpu = 0;
	fcu.lo = (uintptr_t)mem;
	fcu.hi = (uintptr_t)mem + npages * pg;
	return mem;
}

/* Whether fd is closed. */
static bool fd_closed(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

/* Open descriptors of this process. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/* ----------------------------------------------------------- fake devices */
static union ibv_gid gid_of(const char *text)
{
	union ibv_gid g;
	ck_assert_int_eq(inet_pton(AF_INET6, text, g.raw), 1);
	return g;
}

static struct fdev *add_dev(const char *name, uint64_t guid, enum ibv_atomic_cap atomic)
{
	ck_assert_int_lt(nfdevs, MAXD);
	struct fdev *d = &fdevs[nfdevs++];
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->guid = guid;
	d->atomic = atomic;
	d->max_qp_wr = 32768;
	return d;
}

static struct fport *add_port(struct fdev *d, enum ibv_port_state st, uint8_t link, uint16_t lid, enum ibv_mtu mtu)
{
	ck_assert_int_lt(d->nports, MAXP);
	struct fport *p = &d->port[d->nports++];
	memset(p, 0, sizeof(*p));
	p->state = st;
	p->link = link;
	p->lid = lid;
	p->mtu = mtu;
	p->speed = 32; /* EDR */
	p->width = 2;  /* 4x */
	p->max_msg = 1u << 30;
	return p;
}

static void add_gid(struct fport *p, const char *text, const char *type)
{
	ck_assert_int_lt(p->ngid, MAXGID);
	p->gid[p->ngid] = text ? gid_of(text) : (union ibv_gid){0};
	p->type[p->ngid] = type;
	p->ngid++;
}

/* An InfiniBand HCA: mlx5_0, port 1 active (lid 7), port 2 down. */
static struct fdev *ib_dev(const char *name, uint64_t guid, uint16_t lid, enum ibv_atomic_cap atomic)
{
	struct fdev *d = add_dev(name, guid, atomic);
	d->numa = "1";
	d->pci = "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
	struct fport *p = add_port(d, IBV_PORT_ACTIVE, IBV_LINK_LAYER_INFINIBAND, lid, IBV_MTU_4096);
	add_gid(p, "fe80::1:2:3:4", NULL);
	add_gid(p, NULL, NULL);
	add_port(d, IBV_PORT_DOWN, IBV_LINK_LAYER_INFINIBAND, 0, IBV_MTU_4096);
	return d;
}

/* A RoCE NIC whose GID table has every kind of entry. */
static struct fdev *roce_dev(const char *name, uint64_t guid, enum ibv_atomic_cap atomic, const char *v4)
{
	struct fdev *d = add_dev(name, guid, atomic);
	d->numa = "0";
	d->pci = "/sys/devices/pci0000:00/0000:00:02.0/0000:5e:00.1";
	struct fport *p = add_port(d, IBV_PORT_ACTIVE, IBV_LINK_LAYER_ETHERNET, 0, IBV_MTU_1024);
	p->speed = 64; /* HDR-class 50 Gb/s lanes */
	p->width = 1;
	add_gid(p, "fe80::a:b", "IB/RoCE v1");
	add_gid(p, "fe80::a:b", "RoCE v2");
	add_gid(p, v4, "IB/RoCE v1");
	add_gid(p, "2001:db8::5", "RoCE v2");
	add_gid(p, v4, "RoCE v2");
	return d;
}

/* ---------------------------------------------------------------- fixture */
static const struct weft_transport_ops *ops;

static const char *const env_keys[] = {"WEFT_IB_DEVICES", "WEFT_IB_GID_INDEX", "WEFT_IB_SQ_DEPTH", "WEFT_IB_RQ_DEPTH",
	"WEFT_IB_CQ_SIZE", "WEFT_IB_SIGNAL_EVERY", "WEFT_IB_MAX_MSG_SIZE", "WEFT_IB_MTU", "WEFT_IB_TIMEOUT",
	"WEFT_IB_RETRY_CNT", "WEFT_IB_RNR_RETRY", "WEFT_IB_SIGNAL", "WEFT_IB_IMM_SLOTS", "WEFT_IB_PEER_MEMORY",
	"WEFT_IB_TRAFFIC_CLASS", NULL};

static void setup(void)
{
	for (int i = 0; env_keys[i]; i++)
		unsetenv(env_keys[i]);
	nfdevs = 0;
	list_errno = 0;
	hold = false;
	fail_name = NULL;
	fail_skip = 0;
	th_loglen = 0;
	th_logbuf[0] = '\0';
	th_configure(&opts);
	ibp_set_verbs(&fake);
	fcu_reset();
	const struct weft_plugin_desc *const *d = weft_plugin_init(&th_core);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(d[0]);
	ck_assert_ptr_null(d[1]);
	ck_assert_str_eq(d[0]->name, "ib");
	ck_assert_int_eq(d[0]->kind, WEFT_PLUGIN_TRANSPORT);
	ops = d[0]->ops;
}

/* Everything the plugin made, it released. */
static void assert_no_leaks(void)
{
	ck_assert_int_eq(n_ctx, 0);
	ck_assert_int_eq(n_pd, 0);
	ck_assert_int_eq(n_mr, 0);
	ck_assert_int_eq(n_cq, 0);
	ck_assert_int_eq(n_qp, 0);
	ck_assert_int_eq(n_lists, 0);
}

static void *open_ctx(int rank, const char *devices)
{
	if (devices)
		setenv("WEFT_IB_DEVICES", devices, 1);
	else
		unsetenv("WEFT_IB_DEVICES");
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = rank, .nranks = 2, .comm_tag = 1,
				      .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	int rc = ops->open(&a, &tc);
	ck_assert_msg(rc == 0, "open: %d\n%s", rc, th_logbuf);
	return tc;
}

/* Two contexts joined by one connection each way, as two ranks would be. */
struct pair {
	void *tc[2];
	void *ep[2];
	unsigned char addr[2][IBP_ADDR_LEN];
};

static void make_eps(struct pair *p)
{
	for (int r = 0; r < 2; r++) {
		struct weft_tp_peer peer = {.size = sizeof(peer), .rank = 1 - r, .peer_class = WEFT_PEER_OTHER_HOST,
					    .host_id = "x", .addr = "127.0.0.1"};
		size_t len = 0;
		ck_assert_int_eq(ops->endpoint(p->tc[r], &peer, NULL, &len, &p->ep[r]), -ENOSPC);
		ck_assert_uint_eq(len, IBP_ADDR_LEN);
		ck_assert_int_eq(ops->endpoint(p->tc[r], &peer, p->addr[r], &len, &p->ep[r]), 0);
	}
}

static void pair_open(struct pair *p, const char *dev0, const char *dev1)
{
	memset(p, 0, sizeof(*p));
	p->tc[0] = open_ctx(0, dev0);
	p->tc[1] = open_ctx(1, dev1);
	make_eps(p);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(ops->connect(p->ep[r], p->addr[1 - r], IBP_ADDR_LEN) == 0, "connect:\n%s", th_logbuf);
}

static void pair_close(struct pair *p)
{
	for (int r = 0; r < 2; r++) {
		if (p->ep[r])
			ck_assert_int_eq(ops->disconnect(p->ep[r]), 0);
		ops->close(p->tc[r]);
	}
	assert_no_leaks();
}

static struct fqp *qp_of(void *ep)
{
	return (struct fqp *)((struct ibp_ep *)ep)->qp;
}

/* A registered buffer and the peer's import of it. */
struct region {
	unsigned char *buf;
	size_t len;
	void *mh;
	void *rmh; /* as the other context imported it */
};

static void region_make(struct pair *p, int owner, size_t len, struct region *g)
{
	g->buf = aligned_alloc(64, (len + 63) / 64 * 64);
	g->len = len;
	memset(g->buf, 0, len);
	ck_assert_int_eq(ops->mem_register(p->tc[owner], g->buf, len, WEFT_MEM_HOST, &g->mh), 0);
	unsigned char blob[512];
	size_t bl = sizeof(blob);
	ck_assert_int_eq(ops->mem_serialize(p->tc[owner], g->mh, blob, &bl), 0);
	ck_assert_int_eq(ops->mem_import(p->tc[1 - owner], owner, blob, bl, &g->rmh), 0);
}

static void region_free(struct pair *p, int owner, struct region *g)
{
	ck_assert_int_eq(ops->mem_release(p->tc[1 - owner], g->rmh), 0);
	ck_assert_int_eq(ops->mem_deregister(p->tc[owner], g->mh), 0);
	free(g->buf);
}

/* Progresses both sides until ep's flush completes (bounded). */
static int flush_wait(struct pair *p, int r)
{
	int rc = -EAGAIN;
	for (int i = 0; i < 1000 && rc == -EAGAIN; i++) {
		run_all();
		ops->progress(p->tc[1 - r]);
		rc = ops->flush(p->ep[r]);
	}
	return rc;
}

/* ------------------------------------------------------------------ tests */
START_TEST(no_device_at_all)
{
	/* The kernel has no RDMA support: libibverbs answers ENOSYS. */
	list_errno = ENOSYS;
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = (void *)0x1;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert_ptr_eq(tc, (void *)0x1);
	ck_assert_msg(th_log_has("[I] no RDMA device found"), "log:\n%s", th_logbuf);
	ck_assert(!th_log_has("[E]"));
	struct weft_tp_device devs[4];
	int n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 0);
	char line[256];
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_str_eq(line, "no RDMA device");
	/* An empty list (devices gone, module loaded) reads the same. */
	list_errno = 0;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_str_eq(line, "no RDMA device");
	assert_no_leaks();
}
END_TEST

START_TEST(down_ports_skipped)
{
	struct fdev *d = add_dev("mlx5_0", 0x11, IBV_ATOMIC_HCA);
	add_port(d, IBV_PORT_DOWN, IBV_LINK_LAYER_INFINIBAND, 0, IBV_MTU_4096);
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert_msg(th_log_has("[I] mlx5_0:1 is DOWN, not ACTIVE: skipped"), "log:\n%s", th_logbuf);
	ck_assert_msg(th_log_has("no usable RDMA port (1 device found, 1 port down)"), "log:\n%s", th_logbuf);
	char line[256];
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_str_eq(line, "no usable RDMA port (1 device, 1 port down)");
	assert_no_leaks();
}
END_TEST

START_TEST(probe_reports_ports)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	roce_dev("mlx5_1", 0x22, IBV_ATOMIC_NONE, "::ffff:10.0.0.5");
	struct weft_tp_device devs[4];
	int n = 1;
	ck_assert_int_eq(ops->probe(devs, &n), -ENOSPC);
	ck_assert_int_eq(n, 2);
	n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(devs[0].name, "mlx5_0:1");
	ck_assert_str_eq(devs[0].link, "ib");
	ck_assert_double_eq_tol(devs[0].bandwidth_gbps, 12.5, 1e-9); /* EDR 4x = 100 Gb/s */
	ck_assert_int_eq(devs[0].numa_node, 1);
	ck_assert_str_eq(devs[0].pci_path, "pci0000:3a/0000:3a:00.0/0000:3b:00.0");
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);
	ck_assert_uint_eq(devs[0].peer_classes, 7u);
	ck_assert_str_eq(devs[1].name, "mlx5_1:1");
	ck_assert_str_eq(devs[1].link, "roce");
	ck_assert_double_eq_tol(devs[1].bandwidth_gbps, 6.25, 1e-9); /* 50 Gb/s x1 */
	ck_assert_int_eq(devs[1].numa_node, 0);
	ck_assert(th_log_has("mlx5_0:2 is DOWN, not ACTIVE: skipped"));
	char line[512];
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_msg(strstr(line, "mlx5_0:1 InfiniBand 12.5GB/s mtu=4096 gid=0 atomics=yes numa=1") != NULL, "%s", line);
	ck_assert_msg(strstr(line, "mlx5_1:1 Ethernet 6.2GB/s mtu=1024 gid=4/RoCE v2 atomics=no numa=0") != NULL, "%s",
		      line);
	/* The peer-memory parameter adds CUDA memory to what the ports reach. */
	setenv("WEFT_IB_PEER_MEMORY", "1", 1);
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_uint_eq(devs[0].mem_types, (1u << WEFT_MEM_HOST) | (1u << WEFT_MEM_CUDA));
	assert_no_leaks();
}
END_TEST

START_TEST(devices_parameter)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	roce_dev("mlx5_2", 0x33, IBV_ATOMIC_HCA, "::ffff:10.0.0.5");
	struct weft_tp_device devs[8];
	int n = 8;
	/* Unset: every active port, several per host (no NIC-per-GPU assumption). */
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 3);
	setenv("WEFT_IB_DEVICES", "mlx5_2:1, mlx5_0", 1);
	n = 8;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 2);
	ck_assert_str_eq(devs[0].name, "mlx5_0:1");
	ck_assert_str_eq(devs[1].name, "mlx5_2:1");
	/* An open context uses exactly those ports; peers spread over them. */
	struct ibp_ctx *ctx = open_ctx(0, "mlx5_1:1,mlx5_2:1");
	ck_assert_int_eq(ctx->fab.nports, 2);
	ck_assert_str_eq(ctx->fab.ports[0].name, "mlx5_1:1");
	ck_assert_str_eq(ctx->fab.ports[1].name, "mlx5_2:1");
	ck_assert_int_eq(ctx->fab.ndevs, 2);
	ck_assert_int_eq(n_pd, 2);
	ops->close(ctx);
	/* Names that match nothing: a warning each, then no device. */
	th_loglen = 0;
	setenv("WEFT_IB_DEVICES", "mlx5_9,mlx5_0:3", 1);
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert_msg(th_log_has("[W] parameter ib.devices names 'mlx5_9', which is not an RDMA device here"), "%s",
		      th_logbuf);
	ck_assert_msg(th_log_has("[W] parameter ib.devices names mlx5_0:3, which is no port of that device"), "%s",
		      th_logbuf);
	/* Naming a down port gets the down message. */
	th_loglen = 0;
	setenv("WEFT_IB_DEVICES", "mlx5_0:2", 1);
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert(th_log_has("mlx5_0:2 is DOWN, not ACTIVE: skipped"));
	/* Malformed values are configuration errors. */
	const char *bad[] = {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", ":1", "mlx5 0", "ml$x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("WEFT_IB_DEVICES", bad[i], 1);
		th_loglen = 0;
		ck_assert_msg(ops->open(&a, &tc) == -WEFT_ERR_CONFIG, "devices='%s'", bad[i]);
		ck_assert_msg(th_log_has("[E] parameter ib.devices"), "devices='%s': %s", bad[i], th_logbuf);
	}
	assert_no_leaks();
}
END_TEST

START_TEST(parse_devices_list)
{
	struct ibp_dev_sel sel[IBP_MAX_SEL];
	int n = -1;
	ck_assert_int_eq(ibp_parse_devices("mlx5_0:1,mlx5_1:2 , bnxt_re0", sel, &n), 0);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(sel[0].name, "mlx5_0");
	ck_assert_int_eq(sel[0].port, 1);
	ck_assert_str_eq(sel[1].name, "mlx5_1");
	ck_assert_int_eq(sel[1].port, 2);
	ck_assert_str_eq(sel[2].name, "bnxt_re0");
	ck_assert_int_eq(sel[2].port, 0);
	ck_assert_int_eq(ibp_parse_devices("", sel, &n), 0);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(ibp_parse_devices(NULL, sel, &n), 0);
	ck_assert_int_eq(n, 0);
}
END_TEST

static int chosen_gid(void)
{
	struct ibp_ctx *ctx = open_ctx(0, NULL);
	int idx = ctx->fab.ports[0].gid_index;
	ops->close(ctx);
	return idx;
}

START_TEST(gid_selection)
{
	/* Index 4 is RoCE v2 with an IPv4-mapped address: preferred over v1
	 * entries, link-local v2 and a global IPv6 v2. */
	struct fdev *d = roce_dev("mlx5_0", 0x11, IBV_ATOMIC_HCA, "::ffff:10.0.0.5");
	ck_assert_int_eq(chosen_gid(), 4);
	struct ibp_ctx *ctx = open_ctx(0, NULL);
	ck_assert_str_eq(ctx->fab.ports[0].gid_type, "RoCE v2");
	ck_assert_int_eq(ctx->fab.ports[0].gid.raw[15], 5);
	ops->close(ctx);
	/* Without it: the global IPv6 RoCE v2 entry. */
	d->port[0].type[4] = "IB/RoCE v1";
	ck_assert_int_eq(chosen_gid(), 3);
	/* Without any v2 (or with sysfs silent about types): the first usable entry. */
	for (int i = 0; i < d->port[0].ngid; i++)
		d->port[0].type[i] = NULL;
	ck_assert_int_eq(chosen_gid(), 0);
	/* The parameter overrides the choice... */
	setenv("WEFT_IB_GID_INDEX", "2", 1);
	ck_assert_int_eq(chosen_gid(), 2);
	/* ...and must name a real entry. */
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	setenv("WEFT_IB_GID_INDEX", "9", 1);
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_CONFIG);
	ck_assert(th_log_has("parameter ib.gid_index=9 is outside mlx5_0:1's GID table (5 entries)"));
	d->port[0].gid[1] = (union ibv_gid){0};
	setenv("WEFT_IB_GID_INDEX", "1", 1);
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_CONFIG);
	ck_assert(th_log_has("parameter ib.gid_index=1 names an empty GID entry of mlx5_0:1"));
	/* A RoCE port without any GID (no IP address) is skipped. */
	unsetenv("WEFT_IB_GID_INDEX");
	d->port[0].ngid = 0;
	th_loglen = 0;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_NO_DEVICE);
	ck_assert(th_log_has("mlx5_0:1: Ethernet (RoCE) port without a usable GID"));
	/* InfiniBand uses index 0 (routing is by LID). */
	nfdevs = 0;
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ck_assert_int_eq(chosen_gid(), 0);
	assert_no_leaks();
}
END_TEST

static const unsigned char *ctx_port_gid(void *tc)
{
	return ((struct ibp_ctx *)tc)->fab.ports[0].gid.raw;
}

static void check_bringup(struct pair *p, int r, bool roce)
{
	struct fqp *q = qp_of(p->ep[r]);
	struct ibp_ep *ep = p->ep[r];
	struct ibp_ep *peer = p->ep[1 - r];
	ck_assert_int_eq(q->nmods, 3);
	/* RESET -> INIT: port and the access a peer's writes and atomics need. */
	ck_assert_int_eq(q->mods[0].from, IBV_QPS_RESET);
	ck_assert_int_eq(q->mods[0].attr.qp_state, IBV_QPS_INIT);
	ck_assert_int_eq(q->mods[0].attr.port_num, 1);
	ck_assert_int_eq(q->mods[0].attr.pkey_index, 0);
	ck_assert_uint_eq(q->mods[0].attr.qp_access_flags,
			  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	/* INIT -> RTR: the peer's QPN and PSN, the path MTU both ends take. */
	ck_assert_int_eq(q->mods[1].from, IBV_QPS_INIT);
	ck_assert_int_eq(q->mods[1].attr.qp_state, IBV_QPS_RTR);
	ck_assert_uint_eq(q->mods[1].attr.dest_qp_num, peer->qp->qp_num);
	ck_assert_uint_eq(q->mods[1].attr.rq_psn, peer->psn);
	ck_assert_uint_eq(q->mods[1].attr.rq_psn, weft_kit_le_get32(p->addr[1 - r] + 12));
	ck_assert_int_eq(q->mods[1].attr.max_dest_rd_atomic, 16);
	ck_assert_int_eq(q->mods[1].attr.min_rnr_timer, 12);
	ck_assert_int_eq(q->mods[1].attr.ah_attr.port_num, 1);
	if (roce) {
		ck_assert_int_eq(q->mods[1].attr.ah_attr.is_global, 1);
		ck_assert_mem_eq(q->mods[1].attr.ah_attr.grh.dgid.raw, ctx_port_gid(p->tc[1 - r]), 16);
		ck_assert_int_eq(q->mods[1].attr.ah_attr.grh.sgid_index, 4);
		ck_assert_int_eq(q->mods[1].attr.ah_attr.grh.hop_limit, 64);
	} else {
		ck_assert_int_eq(q->mods[1].attr.ah_attr.is_global, 0);
		ck_assert_int_eq(q->mods[1].attr.ah_attr.dlid, r == 0 ? 8 : 7);
	}
	/* RTR -> RTS: our own PSN, retry and timeout parameters, atomic depth. */
	ck_assert_int_eq(q->mods[2].from, IBV_QPS_RTR);
	ck_assert_int_eq(q->mods[2].attr.qp_state, IBV_QPS_RTS);
	ck_assert_uint_eq(q->mods[2].attr.sq_psn, ep->psn);
	ck_assert_uint_eq(q->mods[2].attr.sq_psn, weft_kit_le_get32(p->addr[r] + 12));
	ck_assert_int_eq(q->mods[2].attr.retry_cnt, 7);
	ck_assert_int_eq(q->mods[2].attr.rnr_retry, 7);
	ck_assert_int_eq(q->mods[2].attr.max_rd_atomic, 16);
	ck_assert_int_eq(q->qp.state, IBV_QPS_RTS);
	/* Receives for imm signals were posted before the peer could send. */
	ck_assert_int_eq(q->recvs, 128);
}

START_TEST(qp_bringup_infiniband)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	struct pair p;
	memset(&p, 0, sizeof(p));
	/* Rank 0 caps its MTU at 2048 and lengthens its ACK timeout. */
	setenv("WEFT_IB_MTU", "2048", 1);
	setenv("WEFT_IB_TIMEOUT", "18", 1);
	p.tc[0] = open_ctx(0, "mlx5_0");
	unsetenv("WEFT_IB_MTU");
	unsetenv("WEFT_IB_TIMEOUT");
	p.tc[1] = open_ctx(1, "mlx5_1");
	make_eps(&p);
	for (int r = 0; r < 2; r++) {
		struct fqp *q = qp_of(p.ep[r]);
		/* endpoint() leaves the QP in INIT, with its address written. */
		ck_assert_int_eq(q->qp.state, IBV_QPS_INIT);
		ck_assert_int_eq(q->nmods, 1);
		ck_assert_uint_eq(weft_kit_le_get32(p.addr[r]), IBP_ADDR_MAGIC);
		ck_assert_uint_eq(weft_kit_le_get16(p.addr[r] + 4), IBP_ADDR_VERSION);
		ck_assert_uint_eq(weft_kit_le_get32(p.addr[r] + 8), q->qp.qp_num);
		ck_assert_uint_eq(weft_kit_le_get16(p.addr[r] + 16), r == 0 ? 7 : 8);
		ck_assert_uint_eq(p.addr[r][18], IBV_LINK_LAYER_INFINIBAND);
		ck_assert_uint_eq(p.addr[r][19], r == 0 ? IBV_MTU_2048 : IBV_MTU_4096);
		ck_assert_uint_eq(weft_kit_le_get32(p.addr[r] + 12) & ~IBP_PSN_MASK, 0);
		ck_assert_int_eq(q->cap.max_send_wr, 256);
		ck_assert_int_eq(q->cq->cqe, 256 + 128);
	}
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->connect(p.ep[r], p.addr[1 - r], IBP_ADDR_LEN), 0);
	for (int r = 0; r < 2; r++) {
		check_bringup(&p, r, false);
		ck_assert_int_eq(qp_of(p.ep[r])->mods[1].attr.path_mtu, IBV_MTU_2048);
		ck_assert_int_eq(((struct ibp_ep *)p.ep[r])->sig_mode, IBP_SIG_ATOMIC);
	}
	ck_assert_int_eq(qp_of(p.ep[0])->mods[2].attr.timeout, 18);
	ck_assert_int_eq(qp_of(p.ep[1])->mods[2].attr.timeout, 14);
	/* A second connect is refused; ep_describe says what carries it. */
	ck_assert_int_eq(ops->connect(p.ep[0], p.addr[1], IBP_ADDR_LEN), -EINVAL);
	char line[256];
	ck_assert_int_eq(ops->ep_describe(p.ep[0], line, sizeof(line)), 0);
	ck_assert_msg(strstr(line, "device=mlx5_0:1 link=InfiniBand") && strstr(line, "peer=rank 1") &&
			      strstr(line, "mtu=2048") && strstr(line, "signal=atomic"),
		      "%s", line);
	pair_close(&p);
}
END_TEST

START_TEST(qp_bringup_roce)
{
	roce_dev("mlx5_0", 0x11, IBV_ATOMIC_HCA, "::ffff:10.0.0.5");
	struct fdev *d = roce_dev("mlx5_1", 0x22, IBV_ATOMIC_HCA, "::ffff:10.0.0.6");
	d->port[0].mtu = IBV_MTU_4096;
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	for (int r = 0; r < 2; r++) {
		check_bringup(&p, r, true);
		ck_assert_int_eq(qp_of(p.ep[r])->mods[1].attr.path_mtu, IBV_MTU_1024);
		ck_assert_uint_eq(p.addr[r][21] & IBP_EPF_GRH, IBP_EPF_GRH);
	}
	/* The GID carried is the chosen IPv4-mapped RoCE v2 one. */
	ck_assert_int_eq(p.addr[1][24 + 15], 6);
	ck_assert_int_eq(p.addr[1][24 + 10], 0xff);
	pair_close(&p);
}
END_TEST

START_TEST(bringup_failures)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	struct pair p;
	memset(&p, 0, sizeof(p));
	p.tc[0] = open_ctx(0, "mlx5_0");
	p.tc[1] = open_ctx(1, "mlx5_1");
	struct weft_tp_peer peer = {.size = sizeof(peer), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST};
	size_t len = IBP_ADDR_LEN;
	void *ep = NULL;
	/* Each verb of endpoint() failing: a weft error and one line naming it. */
	const struct {
		const char *verb;
		int err;
		const char *line;
	} cases[] = {
		{"reg_mr", ENOMEM, "[E] ibv_reg_mr on mlx5_0:1 failed: Cannot allocate memory"},
		{"create_cq", EINVAL, "[E] ibv_create_cq on mlx5_0:1 failed: Invalid argument"},
		{"create_qp", ENOSPC, "[E] ibv_create_qp on mlx5_0:1 failed: No space left on device"},
		{"modify_qp:INIT", EPERM, "[E] ibv_modify_qp(INIT) on mlx5_0:1 failed: Operation not permitted"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		th_loglen = 0;
		th_logbuf[0] = '\0';
		fail_name = cases[i].verb;
		fail_err = cases[i].err;
		ck_assert_int_eq(ops->endpoint(p.tc[0], &peer, p.addr[0], &len, &ep), -WEFT_ERR_TRANSPORT);
		ck_assert_msg(th_log_has(cases[i].line), "%s: %s", cases[i].verb, th_logbuf);
		ck_assert_int_eq(n_qp, 0);
		ck_assert_int_eq(n_cq, 0);
	}
	make_eps(&p);
	th_loglen = 0;
	fail_name = "modify_qp:RTR";
	fail_err = EINVAL;
	ck_assert_int_eq(ops->connect(p.ep[0], p.addr[1], IBP_ADDR_LEN), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("[E] ibv_modify_qp(RTR) on mlx5_0:1 failed: Invalid argument"), "%s", th_logbuf);
	th_loglen = 0;
	unsetenv("WEFT_IB_DEVICES");
	fail_name = "alloc_pd";
	fail_err = EACCES;
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	ck_assert_int_eq(ops->open(&a, &tc), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("[E] ibv_alloc_pd on mlx5_0 failed: Permission denied"), "%s", th_logbuf);
	pair_close(&p);
}
END_TEST

/* Address blobs with one field broken at a time. */
START_TEST(malformed_addresses)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	roce_dev("mlx5_1", 0x22, IBV_ATOMIC_HCA, "::ffff:10.0.0.5");
	struct pair p;
	memset(&p, 0, sizeof(p));
	p.tc[0] = open_ctx(0, "mlx5_0");
	p.tc[1] = open_ctx(1, "mlx5_0");
	make_eps(&p);
	const unsigned char *good = p.addr[1];
	unsigned char b[IBP_ADDR_LEN + 8];
	struct {
		int off;
		int byte;
		const char *why;
	} cases[] = {
		{0, 0x00, "magic"},
		{4, 0x02, "version"},
		{6, 0x41, "expected 64"},
		{8, -1, "queue pair number"},
		{15, 0x01, "packet sequence number"},
		{18, 0x09, "unknown link layer"},
		{19, 0x06, "MTU code"},
		{20, 0x00, "port 0"},
		{21, 0x80, "unknown flags"},
		{22, 0x40, "atomic depth"},
		{23, 0x01, "reserved byte"},
		{40, -2, "device GUID is zero"},
		{48, 0x03, "mailbox address"},
		{62, 0x01, "mailbox slots"},
		{16, -3, "neither a LID nor a routable GID"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, good, IBP_ADDR_LEN);
		if (cases[i].byte == -1)
			weft_kit_le_put32(b + 8, 0);
		else if (cases[i].byte == -2)
			weft_kit_le_put64(b + 40, 0);
		else if (cases[i].byte == -3)
			weft_kit_le_put16(b + 16, 0);
		else
			b[cases[i].off] = (unsigned char)cases[i].byte;
		th_loglen = 0;
		th_logbuf[0] = '\0';
		ck_assert_msg(ops->connect(p.ep[0], b, IBP_ADDR_LEN) == -WEFT_ERR_PROTOCOL, "case %s", cases[i].why);
		ck_assert_msg(th_log_has("connect: address from rank 1 is malformed") && th_log_has(cases[i].why), "case %s: %s",
			      cases[i].why, th_logbuf);
	}
	/* Wrong lengths, both ways. */
	ck_assert_int_eq(ops->connect(p.ep[0], good, IBP_ADDR_LEN - 1), -WEFT_ERR_PROTOCOL);
	memcpy(b, good, IBP_ADDR_LEN);
	ck_assert_int_eq(ops->connect(p.ep[0], b, IBP_ADDR_LEN + 8), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(ops->connect(p.ep[0], good, 3), -WEFT_ERR_PROTOCOL);
	/* A RoCE port's address cannot reach an InfiniBand port. */
	void *tc2 = open_ctx(1, "mlx5_1");
	struct weft_tp_peer peer = {.size = sizeof(peer), .rank = 0, .peer_class = WEFT_PEER_OTHER_HOST};
	unsigned char ra[IBP_ADDR_LEN];
	size_t len = sizeof(ra);
	void *rep = NULL;
	ck_assert_int_eq(ops->endpoint(tc2, &peer, ra, &len, &rep), 0);
	th_loglen = 0;
	ck_assert_int_eq(ops->connect(p.ep[0], ra, IBP_ADDR_LEN), -WEFT_ERR_PROTOCOL);
	ck_assert_msg(th_log_has("rank 1's port is Ethernet, mlx5_0:1 is InfiniBand"), "%s", th_logbuf);
	/* Nothing above moved the QP past INIT; the good address still connects. */
	ck_assert_int_eq(qp_of(p.ep[0])->qp.state, IBV_QPS_INIT);
	ck_assert_int_eq(ops->connect(p.ep[0], good, IBP_ADDR_LEN), 0);
	ops->disconnect(rep);
	ops->close(tc2);
	pair_close(&p);
}
END_TEST

START_TEST(mem_blob_round_trip)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	void *tc = open_ctx(0, NULL);
	void *tc1 = open_ctx(1, NULL);
	static unsigned char buf[8192];
	void *mh = NULL;
	ck_assert_int_eq(ops->mem_register(tc, buf, sizeof(buf), WEFT_MEM_HOST, &mh), 0);
	/* One MR per device, with the access remote writes and atomics need. */
	struct ibp_mh *m = mh;
	for (int k = 0; k < 2; k++) {
		struct fmr *f = (struct fmr *)m->mr[k];
		ck_assert_int_eq(f->access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
		ck_assert_ptr_eq(f->mr.addr, buf);
		ck_assert_uint_eq(f->mr.length, sizeof(buf));
	}
	size_t len = 0;
	ck_assert_int_eq(ops->mem_serialize(tc, mh, NULL, &len), -ENOSPC);
	ck_assert_uint_eq(len, IBP_MEM_HDR + 2 * IBP_MEM_ENT);
	unsigned char blob[IBP_MEM_HDR + 2 * IBP_MEM_ENT];
	len = 10;
	ck_assert_int_eq(ops->mem_serialize(tc, mh, blob, &len), -ENOSPC);
	ck_assert_int_eq(ops->mem_serialize(tc, mh, blob, &len), 0);
	void *rmh = NULL;
	ck_assert_int_eq(ops->mem_import(tc1, 0, blob, len, &rmh), 0);
	struct ibp_rmh *r = rmh;
	ck_assert_uint_eq(r->addr, (uint64_t)(uintptr_t)buf);
	ck_assert_uint_eq(r->len, sizeof(buf));
	ck_assert_int_eq(r->count, 2);
	ck_assert_uint_eq(r->keys[0].guid, 0x11);
	ck_assert_uint_eq(r->keys[0].rkey, m->mr[0]->rkey);
	ck_assert_uint_eq(r->keys[1].guid, 0x22);
	ck_assert_uint_eq(r->keys[1].rkey, m->mr[1]->rkey);
	ck_assert_int_eq(ops->mem_release(tc1, rmh), 0);

	/* Malformed: each must be refused with -WEFT_ERR_PROTOCOL and a reason. */
	unsigned char b[sizeof(blob) + 16];
	struct {
		int off;
		uint64_t val;
		int width;
		const char *why;
	} cases[] = {
		{0, 0x12345678, 4, "magic"},
		{4, 2, 2, "version 2"},
		{6, 0, 2, "0 device entries"},
		{6, 17, 2, "17 device entries"},
		{6, 1, 2, "expected 48"},
		{8, 47, 4, "header says 47 bytes"},
		{12, 1, 4, "reserved header field"},
		{16, 0, 8, "region at address 0"},
		{24, 0, 8, "zero-length region"},
		{16, UINT64_MAX - 10, 8, "wraps around"},
		{32, 0, 8, "device GUID is zero"},
		{44, 5, 4, "entry 0: reserved field"},
		{48, 0x11, 8, "appears twice"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(b, blob, len);
		if (cases[i].width == 2)
			weft_kit_le_put16(b + cases[i].off, (uint16_t)cases[i].val);
		else if (cases[i].width == 4)
			weft_kit_le_put32(b + cases[i].off, (uint32_t)cases[i].val);
		else
			weft_kit_le_put64(b + cases[i].off, cases[i].val);
		th_loglen = 0;
		th_logbuf[0] = '\0';
		rmh = (void *)0x1;
		ck_assert_msg(ops->mem_import(tc1, 0, b, len, &rmh) == -WEFT_ERR_PROTOCOL, "case '%s'", cases[i].why);
		ck_assert_ptr_eq(rmh, (void *)0x1);
		ck_assert_msg(th_log_has("mem_import from rank 0: malformed blob") && th_log_has(cases[i].why), "case '%s': %s",
			      cases[i].why, th_logbuf);
	}
	for (size_t cut = 0; cut < len; cut += 7)
		ck_assert_int_eq(ops->mem_import(tc1, 0, blob, cut, &rmh), -WEFT_ERR_PROTOCOL);
	memcpy(b, blob, len);
	b[len] = 0;
	ck_assert_int_eq(ops->mem_import(tc1, 0, b, len + 1, &rmh), -WEFT_ERR_PROTOCOL);
	ck_assert_int_eq(ops->mem_import(tc1, 0, NULL, 0, &rmh), -WEFT_ERR_PROTOCOL);
	/* Bad arguments to register. */
	ck_assert_int_eq(ops->mem_register(tc, NULL, 8, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(ops->mem_register(tc, buf, 0, WEFT_MEM_HOST, &mh), -EINVAL);
	ck_assert_int_eq(ops->mem_register(tc, buf, 8, WEFT_MEM_HIP, &mh), -ENOTSUP);
	/* A reg_mr failure on the second device unwinds the first. */
	fail_name = "reg_mr";
	fail_skip = 1;
	fail_err = EFAULT;
	th_loglen = 0;
	void *mh2 = NULL;
	ck_assert_int_eq(ops->mem_register(tc, buf, 64, WEFT_MEM_HOST, &mh2), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("[E] ibv_reg_mr on mlx5_1 failed: Bad address"), "%s", th_logbuf);
	ck_assert_int_eq(n_mr, 2);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
	ops->close(tc1);
	assert_no_leaks();
}
END_TEST

/* ------------------------------------------------------------ CUDA memory */
/* The warning a refused CUDA registration logs, with its reason. */
static void expect_unreachable(const void *ptr, size_t len, const char *why)
{
	char want[512];
	snprintf(want, sizeof(want),
		 "[W] mem_register: CUDA memory at %p (%zu bytes) is not reachable: %s, and ib.peer_memory is 0 "
		 "(set it to 1 where the nvidia-peermem module is loaded)",
		 ptr, len, why);
	ck_assert_msg(th_log_has(want), "want: %s\nlog:\n%s", want, th_logbuf);
}

static int count_in_log(const char *what)
{
	int n = 0;
	for (const char *p = th_logbuf; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* A context with peer memory off refuses ptr with why, registering nothing. */
static void refused(const void *ptr, size_t len, const char *why)
{
	void *tc = open_ctx(0, NULL);
	void *mh = NULL;
	th_loglen = 0;
	th_logbuf[0] = '\0';
	ck_assert_int_eq(ops->mem_register(tc, (void *)ptr, len, WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_ptr_null(mh);
	ck_assert_int_eq(n_mr, 0);
	expect_unreachable(ptr, len, why);
	ops->close(tc);
}

START_TEST(cuda_dmabuf_registration)
{
	/* Two NICs: one export of the buffer's pages, registered with each. */
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	int fds0 = open_fds();
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *gpu = fcu_gpu(1, 8);
	void *tc = open_ctx(0, NULL);
	void *mh = NULL;
	static unsigned char host[64];
	ck_assert_int_eq(ops->mem_register(tc, host, sizeof(host), WEFT_MEM_HOST, &mh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(fcu.inits, 0); /* opening and host memory touch no CUDA */
	/* {offset of the pointer, length, first page and page count of the export} */
	const struct {
		size_t off, len, page, pages;
	} cases[] = {
		{pg + 100, pg + 1000, 1, 2},   /* both ends inside a page */
		{2 * pg, 2 * pg, 2, 2},        /* aligned already */
		{pg - 1, 2, 0, 2},             /* two bytes across a page boundary */
		{3 * pg + 7, 1, 3, 1},         /* one byte */
		{4 * pg + 1, 4 * pg - 1, 4, 4} /* up to the allocation's last byte */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char *ptr = gpu + cases[i].off;
		size_t len = cases[i].len;
		ck_assert_msg(ops->mem_register(tc, ptr, len, WEFT_MEM_CUDA, &mh) == 0, "case %zu:\n%s", i, th_logbuf);
		ck_assert_int_eq(fcu.exports, (int)i + 1);
		ck_assert_uint_eq(fcu.base, (uintptr_t)gpu + cases[i].page * pg);
		ck_assert_uint_eq(fcu.size, cases[i].pages * pg);
		ck_assert_int_eq(fcu.type, IBP_CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD);
		ck_assert_uint_eq(fcu.flags, 0);
		ck_assert_ptr_eq(fcu.pushed, FCU_MEM_CTX);
		ck_assert_int_eq(fcu.depth, 0);
		for (int k = 0; k < 2; k++) {
			struct fmr *f = (struct fmr *)((struct ibp_mh *)mh)->mr[k];
			ck_assert(f->dmabuf);
			ck_assert_int_eq(f->fd, fcu.fd);
			ck_assert_uint_eq(f->offset, cases[i].off - cases[i].page * pg);
			ck_assert_uint_eq(f->mr.length, len);
			ck_assert_uint_eq(f->iova, (uintptr_t)ptr);
			ck_assert_int_eq(f->access,
					 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
		}
		/* The MRs keep the dma-buf; the plugin's fd is closed. */
		ck_assert_msg(fd_closed(fcu.fd), "case %zu: dma-buf fd %d left open", i, fcu.fd);
		ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	}
	ck_assert_int_eq(fcu.retains, 0);
	/* Memory of no context (cuMemCreate): the device's primary one is made
	 * current for the export, then released. */
	fcu.own_ctx = false;
	ck_assert_int_eq(ops->mem_register(tc, gpu, pg, WEFT_MEM_CUDA, &mh), 0);
	ck_assert_ptr_eq(fcu.pushed, FCU_PRIMARY_CTX);
	ck_assert_int_eq(fcu.retains, 1);
	ck_assert_int_eq(fcu.releases, 1);
	ck_assert_int_eq(fcu.depth, 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(fcu.inits, 1); /* once per process */
	ck_assert(!th_log_has("[E]") && !th_log_has("[W]"));
	ops->close(tc);
	assert_no_leaks();
	ck_assert_int_eq(open_fds(), fds0);
	free(gpu);
}
END_TEST

START_TEST(cuda_fallback_and_refusals)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int fds0 = open_fds();
	unsigned char *gpu = fcu_gpu(0, 4);
	unsigned char *ptr = gpu + 100;
	size_t len = pg;
	char why[256];

	/* A device without dma-buf: refused, said once per context. */
	void *tc = open_ctx(0, NULL);
	void *mh = NULL;
	ck_assert_int_eq(ops->mem_register(tc, ptr, len, WEFT_MEM_CUDA, &mh), -ENOTSUP);
	expect_unreachable(ptr, len,
			   "CUDA device 0 does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)");
	ck_assert_int_eq(ops->mem_register(tc, ptr, len, WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_int_eq(count_in_log("[W] mem_register"), 1);
	ck_assert_int_eq(fcu.exports, 0);
	ck_assert_int_eq(n_mr, 0);
	ops->close(tc);
	/* ... and with ib.peer_memory=1, plain ibv_reg_mr of the device pointer. */
	setenv("WEFT_IB_PEER_MEMORY", "1", 1);
	tc = open_ctx(0, NULL);
	th_loglen = 0;
	ck_assert_int_eq(ops->mem_register(tc, ptr, len, WEFT_MEM_CUDA, &mh), 0);
	struct fmr *f = (struct fmr *)((struct ibp_mh *)mh)->mr[0];
	ck_assert(!f->dmabuf);
	ck_assert_ptr_eq(f->mr.addr, ptr);
	ck_assert_uint_eq(f->mr.length, len);
	ck_assert(!th_log_has("[W]"));
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
	unsetenv("WEFT_IB_PEER_MEMORY");

	/* The export itself not supported (say, memory the driver cannot share):
	 * refused, or peer memory. */
	fcu.dmabuf[0] = 1;
	fcu.export_rc = IBP_CUDA_ERROR_NOT_SUPPORTED;
	snprintf(why, sizeof(why),
		 "cuMemGetHandleForAddressRange(%#llx, %zu bytes, DMA_BUF_FD) failed: CUDA_ERROR_NOT_SUPPORTED "
		 "(operation not supported)",
		 (unsigned long long)(uintptr_t)gpu, 2 * pg);
	refused(ptr, len, why);
	ck_assert_int_eq(fcu.depth, 0);
	setenv("WEFT_IB_PEER_MEMORY", "1", 1);
	tc = open_ctx(0, NULL);
	ck_assert_int_eq(ops->mem_register(tc, ptr, len, WEFT_MEM_CUDA, &mh), 0);
	ck_assert(!((struct fmr *)((struct ibp_mh *)mh)->mr[0])->dmabuf);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ops->close(tc);
	unsetenv("WEFT_IB_PEER_MEMORY");
	fcu.export_rc = 0;

	/* A driver too old to answer the attribute. */
	fcu.attr_rc = IBP_CUDA_ERROR_INVALID_VALUE;
	refused(ptr, len,
		"cuDeviceGetAttribute(DMA_BUF_SUPPORTED) of CUDA device 0 failed: CUDA_ERROR_INVALID_VALUE (invalid "
		"argument)");
	fcu.attr_rc = 0;
	/* A driver without the export (before CUDA 11.7), as a new process sees it. */
	fcu_ops.mem_get_handle_for_address_range = NULL;
	ibp_set_cuda(&fcu_ops);
	refused(ptr, len, "libcuda.so.1 has no cuMemGetHandleForAddressRange (a driver older than CUDA 11.7)");
	fcu_ops.mem_get_handle_for_address_range = fcu_get_handle;
	/* No CUDA device at all. */
	fcu.init_rc = IBP_CUDA_ERROR_NO_DEVICE;
	ibp_set_cuda(&fcu_ops);
	refused(ptr, len, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected))");
	assert_no_leaks();
	ck_assert_int_eq(open_fds(), fds0);
	free(gpu);
}
END_TEST

START_TEST(cuda_errors)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int fds0 = open_fds();
	unsigned char *gpu = fcu_gpu(1, 4);
	char want[512];
	void *mh = NULL;
	/* Host memory passed as CUDA memory is the caller's mistake: -EINVAL, even
	 * with peer memory on. */
	setenv("WEFT_IB_PEER_MEMORY", "1", 1);
	void *tc = open_ctx(0, NULL);
	static unsigned char host[64];
	ck_assert_int_eq(ops->mem_register(tc, host, sizeof(host), WEFT_MEM_CUDA, &mh), -EINVAL);
	snprintf(want, sizeof(want),
		 "[E] mem_register: CUDA memory at %p (64 bytes): cuPointerGetAttribute(DEVICE_ORDINAL) of %p "
		 "failed: CUDA_ERROR_INVALID_VALUE (invalid argument): not CUDA memory",
		 (void *)host, (void *)host);
	ck_assert_msg(th_log_has(want), "want: %s\nlog:\n%s", want, th_logbuf);
	ck_assert_int_eq(n_mr, 0);
	ops->close(tc);
	unsetenv("WEFT_IB_PEER_MEMORY");
	tc = open_ctx(0, NULL);
	/* A range past the end of the allocation: the driver refuses it. */
	th_loglen = 0;
	unsigned char *tail = gpu + 4 * pg - 100;
	ck_assert_int_eq(ops->mem_register(tc, tail, 200, WEFT_MEM_CUDA, &mh), -EINVAL);
	snprintf(want, sizeof(want),
		 "cuMemGetHandleForAddressRange(%#llx, %zu bytes, DMA_BUF_FD) failed: CUDA_ERROR_INVALID_VALUE "
		 "(invalid argument)",
		 (unsigned long long)(uintptr_t)(gpu + 3 * pg), 2 * pg);
	ck_assert_msg(th_log_has(want), "want: %s\nlog:\n%s", want, th_logbuf);
	/* Any other driver failure: a transport error naming the call, and the
	 * pushed context popped. */
	fcu.export_rc = 999;
	th_loglen = 0;
	ck_assert_int_eq(ops->mem_register(tc, gpu, pg, WEFT_MEM_CUDA, &mh), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("failed: CUDA_ERROR_UNKNOWN (unknown error)"), "%s", th_logbuf);
	ck_assert(th_log_has("[E] mem_register: CUDA memory at"));
	ck_assert_int_eq(fcu.depth, 0);
	fcu.export_rc = 0;
	/* The second NIC refuses the dma-buf: the first MR is undone and the fd
	 * closed all the same. */
	fail_name = "reg_dmabuf_mr";
	fail_err = EOPNOTSUPP;
	fail_skip = 1;
	th_loglen = 0;
	ck_assert_int_eq(ops->mem_register(tc, gpu, pg, WEFT_MEM_CUDA, &mh), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("[E] ibv_reg_dmabuf_mr on mlx5_1 failed: Operation not supported"), "%s",
		      th_logbuf);
	ck_assert_int_eq(n_mr, 0);
	ck_assert(fd_closed(fcu.fd));
	ops->close(tc);
	assert_no_leaks();
	ck_assert_int_eq(open_fds(), fds0);
	free(gpu);
}
END_TEST

START_TEST(cuda_probe)
{
	struct weft_tp_device devs[4];
	int n = 4;
	char line[1024];
	/* No RDMA device: the CUDA driver is never asked. */
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_int_eq(fcu.inits, 0);
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	/* No CUDA device. */
	n = 4;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_msg(strstr(line, " cuda=no (no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
				   "detected)))") != NULL,
		      "%s", line);
	/* Two CUDA devices, neither with dma-buf. */
	fcu.init_rc = 0;
	fcu.ndev = 2;
	ibp_set_cuda(&fcu_ops);
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_msg(strstr(line,
			     " cuda=no (no CUDA device of 2 supports dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED "
			     "is 0))") != NULL,
		      "%s", line);
	/* The second one has it. */
	fcu.dmabuf[1] = 1;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_uint_eq(devs[0].mem_types, (1u << WEFT_MEM_HOST) | (1u << WEFT_MEM_CUDA));
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_msg(strstr(line, " cuda=dma-buf") != NULL, "%s", line);
	/* Peer memory: CUDA by the user's word, without asking the driver. */
	fcu.dmabuf[1] = 0;
	setenv("WEFT_IB_PEER_MEMORY", "1", 1);
	int calls = fcu.attr_calls;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_uint_eq(devs[0].mem_types, (1u << WEFT_MEM_HOST) | (1u << WEFT_MEM_CUDA));
	ck_assert_int_eq(fcu.attr_calls, calls);
	ck_assert_int_eq(ops->describe(NULL, line, sizeof(line)), 0);
	ck_assert_msg(strstr(line, " cuda=peer-memory") != NULL, "%s", line);
	assert_no_leaks();
}
END_TEST

START_TEST(cuda_fork_after_init)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *gpu = fcu_gpu(1, 2);
	void *tc = open_ctx(0, NULL);
	void *mh = NULL;
	ck_assert_int_eq(ops->mem_register(tc, gpu, pg, WEFT_MEM_CUDA, &mh), 0);
	ck_assert_int_eq(ops->mem_deregister(tc, mh), 0);
	ck_assert_int_eq(fcu.inits, 1);
	/* A child of a process that initialized CUDA is refused before any driver
	 * call, saying why. */
	char want[256];
	snprintf(want, sizeof(want),
		 "CUDA was initialized in process %d, which forked this one; a forked child cannot use CUDA "
		 "(initialize it after the fork)",
		 (int)getpid());
	fflush(NULL);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		th_loglen = 0;
		th_logbuf[0] = '\0';
		int exports = fcu.exports;
		int rc = ops->mem_register(tc, gpu, pg, WEFT_MEM_CUDA, &mh);
		int bad = (rc != -ENOTSUP) | (!th_log_has(want) << 1) | ((fcu.inits != 1) << 2) |
			  ((fcu.exports != exports) << 3);
		if (bad)
			fprintf(stderr, "child: rc %d, check bits 0x%x, log:\n%s\n", rc, bad, th_logbuf);
		_exit(bad ? 1 : 0);
	}
	int st = 0;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child was not refused as expected");
	ops->close(tc);
	assert_no_leaks();
	free(gpu);
}
END_TEST

START_TEST(cuda_without_driver)
{
	/* The real loader where libcuda.so.1 is absent (CI); where it is present
	 * the GPU test covers it. */
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		printf("cuda_without_driver: libcuda.so.1 is present here; nothing to check\n");
		return;
	}
	ibp_set_cuda(NULL);
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	struct weft_tp_device devs[2];
	int n = 2;
	ck_assert_int_eq(ops->probe(devs, &n), 0);
	ck_assert_uint_eq(devs[0].mem_types, 1u << WEFT_MEM_HOST);
	static unsigned char buf[64];
	void *tc = open_ctx(0, NULL);
	void *mh = NULL;
	ck_assert_int_eq(ops->mem_register(tc, buf, sizeof(buf), WEFT_MEM_CUDA, &mh), -ENOTSUP);
	ck_assert_msg(th_log_has("is not reachable: the CUDA driver is not loadable (libcuda.so.1: "), "%s", th_logbuf);
	ops->close(tc);
	assert_no_leaks();
}
END_TEST

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(i * 31 + seed);
}

START_TEST(put_split_and_signaled)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	setenv("WEFT_IB_MAX_MSG_SIZE", "4096", 1);
	setenv("WEFT_IB_SIGNAL_EVERY", "4", 1);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	struct region src, dst;
	region_make(&p, 0, 65536, &src);
	region_make(&p, 1, 65536, &dst);
	fill(src.buf, src.len, 3);
	/* 10000 bytes: three writes of at most max_msg_size. */
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 100, src.mh, 7, 10000), 0);
	struct fqp *q = qp_of(p.ep[0]);
	ck_assert_int_eq(q->nlog, 3);
	uint32_t lens[3] = {4096, 4096, 1808};
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(q->log[i].op, IBV_WR_RDMA_WRITE);
		ck_assert_uint_eq(q->log[i].len, lens[i]);
		ck_assert_uint_eq(q->log[i].raddr, (uint64_t)(uintptr_t)dst.buf + 100 + 4096u * i);
		ck_assert_uint_eq(q->log[i].laddr, (uint64_t)(uintptr_t)src.buf + 7 + 4096u * i);
		ck_assert_uint_eq(q->log[i].rkey, ((struct ibp_mh *)dst.mh)->mr[0]->rkey);
		ck_assert_uint_eq(q->log[i].lkey, ((struct ibp_mh *)src.mh)->mr[0]->lkey);
		ck_assert_uint_eq(q->log[i].flags & IBV_SEND_SIGNALED, 0);
	}
	ck_assert_mem_eq(dst.buf + 100, src.buf + 7, 10000);
	/* Every 4th WR asks for a completion, the others do not. */
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 8), 0);
	ck_assert_int_eq(q->nlog, 8);
	for (int i = 0; i < 8; i++)
		ck_assert_msg(((q->log[i].flags & IBV_SEND_SIGNALED) != 0) == (i == 3 || i == 7), "WR %d flags 0x%x", i,
			      q->log[i].flags);
	/* Flush with a signalled tail: completes on that completion alone. */
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	ck_assert_int_eq(q->nlog, 8);
	/* Flush with an unsignaled tail: one signalled write of the flush word. */
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 8), 0);
	ck_assert_int_eq(ops->flush(p.ep[0]), -EAGAIN);
	ck_assert_int_eq(q->nlog, 10);
	ck_assert(q->log[9].flags & IBV_SEND_SIGNALED);
	ck_assert_uint_eq(q->log[9].rkey, ((struct ibp_ep *)p.ep[1])->mailbox_mr->rkey);
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	/* Range checks. */
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 65536 - 8, src.mh, 0, 9), -EINVAL);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 65530, 8), -EINVAL);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 0), 0);
	ck_assert_int_eq(q->nlog, 10);
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	pair_close(&p);
}
END_TEST

START_TEST(send_queue_bounded)
{
	/* A tiny send queue and completions held back: posting stops at the
	 * queue's depth, the rest waits in order, and flush drains it all. */
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	setenv("WEFT_IB_MAX_MSG_SIZE", "1024", 1);
	setenv("WEFT_IB_SQ_DEPTH", "4", 1);
	setenv("WEFT_IB_SIGNAL_EVERY", "3", 1);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	struct region src, dst, tok;
	region_make(&p, 0, 65536, &src);
	region_make(&p, 1, 65536, &dst);
	region_make(&p, 1, 64, &tok);
	fill(src.buf, src.len, 9);
	hold = true;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 20000), 0); /* 20 writes */
	struct fqp *q = qp_of(p.ep[0]);
	ck_assert_int_eq(q->nlog, 4);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 0, 1), 0);
	ck_assert_int_eq(q->nlog, 4);
	int rc = -EAGAIN, rounds = 0;
	for (; rc == -EAGAIN && rounds < 1000; rounds++) {
		run_all();
		rc = ops->flush(p.ep[0]);
		ck_assert_int_le(q->nlog - q->retired, 4);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_int_eq(q->max_sq_used, 4);
	ck_assert_int_eq(q->log[20].op, IBV_WR_ATOMIC_FETCH_AND_ADD);
	/* At most one more: the flush write, when the atomic asked for no completion. */
	ck_assert_int_le(q->nlog, 22);
	if (q->nlog == 22) {
		ck_assert(!(q->log[20].flags & IBV_SEND_SIGNALED));
		ck_assert(q->log[21].flags & IBV_SEND_SIGNALED);
		ck_assert_uint_eq(q->log[21].rkey, ((struct ibp_ep *)p.ep[1])->mailbox_mr->rkey);
	}
	ck_assert_mem_eq(dst.buf, src.buf, 20000);
	ck_assert_uint_eq(*(uint64_t *)tok.buf, 1);
	ck_assert(!q->cq->overflow);
	/* The software queue is bounded too: with nothing completing, puts end
	 * in -EAGAIN rather than growing without limit. */
	rc = 0;
	int n = 0;
	for (; n < 100 && rc == 0; n++)
		rc = ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 8);
	ck_assert_int_eq(rc, -EAGAIN);
	ck_assert_int_eq(n, 4 + 4 + 1);
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	hold = false;
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	region_free(&p, 1, &tok);
	pair_close(&p);
}
END_TEST

START_TEST(signal_atomic)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_GLOB);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	ck_assert_int_eq(((struct ibp_ep *)p.ep[0])->sig_mode, IBP_SIG_ATOMIC);
	struct region src, dst, tok;
	region_make(&p, 0, 4096, &src);
	region_make(&p, 1, 4096, &dst);
	region_make(&p, 1, 4096, &tok);
	fill(src.buf, src.len, 1);
	hold = true;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 4096), 0);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 64, 5), 0);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 16), 0);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 64, 9), 0);
	struct fqp *q = qp_of(p.ep[0]);
	ck_assert_int_eq(q->nlog, 4);
	/* The data write, then a fenced fetch-and-add of the increment. */
	ck_assert_int_eq(q->log[0].op, IBV_WR_RDMA_WRITE);
	ck_assert_int_eq(q->log[1].op, IBV_WR_ATOMIC_FETCH_AND_ADD);
	ck_assert(q->log[1].flags & IBV_SEND_FENCE);
	ck_assert_uint_eq(q->log[1].add, 5);
	ck_assert_uint_eq(q->log[1].raddr, (uint64_t)(uintptr_t)tok.buf + 64);
	ck_assert_uint_eq(q->log[1].rkey, ((struct ibp_mh *)tok.mh)->mr[0]->rkey);
	ck_assert_uint_eq(q->log[1].len, 8);
	ck_assert_uint_eq(q->log[1].lkey, ((struct ibp_ep *)p.ep[0])->scratch_mr->lkey);
	ck_assert_int_eq(q->log[3].op, IBV_WR_ATOMIC_FETCH_AND_ADD);
	ck_assert(q->log[3].flags & IBV_SEND_FENCE);
	ck_assert_uint_eq(q->log[3].add, 4);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 64), 0);
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 64), 9);
	ck_assert_mem_eq(dst.buf, src.buf, 4096);
	hold = false;
	/* Tokens only grow; they must be aligned and inside the region. */
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 64, 9), -EINVAL);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 60, 1), -EINVAL);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 4092, 1), -EINVAL);
	/* A big jump is one atomic. */
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 64, 9 + (5ull << 40)), 0);
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 64), 9 + (5ull << 40));
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	region_free(&p, 1, &tok);
	pair_close(&p);
}
END_TEST

START_TEST(signal_imm)
{
	/* The receiving device has no atomics: signals go as write-with-immediate
	 * and the receiver's progress writes the token. */
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_NONE);
	setenv("WEFT_IB_RQ_DEPTH", "4", 1);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	ck_assert_int_eq(((struct ibp_ep *)p.ep[0])->sig_mode, IBP_SIG_IMM);
	ck_assert_int_eq(((struct ibp_ep *)p.ep[1])->sig_mode, IBP_SIG_IMM);
	struct region src, dst, tok;
	region_make(&p, 0, 4096, &src);
	region_make(&p, 1, 4096, &dst);
	region_make(&p, 1, 4096, &tok);
	fill(src.buf, src.len, 2);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 4096), 0);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 128, 3), 0);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 192, 1), 0);
	struct fqp *q = qp_of(p.ep[0]);
	struct ibp_ep *rx = p.ep[1];
	ck_assert_int_eq(q->nlog, 3);
	ck_assert_int_eq(q->log[1].op, IBV_WR_RDMA_WRITE_WITH_IMM);
	ck_assert_uint_eq(q->log[1].imm, (0u << 20) | 3);
	ck_assert_uint_eq(q->log[1].raddr, (uint64_t)(uintptr_t)&rx->mailbox[0]);
	ck_assert_uint_eq(q->log[1].rkey, rx->mailbox_mr->rkey);
	ck_assert_uint_eq(q->log[2].imm, (1u << 20) | 1);
	ck_assert_uint_eq(q->log[2].raddr, (uint64_t)(uintptr_t)&rx->mailbox[1]);
	/* Landed, but the token moves only when the receiver progresses. */
	ck_assert_mem_eq(dst.buf, src.buf, 4096);
	ck_assert_uint_eq(rx->mailbox[0], (uint64_t)(uintptr_t)tok.buf + 128);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 128), 0);
	ck_assert_int_eq(qp_of(p.ep[1])->recvs, 2);
	ck_assert_int_eq(ops->progress(p.tc[1]), 0);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 128), 3);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 192), 1);
	/* Consumed receives are posted again. */
	ck_assert_int_eq(qp_of(p.ep[1])->recvs, 4);
	/* More signals than receives, interleaved with progress; and a jump past
	 * 2^20 goes as several steps that end at the exact value. */
	uint64_t v = 3;
	for (int i = 0; i < 20; i++) {
		v += (uint64_t)i * 1000 + 1;
		ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 128, v), 0);
		ops->progress(p.tc[1]);
		ck_assert_uint_eq(*(uint64_t *)(tok.buf + 128), v);
	}
	int before = q->nlog;
	v += (3ull << 20) + 12345;
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 128, v), 0);
	ck_assert_int_eq(q->nlog - before, 4);
	ops->progress(p.tc[1]);
	ops->progress(p.tc[1]);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 128), v);
	ck_assert_int_eq(flush_wait(&p, 0), 0);
	ck_assert_int_eq(ops->flush(p.ep[1]), 0);
	/* ib.signal=atomic cannot be honoured toward this peer. */
	setenv("WEFT_IB_SIGNAL", "atomic", 1);
	void *tc3 = open_ctx(0, "mlx5_0");
	struct weft_tp_peer peer = {.size = sizeof(peer), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST};
	unsigned char a3[IBP_ADDR_LEN];
	size_t l3 = sizeof(a3);
	void *ep3 = NULL;
	ck_assert_int_eq(ops->endpoint(tc3, &peer, a3, &l3, &ep3), 0);
	th_loglen = 0;
	ck_assert_int_eq(ops->connect(ep3, p.addr[1], IBP_ADDR_LEN), -WEFT_ERR_CONFIG);
	ck_assert_msg(th_log_has("ib.signal=atomic, but mlx5_0:1 to rank 1 cannot do remote atomics"), "%s", th_logbuf);
	ops->disconnect(ep3);
	ops->close(tc3);
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	region_free(&p, 1, &tok);
	pair_close(&p);
}
END_TEST

START_TEST(signal_imm_forced_and_checked)
{
	/* ib.signal=imm on atomic-capable devices; and the receiver refuses a
	 * mailbox entry that names memory it never registered. */
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	setenv("WEFT_IB_SIGNAL", "imm", 1);
	setenv("WEFT_IB_IMM_SLOTS", "2", 1);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	ck_assert_int_eq(((struct ibp_ep *)p.ep[0])->sig_mode, IBP_SIG_IMM);
	struct region tok;
	region_make(&p, 1, 4096, &tok);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 0, 1), 0);
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 8, 1), 0);
	/* Two slots offered, a third token does not fit. */
	th_loglen = 0;
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 16, 1), -ENOSPC);
	ck_assert_msg(th_log_has("rank 1 offers 2 token slots"), "%s", th_logbuf);
	ck_assert_int_eq(ops->progress(p.tc[1]), 0);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 0), 1);
	ck_assert_uint_eq(*(uint64_t *)(tok.buf + 8), 1);
	/* A peer that points a slot elsewhere: refused, the endpoint fails. */
	struct ibp_ep *rx = p.ep[1];
	static uint64_t outside;
	ck_assert_int_eq(ops->signal(p.ep[0], tok.rmh, 0, 2), 0);
	rx->mailbox[0] = (uint64_t)(uintptr_t)&outside;
	th_loglen = 0;
	ck_assert_int_eq(ops->progress(p.tc[1]), -WEFT_ERR_PROTOCOL);
	ck_assert_msg(th_log_has("signal from rank 0 on mlx5_1:1 is malformed: slot 0 names token address"), "%s", th_logbuf);
	ck_assert_uint_eq(outside, 0);
	ck_assert_int_eq(ops->flush(p.ep[1]), -WEFT_ERR_PROTOCOL);
	region_free(&p, 1, &tok);
	pair_close(&p);
}
END_TEST

START_TEST(error_completions)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	struct region src, dst;
	region_make(&p, 0, 4096, &src);
	region_make(&p, 1, 4096, &dst);
	/* A completion that succeeds moves flush along. */
	hold = true;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), 0);
	ck_assert_int_eq(ops->flush(p.ep[0]), -EAGAIN);
	struct fqp *q = qp_of(p.ep[0]);
	ck_assert_int_eq(q->nlog, 2); /* the write and the flush write */
	run_all();
	ck_assert_int_eq(ops->flush(p.ep[0]), 0);
	/* Scripted: the peer stops answering (retries exhausted) -> -WEFT_ERR_PEER,
	 * from progress once, then from flush, put and signal; nothing hangs. */
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), 0);
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = (uint64_t)q->nlog - 1;
	wc.status = IBV_WC_RETRY_EXC_ERR;
	wc.qp_num = q->qp.qp_num;
	wc.vendor_err = 0x81;
	cq_push(q->cq, &wc, -1);
	wc.status = IBV_WC_WR_FLUSH_ERR;
	cq_push(q->cq, &wc, -1);
	th_loglen = 0;
	ck_assert_int_eq(ops->progress(p.tc[0]), -WEFT_ERR_PEER);
	ck_assert_msg(th_log_has("[E] work request to rank 1 on mlx5_0:1 failed: transport retry counter exceeded "
			      "(status 12, vendor error 0x81)"),
		      "%s", th_logbuf);
	/* One line for the cause; the flushed rest stay quiet. */
	ck_assert_ptr_null(strstr(strstr(th_logbuf, "retry counter") + 1, "[E]"));
	ck_assert_int_eq(ops->progress(p.tc[0]), 0);
	ck_assert_int_eq(ops->flush(p.ep[0]), -WEFT_ERR_PEER);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), -WEFT_ERR_PEER);
	ck_assert_int_eq(ops->signal(p.ep[0], dst.rmh, 0, 1), -WEFT_ERR_PEER);
	hold = false;
	ck_assert_int_eq(ops->disconnect(p.ep[0]), 0);
	p.ep[0] = NULL;
	/* Other statuses are the transport's failure. */
	const struct {
		enum ibv_wc_status st;
		int code;
	} map[] = {
		{IBV_WC_RETRY_EXC_ERR, -WEFT_ERR_PEER},   {IBV_WC_RNR_RETRY_EXC_ERR, -WEFT_ERR_PEER},
		{IBV_WC_REM_ACCESS_ERR, -WEFT_ERR_PEER},  {IBV_WC_LOC_PROT_ERR, -WEFT_ERR_TRANSPORT},
		{IBV_WC_LOC_LEN_ERR, -WEFT_ERR_TRANSPORT}, {IBV_WC_REM_OP_ERR, -WEFT_ERR_TRANSPORT},
		{IBV_WC_WR_FLUSH_ERR, -WEFT_ERR_TRANSPORT}, {IBV_WC_GENERAL_ERR, -WEFT_ERR_TRANSPORT},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		ck_assert_int_eq(ibp_wc_code(map[i].st), map[i].code);
	ck_assert_int_eq(ibp_wc_code(IBV_WC_SUCCESS), 0);
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	pair_close(&p);
}
END_TEST

START_TEST(remote_access_error)
{
	/* A write the peer's HCA refuses (a key it does not know) fails the
	 * endpoint with -WEFT_ERR_PEER; a local protection error is the transport's. */
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	struct region src, dst;
	region_make(&p, 0, 4096, &src);
	region_make(&p, 1, 4096, &dst);
	((struct ibp_rmh *)dst.rmh)->keys[0].rkey ^= 0x7777;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), 0);
	th_loglen = 0;
	ck_assert_int_eq(flush_wait(&p, 0), -WEFT_ERR_PEER);
	ck_assert_msg(th_log_has("remote access error"), "%s", th_logbuf);
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), -WEFT_ERR_PEER);
	((struct ibp_rmh *)dst.rmh)->keys[0].rkey ^= 0x7777;
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->disconnect(p.ep[r]), 0);
	/* Fresh endpoints; this time the local key is wrong. */
	make_eps(&p);
	for (int r = 0; r < 2; r++)
		ck_assert_int_eq(ops->connect(p.ep[r], p.addr[1 - r], IBP_ADDR_LEN), 0);
	struct ibv_mr *lmr = ((struct ibp_mh *)src.mh)->mr[0];
	hold = true;
	lmr->lkey ^= 0x7777;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), 0);
	lmr->lkey ^= 0x7777; /* the posted WR keeps the key no MR has */
	th_loglen = 0;
	ck_assert_int_eq(flush_wait(&p, 0), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("local protection error"), "%s", th_logbuf);
	hold = false;
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	pair_close(&p);
}
END_TEST

START_TEST(post_send_failure)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	ib_dev("mlx5_1", 0x22, 8, IBV_ATOMIC_HCA);
	struct pair p;
	pair_open(&p, "mlx5_0", "mlx5_1");
	struct region src, dst;
	region_make(&p, 0, 4096, &src);
	region_make(&p, 1, 4096, &dst);
	fail_name = "post_send";
	fail_err = EIO;
	th_loglen = 0;
	ck_assert_int_eq(ops->put(p.ep[0], dst.rmh, 0, src.mh, 0, 64), -WEFT_ERR_TRANSPORT);
	ck_assert_msg(th_log_has("[E] ibv_post_send (RDMA write) on mlx5_0:1 to rank 1 failed: Input/output error"),
		      "%s", th_logbuf);
	ck_assert_int_eq(ops->flush(p.ep[0]), -WEFT_ERR_TRANSPORT);
	/* Operations before connect are refused with a reason. */
	void *tc = open_ctx(0, "mlx5_0");
	struct weft_tp_peer peer = {.size = sizeof(peer), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST};
	unsigned char a[IBP_ADDR_LEN];
	size_t l = sizeof(a);
	void *ep = NULL;
	ck_assert_int_eq(ops->endpoint(tc, &peer, a, &l, &ep), 0);
	ck_assert_int_eq(ops->put(ep, dst.rmh, 0, src.mh, 0, 64), -EINVAL);
	ck_assert(th_log_has("put: endpoint to rank 1 is not connected"));
	ck_assert_int_eq(ops->flush(ep), 0);
	ops->disconnect(ep);
	ops->close(tc);
	region_free(&p, 0, &src);
	region_free(&p, 1, &dst);
	pair_close(&p);
}
END_TEST

START_TEST(bad_parameters)
{
	ib_dev("mlx5_0", 0x11, 7, IBV_ATOMIC_HCA);
	struct weft_tp_open_args a = {.size = sizeof(a), .rank = 0, .nranks = 2, .local_addr = "127.0.0.1", .host_id = "h"};
	void *tc = NULL;
	const struct {
		const char *key, *val, *msg;
	} cases[] = {
		{"WEFT_IB_SQ_DEPTH", "1", "ib.sq_depth=1 is out of range"},
		{"WEFT_IB_SIGNAL_EVERY", "1000", "ib.signal_every=1000 exceeds ib.sq_depth=256"},
		{"WEFT_IB_CQ_SIZE", "100", "ib.cq_size=100 is below ib.sq_depth + ib.rq_depth"},
		{"WEFT_IB_MTU", "1500", "ib.mtu=1500 is none of"},
		{"WEFT_IB_SIGNAL", "fast", "ib.signal='fast' is none of auto, atomic, imm"},
		{"WEFT_IB_RETRY_CNT", "8", "ib.retry_cnt=8 is out of range 0..7"},
		{"WEFT_IB_IMM_SLOTS", "5000", "ib.imm_slots=5000 is out of range"},
		{"WEFT_IB_SQ_DEPTH", "40000", "exceed mlx5_0's limit of 32768 work requests"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv(cases[i].key, cases[i].val, 1);
		th_loglen = 0;
		th_logbuf[0] = '\0';
		ck_assert_msg(ops->open(&a, &tc) == -WEFT_ERR_CONFIG, "%s=%s", cases[i].key, cases[i].val);
		ck_assert_msg(th_log_has(cases[i].msg), "%s=%s: %s", cases[i].key, cases[i].val, th_logbuf);
		unsetenv(cases[i].key);
	}
	assert_no_leaks();
}
END_TEST

/* The built module through the real registry: weft-info names it and says
 * there is no RDMA device (on a machine that has none). */
START_TEST(weft_info_names_plugin)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "WEFT_PLUGIN_PATH='%s' WEFT_CONFIG=/dev/null '%s' 2>&1", WEFT_IB_PLUGIN_DIR,
		 WEFT_INFO_BIN);
	int st = -1;
	char *out = wt_run_capture(cmd, &st);
	ck_assert_ptr_nonnull(out);
	ck_assert_msg(st == 0, "weft-info exited %d:\n%s", st, out);
	char *line = strstr(out, "\n  ib ");
	ck_assert_msg(line != NULL, "weft-info does not list the ib plugin:\n%s", out);
	ck_assert_msg(strstr(line, "transport") != NULL && strstr(line, "libweft-ib.so") != NULL, "%s", out);
	int real_devices = 0;
	struct ibv_device **l = ibv_get_device_list(&real_devices);
	if (l)
		ibv_free_device_list(l);
	if (real_devices == 0)
		ck_assert_msg(strstr(line, "\n      no RDMA device\n") != NULL, "weft-info's ib line:\n%s", out);
	else
		ck_assert_msg(strstr(line, "no RDMA device") == NULL, "%d devices, yet:\n%s", real_devices, out);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ib");
	TCase *tc = tcase_create("discovery");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, no_device_at_all);
	tcase_add_test(tc, down_ports_skipped);
	tcase_add_test(tc, probe_reports_ports);
	tcase_add_test(tc, devices_parameter);
	tcase_add_test(tc, parse_devices_list);
	tcase_add_test(tc, gid_selection);
	tcase_add_test(tc, bad_parameters);
	suite_add_tcase(s, tc);
	tc = tcase_create("connection");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, qp_bringup_infiniband);
	tcase_add_test(tc, qp_bringup_roce);
	tcase_add_test(tc, bringup_failures);
	tcase_add_test(tc, malformed_addresses);
	suite_add_tcase(s, tc);
	tc = tcase_create("memory");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, mem_blob_round_trip);
	tcase_add_test(tc, cuda_dmabuf_registration);
	tcase_add_test(tc, cuda_fallback_and_refusals);
	tcase_add_test(tc, cuda_errors);
	tcase_add_test(tc, cuda_probe);
	tcase_add_test(tc, cuda_fork_after_init);
	tcase_add_test(tc, cuda_without_driver);
	suite_add_tcase(s, tc);
	tc = tcase_create("operations");
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, put_split_and_signaled);
	tcase_add_test(tc, send_queue_bounded);
	tcase_add_test(tc, signal_atomic);
	tcase_add_test(tc, signal_imm);
	tcase_add_test(tc, signal_imm_forced_and_checked);
	tcase_add_test(tc, error_completions);
	tcase_add_test(tc, remote_access_error);
	tcase_add_test(tc, post_send_failure);
	suite_add_tcase(s, tc);
	tc = tcase_create("module");
	tcase_add_test(tc, weft_info_names_plugin);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
