"""Where a partition ends, as the writer must know it: the active segment's size, its
index files' state, and the next offset, from the last index entry and a *strict* walk
of the batch headers after it. Unlike the reader's scan (which drops a torn tail with a
warning), this walk refuses a torn or impossible batch: a partial tail is a broker crash
that the broker's own recovery must truncate, not something a writer may append after."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import pyarrow.fs as pafs

from spark_kafkalog.errors import CorruptRecordError, LogLayoutError
from spark_kafkalog.format import wire
from spark_kafkalog.log.io import file_size, read_range
from spark_kafkalog.log.files.index import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexBuilder,
    build_indexes,
)
from spark_kafkalog.log.model import Segment
from spark_kafkalog.log.write.config import AppendConfig, segment_file
from spark_kafkalog.log.write.files import FileHandle, segments

_MIN_LENGTH = {2: wire.V2_MIN_BATCH_LENGTH, 1: wire.LEGACY_V1_MIN_SIZE,
               0: wire.LEGACY_V0_MIN_SIZE}


def walk_batches(read: Callable[[int, int], bytes], start: int, end: int, path: str
                 ) -> tuple[list[int], list[int], list[int]]:
    """Headers of the batches in ``[start, end)`` of a segment: (positions, last offsets,
    max timestamps). Every magic (0, 1, 2). Raises :class:`CorruptRecordError` naming
    the position for a torn or impossible batch."""
    positions: list[int] = []
    lasts: list[int] = []
    max_ts: list[int] = []
    pos = start
    while pos < end:
        if end - pos < wire.HEADER_PEEK:
            raise CorruptRecordError(f"torn batch at the end of the segment ({end - pos} "
                                     "bytes)", path=path, position=pos)
        head = read(pos, min(wire.V2_HEADER_SIZE, end - pos))
        base, length = struct.unpack_from(">qi", head, 0)
        magic = head[wire.MAGIC_POS]
        size = wire.LOG_OVERHEAD + length
        minimum = _MIN_LENGTH.get(magic)
        if minimum is None:
            raise CorruptRecordError(f"unknown magic {magic}", path=path, position=pos,
                                     offset=base)
        if length < minimum:
            raise CorruptRecordError(f"batch length {length} is too small for magic {magic}",
                                     path=path, position=pos, offset=base)
        if pos + size > end:
            raise CorruptRecordError(f"torn batch at the end of the segment: {size} bytes "
                                     f"declared, {end - pos} present", path=path,
                                     position=pos, offset=base)
        if magic == 2:
            (delta,) = struct.unpack_from(">i", head, wire.V2_LAST_OFFSET_DELTA_POS)
            (ts,) = struct.unpack_from(">q", head, wire.V2_MAX_TIMESTAMP_POS)
            last = base + delta
        elif magic == 1:
            # a legacy entry's offset is its (last inner) offset; the wrapper's timestamp
            # is the batch's max timestamp
            (ts,) = struct.unpack_from(">q", head, wire.LEGACY_V1_TIMESTAMP_POS)
            last = base
        else:
            ts = wire.NO_TIMESTAMP
            last = base
        if lasts and last <= lasts[-1]:
            raise CorruptRecordError(f"offsets go backwards ({last} after {lasts[-1]})",
                                     path=path, position=pos, offset=base)
        positions.append(pos)
        lasts.append(last)
        max_ts.append(ts)
        pos += size
    return positions, lasts, max_ts


@dataclass
class Active:
    """The last segment of a partition as found before the write."""

    base: int
    log_size: int
    index_size: int
    timeindex_size: int
    builder: IndexBuilder | None       # None when its indexes must be rebuilt first
    rebuilt: tuple[bytes, bytes] | None = None


def _tail_bytes(fs: pafs.FileSystem, path: str, size: int, n: int) -> bytes:
    n = min(n, size)
    return read_range(fs, path, size - n, n) if n else b""


def _continuing_builder(fs: pafs.FileSystem, directory: str, last: Segment,
                        cfg: AppendConfig) -> tuple[IndexBuilder | None, int | None, int | None]:
    """An index builder that continues the active segment's index files, None when they
    are missing, damaged or describe more than the file holds; and their sizes."""
    idx_path = segment_file(directory, last.base_offset, ".index")
    tidx_path = segment_file(directory, last.base_offset, ".timeindex")
    idx_size = file_size(fs, idx_path)
    tidx_size = file_size(fs, tidx_path)
    if idx_size is None or tidx_size is None:
        return None, idx_size, tidx_size
    try:
        builder = IndexBuilder.continuing(
            last.base_offset, cfg.index_interval_bytes,
            offset_index_tail=_tail_bytes(fs, idx_path, idx_size, OFFSET_ENTRY_SIZE),
            offset_index_size=idx_size,
            time_index_tail=_tail_bytes(fs, tidx_path, tidx_size, 2 * TIME_ENTRY_SIZE),
            time_index_size=tidx_size, path=idx_path, max_index_bytes=cfg.max_index_bytes)
    except LogLayoutError:
        return None, idx_size, tidx_size
    if builder.last_entry_position >= last.size:
        builder = None
    return builder, idx_size, tidx_size


def inspect_partition(fs: pafs.FileSystem, directory: str, cfg: AppendConfig,
                      ) -> tuple[tuple[Segment, ...], Active | None, int]:
    """Segments, the active segment's state and the log end offset of one partition."""
    segs = segments(fs, directory)
    if not segs:
        return segs, None, 0
    last = segs[-1]
    log_path = segment_file(directory, last.base_offset)
    builder, idx_size, tidx_size = _continuing_builder(fs, directory, last, cfg)
    with FileHandle(fs, log_path) as r:
        start = builder.last_entry_position if builder is not None else 0
        positions, lasts, max_ts = walk_batches(r.read, start, last.size, log_path)
        if builder is not None and builder.last_offset_entry is not None and (
                not lasts or lasts[0] != builder.last_offset_entry):
            # the index does not describe this file: rebuild it from the batches
            builder = None
            positions, lasts, max_ts = walk_batches(r.read, 0, last.size, log_path)
    next_offset = lasts[-1] + 1 if lasts else last.base_offset
    active = Active(base=last.base_offset, log_size=last.size, index_size=idx_size or 0,
                    timeindex_size=tidx_size or 0, builder=builder)
    if builder is None:
        # Kafka's recovery would rebuild these indexes: do the same (written before the
        # write begins, atomically, so a crash leaves either version — both valid).
        active.rebuilt = build_indexes(last.base_offset, cfg.index_interval_bytes, positions,
                                       lasts, max_ts)
    return segs, active, next_offset
