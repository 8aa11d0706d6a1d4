"""The read options that turn ``value`` / ``key`` into typed columns (issue 38), parsed here
and only here; :func:`~spark_kafkalog.spark.options.parse_read_options` calls
:func:`parse_typed_options` and keeps the result in ``ReadOptions.typed``.

``valueFormat`` / ``keyFormat``: ``binary`` (default, the bytes as Spark's Kafka source
gives them), ``avro``, ``protobuf`` or ``json`` (Avro, Protobuf or JSON Schema under one
reader schema) or ``registry`` (the type the registry gives the reader schema, AVRO,
PROTOBUF or JSON; every writer schema of the subject must be of that type). Where the
schemas come from: the log dir's own registry topic (``schemaRegistryTopic``, default
``_schemas``, the registry's ``kafkastore.topic``), a registry's REST API
(``schemaRegistryUrl``, ``schemaRegistryBasicAuth``), or one schema inline (``valueSchema``
/ ``keySchema``, with ``valueFraming=none`` for payloads without the 5-byte header;
``valueMessage`` picks the Protobuf message, default the file's first, as Confluent's
serializers). Which schema the struct has: ``valueSubject`` (default ``<topic>-value``),
``valueSchemaVersion`` or ``valueSchemaId`` (default: the subject's latest version not
soft-deleted). Bad records: ``onDecodeError`` = ``fail`` | ``null`` | ``skip``;
``keepRawValue`` / ``keepRawKey`` keep the bytes beside the struct; ``deadLetterPath`` (with
null or skip) has each task write the records it could not decode, raw and whole, as
Parquet into that directory (``log/read/dead_letter.py``). Every problem raises
:class:`InvalidOptionError` naming the option.
"""
from __future__ import annotations

from dataclasses import replace

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.spark.option_values import parse_bool, parse_int
from spark_kafkalog.typed.request import (
    TypedColumn,
    TypedOptions,
    make_column,
    make_typed,
    spark_name,
)

#: lower-cased key -> the spelling messages use (merged into options._READ_NAMES)
TYPED_NAMES = {
    "valueformat": "valueFormat", "keyformat": "keyFormat",
    "schemaregistrytopic": "schemaRegistryTopic", "schemaregistryurl": "schemaRegistryUrl",
    "schemaregistrybasicauth": "schemaRegistryBasicAuth",
    "valueschema": "valueSchema", "keyschema": "keySchema",
    "valueframing": "valueFraming", "keyframing": "keyFraming",
    "valuesubject": "valueSubject", "keysubject": "keySubject",
    "valueschemaversion": "valueSchemaVersion", "keyschemaversion": "keySchemaVersion",
    "valueschemaid": "valueSchemaId", "keyschemaid": "keySchemaId",
    "ondecodeerror": "onDecodeError",
    "keeprawvalue": "keepRawValue", "keeprawkey": "keepRawKey",
    "valuemessage": "valueMessage", "keymessage": "keyMessage",
    "deadletterpath": "deadLetterPath",
}


def _column(opts: dict[str, str], column: str) -> TypedColumn | None:
    """The string options of ``column`` converted, then checked together by
    :func:`~spark_kafkalog.typed.request.make_column`."""
    def get(what: str) -> str | None:
        return opts.get(spark_name(column, what).lower())

    version = schema_id = None
    text = get("SchemaVersion")
    if text is not None and text.strip().lower() != "latest":
        version = parse_int(spark_name(column, "SchemaVersion"), text, minimum=1)
    if get("SchemaId") is not None:
        schema_id = parse_int(spark_name(column, "SchemaId"), get("SchemaId"), minimum=0)
    keep = get("KeepRaw")
    return make_column(column, get("Format") or "binary", inline_schema=get("Schema"),
                       subject=get("Subject"), version=version, schema_id=schema_id,
                       framing=get("Framing"), message=get("Message"),
                       keep_raw=None if keep is None else
                       parse_bool(spark_name(column, "KeepRaw"), keep))


def parse_typed_options(opts: dict[str, str]) -> TypedOptions | None:
    """``opts`` (lower-cased keys) -> :class:`TypedOptions`, or None when both columns
    stay binary and no typed option is given."""
    value = _column(opts, "value")
    key = _column(opts, "key")
    if value is None and key is None:
        extra = [k for k in TYPED_NAMES if k in opts and k not in ("valueformat", "keyformat")]
        if extra:
            raise InvalidOptionError(f"{TYPED_NAMES[extra[0]]}: applies to typed columns; "
                                     f"set valueFormat or keyFormat to avro, protobuf, "
                                     f"json or registry")
        return None
    typed = make_typed(value, key, opts.get("ondecodeerror"), opts.get("schemaregistrytopic"),
                       opts.get("schemaregistryurl"), opts.get("schemaregistrybasicauth"))
    dead = opts.get("deadletterpath")
    if dead is None:
        return typed
    if not dead.strip():
        raise InvalidOptionError("deadLetterPath: expected a directory URI, got ''")
    if typed.on_decode_error == "fail":
        raise InvalidOptionError("deadLetterPath: needs onDecodeError=null or skip (under "
                                 "fail the read stops at the first record that does not "
                                 "decode)")
    return replace(typed, dead_letter=dead.strip())
