/* SPDX-License-Identifier: Apache-2.0 */
/* gpurt, runtime-neutral part: logging, error mapping, the once-only init,
 * and the logic every backend (gpurt_cuda.c, gpurt_hip.c) shares. Linked
 * together with exactly one backend. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "gpurt_impl.h"

/* ------------------------------------------------------------- logging */
static const struct weft_core_api *g_core;
static const char *g_who = "gpurt";

void grt_set_logger(const struct weft_core_api *core, const char *who)
{
	g_core = core;
	if (who)
		g_who = who;
}

void grt__log(enum weft_log_level lv, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (g_core)
		g_core->log(g_core->self, lv, "%s: %s", g_who, msg);
	else if (lv <= WEFT_LOG_WARN)
		fprintf(stderr, "%s: %s\n", g_who, msg);
}

int grt__err(enum grt__err_class c, const char *what, const char *text, const char *code)
{
	static const int codes[] = {
		[GRT_ERRC_NOT_READY] = -EAGAIN,   [GRT_ERRC_NO_DEVICE] = -WEFT_ERR_NO_DEVICE,
		[GRT_ERRC_NOMEM] = -ENOMEM,       [GRT_ERRC_INVAL] = -EINVAL,
		[GRT_ERRC_NOTSUP] = -ENOTSUP,     [GRT_ERRC_OTHER] = -WEFT_ERR_TRANSPORT,
	};
	if (c == GRT_ERRC_NOT_READY)
		return -EAGAIN; /* a poll's normal answer, nothing to say */
	if ((unsigned)c >= sizeof(codes) / sizeof(codes[0]))
		c = GRT_ERRC_OTHER;
	enum weft_log_level lv = c == GRT_ERRC_NO_DEVICE ? WEFT_LOG_INFO : WEFT_LOG_ERROR;
	if (code)
		grt__log(lv, "%s: %s (%s)", what, text ? text : "unknown error", code);
	else
		grt__log(lv, "%s: %s", what, text ? text : "unknown error");
	return codes[c];
}

/* ---------------------------------------------------------------- init */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_init_rc;
static char g_init_err[128] = "not initialized";

static void init_once(void)
{
	g_init_rc = grt__rt_init(g_init_err, sizeof(g_init_err));
	if (g_init_rc == 0)
		snprintf(g_init_err, sizeof(g_init_err), "ok");
	else
		g_init_rc = -WEFT_ERR_NO_DEVICE; /* whatever failed, the answer is "no usable device" */
}

int grt_init(void)
{
	pthread_once(&g_once, init_once);
	return g_init_rc;
}

const char *grt_init_error(void)
{
	return g_init_err;
}

/* ------------------------------------------------------------- signals */
int grt_write_value64(void *stream, void *addr, uint64_t value)
{
	if (grt_init() != 0)
		return -WEFT_ERR_NO_DEVICE;
	int rc = grt__rt_write_value64(stream, addr, value);
	if (rc != -ENOTSUP)
		return rc;
	/* Without stream memory operations: a copy of the value, which the stream
	 * orders after the data. The source must outlive the copy: a pinned slot
	 * per call would be exact; a synchronous copy from the stack is simplest. */
	rc = grt_memcpy_async(addr, &value, sizeof(value), stream);
	if (rc == 0)
		rc = grt_stream_sync(stream);
	return rc;
}

/* ----------------------------------------------------------------- VMM */
size_t grt__vmm_chunk(size_t bytes, int nchunks, size_t gran)
{
	size_t chunk = (bytes + (size_t)nchunks - 1) / (size_t)nchunks;
	chunk = (chunk + gran - 1) / gran * gran;
	return chunk ? chunk : gran;
}

int grt_vmm_import_fd(int fd, size_t size, int dev, void **ptr)
{
	return grt_vmm_import_fds(&fd, &size, 1, dev, ptr);
}

int grt_vmm_free(void *ptr, size_t total, int nchunks)
{
	if (!ptr)
		return 0;
	if (nchunks < 1)
		nchunks = 1;
	size_t sizes[64];
	if (nchunks > 64)
		return -EINVAL;
	for (int i = 0; i < nchunks; i++)
		sizes[i] = total / (size_t)nchunks;
	return grt_vmm_unmap(ptr, sizes, nchunks);
}
