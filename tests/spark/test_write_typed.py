"""``df.write.format("kafkalog")`` with ``valueFormat=avro`` (issue 38 item 6): the values
we write are read back by fastavro (the oracle) with the schema the registry holds, the
``_schemas`` records we append are the JSON KafkaStore writes (tests/typed/registry_records)
and the registry engineer's RegistryState serves them; refusals leave the log unchanged;
a round trip through ``valueFormat=avro`` reads equals the input; a stream with
availableNow."""
from __future__ import annotations

import hashlib
import io
import json
import os

import fastavro
import pytest

from spark_kafkalog.errors import unwrap
from spark_kafkalog.log import read_table
from spark_kafkalog.log.read.schemas import read_registry
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr

V1 = {"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                "scale": 2}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}}]}
V1_TEXT = json.dumps(V1, separators=(",", ":"))
DDL = ("id long, amount decimal(9,2), note string, tags array<string>, kind string")


def _registry(root, records):
    b = LogDirBuilder(str(root))
    p = b.partition("_schemas", 0)
    p.append([rec(k, v) for k, v in records])
    p.high_watermark = p.log_end_offset
    b.write()
    return str(root)


def _rows():
    from decimal import Decimal
    return [(i, Decimal(i) / 4, None if i % 3 == 0 else f"n{i}", ["t"] * (i % 3),
             "AB"[i % 2]) for i in range(40)]


def _df(spark, rows=None):
    from pyspark.sql import functions as F
    df = spark.createDataFrame(rows or _rows(), DDL)
    return df.select(F.struct(*df.columns).alias("value"),
                     F.col("id").cast("string").alias("key"))


def _values(root, topic):
    t = read_table(root, topic)
    return t.column("value").to_pylist()


def _oracle(payloads, schema, sid):
    parsed = fastavro.parse_schema(json.loads(schema) if isinstance(schema, str) else schema)
    out = []
    for b in payloads:
        assert b[:5] == b"\x00" + sid.to_bytes(4, "big")
        buf = io.BytesIO(b[5:])
        out.append(fastavro.schemaless_reader(buf, parsed))
        assert buf.read() == b""            # nothing left over
    return out


def _expected(rows):
    return [{"id": i, "amount": a, "note": n, "tags": t, "kind": k} for i, a, n, t, k in rows]


def _listing(root):
    """Every file under ``root`` with its bytes' hash ("unchanged": byte for byte), but
    the marker an aborted write leaves (its bookkeeping, not the log)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.startswith(".kafkalog-aborted."):     # the writer's abort bookkeeping
                continue
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = hashlib.sha256(
                    fh.read()).hexdigest()
    return out


def test_registered_schema_batch_write_decoded_by_fastavro(spark, tmp_path):
    root = _registry(tmp_path, [(rr.schema_key("orders-value", 1),
                                 rr.schema_value("orders-value", 1, 3, V1_TEXT))])
    (_df(spark).write.format("kafkalog").mode("append").option("path", root)
     .option("topic", "orders").option("valueFormat", "avro").save())
    got = sorted(_oracle(_values(root, "orders"), V1, 3), key=lambda r: r["id"])
    assert got == _expected(_rows())
    # and our typed read of what we wrote equals the input
    back = (spark.read.format("kafkalog").option("path", root).option("subscribe", "orders")
            .option("valueFormat", "avro").load().select("value.*").orderBy("id").collect())
    assert [tuple(r) for r in back] == [(i, a, n, t, k) for i, a, n, t, k in _rows()]


def test_inline_schema_must_be_registered_without_auto_register(spark, tmp_path):
    root = _registry(tmp_path, [(rr.schema_key("orders-value", 1),
                                 rr.schema_value("orders-value", 1, 3, V1_TEXT))])
    other = dict(V1, fields=V1["fields"][:1] + [dict(V1["fields"][1], name="amt")] +
                 V1["fields"][2:])
    before = _listing(root)
    from pyspark.sql import functions as F
    df = _df(spark).select(F.col("value").withField("amt", F.col("value.amount"))
                           .dropFields("amount").alias("value"))
    with pytest.raises(Exception) as e:
        (df.write.format("kafkalog").mode("append").option("path", root)
         .option("topic", "orders").option("valueFormat", "avro")
         .option("valueSchema", json.dumps(other)).save())
    err = unwrap(e.value)
    assert "not registered under subject orders-value" in str(err)
    assert "autoRegisterSchemas" in str(err)
    assert _listing(root) == before


def test_auto_register_appends_what_kafkastore_writes(spark, tmp_path):
    root = _registry(tmp_path, [(rr.schema_key("orders-value", 1),
                                 rr.schema_value("orders-value", 1, 3, V1_TEXT)),
                                (rr.subject_key("CONFIG"), rr.config_value("BACKWARD"))])
    v2 = dict(V1, fields=V1["fields"] + [{"name": "extra", "type": ["null", "long"],
                                          "default": None}])
    v2_text = json.dumps(v2, separators=(",", ":"))
    from pyspark.sql import functions as F
    df = _df(spark).select(F.col("value").withField("extra", F.lit(None).cast("long"))
                           .alias("value"))
    (df.write.format("kafkalog").mode("append").option("path", root)
     .option("topic", "orders").option("valueFormat", "avro").option("valueSchema", v2_text)
     .option("autoRegisterSchemas", "true").save())
    reg = read_table(root, "_schemas")
    assert reg.num_rows == 3
    key, value = reg.column("key")[2].as_py(), reg.column("value")[2].as_py()
    assert key == rr.schema_key("orders-value", 2)
    assert value == rr.schema_value("orders-value", 2, 4, v2_text)
    state = read_registry(root)
    assert state.latest("orders-value").id == 4
    assert json.loads(state.by_id(4).schema) == v2
    got = sorted(_oracle(_values(root, "orders"), v2, 4), key=lambda r: r["id"])
    assert got == [dict(r, extra=None) for r in _expected(_rows())]


def test_incompatible_schema_refused_under_backward(spark, tmp_path):
    root = _registry(tmp_path, [(rr.schema_key("orders-value", 1),
                                 rr.schema_value("orders-value", 1, 3, V1_TEXT))])
    # a new required field without a default: v2 cannot read v1's data (BACKWARD fails)
    v2 = dict(V1, fields=V1["fields"] + [{"name": "extra", "type": "long"}])
    from pyspark.sql import functions as F
    df = _df(spark).select(F.col("value").withField("extra", F.lit(1).cast("long"))
                           .alias("value"))
    before = _listing(root)
    with pytest.raises(Exception) as e:
        (df.write.format("kafkalog").mode("append").option("path", root)
         .option("topic", "orders").option("valueFormat", "avro")
         .option("valueSchema", json.dumps(v2)).option("autoRegisterSchemas", "true").save())
    msg = str(unwrap(e.value))
    assert "compatibility level BACKWARD" in msg and "extra" in msg and '"Order"' in msg
    assert _listing(root) == before
    assert read_registry(root).versions("orders-value") == [1]


def test_derived_schema_registered_in_new_registry(spark, tmp_path):
    from pyspark.sql import functions as F
    root = str(tmp_path)
    df = _df(spark).select("value", F.struct(F.col("value.id").alias("id")).alias("key"))
    (df.write.format("kafkalog").mode("append").option("path", root)
     .option("topic", "orders").option("valueFormat", "avro").option("keyFormat", "avro")
     .option("autoRegisterSchemas", "true").save())
    state = read_registry(root)
    key_entry = state.latest("orders-key")
    assert (key_entry.id, key_entry.version) == (2, 1)
    keys = _oracle(read_table(root, "orders").column("key").to_pylist(),
                   key_entry.schema, 2)
    assert sorted(k["id"] for k in keys) == list(range(40))
    entry = state.latest("orders-value")
    assert (entry.id, entry.version) == (1, 1)
    schema = json.loads(entry.schema)
    assert schema["name"] == "topLevelRecord"
    assert [f["name"] for f in schema["fields"]] == ["id", "amount", "note", "tags", "kind"]
    got = sorted(_oracle(_values(root, "orders"), schema, 1), key=lambda r: r["id"])
    assert [r["id"] for r in got] == list(range(40))
    assert [r["note"] for r in got] == [n for _, _, n, _, _ in _rows()]


def test_null_in_non_null_field_names_row_and_field(spark, tmp_path):
    root = _registry(tmp_path, [(rr.schema_key("orders-value", 1),
                                 rr.schema_value("orders-value", 1, 3, V1_TEXT))])
    rows = _rows()[:3] + [(5, None, "x", [], "A")]
    before = _listing(root)
    with pytest.raises(Exception) as e:
        (_df(spark, rows).coalesce(1).write.format("kafkalog").mode("append")
         .option("path", root).option("topic", "orders").option("valueFormat", "avro").save())
    msg = str(unwrap(e.value))
    assert "Spark task" in msg and "row 3: field value.amount" in msg and "not nullable" in msg
    assert not any(k.startswith("orders-") for k in _listing(root))
    assert _listing(root) == {k: v for k, v in before.items()}


def test_stream_write_available_now(spark, tmp_path):
    root = _registry(tmp_path / "dst", [(rr.schema_key("orders-value", 1),
                                         rr.schema_value("orders-value", 1, 3, V1_TEXT))])
    src = tmp_path / "src"
    src.mkdir()
    _df(spark).select("value").write.parquet(str(src / "p"))
    stream = spark.readStream.schema(_df(spark).select("value").schema).parquet(str(src / "p"))
    q = (stream.writeStream.format("kafkalog").option("path", root).option("topic", "orders")
         .option("valueFormat", "avro")
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination()
    got = sorted(_oracle(_values(root, "orders"), V1, 3), key=lambda r: r["id"])
    assert got == _expected(_rows())
