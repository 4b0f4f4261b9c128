/* SPDX-License-Identifier: Apache-2.0 */
/* Refuse-then-use cases for libweft_nccl (nccl_refusals.h). Every variable a
 * refused call could write is first set to something live (a working comm,
 * ncclSum, a registered handle, a real buffer), so that a refusal that leaves
 * it untouched shows as a call that succeeds on the wrong object. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nccl.h>

#include "nccl_refusals.h"

struct nr_ctx {
	ncclComm_t live; /* a working one-rank comm */
	char msg[512];
};

/* Records why a case failed; returns 1 for `return nr_fail(...)`. */
static int nr_fail(struct nr_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int nr_fail(struct nr_ctx *x, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
	va_end(ap);
	return 1;
}

#define NR_REQ(x, cond, ...)                          \
	do {                                          \
		if (!(cond))                          \
			return nr_fail((x), __VA_ARGS__); \
	} while (0)

/* r is a refusal and the library logged a reason containing needle. */
static int refused(struct nr_ctx *x, const char *what, ncclResult_t r, const char *needle)
{
	const char *last = ncclGetLastError(NULL);
	NR_REQ(x, r != ncclSuccess, "%s succeeded; it should have been refused", what);
	NR_REQ(x, last && strstr(last, needle), "%s was refused (%d) but the logged reason '%s' lacks '%s'", what,
	       (int)r, last ? last : "(none)", needle);
	return 0;
}

#define NR_REFUSED(x, what, call, needle)                    \
	do {                                                 \
		if (refused((x), (what), (call), (needle)))  \
			return 1;                            \
	} while (0)

/* Sets name to value (NULL: unsets it) for one call; returns its old value
 * for env_restore, which puts it back (or unsets it) and frees it. */
static char *env_swap(const char *name, const char *value)
{
	const char *old = getenv(name);
	char *saved = old ? strdup(old) : NULL;
	if (value)
		setenv(name, value, 1);
	else
		unsetenv(name);
	return saved;
}

static void env_restore(const char *name, char *saved)
{
	if (saved)
		setenv(name, saved, 1);
	else
		unsetenv(name);
	free(saved);
}

/* A comm handed back by a refused call: NULL, so a collective on it fails. */
static int use_comm(struct nr_ctx *x, const char *fn, ncclComm_t c)
{
	NR_REQ(x, c != x->live, "%s was refused but left the comm variable holding the live comm", fn);
	int v = 1;
	NR_REFUSED(x, "ncclAllReduce on the comm a refusal returned", ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, c, NULL),
		   c ? "comm" : "comm is NULL");
	return 0;
}

/* ----------------------------------------------------- handle-returning */

static int c_get_unique_id(struct nr_ctx *x)
{
	ncclUniqueId id;
	memset(&id, 0x5a, sizeof(id));
	char *saved = env_swap("WEFT_CORE_BOOTSTRAP_ADDR", "not-an-address");
	ncclResult_t r = ncclGetUniqueId(&id);
	env_restore("WEFT_CORE_BOOTSTRAP_ADDR", saved);
	NR_REFUSED(x, "ncclGetUniqueId with a bad bootstrap address", r, "weft_get_unique_id failed");
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommInitRank with the id a refused ncclGetUniqueId left", ncclCommInitRank(&c, 1, id, 0),
		   "weft_comm_create failed");
	return use_comm(x, "ncclCommInitRank", c);
}

static int c_init_rank(struct nr_ctx *x)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommInitRank of rank 5 of 2", ncclCommInitRank(&c, 2, id, 5), "out of range");
	return use_comm(x, "ncclCommInitRank", c);
}

static int c_init_rank_config(struct nr_ctx *x)
{
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
	bad.magic = 0;
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommInitRankConfig with a config not from NCCL_CONFIG_INITIALIZER",
		   ncclCommInitRankConfig(&c, 1, id, 0, &bad), "NCCL_CONFIG_INITIALIZER");
	return use_comm(x, "ncclCommInitRankConfig", c);
}

static int c_init_rank_scalable(struct nr_ctx *x)
{
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommInitRankScalable with no id", ncclCommInitRankScalable(&c, 1, 0, 0, NULL, NULL),
		   "at least one unique id");
	return use_comm(x, "ncclCommInitRankScalable", c);
}

