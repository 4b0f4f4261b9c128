/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: NCCL's communicator life cycle, queries, errors and memory
 * calls on top of weft's communicators (include/weft/weft.h). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "wn.h"

/* ------------------------------------------------------------- logging */

static int log_threshold = -1; /* -1: not read yet */
static _Thread_local char last_err[512];
static _Thread_local unsigned long n_errors; /* errors this thread logged (wn_error_count) */
static char last_err_any[512]; /* the latest of any thread, for ncclGetLastError(NULL) elsewhere */
static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;

static int read_threshold(void)
{
	/* WEFT_NCCL_LOG wins; else NCCL_DEBUG, so that users keep their habit;
	 * errors always show, as weft's own log does by default. */
	const char *v = getenv("WEFT_NCCL_LOG");
	if (!v)
		v = getenv("NCCL_DEBUG");
	if (!v)
		return 1;
	if (!strcasecmp(v, "none") || !strcasecmp(v, "error"))
		return 0;
	if (!strcasecmp(v, "warn"))
		return 1;
	if (!strcasecmp(v, "info"))
		return 2;
	if (!strcasecmp(v, "debug") || !strcasecmp(v, "trace"))
		return 3;
	return 1;
}

void wn_log_reset(void)
{
	__atomic_store_n(&log_threshold, read_threshold(), __ATOMIC_RELAXED);
}

