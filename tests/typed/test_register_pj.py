"""Registering Protobuf and JSON Schema writer schemas (and schemas with references) in a log
dir's ``_schemas``, no Spark: the SCHEMA values are the JSON KafkaStore writes
(tests/typed/registry_records, SchemaValue's creator order, schemaType present for
PROTOBUF/JSON), ids and versions as the registry assigns them, references resolved for the
encoder (values checked by the protobuf package and fastavro); Protobuf compatibility
follows the registry's SchemaDiff rules, listed case by case below; JSON compatibility follows
its JSON diff (cases in test_json_compat.py), here through the writer's autoRegisterSchemas."""
from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError, SchemaError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.log.write.schemas import (check_compatibility, parse_references,
                                              schema_record, writer_schema)
from spark_kafkalog.typed import proto_schema as ps
from spark_kafkalog.typed.avro_write import AvroEncoder
from spark_kafkalog.typed.proto_compat import incompatibilities
from spark_kafkalog.typed.proto_write import ProtobufEncoder
from spark_kafkalog.typed.registry import RegistryState, SchemaReference
from spark_kafkalog.typed.request import make_column
from tests.log.logbuilder import LogDirBuilder, rec
from tests.typed import registry_records as rr
from tests.typed.proto_oracle import compile_module, parse

PAY = ('syntax = "proto3";\npackage acme;\n\nmessage Payment {\n  string id = 1;\n'
       '  double amount = 2;\n}\n')
COMMON = ('syntax = "proto3";\npackage acme.common;\n\nmessage Money {\n  int64 cents = 1;\n'
          '  string cur = 2;\n}\n')
ORDER = ('syntax = "proto3";\npackage acme;\nimport "pbwref/common.proto";\n\n'
         'message Order {\n  string id = 1;\n  acme.common.Money total = 2;\n}\n')
EVENT = {"type": "object", "properties": {"kind": {"type": "string"}}}


def _logdir(root, records):
    b = LogDirBuilder(str(root))
    p = b.partition("_schemas", 0)
    p.append([rec(k, v) for k, v in records])
    p.high_watermark = p.log_end_offset
    b.write()
    return str(root)


def _values(root):
    return read_table(root, "_schemas").column("value").to_pylist()


def test_schema_record_for_protobuf_and_json_is_kafkastore_json():
    refs = (SchemaReference("pbwref/common.proto", "common", 1),)
    key, value = schema_record("o-value", 2, 7, ORDER, "PROTOBUF", refs)
    assert key == rr.schema_key("o-value", 2)
    assert value == rr.schema_value("o-value", 2, 7, ORDER, schema_type="PROTOBUF",
                                    references=[("pbwref/common.proto", "common", 1)])
    text = json.dumps(EVENT)
    assert schema_record("e-value", 1, 3, text, "JSON")[1] == \
        rr.schema_value("e-value", 1, 3, text, schema_type="JSON")


def test_protobuf_registered_found_again_and_typed_by_id(tmp_path):
    root = _logdir(tmp_path, [(rr.schema_key("t-value", 1),
                               rr.schema_value("t-value", 1, 4, rr.ORDERS_V1))])
    t = pa.struct([("id", pa.string()), ("amount", pa.float64())])
    col = make_column("value", "protobuf", inline_schema=PAY)
    with pytest.raises(InvalidOptionError, match="not registered under subject pay-value"):
        writer_schema(root, "pay", col, t)
    ws = writer_schema(root, "pay", col, t, auto_register=True)
    assert (ws.id, ws.registered, ws.schema_type) == (5, True, "PROTOBUF")
    assert _values(root)[-1] == rr.schema_value("pay-value", 1, 5, PAY,
                                                schema_type="PROTOBUF")
    got = read_registry(root).latest("pay-value")
    assert (got.schema_type, got.schema, got.id) == ("PROTOBUF", PAY, 5)
    # the same file spelled differently is the same schema: found, not registered again
    again = make_column("value", "protobuf", inline_schema=PAY.replace("\n  ", "\n    "))
    assert writer_schema(root, "pay", again, t).id == 5
    assert len(_values(root)) == 2
    # an Avro id is not a Protobuf schema
    with pytest.raises(InvalidOptionError, match="valueFormat=protobuf: schema id 4 is AVRO"):
        writer_schema(root, "t", make_column("value", "protobuf", schema_id=4), t)


