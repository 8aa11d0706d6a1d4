"""Writing ``.index`` / ``.timeindex`` files exactly as a Kafka broker does.

On-disk layouts (big-endian, what ``OffsetIndex`` / ``TimeIndex`` map)::

    OffsetIndexEntry => relativeOffset int32 (offset - segment base), position int32
    TimeIndexEntry   => timestamp int64, relativeOffset int32

The rules, from Kafka's ``LogSegment.recover`` (which rebuilds a segment's indexes and is
what ``LogSegment.append`` + ``onBecomeInactiveSegment``/``close`` produce for a segment
written one batch per append):

* the running "max timestamp so far" and the offset it belongs to are updated with every
  batch whose ``maxTimestamp`` is *strictly* greater (the offset recorded is the batch's
  **last** offset — the "shallow" offset of the max timestamp);
* a batch starting at byte ``position`` gets an index entry when
  ``position - position_of_last_entry > index.interval.bytes`` (the last entry position
  starts at 0, so the first batch of a segment never gets one): the offset index gets
  ``(batch last offset, position)`` and the time index is offered
  ``(max timestamp so far, its offset)``;
* the time index only takes an entry whose timestamp is strictly greater than its last
  entry's (an empty index compares against ``NO_TIMESTAMP`` = -1, so timestamps of -1
  never make an entry);
* when a segment is closed or rolled, the time index is offered ``(max timestamp so far,
  its offset)`` once more (the "close entry"), and both files are trimmed to their
  entries (no preallocated zero tail).

Continuing a segment written earlier: the state above is recovered from the tails of the
two files alone. The last offset-index entry gives the last entry position. The last
time-index entry is always ``(max timestamp so far, its offset)`` of the whole segment;
it is a close entry (to be dropped before appending, and re-offered at the end) exactly
when its offset is past the last offset-index entry's offset (an index-point entry can
only name an offset at or before the batch it was taken at), or when the offset index is
empty. With that, appending in several commits gives byte-for-byte the files one
``LogSegment.recover`` over the whole segment would write.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.format.wire import NO_TIMESTAMP

#: relative offset int32, physical position int32
OFFSET_INDEX_ENTRY = struct.Struct(">ii")
#: timestamp int64, relative offset int32
TIME_INDEX_ENTRY = struct.Struct(">qi")
OFFSET_ENTRY_SIZE = OFFSET_INDEX_ENTRY.size      # 8
TIME_ENTRY_SIZE = TIME_INDEX_ENTRY.size          # 12

#: Kafka's default ``segment.index.bytes`` (10 MiB): an index holds at most this many
#: bytes of entries; the broker rolls the segment when either index is full.
DEFAULT_MAX_INDEX_BYTES = 10 * 1024 * 1024
INT32_MAX = 2**31 - 1


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
                raise ValueError("offset_index_tail must be the last 8-byte entry")
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
                raise ValueError("time_index_tail must hold the last min(2, entries) entries")
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
    def can_take(self, last_offset: int) -> bool:
        """Whether a batch ending at ``last_offset`` may go into this segment without
        overflowing a relative offset or either index (Kafka rolls otherwise)."""
        if last_offset - self.base_offset > INT32_MAX:
            return False
        # LogSegment.shouldRoll: roll once either index is full (its entry count reached
        # segment.index.bytes / entry size); the close entry may exceed it by one.
        if self.offset_entry_count >= self.max_index_bytes // OFFSET_ENTRY_SIZE:
            return False
        if self.time_entry_count >= self.max_index_bytes // TIME_ENTRY_SIZE:
            return False
        return True

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
        increasing), vectorized: the same entries, without a Python step per batch."""
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
            out = np.empty(len(entries), dtype=[("rel", ">i4"), ("pos", ">i4")])
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
                tv = np.empty(int(keep.sum()), dtype=[("ts", ">i8"), ("rel", ">i4")])
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
