"""Writing an Arrow table to a Kafka log dir without Spark: encode (``format.encode``),
stage and commit in one call, whole or not at all. The library door for jobs that
rewrite logs (compaction, copy, restore) with ``offsets="preserve"``: each record keeps
the offset in its ``offset`` column."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from spark_kafkalog.errors import BadRowError, InvalidOptionError
from spark_kafkalog.format.encode import encode_partitioned
from spark_kafkalog.format.npview import to_numpy
from spark_kafkalog.log.io import resolve_filesystem
from spark_kafkalog.log.model.names import internal_write_refusal
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.commit import CommitResult, abort_write, commit_write
from spark_kafkalog.log.write.config import OFFSET_MODES, AppendConfig, TopicSpec
from spark_kafkalog.log.write.files import topic_partitions
from spark_kafkalog.log.write.staging import StagingWriter

#: batch.size of :func:`write_table` (as the Spark writer's default)
DEFAULT_BATCH_BYTES = 1024 * 1024


def write_table(path: str, topic: str, table: pa.Table, *, offsets: str = "assign",
                partitions: int | None = None, compression: str = "none",
                compression_level: int | None = None,
                batch_bytes: int = DEFAULT_BATCH_BYTES, mode: str = "append",
                config: AppendConfig | None = None, filesystem: pafs.FileSystem | None = None,
                write_id: str | None = None, allow_internal_topic: bool = False
                ) -> CommitResult:
    """Append (or, ``mode="overwrite"``, replace) ``table``'s rows to ``topic`` in the log
    dir ``path`` (a URI, or a path in ``filesystem``), in one commit.

    Columns as :func:`spark_kafkalog.format.encode.encode` takes them (``value``; ``key``,
    ``timestamp``, ``headers`` optional) plus ``partition`` (int, no nulls; optional for
    a one-partition topic). ``offsets="preserve"``: also ``offset`` (and optionally
    ``timestampType``, 1 keeping LogAppendTime): every record keeps its offset; a
    partition's rows must be in strictly increasing offset order and at or past the
    partition's log end offset. A new topic gets ``partitions`` partitions (default: the
    largest ``partition`` of the rows + 1, or 1 without that column). A broker's internal
    topic (``__consumer_offsets``, ``__transaction_state``, ...) is refused unless
    ``allow_internal_topic`` (a restore that means it).

    Raises :class:`BadRowError` (naming topic, partition and offsets) for offsets that do
    not increase or fall below the log end, rows outside the topic's partitions;
    :class:`InvalidOptionError` for bad columns or options; see
    :func:`~spark_kafkalog.log.write.commit.commit_write` for the rest."""
    if offsets not in OFFSET_MODES:
        raise InvalidOptionError(f"offsets must be one of {', '.join(OFFSET_MODES)}, not "
                                 f"{offsets!r}")
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    jr.validate_topic(topic)
    why = None if allow_internal_topic else \
        internal_write_refusal(topic, "allow_internal_topic=True")
    if why:
        raise InvalidOptionError(why)
    if filesystem is None:
        fs, root = resolve_filesystem(path)
    else:
        fs, root = filesystem, path
    existing = topic_partitions(fs, root, topic)
    if existing:
        n = len(existing)
    elif partitions is not None:
        n = partitions
    else:
        n = _largest_partition(table) + 1
    if existing and partitions is not None and partitions != n:
        raise InvalidOptionError(f"partitions: topic {topic!r} exists with {n} partition{'' if n == 1 else 's'}, "
                                 f"not {partitions}")
    parts = _partitions(table, n, topic)
    write_id = write_id or jr.batch_write_id()
    staging = StagingWriter(fs, root, write_id, "table")
    try:
        if table.num_rows:
            data, sections = encode_partitioned(
                table, parts, n, compression=compression,
                compression_level=compression_level, max_batch_bytes=batch_bytes,
                offsets=offsets)
            view = memoryview(data)
            for p, start, end, index in sections:
                staging.add(topic, p, view[start:end], index)
        staged = staging.finish()
    except BaseException:
        staging.abort()
        raise
    try:
        return commit_write(fs, root, write_id, [staged],
                            [TopicSpec(topic, partitions_if_new=n, expected_partitions=n)],
                            mode=mode, config=config, offsets=offsets)
    except BaseException:
        abort_write(fs, root, write_id, [staged])
        raise


def _largest_partition(table: pa.Table) -> int:
    """The largest ``partition`` of the rows (0 without the column or rows)."""
    if "partition" not in table.column_names or not table.num_rows:
        return 0
    top = pc.max(table.column("partition")).as_py()
    return 0 if top is None or top < 0 else int(top)


def _partitions(table: pa.Table, n: int, topic: str) -> np.ndarray:
    if "partition" not in table.column_names:
        if n != 1:
            raise InvalidOptionError(f"topic {topic!r} has {n} partitions: the table needs a "
                                     "'partition' column")
        return np.zeros(table.num_rows, dtype=np.int32)
    col = table.column("partition").combine_chunks()
    if not pa.types.is_integer(col.type):
        raise InvalidOptionError(f"column 'partition' has type {col.type}; expected int")
    if col.null_count:
        row = int(pc.index(pc.is_null(col), True).as_py())
        raise BadRowError(f"column 'partition': null partition at row {row}")
    parts = np.asarray(to_numpy(col), dtype=np.int64)
    bad = np.flatnonzero((parts < 0) | (parts >= n))
    if len(bad):
        raise BadRowError(f"row {int(bad[0])} has partition {int(parts[bad[0]])}, outside "
                          f"topic {topic!r}, which has {n} partition{'' if n == 1 else 's'} "
                          f"(0..{n - 1})")
    return parts.astype(np.int32)
