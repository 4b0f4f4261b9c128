/* SPDX-License-Identifier: Apache-2.0 */
/* weft-perf on device memory: buffers and streams through the CUDA runtime
 * found at run time (tools/cudart_dl.c), CUDA-graph timing (--graph), and
 * --op put|pingpong through libweft-perf-gpu.so (tools/perf_gpu.cu). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/weft.h>

#include "cudart_dl.h"
#include "perf_gpu.h"
#include "wp.h"

/* --mem cuda: the CUDA runtime, found at run time (tools/cudart_dl.c). */
struct cudart_dl wp_cu;

/* --op put|pingpong --mem cuda: libweft-perf-gpu.so (tools/perf_gpu.cu), loaded
 * before the ranks fork; it links CUDA, weft-perf does not. */
static struct gpu_lib {
	void *handle;
	weft_perf_gpu_probe_fn probe;
	weft_perf_gpu_rank_setup_fn rank_setup;
	weft_perf_gpu_run_fn run;
} gpu;

/* Buffers the benchmark hands to weft: host memory, or device memory with
 * --mem cuda. The host fills and checks them through wp_dev_put/wp_dev_get. */
void *wp_dev_alloc(const struct opts *o, size_t len)
{
	if (!o->mem_cuda)
		return wp_alloc_buf(len);
	void *p = NULL;
	return wp_cu.malloc_(&p, len ? len : 1) == 0 ? p : NULL;
}

void wp_dev_free(const struct opts *o, void *p)
{
	if (!p)
		return;
	if (o->mem_cuda)
		wp_cu.free_(p);
	else
		free(p);
}

/* Host bytes into a buffer of wp_dev_alloc, and back. Returns 0 or -EIO. */
int wp_dev_put(const struct opts *o, void *dst, const void *src, size_t n)
{
	if (!o->mem_cuda) {
		if (dst != src)
			memmove(dst, src, n);
		return 0;
	}
	return n == 0 || wp_cu.memcpy_(dst, src, n, CUDART_H2D) == 0 ? 0 : -EIO;
}

int wp_dev_get(const struct opts *o, void *dst, const void *src, size_t n)
{
	if (!o->mem_cuda) {
		if (dst != src)
			memmove(dst, src, n);
		return 0;
	}
	return n == 0 || wp_cu.memcpy_(dst, src, n, CUDART_D2H) == 0 ? 0 : -EIO;
}

/* Waits for what this rank enqueued (--mem cuda); host calls completed already. */
int wp_coll_sync(const struct run *r)
{
	if (!r->stream || wp_cu.stream_sync(r->stream) == 0)
		return 0;
	return wp_fail(r, -EIO, "cudaStreamSynchronize");
}

/* --graph N: o->iters calls captured in one CUDA graph, launched N times and
 * timed with CUDA events, as nccl-tests' -G does. Returns us per call. */
int wp_coll_time_graph(const struct run *r, enum lib lib, const struct coll_shape *s, const struct coll_bufs *b,
		       double *us)
{
	const struct opts *o = r->o;
	void *g = NULL, *exec = NULL, *ev[2] = {NULL, NULL};
	int rc = 0;
	if (wp_cu.begin_capture(r->stream, CUDART_CAPTURE_RELAXED) != 0)
		return wp_fail(r, -EIO, "cudaStreamBeginCapture");
	for (int it = 0; it < o->iters && rc == 0; it++)
		if ((rc = wp_lib_call(r, lib, s, b->send, b->recv)) != 0)
			wp_fail(r, rc, "%s %s of %zu bytes under graph capture", wp_lib_names[lib],
				wp_colls[o->coll].name, s->bytes);
	if (wp_cu.end_capture(r->stream, &g) != 0 || !g)
		return rc ? rc : wp_fail(r, -EIO, "cudaStreamEndCapture");
	if (rc == 0 && wp_cu.instantiate(&exec, g, 0) != 0)
		rc = wp_fail(r, -EIO, "cudaGraphInstantiate");
	if (rc == 0 && (wp_cu.event_create(&ev[0]) != 0 || wp_cu.event_create(&ev[1]) != 0))
		rc = wp_fail(r, -EIO, "cudaEventCreate");
	/* One launch to warm the graph up, then the timed ones. */
	if (rc == 0 && (wp_cu.graph_launch(exec, r->stream) != 0 || (rc = wp_coll_sync(r)) != 0))
		rc = rc ? rc : wp_fail(r, -EIO, "cudaGraphLaunch");
	if (rc == 0 && (rc = weft_comm_barrier(r->comm)) != 0)
		wp_fail(r, rc, "weft_comm_barrier");
	if (rc == 0) {
		wp_cu.event_record(ev[0], r->stream);
		for (int l = 0; l < o->graph && rc == 0; l++)
			if (wp_cu.graph_launch(exec, r->stream) != 0)
				rc = wp_fail(r, -EIO, "cudaGraphLaunch");
		wp_cu.event_record(ev[1], r->stream);
		float ms = 0;
		if (rc == 0 && (wp_cu.event_sync(ev[1]) != 0 || wp_cu.event_elapsed(&ms, ev[0], ev[1]) != 0))
			rc = wp_fail(r, -EIO, "timing the graph launches with CUDA events");
		*us = o->graph && o->iters ? ms * 1e3 / ((double)o->graph * o->iters) : 0;
	}
	for (int k = 0; k < 2; k++)
		if (ev[k])
			wp_cu.event_destroy(ev[k]);
	if (exec)
		wp_cu.exec_destroy(exec);
	wp_cu.graph_destroy(g);
	return rc;
}

