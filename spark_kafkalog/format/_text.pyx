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


# microseconds -> milliseconds rounded down (C division truncates); both parts print them
cdef inline int64_t _floor_ms(int64_t us) noexcept nogil:
    return us // 1000 if us >= 0 or us % 1000 == 0 else us // 1000 - 1


# The module's parts (textually one module: one extension, one C unit; the names as before).
include "_text_kcat.pxi"
include "_text_dump.pxi"