void wn_log(int level, const char *fmt, ...)
{
	char msg[sizeof(last_err)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == 0) {
		n_errors++;
		memcpy(last_err, msg, sizeof(msg));
		pthread_mutex_lock(&last_lock);
		memcpy(last_err_any, msg, sizeof(msg));
		pthread_mutex_unlock(&last_lock);
	}
	int th = __atomic_load_n(&log_threshold, __ATOMIC_RELAXED);
	if (th < 0) {
		wn_log_reset();
		th = __atomic_load_n(&log_threshold, __ATOMIC_RELAXED);
	}
	if (level > th)
		return;
	static const char *const names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
	fprintf(stderr, "weft-nccl %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], msg);
}

void wn_set_last_error(const char *msg)
{
	snprintf(last_err, sizeof(last_err), "%s", msg);
}

unsigned long wn_error_count(void)
{
	return n_errors;
}

const char *wn_last_error(void)
{
	if (last_err[0])
		return last_err;
	static _Thread_local char copy[sizeof(last_err_any)];
	pthread_mutex_lock(&last_lock);
	memcpy(copy, last_err_any, sizeof(copy));
	pthread_mutex_unlock(&last_lock);
	return copy;
}

/* ------------------------------------------------------------- mapping */

ncclResult_t wn_result(int rc)
{
	switch (rc) {
	case 0:
		return ncclSuccess;
	case -EINVAL:
	case -ENOTSUP:
	case -ERANGE:
		return ncclInvalidArgument;
	case -ENOSYS:
	case -EPERM:
	case -EALREADY:
		return ncclInvalidUsage;
	case -WEFT_ERR_PEER:
	case -WEFT_ERR_PROTOCOL:
	case -WEFT_ERR_AUTH:
	case -WEFT_ERR_MISMATCH:
	case -ECONNRESET:
	case -ECONNREFUSED:
	case -EPIPE:
		return ncclRemoteError;
	case -WEFT_ERR_PLUGIN:
	case -WEFT_ERR_ABI:
	case -WEFT_ERR_CONFIG:
	case -WEFT_ERR_ABORTED:
	case -WEFT_ERR_TRANSPORT:
	case -WEFT_ERR_NO_DEVICE:
		return ncclInternalError;
	default:
		/* Any other negative errno is the operating system's (-ENOMEM,
		 * -ETIMEDOUT, -EADDRNOTAVAIL, ...). */
		return rc < 0 && rc > -WEFT_ERR_FIRST ? ncclSystemError : ncclInternalError;
	}
}

int wn_map_type(ncclDataType_t t, enum weft_datatype *out)
{
	static const enum weft_datatype map[ncclNumTypes] = {
		[ncclInt8] = WEFT_INT8,         [ncclUint8] = WEFT_UINT8,         [ncclInt32] = WEFT_INT32,
		[ncclUint32] = WEFT_UINT32,     [ncclInt64] = WEFT_INT64,         [ncclUint64] = WEFT_UINT64,
		[ncclFloat16] = WEFT_FLOAT16,   [ncclFloat32] = WEFT_FLOAT32,     [ncclFloat64] = WEFT_FLOAT64,
		[ncclBfloat16] = WEFT_BFLOAT16, [ncclFloat8e4m3] = WEFT_FP8_E4M3, [ncclFloat8e5m2] = WEFT_FP8_E5M2,
	};
	if ((int)t < 0 || (int)t >= ncclNumTypes)
		return -EINVAL;
	*out = map[t];
	return 0;
}

int wn_map_op(ncclRedOp_t op, enum weft_redop *out)
{
	static const enum weft_redop map[ncclNumOps] = {
		[ncclSum] = WEFT_SUM, [ncclProd] = WEFT_PROD, [ncclMax] = WEFT_MAX, [ncclMin] = WEFT_MIN, [ncclAvg] = WEFT_AVG,
	};
	if ((int)op < 0 || (int)op >= ncclNumOps)
		return -EINVAL;
	*out = map[op];
	return 0;
}

ncclResult_t wn_check_comm(struct ncclComm *comm, const char *fn)
{
	if (!comm) {
		WN_ERROR("%s: comm is NULL", fn);
		return ncclInvalidArgument;
	}
	if (comm->magic != WN_COMM_MAGIC) {
		WN_ERROR("%s: comm %p is not a live communicator of libweft_nccl (destroyed, or made by another library)",
			 fn, (const void *)comm);
		return ncclInvalidArgument;
	}
	/* A non-blocking init still running: the call waits for it, never fails. */
	ncclResult_t r = wn_comm_wait(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!comm->wc) {
		if (comm->state == WN_QUEUED)
			WN_ERROR("%s: comm %p is initialized at the end of its group, which has not ended", fn,
				 (void *)comm);
		else if (comm->state == WN_FAILED && comm->why[0])
			WN_ERROR("%s: comm %p failed to initialize: %s", fn, (void *)comm, comm->why);
		else
			WN_ERROR("%s: comm %p was finalized or failed to initialize", fn, (void *)comm);
		return ncclInvalidUsage;
	}
	return ncclSuccess;
}

/* ----------------------------------------------------------- version */

WN_API ncclResult_t ncclGetVersion(int *version)
{
	if (!version) {
		WN_ERROR("ncclGetVersion: version is NULL");
		return ncclInvalidArgument;
	}
	*version = NCCL_VERSION_CODE;
	return ncclSuccess;
}
WN_ALIAS(ncclGetVersion);

WN_API const char *ncclGetErrorString(ncclResult_t result)
{
	switch (result) {
	case ncclSuccess: return "no error";
	case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
	case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case ncclInternalError: return "internal error - please report this issue to the weft developers";
	case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
	case ncclRemoteError: return "remote process exited or there was a network error";
	case ncclInProgress: return "NCCL operation in progress";
	case ncclTimeout: return "timeout";
	default: return "unknown result code";
	}
}
WN_ALIAS(ncclGetErrorString);

WN_API const char *ncclGetLastError(ncclComm_t comm)
{
	(void)comm; /* NCCL ignores it too: the last error is per process */
	return wn_last_error();
}
WN_ALIAS(ncclGetLastError);

WN_API void ncclResetDebugInit(void)
{
	wn_log_reset();
}
WN_ALIAS(ncclResetDebugInit);

/* ------------------------------------------------------------- comms */

typedef int (*cuda_get_device_fn)(int *);

int wn_current_device(void)
{
	const char *v = getenv("WEFT_NCCL_DEVICE");
	if (v && *v) {
		char *end;
		long d = strtol(v, &end, 10);
		if (*end == '\0' && d >= 0 && d < 1 << 16)
			return (int)d;
		WN_WARN("WEFT_NCCL_DEVICE='%s' is not a device number; ignored", v);
	}
	/* Only when the application has the CUDA runtime loaded: this library
	 * never loads CUDA itself. */
	cuda_get_device_fn get = (cuda_get_device_fn)dlsym(RTLD_DEFAULT, "cudaGetDevice");
	int d = -1;
	if (get && get(&d) == 0)
		return d;
	return -1;
}

typedef int (*cuda_set_device_fn)(int);

/* The application's cudaGetDevice/cudaSetDevice, looked up once they exist:
 * wn_device_enter runs around every call on a comm, and dlsym is a search
 * through every loaded library. */
static cuda_get_device_fn cuda_get_fn;
static cuda_set_device_fn cuda_set_fn;

static int cuda_device_fns(cuda_get_device_fn *get, cuda_set_device_fn *set)
{
	*set = __atomic_load_n(&cuda_set_fn, __ATOMIC_ACQUIRE);
	if (*set) {
		*get = __atomic_load_n(&cuda_get_fn, __ATOMIC_RELAXED);
		return 1;
	}
	*get = (cuda_get_device_fn)dlsym(RTLD_DEFAULT, "cudaGetDevice");
	*set = (cuda_set_device_fn)dlsym(RTLD_DEFAULT, "cudaSetDevice");
	if (!*get || !*set)
		return 0;
	/* Threads racing here store the same values; get is published by set's release. */
	__atomic_store_n(&cuda_get_fn, *get, __ATOMIC_RELAXED);
	__atomic_store_n(&cuda_set_fn, *set, __ATOMIC_RELEASE);
	return 1;
}

int wn_device_enter(int dev)
{
	cuda_get_device_fn get;
	cuda_set_device_fn set;
	int cur = -1;
	if (dev < 0 || !cuda_device_fns(&get, &set) || get(&cur) != 0 || cur == dev)
		return -1;
	if (set(dev) != 0) {
		WN_WARN("cudaSetDevice(%d) failed; the call runs on device %d", dev, cur);
		return -1;
	}
	return cur;
}

void wn_device_leave(int prev)
{
	cuda_get_device_fn get;
	cuda_set_device_fn set;
	if (prev >= 0 && cuda_device_fns(&get, &set))
		set(prev);
}

struct ncclComm *wn_comm_new(int rank, int nranks, const ncclConfig_t *user, int device)
{
	/* Checked by the caller already (wn_check_config): no log here. */
	ncclConfig_t cfg;
	const ncclConfig_t *config = user && wn_config_read(user, &cfg, NULL) == ncclSuccess ? &cfg : NULL;
	struct ncclComm *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->magic = WN_COMM_MAGIC;
	c->rank = rank;
	c->nranks = nranks;
	c->device = device;
	c->blocking = 1;
	pthread_mutex_init(&c->shadow_lock, NULL);
	pthread_mutex_init(&c->op_lock, NULL);
	pthread_mutex_init(&c->state_lock, NULL);
	pthread_cond_init(&c->state_cv, NULL);
	if (config) {
		if (config->blocking != NCCL_CONFIG_UNDEF_INT)
			c->blocking = config->blocking;
		if (config->commName)
			snprintf(c->name, sizeof(c->name), "%s", config->commName);
	}
	return c;
}

void wn_comm_free(struct ncclComm *comm)
{
	if (!comm)
		return;
	comm->magic = 0;
	pthread_mutex_destroy(&comm->shadow_lock);
	pthread_mutex_destroy(&comm->op_lock);
	pthread_mutex_destroy(&comm->state_lock);
	pthread_cond_destroy(&comm->state_cv);
	free(comm->premul);
	wn_rma_free(comm);
	free(comm);
}

/* Where a field of ncclConfig_t first appeared, by the NCCL release whose
 * header added it: a config of an older version has it at its default. */
struct cfg_field {
	size_t off, len;
	int since; /* NCCL_VERSION code */
};

#define CFG_FIELD(f, since) {offsetof(ncclConfig_t, f), sizeof(((ncclConfig_t *)0)->f), since}
static const struct cfg_field cfg_fields[] = {
	CFG_FIELD(blocking, NCCL_VERSION(2, 14, 0)),
	CFG_FIELD(cgaClusterSize, NCCL_VERSION(2, 17, 0)),
	CFG_FIELD(minCTAs, NCCL_VERSION(2, 17, 0)),
	CFG_FIELD(maxCTAs, NCCL_VERSION(2, 17, 0)),
	CFG_FIELD(netName, NCCL_VERSION(2, 17, 0)),
	CFG_FIELD(splitShare, NCCL_VERSION(2, 18, 0)),
	CFG_FIELD(trafficClass, NCCL_VERSION(2, 25, 0)),
	CFG_FIELD(commName, NCCL_VERSION(2, 27, 0)),
	CFG_FIELD(collnetEnable, NCCL_VERSION(2, 27, 0)),
	CFG_FIELD(CTAPolicy, NCCL_VERSION(2, 27, 0)),
	CFG_FIELD(shrinkShare, NCCL_VERSION(2, 27, 0)),
	CFG_FIELD(nvlsCTAs, NCCL_VERSION(2, 27, 0)),
	CFG_FIELD(nChannelsPerNetPeer, NCCL_VERSION(2, 28, 0)),
	CFG_FIELD(nvlinkCentricSched, NCCL_VERSION(2, 28, 0)),
	CFG_FIELD(graphUsageMode, NCCL_VERSION(2, 29, 0)),
	CFG_FIELD(numRmaCtx, NCCL_VERSION(2, 29, 0)),
	CFG_FIELD(maxP2pPeers, NCCL_VERSION(2, 30, 0)),
	CFG_FIELD(graphStreamOrdering, NCCL_VERSION(2, 30, 0)),
};
#undef CFG_FIELD

/* The smallest layout: NCCL 2.14's {size, magic, version, blocking}. */
#define CFG_MIN_SIZE (offsetof(ncclConfig_t, blocking) + sizeof(int))

ncclResult_t wn_config_read(const ncclConfig_t *config, ncclConfig_t *out, const char *fn)
{
	const ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
	*out = init;
	if (!config)
		return ncclSuccess;
	/* Only the header is read before the size is known: a 2.14 config is
	 * 24 bytes, and bytes past the caller's struct are not its. */
	size_t size;
	unsigned magic, version;
	memcpy(&size, (const char *)config + offsetof(ncclConfig_t, size), sizeof(size));
	memcpy(&magic, (const char *)config + offsetof(ncclConfig_t, magic), sizeof(magic));
	memcpy(&version, (const char *)config + offsetof(ncclConfig_t, version), sizeof(version));
	if (magic != NCCL_API_MAGIC || size < CFG_MIN_SIZE) {
		if (fn)
			WN_ERROR("%s: config was not set from NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu; NCCL's "
				 "smallest, 2.14's, is %zu bytes)", fn, magic, size, CFG_MIN_SIZE);
		return ncclInvalidArgument;
	}
	if (version < NCCL_VERSION(2, 14, 0)) {
		if (fn)
			WN_ERROR("%s: config->version is %u; configs exist since NCCL 2.14 (%d)", fn, version,
				 NCCL_VERSION(2, 14, 0));
		return ncclInvalidArgument;
	}
	/* A field is the caller's when its struct holds it (size) and its header
	 * had it (version); fields of later headers than this one's are past
	 * sizeof(ncclConfig_t) and never read. */
	for (size_t i = 0; i < sizeof(cfg_fields) / sizeof(cfg_fields[0]); i++) {
		const struct cfg_field *f = &cfg_fields[i];
		if (f->off + f->len <= size && (int)version >= f->since)
			memcpy((char *)out + f->off, (const char *)config + f->off, f->len);
	}
	out->size = sizeof(*out);
	out->version = version;
	if (out->blocking != NCCL_CONFIG_UNDEF_INT && out->blocking != 0 && out->blocking != 1) {
		if (fn)
			WN_ERROR("%s: config->blocking is %d; it must be 0 or 1", fn, out->blocking);
		return ncclInvalidArgument;
	}
	return ncclSuccess;
}

ncclResult_t wn_check_config(const ncclConfig_t *config, const char *fn)
{
	ncclConfig_t cfg;
	return wn_config_read(config, &cfg, fn);
}

int wn_comm_make(struct ncclComm *c, const struct weft_unique_id *id, const char *fn, weft_comm_t **wc)
{
	/* The rank's transports open on its own GPU (ncclCommInitAll makes the
	 * ranks of several GPUs on threads of one process). */
	int prev = wn_device_enter(c->device);
	int rc = weft_comm_create(id, c->nranks, c->rank, wc);
	wn_device_leave(prev);
	if (rc != 0) {
		char detail[256] = "";
		weft_last_error(detail, sizeof(detail));
		WN_ERROR("%s: rank %d of %d: weft_comm_create failed: %s%s%s", fn, c->rank, c->nranks, weft_strerror(rc),
			 detail[0] ? ": " : "", detail);
		return rc;
	}
	WN_INFO("%s: rank %d of %d ready%s%s (device %d)", fn, c->rank, c->nranks, c->name[0] ? ", comm " : "",
		c->name, c->device);
	return 0;
}

ncclResult_t wn_init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank, const ncclConfig_t *config,
			  int device, const char *fn, int *wrc)
{
	ncclResult_t r;
	*wrc = 0;
	if (!out) {
		WN_ERROR("%s: comm out-pointer is NULL", fn);
		return ncclInvalidArgument;
	}
	/* NULL until it succeeds: a caller who ignores a refusal must not go on
	 * with whatever comm the variable held before. */
	*out = NULL;
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		WN_ERROR("%s: rank %d of %d is out of range", fn, rank, nranks);
		return ncclInvalidArgument;
	}
	if ((r = wn_check_config(config, fn)) != ncclSuccess)
		return r;
	struct ncclComm *c = wn_comm_new(rank, nranks, config, device);
	if (!c) {
		WN_ERROR("%s: out of memory", fn);
		return ncclSystemError;
	}
	struct weft_unique_id wid;
	memcpy(wid.internal, id->internal, sizeof(wid.internal));
	if (wn_group_depth() > 0) {
		/* Inside a group NCCL defers the rendezvous to ncclGroupEnd, so that
		 * one thread may initialize several ranks. */
		if ((r = wn_group_add_init(c, &wid)) != ncclSuccess) {
			wn_comm_free(c);
			return r;
		}
		c->state = WN_QUEUED;
		*out = c;
		return ncclSuccess;
	}
	if (!c->blocking) {
		/* The handle is the caller's now; ncclCommGetAsyncError says when it
		 * is ready, and calls on it wait for that. */
		*out = c;
		return wn_init_start(c, &wid, fn);
	}
	weft_comm_t *wc = NULL;
	if ((*wrc = wn_comm_make(c, &wid, fn, &wc)) != 0) {
		wn_comm_free(c);
		return wn_result(*wrc);
	}
	c->wc = wc;
	*out = c;
	return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const ncclUniqueId *id, int rank,
			      const ncclConfig_t *config, int device, const char *fn)
{
	int wrc;
	return wn_init_rank(out, nranks, id, rank, config, device, fn, &wrc);
}

