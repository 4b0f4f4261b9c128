/* SPDX-License-Identifier: Apache-2.0 */
/* The rule grammar that [transport] and [algorithm] share (see rules.h), the
 * size syntax, and the edit distance behind every "did you mean" suggestion. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <weft/weft.h>

#include "peer.h"
#include "rules.h"

/* Longest word a rule may hold; longer ones are refused rather than cut. */
#define RULE_WORD_MAX 256

/* Letters that differ only in case are the same here: [OFI] means [ofi]. */
static int same_letter(char x, char y)
{
	return tolower((unsigned char)x) == tolower((unsigned char)y);
}

/* Edits between a and b, a swap of two neighbours counting as one (the
 * optimal-string-alignment distance): "oif" is one from "ofi", two from "ib". */
int weft__edit_distance(const char *a, const char *b)
{
	if (!a)
		a = "";
	if (!b)
		b = "";
	size_t la = strlen(a), lb = strlen(b);
	if (la == 0)
		return lb > INT_MAX ? INT_MAX : (int)lb;
	if (lb == 0)
		return la > INT_MAX ? INT_MAX : (int)la;
	if (la > 65536 || lb > 65536)
		return INT_MAX; /* not a name anyone meant to type */
	/* Three rows are enough: row i needs rows i-1 and, for a swap, i-2. */
	int *pp = malloc((lb + 1) * sizeof(*pp));
	int *prev = malloc((lb + 1) * sizeof(*prev));
	int *cur = malloc((lb + 1) * sizeof(*cur));
	if (!pp || !prev || !cur) {
		free(pp);
		free(prev);
		free(cur);
		return (int)(la > lb ? la : lb);
	}
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + !same_letter(a[i - 1], b[j - 1]);
			int del = prev[j] + 1;
			int ins = cur[j - 1] + 1;
			int m = sub < del ? sub : del;
			m = m < ins ? m : ins;
			if (i > 1 && j > 1 && same_letter(a[i - 1], b[j - 2]) && same_letter(a[i - 2], b[j - 1]) &&
			    pp[j - 2] + 1 < m)
				m = pp[j - 2] + 1;
			cur[j] = m;
		}
		int *t = pp;
		pp = prev;
		prev = cur;
		cur = t;
	}
	int d = prev[lb];
	free(pp);
	free(prev);
	free(cur);
	return d;
}

