"""The commit protocol: staged record batches land in a Kafka log dir whole or not at all.

:func:`commit_write`, once per write on the driver, with every task's staged files:

1. lock — the broker's ``.lock`` (shared: refuse a log dir a running broker holds, and
   keep a broker from starting mid-commit), then each topic's writer lock in name order;
2. recover — finish or undo whatever a dead writer left (:mod:`.recovery`);
3. no-op if the journal already holds the write id (a retried or replayed commit);
4. plan (:mod:`.plan`); 5. begin — each topic's journal records the plan and what undoing
   it needs; 6. append (:mod:`.apply`); 7. fsync every file written (concurrently, as it
   is closed) and, once each, every directory that gained a name — or, for a commit of
   many files, one ``syncfs`` of the log dir's filesystem (option ``syncMethod``): either
   way all of it is on disk before step 8 (a killed process needs neither; a power loss
   needs the data before the journal's commit point);
8. commit — one atomic journal write (the coordinator topic's, for a multi-topic write);
9. checkpoints move to the new log end (and the log start, for an overwrite: its
   ``leader-epoch-checkpoint`` is then truncated from it as retention does -- checked
   before step 5 -- and its old segments deleted); the pending record is cleared;
   staging files deleted.

On filesystems without append (object stores, or ``no_append=True``) each commit writes
new segment objects named by their base offset, with complete index files.

Modes: ``append``; ``errorifexists`` / ``ignore`` (decided under the lock); ``overwrite``
— the new data starts a new segment at the old log end (offsets keep increasing, as
after Kafka's ``deleteRecords``), the commit moves the log start offset there, and the
old segments are deleted. ``fault`` (tests) is called with the name of each step.

Offsets: ``assign`` (contiguous from each partition's log end) or ``preserve`` (each
staged batch keeps the base offset its batch table gives: offsets strictly increasing per
partition, gaps allowed, at or past the log end; a partition with no record yet starts
its log at the first offset written, and the log-start-offset checkpoint says so).
"""
from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Sequence

import pyarrow.fs as pafs

from spark_kafkalog.errors import CommitConflictError, InvalidOptionError, TopicExistsError
from spark_kafkalog.log.files.checkpoint import leader_epochs_at
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.apply import StagedReaders, apply_partition, prefetch_headers
from spark_kafkalog.log.write.config import (
    MODES,
    OFFSET_MODES,
    AppendConfig,
    Fault,
    TopicSpec,
    no_fault,
    norm_root,
)
from spark_kafkalog.log.io import is_local, sysio
from spark_kafkalog.log.write.files import topic_partitions
from spark_kafkalog.log.write.flush import choose_syncer
from spark_kafkalog.log.files.lock import BrokerDirGuard, TopicLock
from spark_kafkalog.log.write.plan import WritePlan, plan_write
from spark_kafkalog.log.write.recovery import delete_staging, post_commit, recover_locked
from spark_kafkalog.log.write.staging import StagedFile


@dataclass(frozen=True)
class CommitResult:
    """What a commit did: ``ranges[topic][partition] = (start, end)`` offsets appended
    (end exclusive); ``noop`` when the write id was already committed (or mode
    ``ignore`` found the topic)."""

    write_id: str
    ranges: dict
    noop: bool = False


def _specs(staged: Sequence[StagedFile], topics: Sequence[TopicSpec]) -> dict[str, TopicSpec]:
    """Every topic the write goes to (a staged topic not named gets the defaults)."""
    specs = {t.topic: t for t in topics}
    for sf in staged:
        for sec in sf.sections:
            if sec.topic not in specs:
                specs[sec.topic] = TopicSpec(sec.topic)
    for name in specs:
        jr.validate_topic(name)
    return specs


def _check_leader_epochs(fs: pafs.FileSystem, plan: WritePlan, names: list[str]) -> None:
    """Read the ``leader-epoch-checkpoint`` of each partition whose log start the write
    moves: a malformed one fails the write now, not its post-commit truncation."""
    for t in names:
        for part in plan.topics[t]:
            if part.log_start is not None:
                leader_epochs_at(fs, part.directory, part.log_start)


