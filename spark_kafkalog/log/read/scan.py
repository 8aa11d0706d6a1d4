"""Scanning segments: windows of whole, valid batches, with a corruption policy
(:func:`scan_windows`), and the header-only walk a writer runs (:func:`walk_batches`)."""
# Everything that walks a partition's ``.log`` bytes — reading records, finding the log end,
# resolving transactions, seeking by timestamp, inspecting — goes through
# :func:`scan_windows`. It reads a segment in windows of whole batches (``window_bytes``;
# a batch larger than the window is read whole, as Kafka's reader grows its buffer), asks
# the format layer for the batch headers (CRCs checked), checks what the format layer
# cannot see on its own (offsets increasing across batches and segments, offsets inside
# their segment), and applies the corruption policy:
#
# ``fail``   raise :class:`CorruptRecordError` naming the file, byte position and offset;
# ``skip``   resynchronise at the next valid batch: scan forward byte by byte from the bad
#            batch's start + 1 (never trusting its length) for a position where a whole
#            batch with a valid CRC and a plausible offset starts; report what was
#            skipped through logging and :class:`ReadStats`;
# ``stop``   end the partition at the last valid batch (what broker recovery does).
#
# A batch cut short by the end of the partition's LAST segment is the normal end of a log
# after a crash (a broker truncates it on recovery): the scan stops with a warning
# whatever the policy, as it does on a zero-filled (preallocated) tail. Anywhere else a
# cut batch is corruption.
#
# Positions given to start a scan (from an index or a caller's hint) are checked: the
# batch found there must be valid and start at or before the offset the index promised;
# otherwise the scan falls back to the segment start (``ReadStats.index_fallbacks``).
from __future__ import annotations

import logging
import struct
import warnings
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import CorruptRecordError, InvalidOptionError, LogLayoutError
from spark_kafkalog.format import scan_header_rows
from spark_kafkalog.format.wire import (
    HEADER_PEEK,
    LEGACY_V0_MIN_SIZE,
    LEGACY_V1_MIN_SIZE,
    LEGACY_V1_TIMESTAMP_POS,
    LOG_OVERHEAD,
    MAGIC_POS,
    NO_TIMESTAMP,
    SIZE_POS,
    V2_HEADER_SIZE,
    V2_LAST_OFFSET_DELTA_POS,
    V2_MAX_TIMESTAMP_POS,
    V2_MIN_BATCH_LENGTH,
)
from spark_kafkalog.log.io import SegmentFile
from spark_kafkalog.log.read.pin import open_segment
from spark_kafkalog.log.model import PartitionDir, Segment

__all__ = ["ReadStats", "SkippedRange", "Window", "scan_windows", "POLICIES",
           "DEFAULT_WINDOW_BYTES", "DEFAULT_MAX_BATCH_BYTES", "segment_next_offset",
           "check_policy", "TornTailWarning", "walk_batches"]

log = logging.getLogger(__name__)

POLICIES = ("fail", "skip", "stop")
DEFAULT_WINDOW_BYTES = 16 * 1024 * 1024
#: a declared batch size above this is treated as corruption rather than read into memory
DEFAULT_MAX_BATCH_BYTES = 256 * 1024 * 1024
_MIN_WINDOW = 4096
# Offsets inside one segment are base + int32 (index entries store them relative).
_MAX_SEGMENT_SPAN = 1 << 31
_INT64_MIN = -(1 << 63)


class TornTailWarning(UserWarning):
    """The last segment ends inside a batch (or in zero padding): the normal end of a
    log a broker did not shut down cleanly."""


@dataclass(frozen=True)
class SkippedRange:
    """Bytes the ``skip`` policy passed over."""
    path: str
    start: int          # byte position of the bad data
    end: int            # where reading resumed (the segment size when nothing followed)
    offset: int | None  # the offset the bad batch claimed, if any
    reason: str