WN_API ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	if (!uniqueId) {
		WN_ERROR("ncclGetUniqueId: uniqueId is NULL");
		return ncclInvalidArgument;
	}
	struct weft_unique_id id;
	int rc = weft_get_unique_id(&id);
	if (rc != 0) {
		/* All zeros: an init given this id refuses it by name. */
		memset(uniqueId, 0, sizeof(*uniqueId));
		WN_ERROR("ncclGetUniqueId: weft_get_unique_id failed: %s", weft_strerror(rc));
		return wn_result(rc);
	}
	_Static_assert(sizeof(id.internal) == sizeof(uniqueId->internal), "unique id sizes differ");
	memcpy(uniqueId->internal, id.internal, sizeof(uniqueId->internal));
	return ncclSuccess;
}
WN_ALIAS(ncclGetUniqueId);

WN_API ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return init_rank(comm, nranks, &commId, rank, NULL, wn_current_device(), "ncclCommInitRank");
}
WN_ALIAS(ncclCommInitRank);

WN_API ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
					   ncclConfig_t *config)
{
	return init_rank(comm, nranks, &commId, rank, config, wn_current_device(), "ncclCommInitRankConfig");
}
WN_ALIAS(ncclCommInitRankConfig);

WN_API ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
					     ncclUniqueId *commIds, ncclConfig_t *config)
{
	static const char fn[] = "ncclCommInitRankScalable";
	if (newcomm)
		*newcomm = NULL;
	if (nId < 1 || !commIds) {
		WN_ERROR("%s: needs at least one unique id (nId %d, commIds %p)", fn, nId, (void *)commIds);
		return ncclInvalidArgument;
	}
	/* weft's bootstrap meets at one root: the first id's. The roots of the
	 * other ids stay unused (their makers' ranks still reach the first). */
	if (nId > 1)
		WN_INFO("%s: %d ids given; weft's bootstrap uses the first", fn, nId);
	return init_rank(newcomm, nranks, &commIds[0], myrank, config, wn_current_device(), fn);
}
WN_ALIAS(ncclCommInitRankScalable);

