"""KRaft ``__cluster_metadata`` records (topics, topic ids, partitions, configs, features,
brokers, producer ids, ACLs, quotas, ...) decoded from their schemas
(:mod:`.cluster_metadata_schemas`), as dicts and as the JSON Kafka's
``--cluster-metadata-decoder`` prints.

A record's value (its key is null) is Kafka's metadata frame::

    frameVersion uvarint, apiKey uvarint, version uvarint, the record (flexible versions:
    compact strings/arrays/bytes, tagged fields after every struct; else int16 strings,
    int32 arrays and bytes)

:func:`decode_metadata_record` returns ``(type name, version, fields)`` and raises
CoordinatorRecordError on bytes that do not decode; :func:`metadata_text` is the payload
text of DumpLogSegments (``{"type":"TOPIC_RECORD","version":0,"data":{...}}``).
"""
from __future__ import annotations

import base64
import json
import struct

from spark_kafkalog.errors import CoordinatorRecordError
from spark_kafkalog.format.cluster_metadata_schemas import RECORDS
from spark_kafkalog.format.coordinator.protocol import Reader, uuid_text

__all__ = ["decode_metadata_record", "metadata_text", "RECORDS"]

_FIXED = {"int8": struct.Struct(">b"), "int16": struct.Struct(">h"),
          "int32": struct.Struct(">i"), "int64": struct.Struct(">q"),
          "uint16": struct.Struct(">H"), "float64": struct.Struct(">d"),
          "bool": struct.Struct(">b")}
_ZERO_UUID = uuid_text(bytes(16))


def _in(span, version: int) -> bool:
    return span is not None and span[0] <= version and (span[1] is None or version <= span[1])


def _default(f, version: int):
    """A field's value when it is absent (a tagged field without its tag)."""
    typ, nullable, default = f[1], _in(f[3], version), f[6]
    if default == "null" or (default is None and nullable and typ != "struct"):
        return None
    if typ.startswith("[]"):
        return []
    if typ == "bool":
        return default == "true"
    if typ in ("int8", "int16", "int32", "int64", "uint16"):
        return int(default, 0) if default else 0
    if typ == "float64":
        return float(default) if default else 0.0
    if typ == "uuid":
        return _ZERO_UUID
    if typ == "bytes":
        return b""
    if typ == "struct":
        return {g[0]: _default(g, version) for g in f[7] if _in(g[2], version)}
    return default or ""


def _scalar(r: Reader, typ: str, name: str, flex: bool, nullable: bool):
    fixed = _FIXED.get(typ)
    if fixed is not None:
        value = r._fixed(fixed, name)
        return value != 0 if typ == "bool" else value
    if typ == "string":
        return r.string(name, flexible=flex, nullable=nullable)
    if typ == "bytes":
        return r.bytes_(name, flexible=flex, nullable=nullable)
    if typ == "uuid":
        return uuid_text(r.uuid(name))
    raise ValueError(f"no reader for field type {typ!r}")        # a bug in the tables


def _field(r: Reader, f, version: int, flex: bool):
    name, typ, nullable = f[0], f[1], _in(f[3], version)
    if typ.startswith("[]"):
        n = r.count(name, flexible=flex, nullable=nullable)
        if n is None:
            return None
        if typ == "[]struct":
            return [_struct(r, f[7], version, flex) for _ in range(n)]
        return [_scalar(r, typ[2:], name, flex, False) for _ in range(n)]
    if typ == "struct":
        if nullable and r.int8(f"{name} (null marker)") < 0:
            return None
        return _struct(r, f[7], version, flex)
    return _scalar(r, typ, name, flex, nullable)


