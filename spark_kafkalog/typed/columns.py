"""Typed ``value`` / ``key`` columns of record batches in Spark's Kafka schema.

A :class:`DecodeSpec` is what crosses from the planner to the tasks: the reader schema,
the writer schema of every id the data may carry and the named types they reference, all
as text, so it pickles small. :func:`decoder_of` builds the compiled decoder once per
spec per process. :func:`typed_batches` turns the bytes of each batch into the decoded
struct (plus ``<column>_error`` under ``onDecodeError=null`` and ``<column>_raw`` when
asked) and never drops or nulls a record silently: under ``fail`` the error names the
topic, partition, offset, schema id and byte position in the value; under ``null`` /
``skip`` every bad record is counted per partition and :class:`DecodeErrorCounts` warns
once per partition with the count, and, given a ``dead_letter`` callable, is handed to it
raw and whole (:mod:`spark_kafkalog.typed.dead_letter`; the files are ``log/``'s).
"""
from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import SchemaError, TypedRecordError
from spark_kafkalog.typed.request import ON_DECODE_ERROR, TypedColumn

__all__ = ["TypedColumn", "DecodeSpec", "TypedRead", "decoder_of", "typed_batches", "typed_schema",
           "DecodeErrorCounts", "ON_DECODE_ERROR"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DecodeSpec:
    """How to decode one column: ``schema_type`` (the registry's ``AVRO``, ``PROTOBUF`` or
    ``JSON``) of every schema here, the reader schema's text (Avro JSON, ``.proto``, JSON
    Schema), ``writer_schemas`` as sorted ``(id, schema text)`` pairs (None: every framed
    id is read with the reader schema as its writer), ``named_types`` sorted ``(name,
    schema text)`` pairs (the registry's schema references: Avro full names, Protobuf
    import paths, JSON Schema ``$ref`` names), ``framing`` ``confluent`` | ``none``,
    ``message`` the Protobuf message (None: the file's first). Hashable: the per-process
    decoder cache is keyed by it."""
    column: str                                          # "value" | "key"
    reader_schema: str
    writer_schemas: tuple[tuple[int, str], ...] | None = None
    named_types: tuple[tuple[str, str], ...] = ()
    framing: str = "confluent"
    keep_raw: bool = False
    #: where the reader schema came from, for messages ("subject t-value version 2, id 5")
    origin: str = ""
    schema_type: str = "AVRO"
    message: str | None = None


@dataclass(frozen=True)
class TypedRead:
    """Every typed column of a read and what to do with a record that does not decode.
    ``arrow_types``: column -> the exact Arrow type the consumer expects (Spark's own
    Arrow rendering of the struct); a decoded array of another type is cast to it."""
    specs: tuple[DecodeSpec, ...]
    on_error: str = "fail"
    arrow_types: tuple[tuple[str, pa.DataType], ...] = field(default=())

    def spec(self, column: str) -> DecodeSpec | None:
        for s in self.specs:
            if s.column == column:
                return s
        return None


_DECODERS: dict = {}
_DECODERS_LOCK = threading.Lock()


def decoder_of(spec: DecodeSpec):
    """The compiled decoder of ``spec``, built once per process (a Python worker runs
    many tasks). Raises SchemaResolutionError / SchemaError when a writer schema does not
    resolve to the reader schema (the planner builds it once on the driver first, so a
    task never meets that)."""
    key = (spec.schema_type, spec.reader_schema, spec.writer_schemas, spec.named_types,
           spec.message)
    with _DECODERS_LOCK:
        found = _DECODERS.get(key)
    if found is not None:
        return found
    built = _build(spec)
    with _DECODERS_LOCK:
        if len(_DECODERS) >= 32:
            _DECODERS.clear()
        _DECODERS[key] = built
    return built


def _build(spec: DecodeSpec):
    """The decoder of ``spec.schema_type``; all three take the same arguments and give
    ``arrow_type`` and ``decode(values, framing, on_error)``. The Protobuf and JSON Schema
    decoders read a framed id missing from their writers as a bad record; with no writers
    known (an inline schema) each framed id is read with the reader schema, as Avro's."""
    writers = None if spec.writer_schemas is None else dict(spec.writer_schemas)
    named = dict(spec.named_types) or None
    if spec.schema_type == "AVRO":
        from spark_kafkalog.typed.avro import AvroDecoder
        return AvroDecoder(spec.reader_schema, writers, named_types=named)
    if spec.schema_type == "PROTOBUF":
        from spark_kafkalog.typed.protobuf import ProtobufDecoder
        return ProtobufDecoder(spec.reader_schema, writers, named, message=spec.message)
    if spec.schema_type == "JSON":
        from spark_kafkalog.typed.jsonschema import JsonSchemaDecoder
        return JsonSchemaDecoder(spec.reader_schema, writers, named)
    raise SchemaError(f"{spec.column}: schema type {spec.schema_type!r} has no decoder "
                      f"(AVRO, PROTOBUF and JSON do)")


def typed_schema(base: pa.Schema, read: TypedRead) -> pa.Schema:
    """``base`` (Spark's Kafka schema in Arrow) with each typed column's struct in place
    of its bytes, then ``value_error`` / ``key_error`` (onDecodeError=null) and
    ``value_raw`` / ``key_raw`` (keepRaw*) at the end, in that order."""
    types = dict(read.arrow_types)
    fields = []
    for f in base:
        spec = read.spec(f.name)
        if spec is None:
            fields.append(f)
        else:
            t = types.get(f.name) or decoder_of(spec).arrow_type
            fields.append(pa.field(f.name, t, nullable=True))
    for extra in _extra_columns(read):
        fields.append(pa.field(extra, pa.string() if extra.endswith("_error") else pa.binary()))
    return pa.schema(fields)


def _extra_columns(read: TypedRead) -> list[str]:
    out = []
    if read.on_error == "null":
        out += [f"{c}_error" for c in ("value", "key") if read.spec(c) is not None]
    out += [f"{c}_raw" for c in ("value", "key")
            if read.spec(c) is not None and read.spec(c).keep_raw]
    return out


@dataclass
class _PartitionErrors:
    count: int = 0
    first_offset: int | None = None
    first_error: str | None = None


class DecodeErrorCounts:
    """Records that did not decode (``onDecodeError`` null or skip), per topic-partition.
    :meth:`warn` logs one warning per partition with the count and the first error; it
    is called when a task (or a library read) finishes."""

    def __init__(self, on_error: str):
        self.on_error = on_error
        self.by_partition: dict[tuple[str, int], _PartitionErrors] = {}

    def add(self, topic: str, partition: int, offset: int, error: str) -> None:
        e = self.by_partition.setdefault((topic, partition), _PartitionErrors())
        e.count += 1
        if e.first_offset is None:
            e.first_offset, e.first_error = offset, error

    @property
    def total(self) -> int:
        return sum(e.count for e in self.by_partition.values())

    def warn(self, since: dict | None = None) -> None:
        """One warning per partition with records counted (after ``since``'s counts)."""
        what = "read as null" if self.on_error == "null" else "skipped"
        for (t, q), e in sorted(self.by_partition.items()):
            n = e.count - (since or {}).get((t, q), 0)
            if n == 0:
                continue
            log.warning("%d record(s) of %s-%s do not decode and were %s "
                        "(onDecodeError=%s); the first, at offset %s: %s",
                        n, t, q, what, self.on_error, e.first_offset, e.first_error)


def _fail_message(err: TypedRecordError, column: str, topic: str, partition: int,
                  offset: int) -> TypedRecordError:
    # the decoder's row number is the batch's, meaningless to a user: the offset replaces it
    reason = re.sub(r"^bad (Avro|Protobuf|JSON) record at row \d+: ", "", err.reason)
    if "schema id" not in reason:
        sid = "none (unframed)" if err.schema_id is None else err.schema_id
        where = "" if err.value_position is None else \
            f", byte {err.value_position} of the value"
        reason += f" (schema id {sid}{where})"
    msg = (f"{topic}-{partition} offset {offset}: the {column} does not decode: {reason}; "
           f"to read past bad records set option onDecodeError=null (null struct and a "
           f"{column}_error column) or onDecodeError=skip")
    return TypedRecordError(msg, row=err.row, schema_id=err.schema_id,
                            value_position=err.value_position, offset=offset)


def _decode_column(batch: pa.RecordBatch, spec: DecodeSpec, on_error: str,
                   target: pa.DataType | None):
    """(decoded array, (per-row error texts, schema ids, byte positions), each None when
    not under null/skip) of ``batch``'s column ``spec.column``; under ``fail`` a bad
    record raises with its topic, partition and offset."""
    values = batch.column(spec.column)
    if spec.writer_schemas is None and spec.framing == "confluent" and \
            spec.schema_type != "AVRO":
        spec = _with_framed_ids(spec, values)
    decoder = decoder_of(spec)
    mode = "fail" if on_error == "fail" else "null"
    try:
        result = decoder.decode(values, framing=spec.framing, on_error=mode)
    except TypedRecordError as err:
        row = err.row if err.row is not None else 0
        raise _fail_message(err, spec.column, batch.column("topic")[row].as_py(),
                            batch.column("partition")[row].as_py(),
                            batch.column("offset")[row].as_py()) from err
    array = result.array
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if target is not None and array.type != target:
        array = array.cast(target)
    details = tuple(_combined(getattr(result, name, None))
                    for name in ("errors", "schema_ids", "positions"))
    return array, details


def _combined(array):
    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array


def _with_framed_ids(spec: DecodeSpec, values: pa.Array) -> DecodeSpec:
    """``spec`` (an inline reader schema, no registry) with every schema id framed in
    ``values`` read with the reader schema, as the Avro decoder reads an unknown id when
    it has no writers: the Protobuf and JSON Schema decoders take only the ids they are
    given (a decoder per set of ids, cached as any other)."""
    body = values.cast(pa.binary())
    ok = pc.and_(pc.is_valid(body), pc.greater_equal(pc.binary_length(body), 5))
    heads = pc.filter(body, ok)
    ids = set()
    if len(heads):
        for b in pc.unique(pc.binary_slice(heads, 0, 5)).to_pylist():
            if len(b) == 5 and b[0] == 0:
                ids.add(int.from_bytes(b[1:5], "big"))
    return replace(spec, writer_schemas=tuple((i, spec.reader_schema) for i in sorted(ids)))


def decode_batch(batch: pa.RecordBatch, read: TypedRead, schema: pa.Schema,
                 counts: DecodeErrorCounts, dead_letter=None) -> pa.RecordBatch:
    """``batch`` (Spark's Kafka schema) with its typed columns decoded, as ``schema``
    (:func:`typed_schema`); bad records as ``read.on_error`` says, counted in ``counts``
    and, with ``dead_letter`` (a callable), handed to it raw and whole, one row per bad
    record (:func:`~spark_kafkalog.typed.dead_letter.dead_letter_rows`)."""
    types = dict(read.arrow_types)
    decoded: dict[str, pa.Array] = {}
    details: dict[str, tuple] = {}
    for spec in read.specs:
        decoded[spec.column], details[spec.column] = _decode_column(
            batch, spec, read.on_error, types.get(spec.column))
    errors = {c: d[0] for c, d in details.items()}
    bad = None
    for column, err in errors.items():
        if err is None or err.null_count == len(err):
            continue
        mask = pc.is_valid(err)
        bad = mask if bad is None else pc.or_(bad, mask)
    if bad is not None:
        _count(batch, errors, bad, counts)
        if dead_letter is not None:
            from spark_kafkalog.typed.dead_letter import dead_letter_rows
            dead_letter(dead_letter_rows(batch, bad, details))
    columns = []
    for f in schema:
        if f.name in decoded:
            columns.append(decoded[f.name])
        elif f.name.endswith("_error") and f.name[:-6] in decoded:
            err = errors[f.name[:-6]]
            columns.append(err if err is not None else pa.nulls(batch.num_rows, pa.string()))
        elif f.name.endswith("_raw") and f.name[:-4] in decoded:
            columns.append(batch.column(f.name[:-4]))
        else:
            columns.append(batch.column(f.name))
    out = pa.RecordBatch.from_arrays(columns, schema=schema)
    if bad is not None and read.on_error == "skip":
        out = out.filter(pc.invert(bad))
    return out


def _count(batch: pa.RecordBatch, errors: dict, bad: pa.Array,
           counts: DecodeErrorCounts) -> None:
    """Add the bad rows of ``batch`` to ``counts`` (a few per batch at most in practice:
    a loop over the bad rows only)."""
    idx = pc.indices_nonzero(bad).to_pylist()
    topics = batch.column("topic")
    parts = batch.column("partition")
    offsets = batch.column("offset")
    for i in idx:
        text = "; ".join(f"{c}: {e[i].as_py()}" for c, e in errors.items()
                         if e is not None and e[i].is_valid)
        counts.add(topics[i].as_py(), parts[i].as_py(), offsets[i].as_py(), text)


def typed_batches(batches: Iterable[pa.RecordBatch], read: TypedRead, *,
                  counts: DecodeErrorCounts | None = None, dead_letter=None,
                  drop_headers: bool = False) -> Iterator[pa.RecordBatch]:
    """Decode the typed columns of each of ``batches``; empty batches (all skipped) are
    dropped. When the batches end (or the consumer closes early), one warning per
    partition for records read as null or skipped; ``counts`` (optional) receives them.
    ``dead_letter`` (optional): called with each batch's bad records, raw and whole;
    ``drop_headers``: the batches carry headers for the dead letter only, and the output
    leaves them out."""
    counts = counts if counts is not None else DecodeErrorCounts(read.on_error)
    counts.on_error = read.on_error
    start = {k: v.count for k, v in counts.by_partition.items()}
    schema = None
    try:
        for batch in batches:
            if schema is None:
                base = batch.schema
                if drop_headers and "headers" in base.names:
                    base = base.remove(base.get_field_index("headers"))
                schema = typed_schema(base, read)
            out = decode_batch(batch, read, schema, counts, dead_letter)
            if out.num_rows:
                yield out
    finally:
        counts.warn(since=start)
