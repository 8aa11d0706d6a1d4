"""Disk faults at every system call of a commit: the batch writer's commit (the crash
tests' scenarios: append, adopted staging files, overwrite, offset-preserving, two
topics), the journal, and :func:`write_table` (staging included).

Each file-changing call the operation makes (every create, write, fsync, truncate,
rename, link, unlink, mkdir, directory fsync and in-kernel copy under the log dir, found
by a first run through the ``log/io/sysio`` hook) is failed in turn, once with ``EIO``
(the call alone fails) and once with ``ENOSPC`` on a disk that stays full (every later
call that takes space fails too, the rollback's included) until space is freed. After
each fault:

* the operation raises our :class:`StorageError` naming the file and the errno -- or,
  past the commit point, succeeds with a warning naming them (the write is in);
* a reader (the library's, bounded by the journal) sees exactly the log before the
  write, or exactly the log after it when it committed;
* once space is freed, retrying the same write lands it exactly once, and no staging,
  ``.tmp`` or ``.new`` file is left anywhere.
"""
from __future__ import annotations

import errno
import os
import shutil
from unittest import mock

import pyarrow as pa
import pytest

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.write import AppendConfig, commit_write, write_table
from spark_kafkalog.log.files import journal as jr
from tests.log import test_crash
from tests.log.faulting import (
    FaultPlan,
    assert_storage_error,
    count_calls,
    injected,
    MODES,
    leftovers,
    pick_calls,
    run_faulted,
)
from tests.log.test_crash import SCENARIOS, Scenario, check_log

FS = test_crash.FS


def topic_rows(root: str, topics) -> dict:
    out = {}
    for t in sorted(topics):
        tab = read_table(root, t)
        out[t] = list(zip(tab["partition"].to_pylist(), tab["offset"].to_pylist(),
                          tab["key"].to_pylist(), tab["value"].to_pylist()))
    return out


class CommitOnly:
    """While active, the plan sees only the commit's calls (the test stages first, as
    Spark's tasks do; staging faults are :func:`test_write_table_every_call`'s)."""

    def __init__(self, plan: FaultPlan | None):
        self.plan = plan

    def __enter__(self):
        plan = self.plan

        def armed(*a, **kw):
            if plan is None:
                return commit_write(*a, **kw)
            with injected(plan):
                return commit_write(*a, **kw)
        self._patch = mock.patch.object(test_crash, "commit_write", armed)
        self._patch.start()
        return self

    def __exit__(self, *exc):
        self._patch.stop()


def check_after(root, topics, outcome, detail, plan, code, old, new, committed):
    """The checks every fault must pass, before space is freed."""
    assert plan.fired, "the fault was not reached (the run took another path)"
    if outcome == "failed":
        assert_storage_error(detail, code, root)
    else:
        # past the commit point: the write is in, the warning says what failed
        assert committed, "succeeded without committing"
        assert any(errno.errorcode[code] in w for w in detail), detail
    assert topic_rows(root, topics) == (new if committed else old)


def commit_calls(sc: Scenario, tmp_path) -> tuple[list, dict, dict]:
    base = str(tmp_path / f"base-{sc.name}")
    sc.write(base, 1)
    old = topic_rows(base, sc.topics)
    ref = str(tmp_path / f"ref-{sc.name}")
    shutil.copytree(base, ref)
    plan = FaultPlan(ref)
    with CommitOnly(plan):
        sc.write(ref, 2)
    check_log(sc, ref, [1, 2])
    return base, plan.calls, old, topic_rows(ref, sc.topics)


def fault_commit(sc: Scenario, base, key, mode, old, new, where) -> str:
    name, code, full = mode
    root = str(where)
    shutil.copytree(base, root)
    plan = FaultPlan(root, fail=key, code=code, full=full)
    with CommitOnly(plan):
        outcome, detail = run_faulted(lambda: sc.write(root, 2), plan)
    # the coordinator's journal (the first topic's) decides a multi-topic write
    committed = jr.load(FS, root, sorted(sc.topics)[0]).is_committed("batch:w2")
    check_after(root, sc.topics, outcome, detail, plan, code, old, new, committed)
    plan.free()
    # a second run after space is freed completes: exactly once
    with CommitOnly(None):
        again = sc.write(root, 2)
    assert again.noop == committed
    check_log(sc, root, [1, 2])
    assert not leftovers(root), leftovers(root)
    shutil.rmtree(root)
    return "new" if committed else "old"


