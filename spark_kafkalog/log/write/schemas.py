"""The writer schema of a typed write (Avro, Protobuf or JSON Schema), and registering it
in the log dir's ``_schemas``.

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
Protobuf and JSON Schema are checked with the registry's own diff rules
(``typed/proto_compat.py``, ``typed/json_compat.py``; JSON under the subject's
``compatibilityPolicy``, STRICT unless LENIENT) at every level. A schema may name
``references`` (``[{name, subject, version}]``: Avro named types, Protobuf imports, JSON
``$ref`` documents of other subjects), which must be registered; they are written into the
SCHEMA value and given to the encoder.
The SCHEMA key and value are JSON as KafkaStore writes them (``typed/registry.py``) and
go through :func:`~spark_kafkalog.log.write.table.write_table`: one commit, whole or
not at all. Two writers registering at once are not serialised against each other (the
registry's leader is the only writer of its topic): run registering writes one at a time.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError, SchemaError, SchemaNotFoundError
from spark_kafkalog.log.read.discovery import LogDirs
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.typed.avro_program import Program
from spark_kafkalog.typed.avro_schema import parse_schema
from spark_kafkalog.typed.registry import RegistryState, SchemaReference, context_of
from spark_kafkalog.typed.request import SCHEMA_TYPES

__all__ = ["WriterSchema", "writer_schema", "check_compatibility", "schema_record"]

DEFAULT_LEVEL = "BACKWARD"


@dataclass(frozen=True)
class WriterSchema:
    """What a column is encoded with: ``schema`` (Avro JSON, ``.proto`` text or JSON
    Schema), ``id`` (None: no framing), ``named_types`` (referenced schemas: Avro full
    name, import or ``$ref`` name -> text), ``registered`` (this write appended it),
    ``schema_type`` (AVRO, PROTOBUF, JSON)."""
    column: str
    schema: str
    id: int | None
    named_types: tuple = ()
    registered: bool = False
    schema_type: str = "AVRO"


def schema_record(subject: str, version: int, schema_id: int, schema: str,
                  schema_type: str = "AVRO", references=()) -> tuple[bytes, bytes]:
    """The SCHEMA key and value KafkaStore writes for a new version (Jackson, compact, in
    SchemaValue's creator order: subject, version, id, schemaType, references, schema,
    deleted; empty fields left out). ``schemaType`` is left out for AVRO, as registries
    before Protobuf/JSON support wrote it (every registry reads it as AVRO)."""
    key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
    value = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in references]
    value["schema"] = schema
    value["deleted"] = False
    dump = lambda o: json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode()  # noqa: E731
    return dump(key), dump(value)


def _canonical(text: str, schema_type: str) -> str:
    """The schema text stored: compact JSON for Avro (Schema.toString) and JSON Schema
    (Jackson); ``.proto`` text as given (the registry prints its own normal form, which
    parses to the same descriptors)."""
    if schema_type == "PROTOBUF":
        return text
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError as err:
        raise SchemaError(f"{schema_type} schema is not JSON: {err}") from err


def _proto_file(text: str, named: dict):
    from spark_kafkalog.typed.proto_schema import load_file
    return load_file(text, named)


def _proto_tokens(text: str) -> list[str]:
    """The ``.proto`` text's tokens, comments dropped: two files whose tokens differ are
    not compiled to be compared (protoc runs once per text)."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)
    return re.findall(r'"(?:[^"\\]|\\.)*"|\w+|[^\s\w]', text)


def _same(a: str, b: str, schema_type: str = "AVRO", named_a=None, named_b=None) -> bool:
    if schema_type == "PROTOBUF":
        if a.strip() == b.strip():
            return True
        if _proto_tokens(a) != _proto_tokens(b) and not (
                _is_base64(a) or _is_base64(b)):
            return False                # the same descriptors need the same tokens
        try:
            fa, fb = _proto_file(a, named_a or {}), _proto_file(b, named_b or {})
        except SchemaError:
            return False
        return fa.serialized_pb == fb.serialized_pb
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


def _is_base64(text: str) -> bool:
    """A schema registered as base64 of its FileDescriptorProto (confluent-kafka's
    Python serializers do), which only compiling compares with ``.proto`` text."""
    return not any(ch in text.strip() for ch in " ;{\n")


def _named(state: RegistryState, entry) -> dict[str, str]:
    return {name: ref.schema for name, ref in state.references_of(entry).items()}


def _named_of(state: RegistryState, refs, subject: str) -> dict[str, str]:
    """The texts a new schema's ``refs`` name (and what those import), by reference name
    (an unqualified reference subject is in ``subject``'s context)."""
    from spark_kafkalog.typed.registry import RegisteredSchema
    probe = RegisteredSchema(-1, subject, 0, "", "", tuple(refs), False, -1)
    return _named(state, probe)


