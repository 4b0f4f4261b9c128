/* SPDX-License-Identifier: Apache-2.0 */
/* ib plugin: the verbs table that points at libibverbs. Verbs that verbs.h
 * makes static inline or macros (ibv_post_send, ibv_poll_cq, ibv_query_port,
 * ibv_reg_mr) get real functions here, and every wrapper reports failure the
 * same way (see struct ibp_verbs_ops). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibp.h"

/* Some verbs return -1 and leave the reason in errno, others return the errno
 * value; both become a positive errno value. */
static int norm(int rc)
{
	if (rc == 0)
		return 0;
	if (rc > 0)
		return rc;
	return errno > 0 ? errno : EIO;
}

static struct ibv_device **v_get_device_list(int *num)
{
	return ibv_get_device_list(num);
}

static void v_free_device_list(struct ibv_device **list)
{
	ibv_free_device_list(list);
}

static struct ibv_context *v_open_device(struct ibv_device *dev)
{
	return ibv_open_device(dev);
}

static int v_close_device(struct ibv_context *ctx)
{
	return norm(ibv_close_device(ctx));
}

static int v_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return norm(ibv_query_device(ctx, attr));
}

static int v_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return norm(ibv_query_port(ctx, port, attr));
}

static int v_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	return norm(ibv_query_gid(ctx, port, index, gid));
}

static struct ibv_pd *v_alloc_pd(struct ibv_context *ctx)
{
	return ibv_alloc_pd(ctx);
}

static int v_dealloc_pd(struct ibv_pd *pd)
{
	return norm(ibv_dealloc_pd(pd));
}

static struct ibv_mr *v_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return ibv_reg_mr(pd, addr, len, access);
}

static struct ibv_mr *v_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova, int fd,
				      int access)
{
	return ibv_reg_dmabuf_mr(pd, offset, len, iova, fd, access);
}

static int v_dereg_mr(struct ibv_mr *mr)
{
	return norm(ibv_dereg_mr(mr));
}

static struct ibv_cq *v_create_cq(struct ibv_context *ctx, int cqe)
{
	return ibv_create_cq(ctx, cqe, NULL, NULL, 0);
}

static int v_destroy_cq(struct ibv_cq *cq)
{
	return norm(ibv_destroy_cq(cq));
}

static struct ibv_qp *v_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return ibv_create_qp(pd, attr);
}

static int v_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	return norm(ibv_modify_qp(qp, attr, mask));
}

static int v_destroy_qp(struct ibv_qp *qp)
{
	return norm(ibv_destroy_qp(qp));
}

static int v_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return norm(ibv_post_send(qp, wr, bad));
}

static int v_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return norm(ibv_post_recv(qp, wr, bad));
}

static int v_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	return ibv_poll_cq(cq, n, wc);
}

static int v_read_sysfs(const char *path, char *buf, size_t len)
{
	if (len == 0)
		return EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return e;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

static int v_real_path(const char *path, char *buf, size_t len)
{
	char tmp[PATH_MAX];
	if (!realpath(path, tmp))
		return errno;
	if (strlen(tmp) >= len)
		return ENAMETOOLONG;
	strcpy(buf, tmp);
	return 0;
}

const struct ibp_verbs_ops ibp_verbs_real = {
	.get_device_list = v_get_device_list,
	.free_device_list = v_free_device_list,
	.open_device = v_open_device,
	.close_device = v_close_device,
	.query_device = v_query_device,
	.query_port = v_query_port,
	.query_gid = v_query_gid,
	.alloc_pd = v_alloc_pd,
	.dealloc_pd = v_dealloc_pd,
	.reg_mr = v_reg_mr,
	.reg_dmabuf_mr = v_reg_dmabuf_mr,
	.dereg_mr = v_dereg_mr,
	.create_cq = v_create_cq,
	.destroy_cq = v_destroy_cq,
	.create_qp = v_create_qp,
	.modify_qp = v_modify_qp,
	.destroy_qp = v_destroy_qp,
	.post_send = v_post_send,
	.post_recv = v_post_recv,
	.poll_cq = v_poll_cq,
	.read_sysfs = v_read_sysfs,
	.real_path = v_real_path,
};

const struct ibp_verbs_ops *ibp_verbs = &ibp_verbs_real;

void ibp_set_verbs(const struct ibp_verbs_ops *ops)
{
	ibp_verbs = ops ? ops : &ibp_verbs_real;
}
