"""The task side of a write: encoded record batches streamed into staging files at the
log-dir root, described by a small picklable :class:`StagedFile` the driver commits.

A staging file holds the sections' bytes, then a table with one row per batch
(position, size, last offset delta, max timestamp, record count), so the driver never
parses record bytes."""
from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from spark_kafkalog.errors import BadRowError, CommitConflictError
from spark_kafkalog.format import wire
from spark_kafkalog.format.npview import to_numpy
from spark_kafkalog.log.io import sysio, write_fully
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.io import delete_file, file_size, is_local
from spark_kafkalog.log.write.flush import BehindFlush

#: one row per staged batch; position is relative to its section's first byte;
#: base_offset is the offset the batch keeps in a write with offsets="preserve" (a write
#: that assigns offsets ignores it)
BATCH_TABLE_DTYPE = np.dtype([("position", "<i8"), ("size", "<i4"),
                              ("last_offset_delta", "<i4"), ("max_timestamp", "<i8"),
                              ("record_count", "<i4"), ("base_offset", "<i8")])


#: a partition's bytes past this many in one task go into a staging file of its own (see
#: :class:`StagingWriter`): at most one such file per MiB staged, and a small partition
#: (most of a topic of thousands) adds none
OWN_FILE_MIN_BYTES = 1024 * 1024


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
    record_count, either last_offset_delta or base_offset + last_offset, and (for a
    write that preserves offsets) base_offset."""
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
    out["base_offset"] = _column(batches, "base_offset") if "base_offset" in names else 0
    return out


def _check_table(table: np.ndarray, data_size: int, path: str) -> None:
    """``table`` describes whole batches tiling ``data_size`` bytes (positions relative to
    the bytes being staged into ``path``): :func:`_tiles` for one section, and where it
    fails, an error saying where."""
    n = len(table)
    if _tiles(table, np.zeros(1, np.int64), np.full(1, n, np.int64),
              np.full(1, data_size, np.int64)):
        return
    if n == 0:
        raise BadRowError(f"{data_size} staged bytes without a batch table", path=path)
    pos = table["position"]
    size = table["size"].astype(np.int64)
    steps = np.flatnonzero(pos[1:] != pos[:-1] + size[:-1])
    if pos[0] != 0 or len(steps) or int(pos[-1] + size[-1]) != data_size:
        at = 0 if pos[0] != 0 else int(pos[steps[0] + 1]) if len(steps) else int(pos[-1])
        raise BadRowError(f"batch table does not tile the staged bytes ({data_size} bytes)",
                          path=path, position=at)
    bad = np.flatnonzero((size < wire.V2_HEADER_SIZE) | (table["last_offset_delta"] < 0))
    raise BadRowError("batch table has an impossible batch size or offset delta",
                      path=path, position=int(pos[bad[0]]))


def _tiles(table: np.ndarray, firsts: np.ndarray, counts: np.ndarray,
           sizes: np.ndarray) -> bool:
    """Whether each section's rows of ``table`` (rows ``firsts[k]`` on, ``counts[k]`` of
    them, describing ``sizes[k]`` bytes) are whole batches tiling its bytes: positions
    from 0, each batch right after the previous one, ending at the section's size; no
    batch smaller than a v2 header or with a negative offset delta. The one place of the
    rule (:func:`_check_table` says where it fails)."""
    if ((counts == 0) & (sizes != 0)).any():
        return False
    if not len(table):
        return True
    pos = table["position"]
    size = table["size"].astype(np.int64)
    ends = pos + size
    last = firsts + counts - 1
    has = counts > 0
    inner = np.ones(len(table), dtype=bool)        # rows that follow one of their section
    inner[firsts[has]] = False
    ok = ((pos[1:] == ends[:-1]) | ~inner[1:]).all()
    return bool(ok and (pos[firsts[has]] == 0).all() and (ends[last[has]] == sizes[has]).all()
                and not ((size < wire.V2_HEADER_SIZE)
                         | (table["last_offset_delta"] < 0)).any())


class _PartFile:
    """One topic-partition's staged bytes in a file of their own (per-partition mode).
    Opened for each append and closed after it: a task writing to thousands of
    partitions must not hold a descriptor per partition."""

    def __init__(self, path: str, flush_behind: bool = False):
        self.path = path
        os.close(sysio.open_fd(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
        self.size = 0
        self.records = 0
        self.tables: list[np.ndarray] = []
        self.behind = BehindFlush(path) if flush_behind else None

    def append(self, data, table: np.ndarray) -> None:
        fd = sysio.open_fd(self.path, os.O_WRONLY)
        try:
            write_fully(fd, data, self.size, self.path)
        finally:
            os.close(fd)
        if self.size:
            table = table.copy()
            table["position"] += self.size            # positions are relative to the file
        self.tables.append(table)
        self.size += memoryview(data).nbytes
        self.records += int(table["record_count"].sum())
        if self.behind is not None:
            self.behind.grew(self.size, self._batches())

    def _batches(self) -> int:
        return sum(len(t) for t in self.tables)

    def finish(self) -> None:
        if self.behind is not None:
            self.behind.finish(self.size, self._batches())


class StagingWriter:
    """Streams one task's encoded batches into staging files at the log-dir root.

    ``add`` may be called any number of times, for any topic-partitions, in any order
    (a partition's batches keep their order); ``finish`` writes the batch table and
    returns the :class:`StagedFile` (None when nothing was added: no file is left);
    ``abort`` deletes the files. Not thread-safe.

    By default everything goes into one staging file. With ``per_partition_files`` (on
    local filesystems) a topic-partition's batches go into a file of their own once it
    has more than ``own_file_min_bytes`` staged in this task (before that, and for the
    partitions that never get there, into the shared staging file: a task writing to
    thousands of small partitions makes one file, not thousands); the commit can adopt
    a large own file as a new segment by linking it into the partition directory (see
    ``AppendConfig.adopt_min_bytes``) instead of copying its bytes under the writer
    lock. A partition's shared bytes precede its own file's. The batch table stays in
    the staging file itself.

    ``flush_behind`` (per-partition files only; the Spark writer sets it when the write
    fsyncs): large files are flushed to disk by a background thread while the task still
    encodes, and their flushed pages dropped from the page cache (see :mod:`.flush`).

    ``run`` (Spark's writers): the run of the write this task stages for. The driver may
    abandon it while this task still runs (``abort_write``'s marker): after creating each
    file and once complete, the writer checks for that marker and, when it is there,
    deletes its files and raises :class:`CommitConflictError`, so that no staging file
    outlives an aborted write."""

    def __init__(self, fs: pafs.FileSystem, root: str, write_id: str, label: str = "task",
                 *, per_partition_files: bool = False, flush_behind: bool = False,
                 own_file_min_bytes: int = 0, run: str | None = None):
        self.fs = fs
        self.path = staging_path(root, write_id, label)
        self.write_id = write_id
        self._marker = jr.aborted_marker(root, write_id, run) if run else None
        self._split = per_partition_files and is_local(fs)
        self._own_file_min = max(0, int(own_file_min_bytes))
        self._shared: dict[tuple[str, int], int] = {}   # bytes in the shared file
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
                sysio.makedirs(os.path.dirname(self.path))
                self._fd = sysio.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                self._check_abandoned()
            write_fully(self._fd, view, path=self.path)
        else:
            with sysio.remote("write", self.path):
                if self._stream is None:
                    self._stream = self.fs.open_output_stream(self.path)
                self._stream.write(view)

    def add(self, topic: str, partition: int, data, batches) -> None:
        """Append ``data`` (whole v2 batches back to back) for ``topic``/``partition``,
        described by ``batches`` (see :func:`batch_table`)."""
        table = batch_table(batches)
        size = memoryview(data).nbytes
        _check_table(table, size, self.path)
        if size == 0:
            return
        partition = int(partition)
        if self._split and self._to_own_file(topic, partition, size):
            self._parts[(topic, partition)].append(data, table)
            return
        self._write(data)
        self._sections.append(StagedSection(
            topic=topic, partition=partition, position=self._pos, size=size,
            batch_start=self._batches, batch_count=len(table),
            record_count=int(table["record_count"].sum())))
        self._tables.append(table)
        self._pos += size
        self._batches += len(table)

    def add_partitioned(self, topic: str, data, sections) -> None:
        """:meth:`add` for each ``(partition, start, end, batches)`` of ``data`` (the
        output of ``format.encode_partitioned``), in order, at a cost per call rather
        than per partition where it can: the batch tables converted and checked at once,
        the shared file's bytes written in one piece per run of sections."""
        sections = list(sections)
        if len(sections) < 2 or not all(isinstance(b, pa.Table) for *_, b in sections):
            for p, start, end, batches in sections:
                self.add(topic, p, memoryview(data)[start:end], batches)
            return
        view = memoryview(data).cast("B")
        counts = np.fromiter((b.num_rows for *_, b in sections), np.int64, len(sections))
        sizes = np.fromiter((end - start for _, start, end, _ in sections), np.int64,
                            len(sections))
        try:
            whole = batch_table(pa.concat_tables([b for *_, b in sections]))
        except pa.ArrowInvalid:         # tables of different columns: one by one
            whole = None
        firsts = np.cumsum(counts) - counts
        if whole is None or not _tiles(whole, firsts, counts, sizes):
            # one of them is wrong: add() names it
            for p, start, end, batches in sections:
                self.add(topic, p, view[start:end], batches)
            return
        records = np.concatenate([[0], np.cumsum(whole["record_count"], dtype=np.int64)])
        records = records[firsts + counts] - records[firsts]
        run_start = run_end = None              # shared bytes not written yet
        for k, (p, start, end, _) in enumerate(sections):
            size, count = int(sizes[k]), int(counts[k])
            if size == 0:
                continue
            p = int(p)
            table = whole[firsts[k]:firsts[k] + count]
            if self._split and self._to_own_file(topic, p, size):
                if run_start is not None:
                    self._write(view[run_start:run_end])
                    run_start = None
                self._parts[(topic, p)].append(view[start:end], table)
                continue
            if run_start is None or start != run_end:
                if run_start is not None:
                    self._write(view[run_start:run_end])
                run_start = start
            run_end = end
            self._sections.append(StagedSection(
                topic=topic, partition=p, position=self._pos, size=size,
                batch_start=self._batches, batch_count=count,
                record_count=int(records[k])))
            self._tables.append(table)
            self._pos += size
            self._batches += count
        if run_start is not None:
            self._write(view[run_start:run_end])

    def _to_own_file(self, topic: str, partition: int, size: int) -> bool:
        """Whether ``size`` more bytes of the partition go to its own file (per-partition
        mode), creating that file once it has more than ``own_file_min_bytes``; else
        they are counted as the shared file's."""
        key = (topic, partition)
        pf = self._parts.get(key)
        shared = self._shared.get(key, 0)
        if pf is None and shared + size > self._own_file_min:
            sysio.makedirs(os.path.dirname(self.path))
            pf = self._parts[key] = _PartFile(f"{self.path}.{topic}-{partition}",
                                              self._flush_behind)
            self._check_abandoned()
        if pf is not None:
            return True
        self._shared[key] = shared + size
        return False

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
        self._check_abandoned()
        return StagedFile(path=self.path, table_position=self._pos,
                          batch_count=self._batches, sections=tuple(self._sections))

    def _check_abandoned(self) -> None:
        """After a file of this task is created (or complete): when the driver abandoned
        the write meanwhile, delete this task's files and raise. Created first, checked
        after, against the driver's marker first, sweep after: the sweep lists the file,
        or this sees the marker."""
        if self._marker is None or file_size(self.fs, self._marker) is None:
            return
        self.abort()
        raise CommitConflictError(f"write {self.write_id} was abandoned while this task "
                                  "staged for it (another task failed and the job was "
                                  "aborted): its staging files are deleted",
                                  path=self._marker)

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with sysio.remote("write", self.path):
                stream.close()

    def abort(self) -> None:
        self._close()
        for pf in self._parts.values():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pf.path)
        delete_file(self.fs, self.path, missing_ok=True)