def test_protobuf_with_references_registered_and_encoded(tmp_path):
    root = _logdir(tmp_path, [(rr.schema_key("common", 1),
                               rr.schema_value("common", 1, 1, COMMON,
                                               schema_type="PROTOBUF"))])
    refs = parse_references("valueSchemaReferences", json.dumps(
        [{"name": "pbwref/common.proto", "subject": "common", "version": 1}]))
    t = pa.struct([("id", pa.string()),
                   ("total", pa.struct([("cents", pa.int64()), ("cur", pa.string())]))])
    col = make_column("value", "protobuf", inline_schema=ORDER)
    with pytest.raises(SchemaError, match="does not compile"):
        writer_schema(root, "o", col, t, auto_register=True)        # the import is unknown
    ws = writer_schema(root, "o", col, t, auto_register=True, references=refs)
    assert (ws.id, ws.named_types) == (2, (("pbwref/common.proto", COMMON),))
    assert _values(root)[-1] == rr.schema_value(
        "o-value", 1, 2, ORDER, schema_type="PROTOBUF",
        references=[("pbwref/common.proto", "common", 1)])
    state = read_registry(root)
    assert state.latest("o-value").references == refs
    # the writer's lookup by id gives the encoder the imported file
    by_id = writer_schema(root, "o", make_column("value", "protobuf", schema_id=2), t)
    enc = ProtobufEncoder(by_id.schema, t, by_id.id, named_types=dict(by_id.named_types))
    out = enc.encode(pa.array([{"id": "a", "total": {"cents": 250, "cur": "EUR"}}], t))
    d = tmp_path / "oracle"
    (d / "pbwref").mkdir(parents=True)
    mod = compile_module(d, ORDER, stem="order_ref", extra={"pbwref/common.proto": COMMON})
    msg = parse(mod.Order, out[0].as_py()[6:])
    assert (msg.id, msg.total.cents, msg.total.cur) == ("a", 250, "EUR")
    with pytest.raises(InvalidOptionError, match="valueSchemaReferences: reference"):
        writer_schema(root, "p", col, t, auto_register=True,
                      references=(SchemaReference("pbwref/common.proto", "common", 9),))


def test_avro_with_references_registered_and_encoded(tmp_path):
    money = json.dumps({"type": "record", "name": "Money", "namespace": "fin", "fields": [
        {"name": "cents", "type": "long"}, {"name": "cur", "type": "string"}]},
        separators=(",", ":"))
    pay = json.dumps({"type": "record", "name": "Pay", "namespace": "fin", "fields": [
        {"name": "amount", "type": "fin.Money"}]}, separators=(",", ":"))
    root = _logdir(tmp_path, [(rr.schema_key("fin.Money", 1),
                               rr.schema_value("fin.Money", 1, 1, money))])
    t = pa.struct([("amount", pa.struct([("cents", pa.int64()), ("cur", pa.string())]))])
    refs = (SchemaReference("fin.Money", "fin.Money", 1),)
    ws = writer_schema(root, "pays", make_column("value", "avro", inline_schema=pay), t,
                       auto_register=True, references=refs)
    assert _values(root)[-1] == rr.schema_value("pays-value", 1, 2, pay,
                                                references=[("fin.Money", "fin.Money", 1)])
    out = AvroEncoder(ws.schema, t, ws.id, named_types=dict(ws.named_types)).encode(
        pa.array([{"amount": {"cents": 5, "cur": "EUR"}}], t))
    named = {}
    fastavro.parse_schema(json.loads(money), named_schemas=named)
    parsed = fastavro.parse_schema(json.loads(pay), named_schemas=named)
    got = fastavro.schemaless_reader(io.BytesIO(out[0].as_py()[5:]), parsed)
    assert got == {"amount": {"cents": 5, "cur": "EUR"}}


