/* SPDX-License-Identifier: Apache-2.0 */
/* struct weft_core_api: what a plugin may ask of the core. Logging is tagged
 * with the plugin's name, parameters go to the config module under that name
 * as owner, and memory comes from libc. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "plugin_api.h"

static const char *plugin_tag(const struct weft_plugin *self)
{
	return self && self->tag[0] ? self->tag : "plugin";
}

static enum weft_log_level clamp_level(enum weft_log_level level)
{
	/* A plugin built against a later ABI may pass a level this core does not
	 * know; print it rather than drop it, at the nearest known level. */
	if ((int)level < WEFT_LOG_ERROR)
		return WEFT_LOG_ERROR;
	if ((int)level > WEFT_LOG_TRACE)
		return WEFT_LOG_TRACE;
	return level;
}

static void api_log(struct weft_plugin *self, enum weft_log_level level, const char *fmt, ...)
{
	if (!fmt)
		return;
	va_list ap;
	va_start(ap, fmt);
	weft__vlog(clamp_level(level), plugin_tag(self), fmt, ap);
	va_end(ap);
}

static int api_log_enabled(struct weft_plugin *self, enum weft_log_level level)
{
	return (int)clamp_level(level) <= weft__log_level();
}

static int api_param_declare(struct weft_plugin *self, const struct weft_param_decl *decl)
{
	if (!decl || decl->size < offsetof(struct weft_param_decl, help))
		return -EINVAL;
	/* Copy what the plugin's (possibly older, shorter) struct holds into the
	 * core's own layout, so the config module never reads past its end. */
	struct weft_param_decl d;
	memset(&d, 0, sizeof(d));
	memcpy(&d, decl, decl->size < sizeof(d) ? decl->size : sizeof(d));
	d.size = sizeof(d);
	/* A plugin's parameters live in its own section unless it names one. */
	if (!d.section)
		d.section = plugin_tag(self);
	return weft__param_declare(plugin_tag(self), &d);
}

static int api_param_get(struct weft_plugin *self, const char *section, const char *key,
			 enum weft_param_type type, void *out, enum weft_param_source *source)
{
	if (!key || !out)
		return -EINVAL;
	return weft__param_get(section ? section : plugin_tag(self), key, type, out, source);
}

static void *api_alloc(size_t bytes)
{
	return malloc(bytes);
}

static void *api_calloc(size_t n, size_t bytes)
{
	return calloc(n, bytes);
}

static void api_free(void *ptr)
{
	free(ptr);
}

int weft__plugin_api_create(const char *tag, struct weft_plugin **out)
{
	struct weft_plugin *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	snprintf(p->tag, sizeof(p->tag), "%s", tag ? tag : "plugin");
	p->api.size = sizeof(p->api);
	p->api.self = p;
	p->api.core_version = WEFT_VERSION_CODE;
	p->api.log = api_log;
	p->api.log_enabled = api_log_enabled;
	p->api.param_declare = api_param_declare;
	p->api.param_get = api_param_get;
	p->api.alloc = api_alloc;
	p->api.calloc = api_calloc;
	p->api.free = api_free;
	*out = p;
	return 0;
}
