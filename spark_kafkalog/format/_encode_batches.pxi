# The batch builder: Encoder (prepare, plan, write, compress, lay out)
# A new batch-header field is written in Encoder._write_header.
# (Part of the _encode module: _encode.pyx includes it; not compiled alone.)

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
    # given layout (set_batches): per record offsetDelta, per batch-start baseTimestamp
    cdef const int64_t* odelta   # NULL: position in the batch
    cdef const int64_t* bts      # NULL: the batch's first record's timestamp
    cdef object _keep_layout
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
        self.odelta = NULL
        self.bts = NULL
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
    cdef inline int64_t _od(self, int64_t i, int64_t batch_start) noexcept nogil:
        """offsetDelta of record ``i`` in the batch starting at ``batch_start``."""
        if self.odelta != NULL:
            return self.odelta[i]
        return self._ord(i) - self._ord(batch_start)

    @cython.final
    cdef inline int64_t _bt(self, int64_t batch_start) noexcept nogil:
        """baseTimestamp of the batch starting at record ``batch_start``."""
        return self.bts[batch_start] if self.bts != NULL else self.ts_ms[batch_start]

    @cython.final
    cdef inline int64_t _record_size(self, int64_t i, int64_t base_ts,
                                     int64_t batch_start) noexcept nogil:
        cdef int64_t body = (self.fixed[i] + _varlong_size(self.ts_ms[i] - base_ts)
                             + _varint_size(self._od(i, batch_start)))
        return _varint_size(body) + body

    def set_batches(self, starts, odelta, bts):
        """A given layout instead of :meth:`plan`: ``starts`` (int64, nbatches + 1
        record positions, increasing, ending at the record count), ``odelta`` (int64 per
        record: its offsetDelta) and ``bts`` (int64 per record: at each batch's first
        record, that batch's baseTimestamp), each C-contiguous and checked by the caller.
        Used to rebuild batches as a log cleaner does (offsets and timestamps kept).
        Returns the number of batches."""
        cdef const int64_t[::1] st = starts
        cdef const int64_t[::1] od = odelta
        cdef const int64_t[::1] bt = bts
        cdef int64_t b, nb = st.shape[0] - 1, size
        if nb < 0 or od.shape[0] != self.n or bt.shape[0] != self.n or st[nb] != self.n:
            raise InternalError("set_batches: layout does not match the records")
        free(self.starts)
        free(self.rec_bytes)
        self.starts = <int64_t*>malloc((nb + 1) * sizeof(int64_t))
        self.rec_bytes = <int64_t*>malloc(max(nb, 1) * sizeof(int64_t))
        if self.starts == NULL or self.rec_bytes == NULL:
            raise MemoryError()
        self.odelta = &od[0] if self.n > 0 else NULL
        self.bts = &bt[0] if self.n > 0 else NULL
        self._keep_layout = (starts, odelta, bts)
        self._max_rec = 0
        for b in range(nb + 1):
            self.starts[b] = st[b]
        for b in range(nb):
            if st[b + 1] <= st[b]:
                raise InternalError("set_batches: empty or decreasing batch")
            size = self._range_size(st[b], st[b + 1])
            self.rec_bytes[b] = size
            if size > self._max_rec:
                self._max_rec = size
        self.nbatches = nb
        return nb

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
        cdef int64_t base_ts = self._bt(start)
        cdef int64_t best = self.ts_ms[start]
        cdef int64_t best_row = start
        for i in range(start, end):
            ts = self.ts_ms[i]
            if ts > best:
                best = ts
                best_row = i
            r = idx[i] if idx != NULL else i     # the row output position i writes
            p = self._put_record(p, i, r, ts - base_ts, self._od(i, start), &cur)
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
        cdef int64_t base_ts = self._bt(start)
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
                           self._od(end - 1, start), self._bt(start), max_ts)
        # the output is private to this range until finish(): filling in the CRC is
        # safe (the views are released before anything can resize it)
        if _HWCRC:
            _be32(h + V2_CRC_POS, kl_crc32c(0, h + V2_ATTRIBUTES_POS,
                                         V2_HEADER_SIZE - V2_ATTRIBUTES_POS + plen))
        else:
            with memoryview(out.buf) as whole:
                with whole[at + V2_ATTRIBUTES_POS:at + V2_HEADER_SIZE + plen] as part:
                    _be32(h + V2_CRC_POS, crc_fn(part))
        out.index.append((at, V2_HEADER_SIZE + plen, start, end, self._bt(start), max_ts,
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
                           self._od(end - 1, start), self._bt(start), self.max_ts[b])
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
