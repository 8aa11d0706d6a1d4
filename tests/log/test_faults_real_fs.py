"""True ENOSPC from the kernel: a write, a compaction and a retention run on a small
filesystem (a size-limited tmpfs, and ext4 on a loop device: a broker disk's
filesystem, with its syncfs and delayed allocation), filled so that only so many bytes
are free, for a sweep of free sizes from "not even the staging file fits" to "all fits".

No hook: the errors come from the kernel wherever they arise (pyarrow's own writes
included). After each run: our :class:`StorageError` naming a file under the log dir and
``ENOSPC`` (or success), the log reads old or new, and once the filler is deleted the
same operation run again completes with nothing left behind. Needs root (mount); CI
runs as root.
"""
from __future__ import annotations

import errno
import os
import shutil

import pyarrow as pa
import pytest

from spark_kafkalog.errors import KafkaLogError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.maintain import compact_topic
from spark_kafkalog.log.write import AppendConfig, write_table
from spark_kafkalog.log.files import journal as jr
from tests.log.faulting import assert_storage_error, can_mount, fill, leftovers, small_fs
from tests.log.test_compact import T0, check_clean
from tests.log.test_compact_crash import SETTINGS, pristine, read_parts  # noqa: F401
from tests.log.test_crash import FS

pytestmark = pytest.mark.skipif(not can_mount(), reason="mounting a small filesystem needs "
                                "root (CI runs as root)")

CFG = AppendConfig(segment_bytes=64 * 1024, index_interval_bytes=4096)


def table(tag: int, n: int) -> pa.Table:
    return pa.table({"key": [b"k%d" % (i % 17) for i in range(n)],
                     "value": [b"%d-%d-" % (tag, i) + os.urandom(16).hex().encode() * 3
                               for i in range(n)],
                     "partition": pa.array([i % 2 for i in range(n)], pa.int32())})


def rows(root, topic):
    t = read_table(root, topic)
    return list(zip(t["partition"].to_pylist(), t["offset"].to_pylist(),
                    t["value"].to_pylist()))


def is_new(got, old, added: pa.Table) -> bool:
    """``got`` is ``old`` with ``added`` appended once (offsets contiguous)."""
    mine = [r for r in got if r[2].startswith(b"2-")]
    offsets = {p: [o for q, o, _ in got if q == p] for p in (0, 1)}
    return ([r for r in got if not r[2].startswith(b"2-")] == old
            and sorted(r[2] for r in mine) == sorted(added["value"].to_pylist())
            and all(v == list(range(v[0], v[0] + len(v))) for v in offsets.values() if v))


