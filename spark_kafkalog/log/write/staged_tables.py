"""The staged files' batch tables as the commit plans from them: read once per file,
checked against the file's sections, as int64 columns (and all files' columns joined, so
a partition's batches from many tasks are gathered with one index)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow.fs as pafs

from spark_kafkalog.errors import CommitConflictError, CorruptRecordError
from spark_kafkalog.log.io import read_range
from spark_kafkalog.log.write.staging import BATCH_TABLE_DTYPE, StagedFile


class Columns:
    """A staged file's batch table as contiguous int64 columns, checked once against its
    sections (each covers rows of the table, starts at relative position 0 and its
    batches' sizes add up to the section's)."""

    FIELDS = ("size", "position", "count", "base_offset", "max_timestamp")

    def __init__(self, sf: StagedFile, table: np.ndarray):
        self.size = table["size"].astype(np.int64)
        self.position = table["position"].astype(np.int64)
        self.count = table["last_offset_delta"].astype(np.int64) + 1
        self.base_offset = table["base_offset"].astype(np.int64)
        self.max_timestamp = table["max_timestamp"].astype(np.int64)
        if not sf.sections:
            return
        starts = np.fromiter((sec.batch_start for sec in sf.sections), np.int64,
                             len(sf.sections))
        counts = np.fromiter((sec.batch_count for sec in sf.sections), np.int64,
                             len(sf.sections))
        outside = np.flatnonzero((counts <= 0) | (starts < 0)
                                 | (starts + counts > len(table)))
        if len(outside):
            raise CommitConflictError("staging batch table does not match its section",
                                      path=sf.path)
        ends = np.concatenate([[0], np.cumsum(self.size)])
        sums = ends[starts + counts] - ends[starts]
        sizes = np.fromiter((sec.size for sec in sf.sections), np.int64, len(sf.sections))
        bad = np.flatnonzero((self.position[starts] != 0) | (sums != sizes))
        if len(bad):
            raise CorruptRecordError("staging batch table does not tile its section",
                                     path=sf.path, position=sf.sections[int(bad[0])].position)


class TablesCache:
    """Batch tables of the staged files, read once."""

    def __init__(self, fs: pafs.FileSystem, staged: Sequence[StagedFile]):
        self.fs = fs
        self.staged = staged
        self._tables: dict[int, np.ndarray] = {}
        self._columns: dict[int, Columns] = {}
        self._joined: tuple[dict[str, np.ndarray], np.ndarray] | None = None

    def table(self, i: int) -> np.ndarray:
        t = self._tables.get(i)
        if t is None:
            sf = self.staged[i]
            n = sf.batch_count * BATCH_TABLE_DTYPE.itemsize
            raw = read_range(self.fs, sf.path, sf.table_position, n)
            if len(raw) != n:
                raise CommitConflictError("staging file is shorter than its commit message "
                                          "says (deleted or truncated?)", path=sf.path,
                                          position=sf.table_position)
            t = np.frombuffer(raw, dtype=BATCH_TABLE_DTYPE)
            self._tables[i] = t
        return t

    def columns(self, i: int) -> Columns:
        c = self._columns.get(i)
        if c is None:
            c = self._columns[i] = Columns(self.staged[i], self.table(i))
        return c

    def joined(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Every staged file's columns one after the other (``{name: column}``) and the
        row where each file's start: a partition's batches from many files are then
        gathered with one index (see :class:`_GroupBatches`)."""
        if self._joined is None:
            cols = [self.columns(i) for i in range(len(self.staged))]
            self._joined = (
                {name: np.concatenate([getattr(c, name) for c in cols])
                 for name in Columns.FIELDS},
                np.cumsum([0] + [len(c.size) for c in cols], dtype=np.int64))
        return self._joined
