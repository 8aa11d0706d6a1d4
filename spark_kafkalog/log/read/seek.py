"""Seeking: from an offset or a timestamp to a byte position, through the index files.

Only index files and the ``.log`` bytes from the position they give are read. Index
answers are hints the scanner confirms (see read/scan.py): a refuted entry costs a rescan
of one segment, never a wrong answer.
"""
from __future__ import annotations

import logging

import numpy as np
import pyarrow.compute as pc

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.format import decode_run
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.log.files.index import (TIME_INDEX_ENTRY, OffsetIndex, TimeIndex,
                                            read_offset_index, read_time_index)
from spark_kafkalog.log.model import LogSource, PartitionDir
from spark_kafkalog.log.io import open_listed
from spark_kafkalog.log.read.scan import DEFAULT_WINDOW_BYTES, ReadStats, scan_windows

__all__ = ["locate", "offset_index", "time_index", "time_index_last", "offset_for_timestamp",
           "window_has_records", "split_points", "log_start_offset"]

log = logging.getLogger(__name__)


def _hint(what: str, read, logdirs: LogSource, path: str | None, base_offset: int, **bounds):
    """An index file read by ``read``, or None when there is none or it is unusable (an
    index is a hint: the segment is then read without it, with a warning)."""
    if path is None:
        return None
    try:
        return read(logdirs.filesystem, path, base_offset, **bounds)
    except LogLayoutError as err:
        log.warning("ignoring unusable %s: %s", what, err)
        return None


def offset_index(logdirs: LogSource, p: PartitionDir, i: int) -> OffsetIndex | None:
    """The validated offset index of segment ``i`` (None when it has no .index)."""
    seg = p.segments[i]
    return _hint("offset index", read_offset_index, logdirs, seg.index_path, seg.base_offset,
                 segment_size=seg.size, next_base_offset=p.next_base_offset(i))


def time_index(logdirs: LogSource, p: PartitionDir, i: int) -> TimeIndex | None:
    """The validated time index of segment ``i`` (None when it has no .timeindex)."""
    seg = p.segments[i]
    return _hint("time index", read_time_index, logdirs, seg.timeindex_path, seg.base_offset,
                 next_base_offset=p.next_base_offset(i))


def time_index_last(logdirs: LogSource, p: PartitionDir, i: int) -> tuple[int, int] | None:
    """``(timestamp, offset)`` of the last live entry of segment ``i``'s time index,
    reading only that entry when the file is trimmed (a rolled segment's is), else the
    live prefix. None when there is no usable entry."""
    seg = p.segments[i]
    if seg.timeindex_path is None:
        return None
    fs = logdirs.filesystem
    try:
        with open_listed(fs, seg.timeindex_path) as f:
            size = f.size()
            n = size // TIME_INDEX_ENTRY.size
            if n == 0:
                return None
            ts, rel = TIME_INDEX_ENTRY.unpack(f.read_at(TIME_INDEX_ENTRY.size,
                                                        (n - 1) * TIME_INDEX_ENTRY.size))
    except FileNotFoundError:
        return None
    except OSError as err:
        log.warning("ignoring unreadable time index %s: %s", seg.timeindex_path, err)
        return None
    if rel == 0 and n > 1:          # zero tail: find the live prefix
        t = time_index(logdirs, p, i)
        return t.last if t is not None else None
    nxt = p.next_base_offset(i)
    if ts < 0 or rel < 0 or (nxt is not None and seg.base_offset + rel >= nxt):
        return None
    return ts, seg.base_offset + rel


def log_start_offset(logdirs: LogSource, p: PartitionDir) -> int:
    """Kafka's rule: max(log-start-offset-checkpoint entry, first segment base offset)."""
    ckpt = logdirs.checkpointed_log_start_offset(p)
    first = p.segments[0].base_offset if p.segments else (ckpt or 0)
    return max(ckpt if ckpt is not None else 0, first)


def locate(logdirs: LogSource, p: PartitionDir, offset: int, hint: tuple[int, int] | None = None
           ) -> tuple[int, int, int | None]:
    """``(segment index, byte position, seek_check)`` to start reading ``offset`` from:
    the segment that would hold it and its offset-index entry (or a caller's hint
    ``(segment base offset, position)`` from :func:`split_points`). ``seek_check`` is
    the offset the batch at that position must not start after."""
    i = p.segment_index_for(offset)
    if hint is not None:
        base, pos = hint
        for j, seg in enumerate(p.segments):
            if seg.base_offset == base:
                if 0 <= pos < max(seg.size, 1) and (j == i or pos == 0):
                    return j, pos, (offset if pos > 0 else None)
                break
        log.debug("ignoring position hint %s for offset %d", hint, offset)
    if not p.segments or offset <= p.segments[i].base_offset:
        return i, 0, None           # the segment's start: no index to read
    idx = offset_index(logdirs, p, i)
    if idx is None or not len(idx):
        return i, 0, None
    entry_offset, pos = idx.lookup(offset)
    return i, pos, (entry_offset if pos > 0 else None)