BASE = ('syntax = "proto3"; package a; import "google/protobuf/timestamp.proto";\n'
        'message M { int32 x = 1; string s = 2; google.protobuf.Timestamp t = 3;\n'
        '  map<string, int32> m = 4; oneof o { int32 p = 5; string q = 6; } N n = 7;\n'
        '  message N { int32 k = 1; } }\n')


@pytest.mark.parametrize("change, new, found", [
    # compatible in SchemaDiff.COMPATIBLE_CHANGES
    ("field added", BASE.replace("N n = 7;", "N n = 7; int64 extra = 8;"), None),
    ("field removed", BASE.replace("string s = 2;", ""), None),
    ("field renamed", BASE.replace("string s = 2;", "string ess = 2;"), None),
    ("int32 -> int64 (same group)", BASE.replace("int32 x = 1", "int64 x = 1"), None),
    ("string -> bytes", BASE.replace("string s = 2", "bytes s = 2"), None),
    ("message added", BASE + "message Z { int32 z = 1; }\n", None),
    ("oneof member added", BASE.replace("string q = 6;", "string q = 6; bool r = 9;"), None),
    ("oneof member moved to top level", BASE.replace("int32 p = 5;", "").replace(
        "N n = 7;", "N n = 7; int32 p = 5;"), None),
    # incompatible
    ("package changed", BASE.replace("package a;", "package b;"), "package changed"),
    ("int32 -> string", BASE.replace("int32 x = 1", "string x = 1"), "scalar kind changed"),
    ("int32 -> sint32", BASE.replace("int32 x = 1", "sint32 x = 1"), "scalar kind changed"),
    ("singular -> repeated", BASE.replace("int32 x = 1", "repeated int32 x = 1"),
     "numeric label changed"),
    ("scalar -> message", BASE.replace("int32 x = 1", "N x = 1"), "field kind changed"),
    ("nested message changed", BASE.replace("int32 k = 1;", "string k = 1;"),
     "named type M.N changed incompatibly"),
    ("map value changed", BASE.replace("map<string, int32>", "map<string, string>"),
     "scalar kind changed"),
    ("oneof member removed", BASE.replace("string q = 6;", ""), "oneof member removed"),
    ("field moved into a oneof", BASE.replace("int32 x = 1;", "").replace(
        "int32 p = 5;", "int32 p = 5; int32 x = 1;"), "moved into an existing oneof"),
    ("message removed", BASE.replace("message M", "message Renamed"), "M: message removed"),
])
def test_protobuf_compatibility_rules(change, new, found):
    got = incompatibilities(ps.load_file(BASE), ps.load_file(new))
    if found is None:
        assert got == []
    else:
        assert any(found in g for g in got), got


P2 = 'syntax = "proto2"; message R { required int32 a = 1; optional int32 b = 2; }'


def _state(subject, versions, level=None, schema_type="PROTOBUF"):
    records = [(rr.schema_key(subject, v), rr.schema_value(subject, v, 10 + v, text,
                                                          schema_type=schema_type))
               for v, text in enumerate(versions, 1)]
    if level:
        records.append((rr.subject_key("CONFIG", subject), rr.config_value(level, subject)))
    return RegistryState.from_records((i, k, v) for i, (k, v) in enumerate(records))


@pytest.mark.parametrize("level, new, ok", [
    ("BACKWARD", P2.replace("optional int32 b = 2;", ""), True),
    ("BACKWARD", P2.replace("}", "required int32 c = 3; }"), False),   # required added
    ("FORWARD", P2.replace("required int32 a = 1;", ""), False),       # required removed
    ("FULL", P2.replace("optional int32 b", "optional int64 b"), True),
    ("FULL", P2.replace("optional int32 b", "optional string b"), False),
    ("NONE", P2.replace("optional int32 b", "optional string b"), True),
])
def test_protobuf_levels(level, new, ok):
    state = _state("r", [P2], level)
    if ok:
        assert check_compatibility(state, "r", new, "PROTOBUF") == level
    else:
        with pytest.raises(SchemaError, match=f"compatibility level {level}"):
            check_compatibility(state, "r", new, "PROTOBUF")


