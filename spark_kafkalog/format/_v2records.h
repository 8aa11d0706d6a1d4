/* The v2 record walk: the records of one decompressed v2 batch appended to the
   Arrow buffers of a kl_out (owned by _decode.pyx's _Sink, which grows them).
   Static, compiled into _decode.pyx's unit (per-record work: kept inlinable).
   Declared for Cython in _v2records.pxd. */
#ifndef KL_V2RECORDS_H
#define KL_V2RECORDS_H
#include "_bytes.h"

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

/* A record's key or value (len -1: null) appended to its column at `row`: the bytes,
   the validity bit (the bitmap is started at the first null) and the end offset. The
   column's counters are the caller's locals, hoisted out of kl_out for the row loop;
   inlined, they stay in registers. */
static inline __attribute__((always_inline)) void kl_put_bin(
        uint8_t* data, int64_t* used, int64_t cap, uint8_t* valid, int* bm, int64_t* nulls,
        int32_t* offs, int64_t row, uint8_t bit, const uint8_t* src, int32_t len,
        const uint8_t* end) {
    if (len >= 0) {
        size_t room = (size_t)(end - src);
        if ((size_t)(cap - *used) < room) room = (size_t)(cap - *used);
        kl_copy_over(data + *used, src, (size_t)len, room);
        *used += len;
        if (*bm) valid[row >> 3] |= bit;
    } else {
        if (!*bm) { kl_bitmap_start(valid, row); *bm = 1; }
        (*nulls)++;
    }
    offs[row + 1] = (int32_t)*used;
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
            kl_put_bin(o_key_data, &key_used, key_cap, o_key_valid, &key_bm, &key_nulls,
                       o_key_off, row, bit, kp, klen, end);
            kl_put_bin(o_val_data, &val_used, val_cap, o_val_valid, &val_bm, &val_nulls,
                       o_val_off, row, bit, vp, vlen, end);
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
#endif /* KL_V2RECORDS_H */
