/* SPDX-License-Identifier: Apache-2.0 */
/* weft-plugin-check: runs weft's conformance checks against one plugin file,
 * so a vendor can check a libweft-NAME.so without building weft. The file is
 * loaded alone (a private folder holding a link to it comes first in the
 * search path) through the public introspection API, which names what it
 * declares; each check then runs in its own process, its output kept and
 * shown only when it fails (or with -v), and gets one result line.
 *
 * The checks live in a suite binary per plugin kind (transports:
 * weft-conformance, built from tests/conformance.c), which speaks a small
 * protocol, so that another kind only adds a row to `suites` below:
 *   BIN --list                 one "name<TAB>description" line per check,
 *                              the first one gating the others;
 *   BIN --run NAME --np N --target PLUGIN-NAME --result FILE
 *       [--hosts 2 [--netns NS,ADDR,DEV --netns NS,ADDR,DEV]]
 *                              exit 0 pass, 1 fail, 3 a rank died by a
 *                              signal, 77 skip; FILE gets the reason;
 *                              --hosts 2 puts rank r on host r % 2, in
 *                              the namespaces named (made here), else by
 *                              the test host identity (keep_crashes.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/info.h>
#include <weft/plugin.h>
#include <weft/weft.h>

#include "keep_crashes.h"

#define MAX_TARGETS 16
#define MAX_NPS 8
#define MAX_PATTERNS 32
#define LOAD_TIMEOUT_S 60
#define LIST_TIMEOUT_S 30
#define FAIL_TAIL_LINES 40
#define REPORT_OUTPUT_MAX 65536
#define EXIT_PASS 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_SKIP 77

/* A suite binary per plugin kind. */
struct suite {
	int kind;         /* WEFT_PLUGIN_TRANSPORT, WEFT_PLUGIN_ALGO_PACK */
	const char *what; /* "transport" */
	const char *bin;  /* file name, beside this tool */
	const char *env;  /* variable naming another binary */
};

static const struct suite suites[] = {
	{WEFT_PLUGIN_TRANSPORT, "transport", "weft-conformance", "WEFT_CONFORMANCE_BIN"},
	/* Pack checks are not written yet: a pack is refused until a suite binary of this name exists. */
	{WEFT_PLUGIN_ALGO_PACK, "algorithm pack", "weft-pack-conformance", "WEFT_PACK_CONFORMANCE_BIN"},
};
#define NSUITES (sizeof(suites) / sizeof(suites[0]))

struct check_def {
	char *name, *desc;
};

/* What a suite binary said it checks. */
struct suite_run {
	const struct suite *suite;
	char *bin;
	struct check_def *checks;
	int nchecks;
};

/* A descriptor of the file under test. */
struct target {
	char name[64];
	int kind;
	unsigned abi_major, abi_minor;
	struct suite_run *run; /* NULL when no suite runs this kind */
};

enum item_status { ST_PASS, ST_FAIL, ST_CRASH, ST_TIMEOUT, ST_SKIP };
static const char *const status_names[] = {"pass", "fail", "crash", "timeout", "skip"};

/* One numbered result: a check of a target at a rank count. */
struct item {
	int id;
	const struct target *target;
	const struct check_def *check;
	int gate; /* the suite's first check: the others of this target and np depend on it */
	int np;
	enum item_status status;
	double secs;
	char reason[1024];
	char *output;
	int done; /* its result is in (printed in plan order) */
};

static struct {
	const char *plugin;
	int np[MAX_NPS], nnp;
	const char *patterns[MAX_PATTERNS];
	int npatterns;
	int list, verbose, timeout_s;
	int jobs; /* checks run at once after each gate */
	const char *tap, *json;
	int hosts;              /* 1, or 2: rank r on host r % 2 */
	const char *hosts_mode; /* NULL (choose), "netns" or "identity" */
} opt = {.np = {2, 3, 4}, .nnp = 3, .timeout_s = 200, .jobs = 1, .hosts = 1};

static char g_tmp[PATH_MAX];   /* the private folder, removed at exit */
static char g_link[PATH_MAX + 256]; /* the link to the plugin file in it */
static FILE *g_out;            /* result lines: stdout, or stderr when a report goes there */
static volatile sig_atomic_t g_interrupted;
static volatile pid_t g_child; /* process group of the running child */
static pid_t g_main_pid;       /* only this process removes what it made */

/* Two hosts in network namespaces, made and removed by this process. */
static struct {
	int made[2]; /* ip netns add ran: delete at exit */
	char ns[2][16], addr[2][16], ip[PATH_MAX];
	char arg[2][64]; /* --netns NS,ADDR,DEV for the suites */
} g_ns;
static char g_hosts_line[1200]; /* "# two hosts: ...", "" with one */

/* ------------------------------------------------------------ helpers */

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("weft-plugin-check: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0, k;
	char *buf = malloc(cap);
	while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap) {
			char *nb = realloc(buf, cap * 2);
			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[n] = '\0';
	return buf;
}

static void on_signal(int sig)
{
	g_interrupted = sig;
	if (g_child > 0)
		kill(-g_child, SIGKILL);
}

/* Removes the private folder and what the checks left in it (plain files
 * and the link, nothing deeper). */
static void netns_remove(void);

