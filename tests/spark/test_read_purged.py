"""A batch read whose planned segments retention deletes (and purges) before its tasks
run, through a Spark session: the plan is made (the query's RDD and its partitions
exist), then the files go, then the tasks read. As Spark's own Kafka source: data loss
under failOnDataLoss (the default), the records still on disk with it false."""
from __future__ import annotations

import pytest

from tests.log.test_purged_before_task import records_on_disk, retain_purged
from tests.log.test_retention import PARTS, build_log, hw_of


def _planned(spark, root, **options):
    df = spark.read.format("kafkalog").option("subscribe", "t")
    for k, v in options.items():
        df = df.option(k, v)
    df = df.load(root).select("partition", "offset", "value")
    rdd = df.rdd
    # the scan's partitions() runs here, on the driver, before any task
    assert rdd.getNumPartitions() >= 1
    return rdd


def test_spark_batch_read_after_retention_purged_planned_segments(spark, tmp_path):
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    ends = {q: hw_of(root, q) for q in range(PARTS)}   # where the planned slices end
    failing = _planned(spark, root)
    lenient = _planned(spark, root, failOnDataLoss="false")
    start = retain_purged(root)
    with pytest.raises(Exception) as info:
        failing.collect()
    msg = str(info.value)
    assert "DataLossError" in msg and "were removed by retention after the query planned " \
        "them" in msg and f"{0:020d}.log" in msg and "failOnDataLoss" in msg
    assert f"t-1: offsets 0..{start - 1}" in msg or "t-0: offsets 0.." in msg
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in lenient.collect())
    want = sorted((q, o, v) for q in range(PARTS)
                  for o, v in records_on_disk(f"{root}/t-{q}", 0, ends[q]))
    assert got == want and any(q == 1 and o == start for q, o, _ in got)