@dataclass
class ReadStats:
    """What a read did; pass one in to collect it (it is updated as the read proceeds)."""
    bytes_read: int = 0
    batches: int = 0
    records: int = 0
    skipped: list[SkippedRange] = field(default_factory=list)
    torn_tail: tuple[str, int, int] | None = None         # (path, position, bytes)
    stopped_at: tuple[str, int, int | None, str] | None = None   # policy stop
    index_fallbacks: int = 0
    #: records the log promises and the read did not find, with failOnDataLoss false
    #: (:class:`~spark_kafkalog.log.model.DataLoss`, see :mod:`.loss`)
    losses: list = field(default_factory=list)
    #: the offset ranges read: ``(topic, partition, start, end)``, end exclusive
    ranges: list = field(default_factory=list)

    @property
    def skipped_bytes(self) -> int:
        return sum(s.end - s.start for s in self.skipped)


@dataclass(frozen=True)
class Window:
    """Whole valid batches read from one segment: ``data[0]`` is at file position
    ``position``; ``headers`` (a numpy array of BATCH_HEADER_DTYPE, absolute positions:
    ``headers["last_offset"]`` is a column) has one row per batch in ``data``."""
    segment_index: int
    path: str
    position: int
    data: memoryview
    headers: np.ndarray

    @property
    def end(self) -> int:
        return self.position + len(self.data)


def check_policy(on_corruption: str) -> str:
    if on_corruption not in POLICIES:
        raise InvalidOptionError(f"on_corruption must be one of {', '.join(POLICIES)}, not "
                                 f"{on_corruption!r}")
    return on_corruption


@dataclass(frozen=True)
class _Problem:
    """Internal: a corrupt stretch found at ``position`` of the current segment."""
    position: int
    offset: int | None
    reason: str


def _be_int(arr: np.ndarray, idx: np.ndarray, nbytes: int) -> np.ndarray:
    """Big-endian signed integers of ``nbytes`` bytes starting at each of ``idx``."""
    acc = np.zeros(len(idx), dtype=np.uint64)
    for k in range(nbytes):
        acc = (acc << np.uint64(8)) | arr[idx + k].astype(np.uint64)
    if nbytes == 8:
        return acc.view(np.int64)
    signed = acc.astype(np.int64)
    limit = 1 << (8 * nbytes - 1)
    return np.where(signed >= limit, signed - (limit << 1), signed)


