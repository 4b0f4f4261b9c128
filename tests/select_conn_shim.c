/* For the conformance suite's rule-driven variants (conformance_require.cmake):
 * conformance.c is compiled there with -Dweft_connect=wt_select_connect, so
 * its connections to the transport under test (WEFT_TEST_TRANSPORT) ask the
 * core to choose (transport NULL), and the suite's own check that every
 * connection is carried by that transport asserts that the [transport] rule
 * of WEFT_CONFIG chose it. Any other name passes through unchanged. */
#include <stdlib.h>
#include <string.h>

#include <weft/weft.h>

int wt_select_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn);

int wt_select_connect(weft_comm_t *comm, int peer, const char *transport, weft_conn_t **conn)
{
	const char *t = getenv("WEFT_TEST_TRANSPORT");
	if (transport && t && strcmp(transport, t) == 0)
		transport = NULL;
	return weft_connect(comm, peer, transport, conn);
}
