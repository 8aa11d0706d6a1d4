"""The race that left a staging file after a failed write (issue 40, item 4).

Spark reports a failed job to the driver, which aborts the write (``abort_write``: delete
the write's staging files), while the job's other tasks are still being killed; such a
task may create its staging file after the sweep, or finish it and hand back a commit
message nobody reads. Its file (``.kafkalog-staging.<write>.p1-a0.<uuid>``) then stayed,
past the next successful run. Here the interleavings are made exactly, in one process,
with the tasks' :class:`StagingWriter` and the driver's ``abort_write`` called in the
order Spark can run them (and, through the sysio hook, the sweep run at the very moment
a task creates its file): no staging file outlives the abort.
"""
from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import CommitConflictError
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.io import sysio
from spark_kafkalog.log.write import TopicSpec, abort_write, commit_write
from spark_kafkalog.log.write import config as write_config
from spark_kafkalog.log.write.staging import StagingWriter
from tests.log.faulting import leftovers
from tests.log.test_appender import recs
from tests.log.test_appender_util import kp_encode

FS = pafs.LocalFileSystem()
WID = "batch:0123456789abcdef0123456789abcdef"


def names(root) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(".kafkalog-"))


def test_a_task_finishing_or_starting_after_the_abort_leaves_nothing(tmp_path):
    root = str(tmp_path)
    data, table = kp_encode(recs(20))
    early = StagingWriter(FS, root, WID, "p0-a0", run="r1")
    early.add("t", 0, data, table)              # its file exists before the abort
    late = StagingWriter(FS, root, WID, "p1-a0", run="r1")   # buffers: no file yet
    assert len(names(root)) == 1
    abort_write(FS, root, WID, [], run="r1")    # the driver: task 0 of 2 failed
    assert [n for n in names(root) if n.startswith(jr.STAGING_PREFIX)] == []
    # the task still running creates its file only now, after the sweep
    with pytest.raises(CommitConflictError, match="abandoned"):
        late.add("t", 1, data, table)
    # the task whose file the sweep took finishes: it sees the mark too
    with pytest.raises(CommitConflictError, match="abandoned"):
        early.finish()
    assert leftovers(root) == []
    assert names(root) == [os.path.basename(jr.aborted_marker(root, WID, "r1"))]


def test_the_sweep_at_the_moment_a_task_creates_its_file(tmp_path):
    """The sweep lists the directory just before the task's create (the hook runs the
    driver's abort there): the task's file is not in the sweep, and the task, checking
    after its create, finds the mark; with the per-partition files of a large
    partition too."""
    root = str(tmp_path)
    data, table = kp_encode(recs(20))
    for own_file in (False, True):
        w = StagingWriter(FS, root, WID, f"p1-a{int(own_file)}", run=f"r{own_file}",
                          per_partition_files=own_file, own_file_min_bytes=0)
        aborted = []

        def hook(op, path):
            if op == "create" and path and path.startswith(w.path) and not aborted:
                aborted.append(path)
                abort_write(FS, root, WID, [], run=f"r{own_file}")
        old = sysio.set_fault_hook(hook)
        try:
            with pytest.raises(CommitConflictError, match="abandoned"):
                w.add("t", 1, data, table)
        finally:
            sysio.set_fault_hook(old)
        assert aborted, "the task never created a file"
        assert leftovers(root) == [], own_file


def test_another_run_of_the_same_write_is_not_stopped_by_the_mark(tmp_path):
    """A streaming micro-batch replayed after a restart has the same write id and a new
    run: the old run's mark does not stop it, and its commit lands."""
    root = str(tmp_path)
    data, table = kp_encode(recs(20))
    abort_write(FS, root, WID, [], run="old")
    w = StagingWriter(FS, root, WID, "p0-a0", run="new")
    w.add("t", 0, data, table)
    staged = w.finish()
    r = commit_write(FS, root, WID, [staged], [TopicSpec("t")])
    assert r.ranges == {"t": {0: (0, 20)}}
    assert leftovers(root) == []


def test_old_marks_go_with_a_later_write(tmp_path):
    root = str(tmp_path)
    data, table = kp_encode(recs(5))
    abort_write(FS, root, WID, [], run="aged")
    abort_write(FS, root, WID, [], run="young")
    aged = jr.aborted_marker(root, WID, "aged")
    t = os.stat(aged).st_mtime - write_config.ABORTED_MARKER_TTL_S - 1
    os.utime(aged, (t, t))
    w = StagingWriter(FS, root, "batch:other", "p0-a0")
    w.add("t", 0, data, table)
    commit_write(FS, root, "batch:other", [w.finish()], [TopicSpec("t")])
    assert names(root) == [os.path.basename(jr.aborted_marker(root, WID, "young"))]


def test_no_run_no_mark(tmp_path):
    """Library callers (one process: no task outlives its abort) leave no mark."""
    root = str(tmp_path)
    data, table = kp_encode(recs(5))
    w = StagingWriter(FS, root, WID, "p0-a0")
    w.add("t", 0, data, table)
    abort_write(FS, root, WID, [])
    assert names(root) == []
