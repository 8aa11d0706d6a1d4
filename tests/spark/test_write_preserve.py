"""``df.write.format("kafkalog").option("offsets", "preserve")``: a read written back
keeps every record's offset, timestamp, timestamp type, key, value and headers. Source:
logs built by kafka-python/aiokafka (tests/log/logbuilder.py: every codec, headers,
compaction gaps, transactions with aborts, LogAppendTime); the real broker log dirs go
through export and import in tests/spark/test_import_files.py.

What preserve does with transactions: a DataFrame holds data records only (control
batches are never rows), so the written log has no transaction markers and its records
are not transactional. A read_uncommitted source therefore keeps aborted records as plain
data; a read_committed source leaves them out (their offsets become gaps)."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.files.checkpoint import read_checkpoint
from spark_kafkalog.spark.writer import make_stream_writer
from tests.log.logbuilder import build_rich_partition, rec
from tests.log.test_appender_util import read_kp

FS = pafs.LocalFileSystem()
TOPIC = "a.b-c_d"


def load(spark, root, topic, **opts):
    r = spark.read.format("kafkalog").option("path", root).option("subscribe", topic) \
        .option("includeHeaders", "true")
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def save(df, root, topic=None, **opts):
    w = df.write.format("kafkalog").option("path", root).option("offsets", "preserve")
    if topic:
        w = w.option("topic", topic)
    for k, v in opts.items():
        w = w.option(k, v)
    w.mode("append").save()


def ordered(t: pa.Table) -> pa.Table:
    """Rows by topic, partition, offset; headers [] and null alike (both: none)."""
    t = t.sort_by([("topic", "ascending"), ("partition", "ascending"),
                   ("offset", "ascending")])
    if "headers" in t.column_names:
        h = t.column("headers")
        t = t.set_column(t.column_names.index("headers"), "headers",
                         pc.if_else(pc.equal(pc.list_value_length(h), 0),
                                    pa.nulls(len(h), h.type), h))
    return t


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    root = tmp_path_factory.mktemp("rich")
    b, p = build_rich_partition(root)
    # a second partition: LogAppendTime runs, gaps, a log starting at 40
    q = b.partition(TOPIC, 1, base_offset=40)
    q.append([rec(b"k%d" % i, b"v%d" % i, ts=1_700_000_000_000 + i) for i in range(6)],
             compression="snappy", offset_deltas=[0, 1, 5, 6, 7, 30])
    q.append([rec(None, b"lat%d" % i) for i in range(4)], log_append_time=1_750_000_000_000)
    q.gap(100)
    q.append([rec(b"", b"") for _ in range(3)], compression="zstd")
    q.high_watermark = q.log_end_offset
    b.write()
    return str(root), p, q


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_of_a_built_log(spark, tmp_path, rich, codec):
    root, p, q = rich
    src = load(spark, root, TOPIC)
    dst = str(tmp_path / "dst")
    save(src, dst, TOPIC, compression=codec, partitions="2", batchSize="700")
    got = ordered(load(spark, dst, TOPIC).toArrow())
    want = ordered(pa.concat_tables([p.expected_table("read_uncommitted"),
                                     q.expected_table("read_uncommitted")]))
    assert got.equals(want.cast(got.schema))
    assert set(got.column("timestampType").to_pylist()) == {0, 1}
    # kafka-python sees the same offsets and timestamp types in the bytes
    for part, b in ((0, p), (1, q)):
        kp = read_kp(f"{dst}/{TOPIC}-{part}", gaps=True, ts_type=True)
        rows = b.expected_rows("read_uncommitted")
        assert [(r[0], r[1], r[2], r[5]) for r in kp] == [
            (r.offset, r.key, r.value, r.timestamp_type) for r in rows]
        # the copy's log starts at its first record, as a broker's would
        start = read_checkpoint(FS, f"{dst}/log-start-offset-checkpoint")[(TOPIC, part)]
        assert start == rows[0].offset
    # no markers were written: read_committed reads the same rows
    assert ordered(load(spark, dst, TOPIC, **{"kafka.isolation.level": "read_committed"})
                   .toArrow()).equals(got)


def test_read_committed_source_leaves_gaps(spark, tmp_path, rich):
    root, p, _ = rich
    src = load(spark, root, TOPIC, **{"kafka.isolation.level": "read_committed"})
    src = src.where("partition = 0")
    dst = str(tmp_path / "dst")
    save(src, dst, TOPIC, partitions="1")
    got = ordered(load(spark, dst, TOPIC).toArrow())
    want = ordered(p.expected_table("read_committed"))
    assert got.equals(want.cast(got.schema))


def _gappy_df(spark, n=300, parts=3):
    rows = [(b"k%d" % (i % 17), b"v%d" % i, i % parts, 10 + 3 * (i // parts) + i % 2)
            for i in range(n)]
    return spark.createDataFrame(rows, "key binary, value binary, partition int, "
                                       "offset long")


def test_order_check_and_the_way_to_sort(spark, tmp_path):
    dst = str(tmp_path / "dst")
    df = _gappy_df(spark)
    # rows of each partition spread over tasks in no order: refused, nothing written
    with pytest.raises(Exception, match=r"topic 't' partition \d: offsets must increase "
                                        r"strictly, but offset \d+ (\(row \d+\) )?comes "
                                        r"after offset \d+"):
        save(df.repartition(4).orderBy("value"), dst, "t", partitions="3")
    assert not LogDirs(dst).topics() if FS.get_file_info(dst).type.name != "NotFound" \
        else True
    # the documented way: each partition in one task, in offset order
    save(df.repartition(2, "partition").sortWithinPartitions("offset"), dst, "t",
         partitions="3")
    got = ordered(load(spark, dst, "t").toArrow())
    want = sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())
    assert list(zip(got.column("partition").to_pylist(), got.column("offset").to_pylist(),
                    got.column("key").to_pylist(), got.column("value").to_pylist())) == want
    # writing the same offsets again: below the log end, refused naming the offsets
    with pytest.raises(Exception, match=r"topic 't' partition \d: offset \d+ is below the "
                                        r"partition's log end offset \d+"):
        save(df.repartition(1, "partition").sortWithinPartitions("offset"), dst, "t")
    assert ordered(load(spark, dst, "t").toArrow()).equals(got)


def test_options_and_schema_checks(spark, tmp_path):
    dst = str(tmp_path / "dst")
    df = spark.createDataFrame([(b"v", 0)], "value binary, partition int")
    with pytest.raises(Exception, match="needs an 'offset' column"):
        save(df, dst, "t")
    with pytest.raises(Exception, match="offsets must be one of assign, preserve"):
        df.write.format("kafkalog").option("path", dst).option("topic", "t") \
            .option("offsets", "keep").mode("append").save()
    # more than one partition: every row needs its partition
    df = spark.createDataFrame([(b"v", None, 5)], "value binary, partition int, offset long")
    with pytest.raises(Exception, match="non-null 'partition'"):
        save(df, dst, "t", partitions="2")
    schema = spark.createDataFrame([(b"v", 1)], "value binary, offset long").schema
    with pytest.raises(InvalidOptionError, match="complete output mode"):
        make_stream_writer({"path": dst, "topic": "t", "offsets": "preserve"}, schema, True)


def test_stream_preserves_offsets(spark, tmp_path, rich):
    root, p, q = rich
    dst = str(tmp_path / "dst")
    src = spark.readStream.format("kafkalog").option("path", root) \
        .option("subscribe", TOPIC).option("includeHeaders", "true") \
        .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "20").load()
    qy = src.writeStream.format("kafkalog").option("path", dst).option("topic", TOPIC) \
        .option("offsets", "preserve").option("partitions", "2") \
        .option("checkpointLocation", str(tmp_path / "ckpt")) \
        .trigger(availableNow=True).start()
    qy.awaitTermination()
    got = ordered(load(spark, dst, TOPIC).toArrow())
    want = ordered(pa.concat_tables([p.expected_table("read_uncommitted"),
                                     q.expected_table("read_uncommitted")]))
    assert got.equals(want.cast(got.schema))
