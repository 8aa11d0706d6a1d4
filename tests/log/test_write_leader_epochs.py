"""A write that moves the log start truncates ``leader-epoch-checkpoint`` as retention does.

An overwrite moves each partition's log start to the old log end (or to the first offset
it keeps, with offsets=preserve), and a preserving write into an empty partition to the
first offset written. Past the commit point the partition's leader epochs are truncated
from the log start the checkpoint then holds: Kafka's ``LeaderEpochFileCache.
truncateFromStart``, checked against the rule restated in tests/log/test_retention.py
(``kafka_epochs_after``). A malformed file fails the write before it begins; a kill at
any step leaves, once recovered, the old file (not committed) or the truncated one.
"""
from __future__ import annotations

import os
import shutil

import pytest

from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.files.checkpoint import read_checkpoint, read_leader_epoch_checkpoint
from spark_kafkalog.log.write import AppendConfig, recover_topic
from spark_kafkalog.log.files import journal as jr
from tests.log.killing import FaultCounter, run_killed
from tests.log.test_appender_util import R, write
from tests.log.test_crash import FS
from tests.log.test_preserve import commit, gappy, recs
from tests.log.test_retention import kafka_epochs_after

CFG = AppendConfig(segment_bytes=2000, index_interval_bytes=300)
#: leaders changed along the way (our writer keeps none): several epochs start inside
#: the old log, so the new log start falls between epochs
EPOCHS = [(0, 0), (2, 17), (3, 40), (6, 55)]


def rows(k: int, n: int) -> list[R]:
    return [R(b"k%d" % i, b"%d/%d" % (k, i) + b"x" * 30, 1_700_000_000_000 + i)
            for i in range(n)]


def put_epochs(root: str, p: int, entries) -> None:
    with open(f"{root}/t-{p}/leader-epoch-checkpoint", "w") as f:
        f.write(f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries))


def epochs_of(root: str, p: int) -> list:
    return read_leader_epoch_checkpoint(FS, f"{root}/t-{p}/leader-epoch-checkpoint")


def log_start(root: str, p: int) -> int:
    return read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")[("t", p)]


def old_log(root: str) -> None:
    """Partitions 0 and 1 with 60 and 70 records in small segments, epoch files."""
    for k in range(2):
        write(FS, root, f"batch:b{k}", {0: rows(k, 30), 1: rows(k, 35)}, partitions=2,
              config=CFG, per_batch=5)
    put_epochs(root, 0, EPOCHS)
    put_epochs(root, 1, EPOCHS + [(8, 66)])


def test_overwrite_truncates_leader_epochs_from_the_new_log_start(tmp_path):
    root = str(tmp_path)
    old_log(root)
    before = {p: epochs_of(root, p) for p in (0, 1)}
    write(FS, root, "batch:ov", {0: rows(9, 4), 1: rows(9, 6)}, mode="overwrite",
          config=CFG)
    assert {p: log_start(root, p) for p in (0, 1)} == {0: 60, 1: 70}   # the old log ends
    assert epochs_of(root, 0) == kafka_epochs_after(before[0], 60) == [(6, 60)]
    assert epochs_of(root, 1) == kafka_epochs_after(before[1], 70) == [(8, 70)]
    # a second overwrite (it empties partition 1 too) truncates again from its starts
    write(FS, root, "batch:ov2", {0: rows(10, 3)}, mode="overwrite", config=CFG)
    assert {p: log_start(root, p) for p in (0, 1)} == {0: 64, 1: 76}
    assert epochs_of(root, 0) == [(6, 64)] and epochs_of(root, 1) == [(8, 76)]


def test_a_partition_without_the_file_gets_none(tmp_path):
    root = str(tmp_path)
    old_log(root)
    os.unlink(f"{root}/t-1/leader-epoch-checkpoint")
    write(FS, root, "batch:ov", {0: rows(9, 4), 1: rows(9, 6)}, mode="overwrite",
          config=CFG)
    assert not os.path.exists(f"{root}/t-1/leader-epoch-checkpoint")
    assert epochs_of(root, 0) == [(6, 60)]


def test_a_preserving_write_into_an_empty_partition_moves_its_epoch_start(tmp_path):
    root = str(tmp_path)
    commit(root, "batch:1", [{0: (recs(1, 3), [0, 1, 2])}], partitions=2)
    put_epochs(root, 1, [(4, 0)])          # a broker's fresh partition: epoch 4 from 0
    put_epochs(root, 0, [(4, 0)])
    commit(root, "batch:2", [{1: (recs(2, 10), gappy(500, 10))}])
    assert log_start(root, 1) == 500
    assert epochs_of(root, 1) == kafka_epochs_after([(4, 0)], 500) == [(4, 500)]
    assert epochs_of(root, 0) == [(4, 0)]   # its log start did not move


def test_a_malformed_file_fails_the_overwrite_before_it_begins(tmp_path):
    root = str(tmp_path)
    old_log(root)
    put_epochs(root, 1, [(3, 40), (2, 50)])         # epochs going down
    want = {p: read_table(root, "t", partitions=[p]).column("value").to_pylist()
            for p in (0, 1)}
    with pytest.raises(LogLayoutError, match="must both increase") as err:
        write(FS, root, "batch:ov", {0: rows(9, 4), 1: rows(9, 6)}, mode="overwrite",
              config=CFG)
    assert "t-1/leader-epoch-checkpoint" in str(err.value)
    st = jr.load(FS, root, "t")
    assert st.pending is None and not st.is_committed("batch:ov")
    assert {p: read_table(root, "t", partitions=[p]).column("value").to_pylist()
            for p in (0, 1)} == want
    assert epochs_of(root, 0) == EPOCHS


@pytest.mark.slow
def test_sigkill_at_every_overwrite_step(tmp_path):
    src = str(tmp_path / "src")
    old_log(src)
    before = {p: epochs_of(src, p) for p in (0, 1)}
    after = {0: kafka_epochs_after(before[0], 60), 1: kafka_epochs_after(before[1], 70)}

    def overwrite(root, fault):
        write(FS, root, "batch:ov", {0: rows(9, 4), 1: rows(9, 6)}, mode="overwrite",
              config=CFG, fault=fault)

    probe = str(tmp_path / "probe")
    shutil.copytree(src, probe)
    counter = FaultCounter()
    overwrite(probe, counter)
    points = counter.points
    assert "epochs:0" in points and "epochs:1" in points
    assert points.index("committed:t") < points.index("epochs:0")
    for kill_at in range(1, len(points) + 1):
        root = str(tmp_path / f"k{kill_at}")
        shutil.copytree(src, root)
        assert run_killed(lambda f: overwrite(root, f), kill_at)
        committed = kill_at > points.index("committed:t")
        for p in (0, 1):                    # the old file or the truncated one, never torn
            assert epochs_of(root, p) in (before[p], after[p]), (points[kill_at - 1], p)
        recover_topic(FS, root, "t")
        assert {p: epochs_of(root, p) for p in (0, 1)} == (after if committed else before), \
            points[kill_at - 1]
        shutil.rmtree(root)
