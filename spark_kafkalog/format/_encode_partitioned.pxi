# PartitionedEncoder (every row into its partition's batches) and join_output
# (Part of the _encode module: _encode.pyx includes it; not compiled alone.)

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
