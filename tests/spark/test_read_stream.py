"""spark.readStream.format("kafkalog"): offsets, limits, the live log, exactly once.

Two levels (STYLE 8): the reader's protocol methods called directly on logs built by
``tests/log/logbuilder.py`` (fast: limits, snapshots, data loss, torn tails, idle
polls), and end-to-end queries on the shared session with ``trigger(availableNow=True)``
into a parquet sink, compared with the batch reader's table of the final log.
"""
from __future__ import annotations

import math
import os
import pickle
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spark_kafkalog.errors import DataLossError, InvalidOptionError
from spark_kafkalog.spark.admission import TriggerDelay
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.stream_reader import (
    KafkaLogStreamReader,
    from_offset,
    offsets_behind_latest,
    to_offset,
)
from tests.log.logbuilder import LogDirBuilder, sample_records


# -- helpers ----------------------------------------------------------------------------------

def reader(root, **options) -> KafkaLogStreamReader:
    opts = {"path": str(root), "subscribe": "t", "startingOffsets": "earliest", **options}
    return KafkaLogDataSource(opts).streamReader(None)


def build(root: Path, counts, *, topic="t", batch=10, hw=False) -> dict:
    """Partitions of ``topic`` holding ``counts[i]`` records in batches of ``batch``;
    returns {partition: PartitionBuilder}. No high-watermark entry unless ``hw``."""
    b = LogDirBuilder(root)
    parts = {}
    for n, cnt in enumerate(counts):
        p = b.partition(topic, n, index_interval_bytes=100)
        for i in range(0, cnt, batch):
            p.append(sample_records(min(batch, cnt - i), b"%s-%d" % (topic.encode(), n)))
        if hw:
            p.high_watermark = p.log_end_offset
        parts[n] = p
    b.write()
    return parts


def raw_append(root: Path, p, n: int, *, cut: int = 0) -> bytes:
    """Append a batch of ``n`` records to ``p``'s active segment the way a broker does
    (bytes at the end of the .log; no index entry); with ``cut`` only the first bytes of
    it, less the last ``cut`` (a batch still being written). Returns the missing tail."""
    seg_base, buf = p.segments[-1]
    before = len(buf)
    p.append(sample_records(n, b"raw"))
    data = bytes(buf[before:])
    path = root / p.dir_name / f"{seg_base:020d}.log"
    with open(path, "ab") as f:
        f.write(data[:len(data) - cut])
    return data[len(data) - cut:]


def rows_of(r: KafkaLogStreamReader, start, end) -> list[tuple]:
    out = []
    for part in r.partitions(start, end):
        clone = pickle.loads(pickle.dumps(r))            # what an executor gets
        for b in clone.read(pickle.loads(pickle.dumps(part))):
            out += list(zip(b.column("topic").to_pylist(), b.column("partition").to_pylist(),
                            b.column("offset").to_pylist()))
    return out


def kafka_rate_limit(limit, backlogs):
    """Spark's KafkaMicroBatchStream.rateLimit, computed here independently."""
    total = sum(backlogs.values())
    out = {}
    for tp, size in backlogs.items():
        prorate = limit * size / total
        out[tp] = min(size, math.ceil(prorate) if prorate < 1 else math.floor(prorate))
    return out


# -- options ------------------------------------------------------------------------------------

def test_options_split_by_mode():
    base = {"path": "/logs", "subscribe": "t"}
    # schema() accepts what holds in either mode
    KafkaLogDataSource({**base, "startingOffsets": "latest"}).schema()
    KafkaLogDataSource({**base, "endingOffsets": "latest"}).schema()
    with pytest.raises(InvalidOptionError, match="can't be latest for batch"):
        KafkaLogDataSource({**base, "startingOffsets": "latest"}).reader(None)
    o = parse_read_options(base, streaming=True)
    assert o.starting.__class__.__name__ == "Latest" and o.fail_on_data_loss
    bad = [({"endingOffsets": "latest"}, "endingOffsets is not valid in streaming"),
           ({"endingTimestamp": "1"}, "endingTimestamp is not valid in streaming"),
           ({"memoryMap": "true"}, "memoryMap=true is not supported in streaming"),
           ({"maxTriggerDelay": "1m"}, "maxTriggerDelay only bounds"),
           ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, "higher than"),
           ({"maxBytesPerTrigger": "lots"}, "maxBytesPerTrigger must be a byte size")]
    for extra, message in bad:
        with pytest.raises(InvalidOptionError, match=message):
            KafkaLogDataSource({**base, **extra}).streamReader(None)
    o = parse_read_options({**base, "minOffsetsPerTrigger": "5", "maxBytesPerTrigger": "1m"},
                           streaming=True)
    assert o.max_trigger_delay == "15m" and o.max_bytes_per_trigger == 1 << 20


