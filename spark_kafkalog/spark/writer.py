"""``df.write.format("kafkalog")`` and ``df.writeStream.format("kafkalog")``: exactly-once
appends to a Kafka log dir. Orchestration only — bytes are made by ``format.encode`` and
placed by :mod:`spark_kafkalog.log.write`.

Input columns, as Spark's Kafka sink takes them: ``value`` (binary or string, required),
``key`` (binary or string), ``headers`` (array<struct<key string, value binary>>),
``partition`` (int), ``timestamp`` (timestamp; absent or null = the write time, as
CreateTime) and ``topic`` (string; used when the ``topic`` option is absent, so one write
may feed several topics). Other columns are ignored, so a DataFrame read with
``format("kafkalog")`` can be written back as it is.

Offsets (option ``offsets``): ``assign`` (default) gives the records contiguous offsets
from each partition's log end. ``preserve`` keeps each record's ``offset`` column (long,
non-null; with ``timestampType`` 1 the record stays LogAppendTime): gaps are allowed,
offsets must increase strictly per partition and start at or past the partition's log
end offset, and a partition with no record yet starts its log at the first offset
written. Rows of a partition must reach each task in offset order (the writer checks,
it does not sort: ``df.repartition("partition").sortWithinPartitions("offset")`` makes
any input so; a ``format("kafkalog")`` read already is); several tasks may write one
partition if they hold disjoint offset ranges. ``partition`` must then be given, non-null,
unless the topic has one partition. Violations raise :class:`BadRowError` naming topic,
partition and offsets; nothing is written. A streaming sink preserves offsets too
(each micro-batch is one exactly-once commit; a replayed batch is a no-op), except in
complete output mode, which would rewrite the same offsets each batch (rejected).

Partitioning: a non-null ``partition`` is used as given (outside the topic: the write
fails naming it); otherwise the Java client's default partitioner — ``(murmur2(key) &
0x7fffffff) % numPartitions`` for a keyed record, round-robin for a null key (see
``format/_partition.pyx``). Partition count: an existing topic keeps its own; a new one
gets option ``partitions``, else (a ``partition`` column) the largest partition written
+ 1, decided at commit (every row must then name one: placing by key needs the count),
else 1.

How a write runs:

* planning (driver): options and input schema are validated; the topic's partition count
  is read from the log dir (see Partition count above);
* ``write`` (one per Spark task, in parallel): Arrow batches are buffered up to
  :data:`FLUSH_BYTES`, partitioned, and encoded into record batches of about
  ``batch.size`` bytes by ``format.encode_partitioned`` — uncompressed in one pass over
  the rows, each record written into its partition's batches; compressed, partition by
  partition — and streamed into one staging file at the log-dir root (on local
  filesystems plus one per topic-partition staging over a MiB in the task, see
  ``StagingWriter``); the task returns a
  :class:`KafkaLogCommitMessage` (the staging files' description: a few hundred bytes);
* ``commit`` (driver): :func:`spark_kafkalog.log.write.commit_write` — the journal
  makes it all-or-nothing and idempotent;
* ``abort``: staging files are deleted (a task still staging, by abort_write's marker).

Save modes. Spark hands a Python data source only "overwrite or not"; it refuses
``errorifexists`` and ``ignore`` itself (UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before this
code runs, and ``errorifexists`` is ``DataFrameWriter``'s default. So ``mode("append")``
appends, ``mode("overwrite")`` replaces the topic's contents atomically (offsets keep
increasing: the new data starts at the old log end, which becomes the log start), and
the option ``saveMode`` = ``errorifexists`` | ``ignore`` (with ``mode("append")``) gives
the other two behaviours, decided under the writer lock at commit.

Streaming: the write id is ``stream:<query id>:<batch id>`` (both read from the task's
Spark local properties, the query id also from ``<checkpointLocation>/metadata``), so a
micro-batch replayed after a restart commits nothing twice. Every commit may run in a
fresh Python worker; the journal in the log dir is the only state.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from spark_kafkalog.errors import (BadRowError, CommitConflictError, InvalidOptionError,
                                   TopicExistsError)
from spark_kafkalog.format.npview import to_numpy
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import (
    AppendConfig,
    OWN_FILE_MIN_BYTES,
    StagedFile,
    StagingWriter,
    TopicSpec,
    abort_write,
    commit_write,
    record_owner,
    topic_partitions,
)
from spark_kafkalog.log.io import resolve_filesystem
from spark_kafkalog.spark.typed_write import plan_typed_write
from spark_kafkalog.spark.write_options import (WriteOptions, check_input_columns,
                                                parse_write_options)
from spark_kafkalog.spark.worker import freeze_heap, keep_freed_heap

#: rows are buffered per task up to about this many bytes before they are partitioned
#: and encoded, so each partition's record batches come out close to batch.size
FLUSH_BYTES = 32 * 1024 * 1024


@dataclass
class KafkaLogCommitMessage(WriterCommitMessage):
    """What a task sends the driver: its staging file (None when it wrote no row) and, for
    the commit's checks, the partition counts it partitioned with. Picklable, small."""

    staged: StagedFile | None
    rows: int
    partition_counts: dict = field(default_factory=dict)   # topic -> partition count used
    query_id: str | None = None
    batch_id: int | None = None


