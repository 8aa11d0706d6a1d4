/* The Avro value interpreter: a flat program (compiled from a writer schema resolved to a
 * reader schema by spark_kafkalog/typed/avro_program.py) run over Avro binary, appending to
 * Arrow column buffers.
 *
 * Avro binary (specification, "Binary Encoding"):
 *   int, long      zig-zag varint (at most 5 / 10 bytes)
 *   float, double  4 / 8 bytes little-endian IEEE 754
 *   boolean        one byte, 0 or 1
 *   bytes, string  long length, then that many bytes (string: UTF-8)
 *   fixed(n)       n bytes
 *   enum           int index of the symbol
 *   union          long index of the branch, then the branch's value
 *   array, map     blocks: long count (negative: -count, then a long byte size of the
 *                  block), items (map: string key then value); a count of 0 ends them
 *   record         its fields in the writer schema's order, nothing between them
 *
 * Every read checks the bytes left (x->end); every declared length or count is capped by
 * them (items that encode in zero bytes by a fixed budget), so corrupt input ends in an
 * error code, never a read past the value or an allocation it did not pay for.
 *
 * Columns follow Arrow's layout: a validity bitmap (allocated at the first null), int32
 * offsets for binary/string and list columns, fixed-width values, struct children of the
 * same length as their parent. A column that is absent (a null parent, another union
 * member) gets a null if it is nullable, else a zero value, so children stay aligned.
 */
#ifndef SKL_AVRO_KERNEL_H
#define SKL_AVRO_KERNEL_H

#if defined(__APPLE__)
#include <malloc/malloc.h>
#define av_usable_size(p) malloc_size(p)
#else
#include <malloc.h>
#define av_usable_size(p) malloc_usable_size(p)
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define AV_LIKELY(x) __builtin_expect(!!(x), 1)
#define AV_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define AV_LIKELY(x) (x)
#define AV_UNLIKELY(x) (x)
#endif

#define AV_INLINE static inline __attribute__((always_inline))

/* column kinds */
enum {
    AK_NULL = 0, AK_BOOL, AK_I32, AK_I64, AK_F32, AK_F64, AK_D128, AK_BIN, AK_STRUCT, AK_LIST,
};

/* opcodes. SK_* skip a writer value the reader does not want; D_* decode into node.col.
 * node fields: op, col, a, b, c, kid (first index into kids[]), nkids */
enum {
    SK_NONE = 0, SK_FIXED, SK_VARINT, SK_BYTES, SK_ENUM, SK_ARRAY, SK_MAP, SK_UNION, SK_RECORD,
    D_NULL, D_ABSENT, D_BOOL, D_INT, D_LONG, D_FLOAT, D_DOUBLE, D_BYTES, D_FIXED, D_DEC,
    D_ENUM, D_RECORD, D_ARRAY, D_MAP, D_UNION, D_MEMBER, D_DEFAULT,
};

/* error codes (messages: _avro.pyx ERRORS) */
enum {
    AE_OK = 0, AE_TRUNCATED, AE_VARINT, AE_INT_RANGE, AE_NEGLEN, AE_BRANCH, AE_ENUM,
    AE_UTF8, AE_BOOL, AE_DECIMAL, AE_OVERFLOW, AE_TRAILING, AE_NOMAGIC, AE_MAGIC, AE_SCHEMA_ID,
    AE_NOMEM, AE_TOOBIG, AE_ITEMS, AE_BLOCKSIZE,
};

#define AV_NODE_WORDS 8
#define AV_ZERO_SIZE_ITEMS (1 << 20)   /* items of zero-byte encoding a value may declare */
#define AV_MAX_BUF (INT32_MAX - 64)    /* int32 offsets: Spark's binary/string, not large_ */
#define AV_SLACK 16

typedef struct {
    int32_t kind, nullable, width;
    int64_t n, nnull, cap;
    uint8_t *valid;
    uint8_t *data;
    int64_t dlen, dcap;
    int32_t *offs;
    int64_t kid, nkids;
} av_col;

typedef struct {
    const uint8_t *p, *end, *start;
    const uint8_t *src_end;    /* where the readable memory of the current source ends */
    const uint8_t *in_end, *consts_end;
    av_col *cols;
    const int64_t *nodes;
    const int64_t *kids;
    const int32_t *ints;
    const uint8_t *consts;
    int err;
    const uint8_t *err_at;
    int64_t err_detail;
    int64_t zero_items;
    int in_default;
} av_ctx;

