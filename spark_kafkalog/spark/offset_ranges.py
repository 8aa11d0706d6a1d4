"""Offset resolution: the ``startingOffsets`` / ``endingOffsets`` options (and their
timestamp forms) -> each topic-partition's :class:`PartitionRange`, as Spark's Kafka source
resolves them against a broker: -2 is the log start offset, -1 the upper bound a consumer
may read to (high watermark, or last stable offset under ``read_committed``); a timestamp
is the earliest offset whose record timestamp is at or after it. Starting below the log
start is data loss (``failOnDataLoss``). Used by batch planning (:mod:`.planning`) and by
the stream reader for its first offsets.
"""
from __future__ import annotations

from dataclasses import dataclass

from spark_kafkalog.errors import DataLossError, InvalidOptionError, OffsetOutOfRangeError
from spark_kafkalog.log.io import map_io
from spark_kafkalog.spark.options import (
    EARLIEST,
    LATEST,
    Earliest,
    GlobalTimestamp,
    Latest,
    OffsetSpec,
    ReadOptions,
    SpecificOffsets,
    SpecificTimestamps,
)


@dataclass(frozen=True)
class PartitionRange:
    """A topic-partition's resolved offsets, before slicing."""
    topic: str
    partition: int
    partition_dir: object
    start_offset: int
    end_offset: int
    size_bytes: int           # bytes of the partition's segments (for estimates)
    log_start_offset: int
    log_end_offset: int


def check_names_all(option: str, spec_tps: set, parts: list) -> None:
    """Spark: "If startingOffsets contains specific offsets, you must specify all
    TopicPartitions" (likewise for ...ByTimestamp)."""
    assigned = {(p.topic, p.partition) for p in parts}
    if spec_tps != assigned:
        def fmt(s):
            return "[" + ", ".join(f"{t}-{p}" for t, p in sorted(s)) + "]"
        raise InvalidOptionError(
            f"{option}: specific offsets must name every assigned topic-partition (use -2 "
            f"for earliest, -1 for latest). Specified: {fmt(spec_tps)}; assigned: "
            f"{fmt(assigned)}")


def resolve_offset(spec: OffsetSpec, *, option: str, p, state, logdirs, starting: bool,
                   on_corruption: str = "fail") -> int:
    """One partition's offset for one side of the range. Returns an absolute offset, not
    yet checked against the log bounds."""
    tp = (p.topic, p.partition)
    if isinstance(spec, Earliest):
        return state.log_start_offset
    if isinstance(spec, Latest):
        return state.upper_bound
    if isinstance(spec, SpecificOffsets):
        off = spec.as_dict()[tp]
        if off == EARLIEST:
            return state.log_start_offset
        if off == LATEST:
            return state.upper_bound
        return off
    if isinstance(spec, (SpecificTimestamps, GlobalTimestamp)):
        ts = spec.timestamp if isinstance(spec, GlobalTimestamp) else spec.as_dict()[tp]
        if ts == EARLIEST:
            return state.log_start_offset
        if ts == LATEST:
            return state.upper_bound
        # A broker answers ListOffsets(timestamp) only below what the consumer may read.
        found = logdirs.offset_for_timestamp(p, ts, upper_bound=state.upper_bound,
                                             on_corruption=on_corruption)
        if found is not None and found >= state.upper_bound:
            found = None
        if found is not None:
            return max(found, state.log_start_offset)
        if not starting or spec.strategy == "latest":
            return state.upper_bound
        raise OffsetOutOfRangeError(
            f"{option}: no offset matched from request of topic-partition {p.topic}-"
            f"{p.partition} and timestamp {ts} (no record at or after it below offset "
            f"{state.upper_bound}); set startingOffsetsByTimestampStrategy=latest to start "
            f"at the latest offset instead")
    raise TypeError(f"unknown offset spec {spec!r}")   # parse_read_options makes only the above


def resolve_ranges(logdirs, opts: ReadOptions, parts: list, *,
                   all_parts: list | None = None, tiers: dict | None = None
                   ) -> list[PartitionRange]:
    """Offsets for each of ``parts`` (already pruned). ``all_parts`` is the unpruned
    selection that specific offsets must name in full; ``tiers`` ((topic, partition) ->
    TierPlan) moves a partition's log start down to its remote tier's."""
    all_parts = parts if all_parts is None else all_parts
    starting, ending = opts.starting, opts.ending
    start_name = option_name(starting, True)
    end_name = option_name(ending, False)
    if isinstance(starting, SpecificOffsets):
        check_names_all(start_name, set(starting.as_dict()), all_parts)
    if isinstance(starting, SpecificTimestamps):
        check_names_all(start_name, set(starting.as_dict()), all_parts)
    if isinstance(ending, SpecificOffsets):
        check_names_all(end_name, set(ending.as_dict()), all_parts)
    if isinstance(ending, SpecificTimestamps):
        check_names_all(end_name, set(ending.as_dict()), all_parts)

    def one(p_state) -> PartitionRange:
        p, state = p_state
        tier = (tiers or {}).get((p.topic, p.partition))
        if tier is not None:
            from spark_kafkalog.log.read.tiered import over_tiers
            state = over_tiers(state, tier)
        start = resolve_offset(starting, option=start_name, p=p, state=state, logdirs=logdirs,
                               starting=True, on_corruption=opts.on_corruption)
        end = resolve_offset(ending, option=end_name, p=p, state=state, logdirs=logdirs,
                             starting=False, on_corruption=opts.on_corruption)
        check_losses(p, state, starting, ending, opts.fail_on_data_loss)
        start, end = check_bounds(p, state, start, end, opts.fail_on_data_loss,
                                   start_name, end_name)
        return PartitionRange(p.topic, p.partition, p, start, end, state.size_bytes,
                              state.log_start_offset, state.log_end_offset)

    # a timestamp's seek reads index files and batches: concurrent on remote filesystems
    return map_io(logdirs.filesystem, one, _snapshot_states(logdirs, opts, parts))


