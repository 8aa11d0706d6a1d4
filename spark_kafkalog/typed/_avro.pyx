# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled Avro kernel: a binary column of Avro values -> Arrow column buffers.

Use it through :class:`spark_kafkalog.typed.avro.AvroDecoder`, which compiles the program
(``avro_program.py``) and builds the Arrow arrays from what :meth:`Kernel.run` returns. The
interpreter itself is ``_avro_kernel.h``; this file drives it over the rows (framing, the
schema id lookup, rollback of a bad record under ``null``/``skip``) and hands the buffers
over without copying them.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uintptr_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyBUF_WRITABLE

import numpy as np
import pyarrow as pa

cdef extern from "_avro_kernel.h" nogil:
    enum:
        AK_NULL, AK_BOOL, AK_I32, AK_I64, AK_F32, AK_F64, AK_D128, AK_BIN, AK_STRUCT, AK_LIST
    enum:
        SK_NONE, SK_FIXED, SK_VARINT, SK_BYTES, SK_ENUM, SK_ARRAY, SK_MAP, SK_UNION,
        SK_RECORD, D_NULL, D_ABSENT, D_BOOL, D_INT, D_LONG, D_FLOAT, D_DOUBLE, D_BYTES,
        D_FIXED, D_DEC, D_ENUM, D_RECORD, D_ARRAY, D_MAP, D_UNION, D_MEMBER, D_DEFAULT
    enum:
        AE_OK, AE_TRUNCATED, AE_VARINT, AE_INT_RANGE, AE_NEGLEN, AE_BRANCH, AE_ENUM,
        AE_UTF8, AE_BOOL, AE_DECIMAL, AE_OVERFLOW, AE_TRAILING, AE_NOMAGIC, AE_MAGIC,
        AE_SCHEMA_ID, AE_NOMEM, AE_TOOBIG, AE_ITEMS, AE_BLOCKSIZE
    int AV_NODE_WORDS
    int AV_ZERO_SIZE_ITEMS
    ctypedef struct av_col:
        int32_t kind, nullable, width
        int64_t n, nnull, cap
        uint8_t *valid
        uint8_t *data
        int64_t dlen, dcap
        int32_t *offs
        int64_t kid, nkids
    ctypedef struct av_ctx:
        const uint8_t *p
        const uint8_t *end
        const uint8_t *start
        const uint8_t *src_end
        const uint8_t *in_end
        const uint8_t *consts_end
        av_col *cols
        const int64_t *nodes
        const int64_t *kids
        const int32_t *ints
        const uint8_t *consts
        int err
        const uint8_t *err_at
        int64_t err_detail
        int64_t zero_items
        int in_default
    int av_exec(av_ctx *x, int64_t ni)
    int av_absent(av_ctx *x, int64_t ci)
    int av_col_reserve(av_ctx *x, av_col *c, int64_t want)
    int av_data_reserve(av_ctx *x, av_col *c, int64_t want)
    int AV_SLACK
    void av_init()
    void av_release(void *p)
    void av_cache_set_limit(size_t limit)

av_init()

OPS = {
    "SK_NONE": SK_NONE, "SK_FIXED": SK_FIXED, "SK_VARINT": SK_VARINT, "SK_BYTES": SK_BYTES,
    "SK_ENUM": SK_ENUM,
    "SK_ARRAY": SK_ARRAY, "SK_MAP": SK_MAP, "SK_UNION": SK_UNION, "SK_RECORD": SK_RECORD,
    "D_NULL": D_NULL, "D_ABSENT": D_ABSENT, "D_BOOL": D_BOOL, "D_INT": D_INT,
    "D_LONG": D_LONG, "D_FLOAT": D_FLOAT, "D_DOUBLE": D_DOUBLE, "D_BYTES": D_BYTES,
    "D_FIXED": D_FIXED, "D_DEC": D_DEC, "D_ENUM": D_ENUM, "D_RECORD": D_RECORD,
    "D_ARRAY": D_ARRAY, "D_MAP": D_MAP, "D_UNION": D_UNION, "D_MEMBER": D_MEMBER,
    "D_DEFAULT": D_DEFAULT,
}
KINDS = {
    "NULL": AK_NULL, "BOOL": AK_BOOL, "I32": AK_I32, "I64": AK_I64, "F32": AK_F32,
    "F64": AK_F64, "D128": AK_D128, "BIN": AK_BIN, "STRUCT": AK_STRUCT, "LIST": AK_LIST,
}
NODE_WORDS = AV_NODE_WORDS

