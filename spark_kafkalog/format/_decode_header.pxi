# Batch headers: peek and check a v2 batch or legacy entry header
# The layout is _wire.pxd's (wire.py's names); the structs here are shared by every walk.
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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




cdef inline bint _ts_out_of_range(int64_t ms) noexcept nogil:
    return ms > TS_MAX_MS or ms < -TS_MAX_MS
