/* SPDX-License-Identifier: Apache-2.0 */
/* Datatypes, reduction operations, collectives and memory types: their names,
 * sizes and validity, for the public calls, selection and weft-info. */
#include <errno.h>
#include <string.h>

#include <weft/kit.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "dtype.h"

/* ------------------------------------------------------------- names */

static const struct {
	const char *name;
	size_t size;
} dtypes[WEFT_DATATYPE_COUNT] = {
	[WEFT_INT8] = {"int8", 1},         [WEFT_UINT8] = {"uint8", 1},       [WEFT_INT32] = {"int32", 4},
	[WEFT_UINT32] = {"uint32", 4},     [WEFT_INT64] = {"int64", 8},       [WEFT_UINT64] = {"uint64", 8},
	[WEFT_FLOAT16] = {"float16", 2},   [WEFT_BFLOAT16] = {"bfloat16", 2}, [WEFT_FLOAT32] = {"float32", 4},
	[WEFT_FLOAT64] = {"float64", 8},   [WEFT_FP8_E4M3] = {"fp8_e4m3", 1}, [WEFT_FP8_E5M2] = {"fp8_e5m2", 1},
};

static const char *const redops[WEFT_REDOP_COUNT] = {
	[WEFT_SUM] = "sum", [WEFT_PROD] = "prod", [WEFT_MIN] = "min", [WEFT_MAX] = "max", [WEFT_AVG] = "avg",
	[WEFT_PREMUL_SUM] = "premul_sum",
};

static const char *const mem_names[WEFT_MEM_TYPE_COUNT] = {
	[WEFT_MEM_HOST] = "host", [WEFT_MEM_CUDA] = "cuda", [WEFT_MEM_HIP] = "hip",
};

int weft__dtype_valid(int t)
{
	return t >= 0 && t < WEFT_DATATYPE_COUNT;
}

int weft__redop_valid(int op)
{
	return op >= 0 && op < WEFT_REDOP_COUNT;
}

const char *weft__coll_name(int c)
{
	return c >= 0 && c < WEFT_COLL_COUNT ? weft_kit_coll_name(c) : "unknown collective";
}

const char *weft__mem_name(int m)
{
	return m >= 0 && m < WEFT_MEM_TYPE_COUNT ? mem_names[m] : "unknown memory";
}

WEFT_API size_t weft_datatype_size(enum weft_datatype type)
{
	return weft__dtype_valid((int)type) ? dtypes[type].size : 0;
}

WEFT_API const char *weft_datatype_name(enum weft_datatype type)
{
	return weft__dtype_valid((int)type) ? dtypes[type].name : "unknown";
}

WEFT_API int weft_datatype_parse(const char *name, enum weft_datatype *type)
{
	static const struct {
		const char *alias;
		enum weft_datatype type;
	} aliases[] = {{"half", WEFT_FLOAT16}, {"float", WEFT_FLOAT32}, {"double", WEFT_FLOAT64}};
	if (!name || !type)
		return -EINVAL;
	for (int t = 0; t < WEFT_DATATYPE_COUNT; t++)
		if (strcmp(name, dtypes[t].name) == 0) {
			*type = (enum weft_datatype)t;
			return 0;
		}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcmp(name, aliases[i].alias) == 0) {
			*type = aliases[i].type;
			return 0;
		}
	return -EINVAL;
}

WEFT_API const char *weft_redop_name(enum weft_redop op)
{
	return weft__redop_valid((int)op) ? redops[op] : "unknown";
}

WEFT_API int weft_redop_parse(const char *name, enum weft_redop *op)
{
	if (!name || !op)
		return -EINVAL;
	for (int o = 0; o < WEFT_REDOP_COUNT; o++)
		if (strcmp(name, redops[o]) == 0) {
			*op = (enum weft_redop)o;
			return 0;
		}
	return -EINVAL;
}

