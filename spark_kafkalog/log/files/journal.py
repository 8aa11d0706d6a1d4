"""The commit journal: which writes a topic holds, and the one write that may be in flight.

``<log dir>/.kafkalog.<topic>.journal`` is a *file* at the log-dir root (a broker parses
every root *directory* as ``topic-partition`` but ignores root files it does not know),
holding one JSON document, replaced atomically, behind a header line
``"kafkalog-journal 1 <crc32c of the body, hex> <body length>"``::

    {"topic": ..., "pending": null | <PendingWrite>, "rolled_back": [write ids],
     "commits": [{write_id, mode, committed_ms,
                  partitions: {p: {start, end, segments: [[base, from, to]]}}}],
     "streams": {query_id: highest committed batch id}}

:class:`PendingWrite` is the write in flight: written (``state = "begun"``) with what
undoing it needs before any partition file is touched; its coordinator's commit (one
atomic journal write) is the commit point. The protocol is in :mod:`.commit`, undoing
and finishing in :mod:`.recovery`; a read-only reader bounds what it returns with
:func:`committed_bounds`. History is bounded (:data:`RETAIN_COMMITS` commits and
:data:`RETAIN_RANGES` partition ranges in all, so a commit's load and save stay small on a
topic of thousands of partitions; streaming writes, ``stream:<query id>:<batch id>``, by
their query's highest committed batch id).
Each commit carries a ``seq`` (its number in the topic's history, kept when older
commits are trimmed): the versions :mod:`spark_kafkalog.log.read.snapshot` reads as of.
"""
from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass, field

import crc32c
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, LogLayoutError
from spark_kafkalog.log.io import read_small_file, write_atomic

JOURNAL_MAGIC = "kafkalog-journal"
JOURNAL_VERSION = 1
RETAIN_COMMITS = 1000
#: at most this many partition ranges in the retained commits (the newest commit is kept
#: whatever its width): ~1.4 MB of journal, what every commit loads and saves. A topic of
#: 10 partitions keeps RETAIN_COMMITS commits, one of 1,000 partitions the last 20.
RETAIN_RANGES = 20_000
RETAIN_ROLLED_BACK = 100
#: a journal larger than this is not one we wrote (1000 commits of 1000 partitions: ~100 MB)
JOURNAL_MAX_BYTES = 1 << 30

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
#: an abandoned write's marker, ``<prefix><token>.<run>`` (``log.write.abort_write``): a
#: task of that run still staging when the driver gave the write up finds it and deletes
#: its own staging files (``StagingWriter``), which the driver's sweep could not see yet
ABORTED_PREFIX = ".kafkalog-aborted."


def aborted_marker(root: str, write_id: str, run: str) -> str:
    """The path of the marker saying run ``run`` of write ``write_id`` was abandoned."""
    return f"{root.rstrip('/')}/{ABORTED_PREFIX}{write_token(write_id)}.{run}"


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
        raise InvalidOptionError(f"query id {query_id!r} must not contain ':'")
    return f"stream:{query_id}:{int(batch_id)}"


def _parse_stream(write_id: str) -> tuple[str, int] | None:
    if not write_id.startswith("stream:"):
        return None
    _, query, batch = write_id.split(":", 2)
    return query, int(batch)


# ---- the write in flight -------------------------------------------------------------------
@dataclass
class PartitionUndo:
    """One partition of a pending write: its offsets, and what rolling it back needs (the
    active segment's file sizes before the write, the time-index close entry the append
    replaces, whether the write created the directory)."""

    start: int
    end: int
    active_base: int | None = None
    log_size: int = 0
    index_size: int = 0
    timeindex_size: int = 0
    timeindex_tail: bytes = b""
    created_dir: bool = False
    planned_bytes: int = 0
    #: [[segment base, first byte, end byte], ...] the write appends
    segments: list = field(default_factory=list)
    no_append: bool = False

    def to_json(self) -> dict:
        return {"start": self.start, "end": self.end, "active_base": self.active_base,
                "log_size": self.log_size, "index_size": self.index_size,
                "timeindex_size": self.timeindex_size,
                "timeindex_tail": self.timeindex_tail.hex(), "created_dir": self.created_dir,
                "planned_bytes": self.planned_bytes, "segments": self.segments,
                "no_append": self.no_append}

    @classmethod
    def from_json(cls, doc: dict) -> "PartitionUndo":
        base = doc.get("active_base")
        return cls(start=int(doc["start"]), end=int(doc["end"]),
                   active_base=None if base is None else int(base),
                   log_size=int(doc.get("log_size", 0)),
                   index_size=int(doc.get("index_size", 0)),
                   timeindex_size=int(doc.get("timeindex_size", 0)),
                   timeindex_tail=bytes.fromhex(doc.get("timeindex_tail", "")),
                   created_dir=bool(doc.get("created_dir", False)),
                   planned_bytes=int(doc.get("planned_bytes", 0)),
                   segments=list(doc.get("segments") or []),
                   no_append=bool(doc.get("no_append", False)))