def _set_level(root, level, subject="e-value"):
    from spark_kafkalog.log.write.table import write_table
    write_table(root, "_schemas", pa.table({"key": [rr.subject_key("CONFIG", subject)],
                                            "value": [rr.config_value(level, subject)]}),
                allow_internal_topic=True)


def test_json_registered_under_the_registry_diff(tmp_path):
    root = _logdir(tmp_path, [(rr.subject_key("CONFIG"), rr.config_value("BACKWARD"))])
    t = pa.struct([("kind", pa.string())])
    ws = writer_schema(root, "e", make_column("value", "json", inline_schema=json.dumps(
        EVENT, indent=2)), t, auto_register=True)
    # stored as the registry stores it: Jackson's compact text (JsonSchema.canonicalString)
    compact = json.dumps(EVENT, separators=(",", ":"))
    assert _values(root)[-1] == rr.schema_value("e-value", 1, 1, compact, schema_type="JSON")
    # an optional property added to an open content model: incompatible (STRICT policy)
    v2 = json.dumps({"type": "object", "properties": {"kind": {"type": "string"},
                                                      "n": {"type": "integer"}}})
    t2 = pa.struct([("kind", pa.string()), ("n", pa.int64())])
    with pytest.raises(SchemaError, match="compatibility level BACKWARD: the new schema "
                                          "cannot read data written with version 1 .*"
                                          "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at "
                                          "#/properties/n"):
        writer_schema(root, "e", make_column("value", "json", inline_schema=v2), t2,
                      auto_register=True)
    assert len(_values(root)) == 2 and ws.id == 1
    # closing the model narrows what the new schema reads: not BACKWARD, but FORWARD
    closed = {**EVENT, "additionalProperties": False}
    with pytest.raises(SchemaError, match="ADDITIONAL_PROPERTIES_REMOVED at "
                                          "#/additionalProperties"):
        writer_schema(root, "e", make_column("value", "json", inline_schema=json.dumps(
            closed)), t, auto_register=True)
    _set_level(root, "FORWARD")
    t_closed = writer_schema(root, "e", make_column("value", "json", inline_schema=json.dumps(
        closed)), t, auto_register=True)
    assert t_closed.id == 2
    # the same addition to a closed model is BACKWARD compatible
    _set_level(root, "BACKWARD")
    v3 = json.dumps({**json.loads(v2), "additionalProperties": False})
    assert writer_schema(root, "e", make_column("value", "json", inline_schema=v3), t2,
                         auto_register=True).id == 3
    _set_level(root, "NONE")
    assert writer_schema(root, "e", make_column("value", "json", inline_schema=v2), t2,
                         auto_register=True).id == 4


def test_json_transitive_levels_through_the_writer(tmp_path):
    root = _logdir(tmp_path, [(rr.subject_key("CONFIG"), rr.config_value("BACKWARD"))])
    col = lambda s: make_column("value", "json", inline_schema=json.dumps(s))  # noqa: E731
    t_str, t_int = pa.struct([("kind", pa.string())]), pa.struct([("kind", pa.int64())])
    assert writer_schema(root, "e", col(EVENT), t_str, auto_register=True).id == 1
    v2 = {"type": "object", "properties": {"kind": {"type": "integer"}}}
    with pytest.raises(SchemaError, match="TYPE_CHANGED at #/properties/kind"):
        writer_schema(root, "e", col(v2), t_int, auto_register=True)
    _set_level(root, "NONE")
    assert writer_schema(root, "e", col(v2), t_int, auto_register=True).id == 2
    v3 = {**v2, "title": "Event"}          # TITLE_CHANGED against v2, TYPE_CHANGED against v1
    for level in ("BACKWARD_TRANSITIVE", "FULL_TRANSITIVE", "FORWARD_TRANSITIVE"):
        _set_level(root, level)
        with pytest.raises(SchemaError, match=f"level {level}: .*version 1 \\(id 1\\): "
                                              "TYPE_CHANGED at #/properties/kind"):
            writer_schema(root, "e", col(v3), t_int, auto_register=True)
    _set_level(root, "FULL")
    assert writer_schema(root, "e", col(v3), t_int, auto_register=True).id == 3