static int c_init_all(struct nr_ctx *x)
{
	ncclComm_t cs[2] = {x->live, x->live};
	NR_REQ(x, ncclGroupStart() == ncclSuccess, "ncclGroupStart failed");
	ncclResult_t r = ncclCommInitAll(cs, 2, NULL);
	NR_REQ(x, ncclGroupEnd() == ncclSuccess, "ncclGroupEnd of an empty group failed");
	NR_REFUSED(x, "ncclCommInitAll inside a group", r, "outside groups");
	for (int i = 0; i < 2; i++)
		if (use_comm(x, "ncclCommInitAll", cs[i]))
			return 1;
	return 0;
}

static int c_split(struct nr_ctx *x)
{
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommSplit with color -5", ncclCommSplit(x->live, -5, 0, &c, NULL), "color -5");
	return use_comm(x, "ncclCommSplit", c);
}

static int c_shrink(struct nr_ctx *x)
{
	ncclComm_t c = x->live;
	int bad[1] = {5};
	NR_REFUSED(x, "ncclCommShrink excluding rank 5 of a one-rank comm",
		   ncclCommShrink(x->live, bad, 1, &c, NULL, NCCL_SHRINK_DEFAULT), "is not a rank of the communicator");
	return use_comm(x, "ncclCommShrink", c);
}

static int c_grow(struct nr_ctx *x)
{
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommGrow to as many ranks as the parent has", ncclCommGrow(x->live, 1, NULL, -1, &c, NULL),
		   "does not exceed");
	return use_comm(x, "ncclCommGrow", c);
}

static int c_comm_get_unique_id(struct nr_ctx *x)
{
	ncclUniqueId id;
	memset(&id, 0x5a, sizeof(id));
	NR_REFUSED(x, "ncclCommGetUniqueId(NULL)", ncclCommGetUniqueId(NULL, &id), "comm is NULL");
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclCommGrow with the id a refused ncclCommGetUniqueId left", ncclCommGrow(NULL, 2, &id, 1, &c, NULL),
		   "all zeros");
	return use_comm(x, "ncclCommGrow", c);
}

static int c_premul(struct nr_ctx *x)
{
	/* PyTorch's variable starts at 0, which is ncclSum. */
	ncclRedOp_t op = ncclSum;
	int s = 3;
	NR_REFUSED(x, "ncclRedOpCreatePreMulSum of datatype 99",
		   ncclRedOpCreatePreMulSum(&op, &s, (ncclDataType_t)99, ncclScalarHostImmediate, x->live),
		   "ncclRedOpCreatePreMulSum");
	NR_REQ(x, op != ncclSum, "a refused ncclRedOpCreatePreMulSum left the operation ncclSum");
	int v[2] = {1, 2};
	NR_REFUSED(x, "ncclAllReduce with the operation a refused ncclRedOpCreatePreMulSum left",
		   ncclAllReduce(v, v, 2, ncclInt32, op, x->live, NULL), "refused ncclRedOpCreatePreMulSum");
	NR_REQ(x, v[0] == 1 && v[1] == 2, "a refused operation still changed the buffer to {%d, %d}", v[0], v[1]);
	NR_REFUSED(x, "ncclReduce with that operation", ncclReduce(v, v, 2, ncclInt32, op, 0, x->live, NULL),
		   "refused ncclRedOpCreatePreMulSum");
	NR_REFUSED(x, "ncclReduceScatter with that operation", ncclReduceScatter(v, v, 2, ncclInt32, op, x->live, NULL),
		   "refused ncclRedOpCreatePreMulSum");
	return 0;
}

static int c_register(struct nr_ctx *x)
{
	static char buf[4096];
	void *good = NULL;
	NR_REQ(x, ncclCommRegister(x->live, buf, sizeof(buf), &good) == ncclSuccess && good,
	       "registering a host buffer failed: %s", ncclGetLastError(NULL));
	void *h = good;
	NR_REFUSED(x, "ncclCommRegister of NULL with 64 bytes", ncclCommRegister(x->live, NULL, 64, &h), "buff is NULL");
	NR_REQ(x, h != good, "a refused ncclCommRegister left the handle of an earlier registration");
	NR_REFUSED(x, "ncclCommDeregister of the handle a refused ncclCommRegister left",
		   ncclCommDeregister(x->live, h), "handle is NULL");
	NR_REQ(x, ncclCommDeregister(x->live, good) == ncclSuccess, "deregistering the good handle failed");
	return 0;
}

