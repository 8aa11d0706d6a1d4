"""``writeStream.format("kafkalog_iceberg")``: a streaming query of Kafka records (what
``readStream.format("kafkalog")`` gives) appended to an Iceberg table, exactly once,
with no checkpoint beside Spark's own.

Tasks (:meth:`IcebergStreamWriter.write`, on executors) write their rows as Parquet data
files into the table's data directory through pyiceberg's writer and return the files,
with each topic-partition's first and last offset, in a small picklable
:class:`IcebergCommitMessage`. The driver's :meth:`~IcebergStreamWriter.commit` adds
every file of the micro-batch in ONE Iceberg append whose snapshot summary holds the
batch job's keys (``kafkalog.offsets``: the batch's ``[first, last + 1)`` per
topic-partition; ``kafkalog.next-offsets``; ``kafkalog.run-id``) and the query's own
(``kafkalog.query-id``, ``kafkalog.batch-id``).

Exactly once: Spark re-runs a micro-batch whose end it did not record in its commit log
(a crash between our Iceberg commit and Spark's commit-log write, a driver restart) with
the same batch id and offsets. The commit first walks the table's snapshots: one with
this query's id and a batch id at or past this one means the batch is in the table
already, so the re-run's files are deleted and nothing is committed. The query id is
the checkpoint's (``<checkpointLocation>/metadata``, stable across restarts) unless
option ``queryId`` names one. A batch whose rows start below the next offset the table
holds for a partition (another query or export got there first) is refused
(CommitConflictError, files deleted): the table never holds an offset twice. A commit
that loses the catalog's optimistic race is decided as the batch job decides it
(``lake.iceberg._commit``).

Orphans: files written by a task attempt that failed (or whose result Spark dropped for
a speculative twin) are in no commit message; they stay in the table's ``data/``
directory, named ``*-<uuid of that attempt>.parquet``, in no snapshot, so no reader sees
them. Iceberg's orphan-file removal (``DeleteOrphanFiles``, Spark's
``remove_orphan_files`` procedure, with its age guard) deletes them. ``abort`` (Spark
gave up the batch) deletes the files of the tasks that did report.

Typed values: a stream read with ``valueFormat`` / ``keyFormat`` (avro, protobuf, json,
registry) brings ``value`` / ``key`` as structs (and, under ``onDecodeError=null``,
``value_error``); the table's columns are the Kafka columns with those types, converted
from Spark's Arrow by the batch job's rule (``lake.iceberg_typed.TypedColumns``). Spark
makes the writer (:meth:`IcebergSink.streamWriter`) when it plans a micro-batch that has
rows: the table is created then, or, when the stream's struct is wider than the table's
(a query restarted after the subject gained fields), gains the columns before any task
writes (rows written before read them as null); a change the table cannot take fails
that batch with one line naming both types, nothing committed. A raw stream into a typed
table, or a typed one into a raw table, is refused there too.

Options: ``table`` (``namespace.name``, created when missing), ``warehouse``,
``catalogUri``, ``catalogName``, ``catalog.<property>`` (pyiceberg's), ``fs.<family>.<name>``
/ ``s3.*`` (the reader's filesystem options, for the warehouse), ``partitionBy``,
``queryId``, ``windowRecords`` (rows per batch of data files a task holds in memory). The
incoming rows must have Spark's Kafka columns (``headers`` optional); other columns
(beyond a typed read's ``*_error`` / ``*_raw``) are not written.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from spark_kafkalog.errors import CommitConflictError, InvalidOptionError, TableError

__all__ = ["IcebergSink", "IcebergStreamWriter", "IcebergCommitMessage", "QUERY_ID_KEY",
           "BATCH_ID_KEY", "SINK_NAME", "stream_shape", "stream_starting_offsets"]

SINK_NAME = "kafkalog_iceberg"
QUERY_ID_KEY = "kafkalog.query-id"
BATCH_ID_KEY = "kafkalog.batch-id"
DEFAULT_WINDOW_ROWS = 500_000
_NEEDED = ("topic", "partition", "offset", "timestamp", "timestampType", "key", "value")
_KNOWN = {"table", "warehouse", "catalogUri", "catalogName", "partitionBy", "queryId",
          "windowRecords", "checkpointLocation", "path"}


@dataclass
class IcebergCommitMessage(WriterCommitMessage):
    """One task's work: its data files (pyiceberg ``DataFile``s), per
    ``(topic, partition)`` the ``(first, last)`` offset of its rows, and the table's
    partition spec id and schema id the files were written for."""
    files: list = field(default_factory=list)
    offsets: dict = field(default_factory=dict)
    rows: int = 0
    spec_id: int = 0
    schema_id: int = 0


@dataclass(frozen=True)
class SinkConfig:
    """The parsed options; plain values, so it pickles to every task."""
    identifier: str
    catalog_name: str
    catalog: dict
    partition_by: str | None
    query_id: str | None
    checkpoint: str | None
    window_rows: int
    filesystem_options: dict

    @classmethod
    def parse(cls, options) -> "SinkConfig":
        from spark_kafkalog.lake.iceberg_table import catalog_properties

        opts = {str(k): str(v) for k, v in dict(options).items()}
        lower = {k.lower(): v for k, v in opts.items()}
        fs_opts, props = {}, {}
        for key, value in opts.items():
            low = key.lower()
            if low.startswith("catalog."):
                props[key[len("catalog."):]] = value
            elif low.startswith(("fs.", "s3.")):
                fs_opts[key] = value
            elif low not in {k.lower() for k in _KNOWN}:
                raise InvalidOptionError(f"option {key}: not an option of {SINK_NAME} "
                                         f"(known: {', '.join(sorted(_KNOWN))}, "
                                         "catalog.*, fs.*)")
        identifier = lower.get("table") or lower.get("path")
        if not identifier:
            raise InvalidOptionError(f"option table: {SINK_NAME} needs the Iceberg table, "
                                     "e.g. .option('table', 'kafka.orders')")
        if "warehouse" not in lower and "catalogUri".lower() not in lower:
            raise InvalidOptionError("option warehouse: where the table's files go (and the "
                                     "embedded catalog's SQLite file) is required")
        if not lower.get("queryid") and not lower.get("checkpointlocation"):
            raise InvalidOptionError(f"option checkpointLocation: {SINK_NAME} needs the "
                                     "query's checkpoint (or option queryId): a replayed "
                                     "micro-batch is recognised by the query's id")
        try:
            window = int(lower.get("windowrecords", DEFAULT_WINDOW_ROWS))
        except ValueError:
            raise InvalidOptionError(f"option windowRecords: expected an integer, got "
                                     f"{lower['windowrecords']!r}") from None
        if window < 1:
            raise InvalidOptionError("option windowRecords must be positive")
        catalog = catalog_properties(lower.get("warehouse", ""), lower.get("catalogUri".lower()),
                                     props, fs_opts)
        return cls(identifier, lower.get("catalogname", "kafkalog"), catalog,
                   lower.get("partitionby"), lower.get("queryid"),
                   lower.get("checkpointlocation"), window, fs_opts)

    def load_catalog(self):
        from spark_kafkalog.lake.iceberg_table import load_catalog

        return load_catalog(self.catalog_name, self.catalog)

    def resolve_query_id(self) -> str:
        """Option ``queryId``, else the id Spark keeps in ``<checkpoint>/metadata``."""
        if self.query_id:
            return self.query_id
        if not self.checkpoint:
            raise InvalidOptionError(f"{SINK_NAME}: give option checkpointLocation (or "
                                     "queryId): a replayed micro-batch is recognised by "
                                     "the query's id")
        from spark_kafkalog.log.io.fs import join, resolve_filesystem

        fs, root = resolve_filesystem(self.checkpoint, self.filesystem_options or None)
        where = join(root, "metadata")
        try:
            with fs.open_input_stream(where) as f:
                return str(json.loads(f.read().decode("utf-8").splitlines()[0])["id"])
        except (OSError, ValueError, KeyError, IndexError) as err:
            raise TableError(f"{self.checkpoint}/metadata: cannot read the streaming "
                             f"query's id: {err}") from err


class IcebergSink(DataSource):
    """The ``kafkalog_iceberg`` data source: a streaming sink only."""

    @classmethod
    def name(cls) -> str:
        return SINK_NAME

    def streamWriter(self, schema, overwrite: bool) -> "IcebergStreamWriter":
        missing = [c for c in _NEEDED if c not in schema.names]
        if missing:
            raise InvalidOptionError(f"{SINK_NAME}: the stream has no column "
                                     f"{missing[0]!r}: write what "
                                     "readStream.format('kafkalog') gives")
        return IcebergStreamWriter(SinkConfig.parse(self.options),
                                   include_headers="headers" in schema.names,
                                   shape=stream_shape(schema))


def stream_shape(schema):
    """The shaper of a stream's rows (``schema``: Spark's StructType): ``RawRecords`` when
    ``key`` and ``value`` are binary, else ``TypedColumns`` over the Arrow of Spark's
    types of the Kafka columns, the typed ``key`` / ``value`` and the columns a typed
    read adds beside them (``value_error``, ``value_raw`` and their ``key_`` twins).
    Other columns are not written."""
    import pyarrow as pa
    from pyspark.sql.types import BinaryType

    from spark_kafkalog.format import record_schema
    from spark_kafkalog.lake.iceberg_table import RawRecords
    from spark_kafkalog.lake.iceberg_typed import TypedColumns
    from spark_kafkalog.spark.typed_read import spark_arrow_type

    typed = tuple(c for c in ("key", "value") if not isinstance(schema[c].dataType, BinaryType))
    if not typed:
        return RawRecords()
    kafka = record_schema(True)
    beside = {f"{c}_{what}" for c in typed for what in ("error", "raw")}
    fields = [pa.field(n, spark_arrow_type(schema[n].dataType)) if n in typed
              else kafka.field(n) for n in RawRecords.COLUMNS]
    fields += [pa.field(n, spark_arrow_type(schema[n].dataType)) for n in schema.names
               if n in beside]
    return TypedColumns(pa.schema(fields), typed)


class IcebergStreamWriter(DataSourceStreamArrowWriter):
    """Writes on executors, commits on the driver (see the module docstring). Created in
    every Python worker that needs it; holds only the parsed options and the table's
    metadata of when it was created (its schema and partition spec), never a catalog
    connection, so it pickles."""

    def __init__(self, config: SinkConfig, include_headers: bool, shape=None):
        from spark_kafkalog.lake.iceberg_table import RawRecords, check_mode, open_table

        self.config = config
        self.include_headers = include_headers
        #: RawRecords or TypedColumns, bound to the table's schema (evolved) by open_table
        self.shape = shape if shape is not None else RawRecords()
        table = open_table(config.load_catalog(), config.identifier, self.shape,
                           partition_by=config.partition_by)
        # the sink appends history: an upsert table (export_iceberg --mode upsert) would
        # get a second row for every key it already holds
        check_mode(table, "append", config.identifier)
        self.metadata = table.metadata
        self.io_properties = dict(table.io.properties)

    # ---- executors ------------------------------------------------------------------

    def write(self, iterator) -> IcebergCommitMessage:
        """Data files of this task's rows, ``windowRecords`` rows at a time."""
        import itertools

        import pyarrow as pa
        from pyiceberg.io import load_file_io

        from spark_kafkalog.lake.iceberg_table import data_files

        io = load_file_io(self.io_properties, self.metadata.location)
        # one uuid per task attempt: a failed attempt's files are told apart by it
        write_uuid, counter = uuid.uuid4(), itertools.count(0)
        msg = IcebergCommitMessage(spec_id=self.metadata.default_spec_id,
                                   schema_id=self.metadata.current_schema_id)
        pending: list = []
        held = 0

        def flush():
            nonlocal pending, held
            if not pending:
                return
            window = pa.Table.from_batches(pending)
            pending, held = [], 0
            _track_offsets(window, msg.offsets)
            # the batch export's writer (the table's spec, file stats, field ids, its
            # target file size)
            msg.files.extend(data_files(
                None, self.shape.to_arrow(self._kafka_columns(window)), write_uuid, counter,
                metadata=self.metadata, io=io))
            msg.rows += window.num_rows

        for batch in iterator:
            if batch.num_rows:
                pending.append(batch)
                held += batch.num_rows
            if held >= self.config.window_rows:
                flush()
        flush()
        return msg

    def _kafka_columns(self, window):
        import pyarrow as pa

        from spark_kafkalog.format import record_schema

        if not self.include_headers:
            window = window.append_column("headers", pa.nulls(
                window.num_rows, record_schema(True).field("headers").type))
        return window

    # ---- driver -----------------------------------------------------------------------

    def commit(self, messages, batchId: int) -> None:
        """One Iceberg append of every task's files, unless this query's batch
        ``batchId`` is in the table already (a replay: the files are deleted)."""
        from spark_kafkalog.lake.iceberg import (ExportResult, PartitionRange, _commit,
                                                  _delete_files, _Overlap)
        from spark_kafkalog.lake.iceberg_table import committed_offsets

        if any(m is None for m in messages):
            self.abort(messages, batchId)
            raise TableError(f"{self.config.identifier}: batch {batchId}: a task reported "
                             "no result; its files are not committed")
        files = [f for m in messages for f in m.files]
        spans: dict = {}
        for m in messages:
            for key, (lo, hi) in m.offsets.items():
                have = spans.get(key)
                spans[key] = (lo, hi) if have is None else (min(lo, have[0]),
                                                            max(hi, have[1]))
        if not files:
            return
        try:
            query_id = self.config.resolve_query_id()
        except Exception:
            self.abort(messages, batchId)
            raise
        catalog = self.config.load_catalog()
        table = catalog.load_table(self.config.identifier)
        if {(m.spec_id, m.schema_id) for m in messages if m.files} != \
                {(table.metadata.default_spec_id, table.metadata.current_schema_id)}:
            _delete_files(table.io, files)
            raise TableError(f"{self.config.identifier}: the table's partition spec or "
                             "schema changed while the query ran (its files were written "
                             "for the old ones and are deleted): restart the query")
        if _batch_committed(table, query_id, batchId):
            _delete_files(table.io, files)
            return
        base = committed_offsets(table)
        for (topic, q), (lo, _hi) in sorted(spans.items()):
            nxt = base.next_offsets.get(topic, {}).get(q)
            if nxt is not None and lo < nxt:
                _delete_files(table.io, files)
                raise CommitConflictError(
                    f"{self.config.identifier}: batch {batchId} of query {query_id} starts "
                    f"{topic}-{q} at offset {lo} but the table already holds offsets up "
                    f"to {nxt} (another query or export wrote them): start the query at "
                    "the table's offsets (spark_kafkalog.spark.iceberg_sink."
                    "stream_starting_offsets)", offset=lo)
        todo = [PartitionRange(t, q, lo, hi + 1) for (t, q), (lo, hi) in sorted(spans.items())]
        result = ExportResult(self.config.identifier, uuid.uuid4().hex, "nothing-new", todo)
        extra = {QUERY_ID_KEY: query_id, BATCH_ID_KEY: str(batchId)}
        try:
            _commit(catalog, table, self.config.identifier, base, todo, files, result,
                    hit=lambda _phase: None, say=lambda _line: None, extra=extra)
        except _Overlap as err:
            raise CommitConflictError(str(err)) from err.__cause__

    def abort(self, messages, batchId: int) -> None:
        """Delete the files of the tasks that reported (the others' are orphans)."""
        files = [f for m in messages if m is not None for f in m.files]
        if files:
            from pyiceberg.io import load_file_io

            from spark_kafkalog.lake.iceberg import _delete_files

            _delete_files(load_file_io(self.io_properties, self.metadata.location), files)


