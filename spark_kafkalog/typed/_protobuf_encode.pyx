# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled Protobuf encoder: Arrow arrays -> one Protobuf message per row.

Use it through :class:`spark_kafkalog.typed.proto_write.ProtobufEncoder`. A
:class:`Program` is built once per (schema, Arrow type): one node per field position (its
tag bytes, presence mode, value kind, range, oneof slot, children). Each batch binds the
nodes to its arrays' buffers (the leaves normalised by Arrow compute: integers to int64,
floats to float64, enum symbols to numbers, times to int64 counts), then :meth:`encode`
writes every framed message of the batch into one buffer with the GIL released: no Python
object per record or field. A value the schema cannot take stops the loop with an error
code, the node and the row; the caller turns it into BadRowError.
"""
from libc.stdint cimport INT64_MIN, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, realloc
from libc.string cimport memcpy, memmove, memset

import numpy as np
import pyarrow as pa

# value kinds (proto_write.py names them through KINDS)
cdef enum:
    V_INT, V_ENUMSTR, V_BOOL, V_FIX32, V_FIX64, V_FLOAT, V_DOUBLE, V_BYTES, V_MSG, V_TIME

# field modes: how a field of a message is written (M_VALUE: a node that is only a value,
# an element of a repeated field or a map's key or value)
cdef enum:
    M_VALUE, M_IMPLICIT, M_EXPLICIT, M_REQUIRED, M_REPEATED, M_PACKED, M_MAP

# what put_value writes before a value: nothing, the node's tag, or the tag unless the
# value is its type's default (then nothing at all)
cdef enum:
    H_BARE, H_TAG, H_UNLESS_ZERO

# integer conversions before writing
cdef enum:
    C_NONE, C_ZIGZAG, C_MASK32

# error codes (proto_write.py words them)
cdef enum:
    E_OK, E_NOMEM, E_REQUIRED, E_ONEOF, E_RANGE, E_U64, E_NULL_ELEM, E_NULL_MAPVAL, \
    E_ENUM_SYMBOL, E_ENUM_RANGE, E_TOO_BIG

KINDS = {"INT": V_INT, "ENUMSTR": V_ENUMSTR, "BOOL": V_BOOL, "FIX32": V_FIX32,
         "FIX64": V_FIX64, "FLOAT": V_FLOAT, "DOUBLE": V_DOUBLE, "BYTES": V_BYTES,
         "MSG": V_MSG, "TIME": V_TIME}
MODES = {"VALUE": M_VALUE, "IMPLICIT": M_IMPLICIT, "EXPLICIT": M_EXPLICIT,
         "REQUIRED": M_REQUIRED, "REPEATED": M_REPEATED, "PACKED": M_PACKED, "MAP": M_MAP}
CONVS = {"NONE": C_NONE, "ZIGZAG": C_ZIGZAG, "MASK32": C_MASK32}
ERRORS = {"NOMEM": E_NOMEM, "REQUIRED": E_REQUIRED, "ONEOF": E_ONEOF, "RANGE": E_RANGE,
          "U64": E_U64, "NULL_ELEM": E_NULL_ELEM, "NULL_MAPVAL": E_NULL_MAPVAL,
          "ENUM_SYMBOL": E_ENUM_SYMBOL, "ENUM_RANGE": E_ENUM_RANGE, "TOO_BIG": E_TOO_BIG}


cdef struct PNode:
    int kind, mode, conv, ranged, from_u64, duration, oneof, taglen
    int64_t lo, hi, per, nano
    uint8_t tag[10]
    int32_t kid0, nkids          # children: prog.kids[kid0:kid0 + nkids]
    # bound per batch (a node's array: validity bit i at voff + i, value at doff + i)
    const uint8_t *valid
    int64_t voff, doff
    const uint8_t *data
    const int32_t *offs          # a bytes value's offsets, or a list's / map's


cdef struct St:
    uint8_t *buf
    int64_t len, cap
    PNode *nodes
    int32_t *kids
    int64_t *seen                # per oneof slot: the message visit that set a member
    int64_t stamp
    int err, err_node
    int64_t err_row, err_val


cdef int grow(St *s, int64_t more) noexcept nogil:
    cdef int64_t want = s.len + more
    cdef int64_t cap
    cdef uint8_t *nb
    if want <= s.cap:
        return 0
    if want > 2147483647:              # past what one binary array's int32 offsets hold
        s.err = E_TOO_BIG
        return -1
    cap = s.cap * 2 if s.cap else 4096
    while cap < want:
        cap *= 2
    nb = <uint8_t *>realloc(s.buf, cap)
    if nb == NULL:
        s.err = E_NOMEM
        return -1
    s.buf = nb
    s.cap = cap
    return 0


cdef inline int put_varint(St *s, uint64_t z) noexcept nogil:
    if s.cap - s.len < 10 and grow(s, 10) < 0:
        return -1
    while z >= 0x80:
        s.buf[s.len] = <uint8_t>((z & 0x7f) | 0x80)
        s.len += 1
        z >>= 7
    s.buf[s.len] = <uint8_t>z
    s.len += 1
    return 0


cdef inline int put_raw(St *s, const uint8_t *p, int64_t n) noexcept nogil:
    if s.cap - s.len < n and grow(s, n) < 0:
        return -1
    if n:
        memcpy(s.buf + s.len, p, n)
    s.len += n
    return 0


cdef inline int put_tag(St *s, PNode *n) noexcept nogil:
    """A field's tag (precomputed bytes; most take one)."""
    cdef int k
    if s.cap - s.len < 10 and grow(s, 10) < 0:
        return -1
    s.buf[s.len] = n.tag[0]
    for k in range(1, n.taglen):
        s.buf[s.len + k] = n.tag[k]
    s.len += n.taglen
    return 0