/* Windows: a refused registration leaves NULL, which deregistration, the
 * user-pointer query and a put refuse by name. */
static int c_window(struct nr_ctx *x)
{
	static char buf[4096], other[64];
	ncclWindow_t good = NULL;
	NR_REQ(x, ncclCommWindowRegister(x->live, buf, sizeof(buf), &good, NCCL_WIN_DEFAULT) == ncclSuccess && good,
	       "registering a host window failed: %s", ncclGetLastError(NULL));
	ncclWindow_t w = good;
	NR_REFUSED(x, "ncclCommWindowRegister of NULL", ncclCommWindowRegister(x->live, NULL, 64, &w, NCCL_WIN_DEFAULT),
		   "buff is NULL");
	NR_REQ(x, w == NULL, "a refused ncclCommWindowRegister left the window variable set");
	w = good;
	NR_REFUSED(x, "ncclCommWindowRegister with winFlags 0x80",
		   ncclCommWindowRegister(x->live, other, sizeof(other), &w, 0x80), "winFlags");
	NR_REQ(x, w == NULL, "a refused ncclCommWindowRegister left the window variable set");
	NR_REFUSED(x, "ncclCommWindowDeregister of what a refused ncclCommWindowRegister left",
		   ncclCommWindowDeregister(x->live, w), "win is NULL");
	void *p = buf;
	NR_REFUSED(x, "ncclWinGetUserPtr of what a refused ncclCommWindowRegister left",
		   ncclWinGetUserPtr(x->live, w, &p), "win is NULL");
	NR_REQ(x, p == NULL, "a refused ncclWinGetUserPtr left the pointer variable set");
	int v = 1;
	NR_REFUSED(x, "ncclPutSignal into what a refused ncclCommWindowRegister left",
		   ncclPutSignal(&v, 1, ncclInt32, 0, w, 0, 0, 0, 0, x->live, NULL), "peerWin is NULL");
	NR_REQ(x, ncclCommWindowDeregister(x->live, good) == ncclSuccess, "deregistering the good window failed: %s",
	       ncclGetLastError(NULL));
	NR_REFUSED(x, "ncclWinGetUserPtr of a deregistered window", ncclWinGetUserPtr(x->live, good, &p),
		   "is not a window registered");
	return 0;
}

/* One-sided calls refuse what NCCL 2.30 refuses (sigIdx, ctx and flags
 * other than 0, bad peers and counts) before anything moves. */
static int c_one_sided(struct nr_ctx *x)
{
	static int buf[16];
	ncclWindow_t w = NULL;
	NR_REQ(x, ncclCommWindowRegister(x->live, buf, sizeof(buf), &w, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
	       "registering a host window failed: %s", ncclGetLastError(NULL));
	int v[2] = {7, 8};
	NR_REFUSED(x, "ncclPutSignal with sigIdx 1", ncclPutSignal(v, 1, ncclInt32, 0, w, 0, 1, 0, 0, x->live, NULL),
		   "sigIdx is 1");
	NR_REFUSED(x, "ncclPutSignal past the window",
		   ncclPutSignal(v, 2, ncclInt32, 0, w, sizeof(buf) - 4, 0, 0, 0, x->live, NULL), "run past");
	NR_REFUSED(x, "ncclPutSignal to rank 5 of 1", ncclPutSignal(v, 1, ncclInt32, 5, w, 0, 0, 0, 0, x->live, NULL),
		   "outside the communicator");
	NR_REQ(x, buf[0] == 0, "a refused ncclPutSignal wrote the window");
	NR_REFUSED(x, "ncclSignal with ctx 2", ncclSignal(0, 0, 2, 0, x->live, NULL), "ctx is 2");
	NR_REFUSED(x, "ncclSignal to rank 5 of 1", ncclSignal(5, 0, 0, 0, x->live, NULL), "outside the communicator");
	ncclWaitSignalDesc_t d = {.opCnt = 0, .peer = 0, .sigIdx = 0, .ctx = 0};
	NR_REFUSED(x, "ncclWaitSignal for 0 signals", ncclWaitSignal(1, &d, x->live, NULL), "at least 1");
	NR_REFUSED(x, "ncclWaitSignal without descriptors", ncclWaitSignal(0, &d, x->live, NULL), "nDesc");
	/* This rank never signalled itself: a wait for it would never end. */
	d.opCnt = 1;
	NR_REFUSED(x, "ncclWaitSignal for a signal this rank never sent itself", ncclWaitSignal(1, &d, x->live, NULL),
		   "wait forever");
	/* What the refusals left is consistent: a put to itself, then its wait. */
	NR_REQ(x, ncclPutSignal(v, 2, ncclInt32, 0, w, 0, 0, 0, 0, x->live, NULL) == ncclSuccess && buf[0] == 7 &&
		       buf[1] == 8, "a put into the own window failed: %s", ncclGetLastError(NULL));
	NR_REQ(x, ncclWaitSignal(1, &d, x->live, NULL) == ncclSuccess, "waiting for the own signal failed: %s",
	       ncclGetLastError(NULL));
	NR_REQ(x, ncclCommWindowDeregister(x->live, w) == ncclSuccess, "deregistering failed");
	memset(buf, 0, sizeof(buf));
	return 0;
}

static int c_revoke(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclCommRevoke with flags 5", ncclCommRevoke(x->live, 5), "revokeFlags");
	/* The refusal revoked nothing: the comm still serves. */
	int v = 1;
	NR_REQ(x, ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, x->live, NULL) == ncclSuccess && v == 1,
	       "an allreduce after a refused revoke failed: %s", ncclGetLastError(NULL));
	return 0;
}

