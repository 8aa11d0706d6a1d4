# Codecs: the registry hand-over, the C framings of _framing.h, zstd
# A new codec's C goes in _framing.h; its dispatch here (_is_framed/_framed_*).
# (Part of the _decode module: _decode.pyx includes it; not compiled alone.)

# The codec registry (codecs.decompress, codecs.zstd_decompress_fn), handed over by
# decode.py through set_codec_registry: the registry uses this kernel's C decoders, so
# the kernel does not import it back.
cdef object _decompress_fn = None
cdef object _zstd_fn_factory = None


def set_codec_registry(decompress, zstd_decompress_fn):
    """Give the kernel the registry's ``decompress(codec, payload, *, magic, max_size)``
    and ``zstd_decompress_fn()`` (decode.py does this on import)."""
    global _decompress_fn, _zstd_fn_factory
    _decompress_fn = decompress
    _zstd_fn_factory = zstd_decompress_fn


cdef object _get_decompress():
    if _decompress_fn is None:
        raise InternalError("the decode kernel has no codec registry: import "
                            "spark_kafkalog.format.decode, which hands it over")
    return _decompress_fn


cdef object _decompress(int codec, object payload, int magic, int64_t max_size,
                        int64_t where_pos, int64_t where_off):
    """One batch's payload through the codec registry; errors relocated to the batch."""
    name = CODEC_NAMES.get(codec, str(codec))
    try:
        return _get_decompress()(codec, payload, magic=magic, max_size=max_size)
    except KafkaLogError as err:
        raise type(err)(f"magic {magic} {name} batch: {err.reason}", position=where_pos,
                        offset=where_off) from err
    except Exception as err:  # a codec library's own error type: the payload is corrupt
        raise CodecError(f"magic {magic} {name} batch does not decompress: {err!r}",
                         position=where_pos, offset=where_off) from err


cdef const uint8_t _EMPTY[1]


cdef inline uint32_t _crc32c_at(const uint8_t* p, int64_t n,
                                uint32_t value=0) except? 0xFFFFFFFF:
    """CRC-32C of p[0:n] continuing from ``value``: _checksums.h's when the CPU allows,
    else the crc32c package through a memoryview made straight from the pointer."""
    if kl_crc32c_hw:
        return kl_crc32c(value, p, <size_t>n)
    return _crc32c(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ), value)


