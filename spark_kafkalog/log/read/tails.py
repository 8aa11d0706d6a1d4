"""The log ends of many small partitions at once, for planning a topic of thousands.

:func:`small_tails` finds what ``state._tail`` finds for each partition whose active
segment one probe reads whole (a local file of at most ``state._PROBE`` bytes): every such
segment is read into one buffer (open, ``fstat``, ``preadv``, close: no file object, no
window), the format layer scans them all in one call (:func:`~spark_kafkalog.format.
scan_runs`, CRCs checked), and the offsets check of :mod:`.scan` is applied to all rows
with a few numpy operations. A partition answers only when its tail is clean (whole valid
batches to the end of the file, offsets increasing inside the segment's range), where
the one-partition scan returns the same without a warning whatever the corruption
policy; for any other (a torn or damaged tail, a renamed or shortened file, a larger or
remote segment) the answer is None and the caller scans that partition alone, which
reports, skips or raises as it always has.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from spark_kafkalog.format import scan_runs
from spark_kafkalog.log.io import is_local
from spark_kafkalog.log.model import PartitionDir

__all__ = ["small_tails"]

_MAX_SEGMENT_SPAN = 1 << 31         # as scan.py: offsets in a segment are base + int32
_INT64_MIN = np.iinfo(np.int64).min
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def small_tails(fs, parts: Sequence[PartitionDir], probe: int, stats=None
                ) -> list[tuple[int, int | None] | None]:
    """For each of ``parts`` (with only the segments its snapshot bounds it to), ``(log
    end offset, max timestamp of the data batches in the active segment)`` as
    ``state._tail`` returns it, or None where that partition must be scanned alone (see
    the module docstring). ``probe``: the largest active segment answered here (the
    size ``state._tail`` reads whole at once). ``stats``: a ``ReadStats`` to add the
    bytes and batches read to."""
    out: list[tuple[int, int | None] | None] = [None] * len(parts)
    if not parts or not is_local(fs) or not hasattr(os, "preadv"):
        return out
    picked, segs = [], []
    for k, p in enumerate(parts):
        if not p.segments:
            continue
        seg = p.segments[-1]
        if seg.size == 0:
            out[k] = (seg.base_offset, None)    # an empty active segment (a fresh roll)
        elif seg.size <= probe and seg.file_id is not None and not seg.swap:
            picked.append(k)
            segs.append(seg)
    if not segs:
        return out
    sizes = np.fromiter((s.size for s in segs), dtype=np.int64, count=len(segs))
    starts = np.zeros(len(segs), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    buf = np.empty(int(sizes.sum()), dtype=np.uint8)
    read_ok = _read_into(buf, segs, starts.tolist(), sizes.tolist())
    bases = np.fromiter((s.base_offset for s in segs), dtype=np.int64, count=len(segs))
    scans = scan_runs(buf, starts, sizes, bases, verify_crc=True)
    ok = read_ok & (scans.problems == 0) & (scans.counts > 0) & (scans.ends == sizes)
    h = scans.headers
    if len(h):
        # scan._Scan._check_offsets over every run at once: a v2 batch's base and last
        # offsets (a legacy entry's offset) above the previous batch's last offset, and
        # each last offset inside [segment base, segment base + 2^31)
        run = np.repeat(np.arange(len(segs)), scans.counts)
        row0 = starts_of(scans.counts)
        first_row = np.zeros(len(h), dtype=bool)
        first_row[row0[scans.counts > 0]] = True
        last = h["last_offset"]
        first = np.where(h["magic"] == 2, np.minimum(h["base_offset"], last), last)
        prev = np.empty(len(h), dtype=np.int64)
        prev[0] = _INT64_MIN
        prev[1:] = last[:-1]
        prev[first_row] = _INT64_MIN
        seg_base = bases[run]
        bad = (first <= prev) | (last < seg_base) | (last >= seg_base + _MAX_SEGMENT_SPAN)
        bad_runs = np.zeros(len(segs), dtype=bool)
        bad_runs[run[bad]] = True
        ok &= ~bad_runs
        ends = row0 + scans.counts - 1          # each run's last row
        data = ~h["is_control"].astype(bool)
        ts = np.where(data, h["max_timestamp"], _INT64_MIN)
        has_data = np.zeros(len(segs), dtype=np.int64)
        np.add.at(has_data, run[data], 1)
        max_ts = np.full(len(segs), _INT64_MIN, dtype=np.int64)
        np.maximum.at(max_ts, run, ts)
        leo = np.where(scans.counts > 0, last[np.maximum(ends, 0)] + 1, 0)
        if stats is not None:       # what was read for the partitions answered here
            stats.bytes_read += int(sizes[ok].sum())
            stats.batches += int(scans.counts[ok].sum())
        for j in np.flatnonzero(ok).tolist():
            out[picked[j]] = (int(leo[j]), int(max_ts[j]) if has_data[j] else None)
    return out


def starts_of(counts: np.ndarray) -> np.ndarray:
    """The index of each run's first row in rows laid out run after run."""
    starts = np.zeros(len(counts), dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return starts


def _read_into(buf: np.ndarray, segs, starts: list[int], sizes: list[int]) -> np.ndarray:
    """Each segment's first ``size`` bytes into ``buf[start:start + size]``; False where
    the file could not be opened, is no longer the file the listing saw (device and
    inode), or came back short: that partition is scanned alone, which says why."""
    ok = np.ones(len(segs), dtype=bool)
    view = memoryview(buf)
    for k, seg in enumerate(segs):
        start, size = starts[k], sizes[k]
        try:
            fd = os.open(seg.path, _OPEN_FLAGS)
        except OSError:
            ok[k] = False
            continue
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != tuple(seg.file_id):
                ok[k] = False
                continue
            got = os.preadv(fd, [view[start:start + size]], 0)
            while 0 < got < size:
                n = os.preadv(fd, [view[start + got:start + size]], got)
                if n <= 0:
                    break
                got += n
            if got != size:
                ok[k] = False
        except OSError:
            ok[k] = False
        finally:
            os.close(fd)
    return ok
