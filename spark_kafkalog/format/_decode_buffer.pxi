# The top-level walk: decode_buffer over a run of batches (pre-pass, dispatch
# on magic to _decode_v2.pxi / _decode_legacy.pxi).
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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
