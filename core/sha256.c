/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 and HMAC-SHA256, portable C, written from FIPS 180-4 and RFC 2104.
 * Speed matters little: it authenticates bootstrap control messages only. */
#include <string.h>

#include "sha256.h"

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t h[8], const uint8_t *p)
{
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
		       (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = k + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		k = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
	h[5] += f;
	h[6] += g;
	h[7] += k;
}

void weft__sha256_init(struct weft__sha256 *c)
{
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
				       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(c->h, iv, sizeof(iv));
	c->bytes = 0;
	c->have = 0;
}

void weft__sha256_update(struct weft__sha256 *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	c->bytes += len;
	if (c->have) {
		size_t take = WEFT_SHA256_BLOCK - c->have;
		if (take > len)
			take = len;
		memcpy(c->buf + c->have, p, take);
		c->have += take;
		p += take;
		len -= take;
		if (c->have < WEFT_SHA256_BLOCK)
			return;
		compress(c->h, c->buf);
		c->have = 0;
	}
	for (; len >= WEFT_SHA256_BLOCK; p += WEFT_SHA256_BLOCK, len -= WEFT_SHA256_BLOCK)
		compress(c->h, p);
	memcpy(c->buf, p, len);
	c->have = len;
}

void weft__sha256_final(struct weft__sha256 *c, uint8_t out[WEFT_SHA256_BYTES])
{
	uint64_t bits = c->bytes * 8;
	c->buf[c->have++] = 0x80;
	if (c->have > 56) {
		memset(c->buf + c->have, 0, WEFT_SHA256_BLOCK - c->have);
		compress(c->h, c->buf);
		c->have = 0;
	}
	memset(c->buf + c->have, 0, 56 - c->have);
	for (int i = 0; i < 8; i++)
		c->buf[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
	compress(c->h, c->buf);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(c->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)c->h[i];
	}
	memset(c, 0, sizeof(*c));
}

void weft__sha256(const void *data, size_t len, uint8_t out[WEFT_SHA256_BYTES])
{
	struct weft__sha256 c;
	weft__sha256_init(&c);
	weft__sha256_update(&c, data, len);
	weft__sha256_final(&c, out);
}

void weft__hmac_init(struct weft__hmac *h, const void *key, size_t keylen)
{
	uint8_t k[WEFT_SHA256_BLOCK] = {0};
	uint8_t pad[WEFT_SHA256_BLOCK];
	/* RFC 2104: keys longer than a block are hashed first. */
	if (keylen > WEFT_SHA256_BLOCK)
		weft__sha256(key, keylen, k);
	else if (keylen)
		memcpy(k, key, keylen);
	for (int i = 0; i < WEFT_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	weft__sha256_init(&h->inner);
	weft__sha256_update(&h->inner, pad, sizeof(pad));
	for (int i = 0; i < WEFT_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	weft__sha256_init(&h->outer);
	weft__sha256_update(&h->outer, pad, sizeof(pad));
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
}

void weft__hmac_update(struct weft__hmac *h, const void *data, size_t len)
{
	weft__sha256_update(&h->inner, data, len);
}

void weft__hmac_final(struct weft__hmac *h, uint8_t out[WEFT_SHA256_BYTES])
{
	uint8_t ih[WEFT_SHA256_BYTES];
	weft__sha256_final(&h->inner, ih);
	weft__sha256_update(&h->outer, ih, sizeof(ih));
	weft__sha256_final(&h->outer, out);
}

void weft__hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
		       uint8_t out[WEFT_SHA256_BYTES])
{
	struct weft__hmac h;
	weft__hmac_init(&h, key, keylen);
	weft__hmac_update(&h, data, len);
	weft__hmac_final(&h, out);
}

int weft__ct_equal(const void *a, const void *b, size_t n)
{
	const volatile uint8_t *x = a, *y = b;
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
