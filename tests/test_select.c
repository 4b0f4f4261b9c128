/* SPDX-License-Identifier: Apache-2.0 */
/* Transport choice (core/tpsel.c, topo.c, conn.c) and the creation-time
 * consistency check (core/consist.c), with real forked ranks on 127.0.0.1:
 * scores follow what a transport's probe declares (the fakefast test plugin
 * wins when it declares better figures than shm and loses when it declares
 * worse), a failed connect falls back on both ends, [transport] rules order,
 * forbid and require, a missing required transport fails creation naming it,
 * a misspelled name is warned about with a suggestion, and ranks whose
 * configurations differ all fail creation with the difference named.
 * Connections for device memory (weft_connect_mem) follow mem= rules and
 * per-memory-type scores; peers whose GPUs are joined by NVLink (faked through
 * the WEFT_TEST_FAKE_NVML test hook) form the class same-gpu-link, which rules
 * name and which scores NVLink devices by link count; ranks that load
 * different builds of one plugin fail creation naming both builds.
 *
 * Every rank loads its own config (WEFT_CONFIG set in the child before any
 * weft call), so ranks meet through WEFT_CORE_BOOTSTRAP_ROOT, not an id made
 * in this process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/weft.h>

#include "testlib.h"

#ifndef TS_WEFT_INFO
#error "TS_WEFT_INFO (path of weft-info) must be defined"
#endif

#define NR 3 /* the most ranks a scenario uses; most use 2 */
#define TIMEOUT_S 60
#define BYTES 4096

/* Two packages, one NUMA node and one CPU each, nodes 21 apart (SLIT 10/21),
 * in hwloc's XML form: a test topology any machine can load. Node 0 holds
 * CPU `mine` (one this process may run on, so that hwloc, told the topology
 * is this system's, places the process on node 0), node 1 another CPU and
 * a network card at PCI 0000:3b:00.0. */
#define PCI_ON_NODE1 \
	"      <object type=\"PCIDev\" gp_index=\"30\" pci_busid=\"0000:3b:00.0\" " \
	"pci_type=\"0200 [8086:1521] [8086:0001] 01\" pci_link_speed=\"0.000000\"/>\n"

static char *two_nodes_xml(int mine)
{
	int other = mine == 0 ? 1 : 0;
	unsigned m0 = 1u << mine, m1 = 1u << other, all = m0 | m1;
	char *x = NULL;
	const char *obj = "    <object type=\"Package\" os_index=\"%d\" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" "
			  "nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" gp_index=\"%d1\">\n"
			  "      <object type=\"NUMANode\" os_index=\"%d\" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" "
			  "nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" gp_index=\"%d2\" local_memory=\"1073741824\"/>\n"
			  "      <object type=\"Core\" os_index=\"%d\" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" "
			  "nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" gp_index=\"%d3\">\n"
			  "        <object type=\"PU\" os_index=\"%d\" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" "
			  "nodeset=\"0x%08x\" complete_nodeset=\"0x%08x\" gp_index=\"%d4\"/>\n"
			  "      </object>\n";
	char p0[2048], p1[2048];
	/* Node i's nodeset is bit i; its CPU's bit is the CPU number. */
	snprintf(p0, sizeof(p0), obj, 0, m0, m0, 1u, 1u, 1, 0, m0, m0, 1u, 1u, 1, mine, m0, m0, 1u, 1u, 1, mine, m0, m0, 1u,
		 1u, 1);
	snprintf(p1, sizeof(p1), obj, 1, m1, m1, 2u, 2u, 2, 1, m1, m1, 2u, 2u, 2, other, m1, m1, 2u, 2u, 2, other, m1, m1,
		 2u, 2u, 2);
	if (asprintf(&x,
		     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
		     "<topology version=\"2.0\">\n"
		     "  <object type=\"Machine\" os_index=\"0\" cpuset=\"0x%08x\" complete_cpuset=\"0x%08x\" "
		     "allowed_cpuset=\"0x%08x\" nodeset=\"0x00000003\" complete_nodeset=\"0x00000003\" "
		     "allowed_nodeset=\"0x00000003\" gp_index=\"1\">\n%s    </object>\n%s%s    </object>\n  </object>\n"
		     "  <distances2 type=\"NUMANode\" nbobjs=\"2\" kind=\"5\" indexing=\"os\">\n"
		     "    <indexes length=\"4\">0 1 </indexes>\n    <u64values length=\"12\">10 21 21 10 </u64values>\n"
		     "  </distances2>\n</topology>\n",
		     all, all, all, p0, p1, PCI_ON_NODE1) < 0)
		return NULL;
	return x;
}

/* The first CPU this process may run on, or -1 when it is beyond what the
 * test topology's 32-bit masks can name. */
