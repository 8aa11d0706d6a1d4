"""Batch planning: options + pushdown + the log's own metadata -> input partitions.

Runs on the driver (in Spark's planner worker). It reads only metadata: directory listings,
checkpoint files and index files, plus the few batch headers a timestamp seek needs. Data
is read by :mod:`.reader` on executors, from the :class:`LogSlice` s planned here.

Rules, in order (each step is a function below so tests can check it alone):

1. **Topic-partitions** from ``subscribe`` / ``subscribePattern`` / ``assign``, then pruned
   by pushed ``topic`` / ``partition`` filters.
2. **Offsets**: ``startingOffsets`` & co. resolved against each partition's state, as
   Spark's Kafka source resolves them against a broker: -2 is the log start offset, -1 the
   upper bound a consumer may read to (high watermark, or last stable offset under
   ``read_committed``); a timestamp is the earliest offset whose record timestamp is at or
   after it. Starting below the log start is data loss (``failOnDataLoss``). This step
   is :mod:`.offset_ranges` (shared with the stream reader).
3. **Pushdown** narrows each range (offset bounds; a timestamp lower bound becomes a
   time-index seek).
4. **Slices**: each partition's range is cut into consecutive slices of about
   ``maxPartitionBytes`` at batch boundaries found through ``.index`` files
   (``split_points``): small segments share a slice, a large segment is cut into byte
   ranges. ``maxRecordsPerPartition`` then cuts slices at batch boundaries by exact
   record counts (:func:`limit_records`), and ``minPartitions`` splits further by offset
   with the arithmetic of Spark's ``KafkaOffsetRangeCalculator``.

Record counts: without ``maxRecordsPerPartition`` a slice's size is its offset span, an
upper bound of its rows (compaction gaps and transaction markers hold offsets but no
rows), which is all ``minPartitions`` needs. With it, the batch headers of every slice are
walked (one bounded window at a time; this reads the slice's bytes once at planning, so
it is done only when the option is set) and records are counted exactly as the reader
will return them: data records only (control batches hold none), aborted transactions
left out under ``read_committed``, the batches at a slice's ends counted within its
offsets. Where Spark's Kafka source can only estimate, every input partition then holds
at most ``maxRecordsPerPartition`` rows -- except a single batch holding more than that,
which cannot be split (a task reads whole batches) and gets an input partition of its own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterator, NamedTuple, Sequence

import numpy as np

from pyspark.sql.datasource import InputPartition

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.log.io import is_local, map_io
from spark_kafkalog.log.model import is_internal_topic
from spark_kafkalog.spark.filters import NONE, Pushdown
from spark_kafkalog.spark.offset_ranges import PartitionRange, resolve_ranges
from spark_kafkalog.spark.options import ReadOptions, Subscribe, SubscribePattern
from spark_kafkalog.spark.packing import default_open_cost, pack_slices



@dataclass(frozen=True)
class LogSlice(InputPartition):
    """One Spark task: rows ``start_offset <= offset < end_offset`` of one topic-partition.

    Small and picklable (it is sent to an executor): the partition directory (with only the
    segments from the slice's first segment on, which covers every transaction marker that
    can abort a record in the slice), the offset range and a byte-position hint
    ``(segment base offset, position)`` of a batch boundary at or before ``start_offset``
    (None: the reader looks it up in the offset index). ``records``: the exact number of
    rows the slice yields when planning counted them (``maxRecordsPerPartition``), else
    None.
    """
    topic: str
    partition: int
    partition_dir: object            # spark_kafkalog.log.PartitionDir
    start_offset: int
    end_offset: int
    start_position: tuple[int, int] | None = None
    est_bytes: int = 0               # planning estimate, for explain and tests
    records: int | None = None
    #: a slice of the remote tier: the partition's TierPlan (log/read/tiered.py), else None
    tier: object = None
    #: a stream's typed read as of this micro-batch (writer schemas registered since the
    #: query started: spark/typed_read.refresh_typed), else None (the reader's own)
    typed: object = None

    @property
    def est_records(self) -> int:
        """The exact row count when known, else the offset span (an upper bound)."""
        if self.records is not None:
            return self.records
        return self.end_offset - self.start_offset


# -- 1. topic-partitions ---------------------------------------------------------------------

class TopicPartition(NamedTuple):
    topic: str
    partition: int


def select_partitions(logdirs, opts: ReadOptions) -> list[TopicPartition]:
    """The topic-partitions the subscription strategy names (before pushdown), sorted by
    (topic, partition), from the roots' listing alone: a partition's directory is listed
    only once pushdown has kept it. A topic or partition named by ``subscribe``/
    ``assign`` that is not in the log dirs is an error: with no broker there is nothing
    to wait for."""
    strategy = opts.strategy
    available = logdirs.topics()
    if isinstance(strategy, SubscribePattern):
        topics = [t for t in available
                  if not is_internal_topic(t) and strategy.matches(t)]
        return [TopicPartition(t, q) for t in topics
                for q in sorted(logdirs.partition_roots(t))]
    if isinstance(strategy, Subscribe):
        return [TopicPartition(topic, q) for topic in sorted(strategy.topics)
                for q in sorted(_numbers(logdirs, "subscribe", topic, available, opts))]
    out = []
    for topic, partition in strategy.partitions:
        numbers = _numbers(logdirs, "assign", topic, available, opts)
        if partition not in numbers:
            raise LogLayoutError(
                f"assign: partition {topic}-{partition} not found in log dir(s) {opts.path} "
                f"(partitions of {topic} there: "
                f"{_short_list([str(q) for q in sorted(numbers)])})")
        out.append(TopicPartition(topic, partition))
    return out


def _numbers(logdirs, option: str, topic: str, available: list[str],
             opts: ReadOptions) -> dict:
    # Named topics may be hidden ones (__cluster_metadata): ask for them by name.
    try:
        return logdirs.partition_roots(topic)
    except LogLayoutError as err:
        raise LogLayoutError(f"{option}: topic {topic} not found in log dir(s) {opts.path} "
                             f"(topics there: {_short_list(available)})") from err


def _short_list(names: Sequence[str], limit: int = 20) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def prune(parts: list, pushdown: Pushdown) -> list:
    return [p for p in parts
            if pushdown.topic_allowed(p.topic) and pushdown.partition_allowed(p.partition)]


# -- 3. pushdown ---------------------------------------------------------------------------------

def apply_pushdown(logdirs, ranges: list[PartitionRange], pushdown: Pushdown, *,
                   on_corruption: str = "fail") -> list[PartitionRange]:
    lo, hi = pushdown.offset_bounds()
    ts_ms = pushdown.timestamp_lower_ms()

    def one(r: PartitionRange) -> PartitionRange:
        start = max(r.start_offset, lo)
        end = r.end_offset if hi is None else min(r.end_offset, hi)
        if start < end and ts_ms is not None and ts_ms > 0:
            found = logdirs.offset_for_timestamp(r.partition_dir, ts_ms, upper_bound=end,
                                                 on_corruption=on_corruption)
            start = end if found is None else max(start, found)
        end = max(start, end)
        if start == r.start_offset and end == r.end_offset:
            return r
        return replace(r, start_offset=start, end_offset=end)

    if ts_ms is None or ts_ms <= 0:     # no seek: nothing to do concurrently
        return [one(r) for r in ranges]
    return map_io(logdirs.filesystem, one, ranges)


# -- 4. slices -----------------------------------------------------------------------------------

def _segments_for(p, start: int, end: int, keep_later: bool):
    """``p`` with only the segments a slice [start, end) needs: from the one holding
    ``start`` to the last starting below ``end`` plus the one after it (so the last
    segment read keeps its real successor: the scanner checks batch offsets against the
    next base offset and treats a cut batch as a torn tail only in the log's last
    segment), or to the log end when ``keep_later`` (read_committed: an abort marker,
    and its .txnindex entry, may sit in any later segment). Keeps what crosses to
    executors small for partitions with many segments."""
    segs = p.segments
    first = p.segment_index_for(start) if segs else 0
    last = len(segs)
    if not keep_later:
        last = first + 1
        while last < len(segs) and segs[last].base_offset < end:
            last += 1
        last = min(last + 1, len(segs))
    if first == 0 and last == len(segs):
        return p
    return replace(p, segments=tuple(segs[first:last]))


def slice_range(logdirs, r: PartitionRange, target_bytes: int,
                split_points: Callable, *, keep_later: bool = False) -> list[LogSlice]:
    if r.start_offset >= r.end_offset:
        return []
    points = split_points(logdirs, r.partition_dir, r.start_offset, r.end_offset, target_bytes)
    if not points or points[0][0] != r.start_offset:
        # the log layer's contract: the first range starts at start_offset
        raise LogLayoutError(f"split_points for {r.topic}-{r.partition} did not start at "
                             f"offset {r.start_offset}: {points[:1]}", path=r.partition_dir.path)
    span = max(1, r.end_offset - r.start_offset)
    bytes_per_offset = r.size_bytes / max(1, r.log_end_offset - r.log_start_offset)
    out = []
    for i, (start, seg_base, pos) in enumerate(points):
        end = points[i + 1][0] if i + 1 < len(points) else r.end_offset
        if end <= start:
            continue
        hint = None if seg_base is None or pos is None else (int(seg_base), int(pos))
        est = int((end - start) * bytes_per_offset) if span else 0
        out.append(LogSlice(r.topic, r.partition,
                            _segments_for(r.partition_dir, start, end, keep_later),
                            start, end, hint, est))
    return out


def _divide(s: LogSlice, parts: int, keep_later: bool) -> list[LogSlice]:
    """Spark's even division of an offset range into ``parts`` (the last takes the
    remainder). Only the first piece keeps the byte-position hint."""
    if parts <= 1:
        return [s]
    out = []
    remaining = s.end_offset - s.start_offset
    start = s.start_offset
    for i in range(parts):
        this = remaining // (parts - i)
        remaining -= this
        end = min(start + this, s.end_offset)
        if end > start:
            frac = (end - start) / max(1, s.end_offset - s.start_offset)
            out.append(replace(s, partition_dir=_segments_for(s.partition_dir, start, end,
                                                              keep_later),
                               start_offset=start, end_offset=end,
                               start_position=s.start_position if start == s.start_offset
                               else None, est_bytes=int(s.est_bytes * frac),
                               records=None))
        start = end
    return out


def split_for_limits(slices: list[LogSlice], min_partitions: int | None, *,
                     keep_later: bool = False) -> list[LogSlice]:
    """``minPartitions``: Spark's proportional split of the large slices (by offset, on
    ``est_records``), after :func:`limit_records`. Empty slices are dropped."""
    slices = [s for s in slices if s.est_records > 0]
    if min_partitions is None or len(slices) >= min_partitions:
        return slices
    total = sum(s.est_records for s in slices)
    if total == 0:
        return slices

    def part_count(size: int, total_size: int, min_parts: int) -> int:
        # Scala's math.round: half up
        return max(int(math.floor(size / total_size * min_parts + 0.5)), 1)

    unsplit = [s for s in slices if part_count(s.est_records, total, min_partitions) == 1]
    unsplit_ids = {id(s) for s in unsplit}
    split_total = total - sum(s.est_records for s in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out = []
    for s in slices:
        if id(s) in unsplit_ids or split_total == 0:
            out.append(s)
        else:
            out.extend(_divide(s, part_count(s.est_records, split_total, split_min), keep_later))
    return out


# -- 5. exact record counts (maxRecordsPerPartition) -----------------------------------------

@dataclass(frozen=True)
class BatchRows:
    """The batches of one window of a slice, in log order: for each, the offset a slice
    starting at it would start at (every row of earlier batches is below it, every row
    of it at or above), the byte position of its start in the segment whose base offset
    is ``segment_base``, and how many of the slice's rows it holds."""
    segment_base: int
    cut_offsets: np.ndarray         # int64
    positions: np.ndarray           # int64
    rows: np.ndarray                # int64


