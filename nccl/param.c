/* SPDX-License-Identifier: Apache-2.0 */
/* libweft_nccl: NCCL 2.30's parameter calls (ncclParamBind, ncclParamGet*,
 * ncclParamGetParameter, ncclParamGetAllParameterKeys, ncclParamDumpAll) on
 * weft's parameter registry (include/weft/info.h): the parameters the core
 * and the loaded plugins declare, as weft-info -c lists them. A key is a
 * parameter's environment variable (WEFT_CORE_PEER_TIMEOUT), as NCCL's keys
 * are its variables (NCCL_DEBUG); "section.key" (core.peer_timeout) is taken
 * too. Values are those in force: environment, else file, else default. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/plugin.h>

#include "wn.h"

#define WN_PARAM_MAGIC 0x7770726du /* "wprm" */
#define WN_ENV_MAX 192

/* A bound parameter: made once per key, kept until exit (the caller never
 * frees a handle, as in NCCL). */
struct ncclParamHandle {
	unsigned magic;
	const char *section, *key; /* the registry's strings, which live until exit */
	int type;                  /* enum weft_param_type */
	char env[WN_ENV_MAX];
	struct ncclParamHandle *next;
};

static pthread_mutex_t bound_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ncclParamHandle *bound;

static const char *type_name(int t)
{
	static const char *const names[] = {"INT", "SIZE", "BOOL", "DOUBLE", "STRING"};
	return t >= 0 && t <= WEFT_PARAM_STRING ? names[t] : "?";
}

/* WEFT_<SECTION>_<KEY>, upper-cased, '-' as '_' (plugin.h's rule). */
static void env_name(const char *section, const char *key, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "WEFT_%s_%s", section, key);
	for (size_t i = 5; i < o && i < len; i++)
		buf[i] = buf[i] == '-' ? '_' : (char)toupper((unsigned char)buf[i]);
}

/* The registry's parameters, in weft-info -c's order: *n of them (0 with a
 * logged reason when none can be listed), the caller frees the array. */
static struct weft_info_param *list_params(int *n, const char *fn)
{
	*n = 0;
	int count = weft_info_params(NULL, 0);
	if (count <= 0) {
		if (count < 0)
			WN_ERROR("%s: listing weft's parameters failed: %s", fn, weft_strerror(count));
		return NULL;
	}
	struct weft_info_param *ps = calloc((size_t)count, sizeof(*ps));
	if (!ps) {
		WN_ERROR("%s: out of memory", fn);
		return NULL;
	}
	int got = weft_info_params(ps, count);
	*n = got < count ? got : count;
	return ps;
}

/* Finds key among the registry's parameters, binding it on first use. NULL
 * (logged) when weft has no such parameter. */
static struct ncclParamHandle *bind_key(const char *key, const char *fn)
{
	pthread_mutex_lock(&bound_lock);
	for (struct ncclParamHandle *h = bound; h; h = h->next) {
		char dotted[WN_ENV_MAX];
		snprintf(dotted, sizeof(dotted), "%s.%s", h->section, h->key);
		if (!strcmp(h->env, key) || !strcmp(dotted, key)) {
			pthread_mutex_unlock(&bound_lock);
			return h;
		}
	}
	pthread_mutex_unlock(&bound_lock);
	int n = 0;
	struct weft_info_param *ps = list_params(&n, fn);
	struct ncclParamHandle *found = NULL;
	for (int i = 0; i < n && !found; i++) {
		char env[WN_ENV_MAX], dotted[WN_ENV_MAX];
		env_name(ps[i].section, ps[i].key, env, sizeof(env));
		snprintf(dotted, sizeof(dotted), "%s.%s", ps[i].section, ps[i].key);
		if (strcmp(env, key) && strcmp(dotted, key))
			continue;
		found = calloc(1, sizeof(*found));
		if (!found) {
			WN_ERROR("%s: out of memory", fn);
			break;
		}
		*found = (struct ncclParamHandle){
			.magic = WN_PARAM_MAGIC, .section = ps[i].section, .key = ps[i].key, .type = ps[i].type};
		memcpy(found->env, env, sizeof(env));
	}
	free(ps);
	if (!found) {
		if (!strncmp(key, "NCCL_", 5))
			WN_ERROR("%s: \"%s\" is NCCL's; weft does not read NCCL's variables. Its parameters are WEFT_* "
				 "(ncclParamGetAllParameterKeys, weft-info -c)",
				 fn, key);
		else
			WN_ERROR("%s: weft has no parameter \"%s\" (ncclParamGetAllParameterKeys and weft-info -c list "
				 "them)",
				 fn, key);
		return NULL;
	}
	/* Two threads may bind one key at once: the first one listed wins. */
	pthread_mutex_lock(&bound_lock);
	for (struct ncclParamHandle *h = bound; h; h = h->next)
		if (!strcmp(h->env, found->env)) {
			pthread_mutex_unlock(&bound_lock);
			free(found);
			return h;
		}
	found->next = bound;
	bound = found;
	pthread_mutex_unlock(&bound_lock);
	return found;
}

