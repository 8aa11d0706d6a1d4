# cython: language_level=3
"""kcat's consumer output for a whole Arrow record batch at a time, compiled: a ``-f``
format program (``%o %k %s ...``, ``-s`` pack formats, ``-Z``) or ``-J`` objects.

Input is a batch in :func:`spark_kafkalog.format.schema.record_schema` (headers
included), read straight from its Arrow buffers; output is the bytes kcat 1.7 writes for
those records. The rules (from kcat's ``format.c`` and ``json.c``): an empty or null key or
value prints nothing (``-Z``: the null string); ``%K``/``%S`` are -1 for null; ``%R`` is
the value length as a big-endian int32; ``%h`` is ``name=value`` joined by ``,`` (a null
value prints ``NULL``). ``-J`` strings are escaped as yajl does (``\\" \\\\ \\b \\f \\n
\\r \\t``, other bytes below 0x20 as ``\\u00XX``; other bytes, UTF-8 or not, as they are).
"""
from libc.stdint cimport (int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t,
                          uint64_t, uintptr_t)
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memchr, memcpy, memset
from cpython.bytes cimport PyBytes_FromStringAndSize

from spark_kafkalog.format._bytes cimport kl_utf8_valid

import pyarrow as pa

#: opcodes of a format program (kcat's KC_FMT_*); the Python side builds the program
OP_STR, OP_OFFSET, OP_KEY, OP_KEY_LEN, OP_PAYLOAD, OP_PAYLOAD_LEN, OP_PAYLOAD_LEN_BINARY, \
    OP_TOPIC, OP_PARTITION, OP_TIMESTAMP, OP_HEADERS = range(11)

cdef struct Out:
    char *p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _grow(Out *o, Py_ssize_t need) except -1:
    cdef Py_ssize_t cap = o.cap * 2 if o.cap else 1 << 16
    while cap < o.n + need:
        cap *= 2
    cdef char *p = <char *>realloc(o.p, cap)
    if p == NULL:
        raise MemoryError()
    o.p = p
    o.cap = cap
    return 0


cdef inline int _put(Out *o, const void *s, Py_ssize_t n) except -1:
    if o.n + n > o.cap:
        _grow(o, n)
    if n:
        memcpy(o.p + o.n, s, n)
    o.n += n
    return 0


