"""A full disk under Spark's batch writer and streaming sink (true ENOSPC: the log dir is
on a small tmpfs, filled so that the staged batches fit but not their copy into the
segments, or not even the staging). The commit runs in a process a test hook cannot
reach, so the kernel's own error is the fault here; every system call's failure is
exercised without Spark by ``tests/log/test_faults_*.py``.

After the failure: Spark's error carries ours (ENOSPC, the file); the log reads as
before; once space is freed the same write (the batch job run again; the stream
restarted from its checkpoint) lands every record exactly once, nothing left behind.
"""
from __future__ import annotations

import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log import read_table
from spark_kafkalog.log.files import journal as jr
from tests.log.faulting import can_mount, fill, leftovers, small_fs
from tests.spark.test_write_stream import make_inputs

pytestmark = pytest.mark.skipif(not can_mount(), reason="mounting a small filesystem needs "
                                "root (CI runs as root)")
FS = pafs.LocalFileSystem()


def frame(spark, tag: int, n: int):
    return spark.range(n).selectExpr(
        f"cast(concat('{tag}-', id, '-', repeat('x', 200)) as binary) as value",
        "cast(id % 2 as int) as partition")


def values(root, topic):
    return sorted(read_table(root, topic)["value"].to_pylist())


def used(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def test_batch_write_on_a_full_disk(spark):
    with small_fs(16 * 1024) as mnt:
        root = f"{mnt}/log"
        frame(spark, 1, 2000).write.format("kafkalog").option("path", root) \
            .option("topic", "b").option("partitions", "2").mode("append").save()
        old = values(root, "b")
        one = used(root)
        for free in (one // 4, one + one // 2):      # staging does not fit / copy does not
            filler = fill(mnt, free)
            with pytest.raises(Exception) as info:
                frame(spark, 2, 2000).write.format("kafkalog").option("path", root) \
                    .option("topic", "b").mode("append").save()
            text = str(info.value)
            assert "ENOSPC" in text and mnt in text, text[-2000:]
            assert values(root, "b") == old
            os.unlink(filler)
            assert not leftovers(root), leftovers(root)
        frame(spark, 2, 2000).write.format("kafkalog").option("path", root) \
            .option("topic", "b").mode("append").save()
        got = values(root, "b")
        assert len(got) == len(set(got)) == 4000 and set(old) <= set(got)
        assert not leftovers(root)


def test_stream_on_a_full_disk(spark, tmp_path):
    inputs, ckpt = tmp_path / "in", tmp_path / "ckpt"
    make_inputs(inputs, range(4), 300)
    with small_fs(8 * 1024) as mnt:
        root = f"{mnt}/log"

        def run():
            df = spark.readStream.schema("key string, value string") \
                .option("maxFilesPerTrigger", 1).parquet(str(inputs))
            q = df.writeStream.format("kafkalog").option("path", root) \
                .option("topic", "s").option("partitions", "2") \
                .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start()
            q.awaitTermination()

        run()
        assert len(read_table(root, "s")) == 1200
        make_inputs(inputs, range(4, 8), 300)
        filler = fill(mnt, 2048)
        with pytest.raises(Exception) as info:
            run()
        assert "ENOSPC" in str(info.value), str(info.value)[-2000:]
        got = read_table(root, "s")["value"].to_pylist()
        assert len(got) == len(set(got)) and len(got) % 300 == 0     # whole micro-batches
        os.unlink(filler)
        run()                      # restarted from its checkpoint: the rest, once
        got = read_table(root, "s")["value"].to_pylist()
        assert sorted(got) == sorted(f"payload-{i}".encode() for i in range(2400))
        assert jr.load(FS, root, "s").pending is None
        assert not leftovers(root), leftovers(root)
