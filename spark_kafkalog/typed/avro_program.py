"""Avro schema resolution compiled into the kernel's flat program.

A :class:`Program` holds the reader schema's columns (one per Arrow array in the decoded
column: structs, lists, map entries, union members) and the nodes the kernel interprets.
:meth:`Program.add_writer` resolves one writer schema to the reader by the Avro
specification's rules ("Schema Resolution") and returns its entry node: fields matched by
name or alias, writer-only fields skipped, reader-only fields filled from their default
(Avro-encoded here once, decoded by the reader's own program), int -> long -> float ->
double and string <-> bytes promotions, enum symbols by name with the reader's default,
unions branch by branch (the writer's own type first, then the first branch it matches),
named types by full name, unqualified name or alias. What does not
resolve raises :class:`~spark_kafkalog.errors.SchemaResolutionError` here, before any data.

Stricter than the specification in two places, as Avro's own SchemaCompatibility (the
registry's compatibility check) is: a writer union branch or enum symbol that the reader
cannot take is refused up front instead of failing on the first record that uses it.
"""
from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import SchemaError, SchemaResolutionError
from spark_kafkalog.typed import _avro
from spark_kafkalog.typed.avro_schema import Schema, _arrow, non_null_branches, spark_shape

OP = _avro.OPS
KIND = _avro.KINDS
_WIDTH = {"NULL": 0, "BOOL": 0, "I32": 4, "I64": 8, "F32": 4, "F64": 8, "D128": 16,
          "BIN": 0, "STRUCT": 0, "LIST": 0}
_MILLIS = ("timestamp-millis", "local-timestamp-millis")
_PROMOTE = {
    "int": ("int", "long", "float", "double"),
    "long": ("long", "float", "double"),
    "float": ("float", "double"),
    "double": ("double",),
    "string": ("string", "bytes"),
    "bytes": ("bytes", "string"),
    "boolean": ("boolean",),
    "null": ("null",),
}


class _Col:
    __slots__ = ("kind", "nullable", "type", "kids", "per_row")

    def __init__(self, kind, nullable, type_, kids=()):
        self.kind, self.nullable, self.type, self.kids = kind, nullable, type_, list(kids)
        self.per_row = False


class _Mismatch(Exception):
    """A writer/reader pair that does not resolve, with the path where it failed."""

    def __init__(self, path: str, why: str):
        super().__init__(why)
        self.path, self.why = path, why


def _named_match(w: Schema, r: Schema) -> bool:
    if w.name == r.name:
        return True
    short = w.name.rsplit(".", 1)[-1]
    return (short == r.name.rsplit(".", 1)[-1] or w.name in (r.aliases or [])
            or short in [a.rsplit(".", 1)[-1] for a in r.aliases or []])


def _exact(w: Schema, r: Schema) -> bool:
    """The writer's own type: for a named type the same full name, or a reader alias naming
    it. Java's Avro (``Resolver.bestBranch``) takes such a branch before one matched by
    unqualified name alone, as a Java consumer of the registry's data does."""
    return w.type == r.type and (w.name is None or w.name == r.name
                                 or w.name in (r.aliases or []))


def _same(w: Schema, r: Schema) -> bool:
    """Types that match without promotion (the union branch the reader picks first)."""
    if w.type != r.type:
        return False
    return w.name is None or _named_match(w, r)


def _matches(w: Schema, r: Schema) -> bool:
    if w.type in _PROMOTE:
        return r.type in _PROMOTE[w.type]
    return _same(w, r)


