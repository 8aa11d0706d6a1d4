"""jobs/compact.py: one Spark task per partition compacts a topic through the library;
bad input is one line and exit status 2, before Spark starts."""
from __future__ import annotations

import json

import pytest

from jobs import compact as job
from spark_kafkalog.log import read_table
from tests.log.logbuilder import LogDirBuilder
from tests.log.test_compact import T0, build, check_clean, model


def test_compact_job_cleans_every_partition(spark, tmp_path, capsys):
    b = LogDirBuilder(tmp_path / "log")
    parts = [build(tmp_path / "log", 20 + q, q, b) for q in range(3)]
    b.write()
    root = str(tmp_path / "log")
    dry = job.compact(spark, job.parse_args(["--path", root, "--topic", "c", "--dry-run",
                                             "--now", str(T0), "--no-progress"]))
    assert dry["partitions_cleaned"] == 3 and dry["records_after"] < dry["records_before"]
    args = job.parse_args(["--path", root, "--topic", "c", "--now", str(T0),
                           "--set", "delete.retention.ms=1000", "--no-progress"])
    summary = job.compact(spark, args)
    assert summary["partitions"] == summary["partitions_cleaned"] == 3
    assert (summary["records_before"], summary["records_after"]) == \
        (dry["records_before"], dry["records_after"])
    assert summary["bytes_after"] < summary["bytes_before"]
    for q, p in enumerate(parts):
        t = read_table(root, "c", partitions=[q])
        got = list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                       t.column("value").to_pylist()))
        assert got == model(p, p.segments[-1][0], [T0])
    check_clean(tmp_path / "log")
    assert "compact: cleaned 3 of 3 partitions" in job.summary_line(summary)
    json.dumps(summary, default=str)


def test_compact_job_bad_input_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        job.parse_args(["--help"])
    assert "Example:" in capsys.readouterr().out
    code = job.jobkit.run("compact", lambda: job.main(
        ["--path", str(tmp_path), "--topic", "x", "--set", "no.such=1"]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "unknown setting 'no.such'" in err[0]
