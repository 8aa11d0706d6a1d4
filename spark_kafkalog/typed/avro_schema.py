"""Avro schemas: parsed from their JSON text, and the Arrow type Spark's ``from_avro`` gives them.

:func:`parse_schema` turns schema JSON (plus the schemas a registry entry references, by full
name) into a tree of :class:`Schema` nodes: names resolved to full names (namespaces as the
Avro specification says), named types shared by reference, logical types kept only where
they are valid (an invalid one is ignored, as Apache Avro's Java parser does). A recursive
schema is refused: Spark has no type for it. :func:`avro_arrow_type` is Spark's
``SchemaConverters.toSqlType`` rendered as the Arrow types Spark itself uses; the table is in
:mod:`spark_kafkalog.typed.avro`'s docstring.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping

import pyarrow as pa

from spark_kafkalog.errors import SchemaError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")
#: Spark's DecimalType cannot hold more digits than this
MAX_DECIMAL_PRECISION = 38


class Schema:
    """One node of a parsed Avro schema.

    ``type`` is a primitive name, ``record``, ``enum``, ``fixed``, ``array``, ``map`` or
    ``union``; ``logical`` a valid logical type name or None. Named types carry ``name`` (full
    name) and ``aliases`` (full names); records ``fields`` (a list of :class:`Field`); enums
    ``symbols`` and ``enum_default``; fixed ``size``; arrays ``items``; maps ``values``;
    unions ``branches``; decimals ``precision`` and ``scale``.
    """

    __slots__ = ("type", "logical", "name", "aliases", "fields", "symbols", "enum_default",
                 "size", "items", "values", "branches", "precision", "scale")

    def __init__(self, type_: str, **kw):
        self.type = type_
        for slot in self.__slots__[1:]:
            setattr(self, slot, kw.get(slot))

    def describe(self) -> str:
        """A short name for messages: the full name of a named type, else its type (with
        its logical type)."""
        if self.name:
            return self.name
        if self.type == "union":
            return "[" + ", ".join(b.describe() for b in self.branches) + "]"
        if self.type == "array":
            return f"array<{self.items.describe()}>"
        if self.type == "map":
            return f"map<{self.values.describe()}>"
        return f"{self.type}({self.logical})" if self.logical else self.type

    def __repr__(self) -> str:
        return f"Schema({self.describe()})"


class Field:
    """A record field: ``name``, ``schema``, ``aliases``, and ``default`` when
    ``has_default`` (the JSON value, ``None`` for a JSON null)."""

    __slots__ = ("name", "schema", "aliases", "has_default", "default")

    def __init__(self, name, schema, aliases, has_default, default):
        self.name = name
        self.schema = schema
        self.aliases = aliases
        self.has_default = has_default
        self.default = default


class _Parser:
    """Parses one schema; ``named_types`` (full name -> JSON) are parsed on first use."""

    def __init__(self, named_types: Mapping[str, str] | None):
        self.names: dict[str, Schema] = {}
        self.in_progress: set[str] = set()
        self.external = dict(named_types or {})

    def full_name(self, name: str, namespace: str | None) -> str:
        if "." in name or not namespace:
            return name
        return f"{namespace}.{name}"

    def lookup(self, name: str, namespace: str | None) -> Schema:
        candidates = [self.full_name(name, namespace)]
        if candidates[0] != name:
            candidates.append(name)
        for full in candidates:
            if full in self.in_progress:
                raise SchemaError(
                    f"recursive Avro schema: type {full} refers to itself; Spark has no type "
                    "for a recursive schema, so it cannot be decoded into columns")
            if full in self.names:
                return self.names[full]
        for full in candidates:
            if full in self.external:
                text = self.external.pop(full)
                try:
                    obj = json.loads(text) if isinstance(text, str) else text
                except ValueError as err:
                    raise SchemaError(f"referenced Avro schema {full} is not JSON: {err}") from err
                self.parse(obj, None)
                if full in self.names:
                    return self.names[full]
        raise SchemaError(f"Avro schema names an unknown type {name!r} "
                          f"(namespace {namespace or '(none)'})")

    def parse(self, obj, namespace: str | None) -> Schema:
        if isinstance(obj, str):
            if obj in PRIMITIVES:
                return Schema(obj)
            return self.lookup(obj, namespace)
        if isinstance(obj, list):
            branches = [self.parse(b, namespace) for b in obj]
            seen = set()
            for b in branches:
                key = b.name or b.type
                if b.type == "union":
                    raise SchemaError("an Avro union may not contain a union directly")
                if key in seen:
                    raise SchemaError(f"an Avro union holds {key} twice")
                seen.add(key)
            return Schema("union", branches=branches)
        if not isinstance(obj, dict) or "type" not in obj:
            raise SchemaError(f"not an Avro schema: {json.dumps(obj)[:200]}")
        t = obj["type"]
        if isinstance(t, (dict, list)):
            # {"type": {...}} is the inner schema (its attributes are the inner ones)
            return self.parse(t, namespace)
        if t in PRIMITIVES:
            return self._logical(Schema(t), obj)
        if t in NAMED:
            return self._named(t, obj, namespace)
        if t == "array":
            return Schema("array", items=self.parse(_need(obj, "items"), namespace))
        if t == "map":
            return Schema("map", values=self.parse(_need(obj, "values"), namespace))
        return self.lookup(t, namespace)

    def _named(self, t: str, obj: dict, namespace: str | None) -> Schema:
        name = _need(obj, "name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"an Avro {t} needs a name: {json.dumps(obj)[:200]}")
        ns = obj.get("namespace") if "." not in name else None
        if ns is None:
            ns = namespace
        full = name if "." in name else (f"{ns}.{name}" if ns else name)
        space = full.rsplit(".", 1)[0] if "." in full else None
        if full in self.names or full in self.in_progress:
            raise SchemaError(f"Avro type {full} is defined twice")
        aliases = [self.full_name(a, space) for a in obj.get("aliases") or []]
        if t == "fixed":
            size = _need(obj, "size")
            if not isinstance(size, int) or size < 0:
                raise SchemaError(f"Avro fixed {full} has a bad size {size!r}")
            node = self._logical(Schema("fixed", name=full, aliases=aliases, size=size), obj)
            self.names[full] = node
            return node
        if t == "enum":
            symbols = _need(obj, "symbols")
            if not isinstance(symbols, list) or len(set(symbols)) != len(symbols):
                raise SchemaError(f"Avro enum {full} needs distinct symbols")
            default = obj.get("default")
            if default is not None and default not in symbols:
                raise SchemaError(f"Avro enum {full}: default {default!r} is not a symbol")
            node = Schema("enum", name=full, aliases=aliases, symbols=list(symbols),
                          enum_default=default)
            self.names[full] = node
            return node
        self.in_progress.add(full)
        fields = []
        seen = set()
        for f in _need(obj, "fields"):
            fname = _need(f, "name")
            if fname in seen:
                raise SchemaError(f"Avro record {full} has field {fname} twice")
            seen.add(fname)
            fields.append(Field(fname, self.parse(_need(f, "type"), space),
                                list(f.get("aliases") or []), "default" in f, f.get("default")))
        self.in_progress.discard(full)
        node = Schema("record", name=full, aliases=aliases, fields=fields)
        self.names[full] = node
        return node

    @staticmethod
    def _logical(node: Schema, obj: dict) -> Schema:
        lt = obj.get("logicalType")
        t = node.type
        if lt == "decimal" and t in ("bytes", "fixed"):
            p, s = obj.get("precision"), obj.get("scale", 0)
            valid = (isinstance(p, int) and p > 0 and isinstance(s, int) and 0 <= s <= p
                     and (t == "bytes" or p <= _max_fixed_precision(node.size)))
            if valid:
                node.logical, node.precision, node.scale = "decimal", p, s
        elif (lt, t) in _LOGICAL_ON:
            node.logical = lt
        return node


_LOGICAL_ON = {
    ("date", "int"), ("time-millis", "int"), ("time-micros", "long"),
    ("timestamp-millis", "long"), ("timestamp-micros", "long"), ("timestamp-nanos", "long"),
    ("local-timestamp-millis", "long"), ("local-timestamp-micros", "long"),
    ("local-timestamp-nanos", "long"), ("uuid", "string"), ("uuid", "fixed"),
    ("duration", "fixed"),
}


def _max_fixed_precision(size: int) -> int:
    """Digits a fixed of ``size`` bytes holds (two's complement), as Avro's Java check."""
    if size <= 0:
        return 0
    return int(math.floor(math.log10(2) * (8 * size - 1)))


def _need(obj, key):
    if not isinstance(obj, dict) or key not in obj:
        raise SchemaError(f"Avro schema lacks {key!r}: {json.dumps(obj)[:200]}")
    return obj[key]


def parse_schema(text, named_types: Mapping[str, str] | None = None) -> Schema:
    """Parse Avro schema JSON (text, or the already-loaded JSON value) into a
    :class:`Schema`. ``named_types`` maps full names to the JSON of schemas it references
    (a registry entry's references). Raises :class:`~spark_kafkalog.errors.SchemaError` for
    a malformed, unknown-name or recursive schema."""
    if isinstance(text, Schema):
        return text
    if isinstance(text, (str, bytes)):
        try:
            obj = json.loads(text)
        except ValueError as err:
            # a bare primitive name is a schema too ("string"), though not JSON
            if isinstance(text, str) and text.strip() in PRIMITIVES:
                obj = text.strip()
            else:
                raise SchemaError(f"Avro schema is not JSON: {err}") from err
    else:
        obj = text
    return _Parser(named_types).parse(obj, None)


def non_null_branches(union: Schema) -> list[Schema]:
    return [b for b in union.branches if b.type != "null"]


def spark_shape(s: Schema) -> str:
    """How Spark folds a union: ``nullable`` ([null, T]), ``long``/``double`` (the merged
    [int, long] / [float, double]), ``members`` (a struct member0..), ``single`` (a
    one-branch union), ``null`` (only nulls)."""
    rest = non_null_branches(s)
    if not rest:
        return "null"
    if len(rest) == 1:
        return "nullable" if len(rest) < len(s.branches) else "single"
    kinds = {b.type for b in rest}
    if len(rest) == 2 and kinds == {"int", "long"}:
        return "long"
    if len(rest) == 2 and kinds == {"float", "double"}:
        return "double"
    return "members"


def avro_arrow_type(schema) -> pa.DataType:
    """The Arrow type of an Avro schema (text or :class:`Schema`), as Spark's ``from_avro``
    types it (``SchemaConverters.toSqlType``) and Spark's Arrow conversion renders it."""
    return _arrow(parse_schema(schema))[0]


def _arrow(s: Schema) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of ``s``."""
    t, lt = s.type, s.logical
    if t == "null":
        return pa.null(), True
    if t == "boolean":
        return pa.bool_(), False
    if t == "int":
        return (pa.date32() if lt == "date" else pa.int32()), False
    if t == "long":
        if lt in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("us", tz="UTC"), False
        if lt in ("local-timestamp-millis", "local-timestamp-micros"):
            return pa.timestamp("us"), False
        return pa.int64(), False
    if t == "float":
        return pa.float32(), False
    if t == "double":
        return pa.float64(), False
    if t in ("bytes", "fixed"):
        if lt == "decimal":
            if s.precision > MAX_DECIMAL_PRECISION:
                raise SchemaError(
                    f"Avro decimal({s.precision}, {s.scale}) in {s.describe()}: Spark's "
                    f"decimal holds at most {MAX_DECIMAL_PRECISION} digits")
            return pa.decimal128(s.precision, s.scale), False
        return pa.binary(), False
    if t in ("string", "enum"):
        return pa.string(), False
    if t == "record":
        fields = []
        for f in s.fields:
            ft, fn = _arrow(f.schema)
            fields.append(pa.field(f.name, ft, nullable=fn))
        return pa.struct(fields), False
    if t == "array":
        et, en = _arrow(s.items)
        return pa.list_(pa.field("element", et, nullable=en)), False
    if t == "map":
        vt, vn = _arrow(s.values)
        return pa.map_(pa.field("key", pa.string(), nullable=False),
                       pa.field("value", vt, nullable=vn)), False
    if t == "union":
        shape = spark_shape(s)
        rest = non_null_branches(s)
        nullable = len(rest) < len(s.branches)
        if shape == "null":
            return pa.null(), True
        if shape in ("nullable", "single"):
            return _arrow(rest[0])[0], nullable
        if shape == "long":
            return pa.int64(), nullable
        if shape == "double":
            return pa.float64(), nullable
        return pa.struct([pa.field(f"member{i}", _arrow(b)[0], nullable=True)
                          for i, b in enumerate(rest)]), nullable
    raise SchemaError(f"unsupported Avro type {t}")
