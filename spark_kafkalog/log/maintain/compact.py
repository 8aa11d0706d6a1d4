"""Offline log compaction: Kafka's cleaner over a partition at rest, landed through the
journal (:mod:`spark_kafkalog.log.write.replace`).

:func:`compact_partition` (what one Spark task runs) reads a partition in three passes
of bounded windows -- batch headers (transactions, producers, what may be cleaned), the
offset map (:class:`~.cleaner.OffsetMap`), then each group of segments rewritten into
``<base>.log.cleaned`` with its indexes (:mod:`.cleaned_segment`) -- and returns a small
picklable :class:`PartitionCompaction`. :class:`Compaction` is the driver side: locks, recovery,
the journal's begin and commit, the swap. :func:`compact_topic` runs both in-process.

What is cleaned (``LogCleanerManager.cleanableOffsets``): whole segments below the
first uncleanable offset -- the active segment's base, the last stable offset (the
checkpointed high watermark, or the first offset of a transaction still open or decided
by a marker at or above it), ``upto``, and the first segment
whose largest timestamp is newer than ``now - min_compaction_lag_ms``; only when the
dirty ratio (bytes past the ``cleaner-offset-checkpoint`` over all cleanable bytes)
exceeds ``min_cleanable_dirty_ratio`` (or ``force``), or dirty data is older than
``max_compaction_lag_ms`` (:func:`~.cleaner.compaction_delay`, KIP-354). Segments are
regrouped as ``Cleaner.groupSegmentsBySize`` does. The offset map covers the whole cleanable range
(Kafka's covers the dirty part; on a log a broker cleaned the results are equal).
Legacy (v0/v1) message sets are refused, before any work (:func:`check_compactable`):
Kafka's cleaner keeps their magic and rewrites compressed wrappers, which this module
does not do; copying the topic to v2 batches first (``copy_topic``) makes it compactable.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError, UnsupportedFormatError
from spark_kafkalog.format import decode_run
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
)
from spark_kafkalog.log.files.index import DEFAULT_MAX_INDEX_BYTES
from spark_kafkalog.log.io import file_size
from spark_kafkalog.log.maintain.cleaned_segment import GroupWriter, clean_window, empty_of
from spark_kafkalog.log.maintain.cleaner import (
    OffsetMap,
    batch_decisions,
    compaction_delay,
    first_too_young,
    first_unstable_offset,
    scan_transactions,
)
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.discovery import list_segments
from spark_kafkalog.log.read.scan import scan_windows
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.config import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    Fault,
    no_fault,
    norm_root,
    partition_dir,
)
from spark_kafkalog.log.write.files import listdir, topic_partitions
from spark_kafkalog.log.write.flush import fsync_dir
from spark_kafkalog.log.files.lock import DEFAULT_LOCK_TIMEOUT_S, BrokerDirGuard, TopicLock
from spark_kafkalog.log.write.recovery import recover_locked
from spark_kafkalog.log.write.replace import (
    begin_replace,
    check_replace_fs,
    cleaned_path,
    commit_replace,
    discard_cleaned,
    post_replace,
)

__all__ = ["CompactSettings", "PartitionCompaction", "Compaction", "compact_partition",
           "compact_topic", "check_compactable"]

_WINDOW_BYTES = 16 << 20
_HEADER_COLS = ("position", "size", "magic", "attributes", "base_offset", "last_offset",
                "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
                "base_sequence", "record_count", "partition_leader_epoch",
                "is_transactional", "is_control", "control_type")


#: Kafka's default max.compaction.lag.ms (Long.MAX_VALUE): no log is ever forced
MAX_COMPACTION_LAG_MS = 2 ** 63 - 1


@dataclass(frozen=True)
class CompactSettings:
    """A topic's cleaner settings, named as Kafka's topic configs (ms, bytes)."""
    delete_retention_ms: int = 86_400_000               # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5              # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0                      # min.compaction.lag.ms
    max_compaction_lag_ms: int = MAX_COMPACTION_LAG_MS  # max.compaction.lag.ms
    segment_bytes: int = DEFAULT_SEGMENT_BYTES          # segment.bytes
    max_index_bytes: int = DEFAULT_MAX_INDEX_BYTES      # segment.index.bytes
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES  # index.interval.bytes
    upto: int | None = None           # clean no segment reaching this offset
    force: bool = False               # clean whatever the dirty ratio

    def __post_init__(self):
        for name in ("delete_retention_ms", "min_compaction_lag_ms"):
            if getattr(self, name) < 0:
                raise InvalidOptionError(f"{name} must be >= 0")
        if not 1 <= self.max_compaction_lag_ms <= MAX_COMPACTION_LAG_MS:
            raise InvalidOptionError("max_compaction_lag_ms must be in [1, 2**63 - 1]")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:  # Kafka's LogConfig too
            raise InvalidOptionError(
                f"min_compaction_lag_ms ({self.min_compaction_lag_ms}) is above "
                f"max_compaction_lag_ms ({self.max_compaction_lag_ms})")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidOptionError("min_cleanable_dirty_ratio must be in [0, 1]")
        if self.segment_bytes < 14 or self.max_index_bytes < 8:
            raise InvalidOptionError("segment_bytes / max_index_bytes are too small")
        if self.upto is not None and self.upto < 0:
            raise InvalidOptionError("upto must be a non-negative offset")


@dataclass
class PartitionCompaction:
    """What compacting one partition did (or would do). ``groups``: ``[[new base, [old
    bases]], ...]`` whose ``.cleaned`` files were written (with ``fingerprints[new base]``
    = ``[size, sha256]`` of each new ``.log``; a segment the cleaning left as it was but
    that lies between two new ones is a group too, its ``.cleaned`` files hard links to
    its own, so that the swap replaces one contiguous range); ``skipped``: why nothing was
    cleaned (None when something was); ``compaction_delay_ms``: how long past
    ``max.compaction.lag.ms`` its oldest dirty data is (> 0: it must be compacted now)."""
    topic: str
    partition: int
    skipped: str | None = None
    cleaned_to: int | None = None
    dirty_ratio: float = 0.0
    compaction_delay_ms: int = 0
    groups: list = field(default_factory=list)
    fingerprints: dict = field(default_factory=dict)
    records_before: int = 0
    records_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    batches_before: int = 0
    batches_after: int = 0
    keys: int = 0
    tombstones_removed: int = 0
    aborted_removed: int = 0
    keyless_removed: int = 0
    markers_removed: int = 0


# ---- pass 1: headers ------------------------------------------------------------------------
def _headers(fs: pafs.FileSystem, p: PartitionDir) -> dict:
    cols: dict[str, list] = {c: [] for c in _HEADER_COLS}
    seg = []
    for w in scan_windows(fs, p, on_corruption="fail", window_bytes=_WINDOW_BYTES):
        for c in _HEADER_COLS:
            cols[c].append(_np(w.headers, c))
        seg.append(np.full(len(w.headers), w.segment_index, dtype=np.int64))
    out = {c: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64))
           for c, v in cols.items()}
    out["segment"] = np.concatenate(seg) if seg else np.zeros(0, dtype=np.int64)
    for c in ("is_transactional", "is_control"):
        out[c] = out[c].astype(bool)
    for c in ("attributes", "record_count", "control_type", "magic", "producer_epoch"):
        out[c] = out[c].astype(np.int64)
    return out


def _legacy_error(topic: str, partition: int, magic: int, path: str, position: int,
                  offset: int) -> UnsupportedFormatError:
    return UnsupportedFormatError(
        f"topic {topic!r} partition {partition}: compaction of legacy (magic {magic}) "
        "message sets is not supported (Kafka's cleaner keeps their magic and rewrites "
        "compressed wrappers; this one does not): copy the topic to v2 batches first "
        "(copy_topic), then compact the copy", path=path, position=position, offset=offset)


def check_compactable(root: str, topic: str, partitions: Iterable[int] | None = None) -> None:
    """Refuse, before any work, a topic whose closed segments (those a compaction can
    clean; of ``partitions`` only, when given) begin with a legacy (v0/v1) message set:
    raises :class:`UnsupportedFormatError` naming the partition, the magic, the segment,
    position and offset. Reads the first 17 bytes of each segment (offset, length,
    magic): a broker upgraded to v2 writes v2 from then on, so a legacy log shows in its
    segments' first batches; a legacy batch after a v2 one in a segment (a downgraded
    ``message.format.version``) is refused by :func:`compact_partition` itself."""
    root = norm_root(root)
    fs = pafs.LocalFileSystem()
    parts = topic_partitions(fs, root, topic)
    if partitions is not None:          # those of the topic (a missing one is named later)
        parts = sorted(set(parts) & {int(x) for x in partitions})
    for q in parts:
        segs = list_segments(fs, partition_dir(root, topic, q), resolve_swaps=False)[0]
        for seg in segs[:-1]:
            with open(seg.path, "rb") as f:
                head = os.pread(f.fileno(), 17, 0)
            if len(head) == 17 and head[16] < 2:
                raise _legacy_error(topic, q, head[16], seg.path, 0,
                                    int.from_bytes(head[:8], "big", signed=True))


def _root_checkpoint(fs, root: str, name: str, topic: str, partition: int) -> int | None:
    path = f"{root}/{name}"
    if file_size(fs, path) is None:
        return None
    return read_checkpoint(fs, path).get((topic, partition))


def _groups(p: PartitionDir, k: int, settings: CompactSettings, upto: int) -> list:
    """``Cleaner.groupSegmentsBySize`` over the first ``k`` segments: ``[(i0, i1)]``."""
    def isize(path):
        return (os.stat(path).st_size if path and os.path.exists(path) else 0)

    segs = p.segments[:k]
    out = []
    i = 0
    while i < k:
        j = i + 1
        log_size, idx, tidx = segs[i].size, isize(segs[i].index_path), \
            isize(segs[i].timeindex_path)
        while j < k:
            s = segs[j]
            last = segs[j + 1].base_offset - 1 if j + 1 < k else upto - 1
            if not (log_size + s.size <= settings.segment_bytes
                    and idx + isize(s.index_path) <= settings.max_index_bytes
                    and tidx + isize(s.timeindex_path) <= settings.max_index_bytes
                    and (s.size == 0 or last - segs[i].base_offset <= 2 ** 31 - 1)):
                break
            log_size += s.size
            idx += isize(s.index_path)
            tidx += isize(s.timeindex_path)
            j += 1
        out.append((i, j))
        i = j
    return out


def compact_partition(root: str, topic: str, partition: int, settings: CompactSettings, *,
                      now_ms: int | None = None, dry_run: bool = False,
                      fault: Fault | None = None) -> PartitionCompaction:
    """Clean one partition of a log dir on the local filesystem into ``.cleaned`` files
    (none with ``dry_run``) and say what it did. The caller (:class:`Compaction`) holds
    the topic's lock and commits the groups. Raises :class:`UnsupportedFormatError` for
    legacy batches in the cleanable range, :class:`CorruptRecordError` /
    :class:`LogLayoutError` for a damaged log (nothing is written then)."""
    fault = fault or no_fault
    root = norm_root(root)
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    fs = pafs.LocalFileSystem()
    directory = partition_dir(root, topic, partition)
    res = PartitionCompaction(topic, partition)
    if any(n.endswith(".swap") for n, _, _, _ in listdir(fs, directory)):
        raise LogLayoutError("partition has .swap files (a broker's interrupted "
                             "compaction): start the broker once to finish it, then "
                             "compact", path=directory)
    segs = list_segments(fs, directory, resolve_swaps=False)[0]
    p = PartitionDir(topic, partition, root, directory, segs)
    if len(segs) < 2:
        res.skipped = "only the active segment"
        return res
    h = _headers(fs, p)
    h["now"] = now
    txns = scan_transactions(h)
    seg_of = h["segment"]
    bounds = [segs[-1].base_offset]
    hw = _root_checkpoint(fs, root, REPLICATION_OFFSET_CHECKPOINT, topic, partition)
    if hw is not None:
        bounds.append(hw)
    # the last stable offset is min(first unstable offset, high watermark)
    unstable = first_unstable_offset(txns, hw)
    if unstable is not None:
        bounds.append(unstable)
    if settings.upto is not None:
        bounds.append(settings.upto)
    log_start = max(segs[0].base_offset, _root_checkpoint(
        fs, root, LOG_START_OFFSET_CHECKPOINT, topic, partition) or 0)
    dirty_from = _root_checkpoint(fs, root, CLEANER_OFFSET_CHECKPOINT, topic, partition)
    if dirty_from is None or not log_start <= dirty_from <= bounds[0]:
        dirty_from = log_start
    bases = [s.base_offset for s in segs]
    young = first_too_young(h, bases, dirty_from, now, settings.min_compaction_lag_ms)
    bounds += [] if young is None else [young]
    limit = min(bounds)
    k = 0
    while k < len(segs) - 1 and segs[k + 1].base_offset <= limit:
        k += 1
    if k == 0:
        res.skipped = f"no whole segment below the first uncleanable offset {limit}"
        return res
    upto = segs[k].base_offset
    clean = sum(s.size for s in segs[:k] if s.base_offset < dirty_from)
    dirty = sum(segs[i].size for i in range(k) if segs[i + 1].base_offset > dirty_from)
    res.dirty_ratio = dirty / (clean + dirty) if clean + dirty else 0.0
    n = int(np.searchsorted(seg_of, k))       # batches in the cleaned segments
    legacy = np.flatnonzero(h["magic"][:n] < 2)
    if len(legacy):
        b = int(legacy[0])
        raise _legacy_error(topic, partition, int(h["magic"][b]), segs[int(seg_of[b])].path,
                            int(h["position"][b]), int(h["base_offset"][b]))
    res.bytes_before = sum(s.size for s in segs[:k])
    res.batches_before = n
    data = ~h["is_control"][:n]
    res.records_before = int(h["record_count"][:n][data].sum())
    res.compaction_delay_ms = compaction_delay(h, bases, dirty_from, now,
                                               settings.max_compaction_lag_ms)
    must = res.compaction_delay_ms > 0 and dirty > 0
    if not settings.force and not must and \
            res.dirty_ratio <= settings.min_cleanable_dirty_ratio:
        res.skipped = (f"dirty ratio {res.dirty_ratio:.3f} is not above "
                       f"min.cleanable.dirty.ratio {settings.min_cleanable_dirty_ratio}")
        return res
    h["horizon"] = np.where((h["attributes"] & ATTR_DELETE_HORIZON) != 0,
                            h["first_timestamp"], -1)
    discard, retention, empty_marker, entries = batch_decisions(h, n, txns, upto)
    dec = {"discard": discard, "retention": retention, "empty_marker": empty_marker,
           "index_entries": entries, "horizon": h["horizon"]}
    # pass 2: the offset map, from data batches that are not aborted
    cleanable = replace(p, segments=segs[:k])
    omap = OffsetMap()
    b0 = 0
    for w in scan_windows(fs, cleanable, on_corruption="fail", window_bytes=_WINDOW_BYTES):
        nb = len(w.headers)
        bs = np.arange(b0, b0 + nb)
        skip = h["position"][bs][discard[bs] & ~h["is_control"][bs]] - w.position
        rows = decode_run(w.data, include_headers=False, position_base=w.position,
                          skip_positions=np.ascontiguousarray(skip, dtype=np.int64)
                          if len(skip) else None)
        omap.add(rows.column("key"), rows.column("offset"))
        b0 += nb
    latest = omap.latest_offsets()
    res.keys = len(omap)
    del omap
    # pass 3: each group into its new segment
    res.cleaned_to = upto
    seg_first = np.searchsorted(seg_of, np.arange(len(segs) + 1))
    kept_as_is = []
    for i0, i1 in _groups(p, k, settings, upto):
        gb = np.arange(seg_first[i0], seg_first[i1])
        if not len(gb):
            continue
        out = GroupWriter(directory, segs[i0].base_offset, dry_run)
        try:
            for w in scan_windows(fs, replace(p, segments=segs[i0:i1]), on_corruption="fail",
                                  window_bytes=_WINDOW_BYTES):
                s = i0 + w.segment_index
                lo, hi = int(seg_first[s]), int(seg_first[s + 1])
                b_first = lo + int(np.searchsorted(h["position"][lo:hi], w.position))
                clean_window(w, h, b_first, dec, latest, out, res,
                             settings.delete_retention_ms, now)
            b = int(gb[-1])
            if (not out.lasts or out.lasts[-1] < segs[i1 - 1].base_offset) and (
                    not out.lasts or out.lasts[-1] < int(h["last_offset"][b])):
                # a swap must reach into the group's last old segment to replace it
                out.add(empty_of(h, b), int(h["last_offset"][b]), int(h["max_timestamp"][b]))
            unchanged = i1 - i0 == 1 and out.raw == len(gb) == len(out.lasts)
            if unchanged:
                out.drop()
                res.bytes_after += segs[i0].size
                res.batches_after += len(gb)
                kept_as_is.append(segs[i0])
                continue
            out.finish(settings.index_interval_bytes)
        except BaseException:
            out.drop()
            raise
        res.bytes_after += out.size
        res.batches_after += len(out.lasts)
        res.groups.append([segs[i0].base_offset, [s.base_offset for s in segs[i0:i1]]])
        res.fingerprints[segs[i0].base_offset] = out.fingerprint
        fault("cleaned")
    _link_between(res, kept_as_is, directory, dry_run)
    if res.groups and not dry_run:
        fsync_dir(directory)
    return res


def _link_between(res: PartitionCompaction, kept: list, directory: str, dry_run: bool) -> None:
    """Make each segment in ``kept`` (left as it was) that lies between two new segments
    a group of its own, its ``.cleaned`` files hard links to its files. A broker that
    finds ``.swap`` files at startup (``LogLoader``) deletes every other file whose base
    offset lies between the smallest ``.swap`` base and the largest ``.swap`` segment's
    next offset, then renames the ``.swap`` files: a segment in that range without a
    ``.swap`` of its own would be lost."""
    if len(res.groups) < 2:
        return
    lo, hi = res.groups[0][0], res.groups[-1][0]
    for seg in kept:
        if not lo < seg.base_offset < hi:
            continue
        if not dry_run:
            for src, suffix in ((seg.index_path, ".index"), (seg.timeindex_path, ".timeindex"),
                                (seg.txnindex_path, ".txnindex"), (seg.path, ".log")):
                if src and os.path.exists(src):
                    os.link(src, cleaned_path(directory, seg.base_offset, suffix))
        res.groups.append([seg.base_offset, [seg.base_offset]])
    res.groups.sort(key=lambda g: g[0])


# ---- the driver -------------------------------------------------------------------------------
class Compaction:
    """The driver side of compacting a topic (a context manager): takes the broker dir
    guard and the topic's lock, finishes or undoes what a dead writer left, records the
    compaction in the journal (:meth:`begin`), and on :meth:`commit` lands every
    partition's groups whole (the journal write is the commit point), then swaps them
    in. Leaving without a commit deletes the ``.cleaned`` files (nothing else changed).
    Tasks run :func:`compact_partition` between begin and commit, without the lock."""

    def __init__(self, root: str, topic: str, *, lock_timeout: float | None = None,
                 fault: Fault | None = None, dry_run: bool = False):
        jr.validate_topic(topic)
        self.root = norm_root(root)
        self.topic = topic
        self.fs = pafs.LocalFileSystem()
        self.fault = fault or no_fault
        self.dry_run = dry_run
        self.write_id = f"compact:{jr.batch_write_id().split(':', 1)[1]}"
        self._lock_timeout = DEFAULT_LOCK_TIMEOUT_S if lock_timeout is None else lock_timeout
        self._stack = contextlib.ExitStack()
        self._state = None
        self.committed = False

    def __enter__(self) -> "Compaction":
        check_replace_fs(self.fs)
        if not os.path.isdir(self.root):
            raise LogLayoutError("log dir does not exist", path=self.root)
        with contextlib.ExitStack() as stack:
            stack.enter_context(BrokerDirGuard(self.fs, self.root))
            stack.enter_context(TopicLock(self.fs, self.root, self.topic,
                                          write_id=self.write_id,
                                          timeout=self._lock_timeout))
            self.fault("locked")
            recover_locked(self.fs, self.root, self.topic, self.fault)
            discard_cleaned(self.fs, self.root, self.topic)
            self._state = jr.load(self.fs, self.root, self.topic)
            self._stack = stack.pop_all()
        return self

    def partitions(self) -> list[int]:
        return topic_partitions(self.fs, self.root, self.topic)

    def begin(self) -> None:
        if not self.dry_run:
            begin_replace(self.fs, self.root, self._state, self.write_id)
            self.fault("begun")

    def commit(self, results: Iterable[PartitionCompaction]) -> None:
        results = list(results)
        if self.dry_run:
            return
        groups = {r.partition: r.groups for r in results if r.groups}
        cleaned = {r.partition: r.cleaned_to for r in results
                   if r.groups and r.cleaned_to is not None}
        prints = {r.partition: r.fingerprints for r in results if r.groups}
        commit_replace(self.fs, self.root, self._state, groups, cleaned, prints)
        self.committed = True
        self.fault("committed")
        post_replace(self.fs, self.root, self.topic, self._state.pending, self.fault)
        self._state.pending = None
        jr.save(self.fs, self.root, self._state)
        self.fault("done")

    def __exit__(self, *exc) -> None:
        try:
            if not self.committed and not self.dry_run and self._state is not None \
                    and self._state.pending is not None:
                recover_locked(self.fs, self.root, self.topic, no_fault)
        finally:
            self._stack.close()


def compact_topic(root: str, topic: str, settings: CompactSettings | None = None, *,
                  partitions: Iterable[int] | None = None, now_ms: int | None = None,
                  dry_run: bool = False, lock_timeout: float | None = None,
                  fault: Fault | None = None,
                  run: Callable[[Callable, list], list] | None = None
                  ) -> list[PartitionCompaction]:
    """Compact ``topic`` in log dir ``root`` (see the module doc). ``run(fn, items)`` maps
    ``fn`` over the partition numbers (default: in this process, in order; the Spark job
    passes one task per partition). Returns each partition's
    :class:`PartitionCompaction`."""
    settings = settings or CompactSettings()
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    with Compaction(root, topic, lock_timeout=lock_timeout, fault=fault,
                    dry_run=dry_run) as c:
        parts = c.partitions()
        if partitions is not None:
            wanted = sorted(set(int(q) for q in partitions))
            missing = sorted(set(wanted) - set(parts))
            if missing:
                raise InvalidOptionError(f"partitions {missing} of topic {topic!r} are not in "
                                         f"{root}")
            parts = wanted
        if not parts:
            raise InvalidOptionError(f"topic {topic!r} has no partitions in {root}")
        check_compactable(c.root, topic, parts)
        c.begin()

        def one(q: int) -> PartitionCompaction:
            return compact_partition(c.root, topic, q, settings, now_ms=now,
                                     dry_run=dry_run, fault=fault)

        results = run(one, parts) if run is not None else [one(q) for q in parts]
        c.commit(results)
        return results
