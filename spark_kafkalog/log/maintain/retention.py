"""Retention offline: whole segments deleted by ``retention.ms`` and ``retention.bytes``,
as a broker's log manager decides them (Kafka's ``UnifiedLog.deleteOldSegments``).

Deciding (:func:`deletable_segments`, no I/O): three passes in the broker's order over
the segments, oldest first, each ending at the first segment that does not qualify:

1. log start: a segment whose next segment starts at or below the log start offset;
2. ``retention.bytes`` (when >= 0 and the log's size is at least it): a segment goes
   while the log's size, minus what already went, minus the segment stays >= it;
3. ``retention.ms`` (when >= 0): a segment goes when ``now - its largest timestamp >
   retention.ms``.

A segment qualifies only when the high watermark is at or past its end (the next
segment's base offset). The last (active) segment never goes: a broker rolls a new empty
segment to delete it once every segment has expired; offline nothing rolls.
A segment's largest timestamp is its time index's last entry (what a restarted broker
reads), else the largest batch ``max_timestamp`` in it, else (no timestamps at all) the
``.log`` file's modification time, as Kafka's ``LogSegment.largestTimestamp``.

Applying (:func:`apply_retention`), per log dir root, under the broker-dir guard and the
topic's writer lock, after finishing what a dead writer left:

1. the ``log-start-offset-checkpoint`` moves to the first kept segment's base offset:
   one atomic file write, the commit point (a read now starts there);
2. each partition's ``leader-epoch-checkpoint`` is truncated from the start at its
   checkpointed log start (Kafka's ``LeaderEpochFileCache.truncateFromStart``, which a
   broker also redoes from the checkpoint when it loads a log), one atomic write each;
3. each deleted segment's files (its producer snapshot, indexes, ``.log``) are renamed
   to ``.deleted``, as a broker does: a reader whose snapshot still holds the segment
   reads it there (:mod:`spark_kafkalog.log.io.deleted`);
4. ``file.delete.delay.ms`` later the ``.deleted`` files are removed
   (:func:`purge_deleted`).

A kill before 1 leaves the old log, after it the new one: segments below the log start
are invisible to a read, and the next run finishes what the dead one left (step 2 from
the checkpoint, as a broker's log loader does; the log-start pass renames the segments).

:func:`expired_on_start` tells, for a restored log, what a broker that starts serving it
deletes at its first retention check (it leads every partition: its high watermark is
the log end, and it rolls the active segment to delete it).
"""
from __future__ import annotations

import posixpath
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.log.files.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    leader_epochs_at,
    read_checkpoint,
    truncate_leader_epochs,
    write_checkpoint,
)
from spark_kafkalog.log.io import (
    FILE_DELETE_DELAY_MS,
    file_size,
    purge_deleted_files,
    rename_for_deletion,
)
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.scan import scan_windows
from spark_kafkalog.log.read.seek import time_index_last
from spark_kafkalog.log.read.state import topic_states
from spark_kafkalog.log.write.config import Fault, no_fault, norm_root, segment_file
from spark_kafkalog.log.files.lock import (
    DEFAULT_LOCK_TIMEOUT_S,
    BrokerDirGuard,
    CheckpointLock,
    TopicLock,
)
from spark_kafkalog.log.write.recovery import recover_locked
from spark_kafkalog.log.write.replace import SEGMENT_SUFFIXES

__all__ = ["RetentionConfig", "SegmentFacts", "PartitionRetention", "deletable_segments",
           "plan_retention", "apply_retention", "purge_deleted", "expired_on_start",
           "DEFAULT_RETENTION_MS",
           "DEFAULT_FILE_DELETE_DELAY_MS"]

#: Kafka's defaults: retention.ms 7 days, retention.bytes -1, file.delete.delay.ms 60 s
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
DEFAULT_FILE_DELETE_DELAY_MS = FILE_DELETE_DELAY_MS

LOG_START, BY_BYTES, BY_TIME = "log-start", "retention.bytes", "retention.ms"


