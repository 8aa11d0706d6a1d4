"""Streaming typed values into Iceberg: ``readStream.format("kafkalog")`` with
``valueFormat=avro`` -> ``writeStream.format("kafkalog_iceberg")``. Values encoded by
fastavro under two versions of ``orders-value`` (tests/typed/typed_logs.py: v2 promotes
``amount`` int -> long, adds ``note`` and ``tags``), registered in a ``_schemas`` topic
as KafkaStore writes it (the logs of tests/lake/test_export_iceberg_typed.py). The query
runs twice with the subject gaining v2 in between: the table gains the columns, the rows
of run 1 read them as null. The table is read back by Apache Iceberg's Java library and
compared with ``spark.read.format("kafkalog").option("valueFormat", "avro")`` of the same
offsets, read at the time of each run (a run-1 row has v1's fields). The fast tests call
the sink's writer directly (no query) with the struct types Spark gives."""
from __future__ import annotations

import json
import pickle

import pytest

from spark_kafkalog.errors import TableError
from spark_kafkalog.lake import open_catalog
from spark_kafkalog.lake.iceberg_table import RawRecords, open_table
from spark_kafkalog.log import read_table
from spark_kafkalog.spark.iceberg_sink import BATCH_ID_KEY, QUERY_ID_KEY, IcebergSink
from tests.lake.oracle import JavaReader, metadata_location
from tests.log.logbuilder import rec
from tests.typed import typed_logs as tl
from tests.lake.test_export_iceberg_typed import (
    ALT,
    IDENT,
    _add_v2,
    _export,
    T0,
    _java_rows,
    _part,
    _register,
    _rows,
    _v1_log,
    _with_fields,
)


