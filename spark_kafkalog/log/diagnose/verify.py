"""Verification of log dirs: what ``kafkalog verify`` checks and how serious each finding is.

It runs inspect (one pass over every segment's batch headers, CRCs checked) and adds what
a broker's startup would object to, judging each finding an error or a warning.
"""
# What verify adds to inspect's findings:
#
# - precise reasons for index entries that readers drop (an entry pointing past the end
#   of the ``.log``, an offset or timestamp going backwards, an offset belonging to the
#   next segment), at the entry's byte position;
# - offset index entries naming an offset beyond the segment's last batch;
# - the byte position of the checkpoint line behind a checkpoint finding;
# - ``leader-epoch-checkpoint``: epochs and start offsets strictly increasing (Kafka's
#   LeaderEpochFileCache removes conflicting entries on assignment, so a file it wrote never
#   holds anything else), no start offset past the log end;
# - producer ``.snapshot`` files: version and CRC-32C, none above the log end;
# - every ABORT marker has its ``.txnindex`` entry (a broker answers read_committed
#   fetches from those files only; inspect checks the converse);
# - with ``deep=True``: every batch decoded record by record (compressed payloads, varints,
#   inner legacy CRCs), as Kafka's ``DumpLogSegments --deep-iteration`` would.
#
# Severity, decided the way a broker's log recovery decides it:
#
# ``warning``  recoverable by a broker restart without losing acknowledged data: a torn
#              tail or zero-filled tail at the end of a partition's last segment (recovery
#              truncates it); index entries that only point into that torn tail (the
#              indexes of the active segment are rebuilt with it); a producer snapshot
#              above the log end (deleted on load); ABORT markers in a segment that has
#              no ``.txnindex`` at all (logs written without them; this package's reader
#              falls back to the markers, a broker would not).
# ``error``    everything else: damage inside the log, offsets going backwards, indexes that
#              would send a reader to the wrong place, unreadable files, and data loss
#              (read/loss.py): a checkpoint (high watermark, recovery point, log start)
#              past the log end, torn tail or not (a crash tears only what was neither
#              committed nor flushed), a log start checkpoint below the first segment,
#              offsets jumping between segments where no compaction explains it.
#
# ``strict`` turns warnings into errors. Findings name the file and, whenever there is one,
# the byte position (of the batch, the index entry, the checkpoint line) and the offset.
# Memory stays bounded: the ``.log`` bytes are read window by window, never whole.
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterable

import pyarrow.fs as pafs

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON, CONTROL_ABORT
from spark_kafkalog.log.diagnose.findings import ERROR, WARNING, Finding
from spark_kafkalog.log.diagnose.inspect import PartitionInfo, SegmentInfo, inspect_partition
from spark_kafkalog.log.files.checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    MAX_CHECKPOINT_BYTES,
)
from spark_kafkalog.log.files.index import (
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    read_offset_index,
    read_time_index,
)
from spark_kafkalog.log.files.txn import read_producer_snapshot, read_txn_index
from spark_kafkalog.log.io import join, read_range, read_small_file
from spark_kafkalog.log.model import PartitionDir
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.loss import find_losses
from spark_kafkalog.log.read.reader import read_partition
from spark_kafkalog.log.read.scan import ReadStats, TornTailWarning, scan_windows
from spark_kafkalog.log.write.leftovers import staging_leftovers

__all__ = ["ERROR", "WARNING", "Finding", "VerifyResult", "verify_partition",
           "verify_log_dirs", "checkpoint_line_positions"]

@dataclass
class VerifyResult:
    """Everything :func:`verify_log_dirs` found, plus what it covered."""
    roots: tuple[str, ...]
    partitions: int = 0
    segments: int = 0
    bytes: int = 0
    batches: int = 0
    records: int = 0
    findings: list[Finding] = field(default_factory=list)

    def errors(self, strict: bool = False) -> list[Finding]:
        """Findings that make the verification fail (warnings too when ``strict``)."""
        return [f for f in self.findings if strict or f.severity == ERROR]

    def warnings(self, strict: bool = False) -> list[Finding]:
        return [] if strict else [f for f in self.findings if f.severity == WARNING]

    def ok(self, strict: bool = False) -> bool:
        return not self.errors(strict)

    def to_dict(self, strict: bool = False) -> dict:
        return {"ok": self.ok(strict), "strict": strict, "roots": list(self.roots),
                "partitions": self.partitions, "segments": self.segments,
                "bytes": self.bytes, "batches": self.batches, "records": self.records,
                "errors": len(self.errors(strict)), "warnings": len(self.warnings(strict)),
                "findings": [f.to_dict() for f in self.findings]}


