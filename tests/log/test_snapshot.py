"""Snapshots and commits: one journal read per topic and read; reading as of a commit."""
from __future__ import annotations

import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import DataLossError, InvalidOptionError
from spark_kafkalog.log import (
    LogDirs,
    inspect_log_dirs,
    latest_offsets,
    list_commits,
    read_table,
    topic_states,
)
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.files.checkpoint import LOG_START_OFFSET_CHECKPOINT, write_checkpoint
from spark_kafkalog.log.write import AppendConfig
from tests.log.test_appender_util import R, write

FS = pafs.LocalFileSystem()
CFG = AppendConfig(segment_bytes=4000, index_interval_bytes=256)

#: commit k -> {partition: record count}; some commits skip partitions
PLAN = [{0: 5, 1: 3, 2: 0}, {2: 7}, {0: 4, 1: 6}, {1: 2, 2: 3}, {0: 9}]


def build(root: str) -> list[dict]:
    """Write PLAN; returns, per commit, the expected {partition: [values]} of the log
    right after it."""
    seen = {p: [] for p in range(3)}
    out = []
    for k, counts in enumerate(PLAN):
        parts = {p: [R(b"k", b"%d/%d/%d" % (k, p, i), 1_000 * k + i) for i in range(n)]
                 for p, n in counts.items()}
        write(FS, root, f"batch:w{k}", parts, partitions=3, config=CFG, per_batch=4)
        for p, recs in parts.items():
            seen[p] += [r.value for r in recs]
        out.append({p: list(v) for p, v in seen.items()})
    return out


def values(table) -> dict:
    return {p: table.filter(pc.equal(table["partition"], p))["value"].to_pylist()
            for p in range(3)}


def test_list_commits_names_every_write_with_its_ranges(tmp_path):
    root = str(tmp_path)
    build(root)
    commits = list_commits(root, "t")
    assert [c.write_id for c in commits] == [f"batch:w{k}" for k in range(len(PLAN))]
    assert [c.seq for c in commits] == list(range(len(PLAN)))
    assert all(c.committed_ms is not None for c in commits)
    ends = {0: 0, 1: 0, 2: 0}
    for c, counts in zip(commits, PLAN):
        want = {}
        for p, n in counts.items():
            want[p] = (ends[p], ends[p] + n)
            ends[p] += n
        assert dict(c.ranges) == want
    assert list_commits(LogDirs(root), "t") == commits


def test_read_as_of_each_commit_returns_what_was_committed_up_to_it(tmp_path):
    root = str(tmp_path)
    expected = build(root)
    commits = list_commits(root, "t")
    for k, want in enumerate(expected):
        assert values(read_table(root, "t", as_of_commit=f"batch:w{k}")) == want
        assert values(read_table(root, "t", as_of_commit=k)) == want
        assert values(read_table(root, "t", as_of_commit=str(k))) == want
        # by time: the newest commit at or before it (commits may share a millisecond)
        ts = commits[k].committed_ms
        newest = max(i for i, c in enumerate(commits) if c.committed_ms <= ts)
        assert values(read_table(root, "t", as_of_timestamp=ts)) == expected[newest]
    assert values(read_table(root, "t")) == expected[-1]
    # as of a commit, "latest" is its end; an explicit end past it is lowered to it
    t = read_table(root, "t", as_of_commit=1, ending_offsets={0: 100, 1: 100, 2: 100})
    assert values(t) == expected[1]


def test_as_of_unknown_commits_fail_clearly(tmp_path):
    root = str(tmp_path)
    build(root)
    with pytest.raises(InvalidOptionError, match="not a commit of topic 't'"):
        read_table(root, "t", as_of_commit="batch:nope")
    with pytest.raises(InvalidOptionError, match="not a commit"):
        read_table(root, "t", as_of_commit=99)
    with pytest.raises(InvalidOptionError, match="no commit at or before"):
        read_table(root, "t", as_of_timestamp=0)


def test_as_of_a_topic_without_journal_fails_clearly(tmp_path):
    from tests.log.logbuilder import LogDirBuilder, rec   # a broker-like log, no journal

    lb = LogDirBuilder(tmp_path)
    lb.partition("plain", 0).append([rec(b"k", b"v", 1)])
    lb.write()
    assert list_commits(str(tmp_path), "plain") == []
    with pytest.raises(InvalidOptionError, match="no commit journal"):
        read_table(str(tmp_path), "plain", as_of_commit=0)


def test_a_commit_whose_records_retention_removed_is_refused(tmp_path):
    root = str(tmp_path)
    expected = build(root)
    # retention (or deleteRecords) moved partition 0's log start into commit 2's range
    c = list_commits(root, "t")
    start2 = c[2].ranges[0][0]
    write_checkpoint(FS, f"{root}/{LOG_START_OFFSET_CHECKPOINT}", {("t", 0): start2 + 1})
    for k in (0, 2):
        with pytest.raises(DataLossError, match="removed.*retention") as err:
            read_table(root, "t", as_of_commit=k)
        assert f"t-0" in str(err.value) and f"now starts at offset {start2 + 1}" in str(
            err.value)
    # commit 1 wrote only partition 2: its records are all there; partition 0 as of it
    # is what retention left of commit 0 (nothing: the log starts past it)
    t = read_table(root, "t", as_of_commit=1)
    assert values(t) == {0: [], 1: expected[1][1], 2: expected[1][2]}
    # commit 4's range is above the log start: readable, minus what retention removed
    got = values(read_table(root, "t", as_of_commit=4))
    assert got[0] == expected[4][0][start2 + 1:]


