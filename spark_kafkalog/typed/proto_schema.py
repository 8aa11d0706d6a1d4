"""Protobuf schemas (``.proto`` text as the schema registry stores it) compiled into the
plan the ``_protobuf`` kernel runs, and their Arrow types.

The text and its imports (registry references: file name -> ``.proto`` text) are compiled
by protoc from ``grpcio-tools`` into a FileDescriptorSet, loaded into a private descriptor
pool; the plan is built from those descriptors. Types follow Spark's ``from_protobuf``
(``SchemaConverters.toSqlType`` with default options) in Spark's Arrow types; what is null
follows its ``ProtobufDeserializer``: a field is read when it is repeated, has an explicit
default or ``hasField`` is true, else null (a proto3 scalar without presence is null when it
equals its default, as Java's DynamicMessage keeps no presence for it).
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import SchemaError, SchemaResolutionError

# column kinds (the kernel's K_*)
K_BOOL, K_I32, K_I64, K_F32, K_F64, K_BIN, K_STRUCT, K_LIST = range(1, 9)
_WIDTH = {K_BOOL: 1, K_I32: 4, K_I64: 8, K_F32: 4, K_F64: 8, K_BIN: 0, K_STRUCT: 0,
          K_LIST: 0}
# descriptor field types (descriptor.proto's FieldDescriptorProto.Type), plus ours
T_DOUBLE, T_FLOAT, T_INT64, T_UINT64, T_INT32, T_FIXED64, T_FIXED32, T_BOOL = range(1, 9)
T_STRING, T_GROUP, T_MESSAGE, T_BYTES, T_UINT32, T_ENUM = range(9, 15)
T_SFIXED32, T_SFIXED64, T_SINT32, T_SINT64 = range(15, 19)
T_TIMESTAMP, T_DURATION, T_MAP, T_WRAPPER = 100, 101, 102, 103
# presence: null when equal to the default (proto3 implicit), null when absent, the
# default when absent (map entries' key/value), an error when absent (proto2 required)
P_IMPLICIT, P_EXPLICIT, P_ALWAYS, P_REQUIRED = range(4)

_SCALAR = {
    T_DOUBLE: (K_F64, pa.float64()), T_FLOAT: (K_F32, pa.float32()),
    T_INT64: (K_I64, pa.int64()), T_UINT64: (K_I64, pa.int64()),
    T_INT32: (K_I32, pa.int32()), T_FIXED64: (K_I64, pa.int64()),
    T_FIXED32: (K_I32, pa.int32()), T_BOOL: (K_BOOL, pa.bool_()),
    T_STRING: (K_BIN, pa.string()), T_BYTES: (K_BIN, pa.binary()),
    T_UINT32: (K_I32, pa.int32()), T_ENUM: (K_BIN, pa.string()),
    T_SFIXED32: (K_I32, pa.int32()), T_SFIXED64: (K_I64, pa.int64()),
    T_SINT32: (K_I32, pa.int32()), T_SINT64: (K_I64, pa.int64()),
    T_TIMESTAMP: (K_I64, pa.timestamp("us", tz="UTC")),
    T_DURATION: (K_I64, pa.duration("us")),
}
#: which values share a wire encoding closely enough that a writer's field decodes as the
#: reader's (protobuf's own compatibility: int32/uint32/int64/uint64/bool/enum all varint)
_WIRE_CLASS = {
    T_INT32: "varint", T_UINT32: "varint", T_INT64: "varint", T_UINT64: "varint",
    T_BOOL: "varint", T_ENUM: "varint", T_SINT32: "zigzag", T_SINT64: "zigzag",
    T_FIXED32: "fixed32", T_SFIXED32: "fixed32", T_FIXED64: "fixed64",
    T_SFIXED64: "fixed64", T_FLOAT: "float", T_DOUBLE: "double", T_STRING: "bytes",
    T_BYTES: "bytes", T_MESSAGE: "message", T_GROUP: "group",
}
_TYPE_NAME = {v: k[2:].lower() for k, v in globals().items() if k.startswith("T_")}

#: google/protobuf/wrappers.proto's messages (``unwrap_wrappers``: read as their value)
WRAPPERS = {f"google.protobuf.{n}Value" for n in
            ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}

#: the main file's name in protoc's virtual tree (imports cannot be named so)
MAIN_FILE = "__kafkalog_schema__.proto"


def _wkt_include() -> str:
    """protoc's include directory of the well-known types (inside grpc_tools)."""
    import importlib.resources
    return str(importlib.resources.files("grpc_tools") / "_proto")