static struct ncclParamHandle *check_handle(ncclParamHandle_t h, const void *out, const char *fn)
{
	if (!h || h->magic != WN_PARAM_MAGIC) {
		WN_ERROR("%s: %s", fn, h ? "the handle was not made by ncclParamBind" : "the handle is NULL");
		return NULL;
	}
	if (!out) {
		WN_ERROR("%s: the out-pointer is NULL", fn);
		return NULL;
	}
	return h;
}

/* The value in force, as its type (v: int64_t, uint64_t, int, double or
 * const char *). ncclSuccess, or a logged refusal. */
union pvalue {
	int64_t i;
	uint64_t u;
	int b;
	double d;
	const char *s;
};

static ncclResult_t read_value(const struct ncclParamHandle *h, union pvalue *v, const char *fn)
{
	int rc = weft_info_param_get(h->section, h->key, h->type, v, NULL);
	if (rc != 0) {
		WN_ERROR("%s: reading %s failed: %s", fn, h->env,
			 rc == -WEFT_ERR_CONFIG ? "the value set is refused (the log above says why)"
						: weft_strerror(rc));
		return rc == -WEFT_ERR_CONFIG ? ncclInvalidUsage : ncclInternalError;
	}
	return ncclSuccess;
}

/* The value as text, into buf. */
static ncclResult_t value_text(const struct ncclParamHandle *h, char *buf, size_t len, const char *fn)
{
	union pvalue v;
	ncclResult_t r = read_value(h, &v, fn);
	if (r != ncclSuccess)
		return r;
	switch (h->type) {
	case WEFT_PARAM_INT: snprintf(buf, len, "%" PRId64, v.i); break;
	case WEFT_PARAM_SIZE: snprintf(buf, len, "%" PRIu64, v.u); break;
	case WEFT_PARAM_BOOL: snprintf(buf, len, "%d", v.b ? 1 : 0); break;
	case WEFT_PARAM_DOUBLE:
		/* The shortest text that reads back as the same double. */
		snprintf(buf, len, "%.15g", v.d);
		if (strtod(buf, NULL) != v.d)
			snprintf(buf, len, "%.17g", v.d);
		break;
	default: snprintf(buf, len, "%s", v.s ? v.s : ""); break;
	}
	return ncclSuccess;
}

/* An integer parameter (INT, SIZE, BOOL) into an integer of the caller's
 * width, refused when it does not fit. */
