/* SPDX-License-Identifier: Apache-2.0 */
/* gpurt internals: how the runtime-neutral part (gpurt.c) and a runtime
 * backend (gpurt_cuda.c or gpurt_hip.c; exactly one per binary) call each
 * other. Never included by plugins: they see gpurt.h only. */
#ifndef WEFT_GPURT_IMPL_H
#define WEFT_GPURT_IMPL_H

#include "gpurt.h"

/* ------------------------------------------------ provided by the backend */
/* Loads the runtime and checks for a device; called once, under grt_init's
 * once-guard. 0, or -WEFT_ERR_NO_DEVICE with a short reason written to err. */
int grt__rt_init(char *err, size_t len);
/* A stream-ordered 64-bit write by the runtime's own mechanism (stream memory
 * operations). -ENOTSUP when the runtime or device has none: the shared code
 * then falls back to a copy of the value. */
int grt__rt_write_value64(void *stream, void *addr, uint64_t value);

/* ------------------------------------------------- provided by gpurt.c */
__attribute__((format(printf, 2, 3))) void grt__log(enum weft_log_level lv, const char *fmt, ...);

/* What a runtime or driver error means to weft; the backend classifies its
 * own codes, the mapping to weft codes and log levels is shared. */
enum grt__err_class {
	GRT_ERRC_NOT_READY, /* still running: -EAGAIN, not logged */
	GRT_ERRC_NO_DEVICE, /* -WEFT_ERR_NO_DEVICE, logged at info level (a host without GPUs is normal) */
	GRT_ERRC_NOMEM,     /* -ENOMEM */
	GRT_ERRC_INVAL,     /* -EINVAL */
	GRT_ERRC_NOTSUP,    /* -ENOTSUP */
	GRT_ERRC_OTHER,     /* -WEFT_ERR_TRANSPORT */
};
/* Logs "what: text (code)" (code may be NULL) and returns the weft code. */
int grt__err(enum grt__err_class c, const char *what, const char *text, const char *code);

/* VMM chunking shared by the backends that have VMM: the size of each of
 * nchunks chunks holding bytes, rounded up to gran (never 0). */
size_t grt__vmm_chunk(size_t bytes, int nchunks, size_t gran);

#endif
