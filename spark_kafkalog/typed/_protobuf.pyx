# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled Protobuf kernel: a binary column of Protobuf messages -> Arrow buffers.

Use it through :class:`spark_kafkalog.typed.protobuf.ProtobufDecoder`, which builds the plan
(``proto_schema.Plan``: flat tables of columns, messages, fields, enums) and the Arrow arrays
from the buffers :meth:`Kernel.run` returns.

Wire format (protobuf encoding guide): a message is a sequence of ``tag value``; ``tag`` is a
varint ``field_number << 3 | wire_type``; wire types 0 varint (at most 10 bytes), 1 eight
bytes, 2 a varint length then that many bytes (strings, bytes, messages, packed repeated
scalars), 5 four bytes, 3/4 start/end of a (deprecated) group. Fields come in any order and
may repeat: a singular scalar keeps its last value, a singular message merges every
occurrence (their bytes concatenated), a repeated field collects them in order.

Each message is read in two passes over its bytes: the first finds, per reader field, its
count and its last occurrence (unknown numbers and wire types that do not fit are skipped);
the second writes the fields in the reader's order (repeated fields rescan from their first
occurrence). Every length is checked against the end of its enclosing value: hostile input
ends in an error code, never a read past the buffer, and every loop consumes bytes.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.stdio cimport snprintf

import numpy as np
import pyarrow as pa

cdef enum:
    K_BOOL = 1
    K_I32 = 2
    K_I64 = 3
    K_F32 = 4
    K_F64 = 5
    K_BIN = 6
    K_STRUCT = 7
    K_LIST = 8

cdef enum:
    T_DOUBLE = 1
    T_FLOAT = 2
    T_INT64 = 3
    T_UINT64 = 4
    T_INT32 = 5
    T_FIXED64 = 6
    T_FIXED32 = 7
    T_BOOL = 8
    T_STRING = 9
    T_GROUP = 10
    T_MESSAGE = 11
    T_BYTES = 12
    T_UINT32 = 13
    T_ENUM = 14
    T_SFIXED32 = 15
    T_SFIXED64 = 16
    T_SINT32 = 17
    T_SINT64 = 18
    T_TIMESTAMP = 100
    T_DURATION = 101
    T_MAP = 102
    T_WRAPPER = 103

cdef enum:
    P_IMPLICIT = 0
    P_EXPLICIT = 1
    P_ALWAYS = 2
    P_REQUIRED = 3

cdef enum:
    E_OK = 0
    E_TRUNCATED = 1
    E_VARINT = 2
    E_TAG = 3
    E_WIRETYPE = 4
    E_GROUP = 5
    E_LENGTH = 6
    E_PACKED = 7
    E_UTF8 = 8
    E_REQUIRED = 9
    E_OVERFLOW = 10
    E_NOMAGIC = 11
    E_MAGIC = 12
    E_SCHEMA_ID = 13
    E_INDEXES = 14
    E_MESSAGE = 15
    E_NOMEM = 16
    E_TOOBIG = 17
    E_SHORT = 18

E_NOMEM_CODE = E_NOMEM
E_TOOBIG_CODE = E_TOOBIG

#: error code -> message; ``{d}`` is the detail the kernel reports
ERRORS = {
    E_TRUNCATED: "truncated message: a value runs past the end of its message ({d} bytes declared)",
    E_VARINT: "varint longer than 10 bytes",
    E_TAG: "invalid tag {d} (field number 0 or over 2**29-1)",
    E_WIRETYPE: "invalid wire type {d}",
    E_GROUP: "unbalanced or too deeply nested group (field {d})",
    E_LENGTH: "length {d} past the end of the enclosing value",
    E_PACKED: "packed fixed-width field of {d} bytes is not a whole number of items",
    E_UTF8: "string of {d} bytes is not valid UTF-8",
    E_REQUIRED: "required field number {d} is missing",
    E_OVERFLOW: "Timestamp/Duration of {d} seconds overflows microseconds",
    E_NOMAGIC: "empty value: no magic byte of the schema-registry framing",
    E_MAGIC: "magic byte {d} is not the schema-registry framing's 0",
    E_SCHEMA_ID: "unknown schema id {d}",
    E_INDEXES: "message indexes (count {d}) do not name the reader's message in the writer schema",
    E_MESSAGE: "bad message indexes (count {d})",
    E_NOMEM: "out of memory decoding Protobuf values",
    E_TOOBIG: "a column would exceed 2 GiB ({d} bytes); decode fewer rows at once",
    E_SHORT: "value of {d} bytes is shorter than the 5-byte schema-registry header",
}

cdef enum:
    NF = 15          # field table width (proto_schema.Plan.F_*)
    NM = 7           # message table width (Plan.M_*)
    MAX_GROUP_DEPTH = 64
    BIN_LIMIT = 0x7fffffff

cdef extern from *:
    """
    #define PB_MAX_SECS 9223372036854LL  /* seconds * 10**6 fits an int64 */
    """
    int64_t MAX_SECS "PB_MAX_SECS"

ctypedef struct col_t:
    int32_t kind, width, nullable
    int64_t n, cap
    uint8_t *valid
    uint8_t *data
    int64_t dlen, dcap
    int32_t *offs
    int64_t kid0, nkids

