"""The oracle of the Protobuf tests: classes protoc (grpcio-tools) generates at test time,
the ``protobuf`` package's parse, and Spark's ``from_protobuf`` rules applied to the parsed
message (what is null, enum symbols, Timestamp/Duration) to give the expected Python value
of a row."""
from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys

from google.protobuf.descriptor import FieldDescriptor as FD


def compile_module(tmp_dir, text: str, stem: str | None = None, extra: dict | None = None):
    """Import the module protoc generates for ``text`` (file names made unique by content,
    so that the process-wide default pool never sees two files of one name)."""
    digest = hashlib.sha256((text + repr(sorted((extra or {}).items()))).encode()).hexdigest()[:10]
    stem = stem or f"t_{digest}"
    files = {f"{stem}.proto": text, **(extra or {})}
    for name, body in files.items():
        (tmp_dir / name).write_text(body)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_dir}",
                    f"--python_out={tmp_dir}", *files], check=True)
    if str(tmp_dir) not in sys.path:
        sys.path.insert(0, str(tmp_dir))
    importlib.invalidate_caches()
    return importlib.import_module(f"{stem}_pb2")


def parse(klass, payload: bytes):
    """``klass.FromString(payload)``, refusing a message missing a required field as
    Java's parser (Spark's DynamicMessage.parseFrom) does; Python's keeps it."""
    from google.protobuf.message import DecodeError
    msg = klass.FromString(payload)
    if not msg.IsInitialized():
        raise DecodeError(f"missing required fields: {msg.FindInitializationErrors()}")
    return msg


def frame(schema_id: int, payload: bytes, indexes: bytes = b"\0") -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + indexes + payload


def _scalar(fd, v):
    if fd.type == FD.TYPE_ENUM:
        ev = fd.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else f"UNKNOWN_ENUM_VALUE_{fd.enum_type.name}_{v}"
    if fd.type in (FD.TYPE_UINT32, FD.TYPE_FIXED32) and v >= 1 << 31:
        return v - (1 << 32)           # Spark's IntegerType: the same 32 bits
    if fd.type in (FD.TYPE_UINT64, FD.TYPE_FIXED64) and v >= 1 << 63:
        return v - (1 << 64)
    return v


def _kind(fd) -> str:
    if fd.type == FD.TYPE_MESSAGE:
        mt = fd.message_type
        if mt.name in ("Timestamp", "Duration") and \
                [f.name for f in mt.fields] == ["seconds", "nanos"]:
            return mt.name
        if mt.GetOptions().map_entry:
            return "map"
        return "message"
    return "scalar"


def _time(kind, m):
    """Microseconds (decoded_rows gives ours as int64 too: a datetime cannot hold every
    value); past int64 Spark's multiplyExact fails: the record is bad."""
    from google.protobuf.message import DecodeError
    if abs(m.seconds) > (2**63 - 1) // 1_000_000:
        raise DecodeError(f"{kind} of {m.seconds} seconds overflows microseconds")
    return m.seconds * 1_000_000 + int(m.nanos / 1000)


def _one(fd, v):
    k = _kind(fd)
    if k in ("Timestamp", "Duration"):
        return _time(k, v)
    if k == "message":
        return spark_value(v)
    return _scalar(fd, v)


def spark_value(msg, emit_defaults: bool = False) -> dict:
    """The row Spark's from_protobuf (default options) gives for parsed message ``msg``."""
    out = {}
    for fd in msg.DESCRIPTOR.fields:
        k = _kind(fd)
        if k == "message" and not _has_fields(fd.message_type):
            continue                      # Spark drops a message field with no fields
        v = getattr(msg, fd.name)
        if k == "map":
            vfd = fd.message_type.fields_by_name["value"]
            kfd = fd.message_type.fields_by_name["key"]
            out[fd.name] = sorted(((_scalar(kfd, key), _one(vfd, v[key])) for key in v),
                                  key=lambda kv: kv[0])
        elif fd.is_repeated:
            out[fd.name] = [_one(fd, x) for x in v]
        elif fd.has_presence:
            out[fd.name] = _one(fd, v) if (msg.HasField(fd.name) or fd.has_default_value) \
                else None
        else:
            default = fd.default_value
            out[fd.name] = _one(fd, v) if (emit_defaults or v != default or
                                           (isinstance(v, float) and str(v) == "-0.0")) \
                else None
    return out


def _has_fields(mt, seen=()) -> bool:
    return any(True for _ in mt.fields)


def decoded_rows(array) -> list:
    """Rows of our decoded column, maps as sorted (key, value) pairs like spark_value."""
    def fix(v, t):
        import pyarrow as pa
        if v is None:
            return None
        if pa.types.is_map(t):
            # a key written twice: ours keeps every entry as written (as Java's
            # DynamicMessage, which Spark reads); Python's protobuf keeps the last
            return sorted(dict((k, fix(x, t.item_type)) for k, x in v).items(),
                          key=lambda kv: kv[0])
        if pa.types.is_struct(t):
            return {f.name: fix(v[f.name], f.type) for f in t}
        if pa.types.is_list(t):
            return [fix(x, t.value_type) for x in v]
        return v
    return [fix(v, array.type) for v in array.cast(_ints(array.type)).to_pylist()]


def _ints(t):
    """``t`` with timestamps and durations as int64 (microseconds)."""
    import pyarrow as pa
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return pa.int64()
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_ints(t.key_type)),
                       t.item_field.with_type(_ints(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_ints(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_ints(t.value_type)))
    return t
