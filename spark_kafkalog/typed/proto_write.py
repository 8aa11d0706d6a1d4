"""Encoding Arrow columns as Protobuf messages (the write side of issue 38, item 6).

:class:`ProtobufEncoder` takes the subject's ``.proto`` text (compiled as the reader compiles
it: ``proto_schema.load_file``) and a struct type, and turns arrays of that type into
messages framed as Confluent's serializer frames them: magic 0, the 4-byte big-endian id,
the message indexes (zigzag varints: the count, then the indexes; ``[0]`` as the single
byte 0), then the message — or bare with no id. Columnar: NumPy writes the varints and
fixed-width values of a whole field at once, Arrow compute joins a row's pieces; there is no
Python object per record or field (a plain NumPy/Arrow encoder, not a compiled kernel).

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

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import BadRowError, SchemaError
from spark_kafkalog.typed import proto_schema as ps

__all__ = ["ProtobufEncoder", "message_indexes"]

_EMPTY = pa.scalar(b"", pa.binary())
_VARINT_T = {ps.T_INT32, ps.T_INT64, ps.T_UINT32, ps.T_UINT64, ps.T_BOOL, ps.T_ENUM}
_ZIGZAG_T = {ps.T_SINT32, ps.T_SINT64}
_FIXED = {ps.T_FIXED32: "<u4", ps.T_SFIXED32: "<i4", ps.T_FLOAT: "<f4",
          ps.T_FIXED64: "<u8", ps.T_SFIXED64: "<i8", ps.T_DOUBLE: "<f8"}
#: the range a 32-bit field takes (unsigned ones also from Spark's int32 of the same bits)
_RANGE32 = {ps.T_INT32: (-(1 << 31), (1 << 31) - 1), ps.T_SINT32: (-(1 << 31), (1 << 31) - 1),
            ps.T_SFIXED32: (-(1 << 31), (1 << 31) - 1),
            ps.T_UINT32: (-(1 << 31), (1 << 32) - 1), ps.T_FIXED32: (-(1 << 31), (1 << 32) - 1)}
_PER_SECOND = {"s": 1, "ms": 1000, "us": 1000_000, "ns": 1000_000_000}


# ---- bytes, a whole column at a time ----------------------------------------------------

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


def _binary(data: np.ndarray, offsets: np.ndarray) -> pa.BinaryArray:
    return _binary_at(data, offsets)


def _binary_at(data: np.ndarray, offsets: np.ndarray) -> pa.BinaryArray:
    """A binary array over ``data`` whose values start at ``offsets`` (need not be 0)."""
    if len(offsets) and offsets[-1] >= 1 << 31:
        raise SchemaError("Protobuf values of one batch pass 2 GiB; write smaller batches")
    return pa.Array.from_buffers(pa.binary(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets.astype(np.int32)),
                                  pa.py_buffer(data)])


def _varints(u: np.ndarray) -> pa.BinaryArray:
    """Each uint64 of ``u`` as a base-128 varint."""
    u = np.ascontiguousarray(u, dtype=np.uint64)
    lens = np.ones(len(u), dtype=np.int64)
    x = u >> np.uint64(7)
    while x.any():
        lens += x != 0
        x >>= np.uint64(7)
    offs = np.zeros(len(u) + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    out = np.empty(int(offs[-1]), dtype=np.uint8)
    x = u.copy()
    for k in range(int(lens.max()) if len(u) else 0):
        m = lens > k
        more = (lens[m] > k + 1).astype(np.uint8) << 7
        out[offs[:-1][m] + k] = (x[m] & np.uint64(0x7F)).astype(np.uint8) | more
        x >>= np.uint64(7)
    return _binary(out, offs)


def _fixed(values: np.ndarray, dtype: str) -> pa.BinaryArray:
    raw = np.ascontiguousarray(values.astype(dtype)).view(np.uint8)
    width = np.dtype(dtype).itemsize
    return _binary(raw, np.arange(len(values) + 1, dtype=np.int64) * width)


def _parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, start, length) of each value of a binary array; a null is empty."""
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1,
                         offset=4 * arr.offset).astype(np.int64)
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None and buf.size else \
        np.zeros(0, dtype=np.uint8)
    lens = offs[1:] - offs[:-1]
    if arr.null_count:
        lens = np.where(_valid(arr), lens, 0)
    return data, offs[:-1], lens