WN_API ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist)
{
	static const char fn[] = "ncclCommInitAll";
	if (!comms || ndev < 1) {
		WN_ERROR("%s: needs a comm array and ndev >= 1 (ndev %d)", fn, ndev);
		return ncclInvalidArgument;
	}
	memset(comms, 0, (size_t)ndev * sizeof(*comms));
	if (wn_group_depth() > 0) {
		/* Its own group must be the outermost, or its ranks would not exist
		 * when it returns. */
		WN_ERROR("%s: inside ncclGroupStart/End; call it outside groups", fn);
		return ncclInvalidUsage;
	}
	ncclUniqueId id;
	ncclResult_t r = ncclGetUniqueId(&id);
	if (r != ncclSuccess)
		return r;
	/* Every rank lives in this process: a group runs their rendezvous on
	 * threads of their own (weft supports several ranks per process). */
	ncclComm_t tmp[ndev];
	memset(tmp, 0, sizeof(tmp));
	if ((r = ncclGroupStart()) != ncclSuccess)
		return r;
	for (int i = 0; i < ndev && r == ncclSuccess; i++) {
		struct weft_unique_id wid;
		memcpy(wid.internal, id.internal, sizeof(wid.internal));
		struct ncclComm *c = wn_comm_new(i, ndev, NULL, devlist ? devlist[i] : i);
		if (!c) {
			WN_ERROR("%s: out of memory", fn);
			r = ncclSystemError;
			break;
		}
		if ((r = wn_group_add_init(c, &wid)) != ncclSuccess) {
			wn_comm_free(c);
			break;
		}
		tmp[i] = c;
	}
	ncclResult_t e = ncclGroupEnd();
	if (r == ncclSuccess)
		r = e;
	for (int i = 0; i < ndev && r == ncclSuccess; i++)
		if (!tmp[i]->wc)
			r = tmp[i]->init_rc ? (ncclResult_t)tmp[i]->init_rc : ncclInternalError;
	if (r != ncclSuccess) {
		for (int i = 0; i < ndev; i++)
			if (tmp[i]) {
				if (tmp[i]->wc) {
					weft_comm_abort(tmp[i]->wc);
					weft_comm_destroy(tmp[i]->wc);
				}
				wn_comm_free(tmp[i]);
			}
		return r;
	}
	memcpy(comms, tmp, sizeof(tmp));
	return ncclSuccess;
}
WN_ALIAS(ncclCommInitAll);

