"""Kafka's framing of the codecs decoded in Python, walked with bounds, decompressed
within a budget: gzip members and zstd frames; and the xerial framing snappy is
written in. LZ4 frames and snappy (xerial or raw) are read in C: ``_framing.h``, through
the decode kernel's ``decompress_framed`` (the registry calls it too). ``xxh32`` is the
kernel's (``_checksums.h``), the package's one xxHash32.

* gzip   -- ``java.util.zip.GZIPOutputStream``: one gzip member (RFC 1952). The reader
  (``GZIPInputStream``) also reads several concatenated members and ignores trailing
  bytes that do not start a new member; so do we.
* snappy -- written as snappy-java's ``SnappyOutputStream`` does: the header
  (``\x82SNAPPY\x00``, int32 version 1, int32 compatible version 1; the constants are
  ``_framing.h``'s) then blocks of ``int32-BE compressed length + raw snappy block``,
  each holding at most 32 KiB of input.
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

__all__ = ["XERIAL_BLOCK_SIZE", "XERIAL_MAGIC", "gunzip", "too_large", "unzstd",
           "xerial_compress", "xxh32", "zstd_frame_end"]


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


# ---- snappy (xerial framing, written) -----------------------------------------------------
_FRAMING = _decode.framing_constants()
#: snappy-java's stream magic; followed by int32 version and int32 compatible-version
XERIAL_MAGIC = _FRAMING["XERIAL_MAGIC"]
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)     # what snappy-java writes
#: snappy-java SnappyOutputStream.DEFAULT_BLOCK_SIZE
XERIAL_BLOCK_SIZE = 32 * 1024
_BE_INT32 = struct.Struct(">i")


def xerial_compress(cramjam, data) -> bytes:
    """snappy-java's SnappyOutputStream framing of ``data`` (32 KiB blocks)."""
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_BE_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


# ---- skippable frames (zstd; lz4's are read in _framing.h) ---------------------------------
_LE_U32 = struct.Struct("<I")
_SKIPPABLE_MASK = 0xFFFFFFF0
_SKIPPABLE_MAGIC = 0x184D2A50          # 0x184D2A50 .. 0x184D2A5F


def _next_frame(payload, pos: int, end: int, codec: str) -> tuple[int, int | None]:
    """The magic of the frame at ``pos`` and, for a skippable frame (magic, little-endian
    length, bytes), the position after it, else None."""
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