def _lengths(arr: pa.Array) -> np.ndarray:
    return _parts(arr)[2]


def _join(*parts, keep: np.ndarray | None = None) -> pa.BinaryArray:
    """Each row's parts (binary arrays, or bytes the same in every row) one after the
    other (Arrow's kernel); rows outside ``keep`` empty."""
    parts = [pa.scalar(p, pa.binary()) if isinstance(p, bytes) else p for p in parts]
    out = pc.binary_join_element_wise(*parts, _EMPTY) if len(parts) > 1 else parts[0]
    if keep is not None:
        out = pc.if_else(pa.array(keep, pa.bool_()), out, _EMPTY)
    elif out.null_count:
        out = out.fill_null(b"")
    return out


def _delimited(arr: pa.BinaryArray) -> pa.BinaryArray:
    """varint length + bytes, per value."""
    return _join(_varints(_lengths(arr).astype(np.uint64)), arr)


def _per_row(offsets: np.ndarray, elems: pa.BinaryArray) -> pa.BinaryArray:
    """The elements of each row (``offsets`` into ``elems``) joined into one value: the
    elements' bytes are already in row order, so only the offsets change."""
    data, start, lens = _parts(elems)
    if len(start) > 1 and not np.array_equal(start[1:], start[:-1] + lens[:-1]):
        data, start, lens = _parts(_join(elems))         # packed, in element order
    ends = np.append(start, start[-1] + lens[-1] if len(start) else 0)
    return _binary_at(data, ends[offsets])


def _keep(mask: np.ndarray, arr: pa.Array) -> pa.Array:
    return _join(arr, keep=mask)


def _valid(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.is_valid(), dtype=bool)