# ---- helpers ---------------------------------------------------------------------------

def checkpoint_line_positions(fs: pafs.FileSystem, path: str) -> dict[tuple, int]:
    """Byte position of each entry line of a checkpoint file: ``{(topic, partition):
    position}`` for offset checkpoints, ``{(epoch,): position}`` for two-field lines
    (leader-epoch-checkpoint). Lines that do not parse are left out; a missing or
    unreadable file gives ``{}`` (its problems are reported by the checkpoint reader)."""
    try:
        data = read_small_file(fs, path, MAX_CHECKPOINT_BYTES)
    except KafkaLogError:
        return {}
    if not data:
        return {}
    out: dict[tuple, int] = {}
    pos = 0
    lineno = 0
    for raw in data.splitlines(keepends=True):
        lineno += 1
        if lineno > 2:                      # version and count lines come first
            fields = raw.split()
            try:
                if len(fields) == 3:
                    out.setdefault((fields[0].decode("utf-8"), int(fields[1])), pos)
                elif len(fields) == 2:
                    out.setdefault((int(fields[0]),), pos)
            except (UnicodeDecodeError, ValueError):
                # a malformed line: the checkpoint reader reports it
                pos += len(raw)
                continue
        pos += len(raw)
    return out


class _Positions:
    """Per-run cache of checkpoint line positions (root checkpoints are shared by every
    partition of a root)."""

    def __init__(self, fs: pafs.FileSystem):
        self.fs = fs
        self._cache: dict[str, dict[tuple, int]] = {}

    def of(self, path: str, key: tuple) -> int | None:
        got = self._cache.get(path)
        if got is None:
            got = checkpoint_line_positions(self.fs, path)
            self._cache[path] = got
        return got.get(key)


def _read_entry(fs, path: str, position: int, size: int) -> bytes | None:
    try:
        data = read_range(fs, path, position, size)
    except KafkaLogError:
        return None
    return data if len(data) == size else None


def _offset_index_drop_reason(fs, seg, next_base: int | None, k: int,
                              prev: tuple[int, int] | None) -> tuple[str, int | None]:
    """Why readers stop trusting ``.index`` entry ``k`` (the first one they drop)."""
    raw = _read_entry(fs, seg.index_path, k * OFFSET_INDEX_ENTRY.size, OFFSET_INDEX_ENTRY.size)
    if raw is None:
        return f"entry {k} cannot be read", None
    rel, pos = OFFSET_INDEX_ENTRY.unpack(raw)
    offset = seg.base_offset + rel
    if rel < 0 or pos < 0:
        why = f"entry {k} is negative (relative offset {rel}, position {pos})"
    elif pos >= seg.size:
        why = (f"entry {k} points to position {pos}, past the end of the log "
               f"({seg.size} bytes)")
    elif next_base is not None and offset >= next_base:
        why = (f"entry {k} names offset {offset}, which belongs to the next segment "
               f"(base offset {next_base})")
    elif prev is not None and offset <= prev[0]:
        why = f"entry {k} names offset {offset}, not above the previous entry's {prev[0]}"
    elif prev is not None and pos <= prev[1]:
        why = (f"entry {k} points to position {pos}, not after the previous entry's "
               f"{prev[1]}")
    else:
        why = f"entry {k} (offset {offset}, position {pos}) is inconsistent"
    return why + "; readers ignore it and every entry after it", offset


