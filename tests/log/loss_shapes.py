"""Partitions that lost records (and look-alikes that did not), built with the test
log builder and then damaged as a bad copy, a lost file or a crash would.

Every shape is one topic ``t`` with one partition: three segments of ten one-record
batches, offsets 0..9, 10..19, 20..29, high watermark and recovery point 30, before the
damage. ``LOSSES[name](root)`` builds one and returns ``(kind, start, end)``: the loss
the log's own files show (kind as in ``DataLoss.kind``); ``NOT_LOSS[name](root)``
builds one that must read without a loss.
"""
from __future__ import annotations

import os
from pathlib import Path

from tests.log.logbuilder import LogDirBuilder, rec, segment_name

TOPIC = "t"


def _build(root: Path, *, hw: int | None = 30, log_start: int | None = None,
           compacted_boundary: bool = False, gap: int = 0):
    b = LogDirBuilder(root)
    p = b.partition(TOPIC, 0, index_interval_bytes=1)
    for s in range(3):
        if s:
            p.roll()
        for i in range(10):
            if compacted_boundary and s == 0 and i == 9:
                # the cleaner kept one record of a 3-offset batch: a rewritten batch
                p.append([rec(b"k", b"v%d" % i)], offset_deltas=[2])
                continue
            p.append([rec(b"k%d" % i, b"v%d-%d" % (s, i))])
        p.gap(gap)
    p.high_watermark = hw
    p.log_start_offset = log_start
    b.write()
    return b, p, root / f"{TOPIC}-0"


def _files(d: Path, base: int) -> list[Path]:
    return [d / segment_name(base, s) for s in (".log", ".index", ".timeindex")]


def _cut_at(p, d: Path, seg_base: int, offset: int, extra: int = 0) -> None:
    """Truncate segment ``seg_base`` at the batch holding ``offset`` (plus ``extra``
    bytes of it: a torn batch)."""
    pos = next(x.position for x in p.batches if x.base_offset == offset)
    os.truncate(d / segment_name(seg_base, ".log"), pos + extra)


def _checkpoint(root: Path, name: str, value: int | None) -> None:
    entries = [] if value is None else [f"{TOPIC} 0 {value}"]
    (root / name).write_text("\n".join(["0", str(len(entries)), *entries]) + "\n")


def hw_past_end(root: Path):
    """A copy cut short at a batch boundary: the high watermark says 30, the log ends
    at 26 (the recovery point agrees with the log: only the HW promises more)."""
    b, p, d = _build(root)
    _cut_at(p, d, 20, 26)
    _checkpoint(root, "recovery-point-offset-checkpoint", 20)
    return "high_watermark", 26, 30


def recovery_point_past_end(root: Path):
    """Flushed records gone: the recovery point says 30, the log ends at 26, the high
    watermark (26) does not promise more."""
    b, p, d = _build(root, hw=26)
    _cut_at(p, d, 20, 26)
    return "recovery_point", 26, 30


def missing_middle_segment(root: Path):
    """Segment 10 (offsets 10..19) is gone: 0..9 then 20..29."""
    b, p, d = _build(root)
    for f in _files(d, 10):
        f.unlink()
    return "gap", 10, 20


def log_start_past_end(root: Path):
    """The log start checkpoint says 35, past the log end 30 (Kafka's loader then
    deletes every segment: segment files were deleted)."""
    b, p, d = _build(root, hw=30, log_start=35)
    return "log_start", 30, 35


def torn_tail_hw_past(root: Path):
    """A crash's torn tail (half of batch 26 present), and the high watermark at 30
    past it: committed records are gone."""
    b, p, d = _build(root)
    _cut_at(p, d, 20, 26, extra=20)
    _checkpoint(root, "recovery-point-offset-checkpoint", 20)
    return "high_watermark", 26, 30


def truncated_middle_segment(root: Path):
    """Segment 10 cut after offset 14 (at a batch boundary): 15..19 are gone."""
    b, p, d = _build(root)
    _cut_at(p, d, 10, 15)
    return "gap", 15, 20


def missing_first_segment(root: Path):
    """DeleteRecords had moved the log start to 5 (checkpointed), then segment 0 was
    lost: the log start checkpoint (5) is below the first segment present (10)."""
    b, p, d = _build(root, log_start=5)
    for f in _files(d, 0):
        f.unlink()
    return "log_start_below", 5, 10


def emptied_middle_segment(root: Path):
    """Segment 10's .log truncated to 0 bytes."""
    b, p, d = _build(root)
    os.truncate(d / segment_name(10, ".log"), 0)
    return "gap", 10, 20


LOSSES = {f.__name__: f for f in (hw_past_end, recovery_point_past_end,
                                  missing_middle_segment, log_start_past_end,
                                  torn_tail_hw_past, truncated_middle_segment,
                                  missing_first_segment, emptied_middle_segment)}


# ---- look-alikes that lose nothing ---------------------------------------------------

def torn_tail_past_hw(root: Path):
    """A crash's torn tail past the high watermark (26): uncommitted, not lost. (The
    active segment's index files, which a crash leaves unreliable and recovery rebuilds,
    are gone.)"""
    b, p, d = _build(root, hw=26)
    _cut_at(p, d, 20, 26, extra=20)
    for f in _files(d, 20)[1:]:
        f.unlink()
    _checkpoint(root, "recovery-point-offset-checkpoint", 20)
    return 26


def compacted_gap_cleaner_checkpoint(root: Path):
    """Offsets jump 9 -> 15 and 24 -> 30 at segment boundaries, batches whole, and the
    cleaner checkpoint (30) covers both: compaction. (Read to the high watermark, 35.)"""
    b, p, d = _build(root, hw=35, gap=5)
    _checkpoint(root, "cleaner-offset-checkpoint", 30)
    _checkpoint(root, "recovery-point-offset-checkpoint", 35)
    return 35


def compacted_batch_at_boundary(root: Path):
    """The last batch of segment 0 holds one record of offsets 9..11 (the cleaner
    rewrote it) and segment 1 starts at 12: no cleaner checkpoint needed."""
    b, p, d = _build(root, hw=32, compacted_boundary=True)
    _checkpoint(root, "recovery-point-offset-checkpoint", 32)
    return 32


def delete_records_log_start(root: Path):
    """DeleteRecords moved the log start to 5, inside the first segment: records 0..4
    are invisible, not lost."""
    b, p, d = _build(root, log_start=5)
    return 30


NOT_LOSS = {f.__name__: f for f in (torn_tail_past_hw, compacted_gap_cleaner_checkpoint,
                                    compacted_batch_at_boundary, delete_records_log_start)}