# ---- planning ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Plan:
    """What every task and the commit need; picklable."""

    wo: WriteOptions
    mode: str                          # append | overwrite | errorifexists | ignore
    write_id: str | None               # batch writes; streams derive theirs per batch
    partition_counts: dict             # topic -> count known at planning (None: from rows)
    skip: bool = False                 # ignore mode and the topic exists: write nothing
    checkpoint_location: str | None = None
    #: the input has a 'partition' column: a new topic without option 'partitions' gets
    #: as many partitions as the rows reach
    partition_column: bool = False
    run: str | None = None              # this planning's id: see abort_write's marker
    typed: object = None                # TypedWrite (spark/typed_write.py): Avro columns


def _partition_count(fs, root: str, topic: str, wo: WriteOptions,
                     partition_column: bool = False) -> int | None:
    """The topic's partition count; None: a new topic whose count the rows decide."""
    parts = topic_partitions(fs, root, topic)
    if not parts:
        if wo.partitions is None and partition_column:
            return None
        return wo.partitions or 1
    if parts == list(range(len(parts))):
        return len(parts)
    # a broker log dir may hold only some partitions: the user must say how many exist
    if wo.partitions is None or wo.partitions <= parts[-1]:
        raise InvalidOptionError(
            f"partitions: topic {topic!r} has only partitions {parts[:20]} in this log dir "
            "(the others live elsewhere); set option 'partitions' to the topic's partition "
            "count so keys are placed as Kafka places them")
    return wo.partitions


def _make_plan(options, schema: StructType, overwrite: bool, *, streaming: bool) -> _Plan:
    wo = parse_write_options(options)
    save_mode = wo.save_mode
    check_input_columns(schema, wo.topic, wo.offsets == "preserve",
                  [c.column for c in wo.typed.columns] if wo.typed else ())
    if streaming and overwrite and wo.offsets == "preserve":
        raise InvalidOptionError("offsets=preserve cannot be used in complete output mode: "
                                 "each micro-batch would rewrite the same offsets; use "
                                 "append output mode")
    if overwrite and save_mode != "append":
        raise InvalidOptionError(f"saveMode {save_mode} cannot be combined with "
                                 "mode('overwrite')")
    if overwrite and wo.topic is None:
        raise InvalidOptionError("topic: mode('overwrite') replaces one topic; set the "
                                 "'topic' option")
    mode = "overwrite" if overwrite else save_mode
    fs, root = resolve_filesystem(wo.path, wo.filesystem_options)
    partition_column = any(f.name.lower() == "partition" for f in schema.fields)
    counts = {}
    skip = False
    if wo.topic is not None:
        jr.validate_topic(wo.topic)
        wo.check_topic(wo.topic)
        exists = bool(topic_partitions(fs, root, wo.topic))
        if exists and mode == "errorifexists":
            raise TopicExistsError(f"topic {wo.topic!r} already exists in {wo.path} "
                                   "(saveMode errorifexists)")
        skip = exists and mode == "ignore"
        counts[wo.topic] = _partition_count(fs, root, wo.topic, wo, partition_column)
    # schemas resolved (and registered) now: a refusal comes before any task
    typed = None if skip else plan_typed_write(wo, schema)
    return _Plan(wo=wo, mode=mode, write_id=None if streaming else jr.batch_write_id(),
                 partition_counts=counts, skip=skip,
                 checkpoint_location=wo.checkpoint_location,
                 partition_column=partition_column, run=uuid.uuid4().hex[:12], typed=typed)