/* --mem cuda, in each rank's process before its communicator exists (CUDA
 * must not be touched before --np forks): the runtime, the GPU of the local
 * rank, and the stream every call is enqueued on. 0, or 1 after a message. */
int wp_cuda_rank_setup(const struct opts *o, int local_rank, void **stream)
{
	*stream = NULL;
	if (!o->mem_cuda)
		return 0;
	if (o->bench != BENCH_COLL) {
		/* put/pingpong: the GPU library owns CUDA and its streams. */
		char why[512] = "";
		if (gpu.rank_setup(local_rank, why, sizeof(why)) != 0) {
			fprintf(stderr, "weft-perf: --mem cuda: %s\n", why);
			return 1;
		}
		return 0;
	}
	const char *why = "";
	int rc = cudart_dl_load(&wp_cu, &why);
	if (rc != 0) {
		fprintf(stderr, "weft-perf: --mem cuda: %s\n", why);
		return 1;
	}
	int ndev = 0;
	wp_cu.device_count(&ndev);
	int dev = local_rank % ndev;
	if ((rc = wp_cu.set_device(dev)) != 0 || (rc = wp_cu.stream_create(stream)) != 0) {
		fprintf(stderr, "weft-perf: rank with local rank %d: GPU %d: %s\n", local_rank, dev,
			wp_cu.error_string(rc));
		return 1;
	}
	return 0;
}

void wp_cuda_rank_teardown(void *stream)
{
	if (stream)
		wp_cu.stream_destroy(stream);
}

/* --op put|pingpong --mem cuda: loads libweft-perf-gpu.so from
 * WEFT_PERF_GPU_LIB, else from beside libweft.so (lib/ of the build tree and
 * of the install alike), then asks it in a child process (CUDA must stay
 * uninitialized here before --np forks) whether a GPU is there. 0, or 1 after
 * a message. */
int wp_gpu_lib_load(const struct opts *o)
{
	const char *op = o->bench == BENCH_PUT ? "put" : "pingpong";
	char path[4096];
	const char *env = getenv("WEFT_PERF_GPU_LIB");
	Dl_info di;
	if (env && *env) {
		snprintf(path, sizeof(path), "%s", env);
	} else if (dladdr((void *)weft_get_version, &di) && di.dli_fname && strrchr(di.dli_fname, '/')) {
		const char *slash = strrchr(di.dli_fname, '/');
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - di.dli_fname), di.dli_fname,
			 WEFT_PERF_GPU_LIB_NAME);
	} else {
		snprintf(path, sizeof(path), "%s", WEFT_PERF_GPU_LIB_NAME);
	}
	gpu.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!gpu.handle) {
		fprintf(stderr,
			"weft-perf: --op %s --mem cuda needs %s, which could not be loaded: %s (it is built where a "
			"CUDA compiler is found; WEFT_PERF_GPU_LIB names another path)\n",
			op, path, dlerror());
		return 1;
	}
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		{WEFT_PERF_GPU_PROBE, offsetof(struct gpu_lib, probe)},
		{WEFT_PERF_GPU_RANK_SETUP, offsetof(struct gpu_lib, rank_setup)},
		{WEFT_PERF_GPU_RUN, offsetof(struct gpu_lib, run)},
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(gpu.handle, syms[i].name);
		if (!f) {
			fprintf(stderr, "weft-perf: %s has no %s: not weft-perf's GPU library\n", path, syms[i].name);
			return 1;
		}
		*(void **)((char *)&gpu + syms[i].off) = f;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 0; /* the ranks will tell */
	if (pid == 0) {
		char why[512] = "";
		int rc = gpu.probe(WEFT_PERF_GPU_ABI, why, sizeof(why));
		if (rc != 0)
			fprintf(stderr, "weft-perf: --op %s --mem cuda: %s\n", op, why);
		fflush(NULL);
		_exit(rc ? 1 : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFSIGNALED(st))
		fprintf(stderr, "weft-perf: --op %s --mem cuda: the GPU check died (%s)\n", op, strsignal(WTERMSIG(st)));
	return 1;
}


/* What one rank does for --op put|pingpong --mem cuda: libweft-perf-gpu.so
 * drives the GPUs (tools/perf_gpu.cu). wrong_all gets the wrong bytes. */
int wp_gpu_prim_rank(const struct run *r, uint64_t *wrong_all)
{
	const struct opts *o = r->o;
	struct opts go = *o;
	struct run gr = *r;
	int rc;
	if (!o->sizes_set) {
		go.min_bytes = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT_BYTES : WEFT_PERF_GPU_PINGPONG_MIN;
		go.max_bytes = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT_BYTES : WEFT_PERF_GPU_PINGPONG_MAX;
	}
	gr.o = &go;
	if (r->rank == 0)
		wp_print_header_common(&gr, o->bench == BENCH_PUT ? "put (device memory)" : "pingpong (device memory)");
	struct weft_perf_gpu_args ga = {
		.abi = WEFT_PERF_GPU_ABI,
		.op = o->bench == BENCH_PUT ? WEFT_PERF_GPU_PUT : WEFT_PERF_GPU_PINGPONG,
		.min_bytes = go.min_bytes,
		.max_bytes = go.max_bytes,
		.step_bytes = o->step_bytes,
		.factor = o->factor,
		.sizes_set = o->sizes_set,
		.warmup = o->warmup,
		.iters = o->iters,
		.check = o->check,
		.seed = o->seed,
		.transport = o->ntransports ? o->transports[0] : NULL,
	};
	if ((rc = gpu.run(&ga, r->comm, wrong_all)) != 0)
		return rc;
	return 0;
}
