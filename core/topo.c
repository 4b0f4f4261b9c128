/* SPDX-License-Identifier: Apache-2.0 */
/* Topology: transports' probed devices (cached per process), NUMA locality
 * from hwloc (optional at build time), NVLink state from NVML (dlopen'ed at run
 * time where present) and each communicator's GPU-link domain built from it,
 * and the per-peer-class score that transport choice uses. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#ifdef WEFT_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "base.h"
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
		      const struct weft__gpu_link *gl, struct weft__tp_score *out)
{
	/* A GPU-linked peer is on this host: devices reach it as a same-host peer. */
	enum weft_peer_class reach_cls = cls == WEFT__PEER_SAME_GPU_LINK ? WEFT_PEER_SAME_HOST : cls;
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
			if ((unsigned)reach_cls >= 32 || !(d->peer_classes & (1u << reach_cls)) || (unsigned)mem >= 32 ||
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
			/* Between two GPUs that NVML shows joined, an NVLink device moves
			 * data over those links: what it declares (one figure for every
			 * peer) yields to their count times the per-link rate. */
			if (cls == WEFT__PEER_SAME_GPU_LINK && gl && gl->links > 0 && gl->link_gbps > 0 &&
			    strcasecmp(d->link, "nvlink") == 0) {
				s.bw_gbps = gl->links * gl->link_gbps;
				s.bw_known = 1;
				s.nvlinks = gl->links;
			}
			/* A device on a remote NUMA node pays the distance both ways:
			 * longer to reach, less bandwidth across the socket link. */
			s.numa_factor = reach_cls == WEFT_PEER_OTHER_HOST || reach_cls == WEFT_PEER_SAME_HOST
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

int weft__topo_declared_mems(const struct weft_transport_ops *ops, uint32_t *mask)
{
	pthread_mutex_lock(&probe_lock);
	const struct probed *p = probe_get(ops);
	int r = !p || p->rc != 0 ? -1 : 0;
	*mask = 0;
	for (int i = 0; r == 0 && i < p->n; i++)
		*mask |= p->devs[i].mem_types;
	pthread_mutex_unlock(&probe_lock);
	return r;
}

int weft__topo_declares_mem(const struct weft_transport_ops *ops, enum weft_mem_type mem)
{
	uint32_t mask;
	if (weft__topo_declared_mems(ops, &mask) != 0)
		return -1;
	return (unsigned)mem < 32 && (mask & (1u << mem)) ? 1 : 0;
}

void weft__topo_score_text(const struct weft__tp_score *s, char *buf, size_t len)
{
	if (!s->reach) {
		snprintf(buf, len, "no probed device reaches this peer class and memory type");
		return;
	}
	char numa[48] = "", bw[64] = "";
	if (s->numa_factor > 1.0)
		snprintf(numa, sizeof(numa), ", NUMA distance x%.2g", s->numa_factor);
	if (s->nvlinks > 0)
		snprintf(bw, sizeof(bw), " (%d NVLinks x %.3g GB/s, NVML)", s->nvlinks, s->bw_gbps / s->nvlinks);
	else if (!s->bw_known)
		snprintf(bw, sizeof(bw), " (assumed)");
	snprintf(buf, len, "score %.3g us for %u KiB: device %s%s%s%s, latency %.3g us%s, %.3g GB/s%s%s", s->score_us,
		 WEFT__SCORE_BYTES >> 10, s->dev, s->link[0] ? " (" : "", s->link, s->link[0] ? ")" : "", s->lat_us,
		 s->lat_known ? "" : " (assumed)", s->bw_gbps, bw, numa);
}

/* ------------------------------------------------------------------- NVML
 * NVLink connectivity, which hwloc does not see. The library comes with the
 * NVIDIA driver: it is opened at run time only, never linked, and the struct
 * and constants below are the documented ones of nvml.h (v2/v3 entry points). */
#define NVML_OK 0
#define NVML_LINKS 18
#define NVML_REMOTE_SWITCH 2 /* NVML_NVLINK_DEVICE_TYPE_SWITCH */

struct nvml_pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

struct nvml {
	void *h;
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned *);
	int (*by_index)(unsigned, void **);
	int (*by_bus)(const char *, void **);
	int (*pci)(void *, struct nvml_pci *);
	int (*state)(void *, unsigned, int *);
	int (*remote)(void *, unsigned, struct nvml_pci *);
	int (*remote_type)(void *, unsigned, int *); /* optional (newer drivers) */
	int (*version)(void *, unsigned, unsigned *); /* optional */
};

