"""Data loss: records a partition's own files promise and its segments do not hold.

What promises records, and when a promise is broken (Kafka's rules):

- ``replication-offset-checkpoint``: the high watermark, every record below it acked by
  the in-sync replicas. Past the log end: committed records are gone. (A torn tail past
  the high watermark is not loss: uncommitted bytes broker recovery truncates.)
- ``recovery-point-offset-checkpoint``: records below it were flushed to disk. Past the
  log end: flushed records are gone.
- ``log-start-offset-checkpoint``: a broker writes an entry only when the log start is
  ABOVE the first segment's base offset (``LogManager.checkpointLogStartOffsetsInDir``:
  after DeleteRecords, or with a remote tier). Above the first segment and at most the
  log end is DeleteRecords: the records below it are invisible, not lost. Past the log
  end it is loss: a log start never passes the high watermark, and Kafka's own loader
  then deletes every segment, saying segment files were deleted from the file system.
  BELOW the first segment it is loss too: the segments from it up to the first one
  present are gone. (A copy of a live broker taken within a minute of retention deleting
  segments can show a stale entry below; a restarted broker would ignore it. The read
  fails, naming it; ``failOnDataLoss=false`` reads what is there.)
- our writer's journal: a committed write's end past the log end.
- a segment's name (its base offset): the log reached that offset. The previous
  segment's last batch ending below it, with nothing explaining why, is a gap: a missing
  or truncated segment. Compaction explains it when the root's
  ``cleaner-offset-checkpoint`` is at or past the gap's end, when a batch beside it was
  rewritten (a v2 batch holding fewer records than its offsets span, an empty data batch
  the cleaner kept for its producer state, a delete horizon set), when a segment beside
  it is a compaction's ``.swap`` output, or when our writer's journal wrote that range in
  one retained commit (``offsets="preserve"`` keeps a source's gaps) or records a
  compaction that cleaned past it. Jumps inside a segment are never file loss (a file is whole, cut at
  its end, or corrupt) and are not checked.

:func:`checkpoint_losses` (no segment bytes read) runs with every partition state;
:class:`GapCheck` watches a read's windows for gaps at segment boundaries (no extra
I/O unless it finds one); :func:`find_losses` checks a whole partition (both, reading
each segment's last batch) for callers that want the list, such as a remote tier's
reader or a job's summary; :func:`report_losses` raises :class:`DataLossError` or
warns once per partition and records the losses in :class:`ReadStats`.
"""
from __future__ import annotations

import logging
from typing import Iterable, Sequence


from spark_kafkalog.errors import DataLossError, KafkaLogError
from spark_kafkalog.format.wire import ATTR_DELETE_HORIZON
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_checkpoint,
)
from spark_kafkalog.log.io import join
from spark_kafkalog.log.model import DataLoss, PartitionDir
from spark_kafkalog.log.read.scan import scan_windows
from spark_kafkalog.log.read.seek import offset_index

__all__ = ["DataLoss", "uncovered", "checkpoint_losses", "gap_loss", "GapCheck", "find_losses",
           "report_losses", "rewritten"]

log = logging.getLogger(__name__)


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _entry(logdirs, root: str, name: str, key) -> int | None:
    try:
        return logdirs.checkpoint(root, name).get(key)
    except KafkaLogError:
        return None         # an unreadable checkpoint promises nothing (verify reports it)


def _log_start_moved_to(logdirs, path: str, key, first: int) -> bool:
    """The log start checkpoint at ``path`` read afresh says ``first`` or more: the read's
    snapshot of it (taken before its listing) was overtaken by a retention run or
    DeleteRecords that advanced it, then removed the segments below: those records were
    deleted, not lost, and the read is the suffix a consumer would see. Read only when
    the snapshot showed a log start below the first segment."""
    try:
        now = read_checkpoint(logdirs.filesystem, path).get(key)
    except KafkaLogError:
        return False
    return now is not None and now >= first


