"""The commit journal: which writes a topic holds, and the one write that may be in flight.

Where it lives: ``<log dir>/.kafkalog.<topic>.journal``, a *file* at the log-dir root, next
to the broker's checkpoint files. A broker's ``LogManager`` parses every *directory* of a
log-dir root as ``topic-partition`` (and refuses to start on one it cannot parse) but
ignores root files it does not know; a file inside a partition directory would be
visible to ``LogLoader``, which owns those names. The same holds for our lock and staging
files (``.kafkalog.<topic>.lock``, ``.kafkalog-staging.*``).

What it holds (one JSON document, replaced atomically — write, fsync, rename, fsync the
directory; one PUT on object stores — so it is never torn)::

    first line : "kafkalog-journal 1 <crc32c of the body, hex> <body length>"
    body       : {"topic": ...,
                  "pending": null | {write_id, mode, state: "begun"|"committed",
                                     coordinator, topics, partitions: {p: rollback data},
                                     result: {p: committed range}, log_start: {p: offset}},
                  "commits": [{write_id, seq, mode, committed_ms,
                               partitions: {p: {start, end, segments: [[base, from, to]]}}}],
                  "streams": {query_id: highest committed batch id},
                  "rolled_back": [write ids]}

The protocol (driven by :mod:`spark_kafkalog.log.appender`):

1. ``pending`` is written with ``state = "begun"`` and everything needed to undo the
   write (per partition: its log end at the start, the active segment's file sizes, the
   time-index entry the append replaces) *before* any partition file is touched;
2. data and indexes are appended and fsynced;
3. the commit point: one atomic journal write that sets ``state = "committed"`` and adds
   the write to ``commits``; for a write spanning several topics the first topic (in
   sorted order) is the *coordinator* and its journal's commit is the commit point of
   all of them;
4. post-commit work (checkpoint files, deleting an overwritten topic's old segments) is
   idempotent; ``pending`` is cleared when it is done.

On the next open by a writer (:func:`recover`), a ``begun`` write is rolled back
(partitions truncated to their journaled start, index entries past it removed, created
segments deleted) unless its coordinator committed it, in which case it is rolled
forward; a ``committed`` one has its post-commit work redone. A reader that may not
write bounds what it returns with :func:`committed_end_offsets` instead.

History is bounded: the last :data:`RETAIN_COMMITS` commits are kept in full; streaming
writes (write id ``stream:<query id>:<batch id>``) are remembered per query by their
highest committed batch id, which is all Spark's replay needs (it only ever replays the
last batch it did not mark done).
"""
from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field

import crc32c
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log.lock import is_local

JOURNAL_MAGIC = "kafkalog-journal"
JOURNAL_VERSION = 1
RETAIN_COMMITS = 1000
RETAIN_ROLLED_BACK = 100

#: Kafka's Topic.validate: legal characters and the maximum length
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


def validate_topic(topic: str) -> str:
    """Kafka's rules for a topic name (so no path escapes the log dir): non-empty, at most
    249 characters of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``. Returns the name or raises
    :class:`InvalidOptionError` naming the option ``topic``."""
    if not isinstance(topic, str) or not topic:
        raise InvalidOptionError("option 'topic': topic name is empty")
    if topic in (".", ".."):
        raise InvalidOptionError(f"option 'topic': topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidOptionError(f"option 'topic': topic name is {len(topic)} characters, "
                                 f"Kafka allows at most {MAX_TOPIC_LENGTH}")
    if not _TOPIC_RE.fullmatch(topic):
        raise InvalidOptionError(f"option 'topic': topic name {topic!r} has characters "
                                 "other than ASCII letters, digits, '.', '_' and '-'")
    return topic


def journal_path(root: str, topic: str) -> str:
    return f"{root.rstrip('/')}/.kafkalog.{topic}.journal"


STAGING_PREFIX = ".kafkalog-staging."


def write_token(write_id: str) -> str:
    """A filesystem-safe token for a write id (used in staging file names)."""
    return format(crc32c.crc32c(write_id.encode()), "08x") + "-" + re.sub(
        r"[^a-zA-Z0-9_-]", "_", write_id)[-60:]


