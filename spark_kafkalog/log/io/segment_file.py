"""Ranged reads of one segment file: pread into reused buffers, or memory maps.

The read side's one way of reading ``.log`` bytes (see :class:`SegmentFile`); the page
cache behaviour of reading (pre-faulted maps, buffer reuse) is decided here only.
"""
from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError, as_storage_error
from spark_kafkalog.log.io.deleted import open_listed, same_file

__all__ = ["SegmentFile", "read_whole_local"]

# memory maps start on this boundary (0: no mmap module here, read instead)
_PAGE = getattr(mmap, "ALLOCATIONGRANULARITY", 0) if hasattr(mmap, "PROT_READ") else 0
# MAP_POPULATE: fault the whole range in with the map call (one kernel pass over the
# page cache instead of one fault per page as the scan walks it)
_MAP_FLAGS = getattr(mmap, "MAP_SHARED", 1) | getattr(mmap, "MAP_POPULATE", 0)

#: window buffers a segment reader keeps for reuse
_WINDOW_POOL = 3


class SegmentFile:
    """A segment's .log opened once and read in ranges, bytes counted.

    :meth:`read` returns a buffer (a memoryview) of exactly the bytes asked for, made
    without the copies a ``bytes`` result costs:

    - by default the range is read straight into a fresh uninitialised buffer (one
      copy, from the page cache or the network); on the local filesystem with
      ``os.pread`` on a plain file descriptor (a topic of thousands of small partitions
      opens, reads and closes a segment per slice: the system calls, no file object);
    - with ``memory_map`` on the local filesystem each range is memory-mapped on its
      own (``mmap`` of the page-aligned range, pre-faulted): no copy at all, and the
      mapping is released as soon as nothing refers to the range any more, so resident
      memory stays one window (mapping the whole file would keep every page touched
      resident until the end).

    ``carry``, the unconsumed end of the previous range, which must be the first bytes
    of the new one, is copied into the new buffer rather than read again (a memory map
    needs neither), so every byte of the file is read once.

    Why memory maps are opt-in: a file truncated while a range of it is mapped kills the
    process (SIGBUS) when the range is touched, where a read just comes back short and
    raises :class:`LogLayoutError`. A broker truncates its segments on recovery and on
    follower divergence, and the appender rolls back a crashed commit by truncating, so
    only a log nothing writes to (a copy, a backup) is safe to map. The saving is one
    memory copy of the segment bytes (docs/PERFORMANCE.md, log/io).

    ``stats``: any object with an int ``bytes_read`` (the scan's ReadStats), counting the
    bytes taken from the file."""

    def __init__(self, fs: pafs.FileSystem, path: str, size: int, stats,
                 memory_map: bool = False):
        self.path = path
        self.size = size
        self.stats = stats
        self._fd = None
        self._f = None
        self._pool: list[np.ndarray] = []   # window buffers, reused once nothing views them
        local = isinstance(fs, pafs.LocalFileSystem)
        self._mapped = bool(memory_map and local and _PAGE)
        try:
            if local and hasattr(os, "preadv"):
                flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
                self._fd = open_listed(fs, path, lambda p: os.open(p, flags))
            else:
                self._f = open_listed(fs, path)
        except OSError as err:
            raise (as_storage_error(err, path, "open")
                   or LogLayoutError(f"cannot open segment: {err}", path=path)) from err

    def is_file(self, file_id: tuple) -> bool:
        """Whether the open file is the one a local listing saw as ``file_id`` (device,
        inode)."""
        if self._fd is None:
            return same_file(self.path, file_id)
        st = os.fstat(self._fd)
        return (st.st_dev, st.st_ino) == tuple(file_id)

    def read(self, position: int, length: int, carry=None) -> memoryview:
        length = min(length, self.size - position)
        if length <= 0:
            return memoryview(b"")
        kept = 0 if carry is None else min(len(carry), length)
        if self._mapped:
            data = self._map(position, length)
        else:
            buf = self._buffer(length)
            if kept:
                buf[:kept] = np.frombuffer(carry, dtype=np.uint8, count=kept)
            data = memoryview(buf)
            got = kept
            if self._fd is not None:
                while got < length:
                    try:
                        n = os.preadv(self._fd, [data[got:]], position + got)
                    except OSError as err:
                        raise self._error(err, "read segment", position + got) from err
                    if n <= 0:
                        break
                    got += n
            elif kept < length:
                try:
                    self._f.seek(position + kept)
                    got += self._f.readinto(data[kept:])
                except OSError as err:
                    # the object store's error, after the client's own retries
                    raise self._error(err, "read segment", position + kept) from err
            if got != length:
                self._short(position, got, length)
        self.stats.bytes_read += length - kept
        return data

    def _buffer(self, length: int) -> np.ndarray:
        """A buffer for the next window: a previous window's, when no view of it is left
        (the consumer is done with that window), so reading a segment does not fault in
        (and have the kernel zero) fresh pages for every window. A few are kept because a
        consumer typically still holds the previous window while asking for the next."""
        pool = self._pool
        for buf in pool:
            # references: the pool's, ``buf`` and getrefcount's argument; any more is a
            # live view of its bytes (a Window still in use)
            if len(buf) >= length and sys.getrefcount(buf) <= 3:
                return buf[:length]
        buf = np.empty(length, dtype=np.uint8)
        if len(pool) >= _WINDOW_POOL:
            # forget a free but too small one, else the oldest (its holder keeps it alive)
            free = [i for i in range(len(pool)) if sys.getrefcount(pool[i]) <= 2]
            pool.pop(free[0] if free else 0)
        pool.append(buf)
        return buf[:length]

    def _map(self, position: int, length: int) -> memoryview:
        try:
            current = os.fstat(self._fd).st_size
        except OSError as err:
            raise self._error(err, "stat segment", position) from err
        if current < position + length:
            self._short(position, max(current - position, 0), length)
        start = position - position % _PAGE
        try:
            mm = mmap.mmap(self._fd, position + length - start, flags=_MAP_FLAGS,
                           prot=mmap.PROT_READ, offset=start)
        except OSError as err:
            raise self._error(err, f"map {length} bytes of segment", position) from err
        # the memoryview keeps the map alive; it is unmapped when the last view goes
        return memoryview(mm)[position - start:]

    def _error(self, err: OSError, doing: str, position: int):
        """A failed read's error: the storage failing (EIO, ...) is a StorageError (the
        one rule, :func:`~spark_kafkalog.errors.storage_errno`), anything else says the
        segment is not as listed."""
        return (as_storage_error(err, self.path, doing, position)
                or LogLayoutError(f"cannot {doing}: {err}", path=self.path,
                                  position=position))

    def _short(self, position: int, got: int, length: int):
        raise LogLayoutError(f"short read: {got} of {length} bytes (the file shrank while "
                             "being read?)", path=self.path, position=position)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._f is not None:
            self._f.close()


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def read_whole_local(path: str, size: int, file_id: tuple) -> bytes | None:
    """The first ``size`` bytes of the local file at ``path`` in one read, when it still
    is the file a listing saw as ``file_id`` (device, inode) and holds them; None
    otherwise (gone, renamed, replaced, shorter, unreadable): the caller then reads it
    through :class:`SegmentFile`, which handles and reports each case. For small
    segments read whole: one open, fstat, read and close, nothing else."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if st.st_ino != file_id[1] or st.st_dev != file_id[0]:
            return None
        data = os.pread(fd, size, 0)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) == size else None
