"""Encoding Arrow columns as Avro values (the write side of issue 38).

:class:`AvroEncoder` matches an Avro writer schema to an Arrow type once, then encodes
any array of that type: Arrow compute normalises the leaves (integers, dates, times and
timestamps to int64 in the schema's unit, enum symbols to their index, decimals to the
schema's scale) and the compiled kernel (``_avro_encode.pyx``) writes the bytes, framed
with the registry's header (magic 0, 4-byte big-endian id) or bare. Fields are matched by
name, as Spark's ``to_avro`` matches them. :func:`avro_schema_of` derives the schema a
struct type registers as (Spark's ``to_avro`` names: ``topLevelRecord``, nested records
named by their field in the parent's namespace; a nullable type is a union with null
first and a null default, as Confluent's serializer writes optional fields).
"""
from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed import _avro_encode
from spark_kafkalog.typed.avro_schema import Schema, parse_schema, spark_shape

__all__ = ["AvroEncoder", "avro_schema_of", "confluent_header"]

#: Avro long logical types -> the Arrow timestamp/time unit their numbers count
_LONG_UNITS = {"timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns",
               "local-timestamp-millis": "ms", "local-timestamp-micros": "us",
               "local-timestamp-nanos": "ns", "time-micros": "us"}
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1000_000, "ns": 1000_000_000}


def confluent_header(schema_id: int) -> bytes:
    """The registry's framing: magic byte 0, then the schema id as a big-endian int."""
    return b"\x00" + struct.pack(">i", schema_id)