static int first_cpu(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return -1;
	for (int c = 0; c < 31; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return -1;
}

struct scenario {
	const char *conf[NR];    /* [transport]/[algorithm] text of each rank's file */
	const char *env[NR][6];  /* "NAME=value" per rank */
	int create_rc;           /* what weft_comm_create must return on every rank */
	const char *transport;   /* when it succeeds: what weft_connect(NULL) must choose */
	int connect_rc;          /* what weft_connect(NULL) must return */
	int numa;                /* run on node 0 of a two-NUMA-node hwloc topology (two_nodes_xml) */
	int cpu;                 /* filled by the parent: the CPU of node 0 */
	int nranks;              /* 0: 2 */
	/* After the host connection, a second one for CUDA memory
	 * (weft_connect_mem) must go through this transport (NULL: none made). */
	const char *cuda_transport;
	int rank1_cuda;          /* rank 1 asks its first connection for CUDA memory, rank 0 for host */
	int host_alloc;          /* weft_mem_alloc of host memory must succeed after the connections */
	/* Every pair connects (in one global order); pair_tp[a][b] (a < b) is
	 * what each pair's connection must go through. */
	int all_pairs;
	const char *pair_tp[NR][NR];
	/* filled by the parent */
	char *dir;
	int port;
};

/* Inside a rank: report and fail. */

/* Moves BYTES from each rank to the other through conn and checks them. */
static int move_data(int rank, int peer, weft_comm_t *comm, weft_conn_t *conn)
{
	unsigned char *buf = calloc(2, BYTES);
	RCHECK(buf, "no memory");
	for (int i = 0; i < BYTES; i++)
		buf[i] = (unsigned char)(i * 13 + rank + 1);
	weft_mem_t *mem = NULL;
	weft_rmem_t *rmem = NULL;
	weft_sem_t *sem = NULL;
	weft_rsem_t *rsem = NULL;
	RCHECK(weft_mem_register(comm, buf, 2 * BYTES, WEFT_MEM_HOST, &mem) == 0, "register");
	RCHECK(weft_mem_exchange(mem, peer, &rmem) == 0, "mem exchange");
	RCHECK(weft_sem_create(comm, &sem) == 0 && weft_sem_exchange(sem, peer, &rsem) == 0, "sem");
	RCHECK(weft_put(conn, rmem, BYTES, mem, 0, BYTES) == 0, "put");
	RCHECK(weft_signal(conn, rsem, 1) == 0, "signal");
	RCHECK(weft_flush(conn) == 0, "flush");
	RCHECK(weft_sem_wait(sem, 1) == 0, "wait");
	for (int i = 0; i < BYTES; i++)
		RCHECK(buf[BYTES + i] == (unsigned char)(i * 13 + peer + 1), "byte %d from rank %d is wrong", i, peer);
	/* Both ends of the pair are done before either releases anything. */
	uint32_t done = 1, pdone = 0;
	RCHECK(weft_comm_send(comm, peer, 77, &done, sizeof(done)) == 0 &&
		       weft_comm_recv(comm, peer, 77, &pdone, sizeof(pdone)) == 0,
	       "pair sync");
	weft_rsem_release(rsem);
	weft_sem_destroy(sem);
	weft_rmem_release(rmem);
	weft_mem_deregister(mem);
	free(buf);
	return 0;
}

static int run_rank(int rank, int n, void *arg)
{
	struct scenario *sc = arg;
	char path[4096], root[64];
	/* The log of this rank, for the parent to read. */
	snprintf(path, sizeof(path), "%s/rank%d.log", sc->dir, rank);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || dup2(fd, 2) < 0)
		return 1;
	close(fd);
	snprintf(path, sizeof(path), "%s/rank%d.conf", sc->dir, rank);
	setenv("WEFT_CONFIG", path, 1);
	snprintf(root, sizeof(root), "127.0.0.1:%d", sc->port);
	setenv("WEFT_CORE_BOOTSTRAP_ROOT", root, 1);
	setenv("WEFT_CORE_BOOTSTRAP_SECRET", "test-select-secret", 1);
	for (int i = 0; i < 6 && sc->env[rank][i]; i++)
		putenv((char *)sc->env[rank][i]);
	if (sc->numa) {
		/* hwloc reads this topology as if it were the machine's, and this
		 * process runs on its node 0. */
		snprintf(path, sizeof(path), "%s/topo.xml", sc->dir);
		setenv("HWLOC_XMLFILE", path, 1);
		setenv("HWLOC_THISSYSTEM", "1", 1);
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(sc->cpu, &set);
		RCHECK(sched_setaffinity(0, sizeof(set), &set) == 0, "cannot run on CPU %d", sc->cpu);
	}

	weft_comm_t *comm = NULL;
	int rc = weft_comm_create(NULL, n, rank, &comm);
	RCHECK(rc == sc->create_rc, "weft_comm_create returned %d (%s), expected %d (%s)", rc, weft_strerror(rc),
	       sc->create_rc, weft_strerror(sc->create_rc));
	if (rc != 0) {
		RCHECK(comm == NULL, "comm written on failure");
		return 0;
	}
	if (sc->all_pairs) {
		/* Pairs in one global order, so no rank waits on a pair that waits on it. */
		for (int a = 0; a < n; a++)
			for (int b = a + 1; b < n; b++) {
				if (rank != a && rank != b)
					continue;
				int peer = rank == a ? b : a;
				weft_conn_t *conn = NULL;
				rc = weft_connect(comm, peer, NULL, &conn);
				RCHECK(rc == 0, "weft_connect to rank %d returned %d (%s)", peer, rc, weft_strerror(rc));
				const char *t = weft_conn_transport(conn);
				RCHECK(t && strcmp(t, sc->pair_tp[a][b]) == 0,
				       "the connection of ranks %d and %d went through '%s', expected '%s'", a, b,
				       t ? t : "(null)", sc->pair_tp[a][b]);
				if (move_data(rank, peer, comm, conn) != 0)
					return 1;
				RCHECK(weft_conn_close(conn) == 0, "close");
			}
		RCHECK(weft_comm_destroy(comm) == 0, "destroy");
		return 0;
	}
	weft_conn_t *conn = NULL;
	enum weft_mem_type mem = sc->rank1_cuda && rank == 1 ? WEFT_MEM_CUDA : WEFT_MEM_HOST;
	rc = weft_connect_mem(comm, 1 - rank, NULL, mem, &conn);
	RCHECK(rc == sc->connect_rc, "weft_connect returned %d (%s), expected %d", rc, weft_strerror(rc),
	       sc->connect_rc);
	if (rc == 0) {
		const char *t = weft_conn_transport(conn);
		RCHECK(t && strcmp(t, sc->transport) == 0, "the connection went through '%s', expected '%s'",
		       t ? t : "(null)", sc->transport);
		if (move_data(rank, 1 - rank, comm, conn) != 0)
			return 1;
		RCHECK(weft_conn_close(conn) == 0, "close");
	}
	if (rc == 0 && sc->cuda_transport) {
		/* The transport a connection for device memory gets; the data
		 * moved over it is host memory, which every transport here carries. */
		rc = weft_connect_mem(comm, 1 - rank, NULL, WEFT_MEM_CUDA, &conn);
		RCHECK(rc == 0, "weft_connect_mem(cuda) returned %d (%s)", rc, weft_strerror(rc));
		const char *t = weft_conn_transport(conn);
		RCHECK(t && strcmp(t, sc->cuda_transport) == 0,
		       "the connection for CUDA memory went through '%s', expected '%s'", t ? t : "(null)",
		       sc->cuda_transport);
		if (move_data(rank, 1 - rank, comm, conn) != 0)
			return 1;
		RCHECK(weft_conn_close(conn) == 0, "close");
	}
	if (sc->host_alloc) {
		char *p = NULL;
		rc = weft_mem_alloc(comm, WEFT_MEM_HOST, 1 << 16, (void **)&p);
		RCHECK(rc == 0 && p, "weft_mem_alloc(host) returned %d (%s)", rc, weft_strerror(rc));
		memset(p, 0x5a, 1 << 16);
		RCHECK(weft_mem_free(comm, p) == 0, "weft_mem_free");
	}
	RCHECK(weft_comm_destroy(comm) == 0, "destroy");
	return 0;
}

