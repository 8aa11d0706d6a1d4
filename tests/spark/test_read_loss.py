"""Data loss through Spark (log/read/loss.py): every loss shape fails a batch read and a
stream under failOnDataLoss (the default) with the partition, offsets and file in the
message, and reads what is there with failOnDataLoss=false."""
from __future__ import annotations

import pytest

from tests.log.loss_shapes import LOSSES, NOT_LOSS, TOPIC


def _batch(spark, root, **options):
    df = spark.read.format("kafkalog").option("subscribe", TOPIC)
    for k, v in options.items():
        df = df.option(k, v)
    return sorted(r.offset for r in df.load(str(root)).select("offset").collect())


def _stream(spark, root, tmp, **options):
    df = spark.readStream.format("kafkalog").option("path", str(root)) \
        .option("subscribe", TOPIC).option("startingOffsets", "earliest")
    for k, v in options.items():
        df = df.option(k, v)
    q = df.load().select("offset").writeStream.format("parquet") \
        .option("path", str(tmp / "sink")).option("checkpointLocation", str(tmp / "ckpt")) \
        .trigger(availableNow=True).start()
    try:
        q.awaitTermination()
    finally:
        q.stop()
    return sorted(r.offset for r in spark.read.parquet(str(tmp / "sink")).collect())


@pytest.mark.parametrize("shape", sorted(LOSSES))
def test_spark_batch_and_stream_fail_on_loss(spark, tmp_path, shape):
    root = tmp_path / "logs"
    kind, start, end = LOSSES[shape](root)
    missing = f"offsets {start}..{end - 1} are missing"
    with pytest.raises(Exception) as info:
        _batch(spark, root)
    assert missing in str(info.value) and "failOnDataLoss" in str(info.value)
    got = _batch(spark, root, failOnDataLoss="false")
    assert not any(start <= o < end for o in got) and (got or kind == "log_start")
    with pytest.raises(Exception) as info:
        _stream(spark, root, tmp_path / "s1")
    assert missing in str(info.value)
    assert _stream(spark, root, tmp_path / "s2", failOnDataLoss="false") == got


@pytest.mark.parametrize("shape", ["torn_tail_past_hw", "compacted_gap_cleaner_checkpoint"])
def test_spark_reads_what_a_broker_leaves(spark, tmp_path, shape):
    root = tmp_path / "logs"
    end = NOT_LOSS[shape](root)
    got = _batch(spark, root)
    assert got and max(got) < end
    assert _stream(spark, root, tmp_path / "s") == got
