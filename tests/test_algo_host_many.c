/* SPDX-License-Identifier: Apache-2.0 */
/* algo-host's log-step algorithms (allreduce-rd, allgather-bruck,
 * alltoall-bruck, reduce-scatter-halving, broadcast-tree, reduce-tree), each
 * forced by an [algorithm] require rule, at 3, 5, 6, 8, 12 and 16 forked
 * ranks over shm:
 * every type and reduction, in place and out of place, odd counts, small
 * chunks so that messages span many of them and slots are reused. Inputs
 * are small integers whose results are exact in every type whatever the
 * order of the reduction, so each output is compared bit for bit with a
 * reference computed here; the bytes after each output must stay as they
 * were. With 6 and 12 ranks the ranks are bound to CPUs 0 and 1 in turn and
 * hwloc reads tests/topo_two_numa.xml, which puts those CPUs on two NUMA
 * nodes: the algorithms then number the ranks node by node. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/kit.h>
#include <weft/weft.h>

#include "testlib.h"

static struct weft_unique_id g_id;
static int g_numa; /* bind ranks to CPUs 0 and 1 in turn */

#define GUARD 64

static const enum weft_datatype all_types[] = {
	WEFT_INT8,    WEFT_UINT8,   WEFT_INT32,   WEFT_UINT32,   WEFT_INT64,    WEFT_UINT64,
	WEFT_FLOAT16, WEFT_BFLOAT16, WEFT_FLOAT32, WEFT_FLOAT64, WEFT_FP8_E4M3, WEFT_FP8_E5M2,
};
#define NTYPES (sizeof(all_types) / sizeof(all_types[0]))
static const enum weft_redop all_ops[] = {WEFT_SUM, WEFT_PROD, WEFT_MIN, WEFT_MAX, WEFT_AVG, WEFT_PREMUL_SUM};

static void put(enum weft_datatype t, void *b, size_t i, double v)
{
	switch (t) {
	case WEFT_INT8: ((int8_t *)b)[i] = (int8_t)v; break;
	case WEFT_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
	case WEFT_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
	case WEFT_UINT32: ((uint32_t *)b)[i] = (uint32_t)v; break;
	case WEFT_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
	case WEFT_UINT64: ((uint64_t *)b)[i] = (uint64_t)v; break;
	case WEFT_FLOAT16: ((uint16_t *)b)[i] = weft_kit_float_to_half((float)v); break;
	case WEFT_BFLOAT16: ((uint16_t *)b)[i] = weft_kit_float_to_bf16((float)v); break;
	case WEFT_FLOAT32: ((float *)b)[i] = (float)v; break;
	case WEFT_FLOAT64: ((double *)b)[i] = v; break;
	case WEFT_FP8_E4M3: ((uint8_t *)b)[i] = weft_kit_float_to_fp8_e4m3((float)v); break;
	default: ((uint8_t *)b)[i] = weft_kit_float_to_fp8_e5m2((float)v); break;
	}
}

/* Rank r's element i for op: small integers, so that every partial result of
 * any order is exact in every type (sums up to 8, products up to 16). */
static double val(enum weft_redop op, int r, size_t i, int k)
{
	int on = (int)((i + (size_t)r + (size_t)k) % 4) == 0;
	switch (op) {
	case WEFT_PROD: return on ? 2 : 1;
	case WEFT_MIN: case WEFT_MAX: return (double)((i * 3 + (size_t)r * 5 + (size_t)k) % 7);
	default: return on;
	}
}

/* Rank r's scalar of a pre-multiplied sum. */
static double scal(int r)
{
	return 1 + r % 2;
}

/* The reduction of element i over n ranks, as bytes of t at out[i]. */
static void expect(enum weft_datatype t, enum weft_redop op, int n, size_t i, int k, void *out)
{
	double acc = val(op, 0, i, k) * (op == WEFT_PREMUL_SUM ? scal(0) : 1);
	for (int r = 1; r < n; r++) {
		double x = val(op, r, i, k) * (op == WEFT_PREMUL_SUM ? scal(r) : 1);
		acc = op == WEFT_PROD ? acc * x : op == WEFT_MIN ? (x < acc ? x : acc) : op == WEFT_MAX ? (x > acc ? x : acc) : acc + x;
	}
	put(t, out, 0, acc);
	weft_kit_finish(t, op, out, 1, n);
}

