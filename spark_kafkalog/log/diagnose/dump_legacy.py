"""The inner messages of a compressed legacy (magic 0/1) wrapper, for ``kafkalog dump``:
each inner message's stored CRC and whether it matches, which DumpLogSegments prints on
its record line (``isValid: ... crc: ...``)."""
from __future__ import annotations

import struct
import zlib

from spark_kafkalog.format import decompress
from spark_kafkalog.format.wire import LEGACY_MAGIC_POS, LOG_OVERHEAD

__all__ = ["legacy_inner_crcs"]


def legacy_inner_crcs(count: int, entry, codec: int, magic: int) -> list[tuple[int, bool]]:
    """``(stored CRC, valid)`` of the first ``count`` inner messages of the compressed
    wrapper ``entry`` (its whole bytes: offset, size, crc, magic, attributes, [timestamp],
    key, value); ``(0, False)`` for those that are not there."""
    if entry is None:
        return [(0, False)] * count
    pos = LEGACY_MAGIC_POS + 2 + (8 if magic == 1 else 0)
    klen = struct.unpack_from(">i", entry, pos)[0]
    pos += 4 + max(klen, 0)
    vlen = struct.unpack_from(">i", entry, pos)[0]
    data = bytes(decompress(codec, entry[pos + 4:pos + 4 + max(vlen, 0)], magic=magic))
    found, q = [], 0
    while q + LOG_OVERHEAD + 4 <= len(data):
        size = struct.unpack_from(">i", data, q + 8)[0]
        body = data[q + LOG_OVERHEAD:q + LOG_OVERHEAD + size]
        crc = struct.unpack_from(">I", body, 0)[0]
        found.append((crc, zlib.crc32(body[4:]) & 0xFFFFFFFF == crc))
        q += LOG_OVERHEAD + size
    return (found + [(0, False)] * count)[:count]