def _parse(schema: str, schema_type: str, named: dict):
    if schema_type == "AVRO":
        return parse_schema(schema, named)
    if schema_type == "PROTOBUF":
        return _proto_file(schema, named)
    from spark_kafkalog.typed.jsonschema import json_arrow_type
    return json_arrow_type(schema, named)


def _for_diff(schema: str, schema_type: str, named: dict):
    """A schema parsed for the compatibility check (JSON: loaded as the registry loads
    it, which its Arrow type does not tell)."""
    if schema_type != "JSON":
        return _parse(schema, schema_type, named)
    from spark_kafkalog.typed.json_compat_model import load
    return load(schema, named)


def _incompatible(schema_type, reader, writer, subject, v, policy=None) -> str | None:
    """Why data of ``writer`` is not readable by ``reader`` (parsed), or None."""
    if schema_type == "AVRO":
        try:
            Program(reader).add_writer(writer, f"{subject} v{v}")
        except SchemaError as err:
            return str(err)
        return None
    if schema_type == "JSON":
        from spark_kafkalog.typed.json_compat import incompatibilities as json_diff
        found = json_diff(writer, reader, policy or "STRICT")
    else:
        from spark_kafkalog.typed.proto_compat import incompatibilities
        found = incompatibilities(writer, reader)
    return "; ".join(found) if found else None


def _policy(state: RegistryState, subject: str) -> str | None:
    """The subject's compatibilityPolicy, else its context's or the global one (the
    registry merges a subject's config field by field over the global config)."""
    own = (state.config_value(subject) or {}).get("compatibilityPolicy")
    if own is not None:
        return own
    # a name no record has, in the subject's context: only the global configs answer it
    return (state.config_value(subject + "\0", default_to_global=True) or {}).get(
        "compatibilityPolicy")


def check_compatibility(state: RegistryState, subject: str, schema: str,
                        schema_type: str = "AVRO", named=None) -> str:
    """The subject's level; raises SchemaError naming the level and both schemas when
    ``schema`` fails it against the subject's versions not soft-deleted."""
    level = (state.config(subject, default_to_global=True) or DEFAULT_LEVEL).upper()
    if level == "NONE":
        return level
    try:
        versions = state.versions(subject)
    except SchemaNotFoundError:
        return level                  # a first version is compatible with nothing
    policy = _policy(state, subject)
    if not level.endswith("_TRANSITIVE"):
        versions = versions[-1:]
    where = f"schema for subject {subject} under compatibility level {level}"
    try:
        new = _for_diff(schema, schema_type, dict(named or {}))
    except SchemaError as err:
        raise SchemaError(f"{where}: the new schema: {err}") from err
    for v in reversed(versions):
        old_entry = state.version(subject, v)
        if old_entry.schema_type != schema_type:
            raise SchemaError(f"schema for subject {subject} is incompatible under "
                              f"compatibility level {level}: version {v} is "
                              f"{old_entry.schema_type}, the new schema {schema_type}")
        against = f"{where}, against version {v} (id {old_entry.id})"
        try:
            old = _for_diff(old_entry.schema, schema_type, _named(state, old_entry))
        except SchemaError as fail:
            raise SchemaError(f"{against}: {fail}") from fail
        pairs = []
        if level.startswith(("BACKWARD", "FULL")):
            pairs.append((new, old, "the new schema cannot read data written with"))
        if level.startswith(("FORWARD", "FULL")):
            pairs.append((old, new, "data written with the new schema cannot be read by"))
        for reader, writer, why in pairs:
            try:
                err = _incompatible(schema_type, reader, writer, subject, v, policy)
            except SchemaError as fail:      # a change the diff refuses to judge
                raise SchemaError(f"{against}: {fail}") from fail
            if err is not None:
                raise SchemaError(
                    f"schema for subject {subject} is incompatible under compatibility "
                    f"level {level}: {why} version {v} (id {old_entry.id}): {err}; new "
                    f"schema {schema}; version {v}: {old_entry.schema}")
    return level