/* 10^k for k <= 38: the bound of a decimal of precision k (Spark's decimal128) */
static __int128 av_pow10[39];

static void av_init(void) {
    __int128 v = 1;
    for (int k = 0; k < 39; k++) {
        av_pow10[k] = v;
        if (k < 38) v *= 10;                /* 10^39 would overflow */
    }
}

static inline int av_fail(av_ctx *x, int code, const uint8_t *at, int64_t detail) {
    if (!x->err) {
        x->err = code;
        x->err_at = x->in_default ? x->start : at;
        x->err_detail = detail;
    }
    return -1;
}

/* ---- memory --------------------------------------------------------------------------------
 * Column buffers of 1 MiB and more are kept when the Arrow buffers over them are released
 * (up to av_cache_limit bytes) and handed to the next decode's columns of a similar size:
 * fresh pages cost a fault and the kernel's zeroing each, as much as a third of a decode.
 * Every caller holds the GIL (the kernel runs under it; pyarrow takes it to release a
 * Python buffer), which is what serialises the cache. */
#define AV_CACHE_SLOTS 32
#define AV_CACHE_MIN ((size_t)1 << 20)
static void *av_cache_ptr[AV_CACHE_SLOTS];
static size_t av_cache_cap[AV_CACHE_SLOTS];
static size_t av_cache_total;
static size_t av_cache_limit = (size_t)128 << 20;

static void *av_alloc(void *old, size_t size) {
    if (!old && size >= AV_CACHE_MIN) {
        int best = -1;
        for (int i = 0; i < AV_CACHE_SLOTS; i++)
            if (av_cache_ptr[i] && av_cache_cap[i] >= size && av_cache_cap[i] / 2 <= size
                && (best < 0 || av_cache_cap[i] < av_cache_cap[best]))
                best = i;
        if (best >= 0) {
            void *p = av_cache_ptr[best];
            av_cache_ptr[best] = NULL;
            av_cache_total -= av_cache_cap[best];
            return p;
        }
    }
    return realloc(old, size);
}

static void av_release(void *p) {
    if (!p) return;
    size_t cap = av_usable_size(p);
    if (cap >= AV_CACHE_MIN && av_cache_total + cap <= av_cache_limit) {
        for (int i = 0; i < AV_CACHE_SLOTS; i++) {
            if (!av_cache_ptr[i]) {
                av_cache_ptr[i] = p;
                av_cache_cap[i] = cap;
                av_cache_total += cap;
                return;
            }
        }
    }
    free(p);
}

/* empty the cache and set its limit (0: no caching) */
static void av_cache_set_limit(size_t limit) {
    for (int i = 0; i < AV_CACHE_SLOTS; i++) {
        free(av_cache_ptr[i]);
        av_cache_ptr[i] = NULL;
    }
    av_cache_total = 0;
    av_cache_limit = limit;
}

/* ---- columns ---------------------------------------------------------------------------- */

/* grow the element capacity of a column to at least ``want`` (doubling) */
static int av_col_reserve(av_ctx *x, av_col *c, int64_t want) {
    int64_t nc = c->cap ? c->cap : 64;
    while (nc < want) nc *= 2;
    if (nc == c->cap) return 0;
    int64_t old_bits = c->cap / 8 + 1, new_bits = nc / 8 + 1;
    if (c->kind == AK_BOOL) {
        uint8_t *d = (uint8_t *)realloc(c->data, new_bits);
        if (!d) return av_fail(x, AE_NOMEM, x->p, 0);
        memset(d + (c->data ? old_bits : 0), 0, new_bits - (c->data ? old_bits : 0));
        c->data = d;
    } else if (c->width) {
        uint8_t *d = (uint8_t *)av_alloc(c->data, nc * c->width);
        if (!d) return av_fail(x, AE_NOMEM, x->p, 0);
        c->data = d;
    }
    if (c->kind == AK_BIN || c->kind == AK_LIST) {
        int32_t *o = (int32_t *)av_alloc(c->offs, (nc + 1) * sizeof(int32_t));
        if (!o) return av_fail(x, AE_NOMEM, x->p, 0);
        if (!c->offs) o[0] = 0;
        c->offs = o;
    }
    if (c->valid) {
        uint8_t *v = (uint8_t *)realloc(c->valid, new_bits);
        if (!v) return av_fail(x, AE_NOMEM, x->p, 0);
        memset(v + old_bits, 0, new_bits - old_bits);
        c->valid = v;
    }
    c->cap = nc;
    return 0;
}