@dataclass(frozen=True)
class RetentionConfig:
    """A topic's retention settings, named as Kafka's topic configs; -1 disables a
    limit."""
    retention_ms: int = DEFAULT_RETENTION_MS
    retention_bytes: int = -1
    file_delete_delay_ms: int = DEFAULT_FILE_DELETE_DELAY_MS

    def __post_init__(self):
        for name in ("retention_ms", "retention_bytes", "file_delete_delay_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise InvalidOptionError(f"{name.replace('_', '.')}: {v!r} is not an integer")
            low = 0 if name == "file_delete_delay_ms" else -1
            if v < low:
                raise InvalidOptionError(f"{name.replace('_', '.')}: {v} is below {low}"
                                         + (" (-1 disables it)" if low == -1 else ""))

    @classmethod
    def from_mapping(cls, doc: Mapping, base: "RetentionConfig | None" = None
                     ) -> "RetentionConfig":
        """Settings from Kafka's config names (``retention.ms``, ``retention.bytes``,
        ``file.delete.delay.ms``) over ``base``; an unknown name is an error."""
        known = {"retention.ms": "retention_ms", "retention.bytes": "retention_bytes",
                 "file.delete.delay.ms": "file_delete_delay_ms"}
        unknown = sorted(set(doc) - set(known))
        if unknown:
            raise InvalidOptionError(f"unknown retention setting {unknown[0]!r} (known: "
                                     f"{', '.join(known)})")
        values = asdict(base or cls())
        for k, v in doc.items():
            try:
                values[known[k]] = int(v)
            except (TypeError, ValueError):
                raise InvalidOptionError(f"{k}: {v!r} is not an integer") from None
        return cls(**values)


@dataclass(frozen=True)
class SegmentFacts:
    """What retention looks at in one segment."""
    base_offset: int
    size: int
    largest_timestamp: int | None       # None: not needed (the active segment)


def deletable_segments(segments: Sequence[SegmentFacts], *, log_start: int,
                       high_watermark: int, retention_ms: int, retention_bytes: int,
                       now_ms: int, largest_timestamp: Callable[[int], int] | None = None
                       ) -> list[tuple[int, str]]:
    """``[(index in segments, reason)]`` of the segments a broker's retention deletes,
    oldest first (see the module docstring); ``segments`` in offset order, the last one
    active. Reasons: ``log-start``, ``retention.bytes``, ``retention.ms``.
    ``largest_timestamp(i)``, when given, is asked instead of the facts' field (so a
    caller reads timestamps only of the segments the time pass reaches)."""
    stamp = largest_timestamp or (lambda i: segments[i].largest_timestamp)
    out: list[tuple[int, str]] = []
    n = len(segments)
    first = 0
    size = sum(s.size for s in segments)

    def run(qualifies: Callable[[int], bool], reason: str) -> None:
        nonlocal first, size
        i = first
        while i < n - 1 and high_watermark >= segments[i + 1].base_offset and qualifies(i):
            out.append((i, reason))
            size -= segments[i].size
            i += 1
        first = i

    run(lambda i: segments[i + 1].base_offset <= log_start, LOG_START)
    if retention_bytes >= 0 and size >= retention_bytes:
        left = size - retention_bytes

        def over(i: int) -> bool:
            nonlocal left
            if left - segments[i].size < 0:
                return False
            left -= segments[i].size
            return True
        run(over, BY_BYTES)
    if retention_ms >= 0:
        run(lambda i: now_ms - stamp(i) > retention_ms, BY_TIME)
    return out


@dataclass
class PartitionRetention:
    """Retention's plan (and, once applied, its result) for one partition."""
    topic: str
    partition: int
    root: str
    path: str
    log_start: int
    new_log_start: int
    high_watermark: int
    log_end: int
    size_bytes: int
    segments: int
    deleted: list = field(default_factory=list)     # [{base_offset, size, ..., reason}]
    #: the leader-epoch-checkpoint's entries from ``new_log_start`` on (None: no file)
    leader_epochs: list | None = None

    @property
    def deleted_bytes(self) -> int:
        return sum(d["size"] for d in self.deleted)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["deleted_bytes"] = self.deleted_bytes
        return d


def _largest_timestamp(logdirs: LogDirs, p: PartitionDir, i: int) -> int:
    last = time_index_last(logdirs, p, i)
    if last is not None and last[0] >= 0:
        return last[0]
    best = -1
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, one_segment=True,
                          quiet=True):
        ts = _np(w.headers, "max_timestamp")
        if len(ts):
            best = max(best, int(ts.max()))
    if best >= 0:
        return best
    mtime = logdirs.filesystem.get_file_info(p.segments[i].path).mtime
    return int(mtime.timestamp() * 1000) if mtime is not None else 0


