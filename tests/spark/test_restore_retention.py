"""The restore jobs warn when what they restored is older than the target topic's
retention.ms (``--retention-ms``, Kafka's 7 days by default): one line on stderr and
``retention_warnings`` in the summary; records within it, or ``--retention-ms -1``, give
none. The source log's timestamps are the log builder's (kafka-python)."""
from __future__ import annotations

import time

from spark_kafkalog.jobs import copy_topic, import_files
from tests.log.logbuilder import LogDirBuilder, rec

DAY = 24 * 3600 * 1000


def test_copy_and_import_warn_about_records_past_retention(spark, tmp_path, capsys):
    now = int(time.time() * 1000)
    b = LogDirBuilder(tmp_path / "src")
    b.partition("old", 0, base_timestamp=now - 10 * DAY).append([rec(b"k", b"v")] * 3)
    b.partition("fresh", 0, base_timestamp=now - DAY).append([rec(b"k", b"v")] * 3)
    b.write()
    base = ["--path", str(tmp_path / "src"), "--topic", "old", "--topic", "fresh"]
    s = copy_topic.run(spark, copy_topic.parse_args(base + ["--output", str(tmp_path / "a")]))
    [w] = s["retention_warnings"]
    assert (w["topic"], w["segments"], w["log_start"]) == ("old", 1, {0: 3})
    [line] = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert line.startswith("copy_topic: warning: old: 1 segment(s) (") and \
        "older than retention.ms 604800000" in line
    s = copy_topic.run(spark, copy_topic.parse_args(
        base + ["--output", str(tmp_path / "b"), "--retention-ms", str(11 * DAY)]))
    assert s["retention_warnings"] == []

    spark.createDataFrame([("x", now - 9 * DAY), ("y", now - 8 * DAY)],
                          "value string, ts long").write.parquet(str(tmp_path / "in"))
    args = import_files.parse_args(["--input", str(tmp_path / "in"), "--path",
                                    str(tmp_path / "c"), "--topic", "imported",
                                    "--timestamp", "ts"])
    capsys.readouterr()
    s = import_files.run_import(spark, args)
    [w] = s["retention_warnings"]
    assert (w["topic"], w["newest_timestamp"]) == ("imported", now - 8 * DAY)
    assert capsys.readouterr().err.count("import_files: warning: imported:") == 1
    args.retention_ms, args.path = -1, str(tmp_path / "d")
    assert import_files.run_import(spark, args)["retention_warnings"] == []