/* the data buffer of a binary/string column holds ``want`` bytes and AV_SLACK more (so
 * short values are copied by fixed-size moves) */
static int av_data_reserve(av_ctx *x, av_col *c, int64_t want) {
    int64_t nc = c->dcap ? c->dcap : 256;
    if (want > AV_MAX_BUF) return av_fail(x, AE_TOOBIG, x->p, want);
    while (nc < want + AV_SLACK) nc *= 2;
    if (nc == c->dcap) return 0;
    uint8_t *d = (uint8_t *)av_alloc(c->data, nc);
    if (!d) return av_fail(x, AE_NOMEM, x->p, 0);
    c->data = d;
    c->dcap = nc;
    return 0;
}

static int av_col_grow(av_ctx *x, av_col *c) {
    return av_col_reserve(x, c, c->cap ? c->cap * 2 : 64);
}

AV_INLINE int av_room(av_ctx *x, av_col *c) {
    return AV_LIKELY(c->n < c->cap) ? 0 : av_col_grow(x, c);
}

/* the value at c->n is written; mark it valid and count it */
AV_INLINE void av_done(av_col *c) {
    if (c->valid) c->valid[c->n >> 3] |= (uint8_t)(1u << (c->n & 7));
    c->n++;
}

/* append a zero value (null=1: marked null) */
static inline int av_put_empty(av_ctx *x, av_col *c, int null) {
    if (av_room(x, c)) return -1;
    if (null && !c->valid) {
        int64_t bytes = c->cap / 8 + 1;
        c->valid = (uint8_t *)malloc(bytes);
        if (!c->valid) return av_fail(x, AE_NOMEM, x->p, 0);
        memset(c->valid, 0xFF, bytes);
    }
    switch (c->kind) {
    case AK_BOOL: c->data[c->n >> 3] &= (uint8_t)~(1u << (c->n & 7)); break;
    case AK_BIN: case AK_LIST: c->offs[c->n + 1] = c->offs[c->n]; break;
    case AK_NULL: case AK_STRUCT: break;
    default: memset(c->data + c->n * c->width, 0, c->width);
    }
    if (null || c->kind == AK_NULL) {
        if (c->valid) c->valid[c->n >> 3] &= (uint8_t)~(1u << (c->n & 7));
        c->nnull++;
        c->n++;
    } else {
        av_done(c);
    }
    return 0;
}

/* the column has no value here (a null parent, another union member, a null union) */
static int av_absent(av_ctx *x, int64_t ci) {
    av_col *c = &x->cols[ci];
    if (c->kind == AK_STRUCT) {
        for (int64_t k = 0; k < c->nkids; k++)
            if (av_absent(x, x->kids[c->kid + k]) < 0) return -1;
    }
    return av_put_empty(x, c, c->nullable);
}

AV_INLINE int av_put_bytes(av_ctx *x, av_col *c, const uint8_t *src, int64_t len) {
    if (av_room(x, c)) return -1;
    if (AV_UNLIKELY(c->dlen + len + AV_SLACK > c->dcap)
        && av_data_reserve(x, c, c->dlen + len)) return -1;
    /* short values by one fixed-size move: the destination has AV_SLACK bytes spare and
     * the source is readable that far (x->src_end: the input and the constants are padded
     * or followed by more input) */
    if (len <= AV_SLACK && src + AV_SLACK <= x->src_end) memcpy(c->data + c->dlen, src, AV_SLACK);
    else if (len) memcpy(c->data + c->dlen, src, len);
    c->dlen += len;
    c->offs[c->n + 1] = (int32_t)c->dlen;
    av_done(c);
    return 0;
}

/* ---- reads ------------------------------------------------------------------------------ */

AV_INLINE int av_long(av_ctx *x, int64_t *out) {
    const uint8_t *p = x->p, *end = x->end;
    uint64_t v = 0;
    if (AV_LIKELY(p < end) && !(*p & 0x80)) {          /* one byte: most lengths, counts */
        v = *p;
        x->p = p + 1;
        *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
        return 0;
    }
    int shift = 0;
    for (int i = 0; i < 10; i++) {
        if (AV_UNLIKELY(p >= end)) return av_fail(x, AE_TRUNCATED, p, 0);
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            x->p = p;
            *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
        shift += 7;
    }
    return av_fail(x, AE_VARINT, x->p, 10);
}