class Program:
    """The reader schema's columns and the kernel nodes of every writer added."""

    def __init__(self, reader: Schema):
        self.reader = reader
        self.cols: list[_Col] = []
        self.nodes: list[list[int]] = []
        self.kids: list[int] = []
        self.ints: list[int] = []
        self.consts = bytearray()
        # id(schema) -> (schema, node); the schema is held so that its id is not reused
        self._skips: dict[int, tuple[Schema, int]] = {}
        self._symbols: dict[tuple, int] = {}
        self.arrow_type, _ = _arrow(reader)
        self.top = self._columns(reader, True)
        self._mark_per_row(self.top)
        self._kernel = None

    # ---- columns -----------------------------------------------------------------------

    def _col(self, kind, nullable, type_, kids=()) -> int:
        self.cols.append(_Col(kind, nullable, type_, kids))
        return len(self.cols) - 1

    def _columns(self, s: Schema, nullable: bool) -> int:
        """The column(s) of reader schema ``s``; returns the index of its top column."""
        arrow, _ = _arrow(s)
        t = s.type
        if t == "union":
            shape = spark_shape(s)
            rest = non_null_branches(s)
            nullable = nullable or len(rest) < len(s.branches)
            if shape in ("nullable", "single"):
                return self._columns(rest[0], nullable)
            if shape == "members":
                kids = [self._columns(b, True) for b in rest]
                return self._col("STRUCT", nullable, arrow, kids)
            kind = {"null": "NULL", "long": "I64", "double": "F64"}[shape]
            return self._col(kind, nullable, arrow)
        if t == "record":
            kids = [self._columns(f.schema, False) for f in s.fields]
            return self._col("STRUCT", nullable, arrow, kids)
        if t == "array":
            return self._col("LIST", nullable, arrow, [self._columns(s.items, False)])
        if t == "map":
            key = self._col("BIN", False, pa.string())
            value = self._columns(s.values, False)
            entries = self._col("STRUCT", False, pa.struct([arrow.key_field, arrow.item_field]),
                                [key, value])
            return self._col("LIST", nullable, arrow, [entries])
        kind = {"null": "NULL", "boolean": "BOOL", "float": "F32", "double": "F64",
                "string": "BIN", "enum": "BIN"}.get(t)
        if kind is None:
            if t == "int":
                kind = "I32"
            elif t == "long":
                kind = "I64"
            else:                       # bytes, fixed
                kind = "D128" if s.logical == "decimal" else "BIN"
        return self._col(kind, nullable or t == "null", arrow)

    def _mark_per_row(self, ci: int):
        """Columns with one value per row: the top one and struct children down to the
        first list (sized for the rows before decoding)."""
        c = self.cols[ci]
        c.per_row = True
        if c.kind == "STRUCT":
            for k in c.kids:
                self._mark_per_row(k)

    # ---- nodes -------------------------------------------------------------------------

    def _node(self, op, col=-1, a=0, b=0, c=0, kids=()) -> int:
        kid = len(self.kids)
        self.kids.extend(kids)
        self.nodes.append([OP[op], col, a, b, c, kid, len(kids), 0])
        self._kernel = None
        return len(self.nodes) - 1

    def _min_size(self, w: Schema) -> int:
        if w.type == "null":
            return 0
        if w.type == "fixed":
            return w.size
        if w.type == "float":
            return 4
        if w.type == "double":
            return 8
        if w.type == "record":
            return sum(self._min_size(f.schema) for f in w.fields)
        return 1

    def _skip(self, w: Schema) -> int:
        key = id(w)
        if key in self._skips:
            return self._skips[key][1]
        t = w.type
        if t == "null":
            n = self._node("SK_NONE")
        elif t in ("boolean", "float", "double", "fixed"):
            n = self._node("SK_FIXED", a={"boolean": 1, "float": 4, "double": 8}.get(t, w.size))
        elif t in ("int", "long"):
            n = self._node("SK_VARINT")
        elif t == "enum":
            # checked as Java's Avro checks it: a bad index is a bad record even unread
            n = self._node("SK_ENUM", a=len(w.symbols))
        elif t in ("bytes", "string"):
            n = self._node("SK_BYTES")
        elif t == "array":
            n = self._node("SK_ARRAY", a=self._min_size(w.items), kids=[self._skip(w.items)])
        elif t == "map":
            n = self._node("SK_MAP", a=1 + self._min_size(w.values),
                           kids=[self._skip(Schema("string")), self._skip(w.values)])
        elif t == "union":
            n = self._node("SK_UNION", kids=[self._skip(b) for b in w.branches])
        else:
            n = self._node("SK_RECORD", kids=[self._skip(f.schema) for f in w.fields])
        self._skips[key] = (w, n)
        return n

    def add_writer(self, writer: Schema, label: str) -> int:
        """Resolve ``writer`` to the reader; the entry node. ``label`` names the writer in
        messages (its id)."""
        try:
            return self._resolve(writer, self.reader, self.top, self.reader.describe())
        except _Mismatch as m:
            raise SchemaResolutionError(
                f"writer schema {label} ({writer.describe()}) does not resolve to reader "
                f"schema {self.reader.describe()} at {m.path}: {m.why}") from None

    def _resolve(self, w: Schema, r: Schema, col: int, path: str) -> int:
        if w.type == "union":
            return self._node("D_UNION", kids=[
                self._resolve(b, r, col, f"{path}[branch {i}: {b.describe()}]")
                for i, b in enumerate(w.branches)])
        if r.type == "union":
            return self._into_union(w, r, col, path)
        return self._plain(w, r, col, path)

    def _into_union(self, w: Schema, r: Schema, col: int, path: str) -> int:
        c = self.cols[col]
        if w.type == "null":
            if not any(b.type == "null" for b in r.branches):
                raise _Mismatch(path, f"null has no branch in the reader's {r.describe()}")
            return self._node("D_NULL" if c.kind == "NULL" else "D_ABSENT", col)
        rest = non_null_branches(r)
        pick = next((b for b in rest if _exact(w, b)), None) or next(
            (b for b in rest if _same(w, b)), None) or next(
            (b for b in rest if _matches(w, b)), None)
        if pick is None:
            raise _Mismatch(path, f"{w.describe()} matches no branch of {r.describe()}")
        if spark_shape(r) == "members":
            k = rest.index(pick)
            inner = self._resolve(w, pick, c.kids[k], f"{path}.member{k}")
            return self._node("D_MEMBER", col, a=k, kids=[inner])
        return self._plain(w, pick, col, path)

    def _plain(self, w: Schema, r: Schema, col: int, path: str) -> int:
        c = self.cols[col]
        wt, rt = w.type, r.type
        if wt in _PROMOTE:
            if rt not in _PROMOTE[wt]:
                raise _Mismatch(path, f"writer {w.describe()} cannot be read as {r.describe()}")
            if wt == "null":
                return self._node("D_NULL" if c.kind == "NULL" else "D_ABSENT", col)
            if wt == "boolean":
                return self._node("D_BOOL", col)
            mult = 1000 if r.logical in _MILLIS else 1
            if wt in ("int", "long"):
                return self._node("D_INT" if wt == "int" else "D_LONG", col, c=mult)
            if wt == "float":
                return self._node("D_FLOAT", col)
            if wt == "double":
                return self._node("D_DOUBLE", col)
            if c.kind == "D128":
                self._check_decimal(w, r, path)
                return self._node("D_DEC", col, a=-1, b=r.precision)
            return self._node("D_BYTES", col, a=int(rt == "string"))
        if wt != rt or not _named_match(w, r):
            raise _Mismatch(path, f"writer {w.describe()} cannot be read as {r.describe()}")
        if wt == "fixed":
            if w.size != r.size:
                raise _Mismatch(path, f"fixed {w.name} has size {w.size}, the reader's "
                                      f"{r.name} {r.size}")
            if c.kind == "D128":
                self._check_decimal(w, r, path)
                return self._node("D_DEC", col, a=w.size, b=r.precision)
            return self._node("D_FIXED", col, a=w.size)
        if wt == "enum":
            return self._enum(w, r, col, path)
        if wt == "array":
            item = self._resolve(w.items, r.items, c.kids[0], f"{path}[]")
            return self._node("D_ARRAY", col, a=self._min_size(w.items), kids=[item])
        if wt == "map":
            entries = self.cols[c.kids[0]]
            key = self._node("D_BYTES", entries.kids[0], a=1)
            value = self._resolve(w.values, r.values, entries.kids[1], f"{path}{{}}")
            return self._node("D_MAP", col, a=1 + self._min_size(w.values), kids=[key, value])
        return self._record(w, r, col, path)

    @staticmethod
    def _check_decimal(w: Schema, r: Schema, path: str):
        if w.logical == "decimal" and w.scale != r.scale:
            raise _Mismatch(path, f"decimal scale {w.scale} cannot be read with scale "
                                  f"{r.scale}")

    def _enum(self, w: Schema, r: Schema, col: int, path: str) -> int:
        mapping = []
        for sym in w.symbols:
            if sym in r.symbols:
                mapping.append(r.symbols.index(sym))
            elif r.enum_default is not None:
                mapping.append(r.symbols.index(r.enum_default))
            else:
                raise _Mismatch(path, f"enum symbol {sym} of {w.name} is not in the reader's "
                                      f"{r.name}, which has no default")
        at = len(self.ints)
        self.ints.extend(mapping)
        return self._node("D_ENUM", col, a=at, b=len(mapping), c=self._symbol_table(r))

    def _symbol_table(self, r: Schema) -> int:
        key = tuple(r.symbols)
        if key not in self._symbols:
            self._symbols[key] = len(self.ints)
            offsets = []
            for sym in r.symbols:
                offsets.append(len(self.consts))
                self.consts += sym.encode("utf-8")
            offsets.append(len(self.consts))
            self.ints.extend(offsets)
        return self._symbols[key]

    def _record(self, w: Schema, r: Schema, col: int, path: str) -> int:
        c = self.cols[col]
        kids, used = [], set()
        for wf in w.fields:
            k = next((i for i, rf in enumerate(r.fields) if rf.name == wf.name), None)
            if k is None:
                k = next((i for i, rf in enumerate(r.fields)
                          if wf.name in rf.aliases and i not in used), None)
            if k is None:
                kids.append(self._skip(wf.schema))
                continue
            used.add(k)
            rf = r.fields[k]
            kids.append(self._resolve(wf.schema, rf.schema, c.kids[k], f"{path}.{rf.name}"))
        for k, rf in enumerate(r.fields):
            if k in used:
                continue
            fpath = f"{path}.{rf.name}"
            if not rf.has_default:
                raise _Mismatch(fpath, f"reader field {rf.name} is not in the writer and has "
                                       "no default")
            try:
                data = encode_default(rf.schema, rf.default)
            except (ValueError, TypeError, KeyError, struct.error) as err:
                raise SchemaError(f"default of field {fpath} does not fit its type "
                                  f"{rf.schema.describe()}: {err}") from err
            own = self._resolve(rf.schema, rf.schema, c.kids[k], fpath)
            at = len(self.consts)
            self.consts += data
            kids.append(self._node("D_DEFAULT", a=len(data), c=at, kids=[own]))
        return self._node("D_RECORD", col, kids=kids)

    # ---- the kernel --------------------------------------------------------------------

    def kernel(self):
        if self._kernel is None:
            colspec, ckids = [], []
            base = len(self.kids)
            for c in self.cols:
                colspec.append([KIND[c.kind], int(c.nullable), _WIDTH[c.kind],
                                base + len(ckids), len(c.kids), int(c.per_row)])
                ckids.extend(c.kids)
            self._kernel = _avro.Kernel(
                np.array(self.nodes, dtype=np.int64).reshape(-1, _avro.NODE_WORDS),
                np.array(self.kids + ckids, dtype=np.int64),
                np.array(self.ints, dtype=np.int32), bytes(self.consts),
                np.array(colspec, dtype=np.int64).reshape(-1, 6))
        return self._kernel


