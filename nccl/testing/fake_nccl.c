/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for a real libnccl.so.2, for tests of WEFT_NCCL_FALLBACK and of
 * LD_PRELOAD on machines without NCCL: it exports every function of NCCL
 * 2.30's nccl.h, counts the calls it gets and those that hand it a
 * communicator it did not make (a weft one), and answers in ways a test can
 * recognize (never a real collective). fake_nccl_stats reads the counts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

#define FAKE_API __attribute__((visibility("default")))

FAKE_API void fake_nccl_stats(int *calls, int *foreign);
#define FAKE_MAGIC 0x46414b45u /* "FAKE" */

/* What a fake window and a fake comm hold: enough to prove that the shadow
 * communicator was made from rank 0's id, on the right rank. */
struct ncclComm {
	unsigned magic;
	ncclUniqueId id;
	int rank, nranks;
};
struct ncclWindow_vidmem {
	struct ncclComm comm;
	void *buff;
	size_t size;
};

static int n_calls, n_foreign;

/* Counts a call; one whose comm this library did not make counts as
 * foreign (NULL is not: NCCL's own checks refuse it). */
static int note(const struct ncclComm *comm)
{
	__atomic_add_fetch(&n_calls, 1, __ATOMIC_RELAXED);
	if (comm && comm->magic != FAKE_MAGIC) {
		__atomic_add_fetch(&n_foreign, 1, __ATOMIC_RELAXED);
		fprintf(stderr, "fake libnccl: called with a communicator it did not make (%p)\n", (const void *)comm);
		return 1;
	}
	return 0;
}

FAKE_API void fake_nccl_stats(int *calls, int *foreign)
{
	*calls = __atomic_load_n(&n_calls, __ATOMIC_RELAXED);
	*foreign = __atomic_load_n(&n_foreign, __ATOMIC_RELAXED);
}

FAKE_API ncclResult_t ncclGetVersion(int *v)
{
	note(NULL);
	*v = 22899; /* recognizably not weft's 23007 */
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	note(NULL);
	memset(id, 0, sizeof(*id));
	snprintf(id->internal, sizeof(id->internal), "FAKE-NCCL-ID pid %d", (int)getpid());
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
	note(NULL);
	if (strncmp(id.internal, "FAKE-NCCL-ID", 12) != 0)
		return ncclInvalidArgument;
	struct ncclComm *c = calloc(1, sizeof(*c));
	if (!c)
		return ncclSystemError;
	c->magic = FAKE_MAGIC;
	c->id = id;
	c->rank = rank;
	c->nranks = nranks;
	*comm = c;
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (note(comm))
		return ncclInvalidArgument;
	free(comm);
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (note(comm))
		return ncclInvalidArgument;
	free(comm);
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
					     int flags)
{
	if (note(comm))
		return ncclInvalidArgument;
	struct ncclWindow_vidmem *w = calloc(1, sizeof(*w));
	if (!w)
		return ncclSystemError;
	w->comm = *comm;
	w->buff = buff;
	w->size = size;
	*win = w;
	return ncclSuccess;
}

FAKE_API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
	if (note(comm) || !win || win->comm.rank != comm->rank)
		return ncclInvalidArgument;
	free(win);
	return ncclSuccess;
}

/* Writes op * 1000 + rank into every int32 of recvbuff but the second,
 * which gets a hash of the comm's id: what the test expects back from a
 * forwarded call (equal hashes: the ranks' shadow comms share one id). */
FAKE_API ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t type,
				    ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	if (note(comm) || type != ncclInt32)
		return ncclInvalidArgument;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof(comm->id.internal); i++)
		h = (h ^ (unsigned char)comm->id.internal[i]) * 16777619u;
	for (size_t i = 0; i < count; i++)
		((int32_t *)recvbuff)[i] = i == 1 ? (int32_t)(h & 0x7fffffff) : (int32_t)op * 1000 + comm->rank;
	return ncclSuccess;
}

/* The rest only count: weft must never need them. */
#define FAKE_COMM(name, args, comm)       \
	FAKE_API ncclResult_t name args   \
	{                                 \
		note(comm);               \
		return ncclInternalError; \
	}

FAKE_COMM(ncclMemAlloc, (void **ptr, size_t size), NULL)
FAKE_COMM(ncclMemFree, (void *ptr), NULL)
FAKE_COMM(ncclCommInitRankConfig, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config),
	  NULL)
FAKE_COMM(ncclCommInitAll, (ncclComm_t * comm, int ndev, const int *devlist), NULL)
FAKE_COMM(ncclCommFinalize, (ncclComm_t comm), comm)
FAKE_COMM(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config), comm)
FAKE_COMM(ncclCommShrink,
	  (ncclComm_t comm, int *excl, int nexcl, ncclComm_t *newcomm, ncclConfig_t *config, int flags), comm)
