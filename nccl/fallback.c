/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: the optional fallback to a real libnccl (WEFT_NCCL_FALLBACK)
 * on a shadow communicator, for collectives weft refuses. Nothing of NCCL
 * is loaded unless the fallback is asked for and NVLink multicast is off. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "wn.h"

static pthread_mutex_t fb_lock = PTHREAD_MUTEX_INITIALIZER;
static void *fb_handle; /* the real library once loaded; never closed (its threads may live on) */

/* Loads the real library on first use. Not cached on failure, so that a
 * corrected environment works on a later call. */
static void *fb_load(const char *fn)
{
	pthread_mutex_lock(&fb_lock);
	void *h = fb_handle;
	pthread_mutex_unlock(&fb_lock);
	if (h)
		return h;
	const char *path = getenv("WEFT_NCCL_FALLBACK");
	if (!path || !*path) {
		WN_ERROR("%s: weft does not support it, and WEFT_NCCL_FALLBACK (the path of a real libnccl.so.2 to "
			 "forward it to) is not set", fn);
		return NULL;
	}
	const char *nvls = getenv("NCCL_NVLS_ENABLE");
	if (!nvls || strcmp(nvls, "0") != 0) {
		WN_ERROR("%s: WEFT_NCCL_FALLBACK is set, but NCCL_NVLS_ENABLE=0 is not (it is %s%s%s): weft loads a real "
			 "NCCL only with NVLink multicast (NVLS) disabled, which weft keeps out of its processes; set "
			 "NCCL_NVLS_ENABLE=0 to allow the fallback", fn, nvls ? "'" : "unset", nvls ? nvls : "",
			 nvls ? "'" : "");
		return NULL;
	}
	/* DEEPBIND: the real library's calls to its own exported functions must
	 * reach it, not this library's interposed twins (LD_PRELOAD). */
	int flags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	flags &= ~RTLD_DEEPBIND; /* the sanitizer runtimes refuse it; tests do not preload */
#endif
	h = dlopen(path, flags);
	if (!h) {
		WN_ERROR("%s: WEFT_NCCL_FALLBACK=%s cannot be loaded: %s", fn, path, dlerror());
		return NULL;
	}
	void *ver = dlsym(h, "ncclGetVersion");
	if (!ver || ver == (void *)ncclGetVersion) {
		WN_ERROR("%s: WEFT_NCCL_FALLBACK=%s is %s", fn, path,
			 ver ? "libweft_nccl itself, not a real NCCL" : "not an NCCL library (no ncclGetVersion)");
		dlclose(h);
		return NULL;
	}
	int v = 0;
	((ncclResult_t(*)(int *))ver)(&v);
	pthread_mutex_lock(&fb_lock);
	if (fb_handle) {
		dlclose(h);
		h = fb_handle;
	} else {
		fb_handle = h;
		WN_INFO("fallback: loaded %s (NCCL version code %d) for calls weft refuses", path, v);
	}
	pthread_mutex_unlock(&fb_lock);
	return h;
}

void *wn_fallback_sym(const char *name, const char *why)
{
	void *h = fb_load(name);
	if (!h)
		return NULL;
	void *f = dlsym(h, name);
	if (!f)
		WN_ERROR("%s: %s, and the fallback library has no such function", name, why);
	return f;
}

typedef ncclResult_t (*get_id_fn)(ncclUniqueId *);
typedef ncclResult_t (*init_rank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*comm_fn)(ncclComm_t);

void *wn_fallback_shadow(struct ncclComm *comm)
{
	pthread_mutex_lock(&comm->shadow_lock);
	void *sh = comm->shadow;
	pthread_mutex_unlock(&comm->shadow_lock);
	if (sh)
		return sh;
	/* Every rank reaches here at the same call (collectives are called in the
	 * same order everywhere), so the exchange below lines up. */
	get_id_fn get_id = (get_id_fn)wn_fallback_sym("ncclGetUniqueId", "the shadow communicator needs it");
	init_rank_fn init = (init_rank_fn)wn_fallback_sym("ncclCommInitRank", "the shadow communicator needs it");
	ncclUniqueId id;
	memset(&id, 0, sizeof(id));
	if (comm->rank == 0 && get_id && init && get_id(&id) != ncclSuccess) {
		WN_ERROR("fallback: the real ncclGetUniqueId failed");
		memset(&id, 0, sizeof(id));
	}
	/* Rank 0's id reaches everyone; all-zero tells them it failed. A rank whose
	 * library did not load still takes part, so no rank waits forever. */
	ncclUniqueId *all = calloc((size_t)comm->nranks, sizeof(*all));
	if (!all)
		return NULL;
	int rc = weft_comm_allgather(comm->wc, &id, all, sizeof(id));
	static const ncclUniqueId zero;
	if (rc != 0 || memcmp(&all[0], &zero, sizeof(zero)) == 0 || !get_id || !init) {
		if (rc != 0)
			WN_ERROR("fallback: sharing the real NCCL's id failed: %s", weft_strerror(rc));
		else if (get_id && init)
			WN_ERROR("fallback: rank 0 could not make the real NCCL's id");
		free(all);
		return NULL;
	}
	id = all[0];
	free(all);
	ncclComm_t real = NULL;
	ncclResult_t r = init(&real, comm->nranks, id, comm->rank);
	if (r != ncclSuccess) {
		WN_ERROR("fallback: the real ncclCommInitRank failed: %s", ncclGetErrorString(r));
		return NULL;
	}
	pthread_mutex_lock(&comm->shadow_lock);
	comm->shadow = real;
	pthread_mutex_unlock(&comm->shadow_lock);
	WN_INFO("fallback: rank %d of %d has a shadow communicator in the real NCCL", comm->rank, comm->nranks);
	return real;
}

void wn_fallback_shadow_destroy(struct ncclComm *comm, int abort)
{
	pthread_mutex_lock(&comm->shadow_lock);
	void *sh = comm->shadow;
	comm->shadow = NULL;
	pthread_mutex_unlock(&comm->shadow_lock);
	if (!sh)
		return;
	pthread_mutex_lock(&fb_lock);
	void *h = fb_handle;
	pthread_mutex_unlock(&fb_lock);
	comm_fn f = h ? (comm_fn)dlsym(h, abort ? "ncclCommAbort" : "ncclCommDestroy") : NULL;
	if (f)
		f(sh);
}
