# Packed segments: decode_segments (many small segments, one set of columns)
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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