static ncclResult_t get_int(ncclParamHandle_t hh, void *out, int64_t lo, uint64_t hi, int is_signed, size_t width,
			    const char *fn)
{
	struct ncclParamHandle *h = check_handle(hh, out, fn);
	if (!h)
		return ncclInvalidArgument;
	if (h->type != WEFT_PARAM_INT && h->type != WEFT_PARAM_SIZE && h->type != WEFT_PARAM_BOOL) {
		WN_ERROR("%s: %s is a %s parameter, not an integer; read it with ncclParamGetStr or ncclParamGet", fn,
			 h->env, type_name(h->type));
		return ncclInvalidArgument;
	}
	union pvalue v;
	ncclResult_t r = read_value(h, &v, fn);
	if (r != ncclSuccess)
		return r;
	int neg = h->type == WEFT_PARAM_INT && v.i < 0;
	uint64_t mag = h->type == WEFT_PARAM_INT ? (uint64_t)v.i : h->type == WEFT_PARAM_SIZE ? v.u : (uint64_t) !!v.b;
	if (neg ? v.i < lo : mag > hi) {
		if (neg)
			WN_ERROR("%s: %s is %" PRId64 ", which does not fit the %zu-bit %s integer asked for", fn,
				 h->env, v.i, width * 8, is_signed ? "signed" : "unsigned");
		else
			WN_ERROR("%s: %s is %" PRIu64 ", which does not fit the %zu-bit %s integer asked for", fn,
				 h->env, mag, width * 8, is_signed ? "signed" : "unsigned");
		return ncclInvalidArgument;
	}
	int64_t s = neg ? v.i : (int64_t)mag;
	switch (width) {
	case 1:
		if (is_signed)
			*(int8_t *)out = (int8_t)s;
		else
			*(uint8_t *)out = (uint8_t)mag;
		break;
	case 2:
		if (is_signed)
			*(int16_t *)out = (int16_t)s;
		else
			*(uint16_t *)out = (uint16_t)mag;
		break;
	case 4:
		if (is_signed)
			*(int32_t *)out = (int32_t)s;
		else
			*(uint32_t *)out = (uint32_t)mag;
		break;
	default:
		if (is_signed)
			*(int64_t *)out = s;
		else
			*(uint64_t *)out = mag;
		break;
	}
	return ncclSuccess;
}

WN_API ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key)
{
	static const char fn[] = "ncclParamBind";
	if (out)
		*out = NULL;
	if (!out || !key) {
		WN_ERROR("%s: %s is NULL", fn, !out ? "out" : "key");
		return ncclInvalidArgument;
	}
	struct ncclParamHandle *h = bind_key(key, fn);
	if (!h)
		return ncclInvalidArgument;
	*out = h;
	return ncclSuccess;
}
WN_ALIAS(ncclParamBind);

