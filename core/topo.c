/* Topology: transports' probed devices (cached per process), NUMA locality
 * from hwloc (optional at build time), NVLink state from NVML (dlopen'ed at run
 * time where present), and the per-peer-class score that transport choice uses. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WEFT_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "log.h"
#include "registry.h"
#include "topo.h"

#define PROBE_MAX 16
#define CACHE_MAX 32
#define SCORE_NONE 1e18

/* ------------------------------------------------------------ probe cache */
struct probed {
	const struct weft_transport_ops *ops;
	int rc; /* probe's return (0, or the error it gave; -ENOSYS: no probe op) */
	int n;
	struct weft_tp_device devs[PROBE_MAX];
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct probed probe_cache[CACHE_MAX];
static int probe_n;

/* Returns the cached probe of ops (probing it the first time), or NULL when
 * the cache is full. Called with probe_lock held. */
static const struct probed *probe_get(const struct weft_transport_ops *ops)
{
	for (int i = 0; i < probe_n; i++)
		if (probe_cache[i].ops == ops)
			return &probe_cache[i];
	if (probe_n == CACHE_MAX)
		return NULL;
	struct probed *p = &probe_cache[probe_n];
	memset(p, 0, sizeof(*p));
	p->ops = ops;
	if (!WEFT_HAS_OP(ops, struct weft_transport_ops, probe)) {
		p->rc = -ENOSYS;
	} else {
		int n = PROBE_MAX;
		for (int i = 0; i < PROBE_MAX; i++)
			p->devs[i].size = sizeof(p->devs[i]);
		p->rc = ops->probe(p->devs, &n);
		/* -ENOSPC: more devices than room; the first PROBE_MAX are enough to score. */
		if (p->rc == -ENOSPC)
			p->rc = 0;
		p->n = p->rc == 0 ? (n < 0 ? 0 : n > PROBE_MAX ? PROBE_MAX : n) : 0;
		for (int i = 0; i < p->n; i++) { /* a plugin may leave strings unterminated */
			p->devs[i].name[sizeof(p->devs[i].name) - 1] = '\0';
			p->devs[i].link[sizeof(p->devs[i].link) - 1] = '\0';
			p->devs[i].pci_path[sizeof(p->devs[i].pci_path) - 1] = '\0';
		}
	}
	probe_n++;
	return p;
}

/* ------------------------------------------------------------------ hwloc */
#ifdef WEFT_HAVE_HWLOC
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t hw_topo;
static int hw_ok;
static hwloc_nodeset_t hw_local; /* NUMA nodes of the CPUs this process may run on */

static void hw_load(void)
{
	if (hwloc_topology_init(&hw_topo) != 0) {
		WEFT_DEBUG("hwloc: topology init failed; NUMA and PCI locality unknown");
		return;
	}
	/* PCI devices are needed to place a NIC or GPU that reports only its bus id. */
	hwloc_topology_set_io_types_filter(hw_topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (hwloc_topology_load(hw_topo) != 0) {
		WEFT_DEBUG("hwloc: topology load failed; NUMA and PCI locality unknown");
		hwloc_topology_destroy(hw_topo);
		return;
	}
	hwloc_cpuset_t cpus = hwloc_bitmap_alloc();
	hw_local = hwloc_bitmap_alloc();
	if (!cpus || !hw_local) {
		hwloc_bitmap_free(cpus);
		hwloc_topology_destroy(hw_topo);
		return;
	}
	if (hwloc_get_cpubind(hw_topo, cpus, HWLOC_CPUBIND_PROCESS) != 0)
		hwloc_bitmap_copy(cpus, hwloc_topology_get_topology_cpuset(hw_topo));
	hwloc_cpuset_to_nodeset(hw_topo, cpus, hw_local);
	hwloc_bitmap_free(cpus);
	hw_ok = 1;
}

static int hw_ready(void)
{
	pthread_once(&hw_once, hw_load);
	return hw_ok;
}

/* NUMA node (OS index) of the PCI device at busid ("0000:3b:00.0"), or -1. */
static int hw_pci_numa(const char *busid)
{
	if (!busid || !*busid || !hw_ready())
		return -1;
	hwloc_obj_t o = hwloc_get_pcidev_by_busidstring(hw_topo, busid);
	if (!o)
		return -1;
	hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(hw_topo, o);
	if (!anc || !anc->nodeset || hwloc_bitmap_weight(anc->nodeset) != 1)
		return -1;
	return hwloc_bitmap_first(anc->nodeset);
}

/* Distance from this process's nearest NUMA node to node `numa`, relative to
 * that node's distance to itself (1 = local, 2.1 for a SLIT 21). 1 when hwloc
 * has no distance matrix or does not know the node. */
static double hw_numa_factor(int numa)
{
	if (numa < 0 || !hw_ready())
		return 1.0;
	if (hwloc_bitmap_isset(hw_local, (unsigned)numa))
		return 1.0;
	hwloc_obj_t target = hwloc_get_numanode_obj_by_os_index(hw_topo, (unsigned)numa);
	if (!target)
		return 1.0;
	unsigned nr = 1;
	struct hwloc_distances_s *d = NULL;
	if (hwloc_distances_get_by_type(hw_topo, HWLOC_OBJ_NUMANODE, &nr, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) !=
		    0 ||
	    nr < 1 || !d)
		return 1.0;
	double best = 0;
	int node;
	hwloc_bitmap_foreach_begin(node, hw_local)
	{
		hwloc_obj_t here = hwloc_get_numanode_obj_by_os_index(hw_topo, (unsigned)node);
		hwloc_uint64_t to = 0, back = 0, self = 0, s2 = 0;
		if (here && hwloc_distances_obj_pair_values(d, here, target, &to, &back) == 0 &&
		    hwloc_distances_obj_pair_values(d, here, here, &self, &s2) == 0 && self > 0) {
			double f = (double)to / (double)self;
			if (best == 0 || f < best)
				best = f;
		}
	}
	hwloc_bitmap_foreach_end();
	hwloc_distances_release(hw_topo, d);
	return best >= 1.0 ? best : 1.0;
}
#else
static pthread_once_t hw_once = PTHREAD_ONCE_INIT;

static void hw_say(void)
{
	WEFT_DEBUG("topology: built without hwloc; NUMA and PCI locality unknown, scores ignore them");
}

static int hw_pci_numa(const char *busid)
{
	(void)busid;
	pthread_once(&hw_once, hw_say);
	return -1;
}

static double hw_numa_factor(int numa)
{
	(void)numa;
	return 1.0;
}
#endif

/* The device's NUMA node: its own word, else hwloc's placement of its PCI path. */
static int dev_numa(const struct weft_tp_device *d)
{
	return d->numa_node >= 0 ? d->numa_node : hw_pci_numa(d->pci_path);
}

/* ---------------------------------------------------------------- scores */
void weft__topo_score(const struct weft_transport_ops *ops, enum weft_peer_class cls, enum weft_mem_type mem,
		      struct weft__tp_score *out)
{
	struct weft__tp_score best;
	memset(&best, 0, sizeof(best));
	best.numa_factor = 1.0;
	best.score_us = SCORE_NONE;
	pthread_mutex_lock(&probe_lock);
	const struct probed *p = probe_get(ops);
	if (!p || p->rc != 0) {
		/* No word from the transport: offered on the assumed figures. */
		best.reach = 1;
		best.lat_us = WEFT__ASSUMED_LAT_US;
		best.bw_gbps = WEFT__ASSUMED_BW_GBPS;
		best.score_us = best.lat_us + WEFT__SCORE_BYTES / (best.bw_gbps * 1e3);
		snprintf(best.dev, sizeof(best.dev), "%s", p && p->rc == -ENOSYS ? "(no probe op)" : "(probe failed)");
	} else {
		best.probed = 1;
		for (int i = 0; i < p->n; i++) {
			const struct weft_tp_device *d = &p->devs[i];
			if ((unsigned)cls >= 32 || !(d->peer_classes & (1u << cls)) || (unsigned)mem >= 32 ||
			    !(d->mem_types & (1u << mem)))
				continue;
			struct weft__tp_score s;
			memset(&s, 0, sizeof(s));
			s.probed = 1;
			s.reach = 1;
			s.lat_known = d->latency_us > 0;
			s.bw_known = d->bandwidth_gbps > 0;
			s.lat_us = s.lat_known ? d->latency_us : WEFT__ASSUMED_LAT_US;
			s.bw_gbps = s.bw_known ? d->bandwidth_gbps : WEFT__ASSUMED_BW_GBPS;
			/* A device on a remote NUMA node pays the distance both ways:
			 * longer to reach, less bandwidth across the socket link. */
			s.numa_factor = cls == WEFT_PEER_OTHER_HOST || cls == WEFT_PEER_SAME_HOST
						? hw_numa_factor(dev_numa(d))
						: 1.0;
			s.score_us = s.lat_us * s.numa_factor + WEFT__SCORE_BYTES / (s.bw_gbps / s.numa_factor * 1e3);
			snprintf(s.dev, sizeof(s.dev), "%s", d->name);
			snprintf(s.link, sizeof(s.link), "%s", d->link);
			if (!best.reach || s.score_us < best.score_us)
				best = s;
		}
	}
	pthread_mutex_unlock(&probe_lock);
	*out = best;
}

void weft__topo_score_text(const struct weft__tp_score *s, char *buf, size_t len)
{
	if (!s->reach) {
		snprintf(buf, len, "no probed device reaches this peer class and memory type");
		return;
	}
	char numa[48] = "";
	if (s->numa_factor > 1.0)
		snprintf(numa, sizeof(numa), ", NUMA distance x%.2g", s->numa_factor);
	snprintf(buf, len, "score %.3g us for %u KiB: device %s%s%s%s, latency %.3g us%s, %.3g GB/s%s%s", s->score_us,
		 WEFT__SCORE_BYTES >> 10, s->dev, s->link[0] ? " (" : "", s->link, s->link[0] ? ")" : "", s->lat_us,
		 s->lat_known ? "" : " (assumed)", s->bw_gbps, s->bw_known ? "" : " (assumed)", numa);
}

/* ------------------------------------------------------------------- NVML
 * NVLink connectivity, which hwloc does not see. The library comes with the
 * NVIDIA driver: it is opened at run time only, never linked, and the struct
 * and constants below are the documented ones of nvml.h (v2/v3 entry points). */
#define NVML_OK 0
#define NVML_LINKS 18

struct nvml_pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

static void nvml_print(FILE *out)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(out, "nvlink: no NVML (libnvidia-ml.so.1 not found): NVLink connectivity unknown\n");
		return;
	}
	int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
	int (*shutdown)(void) = (int (*)(void))dlsym(h, "nvmlShutdown");
	int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
	int (*by_index)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	int (*pci)(void *, struct nvml_pci *) = (int (*)(void *, struct nvml_pci *))dlsym(h, "nvmlDeviceGetPciInfo_v3");
	int (*state)(void *, unsigned, int *) = (int (*)(void *, unsigned, int *))dlsym(h, "nvmlDeviceGetNvLinkState");
	int (*remote)(void *, unsigned, struct nvml_pci *) =
		(int (*)(void *, unsigned, struct nvml_pci *))dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	unsigned n = 0;
	if (!init || !shutdown || !count || !by_index || !pci || !state || !remote) {
		fprintf(out, "nvlink: NVML lacks the entry points weft uses: NVLink connectivity unknown\n");
		dlclose(h);
		return;
	}
	int rc = init();
	if (rc != NVML_OK) {
		fprintf(out, "nvlink: NVML did not initialize (error %d): NVLink connectivity unknown\n", rc);
		dlclose(h);
		return;
	}
	if (count(&n) != NVML_OK)
		n = 0;
	fprintf(out, "nvlink (NVML): %u GPU(s)\n", n);
	for (unsigned g = 0; g < n; g++) {
		void *dev = NULL;
		struct nvml_pci me;
		memset(&me, 0, sizeof(me));
		if (by_index(g, &dev) != NVML_OK || pci(dev, &me) != NVML_OK)
			continue;
		me.bus_id[sizeof(me.bus_id) - 1] = '\0';
		int active = 0;
		char peers[512] = "";
		for (unsigned l = 0; l < NVML_LINKS; l++) {
			int on = 0;
			struct nvml_pci rp;
			if (state(dev, l, &on) != NVML_OK || !on)
				continue;
			active++;
			memset(&rp, 0, sizeof(rp));
			if (remote(dev, l, &rp) == NVML_OK) {
				rp.bus_id[sizeof(rp.bus_id) - 1] = '\0';
				size_t used = strlen(peers);
				if (!strstr(peers, rp.bus_id) && used + strlen(rp.bus_id) + 2 < sizeof(peers))
					snprintf(peers + used, sizeof(peers) - used, "%s%s", used ? " " : "", rp.bus_id);
			}
		}
		fprintf(out, "  GPU%u %s: %d NVLink(s) active%s%s\n", g, me.bus_id, active, active ? ", to " : "",
			peers);
	}
	shutdown();
	dlclose(h);
}