# ---- the encoder ---------------------------------------------------------------------------

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
        self._first = 0
        self._rowmap = None
        self.encode(pa.array([], arrow_type))

    def encode(self, values, first_row: int = 0) -> pa.BinaryArray:
        """``values`` as framed messages, null rows null (tombstones); a bad value raises
        BadRowError naming its row (counted from ``first_row``) and field."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if values.type != self.arrow_type:
            raise SchemaError(f"{self.column}: type {values.type} is not the "
                              f"{self.arrow_type} the encoder was built for")
        self._first = first_row
        self._rowmap = None
        valid = _valid(values)
        body = self._message(self.descriptor, values, valid, self.column)
        framed = _join(self.prefix, body, keep=valid) if self.prefix else \
            _join(body, keep=valid)
        if valid.all():
            return framed
        bufs = framed.buffers()
        return pa.Array.from_buffers(pa.binary(), len(framed),
                                     [pa.array(valid, pa.bool_()).buffers()[1], bufs[1],
                                      bufs[2]], null_count=int((~valid).sum()))

    # -- rows that are bad --------------------------------------------------------------
    def _bad(self, rows: np.ndarray, what: str, path: str):
        """Refuse the first of ``rows`` (a mask over the current level: rows, or the
        elements of a list / map, which ``_rowmap`` maps back to their row)."""
        i = int(np.flatnonzero(rows)[0])
        row = (i if self._rowmap is None else int(self._rowmap[i])) + self._first
        raise BadRowError(f"row {row}: {path} {what}")

    def _bad_elem(self, owner: np.ndarray, bad: np.ndarray, what: str, path: str):
        """An element-level problem, named by the row that holds the element."""
        i = int(owner[np.flatnonzero(bad)[0]])          # the parent at the current level
        mask = np.zeros(i + 1, dtype=bool)
        mask[i] = True
        self._bad(mask, what, path)

    def _elements(self, owner: np.ndarray):
        """Enter a list's / map's elements: ``owner`` maps each to its parent index."""
        saved = self._rowmap
        self._rowmap = owner if saved is None else \
            np.where(owner >= 0, saved[np.maximum(owner, 0)], -1)
        return saved

    # -- messages -------------------------------------------------------------------------
    def _message(self, d, arr: pa.StructArray, live: np.ndarray, path: str) -> pa.BinaryArray:
        """Each row's message bytes (only rows in ``live`` are checked and meaningful)."""
        at = arr.type
        names = {at.field(i).name: i for i in range(at.num_fields)}
        by_name = {f.name: f for f in d.fields}
        extra = [n for n in names if n not in by_name]
        if extra:
            raise SchemaError(f"{path}: field {extra[0]!r} of the struct is not in Protobuf "
                              f"message {d.full_name}")
        chunks = []
        oneof_set: dict[str, np.ndarray] = {}
        for f in sorted(d.fields, key=lambda f: f.number):
            fpath = f"{path}.{f.name}"
            if f.name not in names:
                if f.is_required:
                    raise SchemaError(f"{path}: Protobuf message {d.full_name} requires "
                                      f"field {f.name!r}, which the struct lacks")
                continue
            child = arr.field(names[f.name])
            if f.type == ps.T_GROUP:
                raise SchemaError(f"{fpath}: Protobuf groups are not supported")
            chunk, present = self._field(f, child, live, fpath)
            oneof = f.containing_oneof
            if oneof is not None and f.has_presence:
                if oneof.name in oneof_set and (oneof_set[oneof.name] & present).any():
                    self._bad(oneof_set[oneof.name] & present,
                              f"sets a second member of oneof {oneof.name}", fpath)
                oneof_set[oneof.name] = oneof_set.get(oneof.name, np.zeros(len(arr), bool)) \
                    | present
            chunks.append(chunk)
        if not chunks:
            return pa.nulls(len(arr), pa.binary()).fill_null(b"")
        return chunks[0] if len(chunks) == 1 else _join(*chunks)

    def _field(self, f, arr: pa.Array, live: np.ndarray, path: str):
        """(each row's bytes of field ``f``, rows where it is written)."""
        valid = _valid(arr) & live
        ft = ps._ftype(f)
        if ft == ps.T_MAP:
            return self._map(f, arr, valid, path), valid & self._nonempty(arr)
        if f.is_repeated:
            return self._repeated(f, arr, valid, path), valid & self._nonempty(arr)
        if f.is_required and (live & ~valid).any():
            self._bad(live & ~valid, "is null, but the field is required", path)
        enc, present = self._value(f, arr, valid, path)
        if not f.has_presence:
            present &= ~self._is_default(f, enc)
        tag = self._tag(f, self._wire(f))
        return _join(tag, enc, keep=present), present

    @staticmethod
    def _nonempty(arr) -> np.ndarray:
        offs = np.asarray(arr.offsets, dtype=np.int64)
        return offs[1:] > offs[:-1]

    @staticmethod
    def _tag(f, wire: int) -> bytes:
        return _varint_bytes((f.number << 3) | wire)

    @staticmethod
    def _wire(f) -> int:
        if f.type in _FIXED:
            return 5 if _FIXED[f.type] in ("<u4", "<i4", "<f4") else 1
        return 0 if f.type in _VARINT_T | _ZIGZAG_T else 2

    def _is_default(self, f, enc: pa.BinaryArray) -> np.ndarray:
        """proto3 implicit presence: the value's encoding is the default's (zero bits, an
        empty string: a zero length) — so -0.0 is written, as protobuf writes it."""
        width = {0: 1, 2: 1, 5: 4, 1: 8}[self._wire(f)]
        data, start, lens = _parts(enc)
        out = lens == width
        for k in range(width):
            out[out] = data[start[out] + k] == 0
        return out

    # -- one value per row ----------------------------------------------------------------
    def _value(self, f, arr: pa.Array, valid: np.ndarray, path: str):
        """(each row's encoded value without the tag, rows where it is set)."""
        at, ft = arr.type, ps._ftype(f)
        if ft in (ps.T_TIMESTAMP, ps.T_DURATION) and (pa.types.is_timestamp(at) or
                                                      pa.types.is_duration(at)):
            want = pa.types.is_timestamp if ft == ps.T_TIMESTAMP else pa.types.is_duration
            if not want(at):
                raise SchemaError(f"{path}: Arrow type {at} cannot be written as "
                                  f"{f.message_type.full_name}")
            return _delimited(self._time(f, arr, ft == ps.T_DURATION)), valid
        if f.type == ps.T_MESSAGE:
            if not pa.types.is_struct(at):
                if f.message_type.full_name in ps.WRAPPERS:       # the bare value
                    arr = pa.StructArray.from_arrays(
                        [arr], ["value"], mask=pa.array(~_valid(arr), pa.bool_()))
                else:
                    raise SchemaError(f"{path}: Arrow type {at} cannot be written as "
                                      f"Protobuf message {f.message_type.full_name}")
            return _delimited(self._message(f.message_type, arr, valid, path)), valid
        return self._scalar(f, arr, valid, path), valid

    def _scalar(self, f, arr: pa.Array, valid: np.ndarray, path: str) -> pa.BinaryArray:
        at, t = arr.type, f.type

        def refuse():
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as Protobuf "
                              f"{ps._TYPE_NAME.get(t, t)}")

        if t in (ps.T_STRING, ps.T_BYTES):
            ok = (pa.types.is_string(at) or pa.types.is_large_string(at)) if t == ps.T_STRING \
                else (pa.types.is_binary(at) or pa.types.is_large_binary(at)
                      or pa.types.is_string(at) or pa.types.is_large_string(at))
            if not ok:
                refuse()
            return _delimited(arr.cast(pa.binary()))
        if t == ps.T_BOOL:
            if not pa.types.is_boolean(at):
                refuse()
            return _varints(np.asarray(arr.fill_null(False), dtype=np.uint64))
        if t == ps.T_ENUM:
            return _varints(self._enum(f, arr, valid, path).view(np.uint64))
        if t in (ps.T_FLOAT, ps.T_DOUBLE):
            if not (pa.types.is_floating(at) or pa.types.is_integer(at)):
                refuse()
            return _fixed(np.asarray(arr.cast(pa.float64()).fill_null(0.0)), _FIXED[t])
        if not pa.types.is_integer(at):
            refuse()
        if pa.types.is_uint64(at):
            if t not in (ps.T_UINT64, ps.T_FIXED64):
                big = np.asarray(arr.fill_null(0), dtype=np.uint64) >= np.uint64(1 << 63)
                if (big & valid).any():
                    self._bad(big & valid, "does not fit a signed 64-bit field", path)
            num = np.asarray(arr.fill_null(0), dtype=np.uint64).view(np.int64)
        else:
            num = np.asarray(arr.cast(pa.int64()).fill_null(0), dtype=np.int64)
        if t in _RANGE32:
            lo, hi = _RANGE32[t]
            out = ((num < lo) | (num > hi)) & valid
            if out.any():
                self._bad(out, f"value {int(num[np.flatnonzero(out)[0]])} does not fit "
                               f"{ps._TYPE_NAME[t]}", path)
            if t in (ps.T_UINT32, ps.T_FIXED32):
                num = num & 0xFFFFFFFF                   # Spark's int32 of the same bits
        if t in _FIXED:
            return _fixed(num, _FIXED[t])
        if t in _ZIGZAG_T:
            return _varints(((num << 1) ^ (num >> 63)).view(np.uint64))
        return _varints(num.view(np.uint64))              # int32 < 0: ten bytes, as spec'd

    def _enum(self, f, arr: pa.Array, valid: np.ndarray, path: str) -> np.ndarray:
        et = f.enum_type
        at = arr.type
        if pa.types.is_integer(at):
            return np.asarray(arr.cast(pa.int64()).fill_null(0), dtype=np.int64)
        if not (pa.types.is_string(at) or pa.types.is_large_string(at)):
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as Protobuf enum "
                              f"{et.full_name} (a string symbol or an int number)")
        names = [v.name for v in et.values]
        numbers = np.array([v.number for v in et.values] or [0], dtype=np.int64)
        idx = pc.index_in(arr, value_set=pa.array(names, at))
        nums = numbers[np.asarray(idx.fill_null(0), dtype=np.int64)]
        unknown = valid & ~_valid(idx)
        if unknown.any() and not et.is_closed:
            # an open enum's unknown number, as the reader (and Java) names it
            tail = pc.extract_regex(arr.cast(pa.string()),
                                    f"^UNKNOWN_ENUM_VALUE_{et.name}_(?P<n>-?[0-9]{{1,10}})$")
            hit = np.asarray(tail.is_valid(), dtype=bool) & unknown
            if hit.any():
                n = pc.cast(tail.field("n").filter(pa.array(hit)), pa.int64())
                nums[hit] = np.asarray(n, dtype=np.int64)
                unknown &= ~hit
            outside = hit & ((nums < -(1 << 31)) | (nums >= 1 << 31))
            if outside.any():
                self._bad(outside, "names an enum number outside int32", path)
        if unknown.any():
            bad = arr[int(np.flatnonzero(unknown)[0])].as_py()
            self._bad(unknown, f"symbol {bad!r} is not in enum {et.full_name}", path)
        return nums

    def _time(self, f, arr: pa.Array, duration: bool) -> pa.BinaryArray:
        """A Timestamp/Duration message per row: seconds (1) and nanos (2), zeros left
        out; a Timestamp's nanos are >= 0 (floor), a Duration's take the seconds' sign."""
        per = _PER_SECOND[arr.type.unit]
        num = np.asarray(arr.cast(pa.int64()).fill_null(0), dtype=np.int64)
        if duration:
            secs = np.where(num >= 0, num // per, -((-num) // per))
        else:
            secs = np.floor_divide(num, per)
        nanos = (num - secs * per) * (1_000_000_000 // per)
        one = _varints(secs.view(np.uint64))
        two = _varints(nanos.view(np.uint64))
        return _join(_join(b"\x08", one, keep=secs != 0), _join(b"\x10", two, keep=nanos != 0))

    # -- repeated and maps ----------------------------------------------------------------
    def _elements_live(self, arr, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(live mask over ``arr``'s child values, the row owning each child value)."""
        offs = np.asarray(arr.offsets, dtype=np.int64)
        n_child = len(arr.values) if not pa.types.is_map(arr.type) else len(arr.keys)
        live = np.zeros(n_child, dtype=bool)
        owner = np.full(n_child, -1, dtype=np.int64)
        lens = offs[1:] - offs[:-1]
        span = slice(int(offs[0]), int(offs[-1]))
        live[span] = np.repeat(valid, lens)
        owner[span] = np.repeat(np.arange(len(arr)), lens)
        return live, owner

    def _repeated(self, f, arr: pa.Array, valid: np.ndarray, path: str) -> pa.BinaryArray:
        at = arr.type
        if pa.types.is_large_list(at):
            arr = arr.cast(pa.list_(at.value_field))
        elif not pa.types.is_list(at):
            raise SchemaError(f"{path}: Arrow type {at} cannot be written as repeated "
                              f"Protobuf field {f.name}")
        values = arr.values
        live, owner = self._elements_live(arr, valid)
        nulls = live & ~_valid(values)
        if nulls.any():
            self._bad_elem(owner, nulls, "holds a null element (a repeated field cannot)",
                           path)
        offs = np.asarray(arr.offsets, dtype=np.int64)
        saved = self._elements(owner)
        enc, _ = self._value(f, values, live, f"{path}[]")
        self._rowmap = saved
        if f.is_packed:
            joined = _per_row(offs, enc)
            chunk = _join(self._tag(f, 2), _delimited(joined))
        else:
            chunk = _per_row(offs, _join(self._tag(f, self._wire(f)), enc))
        return _keep(valid & self._nonempty(arr), chunk)

    def _map(self, f, arr: pa.Array, valid: np.ndarray, path: str) -> pa.BinaryArray:
        if not pa.types.is_map(arr.type):
            raise SchemaError(f"{path}: Arrow type {arr.type} cannot be written as Protobuf "
                              f"map field {f.name}")
        entry = f.message_type
        kf, vf = entry.fields_by_name["key"], entry.fields_by_name["value"]
        live, owner = self._elements_live(arr, valid)
        keys, items = arr.keys, arr.items
        nulls = live & ~_valid(items)
        if nulls.any():
            self._bad_elem(owner, nulls, "holds a null map value (a Protobuf map cannot)",
                           path)
        saved = self._elements(owner)
        kenc, _ = self._value(kf, keys, live, f"{path}.key")
        venc, _ = self._value(vf, items, live, f"{path}.value")
        self._rowmap = saved
        body = _join(self._tag(kf, self._wire(kf)), kenc, self._tag(vf, self._wire(vf)), venc)
        chunk = _per_row(np.asarray(arr.offsets, dtype=np.int64),
                         _join(self._tag(f, 2), _delimited(body)))
        return _keep(valid & self._nonempty(arr), chunk)
