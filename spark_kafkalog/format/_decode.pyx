# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled decode kernel: runs of Kafka record batches -> Arrow buffers.

Use it through :mod:`spark_kafkalog.format.decode`; the names here are the kernel's
entry points (the codec registry also calls ``decompress_framed`` and ``zstd_frames``,
the C framings of ``_framing.h``) and a few test hooks. Every read is bounded by the batch it belongs to and
every allocation by the input size or ``max_decompressed``; errors carry the batch's
byte position (``position_base`` added) and base offset. How it is fast (one pass, the
block cache, the C codec paths) and the measurements: docs/PERFORMANCE.md.
"""
from libc.stdint cimport (
    int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t,
)
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBUF_READ
from cpython.bytearray cimport (
    PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Realloc
from cpython.memoryview cimport PyMemoryView_FromMemory

import pyarrow as pa
from crc32c import crc32c as _crc32c

from spark_kafkalog.errors import (
    CodecError,
    CorruptRecordError,
    InternalError,
    InvalidOptionError,
    KafkaLogError,
    MissingCodecError,
    UnsupportedFormatError,
)
from spark_kafkalog.format.schema import (
    HEADER_TYPE,
    HEADERS_TYPE,
    SCHEMA,
    record_schema,
)
from spark_kafkalog.format.wire import CODEC_NAMES
from spark_kafkalog.format._wire cimport (
    ATTR_CODEC_MASK, ATTR_CONTROL, ATTR_TIMESTAMP_TYPE, ATTR_TRANSACTIONAL, CODEC_LZ4,
    CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD, HEADER_PEEK, LEGACY_ATTRIBUTES_POS,
    LEGACY_CODEC_MASK, LEGACY_CRC_POS, LEGACY_MAGIC_POS, LEGACY_TIMESTAMP_TYPE, LEGACY_V0_KEY_POS,
    LEGACY_V0_MIN_SIZE, LEGACY_V1_KEY_POS, LEGACY_V1_MIN_SIZE, LEGACY_V1_TIMESTAMP_POS,
    LOG_OVERHEAD, MAGIC_POS, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    OFFSET_POS, SIZE_POS, TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND,
    TIMESTAMP_TYPE_NONE, V2_ATTRIBUTES_POS, V2_BASE_SEQUENCE_POS, V2_BASE_TIMESTAMP_POS,
    V2_CRC_POS, V2_HEADER_SIZE, V2_LAST_OFFSET_DELTA_POS, V2_MAX_TIMESTAMP_POS,
    V2_MIN_BATCH_LENGTH, V2_MIN_RECORD_SIZE, V2_PARTITION_LEADER_EPOCH_POS,
    V2_PRODUCER_EPOCH_POS, V2_PRODUCER_ID_POS, V2_RECORD_COUNT_POS, wire_layout,
)

cdef extern from "_checksums.h":
    int kl_crc32c_hw
    int kl_crc32c_init() noexcept nogil
    uint32_t kl_crc32c(uint32_t crc, const uint8_t* p, size_t n) noexcept nogil
    void kl_crc32_init() noexcept nogil
    uint32_t kl_crc32(const uint8_t* p, size_t n) noexcept nogil
    uint32_t kl_xxh32(const uint8_t* p, size_t n, uint32_t seed) noexcept nogil

#: the layout constants as this module was compiled with them (checked against wire.py)
WIRE_LAYOUT = wire_layout()

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <stddef.h>

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

    static int kl_utf8_valid(const uint8_t* p, size_t n) {
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
    static size_t kl_utf8_fix(const uint8_t* p, size_t n, uint8_t* dst) {
        size_t i = 0, o = 0;
        int k;
        while (i < n) {
            k = kl_utf8_step(p + i, n - i);
            if (k > 0) { memcpy(dst + o, p + i, (size_t)k); o += (size_t)k; i += (size_t)k; }
            else { dst[o++] = 0xEF; dst[o++] = 0xBF; dst[o++] = 0xBD; i += (size_t)(-k); }
        }
        return o;
    }

    /* ---- v2 records into Arrow buffers ----------------------------------------------- */
    typedef struct kl_out kl_out;
    typedef int (*kl_grow_fn)(void* owner, int64_t need);

    /* The output columns of one decode call (owned by the Cython _Sink). Row arrays hold
       rows_cap rows, data arrays *_cap bytes, header slot arrays nh_cap headers. Bitmaps
       are zeroed when allocated; a valid entry sets its bit. */
    struct kl_out {
        int64_t n, rows_cap;
        int64_t *offset, *ts;
        int32_t *ts_type;
        int32_t *key_off; uint8_t *key_valid, *key_data; int64_t key_used, key_cap;
        int32_t *val_off; uint8_t *val_valid, *val_data; int64_t val_used, val_cap;
        int with_headers;
        int32_t *hl_off; uint8_t *hl_valid;
        int64_t nh, nh_cap;
        int32_t *hk_off; uint8_t *hk_data; int64_t hk_used, hk_cap;
        int32_t *hv_off; uint8_t *hv_valid, *hv_data; int64_t hv_used, hv_cap;
        int64_t key_nulls, val_nulls, hl_nulls, hv_nulls;
        /* set once the column's bitmap is being written (see kl_bitmap_start) */
        int key_bm, val_bm;
        /* rare growth of the header arrays; return < 0 with a Python error set */
        void *owner;
        kl_grow_fn grow_hslots, grow_hk, grow_hv;
    };

    enum {
        KE_OK = 0, KE_PYERR, KE_VARINT_TRUNC, KE_VARINT_LONG, KE_REC_NEG, KE_REC_PAST,
        KE_REC_EMPTY, KE_KEY_LEN, KE_KEY_PAST, KE_VALUE_LEN, KE_VALUE_PAST, KE_HCOUNT,
        KE_HKEY, KE_HVALUE, KE_REC_MISMATCH, KE_LEFTOVER, KE_TS_RANGE, KE_TOO_BIG
    };
    /* fields named by KE_VARINT_* (err.a) */
    enum { KF_LENGTH = 0, KF_TS_DELTA, KF_OFF_DELTA, KF_KEY_LEN, KF_VALUE_LEN, KF_HCOUNT,
           KF_HKEY_LEN, KF_HVALUE_LEN };

    typedef struct kl_err { int code; int64_t rec, a, b, c; } kl_err;

    #define KL_TS_MAX_MS 9223372036854775LL   /* |ms| * 1000 must fit in int64 */
    #define KL_FAIL(code_, a_, b_, c_) \
        do { err->code = (code_); err->rec = i; err->a = (a_); err->b = (b_); \
             err->c = (c_); goto fail; } while (0)
    #define KL_VARINT(fn, dst, lim, field, extra) \
        do { int e_ = 0; const uint8_t* r_ = fn(q, (lim), (dst), &e_); \
             if (KL_UNLIKELY(r_ == NULL)) \
                 KL_FAIL(e_ == 1 ? KE_VARINT_TRUNC : KE_VARINT_LONG, (field), (extra), \
                         (int64_t)(q - p)); \
             q = r_; } while (0)

    /* Copy of a key or value: short ones inline with overlapping fixed-size moves (no
       read or write outside [s, s+n) / [d, d+n)), long ones through memcpy. */
    static inline void kl_copy(uint8_t* d, const uint8_t* s, size_t n) {
        if (n <= 16) {
            if (n >= 8) {
                uint64_t a, b;
                memcpy(&a, s, 8); memcpy(&b, s + n - 8, 8);
                memcpy(d, &a, 8); memcpy(d + n - 8, &b, 8);
            } else if (n >= 4) {
                uint32_t a, b;
                memcpy(&a, s, 4); memcpy(&b, s + n - 4, 4);
                memcpy(d, &a, 4); memcpy(d + n - 4, &b, 4);
            } else if (n) {
                uint8_t a = s[0], b = s[n >> 1], c = s[n - 1];
                d[0] = a; d[n >> 1] = b; d[n - 1] = c;
            }
        } else if (n <= 32) {
            uint8_t a[16], b[16];
            memcpy(a, s, 16); memcpy(b, s + n - 16, 16);
            memcpy(d, a, 16); memcpy(d + n - 16, b, 16);
        } else if (n <= 256) {
            /* 32-byte chunks, the last one ending at n (it may overlap the one before):
               no call, and every chunk lies inside [s, s+n) / [d, d+n) */
            uint8_t t[32];
            size_t k = 0;
            do { memcpy(t, s + k, 32); memcpy(d + k, t, 32); k += 32; } while (k + 32 < n);
            memcpy(t, s + n - 32, 32);
            memcpy(d + n - 32, t, 32);
        } else {
            memcpy(d, s, n);
        }
    }

    /* Copy of n bytes when `room` bytes may be read at s and written at d (s + room is
       still inside the batch payload, d + room inside the output buffer's capacity):
       one fixed-size move of 32 or 128 bytes covers every n of its size class, with
       no branch on n. The bytes moved past n are outside the column's data (the next
       copy overwrites them, or they lie past the buffer's final size). */
    static inline void kl_copy_over(uint8_t* d, const uint8_t* s, size_t n, size_t room) {
        if (n <= 32 && room >= 32) {
            uint8_t t[32];
            memcpy(t, s, 32); memcpy(d, t, 32);
        } else if (n <= 128 && room >= 128) {
            uint8_t t[128];
            memcpy(t, s, 128); memcpy(d, t, 128);
        } else {
            kl_copy(d, s, n);
        }
    }

    /* kl_ascii for n <= 16 when 16 bytes may be read at p: two words, masked to n */
    static const uint64_t kl_mask_lo[17] = {0x0ull, 0xFFull, 0xFFFFull, 0xFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFFFull, 0xFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull};
    static const uint64_t kl_mask_hi[17] = {0x0ull, 0x0ull, 0x0ull, 0x0ull, 0x0ull, 0x0ull, 0x0ull, 0x0ull, 0x0ull, 0xFFull, 0xFFFFull, 0xFFFFFFull, 0xFFFFFFFFull, 0xFFFFFFFFFFull, 0xFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull};
    static inline int kl_ascii16(const uint8_t* p, size_t n) {
        uint64_t w0, w1;
        memcpy(&w0, p, 8); memcpy(&w1, p + 8, 8);
        return !(((w0 & kl_mask_lo[n]) | (w1 & kl_mask_hi[n])) & 0x8080808080808080ull);
    }

    /* Validity bitmaps are written lazily: while a column has had no null, its bits are
       not written at all; at its first null (row r) bits [0, r) are set at once and from
       then on each valid row sets its bit. The bitmap buffers are zeroed when allocated. */
    static inline void kl_bitmap_start(uint8_t* bm, int64_t r) {
        memset(bm, 0xFF, (size_t)(r >> 3));
        if (r & 7) bm[r >> 3] = (uint8_t)((1u << (r & 7)) - 1u);
    }

    static inline int kl_emit_header(kl_out* o, const uint8_t* kp, int32_t klen,
                              const uint8_t* vp, int32_t vlen, const uint8_t* src_end) {
        int64_t h = o->nh;
        size_t room;
        if (KL_UNLIKELY(o->hk_used + 3 * (int64_t)klen > o->hk_cap))
            if (o->grow_hk(o->owner, o->hk_used + 3 * (int64_t)klen) < 0) return KE_PYERR;
        if (klen) {
            room = (size_t)(src_end - kp);
            if ((size_t)(o->hk_cap - o->hk_used) < room) room = (size_t)(o->hk_cap - o->hk_used);
            if ((klen <= 16 && src_end - kp >= 16) ? kl_ascii16(kp, (size_t)klen)
                    : (kl_ascii(kp, (size_t)klen) || kl_utf8_valid(kp, (size_t)klen))) {
                kl_copy_over(o->hk_data + o->hk_used, kp, (size_t)klen, room);
                o->hk_used += klen;
            } else if (kl_utf8_valid(kp, (size_t)klen)) {
                kl_copy(o->hk_data + o->hk_used, kp, (size_t)klen);
                o->hk_used += klen;
            } else {
                /* Java's String decoding replaces ill-formed sequences with U+FFFD */
                o->hk_used += (int64_t)kl_utf8_fix(kp, (size_t)klen, o->hk_data + o->hk_used);
                if (o->hk_used > INT32_MAX) return KE_TOO_BIG;
            }
        }
        o->hk_off[h + 1] = (int32_t)o->hk_used;
        if (vlen >= 0) {
            if (KL_UNLIKELY(o->hv_used + vlen > o->hv_cap))
                if (o->grow_hv(o->owner, o->hv_used + vlen) < 0) return KE_PYERR;
            if (vlen) {
                room = (size_t)(src_end - vp);
                if ((size_t)(o->hv_cap - o->hv_used) < room) room = (size_t)(o->hv_cap - o->hv_used);
                kl_copy_over(o->hv_data + o->hv_used, vp, (size_t)vlen, room);
                o->hv_used += vlen;
            }
            o->hv_valid[h >> 3] |= (uint8_t)(1u << (h & 7));
        } else {
            o->hv_nulls++;
        }
        o->hv_off[h + 1] = (int32_t)o->hv_used;
        o->nh = h + 1;
        return KE_OK;
    }

    /* Decode `count` records of the uncompressed payload p[0:plen] into `o`. The caller
       reserved `count` rows and `plen` bytes of key and of value data. Records whose
       offset is outside [lo, hi) (hi_set == 0: no upper bound) are parsed and validated
       but not written. Returns KE_OK, or an error code with details in *err. Every read
       is bounded by the record's own length, itself bounded by the payload. */
    static int kl_v2_records(kl_out* o, const uint8_t* p, int64_t plen, int32_t count,
                             int64_t base_offset, int64_t base_ts, int64_t max_ts,
                             int log_append, int64_t lo, int64_t hi, int hi_set,
                             kl_err* err) {
        const uint8_t* q = p;
        const uint8_t* rec = p;
        const uint8_t* const end = p + plen;
        const uint8_t *rec_end, *kp, *vp, *hkp, *hvp;
        int32_t i = 0, j, rec_len, off_delta, klen, vlen, hcount, hklen, hvlen;
        int64_t ts_delta, off, ts_ms, row;
        int keep, rc;
        const int with_h = o->with_headers;
        const int32_t ts_type = log_append ? 1 : 0;
        int64_t n = o->n;
        int64_t* const o_offset = o->offset;
        int64_t* const o_ts = o->ts;
        int32_t* const o_ts_type = o->ts_type;
        int32_t* const o_key_off = o->key_off;
        uint8_t* const o_key_valid = o->key_valid;
        uint8_t* const o_key_data = o->key_data;
        int32_t* const o_val_off = o->val_off;
        uint8_t* const o_val_valid = o->val_valid;
        uint8_t* const o_val_data = o->val_data;
        int32_t* const o_hl_off = o->hl_off;
        uint8_t* const o_hl_valid = o->hl_valid;
        int64_t key_used = o->key_used, val_used = o->val_used;
        /* the data buffers do not grow inside this function (the caller reserved the
           payload's size in each) */
        const int64_t key_cap = o->key_cap, val_cap = o->val_cap;
        size_t room;
        int64_t key_nulls = 0, val_nulls = 0, hl_nulls = 0;
        int key_bm = o->key_bm, val_bm = o->val_bm;
        uint8_t bit;

        if (log_append && (max_ts > KL_TS_MAX_MS || max_ts < -KL_TS_MAX_MS))
            KL_FAIL(KE_TS_RANGE, max_ts, base_offset, 0);
        for (i = 0; i < count; i++) {
            /* the next record starts at rec_end, known from the length varint alone: the
               field parsing below is off the record-to-record dependency chain */
            q = rec;
            KL_VARINT(kl_varint, &rec_len, end, KF_LENGTH, 0);
            if (KL_UNLIKELY(rec_len < 0)) KL_FAIL(KE_REC_NEG, rec_len, 0, 0);
            if (KL_UNLIKELY(rec_len > end - q)) KL_FAIL(KE_REC_PAST, rec_len, end - q, 0);
            rec_end = q + rec_len;
            if (KL_UNLIKELY(q >= rec_end)) KL_FAIL(KE_REC_EMPTY, 0, 0, 0);
            q++;                                        /* record attributes: unused */
            KL_VARINT(kl_varlong, &ts_delta, rec_end, KF_TS_DELTA, 0);
            KL_VARINT(kl_varint, &off_delta, rec_end, KF_OFF_DELTA, 0);
            off = (int64_t)((uint64_t)base_offset + (uint64_t)(int64_t)off_delta);
            keep = off >= lo && (!hi_set || off < hi);
            KL_VARINT(kl_varint, &klen, rec_end, KF_KEY_LEN, 0);
            if (KL_UNLIKELY(klen < -1)) KL_FAIL(KE_KEY_LEN, klen, 0, 0);
            if (KL_UNLIKELY(klen > rec_end - q)) KL_FAIL(KE_KEY_PAST, klen, rec_end - q, 0);
            kp = q;
            if (klen > 0) q += klen;
            KL_VARINT(kl_varint, &vlen, rec_end, KF_VALUE_LEN, 0);
            if (KL_UNLIKELY(vlen < -1)) KL_FAIL(KE_VALUE_LEN, vlen, 0, 0);
            if (KL_UNLIKELY(vlen > rec_end - q)) KL_FAIL(KE_VALUE_PAST, vlen, rec_end - q, 0);
            vp = q;
            if (vlen > 0) q += vlen;
            KL_VARINT(kl_varint, &hcount, rec_end, KF_HCOUNT, 0);
            /* every header takes at least 2 bytes (two length varints) */
            if (KL_UNLIKELY(hcount < 0 || hcount > (rec_end - q) / 2))
                KL_FAIL(KE_HCOUNT, hcount, rec_end - q, 0);
            if (keep) {
                row = n;
                bit = (uint8_t)(1u << (row & 7));
                o_offset[row] = off;
                ts_ms = log_append ? max_ts
                                   : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
                /* NO_TIMESTAMP (-1) is not null: -1 ms, as Spark's Kafka source shows it */
                if (KL_UNLIKELY(ts_ms > KL_TS_MAX_MS || ts_ms < -KL_TS_MAX_MS))
                    KL_FAIL(KE_TS_RANGE, ts_ms, off, 0);
                o_ts[row] = ts_ms * 1000;
                if (klen >= 0) {
                    room = (size_t)(end - kp);
                    if ((size_t)(key_cap - key_used) < room) room = (size_t)(key_cap - key_used);
                    kl_copy_over(o_key_data + key_used, kp, (size_t)klen, room);
                    key_used += klen;
                    if (key_bm) o_key_valid[row >> 3] |= bit;
                } else {
                    if (!key_bm) { kl_bitmap_start(o_key_valid, row); key_bm = 1; }
                    key_nulls++;
                }
                o_key_off[row + 1] = (int32_t)key_used;
                if (vlen >= 0) {
                    room = (size_t)(end - vp);
                    if ((size_t)(val_cap - val_used) < room) room = (size_t)(val_cap - val_used);
                    kl_copy_over(o_val_data + val_used, vp, (size_t)vlen, room);
                    val_used += vlen;
                    if (val_bm) o_val_valid[row >> 3] |= bit;
                } else {
                    if (!val_bm) { kl_bitmap_start(o_val_valid, row); val_bm = 1; }
                    val_nulls++;
                }
                o_val_off[row + 1] = (int32_t)val_used;
                n = row + 1;
            }
            if (hcount) {
                if (keep && with_h && o->nh + hcount > o->nh_cap)
                    if (o->grow_hslots(o->owner, o->nh + hcount) < 0) {
                        err->code = KE_PYERR; goto fail_code;
                    }
                for (j = 0; j < hcount; j++) {
                    KL_VARINT(kl_varint, &hklen, rec_end, KF_HKEY_LEN, j);
                    if (KL_UNLIKELY(hklen < 0 || hklen > rec_end - q))
                        KL_FAIL(KE_HKEY, hklen, j, rec_end - q);
                    hkp = q;
                    q += hklen;
                    KL_VARINT(kl_varint, &hvlen, rec_end, KF_HVALUE_LEN, j);
                    if (KL_UNLIKELY(hvlen < -1 || hvlen > rec_end - q))
                        KL_FAIL(KE_HVALUE, hvlen, j, rec_end - q);
                    hvp = q;
                    if (hvlen > 0) q += hvlen;
                    if (keep && with_h) {
                        rc = kl_emit_header(o, hkp, hklen, hvp, hvlen, end);
                        if (rc) { err->code = rc; goto fail_code; }
                    }
                }
            }
            if (KL_UNLIKELY(q != rec_end))
                KL_FAIL(KE_REC_MISMATCH, rec_len, rec_len - (rec_end - q), 0);
            if (keep && with_h) {
                if (hcount) o_hl_valid[(n - 1) >> 3] |= (uint8_t)(1u << ((n - 1) & 7));
                else hl_nulls++;
                o_hl_off[n] = (int32_t)o->nh;
            }
            rec = rec_end;
        }
        q = rec;
        if (KL_UNLIKELY(q != end)) KL_FAIL(KE_LEFTOVER, end - q, count, 0);
        /* one timestamp type per batch: filled for its rows at once */
        for (row = o->n; row < n; row++) o_ts_type[row] = ts_type;
        o->n = n;
        o->key_used = key_used;
        o->val_used = val_used;
        o->key_nulls += key_nulls;
        o->val_nulls += val_nulls;
        o->hl_nulls += hl_nulls;
        o->key_bm = key_bm;
        o->val_bm = val_bm;
        return KE_OK;
    fail:
        return err->code;
    fail_code:
        err->rec = i;
        return err->code;
    }
    """
    uint16_t kl_be16(const uint8_t* p) noexcept nogil
    uint32_t kl_be32(const uint8_t* p) noexcept nogil
    uint64_t kl_be64(const uint8_t* p) noexcept nogil
    const uint8_t* kl_varint(const uint8_t* p, const uint8_t* end, int32_t* out,
                             int* err) noexcept nogil
    const uint8_t* kl_varlong(const uint8_t* p, const uint8_t* end, int64_t* out,
                              int* err) noexcept nogil
    int kl_utf8_valid(const uint8_t* p, size_t n) noexcept nogil
    size_t kl_utf8_fix(const uint8_t* p, size_t n, uint8_t* dst) noexcept nogil

    ctypedef int (*kl_grow_fn)(void* owner, int64_t need) except -1
    ctypedef struct kl_out:
        int64_t n, rows_cap
        int64_t* offset
        int64_t* ts
        int32_t* ts_type
        int32_t* key_off
        uint8_t* key_valid
        uint8_t* key_data
        int64_t key_used, key_cap
        int32_t* val_off
        uint8_t* val_valid
        uint8_t* val_data
        int64_t val_used, val_cap
        int with_headers
        int32_t* hl_off
        uint8_t* hl_valid
        int64_t nh, nh_cap
        int32_t* hk_off
        uint8_t* hk_data
        int64_t hk_used, hk_cap
        int32_t* hv_off
        uint8_t* hv_valid
        uint8_t* hv_data
        int64_t hv_used, hv_cap
        int64_t key_nulls, val_nulls, hl_nulls, hv_nulls
        int key_bm, val_bm
        void* owner
        kl_grow_fn grow_hslots
        kl_grow_fn grow_hk
        kl_grow_fn grow_hv
    ctypedef struct kl_err:
        int code
        int64_t rec, a, b, c
    enum:
        KE_OK, KE_PYERR, KE_VARINT_TRUNC, KE_VARINT_LONG, KE_REC_NEG, KE_REC_PAST,
        KE_REC_EMPTY, KE_KEY_LEN, KE_KEY_PAST, KE_VALUE_LEN, KE_VALUE_PAST, KE_HCOUNT,
        KE_HKEY, KE_HVALUE, KE_REC_MISMATCH, KE_LEFTOVER, KE_TS_RANGE, KE_TOO_BIG
    void kl_copy(uint8_t* d, const uint8_t* s, size_t n) noexcept nogil
    void kl_bitmap_start(uint8_t* bm, int64_t r) noexcept nogil
    int kl_v2_records(kl_out* o, const uint8_t* p, int64_t plen, int32_t count,
                      int64_t base_offset, int64_t base_ts, int64_t max_ts, int log_append,
                      int64_t lo, int64_t hi, int hi_set, kl_err* err) noexcept