def test_offsets_are_canonical_json():
    pos = {("b", 10): 1, ("a", 2): 5, ("b", 2): 3, ("a", 0): 0}
    off = to_offset(pos)
    assert list(off) == ["a", "b"] and list(off["b"]) == ["2", "10"]
    assert from_offset(off) == pos and to_offset(from_offset(off)) == off


# -- starting positions and idle polls ---------------------------------------------------------

def test_starting_positions(tmp_path):
    build(tmp_path, [30, 20])
    assert reader(tmp_path).initialOffset() == {"t": {"0": 0, "1": 0}}
    assert reader(tmp_path, startingOffsets="latest").initialOffset() == {"t": {"0": 30, "1": 20}}
    spec = reader(tmp_path, startingOffsets='{"t":{"1":5,"0":-1}}')
    assert spec.initialOffset() == {"t": {"0": 30, "1": 5}}
    # sample_records timestamps are base_timestamp + offset: ts 1_700_000_000_012 -> 12
    ts = reader(tmp_path, startingOffsets="latest", startingTimestamp="1700000000012")
    assert ts.initialOffset() == {"t": {"0": 12, "1": 12}}
    by_ts = reader(tmp_path, startingOffsetsByTimestamp='{"t":{"0":1700000000003,"1":-2}}')
    assert by_ts.initialOffset() == {"t": {"0": 3, "1": 0}}
    with pytest.raises(InvalidOptionError, match="every assigned"):
        reader(tmp_path, startingOffsets='{"t":{"0":1}}').initialOffset()


def test_initial_offset_is_computed_once(tmp_path):
    parts = build(tmp_path, [10])
    r = reader(tmp_path, startingOffsets="latest")
    first = r.initialOffset()
    raw_append(tmp_path, parts[0], 5)
    assert r.initialOffset() is first


def test_idle_polls_return_start_itself(tmp_path):
    build(tmp_path, [25, 3])
    r = reader(tmp_path)
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    assert end == {"t": {"0": 25, "1": 3}}
    for _ in range(20):
        assert r.latestOffset(end, ReadAllAvailable()) is end
    assert r.partitions(end, end) == []


# -- admission control -------------------------------------------------------------------------

def test_max_offsets_split_is_kafkas_rate_limit(tmp_path):
    build(tmp_path, [1000, 100, 1])
    r = reader(tmp_path, maxOffsetsPerTrigger="10")
    assert r.getDefaultReadLimit() == ReadMaxRows(10)
    start = r.initialOffset()
    end = from_offset(r.latestOffset(start, r.getDefaultReadLimit()))
    want = kafka_rate_limit(10, {("t", 0): 1000, ("t", 1): 100, ("t", 2): 1})
    assert want == {("t", 0): 9, ("t", 1): 1, ("t", 2): 1}
    assert end == want
    # Trigger.Once (ReadAllAvailable) wins over the option
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 1000, "1": 100, "2": 1}}


def test_min_offsets_and_max_trigger_delay(tmp_path):
    parts = build(tmp_path, [5])
    now = [1000.0]
    r = reader(tmp_path, minOffsetsPerTrigger="10", maxTriggerDelay="30s")
    r._delay = TriggerDelay(10, 30_000, lambda: now[0])
    start = r.initialOffset()
    limit = r.getDefaultReadLimit()
    # the first trigger of a reader never waits (Kafka's lastTriggerMillis starts at 0)
    end = r.latestOffset(start, limit)
    assert end == {"t": {"0": 5}}
    raw_append(tmp_path, parts[0], 3)
    now[0] += 1
    assert r.latestOffset(end, limit) is end          # 3 < 10 new offsets: wait
    raw_append(tmp_path, parts[0], 7)
    now[0] += 1
    assert r.latestOffset(end, limit) == {"t": {"0": 15}}
    raw_append(tmp_path, parts[0], 1)
    now[0] += 31                                        # the delay passed: go with 1
    assert r.latestOffset({"t": {"0": 15}}, limit) == {"t": {"0": 16}}


