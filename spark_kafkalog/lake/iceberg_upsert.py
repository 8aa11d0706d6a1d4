"""Upsert tables: a compacted topic exported as the latest value per key, the table Kafka's
log compaction would leave (``--mode upsert``).

Kafka's rules, per topic-partition: of the records with one key only the last (highest
offset) is kept; a tombstone (null value) deletes the key; a record without a key is
removed by the cleaner (a compacted topic's broker refuses to append one): here it is
skipped and counted (``null_keys``). Aborted records never count (the export reads
read_committed; read_uncommitted is refused for an upsert table).

A run: :class:`LatestPerKey` folds the new range's windows down to the last record per
(topic, partition, key) — memory: one row per key the range touches, plus a window;
:func:`rewrite_plan` then finds the live data files holding a row of any of those keys
(reading only the identifier columns: topic, partition and the key's bytes, ``key``
or, with a typed key, ``key_raw``) and writes each again without them (copy-on-write:
pyiceberg 0.12 writes no delete file and cannot read equality deletes, so every reader
sees plain data files); the exporter commits
the removed files, the rewritten ones and the new rows (tombstones add none) in ONE
snapshot (an ``overwrite``, or an ``append`` when no file was rewritten) with the
summary keys of every run.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.errors import TableError
from spark_kafkalog.lake.iceberg_table import data_files

__all__ = ["LatestPerKey", "latest_per_key", "rewrite_plan"]

_ROW = "__kafkalog_row"


def latest_per_key(raw: pa.Table) -> pa.Table:
    """The rows of ``raw`` (Spark's Kafka schema, every key non-null) that are the last
    of their (topic, partition, key) by offset, in ``raw``'s order."""
    if raw.num_rows == 0:
        return raw
    row = pa.array(range(raw.num_rows), pa.int64())
    ids = raw.select(["topic", "partition", "key", "offset"])
    last = ids.group_by(["topic", "partition", "key"], use_threads=False) \
        .aggregate([("offset", "max")])
    # (topic, partition, offset) names one row: join the maxima back to row numbers
    where = ids.select(["topic", "partition", "offset"]).append_column(_ROW, row)
    won = where.join(last.select(["topic", "partition", "offset_max"])
                     .rename_columns(["topic", "partition", "offset"]),
                     keys=["topic", "partition", "offset"], join_type="inner",
                     use_threads=False)
    rows = won.column(_ROW).combine_chunks()
    return raw.take(rows.take(pc.sort_indices(rows)))


class LatestPerKey:
    """The last record per (topic, partition, key) of the windows :meth:`add`ed (each
    partition's in offset order, as the exporter reads them). Records without a key are
    counted in ``null_keys`` and dropped. Folds what it holds whenever it has grown past
    twice the rows of its last fold, so it keeps about one row per key."""

    def __init__(self, fold_rows: int):
        self.parts: list[pa.Table] = []
        self.rows = 0
        self.records = 0
        self.null_keys = 0
        self._limit = max(1, fold_rows)

    def add(self, raw: pa.Table) -> None:
        self.records += raw.num_rows
        keyed = raw.filter(pc.is_valid(raw.column("key")))
        self.null_keys += raw.num_rows - keyed.num_rows
        if keyed.num_rows:
            part = latest_per_key(keyed)
            self.parts.append(part)
            self.rows += part.num_rows
        if len(self.parts) > 1 and self.rows > self._limit:
            self._fold()
            self._limit = max(self._limit, 2 * self.rows)

    def _fold(self) -> None:
        if len(self.parts) > 1:
            self.parts = [latest_per_key(pa.concat_tables(self.parts))]
            self.rows = self.parts[0].num_rows

    def result(self) -> pa.Table | None:
        """The winners (raw rows, tombstones included), or None when no record had a
        key."""
        self._fold()
        return self.parts[0] if self.parts else None


def _keys_of(table: pa.Table, columns) -> pa.Table:
    """``columns`` (topic, partition and the key's bytes) of ``table`` as string, int32,
    binary, named topic, partition, key (a table read back may use large types): what
    the joins compare."""
    types = (pa.string(), pa.int32(), pa.binary())
    return pa.table({n: table.column(c).cast(t)
                     for n, c, t in zip(("topic", "partition", "key"), columns, types)})


def _hits(rows: pa.Table, keys: pa.Table, columns) -> pa.Array:
    """A boolean per row of ``rows``: is its identifier (``columns``) in ``keys``."""
    row = pa.array(range(rows.num_rows), pa.int64())
    left = _keys_of(rows, columns).append_column(_ROW, row)
    found = left.join(keys, keys=["topic", "partition", "key"], join_type="left semi",
                      use_threads=False)
    return pc.is_in(row, value_set=found.column(_ROW).combine_chunks())


def _partitions_filter(keys: pa.Table):
    """An Iceberg row filter for the topic-partitions of ``keys``: the scan planning
    skips the data files whose partition values or column bounds hold none of them."""
    from pyiceberg.expressions import And, EqualTo, In, Or

    pairs = keys.group_by(["topic", "partition"], use_threads=False).aggregate([])
    by_topic: dict[str, set] = {}
    for t, q in zip(pairs.column("topic").to_pylist(), pairs.column("partition").to_pylist()):
        by_topic.setdefault(t, set()).add(q)
    expr = None
    for t, qs in sorted(by_topic.items()):
        one = And(EqualTo("topic", t), In("partition", qs))
        expr = one if expr is None else Or(expr, one)
    return expr


def rewrite_plan(table, identifier: str, keys: pa.Table, write_uuid, counter, *,
                 on_file=None) -> tuple[list, list, int]:
    """The live data files of ``table`` that hold a row whose identifier (topic,
    partition, and ``key`` or ``key_raw``: the key's bytes) is in ``keys`` (raw rows), and the data files that replace them (their other rows, sorted by
    partition, offset): ``(removed, added, rows removed)``. A table with delete files
    pyiceberg cannot apply (equality deletes another tool wrote) is a TableError."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    if table.current_snapshot() is None or keys.num_rows == 0:
        return [], [], 0
    schema = table.schema()
    names = {schema.find_column_name(i) for i in schema.identifier_field_ids}
    columns = ("topic", "partition", next(iter(names - {"topic", "partition"})))
    keys = _keys_of(keys, ("topic", "partition", "key"))
    try:
        tasks = list(table.scan(row_filter=_partitions_filter(keys)).plan_files())
        id_scan = ArrowScan(table.metadata, table.io, schema.select(*columns),
                            AlwaysTrue())
        full_scan = ArrowScan(table.metadata, table.io, schema, AlwaysTrue())
        removed, added, gone = [], [], 0
        for task in tasks:
            if not pc.any(_hits(id_scan.to_table([task]), keys, columns)).as_py():
                continue
            rows = full_scan.to_table([task])
            hits = _hits(rows, keys, columns)
            kept = rows.filter(pc.invert(hits))
            gone += rows.num_rows - kept.num_rows
            removed.append(task.file)
            if kept.num_rows:
                kept = kept.sort_by([("topic", "ascending"), ("partition", "ascending"),
                                     ("offset", "ascending")])
                for data_file in data_files(table, kept, write_uuid, counter):
                    added.append(data_file)
                    if on_file is not None:
                        on_file(data_file)
    except NotImplementedError as err:        # pyiceberg: equality deletes
        raise TableError(f"table {identifier}: {err}: an upsert run cannot rewrite it"
                         ) from err
    return removed, added, gone
