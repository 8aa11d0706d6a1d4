"""Crash safety: SIGKILL the committing process at every step of a commit (and of a
recovery), then check the log holds exactly the committed writes.

Each kill runs in a forked child that calls the appender with a ``fault`` hook which
SIGKILLs the process at its N-th call; N runs over every step the commit reports (lock,
begin, each window written mid-append, each segment finished, sync, commit point, each
checkpoint file, each deleted segment, done). No Spark. After each kill:

* a read-only reader bounded by ``committed_end_offsets`` sees only committed records;
* ``recover`` leaves exactly the committed writes — the killed write wholly or not at
  all, decided by the journal — with contiguous offsets, CRC-valid batches (kafka-python),
  indexes equal to what Kafka's recovery would build, checkpoints at the log end and no
  staging files;
* retrying the killed write (same write id) then leaves it exactly once, and a further
  write continues the offsets.

The ``preserve`` scenarios write with ``offsets="preserve"``: kafka-python-built batches
keep offsets with gaps; the killed write also starts a partition that held no record at
its first offset (log start checkpoint, the empty segment below deleted after the commit).
"""
from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log.write import config as write_config
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import (
    AppendConfig,
    StagingWriter,
    TopicSpec,
    commit_write,
    recover_topic,
)
from spark_kafkalog.log.files.checkpoint import read_checkpoint
from tests.log.killing import FaultCounter, run_killed
from tests.log.test_appender_util import (
    R,
    assert_indexes_like_broker,
    kp_encode,
    read_kp,
    segments,
)

FS = pafs.LocalFileSystem()
CFG = AppendConfig(segment_bytes=6000, index_interval_bytes=700)


@pytest.fixture(autouse=True)
def small_copy_window(monkeypatch):
    """Copy a few batches per window, so there are many kill points inside each segment
    (each window is written in two halves with a kill point between them)."""
    monkeypatch.setattr(write_config, "COPY_WINDOW_BYTES", 2500)
    # windows of 2000 bytes or more are copied by the kernel, smaller ones (a run's
    # last) from memory: kills land in both ways of copying
    monkeypatch.setattr(write_config, "KERNEL_COPY_MIN_BYTES", 2000)


def records(tag: int, n: int) -> list[R]:
    return [R(b"k%d-%d" % (tag, i) if i % 3 else None, b"%d:%d:" % (tag, i) + b"v" * 90,
              1_000_000 + tag * 1000 + i) for i in range(n)]


