"""Hypothesis-generated JSON Schemas (nested objects, arrays, integer/number/boolean/string,
date-time and date formats, null unions as type lists and oneOf, $ref to definitions) with
random instances (checked by ``jsonschema``), serialized by ``json`` (compact or indented),
decoded by ours and compared with from_json's rules applied to Python's parse."""
from __future__ import annotations

import json
import random

import jsonschema
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafkalog.typed.jsonschema import JsonSchemaDecoder
from tests.typed.test_jsonschema import expected

LEAVES = [{"type": "integer"}, {"type": "number"}, {"type": "boolean"}, {"type": "string"},
          {"type": "string", "format": "date-time"}, {"type": "string", "format": "date"},
          {"type": ["integer", "number"]}, {"enum": ["A", "B"]}]


def schemas(depth=0):
    leaf = st.sampled_from(LEAVES).map(dict)
    if depth >= 2:
        return leaf
    obj = st.dictionaries(st.text("abcxyz_", min_size=1, max_size=6), schemas(depth + 1),
                          min_size=1, max_size=5).map(
        lambda props: {"type": "object", "properties": props})
    arr = schemas(depth + 1).map(lambda items: {"type": "array", "items": items})
    base = st.one_of(leaf, obj, arr)
    return st.tuples(base, st.sampled_from(["plain", "list", "oneOf"])).map(_nullable)


def _nullable(args):
    node, how = args
    if how == "list" and isinstance(node.get("type"), str):
        return {**node, "type": ["null", node["type"]]}
    if how == "oneOf":
        return {"oneOf": [{"type": "null"}, node]}
    return node


def instance(schema, rng):
    if "oneOf" in schema:
        return None if rng.random() < 0.3 else instance(schema["oneOf"][1], rng)
    t = schema.get("type", "string")
    if isinstance(t, list):
        if "null" in t and rng.random() < 0.3:
            return None
        t = rng.choice([x for x in t if x != "null"])
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if t == "object":
        return {k: instance(v, rng) for k, v in schema["properties"].items()
                if rng.random() < 0.8}
    if t == "array":
        return [instance(schema["items"], rng) for _ in range(rng.randint(0, 3))]
    if t == "integer":
        return rng.choice([0, -1, 2**63 - 1, -2**63, rng.randint(-10**6, 10**6)])
    if t == "number":
        return rng.choice([0.0, -1.5, 1e300, 2.5e-300, rng.uniform(-1e6, 1e6)])
    if t == "boolean":
        return rng.random() < 0.5
    if schema.get("format") == "date-time":
        return rng.choice(["2024-02-29T23:59:59Z", "1970-01-01T00:00:00.000001+14:00",
                           "2001-09-09T01:46:40.5-07:00"])
    if schema.get("format") == "date":
        return rng.choice(["2024-02-29", "0001-01-01", "9999-12-31"])
    return rng.choice(["", "x", "é\n\"\\", "日本", "\u0000"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=st.dictionaries(st.text("pqr", min_size=1, max_size=4), schemas(),
                              min_size=1, max_size=6).map(
    lambda p: {"type": "object", "properties": p}), seed=st.integers(0, 2**32))
def test_random_schemas_and_instances(schema, seed):
    rng = random.Random(seed)
    docs = [instance(schema, rng) for _ in range(30)]
    for d in docs:
        jsonschema.validate(d, schema)
    text = json.dumps(schema)
    dec = JsonSchemaDecoder(text, {2: text})
    payloads = [b"\0\0\0\0\x02" + json.dumps(d, indent=rng.choice([None, 2])).encode()
                for d in docs]
    res = dec.decode(pa.array(payloads, pa.binary()))
    res.array.validate(full=True)
    assert res.array.to_pylist() == [expected(schema, d) for d in docs]