def _track_offsets(window, offsets: dict) -> None:
    """Fold ``window``'s first and last offset per (topic, partition) into ``offsets``."""
    grouped = window.group_by(["topic", "partition"]).aggregate(
        [("offset", "min"), ("offset", "max")])
    for t, q, lo, hi in zip(*(grouped.column(c).to_pylist() for c in
                              ("topic", "partition", "offset_min", "offset_max"))):
        have = offsets.get((t, q))
        offsets[(t, q)] = (lo, hi) if have is None else (min(lo, have[0]), max(hi, have[1]))


def _batch_committed(table, query_id: str, batch_id: int) -> bool:
    """A snapshot of query ``query_id`` with batch id ``batch_id`` or later is in the
    table's current lineage."""
    snap = table.current_snapshot()
    while snap is not None:
        summary = snap.summary
        if summary is not None and summary.get(QUERY_ID_KEY) == query_id:
            return int(summary.get(BATCH_ID_KEY, -1)) >= batch_id
        parent = snap.parent_snapshot_id
        snap = table.snapshot_by_id(parent) if parent is not None else None
    return False




def stream_starting_offsets(table) -> str | None:
    """``startingOffsets`` JSON for a query that continues ``table`` (a pyiceberg Table):
    the next offsets its newest snapshot of ours records; None when it has none."""
    from spark_kafkalog.lake.iceberg_table import committed_offsets, offsets_json

    base = committed_offsets(table)
    return offsets_json(base.next_offsets) if base.next_offsets else None
