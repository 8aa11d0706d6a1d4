"""The schema registry's own topic (``_schemas``), decoded, and the state its store builds.

Confluent Schema Registry (Karapace and Redpanda write the same records) keeps every
schema in a compacted topic. Key and value are JSON (Jackson, fields left out when
null or empty)::

    key   {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
          {"keytype":"CONFIG"|"MODE","subject":S,"magic":0}       subject absent: global
          {"keytype":"DELETE_SUBJECT"|"CLEAR_SUBJECT","subject":S,"magic":0}
          {"keytype":"NOOP","magic":0}                              value always null
          {"keytype":"CONTEXT","tenant":T,"context":C,"magic":0}
          {"keytype":"ASSOC",...}                                   associations (kept aside)
    value SCHEMA          {"subject","version","id","schemaType" (absent: AVRO),
                           "references":[{"name","subject","version"}],"metadata",
                           "ruleSet","schema","deleted"}
          CONFIG          {"subject","compatibilityLevel",...}     MODE {"subject","mode"}
          DELETE_SUBJECT  {"subject","version"}    soft-deletes versions 1..version
          CLEAR_SUBJECT   {"subject"}              drops the soft-deleted versions
    a null value (tombstone) deletes the key: a SCHEMA tombstone is a hard delete.

:class:`RegistryState` applies records in offset order as the registry's reader thread
and its update handler do (KafkaStoreReaderThread, KafkaStoreMessageHandler,
InMemoryCache): last value per key wins; a SCHEMA value whose id is already held in
its context by a different schema text is ignored, as the registry ignores it. Subjects
of a context (``:.ctx:name``) are kept verbatim; schema ids are per context. Bytes and
records in, Arrow out: no files (reading the topic is :mod:`spark_kafkalog.log.read.schemas`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable

import pyarrow as pa

from spark_kafkalog.errors import (
    InvalidOptionError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SubjectNotFoundError,
    VersionNotFoundError,
)

__all__ = [
    "DEFAULT_CONTEXT", "KEY_TYPES", "REGISTRY_SCHEMA", "RegisteredSchema", "RegistryKey",
    "RegistryState", "SchemaReference", "SkippedRecord", "context_of", "decode_key",
    "decode_value",
]

#: every key type the registry writes (SchemaRegistryKeyType)
KEY_TYPES = ("ASSOC", "CONFIG", "SCHEMA", "MODE", "NOOP", "DELETE_SUBJECT", "CLEAR_SUBJECT",
             "CONTEXT")
SCHEMA_TYPES = ("AVRO", "PROTOBUF", "JSON")
#: the registry's enums (CompatibilityLevel, Mode): Jackson refuses any other name
COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD",
                        "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT", "FORWARD")
DEFAULT_CONTEXT = "."
#: the context whose config and mode apply to every context (QualifiedSubject)
GLOBAL_CONTEXT = ".__GLOBAL"

_REFERENCE = pa.struct([("name", pa.string()), ("subject", pa.string()),
                        ("version", pa.int32())])
#: :meth:`RegistryState.to_arrow`'s schema (list field named "element", as Spark's)
REGISTRY_SCHEMA = pa.schema([
    ("subject", pa.string()), ("version", pa.int32()), ("id", pa.int32()),
    ("schemaType", pa.string()), ("schema", pa.string()),
    ("references", pa.list_(pa.field("element", _REFERENCE))),
    ("deleted", pa.bool_()), ("offset", pa.int64()),
    ("metadata", pa.string()), ("ruleSet", pa.string()),
])


@dataclass(frozen=True)
class SchemaReference:
    """One entry of a schema's ``references``: the name the schema imports (an Avro
    full name, a .proto file, a JSON $ref) resolved to a subject's version."""
    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of a subject, as the registry's store holds it. ``offset``: the
    ``_schemas`` record that wrote it (a later DELETE_SUBJECT sets ``deleted`` and keeps
    it). ``metadata`` / ``rule_set``: the value's raw JSON, None when absent."""
    id: int
    subject: str
    version: int
    schema_type: str
    schema: str
    references: tuple[SchemaReference, ...]
    deleted: bool
    offset: int
    metadata: str | None = None
    rule_set: str | None = None

    @property
    def context(self) -> str:
        return context_of(self.subject)


