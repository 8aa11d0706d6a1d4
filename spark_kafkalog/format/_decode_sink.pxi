# The Arrow buffer sink: growable output buffers over the mapped block cache
# (_blockcache.c) and the _Sink that owns a decode call's columns (the C walk of _v2records.h
# appends into its kl_out).
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

# ---- big output buffers: a small cache of mapped blocks -------------------------------------
# (the C: _blockcache.h / _blockcache.c)

cdef class _Block:
    """One mapped block (see kl_block_get); the base object of the Arrow buffers made
    over it. Released, it goes back to the cache."""
    cdef uint8_t* ptr
    cdef size_t cap

    def __dealloc__(self):
        if self.ptr != NULL:
            kl_block_put(self.ptr, self.cap)
            self.ptr = NULL


cdef _Block _new_block(int64_t need):
    cdef _Block b = _Block.__new__(_Block)
    b.ptr = kl_block_get(<size_t>need, &b.cap)
    if b.ptr == NULL:
        raise MemoryError(f"cannot map {need} bytes for decoded output")
    return b


def set_block_cache_limit(int64_t limit):
    """Bound the idle output blocks kept for reuse to ``limit`` bytes (0: keep none);
    returns the previous limit. Blocks already cached beyond it are unmapped."""
    cdef size_t old = kl_cache_limit
    if limit < 0:
        raise InvalidOptionError("the block cache limit must be >= 0")
    kl_cache_set_limit(<size_t>limit)
    return old


def block_cache_info():
    """(number of cached blocks, their bytes, the limit) -- test hook."""
    return kl_ncache, kl_cache_bytes, kl_cache_limit


cdef class _Growable:
    """One resizable output buffer reached through a raw pointer: below KL_BLOCK_MIN a
    buffer from pyarrow's memory pool, from there on a cached mapped block (_Block).
    Growth is the only Python call; it happens a logarithmic number of times."""
    cdef object buf
    cdef _Block blk
    cdef uint8_t* ptr
    cdef int64_t cap

    cdef int resize(self, int64_t nbytes, bint zero_new) except -1:
        cdef int64_t old = self.cap
        cdef _Block nb
        if nbytes < 64:
            nbytes = 64            # never empty: the address stays valid
        if self.blk is not None and <size_t>nbytes <= self.blk.cap:
            pass                   # the block has room: no move
        elif self.blk is not None or <size_t>nbytes >= KL_BLOCK_MIN:
            nb = _new_block(nbytes)
            if old:
                memcpy(nb.ptr, self.ptr, <size_t>min(old, nbytes))
            self.blk = nb          # the old block (if any) goes back to the cache
            self.buf = None
            self.ptr = nb.ptr
        elif self.buf is None:
            self.buf = pa.allocate_buffer(nbytes, resizable=True)
            old = 0
            self.ptr = <uint8_t*><uintptr_t>self.buf.address
        else:
            self.buf.resize(nbytes)
            self.ptr = <uint8_t*><uintptr_t>self.buf.address
        # a block's whole size is usable: growth within it costs nothing
        self.cap = <int64_t>self.blk.cap if self.blk is not None else nbytes
        if zero_new and self.cap > old:
            memset(self.ptr + old, 0, <size_t>(self.cap - old))
        return 0

    cdef object finish(self, int64_t nbytes):
        """The buffer trimmed to ``nbytes`` (the pool may shrink it in place); a mapped
        block is handed over whole, the Arrow buffer covering its first ``nbytes``."""
        if self.blk is not None:
            buf = pa.foreign_buffer(<uintptr_t>self.ptr, nbytes, base=self.blk)
            self.blk = None
        elif self.buf is None:
            return pa.allocate_buffer(0)
        else:
            if nbytes < self.cap:
                self.buf.resize(nbytes, shrink_to_fit=True)
            buf = self.buf
            self.buf = None
        self.ptr = NULL
        self.cap = 0
        return buf


