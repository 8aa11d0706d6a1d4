"""Reads looped while another process appends and compacts: every read is one state.

The child process alternates a commit (commit ``k`` writes value ``b"k/<key>"`` for the
keys ``i`` with ``(i + k) % 3 == 0``; small segments, so commits roll them) and a
compaction of everything but the active segment. A read -- the library's ``read_table``
or a Spark batch read's plan and task reads, no session -- must never fail, return rows
in increasing offset order, and show for every key the value of the last commit that
wrote it among the commits it saw: compaction never changes what the latest value of a
key is, so a read that mixed an old listing with new files (or the other way round)
would lose keys or fail.
"""
from __future__ import annotations

import os
import time
import traceback

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from spark_kafkalog.log.write import AppendConfig
from tests.log.test_appender_util import R, write
from tests.log.test_snapshot_race import library_read, spark_read

FS = pafs.LocalFileSystem()
KEYS = 30
COMMITS = 60


def commit_records(k: int) -> list[R]:
    return [R(b"key-%d" % i, b"%d/key-%d" % (k, i), 1_700_000_000_000 + k)
            for i in range(KEYS) if (i + k) % 3 == 0]


def latest_after(c: int) -> dict:
    out = {}
    for k in range(c):
        for r in commit_records(k):
            out[r.key] = r.value
    return out


def start_child(root: str) -> int:
    cfg = AppendConfig(segment_bytes=1500, index_interval_bytes=300, lock_timeout=120)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for k in range(1, COMMITS):
                write(FS, root, f"batch:c{k}", {0: commit_records(k)}, config=cfg,
                      per_batch=4)
                compact_topic(root, "t", CompactSettings(force=True), lock_timeout=120)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    return pid


def problem(table) -> str | None:
    offsets = table["offset"].to_pylist()
    if offsets != sorted(set(offsets)):
        return "offsets not increasing"
    seen = {}
    top = -1
    for key, value in zip(table["key"].to_pylist(), table["value"].to_pylist()):
        seen[key] = value
        top = max(top, int(value.split(b"/")[0]))
    want = latest_after(top + 1)
    if seen != want:
        missing = sorted(set(want) - set(seen))
        return f"state after commit {top} wrong (missing {missing[:3]}, {len(seen)} keys)"
    return None


@pytest.mark.parametrize("reader", [library_read, spark_read], ids=["read_table", "spark"])
def test_reads_while_compacting_are_one_state(tmp_path, reader):
    root = str(tmp_path / "logs")
    write(FS, root, "batch:c0", {0: commit_records(0)}, partitions=1, per_batch=4)
    pid = start_child(root)
    reads, bad, done = 0, [], False
    deadline = time.monotonic() + float(os.environ.get("KAFKALOG_RACE_SECONDS", "8"))
    try:
        while time.monotonic() < deadline and not done:
            t = reader(root)
            reads += 1
            if t is not None and t.num_rows:
                p = problem(t)
                if p:
                    bad.append(p)
            done = os.waitpid(pid, os.WNOHANG)[0] != 0
    finally:
        if not done:
            _, status = os.waitpid(pid, 0)
    final = reader(root)
    assert problem(final) is None
    assert reads > 3
    assert not bad, f"{len(bad)} of {reads} reads were not one state, e.g. {bad[:5]}"
