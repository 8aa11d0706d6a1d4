"""``spark.readStream.format("kafkalog")``: the stream reader, with the Kafka source's
semantics (offsets, starting position, admission control, data loss).

Offsets are Kafka's JSON, ``{"topic":{"0":23}}``, the next offset to read of each
partition, always built in one order (topics by name, partitions numerically): Spark
compares offsets as strings. ``latestOffset`` returns ``start`` itself when nothing is
to be read, so an idle query writes no offset-log entry. Planning reuses the batch
planner's slicing (:mod:`.planning`), reading the batch reader's code (:mod:`.reader`).

pyspark builds this reader twice (once in the streaming source runner, which calls
everything but ``read``, once to serve ``read`` on executors) and pickles it: the
constructor does no I/O and only the options cross (``__getstate__``).

pyspark hands a Python source no checkpoint path, so the initial offset is not
checkpointed: a query that dies before its first batch commits resolves its start again
when restarted (with ``startingOffsets=latest``, later than before). Once batch 0 is in
Spark's offset log a restart resumes from the log. A range whose end is below its
start (that re-resolution) is read as empty.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from typing import Iterator, Mapping

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spark_kafkalog.errors import (
    DataLossError,
    InvalidOptionError,
    KafkaLogError,
    LogLayoutError,
)
from spark_kafkalog.spark.admission import TriggerDelay, byte_shares, rate_limit
from spark_kafkalog.spark.option_values import duration_ms
from spark_kafkalog.spark.options import (
    ReadOptions,
    SpecificOffsets,
    SpecificTimestamps,
    parse_read_options,
)

log = logging.getLogger(__name__)

TP = tuple  # (topic, partition)

# Spark's Kafka source (KafkaSourceProvider), with "Kafka" as there: the wording users
# search for.
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data "
    "in the topic was processed. If you want your streaming query to fail on such cases, "
    "set the source option \"failOnDataLoss\" to \"true\".")
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either "
    "the data was aged out by Kafka or the topic may have been deleted before all the data "
    "in the topic was processed. If you don't want your streaming query to fail on such "
    "cases, set the source option \"failOnDataLoss\" to \"false\".")


def report_data_loss(fail: bool, message: str, *, path: str | None = None,
                     offset: int | None = None) -> None:
    """Kafka's ``reportDataLoss``: raise :class:`DataLossError` under
    ``failOnDataLoss=true``, else log a warning and let the caller continue."""
    if fail:
        raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}",
                            path=path, offset=offset)
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


# -- offsets -------------------------------------------------------------------------------

def to_offset(positions: Mapping[TP, int]) -> dict:
    """``{(topic, partition): offset}`` -> Kafka's offsets JSON object, canonically
    ordered (topics by name, partitions numerically)."""
    out: dict = {}
    for (topic, partition) in sorted(positions):
        out.setdefault(topic, {})[str(partition)] = int(positions[(topic, partition)])
    return out


def from_offset(offset) -> dict[TP, int]:
    """Kafka's offsets JSON (a dict, or its text) -> ``{(topic, partition): offset}``."""
    if isinstance(offset, str):
        offset = json.loads(offset)
    if not isinstance(offset, dict):
        raise InvalidOptionError(f"not a kafkalog stream offset: {offset!r}")
    out = {}
    for topic, parts in offset.items():
        if not isinstance(parts, dict):
            raise InvalidOptionError(f"not a kafkalog stream offset: {offset!r}")
        for p, o in parts.items():
            out[(topic, int(p))] = int(o)
    return out


def offsets_behind_latest(source_progress: Mapping) -> dict | None:
    """The Kafka source's lag metrics from one source of a query's progress
    (``query.lastProgress["sources"][i]``): ``{"minOffsetsBehindLatest",
    "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"}`` over the partitions of
    ``latestOffset`` (what ``reportLatestOffset`` gave), measured from ``endOffset``.
    None when either offset is missing."""
    latest, end = source_progress.get("latestOffset"), source_progress.get("endOffset")
    if not latest or not end:
        return None
    latest_m, end_m = from_offset(latest), from_offset(end)
    behind = [max(0, o - end_m.get(tp, o)) for tp, o in latest_m.items()]
    if not behind:
        return None
    return {"minOffsetsBehindLatest": min(behind), "maxOffsetsBehindLatest": max(behind),
            "avgOffsetsBehindLatest": sum(behind) / len(behind)}


