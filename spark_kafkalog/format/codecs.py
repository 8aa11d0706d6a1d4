"""The codec registry: Kafka's compression codecs, bounded on the way in.

Codec ids are the ones Kafka stores in a batch's attributes (bits 0-2)::

    0 none   1 gzip   2 snappy   3 lz4   4 zstd

``decompress(codec_id, payload, *, magic=2, max_size=DEFAULT_MAX_DECOMPRESSED)``
    Returns the decompressed bytes (``bytes`` or ``bytearray``; treat it as a read-only
    bytes-like object). ``payload`` may be any bytes-like object, memoryview included.
    Never produces, and never allocates an output buffer for, more than ``max_size``
    bytes: a compression bomb fails with :class:`CodecError` as soon as the bound is
    known to be crossed (usually before any decompression). Raises :class:`CodecError`
    for a corrupt, truncated or oversized payload, :class:`UnsupportedFormatError` for an
    unknown codec id and :class:`MissingCodecError` when the codec's library is not
    installed (reading lz4 and snappy needs none). Positions/offsets are not known here: the caller relocates the error
    (``err.at(...)`` or by re-raising with its own position).

``compress(codec_id, data, *, level=None)``
    Compresses one batch's records the way the Java producer does (see each codec).
    ``level=None`` is the Java client's default level.

``codec_id(name)``  "none" | "gzip" | "snappy" | "lz4" | "zstd" -> int.

Each codec's framing (how Kafka wraps the compressed bytes) has one owner: lz4 frames
and snappy (xerial or raw) are walked and decoded in C (``_framing.h``, reached through
the decode kernel's ``decompress_framed``; no library needed to read them), gzip and
zstd in :mod:`spark_kafkalog.format.framing`. This module owns the ids, the lazy
imports and the levels.
"""
from __future__ import annotations

import functools
import importlib
import struct
import threading
import zlib
from collections.abc import Callable

from spark_kafkalog.errors import (
    CodecError,
    InvalidOptionError,
    MissingCodecError,
    UnsupportedFormatError,
)
from spark_kafkalog.format import _decode, framing
from spark_kafkalog.format.framing import (  # re-exported: part of the registry's API
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    xxh32,
)
from spark_kafkalog.format.wire import (
    CODEC_GZIP,
    CODEC_IDS,
    CODEC_LZ4,
    CODEC_NAMES,
    CODEC_NONE,
    CODEC_SNAPPY,
    CODEC_ZSTD,
    DEFAULT_MAX_DECOMPRESSED,
)

__all__ = ["DEFAULT_MAX_DECOMPRESSED", "codec_id", "codec_name", "compress", "compressor",
           "decompress",
           "xxh32", "XERIAL_MAGIC", "XERIAL_BLOCK_SIZE"]

# ---------------------------------------------------------------------------------------
# lazy imports with an install hint
# ---------------------------------------------------------------------------------------
#: module -> pip package that provides it
_PIP_NAMES = {"cramjam": "cramjam", "lz4.frame": "lz4", "zstandard": "zstandard"}
_modules: dict[str, object] = {}


def _require(module: str, codec: str):
    mod = _modules.get(module)
    if mod is None:
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            raise MissingCodecError(
                f"the {codec} codec needs the Python package {_PIP_NAMES[module]!r}: "
                f"pip install {_PIP_NAMES[module]}") from err
        _modules[module] = mod
    return mod


def codec_id(name: str | int) -> int:
    """Codec id for a codec name ("none", "gzip", "snappy", "lz4", "zstd"; case
    insensitive). An int that is a known codec id is returned as is."""
    if isinstance(name, bool):
        raise InvalidOptionError(f"compression: unknown codec {name!r}")
    if isinstance(name, int):
        if name in CODEC_NAMES:
            return name
        raise InvalidOptionError(f"compression: unknown codec id {name!r} "
                                 f"(known: {sorted(CODEC_NAMES)})")
    if isinstance(name, str):
        cid = CODEC_IDS.get(name.strip().lower())
        if cid is not None:
            return cid
    raise InvalidOptionError(f"compression: unknown codec {name!r} "
                             f"(expected one of {', '.join(CODEC_IDS)})")


_lookup_codec = codec_id      # the parameters below are named codec_id too


def codec_name(cid: int) -> str:
    return CODEC_NAMES.get(cid, f"codec {cid}")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_max_size(max_size: int) -> None:
    if not isinstance(max_size, int) or max_size < 0:
        raise InvalidOptionError(f"max_size must be a non-negative int, got {max_size!r}")


_too_large = framing.too_large


# ---- compressors, at the Java client's levels -------------------------------------------
_GZIP_WBITS = 16 + zlib.MAX_WBITS        # a gzip member, as GZIPOutputStream writes


def _gzip(level: int | None) -> Callable:
    if level is None:
        level = 6                 # java.util.zip.Deflater.DEFAULT_COMPRESSION
    elif not (_is_int(level) and 1 <= level <= 9):
        raise InvalidOptionError(f"compression level {level!r} is not valid for gzip (1..9)")
    return functools.partial(zlib.compress, level=level, wbits=_GZIP_WBITS)


