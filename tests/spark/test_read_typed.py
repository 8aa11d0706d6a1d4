"""Typed ``value`` / ``key`` through ``format("kafkalog")`` (issue 38 items 2 and 5): the
options (parsed once, errors naming the option), planning on the driver (an unresolvable
writer schema refused before any task), the Spark schema, batch and stream reads compared
with fastavro's resolution of the same bytes, and Protobuf / JSON Schema values with the
protobuf package's and json's (tests/typed/pj_logs.py)."""
from __future__ import annotations

import json
import pickle

import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.datasource import KafkaLogDataSource
from spark_kafkalog.spark.options import parse_read_options
from tests.typed import typed_logs as tl

BASE = {"path": "/nowhere", "subscribe": "orders"}


# -- options (no Spark session) ------------------------------------------------------------

@pytest.mark.parametrize("extra, words", [
    ({"valueFormat": "protobf"}, "valueFormat must be one of binary, avro, protobuf, json"),
    ({"valueFormat": "avro", "valueMessage": "shop.Order"},
     "valueMessage: names a Protobuf message; needs valueFormat=protobuf or registry"),
    ({"valueFormat": "protobuf", "valueMessage": "shop..Order"}, "valueMessage: not a message"),
    ({"keyMessage": "a.B"}, "keyMessage: needs keyFormat=avro, protobuf, json or registry"),
    ({"valueFormat": "avroo"}, "valueFormat must be one of"),
    ({"valueSchemaId": "3"}, "valueSchemaId: needs valueFormat=avro, protobuf, json or"),
    ({"keepRawKey": "true"}, "keepRawKey: needs keyFormat=avro"),
    ({"onDecodeError": "null"}, "onDecodeError: applies to typed columns"),
    ({"valueFormat": "avro", "onDecodeError": "drop"}, "onDecodeError must be one of"),
    ({"valueFormat": "avro", "valueSchemaId": "x"}, "valueSchemaId"),
    ({"valueFormat": "avro", "valueSchemaVersion": "0"}, "valueSchemaVersion"),
    ({"valueFormat": "avro", "valueSchemaVersion": "2", "valueSchemaId": "2"},
     "valueSchemaVersion and valueSchemaId: give only one"),
    ({"valueFormat": "avro", "valueSchema": '"int"', "valueSubject": "s"},
     "valueSchema: the reader schema is given inline; drop valueSubject"),
    ({"valueFormat": "registry", "valueSchema": '"int"'},
     "use valueFormat=avro, protobuf or json"),
    ({"valueFormat": "registry", "valueFraming": "none"}, "valueFraming=none"),
    ({"valueFormat": "avro", "valueFraming": "magic"}, "valueFraming must be one of"),
    ({"valueFormat": "avro", "keepRawValue": "maybe"}, "keepRawValue"),
    ({"valueFormat": "avro", "schemaRegistryUrl": "localhost:8081"}, "schemaRegistryUrl"),
    ({"valueFormat": "avro", "schemaRegistryBasicAuth": "a:b"},
     "schemaRegistryBasicAuth: needs schemaRegistryUrl"),
    ({"valueFormat": "avro", "schemaRegistryUrl": "http://h:1",
      "schemaRegistryBasicAuth": "nocolon"}, "schemaRegistryBasicAuth: expected user:password"),
    ({"valueFormat": "avro", "schemaRegistryUrl": "http://h:1",
      "schemaRegistryTopic": "_schemas"}, "give only one place"),
    ({"valueFormat": "avro", "schemaRegistryTopic": "bad topic"}, "schemaRegistryTopic"),
    ({"valueFormat": "avro", "valueSchema": '"int"', "valueFraming": "none",
      "schemaRegistryUrl": "http://h:1"}, "every typed column has its schema inline"),
    ({"valueFormt": "avro"}, "did you mean 'valueFormat'"),
])
def test_bad_typed_options_name_the_option(extra, words):
    with pytest.raises(InvalidOptionError) as e:
        parse_read_options({**BASE, **extra})
    assert words in str(e.value)


