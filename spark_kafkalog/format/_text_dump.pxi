# kafka-dump-log's record lines (DumpLogSegments --print-data-log: dump_records) and the
# Java UTF-8 decoding they print keys and values with (java_string).
# (Part of the _text module: _text.pyx includes it; not compiled alone.)

cdef int _put_text(Out *o, const uint8_t *s, Py_ssize_t n) except -1:
    """Bytes as Java's ``new String(bytes, UTF_8)`` prints them: malformed sequences as
    U+FFFD."""
    if kl_utf8_valid(<const uint8_t *>s, <size_t>n):
        return _put(o, s, n)
    fixed = java_string(<bytes>s[:n]).encode("utf-8", "surrogatepass")
    return _put(o, <const char *>fixed, len(fixed))


def java_string(bytes data):
    """``new String(data, UTF_8)`` as Java 17+ decodes it: each malformed sequence is one
    U+FFFD by Java's own rules (a sequence cut off by the end is one; an encoded
    surrogate is one for its three bytes), which differ from Python's "replace"."""
    cdef Py_ssize_t sp = 0, sl = len(data)
    cdef const uint8_t *b = data
    cdef int b1, b2, b3, b4, uc
    out = []
    R = "\ufffd"
    while sp < sl:
        b1 = b[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:
            if sp < sl:
                b2 = b[sp]
                sp += 1
                if (b2 & 0xC0) != 0x80:
                    out.append(R)
                    sp -= 1
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                continue
            out.append(R)
            break
        elif 0xE0 <= b1 <= 0xEF:
            if sp + 1 < sl:
                b2 = b[sp]
                b3 = b[sp + 1]
                sp += 2
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or (b2 & 0xC0) != 0x80 \
                        or (b3 & 0xC0) != 0x80:
                    out.append(R)
                    sp -= 2
                    if not ((b1 == 0xE0 and (b2 & 0xE0) == 0x80) or (b2 & 0xC0) != 0x80):
                        sp += 1
                else:
                    uc = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(R if 0xD800 <= uc <= 0xDFFF else chr(uc))
                continue
            if sp < sl and ((b1 == 0xE0 and (b[sp] & 0xE0) == 0x80)
                            or (b[sp] & 0xC0) != 0x80):
                out.append(R)
                continue
            out.append(R)
            break
        elif 0xF0 <= b1 <= 0xF7:
            if sp + 2 < sl:
                b2 = b[sp]
                b3 = b[sp + 1]
                b4 = b[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) \
                    | (b4 & 0x3F)
                if (b2 & 0xC0) != 0x80 or (b3 & 0xC0) != 0x80 or (b4 & 0xC0) != 0x80 \
                        or not (0x10000 <= uc <= 0x10FFFF):
                    out.append(R)
                    sp -= 3
                    if b1 > 0xF4 or (b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) \
                            or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or (b2 & 0xC0) != 0x80:
                        pass
                    elif (b3 & 0xC0) != 0x80:
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                continue
            if b1 > 0xF4 or (sp < sl and ((b1 == 0xF0 and (b[sp] < 0x90 or b[sp] > 0xBF))
                                          or (b1 == 0xF4 and (b[sp] & 0xF0) != 0x80)
                                          or (b[sp] & 0xC0) != 0x80)):
                out.append(R)
                continue
            sp += 1
            if sp < sl and (b[sp] & 0xC0) != 0x80:
                out.append(R)
                continue
            out.append(R)
            break
        else:
            out.append(R)
    return "".join(out)


cdef int _put_data(Out *o, const Bin *key, const Bin *value, int64_t i) except -1:
    cdef Py_ssize_t ln
    cdef const uint8_t *p
    if not _null(key, i):
        p = _at(key, i, &ln)
        _put(o, b" key: ", 6)
        _put_text(o, p, ln)
    if not _null(value, i):
        p = _at(value, i, &ln)
        _put(o, b" payload: ", 10)
        _put_text(o, p, ln)
    return 0


def dump_records(batch, int64_t start, int64_t stop, bytes ttype, int magic,
                 int64_t base_offset, int64_t base_sequence, bint legacy_crc, bint valid,
                 int64_t crc, bint print_data, bint skip_metadata=False):
    """DumpLogSegments' record lines (``| offset: ...``) for rows [start, stop) of a
    decoded ``batch`` that all belong to one log batch with these header fields; keys and
    payloads (``print_data``) as UTF-8 text. Each line ends with a newline.
    ``skip_metadata`` (``--skip-record-metadata``): only ``|`` and the data (an empty line
    without ``print_data``, or without key and value), as Kafka 4.4 prints it."""
    cdef list keep = []
    cdef int64_t i, a, z, e, seq, delta
    if stop <= start:
        return b""
    cdef const int64_t *offsets = _i64(batch.column("offset"), keep)
    ts = batch.column("timestamp").cast(pa.int64())
    cdef const int64_t *stamps = _i64(ts, keep)
    cdef Bin key = _bin(batch.column("key"), keep)
    cdef Bin value = _bin(batch.column("value"), keep)
    cdef Headers hdr
    memset(&hdr, 0, sizeof(Headers))       # read only for magic 2; zeroed for gcc's sake
    if magic == 2:
        hdr = _headers(batch.column("headers"), keep)
    cdef Out o
    o.p = NULL
    o.n = o.cap = 0
    cdef Py_ssize_t ln
    cdef const uint8_t *p
    cdef bytes mid = b" " + ttype + b": "
    cdef bytes tail = b" isValid: " + (b"true" if valid else b"false") + b" crc: " \
        + str(crc).encode()
    try:
        _grow(&o, (stop - start) * 96 + 64)
        for i in range(start, stop):
            if skip_metadata:
                # "|" leads the data; a record with neither key nor value is an empty line
                if print_data and not (_null(&key, i) and _null(&value, i)):
                    _put(&o, b"|", 1)
                    _put_data(&o, &key, &value, i)
                _put(&o, b"\n", 1)
                continue
            _put(&o, b"| offset: ", 10)
            _put_int(&o, offsets[i])
            _put(&o, <const char *>mid, len(mid))
            _put_int(&o, _floor_ms(stamps[i]))
            _put(&o, b" keySize: ", 10)
            _put_int(&o, -1 if _null(&key, i) else key.offs[key.off + i + 1]
                     - key.offs[key.off + i])
            _put(&o, b" valueSize: ", 12)
            _put_int(&o, -1 if _null(&value, i) else value.offs[value.off + i + 1]
                     - value.offs[value.off + i])
            if magic == 2:
                if base_sequence < 0:
                    seq = -1
                else:
                    delta = offsets[i] - base_offset
                    seq = base_sequence + delta if base_sequence <= 0x7FFFFFFF - delta \
                        else delta - (0x7FFFFFFF - base_sequence) - 1
                _put(&o, b" sequence: ", 11)
                _put_int(&o, seq)
                _put(&o, b" headerKeys: [", 14)
                if _headers_of(&hdr, i, &a, &z):
                    for e in range(a, z):
                        if e > a:
                            _put(&o, b",", 1)
                        p = _at(&hdr.keys, e, &ln)
                        _put(&o, p, ln)
                _put(&o, b"]", 1)
            elif legacy_crc:
                _put(&o, <const char *>tail, len(tail))
            if print_data:
                _put_data(&o, &key, &value, i)
            _put(&o, b"\n", 1)
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        free(o.p)
