// CRC-32 (the zlib/IEEE polynomial, bit-reflected) folded with carry-less multiplication, after
// Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ" and Chromium's zlib
// (crc32_simd.c). zlib 1.2.x computes it a byte table at a time, which made the checksum the
// largest single cost of small BLIP messages; this is several times faster. Tails shorter than
// 16 bytes go through a byte table here rather than back to zlib, whose per-call setup cost
// more than the few bytes themselves.
#include "ferry_system.h"

/// The byte-at-a-time table for the reflected polynomial 0xEDB88320, filled before main.
static uint32_t crc_table[256];

__attribute__((constructor))
static void crc_table_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

static uint32_t crc32_bytes(uint32_t crc, const uint8_t *buf, size_t len) {
    crc = ~crc;
    while (len--) crc = crc_table[(crc ^ *buf++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#include <smmintrin.h>
#include <wmmintrin.h>

__attribute__((target("sse4.1,pclmul")))
static uint32_t crc32_fold(const uint8_t *buf, size_t len, uint32_t crc) {
    // Folding constants for the reflected polynomial 0x104C11DB7 (Intel's paper, appendix).
    static const uint64_t __attribute__((aligned(16))) k1k2[] = { 0x0154442bd4, 0x01c6e41596 };
    static const uint64_t __attribute__((aligned(16))) k3k4[] = { 0x01751997d0, 0x00ccaa009e };
    static const uint64_t __attribute__((aligned(16))) k5k0[] = { 0x0163cd6124, 0x0000000000 };
    static const uint64_t __attribute__((aligned(16))) poly[] = { 0x01db710641, 0x01f7011641 };
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = _mm_load_si128((const __m128i *)k1k2);
    buf += 64;
    len -= 64;

    // Four lanes of 64 bytes folded in parallel.
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }

    // Fold the four lanes into one.
    x0 = _mm_load_si128((const __m128i *)k3k4);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);

    // Remaining 16-byte blocks.
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }

    // 128 → 64 bits.
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = _mm_loadl_epi64((const __m128i *)k5k0);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);

    // Barrett reduction to 32 bits.
    x0 = _mm_load_si128((const __m128i *)poly);
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int crc32_fold_supported(void) {
    // Checked once; racing first calls compute and store the same answer (atomically).
    static int cached = -1;
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        __builtin_cpu_init();
        c = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

size_t ferry_crc32_prefix(uint32_t *crc, const uint8_t *buf, size_t len) {
    if (len >= 64 && crc32_fold_supported()) {
        size_t n = len & ~(size_t)15;
        *crc = ~crc32_fold(buf, n, ~*crc);
        if (len - n == 0) return len;
        *crc = crc32_bytes(*crc, buf + n, len - n);
        return len;
    }
    // Short input: the table is cheaper than a call into zlib; long input without PCLMULQDQ
    // is left to zlib's faster braided code.
    if (len < 64) { *crc = crc32_bytes(*crc, buf, len); return len; }
    return 0;
}
#else
size_t ferry_crc32_prefix(uint32_t *crc, const uint8_t *buf, size_t len) {
    if (len < 64) { *crc = crc32_bytes(*crc, buf, len); return len; }
    return 0;
}
#endif
