"""df.write.format("kafkalog"): what lands in the log, read back by kafka-python (CRC
checked), aiokafka and our own reader; modes; partitioning; errors. One shared Spark
session (tests/conftest.py); fast unit tests of the writer classes at the end need no
Spark job."""
from __future__ import annotations

import datetime as dt
import os
import pickle

import pyarrow as pa
import pytest

from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import topic_partitions
from spark_kafkalog.log.files.checkpoint import read_checkpoint
from tests.log.test_appender_util import assert_indexes_like_broker, read_aio, read_kp
from tests.spark.test_write_partitioner import java_partition

import pyarrow.fs as pafs

FS = pafs.LocalFileSystem()


def _rows(n, *, headers=True):
    base = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    out = []
    for i in range(n):
        key = None if i % 9 == 0 else f"key-{i}".encode()
        value = None if i % 31 == 7 else f"value-{i}-".encode() * 3
        hdrs = [("h1", f"x{i}".encode()), ("h2", None)] if headers and i % 4 == 0 else None
        out.append((key, value, base + dt.timedelta(milliseconds=i * 10), hdrs))
    return out


def _df(spark, n, **kw):
    return spark.createDataFrame(
        _rows(n, **kw),
        "key binary, value binary, timestamp timestamp, "
        "headers array<struct<key:string,value:binary>>")


def _all_records(root, topic):
    """{offset-ordered list per partition} via kafka-python, plus aiokafka agreement."""
    out = {}
    for p in topic_partitions(FS, root, topic):
        d = f"{root}/{topic}-{p}"
        recs = read_kp(d)
        assert read_aio(d) == recs
        assert_indexes_like_broker(d, 4096)
        out[p] = recs
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_write_every_codec_reads_back_exactly(spark, tmp_path, codec):
    root = str(tmp_path)
    rows = _rows(500)
    _df(spark, 500).repartition(3).write.format("kafkalog").option("path", root) \
        .option("topic", "events").option("partitions", "4") \
        .option("compression", codec).mode("append").save()
    got = _all_records(root, "events")
    flat = [r for p in sorted(got) for r in got[p]]
    assert len(flat) == 500
    # every record exactly once, with its key, value, timestamp and headers
    want = sorted(((k, v, int(ts.timestamp() * 1000),
                    tuple((hk, hv) for hk, hv in (h or ()))) for k, v, ts, h in rows), key=repr)
    assert sorted(((r[1], r[2], r[3], r[4]) for r in flat), key=repr) == want
    # placement: keyed records where Kafka's partitioner puts them; offsets contiguous
    for p, recs in got.items():
        assert [r[0] for r in recs] == list(range(len(recs)))
        for r in recs:
            if r[1] is not None:
                assert java_partition(r[1], 4) == p
    # our reader agrees
    df = spark.read.format("kafkalog").option("path", root).option("subscribe", "events") \
        .option("includeHeaders", "true").load()
    assert df.count() == 500
    assert sorted(df.groupBy("partition").count().collect()) == sorted(
        (p, len(r)) for p, r in got.items() if r)
    # checkpoints a broker reads: recovery point and high watermark at the log end
    rp = read_checkpoint(FS, f"{root}/recovery-point-offset-checkpoint")
    hw = read_checkpoint(FS, f"{root}/replication-offset-checkpoint")
    assert rp == hw == {("events", p): len(r) for p, r in got.items()}
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def _batch_sizes(directory):
    """Byte size of every record batch in a partition directory (from the log headers)."""
    import struct
    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(f"{directory}/{name}", "rb") as f:
            while head := f.read(12):
                size = 12 + struct.unpack(">q i", head)[1]
                out.append(size)
                f.seek(size - 12, 1)
    return out


def test_batch_size_default_is_1_mib_and_the_option_bounds_batches(spark, tmp_path):
    """Batches are at most batch.size bytes: 1 MiB by default (a broker's default
    max.message.bytes holds them), the producer's 16384 when asked for."""
    df = spark.range(30_000, numPartitions=2).selectExpr(
        "cast(id as string) as key", "repeat('v', 100) as value")
    sizes = {}
    for label, opts in (("default", {}), ("16k", {"batch.size": "16384"})):
        root = str(tmp_path / label)
        w = df.write.format("kafkalog").option("path", root).option("topic", "t")
        for k, v in opts.items():
            w = w.option(k, v)
        w.mode("append").save()
        sizes[label] = _batch_sizes(f"{root}/t-0")
        assert len(read_kp(f"{root}/t-0")) == 30_000
    assert max(sizes["default"]) <= 1 << 20
    assert max(sizes["default"]) > 512 * 1024          # the default is really in effect
    assert max(sizes["16k"]) <= 16384
    assert len(sizes["16k"]) > 40 * len(sizes["default"]) / 2


def test_string_columns_partition_column_and_appends(spark, tmp_path):
    root = str(tmp_path)
    df = spark.createDataFrame([("k1", "v1", 2), ("k2", "v2", None), (None, "v3", 0)],
                               "key string, value string, partition int")
    for _ in range(2):
        df.write.format("kafkalog").option("path", root).option("topic", "s") \
            .option("partitions", "3").mode("append").save()
    got = _all_records(root, "s")
    assert [r[2] for r in got[2]].count(b"v1") == 2           # explicit partition
    k2 = java_partition(b"k2", 3)
    assert [r[2] for r in got[k2]].count(b"v2") == 2          # murmur2 of the UTF-8 key
    assert [r[2] for r in got[0]].count(b"v3") == 2
    assert sum(len(v) for v in got.values()) == 6


