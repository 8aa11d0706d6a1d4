# cython: language_level=3
"""Compiled kernel: Arrow columns -> v2 record batches.

Private to :mod:`spark_kafkalog.format.encode`, which validates and normalises the
columns and hands this module raw Arrow buffers. Three passes over raw buffers, no
per-record Python object: ``prepare`` (timestamps, batch-independent record sizes,
every Arrow offset checked), ``plan`` (cut into batches of at most ``max_batch_bytes``
uncompressed), then write. :class:`PartitionedEncoder` writes every row, in row order,
into its own partition's batches. Record layout: wire.py.
"""
cimport cython
from cpython.bytes cimport (
    PyBytes_AS_STRING,
    PyBytes_FromStringAndSize,
    PyBytes_GET_SIZE,
    _PyBytes_Resize,
)
from cpython.ref cimport PyObject, Py_DECREF, Py_INCREF
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t, INT64_MAX, INT64_MIN
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcpy

cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* Ask for transparent huge pages on the 2 MiB-aligned interior of a big, freshly
       allocated output buffer. Filling 100+ MiB of new memory otherwise costs one page
       fault per 4 KiB -- more than writing the records themselves. A hint only. */
    static void kl_hint_hugepages(void *p, size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        uintptr_t a = ((uintptr_t)p + 0x1FFFFF) & ~(uintptr_t)0x1FFFFF;
        uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)0x1FFFFF;
        if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }

    /* Copy n bytes, never reading or writing outside [s, s+n) / [d, d+n): fields of a
       few dozen bytes (keys, values, header keys) are copied by fixed-size moves the
       compiler inlines -- overlapping pairs below 16 bytes, 16-byte steps and an
       overlapping last step up to 256 -- instead of a libc call per field. */
    static inline void kl_copy_field(uint8_t *d, const uint8_t *s, size_t n) {
        size_t k;
        if (n >= 16) {
            if (n > 256) { memcpy(d, s, n); return; }
            for (k = 0; k + 16 < n; k += 16) memcpy(d + k, s + k, 16);
            memcpy(d + n - 16, s + n - 16, 16);
        } else if (n >= 8) {
            memcpy(d, s, 8); memcpy(d + n - 8, s + n - 8, 8);
        } else if (n >= 4) {
            memcpy(d, s, 4); memcpy(d + n - 4, s + n - 4, 4);
        } else {
            for (k = 0; k < n; k++) d[k] = s[k];
        }
    }

    /* A bytes object about to be rewritten in place forgets any hash computed over its
       old contents (ob_shash: CPython <= 3.14). Returns 0 where that field is unknown,
       and then the caller does not reuse the object. */
    static int kl_bytes_reset_hash(PyObject *o) {
    #if PY_VERSION_HEX < 0x030F0000
    #pragma GCC diagnostic push
    #pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        ((PyBytesObject *)o)->ob_shash = -1;
    #pragma GCC diagnostic pop
        return 1;
    #else
        (void)o;
        return 0;
    #endif
    }

    """
    void kl_hint_hugepages(void* p, size_t n) nogil
    void kl_copy_field(uint8_t* d, const uint8_t* s, size_t n) nogil
    int kl_bytes_reset_hash(PyObject* o)

from spark_kafkalog.errors import BadRowError, InternalError, InvalidOptionError
from spark_kafkalog.format._wire cimport (
    ATTR_TIMESTAMP_TYPE,
    LOG_OVERHEAD, MAGIC_POS, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP,
    OFFSET_POS,
    SIZE_POS, V2_ATTRIBUTES_POS, V2_BASE_SEQUENCE_POS, V2_BASE_TIMESTAMP_POS, V2_CRC_POS,
    V2_HEADER_SIZE, V2_LAST_OFFSET_DELTA_POS, V2_MAX_TIMESTAMP_POS,
    V2_PARTITION_LEADER_EPOCH_POS, V2_PRODUCER_EPOCH_POS, V2_PRODUCER_ID_POS,
    V2_RECORD_COUNT_POS, wire_layout,
)

cdef extern from "_checksums.h":
    int kl_crc32c_init() nogil
    uint32_t kl_crc32c(uint32_t crc, const uint8_t* p, size_t n) nogil

#: the layout constants as this module was compiled with them (checked against wire.py)
WIRE_LAYOUT = wire_layout()

#: CRC-32C computed here (_checksums.h: SSE4.2 + PCLMULQDQ); when False, by the caller's
#: function
cdef bint _HWCRC = kl_crc32c_init()
HWCRC = bool(_HWCRC)


def _use_hw_crc(bint on):
    """Test hook: switch the kernel's CRC-32C off (the callers' function is used, as on
    CPUs without SSE4.2/PCLMULQDQ) or back on where the CPU allows. Returns the previous
    setting. Not thread-safe: only for tests."""
    global _HWCRC
    cdef bint before = _HWCRC
    _HWCRC = on and HWCRC
    return before


def crc32c_hw(data, uint32_t value=0):
    """CRC-32C of ``data`` continuing from ``value`` (as ``crc32c.crc32c``) with the
    kernel's code (test hook; InternalError when the CPU lacks
    SSE4.2/PCLMULQDQ)."""
    cdef const uint8_t[::1] v = data
    if not _HWCRC:
        raise InternalError("CRC-32C in the kernel needs SSE4.2 and PCLMULQDQ")
    if v.shape[0] == 0:
        return value
    return kl_crc32c(value, &v[0], v.shape[0])


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


# ---- output buffers ----------------------------------------------------------------
# A large output is a fresh bytes object, and fresh memory costs a page fault per page
# (and zeroing) before the first byte is written: for an uncompressed encode that is
# as much as the writing. So the last large output is kept, and when its user has let
# go of it (we hold the only reference) the next encode writes into it again: no new
# pages. The memory kept is one output, at most _SPARE_LIMIT bytes.
cdef PyObject* _spare = NULL         # owned reference, or NULL
cdef int64_t _SPARE_MIN = 1 << 20
cdef int64_t _spare_limit = 256 << 20


def set_output_reuse_limit(int64_t nbytes):
    """Largest output (bytes) kept for reuse by the next encode once its user drops it;
    0 keeps none (and frees the one kept). Returns the previous limit."""
    global _spare_limit, _spare
    cdef int64_t old = _spare_limit
    if nbytes < 0:
        raise InvalidOptionError(f"the output reuse limit must be >= 0, not {nbytes}")
    _spare_limit = nbytes
    _drop_spare_if(nbytes < _SPARE_MIN)
    return old


def output_reuse_kept():
    """Bytes of the output kept for reuse (0: none)."""
    return 0 if _spare == NULL else PyBytes_GET_SIZE(<object>_spare)


cdef void _drop_spare_if(bint cond):
    global _spare
    cdef PyObject* p = _spare
    if cond and p != NULL:
        _spare = NULL
        Py_DECREF(<object>p)


cdef object _new_output(int64_t n):
    """A bytes object of ``n`` bytes for the caller to fill (private until returned):
    the kept spare when nothing else references it and its size fits, else fresh."""
    global _spare
    cdef PyObject* p = _spare
    cdef int64_t size
    if p != NULL and p.ob_refcnt == 1:
        size = PyBytes_GET_SIZE(<object>p)
        # within a quarter of the size: resizing keeps the pages it has (realloc of a
        # mapped block is mremap: shrinking frees the tail, growing adds fresh pages)
        if n >= _SPARE_MIN and 4 * (size - n if size > n else n - size) <= max(size, n) \
                and kl_bytes_reset_hash(p):
            _spare = NULL                  # p's reference is now ours alone
            if size != n:
                _PyBytes_Resize(&p, n)     # on failure p is freed, MemoryError raised
            res = <object>p                # a second reference ...
            Py_DECREF(res)                 # ... and p's dropped: res is the only one
            return res
    out = PyBytes_FromStringAndSize(NULL, n)
    if n >= (8 << 20):
        kl_hint_hugepages(PyBytes_AS_STRING(out), n)
    return out


cdef void _keep_output(object out):
    """Keep ``out`` (a large result about to be returned) as the spare."""
    global _spare
    cdef int64_t n = PyBytes_GET_SIZE(out)
    if n < _SPARE_MIN or n > _spare_limit:
        return
    _drop_spare_if(True)
    Py_INCREF(out)
    _spare = <PyObject*>out


@cython.final
cdef class _RangeOut:
    """One range's compressed output: a bytes object written in place (private until
    ``finish``), grown by copying when a batch does not fit, shrunk to size at the end."""
    cdef object buf
    cdef uint8_t* base
    cdef int64_t cap
    cdef int64_t used
    cdef public list index

    def __cinit__(self, int64_t cap):
        self.cap = max(cap, 64)
        self.buf = _new_output(self.cap)
        self.base = <uint8_t*>PyBytes_AS_STRING(self.buf)
        self.used = 0
        self.index = []

    cdef int64_t reserve(self, int64_t n) except -1:
        """Room for ``n`` more bytes; returns their position (``base`` may move)."""
        cdef int64_t at = self.used
        if at + n > self.cap:
            cap = max(2 * self.cap, at + n)
            buf = PyBytes_FromStringAndSize(NULL, cap)
            memcpy(PyBytes_AS_STRING(buf), self.base, at)
            self.buf = buf
            self.base = <uint8_t*>PyBytes_AS_STRING(buf)
            self.cap = cap
        self.used = at + n
        return at

    cdef object finish(self):
        """The written bytes as a bytes object of exactly that size (shrunk in place:
        the unused tail of a large buffer is given back without copying)."""
        cdef PyObject* o = <PyObject*>self.buf
        Py_INCREF(self.buf)       # o's reference: the only one once self.buf lets go
        self.buf = None
        self.base = NULL
        _PyBytes_Resize(&o, self.used)   # on failure o is freed and MemoryError raised
        res = <object>o           # a second reference ...
        Py_DECREF(res)            # ... and o's dropped: res is the only one
        _keep_output(res)
        return res


cdef class Encoder:
    """Holds one Arrow batch's columns (and references keeping their buffers alive).

    Use: ``Encoder(...)``, ``prepare(now_ms)`` (raises ``InvalidOptionError`` describing the
    first bad row), ``plan(max_batch_bytes)``, then ``layout_uncompressed`` and
    ``fill_uncompressed``, or ``compress_range``. Not thread-safe; one instance per call.
    """
    cdef Chunk* chunks       # the columns, one entry per run of rows
    cdef int64_t nchunks
    cdef bint ts_int32
    cdef int64_t ts_mul, ts_div
    cdef int64_t n           # records to write (output positions 0..n-1)
    cdef int64_t nrows       # rows in the columns
    cdef const int64_t* idx  # output position -> row (NULL: the identity)
    cdef int64_t* ts_ms      # per record, epoch ms
    cdef int32_t* fixed      # per record body size minus the two deltas' varints
    cdef object _keep
    # given offsets (offsets="preserve" in encode.py): per row, then per record
    cdef const int64_t* row_off      # NULL: offsets are assigned (0, 1, 2, ...)
    cdef const uint8_t* row_lat      # NULL: every record CreateTime; else 1 = LogAppendTime
    cdef int64_t* rec_off            # per record (output position)
    cdef uint8_t* lat                # per record, or NULL
    # plan
    cdef int64_t nbatches
    cdef int64_t* starts     # nbatches + 1 record indices
    cdef int64_t* rec_bytes  # per batch: bytes of its records (uncompressed)
    cdef int64_t _max_rec
    # uncompressed layout (layout_uncompressed)
    cdef int64_t* pos        # nbatches + 1 byte positions
    cdef int64_t* max_ts     # per batch
    cdef int64_t* max_row    # per batch: first row holding max_ts
    cdef uint8_t* out_base
    cdef object _out

    def __cinit__(self):
        self.pos = NULL
        self.max_ts = NULL
        self.max_row = NULL
        self.ts_ms = NULL
        self.fixed = NULL
        self.starts = NULL
        self.rec_bytes = NULL
        self.idx = NULL
        self.chunks = NULL
        self.nchunks = 0
        self.row_off = NULL
        self.row_lat = NULL
        self.rec_off = NULL
        self.lat = NULL

    def __dealloc__(self):
        free(self.chunks)
        free(self.rec_off)
        free(self.lat)
        free(self.ts_ms)
        free(self.fixed)
        free(self.starts)
        free(self.rec_bytes)
        free(self.pos)
        free(self.max_ts)
        free(self.max_row)

    def __init__(self, list chunks, bint value64, bint key64, bint ts_int32,
                 int64_t ts_mul, int64_t ts_div, bint headers64, bint hkey64, bint hval64,
                 rows=None, row_offsets=None, row_lat=None):
        """``chunks``: the columns as runs of rows, a list of ``(value, key, timestamps,
        headers, hkey, hval)`` tuples of equally long arrays, already normalised by
        encode.py: value/key binary or large_binary (or None), timestamps int64/int32
        values in some unit (``ms = v * mul`` when ``div == 1`` else ``floor(v /
        div)``) or None, headers a list/large_list array (or None) with its flattened
        struct children ``hkey`` / ``hval`` (binary or large_binary). The flags give
        each column's offset width, the same in every chunk.

        ``rows``: None (write every row, in order) or a C-contiguous int64 numpy array
        of row numbers, each already checked to be in [0, rows in all chunks): the
        records written are those rows, in that order (output position ``i`` reads row
        ``rows[i]``).

        ``row_offsets``: None (offsets are assigned in output order) or a C-contiguous
        int64 array, the offset of every row (checked >= 0 by the caller): records keep
        those offsets (a batch's records carry offset deltas from its first; the
        offsets must increase strictly, which ``plan`` checks). ``row_lat``: None or a
        uint8 array, 1 for a row whose timestamp type is LogAppendTime (its batch gets
        the attribute and holds only records of that one timestamp)."""
        cdef const int64_t[::1] ix
        cdef const int64_t[::1] ov
        cdef const uint8_t[::1] lv
        cdef int64_t k, total = 0, m
        cdef Chunk* ch
        self.nchunks = len(chunks)
        self.chunks = <Chunk*>calloc(max(self.nchunks, 1), sizeof(Chunk))
        if self.chunks == NULL:
            raise MemoryError()
        self.ts_int32 = ts_int32
        self.ts_mul = ts_mul
        self.ts_div = ts_div
        for k in range(self.nchunks):
            value, key, timestamps, headers, hkey, hval = chunks[k]
            ch = &self.chunks[k]
            m = len(value)
            for col in (key, timestamps, headers):
                if col is not None and len(col) != m:
                    raise InvalidOptionError("columns differ in length")
            ch.row0 = total
            ch.row1 = total + m
            total += m
            _fill_bin(&ch.value, value, value64, "value")
            _fill_bin(&ch.key, key, key64, "key")
            if timestamps is None:
                ch.ts_present = False
            else:
                bufs = timestamps.buffers()
                _check_buffers(bufs, timestamps.offset, m, 4 if ts_int32 else 8, False,
                               "timestamp")
                ch.ts_present = True
                ch.ts_validity = _addr(bufs[0]) if timestamps.null_count else NULL
                ch.ts_values = _addr(bufs[1])
                ch.ts_offset = timestamps.offset
            if headers is None:
                ch.headers.present = False
                ch.hkey.present = False
                ch.hval.present = False
            else:
                if len(hval) != len(hkey):
                    raise InvalidOptionError("header key and value children differ in length")
                _fill_bin(&ch.hkey, hkey, hkey64, "headers.key")
                _fill_bin(&ch.hval, hval, hval64, "headers.value")
                bufs = headers.buffers()
                _check_buffers(bufs, headers.offset, m, 8 if headers64 else 4, True,
                               "headers")
                ch.headers.present = True
                ch.headers.validity = _addr(bufs[0]) if headers.null_count else NULL
                ch.headers.offsets = _addr(bufs[1])
                ch.headers.offset = headers.offset
                ch.headers.length = m
                ch.headers.off64 = headers64
                ch.headers.child_length = len(hkey)
        self.nrows = total
        self.n = total
        if rows is not None:
            ix = rows
            self.n = ix.shape[0]
            self.idx = &ix[0] if ix.shape[0] > 0 else NULL
        if row_offsets is not None:
            ov = row_offsets
            if ov.shape[0] != total:
                raise InternalError("row_offsets and the columns differ in length")
            self.row_off = &ov[0] if total else NULL
        if row_lat is not None:
            if row_offsets is None:
                raise InternalError("row_lat needs row_offsets")
            lv = row_lat
            if lv.shape[0] != total:
                raise InternalError("row_lat and the columns differ in length")
            self.row_lat = &lv[0] if total else NULL
        self._keep = (chunks, rows, row_offsets, row_lat)

    @cython.final
    cdef inline const Chunk* _chunk(self, int64_t r, int64_t* cur) noexcept nogil:
        """The chunk holding row ``r`` (``0 <= r < nrows``). ``cur`` is the caller's
        cursor (last chunk found): rows read in order, or sorted runs of an index, hit
        it without a search."""
        cdef int64_t c = cur[0], lo, hi, mid
        cdef const Chunk* ch = &self.chunks[c]
        if r >= ch.row0 and r < ch.row1:
            return ch
        if r >= ch.row1 and c + 1 < self.nchunks and r < self.chunks[c + 1].row1:
            c += 1                   # the next chunk (empty chunks are dropped upstream)
        else:
            lo = 0                   # chunks[lo].row0 <= r < chunks[hi].row0
            hi = self.nchunks
            while hi - lo > 1:
                mid = (lo + hi) >> 1
                if self.chunks[mid].row0 <= r:
                    lo = mid
                else:
                    hi = mid
            c = lo
        cur[0] = c
        return &self.chunks[c]

    # ---- pass 1 ---------------------------------------------------------------------
    def prepare(self, int64_t now_ms):
        """Per-record timestamps and batch-independent sizes. Raises InvalidOptionError naming
        the row and column on bad data."""
        cdef int64_t err_row = -1
        cdef int64_t err_ms = 0
        cdef int err = 0
        cdef int err_col = 0
        if self.n > 0:
            self.ts_ms = <int64_t*>malloc(self.n * sizeof(int64_t))
            self.fixed = <int32_t*>malloc(self.n * sizeof(int32_t))
            if self.ts_ms == NULL or self.fixed == NULL:
                raise MemoryError()
            if self.row_off != NULL:
                self.rec_off = <int64_t*>malloc(self.n * sizeof(int64_t))
                if self.rec_off == NULL:
                    raise MemoryError()
            if self.row_lat != NULL:
                self.lat = <uint8_t*>malloc(self.n)
                if self.lat == NULL:
                    raise MemoryError()
            if self.n * sizeof(int64_t) >= (4 << 20):
                kl_hint_hugepages(self.ts_ms, self.n * sizeof(int64_t))
                kl_hint_hugepages(self.fixed, self.n * sizeof(int32_t))
        with nogil:
            err = self._prepare(now_ms, &err_row, &err_col, &err_ms)
        if err == ERR_OFFSETS:
            raise InvalidOptionError(f"column {_COL_NAMES[err_col]!r}: Arrow offsets out of bounds "
                             f"at row {err_row} (invalid array)")
        if err == ERR_HEADER_KEY_NULL:
            raise InvalidOptionError(f"column 'headers': null header key (or null header) at row "
                             f"{err_row}; Kafka header keys are non-null strings")
        if err == ERR_TS_NEGATIVE:
            raise InvalidOptionError(f"column 'timestamp': negative (pre-1970) timestamp "
                             f"{err_ms} ms at row {err_row}; Kafka rejects negative "
                             f"timestamps other than -1 ms (NO_TIMESTAMP)")
        if err == ERR_TS_RANGE:
            raise InvalidOptionError(f"column 'timestamp': value at row {err_row} does not fit "
                             f"epoch milliseconds in int64")
        if err == ERR_TOO_LARGE:
            raise InvalidOptionError(f"record at row {err_row} is larger than a Kafka batch can "
                             f"hold (2 GiB)")

    @cython.final
    cdef int _prepare(self, int64_t now_ms, int64_t* err_row, int* err_col,
                      int64_t* err_ms) noexcept nogil:
        # Per output position i (ts_ms, fixed), reading row r of the columns. Errors
        # report the row (r), which is what the caller's table shows.
        cdef int64_t i, r, l, j, v, ms, h0, h1, part, size
        cdef int64_t cur = 0
        cdef const Chunk* ch
        cdef const ListCol* hl
        cdef const int64_t* idx = self.idx
        for i in range(self.n):
            r = idx[i] if idx != NULL else i
            ch = self._chunk(r, &cur)
            l = r - ch.row0          # row within the chunk
            hl = &ch.headers
            if self.rec_off != NULL:
                self.rec_off[i] = self.row_off[r]
            if self.lat != NULL:
                self.lat[i] = self.row_lat[r]
            # timestamp
            if ch.ts_present and _valid(ch.ts_validity, ch.ts_offset + l):
                if self.ts_int32:
                    v = (<const int32_t*>ch.ts_values)[ch.ts_offset + l]
                else:
                    v = (<const int64_t*>ch.ts_values)[ch.ts_offset + l]
                if self.ts_div != 1:
                    ms = _floordiv(v, self.ts_div)
                else:
                    if self.ts_mul != 1 and (v > INT64_MAX // self.ts_mul
                                             or v < INT64_MIN // self.ts_mul):
                        err_row[0] = r
                        return ERR_TS_RANGE
                    ms = v * self.ts_mul
                self.ts_ms[i] = ms
                if ms < NO_TIMESTAMP:   # -1 ms is Kafka's NO_TIMESTAMP: what a read gives
                    err_row[0] = r
                    err_ms[0] = ms
                    return ERR_TS_NEGATIVE
            else:
                self.ts_ms[i] = now_ms
            # attributes byte + key + value
            size = 1
            if _bin_part(&ch.key, l, &part):
                err_row[0] = r
                err_col[0] = COL_KEY
                return ERR_OFFSETS
            size += part
            if _bin_part(&ch.value, l, &part):
                err_row[0] = r
                err_col[0] = COL_VALUE
                return ERR_OFFSETS
            size += part
            # headers
            h0 = 0
            h1 = 0
            if hl.present and _valid(hl.validity, hl.offset + l):
                h0 = _off(hl.offsets, hl.off64, hl.offset + l)
                h1 = _off(hl.offsets, hl.off64, hl.offset + l + 1)
                if h0 < 0 or h1 < h0 or h1 > hl.child_length or h1 - h0 > INT32_MAX_:
                    err_row[0] = r
                    err_col[0] = COL_HEADERS
                    return ERR_OFFSETS
            size += _varint_size(h1 - h0)
            for j in range(h0, h1):
                if _bin_null(&ch.hkey, j):
                    err_row[0] = r
                    return ERR_HEADER_KEY_NULL
                if _bin_part(&ch.hkey, j, &part):
                    err_row[0] = r
                    err_col[0] = COL_HEADER_KEY
                    return ERR_OFFSETS
                size += part
                if _bin_part(&ch.hval, j, &part):
                    err_row[0] = r
                    err_col[0] = COL_HEADER_VALUE
                    return ERR_OFFSETS
                size += part
                if size > INT32_MAX_:
                    break
            # the whole batch (header + this one record) must fit batchLength (int32)
            if size + 5 + 10 + 5 + V2_HEADER_SIZE > INT32_MAX_:
                err_row[0] = r
                return ERR_TOO_LARGE
            self.fixed[i] = <int32_t>size
        return 0

    # ---- pass 2 ---------------------------------------------------------------------
    @cython.final
    cdef inline int64_t _ord(self, int64_t i) noexcept nogil:
        """Record ``i``'s offset relative to the call's base offset: its given offset,
        or its position when offsets are assigned."""
        return self.rec_off[i] if self.rec_off != NULL else i

    @cython.final
    cdef inline int _attr(self, int64_t i) noexcept nogil:
        """The timestamp-type attribute bit of the batch starting with record ``i``."""
        return ATTR_TIMESTAMP_TYPE if self.lat != NULL and self.lat[i] else 0

    @cython.final
    cdef inline bint _must_cut(self, int64_t first, int64_t i, int64_t first_ord,
                               int64_t ord_i) noexcept nogil:
        """Whether record ``i`` cannot join the batch whose first record is ``first``:
        its offset delta would overflow an int32, or its timestamp type differs, or both
        are LogAppendTime with different timestamps (a LogAppendTime batch gives every
        record its maxTimestamp)."""
        if ord_i - first_ord > INT32_MAX_:
            return True
        if self.lat != NULL and (self.lat[i] != self.lat[first] or (
                self.lat[i] and self.ts_ms[i] != self.ts_ms[first])):
            return True
        return False

    @cython.final
    cdef inline int64_t _record_size(self, int64_t i, int64_t base_ts,
                                     int64_t batch_start) noexcept nogil:
        cdef int64_t body = (self.fixed[i] + _varlong_size(self.ts_ms[i] - base_ts)
                             + _varint_size(self._ord(i) - self._ord(batch_start)))
        return _varint_size(body) + body

    cdef _order_error(self, int64_t i, int64_t prev, int64_t part=-1):
        """BadRowError: record ``i``'s offset does not exceed record ``prev``'s (of
        partition ``part``, when the encoder partitions)."""
        r = self.idx[i] if self.idx != NULL else i
        q = self.idx[prev] if self.idx != NULL else prev
        where = f"partition {part}: " if part >= 0 else ""
        return BadRowError(f"{where}offsets must increase strictly, but offset "
                           f"{self.rec_off[i]} (row {r}) comes after offset "
                           f"{self.rec_off[prev]} (row {q}) (column 'offset', rows in the "
                           f"order written)")

    def plan(self, int64_t max_batch_bytes):
        """Cut the records into batches: a batch takes records while its uncompressed
        size (61-byte header + records) stays within ``max_batch_bytes``; a record that
        alone exceeds it gets a batch of its own. Returns the number of batches."""
        cdef int64_t i, start, base_ts, size, rec, nb, cap, bad = -1
        free(self.starts)
        free(self.rec_bytes)
        cap = 16
        self.starts = <int64_t*>malloc((cap + 1) * sizeof(int64_t))
        self.rec_bytes = <int64_t*>malloc(cap * sizeof(int64_t))
        if self.starts == NULL or self.rec_bytes == NULL:
            raise MemoryError()
        nb = 0
        self._max_rec = 0
        with nogil:
            start = 0
            base_ts = 0
            size = 0
            for i in range(self.n):
                if self.rec_off != NULL and i > 0 and self.rec_off[i] <= self.rec_off[i - 1]:
                    bad = i
                    break
                if i == start:
                    base_ts = self.ts_ms[i]
                rec = self._record_size(i, base_ts, start)
                if i > start and (V2_HEADER_SIZE + size + rec > max_batch_bytes
                                  or self._must_cut(start, i, self._ord(start),
                                                    self._ord(i))):
                    if self._close_batch(&nb, &cap, start, size):
                        break
                    start = i
                    base_ts = self.ts_ms[i]
                    size = 0
                    rec = self._record_size(i, base_ts, start)
                size += rec
            if self.n > 0 and nb >= 0 and bad < 0:
                self._close_batch(&nb, &cap, start, size)
        if nb < 0:
            raise MemoryError()
        if bad >= 0:
            raise self._order_error(bad, bad - 1)
        self.starts[nb] = self.n
        self.nbatches = nb
        return nb

    @cython.final
    cdef int _close_batch(self, int64_t* nb, int64_t* cap, int64_t start,
                          int64_t size) noexcept nogil:
        cdef int64_t* s
        cdef int64_t* r
        if nb[0] == cap[0]:
            cap[0] *= 2
            s = <int64_t*>malloc((cap[0] + 1) * sizeof(int64_t))
            r = <int64_t*>malloc(cap[0] * sizeof(int64_t))
            if s == NULL or r == NULL:
                free(s)
                free(r)
                nb[0] = -1
                return 1
            memcpy(s, self.starts, nb[0] * sizeof(int64_t))
            memcpy(r, self.rec_bytes, nb[0] * sizeof(int64_t))
            free(self.starts)
            free(self.rec_bytes)
            self.starts = s
            self.rec_bytes = r
        self.starts[nb[0]] = start
        self.rec_bytes[nb[0]] = size
        if size > self._max_rec:
            self._max_rec = size
        nb[0] += 1
        return 0

    @property
    def total_records_bytes(self):
        """Uncompressed bytes of all planned batches' records."""
        cdef int64_t b, total = 0
        for b in range(self.nbatches):
            total += self.rec_bytes[b]
        return total

    # ---- pass 3 ---------------------------------------------------------------------
    @cython.final
    cdef inline uint8_t* _put_record(self, uint8_t* p, int64_t i, int64_t r,
                                     int64_t ts_delta, int64_t offset_delta,
                                     int64_t* cur) noexcept nogil:
        """Record ``i`` (output position; its row is ``r``) at p, with these deltas;
        returns the end. Sizes were checked in prepare."""
        cdef int64_t l, j, h0 = 0, h1 = 0
        cdef const Chunk* ch
        cdef const ListCol* hl
        cdef int64_t body = (self.fixed[i] + _varlong_size(ts_delta)
                             + _varint_size(offset_delta))
        p = _put_varint(p, body)
        p[0] = 0                     # record attributes: unused
        p = _put_varlong(p + 1, ts_delta)
        p = _put_varint(p, offset_delta)
        ch = self._chunk(r, cur)
        l = r - ch.row0
        p = _put_bin(p, &ch.key, l)
        p = _put_bin(p, &ch.value, l)
        hl = &ch.headers
        if hl.present and _valid(hl.validity, hl.offset + l):
            h0 = _off(hl.offsets, hl.off64, hl.offset + l)
            h1 = _off(hl.offsets, hl.off64, hl.offset + l + 1)
        p = _put_varint(p, h1 - h0)
        for j in range(h0, h1):
            p = _put_bin(p, &ch.hkey, j)
            p = _put_bin(p, &ch.hval, j)
        return p

    @cython.final
    cdef uint8_t* _write_records(self, uint8_t* p, int64_t start, int64_t end,
                                 int64_t* max_ts, int64_t* max_ts_row) noexcept nogil:
        """Records [start, end) at p; returns the end. Sizes were checked in prepare."""
        cdef int64_t i, r, ts
        cdef int64_t cur = 0
        cdef const int64_t* idx = self.idx
        cdef int64_t base_ts = self.ts_ms[start]
        cdef int64_t best = self.ts_ms[start]
        cdef int64_t best_row = start
        for i in range(start, end):
            ts = self.ts_ms[i]
            if ts > best:
                best = ts
                best_row = i
            r = idx[i] if idx != NULL else i     # the row output position i writes
            p = self._put_record(p, i, r, ts - base_ts, self._ord(i) - self._ord(start),
                                 &cur)
        max_ts[0] = best
        max_ts_row[0] = best_row
        return p

    @cython.final
    cdef void _write_header(self, uint8_t* p, int64_t base_offset, int64_t batch_length,
                            int32_t leader_epoch, int attributes, int64_t count,
                            int64_t last_delta, int64_t base_ts,
                            int64_t max_ts) noexcept nogil:
        _be64(p + OFFSET_POS, base_offset)
        _be32(p + SIZE_POS, batch_length)
        _be32(p + V2_PARTITION_LEADER_EPOCH_POS, leader_epoch)
        p[MAGIC_POS] = 2
        _be32(p + V2_CRC_POS, 0)     # filled in once the records are there
        _be16(p + V2_ATTRIBUTES_POS, attributes)
        _be32(p + V2_LAST_OFFSET_DELTA_POS, last_delta)
        _be64(p + V2_BASE_TIMESTAMP_POS, base_ts)
        _be64(p + V2_MAX_TIMESTAMP_POS, max_ts)
        _be64(p + V2_PRODUCER_ID_POS, NO_PRODUCER_ID)
        _be16(p + V2_PRODUCER_EPOCH_POS, NO_PRODUCER_EPOCH)
        _be32(p + V2_BASE_SEQUENCE_POS, NO_SEQUENCE)
        _be32(p + V2_RECORD_COUNT_POS, count)

    @cython.final
    cdef int64_t _range_size(self, int64_t start, int64_t end) noexcept nogil:
        cdef int64_t i, size = 0
        cdef int64_t base_ts = self.ts_ms[start]
        for i in range(start, end):
            size += self._record_size(i, base_ts, start)
        return size

    def compress_range(self, int64_t b0, int64_t b1, compress_fn, crc_fn,
                       int64_t max_batch_bytes, int64_t base_offset, int32_t leader_epoch,
                       int attributes):
        """Planned batches [b0, b1), each compressed with ``compress_fn(buffer) ->
        bytes-like``, written back to back (header and CRC-32C included: computed here
        when the CPU allows, else by ``crc_fn(buffer) -> int``). Returns ``(data, index)``: ``data`` a
        bytes object, ``index`` a list of ``(position in data, size, start_row, end_row,
        base_ts, max_ts, max_ts_row)`` per written batch. A batch whose compressed form
        exceeds ``max_batch_bytes`` (incompressible records plus codec framing) is split
        in two and retried, down to single records. Safe to run on disjoint ranges from
        several threads, each with its own ``compress_fn``.

        Each payload is copied into the output as soon as it is made, so the codec's
        result buffers are reused by the allocator instead of piling up (and faulting
        in fresh pages) until the end."""
        cdef int64_t b, bound = 0
        if b0 < 0 or b1 > self.nbatches or b0 > b1:
            raise InternalError(f"batch range [{b0}, {b1}) is not within the plan")
        for b in range(b0, b1):
            # generous for every codec's worst case (snappy: n + n/6 + framing); pages
            # never written are never touched, and the output grows if ever needed
            bound += V2_HEADER_SIZE + self.rec_bytes[b] + self.rec_bytes[b] // 6 + 256
        out = _RangeOut(bound)
        holder = [bytearray(max(self._max_rec, 1)), None]
        holder[1] = memoryview(holder[0])
        try:
            for b in range(b0, b1):
                self._emit(self.starts[b], self.starts[b + 1], holder, compress_fn,
                           crc_fn, max_batch_bytes, base_offset, leader_epoch, attributes,
                           out)
        finally:
            holder[1].release()
        return out.finish(), out.index

    cdef _emit(self, int64_t start, int64_t end, list holder, compress_fn, crc_fn,
               int64_t max_batch_bytes, int64_t base_offset, int32_t leader_epoch,
               int attributes, _RangeOut out):
        cdef int64_t size, max_ts, max_row, mid, plen
        cdef uint8_t* buf
        cdef uint8_t* q
        cdef uint8_t* h
        size = self._range_size(start, end)
        if size > len(holder[0]):
            # a split half re-based on another first timestamp can need longer deltas
            holder[1].release()
            holder[0] = bytearray(size)
            holder[1] = memoryview(holder[0])
        buf = <uint8_t*>PyByteArray_AS_STRING(holder[0])
        with nogil:
            q = self._write_records(buf, start, end, &max_ts, &max_row)
        if q - buf != size:
            raise InternalError(f"encoder wrote {q - buf} bytes for a {size}-byte batch")
        packed = compress_fn(holder[1][:size])
        plen = len(packed)
        if V2_HEADER_SIZE + plen > max_batch_bytes and end - start > 1:
            mid = start + (end - start) // 2
            self._emit(start, mid, holder, compress_fn, crc_fn, max_batch_bytes,
                       base_offset, leader_epoch, attributes, out)
            self._emit(mid, end, holder, compress_fn, crc_fn, max_batch_bytes,
                       base_offset, leader_epoch, attributes, out)
            return
        if V2_HEADER_SIZE - LOG_OVERHEAD + plen > INT32_MAX_:
            raise InvalidOptionError(f"compressed batch at row {start} is larger than 2 GiB")
        cdef const uint8_t[::1] v = packed
        cdef int64_t at = out.reserve(V2_HEADER_SIZE + plen)
        h = out.base + at
        if plen:
            memcpy(h + V2_HEADER_SIZE, &v[0], plen)
        self._write_header(h, base_offset + self._ord(start),
                           V2_HEADER_SIZE - LOG_OVERHEAD + plen, leader_epoch,
                           attributes | self._attr(start), end - start,
                           self._ord(end - 1) - self._ord(start), self.ts_ms[start], max_ts)
        # the output is private to this range until finish(): filling in the CRC is
        # safe (the views are released before anything can resize it)
        if _HWCRC:
            _be32(h + V2_CRC_POS, kl_crc32c(0, h + V2_ATTRIBUTES_POS,
                                         V2_HEADER_SIZE - V2_ATTRIBUTES_POS + plen))
        else:
            with memoryview(out.buf) as whole:
                with whole[at + V2_ATTRIBUTES_POS:at + V2_HEADER_SIZE + plen] as part:
                    _be32(h + V2_CRC_POS, crc_fn(part))
        out.index.append((at, V2_HEADER_SIZE + plen, start, end, self.ts_ms[start], max_ts,
                          max_row))

    def layout_uncompressed(self):
        """Allocate the output of all planned batches, uncompressed (a ``bytes`` object
        filled by ``fill_uncompressed``; not to be used before every range is filled)
        and return it."""
        cdef int64_t b
        free(self.pos)
        free(self.max_ts)
        free(self.max_row)
        self.pos = <int64_t*>malloc((self.nbatches + 1) * sizeof(int64_t))
        self.max_ts = <int64_t*>malloc((self.nbatches + 1) * sizeof(int64_t))
        self.max_row = <int64_t*>malloc((self.nbatches + 1) * sizeof(int64_t))
        if self.pos == NULL or self.max_ts == NULL or self.max_row == NULL:
            raise MemoryError()
        self.pos[0] = 0
        for b in range(self.nbatches):
            self.pos[b + 1] = self.pos[b] + V2_HEADER_SIZE + self.rec_bytes[b]
        out = _new_output(self.pos[self.nbatches])
        self.out_base = <uint8_t*>PyBytes_AS_STRING(out)
        self._out = out
        _keep_output(out)
        return out

    def fill_uncompressed(self, int64_t b0, int64_t b1, int64_t base_offset,
                          int32_t leader_epoch, crc_fn):
        """Write planned batches [b0, b1) into the ``layout_uncompressed`` output,
        headers and CRCs included. Ranges may be filled by different threads at once:
        the record writing runs without the GIL and ranges do not overlap.
        CRC-32C is computed here right after each batch is written (in cache) when the
        CPU allows, else afterwards by ``crc_fn(buffer) -> int``."""
        cdef int64_t b, p
        cdef bint bad = False
        if self._out is None or b0 < 0 or b1 > self.nbatches or b0 > b1:
            raise InternalError(f"batch range [{b0}, {b1}) is not within the plan")
        with nogil:
            for b in range(b0, b1):
                if not self._fill_one(b, base_offset, leader_epoch):
                    bad = True
                    break
                if _HWCRC:
                    p = self.pos[b]
                    _be32(self.out_base + p + V2_CRC_POS,
                          kl_crc32c(0, self.out_base + p + V2_ATTRIBUTES_POS,
                                    self.pos[b + 1] - p - V2_ATTRIBUTES_POS))
        if bad:
            raise InternalError("encoder wrote a batch of other than its planned size")
        if _HWCRC:
            return
        # The bytes object is still private to encode(): filling in CRCs is safe.
        view = memoryview(self._out)
        for b in range(b0, b1):
            p = self.pos[b]
            _be32(self.out_base + p + V2_CRC_POS,
                  crc_fn(view[p + V2_ATTRIBUTES_POS:self.pos[b + 1]]))
        view.release()

    @cython.final
    cdef bint _fill_one(self, int64_t b, int64_t base_offset,
                        int32_t leader_epoch) noexcept nogil:
        """Records and header (CRC 0) of planned batch ``b``; False on a size mismatch."""
        cdef int64_t start = self.starts[b]
        cdef int64_t end = self.starts[b + 1]
        cdef int64_t p = self.pos[b]
        cdef int64_t size = self.pos[b + 1] - p
        cdef uint8_t* q = self._write_records(self.out_base + p + V2_HEADER_SIZE, start, end,
                                              &self.max_ts[b], &self.max_row[b])
        if q - (self.out_base + p) != size:
            return False
        self._write_header(self.out_base + p, base_offset + self._ord(start),
                           size - LOG_OVERHEAD, leader_epoch, self._attr(start), end - start,
                           self._ord(end - 1) - self._ord(start), self.ts_ms[start],
                           self.max_ts[b])
        return True

    def uncompressed_index(self, int64_t base_offset):
        """Per-batch columns of the uncompressed layout, each as native-endian bytes:
        (position, size, base_offset, last_offset, first_ts, max_ts, max_ts_offset) int64
        and record_count int32."""
        cdef int64_t b, nb = self.nbatches
        cdef bytearray cols = bytearray(nb * 8 * 7)
        cdef bytearray counts = bytearray(nb * 4)
        cdef int64_t* c = <int64_t*>PyByteArray_AS_STRING(cols)
        cdef int32_t* k = <int32_t*>PyByteArray_AS_STRING(counts)
        for b in range(nb):
            c[b] = self.pos[b]
            c[nb + b] = self.pos[b + 1] - self.pos[b]
            c[2 * nb + b] = base_offset + self._ord(self.starts[b])
            c[3 * nb + b] = base_offset + self._ord(self.starts[b + 1] - 1)
            c[4 * nb + b] = self.ts_ms[self.starts[b]]
            c[5 * nb + b] = self.max_ts[b]
            c[6 * nb + b] = base_offset + self._ord(self.max_row[b])
            k[b] = <int32_t>(self.starts[b + 1] - self.starts[b])
        view = memoryview(cols)
        return [bytes(view[i * nb * 8:(i + 1) * nb * 8]) for i in range(7)] + [bytes(counts)]


