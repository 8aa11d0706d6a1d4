"""End to end: ``spark.read.format("kafkalog")`` equals the log layer's ``read_table`` (same
rows, same order within a partition) for every option, on the log-layer test logs and the
real broker fixtures; partition counts; pushdown; reading with pushdown disabled.

One shared session; each test runs a handful of Spark queries on module-scoped logs.
"""
from __future__ import annotations

import datetime as dt
import pickle

import pyarrow as pa
import pytest

from spark_kafkalog.errors import DataLossError, InvalidOptionError, OffsetOutOfRangeError
from spark_kafkalog.format import record_schema
from spark_kafkalog.log import LogDirs, ReadStats, read_table
from spark_kafkalog.spark.datasource import KafkaLogDataSource, spark_schema
from spark_kafkalog.spark.planning import LogSlice
from tests.log.logbuilder import LogDirBuilder, flip_byte
from tests.log.test_read import TOPIC, _records, build_rich

pytestmark = pytest.mark.spark

MULTI = "multi"
LEGACY = "legacy"


# -- logs -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two log-dir roots (JBOD): the log layer's "rich" partition (every batch kind,
    transactions, gaps, log start inside a segment, high watermark below the log end), a
    3-partition topic with several segments and codecs split over both roots, and a
    topic of legacy v0/v1 message sets."""
    root = tmp_path_factory.mktemp("logs")
    _, rich = build_rich(root / "scratch")
    b = LogDirBuilder(root / "r0", root / "r1")
    b.parts.append((0, rich))
    parts = {}
    for n in range(3):
        p = b.partition(MULTI, n, root=n % 2, index_interval_bytes=200,
                        base_timestamp=1_700_000_000_000 + n)
        for seg in range(3):
            for i, codec in enumerate(["none", "lz4", "zstd", "gzip", "snappy"]):
                p.append(_records(20, b"m%d-%d-%d" % (n, seg, i), with_headers=i == 1),
                         compression=codec)
            if n == 1 and seg == 1:
                p.gap(7)
            p.roll()
        p.append(_records(5, b"tail%d" % n))
        p.high_watermark = p.log_end_offset
        parts[n] = p
    p = b.partition(LEGACY, 0, index_interval_bytes=100)
    p.append_legacy(0, _records(5, b"v0"))
    p.append_legacy(0, _records(4, b"v0z"), compression="gzip")
    p.append_legacy(1, _records(5, b"v1"))
    p.append_legacy(1, _records(6, b"v1s"), compression="snappy")
    p.roll()
    p.append_legacy(1, _records(3, b"v1x"), log_append_time=1_600_000_000_500)
    p.append(_records(3, b"v2"))
    b.write()
    # multi-1's gap between segments is compaction's: the cleaner checkpoint says so (a
    # jump between whole batches that nothing explains is data loss)
    (root / "r1" / "cleaner-offset-checkpoint").write_text(
        f"0\n1\n{MULTI} 1 {parts[1].log_end_offset}\n")
    return {"r0": str(root / "r0"), "r1": str(root / "r1"),
            "path": f"{root / 'r0'},{root / 'r1'}", "rich": rich, "multi": parts,
            "legacy": p}


def spark_table(df) -> pa.Table:
    """The DataFrame's rows as Arrow, in our schema (names and types checked by cast)."""
    t = df.toArrow()
    schema = record_schema("headers" in df.columns)
    assert t.column_names == schema.names
    return t.cast(schema)


def expected(path, topics, **kw) -> pa.Table:
    tables = [read_table(path, t, **kw) for t in topics]
    return pa.concat_tables(tables) if tables else None


def assert_same(got: pa.Table, want: pa.Table):
    if not got.equals(want):
        g, e = got.to_pylist(), want.to_pylist()
        assert [(r["topic"], r["partition"], r["offset"]) for r in g] == \
            [(r["topic"], r["partition"], r["offset"]) for r in e]
        for a, b in zip(g, e):
            assert a == b
        raise AssertionError("tables differ")


def load(spark, path, **opts):
    r = spark.read.format("kafkalog")
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load(path)


# -- equality with the log layer ------------------------------------------------------------

@pytest.mark.parametrize("headers", [False, True])
def test_all_topics_equal_read_table(spark, logs, headers):
    df = load(spark, logs["path"], subscribePattern=".*", includeHeaders=str(headers).lower())
    want = expected(logs["path"], [TOPIC, LEGACY, MULTI], include_headers=headers)
    assert_same(spark_table(df), want)