static int c_suspend(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclCommSuspend of memory", ncclCommSuspend(x->live, NCCL_SUSPEND_MEM), "NCCL_SUSPEND_MEM");
	NR_REFUSED(x, "ncclCommSuspend with flags 0x10", ncclCommSuspend(x->live, 0x10), "flags 0x10");
	NR_REFUSED(x, "ncclCommResume(NULL)", ncclCommResume(NULL), "comm is NULL");
	/* A refused suspend leaves the comm active. */
	int v = 2;
	NR_REQ(x, ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, x->live, NULL) == ncclSuccess && v == 2,
	       "an allreduce after a refused suspend failed: %s", ncclGetLastError(NULL));
	uint64_t s = 12345;
	NR_REQ(x, ncclCommMemStats(x->live, ncclStatGpuMemSuspended, &s) == ncclSuccess && s == 0,
	       "ncclStatGpuMemSuspended: %llu", (unsigned long long)s);
	return 0;
}

static int c_mem_stats(struct nr_ctx *x)
{
	uint64_t v = 12345;
	NR_REFUSED(x, "ncclCommMemStats(ncclStatGpuMemTotal)", ncclCommMemStats(x->live, ncclStatGpuMemTotal, &v),
		   "does not count");
	NR_REQ(x, v == UINT64_MAX, "a refused ncclCommMemStats left %llu, not UINT64_MAX", (unsigned long long)v);
	v = 12345;
	NR_REFUSED(x, "ncclCommMemStats of statistic 9", ncclCommMemStats(x->live, (ncclCommMemStat_t)9, &v),
		   "statistic 9");
	NR_REQ(x, v == UINT64_MAX, "a refused ncclCommMemStats left %llu", (unsigned long long)v);
	return 0;
}

/* Parameters: a refused bind leaves NULL, which every getter refuses. */
static int c_param_bind(struct nr_ctx *x)
{
	ncclParamHandle_t good = NULL;
	NR_REQ(x, ncclParamBind(&good, "WEFT_CORE_FIFO_DEPTH") == ncclSuccess && good,
	       "binding WEFT_CORE_FIFO_DEPTH failed: %s", ncclGetLastError(NULL));
	ncclParamHandle_t h = good;
	NR_REFUSED(x, "ncclParamBind of NCCL_DEBUG", ncclParamBind(&h, "NCCL_DEBUG"), "weft does not read NCCL's");
	NR_REQ(x, h == NULL, "a refused ncclParamBind left the handle set");
	int64_t v = 0;
	NR_REFUSED(x, "ncclParamGetI64 of what a refused ncclParamBind left", ncclParamGetI64(h, &v), "handle is NULL");
	return 0;
}

