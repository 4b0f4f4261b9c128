/* SPDX-License-Identifier: Apache-2.0 */
/* weft's own nccl.h: the public API of NCCL 2.30.7 (types, values, struct
 * layouts, its 64 functions), so that programs written for NCCL compile and
 * link against libweft_nccl.so unchanged. docs/nccl-compat.md says which
 * functions weft serves and which it refuses. Needs no CUDA headers. */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

/* Versions up to 2.8 were coded X*1000+Y*100+Z, later ones X*10000+Y*100+Z. */
#define NCCL_VERSION(X, Y, Z) \
	(((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA runtime's stream handle. Declared here so that no CUDA header is
 * needed; the same typedef as the CUDA runtime's, which C11 and C++ accept twice. */
typedef struct CUstream_st *cudaStream_t;

typedef struct ncclComm *ncclComm_t;             /* a communicator */
typedef struct ncclWindow_vidmem *ncclWindow_t;  /* a registered memory window */
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclTimeout = 8,
	ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* The magic of NCCL_CONFIG_INITIALIZER (NCCL_CONFIG_MAGIC is weft's older name). */
#define NCCL_API_MAGIC 0xcafebeef
#define NCCL_CONFIG_MAGIC NCCL_API_MAGIC

/* Flags of ncclCommWindowRegister. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* Values of ncclConfig_t.CTAPolicy. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* Flags of ncclCommShrink. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* Flags of ncclCommRevoke (none defined yet: it must be 0). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Flags of ncclCommSuspend. */
#define NCCL_SUSPEND_MEM 0x01

/* Communicator options (the 2.30 layout, fields in this order). Start from
 * NCCL_CONFIG_INITIALIZER and set only what you mean to change. weft reads
 * `blocking` and `commName`; the other fields are accepted and ignored. A
 * config made with an older header (2.14 and later) is read by its `size`
 * and `version`: fields it lacks take their defaults, and fields a newer
 * header appends are ignored. */
typedef struct ncclConfig_v23000 {
	size_t size;          /* set by the initializer */
	unsigned int magic;   /* set by the initializer */
	unsigned int version; /* set by the initializer */
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
	int trafficClass;
	const char *commName;
	int collnetEnable;
	int CTAPolicy;
	int shrinkShare;
	int nvlsCTAs;
	int nChannelsPerNetPeer;
	int nvlinkCentricSched;
	int graphUsageMode;
	int numRmaCtx;
	int maxP2pPeers;
	int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                    \
	{                                                                                          \
		sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,    \
			NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,       \
			NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,       \
			NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,       \
			NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,       \
			NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,       \
			NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                               \
	}

/* Filled by ncclGroupSimulateEnd. */
typedef struct ncclSimInfo_v22200 {
	size_t size;
	unsigned int magic;
	unsigned int version;
	float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_MAGIC 0x74685283
#define NCCL_SIM_INFO_INITIALIZER \
	{ sizeof(ncclSimInfo_t), NCCL_SIM_INFO_MAGIC, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* What ncclCommMemStats reports. */
typedef enum {
	ncclStatGpuMemSuspend = 0,   /* GPU memory a suspend would release (bytes) */
	ncclStatGpuMemSuspended = 1, /* 1 while the comm is suspended, else 0 */
	ncclStatGpuMemPersist = 2,   /* GPU memory a suspend keeps (bytes) */
	ncclStatGpuMemTotal = 3      /* all GPU memory the comm holds (bytes) */
} ncclCommMemStat_t;

/* One entry of ncclWaitSignal: wait for opCnt more signals from peer on
 * signal index sigIdx of context ctx (both 0 in this API level). */
typedef struct {
	int opCnt;
	int peer;
	int sigIdx;
	int ctx;
} ncclWaitSignalDesc_t;

/* A parameter bound by ncclParamBind; owned by the library, never freed. */
typedef struct ncclParamHandle *ncclParamHandle_t;

/* Sizes the enum ncclRedOp_t so that ncclMaxRedOp never widens it. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
	ncclSum = 0,
	ncclProd = 1,
	ncclMax = 2,
	ncclMin = 3,
	ncclAvg = 4,
	/* Built-in operations end here; ncclRedOpCreate* hands out values from
	 * ncclNumOps up to ncclMaxRedOp. */
	ncclNumOps = 5,
	ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
	ncclInt8 = 0,
	ncclChar = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclInt = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclHalf = 6,
	ncclFloat32 = 7,
	ncclFloat = 7,
	ncclFloat64 = 8,
	ncclDouble = 8,
	ncclBfloat16 = 9,
	ncclFloat8e4m3 = 10,
	ncclFloat8e5m2 = 11,
	ncclNumTypes = 12
} ncclDataType_t;

/* Where the scalar of ncclRedOpCreatePreMulSum lives. */
typedef enum {
	ncclScalarDevice = 0,        /* device memory, read while the collective runs */
	ncclScalarHostImmediate = 1  /* host memory, read before the call returns */
} ncclScalarResidence_t;

/* Every function has a twin named with a leading 'p' (the profiling
 * interface), the same function under a second name. */
#define NCCL_WEFT_DECL(ret, name, args) \
	ret name args;                  \
	ret p##name args

/* Memory for zero-copy and registration (device memory, from the CUDA runtime). */
NCCL_WEFT_DECL(ncclResult_t, ncclMemAlloc, (void **ptr, size_t size));
NCCL_WEFT_DECL(ncclResult_t, ncclMemFree, (void *ptr));

/* NCCL_VERSION_CODE of the library loaded (weft reports 2.30.7's: the API
 * level it serves, docs/nccl-compat.md). */
NCCL_WEFT_DECL(ncclResult_t, ncclGetVersion, (int *version));

/* One rank makes the id and hands it to the others out of band. */
NCCL_WEFT_DECL(ncclResult_t, ncclGetUniqueId, (ncclUniqueId *uniqueId));

/* Communicator life cycle. Init blocks until every rank has arrived (inside
 * ncclGroupStart/End, until ncclGroupEnd); with config->blocking = 0 it
 * returns ncclInProgress at once, ncclCommGetAsyncError says when the comm
 * is ready, and calls on it wait until then. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommInitRankConfig,
	       (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t *config));
NCCL_WEFT_DECL(ncclResult_t, ncclCommInitRank, (ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank));
NCCL_WEFT_DECL(ncclResult_t, ncclCommInitAll, (ncclComm_t *comm, int ndev, const int *devlist));
NCCL_WEFT_DECL(ncclResult_t, ncclCommFinalize, (ncclComm_t comm));
NCCL_WEFT_DECL(ncclResult_t, ncclCommDestroy, (ncclComm_t comm));
NCCL_WEFT_DECL(ncclResult_t, ncclCommAbort, (ncclComm_t comm));
/* Stops what runs on the comm (locally); later collectives on it are
 * refused, destroy and shrink still work. revokeFlags: NCCL_REVOKE_DEFAULT. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags));
NCCL_WEFT_DECL(ncclResult_t, ncclCommSplit,
	       (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config));
NCCL_WEFT_DECL(ncclResult_t, ncclCommShrink,
	       (ncclComm_t comm, int *excludeRanksList, int excludeRanksCount, ncclComm_t *newcomm,
		ncclConfig_t *config, int shrinkFlags));
NCCL_WEFT_DECL(ncclResult_t, ncclCommInitRankScalable,
	       (ncclComm_t *newcomm, int nranks, int myrank, int nId, ncclUniqueId *commIds, ncclConfig_t *config));
/* NCCL 2.29's growing of a comm: one existing rank (the coordinator) makes
 * an id on it and hands it to the new ranks; the existing ranks call
 * ncclCommGrow with their comm, rank -1 and the id (coordinator) or NULL
 * (the others), the new ranks with comm NULL, the id and their rank. An id
 * serves one grow. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId *uniqueId));
NCCL_WEFT_DECL(ncclResult_t, ncclCommGrow,
	       (ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank, ncclComm_t *newcomm,
		ncclConfig_t *config));

/* Errors. */
NCCL_WEFT_DECL(const char *, ncclGetErrorString, (ncclResult_t result));
NCCL_WEFT_DECL(const char *, ncclGetLastError, (ncclComm_t comm));
/* Re-reads the logging settings from the environment (NCCL marks it deprecated). */
NCCL_WEFT_DECL(void, ncclResetDebugInit, (void));
NCCL_WEFT_DECL(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t *asyncError));

/* Queries. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int *count));
NCCL_WEFT_DECL(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int *device));
NCCL_WEFT_DECL(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int *rank));

/* Buffer registration. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void *buff, size_t size, void **handle));
NCCL_WEFT_DECL(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void *handle));
NCCL_WEFT_DECL(ncclResult_t, ncclCommWindowRegister,
	       (ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win, int winFlags));
NCCL_WEFT_DECL(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win));
NCCL_WEFT_DECL(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void **outUserPtr));

/* Releasing a comm's memory while keeping it, and its memory statistics. */
NCCL_WEFT_DECL(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags));
NCCL_WEFT_DECL(ncclResult_t, ncclCommResume, (ncclComm_t comm));
NCCL_WEFT_DECL(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value));

/* User-defined reduction operations. */
NCCL_WEFT_DECL(ncclResult_t, ncclRedOpCreatePreMulSum,
	       (ncclRedOp_t *op, void *scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
		ncclComm_t comm));
NCCL_WEFT_DECL(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm));

/* Collectives: every rank of comm calls them in the same order. With device
 * buffers they are enqueued on stream; with host buffers (weft's CPU path)
 * they complete before returning. Counts are elements. */
NCCL_WEFT_DECL(ncclResult_t, ncclReduce,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root,
		ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclBcast,
	       (void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclBroadcast,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
		ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclAllReduce,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
		ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclReduceScatter,
	       (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op,
		ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclAllGather,
	       (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
		cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclAlltoAll,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
		cudaStream_t stream));
/* Not NCCL's: RCCL's and MSCCL++'s v-alltoall, counts and displacements in
 * elements per rank. */
NCCL_WEFT_DECL(ncclResult_t, ncclAllToAllv,
	       (const void *sendbuff, const size_t sendcounts[], const size_t sdispls[], void *recvbuff,
		const size_t recvcounts[], const size_t rdispls[], ncclDataType_t datatype, ncclComm_t comm,
		cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclGather,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
		ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclScatter,
	       (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
		ncclComm_t comm, cudaStream_t stream));

/* Point to point: the peer makes the matching call with the same count and
 * type. Pairs that must progress together go in one group. */
NCCL_WEFT_DECL(ncclResult_t, ncclSend,
	       (const void *sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclRecv,
	       (void *recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
		cudaStream_t stream));

/* One-sided: write count elements of localbuff into peer's part of the
 * window peerWin (the handle this rank got from the collective
 * ncclCommWindowRegister) at byte offset peerWinOffset, then raise peer's
 * signal; ncclSignal raises it without data; ncclWaitSignal waits until each
 * descriptor's peer has raised this rank's signal opCnt more times. sigIdx,
 * ctx and flags are 0 in this API level. */
NCCL_WEFT_DECL(ncclResult_t, ncclPutSignal,
	       (const void *localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
		size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclSignal,
	       (int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream));
NCCL_WEFT_DECL(ncclResult_t, ncclWaitSignal,
	       (int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm, cudaStream_t stream));

/* Groups: calls between start and end are queued and issued at the outermost
 * end, so that one thread can drive several communicators and fuse sends and
 * receives. */
NCCL_WEFT_DECL(ncclResult_t, ncclGroupStart, (void));
NCCL_WEFT_DECL(ncclResult_t, ncclGroupEnd, (void));
NCCL_WEFT_DECL(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t *simInfo));

/* Parameters, by key (in weft: the environment variable of a weft parameter,
 * WEFT_<SECTION>_<KEY>, as weft-info -c lists them). Handles are the
 * library's; strings returned stay valid until the same call's next use on
 * the same thread. */
NCCL_WEFT_DECL(ncclResult_t, ncclParamBind, (ncclParamHandle_t *out, const char *key));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetI8, (ncclParamHandle_t h, int8_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetI16, (ncclParamHandle_t h, int16_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetI32, (ncclParamHandle_t h, int32_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetI64, (ncclParamHandle_t h, int64_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetU8, (ncclParamHandle_t h, uint8_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetU16, (ncclParamHandle_t h, uint16_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetU32, (ncclParamHandle_t h, uint32_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetU64, (ncclParamHandle_t h, uint64_t *out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetStr, (ncclParamHandle_t h, const char **out));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGet, (ncclParamHandle_t h, void *out, int maxLen, int *len));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetParameter, (const char *key, const char **value, int *valueLen));
NCCL_WEFT_DECL(ncclResult_t, ncclParamGetAllParameterKeys, (const char ***table, int *tableLen));
NCCL_WEFT_DECL(void, ncclParamDumpAll, (void));

#undef NCCL_WEFT_DECL

#ifdef __cplusplus
}
#endif
#endif /* NCCL_H_ */
