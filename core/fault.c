/* SPDX-License-Identifier: Apache-2.0 */
/* Test-only fault injection (see fault.h): parses WEFT_TEST_FAULT once and
 * counts operations per kind with atomics. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/weft.h>

#include "fault.h"
#include "log.h"

static const char *const fault_names[WEFT_FAULT_COUNT] = {"alloc", "register", "connect", "put", "flush"};

static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static int fault_kind = -1; /* the armed kind, or -1 */
static unsigned long fault_nth;
static unsigned long fault_count[WEFT_FAULT_COUNT];
static int fault_peer; /* ":peer": fail with -WEFT_ERR_PEER, as a transport that lost its peer */

static void fault_init(void)
{
	const char *v = getenv("WEFT_TEST_FAULT");
	if (!v || !*v)
		return;
	const char *colon = strchr(v, ':');
	char *end = NULL;
	unsigned long n = colon ? strtoul(colon + 1, &end, 10) : 0;
	int peer = end && strcmp(end, ":peer") == 0;
	for (int k = 0; colon && k < WEFT_FAULT_COUNT; k++) {
		if (strlen(fault_names[k]) == (size_t)(colon - v) && strncmp(v, fault_names[k], (size_t)(colon - v)) == 0 &&
		    n > 0 && end && (*end == '\0' || (peer && k != WEFT_FAULT_ALLOC))) {
			fault_kind = k;
			fault_nth = n;
			fault_peer = peer;
			WEFT_WARN("WEFT_TEST_FAULT: test-only fault injection armed: the %s operation #%lu fails%s",
				  fault_names[k], n, peer ? " as a lost peer" : "");
			return;
		}
	}
	WEFT_ERROR("WEFT_TEST_FAULT='%s' is not <kind>:<n>[:peer] with kind one of alloc, register, connect, put, "
		   "flush (not alloc with :peer) and n >= 1; no fault armed",
		   v);
}

int weft__fault_should_fail(enum weft__fault kind)
{
	pthread_once(&fault_once, fault_init);
	if (fault_kind != (int)kind)
		return 0;
	unsigned long n = __atomic_add_fetch(&fault_count[kind], 1, __ATOMIC_RELAXED);
	if (n != fault_nth)
		return 0;
	WEFT_WARN("WEFT_TEST_FAULT: injecting a failure into %s operation #%lu", fault_names[kind], n);
	const char *log = getenv("WEFT_TEST_FAULT_LOG");
	if (log && *log) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dprintf(fd, "%s %lu %ld\n", fault_names[kind], n, (long)getpid());
			close(fd);
		}
	}
	return 1;
}

int weft__fault_error(enum weft__fault kind)
{
	return kind == WEFT_FAULT_ALLOC ? -ENOMEM : fault_peer ? -WEFT_ERR_PEER : -EIO;
}