static void cleanup(void)
{
	if (getpid() != g_main_pid)
		return;
	netns_remove();
	if (!g_tmp[0])
		return;
	DIR *d = opendir(g_tmp);
	struct dirent *de;
	while (d && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char path[PATH_MAX + 256];
		snprintf(path, sizeof(path), "%s/%s", g_tmp, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(g_tmp);
	g_tmp[0] = '\0';
}

/* Forks argv with stdout and stderr to out_path (stdout alone when err_path
 * differs), in its own process group, and waits up to timeout_s (cut short
 * by a signal to this process when interruptible). Returns the wait status,
 * -1 when it could not start, -2 after a timeout (the group is killed). */
static int run_child(char *const argv[], const char *out_path, const char *err_path, int timeout_s, int interruptible)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setpgid(0, 0);
		int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		int efd = err_path && strcmp(err_path, out_path) ? open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)
								 : fd;
		if (fd < 0 || efd < 0 || dup2(fd, 1) < 0 || dup2(efd, 2) < 0)
			_exit(126);
		execv(argv[0], argv);
		dprintf(2, "weft-plugin-check: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	g_child = pid;
	double end = now_s() + timeout_s;
	int st = 0;
	for (;;) {
		pid_t got = waitpid(pid, &st, WNOHANG);
		if (got == pid)
			break;
		if (got < 0 && errno != EINTR) {
			st = -1;
			break;
		}
		if ((interruptible && g_interrupted) || now_s() > end) {
			kill(-pid, SIGKILL);
			waitpid(pid, NULL, 0);
			st = -2;
			break;
		}
		usleep(5000);
	}
	/* The check's own ranks are in its group: none may outlive it. */
	kill(-pid, SIGKILL);
	g_child = 0;
	return st;
}

/* ------------------------------------------------------------ options */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: weft-plugin-check [options] path/to/libweft-NAME.so\n"
		"       weft-plugin-check --list [path/to/libweft-NAME.so]\n"
		"Runs weft's conformance checks against one plugin file: forked ranks drive\n"
		"the transport(s) its descriptor declares through the public API. Only that\n"
		"file is loaded from its folder; the other plugins come from the usual search\n"
		"path. Each check prints one line (TAP): 'ok N CHECK np=R', or 'not ok N ...'\n"
		"with the reason below it; a check's own output, expected errors included, is\n"
		"shown only when it fails, or with -v.\n"
		"\n"
		"options:\n"
		"  --np N[,N...]   rank counts to run each check with (default 2,3,4)\n"
		"  --check GLOB    only the checks whose name matches (repeatable; without\n"
		"                  * ? [ a substring); connect always runs first at each\n"
		"                  rank count, since the others need it\n"
		"  --list          print the checks (and, with a file, the numbered plan)\n"
		"  --tap FILE      also write a TAP 13 report, with each failure's output\n"
		"  --json FILE     also write a JSON report ('-' for stdout, with --tap too)\n"
		"  --report FMT    the report (tap or json) on stdout, the result lines on stderr\n"
		"  --timeout S     seconds one check may run before it is killed (default 200)\n"
		"  --jobs J        checks run at once (default 1); each rank count's connect\n"
		"                  check still runs alone first, and lines print in plan order\n"
		"  --hosts N       1 (default) or 2: rank r runs on simulated host r %% 2, so at\n"
		"                  4 ranks each host has two and a rank has peers on its own\n"
		"                  host and on the other; a transport that reaches no rank on\n"
		"                  another host (shm, nvlink) cannot run (77). The hosts are:\n"
		"                   - netns: two network namespaces joined by a veth pair (as\n"
		"                     root, where the ip command is and ip netns add works);\n"
		"                     each rank enters its host's, the bootstrap, ucx and ofi\n"
		"                     are bound to its veth; removed at exit, signals included;\n"
		"                   - identity: else the test host identity: each rank sets\n"
		"                     WEFT_TEST_HOST_ID (honoured by a libweft built with\n"
		"                     WEFT_TEST_HOOKS), everything over 127.0.0.1\n"
		"                  The line '# two hosts: ...' says which, and why\n"
		"  --hosts-mode M  netns or identity: that one (netns failing is then exit 2)\n"
		"  -v, --verbose   print every check's output and the plugin's load log\n"
		"  -h, --help      print this help\n"
		"\n"
		"environment: WEFT_PLUGIN_PATH (searched after the file's private folder,\n"
		"without the file's own folder), WEFT_CONFORMANCE_BIN (the transport suite\n"
		"binary; default: weft-conformance beside this tool, else\n"
		"$WEFT_BUILD_DIR/bin/weft-conformance), WEFT_CONFIG and WEFT_<SECTION>_<KEY>\n"
		"(passed to the ranks), TMPDIR.\n"
		"\n"
		"exit status: 0 every check that ran passed; 1 a check failed, crashed (a\n"
		"rank died by a signal, named) or timed out, or the plugin crashed while\n"
		"loading; 2 bad usage, a file the core would not load, a plugin the registry\n"
		"rejected (its reason is printed), a kind with no checks, or namespaces that\n"
		"--hosts-mode netns could not make; 77 nothing could run here (the transport\n"
		"reaches no rank here, with --hosts 2 none on the other host, or has no device).\n");
}

static int parse_np(const char *v)
{
	opt.nnp = 0;
	const char *p = v;
	while (*p) {
		char *end;
		long n = strtol(p, &end, 10);
		if (end == p || n < 2 || n > 16 || (*end && *end != ',') || opt.nnp == MAX_NPS) {
			say("--np wants rank counts from 2 to 16, comma separated, not '%s'", v);
			return -1;
		}
		opt.np[opt.nnp++] = (int)n;
		p = *end ? end + 1 : end;
	}
	return opt.nnp ? 0 : -1;
}

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;
		const char *eq = strchr(a, '=');
		char key[32];
		if (strncmp(a, "--", 2) == 0 && eq && (size_t)(eq - a) < sizeof(key)) {
			snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
			val = eq + 1;
			a = key;
		}
		int takes = !strcmp(a, "--np") || !strcmp(a, "--check") || !strcmp(a, "--tap") ||
			    !strcmp(a, "--json") || !strcmp(a, "--report") || !strcmp(a, "--timeout") ||
			    !strcmp(a, "--jobs") || !strcmp(a, "--hosts") || !strcmp(a, "--hosts-mode");
		if (takes && !val) {
			if (i + 1 >= argc) {
				say("%s needs a value", a);
				return -1;
			}
			val = argv[++i];
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
			opt.verbose = 1;
		} else if (!strcmp(a, "--list")) {
			opt.list = 1;
		} else if (!strcmp(a, "--np")) {
			if (parse_np(val))
				return -1;
		} else if (!strcmp(a, "--check")) {
			if (opt.npatterns == MAX_PATTERNS) {
				say("at most %d --check patterns", MAX_PATTERNS);
				return -1;
			}
			opt.patterns[opt.npatterns++] = val;
		} else if (!strcmp(a, "--tap")) {
			opt.tap = val;
		} else if (!strcmp(a, "--json")) {
			opt.json = val;
		} else if (!strcmp(a, "--report")) {
			if (!strcmp(val, "tap"))
				opt.tap = "-";
			else if (!strcmp(val, "json"))
				opt.json = "-";
			else {
				say("--report wants tap or json, not '%s'", val);
				return -1;
			}
		} else if (!strcmp(a, "--timeout")) {
			char *end;
			long t = strtol(val, &end, 10);
			if (*val == '\0' || *end || t < 1 || t > 86400) {
				say("--timeout wants seconds (1..86400), not '%s'", val);
				return -1;
			}
			opt.timeout_s = (int)t;
		} else if (!strcmp(a, "--jobs")) {
			char *end;
			long j = strtol(val, &end, 10);
			if (*val == '\0' || *end || j < 1 || j > 16) {
				say("--jobs wants 1 to 16 checks at once, not '%s'", val);
				return -1;
			}
			opt.jobs = (int)j;
		} else if (!strcmp(a, "--hosts")) {
			if (strcmp(val, "1") != 0 && strcmp(val, "2") != 0) {
				say("--hosts wants 1 or 2, not '%s'", val);
				return -1;
			}
			opt.hosts = atoi(val);
		} else if (!strcmp(a, "--hosts-mode")) {
			if (strcmp(val, "netns") != 0 && strcmp(val, "identity") != 0) {
				say("--hosts-mode wants netns or identity, not '%s'", val);
				return -1;
			}
			opt.hosts_mode = val;
		} else if (a[0] == '-' && a[1]) {
			say("unknown option '%s' (try --help)", a);
			return -1;
		} else if (opt.plugin) {
			say("one plugin file at a time ('%s' and '%s')", opt.plugin, a);
			return -1;
		} else {
			opt.plugin = a;
		}
	}
	if (opt.tap && opt.json && !strcmp(opt.tap, "-") && !strcmp(opt.json, "-")) {
		say("only one report can go to stdout");
		return -1;
	}
	if (!opt.plugin && !opt.list) {
		usage(stderr);
		return -1;
	}
	if (opt.hosts_mode && opt.hosts == 1) {
		say("--hosts-mode chooses how two hosts are made: give --hosts 2 with it");
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------- suite binaries */

static char *self_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (slash)
		*slash = '\0';
	return strdup(buf);
}