ctypedef struct fld_t:
    int64_t number, ftype, col, elem, repeated, presence, oneof, sub, enum_id, closed
    int64_t has_default, def_i, def_off, def_len, inner

ctypedef struct msg_t:
    int64_t f0, nf, col, lut0, lutn, oneof0, noneof

ctypedef struct slot_t:
    # per reader field, during a message's first pass
    int64_t cnt
    const uint8_t *first       # tag of the first occurrence
    const uint8_t *last        # value of the last occurrence (after a length)
    const uint8_t *last_end
    int64_t last_wt

ctypedef struct ctx_t:
    col_t *cols
    int64_t ncols
    const fld_t *flds
    const msg_t *msgs
    const int32_t *lut
    const int64_t *kids
    const int64_t *enum_vals     # (number, off, len) rows
    const int64_t *enums         # (v0, nv, off, len) rows
    const uint8_t *consts
    slot_t *slots                # one per field row
    int64_t *oneof_win           # one per oneof of every message
    int err
    const uint8_t *err_at
    int64_t err_detail


cdef inline int fail(ctx_t *x, int code, const uint8_t *at, int64_t detail) noexcept nogil:
    if x.err == E_OK:
        x.err = code
        x.err_at = at
        x.err_detail = detail
    return -1


cdef inline int rd_varint(ctx_t *x, const uint8_t **pp, const uint8_t *end,
                          uint64_t *out) noexcept nogil:
    cdef const uint8_t *p = pp[0]
    cdef uint64_t r = 0
    cdef int shift = 0
    cdef uint8_t b
    if p < end and p[0] < 0x80:          # the common one-byte case
        out[0] = p[0]
        pp[0] = p + 1
        return 0
    while True:
        if p >= end:
            return fail(x, E_TRUNCATED, p, 0)
        b = p[0]
        p += 1
        if shift < 64:
            r |= (<uint64_t>(b & 0x7f)) << shift
        if b < 0x80:
            break
        shift += 7
        if shift >= 70:
            return fail(x, E_VARINT, pp[0], 0)
    out[0] = r
    pp[0] = p
    return 0


# -- columns ---------------------------------------------------------------------------------

cdef int col_reserve(ctx_t *x, col_t *c, int64_t want) noexcept nogil:
    """Room for ``want`` more rows in ``c``."""
    cdef int64_t cap
    cdef void *p
    if c.n + want <= c.cap:
        return 0
    cap = c.cap * 2 if c.cap else 64
    while cap < c.n + want:
        cap *= 2
    p = realloc(c.valid, cap)
    if p == NULL:
        return fail(x, E_NOMEM, NULL, 0)
    c.valid = <uint8_t *>p
    if c.width:
        p = realloc(c.data, cap * c.width)
        if p == NULL:
            return fail(x, E_NOMEM, NULL, 0)
        c.data = <uint8_t *>p
    if c.kind == K_BIN or c.kind == K_LIST:
        p = realloc(c.offs, (cap + 1) * sizeof(int32_t))
        if p == NULL:
            return fail(x, E_NOMEM, NULL, 0)
        c.offs = <int32_t *>p
        if c.cap == 0:
            c.offs[0] = 0
    c.cap = cap
    return 0


cdef int bin_reserve(ctx_t *x, col_t *c, int64_t want) noexcept nogil:
    cdef int64_t cap
    cdef void *p
    if c.dlen + want <= c.dcap:
        return 0
    if c.dlen + want > BIN_LIMIT:
        return fail(x, E_TOOBIG, NULL, c.dlen + want)
    cap = c.dcap * 2 if c.dcap else 256
    while cap < c.dlen + want:
        cap *= 2
    p = realloc(c.data, cap)
    if p == NULL:
        return fail(x, E_NOMEM, NULL, 0)
    c.data = <uint8_t *>p
    c.dcap = cap
    return 0


cdef int col_null(ctx_t *x, int64_t ci) noexcept nogil:
    """Append a null to column ``ci`` (and to every child of a struct: Arrow's struct
    children are as long as the struct). A column that is not nullable (a required field
    under a null struct) gets a zero value instead, as Arrow wants it."""
    cdef col_t *c = &x.cols[ci]
    cdef int64_t k
    if col_reserve(x, c, 1):
        return -1
    c.valid[c.n] = 0 if c.nullable else 1
    if c.width:
        memset(c.data + c.n * c.width, 0, c.width)
    elif c.kind == K_BIN:
        c.offs[c.n + 1] = <int32_t>c.dlen
    elif c.kind == K_LIST:
        c.offs[c.n + 1] = <int32_t>x.cols[x.kids[c.kid0]].n
    elif c.kind == K_STRUCT:
        for k in range(c.nkids):
            if col_null(x, x.kids[c.kid0 + k]):
                return -1
    c.n += 1
    return 0


cdef inline int put_fixed(ctx_t *x, int64_t ci, const void *v) noexcept nogil:
    cdef col_t *c = &x.cols[ci]
    if c.n >= c.cap and col_reserve(x, c, 1):
        return -1
    c.valid[c.n] = 1
    memcpy(c.data + c.n * c.width, v, c.width)
    c.n += 1
    return 0


