"""``read_table`` with typed ``value`` / ``key`` (issue 38): the library's
:func:`spark_kafkalog.log.read_table`.

It is :func:`spark_kafkalog.log.read.reader.read_table` plus the keywords that decode the
value and key columns, the same asks as the Spark options (``valueFormat`` ->
``value_format``, ``keepRawValue`` -> ``keep_raw_value``, ...), checked by the same rules
(:mod:`spark_kafkalog.typed.request`). It lives beside the reader, not in it, because the
registry's topic is itself read through ``reader.read_table``. One ``LogDirs`` serves the
registry read and the data read, so both see the log dirs as listed once.
"""
from __future__ import annotations

from typing import Mapping

import pyarrow as pa

from spark_kafkalog.format import record_schema
from spark_kafkalog.log.read import reader as _reader
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.typed_plan import open_schema_source, plan_typed_read
from spark_kafkalog.typed.columns import DecodeErrorCounts, typed_batches, typed_schema
from spark_kafkalog.typed.request import make_column, make_typed

__all__ = ["read_table"]


def _name(column: str, what: str) -> str:
    return {"Format": f"{column}_format", "Schema": f"{column}_schema",
            "Subject": f"{column}_subject", "SchemaVersion": f"{column}_schema_version",
            "SchemaId": f"{column}_schema_id", "Framing": f"{column}_framing",
            "KeepRaw": f"keep_raw_{column}", "Message": f"{column}_message"}[what]


def _registry_name(what: str) -> str:
    return {"OnDecodeError": "on_decode_error", "Topic": "schema_registry_topic",
            "Url": "schema_registry_url", "BasicAuth": "schema_registry_basic_auth"}[what]