def _register(path: str, registry_topic: str, state: RegistryState, subject: str,
              schema: str, filesystem_options, schema_type: str = "AVRO", refs=(),
              named=None) -> int:
    from spark_kafkalog.log.write.table import write_table

    mode = state.mode(subject, default_to_global=True)
    if mode not in (None, "READWRITE"):
        raise InvalidOptionError(f"autoRegisterSchemas: subject {subject} is in mode {mode}; "
                                 f"the registry refuses new schemas there")
    check_compatibility(state, subject, schema, schema_type, named)
    ctx = context_of(subject)
    same = [s for s in state.schemas() if s.context == ctx and s.schema_type == schema_type
            and tuple(s.references) == tuple(refs)
            and _same(s.schema, schema, schema_type, _named(state, s), named)]
    schema_id = same[0].id if same else state.next_id(subject)
    key, value = schema_record(subject, state.next_version(subject), schema_id, schema,
                               schema_type, refs)
    from spark_kafkalog.log.io import resolve_filesystem
    fs, root = resolve_filesystem(path, dict(filesystem_options or {}))
    write_table(root, registry_topic, pa.table({"key": [key], "value": [value]}),
                partitions=1, filesystem=fs)
    return schema_id


def parse_references(name: str, text: str | None) -> tuple[SchemaReference, ...]:
    """``[{"name", "subject", "version"}]`` (the registry's REST form) -> references."""
    if text is None:
        return ()
    try:
        refs = json.loads(text)
        out = tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                    for r in refs)
    except (ValueError, TypeError, KeyError) as err:
        raise InvalidOptionError(f"{name}: expected a JSON list of {{\"name\", "
                                 f"\"subject\", \"version\"}}, got {text!r}") from err
    return out


def writer_schema(path: str, topic: str, col, arrow_type: pa.DataType, *,
                  auto_register: bool = False, registry_topic: str = "_schemas",
                  filesystem_options=None, derive=None, references=()) -> WriterSchema:
    """The :class:`WriterSchema` of ``col`` (a :class:`~spark_kafkalog.typed.request.TypedColumn`)
    for ``topic`` in the log dir ``path``. ``derive(arrow_type)``: the schema of a column
    with no schema named (Avro: ``typed.avro_write.avro_schema_of``; None: a schema must
    be named). ``references``: those of the given schema (:func:`parse_references`)."""
    name = col.option
    schema_type = SCHEMA_TYPES[col.format]
    logdirs = None
    if col.framing == "none" and not references:
        if col.inline_schema is None and derive is None:
            raise InvalidOptionError(f"{name('Framing')}=none: give the schema in "
                                     f"{name('Schema')}")
        schema = col.inline_schema or derive(arrow_type)
        return WriterSchema(col.column, schema, None, schema_type=schema_type)
    logdirs = LogDirs(path, filesystem_options, include_internal=True)
    if registry_topic in logdirs.topics():
        state = read_registry(logdirs, registry_topic)
    else:
        state = RegistryState(registry_topic)
    try:
        named = _named_of(state, references, col.subject_for(topic or ""))
    except SchemaNotFoundError as err:
        raise InvalidOptionError(f"{name('SchemaReferences')}: {err} (in topic "
                                 f"{registry_topic} of {path})") from err
    if col.framing == "none":
        return WriterSchema(col.column, col.inline_schema, None,
                            tuple(sorted(named.items())), schema_type=schema_type)
    subject = col.subject_for(topic)
    try:
        if col.schema_id is not None:
            entry = state.by_id(col.schema_id)
        elif col.version is not None:
            entry = state.version(subject, col.version)
        elif col.inline_schema is None and not (auto_register and derive is not None):
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
        if (entry.schema_type or "AVRO") != schema_type:
            raise InvalidOptionError(f"{name('Format')}={col.format}: schema id {entry.id} "
                                     f"is {entry.schema_type}")
        return WriterSchema(col.column, entry.schema, entry.id,
                            tuple(sorted(_named(state, entry).items())),
                            schema_type=schema_type)
    schema = _canonical(col.inline_schema if col.inline_schema is not None
                        else derive(arrow_type), schema_type)
    _parse(schema, schema_type, named)
    try:
        for v in state.versions(subject):
            held = state.version(subject, v)
            if held.schema_type == schema_type and \
                    tuple(held.references) == tuple(references) and \
                    _same(held.schema, schema, schema_type, _named(state, held), named):
                return WriterSchema(col.column, held.schema, held.id,
                                    tuple(sorted(_named(state, held).items())),
                                    schema_type=schema_type)
    except SchemaNotFoundError:
        pass
    if not auto_register:
        raise InvalidOptionError(
            f"{name('Schema')}: the schema is not registered under subject {subject} (topic "
            f"{registry_topic} of {path}); set autoRegisterSchemas=true to register it, or "
            f"register it first. Schema: {schema}")
    sid = _register(path, registry_topic, state, subject, schema, filesystem_options,
                    schema_type, tuple(references), named)
    return WriterSchema(col.column, schema, sid, tuple(sorted(named.items())), True,
                        schema_type)
