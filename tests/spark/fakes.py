"""A metadata-only stand-in for ``LogDirs`` to test planning arithmetic without files.

Each fake partition is a list of segments ``(base_offset, next_offset, size_bytes)`` with
records spread evenly over a segment's bytes, a log start offset, an upper bound and, for
timestamp seeks, timestamp = ``ts0 + offset * ts_step`` ms.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow.fs as pafs

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.model import PartitionDir, Segment


@dataclass(frozen=True)
class FakeState:
    topic: str
    partition: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    last_stable_offset: int
    upper_bound: int
    first_timestamp: int | None
    max_timestamp: int | None
    size_bytes: int


class FakeLogDirs:
    def __init__(self, layout: dict[tuple[str, int], list[tuple[int, int, int]]], *,
                 log_start: dict | None = None, upper: dict | None = None,
                 lso: dict | None = None, ts0: int = 1_000_000, ts_step: int = 10):
        self.layout = layout
        self.log_start = log_start or {}
        self.upper = upper or {}
        self.lso = lso or {}
        self.ts0, self.ts_step = ts0, ts_step
        self.seeks: list[tuple[str, int, int]] = []
        self.roots = ("/fake",)
        self.filesystem = pafs.LocalFileSystem()    # local: planning stays sequential

    def topics(self):
        return sorted({t for t, _ in self.layout if t != "__cluster_metadata"})

    def _pdir(self, topic, partition):
        segs = tuple(Segment(b, f"/fake/{topic}-{partition}/{b:020d}.log", size,
                             f"/fake/{topic}-{partition}/{b:020d}.index", None, None)
                     for b, _, size in self.layout[(topic, partition)])
        return PartitionDir(topic, partition, "/fake", f"/fake/{topic}-{partition}", segs)

    def partitions(self, topic):
        parts = sorted(p for t, p in self.layout if t == topic)
        if not parts:
            raise LogLayoutError(f"topic {topic!r} not found")
        return [self._pdir(topic, p) for p in parts]

    def partition_roots(self, topic):
        return {p.partition: p.root for p in self.partitions(topic)}

    def partition(self, topic, partition):
        if (topic, partition) not in self.layout:
            raise LogLayoutError(f"partition {topic}-{partition} not found")
        return self._pdir(topic, partition)

    def _end(self, key):
        return self.layout[key][-1][1] if self.layout[key] else 0

    def state(self, p, *, isolation_level="read_uncommitted", read_past_high_watermark=False,
              on_corruption="fail", timestamps=True):
        key = (p.topic, p.partition)
        segs = self.layout[key]
        start = self.log_start.get(key, segs[0][0] if segs else 0)
        end = self._end(key)
        hw = self.upper.get(key, end)
        lso = self.lso.get(key, hw)
        upper = end if read_past_high_watermark else (
            lso if isolation_level == "read_committed" else hw)
        return FakeState(p.topic, p.partition, start, hw, end, lso, upper, None, None,
                         sum(s[2] for s in segs))

    def topic_states(self, topic, partitions=None, *, as_of_commit=None,
                     as_of_timestamp=None, **kwargs):
        if as_of_commit is not None or as_of_timestamp is not None:
            raise LogLayoutError("the fake log has no commits")
        parts = [p for p in self.partitions(topic)
                 if partitions is None or p.partition in set(partitions)]
        return None, parts, {p.partition: self.state(p, **kwargs) for p in parts}

    def offset_for_timestamp(self, p, timestamp_ms, *, upper_bound=None, on_corruption="fail"):
        key = (p.topic, p.partition)
        self.seeks.append((p.topic, p.partition, timestamp_ms))
        start = self.log_start.get(key, self.layout[key][0][0])
        end = self._end(key)
        off = max(start, -(-(timestamp_ms - self.ts0) // self.ts_step))
        if upper_bound is not None:
            end = min(end, upper_bound)
        return off if off < end else None


def fake_split_points(logdirs, p, start, end, target_bytes):
    """Consecutive ranges of about ``target_bytes``: small segments share a range, a big
    one is cut inside (what the log layer's split_points promises)."""
    segs = logdirs.layout[(p.topic, p.partition)]
    points = []
    acc = None
    for base, nxt, size in segs:
        lo, hi = max(base, start), min(nxt, end)
        if lo >= hi:
            continue
        per = size / max(1, nxt - base)
        off = lo
        while off < hi:
            if acc is None or acc >= target_bytes:
                points.append((off, base, int((off - base) * per)))
                acc = 0
            take = min(hi - off, max(1, int((target_bytes - acc) / per)))
            acc += take * per
            off += take
    return points
