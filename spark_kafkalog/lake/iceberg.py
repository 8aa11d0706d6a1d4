"""Exactly-once, incremental export of a log dir's topics into an Iceberg table, with no
broker and no checkpoint of our own: the table's snapshots hold the offsets.

A run: read the next offsets the table records (:func:`~.iceberg_table.committed_offsets`),
take each partition's log start and upper bound at one snapshot of the log, read
``[next, upper bound)`` in windows of at most ``window_records`` offsets
(``log.read_partition`` over that snapshot's segments; ``log.read_table`` with the remote
tier) — memory: one window of rows — write each window's Parquet data files through
pyiceberg, and commit ALL of them in one append snapshot whose summary records the
ranges (``kafkalog.offsets``) and the new next offsets (``kafkalog.next-offsets``).

Exactly once: rows become visible only with the catalog's commit, which is atomic and
optimistic (the commit names the snapshot the run started from). A run killed before it
leaves unreferenced data files (orphans no reader sees) and the table unchanged, so the
re-run exports the same range again; a run killed after it is done. When the commit
finds another commit on top: if that one touched none of our topic-partitions the
commit is retried on it; if it already holds our ranges (a concurrent run of the same
export) our files are deleted and the result says so; if it holds part of them, our
files are deleted and the run starts over from the table's new offsets (a
CommitConflictError after :data:`RUN_ATTEMPTS` such runs).

The ``fault`` hook (tests) is called with a phase name — ``planned``, ``file-written``
(after each data file), ``before-commit``, ``after-commit`` — so a test can SIGKILL the
run at each.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from spark_kafkalog.errors import CommitConflictError, DataLossError, OffsetOutOfRangeError
from spark_kafkalog.lake.iceberg_table import (
    NEXT_OFFSETS_KEY,
    OFFSETS_KEY,
    RUN_ID_KEY,
    Committed,
    RawRecords,
    TableError,
    committed_offsets,
    offsets_json,
)
from spark_kafkalog.format import record_schema
from spark_kafkalog.log import LogDirs, read_partition, read_table, topic_states
from spark_kafkalog.log.read.loss import report_losses
from spark_kafkalog.log.read.reader import LOSS_HINT, tier_plans
from spark_kafkalog.log.read.remote import RemoteStorage
from spark_kafkalog.log.read.tiered import over_tiers

__all__ = ["ExportResult", "PartitionRange", "export_topics", "plan_export",
           "DEFAULT_WINDOW_RECORDS", "COMMIT_ATTEMPTS"]

#: offsets per window read from the log and written as one batch of data files
DEFAULT_WINDOW_RECORDS = 500_000
#: commits retried on top of a concurrent commit that touched other topic-partitions
COMMIT_ATTEMPTS = 5
#: whole runs (plan, write, commit) retried after a concurrent commit took part of ours
RUN_ATTEMPTS = 3
EARLIEST, LATEST = -2, -1


@dataclass(frozen=True)
class PartitionRange:
    """``[start, end)`` of ``topic``-``partition`` to export; ``lost`` offsets between the
    table's end and the log start, skipped (``fail_on_data_loss=False``)."""
    topic: str
    partition: int
    start: int
    end: int
    lost: tuple[int, int] | None = None
    #: the local tier's (PartitionDir, decision limit) at the plan's snapshot: every
    #: window reads it, not a snapshot of its own (None: read through read_table)
    source: object = field(default=None, compare=False, repr=False)


@dataclass
class ExportResult:
    """What a run did. ``status``: ``committed``, ``nothing-new`` (no offsets past the
    table's), ``already-exported`` (a concurrent run committed the same ranges first;
    this run's files were deleted)."""
    table: str
    run_id: str
    status: str
    ranges: list[PartitionRange]
    rows: int = 0
    files: int = 0
    bytes: int = 0
    snapshot_id: int | None = None
    seconds: float = 0.0
    attempts: int = 0
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        lost = [{"topic": r.topic, "partition": r.partition, "from": r.lost[0],
                 "to": r.lost[1]} for r in self.ranges if r.lost]
        return {"table": self.table, "run_id": self.run_id, "status": self.status,
                "rows": self.rows, "files": self.files, "bytes": self.bytes,
                "snapshot_id": self.snapshot_id, "seconds": round(self.seconds, 3),
                "topic_partitions": len(self.ranges),
                "offsets": _ranges_doc(self.ranges),
                "lost": lost, "notes": self.notes}


