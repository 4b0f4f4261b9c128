/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: a small JSON reader (RFC 8259) into a tree, with limits on size,
 * depth and value count, and errors that give the line and column. */
#ifndef WP_JSON_H
#define WP_JSON_H

#include <stddef.h>
#include <stdint.h>

enum wp_json_type {
	WP_JSON_NULL,
	WP_JSON_BOOL,
	WP_JSON_INT,    /* an integer that fits int64_t: i */
	WP_JSON_UINT,   /* an integer above INT64_MAX up to UINT64_MAX: u */
	WP_JSON_DOUBLE, /* a number with a fraction or an exponent: d */
	WP_JSON_STRING,
	WP_JSON_ARRAY,
	WP_JSON_OBJECT,
};

struct wp_json;

struct wp_json_member {
	char *key; /* UTF-8, NUL-terminated; keylen excludes the NUL (a key may hold \u0000) */
	size_t keylen;
	struct wp_json *val;
};

struct wp_json {
	enum wp_json_type type;
	unsigned line, col; /* where the value starts (1-based; columns count characters) */
	union {
		int b;
		int64_t i;
		uint64_t u;
		double d;
		struct {
			char *s; /* UTF-8, NUL-terminated */
			size_t len;
		} str;
		struct {
			struct wp_json **v;
			size_t n;
		} arr;
		struct {
			struct wp_json_member *m; /* in the order of the text; keys are unique */
			size_t n;
		} obj;
	};
};

/* Defaults, far above any execution plan yet written, that keep a hostile
 * input's memory and stack bounded. */
#define WP_JSON_MAX_BYTES ((size_t)16 << 20)
#define WP_JSON_MAX_DEPTH 64u
#define WP_JSON_MAX_VALUES ((size_t)1 << 20)

struct wp_json_limits {
	size_t max_bytes;   /* input length */
	unsigned max_depth; /* arrays and objects nested in one another */
	size_t max_values;  /* values of every kind, containers included */
};

struct wp_json_error {
	unsigned line, col; /* where the problem is; 0 when it is no place (out of memory) */
	char msg[200];      /* what was found and what was expected */
};

/* Parses text[0..len) (no NUL needed; a leading UTF-8 byte-order mark is
 * skipped) into a tree the caller frees with wp_json_free. lim may be NULL for
 * the defaults above.
 * Returns 0 and sets *out; -EINVAL for text that is not JSON, not UTF-8 or
 * beyond a limit; -ENOMEM. On error *out is untouched, err says where and
 * what, and nothing stays allocated. Thread safety: any thread. Blocking: no. */
int wp_json_parse(const char *text, size_t len, const struct wp_json_limits *lim, struct wp_json **out,
		  struct wp_json_error *err);

/* Frees a tree from wp_json_parse; NULL is accepted. */
void wp_json_free(struct wp_json *v);

/* The member named key of an object, or NULL when there is none (or v is
 * not an object). The tree keeps ownership. */
const struct wp_json *wp_json_get(const struct wp_json *v, const char *key);

/* "null", "a boolean", "an integer", "a number", "a string", "an array",
 * "an object": for messages such as "'size' must be an integer, not a string".
 * Static strings. */
const char *wp_json_type_name(enum wp_json_type t);

/* Allocation for the parser and the plan loader in one place, so that the
 * unit test can fail the Nth allocation and check that every error path
 * frees what it holds (built with WP_ALLOC_HOOK only). */
void *wp_malloc(size_t n);
void *wp_calloc(size_t n, size_t size);
void *wp_realloc(void *p, size_t n);
void wp_free(void *p);
#ifdef WP_ALLOC_HOOK
/* When > 0, counts allocations down; the one that brings it to 0 fails. */
extern long wp_alloc_fail_countdown;
/* Allocations not yet freed. */
extern long wp_alloc_live;
#endif

#endif
