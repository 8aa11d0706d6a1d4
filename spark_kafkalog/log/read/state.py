"""A partition's offsets and bounds as a consumer would see them.

- log start offset: Kafka's rule, ``max(log-start-offset-checkpoint entry, first
  segment's base offset)``; records below it are gone even if still in the first segment;
- log end offset: after the last valid batch of the last non-empty segment, found from
  its offset index's last entry and a scan of the bytes after it (a torn tail is dropped,
  with a warning); an empty last segment (a fresh roll) puts it at that segment's base;
- high watermark: the ``replication-offset-checkpoint`` entry of the root holding the
  partition, clamped into [log start, log end]; the log end when there is no entry;
- last stable offset (read_committed only, see read/isolation.py);
- upper bound: what a consumer may read up to (exclusive): the high watermark, the last
  stable offset under read_committed, the log end with ``read_past_high_watermark``;
- our writer's journal (``<root>/.kafkalog.<topic>.journal``, read-only here), taken
  once per topic with the listing (snapshot.py): bytes of a write that began but never
  committed, or began after the snapshot, are past the log end a reader sees; a
  committed overwrite whose old segments are still on disk starts at its new log start.
  A reader never returns an unfinished write, nor one write in some partitions only.

Damage in the log does not move these offsets under ``skip`` or ``stop`` (they are found
by skipping over it); under ``fail`` it raises.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError, LogLayoutError
from spark_kafkalog.format import decode_run
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON, ATTR_TIMESTAMP_TYPE
from spark_kafkalog.log.io import map_io
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.log.model import LogSource, PartitionDir, PartitionState
from spark_kafkalog.log.read.isolation import last_stable_offset
from spark_kafkalog.log.read.scan import ReadStats, check_policy, scan_windows
from spark_kafkalog.log.read.seek import (
    locate,
    log_start_offset,
    offset_index,
    time_index_last,
)
from spark_kafkalog.log.read.snapshot import (
    SETTLE_TRIES,
    SNAPSHOT_ATTEMPTS,
    TopicSnapshot,
    check_as_of,
    listing_key,
    listing_settled,
    moved,
    topic_snapshot,
)
from spark_kafkalog.log.read.loss import checkpoint_losses
from spark_kafkalog.log.read.tails import small_tails
from spark_kafkalog.log.files.journal import journal_path

__all__ = ["PartitionState", "partition_state", "ISOLATION_LEVELS", "check_isolation",
           "log_end_offset", "log_tail", "topic_states", "latest_offsets"]

ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
_PROBE = 1 << 16
#: the wait before a listing is taken again (tests count the waits through it)
_pause = time.sleep


def check_isolation(level: str) -> str:
    if level not in ISOLATION_LEVELS:
        raise InvalidOptionError(f"isolation level must be read_uncommitted or read_committed, "
                                 f"not {level!r}")
    return level


def _tail(logdirs: LogSource, p: PartitionDir, on_corruption: str, stats: ReadStats,
          end: int | None = None) -> tuple[int, int | None]:
    """(log end offset, max timestamp of the scanned tail batches); ``end``: the
    snapshot's bound, where the scan may stop (bytes past it are a later write's)."""
    for i in range(len(p.segments) - 1, -1, -1):
        seg = p.segments[i]
        if seg.size == 0:
            if i == len(p.segments) - 1:
                # an empty active segment: the log ends at its base offset
                return seg.base_offset, None
            continue
        # a segment one probe reads whole is scanned from its start: opening its index
        # would cost more (a topic of thousands of small partitions pays it in each)
        idx = offset_index(logdirs, p, i) if seg.size > _PROBE else None
        pos, check = 0, None
        prev = None
        if idx is not None and len(idx):
            offset, pos = idx.last
            check = offset if pos > 0 else None
        last = None
        max_ts = None
        for w in scan_windows(logdirs.filesystem, p, segment_index=i, position=pos,
                              seek_check=check, on_corruption=on_corruption, stats=stats,
                              initial_window=_PROBE, prev_last_offset=prev,
                              end_offset=end):
            h = w.headers
            last = int(h["last_offset"][-1])
            data = ~_np(h, "is_control")
            ts = _np(h, "max_timestamp")[data]
            if len(ts):
                m = int(ts.max())
                max_ts = m if max_ts is None else max(max_ts, m)
        if last is not None:
            return last + 1, max_ts
        # nothing valid in this segment (all torn/damaged): the log ends before it
        return seg.base_offset, max_ts
    return (p.segments[0].base_offset if p.segments else 0), None


def log_tail(logdirs: LogSource, p: PartitionDir, *, on_corruption: str = "fail",
             stats: ReadStats | None = None) -> tuple[int, int | None]:
    """``(log end offset, max timestamp of the data batches the tail scan read)``: what
    :func:`partition_state` finds at the log's end, for a caller that also needs the log's
    own end (:func:`partition_state` may take it back as ``tail``)."""
    return _tail(logdirs, p, check_policy(on_corruption), stats or ReadStats())


def log_end_offset(logdirs: LogSource, p: PartitionDir, *, on_corruption: str = "fail",
                   stats: ReadStats | None = None) -> int:
    return log_tail(logdirs, p, on_corruption=on_corruption, stats=stats)[0]


def _first_timestamp(logdirs: LogSource, p: PartitionDir, start: int, end: int,
                     on_corruption: str, stats: ReadStats) -> int | None:
    if start >= end:
        return None
    i, pos, check = locate(logdirs, p, start)
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, position=pos,
                          seek_check=check, end_offset=end, on_corruption=on_corruption,
                          stats=stats, initial_window=_PROBE, quiet=True):
        h = w.headers
        ok = (~_np(h, "is_control") & (_np(h, "last_offset") >= start)
              & (_np(h, "record_count") != 0))
        rows = np.flatnonzero(ok)
        if len(rows):
            return _first_record_time(w, h, int(rows[0]), start)
    return None


def _first_record_time(w, h, r: int, start: int) -> int | None:
    """The timestamp a consumer sees on the first record at or after ``start`` of batch
    ``r``: its LogAppendTime (the batch's max timestamp), else the base timestamp +
    delta, decoded when the base is a delete horizon (bit 6) or ``start`` is inside
    the batch; the base timestamp otherwise (the first record's, as producers write)."""
    attrs = int(h["attributes"][r])
    if attrs & ATTR_TIMESTAMP_TYPE:
        ts = int(h["max_timestamp"][r])
    elif attrs & ATTR_DELETE_HORIZON or int(h["base_offset"][r]) < start:
        at = int(h["position"][r]) - w.position
        try:
            rb = decode_run(memoryview(w.data)[at:at + int(h["size"][r])],
                            verify_crc=False, include_headers=False, start_offset=start,
                            position_base=int(h["position"][r]))
        except KafkaLogError:
            # a payload that does not decode is verify's to report, not the state's
            ts = -1 if attrs & ATTR_DELETE_HORIZON else int(h["first_timestamp"][r])
            return ts if ts >= 0 else None
        if not rb.num_rows:
            return None
        ts = rb.column(rb.schema.get_field_index("timestamp")).cast(pa.int64())[0].as_py()
        ts = None if ts is None else ts // 1000
    else:
        ts = int(h["first_timestamp"][r])
    return ts if ts is not None and ts >= 0 else None


def _max_timestamp(logdirs: LogSource, p: PartitionDir, tail_max: int | None,
                   on_corruption: str, stats: ReadStats,
                   time_lasts: Mapping[int, tuple[int, int] | None]) -> int | None:
    best = tail_max
    n = len(p.segments)
    for i, seg in enumerate(p.segments):
        if seg.size == 0:
            continue
        last = time_lasts[i] if i in time_lasts else time_index_last(logdirs, p, i)
        if last is not None:
            best = last[0] if best is None else max(best, last[0])
            continue
        if i == n - 1 and tail_max is not None and seg.index_path is None:
            continue            # the tail scan already covered the whole active segment
        # no usable time index: read this segment's batch headers
        for w in scan_windows(logdirs.filesystem, p, segment_index=i, one_segment=True,
                              on_corruption=on_corruption, stats=stats, quiet=True):
            h = w.headers
            ts = _np(h, "max_timestamp")[~_np(h, "is_control")]
            if len(ts):
                best = int(ts.max()) if best is None else max(best, int(ts.max()))
    return best if best is None or best >= 0 else None


def _bounded(logdirs: LogSource, p: PartitionDir, snapshot: TopicSnapshot
             ) -> tuple[int, int | None, int | None, PartitionDir]:
    """``(log start offset, the snapshot's end or None, checkpointed high watermark,
    p with only the segments the snapshot holds)``."""
    start = log_start_offset(logdirs, p)
    bound = snapshot.bound(p.partition)
    end = None
    ckpt_hw = logdirs.checkpointed_high_watermark(p)
    if bound is not None:
        start = max(start, bound.log_start)
        end = bound.end
        if end is not None and not bound.hard and ckpt_hw is not None:
            end = max(end, ckpt_hw)     # a broker appended after the last commit
        if end is not None:
            # segments a later (or unfinished) write created hold nothing of the
            # snapshot: leave them out, so bytes past it are a torn tail at worst
            p = replace(p, segments=tuple(s for s in p.segments
                                          if s.base_offset < end) or p.segments[:1])
    return start, end, ckpt_hw, p


def partition_state(logdirs: LogSource, p: PartitionDir, *,
                    isolation_level: str = "read_uncommitted",
                    read_past_high_watermark: bool = False, on_corruption: str = "fail",
                    window_bytes: int | None = None, stats: ReadStats | None = None,
                    timestamps: bool = True, snapshot=None,
                    tail: tuple[int, int | None] | None = None,
                    bounded: tuple | None = None,
                    bounded_tail: tuple[int, int | None] | None = None,
                    time_lasts: Mapping[int, tuple[int, int] | None] | None = None
                    ) -> PartitionState:
    """Offsets of partition ``p`` (see the module docstring). Reads the root
    checkpoints, the index files and a few windows of ``.log`` bytes (the last segment's
    tail, the first data batch); under read_committed also the producer snapshot and the
    batch headers from it to the high watermark (the whole log without a snapshot).
    ``timestamps=False`` skips ``first_timestamp``/``max_timestamp`` (None), which cost
    a read of every segment's time index: planning does not need them. ``snapshot``: the
    :class:`~spark_kafkalog.log.read.snapshot.TopicSnapshot` bounding the partition (default:
    the one ``logdirs`` took with its listing of the topic). What a caller already read
    of the same listing is not read again: ``tail``, :func:`log_tail` under the same
    ``on_corruption`` (used when the snapshot bounds nothing, else the bounded tail is
    scanned); ``bounded``, what ``_bounded`` returns for ``p`` and ``snapshot``;
    ``bounded_tail``, what the bounded scan returns (:func:`topic_states` finds many at
    once, :mod:`.tails`); ``time_lasts``, segment number -> what
    :func:`~spark_kafkalog.log.read.seek.time_index_last` returns for it."""
    check_isolation(isolation_level)
    # Offsets are those of the undamaged log: "stop" ends a read at damage, but where the
    # log ends and which transactions are decided is found by skipping over it.
    on_corruption = "fail" if check_policy(on_corruption) == "fail" else "skip"
    stats = stats if stats is not None else ReadStats()
    if bounded is None:
        if snapshot is None:
            snapshot = topic_snapshot(logdirs, p.topic)
        bounded = _bounded(logdirs, p, snapshot)
    start, end, ckpt_hw, p = bounded
    if bounded_tail is not None:
        tail = bounded_tail
    elif tail is None or end is not None:
        tail = _tail(logdirs, p, on_corruption, stats, end)
    leo, tail_max = tail
    losses = _losses(logdirs, p, snapshot, leo, start)
    # a log start checkpointed past the data (everything deleted) leaves an empty log
    leo_eff = max(leo, start)
    if end is not None:
        leo_eff = max(min(leo_eff, end), start)
    if end is not None or ckpt_hw is None:
        # the journal's commit is the commit point: the checkpoint lags it
        hw = leo_eff
    else:
        hw = max(min(ckpt_hw, leo_eff), start)
    limit = leo_eff if read_past_high_watermark else hw
    lso_known = isolation_level == "read_committed"
    if lso_known:
        lso = last_stable_offset(logdirs, p, log_start_offset=start, limit=limit,
                                 on_corruption=on_corruption,
                                 window_bytes=window_bytes or (16 << 20), stats=stats)
        upper = lso
    else:
        lso = hw
        upper = limit
    return PartitionState(
        topic=p.topic, partition=p.partition, log_start_offset=start, high_watermark=hw,
        log_end_offset=leo_eff, last_stable_offset=lso, upper_bound=upper,
        first_timestamp=_first_timestamp(logdirs, p, start, leo_eff, on_corruption, stats)
        if timestamps else None,
        max_timestamp=_max_timestamp(logdirs, p, tail_max, on_corruption, stats,
                                     time_lasts or {})
        if timestamps else None,
        size_bytes=p.size_bytes, segments=len(p.segments), last_stable_offset_known=lso_known,
        losses=losses)


def _losses(logdirs: LogSource, p: PartitionDir, snapshot, leo: int, start: int) -> tuple:
    """What the checkpoints and the journal promise past ``leo`` (loss.py). An as-of
    read ends at an older commit on purpose: its checkpoints are later than it."""
    if snapshot is not None and snapshot.as_of:
        return ()
    bound = snapshot.bound(p.partition) if snapshot is not None else None
    # a write in flight bounds the read at its first offset (hard): a bound, no promise
    journal_end = bound.end if bound is not None and not bound.hard else None
    if journal_end is not None and _finishing(logdirs, p):
        journal_end = None      # committed, its files still moving in: recovery finishes it
    return checkpoint_losses(logdirs, p, leo, journal_end=journal_end,
                             journal_path=journal_path(p.root, p.topic), log_start=start)


def _finishing(logdirs: LogSource, p: PartitionDir) -> bool:
    """Whether a write past its commit point is still being applied to ``p`` (its
    journal's pending write is decided and names the partition): what it committed may
    not be in place yet, and the next open rolls it forward, so it is not lost."""
    journals = getattr(logdirs, "journals", None)
    if journals is None:
        return False
    try:
        j = journals(p.topic)
    except KafkaLogError:
        return False
    st = j.states.get(p.root)
    return bool(st is not None and st.pending is not None and j.decided.get(p.root)
                and p.partition in st.pending.partitions)


def topic_states(logdirs, topic: str, partitions: Iterable[int] | None = None, *,
                 as_of_commit=None, as_of_timestamp: int | None = None, **state_kwargs
                 ) -> tuple[TopicSnapshot, list, dict]:
    """``(snapshot, partition dirs, {partition: PartitionState})`` of ``topic`` (or of
    the given partition numbers) at one snapshot. Keywords go to
    :func:`partition_state`. The partition dirs are those
    listed with the snapshot: read them, not dirs listed before. When a partition's
    files end below what its journal committed, or a listed segment is gone (segments
    deleted under the read), the snapshot is taken again, up to
    :data:`SNAPSHOT_ATTEMPTS` times."""
    wanted = None if partitions is None else set(int(q) for q in partitions)
    settle = 0
    previous = None                 # the listing before, for listing_settled
    attempt = -1
    while attempt < SNAPSHOT_ATTEMPTS - 1:
        attempt += 1
        snap = topic_snapshot(logdirs, topic, as_of_commit=as_of_commit,
                              as_of_timestamp=as_of_timestamp)
        latest = topic_snapshot(logdirs, topic) if snap.as_of else snap
        try:
            if wanted is None:
                parts = logdirs.partitions(topic)
            else:       # list only the wanted partitions' dirs
                parts = map_io(logdirs.filesystem, lambda q: logdirs.partition(topic, q),
                               sorted(wanted & set(logdirs.partition_roots(topic))))
        except LogLayoutError as err:
            # a file the listing saw (a compaction's .swap) was renamed before it was read
            if settle >= SETTLE_TRIES or not isinstance(err.__cause__, FileNotFoundError):
                raise
            parts = None
        if settle < SETTLE_TRIES and (parts is None or not listing_settled(
                logdirs, topic, parts, previous)):
            # a compaction renamed segment files while they were listed: list again
            previous = None if parts is None else listing_key(logdirs, topic, parts)
            settle += 1
            attempt -= 1
            logdirs.forget(topic)
            _pause(0.002 * settle)
            continue
        try:
            # the tails of small local segments all at once; the rest one by one
            bounds = [_bounded(logdirs, p, snap) for p in parts]
            tails = small_tails(logdirs.filesystem, [b[3] for b in bounds], _PROBE,
                                state_kwargs.get("stats"))
            states = dict(zip([p.partition for p in parts], map_io(
                logdirs.filesystem,
                lambda pbt: partition_state(logdirs, pbt[0], snapshot=snap,
                                            bounded=pbt[1], bounded_tail=pbt[2],
                                            **state_kwargs),
                list(zip(parts, bounds, tails)))))
        except LogLayoutError as err:
            # a segment listed with the snapshot is gone: deleted under the read
            if (attempt == SNAPSHOT_ATTEMPTS - 1
                    or not isinstance(err.__cause__, FileNotFoundError)):
                raise
            logdirs.forget(topic)
            continue
        changed = any(moved(latest, p.partition, states[p.partition]) for p in parts)
        if not changed or attempt == SNAPSHOT_ATTEMPTS - 1:
            break
        logdirs.forget(topic)
    if snap.as_of:
        for p in parts:
            check_as_of(snap, logdirs, p, states[p.partition])
    return snap, parts, states


def latest_offsets(logdirs, topics: Iterable[str], *,
                   isolation_level: str = "read_uncommitted",
                   read_past_high_watermark: bool = False, on_corruption: str = "fail"
                   ) -> dict[str, dict[int, int]]:
    """``{topic: {partition: upper bound}}`` (the next offset a consumer could read to:
    high watermark, last stable offset under read_committed), each topic at one snapshot:
    what a stream reader's ``latestOffset`` reports. Pass a fresh :class:`LogDirs` (or
    call ``logdirs.forget(topic)``) for each poll: a ``LogDirs`` keeps its view."""
    out = {}
    for t in topics:
        _, _, states = topic_states(logdirs, t, isolation_level=isolation_level,
                                    read_past_high_watermark=read_past_high_watermark,
                                    on_corruption=on_corruption, timestamps=False)
        out[t] = {q: s.upper_bound for q, s in sorted(states.items())}
    return out