/* Opens and initializes NVML. Returns 0, or writes why not into why. */
static int nvml_open(struct nvml *n, char *why, size_t len)
{
	memset(n, 0, sizeof(*n));
	n->h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->h) {
		snprintf(why, len, "no NVML (libnvidia-ml.so.1 not found)");
		return -ENOENT;
	}
	n->init = (int (*)(void))dlsym(n->h, "nvmlInit_v2");
	n->shutdown = (int (*)(void))dlsym(n->h, "nvmlShutdown");
	n->count = (int (*)(unsigned *))dlsym(n->h, "nvmlDeviceGetCount_v2");
	n->by_index = (int (*)(unsigned, void **))dlsym(n->h, "nvmlDeviceGetHandleByIndex_v2");
	n->by_bus = (int (*)(const char *, void **))dlsym(n->h, "nvmlDeviceGetHandleByPciBusId_v2");
	n->pci = (int (*)(void *, struct nvml_pci *))dlsym(n->h, "nvmlDeviceGetPciInfo_v3");
	n->state = (int (*)(void *, unsigned, int *))dlsym(n->h, "nvmlDeviceGetNvLinkState");
	n->remote = (int (*)(void *, unsigned, struct nvml_pci *))dlsym(n->h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	n->remote_type = (int (*)(void *, unsigned, int *))dlsym(n->h, "nvmlDeviceGetNvLinkRemoteDeviceType");
	n->version = (int (*)(void *, unsigned, unsigned *))dlsym(n->h, "nvmlDeviceGetNvLinkVersion");
	if (!n->init || !n->shutdown || !n->count || !n->by_index || !n->by_bus || !n->pci || !n->state ||
	    !n->remote) {
		snprintf(why, len, "NVML lacks the entry points weft uses");
		dlclose(n->h);
		return -ENOSYS;
	}
	int rc = n->init();
	if (rc != NVML_OK) {
		const char *(*name)(int) = (const char *(*)(int))dlsym(n->h, "nvmlErrorString");
		const char *s = name ? name(rc) : NULL;
		if (s)
			snprintf(why, len, "NVML did not initialize: %s", s);
		else
			snprintf(why, len, "NVML did not initialize (NVML error %d)", rc);
		dlclose(n->h);
		return -EIO;
	}
	return 0;
}

static void nvml_close(struct nvml *n)
{
	n->shutdown();
	dlclose(n->h);
}

/* PCI addresses as one number: domain << 16 | bus << 8 | device << 3 | function. */
static int bus_parse(const char *s, uint64_t *out)
{
	unsigned dom = 0, bus = 0, dev = 0, fn = 0;
	int used = 0;
	if (!s)
		return -EINVAL;
	if (sscanf(s, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) != 4) {
		dom = 0;
		if (sscanf(s, "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3)
			return -EINVAL;
	}
	if (s[used] != '\0' || bus > 0xff || dev > 0x1f || fn > 7)
		return -EINVAL;
	*out = (uint64_t)dom << 16 | bus << 8 | dev << 3 | fn;
	return 0;
}

static void bus_text(uint64_t b, char *buf, size_t len)
{
	snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)(b >> 16), (unsigned)(b >> 8) & 0xff,
		 (unsigned)(b >> 3) & 0x1f, (unsigned)b & 7);
}

/* One link's one-way bandwidth by NVLink generation (NVML's version number):
 * 20 GB/s for NVLink 1, 25 for 2 to 4, 50 for 5; 25 when unknown. */
static double nvlink_gbps(unsigned version)
{
	if (version == 1)
		return 20.0;
	if (version >= 5 && version < 16)
		return 50.0;
	return 25.0;
}