def test_max_bytes_per_trigger_cuts_at_batch_boundaries(tmp_path):
    parts = build(tmp_path, [2000])
    r = reader(tmp_path, maxBytesPerTrigger="4k")
    start = r.initialOffset()
    seen, batches = [], 0
    # cuts are offset-index entries (a batch's last offset, read from that batch's
    # position): each micro-batch is about 4 KiB of log
    cuts = {b.last_offset for b in parts[0].batches} | {2000}
    while True:
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end is start:
            break
        assert from_offset(end)[("t", 0)] in cuts
        seen += rows_of(r, start, end)
        start, batches = end, batches + 1
    assert [o for _, _, o in seen] == list(range(2000))
    size = (tmp_path / "t-0" / f"{0:020d}.log").stat().st_size
    assert batches >= size // 8192


def test_available_now_snapshot_holds(tmp_path):
    parts = build(tmp_path, [100, 10])
    r = reader(tmp_path, maxOffsetsPerTrigger="30")
    r.prepareForTriggerAvailableNow()
    raw_append(tmp_path, parts[0], 50)                 # after the snapshot: next run
    build_extra = LogDirBuilder(tmp_path)
    build_extra.write_checkpoints = False
    p = build_extra.partition("t", 2)
    p.append(sample_records(5, b"new"))
    build_extra.write()                                # a new partition: next run too
    start = r.initialOffset()
    got = []
    for _ in range(10):
        end = r.latestOffset(start, r.getDefaultReadLimit())
        if end is start:
            break
        got += rows_of(r, start, end)
        start = end
    # partition 2 joined after the snapshot: its position is known (0), nothing read
    assert start == {"t": {"0": 100, "1": 10, "2": 0}}
    assert len(got) == 110
    # the next run sees the appends and the new partition (from its log start)
    r2 = reader(tmp_path)
    r2.prepareForTriggerAvailableNow()
    end = r2.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 150, "1": 10, "2": 5}}
    assert len(rows_of(r2, start, end)) == 55


# -- the live log -----------------------------------------------------------------------------

def test_torn_tail_completes_later(tmp_path):
    parts = build(tmp_path, [20])
    r = reader(tmp_path, onCorruption="fail")
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    rest = raw_append(tmp_path, parts[0], 4, cut=9)
    assert r.latestOffset(start, ReadAllAvailable()) is start   # in flight: not yet
    with open(tmp_path / "t-0" / f"{0:020d}.log", "ab") as f:
        f.write(rest)
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 24}}
    assert [o for _, _, o in rows_of(r, start, end)] == [20, 21, 22, 23]


def test_subscribe_pattern_picks_up_new_topics(tmp_path):
    build(tmp_path, [5], topic="in.a")
    r = KafkaLogDataSource({"path": str(tmp_path), "subscribePattern": r"in\..*",
                            "startingOffsets": "earliest"}).streamReader(None)
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    b = LogDirBuilder(tmp_path)
    b.write_checkpoints = False
    p = b.partition("in.b", 0)
    p.append(sample_records(3, b"b"))
    q = b.partition("other", 0)
    q.append(sample_records(3, b"o"))
    b.write()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"in.a": {"0": 5}, "in.b": {"0": 3}}
    assert sorted(rows_of(r, start, end)) == [("in.b", 0, i) for i in range(3)]


def _retention(tmp_path, parts, new_start):
    """Delete partition 0's first segment and checkpoint the new log start, as a
    broker's retention does."""
    d = tmp_path / "t-0"
    for suffix in (".log", ".index", ".timeindex"):
        (d / f"{0:020d}{suffix}").unlink(missing_ok=True)
    (tmp_path / "log-start-offset-checkpoint").write_text(f"0\n1\nt 0 {new_start}\n")


def _two_segments(tmp_path):
    b = LogDirBuilder(tmp_path)
    p = b.partition("t", 0, index_interval_bytes=100)
    for _ in range(3):
        p.append(sample_records(10, b"a"))
    p.roll()
    for _ in range(3):
        p.append(sample_records(10, b"b"))
    b.write()
    return p