static int param_ints(struct nr_ctx *x)
{
	ncclParamHandle_t depth = NULL, timeout = NULL;
	NR_REQ(x, ncclParamBind(&depth, "WEFT_CORE_FIFO_DEPTH") == ncclSuccess, "bind failed: %s",
	       ncclGetLastError(NULL));
	NR_REQ(x, ncclParamBind(&timeout, "core.peer_timeout") == ncclSuccess, "bind failed: %s",
	       ncclGetLastError(NULL));
	int8_t i8 = 5;
	uint8_t u8 = 5;
	int16_t i16 = 0;
	uint16_t u16 = 0;
	int32_t i32 = 0;
	uint32_t u32 = 0;
	uint64_t u64 = 0;
	NR_REFUSED(x, "ncclParamGetI8 of 1024", ncclParamGetI8(depth, &i8), "does not fit");
	NR_REQ(x, i8 == 5, "a refused ncclParamGetI8 wrote %d", i8);
	NR_REFUSED(x, "ncclParamGetU8 of 1024", ncclParamGetU8(depth, &u8), "does not fit");
	NR_REQ(x, ncclParamGetI16(depth, &i16) == ncclSuccess && ncclParamGetU16(depth, &u16) == ncclSuccess &&
		       i16 == 1024 && u16 == 1024, "16-bit reads: %d %d", i16, u16);
	NR_REFUSED(x, "ncclParamGetI32 of a DOUBLE", ncclParamGetI32(timeout, &i32), "not an integer");
	NR_REFUSED(x, "ncclParamGetU32 of NULL", ncclParamGetU32(NULL, &u32), "handle is NULL");
	NR_REFUSED(x, "ncclParamGetI64 into NULL", ncclParamGetI64(depth, NULL), "out-pointer is NULL");
	NR_REFUSED(x, "ncclParamGetU64 of a DOUBLE", ncclParamGetU64(timeout, &u64), "not an integer");
	return 0;
}

static int c_param_ints(struct nr_ctx *x)
{
	char *saved = env_swap("WEFT_CORE_FIFO_DEPTH", "1024");
	int rc = param_ints(x);
	env_restore("WEFT_CORE_FIFO_DEPTH", saved);
	return rc;
}

static int c_param_text(struct nr_ctx *x)
{
	const char *s = "stale";
	NR_REFUSED(x, "ncclParamGetStr of NULL", ncclParamGetStr(NULL, &s), "handle is NULL");
	NR_REQ(x, s == NULL, "a refused ncclParamGetStr left the string set");
	ncclParamHandle_t h = NULL;
	NR_REQ(x, ncclParamBind(&h, "WEFT_CORE_FIFO_DEPTH") == ncclSuccess, "bind failed");
	char out[4];
	int len = 7;
	NR_REFUSED(x, "ncclParamGet into 4 bytes", ncclParamGet(h, out, sizeof(out), &len), "maxLen is 4");
	NR_REQ(x, len == 0, "a refused ncclParamGet left len %d", len);
	int vlen = 7;
	s = "stale";
	NR_REFUSED(x, "ncclParamGetParameter of an unknown key", ncclParamGetParameter("WEFT_NO_SUCH_KEY", &s, &vlen),
		   "no parameter");
	NR_REQ(x, s == NULL && vlen == 0, "a refused ncclParamGetParameter left '%s' (%d)", s ? s : "(null)", vlen);
	const char **table = (const char **)&s;
	NR_REFUSED(x, "ncclParamGetAllParameterKeys without tableLen", ncclParamGetAllParameterKeys(&table, NULL),
		   "tableLen is NULL");
	NR_REQ(x, table == NULL, "a refused ncclParamGetAllParameterKeys left the table set");
	return 0;
}

static int c_param_dump(struct nr_ctx *x)
{
	/* Cannot refuse (void): it prints the parameters to stdout, sent away here. */
	fflush(stdout);
	int saved = dup(1), null = open("/dev/null", O_WRONLY);
	if (saved >= 0 && null >= 0)
		dup2(null, 1);
	ncclParamDumpAll();
	fflush(stdout);
	if (saved >= 0) {
		dup2(saved, 1);
		close(saved);
	}
	if (null >= 0)
		close(null);
	return 0;
}

