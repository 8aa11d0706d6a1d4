"""Reading records: a partition's offset range as Arrow record batches, or a topic as a table.

``read_partition`` is what a Spark task runs: it seeks through the offset index (or a
position hint from :func:`~spark_kafkalog.log.read.seek.split_points`), scans windows of whole
batches (scan.py: corruption policy, torn tail), drops aborted transactions under
read_committed (isolation.py) and decodes each window with the format layer's kernel,
filtering the offset range while decoding. Memory: one window of batch bytes plus its
decoded rows.

``read_table`` is the non-Spark API: offsets resolved like Spark's Kafka source
(-2 earliest, -1 latest, ending exclusive), rows in partition then offset order.
"""
from __future__ import annotations

import logging
from typing import Generator, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import (
    CorruptRecordError,
    DataLossError,
    InvalidOptionError,
    KafkaLogError,
    LogLayoutError,
    OffsetOutOfRangeError,
)
from spark_kafkalog.format import decode_run, record_schema
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import DEFAULT_MAX_DECOMPRESSED
from spark_kafkalog.log.model import LogSource, PartitionDir
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.format.remote_log_metadata import TOPIC as REMOTE_LOG_METADATA
from spark_kafkalog.format.remote_log_metadata import RemoteLogMetadataState
from spark_kafkalog.log.files.txn import AbortedTxns
from spark_kafkalog.log.read.isolation import AbortedFromIndex, aborted_resolver
from spark_kafkalog.log.read.remote import (
    RemoteStorage,
    check_root,
    feed_metadata,
    remote_segments,
)
from spark_kafkalog.log.read.tiered import TierPlan, over_tiers, plan_partition, read_tiered
from spark_kafkalog.log.read.loss import GapCheck, report_losses
from spark_kafkalog.log.read.pin import pin_segments
from spark_kafkalog.log.read.scan import (
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_WINDOW_BYTES,
    ReadStats,
    SkippedRange,
    Window,
    check_policy,
    scan_windows,
)
from spark_kafkalog.log.read.seek import locate, offset_index
from spark_kafkalog.log.read.snapshot import (
    SNAPSHOT_ATTEMPTS,
    Commit,
    list_commits as _commits_of,
)
from spark_kafkalog.log.read.state import check_isolation, topic_states

__all__ = ["read_partition", "read_table", "list_commits", "load_remote_metadata",
           "tier_plans", "EARLIEST", "LATEST"]

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1


#: what a DataLossError of the library's reads says to do instead
LOSS_HINT = "pass fail_on_data_loss=False to read what is there"

#: decode a window in slices of whole batches of about this size: the decoded rows of
#: a slice, not of the whole window, are in memory at once next to the window's bytes
DECODE_SLICE_BYTES = 4 * 1024 * 1024


def _slices(w: Window, target: int) -> Iterator[tuple[Window, int]]:
    """``(sub-window, offset of its first byte in w)`` cut at batch boundaries."""
    sizes = _np(w.headers, "size")
    if len(sizes) <= 1 or len(w.data) <= target:
        yield w, 0
        return
    ends = np.cumsum(sizes)
    start_row, start_byte = 0, 0
    while start_row < len(sizes):
        stop = int(np.searchsorted(ends, start_byte + target, side="right"))
        stop = max(stop, start_row + 1)
        end_byte = int(ends[stop - 1])
        yield (Window(w.segment_index, w.path, w.position + start_byte,
                      w.data[start_byte:end_byte], w.headers[start_row:stop]),
               start_byte)
        start_row, start_byte = stop, end_byte


