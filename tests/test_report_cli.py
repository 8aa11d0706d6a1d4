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
