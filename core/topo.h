/* Topology: what each transport's probe reports (devices, link, latency,
 * bandwidth, NUMA node, PCI path, memory types and peer classes reached),
 * NUMA and PCI locality from hwloc when the core was built with it, NVLink
 * state from NVML when libnvidia-ml.so.1 is present at run time, and the
 * score a transport gets for one peer class and memory type. */
#ifndef WEFT_CORE_TOPO_H
#define WEFT_CORE_TOPO_H

#include <stdio.h>

#include <weft/plugin.h>

/* The message size a score is the estimated transfer time of: large enough
 * that bandwidth counts, small enough that latency still does. */
#define WEFT__SCORE_BYTES (64u << 10)
/* What a device that leaves latency or bandwidth at 0 ("unknown") is assumed
 * to have: a figure no real interconnect is worse than by much, so a
 * transport that declares its properties beats one that declares none. */
#define WEFT__ASSUMED_LAT_US 10.0
#define WEFT__ASSUMED_BW_GBPS 1.0

/* How well one transport reaches one peer class with one memory type, from
 * the best of its probed devices (the lowest score). */
struct weft__tp_score {
	int probed;         /* the transport has a probe op and it answered */
	int reach;          /* a probed device reaches the class and memory type */
	double lat_us;      /* the device's figure, or the assumed one */
	double bw_gbps;
	int lat_known, bw_known;
	double numa_factor; /* hwloc distance of the device's NUMA node from this process, 1 = local */
	double score_us;    /* lat*f + WEFT__SCORE_BYTES/(bw/f); lower is better; 1e18 when !reach */
	char dev[64];
	char link[32];
};

/* Scores transport `ops` for a peer of class cls and memory type mem. Probes
 * once per process per transport (devices do not change under a running job,
 * and probing may be slow). A transport without a probe op, or whose probe
 * fails, gets the assumed figures (reach 1, probed 0): it is offered, but
 * after every transport that declares better. Thread safety: any thread. */
void weft__topo_score(const struct weft_transport_ops *ops, enum weft_peer_class cls, enum weft_mem_type mem,
		      struct weft__tp_score *out);

/* One line saying how the score came about, for logs and weft-info --select. */
void weft__topo_score_text(const struct weft__tp_score *s, char *buf, size_t len);

/* Exported for weft-info --topo (not API): prints this process's NUMA view
 * (hwloc, or "built without hwloc"), every loaded transport's probed devices
 * with their NUMA node and distance, and the NVLink state (NVML, or "no NVML").
 * Thread safety: any thread. */
WEFT_API void weft__topo_print(FILE *out);

#endif