@pytest.mark.parametrize("fail", [True, False])
def test_retention_deletes_a_planned_segment(tmp_path, fail):
    _two_segments(tmp_path)
    r = reader(tmp_path, failOnDataLoss=str(fail).lower())
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    planned = r.partitions(start, end)
    _retention(tmp_path, None, 30)
    clone = pickle.loads(pickle.dumps(r))
    if fail:
        with pytest.raises(DataLossError, match="Cannot fetch offset 0 .*failOnDataLoss"):
            for part in planned:
                list(clone.read(part))
        return
    got = [o for part in planned for b in clone.read(part) for o in b.column("offset").to_pylist()]
    assert got == list(range(30, 60))
    # the next plan starts at the log start too
    assert [o for _, _, o in rows_of(r, start, end)] == list(range(30, 60))


@pytest.mark.parametrize("fail", [True, False])
def test_truncated_partition_is_data_loss(tmp_path, fail):
    build(tmp_path, [40])
    r = reader(tmp_path, failOnDataLoss=str(fail).lower())
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    log = tmp_path / "t-0" / f"{0:020d}.log"
    # keep the first two batches (an unclean leader election truncating the log)
    parts = build(tmp_path / "scratch", [20])
    os.truncate(log, (tmp_path / "scratch" / "t-0" / f"{0:020d}.log").stat().st_size)
    del parts
    if fail:
        with pytest.raises(DataLossError, match="offset was changed from 40 to 20"):
            r.latestOffset(start, ReadAllAvailable())
        return
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 20}}


def test_vanished_partition_is_data_loss(tmp_path):
    import shutil
    build(tmp_path, [5, 5])
    r = KafkaLogDataSource({"path": str(tmp_path), "subscribePattern": "t",
                            "startingOffsets": "earliest"}).streamReader(None)
    start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    shutil.rmtree(tmp_path / "t-1")
    with pytest.raises(DataLossError, match="t-1 are gone"):
        r.latestOffset(start, ReadAllAvailable())


