"""Inspection and verification of log dirs: what ``kafkalog inspect`` / ``verify`` show.

:func:`inspect_partition` describes a partition: its directory, checkpoints, offsets
(:class:`~spark_kafkalog.log.model.PartitionState`) and per segment the index files and
their entry counts. With ``scan=True`` (the default) it also reads every segment's batch
headers (bounded memory, window by window) and reports per segment the batches, data and
control records, offset range, time range, magics and codecs seen, transactional batches
— and every problem found: corrupt or unreadable bytes (each skipped range, with file and
byte position), a torn tail, index entries the log does not confirm, checkpoints that
point past the log end. These findings (no severity yet) are what ``verify`` judges.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from spark_kafkalog.format import decode_run
from spark_kafkalog.format.npview import column as _np
from spark_kafkalog.format.wire import CODEC_NAMES, CONTROL_ABORT
from spark_kafkalog.errors import KafkaLogError, TxnIndexError
from spark_kafkalog.log.diagnose.findings import Finding, problem
from spark_kafkalog.log.diagnose.times import header_time_range, merge_range, record_time_range
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_leader_epoch_checkpoint,
)
from spark_kafkalog.log.files.index import OFFSET_ENTRY_SIZE, TIME_ENTRY_SIZE
from spark_kafkalog.log.files.txn import read_txn_index
from spark_kafkalog.log.io import join, map_io
from spark_kafkalog.log.model import PartitionDir, PartitionState
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.scan import ReadStats, TornTailWarning, scan_windows
from spark_kafkalog.log.read.seek import offset_index, time_index
from spark_kafkalog.log.read.snapshot import topic_snapshot
from spark_kafkalog.log.read.state import log_tail, partition_state

__all__ = ["SegmentInfo", "PartitionInfo", "inspect_partition", "inspect_partitions",
           "inspect_log_dirs", "partition_summary"]

#: the log dir's checkpoint files a partition's inspection reads its entry of
_ROOT_CHECKPOINTS = (REPLICATION_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT,
                     RECOVERY_POINT_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)

log = logging.getLogger(__name__)


@dataclass
class SegmentInfo:
    base_offset: int
    path: str
    size: int
    swap: bool = False
    index_path: str | None = None
    timeindex_path: str | None = None
    txnindex_path: str | None = None
    index_entries: int | None = None         # live entries (None: no file)
    index_file_entries: int | None = None    # entries the file has room for
    timeindex_entries: int | None = None
    aborted_txns: int | None = None          # .txnindex entries
    scanned: bool = False
    batches: int = 0
    data_records: int = 0
    control_batches: int = 0
    transactional_batches: int = 0
    empty_batches: int = 0
    first_offset: int | None = None          # first batch's base offset
    last_offset: int | None = None           # last batch's last offset
    min_timestamp: int | None = None         # over data batches (ms), None if none
    max_timestamp: int | None = None
    magics: tuple[int, ...] = ()
    codecs: tuple[str, ...] = ()
    producer_ids: int = 0                    # distinct producer ids (>= 0)
    valid_bytes: int | None = None           # end of the last valid batch
    problems: list[Finding] = field(default_factory=list)


@dataclass
class PartitionInfo:
    topic: str
    partition: int
    root: str
    path: str
    state: PartitionState | None
    segments: list[SegmentInfo]
    checkpoints: dict[str, int | None]       # file name -> this partition's entry
    leader_epochs: list[tuple[int, int]]
    snapshots: list[int]
    problems: list[Finding]

    @property
    def codecs(self) -> tuple[str, ...]:
        return tuple(sorted({c for s in self.segments for c in s.codecs}))

    @property
    def magics(self) -> tuple[int, ...]:
        return tuple(sorted({m for s in self.segments for m in s.magics}))

    @property
    def all_problems(self) -> list[Finding]:
        return self.problems + [p for s in self.segments for p in s.problems]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["codecs"] = list(self.codecs)
        d["magics"] = list(self.magics)
        return d


class _SegmentChecks:
    """Streaming checks of one segment's index files against its batches."""

    def __init__(self, info: SegmentInfo, oidx, tidx, aborted):
        self.info = info
        self.o_off = oidx.offsets if oidx is not None else np.zeros(0, np.int64)
        self.o_pos = oidx.positions if oidx is not None else np.zeros(0, np.int64)
        self.t_ts = tidx.timestamps if tidx is not None else np.zeros(0, np.int64)
        self.t_off = tidx.offsets if tidx is not None else np.zeros(0, np.int64)
        self.o_next = 0
        self.t_next = 0
        self.running_max = -1
        self.aborted = aborted            # {(pid, marker offset)} still to be confirmed

    def _problem(self, kind, path, position, offset, message):
        self.info.problems.append(problem(kind, path, position, offset, message))

    def window(self, h, end_position: int) -> None:
        pos = _np(h, "position")
        base = _np(h, "base_offset")
        last = _np(h, "last_offset")
        maxts = _np(h, "max_timestamp")
        # offset index entries whose position lies in this window
        k = self.o_next
        while k < len(self.o_pos) and self.o_pos[k] < end_position:
            p, o = int(self.o_pos[k]), int(self.o_off[k])
            j = int(np.searchsorted(pos, p))
            if j >= len(pos) or pos[j] != p:
                self._problem("index", self.info.index_path, k * OFFSET_ENTRY_SIZE, o,
                              f"entry {k} points to position {p}, which is not a batch start")
            elif base[j] > o:
                self._problem("index", self.info.index_path, k * OFFSET_ENTRY_SIZE, o,
                              f"entry {k} maps offset {o} to position {p}, where the batch "
                              f"starts at offset {int(base[j])}")
            k += 1
        self.o_next = k
        # time index entries: the max timestamp so far at the batch holding the offset
        run = np.maximum.accumulate(np.maximum(maxts, self.running_max)) if len(maxts) \
            else maxts
        k = self.t_next
        while k < len(self.t_off) and self.t_off[k] <= (last[-1] if len(last) else -1):
            o, t = int(self.t_off[k]), int(self.t_ts[k])
            j = int(np.searchsorted(last, o))
            if j >= len(last) or base[j] > o:
                self._problem("timeindex", self.info.timeindex_path, k * TIME_ENTRY_SIZE, o,
                              f"entry {k} (timestamp {t}) names offset {o}, which no batch "
                              "holds")
            elif int(run[j]) != t:
                self._problem("timeindex", self.info.timeindex_path, k * TIME_ENTRY_SIZE, o,
                              f"entry {k} says the max timestamp up to offset {o} is {t}, the "
                              f"log says {int(run[j])}")
            k += 1
        self.t_next = k
        if len(run):
            self.running_max = int(run[-1])
        # aborted transactions: their ABORT markers
        if self.aborted:
            ctrl = _np(h, "is_control")
            ctype = _np(h, "control_type")
            pid = _np(h, "producer_id")
            for i in np.flatnonzero(ctrl & (ctype == CONTROL_ABORT)):
                self.aborted.discard((int(pid[i]), int(base[i])))

    def finish(self, valid_end: int | None) -> None:
        info = self.info
        for k in range(self.o_next, len(self.o_off)):
            self._problem("index", info.index_path, k * OFFSET_ENTRY_SIZE, int(self.o_off[k]),
                          f"entry {k} points to position {int(self.o_pos[k])}, past the last "
                          f"valid batch (valid bytes end at {valid_end})")
        for k in range(self.t_next, len(self.t_off)):
            self._problem("timeindex", info.timeindex_path, k * TIME_ENTRY_SIZE, int(self.t_off[k]),
                          f"entry {k} names offset {int(self.t_off[k])}, past the last valid "
                          "batch")
        for pid, marker in sorted(self.aborted or ()):
            self._problem("txnindex", info.txnindex_path, None, marker,
                          f"aborted transaction of producer {pid} has no ABORT marker at "
                          f"offset {marker}")


