# The wire reader: varints, tags and value spans, groups skipped; an error is recorded
# once per value in the ctx_t (fail) with its byte and detail.
# (Part of the _protobuf module: _protobuf.pyx includes it; not compiled alone.)

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