struct call {
	const char *algo, *what;
	enum weft_datatype t;
	enum weft_redop op;
	size_t count;
	int inplace, root;
};

static int bad_call(int rank, const struct call *c, const char *why, size_t at)
{
	fprintf(stderr, "rank %d: %s %s type %d op %d count %zu %s root %d: %s (element %zu)\n", rank, c->algo, c->what,
		(int)c->t, (int)c->op, c->count, c->inplace ? "in place" : "out of place", c->root, why, at);
	return 1;
}

static int guard_ok(const unsigned char *g)
{
	for (int i = 0; i < GUARD; i++)
		if (g[i] != 0x5a)
			return 0;
	return 1;
}

static int named(weft_comm_t *comm, const char *algo)
{
	const char *last = weft_info_last_algorithm(comm);
	return last && strstr(last, algo);
}

/* Reducing collectives: allreduce, reduce-scatter, reduce. */
static int reducing(weft_comm_t *comm, int rank, int n, struct call *c, int k)
{
	size_t es = weft_kit_datatype_size(c->t);
	int rs = !strcmp(c->what, "reduce_scatter");
	size_t in_n = rs ? c->count * (size_t)n : c->count, out_n = c->count;
	unsigned char *in = malloc(in_n * es + GUARD), *out = malloc(in_n * es + GUARD), want[8], sc[8];
	if (!in || !out)
		return bad_call(rank, c, "out of memory", 0);
	memset(out, 0xa5, in_n * es);
	memset(out + (c->inplace ? in_n : out_n) * es, 0x5a, GUARD);
	unsigned char *src = c->inplace ? out : in;
	unsigned char *dst = c->inplace && rs ? out + (size_t)rank * c->count * es : out;
	for (size_t i = 0; i < in_n; i++)
		put(c->t, src, i, val(c->op, rank, i, k));
	put(c->t, sc, 0, scal(rank));
	int rc, pm = c->op == WEFT_PREMUL_SUM;
	if (!strcmp(c->what, "allreduce"))
		rc = pm ? weft_allreduce_premul(src, dst, c->count, c->t, sc, WEFT_MEM_HOST, comm, NULL)
			: weft_allreduce(src, dst, c->count, c->t, c->op, comm, NULL);
	else if (rs)
		rc = pm ? weft_reduce_scatter_premul(src, dst, c->count, c->t, sc, WEFT_MEM_HOST, comm, NULL)
			: weft_reduce_scatter(src, dst, c->count, c->t, c->op, comm, NULL);
	else
		rc = pm ? weft_reduce_premul(src, dst, c->count, c->t, sc, WEFT_MEM_HOST, c->root, comm, NULL)
			: weft_reduce(src, dst, c->count, c->t, c->op, c->root, comm, NULL);
	int bad = 0;
	if (rc)
		bad = bad_call(rank, c, weft_strerror(rc), 0);
	else if (!named(comm, c->algo))
		bad = bad_call(rank, c, "another algorithm ran", 0);
	else if (!guard_ok(out + (c->inplace ? in_n : out_n) * es))
		bad = bad_call(rank, c, "bytes after the output changed", 0);
	for (size_t i = 0; !bad && i < out_n && (strcmp(c->what, "reduce") || rank == c->root); i++) {
		expect(c->t, c->op, n, rs ? (size_t)rank * c->count + i : i, k, want);
		if (memcmp(dst + i * es, want, es))
			bad = bad_call(rank, c, "wrong result", i);
	}
	free(in);
	free(out);
	return bad;
}

/* Byte j of rank r's block for rank q (alltoall; q is 0 otherwise). */
static unsigned char cbyte(size_t j, int r, int q, int k)
{
	return (unsigned char)(j * 7 + (size_t)r * 31 + (size_t)q * 17 + (size_t)k);
}

