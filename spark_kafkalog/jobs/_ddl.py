"""Spark's DDL schema strings (``'id long, name string, tags array<string>'``) checked
without a JVM, so that a job refuses a bad ``--value-schema`` before Spark starts.

The grammar is Spark SQL's for a schema: fields ``name[:] type [NOT NULL] [COMMENT
'text']`` separated by commas (or one ``struct<...>``); names plain or in backticks;
types by Spark's names and aliases, ``decimal(p[, s])``, ``char(n)``/``varchar(n)``,
``array<T>``, ``map<K, V>``, ``struct<...>`` and ``interval`` with its units. The job
still hands the string to Spark's own parser; this one only finds what Spark would
refuse, and the field names.
"""
from __future__ import annotations

import re

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|([A-Za-z_][\w]*)|(\d+)|"
                    r"([<>(),:]))")
_SIMPLE = {"boolean", "tinyint", "byte", "smallint", "short", "int", "integer", "bigint",
           "long", "float", "real", "double", "string", "binary", "date", "timestamp",
           "timestamp_ntz", "timestamp_ltz", "void", "variant"}
_DECIMAL = {"decimal", "dec", "numeric"}
_SIZED = {"char", "character", "varchar"}
_INTERVAL_UNITS = {"year", "month", "day", "hour", "minute", "second", "to"}


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

    def fields(self, end: str | None) -> list[str]:
        names = []
        while True:
            names.append(self.name())
            if self.peek() == ":":
                self.take()
            self.type()
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
            raise DDLError(f"expected ',' or the end after field {names[-1]!r}, found "
                           f"{got!r}")

    def type(self) -> None:
        word = self.take()
        low = word.lower()
        if low in _SIMPLE:
            return
        if low in _DECIMAL or low in _SIZED:
            if self.peek() == "(":
                self.take()
                self.number()
                if low in _DECIMAL and self.peek() == ",":
                    self.take()
                    self.number()
                self.expect(")")
            elif low in _SIZED:
                raise DDLError(f"{word} needs a length, e.g. {word}(10)")
            return
        if low == "interval":
            while (self.peek() or "").lower() in _INTERVAL_UNITS:
                self.take()
            return
        if low == "array":
            self.expect("<")
            self.type()
            self.expect(">")
            return
        if low == "map":
            self.expect("<")
            self.type()
            self.expect(",")
            self.type()
            self.expect(">")
            return
        if low == "struct":
            self.expect("<")
            if self.peek() != ">":
                self.fields(">")
            self.expect(">")
            return
        raise DDLError(f"unknown data type {word!r}")

    def number(self) -> None:
        tok = self.take()
        if not tok.isdigit():
            raise DDLError(f"expected a number, found {tok!r}")


def field_names(ddl: str) -> list[str]:
    """The top-level field names of DDL schema ``ddl``; :class:`DDLError` when Spark's
    parser would refuse it."""
    p = _Parser(ddl)
    if not p.tokens:
        return []                    # Spark reads an empty string as an empty struct
    if p.peek().lower() == "struct" and len(p.tokens) > 1 and p.tokens[1][0] == "<":
        p.take()
        p.expect("<")
        names = p.fields(">") if p.peek() != ">" else []
        p.expect(">")
    else:
        names = p.fields(None)
    if p.peek() is not None:
        raise DDLError(f"unexpected {p.peek()!r} after the schema")
    return names
