/* SPDX-License-Identifier: Apache-2.0 */
/* Introspection (include/weft/info.h): the registry's entries, the
 * configuration, the topology and the choices, for weft-info and bindings.
 * Beside comm on the top floor: it reads every module and none reads it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <weft/info.h>

#include "bootstrap.h"
#include "coll.h"
#include "config.h"
#include "registry.h"
#include "topo.h"
#include "tpsel.h"
#include "handles.h"

/* What creation would refuse of the core's own values fails here too. */
WEFT_API int weft_info_load(void)
{
	int rc = weft__registry_load();
	int brc = weft__bootstrap_params_check();
	int vrc = weft__config_check_values();
	int trc = weft__tp_rules_check();
	return rc ? rc : brc ? brc : vrc ? vrc : trc;
}

WEFT_API const char *weft_info_load_error(void)
{
	return weft__registry_error();
}

WEFT_API int weft_info_plugins(struct weft_info_plugin *out, int max)
{
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	for (int i = 0; out && i < n && i < max; i++) {
		out[i] = (struct weft_info_plugin){
			.size = sizeof(out[i]),
			.state = (enum weft_info_state)e[i]->state,
			.kind = e[i]->name ? (int)e[i]->kind : 0,
			.name = e[i]->name,
			.path = e[i]->path,
			.abi_major = e[i]->abi_major,
			.abi_minor = e[i]->abi_minor,
			.reason = e[i]->reason,
		};
	}
	return n;
}

WEFT_API int weft_info_plugin_describe(int index, char *buf, size_t len)
{
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	if (index < 0 || index >= n || !buf || len == 0)
		return -EINVAL;
	buf[0] = '\0';
	if (e[index]->state != WEFT_PLUGIN_LOADED || e[index]->kind != WEFT_PLUGIN_TRANSPORT)
		return -ENOSYS;
	const struct weft_transport_ops *t = e[index]->ops;
	int rc = WEFT_CALL_OP(t, struct weft_transport_ops, describe, NULL, buf, len);
	/* The plugin may not terminate a string it truncated. */
	buf[len - 1] = '\0';
	return rc;
}

WEFT_API char *weft_info_search_path(void)
{
	return weft__registry_search_path();
}

WEFT_API const char *weft_info_config_path(void)
{
	return weft__config_path();
}

WEFT_API int weft_info_param_string(const char *section, const char *key, char *buf, size_t len)
{
	const char *v = NULL;
	if (!section || !key || !buf || !len)
		return -EINVAL;
	int rc = weft__param_get(section, key, WEFT_PARAM_STRING, &v, NULL);
	if (rc != 0)
		return rc;
	if (snprintf(buf, len, "%s", v ? v : "") >= (int)len)
		return -ENOSPC;
	return 0;
}

WEFT_API int weft_info_params(struct weft_info_param *out, int max)
{
	/* The plugins' parameters exist once they are loaded (once per process;
	 * the checks of weft_info_load are not repeated here). */
	weft__registry_load();
	return weft__config_params(out, max);
}

WEFT_API int weft_info_param_get(const char *section, const char *key, int type, void *out, int *source)
{
	if (type < WEFT_PARAM_INT || type > WEFT_PARAM_STRING)
		return -EINVAL;
	weft__registry_load();
	enum weft_param_source src = WEFT_PARAM_SRC_DEFAULT;
	int rc = weft__param_get(section, key, (enum weft_param_type)type, out, &src);
	if (rc == 0 && source)
		*source = (int)src;
	return rc;
}

WEFT_API void weft_info_print_params(FILE *out)
{
	weft__config_print(out);
}

WEFT_API void weft_info_print_topology(FILE *out)
{
	weft__topo_print(out);
}

WEFT_API int weft_info_print_transport_choice(FILE *out, weft_comm_t *comm, int nranks, enum weft_mem_type mem)
{
	/* NULL asks without a communicator; anything else must be a live one. */
	if (comm && weft__comm_check(comm, "weft_info_print_transport_choice") != 0)
		return -EINVAL;
	if (comm)
		return weft__tp_print_choices(out, comm, 0, nranks, mem);
	/* The preflight opens the transports as a job would: a communicator of
	 * one, whose creation fails as the job's would (a required transport
	 * that cannot open), and whose transports that did not open are listed. */
	struct weft_unique_id id;
	weft_comm_t *one = NULL;
	int rc = weft_get_unique_id(&id);
	if (rc == 0)
		rc = weft_comm_create(&id, 1, 0, &one);
	if (rc != 0) {
		fprintf(out, "preflight: a communicator cannot be created here: %s (the error above says why)\n",
			weft_strerror(rc));
		return rc;
	}
	rc = weft__tp_print_choices(out, one, 1, nranks, mem);
	weft_comm_destroy(one);
	return rc;
}

WEFT_API void weft_info_print_algorithm_choice(FILE *out, int nranks, enum weft_mem_type mem)
{
	weft__coll_print_choices(out, nranks, 1, mem);
}

WEFT_API void weft_info_print_algorithm_choice_hosts(FILE *out, int nranks, int nhosts, enum weft_mem_type mem)
{
	weft__coll_print_choices(out, nranks, nhosts, mem);
}

WEFT_API int weft_info_algorithms(struct weft_info_algo *out, int max)
{
	if (max < 0 || (max > 0 && !out))
		return -EINVAL;
	return weft__coll_catalog(out, max);
}

WEFT_API const char *weft_info_last_algorithm(weft_comm_t *comm)
{
	if (comm && weft__comm_check(comm, "weft_info_last_algorithm") != 0)
		return NULL;
	return weft__coll_last_algo(comm);
}