def read_table(path, topic: str, *, value_format: str = "binary", key_format: str = "binary",
               on_decode_error: str | None = None, value_schema: str | None = None,
               key_schema: str | None = None, value_subject: str | None = None,
               key_subject: str | None = None, value_schema_version: int | None = None,
               key_schema_version: int | None = None, value_schema_id: int | None = None,
               key_schema_id: int | None = None, value_framing: str | None = None,
               key_framing: str | None = None, value_message: str | None = None,
               key_message: str | None = None, keep_raw_value: bool | None = None,
               keep_raw_key: bool | None = None, schema_registry_topic: str | None = None,
               schema_registry_url: str | None = None,
               schema_registry_basic_auth: str | None = None,
               decode_errors: DecodeErrorCounts | None = None,
               dead_letter_path: str | None = None,
               filesystem_options: Mapping | None = None, **kwargs) -> pa.Table:
    """One topic as an Arrow table, as :func:`spark_kafkalog.log.read.reader.read_table`
    (every keyword of it is taken here too), with ``value`` / ``key`` decoded when
    ``value_format`` / ``key_format`` is ``avro``, ``protobuf``, ``json`` or ``registry``
    (the registry's type of the reader schema: AVRO, PROTOBUF or JSON).

    Schemas: the log dirs' ``_schemas`` (``schema_registry_topic``), a registry at
    ``schema_registry_url`` (``schema_registry_basic_auth`` ``user:password``), or
    ``value_schema`` / ``key_schema`` inline (Avro JSON, ``.proto`` text or JSON Schema
    text; ``value_framing="none"``: no 5-byte header; ``value_message``: the Protobuf
    message, default the file's first).
    Reader schema: ``value_subject`` (default ``<topic>-value``), ``value_schema_version``
    or ``value_schema_id`` (default latest not soft-deleted). ``on_decode_error``:
    ``fail`` (default; TypedRecordError naming topic, partition, offset, schema id and byte
    position), ``null`` (null struct, ``value_error`` text) or ``skip``; with null/skip
    one warning per partition with the count, and the counts in ``decode_errors`` when
    given. ``keep_raw_value`` / ``keep_raw_key`` add ``value_raw`` / ``key_raw``.
    ``dead_letter_path`` (a directory URI, with ``on_decode_error`` null or skip, as the
    Spark read's ``deadLetterPath``): the records that do not decode, raw and whole, as
    Parquet files there (``log/read/dead_letter.py``), one per partition offset range the
    read covered that holds any, replaced when the same range is read again; published
    when the read ends, none when it fails.
    Raises InvalidOptionError naming the keyword, SchemaResolutionError (a writer schema
    that does not resolve, before any record is read)."""
    columns = [c for c in (
        make_column("key", key_format, inline_schema=key_schema, subject=key_subject,
                    version=key_schema_version, schema_id=key_schema_id, framing=key_framing,
                    keep_raw=keep_raw_key, message=key_message, names=_name),
        make_column("value", value_format, inline_schema=value_schema, subject=value_subject,
                    version=value_schema_version, schema_id=value_schema_id,
                    framing=value_framing, keep_raw=keep_raw_value, message=value_message,
                    names=_name))
        if c is not None]
    if not columns:
        extra = [n for n, v in (("on_decode_error", on_decode_error),
                                ("schema_registry_topic", schema_registry_topic),
                                ("schema_registry_url", schema_registry_url),
                                ("decode_errors", decode_errors),
                                ("dead_letter_path", dead_letter_path)) if v is not None]
        if extra:
            from spark_kafkalog.errors import InvalidOptionError
            raise InvalidOptionError(f"{extra[0]}: applies to typed columns; set "
                                     f"value_format or key_format to avro, protobuf, "
                                     f"json or registry")
        return _reader.read_table(path, topic, filesystem_options=filesystem_options,
                                  **kwargs)
    cols = {c.column: c for c in columns}
    typed = make_typed(cols.get("value"), cols.get("key"), on_decode_error,
                       schema_registry_topic, schema_registry_url, schema_registry_basic_auth,
                       names=_registry_name)
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    source = open_schema_source(logdirs, registry_topic=typed.registry_topic,
                                registry_url=typed.registry_url,
                                registry_auth=typed.registry_auth,
                                remote_storage=kwargs.get("remote_storage"),
                                remote_layout=kwargs.get("remote_layout"),
                                topic_option="schema_registry_topic")
    dead = _dead_letter_dir(dead_letter_path, typed.on_decode_error, filesystem_options)
    read = plan_typed_read(source, [topic], typed.columns, typed.on_decode_error, _name)
    headers = kwargs.pop("include_headers", True)
    stats = kwargs.pop("stats", None)
    took = _reader.ReadStats()
    # the same LogDirs: the registry topic and the data are bounded by one reading of the
    # log's checkpoint files (cached by the LogDirs): one snapshot, so no record read
    # names a schema registered after the registry's bound. A dead letter keeps whole
    # records: headers are read for it even when the rows leave them out
    table = _reader.read_table(logdirs, topic, include_headers=headers or dead is not None,
                               stats=took, **kwargs)
    if stats is not None:
        _reader._add_stats(stats, took)
    schema = typed_schema(record_schema(headers), read)
    if dead is None:
        batches = list(typed_batches(table.to_batches(), read, counts=decode_errors))
        return pa.Table.from_batches(batches, schema=schema)
    from spark_kafkalog.log.read.dead_letter import DeadLetterSink
    sink = DeadLetterSink(dead[0], dead[1], took.ranges)
    try:
        batches = list(typed_batches(table.to_batches(), read, counts=decode_errors,
                                     dead_letter=sink, drop_headers=not headers))
    except BaseException:
        sink.abort()
        raise
    sink.commit()
    return pa.Table.from_batches(batches, schema=schema)


def _dead_letter_dir(uri, on_decode_error: str, filesystem_options):
    """(filesystem, directory) of ``dead_letter_path``, created; None without one."""
    if uri is None:
        return None
    from spark_kafkalog.errors import InvalidOptionError
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidOptionError(f"dead_letter_path: expected a directory URI, got {uri!r}")
    if on_decode_error == "fail":
        raise InvalidOptionError("dead_letter_path: needs on_decode_error='null' or 'skip' "
                                 "(under 'fail' the read stops at the first record that does "
                                 "not decode)")
    from spark_kafkalog.log.read.dead_letter import open_dead_letter_dir
    return open_dead_letter_dir(uri.strip(), filesystem_options, option="dead_letter_path")