def _decode_window(w: Window, skip: np.ndarray | None, *, topic: str, partition: int,
                   include_headers: bool, start_offset: int, end_offset: int,
                   on_corruption: str, max_decompressed: int, stats: ReadStats
                   ) -> Generator[pa.RecordBatch, None, bool]:
    """Decode one window; a batch that frames and checksums correctly but does not decode
    (bad records, undecodable payload) goes through the corruption policy on its own.
    Returns True when the stop policy ended the partition inside this window."""
    view = memoryview(w.data)
    positions = _np(w.headers, "position")
    sizes = _np(w.headers, "size")
    lo = 0                              # relative position decoding resumes from
    while lo < len(view):
        rel_skip = None
        if skip is not None:
            rel_skip = skip[skip >= lo] - lo
        try:
            rb = decode_run(view[lo:], topic=topic, partition=partition, verify_crc=False,
                            include_headers=include_headers,
                            max_decompressed_bytes=max_decompressed,
                            start_offset=start_offset, end_offset=end_offset,
                            skip_positions=rel_skip, position_base=w.position + lo)
        except CorruptRecordError as err:
            if err.position is None:
                raise err.at(path=w.path) from err
            row = int(np.searchsorted(positions, err.position, side="right")) - 1
            if row < 0:
                raise err.at(path=w.path) from err
            bad_start = int(positions[row]) - w.position
            bad_end = bad_start + int(sizes[row])
            if on_corruption == "fail":
                raise err.at(path=w.path) from err
            if bad_start > lo:
                # the batches before the bad one decode: emit them first
                stopped = yield from _decode_window(
                    Window(w.segment_index, w.path, w.position + lo,
                           w.data[lo:bad_start], w.headers[:row]),
                    None if skip is None else skip[(skip >= lo) & (skip < bad_start)] - lo,
                    topic=topic, partition=partition, include_headers=include_headers,
                    start_offset=start_offset, end_offset=end_offset,
                    on_corruption=on_corruption, max_decompressed=max_decompressed,
                    stats=stats)
                if stopped:
                    return True
            where = w.position + bad_start
            if on_corruption == "stop":
                stats.stopped_at = (w.path, where, err.offset, err.reason)
                log.warning("%s: batch at position %d (offset %s) does not decode: %s; "
                            "stopping the partition here (on_corruption=stop)", w.path,
                            where, err.offset, err.reason)
                return True
            stats.skipped.append(SkippedRange(w.path, where, w.position + bad_end,
                                              err.offset, err.reason))
            log.warning("%s: skipped the batch at position %d (offset %s), which does not "
                        "decode: %s (on_corruption=skip)", w.path, where, err.offset,
                        err.reason)
            lo = bad_end
            continue
        except KafkaLogError as err:
            raise err.at(path=w.path) from err
        if rb.num_rows:
            stats.records += rb.num_rows
            yield rb
        return False
    return False


#: a segment this small is read to its end rather than bounded through its offset index:
#: one more open (a HEAD and a GET on an object store) costs more than these bytes, and
#: a topic of thousands of small partitions pays it in every slice
SMALL_SEGMENT_BYTES = 256 * 1024


def _read_limit(logdirs: LogSource, p: PartitionDir, i: int, end_offset: int) -> int | None:
    """A byte position of segment ``i`` past which no batch below ``end_offset`` starts,
    from its offset index, when the range ends inside it: the entry after the first
    entry at or past ``end_offset`` (that entry's batch may still hold smaller offsets
    when a broker appended several batches at once; the next one cannot)."""
    nxt = p.next_base_offset(i)
    if nxt is not None and end_offset >= nxt:
        return None
    if p.segments[i].size <= SMALL_SEGMENT_BYTES:
        return None             # reading it all costs less than reading its index
    idx = offset_index(logdirs, p, i)
    if idx is None:
        return None
    k = int(np.searchsorted(idx.offsets, end_offset, side="left"))
    return int(idx.positions[k + 1]) if k + 1 < len(idx) else None