#: error code -> message; ``{d}`` is the detail the kernel reports
ERRORS = {
    AE_TRUNCATED: "truncated value: it ends inside an item (declared size {d})",
    AE_VARINT: "varint too long (more than {d} bytes)",
    AE_INT_RANGE: "int varint out of the 32-bit range",
    AE_NEGLEN: "negative length {d}",
    AE_BRANCH: "union branch {d} out of range",
    AE_ENUM: "enum index {d} out of range",
    AE_UTF8: "string of {d} bytes is not valid UTF-8",
    AE_BOOL: "boolean byte {d} is neither 0 nor 1",
    AE_DECIMAL: "decimal does not fit its precision ({d} bytes)",
    AE_OVERFLOW: "timestamp-millis {d} overflows microseconds",
    AE_TRAILING: "{d} trailing bytes after the Avro value (overlong payload)",
    AE_NOMAGIC: "empty value: no magic byte of the schema-registry framing",
    AE_MAGIC: "magic byte {d} is not the schema-registry framing's 0",
    AE_SCHEMA_ID: "unknown schema id {d}",
    AE_NOMEM: "out of memory decoding Avro values",
    AE_TOOBIG: "a column would exceed 2 GiB ({d} bytes); decode fewer rows at once",
    AE_ITEMS: "array/map declares {d} items that take no bytes (over the limit)",
    AE_BLOCKSIZE: "array/map block byte size {d} is negative or past the value",
}
_TRUNCATED_FRAME = "value of {d} bytes is shorter than the 5-byte schema-registry header"


def set_buffer_cache_limit(size_t limit):
    """Bytes of released column buffers (1 MiB and more each) kept for the next decodes;
    0 frees them and stops keeping any. 128 MiB by default (docs/PERFORMANCE.md)."""
    av_cache_set_limit(limit)


cdef class _Mem:
    """malloc'd memory that a pyarrow Buffer keeps alive (freed with the last reference)."""
    cdef uint8_t *ptr
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __dealloc__(self):
        av_release(self.ptr)

    def __getbuffer__(self, Py_buffer *view, int flags):
        self.shape[0] = self.size
        self.strides[0] = 1
        view.buf = <void *>self.ptr
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


cdef object _own(uint8_t *ptr, int64_t size):
    if ptr == NULL:
        return None
    cdef _Mem m = _Mem.__new__(_Mem)
    m.ptr = ptr
    m.size = size
    return pa.py_buffer(m)