/* ------------------------------------------------------------- weft-info */
static void numa_print(FILE *out)
{
#ifdef WEFT_HAVE_HWLOC
	if (!hw_ready()) {
		fprintf(out, "numa: hwloc could not load the topology: NUMA and PCI locality unknown\n");
		return;
	}
	int nn = hwloc_get_nbobjs_by_type(hw_topo, HWLOC_OBJ_NUMANODE);
	char *local = NULL;
	hwloc_bitmap_list_asprintf(&local, hw_local);
	fprintf(out, "numa (hwloc %s): %d node(s); this process runs on node(s) %s\n", HWLOC_VERSION, nn,
		local ? local : "?");
	free(local);
	unsigned nr = 1;
	struct hwloc_distances_s *d = NULL;
	if (hwloc_distances_get_by_type(hw_topo, HWLOC_OBJ_NUMANODE, &nr, &d, HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) ==
		    0 &&
	    nr >= 1 && d) {
		fprintf(out, "  distances (relative latency, row to column):\n");
		for (unsigned i = 0; i < d->nbobjs; i++) {
			fprintf(out, "    node %-3u", d->objs[i]->os_index);
			for (unsigned j = 0; j < d->nbobjs; j++)
				fprintf(out, " %4llu", (unsigned long long)d->values[i * d->nbobjs + j]);
			fputc('\n', out);
		}
		hwloc_distances_release(hw_topo, d);
	} else {
		fprintf(out, "  no NUMA distance matrix (one node, or the OS gives none)\n");
	}
	int npci = 0;
	for (hwloc_obj_t o = hwloc_get_next_pcidev(hw_topo, NULL); o; o = hwloc_get_next_pcidev(hw_topo, o))
		npci++;
	fprintf(out, "  %d PCI device(s) seen\n", npci);
#else
	fprintf(out, "numa: weft was built without hwloc: NUMA and PCI locality unknown\n");
#endif
}

