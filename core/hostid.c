/* SPDX-License-Identifier: Apache-2.0 */
/* Host and process identity from /proc: the kernel's boot id names the machine,
 * the inode of /proc/self/ns/net names the network namespace within it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostid.h"
#include "log.h"
#include "sha256.h"

#define WEFT_TEST_HOST_LABEL_MAX 8 /* room for it after "<boot id>-<inode>" within WEFT_HOST_ID_LEN */

static int read_line(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int err = errno;
	close(fd);
	if (n <= 0)
		return n < 0 ? -err : -ENODATA;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

#ifdef WEFT_TEST_HOOKS
/* Test-only (built with WEFT_TEST_HOOKS): WEFT_TEST_HOST_ID=<label> is
 * appended, so processes of one machine and namespace count as hosts of
 * their own, one per label (weft-plugin-check --hosts 2 without namespaces). */
static int test_host_label(char *buf, size_t len, size_t at)
{
	const char *label = getenv("WEFT_TEST_HOST_ID");
	if (!label || !*label)
		return 0;
	size_t ll = strlen(label);
	int ok = ll <= WEFT_TEST_HOST_LABEL_MAX;
	for (const char *p = label; ok && *p; p++)
		ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		     *p == '_' || *p == '.';
	static int told;
	int first = !__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED);
	if (!ok) {
		if (first)
			WEFT_ERROR("WEFT_TEST_HOST_ID='%s' is not 1 to %d of [A-Za-z0-9._-]; no host identity made",
				   label, WEFT_TEST_HOST_LABEL_MAX);
		return -EINVAL;
	}
	if (at + 3 + ll >= len)
		return -ENOSPC;
	if (first)
		WEFT_WARN("WEFT_TEST_HOST_ID=%s: test-only host identity: this process counts as host '%s' of its own",
			  label, label);
	snprintf(buf + at, len - at, "-t-%s", label);
	return 0;
}
#endif

int weft__host_id(char *buf, size_t len)
{
	char boot[128];
	struct stat st;
	unsigned long long ns = 0;

	if (read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot)) != 0) {
		/* Without /proc the host name is the best we have; two containers of one
		 * machine may then look like two hosts, which only costs speed. */
		static int warned;
		if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
			WEFT_WARN("cannot read /proc/sys/kernel/random/boot_id; using the host name as host identity");
		if (gethostname(boot, sizeof(boot)) != 0)
			snprintf(boot, sizeof(boot), "unknown");
		boot[sizeof(boot) - 1] = '\0';
	}
	if (stat("/proc/self/ns/net", &st) == 0)
		ns = (unsigned long long)st.st_ino;
	int n = snprintf(buf, len, "%s-%llu", boot, ns);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
#ifdef WEFT_TEST_HOOKS
	return test_host_label(buf, len, (size_t)n);
#else
	return 0;
#endif
}

uint64_t weft__proc_id(void)
{
	char host[WEFT_HOST_ID_LEN];
	char stat_line[1024] = "";
	struct stat st;
	struct weft__sha256 c;
	uint8_t d[WEFT_SHA256_BYTES];
	unsigned long long pidns = 0;
	pid_t pid = getpid();

	weft__host_id(host, sizeof(host));
	if (stat("/proc/self/ns/pid", &st) == 0)
		pidns = (unsigned long long)st.st_ino;
	/* The start time (field 22 of /proc/self/stat) tells apart a pid reused after
	 * a process died; the whole line is hashed, and its first fields are stable. */
	if (read_line("/proc/self/stat", stat_line, sizeof(stat_line)) == 0) {
		char *p = strrchr(stat_line, ')');
		unsigned long long start = 0;
		if (p) {
			/* After ") " come fields 3..; field 22 is the 20th of them. */
			int field = 3;
			for (char *q = p + 2; *q && field < 22; q++)
				if (*q == ' ')
					field++, p = q;
			if (field == 22)
				sscanf(p + 1, "%llu", &start);
		}
		snprintf(stat_line, sizeof(stat_line), "%llu", start);
	}
	weft__sha256_init(&c);
	weft__sha256_update(&c, host, strlen(host));
	weft__sha256_update(&c, &pidns, sizeof(pidns));
	weft__sha256_update(&c, &pid, sizeof(pid));
	weft__sha256_update(&c, stat_line, strlen(stat_line));
	weft__sha256_final(&c, d);
	uint64_t id;
	memcpy(&id, d, sizeof(id));
	return id;
}