def batch_rows(logdirs, s: LogSlice, opts: ReadOptions) -> Iterator[BatchRows]:
    """Walk the batch headers of slice ``s`` the way the reader will read it (same seek,
    same scanner and corruption policy, same aborted-transaction resolution) and count
    the rows each batch contributes.

    A batch counts ``record_count`` rows when it lies wholly inside the slice's offsets;
    control batches, aborted batches (``read_committed``) and batches outside the range
    count 0; a batch cut by the range's ends, or a compressed legacy wrapper (whose
    header does not say how many messages it holds), is decoded -- only that batch,
    from the window already in memory -- and its rows in range counted. Memory: one
    window of ``opts.window_bytes``. A batch that frames but does not decode raises
    under ``onCorruption=fail`` (as reading it would) and counts 0 otherwise (under
    ``stop`` the reader then ends the partition there, so later pieces read fewer rows
    than counted: never more)."""
    from spark_kafkalog.errors import CorruptRecordError, KafkaLogError
    from spark_kafkalog.format import decode_run
    from spark_kafkalog.log import ReadStats, scan_windows
    from spark_kafkalog.log.read.isolation import aborted_resolver
    from spark_kafkalog.log.read.seek import locate

    p = s.partition_dir
    start, end = s.start_offset, s.end_offset
    if start >= end or not p.segments:
        return
    stats = ReadStats()
    seg_i, pos, check = locate(logdirs, p, start, s.start_position)
    resolver = None
    if opts.isolation_level == "read_committed":
        # as the reader: any marker in the log may decide (end is clamped to the LSO)
        resolver = aborted_resolver(logdirs, p, segment_index=seg_i, start_offset=start,
                                    end_offset=end, decision_limit=1 << 62,
                                    txn_index="auto", on_corruption=opts.on_corruption,
                                    window_bytes=opts.window_bytes, stats=stats)
    windows = scan_windows(logdirs.filesystem, p, segment_index=seg_i, position=pos,
                           seek_check=check, end_offset=end,
                           on_corruption=opts.on_corruption, window_bytes=opts.window_bytes,
                           stats=stats, quiet=True)
    prev_last = None
    try:
        for w in windows:
            h = w.headers
            base = _np(h, "base_offset")
            last = _np(h, "last_offset")
            magic = _np(h, "magic")
            count = _np(h, "record_count").astype(np.int64)
            control = _np(h, "is_control")
            positions = _np(h, "position")
            sizes = _np(h, "size")
            # the offset each batch's rows start at, at the earliest: a v2 header says
            # it; a legacy entry's rows follow the previous batch's last offset
            prev = np.empty(len(last), dtype=np.int64)
            prev[0] = start - 1 if prev_last is None else prev_last
            prev[1:] = last[:-1]
            cut = np.where(magic == 2, base, np.maximum(prev + 1, start)).astype(np.int64)
            counted = ~control & (last >= start) & (cut < end)
            if resolver is not None:
                aborted = resolver.skip_positions(w)       # relative to the window
                if aborted is not None:
                    counted &= ~np.isin(positions - w.position, aborted)
            rows = np.where(counted, count, 0)
            exact = counted & ((count < 0) | (cut < start) | (last >= end))
            for r in np.flatnonzero(exact).tolist():
                at = int(positions[r]) - w.position
                try:
                    rb = decode_run(memoryview(w.data)[at:at + int(sizes[r])], topic=p.topic,
                                    partition=p.partition, verify_crc=False,
                                    include_headers=False, start_offset=start,
                                    end_offset=end, position_base=int(positions[r]))
                    rows[r] = rb.num_rows
                except CorruptRecordError as err:
                    if opts.on_corruption == "fail":
                        raise err.at(path=w.path) from err
                    rows[r] = 0         # the reader skips it (or stops there)
                except KafkaLogError as err:
                    raise err.at(path=w.path) from err
            prev_last = int(last[-1])
            yield BatchRows(p.segments[w.segment_index].base_offset, cut,
                            positions.astype(np.int64), rows)
            del w, h
    finally:
        windows.close()