def _plan_partition(logdirs: LogDirs, p: PartitionDir, state, cfg: RetentionConfig,
                    now_ms: int) -> PartitionRetention:
    segs = p.segments
    cache: dict[int, int] = {}

    def stamp(i: int) -> int:          # read only for the segments the time pass reaches
        if i not in cache:
            cache[i] = _largest_timestamp(logdirs, p, i)
        return cache[i]
    chosen = deletable_segments([SegmentFacts(s.base_offset, s.size, None) for s in segs],
                                log_start=state.log_start_offset,
                                high_watermark=state.high_watermark,
                                retention_ms=cfg.retention_ms,
                                retention_bytes=cfg.retention_bytes, now_ms=now_ms,
                                largest_timestamp=stamp)
    deleted = [{"base_offset": segs[i].base_offset, "next_offset": segs[i + 1].base_offset,
                "size": segs[i].size, "largest_timestamp": cache.get(i), "reason": why,
                "path": segs[i].path} for i, why in chosen]
    new_start = state.log_start_offset
    if deleted:
        new_start = max(new_start, deleted[-1]["next_offset"])
    epochs = leader_epochs_at(logdirs.filesystem, p.path, new_start)
    return PartitionRetention(p.topic, p.partition, p.root, p.path, state.log_start_offset,
                              new_start, state.high_watermark, state.log_end_offset,
                              p.size_bytes, len(segs), deleted,
                              # checked here, before anything changes
                              None if epochs is None else [list(e) for e in epochs[1]])


def plan_retention(logdirs: LogDirs, topic: str, config: RetentionConfig, *,
                   now_ms: int | None = None) -> list[PartitionRetention]:
    """What retention would delete in ``topic`` (every partition, every root of
    ``logdirs``) at ``now_ms`` (default: now). Reads only."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    logdirs.forget(topic)
    _, parts, states = topic_states(logdirs, topic, timestamps=False)
    return [_plan_partition(logdirs, p, states[p.partition], config, now_ms) for p in parts]


def expired_on_start(logdirs: LogDirs, topic: str, retention_ms: int, *,
                     now_ms: int | None = None) -> list[PartitionRetention]:
    """The segments of ``topic`` that ``retention.ms`` deletes once a broker serves the
    log (``deleted`` entries with reason ``retention.ms``; partitions with none are left
    out). Unlike :func:`plan_retention` (offline, nothing rolls), the active segment goes
    too when it expired: a leader's high watermark reaches its log end and Kafka's
    ``UnifiedLog.deleteSegments`` rolls a new segment to delete the last one. Reads
    only; -1 (no time limit) finds nothing."""
    if retention_ms < 0:
        return []
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    logdirs.forget(topic)
    _, parts, states = topic_states(logdirs, topic, timestamps=False)
    out = []
    for p in parts:
        st, segs = states[p.partition], p.segments
        stamps: dict[int, int] = {}

        def stamp(i: int, p=p, stamps=stamps) -> int:
            if i not in stamps:
                stamps[i] = _largest_timestamp(logdirs, p, i)
            return stamps[i]
        # the segment a broker rolls: what lets the last real one go
        facts = [SegmentFacts(s.base_offset, s.size, None) for s in segs] + \
            [SegmentFacts(st.log_end_offset, 0, None)]
        chosen = [i for i, why in deletable_segments(
            facts, log_start=st.log_start_offset, high_watermark=st.log_end_offset,
            retention_ms=retention_ms, retention_bytes=-1, now_ms=now_ms,
            largest_timestamp=stamp) if why == BY_TIME and segs[i].size]
        if not chosen:
            continue
        deleted = [{"base_offset": segs[i].base_offset, "next_offset": facts[i + 1].base_offset,
                    "size": segs[i].size, "largest_timestamp": stamps[i], "reason": BY_TIME,
                    "path": segs[i].path} for i in chosen]
        out.append(PartitionRetention(p.topic, p.partition, p.root, p.path,
                                      st.log_start_offset, deleted[-1]["next_offset"],
                                      st.log_end_offset, st.log_end_offset, p.size_bytes,
                                      len(segs), deleted))
    return out


# ---- applying ----------------------------------------------------------------------------
def _advance_log_start(fs: pafs.FileSystem, root: str, topic: str,
                       plans: list[PartitionRetention]) -> None:
    path = f"{root}/{LOG_START_OFFSET_CHECKPOINT}"
    with CheckpointLock(fs, root):
        current = read_checkpoint(fs, path) if file_size(fs, path) is not None else {}
        merged = dict(current)
        for pr in plans:
            key = (topic, pr.partition)
            merged[key] = max(int(current.get(key, 0)), pr.new_log_start)
        if merged != current:
            write_checkpoint(fs, path, merged)


def _truncate_leader_epochs(fs: pafs.FileSystem, root: str, topic: str,
                            plans: list[PartitionRetention], fault: Fault) -> None:
    """Step 2, idempotent: each partition's leader epochs truncated from the start at the
    log start the root's checkpoint holds (this run's, or one a dead run or a broker
    left), written only when that changes them."""
    starts = read_checkpoint(fs, f"{root}/{LOG_START_OFFSET_CHECKPOINT}")
    for pr in plans:
        start = starts.get((topic, pr.partition))
        if start is not None and truncate_leader_epochs(fs, pr.path, start):
            fault(f"epochs:{pr.partition}")


def _rename_segments(fs: pafs.FileSystem, pr: PartitionRetention, fault: Fault) -> None:
    """Each deleted segment's producer snapshot, then its files (``.log`` last)."""
    paths = [segment_file(pr.path, d["base_offset"], suffix)
             for d in pr.deleted for suffix in (".snapshot",) + SEGMENT_SUFFIXES]
    rename_for_deletion(fs, paths, after=lambda path: fault(
        f"renamed:{pr.partition}:{posixpath.basename(path)}"))