cdef inline int put_bin(ctx_t *x, int64_t ci, const uint8_t *p, int64_t n) noexcept nogil:
    cdef col_t *c = &x.cols[ci]
    if c.n >= c.cap and col_reserve(x, c, 1):
        return -1
    if bin_reserve(x, c, n):
        return -1
    if n:                     # an empty string may come before any data is allocated
        memcpy(c.data + c.dlen, p, n)
    c.dlen += n
    c.valid[c.n] = 1
    c.offs[c.n + 1] = <int32_t>c.dlen
    c.n += 1
    return 0


cdef int utf8_ok(const uint8_t *s, int64_t n) noexcept nogil:
    """1 when ``s[:n]`` is valid UTF-8 (no overlongs, surrogates or values past U+10FFFF)."""
    cdef int64_t i = 0
    cdef uint8_t b
    cdef uint32_t cp
    cdef int k, j
    while i < n:
        b = s[i]
        if b < 0x80:
            i += 1
            continue
        if b >= 0xC2 and b <= 0xDF:
            k = 1
            cp = b & 0x1F
        elif b >= 0xE0 and b <= 0xEF:
            k = 2
            cp = b & 0x0F
        elif b >= 0xF0 and b <= 0xF4:
            k = 3
            cp = b & 0x07
        else:
            return 0
        if i + k >= n:
            return 0
        for j in range(1, k + 1):
            if (s[i + j] & 0xC0) != 0x80:
                return 0
            cp = (cp << 6) | (s[i + j] & 0x3F)
        if (k == 2 and (cp < 0x800 or (cp >= 0xD800 and cp <= 0xDFFF))) or \
                (k == 3 and (cp < 0x10000 or cp > 0x10FFFF)):
            return 0
        i += k + 1
    return 1


cdef int put_enum(ctx_t *x, const fld_t *f, int64_t ci, int32_t num) noexcept nogil:
    """The enum's symbol for ``num`` (binary search), or Java's name for an unknown
    number of an open enum; returns 1 (nothing written) for an unknown number of a closed
    enum, which protobuf keeps as an unknown field."""
    cdef const int64_t *e = x.enums + 4 * f.enum_id
    cdef int64_t lo = e[0], hi = e[0] + e[1] - 1, mid
    cdef const int64_t *v
    cdef char buf[160]
    cdef int n
    while lo <= hi:
        mid = (lo + hi) >> 1
        v = x.enum_vals + 3 * mid
        if v[0] == num:
            return put_bin(x, ci, x.consts + v[1], v[2])
        if v[0] < num:
            lo = mid + 1
        else:
            hi = mid - 1
    if f.closed:
        return 1
    n = snprintf(buf, sizeof(buf), "UNKNOWN_ENUM_VALUE_%.*s_%d",
                 <int>(e[3] if e[3] < 120 else 120), <const char *>(x.consts + e[2]), num)
    return put_bin(x, ci, <const uint8_t *>buf, n if n < <int>sizeof(buf) else sizeof(buf) - 1)


# -- values ----------------------------------------------------------------------------------

cdef inline int natural_wt(int64_t t) noexcept nogil:
    if t == T_DOUBLE or t == T_FIXED64 or t == T_SFIXED64:
        return 1
    if t == T_FLOAT or t == T_FIXED32 or t == T_SFIXED32:
        return 5
    if t == T_STRING or t == T_BYTES or t == T_MESSAGE or t == T_MAP or \
            t == T_TIMESTAMP or t == T_DURATION or t == T_WRAPPER:
        return 2
    return 0


cdef int skip_group(ctx_t *x, const uint8_t **pp, const uint8_t *end,
                    uint64_t number) noexcept nogil:
    """Skip a group's fields up to its end tag (nesting counted, bounded)."""
    cdef uint64_t stack[MAX_GROUP_DEPTH]
    cdef int depth = 1
    cdef uint64_t tag, v
    cdef int wt
    stack[0] = number
    while depth:
        if rd_varint(x, pp, end, &tag):
            return -1
        wt = tag & 7
        if wt == 0:
            if rd_varint(x, pp, end, &v):
                return -1
        elif wt == 1 or wt == 5:
            if end - pp[0] < (8 if wt == 1 else 4):
                return fail(x, E_TRUNCATED, pp[0], 8 if wt == 1 else 4)
            pp[0] += 8 if wt == 1 else 4
        elif wt == 2:
            if rd_varint(x, pp, end, &v):
                return -1
            if v > <uint64_t>(end - pp[0]):
                return fail(x, E_LENGTH, pp[0], <int64_t>((v << 1) >> 1))
            pp[0] += v
        elif wt == 3:
            if depth >= MAX_GROUP_DEPTH:
                return fail(x, E_GROUP, pp[0], <int64_t>(tag >> 3))
            stack[depth] = tag >> 3
            depth += 1
        elif wt == 4:
            if (tag >> 3) != stack[depth - 1]:
                return fail(x, E_GROUP, pp[0], <int64_t>(tag >> 3))
            depth -= 1
        else:
            return fail(x, E_WIRETYPE, pp[0], wt)
    return 0


