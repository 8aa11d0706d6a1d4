"""JSON Schema values (schema-registry framed JSON text, or bare) decoded into one Arrow
column through Arrow's C++ JSON reader.

:class:`JsonSchemaDecoder` derives the column's type from the reader schema (the type Spark's
``from_json`` would be given for it) and checks every writer schema against it by property
name when it is built (:class:`~spark_kafkalog.errors.SchemaResolutionError` then).
:meth:`JsonSchemaDecoder.decode` strips the 5-byte framing (magic 0, 4-byte big-endian id;
JSON Schema values carry no message indexes) with Arrow compute, wraps each payload as one
line ``{"v": <payload>}`` and parses the batch with ``pyarrow.json.read_json`` under an
explicit schema: no Python object per record on the good path. A payload with raw newlines
(pretty-printed JSON) is checked to be valid JSON first — a raw newline is whitespace in
valid JSON, never part of a string — and then put on one line. Bad records are found by
bisecting the batch (the reader fails a whole batch at once).

Types:

===========================================  ==========================================
JSON Schema                                  Arrow
===========================================  ==========================================
object with properties                       struct (properties in schema order, by name;
                                             additionalProperties ignored)
array with items                             list<element>
integer / number / boolean                   int64 / float64 / bool
["integer", "number"]                        float64
string                                       string (also enum / const of strings)
string, format date-time                     timestamp[us, UTC] (RFC 3339, offset needed)
string, format date                          date32
["null", T], oneOf/anyOf [null, T]           T (every field is nullable, as from_json's)
$ref                                         the target, in this document or a
                                             referenced one (``named_types``)
===========================================  ==========================================

Refused with :class:`~spark_kafkalog.errors.SchemaError`: recursive schemas, objects without
properties (maps), unions of different non-null types, tuples (items as a list), allOf with
more than one schema.
"""
from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import (SchemaError, SchemaResolutionError, TypedRecordError)
from spark_kafkalog.typed.result import DecodeResult, binary_values, check_modes

__all__ = ["JsonSchemaDecoder", "DecodeResult", "json_arrow_type"]

_TS = pa.timestamp("us", tz="UTC")
_TS_NS = pa.timestamp("ns", tz="UTC")
_PREFIX = b'{"v":'
_SUFFIX = b"}\n"
_BLOCK = 1 << 20


