"""One view of a topic per read: every partition bounded by one journal state.

A read takes the topic's checkpoint files and then its journal(s) once, *before* it
lists any partition's segments (:meth:`LogDirs.journals`, cached with the listing),
and bounds every partition by that one state (:class:`TopicSnapshot`):

- a write in flight (begun, not committed): its partitions end where it started;
- a partition some retained commit wrote: it ends at the newest such commit's end (or
  the checkpointed high watermark when that is higher: a broker appended after us);
  bytes past it belong to a write that began after the journal was read;
- an overwrite's partitions start at its new log start.

Listing after the journal means every committed byte is in the listing; a partition
whose listed files end below its committed end changed under the read (an overwrite
deleted segments): :func:`~spark_kafkalog.log.read.state.topic_states` then takes the
snapshot again.

The journal's commits are also the versions a read may ask for (:func:`list_commits`;
``as_of`` in :func:`topic_snapshot`): as of commit ``k`` a partition ends at the newest
commit up to ``k`` that wrote it. A commit whose records retention, compaction or an
overwrite removed is refused (:class:`~spark_kafkalog.errors.DataLossError`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import pyarrow.fs as pafs

from spark_kafkalog.errors import DataLossError, InvalidOptionError, KafkaLogError
from spark_kafkalog.log.io import is_local
from spark_kafkalog.log.model.swap import swap_state
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.files.lock import topic_lock_free
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

__all__ = ["Commit", "Bound", "TopicSnapshot", "list_commits", "topic_snapshot",
           "check_as_of", "moved", "listing_settled", "listing_key", "SNAPSHOT_ATTEMPTS",
           "SETTLE_TRIES"]

#: takes of a snapshot when a partition's files changed under the read; the last take
#: is accepted as it is (a stable state, such as segments deleted by hand, not a race)
SNAPSHOT_ATTEMPTS = 3
#: listings taken again while a compaction swaps segment files (renames take a few ms;
#: see listing_settled)
SETTLE_TRIES = 40


@dataclass(frozen=True)
class Commit:
    """One committed write of a topic, from its journal: ``ranges`` maps partition ->
    ``(start, end)`` offsets it appended (end exclusive); ``seq`` numbers the topic's
    commits from 0 in commit order; ``committed_ms`` is the commit time (None for a
    multi-topic write whose coordinator committed it and this topic's journal has not
    recorded it yet)."""
    write_id: str
    seq: int
    committed_ms: int | None
    mode: str
    ranges: Mapping[int, tuple[int, int]]
    root: str


@dataclass(frozen=True)
class Bound:
    """What the journal imposes on one partition. ``end``: exclusive upper bound (None:
    the files decide); ``hard``: the checkpointed high watermark may not raise it (a
    write in flight, an as-of read); ``log_start``: lowest visible offset;
    ``removed_below``: the latest state's log start, for refusing as-of reads of
    records already removed."""
    end: int | None
    hard: bool = False
    log_start: int = 0
    removed_below: int = 0


@dataclass(frozen=True)
class TopicSnapshot:
    """The state every partition of one topic is read at. Picklable. ``commit``: the
    newest commit the snapshot holds (the one asked for in an as-of read), None when
    the topic has no journal or no retained commit."""
    topic: str
    bounds: Mapping[int, Bound] = field(default_factory=dict)
    commit: Commit | None = None
    as_of: bool = False

    def bound(self, partition: int) -> Bound | None:
        return self.bounds.get(partition)


@dataclass
class Journals:
    """The journals of one topic, one per root holding it, read once (see
    :func:`load_journals`), with the pending write's decision."""
    topic: str
    states: dict                    # root -> JournalState
    decided: dict                   # root -> bool (pending write committed)
    latest: TopicSnapshot | None = None
    #: root -> the journal file's identity when it was read (see listing_settled)
    ids: dict = field(default_factory=dict)

    def swap_groups(self, root: str, partition: int) -> list | None:
        """The groups of the partition a compaction committed and is swapping in (or
        was, when killed) per this journal state; None when none."""
        st = self.states.get(root)
        return st.pending.replace.get(int(partition)) if _swapping(st) else None


