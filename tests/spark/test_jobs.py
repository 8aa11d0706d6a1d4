"""The jobs: sample log generator, Parquet export (on the shared session), make-run driver."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from spark_kafkalog.jobkit import JobInputError

from spark_kafkalog.jobs import export_parquet
from spark_kafkalog.jobs.make_sample_log import make_sample_log
from spark_kafkalog.log import LogDirs, read_offset_index, read_table, read_time_index
from tests.conftest import REPO


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample") / "kafka-logs"
    summary = make_sample_log(root, records=30_000, partitions=3, segment_bytes=256 << 10,
                              days=2.5)
    return root, summary


def test_sample_log_is_a_broker_log_dir(sample):
    root, summary = sample
    logdirs = LogDirs(str(root))
    assert logdirs.topics() == ["events"]
    parts = logdirs.partitions("events")
    assert [p.partition for p in parts] == [0, 1, 2]
    assert {v["codec"] for v in summary["per_partition"].values()} == {"none", "lz4", "zstd"}
    assert sum(len(p.segments) for p in parts) > 3                 # rolled segments
    total = 0
    for p in parts:
        state = logdirs.state(p)
        assert state.high_watermark == state.log_end_offset == 10_000
        t = read_table(str(root), "events", partitions=[p.partition])
        assert t.column("offset").to_pylist() == list(range(10_000))
        assert t.column("headers")[0].as_py() == [{"key": "source", "value": b"sample"}]
        assert t.column("headers")[1].as_py() is None
        total += t.num_rows
        for seg in p.segments:                                      # broker-style indexes
            idx = read_offset_index(logdirs.filesystem, seg.index_path, seg.base_offset)
            tix = read_time_index(logdirs.filesystem, seg.timeindex_path, seg.base_offset)
            assert idx is not None and len(idx) > 0 and tix is not None and len(tix) > 0
    assert total == 30_000


def test_export_parquet_partitions_by_topic_and_date(spark, sample, tmp_path):
    root, _ = sample
    out = str(tmp_path / "out")
    args = export_parquet.parse_args([
        "--path", str(root), "--output", out,
        "--value-schema", "user_id long, event string, amount double", "--drop-value"])
    df = export_parquet.build_frame(spark, args)
    df.write.mode("overwrite").partitionBy("topic", "date").parquet(out)
    dates = sorted(p.name for p in (tmp_path / "out" / "topic=events").iterdir())
    assert dates == ["date=2024-01-01", "date=2024-01-02", "date=2024-01-03"]
    t = pq.read_table(out)
    assert t.num_rows == 30_000
    assert {"user_id", "event", "amount", "key", "offset"} <= set(t.column_names)
    assert "value" not in t.column_names
    assert t.column("user_id").null_count == 0
    summary = export_parquet.summarize(spark, out, 2.0)
    assert summary["rows"] == 30_000 and summary["partitions"] == 3
    assert summary["first_timestamp"].startswith("2024-01-01T00:00:0")
    assert summary["last_timestamp"].endswith("Z") and summary["rows_per_second"] == 15_000


def test_export_options_map_to_kafkalog_options():
    args = export_parquet.parse_args([
        "--path", "/l", "--output", "/o", "--assign", '{"t":[0]}',
        "--starting-offsets", '{"t":{"0":5}}', "--isolation-level", "read_committed",
        "--include-headers", "--option", "minPartitions=4"])
    opts = export_parquet.reader_options(args)
    assert opts == {"path": "/l", "assign": '{"t":[0]}', "startingOffsets": '{"t":{"0":5}}',
                    "kafka.isolation.level": "read_committed", "includeHeaders": "true",
                    "minPartitions": "4"}
    default = export_parquet.reader_options(export_parquet.parse_args(
        ["--path", "/l", "--output", "/o"]))
    assert default["subscribePattern"] == ".*"
    assert default["kafka.isolation.level"] == "read_committed"      # as copy_topic
    topics = export_parquet.reader_options(export_parquet.parse_args(
        ["--path", "/l", "--output", "/o", "--topic", "a,b", "--topic", "c"]))
    assert topics["subscribe"] == "a,b,c"
    # topics chosen through --option replace the every-topic default (never both)
    for extra in ("subscribe=a", "subscribePattern=a.*", 'assign={"a":[0]}'):
        opts = export_parquet.reader_options(export_parquet.parse_args(
            ["--path", "/l", "--output", "/o", "--option", extra]))
        name, value = extra.split("=", 1)
        assert {k: v for k, v in opts.items()
                if k in ("subscribe", "subscribePattern", "assign")} == {name: value}
    with pytest.raises(JobInputError, match="--option expects KEY=VALUE"):
        export_parquet.reader_options(export_parquet.parse_args(
            ["--path", "/l", "--output", "/o", "--option", "novalue"]))


def test_job_help_needs_no_spark():
    """Every job answers --help without starting Spark; the spark-submit jobs end it with an
    example."""
    jobs = sorted(p.name for p in (REPO / "jobs").glob("*.py") if not p.name.startswith("_"))
    assert len(jobs) >= 9, jobs
    for job in jobs:
        proc = subprocess.run([sys.executable, str(REPO / "jobs" / job), "--help"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "usage:" in proc.stdout, (job, proc.stderr)
        if job not in ("make_sample_log.py", "run_main.py"):
            assert "Example" in proc.stdout, job


@pytest.mark.slow
def test_run_main_through_spark_submit(tmp_path):
    """What `make run` does, on a small generated sample: spark-submit with conf/."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    out = tmp_path / "export"
    proc = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "run_main.py"), "--output", str(out),
         "--records", "20000", "--partitions", "2", "--sample-dir", str(tmp_path / "logs"),
         "--master", "local[2]"],
        cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "rows        20,000" in proc.stdout
    assert "partitions  2 topic-partitions in 1 topic, 3 date partitions" in proc.stdout
    # the command it ran, as a line to paste: quoted, with the environment it set
    running = next(ln for ln in proc.stdout.splitlines() if ln.startswith("running: "))
    words = shlex.split(running[len("running: "):])
    assert words[0].startswith("PYTHONPATH=") and "--summary-json" not in words
    assert words[words.index("--value-schema") + 1] == \
        "user_id long, event string, amount double"
    assert pq.read_table(str(out)).num_rows == 20_000
    # a plain `make run` prints no warning (pandas' FutureWarning, the JVM's notice)
    assert "Warning" not in proc.stdout + proc.stderr
    assert "incubator" not in proc.stdout + proc.stderr


