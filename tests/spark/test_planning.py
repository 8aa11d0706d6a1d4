"""Planning rules on fake metadata (no files, no Spark): selection, offset resolution,
data loss, pushdown narrowing, slicing, maxRecordsPerPartition and minPartitions."""
from __future__ import annotations

import datetime as dt
import pickle

import numpy as np
import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThanOrEqual,
    In,
    LessThan,
)

from spark_kafkalog.errors import (
    DataLossError,
    InvalidOptionError,
    LogLayoutError,
    OffsetOutOfRangeError,
)
from spark_kafkalog.spark import filters
from spark_kafkalog.spark.options import parse_read_options
from spark_kafkalog.spark.planning import (
    BatchRows,
    LogSlice,
    cut_by_records,
    plan,
    split_for_limits,
)
from tests.spark.fakes import FakeLogDirs, fake_split_points

MB = 1 << 20


@pytest.fixture(autouse=True)
def _unpacked(monkeypatch):
    """These tests check the split steps slice by slice; packing slices into tasks has
    its own tests (test_packing.py)."""
    monkeypatch.setenv("SPARK_KAFKALOG_PACK", "false")


def two_topics():
    # a-0: 3 segments of 1000 offsets; a-1: one segment; b-0: empty-ish; internal topic
    return FakeLogDirs({
        ("a", 0): [(0, 1000, 1 * MB), (1000, 2000, 1 * MB), (2000, 3000, 1 * MB)],
        ("a", 1): [(0, 500, 4 * MB)],
        ("b", 0): [(0, 10, 1000)],
        ("__consumer_offsets", 0): [(0, 5, 100)],
    })


def fake_batch_rows(logdirs, s, opts, batch_records=1):
    """Batches of ``batch_records`` offsets, one record per offset, positions spread
    evenly over each fake segment's bytes (what planning.batch_rows yields from files)."""
    for base, nxt, size in logdirs.layout[(s.topic, s.partition)]:
        lo, hi = max(base, s.start_offset), min(nxt, s.end_offset)
        if lo >= hi:
            continue
        first = base + (lo - base) // batch_records * batch_records
        starts = np.arange(first, hi, batch_records, dtype=np.int64)
        ends = np.minimum(starts + batch_records, hi)
        rows = ends - np.maximum(starts, lo)
        per = size / max(1, nxt - base)
        yield BatchRows(base, starts, ((starts - base) * per).astype(np.int64), rows)


def run(logdirs, pushdown=filters.NONE, count=fake_batch_rows, **opts):
    base = {"path": "/fake", "subscribe": "a"}
    o = parse_read_options({**base, **opts})
    slices = plan(logdirs, o, pushdown, split_points=fake_split_points, count=count)
    for s in slices:
        assert isinstance(s, LogSlice)
        assert pickle.loads(pickle.dumps(s)) == s
    return slices


def ranges(slices):
    return [(s.topic, s.partition, s.start_offset, s.end_offset) for s in slices]


def test_default_one_slice_per_partition_when_small():
    slices = run(two_topics())
    assert ranges(slices) == [("a", 0, 0, 3000), ("a", 1, 0, 500)]
    assert slices[0].start_position == (0, 0)


