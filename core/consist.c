/* SPDX-License-Identifier: Apache-2.0 */
/* Consistency check at communicator creation: ranks allgather a hash of what
 * must agree (core version, loaded plugins with their ABI and build identity,
 * [transport] and [algorithm] rules, algorithm-pack parameters, core.require)
 * with their local set-up status; on a difference they swap the texts and
 * each names it. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "config.h"
#include "consist.h"
#include "log.h"
#include "registry.h"
#include "sha256.h"

#define REC_MAGIC 0x53434657u /* "WFCS" */
#define ERR_LEN 224
#define TEXT_MAX (256u << 10)
#define MAX_REPORT 3 /* ranks whose difference is spelled out */
#define MAX_DIFFS 8  /* differences spelled out per rank */
/* Bootstrap tag of the texts swapped on a mismatch: among the core's reserved
 * tags (base.h uses +1..+3 and the fin range from +0x1000). */
#define TAG_TEXT (WEFT__TAG_RESERVED + 0x10)

struct rec {
	uint32_t magic;
	int32_t status;
	uint8_t hash[WEFT_SHA256_BYTES];
	uint32_t text_len;
	char err[ERR_LEN];
};

/* Appends one "key = value" line. */
static int add(char **buf, size_t *len, size_t *cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int add(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(*buf ? *buf + *len : NULL, *buf ? *cap - *len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return -EINVAL;
		if (*buf && *len + (size_t)n < *cap) {
			*len += (size_t)n;
			return 0;
		}
		size_t ncap = *cap ? *cap * 2 : 1024;
		while (ncap < *len + (size_t)n + 1)
			ncap *= 2;
		char *nb = realloc(*buf, ncap);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = ncap;
	}
}

/* ---------------------------------------------------- plugin identity
 * Which build of a plugin file a rank loaded: the GNU build-id note of the
 * loaded object (what the linker derived from its contents, so two builds
 * that differ in any byte differ), read from the mapped program headers;
 * failing that, a SHA-256 of the file's bytes. */
struct bid_find {
	const void *addr; /* something inside the object: its ops table */
	char *out;
	size_t len;
	int object; /* the object holding addr was found */
	int found;  /* and it has a build-id note */
};

static void hex(const unsigned char *p, size_t n, char *out, size_t len)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 3 <= len; i++, k += 2)
		snprintf(out + k, len - k, "%02x", p[i]);
	if (len)
		out[k < len ? k : len - 1] = '\0';
}

static int bid_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct bid_find *b = arg;
	(void)size;
	int holds = 0;
	for (int i = 0; i < info->dlpi_phnum && !holds; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
		holds = ph->p_type == PT_LOAD && (uintptr_t)b->addr >= lo && (uintptr_t)b->addr < lo + ph->p_memsz;
	}
	if (!holds)
		return 0;
	b->object = 1;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		/* Name and descriptor are padded to the segment's alignment (4, or 8
		 * for a segment of 8-aligned notes such as .note.gnu.property). */
		size_t al = ph->p_align == 8 ? 8 : 4;
		const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
		size_t left = ph->p_memsz;
		while (left >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
			size_t nsz = (nh->n_namesz + al - 1) & ~(al - 1), dsz = (nh->n_descsz + al - 1) & ~(al - 1);
			if (nsz > left || dsz > left || sizeof(*nh) + nsz + dsz > left)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && memcmp(p + sizeof(*nh), "GNU", 4) == 0 &&
			    nh->n_descsz > 0) {
				hex(p + sizeof(*nh) + nsz, nh->n_descsz, b->out, b->len);
				b->found = 1;
				return 1;
			}
			p += sizeof(*nh) + nsz + dsz;
			left -= sizeof(*nh) + nsz + dsz;
		}
	}
	return 1;
}

/* Writes "build-id <hex>" or "file sha256 <hex>" (or why neither) for the
 * plugin whose ops table is ops, loaded from path. */
