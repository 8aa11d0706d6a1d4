"""How many partitions a written topic has, as a Spark/Kafka user expects: rows that name
their ``partition`` (a ``format("kafkalog")`` read, batch or stream) land in that
partition; an existing topic keeps its count (a row outside it fails the write, as Kafka's
producer fails for a partition the topic lacks); a new topic gets option ``partitions``,
else as many partitions as the rows reach. Expected placements come from the source log
built by kafka-python (tests/log/logbuilder.py), read back with ``read_table``."""
from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log import read_table
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import topic_partitions
from tests.log.logbuilder import LogDirBuilder, rec

FS = pafs.LocalFileSystem()


def build(root, topic: str, rows_per_partition: dict[int, int], base_offset: int = 0):
    """A source log: ``topic`` with the given rows in each partition, offsets from
    ``base_offset`` with a gap (as compaction leaves) after the first record."""
    b = LogDirBuilder(root)
    for p, n in rows_per_partition.items():
        part = b.partition(topic, p, base_offset=base_offset,
                           base_timestamp=1_700_000_000_000 + p)
        if n:
            part.append([rec(b"k%d-0" % p, b"v%d-0" % p)])
            part.gap(3)
            part.append([rec(b"k%d-%d" % (p, i), b"v%d-%d" % (p, i)) for i in range(1, n)])
    b.write()


def records(root, topic) -> list[tuple]:
    t = read_table(str(root), topic)
    return sorted(zip(t["partition"].to_pylist(), t["offset"].to_pylist(),
                      t["key"].to_pylist(), t["value"].to_pylist()))


def read(spark, root, topic):
    return (spark.read.format("kafkalog").option("path", str(root))
            .option("subscribe", topic).load())


def test_a_read_written_to_a_new_topic_keeps_each_rows_partition(spark, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    build(src, "orders", {0: 4, 1: 0, 2: 3})          # partition 1 empty
    read(spark, src, "orders").write.format("kafkalog").option("path", str(dst)) \
        .option("topic", "copy").mode("append").save()
    # as many partitions as the rows reach: 0..2, partition 1 created empty
    assert topic_partitions(FS, str(dst), "copy") == [0, 1, 2]
    want = [(p, k, v) for p, _, k, v in records(src, "orders")]
    assert [(p, k, v) for p, _, k, v in records(dst, "copy")] == want
    # offsets preserved too: the same (partition, offset) of every record
    read(spark, src, "orders").write.format("kafkalog").option("path", str(dst)) \
        .option("topic", "same").option("offsets", "preserve").mode("append").save()
    assert records(dst, "same") == records(src, "orders")


def test_existing_topic_keeps_its_count_and_a_row_outside_fails(spark, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    build(src, "orders", {0: 2, 1: 2})
    spark.createDataFrame([("x",)], "value string").write.format("kafkalog") \
        .option("path", str(dst)).option("topic", "one").mode("append").save()
    before = sorted(os.listdir(dst / "one-0"))
    with pytest.raises(Exception, match=r"partition 1, outside topic 'one', which has 1 "
                                        r"partition \(0\.\.0\)"):
        read(spark, src, "orders").write.format("kafkalog").option("path", str(dst)) \
            .option("topic", "one").mode("append").save()
    assert topic_partitions(FS, str(dst), "one") == [0]
    assert sorted(os.listdir(dst / "one-0")) == before
    assert [v for *_, v in records(dst, "one")] == [b"x"]


def test_new_topic_rows_without_a_partition_need_the_option(spark, tmp_path):
    df = spark.createDataFrame([("k", "v", 1), ("k2", "w", None)],
                               "key string, value string, partition int").coalesce(1)
    w = df.write.format("kafkalog").option("path", str(tmp_path)).option("topic", "t")
    with pytest.raises(Exception, match=r"topic 't' is new and option 'partitions' is not "
                                        r"set.*null 'partition'"):
        w.mode("append").save()
    assert not topic_partitions(FS, str(tmp_path), "t")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(jr.STAGING_PREFIX)]
    w.option("partitions", "4").mode("append").save()
    assert topic_partitions(FS, str(tmp_path), "t") == [0, 1, 2, 3]


def test_stream_of_a_kafkalog_read_mirrors_partitions(spark, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    build(src, "orders", {0: 3, 1: 2})
    (spark.readStream.format("kafkalog").option("path", str(src))
     .option("subscribe", "orders").option("startingOffsets", "earliest").load()
     .writeStream.format("kafkalog").option("path", str(dst)).option("topic", "mirror")
     .option("offsets", "preserve")
     .option("checkpointLocation", str(tmp_path / "chk"))
     .trigger(availableNow=True).start().awaitTermination())
    assert topic_partitions(FS, str(dst), "mirror") == [0, 1]
    assert records(dst, "mirror") == records(src, "orders")


def test_preserved_copy_of_consumer_offsets(spark, tmp_path):
    """A batch ``offsets=preserve`` copy of ``__consumer_offsets`` (an internal topic: the
    write says it is deliberate) keeps every record at its partition and offset."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    build(src, "__consumer_offsets", {0: 2, 1: 0, 2: 5}, base_offset=40)
    df = read(spark, src, "__consumer_offsets")
    w = df.write.format("kafkalog").option("path", str(dst)) \
        .option("topic", "__consumer_offsets").option("offsets", "preserve")
    with pytest.raises(Exception, match=r"internal topic.*allowInternalTopic=true"):
        w.mode("append").save()
    assert not (dst / "__consumer_offsets-0").exists()
    w.option("allowInternalTopic", "true").mode("append").save()
    assert topic_partitions(FS, str(dst), "__consumer_offsets") == [0, 1, 2]
    assert records(dst, "__consumer_offsets") == records(src, "__consumer_offsets")
