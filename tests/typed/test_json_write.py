"""JsonSchemaEncoder against outside oracles: every value we write is valid for ``jsonschema``
and read by confluent-kafka's JSONDeserializer (``mock://`` registry: its framing, its id,
its own validation) as the document the row means; bad rows and schemas the writer cannot
check are refused naming the row and field. No Spark."""
from __future__ import annotations

import datetime as dt
import json
import math
import random
import warnings

import jsonschema
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed.json_write import JsonSchemaEncoder
from spark_kafkalog.typed.jsonschema import JsonSchemaDecoder, json_arrow_type
from tests.typed.test_jsonschema import expected
from tests.typed.test_jsonschema_hypothesis import instance
from tests.typed.test_jsonschema_hypothesis import schemas as hyp_schemas

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "required": ["id", "at"],
    "properties": {
        "id": {"type": "integer", "minimum": 0},
        "price": {"type": "number", "exclusiveMaximum": 1e9},
        "paid": {"type": "boolean"},
        "note": {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 40}]},
        "state": {"enum": ["NEW", "PAID"]},
        "sku": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$"},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": ["string", "null"], "format": "date"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "ship": {"$ref": "#/definitions/Address"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
    },
    "definitions": {
        "Address": {"type": "object", "required": ["city"],
                    "properties": {"city": {"type": "string", "minLength": 1},
                                   "zip": {"type": "string"}}},
        "Line": {"type": "object", "properties": {"n": {"type": "integer"},
                                                  "w": {"type": "number"}}},
    },
}
TEXT = json.dumps(ORDER)
UTC = dt.timezone.utc


def _row(rng, i):
    return {
        "id": i if i % 7 else (1 << 63) - 1,
        "price": rng.choice([None, 0.1, -0.0, 1e-7, 123456.789, 5e300 / 1e292, -2.5]),
        "paid": rng.choice([None, True, False]),
        "note": rng.choice([None, "", 'say "hi"\\', "tab\there\nnl\x01", "é日本🎉"]),
        "state": rng.choice([None, "NEW", "PAID"]),
        "sku": rng.choice([None, "AB-1", "ZZ-0042"]),
        "at": dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(
            microseconds=rng.randint(-10**15, 10**15)),
        "day": rng.choice([None, dt.date(1969, 12, 31), dt.date(2024, 2, 29)]),
        "tags": rng.choice([None, [], ["a"], ["x", "", "\\"]]),
        "ship": rng.choice([None, {"city": "Y", "zip": None}, {"city": "Ø", "zip": "1"}]),
        "lines": rng.choice([None, [], [{"n": 1, "w": None}, {"n": None, "w": 0.5}]]),
    }


