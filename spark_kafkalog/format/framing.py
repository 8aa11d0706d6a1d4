"""Kafka's framing of each codec's payload, walked with bounds, decompressed within a
budget: gzip members, xerial-framed snappy, LZ4 frames, zstd frames.

The codec registry (:mod:`spark_kafkalog.format.codecs`) imports the libraries and calls
these with them. LZ4 frames and snappy are first handed to the decode kernel's C
decoders (the same code decode uses per batch); what those decline is walked here.
``xxh32`` is the kernel's (``_checksums.h``), the package's one xxHash32.

Formats, as the Java client reads and writes them:

* gzip   -- ``java.util.zip.GZIPOutputStream``: one gzip member (RFC 1952). The reader
  (``GZIPInputStream``) also reads several concatenated members and ignores trailing
  bytes that do not start a new member; so do we.
* snappy -- snappy-java's ``SnappyOutputStream`` ("xerial" framing): an 8-byte magic
  ``\\x82SNAPPY\\x00``, two int32 (version 1, compatible version 1), then blocks of
  ``int32-BE compressed length + raw snappy block``, each holding at most 32 KiB of input.
  Only the magic is checked on read: some brokers/clients wrote the two ints
  little-endian. A payload without the magic is one raw snappy block (librdkafka, old
  clients). A raw snappy block starts with a varint of its uncompressed length, which
  we check against the budget before decompressing.
* lz4    -- Kafka's ``Lz4BlockOutputStream``: one LZ4 frame (format 1.5.1), FLG = version
  1 + independent blocks (no block or content checksum, no content size), BD = 64 KiB
  blocks, end mark, no content checksum. Up to Kafka 0.10 (KAFKA-1493, fixed for magic
  >= 1 by KAFKA-3160), the header checksum byte HC was computed over the 4-byte frame
  magic as well as the descriptor; magic 0 data therefore carries that broken HC. For
  ``magic=0`` we accept it by patching in the correct HC before decoding.
* zstd   -- zstd-jni's ``ZstdOutputStream``: one zstd frame, default level 3. The reader
  handles frames with and without a content size, skippable frames, and several frames
  back to back (zstd-jni's input stream reads them all).
"""
from __future__ import annotations

import struct
import zlib

from spark_kafkalog.errors import CodecError
from spark_kafkalog.format import _decode
from spark_kafkalog.format._decode import xxh32
from spark_kafkalog.format.wire import CODEC_LZ4, CODEC_SNAPPY

__all__ = ["XERIAL_BLOCK_SIZE", "XERIAL_MAGIC", "gunzip", "too_large",
           "unlz4", "unsnappy", "unzstd", "xerial_compress", "xxh32", "zstd_frame_end"]


def too_large(codec: str, max_size: int, what: str = "") -> CodecError:
    return CodecError(f"{codec} payload decompresses to more than the limit of "
                      f"{max_size} bytes{what}")


# ---- gzip ----------------------------------------------------------------------------
_GZIP_MAGIC = b"\x1f\x8b"
_GZIP_WBITS = 16 + zlib.MAX_WBITS        # gzip wrapper only, like GZIPInputStream


def gunzip(payload: memoryview, max_size: int):
    out: list[bytes] = []
    produced = 0
    rest = payload
    first = True
    # Each iteration consumes at least one member's header+trailer (>= 18 bytes) or
    # raises, so the loop is bounded by the payload length.
    while first or (len(rest) >= 2 and rest[:2] == _GZIP_MAGIC):
        first = False
        d = zlib.decompressobj(_GZIP_WBITS)
        try:
            # zlib grows its output in steps and stops at max_length: never past budget.
            chunk = d.decompress(rest, max_size - produced + 1)
        except zlib.error as err:
            raise CodecError(f"gzip payload is corrupt: {err}") from err
        produced += len(chunk)
        if produced > max_size:
            raise too_large("gzip", max_size)
        if not d.eof:
            raise CodecError("gzip payload is truncated (no end of stream / trailer)")
        out.append(chunk)
        rest = memoryview(d.unused_data) if d.unused_data else memoryview(b"")
    # Bytes after the last member that do not start a new member are ignored, as
    # java.util.zip.GZIPInputStream does.
    return out[0] if len(out) == 1 else b"".join(out)


