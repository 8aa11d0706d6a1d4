"""The Avro encoder and the registry write side (issue 38 item 6), no Spark: what we encode
is decoded by fastavro (the oracle) value for value; bad values fail naming row and
field; the compatibility levels follow Avro's resolution rules as the registry applies
them; the SCHEMA records we append are the JSON KafkaStore writes
(tests/typed/registry_records) and RegistryState serves them."""
from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal

import fastavro
import pyarrow as pa
import pytest

from spark_kafkalog.errors import BadRowError, InvalidOptionError, SchemaError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.log.write.schemas import check_compatibility, schema_record, writer_schema
from spark_kafkalog.typed.avro_write import AvroEncoder, avro_schema_of
from spark_kafkalog.typed.registry import RegistryState
from spark_kafkalog.typed.request import make_column
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr

UTC = dt.timezone.utc
ALL = {"type": "record", "name": "R", "namespace": "n", "fields": [
    {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
    {"name": "s", "type": ["null", "string"], "default": None},
    {"name": "by", "type": "bytes"},
    {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"},
    {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10,
                             "scale": 2}},
    {"name": "decf", "type": {"type": "fixed", "name": "DF", "size": 8,
                              "logicalType": "decimal", "precision": 12, "scale": 3}},
    {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 3}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
    {"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "arr", "type": {"type": "array", "items": ["null", "long"]}},
    {"name": "m", "type": {"type": "map", "values": "double"}},
    {"name": "sub", "type": ["null", {"type": "record", "name": "Sub", "fields": [
        {"name": "x", "type": "int"},
        {"name": "deep", "type": {"type": "array", "items": {
            "type": "record", "name": "Deep", "fields": [{"name": "q", "type": "string"}]}}}]}],
     "default": None}]}
ARROW = pa.struct([
    ("i", pa.int32()), ("l", pa.int64()), ("s", pa.string()), ("by", pa.binary()),
    ("b", pa.bool_()), ("f", pa.float32()), ("d", pa.float64()),
    ("dec", pa.decimal128(10, 2)), ("decf", pa.decimal128(12, 3)), ("fx", pa.binary(3)),
    ("e", pa.string()), ("tsm", pa.timestamp("us", tz="UTC")),
    ("tsu", pa.timestamp("us", tz="UTC")), ("lts", pa.timestamp("us")), ("dt", pa.date32()),
    ("arr", pa.list_(pa.int64())), ("m", pa.map_(pa.string(), pa.float64())),
    ("sub", pa.struct([("x", pa.int32()),
                       ("deep", pa.list_(pa.struct([("q", pa.string())])))]))])


def _row(k):
    return {"i": (-1) ** k * k * 1000, "l": -(2 ** 62) + k, "s": None if k % 3 == 0 else f"é{k}",
            "by": bytes(range(k % 7)), "b": k % 2 == 0, "f": k / 8, "d": -k * 1e200,
            "dec": Decimal(k * 37 - 500) / 100, "decf": Decimal(-k * 123456) / 1000,
            "fx": bytes([k % 256]) * 3, "e": "ABC"[k % 3],
            "tsm": dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC) + dt.timedelta(
                milliseconds=k * 1001),
            "tsu": dt.datetime(2024, 2, 29, tzinfo=UTC) + dt.timedelta(microseconds=k * 7),
            "lts": dt.datetime(2001, 1, 1) + dt.timedelta(microseconds=k),
            "dt": dt.date(1950, 1, 1) + dt.timedelta(days=k * 400),
            "arr": [None if j == 1 else j * k for j in range(k % 4)],
            "m": [(f"k{j}", j / 2) for j in range(k % 3)],
            "sub": None if k % 5 == 4 else {"x": k, "deep": [{"q": "z" * j} for j in range(k % 3)]}}


def _oracle(payloads, schema, prefix=b""):
    parsed = fastavro.parse_schema(schema)
    out = []
    for b in payloads:
        if b is None:
            out.append(None)
            continue
        assert b.startswith(prefix)
        buf = io.BytesIO(b[len(prefix):])
        out.append(fastavro.schemaless_reader(buf, parsed))
        assert buf.read() == b""
    return out


def _expect(row):
    r = dict(row)
    r["m"] = dict(r["m"])
    return r


def test_every_type_decoded_by_fastavro_with_framing():
    rows = [_row(k) for k in range(50)]
    arr = pa.array(rows + [None], ARROW)
    out = AvroEncoder(json.dumps(ALL), ARROW, 300).encode(arr)
    assert out.type == pa.binary() and out.null_count == 1 and out[50].as_py() is None
    got = _oracle(out.to_pylist(), ALL, b"\x00\x00\x00\x01\x2c")
    assert got[:50] == [_expect(r) for r in rows]


def test_sliced_and_chunked_input_and_bare_avro():
    rows = [_row(k) for k in range(30)]
    arr = pa.array(rows, ARROW)
    enc = AvroEncoder(json.dumps(ALL), ARROW)        # no id: bare Avro
    assert _oracle(enc.encode(arr.slice(7, 11)).to_pylist(), ALL) == \
        [_expect(r) for r in rows[7:18]]
    chunked = pa.chunked_array([arr.slice(0, 4), arr.slice(4)])
    assert _oracle(enc.encode(chunked).to_pylist(), ALL) == [_expect(r) for r in rows]


def test_unions_as_spark_types_them():
    schema = {"type": "record", "name": "U", "fields": [
        {"name": "u", "type": ["null", "int", "string", {"type": "array", "items": "long"}]},
        {"name": "w", "type": ["int", "long"]}, {"name": "x", "type": ["float", "double"]}]}
    t = pa.struct([("u", pa.struct([("member0", pa.int32()), ("member1", pa.string()),
                                    ("member2", pa.list_(pa.int64()))])),
                   ("w", pa.int64()), ("x", pa.float64())])
    rows = [{"u": {"member0": 5}, "w": 2 ** 40, "x": 0.5},
            {"u": {"member1": "s"}, "w": -1, "x": 1e300},
            {"u": {"member2": [1, 2]}, "w": 0, "x": -2.0},
            {"u": None, "w": 7, "x": 0.0},
            {"u": {}, "w": 7, "x": 0.0}]                 # no member set: the null branch
    out = AvroEncoder(json.dumps(schema), t).encode(pa.array(rows, t))
    got = _oracle(out.to_pylist(), schema)
    assert [r["u"] for r in got] == [5, "s", [1, 2], None, None]
    assert [r["w"] for r in got] == [2 ** 40, -1, 0, 7, 7]
    assert [r["x"] for r in got] == [0.5, 1e300, -2.0, 0.0, 0.0]
    no_null = {"type": "record", "name": "V", "fields": [{"name": "u", "type": ["int", "string"]}]}
    t2 = pa.struct([("u", pa.struct([("member0", pa.int32()), ("member1", pa.string())]))])
    with pytest.raises(BadRowError, match="row 0: field value.u: no member"):
        AvroEncoder(json.dumps(no_null), t2).encode(pa.array([{"u": {}}], t2))


def test_timestamp_millis_floors_like_spark():
    schema = {"type": "record", "name": "T", "fields": [
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
    t = pa.struct([("t", pa.timestamp("us", tz="UTC"))])
    arr = pa.array([{"t": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)}], t)
    raw = AvroEncoder(json.dumps(schema), t).encode(arr)[0].as_py()
    # -1 microsecond -> -1 millisecond (floor), zigzag(-1) = 1
    assert raw == b"\x01"


@pytest.mark.parametrize("field, value, words", [
    ("dec", Decimal("123456789.01"), "precision 10"),
    ("e", "D", "not in the enum"),
    ("fx", None, "not nullable"),
    ("i", None, "not nullable"),
])
def test_bad_value_names_row_and_field(field, value, words):
    rows = [_row(k) for k in range(4)]
    rows[2] = dict(rows[2], **{field: value})
    typ = ARROW
    if field == "dec":               # a wider Arrow decimal than the schema's precision
        typ = pa.struct([pa.field("dec", pa.decimal128(20, 2)) if f.name == "dec" else f
                         for f in ARROW])
    with pytest.raises(BadRowError) as e:
        AvroEncoder(json.dumps(ALL), typ, 1).encode(pa.array(rows, typ))
    assert f"row 2: field value.{field}" in str(e.value) and words in str(e.value)


def test_int_outside_32_bits_and_wrong_fixed_size():
    s = {"type": "record", "name": "X", "fields": [
        {"name": "i", "type": "int"}, {"name": "f", "type": {"type": "fixed", "name": "F",
                                                             "size": 2}}]}
    t = pa.struct([("i", pa.int64()), ("f", pa.binary())])
    enc = AvroEncoder(json.dumps(s), t)
    with pytest.raises(BadRowError, match=r"row 1: field value.i: 2147483648 is outside"):
        enc.encode(pa.array([{"i": 1, "f": b"ab"}, {"i": 2 ** 31, "f": b"ab"}], t))
    with pytest.raises(BadRowError, match=r"row 0: field value.f: 3 bytes"):
        enc.encode(pa.array([{"i": 1, "f": b"abc"}], t))
    with pytest.raises(BadRowError, match=r"row 100: field value.f: 3 bytes"):
        enc.encode(pa.array([{"i": 1, "f": b"abc"}], t), first_row=100)


def test_schema_the_type_cannot_take_is_refused_up_front():
    with pytest.raises(SchemaError, match="lacks"):
        AvroEncoder(json.dumps(ALL), pa.struct([("i", pa.int32())]))
    with pytest.raises(SchemaError, match="not in Avro record"):
        AvroEncoder(json.dumps({"type": "record", "name": "Y", "fields": []}),
                    pa.struct([("i", pa.int32())]))


def test_derived_schema_as_spark_names_it_and_fastavro_reads_it():
    t = pa.struct([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                   ("inner", pa.struct([pa.field("a", pa.int32(), nullable=False)]))])
    text = avro_schema_of(t)
    schema = json.loads(text)
    assert schema["name"] == "topLevelRecord" and "namespace" not in schema
    assert schema["fields"][0] == {"name": "id", "type": "long"}
    assert schema["fields"][1] == {"name": "name", "type": ["null", "string"],
                                   "default": None}
    inner = schema["fields"][2]["type"][1]
    assert (inner["name"], inner["namespace"]) == ("inner", "topLevelRecord")
    rows = [{"id": 1, "name": None, "inner": {"a": 3}}, {"id": 2, "name": "x", "inner": None}]
    out = AvroEncoder(text, t, 5).encode(pa.array(rows, t))
    assert _oracle(out.to_pylist(), schema, b"\x00\x00\x00\x00\x05") == rows


# ---- the registry side --------------------------------------------------------------------

def _rec(fields, name="Order"):
    return json.dumps({"type": "record", "name": name, "namespace": "com.acme",
                       "fields": fields}, separators=(",", ":"))


A = {"name": "a", "type": "int"}
B_STR = {"name": "b", "type": "string"}
B_INT_DEFAULT = {"name": "b", "type": "int", "default": 0}
C_REQUIRED = {"name": "c", "type": "long"}
C_DEFAULT = {"name": "c", "type": "long", "default": 1}


def _state(versions, level=None):
    records = [(rr.schema_key("s", v), rr.schema_value("s", v, 10 + v, text))
               for v, text in enumerate(versions, 1)]
    if level:
        records.append((rr.subject_key("CONFIG", "s"), rr.config_value(level, "s")))
    return RegistryState.from_records((i, k, v) for i, (k, v) in enumerate(records))


@pytest.mark.parametrize("level, new, ok", [
    (None, [A, C_REQUIRED], False),            # default BACKWARD: new field needs a default
    (None, [A, C_DEFAULT], True),
    ("BACKWARD", [], True),                    # a removed field is skipped by the new reader
    ("FORWARD", [A, C_REQUIRED], True),        # the old reader skips the new field
    ("FORWARD", [], False),                    # the old reader has no default for a
    ("FULL", [A, C_DEFAULT], True),
    ("FULL", [A, C_REQUIRED], False),
    ("NONE", [{"name": "a", "type": "string"}], True),
    ("BACKWARD", [{"name": "a", "type": "long"}], True),     # int -> long promotion
    ("FORWARD", [{"name": "a", "type": "long"}], False),     # long cannot be read as int
])
def test_compatibility_levels(level, new, ok):
    state = _state([_rec([A])], level)
    if ok:
        assert check_compatibility(state, "s", _rec(new)) == (level or "BACKWARD")
    else:
        with pytest.raises(SchemaError) as e:
            check_compatibility(state, "s", _rec(new))
        assert f"compatibility level {level or 'BACKWARD'}" in str(e.value)
        assert _rec(new) in str(e.value) and _rec([A]) in str(e.value)


def test_transitive_checks_every_version_not_deleted():
    versions = [_rec([A, B_STR]), _rec([A])]
    new = _rec([A, B_INT_DEFAULT])              # reads v2's data, not v1's (b: string)
    assert check_compatibility(_state(versions, "BACKWARD"), "s", new) == "BACKWARD"
    with pytest.raises(SchemaError, match="BACKWARD_TRANSITIVE.*version 1"):
        check_compatibility(_state(versions, "BACKWARD_TRANSITIVE"), "s", new)


def test_schema_record_is_kafkastore_json():
    key, value = schema_record("orders-value", 4, 17, _rec([A]))
    assert key == rr.schema_key("orders-value", 4)
    assert value == rr.schema_value("orders-value", 4, 17, _rec([A]))
    state = RegistryState.from_records([(0, key, value)])
    got = state.latest("orders-value")
    assert (got.id, got.version, got.schema, got.schema_type) == (17, 4, _rec([A]), "AVRO")


def _logdir(root, records):
    b = LogDirBuilder(str(root))
    p = b.partition("_schemas", 0)
    p.append([rec(k, v) for k, v in records])
    p.high_watermark = p.log_end_offset
    b.write()
    return str(root)


def test_register_takes_next_id_and_version_and_reuses_an_id(tmp_path):
    root = _logdir(tmp_path, [
        (rr.schema_key("t-value", 1), rr.schema_value("t-value", 1, 3, _rec([A]))),
        (rr.schema_key("other", 1), rr.schema_value("other", 1, 9, _rec([A, C_DEFAULT]))),
        (rr.schema_key("other", 1), None)])                   # hard-deleted: 9 stays used
    t = pa.struct([pa.field("a", pa.int32(), nullable=False)])
    col = make_column("value", "avro", inline_schema=_rec([A, B_INT_DEFAULT]))
    ws = writer_schema(root, "t", col, t, auto_register=True)
    assert (ws.id, ws.registered) == (10, True)
    state = read_registry(root)
    assert [(s.version, s.id) for s in (state.version("t-value", v) for v in (1, 2))] == \
        [(1, 3), (2, 10)]
    # the same schema under another subject keeps its id, as the registry gives it
    col2 = make_column("value", "avro", inline_schema=_rec([A, B_INT_DEFAULT]))
    ws2 = writer_schema(root, "u", col2, t, auto_register=True)
    assert ws2.id == 10 and read_registry(root).latest("u-value").version == 1
    # registered now: found without registering again
    ws3 = writer_schema(root, "t", col, t)
    assert (ws3.id, ws3.registered) == (10, False)
    assert read_table(root, "_schemas").num_rows == 5


def test_unregistered_schema_refused_without_auto_register(tmp_path):
    root = _logdir(tmp_path, [
        (rr.schema_key("t-value", 1), rr.schema_value("t-value", 1, 3, _rec([A])))])
    col = make_column("value", "avro", inline_schema=_rec([A, C_DEFAULT]))
    with pytest.raises(InvalidOptionError, match="not registered under subject t-value"):
        writer_schema(root, "t", col, pa.struct([("a", pa.int32())]))
    assert read_table(root, "_schemas").num_rows == 1


def test_write_format_registry_refused():
    # a write names its schema's type: registry (each id's own type) is for reads
    from spark_kafkalog.spark.write_options import parse_write_options
    with pytest.raises(InvalidOptionError, match="valueFormat=registry: a write encodes "
                                                 "avro, protobuf or json"):
        parse_write_options({"path": "/out", "topic": "t", "valueFormat": "registry"})


def test_typed_write_options_parsed():
    from spark_kafkalog.spark.write_options import parse_write_options
    w = parse_write_options({"path": "/out", "topic": "t", "ValueFormat": "avro",
                             "keyFormat": "avro", "keySchemaId": "4",
                             "autoRegisterSchemas": "true", "valueSubject": "s"})
    value, key = w.typed.columns
    assert (value.column, value.subject, key.column, key.schema_id) == ("value", "s", "key", 4)
    assert w.typed.auto_register is True
    with pytest.raises(InvalidOptionError, match="valueSchemaId must be >= 0"):
        parse_write_options({"path": "/o", "topic": "t", "valueFormat": "avro",
                             "valueSchemaId": "-1"})
    with pytest.raises(InvalidOptionError, match="valueSchema: needs valueFormat=avro"):
        parse_write_options({"path": "/o", "topic": "t", "valueSchema": '"int"'})
