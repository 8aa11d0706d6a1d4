"""Typed records: bytes and schemas in, Arrow columns out, no files (beside ``format/``).

:mod:`~spark_kafkalog.typed.avro`, :mod:`~spark_kafkalog.typed.protobuf` and
:mod:`~spark_kafkalog.typed.jsonschema` decode schema-registry values into Arrow columns;
:mod:`~spark_kafkalog.typed.registry` decodes the schema registry's own topic
(``_schemas``) and builds the registry's state (subjects, versions, ids, configs);
reading that topic from a log dir is :func:`spark_kafkalog.log.read.schemas.read_registry`;
:mod:`~spark_kafkalog.typed.columns` makes the typed ``value`` / ``key`` columns of a read.
The write side: :mod:`~spark_kafkalog.typed.avro_write`,
:mod:`~spark_kafkalog.typed.proto_write` and :mod:`~spark_kafkalog.typed.json_write` encode
Arrow struct columns as framed values; :mod:`~spark_kafkalog.typed.proto_compat` is the
registry's Protobuf compatibility diff, for registering.
"""
from spark_kafkalog.typed.registry import (
    RegisteredSchema,
    RegistryState,
    SchemaReference,
)

__all__ = ["RegisteredSchema", "RegistryState", "SchemaReference"]
