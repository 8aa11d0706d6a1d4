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
    """A schema (Avro, Protobuf, JSON Schema) that cannot be used: not parsable, naming an unknown
    type, recursive, or with no Spark type (a decimal over 38 digits)."""


class SchemaResolutionError(SchemaError):
    """A writer schema that does not resolve to the reader schema (Avro: by the Avro
    specification's rules; Protobuf: by field number; JSON Schema: by property name); the
    message names both schemas (full names, ids) and the field path. Raised when the decoder
    is built, before any data is read."""


class UnsupportedFormatError(KafkaLogError):
    """Valid-looking data using a feature this build cannot decode (unknown codec id)."""


class CoordinatorRecordError(CorruptRecordError):
    """A ``__consumer_offsets`` / ``__transaction_state`` key or value that does not decode
    under the coordinator schema its version names (cut off, bad length, invalid UTF-8)."""


class RemoteLogMetadataError(CorruptRecordError):
    """A ``__remote_log_metadata`` record that does not decode (frame, api key, version or
    fields), or remote-storage metadata that contradicts itself."""


class SchemaRegistryError(CorruptRecordError):
    """A record of the schema registry's topic (``_schemas``) that the registry's own
    serializer would not read: a key or value that is not JSON, a key type the registry
    never writes, a field of the wrong type. The message names the topic, partition and
    offset."""


class CodecError(CorruptRecordError):
    """A compressed payload that does not decompress, or decompresses past the limit."""


class MissingCodecError(KafkaLogError):
    """The library a codec needs is not installed (the message says what to install)."""


class OffsetOutOfRangeError(KafkaLogError):
    """A requested offset or timestamp is outside what the log holds."""


class DataLossError(KafkaLogError):
    """Requested records are gone (below the log start offset, deleted segments) and
    ``failOnDataLoss`` is true."""


class SchemaNotFoundError(KafkaLogError, LookupError):
    """A schema the registry's state does not hold (by id, subject or version).
    ``error_code`` is the code the registry's REST API answers with (40403 here)."""
    error_code = 40403


class SubjectNotFoundError(SchemaNotFoundError):
    """A subject with no version (none at all, or only soft-deleted ones when those are
    not asked for): the registry's 40401."""
    error_code = 40401


class VersionNotFoundError(SchemaNotFoundError):
    """A subject's version that is not there (or soft-deleted and not asked for): the
    registry's 40402."""
    error_code = 40402


class InvalidOptionError(KafkaLogError, ValueError):
    """A malformed, unknown or conflicting option; the message names the option."""


class TopicExistsError(InvalidOptionError):
    """A write with ``saveMode`` ``errorifexists`` found its topic there: the options
    conflict with the log dir (bad input, exit 2), not a race that a retry resolves."""


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


class TableError(KafkaLogError, ValueError):
    """A lakehouse table or catalog an export cannot use: the catalog cannot be reached,
    the table's schema or partition spec cannot take the records, or the table was
    written by another tool and holds no offsets of ours. Raised before any file is
    written; the table is left as it was."""


class LockError(CommitConflictError):
    """A lock a writer needs is held (by a broker or another writer) or was misused (a
    lock taken twice by its holder)."""


class InternalError(KafkaLogError):
    """An invariant of this package does not hold (a bug, not bad input or a bad log):
    e.g. the bytes a commit wrote disagree with its plan. The message says which."""