# ---- the task side ------------------------------------------------------------------------
_ORDER_HINT = (" (with offsets=preserve give each partition's rows in offset order: "
               "sortWithinPartitions('offset'))")


def _order_hint(err: BadRowError) -> str:
    return _ORDER_HINT if "increase strictly" in str(err) else ""


def _task_context():
    from pyspark import TaskContext
    return TaskContext.get()


class _TaskWriter:
    """Buffers a task's Arrow batches, partitions and encodes them into staging."""

    def __init__(self, plan: _Plan, write_id: str, label: str, null_start: int):
        from spark_kafkalog.format.encode import (    # executor-side import
            encode_batches,
            encode_partitioned,
        )
        self._encode = encode_batches
        self._encode_partitioned = encode_partitioned
        self.plan = plan
        self.fs, self.root = resolve_filesystem(plan.wo.path, plan.wo.filesystem_options)
        # one shared staging file, plus a file of its own for each partition with more
        # than OWN_FILE_MIN_BYTES: the commit adopts large ones as segments
        self.staging = StagingWriter(self.fs, self.root, write_id, label,
                                     per_partition_files=True,
                                     flush_behind=plan.wo.fsync,
                                     own_file_min_bytes=OWN_FILE_MIN_BYTES,
                                     run=plan.run)
        self.counts = dict(plan.partition_counts)
        self.null_start = null_start
        self.label = label
        self.rows = 0
        self._buf: list[pa.RecordBatch] = []
        self._buf_bytes = 0
        self._checked = False
        self._preserve = plan.wo.offsets == "preserve"
        #: offsets=preserve: (topic, partition) -> last offset staged (across flushes)
        self._last: dict[tuple[str, int], int] = {}
        self._encoders: dict = {}        # typed columns: Arrow type -> AvroEncoder

    def _count(self, topic: str) -> int | None:
        """The topic's partition count; None: a new topic whose count the rows decide.
        Looked up again when planning left it to the rows (an earlier micro-batch of a
        stream may have created the topic since)."""
        if self.counts.get(topic) is None:
            jr.validate_topic(topic)
            self.plan.wo.check_topic(topic)
            self.counts[topic] = _partition_count(self.fs, self.root, topic, self.plan.wo,
                                                  self.plan.partition_column)
        return self.counts[topic]

    @staticmethod
    def _named_partitions(table: pa.Table, names: dict, topic: str) -> np.ndarray:
        """A new topic's rows, each naming its partition (the count comes from them)."""
        col = table.column(names["partition"]).combine_chunks()
        if col.null_count:
            raise BadRowError(
                f"partition: topic {topic!r} is new and option 'partitions' is not set, so "
                "its partition count comes from the rows (the largest 'partition' + 1), "
                "but a row has a null 'partition', which only a known count can place by "
                "key; set option 'partitions'")
        given = to_numpy(col).astype(np.int32)
        if len(given) and int(given.min()) < 0:
            raise BadRowError(f"partition: a row has partition {int(given.min())} (topic "
                              f"{topic!r}); a partition is >= 0")
        return given

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.plan.typed is not None:
            batch = self.plan.typed.encode(batch, self._encoders, self.rows,
                                           f"Spark task {self.label}: ")
        self._buf.append(batch)
        self._buf_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._buf_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self._buf:
            return
        # left chunked: the encoder reads the chunks in place
        table = pa.Table.from_batches(self._buf)
        self._buf = []
        self._buf_bytes = 0
        names = {n.lower(): n for n in table.column_names}
        if self.plan.wo.topic is not None:
            self._stage_topic(table, names, self.plan.wo.topic)
            return
        topics = table.column(names["topic"]).combine_chunks()
        if topics.null_count:
            row = int(pc.index(pc.is_null(topics), True).as_py())
            raise BadRowError(f"topic: row {row} of the DataFrame has a null 'topic' "
                              "and no 'topic' option is set")
        encoded = pc.dictionary_encode(topics)
        for k, name in enumerate(encoded.dictionary.to_pylist()):
            mask = pc.equal(encoded.indices, k)
            self._stage_topic(table.filter(mask), names, name)

    def _stage_topic(self, table: pa.Table, names: dict, topic: str) -> None:
        n = self._count(topic)
        parts = None
        if n is None:
            parts = self._named_partitions(table, names, topic)
            n = int(parts.max()) + 1
        elif self._preserve and n > 1:
            col = (table.column(names["partition"]).combine_chunks()
                   if "partition" in names else None)
            if col is None or col.null_count:
                raise BadRowError(
                    f"partition: offsets=preserve keeps offsets per partition, so every row "
                    f"needs a non-null 'partition' (topic {topic!r} has {n} partitions)")
        if parts is None and "partition" in names:
            col = table.column(names["partition"]).combine_chunks()
            if col.null_count < len(col):
                given = to_numpy(col.fill_null(0)).astype(np.int32)
                valid = to_numpy(col.is_valid())
                bad = np.flatnonzero(valid & ((given < 0) | (given >= n)))
                if len(bad):
                    raise BadRowError(
                        f"partition: a row has partition {int(given[bad[0]])}, outside topic "
                        f"{topic!r}, which has {n} partition{'s' * (n != 1)} (0..{n - 1})")
                if col.null_count == 0:
                    parts = given
                else:
                    parts = self._hash(table, names, n)
                    parts[valid] = given[valid]
        if parts is None:
            parts = self._hash(table, names, n)
        # only what the encoder reads
        keep = [c for c in ("key", "value", "timestamp", "headers") if c in names]
        if self._preserve:
            keep += [c for c in ("offset", "timestamptype") if c in names]
        table = table.select([names[c] for c in keep]).rename_columns(
            ["timestampType" if c == "timestamptype" else c for c in keep])
        if n == 1:
            self._encode_into(topic, 0, table)
            return
        wo = self.plan.wo
        # uncompressed: one pass over the rows, each written into its partition's batches;
        # compressed: partition by partition, the columns checked once for all
        try:
            data, sections = self._encode_partitioned(
                table, parts, n, compression=wo.compression,
                compression_level=wo.compression_level, max_batch_bytes=wo.batch_size,
                offsets=wo.offsets)
        except BadRowError as err:
            raise BadRowError(f"topic {topic!r} {err}{_order_hint(err)}") from err
        if self._preserve:
            view = memoryview(data)
            for p, start, end, index in sections:
                self._add(topic, p, view[start:end], index)
        else:
            self.staging.add_partitioned(topic, data, sections)

    def _add(self, topic: str, partition: int, data, index: pa.Table) -> None:
        """Stage one partition's batches; with offsets=preserve, check they follow the
        ones this task staged before (an earlier flush) for that partition."""
        if self._preserve and index.num_rows:
            first = index.column("base_offset")[0].as_py()
            before = self._last.get((topic, partition))
            if before is not None and first <= before:
                raise BadRowError(
                    f"topic {topic!r} partition {partition}: offsets must increase "
                    f"strictly, but offset {first} comes after offset {before} in the same "
                    f"task{_ORDER_HINT}")
            self._last[(topic, partition)] = index.column("last_offset")[-1].as_py()
        self.staging.add(topic, partition, data, index)

    def _hash(self, table: pa.Table, names: dict, n: int) -> np.ndarray:
        from spark_kafkalog.format._partition import partition_for_keys
        if "key" in names:
            keys = table.column(names["key"])
        else:
            keys = pa.nulls(table.num_rows, pa.binary())
        out = partition_for_keys(keys, n, self.null_start)
        self.null_start += keys.null_count
        return out

    def _encode_into(self, topic: str, partition: int, table: pa.Table,
                     rows: np.ndarray | None = None) -> None:
        wo = self.plan.wo
        # one thread: Spark already runs one task per core
        try:
            data, index = self._encode(table, rows=rows, compression=wo.compression,
                                       compression_level=wo.compression_level,
                                       max_batch_bytes=wo.batch_size, threads=1,
                                       offsets=wo.offsets)
        except BadRowError as err:
            raise BadRowError(f"topic {topic!r} partition {partition}: {err}"
                              f"{_order_hint(err)}") from err
        self._add(topic, partition, data, index)

    def finish(self) -> tuple[StagedFile | None, dict]:
        self.flush()
        return self.staging.finish(), self.counts

    def abort(self) -> None:
        self.staging.abort()