static void nvml_print(FILE *out)
{
	const char *fake = getenv(WEFT__FAKE_NVML_ENV);
	if (fake) {
		fprintf(out, "nvlink: %s='%s' (a test hook) stands in for NVML and CUDA in communicators\n",
			WEFT__FAKE_NVML_ENV, fake);
		return;
	}
	struct nvml n;
	char why[128];
	if (nvml_open(&n, why, sizeof(why)) != 0) {
		fprintf(out, "nvlink: %s: NVLink connectivity unknown, no peer is same-gpu-link\n", why);
		return;
	}
	unsigned count = 0;
	if (n.count(&count) != NVML_OK)
		count = 0;
	fprintf(out, "nvlink (NVML): %u GPU(s)%s\n", count,
		count ? "" : ": no peer is same-gpu-link");
	for (unsigned g = 0; g < count; g++) {
		void *dev = NULL;
		struct nvml_pci me;
		memset(&me, 0, sizeof(me));
		if (n.by_index(g, &dev) != NVML_OK || n.pci(dev, &me) != NVML_OK)
			continue;
		me.bus_id[sizeof(me.bus_id) - 1] = '\0';
		int active = 0, to_switch = 0;
		unsigned version = 0;
		char peers[512] = "";
		for (unsigned l = 0; l < NVML_LINKS; l++) {
			int on = 0, type = -1;
			struct nvml_pci rp;
			if (n.state(dev, l, &on) != NVML_OK || !on)
				continue;
			active++;
			if (n.version && version == 0)
				(void)n.version(dev, l, &version);
			if (n.remote_type && n.remote_type(dev, l, &type) == NVML_OK && type == NVML_REMOTE_SWITCH) {
				to_switch++;
				continue;
			}
			memset(&rp, 0, sizeof(rp));
			if (n.remote(dev, l, &rp) == NVML_OK) {
				rp.bus_id[sizeof(rp.bus_id) - 1] = '\0';
				size_t used = strlen(peers);
				if (!strstr(peers, rp.bus_id) && used + strlen(rp.bus_id) + 2 < sizeof(peers))
					snprintf(peers + used, sizeof(peers) - used, "%s%s", used ? " " : "", rp.bus_id);
			}
		}
		char sw[48] = "", ver[48] = "";
		if (to_switch)
			snprintf(sw, sizeof(sw), " (%d to NVSwitch)", to_switch);
		if (version)
			snprintf(ver, sizeof(ver), ", NVLink %u (%.3g GB/s per link)", version, nvlink_gbps(version));
		fprintf(out, "  GPU%u %s: %d NVLink(s) active%s%s%s%s\n", g, me.bus_id, active, sw, ver,
			peers[0] ? ", to " : "", peers);
	}
	fprintf(out, "  ranks on this host whose GPUs these links join are same-gpu-link peers (a rank's GPU: "
		     "the one of the CUDA context current when it creates a communicator)\n");
	nvml_close(&n);
}

/* ------------------------------------------------ GPU facts of one rank
 * What ranks allgather at communicator creation. Ranks of one job run the
 * same core (the consistency check before compared versions), so the record
 * travels as this struct; every field is still checked on receipt. */
#define GF_MAGIC 0x4c474657u /* "WFGL" */
#define GF_PEERS NVML_LINKS

struct gpu_facts {
	uint32_t magic;
	uint32_t have;    /* 1: this rank's GPU is known */
	uint64_t bus;     /* its PCI address (bus_parse) */
	uint32_t version; /* NVLink version of its links, 0 unknown */
	uint32_t nswitch; /* active links to NVSwitch */
	uint32_t npeer;
	uint32_t pad;
	struct {
		uint64_t bus; /* a GPU at the other end of direct links */
		uint32_t links;
		uint32_t pad;
	} peer[GF_PEERS];
};

static void gf_add_peer(struct gpu_facts *f, uint64_t bus, unsigned links)
{
	for (uint32_t i = 0; i < f->npeer; i++)
		if (f->peer[i].bus == bus) {
			f->peer[i].links += links;
			return;
		}
	if (f->npeer < GF_PEERS) {
		f->peer[f->npeer].bus = bus;
		f->peer[f->npeer].links = links;
		f->npeer++;
	}
}