static int c_mem_alloc(struct nr_ctx *x)
{
	static int host[4] = {1, 2, 3, 4};
	void *p = host;
	/* No CUDA runtime in this process: refused. */
	NR_REFUSED(x, "ncclMemAlloc without a CUDA runtime", ncclMemAlloc(&p, 4096), "no CUDA runtime");
	NR_REQ(x, p != host, "a refused ncclMemAlloc left the pointer variable holding an earlier buffer");
	NR_REFUSED(x, "ncclAllReduce on the pointer a refused ncclMemAlloc left",
		   ncclAllReduce(p, p, 4, ncclInt32, ncclSum, x->live, NULL), "ncclAllReduce");
	return 0;
}

static int c_async_error(struct nr_ctx *x)
{
	ncclResult_t e = ncclSuccess;
	NR_REFUSED(x, "ncclCommGetAsyncError(NULL)", ncclCommGetAsyncError(NULL, &e), "not a live communicator");
	NR_REQ(x, e != ncclSuccess, "a refused ncclCommGetAsyncError reported ncclSuccess");
	return 0;
}

static int c_count(struct nr_ctx *x)
{
	int n = 1, v = 0;
	NR_REFUSED(x, "ncclCommCount(NULL)", ncclCommCount(NULL, &n), "comm is NULL");
	NR_REFUSED(x, "ncclSend to the last rank of a refused ncclCommCount",
		   ncclSend(&v, 1, ncclInt32, n - 1, x->live, NULL), "ncclSend");
	return 0;
}

static int c_user_rank(struct nr_ctx *x)
{
	int me = 0, v = 0;
	NR_REFUSED(x, "ncclCommUserRank(NULL)", ncclCommUserRank(NULL, &me), "comm is NULL");
	NR_REFUSED(x, "ncclBroadcast from the rank a refused ncclCommUserRank left",
		   ncclBroadcast(&v, &v, 1, ncclInt32, me, x->live, NULL), "ncclBroadcast");
	return 0;
}

static int c_cu_device(struct nr_ctx *x)
{
	int d = 0;
	NR_REFUSED(x, "ncclCommCuDevice(NULL)", ncclCommCuDevice(NULL, &d), "comm is NULL");
	NR_REQ(x, d == -1, "a refused ncclCommCuDevice left device %d, not -1", d);
	return 0;
}

static int c_simulate_end(struct nr_ctx *x)
{
	ncclUniqueId id;
	NR_REQ(x, ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId failed: %s", ncclGetLastError(NULL));
	ncclComm_t c = NULL;
	NR_REQ(x, ncclGroupStart() == ncclSuccess, "ncclGroupStart failed");
	NR_REQ(x, ncclCommInitRank(&c, 1, id, 0) == ncclSuccess && c, "a queued ncclCommInitRank failed");
	ncclSimInfo_t si = NCCL_SIM_INFO_INITIALIZER;
	NR_REFUSED(x, "ncclGroupSimulateEnd", ncclGroupSimulateEnd(&si), "no cost model");
	/* The comm handed out by the queued init was never made: it must fail
	 * by name (not be freed under the caller) and still be destroyable. */
	int v = 1;
	NR_REFUSED(x, "ncclAllReduce on a comm whose init a simulated group dropped",
		   ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, c, NULL), "failed to initialize");
	NR_REQ(x, ncclCommDestroy(c) == ncclSuccess, "destroying that comm failed: %s", ncclGetLastError(NULL));
	return 0;
}

/* ------------------------------------------------- status-only functions */

static int c_version(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclGetVersion(NULL)", ncclGetVersion(NULL), "version is NULL");
	return 0;
}

static int c_strings(struct nr_ctx *x)
{
	/* Cannot refuse: they always return a string. */
	NR_REQ(x, ncclGetErrorString((ncclResult_t)99) != NULL, "ncclGetErrorString returned NULL");
	NR_REQ(x, ncclGetLastError(NULL) != NULL, "ncclGetLastError returned NULL");
	ncclResetDebugInit();
	return 0;
}

static int c_group(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclGroupEnd without ncclGroupStart", ncclGroupEnd(), "without a matching ncclGroupStart");
	NR_REQ(x, ncclGroupStart() == ncclSuccess && ncclGroupEnd() == ncclSuccess, "an empty group failed");
	return 0;
}