class _Scan:
    """State of one scan over a partition's segments (see :func:`scan_windows`)."""

    def __init__(self, fs, partition_dir, *, on_corruption, window_bytes, max_batch_bytes,
                 stats, initial_window, verify_crc, quiet, memory_map=False):
        self.fs = fs
        self.memory_map = bool(memory_map)
        self.p = partition_dir
        self.policy = check_policy(on_corruption)
        if window_bytes < 1:
            raise InvalidOptionError(f"window_bytes must be positive, not {window_bytes}")
        self.window_bytes = int(window_bytes)
        self.max_batch_bytes = int(max_batch_bytes)
        self.stats = stats
        self.initial_window = max(min(initial_window or self.window_bytes,
                                      self.window_bytes), 1)
        self.verify_crc = verify_crc
        self.quiet = quiet
        self.prev_last: int | None = None

    # ---- helpers -------------------------------------------------------------------

    def _warn(self, message: str) -> None:
        log.warning("%s", message)
        if not self.quiet:
            warnings.warn(message, TornTailWarning, stacklevel=4)

    def _all_zero(self, f: SegmentFile, start: int) -> bool:
        pos = start
        while pos < f.size:
            chunk = f.read(pos, min(self.window_bytes, f.size - pos))
            if np.frombuffer(chunk, dtype=np.uint8).any():
                return False
            pos += len(chunk)
        return True

    def _lo_hi(self, seg_i: int) -> tuple[int, int]:
        """Offsets a batch in segment ``seg_i`` may claim: [lo, hi)."""
        seg = self.p.segments[seg_i]
        lo = seg.base_offset if self.prev_last is None else max(seg.base_offset,
                                                                 self.prev_last + 1)
        nxt = self.p.next_base_offset(seg_i)
        hi = nxt if nxt is not None else seg.base_offset + _MAX_SEGMENT_SPAN
        return lo, hi

    def _check_offsets(self, seg_i: int, h: np.ndarray) -> tuple[int, str] | None:
        """First batch in ``h`` whose offsets cannot follow what came before:
        ``(row, reason)``, or None."""
        n = len(h)
        if n == 0:
            return None
        seg = self.p.segments[seg_i]
        nxt = self.p.next_base_offset(seg_i)
        hi = nxt if nxt is not None else seg.base_offset + _MAX_SEGMENT_SPAN
        base = h["base_offset"]
        last = h["last_offset"]
        magic = h["magic"]
        start = self.prev_last if self.prev_last is not None else _INT64_MIN
        # what must lie above the previous batch's last offset: a v2 batch's base and
        # last offsets, a legacy entry's (last) offset
        first = np.where(magic == 2, np.minimum(base, last), last)
        # the usual case, few operations: each first above the previous last makes the
        # last offsets increase (a batch's last is not below its first), so the first
        # and the final last bound them all
        if first[0] > start and last[0] >= seg.base_offset and last[-1] < hi and (
                n == 1 or (first[1:] > last[:-1]).all()):
            return None
        prev = np.empty(n, dtype=np.int64)
        prev[0] = start
        prev[1:] = last[:-1]
        bad = (first <= prev) | (last < seg.base_offset) | (last >= hi)
        if not bad.any():
            return None
        i = int(bad.argmax())
        if first[i] <= prev[i]:
            why = (f"offsets going backwards: batch {int(base[i])}..{int(last[i])} after "
                   f"offset {int(prev[i])}")
        else:
            why = (f"batch offsets {int(base[i])}..{int(last[i])} outside the segment's "
                   f"range [{seg.base_offset}, {nxt if nxt is not None else 'end'})")
        return i, why

    def _resync(self, f: SegmentFile, seg_i: int, start: int) -> int | None:
        """Position of the next valid batch at or after ``start`` in this segment, found
        by testing every byte position: the 17-byte prefix must look like a batch
        (magic 0-2, a possible length, an offset this segment may hold) and then the
        whole batch must pass the format layer's checks with its CRC verified."""
        lo, hi = self._lo_hi(seg_i)
        chunk_len = max(self.window_bytes, 1 << 16)
        pos = start
        while pos + HEADER_PEEK <= f.size:
            data = f.read(pos, chunk_len)
            arr = np.frombuffer(data, dtype=np.uint8)
            n_pos = len(arr) - HEADER_PEEK + 1          # positions whose prefix fits
            if n_pos <= 0:
                break
            cand = np.flatnonzero(arr[MAGIC_POS:MAGIC_POS + n_pos] <= 2)
            if len(cand):
                length = _be_int(arr, cand + SIZE_POS, 4)
                magic = arr[cand + MAGIC_POS]
                min_len = np.where(magic == 2, V2_MIN_BATCH_LENGTH, LEGACY_V0_MIN_SIZE)
                ok = (length >= min_len) & (length + LOG_OVERHEAD <= self.max_batch_bytes)
                ok &= (pos + cand + LOG_OVERHEAD + length) <= f.size
                cand = cand[ok]
                if len(cand):
                    offset = _be_int(arr, cand, 8)
                    cand = cand[(offset >= lo) & (offset < hi)]
            for c in cand.tolist():
                at = pos + c
                size = LOG_OVERHEAD + struct.unpack_from(">i", data, c + SIZE_POS)[0]
                batch = data[c:c + size] if c + size <= len(data) else f.read(at, size)
                scan = scan_header_rows(batch, position_base=at, verify_crc=True,
                                        first_offset_hint=lo)
                first = scan.headers[:1]
                if len(first) and self._check_offsets(seg_i, first) is None:
                    return at
            if pos + len(data) >= f.size:
                break
            pos += n_pos
        return None

    # ---- the scan ------------------------------------------------------------------

    def windows(self, seg_i: int, position: int, *, end_offset: int | None,
                seek_check: int | None, read_limit, one_segment: bool = False
                ) -> Iterator[Window]:
        segments = self.p.segments
        while seg_i < len(segments):
            seg = segments[seg_i]
            f = open_segment(self.fs, seg, self.stats, self.memory_map)
            limit = read_limit(seg_i) if callable(read_limit) else read_limit
            try:
                result = yield from self._segment(f, seg_i, position, end_offset,
                                                  seek_check, limit)
            finally:
                f.close()
            if result == "restart":
                position, seek_check = 0, None
                continue
            if result == "done" or one_segment:
                return
            seg_i += 1
            position, seek_check = 0, None
            if not callable(read_limit):
                read_limit = None

    def _segment(self, f: SegmentFile, seg_i: int, position: int, end_offset, seek_check,
                 read_limit):
        """Yield the windows of one segment; return "next", "done" or "restart"."""
        is_last = seg_i == len(self.p.segments) - 1
        pos = position
        carry = b""
        want = self.initial_window
        checking = seek_check is not None and position > 0
        while pos < f.size:
            need = max(want, len(carry) + 1)
            if read_limit is not None and read_limit > pos:
                need = min(need, max(read_limit - pos, len(carry) + 1))
            data = None         # drop the previous window before reading the next
            data = f.read(pos, need, carry) if carry else f.read(pos, need)
            carry = b""
            hint = (self.prev_last + 1) if self.prev_last is not None else \
                (self.p.segments[seg_i].base_offset if pos == 0 else None)
            scan = scan_header_rows(data, position_base=pos, verify_crc=self.verify_crc,
                                    first_offset_hint=hint)
            h = scan.headers
            end = scan.end
            problem = scan.problem
            if checking:
                # Trust the start position only once the log confirms it: a whole valid
                # batch there, starting at or before the offset the index promised.
                if len(h):
                    checking = False
                    confirmed = int(h["base_offset"][0]) <= seek_check
                else:
                    more = (problem is not None and problem.kind == "torn"
                            and pos + len(data) < f.size)
                    confirmed = None if more else False
                if confirmed is False:
                    self.stats.index_fallbacks += 1
                    log.warning("%s: the index points to position %d for offset %d but the "
                                "log does not confirm it; scanning the segment from its "
                                "start", f.path, pos, seek_check)
                    return "restart"
            bad = self._check_offsets(seg_i, h)
            if bad is not None:
                row, why = bad
                bad_pos = int(h["position"][row])
                problem = _Problem(bad_pos, int(h["base_offset"][row]), why)
                h = h[:row]
                end = bad_pos
            if len(h):
                self.stats.batches += len(h)
                self.prev_last = int(h["last_offset"][-1])
                # a view, not a copy: the window's bytes are held once
                yield Window(seg_i, f.path, pos, memoryview(data)[:end - pos], h)
                if end_offset is not None and self.prev_last >= end_offset - 1:
                    return "done"
            want = min(want * 2, self.window_bytes)
            if problem is None:
                pos = end
                continue
            where, offset, reason = problem.position, problem.offset, problem.reason
            if not isinstance(problem, _Problem):
                if problem.kind == "torn":
                    size = None
                    rest = data[where - pos:]
                    if len(rest) >= LOG_OVERHEAD:
                        size = LOG_OVERHEAD + struct.unpack_from(">i", rest, SIZE_POS)[0]
                    fits = where + (size if size is not None else HEADER_PEEK) <= f.size
                    if size is not None and size <= len(rest):
                        # "torn" although every byte is there: never loop on it
                        fits = False
                        reason = f"batch of {size} bytes reported incomplete: {reason}"
                    elif fits and (size is None or size <= self.max_batch_bytes):
                        # the window ended inside a batch: read on from its start
                        # copied out (at most one batch), so no view keeps this
                        # window's buffer from being reused for the next one
                        carry = bytes(rest)
                        rest = None
                        pos = where
                        if size is not None:
                            want = max(want, size)
                        continue
                    elif size is not None and size > self.max_batch_bytes and fits:
                        reason = (f"batch declares {size} bytes, more than max_batch_bytes "
                                  f"({self.max_batch_bytes}); raise it if this is real")
                    elif is_last:
                        if self._torn_tail(f, seg_i, where, offset):
                            return "done"
                        reason = ("batch runs past the end of the log but valid batches "
                                  "follow it: " + reason)
                    else:
                        reason = "batch cut short by the end of a segment that is not " \
                                 "the last: " + reason
            if is_last and self._all_zero(f, where):
                self._tail(f, where, "a zero-filled (preallocated) tail")
                return "done"
            # corruption: apply the policy
            if self.policy == "fail":
                raise CorruptRecordError(reason, path=f.path, position=where, offset=offset)
            if self.policy == "stop":
                self.stats.stopped_at = (f.path, where, offset, reason)
                log.warning("%s: corrupt data at position %d (offset %s): %s; stopping the "
                            "partition here (on_corruption=stop)", f.path, where, offset, reason)
                return "done"
            resume = self._resync(f, seg_i, where + 1)
            skipped = SkippedRange(f.path, where, resume if resume is not None else f.size,
                                   offset, reason)
            self.stats.skipped.append(skipped)
            log.warning("%s: skipped bytes %d..%d (offset %s): %s (on_corruption=skip)",
                        f.path, skipped.start, skipped.end, offset, reason)
            if resume is None:
                return "next"
            pos = resume
        return "next"

    def _torn_tail(self, f: SegmentFile, seg_i: int, where: int, offset) -> bool:
        """At a batch cut by the end of the last segment: True (and warn) when nothing
        valid follows it, so it is a crash's torn tail; False when a valid batch follows
        (then it is corruption)."""
        if self._resync(f, seg_i, where + 1) is not None:
            return False
        self._tail(f, where, f"a torn batch (offset {offset})")
        return True

    def _tail(self, f: SegmentFile, where: int, what: str) -> None:
        self.stats.torn_tail = (f.path, where, f.size - where)
        self._warn(f"{f.path}: the log ends with {what} at position {where} "
                   f"({f.size - where} bytes); treating it as the end of the log, as broker "
                   "recovery would")