class _Converter:
    """JSON Schema -> Arrow type, following ``$ref`` within its document or into the
    documents of ``named_types`` (name -> JSON text)."""

    def __init__(self, text: str, named: Mapping[str, str]):
        self.docs = {"": _load(text, "the schema")}
        self.named = dict(named)

    def doc(self, name: str):
        if name not in self.docs:
            if name not in self.named:
                raise SchemaError(f"JSON Schema $ref names {name!r}, which is neither in the "
                                  "document nor among its references")
            self.docs[name] = _load(self.named[name], f"reference {name!r}")
        return self.docs[name]

    def resolve(self, ref: str, base: str):
        name, _, frag = ref.partition("#")
        name = name or base
        node = self.doc(name)
        for part in [p for p in frag.split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            try:
                node = node[int(part)] if isinstance(node, list) else node[part]
            except (KeyError, IndexError, ValueError, TypeError):
                raise SchemaError(f"JSON Schema $ref {ref!r} points at nothing") from None
        return node, name, f"{name}#{frag}"

    def convert(self, node, base: str = "", stack: tuple = (), path: str = "$") -> pa.DataType:
        if isinstance(node, dict) and "$ref" in node:
            target, doc, key = self.resolve(node["$ref"], base)
            if key in stack:
                raise SchemaError(f"JSON Schema at {path} is recursive ($ref "
                                  f"{node['$ref']!r}): Spark has no type for it (recursive "
                                  "schemas are refused)")
            return self.convert(target, doc, stack + (key,), path)
        if not isinstance(node, dict):
            raise SchemaError(f"JSON Schema at {path}: {node!r} names no type")
        for key in ("oneOf", "anyOf"):
            if key in node:
                return self._union([b for b in node[key]], base, stack, path)
        if "allOf" in node:
            if len(node["allOf"]) != 1:
                raise SchemaError(f"JSON Schema at {path}: allOf of several schemas is not "
                                  "supported")
            return self.convert(node["allOf"][0], base, stack, path)
        types = node.get("type")
        if types is None:
            if "properties" in node:
                types = "object"
            elif "items" in node:
                types = "array"
            elif "enum" in node or "const" in node:
                vals = node.get("enum", [node.get("const")])
                types = _value_type(vals, path)
            else:
                raise SchemaError(f"JSON Schema at {path} has no type")
        if isinstance(types, list):
            kinds = [t for t in types if t != "null"]
            if set(kinds) == {"integer", "number"}:
                return pa.float64()
            if len(kinds) != 1:
                raise SchemaError(f"JSON Schema at {path}: a union of types {types} has no "
                                  "single Spark type")
            types = kinds[0]
        if types == "object":
            props = node.get("properties")
            if not props:
                raise SchemaError(f"JSON Schema at {path}: an object without properties (a "
                                  "map) is not supported")
            return pa.struct([pa.field(k, self.convert(v, base, stack, f"{path}.{k}"))
                              for k, v in props.items()])
        if types == "array":
            items = node.get("items")
            if not isinstance(items, dict):
                raise SchemaError(f"JSON Schema at {path}: an array needs one items schema")
            return pa.list_(pa.field("element", self.convert(items, base, stack,
                                                             f"{path}[]")))
        if types == "string":
            fmt = node.get("format")
            return _TS if fmt == "date-time" else pa.date32() if fmt == "date" else pa.string()
        simple = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
        if types in simple:
            return simple[types]
        raise SchemaError(f"JSON Schema at {path}: type {types!r} has no Spark type")

    def _union(self, branches, base, stack, path):
        kept = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")]
        got = [self.convert(b, base, stack, path) for b in kept]
        if got and all(t in (pa.int64(), pa.float64()) for t in got):
            return pa.float64() if pa.float64() in got else pa.int64()
        if len(got) == 1 or (got and all(t == got[0] for t in got)):
            return got[0]
        raise SchemaError(f"JSON Schema at {path}: a oneOf/anyOf of several types has no "
                          "single Spark type")


def _load(text: str, what: str):
    try:
        return json.loads(text)
    except ValueError as err:
        raise SchemaError(f"JSON Schema ({what}) is not JSON: {err}") from err


def _value_type(vals, path):
    if all(isinstance(v, str) for v in vals):
        return "string"
    if all(isinstance(v, bool) for v in vals):
        return "boolean"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return "integer"
    raise SchemaError(f"JSON Schema at {path}: enum/const of mixed values has no Spark type")


def json_arrow_type(schema: str, named_types: Mapping[str, str] | None = None) -> pa.DataType:
    """The Arrow type of values of JSON Schema ``schema`` (text)."""
    c = _Converter(schema, named_types or {})
    return c.convert(c.docs[""])


def _read_type(t: pa.DataType, ts=pa.string(), date=pa.string()) -> pa.DataType:
    """``t`` with its timestamp and date leaves replaced (strings: what the JSON reader
    reads them as before they are cast)."""
    if t == _TS:
        return ts
    if t == pa.date32():
        return date
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_read_type(f.type, ts, date)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_read_type(t.value_type, ts, date)))
    return t


def _compatible(reader: pa.DataType, writer: pa.DataType) -> bool:
    if reader == writer or (reader == pa.float64() and writer == pa.int64()):
        return True
    if pa.types.is_struct(reader) and pa.types.is_struct(writer):
        names = {f.name: f.type for f in writer}
        return all(_compatible(f.type, names[f.name]) for f in reader if f.name in names)
    if pa.types.is_list(reader) and pa.types.is_list(writer):
        return _compatible(reader.value_type, writer.value_type)
    return False


