"""Exactly-once, incremental export of a log dir's topics into an Iceberg table, with no
broker and no checkpoint of our own: the table's snapshots hold the offsets.

A run: read the next offsets the table records (:func:`~.iceberg_table.committed_offsets`),
take each partition's log start and upper bound at one snapshot of the log, read
``[next, upper bound)`` in windows of at most ``window_records`` offsets
(``log.read_partition`` over that snapshot's segments; ``log.read_table`` with the remote
tier) — memory: one window of rows — write each window's Parquet data files through
pyiceberg, and commit ALL of them in one append snapshot whose summary records the
ranges (``kafkalog.offsets``) and the new next offsets (``kafkalog.next-offsets``). An
upsert table (``iceberg_upsert``) folds the windows to the last record per key first,
rewrites the files holding those keys, and commits one overwrite snapshot instead.

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
    check_mode,
    committed_offsets,
    data_files,
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
    #: with a dead letter: {"path", "records"} of this run's
    dead_letter: dict | None = None
    mode: str = "append"
    #: upsert runs: records read, keys deleted by tombstones, records without a key
    #: (skipped), rows of earlier runs removed, data files rewritten without them
    records: int = 0
    tombstones: int = 0
    null_keys: int = 0
    rows_removed: int = 0
    files_rewritten: int = 0

    def summary(self) -> dict:
        lost = [{"topic": r.topic, "partition": r.partition, "from": r.lost[0],
                 "to": r.lost[1]} for r in self.ranges if r.lost]
        out = {"table": self.table, "run_id": self.run_id, "status": self.status,
               "mode": self.mode, "rows": self.rows, "files": self.files,
               "bytes": self.bytes, "snapshot_id": self.snapshot_id,
               "seconds": round(self.seconds, 3), "topic_partitions": len(self.ranges),
               "offsets": _ranges_doc(self.ranges), "lost": lost, "notes": self.notes}
        if self.mode == "upsert":
            out.update(records=self.records, tombstones=self.tombstones,
                       null_keys=self.null_keys, rows_removed=self.rows_removed,
                       files_rewritten=self.files_rewritten)
        if self.dead_letter is not None:
            out["dead_letter"] = self.dead_letter
        return out


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
                  fault: Callable[[str], None] | None = None,
                  dead_letter: str | None = None) -> ExportResult:
    """Export what ``topics`` of log dir(s) ``path`` hold past ``table``'s offsets into
    ``table`` (loaded from ``catalog`` as ``identifier``), in one commit. See the module
    docstring for the guarantees; errors: TableError, DataLossError, CommitConflictError
    (a concurrent commit overlapped ours in part), the reader's own. ``remote_storage``
    (a root URI or a RemoteStorage; ``remote_layout``): read the remote tier of tiered
    storage too, as ``log.read_table`` does. ``dead_letter`` (a directory URI; ``shape``
    a TypedRecords under onDecodeError null or skip): the records that do not decode are
    written there (:class:`_DeadLetters`). The table's mode is ``shape.mode``
    (``append``, or ``upsert``: ``iceberg_upsert``); a table of the other mode, or an
    upsert read read_uncommitted, is a TableError before anything is read."""
    t0 = time.perf_counter()
    shape = shape if shape is not None else RawRecords()
    check_mode(table, shape.mode, identifier, shape.identifier_columns)
    upsert = shape.mode == "upsert"
    if upsert and isolation_level != "read_committed":
        raise TableError(f"{identifier}: an upsert table holds what compaction leaves, "
                         "never an aborted record: export it read_committed, not "
                         f"{isolation_level}")
    say = progress or (lambda _line: None)
    hit = fault or (lambda _phase: None)
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    storage = remote_storage if remote_storage is None or \
        isinstance(remote_storage, RemoteStorage) else \
        RemoteStorage(remote_storage, remote_layout, filesystem_options)
    dead = None if dead_letter is None else _DeadLetters(dead_letter, shape,
                                                         filesystem_options)
    for run in range(1, RUN_ATTEMPTS + 1):
        base = committed_offsets(table)
        ranges = plan_export(logdirs, topics, base, starting_offsets=starting_offsets,
                             isolation_level=isolation_level,
                             fail_on_data_loss=fail_on_data_loss, table_name=identifier,
                             remote_storage=storage)
        run_id = uuid.uuid4().hex
        result = ExportResult(identifier, run_id, "nothing-new", ranges, mode=shape.mode)
        hit("planned")
        todo = [r for r in ranges if r.end > r.start]
        if not todo:
            break
        say(f"exporting {sum(r.end - r.start for r in todo):,} offsets of "
            f"{len(todo)} topic-partitions into {identifier}")
        if dead is not None:
            dead.begin(todo)
        windows = _windows(logdirs, todo, isolation_level=isolation_level,
                           fail_on_data_loss=fail_on_data_loss,
                           window_records=window_records, storage=storage)
        removed = None
        try:
            if upsert:
                files, removed = _write_upsert(windows, table, identifier, shape, run_id,
                                               result, window_records=window_records,
                                               say=say, hit=hit)
            else:
                files = _write_files(windows, table, shape, run_id, result, say=say,
                                     hit=hit)
        except BaseException:
            if dead is not None:
                dead.abort()
            raise
        if dead is not None:
            dead.publish(result)
            hit("dead-letter-written")
        try:
            _commit(catalog, table, identifier, base, todo, files, result, hit=hit,
                    say=say, removed=removed)
            if dead is not None:
                dead.settle(result, committed_offsets(catalog.load_table(identifier))
                            if result.status != "committed" else None)
            break
        except _Overlap as lost:
            if dead is not None:
                dead.drop_own()
            if run == RUN_ATTEMPTS:
                raise CommitConflictError(str(lost)) from lost.__cause__
            # part of our ranges is in the table now: start over from what it holds
            say(f"{lost}; exporting again from the table's new offsets")
            table = catalog.load_table(identifier)
    result.seconds = time.perf_counter() - t0
    return result


class _DeadLetters:
    """The dead letter of an export (``log/read/dead_letter.py``): one file per
    topic-partition range of the run, ``<topic>-<partition>-<start>-<end>.parquet``,
    published before the Iceberg commit (a run killed after the commit has lost none).
    A run starts at the offsets the table holds, so a re-run after a failed or killed
    run starts where it did: after the commit, files of our topic-partitions with our
    start and another end are such a run's leftovers and are deleted (a re-run never
    duplicates). A run that loses to a concurrent one deletes its files unless the
    winner committed the same range (the same file name: the same records)."""

    def __init__(self, uri: str, shape, filesystem_options):
        from spark_kafkalog.errors import InvalidOptionError
        from spark_kafkalog.log.read.dead_letter import open_dead_letter_dir

        if getattr(shape, "read", None) is None or shape.read.on_error == "fail":
            raise InvalidOptionError("dead_letter: needs typed columns read with "
                                     "on_decode_error null or skip")
        self.shape = shape
        self.fs, self.directory = open_dead_letter_dir(uri, filesystem_options,
                                                       option="dead_letter")
        self.sink, self.todo, self.uri = None, [], uri

    def begin(self, todo) -> None:
        from spark_kafkalog.log.read.dead_letter import DeadLetterSink

        self.todo = list(todo)
        self.sink = DeadLetterSink(self.fs, self.directory,
                                   [(r.topic, r.partition, r.start, r.end) for r in todo])
        self.shape.dead_letter = self.sink
        self.counted = self.shape.decode_errors.total

    def abort(self) -> None:
        self.sink.abort()
        self.shape.dead_letter = None

    def publish(self, result) -> None:
        """Publish the run's files after checking they hold every record counted bad."""
        from spark_kafkalog.errors import InternalError

        counted = self.shape.decode_errors.total - self.counted
        if self.sink.rows != counted:
            self.sink.abort()
            raise InternalError(f"dead letter: {counted} records did not decode but "
                                f"{self.sink.rows} were written; nothing published")
        result.dead_letter = {"path": self.uri, "records": self.sink.commit()}
        self.shape.dead_letter = None

    def drop_own(self) -> None:
        from spark_kafkalog.log.io.fs import delete_file

        for path in self.sink.published:
            delete_file(self.fs, path, missing_ok=True)

    def settle(self, result, now: Committed | None) -> None:
        """After the commit (``now``: the table's offsets when this run lost the race)."""
        from spark_kafkalog.log.io.fs import delete_file
        from spark_kafkalog.log.read.dead_letter import dead_letter_files, parse_dead_letter_name

        if now is not None:             # lost: keep only a file the winner's range names
            for r, path in self._own():
                if now.next_offsets.get(r.topic, {}).get(r.partition) != r.end:
                    delete_file(self.fs, path, missing_ok=True)
            return
        ours = {(r.topic, r.partition, r.start): r.end for r in self.todo}
        for path in dead_letter_files(self.fs, self.directory):
            t, q, start, end = parse_dead_letter_name(path.rsplit("/", 1)[-1])
            if ours.get((t, q, start), end) != end:
                delete_file(self.fs, path, missing_ok=True)

    def _own(self):
        from spark_kafkalog.log.read.dead_letter import parse_dead_letter_name

        by_key = {(r.topic, r.partition, r.start, r.end): r for r in self.todo}
        for path in self.sink.published:
            yield by_key[parse_dead_letter_name(path.rsplit("/", 1)[-1])], path