def offset_for_timestamp(logdirs: LogSource, p: PartitionDir, timestamp_ms: int, *,
                         upper_bound: int | None = None, on_corruption: str = "fail",
                         window_bytes: int = DEFAULT_WINDOW_BYTES,
                         stats: ReadStats | None = None) -> int | None:
    """Earliest offset at or above the log start whose record timestamp is >=
    ``timestamp_ms`` (Kafka's offsetsForTimes), or None when no record has one (below
    ``upper_bound``, when given: e.g. the high watermark or last stable offset).

    Segments are skipped by their time index's last entry (their max timestamp); in the
    first segment that may hold the answer, the time index gives the last offset known
    to be earlier and the offset index its position; the scan decodes only the first
    batch whose max timestamp reaches the target."""
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, (int, np.integer)):
        raise InvalidOptionError(f"timestamp must be an integer (ms), not {timestamp_ms!r}")
    if timestamp_ms < 0:
        raise InvalidOptionError(f"timestamp must be >= 0 ms, not {timestamp_ms}")
    if not p.segments:
        return None
    stats = stats if stats is not None else ReadStats()
    start = log_start_offset(logdirs, p)
    target_us = int(timestamp_ms) * 1000
    n = len(p.segments)
    i = p.segment_index_for(start)
    # Skip rolled segments whose max timestamp (their time index's last entry, written
    # when the segment was rolled) is below the target.
    while i < n - 1:
        last = time_index_last(logdirs, p, i) if p.segments[i].size else (-1, -1)
        if last is None or last[0] >= timestamp_ms:
            break
        i += 1
    seg = p.segments[i]
    search_from = max(start, seg.base_offset)
    t = time_index(logdirs, p, i)
    before = t.last_before(timestamp_ms) if t is not None else None
    if before is not None:
        search_from = max(search_from, before[1] + 1)
    if upper_bound is not None and search_from >= upper_bound:
        return None
    idx = offset_index(logdirs, p, i)
    pos, check = 0, None
    if idx is not None and len(idx):
        entry, pos = idx.lookup(search_from)
        check = entry if pos > 0 else None
    return _search(logdirs, p, i, pos, check, search_from, target_us, upper_bound,
                   on_corruption, window_bytes, stats)


def _search(logdirs: LogSource, p: PartitionDir, i: int, pos: int, check: int | None,
            search_from: int, target_us: int, upper_bound: int | None, on_corruption: str,
            window_bytes: int, stats: ReadStats) -> int | None:
    """Scan from segment ``i`` at ``pos`` on; decode only batches whose max timestamp
    reaches the target, and return the first record's offset that does."""
    target_ms = target_us // 1000
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, position=pos,
                          seek_check=check, end_offset=upper_bound,
                          on_corruption=on_corruption, window_bytes=window_bytes,
                          stats=stats, initial_window=1 << 16):
        h = w.headers
        last = _np(h, "last_offset")
        maxts = _np(h, "max_timestamp")
        ctrl = _np(h, "is_control")
        rows = np.flatnonzero(~ctrl & (last >= search_from) & (maxts >= target_ms))
        for r in rows.tolist():
            start = int(h["position"][r]) - w.position
            size = int(h["size"][r])
            batch = decode_run(memoryview(w.data)[start:start + size], verify_crc=False,
                               include_headers=False, start_offset=search_from,
                               end_offset=upper_bound, position_base=w.position + start)
            hit = pc.greater_equal(batch.column("timestamp").cast("int64"), target_us)
            where = pc.indices_nonzero(pc.fill_null(hit, False))
            if len(where):
                return int(batch.column("offset")[where[0].as_py()].as_py())
    return None