/* The suite's binary: $ENV, else beside this tool, else in $WEFT_BUILD_DIR/bin. */
static char *find_bin(const struct suite *s)
{
	const char *env = getenv(s->env);
	if (env && *env)
		return access(env, X_OK) == 0 ? strdup(env) : NULL;
	char *dir = self_dir();
	const char *bdir = getenv("WEFT_BUILD_DIR");
	char *cands[2] = {NULL, NULL};
	if (dir && asprintf(&cands[0], "%s/%s", dir, s->bin) < 0)
		cands[0] = NULL;
	if (bdir && *bdir && asprintf(&cands[1], "%s/bin/%s", bdir, s->bin) < 0)
		cands[1] = NULL;
	free(dir);
	char *found = NULL;
	for (int i = 0; i < 2; i++) {
		if (!found && cands[i] && access(cands[i], X_OK) == 0)
			found = cands[i];
		else
			free(cands[i]);
	}
	return found;
}

/* Asks the binary for its checks. 0, or -1 with the reason printed. */
static int list_checks(struct suite_run *r)
{
	char out[PATH_MAX + 16], err[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/list.out", g_tmp);
	snprintf(err, sizeof(err), "%s/list.log", g_tmp);
	char *argv[] = {r->bin, "--list", NULL};
	int st = run_child(argv, out, err, LIST_TIMEOUT_S, 1);
	char *text = read_file(out);
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !text) {
		char *e = read_file(err);
		say("%s --list failed (%s)%s%s", r->bin, st == -2 ? "timed out" : "exit status", e && *e ? ": " : "",
		    e ? e : "");
		free(e);
		free(text);
		return -1;
	}
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *tab = strchr(line, '\t');
		if (!tab || line[0] == '#')
			continue;
		*tab = '\0';
		struct check_def *nc = realloc(r->checks, (size_t)(r->nchecks + 1) * sizeof(*nc));
		if (!nc)
			break;
		r->checks = nc;
		r->checks[r->nchecks].name = strdup(line);
		r->checks[r->nchecks].desc = strdup(tab + 1);
		r->nchecks++;
	}
	free(text);
	if (r->nchecks == 0) {
		say("%s --list named no checks", r->bin);
		return -1;
	}
	return 0;
}

/* A --check pattern: a glob when it has * ? or [, else a substring. */
static int matches(const char *pattern, const char *name)
{
	return strpbrk(pattern, "*?[") ? fnmatch(pattern, name, 0) == 0 : strstr(name, pattern) != NULL;
}

static int selected(const char *name)
{
	if (opt.npatterns == 0)
		return 1;
	for (int i = 0; i < opt.npatterns; i++)
		if (matches(opt.patterns[i], name))
			return 1;
	return 0;
}

/* ------------------------------------------------------ loading the file */

/* The private folder: a link named as the file, so the registry finds it and
 * nothing else of the file's folder. */
static int make_private_dir(const char *real, const char *base)
{
	const char *t = getenv("TMPDIR");
	snprintf(g_tmp, sizeof(g_tmp), "%s/weft-plugin-check-XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(g_tmp)) {
		say("cannot make a private folder under %s: %s", t && *t ? t : "/tmp", strerror(errno));
		g_tmp[0] = '\0';
		return -1;
	}
	int n = snprintf(g_link, sizeof(g_link), "%s/%s", g_tmp, base);
	if (n < 0 || (size_t)n >= sizeof(g_link) || symlink(real, g_link) != 0) {
		say("cannot link %s into %s: %s", real, g_tmp, strerror(errno));
		g_link[0] = '\0';
		return -1;
	}
	return 0;
}

/* WEFT_PLUGIN_PATH for everything run from here: the private folder, then
 * the caller's folders without the file's own (its siblings stay out). */
static int set_plugin_path(const char *plugin_dir)
{
	const char *old = getenv("WEFT_PLUGIN_PATH");
	size_t cap = strlen(g_tmp) + (old ? strlen(old) : 0) + 2;
	char *path = malloc(cap);
	if (!path)
		return -1;
	strcpy(path, g_tmp);
	struct stat sp, sd;
	int have_sp = stat(plugin_dir, &sp) == 0;
	char *copy = old ? strdup(old) : NULL;
	char *save = NULL;
	for (char *tok = copy ? strtok_r(copy, ":", &save) : NULL; tok; tok = strtok_r(NULL, ":", &save)) {
		if (!*tok || (have_sp && stat(tok, &sd) == 0 && sd.st_dev == sp.st_dev && sd.st_ino == sp.st_ino))
			continue;
		strcat(path, ":");
		strcat(path, tok);
	}
	free(copy);
	setenv("WEFT_PLUGIN_PATH", path, 1);
	free(path);
	return 0;
}

/* One line per field set, from the loading child to this process. */
static void put_field(int fd, char tag, const char *s)
{
	dprintf(fd, "%c\t", tag);
	for (; s && *s; s++)
		dprintf(fd, "%c", *s == '\n' || *s == '\t' ? ' ' : *s);
	dprintf(fd, "\n");
}

/* In the child: load the registry and report the entries of the link. */
static void load_child(int fd)
{
	int rc = weft_info_load();
	int n = weft_info_plugins(NULL, 0);
	struct weft_info_plugin *e = calloc(n > 0 ? (size_t)n : 1, sizeof(*e));
	if (e)
		n = weft_info_plugins(e, n);
	for (int i = 0; e && i < n; i++) {
		if (!e[i].path || strcmp(e[i].path, g_link) != 0)
			continue;
		dprintf(fd, "D\t%d\t%d\t%u\t%u\n", (int)e[i].state, e[i].kind, e[i].abi_major, e[i].abi_minor);
		put_field(fd, 'N', e[i].name ? e[i].name : "");
		put_field(fd, 'R', e[i].reason ? e[i].reason : "");
	}
	char *sp = weft_info_search_path();
	put_field(fd, 'P', sp);
	free(sp);
	if (rc != 0)
		put_field(fd, 'E', weft_info_load_error() ? weft_info_load_error() : weft_strerror(rc));
	free(e);
}