def _struct(r: Reader, fields, version: int, flex: bool) -> dict:
    out, tagged = {}, {}
    for f in fields:
        if not _in(f[2], version):
            continue
        if f[4] is not None and _in(f[5], version):
            out[f[0]] = _default(f, version)
            tagged[f[4]] = f
        else:
            out[f[0]] = _field(r, f, version, flex)
    if flex:
        # the walk is Reader.tagged_spans, as for the group records (.coordinator.schemas);
        # unlike that reader, a tagged value read short of its size is not checked here
        for tag, _size, end in r.tagged_spans():
            f = tagged.get(tag)
            if f is not None:
                out[f[0]] = _field(Reader(r.data[:end], r.what, r.pos), f, version, flex)
    return out


def decode_metadata_record(value: bytes) -> tuple[str, int, dict]:
    """``(MetadataRecordType name, version, fields)`` of one metadata record value."""
    r = Reader(value, "metadata record")
    r.uvarint("frame version")
    api_key = r.uvarint("apiKey")
    version = r.uvarint("version")
    spec = RECORDS.get(api_key)
    if spec is None:
        # Kafka's words (its exception), which its dump prints after "skipping."
        raise CoordinatorRecordError("org.apache.kafka.common.errors."
                                     f"UnsupportedVersionException: Unknown metadata id "
                                     f"{api_key}")
    name, type_name, valid, flexible, fields = spec
    if not _in(valid, version):
        raise r.fail(f"{name} version {version} is unknown")
    r.what = f"{name} v{version}"
    data = _struct(r, fields, version, _in(flexible, version))
    if r.pos != len(value):
        raise r.fail(f"{len(value) - r.pos} bytes after the record")
    return type_name, version, data


def _java_double(x: float) -> str:
    """Java's Double.toString (what Jackson prints for a double): plain between 1e-3 and
    1e7, else ``d.dddEn``; the shortest digits that read back, as Java 19+ picks them."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    text = repr(x)
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        return text if "e" not in text else f"{x:f}"
    sign = "-" if x < 0 else ""
    if "e" in text:
        mant, e = text.lstrip("-").split("e")
        exp = int(e)
    else:                                    # e.g. 12345678.0
        whole, frac = text.lstrip("-").split(".")
        exp = len(whole) - 1
        digits = (whole + frac).rstrip("0") or "0"
        mant = digits[0] + "." + (digits[1:] or "0")
    if "." not in mant:
        mant += ".0"
    return f"{sign}{mant}E{exp}"


def _json(fields, data: dict, version: int, floats: list) -> dict:
    out = {}
    for f in fields:
        if f[0] not in data:
            continue
        v = data[f[0]]
        if f[4] is not None and _in(f[5], version) and v == _default(f, version):
            continue               # a tagged field at its default is not written
        if f[1] == "[]struct" and v is not None:
            v = [_json(f[7], e, version, floats) for e in v]
        elif f[1] == "struct" and v is not None:
            v = _json(f[7], v, version, floats)
        elif f[1] in ("bytes",) and v is not None:
            v = base64.b64encode(v).decode("ascii")
        elif f[1] == "float64":
            floats.append(_java_double(v))
            v = f"\x00F{len(floats) - 1}\x00"
        out[f[0]] = v
    return out


def metadata_text(value: bytes) -> str:
    """The payload text of Kafka's ``--cluster-metadata-decoder`` for one record value."""
    type_name, version, data = decode_metadata_record(value)
    fields = RECORDS[next(k for k, v in RECORDS.items() if v[1] == type_name)][4]
    floats: list[str] = []
    text = json.dumps({"type": type_name, "version": version,
                       "data": _json(fields, data, version, floats)},
                      separators=(",", ":"), ensure_ascii=False)
    for k, f in enumerate(floats):
        text = text.replace(f'"\\u0000F{k}\\u0000"', f)
    return text


def cluster_metadata_text(key: bytes | None, value: bytes | None, offset: int
                          ) -> tuple[str | None, str | None]:
    """DumpLogSegments' ``(key, payload)`` for a metadata record: no key; the payload,
    or its skip message for a record that does not decode."""
    if value is None:
        return None, f"Error at {offset}, skipping. the record has no value"
    try:
        return None, metadata_text(value)
    except CoordinatorRecordError as e:
        return None, f"Error at {offset}, skipping. {e.reason}"
