"""Protobuf values (schema-registry framed or raw) decoded into one Arrow column, compiled.

:class:`ProtobufDecoder` takes the reader schema (``.proto`` text), the writer schemas by id
and the files they import; protoc (``grpcio-tools``) compiles each, and every writer is
checked to resolve to the reader by field number when the decoder is built
(:class:`~spark_kafkalog.errors.SchemaResolutionError` then, never per record).
:meth:`ProtobufDecoder.decode` runs the compiled kernel (``_protobuf.pyx``) over a whole
binary array: no Python object per record or field.

Confluent framing: magic byte 0, a 4-byte big-endian schema id, the message indexes (a
zigzag varint count, then that many zigzag varint indexes: the message's index among the
file's top-level messages, then among each nested level's; a count of 0 means ``[0]``),
then the message. The indexes must name, in the writer's file, the reader's message (the
message of the same full name, or for a reader typed by its file's first message, the
writer's first message).

Types (Spark's ``from_protobuf`` with default options, in Spark's Arrow types):

==========================================  ===============================================
Protobuf                                    Arrow
==========================================  ===============================================
bool                                        bool
int32, sint32, sfixed32, uint32, fixed32    int32 (unsigned: the same 32 bits, as Spark)
int64, sint64, sfixed64, uint64, fixed64    int64
float / double                              float32 / float64
string / bytes                              string / binary
enum                                        string: the symbol; an open enum's unknown
                                            number as Java names it,
                                            ``UNKNOWN_ENUM_VALUE_<Enum>_<n>``
message                                     struct (a message with no fields is dropped)
google.protobuf.Timestamp                   timestamp[us, UTC]
google.protobuf.Duration                    duration[us] (Spark's day-time interval)
wrappers (Int32Value, ...)                  struct<value> (Spark's default); with
                                            ``unwrap_wrappers=True`` the value's type
                                            (Spark's unwrap.primitive.wrapper.types)
repeated T                                  list<element: T not null>
map<K, V>                                   map<key: K, value: V not null>
oneof                                       one nullable field per member, the set one
                                            filled
==========================================  ===============================================

Null, as Spark's ``ProtobufDeserializer``: a field with presence (proto2 optional, proto3
``optional``, message fields, oneof members) is null when absent, or its ``[default = ...]``
when it declares one; a proto3 scalar without presence is null when absent or equal to its
default (``emit_default_values=True`` gives the default instead); a missing proto2
``required`` field is a bad record (Java's parser refuses it). Repeated fields and maps are
never null (empty). Recursive messages and groups are refused. Strings must be UTF-8.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import SchemaResolutionError, TypedRecordError
from spark_kafkalog.typed import proto_schema as ps
from spark_kafkalog.typed.result import DecodeResult, binary_values, check_modes

__all__ = ["ProtobufDecoder", "DecodeResult"]


class ProtobufDecoder:
    """Decodes Protobuf values into one Arrow column of the reader message's type.

    ``reader_schema`` is the ``.proto`` text the column is typed by; ``message`` the full
    name of its message (default: the file's first message, as Confluent's serializers);
    ``writer_schemas`` maps a schema-registry id to the ``.proto`` text of the values framed
    with it; ``named_types`` maps import names (``"other.proto"``, registry references) to
    their text. The well-known types are protoc's own. The decoder pickles as its arguments
    and holds no per-call state.
    """

    def __init__(self, reader_schema: str, writer_schemas: Mapping[int, str] | None = None,
                 named_types: Mapping[str, str] | None = None, message: str | None = None,
                 emit_default_values: bool = False, unwrap_wrappers: bool = False):
        self._args = (reader_schema, dict(writer_schemas or {}), dict(named_types or {}),
                      message, emit_default_values, unwrap_wrappers)
        imports = dict(named_types or {})
        self._compiled: dict = {}
        reader_file = ps.load_file(reader_schema, imports, self._compiled)
        self.descriptor = ps.pick_message(reader_file, message)
        first = list(reader_file.message_types_by_name.values())[0]
        self.plan = ps.Plan(self.descriptor, emit_default_values, unwrap_wrappers)
        self.arrow_type: pa.DataType = self.plan.arrow_type
        self._kernel = None
        ids, offs, paths = [], [0], []
        for sid in sorted(writer_schemas or {}):
            wfile = ps.load_file(writer_schemas[sid], imports, self._compiled)
            path = ps.message_path(wfile, self.descriptor.full_name)
            if path is None and self.descriptor is first:
                path = [0]
            if path is None:
                raise SchemaResolutionError(
                    f"writer schema id {sid} has no message {self.descriptor.full_name}, the "
                    f"reader's message (reader schema {ps.schema_digest(reader_schema)}, "
                    f"writer schema {ps.schema_digest(writer_schemas[sid])})")
            writer = wfile.message_types_by_name[list(wfile.message_types_by_name)[path[0]]]
            for i in path[1:]:
                writer = writer.nested_types[i]
            ps.check_resolves(self.descriptor, writer, f"schema id {sid}")
            ids.append(int(sid))
            paths += path
            offs.append(len(paths))
        self._ids = np.array(ids, dtype=np.int64)
        self._path_off = np.array(offs, dtype=np.int64)
        self._paths = np.array(paths or [0], dtype=np.int64)

    def __reduce__(self):
        # protoc's output travels with the arguments: the copy is rebuilt without protoc
        return (_rebuild, (self._args, self._compiled))

    def _get_kernel(self):
        if self._kernel is None:
            from spark_kafkalog.typed._protobuf import Kernel
            self._kernel = Kernel(self.plan.tables())
        return self._kernel

    def decode(self, values, framing: str = "confluent", on_error: str = "fail") -> DecodeResult:
        """Decode every value of ``values`` (``pa.BinaryArray`` / ``LargeBinaryArray``, or a
        ChunkedArray of one). ``framing="confluent"``: the schema-registry framing above;
        ``"none"``: the bare message, written with a schema that resolves to the reader's.
        A bad record raises :class:`TypedRecordError` (``on_error="fail"``), becomes a null
        struct with its error text (``"null"``) or is left out (``"skip"``)."""
        mode = check_modes(framing, on_error)
        values = binary_values(values, "Protobuf")
        from spark_kafkalog.typed._protobuf import ERRORS
        cols, bad, kept = self._get_kernel().run(
            values, framing == "confluent", self._ids, self._path_off, self._paths, mode,
            self.plan.top)
        texts = [(row, f"{ERRORS[code].format(d=detail)} (schema id "
                       f"{'none' if sid is None else sid}, byte "
                       f"{'unknown' if pos is None else pos} of the value)")
                 for row, code, detail, sid, pos in bad]
        if bad and (mode == 0 or len(cols) == 0 or _fatal(bad[-1][1])):
            row, code, detail, sid, pos = bad[-1] if mode else bad[0]
            text = texts[-1 if mode else 0][1]
            raise TypedRecordError(f"bad Protobuf record at row {row}: {text}", row=row,
                                   schema_id=sid, value_position=pos)
        array = _assemble(self.plan, cols, self.plan.msgs[self.plan.top][ps.Plan.M_COL])
        result = DecodeResult(array)
        if mode:
            result.set_errors(len(values), [(row, text, b[3], b[4])
                                            for (row, text), b in zip(texts, bad)])
        if mode == 2:
            result.kept = pa.array(kept.astype(bool), type=pa.bool_())
        return result


def _rebuild(args: tuple, compiled: dict) -> ProtobufDecoder:
    ps.COMPILED.update(compiled)
    return ProtobufDecoder(*args)


def _fatal(code: int) -> bool:
    from spark_kafkalog.typed import _protobuf
    return code in (_protobuf.E_NOMEM_CODE, _protobuf.E_TOOBIG_CODE)


def _assemble(plan: ps.Plan, cols: list, ci: int) -> pa.Array:
    """The Arrow array of column ``ci`` from the kernel's buffers (no copy)."""
    c = plan.cols[ci]
    n, nnull, valid, data, offs = cols[ci]
    children = [_assemble(plan, cols, k) for k in c.kids]
    if c.kind == ps.K_STRUCT:
        return pa.StructArray.from_buffers(c.type, n, [valid], null_count=nnull,
                                           children=children)
    if c.kind == ps.K_LIST:
        return pa.Array.from_buffers(c.type, n, [valid, offs], null_count=nnull,
                                     children=children)
    if c.kind == ps.K_BIN:
        return pa.Array.from_buffers(c.type, n, [valid, offs, data], null_count=nnull)
    return pa.Array.from_buffers(c.type, n, [valid, data], null_count=nnull)
