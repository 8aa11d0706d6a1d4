"""The offsets and bounds of one partition, as a consumer would see them (a value)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PartitionState"]


@dataclass(frozen=True)
class PartitionState:
    """Offsets of one partition. Picklable.

    ``first_timestamp``: the timestamp of the first record at or above the log start
    offset, as a consumer sees it (LogAppendTime, or base timestamp + delta: never a
    delete horizon); ``max_timestamp``: the largest record timestamp of the
    partition, from the rolled segments' time indexes (a broker writes the segment's max
    timestamp there on roll; segments without one are scanned) and the active segment's
    index plus a scan of its tail. Both in ms, None when unknown or absent (magic 0).
    ``last_stable_offset_known`` is False under read_uncommitted, where computing it is
    skipped and it equals the high watermark.
    """
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
    segments: int = 0
    last_stable_offset_known: bool = False