# Not one function with _offset_index_drop_reason: the layouts differ, and so do the rules
# (no position to check; timestamps and offsets may repeat, offset-index entries may not).
def _time_index_drop_reason(fs, seg, next_base: int | None, k: int,
                            prev: tuple[int, int] | None) -> tuple[str, int | None]:
    """Why readers stop trusting ``.timeindex`` entry ``k``."""
    raw = _read_entry(fs, seg.timeindex_path, k * TIME_INDEX_ENTRY.size, TIME_INDEX_ENTRY.size)
    if raw is None:
        return f"entry {k} cannot be read", None
    ts, rel = TIME_INDEX_ENTRY.unpack(raw)
    offset = seg.base_offset + rel
    if rel < 0 or ts < 0:
        why = f"entry {k} is negative (timestamp {ts}, relative offset {rel})"
    elif next_base is not None and offset >= next_base:
        why = (f"entry {k} names offset {offset}, which belongs to the next segment "
               f"(base offset {next_base})")
    elif prev is not None and ts < prev[0]:
        why = (f"entry {k} is out of order: timestamp {ts} after the previous entry's "
               f"{prev[0]}")
    elif prev is not None and offset < prev[1]:
        why = f"entry {k} names offset {offset}, below the previous entry's {prev[1]}"
    else:
        why = f"entry {k} (timestamp {ts}, offset {offset}) is inconsistent"
    return why + "; readers ignore it and every entry after it", offset


# ---- per partition ----------------------------------------------------------------------

class _Collector:
    def __init__(self, p):
        self.p = p
        self.findings: list[Finding] = []
        self._seen: set[tuple] = set()

    def add(self, severity: str, kind: str, path: str, position: int | None,
            offset: int | None, message: str) -> None:
        key = (kind, path, position, message)
        if key in self._seen:
            return
        self._seen.add(key)
        self.findings.append(Finding(severity, kind, path, position, offset, message,
                                     self.p.topic, self.p.partition))


def _segment_checks(logdirs: LogDirs, p: PartitionDir, i: int, info: SegmentInfo,
                    out: _Collector, torn_at: int | None) -> None:
    """Index findings of one segment: inspect's, made precise, plus offsets past the
    segment's last batch. ``torn_at``: position of this segment's torn tail, if any."""
    fs = logdirs.filesystem
    seg = p.segments[i]
    nxt = p.next_base_offset(i)
    oidx = tidx = None
    if seg.index_path is not None:
        try:
            oidx = read_offset_index(fs, seg.index_path, seg.base_offset,
                                     segment_size=seg.size, next_base_offset=nxt)
        except KafkaLogError as err:
            out.add(ERROR, "index", seg.index_path, err.position, err.offset, err.reason)
    if seg.timeindex_path is not None:
        try:
            tidx = read_time_index(fs, seg.timeindex_path, seg.base_offset,
                                   next_base_offset=nxt)
        except KafkaLogError as err:
            out.add(ERROR, "timeindex", seg.timeindex_path, err.position, err.offset,
                    err.reason)
    replaced: set[tuple[str, str, int]] = set()
    if oidx is not None and oidx.dropped:
        k = len(oidx)
        why, offset = _offset_index_drop_reason(fs, seg, nxt, k, oidx.last)
        pos = k * OFFSET_INDEX_ENTRY.size
        out.add(ERROR, "index", seg.index_path, pos, offset, why)
        replaced.add(("index", seg.index_path, pos))
    if tidx is not None and tidx.dropped:
        k = len(tidx)
        prev = (tidx.last[0], tidx.last[1]) if tidx.last is not None else None
        why, offset = _time_index_drop_reason(fs, seg, nxt, k, prev)
        pos = k * TIME_INDEX_ENTRY.size
        out.add(ERROR, "timeindex", seg.timeindex_path, pos, offset, why)
        replaced.add(("timeindex", seg.timeindex_path, pos))
    # inspect's own findings for this segment
    for pr in info.problems:
        if (pr.kind, pr.path, pr.position) in replaced:
            continue
        severity = ERROR
        offset = pr.offset
        if pr.kind == "corrupt" and offset is not None and not (
                seg.base_offset <= offset < (nxt if nxt is not None
                                             else seg.base_offset + (1 << 31))):
            offset = None       # bytes that are not a batch: what they "claim" means nothing
        if pr.kind == "torn_tail":
            severity = WARNING
        elif pr.kind in ("index", "timeindex") and torn_at is not None and \
                info.last_offset is not None and pr.offset is not None and \
                pr.offset > info.last_offset:
            # an entry for a batch the crash tore: recovery rebuilds the active
            # segment's indexes together with truncating its log
            severity = WARNING
        out.add(severity, pr.kind, pr.path, pr.position, offset, pr.message)
    # offset index entries beyond the last batch of the segment (a reader seeking past
    # the log end would be sent into the segment instead of being told the offset is out
    # of range; the position checks cannot see it when the position is a real batch)
    if oidx is not None and len(oidx) and info.scanned and info.last_offset is not None:
        beyond = [(k, int(o)) for k, o in enumerate(oidx.offsets) if o > info.last_offset]
        if beyond:
            k, o = beyond[0]
            severity = WARNING if torn_at is not None else ERROR
            more = f" (and {len(beyond) - 1} more after it)" if len(beyond) > 1 else ""
            out.add(severity, "index", seg.index_path, k * OFFSET_INDEX_ENTRY.size, o,
                    f"entry {k} names offset {o}, beyond the segment's last offset "
                    f"{info.last_offset}{more}")


