"""Test helpers: Apache Avro's Java library as the oracle (``AvroOracle.java`` over
``make avro-java-jars``'s jars), one JVM per test module serving many requests, and the
value Spark's ``from_avro`` gives for what Java read (pyarrow's ``to_pylist`` form).

Nothing here uses spark_kafkalog: the expected values come from Java's reading of the bytes
and Spark's type rules (SchemaConverters) written out once, independently."""
from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
AVRO_JARS = REPO / ".cache" / "avro-java-jars"
HERE = Path(__file__).resolve().parent
_JDK = Path(os.environ["JAVA_HOME"]) / "bin" if os.environ.get("JAVA_HOME") else None
JAVA = str(_JDK / "java") if _JDK else "java"
JAVAC = str(_JDK / "javac") if _JDK else "javac"
#: a short-lived JVM: small heap, no C2
JVM = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto"]
_UTC = datetime.timezone.utc
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)


class JavaError(AssertionError):
    """Java's Avro refused a request (its exception's class and message)."""


class AvroJava:
    """``AvroOracle.java`` compiled once into ``build_dir`` and started once; every call is
    one request line to that JVM. :meth:`close` ends it."""

    def __init__(self, build_dir: Path):
        if not (AVRO_JARS / ".fetched").exists():
            raise AssertionError(f"{AVRO_JARS} is missing: run `make avro-java-jars` "
                                 "(Maven fetches Apache Avro's Java library)")
        cp = os.pathsep.join([str(build_dir), str(AVRO_JARS / "*")])
        out = subprocess.run([JAVAC, "-nowarn", "-cp", cp, "-d", str(build_dir),
                              str(HERE / "AvroOracle.java")], capture_output=True, text=True)
        if out.returncode:
            raise AssertionError("javac AvroOracle.java failed: " + out.stderr.strip())
        self.proc = subprocess.Popen([JAVA, *JVM, "-cp", cp, "AvroOracle"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, encoding="utf-8")

    def _call(self, **req) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"AvroOracle ended ({self.proc.wait()}): "
                                 f"{self.proc.stderr.read()}")
        answer = json.loads(line)
        if "error" in answer:
            raise JavaError(answer["error"])
        return answer

    def encode(self, schema, datums: list[str], block: int | None = None) -> list[bytes]:
        """Java's binary encoding of each datum (Avro's JSON encoding, text) with ``schema``;
        ``block``: Java's blocking encoder, arrays and maps in blocks of about that many
        bytes (a negative count, then the block's byte size)."""
        req = {"block": block} if block else {}
        got = self._call(op="encode", schema=_text(schema), datums=list(datums), **req)
        return [bytes.fromhex(h) for h in got["binary"]]

    def decode(self, writer, reader, payloads: list[bytes]) -> list:
        """Java's resolving read (GenericDatumReader(writer, reader)) of each payload, as
        ``AvroOracle.show`` prints it."""
        return self._call(op="decode", writer=_text(writer), reader=_text(reader),
                          binary=[bytes(p).hex() for p in payloads])["values"]

    def decode_each(self, writer, reader, payloads: list[bytes]) -> tuple[list, list]:
        """:meth:`decode` where a payload may fail: (values, errors), each error Java's
        exception text or None."""
        got = self._call(op="decode", writer=_text(writer), reader=_text(reader),
                         binary=[bytes(p).hex() for p in payloads], each=True)
        return got["values"], got["errors"]

    def compatible(self, writer, reader) -> tuple[bool, str]:
        """Java's SchemaCompatibility verdict on reading ``writer``'s data with ``reader``."""
        got = self._call(op="compat", writer=_text(writer), reader=_text(reader))
        return got["compatible"], got["message"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


def _text(schema) -> str:
    return schema if isinstance(schema, str) else json.dumps(schema)


# ---- Spark's from_avro value of what Java printed ------------------------------------------

class _Names:
    """Named types of one schema by full name (the specification's namespace rules), so
    that a reference by name finds its definition."""

    def __init__(self, schema):
        self.types: dict[str, dict] = {}
        self._walk(schema, "")

    @staticmethod
    def full(name: str, space: str) -> str:
        return name if "." in name or not space else f"{space}.{name}"

    def _walk(self, s, space):
        if isinstance(s, list):
            for b in s:
                self._walk(b, space)
        elif isinstance(s, dict):
            t = s["type"]
            if t in ("record", "error", "enum", "fixed"):
                full = self.full(s["name"], s.get("namespace", space))
                self.types[full] = s
                space = full.rpartition(".")[0]
                for f in s.get("fields", ()):
                    self._walk(f["type"], space)
            elif t == "array":
                self._walk(s["items"], space)
            elif t == "map":
                self._walk(s["values"], space)
            elif isinstance(t, (dict, list)):
                self._walk(t, space)

    def resolve(self, s, space):
        """``s`` with a name reference or a ``{"type": T}`` wrapper replaced by what it
        stands for, and the namespace the names inside it are relative to."""
        while True:
            if isinstance(s, str) and s not in _PRIMITIVES:
                s = self.types.get(self.full(s, space)) or self.types[s]
            elif isinstance(s, dict) and (not isinstance(s["type"], str) or
                                          s["type"] not in _PRIMITIVES + _COMPLEX):
                s = s["type"]
            else:
                break
        if isinstance(s, dict) and s["type"] in ("record", "error", "enum", "fixed"):
            space = self.full(s["name"], s.get("namespace", space)).rpartition(".")[0]
        return s, space


_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_COMPLEX = ("record", "error", "enum", "fixed", "array", "map")


def _kind(s) -> str:
    return s if isinstance(s, str) else ("union" if isinstance(s, list) else s["type"])


def spark_value(reader, value):
    """What Spark's ``from_avro`` gives for Java's ``value`` read with ``reader`` (schema
    JSON), in pyarrow's ``to_pylist`` form (a map is a list of (key, value) pairs)."""
    names = _Names(reader)
    return _spark(names, reader, "", value)


def _spark(names: _Names, s, space, v):
    s, space = names.resolve(s, space)
    if isinstance(s, list):
        if v is None:
            raise AssertionError("Java printed a union value without its branch")
        branch = s[v["branch"]]
        rest = [i for i, b in enumerate(s) if _kind(names.resolve(b, space)[0]) != "null"]
        if v["branch"] not in rest:
            return None
        if len(rest) == 1:
            return _spark(names, branch, space, v["value"])
        kinds = sorted(_kind(names.resolve(s[i], space)[0]) for i in rest)
        if kinds in (["int", "long"], ["double", "float"]):
            # Spark's one wide column for these two unions (SchemaConverters)
            inner = _spark(names, branch, space, v["value"])
            return float(inner) if kinds[0] == "double" else inner
        out = {f"member{k}": None for k in range(len(rest))}
        out[f"member{rest.index(v['branch'])}"] = _spark(names, branch, space, v["value"])
        return out
    t = s if isinstance(s, str) else s["type"]
    lt = None if isinstance(s, str) else s.get("logicalType")
    if t == "null":
        return None
    if t in ("boolean", "int", "long") and lt not in _LOGICAL_TIME:
        return v
    if t in ("float", "double"):
        return float(v)   # Java prints NaN and the infinities as text
    if t == "string" or t == "enum":
        return v
    if t in ("bytes", "fixed"):
        if lt == "decimal" and _valid_decimal(s):
            return decimal.Decimal(v)
        return bytes.fromhex(v)
    if t == "int" and lt == "date":
        return datetime.date.fromisoformat(v)
    if t == "long" and lt in ("timestamp-millis", "timestamp-micros"):
        sec, nano = v
        return _EPOCH + datetime.timedelta(seconds=sec, microseconds=nano // 1000)
    if t == "long" and lt in ("local-timestamp-millis", "local-timestamp-micros"):
        sec, nano = v
        return (_EPOCH + datetime.timedelta(seconds=sec, microseconds=nano // 1000)
                ).replace(tzinfo=None)
    if t in ("int", "long"):       # time-*, *-nanos: Spark keeps the number
        return v
    if t in ("record", "error"):
        return {f["name"]: _spark(names, f["type"], space, v[f["name"]]) for f in s["fields"]}
    if t == "array":
        return [_spark(names, s["items"], space, x) for x in v]
    if t == "map":
        return [(k, _spark(names, s["values"], space, x)) for k, x in v]
    raise AssertionError(f"no Spark value for {s}")


_LOGICAL_TIME = ("date", "timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                 "local-timestamp-micros")


def _valid_decimal(s) -> bool:
    p, sc = s.get("precision"), s.get("scale", 0)
    return isinstance(p, int) and p > 0 and isinstance(sc, int) and 0 <= sc <= p


def same(a, b) -> bool:
    """Equality of ``to_pylist`` values, with NaN equal to NaN (and -0.0 told from 0.0)."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b