cdef int _put_int(Out *o, int64_t v) except -1:
    cdef char tmp[24]
    cdef int k = 24
    cdef uint64_t u = <uint64_t>(-v) if v < 0 else <uint64_t>v
    while True:
        k -= 1
        tmp[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if v < 0:
        k -= 1
        tmp[k] = 45
    return _put(o, &tmp[k], 24 - k)


cdef const char *_HEX = b"0123456789ABCDEF"


cdef int _put_json_str(Out *o, const uint8_t *s, Py_ssize_t n) except -1:
    cdef Py_ssize_t beg = 0, end = 0
    cdef uint8_t c
    cdef char esc[6]
    cdef Py_ssize_t elen
    if o.n + n + 2 > o.cap:
        _grow(o, n + 2)
    o.p[o.n] = 34
    o.n += 1
    esc[0] = 92
    while end < n:
        c = s[end]
        elen = 0
        if c >= 32 and c != 34 and c != 92:
            end += 1
            continue
        if c == 34 or c == 92:
            esc[1] = c
            elen = 2
        elif c == 10:
            esc[1] = 110
            elen = 2
        elif c == 13:
            esc[1] = 114
            elen = 2
        elif c == 9:
            esc[1] = 116
            elen = 2
        elif c == 8:
            esc[1] = 98
            elen = 2
        elif c == 12:
            esc[1] = 102
            elen = 2
        else:
            esc[1] = 117
            esc[2] = 48
            esc[3] = 48
            esc[4] = _HEX[c >> 4]
            esc[5] = _HEX[c & 15]
            elen = 6
        _put(o, s + beg, end - beg)
        _put(o, esc, elen)
        end += 1
        beg = end
    _put(o, s + beg, end - beg)
    return _put(o, b'"', 1)


cdef struct Bin:
    # an Arrow binary/string array: validity bitmap (NULL: none), int32 offsets, data
    const uint8_t *valid
    const int32_t *offs
    const uint8_t *data
    int64_t off


cdef inline bint _null(const Bin *b, int64_t i) noexcept nogil:
    cdef int64_t j = b.off + i
    return b.valid != NULL and not ((b.valid[j >> 3] >> (j & 7)) & 1)


cdef inline const uint8_t *_at(const Bin *b, int64_t i, Py_ssize_t *n) noexcept nogil:
    cdef int64_t j = b.off + i
    n[0] = b.offs[j + 1] - b.offs[j]
    return b.data + b.offs[j] if b.data != NULL else <const uint8_t *>b""


cdef uintptr_t _addr(buf):
    return 0 if buf is None else <uintptr_t>buf.address


cdef Bin _bin(arr, list keep):
    cdef Bin b
    bufs = arr.buffers()
    keep.append(bufs)
    b.valid = <const uint8_t *>_addr(bufs[0]) if arr.null_count else NULL
    b.offs = <const int32_t *>_addr(bufs[1])
    b.data = <const uint8_t *>_addr(bufs[2])
    b.off = arr.offset
    return b


cdef const int64_t *_i64(arr, list keep) except NULL:
    bufs = arr.buffers()
    keep.append(bufs)
    cdef int64_t off = arr.offset
    return (<const int64_t *>_addr(bufs[1])) + off


cdef const int32_t *_i32(arr, list keep) except NULL:
    bufs = arr.buffers()
    keep.append(bufs)
    cdef int64_t off = arr.offset
    return (<const int32_t *>_addr(bufs[1])) + off


cdef struct Headers:
    const uint8_t *valid        # the list's validity (NULL: none)
    const int32_t *loffs        # list offsets
    int64_t loff
    Bin keys
    Bin values


cdef Headers _headers(col, list keep):
    cdef Headers h
    bufs = col.buffers()
    keep.append(bufs)
    h.valid = <const uint8_t *>_addr(bufs[0]) if col.null_count else NULL
    h.loffs = <const int32_t *>_addr(bufs[1])
    h.loff = col.offset
    entries = col.values
    h.keys = _bin(entries.field(0), keep)
    h.values = _bin(entries.field(1), keep)
    return h


cdef inline bint _headers_of(const Headers *h, int64_t i, int64_t *a, int64_t *z) noexcept nogil:
    """The entries of row ``i``'s headers in [a, z); False when it has none (null)."""
    cdef int64_t j = h.loff + i
    if h.valid != NULL and not ((h.valid[j >> 3] >> (j & 7)) & 1):
        return False
    a[0] = h.loffs[j]
    z[0] = h.loffs[j + 1]
    return z[0] > a[0]


cdef uint64_t _be(const uint8_t *p, int n) noexcept nogil:
    cdef uint64_t v = 0
    cdef int k
    for k in range(n):
        v = (v << 8) | p[k]
    return v


cdef int _unpack(Out *o, const char *what, bytes fmt, const uint8_t *b, Py_ssize_t n,
                 list err) except -1:
    """kcat's ``-s`` pack format over one key or value; 1 and a message in ``err`` on a
    failure (output so far kept, as kcat's fprintf calls leave it). kcat 1.7 byte-swaps
    both endiannesses on a little-endian host, so every integer reads big-endian."""
    cdef const char *f = fmt
    cdef Py_ssize_t at = 0, remaining, width, k
    cdef char c
    cdef uint64_t v
    cdef const void *nul
    for k in range(len(fmt)):
        c = f[k]
        remaining = n - at
        if c == 32:
            _put(o, b" ", 1)
        elif c == 60 or c == 62:
            pass
        elif c in b"bBhHiIqQ":
            width = 1 if c in b"bB" else 2 if c in b"hH" else 4 if c in b"iI" else 8
            if width > remaining:
                err.append(f"{what.decode()} truncated, expected {width} bytes to unpack "
                           f"{chr(c)} but only {remaining} bytes remaining")
                return 1
            v = _be(b + at, width)
            at += width
            if c == 98:
                _put_int(o, <int8_t>v)
            elif c == 66:
                _put_int(o, <uint8_t>v)
            elif c == 104:
                _put_int(o, <int16_t>v)
            elif c == 72:
                _put_int(o, <uint16_t>v)
            elif c == 105:
                _put_int(o, <int32_t>v)
            elif c == 73:
                _put_int(o, <uint32_t>v)
            elif c == 113:
                _put_int(o, <int64_t>v)
            else:
                _put_uint(o, v)
        elif c == 99:
            if remaining < 1:
                err.append(f"{what.decode()} truncated, expected 1 bytes to unpack c but "
                           "only 0 bytes remaining")
                return 1
            _put(o, b + at, 1)
            at += 1
        elif c == 115:
            # fprintf's %.*s: up to the first NUL
            nul = memchr(b + at, 0, remaining)
            _put(o, b + at, (<const uint8_t *>nul - (b + at)) if nul != NULL else remaining)
            at = n
        elif c == 36:
            if remaining > 0:
                err.append(f"expected {what.decode()} end-of-input, but {remaining} bytes "
                           "remaining")
                return 1
    return 0


cdef int _put_uint(Out *o, uint64_t u) except -1:
    cdef char tmp[24]
    cdef int k = 24
    while True:
        k -= 1
        tmp[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    return _put(o, &tmp[k], 24 - k)


def format_records(batch, list program, bytes topic, int partition, *, bytes null_str=None,
                   bytes key_pack=None, bytes value_pack=None, bint stop_on_error=True):
    """kcat's ``-f`` output for every row of ``batch``: ``(bytes, rows done, errors)``.

    ``program``: ``(opcode, literal bytes)`` pairs (OP_*); ``null_str``: ``-Z``'s string;
    ``key_pack``/``value_pack``: ``-s`` formats. ``errors``: ``(row, message)`` of rows
    whose key or value did not unpack; with ``stop_on_error`` the first ends the batch
    (``rows done`` is then that row, its output so far included)."""
    cdef list keep = []
    cdef int64_t n = batch.num_rows, i
    cdef const int64_t *offsets = _i64(batch.column("offset"), keep) if n else NULL
    cdef const int64_t *stamps = NULL
    ts = batch.column("timestamp").cast(pa.int64()) if n else None
    if n:
        stamps = _i64(ts, keep)
    cdef Bin key, value
    cdef Headers hdr
    # zeroed: gcc cannot see that an empty batch (n == 0) never reads them, and warns
    memset(&key, 0, sizeof(Bin))
    memset(&value, 0, sizeof(Bin))
    memset(&hdr, 0, sizeof(Headers))
    cdef bint want_headers = any(op == OP_HEADERS for op, _ in program)
    if n:
        key = _bin(batch.column("key"), keep)
        value = _bin(batch.column("value"), keep)
        if want_headers:
            hdr = _headers(batch.column("headers"), keep)
    cdef int nops = len(program), k, op
    cdef int *ops = <int *>malloc(sizeof(int) * max(nops, 1))
    lits = [lit for _, lit in program]
    for k in range(nops):
        ops[k] = program[k][0]
    cdef Out o
    o.p = NULL
    o.n = o.cap = 0
    cdef Py_ssize_t ln, vlen
    cdef const uint8_t *p
    cdef const char *ctopic = topic
    cdef Py_ssize_t ntopic = len(topic)
    cdef const char *cnull = NULL
    cdef Py_ssize_t nnull = 0
    if null_str is not None:
        cnull = null_str
        nnull = len(null_str)
    cdef int64_t a, z, e
    cdef uint32_t be
    cdef uint8_t be4[4]
    cdef list errors = []
    cdef list err = []
    cdef bint failed
    cdef int64_t done = n
    try:
        _grow(&o, n * 32 + 64)
        for i in range(n):
            failed = False
            for k in range(nops):
                op = ops[k]
                if op == 0:
                    lit = lits[k]
                    _put(&o, <const char *>lit, len(lit))
                elif op == 1:
                    _put_int(&o, offsets[i])
                elif op == 2 or op == 4:
                    if op == 2:
                        p = _at(&key, i, &ln) if not _null(&key, i) else NULL
                    else:
                        p = _at(&value, i, &ln) if not _null(&value, i) else NULL
                    if p != NULL and ln > 0:
                        pack = key_pack if op == 2 else value_pack
                        if pack is not None:
                            if _unpack(&o, b"key" if op == 2 else b"value", pack, p, ln, err):
                                errors.append((i, err.pop()))
                                failed = True
                                break
                        else:
                            _put(&o, p, ln)
                    elif cnull != NULL:
                        _put(&o, cnull, nnull)
                elif op == 3:
                    _put_int(&o, -1 if _null(&key, i) else key.offs[key.off + i + 1]
                             - key.offs[key.off + i])
                elif op == 5 or op == 6:
                    vlen = -1 if _null(&value, i) else value.offs[value.off + i + 1] \
                        - value.offs[value.off + i]
                    if op == 5:
                        _put_int(&o, vlen)
                    else:
                        be = <uint32_t>vlen
                        be4[0] = be >> 24
                        be4[1] = (be >> 16) & 255
                        be4[2] = (be >> 8) & 255
                        be4[3] = be & 255
                        _put(&o, be4, 4)
                elif op == 7:
                    _put(&o, ctopic, ntopic)
                elif op == 8:
                    _put_int(&o, partition)
                elif op == 9:
                    _put_int(&o, _floor_ms(stamps[i]))
                elif op == 10:
                    if _headers_of(&hdr, i, &a, &z):
                        for e in range(a, z):
                            if e > a:
                                _put(&o, b",", 1)
                            p = _at(&hdr.keys, e, &ln)
                            _put(&o, p, ln)
                            _put(&o, b"=", 1)
                            if _null(&hdr.values, e):
                                _put(&o, b"NULL", 4)
                            else:
                                p = _at(&hdr.values, e, &ln)
                                _put(&o, p, ln)
            if failed and stop_on_error:
                done = i
                break
        return PyBytes_FromStringAndSize(o.p, o.n), done, errors
    finally:
        free(o.p)
        free(ops)


cdef inline int64_t _floor_ms(int64_t us) noexcept nogil:
    return us // 1000 if us >= 0 or us % 1000 == 0 else us // 1000 - 1


def json_records(batch, bytes topic, int partition, int broker, bytes delimiter):
    """kcat's ``-J`` objects for every row of ``batch``, each followed by ``delimiter``:
    ``{"topic":..,"partition":..,"offset":..,"tstype":..,"ts":..,"broker":..,
    "headers":[name,value,..] (only with headers),"key":..,"payload":..}``."""
    cdef list keep = []
    cdef int64_t n = batch.num_rows, i, a, z, e
    if n == 0:
        return b""
    cdef const int64_t *offsets = _i64(batch.column("offset"), keep)
    ts = batch.column("timestamp").cast(pa.int64())
    cdef const int64_t *stamps = _i64(ts, keep)
    cdef const int32_t *types = _i32(batch.column("timestampType"), keep)
    cdef Bin key = _bin(batch.column("key"), keep)
    cdef Bin value = _bin(batch.column("value"), keep)
    cdef Headers hdr = _headers(batch.column("headers"), keep)
    cdef Out o
    o.p = NULL
    o.n = o.cap = 0
    cdef Py_ssize_t ln
    cdef const uint8_t *p
    cdef bytes head = b'{"topic":'
    cdef bytes broker_text = b',"broker":' + str(broker).encode()
    cdef const char *cdelim = delimiter
    cdef Py_ssize_t ndelim = len(delimiter)
    try:
        _grow(&o, n * 128 + 64)
        for i in range(n):
            _put(&o, <const char *>head, len(head))
            _put_json_str(&o, topic, len(topic))
            _put(&o, b',"partition":', 13)
            _put_int(&o, partition)
            _put(&o, b',"offset":', 10)
            _put_int(&o, offsets[i])
            if types[i] == 1:
                _put(&o, b',"tstype":"logappend","ts":', 27)
            else:
                _put(&o, b',"tstype":"create","ts":', 24)
            _put_int(&o, _floor_ms(stamps[i]))
            _put(&o, <const char *>broker_text, len(broker_text))
            if _headers_of(&hdr, i, &a, &z):
                _put(&o, b',"headers":[', 12)
                for e in range(a, z):
                    if e > a:
                        _put(&o, b",", 1)
                    p = _at(&hdr.keys, e, &ln)
                    _put_json_str(&o, p, ln)
                    _put(&o, b",", 1)
                    if _null(&hdr.values, e):
                        _put(&o, b"null", 4)
                    else:
                        p = _at(&hdr.values, e, &ln)
                        _put_json_str(&o, p, ln)
                _put(&o, b"]", 1)
            _put(&o, b',"key":', 7)
            if _null(&key, i):
                _put(&o, b"null", 4)
            else:
                p = _at(&key, i, &ln)
                _put_json_str(&o, p, ln)
            _put(&o, b',"payload":', 11)
            if _null(&value, i):
                _put(&o, b"null", 4)
            else:
                p = _at(&value, i, &ln)
                _put_json_str(&o, p, ln)
            _put(&o, b"}", 1)
            _put(&o, cdelim, ndelim)
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        free(o.p)


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