@dataclass(frozen=True)
class RegistryKey:
    """A decoded key. ``subject`` None for a global CONFIG/MODE, a NOOP, CONTEXT, ASSOC."""
    keytype: str
    subject: str | None = None
    version: int | None = None
    magic: int = 0
    extra: tuple = ()           # CONTEXT: (tenant, context); ASSOC: the raw key JSON


def _split(subject: str | None) -> tuple[str, str]:
    """(context, bare subject) of a qualified subject (QualifiedSubject, default tenant):
    ``:.ctx:name`` -> (".ctx", "name"), ``:.ctx:`` -> (".ctx", ""), ``name`` -> (".", name)."""
    s = subject or ""
    if s.startswith(":."):
        end = s.find(":", 2)
        if end < 0:
            return s[1:], ""
        return s[1:end], s[end + 1:]
    if s.startswith(":*:"):
        return "*", s[3:]
    return DEFAULT_CONTEXT, s


def context_of(subject: str | None) -> str:
    """The context a subject is in (``"."`` the default one)."""
    return _split(subject)[0]


def _qualified_context(context: str) -> str:
    return "" if context == DEFAULT_CONTEXT else f":{context}:"


def _ref_subject(parent: str, ref_subject: str) -> str:
    """A reference's subject as the registry resolves it: an unqualified subject is in
    its parent's context (QualifiedSubject.qualifySubjectWithParent)."""
    ctx, _ = _split(ref_subject)
    parent_ctx = context_of(parent)
    if ctx != DEFAULT_CONTEXT or parent_ctx == DEFAULT_CONTEXT:
        return ref_subject
    return f":{parent_ctx}:{ref_subject}"


# ---- decoding ---------------------------------------------------------------------------

class _Bad(Exception):
    """A record the registry's serializer refuses (the reason; located by the caller)."""


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(bytes(data))
    except (UnicodeDecodeError, ValueError) as err:
        raise _Bad(f"{what} is not JSON ({err})") from err


def _int(obj: dict, name: str, what: str, required: bool = True) -> int | None:
    v = obj.get(name)
    if v is None and not required:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _Bad(f"{what}: {name!r} is {v!r}, not an integer")
    return v


def _str(obj: dict, name: str, what: str, required: bool = True) -> str | None:
    v = obj.get(name)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise _Bad(f"{what}: {name!r} is {v!r}, not a string")
    return v