@dataclass
class PendingWrite:
    """The journal's record of the one write in flight in a topic (see the module doc).
    ``mode`` is ``"append"``, ``"overwrite"`` or ``"replace"`` (segments replaced by
    compaction, :mod:`.replace`); ``state`` ``"begun"`` or ``"committed"``;
    ``log_start`` holds the new log start offset of the partitions whose log start the
    write moves (every partition of an overwrite; a partition with no record yet that an
    offset-preserving write starts at its first offset); ``replace`` a replace's groups
    per partition (``[[new base, [old bases]], ...]``), ``cleaned_to`` the offset each
    partition was cleaned up to and ``replace_files`` the ``[size, sha256]`` of each new
    ``.log`` by partition and new base (how recovery tells a finished swap from one a
    broker's startup undid)."""

    write_id: str
    mode: str
    coordinator: str
    topics: list
    partitions: dict[int, PartitionUndo]
    log_start: dict[int, int] = field(default_factory=dict)
    state: str = "begun"
    begun_ms: int = 0
    replace: dict = field(default_factory=dict)
    cleaned_to: dict = field(default_factory=dict)
    replace_files: dict = field(default_factory=dict)

    @property
    def committed(self) -> bool:
        return self.state == "committed"

    def commit_entry(self) -> dict:
        """The ``commits`` entry this write becomes."""
        entry = {"write_id": self.write_id, "mode": self.mode, "committed_ms": now_ms(),
                 "partitions": {str(p): {"start": u.start, "end": u.end,
                                         "segments": u.segments}
                                for p, u in self.partitions.items()}}
        if self.mode == "replace":
            entry["cleaned_to"] = {str(p): o for p, o in self.cleaned_to.items()}
        return entry

    def to_json(self) -> dict:
        return {"write_id": self.write_id, "mode": self.mode, "state": self.state,
                "coordinator": self.coordinator, "topics": list(self.topics),
                "begun_ms": self.begun_ms,
                "partitions": {str(p): u.to_json() for p, u in self.partitions.items()},
                "log_start": {str(p): s for p, s in self.log_start.items()},
                **({"replace": {str(p): g for p, g in self.replace.items()},
                    "cleaned_to": {str(p): o for p, o in self.cleaned_to.items()},
                    "replace_files": {str(p): {str(b): f for b, f in fs.items()}
                                      for p, fs in self.replace_files.items()}}
                   if self.mode == "replace" else {})}

    @classmethod
    def from_json(cls, doc: dict, topic: str) -> "PendingWrite":
        return cls(write_id=doc["write_id"], mode=doc.get("mode", "append"),
                   coordinator=doc.get("coordinator", topic),
                   topics=list(doc.get("topics") or [topic]),
                   partitions={int(p): PartitionUndo.from_json(u)
                               for p, u in (doc.get("partitions") or {}).items()},
                   log_start={int(p): int(s) for p, s in (doc.get("log_start") or {}).items()},
                   state=doc.get("state", "begun"), begun_ms=int(doc.get("begun_ms", 0)),
                   replace={int(p): [[int(g[0]), [int(b) for b in g[1]]] for g in gs]
                            for p, gs in (doc.get("replace") or {}).items()},
                   cleaned_to={int(p): int(o)
                               for p, o in (doc.get("cleaned_to") or {}).items()},
                   replace_files={int(p): {int(b): [int(f[0]), str(f[1])]
                                           for b, f in fs.items()}
                                  for p, fs in (doc.get("replace_files") or {}).items()})


