"""A Spark task opening a segment its driver listed and that is gone for good since.

The driver plans a read (the reader's ``partitions()``, no session); then retention
deletes the first segments of ``t-1`` and their renamed files are purged (Kafka's
``file.delete.delay.ms`` over), or a compaction replaces segments the same way; only then
does the task read. Spark's own Kafka source (KafkaDataConsumer) calls offsets that aged
out data loss: ``failOnDataLoss=true`` fails naming them, ``false`` warns and reads from
the earliest offset still there. A compaction's new files are what a consumer reads.
Expected rows come from the segment files left on disk, read with kafka-python.
"""
from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafkalog.errors import DataLossError, LogLayoutError
from spark_kafkalog.log import LogDirs, read_partition
from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from spark_kafkalog.log.maintain.retention import purge_deleted
from spark_kafkalog.log.read.purged import read_relisting
from spark_kafkalog.log.read.scan import ReadStats
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.packing import PackedSlices, pack_slices
from spark_kafkalog.spark.reader import KafkaLogReader
from tests.log.test_retention import build_log, segment_facts
from tests.log.test_retention_listing_race import _retain

LOSS_LOGGER = "spark_kafkalog.log.read.loss"


def records_on_disk(directory: str, lo: int, hi: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in ``[lo, hi)`` of the ``.log`` files there now,
    read by kafka-python (not this package)."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            recs = MemoryRecords(f.read())
        while recs.has_next():
            batch = recs.next_batch()
            if getattr(batch, "is_control_batch", False):
                continue            # transaction markers are not rows
            out += [(r.offset, r.value) for r in batch if lo <= r.offset < hi]
    return sorted(out)


def rows(batches) -> list[tuple[int, bytes]]:
    t = pa.Table.from_batches(list(batches))
    return list(zip(t["offset"].to_pylist(), t["value"].to_pylist()))


def planned(root: str, **options) -> tuple[KafkaLogReader, list]:
    """The reader and the tasks of partition 1 that hold offset 0 (first segment)."""
    reader = KafkaLogReader(parse_read_options({"path": root, "subscribe": "t",
                                                **options}))
    tasks = [t for t in reader.partitions() if any(
        s.partition == 1 for s in (t.slices if isinstance(t, PackedSlices) else (t,)))]
    return reader, tasks


def slices_of(task) -> tuple:
    return task.slices if isinstance(task, PackedSlices) else (task,)


def retain_purged(root: str) -> int:
    """Retention deletes t-1's first segments (about half its bytes) and the renamed
    files are purged; returns t-1's new log start (the first kept segment's base)."""
    d = f"{root}/t-1"
    keep = sum(s[1] for s in segment_facts(d)) // 2
    _retain(root, keep, purge=True)
    assert not os.path.exists(f"{d}/{0:020d}.log")
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
    first = segment_facts(d)[0][0]
    assert first > 0
    return first


def test_purged_segment_fails_the_task_with_data_loss(tmp_path):
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    reader, tasks = planned(root)
    assert len(tasks) == 1 and slices_of(tasks[0])[0].start_offset == 0
    end = slices_of(tasks[0])[-1].end_offset
    start = retain_purged(root)
    assert start < end
    with pytest.raises(DataLossError) as got:
        rows(reader.read(tasks[0]))
    msg = str(got.value)
    assert f"t-1: offsets 0..{start - 1} were removed by retention after the query " \
           "planned them" in msg
    assert f"{0:020d}.log" in msg and "failOnDataLoss" in msg
    assert got.value.offset == 0
    # nothing to list again (the partition dir is gone: the topic was deleted): the
    # layout error stands, not data loss
    shutil.rmtree(f"{root}/t-1")
    with pytest.raises(LogLayoutError, match="replaced or deleted") as again:
        rows(reader.read(tasks[0]))
    assert not isinstance(again.value, DataLossError)


def test_purged_segment_without_fail_reads_what_remains_and_warns_once(tmp_path, caplog):
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    reader, tasks = planned(root, failOnDataLoss="false")
    assert len(tasks) == 1
    end = slices_of(tasks[0])[-1].end_offset
    start = retain_purged(root)
    want = records_on_disk(f"{root}/t-1", start, end)
    assert want and want[0][0] == start and want[-1][0] == end - 1
    with caplog.at_level(logging.WARNING, logger=LOSS_LOGGER):
        got = rows(reader.read(tasks[0]))
    assert got == want
    warned = [r for r in caplog.records if r.name == LOSS_LOGGER]
    assert len(warned) == 1 and "t-1" in warned[0].getMessage()
    assert f"offsets 0..{start - 1}" in warned[0].getMessage()


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "no-fail"])
def test_packed_task_of_many_slices(tmp_path, caplog, fail):
    """The coalesced multi-slice path: a task of many small slices of t-1, several of
    them in the purged segments, each of which the kernel path gives up on."""
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    reader, tasks = planned(root, minPartitions="16", failOnDataLoss=str(fail).lower())
    # the slices of both partitions packed into one task, as a topic of many small
    # partitions is planned (spark/packing.py)
    slices = [s for t in reader.partitions() for s in slices_of(t)]
    [task] = pack_slices(slices, target_bytes=1 << 30, open_cost=1, parallelism=1)
    assert isinstance(task, PackedSlices) and len(task.slices) == len(slices) >= 16
    ones = [s for s in task.slices if s.partition == 1]
    assert ones[0].start_offset == 0 and len(ones) > 2
    start = retain_purged(root)
    starts = {q: segment_facts(f"{root}/t-{q}")[0][0] for q in (0, 1)}
    assert starts[1] == start and starts[0] > 0        # retention.bytes went for both
    lost = [s for s in ones if s.end_offset <= start]
    assert len(lost) >= 2                   # more than one slice lies in what went
    if fail:
        # the task's first slice (t-0 from offset 0) is the first to find its records gone
        first = task.slices[0]
        assert first.partition == 0 and first.end_offset <= starts[0]
        with pytest.raises(DataLossError, match=rf"t-0: offsets 0\.\.{first.end_offset - 1} "
                                                r"were removed by retention .* the log starts "
                                                rf"at offset {starts[0]} now"):
            rows(reader.read(task))
        return
    want = []
    for s in task.slices:
        d = f"{root}/t-{s.partition}"
        lo = max(s.start_offset, starts[s.partition])
        want += [(s.partition,) + r for r in records_on_disk(d, lo, s.end_offset)]
    with caplog.at_level(logging.WARNING, logger=LOSS_LOGGER):
        t = pa.Table.from_batches(list(reader.read(task)))
    got = list(zip(t["partition"].to_pylist(), t["offset"].to_pylist(),
                   t["value"].to_pylist()))
    assert got == want
    warned = [r.getMessage() for r in caplog.records if r.name == LOSS_LOGGER]
    # one warning per partition, though several slices of each lay in the purged files
    assert len(warned) == 2 and "data loss in t-0" in warned[0] and \
        "data loss in t-1" in warned[1] and \
        f"offsets 0..{ones[0].end_offset - 1} were removed" in warned[1] and \
        f"the log starts at offset {start} now" in warned[1]