static int c_finalize(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclCommFinalize(NULL)", ncclCommFinalize(NULL), "comm is NULL");
	return 0;
}

static int c_destroy_abort(struct nr_ctx *x)
{
	static unsigned char foreign[256];
	NR_REFUSED(x, "ncclCommDestroy of a foreign pointer", ncclCommDestroy((ncclComm_t)(void *)foreign),
		   "not a live communicator");
	NR_REFUSED(x, "ncclCommAbort of a foreign pointer", ncclCommAbort((ncclComm_t)(void *)foreign),
		   "not a live communicator");
	return 0;
}

static int c_redop_destroy(struct nr_ctx *x)
{
	NR_REFUSED(x, "ncclRedOpDestroy of an operation never made", ncclRedOpDestroy((ncclRedOp_t)ncclNumOps, x->live),
		   "ncclRedOpDestroy");
	return 0;
}

static int c_mem_free(struct nr_ctx *x)
{
	static char host[16];
	/* Only what ncclMemAlloc made is freed: host memory is refused, never passed on. */
	NR_REFUSED(x, "ncclMemFree of memory ncclMemAlloc did not make", ncclMemFree(host),
		   "not returned by ncclMemAlloc");
	return 0;
}

/* Every collective and point-to-point call refuses a datatype NCCL lacks,
 * before anything moves. */
#define BAD_TYPE ((ncclDataType_t)(ncclNumTypes + 3))

