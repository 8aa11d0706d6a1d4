# Test hooks: the C varints, checksums and framings reached from Python
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

def decode_varint(data, Py_ssize_t pos=0):
    """Zig-zag varint (int32, at most 5 bytes) at ``pos``: returns (value, next pos).
    Raises CorruptRecordError when it runs past the end or is too long."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef int32_t v = 0
    cdef int e = 0
    cdef const uint8_t* q
    if pos < 0 or pos >= mv.shape[0]:
        raise CorruptRecordError(f"varint at {pos}: no bytes", position=pos)
    q = kl_varint(&mv[pos], &mv[0] + mv.shape[0], &v, &e)
    if q == NULL:
        raise CorruptRecordError("varint runs past the end" if e == 1
                                 else "varint too long (or overflows 32 bits)", position=pos)
    return v, <Py_ssize_t>(q - &mv[0])


def decode_varlong(data, Py_ssize_t pos=0):
    """Zig-zag varlong (int64, at most 10 bytes) at ``pos``: returns (value, next pos)."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef int64_t v = 0
    cdef int e = 0
    cdef const uint8_t* q
    if pos < 0 or pos >= mv.shape[0]:
        raise CorruptRecordError(f"varlong at {pos}: no bytes", position=pos)
    q = kl_varlong(&mv[pos], &mv[0] + mv.shape[0], &v, &e)
    if q == NULL:
        raise CorruptRecordError("varlong runs past the end" if e == 1
                                 else "varlong too long (or overflows 64 bits)", position=pos)
    return v, <Py_ssize_t>(q - &mv[0])


def crc32_ieee(data):
    """The kernel's CRC-32 (as zlib.crc32) — exposed for tests."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    if mv.shape[0] == 0:
        return 0
    return kl_crc32(&mv[0], <size_t>mv.shape[0])


def utf8_repair(data):
    """The kernel's UTF-8 check/repair of header keys: returns (was_valid, repaired bytes)
    — exposed for tests (compare with bytes.decode("utf-8", "replace"))."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    cdef size_t n = mv.shape[0], k
    if n == 0:
        return True, b""
    out = bytearray(3 * n)
    cdef uint8_t[::1] om = out
    valid = bool(kl_utf8_valid(&mv[0], n))
    k = kl_utf8_fix(&mv[0], n, &om[0])
    return valid, bytes(out[:k])


def crc32c(data, uint32_t value=0):
    """CRC-32C of a bytes-like object continuing from ``value``, as the kernel computes
    it (test hook: _checksums.h's code when the CPU allows, else the crc32c package)."""
    cdef const uint8_t[::1] mv = data
    return _crc32c_at(_ptr(mv), mv.shape[0], value)


def xxh32(data, uint32_t seed=0):
    """xxHash32 of a bytes-like object (the one implementation: the LZ4 frame checksums
    here and in the codec registry)."""
    cdef const uint8_t[::1] mv = memoryview(data).cast("B")
    return kl_xxh32(_ptr(mv), <size_t>mv.shape[0], seed)


def decompress_framed(int codec, data, int64_t max_size, int magic=2):
    """An lz4 (frames) or snappy (xerial or raw block) payload decompressed by the C
    framing (_framing.h; the codec registry's decoder for both): a bytearray of at most
    ``max_size`` bytes. ``magic`` is the message format the payload came in (0 admits
    Kafka's pre-0.10 lz4 header checksum). Raises CodecError with no position (the
    caller relocates it)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* src = _ptr(mv)
    cdef int64_t n = mv.shape[0], room, got
    cdef kl_ferr e
    cdef bytearray out
    cdef uint8_t* dst
    if not _is_framed(codec):
        raise UnsupportedFormatError(f"codec {codec} has no C framing (lz4 and snappy do)")
    if max_size < 0:
        raise InvalidOptionError(f"max_size must be non-negative, got {max_size}")
    with nogil:
        room = _framed_room(codec, src, n, magic, max_size, &e)
    if room < 0:
        raise CodecError(_framing_reason(codec, &e, max_size))
    out = PyByteArray_FromStringAndSize(NULL, room + KL_SLACK)
    dst = <uint8_t*>PyByteArray_AS_STRING(out)
    with nogil:
        got = _framed_decode(codec, src, n, magic, dst, room, &e)
    if got < 0:
        raise CodecError(_framing_reason(codec, &e, max_size))
    PyByteArray_Resize(out, got)
    return out


def zstd_frames(data):
    """The zstd frames of a payload as _framing.h walks them (skippable frames left out):
    a list of ``(start, end, content size or None, output bound)``; the bound comes from
    the block headers. Raises CodecError naming the payload byte (no position: the caller
    relocates it)."""
    cdef const uint8_t[::1] mv = data
    cdef const uint8_t* src = _ptr(mv)
    cdef size_t n = mv.shape[0], pos = 0
    cdef kl_zstd_frame f
    cdef kl_ferr e
    cdef int r
    if n == 0:
        e.code = KF_EMPTY
        e.pos = e.a = e.b = 0
        raise CodecError(_framing_reason(CODEC_ZSTD, &e, 0))
    frames = []
    while True:
        r = kl_zstd_next(src, n, &pos, &f, &e)
        if r == 0:
            return frames
        if r < 0:
            raise CodecError(_framing_reason(CODEC_ZSTD, &e, 0))
        frames.append((f.start, f.end, f.content_size if f.has_size else None, f.bound))


def framing_constants():
    """The framing constants _framing.h was compiled with (the encoder writes xerial
    headers from these, a test checks the lz4 ones)."""
    return {"XERIAL_MAGIC": PyBytes_FromStringAndSize(<char*>kl_xerial_magic, 8),
            "XERIAL_HEADER_SIZE": KL_XERIAL_HEADER_SIZE,
            "LZ4_MAGIC": <uint32_t>KL_LZ4_MAGIC, "ZSTD_MAGIC": <uint32_t>KL_ZSTD_MAGIC}