def test_compaction_between_plan_and_task_reads_the_new_files(tmp_path):
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    reader, tasks = planned(root)
    s = slices_of(tasks[0])[0]
    d = f"{root}/t-1"
    before = records_on_disk(d, s.start_offset, s.end_offset)
    compact_topic(root, "t", CompactSettings(force=True))
    purge_deleted(LogDirs(root), "t", delay_ms=0)
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
    want = records_on_disk(d, s.start_offset, s.end_offset)
    assert 0 < len(want) < len(before)      # the compaction dropped superseded records
    assert rows(reader.read(tasks[0])) == want


def test_read_relisting_resumes_after_rows_already_yielded(tmp_path):
    """The segment goes while the read is under way (after it yielded rows of the first
    segment): the rows after the last one yielded, never one twice."""
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    logdirs = LogDirs(root)
    p = logdirs.partition("t", 1)
    end = logdirs.state(p).high_watermark
    assert len(p.segments) >= 4
    before = records_on_disk(f"{root}/t-1", 0, end)
    stats = ReadStats()
    it = read_relisting(read_partition, LogDirs(root), p, start_offset=0, end_offset=end,
                        fail_on_data_loss=False, loss_hint="hint", window_bytes=512,
                        include_headers=False, stats=stats)
    first = next(it)
    seen = first["offset"].to_pylist()
    assert seen[-1] < p.segments[1].base_offset        # still in the first segment
    start = retain_purged(root)
    assert start > seen[-1] + 1
    got = [(o, v) for b in it for o, v in zip(b["offset"].to_pylist(),
                                              b["value"].to_pylist())]
    # what the open first segment still gave, then the log from its new start
    low = [r for r in got if r[0] < start]
    assert low == [r for r in before if r[0] > seen[-1]][:len(low)]
    assert [r for r in got if r[0] >= start] == records_on_disk(f"{root}/t-1", start, end)
    assert [(x.kind, x.end) for x in stats.losses] == [("retention", start)]
    assert stats.losses[0].start == (low[-1][0] + 1 if low else seen[-1] + 1)


