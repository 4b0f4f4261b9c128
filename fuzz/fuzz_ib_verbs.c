/* SPDX-License-Identifier: Apache-2.0 */
/* A minimal libibverbs stand-in for fuzz_ib: one device with one active
 * InfiniBand port, and objects that are only allocated and freed, so that the
 * ib plugin opens, makes endpoints and registers memory on a host without RDMA
 * hardware, and its parsers of peer input (the memory-blob section, the
 * endpoint address) can be fuzzed. No work request is ever executed; receive
 * completions are queued by fuzz_tp_mode4, which plays a peer signalling by
 * write-with-immediate: what it writes into the mailbox and the immediate
 * data are the input, and the plugin must store tokens only inside memory
 * registered here. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibp.h"

void fuzz_tp_prepare(void);
void fuzz_tp_mode4(const struct weft_transport_ops *ops, void *tc, const uint8_t *buf, size_t n);

/* Completions fuzz_tp_mode4 queued for one completion queue. */
static struct ibv_wc wcq[16];
static int nwcq;
static struct ibv_cq *wcq_cq;

static struct ibv_device dev = {.name = "fuzz_ib0"};
static uint32_t next_key = 0x100, next_qpn = 0x40;

static struct ibv_device **f_get_device_list(int *num)
{
	struct ibv_device **l = calloc(2, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	l[0] = &dev;
	*num = 1;
	return l;
}

static void f_free_device_list(struct ibv_device **l)
{
	free(l);
}

static struct ibv_context *f_open_device(struct ibv_device *d)
{
	struct ibv_context *c = calloc(1, sizeof(*c));
	if (c)
		c->device = d;
	else
		errno = ENOMEM;
	return c;
}

static int f_close_device(struct ibv_context *c)
{
	free(c);
	return 0;
}

static int f_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->node_guid = 0x0002c90300a1b2c3ull;
	a->phys_port_cnt = 1;
	a->max_qp_wr = 16384;
	a->max_cqe = 65536;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->atomic_cap = IBV_ATOMIC_HCA;
	return 0;
}

static int f_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->link_layer = IBV_LINK_LAYER_INFINIBAND;
	a->lid = 7;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = 1;
	a->max_msg_sz = 1u << 30;
	a->active_speed = 32; /* HDR */
	a->active_width = 2;  /* 4x */
	return 0;
}

static int f_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	g->raw[0] = 0xfe;
	g->raw[1] = 0x80;
	g->raw[15] = 1;
	return 0;
}

static struct ibv_pd *f_alloc_pd(struct ibv_context *c)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (pd)
		pd->context = c;
	else
		errno = ENOMEM;
	return pd;
}

static int f_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

static struct ibv_mr *f_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pd = pd;
	mr->addr = addr;
	mr->length = len;
	mr->lkey = next_key;
	mr->rkey = next_key++;
	return mr;
}

static struct ibv_mr *f_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova, int fd,
				      int access)
{
	errno = EOPNOTSUPP;
	return NULL;
}

static int f_dereg_mr(struct ibv_mr *mr)
{
	free(mr);
	return 0;
}

static struct ibv_cq *f_create_cq(struct ibv_context *c, int cqe)
{
	struct ibv_cq *cq = calloc(1, sizeof(*cq));
	if (cq) {
		cq->context = c;
		cq->cqe = cqe;
	} else {
		errno = ENOMEM;
	}
	return cq;
}

static int f_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}

static struct ibv_qp *f_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct ibv_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->pd = pd;
	qp->qp_num = next_qpn++ & 0xffffff;
	if (qp->qp_num == 0)
		qp->qp_num = next_qpn++;
	qp->qp_type = ia->qp_type;
	qp->state = IBV_QPS_RESET;
	return qp;
}

static int f_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if (mask & IBV_QP_STATE)
		qp->state = a->qp_state;
	return 0;
}

static int f_destroy_qp(struct ibv_qp *qp)
{
	free(qp);
	return 0;
}

static int f_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return 0;
}

static int f_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return 0;
}