def test_read_committed(spark, logs):
    df = load(spark, logs["r0"], subscribe=TOPIC, **{"kafka.isolation.level": "read_committed"},
              includeHeaders="true")
    want = read_table(logs["r0"], TOPIC, isolation_level="read_committed")
    assert_same(spark_table(df), want)
    assert want.num_rows == len(logs["rich"].expected_rows("read_committed"))


def test_specific_offsets_and_read_past_high_watermark(spark, logs):
    rich = logs["rich"]
    df = load(spark, logs["r0"], subscribe=TOPIC, startingOffsets=f'{{"{TOPIC}":{{"0":20}}}}',
              endingOffsets=f'{{"{TOPIC}":{{"0":45}}}}')
    assert_same(spark_table(df), read_table(logs["r0"], TOPIC, include_headers=False,
                                            starting_offsets={0: 20}, ending_offsets={0: 45}))
    df = load(spark, logs["r0"], subscribe=TOPIC, readPastHighWatermark="true")
    got = spark_table(df)
    assert_same(got, read_table(logs["r0"], TOPIC, include_headers=False,
                                read_past_high_watermark=True))
    assert got.column("offset")[-1].as_py() == rich.log_end_offset - 1
    mapped = spark_table(load(spark, logs["r0"], subscribe=TOPIC, readPastHighWatermark="true",
                              memoryMap="true", windowBytes="64k"))
    assert_same(mapped, got)


def test_timestamp_starts(spark, logs):
    # multi-N: record i of its log has timestamp base + offset (builder default)
    ts = 1_700_000_000_000 + 150
    df = load(spark, logs["path"], subscribe=MULTI, startingTimestamp=str(ts))
    want = expected(logs["path"], [MULTI], include_headers=False, starting_timestamp=ts)
    got = spark_table(df)
    assert_same(got, want)
    assert got.num_rows < expected(logs["path"], [MULTI], include_headers=False).num_rows
    by_ts = f'{{"{MULTI}":{{"0":{ts},"1":-2,"2":{ts + 100}}}}}'
    df = load(spark, logs["path"], subscribe=MULTI, startingOffsetsByTimestamp=by_ts)
    logdirs = LogDirs(logs["path"])
    starts = {0: logdirs.offset_for_timestamp(logdirs.partition(MULTI, 0), ts), 1: -2,
              2: logdirs.offset_for_timestamp(logdirs.partition(MULTI, 2), ts + 100)}
    assert_same(spark_table(df), read_table(logs["path"], MULTI, include_headers=False,
                                            starting_offsets=starts))


def test_data_loss_and_out_of_range(spark, logs):
    below = f'{{"{TOPIC}":{{"0":3}}}}'          # the rich log starts at 11
    with pytest.raises(Exception) as info:
        load(spark, logs["r0"], subscribe=TOPIC, startingOffsets=below).collect()
    assert "DataLossError" in str(info.value) and "failOnDataLoss" in str(info.value)
    df = load(spark, logs["r0"], subscribe=TOPIC, startingOffsets=below, failOnDataLoss="false")
    assert_same(spark_table(df), read_table(logs["r0"], TOPIC, include_headers=False))
    with pytest.raises(Exception, match="OffsetOutOfRangeError"):
        load(spark, logs["r0"], subscribe=TOPIC,
             endingOffsets=f'{{"{TOPIC}":{{"0":100000}}}}').collect()


def test_planner_errors_are_ours():
    # the same errors, raised by the reader directly (no Spark wrapping)
    ds = KafkaLogDataSource({"path": "/nonexistent-kafkalog", "subscribe": "t"})
    reader = ds.reader(spark_schema(False))
    with pytest.raises(Exception) as info:
        reader.partitions()
    assert "nonexistent-kafkalog" in str(info.value)


# -- partitions --------------------------------------------------------------------------------

def plan(path, **opts):
    ds = KafkaLogDataSource({"path": path, **{k.lower(): v for k, v in opts.items()}})
    reader = ds.reader(spark_schema(False))
    return reader, reader.partitions()