static int c_colls(struct nr_ctx *x)
{
	int v[4] = {0};
	ncclComm_t c = x->live;
	NR_REFUSED(x, "ncclAllReduce", ncclAllReduce(v, v, 1, BAD_TYPE, ncclSum, c, NULL), "datatype");
	NR_REFUSED(x, "ncclBroadcast", ncclBroadcast(v, v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclBcast", ncclBcast(v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclReduce", ncclReduce(v, v, 1, BAD_TYPE, ncclSum, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclAllGather", ncclAllGather(v, v, 1, BAD_TYPE, c, NULL), "datatype");
	NR_REFUSED(x, "ncclReduceScatter", ncclReduceScatter(v, v, 1, BAD_TYPE, ncclSum, c, NULL), "datatype");
	NR_REFUSED(x, "ncclAlltoAll", ncclAlltoAll(v, v, 1, BAD_TYPE, c, NULL), "datatype");
	size_t cnt[64] = {0}, dsp[64] = {0};
	NR_REFUSED(x, "ncclAllToAllv", ncclAllToAllv(v, cnt, dsp, v, cnt, dsp, BAD_TYPE, c, NULL), "datatype");
	NR_REFUSED(x, "ncclAllToAllv without counts", ncclAllToAllv(v, NULL, dsp, v, cnt, dsp, ncclInt32, c, NULL),
		   "sendcounts");
	NR_REFUSED(x, "ncclGather", ncclGather(v, v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclScatter", ncclScatter(v, v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclSend", ncclSend(v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	NR_REFUSED(x, "ncclRecv", ncclRecv(v, 1, BAD_TYPE, 0, c, NULL), "datatype");
	return 0;
}

/* ------------------------------------------------------------- the table */

typedef int (*nr_case_fn)(struct nr_ctx *);

static const struct {
	const char *name;
	nr_case_fn run;
} cases[] = {
	{"ncclAllGather", c_colls},
	{"ncclAllReduce", c_colls},
	{"ncclAllToAllv", c_colls},
	{"ncclAlltoAll", c_colls},
	{"ncclBcast", c_colls},
	{"ncclBroadcast", c_colls},
	{"ncclCommAbort", c_destroy_abort},
	{"ncclCommCount", c_count},
	{"ncclCommCuDevice", c_cu_device},
	{"ncclCommDeregister", c_register},
	{"ncclCommMemStats", c_mem_stats},
	{"ncclCommResume", c_suspend},
	{"ncclCommRevoke", c_revoke},
	{"ncclCommSuspend", c_suspend},
	{"ncclCommDestroy", c_destroy_abort},
	{"ncclCommFinalize", c_finalize},
	{"ncclCommGetAsyncError", c_async_error},
	{"ncclCommGetUniqueId", c_comm_get_unique_id},
	{"ncclCommGrow", c_grow},
	{"ncclCommInitAll", c_init_all},
	{"ncclCommInitRank", c_init_rank},
	{"ncclCommInitRankConfig", c_init_rank_config},
	{"ncclCommInitRankScalable", c_init_rank_scalable},
	{"ncclCommRegister", c_register},
	{"ncclCommShrink", c_shrink},
	{"ncclCommSplit", c_split},
	{"ncclCommUserRank", c_user_rank},
	{"ncclCommWindowDeregister", c_window},
	{"ncclCommWindowRegister", c_window},
	{"ncclGather", c_colls},
	{"ncclGetErrorString", c_strings},
	{"ncclGetLastError", c_strings},
	{"ncclGetUniqueId", c_get_unique_id},
	{"ncclGetVersion", c_version},
	{"ncclGroupEnd", c_group},
	{"ncclGroupSimulateEnd", c_simulate_end},
	{"ncclGroupStart", c_group},
	{"ncclMemAlloc", c_mem_alloc},
	{"ncclMemFree", c_mem_free},
	{"ncclParamBind", c_param_bind},
	{"ncclParamDumpAll", c_param_dump},
	{"ncclParamGet", c_param_text},
	{"ncclParamGetAllParameterKeys", c_param_text},
	{"ncclParamGetI16", c_param_ints},
	{"ncclParamGetI32", c_param_ints},
	{"ncclParamGetI64", c_param_ints},
	{"ncclParamGetI8", c_param_ints},
	{"ncclParamGetParameter", c_param_text},
	{"ncclParamGetStr", c_param_text},
	{"ncclParamGetU16", c_param_ints},
	{"ncclParamGetU32", c_param_ints},
	{"ncclParamGetU64", c_param_ints},
	{"ncclParamGetU8", c_param_ints},
	{"ncclPutSignal", c_one_sided},
	{"ncclRecv", c_colls},
	{"ncclRedOpCreatePreMulSum", c_premul},
	{"ncclRedOpDestroy", c_redop_destroy},
	{"ncclReduce", c_colls},
	{"ncclReduceScatter", c_colls},
	{"ncclResetDebugInit", c_strings},
	{"ncclScatter", c_colls},
	{"ncclSend", c_colls},
	{"ncclSignal", c_one_sided},
	{"ncclWaitSignal", c_one_sided},
	{"ncclWinGetUserPtr", c_window},
};
#define NCASES (int)(sizeof(cases) / sizeof(cases[0]))

static void append(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void append(char *err, size_t errlen, const char *fmt, ...)
{
	size_t used = strlen(err);
	if (used + 1 >= errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + used, errlen - used, fmt, ap);
	va_end(ap);
}

int nr_run_all(const char *symbols_path, char *err, size_t errlen)
{
	err[0] = '\0';
	FILE *f = fopen(symbols_path, "r");
	if (!f) {
		append(err, errlen, "cannot read %s\n", symbols_path);
		return 1;
	}
	struct nr_ctx x = {0};
	int failures = 0, listed[NCASES];
	memset(listed, 0, sizeof(listed));
	if (ncclCommInitAll(&x.live, 1, NULL) != ncclSuccess || !x.live) {
		append(err, errlen, "no one-rank comm to test with: %s\n", ncclGetLastError(NULL));
		fclose(f);
		return 1;
	}
	char line[256];
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (!line[0] || line[0] == '#')
			continue;
		int k = 0;
		while (k < NCASES && strcmp(cases[k].name, line) != 0)
			k++;
		if (k == NCASES) {
			append(err, errlen, "%s: listed in %s but has no refuse-then-use case\n", line, symbols_path);
			failures++;
			continue;
		}
		listed[k] = 1;
		x.msg[0] = '\0';
		if (cases[k].run(&x)) {
			append(err, errlen, "%s: %s\n", line, x.msg);
			failures++;
		}
	}
	fclose(f);
	for (int k = 0; k < NCASES; k++)
		if (!listed[k]) {
			append(err, errlen, "%s: has a case but is not listed in %s\n", cases[k].name, symbols_path);
			failures++;
		}
	if (ncclCommDestroy(x.live) != ncclSuccess) {
		append(err, errlen, "destroying the one-rank comm failed: %s\n", ncclGetLastError(NULL));
		failures++;
	}
	return failures;
}