static int f_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	if (cq != wcq_cq)
		return 0;
	int k = nwcq < n ? nwcq : n;
	memcpy(wc, wcq, (size_t)k * sizeof(*wc));
	memmove(wcq, wcq + k, (size_t)(nwcq - k) * sizeof(*wc));
	nwcq -= k;
	return k;
}

static int f_read_sysfs(const char *path, char *buf, size_t len)
{
	return ENOENT;
}

static int f_real_path(const char *path, char *buf, size_t len)
{
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

/* Called by fuzz_transport.c before the plugin's init. */
void fuzz_tp_prepare(void)
{
	ibp_set_verbs(&fake);
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

#define CANARY 0x5a5a5a5a5a5a5a5aull

/* An endpoint connected to itself (its own address is a valid one), a 64-word
 * registered region between two 8-word canaries, and up to 16 receive
 * completions built from the input, each polled by a progress call of its
 * own. 13 bytes each: flags u8 (bit 0: opcode RECV_RDMA_WITH_IMM, bit 1:
 * IBV_WC_WITH_IMM set, bit 2: the mailbox word is an address near the region,
 * else raw), immediate data u32, mailbox word u64 (written into the slot the
 * immediate names first, as the peer's RDMA write would be). */
void fuzz_tp_mode4(const struct weft_transport_ops *ops, void *tc, const uint8_t *buf, size_t n)
{
	static uint64_t mem[8 + 64 + 8];
	for (int i = 0; i < 8; i++)
		mem[i] = mem[72 + i] = CANARY;
	void *mh = NULL, *ep = NULL;
	if (ops->mem_register(tc, &mem[8], 64 * sizeof(uint64_t), WEFT_MEM_HOST, &mh) != 0)
		return;
	struct weft_tp_peer p = {.size = sizeof(p), .rank = 1, .peer_class = WEFT_PEER_OTHER_HOST,
				 .host_id = "fuzzhost", .addr = "127.0.0.1"};
	uint8_t addr[IBP_ADDR_LEN];
	size_t alen = sizeof(addr);
	if (ops->endpoint(tc, &p, addr, &alen, &ep) != 0)
		goto out_dereg;
	if (ops->connect(ep, addr, alen) != 0)
		goto out_disconnect;
	uint64_t *mailbox = (uint64_t *)(uintptr_t)rd64(addr + 48);
	uint32_t nslots = weft_kit_le_get32(addr + 60);
	wcq_cq = ((struct ibp_ep *)ep)->cq;
	/* One write and its completion at a time, as RC delivers them: the
	 * mailbox word is in memory before the completion that names it. */
	for (size_t off = 0, k = 0; off + 13 <= n && k < 16; off += 13, k++) {
		const uint8_t *r = buf + off;
		uint32_t imm = weft_kit_le_get32(r + 1);
		uint64_t word = rd64(r + 5);
		uint32_t slot = imm >> IBP_IMM_SLOT_SHIFT;
		if (r[0] & 4) /* an address within 8 words of the region, any alignment */
			word = (uint64_t)(uintptr_t)&mem[0] + word % (80 * sizeof(uint64_t));
		if (slot <= nslots) /* slot nslots is the flush word: also the peer's to write */
			mailbox[slot] = word;
		struct ibv_wc *wc = &wcq[0];
		memset(wc, 0, sizeof(*wc));
		wc->wr_id = IBP_WRID_RECV;
		wc->status = IBV_WC_SUCCESS;
		wc->opcode = (r[0] & 1) ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
		wc->wc_flags = (r[0] & 2) ? IBV_WC_WITH_IMM : 0;
		wc->imm_data = htonl(imm);
		nwcq = 1;
		ops->progress(tc);
	}
	nwcq = 0;
	wcq_cq = NULL;
	for (int i = 0; i < 8; i++)
		if (mem[i] != CANARY || mem[72 + i] != CANARY)
			__builtin_trap(); /* a token stored outside every registered region */
out_disconnect:
	ops->disconnect(ep);
out_dereg:
	ops->mem_deregister(tc, mh);
}
