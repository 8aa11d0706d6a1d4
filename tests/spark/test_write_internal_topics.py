"""A broker's internal topics are refused as write targets unless a write says it means it.

Kafka's rule (``ReplicaManager.appendToLocalLog``): a client's produce to an internal
topic fails with ``InvalidTopicException("Cannot append to internal topic ...")``; only
the broker itself (group and transaction coordinators, the controller, the
tiered-storage metadata manager) writes ``__consumer_offsets``, ``__transaction_state``,
``__share_group_state``, ``__cluster_metadata`` and ``__remote_log_metadata``. Our
writers refuse them the same way -- the batch writer, the streaming sink and
``write_table`` -- unless ``allowInternalTopic=true`` (``allow_internal_topic=True``).
"""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import topic_partitions, write_table
from spark_kafkalog.spark.write_options import parse_write_options

FS = pafs.LocalFileSystem()
INTERNAL = ["__consumer_offsets", "__transaction_state", "__cluster_metadata",
            "__remote_log_metadata", "__share_group_state"]
REFUSED = r"is an internal topic: .*Cannot append to internal topic"


def _nothing_written(root: str, topic: str) -> None:
    assert not topic_partitions(FS, root, topic)
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


@pytest.mark.parametrize("topic", INTERNAL)
def test_the_option_names_the_topic_and_the_way_out(topic):
    with pytest.raises(InvalidOptionError,
                       match=rf"topic '{topic}' {REFUSED}.*set option allowInternalTopic=true"):
        parse_write_options({"path": "/l", "topic": topic})
    assert parse_write_options({"path": "/l", "topic": topic,
                                "allowInternalTopic": "true"}).allow_internal_topic
    # an ordinary topic that merely starts with "__" is not internal
    assert not parse_write_options({"path": "/l", "topic": "__mine"}).allow_internal_topic


@pytest.mark.parametrize("topic", INTERNAL)
def test_write_table_refuses_unless_allowed(tmp_path, topic):
    root = str(tmp_path)
    table = pa.table({"key": [b"k"], "value": [b"v"]})
    with pytest.raises(InvalidOptionError, match=rf"{REFUSED}.*allow_internal_topic=True"):
        write_table(root, topic, table)
    _nothing_written(root, topic)
    write_table(root, topic, table, allow_internal_topic=True)
    assert read_table(root, topic).column("value").to_pylist() == [b"v"]


def test_a_topic_column_naming_an_internal_topic_is_refused(tmp_path):
    """No ``topic`` option: the rows name the topics, checked as the task meets them."""
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from spark_kafkalog.spark.writer import make_batch_writer

    root = str(tmp_path)
    schema = StructType([StructField("topic", StringType()),
                         StructField("value", BinaryType())])
    batch = pa.record_batch({"topic": ["ok", "__consumer_offsets"],
                             "value": [b"a", b"b"]})
    w = make_batch_writer({"path": root}, schema, False)
    with pytest.raises(InvalidOptionError, match=REFUSED):
        w.write(iter([batch]))
    w = make_batch_writer({"path": root, "allowInternalTopic": "true"}, schema, False)
    w.commit([w.write(iter([batch]))])
    assert read_table(root, "__consumer_offsets").column("value").to_pylist() == [b"b"]


def test_batch_write_refused_before_anything_lands(spark, tmp_path):
    root = str(tmp_path)
    df = spark.createDataFrame([(b"k", b"v")], "key binary, value binary")
    with pytest.raises(Exception, match=REFUSED):
        df.write.format("kafkalog").option("path", root) \
            .option("topic", "__consumer_offsets").mode("append").save()
    _nothing_written(root, "__consumer_offsets")
    df.write.format("kafkalog").option("path", root).option("topic", "__consumer_offsets") \
        .option("allowInternalTopic", "true").mode("append").save()
    assert read_table(root, "__consumer_offsets").num_rows == 1


def test_streaming_sink_refused(spark, tmp_path):
    root = str(tmp_path / "log")
    os.makedirs(root)
    src = spark.readStream.format("rate").option("rowsPerSecond", 1).load() \
        .selectExpr("CAST(value AS STRING) AS value")
    with pytest.raises(Exception, match=REFUSED):
        q = src.writeStream.format("kafkalog").option("path", root) \
            .option("topic", "__transaction_state") \
            .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True) \
            .start()
        try:
            q.awaitTermination()
        finally:
            q.stop()
    _nothing_written(root, "__transaction_state")


def test_copy_topic_restores_an_internal_topic_and_refuses_a_rename_into_one(
        spark, real_broker, tmp_path):
    """copy_topic of ``__consumer_offsets`` as itself is a deliberate restore (the job
    sets allowInternalTopic); renaming an ordinary topic into an internal one is not."""
    from spark_kafkalog.jobs import copy_topic

    src = str(real_broker / "seanorth-kafka-server")
    out = str(tmp_path / "out")
    copy_topic.run(spark, copy_topic.parse_args(
        ["--path", src, "--output", out, "--topic", "__consumer_offsets"]))
    want = read_table(src, "__consumer_offsets", isolation_level="read_committed")
    got = read_table(out, "__consumer_offsets")
    assert got.num_rows == want.num_rows > 0
    assert got.column("offset").to_pylist() == want.column("offset").to_pylist()
    with pytest.raises(Exception, match=REFUSED):
        copy_topic.run(spark, copy_topic.parse_args(
            ["--path", src, "--output", str(tmp_path / "out2"), "--topic", "some-topic",
             "--rename", "some-topic=__transaction_state"]))
    assert not os.path.exists(tmp_path / "out2" / "__transaction_state-0")
