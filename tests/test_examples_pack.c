/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of examples/pack-skeleton as an algorithm pack: forked ranks (2, 3, 4)
 * over the tree's transports run allreduce of every type and operation (the
 * pre-multiplied sum through weft_allreduce_premul) and allgather of every
 * type, in place and out of place, at 1, 7 and 4097 elements, with `require`
 * rules handing both collectives to the skeleton. The data is random small
 * integers, so that every partial result is exact in every type (fp8 too) and
 * the reference computed here must match bit for bit. The pack is built by
 * the example_pack_skeleton test (tests/examples_pack.cmake); its folder comes
 * in WEFT_TEST_PACK_SKELETON_DIR. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/kit.h>
#include <weft/weft.h>

#include "testlib.h"

#define XP_TIMEOUT_S 240
#define XP_MAX_COUNT 4097
#define XP_GUARD 64 /* poisoned bytes past every output, checked untouched */
#define XP_POISON 0xa5

static struct weft_unique_id g_id;
static uint64_t g_seed;
static const size_t xp_counts[] = {1, 7, XP_MAX_COUNT};

static uint64_t xp_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* The same random number on every rank for (call, rank, element). */
static uint64_t xp_rand(uint64_t call, int r, size_t i)
{
	return xp_mix(g_seed ^ xp_mix(call * 0x100000001b3ull ^ ((uint64_t)r << 48) ^ (uint64_t)i));
}

static int xp_unsigned(enum weft_datatype t)
{
	return t == WEFT_UINT8 || t == WEFT_UINT32 || t == WEFT_UINT64;
}

static int xp_fp8(enum weft_datatype t)
{
	return t == WEFT_FP8_E4M3 || t == WEFT_FP8_E5M2;
}

/* Inputs, chosen so that with up to 4 ranks (and premul scalars up to 2)
 * every partial sum or product is an integer the type holds exactly:
 * bfloat16 to 256, float16 to 2048, fp8 E4M3 to 16, E5M2 to 8. */
static void xp_range(enum weft_datatype t, enum weft_redop op, int64_t *lo, int64_t *hi)
{
	if (op == WEFT_PROD) {
		/* Products of 0, +-1 and +-2 are 0 or +-2^k: exact everywhere. */
		*lo = xp_unsigned(t) ? 0 : -2;
		*hi = 2;
		return;
	}
	switch (t) {
	case WEFT_INT8: *lo = -15, *hi = 15; break;
	case WEFT_UINT8: *lo = 0, *hi = 30; break;
	case WEFT_UINT32:
	case WEFT_UINT64: *lo = 0, *hi = 2000; break;
	case WEFT_FLOAT16: *lo = -100, *hi = 100; break;
	case WEFT_BFLOAT16: *lo = -30, *hi = 30; break;
	case WEFT_FP8_E4M3:
	case WEFT_FP8_E5M2: *lo = -2, *hi = 2; break;
	default: *lo = -1000, *hi = 1000; break;
	}
}

/* Rank r's pre-multiplied sum scalar. */
static int64_t xp_scalar(enum weft_datatype t, int r)
{
	static const int64_t s[] = {2, -1, 1};
	if (xp_fp8(t))
		return r % 2 ? -1 : 1;
	return xp_unsigned(t) ? 1 + r % 2 : s[r % 3];
}

/* Rank r's input element i of call `call`. For avg the last rank's value
 * makes the sum a multiple of the rank count, so the average is exact too. */
static int64_t xp_value(enum weft_datatype t, enum weft_redop op, int nranks, uint64_t call, int r, size_t i)
{
	int64_t lo, hi;
	xp_range(t, op, &lo, &hi);
	const uint64_t span = (uint64_t)(hi - lo + 1), pick = xp_rand(call, r, i) % span;
	if (op != WEFT_AVG || r != nranks - 1)
		return lo + (int64_t)pick;
	int64_t part = 0;
	for (int q = 0; q < r; q++)
		part += xp_value(t, op, nranks, call, q, i);
	for (uint64_t d = 0; d < span; d++) {
		int64_t v = lo + (int64_t)((pick + d) % span);
		if ((part + v) % nranks == 0)
			return v;
	}
	ck_abort_msg("no average-exact value in %lld..%lld for %d ranks", (long long)lo, (long long)hi, nranks);
	return 0;
}