def test_lag_helper():
    progress = {"endOffset": '{"t":{"0":5,"1":10}}', "latestOffset": '{"t":{"0":9,"1":10}}'}
    assert offsets_behind_latest(progress) == {
        "minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 4, "avgOffsetsBehindLatest": 2.0}


# -- end to end --------------------------------------------------------------------------------

def _stream(spark, root, ckpt, sink, **options):
    df = spark.readStream.format("kafkalog").option("path", str(root)) \
        .option("subscribe", "t").option("startingOffsets", "earliest")
    for k, v in options.items():
        df = df.option(k, v)
    q = df.load().writeStream.format("parquet").option("path", str(sink)) \
        .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
    q.awaitTermination()
    return q


def _write(spark, root, n, tag):
    rows = [(f"k{i}".encode(), f"{tag}-{i}".encode()) for i in range(n)]
    spark.createDataFrame(rows, "key binary, value binary").write.format("kafkalog") \
        .option("path", str(root)).option("topic", "t").option("partitions", "3") \
        .mode("append").save()


def _check_exactly_once(spark, root, sink):
    got = spark.read.parquet(str(sink)).select("topic", "partition", "offset", "value")
    want = spark.read.format("kafkalog").option("path", str(root)).option("subscribe", "t") \
        .load().select("topic", "partition", "offset", "value")
    g = sorted(tuple(r) for r in got.collect())
    w = sorted(tuple(r) for r in want.collect())
    assert len(g) == len(set((t, p, o) for t, p, o, _ in g))
    assert g == w
    return g


def _set_high_watermark(root: Path, topic: str, partition: int, hw: int) -> None:
    """Rewrite one entry of the root's replication-offset-checkpoint (what a broker does
    every few seconds)."""
    path = root / "replication-offset-checkpoint"
    lines = path.read_text().split("\n")
    entries = {tuple(x.split()[:2]): x.split()[2] for x in lines[2:] if x.strip()}
    entries[(topic, str(partition))] = str(hw)
    body = [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    path.write_text("\n".join(["0", str(len(body))] + body) + "\n")


def test_exactly_once_across_appends_and_restarts(spark, tmp_path):
    root, ckpt, sink = tmp_path / "log", tmp_path / "ckpt", tmp_path / "sink"
    _write(spark, root, 300, "a")
    _stream(spark, root, ckpt, sink, maxOffsetsPerTrigger="70")
    _check_exactly_once(spark, root, sink)
    _write(spark, root, 200, "b")
    # a broker-style append to partition 0: one whole batch and one still being written,
    # the high watermark checkpointed at the whole one (a broker's high watermark never
    # passes what it appended: one checkpointed past the last complete batch is data
    # loss, tests/spark/test_read_loss.py)
    from tests.log.logbuilder import PartitionBuilder
    from spark_kafkalog.log import LogDirs
    d = root / "t-0"
    leo = LogDirs(str(root)).state(LogDirs(str(root)).partition("t", 0)).log_end_offset
    pb = PartitionBuilder("t", 0)
    pb.segments = [(_active_base(d), bytearray())]
    pb.next_offset = leo
    raw_append(root, pb, 6)
    rest = raw_append(root, pb, 4, cut=11)
    _set_high_watermark(root, "t", 0, leo + 6)
    _stream(spark, root, ckpt, sink)
    assert len(_check_exactly_once(spark, root, sink)) == 506
    with open(d / f"{_active_base(d):020d}.log", "ab") as f:
        f.write(rest)
    _set_high_watermark(root, "t", 0, leo + 10)
    _stream(spark, root, ckpt, sink, maxOffsetsPerTrigger="3")
    assert len(_check_exactly_once(spark, root, sink)) == 510
    # idle runs on the same checkpoint add no offset-log entry
    offsets = sorted(os.listdir(ckpt / "offsets"))
    for _ in range(2):
        _stream(spark, root, ckpt, sink)
    assert sorted(os.listdir(ckpt / "offsets")) == offsets


def test_twenty_idle_triggers_add_no_offset_log_entry(spark, tmp_path):
    """A running query over a log that does not change: each idle trigger calls
    latestOffset, gets its start back, and Spark writes no offset-log entry. Counted with
    the listener's idle events (one per idle trigger with the no-data interval at 0)."""
    import threading

    from pyspark.sql.streaming import StreamingQueryListener

    root, ckpt, sink = tmp_path / "log", tmp_path / "ckpt", tmp_path / "sink"
    _write(spark, root, 30, "a")
    idle, enough = [], threading.Event()

    class Idle(StreamingQueryListener):
        def onQueryStarted(self, event): pass
        def onQueryProgress(self, event): pass
        def onQueryTerminated(self, event): enough.set()

        def onQueryIdle(self, event):
            idle.append(event)
            if len(idle) >= 20:
                enough.set()

    listener = Idle()
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    spark.streams.addListener(listener)
    q = spark.readStream.format("kafkalog").option("path", str(root)) \
        .option("subscribe", "t").option("startingOffsets", "earliest").load() \
        .writeStream.format("parquet").option("path", str(sink)) \
        .option("checkpointLocation", str(ckpt)).trigger(processingTime="10 milliseconds") \
        .start()
    try:
        q.processAllAvailable()
        offsets = sorted(os.listdir(ckpt / "offsets"))
        idle.clear()
        enough.clear()
        assert enough.wait(180), f"only {len(idle)} idle triggers"
        assert q.exception() is None
        assert sorted(os.listdir(ckpt / "offsets")) == offsets
    finally:
        q.stop()
        spark.streams.removeListener(listener)
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    assert len(idle) >= 20
    assert len(_check_exactly_once(spark, root, sink)) == 30


def _active_base(d: Path) -> int:
    return max(int(f.name.split(".")[0]) for f in d.glob("*.log"))


def test_kafkalog_to_kafkalog_exactly_once(spark, tmp_path):
    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    for round_, n in enumerate([120, 0, 80]):
        if n:
            _write(spark, src, n, f"r{round_}")
        q = spark.readStream.format("kafkalog").option("path", str(src)) \
            .option("subscribe", "t").option("startingOffsets", "earliest") \
            .option("maxOffsetsPerTrigger", "50").load() \
            .select("key", "value").writeStream.format("kafkalog").option("path", str(dst)) \
            .option("topic", "out").option("partitions", "2") \
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        q.awaitTermination()
    src_values = sorted(r.value for r in spark.read.format("kafkalog")
                        .option("path", str(src)).option("subscribe", "t").load().collect())
    out_values = sorted(r.value for r in spark.read.format("kafkalog")
                        .option("path", str(dst)).option("subscribe", "out").load().collect())
    assert len(src_values) == 200 and out_values == src_values


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_read_committed_waits_for_the_commit_marker(tmp_path, codec):
    """An open transaction's records appear only after its commit marker; an aborted
    one's never; the stream stops at the last stable offset meanwhile."""
    b = LogDirBuilder(tmp_path)
    p = b.partition("t", 0, index_interval_bytes=100)
    p.append(sample_records(5, b"plain"), compression=codec)
    txn = p.begin_txn(7)
    p.append(sample_records(4, b"txn"), txn=txn, compression=codec)
    p.append(sample_records(3, b"after"), compression=codec)     # behind the open txn
    b.write()
    r = reader(tmp_path, **{"kafka.isolation.level": "read_committed"})
    start = r.initialOffset()
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 5}}                                  # the LSO
    got = rows_of(r, start, end)
    # commit it (a broker-style append of the marker), then abort another one
    seg_base, buf = p.segments[-1]
    before = len(buf)
    p.end_txn(txn, commit=True)
    txn2 = p.begin_txn(8)
    p.append(sample_records(2, b"aborted"), txn=txn2, compression=codec)
    p.end_txn(txn2, commit=False)
    with open(tmp_path / "t-0" / f"{seg_base:020d}.log", "ab") as f:
        f.write(bytes(buf[before:]))
    end2 = r.latestOffset(end, ReadAllAvailable())
    assert end2 == {"t": {"0": p.log_end_offset}}
    got += rows_of(r, end, end2)
    assert [o for _, _, o in got] == list(range(0, 12))           # not 12 (marker), 13-14