/* Runs a scenario; returns each rank's log (malloc'd; empty past its rank count) for the caller's checks. */
static void run(struct scenario *sc, char *logs[NR])
{
	sc->dir = wt_mkdtemp("select");
	ck_assert_ptr_nonnull(sc->dir);
	for (int r = 0; r < NR; r++) {
		char name[32];
		snprintf(name, sizeof(name), "rank%d.conf", r);
		free(wt_write_file(sc->dir, name, sc->conf[r] ? sc->conf[r] : ""));
	}
	if (sc->numa) {
		sc->cpu = first_cpu();
		ck_assert_msg(sc->cpu >= 0, "no CPU below 31 to run on");
		char *xml = two_nodes_xml(sc->cpu);
		ck_assert_ptr_nonnull(xml);
		free(wt_write_file(sc->dir, "topo.xml", xml));
		free(xml);
	}
	sc->port = wt_free_port();
	int n = sc->nranks ? sc->nranks : 2;
	int bad = wt_fork_ranks(n, run_rank, sc, TIMEOUT_S);
	for (int r = 0; r < NR; r++) {
		if (r >= n) {
			logs[r] = strdup("");
			continue;
		}
		char path[4096];
		snprintf(path, sizeof(path), "%s/rank%d.log", sc->dir, r);
		logs[r] = wt_read_file(path);
		if (!logs[r])
			logs[r] = strdup("");
		if (bad)
			fprintf(stderr, "---- rank %d log ----\n%s", r, logs[r]);
	}
	ck_assert_msg(bad == 0, "%d rank(s) failed (logs above)", bad);
	wt_rmdir(sc->dir);
	free(sc->dir);
}

