# The batch-header scan: scan_buffer (one run) and scan_buffers (many runs)
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

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
