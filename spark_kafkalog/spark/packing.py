"""Packing: several small slices (of any topic-partitions) in one Spark task.

A Spark task costs about 30 ms of Spark and Python-worker overhead whatever it reads, so
a topic of many small partitions planned one task per partition is dominated by it.
Spark's file sources pack small files into one task (``spark.sql.files.maxPartitionBytes``
and ``openCostInBytes``); this is the same rule for log slices, except that slices are
taken in (topic, partition, offset) order rather than largest first, so the tasks read
the topic in that order, as unpacked ones do: a slice goes into the current task unless
it would take it past the target (``maxPartitionBytes``), each counting its estimated
bytes plus ``openCostInBytes`` (what starting a slice costs, in bytes of reading).

Planning has already cut large partitions into slices of at most the target, and applied
``maxRecordsPerPartition`` / ``minPartitions``, which only ever split; packing keeps their
meaning: a task never holds more than ``maxRecordsPerPartition`` rows, and the target
shrinks to the total over ``minPartitions`` or the cores (as Spark's file source does
with its minimum partition number and default parallelism); packing is skipped when it
would still leave fewer than ``minPartitions`` tasks. A packed task reads its slices one
after another, each in offset order, and joins their small Arrow batches (spark/reader.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

__all__ = ["PackedSlices", "pack_slices", "DEFAULT_OPEN_COST_BYTES", "REMOTE_OPEN_COST_BYTES",
           "default_open_cost"]

#: ``openCostInBytes`` default on local disk, measured (bench/bench_open_cost.py,
#: docs/PERFORMANCE.md "Many partitions"): a slice costs a packed task ~0.2 ms of worker
#: CPU, the time a task takes to read ~16 KB end to end
DEFAULT_OPEN_COST_BYTES = 16 * 1024
#: the default on other filesystems (object stores, HDFS), Spark's own: there a slice
#: costs two requests (a HEAD and a GET, milliseconds each)
REMOTE_OPEN_COST_BYTES = 4 * 1024 * 1024


def default_open_cost(local: bool) -> int:
    """``openCostInBytes`` when the option is not given: by where the log dirs are."""
    return DEFAULT_OPEN_COST_BYTES if local else REMOTE_OPEN_COST_BYTES


@dataclass(frozen=True)
class PackedSlices(InputPartition):
    """One Spark task reading several :class:`~spark_kafkalog.spark.planning.LogSlice` s
    in order. Small and picklable (each slice is)."""
    slices: tuple

    @property
    def est_bytes(self) -> int:
        return sum(s.est_bytes for s in self.slices)

    @property
    def est_records(self) -> int:
        return sum(s.est_records for s in self.slices)


def _order(s):
    return (s.topic, s.partition, s.start_offset)


def pack_slices(slices: list, *, target_bytes: int, open_cost: int,
                max_records: int | None = None, min_partitions: int | None = None,
                parallelism: int | None = None) -> list:
    """The tasks for ``slices``: a :class:`LogSlice` alone when nothing joins it, else a
    :class:`PackedSlices`; ordered by their first slice's (topic, partition, offset).
    ``parallelism`` (default: this machine's cores, standing in for Spark's default
    parallelism, which a Python data source cannot see) lowers the target to the total
    over it, so a few mid-sized partitions still spread over the cores, as Spark's
    ``bytesPerCore`` rule does."""
    if len(slices) <= 1:
        return list(slices)
    target = int(target_bytes)
    spread = max(min_partitions or 0, parallelism or os.cpu_count() or 1)
    total = sum(s.est_bytes + open_cost for s in slices)
    target = min(target, max(open_cost, total // spread))
    bins: list[list] = []
    cur: list = []
    cur_bytes = cur_rows = 0
    for s in sorted(slices, key=_order):
        over = cur_bytes + s.est_bytes > target
        if max_records is not None and cur_rows + s.est_records > max_records:
            over = True
        if cur and over:
            bins.append(cur)
            cur, cur_bytes, cur_rows = [], 0, 0
        cur.append(s)
        cur_bytes += s.est_bytes + open_cost
        cur_rows += s.est_records
    if cur:
        bins.append(cur)
    if min_partitions is not None and len(bins) < min(min_partitions, len(slices)):
        return list(slices)
    return [b[0] if len(b) == 1 else PackedSlices(tuple(b)) for b in bins]
