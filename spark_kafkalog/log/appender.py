"""The appender: commits staged record batches to a Kafka log dir, whole or not at all.

A write has two halves.

*Tasks* (many processes, in parallel) encode their rows into v2 record batches with
``format.encode`` and stream them into one staging file each through
:class:`StagingWriter`, which returns a :class:`StagedFile` — a small picklable
description (per topic-partition section: byte range, batch and record counts). The
staging file also holds a table with one row per batch (position, size, last offset
delta, max timestamp, record count), so the driver never parses record bytes.

The *driver* calls :func:`commit_write` once with every task's :class:`StagedFile`:

1. lock — the broker's ``.lock`` (shared: refuse a log dir a running broker holds, and
   keep a broker from starting mid-commit), then each topic's writer lock in name order;
2. recover — finish or undo whatever a dead writer left (see :mod:`.journal`);
3. no-op if the journal already holds the write id (a retried or replayed commit);
4. plan — the log end of each partition (last index entry + a walk of the batch headers
   after it), where every staged batch will go: offsets are assigned in staging order,
   a segment is rolled (a new ``<base offset>.log`` with its indexes) when the next batch
   would take it past ``segment.bytes`` or overflow a relative offset / full index, as
   ``LogSegment.shouldRoll`` does;
5. begin — the journal records the plan and what is needed to undo it;
6. append — staged bytes are copied window by window into the active segment with each
   batch's ``baseOffset`` rewritten (the CRC-32C covers only attributes onwards, so the
   batch stays valid — what a broker does when it assigns offsets);
   ``.index``/``.timeindex`` get the entries a broker writes (:mod:`.index_write`);
   a large section staged in a file of its own is instead *adopted*: its baseOffsets are
   patched in place and the file is hard-linked into the partition directory as a new
   segment (see :attr:`AppendConfig.adopt_min_bytes`);
7. fsync every file written and every directory that gained one;
8. commit — one atomic journal write (the coordinator topic's, for a multi-topic write);
9. checkpoints — ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint``
   (high watermark) move to the new log end, ``log-start-offset-checkpoint`` for an
   overwrite; an overwrite's old segments are deleted; the journal's pending entry is
   cleared; staging files are deleted.

On filesystems without append (object stores; or ``no_append=True`` locally) each commit
writes new segment objects named by their base offset, with complete index files — still
a valid Kafka layout — and never modifies an existing object except an empty active one.

Modes: ``append``; ``errorifexists`` / ``ignore`` (decided under the lock: an existing
topic fails the commit / makes it a no-op); ``overwrite`` — the topic's contents are
replaced atomically: the new data starts a new segment at the old log end (offsets keep
increasing, as after Kafka's ``deleteRecords``, so a consumer's old committed offsets can
never point into the new data), the commit moves the log start offset there, and the old
segments are deleted.

A test may pass ``fault``: a callable invoked with the name of each step (``"locked"``,
``"begun"``, ``"append"`` after every write, ``"synced"``, ``"committed:<topic>"``,
``"checkpoint:<file>"``, ``"done:<topic>"``, ...) — the crash tests kill the process there.
"""
from __future__ import annotations

import contextlib
import errno
import mmap
import os
import struct
import threading
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import (
    CommitConflictError,
    CorruptRecordError,
    InvalidOptionError,
    LogLayoutError,
)
from spark_kafkalog.format import wire
from spark_kafkalog.format.npview import to_numpy
from spark_kafkalog.log import journal as jr
from spark_kafkalog.log.fs import write_fully
from spark_kafkalog.log.index_write import (
    DEFAULT_MAX_INDEX_BYTES,
    INT32_MAX,
    OFFSET_ENTRY_SIZE,
    TIME_ENTRY_SIZE,
    IndexBuilder,
    build_indexes,
)
from spark_kafkalog.log.lock import (
    DEFAULT_LOCK_TIMEOUT_S,
    BrokerDirGuard,
    CheckpointLock,
    TopicLock,
    is_local,
)

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
#: see :attr:`AppendConfig.adopt_min_bytes`
DEFAULT_ADOPT_MIN_BYTES = 16 * 1024 * 1024
#: see :class:`StagingWriter` ``flush_behind``: a per-partition staging file is flushed to
#: disk in the background once it is as large as a file the commit adopts (smaller ones
#: are copied, so flushing them early would write them twice), then each time this many
#: more bytes have been staged in it (bounding what is left for the commit's fsync)
FLUSH_BEHIND_START = DEFAULT_ADOPT_MIN_BYTES
FLUSH_BEHIND_BYTES = 4 * 1024 * 1024
#: flushed staging pages are dropped from the page cache in whole pages (see _PartFile)
#: ... when the file's batches average at least this many bytes (see _drop_ranges)
DROP_MIN_BATCH_BYTES = 64 * 1024
_CACHE_PAGE = mmap.PAGESIZE
#: bytes of a batch's header the commit reads back (baseOffset, length, magic)
_HEADER_READ = wire.MAGIC_POS + 1
_FADVISE = getattr(os, "posix_fadvise", None)
#: staged bytes copied per read/patch/write step (bounds the driver's memory)
COPY_WINDOW_BYTES = 8 * 1024 * 1024
#: orphaned staging files (a job whose driver died before commit) older than this are
#: deleted by recovery
STAGING_TTL_S = 24 * 3600

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"

MODES = ("append", "overwrite", "errorifexists", "ignore")

#: one row per staged batch; position is relative to its section's first byte
BATCH_TABLE_DTYPE = np.dtype([("position", "<i8"), ("size", "<i4"),
                              ("last_offset_delta", "<i4"), ("max_timestamp", "<i8"),
                              ("record_count", "<i4")])

_SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")

Fault = Callable[[str], None]


def _no_fault(_point: str) -> None:
    return None


def segment_file(directory: str, base_offset: int, suffix: str = ".log") -> str:
    """``<dir>/<20-digit zero-padded base offset><suffix>``, as Kafka names segments."""
    return f"{directory}/{base_offset:020d}{suffix}"


def partition_dir(root: str, topic: str, partition: int) -> str:
    return f"{root.rstrip('/')}/{topic}-{partition}"


