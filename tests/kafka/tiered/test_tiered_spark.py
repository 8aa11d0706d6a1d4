"""``spark.read.format("kafkalog")`` with ``remoteStorage`` over a topic a real broker
tiered equals what Kafka's Java consumer read through the broker, both isolation levels;
the same with the remote tier read from an S3 copy (loopback moto, ``fs.s3.*`` options);
the remote tier's slices (one per remote segment) pickle; bad remote options fail at
planning naming the option."""
from __future__ import annotations

import pickle

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.spark import parse_read_options
from spark_kafkalog.spark.planning import plan
from tests.kafka.compare import differences, from_spark
from tests.log.test_s3 import s3, s3_endpoint  # noqa: F401  (fixtures)


def _df(spark, tiered, topics, isolation, **extra):
    reader = (spark.read.format("kafkalog").option("subscribe", ",".join(topics))
              .option("includeHeaders", "true").option("kafka.isolation.level", isolation)
              .option("remoteStorage", tiered.remote))
    for k, v in extra.items():
        reader = reader.option(k, v)
    return reader.load(tiered.logdir)


@pytest.mark.parametrize("isolation", ("read_uncommitted", "read_committed"))
def test_spark_reads_both_tiers_as_the_java_consumer(spark, tiered, isolation):
    ours = from_spark(_df(spark, tiered, tiered.topics, isolation))
    expected = sorted((r for t in tiered.topics for r in tiered.expected(t, isolation)),
                      key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert differences(ours, expected) == []


def test_spark_reads_the_remote_tier_from_s3_as_the_java_consumer(spark, tiered, s3):
    """``remoteStorage`` an ``s3://`` URI (the remote tier copied to the loopback moto
    server), its endpoint and keys as ``fs.s3.*`` options; the log dir stays local. Every
    tiered topic in one read, both isolation levels."""
    options, fs, bucket = s3
    pafs.copy_files(tiered.remote, f"{bucket}/tiered", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=fs)
    fs_options = {f"fs.{k}": v for k, v in options.items()}
    for isolation in ("read_uncommitted", "read_committed"):
        reader = (spark.read.format("kafkalog").option("subscribe", ",".join(tiered.topics))
                  .option("includeHeaders", "true").option("kafka.isolation.level", isolation)
                  .option("remoteStorage", f"s3://{bucket}/tiered").options(**fs_options))
        ours = from_spark(reader.load(tiered.logdir))
        expected = sorted((r for t in tiered.topics for r in tiered.expected(t, isolation)),
                          key=lambda r: (r["topic"], r["partition"], r["offset"]))
        assert differences(ours, expected) == [], isolation


def test_remote_slices_are_planned_from_the_metadata_and_pickle(tiered):
    """Whole remote segments of about maxPartitionBytes per slice (here: one each)."""
    opts = parse_read_options({"path": tiered.logdir, "subscribe": "tiered-txn",
                               "kafka.isolation.level": "read_committed",
                               "remoteStorage": tiered.remote,
                               "maxPartitionBytes": "1k"})
    slices = plan(LogDirs(tiered.logdir), opts)
    remote = [s for s in slices if s.tier is not None]
    for part in (0, 1):
        mine = [s for s in remote if s.partition == part]
        segs = mine[0].tier.remote
        assert 1 < len(mine) <= len(segs) and mine[0].start_offset == 0
        # contiguous, each ending at a remote segment's end
        assert all(a.end_offset == b.start_offset for a, b in zip(mine, mine[1:]))
        assert {s.end_offset - 1 for s in mine} <= {g.end_offset for g in segs}
    one = plan(LogDirs(tiered.logdir), parse_read_options(
        {"path": tiered.logdir, "subscribe": "tiered-txn", "remoteStorage": tiered.remote}))
    assert sum(s.tier is not None for s in one) == 2      # one slice per partition
    for s in slices:
        assert pickle.loads(pickle.dumps(s)) == s


@pytest.mark.parametrize("options, message", [
    ({"remoteLayout": "{topic}/x"}, "remoteLayout is given without remoteStorage"),
    ({"remoteStorage": "/r", "remoteLayout": "{topic}/{nope}{suffix}"}, "unknown placeholders"),
    ({"remoteStorage": "/r", "remoteLayout": "{topic}/{partition}"}, "needs {suffix}"),
    ({"remoteStorage": "/r", "minPartitions": "4"}, "minPartitions"),
    ({"remoteStorage": "/r", "maxBytesPerTrigger": "1m"}, "maxBytesPerTrigger"),
    ({"remoteStorage": "/r", "startingTimestamp": "1000"}, "timestamp offsets"),
])
def test_bad_remote_options_name_the_option(options, message):
    with pytest.raises(InvalidOptionError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse_read_options({"path": "/x", "subscribe": "t", **options})


def test_pushed_offset_and_timestamp_filters_hold_on_the_remote_tier(spark, tiered):
    topic = "tiered-zstd"
    df = _df(spark, tiered, [topic], "read_uncommitted")
    ts = sorted(r["timestamp"] for r in tiered.expected(topic, "read_uncommitted"))[40]
    got = from_spark(df.where(f"offset >= 5 AND offset < 40 AND partition = 1 AND "
                              f"timestamp >= timestamp_millis({ts})"))
    want = [r for r in tiered.expected(topic, "read_uncommitted")
            if r["partition"] == 1 and 5 <= r["offset"] < 40 and r["timestamp"] >= ts]
    assert want and differences(got, want) == []


def test_copy_job_keeps_the_whole_history_of_both_tiers(spark, tiered, tmp_path):
    """jobs/copy_topic.py with ``--option remoteStorage=...``: the copy (a plain log)
    holds every record from offset 0, offsets kept, as the Java consumer read them."""
    from spark_kafkalog.jobs import copy_topic
    from spark_kafkalog.log import read_table
    from tests.kafka.compare import from_arrow

    out = tmp_path / "copy"
    topics = ["tiered-txn", "tiered-logappend", "tiered-gzip"]
    argv = ["--path", tiered.logdir, "--output", str(out), "--option",
            f"remoteStorage={tiered.remote}"]
    for t in topics:
        argv += ["--topic", t]
    summary = copy_topic.run(spark, copy_topic.parse_args(argv))
    assert summary["rows"] == sum(len(tiered.expected(t, "read_committed")) for t in topics)
    for t in topics:
        ours = from_arrow(read_table(str(out), t))
        assert differences(ours, tiered.expected(t, "read_committed")) == [], t


def test_export_job_reads_both_tiers(spark, tiered, tmp_path):
    import pyarrow.parquet as pq

    from spark_kafkalog.jobs import export_parquet

    out = str(tmp_path / "out")
    args = export_parquet.parse_args(["--path", tiered.logdir, "--output", out,
                                      "--subscribe", "tiered-snappy",
                                      "--option", f"remoteStorage={tiered.remote}"])
    export_parquet.build_frame(spark, args).write.mode("overwrite").parquet(out)
    got = sorted((r["partition"], r["offset"]) for r in pq.read_table(out).to_pylist())
    assert got == [(r["partition"], r["offset"])
                   for r in tiered.expected("tiered-snappy", "read_uncommitted")]


def test_a_stream_replays_both_tiers(spark, tiered, tmp_path):
    """readStream with ``remoteStorage`` from earliest, several micro-batches
    (maxOffsetsPerTrigger), availableNow: every record once, as the Java consumer read."""
    got = []

    def collect(df, _):
        got.extend(from_spark(df))

    topics = ["tiered-txn", "tiered-lz4"]
    q = (spark.readStream.format("kafkalog").option("subscribe", ",".join(topics))
         .option("includeHeaders", "true").option("startingOffsets", "earliest")
         .option("kafka.isolation.level", "read_committed")
         .option("maxOffsetsPerTrigger", "60").option("remoteStorage", tiered.remote)
         .load(tiered.logdir).writeStream.foreachBatch(collect)
         .option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None
    assert len(q.recentProgress) > 2
    ours = sorted(got, key=lambda r: (r["topic"], r["partition"], r["offset"]))
    expected = sorted((r for t in topics for r in tiered.expected(t, "read_committed")),
                      key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert differences(ours, expected) == []


def test_spark_kafka_source_through_the_broker_equals_kafkalog_over_both_tiers(tiered):
    """Spark's own ``format("kafka")`` read through the broker (which fetched the remote
    segments) and ``format("kafkalog")`` with ``remoteStorage``, one session: equal schema
    and rows, both isolation levels; both equal the Java consumer."""
    import json

    from tests.kafka.test_spark_connector import _partition_order_ok, _records

    code, stderr, out = tiered.side_by_side
    assert code == 0, stderr
    key = lambda r: (r["topic"], r["partition"], r["offset"])  # noqa: E731
    for isolation, got in json.loads(out.read_text()).items():
        assert json.loads(got["ours_schema"]) == json.loads(got["kafka_schema"]), isolation
        kafka, ours = _records(got["kafka"]), _records(got["ours"])
        assert _partition_order_ok(kafka) and _partition_order_ok(ours), isolation
        assert differences(sorted(ours, key=key), sorted(kafka, key=key)) == [], isolation
        java = sorted((r for t in tiered.topics for r in tiered.expected(t, isolation)),
                      key=key)
        assert differences(sorted(kafka, key=key), java) == [], isolation