cdef int next_field(ctx_t *x, const uint8_t **pp, const uint8_t *end, uint64_t *number,
                    int *wt, const uint8_t **val, const uint8_t **val_end) noexcept nogil:
    """Read one ``tag value`` at ``pp[0]``: its number, wire type and value span (for wire
    type 2 the bytes after the length)."""
    cdef uint64_t tag, v
    cdef const uint8_t *at = pp[0]
    if rd_varint(x, pp, end, &tag):
        return -1
    number[0] = tag >> 3
    wt[0] = tag & 7
    if number[0] == 0 or number[0] > 0x1fffffff:
        return fail(x, E_TAG, at, <int64_t>((tag << 1) >> 1))
    val[0] = pp[0]
    if wt[0] == 0:
        if rd_varint(x, pp, end, &v):
            return -1
    elif wt[0] == 1:
        if end - pp[0] < 8:
            return fail(x, E_TRUNCATED, pp[0], 8)
        pp[0] += 8
    elif wt[0] == 5:
        if end - pp[0] < 4:
            return fail(x, E_TRUNCATED, pp[0], 4)
        pp[0] += 4
    elif wt[0] == 2:
        if rd_varint(x, pp, end, &v):
            return -1
        if v > <uint64_t>(end - pp[0]):
            return fail(x, E_LENGTH, pp[0], <int64_t>((v << 1) >> 1))
        val[0] = pp[0]
        pp[0] += v
    elif wt[0] == 3:
        if skip_group(x, pp, end, number[0]):
            return -1
    else:
        return fail(x, E_WIRETYPE, at, wt[0])
    val_end[0] = pp[0]
    return 0


cdef int put_scalar(ctx_t *x, const fld_t *f, int64_t ci, const uint8_t *p,
                    const uint8_t *end, int null_if_default) noexcept nogil:
    """Decode one scalar at ``p`` (natural wire type of ``f``) into column ``ci``. Returns
    -1 on error, 1 when nothing was written (a closed enum's unknown number)."""
    cdef uint64_t u = 0
    cdef int32_t i32
    cdef int64_t i64
    cdef float f32
    cdef double f64
    cdef uint8_t b
    cdef uint32_t u32
    cdef int64_t t = f.ftype
    if t == T_STRING or t == T_BYTES:
        if null_if_default and end == p:
            return col_null(x, ci)
        if t == T_STRING and not utf8_ok(p, end - p):
            return fail(x, E_UTF8, p, end - p)
        return put_bin(x, ci, p, end - p)
    if t == T_DOUBLE or t == T_FIXED64 or t == T_SFIXED64:
        if end - p < 8:
            return fail(x, E_TRUNCATED, p, 8)
        memcpy(&i64, p, 8)       # little-endian on every platform the kernels build on
        if null_if_default and i64 == 0:
            return col_null(x, ci)
        return put_fixed(x, ci, &i64)
    if t == T_FLOAT or t == T_FIXED32 or t == T_SFIXED32:
        if end - p < 4:
            return fail(x, E_TRUNCATED, p, 4)
        memcpy(&u32, p, 4)
        if null_if_default and u32 == 0:
            return col_null(x, ci)
        return put_fixed(x, ci, &u32)
    if rd_varint(x, &p, end, &u):
        return -1
    if t == T_INT64 or t == T_UINT64:
        i64 = <int64_t>u
    elif t == T_SINT64:
        i64 = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
    elif t == T_SINT32:
        u32 = <uint32_t>u
        i64 = <int32_t>((u32 >> 1) ^ (-(<int32_t>(u32 & 1))))
    elif t == T_BOOL:
        i64 = u != 0
    else:                # int32, uint32, enum: the low 32 bits
        i64 = <int32_t>(<uint32_t>u)
    if null_if_default and i64 == 0:
        return col_null(x, ci)
    if t == T_ENUM:
        return put_enum(x, f, ci, <int32_t>i64)
    if x.cols[ci].width == 8:
        return put_fixed(x, ci, &i64)
    if x.cols[ci].width == 4:
        i32 = <int32_t>i64
        return put_fixed(x, ci, &i32)
    b = <uint8_t>i64
    return put_fixed(x, ci, &b)


cdef int put_default(ctx_t *x, const fld_t *f, int64_t ci) noexcept nogil:
    """The field's default value (proto2 ``[default = ...]`` or the type's zero)."""
    cdef int32_t i32
    cdef uint8_t b
    cdef int64_t t = f.ftype
    if t == T_MESSAGE:
        return dec_msg(x, f.sub, NULL, NULL)
    if t == T_TIMESTAMP or t == T_DURATION:
        return put_fixed(x, ci, &f.def_i)
    if t == T_WRAPPER:
        return put_wrapper(x, f, ci, NULL, NULL)
    if t == T_STRING or t == T_BYTES:
        return put_bin(x, ci, x.consts + f.def_off, f.def_len)
    if t == T_ENUM:
        return 0 if put_enum(x, f, ci, <int32_t>f.def_i) >= 0 else -1
    if x.cols[ci].width == 8:
        return put_fixed(x, ci, &f.def_i)
    if x.cols[ci].width == 4:
        if t == T_FLOAT:
            # the default is kept as a double's bits: narrow it
            return put_float_default(x, ci, f.def_i)
        i32 = <int32_t>f.def_i
        return put_fixed(x, ci, &i32)
    b = <uint8_t>(f.def_i != 0)
    return put_fixed(x, ci, &b)


cdef int put_float_default(ctx_t *x, int64_t ci, int64_t bits) noexcept nogil:
    cdef double d
    cdef float v
    memcpy(&d, &bits, 8)
    v = <float>d
    return put_fixed(x, ci, &v)


