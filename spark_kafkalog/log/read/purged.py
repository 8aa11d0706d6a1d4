"""A planned read whose segment was deleted for good before the read opened it.

A Spark task reads a range the driver listed earlier. Retention (segments renamed to
``.deleted``, removed ``file.delete.delay.ms`` later) or a compaction (replaced segments
renamed the same way) may remove a listed segment's file before the task opens it:
:mod:`.pin` then raises LogLayoutError caused by FileNotFoundError. A task cannot plan
again, so :func:`read_relisting` lists that one partition dir again and decides as
Spark's own Kafka source does when offsets it was given aged out (KafkaDataConsumer):

- the log start now (the log-start-offset-checkpoint entry read afresh, or the first
  segment's base offset when higher) lies above offsets still to read: retention removed
  them after the read planned them. DataLossError under ``fail_on_data_loss`` naming the
  topic-partition, the offsets and the gone segment file; otherwise one warning per
  partition and the read goes on from the log start;
- the new listing still holds the offsets still to read (a compaction replaced the
  segment): the rest is read from the new files, what a consumer sees after compaction;
- anything else (the partition dir or its segments gone, the log now ending before the
  offsets still to read, a log start checkpointed below the local segments: a remote
  tier's, which this listing cannot see): the LogLayoutError stands.

``read_table`` does not come here: it reads the whole topic again at a new snapshot.
"""
from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable, Iterator

import pyarrow as pa

from spark_kafkalog.errors import KafkaLogError, LogLayoutError
from spark_kafkalog.log.files.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_checkpoint
from spark_kafkalog.log.io import join
from spark_kafkalog.log.model import DataLoss, PartitionDir, Segment
from spark_kafkalog.log.read.discovery import LogDirs, list_segments
from spark_kafkalog.log.read.loss import report_losses
from spark_kafkalog.log.read.pin import unswapped
from spark_kafkalog.log.read.scan import ReadStats, segment_next_offset

__all__ = ["read_relisting", "RELISTS", "RETENTION"]

log = logging.getLogger(__name__)

#: times one read lists its partition again (segments may keep going while it reads)
RELISTS = 3

#: DataLoss.kind of planned records retention removed before a task read them
RETENTION = "retention"


def _gone(err: LogLayoutError, p: PartitionDir) -> Segment | None:
    """The local segment of ``p`` whose file ``err`` (from :mod:`.pin`) says is gone for
    good, or None when ``err`` is another failure (a remote object, a listing)."""
    if not isinstance(err.__cause__, FileNotFoundError) or err.path is None:
        return None
    for seg in p.segments:
        # pin names the listed path, or the name a compaction or retention gave it
        if seg.file_id is not None and err.path.startswith(unswapped(seg.path)):
            return seg
    return None


def _relisted(fs, p: PartitionDir) -> PartitionDir | None:
    """``p``'s directory listed again (this partition only), or None when it is gone or
    holds no segment."""
    try:
        segments, snapshots = list_segments(fs, p.path)
    except KafkaLogError:
        return None
    if not segments:
        return None
    return replace(p, segments=segments, snapshots=snapshots, end_offset=None)


def _checkpointed(fs, p: PartitionDir) -> int | None:
    """``p``'s log-start-offset-checkpoint entry, read now (not a cached copy)."""
    try:
        return read_checkpoint(fs, join(p.root, LOG_START_OFFSET_CHECKPOINT)).get(
            (p.topic, p.partition))
    except KafkaLogError:
        return None


def _reaches(fs, p: PartitionDir, offset: int) -> bool:
    """Whether the segments of ``p`` hold offsets at or past ``offset`` (the last
    segment's batch headers are scanned only when it starts at or below ``offset``)."""
    last = p.segments[-1]
    return last.base_offset > offset or segment_next_offset(fs, last) > offset