static void xp_put(enum weft_datatype t, void *p, size_t i, int64_t v)
{
	switch (t) {
	case WEFT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case WEFT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case WEFT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case WEFT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case WEFT_INT64: ((int64_t *)p)[i] = v; break;
	case WEFT_UINT64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case WEFT_FLOAT16: ((uint16_t *)p)[i] = weft_kit_float_to_half((float)v); break;
	case WEFT_BFLOAT16: ((uint16_t *)p)[i] = weft_kit_float_to_bf16((float)v); break;
	case WEFT_FLOAT32: ((float *)p)[i] = (float)v; break;
	case WEFT_FLOAT64: ((double *)p)[i] = (double)v; break;
	case WEFT_FP8_E4M3: ((uint8_t *)p)[i] = weft_kit_float_to_fp8_e4m3((float)v); break;
	case WEFT_FP8_E5M2: ((uint8_t *)p)[i] = weft_kit_float_to_fp8_e5m2((float)v); break;
	default: break;
	}
}

static double xp_get(enum weft_datatype t, const void *p, size_t i)
{
	switch (t) {
	case WEFT_INT8: return ((const int8_t *)p)[i];
	case WEFT_UINT8: return ((const uint8_t *)p)[i];
	case WEFT_INT32: return ((const int32_t *)p)[i];
	case WEFT_UINT32: return ((const uint32_t *)p)[i];
	case WEFT_INT64: return (double)((const int64_t *)p)[i];
	case WEFT_UINT64: return (double)((const uint64_t *)p)[i];
	case WEFT_FLOAT16: return weft_kit_half_to_float(((const uint16_t *)p)[i]);
	case WEFT_BFLOAT16: return weft_kit_bf16_to_float(((const uint16_t *)p)[i]);
	case WEFT_FLOAT32: return ((const float *)p)[i];
	case WEFT_FLOAT64: return ((const double *)p)[i];
	case WEFT_FP8_E4M3: return weft_kit_fp8_e4m3_to_float(((const uint8_t *)p)[i]);
	case WEFT_FP8_E5M2: return weft_kit_fp8_e5m2_to_float(((const uint8_t *)p)[i]);
	default: return 0;
	}
}

/* The exact result of element i. */
static int64_t xp_reference(enum weft_datatype t, enum weft_redop op, int nranks, uint64_t call, size_t i)
{
	int64_t acc = xp_value(t, op, nranks, call, 0, i) * (op == WEFT_PREMUL_SUM ? xp_scalar(t, 0) : 1);
	for (int r = 1; r < nranks; r++) {
		int64_t v = xp_value(t, op, nranks, call, r, i);
		switch (op) {
		case WEFT_PROD: acc *= v; break;
		case WEFT_MIN: acc = v < acc ? v : acc; break;
		case WEFT_MAX: acc = v > acc ? v : acc; break;
		case WEFT_PREMUL_SUM: acc += v * xp_scalar(t, r); break;
		default: acc += v; break;
		}
	}
	return op == WEFT_AVG ? acc / nranks : acc;
}

static int xp_untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != XP_POISON)
			return 0;
	return 1;
}

struct xp_case {
	enum weft_datatype t;
	int inplace;
	size_t count;
	uint64_t call;
};

/* One allreduce (op) on this rank's buffers: in is the input, out the
 * output, each XP_MAX_COUNT elements of 8 bytes plus the guard. */