/* The test hook's text: "none", or words "gpu=<bus>" (required first),
 * "link=<bus>*<count>", "switch=<count>", "version=<n>". Returns 0 or
 * -EINVAL with the offending word named in why. */
static int gf_fake(const char *spec, struct gpu_facts *f, char *why, size_t len)
{
	char *copy = strdup(spec), *save = NULL;
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	for (char *w = strtok_r(copy, " \t,", &save); w && rc == 0; w = strtok_r(NULL, " \t,", &save)) {
		char *eq = strchr(w, '=');
		char *end = NULL;
		if (strcmp(w, "none") == 0) {
			continue;
		} else if (eq && strncmp(w, "gpu=", 4) == 0) {
			rc = bus_parse(eq + 1, &f->bus);
			f->have = rc == 0;
		} else if (eq && strncmp(w, "link=", 5) == 0 && f->have) {
			char *star = strchr(eq + 1, '*');
			uint64_t b = 0;
			unsigned long k = 0;
			if (star) {
				*star = '\0';
				k = strtoul(star + 1, &end, 10);
			}
			if (!star || bus_parse(eq + 1, &b) != 0 || *end != '\0' || k < 1 || k > NVML_LINKS)
				rc = -EINVAL;
			else
				gf_add_peer(f, b, (unsigned)k);
		} else if (eq && (strncmp(w, "switch=", 7) == 0 || strncmp(w, "version=", 8) == 0) && f->have) {
			unsigned long k = strtoul(eq + 1, &end, 10);
			if (eq[1] == '\0' || *end != '\0' || k > NVML_LINKS * 4)
				rc = -EINVAL;
			else if (w[0] == 's')
				f->nswitch = (uint32_t)k;
			else
				f->version = (uint32_t)k;
		} else {
			rc = -EINVAL;
		}
		if (rc != 0)
			snprintf(why, len, "%s: cannot read '%s' (want gpu=<pci bus id> first, then link=<bus id>*<n>, "
				 "switch=<n>, version=<n>; or none)", WEFT__FAKE_NVML_ENV, w);
	}
	free(copy);
	return rc;
}

/* The PCI address of the GPU of the CUDA context current on this thread.
 * Only when the process has loaded libcuda itself: the core never starts
 * CUDA in a process that does not use it. */
static int cuda_current_bus(uint64_t *bus, char *why, size_t len)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h) {
		snprintf(why, len, "this process has not loaded CUDA");
		return -ENODEV;
	}
	int (*get_device)(int *) = (int (*)(int *))dlsym(h, "cuCtxGetDevice");
	int (*pci_id)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetPCIBusId");
	int dev = -1, rc = -ENODEV;
	char id[32] = "";
	if (!get_device || !pci_id)
		snprintf(why, len, "libcuda lacks cuCtxGetDevice/cuDeviceGetPCIBusId");
	else if (get_device(&dev) != 0)
		snprintf(why, len, "no CUDA context is current on the thread that created the communicator");
	else if (pci_id(id, (int)sizeof(id), dev) != 0 || bus_parse(id, bus) != 0)
		snprintf(why, len, "CUDA gave no PCI address for device %d", dev);
	else
		rc = 0;
	dlclose(h);
	return rc;
}

#define GF_CACHE 16 /* GPUs per host, with room */
static pthread_mutex_t gf_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct gpu_facts f;
	char text[320];
} gf_cache[GF_CACHE];
static int gf_cache_n;