class _Overlap(Exception):
    """A concurrent commit holds part of this run's ranges; its files are deleted."""


def _windows(logdirs, todo, *, isolation_level, fail_on_data_loss, window_records, storage):
    """The raw records of ``todo`` (Spark's Kafka schema with headers), in windows of
    about ``window_records`` rows, each partition's in offset order."""
    import pyarrow as pa

    pending: list[pa.Table] = []
    pending_rows = 0
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
                yield pa.concat_tables(pending)
                pending, pending_rows = [], 0
    if pending:
        yield pa.concat_tables(pending)


def _write_files(windows, table, shape, run_id, result, *, say, hit) -> list:
    """Each raw window of ``windows`` shaped and written as data files; the DataFiles,
    in order."""
    import itertools

    write_uuid, counter = uuid.UUID(run_id), itertools.count(0)
    files: list = []
    for raw in windows:
        window = shape.to_arrow(raw)
        if not window.num_rows:
            continue                # every record skipped (onDecodeError=skip): no file
        for data_file in data_files(table, window, write_uuid, counter):
            files.append(data_file)
            result.files += 1
            result.bytes += data_file.file_size_in_bytes
            hit("file-written")
        result.rows += window.num_rows
        say(f"{result.rows:,} rows in {result.files} files")
    return files