AV_INLINE int av_int(av_ctx *x, int64_t *out) {
    const uint8_t *p = x->p, *end = x->end;
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < 5; i++) {
        if (AV_UNLIKELY(p >= end)) return av_fail(x, AE_TRUNCATED, p, 0);
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (AV_UNLIKELY(v > 0xFFFFFFFFull)) return av_fail(x, AE_INT_RANGE, x->p, 0);
            x->p = p;
            *out = (int64_t)((v >> 1) ^ (~(v & 1) + 1));
            return 0;
        }
        shift += 7;
    }
    return av_fail(x, AE_VARINT, x->p, 5);
}

/* a length (bytes, string) that the value still holds */
AV_INLINE int av_len(av_ctx *x, int64_t *len) {
    const uint8_t *at = x->p;
    if (av_long(x, len)) return -1;
    if (AV_UNLIKELY(*len < 0)) return av_fail(x, AE_NEGLEN, at, *len);
    if (AV_UNLIKELY(*len > x->end - x->p)) return av_fail(x, AE_TRUNCATED, at, *len);
    return 0;
}

/* a block count of an array/map: 0 ends; negative: the block's byte size follows */
AV_INLINE int av_block(av_ctx *x, int64_t *count, int64_t min_item) {
    const uint8_t *at = x->p;
    if (av_long(x, count)) return -1;
    if (*count < 0) {
        int64_t size;
        if (*count == INT64_MIN) return av_fail(x, AE_NEGLEN, at, *count);
        *count = -*count;
        if (av_long(x, &size)) return -1;
        if (size < 0 || size > x->end - x->p) return av_fail(x, AE_BLOCKSIZE, at, size);
    }
    if (min_item > 0) {
        if (AV_UNLIKELY(*count > (x->end - x->p) / min_item))
            return av_fail(x, AE_TRUNCATED, at, *count);
    } else if (*count) {
        x->zero_items -= *count;
        if (x->zero_items < 0) return av_fail(x, AE_ITEMS, at, *count);
    }
    return 0;
}

