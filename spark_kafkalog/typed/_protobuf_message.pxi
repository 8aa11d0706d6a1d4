# The per-message walk: dec_msg's two passes (where is each reader field, then the
# fields in the reader's order), merged message occurrences, repeated fields and map
# entries.
# (Part of the _protobuf module: _protobuf.pyx includes it; not compiled alone.)

cdef int merged(ctx_t *x, const fld_t *f, int64_t ci, const uint8_t *q,
                const uint8_t *end) noexcept nogil:
    """A singular message field that occurs more than once: protobuf merges the
    occurrences, which is parsing their bytes one after the other."""
    cdef int64_t total = 0
    cdef const uint8_t *s = q
    cdef uint64_t number
    cdef int wt, rc
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef uint8_t *buf
    while s < end:
        if next_field(x, &s, end, &number, &wt, &v, &ve):
            return -1
        if number == <uint64_t>f.number and wt == 2:
            total += ve - v
    buf = <uint8_t *>malloc(total + 1)
    if buf == NULL:
        return fail(x, E_NOMEM, q, 0)
    total = 0
    s = q
    while s < end:
        next_field(x, &s, end, &number, &wt, &v, &ve)
        if number == <uint64_t>f.number and wt == 2:
            memcpy(buf + total, v, ve - v)
            total += ve - v
    rc = put_value(x, f, ci, buf, buf + total, 0)
    if rc < 0 and x.err_at >= buf and x.err_at <= buf + total:
        x.err_at = q          # a position in the merged copy means nothing to the caller
    free(buf)
    return rc


cdef int put_entry(ctx_t *x, const fld_t *f, const uint8_t *v,
                   const uint8_t *ve) noexcept nogil:
    """One map entry; an entry whose value is a closed enum's unknown number is left out,
    as protobuf leaves it (dec_msg returns 2 after writing the key: rolled back here)."""
    cdef col_t *e = &x.cols[f.elem]
    cdef col_t *k
    cdef int64_t saved[6]
    cdef int64_t j, nk = e.nkids if e.nkids < 2 else 2
    cdef int rc
    saved[0] = e.n
    for j in range(nk):
        k = &x.cols[x.kids[e.kid0 + j]]
        saved[1 + 2 * j] = k.n
        saved[2 + 2 * j] = k.dlen
    rc = dec_msg(x, f.sub, v, ve)
    if rc == 2:
        e.n = saved[0]
        for j in range(nk):
            k = &x.cols[x.kids[e.kid0 + j]]
            k.n = saved[1 + 2 * j]
            k.dlen = saved[2 + 2 * j]
        return 0
    return rc


cdef int put_repeated(ctx_t *x, const fld_t *f, const uint8_t *q,
                      const uint8_t *end) noexcept nogil:
    """Every element of repeated field ``f`` from its first occurrence at ``q`` on, packed
    or not, into its list column."""
    cdef col_t *lst = &x.cols[f.col]
    cdef uint64_t number
    cdef int wt, nat = natural_wt(f.ftype), w
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef const uint8_t *e
    cdef uint64_t u
    if q != NULL:
        while q < end:
            if next_field(x, &q, end, &number, &wt, &v, &ve):
                return -1
            if number != <uint64_t>f.number:
                continue
            if wt == nat:
                if f.ftype == T_MAP:
                    if put_entry(x, f, v, ve) < 0:
                        return -1
                elif put_value(x, f, f.elem, v, ve, 0) < 0:
                    return -1
            elif wt == 2 and nat != 2:        # packed scalars
                w = 8 if nat == 1 else (4 if nat == 5 else 0)
                if w and (ve - v) % w:
                    return fail(x, E_PACKED, v, ve - v)
                while v < ve:
                    if w:
                        e = v + w
                    else:
                        e = v
                        if rd_varint(x, &e, ve, &u):
                            return -1
                    if put_scalar(x, f, f.elem, v, e, 0) < 0:
                        return -1
                    v = e
    if lst.n >= lst.cap and col_reserve(x, lst, 1):
        return -1
    lst.valid[lst.n] = 1
    lst.offs[lst.n + 1] = <int32_t>x.cols[f.elem].n
    lst.n += 1
    if x.cols[f.elem].n > BIN_LIMIT:
        return fail(x, E_TOOBIG, NULL, x.cols[f.elem].n)
    return 0


