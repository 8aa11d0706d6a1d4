"""jobs/log_report.py: Spark tasks compute exactly the library's per-partition report
(one task per partition, or packed), the outputs are written, the summary says what was
found, bad input is one line."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spark_kafkalog import jobkit

from spark_kafkalog.jobs import log_report
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.jobkit import JobInputError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.report import build_report, collect_stats
from tests.conftest import REPO
from tests.log.logbuilder import build_rich_partition, flip_byte


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lr") / "logs"
    make_sample_log(root, records=9_000, partitions=3, segment_bytes=64 << 10, days=1)
    _, p = build_rich_partition(root)
    b = p.batches[4]
    flip_byte(root / "a.b-c_d-0" / f"{b.segment:020d}.log", b.position + 25)
    return root


def _strip(report: dict) -> dict:
    return {k: v for k, v in report.items() if k != "generated_at"}


@pytest.mark.parametrize("tasks", [None, 2])
def test_spark_report_equals_the_library_report(spark, logs, tmp_path, tasks):
    argv = ["--path", str(logs), "--html", str(tmp_path / "r.html"),
            "--json", str(tmp_path / "r.json")]
    if tasks:
        argv += ["--tasks", str(tasks)]
    args = log_report.parse_args(argv)
    got = log_report.run_report(spark, args)
    logdirs = LogDirs(str(logs), include_internal=True)
    parts = [p for t in logdirs.topics() for p in logdirs.partitions(t)]
    want = build_report(collect_stats(logdirs, parts, jobs=1), roots=logdirs.roots)
    assert _strip(got) == _strip(want)
    assert got["totals"]["partitions"] == 4 and got["totals"]["errors"] >= 1
    assert len(log_report.pack(parts, tasks)) == (tasks or 4)


def test_main_writes_outputs_and_summary(spark, logs, tmp_path, capsys):
    summary = tmp_path / "s.json"
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    # jobkit.spark_session stops the session it gets: give it its own stop-less one
    spark_stop = spark.stop
    spark.stop = lambda: None
    try:
        code = log_report.main(["--path", str(logs), "--html", str(html), "--json", str(js),
                                "--topic", "events", "--summary-json", str(summary),
                                "--no-progress"])
    finally:
        spark.stop = spark_stop
    assert code == 0
    out = capsys.readouterr().out
    s = json.loads(summary.read_text())
    assert s["topics"] == 1 and s["partitions"] == 3 and s["records"] == 9_000
    assert s["errors"] == 0
    assert "reported 3 partitions of 1 topic (9,000 records" in out
    assert "events" in out
    report = json.loads(js.read_text())
    assert report["totals"]["records"] == 9_000
    assert html.read_text().startswith("<!doctype html>")


def test_help_and_bad_input():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "log_report.py"), "--help"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and "Example:" in r.stdout and "job log_report --path" in r.stdout
    with pytest.raises(JobInputError, match="--tasks must be at least 1"):
        log_report.select(log_report.parse_args(["--path", "/x", "--tasks", "0"]))


def test_missing_topic_is_one_line(logs):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "log_report.py"), "--path",
                        str(logs), "--topic", "nope"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "log_report: JobInputError: --topic: topic 'nope' is not in"), r.stderr[-2000:]


def test_errors_found_exit_1_as_kafkalog_report(spark, logs, tmp_path, capsys):
    summary = tmp_path / "s.json"
    spark_stop = spark.stop
    spark.stop = lambda: None
    try:
        code = log_report.main(["--path", str(logs), "--quiet", "--no-progress",
                                "--summary-json", str(summary)])
    finally:
        spark.stop = spark_stop
    assert json.loads(summary.read_text())["errors"] >= 1
    assert code == 1 == jobkit.EXIT_DATA


def test_killed_mid_run_leaves_the_old_report_and_the_next_run_lands(logs, tmp_path):
    """The job SIGKILLed at its first rename (the JSON report written and fsynced beside
    the old one, not yet renamed over it): both old reports byte-identical; the next run
    replaces both."""
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    html.write_text("<p>the old report</p>")
    js.write_text('{"old": true}\n')
    argv = [sys.executable, str(REPO / "jobs" / "log_report.py"), "--path", str(logs),
            "--topic", "events", "--html", str(html), "--json", str(js), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPARK_KAFKALOG_FAULTS": "rename@1=KILL"}
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == -9, r.stderr[-2000:]
    assert html.read_text() == "<p>the old report</p>" and js.read_text() == '{"old": true}\n'
    env.pop("SPARK_KAFKALOG_FAULTS")
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(js.read_text())["totals"]["records"] == 9_000
    assert html.read_text().startswith("<!doctype html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.json"]
