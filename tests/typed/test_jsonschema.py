"""JsonSchemaDecoder against outside oracles: values framed by confluent-kafka's
JSONSerializer (mock:// registry: ids, framing, and its jsonschema validation), checked with
the ``jsonschema`` package, and expected rows computed from Python's ``json`` parse of the
same payloads by from_json's rules (dates and RFC 3339 timestamps parsed by ``datetime``)."""
from __future__ import annotations

import datetime as dt
import json
import pickle
import random

import jsonschema
import pyarrow as pa
import pytest

from spark_kafkalog.errors import SchemaError, SchemaResolutionError, TypedRecordError
from spark_kafkalog.typed.jsonschema import JsonSchemaDecoder

ORDER = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "price": {"type": "number"},
        "paid": {"type": "boolean"},
        "note": {"type": ["null", "string"]},
        "state": {"enum": ["NEW", "PAID"]},
        "at": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "qty": {"oneOf": [{"type": "null"}, {"type": "integer"}]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ship": {"$ref": "#/definitions/Address"},
        "lines": {"type": "array", "items": {"$ref": "#/definitions/Line"}},
        "ratio": {"type": ["integer", "number"]},
    },
    "required": ["id"],
    "additionalProperties": True,
    "definitions": {
        "Address": {"type": "object", "properties": {"city": {"type": "string"},
                                                     "zip": {"type": "string"}}},
        "Line": {"type": "object", "properties": {"sku": {"type": "string"},
                                                  "n": {"type": "integer"}}},
    },
}


def _ts(s):
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(dt.timezone.utc)


def expected(schema, value, root=None):
    """from_json's row for ``value`` (parsed by Python's json) under ``schema``."""
    root = root or schema
    if value is None:
        return None
    if "$ref" in schema:
        node = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        return expected(node, value, root)
    if "oneOf" in schema:
        return expected([b for b in schema["oneOf"] if b.get("type") != "null"][0], value, root)
    t = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(t, list):
        t = "number" if "number" in t else [x for x in t if x != "null"][0]
    if t == "object":
        return {k: expected(v, value.get(k), root) for k, v in schema["properties"].items()}
    if t == "array":
        return [expected(schema["items"], x, root) for x in value]
    if t == "number":
        return float(value)
    if t == "string" and schema.get("format") == "date-time":
        return _ts(value)
    if t == "string" and schema.get("format") == "date":
        return dt.date.fromisoformat(value)
    return value


def _order(rng, i):
    v = {"id": rng.choice([0, -1, 2**63 - 1, -2**63, i])}
    if rng.random() < 0.8:
        v["price"] = rng.choice([0.0, -1.25, 1e300, rng.uniform(-1e6, 1e6), 3])
    if rng.random() < 0.8:
        v["paid"] = rng.random() < 0.5
    if rng.random() < 0.8:
        v["note"] = rng.choice([None, "", "line\nbreak", "é\"q\\", "日本"])
    if rng.random() < 0.8:
        v["state"] = rng.choice(["NEW", "PAID"])
    if rng.random() < 0.8:
        v["at"] = rng.choice(["2024-02-29T23:59:59Z", "1969-12-31T23:59:59.5+02:00",
                              "2030-01-01T00:00:00.123456-05:30"])
    if rng.random() < 0.8:
        v["day"] = rng.choice(["2024-02-29", "1900-01-01", "9999-12-31"])
    if rng.random() < 0.8:
        v["qty"] = rng.choice([None, 5])
    if rng.random() < 0.8:
        v["tags"] = [f"t{k}" for k in range(rng.randint(0, 3))]
    if rng.random() < 0.8:
        v["ship"] = {"city": "X"} if rng.random() < 0.5 else {"city": "Y", "zip": "1", "x": 1}
    if rng.random() < 0.8:
        v["lines"] = [{"sku": f"s{k}", "n": k} for k in range(rng.randint(0, 2))]
    if rng.random() < 0.8:
        v["ratio"] = rng.choice([1, 0.5])
    if rng.random() < 0.3:
        v["extra"] = {"ignored": [1, 2]}
    return v


@pytest.fixture()
def confluent():
    import warnings
    with warnings.catch_warnings(record=True):
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.json_schema import JSONSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext
        client = SchemaRegistryClient.new_client({"url": "mock://json-tests"})
    return client, JSONSerializer, SerializationContext("orders", MessageField.VALUE)


