"""Compaction survives SIGKILL at every step: the log reads all old or all new.

A forked child compacts a two-partition topic (small ``segment_bytes``, so each
partition is cleaned into several groups) with a fault hook that SIGKILLs it at its N-th
step, for every N: lock, begin, each group's ``.cleaned`` files, the commit point, each
``.cleaned -> .swap`` rename, each old file moved to ``.deleted``, each ``.swap`` renamed
into place, the cleaner checkpoint, done. After each kill:

* a read-only reader (no lock, no recovery) sees, per partition, exactly the old log or
  exactly the new one -- the new one once the commit point has passed and no ``.cleaned``
  file is left in the partition's dir (its swaps are in), the old one before -- and
  reads the killed state at once: it never waits for the files to settle;
* recovery (the next open) leaves exactly the old log (killed before the commit point)
  or the new one, ``kafkalog verify`` clean, no ``.cleaned`` / ``.swap`` files, no pending
  record; a few recoveries are killed themselves at each of their steps first;
* compacting again afterwards lands the new log.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import recover_topic
from tests.log.logbuilder import LogDirBuilder
from tests.log.test_compact import T0, build, check_clean, read_all
from tests.log.killing import FaultCounter, run_killed
from tests.log.test_crash import FS

SETTINGS = CompactSettings(segment_bytes=2500, delete_retention_ms=3_600_000)


def read_parts(root: Path) -> dict[int, list]:
    return {q: [x for x in read_all(root, "c", partitions=[q])] for q in (0, 1)}


def swapped_in(root: Path, q: int) -> bool:
    """Whether a committed swap of partition ``q`` reads as the new log: no ``.cleaned``
    file left (discovery ignores the ``.swap`` files until the lowest one is in)."""
    return not any(n.endswith(".cleaned") for n in os.listdir(root / f"c-{q}"))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The log before compaction, the reads before and after, and the fault points."""
    base = tmp_path_factory.mktemp("pristine")
    b = LogDirBuilder(base / "log")
    build(base / "log", 11, 0, b)
    build(base / "log", 12, 1, b)
    b.write()
    old = read_parts(base / "log")
    done = base / "done"
    shutil.copytree(base / "log", done)
    counter = FaultCounter()
    compact_topic(str(done), "c", SETTINGS, now_ms=T0, fault=counter)
    new = read_parts(done)
    assert old != new and all(len(new[q]) < len(old[q]) for q in (0, 1))
    return base / "log", old, new, counter.points


def _fresh(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_fault_points_cover_every_phase(pristine):
    _, _, _, points = pristine
    for phase in ("locked", "begun", "cleaned", "committed", "swap", "delete-old",
                  "swapped", "checkpoint:cleaner", "done"):
        assert phase in points, phase
    assert points.count("cleaned") >= 4 and len(points) >= 30


@pytest.mark.slow
def test_sigkill_at_every_compaction_step(pristine, tmp_path, settle_waits):
    src, old, new, points = pristine
    commit_at = points.index("committed") + 1     # the kill_at that first follows it
    kills = 0
    for kill_at in range(1, len(points) + 1):
        root = _fresh(src, tmp_path / f"k{kill_at}")
        assert run_killed(lambda f: compact_topic(str(root), "c", SETTINGS, now_ms=T0,
                                                  fault=f), kill_at)
        kills += 1
        committed = kill_at >= commit_at
        # a reader that takes no lock and recovers nothing: whole old or whole new
        seen = read_parts(root)
        assert not settle_waits, (kill_at, points[kill_at - 1])
        for q in (0, 1):
            want = new if committed and swapped_in(root, q) else old
            assert seen[q] == want[q], (kill_at, points[kill_at - 1], q)
        if kill_at % 4 == 0:
            for rk in range(1, 4):
                run_killed(lambda f: recover_topic(FS, str(root), "c", fault=f), rk)
        recover_topic(FS, str(root), "c")
        assert jr.load(FS, str(root), "c").pending is None
        assert read_parts(root) == (new if committed else old)
        leftovers = [n for q in (0, 1) for n in os.listdir(root / f"c-{q}")
                     if n.endswith((".cleaned", ".swap"))]
        assert not leftovers
        check_clean(root)
        if not committed:
            compact_topic(str(root), "c", SETTINGS, now_ms=T0)
            assert read_parts(root) == new
    assert kills == len(points) >= 30


def test_a_few_kills_fast(pristine, tmp_path, settle_waits):
    """Three kill points (before the commit, right after it, mid-swap) in the fast suite."""
    src, old, new, points = pristine
    for kill_at in (points.index("cleaned") + 1, points.index("committed") + 1,
                    points.index("delete-old") + 1):
        root = _fresh(src, tmp_path / f"f{kill_at}")
        assert run_killed(lambda f: compact_topic(str(root), "c", SETTINGS, now_ms=T0,
                                                  fault=f), kill_at)
        committed = kill_at > points.index("committed")
        for q, rows in read_parts(root).items():
            assert rows == (new if committed and swapped_in(root, q) else old)[q]
        assert not settle_waits
        recover_topic(FS, str(root), "c")
        assert read_parts(root) == (new if committed else old)
        check_clean(root)