/* UTF-8 as RFC 3629 (no overlongs, no surrogates, <= U+10FFFF) */
static int av_utf8_ok(const uint8_t *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;
            if (c == 0xED && c1 > 0x9F) return 0;
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            uint8_t c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* short ASCII strings (most keys, names, codes) without a call */
AV_INLINE int av_utf8(const uint8_t *s, int64_t n) {
    if (n <= 16) {
        uint8_t acc = 0;
        for (int64_t i = 0; i < n; i++) acc |= s[i];
        if (!(acc & 0x80)) return 1;
    }
    return av_utf8_ok(s, n);
}

/* ---- the interpreter -------------------------------------------------------------------- */

static int av_exec(av_ctx *x, int64_t ni);

AV_INLINE int av_put_long(av_ctx *x, av_col *c, int64_t v, int64_t mult, const uint8_t *at) {
    if (av_room(x, c)) return -1;
    switch (c->kind) {
    case AK_I32: ((int32_t *)c->data)[c->n] = (int32_t)v; break;
    case AK_I64:
        if (mult != 1) {
            int64_t r;
            if (__builtin_mul_overflow(v, mult, &r)) return av_fail(x, AE_OVERFLOW, at, v);
            v = r;
        }
        ((int64_t *)c->data)[c->n] = v;
        break;
    case AK_F32: ((float *)c->data)[c->n] = (float)v; break;
    default: ((double *)c->data)[c->n] = (double)v; break;
    }
    av_done(c);
    return 0;
}

static int av_decimal(av_ctx *x, av_col *c, const uint8_t *b, int64_t len, int precision,
                      const uint8_t *at) {
    __int128 v = 0;
    if (len > 0) {
        int neg = b[0] & 0x80;
        int64_t skip = len > 16 ? len - 16 : 0;
        for (int64_t i = 0; i < skip; i++)
            if (b[i] != (neg ? 0xFF : 0x00)) return av_fail(x, AE_DECIMAL, at, len);
        if (skip && ((b[skip] & 0x80) != neg)) return av_fail(x, AE_DECIMAL, at, len);
        unsigned __int128 u = neg ? ~(unsigned __int128)0 : 0;
        for (int64_t i = skip; i < len; i++) u = (u << 8) | b[i];
        v = (__int128)u;
    }
    __int128 bound = av_pow10[precision];
    if (v >= bound || v <= -bound) return av_fail(x, AE_DECIMAL, at, len);
    if (av_room(x, c)) return -1;
    memcpy(c->data + c->n * 16, &v, 16);   /* little-endian hosts: Arrow's layout */
    av_done(c);
    return 0;
}

/* the ops that read one value into one column (or skip one flat value): inlined into
 * the record loop, which runs most of a value's fields */
#define AV_IS_LEAF(op) (((op) >= D_NULL && (op) <= D_ENUM) || ((op) >= SK_NONE && (op) <= SK_ENUM))

static inline __attribute__((always_inline)) int av_leaf(av_ctx *x, const int64_t *nd) {
    const uint8_t *at = x->p;
    av_col *c = nd[1] >= 0 ? &x->cols[nd[1]] : NULL;
    /* set by av_long/av_int/av_len whenever they return 0; zeroed because gcc, inlining
     * them here, cannot see that (-Wmaybe-uninitialized) */
    int64_t v = 0, len = 0;
    switch ((int)nd[0]) {
    case SK_NONE:
        return 0;
    case SK_FIXED:
        if (AV_UNLIKELY(x->end - x->p < nd[2])) return av_fail(x, AE_TRUNCATED, at, nd[2]);
        x->p += nd[2];
        return 0;
    case SK_VARINT:
        return av_long(x, &v);
    case SK_BYTES:
        if (av_len(x, &len)) return -1;
        x->p += len;
        return 0;
    case SK_ENUM:                   /* a value skipped is still checked: its index names a symbol */
        if (av_int(x, &v)) return -1;
        if (AV_UNLIKELY(v < 0 || v >= nd[2])) return av_fail(x, AE_ENUM, at, v);
        return 0;
    case D_NULL:
        return av_put_empty(x, c, 1);
    case D_ABSENT:
        return c->kind == AK_STRUCT ? av_absent(x, nd[1]) : av_put_empty(x, c, c->nullable);
    case D_BOOL:
        if (AV_UNLIKELY(x->p >= x->end)) return av_fail(x, AE_TRUNCATED, at, 1);
        if (AV_UNLIKELY(*x->p > 1)) return av_fail(x, AE_BOOL, at, *x->p);
        if (av_room(x, c)) return -1;
        if (*x->p) c->data[c->n >> 3] |= (uint8_t)(1u << (c->n & 7));
        else c->data[c->n >> 3] &= (uint8_t)~(1u << (c->n & 7));
        x->p++;
        av_done(c);
        return 0;
    case D_INT:
        if (av_int(x, &v)) return -1;
        return av_put_long(x, c, v, nd[4], at);
    case D_LONG:
        if (av_long(x, &v)) return -1;
        return av_put_long(x, c, v, nd[4], at);
    case D_FLOAT: {
        float f;
        if (AV_UNLIKELY(x->end - x->p < 4)) return av_fail(x, AE_TRUNCATED, at, 4);
        memcpy(&f, x->p, 4);
        x->p += 4;
        if (av_room(x, c)) return -1;
        if (c->kind == AK_F32) ((float *)c->data)[c->n] = f;
        else ((double *)c->data)[c->n] = (double)f;
        av_done(c);
        return 0;
    }
    case D_DOUBLE:
        if (AV_UNLIKELY(x->end - x->p < 8)) return av_fail(x, AE_TRUNCATED, at, 8);
        if (av_room(x, c)) return -1;
        memcpy(c->data + c->n * 8, x->p, 8);
        x->p += 8;
        av_done(c);
        return 0;
    case D_BYTES:
        if (av_len(x, &len)) return -1;
        if (nd[2] && !av_utf8(x->p, len)) return av_fail(x, AE_UTF8, at, len);
        x->p += len;
        return av_put_bytes(x, c, x->p - len, len);
    case D_FIXED:
        if (AV_UNLIKELY(x->end - x->p < nd[2])) return av_fail(x, AE_TRUNCATED, at, nd[2]);
        x->p += nd[2];
        return av_put_bytes(x, c, x->p - nd[2], nd[2]);
    case D_DEC:
        if (nd[2] >= 0) {
            len = nd[2];
            if (AV_UNLIKELY(x->end - x->p < len)) return av_fail(x, AE_TRUNCATED, at, len);
        } else if (av_len(x, &len)) {
            return -1;
        }
        x->p += len;
        return av_decimal(x, c, x->p - len, len, (int)nd[3], at);
    case D_ENUM: {
        int64_t r;
        if (av_int(x, &v)) return -1;
        if (AV_UNLIKELY(v < 0 || v >= nd[3])) return av_fail(x, AE_ENUM, at, v);
        r = x->ints[nd[2] + v];                      /* writer index -> reader symbol */
        const int32_t *so = x->ints + nd[4];         /* reader symbols' offsets in consts */
        {
            const uint8_t *keep = x->src_end;
            int rc;
            x->src_end = x->consts_end;
            rc = av_put_bytes(x, c, x->consts + so[r], so[r + 1] - so[r]);
            x->src_end = keep;
            return rc;
        }
    }
    }
    return av_fail(x, AE_BRANCH, at, -1);
}

/* run node ``ni``: a leaf inline, anything else through the interpreter */
#define AV_RUN(x, ni) (AV_IS_LEAF((x)->nodes[(ni) * AV_NODE_WORDS]) \
    ? av_leaf((x), (x)->nodes + (ni) * AV_NODE_WORDS) : av_exec((x), (ni)))