def _spark_schema(value_fields, error=True, key=None):
    """Spark's schema of a typed read (written out here, not asked of the reader): the
    Kafka columns with ``value`` the struct of ``value_fields`` ((name, Spark type,
    nullable)), then ``value_error``."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    value = StructType([StructField(n, t, nullable) for n, t, nullable in value_fields])
    fields = [StructField("key", key or BinaryType()), StructField("value", value),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType()),
              StructField("headers", ArrayType(StructType([
                  StructField("key", StringType()), StructField("value", BinaryType())])))]
    if error:
        fields.append(StructField("value_error", StringType()))
    return StructType(fields)


def _v1():
    from pyspark.sql.types import IntegerType, LongType

    return _spark_schema([("id", LongType(), False), ("amount", IntegerType(), False)])


def _v2():
    from pyspark.sql.types import ArrayType, LongType, StringType

    return _spark_schema([("id", LongType(), False), ("amount", LongType(), False),
                          ("note", StringType(), True),
                          ("tags", ArrayType(StringType(), False), False)])


def _writer(wh, schema, query_id="q-1"):
    sink = IcebergSink({"table": IDENT, "warehouse": str(wh), "queryId": query_id})
    return pickle.loads(pickle.dumps(sink.streamWriter(schema, False)))


def _task(writer, rows):
    return pickle.loads(pickle.dumps(writer.write(iter(rows.to_batches(max_chunksize=3)))))


def _typed_rows(logs, starting=None):
    """``log.read_table`` of ``orders`` typed as the stream's rows (Spark's Arrow)."""
    return read_table(logs, "orders", value_format="avro", on_decode_error="null",
                      include_headers=True, starting_offsets=starting)


def test_typed_writer_evolves_the_table_between_two_queries(tmp_path):
    """Without Spark: the writer of a query started on v1 creates the table with v1's
    struct; the writer of the query restarted on v2 adds v2's columns (amount promoted)
    before its tasks write; the rows of batch 0 read the new fields as null."""
    b = _v1_log(tmp_path / "logs")
    logs, wh = b.uris(), tmp_path / "wh"
    first = _writer(wh, _v1())
    run1 = _typed_rows(logs)
    first.commit([_task(first, run1)], 0)
    table = open_catalog(str(wh)).load_table(IDENT)
    value = table.schema().find_field("value").field_type
    assert [f.name for f in value.fields] == ["id", "amount"]
    assert str(value.field_by_name("amount").field_type) == "int"
    assert "value_error" in table.schema().column_names
    assert _rows(table.scan().to_arrow()) == _rows(run1)

    _add_v2(b)
    second = _writer(wh, _v2())
    table = open_catalog(str(wh)).load_table(IDENT)
    assert len(table.schemas()) == 2 and table.current_snapshot() is not None
    run2 = _typed_rows(logs, starting={0: 5, 1: 3})
    assert run2.num_rows == 6
    second.commit([_task(second, run2)], 1)
    table = open_catalog(str(wh)).load_table(IDENT)
    fields = ["id", "amount", "note", "tags"]
    value = table.schema().find_field("value").field_type
    assert [f.name for f in value.fields] == fields
    assert str(value.field_by_name("amount").field_type) == "long"
    assert _rows(table.scan().to_arrow()) == sorted(_with_fields(_rows(run1), fields)
                                                    + _rows(run2))
    assert [(s[QUERY_ID_KEY], s[BATCH_ID_KEY]) for s in
            (x.summary for x in table.snapshots())] == [("q-1", "0"), ("q-1", "1")]


def test_a_struct_the_table_cannot_take_is_refused_at_start_unchanged(tmp_path):
    """A query restarted on a subject whose ``amount`` is a string: its writer (made when
    the query starts, before any task) raises one line naming both types; the table's
    metadata is the same file."""
    from pyspark.sql.types import LongType, StringType

    b = _v1_log(tmp_path / "logs")
    logs, wh = b.uris(), tmp_path / "wh"
    first = _writer(wh, _v1())
    first.commit([_task(first, _typed_rows(logs))], 0)
    before = metadata_location(wh, IDENT)
    alt = _spark_schema([("id", LongType(), False), ("amount", StringType(), False)])
    with pytest.raises(TableError) as err:
        _writer(wh, alt)
    said = str(err.value)
    assert "value.amount changed from int to string" in said and "\n" not in said
    assert metadata_location(wh, IDENT) == before
    assert len(list(wh.rglob("*.parquet"))) == 1


def test_raw_into_typed_and_typed_into_raw_are_refused_at_start(tmp_path):
    from spark_kafkalog.spark.datasource import SCHEMA_WITH_HEADERS

    typed_wh, raw_wh = tmp_path / "typed", tmp_path / "raw"
    _writer(typed_wh, _v1())
    with pytest.raises(TableError, match="column 'value' is struct<.*writes binary"):
        _writer(typed_wh, SCHEMA_WITH_HEADERS)
    open_table(open_catalog(str(raw_wh)), IDENT, RawRecords())
    with pytest.raises(TableError, match="column 'value' holds raw bytes .*valueFormat"):
        _writer(raw_wh, _v1())
    assert open_catalog(str(raw_wh)).load_table(IDENT).schema().find_field(
        "value").field_type.__class__.__name__ == "BinaryType"


def test_the_sink_continues_a_typed_table_the_job_wrote(tmp_path):
    """The job exports v1 values; a query started on v2 at the table's offsets evolves
    the table and appends after the job's rows."""
    from spark_kafkalog.spark.iceberg_sink import stream_starting_offsets

    b = _v1_log(tmp_path / "logs")
    logs, wh = b.uris(), tmp_path / "wh"
    assert _export(logs, wh, on_decode_error="null").rows == 8
    # read before v2 exists: v1's fields (read later, v2's defaults would fill the rest)
    head = _rows(_typed_rows(logs))
    _add_v2(b)
    writer = _writer(wh, _v2())
    start = json.loads(stream_starting_offsets(open_catalog(str(wh)).load_table(IDENT)))
    assert start == {"orders": {"0": 5, "1": 3}}
    tail = _typed_rows(logs, starting={0: 5, 1: 3})
    writer.commit([_task(writer, tail)], 0)
    table = open_catalog(str(wh)).load_table(IDENT)
    assert len(table.schemas()) == 2
    fields = ["id", "amount", "note", "tags"]
    assert _rows(table.scan().to_arrow()) == sorted(_with_fields(head, fields) + _rows(tail))


def test_typed_key_and_value_without_headers(tmp_path):
    """keyFormat too (a string key: a primitive typed column), no headers column, no
    ``value_error``: the table has the typed key, and empty headers."""
    from pyspark.sql.types import IntegerType, LongType, StringType

    schema = _spark_schema([("id", LongType(), False), ("amount", IntegerType(), False)],
                           error=False, key=StringType())
    schema = type(schema)([f for f in schema.fields if f.name != "headers"])
    writer = _writer(tmp_path / "wh", schema)
    table = open_catalog(str(tmp_path / "wh")).load_table(IDENT)
    assert str(table.schema().find_field("key").field_type) == "string"
    assert "value_error" not in table.schema().column_names
    import pyarrow as pa

    rows = pa.table({"key": ["a", None], "value": [{"id": 1, "amount": 2}, None],
                     "topic": ["orders"] * 2, "partition": pa.array([0, 0], pa.int32()),
                     "offset": [0, 1],
                     "timestamp": pa.array([0, 1000], pa.timestamp("us", tz="UTC")),
                     "timestampType": pa.array([0, 0], pa.int32())})
    writer.commit([_task(writer, rows)], 0)
    got = open_catalog(str(tmp_path / "wh")).load_table(IDENT).scan().to_arrow()
    assert got.column("key").to_pylist() == ["a", None]
    assert got.column("value").to_pylist() == [{"id": 1, "amount": 2}, None]
    assert got.column("headers").to_pylist() == [[], []]


