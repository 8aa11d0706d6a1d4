"""Replacing segments by cleaned ones through the journal, as Kafka's cleaner swaps them
(``LocalLog.replaceSegments``), so a kill at any point leaves the old log or the new one.

Per partition, a compaction turns groups of old segments into one new segment each, named
by the group's first base offset. The protocol (journal mode ``"replace"``):

1. begin: the topic's journal records a replace in flight (before any file is written);
2. each group's files are written as ``<base>.log.cleaned`` (and ``.index``,
   ``.timeindex``, ``.txnindex`` ``.cleaned``), fsynced — a reader and a broker ignore
   ``.cleaned`` files;
3. commit: one atomic journal write records every partition's groups (the commit point);
4. finish (idempotent, redone by recovery): ``.cleaned`` -> ``.swap`` for the groups in
   *decreasing* base order, indexes before the ``.log`` — a ``.swap`` at or above the
   smallest ``.cleaned`` offset is ignored by readers and brokers alike
   (:mod:`spark_kafkalog.log.read.discovery`), so the partition reads all old until the
   lowest group's ``.log.swap`` appears, and all new from then on; the old segments are
   renamed for delayed deletion (``<name>.<token>.deleted``, kept for readers that listed
   them: :mod:`spark_kafkalog.log.io.deleted`); ``.swap`` -> final names, ``.log``
   first; the root's ``cleaner-offset-checkpoint`` moves to the cleaned offset, for a
   partition whose new segments are in place: its swap was still in flight (a
   ``.cleaned`` or ``.swap`` file of it was there) or each new ``.log`` is, by size and
   SHA-256, the one recorded at the commit. A broker started after a kill deletes
   ``.cleaned`` files, and ``.swap`` files at or above the smallest one, before it
   finishes the rest (Kafka's ``LogLoader``): so the new segments are either all in,
   or all gone and the range not cleaned.

Not committed at recovery: every ``.cleaned`` file of the topic's partitions is deleted
(what a broker does with them on startup); nothing else was touched. Local filesystems
only (the protocol needs atomic rename).
"""
from __future__ import annotations

import hashlib
import os

import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log.files.checkpoint import CLEANER_OFFSET_CHECKPOINT, advance_checkpoint
from spark_kafkalog.log.io import (
    FILE_DELETE_DELAY_MS,
    is_local,
    purge_deleted_files,
    rename_for_deletion,
    sysio,
)
from spark_kafkalog.log.model.swap import CLEANED, FINAL_ORDER, SEGMENT_SUFFIXES, SWAP
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.config import Fault, partition_dir, segment_file
from spark_kafkalog.log.write.files import listdir, topic_partitions
from spark_kafkalog.log.write.flush import fsync_dir
from spark_kafkalog.log.files.lock import CheckpointLock

__all__ = ["SEGMENT_SUFFIXES", "cleaned_path", "check_replace_fs", "begin_replace",
           "commit_replace", "discard_cleaned", "finish_replace", "post_replace"]

_LOCAL = pafs.LocalFileSystem()


def cleaned_path(directory: str, base: int, suffix: str) -> str:
    """Where a new segment file is written before it is swapped in."""
    return segment_file(directory, base, suffix + CLEANED)


def check_replace_fs(fs: pafs.FileSystem) -> None:
    if not is_local(fs):
        raise InvalidOptionError(f"replacing segments (compaction) needs a local filesystem "
                                 f"with atomic rename, not {fs.type_name!r}: copy the log "
                                 "dir to local disk, compact it, copy it back")


def _rename(src: str, dst: str) -> bool:
    try:
        sysio.replace(src, dst)
        return True
    except FileNotFoundError:
        return False


def begin_replace(fs: pafs.FileSystem, root: str, state: jr.JournalState,
                  write_id: str) -> None:
    """Record a replace in flight in ``state``'s journal (step 1); the caller holds the
    topic's lock and has recovered it."""
    state.pending = jr.PendingWrite(write_id=write_id, mode="replace",
                                    coordinator=state.topic, topics=[state.topic],
                                    partitions={}, begun_ms=jr.now_ms())
    jr.save(fs, root, state)


def commit_replace(fs: pafs.FileSystem, root: str, state: jr.JournalState,
                   groups: dict[int, list], cleaned_to: dict[int, int],
                   fingerprints: dict[int, dict] | None = None) -> None:
    """The commit point (step 3): ``groups[p] = [[new base, [old bases]], ...]``;
    ``fingerprints[p][new base] = [size, sha256 hex]`` of each new ``.log`` (a group
    without one is an unchanged segment linked in)."""
    p = state.pending
    p.replace = {int(q): [[int(g[0]), [int(b) for b in g[1]]] for g in gs]
                 for q, gs in groups.items() if gs}
    p.cleaned_to = {int(q): int(o) for q, o in cleaned_to.items()}
    p.replace_files = {int(q): {int(b): [int(f[0]), str(f[1])] for b, f in fp.items()}
                       for q, fp in (fingerprints or {}).items() if int(q) in p.replace}
    state.commit_pending()
    jr.save(fs, root, state)


