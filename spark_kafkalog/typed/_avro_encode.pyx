# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled Avro encoder: Arrow arrays -> one Avro binary value per row.

Use it through :class:`spark_kafkalog.typed.avro_write.AvroEncoder`, which matches the
writer schema to the Arrow type and normalises the leaves with Arrow compute (every
integer, date, time and timestamp to int64 in the schema's unit, enum symbols to their
index, decimals to the schema's scale) so this kernel only reads a handful of buffer
layouts. One :class:`Node` per schema position holds its array's buffers as pointers; the
row loop walks them in C (no Python object per record or field). A value the schema
cannot take — a null in a non-null position, a decimal outside its precision, a symbol
outside the enum, a fixed of the wrong size, an int outside 32 bits — raises
BadRowError naming the row and the field.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import BadRowError

cdef extern from *:
    """
    typedef __int128 ae_i128;
    static inline ae_i128 ae_load128(const unsigned char *p) {
        ae_i128 v; memcpy(&v, p, 16); return v;   /* Arrow decimal128: little-endian */
    }
    static inline int ae_fits(ae_i128 v, int precision) {
        ae_i128 lim = 1; int k;
        for (k = 0; k < precision; k++) lim *= 10;
        return v < lim && v > -lim;
    }
    static inline int ae_min_bytes(ae_i128 v) {
        int n = 1;
        while (n < 16) {
            ae_i128 lo = -((ae_i128)1 << (8 * n - 1));
            if (v >= lo && v < -lo) break;
            n++;
        }
        return n;
    }
    static inline void ae_put_be(unsigned char *out, ae_i128 v, int n) {
        int k; for (k = n - 1; k >= 0; k--) { out[k] = (unsigned char)(v & 0xff); v >>= 8; }
    }
    """
    ctypedef long long ae_i128       # only passed between the helpers above
    ae_i128 ae_load128(const uint8_t *p) nogil
    int ae_fits(ae_i128 v, int precision) nogil
    int ae_min_bytes(ae_i128 v) nogil
    void ae_put_be(uint8_t *out, ae_i128 v, int n) nogil

# node kinds (avro_write.py names them through KINDS)
cdef enum:
    K_NULL, K_BOOL, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_BYTES, K_FIXED, K_FIXED_BIN, \
    K_DEC_BYTES, K_DEC_FIXED, K_ENUM, K_RECORD, K_ARRAY, K_MAP, K_MEMBERS

KINDS = {"NULL": K_NULL, "BOOL": K_BOOL, "INT": K_INT, "LONG": K_LONG, "FLOAT": K_FLOAT,
         "DOUBLE": K_DOUBLE, "BYTES": K_BYTES, "FIXED": K_FIXED, "FIXED_BIN": K_FIXED_BIN,
         "DEC_BYTES": K_DEC_BYTES, "DEC_FIXED": K_DEC_FIXED, "ENUM": K_ENUM,
         "RECORD": K_RECORD, "ARRAY": K_ARRAY, "MAP": K_MAP, "MEMBERS": K_MEMBERS}


cdef struct Out:
    uint8_t *buf
    int64_t len
    int64_t cap


cdef int grow(Out *o, int64_t more) except -1:
    cdef int64_t want = o.len + more
    cdef int64_t cap
    cdef uint8_t *nb
    if want <= o.cap:
        return 0
    cap = o.cap * 2 if o.cap else 4096
    while cap < want:
        cap *= 2
    nb = <uint8_t *>realloc(o.buf, cap)
    if nb == NULL:
        raise MemoryError()
    o.buf = nb
    o.cap = cap
    return 0


cdef inline int put_long(Out *o, int64_t v) except -1:
    cdef uint64_t z = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
    if o.cap - o.len < 10:
        grow(o, 10)
    while z >= 0x80:
        o.buf[o.len] = <uint8_t>((z & 0x7f) | 0x80)
        o.len += 1
        z >>= 7
    o.buf[o.len] = <uint8_t>z
    o.len += 1
    return 0


cdef inline int put_raw(Out *o, const uint8_t *p, int64_t n) except -1:
    if o.cap - o.len < n:
        grow(o, n)
    if n:
        memcpy(o.buf + o.len, p, n)
    o.len += n
    return 0


cdef inline bint bit(const uint8_t *bits, int64_t i) nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef const uint8_t *_addr(buf):
    # two returns, not a conditional expression: Cython types that expression's temporary
    # by NULL's branch (uint8_t *), and gcc warns that the const is dropped
    if buf is None:
        return NULL
    return <const uint8_t *><size_t>buf.address


cdef class Node:
    """One schema position over one Arrow array (offset kept: sliced arrays work)."""
    cdef int kind, null_branch, value_branch, width, precision
    cdef int64_t off
    cdef const uint8_t *valid
    cdef const uint8_t *data
    cdef const int32_t *offs
    cdef tuple kids
    cdef object keep
    cdef public str path

    def __init__(self, str kind, array, str path, int null_branch=-1, int value_branch=-1,
                 kids=(), int width=0, int precision=0):
        self.kind = KINDS[kind]
        self.keep = array
        self.path = path
        self.null_branch = null_branch
        self.value_branch = value_branch
        self.kids = tuple(kids)
        self.width = width
        self.precision = precision
        self.off = array.offset
        bufs = array.buffers()
        self.valid = _addr(bufs[0]) if array.null_count else NULL
        self.data = NULL
        self.offs = NULL
        k = self.kind
        if k in (K_BOOL, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_FIXED, K_DEC_BYTES,
                 K_DEC_FIXED, K_ENUM):
            self.data = _addr(bufs[1])
        elif k in (K_BYTES, K_FIXED_BIN):
            self.offs = <const int32_t *>_addr(bufs[1])
            self.data = _addr(bufs[2])
        elif k in (K_ARRAY, K_MAP):
            self.offs = <const int32_t *>_addr(bufs[1])


cdef int fail(Node n, int64_t row, str why) except -1:
    raise BadRowError(f"row {row}: field {n.path}: {why}")


cdef int enc(Node n, int64_t i, Out *o, int64_t row) except -1:
    cdef int64_t j = n.off + i
    cdef int64_t a, b, k, v
    cdef ae_i128 d
    cdef int nb
    cdef Node kid
    if n.valid != NULL and not bit(n.valid, j):
        if n.null_branch < 0:
            fail(n, row, "null, but the schema's type there is not nullable")
        put_long(o, n.null_branch)
        return 0
    if n.value_branch >= 0:
        put_long(o, n.value_branch)
    if n.kind == K_LONG:
        put_long(o, (<const int64_t *>n.data)[j])
    elif n.kind == K_INT:
        v = (<const int64_t *>n.data)[j]
        if v < -2147483648 or v > 2147483647:
            fail(n, row, f"{v} is outside Avro int (32 bits)")
        put_long(o, v)
    elif n.kind == K_ENUM:
        v = (<const int64_t *>n.data)[j]
        if v < 0:
            fail(n, row, "a symbol that is not in the enum's symbols")
        put_long(o, v)
    elif n.kind == K_BOOL:
        if o.cap - o.len < 1:
            grow(o, 1)
        o.buf[o.len] = bit(n.data, j)
        o.len += 1
    elif n.kind == K_FLOAT:
        put_raw(o, n.data + 4 * j, 4)
    elif n.kind == K_DOUBLE:
        put_raw(o, n.data + 8 * j, 8)
    elif n.kind == K_BYTES:
        a = n.offs[j]
        b = n.offs[j + 1]
        put_long(o, b - a)
        put_raw(o, n.data + a, b - a)
    elif n.kind == K_FIXED:
        put_raw(o, n.data + n.width * j, n.width)
    elif n.kind == K_FIXED_BIN:
        a = n.offs[j]
        b = n.offs[j + 1]
        if b - a != n.width:
            fail(n, row, f"{b - a} bytes, but the fixed type holds exactly {n.width}")
        put_raw(o, n.data + a, b - a)
    elif n.kind == K_DEC_BYTES or n.kind == K_DEC_FIXED:
        d = ae_load128(n.data + 16 * j)
        if not ae_fits(d, n.precision):
            fail(n, row, f"decimal value has more than the schema's precision "
                         f"{n.precision} digits")
        nb = ae_min_bytes(d)
        if n.kind == K_DEC_BYTES:
            put_long(o, nb)
        else:
            if nb > n.width:
                fail(n, row, f"decimal value needs {nb} bytes; the fixed holds {n.width}")
            nb = n.width              # sign-extended to the fixed size
        grow(o, nb)
        ae_put_be(o.buf + o.len, d, nb)
        o.len += nb
    elif n.kind == K_RECORD:
        for kid in n.kids:
            enc(kid, i, o, row)
    elif n.kind == K_MEMBERS:
        # Spark's struct of a union (member0, member1, ...): the first member set is the
        # branch (each member node writes its own branch index)
        for kid in n.kids:
            if kid.valid == NULL or bit(kid.valid, kid.off + i):
                enc(kid, i, o, row)
                return 0
        if n.null_branch < 0:
            fail(n, row, "no member of the union is set, and the union has no null")
        put_long(o, n.null_branch)
    elif n.kind == K_ARRAY or n.kind == K_MAP:
        a = n.offs[j]
        b = n.offs[j + 1]
        if b > a:
            put_long(o, b - a)      # one block of every item, then the end marker
            if n.kind == K_ARRAY:
                kid = <Node>n.kids[0]
                for k in range(a, b):
                    enc(kid, k, o, row)
            else:
                for k in range(a, b):
                    enc(<Node>n.kids[0], k, o, row)
                    enc(<Node>n.kids[1], k, o, row)
        put_long(o, 0)
    return 0


def encode(Node top, int64_t nrows, bytes prefix, int64_t first_row=0):
    """``nrows`` rows of ``top`` as Avro, each after ``prefix`` (the framing) -> a
    ``pa.binary()`` array; a null top-level row stays null (a tombstone). Errors number
    the rows from ``first_row``."""
    cdef Out o
    cdef int64_t i, nnull = 0
    cdef const uint8_t *pre = prefix
    cdef int64_t plen = len(prefix)
    offsets = np.empty(nrows + 1, dtype=np.int32)
    cdef int32_t[::1] offv = offsets
    validity = np.ones(nrows, dtype=bool)
    o.buf = NULL
    o.len = 0
    o.cap = 0
    try:
        grow(&o, 64 * nrows + 64)
        offv[0] = 0
        for i in range(nrows):
            if top.valid != NULL and not bit(top.valid, top.off + i):
                validity[i] = False
                nnull += 1
            else:
                put_raw(&o, pre, plen)
                enc(top, i, &o, first_row + i)
            if o.len > 2147483647:
                raise BadRowError(f"row {first_row + i}: the encoded values pass 2 GiB in one batch")
            offv[i + 1] = <int32_t>o.len
        data = pa.py_buffer((<char *>o.buf)[:o.len]) if o.len else pa.py_buffer(b"")
    finally:
        free(o.buf)
    valid_buf = pa.py_buffer(np.packbits(validity, bitorder="little")) if nnull else None
    return pa.Array.from_buffers(pa.binary(), nrows,
                                 [valid_buf, pa.py_buffer(offsets), data], nnull)