FAST = [SCENARIOS[0], SCENARIOS[4], SCENARIOS[6]]      # append, adopt, preserve


@pytest.mark.parametrize("sc", FAST, ids=lambda s: s.name)
def test_commit_faults_sampled(sc, tmp_path):
    """Fast tier: each kind of call, and every fifth call, under EIO and a full disk."""
    base, calls, old, new = commit_calls(sc, tmp_path)
    kinds = {c[0] for c in calls}
    assert {"create", "write", "fsync", "rename", "fsync-dir", "unlink"} <= kinds, kinds
    outcomes = set()
    for i, key in enumerate(pick_calls(calls, 5)):
        for mode in MODES:
            outcomes.add(fault_commit(sc, base, key, mode, old, new,
                                      tmp_path / f"f{i}-{mode[0]}"))
    assert outcomes == {"old", "new"}


@pytest.mark.slow
@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda s: s.name)
def test_commit_faults_every_call(sc, tmp_path):
    base, calls, old, new = commit_calls(sc, tmp_path)
    for i, key in enumerate(calls):
        for mode in MODES:
            fault_commit(sc, base, key, mode, old, new, tmp_path / f"f{i}-{mode[0]}")
    assert len(calls) >= 20


# ---- write_table: staging and commit --------------------------------------------------------
def table(tag: int, n: int = 300) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % 11) for i in range(n)],
                     "value": [b"%d-%d-" % (tag, i) + b"v" * 60 for i in range(n)],
                     "partition": pa.array([i % 2 for i in range(n)], pa.int32())})


CFG = AppendConfig(segment_bytes=8000, index_interval_bytes=600)


def test_write_table_every_call(tmp_path):
    """write_table (staging, commit, journal, checkpoints; fsync on): every call, EIO
    and a full disk."""
    base = str(tmp_path / "base")
    write_table(base, "w", table(1), partitions=2, config=CFG, batch_bytes=2000)
    old = topic_rows(base, ["w"])

    def run(root, wid="batch:tw2"):
        return write_table(root, "w", table(2), config=CFG, batch_bytes=2000, write_id=wid)

    ref = str(tmp_path / "ref")
    shutil.copytree(base, ref)
    calls = count_calls(ref, lambda: run(ref))
    new = topic_rows(ref, ["w"])
    kinds = {c[0] for c in calls}
    assert {"create", "write", "fsync", "rename", "fsync-dir", "unlink"} <= kinds, kinds
    seen = {"old": 0, "new": 0}
    for i, key in enumerate(calls):
        for name, code, full in MODES:
            root = str(tmp_path / f"f{i}-{name}")
            shutil.copytree(base, root)
            plan = FaultPlan(root, fail=key, code=code, full=full)
            with injected(plan):
                outcome, detail = run_faulted(lambda: run(root), plan)
            committed = jr.load(FS, root, "w").is_committed("batch:tw2")
            check_after(root, ["w"], outcome, detail, plan, code, old, new, committed)
            seen["new" if committed else "old"] += 1
            plan.free()
            assert run(root).noop == committed
            assert topic_rows(root, ["w"]) == new
            assert not leftovers(root), (key, leftovers(root))
            shutil.rmtree(root)
    assert seen["old"] and seen["new"], seen
    print(f"write_table: {len(calls)} calls x 2 faults: {seen}")


def test_fault_env_var_reaches_a_command(tmp_path):
    """``SPARK_KAFKALOG_FAULTS`` (read at import) fails the n-th call of a process the
    tests cannot hook otherwise (a job run as a command): here the second fsync of a
    write_table, with EIO; a malformed value names the variable."""
    import subprocess
    import sys

    code = ("import pyarrow as pa\n"
            "from spark_kafkalog.log.write import write_table\n"
            f"write_table({str(tmp_path / 'log')!r}, 'e', pa.table({{'value': [b'x'] * 10}}))\n")
    env = {**os.environ, "SPARK_KAFKALOG_FAULTS": "fsync@2=EIO"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode != 0
    assert "StorageError: cannot fsync file: EIO" in run.stderr, run.stderr[-2000:]
    assert not leftovers(str(tmp_path / "log"))
    env["SPARK_KAFKALOG_FAULTS"] = "fsync@two=EIO"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert "SPARK_KAFKALOG_FAULTS: cannot parse 'fsync@two=EIO'" in run.stderr, run.stderr[-2000:]
