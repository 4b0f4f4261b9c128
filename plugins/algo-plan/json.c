/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: the JSON reader. Recursive descent over the bytes, one pass,
 * keeping the line and column of every value for the loader's messages. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

#ifdef WP_ALLOC_HOOK
long wp_alloc_fail_countdown;
long wp_alloc_live;

static int alloc_fails(void)
{
	return wp_alloc_fail_countdown > 0 && --wp_alloc_fail_countdown == 0;
}
#endif

void *wp_malloc(size_t n)
{
#ifdef WP_ALLOC_HOOK
	if (alloc_fails())
		return NULL;
	void *p = malloc(n ? n : 1);
	wp_alloc_live += p != NULL;
	return p;
#else
	return malloc(n ? n : 1);
#endif
}

void *wp_calloc(size_t n, size_t size)
{
#ifdef WP_ALLOC_HOOK
	if (alloc_fails())
		return NULL;
	void *p = calloc(n ? n : 1, size ? size : 1);
	wp_alloc_live += p != NULL;
	return p;
#else
	return calloc(n ? n : 1, size ? size : 1);
#endif
}

void *wp_realloc(void *p, size_t n)
{
#ifdef WP_ALLOC_HOOK
	if (alloc_fails())
		return NULL;
	void *q = realloc(p, n ? n : 1);
	wp_alloc_live += q != NULL && p == NULL;
	return q;
#else
	return realloc(p, n ? n : 1);
#endif
}

void wp_free(void *p)
{
#ifdef WP_ALLOC_HOOK
	wp_alloc_live -= p != NULL;
#endif
	free(p);
}

struct jp {
	const unsigned char *p, *end;
	unsigned line, col; /* of *p */
	struct wp_json_limits lim;
	size_t nvalues;
	struct wp_json_error *err;
};

static int jp_fail_at(struct jp *j, unsigned line, unsigned col, int rc, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static int jp_fail_at(struct jp *j, unsigned line, unsigned col, int rc, const char *fmt, ...)
{
	va_list ap;

	if (j->err) {
		j->err->line = line;
		j->err->col = col;
		va_start(ap, fmt);
		vsnprintf(j->err->msg, sizeof(j->err->msg), fmt, ap);
		va_end(ap);
	}
	return rc;
}

#define jp_fail(j, ...) jp_fail_at((j), (j)->line, (j)->col, -EINVAL, __VA_ARGS__)

static int jp_nomem(struct jp *j)
{
	return jp_fail_at(j, 0, 0, -ENOMEM, "out of memory");
}

/* What is at the cursor, for "expected X, found Y". */
static const char *jp_found(const struct jp *j, char *buf, size_t len)
{
	if (j->p >= j->end)
		return "the end of the input";
	unsigned char c = *j->p;
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, len, "'%c'", c);
	else
		snprintf(buf, len, "byte 0x%02X", c);
	return buf;
}

/* Moves past n bytes; a column counts characters, not UTF-8 bytes. */
static void jp_advance(struct jp *j, size_t n)
{
	while (n-- && j->p < j->end) {
		unsigned char c = *j->p++;
		if (c == '\n') {
			j->line++;
			j->col = 1;
		} else if ((c & 0xc0) != 0x80) {
			j->col++;
		}
	}
}

static void jp_skip_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		jp_advance(j, 1);
}

static struct wp_json *jp_node(enum wp_json_type t, unsigned line, unsigned col)
{
	struct wp_json *v = wp_calloc(1, sizeof(*v));
	if (v) {
		v->type = t;
		v->line = line;
		v->col = col;
	}
	return v;
}

void wp_json_free(struct wp_json *v)
{
	size_t k;

	if (!v)
		return;
	switch (v->type) {
	case WP_JSON_STRING: wp_free(v->str.s); break;
	case WP_JSON_ARRAY:
		for (k = 0; k < v->arr.n; k++)
			wp_json_free(v->arr.v[k]);
		wp_free(v->arr.v);
		break;
	case WP_JSON_OBJECT:
		for (k = 0; k < v->obj.n; k++) {
			wp_free(v->obj.m[k].key);
			wp_json_free(v->obj.m[k].val);
		}
		wp_free(v->obj.m);
		break;
	default: break;
	}
	wp_free(v);
}

/* Grows *arr (of elements of size sz) to hold at least n + 1, doubling. */
static int jp_grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 4;
	if (ncap > SIZE_MAX / sz)
		return -ENOMEM;
	void *a = wp_realloc(*arr, ncap * sz);
	if (!a)
		return -ENOMEM;
	*arr = a;
	*cap = ncap;
	return 0;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The four hex digits after "\u", the cursor on the first. */
