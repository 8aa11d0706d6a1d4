"""Typed ``value`` / ``key`` for ``df.write.format("kafkalog")`` (issue 38 item 6), batch
and stream (both plan here): the options, planning on the driver, and the encoding in
each task.

``valueFormat`` / ``keyFormat`` = ``avro``, ``protobuf`` or ``json`` turns a struct column
into Avro (``typed/avro_write.py``), a Protobuf message (``typed/proto_write.py``; the
message named by ``valueMessage``, default the file's first) or JSON checked against its
JSON Schema (``typed/json_write.py``), framed with its schema id. The schema is named as
the read names it (``valueSchema`` inline,
``valueSubject`` — default ``<topic>-value`` —, ``valueSchemaVersion``, ``valueSchemaId``,
``valueFraming=none`` for bare Avro) and looked up in the destination log dir's registry
topic (``schemaRegistryTopic``, default ``_schemas``); with ``autoRegisterSchemas=true`` a
schema the subject lacks is registered there (``log/write/schemas.py``) — the given one,
or for Avro without ``valueSchema`` the one Spark's ``to_avro`` derives from the struct
type. ``valueSchemaReferences`` (``[{"name", "subject", "version"}]``) names the
registered schemas the given one imports (Avro named types, Protobuf imports, ``$ref``).
Everything is decided in :func:`plan_typed_write`, before any task runs; tasks get the
schema texts and ids (:class:`~spark_kafkalog.log.write.typed_write.TypedWrite`, shared
with the library's typed ``write_table``) and encode with them.
"""
from __future__ import annotations

from dataclasses import dataclass

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log.write.typed_write import TypedWrite
from spark_kafkalog.spark.option_values import parse_bool, parse_int
from spark_kafkalog.typed.request import make_column, spark_name

__all__ = ["TYPED_WRITE_NAMES", "TypedWriteOptions", "parse_typed_write", "plan_typed_write",
           "TypedWrite"]

#: lower-cased key -> spelling (the read's names where they mean the same)
TYPED_WRITE_NAMES = {
    "valueformat": "valueFormat", "keyformat": "keyFormat",
    "valueschema": "valueSchema", "keyschema": "keySchema",
    "valueframing": "valueFraming", "keyframing": "keyFraming",
    "valuesubject": "valueSubject", "keysubject": "keySubject",
    "valueschemaversion": "valueSchemaVersion", "keyschemaversion": "keySchemaVersion",
    "valueschemaid": "valueSchemaId", "keyschemaid": "keySchemaId",
    "valuemessage": "valueMessage", "keymessage": "keyMessage",
    "valueschemareferences": "valueSchemaReferences",
    "keyschemareferences": "keySchemaReferences",
    "autoregisterschemas": "autoRegisterSchemas",
    "schemaregistrytopic": "schemaRegistryTopic",
}


@dataclass(frozen=True)
class TypedWriteOptions:
    columns: tuple = ()                 # TypedColumn of value / key
    auto_register: bool = False
    registry_topic: str = "_schemas"
    references: tuple = ()              # (column, (SchemaReference, ...)) given



def _column(opts: dict, column: str):
    def get(what):
        return opts.get(spark_name(column, what).lower())

    fmt = (get("Format") or "binary").strip().lower()
    if fmt not in _WRITE_FORMATS:
        raise InvalidOptionError(f"{spark_name(column, 'Format')}={fmt}: a write encodes "
                                 f"avro, protobuf or json (or binary, as given); "
                                 f"{fmt} is for reads")
    version = schema_id = None
    text = get("SchemaVersion")
    if text is not None and text.strip().lower() != "latest":
        version = parse_int(spark_name(column, "SchemaVersion"), text, minimum=1)
    if get("SchemaId") is not None:
        schema_id = parse_int(spark_name(column, "SchemaId"), get("SchemaId"), minimum=0)
    if get("SchemaReferences") is not None and fmt == "binary":
        raise InvalidOptionError(f"{spark_name(column, 'SchemaReferences')}: needs "
                                 f"{spark_name(column, 'Format')}=avro, protobuf or json")
    return make_column(column, fmt, inline_schema=get("Schema"), subject=get("Subject"),
                       version=version, schema_id=schema_id, framing=get("Framing"),
                       message=get("Message"))


def parse_typed_write(opts: dict) -> TypedWriteOptions | None:
    """The typed-write options of ``opts`` (lower-cased keys, only TYPED_WRITE_NAMES);
    None when none is given."""
    if not opts:
        return None
    cols = tuple(c for c in (_column(opts, "value"), _column(opts, "key")) if c is not None)
    auto = parse_bool("autoRegisterSchemas", opts["autoregisterschemas"]) \
        if "autoregisterschemas" in opts else False
    topic = (opts.get("schemaregistrytopic") or "_schemas").strip()
    if not cols and len(opts) > sum(k in opts for k in ("valueformat", "keyformat")):
        extra = sorted(k for k in opts if k not in ("valueformat", "keyformat"))
        raise InvalidOptionError(f"{TYPED_WRITE_NAMES[extra[0]]}: applies to typed columns; "
                                 f"set valueFormat or keyFormat to avro, protobuf or json")
    from spark_kafkalog.log.write.schemas import parse_references
    refs = tuple((c.column, parse_references(c.option("SchemaReferences"),
                                             opts.get(c.option("SchemaReferences").lower())))
                 for c in cols)
    # a column named by id or version is registered already: autoRegisterSchemas
    # applies to the others
    return TypedWriteOptions(cols, auto, topic, refs)


_WRITE_FORMATS = ("avro", "protobuf", "json", "binary")


def plan_typed_write(wo, spark_schema) -> TypedWrite | None:
    """Resolve (and with autoRegisterSchemas register) each typed column's schema now;
    an encoder is built for the column's type so a mismatch fails before any task."""
    typed = wo.typed
    if typed is None or not typed.columns:
        return None
    from pyspark.sql.pandas.types import to_arrow_type

    from spark_kafkalog.log.write.typed_write import plan_columns

    fields = {f.name.lower(): f for f in spark_schema.fields}
    refs = dict(typed.references)
    cols = [(col, to_arrow_type(fields[col.column].dataType, timezone="UTC"),
             refs.get(col.column, ())) for col in typed.columns]
    return plan_columns(wo.path, wo.topic, cols, auto_register=typed.auto_register,
                        registry_topic=typed.registry_topic,
                        filesystem_options=wo.filesystem_options)
