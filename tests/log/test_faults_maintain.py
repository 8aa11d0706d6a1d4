"""Disk faults at every system call of compaction (its ``.cleaned`` files, the journal,
the swap) and of retention (checkpoints, leader epochs, renames, the purge).

As in the SIGKILL tests (``test_compact_crash``, ``test_retention``), whose logs and
readers these reuse: each file-changing call is failed in turn, with ``EIO`` (that call
alone) and with ``ENOSPC`` on a disk that stays full until space is freed. After each:
the run raises our :class:`StorageError` naming the file and the errno (or finishes,
when the failed call was one whose failure it tolerates); a reader that recovers nothing
sees each partition whole old or whole new; once space is freed, recovery and a second
run land the new log, ``verify`` is clean and no ``.cleaned``, ``.swap``, ``.tmp`` or
staging file is left.
"""
from __future__ import annotations

import shutil

import pytest

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.maintain import compact_topic
from spark_kafkalog.log.maintain.retention import apply_retention, purge_deleted
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import recover_topic
from tests.log.faulting import (MODES, FaultPlan, assert_storage_error, count_calls, injected,
                                leftovers)
from tests.log.test_compact import T0, check_clean
from tests.log.test_compact_crash import SETTINGS, pristine, read_parts, swapped_in  # noqa: F401
from tests.log.test_crash import FS
from tests.log.test_retention import (
    HOUR,
    KILL_SCENARIOS,
    assert_verify_clean,
    build_log,
    live_records,
)
from tests.log.test_retention import T0 as RT0



def _run(fn, plan):
    with injected(plan):
        try:
            fn()
        except KafkaLogError as err:
            return err
        except OSError as err:            # not ours: assert_storage_error names it
            return err
    return None


# ---- compaction ---------------------------------------------------------------------------
def compact(root):
    return compact_topic(str(root), "c", SETTINGS, now_ms=T0)


def fault_compaction(src, old, new, key, mode, root) -> str:
    name, code, full = mode
    shutil.copytree(src, root)
    plan = FaultPlan(str(root), fail=key, code=code, full=full)
    err = _run(lambda: compact(root), plan)
    assert plan.fired, key
    state = jr.load(FS, str(root), "c")
    committed = (state.pending is not None and state.pending.committed) or \
        read_parts(root) == new
    if err is not None:
        assert_storage_error(err, code, str(root))
    else:
        assert committed, (key, "finished without its commit")
    # no lock, no recovery: each partition whole old or whole new
    seen = read_parts(root)
    for q in (0, 1):
        want = new if committed and swapped_in(root, q) else old
        assert seen[q] == want[q], (key, name, q)
    plan.free()
    recover_topic(FS, str(root), "c")
    assert read_parts(root) == (new if committed else old), (key, name)
    compact(root)                      # a second run completes (a no-op when it landed)
    assert read_parts(root) == new
    check_clean(root)
    assert not leftovers(str(root)), (key, leftovers(str(root)))
    shutil.rmtree(root)
    return "new" if committed else "old"


def compaction_calls(pristine, tmp_path):  # noqa: F811
    src, old, new, _ = pristine
    ref = tmp_path / "ref"
    shutil.copytree(src, ref)
    calls = count_calls(str(ref), lambda: compact(ref))
    assert read_parts(ref) == new
    return calls


def test_compaction_faults_sampled(pristine, tmp_path):  # noqa: F811
    """Fast tier: each kind of call and every sixth one, under EIO and a full disk."""
    src, old, new, _ = pristine
    calls = compaction_calls(pristine, tmp_path)
    kinds = {}
    for c in calls:
        kinds.setdefault(c[0], c)
    assert {"create", "write", "fsync", "rename", "fsync-dir", "utime"} <= set(kinds)
    picks = [c for i, c in enumerate(calls) if i % 6 == 0 or c in kinds.values()]
    outcomes = set()
    for i, key in enumerate(picks):
        for mode in MODES:
            outcomes.add(fault_compaction(src, old, new, key, mode,
                                          tmp_path / f"f{i}-{mode[0]}"))
    assert outcomes == {"old", "new"}


@pytest.mark.slow
def test_compaction_faults_every_call(pristine, tmp_path):  # noqa: F811
    src, old, new, _ = pristine
    calls = compaction_calls(pristine, tmp_path)
    seen = {"old": 0, "new": 0}
    for i, key in enumerate(calls):
        for mode in MODES:
            seen[fault_compaction(src, old, new, key, mode, tmp_path / f"f{i}-{mode[0]}")] += 1
    print(f"compaction: {len(calls)} calls x 2 faults: {seen}")
    assert len(calls) >= 40 and seen["old"] and seen["new"]


# ---- retention ----------------------------------------------------------------------------
NOW = RT0 + 8 * HOUR


def retain(root, cfg):
    apply_retention(LogDirs(root), "t", cfg, now_ms=NOW)
    purge_deleted(LogDirs(root), "t", delay_ms=cfg.file_delete_delay_ms)


@pytest.fixture(scope="module")
def retention_base(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("ret") / "base")
    build_log(base)
    return base, live_records(base)


@pytest.mark.parametrize("name", sorted(KILL_SCENARIOS))
def test_retention_faults_every_call(retention_base, tmp_path, name):
    base, old = retention_base
    cfg = KILL_SCENARIOS[name]
    ref = str(tmp_path / "ref")
    shutil.copytree(base, ref)
    calls = count_calls(ref, lambda: retain(ref, cfg))
    new = live_records(ref)
    assert new != old
    kinds = {c[0] for c in calls}
    assert {"create", "write", "fsync", "rename", "fsync-dir", "unlink"} <= kinds, kinds
    seen = {"old": 0, "new": 0}
    for i, key in enumerate(calls):
        for label, code, full in MODES:
            root = str(tmp_path / f"f{i}-{label}")
            shutil.copytree(base, root)
            plan = FaultPlan(root, fail=key, code=code, full=full)
            err = _run(lambda: retain(root, cfg), plan)
            assert plan.fired, key
            if err is not None:
                assert_storage_error(err, code, root)
            got = live_records(root)
            assert got in (old, new), (key, label)
            seen["new" if got == new else "old"] += 1
            assert_verify_clean(root)
            plan.free()
            retain(root, cfg)                       # the second run finishes the job
            assert live_records(root) == new, (key, label)
            assert_verify_clean(root)
            assert not leftovers(root), (key, leftovers(root))
            shutil.rmtree(root)
    print(f"retention {name}: {len(calls)} calls x 2 faults: {seen}")
    assert seen["old"] and seen["new"]