int weft__parse_size(const char *s, uint64_t *out)
{
	if (!s)
		return -EINVAL;
	const char *p = s;
	while (isspace((unsigned char)*p))
		p++;
	int base = 10;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	if (!(base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p)))
		return -EINVAL; /* also refuses a sign, which strtoull would accept */
	uint64_t v = 0;
	for (; base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p); p++) {
		int dg = isdigit((unsigned char)*p) ? *p - '0' : tolower((unsigned char)*p) - 'a' + 10;
		if (v > (UINT64_MAX - (uint64_t)dg) / (uint64_t)base)
			return -EINVAL;
		v = v * (uint64_t)base + (uint64_t)dg;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	unsigned shift = 0;
	switch (tolower((unsigned char)*p)) {
	case 'k': shift = 10; break;
	case 'm': shift = 20; break;
	case 'g': shift = 30; break;
	case 't': shift = 40; break;
	default: break;
	}
	if (shift) {
		p++;
		if (tolower((unsigned char)p[0]) == 'i' && tolower((unsigned char)p[1]) == 'b')
			p += 2;
		else if (tolower((unsigned char)p[0]) == 'b')
			p++;
	} else if (tolower((unsigned char)*p) == 'b') {
		p++;
	}
	while (isspace((unsigned char)*p))
		p++;
	if (*p)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

static void rule_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rule_err(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct name_val {
	const char *name;
	int v;
};
static const struct name_val coll_names[] = {
	{"allreduce", WEFT_COLL_ALLREDUCE},
	{"allgather", WEFT_COLL_ALLGATHER},
	{"reduce-scatter", WEFT_COLL_REDUCE_SCATTER},
	{"reduce_scatter", WEFT_COLL_REDUCE_SCATTER},
	{"reducescatter", WEFT_COLL_REDUCE_SCATTER},
	{"broadcast", WEFT_COLL_BROADCAST},
	{"reduce", WEFT_COLL_REDUCE},
	{"alltoall", WEFT_COLL_ALLTOALL},
	{"sendrecv", WEFT_COLL_SENDRECV},
};
static const struct name_val mem_names[] = {{"host", WEFT_MEM_HOST}, {"cuda", WEFT_MEM_CUDA}, {"hip", WEFT_MEM_HIP}};
static const struct name_val peer_names[] = {
	{"same-process", WEFT_PEER_SAME_PROCESS},
	{"same-host", WEFT_PEER_SAME_HOST},
	{"other-host", WEFT_PEER_OTHER_HOST},
	{"same-gpu-link", WEFT__PEER_SAME_GPU_LINK},
};
static const char *const cond_names[] = {"coll", "size", "ranks", "mem", "peer"};
static const char *const action_names[] = {"use", "prefer", "forbid", "require"};

/* Appends "; did you mean 'x'?" when one candidate is close enough to be a typo. */
static void suggest(char *err, size_t errlen, const char *word, const char *const *cands, size_t n)
{
	if (!err || errlen == 0)
		return;
	const char *best = NULL;
	int bestd = INT_MAX;
	for (size_t i = 0; i < n; i++) {
		int d = weft__edit_distance(word, cands[i]);
		if (d < bestd) {
			bestd = d;
			best = cands[i];
		}
	}
	size_t wl = strlen(word);
	if (best && bestd <= 3 && (size_t)bestd < wl) {
		size_t used = strlen(err);
		if (used < errlen)
			snprintf(err + used, errlen - used, "; did you mean '%s'?", best);
	}
}

/* Parses "a,b,c" against a name table into a bit mask. */
static int parse_list(const char *what, const char *cond, const char *val, const struct name_val *table,
		      size_t n, uint32_t *mask, char *err, size_t errlen)
{
	uint32_t m = 0;
	const char *p = val;
	if (!*p) {
		rule_err(err, errlen, "'%s' needs a value", cond);
		return -WEFT_ERR_CONFIG;
	}
	for (;;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char item[RULE_WORD_MAX];
		if (len == 0) {
			rule_err(err, errlen, "empty item in '%s'", cond);
			return -WEFT_ERR_CONFIG;
		}
		if (len >= sizeof(item))
			len = sizeof(item) - 1; /* cannot match a name anyway */
		memcpy(item, p, len);
		item[len] = '\0';
		int v = -1;
		for (size_t i = 0; i < n; i++)
			if (strcasecmp(table[i].name, item) == 0)
				v = table[i].v;
		if (v < 0) {
			const char *cands[16];
			size_t nc = n < 16 ? n : 16;
			char known[256] = "";
			for (size_t i = 0; i < nc; i++) {
				cands[i] = table[i].name;
				size_t kl = strlen(known);
				snprintf(known + kl, sizeof(known) - kl, "%s%s", i ? ", " : "", cands[i]);
			}
			rule_err(err, errlen, "unknown %s '%s' in '%s' (one of: %s)", what, item, cond, known);
			suggest(err, errlen, item, cands, nc);
			return -WEFT_ERR_CONFIG;
		}
		m |= 1u << v;
		if (!e)
			break;
		p = e + 1;
	}
	*mask = m;
	return 0;
}

/* Parses "lo..hi" (either end empty) or a bare value; sizes or rank counts. */
static int parse_range(const char *cond, const char *val, int is_size, uint64_t *lo, uint64_t *hi,
		       char *err, size_t errlen)
{
	uint64_t l = 0, h = is_size ? UINT64_MAX : (uint64_t)INT_MAX;
	const char *dots = strstr(val, "..");
	char a[RULE_WORD_MAX], b[RULE_WORD_MAX];
	if (!*val) {
		rule_err(err, errlen, "'%s' needs a value", cond);
		return -WEFT_ERR_CONFIG;
	}
	if (dots) {
		snprintf(a, sizeof(a), "%.*s", (int)(dots - val), val);
		snprintf(b, sizeof(b), "%s", dots + 2);
		if (strstr(b, "..")) {
			rule_err(err, errlen, "bad range '%s' in '%s'", val, cond);
			return -WEFT_ERR_CONFIG;
		}
	} else {
		snprintf(a, sizeof(a), "%s", val);
		snprintf(b, sizeof(b), "%s", val);
	}
	const char *ends[2] = {a, b};
	uint64_t *outs[2] = {&l, &h};
	for (int i = 0; i < 2; i++) {
		if (!*ends[i])
			continue;
		uint64_t v;
		int rc;
		if (is_size) {
			rc = weft__parse_size(ends[i], &v);
		} else {
			char *end;
			const char *s = ends[i];
			errno = 0;
			unsigned long long x = isdigit((unsigned char)*s) ? strtoull(s, &end, 10) : 0;
			rc = (!isdigit((unsigned char)*s) || *end || errno || x > INT_MAX) ? -EINVAL : 0;
			v = x;
		}
		if (rc) {
			rule_err(err, errlen, "bad %s '%s' in '%s'", is_size ? "size" : "rank count", ends[i], cond);
			return -WEFT_ERR_CONFIG;
		}
		*outs[i] = v;
	}
	if (l > h) {
		rule_err(err, errlen, "empty range '%s' (low end above high end)", cond);
		return -WEFT_ERR_CONFIG;
	}
	*lo = l;
	*hi = h;
	return 0;
}

/* The rule's first word: use, prefer, forbid or require. */
static int parse_action(const char *word, struct weft__rule *r, char *err, size_t errlen)
{
	int a = -1;
	for (size_t i = 0; i < sizeof(action_names) / sizeof(action_names[0]); i++)
		if (strcasecmp(word, action_names[i]) == 0)
			a = (int)i;
	if (a < 0) {
		rule_err(err, errlen, "unknown action '%s' (one of: use, prefer, forbid, require)", word);
		suggest(err, errlen, word, action_names, 4);
		return -WEFT_ERR_CONFIG;
	}
	r->action = (enum weft__rule_action)a;
	return 0;
}

/* The second: a name [a-z0-9_.-], or pack/name. */
static int parse_target(const char *word, size_t len, struct weft__rule *r, char *err, size_t errlen)
{
	if (len >= sizeof(r->target)) {
		rule_err(err, errlen, "target '%s' is longer than %zu characters", word, sizeof(r->target) - 1);
		return -WEFT_ERR_CONFIG;
	}
	int slashes = 0, ok = 1;
	for (const char *c = word; *c; c++) {
		if (*c == '/')
			slashes++;
		else if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-' || *c == '_' ||
			   *c == '.'))
			ok = 0;
	}
	if (!ok || slashes > 1 || word[0] == '/' || word[len - 1] == '/' || strchr(word, '=') ||
	    strcasecmp(word, "when") == 0) {
		rule_err(err, errlen, "bad target '%s' (a name [a-z0-9_.-], or pack/name)", word);
		return -WEFT_ERR_CONFIG;
	}
	memcpy(r->target, word, len + 1);
	return 0;
}