cdef inline int64_t _bitmap_bytes(int64_t bits) noexcept nogil:
    return (bits + 7) >> 3


cdef struct Params:
    bint verify_crc
    int64_t max_decompressed
    int64_t lo
    int64_t hi
    bint hi_set
    int64_t position_base
    const int64_t* skip
    int64_t nskip


cdef class _Sink:
    """Output columns of one decode call: a ``kl_out`` of raw pointers into buffers from
    pyarrow's memory pool (see the C struct), plus growth and the final assembly.

    Row arrays: offset int64, timestamp int64 (+ validity), timestampType int32,
    key/value int32 offsets (+ validity), header list int32 offsets (+ validity). Byte
    arrays: key, value, header key, header value data. Header slots: header key/value
    int32 offsets, header value validity.
    """
    cdef kl_out o
    cdef _Growable g_offset, g_ts, g_ts_type
    cdef _Growable g_key_off, g_key_valid, g_key_data
    cdef _Growable g_val_off, g_val_valid, g_val_data
    cdef _Growable g_hl_off, g_hl_valid
    cdef _Growable g_hk_off, g_hk_data, g_hv_off, g_hv_valid, g_hv_data
    # where the batch being decoded is, for error messages
    cdef int64_t where_pos, where_off
    # decompressed payload of the batch being decoded (lz4 and snappy, by _framing.h);
    # reused per batch, at most max_decompressed + KL_SLACK bytes
    cdef uint8_t* scratch
    cdef int64_t scratch_cap
    # this thread's zstandard decompress function (looked up once per call), or False
    # when zstandard is missing (the registry then raises MissingCodecError)
    cdef object zstd_decompress

    def __dealloc__(self):
        PyMem_Free(self.scratch)

    cdef int ensure_scratch(self, int64_t need) except -1:
        cdef int64_t cap
        cdef void* p
        if need <= self.scratch_cap:
            return 0
        cap = max(need, 2 * self.scratch_cap, 65536 + KL_SLACK)
        p = PyMem_Realloc(self.scratch, <size_t>cap)
        if p == NULL:
            raise MemoryError(f"cannot allocate {cap} bytes for a decompressed batch")
        self.scratch = <uint8_t*>p
        self.scratch_cap = cap
        return 0

    def __cinit__(self, bint with_headers):
        memset(&self.o, 0, sizeof(kl_out))
        self.o.with_headers = with_headers
        self.o.owner = <void*>self
        self.o.grow_hslots = _cb_grow_hslots
        self.o.grow_hk = _cb_grow_hk
        self.o.grow_hv = _cb_grow_hv
        self.g_offset = _Growable(); self.g_ts = _Growable()
        self.g_ts_type = _Growable()
        self.g_key_off = _Growable(); self.g_key_valid = _Growable()
        self.g_key_data = _Growable()
        self.g_val_off = _Growable(); self.g_val_valid = _Growable()
        self.g_val_data = _Growable()
        self.g_hl_off = _Growable(); self.g_hl_valid = _Growable()
        self.g_hk_off = _Growable(); self.g_hk_data = _Growable()
        self.g_hv_off = _Growable(); self.g_hv_valid = _Growable()
        self.g_hv_data = _Growable()

    cdef int setup(self, int64_t rows, int64_t kv_bytes) except -1:
        self.grow_rows(rows)
        self.o.key_off[0] = 0
        self.o.val_off[0] = 0
        # keys and values share each payload byte budget, and keys are usually the
        # small part: the key buffer starts at a quarter of the bound and grows (per
        # batch, reserve_kv makes room for the whole payload) when keys are bigger
        self.grow_key(kv_bytes // 4, 0)
        self.grow_val(kv_bytes, 0)
        if self.o.with_headers:
            self.o.hl_off[0] = 0
            # a start proportional to the input (headers on a fraction of the records)
            # saves the many doublings from a tiny size, and the copies they make
            self.grow_hslots(max(16, rows // 8))
            self.o.hk_off[0] = 0
            self.o.hv_off[0] = 0
            self.grow_hk(max(256, kv_bytes // 128))
            self.grow_hv(max(256, kv_bytes // 64))
        return 0

    cdef object error(self, str reason, type cls=CorruptRecordError):
        return cls(reason, position=self.where_pos, offset=self.where_off)

    # -- growth (rare: a logarithmic number of times) --
    cdef int grow_rows(self, int64_t need) except -1:
        cdef int64_t cap = need
        if self.o.rows_cap and cap < 2 * self.o.rows_cap:
            cap = 2 * self.o.rows_cap
        if cap < 64:
            cap = 64
        self.g_offset.resize(cap * 8, False); self.o.offset = <int64_t*>self.g_offset.ptr
        self.g_ts.resize(cap * 8, False); self.o.ts = <int64_t*>self.g_ts.ptr
        self.g_ts_type.resize(cap * 4, False); self.o.ts_type = <int32_t*>self.g_ts_type.ptr
        self.g_key_off.resize((cap + 1) * 4, False)
        self.o.key_off = <int32_t*>self.g_key_off.ptr
        self.g_key_valid.resize(_bitmap_bytes(cap), True)
        self.o.key_valid = self.g_key_valid.ptr
        self.g_val_off.resize((cap + 1) * 4, False)
        self.o.val_off = <int32_t*>self.g_val_off.ptr
        self.g_val_valid.resize(_bitmap_bytes(cap), True)
        self.o.val_valid = self.g_val_valid.ptr
        if self.o.with_headers:
            self.g_hl_off.resize((cap + 1) * 4, False)
            self.o.hl_off = <int32_t*>self.g_hl_off.ptr
            self.g_hl_valid.resize(_bitmap_bytes(cap), True)
            self.o.hl_valid = self.g_hl_valid.ptr
        self.o.rows_cap = cap
        return 0

    cdef inline int reserve_rows(self, int64_t extra) except -1:
        if self.o.n + extra > self.o.rows_cap:
            self.grow_rows(self.o.n + extra)
        return 0

    cdef int too_big(self, str what) except -1:
        raise self.error(
            f"decoded {what} data would exceed 2 GiB, the most one Arrow binary column "
            f"holds; decode a smaller range of batches", KafkaLogError)

    cdef int64_t _grown(self, str what, int64_t need, int64_t cap, int64_t est) except -1:
        """New capacity of a data buffer (int32 offsets: at most 2 GiB)."""
        cdef int64_t new = need
        if need > INT32_MAX:
            self.too_big(what)
        if new < 2 * cap:
            new = 2 * cap
        if new < est:
            new = est
        return min(new, <int64_t>INT32_MAX)

    cdef int grow_key(self, int64_t need, int64_t est) except -1:
        self.g_key_data.resize(self._grown("key", need, self.o.key_cap, est), False)
        self.o.key_data = self.g_key_data.ptr
        self.o.key_cap = min(self.g_key_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef int grow_val(self, int64_t need, int64_t est) except -1:
        self.g_val_data.resize(self._grown("value", need, self.o.val_cap, est), False)
        self.o.val_data = self.g_val_data.ptr
        self.o.val_cap = min(self.g_val_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef inline int reserve_kv(self, int64_t extra, int64_t est) except -1:
        """Room for ``extra`` more bytes of keys and of values (one batch's payload is an
        upper bound of both); ``est`` is a hint of the final size."""
        if self.o.key_used + extra > self.o.key_cap:
            self.grow_key(self.o.key_used + extra, est // 4)
        if self.o.val_used + extra > self.o.val_cap:
            self.grow_val(self.o.val_used + extra, est)
        return 0

    cdef int grow_hslots(self, int64_t need) except -1:
        cdef int64_t cap = need
        if cap < 2 * self.o.nh_cap:
            cap = 2 * self.o.nh_cap
        if cap > INT32_MAX:
            self.too_big("header")
        self.g_hk_off.resize((cap + 1) * 4, False); self.o.hk_off = <int32_t*>self.g_hk_off.ptr
        self.g_hv_off.resize((cap + 1) * 4, False); self.o.hv_off = <int32_t*>self.g_hv_off.ptr
        self.g_hv_valid.resize(_bitmap_bytes(cap), True); self.o.hv_valid = self.g_hv_valid.ptr
        self.o.nh_cap = cap
        return 0

    cdef int grow_hk(self, int64_t need) except -1:
        self.g_hk_data.resize(self._grown("header key", need, self.o.hk_cap, 0), False)
        self.o.hk_data = self.g_hk_data.ptr
        self.o.hk_cap = min(self.g_hk_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    cdef int grow_hv(self, int64_t need) except -1:
        self.g_hv_data.resize(self._grown("header value", need, self.o.hv_cap, 0), False)
        self.o.hv_data = self.g_hv_data.ptr
        self.o.hv_cap = min(self.g_hv_data.cap, <int64_t>INT32_MAX)     # int32 offsets
        return 0

    # -- records --
    cdef int v2_records(self, const uint8_t* p, int64_t plen, Hdr* h, Params* prm) except -1:
        """The records of one v2 batch (``p``: its uncompressed payload). The caller
        reserved ``h.count`` rows and ``plen`` bytes of key and value data."""
        cdef kl_err err
        cdef int rc
        memset(&err, 0, sizeof(kl_err))
        rc = kl_v2_records(&self.o, p, plen, h.count, h.base_offset, h.first_ts, h.max_ts,
                           (h.attributes & ATTR_TIMESTAMP_TYPE) != 0, prm.lo, prm.hi, prm.hi_set,
                           &err)
        if rc == KE_OK:
            return 0
        if rc == KE_PYERR:
            return -1                   # a growth callback raised; the error is set
        if rc == KE_TOO_BIG:
            self.too_big("header key")
        raise self.error(_record_reason(&err),
                         UnsupportedFormatError if rc == KE_TS_RANGE else CorruptRecordError)

    cdef int emit_legacy(self, LMsg* m, int64_t off, int64_t ts_ms, int32_t ts_type) except -1:
        """One legacy message (an uncompressed entry or an inner message of a wrapper)."""
        cdef int64_t row, klen = m.key_len, vlen = m.value_len
        cdef kl_out* o = &self.o
        if o.n >= o.rows_cap:
            self.grow_rows(o.n + 1)
        if klen > 0 and o.key_used + klen > o.key_cap:
            self.grow_key(o.key_used + klen, 0)
        if vlen > 0 and o.val_used + vlen > o.val_cap:
            self.grow_val(o.val_used + vlen, 0)
        row = o.n
        o.offset[row] = off
        # NO_TIMESTAMP (-1, every magic 0 message) is -1 ms, as in Spark's Kafka source
        if _ts_out_of_range(ts_ms):
            raise self.error(f"message at offset {off}: timestamp {ts_ms} ms is outside "
                             f"the range of timestamp[us]", UnsupportedFormatError)
        o.ts[row] = ts_ms * 1000
        o.ts_type[row] = ts_type
        if klen >= 0:
            kl_copy(o.key_data + o.key_used, m.key, <size_t>klen)
            o.key_used += klen
            if o.key_bm:
                o.key_valid[row >> 3] |= <uint8_t>(1 << (row & 7))
        else:
            if not o.key_bm:
                kl_bitmap_start(o.key_valid, row)
                o.key_bm = 1
            o.key_nulls += 1
        o.key_off[row + 1] = <int32_t>o.key_used
        if vlen >= 0:
            kl_copy(o.val_data + o.val_used, m.value, <size_t>vlen)
            o.val_used += vlen
            if o.val_bm:
                o.val_valid[row >> 3] |= <uint8_t>(1 << (row & 7))
        else:
            if not o.val_bm:
                kl_bitmap_start(o.val_valid, row)
                o.val_bm = 1
            o.val_nulls += 1
        o.val_off[row + 1] = <int32_t>o.val_used
        if o.with_headers:
            o.hl_off[row + 1] = <int32_t>o.nh
            o.hl_nulls += 1
        o.n = row + 1
        return 0

    cdef object finish(self, str topic, int32_t partition):
        """The columns as a RecordBatch; the buffers are handed over (trimmed)."""
        cdef kl_out* o = &self.o
        cdef int64_t n = o.n, i, tlen, filled, total
        cdef bytes tbytes = topic.encode("utf-8")
        cdef int32_t* ip
        cdef _Growable g
        tlen = PyBytes_GET_SIZE(tbytes)
        total = n * tlen
        if total > INT32_MAX:
            raise KafkaLogError(f"{n} rows of topic {topic!r} exceed 2 GiB in the topic "
                                f"column; decode a smaller range of batches")
        # the constant columns, filled by doubling copies (a few memcpy calls whatever n)
        g = _Growable()
        g.resize(max(n, 1) * 4, False)
        _fill_repeat(g.ptr, <const uint8_t*>&partition, 4, max(n, 1) * 4)
        part_buf = g.finish(max(n, 1) * 4)
        g.resize((n + 1) * 4, False)
        ip = <int32_t*>g.ptr
        if tlen == 0:
            memset(ip, 0, <size_t>((n + 1) * 4))
        else:
            for i in range(n + 1):
                ip[i] = <int32_t>(i * tlen)
        toff_buf = g.finish((n + 1) * 4)
        g.resize(max(total, 1), False)
        if total > 0:
            _fill_repeat(g.ptr, <const uint8_t*>PyBytes_AS_STRING(tbytes), tlen, total)
        tdata_buf = g.finish(max(total, 1))

        bm = _bitmap_bytes(n)
        key = pa.Array.from_buffers(
            _T_BINARY, n,
            [self.g_key_valid.finish(bm) if o.key_nulls else None,
             self.g_key_off.finish((n + 1) * 4), self.g_key_data.finish(o.key_used)],
            null_count=o.key_nulls)
        value = pa.Array.from_buffers(
            _T_BINARY, n,
            [self.g_val_valid.finish(bm) if o.val_nulls else None,
             self.g_val_off.finish((n + 1) * 4), self.g_val_data.finish(o.val_used)],
            null_count=o.val_nulls)
        topic_arr = pa.Array.from_buffers(_T_STRING, n, [None, toff_buf, tdata_buf],
                                          null_count=0)
        part_arr = pa.Array.from_buffers(_T_INT32, n, [None, part_buf], null_count=0)
        off_arr = pa.Array.from_buffers(_T_INT64, n, [None, self.g_offset.finish(n * 8)],
                                        null_count=0)
        ts_arr = pa.Array.from_buffers(
            _T_TIMESTAMP, n,
            [None, self.g_ts.finish(n * 8)], null_count=0)
        tst_arr = pa.Array.from_buffers(_T_INT32, n, [None, self.g_ts_type.finish(n * 4)],
                                        null_count=0)
        cols = [key, value, topic_arr, part_arr, off_arr, ts_arr, tst_arr]
        if o.with_headers:
            nh = o.nh
            hk = pa.Array.from_buffers(
                _T_HEADER_KEY, nh,
                [None, self.g_hk_off.finish((nh + 1) * 4), self.g_hk_data.finish(o.hk_used)],
                null_count=0)
            hv = pa.Array.from_buffers(
                _T_HEADER_VALUE, nh,
                [self.g_hv_valid.finish(_bitmap_bytes(nh)) if o.hv_nulls else None,
                 self.g_hv_off.finish((nh + 1) * 4), self.g_hv_data.finish(o.hv_used)],
                null_count=o.hv_nulls)
            st = pa.Array.from_buffers(HEADER_TYPE, nh, [None], null_count=0,
                                       children=[hk, hv])
            hl = pa.Array.from_buffers(
                HEADERS_TYPE, n,
                [self.g_hl_valid.finish(bm) if o.hl_nulls else None,
                 self.g_hl_off.finish((n + 1) * 4)],
                null_count=o.hl_nulls, children=[st])
            cols.append(hl)
        return pa.RecordBatch.from_arrays(cols, schema=record_schema(o.with_headers))


cdef inline void _fill_repeat(uint8_t* dst, const uint8_t* unit, int64_t unit_len,
                              int64_t total) noexcept nogil:
    """dst[0:total] = unit repeated (total a multiple of unit_len), by doubling copies."""
    cdef int64_t filled = unit_len, k
    memcpy(dst, unit, <size_t>unit_len)
    while filled < total:
        k = min(filled, total - filled)
        memcpy(dst + filled, dst, <size_t>k)
        filled += k


cdef int _cb_grow_hslots(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hslots(need)


cdef int _cb_grow_hk(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hk(need)


cdef int _cb_grow_hv(void* owner, int64_t need) except -1:
    return (<_Sink>owner).grow_hv(need)


_FIELD_NAMES = ("length", "timestampDelta", "offsetDelta", "key length", "value length",
                "header count", "header key length", "header value length")


cdef str _record_reason(kl_err* e):
    """The message for an error code of kl_v2_records."""
    cdef int64_t i = e.rec
    c = e.code
    if c == KE_VARINT_TRUNC or c == KE_VARINT_LONG:
        what = _FIELD_NAMES[e.a] if 0 <= e.a < len(_FIELD_NAMES) else "?"
        if e.a >= 6:
            what = f"header {e.b} {what[7:]}"
        how = ("runs past the end of its record" if c == KE_VARINT_TRUNC
               else "is longer than Kafka allows or overflows")
        return f"record {i}: {what} varint {how} (payload byte {e.c})"
    if c == KE_REC_NEG:
        return f"record {i}: negative record length {e.a}"
    if c == KE_REC_PAST:
        return (f"record {i}: length {e.a} runs past the end of the batch payload "
                f"({e.b} bytes left)")
    if c == KE_REC_EMPTY:
        return f"record {i}: empty record (no attributes byte)"
    if c == KE_KEY_LEN:
        return f"record {i}: invalid key length {e.a}"
    if c == KE_KEY_PAST:
        return f"record {i}: key length {e.a} runs past the end of the record ({e.b} left)"
    if c == KE_VALUE_LEN:
        return f"record {i}: invalid value length {e.a}"
    if c == KE_VALUE_PAST:
        return (f"record {i}: value length {e.a} runs past the end of the record "
                f"({e.b} left)")
    if c == KE_HCOUNT:
        return f"record {i}: invalid header count {e.a} ({e.b} bytes left in the record)"
    if c == KE_HKEY:
        return (f"record {i}: header {e.b} key length {e.a} is negative or runs past the "
                f"end of the record ({e.c} left)")
    if c == KE_HVALUE:
        return (f"record {i}: header {e.b} value length {e.a} is invalid or runs past the "
                f"end of the record ({e.c} left)")
    if c == KE_REC_MISMATCH:
        return (f"record {i}: its length varint says {e.a} bytes but its fields take "
                f"{e.b}")
    if c == KE_LEFTOVER:
        return (f"{e.a} bytes left over after the {e.b} records the batch header "
                f"declares")
    if c == KE_TS_RANGE:
        return (f"record {i} (offset {e.b}): timestamp {e.a} ms is outside the range of "
                f"timestamp[us]")
    return f"record {i}: bad record (code {c})"
