"""Where a partition ends, as the writer must know it: the active segment's size, its
index files' state, and the next offset, from the last index entry and a *strict* walk
of the batch headers after it (:func:`~spark_kafkalog.log.read.scan.walk_batches` with
``strict``: unlike a read, which drops a torn tail with a warning, it refuses a torn or
impossible batch; a partial tail is a broker crash that the broker's own recovery must
truncate, not something a writer may append after)."""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import file_size, read_range
from spark_kafkalog.log.files.index import (
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexBuilder,
    build_indexes,
)
from spark_kafkalog.log.model import Segment
from spark_kafkalog.log.read.scan import walk_batches
from spark_kafkalog.log.write.config import AppendConfig, segment_file
from spark_kafkalog.log.write.files import FileHandle, segments

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