def test_typed_options_parsed_and_picklable():
    opts = parse_read_options({**BASE, "VALUEFORMAT": "Avro", "keyFormat": "registry",
                               "valueSubject": "orders-v", "valueSchemaVersion": "latest",
                               "onDecodeError": "NULL", "keepRawValue": "true",
                               "schemaRegistryUrl": "https://reg:8081/",
                               "schemaRegistryBasicAuth": "u:secret"})
    t = opts.typed
    assert t.value.format == "avro" and t.value.subject == "orders-v" and t.value.version is None
    assert t.value.keep_raw and t.key.format == "registry" and not t.key.keep_raw
    assert t.on_decode_error == "null" and t.registry_url == "https://reg:8081"
    assert "secret" not in repr(opts)
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert parse_read_options(BASE).typed is None


# -- planning and reads (Spark) --------------------------------------------------------------

@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return str(tl.build(tmp_path_factory.mktemp("typed") / "logs"))


def _read(spark, logs, topic="orders", **options):
    r = spark.read.format("kafkalog").option("path", logs).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def _expected():
    return [(q, None if k is None else tl.resolve(k, tl.KEY), tl.resolve(v))
            for q, recs in sorted(tl.order_records().items()) for k, v in recs]


def _rows(df):
    return [(r["partition"], r["key"], None if r["value"] is None
             else r["value"].asDict(recursive=True))
            for r in df.orderBy("partition", "offset").collect()]


def test_batch_read_typed(spark, logs):
    df = _read(spark, logs, valueFormat="avro", keyFormat="avro", packPartitions="false")
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:bigint,amount:bigint,note:string,tags:array<string>>"
    assert df.schema["key"].dataType.simpleString() == "string"
    assert _rows(df) == _expected()
    # packed tasks (several slices, coalesced batches) give the same rows
    assert _rows(_read(spark, logs, valueFormat="avro", keyFormat="avro")) == _expected()


def test_batch_read_null_and_skip(spark, logs):
    recs = tl.bad_records()
    df = _read(spark, logs, "orders_bad", valueFormat="avro", valueSubject="orders-value",
               onDecodeError="null", keepRawValue="true")
    assert df.columns[-2:] == ["value_error", "value_raw"]
    rows = df.orderBy("offset").collect()
    assert [r["value_raw"] for r in rows] == [v for _, v in recs]
    assert [r["value_error"] is not None for r in rows] == [False, True, True, True, False]
    assert rows[0]["value"].asDict(recursive=True) == tl.resolve(recs[0][1])
    assert rows[2]["value"] is None
    skipped = _read(spark, logs, "orders_bad", valueFormat="avro", valueSubject="orders-value",
                    onDecodeError="skip")
    assert [r["offset"] for r in skipped.orderBy("offset").collect()] == [0, 4]


def test_batch_read_fail_names_the_record(spark, logs):
    df = _read(spark, logs, "orders_bad", valueFormat="avro", valueSubject="orders-value")
    with pytest.raises(Exception) as e:
        df.collect()
    assert "orders_bad-0 offset 1" in str(e.value) and "schema id" in str(e.value)


def test_unresolvable_writer_refused_before_any_task(spark, logs):
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as e:
        _read(spark, logs, "events", valueFormat="avro")
    assert "SchemaResolutionError" in str(e.value) or "resolve" in str(e.value)
    assert "events-value" in str(e.value)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