def _begin_apply_commit(fs: pafs.FileSystem, root: str, write_id: str, names: list[str],
                        states: dict, plan: WritePlan, staged: Sequence[StagedFile],
                        cfg: AppendConfig, fault: Fault) -> None:
    """Steps 5 to 8; an ordinary error before the commit point is undone now, under the
    locks the caller holds (a crash instead leaves the journal for the next open)."""
    coordinator = names[0]
    begun: list[str] = []
    try:
        for t in names:
            st = states[t]
            st.pending = plan.pending(write_id, t, coordinator)
            # before the save: a save that fails after its rename (the directory's
            # fsync) leaves the record in place, and it is undone below too
            begun.append(t)
            jr.save(fs, root, st)
        fault("begun")
        syncer = None
        if cfg.fsync and is_local(fs):
            # a segment's .log, .index and .timeindex, and a directory per partition at most
            files = sum(3 * len(part.segments) + part.create_dir
                        for parts in plan.topics.values() for part in parts)
            syncer = choose_syncer(cfg.sync_method, root, files)
        readers = StagedReaders(fs, staged)
        try:
            named: dict[str, None] = {}     # directories that gained a name, in order
            for t in names:
                for part in plan.topics[t]:
                    named.update(dict.fromkeys(apply_partition(
                        fs, part, staged, plan.tables, cfg, fault, syncer, readers)))
            if syncer is not None:
                # each directory once, after every name in it exists (a new topic's
                # partition directories share one fsync of the log dir)
                for directory in named:
                    syncer.fsync_dir(directory)
        finally:
            readers.close()
            if syncer is not None:
                syncer.wait()
        fault("synced")
        # the commit point: the coordinator's journal write
        states[coordinator].commit_pending()
        jr.save(fs, root, states[coordinator])
    except Exception as err:
        for t in begun:
            recover_locked(fs, root, t, no_fault)
        if not _committed(fs, root, names, write_id):
            raise
        # the commit point landed although its write reported an error (an object
        # store's answer lost after it stored the journal; a directory fsync after the
        # rename): the write is in, and recovery has finished it
        warnings.warn(f"write {write_id} committed, but its commit reported an error "
                      f"({err}); recovery finished it", RuntimeWarning, stacklevel=3)


def _finish(fs: pafs.FileSystem, root: str, write_id: str, names: list[str], states: dict,
            staged_paths: list[str], fault: Fault) -> None:
    """Past the commit point: what fails here the next open redoes."""
    for t in names[1:]:
        states[t].commit_pending()
        jr.save(fs, root, states[t])
        fault(f"committed:{t}")
    for t in names:
        post_commit(fs, root, t, states[t].pending, fault)
    delete_staging(fs, root, write_id, staged_paths)
    fault("staging-deleted")
    for t in names:
        states[t].pending = None
        jr.save(fs, root, states[t])
        fault(f"done:{t}")


