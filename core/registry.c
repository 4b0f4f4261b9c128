/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin registry: finds libweft-*.so along the search path, loads each once,
 * checks its descriptors against this core's ABI, and remembers every file it
 * saw (loaded, rejected or shadowed) with the reason, for selection and weft-info.
 *
 * This is the one process-wide object of weft (STYLE.md). Everything below is
 * guarded by reg_lock. The scan runs once, under the lock, on the first call of
 * weft__registry_load from any thread; its result is kept and returned to every
 * later caller, and the entries never change afterwards. Plugins are never
 * dlclosed: their descriptors, ops tables and the parameters they declared must
 * stay valid until exit. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "plugin_api.h"
#include "plugsel.h"
#include "sigkeep.h"
#include "trust.h"
#include "elfcheck.h"
#include "registry.h"
#include "rules.h"

#ifndef WEFT_PLUGIN_INSTALL_SUBDIR
#define WEFT_PLUGIN_INSTALL_SUBDIR "weft"
#endif

/* A file that returns more descriptors than this has most likely forgotten the
 * NULL terminator; reading on would walk through unrelated memory. */
#define REG_MAX_DESCS 64
#define REG_NAME_MAX 63

struct reg_entry {
	struct weft__plugin_entry pub; /* first: the public array points here */
	int dir;                       /* index of its folder in the search order */
	char *stem;                    /* file name without lib, weft- and .so */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_loaded;   /* the scan has run; reg_result is final */
static int reg_result;
static char *reg_error;  /* why reg_result is not 0: one line per problem */
static struct reg_entry **reg_list;
static const struct weft__plugin_entry **reg_pub; /* the same entries, for callers */
static int reg_n, reg_cap;
static char *reg_path;   /* colon list of the folders in search order */
static struct weft_plugin *reg_plugins; /* records lent to plugins; kept, never freed */
static struct weft_plugin *reg_current; /* the record of the file being loaded, if its init ran */
/* Set while this thread runs the scan: a plugin's init that calls back into
 * the registry must get an error, not a self-deadlock. */
static _Thread_local int reg_in_load;
static struct weft__plugsel reg_sel; /* [core] plugins, read once by the scan */
static int reg_cfg_broken; /* the file did not load: no plugin is opened, so none logs its values */

/* ------------------------------------------------------------ entries */

static char *stem_of(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "lib", 3) == 0)
		base += 3;
	if (strncmp(base, "weft-", 5) == 0)
		base += 5;
	size_t n = strlen(base);
	if (n > 3 && strcmp(base + n - 3, ".so") == 0)
		n -= 3;
	return strndup(base, n);
}

/* A plugin-supplied string made safe to print: bounded, control bytes as '?'. */
static void printable(const char *s, char *buf, size_t len)
{
	size_t i = 0;
	for (; s && s[i] && i + 1 < len; i++)
		buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	buf[i] = '\0';
}

