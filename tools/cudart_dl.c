/* SPDX-License-Identifier: Apache-2.0 */
/* Finds the CUDA runtime at run time for the tools (see cudart_dl.h). */
#define _GNU_SOURCE
#include "cudart_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int cudart_dl_probe_forked(const char *prog)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return 0; /* the ranks will tell */
	if (pid == 0) {
		struct cudart_dl rt;
		const char *why = "";
		int rc = cudart_dl_load(&rt, &why);
		if (rc != 0)
			fprintf(stderr, "%s: --mem cuda: %s\n", prog, why);
		fflush(NULL);
		_exit(rc ? 1 : 0);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ENODEV;
}

int cudart_dl_local_rank(int fallback)
{
	static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
					   "LOCAL_RANK"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && *v)
			return atoi(v);
	}
	return fallback;
}

int cudart_dl_load(struct cudart_dl *rt, const char **why)
{
	/* The application's runtime if it has one (PyTorch's, say), else the
	 * system's, newest first. */
	void *h = RTLD_DEFAULT;
	if (!dlsym(h, "cudaMalloc")) {
		static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
		h = NULL;
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !h; i++)
			h = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
		if (!h) {
			*why = "no CUDA runtime (libcudart) in this process or on the library path";
			return -ENOENT;
		}
	}
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define SYM(field, name) {name, offsetof(struct cudart_dl, field)}
		SYM(malloc_, "cudaMalloc"),
		SYM(free_, "cudaFree"),
		SYM(memcpy_, "cudaMemcpy"),
		SYM(memset_, "cudaMemset"),
		SYM(stream_create, "cudaStreamCreate"),
		SYM(stream_destroy, "cudaStreamDestroy"),
		SYM(stream_sync, "cudaStreamSynchronize"),
		SYM(set_device, "cudaSetDevice"),
		SYM(get_device, "cudaGetDevice"),
		SYM(device_count, "cudaGetDeviceCount"),
		SYM(event_create, "cudaEventCreate"),
		SYM(event_destroy, "cudaEventDestroy"),
		SYM(event_record, "cudaEventRecord"),
		SYM(event_sync, "cudaEventSynchronize"),
		SYM(event_elapsed, "cudaEventElapsedTime"),
		SYM(begin_capture, "cudaStreamBeginCapture"),
		SYM(end_capture, "cudaStreamEndCapture"),
		SYM(instantiate, "cudaGraphInstantiate"),
		SYM(graph_launch, "cudaGraphLaunch"),
		SYM(exec_destroy, "cudaGraphExecDestroy"),
		SYM(graph_destroy, "cudaGraphDestroy"),
		SYM(error_string, "cudaGetErrorString"),
#undef SYM
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(h, syms[i].name);
		if (!f) {
			*why = syms[i].name;
			return -ENOENT;
		}
		*(void **)((char *)rt + syms[i].off) = f;
	}
	/* A runtime without a device (a build machine) is no use either. */
	int n = 0;
	if (rt->device_count(&n) != 0 || n < 1) {
		*why = "the CUDA runtime sees no device";
		return -ENODEV;
	}
	return 0;
}