static void plugin_identity(const void *ops, const char *path, char *out, size_t len)
{
	char id[2 * 64 + 1] = "";
	struct bid_find b = {.addr = ops, .out = id, .len = sizeof(id)};
	if (ops)
		dl_iterate_phdr(bid_cb, &b);
	if (b.found) {
		snprintf(out, len, "build-id %s", id);
		return;
	}
	FILE *f = path ? fopen(path, "rb") : NULL;
	if (!f) {
		snprintf(out, len, "build unknown (no build-id, and %s cannot be read: %s)", path ? path : "(no path)",
			 strerror(errno));
		return;
	}
	struct weft__sha256 c;
	weft__sha256_init(&c);
	unsigned char buf[8192], sum[WEFT_SHA256_BYTES];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		weft__sha256_update(&c, buf, n);
	int bad = ferror(f);
	fclose(f);
	weft__sha256_final(&c, sum);
	if (bad) {
		snprintf(out, len, "build unknown (no build-id, and reading %s failed)", path);
		return;
	}
	hex(sum, sizeof(sum), id, sizeof(id));
	snprintf(out, len, "file sha256 %s", id);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The parameters whose values must agree: those of every loaded algorithm
 * pack (they shape the wire protocol of its collectives), core.require and
 * core.check_calls (a rank that compares signatures waits for a peer's,
 * which a rank with the check off never sends).
 * Taken from the same listing weft-info -c prints, so every value is resolved
 * exactly as the code reads it (environment, file, default). */
static int add_params(char **buf, size_t *len, size_t *cap)
{
	char *txt = NULL;
	size_t tl = 0;
	FILE *f = open_memstream(&txt, &tl);
	if (!f)
		return -ENOMEM;
	weft__config_print(f);
	fclose(f);
	if (!txt)
		return -ENOMEM;
	const struct weft__plugin_entry *const *e = NULL;
	int ne = weft__registry_entries(&e);
	int rc = 0;
	for (char *line = txt; line && *line && rc == 0;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *eq = strstr(line, " = ");
		char *src = eq ? strstr(eq, "  (") : NULL;
		if (line[0] != ' ' && eq && src) {
			char *dot = memchr(line, '.', (size_t)(eq - line));
			int keep = 0;
			if (dot) {
				size_t sl = (size_t)(dot - line);
				keep = (strncmp(line, "core.require", 12) == 0 && eq - line == 12) ||
				       (strncmp(line, "core.check_calls", 16) == 0 && eq - line == 16);
				for (int i = 0; i < ne && !keep; i++)
					keep = e[i]->state == WEFT_PLUGIN_LOADED && e[i]->kind == WEFT_PLUGIN_ALGO_PACK &&
					       e[i]->name && strlen(e[i]->name) == sl && strncmp(e[i]->name, line, sl) == 0;
			}
			if (keep)
				rc = add(buf, len, cap, "param %.*s = %.*s\n", (int)(eq - line), line, (int)(src - eq - 3),
					 eq + 3);
		}
		line = nl ? nl + 1 : NULL;
	}
	free(txt);
	return rc;
}

/* A pack's agreement lines (weft_algo_ops.agreement), each its own item
 * "pack <name> <key> = <value>". */
static int add_agreement(const struct weft__plugin_entry *e, char ***items, int *ni)
{
	const struct weft_algo_ops *ops = e->ops;
	if (e->state != WEFT_PLUGIN_LOADED || e->kind != WEFT_PLUGIN_ALGO_PACK || !e->name ||
	    !WEFT_HAS_OP(ops, struct weft_algo_ops, agreement))
		return 0;
	const char *t = ops->agreement();
	for (const char *l = t; l && *l;) {
		const char *nl = strchr(l, '\n');
		int ll = nl ? (int)(nl - l) : (int)strlen(l);
		if (ll > 0) {
			char **grown = realloc(*items, (size_t)(*ni + 1) * sizeof(**items));
			if (!grown)
				return -ENOMEM;
			*items = grown;
			if (asprintf(&grown[*ni], "pack %s %.*s\n", e->name, ll, l) < 0) {
				grown[*ni] = NULL;
				return -ENOMEM;
			}
			(*ni)++;
		}
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

char *weft__consist_text(void)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = add(&buf, &len, &cap, "core version = %d\n", weft_get_version());
	const struct weft__plugin_entry *const *e = NULL;
	int ne = weft__registry_entries(&e);
	const char **names = calloc(ne > 0 ? (size_t)ne : 1, sizeof(*names));
	char **items = calloc(ne > 0 ? (size_t)ne : 1, sizeof(*items));
	int ni = 0;
	if (!names || !items)
		rc = -ENOMEM;
	for (int i = 0; rc == 0 && i < ne; i++) {
		if (e[i]->state != WEFT_PLUGIN_LOADED || !e[i]->name)
			continue;
		char build[192];
		plugin_identity(e[i]->ops, e[i]->path, build, sizeof(build));
		if (asprintf(&items[ni], "plugin %s = %s, ABI %u.%u, %s\n", e[i]->name,
			     e[i]->kind == WEFT_PLUGIN_TRANSPORT ? "transport" : "algorithm pack", e[i]->abi_major,
			     e[i]->abi_minor, build) < 0) {
			items[ni] = NULL;
			rc = -ENOMEM;
			break;
		}
		ni++;
	}
	for (int i = 0; rc == 0 && i < ne; i++)
		rc = add_agreement(e[i], &items, &ni);
	/* Search order may differ between hosts; the set may not. */
	qsort(items, (size_t)ni, sizeof(*items), cmp_str);
	for (int i = 0; rc == 0 && i < ni; i++)
		rc = add(&buf, &len, &cap, "%s", items[i]);
	for (int i = 0; items && i < ni; i++)
		free(items[i]);
	free(items);
	free(names);
	static const char *const secs[] = {"transport", "algorithm"};
	for (int s = 0; rc == 0 && s < 2; s++) {
		const char *const *lines = NULL;
		const int *linenos = NULL;
		int nl = weft__config_section_lines(secs[s], &lines, &linenos);
		for (int i = 0; rc == 0 && i < nl; i++)
			rc = add(&buf, &len, &cap, "[%s] rule %d = %s\n", secs[s], i + 1, lines[i]);
	}
	if (rc == 0)
		rc = add_params(&buf, &len, &cap);
	if (rc != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* The value of `key` in text (up to the line's end), or NULL. */
static const char *find_key(const char *text, const char *key, size_t klen, size_t *vlen)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);
		if (ll >= klen + 3 && strncmp(l, key, klen) == 0 && strncmp(l + klen, " = ", 3) == 0) {
			*vlen = ll - klen - 3;
			return l + klen + 3;
		}
		l = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* Logs what differs between the texts of ranks a and b. */
static void report_diff(int a, const char *ta, int b, const char *tb)
{
	int shown = 0;
	for (int pass = 0; pass < 2 && shown < MAX_DIFFS; pass++) {
		const char *t = pass ? tb : ta, *o = pass ? ta : tb;
		for (const char *l = t; l && *l && shown < MAX_DIFFS;) {
			const char *nl = strchr(l, '\n');
			size_t ll = nl ? (size_t)(nl - l) : strlen(l);
			const char *eq = memmem(l, ll, " = ", 3);
			if (eq) {
				size_t klen = (size_t)(eq - l), vl = ll - klen - 3, ovl = 0;
				const char *ov = find_key(o, l, klen, &ovl);
				if (!ov || (pass == 0 && (ovl != vl || memcmp(ov, eq + 3, vl) != 0))) {
					int ra = pass ? b : a, rb = pass ? a : b;
					if (ov)
						WEFT_ERROR("ranks disagree: %.*s is '%.*s' on rank %d but '%.*s' on rank %d",
							   (int)klen, l, (int)vl, eq + 3, ra, (int)ovl, ov, rb);
					else
						WEFT_ERROR("ranks disagree: %.*s is '%.*s' on rank %d but absent on rank %d",
							   (int)klen, l, (int)vl, eq + 3, ra, rb);
					shown++;
				}
			}
			l = nl ? nl + 1 : NULL;
		}
	}
	if (shown == 0)
		WEFT_ERROR("ranks disagree: rank %d and rank %d differ in the order of their rules", a, b);
}

int weft__consist_check(weft_comm_t *comm, int local_status, const char *local_err)
{
	int n = comm->nranks;
	char *text = weft__consist_text();
	if (!text)
		return -ENOMEM;
	size_t tl = strlen(text);
	if (tl + 1 > TEXT_MAX) {
		WEFT_ERROR("configuration to compare across ranks is %zu bytes, over %u", tl, TEXT_MAX);
		free(text);
		return -E2BIG;
	}
	struct rec mine;
	memset(&mine, 0, sizeof(mine));
	mine.magic = REC_MAGIC;
	mine.status = local_status;
	weft__sha256(text, tl, mine.hash);
	mine.text_len = (uint32_t)tl;
	if (local_err)
		snprintf(mine.err, sizeof(mine.err), "%s", local_err);
	struct rec *all = calloc((size_t)n, sizeof(*all));
	char **texts = NULL;
	if (!all) {
		free(text);
		return -ENOMEM;
	}
	int rc = weft__bootstrap_allgather(comm->bs, &mine, all, sizeof(mine));
	if (rc != 0)
		goto out;
	int differ = 0;
	for (int r = 0; r < n; r++) {
		if (all[r].magic != REC_MAGIC || all[r].text_len >= TEXT_MAX) {
			WEFT_ERROR("rank %d sent a malformed consistency record", r);
			rc = -WEFT_ERR_PROTOCOL;
			goto out;
		}
		all[r].err[ERR_LEN - 1] = '\0';
		if (memcmp(all[r].hash, all[0].hash, sizeof(all[0].hash)) != 0)
			differ = 1;
	}
	/* A rank that failed its own set-up fails everyone: the others would
	 * otherwise wait for it later, in a connect or a collective. */
	for (int r = 0; r < n; r++) {
		if (all[r].status == 0)
			continue;
		int st = all[r].status;
		if (r != comm->rank)
			WEFT_ERROR("communicator creation fails on every rank: rank %d could not set up: %s", r,
				   all[r].err[0] ? all[r].err : weft_strerror(st));
		rc = st < 0 && st > -WEFT_ERR_LAST ? st : -WEFT_ERR_PROTOCOL;
		goto out;
	}
	if (!differ)
		goto out;
	/* Everyone saw the same hashes, so everyone takes this second round and
	 * knows who sends: rank 0 and the first MAX_REPORT ranks that differ
	 * from it send their texts to every other rank (bootstrap sends are
	 * queued, so the order cannot deadlock); nobody needs the rest. */
	int who[1 + MAX_REPORT], nwho = 0;
	who[nwho++] = 0;
	for (int r = 1; r < n && nwho < 1 + MAX_REPORT; r++)
		if (memcmp(all[r].hash, all[0].hash, sizeof(all[0].hash)) != 0)
			who[nwho++] = r;
	texts = calloc(1 + MAX_REPORT, sizeof(char *));
	if (!texts) {
		rc = -ENOMEM;
		goto out;
	}
	/* A local failure (memory) must not stop this rank's own send: others wait for it. */
	int lrc = 0;
	for (int k = 0; k < nwho; k++) {
		int r = who[k];
		int src = 0;
		if (r == comm->rank) {
			for (int p = 0; p < n && src == 0; p++)
				if (p != r)
					src = weft__bootstrap_send(comm->bs, p, TAG_TEXT, text, tl);
			texts[k] = strdup(text);
		} else if (lrc == 0) {
			texts[k] = malloc((size_t)all[r].text_len + 1);
			if (texts[k]) {
				src = weft__bootstrap_recv(comm->bs, r, TAG_TEXT, texts[k], all[r].text_len);
				texts[k][all[r].text_len] = '\0';
			}
		}
		if (src != 0) {
			rc = src; /* the bootstrap broke: every rank sees it */
			goto out;
		}
		if (!texts[k] && lrc == 0)
			lrc = -ENOMEM;
	}
	if (lrc != 0) {
		WEFT_ERROR("communicator creation fails on every rank: ranks differ in configuration, plugin set or "
			   "versions (no memory to say how)");
		rc = -WEFT_ERR_MISMATCH;
		goto out;
	}
	WEFT_ERROR("communicator creation fails on every rank: ranks differ in configuration, plugin set or versions "
		   "(weft-info -c on each host shows its values and their sources)");
	for (int k = 1; k < nwho; k++)
		report_diff(0, texts[0], who[k], texts[k]);
	rc = -WEFT_ERR_MISMATCH;
out:
	for (int k = 0; texts && k < 1 + MAX_REPORT; k++)
		free(texts[k]);
	free(texts);
	free(all);
	free(text);
	return rc;
}
