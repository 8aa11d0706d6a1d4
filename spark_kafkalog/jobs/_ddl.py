"""Spark's DDL schema strings (``'id long, name string, tags array<string>'``) checked
without a JVM, so that a job refuses a bad ``--value-schema`` before Spark starts.

The grammar is Spark SQL's for a schema: fields ``name[:] type [NOT NULL] [COMMENT
'text']`` separated by commas (or one ``struct<...>``); names plain or in backticks;
types by Spark's names and aliases, ``decimal(p[, s])``, ``char(n)``/``varchar(n)``,
``array<T>``, ``map<K, V>``, ``struct<...>`` and ``interval`` with its units. The job
still hands the string to Spark's own parser; this one only finds what Spark would
refuse, and the field names. :func:`arrow_schema` gives the Arrow schema Spark's types
map to, for the jobs that parse JSON without Spark (export_iceberg).
"""
from __future__ import annotations

import re

import pyarrow as pa

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|([A-Za-z_][\w]*)|(\d+)|"
                    r"([<>(),:]))")
_SIMPLE = {"boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint",
           "long", "float", "real", "double", "string", "binary", "date", "timestamp",
           "timestamp_ntz", "timestamp_ltz", "void", "variant"}
_DECIMAL = {"decimal", "dec", "numeric"}
_SIZED = {"char", "character", "varchar"}
_INTERVAL_UNITS = {"year", "month", "day", "hour", "minute", "second", "to"}
#: Spark's simple types as Arrow's (None: no Arrow/Iceberg column for it)
_ARROW = {"boolean": pa.bool_(), "tinyint": pa.int8(), "byte": pa.int8(),
          "smallint": pa.int16(), "short": pa.int16(), "int": pa.int32(),
          "integer": pa.int32(), "bigint": pa.int64(), "long": pa.int64(),
          "float": pa.float32(), "real": pa.float32(), "double": pa.float64(),
          "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
          "timestamp": pa.timestamp("us", tz="UTC"),
          "timestamp_ltz": pa.timestamp("us", tz="UTC"),
          "timestamp_ntz": pa.timestamp("us"), "void": None, "variant": None}


class DDLError(ValueError):
    """The DDL string is not a schema Spark parses; the message says where."""


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, int]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip() == "":
                    break
                raise DDLError(f"unexpected {text[pos:].strip()[:20]!r} at character "
                               f"{len(text) - len(text[pos:].lstrip()) + 1}")
            self.tokens.append((m.group(m.lastindex), m.start(m.lastindex)))
            pos = m.end()
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def take(self) -> str:
        if self.i >= len(self.tokens):
            raise DDLError("the schema ends too early")
        self.i += 1
        return self.tokens[self.i - 1][0]

    def expect(self, want: str) -> None:
        got = self.peek()
        if got != want:
            where = (f"at character {self.tokens[self.i][1] + 1}" if got is not None
                     else "at the end")
            raise DDLError(f"expected {want!r} {where}, found {got!r}" if got is not None
                           else f"expected {want!r} {where}")
        self.i += 1

    def name(self) -> str:
        tok = self.take()
        if tok.startswith("`"):
            return tok[1:-1].replace("``", "`")
        if not re.fullmatch(r"[A-Za-z_]\w*", tok):
            raise DDLError(f"expected a field name, found {tok!r}")
        return tok

    def fields(self, end: str | None) -> list[tuple[str, object]]:
        """(name, Arrow type or the Spark type's name when Arrow has none) per field."""
        names = []
        while True:
            name = self.name()
            if self.peek() == ":":
                self.take()
            names.append((name, self.type()))
            if (self.peek() or "").lower() == "not":
                self.take()
                if self.take().lower() != "null":
                    raise DDLError("expected NULL after NOT")
            if (self.peek() or "").lower() == "comment":
                self.take()
                if not self.take().startswith("'"):
                    raise DDLError("expected a quoted comment after COMMENT")
            if self.peek() == ",":
                self.take()
                continue
            if self.peek() == end:
                return names
            got = self.peek()
            raise DDLError(f"expected ',' or the end after field {names[-1][0]!r}, found "
                           f"{got!r}")

    def type(self):
        """The type's Arrow type; for one Arrow has no column for (interval, void,
        variant) its Spark name, a string."""
        word = self.take()
        low = word.lower()
        if low in _SIMPLE:
            return _ARROW[low] or low
        if low in _DECIMAL or low in _SIZED:
            p, scale = 10, 0
            if self.peek() == "(":
                self.take()
                p = self.number()
                if low in _DECIMAL and self.peek() == ",":
                    self.take()
                    scale = self.number()
                self.expect(")")
            elif low in _SIZED:
                raise DDLError(f"{word} needs a length, e.g. {word}(10)")
            if low in _SIZED:
                return pa.string()
            if not (0 < p <= 38 and 0 <= scale <= p):
                raise DDLError(f"decimal({p}, {scale}): precision 1..38, scale 0..precision")
            return pa.decimal128(p, scale)
        if low == "interval":
            while (self.peek() or "").lower() in _INTERVAL_UNITS:
                self.take()
            return "interval"
        if low == "array":
            self.expect("<")
            element = self.type()
            self.expect(">")
            return pa.list_(element) if isinstance(element, pa.DataType) else element
        if low == "map":
            self.expect("<")
            self.type()         # checked as Spark would; Arrow's JSON reader has no map
            self.expect(",")
            self.type()
            self.expect(">")
            return "map"
        if low == "struct":
            self.expect("<")
            fields = self.fields(">") if self.peek() != ">" else []
            self.expect(">")
            bad = [t for _, t in fields if not isinstance(t, pa.DataType)]
            return bad[0] if bad else pa.struct(fields)
        raise DDLError(f"unknown data type {word!r}")

    def number(self) -> int:
        tok = self.take()
        if not tok.isdigit():
            raise DDLError(f"expected a number, found {tok!r}")
        return int(tok)


def _top_fields(ddl: str) -> list[tuple[str, object]]:
    p = _Parser(ddl)
    if not p.tokens:
        return []                    # Spark reads an empty string as an empty struct
    if p.peek().lower() == "struct" and len(p.tokens) > 1 and p.tokens[1][0] == "<":
        p.take()
        p.expect("<")
        fields = p.fields(">") if p.peek() != ">" else []
        p.expect(">")
    else:
        fields = p.fields(None)
    if p.peek() is not None:
        raise DDLError(f"unexpected {p.peek()!r} after the schema")
    return fields


def field_names(ddl: str) -> list[str]:
    """The top-level field names of DDL schema ``ddl``; :class:`DDLError` when Spark's
    parser would refuse it."""
    return [name for name, _ in _top_fields(ddl)]


def arrow_schema(ddl: str) -> pa.Schema:
    """DDL schema ``ddl`` as an Arrow schema (every field nullable, as ``from_json``
    makes them): Spark's integer and floating types by width, ``decimal(p, s)`` as
    decimal128 (``decimal`` alone is Spark's (10, 0)), ``char``/``varchar`` as string,
    ``timestamp`` as timestamp[us, UTC], ``timestamp_ntz`` without a zone, ``array`` a
    list, ``struct`` a struct. :class:`DDLError` for what Spark refuses and for types
    with no JSON reading here: ``map`` (Arrow's JSON reader has none), ``interval``,
    ``void``, ``variant``."""
    out = []
    for name, t in _top_fields(ddl):
        if not isinstance(t, pa.DataType):
            raise DDLError(f"field {name!r}: {t} is not supported here (no JSON reading "
                           "into it): use a struct, or string")
        out.append(pa.field(name, t))
    return pa.schema(out)