struct loaded {
	struct target t[MAX_TARGETS];
	int nt;
	char rejected[MAX_TARGETS][1100];
	int nrej;
	char search_path[4096];
	char error[2048];
};

/* Loads the file in a child process (a plugin that crashes in its init takes
 * only that child down). 0, or the exit status to end with. */
static int load_plugin(struct loaded *L)
{
	char log[PATH_MAX + 16];
	snprintf(log, sizeof(log), "%s/load.log", g_tmp);
	int pfd[2];
	if (pipe(pfd) != 0)
		return EXIT_FAIL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return EXIT_FAIL;
	if (pid == 0) {
		close(pfd[0]);
		int lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (lfd >= 0) {
			dup2(lfd, 1);
			dup2(lfd, 2);
		}
		alarm(LOAD_TIMEOUT_S);
		kc_keep_crashes(); /* a plugin's libraries must not hide its crash (keep_crashes.h) */
		load_child(pfd[1]);
		_exit(0);
	}
	close(pfd[1]);
	g_child = pid;
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	char buf[4096];
	ssize_t k;
	double end = now_s() + LOAD_TIMEOUT_S + 5;
	struct pollfd p = {.fd = pfd[0], .events = POLLIN};
	while (now_s() < end && !g_interrupted) {
		if (poll(&p, 1, 200) <= 0)
			continue;
		if ((k = read(pfd[0], buf, sizeof(buf))) <= 0)
			break;
		fwrite(buf, 1, (size_t)k, mem);
	}
	fclose(mem);
	close(pfd[0]);
	int st = 0;
	if (waitpid(pid, &st, WNOHANG) != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	g_child = 0;
	char *logtext = read_file(log);
	if (opt.verbose && logtext && *logtext)
		fprintf(stderr, "weft-plugin-check: loading %s said:\n%s", opt.plugin, logtext);
	if (WIFSIGNALED(st)) {
		say("%s CRASHED while loading (its weft_plugin_init?): the loading process died of %s", opt.plugin,
		    WTERMSIG(st) == SIGALRM ? "a timeout (SIGALRM)" : kc_signame(WTERMSIG(st)));
		if (!opt.verbose && logtext && *logtext)
			fprintf(stderr, "%s", logtext);
		free(logtext);
		free(text);
		return EXIT_FAIL;
	}
	free(logtext);
	int entries = 0;
	for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		if (line[0] == 'D') {
			struct target *t = L->nt < MAX_TARGETS ? &L->t[L->nt] : NULL;
			int state = 0, kind = 0;
			unsigned ma = 0, mi = 0;
			sscanf(line + 2, "%d\t%d\t%u\t%u", &state, &kind, &ma, &mi);
			char *name = strtok(NULL, "\n"), *reason = strtok(NULL, "\n");
			name = name && name[0] == 'N' ? name + 2 : "";
			reason = reason && reason[0] == 'R' ? reason + 2 : "";
			entries++;
			if (state == WEFT_INFO_LOADED && t) {
				snprintf(t->name, sizeof(t->name), "%s", name);
				t->kind = kind;
				t->abi_major = ma;
				t->abi_minor = mi;
				L->nt++;
			} else if (L->nrej < MAX_TARGETS) {
				snprintf(L->rejected[L->nrej++], sizeof(L->rejected[0]), "%s%s%s%s", *name ? "'" : "", name,
					 *name ? "': " : "", reason);
			}
		} else if (line[0] == 'P') {
			snprintf(L->search_path, sizeof(L->search_path), "%s", line + 2);
		} else if (line[0] == 'E') {
			snprintf(L->error, sizeof(L->error), "%s", line + 2);
		}
	}
	free(text);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		say("loading %s failed (exit status %d)", opt.plugin, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return EXIT_FAIL;
	}
	for (int i = 0; i < L->nrej; i++)
		say("%s was rejected by the registry: %s", opt.plugin, L->rejected[i]);
	if (L->error[0]) {
		say("loading plugins failed: %s", L->error);
		return EXIT_USAGE;
	}
	if (entries == 0) {
		say("the registry did not see %s (search path: %s)", g_link, L->search_path);
		return EXIT_USAGE;
	}
	if (L->nt == 0)
		return EXIT_USAGE;
	return 0;
}

/* ------------------------------------------------------------- running */

/* The reason file's first line, or a default. */
static void read_reason(const char *path, char *buf, size_t len, const char *dflt)
{
	char *r = read_file(path);
	size_t n = r ? strcspn(r, "\n") : 0;
	if (n > 0)
		snprintf(buf, len, "%.*s", (int)n, r);
	else
		snprintf(buf, len, "%s", dflt);
	free(r);
}

static void run_item(struct item *it)
{
	char log[PATH_MAX + 32], res[PATH_MAX + 32], np[16];
	snprintf(log, sizeof(log), "%s/check-%d.log", g_tmp, it->id);
	snprintf(res, sizeof(res), "%s/check-%d.result", g_tmp, it->id);
	snprintf(np, sizeof(np), "%d", it->np);
	unlink(res);
	char *argv[16] = {
		it->target->run->bin, "--run", it->check->name, "--np", np, "--target", (char *)it->target->name,
		"--result",           res};
	int k = 9;
	if (opt.hosts > 1) {
		argv[k++] = "--hosts";
		argv[k++] = "2";
		for (int h = 0; h < 2 && g_ns.arg[h][0]; h++) {
			argv[k++] = "--netns";
			argv[k++] = g_ns.arg[h];
		}
	}
	argv[k] = NULL;
	double t0 = now_s();
	int st = run_child(argv, log, log, opt.timeout_s, 1);
	it->secs = now_s() - t0;
	it->output = read_file(log);
	if (st == -2) {
		it->status = ST_TIMEOUT;
		snprintf(it->reason, sizeof(it->reason), "%s after %d s (--timeout); the check and its ranks were killed",
			 g_interrupted ? "interrupted" : "ran past its time limit", opt.timeout_s);
	} else if (st == -1) {
		it->status = ST_FAIL;
		snprintf(it->reason, sizeof(it->reason), "could not start %s", argv[0]);
	} else if (WIFSIGNALED(st)) {
		it->status = ST_CRASH;
		snprintf(it->reason, sizeof(it->reason), "the check process died of %s", kc_signame(WTERMSIG(st)));
	} else {
		int code = WEXITSTATUS(st);
		char dflt[64];
		snprintf(dflt, sizeof(dflt), "exit status %d", code);
		read_reason(res, it->reason, sizeof(it->reason), dflt);
		it->status = code == 0 ? ST_PASS : code == 3 ? ST_CRASH : code == EXIT_SKIP ? ST_SKIP : ST_FAIL;
	}
	unlink(res);
}