_KILL_DRIVER = r"""
import sys
sys.path.insert(0, {repo!r})
from tests.conftest import spark_env, spark_test_conf
spark_env()
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQueryListener
b = SparkSession.builder.master("local[2]").appName("kill-restart-read")
for k, v in spark_test_conf().items():
    b = b.config(k, v)
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

class Progress(StreamingQueryListener):
    def onQueryStarted(self, e): pass
    def onQueryProgress(self, e):
        print("progress", e.progress.batchId, flush=True)
    def onQueryIdle(self, e): pass
    def onQueryTerminated(self, e): pass

spark.streams.addListener(Progress())
q = spark.readStream.format("kafkalog").option("path", {src!r}).option("subscribe", "t") \
    .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "90").load() \
    .select("key", "value").writeStream.format("kafkalog").option("path", {dst!r}) \
    .option("topic", "out").option("partitions", "2") \
    .option("checkpointLocation", {ckpt!r}).trigger(availableNow=True).start()
q.awaitTermination()
print("finished", flush=True)
"""


@pytest.mark.slow
@pytest.mark.timeout(1800)       # each restart starts a JVM
def test_killed_and_restarted_query_reads_each_record_once(spark, tmp_path):
    """kafkalog -> writeStream kafkalog, the driver SIGKILLed (JVM and Python workers)
    after k progress events, several times, with appends between runs; then let it
    finish: the output topic holds each input record exactly once."""
    import signal
    import subprocess
    import sys

    src, dst, ckpt = tmp_path / "src", tmp_path / "dst", tmp_path / "ckpt"
    repo = Path(__file__).resolve().parents[2]
    script = tmp_path / "driver.py"
    script.write_text(_KILL_DRIVER.format(repo=str(repo), src=str(src), dst=str(dst),
                                          ckpt=str(ckpt)))
    total = kills = 0
    for round_, k in enumerate((1, 2)):
        _write(spark, src, 400, f"r{round_}")
        total += 400
        proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        seen = 0
        try:
            for line in proc.stdout:
                if line.startswith("progress"):
                    seen += 1
                    if seen == k:
                        os.killpg(proc.pid, signal.SIGKILL)
                        kills += 1
                        break
                if line.startswith("finished"):
                    break
        finally:
            if proc.poll() is None and seen < k:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=120)
            proc.stdout.close()
    assert kills == 2                     # each run was killed mid-query
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=900, start_new_session=True)
    assert "finished" in out.stdout, out.stderr[-3000:]
    src_values = sorted(r.value for r in spark.read.format("kafkalog")
                        .option("path", str(src)).option("subscribe", "t").load().collect())
    out_values = sorted(r.value for r in spark.read.format("kafkalog")
                        .option("path", str(dst)).option("subscribe", "out").load().collect())
    assert len(src_values) == total and out_values == src_values


