# kcat's consumer output: -f format programs (format_records, with -s pack formats via
# _unpack) and -J objects (json_records).
# (Part of the _text module: _text.pyx includes it; not compiled alone.)

cdef uint64_t _be(const uint8_t *p, int n) noexcept nogil:
    cdef uint64_t v = 0
    cdef int k
    for k in range(n):
        v = (v << 8) | p[k]
    return v


cdef int _unpack(Out *o, const char *what, bytes fmt, const uint8_t *b, Py_ssize_t n,
                 list err) except -1:
    """kcat's ``-s`` pack format over one key or value; 1 and a message in ``err`` on a
    failure (output so far kept, as kcat's fprintf calls leave it). kcat 1.7 byte-swaps
    both endiannesses on a little-endian host, so every integer reads big-endian."""
    cdef const char *f = fmt
    cdef Py_ssize_t at = 0, remaining, width, k
    cdef char c
    cdef uint64_t v
    cdef const void *nul
    for k in range(len(fmt)):
        c = f[k]
        remaining = n - at
        if c == 32:
            _put(o, b" ", 1)
        elif c == 60 or c == 62:
            pass
        elif c in b"bBhHiIqQ":
            width = 1 if c in b"bB" else 2 if c in b"hH" else 4 if c in b"iI" else 8
            if width > remaining:
                err.append(f"{what.decode()} truncated, expected {width} bytes to unpack "
                           f"{chr(c)} but only {remaining} bytes remaining")
                return 1
            v = _be(b + at, width)
            at += width
            if c == 98:
                _put_int(o, <int8_t>v)
            elif c == 66:
                _put_int(o, <uint8_t>v)
            elif c == 104:
                _put_int(o, <int16_t>v)
            elif c == 72:
                _put_int(o, <uint16_t>v)
            elif c == 105:
                _put_int(o, <int32_t>v)
            elif c == 73:
                _put_int(o, <uint32_t>v)
            elif c == 113:
                _put_int(o, <int64_t>v)
            else:
                _put_uint(o, v)
        elif c == 99:
            if remaining < 1:
                err.append(f"{what.decode()} truncated, expected 1 bytes to unpack c but "
                           "only 0 bytes remaining")
                return 1
            _put(o, b + at, 1)
            at += 1
        elif c == 115:
            # fprintf's %.*s: up to the first NUL
            nul = memchr(b + at, 0, remaining)
            _put(o, b + at, (<const uint8_t *>nul - (b + at)) if nul != NULL else remaining)
            at = n
        elif c == 36:
            if remaining > 0:
                err.append(f"expected {what.decode()} end-of-input, but {remaining} bytes "
                           "remaining")
                return 1
    return 0


