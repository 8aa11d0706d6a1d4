# The columns: Arrow buffers as Chunk/BinCol/ListCol, the varint and
# big-endian writers, the column checks (a new input column's reader goes here).
# (Part of the _encode module: _encode.pyx includes it; not compiled alone.)

cdef enum:
    INT32_MAX_ = 2147483647

# error codes reported by prepare() (with the row involved)
cdef enum:
    ERR_OFFSETS = 1          # Arrow offsets outside their buffer / decreasing
    ERR_HEADER_KEY_NULL = 2
    ERR_TS_NEGATIVE = 3
    ERR_TS_RANGE = 4
    ERR_TOO_LARGE = 5

# column ids for ERR_OFFSETS
cdef enum:
    COL_KEY = 0
    COL_VALUE = 1
    COL_HEADERS = 2
    COL_HEADER_KEY = 3
    COL_HEADER_VALUE = 4
_COL_NAMES = ("key", "value", "headers", "headers.key", "headers.value")


cdef struct BinCol:
    bint present             # False: the column is absent or of null type (all null)
    const uint8_t* validity  # NULL: no nulls
    const uint8_t* offsets
    const uint8_t* data
    int64_t offset           # the array's slice offset
    int64_t length
    int64_t data_size        # bytes in the data buffer
    bint off64               # large_binary / large_string


cdef struct ListCol:
    bint present
    const uint8_t* validity
    const uint8_t* offsets
    int64_t offset
    int64_t length
    bint off64
    int64_t child_length


cdef struct Chunk:
    # One run of rows [row0, row1) of every column: the columns of a table built from
    # several record batches, read in place (never combined into one array).
    int64_t row0
    int64_t row1
    BinCol key
    BinCol value
    BinCol hkey              # headers' struct children (indexed by the list offsets)
    BinCol hval
    ListCol headers
    bint ts_present
    const uint8_t* ts_validity
    const uint8_t* ts_values
    int64_t ts_offset


cdef inline bint _valid(const uint8_t* validity, int64_t i) noexcept nogil:
    return validity == NULL or ((validity[i >> 3] >> (i & 7)) & 1)


cdef inline int64_t _off(const uint8_t* offsets, bint off64, int64_t i) noexcept nogil:
    if off64:
        return (<const int64_t*>offsets)[i]
    return (<const int32_t*>offsets)[i]


cdef inline bint _bin_null(const BinCol* c, int64_t i) noexcept nogil:
    return not c.present or not _valid(c.validity, c.offset + i)


cdef inline uint32_t _zz32(int32_t v) noexcept nogil:
    return (<uint32_t>v << 1) ^ <uint32_t>(v >> 31)


cdef inline uint64_t _zz64(int64_t v) noexcept nogil:
    return (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)


cdef inline int _uvarint_size(uint64_t u) noexcept nogil:
    cdef int n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


cdef inline int _varint_size(int64_t v) noexcept nogil:
    # zig-zag int32 (callers pass values in int32 range)
    return _uvarint_size(_zz32(<int32_t>v))


cdef inline int _varlong_size(int64_t v) noexcept nogil:
    return _uvarint_size(_zz64(v))


cdef inline uint8_t* _put_uvarint(uint8_t* p, uint64_t u) noexcept nogil:
    while u >= 0x80:
        p[0] = <uint8_t>((u & 0x7F) | 0x80)
        p += 1
        u >>= 7
    p[0] = <uint8_t>u
    return p + 1


cdef inline uint8_t* _put_varint(uint8_t* p, int64_t v) noexcept nogil:
    return _put_uvarint(p, _zz32(<int32_t>v))


cdef inline uint8_t* _put_varlong(uint8_t* p, int64_t v) noexcept nogil:
    return _put_uvarint(p, _zz64(v))


cdef inline void _be16(uint8_t* p, int v) noexcept nogil:
    p[0] = <uint8_t>(v >> 8)
    p[1] = <uint8_t>v


