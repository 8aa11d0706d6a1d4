"""Admission control of the stream reader: how far one micro-batch may go.

Pure arithmetic on ``{(topic, partition): offset}`` maps (no I/O), with the semantics of
Spark's Kafka source (``KafkaMicroBatchStream``):

- :func:`rate_limit` (``maxOffsetsPerTrigger``): the limit is shared over the partitions
  with data in proportion to their backlog; a share below one offset is rounded up (a
  small partition is never starved), any other share rounded down; no partition goes
  past its upper bound. So a batch may hold a little more than the limit (one offset per
  partition with a tiny backlog), as with Kafka.
- :class:`TriggerDelay` (``minOffsetsPerTrigger`` + ``maxTriggerDelay``): a trigger is
  skipped while fewer new offsets than the minimum are there, until the delay since the
  last batch that ran has passed.
- :func:`byte_shares` (``maxBytesPerTrigger``): a byte budget split over partitions the
  same way; the stream reader cuts each partition's range at the batch boundary its
  offset index gives for that many bytes.
"""
from __future__ import annotations

import math
import time
from typing import Callable, Mapping

TP = tuple  # (topic, partition)


def rate_limit(limit: int, start: Mapping[TP, int], until: Mapping[TP, int]
               ) -> dict[TP, int]:
    """The end offsets of a batch limited to about ``limit`` offsets. ``start``: where
    each partition's batch begins (the caller puts a new partition's log start there);
    ``until``: the upper bounds. A partition absent from ``start`` is left at ``until``."""
    sizes = {tp: end - start[tp] for tp, end in until.items()
             if tp in start and end - start[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(until)
    out = {}
    for tp, end in until.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start[tp] + int(step))
    return out


class TriggerDelay:
    """Kafka's ``delayBatch``: whether to skip this trigger. The clock starts at 0, so
    the first trigger of a reader never waits (as Kafka's ``lastTriggerMillis = 0``)."""

    def __init__(self, min_offsets: int, max_delay_ms: int,
                 clock: Callable[[], float] = time.time):
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self.clock = clock
        self.last_trigger_ms = 0

    def skip(self, latest: Mapping[TP, int], start: Mapping[TP, int]) -> bool:
        now = int(self.clock() * 1000)
        if now - self.last_trigger_ms >= self.max_delay_ms:
            self.last_trigger_ms = now
            return False
        new = sum(off - start.get(tp, 0) for tp, off in latest.items())
        if new < self.min_offsets:
            return True
        self.last_trigger_ms = now
        return False


def byte_shares(limit_bytes: int, backlog_bytes: Mapping[TP, int]) -> dict[TP, int]:
    """``limit_bytes`` split over the partitions with a byte backlog, in proportion to
    it (at least one byte each: a partition with data always makes progress)."""
    total = float(sum(b for b in backlog_bytes.values() if b > 0))
    if total < 1:
        return {}
    return {tp: max(1, math.floor(limit_bytes * (b / total)))
            for tp, b in backlog_bytes.items() if b > 0}