/* Prints text indented, all of it or its last max lines. */
static void print_output(FILE *out, const char *text, int max)
{
	if (!text || !*text)
		return;
	int lines = 0;
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	const char *from = text;
	if (max > 0 && lines > max) {
		int skip = lines - max;
		for (; *from && skip > 0; from++)
			skip -= *from == '\n';
		fprintf(out, "  | ... (%d earlier lines: -v or the reports show them)\n", lines - max);
	}
	while (*from) {
		size_t n = strcspn(from, "\n");
		fprintf(out, "  | %.*s\n", (int)n, from);
		from += n + (from[n] == '\n');
	}
}

static void print_item(const struct item *it, int multi)
{
	char name[256];
	snprintf(name, sizeof(name), "%s%s%s np=%d", multi ? it->target->name : "", multi ? ": " : "", it->check->name,
		 it->np);
	switch (it->status) {
	case ST_PASS:
		fprintf(g_out, "ok %d %s\n", it->id, name);
		break;
	case ST_SKIP:
		fprintf(g_out, "ok %d %s # SKIP %s\n", it->id, name, it->reason);
		break;
	default:
		fprintf(g_out, "not ok %d %s\n", it->id, name);
		fprintf(g_out, "  # %s: %s\n", it->status == ST_CRASH ? "CRASHED" : it->status == ST_TIMEOUT ? "TIMED OUT" : "failed",
			it->reason);
		if (!opt.verbose)
			print_output(g_out, it->output, FAIL_TAIL_LINES);
	}
	if (opt.verbose)
		print_output(g_out, it->output, 0);
	fflush(g_out);
}

/* ------------------------------------------------------------- reports */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* At most REPORT_OUTPUT_MAX bytes of a check's output: its end. */
static const char *report_output(const struct item *it)
{
	const char *o = it->output ? it->output : "";
	size_t n = strlen(o);
	return n > REPORT_OUTPUT_MAX ? o + n - REPORT_OUTPUT_MAX : o;
}

static FILE *open_report(const char *path)
{
	if (!strcmp(path, "-"))
		return stdout;
	FILE *f = fopen(path, "w");
	if (!f)
		say("cannot write %s: %s", path, strerror(errno));
	return f;
}

static void write_tap(const char *path, const struct item *items, int n, int multi)
{
	FILE *f = open_report(path);
	if (!f)
		return;
	fprintf(f, "TAP version 13\n1..%d\n", n);
	if (g_hosts_line[0])
		fprintf(f, "%s\n", g_hosts_line);
	for (int i = 0; i < n; i++) {
		const struct item *it = &items[i];
		fprintf(f, "%s %d - %s%s%s np=%d", it->status == ST_PASS || it->status == ST_SKIP ? "ok" : "not ok", it->id,
			multi ? it->target->name : "", multi ? ": " : "", it->check->name, it->np);
		if (it->status == ST_SKIP)
			fprintf(f, " # SKIP %s", it->reason);
		fputc('\n', f);
		if (it->status == ST_PASS || it->status == ST_SKIP)
			continue;
		fprintf(f, "  ---\n  status: %s\n  message: ", status_names[it->status]);
		json_str(f, it->reason);
		fprintf(f, "\n  seconds: %.2f\n  output: |\n", it->secs);
		for (const char *p = report_output(it); *p;) {
			size_t k = strcspn(p, "\n");
			fprintf(f, "    %.*s\n", (int)k, p);
			p += k + (p[k] == '\n');
		}
		fprintf(f, "  ...\n");
	}
	if (f != stdout)
		fclose(f);
}

static void write_json(const char *path, const struct loaded *L, const struct item *items, int n, int code)
{
	FILE *f = open_report(path);
	if (!f)
		return;
	int count[5] = {0};
	for (int i = 0; i < n; i++)
		count[items[i].status]++;
	fprintf(f, "{\n  \"tool\": \"weft-plugin-check\",\n  \"plugin\": ");
	json_str(f, opt.plugin);
	fprintf(f, ",\n  \"targets\": [");
	for (int i = 0; i < L->nt; i++) {
		fprintf(f, "%s{\"name\": ", i ? ", " : "");
		json_str(f, L->t[i].name);
		fprintf(f, ", \"kind\": \"%s\", \"abi\": \"%u.%u\"}", L->t[i].run ? L->t[i].run->suite->what : "?",
			L->t[i].abi_major, L->t[i].abi_minor);
	}
	fprintf(f, "],\n  \"np\": [");
	for (int i = 0; i < opt.nnp; i++)
		fprintf(f, "%s%d", i ? ", " : "", opt.np[i]);
	const char *mode = g_ns.arg[0][0] ? "netns" : "identity";
	fprintf(f, "],\n  \"hosts\": %d, \"hosts_mode\": \"%s\",\n  \"checks\": [\n", opt.hosts,
		opt.hosts == 1 ? "one" : mode);
	for (int i = 0; i < n; i++) {
		const struct item *it = &items[i];
		fprintf(f, "    {\"id\": %d, \"target\": ", it->id);
		json_str(f, it->target->name);
		fprintf(f, ", \"check\": ");
		json_str(f, it->check->name);
		fprintf(f, ", \"np\": %d, \"status\": \"%s\", \"seconds\": %.2f, \"reason\": ", it->np,
			status_names[it->status], it->secs);
		json_str(f, it->status == ST_PASS ? "" : it->reason);
		fprintf(f, ", \"output\": ");
		json_str(f, it->status == ST_PASS && !opt.verbose ? "" : report_output(it));
		fprintf(f, "}%s\n", i + 1 < n ? "," : "");
	}
	fprintf(f, "  ],\n  \"summary\": {");
	for (int s = 0; s < 5; s++)
		fprintf(f, "%s\"%s\": %d", s ? ", " : "", status_names[s], count[s]);
	fprintf(f, "},\n  \"exit\": %d\n}\n", code);
	if (f != stdout)
		fclose(f);
}

/* --------------------------------------------------------- two hosts */

/* The ip command: in PATH, else where distributions put it. */
static int find_ip(void)
{
	const char *path = getenv("PATH");
	char *dirs = NULL;
	if (asprintf(&dirs, "%s:/usr/sbin:/sbin:/usr/bin:/bin", path && *path ? path : "") < 0)
		return -1;
	char *save = NULL;
	int found = 0;
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		snprintf(g_ns.ip, sizeof(g_ns.ip), "%s/ip", *d ? d : ".");
		found = access(g_ns.ip, X_OK) == 0;
	}
	free(dirs);
	return found ? 0 : -1;
}

/* Runs ip with the arguments (NULL-ended): 0, or -1 with its output's first
 * line (or how it ended) in why. Not cut short by a signal: cleanup runs it
 * after one. */
