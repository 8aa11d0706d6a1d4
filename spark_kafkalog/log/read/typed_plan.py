"""Planning a typed read (issue 38): where the schemas come from, which one is the reader
schema, which writer schemas the data may carry, and the decoder built once to prove they
resolve before any record is read.

Schemas come from the log dirs' own registry topic (``_schemas`` or the name given, read
once with :func:`~spark_kafkalog.log.read.schemas.read_registry`), a registry's REST API
(:class:`~spark_kafkalog.log.read.registry_rest.RestRegistry`), or one schema inline.

The reader schema is the one the user names (inline, an id, a subject's version) or the
subject's latest version not soft-deleted; the subject is ``<topic>-value`` / ``<topic>-key``
(TopicNameStrategy) unless named. The writer schemas are every version of that subject,
soft-deleted ones included (records written with them are still in the log), plus the
reader's own id: an id outside that set in the data is a bad record (``onDecodeError``).
Record-name strategies (several record types in one topic) are not planned for: one read
has one struct, the subject's. Several topics must share one reader schema; topics whose
reader schemas differ are refused, naming both.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Sequence

from spark_kafkalog.errors import (
    InvalidOptionError,
    SchemaError,
    SchemaNotFoundError,
    SchemaResolutionError,
)
from spark_kafkalog.log.read.registry_rest import RestRegistry, SchemaLookupError
from spark_kafkalog.log.read.schemas import read_registry
from spark_kafkalog.typed.columns import DecodeSpec, TypedRead, decoder_of
from spark_kafkalog.typed.request import SCHEMA_TYPES, TypedColumn, spark_name

__all__ = ["LocalRegistry", "open_schema_source", "plan_typed_read", "resolve_column"]

DEFAULT_REGISTRY_TOPIC = "_schemas"


@dataclass(frozen=True)
class _Entry:
    id: int
    schema: str
    schema_type: str
    references: tuple[tuple[str, str, int], ...]
    version: int | None = None
    subject: str | None = None


class LocalRegistry:
    """The registry state read from a log dir's ``_schemas``, answering as
    :class:`RestRegistry` does (``by_id``, ``version``, ``versions``)."""

    def __init__(self, state, where: str):
        self.state = state
        self.where = where

    def describe(self) -> str:
        return self.where

    @staticmethod
    def _entry(rs) -> _Entry:
        refs = tuple((r.name, r.subject, int(r.version)) for r in rs.references)
        return _Entry(int(rs.id), rs.schema, rs.schema_type or "AVRO", refs, rs.version,
                      rs.subject)

    def by_id(self, schema_id: int) -> _Entry:
        try:
            return self._entry(self.state.by_id(schema_id))
        except SchemaNotFoundError as err:
            raise SchemaLookupError(f"{self.where}: {err.reason}", err.error_code) from err

    def version(self, subject: str, version: int | None, *, deleted: bool = False) -> _Entry:
        try:
            return self._entry(self.state.version(
                subject, "latest" if version is None else version, include_deleted=deleted))
        except SchemaNotFoundError as err:
            raise SchemaLookupError(f"{self.where}: {err.reason}", err.error_code) from err

    def versions(self, subject: str) -> list[int]:
        try:
            return self.state.versions(subject, include_deleted=True)
        except SchemaNotFoundError:
            return []


def open_schema_source(logdirs, *, registry_topic: str | None = None,
                       registry_url: str | None = None, registry_auth: str | None = None,
                       remote_storage=None, remote_layout: str | None = None,
                       topic_option: str = "schemaRegistryTopic"):
    """Where a read's schemas come from: the REST registry at ``registry_url``, else the
    log dirs' ``registry_topic`` (default ``_schemas``, None when absent; an explicitly
    named topic that is absent is an error), read once now."""
    if registry_url:
        return RestRegistry(registry_url, registry_auth)
    topic = registry_topic or DEFAULT_REGISTRY_TOPIC
    if topic not in logdirs.topics():
        if registry_topic:
            raise InvalidOptionError(f"{topic_option}: no topic {topic!r} in log dirs "
                                     f"{', '.join(logdirs.roots)}")
        return None
    state = read_registry(logdirs, topic, remote_storage=remote_storage,
                          remote_layout=remote_layout,
                          filesystem_options=dict(logdirs.filesystem_options or {}))
    return LocalRegistry(state, f"topic {topic} of log dirs {', '.join(logdirs.roots)}")


def _check_type(entry, col: TypedColumn, what: str, expected: str, names=spark_name) -> str:
    """``entry``'s schema type, which must be ``expected`` (the format's type, or for
    ``registry`` the reader schema's): one column has one decoder, so a subject whose
    versions are of several types is refused, naming the version."""
    kind = (entry.schema_type or "AVRO").upper()
    if kind not in ("AVRO", "PROTOBUF", "JSON"):
        raise InvalidOptionError(f"{names(col.column, 'Format')}={col.format}: {what} has "
                                 f"schema type {kind}, which has no decoder (AVRO, PROTOBUF "
                                 f"and JSON do)")
    if kind != expected:
        why = ("the reader schema is " + expected if col.format == "registry" else
               f"{names(col.column, 'Format')}={col.format} reads {expected} schemas")
        raise InvalidOptionError(f"{names(col.column, 'Format')}={col.format}: {what} has "
                                 f"schema type {kind}, and {why}; one column decodes one "
                                 f"schema type")
    return kind


def _named_types(source, entry, out: dict[str, str], seen: set) -> None:
    """The registry's schema references of ``entry``, by full name, recursively."""
    for name, subject, version in entry.references:
        if (subject, version) in seen:
            continue
        seen.add((subject, version))
        ref = source.version(subject, version, deleted=True)
        out.setdefault(name, ref.schema)
        _named_types(source, ref, out, seen)