def _partition_checks(logdirs: LogDirs, p: PartitionDir, info: PartitionInfo,
                      out: _Collector, positions: _Positions, leo: int | None, torn: bool) -> None:
    for pr in info.problems:
        if pr.kind != "checkpoint":
            out.add(ERROR, pr.kind, pr.path, pr.position, pr.offset, pr.message)
            continue
        position = pr.position
        name = pr.path.rsplit("/", 1)[-1]
        if position is None and pr.offset is not None:
            position = positions.of(pr.path, (p.topic, p.partition))
        message = pr.message
        if pr.offset is not None and leo is not None and pr.offset > leo \
                and name != LOG_START_OFFSET_CHECKPOINT:
            # records the checkpoint promises are gone; a torn tail does not explain it
            # (a crash tears only what was never committed nor flushed)
            message += (f"; data loss: offsets {leo}..{pr.offset - 1} are missing"
                        + (" (a torn tail explains only a log end past the checkpoint)"
                           if torn else ""))
        elif pr.offset is not None and leo is not None and pr.offset > leo:
            message += (f"; data loss: offsets {leo}..{pr.offset - 1} are missing (a log "
                        f"start never passes the high watermark, so the log reached offset "
                        f"{pr.offset}; Kafka's loader would delete every segment: segment "
                        "files were deleted)")
        out.add(ERROR, "checkpoint", pr.path, position, pr.offset, message)
    # the leader epoch cache, as LeaderEpochFileCache keeps it
    path = join(p.path, LEADER_EPOCH_CHECKPOINT)
    prev = None
    for epoch, start in info.leader_epochs:
        where = positions.of(path, (epoch,))
        if epoch < 0 or start < 0:
            out.add(ERROR, "checkpoint", path, where, start,
                    f"leader epoch entry ({epoch}, {start}) is negative")
        elif prev is not None and (epoch <= prev[0] or start <= prev[1]):
            out.add(ERROR, "checkpoint", path, where, start,
                    f"leader epoch entry ({epoch}, {start}) does not follow ({prev[0]}, "
                    f"{prev[1]}): epochs and start offsets must both increase")
        elif leo is not None and start > leo:
            out.add(ERROR, "checkpoint", path, where, start,
                    f"leader epoch {epoch} starts at offset {start}, past the log end "
                    f"offset {leo}")
        prev = (epoch, start)


def _snapshot_checks(logdirs: LogDirs, p: PartitionDir, out: _Collector,
                     leo: int | None) -> None:
    for offset, path in p.snapshots:
        try:
            read_producer_snapshot(logdirs.filesystem, path, offset)
        except KafkaLogError as err:
            out.add(ERROR, "snapshot", path, err.position, offset, err.reason)
            continue
        if leo is not None and offset > leo:
            out.add(WARNING, "snapshot", path, None, offset,
                    f"producer snapshot at offset {offset} is above the log end offset {leo} "
                    "(a broker deletes it on load)")