def discard_cleaned(fs: pafs.FileSystem, root: str, topic: str) -> None:
    """Delete every ``.cleaned`` file in the topic's partition dirs (an uncommitted
    replace, or a broker's leftovers: Kafka deletes them on startup too)."""
    for q in topic_partitions(fs, root, topic):
        directory = partition_dir(root, topic, q)
        gone = False
        for name, is_dir, _, _ in listdir(fs, directory):
            if not is_dir and name.endswith(CLEANED):
                try:
                    sysio.unlink(f"{directory}/{name}")
                    gone = True
                except FileNotFoundError:
                    pass
        if gone:
            fsync_dir(directory)


def finish_replace(directory: str, groups: list, write_id: str, fault: Fault) -> None:
    """Step 4 for one partition dir; idempotent (see the module doc). The renames go in
    the order :func:`~spark_kafkalog.log.model.swap.swap_steps` states (a reader relies
    on it to recognise the states a killed swap leaves)."""
    ordered = [(int(g[0]), g[1]) for g in sorted(groups, key=lambda g: -int(g[0]))]
    for base, _old in ordered:
        if os.path.exists(cleaned_path(directory, base, ".log")):
            for suffix in SEGMENT_SUFFIXES:
                if _rename(cleaned_path(directory, base, suffix),
                           segment_file(directory, base, suffix + SWAP)):
                    fault("swap")
    fsync_dir(directory)
    old_files = [segment_file(directory, b, suffix) for base, old in ordered
                 if os.path.exists(segment_file(directory, base, ".log" + SWAP))
                 for b in old for suffix in SEGMENT_SUFFIXES]
    rename_for_deletion(_LOCAL, old_files, jr.write_token(write_id)[:8],
                        lambda _: fault("delete-old"))
    for base, _old in ordered:
        for suffix in FINAL_ORDER:
            if _rename(segment_file(directory, base, suffix + SWAP),
                       segment_file(directory, base, suffix)):
                fault("swapped")
    fsync_dir(directory)


def _in_flight(directory: str, groups: list) -> bool:
    """Whether a ``.log.cleaned`` or ``.log.swap`` of the swap is in ``directory``: no
    broker opened the dir since the swap began (a broker's startup leaves neither), so
    finishing it puts every new segment in."""
    return any(os.path.exists(segment_file(directory, int(g[0]), ".log" + suffix))
               for g in groups for suffix in (CLEANED, SWAP))


def _same_file(path: str, fingerprint: list) -> bool:
    """Whether ``path`` is the file of ``fingerprint`` (``[size, sha256 hex]``)."""
    size, digest = int(fingerprint[0]), str(fingerprint[1])
    try:
        if os.stat(path).st_size != size:
            return False
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(8 << 20), b""):
                h.update(chunk)
    except FileNotFoundError:
        return False
    return h.hexdigest() == digest


def _swapped_in(directory: str, groups: list, fingerprints: dict | None) -> bool:
    """Whether every new segment of ``groups`` is in place under its final name (a
    swap finished by this library or by a broker's startup); False when the journal
    has no fingerprints (written before they were recorded): the checkpoint then stays."""
    if not fingerprints:
        return False
    return all(_same_file(segment_file(directory, int(g[0]), ".log"), fingerprints[int(g[0])])
               for g in groups if int(g[0]) in fingerprints)


def post_replace(fs: pafs.FileSystem, root: str, topic: str, pending: jr.PendingWrite,
                 fault: Fault) -> None:
    """Everything after the commit point: each partition's swap, then the cleaner
    checkpoint (Kafka's ``cleaner-offset-checkpoint``: where the next cleaning's dirty
    section starts) of each partition whose new segments are in place (see the module
    doc): a range is never marked clean unless it was cleaned."""
    done = set()
    for q, groups in sorted(pending.replace.items()):
        directory = partition_dir(root, topic, q)
        ours = _in_flight(directory, groups)
        finish_replace(directory, groups, pending.write_id, fault)
        purge_deleted_files(fs, directory, FILE_DELETE_DELAY_MS)
        if ours or _swapped_in(directory, groups, pending.replace_files.get(q)):
            done.add(q)
    cleaned_to = {q: off for q, off in pending.cleaned_to.items() if q in done}
    if cleaned_to:
        with CheckpointLock(fs, root):
            advance_checkpoint(fs, f"{root.rstrip('/')}/{CLEANER_OFFSET_CHECKPOINT}", topic,
                               cleaned_to)
            fault("checkpoint:cleaner")