cdef class Kernel:
    """One compiled program: ``nodes`` (int64, NODE_WORDS per node), ``kids`` (int64),
    ``ints`` (int32), ``consts`` (bytes), ``colspec`` (int64 rows: kind, nullable, width,
    kid, nkids, per_row): a column's children are ``kids[kid:kid + nkids]`` (the same
    array as the nodes' kids); a ``per_row`` column has one value per row (it is under
    no list), so its buffers are sized for the rows up front."""
    cdef object nodes, kids, ints, consts, colspec
    cdef int64_t ncols

    def __init__(self, nodes, kids, ints, consts, colspec):
        self.nodes = np.ascontiguousarray(nodes, dtype=np.int64)
        self.kids = np.ascontiguousarray(kids, dtype=np.int64)
        self.ints = np.ascontiguousarray(ints, dtype=np.int32)
        # padded: short constants are copied by fixed-size moves too
        self.consts = bytes(consts) + bytes(AV_SLACK)
        self.colspec = np.ascontiguousarray(colspec, dtype=np.int64)
        self.ncols = self.colspec.shape[0]

    def run(self, values, bint confluent, ids, entries, int64_t entry, int mode, int64_t top):
        """Decode every row of ``values`` (binary or large_binary). ``confluent``: each value
        is magic 0 + 4-byte big-endian id + Avro, the id found in ``ids`` (sorted) and run
        from ``entries[i]``; otherwise every value runs from ``entry``. ``mode``: 0 stop at
        the first bad record, 1 a null for it, 2 leave it out. Returns (columns, bad, kept):
        per column (n, nnull, validity, data, offsets) as pyarrow Buffers; ``bad`` a list of
        (row, message, schema id or None, byte position); ``kept`` a uint8 array (mode 2)."""
        cdef int64_t n = len(values)
        cdef bint large = pa.types.is_large_binary(values.type)
        bufs = values.buffers()
        cdef const uint8_t *vvalid = NULL
        cdef const uint8_t *vdata = <const uint8_t *>b""
        cdef int64_t vsize = 0
        cdef const int32_t *off32 = NULL
        cdef const int64_t *off64 = NULL
        cdef int64_t base = values.offset
        if bufs[0] is not None and values.null_count:
            vvalid = <const uint8_t *><uintptr_t>bufs[0].address
        if large:
            off64 = <const int64_t *><uintptr_t>bufs[1].address
        else:
            off32 = <const int32_t *><uintptr_t>bufs[1].address
        if bufs[2] is not None and bufs[2].size:
            vdata = <const uint8_t *><uintptr_t>bufs[2].address
            vsize = bufs[2].size

        cdef int64_t[::1] id_view = np.ascontiguousarray(ids, dtype=np.int64)
        cdef int64_t[::1] entry_view = np.ascontiguousarray(entries, dtype=np.int64)
        cdef int64_t nids = id_view.shape[0]
        cdef int64_t[:, ::1] spec = self.colspec
        cdef int64_t[:, ::1] nodes = self.nodes
        cdef int64_t[::1] kids = self.kids
        cdef int32_t[::1] ints = self.ints
        cdef const uint8_t *consts = <const uint8_t *>(<bytes>self.consts)

        cdef av_ctx x
        memset(&x, 0, sizeof(av_ctx))
        cdef av_col *cols = <av_col *>calloc(self.ncols + 1, sizeof(av_col))
        cdef int64_t *snap = <int64_t *>malloc((self.ncols + 1) * 3 * sizeof(int64_t))
        cdef uint8_t *kept = NULL
        if cols == NULL or snap == NULL:
            free(cols)
            free(snap)
            raise MemoryError("Avro decode: column table")
        cdef int64_t i, k, lo, hi, mid, start_i, end_i, ni, sid, last_id = -1, last_entry = -1
        cdef const uint8_t *v
        cdef int64_t vlen
        cdef int rc
        cdef av_col *c
        bad = []
        try:
            for k in range(self.ncols):
                cols[k].kind = <int32_t>spec[k, 0]
                cols[k].nullable = <int32_t>spec[k, 1]
                cols[k].width = <int32_t>spec[k, 2]
                cols[k].kid = spec[k, 3]
                cols[k].nkids = spec[k, 4]
            x.cols = cols
            x.nodes = &nodes[0, 0] if nodes.shape[0] else NULL
            x.kids = &kids[0] if kids.shape[0] else NULL
            x.ints = &ints[0] if ints.shape[0] else NULL
            x.consts = consts
            x.consts_end = consts + len(self.consts)
            x.in_end = vdata + vsize
            x.src_end = x.in_end
            for k in range(self.ncols):
                if spec[k, 5] and n:
                    if av_col_reserve(&x, &cols[k], n + 1) < 0:
                        raise MemoryError("Avro decode: column buffers")
                    if cols[k].kind == AK_BIN and av_data_reserve(
                            &x, &cols[k], min(vsize, 1 << 24)) < 0:
                        raise MemoryError("Avro decode: column buffers")
            if mode == 2:
                kept = <uint8_t *>malloc(n if n else 1)
                if kept == NULL:
                    raise MemoryError("Avro decode: kept mask")
            for i in range(n):
                if mode == 2:
                    kept[i] = 1
                if vvalid != NULL and not (vvalid[(base + i) >> 3] >> ((base + i) & 7)) & 1:
                    if av_absent(&x, top) < 0:
                        break
                    continue
                if large:
                    start_i = off64[base + i]
                    end_i = off64[base + i + 1]
                else:
                    start_i = off32[base + i]
                    end_i = off32[base + i + 1]
                v = vdata + start_i
                vlen = end_i - start_i
                if mode:
                    for k in range(self.ncols):
                        snap[3 * k] = cols[k].n
                        snap[3 * k + 1] = cols[k].nnull
                        snap[3 * k + 2] = cols[k].dlen
                x.err = AE_OK
                x.zero_items = AV_ZERO_SIZE_ITEMS
                x.in_default = 0
                x.start = v
                sid = -1
                ni = entry
                if confluent:
                    if vlen == 0:
                        x.err, x.err_at, x.err_detail = AE_NOMAGIC, v, 0
                    elif v[0] != 0:
                        x.err, x.err_at, x.err_detail = AE_MAGIC, v, v[0]
                    elif vlen < 5:
                        x.err, x.err_at, x.err_detail = AE_TRUNCATED, v, 5 - vlen
                    else:
                        sid = ((<int64_t>v[1] << 24) | (<int64_t>v[2] << 16)
                               | (<int64_t>v[3] << 8) | <int64_t>v[4])
                        if sid == last_id:
                            ni = last_entry
                        else:
                            lo, hi, ni = 0, nids, -1
                            while lo < hi:
                                mid = (lo + hi) >> 1
                                if id_view[mid] < sid:
                                    lo = mid + 1
                                else:
                                    hi = mid
                            if lo < nids and id_view[lo] == sid:
                                ni = entry_view[lo]
                                last_id, last_entry = sid, ni
                            else:
                                x.err, x.err_at, x.err_detail = AE_SCHEMA_ID, v + 1, sid
                x.p = v + 5 if confluent else v
                x.end = v + vlen
                if x.err == AE_OK:
                    rc = av_exec(&x, ni)
                    if rc == 0 and x.p != x.end:
                        x.err, x.err_at, x.err_detail = AE_TRAILING, x.p, x.end - x.p
                if x.err == AE_OK:
                    continue
                msg = ERRORS.get(x.err, "bad Avro value")
                if x.err == AE_TRUNCATED and confluent and x.err_at == v and vlen < 5:
                    msg = _TRUNCATED_FRAME
                bad.append((i, msg.format(d=x.err_detail), None if sid < 0 else sid,
                            <int64_t>(x.err_at - v)))
                if x.err == AE_NOMEM or x.err == AE_TOOBIG or mode == 0:
                    break
                for k in range(self.ncols):
                    cols[k].n = snap[3 * k]
                    cols[k].nnull = snap[3 * k + 1]
                    cols[k].dlen = snap[3 * k + 2]
                if mode == 1:
                    if av_absent(&x, top) < 0:
                        break
                else:
                    kept[i] = 0
            if x.err == AE_NOMEM and not bad:
                raise MemoryError("Avro decode: column buffers")
            out = []
            for k in range(self.ncols):
                c = &cols[k]
                out.append((c.n, c.nnull,
                            _own(c.valid, c.n // 8 + 1) if c.nnull else None,
                            _own(c.data, c.dlen if c.kind == AK_BIN else
                                 (c.n // 8 + 1 if c.kind == AK_BOOL else c.n * c.width)),
                            _own(<uint8_t *>c.offs, (c.n + 1) * 4)))
                if not c.nnull:
                    av_release(c.valid)
                c.valid = NULL
                c.data = NULL
                c.offs = NULL
            kept_arr = None
            if kept != NULL:
                kept_arr = np.frombuffer(_own(kept, n if n else 1), dtype=np.uint8)[:n]
                kept = NULL
            return out, bad, kept_arr
        finally:
            for k in range(self.ncols):
                av_release(cols[k].valid)
                av_release(cols[k].data)
                av_release(cols[k].offs)
            free(cols)
            free(snap)
            free(kept)