def load_journals(logdirs, topic: str, roots: Iterable[str]) -> Journals:
    """Read the checkpoint files of ``roots`` (cached in ``logdirs``), then the topic's
    journal in each: checkpoints first, so what they say is never newer than the
    journal. Called by :meth:`LogDirs.journals`, before any segment is listed."""
    fs = logdirs.filesystem
    states, decided = {}, {}
    for root in roots:
        for name in (REPLICATION_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT):
            logdirs.checkpoint(root, name)
        try:        # what a read checks for data loss (loss.py): also before the listing
            logdirs.checkpoint(root, RECOVERY_POINT_CHECKPOINT)
        except KafkaLogError:
            pass    # an unreadable recovery point promises nothing (verify reports it)
    ids = {}
    local = is_local(fs)        # listing_settled's check: local disk only (no requests)
    for root in roots:
        if local:
            ids[root] = _file_id(fs, jr.journal_path(root, topic))
        st = jr.load(fs, root, topic)
        if st.exists:
            states[root] = st
            decided[root] = jr.pending_decided(fs, root, st)
    return Journals(topic, states, decided, ids=ids)


def _file_id(fs, path: str):
    """What changes when a file is replaced (inode, mtime, size), None when absent."""
    if isinstance(fs, pafs.LocalFileSystem):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return None
    return (info.mtime_ns, info.size)


def _journals(logdirs, topic: str) -> Journals:
    return logdirs.journals(topic)      # read once, before any partition dir is listed


def _root_commits(root: str, st, decided: bool) -> list[Commit]:
    out = []
    seq = -1
    for i, c in enumerate(st.commits):
        seq = int(c.get("seq", i))
        out.append(Commit(c["write_id"], seq, c.get("committed_ms"), c.get("mode", "append"),
                          {int(p): (int(r["start"]), int(r["end"]))
                           for p, r in (c.get("partitions") or {}).items()}, root))
    p = st.pending
    if p is not None and decided and not any(c.write_id == p.write_id for c in out):
        # committed by its coordinator topic; this journal's record comes post-commit
        out.append(Commit(p.write_id, seq + 1, None, p.mode,
                          {q: (u.start, u.end) for q, u in p.partitions.items()}, root))
    return out


def list_commits(logdirs, topic: str) -> list[Commit]:
    """The retained commits of ``topic`` in ``logdirs`` (the journal keeps the last
    :data:`~spark_kafkalog.log.files.journal.RETAIN_COMMITS`), oldest first; empty when the
    topic has no journal (a log no kafkalog writer wrote)."""
    j = _journals(logdirs, topic)
    out = [c for root, st in j.states.items()
           for c in _root_commits(root, st, j.decided[root])]
    return sorted(out, key=lambda c: (c.root, c.seq))


def _latest_bounds(j: Journals, roots_of: Mapping[int, str]) -> dict[int, Bound]:
    out: dict[int, Bound] = {}
    for root, st in j.states.items():
        decided = j.decided[root]
        mine = [q for q, r in roots_of.items() if r == root]
        # one pass over the history: each partition's last committed end, and the start
        # of its last overwrite
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for c in _root_commits(root, st, decided):
            for q, (lo, hi) in c.ranges.items():
                ends[q] = hi
                if c.mode == "overwrite":
                    starts[q] = lo
        for q in mine:
            end, start = ends.get(q), starts.get(q, 0)
            if st.pending is not None and not decided:
                info = st.pending.partitions.get(q)
                if info is not None:
                    out[q] = Bound(info.start, True, start, start)
                    continue
            if end is not None or start:
                out[q] = Bound(end, False, start, start)
    return out


def _find_commit(topic: str, commits: list[Commit], as_of_commit, as_of_timestamp
                 ) -> Commit:
    if not commits:
        raise InvalidOptionError(f"asOfCommit/asOfTimestamp: topic {topic!r} has no "
                                 "commit journal (no kafkalog writer wrote it), so it has "
                                 "no commits to read as of")
    kept = (f"the journal keeps the last {jr.RETAIN_COMMITS} commits, fewer when they list "
            f"more than {jr.RETAIN_RANGES} partition ranges in all; {topic!r} has "
            f"{commits[0].seq}..{commits[-1].seq} (see list_commits)")
    if as_of_commit is not None:
        key = str(as_of_commit).strip()
        if key.lstrip("-").isdigit():
            seq = int(key)
            found = [c for c in commits if c.seq == seq]
        else:
            found = [c for c in commits if c.write_id == key]
        if not found:
            raise InvalidOptionError(f"asOfCommit: {key!r} is not a commit of topic "
                                     f"{topic!r} (a write id or a commit number; {kept})")
        return found[0]
    ts = int(as_of_timestamp)
    found = [c for c in commits if c.committed_ms is not None and c.committed_ms <= ts]
    if not found:
        first = next((c.committed_ms for c in commits if c.committed_ms is not None), None)
        raise InvalidOptionError(f"asOfTimestamp: topic {topic!r} has no commit at or "
                                 f"before {ts} ms (its first kept commit is at {first} "
                                 f"ms; {kept})")
    return found[-1]