def test_topics_with_different_reader_schemas_refused(spark, logs):
    ds = KafkaLogDataSource({"path": logs, "subscribe": "orders,plain", "valueFormat": "avro",
                             "valueSchema": json.dumps(tl.V1), "valueFraming": "none"})
    # one inline schema: one struct for both topics
    assert ds.schema()["value"].dataType.simpleString() == "struct<id:bigint,amount:int>"
    # orders-value and events-value: two structs, and one read has one
    ds = KafkaLogDataSource({"path": logs, "subscribePattern": "orders|events",
                             "valueFormat": "avro"})
    with pytest.raises(InvalidOptionError) as e:
        ds.schema()
    msg = str(e.value)
    assert "reader schemas differ" in msg and "events-value" in msg and "orders-value" in msg
    # a topic with no subject of its own names the option that picks one
    ds = KafkaLogDataSource({"path": logs, "subscribe": "orders,orders_bad",
                             "valueFormat": "avro"})
    with pytest.raises(InvalidOptionError, match="valueSubject: .*orders_bad-value"):
        ds.schema()
    ds = KafkaLogDataSource({"path": logs, "subscribe": "orders,orders_bad",
                             "valueFormat": "avro", "valueSubject": "orders-value"})
    assert ds.schema()["value"].dataType.simpleString().startswith("struct<id:bigint")


def test_reader_pickles_with_the_plan_and_no_credentials(logs):
    ds = KafkaLogDataSource({"path": logs, "subscribe": "orders", "valueFormat": "avro"})
    ds.schema()
    again = pickle.loads(pickle.dumps(ds))
    reader = again.reader(None)
    back = pickle.loads(pickle.dumps(reader))
    assert back.typed == reader.typed and back.typed.spec("value").writer_schemas


def test_stream_read_typed(spark, logs, tmp_path):
    q = spark.readStream.format("kafkalog").option("path", logs).option("subscribe", "orders") \
        .option("startingOffsets", "earliest").option("valueFormat", "avro") \
        .option("keyFormat", "avro").load() \
        .writeStream.format("parquet").option("path", str(tmp_path / "sink")) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    q.awaitTermination()
    got = spark.read.parquet(str(tmp_path / "sink"))
    assert _rows(got) == _expected()


def test_stream_read_null_mode(spark, logs, tmp_path):
    q = spark.readStream.format("kafkalog").option("path", logs) \
        .option("subscribe", "orders_bad").option("startingOffsets", "earliest") \
        .option("valueFormat", "avro").option("valueSubject", "orders-value") \
        .option("onDecodeError", "null").load() \
        .writeStream.format("parquet").option("path", str(tmp_path / "sink")) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    q.awaitTermination()
    rows = spark.read.parquet(str(tmp_path / "sink")).orderBy("offset").collect()
    assert [r["value_error"] is not None for r in rows] == [False, True, True, True, False]


def test_export_parquet_value_format_writes_typed_columns(spark, logs, tmp_path):
    import pyarrow.parquet as pq

    from spark_kafkalog.jobs import export_parquet

    out = str(tmp_path / "out")
    args = export_parquet.parse_args(["--path", logs, "--output", out, "--topic", "orders",
                                      "--value-format", "avro", "--key-format", "avro"])
    assert export_parquet.reader_options(args)["valueFormat"] == "avro"
    df = export_parquet.build_frame(spark, args)
    df.write.mode("overwrite").partitionBy("topic", "date").parquet(out)
    t = pq.read_table(out)
    assert str(t.schema.field("value").type) == \
        ("struct<id: int64 not null, amount: int64 not null, note: string, "
         "tags: list<element: string not null> not null>")
    got = sorted(zip(t.column("partition").to_pylist(), t.column("offset").to_pylist(),
                     t.column("key").to_pylist(), t.column("value").to_pylist()))
    want = [(q, o, None if k is None else tl.resolve(k, tl.KEY), tl.resolve(v))
            for q, recs in sorted(tl.order_records().items()) for o, (k, v) in enumerate(recs)]
    assert got == want
    bad = export_parquet.parse_args(["--path", logs, "--output", out, "--value-format", "avro",
                                     "--value-schema", "id long"])
    with pytest.raises(Exception, match="give one"):
        export_parquet.build_frame(spark, bad)