def _write_task(plan: _Plan, iterator, write_id: str, label: str, null_start: int,
                query_id=None, batch_id=None) -> KafkaLogCommitMessage:
    freeze_heap()               # see spark/worker.py: Spark's gc.collect() after the task
    if plan.skip:
        return KafkaLogCommitMessage(staged=None, rows=0, query_id=query_id,
                                     batch_id=batch_id)
    keep_freed_heap()           # see spark/worker.py: each flush reuses the heap the last freed
    w = _TaskWriter(plan, write_id, label, null_start)
    try:
        for batch in iterator:
            w.add(batch)
        staged, counts = w.finish()
    except BaseException:
        w.abort()
        raise
    return KafkaLogCommitMessage(staged=staged, rows=w.rows, partition_counts=counts,
                                 query_id=query_id, batch_id=batch_id)


def _task_label(tc) -> tuple[str, int]:
    if tc is None:
        return "driver", 0
    return f"p{tc.partitionId()}-a{tc.attemptNumber()}", tc.partitionId()


# ---- the commit side -----------------------------------------------------------------------
def _specs(plan: _Plan, messages) -> list[TopicSpec]:
    """Each topic's spec: the count tasks placed rows by (they must agree), else a new
    topic's count from the rows (None: the largest partition staged + 1)."""
    counts: dict[str, int | None] = dict(plan.partition_counts)
    for m in messages:
        if m is None:
            continue
        for topic, n in m.partition_counts.items():
            if n is None:               # rows named their partitions: no count assumed
                counts.setdefault(topic, None)
                continue
            if counts.get(topic) is None:
                counts[topic] = n
            elif counts[topic] != n:
                raise CommitConflictError(
                    f"tasks partitioned topic {topic!r} for different partition counts "
                    f"({counts[topic]} and {n}): it was created or changed during the write")
    # a topic whose count the rows decide is made only by rows (no empty micro-batch's)
    staged = {sec.topic for sf in _staged(messages) for sec in sf.sections}
    return [TopicSpec(t, partitions_if_new=n, expected_partitions=n)
            for t, n in sorted(counts.items()) if n is not None or t in staged]