def _as_of_bounds(topic: str, j: Journals, roots_of: Mapping[int, str], latest,
                  as_of_commit, as_of_timestamp) -> tuple[Commit, dict[int, Bound]]:
    if len(j.states) > 1:
        raise InvalidOptionError(f"asOfCommit/asOfTimestamp: topic {topic!r} has commit "
                                 f"journals in several log dirs ({', '.join(j.states)}); "
                                 "read it as of a commit from one log dir")
    commits = [c for root, st in j.states.items()
               for c in _root_commits(root, st, j.decided[root])]
    target = _find_commit(topic, commits, as_of_commit, as_of_timestamp)
    others = sorted({r for r in roots_of.values() if r != target.root})
    if others:
        raise InvalidOptionError(f"asOfCommit/asOfTimestamp: partitions of {topic!r} are "
                                 f"also in {', '.join(others)}, which the journal of "
                                 f"{target.root} does not cover")
    k = commits.index(target)
    out = {}
    for q in roots_of:
        end, start = None, 0
        for c in commits[:k + 1]:
            if q in c.ranges:
                end = c.ranges[q][1]
                if c.mode == "overwrite":
                    start = c.ranges[q][0]
        if end is None:             # first written after the commit: it ended where that began
            end = next((c.ranges[q][0] for c in commits[k + 1:] if q in c.ranges), None)
        cur = latest.get(q)
        if end is None:             # not written by any retained commit since: as now
            end = cur.end if cur is not None else None
        out[q] = Bound(end, True, start, cur.removed_below if cur is not None else 0)
    return target, out


def topic_snapshot(logdirs, topic: str, *, as_of_commit=None,
                   as_of_timestamp: int | None = None) -> TopicSnapshot:
    """The snapshot a read of ``topic`` through ``logdirs`` uses: the journal state
    ``logdirs`` read with its listing (cached: every partition read through one
    ``LogDirs`` sees the same state). ``as_of_commit`` (a write id, or a commit number as
    :attr:`Commit.seq`) or ``as_of_timestamp`` (ms: the newest commit at or before it)
    read the topic as it was right after that commit. Raises InvalidOptionError for an
    unknown commit."""
    j = _journals(logdirs, topic)
    roots_of = logdirs.partition_roots(topic)
    if j.latest is None:
        bounds = _latest_bounds(j, roots_of)
        commits = [c for root, st in j.states.items()
                   for c in _root_commits(root, st, j.decided[root])]
        # (a commit not yet recorded with its time is the newest of its journal)
        newest = max(commits, key=lambda c: (float("inf") if c.committed_ms is None
                                             else c.committed_ms, c.seq), default=None)
        j.latest = TopicSnapshot(topic, bounds, newest)
    if as_of_commit is None and as_of_timestamp is None:
        return j.latest
    target, bounds = _as_of_bounds(topic, j, roots_of, j.latest.bounds, as_of_commit,
                                   as_of_timestamp)
    return TopicSnapshot(topic, bounds, target, as_of=True)


def check_as_of(snap: TopicSnapshot, logdirs, p, state) -> None:
    """Refuse an as-of read whose commit's records are (partly) gone from ``p``."""
    rng = snap.commit.ranges.get(p.partition) if snap.commit is not None else None
    if rng is None or rng[0] >= rng[1]:
        return
    b = snap.bound(p.partition)
    now_start = max(state.log_start_offset, b.removed_below if b is not None else 0)
    what = (f"asOf commit {snap.commit.seq} ({snap.commit.write_id}) wrote offsets "
            f"{rng[0]}..{rng[1] - 1} of {p.topic}-{p.partition}")
    if now_start > rng[0]:
        raise DataLossError(f"{what}, but the log now starts at offset {now_start}: those "
                            "records were removed (retention, deleteRecords, compaction "
                            "or an overwrite moved the log start past them)", path=p.path,
                            offset=rng[0])
    cleaned = logdirs.checkpoint(p.root, CLEANER_OFFSET_CHECKPOINT).get(
        (p.topic, p.partition))
    if cleaned is not None and cleaned > rng[0]:
        raise DataLossError(f"{what}, but a broker's log cleaner has compacted the log up "
                            f"to offset {cleaned}: records of that commit may have been "
                            "removed", path=p.path, offset=rng[0])