static int run_ip(char *why, size_t len, ...)
{
	char *argv[16] = {g_ns.ip};
	int n = 1;
	va_list ap;
	va_start(ap, len);
	for (char *a; n < 15 && (a = va_arg(ap, char *)) != NULL;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	char out[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/ip.out", g_tmp);
	int st = run_child(argv, out, out, 20, 0);
	char *text = read_file(out);
	unlink(out);
	int ok = st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!ok && why) {
		int k = snprintf(why, len, "'ip");
		for (int i = 1; i < n && k > 0 && (size_t)k < len; i++)
			k += snprintf(why + k, len - (size_t)k, " %s", argv[i]);
		if (k > 0 && (size_t)k < len)
			snprintf(why + k, len - (size_t)k, "' %s: %.*s", st == -2 ? "timed out" : "failed",
				 text ? (int)strcspn(text, "\n") : 0, text ? text : "");
	}
	if (ok && why)
		snprintf(why, len, "%s", text ? text : "");
	free(text);
	return ok ? 0 : -1;
}

static void netns_remove(void)
{
	for (int i = 0; i < 2; i++)
		if (g_ns.made[i]) {
			/* Deleting a namespace deletes the veth end in it, and with it the pair. */
			if (run_ip(NULL, 0, "netns", "delete", g_ns.ns[i], NULL) != 0)
				say("could not remove network namespace %s: remove it with ip netns delete %s",
				    g_ns.ns[i], g_ns.ns[i]);
			g_ns.made[i] = 0;
		}
}

/* Two namespaces wpc<pid>a and wpc<pid>b (unique per process, so parallel
 * runs never meet), joined by veths of the same names, 10.251.X.(4Y+1|4Y+2)
 * from the pid. 0, or -1 with why (what was made is removed). */
static int netns_make(char *why, size_t len)
{
	unsigned pid = (unsigned)getpid();
	for (int i = 0; i < 2; i++) {
		snprintf(g_ns.ns[i], sizeof(g_ns.ns[i]), "wpc%u%c", pid % 10000000u, 'a' + i);
		snprintf(g_ns.addr[i], sizeof(g_ns.addr[i]), "10.251.%u.%u", (pid / 64) % 256,
			 4 * (pid % 64) + 1 + (unsigned)i);
		snprintf(g_ns.arg[i], sizeof(g_ns.arg[i]), "%s,%s,%s", g_ns.ns[i], g_ns.addr[i], g_ns.ns[i]);
	}
	char cidr[2][24];
	for (int i = 0; i < 2; i++)
		snprintf(cidr[i], sizeof(cidr[i]), "%s/30", g_ns.addr[i]);
	int rc = 0;
	for (int i = 0; i < 2 && rc == 0; i++) {
		g_ns.made[i] = 1; /* before it runs: a signal now must still remove it */
		rc = run_ip(why, len, "netns", "add", g_ns.ns[i], NULL);
		if (rc != 0)
			g_ns.made[i] = 0;
	}
	if (rc == 0)
		rc = run_ip(why, len, "link", "add", g_ns.ns[0], "netns", g_ns.ns[0], "type", "veth", "peer", "name",
			    g_ns.ns[1], "netns", g_ns.ns[1], NULL);
	for (int i = 0; i < 2 && rc == 0; i++) {
		rc = run_ip(why, len, "-n", g_ns.ns[i], "addr", "add", cidr[i], "dev", g_ns.ns[i], NULL);
		if (rc == 0)
			rc = run_ip(why, len, "-n", g_ns.ns[i], "link", "set", g_ns.ns[i], "up", NULL);
		if (rc == 0)
			rc = run_ip(why, len, "-n", g_ns.ns[i], "link", "set", "lo", "up", NULL);
	}
	/* UCX lists a network device only once it is fully up (carrier on, no
	 * address still tentative), as a host's would be after boot. */
	for (int tries = 0; rc == 0 && tries < 200; tries++) {
		int ready = 0;
		for (int i = 0; i < 2; i++) {
			char link[1024], addr[1024];
			if (run_ip(link, sizeof(link), "-n", g_ns.ns[i], "-o", "link", "show", "dev", g_ns.ns[i],
				   NULL) == 0 &&
			    run_ip(addr, sizeof(addr), "-n", g_ns.ns[i], "-o", "addr", "show", "dev", g_ns.ns[i],
				   NULL) == 0 &&
			    strstr(link, "state UP") && !strstr(addr, "tentative"))
				ready++;
		}
		if (ready == 2)
			return 0;
		if (g_interrupted)
			break;
		usleep(50000);
	}
	if (rc == 0)
		snprintf(why, len, "%s", g_interrupted ? "interrupted" : "the veth pair did not come up within 10 s");
	netns_remove();
	g_ns.arg[0][0] = g_ns.arg[1][0] = '\0';
	return -1;
}

/* Chooses how two hosts are made and prints the line that says so: 0, or
 * the exit status to end with. */
static int hosts_prepare(void)
{
	if (opt.hosts == 1)
		return 0;
	const char *mode = opt.hosts_mode;
	char why[1024] = "";
	if (!mode || !strcmp(mode, "netns")) {
		int made = 0;
		if (geteuid() != 0)
			snprintf(why, sizeof(why), "not root");
		else if (find_ip() != 0)
			snprintf(why, sizeof(why), "no ip command");
		else
			made = netns_make(why, sizeof(why)) == 0;
		if (!made && mode) {
			say("--hosts-mode netns: cannot make two network namespaces: %s", why);
			return EXIT_USAGE;
		}
		if (!made && strncmp(why, "'ip netns add", 13) == 0) {
			char w[sizeof(why)];
			snprintf(w, sizeof(w), "netns refused: %s", why);
			snprintf(why, sizeof(why), "%s", w);
		}
		mode = made ? "netns" : "identity";
	} else {
		snprintf(why, sizeof(why), "--hosts-mode identity");
	}
	if (!strcmp(mode, "netns"))
		snprintf(g_hosts_line, sizeof(g_hosts_line),
			 "# two hosts: network namespaces %s/%s joined by veth, %s and %s/30", g_ns.ns[0], g_ns.ns[1],
			 g_ns.addr[0], g_ns.addr[1]);
	else
		snprintf(g_hosts_line, sizeof(g_hosts_line),
			 "# two hosts: test host identity (%s): WEFT_TEST_HOST_ID=r %% 2, over 127.0.0.1", why);
	fprintf(g_out, "%s\n", g_hosts_line);
	fflush(g_out);
	return 0;
}

/* ---------------------------------------------------------------- main */

static void list_plan(const struct suite_run *runs, int nruns, const struct loaded *L)
{
	for (int r = 0; r < nruns; r++) {
		printf("%s checks (%s), each run at np=", runs[r].suite->what, runs[r].bin);
		for (int i = 0; i < opt.nnp; i++)
			printf("%s%d", i ? "," : "", opt.np[i]);
		printf("; '%s' runs first at each rank count and the others need it:\n", runs[r].checks[0].name);
		for (int c = 0; c < runs[r].nchecks; c++)
			printf("  %-30s %s\n", runs[r].checks[c].name, runs[r].checks[c].desc);
	}
	if (!L)
		return;
	int id = 0, multi = L->nt > 1;
	for (int t = 0; t < L->nt; t++) {
		const struct suite_run *sr = L->t[t].run;
		for (int i = 0; sr && i < opt.nnp; i++)
			for (int c = 0; c < sr->nchecks; c++)
				if (c == 0 || selected(sr->checks[c].name))
					printf("%d %s%s%s np=%d\n", ++id, multi ? L->t[t].name : "", multi ? ": " : "",
					       sr->checks[c].name, opt.np[i]);
	}
	printf("1..%d\n", id);
}

/* Finds every kind's binary and its checks: the runs, or -1. */
static int prepare_suites(struct suite_run *runs, int *nruns, const struct loaded *L)
{
	*nruns = 0;
	for (size_t s = 0; s < NSUITES; s++) {
		int wanted = !L ? suites[s].kind == WEFT_PLUGIN_TRANSPORT : 0;
		for (int t = 0; L && t < L->nt; t++)
			wanted |= L->t[t].kind == suites[s].kind;
		if (!wanted)
			continue;
		struct suite_run *r = &runs[*nruns];
		memset(r, 0, sizeof(*r));
		r->suite = &suites[s];
		r->bin = find_bin(&suites[s]);
		if (!r->bin) {
			if (suites[s].kind == WEFT_PLUGIN_TRANSPORT)
				say("cannot find the %s binary (install weft, or set %s or WEFT_BUILD_DIR)", suites[s].bin,
				    suites[s].env);
			else
				say("this weft has no %s checks (%s not found beside this tool; set %s)", suites[s].what,
				    suites[s].bin, suites[s].env);
			continue;
		}
		if (list_checks(r) != 0)
			return -1;
		(*nruns)++;
	}
	return 0;
}

/* Runs the plan and prints it: the exit status. */
/* --jobs: a check after its gate runs in a worker process (run_item, as
 * inline), which leaves status, time and reason in check-N.item for the
 * main process; its output is the check's log, read back from there. */
struct worker {
	pid_t pid;
	struct item *it;
};

static void item_path(const struct item *it, char *buf, size_t len)
{
	snprintf(buf, len, "%s/check-%d.item", g_tmp, it->id);
}

static pid_t worker_start(struct item *it)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	run_item(it);
	char path[PATH_MAX + 32];
	item_path(it, path, sizeof(path));
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d %.3f\n%s", (int)it->status, it->secs, it->reason);
		fclose(f);
	}
	_exit(0);
}