def used(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
def test_write_table_on_a_full_disk(tmp_path, kind):
    first, second = table(1, 3000), table(2, 3000)
    with small_fs(6 * 1024, kind) as mnt:
        root = f"{mnt}/log"
        write_table(root, "w", first, partitions=2, config=CFG)
        old = rows(root, "w")
        # the space the second write needs: staging plus its copy into the segments
        need = 3 * (used(root) + 64 * 1024)
        outcomes = []
        for i, free in enumerate(range(0, need, max(need // 12, 4096))):
            filler = fill(mnt, free)
            wid = f"batch:full{i}"
            try:
                write_table(root, "w", second, config=CFG, write_id=wid)
                outcome = "ok"
            except KafkaLogError as err:
                assert_storage_error(err, errno.ENOSPC, root)
                outcome = "ENOSPC"
            committed = jr.load(FS, root, "w").is_committed(wid)
            assert outcome == "ENOSPC" or committed
            got = rows(root, "w")
            assert got == old if not committed else is_new(got, old, second)
            os.unlink(filler)
            # space freed: the same write completes, exactly once
            write_table(root, "w", second, config=CFG, write_id=wid)
            assert is_new(rows(root, "w"), old, second)
            assert not leftovers(root), leftovers(root)
            outcomes.append(outcome)
            # back to the old log for the next free size
            write_table(root, "w", first, partitions=2, config=CFG, mode="overwrite",
                        write_id=f"batch:reset{i}")
            old = rows(root, "w")
        print(f"{kind}: write_table under {len(outcomes)} free sizes: {outcomes}")
        assert "ENOSPC" in outcomes and "ok" in outcomes


def test_compaction_on_a_full_disk(pristine):  # noqa: F811
    src, old, new, _ = pristine
    # the space its files take (a page at least each, on tmpfs)
    size = sum(os.stat(os.path.join(d, f)).st_blocks * 512
               for d, _, fs in os.walk(src) for f in fs)
    with small_fs(max(4 * size // 1024, 2048), "tmpfs") as mnt:
        outcomes = []
        for i, free in enumerate(range(0, 2 * size, max(size // 5, 2048))):
            root = f"{mnt}/c{i}"
            shutil.copytree(src, root)
            filler = fill(mnt, free)
            try:
                compact_topic(root, "c", SETTINGS, now_ms=T0)
                outcomes.append("ok")
            except KafkaLogError as err:
                assert_storage_error(err, errno.ENOSPC, root)
                outcomes.append("ENOSPC")
            assert read_parts(root) in (old, new)
            os.unlink(filler)
            compact_topic(root, "c", SETTINGS, now_ms=T0)
            assert read_parts(root) == new
            check_clean(root)
            assert not leftovers(root), leftovers(root)
            shutil.rmtree(root)
        print(f"compaction under {len(outcomes)} free sizes: {outcomes}")
        assert "ENOSPC" in outcomes and "ok" in outcomes


def test_kernel_copy_and_syncfs_every_call(monkeypatch):
    """On ext4 (a broker disk's filesystem), with the commit's in-kernel copy
    (``copy_file_range``) and one ``syncfs`` instead of per-file fsyncs: every call
    of write_table fails in turn through the hook (EIO; ENOSPC on a disk that stays
    full), including the copy and the syncfs, which no other test reaches."""
    from spark_kafkalog.log.write import config as write_config
    from tests.log.faulting import FaultPlan, count_calls, injected, run_faulted

    monkeypatch.setattr(write_config, "KERNEL_COPY_MIN_BYTES", 2000)
    cfg = AppendConfig(segment_bytes=64 * 1024, index_interval_bytes=4096,
                       sync_method="syncfs")
    second = table(2, 1500)
    with small_fs(8 * 1024, "ext4") as mnt:
        base = f"{mnt}/base"
        write_table(base, "w", table(1, 1500), partitions=2, config=cfg)
        old = rows(base, "w")
        ref = f"{mnt}/ref"
        shutil.copytree(base, ref)
        calls = count_calls(ref, lambda: write_table(ref, "w", second, config=cfg,
                                                     write_id="batch:k2"))
        assert {"copy", "syncfs"} <= {c[0] for c in calls}, calls
        shutil.rmtree(ref)
        for key in calls:
            for code, full in ((errno.EIO, False), (errno.ENOSPC, True)):
                root = f"{mnt}/f"
                shutil.copytree(base, root)
                plan = FaultPlan(root, fail=key, code=code, full=full)
                with injected(plan):
                    outcome, detail = run_faulted(lambda: write_table(
                        root, "w", second, config=cfg, write_id="batch:k2"), plan)
                assert plan.fired, key
                committed = jr.load(FS, root, "w").is_committed("batch:k2")
                if outcome == "failed":
                    assert_storage_error(detail, code, root)
                else:
                    # past the commit point: the write is in, a warning names the errno
                    assert committed, key
                    assert any(errno.errorcode[code] in w for w in detail), (key, detail)
                assert rows(root, "w") == old if not committed else \
                    is_new(rows(root, "w"), old, second)
                plan.free()
                write_table(root, "w", second, config=cfg, write_id="batch:k2")
                assert is_new(rows(root, "w"), old, second), key
                assert not leftovers(root), (key, leftovers(root))
                shutil.rmtree(root)
        print(f"ext4, copy_file_range + syncfs: {len(calls)} calls x 2 faults")
