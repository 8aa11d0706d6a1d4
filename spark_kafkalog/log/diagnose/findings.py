"""The one record of something wrong in a log dir, for inspect, verify and dump."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ERROR", "WARNING", "Finding", "Problem", "problem"]

ERROR = "error"
WARNING = "warning"


@dataclass(frozen=True)
class Finding:
    """One thing wrong. ``severity``: :data:`ERROR` or :data:`WARNING` once verify has
    judged it (None as inspect reports it). ``kind``: ``corrupt`` (bytes that are not
    valid batches, or a batch that does not decode), ``torn_tail`` (the last segment ends
    inside a batch or in zero padding), ``index`` / ``timeindex`` / ``txnindex`` (an entry
    the log does not confirm, or an unreadable file), ``checkpoint``, ``leader_epoch``,
    ``snapshot``, ``layout`` (a directory or file that cannot be read), ``staging`` (a
    writer's staging files at a log-dir root). ``position`` is a
    byte position in ``path`` (None when about a whole file), ``offset`` the Kafka offset
    involved, when there is one."""
    severity: str | None
    kind: str
    path: str
    position: int | None
    offset: int | None
    message: str
    topic: str | None = None
    partition: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def where(self) -> str:
        parts = [self.path]
        if self.position is not None:
            parts.append(f"position {self.position}")
        if self.offset is not None:
            parts.append(f"offset {self.offset}")
        return ", ".join(parts)

    def __str__(self) -> str:
        head = f"{self.severity}: " if self.severity is not None else ""
        return f"{head}{self.kind}: {self.message} ({self.where()})"


#: the name inspect's API has always used for its (not yet judged) findings
Problem = Finding


def problem(kind: str, path: str, position: int | None, offset: int | None,
            message: str) -> Finding:
    """A finding as inspect reports it: no severity yet (verify decides it)."""
    return Finding(None, kind, path, position, offset, message)