def test_export_summary_counts_what_this_run_wrote(spark, tmp_path):
    from tests.log.logbuilder import LogDirBuilder, rec

    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("t", 0)
    p.append([rec(b"a", b"1", ts=1_700_000_000_000), rec(b"b", b"2", ts=1_700_100_000_000)])
    p.append([rec(b"c", b"3", ts=-1)])                   # NO_TIMESTAMP (a v0-style record)
    b.write()
    out = str(tmp_path / "out")
    args = export_parquet.parse_args(["--path", str(b.roots[0]), "--output", out])
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    for mode in ("overwrite", "append"):
        df, observation = export_parquet.observe(export_parquet.build_frame(spark, args))
        df.write.mode(mode).partitionBy("topic", "date").parquet(out)
        s = export_parquet.summary_of(observation.get, out, 1.0)
        # this run's rows only (append does not count the first run's), every date it
        # wrote, the NO_TIMESTAMP row's included wherever it went
        assert s["rows"] == 3 and s["partitions"] == 1 and s["topics"] == 1
        written = sorted(d.name for d in (tmp_path / "out" / "topic=t").iterdir())
        assert s["dates"] == len(written) == 3, written
        assert s["first_timestamp"] in ("2023-11-14T22:13:20.000Z",       # null: skipped
                                        "1969-12-31T23:59:59.999Z")       # Kafka source's
        no_ts_dir = ("date=__HIVE_DEFAULT_PARTITION__" in written) + ("date=1969-12-31" in written)
        assert no_ts_dir == 1 and s["rows_without_timestamp"] == \
            ("date=__HIVE_DEFAULT_PARTITION__" in written)
        line = export_parquet.summary_line(s)
        assert line.startswith("exported 3 rows from 1 topic-partition (1 topic, 3 dates ")
    assert pq.read_table(out).num_rows == 6