static void free_logs(char *logs[NR])
{
	for (int r = 0; r < NR; r++)
		free(logs[r]);
}

/* ------------------------------------------------------------- scoring */
START_TEST(declared_better_wins)
{
	/* 0.05 us and 50 GB/s beat shm's declared 0.2 us and 8 GB/s. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50"}},
			      .transport = "fakefast"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(declared_worse_loses)
{
	/* The same plugin declaring 5 us and 1 GB/s loses to shm. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=5", "WEFT_FAKEFAST_BANDWIDTH_GBPS=1"},
				      {"WEFT_FAKEFAST_LATENCY_US=5", "WEFT_FAKEFAST_BANDWIDTH_GBPS=1"}},
			      .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(declared_reach_counts)
{
	/* The best figures do not help a transport that declares it cannot reach same-host peers. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.01", "WEFT_FAKEFAST_BANDWIDTH_GBPS=100",
				       "WEFT_FAKEFAST_PEER_CLASSES=other-host"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.01", "WEFT_FAKEFAST_BANDWIDTH_GBPS=100",
				       "WEFT_FAKEFAST_PEER_CLASSES=other-host"}},
			      .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(numa_local_device_wins)
{
	/* 0.15 us and 10 GB/s (6.7 us for 64 KiB) beat shm (8.4 us) on this process's own NUMA node... */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_NUMA_NODE=0"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_NUMA_NODE=0"}},
			      .numa = 1, .transport = "fakefast"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(numa_remote_device_loses)
{
	/* ...but not across the socket link: 2.1 times the latency, bandwidth / 2.1 (14 us).
	 * Without hwloc the core cannot know, and the declared figures alone decide. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_NUMA_NODE=1"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_NUMA_NODE=1"}},
#ifdef TS_HWLOC
			      .numa = 1, .transport = "shm"};
#else
			      .numa = 1, .transport = "fakefast"};
#endif
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(numa_remote_by_pci_path_loses)
{
	/* The device says only where it sits on PCI; hwloc places that on node 1. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_PCI_PATH=0000:3b:00.0"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.15", "WEFT_FAKEFAST_BANDWIDTH_GBPS=10",
				       "WEFT_FAKEFAST_PCI_PATH=0000:3b:00.0"}},
#ifdef TS_HWLOC
			      .numa = 1, .transport = "shm"};
#else
			      .numa = 1, .transport = "fakefast"};
#endif
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(connect_failure_falls_back)
{
	/* fakefast wins on score but its connect fails on both ends: both fall back to shm, and say so. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50",
				       "WEFT_FAKEFAST_FAIL_CONNECT=1"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50",
				       "WEFT_FAKEFAST_FAIL_CONNECT=1"}},
			      .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "fakefast failed between this rank and rank") &&
				      strstr(logs[r], "both fall back to the next transport"),
			      "rank %d did not log the fall-back:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(connect_failure_of_pinned_is_an_error)
{
	/* 'use fakefast' pins it: its connect failure is reported, never replaced. */
	struct scenario sc = {.conf = {"[transport]\nuse fakefast\n", "[transport]\nuse fakefast\n"},
			      .env = {{"WEFT_FAKEFAST_FAIL_CONNECT=1"}, {"WEFT_FAKEFAST_FAIL_CONNECT=1"}},
			      .connect_rc = -EIO};
	char *logs[NR];
	run(&sc, logs);
	ck_assert_msg(strstr(logs[0], "transport fakefast: connecting to rank 1 failed"), "rank 0:\n%s", logs[0]);
	free_logs(logs);
}
END_TEST