/* One condition name=value; `seen` has a bit per condition already given. */
static int parse_cond(char *word, struct weft__rule *r, unsigned *seen, char *err, size_t errlen)
{
	char *eq = strchr(word, '=');
	if (!eq) {
		rule_err(err, errlen, "bad condition '%s' (want name=value, no blanks around '=')", word);
		return -WEFT_ERR_CONFIG;
	}
	*eq = '\0';
	const char *val = eq + 1;
	int c = -1;
	for (int i = 0; i < 5; i++)
		if (strcasecmp(word, cond_names[i]) == 0)
			c = i;
	if (c < 0) {
		rule_err(err, errlen, "unknown condition '%s' (one of: coll, size, ranks, mem, peer)", word);
		suggest(err, errlen, word, cond_names, 5);
		return -WEFT_ERR_CONFIG;
	}
	if (*seen & (1u << c)) {
		rule_err(err, errlen, "condition '%s' given twice", word);
		return -WEFT_ERR_CONFIG;
	}
	*seen |= 1u << c;
	*eq = '=';
	int rc = 0;
	uint64_t lo, hi;
	switch (c) {
	case 0:
		rc = parse_list("collective", word, val, coll_names, sizeof(coll_names) / sizeof(coll_names[0]),
				&r->colls, err, errlen);
		break;
	case 1:
		rc = parse_range(word, val, 1, &lo, &hi, err, errlen);
		if (!rc) {
			r->size_lo = lo;
			r->size_hi = hi;
		}
		break;
	case 2:
		rc = parse_range(word, val, 0, &lo, &hi, err, errlen);
		if (!rc) {
			r->ranks_lo = (int)lo;
			r->ranks_hi = (int)hi;
		}
		break;
	case 3:
		rc = parse_list("memory type", word, val, mem_names, sizeof(mem_names) / sizeof(mem_names[0]),
				&r->mem_types, err, errlen);
		break;
	default:
		rc = parse_list("peer class", word, val, peer_names, sizeof(peer_names) / sizeof(peer_names[0]),
				&r->peer_classes, err, errlen);
		break;
	}
	return rc ? -WEFT_ERR_CONFIG : 0;
}

