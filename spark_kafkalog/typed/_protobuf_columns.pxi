# The column builders: growable validity/data/offsets buffers per plan column (col_t),
# nulls (struct children too), fixed-width and binary values, enum symbols.
# (Part of the _protobuf module: _protobuf.pyx includes it; not compiled alone.)

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
