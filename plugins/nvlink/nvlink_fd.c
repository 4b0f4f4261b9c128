/* SPDX-License-Identifier: Apache-2.0 */
/* nvlink plugin: passing VMM file descriptors between processes of one host.
 * The exporter serves them on an abstract Unix socket; an importer connects
 * during mem_import, names the export, and receives its fds (SCM_RIGHTS). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nvlink.h"

void nvl_sock_name(uint64_t tag, int rank, char *name, size_t len)
{
	snprintf(name, len, "weft-nvlink-%016llx-%d", (unsigned long long)tag, rank);
}

static socklen_t make_addr(uint64_t tag, int rank, struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	char name[80];
	nvl_sock_name(tag, rank, name, sizeof(name));
	size_t n = strlen(name);
	memcpy(a->sun_path + 1, name, n); /* leading NUL: the abstract namespace, nothing on disk */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int send_fds(int sock, const int *fds, int n, int32_t status)
{
	char cbuf[CMSG_SPACE(sizeof(int) * NVL_MAX_CHUNKS)];
	memset(cbuf, 0, sizeof(cbuf));
	struct iovec iov = {.iov_base = &status, .iov_len = sizeof(status)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n > 0) {
		m.msg_control = cbuf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof(status) ? 0 : -errno;
}

/* One request: u64 export id in, i32 status + the fds out. Only processes of
 * this user are served (SO_PEERCRED): an fd is access to the memory. */
static void serve_one(struct nvl_fdsrv *s, int c)
{
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0 || cr.uid != getuid()) {
		NVL_ERR("fd server: refused a connection from uid %d", (int)cr.uid);
		return;
	}
	struct timeval tv = {.tv_sec = 5};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint64_t id;
	if (recv(c, &id, sizeof(id), MSG_WAITALL) != (ssize_t)sizeof(id))
		return;
	int fds[NVL_MAX_CHUNKS], n = 0;
	pthread_mutex_lock(s->lock);
	for (struct nvl_export *e = *s->exports; e; e = e->next) {
		if (e->id == id && e->kind == NVL_KIND_VMM) {
			n = e->nchunks;
			memcpy(fds, e->fd, sizeof(int) * (size_t)n);
			break;
		}
	}
	/* Sent under the lock, so deregister cannot close the fds meanwhile. */
	send_fds(c, fds, n, n > 0 ? n : -ENOENT);
	pthread_mutex_unlock(s->lock);
}

static void *srv_main(void *arg)
{
	struct nvl_fdsrv *s = arg;
	for (;;) {
		int c = accept4(s->lsock, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shutdown by nvl_fdsrv_stop */
		}
		serve_one(s, c);
		close(c);
	}
	return NULL;
}

int nvl_fdsrv_start(struct nvl_fdsrv *s, uint64_t tag, int rank)
{
	if (s->running)
		return 0;
	struct sockaddr_un a;
	socklen_t al = make_addr(tag, rank, &a);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&a, al) != 0 || listen(fd, 64) != 0) {
		int e = errno;
		NVL_ERR("fd server: cannot listen on @%s: %s", a.sun_path + 1, strerror(e));
		close(fd);
		return -e;
	}
	s->lsock = fd;
	int rc = pthread_create(&s->thread, NULL, srv_main, s);
	if (rc != 0) {
		close(fd);
		return -rc;
	}
	s->running = 1;
	return 0;
}

void nvl_fdsrv_stop(struct nvl_fdsrv *s)
{
	if (!s->running)
		return;
	shutdown(s->lsock, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lsock);
	s->running = 0;
}

int nvl_fd_fetch(uint64_t tag, int rank, uint64_t id, int *fds, int n)
{
	struct sockaddr_un a;
	socklen_t al = make_addr(tag, rank, &a);
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0)
		return -errno;
	struct timeval tv = {.tv_sec = 10};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int rc = 0;
	if (connect(c, (struct sockaddr *)&a, al) != 0) {
		rc = -errno;
		NVL_ERR("cannot reach rank %d's fd server @%s: %s", rank, a.sun_path + 1, strerror(-rc));
		goto out_close;
	}
	if (send(c, &id, sizeof(id), MSG_NOSIGNAL) != (ssize_t)sizeof(id)) {
		rc = -errno;
		goto out_close;
	}
	int32_t status = 0;
	char cbuf[CMSG_SPACE(sizeof(int) * NVL_MAX_CHUNKS)];
	struct iovec iov = {.iov_base = &status, .iov_len = sizeof(status)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t got = recvmsg(c, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (got != (ssize_t)sizeof(status)) {
		rc = got < 0 ? -errno : -WEFT_ERR_PEER;
		NVL_ERR("rank %d's fd server sent no answer for export %llu", rank, (unsigned long long)id);
		goto out_close;
	}
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	int nrecv = 0;
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		nrecv = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
	if (status != n || nrecv != n) {
		if (cm && nrecv > 0) {
			int tmp[NVL_MAX_CHUNKS];
			memcpy(tmp, CMSG_DATA(cm), sizeof(int) * (size_t)(nrecv > NVL_MAX_CHUNKS ? NVL_MAX_CHUNKS : nrecv));
			for (int i = 0; i < nrecv && i < NVL_MAX_CHUNKS; i++)
				close(tmp[i]);
		}
		NVL_ERR("rank %d's fd server answered %d fds (status %d) for export %llu, expected %d", rank, nrecv,
			(int)status, (unsigned long long)id, n);
		rc = status < 0 ? -WEFT_ERR_PEER : -WEFT_ERR_PROTOCOL;
		goto out_close;
	}
	memcpy(fds, CMSG_DATA(cm), sizeof(int) * (size_t)n);
out_close:
	close(c);
	return rc;
}