def scan_windows(fs: pafs.FileSystem, partition_dir: PartitionDir, *, segment_index: int = 0,
                 position: int = 0, end_offset: int | None = None,
                 seek_check: int | None = None, read_limit=None,
                 on_corruption: str = "fail", window_bytes: int = DEFAULT_WINDOW_BYTES,
                 max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                 stats: ReadStats | None = None, initial_window: int | None = None,
                 verify_crc: bool = True, prev_last_offset: int | None = None,
                 quiet: bool = False, one_segment: bool = False,
                 memory_map: bool = False) -> Iterator[Window]:
    """Windows of whole valid batches of ``partition_dir`` from ``(segment_index,
    position)`` to the log end, or until a batch reaching ``end_offset - 1`` has been
    yielded.

    ``seek_check``: the offset an index promised for ``position`` (the batch there must
    start at or before it; else the segment is rescanned from its start).
    ``read_limit``: a byte position in the first segment beyond which no batch is needed,
    or a callable ``segment index -> position or None`` (sizes reads so a range ending
    mid-segment does not read a whole window past its end; never ends the scan: if the
    position is wrong, reading simply goes on). ``initial_window``: first read size,
    doubling up to ``window_bytes`` (cheap probes of a segment's head or tail).
    ``prev_last_offset``: the last offset known to precede ``position``.
    ``quiet``: log a torn tail without a Python warning (for internal probes).
    ``one_segment``: end at the end of the first segment (inspection of one segment).
    ``memory_map``: on the local filesystem, map windows instead of reading them (no
    copy; only for a log nothing truncates while it is read: see :class:`SegmentFile`).
    """
    stats = stats if stats is not None else ReadStats()
    scan = _Scan(fs, partition_dir, on_corruption=on_corruption, window_bytes=window_bytes,
                 max_batch_bytes=max_batch_bytes, stats=stats, initial_window=initial_window,
                 verify_crc=verify_crc, quiet=quiet, memory_map=memory_map)
    scan.prev_last = prev_last_offset
    if not partition_dir.segments:
        return iter(())
    return scan.windows(segment_index, position, end_offset=end_offset,
                        seek_check=seek_check, read_limit=read_limit,
                        one_segment=one_segment)