def _abort_marker_checks(logdirs: LogDirs, p: PartitionDir, info: PartitionInfo,
                         out: _Collector) -> None:
    """Every ABORT marker must have its ``.txnindex`` entry in its segment: a broker
    answers read_committed fetches from the txn indexes only, so an aborted transaction
    missing there is served to consumers as if committed. (inspect checks the converse:
    every entry has its marker.) A marker with a delete horizon (attribute bit 6) is
    exempt: Kafka's cleaner sets one only on the marker of a transaction whose records
    are all gone, and drops its entry then. Only segments holding control batches are
    read again, headers only."""
    fs = logdirs.filesystem
    for i, (seg, sinfo) in enumerate(zip(p.segments, info.segments)):
        if not sinfo.control_batches:
            continue
        entries: set[tuple[int, int]] = set()
        if seg.txnindex_path is not None:
            try:
                txns = read_txn_index(fs, seg.txnindex_path, segment_base_offset=seg.base_offset,
                                      next_base_offset=p.next_base_offset(i))
            except KafkaLogError:
                continue        # an unreadable .txnindex is already a finding
            if txns is not None:
                entries = {(int(a), int(b)) for a, b in zip(txns.producer_id,
                                                            txns.last_offset)}
        missing = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            for w in scan_windows(fs, p, segment_index=i, end_offset=p.next_base_offset(i),
                                  on_corruption="skip", verify_crc=False, quiet=True,
                                  prev_last_offset=_last_before(info, i)):
                if w.segment_index != i:
                    break
                h = w.headers
                ctrl = h["is_control"].tolist()
                ctype = h["control_type"].tolist()
                pid = h["producer_id"].tolist()
                base = h["base_offset"].tolist()
                pos = h["position"].tolist()
                attrs = h["attributes"].tolist()
                for r in range(len(h)):
                    if attrs[r] & ATTR_DELETE_HORIZON:
                        continue
                    if ctrl[r] and ctype[r] == CONTROL_ABORT and (pid[r], base[r]) not in entries:
                        missing.append((pos[r], base[r], pid[r]))
        for position, offset, producer in missing:
            if seg.txnindex_path is not None:
                out.add(ERROR, "txnindex", seg.path, position, offset,
                        f"ABORT marker of producer {producer} has no entry in "
                        f"{seg.txnindex_path}: a broker would serve the aborted records to "
                        "read_committed consumers")
            else:
                out.add(WARNING, "txnindex", seg.path, position, offset,
                        f"ABORT marker of producer {producer}, but the segment has no "
                        ".txnindex: a broker would serve the aborted records to "
                        "read_committed consumers (this package's reader derives aborts "
                        "from the markers)")


def _loss_checks(logdirs: LogDirs, p: PartitionDir, info: PartitionInfo,
                 out: _Collector) -> None:
    """Data loss the checkpoint findings do not already show (see read/loss.py): a log
    start checkpoint below the first segment, our journal's committed end past the log
    end, and offsets that jump between segments where no compaction explains it."""
    if info.state is None or not p.segments:
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            losses = find_losses(logdirs, p, info.state)
    except KafkaLogError as err:
        out.add(ERROR, "layout", err.path or p.path, err.position, err.offset, err.reason)
        return
    for x in losses:
        if x.kind in ("high_watermark", "recovery_point", "log_start"):
            continue            # the checkpoint findings (with their line positions)
        out.add(ERROR, "data_loss", x.path, None, x.start, x.message)


def _last_before(info: PartitionInfo, i: int) -> int | None:
    """The last valid offset before segment ``i`` (what the scan must start above)."""
    lasts = [s.last_offset for s in info.segments[:i] if s.last_offset is not None]
    return max(lasts) if lasts else None


def _deep_checks(logdirs: LogDirs, p: PartitionDir, out: _Collector, progress) -> int:
    """Decode every batch of the partition; report batches that frame and checksum but
    do not decode. Returns the records decoded."""
    if not p.segments:
        return 0
    stats = ReadStats()
    records = 0
    with warnings.catch_warnings():
        # a torn tail is already a finding of the header scan
        warnings.simplefilter("ignore", TornTailWarning)
        for rb in read_partition(logdirs, p, start_offset=0, end_offset=1 << 62,
                                 on_corruption="skip", stats=stats, include_headers=True,
                                 fail_on_data_loss=None):
            records += rb.num_rows
            if progress is not None:
                progress(stats.bytes_read)
    for s in stats.skipped:
        out.add(ERROR, "corrupt", s.path, s.start, s.offset,
                f"{s.reason}; {s.end - s.start} bytes up to position {s.end} do not decode")
    return records


def _dedupe_deep(findings: list[Finding]) -> list[Finding]:
    """A range the header scan already reported is reported again by the deep decode
    (same file, same start): keep the header scan's."""
    seen: set[tuple] = set()
    out = []
    for f in findings:
        if f.kind == "corrupt" and f.position is not None:
            key = (f.path, f.position)
            if key in seen:
                continue
            seen.add(key)
        out.append(f)
    return out


