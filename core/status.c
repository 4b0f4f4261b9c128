/* SPDX-License-Identifier: Apache-2.0 */
/* [core] status_socket: a Unix socket per process that answers, to a process
 * of the same user, where each of its communicators is (the call it waits
 * in, for how long, where each peer is). weft-info --where PID reads it. No
 * signal handler: a thread of the core accepts and answers. The socket lives
 * in a folder of mode 0700 owned by the user, and each connection's peer is
 * checked with SO_PEERCRED. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/weft.h>

#include "base.h"
#include "bootstrap.h"
#include "config.h"
#include "handles.h"
#include "log.h"
#include "status.h"

/* $XDG_RUNTIME_DIR/weft, else /tmp/weft-UID: created 0700 if missing, and
 * refused unless a folder of this user that only it can enter. */
static int status_dir(char *buf, size_t len, int create)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");
	int n = rt && *rt ? snprintf(buf, len, "%s/weft", rt) : snprintf(buf, len, "/tmp/weft-%u", (unsigned)getuid());
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (create && mkdir(buf, 0700) != 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (lstat(buf, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077)) {
		WEFT_ERROR("status socket: %s is not a folder of this user closed to others (mode %03o, owner %u); "
			   "not used",
			   buf, (unsigned)(st.st_mode & 0777), (unsigned)st.st_uid);
		return -EPERM;
	}
	return 0;
}

static int status_path(long pid, struct sockaddr_un *sa, int create)
{
	char dir[sizeof(sa->sun_path)];
	int rc = status_dir(dir, sizeof(dir) - 24, create);
	if (rc)
		return rc;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%ld.sock", dir, pid);
	return n < 0 || (size_t)n >= sizeof(sa->sun_path) ? -ENAMETOOLONG : 0;
}

struct report {
	FILE *out;
	int n;
};

static void report_comm(weft_comm_t *comm, void *arg)
{
	struct report *r = arg;
	char buf[4096];
	weft__bootstrap_where(comm->bs, buf, sizeof(buf));
	fprintf(r->out, "communicator %p: rank %d of %d\n%s", (void *)comm, comm->rank, comm->nranks, buf);
	r->n++;
}

static void answer(int fd)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 || cred.uid != getuid())
		return; /* another user: no answer */
	FILE *out = fdopen(dup(fd), "w");
	if (!out)
		return;
	struct report r = {.out = out};
	fprintf(out, "weft process %ld\n", (long)getpid());
	weft__comm_live_each(report_comm, &r);
	if (!r.n)
		fprintf(out, "no communicator\n");
	fclose(out);
}

static int g_lfd = -1;
static long g_pid;
static char g_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void *status_main(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		answer(fd);
		close(fd);
	}
	return NULL;
}

static void status_unlink(void)
{
	if (g_pid == (long)getpid() && g_path[0])
		unlink(g_path);
}

int weft__status_start(void)
{
	int on = 0;
	if (weft__param_get("core", "status_socket", WEFT_PARAM_BOOL, &on, NULL) != 0 || !on)
		return 0;
	pthread_mutex_lock(&g_mu);
	/* Once per process; a forked child starts its own. */
	if (g_pid == (long)getpid()) {
		pthread_mutex_unlock(&g_mu);
		return 0;
	}
	struct sockaddr_un sa;
	int rc = status_path((long)getpid(), &sa, 1);
	int fd = rc ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!rc && fd < 0)
		rc = -errno;
	if (!rc) {
		unlink(sa.sun_path); /* a file left by an earlier process of this pid */
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 8) != 0)
			rc = -errno;
	}
	pthread_t th;
	if (!rc && (rc = -pthread_create(&th, NULL, status_main, (void *)(intptr_t)fd)) == 0)
		pthread_detach(th);
	if (rc) {
		WEFT_WARN("status socket %s: %s; weft-info --where cannot reach this process", sa.sun_path,
			  strerror(-rc));
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&g_mu);
		return 0; /* diagnostics only: the job goes on */
	}
	if (g_lfd >= 0 && g_pid != (long)getpid())
		close(g_lfd); /* the parent's, inherited */
	g_lfd = fd;
	int first = g_pid == 0;
	g_pid = (long)getpid();
	snprintf(g_path, sizeof(g_path), "%s", sa.sun_path);
	if (first)
		atexit(status_unlink);
	WEFT_INFO("status socket %s (weft-info --where %ld)", g_path, g_pid);
	pthread_mutex_unlock(&g_mu);
	return 0;
}

WEFT_API int weft_info_where(long pid, FILE *out)
{
	struct sockaddr_un sa;
	int rc = status_path(pid, &sa, 0);
	if (rc)
		return rc == -ENOENT ? -ESRCH : rc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = errno == ENOENT || errno == ECONNREFUSED ? -ESRCH : -errno;
		close(fd);
		return rc;
	}
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, out);
	close(fd);
	return n < 0 ? -errno : 0;
}