#define GET_INT(suffix, ctype, lo, hi, sgn)                                                 \
	WN_API ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype *out)           \
	{                                                                                   \
		return get_int(h, out, lo, hi, sgn, sizeof(ctype), "ncclParamGet" #suffix); \
	}                                                                                   \
	WN_ALIAS(ncclParamGet##suffix)

GET_INT(I8, int8_t, INT8_MIN, INT8_MAX, 1);
GET_INT(I16, int16_t, INT16_MIN, INT16_MAX, 1);
GET_INT(I32, int32_t, INT32_MIN, INT32_MAX, 1);
GET_INT(I64, int64_t, INT64_MIN, INT64_MAX, 1);
GET_INT(U8, uint8_t, 0, UINT8_MAX, 0);
GET_INT(U16, uint16_t, 0, UINT16_MAX, 0);
GET_INT(U32, uint32_t, 0, UINT32_MAX, 0);
GET_INT(U64, uint64_t, 0, UINT64_MAX, 0);
#undef GET_INT

/* The text ncclParamGetStr and ncclParamGetParameter hand out: the calling
 * thread's, valid until its next such call. */
static _Thread_local char str_buf[4096];
static _Thread_local char param_buf[4096];

WN_API ncclResult_t ncclParamGetStr(ncclParamHandle_t hh, const char **out)
{
	static const char fn[] = "ncclParamGetStr";
	if (out)
		*out = NULL;
	struct ncclParamHandle *h = check_handle(hh, out, fn);
	if (!h)
		return ncclInvalidArgument;
	/* Any parameter, as text (NCCL's reads string parameters only). */
	ncclResult_t r = value_text(h, str_buf, sizeof(str_buf), fn);
	if (r == ncclSuccess)
		*out = str_buf;
	return r;
}
WN_ALIAS(ncclParamGetStr);

WN_API ncclResult_t ncclParamGet(ncclParamHandle_t hh, void *out, int maxLen, int *len)
{
	static const char fn[] = "ncclParamGet";
	if (len)
		*len = 0;
	struct ncclParamHandle *h = check_handle(hh, out, fn);
	if (!h || !len || maxLen <= 0) {
		if (h)
			WN_ERROR("%s: %s", fn, !len ? "len is NULL" : "maxLen must be positive");
		return ncclInvalidArgument;
	}
	union pvalue v;
	ncclResult_t r = read_value(h, &v, fn);
	if (r != ncclSuccess)
		return r;
	/* The value's own bytes: int64_t, uint64_t, int (BOOL), double, or the
	 * string with its terminating NUL ("" when unset). */
	const void *src = &v;
	size_t n;
	switch (h->type) {
	case WEFT_PARAM_INT: n = sizeof(v.i); break;
	case WEFT_PARAM_SIZE: n = sizeof(v.u); break;
	case WEFT_PARAM_BOOL: n = sizeof(v.b); break;
	case WEFT_PARAM_DOUBLE: n = sizeof(v.d); break;
	default:
		src = v.s ? v.s : "";
		n = strlen(src) + 1;
		break;
	}
	if (n > (size_t)maxLen) {
		WN_ERROR("%s: %s takes %zu bytes; maxLen is %d", fn, h->env, n, maxLen);
		return ncclInvalidArgument;
	}
	memcpy(out, src, n);
	*len = (int)n;
	return ncclSuccess;
}
WN_ALIAS(ncclParamGet);

WN_API ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen)
{
	static const char fn[] = "ncclParamGetParameter";
	if (value)
		*value = NULL;
	if (valueLen)
		*valueLen = 0;
	if (!key || !value || !valueLen) {
		WN_ERROR("%s: %s is NULL", fn, !key ? "key" : !value ? "value" : "valueLen");
		return ncclInvalidArgument;
	}
	struct ncclParamHandle *h = bind_key(key, fn);
	if (!h)
		return ncclInvalidArgument;
	ncclResult_t r = value_text(h, param_buf, sizeof(param_buf), fn);
	if (r != ncclSuccess)
		return r;
	*value = param_buf;
	*valueLen = (int)strlen(param_buf);
	return ncclSuccess;
}
WN_ALIAS(ncclParamGetParameter);

/* The keys ncclParamGetAllParameterKeys hands out: the calling thread's,
 * valid until its next call. */
static _Thread_local char *keys_text;
static _Thread_local const char **keys_table;

WN_API ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen)
{
	static const char fn[] = "ncclParamGetAllParameterKeys";
	if (table)
		*table = NULL;
	if (tableLen)
		*tableLen = 0;
	if (!table || !tableLen) {
		WN_ERROR("%s: %s is NULL", fn, !table ? "table" : "tableLen");
		return ncclInvalidArgument;
	}
	int n = 0;
	struct weft_info_param *ps = list_params(&n, fn);
	char *text = calloc((size_t)(n ? n : 1), WN_ENV_MAX);
	const char **tab = calloc((size_t)(n ? n : 1), sizeof(*tab));
	if (!text || !tab) {
		WN_ERROR("%s: out of memory", fn);
		free(ps);
		free(text);
		free(tab);
		return ncclSystemError;
	}
	for (int i = 0; i < n; i++) {
		env_name(ps[i].section, ps[i].key, text + (size_t)i * WN_ENV_MAX, WN_ENV_MAX);
		tab[i] = text + (size_t)i * WN_ENV_MAX;
	}
	free(ps);
	free(keys_text);
	free(keys_table);
	keys_text = text;
	keys_table = tab;
	*table = tab;
	*tableLen = n;
	return ncclSuccess;
}
WN_ALIAS(ncclParamGetAllParameterKeys);

WN_API void ncclParamDumpAll(void)
{
	/* To stdout, as NCCL's; weft-info -c's listing, with each parameter's
	 * value, source and help, then the rules in force. */
	printf("=== weft parameters (libweft_nccl: ncclParamBind takes WEFT_<SECTION>_<KEY>) ===\n");
	weft_info_print_params(stdout);
	fflush(stdout);
}
WN_ALIAS(ncclParamDumpAll);
