"""The package's one exception hierarchy.

Every error the package raises on purpose derives from :class:`KafkaLogError`. Messages
are self-contained text (Spark shows them as text only): they name the file, the byte
position and the offset involved when those are known. Low-level ``struct.error`` /
``IndexError`` / codec exceptions are wrapped at the batch boundary with
``raise ... from err``.
"""
from __future__ import annotations


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


class UnsupportedFormatError(KafkaLogError):
    """Valid-looking data using a feature this build cannot decode (unknown codec id)."""


class CoordinatorRecordError(CorruptRecordError):
    """A ``__consumer_offsets`` / ``__transaction_state`` key or value that does not decode
    under the coordinator schema its version names (cut off, bad length, invalid UTF-8)."""


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