cdef inline int varint_len(uint64_t z) noexcept nogil:
    cdef int n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


cdef inline int64_t begin_len(St *s) noexcept nogil:
    """Reserve one byte for a length; the body starts after it (returned)."""
    if s.cap - s.len < 1 and grow(s, 1) < 0:
        return -1
    s.len += 1
    return s.len


cdef inline int end_len(St *s, int64_t start) noexcept nogil:
    """Write the length of the body from ``start`` before it, moving the body when the
    length takes more than the byte reserved."""
    cdef int64_t n = s.len - start
    cdef int k = varint_len(<uint64_t>n)
    cdef int64_t p
    cdef uint64_t z = <uint64_t>n
    if k > 1:
        if grow(s, k - 1) < 0:
            return -1
        memmove(s.buf + start + k - 1, s.buf + start, n)
        s.len += k - 1
    p = start - 1
    while z >= 0x80:
        s.buf[p] = <uint8_t>((z & 0x7f) | 0x80)
        p += 1
        z >>= 7
    s.buf[p] = <uint8_t>z
    return 0


cdef inline bint bit(const uint8_t *bits, int64_t i) noexcept nogil:
    return (bits[i >> 3] >> (i & 7)) & 1


cdef inline bint is_null(PNode *n, int64_t i) noexcept nogil:
    return n.valid != NULL and not bit(n.valid, n.voff + i)


cdef inline int fail(St *s, int code, PNode *n, int64_t row, int64_t val) noexcept nogil:
    s.err = code
    s.err_node = <int>(n - s.nodes)
    s.err_row = row
    s.err_val = val
    return -1


cdef inline int lead(St *s, PNode *n, int how, bint zero) noexcept nogil:
    """Before a value: 1 to leave it out (proto3 implicit presence and a value that
    encodes as the default's bytes: zero bits, an empty string; so -0.0 is written, as
    protobuf writes it), else its tag when ``how`` asks for one."""
    if how == H_UNLESS_ZERO and zero:
        return 1
    if how != H_BARE:
        return put_tag(s, n)
    return 0