cdef str _framing_reason(int codec, kl_ferr* e, int64_t max_size):
    """What a _framing.h error code says, as text (the caller adds where)."""
    cdef int c = e.code
    cdef uint64_t at = e.pos, a = e.a, b = e.b
    name = CODEC_NAMES[codec]
    if c == KF_TOO_LARGE:
        what = (f" (frame at payload byte {at} declares {a})" if codec == CODEC_LZ4 and a
                else f" (declared: at least {a} bytes)" if a else "")
        return f"{name} payload decompresses to more than the limit of {max_size} bytes{what}"
    if c == KF_EMPTY:
        return f"{name} payload is empty"
    if c == KF_STRAY:
        return (f"{name} payload of {a} bytes is too short for a frame" if at == 0 else
                f"{a} stray bytes after the {name} frame ending at payload byte {at}")
    if c == KF_SKIP_TRUNC:
        return f"skippable {name} frame truncated at payload byte {at}"
    if c == KF_SKIP_PAST:
        return (f"skippable {name} frame of {a} bytes at payload byte {at} runs past the "
                f"end of the payload")
    if c == KF_LZ4_MAGIC:
        return (f"not an lz4 frame at payload byte {at} (magic {a:#010x}, expected "
                f"{<uint32_t>KL_LZ4_MAGIC:#010x})")
    if c == KF_LZ4_HEADER_TRUNC:
        return f"lz4 frame header truncated at payload byte {at}"
    if c == KF_LZ4_VERSION:
        return f"lz4 frame at payload byte {at} has unsupported version {a}"
    if c == KF_LZ4_RESERVED:
        return f"lz4 frame at payload byte {at} sets reserved bits (FLG {a:#04x}, BD {b:#04x})"
    if c == KF_LZ4_DICT:
        return (f"lz4 frame at payload byte {at} needs a dictionary (dictionary id set; "
                f"Kafka never writes one)")
    if c == KF_LZ4_BLOCK_ID:
        return f"lz4 frame at payload byte {at} has invalid block size id {a}"
    if c == KF_LZ4_HC:
        return (f"lz4 frame at payload byte {at} has a bad header checksum (stored {a:#04x}, "
                f"computed {b:#04x})")
    if c == KF_LZ4_NO_END:
        return f"lz4 frame starting at payload byte {at} is truncated (no end mark)"
    if c == KF_LZ4_BLOCK_BIG:
        return (f"lz4 block of {a} bytes at payload byte {at} exceeds the frame's block "
                f"size {b}")
    if c == KF_LZ4_BLOCK_PAST:
        return f"lz4 block of {a} bytes at payload byte {at} runs past the end of the payload"
    if c == KF_LZ4_CSUM_TRUNC:
        return f"lz4 frame starting at payload byte {at} is truncated (content checksum)"
    if c == KF_LZ4_SIZE_CAP:
        return (f"lz4 frame at payload byte {at} declares a content size of {a} bytes, more "
                f"than its blocks can hold ({b})")
    if c == KF_LZ4_BLOCK_SUM:
        return f"lz4 block at payload byte {at} does not match its checksum (xxHash32)"
    if c == KF_LZ4_BLOCK_BAD:
        return f"lz4 block at payload byte {at} is corrupt"
    if c == KF_LZ4_BLOCK_OVER:
        return (f"lz4 block at payload byte {at} decompresses to more than the frame's "
                f"block size {b}")
    if c == KF_LZ4_SIZE_MISMATCH:
        held = "more" if b == <uint64_t>-1 else str(b)
        return (f"lz4 frame at payload byte {at} declares a content size of {a} bytes but "
                f"holds {held}")
    if c == KF_LZ4_CSUM:
        return f"lz4 frame at payload byte {at} does not match its content checksum (xxHash32)"
    if c == KF_SNAPPY_HEADER_TRUNC:
        return f"snappy (xerial) payload is truncated in its {KL_XERIAL_HEADER_SIZE}-byte header"
    if c == KF_SNAPPY_LEN_TRUNC:
        return f"snappy (xerial) block length truncated at payload byte {at}"
    if c == KF_SNAPPY_BLOCK_PAST:
        return (f"snappy (xerial) block of {a} bytes at payload byte {at} runs past the end "
                f"of the payload")
    if c == KF_SNAPPY_PREAMBLE:
        return f"snappy block at payload byte {at} has a bad uncompressed-length header"
    if c == KF_SNAPPY_DECLARED:
        return (f"snappy block at payload byte {at} declares {a} bytes, more than its {b} "
                f"bytes can hold")
    if c == KF_SNAPPY_BLOCK_BAD:
        return f"snappy block at payload byte {at} is corrupt (it declares {a} bytes)"
    if c == KF_ZSTD_MAGIC:
        return f"not a zstd frame at payload byte {at} (magic {a:#010x})"
    if c == KF_ZSTD_HEADER_TRUNC:
        return f"zstd frame header truncated at payload byte {at}"
    if c == KF_ZSTD_RESERVED:
        return f"zstd frame at payload byte {at} sets a reserved header bit"
    if c == KF_ZSTD_TRUNC:
        return f"zstd frame starting at payload byte {at} is truncated"
    if c == KF_ZSTD_BLOCK_TYPE:
        return f"zstd block with reserved type at payload byte {at}"
    if c == KF_ZSTD_BLOCK_BIG:
        return f"zstd block of {a} bytes at payload byte {at} exceeds the 128 KiB limit"
    if c == KF_ZSTD_BLOCK_PAST:
        return f"zstd block at payload byte {at} runs past the end of the payload"
    if c == KF_ZSTD_CSUM_TRUNC:
        return f"zstd frame starting at payload byte {at} is truncated (checksum)"
    raise InternalError(f"unknown framing error code {c}")