def _ranges_doc(ranges: Sequence[PartitionRange]) -> dict:
    out: dict = {}
    for r in ranges:
        out.setdefault(r.topic, {})[r.partition] = [r.start, r.end]
    return out


def plan_export(logdirs: LogDirs, topics: Sequence[str], committed: Committed, *,
                starting_offsets: Mapping[str, Mapping[int, int]] | str | None = None,
                isolation_level: str = "read_committed", fail_on_data_loss: bool = True,
                table_name: str = "the table", remote_storage: RemoteStorage | None = None
                ) -> list[PartitionRange]:
    """The ranges a run exports: per partition of each topic (all at one snapshot of the
    topic), from the table's next offset — or, for a partition the table has none of,
    ``starting_offsets`` ({topic: {partition: offset}}, -2 earliest, -1 latest, or the
    string ``earliest`` (the default) or ``latest`` for every partition) — to the upper bound (last
    stable offset under read_committed, else the high watermark).

    A table with snapshots but none of ours (``committed.foreign``) is refused unless
    ``starting_offsets`` says where to start. A next offset below the log start is
    DataLossError (``fail_on_data_loss``) or skipped to it; one past the log end means
    the table came from another log: OffsetOutOfRangeError. With ``remote_storage``
    (the remote tier of tiered storage) the log start is that of both tiers."""
    if committed.foreign and starting_offsets is None:
        raise TableError(f"{table_name} has snapshots but no {NEXT_OFFSETS_KEY} in any of "
                         "them (written by another tool?): give --starting-offsets to "
                         "say where the export starts")
    ranges = []
    for topic in topics:
        _, parts, states = topic_states(logdirs, topic, isolation_level=isolation_level,
                                        timestamps=False)
        parts_by = {p.partition: p for p in parts}
        if remote_storage is not None:
            plans = tier_plans(logdirs, remote_storage, topic, parts, states)
            states = {q: over_tiers(st, plans.get(q)) for q, st in states.items()}
        have = committed.next_offsets.get(topic, {})
        default = EARLIEST
        if isinstance(starting_offsets, str):       # "earliest" or "latest" for all
            default = LATEST if starting_offsets == "latest" else EARLIEST
            given = {}
        else:
            given = (starting_offsets or {}).get(topic, {})
        for q, state in sorted(states.items()):
            lo, hi = state.log_start_offset, state.upper_bound
            where = f"{topic}-{q}"
            start = have.get(q)
            if start is None:
                start = given.get(q, default)
                start = lo if start == EARLIEST else hi if start == LATEST else start
            lost = None
            if start < lo:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{where}: {table_name} ends at offset {start} but the log starts at "
                        f"{lo}: offsets {start}..{lo - 1} were deleted (retention?) before "
                        "they were exported (--fail-on-data-loss false skips them)",
                        offset=start)
                lost, start = (start, lo), lo
            if start > state.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{where}: {table_name} holds offsets up to {start} but the log ends at "
                    f"{state.log_end_offset}: the table was exported from another log",
                    offset=start)
            end = max(start, hi)
            # losses the partition's own files promise (checkpoints, journal) in the range
            report_losses([x for x in state.losses if x.overlaps(start, end)],
                          fail=fail_on_data_loss, hint=LOSS_HINT)
            source = None if remote_storage is not None else (parts_by[q], state.high_watermark)
            # a table ahead of the upper bound (exported read_uncommitted) waits for it
            ranges.append(PartitionRange(topic, q, start, end, lost, source))
    return ranges


