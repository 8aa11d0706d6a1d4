# What Cython uses of _v2records.h (the decode kernel's per-record C: static functions
# compiled into _decode.pyx's unit; _bytes.h's are in _bytes.pxd). Extern declarations only.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "_v2records.h":
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
