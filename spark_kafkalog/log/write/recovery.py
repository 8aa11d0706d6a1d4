"""Finishing or undoing what a writer left: on the next open (and before every commit) a
``begun`` write is rolled back (partitions truncated to their journaled sizes, index
entries past them removed, created segments deleted) unless its coordinator committed
it, in which case it is rolled forward; a ``committed`` one has its post-commit work
(checkpoints, an overwrite's old segments, staging files) redone. All of it idempotent."""
from __future__ import annotations

import os
import time
from typing import Collection, Iterable

import pyarrow.fs as pafs

from spark_kafkalog.errors import CommitConflictError, LogLayoutError
from spark_kafkalog.log.files.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    advance_checkpoint,
    read_checkpoint,
    truncate_leader_epochs,
)
from spark_kafkalog.log.io import file_size, sysio
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.config import (
    ABORTED_MARKER_TTL_S,
    STAGING_TTL_S,
    Fault,
    no_fault,
    norm_root,
    partition_dir,
    segment_file,
)
from spark_kafkalog.log.io import delete_file, is_local
from spark_kafkalog.log.write.files import (
    listdir,
    remove_empty_dir,
    segments,
    truncate,
    write_new,
)
from spark_kafkalog.log.write.flush import fsync_dir
from spark_kafkalog.log.write.replace import discard_cleaned, post_replace
from spark_kafkalog.log.files.lock import (
    DEFAULT_LOCK_TIMEOUT_S,
    BrokerDirGuard,
    CheckpointLock,
    TopicLock,
)


def delete_segment_files(fs: pafs.FileSystem, directory: str, base: int) -> None:
    # .log last: while it exists the segment is visible, so remove its indexes first
    # and the log itself at the end (a crash leaves an indexless segment, which Kafka and
    # our reader both handle, never an index without its log).
    for suffix in (".index", ".timeindex", ".txnindex", ".log"):
        delete_file(fs, segment_file(directory, base, suffix), missing_ok=True)


def _restore_active(fs: pafs.FileSystem, directory: str, undo: jr.PartitionUndo) -> None:
    """Put the segment a pending write appended to back as the journal says it was."""
    base = undo.active_base
    log_path = segment_file(directory, base)
    size = file_size(fs, log_path)
    if size is None:
        raise LogLayoutError("the segment a pending write appended to is gone; cannot "
                             "roll the write back", path=log_path)
    if size < undo.log_size:
        raise LogLayoutError(f"segment is shorter ({size} bytes) than before the pending "
                             f"write ({undo.log_size}); cannot roll back", path=log_path)
    if size > undo.log_size + undo.planned_bytes:
        raise CommitConflictError(
            "segment holds more bytes than the pending write could have appended: "
            "something else (a broker?) wrote to it; refusing to truncate", path=log_path,
            position=undo.log_size)
    idx_path = segment_file(directory, base, ".index")
    tidx_path = segment_file(directory, base, ".timeindex")
    if undo.log_size == 0:
        for path in (log_path, idx_path, tidx_path):
            if not is_local(fs):
                write_new(fs, path, b"", fsync=False)
            elif file_size(fs, path):
                truncate(path, 0)
    elif is_local(fs) and not undo.no_append:
        if size > undo.log_size:
            truncate(log_path, undo.log_size)
        if (file_size(fs, idx_path) or 0) > undo.index_size:
            truncate(idx_path, undo.index_size)
        tail = undo.timeindex_tail
        fd = sysio.open_fd(tidx_path, os.O_WRONLY)
        try:
            sysio.ftruncate(fd, undo.timeindex_size - len(tail), tidx_path)
            if tail:
                sysio.write_fully(fd, tail, undo.timeindex_size - len(tail), tidx_path)
            sysio.fsync(fd, tidx_path)
        finally:
            os.close(fd)


def _rollback_partition(fs: pafs.FileSystem, root: str, topic: str, partition: int,
                        undo: jr.PartitionUndo) -> None:
    directory = partition_dir(root, topic, partition)
    for s in segments(fs, directory):
        if undo.active_base is None or s.base_offset > undo.active_base:
            delete_segment_files(fs, directory, s.base_offset)
    if undo.active_base is not None:
        _restore_active(fs, directory, undo)
    if undo.created_dir:
        remove_empty_dir(fs, directory)
    if is_local(fs) and os.path.isdir(directory):
        fsync_dir(directory)


def _update_checkpoints(fs: pafs.FileSystem, root: str, topic: str,
                        pending: jr.PendingWrite, fault: Fault) -> None:
    ends = {p: u.end for p, u in pending.partitions.items()}
    updates = [(RECOVERY_POINT_CHECKPOINT, ends), (REPLICATION_OFFSET_CHECKPOINT, ends)]
    if pending.log_start:
        updates.append((LOG_START_OFFSET_CHECKPOINT, pending.log_start))
    with CheckpointLock(fs, root):
        for name, values in updates:
            advance_checkpoint(fs, f"{root.rstrip('/')}/{name}", topic, values)
            fault(f"checkpoint:{name}")