def segment_next_offset(fs: pafs.FileSystem, segment: Segment) -> int:
    """The offset after the last valid batch of one segment (its base offset when it
    holds none): Kafka's readNextOffset, used to place ``.swap`` segments. Stops quietly
    at the first damage."""
    p = PartitionDir("", 0, "", "", (segment,))
    last = None
    for w in scan_windows(fs, p, on_corruption="stop", quiet=True, initial_window=1 << 16):
        last = int(w.headers["last_offset"][-1])
    return segment.base_offset if last is None else last + 1


_MIN_LENGTH = {2: V2_MIN_BATCH_LENGTH, 1: LEGACY_V1_MIN_SIZE, 0: LEGACY_V0_MIN_SIZE}


def walk_batches(read, start: int, end: int, path: str, *, strict: bool = True
                 ) -> tuple[list[int], list[int], list[int]]:
    """Headers of the batches in ``[start, end)`` of a segment, reading only each batch's
    first bytes (no CRC check): ``(positions, last offsets, max timestamps)``, every
    magic (v0 batches have no timestamp: ``NO_TIMESTAMP``).

    ``read``: a callable ``(position, length) -> bytes`` or a file with ``read_at(length,
    position)`` (a ``pyarrow`` RandomAccessFile). ``strict`` (what a writer needs before
    appending): a batch cut by ``end`` raises :class:`CorruptRecordError` naming the
    position, since a partial tail is a broker crash its own recovery must truncate;
    otherwise such a torn tail ends the walk quietly. Either way an unknown magic, a
    length too small for its magic, or offsets going backwards raise."""
    if hasattr(read, "read_at"):
        read = (lambda f: lambda pos, n: f.read_at(n, pos))(read)
    positions: list[int] = []
    lasts: list[int] = []
    max_ts: list[int] = []
    pos = start
    while pos < end:
        if end - pos < HEADER_PEEK:
            if not strict:
                break
            raise CorruptRecordError(f"torn batch at the end of the segment ({end - pos} "
                                     "bytes)", path=path, position=pos)
        want = min(V2_HEADER_SIZE, end - pos)
        head = read(pos, want)
        if len(head) < want:
            raise LogLayoutError(f"short read: {len(head)} of {want} bytes (the file is "
                                 "shorter than the range walked)", path=path, position=pos)
        base, length = struct.unpack_from(">qi", head, 0)
        magic = head[MAGIC_POS]
        size = LOG_OVERHEAD + length
        minimum = _MIN_LENGTH.get(magic)
        if minimum is None:
            raise CorruptRecordError(f"unknown magic {magic}", path=path, position=pos,
                                     offset=base)
        if length < minimum:
            raise CorruptRecordError(f"batch length {length} is too small for magic {magic}",
                                     path=path, position=pos, offset=base)
        if pos + size > end:
            if not strict:
                break
            raise CorruptRecordError(f"torn batch at the end of the segment: {size} bytes "
                                     f"declared, {end - pos} present", path=path,
                                     position=pos, offset=base)
        if magic == 2:
            (delta,) = struct.unpack_from(">i", head, V2_LAST_OFFSET_DELTA_POS)
            (ts,) = struct.unpack_from(">q", head, V2_MAX_TIMESTAMP_POS)
            last = base + delta
        elif magic == 1:
            # a legacy entry's offset is its (last inner) offset; the wrapper's timestamp
            # is the batch's max timestamp
            (ts,) = struct.unpack_from(">q", head, LEGACY_V1_TIMESTAMP_POS)
            last = base
        else:
            ts = NO_TIMESTAMP
            last = base
        if lasts and last <= lasts[-1]:
            raise CorruptRecordError(f"offsets go backwards ({last} after {lasts[-1]})",
                                     path=path, position=pos, offset=base)
        positions.append(pos)
        lasts.append(last)
        max_ts.append(ts)
        pos += size
    return positions, lasts, max_ts


def check_segment_heads(fs: pafs.FileSystem, partition_dir: PartitionDir,
                        start_offset: int | None = None, end_offset: int | None = None,
                        probe_bytes: int = 1 << 16) -> int:
    """Check the first batches (up to ``probe_bytes``, CRCs included) of every segment of
    ``partition_dir``: a cheap test for a damaged, zeroed or foreign file before a long
    job starts, one small read per segment (damage further into a segment is found by
    the read itself). Raises :class:`CorruptRecordError` naming file, position and
    offset; returns the number of segments probed. ``start_offset``/``end_offset``:
    only the segments holding offsets in ``[start_offset, end_offset)``."""
    probed = 0
    for i, seg in enumerate(partition_dir.segments):
        following = partition_dir.next_base_offset(i)
        if seg.size == 0 or (end_offset is not None and seg.base_offset >= end_offset) or \
                (start_offset is not None and following is not None
                 and following <= start_offset):
            continue
        windows = scan_windows(fs, partition_dir, segment_index=i, one_segment=True,
                               initial_window=probe_bytes, window_bytes=probe_bytes,
                               quiet=True)
        try:
            next(iter(windows), None)
        finally:
            close = getattr(windows, "close", None)
            if close is not None:
                close()
        probed += 1
    return probed