def _scan_segment(logdirs: LogDirs, p: PartitionDir, i: int, info: SegmentInfo,
                  checks: _SegmentChecks, verify_crc: bool, decode_records: bool,
                  record_times: bool, progress,
                  done_before: int,
                  prev_last: int | None) -> None:
    stats = ReadStats()
    codecs, magics, pids = set(), set(), set()
    valid_end = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        windows = scan_windows(logdirs.filesystem, p, segment_index=i, one_segment=True,
                               on_corruption="skip",
                               stats=stats, verify_crc=verify_crc, quiet=True,
                               prev_last_offset=prev_last)
        for w in windows:
            h = w.headers
            n = len(h)
            ctrl = _np(h, "is_control")
            txn = _np(h, "is_transactional")
            count = _np(h, "record_count")
            magic = _np(h, "magic")
            info.batches += n
            info.control_batches += int(ctrl.sum())
            info.transactional_batches += int((txn & ~ctrl).sum())
            info.empty_batches += int(((count == 0) & ~ctrl).sum())
            known = (~ctrl) & (count >= 0)
            info.data_records += int(count[known].sum())
            unknown = np.flatnonzero(~ctrl & (count < 0))
            if len(unknown) and decode_records:
                # compressed legacy wrappers: count their inner messages
                for r in unknown.tolist():
                    s = int(h["position"][r]) - w.position
                    size = int(h["size"][r])
                    try:
                        rb = decode_run(memoryview(w.data)[s:s + size], verify_crc=verify_crc,
                                        include_headers=False, position_base=w.position + s)
                        info.data_records += rb.num_rows
                    except KafkaLogError as err:
                        info.problems.append(problem("corrupt", w.path, w.position + s,
                                                     err.offset, err.reason))
            span = header_time_range(h)
            if record_times and (~ctrl).any():
                # the records' own timestamps (times.py); the scan checked the CRCs
                try:
                    span = record_time_range(decode_run(
                        w.data, verify_crc=False, include_headers=False,
                        position_base=w.position))
                except KafkaLogError as err:
                    info.problems.append(problem("corrupt", err.path or w.path,
                                                 err.position, err.offset, err.reason))
            if span is not None:
                info.min_timestamp, info.max_timestamp = merge_range(
                    None if info.min_timestamp is None
                    else (info.min_timestamp, info.max_timestamp), span)
            if info.first_offset is None:
                info.first_offset = int(h["base_offset"][0])
            info.last_offset = int(h["last_offset"][-1])
            codecs.update(CODEC_NAMES.get(int(c), f"codec-{int(c)}")
                          for c in np.unique(_np(h, "codec")[~ctrl]))
            magics.update(int(m) for m in np.unique(magic))
            pid = _np(h, "producer_id")
            pids.update(int(x) for x in np.unique(pid[pid >= 0]))
            checks.window(h, w.end)
            valid_end = w.end
            if progress is not None:
                progress(done_before + valid_end, p.size_bytes)
    for s in stats.skipped:
        info.problems.append(problem("corrupt", s.path, s.start, s.offset,
                                     f"{s.reason}; {s.end - s.start} bytes up to position "
                                     f"{s.end} are not valid batches"))
    if stats.torn_tail is not None:
        path, where, nbytes = stats.torn_tail
        info.problems.append(problem("torn_tail", path, where, None,
                                     f"the log ends with {nbytes} bytes that are not a whole "
                                     "batch (a crash's torn tail or preallocated zeros)"))
    info.valid_bytes = valid_end
    info.codecs = tuple(sorted(codecs))
    info.magics = tuple(sorted(magics))
    info.producer_ids = len(pids)
    info.scanned = True
    checks.finish(valid_end)


