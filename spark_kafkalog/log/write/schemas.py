"""The writer schema of a typed write, and registering it in the log dir's ``_schemas``.

:func:`writer_schema` picks the schema and id a column is encoded with, as Confluent's
serializer does: a named id or version; else the given (or derived) schema looked up
under the subject (TopicNameStrategy); else the subject's latest version. A schema the
subject does not hold is refused, or with ``auto_register`` appended to the registry's
topic as the registry itself appends it (KafkaSchemaRegistry.register): the id of the
same schema elsewhere in the context, else the next id; the next version; after the
subject's compatibility level (its CONFIG, else the global one, else BACKWARD) passes,
checked with the Avro resolution rules of the decoder (``typed/avro_program.py``):
BACKWARD (the new schema reads data of the latest version), FORWARD (the latest reads
the new), FULL (both), ``*_TRANSITIVE`` against every version not soft-deleted, NONE.
The SCHEMA key and value are JSON as KafkaStore writes them (``typed/registry.py``) and
go through :func:`~spark_kafkalog.log.write.table.write_table`: one commit, whole or
not at all. Two writers registering at once are not serialised against each other (the
registry's leader is the only writer of its topic): run registering writes one at a time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError, SchemaError, SchemaNotFoundError
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.typed.avro_program import Program
from spark_kafkalog.typed.avro_schema import parse_schema
from spark_kafkalog.typed.registry import RegistryState, context_of

__all__ = ["WriterSchema", "writer_schema", "check_compatibility", "schema_record"]

DEFAULT_LEVEL = "BACKWARD"


@dataclass(frozen=True)
class WriterSchema:
    """What a column is encoded with: ``schema`` (Avro JSON), ``id`` (None: no framing),
    ``named_types`` (referenced schemas by full name), ``registered`` (this write
    appended it)."""
    column: str
    schema: str
    id: int | None
    named_types: tuple = ()
    registered: bool = False


def schema_record(subject: str, version: int, schema_id: int, schema: str
                  ) -> tuple[bytes, bytes]:
    """The SCHEMA key and value KafkaStore writes for a new Avro version (Jackson,
    compact; schemaType AVRO and empty references left out, ``deleted`` always)."""
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id, "schema": schema,
             "deleted": False}
    dump = lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode()  # noqa: E731
    return dump(key), dump(value)


def _canonical(text: str) -> str:
    """The schema text the registry stores: compact JSON (Avro's Schema.toString)."""
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError as err:
        raise SchemaError(f"Avro schema is not JSON: {err}") from err


def _same(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


def _named(state: RegistryState, entry) -> dict[str, str]:
    return {name: ref.schema for name, ref in state.references_of(entry).items()}


def check_compatibility(state: RegistryState, subject: str, schema: str) -> str:
    """The subject's level; raises SchemaError naming the level and both schemas when
    ``schema`` fails it against the subject's versions not soft-deleted."""
    level = (state.config(subject, default_to_global=True) or DEFAULT_LEVEL).upper()
    if level == "NONE":
        return level
    try:
        versions = state.versions(subject)
    except SchemaNotFoundError:
        return level                  # a first version is compatible with nothing
    if not level.endswith("_TRANSITIVE"):
        versions = versions[-1:]
    new = parse_schema(schema)
    for v in reversed(versions):
        old_entry = state.version(subject, v)
        old = parse_schema(old_entry.schema, _named(state, old_entry))
        pairs = []
        if level.startswith(("BACKWARD", "FULL")):
            pairs.append((new, old, "the new schema cannot read data written with"))
        if level.startswith(("FORWARD", "FULL")):
            pairs.append((old, new, "data written with the new schema cannot be read by"))
        for reader, writer, why in pairs:
            try:
                Program(reader).add_writer(writer, f"{subject} v{v}")
            except SchemaError as err:
                raise SchemaError(
                    f"schema for subject {subject} is incompatible under compatibility "
                    f"level {level}: {why} version {v} (id {old_entry.id}): {err}; new "
                    f"schema {schema}; version {v}: {old_entry.schema}") from err
    return level


def _register(path: str, registry_topic: str, state: RegistryState, subject: str,
              schema: str, filesystem_options) -> int:
    from spark_kafkalog.log.write.table import write_table

    mode = state.mode(subject, default_to_global=True)
    if mode not in (None, "READWRITE"):
        raise InvalidOptionError(f"autoRegisterSchemas: subject {subject} is in mode {mode}; "
                                 f"the registry refuses new schemas there")
    check_compatibility(state, subject, schema)
    ctx = context_of(subject)
    same = [s for s in state.schemas() if s.context == ctx and s.schema_type == "AVRO"
            and not s.references and _same(s.schema, schema)]
    schema_id = same[0].id if same else state.next_id(subject)
    key, value = schema_record(subject, state.next_version(subject), schema_id, schema)
    from spark_kafkalog.log.io import resolve_filesystem
    fs, root = resolve_filesystem(path, dict(filesystem_options or {}))
    write_table(root, registry_topic, pa.table({"key": [key], "value": [value]}),
                partitions=1, filesystem=fs)
    return schema_id


def writer_schema(path: str, topic: str, col, arrow_type: pa.DataType, *,
                  auto_register: bool = False, registry_topic: str = "_schemas",
                  filesystem_options=None, derive=None) -> WriterSchema:
    """The :class:`WriterSchema` of ``col`` (a :class:`~spark_kafkalog.typed.request.TypedColumn`)
    for ``topic`` in the log dir ``path``. ``derive(arrow_type)``: the schema of a column
    with no schema named (``typed.avro_write.avro_schema_of``)."""
    name = col.option
    if col.framing == "none":
        schema = col.inline_schema or derive(arrow_type)
        return WriterSchema(col.column, schema, None)
    logdirs = LogDirs(path, filesystem_options, include_internal=True)
    if registry_topic in logdirs.topics():
        state = read_registry(logdirs, registry_topic)
    else:
        state = RegistryState(registry_topic)
    subject = col.subject_for(topic)
    try:
        if col.schema_id is not None:
            entry = state.by_id(col.schema_id)
        elif col.version is not None:
            entry = state.version(subject, col.version)
        elif col.inline_schema is None and not auto_register:
            entry = state.latest(subject)
        else:
            entry = None
    except SchemaNotFoundError as err:
        what = "SchemaId" if col.schema_id is not None else "SchemaVersion" \
            if col.version is not None else "Subject"
        raise InvalidOptionError(f"{name(what)}: {err} (in topic {registry_topic} of "
                                 f"{path}); register it first, or give {name('Schema')} "
                                 f"with autoRegisterSchemas=true") from err
    if entry is not None:
        if (entry.schema_type or "AVRO") != "AVRO":
            raise InvalidOptionError(f"{name('Format')}=avro: schema id {entry.id} is "
                                     f"{entry.schema_type}")
        return WriterSchema(col.column, entry.schema, entry.id,
                            tuple(sorted(_named(state, entry).items())))
    schema = _canonical(col.inline_schema if col.inline_schema is not None
                        else derive(arrow_type))
    parse_schema(schema)
    try:
        for v in state.versions(subject):
            held = state.version(subject, v)
            if (held.schema_type or "AVRO") == "AVRO" and _same(held.schema, schema):
                return WriterSchema(col.column, held.schema, held.id,
                                    tuple(sorted(_named(state, held).items())))
    except SchemaNotFoundError:
        pass
    if not auto_register:
        raise InvalidOptionError(
            f"{name('Schema')}: the schema is not registered under subject {subject} (topic "
            f"{registry_topic} of {path}); set autoRegisterSchemas=true to register it, or "
            f"register it first. Schema: {schema}")
    sid = _register(path, registry_topic, state, subject, schema, filesystem_options)
    return WriterSchema(col.column, schema, sid, (), True)