static int jp_hex4(struct jp *j, unsigned *cp)
{
	char fb[16];
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		int d = j->p < j->end ? hexval(*j->p) : -1;
		if (d < 0)
			return jp_fail(j, "expected 4 hex digits after \\u, found %s", jp_found(j, fb, sizeof(fb)));
		v = v << 4 | (unsigned)d;
		jp_advance(j, 1);
	}
	*cp = v;
	return 0;
}

static size_t utf8_put(unsigned char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (unsigned char)(0xc0 | cp >> 6);
		o[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (unsigned char)(0xe0 | cp >> 12);
		o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (unsigned char)(0xf0 | cp >> 18);
	o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the UTF-8 sequence at p (lead byte not ASCII), 0 if invalid:
 * no overlong forms, no surrogates, nothing past U+10FFFF (RFC 3629). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t k = 2; k < n; k++)
		if (p[k] < 0x80 || p[k] > 0xbf)
			return 0;
	return n;
}

/* A string, the cursor on its opening quote: decoded into a new buffer. */
static int jp_string(struct jp *j, char **out, size_t *outlen)
{
	unsigned sline = j->line, scol = j->col;
	const unsigned char *q = j->p + 1;
	char fb[16];

	/* The decoded string is never longer than its text: one allocation. */
	while (q < j->end && *q != '"')
		q += *q == '\\' && q + 1 < j->end ? 2 : 1;
	unsigned char *s = wp_malloc((size_t)(q - j->p));
	if (!s)
		return jp_nomem(j);
	size_t n = 0;
	int rc;

	jp_advance(j, 1);
	for (;;) {
		if (j->p >= j->end) {
			rc = jp_fail(j, "the input ends inside the string that starts at line %u, column %u", sline,
				     scol);
			goto err;
		}
		unsigned char c = *j->p;
		if (c == '"') {
			jp_advance(j, 1);
			break;
		}
		if (c < 0x20) {
			rc = jp_fail(j, "control character U+%04X inside a string (write it as an escape such as \\n)",
				     c);
			goto err;
		}
		if (c >= 0x80) {
			size_t k = utf8_len(j->p, j->end);
			if (!k) {
				rc = jp_fail(j, "invalid UTF-8 byte 0x%02X inside a string", c);
				goto err;
			}
			memcpy(s + n, j->p, k);
			n += k;
			jp_advance(j, k);
			continue;
		}
		if (c != '\\') {
			s[n++] = c;
			jp_advance(j, 1);
			continue;
		}
		unsigned eline = j->line, ecol = j->col;
		jp_advance(j, 1);
		if (j->p >= j->end) {
			rc = jp_fail(j, "the input ends inside the string that starts at line %u, column %u", sline,
				     scol);
			goto err;
		}
		unsigned char e = *j->p;
		unsigned cp;
		switch (e) {
		case '"':
		case '\\':
		case '/': cp = e; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			jp_advance(j, 1);
			if ((rc = jp_hex4(j, &cp)))
				goto err;
			if (cp >= 0xdc00 && cp <= 0xdfff) {
				rc = jp_fail_at(j, eline, ecol, -EINVAL,
						"invalid escape \\u%04X: a low surrogate without a high one before it",
						cp);
				goto err;
			}
			if (cp >= 0xd800 && cp <= 0xdbff) {
				unsigned lo = 0;
				if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
					rc = jp_fail_at(j, eline, ecol, -EINVAL,
							"invalid escape \\u%04X: a high surrogate must be followed by "
							"a \\uDC00-\\uDFFF low surrogate",
							cp);
					goto err;
				}
				jp_advance(j, 2);
				if ((rc = jp_hex4(j, &lo)))
					goto err;
				if (lo < 0xdc00 || lo > 0xdfff) {
					rc = jp_fail_at(j, eline, ecol, -EINVAL,
							"invalid escape \\u%04X\\u%04X: a high surrogate must be "
							"followed by a \\uDC00-\\uDFFF low surrogate",
							cp, lo);
					goto err;
				}
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			/* Six bytes of text or twelve for a pair: never less than the UTF-8. */
			n += utf8_put(s + n, cp);
			continue;
		default:
			if (e > 0x20 && e < 0x7f)
				rc = jp_fail_at(j, eline, ecol, -EINVAL, "invalid escape '\\%c' (JSON has %s)", e,
						"\\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX");
			else
				rc = jp_fail_at(j, eline, ecol, -EINVAL, "invalid escape: '\\' then %s",
						jp_found(j, fb, sizeof(fb)));
			goto err;
		}
		s[n++] = (unsigned char)cp;
		jp_advance(j, 1);
	}
	s[n] = 0;
	*out = (char *)s;
	*outlen = n;
	return 0;
err:
	wp_free(s);
	return rc;
}