def inspect_partition(logdirs: LogDirs, p: PartitionDir, *, scan: bool = True,
                      verify_crc: bool = True, decode_records: bool = True,
                      record_times: bool = True,
                      isolation_level: str = "read_uncommitted",
                      progress: Callable[[int, int], None] | None = None
                      ) -> PartitionInfo:
    """Describe partition ``p`` (see the module docstring). Never raises for damaged
    data: damage is reported in ``problems``. ``progress(bytes_done, bytes_total)`` is called
    as segments are scanned. ``decode_records`` decodes compressed legacy wrappers to
    count their records; ``record_times`` decodes the records for their own time range
    (:mod:`.times`; else the range comes from the batch headers)."""
    problems: list[Finding] = []
    checkpoints = {}
    for name in _ROOT_CHECKPOINTS:
        try:
            checkpoints[name] = logdirs.checkpoint(p.root, name).get((p.topic, p.partition))
        except KafkaLogError as err:
            checkpoints[name] = None
            problems.append(problem("checkpoint", join(p.root, name), None, None, err.reason))
    try:
        epochs = read_leader_epoch_checkpoint(logdirs.filesystem,
                                              join(p.path, LEADER_EPOCH_CHECKPOINT))
    except KafkaLogError as err:
        epochs = []
        problems.append(problem("checkpoint", join(p.path, LEADER_EPOCH_CHECKPOINT), None,
                                None, err.reason))
    segments = []
    time_lasts: dict[int, tuple[int, int] | None] = {}    # what partition_state reads
    done = 0
    prev_last = None
    for i, seg in enumerate(p.segments):
        info = SegmentInfo(seg.base_offset, seg.path, seg.size, seg.swap, seg.index_path,
                           seg.timeindex_path, seg.txnindex_path)
        oidx = offset_index(logdirs, p, i)
        tidx = time_index(logdirs, p, i)
        if oidx is not None:
            info.index_entries, info.index_file_entries = len(oidx), oidx.file_entries
            if oidx.dropped:
                info.problems.append(problem(
                    "index", seg.index_path, len(oidx) * 8, None,
                    f"{oidx.dropped} entries after entry {len(oidx) - 1} do not increase or "
                    "point outside the segment"))
        if tidx is not None and not tidx.dropped and len(tidx) == tidx.file_entries:
            # every entry of the file is live: its last one is what time_index_last reads
            time_lasts[i] = tidx.last
        if tidx is not None:
            info.timeindex_entries = len(tidx)
            if tidx.dropped:
                info.problems.append(problem(
                    "timeindex", seg.timeindex_path, len(tidx) * 12, None,
                    f"{tidx.dropped} entries after entry {len(tidx) - 1} go backwards or "
                    "point outside the segment"))
        aborted = set()
        if seg.txnindex_path is not None:
            try:
                txns = read_txn_index(logdirs.filesystem, seg.txnindex_path,
                                      segment_base_offset=seg.base_offset,
                                      next_base_offset=p.next_base_offset(i))
                if txns is not None:
                    info.aborted_txns = len(txns)
                    aborted = {(int(a), int(b)) for a, b in zip(txns.producer_id,
                                                                txns.last_offset)}
            except TxnIndexError as err:
                info.problems.append(problem("txnindex", seg.txnindex_path, err.position,
                                             err.offset, err.reason))
        if scan and seg.size:
            checks = _SegmentChecks(info, oidx, tidx, aborted)
            try:
                _scan_segment(logdirs, p, i, info, checks, verify_crc, decode_records,
                              record_times,
                              progress, done, prev_last)
            except KafkaLogError as err:
                info.problems.append(problem("layout", err.path or seg.path, err.position,
                                             err.offset, err.reason))
        done += seg.size
        if info.last_offset is not None:
            prev_last = info.last_offset
        segments.append(info)
    state = tail = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            with contextlib.suppress(KafkaLogError):    # partition_state reports it
                tail = log_tail(logdirs, p, on_corruption="skip")
            state = partition_state(logdirs, p, isolation_level=isolation_level,
                                    on_corruption="skip", tail=tail, time_lasts=time_lasts)
    except KafkaLogError as err:
        problems.append(problem("layout", err.path or p.path, err.position, err.offset,
                                err.reason))
    if state is not None:
        # the log's own end (the state clamps it up to a log start checkpointed past it)
        leo = tail[0] if tail is not None else state.log_end_offset
        for name, value in checkpoints.items():
            if value is not None and value > leo and name != CLEANER_OFFSET_CHECKPOINT:
                problems.append(problem("checkpoint", join(p.root, name), None, value,
                                        f"{p.topic}-{p.partition} is checkpointed at {value}, "
                                        f"past the log end offset {leo}"))
    return PartitionInfo(p.topic, p.partition, p.root, p.path, state, segments, checkpoints,
                         epochs, [o for o, _ in p.snapshots], problems)


