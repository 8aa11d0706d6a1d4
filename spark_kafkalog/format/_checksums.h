/* The kernels' checksums, one implementation each, included by _decode.pyx and
   _encode.pyx (each extension compiles its own copy of these static functions):

   CRC-32C  (Castagnoli, reflected 0x82F63B78): v2 record batches. Hardware only
            (SSE4.2 + PCLMULQDQ, checked at run time by kl_crc32c_init); on other CPUs
            the callers use the crc32c package, which is also the tests' oracle.
   CRC-32   (IEEE 802.3, reflected 0xEDB88320), slicing by 8: legacy v0/v1 messages.
   xxHash32 LZ4 frame header, block and content checksums.

   Why this CRC-32C code (folding by carry-less multiplication from 64 bytes on) and
   the measurement behind it: docs/PERFORMANCE.md, "format/". */
#ifndef KL_CHECKSUMS_H
#define KL_CHECKSUMS_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>

/* each kernel uses some of these functions */
#if defined(__GNUC__) || defined(__clang__)
#define KL_MAYBE_UNUSED __attribute__((unused))
#else
#define KL_MAYBE_UNUSED
#endif

static inline uint32_t kl_le32(const uint8_t* p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
         | ((uint32_t)p[3] << 24);
}

/* ---- CRC-32C ------------------------------------------------------------------------
   Carry-less multiplication folds 64 bytes per step through four 128-bit accumulators
   (each step moves a lane 512 bits ahead: low half times x^(512+32), high half times
   x^(512-32), modulo P), the lanes are folded into one (128-bit steps), and SSE4.2's
   crc32 instruction reduces those 16 bytes and the tail. */
static int kl_crc32c_hw = 0;     /* set by kl_crc32c_init: kl_crc32c may be called */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <wmmintrin.h>
static uint64_t kl_k512lo, kl_k512hi, kl_k128lo, kl_k128hi;

static uint64_t kl_xpow(unsigned n) {
    /* x^n mod P, bit-reflected, shifted into the 33-bit form clmul folding needs */
    uint32_t v = 0x80000000u;
    while (n--) v = (v & 1u) ? (v >> 1) ^ 0x82F63B78u : v >> 1;
    return (uint64_t)v << 1;
}

KL_MAYBE_UNUSED static int kl_crc32c_init(void) {
    __builtin_cpu_init();
    kl_crc32c_hw = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
    kl_k512lo = kl_xpow(512 + 32); kl_k512hi = kl_xpow(512 - 32);
    kl_k128lo = kl_xpow(128 + 32); kl_k128hi = kl_xpow(128 - 32);
    return kl_crc32c_hw;
}

__attribute__((target("sse4.2,pclmul")))
static inline __m128i kl_crc_fold(__m128i x, __m128i k, __m128i d) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)), d);
}

/* CRC-32C of p[0..n) continuing from crc (0 to start), as crc32c.crc32c(data, crc) */
__attribute__((target("sse4.2,pclmul"))) KL_MAYBE_UNUSED
static uint32_t kl_crc32c(uint32_t crc, const uint8_t* p, size_t n) {
    uint64_t c = ~crc & 0xFFFFFFFFu, w;
    if (n >= 64) {
        __m128i k = _mm_set_epi64x((long long)kl_k512hi, (long long)kl_k512lo);
        /* the running CRC enters as the first 4 message bytes xor'ed in */
        __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i*)p),
                                   _mm_cvtsi32_si128((int)(uint32_t)c));
        __m128i x1 = _mm_loadu_si128((const __m128i*)(p + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i*)(p + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i*)(p + 48));
        p += 64; n -= 64;
        while (n >= 64) {
            x0 = kl_crc_fold(x0, k, _mm_loadu_si128((const __m128i*)p));
            x1 = kl_crc_fold(x1, k, _mm_loadu_si128((const __m128i*)(p + 16)));
            x2 = kl_crc_fold(x2, k, _mm_loadu_si128((const __m128i*)(p + 32)));
            x3 = kl_crc_fold(x3, k, _mm_loadu_si128((const __m128i*)(p + 48)));
            p += 64; n -= 64;
        }
        k = _mm_set_epi64x((long long)kl_k128hi, (long long)kl_k128lo);
        x0 = kl_crc_fold(x0, k, x1);
        x0 = kl_crc_fold(x0, k, x2);
        x0 = kl_crc_fold(x0, k, x3);
        while (n >= 16) {
            x0 = kl_crc_fold(x0, k, _mm_loadu_si128((const __m128i*)p));
            p += 16; n -= 16;
        }
        c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x0));
        c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x0, 1));
    }
    while (n >= 8) { memcpy(&w, p, 8); c = _mm_crc32_u64(c, w); p += 8; n -= 8; }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#else