def _own_log_end(p, info: PartitionInfo) -> int | None:
    """The log's own end offset as the scan found it (after the last valid batch; an
    empty last segment puts it at that segment's base, as state.py does), not clamped
    up to a log start offset checkpointed past it."""
    if not p.segments:
        return None
    if p.segments[-1].size == 0:
        return p.segments[-1].base_offset
    ends = [s.last_offset for s in info.segments if s.last_offset is not None]
    return max(ends) + 1 if ends else p.segments[-1].base_offset


def verify_partition(logdirs: LogDirs, p: PartitionDir, *, verify_crc: bool = True,
                     deep: bool = False,
                     progress: Callable[[int], None] | None = None,
                     positions: _Positions | None = None
                     ) -> tuple[PartitionInfo, list[Finding]]:
    """Check partition ``p`` (see the module docstring): ``(its PartitionInfo, the
    findings)``. Never raises for damaged data. ``progress(bytes_done)`` reports bytes
    of this partition scanned (twice its size with ``deep``)."""
    positions = positions or _Positions(logdirs.filesystem)
    out = _Collector(p)
    scan_progress = None if progress is None else (lambda done, _total: progress(done))
    info = inspect_partition(logdirs, p, scan=True, verify_crc=verify_crc,
                             decode_records=True, record_times=False,
                             progress=scan_progress)
    torn_seg = {pr.path: pr.position for s in info.segments for pr in s.problems
                if pr.kind == "torn_tail"}
    for i, sinfo in enumerate(info.segments):
        _segment_checks(logdirs, p, i, sinfo, out, torn_seg.get(sinfo.path))
    leo = _own_log_end(p, info)
    _partition_checks(logdirs, p, info, out, positions, leo, bool(torn_seg))
    _snapshot_checks(logdirs, p, out, leo)
    _abort_marker_checks(logdirs, p, info, out)
    _loss_checks(logdirs, p, info, out)
    findings = out.findings
    if deep:
        base = p.size_bytes
        deep_progress = None if progress is None else (lambda done: progress(base + done))
        _deep_checks(logdirs, p, out, deep_progress)
        findings = _dedupe_deep(out.findings)
    return info, findings


#: what verify says of a write's staging files, by what is known of their owner
_DEAD = ("the next copy_topic, import_files, compact or retention job on this log dir "
         "removes them")
_LIVE = "a write in progress (its commit or abort removes them)"
_UNKNOWN = ("a write in progress or a dead one's (the next write removes them once 24 "
            "hours old)")


def verify_log_dirs(logdirs: LogDirs, partitions: Iterable | None = None, *,
                    verify_crc: bool = True, deep: bool = False,
                    progress: Callable[[int], None] | None = None
                    ) -> VerifyResult:
    """Verify ``partitions`` (PartitionDirs of ``logdirs``; default: every partition of
    every topic, internal ones included). ``progress(bytes_done)`` counts over all of
    them. A topic whose directories cannot be listed is a finding, not an exception."""
    result = VerifyResult(tuple(logdirs.roots))
    for root in logdirs.roots:
        for left in staging_leftovers(logdirs.filesystem, root):
            result.findings.append(Finding(
                WARNING, "staging", left.paths[0], None, None,
                f"{left.describe()}: "
                + (_DEAD if left.alive is False else _LIVE if left.alive else _UNKNOWN)))
    if partitions is None:
        parts = []
        for topic in logdirs.topics():
            try:
                parts.extend(logdirs.partitions(topic))
            except KafkaLogError as err:
                result.findings.append(Finding(ERROR, "layout", err.path or topic,
                                               err.position, err.offset, err.reason, topic))
        partitions = parts
    positions = _Positions(logdirs.filesystem)
    done = 0
    factor = 2 if deep else 1
    for p in partitions:
        base = done
        cb = None if progress is None else (lambda n, base=base: progress(base + n))
        info, findings = verify_partition(logdirs, p, verify_crc=verify_crc, deep=deep,
                                          progress=cb, positions=positions)
        result.findings.extend(findings)
        result.partitions += 1
        result.segments += len(p.segments)
        result.bytes += p.size_bytes
        result.batches += sum(s.batches for s in info.segments)
        result.records += sum(s.data_records for s in info.segments)
        done += p.size_bytes * factor
        if progress is not None:
            progress(done)
    return result

