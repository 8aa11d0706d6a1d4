"""jobs/retention.py: --help with an example, --dry-run lists exactly what a run then
deletes, per-topic settings from the command line and a JSON file, the summary and its
JSON, one-line reasons for bad input (no Spark needed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from spark_kafkalog.jobs import retention as job
from spark_kafkalog.jobs.make_sample_log import START_MS, make_sample_log
from spark_kafkalog.log import LogDirs, read_table
from tests.conftest import REPO

DAY = 86_400_000


@pytest.fixture()
def sample(tmp_path):
    root = tmp_path / "kafka-logs"
    make_sample_log(root, records=12_000, partitions=2, segment_bytes=64 << 10, days=3)
    return root


def run(argv, capsys):
    code = job.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_help_has_an_example():
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "retention.py"), "--help"],
                       capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0
    assert "Example:" in r.stdout and "kafkalog job retention --path" in r.stdout


def test_dry_run_then_run(sample, tmp_path, capsys):
    now = str(START_MS + 3 * DAY)                 # data spans 3 days up to about now
    before = read_table(str(sample), "events", include_headers=False).num_rows
    summary_dry = tmp_path / "dry.json"
    code, out, _ = run(["--path", str(sample), "--retention-ms", str(DAY), "--now", now,
                        "--dry-run", "--summary-json", str(summary_dry)], capsys)
    assert code == 0
    dry = json.loads(summary_dry.read_text())
    assert dry["dry_run"] and dry["segments_deleted"] > 2
    assert out.count(".log (") == dry["segments_deleted"]
    assert "retention would delete" in out
    # nothing changed
    assert read_table(str(sample), "events", include_headers=False).num_rows == before
    summary = tmp_path / "run.json"
    code, out, err = run(["--path", str(sample), "--retention-ms", str(DAY), "--now", now,
                          "--file-delete-delay-ms", "0", "--summary-json", str(summary),
                          "--progress"], capsys)
    assert code == 0
    done = json.loads(summary.read_text())
    assert [(p["partition"], p["deleted"]) for p in done["per_partition"]] == \
        [(p["partition"], p["deleted"]) for p in dry["per_partition"]]
    assert "retention deleted" in out and "events:" in err
    t = read_table(str(sample), "events", include_headers=False)
    assert 0 < t.num_rows < before
    # every segment left ends within the last day or is the active one
    for p in LogDirs(str(sample)).partitions("events"):
        assert not [n for n in os.listdir(p.path) if n.endswith(".deleted")]


def test_per_topic_settings_file_and_flags(sample, tmp_path, capsys):
    cfg = tmp_path / "ret.json"
    cfg.write_text(json.dumps({"*": {"retention.ms": -1},
                               "events": {"retention.bytes": 150_000}}))
    summary = tmp_path / "s.json"
    code, _, _ = run(["--path", str(sample), "--config-file", str(cfg), "--dry-run",
                      "--summary-json", str(summary)], capsys)
    assert code == 0
    s = json.loads(summary.read_text())
    assert {p["config"]["retention.bytes"] for p in s["per_partition"]} == {150_000}
    assert {p["config"]["retention.ms"] for p in s["per_partition"]} == {-1}
    for p in s["per_partition"]:
        gone = sum(d["size"] for d in p["deleted"])
        assert p["size_bytes"] - gone >= 150_000 and p["deleted"]
    # a flag beats the file
    code, _, _ = run(["--path", str(sample), "--config-file", str(cfg), "--dry-run",
                      "--topic-config", "events:retention.bytes=-1", "--summary-json",
                      str(summary)], capsys)
    assert json.loads(summary.read_text())["segments_deleted"] == 0


@pytest.mark.parametrize("argv,reason", [
    (["--topic", "nope"], "topic 'nope' is not in"),
    (["--topic-config", "events:retention.weeks=1"], "unknown retention setting"),
    (["--topic-config", "other:retention.ms=1"], "settings name topic 'other'"),
    (["--retention-ms", "-5"], "retention.ms: -5 is below -1"),
    (["--now", "yesterday"], "--now: 'yesterday' is neither"),
])
def test_bad_input_is_one_line(sample, argv, reason):
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "retention.py"), "--path",
                        str(sample), "--dry-run", *argv], capture_output=True, text=True,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("retention: ") and reason in lines[0], \
        r.stderr


def test_the_wait_for_file_delete_delay_is_said_without_a_terminal(sample, capsys):
    """stderr is not a terminal here (no progress lines), yet the wait is said: a job
    that sleeps file.delete.delay.ms in silence looks hung."""
    now = str(START_MS + 3 * DAY)
    code, out, err = run(["--path", str(sample), "--retention-ms", str(DAY), "--now", now,
                          "--file-delete-delay-ms", "1500"], capsys)
    assert code == 0 and out.startswith("retention deleted 7 segments")
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("retention: events: waiting "), lines
    assert lines[0].endswith("s (file.delete.delay.ms) before removing the .deleted files "
                             "(--no-wait leaves them to the next run)")
    assert not [n for p in sample.iterdir() if p.is_dir() for n in os.listdir(p)
                if n.endswith(".deleted")]