def post_commit(fs: pafs.FileSystem, root: str, topic: str, pending: jr.PendingWrite,
                fault: Fault) -> None:
    """Idempotent work after the commit point: checkpoints; where the log start moved
    (an overwrite; a preserving write's first offset in an empty partition), once the
    checkpoint has: the partition's ``leader-epoch-checkpoint`` truncated from the log
    start the checkpoint holds, as retention does (the commit checked the file), then
    the segments below it deleted (an overwrite's old ones; an empty one below the
    first offset)."""
    _update_checkpoints(fs, root, topic, pending, fault)
    if pending.log_start:
        starts = read_checkpoint(fs, f"{root.rstrip('/')}/{LOG_START_OFFSET_CHECKPOINT}")
        for p, start in pending.log_start.items():
            directory = partition_dir(root, topic, p)
            if truncate_leader_epochs(fs, directory, starts.get((topic, p), start)):
                fault(f"epochs:{p}")
            for s in segments(fs, directory):
                if s.base_offset < start:
                    delete_segment_files(fs, directory, s.base_offset)
                    fault("delete-old")
            if is_local(fs):
                fsync_dir(directory)


def delete_staging(fs: pafs.FileSystem, root: str, write_id: str | None,
                   paths: Iterable[str] = (), keep: Collection[str] = ()) -> None:
    """Delete ``paths``, every staging file of ``write_id`` (other task attempts') and
    any staging file older than :data:`~.config.STAGING_TTL_S` (a driver that died),
    except those in ``keep`` (a retry's own files, staged under the same write id); and
    abandoned writes' markers older than :data:`~.config.ABORTED_MARKER_TTL_S`."""
    for path in paths:
        delete_file(fs, path, missing_ok=True)
    now = time.time()
    token = jr.STAGING_PREFIX + jr.write_token(write_id) + "." if write_id else None
    # one listing for both kinds of name (".kafkalog-staging." and ".kafkalog-aborted.")
    for name, is_dir, _, mtime in listdir(fs, root, ".kafkalog-"):
        if is_dir:
            continue
        path = f"{root.rstrip('/')}/{name}"
        if name.startswith(jr.ABORTED_PREFIX):
            if now - mtime > ABORTED_MARKER_TTL_S and path not in keep:
                delete_file(fs, path, missing_ok=True)
            continue
        if not name.startswith(jr.STAGING_PREFIX):
            continue
        if ((token and name.startswith(token)) or now - mtime > STAGING_TTL_S) \
                and path not in keep:
            delete_file(fs, path, missing_ok=True)


def recover_locked(fs: pafs.FileSystem, root: str, topic: str, fault: Fault,
                   keep: Collection[str] = ()) -> dict:
    """:func:`recover_topic` for a caller that holds the topic's lock. ``keep``: staging
    files not to delete (a commit retrying the pending write, under its write id)."""
    state = jr.load(fs, root, topic)
    pending = state.pending
    if pending is None:
        return {"rolled_back": None, "rolled_forward": None}
    write_id = pending.write_id
    decided = jr.pending_decided(fs, root, state)
    if pending.mode == "replace":
        return _recover_replace(fs, root, topic, state, decided, fault)
    if not decided:
        for p, undo in sorted(pending.partitions.items()):
            _rollback_partition(fs, root, topic, p, undo)
            fault("rollback")
        # staging goes before the journal forgets the write: a crash in between must
        # not leave files nobody knows about
        delete_staging(fs, root, write_id, keep=keep)
        fault("rolled-back")
        state.pending = None
        state.record_rollback(write_id)
        jr.save(fs, root, state)
        return {"rolled_back": write_id, "rolled_forward": None}
    if not pending.committed:
        state.commit_pending()
        jr.save(fs, root, state)
    post_commit(fs, root, topic, pending, fault)
    delete_staging(fs, root, write_id, keep=keep)
    state.pending = None
    jr.save(fs, root, state)
    return {"rolled_back": None, "rolled_forward": write_id}


def _recover_replace(fs: pafs.FileSystem, root: str, topic: str, state: jr.JournalState,
                     decided: bool, fault: Fault) -> dict:
    """A compaction's replace (:mod:`.replace`): undone by deleting its ``.cleaned``
    files, or finished (swaps, deletions, cleaner checkpoint)."""
    pending = state.pending
    if not decided:
        discard_cleaned(fs, root, topic)
        fault("rolled-back")
        state.pending = None
        state.record_rollback(pending.write_id)
        jr.save(fs, root, state)
        return {"rolled_back": pending.write_id, "rolled_forward": None}
    post_replace(fs, root, topic, pending, fault)
    state.pending = None
    jr.save(fs, root, state)
    return {"rolled_back": None, "rolled_forward": pending.write_id}


def recover_topic(fs: pafs.FileSystem, root: str, topic: str, *,
                  lock_timeout: float | None = None, fault: Fault | None = None) -> dict:
    """Bring ``topic`` in log dir ``root`` to a committed state: take the topic's writer
    lock (waiting for a live writer to finish; a dead one's lock is free), roll back a
    write that did not commit, roll forward one that did, delete its staging files.
    Returns ``{"rolled_back": write_id | None, "rolled_forward": write_id | None}``.
    Raises :class:`~spark_kafkalog.errors.LockError` when a running broker holds the
    log dir."""
    jr.validate_topic(topic)
    root = norm_root(root)
    if file_size(fs, jr.journal_path(root, topic)) is None:
        return {"rolled_back": None, "rolled_forward": None}
    with BrokerDirGuard(fs, root), TopicLock(
            fs, root, topic, timeout=DEFAULT_LOCK_TIMEOUT_S if lock_timeout is None
            else lock_timeout):
        return recover_locked(fs, root, topic, fault or no_fault)


def recover(fs: pafs.FileSystem, root: str, topic: str, *, lock_timeout: float | None = None
            ) -> dict:
    """See :func:`recover_topic` (the name the journal's users know)."""
    return recover_topic(fs, root, topic, lock_timeout=lock_timeout)