cdef int put_value(St *s, PNode *n, int64_t i, int64_t row, int how) noexcept nogil:
    """The value at ``i`` of ``n``'s array (a length first for wire 2), after what
    ``how`` asks (see lead)."""
    cdef int64_t j = n.doff + i
    cdef int64_t v, a, b, secs, nanos, start
    cdef uint64_t u
    cdef uint32_t u32
    cdef float f
    cdef uint32_t fb
    cdef int k, r
    if n.kind == V_INT or n.kind == V_FIX32 or n.kind == V_FIX64:
        v = (<const int64_t *>n.data)[j]
        if n.from_u64 and v < 0:
            return fail(s, E_U64, n, row, v)
        if n.ranged and (v < n.lo or v > n.hi):
            return fail(s, E_RANGE, n, row, v)
        r = lead(s, n, how, v == 0)
        if r:
            return r if r < 0 else 0
        if n.conv == C_ZIGZAG:
            u = (<uint64_t>v << 1) ^ <uint64_t>(v >> 63)
        elif n.conv == C_MASK32:
            u = <uint64_t>v & 0xFFFFFFFFu
        else:
            u = <uint64_t>v
        if n.kind == V_INT:
            return put_varint(s, u)
        if s.cap - s.len < 8 and grow(s, 8) < 0:
            return -1
        if n.kind == V_FIX32:
            u32 = <uint32_t>u
            for k in range(4):
                s.buf[s.len + k] = <uint8_t>(u32 >> (8 * k))
            s.len += 4
        else:
            for k in range(8):
                s.buf[s.len + k] = <uint8_t>(u >> (8 * k))
            s.len += 8
        return 0
    if n.kind == V_ENUMSTR:
        v = (<const int64_t *>n.data)[j]
        if v == INT64_MIN:
            return fail(s, E_ENUM_SYMBOL, n, row, i)
        if v < -2147483648 or v > 2147483647:
            return fail(s, E_ENUM_RANGE, n, row, v)
        r = lead(s, n, how, v == 0)
        if r:
            return r if r < 0 else 0
        return put_varint(s, <uint64_t>v)
    if n.kind == V_BOOL:
        r = lead(s, n, how, not bit(n.data, j))
        if r:
            return r if r < 0 else 0
        return put_varint(s, 1 if bit(n.data, j) else 0)
    if n.kind == V_FLOAT:
        f = <float>(<const double *>n.data)[j]
        memcpy(&fb, &f, 4)
        r = lead(s, n, how, fb == 0)
        if r:
            return r if r < 0 else 0
        return put_raw(s, <const uint8_t *>&f, 4)          # x86-64: little-endian
    if n.kind == V_DOUBLE:
        r = lead(s, n, how, (<const uint64_t *>n.data)[j] == 0)
        if r:
            return r if r < 0 else 0
        return put_raw(s, n.data + 8 * j, 8)
    if n.kind == V_BYTES:
        a = n.offs[j]
        b = n.offs[j + 1]
        r = lead(s, n, how, b == a)
        if r:
            return r if r < 0 else 0
        if put_varint(s, <uint64_t>(b - a)) < 0:
            return -1
        return put_raw(s, n.data + a, b - a)
    if n.kind == V_TIME:
        # seconds (1) and nanos (2), zeros left out; a Timestamp's nanos are >= 0
        # (floor), a Duration's take the seconds' sign (truncation)
        if lead(s, n, how, False) < 0:
            return -1
        v = (<const int64_t *>n.data)[j]
        secs = v // n.per                                   # C division truncates
        if not n.duration and v < 0 and secs * n.per != v:
            secs -= 1
        nanos = (v - secs * n.per) * n.nano
        a = (1 + varint_len(<uint64_t>secs) if secs != 0 else 0) + \
            (1 + varint_len(<uint64_t>nanos) if nanos != 0 else 0)
        if put_varint(s, <uint64_t>a) < 0:
            return -1
        if secs != 0 and (put_varint(s, 0x08) < 0 or put_varint(s, <uint64_t>secs) < 0):
            return -1
        if nanos != 0 and (put_varint(s, 0x10) < 0 or put_varint(s, <uint64_t>nanos) < 0):
            return -1
        return 0
    # V_MSG
    if lead(s, n, how, False) < 0:
        return -1
    start = begin_len(s)
    if start < 0 or put_fields(s, n, i, row) < 0:
        return -1
    return end_len(s, start)