cdef int put_time(ctx_t *x, int64_t ci, const uint8_t *p, const uint8_t *end) noexcept nogil:
    """A Timestamp/Duration message (seconds = 1, nanos = 2, last wins) as microseconds,
    ``seconds * 10**6 + nanos / 1000`` (truncated, as Spark's TimeUnit) checked for
    overflow as Spark's multiplyExact."""
    cdef int64_t secs = 0, micros
    cdef int32_t nanos = 0
    cdef uint64_t number
    cdef int wt
    cdef uint64_t u
    cdef const uint8_t *v
    cdef const uint8_t *ve
    while p < end:
        if next_field(x, &p, end, &number, &wt, &v, &ve):
            return -1
        if wt == 0 and (number == 1 or number == 2):
            if rd_varint(x, &v, ve, &u):
                return -1
            if number == 1:
                secs = <int64_t>u
            else:
                nanos = <int32_t>(<uint32_t>u)
    if secs > MAX_SECS or secs < -MAX_SECS:
        return fail(x, E_OVERFLOW, p, secs)
    micros = secs * 1000000 + nanos // 1000      # C division: truncated toward zero
    return put_fixed(x, ci, &micros)


cdef int put_wrapper(ctx_t *x, const fld_t *f, int64_t ci, const uint8_t *p,
                     const uint8_t *end) noexcept nogil:
    """A wrapper message (Int32Value, ...) read as its ``value`` (field 1, last wins; its
    zero when absent), as Spark's ``unwrap.primitive.wrapper.types``."""
    cdef fld_t inner = f[0]
    cdef uint64_t number
    cdef int wt, nat
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef const uint8_t *last = NULL
    cdef const uint8_t *last_end = NULL
    inner.ftype = f.inner
    inner.def_i = 0
    inner.def_len = 0
    nat = natural_wt(inner.ftype)
    while p != NULL and p < end:
        if next_field(x, &p, end, &number, &wt, &v, &ve):
            return -1
        if number == 1 and wt == nat:
            last = v
            last_end = ve
    if last == NULL:
        return put_default(x, &inner, ci)
    return put_scalar(x, &inner, ci, last, last_end, 0)


cdef int put_value(ctx_t *x, const fld_t *f, int64_t ci, const uint8_t *p,
                   const uint8_t *end, int null_if_default) noexcept nogil:
    """One value of ``f`` (any type) spanning ``p``..``end`` into column ``ci``."""
    if f.ftype == T_MESSAGE:
        return dec_msg(x, f.sub, p, end)
    if f.ftype == T_MAP:
        return dec_msg(x, f.sub, p, end)
    if f.ftype == T_TIMESTAMP or f.ftype == T_DURATION:
        return put_time(x, ci, p, end)
    if f.ftype == T_WRAPPER:
        return put_wrapper(x, f, ci, p, end)
    return put_scalar(x, f, ci, p, end, null_if_default)


cdef int merged(ctx_t *x, const fld_t *f, int64_t ci, const uint8_t *q,
                const uint8_t *end) noexcept nogil:
    """A singular message field that occurs more than once: protobuf merges the
    occurrences, which is parsing their bytes one after the other."""
    cdef int64_t total = 0
    cdef const uint8_t *s = q
    cdef uint64_t number
    cdef int wt, rc
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef uint8_t *buf
    while s < end:
        if next_field(x, &s, end, &number, &wt, &v, &ve):
            return -1
        if number == <uint64_t>f.number and wt == 2:
            total += ve - v
    buf = <uint8_t *>malloc(total + 1)
    if buf == NULL:
        return fail(x, E_NOMEM, q, 0)
    total = 0
    s = q
    while s < end:
        next_field(x, &s, end, &number, &wt, &v, &ve)
        if number == <uint64_t>f.number and wt == 2:
            memcpy(buf + total, v, ve - v)
            total += ve - v
    rc = put_value(x, f, ci, buf, buf + total, 0)
    if rc < 0 and x.err_at >= buf and x.err_at <= buf + total:
        x.err_at = q          # a position in the merged copy means nothing to the caller
    free(buf)
    return rc


cdef int put_entry(ctx_t *x, const fld_t *f, const uint8_t *v,
                   const uint8_t *ve) noexcept nogil:
    """One map entry; an entry whose value is a closed enum's unknown number is left out,
    as protobuf leaves it (dec_msg returns 2 after writing the key: rolled back here)."""
    cdef col_t *e = &x.cols[f.elem]
    cdef col_t *k
    cdef int64_t saved[6]
    cdef int64_t j, nk = e.nkids if e.nkids < 2 else 2
    cdef int rc
    saved[0] = e.n
    for j in range(nk):
        k = &x.cols[x.kids[e.kid0 + j]]
        saved[1 + 2 * j] = k.n
        saved[2 + 2 * j] = k.dlen
    rc = dec_msg(x, f.sub, v, ve)
    if rc == 2:
        e.n = saved[0]
        for j in range(nk):
            k = &x.cols[x.kids[e.kid0 + j]]
            k.n = saved[1 + 2 * j]
            k.dlen = saved[2 + 2 * j]
        return 0
    return rc