static int xp_allreduce(weft_comm_t *comm, int rank, int nranks, const struct xp_case *c, enum weft_redop op,
			unsigned char *in, unsigned char *out)
{
	const size_t es = weft_datatype_size(c->t), bytes = c->count * es;
	unsigned char *send = c->inplace ? out : in;
	memset(out, XP_POISON, bytes + XP_GUARD);
	for (size_t i = 0; i < c->count; i++)
		xp_put(c->t, send, i, xp_value(c->t, op, nranks, c->call, rank, i));
	int rc;
	if (op == WEFT_PREMUL_SUM) {
		unsigned char scalar[8];
		xp_put(c->t, scalar, 0, xp_scalar(c->t, rank));
		rc = weft_allreduce_premul(send, out, c->count, c->t, scalar, WEFT_MEM_HOST, comm, NULL);
	} else {
		rc = weft_allreduce(send, out, c->count, c->t, op, comm, NULL);
	}
	const char *what = weft_datatype_name(c->t), *opn = weft_redop_name(op), *mode = c->inplace ? "in" : "out of";
	RCHECK(rc == 0, "allreduce %s %s, %zu elements, %s place: %s", what, opn, c->count, mode, weft_strerror(rc));
	const char *algo = weft_info_last_algorithm(comm);
	RCHECK(algo && strcmp(algo, "skelpack/allreduce") == 0, "allreduce %s %s was served by %s", what, opn,
	       algo ? algo : "(none)");
	for (size_t i = 0; i < c->count; i++) {
		int64_t want = xp_reference(c->t, op, nranks, c->call, i);
		double got = xp_get(c->t, out, i);
		RCHECK(got == (double)want, "allreduce %s %s, %zu elements, %s place: element %zu is %g, expected %lld",
		       what, opn, c->count, mode, i, got, (long long)want);
	}
	RCHECK(xp_untouched(out + bytes, XP_GUARD), "allreduce %s %s, %zu elements: wrote past the output", what, opn,
	       c->count);
	for (size_t i = 0; !c->inplace && i < c->count; i++)
		RCHECK(xp_get(c->t, in, i) == (double)xp_value(c->t, op, nranks, c->call, rank, i),
		       "allreduce %s %s, %zu elements: input element %zu changed", what, opn, c->count, i);
	return 0;
}

/* One allgather: out holds nranks blocks; in place, ours is the input. The
 * data is random bytes, whatever the type. */
static int xp_allgather(weft_comm_t *comm, int rank, int nranks, const struct xp_case *c, unsigned char *in,
			unsigned char *out)
{
	const size_t es = weft_datatype_size(c->t), bytes = c->count * es;
	unsigned char *send = c->inplace ? out + (size_t)rank * bytes : in;
	memset(out, XP_POISON, bytes * (size_t)nranks + XP_GUARD);
	for (size_t b = 0; b < bytes; b++)
		send[b] = (unsigned char)xp_rand(c->call, rank, b);
	int rc = weft_allgather(send, out, c->count, c->t, comm, NULL);
	const char *what = weft_datatype_name(c->t), *mode = c->inplace ? "in" : "out of";
	RCHECK(rc == 0, "allgather %s, %zu elements, %s place: %s", what, c->count, mode, weft_strerror(rc));
	const char *algo = weft_info_last_algorithm(comm);
	RCHECK(algo && strcmp(algo, "skelpack/allgather") == 0, "allgather %s was served by %s", what,
	       algo ? algo : "(none)");
	for (int r = 0; r < nranks; r++)
		for (size_t b = 0; b < bytes; b++) {
			unsigned char want = (unsigned char)xp_rand(c->call, r, b), got = out[(size_t)r * bytes + b];
			RCHECK(got == want,
			       "allgather %s, %zu elements, %s place: byte %zu of rank %d's block is 0x%02x, "
			       "expected 0x%02x",
			       what, c->count, mode, b, r, got, want);
		}
	RCHECK(xp_untouched(out + bytes * (size_t)nranks, XP_GUARD),
	       "allgather %s, %zu elements: wrote past the output", what, c->count);
	for (size_t b = 0; !c->inplace && b < bytes; b++)
		RCHECK(in[b] == (unsigned char)xp_rand(c->call, rank, b), "allgather %s: input byte %zu changed", what,
		       b);
	return 0;
}

