"""What a read asks of one typed column, and the rules those asks follow, in one place for
every read path: the Spark options (``spark/typed_options.py``) and ``read_table``'s
keywords turn their values into arguments of :func:`make_column`, which checks how they
combine; only the option names in messages differ (``names``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from spark_kafkalog.errors import InvalidOptionError

__all__ = ["TypedColumn", "TypedOptions", "make_column", "make_typed", "check_format", "check_choice", "FORMATS",
           "ON_DECODE_ERROR", "FRAMINGS", "SCHEMA_TYPES"]

FORMATS = ("binary", "avro", "protobuf", "json", "registry")
#: format -> the registry's ``schemaType`` of its schemas (``registry``: each id's own)
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}
ON_DECODE_ERROR = ("fail", "null", "skip")
FRAMINGS = ("confluent", "none")


@dataclass(frozen=True)
class TypedColumn:
    """How one of ``value`` / ``key`` is decoded (not yet resolved against a registry).

    ``format``: ``avro``, ``protobuf``, ``json`` or ``registry`` (the type the registry
    gives the reader schema); the reader schema is ``inline_schema`` when given (Avro
    JSON, ``.proto`` text or JSON Schema text), else the registry's schema ``schema_id``,
    else ``subject``'s ``version`` (None: latest not soft-deleted; ``subject`` None:
    ``<topic>-value`` / ``<topic>-key``). ``framing``: ``confluent`` (magic 0, 4-byte id,
    Protobuf's message indexes) or ``none`` (the bare payload). ``message``: the Protobuf
    message the column is typed by (None: the file's first, as Confluent's serializers)."""
    column: str                        # "value" | "key"
    format: str
    inline_schema: str | None = None
    subject: str | None = None
    version: int | None = None
    schema_id: int | None = None
    framing: str = "confluent"
    keep_raw: bool = False
    message: str | None = None

    def subject_for(self, topic: str) -> str:
        """TopicNameStrategy: ``<topic>-value`` / ``<topic>-key`` unless a subject is named."""
        return self.subject if self.subject is not None else f"{topic}-{self.column}"

    def option(self, what: str) -> str:
        """The Spark option name of ``what`` (``Subject`` -> ``valueSubject``)."""
        return spark_name(self.column, what)


def spark_name(column: str, what: str) -> str:
    """``valueFormat``, ``keySchemaId``, ``keepRawValue``, ..."""
    if what == "KeepRaw":
        return f"keepRaw{column.capitalize()}"
    return f"{column}{what}"


def check_choice(name: str, value, choices) -> str:
    if not isinstance(value, str) or value.strip().lower() not in choices:
        raise InvalidOptionError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value.strip().lower()


def check_format(name: str, value) -> str:
    return check_choice(name, value, FORMATS)


def make_column(column: str, fmt: str, *, inline_schema: str | None = None,
                subject: str | None = None, version: int | None = None,
                schema_id: int | None = None, framing: str | None = None,
                keep_raw: bool = False, message: str | None = None,
                names: Callable[[str, str], str] = spark_name) -> TypedColumn | None:
    """The :class:`TypedColumn` of ``column`` (None for ``binary``), the asks checked
    together. ``names(column, what)`` spells an option (``what``: Format, Schema,
    Subject, SchemaVersion, SchemaId, Framing, KeepRaw, Message) in the caller's way."""
    def n(what: str) -> str:
        return names(column, what)

    fmt = check_format(n("Format"), fmt)
    given = [w for w, v in (("Schema", inline_schema), ("Framing", framing),
                            ("Subject", subject), ("SchemaVersion", version),
                            ("SchemaId", schema_id), ("KeepRaw", keep_raw or None),
                            ("Message", message))
             if v is not None]
    if fmt == "binary":
        if given:
            raise InvalidOptionError(f"{n(given[0])}: needs {n('Format')}=avro, protobuf, "
                                     f"json or registry ({n('Format')} is binary)")
        return None
    if inline_schema is not None and not str(inline_schema).strip():
        raise InvalidOptionError(f"{n('Schema')}: empty; give the schema's text")
    if message is not None:
        if fmt not in ("protobuf", "registry"):
            raise InvalidOptionError(f"{n('Message')}: names a Protobuf message; needs "
                                     f"{n('Format')}=protobuf or registry, not {fmt}")
        if not re.fullmatch(r"\.?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*",
                            str(message).strip()):
            raise InvalidOptionError(f"{n('Message')}: not a message name: {message!r}")
        message = str(message).strip().lstrip(".")
    if subject is not None and not str(subject).strip():
        raise InvalidOptionError(f"{n('Subject')}: empty; give a registry subject")
    for what, v in (("SchemaVersion", version), ("SchemaId", schema_id)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0
                              or v >= 1 << 31 or (what == "SchemaVersion" and v < 1)):
            raise InvalidOptionError(f"{n(what)}: expected a "
                                     f"{'version >= 1' if what == 'SchemaVersion' else 'schema id (a 32-bit int >= 0)'}"
                                     f", got {v!r}")
    if version is not None and schema_id is not None:
        raise InvalidOptionError(f"{n('SchemaVersion')} and {n('SchemaId')}: give only one")
    if inline_schema is not None:
        clash = [n(w) for w in ("Subject", "SchemaVersion", "SchemaId") if w in given]
        if clash:
            raise InvalidOptionError(f"{n('Schema')}: the reader schema is given inline; "
                                     f"drop {', '.join(clash)}")
        if fmt == "registry":
            raise InvalidOptionError(f"{n('Schema')}: an inline schema has no type: use "
                                     f"{n('Format')}=avro, protobuf or json "
                                     f"({n('Format')}=registry takes the type from a "
                                     f"registry)")
    framing = check_choice(n("Framing"), framing if framing is not None else "confluent",
                           FRAMINGS)
    if framing == "none" and fmt == "registry":
        raise InvalidOptionError(f"{n('Framing')}=none: without the schema id there is no "
                                 f"type to look up; use {n('Format')}=avro, protobuf "
                                 f"or json")
    return TypedColumn(column, fmt, inline_schema,
                       str(subject).strip() if subject is not None else None, version,
                       schema_id, framing, bool(keep_raw), message)


@dataclass(frozen=True)
class TypedOptions:
    """The typed-read options of one read, validated. Picklable; the basic-auth secret
    stays out of ``repr`` (Spark logs plans)."""
    value: TypedColumn | None = None
    key: TypedColumn | None = None
    on_decode_error: str = "fail"
    registry_topic: str | None = None          # None: _schemas if present
    registry_url: str | None = None
    registry_auth: str | None = field(default=None, repr=False)
    #: where the records that do not decode are written (``deadLetterPath``), or None
    dead_letter: str | None = None

    @property
    def columns(self) -> tuple[TypedColumn, ...]:
        return tuple(c for c in (self.key, self.value) if c is not None)

    @property
    def needs_registry(self) -> bool:
        return any(c.inline_schema is None for c in self.columns)



_URL = re.compile(r"https?://[^\s/]+(/\S*)?$", re.IGNORECASE)


def _spark_option(what: str) -> str:
    return {"OnDecodeError": "onDecodeError"}.get(what, f"schemaRegistry{what}")


def make_typed(value: TypedColumn | None, key: TypedColumn | None, on_error: str | None,
               topic: str | None, url: str | None, auth: str | None, *,
               names: Callable[[str], str] = _spark_option) -> TypedOptions:
    """The :class:`TypedOptions` of a read, checked. ``names(what)`` spells an option
    (``what``: OnDecodeError, Topic, Url, BasicAuth) in the caller's way."""
    on_error = check_choice(names("OnDecodeError"), on_error or "fail", ON_DECODE_ERROR)
    if topic is not None:
        topic = str(topic).strip()
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic):
            raise InvalidOptionError(f"{names('Topic')}: not a topic name: {topic!r}")
    if url is not None:
        url = str(url).strip().rstrip("/")
        if not _URL.match(url):
            raise InvalidOptionError(f"{names('Url')}: not an http(s) URL: {url!r}")
        if topic is not None:
            raise InvalidOptionError(f"{names('Url')} and {names('Topic')}: give only one "
                                     f"place to read schemas from")
    if auth is not None:
        if url is None:
            raise InvalidOptionError(f"{names('BasicAuth')}: needs {names('Url')}")
        if ":" not in str(auth):
            raise InvalidOptionError(f"{names('BasicAuth')}: expected user:password")
    typed = TypedOptions(value, key, on_error, topic, url, auth)
    if not typed.needs_registry and (url is not None or topic is not None):
        name = names("Url") if url is not None else names("Topic")
        raise InvalidOptionError(f"{name}: every typed column has its schema inline; "
                                 f"drop {name}")
    return typed
