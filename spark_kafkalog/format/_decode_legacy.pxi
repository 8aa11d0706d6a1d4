# Legacy (magic 0/1) message sets: one message, nested compressed wrappers
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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