/* ------------------------------------------------------------ cliques */

int wn_clique_make(struct ncclComm **comms, int n)
{
	struct wn_clique *cl = calloc(1, sizeof(*cl) + (size_t)n * sizeof(cl->members[0]));
	if (!cl)
		return -ENOMEM;
	pthread_mutex_init(&cl->lock, NULL);
	cl->n = n;
	for (int i = 0; i < n; i++) {
		cl->members[i] = comms[i];
		comms[i]->clique = cl;
		comms[i]->clique_total = n;
	}
	return 0;
}

static void *destroy_thread(void *arg)
{
	struct ncclComm *c = arg;
	int rc = weft_comm_destroy(c->wc);
	if (rc != 0)
		WN_ERROR("ncclCommDestroy: rank %d: %s", c->rank, weft_strerror(rc));
	c->init_rc = rc;
	c->wc = NULL;
	return NULL;
}

/* Destroys the released members of a clique together, frees them and it.
 * Returns the first weft error. */
static int clique_finish(struct wn_clique *cl, int total)
{
	pthread_t th[total];
	int started[total];
	int first = 0;
	for (int i = 0; i < total; i++) {
		struct ncclComm *c = cl->members[i];
		started[i] = 0;
		if (!c || !c->wc)
			continue;
		wn_fallback_shadow_destroy(c, 0);
		if (pthread_create(&th[i], NULL, destroy_thread, c) == 0)
			started[i] = 1;
		else
			destroy_thread(c); /* the rest may wait on it; still the best left */
	}
	for (int i = 0; i < total; i++) {
		struct ncclComm *c = cl->members[i];
		if (started[i])
			pthread_join(th[i], NULL);
		if (c && c->init_rc && !first)
			first = c->init_rc;
		wn_comm_free(c);
	}
	pthread_mutex_destroy(&cl->lock);
	free(cl);
	return first;
}