/* the blocks of an array (kids[0]: the item) or a map (kids[0]: the key, kids[1]: the
 * value); decoded maps also count an entry in their entries struct column */
AV_INLINE int av_items(av_ctx *x, const int64_t *nd, int is_map, int skip) {
    const int64_t *kids = x->kids + nd[5];
    av_col *entries = (is_map && !skip) ? &x->cols[x->kids[x->cols[nd[1]].kid]] : NULL;
    int64_t count;
    for (;;) {
        if (av_block(x, &count, nd[2])) return -1;
        if (!count) return 0;
        for (int64_t i = 0; i < count; i++) {
            if (AV_RUN(x, kids[0]) < 0) return -1;
            if (is_map) {
                if (AV_RUN(x, kids[1]) < 0) return -1;
                if (entries) {
                    if (av_room(x, entries)) return -1;
                    av_done(entries);
                }
            }
        }
    }
}

static int av_exec(av_ctx *x, int64_t ni) {
    const int64_t *nd = x->nodes + ni * AV_NODE_WORDS;
    const uint8_t *at = x->p;
    av_col *c = nd[1] >= 0 ? &x->cols[nd[1]] : NULL;
    int64_t v;
    switch ((int)nd[0]) {
    case SK_ARRAY:
        return av_items(x, nd, 0, 1);
    case SK_MAP:
        return av_items(x, nd, 1, 1);
    case SK_UNION: case D_UNION:
        if (av_long(x, &v)) return -1;
        if (AV_UNLIKELY(v < 0 || v >= nd[6])) return av_fail(x, AE_BRANCH, at, v);
        return AV_RUN(x, x->kids[nd[5] + v]);
    case SK_RECORD: case D_RECORD:
        for (int64_t k = 0; k < nd[6]; k++)
            if (AV_RUN(x, x->kids[nd[5] + k]) < 0) return -1;
        if (c) {
            if (av_room(x, c)) return -1;
            av_done(c);
        }
        return 0;
    case D_ARRAY: case D_MAP: {
        if (av_items(x, nd, nd[0] == D_MAP, 0)) return -1;
        if (av_room(x, c)) return -1;
        int64_t nchild = x->cols[x->kids[c->kid]].n;
        if (nchild > AV_MAX_BUF) return av_fail(x, AE_TOOBIG, at, nchild);
        c->offs[c->n + 1] = (int32_t)nchild;
        av_done(c);
        return 0;
    }
    case D_MEMBER:
        for (int64_t k = 0; k < c->nkids; k++)
            if (k != nd[2] && av_absent(x, x->kids[c->kid + k]) < 0) return -1;
        if (AV_RUN(x, x->kids[nd[5]]) < 0) return -1;
        if (av_room(x, c)) return -1;
        av_done(c);
        return 0;
    case D_DEFAULT: {
        /* a reader field the writer lacks: its default, Avro-encoded at build time, run
         * through the reader's own program */
        const uint8_t *p = x->p, *end = x->end, *start = x->start;
        int was = x->in_default, rc;
        x->in_default = 1;
        x->p = x->consts + nd[4];
        x->end = x->p + nd[2];
        x->start = at;
        x->src_end = x->consts_end;
        rc = av_exec(x, x->kids[nd[5]]);
        x->p = p; x->end = end; x->start = start; x->in_default = was;
        x->src_end = was ? x->consts_end : x->in_end;
        return rc;
    }
    }
    return av_leaf(x, nd);
}

#endif
