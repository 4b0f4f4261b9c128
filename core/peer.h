/* SPDX-License-Identifier: Apache-2.0 */
/* Peer classes as the core knows them: the plugin ABI's three and the core's
 * own refinement of same-host; a leaf that rules, topology and selection share. */
#ifndef WEFT_CORE_PEER_H
#define WEFT_CORE_PEER_H

#include <weft/plugin.h>

/* The core's own peer class beyond the plugin ABI's three: another process on
 * this host whose GPU is joined to this rank's GPU by NVLink (directly or
 * through NVSwitch), as NVML reports. It refines same-host: transports are
 * handed such a peer as same-host, and a device that reaches same-host peers
 * reaches these. */
#define WEFT__PEER_SAME_GPU_LINK WEFT_PEER_SAME_GPU_LINK /* plugin.h names it for packs */
#define WEFT__PEER_CLASSES (WEFT_PEER_CLASS_COUNT + 1)

/* "same-process", "same-host", "other-host", "same-gpu-link"; "?" otherwise. */
const char *weft__peer_class_name(int cls);

#endif