def read_partition(logdirs: LogSource, p: PartitionDir, *, start_offset: int, end_offset: int,
                   isolation_level: str = "read_uncommitted", include_headers: bool = True,
                   on_corruption: str = "fail", window_bytes: int = DEFAULT_WINDOW_BYTES,
                   start_position: tuple[int, int] | None = None,
                   stats: ReadStats | None = None,
                   max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
                   max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
                   txn_index: str = "auto", decision_limit: int | None = None,
                   memory_map: bool = False, aborted_txns: AbortedTxns | None = None,
                   fail_on_data_loss: bool | None = True, loss_hint: str = LOSS_HINT
                   ) -> Iterator[pa.RecordBatch]:
    """Rows with ``start_offset <= offset < end_offset`` (already clamped by the caller to
    what is visible), in offset order, schema ``record_schema(include_headers)``.

    ``start_position``: ``(segment base offset, byte position)`` hint from split_points.
    Under read_committed aborted transactional records are dropped (``txn_index``:
    "auto" uses the ``.txnindex`` files when the partition has any, else the markers in
    the log; "use"/"ignore" force one way); ``decision_limit``: markers at or after it
    decide nothing (default: none; it only matters for an ``end_offset`` past the last
    stable offset). ``memory_map``: map local segment windows instead of reading them
    (saves a copy; only for a log nothing truncates meanwhile, such as a copy or a
    backup: a truncation under a map kills the process with SIGBUS).

    ``fail_on_data_loss``: offsets that jump at a segment boundary inside the range with
    no compaction to explain them (a missing or cut segment, :mod:`.loss`) raise
    :class:`DataLossError` (True), or are warned about once and added to
    ``stats.losses`` (False); None does not look (a caller checking on its own).
    ``loss_hint``: what the error tells the user to do instead (the caller's option).

    ``stats`` (a :class:`ReadStats`) receives bytes read, batches, records, skipped
    ranges, a torn tail, a policy stop, losses. Errors: CorruptRecordError (on_corruption=fail),
    MissingCodecError, UnsupportedFormatError, LogLayoutError — each naming the file,
    byte position and offset. Bounded memory: one window of whole batches at a time
    (a single batch larger than the window is read whole)."""
    check_isolation(isolation_level)
    check_policy(on_corruption)
    for name, value in (("start_offset", start_offset), ("end_offset", end_offset)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise InvalidOptionError(f"{name} must be a non-negative integer, not {value!r}")
    if window_bytes is None or int(window_bytes) < 1:
        raise InvalidOptionError(f"window_bytes must be positive, not {window_bytes!r}")
    stats = stats if stats is not None else ReadStats()
    if start_offset >= end_offset or not p.segments:
        return
    # the files this read's listing saw, even if a compaction has replaced them since
    p = pin_segments(logdirs.filesystem, p, start_offset, end_offset)
    seg_i, pos, check = locate(logdirs, p, start_offset, start_position)
    resolver = None
    if isolation_level == "read_committed":
        if decision_limit is None:
            # Any marker may decide: a transaction whose marker lies past the high
            # watermark began at or after the last stable offset, so none of its
            # batches is below an end_offset clamped to it.
            decision_limit = 1 << 62
        resolver = AbortedFromIndex(aborted_txns) if aborted_txns is not None else \
            aborted_resolver(logdirs, p, segment_index=seg_i, start_offset=start_offset,
                             end_offset=end_offset, decision_limit=decision_limit,
                             txn_index=txn_index, on_corruption=on_corruption,
                             window_bytes=window_bytes, stats=stats)
    windows = scan_windows(logdirs.filesystem, p, segment_index=seg_i, position=pos,
                           seek_check=check, end_offset=end_offset,
                           read_limit=lambda i: _read_limit(logdirs, p, i, end_offset),
                           on_corruption=on_corruption, window_bytes=int(window_bytes),
                           max_batch_bytes=max_batch_bytes, stats=stats,
                           memory_map=memory_map)
    gaps = None if fail_on_data_loss is None else GapCheck(logdirs, p, start_offset,
                                                            end_offset, seg_i, stats)
    try:
        for w in windows:
            if gaps is not None:
                lost = gaps.window(w)
                if lost:
                    report_losses(lost, fail=fail_on_data_loss, stats=stats,
                                  hint=loss_hint)
            skip = resolver.skip_positions(w) if resolver is not None else None
            for part, shift in _slices(w, min(int(window_bytes), DECODE_SLICE_BYTES)):
                part_skip = None
                if skip is not None:
                    part_skip = skip[(skip >= shift) & (skip < shift + len(part.data))] - shift
                    part_skip = part_skip if len(part_skip) else None
                stopped = yield from _decode_window(
                    part, part_skip, topic=p.topic, partition=p.partition,
                    include_headers=include_headers, start_offset=start_offset,
                    end_offset=end_offset, on_corruption=on_corruption,
                    max_decompressed=max_decompressed_bytes, stats=stats)
                del part
                if stopped:
                    return
            # let the window's bytes go before the scanner reads the next window
            del w, skip
    finally:
        windows.close()


def _offset_arg(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidOptionError(f"{name}: offsets must be integers, not {value!r}")
    return int(value)


def _per_partition(name: str, value, partitions: Sequence[int]) -> dict[int, int]:
    """A {partition: offset} option (keys may be ints or strings, as in Spark's JSON)."""
    if value is None:
        return {}
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return {q: int(value) for q in partitions}
    if not isinstance(value, Mapping):
        raise InvalidOptionError(f"{name} must map partition -> offset, not {value!r}")
    out = {}
    for k, v in value.items():
        try:
            q = int(k)
        except (TypeError, ValueError):
            raise InvalidOptionError(f"{name}: partition {k!r} is not an integer") from None
        out[q] = _offset_arg(f"{name}[{k}]", v)
    return out


def read_table(path, topic: str, *, partitions: Sequence[int] | None = None,
               starting_offsets: Mapping | None = None, ending_offsets: Mapping | None = None,
               starting_timestamp: int | None = None,
               isolation_level: str = "read_uncommitted", include_headers: bool = True,
               on_corruption: str = "fail", filesystem_options: Mapping | None = None,
               read_past_high_watermark: bool = False,
               window_bytes: int = DEFAULT_WINDOW_BYTES, fail_on_data_loss: bool = True,
               stats: ReadStats | None = None, txn_index: str = "auto",
               as_of_commit: str | int | None = None,
               as_of_timestamp: int | None = None,
               remote_storage: RemoteStorage | str | None = None,
               remote_layout: str | None = None) -> pa.Table:
    """One topic (or some of its partitions) of a log dir as an Arrow table in Spark's
    Kafka schema, rows in partition then offset order.

    ``path``: a URI, comma-separated URIs, a list of them, or a :class:`LogDirs`.
    ``starting_offsets`` / ``ending_offsets``: ``{partition: offset}`` (keys int or str);
    an offset is the next one to read; -2 = earliest (log start), -1 = latest (the
    upper bound: high watermark, last stable offset under read_committed, log end with
    ``read_past_high_watermark``); ending is exclusive and defaults to latest, starting
    to earliest. ``starting_timestamp`` (ms) starts each partition at its earliest
    record with a timestamp >= it (at the latest offset when there is none) and takes
    precedence over ``starting_offsets``.

    A start below the log start offset raises DataLossError (or is moved up to it with
    ``fail_on_data_loss=False``), and so do records the log's own files promise and its
    segments do not hold (a checkpoint past the log end, a missing segment: see
    :mod:`~spark_kafkalog.log.read.loss`; with ``fail_on_data_loss=False`` one warning
    per partition and the losses in ``stats.losses``); a start past the upper bound raises
    OffsetOutOfRangeError; an end past it is lowered to it.

    Every partition is read at one snapshot of the topic (its journal read once, see
    :mod:`~spark_kafkalog.log.read.snapshot`). ``as_of_commit`` (a write id or a commit
    number, see :func:`~spark_kafkalog.log.read.snapshot.list_commits`) or
    ``as_of_timestamp`` (ms: the newest commit at or before it) read the topic as it was
    right after that commit: "latest" is then that commit's end.

    ``remote_storage`` (a root URI or a :class:`RemoteStorage`; ``remote_layout`` see
    :mod:`~spark_kafkalog.log.model.remote`): the topic's remote tier (KIP-405), listed
    by the ``__remote_log_metadata`` in the log dirs; earliest is then the log start over
    both tiers, and a gap between them or a missing remote object is data loss; a root
    that holds no object of the topic at all is an InvalidOptionError (the wrong
    directory), raised before anything is read."""
    check_isolation(isolation_level)
    check_policy(on_corruption)
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    numbers = sorted(logdirs.partition_roots(topic))     # the dirs are listed with the snapshot
    if partitions is not None:
        wanted = [int(q) for q in partitions]
        missing = [q for q in wanted if q not in numbers]
        if missing:
            raise LogLayoutError(f"partitions {missing} of topic {topic!r} not found in log "
                                 f"dirs {', '.join(logdirs.roots)}")
        numbers = sorted(set(wanted))
    starts = _per_partition("starting_offsets", starting_offsets, numbers)
    ends = _per_partition("ending_offsets", ending_offsets, numbers)
    for name, given in (("starting_offsets", starts), ("ending_offsets", ends)):
        unknown = sorted(set(given) - set(numbers))
        if unknown:
            raise InvalidOptionError(f"{name}: partitions {unknown} of topic {topic!r} are "
                                     "not being read")
    stats = stats if stats is not None else ReadStats()

    def at_snapshot(stats: ReadStats) -> list[pa.RecordBatch]:
        batches: list[pa.RecordBatch] = []
        _, parts, states = topic_states(logdirs, topic, numbers, as_of_commit=as_of_commit,
                                        as_of_timestamp=as_of_timestamp,
                                        isolation_level=isolation_level,
                                        read_past_high_watermark=read_past_high_watermark,
                                        on_corruption=on_corruption, timestamps=False)
        storage = remote_storage if remote_storage is None or \
            isinstance(remote_storage, RemoteStorage) else \
            RemoteStorage(remote_storage, remote_layout, filesystem_options)
        plans = tier_plans(logdirs, storage, topic, parts, states) if storage else {}
        for p in parts:
            plan = plans.get(p.partition)
            state = over_tiers(states[p.partition], plan)
            lo, hi = state.log_start_offset, state.upper_bound
            where = f"{topic}-{p.partition}"
            asked_start = starts.get(p.partition, EARLIEST)
            asked_end = ends.get(p.partition, LATEST)
            report_losses([x for x in state.losses if x.overlaps(
                asked_start if asked_start >= 0 and starting_timestamp is None else None,
                asked_end if asked_end >= 0 else None)],
                fail=fail_on_data_loss, stats=stats, hint=LOSS_HINT)
            if starting_timestamp is not None:
                found = logdirs.offset_for_timestamp(p, starting_timestamp, upper_bound=hi,
                                                     on_corruption=on_corruption)
                start = hi if found is None else max(found, lo)
            else:
                start = starts.get(p.partition, EARLIEST)
                if start == EARLIEST:
                    start = lo
                elif start == LATEST:
                    start = hi
                elif start < 0:
                    raise InvalidOptionError(f"starting_offsets: {where}: offset {start} is not "
                                             "-2 (earliest), -1 (latest) or an offset")
            end = ends.get(p.partition, LATEST)
            if end == LATEST:
                end = hi
            elif end < 0:
                raise InvalidOptionError(f"ending_offsets: {where}: offset {end} is not -1 "
                                         "(latest) or an offset")
            if start < lo:
                if fail_on_data_loss:
                    raise DataLossError(f"{where}: offset {start} is below the log start offset "
                                        f"{lo}: those records are gone (set "
                                        "fail_on_data_loss=False to start at the log start)",
                                        path=p.path, offset=start)
                start = lo
            if start > hi:
                raise OffsetOutOfRangeError(f"{where}: starting offset {start} is past the upper "
                                            f"bound {hi} (log end {state.log_end_offset})",
                                            path=p.path, offset=start)
            end = min(end, hi)
            if end < start:
                raise InvalidOptionError(f"ending_offsets: {where}: ending offset {end} is "
                                         f"before the starting offset {start}")
            stats.ranges.append((topic, p.partition, start, end))
            kwargs = dict(start_offset=start, end_offset=end, isolation_level=isolation_level,
                          include_headers=include_headers, on_corruption=on_corruption,
                          window_bytes=window_bytes, stats=stats, txn_index=txn_index,
                          decision_limit=state.log_end_offset
                          if read_past_high_watermark else state.high_watermark)
            if plan is not None:
                batches.extend(read_tiered(read_partition, logdirs, storage, p, plan,
                                           fail_on_data_loss=fail_on_data_loss, **kwargs))
            else:
                batches.extend(read_partition(logdirs, p, fail_on_data_loss=fail_on_data_loss,
                                              **kwargs))
        return batches

    for attempt in range(SNAPSHOT_ATTEMPTS):
        took = ReadStats()
        try:
            batches = at_snapshot(took)
            break
        except LogLayoutError as err:
            # a segment the snapshot listed was removed before it was read (retention's
            # renamed files purged after file.delete.delay.ms, a compaction's): those
            # records were deleted, not lost; the read is taken at a new snapshot
            if attempt == SNAPSHOT_ATTEMPTS - 1 or \
                    not isinstance(err.__cause__, FileNotFoundError):
                raise
            log.info("%s: %s; reading the topic again", topic, err)
            logdirs.forget(topic)
    _add_stats(stats, took)
    return pa.Table.from_batches(batches, schema=record_schema(include_headers))


def _add_stats(into: ReadStats, took: ReadStats) -> None:
    """Add what one read (``took``) did to the caller's ``into``."""
    into.bytes_read += took.bytes_read
    into.batches += took.batches
    into.records += took.records
    into.index_fallbacks += took.index_fallbacks
    into.skipped.extend(took.skipped)
    into.losses.extend(took.losses)
    into.ranges.extend(took.ranges)
    into.torn_tail = took.torn_tail or into.torn_tail
    into.stopped_at = took.stopped_at or into.stopped_at


def load_remote_metadata(logdirs: LogDirs, *, keep_records: bool = False
                         ) -> RemoteLogMetadataState:
    """``__remote_log_metadata`` of the log dirs, read to its log end (the checkpointed
    high watermark lags the broker's by up to its checkpoint interval, and a segment
    whose copy finished after it may already be gone locally), as segment states (and
    every record with ``keep_records``)."""
    internal = LogDirs(logdirs.roots, logdirs.filesystem_options, include_internal=True,
                       filesystem=logdirs.filesystem)
    state = RemoteLogMetadataState(keep_records=keep_records)
    if internal.partition_roots(REMOTE_LOG_METADATA):
        feed_metadata(state, read_table(internal, REMOTE_LOG_METADATA, include_headers=False,
                                        read_past_high_watermark=True))
    return state


def tier_plans(logdirs: LogDirs, storage: RemoteStorage, topic: str, parts, states,
               option: str = "remote_storage") -> dict[int, TierPlan]:
    """partition -> :class:`TierPlan` of ``parts`` (local PartitionDirs) at ``states``.
    Raises InvalidOptionError (naming ``option``) for a root that holds none of the
    remote segments to read (:func:`~.remote.check_root`)."""
    segs = remote_segments(load_remote_metadata(logdirs), topic)
    plans = {p.partition: plan_partition(topic, p.partition, segs.get(p.partition, []),
                                         states[p.partition].log_start_offset,
                                         logdirs.checkpointed_log_start_offset(p))
             for p in parts}
    check_root(storage, [s for plan in plans.values() for s in plan.remote], option)
    return plans


def list_commits(path, topic: str, *, filesystem_options: Mapping | None = None
                 ) -> list[Commit]:
    """The commits of ``topic`` a read may ask for (``as_of_commit``): write id, commit
    number, commit time and per-partition offset ranges, oldest first, from the topic's
    journal (its last :data:`~spark_kafkalog.log.files.journal.RETAIN_COMMITS`, fewer on a
    wide topic: :data:`~spark_kafkalog.log.files.journal.RETAIN_RANGES`). ``path``: as
    in :func:`read_table`. Empty for a topic no kafkalog writer wrote."""
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    return _commits_of(logdirs, topic)