def test_partition_counts_and_pickling(logs):
    from spark_kafkalog.log import split_points

    _, parts = plan(logs["path"], subscribe=MULTI, packPartitions="false")
    assert len(parts) == 3                      # one per partition: every one is small
    for p in parts:
        assert isinstance(p, LogSlice) and pickle.loads(pickle.dumps(p)) == p
    # packed (the default): the three small slices share tasks (no more than the cores
    # ask for: Spark's bytesPerCore rule)
    _, packed = plan(logs["path"], subscribe=MULTI, packPartitions="true")
    assert len(packed) < 3
    flat = [s for t in packed for s in getattr(t, "slices", (t,))]
    assert sorted(flat, key=lambda s: s.partition) == parts
    for t in packed:
        assert pickle.loads(pickle.dumps(t)) == t
    # byte cuts: exactly the ranges split_points finds through the .index files
    logdirs = LogDirs(logs["path"])
    cuts = {n: split_points(logdirs, logdirs.partition(MULTI, n), 0,
                            logs["multi"][n].log_end_offset, 4096) for n in range(3)}
    _, parts = plan(logs["path"], subscribe=MULTI, maxPartitionBytes="4096")
    assert len(parts) == sum(len(c) for c in cuts.values()) > 6
    assert [(s.partition, s.start_offset) for s in parts] == \
        [(n, c[0]) for n in range(3) for c in cuts[n]]
    assert all(s.start_position == (c[1], c[2]) for s, c in
               zip(parts, [c for n in range(3) for c in cuts[n]]))
    # minPartitions: sizes 305, 312, 305 offsets -> round(x / 922 * 9) = 3 parts each
    _, parts = plan(logs["path"], subscribe=MULTI, minPartitions="9")
    assert len(parts) == 9
    # maxRecordsPerPartition, exact counts cut at batch boundaries: each partition holds
    # 15 batches of 20 records and a tail of 5 (multi-1 also a gap of 7 offsets); two
    # batches fit in 50 -> 7 pieces of 40, then 20 + 5: 8 per partition
    _, capped = plan(logs["path"], subscribe=MULTI, maxRecordsPerPartition="50",
                     packPartitions="false")
    assert len(capped) == 24
    assert [s.records for s in capped] == ([40] * 7 + [25]) * 3
    # packed, a task still holds at most 50 rows
    _, packed = plan(logs["path"], subscribe=MULTI, maxRecordsPerPartition="50",
                     packPartitions="true")
    assert len(packed) <= 24 and all(t.est_records <= 50 for t in packed)
    assert sum(t.est_records for t in packed) == sum(s.records for s in capped)
    for s in parts + capped:
        assert pickle.loads(pickle.dumps(s)) == s


@pytest.fixture(scope="module")
def counted_logs(tmp_path_factory):
    """Logs where offset spans overcount records: a compacted topic (gaps between and
    inside batches, several segments) and a transactional one (markers, an aborted
    transaction)."""
    root = tmp_path_factory.mktemp("counted")
    b = LogDirBuilder(root)
    p = b.partition("compacted", 0, index_interval_bytes=100)
    for i in range(12):                     # 12 batches of 10 records, 120 rows
        if i % 2:
            p.append(_records(10, b"c%d" % i))
        else:                               # a compacted batch: gaps inside it
            p.append(_records(10, b"c%d" % i), offset_deltas=[3 * d for d in range(10)])
        if i == 11:
            # the log ends with a batch, as a broker's does: the cleaner keeps an empty one
            p.empty_batch(15)
        else:
            p.gap(15)
        if i in (4, 8):
            p.roll()
    p.high_watermark = p.log_end_offset
    t = b.partition("txn", 0, index_interval_bytes=100)
    t.append(_records(10, b"n0"))
    for codec, commit in (("none", True), ("lz4", False), ("gzip", True)):
        txn = t.begin_txn(7)
        t.append(_records(10, b"t1" + codec.encode()), txn=txn, compression=codec)
        t.append(_records(10, b"t2" + codec.encode()), txn=txn, compression=codec)
        t.end_txn(txn, commit=commit)
        t.append(_records(10, b"n" + codec.encode()))
    t.roll()
    t.append(_records(10, b"last"))
    t.high_watermark = t.log_end_offset
    b.write()
    return str(root), p, t