cdef int put_repeated(ctx_t *x, const fld_t *f, const uint8_t *q,
                      const uint8_t *end) noexcept nogil:
    """Every element of repeated field ``f`` from its first occurrence at ``q`` on, packed
    or not, into its list column."""
    cdef col_t *lst = &x.cols[f.col]
    cdef uint64_t number
    cdef int wt, nat = natural_wt(f.ftype), w
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef const uint8_t *e
    cdef uint64_t u
    if q != NULL:
        while q < end:
            if next_field(x, &q, end, &number, &wt, &v, &ve):
                return -1
            if number != <uint64_t>f.number:
                continue
            if wt == nat:
                if f.ftype == T_MAP:
                    if put_entry(x, f, v, ve) < 0:
                        return -1
                elif put_value(x, f, f.elem, v, ve, 0) < 0:
                    return -1
            elif wt == 2 and nat != 2:        # packed scalars
                w = 8 if nat == 1 else (4 if nat == 5 else 0)
                if w and (ve - v) % w:
                    return fail(x, E_PACKED, v, ve - v)
                while v < ve:
                    if w:
                        e = v + w
                    else:
                        e = v
                        if rd_varint(x, &e, ve, &u):
                            return -1
                    if put_scalar(x, f, f.elem, v, e, 0) < 0:
                        return -1
                    v = e
    if lst.n >= lst.cap and col_reserve(x, lst, 1):
        return -1
    lst.valid[lst.n] = 1
    lst.offs[lst.n + 1] = <int32_t>x.cols[f.elem].n
    lst.n += 1
    if x.cols[f.elem].n > BIN_LIMIT:
        return fail(x, E_TOOBIG, NULL, x.cols[f.elem].n)
    return 0


cdef int dec_msg(ctx_t *x, int64_t mi, const uint8_t *p, const uint8_t *end) noexcept nogil:
    """Decode the message ``p``..``end`` (NULL: an empty message) with plan ``mi`` and
    append one valid struct to its column."""
    cdef const msg_t *m = &x.msgs[mi]
    cdef slot_t *slots = x.slots + m.f0
    cdef int64_t *win = x.oneof_win + m.oneof0
    cdef const fld_t *f
    cdef const uint8_t *q = p
    cdef const uint8_t *tag_at
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef uint64_t number
    cdef int wt, nat, rc
    cdef int64_t k, fi
    cdef col_t *sc = &x.cols[m.col]
    for k in range(m.nf):
        slots[k].cnt = 0
    for k in range(m.noneof):
        win[k] = -1
    # pass 1: where is each reader field
    if p != NULL:
        while q < end:
            tag_at = q
            if next_field(x, &q, end, &number, &wt, &v, &ve):
                return -1
            if number < <uint64_t>m.lutn:
                fi = x.lut[m.lut0 + number]
            else:
                fi = -1
                for k in range(m.nf):
                    if x.flds[m.f0 + k].number == <int64_t>number:
                        fi = k
                        break
            if fi < 0:
                continue                 # unknown to the reader: skipped
            f = &x.flds[m.f0 + fi]
            nat = natural_wt(f.ftype)
            if wt != nat and not (wt == 2 and f.repeated and nat != 2):
                continue                 # a wire type that does not fit: an unknown field
            if f.oneof >= 0 and win[f.oneof] != fi:
                # another member was set since: protobuf cleared this one, so a message
                # member merges only its occurrences from here on
                slots[fi].cnt = 0
            if slots[fi].cnt == 0:
                slots[fi].first = tag_at
            slots[fi].cnt += 1
            slots[fi].last = v
            slots[fi].last_end = ve
            slots[fi].last_wt = wt
            if f.oneof >= 0:
                win[f.oneof] = fi
    # pass 2: the fields in the reader's order
    if sc.n >= sc.cap and col_reserve(x, sc, 1):
        return -1
    sc.valid[sc.n] = 1
    sc.n += 1
    for k in range(m.nf):
        f = &x.flds[m.f0 + k]
        if f.repeated:
            if put_repeated(x, f, slots[k].first if slots[k].cnt else NULL, end):
                return -1
            continue
        if f.oneof >= 0 and win[f.oneof] != k:
            rc = col_null(x, f.col)
        elif slots[k].cnt == 0:
            if f.presence == P_REQUIRED:
                return fail(x, E_REQUIRED, end, f.number)
            if f.presence == P_ALWAYS or f.has_default:
                rc = put_default(x, f, f.col)
            else:
                rc = col_null(x, f.col)
        elif slots[k].cnt > 1 and (f.ftype == T_MESSAGE or f.ftype == T_TIMESTAMP or
                                   f.ftype == T_DURATION or f.ftype == T_WRAPPER):
            rc = merged(x, f, f.col, slots[k].first, end)
        else:
            rc = put_value(x, f, f.col, slots[k].last, slots[k].last_end,
                           f.presence == P_IMPLICIT)
            if rc == 1:                  # closed enum, unknown number: as if absent
                if f.presence == P_REQUIRED:
                    return fail(x, E_REQUIRED, end, f.number)
                if f.presence == P_ALWAYS:
                    # only a map entry's value gets here (a closed enum is never a proto3
                    # implicit field): protobuf keeps the whole entry as an unknown field
                    return 2
                rc = put_default(x, f, f.col) if f.has_default else col_null(x, f.col)
        if rc < 0:
            return -1
    return 0


# -- driver ----------------------------------------------------------------------------------

