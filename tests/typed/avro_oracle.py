"""Test helpers: Avro data encoded and read back by fastavro (the oracle), and the value
Spark's ``from_avro`` gives for what fastavro reads (its Arrow ``to_pylist`` form).

Nothing here uses spark_kafkalog: the expected values come from fastavro's reading of the
bytes and the Spark type rules (SchemaConverters) written out once, independently."""
from __future__ import annotations

import datetime
import io
import json
import struct
import uuid

import fastavro
import pyarrow as pa
from fastavro.schema import expand_schema


def encode(schema, records, schema_id=None) -> list[bytes]:
    """fastavro's ``schemaless_writer`` bytes of each record; framed as Confluent's
    serializers frame them (magic 0, 4-byte big-endian id) when ``schema_id`` is given."""
    parsed = fastavro.parse_schema(schema)
    out = []
    for rec in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, rec)
        frame = b"" if schema_id is None else b"\x00" + struct.pack(">I", schema_id)
        out.append(frame + buf.getvalue())
    return out


def oracle_read(writer, payload: bytes, reader=None):
    """fastavro's ``schemaless_reader`` of an unframed payload (``reader``: resolution)."""
    w = fastavro.parse_schema(writer)
    r = fastavro.parse_schema(reader) if reader is not None else None
    buf = io.BytesIO(payload)
    value = fastavro.schemaless_reader(buf, w, r, return_named_type=True)
    assert buf.tell() == len(payload), "fastavro left bytes unread"
    return value


def binary(values) -> pa.Array:
    return pa.array(values, type=pa.binary())


def spark_value(schema, value):
    """What Spark's ``from_avro`` makes of fastavro's ``value`` read with reader ``schema``
    (JSON), in pyarrow's ``to_pylist`` form."""
    return _expect(expand_schema(fastavro.parse_schema(schema)), value)


def _logical(s: dict, v):
    lt, t = s.get("logicalType"), s["type"]
    if lt == "decimal" and t in ("bytes", "fixed"):
        return v
    if lt == "time-millis" and t == "int":
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
    if lt == "time-micros" and t == "long":
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    if lt == "uuid":
        if t == "string":
            return str(v)
        return v.bytes if isinstance(v, uuid.UUID) else v
    if lt in ("timestamp-millis", "timestamp-micros") and t == "long":
        return v if isinstance(v, datetime.datetime) else _from_epoch(v, lt, True)
    if lt in ("local-timestamp-millis", "local-timestamp-micros") and t == "long":
        return v if isinstance(v, datetime.datetime) else _from_epoch(v, lt, False)
    return v


def _from_epoch(v, lt, utc):
    us = v * 1000 if lt.endswith("millis") else v
    base = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc if utc else None)
    return base + datetime.timedelta(microseconds=us)


def _non_null(branches):
    return [b for b in branches if _type(b) != "null"]


def _type(s):
    return s if isinstance(s, str) else (s["type"] if isinstance(s, dict) else "union")


def _branch_of(branches, v):
    """The reader branch fastavro's value came from (named types: fastavro's tuple)."""
    if isinstance(v, tuple):
        name, inner = v
        for i, b in enumerate(branches):
            if isinstance(b, dict) and b.get("name") == name:
                return i, inner
        raise AssertionError(f"no branch named {name}")
    kinds = {bool: ("boolean",), int: ("int", "long"), float: ("float", "double"),
             str: ("string",), bytes: ("bytes", "fixed"), list: ("array",), dict: ("map",)}
    for i, b in enumerate(branches):
        if _type(b) in kinds.get(type(v), ()) and not (isinstance(b, dict) and b.get("logicalType")):
            return i, v
    for i, b in enumerate(branches):
        if isinstance(b, dict) and b.get("logicalType"):
            return i, v
    raise AssertionError(f"no branch for {v!r}")


def _expect(s, v):
    if isinstance(s, list):
        rest = _non_null(s)
        if v is None:
            return None
        kinds = sorted(_type(b) for b in rest)
        if len(rest) == 1:
            return _expect(rest[0], v[1] if isinstance(v, tuple) else v)
        if kinds in (["int", "long"], ["double", "float"]):
            return v
        k, inner = _branch_of(rest, v)
        out = {f"member{i}": None for i in range(len(rest))}
        out[f"member{k}"] = _expect(rest[k], inner)
        return out
    if isinstance(v, tuple):        # a named type outside a union: fastavro's tuple form
        v = v[1]
    if isinstance(s, str):
        return _expect({"type": s}, v)
    t = s["type"]
    if isinstance(t, (dict, list)):
        return _expect(t, v)
    if "logicalType" in s:
        v = _logical(s, v)
    if t in ("record", "error"):
        return {f["name"]: _expect(f["type"], v[f["name"]]) for f in s["fields"]}
    if t == "array":
        return [_expect(s["items"], x) for x in v]
    if t == "map":
        return [(k, _expect(s["values"], x)) for k, x in v.items()]
    if t == "null":
        return None
    if t in ("float", "double") and isinstance(v, int) and not isinstance(v, bool):
        v = float(v)                # the avro package leaves a promoted int as it was
    if t == "float" and isinstance(v, float):
        # Spark's FloatType: a promoted long/int is a float32 (fastavro keeps a double)
        return struct.unpack("<f", struct.pack("<f", v))[0]
    return v


def dumps(schema) -> str:
    return json.dumps(schema)