# -- the reader ------------------------------------------------------------------------------

def make_stream_reader(options: Mapping[str, str], schema, spark_schema, typed=None
                       ) -> "KafkaLogStreamReader":
    """The reader for ``DataSource.streamReader``: the options checked by the streaming
    rules, ``schema`` against ``spark_schema(opts)`` (the source's); ``typed(opts)``: the
    planned typed read (valueFormat/keyFormat), or None."""
    opts = parse_read_options(options, streaming=True)
    expected = spark_schema(opts) if schema is not None else None
    if schema is not None and schema != expected:
        raise InvalidOptionError(
            f"schema: the kafkalog source has a fixed schema (Spark's Kafka source schema) "
            f"and cannot be read with a custom one; expected {expected.simpleString()}, "
            f"got {schema.simpleString()}")
    return KafkaLogStreamReader(opts, typed=typed(opts) if typed is not None else None)


class FailedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The reader of a stream whose options are wrong: every call raises the error
    ``make_stream_reader`` raised (``stop`` does nothing), so Spark's streaming runner
    reports it instead of hiding it behind its own UnboundLocalError."""

    def __init__(self, error: BaseException):
        self.error = error

    def _fail(self, *args, **kwargs):
        raise self.error

    initialOffset = latestOffset = partitions = read = commit = _fail
    prepareForTriggerAvailableNow = getDefaultReadLimit = reportLatestOffset = _fail

    def stop(self) -> None:
        pass


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader over live or copied log dirs.

    Contract: ``initialOffset`` is resolved once per reader and cached;
    ``latestOffset(start, limit)`` returns ``start`` itself (same positions, same
    string) when there is nothing to read or the trigger is delayed;
    ``prepareForTriggerAvailableNow`` fixes every partition's upper bound, never read
    past; ``partitions(start, end)`` reads ``[start, end)`` of each partition (a
    partition absent from ``start`` from its log start); ``read`` is stateless and
    raises :class:`DataLossError` (``failOnDataLoss=true``) when records it was planned
    to read are gone."""

    def __init__(self, opts: ReadOptions, clock=time.time, typed=None):
        self.opts = opts
        #: the planned typed read (spark_kafkalog.typed.columns.TypedRead) or None
        self.typed = typed
        self.clock = clock
        self._live = None
        self._initial: dict | None = None
        self._available_now: dict[TP, int] | None = None
        self._latest: dict[TP, int] | None = None
        #: losses already warned about (failOnDataLoss=false): once each, not every poll
        self._reported: set = set()
        #: the remote root was checked (the first poll with remoteStorage)
        self._root_checked = False
        self._delay = None
        if opts.min_offsets_per_trigger is not None:
            self._delay = TriggerDelay(opts.min_offsets_per_trigger,
                                       duration_ms("maxTriggerDelay", opts.max_trigger_delay),
                                       clock)

    def __getstate__(self):
        return {"opts": self.opts, "typed": self.typed}

    def __setstate__(self, state):
        self.__init__(state["opts"], typed=state.get("typed"))

    # -- polling ---------------------------------------------------------------------------

    def _poll(self):
        if self._live is None:
            from spark_kafkalog.spark.live_log import LiveLog
            self._live = LiveLog(self.opts, self.clock)
        parts = self._live.poll()
        if self.opts.remote_storage:
            parts = self._with_tiers(parts)
        self._latest = {tp: lp.upper for tp, lp in parts.items()}
        return parts

    def _with_tiers(self, parts):
        """``parts`` with each log start moved down to its remote tier's (the remote
        segments of this poll, from ``__remote_log_metadata``, kept for planning)."""
        from dataclasses import replace as _replace

        from spark_kafkalog.log.read.reader import load_remote_metadata
        from spark_kafkalog.log.read.remote import RemoteStorage, check_root, remote_segments
        from spark_kafkalog.log.read.tiered import over_tiers, plan_partition

        logdirs = self._live.logdirs
        state = load_remote_metadata(logdirs)
        by_topic = {t: remote_segments(state, t) for t, _ in parts}
        tiers = {}
        out = {}
        for tp, lp in parts.items():
            tier = plan_partition(tp[0], tp[1], by_topic[tp[0]].get(tp[1], []),
                                  lp.state.log_start_offset,
                                  logdirs.checkpointed_log_start_offset(lp.partition_dir))
            tiers[tp] = tier
            out[tp] = _replace(lp, state=over_tiers(lp.state, tier))
        if not self._root_checked:
            # the first poll only: a wrong root is a configuration error, not data loss
            storage = RemoteStorage(self.opts.remote_storage, self.opts.remote_layout,
                                    dict(self.opts.filesystem_options))
            check_root(storage, [s for tier in tiers.values() for s in tier.remote])
            self._root_checked = True
        self._tiers = tiers
        return out

    # -- protocol ----------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        if self._initial is None:
            self._initial = to_offset(self._resolve_start(self._poll()))
        return self._initial

    def _resolve_start(self, parts) -> dict[TP, int]:
        from spark_kafkalog.spark.offset_ranges import (
            check_bounds,
            check_losses,
            check_names_all,
            option_name,
            resolve_offset,
        )

        opts = self.opts
        spec = opts.starting
        name = option_name(spec, True)
        dirs = [lp.partition_dir for lp in parts.values()]
        if isinstance(spec, (SpecificOffsets, SpecificTimestamps)):
            check_names_all(name, set(spec.as_dict()), dirs)
        out = {}
        for tp, lp in parts.items():
            check_losses(lp.partition_dir, lp.state, spec, None, opts.fail_on_data_loss,
                         reported=self._reported)
            off = resolve_offset(spec, option=name, p=lp.partition_dir, state=lp.state,
                                 logdirs=self._live.logdirs, starting=True,
                                 on_corruption=opts.on_corruption)
            out[tp], _ = check_bounds(lp.partition_dir, lp.state, off, lp.upper,
                                      opts.fail_on_data_loss, name, name)
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.opts
        if o.max_offsets_per_trigger is not None:
            return ReadMaxRows(o.max_offsets_per_trigger)
        if o.min_offsets_per_trigger is not None:
            return ReadMinRows(o.min_offsets_per_trigger)
        if o.max_bytes_per_trigger is not None:
            return ReadMaxBytes(o.max_bytes_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = {tp: lp.upper for tp, lp in self._poll().items()}

    def reportLatestOffset(self):
        return None if self._latest is None else to_offset(self._latest)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        parts = self._poll()
        begin = from_offset(start)
        fail = self.opts.fail_on_data_loss
        gone = sorted(tp for tp in begin if tp not in parts)
        if gone:
            report_data_loss(fail, f"{', '.join(f'{t}-{p}' for t, p in gone)} are gone. "
                                   f"Some data may have been missed")
        until = {}
        for tp, lp in parts.items():
            upper = lp.upper
            if self._available_now is not None:
                if tp not in self._available_now:
                    continue            # joined after the snapshot: the next run reads it
                upper = min(upper, self._available_now[tp])
            b = begin.get(tp)
            if b is not None and lp.upper < b:
                report_data_loss(fail, f"Partition {tp[0]}-{tp[1]}'s offset was changed "
                                       f"from {b} to {lp.upper}, some data may have been "
                                       f"missed", path=lp.partition_dir.path, offset=b)
                until[tp] = lp.upper
                continue
            until[tp] = max(upper, b) if b is not None else upper
        for tp in begin:
            if tp not in until and tp in parts:
                until[tp] = begin[tp]
        self._check_losses(parts, begin)
        end = self._admit(limit, begin, until, parts)
        if end == begin:
            return start
        return to_offset(end)

    def _check_losses(self, parts, begin: dict) -> None:
        """Records a partition's own files promise and its segments do not hold, at or
        past where the query stands (a new partition: anywhere): data loss, raised or
        warned about once (:mod:`spark_kafkalog.log.read.loss`)."""
        from spark_kafkalog.log.read.loss import report_losses
        from spark_kafkalog.spark.offset_ranges import LOSS_HINT

        for tp, lp in parts.items():
            losses = lp.state.losses
            if losses:
                b = begin.get(tp)
                report_losses([x for x in losses if x.overlaps(b, None)],
                              fail=self.opts.fail_on_data_loss, hint=LOSS_HINT,
                              reported=self._reported)

    def _admit(self, limit, begin: dict, until: dict, parts) -> dict:
        if isinstance(limit, ReadAllAvailable):
            return until
        o = self.opts
        if self._delay is not None and self._available_now is None \
                and self._delay.skip(until, begin):
            return dict(begin)
        # a new partition begins at its log start
        first = {tp: begin.get(tp, parts[tp].log_start) for tp in until}
        end = until
        if o.max_offsets_per_trigger is not None:
            end = rate_limit(o.max_offsets_per_trigger, first, end)
        if o.max_bytes_per_trigger is not None:
            end = self._limit_bytes(o.max_bytes_per_trigger, first, end, parts)
        return end

    def _limit_bytes(self, limit: int, first: dict, end: dict, parts) -> dict:
        from spark_kafkalog.log import split_points

        backlog = {}
        for tp, e in end.items():
            lp = parts[tp]
            span = max(1, lp.state.log_end_offset - lp.log_start)
            per_offset = lp.state.size_bytes / span
            if e > first[tp]:
                backlog[tp] = int((e - first[tp]) * per_offset) + 1
        out = dict(end)
        logdirs = self._live.logdirs
        for tp, share in byte_shares(limit, backlog).items():
            points = split_points(logdirs, parts[tp].partition_dir, first[tp], end[tp],
                                  share)
            if len(points) > 1:
                out[tp] = points[1][0]
        return out

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        from spark_kafkalog.log import split_points
        from spark_kafkalog.spark.offset_ranges import PartitionRange
        from spark_kafkalog.spark.planning import (
            limit_records,
            slice_range,
            split_for_limits,
        )
        from spark_kafkalog.spark.worker import freeze_heap

        freeze_heap()
        begin, stop = from_offset(start), from_offset(end)
        if all(tp in begin and stop[tp] <= begin[tp] for tp in stop):
            return []
        opts = self.opts
        fail = opts.fail_on_data_loss
        parts = self._poll()
        ranges = []
        for tp in sorted(stop):
            e = stop[tp]
            lp = parts.get(tp)
            if lp is None:
                if e > begin.get(tp, e):
                    report_data_loss(fail, f"{tp[0]}-{tp[1]} is gone. Some data may have "
                                           f"been missed")
                continue
            s = begin.get(tp)
            if s is None:
                s = lp.log_start
                if s != 0:
                    report_data_loss(fail, f"Added partition {tp[0]}-{tp[1]} starts from "
                                           f"{s} instead of 0. Some data may have been "
                                           f"missed", path=lp.partition_dir.path, offset=s)
            if e <= s:
                continue                  # nothing, or end < start: an empty range
            if s < lp.log_start:
                report_data_loss(fail, f"Cannot fetch offset {s} of {tp[0]}-{tp[1]}: the "
                                       f"log starts at {lp.log_start} now",
                                 path=lp.partition_dir.path, offset=s)
                s = lp.log_start
            if e > lp.upper:
                report_data_loss(fail, f"Partition {tp[0]}-{tp[1]}'s offset was changed "
                                       f"from {e} to {lp.upper}, some data may have been "
                                       f"missed", path=lp.partition_dir.path, offset=e)
                e = lp.upper
            if s >= e:
                continue
            st = lp.state
            ranges.append(PartitionRange(tp[0], tp[1], lp.partition_dir, s, e,
                                         st.size_bytes, st.log_start_offset,
                                         st.log_end_offset))
        logdirs = self._live.logdirs
        keep_later = opts.isolation_level == "read_committed"
        remote = []
        if opts.remote_storage:
            from spark_kafkalog.spark.planning import split_tiers
            ranges, remote = split_tiers(ranges, getattr(self, "_tiers", {}),
                                         opts.max_partition_bytes)
        slices = remote + [x for r in ranges
                  for x in slice_range(logdirs, r, opts.max_partition_bytes, split_points,
                                       keep_later=keep_later)]
        slices = limit_records(logdirs, slices, opts, keep_later=keep_later)
        slices = split_for_limits(slices, opts.min_partitions, keep_later=keep_later)
        if self.typed is not None and slices:
            # writer schemas registered since the query started travel with the slices
            # (the executors' copy of this reader is the one pickled at the start)
            from spark_kafkalog.spark.typed_read import refresh_typed
            self.typed = refresh_typed(opts, self.typed, logdirs)
            slices = [replace(s, typed=self.typed) for s in slices]
        return slices

    def read(self, partition: InputPartition) -> Iterator:
        from spark_kafkalog.spark.planning import LogSlice
        from spark_kafkalog.spark.reader import PREFETCH_BATCHES, prefetched
        from spark_kafkalog.spark.worker import freeze_heap

        freeze_heap()
        if not isinstance(partition, LogSlice):
            return iter(())
        opts = self.opts
        typed = partition.typed if partition.typed is not None else self.typed

        def rows():
            from spark_kafkalog.spark.reader import typed_output, with_dead_letter_headers

            source = with_dead_letter_headers(opts, typed)
            if partition.tier is not None:
                # a remote segment never changes: read it as a batch read does
                from spark_kafkalog.spark.reader import open_logdirs, read_slice
                batches = read_slice(open_logdirs(opts), source, partition)
            else:
                batches = read_live_slice(source, partition)
            if typed is None:
                return batches
            return typed_output(batches, opts, typed, (partition,))

        if PREFETCH_BATCHES <= 0:
            return rows()
        return prefetched(rows)

    def commit(self, end: dict) -> None:
        """Nothing to release: the log is not ours to trim."""

    def stop(self) -> None:
        self._live = None


def read_live_slice(opts: ReadOptions, s, *, retries: int = 3) -> Iterator:
    """The rows of slice ``s`` of a live log (Arrow batches, as ``read_slice``).

    The partition is listed again first: segments may have been rolled, or deleted by
    retention, since planning. Records of the slice that are gone (below the log start
    now, or a segment deleted under the read) are data loss under ``failOnDataLoss``;
    with it false the read continues from what exists."""
    from spark_kafkalog.log.read.discovery import list_segments
    from spark_kafkalog.log.read.seek import log_start_offset
    from spark_kafkalog.spark.reader import open_logdirs, read_slice

    def listed(logdirs):
        # this partition only (not the whole topic): one directory listing per task
        d = s.partition_dir
        segments, snapshots = list_segments(logdirs.filesystem, d.path)
        if not segments:
            raise LogLayoutError("partition directory holds no segment", path=d.path)
        return replace(d, segments=segments, snapshots=snapshots)

    start = s.start_offset
    for attempt in range(retries + 1):
        logdirs = open_logdirs(opts)
        try:
            fresh = listed(logdirs)
        except KafkaLogError:
            report_data_loss(opts.fail_on_data_loss,
                             f"{s.topic}-{s.partition} is gone. Some data may have been "
                             f"missed", path=s.partition_dir.path, offset=start)
            return
        lso = log_start_offset(logdirs, fresh)
        if start < lso:
            report_data_loss(opts.fail_on_data_loss,
                             f"Cannot fetch offset {start} of {s.topic}-{s.partition}: the "
                             f"log starts at {lso} now (segments deleted since the batch "
                             f"was planned)", path=fresh.path, offset=start)
            start = lso
        if start >= s.end_offset:
            return
        hint = s.start_position
        if start != s.start_offset or hint is None or not any(
                seg.base_offset == hint[0] for seg in fresh.segments):
            hint = None
        piece = replace(s, partition_dir=fresh, start_offset=start, start_position=hint)
        try:
            for batch in read_slice(logdirs, opts, piece):
                yield batch
                start = int(batch.column("offset")[-1].as_py()) + 1
            return
        except (FileNotFoundError, KafkaLogError) as err:
            # a segment deleted (or truncated) under the read: data loss if the log start
            # moved past what we still need, else a real error
            again = open_logdirs(opts)
            try:
                now_start = log_start_offset(again, listed(again))
            except KafkaLogError:
                now_start = None
            if now_start is not None and now_start <= start:
                raise
            if attempt == retries:
                raise
            log.debug("retrying %s-%s from offset %s after %s", s.topic, s.partition,
                      start, err)