@pytest.mark.parametrize("topic,level,limit,pieces", [
    # 120 rows over 285 offsets: 3 pieces of 40 (offset spans: ceil(285 / 40) = 8)
    ("compacted", "read_uncommitted", "40", 3),
    # a batch is never cut: 10-row batches, at most 25 -> pieces of 20 (share 24)
    ("compacted", "read_uncommitted", "25", 6),
    # 110 rows in 11 batches (and 3 markers), at most 30: 30, 30, 30, 20
    ("txn", "read_uncommitted", "30", 4),
    # 90 rows once the aborted transaction is dropped: 3 of 30
    ("txn", "read_committed", "30", 3),
])
def test_max_records_per_partition_counts_records_exactly(spark, counted_logs, topic,
                                                         level, limit, pieces):
    from spark_kafkalog.log import read_partition
    from spark_kafkalog.spark.reader import open_logdirs

    path, compacted, txn = counted_logs
    want = read_table(path, topic, isolation_level=level, include_headers=False)
    offsets = (compacted if topic == "compacted" else txn).log_end_offset
    assert want.num_rows < offsets                 # spans overcount here
    reader, parts = plan(path, subscribe=topic, maxRecordsPerPartition=limit,
                         **{"kafka.isolation.level": level})
    assert len(parts) == pieces
    assert all(s.records <= int(limit) for s in parts)
    assert sum(s.records for s in parts) == want.num_rows
    # every piece reads exactly the rows it was planned with, from its position hint
    logdirs = open_logdirs(reader.opts)
    for s in parts:
        assert s.start_position is not None
        stats = ReadStats()
        got = read_partition(logdirs, s.partition_dir, start_offset=s.start_offset,
                             end_offset=s.end_offset, isolation_level=level,
                             start_position=s.start_position, stats=stats)
        assert sum(b.num_rows for b in got) == s.records
        assert stats.index_fallbacks == 0
        assert pickle.loads(pickle.dumps(s)) == s
    df = load(spark, path, subscribe=topic, maxRecordsPerPartition=limit,
              **{"kafka.isolation.level": level})
    assert df.rdd.getNumPartitions() == pieces
    assert_same(spark_table(df), want)


def test_max_records_counts_within_offset_bounds(counted_logs):
    # a range starting and ending inside batches (and inside a compacted batch's gaps)
    path, compacted, _ = counted_logs
    start, end = 7, 200
    want = read_table(path, "compacted", include_headers=False,
                      starting_offsets={0: start}, ending_offsets={0: end})
    _, parts = plan(path, subscribe="compacted", maxRecordsPerPartition="16",
                    startingOffsets=f'{{"compacted":{{"0":{start}}}}}',
                    endingOffsets=f'{{"compacted":{{"0":{end}}}}}')
    assert parts[0].start_offset == start and parts[-1].end_offset == end
    assert sum(s.records for s in parts) == want.num_rows
    assert all(s.records <= 16 for s in parts)


def test_max_records_on_legacy_wrappers(logs):
    # compressed v0/v1 wrappers do not say how many messages they hold: decoded to count
    want = read_table(logs["r0"], LEGACY, include_headers=False)
    _, parts = plan(logs["r0"], subscribe=LEGACY, maxRecordsPerPartition="6")
    assert sum(s.records for s in parts) == want.num_rows
    assert all(s.records <= 6 for s in parts)


def test_unknown_filesystem_option_fails_at_planning(logs):
    from spark_kafkalog.errors import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="fs.s3.bogus"):
        plan(logs["r0"], subscribe=TOPIC, **{"fs.s3.bogus": "1"})


def test_split_plans_read_the_same_rows(spark, logs):
    want = read_table(logs["r0"], TOPIC, include_headers=False)
    for opts in ({"maxPartitionBytes": "1024"},
                 {"minPartitions": "5", "maxRecordsPerPartition": "13"}):
        _, parts = plan(logs["r0"], subscribe=TOPIC, **opts)
        assert len(parts) >= 4
        df = load(spark, logs["r0"], subscribe=TOPIC, **opts)
        assert df.rdd.getNumPartitions() == len(parts)
        assert_same(spark_table(df), want)


# -- pushdown ------------------------------------------------------------------------------------

def test_pushdown_filters_return_exact_rows(spark, logs):
    df = load(spark, logs["path"], subscribePattern=".*")
    q = df.filter(f"topic = '{MULTI}' and partition in (1, 2) and offset >= 120 "
                  f"and offset < 250 and timestamp >= timestamp_millis(1700000000140)")
    got = spark_table(q).to_pylist()
    all_rows = expected(logs["path"], [MULTI], include_headers=False).to_pylist()
    since = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
        milliseconds=1_700_000_000_140)
    want = [r for r in all_rows if r["partition"] in (1, 2) and 120 <= r["offset"] < 250
            and r["timestamp"] is not None and r["timestamp"] >= since]
    assert got == want and got
    plan_text = q._jdf.queryExecution().optimizedPlan().toString()
    assert "Filter" not in plan_text               # every filter was taken by the source