def _config(plan: _Plan) -> AppendConfig:
    return AppendConfig(segment_bytes=plan.wo.segment_bytes,
                        index_interval_bytes=plan.wo.index_interval_bytes,
                        fsync=plan.wo.fsync, sync_method=plan.wo.sync_method)


def _staged(messages) -> list[StagedFile]:
    return [m.staged for m in messages if m is not None and m.staged is not None]


def _commit(plan: _Plan, write_id: str, messages, mode: str) -> None:
    freeze_heap()
    fs, root = resolve_filesystem(plan.wo.path, plan.wo.filesystem_options)
    if plan.skip:
        abort_write(fs, root, write_id, _staged(messages))
        return
    commit_write(fs, root, write_id, _staged(messages), _specs(plan, messages), mode=mode,
                 config=_config(plan), offsets=plan.wo.offsets)


def _abort(plan: _Plan, write_id: str | None, messages) -> None:
    fs, root = resolve_filesystem(plan.wo.path, plan.wo.filesystem_options)
    abort_write(fs, root, write_id, _staged(messages), run=plan.run)


class KafkaLogBatchWriter(DataSourceArrowWriter):
    """Batch write. Picklable (holds only the plan). ``write`` runs in executors and
    returns a :class:`KafkaLogCommitMessage`; ``commit`` publishes every task's staged
    batches atomically (failed tasks' ``None`` messages are ignored — Spark only commits
    when every task succeeded); ``abort`` deletes staging and leaves the log untouched."""

    def __init__(self, plan: _Plan):
        self.plan = plan

    def write(self, iterator) -> KafkaLogCommitMessage:
        label, pid = _task_label(_task_context())
        return _write_task(self.plan, iterator, self.plan.write_id, label, pid)

    def commit(self, messages) -> None:
        _commit(self.plan, self.plan.write_id, messages, self.plan.mode)

    def abort(self, messages) -> None:
        _abort(self.plan, self.plan.write_id, messages)