FAKE_COMM(ncclCommInitRankScalable,
	  (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId *ids, ncclConfig_t *config), NULL)
FAKE_COMM(ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *err), comm)
FAKE_COMM(ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *id), comm)
FAKE_COMM(ncclCommGrow,
	  (ncclComm_t comm, int nranks, const ncclUniqueId *id, int rank, ncclComm_t *newcomm, ncclConfig_t *config),
	  comm)
FAKE_COMM(ncclCommCount, (const ncclComm_t comm, int *count), comm)
FAKE_COMM(ncclCommCuDevice, (const ncclComm_t comm, int *device), comm)
FAKE_COMM(ncclCommUserRank, (const ncclComm_t comm, int *rank), comm)
FAKE_COMM(ncclCommRegister, (const ncclComm_t comm, void *buff, size_t size, void **handle), comm)
FAKE_COMM(ncclCommDeregister, (const ncclComm_t comm, void *handle), comm)
FAKE_COMM(ncclRedOpCreatePreMulSum,
	  (ncclRedOp_t * op, void *scalar, ncclDataType_t type, ncclScalarResidence_t res, ncclComm_t comm), comm)
FAKE_COMM(ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), comm)
FAKE_COMM(ncclReduce,
	  (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root, ncclComm_t comm,
	   cudaStream_t st),
	  comm)
FAKE_COMM(ncclBcast, (void *b, size_t n, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclBroadcast,
	  (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclReduceScatter,
	  (const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t comm, cudaStream_t st),
	  comm)
FAKE_COMM(ncclAllGather, (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t st),
	  comm)
FAKE_COMM(ncclAlltoAll, (const void *s, void *r, size_t n, ncclDataType_t t, ncclComm_t comm, cudaStream_t st),
	  comm)
FAKE_COMM(ncclAllToAllv,
	  (const void *s, const size_t *sc, const size_t *sd, void *r, const size_t *rc, const size_t *rd,
	   ncclDataType_t t, ncclComm_t comm, cudaStream_t st),
	  comm)
FAKE_COMM(ncclGather,
	  (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclScatter,
	  (const void *s, void *r, size_t n, ncclDataType_t t, int root, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclSend, (const void *s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclRecv, (void *r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclCommRevoke, (ncclComm_t comm, int flags), comm)
FAKE_COMM(ncclCommSuspend, (ncclComm_t comm, int flags), comm)
FAKE_COMM(ncclCommResume, (ncclComm_t comm), comm)
FAKE_COMM(ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value), comm)
FAKE_COMM(ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void **ptr), comm)
FAKE_COMM(ncclPutSignal,
	  (const void *s, size_t n, ncclDataType_t t, int peer, ncclWindow_t win, size_t off, int sig, int ctx,
	   unsigned flags, ncclComm_t comm, cudaStream_t st),
	  comm)
FAKE_COMM(ncclSignal, (int peer, int sig, int ctx, unsigned flags, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclWaitSignal, (int n, ncclWaitSignalDesc_t *d, ncclComm_t comm, cudaStream_t st), comm)
FAKE_COMM(ncclParamBind, (ncclParamHandle_t * out, const char *key), NULL)
FAKE_COMM(ncclParamGetI8, (ncclParamHandle_t h, int8_t *out), NULL)
FAKE_COMM(ncclParamGetI16, (ncclParamHandle_t h, int16_t *out), NULL)
FAKE_COMM(ncclParamGetI32, (ncclParamHandle_t h, int32_t *out), NULL)
FAKE_COMM(ncclParamGetI64, (ncclParamHandle_t h, int64_t *out), NULL)
FAKE_COMM(ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out), NULL)
FAKE_COMM(ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out), NULL)
FAKE_COMM(ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out), NULL)
FAKE_COMM(ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out), NULL)
FAKE_COMM(ncclParamGetStr, (ncclParamHandle_t h, const char **out), NULL)
FAKE_COMM(ncclParamGet, (ncclParamHandle_t h, void *out, int max, int *len), NULL)
FAKE_COMM(ncclParamGetParameter, (const char *key, const char **value, int *len), NULL)
FAKE_COMM(ncclParamGetAllParameterKeys, (const char ***table, int *len), NULL)
FAKE_COMM(ncclGroupStart, (void), NULL)
FAKE_COMM(ncclGroupEnd, (void), NULL)
FAKE_COMM(ncclGroupSimulateEnd, (ncclSimInfo_t * info), NULL)

FAKE_API const char *ncclGetErrorString(ncclResult_t result)
{
	note(NULL);
	return "fake libnccl";
}

FAKE_API const char *ncclGetLastError(ncclComm_t comm)
{
	note(comm);
	return "fake libnccl";
}

FAKE_API void ncclResetDebugInit(void)
{
	note(NULL);
}

FAKE_API void ncclParamDumpAll(void)
{
	note(NULL);
}
