"""The log ends of many small local partitions at once (planning a topic of thousands).

:func:`small_tails` answers what ``state._tail`` answers for each partition whose active
segment one probe reads whole: the segments are read into one buffer, scanned in one
kernel call (:func:`~spark_kafkalog.format.scan_runs`, CRCs checked) and offset-checked
in numpy as :mod:`.scan` checks them. Only a clean tail is answered; any other (torn,
corrupt, renamed, cut short, larger, remote) is None: the caller scans it alone, which
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
#: segments read into one buffer and scanned in one call, at most (a read window's worth)
CHUNK_BYTES = 16 << 20


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
    # in chunks of at most CHUNK_BYTES of segments (memory stays bounded), one buffer
    buf = np.empty(max(min(sum(s.size for s in segs), CHUNK_BYTES),
                       max(s.size for s in segs)), dtype=np.uint8)
    i = 0
    while i < len(segs):
        j, total = i, 0
        while j < len(segs) and (j == i or total + segs[j].size <= CHUNK_BYTES):
            total += segs[j].size
            j += 1
        for k, tail in zip(picked[i:j], _chunk_tails(buf, segs[i:j], stats)):
            out[k] = tail
        i = j
    return out


def _chunk_tails(buf: np.ndarray, segs: list, stats) -> list:
    """:func:`small_tails` of the active segments ``segs``, read into ``buf``."""
    n = len(segs)
    sizes = np.fromiter((s.size for s in segs), dtype=np.int64, count=n)
    starts = starts_of(sizes)
    read_ok = _read_into(buf, segs, starts.tolist(), sizes.tolist())
    bases = np.fromiter((s.base_offset for s in segs), dtype=np.int64, count=n)
    scans = scan_runs(buf[:int(sizes.sum())], starts, sizes, bases, verify_crc=True)
    counts = scans.counts
    ok = read_ok & (scans.problems == 0) & (counts > 0) & (scans.ends == sizes)
    out: list = [None] * n
    h = scans.headers
    if not ok.any():
        return out
    # scan._Scan._check_offsets over every run at once: a v2 batch's base and last
    # offsets (a legacy entry's offset) above the previous batch's last offset, and each
    # last offset inside [segment base, segment base + 2^31)
    run = np.repeat(np.arange(n), counts)
    row0 = starts_of(counts)
    nz = counts > 0
    last = h["last_offset"]
    first = np.where(h["magic"] == 2, np.minimum(h["base_offset"], last), last)
    prev = np.empty(len(h), dtype=np.int64)
    prev[0] = _INT64_MIN
    prev[1:] = last[:-1]
    prev[row0[nz]] = _INT64_MIN                 # each run's first batch follows nothing
    seg_base = bases[run]
    bad = (first <= prev) | (last < seg_base) | (last >= seg_base + _MAX_SEGMENT_SPAN)
    # per run with rows: any bad row, the last row's offset, the data batches' timestamps
    at = row0[nz]
    ok[nz] &= ~np.logical_or.reduceat(bad, at)
    data = ~h["is_control"].astype(bool)
    has_data = np.zeros(n, dtype=np.int64)
    has_data[nz] = np.add.reduceat(data.astype(np.int64), at)
    max_ts = np.zeros(n, dtype=np.int64)
    max_ts[nz] = np.maximum.reduceat(np.where(data, h["max_timestamp"], _INT64_MIN), at)
    leo = np.zeros(n, dtype=np.int64)
    leo[nz] = last[at + counts[nz] - 1] + 1
    if stats is not None:           # what was read for the partitions answered here
        stats.bytes_read += int(sizes[ok].sum())
        stats.batches += int(counts[ok].sum())
    for j in np.flatnonzero(ok).tolist():
        out[j] = (int(leo[j]), int(max_ts[j]) if has_data[j] else None)
    return out


def starts_of(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of ``counts`` items starts."""
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