def window_has_records(logdirs: LogSource, p: PartitionDir, start: int, end: int,
                       lo_ms: int, hi_ms: int | None, *, byte_budget: int = 32 << 20
                       ) -> bool | None:
    """Whether offsets ``[start, end)`` hold a record with ``lo_ms <= timestamp < hi_ms``
    (``hi_ms`` None: no upper bound): True, False, or None when ``byte_budget`` bytes of
    batches read did not tell (or damaged bytes were skipped on the way). A job's check
    that a window selects something, before it starts work.

    :func:`offset_for_timestamp` finds the first offset whose timestamp reaches ``lo_ms``
    (the time index skips what is older); from there only batches whose max timestamp
    reaches ``lo_ms`` are decoded, until one holds a record inside the window. Under
    read_committed an aborted record counts (the answer may be True for a window a
    consumer sees empty, never False for one it does not)."""
    if start >= end or not p.segments:
        return False
    stats = ReadStats()
    first = offset_for_timestamp(logdirs, p, max(int(lo_ms), 0), upper_bound=end,
                                 on_corruption="skip", stats=stats)
    if stats.skipped:
        return None
    if first is None:
        return False
    search_from = max(first, start)
    lo_us = max(int(lo_ms), 0) * 1000
    hi_us = None if hi_ms is None else int(hi_ms) * 1000
    i, pos, check = locate(logdirs, p, search_from)
    read = 0
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, position=pos,
                          seek_check=check, end_offset=end, on_corruption="skip",
                          stats=stats, quiet=True, initial_window=1 << 16):
        if stats.skipped or read > byte_budget:
            return None
        read += len(w.data)
        h = w.headers
        rows = np.flatnonzero(~_np(h, "is_control") & (_np(h, "last_offset") >= search_from)
                              & (_np(h, "base_offset") < end)
                              & (_np(h, "max_timestamp") >= lo_us // 1000))
        for r in rows.tolist():
            at = int(h["position"][r]) - w.position
            size = int(h["size"][r])
            batch = decode_run(memoryview(w.data)[at:at + size], verify_crc=False,
                               include_headers=False, start_offset=search_from,
                               end_offset=end, position_base=w.position + at)
            ts = batch.column("timestamp").cast("int64")
            hit = pc.greater_equal(ts, lo_us)
            if hi_us is not None:
                hit = pc.and_(hit, pc.less(ts, hi_us))
            if pc.any(pc.fill_null(hit, False)).as_py():
                return True
    return None if stats.skipped else False


def split_points(logdirs: LogSource, p: PartitionDir, start_offset: int, end_offset: int,
                 target_bytes: int) -> list[tuple[int, int, int]]:
    """Cut ``[start_offset, end_offset)`` into consecutive ranges of about
    ``target_bytes`` of log each, at positions found in the offset indexes (no ``.log``
    bytes are read). Returns ``[(range start offset, segment base offset, byte position
    hint), ...]``: the first range starts at ``start_offset``, each ends where the next
    begins, the last at ``end_offset``. Pass a range's ``(segment base, position)`` to
    ``read_partition(start_position=...)``.

    A cut at index entry ``(O, P)`` starts a range at offset O read from position P
    (every record at or above O lies at or after P); a cut at a segment boundary starts
    at the segment's base offset, position 0."""
    if target_bytes <= 0:
        raise InvalidOptionError(f"target_bytes must be positive, not {target_bytes}")
    if start_offset >= end_offset or not p.segments:
        seg_i = p.segment_index_for(start_offset) if p.segments else 0
        base = p.segments[seg_i].base_offset if p.segments else 0
        return [(start_offset, base, 0)]
    i0, pos0, _check = locate(logdirs, p, start_offset)
    out = [(start_offset, p.segments[i0].base_offset, pos0)]
    if sum(s.size for s in p.segments[i0:]) - pos0 < target_bytes:
        return out          # all of it fits one range: no index to read for cuts
    acc = 0                 # bytes since the last cut
    last_pos = pos0
    for i in range(i0, len(p.segments)):
        seg = p.segments[i]
        if i > i0:
            if seg.base_offset >= end_offset:
                break
            acc += p.segments[i - 1].size - last_pos
            last_pos = 0
            if acc >= target_bytes and seg.base_offset > out[-1][0]:
                out.append((seg.base_offset, seg.base_offset, 0))
                acc = 0
        idx = offset_index(logdirs, p, i)
        if idx is None or not len(idx):
            continue
        offs, poss = idx.offsets, idx.positions
        sel = np.flatnonzero((offs > start_offset) & (offs < end_offset) & (poss > last_pos))
        for k in sel.tolist():
            o, q = int(offs[k]), int(poss[k])
            acc += q - last_pos
            last_pos = q
            if acc >= target_bytes and o > out[-1][0]:
                out.append((o, seg.base_offset, q))
                acc = 0
    return out
