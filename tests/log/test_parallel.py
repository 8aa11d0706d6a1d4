"""map_io: concurrent on remote filesystems, sequential on local disk, results in order,
the first failing item's error (in input order) raised unchanged."""
from __future__ import annotations

import threading

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.io import map_io

LOCAL = pafs.LocalFileSystem()
# not a LocalFileSystem: what map_io takes for a remote one (no request is made)
REMOTE = pafs.SubTreeFileSystem("/", pafs.LocalFileSystem())


def test_local_runs_in_the_callers_thread():
    seen = map_io(LOCAL, lambda x: threading.get_ident(), range(20))
    assert set(seen) == {threading.get_ident()}


def test_remote_runs_concurrently_in_order():
    gate = threading.Barrier(4, timeout=30)

    def work(x):
        if x < 4:
            gate.wait()         # passes only when four items run at once
        return x * x

    assert map_io(REMOTE, work, range(40)) == [x * x for x in range(40)]


def test_remote_raises_the_first_failing_items_error_unchanged():
    late_fail = threading.Event()
    errors = {x: LogLayoutError(f"partition {x} is damaged", path=f"/t-{x}") for x in (3, 7)}

    def work(x):
        if x == 7:              # fails first in time
            late_fail.set()
            raise errors[7]
        if x == 3:              # fails later, but comes first in order
            assert late_fail.wait(30)
            raise errors[3]
        return x

    with pytest.raises(LogLayoutError) as info:
        map_io(REMOTE, work, range(10), threads=10)
    assert info.value is errors[3]


def test_remote_with_one_item_or_one_thread_stays_in_the_callers_thread():
    me = threading.get_ident()
    assert map_io(REMOTE, lambda x: threading.get_ident(), [1]) == [me]
    assert set(map_io(REMOTE, lambda x: threading.get_ident(), range(5), threads=1)) == {me}