static void worker_done(struct worker *w, int wst)
{
	struct item *it = w->it;
	char path[PATH_MAX + 32], log[PATH_MAX + 32];
	item_path(it, path, sizeof(path));
	char *text = read_file(path);
	int status = -1;
	double secs = 0;
	int used = 0;
	if (text && sscanf(text, "%d %lf\n%n", &status, &secs, &used) >= 2 && status >= 0 && status <= ST_SKIP) {
		it->status = (enum item_status)status;
		it->secs = secs;
		snprintf(it->reason, sizeof(it->reason), "%s", text + used);
	} else {
		it->status = ST_CRASH;
		snprintf(it->reason, sizeof(it->reason), "the worker running the check left no result (wait status 0x%x)",
			 (unsigned)wst);
	}
	free(text);
	unlink(path);
	snprintf(log, sizeof(log), "%s/check-%d.log", g_tmp, it->id);
	it->output = read_file(log);
	it->done = 1;
	w->pid = 0;
}

/* Waits for one worker (any, or all with drain) and records its item. */
static void workers_reap(struct worker *w, int nw, int drain)
{
	for (;;) {
		int running = 0;
		for (int i = 0; i < nw; i++)
			running += w[i].pid > 0;
		if (!running)
			return;
		if (g_interrupted)
			for (int i = 0; i < nw; i++)
				if (w[i].pid > 0)
					kill(w[i].pid, SIGTERM);
		int st;
		pid_t got = waitpid(-1, &st, 0);
		if (got < 0 && errno != EINTR)
			return;
		for (int i = 0; got > 0 && i < nw; i++)
			if (w[i].pid == got) {
				worker_done(&w[i], st);
				if (!drain)
					return;
			}
	}
}

/* Prints the items from *next on that are done, in plan order. */
static void print_ready(struct item *items, int n, int *next, int multi)
{
	while (*next < n && items[*next].done)
		print_item(&items[(*next)++], multi);
}

static int run_plan(struct loaded *L, struct item **out, int *nout)
{
	int cap = 0, n = 0, multi = L->nt > 1;
	struct item *items = NULL;
	for (int t = 0; t < L->nt; t++) {
		const struct suite_run *sr = L->t[t].run;
		for (int i = 0; sr && i < opt.nnp; i++)
			for (int c = 0; c < sr->nchecks; c++) {
				if (c > 0 && !selected(sr->checks[c].name))
					continue;
				if (n == cap) {
					cap = cap ? cap * 2 : 64;
					struct item *ni = realloc(items, (size_t)cap * sizeof(*ni));
					if (!ni)
						return EXIT_FAIL;
					items = ni;
				}
				memset(&items[n], 0, sizeof(items[n]));
				items[n].id = n + 1;
				items[n].target = &L->t[t];
				items[n].check = &sr->checks[c];
				items[n].gate = c == 0;
				items[n].np = opt.np[i];
				n++;
			}
	}
	fprintf(g_out, "1..%d\n", n);
	const struct item *gate = NULL;
	struct worker w[16] = {{0}};
	int next = 0;
	for (int i = 0; i < n && !g_interrupted; i++) {
		struct item *it = &items[i];
		if (it->gate) {
			/* The checks after it need what it proves: the workers finish first. */
			workers_reap(w, opt.jobs, 1);
			print_ready(items, n, &next, multi);
			gate = it;
			run_item(it);
			it->done = 1;
		} else if (gate && gate->status != ST_PASS) {
			it->status = ST_SKIP;
			snprintf(it->reason, sizeof(it->reason), "%s np=%d %s", gate->check->name, gate->np,
				 gate->status == ST_SKIP ? "was skipped" : "did not pass");
			it->done = 1;
		} else if (opt.jobs > 1) {
			int slot = -1;
			while (slot < 0 && !g_interrupted) {
				for (int k = 0; k < opt.jobs && slot < 0; k++)
					if (w[k].pid <= 0)
						slot = k;
				if (slot < 0) {
					workers_reap(w, opt.jobs, 0);
					print_ready(items, n, &next, multi);
				}
			}
			if (slot < 0)
				break;
			w[slot].it = it;
			w[slot].pid = worker_start(it);
			if (w[slot].pid < 0) {
				w[slot].pid = 0;
				it->status = ST_FAIL;
				snprintf(it->reason, sizeof(it->reason), "fork: %s", strerror(errno));
				it->done = 1;
			}
		} else {
			run_item(it);
			it->done = 1;
		}
		print_ready(items, n, &next, multi);
	}
	workers_reap(w, opt.jobs, 1);
	print_ready(items, n, &next, multi);
	*out = items;
	*nout = n;
	int count[5] = {0}, ran = 0;
	for (int i = 0; i < n; i++)
		count[items[i].status]++;
	ran = n - count[ST_SKIP];
	const char *names = L->nt == 1 ? L->t[0].name : "the plugin's transports";
	if (g_interrupted) {
		say("interrupted by %s", kc_signame(g_interrupted));
		return EXIT_FAIL;
	}
	int bad = count[ST_FAIL] + count[ST_CRASH] + count[ST_TIMEOUT];
	if (bad) {
		char first[300] = "";
		for (int i = 0; i < n && !first[0]; i++)
			if (items[i].status != ST_PASS && items[i].status != ST_SKIP)
				snprintf(first, sizeof(first), "%s np=%d", items[i].check->name, items[i].np);
		fprintf(g_out, "weft-plugin-check: '%s' FAILED: %d of %d checks (%d failed, %d crashed, %d timed out; first: %s)\n",
			names, bad, n, count[ST_FAIL], count[ST_CRASH], count[ST_TIMEOUT], first);
		return EXIT_FAIL;
	}
	if (ran == 0) {
		fprintf(g_out, "weft-plugin-check: '%s' SKIPPED: nothing could run here (%s)\n", names,
			n ? items[0].reason : "no checks selected");
		return EXIT_SKIP;
	}
	fprintf(g_out, "weft-plugin-check: '%s' passed: %d checks passed, %d skipped\n", names, count[ST_PASS],
		count[ST_SKIP]);
	return EXIT_PASS;
}