static int add_entry(enum weft__plugin_state state, const char *path, const char *name, int dir,
		     const struct weft_plugin_desc *d, const char *reason)
{
	if (reg_n == reg_cap) {
		int cap = reg_cap ? reg_cap * 2 : 16;
		struct reg_entry **l = realloc(reg_list, (size_t)cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		reg_list = l;
		const struct weft__plugin_entry **p = realloc(reg_pub, (size_t)cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		reg_pub = p;
		reg_cap = cap;
	}
	struct reg_entry *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->pub.state = state;
	e->pub.path = strdup(path);
	e->pub.name = name ? strdup(name) : NULL;
	e->pub.reason = reason ? strdup(reason) : NULL;
	e->stem = stem_of(path);
	e->dir = dir;
	e->pub.core = reg_current ? &reg_current->api : NULL;
	if (d) {
		e->pub.kind = d->kind;
		e->pub.abi_major = d->abi_major;
		e->pub.abi_minor = d->abi_minor;
		if (state == WEFT_PLUGIN_LOADED)
			e->pub.ops = d->ops;
	}
	if (!e->pub.path || (name && !e->pub.name) || (reason && !e->pub.reason) || !e->stem) {
		free(e->pub.path);
		free(e->pub.name);
		free(e->pub.reason);
		free(e->stem);
		free(e);
		return -ENOMEM;
	}
	reg_list[reg_n] = e;
	reg_pub[reg_n] = &e->pub;
	reg_n++;
	return 0;
}

/* Records a refused file or descriptor and says so in one log line. */
__attribute__((format(printf, 5, 6))) static void reject(const char *path, const char *name, int dir,
							  const struct weft_plugin_desc *d, const char *fmt, ...)
{
	char reason[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	WEFT_WARN("plugin %s rejected: %s", path, reason);
	if (add_entry(WEFT_PLUGIN_REJECTED, path, name, dir, d, reason) != 0)
		WEFT_ERROR("out of memory recording the rejection of %s", path);
}

static const struct reg_entry *find_loaded(const char *name)
{
	for (int i = 0; i < reg_n; i++)
		if (reg_list[i]->pub.state == WEFT_PLUGIN_LOADED && strcmp(reg_list[i]->pub.name, name) == 0)
			return reg_list[i];
	return NULL;
}

/* ------------------------------------------------------- descriptor checks */

static int valid_name(const char *s)
{
	size_t n = 0;
	for (; s[n] && n <= REG_NAME_MAX; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '-'))
			return 0;
	return n > 0 && n <= REG_NAME_MAX;
}

/* The first required transport op the table lacks, or NULL. Only offsets of
 * this core's struct are used, so a table from any minor is read safely. */
static const char *missing_transport_op(const struct weft_transport_ops *t)
{
#define REQUIRE_OP(op) \
	if (!WEFT_HAS_OP(t, struct weft_transport_ops, op)) \
		return #op;
	REQUIRE_OP(open)
	REQUIRE_OP(close)
	REQUIRE_OP(mem_register)
	REQUIRE_OP(mem_deregister)
	REQUIRE_OP(mem_serialize)
	REQUIRE_OP(mem_import)
	REQUIRE_OP(mem_release)
	REQUIRE_OP(endpoint)
	REQUIRE_OP(connect)
	REQUIRE_OP(disconnect)
	REQUIRE_OP(put)
	REQUIRE_OP(signal)
	REQUIRE_OP(flush)
	REQUIRE_OP(progress)
#undef REQUIRE_OP
	return NULL;
}

/* <name> of .../libweft-<name>.so (is_plugin_file matched the pattern). */
static void file_stem(const char *path, char *out, size_t len)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	if (strncmp(b, "libweft-", 8) == 0)
		b += 8;
	size_t n = strlen(b);
	if (n >= 3 && strcmp(b + n - 3, ".so") == 0)
		n -= 3;
	snprintf(out, len, "%.*s", (int)n, b);
}

/* Checks one descriptor and records it as loaded, rejected or shadowed. */
static void take_desc(const char *path, int dir, int idx, const struct weft_plugin_desc *d)
{
	const size_t ver_end = offsetof(struct weft_plugin_desc, abi_minor) + sizeof(d->abi_minor);
	const size_t min_size = offsetof(struct weft_plugin_desc, ops) + sizeof(d->ops);
	char name[REG_NAME_MAX + 2];

	/* The version comes first: another major may lay out everything after it
	 * differently, so nothing else of it is read. */
	if (d->size < ver_end) {
		reject(path, NULL, dir, NULL, "descriptor %d has size %zu, too small to hold its ABI version", idx,
		       d->size);
		return;
	}
	if (d->abi_major != WEFT_PLUGIN_ABI_MAJOR) {
		struct weft_plugin_desc v = {.abi_major = d->abi_major, .abi_minor = d->abi_minor};
		reject(path, NULL, dir, &v, "built for ABI %u.%u, core speaks %d.%d (the ABI major must match)",
		       (unsigned)d->abi_major, (unsigned)d->abi_minor, WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR);
		return;
	}
	if (d->size < min_size) {
		reject(path, NULL, dir, NULL, "descriptor %d has size %zu, smaller than the %zu bytes of ABI %d.0",
		       idx, d->size, min_size, WEFT_PLUGIN_ABI_MAJOR);
		return;
	}
	if (!d->name) {
		reject(path, NULL, dir, d, "descriptor %d has no name (name is NULL)", idx);
		return;
	}
	printable(d->name, name, sizeof(name));
	if (!valid_name(d->name)) {
		reject(path, NULL, dir, d, "descriptor %d has the bad name '%s': names are 1-%d characters of [a-z0-9-]",
		       idx, name, REG_NAME_MAX);
		return;
	}
	/* A file's name says what it is: a user's libweft-x.so cannot take the
	 * name of a built-in plugin (or of another file of its folder). */
	char stem[REG_NAME_MAX + 2];
	file_stem(path, stem, sizeof(stem));
	size_t sl = strlen(stem);
	if (idx == 0 ? strcmp(d->name, stem) != 0
		     : strncmp(d->name, stem, sl) != 0 || d->name[sl] != '-' || d->name[sl + 1] == '\0') {
		if (idx == 0)
			reject(path, NULL, dir, d,
			       "its first descriptor names '%s', not '%s': a plugin's first descriptor takes the name "
			       "of its file, libweft-<name>.so",
			       name, stem);
		else
			reject(path, NULL, dir, d,
			       "descriptor %d names '%s': a file's further descriptors are named '%s-<suffix>'", idx,
			       name, stem);
		return;
	}
	if (d->kind != WEFT_PLUGIN_TRANSPORT && d->kind != WEFT_PLUGIN_ALGO_PACK) {
		reject(path, name, dir, d, "'%s' has unknown kind %d (1: transport, 2: algorithm pack)", name,
		       (int)d->kind);
		return;
	}
	if (!d->ops) {
		reject(path, name, dir, d, "'%s' has no ops table (ops is NULL)", name);
		return;
	}
	if (d->kind == WEFT_PLUGIN_TRANSPORT) {
		const struct weft_transport_ops *t = d->ops;
		size_t need = offsetof(struct weft_transport_ops, open) + sizeof(t->open);
		if (t->size < need) {
			reject(path, name, dir, d, "'%s' has a transport ops table of size %zu, smaller than %zu", name,
			       t->size, need);
			return;
		}
		const char *miss = missing_transport_op(t);
		if (miss) {
			reject(path, name, dir, d, "transport '%s' lacks the required op '%s'", name, miss);
			return;
		}
	} else {
		const struct weft_algo_ops *a = d->ops;
		size_t need = offsetof(struct weft_algo_ops, algos) + sizeof(a->algos);
		if (a->size < need) {
			reject(path, name, dir, d, "'%s' has an algorithm ops table of size %zu, smaller than %zu", name,
			       a->size, need);
			return;
		}
		if (!a->algos) {
			reject(path, name, dir, d, "algorithm pack '%s' has no algorithm list (algos is NULL)", name);
			return;
		}
	}

	const struct reg_entry *first = find_loaded(name);
	if (first && strcmp(first->pub.path, path) == 0) {
		reject(path, name, dir, d, "the name '%s' is already used by an earlier descriptor of the same file",
		       name);
		return;
	}
	if (first && first->dir == dir) {
		reject(path, name, dir, d, "the name '%s' is already taken by %s in the same folder", name,
		       first->pub.path);
		return;
	}
	if (first) {
		char reason[PATH_MAX + 128];
		snprintf(reason, sizeof(reason), "'%s' from %s comes first in the search path", name, first->pub.path);
		WEFT_INFO("plugin %s shadowed: %s", path, reason);
		if (add_entry(WEFT_PLUGIN_SHADOWED, path, name, dir, d, reason) != 0)
			WEFT_ERROR("out of memory recording %s", path);
		return;
	}
	if (d->abi_minor > WEFT_PLUGIN_ABI_MINOR)
		WEFT_INFO("plugin %s ('%s') was built for ABI %u.%u, newer than the core's %d.%d: what the newer "
			  "minor added is ignored",
			  path, name, (unsigned)d->abi_major, (unsigned)d->abi_minor, WEFT_PLUGIN_ABI_MAJOR,
			  WEFT_PLUGIN_ABI_MINOR);
	if (add_entry(WEFT_PLUGIN_LOADED, path, name, dir, d, NULL) != 0) {
		WEFT_ERROR("out of memory recording %s", path);
		return;
	}
	WEFT_INFO("loaded %s '%s' (ABI %u.%u) from %s", d->kind == WEFT_PLUGIN_TRANSPORT ? "transport" : "algorithm pack",
		  name, (unsigned)d->abi_major, (unsigned)d->abi_minor, path);
}

/* ------------------------------------------------------------- one file */

static const char *base_of(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

static void load_file(const char *path, int dir)
{
	/* The same file name already loaded from an earlier folder is the same
	 * plugin, overridden (say, a developer's build ahead of the installed one):
	 * it is shadowed without running its init, whose side effects and
	 * parameter declarations belong to the copy that won. */
	for (int i = 0; i < reg_n; i++) {
		const struct reg_entry *w = reg_list[i];
		if (w->pub.state == WEFT_PLUGIN_LOADED && w->dir != dir &&
		    strcmp(base_of(w->pub.path), base_of(path)) == 0) {
			char reason[PATH_MAX + 128];
			snprintf(reason, sizeof(reason), "'%s' from %s comes first in the search path", w->pub.name,
				 w->pub.path);
			/* Another file under the same name is worth a warning: which code
			 * runs depends on the search path's order. The same file reached
			 * twice (a link to it, as weft-plugin-check makes) is not. */
			struct stat a, b;
			int same = stat(path, &a) == 0 && stat(w->pub.path, &b) == 0 && a.st_dev == b.st_dev &&
				   a.st_ino == b.st_ino;
			if (same)
				WEFT_DEBUG("plugin %s shadowed by the same file: %s", path, reason);
			else
				WEFT_WARN("plugin %s shadowed: %s", path, reason);
			struct weft_plugin_desc v = {.kind = w->pub.kind};
			if (add_entry(WEFT_PLUGIN_SHADOWED, path, w->pub.name, dir, &v, reason) != 0)
				WEFT_ERROR("out of memory recording %s", path);
			return;
		}
	}
	/* dlopen would block on a FIFO and fail obscurely on a directory. */
	struct stat st;
	if (stat(path, &st) != 0) {
		reject(path, NULL, dir, NULL, "cannot be read: %s", strerror(errno));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		reject(path, NULL, dir, NULL, "is not a regular file");
		return;
	}
	char why[PATH_MAX + 128];
	if (weft__plugin_trust_check(path, &st, why, sizeof(why)) != 0) {
		if (!weft__plugin_trust_relaxed()) {
			reject(path, NULL, dir, NULL, "not trusted: %s (core.plugin_trust = relaxed loads it anyway)",
			       why);
			return;
		}
		WEFT_WARN("plugin %s loaded although %s (core.plugin_trust = relaxed)", path, why);
	}
	if (weft__elf_check(path, why, sizeof(why)) != 0) {
		reject(path, NULL, dir, NULL, "%s", why);
		return;
	}
	dlerror();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		size_t pl = strlen(path);
		/* dlerror usually repeats the path; the log line names it already. */
		if (e && strncmp(e, path, pl) == 0 && e[pl] == ':')
			e += pl + 1 + (e[pl + 1] == ' ');
		reject(path, NULL, dir, NULL, "cannot be loaded: %s", e ? e : "dlopen failed");
		return;
	}
	dlerror();
	void *sym = dlsym(h, WEFT_PLUGIN_INIT_SYMBOL);
	if (!sym) {
		reject(path, NULL, dir, NULL, "exports no %s symbol, so it is no weft plugin", WEFT_PLUGIN_INIT_SYMBOL);
		/* Nothing of it was handed out, so unloading it is safe here. */
		dlclose(h);
		return;
	}
	weft_plugin_init_fn init;
	memcpy(&init, &sym, sizeof(init));

	/* Until init returns no descriptor names the plugin, so its log lines carry
	 * the file's own name: libweft-ofi.so speaks as "ofi". */
	char *stem = stem_of(path);
	struct weft_plugin *rec = NULL;
	if (!stem || weft__plugin_api_create(stem, &rec) != 0) {
		free(stem);
		reject(path, NULL, dir, NULL, "out of memory");
		return;
	}
	free(stem);
	rec->next = reg_plugins;
	reg_plugins = rec;
	reg_current = rec;
	const struct weft_plugin_desc *const *descs = init(&rec->api);
	if (!descs) {
		reject(path, NULL, dir, NULL, "%s returned NULL: the plugin declined to load (its log lines say why)",
		       WEFT_PLUGIN_INIT_SYMBOL);
	} else {
		int i = 0;
		for (; i < REG_MAX_DESCS && descs[i]; i++)
			take_desc(path, dir, i, descs[i]);
		if (i == 0)
			reject(path, NULL, dir, NULL, "%s returned an empty descriptor list", WEFT_PLUGIN_INIT_SYMBOL);
		else if (i == REG_MAX_DESCS && descs[i])
			reject(path, NULL, dir, NULL, "more than %d descriptors: is the list NULL-terminated?",
			       REG_MAX_DESCS);
	}
	reg_current = NULL;
}

/* [core] plugins decides by the file's name, before anything of it is read. */
static void load_or_exclude(const char *path, int dir)
{
	char *stem = stem_of(path);
	if (reg_cfg_broken) {
		/* One mistake, one message: a plugin opened now would log every
		 * parameter it cannot read. Listed, for weft-info. */
		WEFT_DEBUG("plugin %s not opened: the configuration file is invalid", path);
		if (add_entry(WEFT_PLUGIN_EXCLUDED, path, stem ? stem : "", dir, NULL,
			      "not opened: the configuration file is invalid") != 0)
			WEFT_ERROR("out of memory recording %s", path);
	} else if (stem && !weft__plugsel_allows(&reg_sel, stem)) {
		char reason[512];
		snprintf(reason, sizeof(reason), "excluded by core.plugins = '%s'", reg_sel.text ? reg_sel.text : "");
		WEFT_INFO("plugin %s not opened: %s", path, reason);
		if (add_entry(WEFT_PLUGIN_EXCLUDED, path, stem, dir, NULL, reason) != 0)
			WEFT_ERROR("out of memory recording %s", path);
	} else {
		struct weft__sigkeep k;
		weft__sigkeep_save(&k);
		load_file(path, dir);
		char who[PATH_MAX + 32];
		snprintf(who, sizeof(who), "loading plugin %s", path);
		weft__sigkeep_restore(&k, who);
	}
	free(stem);
}

/* --------------------------------------------------------------- folders */

static int is_plugin_file(const char *n)
{
	size_t len = strlen(n);
	return len > strlen("libweft-.so") && strncmp(n, "libweft-", 8) == 0 && strcmp(n + len - 3, ".so") == 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void scan_dir(const char *dirpath, int dir)
{
	DIR *d = opendir(dirpath);
	if (!d) {
		if (errno == ENOENT)
			WEFT_DEBUG("plugin folder %s does not exist", dirpath);
		else
			WEFT_WARN("cannot read plugin folder %s: %s", dirpath, strerror(errno));
		return;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (!is_plugin_file(de->d_name))
			continue;
		if (n == cap) {
			size_t c = cap ? cap * 2 : 16;
			char **nn = realloc(names, c * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
			cap = c;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char path[PATH_MAX];
		int len = snprintf(path, sizeof(path), "%s/%s", dirpath, names[i]);
		if (len > 0 && (size_t)len < sizeof(path))
			load_or_exclude(path, dir);
		else
			WEFT_WARN("plugin path %s/%s is too long; skipped", dirpath, names[i]);
		free(names[i]);
	}
	free(names);
}

struct dir_list {
	char **v;
	int n, cap;
};

static int dirs_add(struct dir_list *l, const char *dir)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->v[i], dir) == 0)
			return 0;
	if (l->n == l->cap) {
		int c = l->cap ? l->cap * 2 : 8;
		char **v = realloc(l->v, (size_t)c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = c;
	}
	if (!(l->v[l->n] = strdup(dir)))
		return -ENOMEM;
	l->n++;
	return 0;
}

static int same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* The folders in search order (see registry.h). */
static int build_search_path(struct dir_list *l)
{
	const char *env = getenv("WEFT_PLUGIN_PATH");
	if (env && *env) {
		char *copy = strdup(env);
		if (!copy)
			return -ENOMEM;
		char *save = NULL;
		for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
			/* A relative entry means a different folder in every working
			 * directory: whoever controls the one a job starts in would
			 * choose its code. */
			if (*tok && *tok != '/') {
				WEFT_WARN("WEFT_PLUGIN_PATH entry '%s' is relative: ignored (name folders by absolute "
					  "path)",
					  tok);
				continue;
			}
			if (*tok && dirs_add(l, tok) != 0) {
				free(copy);
				return -ENOMEM;
			}
		}
		free(copy);
	}
	Dl_info info;
	const char *libdir_plugins = NULL;
	char buf[PATH_MAX];
	char real[PATH_MAX] = "";
	if (dladdr((void *)weft__registry_load, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
		const char *lib = realpath(info.dli_fname, real) ? real : info.dli_fname;
		const char *slash = strrchr(lib, '/');
		int len = snprintf(buf, sizeof(buf), "%.*s/%s", (int)(slash - lib), lib, WEFT_PLUGIN_INSTALL_SUBDIR);
		if (len > 0 && (size_t)len < sizeof(buf)) {
			libdir_plugins = buf;
			if (dirs_add(l, buf) != 0)
				return -ENOMEM;
		}
	} else {
		WEFT_DEBUG("cannot tell where libweft.so lives (dladdr); <libdir>/%s is not searched",
			   WEFT_PLUGIN_INSTALL_SUBDIR);
	}
#ifdef WEFT_PLUGIN_BUILD_DIR
	/* The build's plugin folder serves only the build's own libweft: a copy
	 * installed elsewhere must not load whatever later appears at that path
	 * (a build folder under a world-writable directory). */
	char root[PATH_MAX];
	size_t rl = realpath(WEFT_BUILD_ROOT, root) ? strlen(root) : 0;
	int in_build = rl > 0 && real[0] && strncmp(real, root, rl) == 0 && real[rl] == '/';
	if (!in_build)
		WEFT_DEBUG("libweft.so (%s) is not inside its build folder %s: %s is not searched",
			   real[0] ? real : "unknown", WEFT_BUILD_ROOT, WEFT_PLUGIN_BUILD_DIR);
	struct stat st;
	if (in_build && stat(WEFT_PLUGIN_BUILD_DIR, &st) == 0 && S_ISDIR(st.st_mode) &&
	    !(libdir_plugins && same_dir(libdir_plugins, WEFT_PLUGIN_BUILD_DIR)) && dirs_add(l, WEFT_PLUGIN_BUILD_DIR) != 0)
		return -ENOMEM;
#endif
	return 0;
}

/* ------------------------------------------------------------- required */

/* The rejected or excluded entry of that plugin name, if any. */
static const struct reg_entry *find_rejected(const char *name)
{
	for (int i = 0; i < reg_n; i++) {
		const struct reg_entry *e = reg_list[i];
		if (e->pub.state != WEFT_PLUGIN_REJECTED && e->pub.state != WEFT_PLUGIN_EXCLUDED)
			continue;
		if (e->pub.name ? strcmp(e->pub.name, name) == 0 : strcmp(e->stem, name) == 0)
			return e;
	}
	return NULL;
}

/* Keeps the first code and every message, one per line, for weft-info. */
static void set_error(int rc, const char *msg)
{
	if (reg_result == 0)
		reg_result = rc;
	char *joined;
	if (!reg_error)
		joined = strdup(msg);
	else if (asprintf(&joined, "%s\n%s", reg_error, msg) < 0)
		joined = NULL;
	if (joined) {
		free(reg_error);
		reg_error = joined;
	}
}

static void check_required(const char *search_path)
{
	const char *req = NULL;
	int rc = weft__param_get("core", "require", WEFT_PARAM_STRING, &req, NULL);
	if (rc == -ENOENT) {
		/* The config module declares core.require; this only keeps the check
		 * working should that ever move. */
		static const struct weft_param_decl decl = {
			.size = sizeof(decl),
			.section = "core",
			.key = "require",
			.type = WEFT_PARAM_STRING,
			.default_value = NULL,
			.help = "Comma list of plugins that must load; a missing one is an error, never a fallback.",
		};
		if (weft__param_declare("core", &decl) == 0)
			rc = weft__param_get("core", "require", WEFT_PARAM_STRING, &req, NULL);
	}
	if (rc < 0) {
		if (rc != -ENOENT)
			set_error(rc, "the value of core.require is invalid");
		return;
	}
	if (!req || !*req)
		return;
	char *copy = strdup(req);
	if (!copy) {
		set_error(-ENOMEM, "out of memory");
		return;
	}
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		char *end = tok + strlen(tok);
		while (end > tok && (end[-1] == ' ' || end[-1] == '\t'))
			*--end = '\0';
		if (!*tok || find_loaded(tok))
			continue;
		char msg[2048];
		const struct reg_entry *rej = find_rejected(tok);
		if (rej && rej->pub.state == WEFT_PLUGIN_EXCLUDED) {
			snprintf(msg, sizeof(msg), "required plugin '%s' (core.require) is %s: the two settings disagree",
				 tok, rej->pub.reason);
		} else if (rej) {
			snprintf(msg, sizeof(msg), "required plugin '%s' (core.require) did not load: %s was rejected: %s",
				 tok, rej->pub.path, rej->pub.reason);
		} else {
			const char *best = NULL;
			int bestd = INT_MAX;
			for (int i = 0; i < reg_n; i++) {
				if (reg_list[i]->pub.state != WEFT_PLUGIN_LOADED)
					continue;
				int dist = weft__edit_distance(tok, reg_list[i]->pub.name);
				if (dist >= 0 && dist < bestd) {
					bestd = dist;
					best = reg_list[i]->pub.name;
				}
			}
			int limit = (int)strlen(tok) / 3 > 2 ? (int)strlen(tok) / 3 : 2;
			if (best && bestd <= limit) {
				WEFT_WARN("core.require names '%s', which is not a loaded plugin; did you mean '%s'?", tok,
					  best);
				snprintf(msg, sizeof(msg),
					 "required plugin '%s' (core.require) was not found in %s; did you mean '%s'?", tok,
					 search_path, best);
			} else {
				snprintf(msg, sizeof(msg), "required plugin '%s' (core.require) was not found in %s", tok,
					 search_path);
			}
		}
		WEFT_ERROR("%s", msg);
		set_error(-WEFT_ERR_PLUGIN, msg);
	}
	free(copy);
}

/* ------------------------------------------------------------------ load */

static void do_load(void)
{
	int rc = weft__config_load();
	if (rc < 0) {
		const char *cp = weft__config_path();
		char msg[PATH_MAX + 128];
		snprintf(msg, sizeof(msg), "the configuration%s%s is invalid (the message above names the line)",
			 cp ? " file " : "", cp ? cp : "");
		set_error(rc, msg);
		/* The scan still runs, so that weft-info can list every plugin file,
		 * but opens none. */
		reg_cfg_broken = 1;
	}

	/* A broken configuration fails the load already, and its values
	 * cannot be read: every plugin is then scanned, for weft-info. */
	int src = rc == 0 ? weft__plugsel_load(&reg_sel) : 0;
	if (src != 0)
		set_error(src, src == -ENOMEM ? "out of memory" : "the value of core.plugins is invalid (the message above says why)");

	struct dir_list dirs = {0};
	if (build_search_path(&dirs) != 0) {
		set_error(-ENOMEM, "out of memory building the plugin search path");
	}
	size_t plen = 1;
	for (int i = 0; i < dirs.n; i++)
		plen += strlen(dirs.v[i]) + 1;
	reg_path = calloc(1, plen);
	if (reg_path)
		for (int i = 0; i < dirs.n; i++) {
			if (i)
				strcat(reg_path, ":");
			strcat(reg_path, dirs.v[i]);
		}

	/* A folder named twice (or reached through two spellings) is scanned once:
	 * otherwise each of its plugins would shadow itself. */
	for (int i = 0; i < dirs.n; i++) {
		int seen = 0;
		for (int k = 0; k < i && !seen; k++)
			seen = same_dir(dirs.v[k], dirs.v[i]);
		if (!seen)
			scan_dir(dirs.v[i], i);
	}

	const char **seen = calloc((size_t)reg_n + 1, sizeof(*seen));
	for (int i = 0; seen && i < reg_n; i++)
		seen[i] = reg_list[i]->stem;
	if (seen)
		weft__plugsel_warn_unmatched(&reg_sel, seen, reg_n);
	free(seen);

	/* Sections the config file may use: every loaded plugin, every one
	 * core.plugins keeps out (a file shared by hosts that exclude it on
	 * some), and the core's own. */
	int nk = 0;
	const char **known = calloc((size_t)reg_n + 3, sizeof(*known));
	if (known) {
		known[nk++] = "core";
		known[nk++] = "transport";
		known[nk++] = "algorithm";
		for (int i = 0; i < reg_n; i++)
			if (reg_list[i]->pub.state == WEFT_PLUGIN_LOADED || reg_list[i]->pub.state == WEFT_PLUGIN_EXCLUDED)
				known[nk++] = reg_list[i]->pub.name;
		weft__config_warn_unknown(known, nk);
		free(known);
	}

	/* With a broken file the required list itself cannot be trusted, and the
	 * configuration error already fails the load. */
	if (rc == 0)
		check_required(reg_path ? reg_path : "the search path");

	for (int i = 0; i < dirs.n; i++)
		free(dirs.v[i]);
	free(dirs.v);
}

/* Readers take the lock, except on the thread running the scan, which holds it. */
static void reader_lock(void)
{
	if (!reg_in_load) {
		weft__registry_load();
		pthread_mutex_lock(&reg_lock);
	}
}

static void reader_unlock(void)
{
	if (!reg_in_load)
		pthread_mutex_unlock(&reg_lock);
}

WEFT_API int weft__registry_load(void)
{
	if (reg_in_load) {
		WEFT_ERROR("a plugin called into the registry from weft_plugin_init; that is not allowed");
		return -EDEADLK;
	}
	pthread_mutex_lock(&reg_lock);
	if (!reg_loaded) {
		reg_in_load = 1;
		do_load();
		reg_in_load = 0;
		reg_loaded = 1;
	}
	int rc = reg_result;
	pthread_mutex_unlock(&reg_lock);
	return rc;
}

WEFT_API int weft__registry_entries(const struct weft__plugin_entry *const **entries)
{
	reader_lock();
	int n = reg_n;
	*entries = (const struct weft__plugin_entry *const *)reg_pub;
	reader_unlock();
	return n;
}

const struct weft__plugin_entry *weft__registry_find(enum weft_plugin_kind kind, const char *name)
{
	if (!name)
		return NULL;
	const struct weft__plugin_entry *found = NULL;
	reader_lock();
	const struct reg_entry *e = find_loaded(name);
	if (e && e->pub.kind == kind)
		found = &e->pub;
	reader_unlock();
	return found;
}

WEFT_API char *weft__registry_search_path(void)
{
	reader_lock();
	char *p = strdup(reg_path ? reg_path : "");
	reader_unlock();
	return p;
}

const char *weft__registry_error(void)
{
	pthread_mutex_lock(&reg_lock);
	const char *e = reg_error;
	pthread_mutex_unlock(&reg_lock);
	return e;
}