def _snapshot_states(logdirs, opts: ReadOptions, parts: list):
    """``(partition dir, state)`` of each of ``parts``, every topic at one snapshot (its
    journal read once, see :mod:`spark_kafkalog.log.read.snapshot`), as of a commit when the
    options ask; the dirs are the ones listed with the snapshot."""
    by_topic: dict = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(p.partition)
    got = {}
    for topic, numbers in by_topic.items():
        _, dirs, states = logdirs.topic_states(
            topic, numbers, as_of_commit=opts.as_of_commit,
            as_of_timestamp=opts.as_of_timestamp, isolation_level=opts.isolation_level,
            read_past_high_watermark=opts.read_past_high_watermark,
            on_corruption=opts.on_corruption, timestamps=False)
        got.update({(d.topic, d.partition): (d, states[d.partition]) for d in dirs})
    return [got[(p.topic, p.partition)] for p in parts]


def option_name(spec, starting: bool) -> str:
    side = "starting" if starting else "ending"
    if isinstance(spec, GlobalTimestamp):
        return f"{side}Timestamp"
    if isinstance(spec, SpecificTimestamps):
        return f"{side}OffsetsByTimestamp"
    return f"{side}Offsets"


#: what a read's DataLossError says to do instead
LOSS_HINT = ("set the source option failOnDataLoss to false to read what is there (one "
             "warning per partition is logged)")


def asked_offset(spec: OffsetSpec, tp: tuple) -> int | None:
    """The offset a spec names for ``tp``, None for earliest, latest or a timestamp (the
    whole log is then wanted: a loss anywhere matters)."""
    if isinstance(spec, SpecificOffsets):
        off = spec.as_dict()[tp]
        return off if off >= 0 else None
    return None


def check_losses(p, state, starting: OffsetSpec | None, ending: OffsetSpec | None,
                 fail_on_data_loss: bool, *, reported: set | None = None) -> None:
    """Records the partition's own files promise and its segments do not hold
    (``state.losses``, :mod:`spark_kafkalog.log.read.loss`) that the range asked for
    overlaps: :class:`DataLossError` with ``failOnDataLoss``, else one warning per
    partition (logged by the driver). ``reported``: see ``report_losses``."""
    from spark_kafkalog.log.read.loss import report_losses

    losses = getattr(state, "losses", ())
    if not losses:
        return
    tp = (p.topic, p.partition)
    lo = asked_offset(starting, tp) if starting is not None else None
    hi = asked_offset(ending, tp) if ending is not None else None
    report_losses([x for x in losses if x.overlaps(lo, hi)],
                  fail=fail_on_data_loss, hint=LOSS_HINT, reported=reported)


def check_bounds(p, state, start: int, end: int, fail_on_data_loss: bool,
                  start_name: str, end_name: str) -> tuple[int, int]:
    """Apply the log's bounds. Below the log start is data loss; past the upper bound is
    out of range; both are errors with ``failOnDataLoss`` (Spark's consumer reports them as
    data loss), otherwise the range is clamped (possibly to empty)."""
    lo, hi = state.log_start_offset, state.upper_bound
    tp = f"{p.topic}-{p.partition}"
    # Five clamps, not one loop: each has its own error (data loss below the log start,
    # out of range past the upper bound) and says what failOnDataLoss=false does there.
    if start < lo:
        if fail_on_data_loss:
            raise DataLossError(
                f"{start_name}: offset {start} of {tp} is below the log start offset {lo}: "
                f"those records are gone (deleted by retention, or the log was truncated). "
                f"Set failOnDataLoss=false to start at the log start instead",
                path=p.path, offset=start)
        start = lo
    if end < lo:
        if fail_on_data_loss:
            raise DataLossError(
                f"{end_name}: offset {end} of {tp} is below the log start offset {lo}: "
                f"the records before it are gone. Set failOnDataLoss=false to read "
                f"nothing from this partition instead", path=p.path, offset=end)
        end = lo
    if start > hi:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{start_name}: offset {start} of {tp} is past the last readable offset "
                f"(upper bound {hi}). Set failOnDataLoss=false to read nothing from this "
                f"partition instead", path=p.path, offset=start)
        start = hi
    if end > hi:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{end_name}: offset {end} of {tp} is past the last readable offset "
                f"(upper bound {hi}; the log end is {state.log_end_offset}). Set "
                f"failOnDataLoss=false to read up to the upper bound instead",
                path=p.path, offset=end)
        end = hi
    if start > end:
        if fail_on_data_loss:
            raise OffsetOutOfRangeError(
                f"{start_name}: the starting offset {start} of {tp} is after the ending "
                f"offset {end}", path=p.path, offset=start)
        start = end
    return start, end
