"""The package's one exception hierarchy.

Every error the package raises on purpose derives from :class:`KafkaLogError`. Messages
are self-contained text (Spark shows them as text only): they name the file, the byte
position and the offset involved when those are known. Low-level ``struct.error`` /
``IndexError`` / codec exceptions are wrapped at the batch boundary with
``raise ... from err``.
"""
from __future__ import annotations

import errno as _errno
import re


class KafkaLogError(Exception):
    """Root of every error raised by spark_kafkalog.

    Attributes (each may be ``None`` when unknown):
      path      the file the problem is in
      position  byte position in that file (or in the buffer handed to ``format``)
      offset    the Kafka offset involved (usually a batch's base offset)
    """

    def __init__(self, message: str, *, path: str | None = None,
                 position: int | None = None, offset: int | None = None):
        self.reason = message
        self.path = path
        self.position = position
        self.offset = offset
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(f"file {self.path}")
        if self.position is not None:
            where.append(f"position {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def at(self, *, path: str | None = None, position_base: int = 0) -> "KafkaLogError":
        """Return a copy located in a file: ``path`` set, ``position`` shifted by
        ``position_base`` (a buffer position becomes a file position)."""
        pos = None if self.position is None else self.position + position_base
        err = type(self).__new__(type(self))
        KafkaLogError.__init__(err, self.reason, path=path if path is not None else self.path,
                               position=pos, offset=self.offset)
        err.__cause__ = self.__cause__
        return err

    def __reduce__(self):
        # Picklable across Spark's driver/executor boundary with all attributes.
        return (_rebuild, (type(self), self.reason, self.path, self.position, self.offset))


def _rebuild(cls, reason, path, position, offset):
    err = cls.__new__(cls)
    KafkaLogError.__init__(err, reason, path=path, position=position, offset=offset)
    return err


class CorruptRecordError(KafkaLogError):
    """Bytes that are not a valid record batch: bad CRC, impossible length, bad varint,
    unknown magic, records that do not fit their batch, garbage between batches."""


class TypedRecordError(CorruptRecordError):
    """A record value that does not decode under its schema (issue 38): no magic byte or
    magic != 0, an unknown schema id, a truncated or overlong payload, a union branch or
    enum index out of range, a negative length, invalid UTF-8, a varint too long, a decimal
    outside its precision. ``row`` is the row in the decoded array, ``schema_id`` the
    framing's id (None unframed), ``value_position`` the byte position in the value;
    callers add the topic/partition/offset."""

    # class defaults: an instance rebuilt from Spark's text (``unwrap``) has them too
    row: int | None = None
    schema_id: int | None = None
    value_position: int | None = None

    def __init__(self, message: str, *, row: int | None = None, schema_id: int | None = None,
                 value_position: int | None = None, path: str | None = None,
                 position: int | None = None, offset: int | None = None):
        self.row = row
        self.schema_id = schema_id
        self.value_position = value_position
        super().__init__(message, path=path, position=position, offset=offset)

    def at(self, *, path: str | None = None, position_base: int = 0) -> "TypedRecordError":
        err = super().at(path=path, position_base=position_base)
        err.row, err.schema_id, err.value_position = (self.row, self.schema_id,
                                                      self.value_position)
        return err

    def __reduce__(self):
        return (_rebuild_typed, (self.reason, self.path, self.position, self.offset,
                                 self.row, self.schema_id, self.value_position))


def _rebuild_typed(reason, path, position, offset, row, schema_id, value_position):
    return TypedRecordError(reason, path=path, position=position, offset=offset, row=row,
                            schema_id=schema_id, value_position=value_position)


class SchemaError(KafkaLogError, ValueError):
    """A schema (Avro, ...) that cannot be used: not parsable, naming an unknown type,
    recursive, or with no Spark type (a decimal over 38 digits)."""


class SchemaResolutionError(SchemaError):
    """A writer schema that does not resolve to the reader schema by the Avro
    specification's rules; the message names both schemas (full names, ids) and the field
    path. Raised when the decoder is built, before any data is read."""


class UnsupportedFormatError(KafkaLogError):
    """Valid-looking data using a feature this build cannot decode (unknown codec id)."""


class CoordinatorRecordError(CorruptRecordError):
    """A ``__consumer_offsets`` / ``__transaction_state`` key or value that does not decode
    under the coordinator schema its version names (cut off, bad length, invalid UTF-8)."""


class RemoteLogMetadataError(CorruptRecordError):
    """A ``__remote_log_metadata`` record that does not decode (frame, api key, version or
    fields), or remote-storage metadata that contradicts itself."""


class CodecError(CorruptRecordError):
    """A compressed payload that does not decompress, or decompresses past the limit."""


class MissingCodecError(KafkaLogError):
    """The library a codec needs is not installed (the message says what to install)."""


class OffsetOutOfRangeError(KafkaLogError):
    """A requested offset or timestamp is outside what the log holds."""


class DataLossError(KafkaLogError):
    """Requested records are gone (below the log start offset, deleted segments) and
    ``failOnDataLoss`` is true."""


class InvalidOptionError(KafkaLogError, ValueError):
    """A malformed, unknown or conflicting option; the message names the option."""


class LogLayoutError(KafkaLogError):
    """A log directory that does not look like one a broker keeps (missing topic,
    unreadable checkpoint file, unparsable segment name where one is required)."""


class TxnIndexError(LogLayoutError):
    """A ``.txnindex`` or ``.snapshot`` file that contradicts itself or its segment.
    Readers treat it as absent and derive the same facts from the log."""


class CommitConflictError(KafkaLogError):
    """A write could not commit: lock held by a broker or another writer, or the log
    changed underneath the commit."""


class BadRowError(KafkaLogError, ValueError):
    """A row (or a task's staged batch table) that cannot be written: a null topic, a
    partition outside the topic, batches that do not tile the staged bytes. Not an
    option error: the data is wrong, not the configuration."""


class LockError(CommitConflictError):
    """A lock a writer needs is held (by a broker or another writer) or was misused (a
    lock taken twice by its holder)."""


class InternalError(KafkaLogError):
    """An invariant of this package does not hold (a bug, not bad input or a bad log):
    e.g. the bytes a commit wrote disagree with its plan. The message says which."""


class StorageError(KafkaLogError, OSError):
    """The filesystem refused a write, fsync, rename, truncate or delete (disk full, I/O
    error, read-only, quota): the message names the operation, the file and the errno
    (``ENOSPC``, ``EIO``, ...), and ``errno`` is set, as on the ``OSError`` it wraps. What
    the operation had begun is undone or left for the next open to undo (the journal)."""

    def __init__(self, message: str, *, path: str | None = None,
                 position: int | None = None, offset: int | None = None,
                 errno: int | None = None):
        super().__init__(message, path=path, position=position, offset=offset)
        # errno only (no strerror): OSError's str() would otherwise replace the message
        self.errno = errno

    def at(self, *, path: str | None = None, position_base: int = 0) -> "StorageError":
        err = super().at(path=path, position_base=position_base)
        err.errno = self.errno
        return err

    def __reduce__(self):
        return (_rebuild_storage, (self.reason, self.path, self.position, self.offset,
                                   self.errno))


def _rebuild_storage(reason, path, position, offset, errno):
    return StorageError(reason, path=path, position=position, offset=offset, errno=errno)


# ---- errors that crossed Spark ----------------------------------------------------------------

#: a line of exception text naming one of our classes: ``pkg.mod.Name: message``
_NAMED = r"(?:^|[\s'\"(:])((?:[A-Za-z_]\w*\.)*)({names}): (.+)$"
#: the location suffix ``KafkaLogError._render`` adds
_WHERE = re.compile(r"^(?P<reason>.*?) \((?P<where>(?:file .+?|position \d+|offset -?\d+)"
                    r"(?:, (?:file .+?|position \d+|offset -?\d+))*)\)$")
_TEXT_LIMIT = 1 << 20          # exception text looked at, per exception in a chain
#: the errno a StorageError's message names (``log/io/sysio.storage_error``: ``...: ENOSPC
#: (No space left on device)``)
_ERRNO = re.compile(r": (E[A-Z0-9]+) \(")


def _error_classes() -> dict[str, type]:
    """Every KafkaLogError subclass defined so far, by class name (the root included)."""
    found: dict[str, type] = {}
    todo = [KafkaLogError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.__name__, cls)
        todo.extend(cls.__subclasses__())
    return found


def _texts(exc: BaseException) -> list[str]:
    """The text of ``exc`` and of every exception behind it: Python causes and contexts,
    and for pyspark's wrappers of JVM exceptions (Py4JJavaError, AnalysisException,
    StreamingQueryException, ...) the JVM exception and its causes."""
    out, seen, todo = [], set(), [exc]
    while todo and len(out) < 32:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        try:
            out.append(str(e)[:_TEXT_LIMIT])
        except Exception:       # a JVM that is gone: what Python holds is enough
            pass
        java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
        for _ in range(8):              # the JVM cause chain, bounded
            if java is None:
                break
            try:
                out.append(str(java.toString())[:_TEXT_LIMIT])
                java = java.getCause()
            except Exception:
                break
        if isinstance(e, BaseException):
            todo += [e.__cause__, e.__context__]
    return out


def _rebuild_from_text(cls: type, text: str) -> KafkaLogError:
    """An instance of ``cls`` from its rendered message (location suffix parsed back)."""
    path = position = offset = None
    reason = text.strip()
    m = _WHERE.match(reason)
    if m:
        reason = m.group("reason")
        for part in m.group("where").split(", "):
            key, _, value = part.partition(" ")
            if key == "file":
                path = value
            elif key == "position":
                position = int(value)
            else:
                offset = int(value)
    err = cls.__new__(cls)
    KafkaLogError.__init__(err, reason, path=path, position=position, offset=offset)
    if isinstance(err, StorageError):      # its errno, as raised: the message names it
        code = _ERRNO.search(reason)
        err.errno = getattr(_errno, code.group(1), None) if code else None
    return err


def unwrap(exc: BaseException) -> KafkaLogError | None:
    """The spark_kafkalog error behind ``exc``, the exception a Spark action raised (or
    None when there is none).

    Spark hands a data source's error back as text inside its own exceptions
    (``AnalysisException: [PYTHON_DATA_SOURCE_ERROR] ...``, ``Py4JJavaError``,
    ``PythonException``, ``StreamingQueryException``); this finds our class name and
    message there and returns an instance of that class with ``path``, ``position`` and
    ``offset`` (and a StorageError's ``errno``) parsed back. An error raised in this
    process is returned as it is::

        try:
            df.count()
        except Exception as e:
            err = spark_kafkalog.errors.unwrap(e)
            if err is None:
                raise
            print(type(err).__name__, err)      # e.g. CorruptRecordError: bad CRC (...)
    """
    e: BaseException | None = exc
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KafkaLogError):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    classes = _error_classes()
    named = re.compile(_NAMED.format(names="|".join(
        sorted(map(re.escape, classes), key=len, reverse=True))))
    last = None
    for text in _texts(exc):
        for line in text.splitlines():
            m = named.search(line)
            if m is None:
                continue
            module = m.group(1).rstrip(".")
            if module and not module.startswith("spark_kafkalog"):
                continue
            last = (classes[m.group(2)], m.group(3))
        if last is not None:
            # within one text, the last of our errors is the one finally raised
            return _rebuild_from_text(*last)
    return None
