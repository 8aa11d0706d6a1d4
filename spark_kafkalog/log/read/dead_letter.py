"""Dead-letter files: the records a typed read could not decode, written raw and whole as
Parquet (:data:`~spark_kafkalog.typed.dead_letter.DEAD_LETTER_SCHEMA`) into a directory.

One file per topic-partition offset range a reader covered, named
``<topic>-<partition>-<start>-<end>.parquet`` (offsets zero-padded to 20 digits, as
Kafka's segment names; ``start <= offset < end``), so a task retried, a micro-batch
replayed or a read re-run over the same range replaces its file instead of adding a
second one. A file is written under a hidden temporary name and published whole
(:class:`DeadLetterFile`): a killed writer leaves no half file under a visible name, and
readers of the directory (Spark, pyarrow datasets) skip hidden names. Only ranges with at
least one bad record get a file.
"""
from __future__ import annotations

import os
import re
import uuid
from typing import Iterable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from spark_kafkalog.errors import InvalidOptionError, storage_errors
from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.io.fs import delete_file, fsync_file, join, resolve_filesystem, write_atomic
from spark_kafkalog.typed.dead_letter import DEAD_LETTER_SCHEMA

__all__ = ["DeadLetterFile", "DeadLetterSink", "dead_letter_name", "parse_dead_letter_name",
           "dead_letter_files", "count_dead_letters", "open_dead_letter_dir"]

_NAME = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)-(?P<start>\d{20})-(?P<end>\d{20})"
                   r"\.parquet")


def dead_letter_name(topic: str, partition: int, start: int, end: int) -> str:
    """The file name of the dead letters of ``topic``-``partition`` offsets [start, end)."""
    return f"{topic}-{partition}-{start:020d}-{end:020d}.parquet"


def parse_dead_letter_name(name: str) -> tuple[str, int, int, int] | None:
    """(topic, partition, start, end) of a dead-letter file name, None for another name."""
    m = _NAME.fullmatch(name)
    if m is None:
        return None
    return m["topic"], int(m["partition"]), int(m["start"]), int(m["end"])


def open_dead_letter_dir(uri: str, options: Mapping[str, object] | None = None,
                         option: str = "deadLetterPath") -> tuple[pafs.FileSystem, str]:
    """(filesystem, directory) of a dead-letter URI (any filesystem a log dir can be on);
    the directory is created."""
    try:
        fs, path = resolve_filesystem(uri, options)
    except InvalidOptionError as err:
        raise InvalidOptionError(f"{option}: {err}") from err
    with storage_errors("mkdir", path):
        fs.create_dir(path, recursive=True)
    return fs, path


class DeadLetterFile:
    """One dead-letter file being written: batches streamed in (a local file, so memory
    holds one batch; on other filesystems the encoded Parquet is held until
    :meth:`commit`, which uploads it in one atomic write), nothing visible under ``name``
    until :meth:`commit`."""

    def __init__(self, fs: pafs.FileSystem, directory: str, name: str):
        self.fs, self.path = fs, join(directory, name)
        self.rows = 0
        self._local = isinstance(fs, pafs.LocalFileSystem)
        self._tmp = join(directory, f".{name}.{uuid.uuid4().hex[:12]}.tmp")
        self._sink = None if self._local else pa.BufferOutputStream()
        self._writer: pq.ParquetWriter | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.num_rows:
            return
        if self._writer is None:
            where = self._tmp if self._local else self._sink
            with storage_errors("write", self._tmp):
                self._writer = pq.ParquetWriter(where, DEAD_LETTER_SCHEMA)
        with storage_errors("write", self._tmp):
            self._writer.write_batch(batch)
        self.rows += batch.num_rows

    def commit(self) -> int:
        """Publish the file under its name (replacing a file of that name); its rows."""
        if self._writer is None:
            return 0
        with storage_errors("write", self._tmp):
            self._writer.close()
        self._writer = None
        if self._local:
            fsync_file(self._tmp)
            sysio.replace(self._tmp, self.path)
            sysio.fsync_dir(os.path.dirname(self.path) or ".")
        else:
            write_atomic(self.fs, self.path, self._sink.getvalue())
        return self.rows

    def abort(self) -> None:
        """Drop what was written; nothing is published."""
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, pa.ArrowException):
                pass                     # the temporary file goes next anyway
            self._writer = None
        if self._local:
            delete_file(self.fs, self._tmp, missing_ok=True)


class DeadLetterSink:
    """The dead letters of one reader task: ``ranges`` ``(topic, partition, start, end)``
    (its slices, disjoint), one :class:`DeadLetterFile` per range that gets a bad record.
    Call it with each batch of dead-letter rows; :meth:`commit` publishes every file when
    the task read its slices through, :meth:`abort` drops them when it failed."""

    def __init__(self, fs: pafs.FileSystem, directory: str,
                 ranges: Iterable[tuple[str, int, int, int]]):
        self.fs, self.directory = fs, directory
        self.ranges = sorted(ranges)
        self._files: dict[tuple, DeadLetterFile] = {}
        #: the paths :meth:`commit` published
        self.published: list[str] = []

    def _range_of(self, topic: str, partition: int, offset: int) -> tuple:
        for r in self.ranges:
            if r[0] == topic and r[1] == partition and r[2] <= offset < r[3]:
                return r
        raise ValueError(f"{topic}-{partition} offset {offset} is in none of the task's "
                         f"ranges {self.ranges}")

    def __call__(self, rows: pa.RecordBatch) -> None:
        keys = [self._range_of(t, p, o) for t, p, o in zip(
            rows.column("topic").to_pylist(), rows.column("partition").to_pylist(),
            rows.column("offset").to_pylist())]
        for r in dict.fromkeys(keys):
            f = self._files.get(r)
            if f is None:
                f = self._files[r] = DeadLetterFile(self.fs, self.directory,
                                                    dead_letter_name(*r))
            f.write(rows.filter(pa.array([k == r for k in keys])))

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self._files.values())

    def commit(self) -> int:
        """Publish every file; the rows written."""
        total = 0
        for f in self._files.values():
            total += f.commit()
            self.published.append(f.path)
        self._files.clear()
        return total

    def abort(self) -> None:
        for f in self._files.values():
            f.abort()
        self._files.clear()


def dead_letter_files(fs: pafs.FileSystem, directory: str) -> list[str]:
    """The published dead-letter files of ``directory`` (hidden temporaries left out)."""
    try:
        infos = fs.get_file_info(pafs.FileSelector(directory, allow_not_found=True))
    except OSError as err:
        raise sysio.storage_error("list", directory, err) from err
    return sorted(i.path for i in infos if i.type == pafs.FileType.File
                  and parse_dead_letter_name(i.base_name) is not None)


def count_dead_letters(fs: pafs.FileSystem, directory: str) -> int:
    """The rows of every dead-letter file of ``directory`` (from the Parquet footers)."""
    total = 0
    for path in dead_letter_files(fs, directory):
        with storage_errors("read", path), fs.open_input_file(path) as f:
            total += pq.ParquetFile(f).metadata.num_rows
    return total
