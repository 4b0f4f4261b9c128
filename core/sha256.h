/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104): the bootstrap's only
 * cryptography, small enough to carry instead of depending on a TLS library. */
#ifndef WEFT_CORE_SHA256_H
#define WEFT_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define WEFT_SHA256_BYTES 32
#define WEFT_SHA256_BLOCK 64

struct weft__sha256 {
	uint32_t h[8];
	uint64_t bytes;                  /* total length hashed so far */
	uint8_t buf[WEFT_SHA256_BLOCK];  /* partial block */
	size_t have;
};

void weft__sha256_init(struct weft__sha256 *c);
void weft__sha256_update(struct weft__sha256 *c, const void *data, size_t len);
void weft__sha256_final(struct weft__sha256 *c, uint8_t out[WEFT_SHA256_BYTES]);
void weft__sha256(const void *data, size_t len, uint8_t out[WEFT_SHA256_BYTES]);

/* Incremental HMAC-SHA256: init with the key, update with the message, final. */
struct weft__hmac {
	struct weft__sha256 inner;
	struct weft__sha256 outer;
};

void weft__hmac_init(struct weft__hmac *h, const void *key, size_t keylen);
void weft__hmac_update(struct weft__hmac *h, const void *data, size_t len);
void weft__hmac_final(struct weft__hmac *h, uint8_t out[WEFT_SHA256_BYTES]);
void weft__hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
		       uint8_t out[WEFT_SHA256_BYTES]);

/* Compares n bytes in time independent of where they differ, so that a MAC
 * check leaks nothing about how much of a forgery was right. 1 if equal. */
int weft__ct_equal(const void *a, const void *b, size_t n);

#endif