def _uncovered(loss: DataLoss, covered: Sequence[tuple[int, int]]) -> bool:
    return not any(lo <= loss.start and loss.end <= hi for lo, hi in covered)


def uncovered(losses: Iterable[DataLoss], covered: Sequence[tuple[int, int]]
              ) -> tuple[DataLoss, ...]:
    """``losses`` but those inside one of the ``covered`` offset ranges (held elsewhere:
    a remote tier)."""
    return tuple(x for x in losses if _uncovered(x, covered))


def checkpoint_losses(logdirs, p: PartitionDir, log_end: int, *,
                      journal_end: int | None = None, journal_path: str | None = None,
                      log_start: int | None = None,
                      covered: Sequence[tuple[int, int]] = ()) -> tuple[DataLoss, ...]:
    """Losses of ``p`` its root checkpoints (and ``journal_end``, the end our journal
    committed, from ``journal_path``) show against ``log_end``, the log's own end offset
    (after its last valid batch; not raised to a log start checkpointed past it).
    ``log_start``: the log start the read uses (a journal promise below it is not one).
    ``covered``: offset ranges held elsewhere (a remote tier): losses inside one are not
    reported. Reads only the root checkpoint files (cached by ``logdirs``)."""
    key = (p.topic, p.partition)
    tp = f"{p.topic}-{p.partition}"
    out: list[DataLoss] = []

    def lost(kind: str, start: int, end: int, path: str, what: str) -> None:
        out.append(DataLoss(p.topic, p.partition, kind, start, end, log_end, path,
                            f"{tp}: {what}; the segments in {p.path} hold records only "
                            f"below offset {log_end}: offsets {start}..{end - 1} are "
                            f"missing"))

    for kind, name, what in (
            ("high_watermark", REPLICATION_OFFSET_CHECKPOINT,
             "the high watermark is checkpointed at {v} (records below it were committed)"),
            ("recovery_point", RECOVERY_POINT_CHECKPOINT,
             "the recovery point is checkpointed at {v} (records below it were flushed)")):
        v = _entry(logdirs, p.root, name, key)
        if v is not None and v > log_end:
            lost(kind, log_end, v, join(p.root, name), what.format(v=v))
    if p.segments:
        first = p.segments[0].base_offset
        path = join(p.root, LOG_START_OFFSET_CHECKPOINT)
        v = _entry(logdirs, p.root, LOG_START_OFFSET_CHECKPOINT, key)
        if v is not None and v > log_end:
            lost("log_start", log_end, v, path,
                 f"the log start offset is checkpointed at {v} (a log start never passes "
                 f"the high watermark, so the log reached it)")
        elif v is not None and v < first and not _log_start_moved_to(logdirs, path, key,
                                                                     first):
            out.append(DataLoss(
                p.topic, p.partition, "log_start_below", v, first, first, path,
                f"{tp}: the log start offset is checkpointed at {v} but the first segment "
                f"in {p.path} is {_name(p.segments[0].path)} (base offset {first}): "
                f"offsets {v}..{first - 1} are missing (the segments before it are gone, or "
                f"in a remote tier: tiered storage is read with remoteStorage)"))
    if journal_end is not None and log_end < journal_end and (
            log_start is None or log_start < journal_end):
        lost("journal", log_end, journal_end, journal_path or p.root,
             f"the writer's journal committed records up to offset {journal_end}")
    return tuple(x for x in out if _uncovered(x, covered))


def rewritten(magic: int, attributes: int, is_control: bool, record_count: int,
              base_offset: int, last_offset: int) -> bool:
    """Whether a batch header shows a cleaner's (or a preserving writer's) rewrite: a v2
    batch with fewer records than the offsets it spans, an empty data batch, or a delete
    horizon set. Legacy entries cannot show it."""
    if magic != 2:
        return False
    return bool(attributes & ATTR_DELETE_HORIZON) or (record_count == 0 and not is_control) \
        or record_count < last_offset - base_offset + 1