@cython.final
cdef class PartitionedEncoder(Encoder):
    """Every row, each into the uncompressed batches of its own partition, in one pass.

    Use: ``PartitionedEncoder(...)`` (as :class:`Encoder`, without ``rows``),
    ``prepare(now_ms)``, ``set_partitions(parts, nparts)``, ``plan_partitioned``,
    ``layout_partitioned``, ``fill_partitioned``, then ``index``.

    Why: encoding each partition with :class:`Encoder` over its rows (``rows``) reads
    the columns once per partition, a few rows per cache line each time; this reads
    them in row order, once to size and once to write, and writes each record at its
    partition's write position. Each partition's records keep their row order, and its
    batches are cut and laid out exactly as ``Encoder`` over its rows would (the same
    bytes): in the output, partition 0's batches, then 1's, and so on."""
    cdef const int32_t* parts
    cdef int64_t nparts
    cdef object _parts_keep
    cdef int64_t nb          # batches planned, numbered in the order they were closed
    cdef int64_t bcap
    cdef int64_t* b_part
    cdef int64_t* b_count
    cdef int64_t* b_first    # its first record's ordinal in the partition (given offset)
    cdef int64_t* b_bytes    # bytes of its records
    cdef int64_t* b_ts       # its first record's timestamp (the batch's base)
    cdef int64_t* b_span     # its lastOffsetDelta
    cdef int64_t* b_attr     # its timestamp-type attribute bit
    cdef int64_t* lay        # laid-out position -> batch
    cdef int64_t* sec        # nparts + 1: partition p's batches are lay[sec[p]:sec[p + 1]]
    cdef int64_t* lpos       # nb + 1 byte positions, laid-out order
    cdef int64_t* lmax_ts    # per laid-out batch
    cdef int64_t* lmax_ord   # per laid-out batch: ordinal of the first record of max_ts

    def __cinit__(self):
        self.parts = NULL
        self.nparts = 0
        self.nb = 0
        self.bcap = 0
        self.b_part = NULL
        self.b_count = NULL
        self.b_first = NULL
        self.b_bytes = NULL
        self.b_ts = NULL
        self.b_span = NULL
        self.b_attr = NULL
        self.lay = NULL
        self.sec = NULL
        self.lpos = NULL
        self.lmax_ts = NULL
        self.lmax_ord = NULL

    def __dealloc__(self):
        free(self.b_part)
        free(self.b_count)
        free(self.b_first)
        free(self.b_bytes)
        free(self.b_ts)
        free(self.b_span)
        free(self.b_attr)
        free(self.lay)
        free(self.sec)
        free(self.lpos)
        free(self.lmax_ts)
        free(self.lmax_ord)

    def set_partitions(self, parts, int64_t nparts):
        """``parts``: C-contiguous int32 numpy array, the partition of every row, each
        in [0, nparts)."""
        cdef const int32_t[::1] pv = parts
        cdef int64_t i, bad = -1
        if self.idx != NULL:
            raise InternalError("a PartitionedEncoder writes every row (no rows selection)")
        if pv.shape[0] != self.n:
            raise InvalidOptionError(f"{pv.shape[0]} partitions given for {self.n} rows")
        if nparts < 1 or nparts > INT32_MAX_:
            raise InvalidOptionError(f"partition count {nparts} out of range")
        with nogil:
            for i in range(pv.shape[0]):
                if pv[i] < 0 or pv[i] >= nparts:
                    bad = i
                    break
        if bad >= 0:
            raise InvalidOptionError(f"row {bad}: partition {pv[bad]} outside [0, {nparts})")
        self.parts = &pv[0] if pv.shape[0] else NULL
        self.nparts = nparts
        self._parts_keep = parts

    cdef inline int64_t _rec_size(self, int64_t i, int64_t base_ts,
                                  int64_t delta) noexcept nogil:
        cdef int64_t body = (self.fixed[i] + _varlong_size(self.ts_ms[i] - base_ts)
                             + _varint_size(delta))
        return _varint_size(body) + body

    cdef int _close(self, int64_t part, int64_t first, int64_t count, int64_t size,
                    int64_t base_ts, int64_t span, int64_t attr) noexcept nogil:
        cdef int64_t cap
        cdef int64_t* arrays[7]
        cdef int k
        if self.nb == self.bcap:
            cap = self.bcap * 2 if self.bcap else 64
            arrays[0] = <int64_t*>realloc(self.b_part, cap * sizeof(int64_t))
            if arrays[0] != NULL:
                self.b_part = arrays[0]
            arrays[1] = <int64_t*>realloc(self.b_count, cap * sizeof(int64_t))
            if arrays[1] != NULL:
                self.b_count = arrays[1]
            arrays[2] = <int64_t*>realloc(self.b_first, cap * sizeof(int64_t))
            if arrays[2] != NULL:
                self.b_first = arrays[2]
            arrays[3] = <int64_t*>realloc(self.b_bytes, cap * sizeof(int64_t))
            if arrays[3] != NULL:
                self.b_bytes = arrays[3]
            arrays[4] = <int64_t*>realloc(self.b_ts, cap * sizeof(int64_t))
            if arrays[4] != NULL:
                self.b_ts = arrays[4]
            arrays[5] = <int64_t*>realloc(self.b_span, cap * sizeof(int64_t))
            if arrays[5] != NULL:
                self.b_span = arrays[5]
            arrays[6] = <int64_t*>realloc(self.b_attr, cap * sizeof(int64_t))
            if arrays[6] != NULL:
                self.b_attr = arrays[6]
            for k in range(7):
                if arrays[k] == NULL:
                    return 1
            self.bcap = cap
        self.b_part[self.nb] = part
        self.b_count[self.nb] = count
        self.b_first[self.nb] = first
        self.b_bytes[self.nb] = size
        self.b_ts[self.nb] = base_ts
        self.b_span[self.nb] = span
        self.b_attr[self.nb] = attr
        if size > self._max_rec:
            self._max_rec = size
        self.nb += 1
        return 0

    def plan_partitioned(self, int64_t max_batch_bytes):
        """Cut each partition's records into batches as :meth:`Encoder.plan` does (given
        offsets must increase strictly within each partition). Returns the number of
        batches."""
        cdef int64_t np_ = self.nparts
        cdef int64_t i, p, rec, o, bad = -1, bad_prev = -1
        cdef int failed = 0
        if self.parts == NULL and self.n:
            raise InternalError("set_partitions first")
        cdef int64_t* k = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* size = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* bts = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* first = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* cnt = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* brow = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* last = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))   # its record
        try:
            if (k == NULL or size == NULL or bts == NULL or first == NULL or cnt == NULL
                    or brow == NULL or last == NULL):
                raise MemoryError()
            self.nb = 0
            self._max_rec = 0
            with nogil:
                for i in range(self.n):
                    p = self.parts[i]
                    o = self.rec_off[i] if self.rec_off != NULL else cnt[p]
                    if self.rec_off != NULL and cnt[p] > 0 and o <= self.rec_off[last[p]]:
                        bad = i
                        bad_prev = last[p]
                        break
                    if k[p] == 0:
                        bts[p] = self.ts_ms[i]
                        first[p] = o
                        brow[p] = i
                    rec = self._rec_size(i, bts[p], o - first[p])
                    if k[p] > 0 and (V2_HEADER_SIZE + size[p] + rec > max_batch_bytes
                                     or self._must_cut(brow[p], i, first[p], o)):
                        if self._close(p, first[p], k[p], size[p], bts[p],
                                       self._ord_p(last[p], cnt[p] - 1) - first[p],
                                       self._attr(brow[p])):
                            failed = 1
                            break
                        k[p] = 0
                        size[p] = 0
                        bts[p] = self.ts_ms[i]
                        first[p] = o
                        brow[p] = i
                        rec = self._rec_size(i, bts[p], 0)
                    size[p] += rec
                    k[p] += 1
                    cnt[p] += 1
                    last[p] = i
                if not failed and bad < 0:
                    for p in range(np_):
                        if k[p] > 0 and self._close(p, first[p], k[p], size[p], bts[p],
                                                    self._ord_p(last[p], cnt[p] - 1)
                                                    - first[p], self._attr(brow[p])):
                            failed = 1
                            break
            if failed:
                raise MemoryError()
            if bad >= 0:
                raise self._order_error(bad, bad_prev, self.parts[bad])
        finally:
            free(k)
            free(size)
            free(bts)
            free(first)
            free(cnt)
            free(brow)
            free(last)
        self.nbatches = self.nb
        return self.nb

    cdef inline int64_t _ord_p(self, int64_t i, int64_t ordinal) noexcept nogil:
        """Record ``i``'s offset (relative to the base) when it is the partition's
        ``ordinal``-th record."""
        return self.rec_off[i] if self.rec_off != NULL else ordinal

    def layout_partitioned(self):
        """Allocate the output (a ``bytes`` object that ``fill_partitioned`` fills) with
        each partition's batches together, partitions in order; return it."""
        cdef int64_t b, j, p, nb = self.nb
        free(self.lay)
        free(self.sec)
        free(self.lpos)
        free(self.lmax_ts)
        free(self.lmax_ord)
        self.lay = <int64_t*>malloc(max(nb, 1) * sizeof(int64_t))
        self.sec = <int64_t*>calloc(self.nparts + 1, sizeof(int64_t))
        self.lpos = <int64_t*>malloc((nb + 1) * sizeof(int64_t))
        self.lmax_ts = <int64_t*>malloc(max(nb, 1) * sizeof(int64_t))
        self.lmax_ord = <int64_t*>malloc(max(nb, 1) * sizeof(int64_t))
        cdef int64_t* at = <int64_t*>malloc((self.nparts + 1) * sizeof(int64_t))
        if (self.lay == NULL or self.sec == NULL or self.lpos == NULL
                or self.lmax_ts == NULL or self.lmax_ord == NULL or at == NULL):
            free(at)
            raise MemoryError()
        for b in range(nb):
            self.sec[self.b_part[b] + 1] += 1
        for p in range(self.nparts):
            self.sec[p + 1] += self.sec[p]
        memcpy(at, self.sec, (self.nparts + 1) * sizeof(int64_t))
        for b in range(nb):                  # stable: a partition's batches keep order
            p = self.b_part[b]
            self.lay[at[p]] = b
            at[p] += 1
        free(at)
        self.lpos[0] = 0
        for j in range(nb):
            self.lpos[j + 1] = self.lpos[j] + V2_HEADER_SIZE + self.b_bytes[self.lay[j]]
        out = _new_output(self.lpos[nb])
        self.out_base = <uint8_t*>PyBytes_AS_STRING(out)
        self._out = out
        _keep_output(out)
        return out

    def fill_partitioned(self, int64_t base_offset, int32_t leader_epoch, crc_fn):
        """Write every record, batch header and CRC into the ``layout_partitioned``
        output, reading the rows in order. ``base_offset`` is each partition's first
        offset. CRCs as in :meth:`Encoder.fill_uncompressed`."""
        cdef int64_t np_ = self.nparts
        cdef int64_t i, p, jj, b, ts, size, pos
        cdef int64_t cur = 0
        cdef int bad = 0
        cdef uint8_t* q
        cdef uint8_t* start
        if self._out is None or self.lay == NULL:
            raise InternalError("layout_partitioned first")
        cdef int64_t* j = <int64_t*>malloc(max(np_, 1) * sizeof(int64_t))
        cdef int64_t* k = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* ordn = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* best = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef int64_t* best_ord = <int64_t*>calloc(max(np_, 1), sizeof(int64_t))
        cdef uint8_t** wp = <uint8_t**>calloc(max(np_, 1), sizeof(uint8_t*))
        try:
            if (j == NULL or k == NULL or ordn == NULL or best == NULL or best_ord == NULL
                    or wp == NULL):
                raise MemoryError()
            with nogil:
                for p in range(np_):
                    j[p] = self.sec[p]
                    if self.sec[p] < self.sec[p + 1]:
                        wp[p] = self.out_base + self.lpos[j[p]] + V2_HEADER_SIZE
                for i in range(self.n):
                    p = self.parts[i]
                    jj = j[p]
                    b = self.lay[jj]
                    ts = self.ts_ms[i]
                    if k[p] == 0 or ts > best[p]:
                        best[p] = ts
                        best_ord[p] = self._ord_p(i, ordn[p])
                    q = self._put_record(wp[p], i, i, ts - self.b_ts[b],
                                         self._ord_p(i, ordn[p]) - self.b_first[b], &cur)
                    wp[p] = q
                    k[p] += 1
                    ordn[p] += 1
                    if k[p] == self.b_count[b]:
                        pos = self.lpos[jj]
                        size = self.lpos[jj + 1] - pos
                        start = self.out_base + pos
                        if q - start != size:
                            bad = 1
                            break
                        self._write_header(start, base_offset + self.b_first[b],
                                           size - LOG_OVERHEAD, leader_epoch,
                                           <int>self.b_attr[b], k[p], self.b_span[b],
                                           self.b_ts[b], best[p])
                        self.lmax_ts[jj] = best[p]
                        self.lmax_ord[jj] = best_ord[p]
                        if _HWCRC:
                            _be32(start + V2_CRC_POS,
                                  kl_crc32c(0, start + V2_ATTRIBUTES_POS,
                                            size - V2_ATTRIBUTES_POS))
                        j[p] = jj + 1
                        k[p] = 0
                        if j[p] < self.sec[p + 1]:
                            wp[p] = self.out_base + self.lpos[j[p]] + V2_HEADER_SIZE
        finally:
            free(j)
            free(k)
            free(ordn)
            free(best)
            free(best_ord)
            free(wp)
        if bad:
            raise InternalError("encoder wrote a batch of other than its planned size")
        if _HWCRC:
            return
        view = memoryview(self._out)
        for jj in range(self.nb):
            pos = self.lpos[jj]
            _be32(self.out_base + pos + V2_CRC_POS,
                  crc_fn(view[pos + V2_ATTRIBUTES_POS:self.lpos[jj + 1]]))
        view.release()

    def index(self, int64_t base_offset):
        """``(sections, columns)``: ``sections`` lists ``(partition, first batch, end
        batch, start byte, end byte)`` for every partition with records, in order;
        ``columns`` are the batch index columns of every batch in layout order, as
        :meth:`Encoder.uncompressed_index` gives them, with each position relative to
        its partition's start byte."""
        if self.sec == NULL:
            raise InternalError("layout_partitioned first")
        cdef int64_t nb = self.nb, p, jj, b, base
        cdef bytearray cols = bytearray(nb * 8 * 7)
        cdef bytearray counts = bytearray(nb * 4)
        cdef int64_t* c = <int64_t*>PyByteArray_AS_STRING(cols)
        cdef int32_t* kk = <int32_t*>PyByteArray_AS_STRING(counts)
        sections = []
        for p in range(self.nparts):
            if self.sec[p] == self.sec[p + 1]:
                continue
            base = self.lpos[self.sec[p]]
            sections.append((p, self.sec[p], self.sec[p + 1], base,
                             self.lpos[self.sec[p + 1]]))
            for jj in range(self.sec[p], self.sec[p + 1]):
                b = self.lay[jj]
                c[jj] = self.lpos[jj] - base
                c[nb + jj] = self.lpos[jj + 1] - self.lpos[jj]
                c[2 * nb + jj] = base_offset + self.b_first[b]
                c[3 * nb + jj] = base_offset + self.b_first[b] + self.b_span[b]
                c[4 * nb + jj] = self.b_ts[b]
                c[5 * nb + jj] = self.lmax_ts[jj]
                c[6 * nb + jj] = base_offset + self.lmax_ord[jj]
                kk[jj] = <int32_t>self.b_count[b]
        view = memoryview(cols)
        return sections, ([bytes(view[i * nb * 8:(i + 1) * nb * 8]) for i in range(7)]
                          + [bytes(counts)])

def join_output(list pieces, int64_t total):
    """``b"".join(pieces)`` (``total`` bytes, bytes-like pieces) into a fresh buffer
    with the huge-page hint: the output of a compressed encode is tens of MiB of new
    memory, and 4 KiB page faults cost more than the copy."""
    cdef int64_t pos = 0
    cdef const uint8_t[::1] v
    out = _new_output(total)
    cdef uint8_t* base = <uint8_t*>PyBytes_AS_STRING(out)
    for piece in pieces:
        v = piece
        if pos + v.shape[0] > total:
            raise InternalError("pieces exceed the total")
        if v.shape[0]:
            memcpy(base + pos, &v[0], v.shape[0])
        pos += v.shape[0]
    if pos != total:
        raise InternalError("pieces fall short of the total")
    _keep_output(out)
    return out