def test_stream_micro_batch_compacted_after_its_listing(tmp_path, monkeypatch):
    """A stream's task lists its partition again before reading (read_live_slice); a
    compaction replacing (and purging) the segments right after that listing: the task
    reads the new files, as a consumer would."""
    from spark_kafkalog.log.read import discovery
    from spark_kafkalog.spark.stream_reader import read_live_slice

    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    _, tasks = planned(root)
    s = slices_of(tasks[0])[0]
    d = f"{root}/t-1"
    before = records_on_disk(d, s.start_offset, s.end_offset)
    real, calls = discovery.list_segments, []

    def list_then_compact(fs, path, **kw):
        listed = real(fs, path, **kw)
        if not calls:
            calls.append(path)
            compact_topic(root, "t", CompactSettings(force=True))
            purge_deleted(LogDirs(root), "t", delay_ms=0)
        return listed

    monkeypatch.setattr(discovery, "list_segments", list_then_compact)
    opts = parse_read_options({"path": root, "subscribe": "t"}, streaming=True)
    got = rows(read_live_slice(opts, s))
    assert calls == [d]
    want = records_on_disk(d, s.start_offset, s.end_offset)
    assert 0 < len(want) < len(before) and got == want


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "no-fail"])
def test_tiered_read_local_segment_purged(tmp_path, caplog, fail):
    """A read over both tiers (remoteStorage); planning gives the remote tier's slices
    and the local ones. A local segment deleted by retention before its task (log start
    checkpoint first, then the files, as a broker does) is data loss, or the rest of the
    slice; the remote slice reads as planned. A local segment gone while the log start
    stays below the local segments (tiered storage's local retention: the records are
    in the remote tier, which the task's plan did not list) keeps the layout error."""
    from tests.log.tiered_builder import TOPIC, build, tier

    p, full, bases = build(tmp_path)
    data, remote = tier(tmp_path, p, full, bases)
    reader = KafkaLogReader(parse_read_options({
        "path": data, "subscribe": TOPIC, "remoteStorage": remote,
        "failOnDataLoss": str(fail).lower()}))
    local_start, kept = bases[3], bases[4]
    tasks = reader.partitions()
    remote_task = [t for t in tasks if t.tier is not None]
    [local_task] = [t for t in tasks if t.tier is None]
    assert local_task.start_offset == local_start < kept < local_task.end_offset
    d = f"{data}/{TOPIC}-0"
    gone = [n for n in os.listdir(d) if n.startswith(f"{local_start:020d}.")]
    saved = {n: Path(d, n).read_bytes() for n in gone}
    for n in gone:
        os.remove(os.path.join(d, n))
    with pytest.raises(LogLayoutError, match="replaced or deleted") as got:
        rows(reader.read(local_task))        # log start still 0: in the remote tier?
    assert not isinstance(got.value, DataLossError)
    for n, b in saved.items():              # now as retention does it: checkpoint first
        Path(d, n).write_bytes(b)
    tasks = reader.partitions()
    [local_task] = [t for t in tasks if t.tier is None]
    with open(f"{data}/log-start-offset-checkpoint", "w") as f:
        f.write(f"0\n1\n{TOPIC} 0 {kept}\n")
    for n in gone:
        os.remove(os.path.join(d, n))
    if fail:
        with pytest.raises(DataLossError, match=rf"{TOPIC}-0: offsets {local_start}\.\."
                                                rf"{kept - 1} were removed by retention"):
            rows(reader.read(local_task))
        return
    with caplog.at_level(logging.WARNING, logger=LOSS_LOGGER):
        got_local = rows(reader.read(local_task))
    assert got_local == records_on_disk(d, kept, local_task.end_offset)
    assert got_local[0][0] == kept
    warned = [r.getMessage() for r in caplog.records if r.name == LOSS_LOGGER]
    assert len(warned) == 1 and f"{TOPIC}-0: offsets {local_start}..{kept - 1}" in warned[0]
    remote_dirs = {r for r, _, ns in os.walk(remote) for n in ns if n.endswith(".log")}
    want = sorted(x for r in remote_dirs for x in records_on_disk(r, 0, local_start))
    assert [x for t in remote_task for x in rows(reader.read(t))] == want