def inspect_partitions(logdirs: LogDirs, parts: Sequence[PartitionDir], *,
                       progress: Callable[[int], None] | None = None, **kwargs
                       ) -> list[PartitionInfo]:
    """:func:`inspect_partition` for each of ``parts``, in order. On a remote filesystem
    the partitions are inspected concurrently (:func:`~spark_kafkalog.log.io.map_io`),
    after what they share — each root's checkpoint files, each topic's journals — is
    read once. ``progress(bytes_done)`` is called with the bytes scanned so far in all
    partitions together (from any thread, never concurrently)."""
    for root in dict.fromkeys(p.root for p in parts):
        for name in _ROOT_CHECKPOINTS:
            with contextlib.suppress(KafkaLogError):    # reported per partition
                logdirs.checkpoint(root, name)
    for topic in dict.fromkeys(p.topic for p in parts):
        with contextlib.suppress(KafkaLogError):        # reported per partition
            topic_snapshot(logdirs, topic)
    lock = threading.Lock()
    done = [0] * len(parts)

    def one(k: int) -> PartitionInfo:
        def moved(n: int, _total: int) -> None:
            with lock:
                done[k] = n
                progress(sum(done))
        info = inspect_partition(logdirs, parts[k], progress=moved if progress else None,
                                 **kwargs)
        if progress is not None:
            moved(parts[k].size_bytes, 0)
        return info

    return map_io(logdirs.filesystem, one, range(len(parts)))


