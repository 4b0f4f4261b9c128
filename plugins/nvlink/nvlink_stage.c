/* SPDX-License-Identifier: Apache-2.0 */
/* nvlink's stage ops (weft_tp_stage_ops): pinned, device-mapped host bounce
 * buffers and asynchronous copies between them and device memory, so that
 * the core can stage device data over transports that cannot register it.
 * One stream per direction, so that a rank's outgoing and incoming chunks
 * copy at once; one event per ticket. */
#include <errno.h>
#include <string.h>

#include "../gpurt/gpurt.h"
#include "nvlink.h"

#define NVL_STAGE_EVENTS 256 /* tickets in flight per context (the core keeps 2 x depth per connection) */

struct nvl_stage {
	void *stream[2];
	void *event[NVL_STAGE_EVENTS];
	uint64_t busy[NVL_STAGE_EVENTS]; /* the ticket an event serves; 0: free */
	uint64_t next;
};

void nvl_stage_free(struct nvl_stage *s)
{
	if (!s)
		return;
	for (int d = 0; d < 2; d++)
		if (s->stream[d])
			grt_stream_destroy(s->stream[d]);
	for (int i = 0; i < NVL_STAGE_EVENTS; i++)
		if (s->event[i])
			grt_event_destroy(s->event[i]);
	nvl_core->free(s);
}

/* The context's stage state on its device, made at the first copy. */
static int stage_get(void *ctx, struct nvl_stage **out)
{
	struct nvl_stage **slot = NULL;
	int rc = nvl_ctx_stage(ctx, &slot);
	if (rc != 0)
		return rc;
	if (!*slot) {
		struct nvl_stage *s = nvl_core->calloc(1, sizeof(*s));
		if (!s)
			return -ENOMEM;
		s->next = 1;
		for (int d = 0; d < 2 && rc == 0; d++)
			rc = grt_stream_create(&s->stream[d]);
		if (rc != 0) {
			nvl_stage_free(s);
			return rc;
		}
		*slot = s;
	}
	*out = *slot;
	return 0;
}

static int nvl_stage_host_alloc(void *ctx, size_t bytes, void **host_ptr)
{
	struct nvl_stage **slot = NULL;
	int rc = nvl_ctx_stage(ctx, &slot);
	void *host = NULL, *dev = NULL;
	if (rc == 0)
		rc = grt_host_alloc_mapped(bytes ? bytes : 1, &host, &dev);
	if (rc == 0)
		*host_ptr = host;
	return rc;
}

static int nvl_stage_host_free(void *ctx, void *host_ptr)
{
	struct nvl_stage **slot = NULL;
	(void)nvl_ctx_stage(ctx, &slot);
	grt_host_free(host_ptr);
	return 0;
}

static int nvl_stage_copy_start(void *ctx, void *dst, const void *src, size_t len, enum weft_stage_dir dir,
				uint64_t *ticket)
{
	struct nvl_stage *s = NULL;
	if ((unsigned)dir > WEFT_STAGE_TO_DEVICE)
		return -EINVAL;
	int rc = stage_get(ctx, &s);
	if (rc != 0)
		return rc;
	uint64_t t = s->next;
	unsigned i = (unsigned)(t % NVL_STAGE_EVENTS);
	if (s->busy[i]) {
		NVL_ERR("stage: more than %d copies in flight", NVL_STAGE_EVENTS);
		return -ENOSPC;
	}
	if (!s->event[i] && (rc = grt_event_create(&s->event[i])) != 0)
		return rc;
	if ((rc = grt_memcpy_async(dst, src, len, s->stream[dir])) != 0 ||
	    (rc = grt_event_record(s->event[i], s->stream[dir])) != 0)
		return rc;
	s->busy[i] = t;
	s->next++;
	*ticket = t;
	return 0;
}

static int nvl_stage_copy_test(void *ctx, uint64_t ticket)
{
	struct nvl_stage *s = NULL;
	int rc = stage_get(ctx, &s);
	if (rc != 0)
		return rc;
	unsigned i = (unsigned)(ticket % NVL_STAGE_EVENTS);
	if (ticket == 0 || s->busy[i] != ticket)
		return -EINVAL;
	rc = grt_event_query(s->event[i]);
	if (rc != -EAGAIN)
		s->busy[i] = 0;
	return rc;
}

const struct weft_tp_stage_ops nvl_stage_ops = {
	.size = sizeof(struct weft_tp_stage_ops),
	.host_alloc = nvl_stage_host_alloc,
	.host_free = nvl_stage_host_free,
	.copy_start = nvl_stage_copy_start,
	.copy_test = nvl_stage_copy_test,
};
