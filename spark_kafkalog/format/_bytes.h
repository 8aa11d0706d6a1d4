/* Big-endian loads, zig-zag varints and UTF-8 checks for the kernels (static,
   compiled into each caller's translation unit: they run per record, so the compiler
   can inline them there). Declared for Cython in _bytes.pxd; _decode.pyx and
   _text.pyx (the UTF-8 check of kafka-dump-log's payload text) use them. */
#ifndef KL_BYTES_H
#define KL_BYTES_H
#include <stdint.h>
#include <string.h>
#include <stddef.h>

/* a kernel that uses only some of these compiles the rest without a warning */
#if defined(__GNUC__)
#define KL_MAYBE_UNUSED __attribute__((unused))
#else
#define KL_MAYBE_UNUSED
#endif

static inline uint16_t kl_be16(const uint8_t* p) {
    uint16_t v; memcpy(&v, p, 2);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap16(v);
#endif
    return v;
}
static inline uint32_t kl_be32(const uint8_t* p) {
    uint32_t v; memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}
static inline uint64_t kl_be64(const uint8_t* p) {
    uint64_t v; memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* ---- zig-zag varints ------------------------------------------------------------
   Return the position after the varint, or NULL with *err = 1 (runs past `end`) or
   2 (too long: more than 5 / 10 bytes, or bits beyond 32 / 64 set in the last byte;
   Kafka's own encoder never writes either). */
#define KL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define KL_LIKELY(x) __builtin_expect(!!(x), 1)
#define KL_ZZ32(u) ((int32_t)(((u) >> 1) ^ (0u - ((u) & 1u))))
#define KL_ZZ64(u) ((int64_t)(((u) >> 1) ^ (0ull - ((u) & 1ull))))

/* the general case, one byte at a time, bounded by `end` */
static const uint8_t* kl_varint_slow(const uint8_t* p, const uint8_t* end,
                                     int32_t* out, int* err) {
    uint32_t u = 0, b;
    int shift = 0;
    for (;;) {
        if (p >= end) { *err = 1; return NULL; }
        b = *p++;
        if (shift == 28) {
            if (b & 0xF0u) { *err = 2; return NULL; }
            u |= b << 28;
            break;
        }
        u |= (b & 0x7Fu) << shift;
        if (!(b & 0x80u)) break;
        shift += 7;
    }
    *out = KL_ZZ32(u);
    return p;
}

static inline const uint8_t* kl_varint(const uint8_t* p, const uint8_t* end,
                                       int32_t* out, int* err) {
    /* 1- and 2-byte varints (lengths up to 8191) are nearly all of them */
    if (KL_LIKELY(p < end)) {
        uint32_t b0 = p[0], b1;
        if (b0 < 0x80u) { *out = KL_ZZ32(b0); return p + 1; }
        if (KL_LIKELY(end - p >= 2)) {
            b1 = p[1];
            if (b1 < 0x80u) {
                b0 = (b0 & 0x7Fu) | (b1 << 7);
                *out = KL_ZZ32(b0);
                return p + 2;
            }
        }
    }
    return kl_varint_slow(p, end, out, err);
}

static const uint8_t* kl_varlong_slow(const uint8_t* p, const uint8_t* end,
                                      int64_t* out, int* err) {
    uint64_t u = 0, b;
    int shift = 0;
    for (;;) {
        if (p >= end) { *err = 1; return NULL; }
        b = *p++;
        if (shift == 63) {
            if (b & 0xFEu) { *err = 2; return NULL; }
            u |= b << 63;
            break;
        }
        u |= (b & 0x7Full) << shift;
        if (!(b & 0x80u)) break;
        shift += 7;
    }
    *out = KL_ZZ64(u);
    return p;
}

static inline const uint8_t* kl_varlong(const uint8_t* p, const uint8_t* end,
                                        int64_t* out, int* err) {
    if (KL_LIKELY(p < end)) {
        uint64_t b0 = p[0], b1;
        if (b0 < 0x80u) { *out = KL_ZZ64(b0); return p + 1; }
        if (KL_LIKELY(end - p >= 2)) {
            b1 = p[1];
            if (b1 < 0x80u) {
                b0 = (b0 & 0x7Fu) | (b1 << 7);
                *out = KL_ZZ64(b0);
                return p + 2;
            }
        }
    }
    return kl_varlong_slow(p, end, out, err);
}

/* ---- UTF-8 ------------------------------------------------------------------------
   Well-formed per Unicode table 3-7: no overlongs, no surrogates, <= U+10FFFF.
   kl_utf8_step returns the length of the well-formed sequence at p (1..4), or
   -(length of the maximal ill-formed subpart) (-1..-3), the unit a decoder replaces
   by one U+FFFD (what Java's and Python's decoders both do). */
static inline int kl_utf8_step(const uint8_t* p, size_t n) {
    uint8_t b = p[0], lo = 0x80, hi = 0xBF;
    int need, i;
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        else if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lo = 0x90;
        else if (b == 0xF4) hi = 0x8F;
    } else return -1;
    for (i = 1; i <= need; i++) {
        if ((size_t)i >= n) return -i;
        if (p[i] < lo || p[i] > hi) return -i;
        lo = 0x80; hi = 0xBF;
    }
    return need + 1;
}

KL_MAYBE_UNUSED static int kl_utf8_valid(const uint8_t* p, size_t n) {
    size_t i = 0;
    int k;
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w; memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) { i += 8; continue; }
        }
        k = kl_utf8_step(p + i, n - i);
        if (k < 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* All bytes < 0x80? Word-wide, with overlapping loads inside [p, p+n): header keys
   are short ASCII names, which this settles without the per-byte UTF-8 walk. */
static inline int kl_ascii(const uint8_t* p, size_t n) {
    if (n >= 8) {
        uint64_t acc = 0, w;
        size_t i = 0;
        for (; i + 8 <= n; i += 8) { memcpy(&w, p + i, 8); acc |= w; }
        memcpy(&w, p + n - 8, 8);
        acc |= w;
        return !(acc & 0x8080808080808080ull);
    }
    if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, p, 4); memcpy(&b, p + n - 4, 4);
        return !((a | b) & 0x80808080u);
    }
    {
        unsigned acc = 0;
        size_t i;
        for (i = 0; i < n; i++) acc |= p[i];
        return !(acc & 0x80u);
    }
}

/* writes the repaired string to dst (room for 3 * n bytes), returns its length */
KL_MAYBE_UNUSED static size_t kl_utf8_fix(const uint8_t* p, size_t n, uint8_t* dst) {
    size_t i = 0, o = 0;
    int k;
    while (i < n) {
        k = kl_utf8_step(p + i, n - i);
        if (k > 0) { memcpy(dst + o, p + i, (size_t)k); o += (size_t)k; i += (size_t)k; }
        else { dst[o++] = 0xEF; dst[o++] = 0xBF; dst[o++] = 0xBD; i += (size_t)(-k); }
    }
    return o;
}

#endif /* KL_BYTES_H */