/* Allgather, alltoall and broadcast: copies, checked byte for byte. */
static int copying(weft_comm_t *comm, int rank, int n, struct call *c, int k)
{
	size_t es = weft_kit_datatype_size(c->t), bytes = c->count * es;
	int ag = !strcmp(c->what, "allgather"), a2a = !strcmp(c->what, "alltoall");
	size_t in_b = a2a ? bytes * (size_t)n : bytes, out_b = ag || a2a ? bytes * (size_t)n : bytes;
	unsigned char *in = malloc(in_b + GUARD), *out = malloc(out_b + GUARD);
	if (!in || !out)
		return bad_call(rank, c, "out of memory", 0);
	memset(out, 0xa5, out_b);
	memset(out + out_b, 0x5a, GUARD);
	unsigned char *src = c->inplace ? (ag ? out + (size_t)rank * bytes : out) : in;
	for (size_t i = 0; i < in_b; i++)
		src[i] = cbyte(i % bytes, rank, a2a ? (int)(i / bytes) : 0, k);
	int rc = ag ? weft_allgather(src, out, c->count, c->t, comm, NULL)
		 : a2a ? weft_alltoall(src, out, c->count, c->t, comm, NULL)
		       : weft_broadcast(src, out, c->count, c->t, c->root, comm, NULL);
	int bad = 0;
	if (rc)
		bad = bad_call(rank, c, weft_strerror(rc), 0);
	else if (!named(comm, c->algo))
		bad = bad_call(rank, c, "another algorithm ran", 0);
	else if (!guard_ok(out + out_b))
		bad = bad_call(rank, c, "bytes after the output changed", 0);
	for (size_t i = 0; !bad && i < out_b; i++) {
		int r = ag || a2a ? (int)(i / bytes) : c->root;
		if (out[i] != cbyte(i % bytes, r, a2a ? rank : 0, k))
			bad = bad_call(rank, c, "wrong byte", i);
	}
	free(in);
	free(out);
	return bad;
}

static const char *const reducers[][2] = {
	{"allreduce-rd", "allreduce"},
	{"reduce-scatter-halving", "reduce_scatter"},
	{"reduce-tree", "reduce"},
};
static const char *const copiers[][2] = {
	{"allgather-bruck", "allgather"},
	{"broadcast-tree", "broadcast"},
	{"alltoall-bruck", "alltoall"},
};

static int matrix(weft_comm_t *comm, int rank, int n)
{
	int k = 0, bad = 0;
	/* Every type and reduction, odd counts: one element, a few, and one
	 * that spans several 4160-byte chunks for the wider types. */
	static const size_t small[] = {1, 7, 1031};
	for (size_t a = 0; a < 3; a++)
		for (size_t t = 0; t < NTYPES; t++)
			for (size_t o = 0; o < sizeof(all_ops) / sizeof(all_ops[0]); o++)
				for (size_t s = 0; s < 3; s++)
					for (int ip = 0; ip < 2; ip++, k++) {
						struct call c = {reducers[a][0], reducers[a][1], all_types[t], all_ops[o],
								 small[s], ip, k % n};
						if ((bad = reducing(comm, rank, n, &c, k)))
							return bad;
					}
	static const enum weft_datatype ctypes[] = {WEFT_INT8, WEFT_FLOAT16, WEFT_FLOAT32, WEFT_FLOAT64};
	for (size_t a = 0; a < 3; a++)
		for (size_t t = 0; t < 4; t++)
			for (size_t s = 0; s < 3; s++)
				for (int ip = 0; ip < 2; ip++, k++) {
					struct call c = {copiers[a][0], copiers[a][1], ctypes[t], WEFT_SUM, small[s], ip, k % n};
					if ((bad = copying(comm, rank, n, &c, k)))
						return bad;
				}
	/* Larger messages: up to 64 KiB (bytes as selection counts them) at
	 * every rank count, 256 KiB up to 8 ranks. */
	size_t big = n <= 8 ? 65537 : 16385;
	for (size_t count = 4099; count <= big; count = count * 4 - 3)
		for (int ip = 0; ip < 2; ip++, k++) {
			for (size_t a = 0; a < 3; a++) {
				size_t cnt = !strcmp(reducers[a][1], "reduce_scatter") ? count / (size_t)n + 1 : count;
				struct call c = {reducers[a][0], reducers[a][1], WEFT_FLOAT32, WEFT_SUM, cnt, ip, k % n};
				if ((bad = reducing(comm, rank, n, &c, k)))
					return bad;
			}
			for (size_t a = 0; a < 3; a++) {
				size_t cnt = !strcmp(copiers[a][1], "broadcast") ? count : count / (size_t)n + 1;
				struct call c = {copiers[a][0], copiers[a][1], WEFT_FLOAT32, WEFT_SUM, cnt, ip, k % n};
				if ((bad = copying(comm, rank, n, &c, k)))
					return bad;
			}
		}
	return 0;
}

