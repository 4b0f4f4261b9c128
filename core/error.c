/* SPDX-License-Identifier: Apache-2.0 */
/* Error names and the library version: the two things every caller can ask
 * without a communicator. */
#include <errno.h>
#include <string.h>

#include <weft/weft.h>

WEFT_API const char *weft_strerror(int err)
{
	switch (-err) {
	case 0: return "success";
	case WEFT_ERR_PLUGIN: return "plugin could not be loaded or is missing";
	case WEFT_ERR_ABI: return "plugin ABI major mismatch";
	case WEFT_ERR_CONFIG: return "invalid configuration";
	case WEFT_ERR_PEER: return "peer failed";
	case WEFT_ERR_ABORTED: return "communicator aborted";
	case WEFT_ERR_PROTOCOL: return "malformed message from a peer";
	case WEFT_ERR_AUTH: return "peer failed authentication";
	case WEFT_ERR_TRANSPORT: return "transport failure";
	case WEFT_ERR_NO_DEVICE: return "no device";
	case WEFT_ERR_MISMATCH: return "ranks disagree";
	default: break;
	}
	if (err < 0 && -err < WEFT_ERR_FIRST) {
		/* strerror's table is process-wide and constant on glibc for known codes;
		 * strerrordesc_np would be the reentrant spelling but is glibc-only. */
		return strerror(-err);
	}
	return "unknown error";
}

WEFT_API int weft_get_version(void)
{
	return WEFT_VERSION_CODE;
}