# ---- snappy (raw and xerial framing) -----------------------------------------------------
#: snappy-java's stream magic; followed by int32 version and int32 compatible-version
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)        # 16
#: snappy-java SnappyOutputStream.DEFAULT_BLOCK_SIZE
XERIAL_BLOCK_SIZE = 32 * 1024
_BE_INT32 = struct.Struct(">i")


def _snappy_declared_length(block) -> int:
    """The uncompressed length a raw snappy block declares (its leading varint, at most
    5 bytes, < 2**32)."""
    value = 0
    shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value
        shift += 7
    raise CodecError("snappy block has a bad uncompressed-length header")


def unsnappy(cramjam, payload: memoryview, max_size: int):
    """A snappy payload (xerial-framed or one raw block) through the decode kernel's C
    decoder, or, when it declines, ``cramjam`` block by block with precise errors."""
    fast = _decode.fast_decompress(CODEC_SNAPPY, payload, max_size)
    if fast is not None:
        return fast
    if len(payload) >= len(XERIAL_MAGIC) and payload[:len(XERIAL_MAGIC)] == XERIAL_MAGIC:
        # Xerial framing. The version / compat ints are not checked (see module doc).
        if len(payload) < _XERIAL_HEADER_SIZE:
            raise CodecError("snappy (xerial) payload is truncated in its 16-byte header")
        blocks = []
        total = 0
        pos = _XERIAL_HEADER_SIZE
        end = len(payload)
        # First pass: frame the blocks and sum their declared sizes, so the output is
        # allocated once and a bomb is refused before any decompression.
        while pos < end:
            if end - pos < 4:
                raise CodecError(f"snappy (xerial) block length truncated at payload byte {pos}")
            (size,) = _BE_INT32.unpack_from(payload, pos)
            pos += 4
            if size < 0 or size > end - pos:
                raise CodecError(f"snappy (xerial) block of {size} bytes at payload byte "
                                 f"{pos - 4} runs past the end of the payload ({end} bytes)")
            block = payload[pos:pos + size]
            pos += size
            n = _snappy_declared_length(block)
            total += n
            if total > max_size:
                raise too_large("snappy", max_size)
            blocks.append((block, n))
        out = bytearray(total)
        view = memoryview(out)
        at = 0
        try:
            for block, n in blocks:
                got = cramjam.snappy.decompress_raw_into(block, view[at:at + n])
                if got != n:
                    raise CodecError(f"snappy block decompressed to {got} bytes, "
                                     f"declared {n}")
                at += n
        except cramjam.DecompressionError as err:
            raise CodecError(f"snappy (xerial) payload is corrupt: {err}") from err
        finally:
            view.release()
        return out
    n = _snappy_declared_length(payload)
    if n > max_size:
        raise too_large("snappy", max_size, f" (block declares {n})")
    out = bytearray(n)
    try:
        got = cramjam.snappy.decompress_raw_into(payload, out)
    except cramjam.DecompressionError as err:
        raise CodecError(f"snappy payload is corrupt: {err}") from err
    if got != n:
        raise CodecError(f"snappy block decompressed to {got} bytes, declared {n}")
    return out


def xerial_compress(cramjam, data) -> bytes:
    """snappy-java's SnappyOutputStream framing of ``data`` (32 KiB blocks)."""
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# ---- lz4 (frame format) --------------------------------------------------------------
_LZ4_MAGIC = 0x184D2204
_LZ4_MAGIC_BYTES = struct.pack("<I", _LZ4_MAGIC)
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50          # 0x184D2A50 .. 0x184D2A5F, lz4 and zstd alike


