"""Typed ``value`` / ``key`` columns of a write (issue 38 item 6), for the Spark writer and
the library alike: each column's writer schema resolved (and registered) once, then every
batch's struct column replaced by its framed Avro, Protobuf or JSON bytes.

:func:`plan_columns` resolves the schemas (``schemas.writer_schema``) and builds each
encoder on the driver, so a struct that does not fit its schema fails before any row is
written; the :class:`TypedWrite` it returns is small and picklable (schema texts, ids,
protoc's outputs) and builds its encoders again where it runs. :func:`write_table` is
:func:`spark_kafkalog.log.write.table.write_table` plus the keywords of a typed write,
named as ``read_table``'s (``value_format``, ``value_schema``, ``value_subject``, ...).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from spark_kafkalog.errors import BadRowError, InvalidOptionError

__all__ = ["TypedWrite", "make_encoder", "plan_columns", "write_table"]


def make_encoder(fmt: str, schema: str, arrow_type: pa.DataType, sid: int | None,
                 column: str, named: dict, message: str | None = None):
    """The encoder of ``fmt`` (avro, protobuf, json) for arrays of ``arrow_type``."""
    if fmt == "protobuf":
        from spark_kafkalog.typed.proto_write import ProtobufEncoder
        return ProtobufEncoder(schema, arrow_type, sid, column, named, message)
    if fmt == "json":
        from spark_kafkalog.typed.json_write import JsonSchemaEncoder
        return JsonSchemaEncoder(schema, arrow_type, sid, column, named)
    from spark_kafkalog.typed.avro_write import AvroEncoder
    return AvroEncoder(schema, arrow_type, sid, column, named)


@dataclass(frozen=True)
class TypedWrite:
    """What encoding needs: per column (name, format, schema text, id or None, named
    types, Protobuf message). ``compiled``: protoc's outputs of the Protobuf schemas, so
    that executors need no protoc (``proto_schema.COMPILED``)."""
    writers: tuple = ()
    compiled: tuple = ()

    def encode(self, batch: pa.RecordBatch, cache: dict, first_row: int = 0,
               where: str = "", counted: str = " (rows counted in the task's input)"
               ) -> pa.RecordBatch:
        """``batch`` with each typed column replaced by its framed bytes; a bad value's
        error names its row (``first_row``: the batch's first) and ``where``. ``cache``
        keeps the encoders between batches."""
        names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
        arrays = list(batch.columns)
        if self.compiled:
            from spark_kafkalog.typed import proto_schema
            proto_schema.COMPILED.update(dict(self.compiled))
        for column, fmt, schema, sid, named, message in self.writers:
            i = names[column]
            key = (column, arrays[i].type)
            if key not in cache:
                cache[key] = make_encoder(fmt, schema, arrays[i].type, sid, column,
                                          dict(named), message)
            try:
                arrays[i] = cache[key].encode(arrays[i], first_row)
            except BadRowError as err:
                raise BadRowError(f"{where}{err}{counted}") from err
        return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def plan_columns(path: str, topic: str | None, columns, *, auto_register: bool = False,
                 registry_topic: str = "_schemas", filesystem_options=None,
                 names=None) -> TypedWrite:
    """Resolve (and with ``auto_register`` register) each column's schema and build its
    encoder now. ``columns``: (TypedColumn, Arrow type, references) each; ``names(col,
    what)`` spells an option in messages (default the column's Spark option)."""
    from spark_kafkalog.log.write.schemas import writer_schema
    from spark_kafkalog.typed.avro_write import avro_schema_of

    writers, compiled = [], {}
    for col, arrow_type, refs in columns:
        name = (lambda w, c=col: names(c.column, w)) if names else col.option
        if topic is None and col.framing == "confluent" and col.subject is None \
                and col.schema_id is None:
            raise InvalidOptionError(f"{name('Format')}={col.format}: the subject is "
                                     f"<topic>-{col.column}; set the topic (or "
                                     f"{name('Subject')} / {name('SchemaId')})")
        ws = writer_schema(path, topic, col, arrow_type, auto_register=auto_register,
                           registry_topic=registry_topic,
                           filesystem_options=filesystem_options,
                           derive=avro_schema_of if col.format == "avro" else None,
                           references=refs)
        # built now: a struct that does not fit the schema fails before anything is written
        enc = make_encoder(col.format, ws.schema, arrow_type, ws.id, col.column,
                           dict(ws.named_types), col.message)
        compiled.update(getattr(enc, "compiled", {}))
        writers.append((col.column, col.format, ws.schema, ws.id, ws.named_types,
                        col.message))
    return TypedWrite(tuple(writers), tuple(compiled.items()))


def _name(column: str, what: str) -> str:
    return {"Format": f"{column}_format", "Schema": f"{column}_schema",
            "Subject": f"{column}_subject", "SchemaVersion": f"{column}_schema_version",
            "SchemaId": f"{column}_schema_id", "Framing": f"{column}_framing",
            "KeepRaw": f"keep_raw_{column}", "Message": f"{column}_message",
            "SchemaReferences": f"{column}_schema_references"}[what]


def write_table(path: str, topic: str, table, *, value_format: str = "binary",
                key_format: str = "binary", value_schema: str | None = None,
                key_schema: str | None = None, value_subject: str | None = None,
                key_subject: str | None = None, value_schema_version: int | None = None,
                key_schema_version: int | None = None, value_schema_id: int | None = None,
                key_schema_id: int | None = None, value_framing: str | None = None,
                key_framing: str | None = None, value_message: str | None = None,
                key_message: str | None = None, value_schema_references=None,
                key_schema_references=None, auto_register_schemas: bool = False,
                schema_registry_topic: str = "_schemas", filesystem_options=None,
                **kwargs):
    """:func:`spark_kafkalog.log.write.table.write_table` with typed columns:
    ``value_format`` / ``key_format`` = ``avro``, ``protobuf`` or ``json`` encodes the
    struct column ``value`` (``key``) with the subject's schema (the keywords as
    ``read_table``'s; ``value_schema_references``: ``[{"name", "subject", "version"}]``
    of the given schema) framed with its id; ``auto_register_schemas`` registers a schema
    the subject lacks in ``schema_registry_topic``. Every schema is resolved, and every
    row encoded, before anything is written. ``filesystem_options``: for ``path`` as a
    URI (not with ``filesystem``)."""
    import json

    from spark_kafkalog.log.write.schemas import parse_references
    from spark_kafkalog.log.write.table import write_table as write_plain
    from spark_kafkalog.typed.request import make_column

    cols = []
    for column, fmt, schema, subject, version, sid, framing, message, refs in (
            ("value", value_format, value_schema, value_subject, value_schema_version,
             value_schema_id, value_framing, value_message, value_schema_references),
            ("key", key_format, key_schema, key_subject, key_schema_version, key_schema_id,
             key_framing, key_message, key_schema_references)):
        if fmt not in ("avro", "protobuf", "json", "binary"):
            raise InvalidOptionError(f"{column}_format={fmt}: a write encodes avro, "
                                     f"protobuf or json (or binary, as given)")
        col = make_column(column, fmt, inline_schema=schema, subject=subject,
                          version=version, schema_id=sid, framing=framing, message=message,
                          names=_name)
        if col is None:
            if refs is not None:
                raise InvalidOptionError(f"{column}_schema_references: needs "
                                         f"{column}_format=avro, protobuf or json")
            continue
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if column not in table.column_names or \
                not pa.types.is_struct(table.schema.field(column).type):
            raise InvalidOptionError(f"{column}_format={fmt}: the table needs a struct "
                                     f"column {column!r}")
        text = refs if refs is None or isinstance(refs, str) else json.dumps(list(refs))
        cols.append((col, table.schema.field(column).type,
                     parse_references(_name(column, "SchemaReferences"), text)))
    if not cols:
        if auto_register_schemas:
            raise InvalidOptionError("auto_register_schemas: applies to typed columns; set "
                                     "value_format or key_format")
        if filesystem_options and kwargs.get("filesystem") is None:
            from spark_kafkalog.log.io import resolve_filesystem
            kwargs["filesystem"], path = resolve_filesystem(path, dict(filesystem_options))
        return write_plain(path, topic, table, **kwargs)
    if kwargs.get("filesystem") is not None:
        raise InvalidOptionError("filesystem: a typed write reads the registry at path; give "
                                 "path as a URI (with filesystem_options)")
    typed = plan_columns(path, topic, cols, auto_register=auto_register_schemas,
                         registry_topic=schema_registry_topic,
                         filesystem_options=filesystem_options, names=_name)
    cache: dict = {}
    batches, first = [], 0
    for b in table.to_batches() or [pa.RecordBatch.from_arrays(
            [pa.array([], f.type) for f in table.schema], schema=table.schema)]:
        batches.append(typed.encode(b, cache, first, counted=""))
        first += b.num_rows
    out = pa.Table.from_batches(batches)
    from spark_kafkalog.log.io import resolve_filesystem
    kwargs["filesystem"], root = resolve_filesystem(path, dict(filesystem_options or {}))
    return write_plain(root, topic, out, **kwargs)