class JsonSchemaDecoder:
    """Decodes JSON values into one Arrow column of the reader schema's type.

    ``reader_schema`` is the JSON Schema text; ``writer_schemas`` maps schema-registry ids to
    the schemas of the values framed with them (each checked against the reader by
    property name); ``named_types`` maps ``$ref`` document names (registry references) to
    their text. ``message`` is accepted for the decoders' common signature and must be None.
    The decoder pickles as its arguments and holds no per-call state.
    """

    def __init__(self, reader_schema: str, writer_schemas: Mapping[int, str] | None = None,
                 named_types: Mapping[str, str] | None = None, message: str | None = None):
        if message is not None:
            raise SchemaError("JSON Schema values have no message to choose")
        self._args = (reader_schema, dict(writer_schemas or {}), dict(named_types or {}))
        self.arrow_type: pa.DataType = json_arrow_type(reader_schema, named_types)
        for sid, text in sorted((writer_schemas or {}).items()):
            wt = json_arrow_type(text, named_types)
            if not _compatible(self.arrow_type, wt):
                raise SchemaResolutionError(
                    f"writer schema id {sid} ({wt}) does not resolve to the reader schema "
                    f"({self.arrow_type}) by property name: a property changed type")
        self._ids = np.array(sorted(int(i) for i in (writer_schemas or {})), dtype=np.int64)
        self._read = pa.schema([pa.field("v", _read_type(self.arrow_type))])
        self._ns = _read_type(self.arrow_type, ts=_TS_NS, date=pa.date32())

    def __reduce__(self):
        return (JsonSchemaDecoder, self._args)

    def decode(self, values, framing: str = "confluent", on_error: str = "fail") -> DecodeResult:
        """Decode every value of ``values`` (binary array or ChunkedArray of one).
        ``framing="confluent"``: magic 0, a 4-byte big-endian id in ``writer_schemas``,
        then JSON text; ``"none"``: JSON text only."""
        mode = check_modes(framing, on_error)
        values = binary_values(values, "JSON")
        if pa.types.is_large_binary(values.type):
            values = values.cast(pa.binary())
        n = len(values)
        bad: dict[int, str] = {}
        sids = None
        if framing == "confluent":
            body, sids = self._unframe(values, bad)
        else:
            body = values
        body = self._one_line(body, bad)
        lines = pc.binary_join_element_wise(_PREFIX, _drop(body, bad), _SUFFIX, b"",
                                            null_handling="replace",
                                            null_replacement=b"null")
        try:
            array = self._parse(lines)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            found: list[tuple[int, str]] = []
            self._bisect(lines, 0, n, found, mode == 0)
            if mode == 0:
                first = min([found[0]] + [(i, t) for i, t in bad.items()])
                self._raise(*first, sids)
            bad.update(found)
            array = self._parse(pc.binary_join_element_wise(
                _PREFIX, _drop(body, bad), _SUFFIX, b"", null_handling="replace",
                null_replacement=b"null"))
        if bad and mode == 0:
            self._raise(min(bad), bad[min(bad)], sids)
        result = DecodeResult(array)
        if mode:
            # no byte position: pyarrow's JSON parser reports none per row
            def sid(i):
                return None if sids is None or sids[i] < 0 else int(sids[i])
            result.set_errors(n, [
                (i, f"{t} (schema id {'none' if sid(i) is None else sid(i)})", sid(i), None)
                for i, t in sorted(bad.items())])
        if mode == 2:
            keep = np.ones(n, dtype=bool)
            keep[list(bad)] = False
            result.kept = pa.array(keep)
            result.array = array.filter(result.kept)
        return result

    # -- steps ----------------------------------------------------------------------------
    def _unframe(self, values: pa.Array, bad: dict) -> tuple[pa.Array, np.ndarray]:
        """The JSON text after the 5-byte header, and each row's schema id (-1 where there
        is none); bad headers noted in ``bad``."""
        n = len(values)
        offs = np.frombuffer(values.buffers()[1], dtype=np.int32,
                             count=n + 1, offset=4 * values.offset).astype(np.int64)
        data = values.buffers()[2]
        raw = np.frombuffer(data, dtype=np.uint8) if data is not None and data.size else \
            np.zeros(1, dtype=np.uint8)
        lens = offs[1:] - offs[:-1]
        valid = ~np.asarray(values.is_null(), dtype=bool)
        start = np.minimum(offs[:-1], len(raw) - 1)
        magic = np.where(lens > 0, raw[start], 0)
        ids = np.zeros(n, dtype=np.int64)
        full = lens >= 5
        for k in range(4):
            ids[full] |= raw[np.minimum(offs[:-1][full] + 1 + k, len(raw) - 1)].astype(
                np.int64) << (8 * (3 - k))
        known = np.isin(ids, self._ids)
        ids[~(full & (magic == 0))] = -1
        problem = valid & ~(full & (magic == 0) & known)
        for i in np.flatnonzero(problem).tolist():
            if lens[i] == 0:
                bad[i] = "empty value: no magic byte of the schema-registry framing"
            elif magic[i] != 0:
                bad[i] = f"magic byte {magic[i]} is not the schema-registry framing's 0"
            elif not full[i]:
                bad[i] = (f"value of {lens[i]} bytes is shorter than the 5-byte "
                          "schema-registry header")
            else:
                bad[i] = f"unknown schema id {ids[i]}"
        # the header becomes five spaces (JSON whitespace) in a copy of the data: one
        # memcpy, where slicing each value would need a gather (pyarrow 26's binary_slice
        # also miscounts values shorter than the cut)
        text = raw.copy()
        heads = offs[:-1][valid & full]
        for k in range(5):
            text[heads + k] = 0x20
        body = pa.Array.from_buffers(
            pa.binary(), n, [values.buffers()[0], values.buffers()[1], pa.py_buffer(text)],
            null_count=values.null_count, offset=values.offset)
        return body, ids

    def _one_line(self, body: pa.Array, bad: dict) -> pa.Array:
        """Payloads with raw CR/LF: valid JSON has them only as whitespace, so a payload
        that parses (Python's strict json, these rows only) is put on one line; one that
        does not is bad."""
        rows, hits = _rows_with_newlines(body)
        if not rows:
            return body
        for i in rows:
            if i in bad:
                continue
            try:
                json.loads(body[i].as_py().decode("utf-8"))
            except (ValueError, UnicodeDecodeError) as err:
                bad[i] = f"not valid JSON: {err}"
        text = np.frombuffer(body.buffers()[2], dtype=np.uint8).copy()
        text[hits] = 0x20
        return pa.Array.from_buffers(pa.binary(), len(body),
                                     [body.buffers()[0], body.buffers()[1], pa.py_buffer(text)],
                                     null_count=body.null_count, offset=body.offset)

    def _parse(self, lines: pa.Array) -> pa.Array:
        """The column of ``lines`` (``{"v": ...}`` each), cast to the reader's type."""
        import pyarrow.json as pj
        if len(lines) == 0:
            return pa.array([], type=self.arrow_type)
        offs = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1,
                             offset=4 * lines.offset)
        text = lines.buffers()[2].slice(int(offs[0]), int(offs[-1] - offs[0]))
        # Arrow keeps invalid UTF-8 in string columns; a cast validates it
        pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(
            np.array([0, text.size], dtype=np.int32)), text]).validate(full=True)
        longest = int(np.max(np.diff(offs))) if len(offs) > 1 else 0
        table = pj.read_json(
            pa.BufferReader(text),
            read_options=pj.ReadOptions(block_size=max(_BLOCK, 2 * longest + 2)),
            parse_options=pj.ParseOptions(explicit_schema=self._read,
                                          unexpected_field_behavior="ignore"))
        col = table.column(0).combine_chunks() if table.num_rows else \
            pa.array([], type=self._read.field(0).type)
        if len(col) != len(lines):
            raise pa.ArrowInvalid(f"{len(col)} JSON rows for {len(lines)} values")
        if col.type == self.arrow_type:
            return col
        try:
            return col.cast(self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            # fractions of a second past microseconds: through nanoseconds, truncated
            return col.cast(self._ns).cast(self.arrow_type, safe=False)

    def _bisect(self, lines, lo, hi, found, first_only):
        """Rows of ``lines[lo:hi]`` that do not parse, with the reader's message."""
        try:
            self._parse(lines.slice(lo, hi - lo))
            return
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
            if hi - lo == 1:
                found.append((lo, f"not valid JSON for the schema: {err}"))
                return
        mid = (lo + hi) // 2
        self._bisect(lines, lo, mid, found, first_only)
        if not (first_only and found):
            self._bisect(lines, mid, hi, found, first_only)

    def _raise(self, row: int, text: str, sids):
        sid = None if sids is None or sids[row] < 0 else int(sids[row])
        raise TypedRecordError(f"bad JSON record at row {row}: {text} (schema id "
                               f"{'none' if sid is None else sid})", row=row, schema_id=sid)


def _rows_with_newlines(body: pa.Array) -> tuple[list[int], np.ndarray]:
    """Rows of ``body`` (binary) holding a CR or LF byte, and those bytes' positions in its
    data buffer: one vectorised scan, positions mapped to rows through the offsets."""
    data = body.buffers()[2]
    if data is None or data.size == 0 or len(body) == 0:
        return [], None
    offs = np.frombuffer(body.buffers()[1], dtype=np.int32, count=len(body) + 1,
                         offset=4 * body.offset)
    raw = np.frombuffer(data, dtype=np.uint8)[offs[0]:offs[-1]]
    hits = np.flatnonzero((raw == 10) | (raw == 13)) + offs[0]
    if not len(hits):
        return [], None
    rows = np.unique(np.searchsorted(offs, hits, side="right") - 1)
    if body.null_count:
        rows = rows[np.asarray(body.is_valid(), dtype=bool)[rows]]
    return rows.tolist(), hits


def _drop(body: pa.Array, bad: dict) -> pa.Array:
    """``body`` with the rows in ``bad`` nulled (they parse as a null value)."""
    if not bad:
        return body
    mask = np.zeros(len(body), dtype=bool)
    mask[list(bad)] = True
    return pc.if_else(pa.array(mask), pa.nulls(len(body), body.type), body)