/* The decimal point of the C library's current locale, which strtod obeys. */
static char locale_point(void)
{
	char b[8];
	snprintf(b, sizeof(b), "%.1f", 0.5);
	return b[1];
}

static int jp_number(struct jp *j, struct wp_json *v)
{
	const unsigned char *start = j->p;
	unsigned sline = j->line, scol = j->col;
	int neg = 0, isint = 1;
	char fb[16];

	if (*j->p == '-') {
		neg = 1;
		jp_advance(j, 1);
	}
	if (j->p < j->end && *j->p == '0') {
		jp_advance(j, 1);
		if (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			return jp_fail(j, "a number cannot have a leading zero");
	} else if (j->p < j->end && *j->p >= '1' && *j->p <= '9') {
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			jp_advance(j, 1);
	} else {
		return jp_fail(j, "expected a digit after '-', found %s", jp_found(j, fb, sizeof(fb)));
	}
	if (j->p < j->end && *j->p == '.') {
		isint = 0;
		jp_advance(j, 1);
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return jp_fail(j, "expected a digit after the decimal point, found %s",
				       jp_found(j, fb, sizeof(fb)));
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			jp_advance(j, 1);
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		isint = 0;
		jp_advance(j, 1);
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			jp_advance(j, 1);
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return jp_fail(j, "expected a digit in the exponent, found %s", jp_found(j, fb, sizeof(fb)));
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			jp_advance(j, 1);
	}
	size_t len = (size_t)(j->p - start);
	int shown = len > 40 ? 40 : (int)len;
	const char *dots = len > 40 ? "..." : "";

	if (isint) {
		uint64_t mag = 0;
		for (const unsigned char *d = start + neg; d < j->p; d++) {
			unsigned dig = (unsigned)(*d - '0');
			if (mag > (UINT64_MAX - dig) / 10)
				return jp_fail_at(j, sline, scol, -EINVAL,
						  "integer %.*s%s is out of range (more than 64 bits)", shown,
						  (const char *)start, dots);
			mag = mag * 10 + dig;
		}
		if (neg) {
			if (mag > (uint64_t)INT64_MAX + 1)
				return jp_fail_at(j, sline, scol, -EINVAL,
						  "integer %.*s%s is out of range (below -2^63)", shown,
						  (const char *)start, dots);
			v->type = WP_JSON_INT;
			v->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
		} else if (mag <= (uint64_t)INT64_MAX) {
			v->type = WP_JSON_INT;
			v->i = (int64_t)mag;
		} else {
			v->type = WP_JSON_UINT;
			v->u = mag;
		}
		return 0;
	}
	/* strtod reads the locale's decimal point; the text is ASCII digits,
	 * signs, 'e' and one '.', copied with that point in its place. */
	char small[64], *buf = len < sizeof(small) ? small : wp_malloc(len + 1);
	if (!buf)
		return jp_nomem(j);
	memcpy(buf, start, len);
	buf[len] = 0;
	char *dot = memchr(buf, '.', len);
	if (dot)
		*dot = locale_point();
	errno = 0;
	double d = strtod(buf, NULL);
	int range = errno == ERANGE && isinf(d);
	if (buf != small)
		wp_free(buf);
	if (range)
		return jp_fail_at(j, sline, scol, -EINVAL, "number %.*s%s is out of range (beyond a double)", shown,
				  (const char *)start, dots);
	v->type = WP_JSON_DOUBLE;
	v->d = d;
	return 0;
}

static int jp_value(struct jp *j, unsigned depth, struct wp_json **out);

static int jp_array(struct jp *j, unsigned depth, struct wp_json *v)
{
	size_t cap = 0;
	char fb[16];
	int rc;

	jp_advance(j, 1);
	jp_skip_ws(j);
	if (j->p < j->end && *j->p == ']') {
		jp_advance(j, 1);
		return 0;
	}
	for (;;) {
		struct wp_json *e;
		if ((rc = jp_value(j, depth, &e)))
			return rc;
		if (jp_grow((void **)&v->arr.v, &cap, v->arr.n, sizeof(*v->arr.v))) {
			wp_json_free(e);
			return jp_nomem(j);
		}
		v->arr.v[v->arr.n++] = e;
		jp_skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			jp_advance(j, 1);
			continue;
		}
		if (j->p < j->end && *j->p == ']') {
			jp_advance(j, 1);
			return 0;
		}
		return jp_fail(j, "expected ',' or ']' after an array element, found %s", jp_found(j, fb, sizeof(fb)));
	}
}

