"""Decompression of gzip and zstd within a budget, and the xerial framing snappy is
written in. Every framing is *walked* in C, in ``_framing.h``: lz4 frames and snappy
(xerial or raw) are also decoded there (the decode kernel's ``decompress_framed``, which
the registry calls), zstd frames are walked there (``zstd_frames``) and decoded here by
zstandard frame by frame. ``xxh32`` is the kernel's (``_checksums.h``), the package's
one xxHash32.

* gzip   -- ``java.util.zip.GZIPOutputStream``: one gzip member (RFC 1952). The reader
  (``GZIPInputStream``) also reads several concatenated members and ignores trailing
  bytes that do not start a new member; so do we (zlib walks the members).
* snappy -- written as snappy-java's ``SnappyOutputStream`` does: the header
  (``\x82SNAPPY\x00``, from ``_framing.h``; int32 version 1, int32 compatible version
  1) then blocks of ``int32-BE compressed length + raw snappy block``, each holding at
  most 32 KiB of input.
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
           "xerial_compress", "xxh32"]

#: magics and header sizes as _framing.h has them
_FRAMING = _decode.framing_constants()


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


# ---- zstd ------------------------------------------------------------------------------
_ZSTD_UNKNOWN_SIZE = 2 ** 64 - 1
_ZSTD_STREAM_CHUNK = 1 << 20
_ZSTD_MAGIC_BYTES = struct.pack("<I", _FRAMING["ZSTD_MAGIC"])


def unzstd(zstd, d, payload: memoryview, max_size: int):
    """zstd frames with ``d``, the calling thread's ``zstd.ZstdDecompressor``."""
    if len(payload) >= 6 and payload[:4] == _ZSTD_MAGIC_BYTES:
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
    # the frames as _framing.h walks them (skippable ones left out)
    for start, frame_end, content_size, bound in _decode.zstd_frames(payload):
        frame = payload[start:frame_end]
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