def test_library_write_table_with_typed_columns(tmp_path):
    # spark_kafkalog.log.write.write_table: read_table's keywords, no Spark
    from spark_kafkalog.log.write import write_table
    root = _logdir(tmp_path, [(rr.schema_key("x", 1),
                               rr.schema_value("x", 1, 1, rr.ORDERS_V1))])
    t = pa.struct([("id", pa.string()), ("amount", pa.float64())])
    kt = pa.struct([("kind", pa.string())])
    table = pa.table({"value": pa.array([{"id": "a", "amount": 2.5}, None], t),
                      "key": pa.array([{"kind": "k"}, {"kind": None}], kt)})
    res = write_table(root, "pays", table, value_format="protobuf", value_schema=PAY,
                      key_format="json", key_schema=json.dumps(EVENT),
                      auto_register_schemas=True)
    assert res is not None
    state = read_registry(root)
    assert [(s, state.latest(s).schema_type, state.latest(s).id)
            for s in ("pays-key", "pays-value")] == [("pays-key", "JSON", 3),
                                                     ("pays-value", "PROTOBUF", 2)]
    got = read_table(root, "pays")
    values, keys = got.column("value").to_pylist(), got.column("key").to_pylist()
    mod = compile_module(tmp_path, PAY, stem="pay_lib")
    m = parse(mod.Payment, values[0][6:])
    assert (values[0][:6], m.id, m.amount, values[1]) == (b"\0\0\0\0\2\0", "a", 2.5, None)
    assert [json.loads(k[5:]) for k in keys] == [{"kind": "k"}, {}]
    # a struct that does not fit: nothing written, the keyword named
    with pytest.raises(SchemaError, match="value.amount: Arrow type string cannot be "
                                          "written as Protobuf double"):
        write_table(root, "pays", pa.table({"value": pa.array(
            [{"id": "b", "amount": "x"}], pa.struct([("id", pa.string()),
                                                     ("amount", pa.string())]))}),
            value_format="protobuf", value_schema_id=2)
    assert read_table(root, "pays").num_rows == 2
    with pytest.raises(InvalidOptionError, match="value_schema_references: needs "
                                                 "value_format=avro, protobuf or json"):
        write_table(root, "pays", table, value_schema_references=[])


def test_spark_write_options_for_protobuf_and_json():
    from spark_kafkalog.spark.write_options import parse_write_options
    w = parse_write_options({
        "path": "/out", "topic": "t", "valueFormat": "protobuf", "valueMessage": "acme.Order",
        "valueSchemaReferences": '[{"name": "a.proto", "subject": "a", "version": 2}]',
        "keyFormat": "json", "keySchema": json.dumps(EVENT)})
    value, key = w.typed.columns
    assert (value.format, value.message, key.format) == ("protobuf", "acme.Order", "json")
    assert dict(w.typed.references) == {"value": (SchemaReference("a.proto", "a", 2),),
                                        "key": ()}
    with pytest.raises(InvalidOptionError, match="valueSchemaReferences: expected a JSON "
                                                 "list"):
        parse_write_options({"path": "/o", "topic": "t", "valueFormat": "json",
                             "valueSchemaReferences": '{"name": 1}'})
    with pytest.raises(InvalidOptionError, match="valueMessage: names a Protobuf message"):
        parse_write_options({"path": "/o", "topic": "t", "valueFormat": "json",
                             "valueMessage": "a.B"})
    with pytest.raises(InvalidOptionError, match="keySchemaReferences: needs keyFormat"):
        parse_write_options({"path": "/o", "topic": "t", "valueFormat": "json",
                             "keySchemaReferences": "[]"})
