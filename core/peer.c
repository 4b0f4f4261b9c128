/* SPDX-License-Identifier: Apache-2.0 */
/* Names of the peer classes (peer.h). */
#include "peer.h"

const char *weft__peer_class_name(int cls)
{
	static const char *const names[WEFT__PEER_CLASSES] = {"same-process", "same-host", "other-host",
							      "same-gpu-link"};
	return cls >= 0 && cls < WEFT__PEER_CLASSES ? names[cls] : "?";
}