static int member_cmp(const void *a, const void *b)
{
	const struct wp_json_member *x = *(const struct wp_json_member *const *)a;
	const struct wp_json_member *y = *(const struct wp_json_member *const *)b;
	if (x->keylen != y->keylen)
		return x->keylen < y->keylen ? -1 : 1;
	int c = memcmp(x->key, y->key, x->keylen);
	if (c)
		return c;
	/* Equal keys keep the order of the text: the later one is the duplicate. */
	return x < y ? -1 : x > y;
}

/* A key given twice is refused rather than one of them winning silently. */
static int jp_check_dups(struct jp *j, const struct wp_json *v)
{
	const struct wp_json_member *dup = NULL, *first = NULL;
	size_t n = v->obj.n;

	if (n < 2)
		return 0;
	if (n <= 16) {
		for (size_t a = 1; a < n && !dup; a++)
			for (size_t b = 0; b < a; b++)
				if (v->obj.m[a].keylen == v->obj.m[b].keylen &&
				    !memcmp(v->obj.m[a].key, v->obj.m[b].key, v->obj.m[a].keylen)) {
					dup = &v->obj.m[a];
					first = &v->obj.m[b];
					break;
				}
	} else {
		const struct wp_json_member **idx = wp_malloc(n * sizeof(*idx));
		if (!idx)
			return jp_nomem(j);
		for (size_t k = 0; k < n; k++)
			idx[k] = &v->obj.m[k];
		qsort(idx, n, sizeof(*idx), member_cmp);
		for (size_t k = 1; k < n; k++)
			if (idx[k]->keylen == idx[k - 1]->keylen &&
			    !memcmp(idx[k]->key, idx[k - 1]->key, idx[k]->keylen) && (!dup || idx[k] < dup)) {
				dup = idx[k];
				first = idx[k - 1];
			}
		wp_free(idx);
	}
	if (!dup)
		return 0;
	/* The member keeps its value's place; the key is just before it. */
	return jp_fail_at(j, dup->val->line, dup->val->col, -EINVAL,
			  "duplicate key \"%.60s\" in an object (first at line %u, column %u)", dup->key,
			  first->val->line, first->val->col);
}

static int jp_object(struct jp *j, unsigned depth, struct wp_json *v)
{
	size_t cap = 0;
	char fb[16];
	int rc;

	jp_advance(j, 1);
	jp_skip_ws(j);
	if (j->p < j->end && *j->p == '}') {
		jp_advance(j, 1);
		return 0;
	}
	for (;;) {
		char *key;
		size_t keylen;
		struct wp_json *e;

		jp_skip_ws(j);
		if (j->p >= j->end || *j->p != '"')
			return jp_fail(j, "expected a string (an object key), found %s", jp_found(j, fb, sizeof(fb)));
		if ((rc = jp_string(j, &key, &keylen)))
			return rc;
		jp_skip_ws(j);
		if (j->p >= j->end || *j->p != ':') {
			rc = jp_fail(j, "expected ':' after the key \"%.60s\", found %s", key,
				     jp_found(j, fb, sizeof(fb)));
			wp_free(key);
			return rc;
		}
		jp_advance(j, 1);
		if ((rc = jp_value(j, depth, &e))) {
			wp_free(key);
			return rc;
		}
		if (jp_grow((void **)&v->obj.m, &cap, v->obj.n, sizeof(*v->obj.m))) {
			wp_free(key);
			wp_json_free(e);
			return jp_nomem(j);
		}
		v->obj.m[v->obj.n].key = key;
		v->obj.m[v->obj.n].keylen = keylen;
		v->obj.m[v->obj.n].val = e;
		v->obj.n++;
		jp_skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			jp_advance(j, 1);
			continue;
		}
		if (j->p < j->end && *j->p == '}') {
			jp_advance(j, 1);
			return jp_check_dups(j, v);
		}
		return jp_fail(j, "expected ',' or '}' after an object member, found %s", jp_found(j, fb, sizeof(fb)));
	}
}

static int jp_literal(struct jp *j, struct wp_json *v)
{
	static const struct {
		const char *word;
		enum wp_json_type type;
		int b;
	} lits[] = {{"true", WP_JSON_BOOL, 1}, {"false", WP_JSON_BOOL, 0}, {"null", WP_JSON_NULL, 0}};

	for (size_t k = 0; k < sizeof(lits) / sizeof(lits[0]); k++) {
		size_t n = strlen(lits[k].word);
		if (lits[k].word[0] != (char)*j->p)
			continue;
		if ((size_t)(j->end - j->p) < n || memcmp(j->p, lits[k].word, n))
			return jp_fail(j, "expected '%s'", lits[k].word);
		v->type = lits[k].type;
		v->b = lits[k].b;
		jp_advance(j, n);
		return 0;
	}
	return -EINVAL; /* not reached: the caller saw 't', 'f' or 'n' */
}

