"""Applying a commit's plan: staged batches copied window by window into the segments
with each ``baseOffset`` rewritten (the CRC-32C covers only attributes onwards, so the
batch stays valid — what a broker does when it assigns offsets), or a whole staging file
patched in place and hard-linked into the partition directory as a new segment
(adopted); then each segment's ``.index``/``.timeindex`` (:mod:`..index_write`)."""
from __future__ import annotations

import errno
import mmap
import os
from typing import Sequence

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import (
    CommitConflictError,
    CorruptRecordError,
    InternalError,
    LogLayoutError,
)
from spark_kafkalog.format import wire
from spark_kafkalog.log.io import sysio, write_fully
from spark_kafkalog.log.write import config
from spark_kafkalog.log.write.config import AppendConfig, Fault, segment_file, splits_writes
from spark_kafkalog.log.io import is_local
from spark_kafkalog.log.write.files import FileHandle, make_dirs, write_new
from spark_kafkalog.log.write.flush import Syncer, will_need, will_need_paths
from spark_kafkalog.log.write.plan import Gather, PartPlan, Run, SegPlan, WritePlan
from spark_kafkalog.log.write.staged_tables import TablesCache
from spark_kafkalog.log.write.staging import StagedFile
from spark_kafkalog.log.write.tail import Active


class _SegOut:
    """Writes one segment's .log bytes: positioned writes into a local file (appending to
    an existing one) or one sequential output stream (a new object)."""

    def __init__(self, fs: pafs.FileSystem, path: str, seg: SegPlan, fd: int | None = None):
        self.fs = fs
        self.path = path
        self.seg = seg
        self.written_to = seg.start_size if seg.existing else 0
        self.fd = None
        self._stream = None
        if seg.adopted_bytes:
            # a staging file renamed into place (see _adopt): appended to after its bytes
            self.fd = sysio.open_fd(path, os.O_RDWR)
            self.written_to = seg.adopted_bytes
        elif is_local(fs):
            if seg.existing:
                self.fd = fd if fd is not None else sysio.open_fd(path, os.O_RDWR)
                if seg.start_size == 0:
                    sysio.ftruncate(self.fd, 0, path)
            else:
                try:
                    self.fd = sysio.open_fd(path, os.O_RDWR | os.O_CREAT | os.O_EXCL)
                except FileExistsError as err:
                    raise CommitConflictError("segment file appeared under the writer lock",
                                              path=path) from err
        else:
            with sysio.remote("create", path):
                self._stream = fs.open_output_stream(path)

    def write(self, data, position: int) -> None:
        if position != self.written_to:
            raise InternalError(f"non-sequential segment write (expected position "
                                f"{self.written_to})", path=self.path, position=position)
        view = memoryview(data)
        if self.fd is not None:
            write_fully(self.fd, view, position, self.path)
        else:
            with sysio.remote("write", self.path):
                self._stream.write(view)
        self.written_to += len(data)

    def close(self, syncer: Syncer | None) -> None:
        """Close; with a syncer, the file is fsynced (then closed) in its background
        thread, overlapping the disk flush with the copy of the next segment."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            if syncer is not None:
                syncer.fsync_and_close(fd, self.path)
            else:
                os.close(fd)
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with sysio.remote("write", self.path):
                stream.close()


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


def _copy_local(reader: FileHandle, out: _SegOut, src: int, dst: int, nbytes: int) -> bool:
    """Kernel-side copy (no trip through user space). False when the kernel or the
    filesystem cannot (the caller falls back to read + write)."""
    global _COPY_FILE_RANGE
    if not _COPY_FILE_RANGE:
        return False
    done = 0
    try:
        while done < nbytes:
            n = sysio.copy_file_range(reader.fd, out.fd, nbytes - done, src + done,
                                      dst + done, out.path)
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
    of that range, then write each baseOffset with ``pwrite`` (not through a writable
    mapping: see ``docs/PERFORMANCE.md``, ``log/write/apply.py``)."""
    start = pos - pos % mmap.ALLOCATIONGRANULARITY
    will_need(fd, (rel + pos).tolist())     # flush-behind may have dropped them
    with mmap.mmap(fd, pos + nbytes - start, offset=start, access=mmap.ACCESS_READ) as mm:
        v = np.frombuffer(mm, dtype=np.uint8)
        bad = _check_batches(v[pos - start:], rel, sizes)
        del v
    if bad is not None:
        raise _mismatch(bad, rel, sizes, path, pos)
    raw = memoryview(bases.astype(">i8").tobytes())
    at = (rel + pos).tolist()
    for k, position in enumerate(at):
        write_fully(fd, raw[8 * k:8 * k + 8], position, path)