cdef int dec_msg(ctx_t *x, int64_t mi, const uint8_t *p, const uint8_t *end) noexcept nogil:
    """Decode the message ``p``..``end`` (NULL: an empty message) with plan ``mi`` and
    append one valid struct to its column."""
    cdef const msg_t *m = &x.msgs[mi]
    cdef slot_t *slots = x.slots + m.f0
    cdef int64_t *win = x.oneof_win + m.oneof0
    cdef const fld_t *f
    cdef const uint8_t *q = p
    cdef const uint8_t *tag_at
    cdef const uint8_t *v
    cdef const uint8_t *ve
    cdef uint64_t number
    cdef int wt, nat, rc
    cdef int64_t k, fi
    cdef col_t *sc = &x.cols[m.col]
    for k in range(m.nf):
        slots[k].cnt = 0
    for k in range(m.noneof):
        win[k] = -1
    # pass 1: where is each reader field
    if p != NULL:
        while q < end:
            tag_at = q
            if next_field(x, &q, end, &number, &wt, &v, &ve):
                return -1
            if number < <uint64_t>m.lutn:
                fi = x.lut[m.lut0 + number]
            else:
                fi = -1
                for k in range(m.nf):
                    if x.flds[m.f0 + k].number == <int64_t>number:
                        fi = k
                        break
            if fi < 0:
                continue                 # unknown to the reader: skipped
            f = &x.flds[m.f0 + fi]
            nat = natural_wt(f.ftype)
            if wt != nat and not (wt == 2 and f.repeated and nat != 2):
                continue                 # a wire type that does not fit: an unknown field
            if f.oneof >= 0 and win[f.oneof] != fi:
                # another member was set since: protobuf cleared this one, so a message
                # member merges only its occurrences from here on
                slots[fi].cnt = 0
            if slots[fi].cnt == 0:
                slots[fi].first = tag_at
            slots[fi].cnt += 1
            slots[fi].last = v
            slots[fi].last_end = ve
            slots[fi].last_wt = wt
            if f.oneof >= 0:
                win[f.oneof] = fi
    # pass 2: the fields in the reader's order
    if sc.n >= sc.cap and col_reserve(x, sc, 1):
        return -1
    sc.valid[sc.n] = 1
    sc.n += 1
    for k in range(m.nf):
        f = &x.flds[m.f0 + k]
        if f.repeated:
            if put_repeated(x, f, slots[k].first if slots[k].cnt else NULL, end):
                return -1
            continue
        if f.oneof >= 0 and win[f.oneof] != k:
            rc = col_null(x, f.col)
        elif slots[k].cnt == 0:
            if f.presence == P_REQUIRED:
                return fail(x, E_REQUIRED, end, f.number)
            if f.presence == P_ALWAYS or f.has_default:
                rc = put_default(x, f, f.col)
            else:
                rc = col_null(x, f.col)
        elif slots[k].cnt > 1 and (f.ftype == T_MESSAGE or f.ftype == T_TIMESTAMP or
                                   f.ftype == T_DURATION or f.ftype == T_WRAPPER):
            rc = merged(x, f, f.col, slots[k].first, end)
        else:
            rc = put_value(x, f, f.col, slots[k].last, slots[k].last_end,
                           f.presence == P_IMPLICIT)
            if rc == 1:                  # closed enum, unknown number: as if absent
                if f.presence == P_REQUIRED:
                    return fail(x, E_REQUIRED, end, f.number)
                if f.presence == P_ALWAYS:
                    # only a map entry's value gets here (a closed enum is never a proto3
                    # implicit field): protobuf keeps the whole entry as an unknown field
                    return 2
                rc = put_default(x, f, f.col) if f.has_default else col_null(x, f.col)
        if rc < 0:
            return -1
    return 0