/* This rank's facts, and one line saying where they come from. */
static void gf_local(struct gpu_facts *f, char *text, size_t len)
{
	memset(f, 0, sizeof(*f));
	f->magic = GF_MAGIC;
	const char *fake = getenv(WEFT__FAKE_NVML_ENV);
	char why[256] = "";
	if (fake) {
		if (gf_fake(fake, f, why, sizeof(why)) != 0) {
			WEFT_WARN("%s; this rank has no GPU facts", why);
			memset(f, 0, sizeof(*f));
			f->magic = GF_MAGIC;
			snprintf(text, len, "none: %s", why);
		} else {
			snprintf(text, len, "from the test hook %s='%s'", WEFT__FAKE_NVML_ENV, fake);
		}
		return;
	}
	uint64_t bus = 0;
	if (cuda_current_bus(&bus, why, sizeof(why)) != 0) {
		snprintf(text, len, "none known (%s)", why);
		return;
	}
	/* NVLinks do not change under a running job, and NVML's start-up can
	 * take a while: each GPU is read once per process. */
	pthread_mutex_lock(&gf_cache_lock);
	for (int i = 0; i < gf_cache_n; i++)
		if (gf_cache[i].f.bus == bus) {
			*f = gf_cache[i].f;
			snprintf(text, len, "%s", gf_cache[i].text);
			pthread_mutex_unlock(&gf_cache_lock);
			return;
		}
	pthread_mutex_unlock(&gf_cache_lock);
	char bt[24];
	bus_text(bus, bt, sizeof(bt));
	struct nvml n;
	if (nvml_open(&n, why, sizeof(why)) != 0) {
		snprintf(text, len, "GPU %s, links unknown (%s)", bt, why);
		return;
	}
	void *dev = NULL;
	if (n.by_bus(bt, &dev) != NVML_OK) {
		snprintf(text, len, "GPU %s, links unknown (NVML does not know that PCI address)", bt);
		nvml_close(&n);
		return;
	}
	f->have = 1;
	f->bus = bus;
	for (unsigned l = 0; l < NVML_LINKS; l++) {
		int on = 0, type = -1;
		struct nvml_pci rp;
		uint64_t rb = 0;
		if (n.state(dev, l, &on) != NVML_OK || !on)
			continue;
		if (n.version && f->version == 0)
			(void)n.version(dev, l, &f->version);
		if (n.remote_type && n.remote_type(dev, l, &type) == NVML_OK && type == NVML_REMOTE_SWITCH) {
			f->nswitch++;
			continue;
		}
		memset(&rp, 0, sizeof(rp));
		if (n.remote(dev, l, &rp) != NVML_OK)
			continue;
		rp.bus_id[sizeof(rp.bus_id) - 1] = '\0';
		if (bus_parse(rp.bus_id, &rb) == 0)
			gf_add_peer(f, rb, 1);
	}
	nvml_close(&n);
	snprintf(text, len, "GPU %s from NVML: %u direct peer GPU(s), %u link(s) to NVSwitch", bt, f->npeer,
		 f->nswitch);
	pthread_mutex_lock(&gf_cache_lock);
	if (gf_cache_n < GF_CACHE) {
		gf_cache[gf_cache_n].f = *f;
		snprintf(gf_cache[gf_cache_n].text, sizeof(gf_cache[gf_cache_n].text), "%s", text);
		gf_cache_n++;
	}
	pthread_mutex_unlock(&gf_cache_lock);
}

/* What joins GPUs a and b: links in either direction (the larger count, in
 * case one side's NVML saw fewer), else NVSwitch links both have (the fewer). */
static void gf_join(const struct gpu_facts *a, const struct gpu_facts *b, struct weft__gpu_link *out)
{
	memset(out, 0, sizeof(*out));
	if (!a->have || !b->have || a->bus == b->bus)
		return;
	unsigned ab = 0, ba = 0;
	for (uint32_t i = 0; i < a->npeer; i++)
		if (a->peer[i].bus == b->bus)
			ab += a->peer[i].links;
	for (uint32_t i = 0; i < b->npeer; i++)
		if (b->peer[i].bus == a->bus)
			ba += b->peer[i].links;
	unsigned v = a->version && b->version ? (a->version < b->version ? a->version : b->version)
					      : (a->version ? a->version : b->version);
	if (ab || ba) {
		out->links = (int)(ab > ba ? ab : ba);
	} else if (a->nswitch && b->nswitch) {
		out->links = (int)(a->nswitch < b->nswitch ? a->nswitch : b->nswitch);
		out->via_switch = 1;
	}
	if (out->links)
		out->link_gbps = nvlink_gbps(v);
}