class Scenario:
    """A base write (committed before the kill) and the write that gets killed."""

    def __init__(self, name, topics, mode="append", no_append=False, split=False,
                 preserve=False, own_file_min_bytes=0, grouped=False):
        self.name = name
        # grouped: every run is small, so a partition's runs (one per task) are copied
        # through one buffer (apply._copy_small_runs) instead of window by window
        self.grouped = grouped
        self.preserve = preserve
        self.topics = topics
        self.mode = mode
        # split: one staging file per partition, each adopted as a segment by the commit
        # (with own_file_min_bytes: only partitions staging more than that in a task)
        self.split = split
        self.own_file_min_bytes = own_file_min_bytes
        # fsync=False: a SIGKILL loses nothing the kernel has (fsync guards against power
        # loss, which this test does not simulate); it keeps the test fast
        self.cfg = AppendConfig(segment_bytes=CFG.segment_bytes,
                                index_interval_bytes=CFG.index_interval_bytes,
                                no_append=no_append, fsync=False,
                                adopt_min_bytes=1000 if split else CFG.adopt_min_bytes)

    def parts(self, tag):
        # partition -> records; the killed write (tag 2) spans both partitions and rolls
        if self.preserve:
            # partition 1 holds no record until the killed write starts it at 5000
            return {1: {0: records(1, 70)}, 2: {0: records(2, 90), 1: records(12, 45)},
                    }.get(tag, {1: records(tag, 10)})
        if tag == 1:
            return {0: records(1, 70), 1: records(11, 20)}
        if tag == 2:
            return {0: records(2, 90), 1: records(12, 45)}
        return {1: records(tag, 10)}

    def offsets(self, tag, p):
        """The offsets a preserving write gives partition ``p`` (gaps; after the
        earlier writes' offsets)."""
        start = {(1, 0): 0, (2, 0): 200, (2, 1): 5000, (3, 1): 5200}.get((tag, p), 9000)
        return [start + i + i // 4 * 3 for i in range(len(self.parts(tag).get(p, [])))]

    def write(self, root, tag, fault=None, mode=None):
        if not self.grouped:
            return self._write(root, tag, fault, mode)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(write_config, "KERNEL_COPY_MIN_BYTES", 1 << 20)
            mp.setattr(write_config, "COPY_WINDOW_BYTES", 1 << 20)
            return self._write(root, tag, fault, mode)

    def _write(self, root, tag, fault, mode):
        wid = f"batch:w{tag}"
        staged = []
        for task in range(2):
            w = StagingWriter(FS, root, wid, f"task{task}", per_partition_files=self.split,
                              own_file_min_bytes=self.own_file_min_bytes)
            for t in self.topics:
                for p, recs in self.parts(tag).items():
                    if self.preserve:
                        # contiguous halves, the later one in the first task: the
                        # commit puts them in offset order
                        half = len(recs) // 2
                        pick = slice(half, None) if task == 0 else slice(0, half)
                        data, table = kp_encode(recs[pick], per_batch=6,
                                                offsets=self.offsets(tag, p)[pick])
                    else:
                        data, table = kp_encode(recs[task::2], per_batch=6)
                    w.add(t, p, data, table)
            staged.append(w.finish())
        return commit_write(FS, root, wid, staged,
                            [TopicSpec(t, partitions_if_new=2) for t in self.topics],
                            mode=mode or ("append" if tag != 2 else self.mode),
                            config=self.cfg, fault=fault,
                            offsets="preserve" if self.preserve else "assign")

    def expected(self, tags):
        """{(topic, partition): [(offset, key, value)]} after the writes ``tags``."""
        out = {}
        if self.preserve:
            for t in self.topics:
                for p in (0, 1):
                    out[(t, p)] = [(o, r.key, r.value) for tag in tags
                                   for o, r in zip(self.offsets(tag, p),
                                                   self.parts(tag).get(p, []))]
            return out
        for t in self.topics:
            for p in (0, 1):
                rows, off = [], 0
                for tag in tags:
                    recs = self.parts(tag).get(p, [])
                    ordered = recs[0::2] + recs[1::2]
                    if tag == 2 and self.mode == "overwrite":
                        rows = []
                    rows += [(off + i, r.key, r.value) for i, r in enumerate(ordered)]
                    off += len(ordered)
                out[(t, p)] = rows
        return out


SCENARIOS = [
    Scenario("append", ["t"]),
    Scenario("no-append", ["t"], no_append=True),
    Scenario("overwrite", ["t"], mode="overwrite"),
    Scenario("two-topics", ["a.x", "b_y"]),
    Scenario("adopt", ["t"], split=True),
    Scenario("adopt-overwrite", ["t"], mode="overwrite", split=True),
    Scenario("preserve", ["t"], preserve=True),
    Scenario("preserve-adopt", ["t"], split=True, preserve=True),
    # partition 0 stages its own files (adopted), partition 1 shares the task's file
    Scenario("adopt-mixed", ["t"], split=True, own_file_min_bytes=3000),
    Scenario("small-runs", ["t"], grouped=True),
]
PRESERVE = [sc for sc in SCENARIOS if sc.preserve]


def read_visible(root, topic, partition, bound):
    rows = read_kp(f"{root}/{topic}-{partition}", stop_at=bound, gaps=True)
    return [r[:3] for r in rows if bound is None or r[0] < bound]


def check_log(sc: Scenario, root: str, tags, staging_clean=True):
    exp = sc.expected(tags)
    for (t, p), rows in exp.items():
        d = f"{root}/{t}-{p}"
        got = [r[:3] for r in read_kp(d, gaps=sc.preserve)]
        assert got == rows, (t, p, len(got), len(rows))
        assert_indexes_like_broker(d, CFG.index_interval_bytes)
        leo = rows[-1][0] + 1 if rows else None
        if leo is not None:
            for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
                assert read_checkpoint(FS, f"{root}/{name}")[(t, p)] == leo
        if sc.mode == "overwrite" and 2 in tags:
            assert segments(d)[0] >= min(r[0] for r in rows) if rows else True
        if sc.preserve and p == 1 and 2 in tags:
            # started by the killed write: its log starts at its first offset
            assert segments(d)[0] == rows[0][0] == 5000
            assert read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")[(t, p)] == 5000
    if staging_clean:
        assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def count_points(sc: Scenario, tmp_path) -> list[str]:
    root = str(tmp_path / f"count-{sc.name}")
    sc.write(root, 1)
    c = FaultCounter()
    sc.write(root, 2, fault=c)
    check_log(sc, root, [1, 2])
    return c.points


@pytest.mark.slow
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_sigkill_at_every_commit_step(sc, tmp_path):
    points = count_points(sc, tmp_path)
    if sc.split:
        assert "adopt-patched" in points
    assert "append" in points and "begun" in points and any(
        p.startswith("committed:") for p in points)
    commit_point = points.index(f"committed:{sorted(sc.topics)[0]}") + 1
    kills = 0
    for kill_at in range(1, len(points) + 1):
        root = str(tmp_path / f"k{kill_at}")
        sc.write(root, 1)
        assert run_killed(lambda f: sc.write(root, 2, fault=f), kill_at)
        kills += 1
        committed = kill_at >= commit_point
        # a read-only reader bounded by the journal sees only what is committed
        for t in sc.topics:
            bounds = jr.committed_end_offsets(FS, root, t)
            if committed or kill_at <= points.index("begun"):
                assert bounds is None
            else:
                assert bounds is not None
                before = sc.expected([1])
                for p in (0, 1):
                    assert read_visible(root, t, p, bounds.get(p)) == before[(t, p)]
        # crash the recovery too, at each of its steps, for a few kill points
        if kill_at % 5 == 0:
            for rk in range(1, 4):
                run_killed(lambda f: [recover_topic(FS, root, t, fault=f)
                                      for t in sorted(sc.topics)], rk)
        for t in sorted(sc.topics):
            recover_topic(FS, root, t)
        for t in sc.topics:
            assert jr.load(FS, root, t).pending is None
            assert jr.load(FS, root, t).is_committed("batch:w2") == committed
        # killed before the journal knew the write: its staging files are orphans that
        # the retry (or the staging TTL) removes
        check_log(sc, root, [1, 2] if committed else [1],
                  staging_clean=kill_at > points.index("begun"))
        # the retry of the killed write lands it exactly once; the next write continues
        r = sc.write(root, 2)
        assert r.noop == committed
        sc.write(root, 3)
        check_log(sc, root, [1, 2, 3])
    assert kills == len(points) >= 12


def test_kill_points_cover_every_phase(tmp_path):
    """The fault hook sees every phase of a commit (a cheap guard for the slow test)."""
    points = count_points(SCENARIOS[0], tmp_path)
    for phase in ("locked", "begun", "append-partial", "append", "segment", "synced", "committed:t",
                  "checkpoint:recovery-point-offset-checkpoint",
                  "checkpoint:replication-offset-checkpoint", "done:t"):
        assert phase in points, phase
    assert points.count("append") >= 4


@pytest.mark.parametrize("sc", [SCENARIOS[0], SCENARIOS[4], *PRESERVE, SCENARIOS[-1]],
                         ids=lambda s: s.name)
def test_a_few_kills_fast(sc, tmp_path):
    """A handful of kill points (begin, mid-append / between adopting two staging
    files, commit) in the fast suite."""
    points = count_points(sc, tmp_path)
    picks = [points.index("begun") + 1, points.index("append") + 2,
             points.index("committed:t") + 1]
    for kill_at in picks:
        root = str(tmp_path / f"f{kill_at}")
        sc.write(root, 1)
        assert run_killed(lambda f: sc.write(root, 2, fault=f), kill_at)
        recover_topic(FS, root, "t")
        committed = kill_at > points.index("committed:t")
        check_log(sc, root, [1, 2] if committed else [1])
        sc.write(root, 2)
        check_log(sc, root, [1, 2])


def test_preserve_scenarios_have_enough_kill_points(tmp_path):
    """The slow test kills offset-preserving writes at >= 30 points in all (every phase,
    including deleting the empty segment below a partition's new log start)."""
    points = [count_points(sc, tmp_path / sc.name) for sc in PRESERVE]
    assert sum(len(p) for p in points) >= 30
    assert "delete-old" in points[0] and "checkpoint:log-start-offset-checkpoint" in points[0]