cdef inline void _be32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef inline void _be64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int k
    for k in range(8):
        p[k] = <uint8_t>(u >> (56 - 8 * k))


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    """floor(a / b) for b > 0. The two divisors Arrow units need are spelled out as
    constants so the compiler turns the division into a multiplication."""
    cdef int64_t q
    if b == 1000:
        q = a // 1000                # C division truncates toward zero (cdivision)
        if q * 1000 > a:
            q -= 1
    elif b == 1000000:
        q = a // 1000000
        if q * 1000000 > a:
            q -= 1
    else:
        q = a // b
        if q * b > a:
            q -= 1
    return q


cdef inline int _bin_part(const BinCol* c, int64_t i, int64_t* out) noexcept nogil:
    """varint(len) + len for element i of c (null: varint(-1)); 0 or ERR_OFFSETS."""
    cdef int64_t a, b
    if _bin_null(c, i):
        out[0] = 1
        return 0
    a = _off(c.offsets, c.off64, c.offset + i)
    b = _off(c.offsets, c.off64, c.offset + i + 1)
    if a < 0 or b < a or b > c.data_size or b - a > INT32_MAX_:
        return ERR_OFFSETS
    out[0] = _varint_size(b - a) + (b - a)
    return 0


cdef inline uint8_t* _put_bin(uint8_t* p, const BinCol* c, int64_t i) noexcept nogil:
    cdef int64_t a, b
    if _bin_null(c, i):
        p[0] = 1                 # zig-zag(-1)
        return p + 1
    a = _off(c.offsets, c.off64, c.offset + i)
    b = _off(c.offsets, c.off64, c.offset + i + 1)
    p = _put_varint(p, b - a)
    if b > a:                    # (an all-empty column may have no data buffer)
        kl_copy_field(p, c.data + a, <size_t>(b - a))
    return p + (b - a)


cdef const uint8_t* _addr(buf):
    return <const uint8_t*><size_t>buf.address if buf is not None else NULL


cdef _check_buffers(bufs, int64_t offset, int64_t length, int width, bint offsets,
                    str name):
    """The O(1) part of Arrow validation the kernel relies on: the validity buffer and
    the offsets (``length + 1`` entries) or values (``length``) buffer are long enough
    past ``offset``. The offsets' values are checked against the data as they are read."""
    if length == 0:
        return
    if bufs[0] is not None and bufs[0].size * 8 < offset + length:
        raise InvalidOptionError(f"column {name!r}: validity buffer too short (invalid array)")
    if bufs[1] is None or bufs[1].size < (offset + length + offsets) * width:
        raise InvalidOptionError(f"column {name!r}: {'offsets' if offsets else 'values'} buffer "
                         f"too short (invalid array)")


cdef void _fill_bin(BinCol* c, arr, bint off64, str name) except *:
    """Point ``c`` at a (sliced) binary/large_binary array's buffers (None = absent)."""
    if arr is None:
        c.present = False
        return
    bufs = arr.buffers()
    _check_buffers(bufs, arr.offset, len(arr), 8 if off64 else 4, True, name)
    c.present = True
    c.validity = _addr(bufs[0]) if arr.null_count else NULL
    c.offsets = _addr(bufs[1])
    c.data = _addr(bufs[2])
    c.data_size = bufs[2].size if bufs[2] is not None else 0
    c.offset = arr.offset
    c.length = len(arr)
    c.off64 = off64


def varint_size(int64_t v):
    """Bytes in the zig-zag varint (int32) encoding of ``v``."""
    if v < -2147483648 or v > 2147483647:
        raise InvalidOptionError(f"{v} is outside the int32 range of a varint")
    return _varint_size(v)


def varlong_size(int64_t v):
    """Bytes in the zig-zag varlong (int64) encoding of ``v``."""
    return _varlong_size(v)


def encode_varint(int64_t v):
    """``v`` (int32 range) as a zig-zag varint."""
    cdef uint8_t buf[10]
    if v < -2147483648 or v > 2147483647:
        raise InvalidOptionError(f"{v} is outside the int32 range of a varint")
    cdef uint8_t* end = _put_varint(buf, v)
    return PyBytes_FromStringAndSize(<char*>buf, end - buf)


def encode_varlong(int64_t v):
    """``v`` (int64 range) as a zig-zag varlong."""
    cdef uint8_t buf[10]
    cdef uint8_t* end = _put_varlong(buf, v)
    return PyBytes_FromStringAndSize(<char*>buf, end - buf)