cdef int _put_uint(Out *o, uint64_t u) except -1:
    cdef char tmp[24]
    cdef int k = 24
    while True:
        k -= 1
        tmp[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    return _put(o, &tmp[k], 24 - k)


def format_records(batch, list program, bytes topic, int partition, *, bytes null_str=None,
                   bytes key_pack=None, bytes value_pack=None, bint stop_on_error=True):
    """kcat's ``-f`` output for every row of ``batch``: ``(bytes, rows done, errors)``.

    ``program``: ``(opcode, literal bytes)`` pairs (OP_*); ``null_str``: ``-Z``'s string;
    ``key_pack``/``value_pack``: ``-s`` formats. ``errors``: ``(row, message)`` of rows
    whose key or value did not unpack; with ``stop_on_error`` the first ends the batch
    (``rows done`` is then that row, its output so far included)."""
    cdef list keep = []
    cdef int64_t n = batch.num_rows, i
    cdef const int64_t *offsets = _i64(batch.column("offset"), keep) if n else NULL
    cdef const int64_t *stamps = NULL
    ts = batch.column("timestamp").cast(pa.int64()) if n else None
    if n:
        stamps = _i64(ts, keep)
    cdef Bin key, value
    cdef Headers hdr
    # zeroed: gcc cannot see that an empty batch (n == 0) never reads them, and warns
    memset(&key, 0, sizeof(Bin))
    memset(&value, 0, sizeof(Bin))
    memset(&hdr, 0, sizeof(Headers))
    cdef bint want_headers = any(op == OP_HEADERS for op, _ in program)
    if n:
        key = _bin(batch.column("key"), keep)
        value = _bin(batch.column("value"), keep)
        if want_headers:
            hdr = _headers(batch.column("headers"), keep)
    cdef int nops = len(program), k, op
    cdef int *ops = <int *>malloc(sizeof(int) * max(nops, 1))
    lits = [lit for _, lit in program]
    for k in range(nops):
        ops[k] = program[k][0]
    cdef Out o
    o.p = NULL
    o.n = o.cap = 0
    cdef Py_ssize_t ln, vlen
    cdef const uint8_t *p
    cdef const char *ctopic = topic
    cdef Py_ssize_t ntopic = len(topic)
    cdef const char *cnull = NULL
    cdef Py_ssize_t nnull = 0
    if null_str is not None:
        cnull = null_str
        nnull = len(null_str)
    cdef int64_t a, z, e
    cdef uint32_t be
    cdef uint8_t be4[4]
    cdef list errors = []
    cdef list err = []
    cdef bint failed
    cdef int64_t done = n
    try:
        _grow(&o, n * 32 + 64)
        for i in range(n):
            failed = False
            for k in range(nops):
                op = ops[k]
                if op == 0:
                    lit = lits[k]
                    _put(&o, <const char *>lit, len(lit))
                elif op == 1:
                    _put_int(&o, offsets[i])
                elif op == 2 or op == 4:
                    if op == 2:
                        p = _at(&key, i, &ln) if not _null(&key, i) else NULL
                    else:
                        p = _at(&value, i, &ln) if not _null(&value, i) else NULL
                    if p != NULL and ln > 0:
                        pack = key_pack if op == 2 else value_pack
                        if pack is not None:
                            if _unpack(&o, b"key" if op == 2 else b"value", pack, p, ln, err):
                                errors.append((i, err.pop()))
                                failed = True
                                break
                        else:
                            _put(&o, p, ln)
                    elif cnull != NULL:
                        _put(&o, cnull, nnull)
                elif op == 3:
                    _put_int(&o, -1 if _null(&key, i) else key.offs[key.off + i + 1]
                             - key.offs[key.off + i])
                elif op == 5 or op == 6:
                    vlen = -1 if _null(&value, i) else value.offs[value.off + i + 1] \
                        - value.offs[value.off + i]
                    if op == 5:
                        _put_int(&o, vlen)
                    else:
                        be = <uint32_t>vlen
                        be4[0] = be >> 24
                        be4[1] = (be >> 16) & 255
                        be4[2] = (be >> 8) & 255
                        be4[3] = be & 255
                        _put(&o, be4, 4)
                elif op == 7:
                    _put(&o, ctopic, ntopic)
                elif op == 8:
                    _put_int(&o, partition)
                elif op == 9:
                    _put_int(&o, _floor_ms(stamps[i]))
                elif op == 10:
                    if _headers_of(&hdr, i, &a, &z):
                        for e in range(a, z):
                            if e > a:
                                _put(&o, b",", 1)
                            p = _at(&hdr.keys, e, &ln)
                            _put(&o, p, ln)
                            _put(&o, b"=", 1)
                            if _null(&hdr.values, e):
                                _put(&o, b"NULL", 4)
                            else:
                                p = _at(&hdr.values, e, &ln)
                                _put(&o, p, ln)
            if failed and stop_on_error:
                done = i
                break
        return PyBytes_FromStringAndSize(o.p, o.n), done, errors
    finally:
        free(o.p)
        free(ops)


def json_records(batch, bytes topic, int partition, int broker, bytes delimiter):
    """kcat's ``-J`` objects for every row of ``batch``, each followed by ``delimiter``:
    ``{"topic":..,"partition":..,"offset":..,"tstype":..,"ts":..,"broker":..,
    "headers":[name,value,..] (only with headers),"key":..,"payload":..}``."""
    cdef list keep = []
    cdef int64_t n = batch.num_rows, i, a, z, e
    if n == 0:
        return b""
    cdef const int64_t *offsets = _i64(batch.column("offset"), keep)
    ts = batch.column("timestamp").cast(pa.int64())
    cdef const int64_t *stamps = _i64(ts, keep)
    cdef const int32_t *types = _i32(batch.column("timestampType"), keep)
    cdef Bin key = _bin(batch.column("key"), keep)
    cdef Bin value = _bin(batch.column("value"), keep)
    cdef Headers hdr = _headers(batch.column("headers"), keep)
    cdef Out o
    o.p = NULL
    o.n = o.cap = 0
    cdef Py_ssize_t ln
    cdef const uint8_t *p
    cdef bytes head = b'{"topic":'
    cdef bytes broker_text = b',"broker":' + str(broker).encode()
    cdef const char *cdelim = delimiter
    cdef Py_ssize_t ndelim = len(delimiter)
    try:
        _grow(&o, n * 128 + 64)
        for i in range(n):
            _put(&o, <const char *>head, len(head))
            _put_json_str(&o, topic, len(topic))
            _put(&o, b',"partition":', 13)
            _put_int(&o, partition)
            _put(&o, b',"offset":', 10)
            _put_int(&o, offsets[i])
            if types[i] == 1:
                _put(&o, b',"tstype":"logappend","ts":', 27)
            else:
                _put(&o, b',"tstype":"create","ts":', 24)
            _put_int(&o, _floor_ms(stamps[i]))
            _put(&o, <const char *>broker_text, len(broker_text))
            if _headers_of(&hdr, i, &a, &z):
                _put(&o, b',"headers":[', 12)
                for e in range(a, z):
                    if e > a:
                        _put(&o, b",", 1)
                    p = _at(&hdr.keys, e, &ln)
                    _put_json_str(&o, p, ln)
                    _put(&o, b",", 1)
                    if _null(&hdr.values, e):
                        _put(&o, b"null", 4)
                    else:
                        p = _at(&hdr.values, e, &ln)
                        _put_json_str(&o, p, ln)
                _put(&o, b"]", 1)
            _put(&o, b',"key":', 7)
            if _null(&key, i):
                _put(&o, b"null", 4)
            else:
                p = _at(&key, i, &ln)
                _put_json_str(&o, p, ln)
            _put(&o, b',"payload":', 11)
            if _null(&value, i):
                _put(&o, b"null", 4)
            else:
                p = _at(&value, i, &ln)
                _put_json_str(&o, p, ln)
            _put(&o, b"}", 1)
            _put(&o, cdelim, ndelim)
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        free(o.p)