# ---- state --------------------------------------------------------------------------------
@dataclass
class JournalState:
    topic: str
    pending: PendingWrite | None = None
    commits: list = field(default_factory=list)
    streams: dict = field(default_factory=dict)
    rolled_back: list = field(default_factory=list)
    exists: bool = False
    #: id(entry) -> (entry, its JSON text) for the commits saved before: a history entry
    #: never changes once recorded, so each save encodes only the new ones (a commit
    #: saves the journal three times; its history grows with the partition count)
    _encoded: dict = field(default_factory=dict, repr=False, compare=False)

    def is_committed(self, write_id: str) -> bool:
        """Whether ``write_id`` committed in this journal (a retry or replay is a no-op)."""
        stream = _parse_stream(write_id)
        if stream is not None and self.streams.get(stream[0], -1) >= stream[1]:
            return True
        if (self.pending is not None and self.pending.write_id == write_id
                and self.pending.committed):
            return True
        return any(c.get("write_id") == write_id for c in self.commits)

    def record_commit(self, entry: dict) -> None:
        # a number that survives trimming: readers name commits by it (asOfCommit)
        last = self.commits[-1].get("seq", len(self.commits) - 1) if self.commits else -1
        entry.setdefault("seq", int(last) + 1)
        self.commits.append(entry)
        del self.commits[:-RETAIN_COMMITS]
        widths = [len(c.get("partitions") or ()) for c in self.commits]
        total, drop = sum(widths), 0
        while total > RETAIN_RANGES and drop < len(widths) - 1:
            total -= widths[drop]
            drop += 1
        del self.commits[:drop]
        stream = _parse_stream(entry["write_id"])
        if stream is not None:
            self.streams[stream[0]] = max(self.streams.get(stream[0], -1), stream[1])

    def commit_pending(self) -> None:
        """Mark the pending write committed and add it to the history (then :func:`save`:
        for the coordinator's journal that save is the commit point)."""
        self.pending.state = "committed"
        self.record_commit(self.pending.commit_entry())

    def record_rollback(self, write_id: str) -> None:
        self.rolled_back.append(write_id)
        del self.rolled_back[:-RETAIN_ROLLED_BACK]

    def to_json(self) -> dict:
        return {"topic": self.topic,
                "pending": None if self.pending is None else self.pending.to_json(),
                "commits": self.commits, "streams": self.streams,
                "rolled_back": self.rolled_back}

    def encode(self) -> bytes:
        """The journal body: exactly ``_dumps(self.to_json())``, with each history entry
        encoded once per state (see ``_encoded``)."""
        cache, kept, texts = self._encoded, {}, []
        for c in self.commits:
            hit = cache.get(id(c))
            if hit is None or hit[0] is not c:
                hit = (c, _dumps(c))
            kept[id(c)] = hit
            texts.append(hit[1])
        self._encoded = kept
        pending = None if self.pending is None else self.pending.to_json()
        # to_json's keys, in _dumps' sorted order
        return ('{"commits":[' + ",".join(texts) + '],"pending":' + _dumps(pending)
                + ',"rolled_back":' + _dumps(self.rolled_back) + ',"streams":'
                + _dumps(self.streams) + ',"topic":' + _dumps(self.topic) + "}").encode()


def _dumps(doc) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def load(fs: pafs.FileSystem, root: str, topic: str) -> JournalState:
    """The topic's journal (an empty state when the topic has none). Raises
    :class:`LogLayoutError` for a journal that is not one (bad header or checksum)."""
    path = journal_path(root, topic)
    raw = read_small_file(fs, path, JOURNAL_MAX_BYTES)
    if raw is None:
        return JournalState(topic=topic)
    return parse(raw, path, topic)