#: protoc's output by (text, imports): filled by compiling, or from a pickled decoder (an
#: executor then needs neither protoc nor a subprocess)
COMPILED: dict[tuple, bytes] = {}


def _compile(text: str, imports: tuple[tuple[str, str], ...], used: dict) -> bytes:
    """The serialized FileDescriptorSet of ``text`` with its imports (by protoc, once),
    also noted in ``used``."""
    key = (text, imports)
    if key not in COMPILED:
        if len(COMPILED) >= 256:
            COMPILED.pop(next(iter(COMPILED)))
        COMPILED[key] = _protoc(text, imports)
    used[key] = COMPILED[key]
    return COMPILED[key]


def _protoc(text: str, imports: tuple[tuple[str, str], ...]) -> bytes:
    try:
        import grpc_tools  # noqa: F401  (protoc ships in grpcio-tools)
    except ImportError as err:
        raise SchemaError("Protobuf schemas need protoc from grpcio-tools "
                          "(pip install 'spark-kafkalog[typed]')") from err
    with tempfile.TemporaryDirectory(prefix="kafkalog-proto-") as tmp:
        for name, body in ((MAIN_FILE, text),) + imports:
            path = os.path.normpath(os.path.join(tmp, name))
            if not path.startswith(tmp + os.sep):
                raise SchemaError(f"import name {name!r} leaves the schema's tree")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(body)
        out = os.path.join(tmp, "set.pb")
        proc = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{_wkt_include()}",
             "--include_imports", f"--descriptor_set_out={out}", MAIN_FILE],
            capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            msg = proc.stderr.strip().replace(tmp + os.sep, "") or "protoc failed"
            raise SchemaError(f"Protobuf schema does not compile: {msg}")
        with open(out, "rb") as f:
            return f.read()


def _as_descriptor(text: str):
    """The FileDescriptorProto of a schema given as base64 of its serialized form (what
    confluent-kafka's Python serializers register), or None for ``.proto`` text."""
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError
    body = text.strip()
    if not body or any(ch in body for ch in " ;{\n"):
        return None
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body,
                                                                             validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    return fdp if (fdp.name or fdp.message_type) else None


def _file_protos(name: str, text: str, imports: Mapping[str, str], out: dict,
                 used: dict) -> None:
    """Add the FileDescriptorProtos of file ``name`` and of everything it imports to
    ``out`` (name -> proto), dependencies first."""
    if name in out:
        return
    fdp = _as_descriptor(text)
    if fdp is None:
        texts = tuple(sorted((k, v) for k, v in imports.items() if _as_descriptor(v) is None))
        from google.protobuf import descriptor_pb2
        fds = descriptor_pb2.FileDescriptorSet.FromString(_compile(text, texts, used))
        for fp in fds.file:
            if fp.name == MAIN_FILE:
                fp.name = name
            out.setdefault(fp.name, fp)
        return
    fdp.name = name
    for dep in fdp.dependency:
        if dep in imports:
            _file_protos(dep, imports[dep], imports, out, used)
        elif dep not in out:       # a well-known type: protoc's own copy
            _file_protos(f"__import_{dep}", f'syntax = "proto3";\nimport "{dep}";\n',
                         imports, out, used)
    out[name] = fdp


def load_file(text: str, imports: Mapping[str, str] | None = None,
              used: dict | None = None):
    """The FileDescriptor of ``text`` (``.proto`` source, or base64 of a serialized
    FileDescriptorProto) in a private pool; ``imports`` maps import names to either.
    ``used`` receives protoc's outputs it took (see :data:`COMPILED`)."""
    from google.protobuf import descriptor_pool
    out: dict = {}
    _file_protos(MAIN_FILE, text, dict(imports or {}), out, {} if used is None else used)
    pool = descriptor_pool.DescriptorPool()
    try:
        for fp in out.values():
            pool.Add(fp)
        return pool.FindFileByName(MAIN_FILE)
    except (TypeError, KeyError, ValueError) as err:
        raise SchemaError(f"Protobuf schema does not load: {err}") from err