kl_crc32_init()
kl_crc32c_init()

# ---- C: the codec framings (lz4, snappy, the zstd frame walk) ------------------------------
cdef extern from "_framing.h":
    ctypedef struct kl_ferr:
        int code
        uint64_t pos, a, b
    enum:
        KL_SLACK
        KF_OK, KF_TOO_LARGE, KF_EMPTY, KF_STRAY, KF_SKIP_TRUNC, KF_SKIP_PAST, KF_LZ4_MAGIC,
        KF_LZ4_HEADER_TRUNC, KF_LZ4_VERSION, KF_LZ4_RESERVED, KF_LZ4_DICT, KF_LZ4_BLOCK_ID,
        KF_LZ4_HC, KF_LZ4_NO_END, KF_LZ4_BLOCK_BIG, KF_LZ4_BLOCK_PAST, KF_LZ4_CSUM_TRUNC,
        KF_LZ4_SIZE_CAP, KF_LZ4_BLOCK_SUM, KF_LZ4_BLOCK_BAD, KF_LZ4_BLOCK_OVER,
        KF_LZ4_SIZE_MISMATCH, KF_LZ4_CSUM, KF_SNAPPY_HEADER_TRUNC, KF_SNAPPY_LEN_TRUNC,
        KF_SNAPPY_BLOCK_PAST, KF_SNAPPY_PREAMBLE, KF_SNAPPY_DECLARED, KF_SNAPPY_BLOCK_BAD,
        KF_ZSTD_MAGIC, KF_ZSTD_HEADER_TRUNC, KF_ZSTD_RESERVED, KF_ZSTD_TRUNC,
        KF_ZSTD_BLOCK_TYPE, KF_ZSTD_BLOCK_BIG, KF_ZSTD_BLOCK_PAST, KF_ZSTD_CSUM_TRUNC
    enum:
        KL_LZ4_MAGIC, KL_XERIAL_HEADER_SIZE, KL_ZSTD_MAGIC
    ctypedef struct kl_zstd_frame:
        size_t start, end
        int has_size, dict
        uint64_t content_size, bound
    const uint8_t kl_xerial_magic[8]
    int kl_lz4_walk(const uint8_t* src, size_t n, int magic, uint64_t* bound,
                    kl_ferr* e) noexcept nogil
    int64_t kl_lz4_decode(const uint8_t* src, size_t n, int magic, uint8_t* dst, size_t cap,
                          kl_ferr* e) noexcept nogil
    int kl_snappy_walk(const uint8_t* src, size_t n, uint64_t max_size, uint64_t* total,
                       kl_ferr* e) noexcept nogil
    int kl_snappy_decode(const uint8_t* src, size_t n, uint8_t* dst, kl_ferr* e) noexcept nogil
    int kl_zstd_next(const uint8_t* src, size_t n, size_t* pos, kl_zstd_frame* f,
                     kl_ferr* e) noexcept nogil
    int64_t kl_zstd_sized_frame(const uint8_t* src, size_t n) noexcept nogil

# Arrow types, built once (constructing some, e.g. a timestamp with a time zone, costs
# microseconds per call)
_T_BINARY = SCHEMA.field("key").type
_T_STRING = SCHEMA.field("topic").type
_T_INT32 = SCHEMA.field("partition").type
_T_INT64 = SCHEMA.field("offset").type
_T_TIMESTAMP = SCHEMA.field("timestamp").type
_T_HEADER_KEY = HEADER_TYPE.field("key").type
_T_HEADER_VALUE = HEADER_TYPE.field("value").type

# ---- batch headers: the layout is _wire.pxd's (wire.py's names) ----------------------------
cdef extern from "<stdint.h>":
    const int32_t INT32_MAX
    const int64_t INT64_MAX
    const int64_t INT64_MIN

#: timestamps are stored in microseconds: |ms| beyond this overflows int64
cdef int64_t TS_MAX_MS = 9223372036854775

cdef enum:
    # _peek results
    PEEK_OK = 0
    PEEK_SHORT = 1               # torn: fewer than HEADER_PEEK bytes
    PEEK_PAST_END = 2            # torn: a plausible length running past the end
    PEEK_BAD_MAGIC = 3
    PEEK_BAD_LENGTH = 4
    PEEK_BAD_COUNT = 5
    PEEK_BAD_LAST_DELTA = 6
    # _parse_legacy results
    LEG_OK = 0
    LEG_SHORT = 1                # fewer than LOG_OVERHEAD bytes for an inner entry
    LEG_BAD_SIZE = 2
    LEG_PAST_END = 3
    LEG_BAD_MAGIC = 4
    LEG_KEY_LEN = 5
    LEG_KEY_PAST = 6
    LEG_VALUE_LEN = 7
    LEG_VALUE_PAST = 8
    LEG_LEFTOVER = 9