def _roots_of(logdirs: LogDirs, topic: str) -> list[str]:
    return sorted({p.root for p in logdirs.partitions(topic)})


def apply_retention(logdirs: LogDirs, topic: str, config: RetentionConfig, *,
                    now_ms: int | None = None, dry_run: bool = False,
                    lock_timeout: float = DEFAULT_LOCK_TIMEOUT_S,
                    fault: Fault | None = None) -> list[PartitionRetention]:
    """Apply retention to ``topic`` (see the module docstring) and return what went, per
    partition. ``dry_run``: plan only, no lock, nothing written. The ``.deleted`` files
    stay for :func:`purge_deleted`. Raises :class:`~spark_kafkalog.errors.LockError` when
    a running broker holds a root, or a writer holds the topic past ``lock_timeout``."""
    fault = fault or no_fault
    if dry_run:
        return plan_retention(logdirs, topic, config, now_ms=now_ms)
    fs = logdirs.filesystem
    out: list[PartitionRetention] = []
    for root in _roots_of(logdirs, topic):
        root = norm_root(root)
        with BrokerDirGuard(fs, root), TopicLock(fs, root, topic, timeout=lock_timeout,
                                                 write_id=f"retention:{uuid.uuid4().hex}"):
            recover_locked(fs, root, topic, no_fault)
            plans = [pr for pr in plan_retention(logdirs, topic, config, now_ms=now_ms)
                     if pr.root == root]
            fault("planned")
            changed = any(pr.new_log_start > pr.log_start or pr.deleted for pr in plans)
            if changed:
                _advance_log_start(fs, root, topic, plans)
                fault("checkpointed")
            _truncate_leader_epochs(fs, root, topic, plans, fault)
            if changed:
                for pr in plans:
                    _rename_segments(fs, pr, fault)
                fault("renamed")
            out.extend(plans)
        logdirs.forget(topic)
    return out


def purge_deleted(logdirs: LogDirs, topic: str, *, delay_ms: int,
                  now_ms: int | None = None, fault: Fault | None = None
                  ) -> tuple[int, int, int]:
    """Remove the topic's ``.deleted`` segment files renamed at least ``delay_ms`` ago
    (by their modification time, which the rename set). Returns ``(files removed, bytes
    removed, files left for later)``."""
    fault = fault or no_fault
    total = (0, 0, 0)
    logdirs.forget(topic)
    for p in logdirs.partitions(topic):
        got = purge_deleted_files(logdirs.filesystem, p.path, delay_ms, now_ms,
                                  after=lambda name: fault(f"purged:{name}"))
        total = tuple(a + b for a, b in zip(total, got))
    return total
