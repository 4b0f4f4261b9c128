/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzzer for the registered-memory blob a peer sends (weft_mem_import's
 * parser in core/mem.c): header, section table, lengths, transport names. The
 * communicator is a stand-in with two transports whose mem_import accepts any
 * section (their own parsers have fuzz_<transport>), so only the core's
 * validation is under test; every handle it imports must be released again. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

#include "base.h"
#include "mem.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long live_handles;

static int stub_import(void *tc, int peer, const void *buf, size_t len, void **rmh)
{
	/* Returns errors for some contents, so the core's unwinding runs too. */
	if (len > 0 && ((const uint8_t *)buf)[0] == 0xEE)
		return -22;
	if (len > 0 && ((const uint8_t *)buf)[0] == 0xEF)
		return -113; /* -EHOSTUNREACH: skipped, not an error */
	void *h = malloc(len ? len : 1);
	if (!h)
		return -12;
	if (len)
		memcpy(h, buf, len); /* reads the whole section the core vouched for */
	live_handles++;
	*rmh = h;
	return 0;
}

static int stub_release(void *tc, void *rmh)
{
	free(rmh);
	live_handles--;
	return 0;
}

static const struct weft_transport_ops stub_ops = {
	.size = sizeof(struct weft_transport_ops),
	.mem_import = stub_import,
	.mem_release = stub_release,
};

static weft_comm_t comm;
static struct weft__tp tps[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setenv("WEFT_LOG_FILE", "/dev/null", 1);
	strcpy(tps[0].name, "ofi");
	strcpy(tps[1].name, "ucx");
	for (int i = 0; i < 2; i++) {
		tps[i].ops = &stub_ops;
		pthread_mutex_init(&tps[i].lock, NULL);
	}
	comm.rank = 0;
	comm.nranks = 2;
	comm.ntp = 2;
	comm.tp = tps;
	pthread_mutex_init(&comm.lock, NULL);
	weft__list_init(&comm.rmems);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size heap copy, so that ASan sees any read past the blob. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	weft_rmem_t *rmem = NULL;
	/* The public entry point: the same path a user's weft_mem_import takes. */
	int rc = weft_mem_import(&comm, 1, buf, size, &rmem);
	if (rc == 0)
		weft_rmem_release(rmem);
	else if (rmem)
		__builtin_trap(); /* out-params are written only on success */
	free(buf);
	if (live_handles != 0)
		__builtin_trap(); /* a failed import leaked a transport handle */
	return 0;
}