def message_path(fd, full_name: str) -> list[int] | None:
    """Confluent's message indexes of the message ``full_name`` in file ``fd``: its index
    among the file's top-level messages, then among each nested level's."""
    def walk(msgs, path):
        for i, m in enumerate(msgs):
            if m.full_name == full_name:
                return path + [i]
            got = walk(m.nested_types, path + [i])
            if got is not None:
                return got
        return None
    return walk(list(fd.message_types_by_name.values()), [])


def pick_message(fd, message: str | None):
    """The message the column is typed by: ``message`` (a full name) or the file's first."""
    tops = list(fd.message_types_by_name.values())
    if message is None:
        if not tops:
            raise SchemaError("Protobuf schema declares no message")
        return tops[0]
    path = message_path(fd, message)
    if path is None:
        raise SchemaError(f"Protobuf schema has no message {message!r}")
    d = tops[path[0]]
    for i in path[1:]:
        d = d.nested_types[i]
    return d


def _ftype(f) -> int:
    if f.type == T_MESSAGE:
        mt = f.message_type
        names = [x.name for x in mt.fields]
        if mt.name in ("Timestamp", "Duration") and names == ["seconds", "nanos"]:
            # Spark matches these by name and shape, not by package
            return T_TIMESTAMP if mt.name == "Timestamp" else T_DURATION
        if f.is_repeated and mt.GetOptions().map_entry:
            return T_MAP
    return f.type


@dataclass
class Col:
    """One Arrow column the kernel fills (children in ``kids``)."""
    kind: int
    type: pa.DataType
    kids: list[int] = field(default_factory=list)
    nullable: bool = True       # False: a "null" here (under a null parent) is a zero