def resolve_column(source, topic: str, col: TypedColumn, names=spark_name) -> DecodeSpec:
    """The :class:`DecodeSpec` of ``col`` for ``topic``: reader schema, writer schemas by
    id, named types. Raises InvalidOptionError naming the option (``names(column, what)``
    spells it) when the schema it asks for is not there."""
    subject = col.subject_for(topic)
    named: dict[str, str] = {}
    seen: set = set()
    kind = SCHEMA_TYPES.get(col.format)          # None for registry: the reader's type
    if col.inline_schema is not None:
        reader, reader_id = col.inline_schema, None
        origin = f"{names(col.column, 'Schema')} (inline)"
    else:
        if source is None:
            raise InvalidOptionError(
                f"{names(col.column, 'Format')}={col.format}: no schemas to read {topic!r} "
                f"with: the log dirs hold no {DEFAULT_REGISTRY_TOPIC} topic; name the "
                f"registry's topic, a registry URL or an inline schema "
                f"({names(col.column, 'Schema')})")
        try:
            if col.schema_id is not None:
                entry = source.by_id(col.schema_id)
                origin = f"schema id {col.schema_id} of {source.describe()}"
            else:
                entry = source.version(subject, col.version)
                origin = (f"subject {subject} version {entry.version} (id {entry.id}) of "
                          f"{source.describe()}")
        except SchemaLookupError as err:
            name = names(col.column, "SchemaId" if col.schema_id is not None else
                         "SchemaVersion" if col.version is not None else "Subject")
            raise InvalidOptionError(f"{name}: {err.reason}") from err
        kind = _check_type(entry, col, origin,
                           kind or (entry.schema_type or "AVRO").upper(), names)
        reader, reader_id = entry.schema, entry.id
        _named_types(source, entry, named, seen)
    if col.message is not None and kind != "PROTOBUF":
        raise InvalidOptionError(f"{names(col.column, 'Message')}: {origin} has schema type "
                                 f"{kind}; a message is chosen only in a PROTOBUF schema")
    writers: dict[int, str] | None = None
    if col.framing == "confluent" and source is not None:
        writers = {}
        for v in source.versions(subject):
            entry = source.version(subject, v, deleted=True)
            _check_type(entry, col, f"subject {subject} version {v} (id {entry.id})", kind,
                        names)
            writers[entry.id] = entry.schema
            _named_types(source, entry, named, seen)
        if reader_id is not None:
            writers.setdefault(reader_id, reader)
        writers = writers or None
    return DecodeSpec(col.column, reader,
                      None if writers is None else tuple(sorted(writers.items())),
                      tuple(sorted(named.items())), col.framing, col.keep_raw,
                      f"{topic}: {origin}", kind, col.message)