def cut_by_records(s: LogSlice, batches: Sequence[BatchRows], max_records: int, *,
                   keep_later: bool = False) -> list[LogSlice]:
    """Cut slice ``s`` at batch boundaries into pieces of at most ``max_records`` rows
    (``batches``: its batches, from :func:`batch_rows`). As Spark divides a range that
    is too large, the pieces are balanced: a piece ends at the first batch boundary at
    or past ``rows / ceil(rows / max_records)`` rows (Spark's even share), or earlier
    when the next batch would take it over the limit. A batch with more rows than the
    limit is a piece of its own. Each piece knows its exact row count and starts with a
    position hint at its first batch. Memory: 32 bytes per batch of the slice (a slice
    is at most ``maxPartitionBytes`` of log)."""
    parts = [b for b in batches if len(b.rows)]
    if not parts:
        return []
    rows = np.concatenate([b.rows for b in parts])
    total = int(rows.sum())
    if total == 0:
        return []
    cuts = np.concatenate([b.cut_offsets for b in parts])
    positions = np.concatenate([b.positions for b in parts])
    seg_bases = np.concatenate([np.full(len(b.rows), b.segment_base, dtype=np.int64)
                                for b in parts])
    k = -(-total // max_records)      # pieces of total / k <= max_records rows each
    pieces: list[tuple[int, tuple[int, int] | None, int]] = []   # (start, hint, rows)
    piece_start, piece_hint, piece = s.start_offset, s.start_position, 0
    for r in np.flatnonzero(rows).tolist():
        n = int(rows[r])
        if piece and (piece + n > max_records or piece * k >= total):
            pieces.append((piece_start, piece_hint, piece))
            piece_start = int(cuts[r])
            piece_hint = (int(seg_bases[r]), int(positions[r]))
            piece = 0
        piece += n
    pieces.append((piece_start, piece_hint, piece))
    out = []
    for i, (start, hint, n) in enumerate(pieces):
        stop = pieces[i + 1][0] if i + 1 < len(pieces) else s.end_offset
        frac = (stop - start) / max(1, s.end_offset - s.start_offset)
        out.append(replace(s, partition_dir=_segments_for(s.partition_dir, start, stop,
                                                          keep_later),
                           start_offset=start, end_offset=stop, start_position=hint,
                           est_bytes=int(s.est_bytes * frac), records=n))
    return out


def limit_records(logdirs, slices: list[LogSlice], opts: ReadOptions, *,
                  count: Callable | None = None, keep_later: bool = False
                  ) -> list[LogSlice]:
    """``maxRecordsPerPartition``: every slice counted (``count``: :func:`batch_rows`,
    replaceable in tests) and cut by :func:`cut_by_records`. Slices with no rows are
    dropped. A no-op when the option is not set."""
    max_records = opts.max_records_per_partition
    if max_records is None:
        return slices
    count = batch_rows if count is None else count
    return [piece for s in slices
            for piece in cut_by_records(s, list(count(logdirs, s, opts)), max_records,
                                        keep_later=keep_later)]


# -- 5. the remote tier ------------------------------------------------------------------------

def plan_tiers(logdirs, opts: ReadOptions, parts: list) -> dict:
    """(topic, partition) -> TierPlan of ``parts`` when ``remoteStorage`` is set: the
    remote segments ``__remote_log_metadata`` lists (no listing of the store). A root
    holding no object of a topic read raises InvalidOptionError (the wrong directory)."""
    if not opts.remote_storage:
        return {}
    from spark_kafkalog.log import LogDirs
    from spark_kafkalog.log.read.reader import load_remote_metadata
    from spark_kafkalog.log.read.remote import RemoteStorage, check_root, remote_segments
    from spark_kafkalog.log.read.seek import log_start_offset
    from spark_kafkalog.log.read.tiered import plan_partition

    if not isinstance(logdirs, LogDirs):
        raise InvalidOptionError("remoteStorage needs log dirs read through LogDirs")
    state = load_remote_metadata(logdirs)
    by_topic = {t: remote_segments(state, t) for t in {tp.topic for tp in parts}}
    out = {}
    for tp in parts:
        p = logdirs.partition(tp.topic, tp.partition)
        out[(tp.topic, tp.partition)] = plan_partition(
            tp.topic, tp.partition, by_topic[tp.topic].get(tp.partition, []),
            log_start_offset(logdirs, p), logdirs.checkpointed_log_start_offset(p))
    storage = RemoteStorage(opts.remote_storage, opts.remote_layout,
                            dict(opts.filesystem_options))
    check_root(storage, [s for plan in out.values() for s in plan.remote])
    return out


def split_tiers(ranges: list[PartitionRange], tiers: dict, target_bytes: int = 128 << 20
                ) -> tuple[list[PartitionRange], list[LogSlice]]:
    """Each range's part below its local log start as slices of whole remote segments of
    about ``target_bytes`` (a task reads its segments one object after the other), the
    rest as local ranges. A gap between the tiers is a slice of its own, whose task
    reports it (or skips it without failOnDataLoss)."""
    local, remote = [], []
    for r in ranges:
        t = tiers.get((r.topic, r.partition))
        if t is None or not t.remote or r.start_offset >= t.local_start:
            local.append(r)
            continue
        stop = min(r.end_offset, t.local_start)
        if t.gap is not None and t.gap[0] < stop and t.gap[1] > r.start_offset:
            remote.append(LogSlice(r.topic, r.partition, r.partition_dir,
                                   max(t.gap[0], r.start_offset), min(t.gap[1], stop), None,
                                   0, tier=t))
        lo = size = None
        done = r.start_offset
        for seg in t.remote:
            a, b = max(done, seg.start_offset), min(stop, seg.end_offset + 1)
            if a >= b:
                continue
            if lo is None:
                lo, size = a, 0
            size += seg.size
            done = b
            if size >= target_bytes:
                remote.append(LogSlice(r.topic, r.partition, r.partition_dir, lo, b, None,
                                       size, tier=t))
                lo = None
        if lo is not None:
            remote.append(LogSlice(r.topic, r.partition, r.partition_dir, lo, done, None,
                                   size, tier=t))
        if r.end_offset > t.local_start:
            local.append(replace(r, start_offset=t.local_start))
    return local, remote


def clip_slices(slices: list[LogSlice], pushdown: Pushdown) -> list[LogSlice]:
    """``slices`` narrowed to the pushed offset bounds (apply_pushdown's for ranges)."""
    lo, hi = pushdown.offset_bounds()
    out = []
    for s in slices:
        start, end = max(s.start_offset, lo), s.end_offset if hi is None else \
            min(s.end_offset, hi)
        if start < end:
            out.append(s if (start, end) == (s.start_offset, s.end_offset)
                       else replace(s, start_offset=start, end_offset=end))
    return out


# -- all together ----------------------------------------------------------------------------------

def plan(logdirs, opts: ReadOptions, pushdown: Pushdown = NONE, *,
         split_points: Callable | None = None, count: Callable | None = None
         ) -> list[LogSlice]:
    """The input partitions of a batch read, in (topic, partition, offset) order: small
    slices packed into one task (:mod:`.packing`) unless ``packPartitions=false``.
    ``split_points`` / ``count`` replace the log-reading steps in tests (see
    :func:`slice_range`, :func:`limit_records`)."""
    if split_points is None:
        from spark_kafkalog.log import split_points as log_split_points
        split_points = log_split_points
    selected = select_partitions(logdirs, opts)
    if pushdown.is_empty:
        # still validate the offset options against the whole selection
        resolve_ranges(logdirs, opts, [], all_parts=selected)
        return []
    pruned = prune(selected, pushdown)
    tiers = plan_tiers(logdirs, opts, pruned)
    ranges = resolve_ranges(logdirs, opts, pruned, all_parts=selected, tiers=tiers)
    remote_slices = []
    if tiers:
        ranges, remote_slices = split_tiers(ranges, tiers, opts.max_partition_bytes)
        remote_slices = clip_slices(remote_slices, pushdown)
    ranges = apply_pushdown(logdirs, ranges, pushdown, on_corruption=opts.on_corruption)
    keep_later = opts.isolation_level == "read_committed"
    # each range's index reads are independent: concurrent on remote filesystems
    slices = remote_slices + [s for cut in map_io(logdirs.filesystem,
                                  lambda r: slice_range(logdirs, r, opts.max_partition_bytes,
                                                        split_points, keep_later=keep_later),
                                  ranges)
              for s in cut]
    slices = limit_records(logdirs, slices, opts, count=count, keep_later=keep_later)
    slices = split_for_limits(slices, opts.min_partitions, keep_later=keep_later)
    if tiers:
        slices.sort(key=lambda s: (s.topic, s.partition, s.start_offset))
    if not opts.pack_partitions or tiers:
        return slices
    return pack_slices(slices, target_bytes=opts.max_partition_bytes,
                       open_cost=(opts.open_cost_bytes if opts.open_cost_bytes is not None
                                  else default_open_cost(is_local(logdirs.filesystem))),
                       max_records=opts.max_records_per_partition,
                       min_partitions=opts.min_partitions)