def moved(snap: TopicSnapshot, partition: int, state) -> bool:
    """Whether ``partition``'s files end below what the snapshot's journal committed:
    they changed after the journal was read (an overwrite deleted segments)."""
    b = snap.bound(partition)
    return (b is not None and b.end is not None and state.log_end_offset < b.end
            and state.log_start_offset < b.end)


def _swapping(st) -> bool:
    p = st.pending if st is not None else None
    return p is not None and p.mode == "replace" and p.committed


def _replace_marks(st) -> tuple:
    if st is None:
        return (0, None)
    replaces = [c.get("seq") for c in st.commits if c.get("mode") == "replace"]
    return (len(replaces), replaces[-1] if replaces else None)


def listing_key(logdirs, topic: str, parts) -> tuple:
    """What :func:`listing_settled` compares with the listing before: the partition
    dirs as read, the names their listing held and the journals' identities."""
    j = _journals(logdirs, topic)
    return (tuple(parts), tuple(logdirs.listed_names(topic, p.partition) for p in parts),
            tuple(sorted(j.ids.items())))


# Why a listing is checked, and when it is taken as it is.
# A compaction swaps segment files by renames (write/replace.py). A directory listing
# that runs while a name changes may show the file under both names or under neither;
# read as segments, such a listing can lose or double records. The journal, read
# before the listing, says whether a swap is in flight (committed, not finished): then
# the listing is trusted when, with the journal file unchanged after it (the same swap
# throughout),
#  1. each swapping partition's listing is one of the states the swap passes through
#     (model/swap.py): renames are the swap's only changes to those names and each
#     state reads as the old log or the new one, so such a listing reads exactly as a
#     quiet directory in that state would, whether or not a rename ran during it. A
#     swap killed at any step (and not yet recovered), left still, is one at once;
#  2. or else it equals the listing taken just before (same dirs, names and journal)
#     and no process holds the topic's writer lock now: nothing that could still rename
#     was running (a killer of the swap mid-listing would need both listings torn alike).
#     This takes a left-over state the model does not know (a dir changed by hand).
# Otherwise (files are really changing, or a live writer holds the lock) the reader
# lists again, up to SETTLE_TRIES times, and then reads what it has.
def listing_settled(logdirs, topic: str, parts, previous: tuple | None = None) -> bool:
    """Whether the listing of ``topic`` (``parts``, taken after its journals) can be
    trusted (see the comment above): no compaction was swapping segment files before
    or after it, or its swapping partitions are each in a state of the swap, or the
    listing repeats ``previous`` (:func:`listing_key` of the listing before) with no
    writer alive. A compaction that finished in between (a new ``replace`` commit in the
    journal) means: list again. A journal is read again only when its file changed since
    the snapshot read it."""
    fs = logdirs.filesystem
    if not is_local(fs):
        return True         # compactions swap files only on local disk (write.replace)
    j = _journals(logdirs, topic)
    for root in set(j.states) | {p.root for p in parts}:
        before = j.states.get(root)
        same = root in j.ids and _file_id(fs, jr.journal_path(root, topic)) == j.ids[root]
        if _swapping(before):
            if not same:
                return False
            swaps = [(j.swap_groups(root, p.partition), logdirs.listed_names(topic, p.partition))
                     for p in parts if p.root == root]
            if all(g is None or swap_state(g, names or ()) is not None for g, names in swaps):
                continue
            if (previous is not None and previous == listing_key(logdirs, topic, parts)
                    and topic_lock_free(root, topic)):
                continue
            return False
        if same:
            continue
        now = jr.load(fs, root, topic)
        if _swapping(now) or _replace_marks(before) != _replace_marks(now):
            return False
    return True
