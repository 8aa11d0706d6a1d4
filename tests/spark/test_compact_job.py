"""jobs/compact.py: one Spark task per partition compacts a topic through the library;
bad input is one line and exit status 2, before Spark starts."""
from __future__ import annotations

import json

import pytest

from spark_kafkalog.jobs import compact as job
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


def test_settings_file_set_and_topic_config_in_that_order(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"*": {"delete.retention.ms": 5, "segment.bytes": 4096},
                               "a": {"delete.retention.ms": 7}}))
    s = job.settings_for(job.parse_args(
        ["--path", "x", "--topic", "a", "--topic", "b", "--config-file", str(cfg),
         "--set", "segment.bytes=8192", "--topic-config", "b:delete.retention.ms=9"]))
    assert (s["a"].delete_retention_ms, s["b"].delete_retention_ms) == (7, 9)
    assert s["a"].segment_bytes == s["b"].segment_bytes == 8192
    # the old spelling, --topic-config FILE, still reads the file (with a note)
    old = job.settings_for(job.parse_args(["--path", "x", "--topic", "a",
                                           "--topic-config", str(cfg)]))
    assert old["a"].delete_retention_ms == 7
    assert "--topic-config FILE is now --config-file FILE" in capsys.readouterr().err
    with pytest.raises(job.jobkit.JobInputError, match="settings name topic 'z'"):
        job.settings_for(job.parse_args(["--path", "x", "--topic", "a",
                                         "--topic-config", "z:segment.bytes=1"]))


def test_compact_job_max_compaction_lag_per_topic(spark, tmp_path):
    """max.compaction.lag.ms like the other settings: per topic from --topic-config,
    for every topic from --set; it cleans a partition whose dirty ratio is too low."""
    from tests.log.test_compact import kafka_cleans, segment_times
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"a": {"max.compaction.lag.ms": 1000}}))
    s = job.settings_for(job.parse_args(["--path", "x", "--topic", "a,b",
                                         "--config-file", str(cfg)]))
    assert (s["a"].max_compaction_lag_ms, s["b"].max_compaction_lag_ms) == (1000, 2 ** 63 - 1)
    with pytest.raises(job.jobkit.JobInputError, match="max_compaction_lag_ms"):
        job.settings_for(job.parse_args(["--path", "x", "--topic", "a", "--set",
                                         "max.compaction.lag.ms=0"]))
    root = tmp_path / "log"
    p = build(root, 33)
    segs = segment_times(root / "c-0")
    (root / "cleaner-offset-checkpoint").write_text(f"0\n1\nc 0 {segs[-2][0]}\n")
    now = segs[-2][2] + 5000
    for lag, cleaned in ((10_000, False), (1000, True)):
        assert (kafka_cleans(segs, dirty_from=segs[-2][0], now=now, ratio=0.5, min_lag=0,
                             max_lag=lag) is not None) == cleaned
        summary = job.compact(spark, job.parse_args(
            ["--path", str(root), "--topic", "c", "--now", str(now), "--no-progress",
             "--set", f"max.compaction.lag.ms={lag}"]))
        assert summary["partitions_cleaned"] == int(cleaned), lag
        if not cleaned:         # the summary says why
            assert "(1 skipped: c-0: dirty ratio " in job.summary_line(summary)
    t = read_table(str(root), "c")
    assert list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                    t.column("value").to_pylist())) == model(p, segs[-1][0], [now])
    check_clean(root)


@pytest.mark.parametrize("magic", [0, 1])
def test_compact_job_refuses_a_legacy_log_in_one_line_before_spark(tmp_path, capsys,
                                                                    monkeypatch, magic):
    """Kafka's cleaner keeps a v0/v1 message set's magic; ours does not rewrite them, so
    the job refuses, naming the partition and the magic, before Spark starts (a session
    asked for fails the test) and before anything is written."""
    from tests.log.logbuilder import rec
    b = LogDirBuilder(tmp_path / "log")
    p0 = b.partition("c", 0)
    p0.append([rec(b"k", b"v1", ts=T0)])
    p0.roll()
    p0.append([rec(b"k", b"v2", ts=T0)])
    p1 = b.partition("c", 1)
    p1.append_legacy(magic, [rec(b"k", b"v%d" % i, ts=T0) for i in range(3)],
                     compression="gzip")
    p1.roll()
    p1.append_legacy(magic, [rec(b"k", b"last", ts=T0)])
    b.write()
    before = {f: f.read_bytes() for f in (tmp_path / "log").rglob("*") if f.is_file()}

    def no_spark(*a, **kw):
        raise AssertionError("Spark was started")
    monkeypatch.setattr(job.jobkit, "spark_session", no_spark)
    code = job.jobkit.run("compact", lambda: job.main(
        ["--path", str(tmp_path / "log"), "--topic", "c", "--no-progress"]))
    err = capsys.readouterr().err.strip().splitlines()
    # exit 1: the data is what this build cannot compact (the jobs' exit-code scheme)
    assert code == 1 and len(err) == 1, err
    assert f"topic 'c' partition 1: compaction of legacy (magic {magic}) message sets " \
        "is not supported" in err[0] and "c-1/00000000000000000000.log" in err[0]
    assert {f: f.read_bytes() for f in (tmp_path / "log").rglob("*") if f.is_file()} \
        == before
    # partition 0 alone is v2: it is not refused (the job goes on to start Spark)
    with pytest.raises(AssertionError, match="Spark was started"):
        job.main(["--path", str(tmp_path / "log"), "--topic", "c", "--partitions", "0",
                  "--no-progress"])