def _checkpoint_query_id(location: str | None, plan: _Plan) -> str | None:
    """The query id Spark keeps in ``<checkpointLocation>/metadata`` (``{"id": ...}``)."""
    if not location:
        return None
    fs, path = resolve_filesystem(location, plan.wo.filesystem_options)
    try:
        with fs.open_input_stream(f"{path.rstrip('/')}/metadata") as f:
            first = f.read().split(b"\n", 1)[0]
        return json.loads(first.decode())["id"]
    except (OSError, ValueError, KeyError):
        return None


class KafkaLogStreamWriter(DataSourceStreamArrowWriter):
    """Streaming sink: each micro-batch is one write with id ``stream:<query>:<batch>``,
    committed exactly once however often Spark replays it. Stateless between calls."""

    def __init__(self, plan: _Plan):
        self.plan = plan

    def write(self, iterator) -> KafkaLogCommitMessage:
        tc = _task_context()
        label, pid = _task_label(tc)
        query_id = tc.getLocalProperty("sql.streaming.queryId") if tc else None
        batch = tc.getLocalProperty("streaming.sql.batchId") if tc else None
        if not query_id or batch is None:
            raise CommitConflictError("streaming write task has no query id / batch id in "
                                      "its Spark task properties")
        write_id = jr.stream_write_id(query_id, int(batch))
        return _write_task(self.plan, iterator, write_id, label, pid, query_id=query_id,
                           batch_id=int(batch))

    def _query_id(self, messages) -> str | None:
        ids = {m.query_id for m in messages if m is not None and m.query_id}
        if len(ids) > 1:
            raise CommitConflictError(f"commit messages name several queries: {sorted(ids)}")
        if ids:
            return ids.pop()
        return _checkpoint_query_id(self.plan.checkpoint_location, self.plan)

    def commit(self, messages, batchId: int) -> None:
        for m in messages:
            if m is not None and m.batch_id is not None and m.batch_id != batchId:
                raise CommitConflictError(f"commit of batch {batchId} got a message of "
                                          f"batch {m.batch_id}")
        query_id = self._query_id(messages)
        if query_id is None:
            if _staged(messages):
                raise CommitConflictError("cannot tell the streaming query id of batch "
                                          f"{batchId}: no task reported it and no "
                                          "checkpointLocation metadata was found")
            return          # no task wrote anything: nothing to commit
        _commit(self.plan, jr.stream_write_id(query_id, batchId), messages, self.plan.mode)

    def abort(self, messages, batchId: int) -> None:
        query_id = self._query_id(messages)
        _abort(self.plan, jr.stream_write_id(query_id, batchId) if query_id else None,
               messages)


def make_batch_writer(options, schema: StructType, overwrite: bool) -> KafkaLogBatchWriter:
    """``DataSource.writer``: plan a batch write (bad options fail before any task)."""
    plan = _make_plan(options, schema, overwrite, streaming=False)
    record_owner(*resolve_filesystem(plan.wo.path, plan.wo.filesystem_options), plan.write_id)
    return KafkaLogBatchWriter(plan)


def make_stream_writer(options, schema: StructType, overwrite: bool) -> KafkaLogStreamWriter:
    """``DataSource.streamWriter``: the same for a streaming query (``overwrite`` is
    Spark's complete output mode: each micro-batch replaces the topic's contents)."""
    return KafkaLogStreamWriter(_make_plan(options, schema, overwrite, streaming=True))
