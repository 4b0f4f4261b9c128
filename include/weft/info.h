/* SPDX-License-Identifier: Apache-2.0 */
/* weft: introspection, for tools (weft-info is built on this header alone)
 * and bindings: the plugins the core found and why any was rejected, the
 * parameters with their values and sources, the topology the transports
 * report, and the choices the core would make or made. */
#ifndef WEFT_INFO_H
#define WEFT_INFO_H

#include <stddef.h>
#include <stdio.h>

#include <weft/weft.h>

#ifdef __cplusplus
extern "C" {
#endif

enum weft_info_state {
	WEFT_INFO_LOADED = 0,   /* loaded and usable */
	WEFT_INFO_REJECTED = 1, /* not loaded: reason says why */
	WEFT_INFO_SHADOWED = 2, /* the same name loaded earlier in the search order */
	WEFT_INFO_EXCLUDED = 3  /* kept out by [core] plugins: never opened */
};

/* One file the registry saw (one entry per descriptor loaded). */
struct weft_info_plugin {
	size_t size;               /* written by weft_info_plugins: sizeof this struct */
	enum weft_info_state state;
	int kind;                  /* 1 transport, 2 algorithm pack (plugin.h's values); 0 when no descriptor was read */
	const char *name;          /* NULL when rejected before a descriptor was read */
	const char *path;
	unsigned abi_major, abi_minor;
	const char *reason;        /* REJECTED and SHADOWED: why; else NULL */
};

/* Loads the configuration and scans the plugin search path, once per process
 * (later calls return the first result). 0; -WEFT_ERR_CONFIG for a broken
 * configuration; -WEFT_ERR_PLUGIN when a plugin that [core] require names did
 * not load (the scan still completes, so every entry can be shown).
 * Thread safety: any thread. Blocking: loads and initializes plugins. */
WEFT_API int weft_info_load(void);

/* Why weft_info_load failed, one line per problem; NULL when it did not (or
 * has not run). Valid until exit. */
WEFT_API const char *weft_info_load_error(void);

/* Every entry in search order: fills out[0 .. min(count, max)) and returns the
 * count (loading first when needed). Strings live until exit. */
WEFT_API int weft_info_plugins(struct weft_info_plugin *out, int max);

/* The describe line of entry `index` of weft_info_plugins (a transport's
 * describe op, asked without a context). 0, -ENOSYS when the plugin has no
 * such op or the entry is no loaded transport, -EINVAL for a bad index, or the
 * plugin's error. The text is always terminated. */
WEFT_API int weft_info_plugin_describe(int index, char *buf, size_t len);

/* The search path actually used, as a colon list the caller frees with
 * free(); NULL without memory. */
WEFT_API char *weft_info_search_path(void);

/* The configuration file in use, or NULL when none. Valid until exit. */
WEFT_API const char *weft_info_config_path(void);

/* The value of a declared STRING parameter (section.key) into buf, "" when
 * unset. Returns 0, -ENOENT (not declared), -EINVAL (not a STRING, or a NULL
 * argument), -ENOSPC (buf too small), -WEFT_ERR_CONFIG (the value is refused). */
WEFT_API int weft_info_param_string(const char *section, const char *key, char *buf, size_t len);

/* One declared parameter of the core or a loaded plugin (a row of
 * weft-info -c). Its environment variable is WEFT_<SECTION>_<KEY>,
 * upper-cased, '-' as '_' (plugin.h). */
struct weft_info_param {
	size_t size;         /* written by weft_info_params: sizeof this struct */
	const char *section;
	const char *key;
	int type;            /* enum weft_param_type (plugin.h): 0 INT, 1 SIZE, 2 BOOL, 3 DOUBLE, 4 STRING */
	const char *owner;   /* "core", or the plugin that declared it */
	const char *help;
};

/* Every declared parameter, sorted by section, then key (loading first when
 * needed): fills out[0 .. min(count, max)) and returns the count, or
 * -ENOMEM. Strings live until exit. Thread safety: any thread. */
WEFT_API int weft_info_params(struct weft_info_param *out, int max);

/* The value in force of the declared parameter section.key (environment,
 * else file, else default) as its type: out points to an int64_t (INT), a
 * uint64_t (SIZE), an int (BOOL), a double (DOUBLE) or a const char *
 * (STRING: NULL when unset; lives until exit). *source, when source is not
 * NULL, gets enum weft_param_source (plugin.h). Returns 0, -ENOENT (not
 * declared), -EINVAL (type is not the parameter's, or a NULL argument),
 * -WEFT_ERR_CONFIG (the value set is refused; logged once). Thread safety:
 * any thread. */
WEFT_API int weft_info_param_get(const char *section, const char *key, int type, void *out, int *source);

/* Every declared parameter, one per line: section.key = value (source), and
 * its help (weft-info -c). */
WEFT_API void weft_info_print_params(FILE *out);

/* This process's NUMA view, every loaded transport's probed devices, and the
 * NVLink state (weft-info --topo). */
WEFT_API void weft_info_print_topology(FILE *out);

/* For each peer class, the transports a connection would try, in order and
 * why, and those left out with the rule that did it; comm may be NULL: the
 * transports are then opened as a job opens them (a communicator of one is
 * made and destroyed; those that do not open are listed with why), nranks
 * assumed. 0, or the error the job would get (creation's, -WEFT_ERR_PLUGIN,
 * -EHOSTUNREACH). */
WEFT_API int weft_info_print_transport_choice(FILE *out, weft_comm_t *comm, int nranks, enum weft_mem_type mem);

/* Per collective, the algorithm each message size would get on nranks ranks
 * with buffers of memory type mem, and why (weft-info --select). */
WEFT_API void weft_info_print_algorithm_choice(FILE *out, int nranks, enum weft_mem_type mem);
/* The same for a communicator spanning nhosts hosts (weft-info --hosts H):
 * algorithms that serve fewer hosts (struct weft_algo's max_hosts) drop out. */
WEFT_API void weft_info_print_algorithm_choice_hosts(FILE *out, int nranks, int nhosts, enum weft_mem_type mem);

/* One algorithm of a loaded pack, as it declares itself (plugin.h's struct
 * weft_algo; 0 limits mean none), for tools that check or show packs. */
struct weft_info_algo {
	size_t size;               /* written by weft_info_algorithms: sizeof this struct */
	const char *pack;          /* the pack's name */
	const char *name;          /* the algorithm's, unique within its pack */
	int coll;                  /* enum weft_collective (plugin.h) */
	unsigned long long min_bytes, max_bytes, max_peer_bytes;
	int min_ranks, max_ranks;
	unsigned mem_types;        /* bit (1u << enum weft_mem_type) */
	unsigned redops;           /* bit (1u << enum weft_redop) the core may hand it */
	int priority;
};

/* Every algorithm of the loaded packs, in catalog order: fills out[0 ..
 * min(count, max)) and returns the count (loading first when needed), or a
 * negative error (-WEFT_ERR_CONFIG, -ENOMEM). Strings live until exit.
 * Thread safety: any thread. */
WEFT_API int weft_info_algorithms(struct weft_info_algo *out, int max);

/* Writes to out what process pid (of this user, with [core] status_socket =
 * 1) says of its communicators: each one's rank, the call it is in and for
 * how long, and where each peer is. 0, -ESRCH (no status socket for that
 * process), -EPERM (the socket's folder is not this user's alone), or an
 * errno of the connection. Thread safety: any thread. */
WEFT_API int weft_info_where(long pid, FILE *out);

/* "pack/algorithm" of the algorithm that served comm's last collective, or
 * NULL when none ran. Lives until exit. Thread safety: one thread per comm. */
WEFT_API const char *weft_info_last_algorithm(weft_comm_t *comm);

#ifdef __cplusplus
}
#endif
#endif /* WEFT_INFO_H */