def _same_schema(a: str, b: str) -> bool:
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return a == b


def _merge(specs: list[DecodeSpec]) -> DecodeSpec:
    """One spec for several topics: one reader schema, the union of their writers."""
    first = specs[0]
    writers: dict[int, str] | None = None
    named: dict[str, str] = {}
    for s in specs:
        if s.schema_type != first.schema_type or \
                not _same_schema(s.reader_schema, first.reader_schema):
            raise InvalidOptionError(
                f"{first.column}Format: one read has one {first.column} struct, and the "
                f"topics' reader schemas differ ({first.origin}; {s.origin}); read the topics "
                f"separately, or name one schema with {first.column}Subject, "
                f"{first.column}SchemaId or {first.column}Schema")
        if s.writer_schemas is not None:
            writers = writers or {}
            writers.update(s.writer_schemas)
        named.update(s.named_types)
    return replace(first, writer_schemas=None if writers is None else
                   tuple(sorted(writers.items())), named_types=tuple(sorted(named.items())),
                   origin="; ".join(s.origin for s in specs))


def plan_typed_read(source, topics: Sequence[str], columns: Sequence[TypedColumn],
                    on_error: str = "fail", names=spark_name) -> TypedRead:
    """The :class:`TypedRead` of ``topics`` (each column resolved per topic, then merged)
    with every decoder built here, once: a writer schema that does not resolve to the
    reader schema raises :class:`SchemaResolutionError` naming both before any record is
    read."""
    specs = []
    for col in columns:
        per_topic = [resolve_column(source, t, col, names) for t in sorted(set(topics))]
        if not per_topic:
            raise InvalidOptionError(f"{col.column}Format: no topic to read")
        spec = _merge(per_topic)
        try:
            decoder_of(spec)
        except SchemaResolutionError as err:
            raise SchemaResolutionError(f"{col.column}: {err.reason} (reader schema: "
                                        f"{spec.origin})") from err
        except SchemaError as err:
            raise SchemaError(f"{col.column}: {err.reason} ({spec.origin})") from err
        specs.append(spec)
    return TypedRead(tuple(specs), on_error)


def with_writers_now(planned: TypedRead, source, topics: Sequence[str],
                     columns: Sequence[TypedColumn], names=spark_name) -> TypedRead:
    """``planned`` with the writer schemas ``source`` (the registry read again, now) holds
    for ``topics`` added, the reader schemas unchanged: the registry as of a moment after
    the data read pinned its end offsets, so every schema a planned record names is there
    (a producer registers a schema before writing with it). A new writer that cannot
    resolve to the reader schema raises SchemaResolutionError, as at planning."""
    by_column = {c.column: c for c in columns}
    specs = []
    for spec in planned.specs:
        writers = dict(spec.writer_schemas or ())
        named = dict(spec.named_types)
        for t in sorted(set(topics)):
            fresh = resolve_column(source, t, by_column[spec.column], names)
            writers.update(fresh.writer_schemas or ())
            named.update(fresh.named_types)
        new = replace(spec, writer_schemas=tuple(sorted(writers.items())) or None,
                      named_types=tuple(sorted(named.items())))
        if new != spec:
            decoder_of(new)          # resolves every writer now
        specs.append(new)
    return replace(planned, specs=tuple(specs))

