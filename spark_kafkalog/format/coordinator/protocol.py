"""Kafka's message-protocol primitives, as the coordinators write their record keys and
values (the generated ``*Key`` / ``*Value`` classes of Kafka's message JSON schemas).

Big-endian throughout. Classic (non-flexible) versions::

    bool              one byte, non-zero is true
    int8 / int16 / int32 / int64   fixed width, signed
    uint16            fixed width, unsigned
    STRING            int16 length, UTF-8 bytes (-1 only where nullable: null)
    BYTES             int32 length, bytes (-1 only where nullable: null)
    ARRAY             int32 count, elements (-1 only where nullable: null)

Flexible versions ("flexibleVersions" in a schema) use compact forms and tagged fields::

    COMPACT_STRING    unsigned varint (length + 1; 0 = null), UTF-8 bytes
    COMPACT_BYTES     unsigned varint (length + 1; 0 = null), bytes
    COMPACT_ARRAY     unsigned varint (count + 1; 0 = null), elements
    TAGGED_FIELDS     unsigned varint count, then per field: unsigned varint tag,
                      unsigned varint size, size bytes; at the end of every struct
    UUID              16 bytes (printed as url-safe base64 without padding)

A :class:`Reader` walks one key or value; every read past the end, negative length or
invalid UTF-8 raises :class:`~spark_kafkalog.errors.CoordinatorRecordError` naming what
was being read.
"""
from __future__ import annotations

import base64
import struct

from spark_kafkalog.errors import CoordinatorRecordError

__all__ = ["Reader", "uuid_text"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_UUID_SIZE = 16
#: an unsigned varint of Kafka's protocol is at most 5 bytes (int32)
_MAX_UVARINT_BYTES = 5


def uuid_text(raw: bytes) -> str:
    """Kafka's ``Uuid.toString()``: url-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class Reader:
    """Reads protocol fields from ``data`` (bytes) starting at ``pos``; ``what`` names
    the key or value in error messages (e.g. ``"OffsetCommitValue v3"``)."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str, pos: int = 0):
        self.data = data
        self.pos = pos
        self.what = what

    def fail(self, reason: str) -> CoordinatorRecordError:
        return CoordinatorRecordError(f"{self.what}: {reason} at byte {self.pos} of "
                                      f"{len(self.data)}")

    def _take(self, n: int, field: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{field} needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def _fixed(self, st: struct.Struct, field: str) -> int:
        if self.pos + st.size > len(self.data):
            raise self.fail(f"{field} is cut off")
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return v

    def int8(self, field: str) -> int:
        return self._fixed(_I8, field)

    def boolean(self, field: str) -> bool:
        """A ``bool`` field: one byte, any non-zero value is true (as Kafka reads it)."""
        return self._fixed(_I8, field) != 0

    def int16(self, field: str) -> int:
        return self._fixed(_I16, field)

    def uint16(self, field: str) -> int:
        return self._fixed(_U16, field)

    def int32(self, field: str) -> int:
        return self._fixed(_I32, field)

    def int64(self, field: str) -> int:
        return self._fixed(_I64, field)

    def uuid(self, field: str) -> bytes:
        return self._take(_UUID_SIZE, field)

    def uvarint(self, field: str) -> int:
        value = shift = 0
        for _ in range(_MAX_UVARINT_BYTES):
            if self.pos >= len(self.data):
                raise self.fail(f"{field} (varint) is cut off")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise self.fail(f"{field} (varint) is longer than {_MAX_UVARINT_BYTES} bytes")

    def _text(self, raw: bytes, field: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{field} is not valid UTF-8") from None

    def string(self, field: str, *, flexible: bool = False, nullable: bool = False
               ) -> str | None:
        if flexible:
            n = self.uvarint(field) - 1
        else:
            n = self.int16(field)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"{field} has length {n}")
        return self._text(self._take(n, field), field)

    # string's twin but for the rule: BYTES' classic length is int32 (STRING's int16)
    # and its bytes are not UTF-8 text
    def bytes_(self, field: str, *, flexible: bool = False, nullable: bool = False
               ) -> bytes | None:
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"{field} has length {n}")
        return bytes(self._take(n, field))

    def count(self, field: str, *, flexible: bool = False, nullable: bool = False
              ) -> int | None:
        """An array's element count (None for a null array where that is allowed)."""
        n = self.uvarint(field) - 1 if flexible else self.int32(field)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.fail(f"{field} has {n} elements")
        if n > len(self.data) - self.pos:
            # every element takes at least one byte: a huge count is damage, not data
            raise self.fail(f"{field} claims {n} elements in {len(self.data) - self.pos} "
                            "bytes")
        return n

    def int32_array(self, field: str, *, flexible: bool = False) -> list[int]:
        n = self.count(field, flexible=flexible)
        return [self.int32(field) for _ in range(n)]

    def tagged_spans(self, prefix: str = ""):
        """Walks the tagged-field section at the end of a flexible struct: yields
        ``(tag, size, end)`` for each field, ``pos`` at its first byte, then moves
        ``pos`` to ``end`` whatever the caller read (a tag it does not know is skipped,
        as Kafka does). ``prefix`` (``"path."``) goes in front of the error texts."""
        where = f"{prefix}tagged fields"
        for _ in range(self.uvarint(where)):
            tag = self.uvarint(where)
            size = self.uvarint(f"{prefix}tag {tag} size")
            end = self.pos + size
            if end > len(self.data):
                raise self.fail(f"{prefix}tag {tag} needs {size} bytes, "
                                f"{len(self.data) - self.pos} left")
            yield tag, size, end
            self.pos = end

    def tagged_fields(self, field: str = "tagged fields") -> dict[int, bytes]:
        """The tagged fields at the end of a flexible struct, ``{tag: raw bytes}``."""
        out = {}
        for _ in range(self.uvarint(field)):
            tag = self.uvarint(field)
            size = self.uvarint(field)
            out[tag] = bytes(self._take(size, f"{field} (tag {tag})"))
        return out

    def done(self) -> bool:
        return self.pos >= len(self.data)