KL_MAYBE_UNUSED static int kl_crc32c_init(void) { kl_crc32c_hw = 0; return 0; }
KL_MAYBE_UNUSED static uint32_t kl_crc32c(uint32_t crc, const uint8_t* p, size_t n) {
    (void)p; (void)n; return crc;       /* never called: kl_crc32c_hw is 0 */
}
#endif

/* ---- CRC-32 (IEEE), slicing by 8 ----------------------------------------------------- */
static uint32_t kl_crc32_tab[8][256];

KL_MAYBE_UNUSED static void kl_crc32_init(void) {
    uint32_t i, c;
    int k, t;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++) c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        kl_crc32_tab[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (t = 1; t < 8; t++)
            kl_crc32_tab[t][i] = (kl_crc32_tab[t - 1][i] >> 8)
                                 ^ kl_crc32_tab[0][kl_crc32_tab[t - 1][i] & 0xFFu];
}

KL_MAYBE_UNUSED static uint32_t kl_crc32(const uint8_t* p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = kl_le32(p) ^ c, hi = kl_le32(p + 4);
        c = kl_crc32_tab[7][lo & 0xFFu] ^ kl_crc32_tab[6][(lo >> 8) & 0xFFu]
          ^ kl_crc32_tab[5][(lo >> 16) & 0xFFu] ^ kl_crc32_tab[4][lo >> 24]
          ^ kl_crc32_tab[3][hi & 0xFFu] ^ kl_crc32_tab[2][(hi >> 8) & 0xFFu]
          ^ kl_crc32_tab[1][(hi >> 16) & 0xFFu] ^ kl_crc32_tab[0][hi >> 24];
        p += 8; n -= 8;
    }
    while (n--) c = kl_crc32_tab[0][(c ^ *p++) & 0xFFu] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- xxHash32 ------------------------------------------------------------------------ */
#define KL_XXP1 2654435761u
#define KL_XXP2 2246822519u
#define KL_XXP3 3266489917u
#define KL_XXP4 668265263u
#define KL_XXP5 374761393u
#define KL_ROTL(x, r) (((x) << (r)) | ((x) >> (32 - (r))))

KL_MAYBE_UNUSED static uint32_t kl_xxh32(const uint8_t* p, size_t n, uint32_t seed) {
    uint32_t h, v1, v2, v3, v4;
    size_t len = n;
    if (n >= 16) {
        v1 = seed + KL_XXP1 + KL_XXP2; v2 = seed + KL_XXP2; v3 = seed; v4 = seed - KL_XXP1;
        while (n >= 16) {
            v1 += kl_le32(p) * KL_XXP2; v1 = KL_ROTL(v1, 13) * KL_XXP1;
            v2 += kl_le32(p + 4) * KL_XXP2; v2 = KL_ROTL(v2, 13) * KL_XXP1;
            v3 += kl_le32(p + 8) * KL_XXP2; v3 = KL_ROTL(v3, 13) * KL_XXP1;
            v4 += kl_le32(p + 12) * KL_XXP2; v4 = KL_ROTL(v4, 13) * KL_XXP1;
            p += 16; n -= 16;
        }
        h = KL_ROTL(v1, 1) + KL_ROTL(v2, 7) + KL_ROTL(v3, 12) + KL_ROTL(v4, 18);
    } else {
        h = seed + KL_XXP5;
    }
    h += (uint32_t)len;
    while (n >= 4) {
        h += kl_le32(p) * KL_XXP3;
        h = KL_ROTL(h, 17) * KL_XXP4;
        p += 4; n -= 4;
    }
    while (n) { h += (uint32_t)(*p) * KL_XXP5; h = KL_ROTL(h, 11) * KL_XXP1; p++; n--; }
    h ^= h >> 15; h *= KL_XXP2; h ^= h >> 13; h *= KL_XXP3; h ^= h >> 16;
    return h;
}
#endif
