"""The offsets and bounds of one partition, as a consumer would see them (a value)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DataLoss", "PartitionState"]


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
    #: what the partition's checkpoint files and journal promise beyond its segments
    #: (:class:`DataLoss`, see :mod:`spark_kafkalog.log.read.loss`); a read decides
    #: whether that fails it (``failOnDataLoss``)
    losses: tuple = ()


@dataclass(frozen=True)
class DataLoss:
    """Offsets ``[start, end)`` of one partition that the log's own files promise and
    its segments do not hold. Picklable.

    ``kind``: ``high_watermark`` / ``recovery_point`` (a root checkpoint past the log
    end), ``log_start`` (the log-start-offset checkpoint past the log end),
    ``log_start_below`` (it is below the first segment: the segments before are gone),
    ``journal`` (our writer's journal committed offsets the segments end before),
    ``gap`` (offsets jump between two segments and no compaction explains it);
    for a remote tier (tiered storage) ``remote_gap`` (offsets neither tier holds) and
    ``remote_missing`` (a segment ``__remote_log_metadata`` lists is not in the store);
    ``retention`` (records a read planned that retention deleted, files and all, before
    its task read them: :mod:`spark_kafkalog.log.read.purged`).
    ``path``: the file that promised them; ``found``: where the log's records stop
    (the log end, or the last offset before a gap, plus one); ``message``: the whole
    story in one line (partition, offsets promised and found, file)."""
    topic: str
    partition: int
    kind: str
    start: int
    end: int
    found: int
    path: str
    message: str

    def overlaps(self, start: int | None, end: int | None) -> bool:
        """Whether a read of ``[start, end)`` (None: unbounded) wanted any of it."""
        return (start is None or self.end > start) and (end is None or self.start < end)
