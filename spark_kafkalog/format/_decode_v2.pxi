# v2 batches: range and skip checks, control records, one batch's records
# (the per-record walk itself is C: _v2records.h).
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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
