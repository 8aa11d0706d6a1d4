"""Avro values (schema-registry framed or raw) decoded into one Arrow column, compiled.

:class:`AvroDecoder` takes the reader schema, the writer schemas by id and the schemas they
reference; it resolves every writer to the reader when it is built (a writer that cannot
resolve raises :class:`~spark_kafkalog.errors.SchemaResolutionError` then, never per record)
and :meth:`AvroDecoder.decode` runs the compiled kernel (``_avro.pyx``) over a whole binary
array: no Python object per record or field. A bad record raises
:class:`~spark_kafkalog.errors.TypedRecordError` (``on_error="fail"``), becomes a null with
its error text (``"null"``), or is left out (``"skip"``).

Types are Spark's ``from_avro`` (``SchemaConverters.toSqlType``) in Spark's own Arrow types:

=================================================  ===============================================
Avro                                               Arrow
=================================================  ===============================================
null                                               null
boolean / int / long / float / double              bool / int32 / int64 / float32 / float64
string, enum, string+uuid                          string (enum: the symbol)
bytes, fixed, fixed+uuid, fixed+duration           binary
bytes/fixed + decimal(p, s)                        decimal128(p, s) (p > 38 is refused, as Spark)
int + date                                         date32
int + time-millis                                  int32 (Spark has no time type: the int)
long + time-micros, timestamp-nanos,               int64 (Spark maps them to LongType)
local-timestamp-nanos
long + timestamp-millis / timestamp-micros         timestamp[us, tz=UTC] (millis * 1000)
long + local-timestamp-millis / -micros            timestamp[us] (Spark's TimestampNTZType)
record                                             struct (field nullable iff its type is)
array                                              list<element>
map                                                map<string, value>
[null, T] (either order)                           T, nullable
[int, long] / [float, double] (with or w/o null)   int64 / float64
other unions of n non-null types                   struct<member0, ..., member(n-1)> (nullable)
=================================================  ===============================================

Strings are checked to be UTF-8: Arrow requires it and fastavro refuses invalid UTF-8 too
(Java's Avro would substitute U+FFFD, altering the data silently); an invalid string is a bad
record. A decimal whose value exceeds its precision is a bad record, as Spark's Decimal
refuses it; so is a timestamp-millis whose microseconds overflow (Spark's multiplyExact),
a boolean byte other than 0 or 1, and an array or map value declaring more than 2**20
items that encode in no bytes (nulls, empty records: a count no byte bounds). Recursive
schemas are refused (Spark has no type for them).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import TypedRecordError
from spark_kafkalog.typed.avro_program import Program
from spark_kafkalog.typed.avro_schema import Schema, avro_arrow_type, parse_schema
from spark_kafkalog.typed.result import DecodeResult, binary_values, check_modes

__all__ = ["AvroDecoder", "DecodeResult", "avro_arrow_type", "parse_schema"]

_EMPTY = pa.py_buffer(b"")


class AvroDecoder:
    """Decodes Avro values into one Arrow column of the reader schema's type.

    ``reader_schema`` is the schema JSON the column is typed by; ``writer_schemas`` maps a
    schema-registry id to the writer schema JSON of the values framed with it;
    ``named_types`` maps full names to the JSON of referenced schemas. Every writer is
    resolved here. The decoder holds no per-call state: ``decode`` may be called again.
    """

    def __init__(self, reader_schema: str, writer_schemas: Mapping[int, str] | None = None,
                 named_types: Mapping[str, str] | None = None):
        self._args = (reader_schema, dict(writer_schemas or {}), dict(named_types or {}))
        self.named_types = dict(named_types or {})
        self.reader: Schema = parse_schema(reader_schema, self.named_types)
        self._program = Program(self.reader)
        self.arrow_type: pa.DataType = self._program.arrow_type
        self._self_entry: int | None = None
        ids, entries = [], []
        for sid in sorted(writer_schemas or {}):
            writer = parse_schema(writer_schemas[sid], self.named_types)
            entries.append(self._program.add_writer(writer, f"id {sid}"))
            ids.append(int(sid))
        self._ids = np.array(ids, dtype=np.int64)
        self._entries = np.array(entries, dtype=np.int64)

    def __reduce__(self):
        return (AvroDecoder, self._args)

    def decode(self, values, framing: str = "confluent", on_error: str = "fail") -> DecodeResult:
        """Decode every value of ``values`` (``pa.BinaryArray`` / ``LargeBinaryArray``, or a
        ChunkedArray of one). ``framing="confluent"``: magic byte 0, a 4-byte big-endian
        schema id, then the value written with ``writer_schemas[id]``; ``"none"``: raw Avro
        written with the reader schema."""
        mode = check_modes(framing, on_error)
        values = binary_values(values, "Avro")
        if framing == "none" and self._self_entry is None:
            self._self_entry = self._program.add_writer(self.reader, "(the reader schema)")
        kernel = self._program.kernel()
        cols, bad, kept = kernel.run(values, framing == "confluent", self._ids, self._entries,
                                     -1 if self._self_entry is None else self._self_entry,
                                     mode, self._program.top)
        if bad and mode == 0:
            row, msg, sid, pos = bad[0]
            raise TypedRecordError(
                f"bad Avro record at row {row}: {msg} (schema id "
                f"{'none' if sid is None else sid}, byte {pos} of the value)",
                row=row, schema_id=sid, value_position=pos)
        array = _assemble(self._program, cols, self._program.top)
        result = DecodeResult(array)
        if mode:
            result.set_errors(len(values), [
                (row, f"{msg} (schema id {'none' if sid is None else sid}, byte {pos} of "
                      f"the value)", sid, pos) for row, msg, sid, pos in bad])
        if mode == 2:
            result.kept = pa.array(kept.astype(bool), type=pa.bool_())
        return result


def _assemble(program: Program, cols: list, ci: int) -> pa.Array:
    """The Arrow array of column ``ci`` from the kernel's buffers (no copy)."""
    c = program.cols[ci]
    n, nnull, valid, data, offs = cols[ci]
    if c.kind == "NULL":
        return pa.nulls(n, c.type)
    children = [_assemble(program, cols, k) for k in c.kids]
    if offs is None and c.kind in ("BIN", "LIST"):
        offs = pa.py_buffer(np.zeros(n + 1, dtype=np.int32))
    if c.kind == "STRUCT":
        return pa.Array.from_buffers(c.type, n, [valid], null_count=nnull, children=children)
    if c.kind == "LIST":
        return pa.Array.from_buffers(c.type, n, [valid, offs], null_count=nnull,
                                     children=children)
    if data is None:
        data = _EMPTY if c.kind == "BIN" else pa.py_buffer(bytes(16 * (n + 1)))
    if c.kind == "BIN":
        return pa.Array.from_buffers(c.type, n, [valid, offs, data], null_count=nnull)
    return pa.Array.from_buffers(c.type, n, [valid, data], null_count=nnull)