def _snappy(level: int | None) -> Callable:
    if level is not None:
        raise InvalidOptionError("compression level is not supported for snappy")
    return functools.partial(framing.xerial_compress, _require("cramjam", "snappy"))


def _lz4(level: int | None) -> Callable:
    lz4f = _require("lz4.frame", "lz4")
    # Java: level 9 (the default) selects lz4-java's fast compressor, any other level
    # (1..17) its high-compression one at that level.
    if level is None or (_is_int(level) and level == 9):
        lib_level = 0
    elif _is_int(level) and 1 <= level <= 17:
        lib_level = max(level, 3)         # python-lz4: levels < 3 are the fast mode
    else:
        raise InvalidOptionError(f"compression level {level!r} is not valid for lz4 (1..17)")
    return functools.partial(lz4f.compress, compression_level=lib_level,
                             block_size=lz4f.BLOCKSIZE_MAX64KB, block_linked=False,
                             content_checksum=False, block_checksum=False,
                             store_size=False)


_local = threading.local()


def _zstd_decompressor(zstd):
    d = getattr(_local, "zstd_d", None)
    if d is None:
        d = _local.zstd_d = zstd.ZstdDecompressor()
    return d


def zstd_decompress_fn() -> Callable:
    """The calling thread's ``ZstdDecompressor().decompress`` (for the decode kernel,
    which calls it directly on single frames whose declared content size it has checked
    against the budget). Raises MissingCodecError when zstandard is not installed."""
    return _zstd_decompressor(_require("zstandard", "zstd")).decompress


def _zstd(level: int | None) -> Callable:
    zstd = _require("zstandard", "zstd")
    if level is None:
        level = 3                 # zstd's (and the Java client's) default
    elif not (_is_int(level) and -131072 <= level <= 22):
        raise InvalidOptionError(f"compression level {level!r} is not valid for zstd "
                                 f"(-131072..22)")
    # The content size is written (the Java client streams and omits it); readers
    # accept both, and ours uses it to size the output exactly. A ZstdCompressor keeps
    # a context: one per thread (see compressor()).
    return zstd.ZstdCompressor(level=level).compress


# ---------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------
_DECOMPRESSORS: dict[int, Callable] = {
    CODEC_GZIP: lambda p, m, magic: framing.gunzip(p, m),
    CODEC_SNAPPY: lambda p, m, magic: _decode.decompress_framed(CODEC_SNAPPY, p, m, magic),
    CODEC_LZ4: lambda p, m, magic: _decode.decompress_framed(CODEC_LZ4, p, m, magic),
    CODEC_ZSTD: lambda p, m, magic: framing.unzstd(
        _require("zstandard", "zstd"), _zstd_decompressor(_require("zstandard", "zstd")),
        p, m),
}
_COMPRESSORS: dict[int, Callable] = {
    CODEC_GZIP: _gzip,
    CODEC_SNAPPY: _snappy,
    CODEC_LZ4: _lz4,
    CODEC_ZSTD: _zstd,
}


def decompress(codec_id: int, payload, *, magic: int = 2,
               max_size: int = DEFAULT_MAX_DECOMPRESSED):
    """Decompress one batch's (or legacy wrapper's) payload; see the module docstring."""
    _check_max_size(max_size)
    view = payload if isinstance(payload, memoryview) else memoryview(payload)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if codec_id == CODEC_NONE:
        if len(view) > max_size:
            raise _too_large("uncompressed", max_size)
        return bytes(view)
    fn = _DECOMPRESSORS.get(codec_id)
    if fn is None:
        raise UnsupportedFormatError(f"unknown compression codec id {codec_id}")
    try:
        return fn(view, max_size, magic)
    except (struct.error, IndexError, ValueError) as err:
        # Defensive: header reads past the end that a walker did not pre-check.
        if isinstance(err, InvalidOptionError):
            raise
        raise CodecError(f"{codec_name(codec_id)} payload is corrupt: {err}") from err


def compressor(codec_id: int | str, level: int | None = None) -> Callable:
    """``fn(data) -> bytes`` compressing one payload as :func:`compress` does, for the
    calling thread: it is cached per thread and may keep a codec context, so do not
    hand it to another thread. Raises like :func:`compress`."""
    cid = _lookup_codec(codec_id)
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    key = (cid, level if _is_int(level) or level is None else repr(level))
    fn = cache.get(key)
    if fn is None:
        if cid == CODEC_NONE:
            if level is not None:
                raise InvalidOptionError("compression level given with compression 'none'")
            fn = bytes
        else:
            fn = _COMPRESSORS[cid](level)
        cache[key] = fn
    return fn


def compress(codec_id: int | str, data, *, level: int | None = None) -> bytes:
    """Compress ``data`` (bytes-like) as the Java producer would for ``codec_id`` (an id
    or a name). Codec 0 returns the data unchanged. Raises InvalidOptionError for an
    unknown codec or an invalid level, MissingCodecError if the library is missing."""
    return compressor(codec_id, level)(data)