static int rank_main(int rank, int n, void *arg)
{
	(void)arg;
	if (g_numa) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(rank % 2, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0)
			return 2;
	}
	weft_comm_t *comm = NULL;
	if (weft_comm_create(&g_id, n, rank, &comm) != 0)
		return 1;
	int rc = matrix(comm, rank, n);
	/* A failing rank leaves without destroying its comm: the peers then see a
	 * dead peer instead of waiting for it. */
	if (rc)
		return 10 + rc;
	return weft_comm_destroy(comm) == 0 ? 0 : 3;
}

static void run(int n, int numa)
{
	cpu_set_t set;
	g_numa = numa && sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_ISSET(0, &set) && CPU_ISSET(1, &set);
	if (g_numa) {
		setenv("HWLOC_XMLFILE", TT_TWO_NUMA, 1);
		setenv("HWLOC_THISSYSTEM", "1", 1);
	}
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	int bad = wt_fork_ranks(n, rank_main, NULL, 240);
	unsetenv("HWLOC_XMLFILE");
	unsetenv("HWLOC_THISSYSTEM");
	ck_assert_msg(bad == 0, "%d of %d ranks failed", bad, n);
}

START_TEST(np3) { run(3, 0); }
END_TEST
START_TEST(np5) { run(5, 0); }
END_TEST
START_TEST(np6_two_numa) { run(6, 1); }
END_TEST
START_TEST(np8) { run(8, 0); }
END_TEST
START_TEST(np12_two_numa) { run(12, 1); }
END_TEST
START_TEST(np16) { run(16, 0); }
END_TEST

int main(void)
{
	static char conf[] = "/tmp/weft-algo-host-many-XXXXXX";
	int fd = mkstemp(conf);
	if (fd < 0)
		return 1;
	static const char rules[] = "[algorithm]\n"
				    "require algo-host/allreduce-rd when coll=allreduce\n"
				    "require algo-host/allgather-bruck when coll=allgather\n"
				    "require algo-host/reduce-scatter-halving when coll=reduce_scatter\n"
				    "require algo-host/broadcast-tree when coll=broadcast\n"
				    "require algo-host/reduce-tree when coll=reduce\n"
				    "require algo-host/alltoall-bruck when coll=alltoall\n";
	if (write(fd, rules, sizeof(rules) - 1) != (ssize_t)(sizeof(rules) - 1))
		return 1;
	close(fd);
	setenv("WEFT_CONFIG", conf, 1);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 1);
	setenv("WEFT_ALGO_HOST_TRANSPORT", "shm", 1);
	setenv("WEFT_CORE_PEER_TIMEOUT", "30", 1);
	/* Every size and rank count, in chunks of 4160 bytes (not a power of
	 * two) through three slots per peer. */
	setenv("WEFT_ALGO_HOST_MANY_RANKS", "1", 1);
	setenv("WEFT_ALGO_HOST_RD_MAX", "1G", 1);
	setenv("WEFT_ALGO_HOST_BRUCK_MAX", "1G", 1);
	setenv("WEFT_ALGO_HOST_HALVING_MAX", "1G", 1);
	setenv("WEFT_ALGO_HOST_A2A_BRUCK_MAX", "1G", 1);
	setenv("WEFT_ALGO_HOST_TREE_MIN", "0", 1);
	setenv("WEFT_ALGO_HOST_CHUNK", "4160", 1);
	setenv("WEFT_ALGO_HOST_SCRATCH", "12480", 1);
	Suite *s = suite_create("algo_host_many");
	TCase *tc = tcase_create("shm");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, np3);
	tcase_add_test(tc, np5);
	tcase_add_test(tc, np6_two_numa);
	tcase_add_test(tc, np8);
	tcase_add_test(tc, np12_two_numa);
	tcase_add_test(tc, np16);
	suite_add_tcase(s, tc);
	int rc = wt_run_suite(s);
	unlink(conf);
	return rc;
}