def _row_rewritten(row) -> bool:
    if row is None:
        return False
    return rewritten(int(row["magic"]), int(row["attributes"]), bool(row["is_control"]),
                     int(row["record_count"]), int(row["base_offset"]),
                     int(row["last_offset"]))


def _journal_explains(logdirs, p: PartitionDir, start: int, end: int) -> bool:
    """Whether our writer's journal (at ``p``'s root) wrote ``[start, end)`` in one
    retained commit (a preserving write keeps its source's gaps), or a compaction it
    records (committed or in flight) cleaned the partition past ``end``."""
    journals = getattr(logdirs, "journals", None)
    if journals is None:
        return False
    try:
        st = journals(p.topic).states.get(p.root)
    except KafkaLogError:
        return False
    if st is None:
        return False
    q = str(p.partition)
    for c in st.commits:
        r = (c.get("partitions") or {}).get(q)
        if r is not None and int(r["start"]) <= start and end <= int(r["end"]):
            return True
        if int((c.get("cleaned_to") or {}).get(q, -1)) >= end:
            return True
    return st.pending is not None and st.pending.cleaned_to.get(p.partition, -1) >= end


def gap_loss(logdirs, p: PartitionDir, before: int, before_row, after: int, after_row
             ) -> DataLoss | None:
    """The loss between segment ``before`` (whose last batch is ``before_row``, a row of
    batch headers; None when it holds none) and segment ``after`` (> ``before``; first
    batch ``after_row``, may be None), or None when the offsets meet, compaction
    explains the gap (see the module docstring) or the log start checkpoint, read
    afresh, is now at or past its end (retention deleted it after the read's snapshot).
    Reads the cleaner checkpoint, the journal and that file only when there is a gap."""
    seg_b, seg_a = p.segments[before], p.segments[after]
    start = int(before_row["last_offset"]) + 1 if before_row is not None \
        else seg_b.base_offset
    end = seg_a.base_offset
    if start >= end:
        return None
    if _row_rewritten(before_row) or _row_rewritten(after_row) or seg_b.swap or seg_a.swap:
        return None         # a cleaner's rewrite, or a compaction's output being swapped in
    cleaned = _entry(logdirs, p.root, CLEANER_OFFSET_CHECKPOINT, (p.topic, p.partition))
    if cleaned is not None and cleaned >= end:
        return None
    if _journal_explains(logdirs, p, start, end):
        return None
    if _log_start_moved_to(logdirs, join(p.root, LOG_START_OFFSET_CHECKPOINT),
                           (p.topic, p.partition), end):
        # below the log start as it is now: retention or DeleteRecords removed these
        # records after the read's snapshot (checkpoint first, then the files), deleted
        # rather than lost; the read is the suffix a consumer would see
        return None
    tp = f"{p.topic}-{p.partition}"
    held = (f"{_name(seg_b.path)} ends at offset {start - 1}" if before_row is not None
            else f"{_name(seg_b.path)} holds no batch")
    between = after - before - 1
    skipped = f" (and the {between} segment(s) between hold none)" if between else ""
    return DataLoss(p.topic, p.partition, "gap", start, end, start, seg_a.path,
                    f"{tp}: offsets {start}..{end - 1} are missing: {held}{skipped} and "
                    f"the next segment {_name(seg_a.path)} starts at offset {end}; no "
                    f"compaction explains the gap (no cleaner-offset-checkpoint covers it "
                    f"and the batches around it are whole): a segment is missing or cut "
                    f"short")


