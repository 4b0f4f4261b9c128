/* SPDX-License-Identifier: Apache-2.0 */
/* For the conformance suite's rule-driven variants (conformance_require.cmake):
 * conformance.c is compiled there with -Dweft_connect=wt_select_connect, so
 * its connections to the transport under test (WEFT_TEST_TRANSPORT) ask the
 * core to choose (transport NULL), and the suite's own check that every
 * connection is carried by that transport asserts that the [transport] rule
 * of WEFT_CONFIG chose it. Any other name passes through unchanged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

int wt_select_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn);

int wt_select_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn)
{
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (!transport || !t || strcmp(transport, t) != 0)
		return weft_connect(comm, peer, transport, conn);
	weft_conn_t *c = NULL;
	int rc = weft_connect(comm, peer, NULL, &c);
	if (rc != 0)
		return rc;
	/* The suites check this too, in their own words; saying it here as well
	 * makes a wrong choice obvious in any suite that uses the shim. */
	const char *got = weft_conn_transport(c);
	if (!got || strcmp(got, t) != 0) {
		fprintf(stderr, "select shim: the core chose '%s' for rank %d, expected '%s'\n", got ? got : "(null)",
			peer, t);
		weft_conn_close(c);
		return -WEFT_ERR_MISMATCH;
	}
	*conn = c;
	return 0;
}