int main(int argc, char **argv)
{
	if (parse_args(argc, argv) != 0)
		return EXIT_USAGE;
	g_out = (opt.tap && !strcmp(opt.tap, "-")) || (opt.json && !strcmp(opt.json, "-")) ? stderr : stdout;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	g_main_pid = getpid();
	atexit(cleanup);

	static struct loaded L;
	static struct suite_run runs[NSUITES]; /* L points into it, and lives as long */
	int nruns = 0;
	if (!opt.plugin) { /* --list alone: the transport checks */
		const char *t = getenv("TMPDIR");
		snprintf(g_tmp, sizeof(g_tmp), "%s/weft-plugin-check-XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(g_tmp)) {
			say("cannot make a private folder: %s", strerror(errno));
			g_tmp[0] = '\0';
			return EXIT_FAIL;
		}
		if (prepare_suites(runs, &nruns, NULL) != 0 || nruns == 0)
			return EXIT_USAGE;
		list_plan(runs, nruns, NULL);
		return 0;
	}

	struct stat st;
	if (stat(opt.plugin, &st) != 0 || !S_ISREG(st.st_mode)) {
		say("'%s' is not a file", opt.plugin);
		return EXIT_USAGE;
	}
	const char *base = strrchr(opt.plugin, '/');
	base = base ? base + 1 : opt.plugin;
	size_t bl = strlen(base);
	if (bl <= strlen("libweft-.so") || strncmp(base, "libweft-", 8) != 0 || strcmp(base + bl - 3, ".so") != 0) {
		say("'%s' is not named libweft-NAME.so, so the core would not load it", base);
		return EXIT_USAGE;
	}
	char real[PATH_MAX];
	if (!realpath(opt.plugin, real)) {
		say("cannot resolve %s: %s", opt.plugin, strerror(errno));
		return EXIT_USAGE;
	}
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", real);
	*strrchr(dir, '/') = '\0';
	if (make_private_dir(real, base) != 0 || set_plugin_path(dir) != 0)
		return EXIT_FAIL;

	int rc = load_plugin(&L);
	if (rc != 0)
		return rc;
	if (prepare_suites(runs, &nruns, &L) != 0)
		return EXIT_USAGE;
	int runnable = 0;
	for (int t = 0; t < L.nt; t++) {
		for (int r = 0; r < nruns; r++)
			if (runs[r].suite->kind == L.t[t].kind)
				L.t[t].run = &runs[r];
		runnable += L.t[t].run != NULL;
		if (!L.t[t].run)
			say("'%s' (kind %d) has no checks here: not run", L.t[t].name, L.t[t].kind);
	}
	if (!runnable)
		return EXIT_USAGE;
	for (int t = 0; t < L.nt; t++)
		if (L.t[t].run)
			fprintf(g_out, "weft-plugin-check: %s '%s' (ABI %u.%u, from its descriptor) in %s\n",
				L.t[t].run->suite->what, L.t[t].name, L.t[t].abi_major, L.t[t].abi_minor, real);
	if (opt.list) {
		list_plan(runs, nruns, &L);
		return 0;
	}
	for (int p = 0; p < opt.npatterns; p++) {
		int hit = 0;
		for (int r = 0; r < nruns; r++)
			for (int c = 0; c < runs[r].nchecks; c++)
				hit |= matches(opt.patterns[p], runs[r].checks[c].name);
		if (!hit) {
			say("no check matches '%s' (--list names them)", opt.patterns[p]);
			return EXIT_USAGE;
		}
	}
	/* The file's folder may be a default one (a build's lib/weft): then its
	 * siblings load as they always would, which is worth saying. */
	int in_default = 0;
	char *sp = strdup(L.search_path), *save = NULL;
	struct stat sd, sf;
	for (char *tok = sp ? strtok_r(sp, ":", &save) : NULL; tok; tok = strtok_r(NULL, ":", &save))
		if (strcmp(tok, g_tmp) != 0 && stat(tok, &sd) == 0 && stat(dir, &sf) == 0 && sd.st_dev == sf.st_dev &&
		    sd.st_ino == sf.st_ino)
			in_default = 1;
	free(sp);
	fprintf(g_out, "weft-plugin-check: search path %s: the file alone comes first%s\n", L.search_path,
		in_default ? "; its folder is searched anyway, so its siblings load as usual" : ", not its folder");
	if ((rc = hosts_prepare()) != 0)
		return rc;
	struct item *items = NULL;
	int n = 0;
	rc = run_plan(&L, &items, &n);
	if (opt.tap)
		write_tap(opt.tap, items, n, L.nt > 1);
	if (opt.json)
		write_json(opt.json, &L, items, n, rc);
	for (int i = 0; i < n; i++)
		free(items[i].output);
	free(items);
	return rc;
}
