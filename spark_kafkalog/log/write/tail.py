"""Where a partition ends, as the writer must know it: the active segment's size, its
index files' state, and the next offset, from the last index entry and a *strict* walk
of the batch headers after it (:func:`~spark_kafkalog.log.read.scan.walk_batches` with
``strict``: unlike a read, which drops a torn tail with a warning, it refuses a torn or
impossible batch; a partial tail is a broker crash that the broker's own recovery must
truncate, not something a writer may append after)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError, as_storage_error
from spark_kafkalog.log.io import file_size, is_local, read_range
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
    timeindex_tail: bytes = b""        # the time index's last (up to) two entries
    #: with ``keep_open``: the segment's files, opened read-write when they were read
    #: (``".log"``, ``".index"``, ``".timeindex"`` -> fd), for the append to take over
    #: instead of opening them again; whoever takes one closes it
    fds: dict = field(default_factory=dict)

    def close_files(self) -> None:
        """Close the files nobody took."""
        while self.fds:
            os.close(self.fds.popitem()[1])


def _size_and_tail(fs: pafs.FileSystem, path: str, n: int, keep: dict | None = None,
                   suffix: str = "") -> tuple[int | None, bytes]:
    """A file's size (None when it does not exist) and its last ``n`` bytes; on local
    disk through one open (its size from that open file, not a separate lookup), kept
    open read-write in ``keep[suffix]`` when ``keep`` is given."""
    if not is_local(fs):
        size = file_size(fs, path)
        if size is None:
            return None, b""
        n = min(n, size)
        return size, read_range(fs, path, size - n, n) if n else b""
    try:
        fd = os.open(path, os.O_RDONLY if keep is None else os.O_RDWR)
    except FileNotFoundError:
        return None, b""
    try:
        size = os.fstat(fd).st_size
        n = min(n, size)
        tail = os.pread(fd, n, size - n) if n else b""
    except OSError as err:
        os.close(fd)
        raise (as_storage_error(err, path, "read")
               or LogLayoutError(f"cannot read {n} bytes: {err}", path=path)) from err
    if keep is None:
        os.close(fd)
    else:
        keep[suffix] = fd
    if len(tail) != n:
        raise LogLayoutError(f"file shrank while its last {n} bytes were read", path=path)
    return size, tail


def _continuing_builder(fs: pafs.FileSystem, directory: str, last: Segment,
                        cfg: AppendConfig, keep: dict | None
                        ) -> tuple[IndexBuilder | None, int | None, int | None, bytes]:
    """An index builder that continues the active segment's index files, None when they
    are missing, damaged or describe more than the file holds; their sizes; the time
    index's last (up to) two entries."""
    idx_path = segment_file(directory, last.base_offset, ".index")
    tidx_path = segment_file(directory, last.base_offset, ".timeindex")
    idx_size, idx_tail = _size_and_tail(fs, idx_path, OFFSET_ENTRY_SIZE, keep, ".index")
    tidx_size, tidx_tail = _size_and_tail(fs, tidx_path, 2 * TIME_ENTRY_SIZE, keep,
                                          ".timeindex")
    if idx_size is None or tidx_size is None:
        return None, idx_size, tidx_size, tidx_tail
    try:
        builder = IndexBuilder.continuing(
            last.base_offset, cfg.index_interval_bytes,
            offset_index_tail=idx_tail, offset_index_size=idx_size,
            time_index_tail=tidx_tail, time_index_size=tidx_size, path=idx_path,
            max_index_bytes=cfg.max_index_bytes)
    except LogLayoutError:
        return None, idx_size, tidx_size, tidx_tail
    if builder.last_entry_position >= last.size:
        builder = None
    return builder, idx_size, tidx_size, tidx_tail


def inspect_partition(fs: pafs.FileSystem, directory: str, cfg: AppendConfig, *,
                      keep_open: bool = False
                      ) -> tuple[tuple[Segment, ...], Active | None, int]:
    """Segments, the active segment's state and the log end offset of one partition
    (whose directory exists). ``keep_open`` (local disk): the active segment's files
    stay open in :attr:`Active.fds`."""
    segs = segments(fs, directory, exists=True)
    if not segs:
        return segs, None, 0
    last = segs[-1]
    log_path = segment_file(directory, last.base_offset)
    keep: dict | None = {} if keep_open and is_local(fs) else None
    try:
        builder, idx_size, tidx_size, tidx_tail = _continuing_builder(fs, directory, last,
                                                                      cfg, keep)
        with FileHandle(fs, log_path, writable=keep is not None) as r:
            start = builder.last_entry_position if builder is not None else 0
            positions, lasts, max_ts = walk_batches(r.read, start, last.size, log_path)
            if builder is not None and builder.last_offset_entry is not None and (
                    not lasts or lasts[0] != builder.last_offset_entry):
                # the index does not describe this file: rebuild it from the batches
                builder = None
                positions, lasts, max_ts = walk_batches(r.read, 0, last.size, log_path)
            if keep is not None:
                keep[".log"], r.fd = r.fd, None
    except BaseException:
        for fd in (keep or {}).values():
            os.close(fd)
        raise
    next_offset = lasts[-1] + 1 if lasts else last.base_offset
    active = Active(base=last.base_offset, log_size=last.size, index_size=idx_size or 0,
                    timeindex_size=tidx_size or 0, builder=builder,
                    timeindex_tail=tidx_tail, fds=keep or {})
    if builder is None:
        # Kafka's recovery would rebuild these indexes: do the same (written before the
        # write begins, atomically, so a crash leaves either version — both valid).
        active.rebuilt = build_indexes(last.base_offset, cfg.index_interval_bytes, positions,
                                       lasts, max_ts)
    return segs, active, next_offset
