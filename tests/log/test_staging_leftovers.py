"""Staging files a dead writer left at a log-dir root: who owns them (the owner record a
batch write leaves beside its staging), the next job's sweep that deletes a dead owner's
files and nothing else, and verify's warning for any it sees. No Spark: the dead writer
is a real process that recorded itself and exited."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs

from spark_kafkalog.jobs import _preflight
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.diagnose.verify import verify_log_dirs
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write.leftovers import (
    owner_path,
    record_owner,
    remove_dead_staging,
    staging_leftovers,
)
from spark_kafkalog.log.write.staging import staging_path

FS = pafs.LocalFileSystem()


def _stage(root: Path, write_id: str, size: int) -> str:
    """A staging file of ``write_id`` as a task names it."""
    path = staging_path(str(root), write_id, "t0")
    Path(path).write_bytes(b"\0" * size)
    return path


def _dead_owner(root: Path, write_id: str) -> None:
    """The owner record written by a process that then exits (a killed driver)."""
    code = ("import sys, pyarrow.fs as f; from spark_kafkalog.log.write.leftovers import "
            "record_owner; record_owner(f.LocalFileSystem(), sys.argv[1], sys.argv[2])")
    subprocess.run([sys.executable, "-c", code, str(root), write_id], check=True,
                   timeout=60)


def _staging_names(root: Path) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX))


def test_the_next_job_removes_a_dead_writers_staging_only(tmp_path):
    root = tmp_path / "logs"
    root.mkdir()
    dead, live, unknown = jr.batch_write_id(), jr.batch_write_id(), jr.batch_write_id()
    _dead_owner(root, dead)
    dead_files = [_stage(root, dead, 1000), _stage(root, dead, 24)]
    record_owner(FS, str(root), live)        # this process: running
    live_file = _stage(root, live, 10)
    unknown_file = _stage(root, unknown, 5)  # no owner record (a streaming batch's)

    found = {(left.owner or {}).get("write_id"): left
             for left in staging_leftovers(FS, str(root))}
    assert found[dead].alive is False and found[live].alive is True
    assert found[None].alive is None and found[None].paths == (unknown_file,)
    assert found[dead].paths[-1] == owner_path(str(root), dead)     # the record last
    assert found[dead].size == 1024 + os.path.getsize(owner_path(str(root), dead))

    # the destination preflight of copy_topic and import_files sweeps
    assert _preflight.recover_log_dir(str(root)) == []
    left = _staging_names(root)
    assert not any(Path(p).name in left for p in dead_files)
    assert Path(owner_path(str(root), dead)).name not in left
    assert sorted([Path(live_file).name, Path(owner_path(str(root), live)).name,
                   Path(unknown_file).name]) == left
    assert remove_dead_staging(FS, str(root)) == []


def test_verify_warns_of_staging_files(tmp_path):
    root = tmp_path / "logs"
    make_sample_log(str(root), records=200, partitions=2, seed=1)
    assert verify_log_dirs(LogDirs(str(root))).warnings() == []
    dead = jr.batch_write_id()
    _dead_owner(root, dead)
    _stage(root, dead, 4096)
    result = verify_log_dirs(LogDirs(str(root)))
    warnings = result.warnings()
    assert [w.kind for w in warnings] == ["staging"] and result.ok()
    w = warnings[0]
    assert Path(w.path).name.startswith(jr.STAGING_PREFIX + jr.write_token(dead) + ".")
    assert "2 staging files" in w.message and f"of write {dead}" in w.message
    assert "no longer running" in w.message and "the next copy_topic" in w.message
