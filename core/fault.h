/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection for tests: fails the Nth operation of one kind, so that tests
 * can check every error path reaches the caller without a hang or a leak.
 * Armed only by WEFT_TEST_FAULT=<kind>:<n>[:peer] (read once, test-only; the WEFT_TEST_
 * prefix is reserved, never a parameter); inert and cheap when unset. */
#ifndef WEFT_CORE_FAULT_H
#define WEFT_CORE_FAULT_H

enum weft__fault {
	WEFT_FAULT_ALLOC,    /* "alloc": the core's allocation of a region, import or connection */
	WEFT_FAULT_REGISTER, /* "register": a transport's mem_register */
	WEFT_FAULT_CONNECT,  /* "connect": a transport's connect in weft_connect */
	WEFT_FAULT_PUT,      /* "put": a transport's put (weft_put, port channels) */
	WEFT_FAULT_FLUSH,    /* "flush": a transport's flush (weft_flush, port channels) */
	WEFT_FAULT_COUNT
};

/* 1 when this call is the armed kind's Nth (counted from 1 per process; only
 * that one fails), else 0. Callers ask once per operation, not again when they
 * retry it after -EAGAIN, so the count does not depend on timing. Logs a
 * warning naming the fault when it fires, and appends "<kind> <n> <pid>" to the file WEFT_TEST_FAULT_LOG names, if any,
 * so a test can tell an injected failure from a real one. Thread safety: any
 * thread. */
int weft__fault_should_fail(enum weft__fault kind);

/* The error an injected fault of that kind returns (what the real failure
 * would most plausibly return): -ENOMEM for alloc, -EIO otherwise, or with
 * ":peer" -WEFT_ERR_PEER (a transport that lost its peer and logged nothing). */
int weft__fault_error(enum weft__fault kind);

#endif