cdef class _Mem:
    """malloc'd memory handed to pyarrow without a copy (freed with its last Buffer)."""
    cdef void *ptr
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        free(self.ptr)

    def __getbuffer__(self, Py_buffer *view, int flags):
        self.shape[0] = self.size
        view.buf = self.ptr
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef object take(void **ptr, int64_t size):
    """A pyarrow Buffer owning ``ptr[0]`` (which is cleared)."""
    cdef _Mem m = _Mem.__new__(_Mem)
    m.ptr = ptr[0]
    m.size = size
    ptr[0] = NULL
    return pa.py_buffer(m)


cdef class Kernel:
    """The plan's tables in C form; :meth:`run` decodes a binary array with them. A run
    keeps its state on its own: one Kernel may run in several threads at once."""
    cdef object keep                 # the numpy tables the pointers below point into
    cdef const int64_t *cols_t
    cdef int64_t ncols, nfields, noneof
    cdef ctx_t proto

    def __init__(self, dict t):
        cdef int64_t[:, ::1] cols = t["cols"]
        cdef int64_t[::1] kids = t["kids"]
        cdef int64_t[:, ::1] flds = t["fields"]
        cdef int64_t[:, ::1] msgs = t["msgs"]
        cdef int32_t[::1] lut = t["lut"]
        cdef int64_t[:, ::1] ev = t["enum_vals"]
        cdef int64_t[:, ::1] en = t["enums"]
        cdef const uint8_t[::1] consts = t["consts"]
        oneof0 = np.zeros(len(t["msgs"]), dtype=np.int64)
        oneof0[1:] = np.cumsum(t["msgs"][:-1, 6])
        t["msgs"][:, 5] = oneof0
        self.keep = t
        self.noneof = int(t["msgs"][:, 6].sum())
        self.nfields = flds.shape[0]
        self.cols_t = &cols[0, 0]
        self.ncols = cols.shape[0]
        memset(&self.proto, 0, sizeof(ctx_t))
        self.proto.flds = <const fld_t *>&flds[0, 0]
        self.proto.msgs = <const msg_t *>&msgs[0, 0]
        self.proto.lut = &lut[0]
        self.proto.kids = &kids[0]
        self.proto.enum_vals = &ev[0, 0]
        self.proto.enums = &en[0, 0]
        self.proto.consts = &consts[0]

    def run(self, values, bint framed, const int64_t[::1] ids, const int64_t[::1] path_off,
            const int64_t[::1] paths, int mode, int64_t top):
        """Decode ``values`` (binary / large_binary array). Schema id ``ids[k]``'s accepted
        message indexes are ``paths[path_off[k]:path_off[k+1]]``. ``mode`` 0 fail (stop at
        the first bad row), 1 null, 2 skip. Returns (columns, bad, kept): per column (n,
        null_count, validity bitmap, data, offsets) as Buffers; bad = [(row, code, detail,
        schema id, byte position in the value)]; kept a uint8 array (mode 2)."""
        cdef ctx_t x = self.proto
        cdef int64_t n = len(values), i, k, ci
        cdef int64_t nc = self.ncols
        cdef col_t *c
        cdef col_t *cols = <col_t *>malloc(nc * sizeof(col_t) + 1)
        cdef int64_t *saved = <int64_t *>malloc(2 * nc * sizeof(int64_t) + 8)
        x.slots = <slot_t *>malloc(self.nfields * sizeof(slot_t) + 1)
        x.oneof_win = <int64_t *>malloc(self.noneof * sizeof(int64_t) + 8)
        if cols == NULL or saved == NULL or x.slots == NULL or x.oneof_win == NULL:
            free(cols)
            free(saved)
            free(x.slots)
            free(x.oneof_win)
            raise MemoryError()
        memset(cols, 0, nc * sizeof(col_t))
        for ci in range(nc):
            cols[ci].kind = <int32_t>self.cols_t[5 * ci]
            cols[ci].width = <int32_t>self.cols_t[5 * ci + 1]
            cols[ci].kid0 = self.cols_t[5 * ci + 2]
            cols[ci].nkids = self.cols_t[5 * ci + 3]
            cols[ci].nullable = <int32_t>self.cols_t[5 * ci + 4]
        x.cols = cols
        x.ncols = nc
        cdef int64_t topcol = x.msgs[top].col
        bufs = values.buffers()
        cdef bint large = pa.types.is_large_binary(values.type)
        cdef int64_t off0 = values.offset
        cdef const uint8_t[::1] vmask
        cdef const uint8_t *mask = NULL
        if bufs[0] is not None and values.null_count:
            vmask = memoryview(bufs[0]).cast("B")
            mask = &vmask[0]
        cdef const uint8_t[::1] voffs
        cdef const int32_t *o32 = NULL
        cdef const int64_t *o64 = NULL
        if n:
            voffs = memoryview(bufs[1]).cast("B")
            o32 = <const int32_t *>&voffs[0]
            o64 = <const int64_t *>&voffs[0]
        cdef const uint8_t[::1] vdata
        cdef const uint8_t *data = <const uint8_t *>""
        if bufs[2] is not None and bufs[2].size:
            vdata = memoryview(bufs[2]).cast("B")
            data = &vdata[0]
        kept_arr = np.ones(n if mode == 2 else 0, dtype=np.uint8)
        cdef uint8_t[::1] kept = kept_arr
        bad = []
        cdef const uint8_t *p
        cdef const uint8_t *end
        cdef const uint8_t *start
        cdef int64_t a, b, sid, nids = ids.shape[0]
        cdef int rc
        try:
            with nogil:
                for i in range(n):
                    if mask != NULL and not (mask[(off0 + i) >> 3] >> ((off0 + i) & 7)) & 1:
                        if col_null(&x, topcol):
                            break
                        continue
                    if large:
                        a = o64[off0 + i]
                        b = o64[off0 + i + 1]
                    else:
                        a = o32[off0 + i]
                        b = o32[off0 + i + 1]
                    start = data + a
                    p = start
                    end = data + b
                    sid = -1
                    if mode:           # a bad record is rolled back (fail mode stops)
                        for ci in range(nc):
                            saved[2 * ci] = cols[ci].n
                            saved[2 * ci + 1] = cols[ci].dlen
                    x.err = E_OK
                    x.err_at = NULL
                    rc = 0
                    if framed:
                        if end == p:
                            rc = fail(&x, E_NOMAGIC, p, 0)
                        elif p[0] != 0:
                            rc = fail(&x, E_MAGIC, p, p[0])
                        elif end - p < 5:
                            rc = fail(&x, E_SHORT, p, end - p)
                        else:
                            sid = (<int64_t>p[1] << 24) | (p[2] << 16) | (p[3] << 8) | p[4]
                            p += 5
                            k = 0
                            while k < nids and ids[k] != sid:
                                k += 1
                            if k == nids:
                                rc = fail(&x, E_SCHEMA_ID, start + 1, sid)
                            else:
                                rc = check_indexes(&x, &p, end, &paths[0] + path_off[k],
                                                   path_off[k + 1] - path_off[k])
                    if rc == 0:
                        rc = dec_msg(&x, top, p, end)
                    if rc == 0:
                        continue
                    with gil:
                        bad.append((i, x.err, x.err_detail, None if sid < 0 else sid,
                                    (x.err_at - start) if x.err_at != NULL else None))
                    if x.err == E_NOMEM or x.err == E_TOOBIG or mode == 0:
                        break
                    for ci in range(nc):        # roll the partial record back
                        cols[ci].n = saved[2 * ci]
                        cols[ci].dlen = saved[2 * ci + 1]
                    if mode == 1:
                        if col_null(&x, topcol):
                            with gil:
                                bad.append((i, x.err, x.err_detail, None, None))
                            break
                    else:
                        kept[i] = 0
            out = []
            for ci in range(nc):
                c = &cols[ci]
                out.append(_column(c))
            return out, bad, kept_arr
        finally:
            for ci in range(nc):
                free(cols[ci].valid)
                free(cols[ci].data)
                free(cols[ci].offs)
            free(cols)
            free(saved)
            free(x.slots)
            free(x.oneof_win)