def test_partition_outside_topic_fails_clearly(spark, tmp_path):
    root = str(tmp_path)
    df = spark.createDataFrame([("v", 7)], "value string, partition int")
    with pytest.raises(Exception, match=r"partition 7, outside topic 'x', which has 2"):
        df.write.format("kafkalog").option("path", root).option("topic", "x") \
            .option("partitions", "2").mode("append").save()
    assert not topic_partitions(FS, root, "x")
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_topic_column_writes_several_topics_in_one_commit(spark, tmp_path):
    root = str(tmp_path)
    df = spark.createDataFrame([("a", "1"), ("b", "2"), ("a", "3"), ("c.d", "4")],
                               "topic string, value string")
    df.write.format("kafkalog").option("path", root).mode("append").save()
    assert {t: sum(len(v) for v in _all_records(root, t).values())
            for t in ("a", "b", "c.d")} == {"a": 2, "b": 1, "c.d": 1}
    # one write id, journaled in each topic
    ids = {jr.load(FS, root, t).commits[-1]["write_id"] for t in ("a", "b", "c.d")}
    assert len(ids) == 1


def test_overwrite_and_save_modes(spark, tmp_path):
    root = str(tmp_path)
    w = lambda df: df.write.format("kafkalog").option("path", root).option("topic", "o")  # noqa
    w(_df(spark, 50)).mode("append").save()
    w(_df(spark, 7)).mode("overwrite").save()
    got = _all_records(root, "o")[0]
    assert [r[0] for r in got] == list(range(50, 57))        # offsets keep increasing
    df = spark.read.format("kafkalog").option("path", root).option("subscribe", "o").load()
    assert df.count() == 7
    with pytest.raises(Exception, match="already exists"):
        w(_df(spark, 3)).option("saveMode", "errorifexists").mode("append").save()
    w(_df(spark, 3)).option("saveMode", "ignore").mode("append").save()
    assert len(_all_records(root, "o")[0]) == 7
    with pytest.raises(Exception, match="saveMode"):
        w(_df(spark, 3)).option("saveMode", "upsert").mode("append").save()


def test_bad_input_schema_fails_naming_the_column(spark, tmp_path):
    root = str(tmp_path)
    with pytest.raises(Exception, match="'value' column"):
        spark.createDataFrame([("k",)], "key string").write.format("kafkalog") \
            .option("path", root).option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="column 'partition' must be int"):
        spark.createDataFrame([("v", "1")], "value string, partition string") \
            .write.format("kafkalog").option("path", root).option("topic", "t") \
            .mode("append").save()
    with pytest.raises(Exception, match="topic"):
        spark.createDataFrame([("v",)], "value string").write.format("kafkalog") \
            .option("path", root).mode("append").save()


def test_round_trip_read_then_write_back(spark, tmp_path):
    """A DataFrame read with format("kafkalog") can be written back as is."""
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    _df(spark, 40).write.format("kafkalog").option("path", src).option("topic", "r") \
        .mode("append").save()
    back = spark.read.format("kafkalog").option("path", src).option("subscribe", "r") \
        .option("includeHeaders", "true").load()
    back.write.format("kafkalog").option("path", dst).option("compression", "lz4") \
        .mode("append").save()
    a = [r[1:] for r in _all_records(src, "r")[0]]
    b = [r[1:] for r in _all_records(dst, "r")[0]]
    assert a == b


# ---- no Spark job: the writer objects themselves -------------------------------------------
def test_writer_and_messages_pickle_and_commit_without_spark(tmp_path):
    from pyspark.sql.types import BinaryType, StructField, StructType

    from spark_kafkalog.spark.writer import KafkaLogCommitMessage, make_batch_writer

    root = str(tmp_path)
    schema = StructType([StructField("value", BinaryType())])
    w = make_batch_writer({"path": root, "topic": "u", "partitions": "2"}, schema, False)
    w = pickle.loads(pickle.dumps(w))
    batch = pa.record_batch({"value": pa.array([b"a", b"b", b"c"])})
    msg = w.write(iter([batch]))
    assert isinstance(msg, KafkaLogCommitMessage) and msg.rows == 3
    msg = pickle.loads(pickle.dumps(msg))
    assert len(pickle.dumps(msg)) < 2000
    w.commit([msg, None])
    got = _all_records(root, "u")
    assert sorted(r[2] for p in got for r in got[p]) == [b"a", b"b", b"c"]
    # null keys went round-robin over both partitions
    assert sorted(len(v) for v in got.values()) == [1, 2]
    # a retried commit of the same job is a no-op
    w.commit([msg])
    assert sum(len(v) for v in _all_records(root, "u").values()) == 3


def test_abort_leaves_no_trace(tmp_path):
    from pyspark.sql.types import BinaryType, StructField, StructType

    from spark_kafkalog.spark.writer import make_batch_writer

    root = str(tmp_path)
    schema = StructType([StructField("value", BinaryType())])
    w = make_batch_writer({"path": root, "topic": "u"}, schema, False)
    msg = w.write(iter([pa.record_batch({"value": pa.array([b"a"])})]))
    assert os.path.exists(msg.staged.path)
    w.abort([msg, None])
    assert not topic_partitions(FS, root, "u")
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]