class GapCheck:
    """Watches the windows of one read of ``[start, end)`` (from segment ``segment``
    on) for gaps at segment boundaries the range covers. Call :meth:`window` with each
    window; it returns the losses found there. A boundary the corruption policy skipped
    bytes before is not judged (the skipped range already says what is gone)."""

    def __init__(self, logdirs, p: PartitionDir, start: int, end: int, segment: int, stats):
        self.logdirs, self.p, self.start, self.end = logdirs, p, start, end
        self.segment = segment
        self.last = None
        self.stats = stats
        self.skips = len(stats.skipped)

    def window(self, w) -> list[DataLoss]:
        found = []
        if w.segment_index != self.segment and len(self.stats.skipped) == self.skips \
                and w.segment_index > self.segment:
            loss = gap_loss(self.logdirs, self.p, self.segment, self.last, w.segment_index,
                            w.headers[0] if len(w.headers) else None)
            if loss is not None and loss.overlaps(self.start, self.end):
                found.append(loss)
        self.segment = w.segment_index
        if len(w.headers):
            self.last = w.headers[-1]
        self.skips = len(self.stats.skipped)
        return found


def _last_row(logdirs, p: PartitionDir, i: int):
    """The header row of segment ``i``'s last valid batch (None when it holds none),
    scanned from its offset index's last entry."""
    idx = offset_index(logdirs, p, i)
    pos, check = 0, None
    if idx is not None and len(idx):
        check, pos = idx.last
        check = check if pos > 0 else None
    last = None
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, position=pos,
                          seek_check=check, one_segment=True, on_corruption="skip",
                          quiet=True, initial_window=1 << 16):
        last = w.headers[-1]
    return last


def _first_row(logdirs, p: PartitionDir, i: int):
    for w in scan_windows(logdirs.filesystem, p, segment_index=i, one_segment=True,
                          on_corruption="skip", quiet=True, initial_window=1 << 12):
        return w.headers[0]
    return None


def find_losses(logdirs, p: PartitionDir, state=None, *,
                covered: Sequence[tuple[int, int]] = ()) -> list[DataLoss]:
    """Every loss of partition ``p``: those of its state (``state``: its
    :class:`PartitionState`; computed when None) and the gaps between its segments,
    found by reading each segment's last batch (through its offset index) and, at a
    gap, the next segment's first. ``covered``: offset ranges held elsewhere (a remote
    tier), not reported."""
    if state is None:
        state = logdirs.state(p, timestamps=False, on_corruption="skip")
    out = list(state.losses)
    for j in range(1, len(p.segments)):
        before = _last_row(logdirs, p, j - 1) if p.segments[j - 1].size else None
        start = (int(before["last_offset"]) + 1 if before is not None
                 else p.segments[j - 1].base_offset)
        if start >= p.segments[j].base_offset:
            continue
        loss = gap_loss(logdirs, p, j - 1, before, j, _first_row(logdirs, p, j))
        if loss is not None and _uncovered(loss, covered):
            out.append(loss)
    return sorted(out, key=lambda x: (x.start, x.kind))


def report_losses(losses: Iterable[DataLoss], *, fail: bool, stats=None,
                  hint: str = "set failOnDataLoss=false to read what is there",
                  reported: set | None = None) -> None:
    """Raise :class:`DataLossError` for ``losses`` (``fail``), naming the first (and
    how many more), with ``hint``; else log one warning per partition and add them to
    ``stats.losses`` (a :class:`ReadStats`). ``reported``: keys already warned about
    (a stream's polls), updated."""
    losses = [x for x in losses
              if reported is None or (x.topic, x.partition, x.kind, x.start) not in reported]
    if not losses:
        return
    if fail:
        first = losses[0]
        more = f" (and {len(losses) - 1} more: " + "; ".join(
            x.message for x in losses[1:]) + ")" if len(losses) > 1 else ""
        raise DataLossError(f"data loss: {first.message}{more}; {hint}", path=first.path,
                            offset=first.start)
    by_tp: dict = {}
    for x in losses:
        by_tp.setdefault((x.topic, x.partition), []).append(x)
    for (t, q), xs in by_tp.items():
        log.warning("data loss in %s-%s (failOnDataLoss=false: reading what is there): %s",
                    t, q, "; ".join(f"{x.message} (promised by {x.path})" for x in xs))
    if stats is not None:
        stats.losses.extend(losses)
    if reported is not None:
        reported.update((x.topic, x.partition, x.kind, x.start) for x in losses)