/* A member leaves its clique: released (destroy) or aborted. Returns the
 * weft code of the final destruction when this was the last, else 0. */
static int clique_leave(struct ncclComm *c, int aborted, int total)
{
	struct wn_clique *cl = c->clique;
	pthread_mutex_lock(&cl->lock);
	if (aborted) {
		for (int i = 0; i < total; i++)
			if (cl->members[i] == c)
				cl->members[i] = NULL;
		cl->n--;
	} else {
		c->released = 1;
		c->magic = 0; /* no further use by the application */
		cl->released++;
	}
	int last = cl->released == cl->n;
	pthread_mutex_unlock(&cl->lock);
	return last ? clique_finish(cl, total) : 0;
}

WN_API ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	ncclResult_t r = wn_check_comm(comm, "ncclCommFinalize");
	if (r != ncclSuccess)
		return r;
	if (comm->revoked) {
		WN_ERROR("ncclCommFinalize: comm %p was revoked; as in NCCL, destroy it instead", (void *)comm);
		return ncclInvalidUsage;
	}
	/* A clique's ranks are destroyed together at their last ncclCommDestroy. */
	if (comm->clique)
		return ncclSuccess;
	/* weft's destroy is the collective, flushing half: it returns once every
	 * connected peer has closed its side. What is left for ncclCommDestroy is
	 * local. */
	wn_fallback_shadow_destroy(comm, 0);
	int rc = weft_comm_destroy(comm->wc);
	comm->wc = NULL;
	if (rc != 0)
		WN_ERROR("ncclCommFinalize: rank %d: %s", comm->rank, weft_strerror(rc));
	return wn_result(rc);
}
WN_ALIAS(ncclCommFinalize);

WN_API ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	if (comm->magic != WN_COMM_MAGIC) {
		WN_ERROR("ncclCommDestroy: comm %p is not a live communicator of libweft_nccl", (void *)comm);
		return ncclInvalidArgument;
	}
	/* A non-blocking init or a split from it still running: destroy waits. */
	if (wn_comm_wait(comm, "ncclCommDestroy") != ncclSuccess)
		return ncclInvalidArgument;
	if (comm->clique)
		return wn_result(clique_leave(comm, 0, comm->clique_total));
	int rc = 0;
	wn_fallback_shadow_destroy(comm, 0);
	if (comm->wc) {
		rc = weft_comm_destroy(comm->wc);
		if (rc != 0)
			WN_ERROR("ncclCommDestroy: rank %d: %s", comm->rank, weft_strerror(rc));
	}
	wn_comm_free(comm);
	return wn_result(rc);
}
WN_ALIAS(ncclCommDestroy);

void wn_comm_teardown(struct ncclComm *comm)
{
	wn_fallback_shadow_destroy(comm, 1);
	if (comm->wc) {
		/* Aborted first, so that destroy skips every flush and wait. */
		weft_comm_abort(comm->wc);
		weft_comm_destroy(comm->wc);
		comm->wc = NULL;
	}
	if (comm->clique)
		clique_leave(comm, 1, comm->clique_total);
	wn_comm_free(comm);
}

WN_API ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	if (comm->magic != WN_COMM_MAGIC) {
		WN_ERROR("ncclCommAbort: comm %p is not a live communicator of libweft_nccl", (void *)comm);
		return ncclInvalidArgument;
	}
	/* An init or split still running in the background: it ends there, and
	 * frees the comm, without this call waiting for it. */
	if (!wn_comm_abandon(comm))
		wn_comm_teardown(comm);
	return ncclSuccess;
}
WN_ALIAS(ncclCommAbort);