def _write_upsert(windows, table, identifier, shape, run_id, result, *, window_records,
                  say, hit) -> tuple[list, list]:
    """An upsert run's files: the last record per key of ``windows`` (tombstones delete,
    records without a key are skipped), the live files holding any of those keys
    rewritten without them, and the new rows. Returns (files to add, files to remove)."""
    import itertools

    import pyarrow.compute as pc

    from spark_kafkalog.lake.iceberg_upsert import LatestPerKey, rewrite_plan

    latest = LatestPerKey(window_records)
    for raw in windows:
        latest.add(raw)
    result.records, result.null_keys = latest.records, latest.null_keys
    winners = latest.result()
    if winners is None:
        return [], []
    write_uuid, counter = uuid.UUID(run_id), itertools.count(0)
    files: list = []

    def written(data_file):
        files.append(data_file)
        result.files += 1
        result.bytes += data_file.file_size_in_bytes
        hit("file-written")

    removed, _, gone = rewrite_plan(table, identifier, winners, write_uuid, counter,
                                    on_file=written)
    result.rows_removed, result.files_rewritten = gone, len(removed)
    live = winners.filter(pc.is_valid(winners.column("value")))
    result.tombstones = winners.num_rows - live.num_rows
    if live.num_rows:
        new = shape.to_arrow(live)
        for data_file in data_files(table, new, write_uuid, counter):
            written(data_file)
        result.rows = new.num_rows
    say(f"{result.rows:,} latest rows, {result.tombstones:,} tombstones, "
        f"{result.files_rewritten} files rewritten")
    return files, removed


def _commit(catalog, table, identifier, base: Committed, todo, files, result, *, hit, say,
            removed=None, extra: Mapping[str, str] | None = None):
    """One snapshot adding ``files`` (and removing the data files ``removed``, an upsert
    run's rewrites: an overwrite snapshot) with the ranges (and ``extra``) in its summary;
    on a concurrent commit, retried or given up as the module docstring says. A retry
    whose files to remove a concurrent commit removed first (it rewrote them) starts over.
    The streaming sink (``spark.iceberg_sink``) commits through here too."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import AlwaysTrue

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
        snapshot = tx.update_snapshot(snapshot_properties=props)
        try:
            if removed:
                with snapshot.overwrite() as overwrite:
                    # every manifest is looked at for the files to remove (the default
                    # predicate, AlwaysFalse, would keep them all); rows are removed
                    # by file only
                    overwrite.delete_by_predicate(AlwaysTrue())
                    for data_file in removed:
                        overwrite.delete_data_file(data_file)
                    for data_file in files:
                        overwrite.append_data_file(data_file)
            else:
                with snapshot.fast_append() as append:
                    for data_file in files:
                        append.append_data_file(data_file)
        except ValidationException as err:
            _delete_files(table.io, files)
            raise _Overlap(f"{identifier}: a concurrent commit removed a data file this "
                           "run rewrites; this run's files were deleted") from err
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
            _delete_files(table.io, files)
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
    _delete_files(table.io, files)
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


def _delete_files(io, files) -> None:
    """Delete the data files ``files`` through the FileIO ``io`` (gone already: fine)."""
    for data_file in files:
        try:
            io.delete(data_file.file_path)
        except FileNotFoundError:
            pass