def test_latest_start_and_max_bytes_end_to_end(spark, tmp_path):
    """Default startingOffsets (latest): the first run reads nothing, yet fixes where the
    query starts; later appends arrive in several micro-batches of about
    maxBytesPerTrigger each."""
    parts = build(tmp_path / "log", [40, 40])
    root, ckpt, sink = tmp_path / "log", tmp_path / "ckpt", tmp_path / "sink"

    def run(**options):
        df = spark.readStream.format("kafkalog").option("path", str(root)) \
            .option("subscribe", "t")
        for k, v in options.items():
            df = df.option(k, v)
        q = df.load().writeStream.format("parquet").option("path", str(sink)) \
            .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
        q.awaitTermination()
        return q

    run()
    assert not list(sink.glob("*.parquet")) or spark.read.parquet(str(sink)).count() == 0
    for n in (0, 1):
        for _ in range(5):
            parts[n].append(sample_records(10, b"new"))
        parts[n].write(root)            # the same bytes appended, with index entries
    q = run(maxBytesPerTrigger="2k")
    got = sorted((r.partition, r.offset) for r in spark.read.parquet(str(sink)).collect())
    assert got == [(p, o) for p in (0, 1) for o in range(40, 90)]
    assert len([p for p in q.recentProgress if p["numInputRows"]]) >= 3


def test_preallocated_files_and_cached_polls(tmp_path, monkeypatch):
    """A broker-like partition with preallocated (zero-padded) index files and a
    preallocated .log whose zero tail is overwritten in place (size unchanged): the zero
    tail is in flight, not corruption, and no warning is logged per poll; an idle poll
    recomputes nothing; an in-place write is seen through the file's mtime."""
    import logging

    import spark_kafkalog.spark.live_log as live_log

    b = LogDirBuilder(tmp_path)
    p = b.partition("t", 0, index_interval_bytes=100)
    for _ in range(3):
        p.append(sample_records(10, b"a"))
    p.preallocate_active_index = 4096
    b.write()
    log = tmp_path / "t-0" / f"{0:020d}.log"
    used = log.stat().st_size
    with open(log, "ab") as f:
        f.write(bytes(8192))                      # log.preallocate: a zero tail
    old = 1_600_000_000
    for path in [tmp_path, *tmp_path.rglob("*")]:   # written long ago: nothing is racy
        os.utime(path, (old, old))
    calls = []
    real_state = live_log.partition_state
    monkeypatch.setattr(live_log, "partition_state",
                        lambda *a, **k: calls.append(1) or real_state(*a, **k))
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    from spark_kafkalog.log import TornTailWarning
    scanner_log = logging.getLogger(TornTailWarning.__module__)
    scanner_log.addHandler(handler)
    try:
        r = reader(tmp_path, onCorruption="fail")
        start = r.latestOffset(r.initialOffset(), ReadAllAvailable())
        assert start == {"t": {"0": 30}} and len(calls) == 1
        for _ in range(5):
            assert r.latestOffset(start, ReadAllAvailable()) is start
        assert len(calls) == 1                     # idle: nothing recomputed
        # the broker writes the next batch into the preallocated region
        seg_base, buf = p.segments[-1]
        before = len(buf)
        p.append(sample_records(5, b"b"))
        with open(log, "r+b") as f:
            f.seek(used)
            f.write(bytes(buf[before:]))
        assert log.stat().st_size == used + 8192   # same size: only the mtime tells
        os.utime(log, (old + 10, old + 10))
        end = r.latestOffset(start, ReadAllAvailable())
        assert end == {"t": {"0": 35}} and len(calls) == 2
        assert [o for _, _, o in rows_of(r, start, end)] == list(range(30, 35))
    finally:
        scanner_log.removeHandler(handler)
    assert not [x for x in records if "the log ends with" in x.getMessage()]


def test_partition_deleted_between_planning_and_reading(tmp_path):
    import shutil
    build(tmp_path, [20, 20])
    for fail, expect in ((True, None), (False, 20)):
        r = reader(tmp_path, failOnDataLoss=str(fail).lower())
        start = r.initialOffset()
        end = r.latestOffset(start, ReadAllAvailable())
        planned = r.partitions(start, end)
        if not fail:
            shutil.rmtree(tmp_path / "t-1")
        clone = pickle.loads(pickle.dumps(r))
        if fail:
            moved = tmp_path.parent / (tmp_path.name + "-t1")
            shutil.move(tmp_path / "t-1", moved)
            with pytest.raises(DataLossError, match="t-1 is gone"):
                for part in planned:
                    list(clone.read(part))
            shutil.move(moved, tmp_path / "t-1")
            continue
        got = [o for part in planned for b in clone.read(part)
               for o in b.column("offset").to_pylist()]
        assert len(got) == expect