static const char *class_names[WEFT_PEER_CLASS_COUNT] = {"same-process", "same-host", "other-host"};
static const char *mem_names[WEFT_MEM_TYPE_COUNT] = {"host", "cuda", "hip"};

WEFT_API void weft__topo_print(FILE *out)
{
	if (!out)
		return;
	numa_print(out);
	nvml_print(out);
	const struct weft__plugin_entry *const *e = NULL;
	int n = weft__registry_entries(&e);
	fprintf(out, "transports (devices from each one's probe):\n");
	int any = 0;
	for (int i = 0; i < n; i++) {
		if (e[i]->state != WEFT_PLUGIN_LOADED || e[i]->kind != WEFT_PLUGIN_TRANSPORT || !e[i]->ops)
			continue;
		any = 1;
		pthread_mutex_lock(&probe_lock);
		const struct probed *p = probe_get(e[i]->ops);
		struct probed copy;
		if (p)
			copy = *p;
		pthread_mutex_unlock(&probe_lock);
		if (!p) {
			fprintf(out, "  %s: not probed (too many transports)\n", e[i]->name);
			continue;
		}
		if (copy.rc == -ENOSYS) {
			fprintf(out, "  %s: no probe op (scored on assumed figures)\n", e[i]->name);
			continue;
		}
		if (copy.rc != 0) {
			fprintf(out, "  %s: probe failed: %s\n", e[i]->name, weft_strerror(copy.rc));
			continue;
		}
		fprintf(out, "  %s: %d device(s)\n", e[i]->name, copy.n);
		for (int k = 0; k < copy.n; k++) {
			const struct weft_tp_device *d = &copy.devs[k];
			char lat[32], bw[32], cls[64] = "", mem[32] = "";
			if (d->latency_us > 0)
				snprintf(lat, sizeof(lat), "%.3g us", d->latency_us);
			else
				snprintf(lat, sizeof(lat), "unknown");
			if (d->bandwidth_gbps > 0)
				snprintf(bw, sizeof(bw), "%.3g GB/s", d->bandwidth_gbps);
			else
				snprintf(bw, sizeof(bw), "unknown");
			for (int c = 0; c < WEFT_PEER_CLASS_COUNT; c++)
				if (d->peer_classes & (1u << c))
					snprintf(cls + strlen(cls), sizeof(cls) - strlen(cls), "%s%s", cls[0] ? "," : "",
						 class_names[c]);
			for (int m = 0; m < WEFT_MEM_TYPE_COUNT; m++)
				if (d->mem_types & (1u << m))
					snprintf(mem + strlen(mem), sizeof(mem) - strlen(mem), "%s%s", mem[0] ? "," : "",
						 mem_names[m]);
			int numa = dev_numa(d);
			char where[96];
			if (numa >= 0)
				snprintf(where, sizeof(where), "NUMA node %d (%s, distance x%.2g)", numa,
					 d->numa_node >= 0 ? "reported" : "hwloc, from the PCI path", hw_numa_factor(numa));
			else
				snprintf(where, sizeof(where), "NUMA node unknown");
			fprintf(out, "    %-24s link %-8s latency %-10s bandwidth %-12s %s%s%s\n", d->name,
				d->link[0] ? d->link : "?", lat, bw, where, d->pci_path[0] ? " pci " : "", d->pci_path);
			fprintf(out, "      reaches %s peers; memory %s\n", cls[0] ? cls : "no", mem[0] ? mem : "none");
		}
	}
	if (!any)
		fprintf(out, "  (no transport loaded)\n");
}