static int rank_main(int rank, int nranks, void *arg)
{
	(void)arg;
	weft_comm_t *comm = NULL;
	const size_t max = XP_MAX_COUNT * 8 * (size_t)nranks + XP_GUARD;
	unsigned char *in = malloc(max), *out = malloc(max);
	RCHECK(in && out, "out of memory");
	ROK(weft_comm_create(&g_id, nranks, rank, &comm));
	uint64_t call = 0;
	for (int t = 0; t < WEFT_DATATYPE_COUNT; t++)
		for (int inplace = 0; inplace < 2; inplace++)
			for (size_t k = 0; k < sizeof(xp_counts) / sizeof(xp_counts[0]); k++) {
				struct xp_case c = {(enum weft_datatype)t, inplace, xp_counts[k], 0};
				for (int op = 0; op < WEFT_REDOP_COUNT; op++) {
					c.call = ++call;
					if (xp_allreduce(comm, rank, nranks, &c, (enum weft_redop)op, in, out))
						return 1;
				}
				c.call = ++call;
				if (xp_allgather(comm, rank, nranks, &c, in, out))
					return 1;
			}
	ROK(weft_comm_destroy(comm));
	free(in);
	free(out);
	return 0;
}

/* Points the ranks at the skeleton's folder (algo-host and shm still come
 * from the tree's plugin folder) and a config whose rules give it both
 * collectives, with no fall-back. */
static char *xp_env(void)
{
	const char *dir = getenv("WEFT_TEST_PACK_SKELETON_DIR");
	ck_assert_msg(dir && *dir, "WEFT_TEST_PACK_SKELETON_DIR is not set");
	ck_assert_int_eq(setenv("WEFT_PLUGIN_PATH", dir, 1), 0);
	char *tmp = wt_mkdtemp("examples-pack");
	ck_assert_ptr_nonnull(tmp);
	char *conf = wt_write_file(tmp, "weft.conf",
				   "[algorithm]\n"
				   "require skelpack/allreduce when coll=allreduce\n"
				   "require skelpack/allgather when coll=allgather\n");
	ck_assert_ptr_nonnull(conf);
	ck_assert_int_eq(setenv("WEFT_CONFIG", conf, 1), 0);
	free(conf);
	setenv("WEFT_CORE_BOOTSTRAP_ADDR", "127.0.0.1", 0);
	/* WEFT_TEST_SEED repeats a run; otherwise a new one each time, printed. */
	const char *seed = getenv("WEFT_TEST_SEED");
	g_seed = seed && *seed ? strtoull(seed, NULL, 0) : xp_mix((uint64_t)time(NULL) ^ (uint64_t)getpid());
	fprintf(stderr, "test_examples_pack: WEFT_TEST_SEED=0x%llx\n", (unsigned long long)g_seed);
	ck_assert_int_eq(weft_get_unique_id(&g_id), 0);
	return tmp;
}

static const int xp_nranks[] = {2, 3, 4};

START_TEST(skeleton_serves_every_type_and_op)
{
	char *tmp = xp_env();
	int n = xp_nranks[_i];
	ck_assert_msg(wt_fork_ranks(n, rank_main, NULL, XP_TIMEOUT_S) == 0,
		      "%d ranks: the skeleton's allreduce or allgather failed (messages above; WEFT_TEST_SEED=0x%llx)",
		      n, (unsigned long long)g_seed);
	wt_rmdir(tmp);
	free(tmp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("examples_pack");
	TCase *tc = tcase_create("pack_skeleton");
	tcase_add_loop_test(tc, skeleton_serves_every_type_and_op, 0, (int)(sizeof(xp_nranks) / sizeof(xp_nranks[0])));
	suite_add_tcase(s, tc);
	return wt_run_suite(s);
}