def _key(data: bytes | None) -> RegistryKey:
    if data is None:
        raise _Bad("null key (the registry never writes one)")
    obj = _json(data, "key")
    if not isinstance(obj, dict):
        raise _Bad(f"key is JSON {type(obj).__name__}, not an object")
    kt = obj.get("keytype")
    if kt not in KEY_TYPES:
        raise _Bad(f"key type {kt!r} is not one the registry writes ({', '.join(KEY_TYPES)})")
    magic = _int(obj, "magic", f"{kt} key", required=False) or 0
    if kt == "SCHEMA":
        if magic not in (0, 1):      # SchemaRegistrySerializer.validateMagicByte
            raise _Bad(f"SCHEMA key magic {magic} (the registry reads 0 and 1)")
        return RegistryKey(kt, _str(obj, "subject", "SCHEMA key"),
                           _int(obj, "version", "SCHEMA key"), magic)
    if kt in ("CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
        return RegistryKey(kt, _str(obj, "subject", f"{kt} key", required=False), None, magic)
    if kt == "CONTEXT":
        return RegistryKey(kt, None, None, magic,
                           (_str(obj, "tenant", "CONTEXT key", required=False),
                            _str(obj, "context", "CONTEXT key", required=False)))
    if kt == "ASSOC":
        return RegistryKey(kt, _str(obj, "subject", "ASSOC key", required=False), None,
                           magic, (json.dumps(obj, sort_keys=True),))
    return RegistryKey(kt, None, None, magic)                     # NOOP


def _raw(v: Any) -> str | None:
    return None if v is None else json.dumps(v, separators=(",", ":"), sort_keys=True)


def _value(key: RegistryKey, data: bytes) -> dict:
    """The value's fields, checked as the registry's value classes type them."""
    obj = _json(data, f"{key.keytype} value")
    what = f"{key.keytype} value"
    if not isinstance(obj, dict):
        raise _Bad(f"{what} is JSON {type(obj).__name__}, not an object")
    if key.keytype == "SCHEMA":
        _int(obj, "id", what)
        _str(obj, "schema", what)
        _str(obj, "subject", what, required=False)
        st = _str(obj, "schemaType", what, required=False)
        refs = obj.get("references") or []
        if not isinstance(refs, list):
            raise _Bad(f"{what}: 'references' is {refs!r}, not a list")
        for r in refs:
            if not isinstance(r, dict):
                raise _Bad(f"{what}: reference {r!r} is not an object")
            _str(r, "name", "reference")
            _str(r, "subject", "reference")
            _int(r, "version", "reference")
        deleted = obj.get("deleted", False)
        if not isinstance(deleted, bool):
            raise _Bad(f"{what}: 'deleted' is {deleted!r}, not a boolean")
        obj["schemaType"] = st or "AVRO"
    elif key.keytype == "DELETE_SUBJECT":
        _int(obj, "version", what)
        _str(obj, "subject", what, required=False)
    elif key.keytype in ("CONFIG", "MODE", "CLEAR_SUBJECT"):
        _str(obj, "subject", what, required=False)
        name, allowed = ("mode", MODES) if key.keytype == "MODE" else \
            ("compatibilityLevel", COMPATIBILITY_LEVELS)
        if key.keytype != "CLEAR_SUBJECT" and obj.get(name) is not None \
                and obj[name] not in allowed:
            raise _Bad(f"{what}: {name} {obj[name]!r} is not one of {', '.join(allowed)}")
    return obj


def decode_key(data: bytes | None) -> RegistryKey:
    """A ``_schemas`` key; SchemaRegistryError when the registry would not read it."""
    try:
        return _key(data)
    except _Bad as err:
        raise SchemaRegistryError(str(err)) from err


def decode_value(key: RegistryKey, data: bytes | None) -> dict | None:
    """A ``_schemas`` value's JSON fields (None for a tombstone); SCHEMA values get
    ``schemaType`` filled in (AVRO when absent). SchemaRegistryError when unreadable."""
    if data is None:
        return None
    try:
        return _value(key, data)
    except _Bad as err:
        raise SchemaRegistryError(str(err)) from err


# ---- the store ----------------------------------------------------------------------------

def _rows(rows) -> Iterable[tuple[int | None, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) from a table or from (offset, key, value) tuples."""
    if isinstance(rows, (pa.Table, pa.RecordBatch)):
        names = rows.schema.names
        cols = [rows.column(n).to_pylist() for n in ("offset", "key", "value")]
        parts = rows.column("partition").to_pylist() if "partition" in names \
            else [None] * rows.num_rows
        yield from zip(parts, *cols)
        return
    for offset, key, value in rows:
        yield None, offset, key, value


@dataclass(frozen=True)
class SkippedRecord:
    """A record ``on_error="skip"`` passed over, and why."""
    partition: int | None
    offset: int
    reason: str


class RegistryState:
    """The registry's state after a run of ``_schemas`` records: what its REST API
    answers. Build it with :meth:`from_records`; every query is read-only.

    ``skipped`` lists the records passed over with ``on_error="skip"`` (the registry's
    own reader logs such a record and goes on)."""

    def __init__(self, topic: str = "_schemas"):
        self.topic = topic
        self._schemas: dict[tuple[str, int], RegisteredSchema] = {}
        # (context, id) -> {subject: version}: the registry's guidToSubjectVersions, which
        # keeps soft-deleted versions (a schema stays readable by id) and drops hard ones
        self._ids: dict[tuple[str, int], dict[str, int]] = {}
        self._max_id: dict[str, int] = {}
        self._config: dict[str | None, dict] = {}
        self._mode: dict[str | None, dict] = {}
        self._contexts: dict[tuple, int] = {}
        self._assoc: dict[str, dict] = {}
        self.skipped: list[SkippedRecord] = []
        self.records = 0                 # records read (skipped ones too)

    # -- building --------------------------------------------------------------------------

    @classmethod
    def from_records(cls, rows, *, topic: str = "_schemas", partition: int = 0,
                     on_error: str = "fail") -> "RegistryState":
        """The state after applying ``rows`` in order: an iterable of ``(offset, key,
        value)`` or a ``pa.Table`` with ``offset``/``key``/``value`` columns (and
        ``partition``: as :func:`spark_kafkalog.log.read_table` returns). ``topic`` and
        ``partition`` name the records in errors. ``on_error``: ``"fail"`` raises
        SchemaRegistryError on a record the registry's serializer refuses; ``"skip"``
        passes over it as the registry does and lists it in ``skipped``."""
        if on_error not in ("fail", "skip"):
            raise InvalidOptionError(f"on_error={on_error!r}: expected 'fail' or 'skip'")
        state = cls(topic)
        for part, offset, key, value in _rows(rows):
            part = partition if part is None else part
            state.records += 1
            try:
                state._apply(int(offset), key, value)
            except _Bad as err:
                if on_error == "skip":
                    state.skipped.append(SkippedRecord(part, int(offset), str(err)))
                    continue
                raise SchemaRegistryError(f"{topic}-{part}: offset {offset}: {err}",
                                          offset=int(offset)) from err
        return state

    def _apply(self, offset: int, raw_key: bytes | None, raw_value: bytes | None) -> None:
        key = _key(raw_key)
        kt = key.keytype
        if kt == "NOOP":                 # the reader only moves its offset on
            return
        value = None if raw_value is None else _value(key, raw_value)
        if kt == "SCHEMA":
            self._put_schema(key, value, offset)
        elif kt in ("CONFIG", "MODE"):
            store = self._config if kt == "CONFIG" else self._mode
            if value is None:
                store.pop(key.subject, None)
            else:
                store[key.subject] = value
        elif kt == "CONTEXT":
            if value is None:
                self._contexts.pop(key.extra, None)
            else:
                self._contexts[key.extra] = offset
        elif kt == "ASSOC":
            if value is None:
                self._assoc.pop(key.extra[0], None)
            else:
                self._assoc[key.extra[0]] = value
        elif value is None:
            pass                         # a DELETE/CLEAR_SUBJECT tombstone changes nothing
        elif kt == "DELETE_SUBJECT":
            self._delete_subject(value.get("subject"), value["version"])
        else:
            self._clear_subject(value.get("subject"))

    def _index(self, subject: str, version: int, schema_id: int) -> None:
        self._ids.setdefault((context_of(subject), schema_id), {})[subject] = version

    def _put_schema(self, key: RegistryKey, value: dict | None, offset: int) -> None:
        k = (key.subject, key.version)
        if value is None:                # hard delete
            old = self._schemas.pop(k, None)
            if old is not None:
                subjects = self._ids.get((old.context, old.id))
                if subjects is not None and subjects.get(old.subject) == old.version:
                    del subjects[old.subject]
                    if not subjects:
                        del self._ids[(old.context, old.id)]
            return
        ctx = context_of(key.subject)
        sid = value["id"]
        holder = self._by_id_any(ctx, sid)
        if holder is not None and holder.schema != value["schema"]:
            # KafkaStoreMessageHandler.validateUpdate: a duplicate id with another schema
            # is never applied (the leader writes the old value back)
            return
        refs = tuple(SchemaReference(r["name"], r["subject"], r["version"])
                     for r in value.get("references") or ())
        schema = RegisteredSchema(
            id=sid, subject=key.subject, version=key.version, schema_type=value["schemaType"],
            schema=value["schema"], references=refs, deleted=bool(value.get("deleted")),
            offset=offset, metadata=_raw(value.get("metadata")),
            rule_set=_raw(value.get("ruleSet")))
        self._schemas[k] = schema
        self._index(key.subject, key.version, sid)
        self._max_id[ctx] = max(self._max_id.get(ctx, 1), sid)

    def _delete_subject(self, subject: str | None, up_to: int) -> None:
        for v in range(1, up_to + 1):
            old = self._schemas.get((subject, v))
            if old is not None and not old.deleted:
                self._schemas[(subject, v)] = replace(old, deleted=True)
                self._index(subject, v, old.id)

    def _clear_subject(self, subject: str | None) -> None:
        """Drop soft-deleted versions of ``subject`` (None: every subject; a bare context
        ``:.ctx:``: its subjects) from the store (InMemoryCache.clearSubjects)."""
        ctx, bare = _split(subject)

        def match(s: str) -> bool:
            return subject is None or s == subject or (
                bare == "" and (ctx == GLOBAL_CONTEXT or context_of(s) == ctx))
        for (ictx, sid), subjects in list(self._ids.items()):
            for s, v in list(subjects.items()):
                held = self._schemas.get((s, v))
                if match(s) and (held is None or held.deleted):
                    del subjects[s]
            if not subjects:
                del self._ids[(ictx, sid)]
        for k, held in list(self._schemas.items()):
            if held.deleted and match(k[0]):
                del self._schemas[k]

    # -- queries ---------------------------------------------------------------------------

    def _visible(self, subject: str, include_deleted: bool) -> dict[int, RegisteredSchema]:
        return {v: s for (subj, v), s in self._schemas.items()
                if subj == subject and (include_deleted or not s.deleted)}

    def subjects(self, include_deleted: bool = False) -> list[str]:
        """GET /subjects (``?deleted=true``): subjects with a version, in every context,
        ordered as the registry lists them (context, then subject)."""
        names = {s.subject for s in self._schemas.values() if include_deleted or not s.deleted}
        return sorted(names, key=_split)

    def versions(self, subject: str, include_deleted: bool = False) -> list[int]:
        """GET /subjects/{subject}/versions; SubjectNotFoundError (40401) when none."""
        found = sorted(self._visible(subject, include_deleted))
        if not found:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        return found

    def version(self, subject: str, version: int | str = "latest",
                include_deleted: bool = False) -> RegisteredSchema:
        """GET /subjects/{subject}/versions/{version}: ``"latest"`` (or -1) is the newest
        version shown. SubjectNotFoundError (40401), VersionNotFoundError (40402)."""
        found = self._visible(subject, include_deleted)
        if not found:
            raise SubjectNotFoundError(f"Subject '{subject}' not found.")
        if version in ("latest", -1, "-1"):
            return found[max(found)]
        try:
            v = int(version)
        except (TypeError, ValueError):
            raise VersionNotFoundError(f"Version {version} not found.") from None
        if v not in found:
            raise VersionNotFoundError(f"Version {version} not found.")
        return found[v]

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest version of ``subject`` not soft-deleted (a client's reader schema)."""
        return self.version(subject, "latest")

    def _by_id_any(self, ctx: str, schema_id: int) -> RegisteredSchema | None:
        for s, v in self._ids.get((ctx, schema_id), {}).items():
            held = self._schemas.get((s, v))
            if held is not None:
                return held
        return None

    def by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        """GET /schemas/ids/{id} (``?subject=``): the schema with that id in the default
        context, or in ``subject``'s; soft-deleted versions too, as the registry answers.
        SchemaNotFoundError (40403) when no version holds it."""
        ctx, bare = _split(subject)
        found = None
        if subject is None or bare == "":
            found = self._by_id_any(ctx, schema_id)
        else:
            held = self._ids.get((ctx, schema_id), {})
            if subject in held:
                found = self._schemas.get((subject, held[subject]))
            elif ctx == DEFAULT_CONTEXT:
                # AbstractSchemaRegistry.getSchemaKeyUsingContexts: the subject in each
                # known context, then any subject of the default context
                for c in sorted({c for c, _ in self._ids} - {DEFAULT_CONTEXT}):
                    q = f":{c}:{bare}"
                    v = self._ids.get((c, schema_id), {}).get(q)
                    if v is not None:
                        found = self._schemas.get((q, v))
                        break
                else:
                    found = self._by_id_any(DEFAULT_CONTEXT, schema_id)
        if found is None:
            raise SchemaNotFoundError(f"Schema {schema_id} not found")
        return found

    def references_of(self, schema: RegisteredSchema) -> dict[str, RegisteredSchema]:
        """Every schema ``schema`` imports, transitively: reference name -> schema (a
        reference's unqualified subject is in the referrer's context). A reference to a
        version the store lacks raises SchemaNotFoundError."""
        out: dict[str, RegisteredSchema] = {}
        todo = [schema]
        seen = {(schema.subject, schema.version)}
        while todo:
            cur = todo.pop(0)
            for ref in cur.references:
                subject = _ref_subject(cur.subject, ref.subject)
                try:
                    # -1: the latest version, as a client resolves it; a pinned version
                    # is read even when soft-deleted (it is still the one imported)
                    target = self.version(subject, ref.version,
                                          include_deleted=ref.version != -1)
                except SchemaNotFoundError as err:
                    raise type(err)(
                        f"reference {ref.name!r} of subject '{cur.subject}' version "
                        f"{cur.version}: {err}") from err
                out.setdefault(ref.name, target)
                if (target.subject, target.version) not in seen:
                    seen.add((target.subject, target.version))
                    todo.append(target)
        return out

    def _scoped(self, store: dict, subject: str | None, default_to_global: bool):
        """The value for ``subject``'s key; with ``default_to_global``, then its
        context's, then the global one, then the global context's (InMemoryCache)."""
        if subject in store:
            return store[subject]
        if not default_to_global:
            return None
        ctx = context_of(subject)
        if subject is not None and ctx != DEFAULT_CONTEXT:
            found = store.get(_qualified_context(ctx))
        else:
            found = store.get(None)
        return found if found is not None else store.get(f":{GLOBAL_CONTEXT}:")

    def config_value(self, subject: str | None = None, default_to_global: bool = False
                     ) -> dict | None:
        """The stored CONFIG value's fields (compatibilityLevel, normalize, ...)."""
        found = self._scoped(self._config, subject, default_to_global)
        return None if found is None else {k: v for k, v in found.items() if k != "subject"}

    def config(self, subject: str | None = None, default_to_global: bool = False
               ) -> str | None:
        """The compatibility level set for ``subject`` (None: the global one); None when
        none is set (the registry then answers its configured default, BACKWARD unless
        ``schema.compatibility.level`` says otherwise)."""
        found = self._scoped(self._config, subject, default_to_global)
        return None if found is None else found.get("compatibilityLevel")

    def mode(self, subject: str | None = None, default_to_global: bool = False
             ) -> str | None:
        """The mode (READWRITE, READONLY, IMPORT, ...) set for ``subject`` (None: global)."""
        found = self._scoped(self._mode, subject, default_to_global)
        return None if found is None else found.get("mode")

    def contexts(self) -> list[str]:
        """The contexts the registry recorded (CONTEXT records) or that hold a subject."""
        names = {c for _, c in self._contexts if c} | {s.context for s in
                                                       self._schemas.values()}
        return sorted(names)

    def next_id(self, subject: str | None = None) -> int:
        """The id the registry's IncrementalIdGenerator gives the next new schema in
        ``subject``'s context (the default one when None): one past the largest id any
        SCHEMA record of the context carried, even since deleted."""
        ctx = context_of(subject)
        return self._max_id[ctx] + 1 if ctx in self._max_id else 1

    def next_version(self, subject: str) -> int:
        """The version the registry gives the next schema registered under ``subject``:
        one past its largest version still stored, soft-deleted ones included."""
        held = [v for (s, v) in self._schemas if s == subject]
        return max(held) + 1 if held else 1

    def schemas(self) -> list[RegisteredSchema]:
        """Every stored version (soft-deleted ones too), by context, subject, version."""
        return [self._schemas[k] for k in
                sorted(self._schemas, key=lambda k: (*_split(k[0]), k[1]))]

    def to_arrow(self) -> pa.Table:
        """One row per stored (subject, version), soft-deleted ones with deleted=true, in
        :meth:`schemas` order; schema :data:`REGISTRY_SCHEMA`."""
        rows = self.schemas()
        return pa.table({
            "subject": [s.subject for s in rows], "version": [s.version for s in rows],
            "id": [s.id for s in rows], "schemaType": [s.schema_type for s in rows],
            "schema": [s.schema for s in rows],
            "references": [[{"name": r.name, "subject": r.subject, "version": r.version}
                            for r in s.references] for s in rows],
            "deleted": [s.deleted for s in rows], "offset": [s.offset for s in rows],
            "metadata": [s.metadata for s in rows], "ruleSet": [s.rule_set for s in rows],
        }, schema=REGISTRY_SCHEMA)