cdef object _column(col_t *c):
    """(n, null_count, validity bitmap, data, offsets) of a filled column; the data and
    offsets are handed over without a copy (the column's pointers are cleared)."""
    cdef int64_t n = c.n
    if n == 0:
        empty_offs = pa.py_buffer(np.zeros(1, dtype=np.int32))
        data = pa.py_buffer(b"") if c.kind == K_BIN else (
            pa.py_buffer(bytes(16)) if c.width else None)
        return (0, 0, None, data,
                empty_offs if c.kind == K_BIN or c.kind == K_LIST else None)
    raw = np.frombuffer(take(<void **>&c.valid, n), dtype=np.uint8)
    nvalid = int(np.count_nonzero(raw))
    valid = pa.py_buffer(np.packbits(raw, bitorder="little")) if nvalid < n else None
    data = None
    if c.kind == K_BOOL:
        data = pa.py_buffer(np.packbits(np.frombuffer(take(<void **>&c.data, n),
                                                      dtype=np.uint8), bitorder="little"))
    elif c.width:
        data = take(<void **>&c.data, n * c.width)
    elif c.kind == K_BIN:
        data = take(<void **>&c.data, c.dlen) if c.data != NULL else pa.py_buffer(b"")
    offs = None
    if c.kind == K_BIN or c.kind == K_LIST:
        offs = take(<void **>&c.offs, (n + 1) * 4)
    return (n, n - nvalid, valid, data, offs)


cdef int check_indexes(ctx_t *x, const uint8_t **pp, const uint8_t *end,
                       const int64_t *want, int64_t nwant) noexcept nogil:
    """Confluent's message indexes after the header: a zigzag varint count, then that many
    zigzag varint indexes; a count of 0 means ``[0]``, the file's first message. They must
    name ``want`` (the writer's path of the reader's message)."""
    cdef uint64_t u
    cdef int64_t cnt, j, idx
    cdef const uint8_t *at = pp[0]
    if rd_varint(x, pp, end, &u):
        return -1
    cnt = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
    if cnt < 0 or cnt > end - pp[0]:
        return fail(x, E_MESSAGE, at, cnt)
    if cnt == 0:
        return 0 if (nwant == 1 and want[0] == 0) else fail(x, E_INDEXES, at, 0)
    if cnt != nwant:
        return fail(x, E_INDEXES, at, cnt)
    for j in range(cnt):
        if rd_varint(x, pp, end, &u):
            return -1
        idx = <int64_t>(u >> 1) ^ -(<int64_t>(u & 1))
        if idx != want[j]:
            return fail(x, E_INDEXES, at, cnt)
    return 0
