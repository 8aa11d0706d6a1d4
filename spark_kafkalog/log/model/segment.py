"""A partition replica directory and its segments, as plain picklable values (no I/O)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Segment", "PartitionDir"]


@dataclass(frozen=True)
class Segment:
    """One segment of a partition. Paths are inside the LogDirs' filesystem."""
    base_offset: int
    path: str                       # the .log (or .log.swap) file
    size: int                       # bytes of the .log file
    index_path: str | None          # .index if present
    timeindex_path: str | None
    txnindex_path: str | None
    swap: bool = False              # a .swap file completing an interrupted compaction
    #: (st_dev, st_ino) of the .log when listed on a local filesystem: which file this
    #: is, whatever it is renamed to (a compaction renames, never rewrites in place)
    file_id: tuple | None = None


@dataclass(frozen=True)
class PartitionDir:
    """One partition replica directory and its segments (sorted by base offset)."""
    topic: str
    partition: int
    root: str
    path: str
    segments: tuple[Segment, ...]
    #: producer-state snapshots ``(offset, path)`` sorted by offset
    snapshots: tuple[tuple[int, str], ...] = ()
    #: one past the last segment's last offset when known without reading it (a remote
    #: segment's metadata says it): the bound its batches must stay below; None: unknown
    end_offset: int | None = None

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def segment_index_for(self, offset: int) -> int:
        """Index into ``segments`` of the segment that would hold ``offset`` (the last one
        whose base offset is <= offset; 0 when offset is below every segment)."""
        lo, hi = 0, len(self.segments)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.segments[mid].base_offset <= offset:
                lo = mid + 1
            else:
                hi = mid
        return max(lo - 1, 0)

    def next_base_offset(self, i: int) -> int | None:
        """The base offset of segment ``i + 1`` (the last one: :attr:`end_offset`)."""
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) \
            else self.end_offset
