/* SPDX-License-Identifier: Apache-2.0 */
/* Listeners nobody uses (issue 29 item 5): a communicator whose peers are all
 * reached through shm opens no UCX worker and no libfabric endpoint, so
 * neither listens on a socket of the process nor makes a file in /dev/shm
 * (which a SIGKILL would leave behind); a connection through ucx or ofi opens
 * them (the controls), UCX's only on the bootstrap's interface. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#define JOB_TIMEOUT_S 90

static struct weft_unique_id g_id;

/* Whether the socket inode is one of this process's descriptors. */
static int own_socket(unsigned long ino)
{
	DIR *d = opendir("/proc/self/fd");
	int found = 0;
	char want[64], path[300], target[64];
	snprintf(want, sizeof(want), "socket:[%lu]", ino);
	for (struct dirent *e = d ? readdir(d) : NULL; e && !found; e = readdir(d)) {
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n > 0) {
			target[n] = '\0';
			found = strcmp(target, want) == 0;
		}
	}
	if (d)
		closedir(d);
	return found;
}

/* This process's listening TCP sockets (IPv4 and IPv6); -1 when unreadable.
 * *elsewhere (optional) counts those bound to anything but loopback. */
static int listening_sockets_on(int *elsewhere)
{
	const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	int n = 0;
	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		if (!fp)
			return f == 0 ? -1 : n;
		char line[512];
		if (!fgets(line, sizeof(line), fp)) {
			fclose(fp);
			continue;
		}
		while (fgets(line, sizeof(line), fp)) {
			unsigned st;
			unsigned long ino;
			char local[64];
			/* sl local rem st tx:rx tr:when retrnsmt uid timeout inode */
			if (sscanf(line, "%*s %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &ino) != 3 || st != 0x0A ||
			    !own_socket(ino))
				continue;
			n++;
			/* 127.0.0.0/8 is "..7F:port" in /proc/net/tcp; ::1 its own string. */
			int loop = f == 0 ? strncmp(local + 6, "7F:", 3) == 0
					  : strncmp(local, "00000000000000000000000001000000:", 33) == 0;
			if (elsewhere && !loop)
				(*elsewhere)++;
		}
		fclose(fp);
	}
	return n;
}

/* Files in /dev/shm that ofi's shm endpoint of this process made. */
static int listening_sockets(void)
{
	return listening_sockets_on(NULL);
}

static int ofi_shm_files(void)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "weft_%d_", (int)getpid());
	DIR *d = opendir("/dev/shm");
	int n = 0;
	for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	if (d)
		closedir(d);
	return n;
}

/* arg non-NULL: ucx is excluded, the baseline. Writes this rank's count of
 * listeners after a collective and a shm connection to counts[rank]. */
static int *g_counts;

static int rank_listeners(int rank, int n, void *arg)
{
	if (arg)
		setenv("WEFT_CORE_PLUGINS", "^ucx", 1);
	/* UCX's own choice of devices: the plugin keeps tcp to the bootstrap's
	 * interface (loopback here), whatever else the machine has. */
	unsetenv("WEFT_UCX_NET_DEVICES");
	unsetenv("UCX_NET_DEVICES");
	weft_comm_t *comm = NULL;
	ROK(weft_comm_create(&g_id, n, rank, &comm));
	int v = rank + 1, sum = 0;
	ROK(weft_allreduce(&v, &sum, 1, WEFT_INT32, WEFT_SUM, comm, NULL));
	RCHECK(sum == 3, "allreduce: %d", sum);
	weft_conn_t *c = NULL;
	ROK(weft_connect(comm, 1 - rank, NULL, &c));
	RCHECK(strcmp(weft_conn_transport(c), "ucx") != 0, "the default connection went through ucx");
	ROK(weft_conn_close(c));
	int before = listening_sockets();
	/* The bootstrap's listener, and nothing of ucx's or ofi's. */
	RCHECK(before == 1, "%d listening sockets with ucx and ofi unused", before);
	RCHECK(ofi_shm_files() == 0, "ofi made a file in /dev/shm with no ofi connection");
	g_counts[rank] = before;
	if (!arg) {
		ROK(weft_connect(comm, 1 - rank, "ucx", &c));
		int elsewhere = 0, after = listening_sockets_on(&elsewhere);
		RCHECK(after > before, "a ucx connection opened no listener (%d before, %d after)", before, after);
		RCHECK(elsewhere == 0, "%d of %d listening sockets are not on loopback, the bootstrap's interface",
		       elsewhere, after);
		ROK(weft_conn_close(c));
		ROK(weft_connect(comm, 1 - rank, "ofi", &c));
		RCHECK(ofi_shm_files() == 1, "an ofi connection to a same-host peer made %d files in /dev/shm",
		       ofi_shm_files());
		ROK(weft_conn_close(c));
	}
	ROK(weft_comm_destroy(comm));
	return 0;
}

START_TEST(no_ucx_listener_unless_used)
{
	int *counts = mmap(NULL, 4 * sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(counts, MAP_FAILED);
	g_counts = counts;
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_listeners, "baseline", JOB_TIMEOUT_S), 0);
	int base0 = counts[0], base1 = counts[1];
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	ck_assert_int_eq(wt_fork_ranks(2, rank_listeners, NULL, JOB_TIMEOUT_S), 0);
	ck_assert_msg(counts[0] == base0 && counts[1] == base1,
		      "listening sockets with ucx loaded but unused: %d and %d; without ucx: %d and %d", counts[0],
		      counts[1], base0, base1);
	munmap(counts, 4 * sizeof(int));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("listeners");
	TCase *tc = tcase_create("unused");
	tcase_add_test(tc, no_ucx_listener_unless_used);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