def commit_write(fs: pafs.FileSystem, root: str, write_id: str,
                 staged: Sequence[StagedFile | None], topics: Sequence[TopicSpec], *,
                 mode: str = "append", config: AppendConfig | None = None,
                 fault: Fault | None = None, offsets: str = "assign") -> CommitResult:
    """Commit a write: every staged batch lands in the log with contiguous offsets (or,
    with ``offsets="preserve"``, at the offsets it was staged with), or none does. Idempotent per ``write_id``. ``None`` entries in ``staged`` (failed tasks)
    are ignored. Staging files are deleted afterwards, whatever the outcome.

    Raises :class:`CommitConflictError` (broker holds the dir, lock timeout — both
    :class:`LockError` —, partition count changed), :class:`TopicExistsError` (the
    topic exists in ``errorifexists`` mode), :class:`BadRowError` (a staged partition outside the topic; preserved
    offsets that do not increase or fall below the log end, naming topic, partition and
    offsets),
    :class:`InvalidOptionError` (unknown mode, bad topic name), :class:`LogLayoutError`
    / :class:`CorruptRecordError` for an unusable log or staging file."""
    if mode not in MODES:
        raise InvalidOptionError(f"save mode {mode!r} is not one of {', '.join(MODES)}")
    if offsets not in OFFSET_MODES:
        raise InvalidOptionError(f"offsets {offsets!r} is not one of "
                                 f"{', '.join(OFFSET_MODES)}")
    cfg = config or AppendConfig()
    fault = fault or no_fault
    root = norm_root(root)
    staged = [s for s in staged if s is not None]
    specs = _specs(staged, topics)
    names = sorted(specs)
    staged_paths = [sf.path for sf in staged]
    no_append = (not is_local(fs)) if cfg.no_append is None else bool(cfg.no_append)
    if not names:
        delete_staging(fs, root, write_id, staged_paths)
        return CommitResult(write_id, {}, noop=True)
    if is_local(fs):
        sysio.makedirs(root)
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(BrokerDirGuard(fs, root))
            locks = [stack.enter_context(TopicLock(fs, root, t, write_id=write_id,
                                                   timeout=cfg.lock_timeout))
                     for t in names]
            fault("locked")
            # a pending record of this very write id (an attempt that failed before
            # undoing it) is undone without deleting this attempt's staging files
            mine = set(staged_paths) | {sec.path for sf in staged for sec in sf.sections
                                        if sec.path}
            for t in names:
                recover_locked(fs, root, t, fault, keep=mine)
            states = {t: jr.load(fs, root, t) for t in names}
            if states[names[0]].is_committed(write_id):
                return CommitResult(write_id, {}, noop=True)
            existing = {t: topic_partitions(fs, root, t) for t in names}
            if mode == "errorifexists":
                taken = [t for t in names if existing[t]]
                if taken:
                    raise TopicExistsError(f"topic {taken[0]!r} already exists in {root} "
                                           "(saveMode errorifexists)")
            if mode == "ignore" and any(existing[t] for t in names):
                return CommitResult(write_id, {}, noop=True)
            plan = plan_write(fs, root, staged, specs, existing, cfg, no_append,
                              overwrite=(mode == "overwrite"),
                              preserve=(offsets == "preserve"))
            try:
                _check_leader_epochs(fs, plan, names)
                if is_local(fs):
                    prefetch_headers(plan)
                for lk in locks:
                    lk.refresh()
                _begin_apply_commit(fs, root, write_id, names, states, plan, staged, cfg,
                                    fault)
            finally:
                plan.close_files()      # the active segments' files the append did not take
            fault(f"committed:{names[0]}")
            try:
                _finish(fs, root, write_id, names, states, staged_paths, fault)
            except Exception as err:     # the write is committed; report, don't fail it
                warnings.warn(f"write {write_id} committed, but finishing it failed ({err}); "
                              "the next writer or recover() completes it",
                              RuntimeWarning, stacklevel=2)
            return CommitResult(write_id, plan.ranges())
    finally:
        # this write's staging files, including those of task attempts Spark discarded
        # (past the commit point a failure here is a warning: the write is in, and
        # raising would have the caller write it again under a new id)
        try:
            delete_staging(fs, root, write_id, staged_paths)
        except Exception as err:
            if not _committed(fs, root, names, write_id):
                raise
            warnings.warn(f"write {write_id} committed, but deleting its staging files "
                          f"failed ({err}); a later write removes them", RuntimeWarning,
                          stacklevel=2)


def _committed(fs: pafs.FileSystem, root: str, names: list[str], write_id: str) -> bool:
    try:
        return bool(names) and jr.load(fs, root, names[0]).is_committed(write_id)
    except Exception:       # noqa: BLE001  (cannot tell: report the error)
        return False


def abort_write(fs: pafs.FileSystem, root: str, write_id: str | None,
                staged: Sequence[StagedFile | None] = (), run: str | None = None) -> None:
    """Abandon a write that never reached :func:`commit_write`: delete its staging files
    (those listed and, with ``write_id``, every other attempt's). The log is untouched.

    ``run`` (Spark's writers: one per planned job): tasks of the write may still be
    running (Spark reports a failed job, and has its driver abort, while it kills the
    other tasks), and one may create or finish a staging file after the sweep. So the
    abort first leaves the marker :func:`~spark_kafkalog.log.files.journal.aborted_marker`
    of ``(write_id, run)``; a task staging under the same ``run`` checks for it after it
    creates each file and once its staging is complete, and deletes its own files when it
    is there. Either the sweep lists a task's file or the task sees the marker."""
    root = norm_root(root)
    marker = jr.aborted_marker(root, write_id, run) if run and write_id else None
    if marker is not None:
        _leave_marker(fs, root, marker)
    delete_staging(fs, root, write_id, [s.path for s in staged if s is not None],
                   keep=(marker,) if marker else ())


def _leave_marker(fs: pafs.FileSystem, root: str, marker: str) -> None:
    """An empty file at ``marker``. Where the log dir does not exist no task has staged
    there (a task's first file creates it): nothing to mark, and nothing is created.
    Failing to write it leaves the sweep as it always was (a task finishing after it
    leaves its file to the TTL sweep): a warning, the abort itself goes on."""
    try:
        if is_local(fs):
            if os.path.isdir(root):
                os.close(sysio.open_fd(marker, os.O_WRONLY | os.O_CREAT))
        else:
            with sysio.remote("write", marker), fs.open_output_stream(marker):
                pass
    except OSError as err:
        warnings.warn(f"abandoning a write: cannot leave its marker {marker} ({err}); a "
                      "task still staging may leave its staging file", RuntimeWarning,
                      stacklevel=3)
