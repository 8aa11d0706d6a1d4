"""``df.write.format("kafkalog")`` with ``valueFormat=protobuf`` / ``json`` (issue 38 item 6):
what we write is parsed by the protobuf package (classes protoc generates here) and
validated by jsonschema; the schema we register is the SCHEMA record KafkaStore writes; a
struct that does not fit is refused before any task writes; a stream goes through the same
planning (availableNow)."""
from __future__ import annotations

import json

import jsonschema
import pytest

from spark_kafkalog.errors import unwrap
from spark_kafkalog.log import read_table
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr
from tests.typed.proto_oracle import compile_module, parse

PROTO = """syntax = "proto3";
package shop.w;
import "google/protobuf/timestamp.proto";
message Order {
  enum State { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  State state = 2;
  repeated Line lines = 3;
  map<string, int64> counts = 4;
  google.protobuf.Timestamp at = 5;
  optional string note = 6;
}
"""
DDL = ("id long, state string, lines array<struct<sku:string,qty:int>>, "
       "counts map<string,bigint>, at timestamp, note string")
JSON_SCHEMA = {"type": "object", "required": ["id"], "properties": {
    "id": {"type": "integer"}, "name": {"type": ["null", "string"], "maxLength": 8},
    "tags": {"type": "array", "items": {"type": "string"}}}}


def _registry(root, records):
    b = LogDirBuilder(str(root))
    p = b.partition("_schemas", 0)
    p.append([rec(k, v) for k, v in records])
    p.high_watermark = p.log_end_offset
    b.write()
    return str(root)


def _orders(spark):
    import datetime as dt

    from pyspark.sql import functions as F
    rows = [(i, ["NEW", "PAID"][i % 2], [("s", i), ("t", 0)][: i % 3], {"k": i},
             dt.datetime(2024, 1, 1, 0, 0, i), None if i % 2 else f"n{i}") for i in range(30)]
    df = spark.createDataFrame(rows, DDL)
    return df.select(F.struct(*df.columns).alias("value"))


def test_protobuf_batch_write_auto_registers_and_protobuf_parses(spark, tmp_path):
    root = _registry(tmp_path / "logs", [(rr.schema_key("x-value", 1),
                                          rr.schema_value("x-value", 1, 6, rr.ORDERS_V1))])
    (_orders(spark).write.format("kafkalog").mode("append").option("path", root)
     .option("topic", "orders").option("valueFormat", "protobuf")
     .option("valueSchema", PROTO).option("autoRegisterSchemas", "true").save())
    assert read_table(root, "_schemas").column("value").to_pylist()[-1] == \
        rr.schema_value("orders-value", 1, 7, PROTO, schema_type="PROTOBUF")
    mod = compile_module(tmp_path, PROTO, stem="shop_w")
    got = {}
    for v in read_table(root, "orders").column("value").to_pylist():
        assert v[:6] == b"\x00\x00\x00\x00\x07\x00"
        m = parse(mod.Order, v[6:])
        got[m.id] = m
    assert sorted(got) == list(range(30))
    m = got[5]
    assert (m.state, [(x.sku, x.qty) for x in m.lines], dict(m.counts)) == \
        (1, [("s", 5), ("t", 0)], {"k": 5})
    assert (m.at.seconds, m.HasField("note"), got[4].note) == (1704067205, False, "n4")
    # our typed read of it (an extra): the registered schema serves the ids
    back = (spark.read.format("kafkalog").option("path", root).option("subscribe", "orders")
            .option("valueFormat", "protobuf").load().select("value.id", "value.note")
            .orderBy("id").collect())
    assert [tuple(r) for r in back][:3] == [(None, "n0"), (1, None), (2, "n2")]


def test_struct_that_does_not_fit_refused_before_any_task(spark, tmp_path):
    root = _registry(tmp_path / "logs", [(rr.schema_key("orders-value", 1),
                                          rr.schema_value("orders-value", 1, 3, PROTO,
                                                          schema_type="PROTOBUF"))])
    before = read_table(root, "_schemas").num_rows
    from pyspark.sql import functions as F
    df = _orders(spark).select(F.col("value").withField("id", F.lit("x")).alias("value"))
    with pytest.raises(Exception) as e:
        (df.write.format("kafkalog").mode("append").option("path", root)
         .option("topic", "orders").option("valueFormat", "protobuf").save())
    msg = str(unwrap(e.value))
    assert "value.id: Arrow type string cannot be written as Protobuf int64" in msg
    assert read_table(root, "_schemas").num_rows == before
    import os
    assert not os.path.exists(os.path.join(root, "orders-0"))


def test_json_stream_write_available_now(spark, tmp_path):
    text = json.dumps(JSON_SCHEMA, separators=(",", ":"))
    root = _registry(tmp_path / "dst", [(rr.schema_key("ev-value", 1),
                                         rr.schema_value("ev-value", 1, 4, text,
                                                         schema_type="JSON"))])
    from pyspark.sql import functions as F
    src = tmp_path / "src"
    df = spark.createDataFrame([(i, None if i % 3 == 0 else f"n{i}", ["a"] * (i % 2))
                                for i in range(20)], "id long, name string, tags array<string>")
    df.write.parquet(str(src))
    stream = spark.readStream.schema(df.schema).parquet(str(src)) \
        .select(F.struct("id", "name", "tags").alias("value"))
    q = (stream.writeStream.format("kafkalog").option("path", root).option("topic", "ev")
         .option("valueFormat", "json").option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    docs = []
    for v in read_table(root, "ev").column("value").to_pylist():
        assert v[:5] == b"\x00\x00\x00\x00\x04"
        doc = json.loads(v[5:])
        jsonschema.validate(doc, JSON_SCHEMA)
        docs.append(doc)
    assert sorted(docs, key=lambda d: d["id"]) == [
        {"id": i, **({} if i % 3 == 0 else {"name": f"n{i}"}), "tags": ["a"] * (i % 2)}
        for i in range(20)]