def test_batch_read_with_a_registry_url(spark, tmp_path):
    from tests.typed.test_typed_read import _Registry
    from http.server import ThreadingHTTPServer
    import threading

    root = tmp_path / "logs"
    tl.build(root, registry_topic="_other")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        df = _read(spark, str(root), valueFormat="avro", keyFormat="avro",
                   schemaRegistryUrl=f"http://127.0.0.1:{server.server_address[1]}",
                   schemaRegistryBasicAuth="reader:s3cret")
        assert _rows(df) == _expected()
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_stream_picks_up_a_schema_version_registered_after_it_started(tmp_path):
    """Reader protocol called directly (no session): a version registered between two
    micro-batches is read with the query's reader schema, by the reader copy pickled when
    the query started (what executors hold), through the slices' refreshed plan."""
    import pyarrow as pa
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    root = tmp_path / "logs"
    tl.build(root)
    ds = KafkaLogDataSource({"path": str(root), "subscribe": "orders",
                             "startingOffsets": "earliest", "valueFormat": "avro"})
    ds.schema()
    reader = ds.streamReader(None)
    executor_copy = pickle.loads(pickle.dumps(reader))       # taken at the start

    def read(start, end):
        tables = [pa.Table.from_batches(list(executor_copy.read(p)))
                  for p in reader.partitions(start, end)]
        return [v for t in tables for v in t.column("value").to_pylist()]

    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadAllAvailable())
    assert read(start, first) == _expected_values()
    tl.build(root, evolved=True)                              # v3 registered, v3 records
    second = reader.latestOffset(first, ReadAllAvailable())
    assert read(first, second) == [tl.resolve(v) for _, v in tl.EVOLVED]
    assert "currency" not in read(first, second)[0]           # the query's struct (v2)


def _expected_values():
    return [tl.resolve(v) for _, recs in sorted(tl.order_records().items()) for _, v in recs]


# -- Protobuf and JSON Schema values (tests/typed/pj_logs.py: oracles protobuf and json) -----

@pytest.fixture(scope="module")
def protos(tmp_path_factory):
    from tests.typed import pj_logs as pj
    return pj.Protos(tmp_path_factory.mktemp("protoc"))


@pytest.fixture(scope="module")
def pj_logs(tmp_path_factory, protos):
    from tests.typed import pj_logs as pj
    return str(pj.build(tmp_path_factory.mktemp("pj") / "logs", protos))


def _values(df):
    return [None if r["value"] is None else r["value"].asDict(recursive=True)
            for r in df.orderBy("offset").collect()]


@pytest.mark.parametrize("fmt", ["protobuf", "registry"])
def test_batch_read_protobuf(spark, pj_logs, protos, fmt):
    from tests.typed import pj_logs as pj
    df = _read(spark, pj_logs, "pay", valueFormat=fmt, valueMessage=pj.PAYMENT)
    assert df.schema["value"].dataType.simpleString() == \
        "struct<id:string,amount:double,tags:array<string>,meta:struct<source:string>>"
    assert _values(df) == [protos.expected(v) for v in protos.pay_values()]


def test_batch_read_json_values_and_keys(spark, pj_logs):
    from pyspark.sql import functions as F

    from tests.typed import pj_logs as pj
    df = _read(spark, pj_logs, "ev", valueFormat="registry", keyFormat="json")
    assert df.schema["value"].dataType.simpleString() == \
        "struct<kind:string,n:bigint,at:timestamp,tags:array<string>>"
    rows = df.orderBy("offset").select(
        "key.user", "value.kind", "value.n", F.unix_micros("value.at").alias("at"),
        "value.tags").collect()
    want = []
    for k, v in zip(pj.ev_keys(), pj.ev_values()):
        e = pj.ev_expected(v)
        at = None if e["at"] is None else round(e["at"].timestamp() * 1_000_000)
        want.append((None if k is None else json.loads(k[5:])["user"], e["kind"], e["n"],
                     at, e["tags"]))
    assert [tuple(r) for r in rows] == want


