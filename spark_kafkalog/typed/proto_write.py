"""Encoding Arrow columns as Protobuf messages (the write side of issue 38, item 6).

:class:`ProtobufEncoder` takes the subject's ``.proto`` text (compiled as the reader compiles
it: ``proto_schema.load_file``) and a struct type, and turns arrays of that type into
messages framed as Confluent's serializer frames them: magic 0, the 4-byte big-endian id,
the message indexes (zigzag varints: the count, then the indexes; ``[0]`` as the single
byte 0), then the message — or bare with no id. The schema and the struct type are
compiled once into a program of the kernel ``_protobuf_encode.pyx`` (a node per field
position); each batch, Arrow compute normalises the leaves (integers to int64, floats to
float64, enum symbols to numbers, times to int64 counts) and the kernel writes every message
of the batch into one buffer with the GIL released: no Python object per record or field.

Struct fields are matched to message fields by name (Spark's ``to_protobuf``): a struct
field the message lacks is refused, a message field the struct lacks is left unset unless it
is proto2 ``required``. Fields are written in field-number order. Presence: a field
without presence (proto3 implicit) is not written when null or equal to its default (a
float's -0.0 is written: its bits are not zero); a field with presence (proto2
``optional``, proto3 ``optional``, messages, oneof members) is written when not null; a
null ``required`` field, a row setting two members of one oneof, a null list element or
map value, an enum symbol the enum lacks, a number outside the field's range are refused
naming the row and the field. Repeated scalars are packed as proto3 packs them (proto2 only
with ``[packed = true]``); maps are entries with key 1 and value 2, both always written.
The types are ``from_protobuf``'s (see ``typed/protobuf.py``): Timestamp from
``timestamp``, Duration from ``duration`` (or either as a struct of seconds/nanos), a
wrapper from its ``struct<value>`` or from the bare value, an enum from its symbol (or
its number), unsigned ints from Spark's signed ints of the same bits.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed import _protobuf_encode as _k
from spark_kafkalog.typed import proto_schema as ps

__all__ = ["ProtobufEncoder", "message_indexes"]

_VARINT_T = {ps.T_INT32, ps.T_INT64, ps.T_UINT32, ps.T_UINT64, ps.T_BOOL, ps.T_ENUM}
_ZIGZAG_T = {ps.T_SINT32, ps.T_SINT64}
_FIX32_T = {ps.T_FIXED32, ps.T_SFIXED32, ps.T_FLOAT}
_FIX64_T = {ps.T_FIXED64, ps.T_SFIXED64, ps.T_DOUBLE}
#: the range a 32-bit field takes (unsigned ones also from Spark's int32 of the same bits)
_RANGE32 = {ps.T_INT32: (-(1 << 31), (1 << 31) - 1), ps.T_SINT32: (-(1 << 31), (1 << 31) - 1),
            ps.T_SFIXED32: (-(1 << 31), (1 << 31) - 1),
            ps.T_UINT32: (-(1 << 31), (1 << 32) - 1), ps.T_FIXED32: (-(1 << 31), (1 << 32) - 1)}
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1000_000, "ns": 1000_000_000}
#: an enum symbol that is not in the enum (the kernel refuses it naming the row)
_NO_SYMBOL = np.iinfo(np.int64).min


def _varint_bytes(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def message_indexes(path: list[int]) -> bytes:
    """Confluent's message-index array: ``[0]`` as one 0 byte, else the zigzag varint
    count and indexes."""
    if path == [0]:
        return b"\x00"
    return b"".join(_varint_bytes((i << 1) ^ (i >> 63)) for i in [len(path), *path])


def _wire(f) -> int:
    if f.type in _FIX32_T:
        return 5
    if f.type in _FIX64_T:
        return 1
    return 0 if f.type in _VARINT_T | _ZIGZAG_T else 2


def _tag(f, wire: int) -> bytes:
    return _varint_bytes((f.number << 3) | wire)


def _is_string(t) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


class _Bind:
    """How a batch's array reaches node ``idx``: ``how`` normalises it, ``get`` picks it
    from the parent struct (a child index; None: the parent's own array, a bare wrapper)."""
    __slots__ = ("idx", "how", "kids", "get", "arg")

    def __init__(self, idx: int, how: str, kids=(), arg=None):
        self.idx, self.how, self.kids, self.get, self.arg = idx, how, list(kids), None, arg


class ProtobufEncoder:
    """Encodes arrays of one struct type as messages of one ``.proto`` schema.

    ``named_types``: the files the schema imports (registry references, name -> text);
    ``message``: the message's full name (default the file's first, as Confluent's
    serializer); ``schema_id`` None: the bare message. The type is matched now, so a
    struct that does not fit the message raises SchemaError before any row is encoded."""

    def __init__(self, schema: str, arrow_type: pa.DataType, schema_id: int | None = None,
                 column: str = "value", named_types: Mapping[str, str] | None = None,
                 message: str | None = None):
        self.compiled: dict = {}             # protoc's outputs: see proto_schema.COMPILED
        fd = ps.load_file(schema, dict(named_types or {}), self.compiled)
        self.descriptor = ps.pick_message(fd, message)
        self.arrow_type = arrow_type
        self.column = column
        if not pa.types.is_struct(arrow_type):
            raise SchemaError(f"{column}: a Protobuf column is a struct, not {arrow_type}")
        path = ps.message_path(fd, self.descriptor.full_name)
        self.prefix = b"" if schema_id is None else \
            b"\x00" + int(schema_id).to_bytes(4, "big") + message_indexes(path)
        self._prog = _k.Program()
        self._lock = threading.Lock()        # one batch bound to the program at a time
        self._info: list[dict] = []          # per node: what its errors say
        self._top = self._message_node(self.descriptor, arrow_type, column, "VALUE", b"", -1)

    def encode(self, values, first_row: int = 0) -> pa.BinaryArray:
        """``values`` as framed messages, null rows null (tombstones); a bad value raises
        BadRowError naming its row (counted from ``first_row``) and field."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type != self.arrow_type:
            raise SchemaError(f"{self.column}: type {values.type} is not the "
                              f"{self.arrow_type} the encoder was built for")
        bound: dict[int, pa.Array] = {}
        with self._lock:
            try:
                self._bind(self._top, values, bound)
                out, err = self._prog.encode(self._top.idx, len(values), self.prefix)
            finally:
                self._prog.unbind()
        if err is not None:
            self._raise(err, bound, first_row)
        return out

    def _raise(self, err, bound: dict, first_row: int):
        code, node, i, val = err
        e = _k.ERRORS
        if code == e["NOMEM"]:
            raise MemoryError("Protobuf encoder: out of memory")
        if code == e["TOO_BIG"]:
            raise SchemaError("Protobuf values of one batch pass 2 GiB; write smaller batches")
        info = self._info[node]
        what = {
            e["REQUIRED"]: lambda: "is null, but the field is required",
            e["ONEOF"]: lambda: f"sets a second member of oneof {info['oneof_name']}",
            e["RANGE"]: lambda: f"value {val} does not fit {info['type']}",
            e["U64"]: lambda: "does not fit a signed 64-bit field",
            e["NULL_ELEM"]: lambda: "holds a null element (a repeated field cannot)",
            e["NULL_MAPVAL"]: lambda: "holds a null map value (a Protobuf map cannot)",
            e["ENUM_SYMBOL"]: lambda: f"symbol {bound[node][val].as_py()!r} is not in "
                                      f"enum {info['enum']}",
            e["ENUM_RANGE"]: lambda: "names an enum number outside int32",
        }[code]()
        raise BadRowError(f"row {i + first_row}: {info['path']} {what}")

    # -- the program, once per (schema, type) -------------------------------------------
    def _node(self, kind: str, mode: str, tag: bytes, path: str, oneof: int = -1,
              **info) -> int:
        idx = self._prog.node(kind, mode, tag, info.pop("conv", "NONE"), info.pop("lo", None),
                              info.pop("hi", None), info.pop("from_u64", False),
                              info.pop("per", 0), info.pop("duration", False), oneof)
        self._info.append({"path": path, **info})
        return idx

    def _message_node(self, d, at, path: str, mode: str, tag: bytes, oneof: int) -> _Bind:
        names = {at.field(i).name: i for i in range(at.num_fields)}
        by_name = {f.name: f for f in d.fields}
        extra = [n for n in names if n not in by_name]
        if extra:
            raise SchemaError(f"{path}: field {extra[0]!r} of the struct is not in Protobuf "
                              f"message {d.full_name}")
        kids, slots = [], {}
        for f in sorted(d.fields, key=lambda f: f.number):
            fpath = f"{path}.{f.name}"
            if f.name not in names:
                if f.is_required:
                    raise SchemaError(f"{path}: Protobuf message {d.full_name} requires "
                                      f"field {f.name!r}, which the struct lacks")
                continue
            if f.type == ps.T_GROUP:
                raise SchemaError(f"{fpath}: Protobuf groups are not supported")
            slot, oneof_name = -1, None
            if f.containing_oneof is not None and f.has_presence:
                oneof_name = f.containing_oneof.name
                if oneof_name not in slots:
                    slots[oneof_name] = self._prog.oneof_slot()
                slot = slots[oneof_name]
            b = self._field(f, at.field(names[f.name]).type, fpath, slot, oneof_name)
            b.get = names[f.name]
            kids.append(b)
        idx = self._node("MSG", mode, tag, path, oneof)
        self._prog.children(idx, [b.idx for b in kids])
        return _Bind(idx, "struct", kids)

    def _field(self, f, at, path: str, slot: int, oneof_name) -> _Bind:
        ft = ps._ftype(f)
        if ft == ps.T_MAP:
            if not pa.types.is_map(at):
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as Protobuf "
                                  f"map field {f.name}")
            entry = f.message_type
            kf, vf = entry.fields_by_name["key"], entry.fields_by_name["value"]
            k = self._value(kf, at.key_type, f"{path}.key", "VALUE", _tag(kf, _wire(kf)))
            v = self._value(vf, at.item_type, f"{path}.value", "VALUE", _tag(vf, _wire(vf)))
            idx = self._node("MSG", "MAP", _tag(f, 2), path)
            self._prog.children(idx, [k.idx, v.idx])
            return _Bind(idx, "map", [k, v])
        if f.is_repeated:
            if not (pa.types.is_list(at) or pa.types.is_large_list(at)):
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as repeated "
                                  f"Protobuf field {f.name}")
            packed = f.is_packed
            # unpacked, each element carries the field's tag (the kernel writes it)
            elem = self._value(f, at.value_type, f"{path}[]", "VALUE",
                               b"" if packed else _tag(f, _wire(f)))
            idx = self._node("MSG", "PACKED" if packed else "REPEATED",
                             _tag(f, 2 if packed else _wire(f)), path)
            self._prog.children(idx, [elem.idx])
            return _Bind(idx, "list", [elem])
        mode = "REQUIRED" if f.is_required else "EXPLICIT" if f.has_presence else "IMPLICIT"
        return self._value(f, at, path, mode, _tag(f, _wire(f)), slot, oneof_name=oneof_name)

    def _value(self, f, at, path: str, mode: str, tag: bytes, slot: int = -1,
               **info) -> _Bind:
        """A node writing ``f``'s value from arrays of type ``at``."""
        ft = ps._ftype(f)
        if ft in (ps.T_TIMESTAMP, ps.T_DURATION) and (pa.types.is_timestamp(at) or
                                                      pa.types.is_duration(at)):
            want = pa.types.is_timestamp if ft == ps.T_TIMESTAMP else pa.types.is_duration
            if not want(at):
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as "
                                  f"{f.message_type.full_name}")
            idx = self._node("TIME", mode, tag, path, slot, per=_PER_SECOND[at.unit],
                             duration=ft == ps.T_DURATION, **info)
            return _Bind(idx, "int")
        if f.type == ps.T_MESSAGE:
            if pa.types.is_struct(at):
                b = self._message_node(f.message_type, at, path, mode, tag, slot)
                self._info[b.idx].update(info)
                return b
            if f.message_type.full_name not in ps.WRAPPERS:
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as "
                                  f"Protobuf message {f.message_type.full_name}")
            # the bare value: a message of one field read from the same array
            vf = f.message_type.fields_by_name["value"]
            kid = self._value(vf, at, f"{path}.value", "IMPLICIT", _tag(vf, _wire(vf)))
            idx = self._node("MSG", mode, tag, path, slot, **info)
            self._prog.children(idx, [kid.idx])
            return _Bind(idx, "struct", [kid])
        return self._scalar(f, at, path, mode, tag, slot, info)

    def _scalar(self, f, at, path: str, mode: str, tag: bytes, slot: int,
                info: dict) -> _Bind:
        t = f.type

        def refuse():
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as Protobuf "
                              f"{ps._TYPE_NAME.get(t, t)}")

        def node(kind, how, **more):
            return _Bind(self._node(kind, mode, tag, path, slot, **info, **more), how,
                         arg=more.get("enum_type"))

        if t in (ps.T_STRING, ps.T_BYTES):
            ok = _is_string(at) if t == ps.T_STRING else \
                (pa.types.is_binary(at) or pa.types.is_large_binary(at) or _is_string(at))
            if not ok:
                refuse()
            return node("BYTES", "bytes")
        if t == ps.T_BOOL:
            if not pa.types.is_boolean(at):
                refuse()
            return node("BOOL", "bool")
        if t == ps.T_ENUM:
            et = f.enum_type
            if pa.types.is_integer(at):
                # an enum number is an int32 on the wire (protobuf refuses any other)
                return node("INT", "int", type=f"enum {et.full_name}",
                            lo=-(1 << 31), hi=(1 << 31) - 1)
            if not _is_string(at):
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as Protobuf "
                                  f"enum {et.full_name} (a string symbol or an int number)")
            return node("ENUMSTR", "enum", enum=et.full_name, enum_type=et)
        if t in (ps.T_FLOAT, ps.T_DOUBLE):
            if not (pa.types.is_floating(at) or pa.types.is_integer(at)):
                refuse()
            return node("FLOAT" if t == ps.T_FLOAT else "DOUBLE", "float")
        if not pa.types.is_integer(at):
            refuse()
        more = {"type": ps._TYPE_NAME[t]}
        if pa.types.is_uint64(at) and t not in (ps.T_UINT64, ps.T_FIXED64):
            more["from_u64"] = True
        if t in _RANGE32:
            more["lo"], more["hi"] = _RANGE32[t]
        if t in (ps.T_UINT32, ps.T_FIXED32):
            more["conv"] = "MASK32"                  # Spark's int32 of the same bits
        elif t in _ZIGZAG_T:
            more["conv"] = "ZIGZAG"
        kind = "FIX32" if t in _FIX32_T else "FIX64" if t in _FIX64_T else "INT"
        return node(kind, "int", **more)             # int32 < 0: ten bytes, as spec'd

    # -- a batch's buffers -----------------------------------------------------------------
    def _bind(self, b: _Bind, arr: pa.Array, bound: dict):
        prog, how = self._prog, b.how
        bound[b.idx] = arr
        if how == "struct":
            prog.bind(b.idx, arr)
            for kid in b.kids:
                self._bind(kid, arr if kid.get is None else arr.field(kid.get), bound)
        elif how == "list":
            if pa.types.is_large_list(arr.type):
                arr = arr.cast(pa.list_(arr.type.value_field))
            prog.bind(b.idx, arr, None, arr)
            self._bind(b.kids[0], arr.values, bound)
        elif how == "map":
            prog.bind(b.idx, arr, None, arr)
            entries = arr.values
            self._bind(b.kids[0], entries.field(0), bound)
            self._bind(b.kids[1], entries.field(1), bound)
        elif how == "int":
            data = arr.view(pa.int64()) if pa.types.is_uint64(arr.type) else \
                arr.cast(pa.int64())
            prog.bind(b.idx, arr, data)
        elif how == "float":
            prog.bind(b.idx, arr, arr.cast(pa.float64()))
        elif how == "bool":
            prog.bind(b.idx, arr, arr)
        elif how == "bytes":
            if not pa.types.is_binary(arr.type):
                arr = arr.cast(pa.binary())
            prog.bind(b.idx, arr, arr, arr)
        else:
            prog.bind(b.idx, arr, self._enum_numbers(b.arg, arr))

    @staticmethod
    def _enum_numbers(et, arr: pa.Array) -> np.ndarray:
        """Each symbol's number (an open enum's UNKNOWN_ENUM_VALUE_<Enum>_<n>, as the
        reader and Java name an unknown number, is n); _NO_SYMBOL where the enum has none."""
        names = [v.name for v in et.values]
        numbers = np.array([v.number for v in et.values] or [0], dtype=np.int64)
        idx = pc.index_in(arr, value_set=pa.array(names, arr.type))
        nums = numbers[np.asarray(idx.fill_null(0), dtype=np.int64)]
        unknown = np.asarray(idx.is_null(), dtype=bool)
        if arr.null_count:
            unknown &= np.asarray(arr.is_valid(), dtype=bool)     # a null is no symbol
        if unknown.any() and not et.is_closed:
            tail = pc.extract_regex(arr.cast(pa.string()),
                                    f"^UNKNOWN_ENUM_VALUE_{et.name}_(?P<n>-?[0-9]{{1,10}})$")
            hit = np.asarray(tail.is_valid(), dtype=bool) & unknown
            if hit.any():
                n = pc.cast(tail.field("n").filter(pa.array(hit)), pa.int64())
                nums[hit] = np.asarray(n, dtype=np.int64)
                unknown &= ~hit
        nums[unknown] = _NO_SYMBOL
        return nums
