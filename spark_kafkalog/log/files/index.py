"""Segment index files, ``.index`` (offsets) and ``.timeindex`` (timestamps): parsed,
validated and built as a Kafka broker writes them (layouts and rules below)."""
# Layouts (big-endian, as Kafka's OffsetIndex / TimeIndex write them)::
#
#     .index      entry => relativeOffset int32, position int32            (8 bytes)
#     .timeindex  entry => timestamp int64, relativeOffset int32           (12 bytes)
#
# ``relativeOffset`` is relative to the segment's base offset (the file name). Kafka appends
# an offset-index entry ``(largest offset of an append, file position where that append
# starts)`` every ``index.interval.bytes``; with one batch per append the offset is the last
# offset of the batch at that position. A time-index entry is ``(largest timestamp so far,
# offset of the batch holding it)``. Entries are strictly increasing (time-index offsets are
# non-decreasing), so everything a reader relies on is:
#
# - offset index: every record at a position before ``position`` has an offset smaller than
#   the entry's offset, hence reading from ``position`` finds every offset >= entry offset;
# - time index: every record at an offset <= the entry's offset has a timestamp <= the
#   entry's timestamp.
#
# The active segment's index files are preallocated (``segment.index.bytes``, 10 MiB) and
# zero-filled past the last entry. Like Kafka's DumpLogSegments, a reader stops at the first
# entry whose relative offset is 0 after entry 0 (entry 0 may legitimately be ``(0, 0)``:
# a first batch ending at the base offset). Files are read from their start only up to that
# point: the boundary is found by bisection with a few 8/12-byte reads, so a 10 MiB
# preallocated file costs kilobytes of I/O, not megabytes.
#
# Indexes are hints: entries past the first non-increasing entry, positions past the end of
# the ``.log`` and offsets at or past the next segment's base offset are dropped here, and
# the reader checks the batch found at a position before trusting it (see read/scan.py).
# Building (:class:`IndexBuilder`, :func:`build_indexes`) follows the broker's rules, given
# beside the code below.
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError, as_storage_error
from spark_kafkalog.format.wire import NO_TIMESTAMP
from spark_kafkalog.log.io import open_listed

__all__ = [
    "OFFSET_INDEX_ENTRY", "TIME_INDEX_ENTRY", "OffsetIndex", "TimeIndex",
    "read_offset_index", "read_time_index", "parse_offset_index", "parse_time_index",
    "encode_offset_index", "encode_time_index", "IndexBuilder", "build_indexes",
    "OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE", "DEFAULT_MAX_INDEX_BYTES",
]

#: relativeOffset int32, position int32
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
#: timestamp int64, relativeOffset int32
TIME_INDEX_ENTRY = struct.Struct(">qi")
OFFSET_ENTRY_SIZE = OFFSET_INDEX_ENTRY.size      # 8
TIME_ENTRY_SIZE = TIME_INDEX_ENTRY.size          # 12
_OFFSET_DTYPE = np.dtype([("rel", ">i4"), ("pos", ">i4")])
_TIME_DTYPE = np.dtype([("ts", ">i8"), ("rel", ">i4")])

# segment.index.bytes is an int; Kafka's default is 10 MiB. Anything larger than this cap
# is not an index file a broker wrote.
MAX_INDEX_FILE_BYTES = 1 << 31