def _int64_in_unit(arr: pa.Array, unit: str) -> pa.Array:
    """Timestamps/times as int64 counts of ``unit`` (floor, as Spark's to_avro divides)."""
    src = arr.type.unit
    raw = arr.view(pa.int64()) if pa.types.is_timestamp(arr.type) or \
        pa.types.is_time64(arr.type) else pc.cast(arr.view(pa.int32()), pa.int64())
    num = np.asarray(raw.fill_null(0), dtype=np.int64)
    a, b = _PER_SECOND[unit], _PER_SECOND[src]
    num = num * (a // b) if a >= b else np.floor_divide(num, b // a)
    return pa.array(num, pa.int64(), mask=np.asarray(arr.is_null()) if arr.null_count
                    else None)


class AvroEncoder:
    """Encodes arrays of one Arrow type with one Avro schema (``schema``: JSON text).
    ``schema_id`` None: bare Avro (no framing)."""

    def __init__(self, schema: str, arrow_type: pa.DataType, schema_id: int | None = None,
                 column: str = "value", named_types=None):
        self.schema_text = schema
        self.schema = parse_schema(schema, named_types)
        self.arrow_type = arrow_type
        self.column = column
        self.prefix = b"" if schema_id is None else confluent_header(schema_id)
        # matched now (with an empty array) so a schema the type cannot take fails early
        self._node(self.schema, pa.array([], arrow_type), column)

    def encode(self, values, first_row: int = 0) -> pa.BinaryArray:
        """``values`` as Avro (framed), null rows null; a bad value raises BadRowError
        naming its row (counted from ``first_row``) and field."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type != self.arrow_type:
            raise SchemaError(f"{self.column}: type {values.type} is not the {self.arrow_type} "
                              f"the encoder was built for")
        top = self._node(self.schema, values, self.column)
        return _avro_encode.encode(top, len(values), self.prefix, first_row)

    # ---- matching the schema to the arrays --------------------------------------------

    def _node(self, s: Schema, arr: pa.Array, path: str, branch: int = -1):
        """``branch``: the union branch index a union member writes before its value."""
        null_branch, value_branch = -1, branch
        if s.type == "union":
            rest = [i for i, b in enumerate(s.branches) if b.type != "null"]
            nulls = [i for i, b in enumerate(s.branches) if b.type == "null"]
            if len(rest) > 1 and pa.types.is_struct(arr.type):
                return self._members(s, rest, nulls, arr, path)
            if len(rest) > 1 and spark_shape(s) in ("long", "double"):
                # Spark's one column for [int, long] / [float, double]: the wide branch
                rest = [i for i in rest if s.branches[i].type == spark_shape(s)]
            if not rest:
                return _avro_encode.Node("NULL", pa.nulls(len(arr)), path,
                                         nulls[0], -1)
            null_branch = nulls[0] if nulls else -1
            value_branch = rest[0]
            s = s.branches[rest[0]]
        # a null top-level row is not encoded at all (a tombstone): the kernel's row loop
        kind, arr, kids, width, precision = self._leaf(s, arr, path)
        return _avro_encode.Node(kind, arr, path, null_branch, value_branch, kids, width,
                                 precision)

    def _members(self, s: Schema, rest: list, nulls: list, arr: pa.Array, path: str):
        """A union of several types from Spark's struct of members (``member0``, ...,
        one per non-null branch, as ``from_avro`` reads it): the first member set."""
        at = arr.type
        if not pa.types.is_struct(at) or at.num_fields != len(rest):
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as Avro union "
                              f"{s.describe()} (expected a struct of {len(rest)} members)")
        kids = []
        for k, bi in enumerate(rest):
            kids.append(self._node(s.branches[bi], arr.field(k),
                                   f"{path}.{at.field(k).name}", branch=bi))
        return _avro_encode.Node("MEMBERS", arr, path, nulls[0] if nulls else -1, -1, kids)

    def _leaf(self, s: Schema, arr: pa.Array, path: str):
        t, at, lt = s.type, arr.type, s.logical

        def refuse(extra=""):
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as Avro "
                              f"{s.describe()}{extra}")

        if t == "null":
            if arr.null_count != len(arr):
                refuse()
            return "NULL", arr, (), 0, 0
        if t == "boolean":
            if not pa.types.is_boolean(at):
                refuse()
            return "BOOL", arr, (), 0, 0
        if t in ("int", "long"):
            unit = _LONG_UNITS.get(lt) if t == "long" else ("ms" if lt == "time-millis"
                                                            else None)
            if pa.types.is_timestamp(at) or pa.types.is_time(at):
                if unit is None:
                    refuse()
                arr = _int64_in_unit(arr, unit)
            elif pa.types.is_date32(at):
                if lt != "date" and t != "int":
                    refuse()
                arr = pc.cast(arr.view(pa.int32()), pa.int64())
            elif pa.types.is_integer(at):
                arr = pc.cast(arr, pa.int64())   # uint64 past 2^63 fails here (safe cast)
            else:
                refuse()
            return ("INT" if t == "int" else "LONG"), arr, (), 0, 0
        if t in ("float", "double"):
            want = pa.float32() if t == "float" else pa.float64()
            if not (pa.types.is_floating(at) or pa.types.is_integer(at)):
                refuse()
            if at != want:
                arr = pc.cast(arr, want, safe=False)
            return ("FLOAT" if t == "float" else "DOUBLE"), arr, (), 0, 0
        if t in ("bytes", "fixed") and lt == "decimal":
            if not pa.types.is_decimal(at) and not pa.types.is_integer(at):
                refuse()
            if at != pa.decimal128(38, s.scale):
                try:
                    arr = pc.cast(arr, pa.decimal128(38, s.scale))
                except pa.ArrowInvalid as err:
                    raise BadRowError(f"{path}: a value does not fit decimal({s.precision}, "
                                      f"{s.scale}): {err}") from err
            return ("DEC_BYTES" if t == "bytes" else "DEC_FIXED"), arr, (), s.size or 0, \
                s.precision
        if t in ("string", "bytes"):
            if pa.types.is_string(at) or pa.types.is_large_string(at) or \
                    pa.types.is_large_binary(at):
                arr = pc.cast(arr, pa.binary()) if t == "bytes" or not \
                    pa.types.is_string(at) else arr
            elif not pa.types.is_binary(at):
                refuse()
            return "BYTES", arr, (), 0, 0
        if t == "fixed":
            if pa.types.is_fixed_size_binary(at):
                if at.byte_width != s.size:
                    refuse(f" (size {s.size})")
                return "FIXED", arr, (), s.size, 0
            if pa.types.is_large_binary(at):
                arr, at = pc.cast(arr, pa.binary()), pa.binary()
            if not pa.types.is_binary(at):
                refuse()
            return "FIXED_BIN", arr, (), s.size, 0
        if t == "enum":
            if not (pa.types.is_string(at) or pa.types.is_large_string(at)):
                refuse()
            idx = pc.cast(pc.index_in(arr, value_set=pa.array(s.symbols, arr.type)),
                          pa.int64())
            # present but not a symbol: -1, which the kernel refuses naming the row
            idx = pc.if_else(pc.and_(arr.is_valid(), idx.is_null()), -1, idx)
            return "ENUM", idx, (), 0, 0
        if t == "record":
            if not pa.types.is_struct(at):
                refuse()
            names = [at.field(i).name for i in range(at.num_fields)]
            extra = [n for n in names if n not in {f.name for f in s.fields}]
            if extra:
                raise SchemaError(f"{path}: field {extra[0]!r} of the struct is not in Avro "
                                  f"record {s.name}")
            kids = []
            for f in s.fields:
                if f.name not in names:
                    raise SchemaError(f"{path}: Avro record {s.name} has field {f.name!r}, "
                                      f"which the struct lacks")
                kids.append(self._node(f.schema, arr.field(names.index(f.name)),
                                       f"{path}.{f.name}"))
            return "RECORD", arr, kids, 0, 0
        if t == "array":
            if pa.types.is_large_list(at):
                arr = pc.cast(arr, pa.list_(at.value_field))
            elif not pa.types.is_list(at):
                refuse()
            return "ARRAY", arr, [self._node(s.items, arr.values, f"{path}[]")], 0, 0
        if t == "map":
            if pa.types.is_map(at):
                keys, items = arr.values.field(0), arr.values.field(1)
            else:
                refuse()
            kid_key = self._node(Schema("string"), keys, f"{path}.key")
            return "MAP", arr, [kid_key, self._node(s.values, items, f"{path}.value")], 0, 0
        refuse()


# ---- the schema a struct registers as ------------------------------------------------------

def _avro_type(t: pa.DataType, name: str, namespace: str):
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "long" if t.bit_width == 64 else "int"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision,
                "scale": t.scale}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        lt = "timestamp-micros" if t.tz else "local-timestamp-micros"
        return {"type": "long", "logicalType": lt}
    if pa.types.is_struct(t):
        space = f"{namespace}.{name}" if namespace else name
        fields = [{"name": f.name, **_typed(f, f.name, space)} for f in t]
        out = {"type": "record", "name": name}
        if namespace:
            out["namespace"] = namespace
        out["fields"] = fields
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _nullable(t.value_field, name, namespace)}
    if pa.types.is_map(t):
        if not pa.types.is_string(t.key_type):
            raise SchemaError(f"{name}: an Avro map's keys are strings, not {t.key_type}")
        return {"type": "map", "values": _nullable(t.item_field, name, namespace)}
    raise SchemaError(f"{name}: no Avro type for Arrow {t}")


def _nullable(f: pa.Field, name: str, namespace: str):
    base = _avro_type(f.type, name, namespace)
    return ["null", base] if f.nullable else base


def _typed(f: pa.Field, name: str, namespace: str) -> dict:
    if f.nullable:
        return {"type": ["null", _avro_type(f.type, name, namespace)], "default": None}
    return {"type": _avro_type(f.type, name, namespace)}


def avro_schema_of(struct_type: pa.DataType, record_name: str = "topLevelRecord",
                   namespace: str = "") -> str:
    """The Avro schema (compact JSON) a struct type is written with when none is named."""
    if not pa.types.is_struct(struct_type):
        raise SchemaError(f"a typed column must be a struct, not {struct_type}")
    return json.dumps(_avro_type(struct_type, record_name, namespace),
                      separators=(",", ":"))
