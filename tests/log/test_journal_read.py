"""The read side of the writer's journal: a reader that cannot (or may not) run recovery
never returns a record of an unfinished commit, and sees a committed write whole."""
from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.fs as pafs

from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.write import recover_topic
from tests.log.killing import run_killed
from tests.log.test_crash import SCENARIOS, count_points


def rows(root, topic, **kw):
    t = read_table(root, topic, **kw)
    out = {}
    for p in (0, 1):
        part = t.filter(pc.equal(t["partition"], p))
        out[p] = list(zip(part["offset"].to_pylist(), part["key"].to_pylist(),
                          part["value"].to_pylist()))
    return out


def expected(sc, tags):
    exp = sc.expected(tags)
    return {p: exp[("t", p)] for p in (0, 1)}


def test_reader_bounded_by_journal_after_kill_mid_append(tmp_path):
    sc = SCENARIOS[0]                                   # plain append to topic "t"
    points = count_points(sc, tmp_path)
    kill_at = points.index("append") + 2                # bytes of write 2 are on disk
    root = str(tmp_path / "killed")
    sc.write(root, 1)
    assert run_killed(lambda f: sc.write(root, 2, fault=f), kill_at)
    logdirs = LogDirs(root)
    p0 = logdirs.partition("t", 0)
    # the killed write's bytes are in the segment files ...
    assert sum(s.size for s in p0.segments) > 0
    state = logdirs.state(p0, read_past_high_watermark=True)
    before = expected(sc, [1])
    assert state.log_end_offset == len(before[0])
    # ... but no reader returns them, even one reading past the high watermark
    assert rows(root, "t", read_past_high_watermark=True) == before
    assert rows(root, "t") == before
    assert rows(root, "t", isolation_level="read_committed") == before
    # recovery (a writer opening the log) rolls the write back; the reader agrees
    recover_topic(pafs.LocalFileSystem(), root, "t")
    assert rows(root, "t", read_past_high_watermark=True) == before
    sc.write(root, 2)
    assert rows(root, "t") == expected(sc, [1, 2])


def test_reader_sees_write_killed_after_its_commit_point(tmp_path):
    sc = SCENARIOS[0]
    points = count_points(sc, tmp_path)
    kill_at = points.index("committed:t") + 1           # committed, checkpoints not yet
    root = str(tmp_path / "killed")
    sc.write(root, 1)
    assert run_killed(lambda f: sc.write(root, 2, fault=f), kill_at)
    assert rows(root, "t", read_past_high_watermark=True) == expected(sc, [1, 2])
