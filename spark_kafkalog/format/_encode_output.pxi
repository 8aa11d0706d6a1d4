# Output buffers: the reused spare output and _RangeOut
# (Part of the _encode module: _encode.pyx includes it; not compiled alone.)

# ---- output buffers ----------------------------------------------------------------
# A large output is a fresh bytes object, and fresh memory costs a page fault per page
# (and zeroing) before the first byte is written: for an uncompressed encode that is
# as much as the writing. So the last large output is kept, and when its user has let
# go of it (we hold the only reference) the next encode writes into it again: no new
# pages. The memory kept is one output, at most _SPARE_LIMIT bytes.
cdef PyObject* _spare = NULL         # owned reference, or NULL
cdef int64_t _SPARE_MIN = 1 << 20
cdef int64_t _spare_limit = 256 << 20


def set_output_reuse_limit(int64_t nbytes):
    """Largest output (bytes) kept for reuse by the next encode once its user drops it;
    0 keeps none (and frees the one kept). Returns the previous limit."""
    global _spare_limit, _spare
    cdef int64_t old = _spare_limit
    if nbytes < 0:
        raise InvalidOptionError(f"the output reuse limit must be >= 0, not {nbytes}")
    _spare_limit = nbytes
    _drop_spare_if(nbytes < _SPARE_MIN)
    return old


def output_reuse_kept():
    """Bytes of the output kept for reuse (0: none)."""
    return 0 if _spare == NULL else PyBytes_GET_SIZE(<object>_spare)


cdef void _drop_spare_if(bint cond):
    global _spare
    cdef PyObject* p = _spare
    if cond and p != NULL:
        _spare = NULL
        Py_DECREF(<object>p)


cdef object _new_output(int64_t n):
    """A bytes object of ``n`` bytes for the caller to fill (private until returned):
    the kept spare when nothing else references it and its size fits, else fresh."""
    global _spare
    cdef PyObject* p = _spare
    cdef int64_t size
    if p != NULL and p.ob_refcnt == 1:
        size = PyBytes_GET_SIZE(<object>p)
        # within a quarter of the size: resizing keeps the pages it has (realloc of a
        # mapped block is mremap: shrinking frees the tail, growing adds fresh pages)
        if n >= _SPARE_MIN and 4 * (size - n if size > n else n - size) <= max(size, n) \
                and kl_bytes_reset_hash(p):
            _spare = NULL                  # p's reference is now ours alone
            if size != n:
                _PyBytes_Resize(&p, n)     # on failure p is freed, MemoryError raised
            res = <object>p                # a second reference ...
            Py_DECREF(res)                 # ... and p's dropped: res is the only one
            return res
    out = PyBytes_FromStringAndSize(NULL, n)
    if n >= (8 << 20):
        kl_hint_hugepages(PyBytes_AS_STRING(out), n)
    return out


cdef void _keep_output(object out):
    """Keep ``out`` (a large result about to be returned) as the spare."""
    global _spare
    cdef int64_t n = PyBytes_GET_SIZE(out)
    if n < _SPARE_MIN or n > _spare_limit:
        return
    _drop_spare_if(True)
    Py_INCREF(out)
    _spare = <PyObject*>out


@cython.final
cdef class _RangeOut:
    """One range's compressed output: a bytes object written in place (private until
    ``finish``), grown by copying when a batch does not fit, shrunk to size at the end."""
    cdef object buf
    cdef uint8_t* base
    cdef int64_t cap
    cdef int64_t used
    cdef public list index

    def __cinit__(self, int64_t cap):
        self.cap = max(cap, 64)
        self.buf = _new_output(self.cap)
        self.base = <uint8_t*>PyBytes_AS_STRING(self.buf)
        self.used = 0
        self.index = []

    cdef int64_t reserve(self, int64_t n) except -1:
        """Room for ``n`` more bytes; returns their position (``base`` may move)."""
        cdef int64_t at = self.used
        if at + n > self.cap:
            cap = max(2 * self.cap, at + n)
            buf = PyBytes_FromStringAndSize(NULL, cap)
            memcpy(PyBytes_AS_STRING(buf), self.base, at)
            self.buf = buf
            self.base = <uint8_t*>PyBytes_AS_STRING(buf)
            self.cap = cap
        self.used = at + n
        return at

    cdef object finish(self):
        """The written bytes as a bytes object of exactly that size (shrunk in place:
        the unused tail of a large buffer is given back without copying)."""
        cdef PyObject* o = <PyObject*>self.buf
        Py_INCREF(self.buf)       # o's reference: the only one once self.buf lets go
        self.buf = None
        self.base = NULL
        _PyBytes_Resize(&o, self.used)   # on failure o is freed and MemoryError raised
        res = <object>o           # a second reference ...
        Py_DECREF(res)            # ... and o's dropped: res is the only one
        _keep_output(res)
        return res
