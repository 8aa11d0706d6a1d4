"""Encoding Arrow columns as JSON Schema values (the write side of issue 38, item 6).

:class:`JsonSchemaEncoder` writes each row of a struct column as one JSON object, framed as
Confluent's JSON Schema serializer frames it (magic 0, the 4-byte big-endian id, then the
UTF-8 JSON text; no message indexes) or bare, after checking it against the schema.
Columnar: Arrow compute builds the text of a whole field at once (strings escaped, numbers
in their shortest round-trip form, ``date-time`` as RFC 3339 UTC with ``Z`` and ``date``
as ``YYYY-MM-DD``, as the reader decodes them), and checks every keyword it supports for
the whole column; no Python object per record.

The schema is resolved as the reader resolves it (``typed/jsonschema.py``: ``$ref`` within
the document or into referenced ones, a nullable ``oneOf``/``anyOf``/type list, one
``allOf``), and the struct must take the reader's type of it: properties by name (a struct
field the schema lacks, or a ``required`` property the struct lacks, is refused before any
row is encoded). A null property is left out of the object. Checked per row, refusing the
first bad row with its field: ``required``, ``enum``, ``const``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``, ``pattern`` (RE2,
which agrees with ECMA 262 on common patterns), ``minItems``, ``maxItems``, null list
elements, non-finite numbers. A schema using any other validation keyword (``multipleOf``,
``uniqueItems``, ``if``, ``not``, ``patternProperties``, ...) is refused, as it cannot be
checked here.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed.jsonschema import _Converter, json_arrow_type

__all__ = ["JsonSchemaEncoder"]

#: keywords that only annotate, or that the walk below applies
_KNOWN = {"$schema", "$id", "id", "$ref", "$defs", "definitions", "$comment", "title",
          "description", "default", "examples", "readOnly", "writeOnly", "deprecated",
          "type", "properties", "required", "items", "enum", "const", "minimum", "maximum",
          "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
          "minItems", "maxItems", "format", "additionalProperties", "oneOf", "anyOf",
          "allOf", "nullable", "contentEncoding", "contentMediaType", "$anchor"}
_S = pa.string()


def _s(text: str) -> pa.Scalar:
    return pa.scalar(text, _S)


def _join(*parts) -> pa.Array:
    return pc.binary_join_element_wise(*parts, _s(""))


def _valid(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.is_valid(), dtype=bool)


def _escape(arr: pa.Array) -> pa.Array:
    """JSON string literals of ``arr`` (strings): quotes, backslashes and control
    characters escaped."""
    arr = pc.replace_substring(arr, "\\", "\\\\")
    arr = pc.replace_substring(arr, '"', '\\"')
    if pc.any(pc.match_substring_regex(arr, "[\\x00-\\x1f]")).as_py():
        for c in range(32):
            arr = pc.replace_substring(arr, chr(c), f"\\u{c:04x}")
    return _join(_s('"'), arr, _s('"'))


class JsonSchemaEncoder:
    """Encodes arrays of one struct type as JSON values of one JSON Schema (text).
    ``named_types``: referenced documents by ``$ref`` name; ``schema_id`` None: bare JSON.
    The type is matched now: a struct that does not fit raises SchemaError."""

    def __init__(self, schema: str, arrow_type: pa.DataType, schema_id: int | None = None,
                 column: str = "value", named_types: Mapping[str, str] | None = None):
        self.conv = _Converter(schema, dict(named_types or {}))
        json_arrow_type(schema, named_types)           # what the reader can type
        self.arrow_type = arrow_type
        self.column = column
        self.prefix = b"" if schema_id is None else \
            b"\x00" + int(schema_id).to_bytes(4, "big")
        self._first = 0
        if not pa.types.is_struct(arrow_type):
            raise SchemaError(f"{column}: a JSON Schema column is a struct, not {arrow_type}")
        self.encode(pa.array([], arrow_type))

    def encode(self, values, first_row: int = 0) -> pa.BinaryArray:
        """``values`` as framed JSON, null rows null; a row that fails the schema raises
        BadRowError naming its row (counted from ``first_row``) and field."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type != self.arrow_type:
            raise SchemaError(f"{self.column}: type {values.type} is not the "
                              f"{self.arrow_type} the encoder was built for")
        self._first = first_row
        valid = _valid(values)
        text = self._value(self.conv.docs[""], "", values, valid, self.column)
        out = text.cast(pa.binary())
        if self.prefix:
            out = pc.binary_join_element_wise(pa.scalar(self.prefix, pa.binary()), out,
                                              pa.scalar(b"", pa.binary()))
        return pc.if_else(pa.array(valid, pa.bool_()), out, pa.scalar(None, pa.binary()))

    def _bad(self, rows: np.ndarray, what: str, path: str):
        row = int(np.flatnonzero(rows)[0]) + self._first
        raise BadRowError(f"row {row}: {path} {what}")

    # -- the schema node ------------------------------------------------------------------
    def _resolve(self, node, base: str, path: str, stack=()):
        """(node, its document, nullable) after $ref, one allOf and a nullable union."""
        nullable = False
        while True:
            if isinstance(node, dict) and "$ref" in node:
                node, base, key = self.conv.resolve(node["$ref"], base)
                if key in stack:
                    raise SchemaError(f"JSON Schema at {path} is recursive")
                stack += (key,)
                continue
            if not isinstance(node, dict):
                raise SchemaError(f"JSON Schema at {path}: {node!r} names no type")
            for key in ("oneOf", "anyOf"):
                if key in node:
                    rest = [b for b in node[key] if not (isinstance(b, dict)
                                                         and b.get("type") == "null")]
                    nullable |= len(rest) < len(node[key])
                    if len(rest) != 1:
                        raise SchemaError(f"JSON Schema at {path}: a {key} of several "
                                          "non-null schemas cannot be checked by the writer")
                    self._keywords(node, path, skip={key})
                    node = rest[0]
                    break
            else:
                if "allOf" in node:
                    self._keywords(node, path, skip={"allOf"})
                    node = node["allOf"][0]
                    continue
                break
        types = node.get("type")
        if isinstance(types, list):
            nullable |= "null" in types
        self._keywords(node, path)
        return node, base, nullable

    @staticmethod
    def _keywords(node: dict, path: str, skip=()):
        for k in node:
            if k not in _KNOWN and k not in skip and not k.startswith(("connect.", "x-")):
                raise SchemaError(f"JSON Schema at {path}: keyword {k!r} cannot be checked "
                                  "by the writer; drop it or write the column as binary")
        if isinstance(node.get("additionalProperties"), dict):
            raise SchemaError(f"JSON Schema at {path}: additionalProperties as a schema "
                              "cannot be checked by the writer")

    @staticmethod
    def _kind(node: dict, path: str) -> str:
        t = node.get("type")
        if isinstance(t, list):
            kinds = [k for k in t if k != "null"]
            t = "number" if set(kinds) == {"integer", "number"} else \
                (kinds[0] if len(kinds) == 1 else None)
        if t is None:
            if "properties" in node:
                return "object"
            if "items" in node:
                return "array"
            vals = node.get("enum", [node.get("const")] if "const" in node else None)
            if vals:
                if all(isinstance(v, str) for v in vals):
                    return "string"
                if all(isinstance(v, bool) for v in vals):
                    return "boolean"
                return "number"
            raise SchemaError(f"JSON Schema at {path} has no type")
        return t

    # -- values ---------------------------------------------------------------------------
    def _value(self, node, base, arr: pa.Array, live: np.ndarray, path: str) -> pa.Array:
        """Each row's JSON text, null where ``arr`` is (rows outside ``live`` are not
        meaningful)."""
        text = self._text(node, base, arr, live, path)
        if arr.null_count:
            text = pc.if_else(arr.is_valid(), text, pa.scalar(None, _S))
        return text

    def _text(self, node, base, arr: pa.Array, live: np.ndarray, path: str) -> pa.Array:
        node, base, nullable = self._resolve(node, base, path)
        kind = self._kind(node, path)
        at = arr.type

        def refuse():
            fmt = f" (format {node['format']})" if "format" in node else ""
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as JSON Schema "
                              f"{kind}{fmt}")

        valid = _valid(arr) & live
        if kind == "object":
            if not pa.types.is_struct(at):
                refuse()
            return self._object(node, base, arr, valid, path)
        if kind == "array":
            if pa.types.is_large_list(at):
                arr, at = arr.cast(pa.list_(at.value_field)), pa.list_(at.value_field)
            if not pa.types.is_list(at) or not isinstance(node.get("items"), dict):
                refuse()
            return self._array(node, base, arr, valid, path)
        if kind == "string":
            fmt = node.get("format")
            if fmt == "date-time" and pa.types.is_timestamp(at):
                text = pc.strftime(arr.cast(pa.timestamp(at.unit, tz="UTC")),
                                   format="%Y-%m-%dT%H:%M:%S")
                return _join(_s('"'), text, _s('Z"'))
            if fmt == "date" and pa.types.is_date32(at):
                return _join(_s('"'), pc.strftime(arr, format="%Y-%m-%d"), _s('"'))
            if fmt in ("date-time", "date") or not (pa.types.is_string(at)
                                                     or pa.types.is_large_string(at)):
                refuse()
            arr = arr.cast(_S)
            self._string_checks(node, arr, valid, path)
            self._choices(node, arr, valid, path)
            return _escape(arr)
        if kind == "boolean":
            if not pa.types.is_boolean(at):
                refuse()
            self._choices(node, arr, valid, path)
            return pc.if_else(arr, _s("true"), _s("false"))
        if kind in ("integer", "number"):
            if not (pa.types.is_integer(at) or (kind == "number" and pa.types.is_floating(at))):
                refuse()
            if pa.types.is_floating(at):
                finite = np.asarray(pc.is_finite(arr).fill_null(True), dtype=bool)
                if (valid & ~finite).any():
                    self._bad(valid & ~finite, "is not a finite number (JSON has none)", path)
            self._number_checks(node, arr, valid, path)
            self._choices(node, arr, valid, path)
            text = arr.cast(_S)
            if pa.types.is_floating(at):
                # Arrow writes -0.0 as "-0", which JSON reads as the integer 0
                text = pc.if_else(pc.equal(text, _s("-0")), _s("-0.0"), text)
            return text
        raise SchemaError(f"JSON Schema at {path}: type {kind!r} has no Spark type")

    def _object(self, node, base, arr: pa.StructArray, valid: np.ndarray, path: str):
        props = node.get("properties") or {}
        at = arr.type
        names = [at.field(i).name for i in range(at.num_fields)]
        extra = [n for n in names if n not in props]
        if extra:
            raise SchemaError(f"{path}: field {extra[0]!r} of the struct is not a property of "
                              f"the JSON Schema object")
        required = node.get("required") or []
        missing = [r for r in required if r not in names]
        if missing:
            raise SchemaError(f"{path}: the JSON Schema requires property {missing[0]!r}, "
                              "which the struct lacks")
        pieces = []
        for i, name in enumerate(names):
            child = arr.field(i)
            cvalid = valid & _valid(child)
            if name in required and (valid & ~cvalid).any():
                self._bad(valid & ~cvalid, f"is null, but property {name!r} is required",
                          f"{path}.{name}")
            text = self._value(props[name], base, child, valid, f"{path}.{name}")
            key = _escape(pa.array([name], _S))[0].as_py()
            pieces.append(pc.if_else(pa.array(cvalid, pa.bool_()),
                                     _join(_s("," + key + ":"), text), _s("")))
        if not pieces:
            return pa.nulls(len(arr), _S).fill_null("{}")
        body = pc.utf8_slice_codeunits(_join(*pieces), 1)
        return _join(_s("{"), body, _s("}"))

    def _array(self, node, base, arr: pa.ListArray, valid: np.ndarray, path: str):
        offs = np.asarray(arr.offsets, dtype=np.int64)
        lens = offs[1:] - offs[:-1]
        for key, op in (("minItems", np.less), ("maxItems", np.greater)):
            if key in node and (valid & op(lens, node[key])).any():
                self._bad(valid & op(lens, node[key]), f"has a length outside {key} "
                          f"{node[key]}", path)
        values = arr.values
        live = np.zeros(len(values), dtype=bool)
        live[int(offs[0]):int(offs[-1])] = np.repeat(valid, lens)
        _, _, item_nullable = self._resolve(node["items"], base, f"{path}[]")
        nulls = live & ~_valid(values)
        if nulls.any() and not item_nullable:
            owner = np.repeat(np.arange(len(arr)), lens)
            row = int(owner[np.flatnonzero(nulls[int(offs[0]):int(offs[-1])])[0]])
            raise BadRowError(f"row {row + self._first}: {path} holds a null element, which "
                              "the items schema does not allow")
        text = self._value(node["items"], base, values, live, f"{path}[]").fill_null("null")
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offs, pa.int32()), text),
                                _s(","))
        return _join(_s("["), joined, _s("]"))

    # -- checks ---------------------------------------------------------------------------
    def _choices(self, node, arr, valid, path):
        vals = node.get("enum", [node["const"]] if "const" in node else None)
        if vals is None:
            return
        try:
            allowed = pa.array([v for v in vals if v is not None], arr.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            raise SchemaError(f"{path}: enum/const values {vals!r} are not of type "
                              f"{arr.type}") from None
        ok = np.asarray(pc.is_in(arr, value_set=allowed).fill_null(True), dtype=bool)
        if (valid & ~ok).any():
            bad = arr[int(np.flatnonzero(valid & ~ok)[0])].as_py()
            self._bad(valid & ~ok, f"value {bad!r} is not one of {vals!r}", path)

    def _string_checks(self, node, arr, valid, path):
        lens = np.asarray(pc.utf8_length(arr).fill_null(0), dtype=np.int64)
        for key, op in (("minLength", np.less), ("maxLength", np.greater)):
            if key in node and (valid & op(lens, node[key])).any():
                self._bad(valid & op(lens, node[key]), f"has a length outside {key} "
                          f"{node[key]}", path)
        if "pattern" in node:
            try:
                ok = pc.match_substring_regex(arr, node["pattern"])
            except pa.ArrowInvalid as err:
                raise SchemaError(f"{path}: pattern {node['pattern']!r} is not a regex the "
                                  f"writer can check: {err}") from err
            ok = np.asarray(ok.fill_null(True), dtype=bool)
            if (valid & ~ok).any():
                self._bad(valid & ~ok, f"does not match pattern {node['pattern']!r}", path)

    def _number_checks(self, node, arr, valid, path):
        num = arr.cast(pa.float64()) if pa.types.is_floating(arr.type) else arr
        checks = [("minimum", pc.less), ("maximum", pc.greater)]
        for key, op in (("exclusiveMinimum", pc.less_equal),
                        ("exclusiveMaximum", pc.greater_equal)):
            lim = node.get(key)
            if isinstance(lim, bool):      # draft 4: a flag on minimum / maximum
                if lim:
                    bound = "minimum" if key == "exclusiveMinimum" else "maximum"
                    checks = [(k, op if k == bound else o) for k, o in checks]
            elif lim is not None:
                checks.append((key, op))
        for key, op in checks:
            if key in node and not isinstance(node[key], bool):
                bad = np.asarray(op(num, pa.scalar(node[key])).fill_null(False), dtype=bool)
                if (valid & bad).any():
                    self._bad(valid & bad, f"value is outside {key} {node[key]}", path)
