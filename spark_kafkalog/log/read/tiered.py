"""One partition over both tiers, as the broker serves it: remote segments below the local
log start offset, the local log from there (a segment both tiers hold is read locally).

:func:`plan_partition` takes the readable remote segments (:mod:`.remote`) and the local
partition's state: where the log starts (the first remote segment, or the checkpointed
log start offset when retention moved it past that), where the local tier starts, and the
first gap (offsets neither tier holds between the log start and the local log). Reading a
gap, or a remote segment the metadata lists but the store lacks, is data loss
(DataLossError; with ``fail_on_data_loss=False`` skipped, with one warning per partition
naming the offsets and the missing segments, and the losses in ``stats.losses``). Under
read_committed the aborted transactions of the remote range come from the remote and the
local transaction indexes together (a transaction may begin remote and end local).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import DataLossError, KafkaLogError
from spark_kafkalog.format.remote_log_metadata import TOPIC as REMOTE_LOG_METADATA
from spark_kafkalog.log.files.txn import AbortedTxns, read_txn_index
from spark_kafkalog.log.model import DataLoss, PartitionDir
from spark_kafkalog.log.model.remote import RemoteSegment
from spark_kafkalog.log.read.loss import report_losses, uncovered
from spark_kafkalog.log.read.remote import RemoteStorage, remote_partition_dir

__all__ = ["TierPlan", "plan_partition", "read_tiered"]


@dataclass(frozen=True)
class TierPlan:
    """Both tiers of one partition. Picklable."""
    topic: str
    partition: int
    remote: tuple[RemoteSegment, ...]
    log_start: int                       # the partition's log start over both tiers
    local_start: int                     # the local tier's log start offset
    gap: tuple[int, int] | None          # [first, end) offsets no tier holds, or None

    @property
    def remote_end(self) -> int:
        """One past the last offset the remote tier holds (log_start when it holds none)."""
        return max((s.end_offset + 1 for s in self.remote), default=self.log_start)


def over_tiers(state, tier: TierPlan | None):
    """A partition's state (``PartitionState``) as both tiers hold it: the log start is
    the plan's (which weighed the checkpointed log start with the remote segments), and
    below the local log the plan, not the local files, says what is there: a broker with
    tiered storage checkpoints the log start over both tiers, so a log start below the
    local log is no loss here (a gap in the remote tier :func:`read_tiered` reports)."""
    if tier is None:
        return state
    return replace(state, log_start_offset=tier.log_start,
                   losses=uncovered([x for x in state.losses if x.kind != "log_start_below"],
                                    [(tier.log_start, tier.local_start)]))


def plan_partition(topic: str, partition: int, remote: list[RemoteSegment],
                   local_start: int, checkpointed_start: int | None) -> TierPlan:
    """The tiers of ``topic``-``partition``: ``local_start`` is the local log start offset,
    ``checkpointed_start`` the log-start-offset checkpoint's entry (the whole log's)."""
    segs = tuple(s for s in remote if s.start_offset < local_start)
    if not segs:
        return TierPlan(topic, partition, (), local_start, local_start, None)
    start = max(segs[0].start_offset, checkpointed_start or 0)
    segs = tuple(s for s in segs if s.end_offset >= start)
    if not segs or start >= local_start:
        return TierPlan(topic, partition, (), local_start, local_start, None)
    gap = None
    expected = start
    for s in segs:
        if s.start_offset > expected:
            gap = (expected, s.start_offset)
            break
        expected = max(expected, s.end_offset + 1)
    if gap is None and expected < local_start:
        gap = (expected, local_start)
    return TierPlan(topic, partition, segs, start, local_start, gap)


def _aborted(storage: RemoteStorage, logdirs, local: PartitionDir, segs, start: int,
             stop: int, decision_limit: int) -> AbortedTxns:
    parts = []
    for s in segs:
        if s.txn_index_empty or s.end_offset < start:
            continue
        got = read_txn_index(storage.filesystem, storage.path(s, ".txnindex"),
                             segment_base_offset=s.start_offset,
                             next_base_offset=s.end_offset + 1)
        if got is not None:
            parts.append(got)
    for i, seg in enumerate(local.segments):
        if seg.txnindex_path is not None:
            got = read_txn_index(logdirs.filesystem, seg.txnindex_path,
                                 segment_base_offset=seg.base_offset,
                                 next_base_offset=local.next_base_offset(i))
            if got is not None:
                parts.append(got)
    every = AbortedTxns.concat(parts)
    keep = ((every.last_offset >= start) & (every.first_offset < stop)
            & (every.last_offset < decision_limit))
    return every.select(np.asarray(keep, dtype=bool))


def _lost(plan: TierPlan, first: int, end: int, kind: str, what: str, path: str | None,
          fail: bool, losses: list[DataLoss]) -> None:
    """Offsets ``[first, end)`` of the remote range are gone: raise (``fail``) or add the
    loss to ``losses`` (reported once, when the remote range has been read)."""
    message = (f"{plan.topic}-{plan.partition}: offsets {first}..{end - 1} were promised "
               f"(log start {plan.log_start}, local log start {plan.local_start}) but {what}")
    if fail:
        raise DataLossError(f"{message} (set failOnDataLoss=false to read past them)",
                            path=path, offset=first)
    # the promise is the metadata's (its segments, the log start over both tiers)
    losses.append(DataLoss(plan.topic, plan.partition, kind, first, end, first,
                           REMOTE_LOG_METADATA, message))


def read_tiered(read_partition, logdirs, storage: RemoteStorage, p: PartitionDir,
                plan: TierPlan, *,
                start_offset: int, end_offset: int, isolation_level: str = "read_uncommitted",
                decision_limit: int | None = None, fail_on_data_loss: bool = True,
                **kwargs) -> Iterator[pa.RecordBatch]:
    """Rows ``start_offset <= offset < end_offset`` of both tiers in offset order
    through ``read_partition`` (:func:`~.reader.read_partition`, which takes ``kwargs``:
    include_headers, on_corruption, window_bytes, stats, txn_index ...)."""
    stop = min(end_offset, plan.local_start)
    if start_offset < stop and plan.remote:
        losses: list[DataLoss] = []
        aborted = None
        if isolation_level == "read_committed":
            aborted = _aborted(storage, logdirs, p, plan.remote, start_offset, stop,
                               decision_limit if decision_limit is not None else 1 << 62)
        if plan.gap is not None and plan.gap[0] < stop and plan.gap[1] > start_offset:
            _lost(plan, max(plan.gap[0], start_offset), min(plan.gap[1], stop), "remote_gap",
                  "neither tier holds them", None, fail_on_data_loss, losses)
        done = start_offset
        for seg in plan.remote:
            lo, hi = max(done, seg.start_offset), min(stop, seg.end_offset + 1)
            if lo >= hi:
                continue
            rp = remote_partition_dir(storage, seg)
            try:
                yield from read_partition(storage, rp, start_offset=lo, end_offset=hi,
                                          isolation_level=isolation_level,
                                          decision_limit=decision_limit,
                                          aborted_txns=aborted, **kwargs)
            except (KafkaLogError, OSError) as err:
                path = rp.segments[0].path
                if storage.exists(path):
                    if not isinstance(err, DataLossError):
                        storage.check_plain(seg)
                    raise
                _lost(plan, lo, hi, "remote_missing", f"remote segment {seg.segment_id} is "
                      f"missing from the remote store (no object {path})", path,
                      fail_on_data_loss, losses)
            done = hi
        report_losses(losses, fail=False, stats=kwargs.get("stats"))
    lo = max(start_offset, plan.local_start)
    if lo < end_offset:
        yield from read_partition(logdirs, p, start_offset=lo, end_offset=end_offset,
                                  isolation_level=isolation_level,
                                  decision_limit=decision_limit,
                                  fail_on_data_loss=fail_on_data_loss, **kwargs)