WN_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm || comm->magic != WN_COMM_MAGIC || !asyncError) {
		WN_ERROR("ncclCommGetAsyncError: %s", !asyncError ? "asyncError is NULL" : "comm is not a live communicator");
		/* Never ncclSuccess for a comm that is not one. */
		if (asyncError)
			*asyncError = ncclInvalidArgument;
		return ncclInvalidArgument;
	}
	pthread_mutex_lock(&comm->state_lock);
	int st = comm->state;
	weft_comm_t *wc = comm->wc;
	pthread_mutex_unlock(&comm->state_lock);
	if (st == WN_INIT || st == WN_QUEUED) {
		*asyncError = ncclInProgress;
		return ncclSuccess;
	}
	if (wc && comm->revoked) {
		/* The revoke aborted wc, which is what it asked: the comm is quiet. */
		*asyncError = ncclSuccess;
		return ncclSuccess;
	}
	if (!wc) {
		*asyncError = comm->init_rc ? (ncclResult_t)comm->init_rc : ncclSuccess;
		/* The reason was logged on the thread that ran the init. */
		if (st == WN_FAILED && comm->why[0])
			wn_set_last_error(comm->why);
		return ncclSuccess;
	}
	int rc = weft_comm_status(wc);
	if (rc != 0)
		WN_ERROR("rank %d: communicator failed: %s", comm->rank, weft_strerror(rc));
	*asyncError = wn_result(rc);
	return ncclSuccess;
}
WN_ALIAS(ncclCommGetAsyncError);

/* ncclCommRevoke: what runs on the comm stops (weft_comm_abort: calls
 * pending on it, also on other threads, return) and later collectives are
 * refused; destroy, abort and shrink still serve it. Local, as NCCL's. */
WN_API ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags)
{
	static const char fn[] = "ncclCommRevoke";
	if (!comm)
		return ncclSuccess; /* as NCCL */
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (revokeFlags != NCCL_REVOKE_DEFAULT) {
		WN_ERROR("%s: revokeFlags 0x%x; NCCL 2.30 defines only NCCL_REVOKE_DEFAULT (0)", fn, (unsigned)revokeFlags);
		return ncclInvalidArgument;
	}
	if (comm->revoked) {
		WN_ERROR("%s: comm %p was revoked already", fn, (void *)comm);
		return ncclInvalidArgument;
	}
	comm->revoked = 1;
	weft_comm_abort(comm->wc);
	WN_INFO("%s: rank %d: revoked; calls on it stop, and only destroy, abort and shrink serve it now", fn,
		comm->rank);
	return ncclSuccess;
}
WN_ALIAS(ncclCommRevoke);

/* Suspending a comm's memory needs a core that can release a comm's buffers
 * and make them again; weft's cannot, so these answer as NCCL does with its
 * memory manager disabled (NCCL_MEM_MANAGER_DISABLE=1): a suspend of memory
 * is refused, and so are the byte counts. Nothing is ever suspended. */
WN_API ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags)
{
	static const char fn[] = "ncclCommSuspend";
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (flags & ~NCCL_SUSPEND_MEM) {
		WN_ERROR("%s: flags 0x%x has bits NCCL 2.30 does not define (only NCCL_SUSPEND_MEM, 0x%x)", fn,
			 (unsigned)flags, NCCL_SUSPEND_MEM);
		return ncclInvalidArgument;
	}
	if (flags & NCCL_SUSPEND_MEM) {
		WN_ERROR("%s: NCCL_SUSPEND_MEM is not supported: weft cannot release a communicator's memory and keep "
			 "the communicator (as NCCL with NCCL_MEM_MANAGER_DISABLE=1); the comm stays active", fn);
		return ncclInvalidUsage;
	}
	return ncclSuccess; /* nothing asked to be suspended */
}
WN_ALIAS(ncclCommSuspend);

WN_API ncclResult_t ncclCommResume(ncclComm_t comm)
{
	/* Nothing is ever suspended (ncclCommSuspend): the comm is active. */
	return wn_check_comm(comm, "ncclCommResume");
}
WN_ALIAS(ncclCommResume);

WN_API ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
	static const char fn[] = "ncclCommMemStats";
	/* A refusal leaves a count no comm holds. */
	if (value)
		*value = UINT64_MAX;
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!value) {
		WN_ERROR("%s: value is NULL", fn);
		return ncclInvalidArgument;
	}
	switch (stat) {
	case ncclStatGpuMemSuspended:
		*value = 0;
		return ncclSuccess;
	case ncclStatGpuMemSuspend:
	case ncclStatGpuMemPersist:
	case ncclStatGpuMemTotal:
		WN_ERROR("%s: statistic %d is not supported: weft does not count the GPU memory of a communicator "
			 "(only ncclStatGpuMemSuspended, always 0, is)", fn, (int)stat);
		return ncclInvalidUsage;
	default:
		WN_ERROR("%s: statistic %d is not one of NCCL 2.30's", fn, (int)stat);
		return ncclInvalidArgument;
	}
}
WN_ALIAS(ncclCommMemStats);

