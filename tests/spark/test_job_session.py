"""What a job's own Spark session does for a user, run as a user runs a job (a
subprocess: the behaviour is the JVM's start and the process's signals):

- ``PYSPARK_PYTHON`` unset and another ``python3`` first on the ``PATH`` (pipx, cron, a
  venv's ``bin/kafkalog`` called by path): the job still runs, its workers on its own
  interpreter;
- Ctrl-C (SIGINT to the process group, as a terminal sends it) mid-write: one line,
  ``copy_topic: interrupted``, exit 130; the next run on the destination leaves no staging
  file there.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import copy_topic
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import read_table
from spark_kafkalog.log.files import journal as jr

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYSPARK_GATEWAY_PORT",
                        "PYSPARK_GATEWAY_SECRET")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def test_a_job_runs_without_pyspark_python(tmp_path):
    # a python3 that is not ours comes first on the PATH
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text("#!/bin/sh\necho 'not the Python with kafkalog' >&2\n"
                                  "exit 1\n")
    (fake / "python3").chmod(0o755)
    make_sample_log(tmp_path / "logs", records=300, partitions=2, seed=3)
    env = _env(PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, "-m", "spark_kafkalog.cli", "job",
                           "export_parquet", "--path", str(tmp_path / "logs"),
                           "--output", str(tmp_path / "out")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("exported 300 rows from 2 topic-partitions")
    # and the JVM's "Using incubator modules" start-up line is not shown
    assert proc.stderr == ""


@pytest.fixture()
def shared(spark, monkeypatch):
    @contextlib.contextmanager
    def session(*_a, **_k):
        yield spark
    monkeypatch.setattr(jobkit, "spark_session", session)
    return spark


def test_ctrl_c_is_one_line_and_the_next_run_leaves_no_staging(shared, tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    make_sample_log(src, records=400_000, partitions=2, seed=5)
    proc = subprocess.Popen(
        [sys.executable, "-m", "spark_kafkalog.jobs.copy_topic", "--path", str(src),
         "--output", str(dst), "--topic", "events", "--progress"],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    seen = []
    try:
        for line in proc.stderr:            # interrupt once a Spark stage runs
            seen.append(line)
            if ": stage " in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # before the signal: progress lines only; after it: the one line
    assert all(ln.startswith(("copy_topic: stage ", "copy_topic: [1/1] events -> "))
               for ln in seen), seen
    lines = [ln for ln in err.splitlines() if not ln.startswith("copy_topic: stage ")]
    assert proc.returncode == 130, (out, lines)
    assert lines == ["copy_topic: interrupted"] and out == ""

    # the next run into the same log dir (another topic name: the interrupted copy
    # committed or not) completes, and no staging file is left there
    status = jobkit.run("copy_topic", lambda: copy_topic.main(
        ["--path", str(src), "--output", str(dst), "--topic", "events", "--rename",
         "events=events2", "--no-progress"]), argv=[])
    assert status == 0
    assert not [n for n in os.listdir(dst) if n.startswith(jr.STAGING_PREFIX)]
    assert read_table(str(dst), "events2").num_rows == 400_000