static int jp_value(struct jp *j, unsigned depth, struct wp_json **out)
{
	char fb[16];
	int rc;

	jp_skip_ws(j);
	if (j->p >= j->end)
		return jp_fail(j, "expected a value, found the end of the input");
	unsigned char c = *j->p;
	if (!(c == '{' || c == '[' || c == '"' || c == 't' || c == 'f' || c == 'n' || c == '-' ||
	      (c >= '0' && c <= '9')))
		return jp_fail(j, "expected a value (an object, array, string, number, true, false or null), found %s",
			       jp_found(j, fb, sizeof(fb)));
	if (++j->nvalues > j->lim.max_values)
		return jp_fail(j, "more than %zu values", j->lim.max_values);
	if ((c == '{' || c == '[') && depth + 1 > j->lim.max_depth)
		return jp_fail(j, "arrays and objects nested more than %u deep", j->lim.max_depth);

	struct wp_json *v = jp_node(WP_JSON_NULL, j->line, j->col);
	if (!v)
		return jp_nomem(j);
	switch (c) {
	case '{':
		v->type = WP_JSON_OBJECT;
		rc = jp_object(j, depth + 1, v);
		break;
	case '[':
		v->type = WP_JSON_ARRAY;
		rc = jp_array(j, depth + 1, v);
		break;
	case '"':
		v->type = WP_JSON_STRING;
		rc = jp_string(j, &v->str.s, &v->str.len);
		break;
	case 't':
	case 'f':
	case 'n': rc = jp_literal(j, v); break;
	default: rc = jp_number(j, v); break;
	}
	if (rc) {
		wp_json_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

int wp_json_parse(const char *text, size_t len, const struct wp_json_limits *lim, struct wp_json **out,
		  struct wp_json_error *err)
{
	struct jp j = {
		.p = (const unsigned char *)text,
		.end = (const unsigned char *)text + len,
		.line = 1,
		.col = 1,
		.err = err,
	};
	struct wp_json *v;
	char fb[16];
	int rc;

	j.lim.max_bytes = lim && lim->max_bytes ? lim->max_bytes : WP_JSON_MAX_BYTES;
	j.lim.max_depth = lim && lim->max_depth ? lim->max_depth : WP_JSON_MAX_DEPTH;
	j.lim.max_values = lim && lim->max_values ? lim->max_values : WP_JSON_MAX_VALUES;
	if (err) {
		err->line = err->col = 0;
		err->msg[0] = 0;
	}
	if (!text && len)
		return jp_fail_at(&j, 0, 0, -EINVAL, "no input");
	if (len > j.lim.max_bytes)
		return jp_fail_at(&j, 1, 1, -EINVAL, "the input has %zu bytes, more than the limit of %zu", len,
				  j.lim.max_bytes);
	if (len >= 3 && !memcmp(text, "\xef\xbb\xbf", 3))
		j.p += 3;
	if ((rc = jp_value(&j, 0, &v)))
		return rc;
	jp_skip_ws(&j);
	if (j.p < j.end) {
		rc = jp_fail(&j, "expected the end of the input after the top-level value, found %s",
			     jp_found(&j, fb, sizeof(fb)));
		wp_json_free(v);
		return rc;
	}
	*out = v;
	return 0;
}

const struct wp_json *wp_json_get(const struct wp_json *v, const char *key)
{
	size_t n = strlen(key);

	if (!v || v->type != WP_JSON_OBJECT)
		return NULL;
	for (size_t k = 0; k < v->obj.n; k++)
		if (v->obj.m[k].keylen == n && !memcmp(v->obj.m[k].key, key, n))
			return v->obj.m[k].val;
	return NULL;
}

const char *wp_json_type_name(enum wp_json_type t)
{
	static const char *const names[] = {
		[WP_JSON_NULL] = "null",
		[WP_JSON_BOOL] = "a boolean",
		[WP_JSON_INT] = "an integer",
		[WP_JSON_UINT] = "an integer",
		[WP_JSON_DOUBLE] = "a number with a fraction or exponent",
		[WP_JSON_STRING] = "a string",
		[WP_JSON_ARRAY] = "an array",
		[WP_JSON_OBJECT] = "an object",
	};
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "a value of unknown type";
}