/* The checks of the getters below: a usable comm and an out-pointer. On a
 * refusal *out is -1, which no rank, count or device is. */
static ncclResult_t check_comm_out(const ncclComm_t comm, int *out, const char *fn, const char *what)
{
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r == ncclSuccess && !out) {
		WN_ERROR("%s: %s is NULL", fn, what);
		r = ncclInvalidArgument;
	}
	if (r != ncclSuccess && out)
		*out = -1;
	return r;
}

WN_API ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	ncclResult_t r = check_comm_out(comm, count, "ncclCommCount", "count");
	if (r == ncclSuccess)
		*count = comm->nranks;
	return r;
}
WN_ALIAS(ncclCommCount);

WN_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	ncclResult_t r = check_comm_out(comm, rank, "ncclCommUserRank", "rank");
	if (r == ncclSuccess)
		*rank = comm->rank;
	return r;
}
WN_ALIAS(ncclCommUserRank);

WN_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	ncclResult_t r = check_comm_out(comm, device, "ncclCommCuDevice", "device");
	if (r == ncclSuccess)
		*device = comm->device;
	return r;
}
WN_ALIAS(ncclCommCuDevice);

/* ------------------------------------------------------------- memory */


typedef const char *(*cuda_error_name_fn)(int);

/* The runtime's name of a CUDA error (cudaErrorMemoryAllocation), through the
 * application's libcudart as every CUDA call here; its number where none is. */
const char *wn_cuda_error_name(int err)
{
	static __thread char buf[32];
	cuda_error_name_fn f = (cuda_error_name_fn)dlsym(RTLD_DEFAULT, "cudaGetErrorName");
	const char *s = f ? f(err) : NULL;
	if (s)
		return s;
	snprintf(buf, sizeof(buf), "CUDA error %d", err);
	return buf;
}

/* The memory type of buff, from the application's CUDA runtime when loaded.
 * cudaPointerAttributes starts {int type; int device; void *dev; void *host}
 * since CUDA 10; type 2 is device, 3 managed. */
enum weft_mem_type wn_mem_type(const void *buff)
{
	typedef int (*attr_fn)(void *, const void *);
	attr_fn get = (attr_fn)dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
	if (!get)
		return WEFT_MEM_HOST;
	struct {
		int type;
		int device;
		void *dev;
		void *host;
		char spare[64]; /* room for fields later runtimes append */
	} a;
	memset(&a, 0, sizeof(a));
	if (get(&a, buff) != 0)
		return WEFT_MEM_HOST;
	return a.type == 2 || a.type == 3 ? WEFT_MEM_CUDA : WEFT_MEM_HOST;
}

int wn_copy_to_host(void *dst, const void *src, size_t n, void *stream)
{
	typedef int (*copy_fn)(void *, const void *, size_t, int, void *);
	typedef int (*sync_fn)(void *);
	copy_fn copy = (copy_fn)dlsym(RTLD_DEFAULT, "cudaMemcpyAsync");
	sync_fn sync = (sync_fn)dlsym(RTLD_DEFAULT, "cudaStreamSynchronize");
	if (!copy || !sync) {
		WN_ERROR("a device scalar for host buffers: no CUDA runtime in this process to read it with");
		return -ENOSYS;
	}
	int err = copy(dst, src, n, 2 /* cudaMemcpyDeviceToHost */, stream);
	if (err == 0)
		err = sync(stream);
	if (err != 0) {
		WN_ERROR("reading a device scalar for host buffers failed: %s", wn_cuda_error_name(err));
		return -WEFT_ERR_TRANSPORT;
	}
	return 0;
}

WN_API ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
	static const char fn[] = "ncclCommRegister";
	if (handle)
		*handle = NULL;
	ncclResult_t r = wn_check_comm(comm, fn);
	if (r != ncclSuccess)
		return r;
	if (!handle || (!buff && size > 0)) {
		WN_ERROR("%s: %s", fn, !handle ? "handle is NULL" : "buff is NULL");
		return ncclInvalidArgument;
	}
	weft_mem_t *mem = NULL;
	int rc = weft_mem_register(comm->wc, buff, size, wn_mem_type(buff), &mem);
	if (rc != 0) {
		WN_ERROR("%s: weft_mem_register of %zu bytes failed: %s", fn, size, weft_strerror(rc));
		return wn_result(rc);
	}
	*handle = mem;
	return ncclSuccess;
}
WN_ALIAS(ncclCommRegister);

WN_API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
	ncclResult_t r = wn_check_comm(comm, "ncclCommDeregister");
	if (r != ncclSuccess)
		return r;
	if (!handle) {
		WN_ERROR("ncclCommDeregister: handle is NULL (what a failed ncclCommRegister leaves)");
		return ncclInvalidArgument;
	}
	return wn_result(weft_mem_deregister(handle));
}
WN_ALIAS(ncclCommDeregister);