cdef struct Hdr:
    # the fields of one top-level batch header (v2), or of a legacy entry
    int64_t base_offset
    int32_t length
    int32_t leader_epoch
    int8_t magic
    uint32_t crc
    int16_t attributes
    int32_t last_offset_delta
    int64_t first_ts
    int64_t max_ts
    int64_t producer_id
    int16_t producer_epoch
    int32_t base_sequence
    int32_t count


cdef struct LMsg:
    # one legacy (magic 0/1) message
    int64_t offset
    int32_t size
    uint32_t crc
    int8_t magic
    uint8_t attributes
    int64_t timestamp
    const uint8_t* key
    int32_t key_len          # -1: null
    const uint8_t* value
    int32_t value_len        # -1: null


cdef inline int _peek(const uint8_t* p, int64_t avail, Hdr* h) noexcept nogil:
    """Read the header of the batch / legacy entry at ``p`` (``avail`` bytes left) and
    check what can be checked without its records: magic, length, and for v2 the record
    count and last offset delta. The result says torn (a proper prefix of a batch) or
    corrupt (cannot be a batch)."""
    if avail < HEADER_PEEK:
        if avail >= 8:
            h.base_offset = <int64_t>kl_be64(p)
        return PEEK_SHORT
    h.base_offset = <int64_t>kl_be64(p + OFFSET_POS)
    h.length = <int32_t>kl_be32(p + SIZE_POS)
    h.magic = <int8_t>p[MAGIC_POS]
    if h.magic == 2:
        if h.length < V2_MIN_BATCH_LENGTH:
            return PEEK_BAD_LENGTH
    elif h.magic == 1:
        if h.length < LEGACY_V1_MIN_SIZE:
            return PEEK_BAD_LENGTH
    elif h.magic == 0:
        if h.length < LEGACY_V0_MIN_SIZE:
            return PEEK_BAD_LENGTH
    else:
        return PEEK_BAD_MAGIC
    if <int64_t>h.length > avail - LOG_OVERHEAD:
        return PEEK_PAST_END
    if h.magic == 2:
        h.leader_epoch = <int32_t>kl_be32(p + V2_PARTITION_LEADER_EPOCH_POS)
        h.crc = kl_be32(p + V2_CRC_POS)
        h.attributes = <int16_t>kl_be16(p + V2_ATTRIBUTES_POS)
        h.last_offset_delta = <int32_t>kl_be32(p + V2_LAST_OFFSET_DELTA_POS)
        h.first_ts = <int64_t>kl_be64(p + V2_BASE_TIMESTAMP_POS)
        h.max_ts = <int64_t>kl_be64(p + V2_MAX_TIMESTAMP_POS)
        h.producer_id = <int64_t>kl_be64(p + V2_PRODUCER_ID_POS)
        h.producer_epoch = <int16_t>kl_be16(p + V2_PRODUCER_EPOCH_POS)
        h.base_sequence = <int32_t>kl_be32(p + V2_BASE_SEQUENCE_POS)
        h.count = <int32_t>kl_be32(p + V2_RECORD_COUNT_POS)
        if h.count < 0:
            return PEEK_BAD_COUNT
        if h.last_offset_delta < 0:
            return PEEK_BAD_LAST_DELTA
    else:
        h.leader_epoch = -1
        h.crc = kl_be32(p + LEGACY_CRC_POS)
        h.attributes = p[LEGACY_ATTRIBUTES_POS]
        h.last_offset_delta = 0
        if h.magic == 1:
            h.first_ts = <int64_t>kl_be64(p + LEGACY_V1_TIMESTAMP_POS)
        else:
            h.first_ts = NO_TIMESTAMP
        h.max_ts = h.first_ts
        h.producer_id = NO_PRODUCER_ID
        h.producer_epoch = NO_PRODUCER_EPOCH
        h.base_sequence = NO_SEQUENCE
        h.count = 1
    return PEEK_OK


cdef str _peek_reason(int code, Hdr* h, int64_t avail):
    if code == PEEK_SHORT:
        return (f"partial batch at the end of the data: {avail} bytes left, fewer than "
                f"the {HEADER_PEEK} every batch starts with")
    if code == PEEK_PAST_END:
        return (f"partial batch at the end of the data: magic {h.magic} batch of "
                f"{LOG_OVERHEAD + <int64_t>h.length} bytes, only {avail} bytes left")
    if code == PEEK_BAD_MAGIC:
        return f"unknown magic byte {h.magic} (expected 0, 1 or 2)"
    if code == PEEK_BAD_LENGTH:
        minimum = V2_MIN_BATCH_LENGTH if h.magic == 2 else (LEGACY_V1_MIN_SIZE if h.magic == 1
                                                      else LEGACY_V0_MIN_SIZE)
        return (f"impossible batch length {h.length} for magic {h.magic} "
                f"(at least {minimum})")
    if code == PEEK_BAD_COUNT:
        return f"negative record count {h.count} in v2 batch header"
    if code == PEEK_BAD_LAST_DELTA:
        return f"negative lastOffsetDelta {h.last_offset_delta} in v2 batch header"
    return f"bad batch header (code {code})"


cdef inline int _parse_legacy(const uint8_t* p, int64_t avail, LMsg* m) noexcept nogil:
    """Parse the legacy entry at ``p`` (``avail`` bytes left): offset, size, crc, magic,
    attributes, [timestamp], key, value. The key and value must fill the message
    exactly. CRC is not checked here."""
    cdef int64_t size, q, end
    cdef int32_t klen, vlen
    m.magic = -1
    m.size = 0
    m.key_len = 0
    m.value_len = 0
    if avail < LOG_OVERHEAD:
        return LEG_SHORT
    m.offset = <int64_t>kl_be64(p + OFFSET_POS)
    m.size = <int32_t>kl_be32(p + SIZE_POS)
    size = m.size
    if size < LEGACY_V0_MIN_SIZE:
        return LEG_BAD_SIZE
    if size > avail - LOG_OVERHEAD:
        return LEG_PAST_END
    end = LOG_OVERHEAD + size
    m.crc = kl_be32(p + LEGACY_CRC_POS)
    m.magic = <int8_t>p[LEGACY_MAGIC_POS]
    m.attributes = p[LEGACY_ATTRIBUTES_POS]
    if m.magic == 0:
        m.timestamp = NO_TIMESTAMP
        q = LEGACY_V0_KEY_POS
    elif m.magic == 1:
        if size < LEGACY_V1_MIN_SIZE:
            return LEG_BAD_SIZE
        m.timestamp = <int64_t>kl_be64(p + LEGACY_V1_TIMESTAMP_POS)
        q = LEGACY_V1_KEY_POS
    else:
        return LEG_BAD_MAGIC
    klen = <int32_t>kl_be32(p + q)
    q += 4
    if klen < -1:
        m.key_len = klen
        return LEG_KEY_LEN
    if klen > end - q - 4:
        m.key_len = klen
        return LEG_KEY_PAST
    m.key = p + q
    m.key_len = klen
    if klen > 0:
        q += klen
    vlen = <int32_t>kl_be32(p + q)
    q += 4
    m.value_len = vlen
    if vlen < -1:
        return LEG_VALUE_LEN
    if vlen > end - q:
        return LEG_VALUE_PAST
    m.value = p + q
    if vlen > 0:
        q += vlen
    if q != end:
        return LEG_LEFTOVER
    return LEG_OK


cdef str _legacy_reason(int code, LMsg* m, int64_t avail):
    if code == LEG_SHORT:
        return f"partial message: {avail} bytes left, fewer than {LOG_OVERHEAD}"
    if code == LEG_BAD_SIZE:
        return f"impossible message size {m.size} for magic {m.magic}"
    if code == LEG_PAST_END:
        return (f"message of {LOG_OVERHEAD + <int64_t>m.size} bytes runs past the end "
                f"({avail} bytes left)")
    if code == LEG_BAD_MAGIC:
        return f"unknown magic byte {m.magic} in a legacy message"
    if code == LEG_KEY_LEN:
        return f"invalid key length {m.key_len}"
    if code == LEG_KEY_PAST:
        return f"key length {m.key_len} runs past the end of the message"
    if code == LEG_VALUE_LEN:
        return f"invalid value length {m.value_len}"
    if code == LEG_VALUE_PAST:
        return f"value length {m.value_len} runs past the end of the message"
    if code == LEG_LEFTOVER:
        return "key and value do not fill the message (bytes left over)"
    return f"bad legacy message (code {code})"


cdef inline bint _ts_out_of_range(int64_t ms) noexcept nogil:
    return ms > TS_MAX_MS or ms < -TS_MAX_MS


# ---- growable Arrow buffers ----------------------------------------------------------------

# ---- big output buffers: a small cache of mapped blocks -------------------------------------
cdef extern from *:
    """
    #include <sys/mman.h>
    /* Output buffers of 1 MiB and more come from anonymous mappings that are cached
       when the Arrow buffers over them are released, and handed out again by the next
       decode call. Fresh memory from the OS is zeroed by the kernel page by page on
       first touch; for a decode call that writes ~150 bytes of output per record that
       zeroing (and, for transparent huge pages, finding and compacting free 2 MiB
       pages) costs as much as a fifth of the call, and pyarrow's allocator returns big
       blocks to the OS between calls. The cache is bounded (kl_cache_limit bytes of
       idle blocks, KL_CACHE_SLOTS blocks; the oldest are unmapped first). */
    #define KL_BLOCK_MIN ((size_t)1 << 20)
    #define KL_BLOCK_ROUND ((size_t)2 << 20)
    #define KL_CACHE_SLOTS 32
    static uint8_t* kl_cache_p[KL_CACHE_SLOTS];
    static size_t kl_cache_cap[KL_CACHE_SLOTS];
    static int kl_ncache = 0;
    static size_t kl_cache_bytes = 0;
    static size_t kl_cache_limit = (size_t)384 << 20;

    static void kl_cache_drop(int i) {
        munmap(kl_cache_p[i], kl_cache_cap[i]);
        kl_cache_bytes -= kl_cache_cap[i];
        memmove(kl_cache_p + i, kl_cache_p + i + 1, (size_t)(kl_ncache - i - 1) * sizeof(uint8_t*));
        memmove(kl_cache_cap + i, kl_cache_cap + i + 1, (size_t)(kl_ncache - i - 1) * sizeof(size_t));
        kl_ncache--;
    }

    /* A block of at least `need` bytes (*cap gets its size), or NULL. A cached block is
       taken when it is no more than twice (plus one rounding step) the request. */
    static uint8_t* kl_block_get(size_t need, size_t* cap) {
        int i, best = -1;
        size_t want = (need + KL_BLOCK_ROUND - 1) / KL_BLOCK_ROUND * KL_BLOCK_ROUND;
        void* p;
        for (i = 0; i < kl_ncache; i++)
            if (kl_cache_cap[i] >= want && kl_cache_cap[i] <= 2 * want + KL_BLOCK_ROUND
                && (best < 0 || kl_cache_cap[i] < kl_cache_cap[best]))
                best = i;
        if (best >= 0) {
            uint8_t* b = kl_cache_p[best];
            *cap = kl_cache_cap[best];
            kl_cache_bytes -= kl_cache_cap[best];
            memmove(kl_cache_p + best, kl_cache_p + best + 1,
                    (size_t)(kl_ncache - best - 1) * sizeof(uint8_t*));
            memmove(kl_cache_cap + best, kl_cache_cap + best + 1,
                    (size_t)(kl_ncache - best - 1) * sizeof(size_t));
            kl_ncache--;
            return b;
        }
        p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
    #ifdef MADV_HUGEPAGE
        madvise(p, want, MADV_HUGEPAGE);
    #endif
        *cap = want;
        return (uint8_t*)p;
    }

    /* Give a block back: cached (evicting the oldest) when it fits the limit, else unmapped. */
    static void kl_block_put(uint8_t* p, size_t cap) {
        if (cap > kl_cache_limit) { munmap(p, cap); return; }
        while (kl_ncache && (kl_ncache == KL_CACHE_SLOTS || kl_cache_bytes + cap > kl_cache_limit))
            kl_cache_drop(0);
        kl_cache_p[kl_ncache] = p;
        kl_cache_cap[kl_ncache] = cap;
        kl_ncache++;
        kl_cache_bytes += cap;
    }

    static void kl_cache_set_limit(size_t limit) {
        kl_cache_limit = limit;
        while (kl_ncache && kl_cache_bytes > kl_cache_limit) kl_cache_drop(0);
    }
    """
    size_t KL_BLOCK_MIN
    int kl_ncache
    size_t kl_cache_bytes
    size_t kl_cache_limit
    uint8_t* kl_block_get(size_t need, size_t* cap) noexcept nogil
    void kl_block_put(uint8_t* p, size_t cap) noexcept nogil
    void kl_cache_set_limit(size_t limit) noexcept nogil


cdef class _Block:
    """One mapped block (see kl_block_get); the base object of the Arrow buffers made
    over it. Released, it goes back to the cache."""
    cdef uint8_t* ptr
    cdef size_t cap

    def __dealloc__(self):
        if self.ptr != NULL:
            kl_block_put(self.ptr, self.cap)
            self.ptr = NULL


cdef _Block _new_block(int64_t need):
    cdef _Block b = _Block.__new__(_Block)
    b.ptr = kl_block_get(<size_t>need, &b.cap)
    if b.ptr == NULL:
        raise MemoryError(f"cannot map {need} bytes for decoded output")
    return b


def set_block_cache_limit(int64_t limit):
    """Bound the idle output blocks kept for reuse to ``limit`` bytes (0: keep none);
    returns the previous limit. Blocks already cached beyond it are unmapped."""
    cdef size_t old = kl_cache_limit
    if limit < 0:
        raise InvalidOptionError("the block cache limit must be >= 0")
    kl_cache_set_limit(<size_t>limit)
    return old


def block_cache_info():
    """(number of cached blocks, their bytes, the limit) -- test hook."""
    return kl_ncache, kl_cache_bytes, kl_cache_limit


