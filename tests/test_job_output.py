"""What the jobs and commands print a new user, line by line: counts with thousands
separators and the right plural, no rate for a run too small to measure one, defaults in
``make_sample_log --help``, a ``make run`` command line that can be pasted, a bad
``--value-schema`` refused before Spark starts (checked against Spark's own DDL parser in
tests/spark/test_ddl.py). No Spark."""
from __future__ import annotations

import contextlib
import os
import shlex

import pyarrow as pa
import pytest

from spark_kafkalog import jobkit
from spark_kafkalog.errors import BadRowError
from spark_kafkalog.jobs import export_parquet, make_sample_log, run_main
from spark_kafkalog.log.write import write_table


def test_counts_have_separators_and_the_right_plural():
    assert jobkit.plural(1, "partition") == "1 partition"
    assert jobkit.plural(1234567, "record") == "1,234,567 records"
    assert jobkit.plural(0, "row") == "0 rows"


def test_make_run_summary_lines():
    summary = {"rows": 3_000_000, "partitions": 6, "topics": 1, "dates": 4,
               "first_timestamp": "2024-01-01T00:00:00.670Z",
               "last_timestamp": "2024-01-04T00:00:01.386Z", "seconds": 23.9,
               "output": "out/export"}
    lines = run_main.summary_text(summary).splitlines()
    assert lines[0] == "main job summary"
    assert "  rows        3,000,000" in lines
    assert "  partitions  6 topic-partitions in 1 topic, 4 date partitions" in lines
    # 3,000,000 / 23.9 s, rounded; no stray parenthesis after it
    assert "  throughput  23.9s to read, convert and write Parquet: 125,523 rows/s" in lines
    summary.update(rows=20, seconds=0.4)                     # too small to measure a rate
    assert "  throughput  0.4s to read, convert and write Parquet" in \
        run_main.summary_text(summary).splitlines()


def test_no_rate_for_a_tiny_run():
    assert jobkit.rate_text(6, 0.5, "records") == ""        # "12 records/s" measured nothing
    assert jobkit.rate_text(999, 10.0, "rows") == ""
    assert jobkit.rate_text(50_000, 0.4, "rows") == ""
    assert jobkit.rate_text(50_000, 2.0, "rows") == " (25,000 rows/s)"
    s = export_parquet.summary_of({"rows": 6, "topic_partitions": [
        {"topic": "t", "partition": 0}], "dates": ["2024-01-01"], "first": 0, "last": 1000,
        "no_timestamp": 0}, "out", 0.5)
    line = export_parquet.summary_line(s)
    assert line.endswith("to out in 0.5s") and "/s" not in line, line
    assert "from 1 topic-partition (1 topic, 1 date 2024-01-01" in line


def test_one_partition_is_singular(tmp_path):
    table = pa.table({"value": [b"a"], "partition": pa.array([3], pa.int32())})
    write_table(str(tmp_path), "t", pa.table({"value": [b"x"]}), partitions=1)
    with pytest.raises(BadRowError) as err:
        write_table(str(tmp_path), "t", table)
    assert "which has 1 partition (0..0)" in str(err.value), str(err.value)


def test_make_sample_log_help_shows_its_defaults(capsys):
    with pytest.raises(SystemExit) as e:
        make_sample_log.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for default in ("default 3,000,000", "default 6", "default events", "default 8 MiB",
                    "default 3)", "none,lz4,zstd,snappy,gzip)", "default 7",
                    "kafkalog job make_sample_log --output sample/kafka-logs"):
        assert default in text, default


def test_make_sample_log_line(tmp_path, capsys):
    assert make_sample_log.main(["--output", str(tmp_path / "l"), "--records", "1500",
                                 "--partitions", "1"]) == 0
    line = capsys.readouterr().out
    assert line.startswith("wrote 1,500 records of topic events in 1 partition, 1 segment,")


def test_make_run_prints_a_command_that_pastes():
    env = {"PATH": "/bin", "PYTHONPATH": "/my repo:/x", "PYSPARK_PYTHON": "/v/bin/python"}
    cmd = ["/v/bin/spark-submit", "/r/export_parquet.py", "--path", "/a dir/logs",
           "--summary-json", "kafkalog-run-1/summary.json", "--value-schema",
           "user_id long, event string"]
    line = run_main.shown_command(cmd, env, {"PATH": "/bin"})
    words = shlex.split(line)
    assert words == ["PYTHONPATH=/my repo:/x", "PYSPARK_PYTHON=/v/bin/python",
                     "/v/bin/spark-submit", "/r/export_parquet.py", "--path", "/a dir/logs",
                     "--value-schema", "user_id long, event string"]
    assert line.startswith("PYTHONPATH='/my repo:/x' PYSPARK_PYTHON=/v/bin/python ")


@pytest.fixture()
def no_spark(monkeypatch):
    @contextlib.contextmanager
    def refuse(*_a, **_k):
        raise AssertionError("the job started Spark before refusing its input")
        yield
    monkeypatch.setattr(jobkit, "spark_session", refuse)


@pytest.mark.parametrize("ddl, says", [
    ("user_id lng", "unknown data type 'lng'"),
    ("user_id long,", "the schema ends too early"),
    ("user_id long event string", "expected ',' or the end after field 'user_id'"),
    ("m map<string>", "expected ','"),
])
def test_a_bad_value_schema_is_refused_before_spark(tmp_path, no_spark, capsys, ddl, says):
    logs = tmp_path / "logs"
    make_sample_log.make_sample_log(logs, records=100, partitions=1)
    code = jobkit.run("export_parquet", lambda: export_parquet.main(
        ["--path", str(logs), "--output", str(tmp_path / "out"), "--value-schema", ddl]),
        argv=[])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("export_parquet: JobInputError: --value-schema is not a Spark "
                             "DDL schema: ") and says in err[0], err[0]
    assert not os.path.exists(tmp_path / "out")