# ---- write ids --------------------------------------------------------------------------
def batch_write_id() -> str:
    """A fresh write id for one batch (non-streaming) write job."""
    return f"batch:{uuid.uuid4().hex}"


def stream_write_id(query_id: str, batch_id: int) -> str:
    """The write id of a streaming micro-batch: stable across restarts of the query."""
    if ":" in query_id:
        raise ValueError("query id must not contain ':'")
    return f"stream:{query_id}:{int(batch_id)}"


def _parse_stream(write_id: str) -> tuple[str, int] | None:
    if not write_id.startswith("stream:"):
        return None
    _, query, batch = write_id.split(":", 2)
    return query, int(batch)


# ---- state --------------------------------------------------------------------------------
@dataclass
class JournalState:
    topic: str
    pending: dict | None = None
    commits: list = field(default_factory=list)
    streams: dict = field(default_factory=dict)
    rolled_back: list = field(default_factory=list)
    exists: bool = False

    def is_committed(self, write_id: str) -> bool:
        """Whether ``write_id`` committed in this journal (a retry or replay is a no-op)."""
        stream = _parse_stream(write_id)
        if stream is not None and self.streams.get(stream[0], -1) >= stream[1]:
            return True
        if (self.pending is not None and self.pending.get("write_id") == write_id
                and self.pending.get("state") == "committed"):
            return True
        return any(c.get("write_id") == write_id for c in self.commits)

    def record_commit(self, entry: dict) -> None:
        # a number that survives trimming: readers name commits by it (asOfCommit)
        last = self.commits[-1].get("seq", len(self.commits) - 1) if self.commits else -1
        entry.setdefault("seq", int(last) + 1)
        self.commits.append(entry)
        del self.commits[:-RETAIN_COMMITS]
        stream = _parse_stream(entry["write_id"])
        if stream is not None:
            self.streams[stream[0]] = max(self.streams.get(stream[0], -1), stream[1])

    def record_rollback(self, write_id: str) -> None:
        self.rolled_back.append(write_id)
        del self.rolled_back[:-RETAIN_ROLLED_BACK]

    def to_json(self) -> dict:
        return {"topic": self.topic, "pending": self.pending, "commits": self.commits,
                "streams": self.streams, "rolled_back": self.rolled_back}


def _read_bytes(fs: pafs.FileSystem, path: str) -> bytes | None:
    if is_local(fs):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    with fs.open_input_stream(path) as f:
        return f.read()


def load(fs: pafs.FileSystem, root: str, topic: str) -> JournalState:
    """The topic's journal (an empty state when the topic has none). Raises
    :class:`LogLayoutError` for a journal that is not one (bad header or checksum)."""
    path = journal_path(root, topic)
    raw = _read_bytes(fs, path)
    if raw is None:
        return JournalState(topic=topic)
    nl = raw.find(b"\n")
    head = raw[:nl].decode("ascii", "replace").split() if nl > 0 else []
    if len(head) != 4 or head[0] != JOURNAL_MAGIC:
        raise LogLayoutError("not a kafkalog journal (bad header line)", path=path, position=0)
    if head[1] != str(JOURNAL_VERSION):
        raise LogLayoutError(f"journal version {head[1]} is not supported (this build reads "
                             f"version {JOURNAL_VERSION})", path=path, position=0)
    body = raw[nl + 1:]
    try:
        want_crc, want_len = int(head[2], 16), int(head[3])
    except ValueError as err:
        raise LogLayoutError("journal header is malformed", path=path, position=0) from err
    if len(body) != want_len or crc32c.crc32c(body) != want_crc:
        raise LogLayoutError("journal checksum or length mismatch (file damaged)", path=path,
                             position=nl + 1)
    try:
        doc = json.loads(body.decode("utf-8"))
    except ValueError as err:
        raise LogLayoutError("journal body is not valid JSON", path=path,
                             position=nl + 1) from err
    if doc.get("topic") != topic:
        raise LogLayoutError(f"journal belongs to topic {doc.get('topic')!r}, not {topic!r}",
                             path=path)
    return JournalState(topic=topic, pending=doc.get("pending"),
                        commits=list(doc.get("commits") or []),
                        streams=dict(doc.get("streams") or {}),
                        rolled_back=list(doc.get("rolled_back") or []), exists=True)