def inspect_log_dirs(logdirs: LogDirs, topics: Iterable[str] | None = None, **kwargs
                     ) -> list[PartitionInfo]:
    """:func:`inspect_partition` for every partition of ``topics`` (default: all; see
    :func:`inspect_partitions`)."""
    return inspect_partitions(logdirs, logdirs.all_partitions(topics), **kwargs)


def partition_summary(info: PartitionInfo, scanned: bool) -> dict:
    """What ``kafkalog inspect`` prints of a partition (its ``--json`` form); counts
    that only a scan finds are None when ``scanned`` is false."""
    s = info.state
    segs = info.segments
    first_ts = s.first_timestamp if s is not None else None
    max_ts = s.max_timestamp if s is not None else None
    if scanned:
        mins = [x.min_timestamp for x in segs if x.min_timestamp is not None]
        maxs = [x.max_timestamp for x in segs if x.max_timestamp is not None]
        seg_min = min(mins) if mins else None
        if max_ts is None and maxs:
            max_ts = max(maxs)
    else:
        seg_min = None
    return {
        "topic": info.topic, "partition": info.partition, "root": info.root,
        "path": info.path,
        "log_start_offset": s.log_start_offset if s else None,
        "high_watermark": s.high_watermark if s else None,
        "last_stable_offset": s.last_stable_offset if s else None,
        "log_end_offset": s.log_end_offset if s else None,
        "size_bytes": sum(x.size for x in segs),
        "segment_count": len(segs),
        "batches": sum(x.batches for x in segs) if scanned else None,
        "records": sum(x.data_records for x in segs) if scanned else None,
        "control_batches": sum(x.control_batches for x in segs) if scanned else None,
        "transactional_batches": (sum(x.transactional_batches for x in segs)
                                  if scanned else None),
        "first_timestamp": first_ts,
        "min_timestamp": seg_min,
        "max_timestamp": max_ts,
        "codecs": list(info.codecs) if scanned else None,
        "magics": list(info.magics) if scanned else None,
        "checkpoints": dict(info.checkpoints),
        "leader_epochs": [list(e) for e in info.leader_epochs],
        "snapshots": list(info.snapshots),
        "problems": [{"kind": p.kind, "path": p.path, "position": p.position,
                      "offset": p.offset, "message": p.message} for p in info.all_problems],
        "segments": [{
            "base_offset": x.base_offset, "path": x.path, "size_bytes": x.size,
            "swap": x.swap, "index_path": x.index_path, "timeindex_path": x.timeindex_path,
            "txnindex_path": x.txnindex_path, "index_entries": x.index_entries,
            "timeindex_entries": x.timeindex_entries, "aborted_txns": x.aborted_txns,
            "batches": x.batches if scanned else None,
            "records": x.data_records if scanned else None,
            "control_batches": x.control_batches if scanned else None,
            "empty_batches": x.empty_batches if scanned else None,
            "first_offset": x.first_offset, "last_offset": x.last_offset,
            "min_timestamp": x.min_timestamp, "max_timestamp": x.max_timestamp,
            "codecs": list(x.codecs) if scanned else None,
            "magics": list(x.magics) if scanned else None,
            "valid_bytes": x.valid_bytes,
        } for x in segs],
    }