def export_topics(path, topics: Sequence[str], catalog, table, identifier: str, *,
                  starting_offsets: Mapping[str, Mapping[int, int]] | str | None = None,
                  isolation_level: str = "read_committed", fail_on_data_loss: bool = True,
                  window_records: int = DEFAULT_WINDOW_RECORDS, shape: RawRecords | None = None,
                  filesystem_options: Mapping | None = None,
                  remote_storage: RemoteStorage | str | None = None,
                  remote_layout: str | None = None,
                  progress: Callable[[str], None] | None = None,
                  fault: Callable[[str], None] | None = None) -> ExportResult:
    """Export what ``topics`` of log dir(s) ``path`` hold past ``table``'s offsets into
    ``table`` (loaded from ``catalog`` as ``identifier``), in one commit. See the module
    docstring for the guarantees; errors: TableError, DataLossError, CommitConflictError
    (a concurrent commit overlapped ours in part), the reader's own. ``remote_storage``
    (a root URI or a RemoteStorage; ``remote_layout``): read the remote tier of tiered
    storage too, as ``log.read_table`` does."""
    t0 = time.perf_counter()
    shape = shape if shape is not None else RawRecords()
    say = progress or (lambda _line: None)
    hit = fault or (lambda _phase: None)
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    storage = remote_storage if remote_storage is None or \
        isinstance(remote_storage, RemoteStorage) else \
        RemoteStorage(remote_storage, remote_layout, filesystem_options)
    for run in range(1, RUN_ATTEMPTS + 1):
        base = committed_offsets(table)
        ranges = plan_export(logdirs, topics, base, starting_offsets=starting_offsets,
                             isolation_level=isolation_level,
                             fail_on_data_loss=fail_on_data_loss, table_name=identifier,
                             remote_storage=storage)
        run_id = uuid.uuid4().hex
        result = ExportResult(identifier, run_id, "nothing-new", ranges)
        hit("planned")
        todo = [r for r in ranges if r.end > r.start]
        if not todo:
            break
        say(f"exporting {sum(r.end - r.start for r in todo):,} offsets of "
            f"{len(todo)} topic-partitions into {identifier}")
        files = _write_files(logdirs, todo, table, shape, run_id, result,
                             isolation_level=isolation_level,
                             fail_on_data_loss=fail_on_data_loss,
                             window_records=window_records, storage=storage, say=say,
                             hit=hit)
        try:
            _commit(catalog, table, identifier, base, todo, files, result, hit=hit,
                    say=say)
            break
        except _Overlap as lost:
            if run == RUN_ATTEMPTS:
                raise CommitConflictError(str(lost)) from lost.__cause__
            # part of our ranges is in the table now: start over from what it holds
            say(f"{lost}; exporting again from the table's new offsets")
            table = catalog.load_table(identifier)
    result.seconds = time.perf_counter() - t0
    return result


class _Overlap(Exception):
    """A concurrent commit holds part of this run's ranges; its files are deleted."""


def _write_files(logdirs, todo, table, shape, run_id, result, *, isolation_level,
                 fail_on_data_loss, window_records, storage, say, hit) -> list:
    """Read ``todo`` in windows and write each as data files; the DataFiles, in order."""
    import itertools

    import pyarrow as pa
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    # pyiceberg's own writer (partitioning by the table's spec, file stats, field ids);
    # a private function, the one that Table.append calls: what its transaction would
    # write, without committing per window
    write_uuid, counter = uuid.UUID(run_id), itertools.count(0)
    files: list = []
    pending: list[pa.Table] = []
    pending_rows = 0

    def flush():
        nonlocal pending, pending_rows
        if not pending:
            return
        window = shape.to_arrow(pa.concat_tables(pending))
        pending, pending_rows = [], 0
        for data_file in _dataframe_to_data_files(table.metadata, window, table.io,
                                                  write_uuid=write_uuid, counter=counter):
            files.append(data_file)
            result.files += 1
            result.bytes += data_file.file_size_in_bytes
            hit("file-written")
        result.rows += window.num_rows
        say(f"{result.rows:,} rows in {result.files} files")

    step = max(1, int(window_records))
    for r in todo:
        for lo in range(r.start, r.end, step):
            hi = min(lo + step, r.end)
            if r.source is not None:        # the local tier, at the plan's snapshot
                pdir, decision_limit = r.source
                part = pa.Table.from_batches(list(read_partition(
                    logdirs, pdir, start_offset=lo, end_offset=hi,
                    isolation_level=isolation_level, include_headers=True,
                    decision_limit=decision_limit, fail_on_data_loss=fail_on_data_loss)),
                    schema=record_schema(True))
            else:
                part = read_table(logdirs, r.topic, partitions=[r.partition],
                                  starting_offsets={r.partition: lo},
                                  ending_offsets={r.partition: hi},
                                  isolation_level=isolation_level, include_headers=True,
                                  fail_on_data_loss=fail_on_data_loss,
                                  remote_storage=storage)
            if part.num_rows:
                pending.append(part)
                pending_rows += part.num_rows
            if pending_rows >= step:
                flush()
    flush()
    return files


