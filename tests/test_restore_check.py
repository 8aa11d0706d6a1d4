"""The restore jobs' retention warning: what a broker serving a restored log deletes by
``retention.ms`` once it starts (it leads every partition, so its high watermark is the
log end, and it rolls the active segment to delete it), decided here from segment facts
the log builder (kafka-python) wrote, against Kafka's rule restated by hand: a segment
goes when ``now - its largest timestamp > retention.ms``, oldest first, stopping at the
first that stays."""
from __future__ import annotations

import io

from spark_kafkalog import restore_check
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.maintain.retention import expired_on_start
from tests.log.logbuilder import LogDirBuilder, rec

DAY = 24 * 3600 * 1000
NOW = 1_800_000_000_000
WEEK = 7 * DAY


def build(root):
    """``old``: partition 0 three segments (10, 9 and 1 days old), partition 1 one
    segment 8 days old; ``new``: one segment an hour old."""
    b = LogDirBuilder(root)
    p0 = b.partition("old", 0, base_timestamp=NOW - 10 * DAY)
    p0.append([rec(b"a", b"1"), rec(b"b", b"2")])
    p0.roll()
    p0.append([rec(b"c", b"3", ts=NOW - 9 * DAY)])
    p0.roll()
    p0.append([rec(b"d", b"4", ts=NOW - 1 * DAY)])
    p1 = b.partition("old", 1, base_timestamp=NOW - 8 * DAY)
    p1.append([rec(b"e", b"5"), rec(b"f", b"6")])
    b.partition("new", 0, base_timestamp=NOW - 3600_000).append([rec(b"g", b"7")])
    b.write()


def test_expired_on_start_follows_kafkas_rule(tmp_path):
    build(tmp_path)
    logdirs = LogDirs(str(tmp_path))
    got = {pr.partition: (pr.new_log_start, [d["base_offset"] for d in pr.deleted])
           for pr in expired_on_start(logdirs, "old", WEEK, now_ms=NOW)}
    # p0: the 10- and 9-day-old segments go, the one-day-old (active) stays;
    # p1: its only (active) segment expired, so the broker rolls and deletes it
    assert got == {0: (3, [0, 2]), 1: (2, [0])}
    assert expired_on_start(logdirs, "new", WEEK, now_ms=NOW) == []
    assert expired_on_start(logdirs, "old", -1, now_ms=NOW) == []
    # a longer retention keeps the 9-day-old segment, and so everything after it
    assert [(pr.partition, pr.new_log_start) for pr in
            expired_on_start(logdirs, "old", int(9.5 * DAY), now_ms=NOW)] == [(0, 2)]


def test_warning_line_and_summary(tmp_path):
    build(tmp_path)
    summary, err = {}, io.StringIO()
    found = restore_check.warn("copy_topic", str(tmp_path), ["old", "new"], WEEK, summary,
                               now_ms=NOW, stderr=err)
    assert summary["retention_warnings"] == found
    [w] = found
    assert (w["topic"], w["segments"], w["partitions"], w["log_start"]) == \
        ("old", 3, 2, {0: 3, 1: 2})
    assert w["newest_timestamp"] == NOW - 8 * DAY + 1     # the builder stamps base + offset
    [line] = err.getvalue().splitlines()
    assert line.startswith("copy_topic: warning: old: 3 segment(s) (")
    assert "older than retention.ms 604800000" in line and "--retention-ms" in line
    summary = {}
    restore_check.warn("copy_topic", str(tmp_path), ["old"], -1, summary, now_ms=NOW,
                       stderr=err)
    assert summary["retention_warnings"] == []
