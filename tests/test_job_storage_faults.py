"""A job run as a command on a real full disk (a filled tmpfs) or over a real I/O error
(a FUSE passthrough failing a segment's reads with EIO): exit status 4 (the filesystem
failed: retry once it is fixed), never 2 (bad input), and the job's one line,
``<job>: StorageError: ... ENOSPC|EIO ... (file ...)``, is the last line on stderr (Spark
says nothing after it); no success line on stdout; the old output stands.
"""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafkalog.log.write import write_table
from tests.log.eiofs import set_rules
from tests.log.faulting import can_mount, fill, small_fs
from tests.log.test_faults_storage_files import needs_fuse
from tests.test_consumer_offsets_job import commits, kip848_group, tree, write_consumer_offsets

REPO = Path(__file__).resolve().parents[1]

needs_mount = pytest.mark.skipif(not can_mount(), reason="mounting a small filesystem "
                                 "needs root (CI runs as root)")


def run(job: str, args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_KAFKALOG_FAULTS", None)
    return subprocess.run([sys.executable, str(REPO / "jobs" / f"{job}.py"), *args,
                           "--no-progress"], capture_output=True, text=True, env=env,
                          timeout=300)


def last_line(proc) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


@needs_mount
def test_consumer_offsets_on_a_full_disk_exits_4(tmp_path):
    logdir = tmp_path / "logs"
    write_consumer_offsets(logdir, commits("g", {0: 5, 1: 7}) + kip848_group())
    with small_fs(1024) as mnt:
        out = Path(mnt) / "offsets"
        assert run("consumer_offsets", ["--path", str(logdir), "--output", str(out)]
                   ).returncode == 0
        old = tree(out)
        # the tables' space: the output dir full (the first table's write fails) ...
        filler = fill(mnt, 0)
        proc = run("consumer_offsets", ["--path", str(logdir), "--output", str(out),
                                        "--summary-json", str(tmp_path / "s.json")])
        assert proc.returncode == 4, proc.stderr
        line = last_line(proc)
        assert line.startswith("consumer_offsets: StorageError: ") and "ENOSPC" in line \
            and f"file {mnt}/" in line, proc.stderr
        assert proc.stdout == "" and not (tmp_path / "s.json").exists()
        assert tree(out) == old
        os.unlink(filler)
        # ... or the tables fit and the summary does not: the summary's disk is full
        summary = Path(mnt) / "s.json"
        summary.write_text('{"old": true}\n')
        filler = fill(mnt, 0)
        proc = run("consumer_offsets", ["--path", str(logdir), "--output",
                                        str(tmp_path / "elsewhere"),
                                        "--summary-json", str(summary)])
        assert proc.returncode == 4, proc.stderr
        line = last_line(proc)
        assert line.startswith("consumer_offsets: StorageError: ") and "ENOSPC" in line \
            and f"file {summary}" in line, proc.stderr
        assert proc.stdout == ""                    # no success line for a failed job
        assert json.loads(summary.read_text()) == {"old": True}     # not a 0-byte file
        assert sorted(os.listdir(mnt)) == ["filler", "offsets", "s.json"]
        os.unlink(filler)


@pytest.mark.spark
def test_export_over_a_segment_read_eio_exits_4(tmp_path):
    """EIO reading a segment in a Spark task: the executor's StorageError comes through
    Spark as ours (exit 4, not LogLayoutError's 2), and is the job's last line."""
    needs_fuse()
    from tests.log.eiofs import eio_fs

    with eio_fs() as (mnt, backing, rules):
        root = f"{mnt}/log"
        write_table(root, "t", pa.table({
            "value": [b"v%d" % i for i in range(500)],
            "partition": pa.array([i % 2 for i in range(500)], pa.int32())}), partitions=2)
        set_rules(rules, [{"op": "read", "path": "/t-1/00000000000000000000.log",
                           "errno": errno.EIO}])
        proc = run("export_parquet", ["--path", root, "--output", str(tmp_path / "out")])
        assert proc.returncode == 4, proc.stderr[-3000:]
        line = last_line(proc)
        assert line.startswith("export_parquet: StorageError: ") and "EIO" in line \
            and "t-1/00000000000000000000.log" in line, proc.stderr[-3000:]
        assert "LogLayoutError" not in proc.stderr
        assert not (tmp_path / "out").exists()