/* --------------------------------------------------------------- rules */
START_TEST(use_rule_beats_score)
{
	/* shm scores best for same-host peers; the rule puts ofi first. */
	const char *conf = "[transport]\nuse ofi when peer=same-host and mem=host\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(rule_for_other_class_ignored)
{
	/* A rule about other-host peers leaves same-host peers to the scores. */
	const char *conf = "[transport]\nrequire ofi when peer=other-host\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(forbid_rule)
{
	/* Without shm (and without the test plugin) the next by score and name is ofi. */
	const char *conf = "[transport]\nforbid shm\nforbid fakefast\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(require_ucx)
{
	const char *conf = "[transport]\nrequire ucx\n";
	struct scenario sc = {.conf = {conf, conf}, .env = {{"WEFT_UCX_NET_DEVICES=lo"}, {"WEFT_UCX_NET_DEVICES=lo"}},
			      .transport = "ucx"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(require_missing_fails_creation)
{
	const char *conf = "[transport]\nrequire tcpx when peer=same-host\n";
	struct scenario sc = {.conf = {conf, conf}, .create_rc = -WEFT_ERR_PLUGIN};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "transport 'tcpx' is required") &&
				      strstr(logs[r], "it is not installed (no libweft-tcpx.so"),
			      "rank %d did not name the missing transport:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(require_forbidden_fails_connect)
{
	const char *conf = "[transport]\nforbid ofi\nrequire ofi\n";
	struct scenario sc = {.conf = {conf, conf}, .connect_rc = -WEFT_ERR_CONFIG};
	char *logs[NR];
	run(&sc, logs);
	ck_assert_msg(strstr(logs[0], "transport 'ofi' is required") && strstr(logs[0], "and forbidden"), "rank 0:\n%s",
		      logs[0]);
	free_logs(logs);
}
END_TEST

START_TEST(misspelled_name_fails_creation)
{
	/* 'use ucxx' names nothing: creation fails, and the error suggests ucx. */
	const char *conf = "[transport]\nuse ucxx\n";
	struct scenario sc = {.conf = {conf, conf}, .create_rc = -WEFT_ERR_CONFIG};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "[transport] names 'ucxx', which is no transport; did you mean 'ucx'?"),
			      "rank %d gave no suggestion:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

/* ------------------------------------------------------- memory types */
START_TEST(mem_rule_only_for_mem_typed)
{
	/* A mem=cuda rule changes the choice for a connection made for CUDA
	 * memory only: the host connection still goes to shm on score. */
	const char *conf = "[transport]\nuse ofi when mem=cuda\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "shm", .cuda_transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(mem_scores_per_type)
{
	/* fakefast declares its device reaches CUDA memory only, with the best
	 * figures: it wins the CUDA connection and, unreachable for host
	 * memory, loses the host one to shm. */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50",
				       "WEFT_FAKEFAST_MEM_TYPES=cuda"},
				      {"WEFT_FAKEFAST_LATENCY_US=0.05", "WEFT_FAKEFAST_BANDWIDTH_GBPS=50",
				       "WEFT_FAKEFAST_MEM_TYPES=cuda"}},
			      .transport = "shm", .cuda_transport = "fakefast"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(host_alloc_asks_declaring_transport_first)
{
	/* fakefast declares CUDA memory only and fails every allocation: host
	 * memory must come from shm, which declares host memory, as a GPU
	 * transport's pinned host memory must not serve where shm's segments do
	 * (the peers cannot map it). */
	struct scenario sc = {.env = {{"WEFT_FAKEFAST_MEM_TYPES=cuda", "WEFT_FAKEFAST_FAIL_ALLOC=1"},
				      {"WEFT_FAKEFAST_MEM_TYPES=cuda", "WEFT_FAKEFAST_FAIL_ALLOC=1"}},
			      .transport = "shm", .host_alloc = 1};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(mem_type_mismatch_fails_connect)
{
	/* Rank 0 asks for host memory, rank 1 for CUDA memory: both fail, saying so. */
	struct scenario sc = {.rank1_cuda = 1, .connect_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	ck_assert_msg(strstr(logs[0], "rank 1 asked for a connection for cuda memory but this rank for host memory"),
		      "rank 0:\n%s", logs[0]);
	ck_assert_msg(strstr(logs[1], "rank 0 asked for a connection for host memory but this rank for cuda memory"),
		      "rank 1:\n%s", logs[1]);
	free_logs(logs);
}
END_TEST

/* ----------------------------------------------------------- GPU links */
/* Ranks 0 and 1 on GPUs joined by four NVLinks, rank 2 on a GPU without links. */
#define NVML_R0 "WEFT_TEST_FAKE_NVML=gpu=0000:01:00.0 link=0000:02:00.0*4"
#define NVML_R1 "WEFT_TEST_FAKE_NVML=gpu=0000:02:00.0 link=0000:01:00.0*4"
#define NVML_R2 "WEFT_TEST_FAKE_NVML=gpu=0000:03:00.0"

START_TEST(gpu_link_rule_applies)
{
	/* 'use ofi when peer=same-gpu-link' serves the NVLink-joined pair only;
	 * the other pairs are plain same-host peers and get shm on score. */
	const char *conf = "[transport]\nuse ofi when peer=same-gpu-link\n";
	struct scenario sc = {.conf = {conf, conf, conf}, .env = {{NVML_R0}, {NVML_R1}, {NVML_R2}}, .nranks = 3,
			      .all_pairs = 1};
	sc.pair_tp[0][1] = "ofi";
	sc.pair_tp[0][2] = "shm";
	sc.pair_tp[1][2] = "shm";
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(gpu_link_through_switch)
{
	/* GPUs whose links go to NVSwitch are joined through it. */
	const char *conf = "[transport]\nuse ofi when peer=same-gpu-link\n";
	struct scenario sc = {.conf = {conf, conf},
			      .env = {{"WEFT_TEST_FAKE_NVML=gpu=0000:01:00.0 switch=18 version=4"},
				      {"WEFT_TEST_FAKE_NVML=gpu=0000:02:00.0 switch=18 version=4"}},
			      .transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(same_host_rule_covers_gpu_link)
{
	/* A GPU-linked peer is on this host: a same-host rule still applies to it. */
	const char *conf = "[transport]\nuse ofi when peer=same-host\n";
	struct scenario sc = {.conf = {conf, conf}, .env = {{NVML_R0}, {NVML_R1}}, .transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(no_gpu_no_gpu_link)
{
	/* Without GPU facts (no hook, no CUDA in this process) no peer is
	 * same-gpu-link, so the rule never applies. */
	const char *conf = "[transport]\nuse ofi when peer=same-gpu-link\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(bad_fake_nvml_warns)
{
	/* A malformed hook is named in a warning, and the rank has no GPU facts. */
	const char *conf = "[transport]\nuse ofi when peer=same-gpu-link\n";
	struct scenario sc = {.conf = {conf, conf},
			      .env = {{"WEFT_TEST_FAKE_NVML=gpu=0000:01:00.0 link=0000:02:00.0"}, {NVML_R1}},
			      .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	ck_assert_msg(strstr(logs[0], "WEFT_TEST_FAKE_NVML: cannot read 'link=0000:02:00.0'"), "rank 0:\n%s", logs[0]);
	free_logs(logs);
}
END_TEST

/* fakefast declaring an NVLink device with 7 us and no bandwidth: scored on
 * NVML's link count it takes 7 + 64 KiB / (links x 25 GB/s): 7.66 us for
 * four links, beating shm's 8.39 us, and 9.62 us for one, losing to it. */
#define NVLINK_FF "WEFT_FAKEFAST_LINK=nvlink", "WEFT_FAKEFAST_LATENCY_US=7"

START_TEST(nvlink_scored_by_link_count_four)
{
	struct scenario sc = {.env = {{NVML_R0, NVLINK_FF}, {NVML_R1, NVLINK_FF}}, .transport = "fakefast"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

START_TEST(nvlink_scored_by_link_count_one)
{
	struct scenario sc = {.env = {{"WEFT_TEST_FAKE_NVML=gpu=0000:01:00.0 link=0000:02:00.0*1", NVLINK_FF},
				      {"WEFT_TEST_FAKE_NVML=gpu=0000:02:00.0 link=0000:01:00.0*1", NVLINK_FF}},
			      .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

/* --------------------------------------------------------- consistency */
START_TEST(different_rules_fail_creation)
{
	struct scenario sc = {.conf = {"[transport]\nuse ofi\n", ""}, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "ranks differ in configuration") &&
				      strstr(logs[r], "[transport] rule 1 is 'use ofi' on rank 0 but absent on rank 1"),
			      "rank %d did not name the difference:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(third_rank_differs)
{
	/* Three ranks, only the last differs: every rank, also rank 1 which agrees
	 * with rank 0, fails and names rank 2's difference. */
	struct scenario sc = {.conf = {"[transport]\nprefer ofi\n", "[transport]\nprefer ofi\n",
				       "[transport]\nprefer ucx\n"},
			      .nranks = 3, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 3; r++)
		ck_assert_msg(strstr(logs[r], "[transport] rule 1 is 'prefer ofi' on rank 0 but 'prefer ucx' on rank 2"),
			      "rank %d did not name the difference:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(different_params_fail_creation)
{
	/* An algorithm pack's parameter from the environment, on one rank only. */
	struct scenario sc = {.env = {{"WEFT_ALGO_HOST_TRANSPORT=ofi"}, {NULL}}, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "param algo-host.transport is 'ofi' on rank 0 but '(unset)' on rank 1"),
			      "rank %d did not name the difference:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(different_check_calls_fail_creation)
{
	/* A rank that compares call signatures would wait for a peer's that a
	 * rank with the check off never sends: the ranks must agree. */
	struct scenario sc = {.env = {{"WEFT_CORE_CHECK_CALLS=0"}, {NULL}}, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "param core.check_calls is '0' on rank 0 but '"),
			      "rank %d did not name the difference:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(different_plugin_sets_fail_creation)
{
	/* Rank 1 does not search the folder with the test plugin. */
	struct scenario sc = {.env = {{NULL}, {"WEFT_PLUGIN_PATH="}}, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++)
		ck_assert_msg(strstr(logs[r], "plugin fakefast is 'transport, ABI ") &&
				      strstr(logs[r], "' on rank 0 but absent on rank 1"),
			      "rank %d did not name the difference:\n%s", r, logs[r]);
	free_logs(logs);
}
END_TEST

START_TEST(same_plugin_build_elsewhere_passes)
{
	/* Rank 1 loads an identical copy of the test plugin from another folder:
	 * the same build, so creation succeeds. */
	struct scenario sc = {.env = {{NULL}, {"WEFT_PLUGIN_PATH=" TS_PLUGINS_COPY}}, .transport = "shm"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

/* The two quoted values of the "plugin fakefast" difference in log, or 0. */
static int plugin_diff(const char *log, char *v0, char *v1, size_t len)
{
	const char *l = strstr(log, "ranks disagree: plugin fakefast is '");
	if (!l)
		return 0;
	l += strlen("ranks disagree: plugin fakefast is '");
	const char *e = strstr(l, "' on rank 0 but '");
	if (!e || (size_t)(e - l) >= len)
		return 0;
	snprintf(v0, len, "%.*s", (int)(e - l), l);
	l = e + strlen("' on rank 0 but '");
	e = strstr(l, "' on rank 1");
	if (!e || (size_t)(e - l) >= len)
		return 0;
	snprintf(v1, len, "%.*s", (int)(e - l), l);
	return 1;
}

START_TEST(different_plugin_builds_fail_creation)
{
	/* Rank 1 loads another build of the test plugin (one constant differs):
	 * every rank fails and names the plugin and both builds. */
	struct scenario sc = {.env = {{NULL}, {"WEFT_PLUGIN_PATH=" TS_PLUGINS_B}}, .create_rc = -WEFT_ERR_MISMATCH};
	char *logs[NR];
	run(&sc, logs);
	for (int r = 0; r < 2; r++) {
		char v0[512], v1[512];
		ck_assert_msg(plugin_diff(logs[r], v0, v1, sizeof(v0)), "rank %d did not name the plugin:\n%s", r, logs[r]);
		ck_assert_msg(strstr(v0, "transport, ABI ") && strstr(v1, "transport, ABI "), "rank %d: '%s' / '%s'", r, v0,
			      v1);
		const char *i0 = strstr(v0, "build-id ") ? strstr(v0, "build-id ") : strstr(v0, "file sha256 ");
		const char *i1 = strstr(v1, "build-id ") ? strstr(v1, "build-id ") : strstr(v1, "file sha256 ");
		ck_assert_msg(i0 && i1 && strcmp(i0, i1) != 0, "rank %d: the builds are not named apart: '%s' / '%s'", r,
			      v0, v1);
	}
	free_logs(logs);
}
END_TEST

START_TEST(one_rank_missing_required_fails_all)
{
	/* Only rank 1 lacks the required transport; both fail, and rank 0 says why. */
	const char *conf = "[transport]\nrequire fakefast\n";
	struct scenario sc = {.conf = {conf, conf}, .env = {{NULL}, {"WEFT_PLUGIN_PATH="}},
			      .create_rc = -WEFT_ERR_PLUGIN};
	char *logs[NR];
	run(&sc, logs);
	ck_assert_msg(strstr(logs[0], "rank 1 could not set up: transport 'fakefast' is required"), "rank 0:\n%s",
		      logs[0]);
	ck_assert_msg(strstr(logs[1], "transport 'fakefast' is required") && strstr(logs[1], "not installed"),
		      "rank 1:\n%s", logs[1]);
	free_logs(logs);
}
END_TEST

/* ------------------------------------------------- weft-info under a launcher */
static int port_for_info;

static int info_rank(int rank, int n, void *arg)
{
	(void)arg;
	char cmd[8192];
	snprintf(cmd, sizeof(cmd),
		 "RANK=%d WORLD_SIZE=%d WEFT_CORE_BOOTSTRAP_ROOT=127.0.0.1:%d WEFT_CORE_BOOTSTRAP_SECRET=s3 "
		 "WEFT_FAKEFAST_LATENCY_US=0.05 WEFT_FAKEFAST_BANDWIDTH_GBPS=50 '%s' --select 2>&1",
		 rank, n, port_for_info, TS_WEFT_INFO);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	RCHECK(out, "no output");
	char want[256];
	snprintf(want, sizeof(want), "  rank %d of %d:\n  peer %d (same-host):\n    1. fakefast score ", rank, n,
		 1 - rank);
	RCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want), "weft-info --select gave:\n%s", out);
	/* weft-info never loads CUDA, so without the test hook it knows no GPU. */
	snprintf(want, sizeof(want),
		 "  GPU links of rank %d: none known (this process has not loaded CUDA); 0 peer(s) joined by NVLink\n",
		 rank);
	RCHECK(strstr(out, want), "weft-info --select gave:\n%s", out);
	free(out);
	return 0;
}

START_TEST(info_select_under_launcher)
{
	port_for_info = wt_free_port();
	ck_assert_int_eq(wt_fork_ranks(2, info_rank, NULL, TIMEOUT_S), 0);
}
END_TEST

/* weft-info --select under a launcher, each rank with fake GPU facts: the
 * peer is shown as same-gpu-link with its link count, and the fakefast test
 * plugin, declaring an NVLink device, is scored by that count. */
static int info_gpu_rank(int rank, int n, void *arg)
{
	(void)arg;
	char cmd[8192];
	snprintf(cmd, sizeof(cmd),
		 "RANK=%d WORLD_SIZE=%d WEFT_CORE_BOOTSTRAP_ROOT=127.0.0.1:%d WEFT_CORE_BOOTSTRAP_SECRET=s3 "
		 "WEFT_TEST_FAKE_NVML='gpu=0000:0%d:00.0 link=0000:0%d:00.0*4' WEFT_FAKEFAST_LINK=nvlink "
		 "WEFT_FAKEFAST_LATENCY_US=7 '%s' --select 2>&1",
		 rank, n, port_for_info, rank + 1, 2 - rank, TS_WEFT_INFO);
	int st = 0;
	char *out = wt_run_capture(cmd, &st);
	RCHECK(out, "no output");
	char want[512];
	snprintf(want, sizeof(want),
		 "  GPU links of rank %d: from the test hook WEFT_TEST_FAKE_NVML='gpu=0000:0%d:00.0 "
		 "link=0000:0%d:00.0*4'; 1 peer(s) joined by NVLink\n  rank %d of %d:\n"
		 "  peer %d (same-gpu-link: 4 NVLink(s)):\n    1. fakefast score 7.66 us for 64 KiB: device fake0 "
		 "(nvlink), latency 7 us, 100 GB/s (4 NVLinks x 25 GB/s, NVML)",
		 rank, rank + 1, 2 - rank, rank, n, 1 - rank);
	RCHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, want), "weft-info --select gave:\n%s\nwanted:\n%s",
	       out, want);
	free(out);
	return 0;
}

START_TEST(info_select_gpu_link_under_launcher)
{
	port_for_info = wt_free_port();
	ck_assert_int_eq(wt_fork_ranks(2, info_gpu_rank, NULL, TIMEOUT_S), 0);
}
END_TEST

START_TEST(same_config_passes)
{
	/* The same non-empty config on both: creation succeeds (and the rule applies). */
	const char *conf = "[transport]\nprefer ofi\n[algorithm]\nprefer algo-host/allreduce-rsag when coll=allreduce\n";
	struct scenario sc = {.conf = {conf, conf}, .transport = "ofi"};
	char *logs[NR];
	run(&sc, logs);
	free_logs(logs);
}
END_TEST

int main(void)
{
	setenv("WEFT_CORE_PEER_TIMEOUT", "5", 0);
	setenv("WEFT_CORE_BOOTSTRAP_TIMEOUT", "20", 0);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	Suite *s = suite_create("select");
	TCase *tc = tcase_create("select");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, declared_better_wins);
	tcase_add_test(tc, declared_worse_loses);
	tcase_add_test(tc, declared_reach_counts);
	tcase_add_test(tc, numa_local_device_wins);
	tcase_add_test(tc, numa_remote_device_loses);
	tcase_add_test(tc, numa_remote_by_pci_path_loses);
	tcase_add_test(tc, connect_failure_falls_back);
	tcase_add_test(tc, connect_failure_of_pinned_is_an_error);
	tcase_add_test(tc, use_rule_beats_score);
	tcase_add_test(tc, rule_for_other_class_ignored);
	tcase_add_test(tc, forbid_rule);
	tcase_add_test(tc, require_ucx);
	tcase_add_test(tc, require_missing_fails_creation);
	tcase_add_test(tc, require_forbidden_fails_connect);
	tcase_add_test(tc, misspelled_name_fails_creation);
	tcase_add_test(tc, different_rules_fail_creation);
	tcase_add_test(tc, different_params_fail_creation);
	tcase_add_test(tc, different_check_calls_fail_creation);
	tcase_add_test(tc, third_rank_differs);
	tcase_add_test(tc, different_plugin_sets_fail_creation);
	tcase_add_test(tc, one_rank_missing_required_fails_all);
	tcase_add_test(tc, info_select_under_launcher);
	tcase_add_test(tc, info_select_gpu_link_under_launcher);
	tcase_add_test(tc, mem_rule_only_for_mem_typed);
	tcase_add_test(tc, mem_scores_per_type);
	tcase_add_test(tc, host_alloc_asks_declaring_transport_first);
	tcase_add_test(tc, mem_type_mismatch_fails_connect);
	tcase_add_test(tc, gpu_link_rule_applies);
	tcase_add_test(tc, gpu_link_through_switch);
	tcase_add_test(tc, same_host_rule_covers_gpu_link);
	tcase_add_test(tc, no_gpu_no_gpu_link);
	tcase_add_test(tc, bad_fake_nvml_warns);
	tcase_add_test(tc, nvlink_scored_by_link_count_four);
	tcase_add_test(tc, nvlink_scored_by_link_count_one);
	tcase_add_test(tc, same_plugin_build_elsewhere_passes);
	tcase_add_test(tc, different_plugin_builds_fail_creation);
	tcase_add_test(tc, same_config_passes);
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