cdef int put_fields(St *s, PNode *m, int64_t i, int64_t row) noexcept nogil:
    """The fields of message node ``m`` at ``i``, in field-number order."""
    cdef int32_t q
    cdef PNode *f
    cdef PNode *e
    cdef PNode *kn
    cdef PNode *vn
    cdef int64_t a, b, k, start, stamp
    s.stamp += 1
    stamp = s.stamp
    for q in range(m.kid0, m.kid0 + m.nkids):
        f = &s.nodes[s.kids[q]]
        if f.mode == M_REPEATED or f.mode == M_PACKED or f.mode == M_MAP:
            if is_null(f, i):
                continue
            a = f.offs[f.voff + i]
            b = f.offs[f.voff + i + 1]
            if b <= a:
                continue
            if f.mode == M_MAP:
                kn = &s.nodes[s.kids[f.kid0]]
                vn = &s.nodes[s.kids[f.kid0 + 1]]
                for k in range(a, b):
                    if is_null(vn, k):
                        return fail(s, E_NULL_MAPVAL, f, row, k)
                for k in range(a, b):
                    if put_tag(s, f) < 0:
                        return -1
                    start = begin_len(s)
                    if start < 0 or put_value(s, kn, k, row, H_TAG) < 0 or \
                            put_value(s, vn, k, row, H_TAG) < 0 or end_len(s, start) < 0:
                        return -1
                continue
            e = &s.nodes[s.kids[f.kid0]]
            for k in range(a, b):
                if is_null(e, k):
                    return fail(s, E_NULL_ELEM, f, row, k)
            if f.mode == M_PACKED:
                if put_tag(s, f) < 0:
                    return -1
                start = begin_len(s)
                if start < 0:
                    return -1
                for k in range(a, b):
                    if put_value(s, e, k, row, H_BARE) < 0:
                        return -1
                if end_len(s, start) < 0:
                    return -1
            else:
                for k in range(a, b):
                    if put_value(s, e, k, row, H_TAG) < 0:    # e has f's tag
                        return -1
            continue
        if is_null(f, i):
            if f.mode == M_REQUIRED:
                return fail(s, E_REQUIRED, f, row, i)
            continue
        if f.oneof >= 0:
            if s.seen[f.oneof] == stamp:
                return fail(s, E_ONEOF, f, row, i)
            s.seen[f.oneof] = stamp
        if put_value(s, f, i, row, H_UNLESS_ZERO if f.mode == M_IMPLICIT else H_TAG) < 0:
            return -1
    return 0


cdef const uint8_t *_addr(buf):
    if buf is None:
        return NULL
    return <const uint8_t *><size_t>buf.address


cdef class _Owned:
    """Owns the malloc'd output that an Arrow buffer wraps without a copy."""
    cdef uint8_t *ptr

    def __dealloc__(self):
        free(self.ptr)