def test_stream_read_protobuf_null_mode(spark, pj_logs, protos, tmp_path):
    from tests.typed import pj_logs as pj
    q = spark.readStream.format("kafkalog").option("path", pj_logs) \
        .option("subscribe", "pay_bad").option("startingOffsets", "earliest") \
        .option("valueFormat", "protobuf").option("valueSubject", "pay-value") \
        .option("valueMessage", pj.PAYMENT).option("onDecodeError", "null").load() \
        .writeStream.format("parquet").option("path", str(tmp_path / "sink")) \
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    q.awaitTermination()
    got = spark.read.parquet(str(tmp_path / "sink"))
    rows = got.orderBy("offset").collect()
    assert [r["value_error"] is not None for r in rows] == [False, True, True, True, False]
    assert _values(got) == [protos.expected(v) if i in (0, 4) else None
                            for i, v in enumerate(protos.bad_values())]


def test_export_parquet_json_value_format(spark, pj_logs, tmp_path):
    import pyarrow.parquet as pq

    from spark_kafkalog.jobs import export_parquet
    from tests.typed import pj_logs as pj

    out = str(tmp_path / "out")
    args = export_parquet.parse_args(["--path", pj_logs, "--output", out, "--topic", "ev",
                                      "--value-format", "json"])
    df = export_parquet.build_frame(spark, args)
    df.write.mode("overwrite").partitionBy("topic", "date").parquet(out)
    t = pq.read_table(out).sort_by("offset")
    got = t.column("value").to_pylist()
    want = [pj.ev_expected(v) for v in pj.ev_values()]
    assert [{**g, "at": None if g["at"] is None else g["at"].timestamp()} for g in got] == \
        [{**w, "at": None if w["at"] is None else w["at"].timestamp()} for w in want]


def test_protobuf_writer_in_avro_subject_refused_before_any_task(spark, pj_logs):
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as e:
        _read(spark, pj_logs, "mixed", valueFormat="registry")
    assert "subject mixed-value version 1 (id 31)" in str(e.value)
    assert "has schema type PROTOBUF" in str(e.value)
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


def test_batch_registry_read_with_the_data_pinned(tmp_path):
    """Reader protocol called directly (no session). ``schema()`` reads ``_schemas``
    first; a version registered after it and used by records before ``partitions()``
    pins the data is in the typed read the slices carry (the registry is read again
    after the pin), so those records decode (fastavro's resolution to the query's v2);
    a version registered after ``partitions()`` names no record planned and is not in
    the planned read."""
    import pyarrow as pa

    from tests.log.logbuilder import LogDirBuilder, rec
    from tests.typed import registry_records as rr

    b = LogDirBuilder(tmp_path / "logs")
    reg = b.partition("_schemas", 0)
    reg.append([rec(k, v, ts=500) for k, v in tl.registry_records()])
    p0 = b.partition("orders", 0)
    p0.append([rec(k, v, ts=1000) for k, v in tl.order_records()[0]])
    for _, p in b.parts:
        p.high_watermark = p.log_end_offset
    b.write()
    ds = KafkaLogDataSource({"path": str(b.roots[0]), "subscribe": "orders",
                             "valueFormat": "avro"})
    reader = ds.reader(ds.schema())
    shipped = pickle.loads(pickle.dumps(reader))     # what executors get: before partitions()

    def register_and_write(version, sid, records):
        reg.append([rec(rr.schema_key("orders-value", version),
                        rr.schema_value("orders-value", version, sid, tl.text(tl.V3)),
                        ts=600)])
        p0.append([rec(k, v, ts=2000) for k, v in records])
        for _, p in b.parts:
            p.high_watermark = p.log_end_offset
        b.write()

    register_and_write(3, 7, tl.EVOLVED)              # between schema() and partitions()
    parts = reader.partitions()
    register_and_write(4, 8, [(None, b"\x00\x00\x00\x00\x08" + tl.avro(tl.V3, {
        "id": 1, "amount": 1, "note": None, "tags": [], "currency": "X"}))])
    got = [v for p in parts
           for v in pa.Table.from_batches(list(shipped.read(p))).column("value").to_pylist()]
    assert got == [tl.resolve(v) for _, v in tl.order_records()[0] + tl.EVOLVED]
    carried = {i for p in parts for i, _ in p.typed.specs[0].writer_schemas}
    assert 7 in carried and 8 not in carried