@dataclass(frozen=True)
class OffsetIndex:
    """Valid entries of one ``.index`` file, as absolute offsets and byte positions.

    ``offsets`` and ``positions`` are int64 numpy arrays, both strictly increasing.
    ``file_entries`` is how many whole entries the file holds (including a zero tail);
    ``dropped`` how many of the non-tail entries were rejected as inconsistent."""
    base_offset: int
    offsets: np.ndarray
    positions: np.ndarray
    file_entries: int = 0
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= target; the segment
        start ``(base_offset, 0)`` when there is none (Kafka's OffsetIndex.lookup)."""
        i = int(np.searchsorted(self.offsets, target_offset, side="right")) - 1
        if i < 0:
            return self.base_offset, 0
        return int(self.offsets[i]), int(self.positions[i])

    @property
    def last(self) -> tuple[int, int] | None:
        if not len(self.offsets):
            return None
        return int(self.offsets[-1]), int(self.positions[-1])


# Not one class with OffsetIndex: other entry pairs, other order rules (non-decreasing),
# and a lookup strictly below the target where OffsetIndex's takes the last entry <= it.
@dataclass(frozen=True)
class TimeIndex:
    """Valid entries of one ``.timeindex`` file: int64 numpy arrays ``timestamps``
    (non-decreasing) and absolute ``offsets`` (non-decreasing)."""
    base_offset: int
    timestamps: np.ndarray
    offsets: np.ndarray
    file_entries: int = 0
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.timestamps)

    def last_before(self, timestamp_ms: int) -> tuple[int, int] | None:
        """The last entry whose timestamp is strictly below ``timestamp_ms``, or None.

        Every record at an offset <= that entry's offset has a timestamp below the target,
        so a search for the earliest record with timestamp >= target may start after it.
        (Kafka's lookup takes the last entry <= target, which can skip an earlier record
        carrying exactly the target timestamp.)"""
        i = int(np.searchsorted(self.timestamps, timestamp_ms, side="left")) - 1
        if i < 0:
            return None
        return int(self.timestamps[i]), int(self.offsets[i])

    @property
    def last(self) -> tuple[int, int] | None:
        """``(max timestamp, offset)`` of the last entry, or None."""
        if not len(self.timestamps):
            return None
        return int(self.timestamps[-1]), int(self.offsets[-1])


def _prefix_end(entries_rel: np.ndarray) -> int:
    """Number of entries before the zero tail: the first entry after entry 0 whose
    relative offset is 0 ends the valid part."""
    if len(entries_rel) <= 1:
        return len(entries_rel)
    zeros = np.flatnonzero(entries_rel[1:] == 0)
    return int(zeros[0]) + 1 if len(zeros) else len(entries_rel)


def _increasing_prefix(values: np.ndarray, strict: bool) -> int:
    """Length of the longest prefix that is (strictly) increasing."""
    if len(values) <= 1:
        return len(values)
    diff = np.diff(values)
    bad = np.flatnonzero(diff <= 0) if strict else np.flatnonzero(diff < 0)
    return int(bad[0]) + 1 if len(bad) else len(values)


