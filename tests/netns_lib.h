/* SPDX-License-Identifier: Apache-2.0 */
/* Two "hosts" on one machine for tests: network namespaces joined by a veth
 * pair, made by the test's main process and entered by forked ranks. Needs
 * root and `ip netns`. Names and addresses are unique per test process, so
 * ctest -j never collides: namespaces wt<tag><pid>a/b, veths w<t><pid>a/b,
 * 10.250.X.(4Y+1 | 4Y+2)/30. */
#ifndef WEFT_NETNS_LIB_H
#define WEFT_NETNS_LIB_H

#include <weft/weft.h>

struct wt_netns {
	char ns[2][32], veth[2][16], addr[2][20];
	int have[2];
	int owner; /* pid of the process that made them: only it removes them */
};

/* Why namespaces cannot be made here (not root, no `ip netns`), or NULL. */
const char *wt_netns_unavailable(void);
/* Makes both namespaces and the veth pair, up and addressed; removes them at
 * exit and on SIGINT/SIGTERM/SIGHUP. 0 or -1 (logged). */
int wt_netns_setup(struct wt_netns *n, const char *tag);
void wt_netns_cleanup(struct wt_netns *n);
/* In a forked rank: moves into namespace i with /sys remounted, as `ip netns
 * exec` does (UCX finds its devices there). 0 or -1 (logged). */
int wt_netns_enter(const struct wt_netns *n, int i);
/* In a rank inside namespace i: the bootstrap and the network transports on
 * its veth (WEFT_CORE_BOOTSTRAP_ADDR, WEFT_OFI_ADDR, WEFT_OFI_IFACE,
 * WEFT_UCX_NET_DEVICES), whatever the caller's shell exported for loopback. */
void wt_netns_env(const struct wt_netns *n, int i);
/* Skip (77) with a printed reason, or fail where WEFT_REQUIRE_NETNS=1. */
int wt_netns_skip(const char *why);
/* wt_netns_setup where namespaces can be made: 0, else wt_netns_skip's
 * code (the test's exit status) with the reason printed. */
int wt_netns_prepare(struct wt_netns *n, const char *tag);

/* A unique id made by one rank inside its namespace (the bootstrap listens
 * on its address) and handed to the others through a pipe made before the
 * fork: wt_id_pipe in the parent, then wt_id_share in every rank. */
struct wt_id_pipe {
	int fd[2];
	int readers;
};
int wt_id_pipe_open(struct wt_id_pipe *p, int readers);
void wt_id_pipe_close(struct wt_id_pipe *p);
int wt_id_share(struct wt_id_pipe *p, int maker, struct weft_unique_id *id);

#endif
