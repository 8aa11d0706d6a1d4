"""A replaced output is swapped in whole (jobs/_replace.py): killed at every step of the
swap, on a filesystem with atomic directory rename and on one that moves object by
object, the next run's recovery leaves exactly the old output or exactly the new one, and
no leftover beside it."""
from __future__ import annotations

import pytest

from spark_kafkalog.jobs import _replace
from tests.test_job_preflight import tree_hash

OLD = {"_SUCCESS": b"", "topic=t/date=2024-01-01/part-0.parquet": b"old-0",
       "topic=t/date=2024-01-02/part-0.parquet": b"old-1"}
NEW = {"_SUCCESS": b"", "topic=t/date=2024-02-01/part-0.parquet": b"new-0",
       "topic=u/date=2024-02-01/part-1.parquet": b"new-1",
       "topic=u/date=2024-02-02/part-2.parquet": b"new-2"}


def write_tree(root, files):
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


class Killed(BaseException):
    pass


class Dying(_replace.LocalFiles):
    """Local files that die (as a SIGKILL would: nothing after runs) at call ``at``."""

    def __init__(self, at: int, atomic: bool, can_exchange: bool = True):
        self.calls, self.at, self.atomic_rename = 0, at, atomic
        self.can_exchange = can_exchange

    def _step(self):
        self.calls += 1
        if self.calls == self.at:
            raise Killed()

    def rename(self, src, dst):
        self._step()
        super().rename(src, dst)

    def exchange(self, a, b):
        if not self.can_exchange:       # HDFS, or a local filesystem without renameat2
            return False
        self._step()
        return super().exchange(a, b)

    def delete(self, path):
        self._step()
        super().delete(path)

    def touch(self, path):
        self._step()
        super().touch(path)

    def move_file(self, src, dst):
        self._step()
        super().move_file(src, dst)


def expected(files):
    import hashlib
    return {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}


@pytest.mark.parametrize("atomic,can_exchange", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("had_old", [True, False])
def test_a_swap_killed_at_any_step_recovers_to_old_or_new(tmp_path, atomic, can_exchange,
                                                          had_old):
    outcomes = set()
    for at in range(1, 40):
        base = tmp_path / f"{atomic}-{had_old}-{at}"
        base.mkdir()
        out = base / "export"
        if had_old:
            write_tree(out, OLD)
        run_id = _replace.new_run_id()
        new = _replace.sibling(str(out), _replace.NEW, run_id)
        write_tree(base / new.rsplit("/", 1)[1], NEW)
        files = Dying(at, atomic, can_exchange)
        try:
            _replace.swap_in(files, str(out), new, run_id)
            finished = True
        except Killed:
            finished = False
        _replace.recover(_replace.LocalFiles(), str(out))
        got = tree_hash(out) if out.exists() else {}
        assert got in (expected(NEW), expected(OLD) if had_old else {}), (at, got)
        assert sorted(p.name for p in base.iterdir()) == (["export"] if got else []), at
        outcomes.add("new" if got == expected(NEW) else "old")
        if finished:
            assert got == expected(NEW)
            break
    assert outcomes == {"new", "old"}          # killed early: old; past the commit: new


def test_an_unfinished_write_is_removed_and_the_old_output_kept(tmp_path):
    out = tmp_path / "export"
    write_tree(out, OLD)
    run_id = _replace.new_run_id()
    write_tree(tmp_path / f".export.kafkalog-new-{run_id}",
               {"_temporary/0/part-0.parquet": b"half"})
    lines = _replace.recover(_replace.LocalFiles(), str(out))
    assert lines == [f"removed the unfinished output of run {run_id}"]
    assert tree_hash(out) == expected(OLD)
    assert [p.name for p in tmp_path.iterdir()] == ["export"]
    # names of other outputs (a prefix of this one, or this one's prefix) are not touched
    (tmp_path / ".export2.kafkalog-new-abc").mkdir()
    (tmp_path / ".exp.kafkalog-new-abc").mkdir()
    assert _replace.recover(_replace.LocalFiles(), str(out)) == []
    assert len(list(tmp_path.iterdir())) == 3
