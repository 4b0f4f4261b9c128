/* SPDX-License-Identifier: Apache-2.0 */
/* weft-info: shows what weft would use here and why: version, config file,
 * plugin search path, every plugin file found (loaded, rejected, shadowed, with
 * the reason); with -c every parameter with its value and source; with --topo
 * the topology; with --select the transport per peer and algorithm per size. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/info.h>
#include <weft/plugin.h>
#include <weft/weft.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: weft-info [options]\n"
		"Shows the weft version, the config file in use, the plugin search path, every\n"
		"plugin found (name, kind, ABI, path) and every file refused or shadowed, with why.\n"
		"\n"
		"options:\n"
		"  -c, --config   print every parameter: section.key = value (source) and its help\n"
		"      --topo     print the topology seen: NUMA nodes and distances (hwloc), NVLink\n"
		"                 (NVML: which GPUs, hence which same-host peers, are same-gpu-link),\n"
		"                 and every transport's probed devices and properties\n"
		"      --select   print the transport each peer gets and why (score, rule), per peer\n"
		"                 class (same-process, same-host, same-gpu-link, other-host), and, per\n"
		"                 collective, which algorithm serves each size and why. Under a\n"
		"                 launcher (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID or RANK/\n"
		"                 WORLD_SIZE set, with WEFT_CORE_BOOTSTRAP_ROOT) every rank joins a\n"
		"                 communicator and prints its real peers\n"
		"      --np N     rank count assumed by --select (default 2; a launcher's wins)\n"
		"      --hosts H  hosts the --np ranks are spread over, for the algorithm choice\n"
		"                 (default 1; a launcher's real layout is not read for it)\n"
		"      --mem T    memory type assumed by --select: host, cuda or hip (default host;\n"
		"                 weft_connect chooses for host, weft_connect_mem for the type it names)\n"
		"      --where PID  print where process PID's communicators are (the call each waits\n"
		"                 in and for how long, where each peer is), through the status socket\n"
		"                 it opens with [core] status_socket = 1 (same user only); exit 2 if none\n"
		"      --version  print the versions of weft-info and of the libweft.so it runs with\n"
		"  -h, --help     print this help\n"
		"\n"
		"environment: WEFT_PLUGIN_PATH (colon list of plugin folders searched first),\n"
		"WEFT_CONFIG (config file), WEFT_<SECTION>_<KEY> (one parameter), WEFT_LOG_LEVEL.\n"
		"\n"
		"exit status: 0 when the configuration is valid and every required plugin\n"
		"(core.require) loaded, even if some file was refused, and (with --select) every\n"
		"peer class gets a transport; 2 otherwise, or on a bad option.\n");
}

static void print_version(int code)
{
	printf("%d.%d.%d", code / 10000, code / 100 % 100, code % 100);
}

static const char *kind_name(int k)
{
	switch (k) {
	case WEFT_PLUGIN_TRANSPORT: return "transport";
	case WEFT_PLUGIN_ALGO_PACK: return "algorithm";
	default: return "?";
	}
}

static const char *state_name(enum weft_info_state s)
{
	switch (s) {
	case WEFT_INFO_LOADED: return "loaded";
	case WEFT_INFO_REJECTED: return "REJECTED";
	case WEFT_INFO_SHADOWED: return "SHADOWED";
	case WEFT_INFO_EXCLUDED: return "EXCLUDED";
	default: return "?";
	}
}

static void print_plugins(void)
{
	int n = weft_info_plugins(NULL, 0);
	struct weft_info_plugin *e = calloc(n > 0 ? (size_t)n : 1, sizeof(*e));
	if (!e) {
		fprintf(stderr, "weft-info: out of memory\n");
		return;
	}
	n = weft_info_plugins(e, n);
	int loaded = 0, other = 0;
	for (int i = 0; i < n; i++)
		e[i].state == WEFT_INFO_LOADED ? loaded++ : other++;

	printf("plugins (%d loaded):\n", loaded);
	if (!loaded)
		printf("  (none)\n");
	for (int i = 0; i < n; i++) {
		if (e[i].state != WEFT_INFO_LOADED)
			continue;
		printf("  %-16s %-9s ABI %u.%-3u %s\n", e[i].name, kind_name(e[i].kind), e[i].abi_major,
		       e[i].abi_minor, e[i].path);
		if (e[i].kind == WEFT_PLUGIN_TRANSPORT) {
			char line[512] = "";
			int rc = weft_info_plugin_describe(i, line, sizeof(line));
			if (rc == 0)
				printf("      %s\n", line);
			else if (rc != -ENOSYS)
				printf("      describe failed: %s\n", weft_strerror(rc));
		}
	}
	if (other) {
		printf("not loaded (%d):\n", other);
		for (int i = 0; i < n; i++) {
			if (e[i].state == WEFT_INFO_LOADED)
				continue;
			printf("  %s %s%s%s%s: %s\n", state_name(e[i].state), e[i].path, e[i].name ? " ('" : "",
			       e[i].name ? e[i].name : "", e[i].name ? "')" : "", e[i].reason ? e[i].reason : "");
		}
	}
	free(e);
}

/* --select: transports per peer, then algorithms per size. Under a launcher
 * every rank joins one communicator, so the peers and their classes are real;
 * otherwise rank 0's view of np ranks on this host is shown. */
