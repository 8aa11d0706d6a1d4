"""`kafkalog report` without Spark: the table, --json on stdout, exit statuses."""
from __future__ import annotations

import io
import json

from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.cli import main as kafkalog


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = kafkalog(argv, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_report_table_json_and_statuses(tmp_path):
    root = tmp_path / "logs"
    make_sample_log(root, records=6_000, partitions=2, segment_bytes=64 << 10, days=1)
    code, out, _ = run(["report", str(root), "--jobs", "1", "--no-progress"])
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("1 topic, 2 partitions") and "0 errors" in lines[0]
    assert any(x.startswith("events ") and "6,000" in x for x in lines)
    assert any(x.startswith("events-1 ") for x in lines)
    code, out, _ = run(["report", str(root), "--json", "--no-verify", "--no-keys",
                        "--no-progress"])
    assert code == 0
    doc = json.loads(out)
    assert doc["totals"]["records"] == 6_000 and doc["topics"][0]["distinct_keys"] is None
    code, out, err = run(["report", str(root), "--topic", "nope", "--no-progress"])
    assert code == 2 and "no partitions found" in err
    code, _, err = run(["report", str(tmp_path / "missing")])
    assert code == 2 and "no such log directory" in err


def test_killed_at_every_file_operation_each_report_is_old_or_new(tmp_path):
    """``kafkalog report --output-json --html`` over existing reports, SIGKILLed before each
    file operation it makes (``SPARK_KAFKALOG_FAULTS=*@N=KILL``): each file is byte for
    byte its old or its new version; the run that completes leaves no temporary file."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    root = tmp_path / "logs"
    make_sample_log(root, records=2_000, partitions=1, segment_bytes=64 << 10, days=1)
    html, js = tmp_path / "out" / "r.html", tmp_path / "out" / "r.json"
    html.parent.mkdir()
    old = {html: b"<p>old</p>", js: b'{"old": 1}\n'}
    argv = [sys.executable, "-m", "spark_kafkalog.cli", "report", str(root), "--jobs", "1",
            "--no-progress", "--html", str(html), "--output-json", str(js)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SPARK_KAFKALOG_FAULTS", None)
    kills, changed = 0, set()
    for n in range(1, 60):
        for path, data in old.items():
            path.write_bytes(data)
        r = subprocess.run(argv, capture_output=True, env={
            **env, "SPARK_KAFKALOG_FAULTS": f"*@{n}=KILL"}, timeout=120)
        if r.returncode == 0:
            break
        assert r.returncode == -9, r.stderr[-2000:]
        kills += 1
        for path, data in old.items():
            now = path.read_bytes()
            if now != data:             # the new one, whole
                changed.add(path.name)
                assert (json.loads(now)["totals"]["records"] == 2_000 if path == js
                        else now.startswith(b"<!doctype html>")), (n, path)
    # killed after a file's rename it is the new one (the JSON first, then the page)
    assert kills >= 2 * 4 and changed == {"r.json", "r.html"}
    assert json.loads(js.read_bytes())["totals"]["records"] == 2_000
    assert sorted(p.name for p in html.parent.iterdir()) == ["r.html", "r.json"]