class StorageError(KafkaLogError, OSError):
    """The filesystem refused a write, fsync, rename, truncate or delete, or a read
    failed (disk full, I/O error, read-only, quota: :data:`STORAGE_ERRNOS`, the one rule
    for an ``OSError`` of any layer): the message names the operation, the file and the errno
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


# ---- the one rule: which OSError is the storage failing ----------------------------------------

#: errnos that say the storage failed, not that the request was wrong: no space left
#: (ENOSPC) or quota exceeded (EDQUOT), an I/O error of the device or of a network
#: filesystem (EIO, EREMOTEIO, ESTALE: an NFS handle gone stale under us), a filesystem
#: that is (or was remounted, after an error) read-only (EROFS), a file past the
#: filesystem's size limit (EFBIG). Not ENOMEM (memory, not the filesystem: a job exits
#: 4 for it anyway, as for any failure that is not bad input), and not EACCES, EPERM,
#: ENOENT, ENOTDIR, EISDIR, ENAMETOOLONG (the path a user gave is wrong: bad input).
STORAGE_ERRNOS = frozenset(getattr(_errno, name) for name in (
    "ENOSPC", "EDQUOT", "EIO", "EREMOTEIO", "ESTALE", "EROFS", "EFBIG")
    if hasattr(_errno, name))
#: the errno pyarrow's filesystems and writers put in their message text (``... Detail:
#: [errno 28] No space left on device``), where the exception's own errno may be unset
_TEXT_ERRNO = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


def storage_errno(err: BaseException) -> int | None:
    """The errno of ``err`` when it is an ``OSError`` saying the storage failed (one of
    :data:`STORAGE_ERRNOS`: its ``errno``, or one pyarrow's text names), else None. The
    one rule every layer asks: such an error is a :class:`StorageError`."""
    if not isinstance(err, OSError):
        return None
    codes = [err.errno] if isinstance(err.errno, int) else []
    try:
        codes += [int(c) for c in _TEXT_ERRNO.findall(str(err)[:_TEXT_LIMIT])]
    except Exception:           # an exception whose str() fails: its errno is enough
        pass
    return next((c for c in codes if c in STORAGE_ERRNOS), None)


def errno_text(code: int) -> str:
    """``ENOSPC (No space left on device)``: how a StorageError's message names an errno
    (:func:`unwrap` parses the name back)."""
    import os
    return f"{_errno.errorcode.get(code, str(code))} ({os.strerror(code)})"


def as_storage_error(err: BaseException, path: str | None = None,
                     doing: str = "access", position: int | None = None
                     ) -> StorageError | None:
    """``err`` as our :class:`StorageError` (``err`` itself when it is one; None when
    :func:`storage_errno` says it is no storage failure): ``cannot <doing> file:
    ENOSPC (No space left on device)``, naming ``path`` (default: the OSError's own
    file name) and the byte ``position`` where there is one."""
    if isinstance(err, StorageError):
        return err
    code = storage_errno(err)
    if code is None:
        return None
    if path is None:
        path = getattr(err, "filename", None)
        path = None if path is None else str(path)
    return StorageError(f"cannot {doing} file: {errno_text(code)}", path=path,
                        position=position, errno=code)


class storage_errors:
    """``with storage_errors("write", path): ...``: an ``OSError`` in the block that is a
    storage failure (:func:`storage_errno`) is raised as :func:`as_storage_error`
    (``from`` it); any other exception passes unchanged. For calls this package does not
    make itself (pyarrow's writers, ``open``/``write`` of a report, reads of a segment)."""

    def __init__(self, doing: str, path: str | None):
        self.doing = doing
        self.path = path

    def __enter__(self) -> "storage_errors":
        return self

    def __exit__(self, kind, err, tb) -> bool:
        if err is None or isinstance(err, StorageError) or not isinstance(err, OSError):
            return False
        ours = as_storage_error(err, self.path, self.doing)
        if ours is None:
            return False
        raise ours from err


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
#: a Python OSError (or subclass) as a worker's traceback shows it: ``OSError: [Errno 5] ...``
#: a JVM I/O exception as Spark shows it: ``java.io.IOException: No space left on device``
_JAVA_IO = re.compile(r"\b(java\.(?:io|nio\.file)\.\w*Exception): (.*)$")
_OS_TEXT = re.compile(r"(?:^|[\s:])(?:[A-Za-z_]\w*\.)*\w*(?:OSError|IOError): \[Errno (\d+)\] "
                      r"(.*)$")


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
    process is returned as it is. An ``OSError`` that is a storage failure
    (:func:`storage_errno`: ENOSPC, EIO, ...), raised here or shown in a worker's
    traceback, comes back as a :class:`StorageError` too::

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
    storage = None          # the first storage failure of the chain (STORAGE_ERRNOS)
    while e is not None and id(e) not in seen:
        if isinstance(e, KafkaLogError):
            return e
        storage = storage or as_storage_error(e)
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    if storage is not None:
        return storage
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
    import os
    by_text = {os.strerror(c): c for c in STORAGE_ERRNOS}
    for text in _texts(exc):        # a foreign OSError a worker raised: the same rule
        for line in text.splitlines():
            m = _OS_TEXT.search(line)
            if m and int(m.group(1)) in STORAGE_ERRNOS:
                code = int(m.group(1))
                rest = m.group(2).strip()
                rest = rest[len(os.strerror(code)):].lstrip(": ") \
                    if rest.startswith(os.strerror(code)) else rest
                return StorageError(f"filesystem failure: {errno_text(code)}"
                                    + (f": {rest}" if rest else ""), errno=code)
            # the JVM's (Spark's own Parquet writer, Hadoop's filesystems): no errno, the
            # C library's text of it
            m = _JAVA_IO.search(line)
            code = by_text.get(m.group(2).strip()) if m else None
            if code is not None:
                return StorageError(f"filesystem failure: {errno_text(code)} "
                                    f"({m.group(1)})", errno=code)
    return None