def parse(raw: bytes, path: str, topic: str) -> JournalState:
    """The journal document in ``raw`` (a file's bytes). Raises :class:`LogLayoutError`
    naming ``path`` for anything that is not a journal of ``topic`` this build wrote."""
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
        doc, encoded = _decode(body.decode("utf-8"))
    except ValueError as err:
        raise LogLayoutError("journal body is not valid JSON", path=path,
                             position=nl + 1) from err
    problem = _shape_problem(doc)
    if problem:
        raise LogLayoutError(f"journal document is malformed: {problem}", path=path,
                             position=nl + 1)
    if doc.get("topic") != topic:
        raise LogLayoutError(f"journal belongs to topic {doc.get('topic')!r}, not {topic!r}",
                             path=path)
    pending = doc.get("pending")
    try:
        pending = None if pending is None else PendingWrite.from_json(pending, topic)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise LogLayoutError(f"journal's pending write is malformed ({err!r})", path=path,
                             position=nl + 1) from err
    commits = doc.get("commits") or []
    return JournalState(topic=topic, pending=pending, commits=commits,
                        streams=dict(doc.get("streams") or {}),
                        rolled_back=list(doc.get("rolled_back") or []), exists=True,
                        _encoded={id(c): (c, t) for c, t in zip(commits, encoded)})


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shape_problem(doc) -> str | None:
    """What makes ``doc`` not a journal document, or None. The checksum guards against
    damage; this guards every later reader of the history against a document that is
    valid JSON of another shape (a hand edit, another program's file)."""
    if not isinstance(doc, dict):
        return f"a JSON {type(doc).__name__}, not an object"
    commits = doc.get("commits") or []
    if not isinstance(commits, list):
        return "'commits' is not a list"
    for i, c in enumerate(commits):
        parts = c.get("partitions") if isinstance(c, dict) else None
        if not isinstance(c, dict) or not isinstance(c.get("write_id"), str) \
                or not isinstance(parts, dict) or ("seq" in c and not _is_int(c["seq"])):
            return f"commit {i} is not a commit entry"
        for p, r in parts.items():
            if not (isinstance(p, str) and p.lstrip("-").isdigit() and isinstance(r, dict)
                    and _is_int(r.get("start")) and _is_int(r.get("end"))):
                return f"commit {i} has a malformed range for partition {p!r}"
    streams = doc.get("streams") or {}
    if not isinstance(streams, dict) or not all(_is_int(v) for v in streams.values()):
        return "'streams' is not a map of query ids to batch ids"
    rolled_back = doc.get("rolled_back") or []
    if not isinstance(rolled_back, list) or not all(isinstance(w, str) for w in rolled_back):
        return "'rolled_back' is not a list of write ids"
    if not isinstance(doc.get("pending"), (dict, type(None))):
        return "'pending' is not an object"
    return None


_DECODER = json.JSONDecoder()
_COMMITS_OPEN = '{"commits":['


def _decode(body: str) -> tuple[dict, list[str]]:
    """The journal document, and the text of each history entry when the body is laid
    out as :meth:`JournalState.encode` writes it (the next save then copies those texts
    instead of encoding the history again); else ``json.loads``' document and no texts."""
    if not body.startswith(_COMMITS_OPEN):
        return json.loads(body), []
    commits, texts = [], []
    i = len(_COMMITS_OPEN)
    while body[i:i + 1] != "]":
        entry, end = _DECODER.raw_decode(body, i)
        if not isinstance(entry, dict) or body[end:end + 1] not in (",", "]"):
            return json.loads(body), []
        commits.append(entry)
        texts.append(body[i:end])
        i = end + 1 if body[end] == "," else end
    if body[i + 1:i + 2] != ",":
        return json.loads(body), []
    doc = json.loads("{" + body[i + 2:])
    if not isinstance(doc, dict) or "commits" in doc:
        return json.loads(body), []
    doc["commits"] = commits
    return doc, texts


def save(fs: pafs.FileSystem, root: str, state: JournalState) -> None:
    """Write the journal atomically (:func:`spark_kafkalog.log.io.write_atomic`: the old or
    the new document, never a mix, on every filesystem)."""
    body = state.encode()
    head = f"{JOURNAL_MAGIC} {JOURNAL_VERSION} {crc32c.crc32c(body):08x} {len(body)}\n"
    write_atomic(fs, journal_path(root, state.topic), head.encode("ascii") + body)
    state.exists = True


# ---- what a read-only reader needs ------------------------------------------------------
def pending_decided(fs: pafs.FileSystem, root: str, state: JournalState) -> bool:
    """Whether the pending write of ``state`` is committed (by itself or its coordinator)."""
    p = state.pending
    if p is None:
        return False
    if p.committed:
        return True
    if p.coordinator == state.topic:
        return False
    return load(fs, root, p.coordinator).is_committed(p.write_id)


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
    if not pending_decided(fs, root, state):
        for part, undo in p.partitions.items():
            out[part] = (0, undo.start)
        return out or None
    if p.mode == "overwrite":
        for part, start in p.log_start.items():
            out[part] = (start, None)
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


def now_ms() -> int:
    return int(time.time() * 1000)