cdef class Program:
    """The nodes of one (schema, Arrow type): static parts set once by :meth:`node` and
    :meth:`children`, buffers by :meth:`bind` per batch."""
    cdef PNode *nodes
    cdef int32_t *kids
    cdef int64_t *seen
    cdef int n, nk, nslots
    cdef list keep
    cdef int64_t hint            # bytes per row of the last batch: the next one's first guess

    def __cinit__(self):
        self.nodes = NULL
        self.kids = NULL
        self.seen = NULL
        self.n = self.nk = self.nslots = 0
        self.keep = []
        self.hint = 64

    def __dealloc__(self):
        free(self.nodes)
        free(self.kids)
        free(self.seen)

    def node(self, str kind, str mode, bytes tag=b"", str conv="NONE", lo=None, hi=None,
             bint from_u64=False, int64_t per=0, bint duration=False, int oneof=-1):
        """A new node (its index); ``oneof``: a slot from :meth:`oneof_slot`, or -1."""
        cdef PNode *nb = <PNode *>realloc(self.nodes, (self.n + 1) * sizeof(PNode))
        if nb == NULL:
            raise MemoryError()
        self.nodes = nb
        cdef PNode *p = &self.nodes[self.n]
        memset(p, 0, sizeof(PNode))
        p.kind = KINDS[kind]
        p.mode = MODES[mode]
        p.conv = CONVS[conv]
        if len(tag) > 10:
            raise ValueError("a tag takes at most 10 bytes")
        p.taglen = len(tag)
        memcpy(p.tag, <const uint8_t *>tag, p.taglen)
        p.ranged = lo is not None
        p.lo = lo if lo is not None else 0
        p.hi = hi if hi is not None else 0
        p.from_u64 = from_u64
        p.per = per
        p.nano = 1_000_000_000 // per if per else 0
        p.duration = duration
        p.oneof = oneof
        p.kid0 = 0
        p.nkids = 0
        self.n += 1
        return self.n - 1

    def oneof_slot(self):
        cdef int64_t *nb = <int64_t *>realloc(self.seen, (self.nslots + 1) * sizeof(int64_t))
        if nb == NULL:
            raise MemoryError()
        self.seen = nb
        self.seen[self.nslots] = -1
        self.nslots += 1
        return self.nslots - 1

    def children(self, int idx, kids):
        kids = list(kids)
        cdef int32_t *nb = <int32_t *>realloc(self.kids, (self.nk + len(kids) + 1)
                                              * sizeof(int32_t))
        if nb == NULL:
            raise MemoryError()
        self.kids = nb
        self.nodes[idx].kid0 = self.nk
        self.nodes[idx].nkids = len(kids)
        for k in kids:
            if not 0 <= k < self.n:
                raise ValueError(f"no node {k}")
            self.kids[self.nk] = k
            self.nk += 1

    def bind(self, int idx, valid, data=None, offs=None):
        """Point node ``idx`` at a batch's buffers. ``valid``: the Arrow array whose
        validity counts (its offset is the node's); ``data``: the array (Arrow, or a
        NumPy array as long as ``valid``) holding the values; ``offs``: the array whose
        offsets (int32) the node reads: a bytes value's, a list's or a map's."""
        if not 0 <= idx < self.n:
            raise ValueError(f"no node {idx}")
        cdef PNode *p = &self.nodes[idx]
        self.keep.append((valid, data, offs))
        p.voff = valid.offset
        p.valid = _addr(valid.buffers()[0]) if valid.null_count else NULL
        p.data = NULL
        p.offs = NULL
        p.doff = 0
        if isinstance(data, np.ndarray):
            if not data.flags.c_contiguous or len(data) != len(valid):
                raise ValueError("data must be contiguous and as long as its array")
            p.data = <const uint8_t *><size_t>data.ctypes.data
        elif data is not None:
            p.doff = data.offset
            bufs = data.buffers()
            p.data = _addr(bufs[2] if len(bufs) > 2 else bufs[1])
        if offs is not None:
            p.offs = <const int32_t *>_addr(offs.buffers()[1])
            if data is None:
                p.doff = offs.offset

    def unbind(self):
        """Drop the batch's buffers (the arrays are released)."""
        self.keep = []

    def encode(self, int top, int64_t nrows, bytes prefix):
        """``nrows`` rows of message node ``top`` (bound) after ``prefix`` each ->
        (``pa.binary()`` array, None), a null row null; or (None, (error, node, row
        index, value)) at the first value the schema cannot take."""
        cdef St s
        cdef int64_t i, nnull = 0
        cdef const uint8_t *pre = prefix
        cdef int64_t plen = len(prefix)
        cdef PNode *t = &self.nodes[top]
        offsets = np.empty(nrows + 1, dtype=np.int32)
        validity = np.ones(nrows, dtype=np.uint8)
        cdef int32_t[::1] offv = offsets
        cdef uint8_t[::1] valv = validity
        s.buf = NULL
        s.len = 0
        s.cap = 0
        s.nodes = self.nodes
        s.kids = self.kids
        s.seen = self.seen
        s.stamp = 0
        s.err = E_OK
        s.err_node = top
        s.err_row = 0
        s.err_val = 0
        for i in range(self.nslots):
            self.seen[i] = -1
        owner = _Owned()
        with nogil:
            if grow(&s, min((self.hint + self.hint // 8 + 1) * nrows, 1 << 28) + 4096) == 0:
                offv[0] = 0
                for i in range(nrows):
                    if is_null(t, i):
                        valv[i] = 0
                        nnull += 1
                    elif put_raw(&s, pre, plen) < 0 or put_fields(&s, t, i, i) < 0:
                        break
                    if s.len > 2147483647:
                        fail(&s, E_TOO_BIG, t, i, 0)
                        break
                    offv[i + 1] = <int32_t>s.len
        owner.ptr = s.buf
        if nrows and s.err == E_OK:
            self.hint = s.len // nrows + 1
        if s.err != E_OK:
            return None, (s.err, s.err_node, s.err_row, s.err_val)
        if s.len:
            data = pa.foreign_buffer(<size_t>s.buf, s.len, base=owner)
        else:
            data = pa.py_buffer(b"")
        valid_buf = pa.py_buffer(np.packbits(validity.view(bool), bitorder="little")) \
            if nnull else None
        return pa.Array.from_buffers(pa.binary(), nrows, [valid_buf, pa.py_buffer(offsets),
                                                          data], nnull), None