def _next_frame(payload, pos: int, end: int, codec: str) -> tuple[int, int | None]:
    """The magic of the frame at ``pos`` and, for a skippable frame (lz4 and zstd share
    the format: magic, little-endian length, bytes), the position after it, else None."""
    if end - pos < 4:
        raise CodecError(f"{end - pos} stray bytes after {codec} frame at payload byte {pos}")
    (m,) = _LE_U32.unpack_from(payload, pos)
    if m & _SKIPPABLE_MASK != _SKIPPABLE_MAGIC:
        return m, None
    if end - pos < 8:
        raise CodecError(f"skippable {codec} frame truncated at payload byte {pos}")
    (size,) = _LE_U32.unpack_from(payload, pos + 4)
    if pos + 8 + size > end:
        raise CodecError(f"skippable {codec} frame runs past the end of the payload")
    return m, pos + 8 + size
_LE_U32 = struct.Struct("<I")


def _lz4_frame_end(payload: memoryview, pos: int, magic: int):
    """Walk one LZ4 frame starting at ``pos``.

    Returns ``(end, bound, sized, patched_header)``: the frame's end position, an upper
    bound of its decompressed size (the declared content size when the frame has one,
    ``sized`` then true: it is checked against the blocks' capacity, so it is never
    larger than that), and for a magic-0 frame carrying Kafka's broken header
    checksum the corrected header bytes (else None). Raises CodecError on a frame that
    does not fit the payload. Every step advances ``pos``, so this is bounded by the
    payload length."""
    end = len(payload)
    start = pos
    if end - pos < 7:
        raise CodecError(f"lz4 frame header truncated at payload byte {pos}")
    flg = payload[pos + 4]
    bd = payload[pos + 5]
    if flg >> 6 != 1:
        raise CodecError(f"lz4 frame at payload byte {pos} has unsupported version "
                         f"{flg >> 6}")
    block_checksum = bool(flg & 0x10)
    content_size_flag = bool(flg & 0x08)
    content_checksum = bool(flg & 0x04)
    dict_id = bool(flg & 0x01)
    block_max_id = (bd >> 4) & 0x07
    if block_max_id < 4:
        raise CodecError(f"lz4 frame at payload byte {pos} has invalid block size id "
                         f"{block_max_id}")
    block_max = 1 << (2 * block_max_id + 8)
    desc_len = 2 + (8 if content_size_flag else 0) + (4 if dict_id else 0)
    hc_pos = pos + 4 + desc_len
    if hc_pos >= end:
        raise CodecError(f"lz4 frame header truncated at payload byte {pos}")
    patched = None
    if magic == 0:
        hc = payload[hc_pos]
        correct = (xxh32(payload[pos + 4:hc_pos]) >> 8) & 0xFF
        if hc != correct:
            # Pre-0.10 Kafka hashed the 4 magic bytes too (KAFKA-1493). If that is what
            # this byte is, substitute the correct one; anything else is left for the
            # lz4 library to reject.
            broken = (xxh32(payload[pos:hc_pos]) >> 8) & 0xFF
            if hc == broken:
                patched = bytes(payload[pos:hc_pos]) + bytes((correct,))
    declared = None
    if content_size_flag:
        (declared,) = struct.unpack_from("<Q", payload, pos + 6)
    pos = hc_pos + 1
    computed = 0
    while True:
        if end - pos < 4:
            raise CodecError(f"lz4 frame starting at payload byte {start} is truncated "
                             f"(no end mark)")
        (word,) = _LE_U32.unpack_from(payload, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        if size > block_max:
            raise CodecError(f"lz4 block of {size} bytes at payload byte {pos - 4} exceeds "
                             f"the frame's block size {block_max}")
        pos += size + (4 if block_checksum else 0)
        if pos > end:
            raise CodecError(f"lz4 block at payload byte {pos - size} runs past the end of "
                             f"the payload")
        computed += size if word & 0x80000000 else block_max
    if content_checksum:
        pos += 4
        if pos > end:
            raise CodecError(f"lz4 frame starting at payload byte {start} is truncated "
                             f"(content checksum)")
    if declared is not None and declared > computed:
        # A frame cannot hold more than its blocks can: the library would size its
        # output from this field, so it must not reach the library unchecked.
        raise CodecError(f"lz4 frame at payload byte {start} declares a content size of "
                         f"{declared} bytes, more than its blocks can hold ({computed})")
    return pos, computed if declared is None else declared, declared is not None, patched


def unlz4(lz4f, payload: memoryview, max_size: int, magic: int):
    """LZ4 frames through the decode kernel's C decoder, or, when it declines (skippable
    frames, Kafka's pre-0.10 header checksum, a budget it cannot prove), frame by frame
    through ``lz4f`` (lz4.frame) with precise errors."""
    fast = _decode.fast_decompress(CODEC_LZ4, payload, max_size)
    if fast is not None:
        return fast
    end = len(payload)
    if end == 0:
        raise CodecError("lz4 payload is empty")
    out: list = []
    produced = 0
    pos = 0
    while pos < end:
        m, after = _next_frame(payload, pos, end, "lz4")
        if after is not None:
            pos = after
            continue
        if m != _LZ4_MAGIC:
            raise CodecError(f"not an lz4 frame at payload byte {pos} "
                             f"(magic {m:#010x}, expected {_LZ4_MAGIC:#010x})")
        frame_end, bound, sized, patched = _lz4_frame_end(payload, pos, magic)
        frame = payload[pos:frame_end]
        if patched is not None:
            frame = patched + bytes(payload[pos + len(patched):frame_end])
        remaining = max_size - produced
        if sized and bound > remaining:
            raise too_large("lz4", max_size, f" (frame declares {bound})")
        try:
            if bound <= remaining:
                chunk = lz4f.decompress(frame)
            else:
                # The frame could exceed the budget: let the library stop at budget + 1.
                d = lz4f.LZ4FrameDecompressor()
                chunk = d.decompress(frame, max_length=remaining + 1)
                if len(chunk) > remaining:
                    raise too_large("lz4", max_size)
                if not d.eof:
                    raise CodecError("lz4 frame is truncated")
        except RuntimeError as err:           # lz4 raises RuntimeError on bad data
            raise CodecError(f"lz4 payload is corrupt: {err}") from err
        produced += len(chunk)
        if produced > max_size:
            raise too_large("lz4", max_size)
        out.append(chunk)
        pos = frame_end
    if not out:
        return b""
    return out[0] if len(out) == 1 else b"".join(out)


# ---- zstd ------------------------------------------------------------------------------
_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024
_ZSTD_UNKNOWN_SIZE = 2 ** 64 - 1
_ZSTD_STREAM_CHUNK = 1 << 20
_ZSTD_MAGIC_BYTES = struct.pack("<I", _ZSTD_MAGIC)
_ZSTD_DICT_ID_SIZE = (0, 1, 2, 4)
_ZSTD_FCS_SIZE = (0, 2, 4, 8)       # flag 0 means 1 byte when single-segment


def zstd_frame_end(payload: memoryview, pos: int):
    """Walk one zstd frame at ``pos`` (RFC 8878 section 3.1.1): returns ``(end,
    content_size or None, bound)`` where bound is an upper bound of the decompressed
    size from the block headers. Every step advances ``pos``: bounded by the payload."""
    end = len(payload)
    start = pos
    if end - pos < 6:
        raise CodecError(f"zstd frame header truncated at payload byte {pos}")
    fhd = payload[pos + 4]
    if fhd & 0x08:
        raise CodecError(f"zstd frame at payload byte {pos} sets a reserved header bit")
    single_segment = fhd & 0x20
    fcs_flag = fhd >> 6
    fcs_size = _ZSTD_FCS_SIZE[fcs_flag] or (1 if single_segment else 0)
    pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZE[fhd & 0x03]
    if pos + fcs_size > end:
        raise CodecError(f"zstd frame header truncated at payload byte {start}")
    content_size = None
    if fcs_size:
        content_size = int.from_bytes(payload[pos:pos + fcs_size], "little")
        if fcs_size == 2:
            content_size += 256
    pos += fcs_size
    bound = 0
    block_max = _ZSTD_BLOCK_MAX
    while True:
        if end - pos < 3:
            raise CodecError(f"zstd frame starting at payload byte {start} is truncated")
        h = payload[pos] | (payload[pos + 1] << 8) | (payload[pos + 2] << 16)
        btype = (h >> 1) & 3
        size = h >> 3
        if btype == 3:
            raise CodecError(f"zstd block with reserved type at payload byte {pos}")
        if size > block_max:
            raise CodecError(f"zstd block of {size} bytes at payload byte {pos} exceeds "
                             f"the 128 KiB limit")
        pos += 3
        if btype == 1:               # RLE: one byte repeated `size` times
            pos += 1
            bound += size
        elif btype == 0:             # raw
            pos += size
            bound += size
        else:                        # compressed: at most one full block out
            pos += size
            bound += block_max
        if pos > end:
            raise CodecError("zstd block runs past the end of the payload")
        if h & 1:
            break
    if fhd & 0x04:                   # content checksum
        pos += 4
        if pos > end:
            raise CodecError(f"zstd frame starting at payload byte {start} is truncated "
                             f"(checksum)")
    return pos, content_size, bound


def unzstd(zstd, d, payload: memoryview, max_size: int):
    """zstd frames with ``d``, the calling thread's ``zstd.ZstdDecompressor``."""
    end = len(payload)
    if end == 0:
        raise CodecError("zstd payload is empty")
    if end >= 6 and payload[:4] == _ZSTD_MAGIC_BYTES:
        # Fast path: one frame that declares its size (librdkafka, most non-Java
        # clients, our own encoder). The library checks the output against the
        # declared size and refuses trailing bytes; several frames (or any other
        # problem) take the general path below, which reports errors precisely.
        try:
            size = zstd.get_frame_parameters(payload).content_size
        except zstd.ZstdError:
            size = _ZSTD_UNKNOWN_SIZE
        if size != _ZSTD_UNKNOWN_SIZE:
            if size > max_size:
                raise too_large("zstd", max_size, f" (frame declares {size})")
            try:
                return d.decompress(payload, allow_extra_data=False)
            except zstd.ZstdError:
                pass
    out: list = []
    produced = 0
    pos = 0
    while pos < end:
        m, after = _next_frame(payload, pos, end, "zstd")
        if after is not None:
            pos = after
            continue
        if m != _ZSTD_MAGIC:
            raise CodecError(f"not a zstd frame at payload byte {pos} (magic {m:#010x})")
        frame_end, content_size, bound = zstd_frame_end(payload, pos)
        frame = payload[pos:frame_end]
        remaining = max_size - produced
        try:
            if content_size is not None:
                if content_size > remaining:
                    raise too_large("zstd", max_size, f" (frame declares {content_size})")
                chunk = d.decompress(frame)
            elif bound <= remaining:
                chunk = d.decompress(frame, max_output_size=bound)
            else:
                chunk = _unzstd_stream(d, frame, remaining, max_size)
        except zstd.ZstdError as err:
            raise CodecError(f"zstd payload is corrupt: {err}") from err
        produced += len(chunk)
        if produced > max_size:
            raise too_large("zstd", max_size)
        out.append(chunk)
        pos = frame_end
    if not out:
        return b""
    return out[0] if len(out) == 1 else b"".join(out)


def _unzstd_stream(d, frame, remaining: int, max_size: int):
    """Decompress one frame whose size is not known up front, in chunks, stopping once
    the output passes ``remaining``."""
    parts = []
    got = 0
    with d.stream_reader(frame, read_across_frames=False) as r:
        while True:
            chunk = r.read(min(_ZSTD_STREAM_CHUNK, remaining - got + 1))
            if not chunk:
                break
            got += len(chunk)
            if got > remaining:
                raise too_large("zstd", max_size)
            parts.append(chunk)
    return b"".join(parts)

