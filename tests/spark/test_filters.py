"""Filter pushdown translation (no Spark session)."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from spark_kafkalog.format.schema import SCHEMA
from spark_kafkalog.spark.filters import NONE, Interval, push, row_mask

UTC = dt.timezone.utc


def test_accepted_and_rejected_are_the_same_objects():
    keep = [EqualTo(("key",), b"x"), Not(EqualTo(("partition",), 1)),
            StringStartsWith(("topic",), "a"), EqualTo(("partition",), "1"),
            GreaterThan(("timestamp",), dt.datetime(2024, 1, 1)),    # naive: not ours
            EqualTo(("headers", "key"), "k")]
    take = [EqualTo(("topic",), "t"), GreaterThanOrEqual(("offset",), 5),
            IsNotNull(("offset",))]
    pd, rejected = push(keep[:3] + take + keep[3:])
    assert len(rejected) == len(keep) and all(a is b for a, b in zip(rejected, keep))
    assert pd.topics == {"t"} and pd.offsets == Interval(5, (1 << 63) - 1)
    assert len(pd.accepted) == 3


def test_intervals_and_sets_intersect():
    pd, _ = push([GreaterThan(("offset",), 10), LessThanOrEqual(("offset",), 20),
                  In(("partition",), [1, 2, 3]), In(("partition",), [3, 4]),
                  GreaterThanOrEqual(("partition",), 2),
                  In(("topic",), ["a", "b"]), EqualNullSafe(("topic",), "b")])
    assert pd.offset_bounds() == (11, 21)
    assert pd.partitions == {3} and pd.partition_allowed(3) and not pd.partition_allowed(2)
    assert pd.topics == {"b"} and not pd.is_empty
    pd, _ = push([LessThan(("offset",), 5), GreaterThan(("offset",), 9)])
    assert pd.is_empty
    pd, _ = push([IsNull(("partition",))])
    assert pd.is_empty
    pd, _ = push([In(("offset",), [7, 3, 9])])
    assert pd.offset_bounds() == (3, 10) and pd.offset_set == {3, 7, 9}


def test_timestamp_bounds_are_exact_microseconds():
    t = dt.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)
    pd, _ = push([GreaterThanOrEqual(("timestamp",), t)])
    us = 1704067200_001500
    assert pd.timestamp_us.lo == us
    assert pd.timestamp_lower_ms() == 1704067200_002        # ceil to whole ms
    pd, _ = push([GreaterThan(("timestamp",), t), LessThan(("timestamp",), t)])
    assert pd.is_empty


def batch(offsets, ts_ms, types):
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array([None] * n, pa.binary()), pa.array([b"v"] * n, pa.binary()),
        pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(offsets, pa.int64()),
        pa.array([x * 1000 for x in ts_ms], pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32())], schema=SCHEMA)


def test_row_mask():
    b = batch([1, 2, 3, 4], [-1, 1000, 2000, 3000], [0, 0, 1, 0])
    assert row_mask(b, NONE) is None
    t = dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)          # 1000 ms
    pd, _ = push([GreaterThanOrEqual(("timestamp",), t), In(("offset",), [2, 3, 4]),
                  EqualTo(("timestampType",), 0)])
    assert b.filter(row_mask(b, pd)).column("offset").to_pylist() == [2, 4]
    pd, _ = push([LessThan(("timestamp",), t)])
    assert b.filter(row_mask(b, pd)).column("offset").to_pylist() == [1]