def atomic_write(fs: pafs.FileSystem, path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader (or a crash) sees the old or the
    new contents, never a mix: local — temp file, fsync, rename, fsync the directory;
    object stores — one PUT."""
    if not is_local(fs):
        with fs.open_output_stream(path) as f:
            f.write(data)
        return
    directory = os.path.dirname(path) or "."
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    fsync_dir(directory)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(fs: pafs.FileSystem, root: str, state: JournalState) -> None:
    """Write the journal atomically (see :func:`atomic_write`)."""
    body = json.dumps(state.to_json(), separators=(",", ":"), sort_keys=True).encode()
    head = f"{JOURNAL_MAGIC} {JOURNAL_VERSION} {crc32c.crc32c(body):08x} {len(body)}\n"
    atomic_write(fs, journal_path(root, state.topic), head.encode("ascii") + body)
    state.exists = True


# ---- what a read-only reader needs ------------------------------------------------------
def _pending_decided(fs: pafs.FileSystem, root: str, state: JournalState) -> bool:
    """Whether the pending write of ``state`` is committed (by itself or its coordinator)."""
    p = state.pending
    if p is None:
        return False
    if p.get("state") == "committed":
        return True
    coordinator = p.get("coordinator", state.topic)
    if coordinator == state.topic:
        return False
    return load(fs, root, coordinator).is_committed(p["write_id"])


def pending_committed(fs: pafs.FileSystem, root: str, state: JournalState) -> bool:
    """Whether the pending write of ``state`` committed (by itself or its coordinator
    topic); False when there is none."""
    return _pending_decided(fs, root, state)


def committed_bounds(fs: pafs.FileSystem, root: str, topic: str
                     ) -> dict[int, tuple[int, int | None]] | None:
    """Per partition ``(lowest visible offset, exclusive upper bound or None)`` that the
    journal imposes on what the files show, or None when it imposes nothing.

    * a write in flight (begun, not committed): its partitions are bounded above by the
      offset the write started at — the appended bytes are not committed (yet, or ever);
    * a committed overwrite whose old segments may still be on disk: its partitions
      start at the new log start offset.

    Read-only: never takes a lock, never writes. Partitions not listed are unbounded."""
    state = load(fs, root, topic)
    p = state.pending
    if p is None:
        return None
    out: dict[int, tuple[int, int | None]] = {}
    if not _pending_decided(fs, root, state):
        for part, info in p.get("partitions", {}).items():
            out[int(part)] = (0, int(info["start"]))
        return out or None
    if p.get("mode") == "overwrite":
        for part, start in (p.get("log_start") or {}).items():
            out[int(part)] = (int(start), None)
    return out or None


def committed_end_offsets(fs: pafs.FileSystem, root: str, topic: str
                          ) -> dict[int, int] | None:
    """Exclusive upper bounds a reader that cannot run :func:`recover` must apply:
    ``{partition: offset}`` for each partition with an uncommitted write in flight (or
    left by a crashed writer), None when nothing is in flight. Offsets at or past the
    bound belong to that write and must not be returned. Partitions not listed are
    unbounded. Read-only."""
    bounds = committed_bounds(fs, root, topic)
    if not bounds:
        return None
    ends = {p: end for p, (_, end) in bounds.items() if end is not None}
    return ends or None


def recover(fs: pafs.FileSystem, root: str, topic: str, *, lock_timeout: float | None = None
            ) -> dict:
    """Bring ``topic`` in log dir ``root`` to a committed state: take the topic's writer
    lock (waiting for a live writer to finish; a dead one's lock is free), roll back a
    write that did not commit, roll forward one that did, delete its staging files.
    Returns ``{"rolled_back": write_id | None, "rolled_forward": write_id | None}``.
    Raises :class:`CommitConflictError` when a running broker holds the log dir."""
    from spark_kafkalog.log.appender import recover_topic    # appender imports this module
    return recover_topic(fs, root, topic, lock_timeout=lock_timeout)


def now_ms() -> int:
    return int(time.time() * 1000)
