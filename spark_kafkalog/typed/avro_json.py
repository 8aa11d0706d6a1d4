"""Avro values as the JSON kcat prints for ``-s avro``: avro-c's ``avro_value_to_json``
(one line) over a decoded value.

kcat hands each record to libserdes, which decodes it with its writer schema, and prints
``avro_value_to_json(value, one_line=1)``: jansson's ``json_dumps`` with
``JSON_ENCODE_ANY | JSON_INDENT(0) | JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER``. So:
``", "`` between items and ``": "`` after keys; non-ASCII escaped as ``\\uXXXX`` (upper-case
hex, surrogate pairs above U+FFFF); a union as ``null`` or ``{"<branch type name>": value}``
(a named type's name without its namespace, else ``int``, ``string``, ``array``, ...);
``bytes`` and ``fixed`` as a string of the code points U+0000..U+00FF, one per byte;
floats and doubles as jansson prints a double (``%.17g``, ``.0`` added to an integral
value, no ``+`` or leading zeros in the exponent); logical types ignored (avro-c has none):
a date as its int, a timestamp as its long, a decimal as its two's-complement bytes.

The input is the Arrow value :mod:`.avro` decoded with the writer schema as reader (so the
Spark-shaped types are folded back): :func:`to_json` walks the schema beside it. A union of
int and long (or float and double) is one Spark column and does not say which branch was
written: it prints as the wider branch.
"""
from __future__ import annotations

import datetime as _dt
import math
from decimal import Decimal

from spark_kafkalog.typed.avro_schema import Schema, non_null_branches, spark_shape

__all__ = ["to_json", "json_string", "json_real"]

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
            "\t": "\\t"}


def json_string(text: str) -> str:
    """jansson's ``dump_string`` with JSON_ENSURE_ASCII."""
    out = ['"']
    for ch in text:
        c = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif c < 0x20 or 0x7F < c <= 0xFFFF:
            out.append("\\u%04X" % c)
        elif c > 0xFFFF:
            c -= 0x10000
            out.append("\\u%04X\\u%04X" % (0xD800 | (c >> 10), 0xDC00 | (c & 0x3FF)))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_real(value: float) -> str:
    """jansson's ``jsonp_dtostr``: ``%.17g``, ``.0`` for an integral value, exponent
    without ``+`` and leading zeros. NaN and infinities have no JSON: avro-c fails on
    them; they print as JSON strings here rather than as invalid JSON."""
    if math.isnan(value) or math.isinf(value):
        return json_string(repr(value))
    text = "%.17g" % value
    if "." not in text and "e" not in text:
        text += ".0"
    if "e" in text:
        mant, exp = text.split("e")
        sign = "-" if exp.startswith("-") else ""
        text = f"{mant}e{sign}{exp.lstrip('+-').lstrip('0') or '0'}"
    return text


def _bytes(data: bytes) -> str:
    return json_string(data.decode("latin-1"))


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _branch_name(s: Schema) -> str:
    return _short(s.name) if s.name else s.type


def _decimal_bytes(d: Decimal, s: Schema) -> bytes:
    unscaled = int(d.scaleb(s.scale))
    if s.type == "fixed":
        return unscaled.to_bytes(s.size, "big", signed=True)
    # Java BigInteger.toByteArray: the shortest two's complement, at least one byte
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(length, "big", signed=True)


def _logical_int(value, s: Schema) -> int:
    lt = s.logical
    if isinstance(value, _dt.datetime):
        epoch = _EPOCH_UTC if value.tzinfo is not None else _EPOCH_NAIVE
        delta = value - epoch
        us = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return us // 1000 if lt in ("timestamp-millis", "local-timestamp-millis") else us
    if isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    return int(value)


def to_json(s: Schema, value) -> str:
    """``value`` (Python, from the Arrow array decoded with ``s`` as the reader schema)
    as avro-c's one-line JSON."""
    t = s.type
    if t == "null" or (value is None and t != "union"):
        return "null"
    if t == "boolean":
        return "true" if value else "false"
    if t in ("int", "long"):
        return str(_logical_int(value, s))
    if t in ("float", "double"):
        return json_real(float(value))
    if t in ("string", "enum"):
        return json_string(value)
    if t in ("bytes", "fixed"):
        if isinstance(value, Decimal):
            return _bytes(_decimal_bytes(value, s))
        return _bytes(value if isinstance(value, bytes) else str(value).encode("latin-1"))
    if t == "record":
        return "{" + ", ".join(f"{json_string(f.name)}: {to_json(f.schema, value[f.name])}"
                               for f in s.fields) + "}"
    if t == "array":
        return "[" + ", ".join(to_json(s.items, v) for v in value) + "]"
    if t == "map":
        return "{" + ", ".join(f"{json_string(k)}: {to_json(s.values, v)}"
                               for k, v in value) + "}"
    if t == "union":
        if value is None:
            return "null"
        shape = spark_shape(s)
        rest = non_null_branches(s)
        if shape in ("nullable", "single"):
            branch = rest[0]
        elif shape in ("long", "double"):
            branch = next(b for b in rest if b.type in ("long", "double"))
        else:
            i, member = next(((i, value[f"member{i}"]) for i in range(len(rest))
                              if value[f"member{i}"] is not None), (None, None))
            if i is None:
                return "null"
            branch, value = rest[i], member
        return "{" + json_string(_branch_name(branch)) + ": " + to_json(branch, value) + "}"
    raise ValueError(f"no JSON rendering for Avro type {t}")