# ---- defaults, Avro-encoded --------------------------------------------------------------

def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_default(s: Schema, value) -> bytes:
    """The Avro binary of a field default (JSON value) under schema ``s``; a union's
    default is its first branch's (the specification), any branch it fits as a fallback."""
    t = s.type
    if t == "null":
        if value is not None:
            raise ValueError(f"{value!r} is not null")
        return b""
    if t == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{value!r} is not a boolean")
        return b"\x01" if value else b"\x00"
    if t in ("int", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not an integer")
        if not -(1 << (31 if t == "int" else 63)) <= value < (1 << (31 if t == "int" else 63)):
            raise ValueError(f"{value} is out of range for {t}")
        return _zigzag(value)
    if t == "float":
        return struct.pack("<f", float(value))
    if t == "double":
        return struct.pack("<d", float(value))
    if t == "string":
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a string")
        data = value.encode("utf-8")
        return _zigzag(len(data)) + data
    if t in ("bytes", "fixed"):
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a string of bytes")
        data = value.encode("latin-1")         # JSON defaults spell bytes as code points 0-255
        if t == "fixed":
            if len(data) != s.size:
                raise ValueError(f"{len(data)} bytes for a fixed of {s.size}")
            return data
        return _zigzag(len(data)) + data
    if t == "enum":
        return _zigzag(s.symbols.index(value))
    if t == "array":
        items = b"".join(encode_default(s.items, v) for v in value)
        return (_zigzag(len(value)) + items if value else b"") + b"\x00"
    if t == "map":
        body = b"".join(encode_default(Schema("string"), k) + encode_default(s.values, v)
                        for k, v in value.items())
        return (_zigzag(len(value)) + body if value else b"") + b"\x00"
    if t == "record":
        out = b""
        for f in s.fields:
            if f.name in value:
                out += encode_default(f.schema, value[f.name])
            elif f.has_default:
                out += encode_default(f.schema, f.default)
            else:
                raise ValueError(f"field {f.name} missing")
        return out
    errors = []
    for i, b in enumerate(s.branches):
        try:
            return _zigzag(i) + encode_default(b, value)
        except (ValueError, TypeError, KeyError, struct.error) as err:
            errors.append(str(err))
    raise ValueError(f"{value!r} fits no branch ({'; '.join(errors)})")
