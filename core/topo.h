/* SPDX-License-Identifier: Apache-2.0 */
/* Topology: what each transport's probe reports (devices, link, latency,
 * bandwidth, NUMA node, PCI path, memory types and peer classes reached),
 * NUMA and PCI locality from hwloc when the core was built with it, NVLink
 * state from NVML when libnvidia-ml.so.1 is present at run time, and the
 * score a transport gets for one peer class and memory type. */
#ifndef WEFT_CORE_TOPO_H
#define WEFT_CORE_TOPO_H

#include <stdio.h>

#include <weft/plugin.h>
#include <weft/weft.h>

#include "peer.h"

/* The test hook: when set (also to ""), its text replaces what NVML and CUDA
 * would say about this rank's GPU. Read by topo.c only; see docs/configuration.md. */
#define WEFT__FAKE_NVML_ENV "WEFT_TEST_FAKE_NVML"

/* The message size a score is the estimated transfer time of: large enough
 * that bandwidth counts, small enough that latency still does. */
#define WEFT__SCORE_BYTES (64u << 10)
/* What a device that leaves latency or bandwidth at 0 ("unknown") is assumed
 * to have: a figure no real interconnect is worse than by much, so a
 * transport that declares its properties beats one that declares none. */
#define WEFT__ASSUMED_LAT_US 10.0
#define WEFT__ASSUMED_BW_GBPS 1.0

/* What NVML says joins this rank's GPU to one peer's: links 0 when nothing
 * (or when unknown); link_gbps the one-way bandwidth of one link of that
 * NVLink generation (the lower of the two GPUs'). */
struct weft__gpu_link {
	int links;
	double link_gbps;
	int via_switch; /* the links go through NVSwitch, not GPU to GPU */
};

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
	int nvlinks;        /* bandwidth from NVML's link count (gl->links x gl->link_gbps) */
};

/* Scores transport `ops` for a peer of class cls and memory type mem; gl (may
 * be NULL) is what joins the two GPUs: for a same-gpu-link peer a device whose
 * link is "nvlink" gets gl->links x gl->link_gbps as its bandwidth. Probes
 * once per process per transport (devices do not change under a running job,
 * and probing may be slow). A transport without a probe op, or whose probe
 * fails, gets the assumed figures (reach 1, probed 0): it is offered, but
 * after every transport that declares better. Thread safety: any thread. */
void weft__topo_score(const struct weft_transport_ops *ops, enum weft_peer_class cls, enum weft_mem_type mem,
		      const struct weft__gpu_link *gl, struct weft__tp_score *out);

/* Whether a probed device of transport `ops` declares memory of type mem: 1
 * yes, 0 no, -1 unknown (no probe op, or the probe failed). Probes as
 * weft__topo_score does. Thread safety: any thread. */
int weft__topo_declares_mem(const struct weft_transport_ops *ops, enum weft_mem_type mem);
/* The memory types its probed devices declare, OR-ed (bit 1 << type) into
 * *mask: 0, or -1 when unknown (no probe op, or the probe failed; *mask is 0). */
int weft__topo_declared_mems(const struct weft_transport_ops *ops, uint32_t *mask);

/* One line saying how the score came about, for logs and weft-info --select. */
void weft__topo_score_text(const struct weft__tp_score *s, char *buf, size_t len);

/* Exported for weft-info --topo (not API): prints this process's NUMA view
 * (hwloc, or "built without hwloc"), every loaded transport's probed devices
 * with their NUMA node and distance, and the NVLink state (NVML, or "no NVML").
 * Thread safety: any thread. */
void weft__topo_print(FILE *out);

/* ---- the GPU-link domain of a communicator ----
 * At creation every rank reads its GPU's facts (the GPU of the CUDA context
 * current on the creating thread, when libcuda is already loaded in the
 * process, and NVML's NVLink state of that GPU; or the test hook) and the
 * ranks allgather them. Collective: every rank of comm calls it once, after
 * the consistency check. Returns 0 (also when no rank has a GPU), or the
 * bootstrap's error, -ENOMEM, -WEFT_ERR_PROTOCOL (a malformed record). */
int weft__topo_comm_attach(weft_comm_t *comm);
/* Forgets comm's facts (at destroy). Accepts a comm never attached. */
void weft__topo_comm_detach(const weft_comm_t *comm);
/* What joins this rank's GPU to peer's, in comm (links 0: nothing known).
 * Only meaningful for a peer on this host, in another process. */
void weft__topo_gpu_link(const weft_comm_t *comm, int peer, struct weft__gpu_link *out);
/* One line about this rank's GPU facts in comm, for weft-info --select:
 * where they come from, or why there are none. */
void weft__topo_gpu_text(const weft_comm_t *comm, char *buf, size_t len);

#endif
