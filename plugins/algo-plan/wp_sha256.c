/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: SHA-256 through the core's own implementation (core/sha256.c,
 * self-contained, compiled into whatever builds this file), so the project
 * carries one SHA-256, the one the bootstrap's vectors test. */
#include "sha256.h"
#include "wp_sha256.h"

_Static_assert(WP_SHA256_BYTES == WEFT_SHA256_BYTES, "one digest size");

void wp_sha256(const void *data, size_t len, unsigned char out[WP_SHA256_BYTES])
{
	weft__sha256(data, len, out);
}

void wp_sha256_hex(const unsigned char digest[WP_SHA256_BYTES], char out[2 * WP_SHA256_BYTES + 1])
{
	static const char hex[] = "0123456789abcdef";
	for (int k = 0; k < WP_SHA256_BYTES; k++) {
		out[2 * k] = hex[digest[k] >> 4];
		out[2 * k + 1] = hex[digest[k] & 15];
	}
	out[2 * WP_SHA256_BYTES] = 0;
}