@dataclass(frozen=True)
class AppendConfig:
    """How segments are written. ``no_append=None`` picks append for local filesystems
    and new-segment-per-commit elsewhere."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES
    no_append: bool | None = None
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S
    fsync: bool = True
    #: a staged section in a file of its own (``StagingWriter(per_partition_files=True)``)
    #: at least this large becomes a new segment by renaming the file into the partition
    #: directory, instead of being copied into the active segment (local filesystems)
    adopt_min_bytes: int = DEFAULT_ADOPT_MIN_BYTES

    def __post_init__(self):
        if self.segment_bytes < wire.V2_HEADER_SIZE:
            raise InvalidOptionError(f"option 'segment.bytes': {self.segment_bytes} is too "
                                     "small for one record batch")
        if self.index_interval_bytes < 0:
            raise InvalidOptionError("option 'index.interval.bytes' must be >= 0")


@dataclass(frozen=True)
class TopicSpec:
    """A topic a write goes to: the partition count to create it with when it does not
    exist, and the count the rows were partitioned for (None: no check)."""

    topic: str
    partitions_if_new: int = 1
    expected_partitions: int | None = None


# ==== staging (task side) ===============================================================
@dataclass(frozen=True)
class StagedSection:
    """One run of whole record batches for one topic-partition inside a staging file."""

    topic: str
    partition: int
    position: int          # byte position of the section in the staging file
    size: int              # bytes
    batch_start: int       # first row of the file's batch table
    batch_count: int
    record_count: int
    #: the section's bytes are this file of their own (position 0, the whole file), not
    #: part of the staging file; such a section may be adopted as a segment
    path: str | None = None


@dataclass(frozen=True)
class StagedFile:
    """What a task hands to the driver: the staging file and its sections. Picklable,
    small (no per-batch data: that is in the file's batch table)."""

    path: str
    table_position: int
    batch_count: int
    sections: tuple[StagedSection, ...]

    @property
    def size(self) -> int:
        return sum(s.size for s in self.sections)

    @property
    def record_count(self) -> int:
        return sum(s.record_count for s in self.sections)


def staging_path(root: str, write_id: str, label: str) -> str:
    return (f"{root.rstrip('/')}/{jr.STAGING_PREFIX}{jr.write_token(write_id)}."
            f"{label}.{uuid.uuid4().hex[:12]}")


def _column(table, name: str) -> np.ndarray:
    return to_numpy(table[name])


def batch_table(batches) -> np.ndarray:
    """Normalize a per-batch table (``format.encode_batches``' pyarrow table, a dict of
    arrays, or a structured array) with columns position, size, max_timestamp,
    record_count and either last_offset_delta or base_offset + last_offset."""
    if isinstance(batches, np.ndarray) and batches.dtype == BATCH_TABLE_DTYPE:
        return batches
    names = (batches.dtype.names if isinstance(batches, np.ndarray)
             else getattr(batches, "column_names", None) or list(batches.keys()))
    position = _column(batches, "position")
    out = np.empty(len(position), dtype=BATCH_TABLE_DTYPE)
    out["position"] = position
    out["size"] = _column(batches, "size")
    if "last_offset_delta" in names:
        out["last_offset_delta"] = _column(batches, "last_offset_delta")
    else:
        out["last_offset_delta"] = (_column(batches, "last_offset").astype(np.int64)
                                    - _column(batches, "base_offset").astype(np.int64))
    out["max_timestamp"] = _column(batches, "max_timestamp")
    out["record_count"] = _column(batches, "record_count")
    return out


def _check_table(table: np.ndarray, data_size: int) -> None:
    if len(table) == 0:
        if data_size:
            raise ValueError("staged bytes without a batch table")
        return
    pos = table["position"]
    size = table["size"].astype(np.int64)
    if (pos[0] != 0 or np.any(pos[1:] != pos[:-1] + size[:-1])
            or int(pos[-1] + size[-1]) != data_size):
        raise ValueError("batch table does not tile the staged bytes")
    if np.any(size < wire.V2_HEADER_SIZE) or np.any(table["last_offset_delta"] < 0):
        raise ValueError("batch table has an impossible batch size or offset delta")


class _PartFile:
    """One topic-partition's staged bytes in a file of their own (per-partition mode).
    Opened for each append and closed after it: a task writing to thousands of
    partitions must not hold a descriptor per partition."""

    def __init__(self, path: str, flush_behind: bool = False):
        self.path = path
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        self.size = 0
        self.flushed = 0            # bytes handed to the flusher (flush_behind)
        self.flush_behind = flush_behind
        self.records = 0
        self.tables: list[np.ndarray] = []
        self._dropped = 0           # [0, _dropped) handed to the flusher to drop

    def append(self, data) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        try:
            write_fully(fd, data, self.size)
        finally:
            os.close(fd)

    def grew(self) -> None:
        """Called once ``size`` counts the appended bytes."""
        if (self.flush_behind and self.size >= FLUSH_BEHIND_START
                and self.size - self.flushed >= FLUSH_BEHIND_BYTES):
            _flusher().submit(self.path, self._drop_ranges())
            self.flushed = self.size

    def finish(self) -> None:
        """A file already being flushed (it will likely be adopted as a segment) gets
        its tail flushed too; the task does not wait for it."""
        if self.flushed and self.size > self.flushed:
            _flusher().submit(self.path, self._drop_ranges())
            self.flushed = self.size

    def _drop_ranges(self) -> list[tuple[int, int]]:
        """The byte range the flusher drops from the page cache once it has flushed what
        is staged now: from where the last range ended to the last whole page (none for
        small batches, see below).

        Why: a write that fsyncs has no use for its bytes in the page cache once they are
        on disk, and cached they cost it new pages — on the virtual machines this was
        measured on (free memory handed back to the host), each new page is a host
        fault: ``pwrite`` into new pages ~0.55 GB/s, into pages freed a moment before
        ~3 GB/s. Pages dropped behind the flush are free pages the next appends reuse,
        and a large write does not push a broker host's cache out (as HDFS datanodes'
        ``drop.cache.behind.writes``). The commit reads each batch's header back (check
        and baseOffset patch): :func:`_prefetch_headers` asks for all those pages at once
        (``WILLNEED``) before the journal's first fsync, so they are read in parallel
        with it, not one fault at a time.

        Nothing is dropped while the file's batches average under
        :data:`DROP_MIN_BATCH_BYTES`: then every few pages hold a header, and reading
        them all back cost the commit more than the pages save (measured, 2M rows in
        16 KiB batches, 17K headers: 0.22-0.30 s before the pending record was durable,
        0.06-0.13 s with the pages kept; commit 735-943 -> 573-806 ms)."""
        lo, hi = self._dropped, self.size - self.size % _CACHE_PAGE
        if hi <= lo:
            return []
        batches = sum(len(t) for t in self.tables)
        if self.size < DROP_MIN_BATCH_BYTES * batches:
            return []                   # small batches: keep the pages (see above)
        self._dropped = hi
        return [(lo, hi - lo)]


class _Flusher:
    """A daemon thread that ``fdatasync``s staging files behind the task writing them.

    Why: when the commit fsyncs a large write, the disk time (on the virtualised disks
    this runs on, the device cache's flush: ~0.45 s per 280 MB) came after every task
    had finished, in the commit's critical path. Flushed while the task still encodes,
    it overlaps the CPU work (measured: a 280 MB write's final fsync 0.47 s -> 0.02 s;
    the writing side is unchanged). The commit still fsyncs every file it writes or
    adopts; this only makes that fsync find the bytes already on disk. Offsets are
    patched at commit, so only the pages holding batch headers are written again — one
    page per ``batch.size`` bytes (see the writer's default).

    After each flush the pages it made clean are dropped from the page cache (the ranges
    ``submit`` is given; see :meth:`_PartFile._drop_ranges`).

    Failures are ignored (the file may be gone: an aborted task); the commit's fsync is
    the one that counts. One per process (re-created after a fork)."""

    def __init__(self):
        self._pid = os.getpid()
        self._cv = threading.Condition()
        self._pending: list[str] = []
        self._drops: dict[str, list[tuple[int, int]]] = {}
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="kafkalog-flush-behind",
                                        daemon=True)
        self._thread.start()

    def submit(self, path: str, drop: Sequence[tuple[int, int]] = ()) -> None:
        """fdatasync ``path``, then drop the ``(offset, length)`` ranges of it from the
        page cache (clean by then: bytes written before this call)."""
        with self._cv:
            if path not in self._pending:
                self._pending.append(path)
            self._drops.setdefault(path, []).extend(drop)
            self._cv.notify()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Until nothing is pending or being flushed (tests)."""
        with self._cv:
            return self._cv.wait_for(lambda: not self._pending and not self._busy, timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending)
                path = self._pending.pop(0)
                drop = self._drops.pop(path, [])
                self._busy = True
            try:
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                    for offset, length in drop if _FADVISE else ():
                        _FADVISE(fd, offset, length, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
            except OSError:
                pass
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()


_FLUSHER: _Flusher | None = None
_FLUSHER_LOCK = threading.Lock()


def _flusher() -> _Flusher:
    global _FLUSHER
    with _FLUSHER_LOCK:
        if _FLUSHER is None or _FLUSHER._pid != os.getpid():
            _FLUSHER = _Flusher()
        return _FLUSHER


class StagingWriter:
    """Streams one task's encoded batches into staging files at the log-dir root.

    ``add`` may be called any number of times, for any topic-partitions, in any order
    (a partition's batches keep their order); ``finish`` writes the batch table and
    returns the :class:`StagedFile` (None when nothing was added: no file is left);
    ``abort`` deletes the files. Not thread-safe.

    By default everything goes into one staging file. With ``per_partition_files`` (on
    local filesystems) each topic-partition's batches go into a file of their own; the
    commit can adopt a large one as a new segment by linking it into the partition
    directory (see :attr:`AppendConfig.adopt_min_bytes`) instead of copying its bytes
    under the writer lock. The batch table stays in the staging file itself.

    ``flush_behind`` (per-partition files only; the Spark writer sets it when the write
    fsyncs): once a file is :data:`FLUSH_BEHIND_START` bytes long, and each time
    :data:`FLUSH_BEHIND_BYTES` more are staged in it, a background thread calls
    ``fdatasync`` on it, and ``finish`` hands it the tail of any such file, so the disk
    works while the task still encodes and the commit's fsync finds the bytes already
    there; the flushed pages are then dropped from the page cache (when its batches
    average :data:`DROP_MIN_BATCH_BYTES` or more). The commit then only
    writes again the page holding each batch's
    header (its baseOffset), one page per batch: cheap with the writer's 1 MiB batches,
    as slow as writing everything again with 16 KiB ones (see
    ``spark.options.DEFAULT_BATCH_SIZE``). Files under the threshold are copied by the
    commit rather than adopted, and are not flushed early."""

    def __init__(self, fs: pafs.FileSystem, root: str, write_id: str, label: str = "task",
                 *, per_partition_files: bool = False, flush_behind: bool = False):
        self.fs = fs
        self.path = staging_path(root, write_id, label)
        self._split = per_partition_files and is_local(fs)
        self._flush_behind = flush_behind and self._split
        self._parts: dict[tuple[str, int], _PartFile] = {}
        self._sections: list[StagedSection] = []
        self._tables: list[np.ndarray] = []
        self._pos = 0
        self._batches = 0
        self._fd: int | None = None
        self._stream = None

    def _write(self, data) -> None:
        view = memoryview(data).cast("B")
        if is_local(self.fs):
            if self._fd is None:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            write_fully(self._fd, view)
        else:
            if self._stream is None:
                self._stream = self.fs.open_output_stream(self.path)
            self._stream.write(view)

    def add(self, topic: str, partition: int, data, batches) -> None:
        """Append ``data`` (whole v2 batches back to back) for ``topic``/``partition``,
        described by ``batches`` (see :func:`batch_table`)."""
        table = batch_table(batches)
        size = memoryview(data).nbytes
        _check_table(table, size)
        if size == 0:
            return
        if self._split:
            self._add_part(topic, int(partition), data, table, size)
            return
        self._write(data)
        self._sections.append(StagedSection(
            topic=topic, partition=int(partition), position=self._pos, size=size,
            batch_start=self._batches, batch_count=len(table),
            record_count=int(table["record_count"].sum())))
        self._tables.append(table)
        self._pos += size
        self._batches += len(table)

    def _add_part(self, topic: str, partition: int, data, table: np.ndarray,
                  size: int) -> None:
        pf = self._parts.get((topic, partition))
        if pf is None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            pf = self._parts[(topic, partition)] = _PartFile(
                f"{self.path}.{topic}-{partition}", self._flush_behind)
        pf.append(data)
        if pf.size:
            table = table.copy()
            table["position"] += pf.size            # positions are relative to the file
        pf.tables.append(table)
        pf.size += size
        pf.records += int(table["record_count"].sum())
        pf.grew()

    def finish(self) -> StagedFile | None:
        if self._split:
            for (topic, partition), pf in self._parts.items():
                pf.finish()
                table = np.concatenate(pf.tables)
                self._sections.append(StagedSection(
                    topic=topic, partition=partition, position=0, size=pf.size,
                    batch_start=self._batches, batch_count=len(table),
                    record_count=pf.records, path=pf.path))
                self._tables.append(table)
                self._batches += len(table)
        if not self._sections:
            self.abort()
            return None
        table = np.concatenate(self._tables)
        self._write(table.tobytes())
        self._close()
        return StagedFile(path=self.path, table_position=self._pos,
                          batch_count=self._batches, sections=tuple(self._sections))

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def abort(self) -> None:
        self._close()
        for pf in self._parts.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pf.path)
        with contextlib.suppress(FileNotFoundError):
            _delete(self.fs, self.path)


# ==== small filesystem helpers ==========================================================
def _delete(fs: pafs.FileSystem, path: str) -> None:
    if is_local(fs):
        os.unlink(path)
    else:
        fs.delete_file(path)


def _delete_if_exists(fs: pafs.FileSystem, path: str) -> bool:
    try:
        _delete(fs, path)
        return True
    except FileNotFoundError:
        return False
    except OSError as err:
        if not is_local(fs) and "not found" in str(err).lower():
            return False
        raise


def _listdir(fs: pafs.FileSystem, path: str) -> list[tuple[str, bool, int, float]]:
    """(name, is_dir, size, mtime seconds) of the entries of ``path`` ([] when absent)."""
    if is_local(fs):
        try:
            with os.scandir(path) as it:
                out = []
                for e in it:
                    st = e.stat(follow_symlinks=True)
                    out.append((e.name, e.is_dir(), st.st_size, st.st_mtime))
                return out
        except FileNotFoundError:
            return []
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return [(i.base_name, i.type == pafs.FileType.Directory, i.size or 0,
             i.mtime.timestamp() if i.mtime is not None else time.time()) for i in infos]


def _size(fs: pafs.FileSystem, path: str) -> int | None:
    if is_local(fs):
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return None
    info = fs.get_file_info(path)
    return None if info.type == pafs.FileType.NotFound else info.size


class _Reader:
    """Positional reads of one file (local: pread; elsewhere a RandomAccessFile)."""

    def __init__(self, fs: pafs.FileSystem, path: str, *, writable: bool = False):
        self.path = path
        if is_local(fs):
            # writable: staging files, whose batches are patched in place before copying
            self._fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
            self._f = None
        else:
            self._fd = None
            self._f = fs.open_input_file(path)

    def read(self, pos: int, n: int) -> bytes:
        if self._fd is not None:
            out = os.pread(self._fd, n, pos)
            if len(out) < n:
                # a short pread on a regular file only happens at EOF
                more = os.pread(self._fd, n - len(out), pos + len(out))
                out += more
            return out
        return self._f.read_at(n, pos)

    def read_into(self, buf: bytearray, pos: int) -> None:
        if self._fd is not None:
            view = memoryview(buf)
            while view:
                got = os.preadv(self._fd, [view], pos)
                if got <= 0:
                    raise LogLayoutError("file is shorter than its description", path=self.path,
                                         position=pos)
                view = view[got:]
                pos += got
        else:
            data = self._f.read_at(len(buf), pos)
            if len(data) != len(buf):
                raise LogLayoutError("file is shorter than its description", path=self.path,
                                     position=pos)
            buf[:] = data

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _truncate(path: str, size: int) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_new(fs: pafs.FileSystem, path: str, data: bytes, *, fsync: bool) -> None:
    """Create (or replace) ``path`` with ``data``; not atomic (callers make that safe)."""
    if is_local(fs):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_fully(fd, data)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    else:
        with fs.open_output_stream(path) as f:
            f.write(data)


# ==== reading what is on disk ===========================================================
def _walk_batches(read: Callable[[int, int], bytes], start: int, end: int, path: str
                  ) -> tuple[list[int], list[int], list[int]]:
    """Headers of the batches in ``[start, end)`` of a segment: (positions, last offsets,
    max timestamps). Every magic (0, 1, 2). Raises :class:`CorruptRecordError` naming
    the position for a torn or impossible batch: a partial tail is a broker crash that
    the broker's own recovery must truncate, not something a writer may paper over."""
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
        if magic == 2:
            minimum = wire.V2_MIN_BATCH_LENGTH
        elif magic == 1:
            minimum = wire.LEGACY_V1_MIN_SIZE
        elif magic == 0:
            minimum = wire.LEGACY_V0_MIN_SIZE
        else:
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
class _Segment:
    base: int
    size: int


def _list_segments(fs: pafs.FileSystem, directory: str) -> list[_Segment]:
    segs = []
    for name, is_dir, size, _ in _listdir(fs, directory):
        if is_dir or not name.endswith(".log"):
            continue
        stem = name[:-4]
        if len(stem) == 20 and stem.isdigit():
            segs.append(_Segment(int(stem), size))
    segs.sort(key=lambda s: s.base)
    return segs


def topic_partitions(fs: pafs.FileSystem, root: str, topic: str) -> list[int]:
    """Partition numbers of ``topic`` in log dir ``root`` (directories named exactly
    ``<topic>-<n>``; ``-delete``/``-future``/``-stray`` directories are not partitions)."""
    prefix = topic + "-"
    out = []
    for name, is_dir, _, _ in _listdir(fs, root):
        if is_dir and name.startswith(prefix):
            rest = name[len(prefix):]
            if rest.isdigit() and (rest == "0" or not rest.startswith("0")):
                out.append(int(rest))
    return sorted(out)


def _read_tail(reader: _Reader, size: int, n: int) -> bytes:
    n = min(n, size)
    return reader.read(size - n, n) if n else b""


@dataclass
class _Active:
    """The last segment of a partition as found before the write."""

    base: int
    log_size: int
    index_size: int
    timeindex_size: int
    builder: IndexBuilder | None       # None when its indexes must be rebuilt first
    rebuilt: tuple[bytes, bytes] | None = None


def _inspect_partition(fs: pafs.FileSystem, directory: str, cfg: AppendConfig,
                       ) -> tuple[list[_Segment], _Active | None, int]:
    """Segments, the active segment's state and the log end offset of one partition."""
    segs = _list_segments(fs, directory)
    if not segs:
        return segs, None, 0
    last = segs[-1]
    log_path = segment_file(directory, last.base)
    idx_path = segment_file(directory, last.base, ".index")
    tidx_path = segment_file(directory, last.base, ".timeindex")
    idx_size = _size(fs, idx_path)
    tidx_size = _size(fs, tidx_path)
    builder = None
    if idx_size is not None and tidx_size is not None:
        with _Reader(fs, idx_path) as ri, _Reader(fs, tidx_path) as rt:
            idx_tail = _read_tail(ri, idx_size, OFFSET_ENTRY_SIZE)
            tidx_tail = _read_tail(rt, tidx_size, 2 * TIME_ENTRY_SIZE)
        try:
            builder = IndexBuilder.continuing(
                last.base, cfg.index_interval_bytes, offset_index_tail=idx_tail,
                offset_index_size=idx_size, time_index_tail=tidx_tail,
                time_index_size=tidx_size, path=idx_path, max_index_bytes=cfg.max_index_bytes)
            if builder.last_entry_position >= last.size:
                builder = None
        except LogLayoutError:
            builder = None
    with _Reader(fs, log_path) as r:
        start = builder.last_entry_position if builder is not None else 0
        positions, lasts, max_ts = _walk_batches(r.read, start, last.size, log_path)
    if builder is not None and builder.last_offset_entry is not None and (
            not lasts or lasts[0] != builder.last_offset_entry):
        # the index does not describe this file: rebuild it from the batches
        builder = None
        with _Reader(fs, log_path) as r:
            positions, lasts, max_ts = _walk_batches(r.read, 0, last.size, log_path)
    next_offset = lasts[-1] + 1 if lasts else last.base
    active = _Active(base=last.base, log_size=last.size, index_size=idx_size or 0,
                     timeindex_size=tidx_size or 0, builder=builder)
    if builder is None:
        # Kafka's recovery would rebuild these indexes: do the same (written before the
        # write begins, atomically, so a crash leaves either version — both valid).
        active.rebuilt = build_indexes(last.base, cfg.index_interval_bytes, positions, lasts,
                                       max_ts)
    return segs, active, next_offset


# ==== planning ==========================================================================
@dataclass
class _Dest:
    """Where a run of staged batches goes."""

    seg_index: int                     # into _PartPlan.segments
    dst_position: int
    staged: int                        # index into the staged file list
    src_position: int
    batch_rows: np.ndarray             # rows of that file's batch table
    bases: np.ndarray                  # the base offset each batch gets
    src_path: str = ""                 # the file holding the bytes
    adopt: bool = False                # the whole file becomes the segment (renamed)


@dataclass
class _SegPlan:
    base: int
    existing: bool                     # the partition's active segment, appended to
    start_size: int                    # its size before the write
    end_size: int = 0
    builder: IndexBuilder | None = None
    continuing_index: bool = False     # index files exist and are appended to
    adopted_bytes: int = 0             # > 0: starts as a renamed staging file this long


@dataclass
class _PartPlan:
    topic: str
    partition: int
    directory: str
    create_dir: bool
    start: int
    end: int = 0
    segments: list[_SegPlan] = field(default_factory=list)
    runs: list[_Dest] = field(default_factory=list)
    active: _Active | None = None
    planned_bytes: int = 0
    timeindex_tail: bytes = b""        # the close entry the append replaces (for rollback)


class _TablesCache:
    """Batch tables of the staged files, read once."""

    def __init__(self, fs: pafs.FileSystem, staged: Sequence[StagedFile]):
        self.fs = fs
        self.staged = staged
        self._tables: dict[int, np.ndarray] = {}

    def table(self, i: int) -> np.ndarray:
        t = self._tables.get(i)
        if t is None:
            sf = self.staged[i]
            n = sf.batch_count * BATCH_TABLE_DTYPE.itemsize
            with _Reader(self.fs, sf.path) as r:
                raw = r.read(sf.table_position, n)
            if len(raw) != n:
                raise CommitConflictError("staging file is shorter than its commit message "
                                          "says (deleted or truncated?)", path=sf.path,
                                          position=sf.table_position)
            t = np.frombuffer(raw, dtype=BATCH_TABLE_DTYPE)
            self._tables[i] = t
        return t


def _new_seg(base: int, cfg: AppendConfig) -> _SegPlan:
    return _SegPlan(base=base, existing=False, start_size=0, end_size=0,
                    builder=IndexBuilder.for_new_segment(base, cfg.index_interval_bytes,
                                                         cfg.max_index_bytes))


def _plan_partition(plan: _PartPlan, sections: list[tuple[int, StagedSection]],
                    tables: _TablesCache, cfg: AppendConfig, no_append: bool,
                    overwrite: bool, adopt: bool = False) -> None:
    """Decide offsets, segment rolls and index entries for every staged batch of one
    partition, in staging order (the order of ``sections``)."""
    active = plan.active
    segs = plan.segments
    if active is not None:
        if active.log_size == 0:
            # an empty active segment is reused in every mode (its files are rewritten)
            segs.append(_SegPlan(base=active.base, existing=True, start_size=0, end_size=0,
                                 builder=IndexBuilder.for_new_segment(
                                     active.base, cfg.index_interval_bytes,
                                     cfg.max_index_bytes)))
        elif not (no_append or overwrite):
            if active.builder is None:
                raise AssertionError("active segment indexes must be repaired before planning")
            segs.append(_SegPlan(base=active.base, existing=True,
                                 start_size=active.log_size, end_size=active.log_size,
                                 builder=active.builder, continuing_index=True))
    cur = segs[-1] if segs else None
    next_offset = plan.start
    for staged_i, sec in sections:
        src_path = sec.path or tables.staged[staged_i].path
        table = tables.table(staged_i)[sec.batch_start: sec.batch_start + sec.batch_count]
        if len(table) != sec.batch_count or not len(table):
            raise CommitConflictError("staging batch table does not match its section",
                                      path=tables.staged[staged_i].path)
        sizes = table["size"].astype(np.int64)
        if int(table["position"][0]) != 0 or int(sizes.sum()) != sec.size:
            raise CorruptRecordError("staging batch table does not tile its section",
                                     path=tables.staged[staged_i].path, position=sec.position)
        counts = table["last_offset_delta"].astype(np.int64) + 1
        bases = next_offset + np.concatenate(([0], np.cumsum(counts)[:-1]))
        lasts = bases + counts - 1
        max_ts = table["max_timestamp"]
        rows = np.arange(sec.batch_start, sec.batch_start + sec.batch_count)
        ends = np.cumsum(sizes)
        m = len(table)
        if (adopt and sec.path is not None and sec.size >= cfg.adopt_min_bytes
                and (cur is None or cur.base != int(bases[0]))):
            # The section's file becomes a segment of its own, if one segment holds it
            # all (a segment may not share its base offset with the one before).
            seg = _new_seg(int(bases[0]), cfg)
            if _batches_that_fit(seg, ends, lasts, 0, cfg) == m:
                seg.adopted_bytes = sec.size
                segs.append(seg)
                cur = seg
                cur.builder.add_batches(ends - sizes, lasts, max_ts)
                cur.end_size = sec.size
                _add_run(plan, len(segs) - 1, cur, staged_i, sec, table, rows, bases, 0, m,
                         src_path, adopt=True)
                next_offset = int(lasts[-1]) + 1
                plan.planned_bytes += sec.size
                continue
        j = 0
        while j < m:
            # how many batches from j fit the current segment (LogSegment.shouldRoll:
            # size, relative offset, index fullness); a fresh segment takes at least one
            k = 0 if cur is None else _batches_that_fit(cur, ends, lasts, j, cfg)
            if k == 0:
                cur = _new_seg(int(bases[j]), cfg)
                segs.append(cur)
                continue
            chunk = slice(j, j + k)
            chunk_sizes = sizes[chunk]
            positions = cur.end_size + np.cumsum(chunk_sizes) - chunk_sizes
            cur.builder.add_batches(positions, lasts[chunk], max_ts[chunk])
            cur.end_size += int(chunk_sizes.sum())
            _add_run(plan, len(segs) - 1, cur, staged_i, sec, table, rows, bases, j, j + k,
                     src_path)
            j += k
        next_offset = int(lasts[-1]) + 1
        plan.planned_bytes += sec.size
    plan.end = next_offset
    if overwrite and not any(s.base >= plan.start for s in segs):
        # an overwrite leaves a segment starting at the new log start even with no rows
        segs.append(_new_seg(plan.start, cfg))
    if not segs:
        # a partition with no segment yet gets its (empty) first one
        segs.append(_new_seg(plan.start, cfg))


def _batches_that_fit(cur: _SegPlan, ends: np.ndarray, lasts: np.ndarray, j: int,
                      cfg: AppendConfig) -> int:
    """How many batches from ``j`` (``ends``: cumulative sizes) fit segment ``cur``, as
    ``LogSegment.shouldRoll`` decides: size, relative offset, index fullness. An empty
    segment takes at least one."""
    used = ends[j - 1] if j else 0
    k = int(np.searchsorted(ends[j:] - used, cfg.segment_bytes - cur.end_size,
                            side="right"))
    k = min(k, int(np.searchsorted(lasts[j:], cur.base + INT32_MAX, side="right")))
    room = min(cur.builder.max_index_bytes // OFFSET_ENTRY_SIZE
               - cur.builder.offset_entry_count,
               cur.builder.max_index_bytes // TIME_ENTRY_SIZE
               - cur.builder.time_entry_count)
    k = min(k, max(room, 0))
    if cur.end_size == 0 and k == 0 and room > 0:
        k = 1
    return k


def _add_run(plan: _PartPlan, seg_index: int, seg: _SegPlan, staged_i: int,
             sec: StagedSection, table: np.ndarray, rows: np.ndarray, bases: np.ndarray,
             a: int, b: int, src_path: str, adopt: bool = False) -> None:
    size = int(table["size"][a:b].astype(np.int64).sum())
    plan.runs.append(_Dest(
        seg_index=seg_index, dst_position=seg.end_size - size, staged=staged_i,
        src_position=sec.position + int(table["position"][a]),
        batch_rows=rows[a:b], bases=bases[a:b].astype(np.int64), src_path=src_path,
        adopt=adopt))


def _segment_ranges(plan: _PartPlan) -> list[list[int]]:
    """[[segment base, first byte, end byte], ...] the write appends."""
    return [[s.base, s.start_size, s.end_size] for s in plan.segments
            if s.end_size > s.start_size]


# ==== applying ==========================================================================
class _SegOut:
    """Writes one segment's .log bytes: positioned writes into a local file (appending to
    an existing one) or one sequential output stream (a new object)."""

    def __init__(self, fs: pafs.FileSystem, path: str, seg: _SegPlan):
        self.fs = fs
        self.path = path
        self.seg = seg
        self.written_to = seg.start_size if seg.existing else 0
        self._fd = None
        self._stream = None
        if seg.adopted_bytes:
            # a staging file renamed into place (see _adopt): appended to after its bytes
            self._fd = os.open(path, os.O_RDWR)
            self.written_to = seg.adopted_bytes
        elif is_local(fs):
            # read-write: batches copied in the kernel are patched through a mapping
            if seg.existing:
                self._fd = os.open(path, os.O_RDWR)
                if seg.start_size == 0:
                    os.ftruncate(self._fd, 0)
            else:
                try:
                    self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                except FileExistsError as err:
                    raise CommitConflictError("segment file appeared under the writer lock",
                                              path=path) from err
        else:
            self._stream = fs.open_output_stream(path)

    def write(self, data, position: int) -> None:
        if position != self.written_to:
            raise AssertionError(f"non-sequential segment write at {position}, "
                                 f"expected {self.written_to}")
        view = memoryview(data)
        if self._fd is not None:
            write_fully(self._fd, view, position)
        else:
            self._stream.write(view)
        self.written_to += len(data)

    def close(self, syncer: "_Syncer | None") -> None:
        """Close; with a syncer, the file is fsynced (then closed) in its background
        thread, overlapping the disk flush with the copy of the next segment."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            if syncer is not None:
                syncer.fsync_and_close(fd)
            else:
                os.close(fd)
        if self._stream is not None:
            self._stream.close()
            self._stream = None


class _Syncer:
    """fsyncs files in background threads (the kernel flushes in parallel with the
    copying of further data); :meth:`wait` joins them and re-raises the first error."""

    def __init__(self):
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kafkalog-fsync")
        self._futures: list = []

    @staticmethod
    def _run(fd: int) -> None:
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_and_close(self, fd: int) -> None:
        self._futures.append(self._pool.submit(self._run, fd))

    def fsync_dir(self, directory: str) -> None:
        self.fsync_and_close(os.open(directory, os.O_RDONLY | os.O_DIRECTORY))

    def wait(self) -> None:
        try:
            for f in self._futures:
                f.result()
        finally:
            self._futures = []
            self._pool.shutdown(wait=True)


_ARANGE8 = np.arange(8, dtype=np.int64)
_ARANGE4 = np.arange(4, dtype=np.int64)


def _check_batches(v: np.ndarray, rel: np.ndarray, sizes: np.ndarray
                   ) -> tuple[int, int, int] | None:
    """Check that the bytes of ``v`` at ``rel`` are the batches the table describes (magic
    2, matching length). Returns (index, magic, length) of the first mismatch, None when
    all is well (the caller raises, once no view of a mapped file is alive)."""
    magic = v[rel + wire.MAGIC_POS]
    length = v[(rel + wire.SIZE_POS)[:, None] + _ARANGE4].copy().view(">i4").ravel()
    bad = np.flatnonzero((magic != 2) | (length.astype(np.int64) != sizes - wire.LOG_OVERHEAD))
    if len(bad):
        k = int(bad[0])
        return k, int(magic[k]), int(length[k])
    return None


def _patch_batches(v: np.ndarray, rel: np.ndarray, sizes: np.ndarray, bases: np.ndarray
                   ) -> tuple[int, int, int] | None:
    """Rewrite each batch's baseOffset in the byte array ``v`` (batches start at ``rel``),
    after :func:`_check_batches`; returns its mismatch (and patches nothing) if any."""
    bad = _check_batches(v, rel, sizes)
    if bad is None:
        v[rel[:, None] + _ARANGE8] = bases.astype(">i8").view(np.uint8).reshape(-1, 8)
    return bad


def _mismatch(bad: tuple[int, int, int], rel: np.ndarray, sizes: np.ndarray, path: str,
              position: int) -> CorruptRecordError:
    k, magic, length = bad
    return CorruptRecordError("staged bytes are not the record batch their table describes "
                              f"(magic {magic}, length {length}, expected "
                              f"{int(sizes[k]) - wire.LOG_OVERHEAD})", path=path,
                              position=position + int(rel[k]))


def _copy_local(reader: _Reader, out: _SegOut, src: int, dst: int, nbytes: int) -> bool:
    """Kernel-side copy (no trip through user space). False when the kernel or the
    filesystem cannot (the caller falls back to read + write)."""
    global _COPY_FILE_RANGE
    if not _COPY_FILE_RANGE:
        return False
    done = 0
    try:
        while done < nbytes:
            n = os.copy_file_range(reader._fd, out._fd, nbytes - done, src + done, dst + done)
            if n <= 0:
                raise LogLayoutError("staging file is shorter than its description",
                                     path=reader.path, position=src + done)
            done += n
    except OSError as err:
        if err.errno in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL) \
                and done == 0:
            _COPY_FILE_RANGE = False
            return False
        raise
    return True


_COPY_FILE_RANGE = hasattr(os, "copy_file_range")


def _patch_in_place(fd: int, pos: int, nbytes: int, rel: np.ndarray, sizes: np.ndarray,
                    bases: np.ndarray, path: str) -> None:
    """Check the batches at ``[pos, pos + nbytes)`` of a file through a read-only mapping
    of that range, then write each baseOffset with ``pwrite``.

    Not through a shared writable mapping: pages dirtied through a mapping made the
    fsync after them ~40 ms per file on ext4, whatever their number (measured: 8 files
    of 34 MB flushed before, one 8-byte patch per MiB: fsyncs 0.33 s through the mapping,
    0.02 s by pwrite)."""
    start = pos - pos % mmap.ALLOCATIONGRANULARITY
    if _FADVISE:            # flush-behind may have dropped them: read them all at once
        for position in (rel + pos).tolist():
            _FADVISE(fd, position, _HEADER_READ, os.POSIX_FADV_WILLNEED)
    with mmap.mmap(fd, pos + nbytes - start, offset=start, access=mmap.ACCESS_READ) as mm:
        v = np.frombuffer(mm, dtype=np.uint8)
        bad = _check_batches(v[pos - start:], rel, sizes)
        del v
    if bad is not None:
        raise _mismatch(bad, rel, sizes, path, pos)
    raw = bases.astype(">i8").tobytes()
    at = (rel + pos).tolist()
    for k, position in enumerate(at):
        if os.pwrite(fd, raw[8 * k:8 * k + 8], position) != 8:
            raise OSError(errno.EIO, "short write patching a baseOffset", path)


def _prefetch_headers(plans: Mapping[str, list[_PartPlan]], tables: _TablesCache) -> None:
    """Ask, all at once, for the page holding each batch header that :func:`_adopt` will
    check and patch (flush-behind dropped them from the page cache).

    Why: asked for by :func:`_patch_in_place`, one window of batches at a time after the
    journal's first fsync, they were read window by window (measured: 2 to 116 ms per
    280 MB write, against 1 to 4 ms per file when cached). Asked for here, before that
    fsync (which waits for the tasks' last flush-behind), the reads overlap it."""
    if not _FADVISE:
        return
    for part_plans in plans.values():
        for plan in part_plans:
            for run in plan.runs:
                if not run.adopt:
                    continue
                sizes = tables.table(run.staged)[run.batch_rows]["size"].astype(np.int64)
                starts = np.cumsum(sizes) - sizes + run.src_position
                try:
                    fd = os.open(run.src_path, os.O_RDONLY)
                except OSError:
                    continue                # _adopt reports what is wrong with it
                try:
                    for position in starts.tolist():
                        _FADVISE(fd, position, _HEADER_READ, os.POSIX_FADV_WILLNEED)
                finally:
                    os.close(fd)


def _copy_run(run: _Dest, reader: _Reader, out: _SegOut, table: np.ndarray,
              fault: Fault) -> None:
    rows = table[run.batch_rows]
    sizes = rows["size"].astype(np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    i = 0
    n = len(rows)
    local = reader._fd is not None and out._fd is not None
    while i < n:
        # the largest run of whole batches from i that fits a window (at least one)
        j = int(np.searchsorted(ends, starts[i] + COPY_WINDOW_BYTES, side="right"))
        j = max(j, i + 1)
        nbytes = int(ends[j - 1] - starts[i])
        src = run.src_position + int(starts[i])
        dst = run.dst_position + int(starts[i])
        half = nbytes // 2
        if local and _COPY_FILE_RANGE:
            # Patch the staged copy first, so the segment only ever receives final bytes
            # (a crash mid-copy leaves at most a torn last batch, never stale offsets),
            # then let the kernel copy them.
            _patch_in_place(reader._fd, src, nbytes, starts[i:j] - starts[i], sizes[i:j],
                            run.bases[i:j], reader.path)
            if _copy_local(reader, out, src, dst, half):
                fault("append-partial")
                if not _copy_local(reader, out, src + half, dst + half, nbytes - half):
                    raise AssertionError("copy_file_range stopped working mid-copy")
                out.written_to += nbytes
                fault("append")
                i = j
                continue
        buf = bytearray(nbytes)
        reader.read_into(buf, src)
        rel = starts[i:j] - starts[i]
        bad = _patch_batches(np.frombuffer(buf, dtype=np.uint8), rel, sizes[i:j],
                             run.bases[i:j])
        if bad is not None:
            raise _mismatch(bad, rel, sizes[i:j], reader.path, src)
        # two writes per window, with a fault point between them, so crash tests also
        # kill with a batch half written
        out.write(memoryview(buf)[:half], dst)
        fault("append-partial")
        out.write(memoryview(buf)[half:], dst + half)
        fault("append")
        i = j


def _adopt(run: _Dest, table: np.ndarray, path: str, fault: Fault) -> bool:
    """Make the staging file of ``run`` (a whole section, planned as a segment of its own)
    the segment ``path``: check and patch every batch's baseOffset in place, then link
    it under the segment's name (never replacing a file) and drop the staging name.
    Local filesystems only. False (nothing changed but the patched offsets) when the
    filesystem has no hard links; the caller copies instead."""
    rows = table[run.batch_rows]
    sizes = rows["size"].astype(np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    fd = os.open(run.src_path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size != int(ends[-1]):
            raise CommitConflictError("staging file is not the size its commit message says "
                                      "(changed or truncated?)", path=run.src_path)
        i = 0
        n = len(rows)
        while i < n:                       # one mapping window at a time
            j = max(int(np.searchsorted(ends, starts[i] + COPY_WINDOW_BYTES, side="right")),
                    i + 1)
            _patch_in_place(fd, int(starts[i]), int(ends[j - 1] - starts[i]),
                            starts[i:j] - starts[i], sizes[i:j], run.bases[i:j], run.src_path)
            i = j
    finally:
        os.close(fd)
    fault("adopt-patched")
    try:
        os.link(run.src_path, path)
    except FileExistsError as err:
        raise CommitConflictError("segment file appeared under the writer lock",
                                  path=path) from err
    except OSError as err:
        if err.errno in (errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            return False
        raise
    fault("append")
    os.unlink(run.src_path)
    return True


def _write_indexes(fs: pafs.FileSystem, directory: str, seg: _SegPlan, active: _Active | None,
                   syncer: "_Syncer | None") -> None:
    """Write (or extend) the segment's .index and .timeindex; with a syncer, each file is
    fsynced in its background thread (alongside the .log files' flushes)."""
    b = seg.builder
    idx_path = segment_file(directory, seg.base, ".index")
    tidx_path = segment_file(directory, seg.base, ".timeindex")
    close = b.close_entry()
    if not is_local(fs):
        _write_new(fs, idx_path, bytes(b.offset_entries), fsync=False)
        _write_new(fs, tidx_path, bytes(b.time_entries) + close, fsync=False)
        return
    if seg.continuing_index:
        writes = [(idx_path, os.O_WRONLY, None, bytes(b.offset_entries), active.index_size)]
        keep = active.timeindex_size - b.drop_time_tail_bytes
        writes.append((tidx_path, os.O_WRONLY, keep, bytes(b.time_entries) + close, keep))
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        writes = [(idx_path, flags, None, bytes(b.offset_entries), 0),
                  (tidx_path, flags, None, bytes(b.time_entries) + close, 0)]
    for path, flags, truncate_to, data, position in writes:
        fd = os.open(path, flags, 0o644)
        try:
            if truncate_to is not None:
                os.ftruncate(fd, truncate_to)
            write_fully(fd, data, position)
        except BaseException:
            os.close(fd)
            raise
        if syncer is not None:
            syncer.fsync_and_close(fd)
        else:
            os.close(fd)


def _apply_partition(fs: pafs.FileSystem, plan: _PartPlan, staged: Sequence[StagedFile],
                     tables: _TablesCache, cfg: AppendConfig, fault: Fault,
                     syncer: _Syncer | None) -> None:
    if plan.create_dir:
        if is_local(fs):
            os.makedirs(plan.directory, exist_ok=True)
        else:
            fs.create_dir(plan.directory, recursive=True)
    outs: dict[int, _SegOut] = {}
    readers: dict[str, _Reader] = {}
    adopted = {run.seg_index: run for run in plan.runs if run.adopt}
    try:
        for k, seg in enumerate(plan.segments):
            path = segment_file(plan.directory, seg.base)
            run = adopted.get(k)
            if run is not None and not _adopt(run, tables.table(run.staged), path, fault):
                # no hard links here: the segment is written by copying after all
                del adopted[k]
                seg.adopted_bytes = 0
            outs[k] = _SegOut(fs, path, seg)
        for run in plan.runs:
            if run.adopt and run.seg_index in adopted:
                continue
            reader = readers.get(run.src_path)
            if reader is None:
                reader = readers[run.src_path] = _Reader(fs, run.src_path, writable=True)
            _copy_run(run, reader, outs[run.seg_index], tables.table(run.staged), fault)
        for k, seg in enumerate(plan.segments):
            out = outs.pop(k)
            if out.written_to != seg.end_size:
                raise AssertionError("segment plan and bytes written disagree")
            out.close(syncer)
            _write_indexes(fs, plan.directory, seg, plan.active, syncer)
            fault("segment")
        if cfg.fsync and is_local(fs):
            # the new segment names (links, created files), in the background like the
            # files themselves: done inline, each directory's fsync (an ext4 journal
            # commit) waited for the flush of every staged byte still in flight, and the
            # next partition's work waited for it (measured, 280 MB writes: commit
            # median 181 -> 117 ms). The commit point still waits for all of them.
            sync_dir = syncer.fsync_dir if syncer is not None else jr.fsync_dir
            sync_dir(plan.directory)
            if plan.create_dir:
                sync_dir(os.path.dirname(plan.directory))
    finally:
        for out in outs.values():
            out.close(None)
        for r in readers.values():
            r.close()


# ==== rollback / post-commit ============================================================
def _delete_segment_files(fs: pafs.FileSystem, directory: str, base: int) -> None:
    # .log last: while it exists the segment is visible, so remove its indexes first
    # and the log itself at the end (a crash leaves an indexless segment, which Kafka and
    # our reader both handle, never an index without its log).
    for suffix in (".index", ".timeindex", ".txnindex", ".log"):
        _delete_if_exists(fs, segment_file(directory, base, suffix))


def _rollback_partition(fs: pafs.FileSystem, root: str, topic: str, partition: int,
                        info: dict) -> None:
    directory = partition_dir(root, topic, partition)
    segs = _list_segments(fs, directory)
    active_base = info.get("active_base")
    for s in segs:
        if active_base is None or s.base > active_base:
            _delete_segment_files(fs, directory, s.base)
    if active_base is not None:
        log_path = segment_file(directory, active_base)
        size = _size(fs, log_path)
        log_size = int(info["log_size"])
        if size is None:
            raise LogLayoutError("the segment a pending write appended to is gone; cannot "
                                 "roll the write back", path=log_path)
        if size < log_size:
            raise LogLayoutError(f"segment is shorter ({size} bytes) than before the pending "
                                 f"write ({log_size}); cannot roll back", path=log_path)
        if size > log_size + int(info.get("planned_bytes", 0)):
            raise CommitConflictError(
                "segment holds more bytes than the pending write could have appended: "
                "something else (a broker?) wrote to it; refusing to truncate", path=log_path,
                position=log_size)
        idx_path = segment_file(directory, active_base, ".index")
        tidx_path = segment_file(directory, active_base, ".timeindex")
        if log_size == 0:
            if is_local(fs):
                for path in (log_path, idx_path, tidx_path):
                    if _size(fs, path):
                        _truncate(path, 0)
            else:
                for path in (log_path, idx_path, tidx_path):
                    _write_new(fs, path, b"", fsync=False)
        elif is_local(fs) and not info.get("no_append"):
            if size > log_size:
                _truncate(log_path, log_size)
            if (_size(fs, idx_path) or 0) > int(info["index_size"]):
                _truncate(idx_path, int(info["index_size"]))
            tail = bytes.fromhex(info.get("timeindex_tail", ""))
            tsize = int(info["timeindex_size"])
            fd = os.open(tidx_path, os.O_WRONLY)
            try:
                os.ftruncate(fd, tsize - len(tail))
                if tail:
                    os.pwrite(fd, tail, tsize - len(tail))
                os.fsync(fd)
            finally:
                os.close(fd)
    if info.get("created_dir"):
        leftovers = _listdir(fs, directory)
        if not leftovers:
            if is_local(fs):
                with contextlib.suppress(FileNotFoundError):
                    os.rmdir(directory)
            else:
                fs.delete_dir(directory)
    if is_local(fs) and os.path.isdir(directory):
        jr.fsync_dir(directory)


def _update_checkpoints(fs: pafs.FileSystem, root: str, topic: str, pending: dict,
                        fault: Fault) -> None:
    from spark_kafkalog.log.checkpoint import read_checkpoint, write_checkpoint

    parts = {int(p): info for p, info in pending["partitions"].items()}
    updates = [(RECOVERY_POINT_FILE, {p: int(i["end"]) for p, i in parts.items()}),
               (HIGH_WATERMARK_FILE, {p: int(i["end"]) for p, i in parts.items()})]
    if pending.get("mode") == "overwrite":
        updates.append((LOG_START_FILE, {int(p): int(s) for p, s in
                                         (pending.get("log_start") or {}).items()}))
    with CheckpointLock(fs, root):
        for name, values in updates:
            path = f"{root.rstrip('/')}/{name}"
            current = read_checkpoint(fs, path) if _size(fs, path) is not None else {}
            merged = dict(current)
            for p, v in values.items():
                merged[(topic, p)] = max(int(current.get((topic, p), -1)), v)
            if merged != current:
                write_checkpoint(fs, path, merged)
            fault(f"checkpoint:{name}")


def _post_commit(fs: pafs.FileSystem, root: str, topic: str, pending: dict,
                 fault: Fault) -> None:
    """Idempotent work after the commit point: checkpoints, then an overwrite's old
    segments (after the log start offset has moved past them)."""
    _update_checkpoints(fs, root, topic, pending, fault)
    if pending.get("mode") == "overwrite":
        for p, start in (pending.get("log_start") or {}).items():
            directory = partition_dir(root, topic, int(p))
            for s in _list_segments(fs, directory):
                if s.base < int(start):
                    _delete_segment_files(fs, directory, s.base)
                    fault("delete-old")
            if is_local(fs):
                jr.fsync_dir(directory)


def _commit_entry(pending: dict) -> dict:
    return {"write_id": pending["write_id"], "mode": pending["mode"],
            "committed_ms": jr.now_ms(),
            "partitions": {p: {"start": i["start"], "end": i["end"],
                               "segments": i["segments"]}
                           for p, i in pending["partitions"].items()}}


def _delete_staging(fs: pafs.FileSystem, root: str, write_id: str | None,
                    paths: Iterable[str] = ()) -> None:
    for path in paths:
        _delete_if_exists(fs, path)
    now = time.time()
    token = jr.STAGING_PREFIX + jr.write_token(write_id) + "." if write_id else None
    for name, is_dir, _, mtime in _listdir(fs, root):
        if is_dir or not name.startswith(jr.STAGING_PREFIX):
            continue
        if (token and name.startswith(token)) or now - mtime > STAGING_TTL_S:
            _delete_if_exists(fs, f"{root.rstrip('/')}/{name}")


def _recover_locked(fs: pafs.FileSystem, root: str, topic: str, fault: Fault) -> dict:
    state = jr.load(fs, root, topic)
    pending = state.pending
    if pending is None:
        return {"rolled_back": None, "rolled_forward": None}
    write_id = pending["write_id"]
    decided = pending.get("state") == "committed"
    coordinator = pending.get("coordinator", topic)
    if not decided and coordinator != topic:
        decided = jr.load(fs, root, coordinator).is_committed(write_id)
    if not decided:
        for p, info in sorted(pending["partitions"].items(), key=lambda kv: int(kv[0])):
            _rollback_partition(fs, root, topic, int(p), info)
            fault("rollback")
        # staging goes before the journal forgets the write: a crash in between must
        # not leave files nobody knows about
        _delete_staging(fs, root, write_id)
        fault("rolled-back")
        state.pending = None
        state.record_rollback(write_id)
        jr.save(fs, root, state)
        return {"rolled_back": write_id, "rolled_forward": None}
    if pending.get("state") != "committed":
        pending["state"] = "committed"
        state.record_commit(_commit_entry(pending))
        jr.save(fs, root, state)
    _post_commit(fs, root, topic, pending, fault)
    _delete_staging(fs, root, write_id)
    state.pending = None
    jr.save(fs, root, state)
    return {"rolled_back": None, "rolled_forward": write_id}


def recover_topic(fs: pafs.FileSystem, root: str, topic: str, *,
                  lock_timeout: float | None = None, fault: Fault | None = None) -> dict:
    """See :func:`spark_kafkalog.log.journal.recover`."""
    jr.validate_topic(topic)
    root = _norm_root(root)
    fault = fault or _no_fault
    if _size(fs, jr.journal_path(root, topic)) is None:
        return {"rolled_back": None, "rolled_forward": None}
    with BrokerDirGuard(fs, root), TopicLock(
            fs, root, topic, timeout=DEFAULT_LOCK_TIMEOUT_S if lock_timeout is None
            else lock_timeout):
        return _recover_locked(fs, root, topic, fault)


def _norm_root(root: str) -> str:
    return root.rstrip("/") or "/"


# ==== the commit ========================================================================
@dataclass(frozen=True)
class CommitResult:
    """What a commit did: ``ranges[topic][partition] = (start, end)`` offsets appended
    (end exclusive); ``noop`` when the write id was already committed (or mode
    ``ignore`` found the topic)."""

    write_id: str
    ranges: dict
    noop: bool = False


def _repair_active(fs: pafs.FileSystem, directory: str, active: _Active) -> None:
    """Replace a segment's damaged or untrimmed indexes with the ones Kafka's recovery
    would build (atomic per file)."""
    idx, tidx = active.rebuilt
    jr.atomic_write(fs, segment_file(directory, active.base, ".index"), idx)
    jr.atomic_write(fs, segment_file(directory, active.base, ".timeindex"), tidx)


def commit_write(fs: pafs.FileSystem, root: str, write_id: str,
                 staged: Sequence[StagedFile | None], topics: Sequence[TopicSpec], *,
                 mode: str = "append", config: AppendConfig | None = None,
                 fault: Fault | None = None) -> CommitResult:
    """Commit a write: every staged batch lands in the log with contiguous offsets, or
    none does. Idempotent per ``write_id``. ``None`` entries in ``staged`` (failed tasks)
    are ignored. Staging files are deleted afterwards, whatever the outcome.

    Raises :class:`CommitConflictError` (broker holds the dir, lock timeout, topic exists
    in ``errorifexists`` mode, partition count changed), :class:`InvalidOptionError`
    (a staged partition outside the topic, unknown mode), :class:`LogLayoutError` /
    :class:`CorruptRecordError` for an unusable log or staging file."""
    if mode not in MODES:
        raise InvalidOptionError(f"save mode {mode!r} is not one of {', '.join(MODES)}")
    cfg = config or AppendConfig()
    fault = fault or _no_fault
    root = _norm_root(root)
    staged = [s for s in staged if s is not None]
    specs = {t.topic: t for t in topics}
    for sf in staged:
        for sec in sf.sections:
            if sec.topic not in specs:
                specs[sec.topic] = TopicSpec(sec.topic)
    for name in specs:
        jr.validate_topic(name)
    names = sorted(specs)
    staged_paths = [sf.path for sf in staged]
    no_append = (not is_local(fs)) if cfg.no_append is None else bool(cfg.no_append)
    if not names:
        _delete_staging(fs, root, write_id, staged_paths)
        return CommitResult(write_id, {}, noop=True)
    if is_local(fs):
        os.makedirs(root, exist_ok=True)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(BrokerDirGuard(fs, root))
            locks = [stack.enter_context(TopicLock(fs, root, t, write_id=write_id,
                                                   timeout=cfg.lock_timeout))
                     for t in names]
            fault("locked")
            for t in names:
                _recover_locked(fs, root, t, fault)
            states = {t: jr.load(fs, root, t) for t in names}
            coordinator = names[0]
            if states[coordinator].is_committed(write_id):
                return CommitResult(write_id, {}, noop=True)
            existing = {t: topic_partitions(fs, root, t) for t in names}
            if mode == "errorifexists":
                taken = [t for t in names if existing[t]]
                if taken:
                    raise CommitConflictError(f"topic {taken[0]!r} already exists in the log "
                                              "dir (save mode errorifexists)", path=root)
            if mode == "ignore" and any(existing[t] for t in names):
                return CommitResult(write_id, {}, noop=True)
            plans = _plan_all(fs, root, staged, specs, existing, cfg, no_append,
                              overwrite=(mode == "overwrite"))
            tables = plans.pop("__tables__")
            if is_local(fs):
                _prefetch_headers(plans, tables)
            for lk in locks:
                lk.refresh()
            # ---- begin
            begun: list[str] = []
            try:
                for t in names:
                    st = states[t]
                    st.pending = _pending_record(write_id, mode, coordinator, names,
                                                 plans[t], no_append)
                    jr.save(fs, root, st)
                    begun.append(t)
                fault("begun")
                # ---- append
                syncer = _Syncer() if cfg.fsync and is_local(fs) else None
                try:
                    for t in names:
                        for plan in plans[t]:
                            _apply_partition(fs, plan, staged, tables, cfg, fault, syncer)
                finally:
                    if syncer is not None:
                        syncer.wait()
                fault("synced")
                # ---- commit: the coordinator's journal write is the commit point
                st = states[coordinator]
                st.pending["state"] = "committed"
                st.record_commit(_commit_entry(st.pending))
                jr.save(fs, root, st)
            except Exception:
                # An ordinary error before the commit point: undo now, under the locks we
                # hold (a crash instead leaves the journal for the next open to undo).
                for t in begun:
                    _recover_locked(fs, root, t, _no_fault)
                raise
            fault(f"committed:{coordinator}")
            # ---- past the commit point: finish; what fails here the next open redoes
            try:
                for t in names[1:]:
                    st = states[t]
                    st.pending["state"] = "committed"
                    st.record_commit(_commit_entry(st.pending))
                    jr.save(fs, root, st)
                    fault(f"committed:{t}")
                for t in names:
                    _post_commit(fs, root, t, states[t].pending, fault)
                _delete_staging(fs, root, write_id, staged_paths)
                fault("staging-deleted")
                for t in names:
                    st = states[t]
                    st.pending = None
                    jr.save(fs, root, st)
                    fault(f"done:{t}")
            except Exception as err:     # the write is committed; report, don't fail it
                warnings.warn(f"write {write_id} committed, but finishing it failed ({err}); "
                              "the next writer or recover() completes it",
                              RuntimeWarning, stacklevel=2)
            ranges = {t: {p.partition: (p.start, p.end) for p in plans[t]} for t in names}
            return CommitResult(write_id, ranges)
    finally:
        # this write's staging files, including those of task attempts Spark discarded
        _delete_staging(fs, root, write_id, staged_paths)


def abort_write(fs: pafs.FileSystem, root: str, write_id: str | None,
                staged: Sequence[StagedFile | None] = ()) -> None:
    """Abandon a write that never reached :func:`commit_write`: delete its staging files
    (those listed and, with ``write_id``, every other attempt's). The log is untouched."""
    _delete_staging(fs, _norm_root(root), write_id,
                    [s.path for s in staged if s is not None])


def _pending_record(write_id: str, mode: str, coordinator: str, names: list[str],
                    plans: list[_PartPlan], no_append: bool) -> dict:
    parts = {}
    log_start = {}
    for plan in plans:
        a = plan.active
        parts[str(plan.partition)] = {
            "start": plan.start, "end": plan.end,
            "active_base": a.base if a is not None else None,
            "log_size": a.log_size if a is not None else 0,
            "index_size": a.index_size if a is not None else 0,
            "timeindex_size": a.timeindex_size if a is not None else 0,
            "timeindex_tail": plan.timeindex_tail.hex(),
            "created_dir": plan.create_dir, "planned_bytes": plan.planned_bytes,
            "segments": _segment_ranges(plan), "no_append": no_append,
        }
        if mode == "overwrite":
            log_start[str(plan.partition)] = plan.start
    return {"write_id": write_id, "mode": "overwrite" if mode == "overwrite" else "append",
            "state": "begun", "coordinator": coordinator, "topics": names,
            "begun_ms": jr.now_ms(), "partitions": parts, "log_start": log_start}


def _plan_all(fs: pafs.FileSystem, root: str, staged: Sequence[StagedFile],
              specs: Mapping[str, TopicSpec], existing: Mapping[str, list[int]],
              cfg: AppendConfig, no_append: bool, overwrite: bool) -> dict:
    tables = _TablesCache(fs, staged)
    by_part: dict[tuple[str, int], list[tuple[int, StagedSection]]] = {}
    for i, sf in enumerate(staged):
        for sec in sf.sections:
            by_part.setdefault((sec.topic, sec.partition), []).append((i, sec))
    out: dict = {"__tables__": tables}
    for t, spec in specs.items():
        parts = existing[t]
        if parts:
            n = len(parts)
            if parts != list(range(n)):
                # A broker's log dir may hold only some partitions of a topic (the others
                # live on other brokers): write only to the ones here.
                n = None
            if spec.expected_partitions is not None and n is not None \
                    and spec.expected_partitions != n:
                raise CommitConflictError(
                    f"topic {t!r} has {n} partitions but the rows were partitioned for "
                    f"{spec.expected_partitions} (was it created by another writer "
                    "meanwhile?)", path=root)
        else:
            n = spec.partitions_if_new
            if n < 1:
                raise InvalidOptionError(f"option 'partitions': topic {t!r} needs at least "
                                         "one partition")
        for (tt, p) in by_part:
            if tt != t:
                continue
            if n is not None and not 0 <= p < n:
                raise InvalidOptionError(f"partition {p} is outside topic {t!r}, which has "
                                         f"{n} partitions (0..{n - 1})")
            if n is None and p not in parts:
                raise InvalidOptionError(
                    f"partition {p} of topic {t!r} has no directory in this log dir (it "
                    f"holds partitions {parts[:20]}); write those partitions to the log dir "
                    "that holds them", path=root)
        if overwrite or not parts:
            touched = list(range(n)) if n is not None else list(parts)
        else:
            touched = sorted(p for (tt, p) in by_part if tt == t)
        plans = []
        for p in touched:
            directory = partition_dir(root, t, p)
            create = p not in parts
            segs, active, leo = ([], None, 0) if create else _inspect_partition(
                fs, directory, cfg)
            if active is not None and active.rebuilt is not None and not no_append:
                _repair_active(fs, directory, active)
                segs, active, leo = _inspect_partition(fs, directory, cfg)
                if active.builder is None and active.log_size:
                    raise LogLayoutError("could not repair the active segment's indexes",
                                         path=directory)
            plan = _PartPlan(topic=t, partition=p, directory=directory, create_dir=create,
                             start=leo, active=active)
            if (active is not None and active.builder is not None and active.log_size
                    and active.builder.drop_time_tail_bytes and not no_append
                    and not overwrite):
                with _Reader(fs, segment_file(directory, active.base, ".timeindex")) as r:
                    plan.timeindex_tail = r.read(active.timeindex_size - TIME_ENTRY_SIZE,
                                                 TIME_ENTRY_SIZE)
            _plan_partition(plan, by_part.get((t, p), []), tables, cfg, no_append, overwrite,
                            adopt=is_local(fs))
            plans.append(plan)
        out[t] = plans
    return out
