# The Python-facing run: Kernel (the plan's tables in C form; run over a binary column,
# schema-registry framing and message indexes, per-row rollback) and the hand-over of
# the filled columns to pyarrow without a copy.
# (Part of the _protobuf module: _protobuf.pyx includes it; not compiled alone.)

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