static int select_print(int np, int nhosts, enum weft_mem_type mem)
{
	int lrank = 0, lsize = 0;
	weft_comm_t *comm = NULL;
	int rc = 0;
	if (getenv("OMPI_COMM_WORLD_RANK") || getenv("PMI_RANK") || getenv("SLURM_PROCID") ||
	    (getenv("RANK") && getenv("WORLD_SIZE"))) {
		rc = weft_comm_create_from_env(&comm);
		if (rc != 0) {
			fprintf(stderr, "weft-info: cannot join the launcher's job: %s\n", weft_strerror(rc));
			return rc;
		}
		lrank = weft_comm_rank(comm);
		lsize = weft_comm_size(comm);
		np = lsize;
	}
	/* Ranks print one after the other, so their lines do not interleave. */
	for (int turn = 0; turn < (comm ? lsize : 1); turn++) {
		if (comm && turn != lrank) {
			weft_comm_barrier(comm);
			continue;
		}
		int prc = weft_info_print_transport_choice(stdout, comm, np, mem);
		if (prc != 0 && rc == 0)
			rc = prc;
		if (!comm || lrank == 0)
			weft_info_print_algorithm_choice_hosts(stdout, np, nhosts, mem);
		fflush(stdout);
		if (comm)
			weft_comm_barrier(comm);
	}
	weft_comm_destroy(comm);
	return rc;
}

int main(int argc, char **argv)
{
	int show_config = 0, show_select = 0, show_topo = 0, np = 2, nhosts = 1;
	enum weft_mem_type mem = WEFT_MEM_HOST;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(a, "--version") == 0) {
			printf("weft-info %d.%d.%d\n", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
			printf("core ");
			print_version(weft_get_version());
			Dl_info info;
			if (dladdr((void *)weft_get_version, &info) && info.dli_fname)
				printf(" (%s)", info.dli_fname);
			printf(", plugin ABI %d.%d\n", WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR);
			return 0;
		} else if (strcmp(a, "--where") == 0) {
			char *end;
			long pid = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
			if (i + 1 >= argc || *argv[i + 1] == '\0' || *end != '\0' || pid <= 0) {
				fprintf(stderr, "weft-info: --where needs a process id\n");
				return 2;
			}
			int wrc = weft_info_where(pid, stdout);
			if (wrc == -ESRCH)
				fprintf(stderr, "weft-info: process %ld has no status socket (not a weft process of this "
						"user, or [core] status_socket is not 1 there)\n", pid);
			else if (wrc)
				fprintf(stderr, "weft-info: cannot ask process %ld: %s\n", pid, strerror(-wrc));
			return wrc ? 2 : 0;
		} else if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
			show_config = 1;
		} else if (strcmp(a, "--select") == 0) {
			show_select = 1;
		} else if (strcmp(a, "--topo") == 0) {
			show_topo = 1;
		} else if (strcmp(a, "--np") == 0 || strcmp(a, "--mem") == 0 || strcmp(a, "--hosts") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "weft-info: %s needs a value\n", a);
				return 2;
			}
			const char *v = argv[++i];
			if (a[2] == 'h') {
				char *end;
				long n = strtol(v, &end, 10);
				if (*v == '\0' || *end != '\0' || n < 1 || n > 1 << 20) {
					fprintf(stderr, "weft-info: --hosts '%s' is not a host count (1..1048576)\n", v);
					return 2;
				}
				nhosts = (int)n;
			} else if (a[2] == 'n') {
				char *end;
				long n = strtol(v, &end, 10);
				if (*v == '\0' || *end != '\0' || n < 1 || n > 1 << 20) {
					fprintf(stderr, "weft-info: --np '%s' is not a rank count (1..1048576)\n", v);
					return 2;
				}
				np = (int)n;
			} else if (strcmp(v, "host") == 0) {
				mem = WEFT_MEM_HOST;
			} else if (strcmp(v, "cuda") == 0) {
				mem = WEFT_MEM_CUDA;
			} else if (strcmp(v, "hip") == 0) {
				mem = WEFT_MEM_HIP;
			} else {
				fprintf(stderr, "weft-info: --mem '%s' is not host, cuda or hip\n", v);
				return 2;
			}
		} else {
			fprintf(stderr, "weft-info: unknown option '%s' (try --help)\n", a);
			return 2;
		}
	}

	/* Loading logs each refused file as it goes; the summary below repeats it
	 * in one place, with the reason. */
	int rc = weft_info_load();

	printf("weft ");
	print_version(weft_get_version());
	printf(" (plugin ABI %d.%d)\n", WEFT_PLUGIN_ABI_MAJOR, WEFT_PLUGIN_ABI_MINOR);
	const char *cfg = weft_info_config_path();
	printf("config: %s\n", cfg ? cfg : "(none)");
	char *path = weft_info_search_path();
	printf("search path: %s\n", path && *path ? path : "(empty)");
	free(path);

	if (show_config) {
		printf("parameters:\n");
		fflush(stdout);
		weft_info_print_params(stdout);
	} else if (show_topo || show_select) {
		fflush(stdout);
		if (show_topo)
			weft_info_print_topology(stdout);
		int src = show_select ? select_print(np, nhosts, mem) : 0;
		if (src != 0 && rc == 0) {
			fprintf(stderr, "weft-info: error: --select: %s (see above)\n", weft_strerror(src));
			fflush(stdout);
			return 2;
		}
	} else {
		print_plugins();
	}
	fflush(stdout);

	if (rc != 0) {
		const char *why = weft_info_load_error();
		if (!why)
			why = weft_strerror(rc);
		while (*why) {
			size_t n = strcspn(why, "\n");
			fprintf(stderr, "weft-info: error: %.*s\n", (int)n, why);
			why += n + (why[n] == '\n');
		}
		return 2;
	}
	return 0;
}