def parse_offset_index(data: bytes, base_offset: int, *, segment_size: int | None = None,
                       next_base_offset: int | None = None, file_entries: int | None = None
                       ) -> OffsetIndex:
    """Decode ``.index`` bytes (any trailing partial entry is ignored, like Kafka)."""
    usable = len(data) - len(data) % OFFSET_INDEX_ENTRY.size
    raw = np.frombuffer(data, dtype=_OFFSET_DTYPE, count=usable // OFFSET_INDEX_ENTRY.size)
    n_file = len(raw) if file_entries is None else file_entries
    rel = raw["rel"].astype(np.int64)
    pos = raw["pos"].astype(np.int64)
    n = _prefix_end(rel)
    rel, pos = rel[:n], pos[:n]
    # Stop at the first entry that breaks the invariants a broker maintains.
    ok = (rel >= 0) & (pos >= 0)
    if segment_size is not None:
        # an entry must point inside the .log (an empty .log has no batch at all)
        ok &= pos < segment_size
    offsets = rel + base_offset
    if next_base_offset is not None:
        ok &= offsets < next_base_offset
    bad = np.flatnonzero(~ok)
    m = int(bad[0]) if len(bad) else n
    m = min(m, _increasing_prefix(offsets[:m], True), _increasing_prefix(pos[:m], True))
    return OffsetIndex(base_offset, offsets[:m].copy(), pos[:m].copy(), n_file, n - m)


def parse_time_index(data: bytes, base_offset: int, *, next_base_offset: int | None = None,
                     file_entries: int | None = None) -> TimeIndex:
    """Decode ``.timeindex`` bytes (any trailing partial entry is ignored)."""
    usable = len(data) - len(data) % TIME_INDEX_ENTRY.size
    raw = np.frombuffer(data, dtype=_TIME_DTYPE, count=usable // TIME_INDEX_ENTRY.size)
    n_file = len(raw) if file_entries is None else file_entries
    ts = raw["ts"].astype(np.int64)
    rel = raw["rel"].astype(np.int64)
    n = _prefix_end(rel)
    ts, rel = ts[:n], rel[:n]
    if n == 1 and ts[0] == 0 and rel[0] == 0 and n_file > 1:
        # entry 0 of an all-zero preallocated file: timestamp 0 is no information
        n = 0
        ts, rel = ts[:0], rel[:0]
    ok = (rel >= 0) & (ts >= 0)
    offsets = rel + base_offset
    if next_base_offset is not None:
        ok &= offsets < next_base_offset
    bad = np.flatnonzero(~ok)
    m = int(bad[0]) if len(bad) else n
    m = min(m, _increasing_prefix(ts[:m], False), _increasing_prefix(offsets[:m], False))
    return TimeIndex(base_offset, ts[:m].copy(), offsets[:m].copy(), n_file, n - m)


def _read_index_prefix(fs: pafs.FileSystem, path: str, entry_size: int, rel_at: int
                       ) -> tuple[bytes, int] | None:
    """Read the part of an index file before its zero tail.

    Returns ``(bytes, entries in the file)``, or None when the file does not exist. The
    boundary is found by bisection over entries (a preallocated file is a run of entries
    with non-zero relative offsets followed by zeros), reading ``entry_size`` bytes per
    probe, so only the live prefix is read in full."""
    try:
        f = open_listed(fs, path)
    except FileNotFoundError:
        return None
    except OSError as err:
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            return None
        raise (as_storage_error(err, path, "open")
               or LogLayoutError(f"cannot open index file: {err}", path=path)) from err
    with f:
        size = f.size()
        if size > MAX_INDEX_FILE_BYTES:
            raise LogLayoutError(f"index file is {size} bytes, larger than any index a broker "
                                 "writes", path=path)
        n = size // entry_size
        if n == 0:
            return b"", 0

        def rel(i: int) -> int:
            entry = f.read_at(entry_size, i * entry_size)
            if len(entry) < entry_size:
                # the file shrank since its size was read: a broker trims the active
                # segment's preallocated index when it rolls, and what it cut was the
                # zero tail
                return 0
            return struct.unpack_from(">i", entry, rel_at)[0]

        def whole(data: bytes) -> bytes:
            return data[:len(data) - len(data) % entry_size]

        if n == 1 or rel(n - 1) != 0:
            return whole(f.read_at(n * entry_size, 0)), n
        # Invariant: entry lo is live (or entry 0), entry hi is in the zero tail.
        lo, hi = 0, n - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if rel(mid) != 0:
                lo = mid
            else:
                hi = mid
        return whole(f.read_at(hi * entry_size, 0)), n


def read_offset_index(fs: pafs.FileSystem, path: str, base_offset: int, *,
                      segment_size: int | None = None, next_base_offset: int | None = None
                      ) -> OffsetIndex | None:
    """Valid entries of a ``.index`` file (None when the file does not exist).

    ``segment_size`` (the ``.log`` size) and ``next_base_offset`` (the next segment's base
    offset) bound what entries may claim; entries past them are dropped."""
    got = _read_index_prefix(fs, path, OFFSET_INDEX_ENTRY.size, 0)
    if got is None:
        return None
    data, n_file = got
    return parse_offset_index(data, base_offset, segment_size=segment_size,
                              next_base_offset=next_base_offset, file_entries=n_file)


def read_time_index(fs: pafs.FileSystem, path: str, base_offset: int, *,
                    next_base_offset: int | None = None) -> TimeIndex | None:
    """Valid entries of a ``.timeindex`` file (None when the file does not exist)."""
    got = _read_index_prefix(fs, path, TIME_INDEX_ENTRY.size, 8)
    if got is None:
        return None
    data, n_file = got
    return parse_time_index(data, base_offset, next_base_offset=next_base_offset,
                            file_entries=n_file)


def encode_offset_index(entries, base_offset: int) -> bytes:
    """``.index`` bytes for ``[(absolute offset, position), ...]`` (validated)."""
    out = bytearray()
    last_off = last_pos = -1
    for offset, position in entries:
        rel = offset - base_offset
        if not (0 <= rel <= INT32_MAX) or not (0 <= position <= INT32_MAX):
            raise LogLayoutError(f"index entry ({offset}, {position}) does not fit a segment "
                                 f"based at {base_offset}", position=len(out), offset=offset)
        if offset <= last_off or position <= last_pos:
            raise LogLayoutError(f"index entries must increase: ({offset}, {position}) after "
                                 f"({last_off}, {last_pos})", position=len(out), offset=offset)
        out += OFFSET_INDEX_ENTRY.pack(rel, position)
        last_off, last_pos = offset, position
    return bytes(out)


def encode_time_index(entries, base_offset: int) -> bytes:
    """``.timeindex`` bytes for ``[(timestamp, absolute offset), ...]`` (validated)."""
    out = bytearray()
    last_ts = last_off = -1
    for timestamp, offset in entries:
        rel = offset - base_offset
        if not (0 <= rel <= INT32_MAX):
            raise LogLayoutError(f"time index offset {offset} does not fit a segment based at "
                                 f"{base_offset}", position=len(out), offset=offset)
        if timestamp <= last_ts or offset < last_off:
            raise LogLayoutError(f"time index entries must increase: ({timestamp}, {offset}) "
                                 f"after ({last_ts}, {last_off})", position=len(out),
                                 offset=offset)
        out += TIME_INDEX_ENTRY.pack(timestamp, rel)
        last_ts, last_off = timestamp, offset
    return bytes(out)


# ---- building: the entries a broker writes -------------------------------------------
#
# Kafka's ``LogSegment.recover`` (what ``append`` + ``onBecomeInactiveSegment`` produce for
# a segment written one batch per append): the running "max timestamp so far" and its
# offset move on every batch whose maxTimestamp is strictly greater (the offset is the
# batch's LAST offset); a batch at ``position`` gets an offset-index entry ``(last
# offset, position)`` when ``position - last entry position > index.interval.bytes`` (so
# the first batch never does), and then the time index is offered ``(max so far, its
# offset)``, kept only when its timestamp is strictly greater than the last kept one.
# Closing or rolling offers that pair once more (the "close entry") and trims the files.
#
# Continuing a segment: the last offset-index entry gives the last entry position; the
# last time-index entry is always ``(max so far, its offset)`` and is a close entry
# (dropped before appending, re-offered at the end) exactly when its offset is past the
# last offset-index entry's offset, or the offset index is empty. Appending in several
# commits thus gives byte for byte the files one recover over the whole segment writes.

#: Kafka's default ``segment.index.bytes`` (10 MiB): an index holds at most this many
#: bytes of entries; the broker rolls the segment when either index is full.
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024
INT32_MAX = 2**31 - 1


#: batches :meth:`IndexBuilder.add_batches` adds one by one, below its vectorized path
SMALL_BATCH_COUNT = 8


@dataclass
class IndexBuilder:
    """Index state of one segment while batches are appended to it.

    ``offset_entries`` / ``time_entries`` hold the entries *added since this builder was
    created* (the caller appends them to the files, after truncating the time index by
    ``drop_time_tail_bytes`` when continuing a segment that had a close entry).
    """

    base_offset: int
    interval_bytes: int
    last_entry_position: int = 0
    last_offset_entry: int | None = None        # offset of the last offset-index entry
    offset_entry_count: int = 0                 # entries in the file incl. new ones
    max_timestamp: int = NO_TIMESTAMP           # max batch timestamp so far
    offset_of_max_timestamp: int = -1
    time_last_timestamp: int = NO_TIMESTAMP     # last entry the time index holds
    time_last_offset: int = -1
    time_entry_count: int = 0
    drop_time_tail_bytes: int = 0               # close entry to remove before appending
    offset_entries: bytearray = field(default_factory=bytearray)
    time_entries: bytearray = field(default_factory=bytearray)
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES

    # ---- construction -------------------------------------------------------------
    @classmethod
    def for_new_segment(cls, base_offset: int, interval_bytes: int,
                        max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES) -> "IndexBuilder":
        return cls(base_offset=base_offset, interval_bytes=interval_bytes,
                   max_index_bytes=max_index_bytes)

    @classmethod
    def continuing(cls, base_offset: int, interval_bytes: int, *,
                   offset_index_tail: bytes, offset_index_size: int,
                   time_index_tail: bytes, time_index_size: int,
                   path: str | None = None,
                   max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES) -> "IndexBuilder":
        """State to continue a trimmed segment from the last bytes of its index files.

        ``offset_index_tail``: the last entry (8 bytes) or b"" when the file is empty;
        ``time_index_tail``: the last two entries (24 bytes), or fewer when the file
        holds fewer. Sizes are the full file sizes. Raises :class:`LogLayoutError` for a
        file that is not a whole number of entries or has a zero (preallocated) tail —
        such a segment needs :func:`rebuild` first.
        """
        if offset_index_size % OFFSET_ENTRY_SIZE or time_index_size % TIME_ENTRY_SIZE:
            raise LogLayoutError(
                "index file is not a whole number of entries (not trimmed: the broker was "
                "not shut down cleanly); rebuild the segment's indexes first", path=path)
        b = cls(base_offset=base_offset, interval_bytes=interval_bytes,
                max_index_bytes=max_index_bytes)
        b.offset_entry_count = offset_index_size // OFFSET_ENTRY_SIZE
        if b.offset_entry_count:
            if len(offset_index_tail) != OFFSET_ENTRY_SIZE:
                raise LogLayoutError("offset_index_tail must be the last 8-byte entry, got "
                                     f"{len(offset_index_tail)} bytes", path=path)
            rel, pos = OFFSET_INDEX_ENTRY.unpack(offset_index_tail)
            if pos <= 0:
                # No real entry sits at position 0 (the first batch never gets one): a zero
                # entry is a preallocated, untrimmed tail.
                raise LogLayoutError("offset index ends in a zero entry (preallocated, not "
                                     "trimmed); rebuild the segment's indexes first",
                                     path=path, position=offset_index_size - OFFSET_ENTRY_SIZE)
            b.last_entry_position = pos
            b.last_offset_entry = base_offset + rel
        b.time_entry_count = time_index_size // TIME_ENTRY_SIZE
        tail = time_index_tail
        if b.time_entry_count:
            n_tail = min(b.time_entry_count, 2)
            if len(tail) != n_tail * TIME_ENTRY_SIZE:
                raise LogLayoutError("time_index_tail must hold the last min(2, entries) entries, "
                                     f"got {len(tail)} bytes", path=path)
            entries = [TIME_INDEX_ENTRY.unpack_from(tail, i * TIME_ENTRY_SIZE)
                       for i in range(n_tail)]
            last_ts, last_rel = entries[-1]
            b.max_timestamp = last_ts
            b.offset_of_max_timestamp = base_offset + last_rel
            is_close_entry = (b.last_offset_entry is None
                              or base_offset + last_rel > b.last_offset_entry)
            if is_close_entry:
                b.drop_time_tail_bytes = TIME_ENTRY_SIZE
                b.time_entry_count -= 1
                if n_tail == 2:
                    prev_ts, prev_rel = entries[0]
                    b.time_last_timestamp = prev_ts
                    b.time_last_offset = base_offset + prev_rel
            else:
                b.time_last_timestamp = last_ts
                b.time_last_offset = base_offset + last_rel
        return b

    # ---- appending ---------------------------------------------------------------------
    def add_batch(self, position: int, last_offset: int, max_timestamp: int) -> None:
        """Account for one batch appended at byte ``position`` of the segment."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if position - self.last_entry_position > self.interval_bytes:
            self.offset_entries += OFFSET_INDEX_ENTRY.pack(last_offset - self.base_offset,
                                                           position)
            self.offset_entry_count += 1
            self.last_offset_entry = last_offset
            self._offer_time_entry()
            self.last_entry_position = position

    def add_batches(self, positions, last_offsets, max_timestamps) -> None:
        """:meth:`add_batch` over parallel sequences (one element per batch, positions
        increasing), vectorized: the same entries, without a Python step per batch (a
        few batches, as a commit to many partitions gives each, go one by one: numpy's
        cost per call is more than theirs)."""
        if len(positions) <= SMALL_BATCH_COUNT:
            for p, last, ts in zip(np.asarray(positions).tolist(),
                                   np.asarray(last_offsets).tolist(),
                                   np.asarray(max_timestamps).tolist()):
                self.add_batch(p, last, ts)
            return
        pos = np.asarray(positions, dtype=np.int64)
        lasts = np.asarray(last_offsets, dtype=np.int64)
        ts = np.asarray(max_timestamps, dtype=np.int64)
        n = len(pos)
        if n == 0:
            return
        # running max timestamp (strictly greater replaces) and the offset it belongs to
        before = np.empty(n, dtype=np.int64)
        before[0] = self.max_timestamp
        cm = np.maximum.accumulate(np.maximum(ts, self.max_timestamp))
        before[1:] = cm[:-1]
        owner = np.maximum.accumulate(np.where(ts > before, np.arange(n), -1))
        off_max = np.where(owner >= 0, lasts[np.maximum(owner, 0)],
                           self.offset_of_max_timestamp)
        # offset-index entry points: greedy, each more than interval bytes past the last
        entries = self._entry_points(pos)
        if len(entries):
            e_pos, e_last = pos[entries], lasts[entries]
            rel = e_last - self.base_offset
            out = np.empty(len(entries), dtype=_OFFSET_DTYPE)
            out["rel"], out["pos"] = rel, e_pos
            self.offset_entries += out.tobytes()
            self.offset_entry_count += len(entries)
            self.last_offset_entry = int(e_last[-1])
            self.last_entry_position = int(e_pos[-1])
            # the time index is offered (max so far, its offset) at each entry point and
            # keeps the strictly increasing ones
            vals = cm[entries]
            prev = np.empty_like(vals)
            prev[0] = self.time_last_timestamp
            prev[1:] = np.maximum(vals[:-1], self.time_last_timestamp)
            keep = vals > prev
            if keep.any():
                tv = np.empty(int(keep.sum()), dtype=_TIME_DTYPE)
                tv["ts"] = vals[keep]
                tv["rel"] = off_max[entries][keep] - self.base_offset
                self.time_entries += tv.tobytes()
                self.time_entry_count += len(tv)
                self.time_last_timestamp = int(vals[keep][-1])
                self.time_last_offset = int(off_max[entries][keep][-1])
        self.max_timestamp = int(cm[-1])
        self.offset_of_max_timestamp = int(off_max[-1])

    def _entry_points(self, pos: np.ndarray) -> np.ndarray:
        interval = self.interval_bytes
        first = int(np.searchsorted(pos, self.last_entry_position + interval, side="right"))
        n = len(pos)
        if first >= n:
            return np.empty(0, dtype=np.int64)
        gaps = np.diff(pos[first:])
        if not len(gaps) or gaps.min() > interval:
            # every batch is bigger than the interval: each one from here gets an entry
            return np.arange(first, n)
        # the entry after batch i is the first batch more than interval bytes past it:
        # one vectorised search for every i, then a walk along those links
        nxt = np.searchsorted(pos, pos + interval, side="right").tolist()
        out = [first]
        i = nxt[first]
        while i < n:
            out.append(i)
            i = nxt[i]
        return np.asarray(out, dtype=np.int64)

    def _offer_time_entry(self) -> None:
        if self.max_timestamp > self.time_last_timestamp:
            self.time_entries += TIME_INDEX_ENTRY.pack(
                self.max_timestamp, self.offset_of_max_timestamp - self.base_offset)
            self.time_entry_count += 1
            self.time_last_timestamp = self.max_timestamp
            self.time_last_offset = self.offset_of_max_timestamp

    def close_entry(self) -> bytes:
        """The close entry a broker appends when the segment is closed or rolled (b""
        when the time index already ends with the max timestamp). Not recorded in the
        builder's state: the next append session drops it again."""
        if self.max_timestamp > self.time_last_timestamp:
            return TIME_INDEX_ENTRY.pack(self.max_timestamp,
                                         self.offset_of_max_timestamp - self.base_offset)
        return b""


def build_indexes(base_offset: int, interval_bytes: int, positions, last_offsets,
                  max_timestamps) -> tuple[bytes, bytes]:
    """The complete ``(.index, .timeindex)`` contents ``LogSegment.recover`` writes for a
    segment holding exactly these batches (in order)."""
    b = IndexBuilder.for_new_segment(base_offset, interval_bytes)
    b.add_batches(positions, last_offsets, max_timestamps)
    return bytes(b.offset_entries), bytes(b.time_entries) + b.close_entry()
