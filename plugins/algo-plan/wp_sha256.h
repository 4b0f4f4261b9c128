/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: SHA-256 (FIPS 180-4) of a plan file's bytes, which the ranks
 * will compare at communicator creation. A plugin cannot link the core, so
 * whatever builds wp_sha256.c compiles core/sha256.c in beside it. */
#ifndef WP_SHA256_H
#define WP_SHA256_H

#include <stddef.h>

#define WP_SHA256_BYTES 32

/* The digest of len bytes at data into out. Thread safety: any thread. */
void wp_sha256(const void *data, size_t len, unsigned char out[WP_SHA256_BYTES]);

/* out (65 bytes) gets the digest in lower-case hex, as sha256sum prints it. */
void wp_sha256_hex(const unsigned char digest[WP_SHA256_BYTES], char out[2 * WP_SHA256_BYTES + 1]);

#endif
