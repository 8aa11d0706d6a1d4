"""Writing to an object store (moto's S3 server on 127.0.0.1): no appends — every commit
writes new segment objects named by their base offset, with complete indexes; the same
journal rules (idempotent retries, rollback of an interrupted write)."""
from __future__ import annotations

import io
import os

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.cli import main
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import recover
from spark_kafkalog.log import read_table
from spark_kafkalog.log.write import AppendConfig, topic_partitions
from tests.log.test_appender_util import (
    R,
    assert_indexes_like_broker,
    read_aio,
    read_kp,
    segments,
    write,
)
from tests.log.test_s3 import s3, s3_endpoint  # noqa: F401  (session moto server)

CFG = AppendConfig(segment_bytes=20_000, index_interval_bytes=900)


def recs(n, start=0):
    return [R(b"k%d" % i if i % 4 else None, b"value-%d-" % i * 6, 5000 + i)
            for i in range(start, start + n)]


class Crash(BaseException):
    pass


def download(fs, bucket, local):
    pafs.copy_files(bucket, str(local), source_filesystem=fs,
                    destination_filesystem=pafs.LocalFileSystem())


def test_commits_write_new_segment_objects(s3, tmp_path):  # noqa: F811
    options, fs, bucket = s3
    batches = [recs(150, 0), recs(90, 150), recs(200, 240)]
    for k, b in enumerate(batches):
        write(fs, bucket, f"batch:{k}", {0: b, 1: b[:10]}, partitions=2, config=CFG,
              per_batch=11, tasks=2, codec="zstd" if k == 1 else "none")
    assert write(fs, bucket, "batch:1", {0: batches[1]}, config=CFG).noop
    assert topic_partitions(fs, bucket, "t") == [0, 1]
    local = tmp_path / "copy"
    download(fs, bucket, local)
    d = str(local / "t-0")
    got = read_kp(d)
    assert [r[0] for r in got] == list(range(440))
    assert read_aio(d) == got
    # each commit began a new segment object
    assert {0, 150, 240} <= set(segments(d))
    assert_indexes_like_broker(d, 900)
    # our reader, straight from the bucket
    table = read_table(f"s3://{bucket}", "t", filesystem_options=options)
    assert table.num_rows == 440 + 30
    # and the verifier
    out = io.StringIO()
    assert main(["verify", "--strict", "--no-progress", f"s3://{bucket}"]
                + [f"--fs-option={k}={v}" for k, v in options.items()],
                stdout=out, stderr=io.StringIO()) == 0, out.getvalue()
    assert not [i for i in fs.get_file_info(pafs.FileSelector(bucket))
                if i.base_name.startswith(jr.STAGING_PREFIX)]


@pytest.mark.parametrize("point", ["begun", "append", "segment", "synced"])
def test_interrupted_commit_is_rolled_back(s3, tmp_path, point):  # noqa: F811
    options, fs, bucket = s3
    write(fs, bucket, "batch:1", {0: recs(100)}, config=CFG, per_batch=9)

    def fault(name):
        if name == point:
            raise Crash(name)

    with pytest.raises(Crash):
        write(fs, bucket, "batch:2", {0: recs(300, 100)}, config=CFG, per_batch=9,
              fault=fault)
    assert jr.committed_end_offsets(fs, bucket, "t") == {0: 100}
    assert recover(fs, bucket, "t")["rolled_back"] == "batch:2"
    local = tmp_path / "after"
    download(fs, bucket, local)
    assert [r[0] for r in read_kp(str(local / "t-0"))] == list(range(100))
    write(fs, bucket, "batch:2", {0: recs(300, 100)}, config=CFG, per_batch=9)
    local2 = tmp_path / "retried"
    download(fs, bucket, local2)
    got = read_kp(str(local2 / "t-0"))
    assert [r[0] for r in got] == list(range(400))
    assert_indexes_like_broker(str(local2 / "t-0"), 900)
    assert os.path.exists(local2 / "recovery-point-offset-checkpoint")