class Plan:
    """The reader message compiled: columns, messages, fields, enums as flat tables."""

    # field table columns
    F_NUMBER, F_TYPE, F_COL, F_ELEM, F_REPEATED, F_PRESENCE, F_ONEOF, F_SUB, F_ENUM, \
        F_CLOSED, F_HAS_DEFAULT, F_DEF_I, F_DEF_OFF, F_DEF_LEN, F_INNER = range(15)
    # message table columns
    M_F0, M_NF, M_COL, M_LUT0, M_LUTN, M_ONEOF0, M_NONEOF = range(7)
    LUT_MAX = 1024          # field numbers below this are found by a direct table

    def __init__(self, descriptor, emit_default_values: bool = False,
                 unwrap_wrappers: bool = False):
        self.descriptor = descriptor
        self.emit_defaults = emit_default_values
        self.unwrap = unwrap_wrappers
        self.cols: list[Col] = []
        self.fields: list[list[int]] = []
        self.msgs: list[list[int]] = []
        self.lut: list[int] = []
        self.enum_vals: list[tuple[int, int, int]] = []     # number, name off, name len
        self.enums: list[tuple[int, int, int, int]] = []    # v0, nv, name off, name len
        self._enum_ids: dict[str, int] = {}
        self.consts = bytearray()
        self.names: list[str] = []                          # field path per field row
        self.top = self._message(descriptor, (descriptor.full_name,), "", False)
        self.arrow_type = self.cols[self.msgs[self.top][self.M_COL]].type

    # -- tables ---------------------------------------------------------------------------
    def _const(self, data: bytes) -> tuple[int, int]:
        off = len(self.consts)
        self.consts += data
        return off, len(data)

    def _col(self, kind, typ, kids=()) -> int:
        self.cols.append(Col(kind, typ, list(kids)))
        return len(self.cols) - 1

    def _enum(self, et) -> int:
        if et.full_name in self._enum_ids:
            return self._enum_ids[et.full_name]
        v0, seen = len(self.enum_vals), set()
        for v in et.values:
            if v.number in seen:    # an alias: Java's findValueByNumber gives the first
                continue
            seen.add(v.number)
            self.enum_vals.append((v.number, *self._const(v.name.encode())))
        vals = self.enum_vals[v0:]
        vals.sort(key=lambda t: t[0])        # binary search in the kernel
        self.enum_vals[v0:] = vals
        self.enums.append((v0, len(vals), *self._const(et.name.encode())))
        self._enum_ids[et.full_name] = len(self.enums) - 1
        return len(self.enums) - 1

    def _message(self, d, seen: tuple[str, ...], path: str, entry: bool) -> int:
        """Plan of message ``d``; its struct column is made here. Returns the msg index,
        or -1 when the message has no fields left (Spark drops such a field)."""
        rows = []
        for f in d.fields:
            rows.append(self._field(f, seen, f"{path}{f.name}", entry))
        rows = [r for r in rows if r is not None]
        struct_fields = []
        kid_cols = []
        for r, name, typ, nullable in rows:
            struct_fields.append(pa.field(name, typ, nullable=nullable))
            kid_cols.append(r[self.F_COL])
            self.cols[r[self.F_COL]].nullable = nullable
        col = self._col(K_STRUCT, pa.struct(struct_fields), kid_cols)
        oneofs = {}
        for r, *_ in rows:
            if r[self.F_ONEOF] >= 0:
                r[self.F_ONEOF] = oneofs.setdefault(r[self.F_ONEOF], len(oneofs))
        f0 = len(self.fields)
        for r, name, *_ in rows:
            self.fields.append(r)
            self.names.append(f"{path}{name}")
        numbers = [r[self.F_NUMBER] for r, *_ in rows]
        lutn = min(max(numbers, default=0) + 1, self.LUT_MAX)
        lut0 = len(self.lut)
        self.lut += [-1] * lutn
        for i, n in enumerate(numbers):
            if n < lutn:
                self.lut[lut0 + n] = i
        self.msgs.append([f0, len(rows), col, lut0, lutn, 0, len(oneofs)])
        return len(self.msgs) - 1

    def _field(self, f, seen, path, entry):
        """(field row, name, arrow type, nullable) of field ``f``, or None when dropped."""
        t = _ftype(f)
        if self.unwrap and t == T_MESSAGE and f.message_type.full_name in WRAPPERS:
            t = T_WRAPPER
        if t == T_GROUP:
            raise SchemaError(f"Protobuf field {path}: groups are not supported")
        row = [0] * 15
        row[self.F_NUMBER] = f.number
        row[self.F_TYPE] = t
        row[self.F_ENUM] = -1
        row[self.F_SUB] = -1
        row[self.F_ONEOF] = f.containing_oneof.index if f.containing_oneof is not None \
            and not entry else -1
        if entry:
            presence = P_ALWAYS
        elif f.is_required:
            presence = P_REQUIRED
        elif f.has_presence:
            presence = P_EXPLICIT
        else:
            presence = P_ALWAYS if self.emit_defaults else P_IMPLICIT
        row[self.F_PRESENCE] = presence
        if t == T_MAP:
            sub = self._message(f.message_type, seen, f"{path}.", True)
            m = self.msgs[sub]
            kf = self.fields[m[self.M_F0]: m[self.M_F0] + m[self.M_NF]]
            if [r[self.F_NUMBER] for r in kf] != [1, 2]:
                return None        # a value type with no fields left: Spark drops the map
            entries = self.cols[m[self.M_COL]]
            kt, vt = entries.type.field(0).type, entries.type.field(1).type
            typ = pa.map_(pa.field("key", kt, nullable=False),
                          pa.field("value", vt, nullable=False))
            entries.type = pa.struct([typ.key_field, typ.item_field])   # key, value not null
            row[self.F_COL] = self._col(K_LIST, typ, [m[self.M_COL]])
            row[self.F_ELEM] = m[self.M_COL]
            entries.nullable = False
            row[self.F_SUB] = sub
            row[self.F_REPEATED] = 1
            return row, f.name, typ, True
        if t == T_MESSAGE:
            name = f.message_type.full_name
            if name in seen:
                raise SchemaError(
                    f"Protobuf field {path} makes message {name} recursive: Spark has no "
                    "type for a recursive message (recursive schemas are refused)")
            sub = self._message(f.message_type, seen + (name,), f"{path}.", False)
            if self.msgs[sub][self.M_NF] == 0:
                return None        # Spark drops a message field with no fields
            vcol = self.msgs[sub][self.M_COL]
            row[self.F_SUB] = sub
        elif t in (T_TIMESTAMP, T_DURATION):
            vcol = self._col(*_SCALAR[t])
        elif t == T_WRAPPER:
            # Spark's unwrap.primitive.wrapper.types: the wrapper's value field itself
            inner = f.message_type.fields_by_name["value"].type
            row[self.F_INNER] = inner
            vcol = self._col(*_SCALAR[inner])
        else:
            kind, typ = _SCALAR[t]
            vcol = self._col(kind, typ)
            if t == T_ENUM:
                row[self.F_ENUM] = self._enum(f.enum_type)
                row[self.F_CLOSED] = int(f.enum_type.is_closed)
            if not f.is_repeated and (f.has_default_value or presence == P_ALWAYS
                                      or t == T_ENUM):
                row[self.F_HAS_DEFAULT] = int(f.has_default_value)
                dv = f.default_value
                if t == T_ENUM:
                    dv = dv if isinstance(dv, int) else f.enum_type.values_by_name[dv].number
                    row[self.F_DEF_I] = dv
                elif t in (T_STRING, T_BYTES):
                    b = dv.encode("utf-8") if isinstance(dv, str) else bytes(dv)
                    row[self.F_DEF_OFF], row[self.F_DEF_LEN] = self._const(b)
                elif t in (T_FLOAT, T_DOUBLE):
                    row[self.F_DEF_I] = struct.unpack("<q", struct.pack("<d", float(dv)))[0]
                else:
                    row[self.F_DEF_I] = int(dv) if t != T_UINT64 else \
                        struct.unpack("<q", struct.pack("<Q", int(dv)))[0]
        vtype = self.cols[vcol].type
        if f.is_repeated:
            typ = pa.list_(pa.field("element", vtype, nullable=False))
            row[self.F_COL] = self._col(K_LIST, typ, [vcol])
            row[self.F_ELEM] = vcol
            self.cols[vcol].nullable = False
            row[self.F_REPEATED] = 1
            return row, f.name, typ, True
        row[self.F_COL] = row[self.F_ELEM] = vcol
        return row, f.name, vtype, not f.is_required

    # -- for the kernel -------------------------------------------------------------------
    def tables(self) -> dict:
        cols = np.array([[c.kind, _WIDTH[c.kind], 0, len(c.kids), int(c.nullable)]
                         for c in self.cols], dtype=np.int64).reshape(-1, 5)
        kids = []
        for i, c in enumerate(self.cols):
            cols[i, 2] = len(kids)
            kids += c.kids
        return {
            "cols": cols,
            "kids": np.array(kids or [0], dtype=np.int64),
            "fields": np.array(self.fields or [[0] * 15], dtype=np.int64).reshape(-1, 15),
            "msgs": np.array(self.msgs, dtype=np.int64).reshape(-1, 7),
            "lut": np.array(self.lut or [-1], dtype=np.int32),
            "enum_vals": np.array(self.enum_vals or [(0, 0, 0)], dtype=np.int64).reshape(-1, 3),
            "enums": np.array(self.enums or [(0, 0, 0, 0)], dtype=np.int64).reshape(-1, 4),
            "consts": bytes(self.consts) or b"\0",
        }