def test_segment_ranges_and_byte_cuts():
    # 1.5 MB target: a-0's 1 MB segments pack one per slice (two would exceed it... ours
    # packs while under target), a-1's 4 MB segment is cut in byte ranges
    slices = run(two_topics(), maxPartitionBytes=str(3 * MB // 2))
    by = {}
    for s in slices:
        by.setdefault((s.topic, s.partition), []).append((s.start_offset, s.end_offset))
    assert by[("a", 0)][0][0] == 0 and by[("a", 0)][-1][1] == 3000
    assert len(by[("a", 1)]) == 3          # 4 MB / 1.5 MB
    for key, rs in by.items():               # consecutive, no gap, no overlap
        assert all(rs[i][1] == rs[i + 1][0] for i in range(len(rs) - 1))
    # every slice keeps only the segments it reads, plus the next one (its successor)
    for s in slices:
        bases = [seg.base_offset for seg in s.partition_dir.segments]
        assert bases[0] <= s.start_offset
        assert sum(b >= s.end_offset for b in bases) <= 1


def test_pattern_skips_internal_and_subscribe_names_missing():
    logdirs = two_topics()
    o = parse_read_options({"path": "/f", "subscribePattern": ".*"})
    got = plan(logdirs, o, split_points=fake_split_points)
    assert {s.topic for s in got} == {"a", "b"}
    o = parse_read_options({"path": "/f", "subscribe": "__consumer_offsets"})
    assert [s.topic for s in plan(logdirs, o, split_points=fake_split_points)] == \
        ["__consumer_offsets"]
    with pytest.raises(LogLayoutError, match="subscribe: topic nope not found"):
        run(logdirs, subscribe="a,nope")
    o = parse_read_options({"path": "/f", "assign": '{"a":[7]}'})
    with pytest.raises(LogLayoutError, match="assign: partition a-7 not found"):
        plan(logdirs, o, split_points=fake_split_points)


def test_assign_reads_only_named_partitions():
    o = parse_read_options({"path": "/f", "assign": '{"a":[1]}'})
    assert ranges(plan(two_topics(), o, split_points=fake_split_points)) == [("a", 1, 0, 500)]


def test_specific_offsets_and_sentinels():
    slices = run(two_topics(), startingOffsets='{"a":{"0":10,"1":-2}}',
                 endingOffsets='{"a":{"0":-1,"1":20}}')
    assert ranges(slices) == [("a", 0, 10, 3000), ("a", 1, 0, 20)]


def test_specific_offsets_must_name_every_partition():
    with pytest.raises(InvalidOptionError, match="startingOffsets: specific offsets must name"):
        run(two_topics(), startingOffsets='{"a":{"0":10}}')
    with pytest.raises(InvalidOptionError, match="endingOffsetsByTimestamp"):
        run(two_topics(), endingOffsetsByTimestamp='{"a":{"0":10}}')


def test_data_loss_below_log_start():
    logdirs = FakeLogDirs({("a", 0): [(100, 200, 1000)]}, log_start={("a", 0): 150})
    with pytest.raises(DataLossError, match="offset 120 of a-0 is below the log start "
                                            "offset 150"):
        run(logdirs, startingOffsets='{"a":{"0":120}}')
    assert ranges(run(logdirs, startingOffsets='{"a":{"0":120}}', failOnDataLoss="false")) \
        == [("a", 0, 150, 200)]
    # earliest is the checkpointed log start, not the first segment's base
    assert ranges(run(logdirs)) == [("a", 0, 150, 200)]


def test_past_upper_bound_and_start_after_end():
    logdirs = FakeLogDirs({("a", 0): [(0, 100, 1000)]}, upper={("a", 0): 80})
    assert ranges(run(logdirs)) == [("a", 0, 0, 80)]             # bounded by high watermark
    assert ranges(run(logdirs, readPastHighWatermark="true")) == [("a", 0, 0, 100)]
    with pytest.raises(OffsetOutOfRangeError, match="endingOffsets: offset 90 of a-0"):
        run(logdirs, endingOffsets='{"a":{"0":90}}')
    assert ranges(run(logdirs, endingOffsets='{"a":{"0":90}}', failOnDataLoss="false")) == \
        [("a", 0, 0, 80)]
    with pytest.raises(OffsetOutOfRangeError, match="startingOffsets: offset 95"):
        run(logdirs, startingOffsets='{"a":{"0":95}}')
    assert run(logdirs, startingOffsets='{"a":{"0":95}}', failOnDataLoss="false") == []


def test_read_committed_bounded_by_last_stable_offset():
    logdirs = FakeLogDirs({("a", 0): [(0, 100, 1000), (100, 200, 1000)]},
                          lso={("a", 0): 150})
    slices = run(logdirs, **{"kafka.isolation.level": "read_committed"})
    assert ranges(slices) == [("a", 0, 0, 150)]
    # read_committed keeps later segments (abort markers may be there)
    assert [s.base_offset for s in slices[0].partition_dir.segments] == [0, 100]


def test_timestamps_resolve_through_offset_for_timestamp():
    logdirs = FakeLogDirs({("a", 0): [(0, 1000, 10000)], ("a", 1): [(0, 1000, 10000)]})
    # ts = 1_000_000 + 10 * offset
    slices = run(logdirs, startingTimestamp=str(1_000_000 + 10 * 250),
                 endingOffsetsByTimestamp=f'{{"a":{{"0":{1_000_000 + 10 * 700},"1":9999999}}}}')
    assert ranges(slices) == [("a", 0, 250, 700), ("a", 1, 250, 1000)]   # no match -> latest
    with pytest.raises(OffsetOutOfRangeError, match="startingTimestamp: no offset matched"):
        run(logdirs, startingTimestamp="99999999")
    assert run(logdirs, startingTimestamp="99999999",
               startingOffsetsByTimestampStrategy="latest") == []
    slices = run(logdirs, startingOffsetsByTimestamp='{"a":{"0":-2,"1":1000005}}')
    assert ranges(slices) == [("a", 0, 0, 1000), ("a", 1, 1, 1000)]


def test_max_records_per_partition_exact_split():
    # one record per batch: Spark's even division (ceil(3000/400) = 8 pieces of 375)
    slices = run(two_topics(), maxRecordsPerPartition="400")
    a0 = [(s.start_offset, s.end_offset) for s in slices if s.partition == 0]
    a1 = [(s.start_offset, s.end_offset) for s in slices if s.partition == 1]
    assert len(a0) == 8 and all(e - s <= 400 for s, e in a0)     # ceil(3000/400)
    assert a0[0] == (0, 375) and a0[-1][1] == 3000
    assert a1 == [(0, 250), (250, 500)]
    assert [s.records for s in slices] == [375] * 8 + [250, 250]
    # every piece starts with a position hint at its first batch
    assert slices[0].start_position == (0, 0)
    assert slices[1].start_position == (0, int(375 * (1 * MB / 1000)))
    assert slices[3].start_position == (1000, int(125 * (1 * MB / 1000)))


def test_max_records_cuts_at_batch_boundaries():
    def count(logdirs, s, opts):
        return fake_batch_rows(logdirs, s, opts, batch_records=150)
    # batches of 150 records (per segment of 1000 offsets: the last one of 100): a
    # piece ends at the first boundary at or past its even share (3000 / 8 = 375), or
    # before a batch that would take it over 400
    slices = run(two_topics(), count=count, maxRecordsPerPartition="400")
    a0 = [s for s in slices if s.partition == 0]
    assert all((s.start_offset % 1000) % 150 == 0 for s in a0)
    assert [(s.start_offset, s.records) for s in a0[:4]] == \
        [(0, 300), (300, 300), (600, 400), (1000, 300)]
    assert len(a0) == 9 and sum(s.records for s in a0) == 3000
    assert all(s.end_offset == t.start_offset for s, t in zip(slices, slices[1:])
               if s.partition == t.partition)
    # a batch bigger than the limit is a piece of its own
    slices = run(two_topics(), count=count, maxRecordsPerPartition="100")
    assert {s.records for s in slices} == {150, 100, 50}
    assert len([s for s in slices if s.partition == 0]) == 21


def test_cut_by_records_skips_empty_batches_and_keeps_hints():
    s = LogSlice("t", 0, two_topics().partition("a", 1), 10, 60, (0, 0), 5000)
    # batches at offsets 10, 20 (control: 0 rows), 30, 40, 50; 10 rows each otherwise
    b = BatchRows(0, np.array([10, 20, 30, 40, 50]), np.array([0, 100, 200, 300, 400]),
                  np.array([10, 0, 10, 10, 10]))
    # 40 rows, at most 20 a piece: two pieces of 20, the control batch inside the first
    pieces = cut_by_records(s, [b], 20)
    assert [(p.start_offset, p.end_offset, p.records, p.start_position) for p in pieces] == \
        [(10, 40, 20, (0, 0)), (40, 60, 20, (0, 300))]
    # at most 15: the cap cuts before every 10-row batch after the first
    pieces = cut_by_records(s, [b], 15)
    assert [(p.start_offset, p.records) for p in pieces] == [(10, 10), (30, 10), (40, 10),
                                                            (50, 10)]
    assert cut_by_records(s, [BatchRows(0, np.array([10]), np.array([0]),
                                        np.array([0]))], 20) == []


def test_min_partitions_like_spark():
    # Spark KafkaOffsetRangeCalculator: sizes 3000 and 500, minPartitions 4:
    # part counts round(3000/3500*4)=3 and round(500/3500*4)=1 (unsplit), then the split
    # ranges share minPartitions - unsplit = 3 -> a-0 in 3
    slices = run(two_topics(), minPartitions="4")
    assert ranges(slices) == [("a", 0, 0, 1000), ("a", 0, 1000, 2000), ("a", 0, 2000, 3000),
                              ("a", 1, 0, 500)]
    # enough partitions already: no split
    assert len(run(two_topics(), minPartitions="2")) == 2


def test_min_partitions_after_max_records():
    # maxRecords: a-0 -> [0,1500) [1500,3000), a-1 whole; then minPartitions 8 over 3
    # slices of 1500, 1500, 500: a-1 stays whole (round(500/3500*8) = 1), the other two
    # share 8 - 1 = 7: round(1500/3000*7) = round(3.5) = 4 each (Scala rounds half up)
    slices = run(two_topics(), maxRecordsPerPartition="1500", minPartitions="8")
    assert ranges(slices) == [("a", 0, i * 375, (i + 1) * 375) for i in range(8)] + \
        [("a", 1, 0, 500)]


def test_split_for_limits_drops_empty():
    s = LogSlice("t", 0, None, 5, 5)
    assert split_for_limits([s], 3) == []


# -- pushdown -----------------------------------------------------------------------------

def pd(*fs):
    p, rejected = filters.push(list(fs))
    assert rejected == []
    return p


def test_pushdown_prunes_topics_partitions_offsets():
    logdirs = two_topics()
    o = parse_read_options({"path": "/f", "subscribePattern": ".*"})
    got = plan(logdirs, o, pd(EqualTo(("topic",), "a"), In(("partition",), [1, 5]),
                              GreaterThanOrEqual(("offset",), 100),
                              LessThan(("offset",), 300)),
               split_points=fake_split_points)
    assert ranges(got) == [("a", 1, 100, 300)]


def test_pushdown_last_percent_of_offsets_reads_one_slice_near_the_end():
    logdirs = FakeLogDirs({("a", 0): [(i * 1000, (i + 1) * 1000, MB) for i in range(100)]})
    got = run(logdirs, pd(EqualTo(("partition",), 0), GreaterThanOrEqual(("offset",), 99000)))
    assert ranges(got) == [("a", 0, 99000, 100000)]
    assert got[0].start_position == (99000, 0)
    assert [s.base_offset for s in got[0].partition_dir.segments] == [99000]   # last one


def test_pushdown_timestamp_lower_bound_seeks():
    logdirs = FakeLogDirs({("a", 0): [(0, 1000, 10000)], ("a", 1): [(0, 500, 10000)]})
    t = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
        milliseconds=1_000_000 + 10 * 400)
    got = run(logdirs, pd(GreaterThanOrEqual(("timestamp",), t)))
    assert ranges(got) == [("a", 0, 400, 1000), ("a", 1, 400, 500)]
    assert logdirs.seeks == [("a", 0, 1_004_000), ("a", 1, 1_004_000)]


def test_pushdown_contradiction_plans_nothing_but_still_validates():
    logdirs = two_topics()
    assert run(logdirs, pd(EqualTo(("topic",), "zzz"))) == []
    assert run(logdirs, pd(EqualTo(("offset",), 3), EqualTo(("offset",), 4))) == []
    with pytest.raises(InvalidOptionError):
        run(logdirs, pd(EqualTo(("topic",), "zzz")), startingOffsets='{"a":{"0":1}}')