/* ------------------------------------------------ per-communicator domain
 * The facts hang off the comm's address in this list rather than off struct
 * weft_comm, whose definition (base.h) this module does not own; comm.c
 * attaches at creation and detaches at destroy. */
struct gl_comm {
	const weft_comm_t *comm;
	int nranks;
	struct weft__gpu_link *link; /* per rank: what joins this rank's GPU to it */
	char text[384];
	struct gl_comm *next;
};

static pthread_mutex_t gl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gl_comm *gl_list;

int weft__topo_comm_attach(weft_comm_t *comm)
{
	struct gpu_facts mine;
	struct gl_comm *g = calloc(1, sizeof(*g));
	struct gpu_facts *all = calloc((size_t)comm->nranks, sizeof(*all));
	struct weft__gpu_link *link = calloc((size_t)comm->nranks, sizeof(*link));
	char text[sizeof(g->text) - 64];
	gf_local(&mine, text, sizeof(text));
	/* A rank without memory fails its creation; the others then see it
	 * leave through the bootstrap rather than wait for it. */
	int rc = all ? weft__bootstrap_allgather(comm->bs, &mine, all, sizeof(mine)) : -ENOMEM;
	if (rc == 0 && (!g || !link))
		rc = -ENOMEM;
	for (int r = 0; rc == 0 && r < comm->nranks; r++)
		if (all[r].magic != GF_MAGIC || all[r].have > 1 || all[r].npeer > GF_PEERS) {
			WEFT_ERROR("rank %d sent a malformed GPU-link record", r);
			rc = -WEFT_ERR_PROTOCOL;
		}
	if (rc != 0) {
		free(all);
		free(link);
		free(g);
		return rc;
	}
	const char *me_host = weft__bootstrap_host_id(comm->bs, comm->rank);
	uint64_t me_proc = weft__bootstrap_proc_id(comm->bs, comm->rank);
	int joined = 0;
	for (int p = 0; p < comm->nranks; p++) {
		const char *h = weft__bootstrap_host_id(comm->bs, p);
		if (p == comm->rank || weft__bootstrap_proc_id(comm->bs, p) == me_proc || !h || !me_host ||
		    strcmp(h, me_host) != 0)
			continue;
		gf_join(&all[comm->rank], &all[p], &link[p]);
		joined += link[p].links > 0;
	}
	free(all);
	g->comm = comm;
	g->nranks = comm->nranks;
	g->link = link;
	snprintf(g->text, sizeof(g->text), "%s; %d peer(s) joined by NVLink", text, joined);
	WEFT_DEBUG("GPU links: %s", g->text);
	pthread_mutex_lock(&gl_lock);
	g->next = gl_list;
	gl_list = g;
	pthread_mutex_unlock(&gl_lock);
	return 0;
}

void weft__topo_comm_detach(const weft_comm_t *comm)
{
	pthread_mutex_lock(&gl_lock);
	for (struct gl_comm **pp = &gl_list; *pp; pp = &(*pp)->next) {
		if ((*pp)->comm != comm)
			continue;
		struct gl_comm *g = *pp;
		*pp = g->next;
		free(g->link);
		free(g);
		break;
	}
	pthread_mutex_unlock(&gl_lock);
}

void weft__topo_gpu_link(const weft_comm_t *comm, int peer, struct weft__gpu_link *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&gl_lock);
	for (struct gl_comm *g = gl_list; g; g = g->next)
		if (g->comm == comm) {
			if (peer >= 0 && peer < g->nranks)
				*out = g->link[peer];
			break;
		}
	pthread_mutex_unlock(&gl_lock);
}

void weft__topo_gpu_text(const weft_comm_t *comm, char *buf, size_t len)
{
	snprintf(buf, len, "not gathered for this communicator");
	pthread_mutex_lock(&gl_lock);
	for (struct gl_comm *g = gl_list; g; g = g->next)
		if (g->comm == comm) {
			snprintf(buf, len, "%s", g->text);
			break;
		}
	pthread_mutex_unlock(&gl_lock);
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

static const char *mem_names[WEFT_MEM_TYPE_COUNT] = {"host", "cuda", "hip"};

void weft__topo_print(FILE *out)
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
						 weft__peer_class_name(c));
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