def _doc(value):
    """What a row means as a JSON document: null properties left out, times as the reader
    decodes them (RFC 3339 UTC, dates YYYY-MM-DD)."""
    if isinstance(value, dict):
        return {k: _doc(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_doc(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


@pytest.fixture()
def confluent(request):
    with warnings.catch_warnings(record=True):
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
        from confluent_kafka.schema_registry.json_schema import JSONDeserializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        client = SchemaRegistryClient.new_client({"url": f"mock://{request.node.name}"})
    sid = client.register_schema("orders-value", Schema(TEXT, "JSON"))
    de = JSONDeserializer(TEXT, schema_registry_client=client)
    return sid, de, SerializationContext("orders", MessageField.VALUE)


def test_values_validate_and_confluent_reads_them(confluent):
    sid, de, ctx = confluent
    rng = random.Random(38)
    rows = [_row(rng, i) for i in range(300)]
    t = json_arrow_type(TEXT)
    arr = pa.array(rows + [None], t)
    out = JsonSchemaEncoder(TEXT, t, sid).encode(arr)
    out.validate(full=True)
    values = out.to_pylist()
    assert values[-1] is None
    for row, v in zip(rows, values):
        assert v[:5] == b"\x00" + sid.to_bytes(4, "big")
        doc = json.loads(v[5:].decode("utf-8"))
        jsonschema.validate(doc, ORDER, format_checker=jsonschema.FormatChecker())
        assert doc == _doc(row)
        assert de(v, ctx) == doc
    # numbers are exact (doc == _doc(row) above); -0.0 keeps its sign
    zeros = [json.loads(v[5:])["price"] for r, v in zip(rows, values)
             if r["price"] == 0 and math.copysign(1, r["price"]) < 0]
    assert zeros and all(math.copysign(1, p) < 0 for p in zeros)
    # and our reader reads the rows back (an extra, not the oracle)
    assert JsonSchemaDecoder(TEXT, {sid: TEXT}).decode(out).array.to_pylist() == \
        arr.to_pylist()


def test_bare_json_and_sliced_input():
    t = pa.struct([("id", pa.int64()), ("at", pa.timestamp("ns", tz="UTC"))])
    arr = pa.array([{"id": i, "at": dt.datetime(2020, 1, 1, tzinfo=UTC)} for i in range(5)], t)
    enc = JsonSchemaEncoder(TEXT, t)
    got = enc.encode(arr.slice(2)).to_pylist()
    assert [json.loads(v) for v in got] == [
        {"id": i, "at": "2020-01-01T00:00:00.000000000Z"} for i in range(2, 5)]


@pytest.mark.parametrize("field, value, words", [
    ("id", -1, "row 12: value.id value is outside minimum 0"),
    ("id", None, "row 12: value.id is null, but property 'id' is required"),
    ("price", 1e9, "row 12: value.price value is outside exclusiveMaximum"),
    ("price", float("nan"), "row 12: value.price is not a finite number"),
    ("note", "x" * 41, "row 12: value.note has a length outside maxLength 40"),
    ("state", "LOST", "row 12: value.state value 'LOST' is not one of"),
    ("sku", "ab-1", "row 12: value.sku does not match pattern"),
    ("tags", ["a"] * 6, "row 12: value.tags has a length outside maxItems 5"),
    ("tags", ["a", None], "row 12: value.tags holds a null element"),
    ("ship", {"city": "", "zip": None}, "row 12: value.ship.city has a length outside "
                                        "minLength 1"),
    ("ship", {"city": None, "zip": "1"}, "row 12: value.ship.city is null, but property "
                                         "'city' is required"),
])
def test_bad_row_names_row_and_field(field, value, words):
    t = json_arrow_type(TEXT)
    good = {"id": 1, "at": dt.datetime(2020, 1, 1, tzinfo=UTC)}
    enc = JsonSchemaEncoder(TEXT, t, 1)
    enc.encode(pa.array([good], t))
    with pytest.raises(BadRowError) as e:
        enc.encode(pa.array([good, good, dict(good, **{field: value})], t), first_row=10)
    assert words in str(e.value)
    # jsonschema agrees the document is invalid
    doc = _doc(dict(good, **{field: value}))
    doc["at"] = "2020-01-01T00:00:00Z"
    if not (isinstance(value, float) and math.isnan(value)) and value is not None and \
            not (field == "ship" and value["city"] is None) and not (
                field == "tags" and None in value):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, ORDER)


@pytest.mark.parametrize("schema, t, words", [
    (ORDER, pa.struct([("id", pa.int64()), ("at", pa.timestamp("us", tz="UTC")),
                       ("extra", pa.int64())]), "value: field 'extra' of the struct is not a "
                                                "property"),
    (ORDER, pa.struct([("id", pa.int64())]), "value: the JSON Schema requires property "
                                             "'at'"),
    (ORDER, pa.struct([("id", pa.float64()), ("at", pa.timestamp("us", tz="UTC"))]),
     "value.id: Arrow type double cannot be written as JSON Schema integer"),
    (ORDER, pa.struct([("id", pa.int64()), ("at", pa.string())]),
     "value.at: Arrow type string cannot be written as JSON Schema string (format "
     "date-time)"),
    ({"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}},
     pa.struct([("n", pa.int64())]), "value.n: keyword 'multipleOf' cannot be checked"),
])
def test_schema_the_struct_cannot_take_refused_up_front(schema, t, words):
    with pytest.raises(SchemaError) as e:
        JsonSchemaEncoder(json.dumps(schema), t, 1)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_ref_into_a_referenced_document():
    addr = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}})
    main = json.dumps({"type": "object", "properties": {"ship": {"$ref": "addr.json"}}})
    t = json_arrow_type(main, {"addr.json": addr})
    out = JsonSchemaEncoder(main, t, None, named_types={"addr.json": addr}).encode(
        pa.array([{"ship": {"city": "X"}}], t))
    assert json.loads(out[0].as_py()) == {"ship": {"city": "X"}}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=st.dictionaries(st.text("pqr", min_size=1, max_size=4), hyp_schemas(),
                              min_size=1, max_size=6).map(
    lambda p: {"type": "object", "properties": p}), seed=st.integers(0, 2**32))
def test_random_schemas_written_validated_and_parsed(schema, seed):
    # hypothesis-generated schemas (test_jsonschema_hypothesis's): nested objects, arrays,
    # every leaf type and format, null unions; from_json's rows of random instances are
    # written by us, validated by jsonschema and parsed back by Python's json
    rng = random.Random(seed)
    text = json.dumps(schema)
    t = json_arrow_type(text)
    rows = [expected(schema, instance(schema, rng)) for _ in range(30)]
    out = JsonSchemaEncoder(text, t, 2).encode(pa.array(rows, t))
    out.validate(full=True)
    for row, v in zip(rows, out.to_pylist()):
        doc = json.loads(v[5:].decode("utf-8"))
        jsonschema.validate(doc, schema, format_checker=jsonschema.FormatChecker())
        assert expected(schema, doc) == row