def prefetch_headers(plan: WritePlan) -> None:
    """Ask, all at once, for the page holding each batch header that :func:`_adopt` will
    check and patch, before the journal's first fsync, so those reads overlap it."""
    def wanted():
        for part_plans in plan.topics.values():
            for part in part_plans:
                for run in part.runs:
                    if run.adopt:
                        sizes = plan.tables.table(run.staged)[run.batch_rows]["size"]
                        sizes = sizes.astype(np.int64)
                        yield run.src_path, (np.cumsum(sizes) - sizes
                                             + run.src_position).tolist()
    will_need_paths(wanted())


def _copy_run(run: Run, reader: FileHandle, out: _SegOut, table: np.ndarray,
              fault: Fault) -> None:
    rows = table[run.batch_rows]
    sizes = rows["size"].astype(np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    i = 0
    n = len(rows)
    local = reader.fd is not None and out.fd is not None
    while i < n:
        # the largest run of whole batches from i that fits a window (at least one)
        j = int(np.searchsorted(ends, starts[i] + config.COPY_WINDOW_BYTES, side="right"))
        j = max(j, i + 1)
        nbytes = int(ends[j - 1] - starts[i])
        src = run.src_position + int(starts[i])
        dst = run.dst_position + int(starts[i])
        half = nbytes // 2
        if local and _COPY_FILE_RANGE and nbytes >= config.KERNEL_COPY_MIN_BYTES:
            # Patch the staged copy first, so the segment only ever receives final bytes
            # (a crash mid-copy leaves at most a torn last batch, never stale offsets),
            # then let the kernel copy them.
            _patch_in_place(reader.fd, src, nbytes, starts[i:j] - starts[i], sizes[i:j],
                            run.bases[i:j], reader.path)
            if _copy_local(reader, out, src, dst, half):
                fault("append-partial")
                if not _copy_local(reader, out, src + half, dst + half, nbytes - half):
                    raise InternalError("copy_file_range stopped working mid-copy",
                                        path=out.path, position=dst + half)
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
        _write_halves(out, memoryview(buf), dst, fault)
        i = j


def _groups(runs: list[Run | Gather]) -> list[list[Run | Gather]]:
    """``runs`` in order, consecutive small ones that are contiguous in one segment
    grouped (at most :data:`~.config.COPY_WINDOW_BYTES` a group): the runs of a
    partition that every task staged a little of, written with one buffer (planning
    made most such groups a :class:`~.plan.Gather` already: each is a group alone)."""
    out: list[list[Run]] = []
    total = 0
    end = -1
    prev_small = False
    for run in runs:
        size = run.nbytes
        small = size < config.KERNEL_COPY_MIN_BYTES and isinstance(run, Run)
        if (small and prev_small and out[-1][-1].seg_index == run.seg_index
                and end == run.dst_position and total + size <= config.COPY_WINDOW_BYTES):
            out[-1].append(run)
            total += size
        else:
            out.append([run])
            total = size
        end = run.dst_position + size
        prev_small = small
    return out


def _pieces(group: list[Run | Gather]) -> tuple[list[str], list[int], list[int],
                                                 np.ndarray, np.ndarray]:
    """Where the bytes of a group come from (paths, positions, lengths, one per piece)
    and its batches' sizes and base offsets."""
    if isinstance(group[0], Gather):
        g = group[0]
        return g.src_paths, g.src_positions.tolist(), g.lengths.tolist(), g.sizes, g.bases
    return ([run.src_path for run in group], [run.src_position for run in group],
            [run.nbytes for run in group], np.concatenate([run.sizes for run in group]),
            np.concatenate([run.bases for run in group]))


def _copy_small_runs(group: list[Run | Gather], readers: StagedReaders,
                     own: dict[str, FileHandle], out: _SegOut, fault: Fault) -> None:
    """Copy consecutive small runs (or a gather) into one segment through one buffer:
    each piece read into its place, every batch checked and its baseOffset patched, then
    written in two halves with a fault point between them (as :func:`_copy_run` writes
    a window)."""
    paths, positions, lengths, size, bases = _pieces(group)
    buf = bytearray(sum(lengths))
    view = memoryview(buf)
    start = 0
    for path, position, n in zip(paths, positions, lengths):
        readers.get(path, own).read_into(view[start:start + n], position)
        start += n
    rel = np.cumsum(size) - size
    bad = _patch_batches(np.frombuffer(buf, dtype=np.uint8), rel, size, bases)
    if bad is not None:
        start = 0
        for path, position, n in zip(paths, positions, lengths):   # the piece holding it
            if start + n > int(rel[bad[0]]):
                break
            start += n
        raise _mismatch(bad, rel - start, size, path, position)
    _write_halves(out, view, group[0].dst_position, fault)


def _write_halves(out: _SegOut, view: memoryview, dst: int, fault: Fault) -> None:
    """Write ``view`` at ``dst`` in two halves with a fault point between them, so crash
    tests also kill with a batch half written; in one piece when no hook may stop the
    process between them (:func:`~.config.splits_writes`)."""
    if not splits_writes(fault):
        out.write(view, dst)
    else:
        half = len(view) // 2
        out.write(view[:half], dst)
        fault("append-partial")
        out.write(view[half:], dst + half)
    fault("append")


def _adopt(run: Run, table: np.ndarray, path: str, fault: Fault) -> bool:
    """Make the staging file of ``run`` (a whole section, planned as a segment of its own)
    the segment ``path``: check and patch every batch's baseOffset in place, then link
    it under the segment's name (never replacing a file) and drop the staging name.
    Local filesystems only. False (nothing changed but the patched offsets) when the
    filesystem has no hard links; the caller copies instead."""
    rows = table[run.batch_rows]
    sizes = rows["size"].astype(np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    fd = sysio.open_fd(run.src_path, os.O_RDWR)
    try:
        if os.fstat(fd).st_size != int(ends[-1]):
            raise CommitConflictError("staging file is not the size its commit message says "
                                      "(changed or truncated?)", path=run.src_path)
        i = 0
        n = len(rows)
        while i < n:                       # one mapping window at a time
            j = max(int(np.searchsorted(ends, starts[i] + config.COPY_WINDOW_BYTES, side="right")),
                    i + 1)
            _patch_in_place(fd, int(starts[i]), int(ends[j - 1] - starts[i]),
                            starts[i:j] - starts[i], sizes[i:j], run.bases[i:j], run.src_path)
            i = j
    finally:
        os.close(fd)
    fault("adopt-patched")
    try:
        sysio.link(run.src_path, path)
    except FileExistsError as err:
        raise CommitConflictError("segment file appeared under the writer lock",
                                  path=path) from err
    except OSError as err:
        if err.errno in (errno.EXDEV, errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            return False
        raise
    fault("append")
    sysio.unlink(run.src_path)
    return True


def _write_indexes(fs: pafs.FileSystem, directory: str, seg: SegPlan, active: Active | None,
                   syncer: Syncer | None) -> None:
    """Write (or extend) the segment's .index and .timeindex; with a syncer, each file is
    fsynced in its background thread (alongside the .log files' flushes)."""
    b = seg.builder
    idx_path = segment_file(directory, seg.base, ".index")
    tidx_path = segment_file(directory, seg.base, ".timeindex")
    close = b.close_entry()
    if not is_local(fs):
        write_new(fs, idx_path, bytes(b.offset_entries), fsync=False)
        write_new(fs, tidx_path, bytes(b.time_entries) + close, fsync=False)
        return
    if seg.continuing_index:
        # entries are appended after the live ones; an index the write adds no entry to
        # is not touched (nor fsynced)
        # (through the files planning read them with, when it kept them open)
        writes = ([(idx_path, os.O_WRONLY, None, bytes(b.offset_entries), active.index_size,
                    active.fds.pop(".index", None))]
                  if len(b.offset_entries) else [])
        keep = active.timeindex_size - b.drop_time_tail_bytes
        data = bytes(b.time_entries) + close
        # the close entry replaced is overwritten, unless the new entries are shorter
        cut = keep if keep + len(data) < active.timeindex_size else None
        writes.append((tidx_path, os.O_WRONLY, cut, data, keep,
                       active.fds.pop(".timeindex", None)))
    else:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        writes = [(idx_path, flags, None, bytes(b.offset_entries), 0, None),
                  (tidx_path, flags, None, bytes(b.time_entries) + close, 0, None)]
    for path, flags, truncate_to, data, position, fd in writes:
        if fd is None:
            fd = sysio.open_fd(path, flags)
        try:
            if truncate_to is not None:
                sysio.ftruncate(fd, truncate_to, path)
            write_fully(fd, data, position, path)
        except BaseException:
            os.close(fd)
            raise
        if syncer is not None:
            syncer.fsync_and_close(fd, path)
        else:
            os.close(fd)


class StagedReaders:
    """The staging files a commit reads, each opened once for all the partitions it
    holds sections of (a file of one partition's own is opened by that partition)."""

    def __init__(self, fs: pafs.FileSystem, staged: Sequence[StagedFile]):
        self.fs = fs
        self.shared = {sf.path for sf in staged}
        self._open: dict[str, FileHandle] = {}

    def get(self, path: str, local: dict[str, FileHandle]) -> FileHandle:
        cache = self._open if path in self.shared else local
        reader = cache.get(path)
        if reader is None:
            reader = cache[path] = FileHandle(self.fs, path, writable=True)
        return reader

    def close(self) -> None:
        for r in self._open.values():
            r.close()
        self._open.clear()


def apply_partition(fs: pafs.FileSystem, plan: PartPlan, staged: Sequence[StagedFile],
                     tables: TablesCache, cfg: AppendConfig, fault: Fault,
                     syncer: Syncer | None, readers: StagedReaders | None = None
                     ) -> list[str]:
    """Write one partition's planned segments and indexes (each file handed to
    ``syncer`` when given). Returns the directories that gained a name (a created or
    adopted segment, created index files, the partition directory itself in its
    parent): the caller fsyncs each once, with the files, before the commit point.
    Appending to existing files adds no name, so such a partition needs no
    directory fsync. ``readers``: the commit's open staging files (default: opened
    for this partition alone)."""
    if plan.create_dir:
        make_dirs(fs, plan.directory)
    outs: dict[int, _SegOut] = {}
    own: dict[str, FileHandle] = {}
    shared = readers if readers is not None else StagedReaders(fs, ())
    adopted = {run.seg_index: run for run in plan.runs if run.adopt}
    active = plan.active
    try:
        for k, seg in enumerate(plan.segments):
            path = segment_file(plan.directory, seg.base)
            run = adopted.get(k)
            if run is not None and not _adopt(run, tables.table(run.staged), path, fault):
                # no hard links here: the segment is written by copying after all
                del adopted[k]
                seg.adopted_bytes = 0
            fd = None
            if seg.existing and active is not None and seg.base == active.base:
                fd = active.fds.pop(".log", None)
            outs[k] = _SegOut(fs, path, seg, fd)
        runs = [r for r in plan.runs if not (r.adopt and r.seg_index in adopted)]
        for group in _groups(runs):
            if len(group) > 1 or isinstance(group[0], Gather):
                _copy_small_runs(group, shared, own, outs[group[0].seg_index], fault)
            else:
                run = group[0]
                _copy_run(run, shared.get(run.src_path, own), outs[run.seg_index],
                          tables.table(run.staged), fault)
        for k, seg in enumerate(plan.segments):
            out = outs.pop(k)
            if out.written_to != seg.end_size:
                raise InternalError(f"segment plan ({seg.end_size} bytes) and bytes written "
                                    f"({out.written_to}) disagree", path=out.path)
            out.close(syncer)
            _write_indexes(fs, plan.directory, seg, plan.active, syncer)
            fault("segment")
    finally:
        for out in outs.values():
            out.close(None)
        for r in own.values():
            r.close()
        if active is not None:
            active.close_files()
    named = []
    if plan.create_dir or not all(s.existing and s.continuing_index for s in plan.segments):
        named.append(plan.directory)
    if plan.create_dir:
        named.append(os.path.dirname(plan.directory))
    return named