int weft__rule_parse(const char *line, struct weft__rule *rule, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!line || !rule) {
		rule_err(err, errlen, "no rule");
		return -EINVAL;
	}
	struct weft__rule r;
	memset(&r, 0, sizeof(r));
	r.size_lo = 0;
	r.size_hi = UINT64_MAX;
	r.ranks_lo = 0;
	r.ranks_hi = INT_MAX;
	r.lineno = rule->lineno;
	unsigned seen = 0; /* bit per condition name, to refuse repeats */
	/* States: 0 action, 1 target, 2 after target (want "when"), 3 want cond,
	 * 4 after cond (want "and"). */
	int state = 0;
	const char *p = line;
	char word[RULE_WORD_MAX];
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *s = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		size_t len = (size_t)(p - s);
		if (len >= sizeof(word)) {
			rule_err(err, errlen, "word '%.32s...' is too long", s);
			return -WEFT_ERR_CONFIG;
		}
		memcpy(word, s, len);
		word[len] = '\0';
		int rc = 0;
		switch (state) {
		case 0:
			rc = parse_action(word, &r, err, errlen);
			break;
		case 1:
			rc = parse_target(word, len, &r, err, errlen);
			break;
		case 2:
		case 4: {
			const char *want = state == 2 ? "when" : "and";
			if (strcasecmp(word, want) != 0) {
				if (state == 2)
					rule_err(err, errlen, "expected 'when' after the target, found '%s'", word);
				else
					rule_err(err, errlen, "expected 'and' between conditions, found '%s'", word);
				rc = -WEFT_ERR_CONFIG;
			}
			break;
		}
		default:
			rc = parse_cond(word, &r, &seen, err, errlen);
			break;
		}
		if (rc)
			return rc;
		state = state == 0 ? 1 : state == 1 ? 2 : state == 3 ? 4 : 3;
	}
	switch (state) {
	case 0:
		rule_err(err, errlen, "empty rule");
		return -WEFT_ERR_CONFIG;
	case 1:
		rule_err(err, errlen, "'%s' needs a target", action_names[r.action]);
		return -WEFT_ERR_CONFIG;
	case 3:
		rule_err(err, errlen, "'%s' at the end needs a condition after it", word);
		return -WEFT_ERR_CONFIG;
	default:
		break;
	}
	*rule = r;
	return 0;
}

int weft__rule_matches(const struct weft__rule *rule, const struct weft__rule_query *q)
{
	if (!rule || !q)
		return 0;
	if (rule->colls && q->coll >= 0 && (q->coll >= 32 || !(rule->colls & (1u << q->coll))))
		return 0;
	if (q->bytes && (q->bytes < rule->size_lo || q->bytes > rule->size_hi))
		return 0;
	if (q->nranks >= 0 && (q->nranks < rule->ranks_lo || q->nranks > rule->ranks_hi))
		return 0;
	if (rule->mem_types && q->mem_type >= 0 &&
	    (q->mem_type >= 32 || !(rule->mem_types & (1u << q->mem_type))))
		return 0;
	if (rule->peer_classes && q->peer_class >= 0) {
		uint32_t want = q->peer_class < 32 ? 1u << q->peer_class : 0;
		/* A GPU-linked peer is on this host too: same-host rules cover it,
		 * so a config written before the class existed keeps its meaning. */
		if (q->peer_class == (int)WEFT__PEER_SAME_GPU_LINK)
			want |= 1u << WEFT_PEER_SAME_HOST;
		if (!(rule->peer_classes & want))
			return 0;
	}
	return 1;
}
