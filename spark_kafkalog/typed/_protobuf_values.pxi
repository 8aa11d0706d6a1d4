# One value of a field into its column: scalars by wire type, defaults, well-known
# Timestamp/Duration and wrapper messages, dispatch on the field's type.
# (Part of the _protobuf module: _protobuf.pyx includes it; not compiled alone.)

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