cdef class _Growable:
    """One resizable output buffer reached through a raw pointer: below KL_BLOCK_MIN a
    buffer from pyarrow's memory pool, from there on a cached mapped block (_Block).
    Growth is the only Python call; it happens a logarithmic number of times."""
    cdef object buf
    cdef _Block blk
    cdef uint8_t* ptr
    cdef int64_t cap

    cdef int resize(self, int64_t nbytes, bint zero_new) except -1:
        cdef int64_t old = self.cap
        cdef _Block nb
        if nbytes < 64:
            nbytes = 64            # never empty: the address stays valid
        if self.blk is not None and <size_t>nbytes <= self.blk.cap:
            pass                   # the block has room: no move
        elif self.blk is not None or <size_t>nbytes >= KL_BLOCK_MIN:
            nb = _new_block(nbytes)
            if old:
                memcpy(nb.ptr, self.ptr, <size_t>min(old, nbytes))
            self.blk = nb          # the old block (if any) goes back to the cache
            self.buf = None
            self.ptr = nb.ptr
        elif self.buf is None:
            self.buf = pa.allocate_buffer(nbytes, resizable=True)
            old = 0
            self.ptr = <uint8_t*><uintptr_t>self.buf.address
        else:
            self.buf.resize(nbytes)
            self.ptr = <uint8_t*><uintptr_t>self.buf.address
        # a block's whole size is usable: growth within it costs nothing
        self.cap = <int64_t>self.blk.cap if self.blk is not None else nbytes
        if zero_new and self.cap > old:
            memset(self.ptr + old, 0, <size_t>(self.cap - old))
        return 0

    cdef object finish(self, int64_t nbytes):
        """The buffer trimmed to ``nbytes`` (the pool may shrink it in place); a mapped
        block is handed over whole, the Arrow buffer covering its first ``nbytes``."""
        if self.blk is not None:
            buf = pa.foreign_buffer(<uintptr_t>self.ptr, nbytes, base=self.blk)
            self.blk = None
        elif self.buf is None:
            return pa.allocate_buffer(0)
        else:
            if nbytes < self.cap:
                self.buf.resize(nbytes, shrink_to_fit=True)
            buf = self.buf
            self.buf = None
        self.ptr = NULL
        self.cap = 0
        return buf


cdef inline int64_t _bitmap_bytes(int64_t bits) noexcept nogil:
    return (bits + 7) >> 3


cdef struct Params:
    bint verify_crc
    int64_t max_decompressed
    int64_t lo
    int64_t hi
    bint hi_set
    int64_t position_base
    const int64_t* skip
    int64_t nskip