# ---- the query end to end -----------------------------------------------------------


@pytest.fixture(scope="module")
def java(tmp_path_factory):
    return JavaReader(tmp_path_factory.mktemp("iceberg-reader"))


def _run(spark, logs, wh, ck, **options):
    reader = (spark.readStream.format("kafkalog").option("path", logs)
              .option("subscribe", "orders").option("includeHeaders", "true")
              .option("startingOffsets", "earliest").option("valueFormat", "avro")
              .option("onDecodeError", "null"))
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (reader.load().writeStream.format("kafkalog_iceberg").option("table", IDENT)
             .option("warehouse", str(wh)).option("checkpointLocation", str(ck))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return query


def _spark_typed(spark, logs, ends):
    """``spark.read.format("kafkalog")`` typed, of every offset below ``ends``."""
    df = (spark.read.format("kafkalog").option("path", logs).option("subscribe", "orders")
          .option("valueFormat", "avro").option("onDecodeError", "null")
          .option("startingOffsets", "earliest")
          .option("endingOffsets", json.dumps({"orders": {str(q): n
                                                          for q, n in ends.items()}}))
          .load())
    # collect(), not toArrow(): pyspark 4.3's toArrow cannot cast a null struct whose
    # fields are non-nullable (a tombstone's value)
    return sorted((r["partition"], r["offset"], None if r["key"] is None else
                   bytes(r["key"]).hex(), None if r["value"] is None else
                   r["value"].asDict(recursive=True), r["value_error"]) for r in df.collect())


@pytest.mark.slow
def test_typed_query_twice_with_evolution_java_reads_what_spark_reads_then_the_job(
        spark, tmp_path, java):
    b = _v1_log(tmp_path / "logs")
    logs, wh, ck = b.uris(), tmp_path / "wh", tmp_path / "ck"
    first = _run(spark, logs, wh, ck)
    run1 = _spark_typed(spark, logs, {0: 5, 1: 3})
    assert len(run1) == 8 and [r[4] is not None for r in run1 if r[:2] == (1, 2)] == [True]
    table = open_catalog(str(wh)).load_table(IDENT)
    assert _rows(table.scan().to_arrow()) == run1

    _add_v2(b)
    second = _run(spark, logs, wh, ck)
    assert second.id == first.id
    fields = ["id", "amount", "note", "tags"]
    now = _spark_typed(spark, logs, {0: 8, 1: 6})
    run2 = [r for r in now if r[1] >= (5 if r[0] == 0 else 3)]
    assert len(run2) == 6 and run2[0][3]["note"] == "n0"
    expected = sorted(_with_fields(run1, fields) + run2)
    table = open_catalog(str(wh)).load_table(IDENT)
    value = table.schema().find_field("value").field_type
    assert [f.name for f in value.fields] == fields
    assert str(value.field_by_name("amount").field_type) == "long"
    assert len(table.schemas()) == 2
    summaries = [s.summary for s in table.snapshots()]
    assert {s[QUERY_ID_KEY] for s in summaries} == {str(first.id)}
    head, lines = java.read_catalog(wh, IDENT, raw=True)
    assert _java_rows(lines) == expected
    assert "note" in head["schema"] and "value_error" in head["schema"]

    # a restart on a subject the table cannot take, with a record of it to write: the
    # query fails (Spark makes the sink's writer for a micro-batch that has rows), one
    # line naming both types, the table unchanged
    from pyspark.errors import StreamingQueryException

    _register(b, "orders_alt-value", ALT, 8)
    p0 = _part(b, "orders", 0)
    p0.append([rec(None, b"\x00" + (8).to_bytes(4, "big") + tl.avro(ALT, {"id": 9,
                                                                         "amount": "9"}),
                   ts=T0 + 40)])
    p0.high_watermark = p0.log_end_offset
    b.write()
    before = metadata_location(wh, IDENT)
    with pytest.raises(StreamingQueryException) as failed:
        _run(spark, logs, wh, ck, valueSubject="orders_alt-value")
    line = next(x for x in str(failed.value).splitlines()
                if x.startswith("spark_kafkalog.errors.TableError: "))
    assert f"table {IDENT} cannot take the stream's typed columns: value.amount changed " \
        "from long to string, which is no promotion Iceberg allows" in line
    assert metadata_location(wh, IDENT) == before

    # the batch job continues the table the query wrote (the ALT record does not decode
    # under orders-value: a null value and its error)
    _add_v2(b)
    job = _export(logs, wh, on_decode_error="null")
    assert job.status == "committed" and job.rows == 7
    table = open_catalog(str(wh)).load_table(IDENT)
    assert len(table.schemas()) == 2
    tail = [r for r in _rows(read_table(logs, "orders", value_format="avro",
                                        on_decode_error="null")) if r[1] >= (8 if r[0] == 0 else 6)]
    assert len(tail) == 7 and tail[0][3] is None and tail[0][4]
    assert _rows(table.scan().to_arrow()) == sorted(expected + tail)


@pytest.mark.slow
def test_every_avro_type_and_a_typed_key_streamed_as_the_job_exports_them(spark, tmp_path,
                                                                          java):
    """The rich subject (every Avro type the decoder maps) with a typed key, streamed: the
    table's Iceberg schema is the one the job makes of the same topic (one rule over
    Spark's struct and over the decoder's Arrow), and Java reads the rows the job's
    test expects (``log.read_table`` typed, in the Java reader's JSON terms)."""
    from spark_kafkalog.lake import export_topics
    from spark_kafkalog.lake.iceberg_table import _shown
    from spark_kafkalog.lake.iceberg_typed import typed_records
    from spark_kafkalog.log import LogDirs
    from tests.lake.test_export_iceberg_typed import RICH, _plain, _rich
    from tests.log.logbuilder import LogDirBuilder
    from tests.typed import registry_records as rr

    b = LogDirBuilder(tmp_path / "logs")
    reg = b.partition("_schemas", 0)
    reg.append([rec(rr.schema_key("rich-value", 1),
                    rr.schema_value("rich-value", 1, 31, tl.text(RICH)), ts=T0),
                rec(rr.schema_key("rich-key", 1),
                    rr.schema_value("rich-key", 1, 32, tl.text("string")), ts=T0)])

    def framed(sid, schema, datum):
        return b"\x00" + sid.to_bytes(4, "big") + tl.avro(schema, datum)

    p = b.partition("rich", 0)
    p.append([rec(framed(32, "string", f"k{i}"), framed(31, RICH, _rich(i)), ts=T0 + i)
              for i in range(4)] + [rec(framed(32, "string", "gone"), None, ts=T0 + 9)])
    for _, part in b.parts:
        part.high_watermark = part.log_end_offset
    b.write()
    logs, wh, job_wh = b.uris(), tmp_path / "wh", tmp_path / "job"
    query = (spark.readStream.format("kafkalog").option("path", logs)
             .option("subscribe", "rich").option("valueFormat", "avro")
             .option("keyFormat", "registry").option("startingOffsets", "earliest").load()
             .writeStream.format("kafkalog_iceberg").option("table", "kafka.rich")
             .option("warehouse", str(wh)).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        query.stop()

    logdirs = LogDirs(logs)
    shape = typed_records(logdirs, ["rich"], value_format="avro", key_format="registry")
    catalog = open_catalog(str(job_wh))
    job_table = open_table(catalog, "kafka.rich", shape)
    assert export_topics(logdirs, ["rich"], catalog, job_table, "kafka.rich",
                         shape=shape).rows == 5
    ours = open_catalog(str(wh)).load_table("kafka.rich").schema()
    theirs = catalog.load_table("kafka.rich").schema()
    assert [(f.name, _shown(f.field_type), f.required) for f in ours.fields] == \
        [(f.name, _shown(f.field_type), f.required) for f in theirs.fields]
    assert str(ours.find_field("key").field_type) == "string"

    want = read_table(logs, "rich", value_format="avro", key_format="registry")
    expected = sorted((o, k, _plain(v)) for o, k, v in zip(
        *(want.column(c).to_pylist() for c in ("offset", "key", "value"))))
    assert expected[1][2]["m"] == {"a": 1, "b": -1} and expected[4][2] is None
    _, lines = java.read_catalog(wh, "kafka.rich", raw=True)
    assert sorted((r["offset"], r["key"], r["value"]) for r in lines) == expected