def check_resolves(reader, writer, what: str) -> None:
    """Raise SchemaResolutionError when ``writer`` (a message Descriptor) does not decode
    as ``reader`` by field number: a field number both declare with wire encodings that
    differ (a varint read as a string), a changed cardinality, or a nested message that
    does not resolve. Fields only one side has are fine (skipped / null)."""
    def walk(r, w, path, seen):
        wf = {f.number: f for f in w.fields}
        for f in r.fields:
            g = wf.get(f.number)
            if g is None:
                continue
            where = f"{path}{f.name} (field {f.number})"
            if f.is_repeated != g.is_repeated:
                raise SchemaResolutionError(
                    f"writer {what} ({w.full_name}) field {g.name} is "
                    f"{'repeated' if g.is_repeated else 'singular'}, reader {r.full_name} "
                    f"field {where} is not")
            ct, cw = _WIRE_CLASS.get(f.type), _WIRE_CLASS.get(g.type)
            if ct != cw:
                raise SchemaResolutionError(
                    f"writer {what} ({w.full_name}) field {g.name} is "
                    f"{_TYPE_NAME.get(g.type, g.type)}, reader {r.full_name} field {where} "
                    f"is {_TYPE_NAME.get(f.type, f.type)}: their wire encodings differ")
            if f.type == T_MESSAGE and f.message_type.full_name not in seen:
                walk(f.message_type, g.message_type, f"{path}{f.name}.",
                     seen | {f.message_type.full_name})
    walk(reader, writer, "", {reader.full_name})


def schema_digest(text: str) -> str:
    """A short digest naming a schema text in messages."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