def test_a_commit_before_an_overwrite_is_refused(tmp_path):
    root = str(tmp_path)
    expected = build(root)
    write(FS, root, "batch:over", {0: [R(b"k", b"new", 5)]}, partitions=3, config=CFG,
          mode="overwrite")
    with pytest.raises(DataLossError, match="removed"):
        read_table(root, "t", as_of_commit=len(PLAN) - 1)
    assert values(read_table(root, "t", as_of_commit="batch:over")) == {
        0: [b"new"], 1: [], 2: []}
    assert values(read_table(root, "t")) == {0: [b"new"], 1: [], 2: []}
    assert len(expected) == len(PLAN)


def count_journal_loads(monkeypatch) -> list:
    calls = []
    real = jr.load

    def counting(fs, root, topic):
        calls.append(topic)
        return real(fs, root, topic)

    monkeypatch.setattr(jr, "load", counting)
    return calls


def test_a_read_loads_the_journal_once_per_topic(tmp_path, monkeypatch):
    root = str(tmp_path)
    build(root)
    calls = count_journal_loads(monkeypatch)
    read_table(root, "t")
    assert calls == ["t"]
    calls.clear()
    logdirs = LogDirs(root)
    infos = inspect_log_dirs(logdirs, ["t"], scan=False)
    assert len(infos) == 3 and calls == ["t"]
    calls.clear()
    assert latest_offsets(LogDirs(root), ["t"]) == {"t": {0: 18, 1: 11, 2: 10}}
    assert calls == ["t"]


def test_planning_loads_the_journal_once_per_topic(tmp_path, monkeypatch):
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.planning import plan

    root = str(tmp_path)
    build(root)
    calls = count_journal_loads(monkeypatch)
    slices = plan(LogDirs(root), parse_read_options({"path": root, "subscribe": "t"}))
    assert calls == ["t"]
    assert sum(s.est_records for s in slices) == 18 + 11 + 10


def test_files_past_the_snapshot_are_not_read(tmp_path):
    """The listing comes after the journal: bytes a later write appended (here: a
    commit that lands after the snapshot was taken) stay outside the read."""
    root = str(tmp_path)
    expected = build(root)
    logdirs = LogDirs(root)
    logdirs.partitions("t")                         # snapshot + listing taken here
    write(FS, root, "batch:later", {0: [R(b"k", b"late", 1)]}, partitions=3, config=CFG)
    snap, parts, states = topic_states(logdirs, "t")
    assert snap.commit.write_id == f"batch:w{len(PLAN) - 1}"
    assert {q: s.upper_bound for q, s in states.items()} == {0: 18, 1: 11, 2: 10}
    assert values(read_table(logdirs, "t")) == expected[-1]
    logdirs.forget("t")                             # a new snapshot sees the new write
    assert values(read_table(logdirs, "t"))[0] == expected[-1][0] + [b"late"]


def test_a_listing_taken_mid_commit_never_shows_part_of_it(tmp_path):
    """The second race: segments listed while a commit is appending (sizes part way
    through it), its journal and checkpoints read after it committed. Bounds come from
    the journal read *with* the listing, so the read is the commit before, whole."""
    root = str(tmp_path)
    expected = build(root)
    seen = []

    def fault(point):
        if point == "append" and not seen:     # bytes of the new write partly on disk
            logdirs = LogDirs(root)
            logdirs.partitions("t")
            seen.append(logdirs)

    big = {p: [R(b"k", b"x%d" % i, 1) for i in range(40)] for p in range(3)}
    write(FS, root, "batch:mid", big, partitions=3, config=CFG, per_batch=4, fault=fault)
    assert seen
    assert values(read_table(seen[0], "t")) == expected[-1]
    assert values(read_table(seen[0], "t", read_past_high_watermark=True)) == expected[-1]


def test_segments_deleted_under_the_read_retake_the_snapshot(tmp_path):
    """An overwrite that commits (and deletes the old segments) between the snapshot
    and the reads: the files end below what the snapshot committed, so the snapshot is
    taken again and the read is the overwrite, whole, not an empty or partial log."""
    root = str(tmp_path)
    build(root)
    logdirs = LogDirs(root)
    logdirs.partitions("t")                             # snapshot before the overwrite
    write(FS, root, "batch:over", {p: [R(b"k", b"o%d" % p, 5)] for p in range(3)},
          partitions=3, config=CFG, mode="overwrite")
    snap, parts, states = topic_states(logdirs, "t")
    assert snap.commit.write_id == "batch:over"
    assert values(read_table(logdirs, "t")) == {p: [b"o%d" % p] for p in range(3)}