cdef class _Sink:
    """Output columns of one decode call: a ``kl_out`` of raw pointers into buffers from
    pyarrow's memory pool (see the C struct), plus growth and the final assembly.

    Row arrays: offset int64, timestamp int64 (+ validity), timestampType int32,
    key/value int32 offsets (+ validity), header list int32 offsets (+ validity). Byte
    arrays: key, value, header key, header value data. Header slots: header key/value
    int32 offsets, header value validity.
    """
    cdef kl_out o
    cdef _Growable g_offset, g_ts, g_ts_type
    cdef _Growable g_key_off, g_key_valid, g_key_data
    cdef _Growable g_val_off, g_val_valid, g_val_data
    cdef _Growable g_hl_off, g_hl_valid
    cdef _Growable g_hk_off, g_hk_data, g_hv_off, g_hv_valid, g_hv_data
    # where the batch being decoded is, for error messages
    cdef int64_t where_pos, where_off
    # decompressed payload of the batch being decoded (lz4 and snappy, by _framing.h);
    # reused per batch, at most max_decompressed + KL_SLACK bytes
    cdef uint8_t* scratch
    cdef int64_t scratch_cap
    # this thread's zstandard decompress function (looked up once per call), or False
    # when zstandard is missing (the registry then raises MissingCodecError)
    cdef object zstd_decompress

    def __dealloc__(self):
        PyMem_Free(self.scratch)

    cdef int ensure_scratch(self, int64_t need) except -1:
        cdef int64_t cap
        cdef void* p
        if need <= self.scratch_cap:
            return 0
        cap = max(need, 2 * self.scratch_cap, 65536 + KL_SLACK)
        p = PyMem_Realloc(self.scratch, <size_t>cap)
        if p == NULL:
            raise MemoryError(f"cannot allocate {cap} bytes for a decompressed batch")
        self.scratch = <uint8_t*>p
        self.scratch_cap = cap
        return 0

    def __cinit__(self, bint with_headers):
        memset(&self.o, 0, sizeof(kl_out))
        self.o.with_headers = with_headers
        self.o.owner = <void*>self
        self.o.grow_hslots = _cb_grow_hslots
        self.o.grow_hk = _cb_grow_hk
        self.o.grow_hv = _cb_grow_hv
        self.g_offset = _Growable(); self.g_ts = _Growable()
        self.g_ts_type = _Growable()
        self.g_key_off = _Growable(); self.g_key_valid = _Growable()
        self.g_key_data = _Growable()
        self.g_val_off = _Growable(); self.g_val_valid = _Growable()
        self.g_val_data = _Growable()
        self.g_hl_off = _Growable(); self.g_hl_valid = _Growable()
        self.g_hk_off = _Growable(); self.g_hk_data = _Growable()
        self.g_hv_off = _Growable(); self.g_hv_valid = _Growable()
        self.g_hv_data = _Growable()

    cdef int setup(self, int64_t rows, int64_t kv_bytes) except -1:
        self.grow_rows(rows)
        self.o.key_off[0] = 0
        self.o.val_off[0] = 0
        # keys and values share each payload byte budget, and keys are usually the
        # small part: the key buffer starts at a quarter of the bound and grows (per
        # batch, reserve_kv makes room for the whole payload) when keys are bigger
        self.grow_key(kv_bytes // 4, 0)
        self.grow_val(kv_bytes, 0)
        if self.o.with_headers:
            self.o.hl_off[0] = 0
            # a start proportional to the input (headers on a fraction of the records)
            # saves the many doublings from a tiny size, and the copies they make
            self.grow_hslots(max(16, rows // 8))
            self.o.hk_off[0] = 0
            self.o.hv_off[0] = 0
            self.grow_hk(max(256, kv_bytes // 128))
            self.grow_hv(max(256, kv_bytes // 64))
        return 0

    cdef object error(self, str reason, type cls=CorruptRecordError):
        return cls(reason, position=self.where_pos, offset=self.where_off)

    # -- growth (rare: a logarithmic number of times) --
    cdef int grow_rows(self, int64_t need) except -1:
        cdef int64_t cap = need
        if self.o.rows_cap and cap < 2 * self.o.rows_cap:
            cap = 2 * self.o.rows_cap
        if cap < 64:
            cap = 64
        self.g_offset.resize(cap * 8, False); self.o.offset = <int64_t*>self.g_offset.ptr
        self.g_ts.resize(cap * 8, False); self.o.ts = <int64_t*>self.g_ts.ptr
        self.g_ts_type.resize(cap * 4, False); self.o.ts_type = <int32_t*>self.g_ts_type.ptr
        self.g_key_off.resize((cap + 1) * 4, False)
        self.o.key_off = <int32_t*>self.g_key_off.ptr
        self.g_key_valid.resize(_bitmap_bytes(cap), True)
        self.o.key_valid = self.g_key_valid.ptr
        self.g_val_off.resize((cap + 1) * 4, False)
        self.o.val_off = <int32_t*>self.g_val_off.ptr
        self.g_val_valid.resize(_bitmap_bytes(cap), True)
        self.o.val_valid = self.g_val_valid.ptr
        if self.o.with_headers:
            self.g_hl_off.resize((cap + 1) * 4, False)
            self.o.hl_off = <int32_t*>self.g_hl_off.ptr
            self.g_hl_valid.resize(_bitmap_bytes(cap), True)
            self.o.hl_valid = self.g_hl_valid.ptr
        self.o.rows_cap = cap
        return 0

    cdef inline int reserve_rows(self, int64_t extra) except -1:
        if self.o.n + extra > self.o.rows_cap:
            self.grow_rows(self.o.n + extra)
        return 0

    cdef int too_big(self, str what) except -1:
        raise self.error(
            f"decoded {what} data would exceed 2 GiB, the most one Arrow binary column "
            f"holds; decode a smaller range of batches", KafkaLogError)

    cdef int64_t _grown(self, str what, int64_t need, int64_t cap, int64_t est) except -1:
        """New capacity of a data buffer (int32 offsets: at most 2 GiB)."""
        cdef int64_t new = need
        if need > INT32_MAX:
            self.too_big(what)
        if new < 2 * cap:
            new = 2 * cap
        if new < est:
            new = est
        return min(new, <int64_t>INT32_MAX)

    cdef int grow_key(self, int64_t need, int64_t est) except -1:
        self.g_key_data.resize(self._grown("key", need, self.o.key_cap, est), False)
        self.o.key_data = self.g_key_data.ptr
        self.o.key_cap = min(self.g_key_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef int grow_val(self, int64_t need, int64_t est) except -1:
        self.g_val_data.resize(self._grown("value", need, self.o.val_cap, est), False)
        self.o.val_data = self.g_val_data.ptr
        self.o.val_cap = min(self.g_val_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef inline int reserve_kv(self, int64_t extra, int64_t est) except -1:
        """Room for ``extra`` more bytes of keys and of values (one batch's payload is an
        upper bound of both); ``est`` is a hint of the final size."""
        if self.o.key_used + extra > self.o.key_cap:
            self.grow_key(self.o.key_used + extra, est // 4)
        if self.o.val_used + extra > self.o.val_cap:
            self.grow_val(self.o.val_used + extra, est)
        return 0

    cdef int grow_hslots(self, int64_t need) except -1:
        cdef int64_t cap = need
        if cap < 2 * self.o.nh_cap:
            cap = 2 * self.o.nh_cap
        if cap > INT32_MAX:
            self.too_big("header")
        self.g_hk_off.resize((cap + 1) * 4, False); self.o.hk_off = <int32_t*>self.g_hk_off.ptr
        self.g_hv_off.resize((cap + 1) * 4, False); self.o.hv_off = <int32_t*>self.g_hv_off.ptr
        self.g_hv_valid.resize(_bitmap_bytes(cap), True); self.o.hv_valid = self.g_hv_valid.ptr
        self.o.nh_cap = cap
        return 0

    cdef int grow_hk(self, int64_t need) except -1:
        self.g_hk_data.resize(self._grown("header key", need, self.o.hk_cap, 0), False)
        self.o.hk_data = self.g_hk_data.ptr
        self.o.hk_cap = min(self.g_hk_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef int grow_hv(self, int64_t need) except -1:
        self.g_hv_data.resize(self._grown("header value", need, self.o.hv_cap, 0), False)
        self.o.hv_data = self.g_hv_data.ptr
        self.o.hv_cap = min(self.g_hv_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    # -- records --
    cdef int v2_records(self, const uint8_t* p, int64_t plen, Hdr* h, Params* prm) except -1:
        """The records of one v2 batch (``p``: its uncompressed payload). The caller
        reserved ``h.count`` rows and ``plen`` bytes of key and value data."""
        cdef kl_err err
        cdef int rc
        memset(&err, 0, sizeof(kl_err))
        rc = kl_v2_records(&self.o, p, plen, h.count, h.base_offset, h.first_ts, h.max_ts,
                           (h.attributes & ATTR_TIMESTAMP_TYPE) != 0, prm.lo, prm.hi, prm.hi_set,
                           &err)
        if rc == KE_OK:
            return 0
        if rc == KE_PYERR:
            return -1                   # a growth callback raised; the error is set
        if rc == KE_TOO_BIG:
            self.too_big("header key")
        raise self.error(_record_reason(&err),
                         UnsupportedFormatError if rc == KE_TS_RANGE else CorruptRecordError)

    cdef int emit_legacy(self, LMsg* m, int64_t off, int64_t ts_ms, int32_t ts_type) except -1:
        """One legacy message (an uncompressed entry or an inner message of a wrapper)."""
        cdef int64_t row, klen = m.key_len, vlen = m.value_len
        cdef kl_out* o = &self.o
        if o.n >= o.rows_cap:
            self.grow_rows(o.n + 1)
        if klen > 0 and o.key_used + klen > o.key_cap:
            self.grow_key(o.key_used + klen, 0)
        if vlen > 0 and o.val_used + vlen > o.val_cap:
            self.grow_val(o.val_used + vlen, 0)
        row = o.n
        o.offset[row] = off
        # NO_TIMESTAMP (-1, every magic 0 message) is -1 ms, as in Spark's Kafka source
        if _ts_out_of_range(ts_ms):
            raise self.error(f"message at offset {off}: timestamp {ts_ms} ms is outside "
                             f"the range of timestamp[us]", UnsupportedFormatError)
        o.ts[row] = ts_ms * 1000
        o.ts_type[row] = ts_type
        if klen >= 0:
            kl_copy(o.key_data + o.key_used, m.key, <size_t>klen)
            o.key_used += klen
            if o.key_bm:
                o.key_valid[row >> 3] |= <uint8_t>(1 << (row & 7))
        else:
            if not o.key_bm:
                kl_bitmap_start(o.key_valid, row)
                o.key_bm = 1
            o.key_nulls += 1
        o.key_off[row + 1] = <int32_t>o.key_used
        if vlen >= 0:
            kl_copy(o.val_data + o.val_used, m.value, <size_t>vlen)
            o.val_used += vlen
            if o.val_bm:
                o.val_valid[row >> 3] |= <uint8_t>(1 << (row & 7))
        else:
            if not o.val_bm:
                kl_bitmap_start(o.val_valid, row)
                o.val_bm = 1
            o.val_nulls += 1
        o.val_off[row + 1] = <int32_t>o.val_used
        if o.with_headers:
            o.hl_off[row + 1] = <int32_t>o.nh
            o.hl_nulls += 1
        o.n = row + 1
        return 0

    cdef object finish(self, str topic, int32_t partition):
        """The columns as a RecordBatch; the buffers are handed over (trimmed)."""
        cdef kl_out* o = &self.o
        cdef int64_t n = o.n, i, tlen, filled, total
        cdef bytes tbytes = topic.encode("utf-8")
        cdef int32_t* ip
        cdef _Growable g
        tlen = PyBytes_GET_SIZE(tbytes)
        total = n * tlen
        if total > INT32_MAX:
            raise KafkaLogError(f"{n} rows of topic {topic!r} exceed 2 GiB in the topic "
                                f"column; decode a smaller range of batches")
        # the constant columns, filled by doubling copies (a few memcpy calls whatever n)
        g = _Growable()
        g.resize(max(n, 1) * 4, False)
        _fill_repeat(g.ptr, <const uint8_t*>&partition, 4, max(n, 1) * 4)
        part_buf = g.finish(max(n, 1) * 4)
        g.resize((n + 1) * 4, False)
        ip = <int32_t*>g.ptr
        if tlen == 0:
            memset(ip, 0, <size_t>((n + 1) * 4))
        else:
            for i in range(n + 1):
                ip[i] = <int32_t>(i * tlen)
        toff_buf = g.finish((n + 1) * 4)
        g.resize(max(total, 1), False)
        if total > 0:
            _fill_repeat(g.ptr, <const uint8_t*>PyBytes_AS_STRING(tbytes), tlen, total)
        tdata_buf = g.finish(max(total, 1))

        bm = _bitmap_bytes(n)
        key = pa.Array.from_buffers(
            _T_BINARY, n,
            [self.g_key_valid.finish(bm) if o.key_nulls else None,
             self.g_key_off.finish((n + 1) * 4), self.g_key_data.finish(o.key_used)],
            null_count=o.key_nulls)
        value = pa.Array.from_buffers(
            _T_BINARY, n,
            [self.g_val_valid.finish(bm) if o.val_nulls else None,
             self.g_val_off.finish((n + 1) * 4), self.g_val_data.finish(o.val_used)],
            null_count=o.val_nulls)
        topic_arr = pa.Array.from_buffers(_T_STRING, n, [None, toff_buf, tdata_buf],
                                          null_count=0)
        part_arr = pa.Array.from_buffers(_T_INT32, n, [None, part_buf], null_count=0)
        off_arr = pa.Array.from_buffers(_T_INT64, n, [None, self.g_offset.finish(n * 8)],
                                        null_count=0)
        ts_arr = pa.Array.from_buffers(
            _T_TIMESTAMP, n,
            [None, self.g_ts.finish(n * 8)], null_count=0)
        tst_arr = pa.Array.from_buffers(_T_INT32, n, [None, self.g_ts_type.finish(n * 4)],
                                        null_count=0)
        cols = [key, value, topic_arr, part_arr, off_arr, ts_arr, tst_arr]
        if o.with_headers:
            nh = o.nh
            hk = pa.Array.from_buffers(
                _T_HEADER_KEY, nh,
                [None, self.g_hk_off.finish((nh + 1) * 4), self.g_hk_data.finish(o.hk_used)],
                null_count=0)
            hv = pa.Array.from_buffers(
                _T_HEADER_VALUE, nh,
                [self.g_hv_valid.finish(_bitmap_bytes(nh)) if o.hv_nulls else None,
                 self.g_hv_off.finish((nh + 1) * 4), self.g_hv_data.finish(o.hv_used)],
                null_count=o.hv_nulls)
            st = pa.Array.from_buffers(HEADER_TYPE, nh, [None], null_count=0,
                                       children=[hk, hv])
            hl = pa.Array.from_buffers(
                HEADERS_TYPE, n,
                [self.g_hl_valid.finish(bm) if o.hl_nulls else None,
                 self.g_hl_off.finish((n + 1) * 4)],
                null_count=o.hl_nulls, children=[st])
            cols.append(hl)
        return pa.RecordBatch.from_arrays(cols, schema=record_schema(o.with_headers))


cdef inline void _fill_repeat(uint8_t* dst, const uint8_t* unit, int64_t unit_len,
                              int64_t total) noexcept nogil:
    """dst[0:total] = unit repeated (total a multiple of unit_len), by doubling copies."""
    cdef int64_t filled = unit_len, k
    memcpy(dst, unit, <size_t>unit_len)
    while filled < total:
        k = min(filled, total - filled)
        memcpy(dst + filled, dst, <size_t>k)
        filled += k


cdef int _cb_grow_hslots(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hslots(need)


cdef int _cb_grow_hk(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hk(need)


cdef int _cb_grow_hv(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hv(need)


_FIELD_NAMES = ("length", "timestampDelta", "offsetDelta", "key length", "value length",
                "header count", "header key length", "header value length")


cdef str _record_reason(kl_err* e):
    """The message for an error code of kl_v2_records."""
    cdef int64_t i = e.rec
    c = e.code
    if c == KE_VARINT_TRUNC or c == KE_VARINT_LONG:
        what = _FIELD_NAMES[e.a] if 0 <= e.a < len(_FIELD_NAMES) else "?"
        if e.a >= 6:
            what = f"header {e.b} {what[7:]}"
        how = ("runs past the end of its record" if c == KE_VARINT_TRUNC
               else "is longer than Kafka allows or overflows")
        return f"record {i}: {what} varint {how} (payload byte {e.c})"
    if c == KE_REC_NEG:
        return f"record {i}: negative record length {e.a}"
    if c == KE_REC_PAST:
        return (f"record {i}: length {e.a} runs past the end of the batch payload "
                f"({e.b} bytes left)")
    if c == KE_REC_EMPTY:
        return f"record {i}: empty record (no attributes byte)"
    if c == KE_KEY_LEN:
        return f"record {i}: invalid key length {e.a}"
    if c == KE_KEY_PAST:
        return f"record {i}: key length {e.a} runs past the end of the record ({e.b} left)"
    if c == KE_VALUE_LEN:
        return f"record {i}: invalid value length {e.a}"
    if c == KE_VALUE_PAST:
        return (f"record {i}: value length {e.a} runs past the end of the record "
                f"({e.b} left)")
    if c == KE_HCOUNT:
        return f"record {i}: invalid header count {e.a} ({e.b} bytes left in the record)"
    if c == KE_HKEY:
        return (f"record {i}: header {e.b} key length {e.a} is negative or runs past the "
                f"end of the record ({e.c} left)")
    if c == KE_HVALUE:
        return (f"record {i}: header {e.b} value length {e.a} is invalid or runs past the "
                f"end of the record ({e.c} left)")
    if c == KE_REC_MISMATCH:
        return (f"record {i}: its length varint says {e.a} bytes but its fields take "
                f"{e.b}")
    if c == KE_LEFTOVER:
        return (f"{e.a} bytes left over after the {e.b} records the batch header "
                f"declares")
    if c == KE_TS_RANGE:
        return (f"record {i} (offset {e.b}): timestamp {e.a} ms is outside the range of "
                f"timestamp[us]")
    return f"record {i}: bad record (code {c})"


# ---- codecs ------------------------------------------------------------------------------------

# The codec registry (codecs.decompress, codecs.zstd_decompress_fn), handed over by
# decode.py through set_codec_registry: the registry uses this kernel's C decoders, so
# the kernel does not import it back.
cdef object _decompress_fn = None
cdef object _zstd_fn_factory = None


def set_codec_registry(decompress, zstd_decompress_fn):
    """Give the kernel the registry's ``decompress(codec, payload, *, magic, max_size)``
    and ``zstd_decompress_fn()`` (decode.py does this on import)."""
    global _decompress_fn, _zstd_fn_factory
    _decompress_fn = decompress
    _zstd_fn_factory = zstd_decompress_fn


cdef object _get_decompress():
    if _decompress_fn is None:
        raise InternalError("the decode kernel has no codec registry: import "
                            "spark_kafkalog.format.decode, which hands it over")
    return _decompress_fn


cdef object _decompress(int codec, object payload, int magic, int64_t max_size,
                        int64_t where_pos, int64_t where_off):
    """One batch's payload through the codec registry; errors relocated to the batch."""
    name = CODEC_NAMES.get(codec, str(codec))
    try:
        return _get_decompress()(codec, payload, magic=magic, max_size=max_size)
    except KafkaLogError as err:
        raise type(err)(f"magic {magic} {name} batch: {err.reason}", position=where_pos,
                        offset=where_off) from err
    except Exception as err:  # a codec library's own error type: the payload is corrupt
        raise CodecError(f"magic {magic} {name} batch does not decompress: {err!r}",
                         position=where_pos, offset=where_off) from err


cdef const uint8_t _EMPTY[1]


cdef inline uint32_t _crc32c_at(const uint8_t* p, int64_t n,
                                uint32_t value=0) except? 0xFFFFFFFF:
    """CRC-32C of p[0:n] continuing from ``value``: _checksums.h's when the CPU allows,
    else the crc32c package through a memoryview made straight from the pointer."""
    if kl_crc32c_hw:
        return kl_crc32c(value, p, <size_t>n)
    return _crc32c(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ), value)


cdef str _framing_reason(int codec, kl_ferr* e, int64_t max_size):
    """What a _framing.h error code says, as text (the caller adds where)."""
    cdef int c = e.code
    cdef uint64_t at = e.pos, a = e.a, b = e.b
    name = CODEC_NAMES[codec]
    if c == KF_TOO_LARGE:
        what = (f" (frame at payload byte {at} declares {a})" if codec == CODEC_LZ4 and a
                else f" (declared: at least {a} bytes)" if a else "")
        return f"{name} payload decompresses to more than the limit of {max_size} bytes{what}"
    if c == KF_EMPTY:
        return f"{name} payload is empty"
    if c == KF_STRAY:
        return (f"{name} payload of {a} bytes is too short for a frame" if at == 0 else
                f"{a} stray bytes after the {name} frame ending at payload byte {at}")
    if c == KF_SKIP_TRUNC:
        return f"skippable {name} frame truncated at payload byte {at}"
    if c == KF_SKIP_PAST:
        return (f"skippable {name} frame of {a} bytes at payload byte {at} runs past the "
                f"end of the payload")
    if c == KF_LZ4_MAGIC:
        return (f"not an lz4 frame at payload byte {at} (magic {a:#010x}, expected "
                f"{<uint32_t>KL_LZ4_MAGIC:#010x})")
    if c == KF_LZ4_HEADER_TRUNC:
        return f"lz4 frame header truncated at payload byte {at}"
    if c == KF_LZ4_VERSION:
        return f"lz4 frame at payload byte {at} has unsupported version {a}"
    if c == KF_LZ4_RESERVED:
        return f"lz4 frame at payload byte {at} sets reserved bits (FLG {a:#04x}, BD {b:#04x})"
    if c == KF_LZ4_DICT:
        return (f"lz4 frame at payload byte {at} needs a dictionary (dictionary id set; "
                f"Kafka never writes one)")
    if c == KF_LZ4_BLOCK_ID:
        return f"lz4 frame at payload byte {at} has invalid block size id {a}"
    if c == KF_LZ4_HC:
        return (f"lz4 frame at payload byte {at} has a bad header checksum (stored {a:#04x}, "
                f"computed {b:#04x})")
    if c == KF_LZ4_NO_END:
        return f"lz4 frame starting at payload byte {at} is truncated (no end mark)"
    if c == KF_LZ4_BLOCK_BIG:
        return (f"lz4 block of {a} bytes at payload byte {at} exceeds the frame's block "
                f"size {b}")
    if c == KF_LZ4_BLOCK_PAST:
        return f"lz4 block of {a} bytes at payload byte {at} runs past the end of the payload"
    if c == KF_LZ4_CSUM_TRUNC:
        return f"lz4 frame starting at payload byte {at} is truncated (content checksum)"
    if c == KF_LZ4_SIZE_CAP:
        return (f"lz4 frame at payload byte {at} declares a content size of {a} bytes, more "
                f"than its blocks can hold ({b})")
    if c == KF_LZ4_BLOCK_SUM:
        return f"lz4 block at payload byte {at} does not match its checksum (xxHash32)"
    if c == KF_LZ4_BLOCK_BAD:
        return f"lz4 block at payload byte {at} is corrupt"
    if c == KF_LZ4_BLOCK_OVER:
        return (f"lz4 block at payload byte {at} decompresses to more than the frame's "
                f"block size {b}")
    if c == KF_LZ4_SIZE_MISMATCH:
        held = "more" if b == <uint64_t>-1 else str(b)
        return (f"lz4 frame at payload byte {at} declares a content size of {a} bytes but "
                f"holds {held}")
    if c == KF_LZ4_CSUM:
        return f"lz4 frame at payload byte {at} does not match its content checksum (xxHash32)"
    if c == KF_SNAPPY_HEADER_TRUNC:
        return f"snappy (xerial) payload is truncated in its {KL_XERIAL_HEADER_SIZE}-byte header"
    if c == KF_SNAPPY_LEN_TRUNC:
        return f"snappy (xerial) block length truncated at payload byte {at}"
    if c == KF_SNAPPY_BLOCK_PAST:
        return (f"snappy (xerial) block of {a} bytes at payload byte {at} runs past the end "
                f"of the payload")
    if c == KF_SNAPPY_PREAMBLE:
        return f"snappy block at payload byte {at} has a bad uncompressed-length header"
    if c == KF_SNAPPY_DECLARED:
        return (f"snappy block at payload byte {at} declares {a} bytes, more than its {b} "
                f"bytes can hold")
    if c == KF_SNAPPY_BLOCK_BAD:
        return f"snappy block at payload byte {at} is corrupt (it declares {a} bytes)"
    if c == KF_ZSTD_MAGIC:
        return f"not a zstd frame at payload byte {at} (magic {a:#010x})"
    if c == KF_ZSTD_HEADER_TRUNC:
        return f"zstd frame header truncated at payload byte {at}"
    if c == KF_ZSTD_RESERVED:
        return f"zstd frame at payload byte {at} sets a reserved header bit"
    if c == KF_ZSTD_TRUNC:
        return f"zstd frame starting at payload byte {at} is truncated"
    if c == KF_ZSTD_BLOCK_TYPE:
        return f"zstd block with reserved type at payload byte {at}"
    if c == KF_ZSTD_BLOCK_BIG:
        return f"zstd block of {a} bytes at payload byte {at} exceeds the 128 KiB limit"
    if c == KF_ZSTD_BLOCK_PAST:
        return f"zstd block at payload byte {at} runs past the end of the payload"
    if c == KF_ZSTD_CSUM_TRUNC:
        return f"zstd frame starting at payload byte {at} is truncated (checksum)"
    raise InternalError(f"unknown framing error code {c}")


cdef inline bint _is_framed(int codec) noexcept nogil:
    """Is ``codec``'s framing walked and decoded in C (_framing.h)?"""
    return codec == CODEC_LZ4 or codec == CODEC_SNAPPY


cdef int64_t _framed_room(int codec, const uint8_t* src, int64_t n, int magic,
                          int64_t max_size, kl_ferr* e) noexcept nogil:
    """The output room (bytes, <= max_size) to decode an lz4 / snappy payload into, or -1
    with ``e`` set (malformed, or the sizes it declares past the budget)."""
    cdef uint64_t bound = 0
    if codec == CODEC_LZ4:
        if kl_lz4_walk(src, <size_t>n, magic, &bound, e):
            return -1
        # past the budget, decoding stops with KF_TOO_LARGE once the output passes it
        return <int64_t>bound if bound < <uint64_t>max_size else max_size
    if kl_snappy_walk(src, <size_t>n, <uint64_t>max_size, &bound, e):
        return -1
    return <int64_t>bound


cdef int64_t _framed_decode(int codec, const uint8_t* src, int64_t n, int magic,
                            uint8_t* dst, int64_t room, kl_ferr* e) noexcept nogil:
    """Decode a payload _framed_room accepted into dst (room + KL_SLACK bytes): the output
    size, or -1 with ``e`` set."""
    if codec == CODEC_LZ4:
        return kl_lz4_decode(src, <size_t>n, magic, dst, <size_t>room, e)
    if kl_snappy_decode(src, <size_t>n, dst, e):
        return -1
    return room


cdef int _framed(_Sink s, int codec, const uint8_t* src, int64_t n, int magic,
                 int64_t max_size, const uint8_t** out, int64_t* out_len) except -1:
    """Decompress an lz4 (frames) or snappy (xerial or raw) payload in C into the sink's
    scratch buffer: no Python call, no allocation per batch. Returns 1 when done, 0 for
    another codec; a payload that does not decode raises CodecError at the batch."""
    cdef kl_ferr e
    cdef int64_t room, got
    if not _is_framed(codec):
        return 0
    room = _framed_room(codec, src, n, magic, max_size, &e)
    if room >= 0:
        s.ensure_scratch(room + KL_SLACK)
        got = _framed_decode(codec, src, n, magic, s.scratch, room, &e)
        if got >= 0:
            out[0] = s.scratch
            out_len[0] = got
            return 1
    raise s.error(f"magic {magic} {CODEC_NAMES[codec]} batch: "
                  f"{_framing_reason(codec, &e, max_size)}", CodecError)


cdef object _fast_zstd(_Sink s, const uint8_t* src, int64_t n, int64_t max_size):
    """One zstd frame that declares its content size (within ``max_size``) and fills the
    payload exactly, through zstandard with no registry glue: the decompressed bytes, or
    None when the registry must handle the payload (it then decodes it or raises the
    error that says what is wrong)."""
    cdef int64_t size = kl_zstd_sized_frame(src, <size_t>n)
    if size < 0 or size > max_size:
        return None
    if s.zstd_decompress is None:
        try:
            _get_decompress()
            s.zstd_decompress = _zstd_fn_factory()
        except MissingCodecError:
            s.zstd_decompress = False
    if s.zstd_decompress is False:
        return None
    try:
        raw = s.zstd_decompress(PyMemoryView_FromMemory(<char*>src, n, PyBUF_READ))
    except Exception:      # the library's own error: let the registry name the problem
        return None
    if len(raw) != size:
        return None
    return raw


cdef inline const uint8_t* _ptr(const uint8_t[::1] mv) noexcept:
    """Address of a (possibly empty) contiguous byte view."""
    return &mv[0] if mv.shape[0] else _EMPTY


# ---- the top-level walk ----------------------------------------------------------------------

cdef inline bint _skipped(Params* prm, int64_t* skip_idx, int64_t pos) noexcept nogil:
    """Is the batch at ``pos`` one of the sorted ``skip`` positions? Walks forward."""
    while skip_idx[0] < prm.nskip and prm.skip[skip_idx[0]] < pos:
        skip_idx[0] += 1
    return skip_idx[0] < prm.nskip and prm.skip[skip_idx[0]] == pos


cdef inline bint _v2_out_of_range(Params* prm, Hdr* h) noexcept nogil:
    cdef int64_t last = <int64_t>(<uint64_t>h.base_offset + <uint64_t>(<int64_t>h.last_offset_delta))
    return last < prm.lo or (prm.hi_set and h.base_offset >= prm.hi)


cdef int32_t _control_type_checked(const uint8_t* p, int64_t size, Hdr* h,
                                   int64_t max_decompressed, int64_t where_pos) except? -2:
    """The type in the key of the first record of the control batch at ``p`` (-1 when it
    holds no record), decompressing it if needed. A control record whose key is not
    ``version int16 >= 0, type int16`` is corrupt, as for Kafka's ControlRecordType.parse;
    decode and scan_headers apply the same check so they agree on what is valid."""
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef int32_t ctype = -1
    cdef int code
    cdef const uint8_t[::1] rmv
    if h.count <= 0:
        return -1
    if codec == CODEC_NONE:
        code = _control_type(p + V2_HEADER_SIZE, size - V2_HEADER_SIZE, &ctype)
    else:
        if codec > CODEC_ZSTD:
            raise UnsupportedFormatError(
                f"unknown compression codec id {codec} in v2 batch attributes "
                f"{h.attributes:#06x}", position=where_pos, offset=h.base_offset)
        raw = _decompress(codec, PyMemoryView_FromMemory(<char*>(p + V2_HEADER_SIZE),
                                                         size - V2_HEADER_SIZE, PyBUF_READ),
                          2, max_decompressed, where_pos, h.base_offset)
        rmv = raw
        code = _control_type(_ptr(rmv), rmv.shape[0], &ctype)
    if code:
        raise CorruptRecordError("control batch whose first record has no valid control key "
                                 "(version int16 >= 0, type int16)", position=where_pos,
                                 offset=h.base_offset)
    return ctype


cdef int _do_v2(_Sink s, object view, const uint8_t* p, Hdr* h, Params* prm,
                int64_t* comp_left) except -1:
    cdef int64_t size = LOG_OVERHEAD + <int64_t>h.length
    cdef int64_t plen = size - V2_HEADER_SIZE
    cdef int64_t pos = s.where_pos - prm.position_base
    cdef int codec = h.attributes & ATTR_CODEC_MASK
    cdef uint32_t crc
    cdef const uint8_t* rp
    cdef const uint8_t[::1] rmv
    cdef int64_t dlen, est
    if prm.verify_crc:
        crc = _crc32c_at(p + V2_ATTRIBUTES_POS, size - V2_ATTRIBUTES_POS)
        if crc != h.crc:
            raise s.error(f"CRC-32C mismatch in v2 batch: stored {h.crc:#010x}, computed "
                          f"{crc:#010x}")
    if h.attributes & ATTR_CONTROL:
        # transaction markers etc.: never rows, but their key must read as scan sees it
        _control_type_checked(p, size, h, prm.max_decompressed, s.where_pos)
        return 0
    if codec > CODEC_ZSTD:
        raise s.error(f"unknown compression codec id {codec} in v2 batch attributes "
                      f"{h.attributes:#06x}", UnsupportedFormatError)
    if codec == CODEC_NONE:
        if h.count > plen // V2_MIN_RECORD_SIZE:
            raise s.error(f"record count {h.count} is impossible for a payload of {plen} "
                          f"bytes")
        if h.count == 0:
            if plen:
                raise s.error(f"{plen} bytes left over after the 0 records the batch "
                              f"header declares")
            return 0
        s.reserve_rows(h.count)
        s.reserve_kv(plen, 0)
        return s.v2_records(p + V2_HEADER_SIZE, plen, h, prm)
    if not _framed(s, codec, p + V2_HEADER_SIZE, plen, 2, prm.max_decompressed, &rp, &dlen):
        raw = None
        if codec == CODEC_ZSTD:
            raw = _fast_zstd(s, p + V2_HEADER_SIZE, plen, prm.max_decompressed)
        if raw is None:
            raw = _decompress(codec, view[pos + V2_HEADER_SIZE:pos + size], 2,
                              prm.max_decompressed, s.where_pos, s.where_off)
        rmv = raw
        rp = _ptr(rmv)
        dlen = rmv.shape[0]
    comp_left[0] -= plen
    if h.count > dlen // V2_MIN_RECORD_SIZE or (h.count == 0 and dlen):
        raise s.error(f"record count {h.count} does not match the {dlen} bytes the "
                      f"{CODEC_NAMES[codec]} payload decompresses to")
    if h.count == 0:
        return 0
    # size the data buffers for what the rest of the compressed input will likely need
    est = s.o.val_used + dlen + (comp_left[0] * dlen) // max(plen, 1)
    s.reserve_rows(h.count)
    s.reserve_kv(dlen, est)
    return s.v2_records(rp, dlen, h, prm)


cdef int _do_legacy(_Sink s, object view, const uint8_t* p, int64_t avail, Params* prm,
                    int64_t* comp_left) except -1:
    """One top-level legacy entry: a message, or a compressed wrapper whose value is an
    inner message set (one level deep)."""
    cdef LMsg m, im
    cdef int code, codec, wrapper_ts_type
    cdef uint32_t crc
    cdef int64_t pos = s.where_pos - prm.position_base
    cdef int64_t ipos, dlen, count, last_inner = 0, abs_base = 0, off, ts_ms
    cdef int32_t ts_type
    cdef const uint8_t* rp
    cdef const uint8_t[::1] rmv
    code = _parse_legacy(p, avail, &m)
    if code != LEG_OK:
        raise s.error(f"magic {m.magic} message: {_legacy_reason(code, &m, avail)}")
    codec = m.attributes & LEGACY_CODEC_MASK
    if codec == CODEC_NONE:
        if m.offset < prm.lo or (prm.hi_set and m.offset >= prm.hi):
            return 0
    elif m.offset < prm.lo:
        return 0                  # every inner offset is <= the wrapper's offset
    if prm.verify_crc:
        crc = kl_crc32(p + LEGACY_MAGIC_POS, <size_t>(m.size - 4))
        if crc != m.crc:
            raise s.error(f"CRC-32 mismatch in magic {m.magic} message: stored "
                          f"{m.crc:#010x}, computed {crc:#010x}")
    wrapper_ts_type = TIMESTAMP_TYPE_NONE
    if m.magic == 1:
        wrapper_ts_type = (TIMESTAMP_TYPE_LOG_APPEND if m.attributes & LEGACY_TIMESTAMP_TYPE
                           else TIMESTAMP_TYPE_CREATE)
    if codec == CODEC_NONE:
        s.emit_legacy(&m, m.offset, m.timestamp, wrapper_ts_type)
        return 0
    if codec == CODEC_ZSTD:
        raise s.error(f"magic {m.magic} message compressed with zstd (zstd needs magic 2)")
    if codec > CODEC_ZSTD:
        raise s.error(f"unknown compression codec id {codec} in magic {m.magic} message",
                      UnsupportedFormatError)
    if m.value_len < 0:
        raise s.error(f"compressed magic {m.magic} message with a null value")
    vstart = <int64_t>(m.value - p)
    if not _framed(s, codec, m.value, m.value_len, m.magic, prm.max_decompressed, &rp,
                   &dlen):
        raw = _decompress(codec, view[pos + vstart:pos + vstart + m.value_len], m.magic,
                          prm.max_decompressed, s.where_pos, s.where_off)
        rmv = raw
        rp = _ptr(rmv)
        dlen = rmv.shape[0]
    comp_left[0] -= m.value_len
    # pass 1: validate every inner message, count them, find the last inner offset
    ipos = 0
    count = 0
    while ipos < dlen:
        code = _parse_legacy(rp + ipos, dlen - ipos, &im)
        if code != LEG_OK:
            raise s.error(f"inner message {count} (byte {ipos} of the decompressed "
                          f"set): {_legacy_reason(code, &im, dlen - ipos)}")
        if im.attributes & LEGACY_CODEC_MASK:
            raise s.error(f"inner message {count} is itself compressed (codec "
                          f"{im.attributes & LEGACY_CODEC_MASK}); only one level is allowed")
        if prm.verify_crc:
            crc = kl_crc32(rp + ipos + LEGACY_MAGIC_POS, <size_t>(im.size - 4))
            if crc != im.crc:
                raise s.error(f"CRC-32 mismatch in inner message {count}: stored "
                              f"{im.crc:#010x}, computed {crc:#010x}")
        last_inner = im.offset
        count += 1
        ipos += LOG_OVERHEAD + <int64_t>im.size
    if count == 0:
        raise s.error(f"compressed magic {m.magic} message holds no inner messages")
    if m.magic == 1:
        # v1: inner offsets are relative; the wrapper carries the absolute offset of
        # the last one. Some librdkafka versions wrote wrapper offset 0 on produce.
        if m.offset == 0:
            abs_base = 0
        elif m.offset < last_inner:
            raise s.error(f"wrapper offset {m.offset} is less than the last inner "
                          f"relative offset {last_inner}")
        else:
            abs_base = m.offset - last_inner
    s.reserve_rows(count)
    s.reserve_kv(dlen, 0)
    # pass 2: emit
    ipos = 0
    while ipos < dlen:
        _parse_legacy(rp + ipos, dlen - ipos, &im)
        ipos += LOG_OVERHEAD + <int64_t>im.size
        off = <int64_t>(<uint64_t>abs_base + <uint64_t>im.offset) if m.magic == 1 else im.offset
        if off < prm.lo or (prm.hi_set and off >= prm.hi):
            continue
        if im.magic == 1:
            # the wrapper's timestamp type applies; LogAppendTime also its timestamp
            ts_type = wrapper_ts_type
            ts_ms = m.timestamp if wrapper_ts_type == TIMESTAMP_TYPE_LOG_APPEND else im.timestamp
        else:
            ts_type = TIMESTAMP_TYPE_NONE
            ts_ms = NO_TIMESTAMP
        s.emit_legacy(&im, off, ts_ms, ts_type)
    return 0


cdef int _prepass(const uint8_t* base, int64_t n, Params* prm, int64_t* rows,
                  int64_t* kv, int64_t* comp) noexcept:
    """Upper bounds for sizing the output: rows, uncompressed payload bytes, compressed
    payload bytes of the batches that will be decoded. Stops quietly at the first bad
    header (the main pass reports it)."""
    cdef int64_t pos = 0, size, plen, skip_idx = 0
    cdef Hdr h
    rows[0] = 0
    kv[0] = 0
    comp[0] = 0
    while pos < n:
        if _peek(base + pos, n - pos, &h) != PEEK_OK:
            break
        size = LOG_OVERHEAD + <int64_t>h.length
        if prm.nskip and _skipped(prm, &skip_idx, pos):
            pos += size
            continue
        if h.magic == 2:
            plen = size - V2_HEADER_SIZE
            if not (h.attributes & ATTR_CONTROL) and not _v2_out_of_range(prm, &h):
                if h.attributes & ATTR_CODEC_MASK:
                    # a hint only (the decompressed size is not known yet): records
                    # compress a few times over; more rows grow the arrays
                    rows[0] += min(<int64_t>h.count, 2 * (plen // V2_MIN_RECORD_SIZE) + 1)
                    comp[0] += plen
                else:
                    rows[0] += min(<int64_t>h.count, plen // V2_MIN_RECORD_SIZE)
                    kv[0] += plen
        elif h.attributes & ATTR_CODEC_MASK:
            comp[0] += size
        else:
            rows[0] += 1
            kv[0] += size
        pos += size
    return 0


cdef dict _EMPTY_BATCHES = {}


cdef object _empty_batch(bint include_headers):
    """The (immutable) zero-row batch of the schema, built once."""
    batch = _EMPTY_BATCHES.get(include_headers)
    if batch is None:
        batch = record_schema(include_headers).empty_table().to_batches(max_chunksize=1)
        batch = batch[0] if batch else pa.RecordBatch.from_pylist(
            [], schema=record_schema(include_headers))
        _EMPTY_BATCHES[include_headers] = batch
    return batch


cdef inline int _do_batch(_Sink s, object view, const uint8_t* p, Hdr* h, int64_t size,
                          Params* prm, int64_t* comp_left) except -1:
    """One top-level entry at ``p`` of ``size`` bytes by its magic: a v2 batch (skipped
    when wholly outside the offset range) or a legacy message or wrapper."""
    if h.magic == 2:
        if not _v2_out_of_range(prm, h):
            _do_v2(s, view, p, h, prm, comp_left)
    else:
        _do_legacy(s, view, p, size, prm, comp_left)
    return 0


def decode_buffer(data, str topic, int32_t partition, bint verify_crc, bint include_headers,
                  int64_t max_decompressed, object start_offset, object end_offset,
                  object skip_positions, int64_t position_base):
    """Decode every data record of the whole batches in ``data`` (a contiguous bytes-like
    object of unsigned bytes) into a ``pa.RecordBatch`` of ``record_schema``.

    ``skip_positions``: None or a C-contiguous int64 buffer of sorted positions (relative
    to ``data``) of batches to drop. See decode.decode_run for the semantics."""
    cdef const uint8_t[::1] mv = data
    cdef const int64_t[::1] skip_mv
    cdef int64_t n = mv.shape[0]
    cdef const uint8_t* base = &mv[0] if n else NULL
    cdef Params prm
    cdef Hdr h
    cdef int64_t pos = 0, size, skip_idx = 0, rows, kv, comp, i
    cdef int code
    cdef _Sink s
    if n == 0:
        return _empty_batch(include_headers)
    s = _Sink(include_headers)
    view = memoryview(data)

    prm.verify_crc = verify_crc
    prm.max_decompressed = max_decompressed
    prm.lo = INT64_MIN if start_offset is None else <int64_t>start_offset
    prm.hi_set = end_offset is not None
    prm.hi = INT64_MAX if end_offset is None else <int64_t>end_offset
    prm.position_base = position_base
    prm.skip = NULL
    prm.nskip = 0
    if skip_positions is not None:
        skip_mv = skip_positions
        prm.nskip = skip_mv.shape[0]
        if prm.nskip:
            prm.skip = &skip_mv[0]
            for i in range(1, prm.nskip):
                if prm.skip[i] < prm.skip[i - 1]:
                    raise InvalidOptionError("skip_positions must be sorted ascending")

    _prepass(base, n, &prm, &rows, &kv, &comp)
    s.setup(rows, kv)
    while pos < n:
        h.base_offset = 0
        code = _peek(base + pos, n - pos, &h)
        if code != PEEK_OK:
            raise CorruptRecordError(_peek_reason(code, &h, n - pos),
                                     position=position_base + pos,
                                     offset=h.base_offset if n - pos >= 8 else None)
        size = LOG_OVERHEAD + <int64_t>h.length
        s.where_pos = position_base + pos
        s.where_off = h.base_offset
        if prm.nskip and _skipped(&prm, &skip_idx, pos):
            pos += size
            continue
        _do_batch(s, view, base + pos, &h, size, &prm, &comp)
        pos += size
    return s.finish(topic, partition)


# ---- batch headers -----------------------------------------------------------------------------

cdef int _control_type(const uint8_t* p, int64_t plen, int32_t* out) noexcept:
    """The type short in the key of the first control record of ``p[0:plen]``; returns
    0, or 1 when the record cannot be read."""
    cdef const uint8_t* q = p
    cdef const uint8_t* end = p + plen
    cdef const uint8_t* rec_end
    cdef int32_t rec_len, tmp, klen
    cdef int64_t tsd
    cdef int e = 0
    q = kl_varint(q, end, &rec_len, &e)
    if q == NULL or rec_len < 0 or rec_len > end - q:
        return 1
    rec_end = q + rec_len
    if q >= rec_end:
        return 1
    q += 1
    q = kl_varlong(q, rec_end, &tsd, &e)
    if q == NULL:
        return 1
    q = kl_varint(q, rec_end, &tmp, &e)
    if q == NULL:
        return 1
    q = kl_varint(q, rec_end, &klen, &e)
    if q == NULL or klen < 4 or klen > rec_end - q:
        return 1
    if <int16_t>kl_be16(q) < 0:                  # control record key version
        return 1
    out[0] = <int16_t>kl_be16(q + 2)
    return 0


# One batch header as the scan stores it: the fields of BATCH_HEADER_SCHEMA, widest first
# so that nothing is padded but the end. header_row_layout() tells decode.py the offsets
# (its numpy dtype is built from them: the layout lives here only).
cdef struct HRow:
    int64_t position
    int64_t base_offset
    int64_t last_offset
    int64_t first_timestamp
    int64_t max_timestamp
    int64_t producer_id
    int32_t size
    int32_t base_sequence
    int32_t record_count
    int32_t partition_leader_epoch
    uint32_t crc
    int16_t attributes
    int16_t producer_epoch
    int16_t control_type
    int8_t magic
    int8_t codec
    uint8_t is_transactional
    uint8_t is_control


def header_row_layout():
    """``(itemsize, [(name, numpy type, byte offset), ...])`` of the rows
    :func:`scan_buffer` writes (bools are bytes holding 0 or 1)."""
    cdef HRow r
    cdef char* b = <char*>&r
    return sizeof(HRow), [
        ("position", "<i8", <char*>&r.position - b),
        ("size", "<i4", <char*>&r.size - b),
        ("magic", "i1", <char*>&r.magic - b),
        ("attributes", "<i2", <char*>&r.attributes - b),
        ("codec", "i1", <char*>&r.codec - b),
        ("base_offset", "<i8", <char*>&r.base_offset - b),
        ("last_offset", "<i8", <char*>&r.last_offset - b),
        ("first_timestamp", "<i8", <char*>&r.first_timestamp - b),
        ("max_timestamp", "<i8", <char*>&r.max_timestamp - b),
        ("producer_id", "<i8", <char*>&r.producer_id - b),
        ("producer_epoch", "<i2", <char*>&r.producer_epoch - b),
        ("base_sequence", "<i4", <char*>&r.base_sequence - b),
        ("record_count", "<i4", <char*>&r.record_count - b),
        ("partition_leader_epoch", "<i4", <char*>&r.partition_leader_epoch - b),
        ("is_transactional", "?", <char*>&r.is_transactional - b),
        ("is_control", "?", <char*>&r.is_control - b),
        ("crc", "<u4", <char*>&r.crc - b),
        ("control_type", "<i2", <char*>&r.control_type - b),
    ]


def scan_buffer(data, int64_t start, int64_t max_batches, bint verify_crc,
                int64_t position_base, object first_offset_hint, int64_t max_decompressed):
    """Batch headers of ``data`` from ``start``, at most ``max_batches`` (-1: all).

    Returns ``(rows, count, end, problem)``: a bytearray holding at least ``count`` rows
    of :func:`header_row_layout` (one allocation: the caller views it as a numpy
    structured array), the relative position after the last whole valid batch, and None
    or ``(kind, relative position, offset or None, reason)``. Never raises for bad data
    (a missing codec library still raises MissingCodecError)."""
    cdef const uint8_t[::1] mv = data
    cdef int64_t n = mv.shape[0]
    cdef const uint8_t* base = &mv[0] if n else NULL
    cdef const uint8_t* p
    cdef int64_t pos = start, size, rows = 0, cap, base_off, last_off, prev_last = 0
    cdef bint have_prev = False
    cdef int code, codec
    cdef int32_t ctype
    cdef uint32_t crc
    cdef Hdr h
    cdef HRow* row
    cdef HRow* out
    problem = None
    # a first guess from the size (batches of 1 KiB), grown by doubling
    cap = (n - start) // 1024 + 4 if n > start else 1
    if max_batches >= 0 and cap > max_batches:
        cap = max(max_batches, 1)
    buf = PyByteArray_FromStringAndSize(NULL, cap * sizeof(HRow))
    out = <HRow*>PyByteArray_AS_STRING(buf)
    if first_offset_hint is not None:
        prev_last = <int64_t>first_offset_hint
        if prev_last < 0:
            raise InvalidOptionError(f"first_offset_hint must be an offset (>= 0), not "
                                     f"{first_offset_hint}")
        prev_last -= 1
        have_prev = True

    while pos < n and (max_batches < 0 or rows < max_batches):
        p = base + pos
        h.base_offset = 0
        code = _peek(p, n - pos, &h)
        if code != PEEK_OK:
            kind = "torn" if code in (PEEK_SHORT, PEEK_PAST_END) else "corrupt"
            problem = (kind, pos, h.base_offset if n - pos >= 8 else None,
                       _peek_reason(code, &h, n - pos))
            break
        size = LOG_OVERHEAD + <int64_t>h.length
        ctype = -1
        if h.magic == 2:
            codec = h.attributes & ATTR_CODEC_MASK
            if verify_crc:
                crc = _crc32c_at(p + V2_ATTRIBUTES_POS, size - V2_ATTRIBUTES_POS)
                if crc != h.crc:
                    problem = ("corrupt", pos, h.base_offset,
                               f"CRC-32C mismatch in v2 batch: stored {h.crc:#010x}, "
                               f"computed {crc:#010x}")
                    break
            if h.attributes & ATTR_CONTROL:
                try:
                    ctype = _control_type_checked(p, size, &h, max_decompressed,
                                                  position_base + pos)
                except (CorruptRecordError, UnsupportedFormatError) as err:
                    problem = ("corrupt", pos, h.base_offset, err.reason)
                    break
            base_off = h.base_offset
            last_off = <int64_t>(<uint64_t>h.base_offset
                                 + <uint64_t>(<int64_t>h.last_offset_delta))
        else:
            if verify_crc:
                crc = kl_crc32(p + LEGACY_MAGIC_POS, <size_t>(h.length - 4))
                if crc != h.crc:
                    problem = ("corrupt", pos, h.base_offset,
                               f"CRC-32 mismatch in magic {h.magic} message: stored "
                               f"{h.crc:#010x}, computed {crc:#010x}")
                    break
            last_off = h.base_offset
            if h.attributes & ATTR_CODEC_MASK:
                # a compressed wrapper's offset is its last inner offset; its first is
                # not known without decompressing: assume it follows the previous entry
                base_off = prev_last + 1 if have_prev else h.base_offset
                h.count = -1
            else:
                base_off = h.base_offset
        if rows == cap:
            cap *= 2
            PyByteArray_Resize(buf, cap * sizeof(HRow))
            out = <HRow*>PyByteArray_AS_STRING(buf)
        row = out + rows
        row.position = pos + position_base
        row.size = <int32_t>size
        row.magic = h.magic
        row.attributes = h.attributes
        row.codec = <int8_t>(h.attributes & ATTR_CODEC_MASK)
        row.base_offset = base_off
        row.last_offset = last_off
        row.first_timestamp = h.first_ts
        row.max_timestamp = h.max_ts
        row.producer_id = h.producer_id
        row.producer_epoch = h.producer_epoch
        row.base_sequence = h.base_sequence
        row.record_count = h.count
        row.partition_leader_epoch = h.leader_epoch
        row.is_transactional = (h.magic == 2 and (h.attributes & ATTR_TRANSACTIONAL) != 0)
        row.is_control = (h.magic == 2 and (h.attributes & ATTR_CONTROL) != 0)
        row.crc = h.crc
        row.control_type = <int16_t>ctype
        rows += 1
        prev_last = last_off
        have_prev = True
        pos += size

    return buf, rows, pos, problem


# ---- test hooks ----------------------------------------------------------------------------------

def decode_varint(data, Py_ssize_t pos=0):
    """Zig-zag varint (int32, at most 5 bytes) at ``pos``: returns (value, next pos).
    Raises CorruptRecordError when it runs past the end or is too long."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef int32_t v = 0
    cdef int e = 0
    cdef const uint8_t* q
    if pos < 0 or pos >= mv.shape[0]:
        raise CorruptRecordError(f"varint at {pos}: no bytes", position=pos)
    q = kl_varint(&mv[pos], &mv[0] + mv.shape[0], &v, &e)
    if q == NULL:
        raise CorruptRecordError("varint runs past the end" if e == 1
                                 else "varint too long (or overflows 32 bits)", position=pos)
    return v, <Py_ssize_t>(q - &mv[0])


def decode_varlong(data, Py_ssize_t pos=0):
    """Zig-zag varlong (int64, at most 10 bytes) at ``pos``: returns (value, next pos)."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef int64_t v = 0
    cdef int e = 0
    cdef const uint8_t* q
    if pos < 0 or pos >= mv.shape[0]:
        raise CorruptRecordError(f"varlong at {pos}: no bytes", position=pos)
    q = kl_varlong(&mv[pos], &mv[0] + mv.shape[0], &v, &e)
    if q == NULL:
        raise CorruptRecordError("varlong runs past the end" if e == 1
                                 else "varlong too long (or overflows 64 bits)", position=pos)
    return v, <Py_ssize_t>(q - &mv[0])


def crc32_ieee(data):
    """The kernel's CRC-32 (as zlib.crc32) — exposed for tests."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    if mv.shape[0] == 0:
        return 0
    return kl_crc32(&mv[0], <size_t>mv.shape[0])


def utf8_repair(data):
    """The kernel's UTF-8 check/repair of header keys: returns (was_valid, repaired bytes)
    — exposed for tests (compare with bytes.decode("utf-8", "replace"))."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef size_t n = mv.shape[0], k
    if n == 0:
        return True, b""
    out = bytearray(3 * n)
    cdef uint8_t[::1] om = out
    valid = bool(kl_utf8_valid(&mv[0], n))
    k = kl_utf8_fix(&mv[0], n, &om[0])
    return valid, bytes(out[:k])


def crc32c(data, uint32_t value=0):
    """CRC-32C of a bytes-like object continuing from ``value``, as the kernel computes
    it (test hook: _checksums.h's code when the CPU allows, else the crc32c package)."""
    cdef const uint8_t[::1] mv = data
    return _crc32c_at(_ptr(mv), mv.shape[0], value)


def xxh32(data, uint32_t seed=0):
    """xxHash32 of a bytes-like object (the one implementation: the LZ4 frame checksums
    here and in the codec registry)."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    return kl_xxh32(_ptr(mv), <size_t>mv.shape[0], seed)


def decompress_framed(int codec, data, int64_t max_size, int magic=2):
    """An lz4 (frames) or snappy (xerial or raw block) payload decompressed by the C
    framing (_framing.h; the codec registry's decoder for both): a bytearray of at most
    ``max_size`` bytes. ``magic`` is the message format the payload came in (0 admits
    Kafka's pre-0.10 lz4 header checksum). Raises CodecError with no position (the
    caller relocates it)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* src = _ptr(mv)
    cdef int64_t n = mv.shape[0], room, got
    cdef kl_ferr e
    cdef bytearray out
    cdef uint8_t* dst
    if not _is_framed(codec):
        raise UnsupportedFormatError(f"codec {codec} has no C framing (lz4 and snappy do)")
    if max_size < 0:
        raise InvalidOptionError(f"max_size must be non-negative, got {max_size}")
    with nogil:
        room = _framed_room(codec, src, n, magic, max_size, &e)
    if room < 0:
        raise CodecError(_framing_reason(codec, &e, max_size))
    out = PyByteArray_FromStringAndSize(NULL, room + KL_SLACK)
    dst = <uint8_t*>PyByteArray_AS_STRING(out)
    with nogil:
        got = _framed_decode(codec, src, n, magic, dst, room, &e)
    if got < 0:
        raise CodecError(_framing_reason(codec, &e, max_size))
    PyByteArray_Resize(out, got)
    return out


def zstd_frames(data):
    """The zstd frames of a payload as _framing.h walks them (skippable frames left out):
    a list of ``(start, end, content size or None, output bound)``; the bound comes from
    the block headers. Raises CodecError naming the payload byte (no position: the caller
    relocates it)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* src = _ptr(mv)
    cdef size_t n = mv.shape[0], pos = 0
    cdef kl_zstd_frame f
    cdef kl_ferr e
    cdef int r
    if n == 0:
        e.code = KF_EMPTY
        e.pos = e.a = e.b = 0
        raise CodecError(_framing_reason(CODEC_ZSTD, &e, 0))
    frames = []
    while True:
        r = kl_zstd_next(src, n, &pos, &f, &e)
        if r == 0:
            return frames
        if r < 0:
            raise CodecError(_framing_reason(CODEC_ZSTD, &e, 0))
        frames.append((f.start, f.end, f.content_size if f.has_size else None, f.bound))


def framing_constants():
    """The framing constants _framing.h was compiled with (the encoder writes xerial
    headers from these, a test checks the lz4 ones)."""
    return {"XERIAL_MAGIC": PyBytes_FromStringAndSize(<char*>kl_xerial_magic, 8),
            "XERIAL_HEADER_SIZE": KL_XERIAL_HEADER_SIZE,
            "LZ4_MAGIC": <uint32_t>KL_LZ4_MAGIC, "ZSTD_MAGIC": <uint32_t>KL_ZSTD_MAGIC}


# ==== many runs of batches at once (planning: the tails of many small segments) ==============
# One call scans the bytes of many segments held in one buffer, each exactly as scan_buffer
# scans it alone (the byte rules stay in scan_buffer), and gathers every run's header rows
# into one allocation: the log layer then checks thousands of partitions' tails with a few
# numpy operations instead of one Python scan each.

def scan_buffers(data, const int64_t[::1] starts, const int64_t[::1] lengths,
                 const int64_t[::1] hints, bint verify_crc, int64_t max_decompressed):
    """Batch headers of runs ``data[starts[i]:starts[i] + lengths[i]]``, each scanned as
    ``scan_buffer(run, 0, -1, verify_crc, 0, hints[i], max_decompressed)`` scans it
    (positions relative to the run's start).

    Returns ``(rows, counts, ends, problems)``: a bytearray holding the rows of
    :func:`header_row_layout` of every run, run after run; per run (int64 arrays) its
    number of rows, the relative position after its last whole valid batch, and 1 where
    its scan stopped at a problem (torn or corrupt bytes), else 0. Never raises for bad
    data; a run outside ``data`` raises ValueError."""
    cdef const uint8_t[::1] mv = data
    cdef Py_ssize_t n_runs = starts.shape[0], i
    cdef int64_t total = 0, cap, count, s, ln
    cdef int64_t n = mv.shape[0]
    if lengths.shape[0] != n_runs or hints.shape[0] != n_runs:
        raise ValueError("starts, lengths and hints must have one entry per run")
    counts = bytearray(8 * n_runs)
    ends = bytearray(8 * n_runs)
    problems = bytearray(8 * n_runs)
    cdef int64_t[::1] c_counts = memoryview(counts).cast("q")
    cdef int64_t[::1] c_ends = memoryview(ends).cast("q")
    cdef int64_t[::1] c_problems = memoryview(problems).cast("q")
    cap = 16
    out = PyByteArray_FromStringAndSize(NULL, cap * sizeof(HRow))
    view = memoryview(data).cast("B")
    for i in range(n_runs):
        s = starts[i]
        ln = lengths[i]
        if s < 0 or ln < 0 or s + ln > n:
            raise ValueError(f"run {i} ({s}, {ln}) is outside the buffer of {n} bytes")
        buf, count, end, problem = scan_buffer(view[s:s + ln], 0, -1, verify_crc, 0,
                                               hints[i], max_decompressed)
        if total + count > cap:
            while total + count > cap:
                cap *= 2
            PyByteArray_Resize(out, cap * sizeof(HRow))
        if count:
            memcpy(PyByteArray_AS_STRING(out) + total * sizeof(HRow),
                   PyByteArray_AS_STRING(buf), count * sizeof(HRow))
        total += count
        c_counts[i] = count
        c_ends[i] = end
        c_problems[i] = 0 if problem is None else 1
    PyByteArray_Resize(out, total * sizeof(HRow))
    return out, counts, ends, problems


# ==== many small segments in one call (issue 21: packed read tasks) ===========================
# A packed Spark task reads hundreds of small segments, one per topic-partition. Decoding
# them a call each builds a set of Arrow columns per segment, which the task then joins (a
# copy). decode_segments checks each whole segment as the log layer's scan would (framing,
# CRCs, control keys, offsets increasing and inside the segment) and only then decodes
# them all into ONE set of columns. Whatever that scan would not pass as it stands -- a
# torn or corrupt batch, offsets out of order, a range that runs on into the next segment
# -- makes the call answer None, and the caller reads those slices the general way (its
# corruption policies, its errors naming file, position and offset).

cdef bint _segment_ok(const uint8_t* base, int64_t n, int64_t seg_base, int64_t seg_hi,
                      int64_t reach, int64_t max_decompressed) except -1:
    """Whether ``base[0:n]`` (a whole segment) is batches the scan accepts without a
    problem: whole, CRCs (CRC-32C v2, CRC-32 legacy) and control keys valid, each batch's
    first offset above the previous batch's last, every last offset in ``[seg_base,
    seg_hi)``; and, unless ``reach`` is INT64_MIN, a last offset at or past ``reach``
    (a range ending in a segment that is not the partition's last must end in it)."""
    cdef int64_t pos = 0, size, last_off, first, prev = INT64_MIN
    cdef const uint8_t* p
    cdef Hdr h
    while pos < n:
        p = base + pos
        if _peek(p, n - pos, &h) != PEEK_OK:
            return False
        size = LOG_OVERHEAD + <int64_t>h.length
        if h.magic == 2:
            if _crc32c_at(p + V2_ATTRIBUTES_POS, size - V2_ATTRIBUTES_POS) != h.crc:
                return False
            if h.attributes & ATTR_CONTROL:
                try:
                    _control_type_checked(p, size, &h, max_decompressed, pos)
                except (CorruptRecordError, UnsupportedFormatError):
                    return False
            last_off = <int64_t>(<uint64_t>h.base_offset
                                 + <uint64_t>(<int64_t>h.last_offset_delta))
            first = h.base_offset if h.base_offset < last_off else last_off
        else:
            if kl_crc32(p + LEGACY_MAGIC_POS, <size_t>(h.length - 4)) != h.crc:
                return False
            last_off = h.base_offset
            first = last_off
        if first <= prev or last_off < seg_base or last_off >= seg_hi:
            return False
        prev = last_off
        pos += size
    return reach == INT64_MIN or prev >= reach


def decode_segments(list segments, bint include_headers, int64_t max_decompressed):
    """Rows ``lo <= offset < hi`` of several whole segments as ONE ``pa.RecordBatch`` of
    ``record_schema(include_headers)``, segment after segment, or None when a segment
    is not as :func:`_segment_ok` requires (nothing is decoded then).

    ``segments``: tuples ``(data, topic, partition, lo, hi, seg_base, seg_hi, reach)``:
    the segment's bytes (from its position 0), the constant columns' values, the offset
    range, the offsets the segment may hold ``[seg_base, seg_hi)`` and ``reach`` (an
    offset its batches must get to, or None). Decoding is decode_buffer's, batch by
    batch; its errors (records that do not decode) are raised with positions in the
    segment."""
    cdef Py_ssize_t k, nseg = len(segments)
    cdef const uint8_t[::1] mv
    cdef const uint8_t* base
    cdef int64_t n, pos, size, rows = 0, kv = 0, comp = 0, r, v, c, reach, start
    cdef int64_t i, tlen, total
    cdef int32_t part
    cdef Params prm
    cdef Hdr h
    cdef _Sink s
    cdef _Growable g
    cdef int32_t* ip
    if nseg == 0:
        return _empty_batch(include_headers)
    prm.verify_crc = False          # checked by _segment_ok, as the scan checks them
    prm.max_decompressed = max_decompressed
    prm.hi_set = True
    prm.position_base = 0
    prm.skip = NULL
    prm.nskip = 0
    # pass 1: every segment checked (and sized) before anything is decoded
    for k in range(nseg):
        data, _t, _p, lo, hi, seg_base, seg_hi, want = segments[k]
        mv = data
        n = mv.shape[0]
        base = _ptr(mv)
        reach = INT64_MIN if want is None else <int64_t>want
        if not _segment_ok(base, n, seg_base, seg_hi, reach, max_decompressed):
            return None
        prm.lo = lo
        prm.hi = hi
        _prepass(base, n, &prm, &r, &v, &c)
        rows += r
        kv += v
        comp += c
    s = _Sink(include_headers)
    s.setup(rows, kv)
    ends = []
    # pass 2: decode (decode_buffer's walk, on bytes pass 1 found whole)
    for k in range(nseg):
        data, _t, _p, lo, hi, seg_base, seg_hi, want = segments[k]
        mv = data
        n = mv.shape[0]
        base = _ptr(mv)
        view = memoryview(data)
        prm.lo = lo
        prm.hi = hi
        pos = 0
        while pos < n:
            if _peek(base + pos, n - pos, &h) != PEEK_OK:
                # pass 1 found it whole: only bytes changed under us (a mapped file)
                raise CorruptRecordError("segment bytes changed while being decoded",
                                         position=pos, offset=h.base_offset)
            size = LOG_OVERHEAD + <int64_t>h.length
            s.where_pos = pos
            s.where_off = h.base_offset
            _do_batch(s, view, base + pos, &h, size, &prm, &comp)
            pos += size
        ends.append(s.o.n)
    n = s.o.n
    batch = s.finish("", 0)
    if n == 0:
        return batch
    # the topic and partition columns, segment by segment
    topics = []
    total = 0
    start = 0
    for k in range(nseg):
        tb = (<str>segments[k][1]).encode("utf-8")
        topics.append(tb)
        total += (<int64_t>ends[k] - start) * PyBytes_GET_SIZE(tb)
        start = ends[k]
    if total > INT32_MAX:
        raise KafkaLogError(f"{n} rows exceed 2 GiB in the topic column; decode fewer "
                            f"segments at once")
    g = _Growable()
    g.resize(n * 4, False)
    ip = <int32_t*>g.ptr
    start = 0
    for k in range(nseg):
        part = <int32_t>segments[k][2]
        for i in range(start, <int64_t>ends[k]):
            ip[i] = part
        start = ends[k]
    part_buf = g.finish(n * 4)
    g.resize((n + 1) * 4, False)
    ip = <int32_t*>g.ptr
    ip[0] = 0
    start = 0
    total = 0
    for k in range(nseg):
        tlen = PyBytes_GET_SIZE(topics[k])
        for i in range(start, <int64_t>ends[k]):
            total += tlen
            ip[i + 1] = <int32_t>total
        start = ends[k]
    toff_buf = g.finish((n + 1) * 4)
    g.resize(max(total, 1), False)
    start = 0
    pos = 0
    for k in range(nseg):
        tlen = PyBytes_GET_SIZE(topics[k])
        c = (<int64_t>ends[k] - start) * tlen
        if c > 0:
            _fill_repeat(g.ptr + pos, <const uint8_t*>PyBytes_AS_STRING(topics[k]), tlen, c)
        pos += c
        start = ends[k]
    tdata_buf = g.finish(max(total, 1))
    cols = batch.columns
    cols[2] = pa.Array.from_buffers(_T_STRING, n, [None, toff_buf, tdata_buf], null_count=0)
    cols[3] = pa.Array.from_buffers(_T_INT32, n, [None, part_buf], null_count=0)
    return pa.RecordBatch.from_arrays(cols, schema=batch.schema)