def test_types_from_confluent_serializer(confluent):
    client, Ser, ctx = confluent
    text = json.dumps(ORDER)
    ser = Ser(text, client)
    rng = random.Random(38)
    docs = [_order(rng, i) for i in range(400)]
    for d in docs:
        jsonschema.validate(d, ORDER)
    values = [ser(d, ctx) for d in docs]
    reg = client.get_latest_version("orders-value")
    dec = JsonSchemaDecoder(reg.schema.schema_str, {reg.schema_id: reg.schema.schema_str})
    assert dec.arrow_type == pa.struct([
        ("id", pa.int64()), ("price", pa.float64()), ("paid", pa.bool_()),
        ("note", pa.string()), ("state", pa.string()), ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()), ("qty", pa.int64()),
        ("tags", pa.list_(pa.field("element", pa.string()))),
        ("ship", pa.struct([("city", pa.string()), ("zip", pa.string())])),
        ("lines", pa.list_(pa.field("element", pa.struct([("sku", pa.string()),
                                                          ("n", pa.int64())])))),
        ("ratio", pa.float64())])
    res = dec.decode(pa.array(values, pa.binary()))
    res.array.validate(full=True)
    assert res.array.to_pylist() == [expected(ORDER, json.loads(v[5:])) for v in values]


def test_pretty_printed_and_unframed():
    dec = JsonSchemaDecoder(json.dumps(ORDER))
    rng = random.Random(2)
    docs = [_order(rng, i) for i in range(50)]
    payloads = [json.dumps(d, indent=2 if i % 2 else None).encode() for i, d in enumerate(docs)]
    payloads[3] = b"\r\n" + payloads[3] + b"\r\n"
    res = dec.decode(pa.array(payloads + [None]), framing="none")
    assert res.array.to_pylist() == [expected(ORDER, d) for d in docs] + [None]


BAD = [
    (b"{", "not valid JSON"),
    (b'{"id": "x"}', "not valid JSON for the schema"),
    (b'{"id": 1.5}', "not valid JSON for the schema"),
    (b'{"note": "raw\nnewline"}', "not valid JSON"),      # a control character in a string
    (b'{"note": "\xff\xfe"}', "not valid JSON"),
    (b'{"id": 1} {"id": 2}', "not valid JSON"),
    (b'{"id": 1}\n{"id": 2}', "not valid JSON"),
    (b'{"day": "2023-02-30"}', "not valid JSON for the schema"),
    (b'{"at": "2023-01-01T00:00:00"}', "not valid JSON for the schema"),  # no offset
    (b"", "not valid JSON"),
    (b"[1]", "not valid JSON"),
]


def test_bad_records_under_each_mode():
    text = json.dumps(ORDER)
    dec = JsonSchemaDecoder(text, {7: text})
    good = b"\0\0\0\0\x07" + b'{"id": 5}'
    framed = [(b"\0\0\0\0\x07" + p, m) for p, m in BAD] + [
        (b"", "empty value"), (b"\x01\0\0\0\x07{}", "magic byte 1"),
        (b"\0\0\0", "shorter than the 5-byte"), (b"\0\0\0\0\x08{}", "unknown schema id 8")]
    for p, m in framed:
        with pytest.raises(TypedRecordError, match=m) as ei:
            dec.decode(pa.array([good, p]))
        assert ei.value.row == 1
    values = pa.array([good] + [p for p, _ in framed] + [None, good])
    n = len(framed)
    res = dec.decode(values, on_error="null")
    res.array.validate(full=True)
    assert res.array.to_pylist() == [{**expected(ORDER, {"id": 5})}] + [None] * (n + 1) + \
        [expected(ORDER, {"id": 5})]
    errs = res.errors.to_pylist()
    assert errs[0] is None and errs[-1] is None and errs[-2] is None
    for (_, m), e in zip(framed, errs[1:]):
        assert m in e
    res = dec.decode(values, on_error="skip")
    assert res.kept.to_pylist() == [True] + [False] * n + [True, True]
    assert len(res.array) == 3
    # the oracle agrees these payloads are no valid instance
    for p, _ in BAD:
        try:
            jsonschema.validate(json.loads(p.decode("utf-8")), ORDER)
            valid = not (b"2023-02-30" in p or b"T00:00:00\"" in p)
        except (ValueError, jsonschema.ValidationError):
            valid = False
        assert not valid, p


