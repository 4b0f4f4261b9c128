/* SPDX-License-Identifier: Apache-2.0 */
/* algo-plan: SHA-256, one call over a buffer held whole in memory. */
#include <stdint.h>
#include <string.h>

#include <weft/kit.h>

#include "wp_sha256.h"

static const uint32_t k256[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n)
{
	return x >> n | x << (32 - n);
}

/* SHA-256 words are big-endian: the kit's little-endian access, swapped. */
static void compress(uint32_t h[8], const unsigned char *blk)
{
	uint32_t w[64], s[8];
	int t;

	for (t = 0; t < 16; t++)
		w[t] = __builtin_bswap32(weft_kit_le_get32(blk + 4 * t));
	for (t = 16; t < 64; t++) {
		uint32_t s0 = ror(w[t - 15], 7) ^ ror(w[t - 15], 18) ^ w[t - 15] >> 3;
		uint32_t s1 = ror(w[t - 2], 17) ^ ror(w[t - 2], 19) ^ w[t - 2] >> 10;
		w[t] = w[t - 16] + s0 + w[t - 7] + s1;
	}
	memcpy(s, h, sizeof(s));
	for (t = 0; t < 64; t++) {
		uint32_t t1 = s[7] + (ror(s[4], 6) ^ ror(s[4], 11) ^ ror(s[4], 25)) + ((s[4] & s[5]) ^ (~s[4] & s[6])) +
			      k256[t] + w[t];
		uint32_t t2 = (ror(s[0], 2) ^ ror(s[0], 13) ^ ror(s[0], 22)) +
			      ((s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]));
		memmove(s + 1, s, 7 * sizeof(s[0]));
		s[4] += t1;
		s[0] = t1 + t2;
	}
	for (t = 0; t < 8; t++)
		h[t] += s[t];
}

void wp_sha256(const void *data, size_t len, unsigned char out[WP_SHA256_BYTES])
{
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	const unsigned char *p = data;
	unsigned char tail[128];
	size_t full = len & ~(size_t)63, rest = len - full;

	for (size_t off = 0; off < full; off += 64)
		compress(h, p + off);
	/* The padding: 0x80, zeros, and the length in bits in the last 8 bytes,
	 * in one block or two. */
	memset(tail, 0, sizeof(tail));
	if (rest)
		memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	size_t nt = rest < 56 ? 64 : 128;
	weft_kit_le_put64(tail + nt - 8, __builtin_bswap64((uint64_t)len * 8));
	compress(h, tail);
	if (nt == 128)
		compress(h, tail + 64);
	for (int t = 0; t < 8; t++)
		weft_kit_le_put32(out + 4 * t, __builtin_bswap32(h[t]));
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