def read_relisting(read: Callable[..., Iterator[pa.RecordBatch]], logdirs, p: PartitionDir,
                   *, start_offset: int, end_offset: int, fail_on_data_loss: bool = True,
                   loss_hint: str, stats: ReadStats | None = None,
                   warned: set | None = None, **kwargs) -> Iterator[pa.RecordBatch]:
    """``read(logdirs, p, start_offset=..., end_offset=..., fail_on_data_loss=...,
    loss_hint=..., stats=..., **kwargs)`` (:func:`~.reader.read_partition`'s signature),
    carried on from a new listing of ``p`` when a segment it listed is gone for good
    (see the module doc). Rows already yielded are never yielded again: the read goes
    on after the last offset yielded.

    Raises DataLossError (``fail_on_data_loss``) naming the topic-partition, the
    offsets retention removed and the segment file; otherwise warns once per partition
    (``warned``: ``(topic, partition)`` already warned about by the caller's task,
    updated) and adds the loss to ``stats.losses``. The LogLayoutError stands when the
    new listing explains nothing."""
    stats = stats if stats is not None else ReadStats()
    at, current, relists = start_offset, p, 0
    while at < end_offset:
        try:
            for batch in read(logdirs, current, start_offset=at, end_offset=end_offset,
                              fail_on_data_loss=fail_on_data_loss, loss_hint=loss_hint,
                              stats=stats, **kwargs):
                if batch.num_rows:
                    at = int(batch.column("offset")[batch.num_rows - 1].as_py()) + 1
                yield batch
            return
        except LogLayoutError as err:
            gone = _gone(err, current)
            now = _relisted(logdirs.filesystem, current) \
                if gone is not None and relists < RELISTS else None
            if now is None:
                raise
            relists += 1
            first = now.segments[0].base_offset
            ck = _checkpointed(logdirs.filesystem, now)
            # Kafka's log start: the entry, written only above the first segment (or
            # below it with a remote tier holding the records between)
            start = first if ck is None else max(first, ck)
            tp = f"{p.topic}-{p.partition}"
            if ck is not None and ck < first and at < first:
                # the log starts below its local segments: a remote tier (tiered
                # storage's local retention moved them there) or a loss the read's plan
                # did not see; a listing of this dir cannot tell: the error stands
                raise
            if start > at:
                upto = min(start, end_offset)
                name = gone.path.rsplit("/", 1)[-1]
                loss = DataLoss(
                    p.topic, p.partition, RETENTION, at, upto, start, gone.path,
                    f"{tp}: offsets {at}..{upto - 1} were removed by retention after the "
                    f"query planned them: segment {name} (base offset {gone.base_offset}) "
                    f"is deleted and the log starts at offset {start} now")
                try:
                    _report(loss, fail_on_data_loss, stats, loss_hint, warned)
                except KafkaLogError as lost:
                    raise lost from err
                at = start
            elif not _reaches(logdirs.filesystem, now, at):
                raise
            else:
                log.info("%s: %s; reading offsets %d..%d from the partition as it is now "
                         "(a compaction replaced the segment)", tp, err, at, end_offset - 1)
            current = now
            if isinstance(logdirs, LogDirs):
                # its cached checkpoints and journal predate the change (a compaction's
                # cleaner checkpoint and journal entry explain gaps in its new files)
                logdirs = LogDirs(list(logdirs.roots), logdirs.filesystem_options,
                                  include_internal=logdirs.include_internal,
                                  filesystem=logdirs.filesystem)
            if "start_position" in kwargs:
                kwargs["start_position"] = None     # a byte position in the listed files


def _report(loss: DataLoss, fail: bool, stats: ReadStats, hint: str,
            warned: set | None) -> None:
    key = (loss.topic, loss.partition)
    if fail or warned is None or key not in warned:
        report_losses([loss], fail=fail, stats=stats, hint=hint)
        if warned is not None:
            warned.add(key)
        return
    log.debug("%s (already warned about this partition)", loss.message)
    stats.losses.append(loss)