def test_evolution_by_property_name():
    v1 = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}
    v2 = {"type": "object", "properties": {"a": {"type": "number"}, "c": {"type": "string"}}}
    dec = JsonSchemaDecoder(json.dumps(v2), {1: json.dumps(v1), 2: json.dumps(v2)})
    values = [b"\0\0\0\0\x01" + json.dumps({"a": 3, "b": "x"}).encode(),
              b"\0\0\0\0\x02" + json.dumps({"a": 2.5, "c": "y"}).encode()]
    assert dec.decode(pa.array(values)).array.to_pylist() == [
        {"a": 3.0, "c": None}, {"a": 2.5, "c": "y"}]
    bad = {"type": "object", "properties": {"a": {"type": "string"}}}
    with pytest.raises(SchemaResolutionError, match="writer schema id 3"):
        JsonSchemaDecoder(json.dumps(v2), {3: json.dumps(bad)})


def test_schema_refusals_and_references():
    rec = {"type": "object", "properties": {"next": {"$ref": "#"}}}
    with pytest.raises(SchemaError, match="recursive"):
        JsonSchemaDecoder(json.dumps(rec))
    with pytest.raises(SchemaError, match="without properties"):
        JsonSchemaDecoder(json.dumps({"type": "object",
                                      "additionalProperties": {"type": "integer"}}))
    with pytest.raises(SchemaError, match="union"):
        JsonSchemaDecoder(json.dumps({"type": ["string", "integer"]}))
    other = {"type": "object", "properties": {"city": {"type": "string"}}}
    main = {"type": "object", "properties": {"home": {"$ref": "address.json"}}}
    dec = JsonSchemaDecoder(json.dumps(main), named_types={"address.json": json.dumps(other)})
    assert dec.decode(pa.array([b'{"home": {"city": "Z"}}']), framing="none").array.to_pylist() \
        == [{"home": {"city": "Z"}}]
    # a schema that is not an object: the value itself
    arr = JsonSchemaDecoder(json.dumps({"type": "array", "items": {"type": "integer"}}))
    assert arr.decode(pa.array([b"[1, 2]", b"[]", b"null"]), framing="none").array.to_pylist() \
        == [[1, 2], [], None]


def test_pickles():
    dec = JsonSchemaDecoder(json.dumps(ORDER), {1: json.dumps(ORDER)})
    dec2 = pickle.loads(pickle.dumps(dec))
    v = pa.array([b"\0\0\0\0\x01" + b'{"id": 1}'])
    assert dec2.decode(v).array.equals(dec.decode(v).array)


def test_sliced_large_and_nullable_inputs():
    text = json.dumps(ORDER)
    dec = JsonSchemaDecoder(text, {1: text})
    rng = random.Random(4)
    vals = pa.array([b"\0\0\0\0\x01" + json.dumps(_order(rng, i), indent=i % 3).encode()
                     if i % 5 else None for i in range(40)])
    whole = dec.decode(vals).array
    assert whole.null_count == 8
    part = dec.decode(vals.slice(3, 20)).array
    assert part.to_pylist() == whole.slice(3, 20).to_pylist()
    assert dec.decode(vals.cast(pa.large_binary())).array.equals(whole)


def test_random_bytes_agree_with_json():
    """Hostile payloads: random bytes and valid documents with bytes flipped. Whatever
    Python's strict json refuses is a bad record here; whatever we accept equals the row
    from Python's parse."""
    dec = JsonSchemaDecoder(json.dumps(ORDER))
    rng = random.Random(2)
    seeds = [json.dumps(_order(rng, i), indent=rng.choice([None, 1])).encode()
             for i in range(50)]
    alphabet = b' {}[]",:0123456789.-eEtrufalsn\\\n\r\t\x00\xff'
    payloads = []
    for _ in range(4000):
        if rng.random() < 0.3:
            payloads.append(bytes(rng.randrange(256) for _ in range(rng.randint(0, 20))))
            continue
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 2)):
            b[rng.randrange(len(b))] = rng.choice(alphabet + bytes([rng.randrange(256)]))
        payloads.append(bytes(b))
    res = dec.decode(pa.array(payloads, pa.binary()), framing="none", on_error="null")
    res.array.validate(full=True)
    rows = res.array.to_pylist()
    errors = res.errors.to_pylist()
    for k, p in enumerate(payloads):
        try:
            doc = json.loads(p.decode("utf-8"))
        except ValueError:
            assert errors[k] is not None, p
            continue
        if errors[k] is None:
            assert rows[k] == expected(ORDER, doc), p
