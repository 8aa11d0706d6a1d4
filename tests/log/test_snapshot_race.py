"""A read is one snapshot: reads looped against a writer process committing to several
partitions at once must each see every partition at the same commit, and never part of
a commit inside a partition.

The writer (a forked process, the library's appender) commits ``COMMITS`` writes; write
``k`` puts ``per(p)`` records valued ``b"k/p/i"`` in partition ``p`` (explicit placement,
so the expected contents of each partition after ``c`` whole commits are known). Small
segments make the appender roll segments inside a commit, so a reader can also meet a
segment the commit is still filling. Readers: the library's ``read_table`` and Spark's
batch planning plus the task read (``plan`` + ``read_slice``, no session needed).

Bounded in reads and seconds; ``KAFKALOG_RACE_SECONDS`` (or the ``slow`` variant,
``KAFKALOG_RACE_RUNS`` races) runs longer; ``KAFKALOG_RACE_LOG`` names a file that gets
one line per race (reads, failures).
"""
from __future__ import annotations

import os
import time
import traceback

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.write import AppendConfig
from tests.log.test_appender_util import R, write

FS = pafs.LocalFileSystem()
PARTS = 6
COMMITS = 100


def per(p: int) -> int:
    """Records partition ``p`` gets from every commit (different per partition, so a
    count can only be a whole number of commits one way)."""
    return 60 + 17 * p


def commit_records(k: int) -> dict[int, list[R]]:
    return {p: [R(b"k%d" % i, b"%d/%d/%d" % (k, p, i), 1_700_000_000_000 + k)
                for i in range(per(p))] for p in range(PARTS)}


def start_writer(root: str, commits: int = COMMITS) -> int:
    """Fork a process that commits ``commits`` writes to topic ``t`` and exits."""
    cfg = AppendConfig(segment_bytes=16_000, index_interval_bytes=1024, lock_timeout=120)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for k in range(commits):
                write(FS, root, f"batch:c{k}", commit_records(k), partitions=PARTS,
                      config=cfg, per_batch=20)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    return pid


def snapshot_problem(table: pa.Table) -> str | None:
    """None when ``table`` is every partition at one commit (whole commits 0..c-1 in
    offset order), else what is wrong."""
    at = {}
    for p in range(PARTS):
        part = table.filter(pc.equal(table["partition"], p))
        values = part["value"].to_pylist()
        offsets = part["offset"].to_pylist()
        if offsets != sorted(offsets):
            return f"partition {p}: rows not in offset order"
        n = len(values)
        if n % per(p):
            return f"partition {p}: {n} records, part of a commit ({n / per(p):.2f} commits)"
        c = n // per(p)
        want = [b"%d/%d/%d" % (k, p, i) for k in range(c) for i in range(per(p))]
        if values != want:
            return f"partition {p}: {n} records that are not commits 0..{c - 1} in order"
        at[p] = c
    if len(set(at.values())) > 1:
        return f"partitions at different commits {[at[p] for p in range(PARTS)]}"
    return None


def library_read(root: str) -> pa.Table:
    return read_table(root, "t", include_headers=False)


def spark_read(root: str) -> pa.Table:
    """What a Spark batch read does, without a session: plan on the driver (one fresh
    LogDirs), then each task reads its slice with its own LogDirs."""
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader

    reader = KafkaLogReader(parse_read_options({"path": root, "subscribe": "t"}))
    batches = [b for task in reader.partitions() for b in reader.read(task)]
    return pa.Table.from_batches(batches) if batches else None


def race(tmp_path, reader, *, seconds: float, max_reads: int) -> tuple[int, list[str]]:
    """Loop ``reader`` while the writer commits; returns (reads, problems)."""
    root = str(tmp_path / "logs")
    # the topic exists before the loop starts (commit 0), so every read finds it
    write(FS, root, "batch:c-first", {p: [] for p in range(PARTS)}, partitions=PARTS)
    pid = start_writer(root)
    reads, problems = 0, []
    deadline = time.monotonic() + seconds
    done = False
    try:
        while reads < max_reads and time.monotonic() < deadline:
            t = reader(root)
            reads += 1
            if t is not None:
                problem = snapshot_problem(t)
                if problem:
                    problems.append(problem)
            if not done:
                done = os.waitpid(pid, os.WNOHANG)[0] != 0
                if done:
                    break
    finally:
        if not done:
            os.waitpid(pid, 0)          # the writer finishes its commits on its own
    log = os.environ.get("KAFKALOG_RACE_LOG")
    if log:                             # for measuring: one line per race
        with open(log, "a") as f:
            f.write(f"{reader.__name__} reads={reads} bad={len(problems)} {problems[:3]}\n")
    # the finished log is every commit, whole
    final = reader(root)
    assert final is not None and snapshot_problem(final) is None
    assert len(final.filter(pc.equal(final["partition"], 0))) == COMMITS * per(0)
    return reads, problems


SECONDS = float(os.environ.get("KAFKALOG_RACE_SECONDS", "8"))
RUNS = int(os.environ.get("KAFKALOG_RACE_RUNS", "3"))


@pytest.mark.parametrize("reader", [library_read, spark_read], ids=["read_table", "spark"])
def test_reads_are_one_snapshot_while_writing(tmp_path, reader):
    reads, problems = race(tmp_path, reader, seconds=SECONDS, max_reads=400)
    assert reads > 0
    assert not problems, (f"{len(problems)} of {reads} reads were not one snapshot, e.g. "
                          f"{problems[:5]}")


@pytest.mark.slow
@pytest.mark.parametrize("reader", [library_read, spark_read], ids=["read_table", "spark"])
def test_reads_are_one_snapshot_while_writing_long(tmp_path, reader):
    total, bad = 0, []
    for i in range(RUNS):
        reads, problems = race(tmp_path / str(i), reader, seconds=60, max_reads=100_000)
        total += reads
        bad += problems
    assert not bad, f"{len(bad)} of {total} reads were not one snapshot, e.g. {bad[:5]}"