def _commit(catalog, table, identifier, base: Committed, todo, files, result, *, hit, say,
            extra: Mapping[str, str] | None = None):
    """One append snapshot of ``files`` with the ranges (and ``extra``) in its summary; on
    a concurrent commit, retried or given up as the module docstring says. The streaming
    sink (``spark.iceberg_sink``) commits through here too."""
    from pyiceberg.exceptions import CommitFailedException

    ours = {(r.topic, r.partition): r for r in todo}
    before = base
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        result.attempts = attempt
        next_offsets = {t: dict(qs) for t, qs in before.next_offsets.items()}
        for r in todo:
            next_offsets.setdefault(r.topic, {})[r.partition] = r.end
        props = {OFFSETS_KEY: offsets_json(_ranges_doc(todo)),
                 NEXT_OFFSETS_KEY: offsets_json(next_offsets), RUN_ID_KEY: result.run_id,
                 **(extra or {})}
        target = _without_commit_retries(table)
        tx = target.transaction()
        with tx.update_snapshot(snapshot_properties=props).fast_append() as append:
            for data_file in files:
                append.append_data_file(data_file)
        hit("before-commit")
        try:
            tx.commit_transaction()
        except CommitFailedException as err:
            table = catalog.load_table(identifier)
            now = committed_offsets(table)
            moved = [k for k in ours if now.next_offsets.get(k[0], {}).get(k[1])
                     != before.next_offsets.get(k[0], {}).get(k[1])]
            if not moved:           # someone else's topics, or another tool's snapshot
                say(f"commit attempt {attempt} lost a race ({err}); retrying on top")
                before = now
                continue
            _delete_files(table, files)
            done = all(now.next_offsets.get(t, {}).get(q, -1) >= ours[(t, q)].end
                       for t, q in ours)
            if done:
                result.status = "already-exported"
                result.snapshot_id = now.snapshot_id
                result.notes.append(
                    f"a concurrent run committed these offsets first (snapshot "
                    f"{now.snapshot_id}); this run's {len(files)} data files were deleted")
                return
            t, q = moved[0]
            raise _Overlap(
                f"{identifier}: a concurrent export committed part of {t}-{q} "
                f"(next offset now {now.next_offsets.get(t, {}).get(q)}, this run had "
                f"{ours[(t, q)].start}..{ours[(t, q)].end}); this run's files were "
                "deleted") from err
        hit("after-commit")
        result.status = "committed"
        result.snapshot_id = target.metadata.current_snapshot_id
        return
    _delete_files(table, files)
    raise CommitConflictError(f"{identifier}: {COMMIT_ATTEMPTS} commits in a row lost to "
                              "concurrent commits; this run's files were deleted: re-run")


def _without_commit_retries(table):
    """``table`` as a Table whose commits pyiceberg does not retry on its own. Its retry
    re-applies the append on top of whatever committed meanwhile — for us, the same
    offsets a concurrent run may just have committed, exported twice — so a conflict must
    come back here to be decided (:func:`_commit`). The property is set on this in-memory
    copy only: a commit sends the new snapshot, never the table's properties."""
    from pyiceberg.table import Table, TableProperties

    props = {**table.metadata.properties, TableProperties.COMMIT_NUM_RETRIES: "0"}
    metadata = table.metadata.model_copy(update={"properties": props})
    return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)


def _delete_files(table, files) -> None:
    for data_file in files:
        try:
            table.io.delete(data_file.file_path)
        except FileNotFoundError:
            pass