def test_pushdown_reads_few_bytes(tmp_path):
    """One partition's last 1% of offsets reads at most 5% of that partition's bytes
    (every byte read through the filesystem counted: indexes, checkpoints and log)."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual

    from spark_kafkalog.spark.filters import push
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.planning import plan as plan_slices
    from spark_kafkalog.spark.reader import read_slice
    from tests.log.fsutil import CountingFileSystem
    from tests.log.logbuilder import write_large_partition

    root = tmp_path / "logs"
    info = write_large_partition(root, "big", 0, total_bytes=24 << 20, segment_bytes=2 << 20,
                                 batch_records=50, value_bytes=100, compression="lz4")
    counting = CountingFileSystem()
    logdirs = LogDirs(str(root), filesystem=counting.fs)
    total = logdirs.partition("big", 0).size_bytes
    end = info["log_end_offset"]
    first = end - end // 100
    opts = parse_read_options({"path": str(root), "subscribe": "big"})
    pushdown, rejected = push([EqualTo(("partition",), 0),
                               GreaterThanOrEqual(("offset",), first)])
    assert rejected == []
    counting.reset()
    slices = plan_slices(logdirs, opts, pushdown)
    planned = counting.bytes_read
    counting.reset()
    rows = sum(b.num_rows for s in slices for b in read_slice(logdirs, opts, s, pushdown))
    read = counting.bytes_read
    assert rows == end - first
    assert [(s.start_offset, s.end_offset) for s in slices] == [(first, end)]
    print(f"pushdown last 1%: planning read {planned} B, reading {read} B, partition {total} B "
          f"({(planned + read) / total:.2%})")
    assert planned + read <= 0.05 * total, (planned, read, total)


def test_reading_works_with_pushdown_disabled(spark, logs):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        df = load(spark, logs["path"], subscribe=MULTI)
        got = spark_table(df.filter("partition = 1 and offset >= 100"))
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    want = [r for r in expected(logs["path"], [MULTI], include_headers=False).to_pylist()
            if r["partition"] == 1 and r["offset"] >= 100]
    assert got.to_pylist() == want and want


def test_pushdown_follows_the_option_then_the_session_conf(spark, logs):
    from spark_kafkalog.spark.reader import KafkaLogPushdownReader

    def reader(**opts):
        return KafkaLogDataSource({"path": logs["path"], "subscribe": MULTI,
                                   **opts}).reader(None)

    assert isinstance(reader(), KafkaLogPushdownReader)          # the session's conf: on
    assert not isinstance(reader(pushFilters="false"), KafkaLogPushdownReader)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    try:
        assert not isinstance(reader(), KafkaLogPushdownReader)
        assert isinstance(reader(pushFilters="true"), KafkaLogPushdownReader)
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    with pytest.raises(InvalidOptionError, match="pushFilters"):
        reader(pushFilters="maybe")


# -- corruption policy -----------------------------------------------------------------------

def test_on_corruption_policies_match_the_log_layer(spark, tmp_path):
    b, p = build_rich(tmp_path / "logs")
    seg_base = p.segments[1][0]
    victim = [bi for bi in p.segment_batches(seg_base) if not bi.control][1]
    path = b.roots[0] / f"{TOPIC}-0" / f"{seg_base:020d}.log"
    flip_byte(path, victim.position + victim.size // 2 + 10, 0x5A)
    root = str(b.roots[0])
    with pytest.raises(Exception) as info:
        load(spark, root, subscribe=TOPIC).collect()
    text = str(info.value)
    assert "CorruptRecordError" in text and str(path) in text
    assert f"position {victim.position}" in text
    assert "set option onCorruption=skip" in text      # the fix, in the message
    for policy in ("skip", "stop"):
        df = load(spark, root, subscribe=TOPIC, onCorruption=policy)
        assert_same(spark_table(df), read_table(root, TOPIC, include_headers=False,
                                                on_corruption=policy))


# -- real broker files -------------------------------------------------------------------------

def test_real_broker_fixtures_equal_read_table(spark, real_broker):
    for d in sorted(x for x in real_broker.iterdir() if x.is_dir()):
        if d.name == "kafka-rust-testdata":
            continue                         # has a deliberately broken CRC: see below
        root = str(d)
        logdirs = LogDirs(root, include_internal=True)
        topics = logdirs.topics()
        assert topics, d
        df = load(spark, root, subscribe=",".join(topics), includeHeaders="true")
        want = expected(root, topics)
        assert_same(spark_table(df), want)
    root = str(real_broker / "kafka-rust-testdata")
    topics = [t for t in LogDirs(root).topics() if "invalid_crc" not in t]
    df = load(spark, root, subscribe=",".join(topics))
    assert_same(spark_table(df), expected(root, topics, include_headers=False))


def test_real_broker_high_watermark_and_read_committed(spark, real_broker):
    root = str(real_broker / "kafka-0.10-magic1")
    df = load(spark, root, subscribe="__consumer_offsets", **{
        "kafka.isolation.level": "read_committed"})
    got = spark_table(df)
    assert got.num_rows == 856                       # bounded by the high watermark
    assert_same(got, read_table(root, "__consumer_offsets", include_headers=False,
                                isolation_level="read_committed"))
    df = load(spark, root, subscribe="__consumer_offsets", readPastHighWatermark="true")
    assert df.count() == 860


@pytest.mark.xfail(strict=True, reason=(
    "pyspark 4.3.0 stores the read plan made during filter pushdown on the DataFrame's "
    "provider object (PythonDataSourceV2.setReadInfo) and reuses it for later scans of the "
    "same DataFrame, so a filtered query's pruning leaks into an unfiltered one. Upstream "
    "Spark scopes it to the scan (PythonScanBuilder); this test starts passing then."))
def test_dataframe_reused_after_a_filtered_query(spark, logs):
    df = load(spark, logs["path"], subscribe=MULTI)
    total = expected(logs["path"], [MULTI], include_headers=False).num_rows
    assert df.filter("partition = 0").count() == logs["multi"][0].log_end_offset
    assert df.count() == total


def test_a_new_query_sees_the_log_as_it_is_now(spark, tmp_path):
    """Python workers are reused across queries: nothing planned or listed earlier may
    hide records, segments or partitions added since."""
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("grow", 0)
    p.append(_records(10, b"a"))
    p.high_watermark = p.log_end_offset
    b.write()
    path = str(b.roots[0])
    assert load(spark, path, subscribe="grow").count() == 10
    p.roll()
    p.append(_records(15, b"b"))
    p.high_watermark = p.log_end_offset
    q = b.partition("grow", 1)
    q.append(_records(4, b"c"))
    q.high_watermark = q.log_end_offset
    b.write()
    df = load(spark, path, subscribe="grow")
    assert df.count() == 29
    assert_same(spark_table(df), read_table(path, "grow", include_headers=False))


# -- prefetching -----------------------------------------------------------------------------

def test_prefetched_delivers_in_order_and_reraises_where_it_failed():
    from spark_kafkalog.errors import CorruptRecordError
    from spark_kafkalog.spark.reader import prefetched

    def source():
        yield from range(5)
        raise CorruptRecordError("bad batch", path="/x.log", position=7, offset=5)

    got = []
    with pytest.raises(CorruptRecordError, match="bad batch"):
        for item in prefetched(source, depth=2):
            got.append(item)
    assert got == [0, 1, 2, 3, 4]


def test_prefetched_early_close_stops_and_closes_the_source():
    import threading

    from spark_kafkalog.spark.reader import prefetched

    events = []

    def source():
        try:
            for i in range(1000):
                events.append(i)
                yield i
        finally:
            events.append("closed")

    it = prefetched(source)
    assert next(it) == 0
    it.close()
    assert events[-1] == "closed"
    # the producer ran at most a couple of items ahead, and is gone
    assert len(events) <= 5
    assert not any(t.name == "kafkalog-prefetch" for t in threading.enumerate())
    # an iterator that is never started leaves nothing behind either
    assert list(prefetched(lambda: iter(()))) == []


def test_limit_stops_the_prefetching_reader(spark, logs):
    # Spark stops consuming a task's iterator after a LIMIT: the prefetch thread is told
    # to stop and the worker serves the next query normally
    df = load(spark, logs["path"], subscribe=MULTI, windowBytes="64k")
    assert len(df.limit(3).collect()) == 3
    want = expected(logs["path"], [MULTI], include_headers=False)
    assert_same(spark_table(load(spark, logs["path"], subscribe=MULTI)), want)