cdef inline bint _is_framed(int codec) noexcept nogil:
    """Is ``codec``'s framing walked and decoded in C (_framing.h)?"""
    return codec == CODEC_LZ4 or codec == CODEC_SNAPPY


cdef int64_t _framed_room(int codec, const uint8_t* src, int64_t n, int magic,
                          int64_t max_size, kl_ferr* e) noexcept nogil:
    """The output room (bytes, <= max_size) to decode an lz4 / snappy payload into, or -1
    with ``e`` set (malformed, or the sizes it declares past the budget)."""
    cdef uint64_t bound = 0
    if codec == CODEC_LZ4:
        if kl_lz4_walk(src, <size_t>n, magic, &bound, e):
            return -1
        # past the budget, decoding stops with KF_TOO_LARGE once the output passes it
        return <int64_t>bound if bound < <uint64_t>max_size else max_size
    if kl_snappy_walk(src, <size_t>n, <uint64_t>max_size, &bound, e):
        return -1
    return <int64_t>bound


cdef int64_t _framed_decode(int codec, const uint8_t* src, int64_t n, int magic,
                            uint8_t* dst, int64_t room, kl_ferr* e) noexcept nogil:
    """Decode a payload _framed_room accepted into dst (room + KL_SLACK bytes): the output
    size, or -1 with ``e`` set."""
    if codec == CODEC_LZ4:
        return kl_lz4_decode(src, <size_t>n, magic, dst, <size_t>room, e)
    if kl_snappy_decode(src, <size_t>n, dst, e):
        return -1
    return room


cdef int _framed(_Sink s, int codec, const uint8_t* src, int64_t n, int magic,
                 int64_t max_size, const uint8_t** out, int64_t* out_len) except -1:
    """Decompress an lz4 (frames) or snappy (xerial or raw) payload in C into the sink's
    scratch buffer: no Python call, no allocation per batch. Returns 1 when done, 0 for
    another codec; a payload that does not decode raises CodecError at the batch."""
    cdef kl_ferr e
    cdef int64_t room, got
    if not _is_framed(codec):
        return 0
    room = _framed_room(codec, src, n, magic, max_size, &e)
    if room >= 0:
        s.ensure_scratch(room + KL_SLACK)
        got = _framed_decode(codec, src, n, magic, s.scratch, room, &e)
        if got >= 0:
            out[0] = s.scratch
            out_len[0] = got
            return 1
    raise s.error(f"magic {magic} {CODEC_NAMES[codec]} batch: "
                  f"{_framing_reason(codec, &e, max_size)}", CodecError)


cdef object _fast_zstd(_Sink s, const uint8_t* src, int64_t n, int64_t max_size):
    """One zstd frame that declares its content size (within ``max_size``) and fills the
    payload exactly, through zstandard with no registry glue: the decompressed bytes, or
    None when the registry must handle the payload (it then decodes it or raises the
    error that says what is wrong)."""
    cdef int64_t size = kl_zstd_sized_frame(src, <size_t>n)
    if size < 0 or size > max_size:
        return None
    if s.zstd_decompress is None:
        try:
            _get_decompress()
            s.zstd_decompress = _zstd_fn_factory()
        except MissingCodecError:
            s.zstd_decompress = False
    if s.zstd_decompress is False:
        return None
    try:
        raw = s.zstd_decompress(PyMemoryView_FromMemory(<char*>src, n, PyBUF_READ))
    except Exception:      # the library's own error: let the registry name the problem
        return None
    if len(raw) != size:
        return None
    return raw


cdef inline const uint8_t* _ptr(const uint8_t[::1] mv) noexcept:
    """Address of a (possibly empty) contiguous byte view."""
    return &mv[0] if mv.shape[0] else _EMPTY
