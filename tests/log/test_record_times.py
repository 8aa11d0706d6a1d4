"""Time ranges in ``kafkalog inspect`` and the report are the records' own timestamps.

Kafka's rules for a record's timestamp (what a consumer sees), not the batch's base
timestamp: v2 CreateTime, base timestamp + the record's delta (the base need not be the
smallest, and after a compaction it is the delete horizon, attribute bit 6); v2
LogAppendTime, the batch's max timestamp for every record; legacy v1, each message's
own (a LogAppendTime wrapper's for its inner messages). The expected ranges below come
from the records written (the builder's ground truth), with those rules.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa

from spark_kafkalog.cli import main
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.diagnose.stats import partition_stats
from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from spark_kafkalog.log.write import write_table
from tests.log.logbuilder import LogDirBuilder, rec

T = 1_700_000_000_000
MINUTE = 60_000


def inspect_first(root: Path, topic: str) -> int:
    """``first_timestamp`` of ``kafkalog inspect --no-scan`` (what its table shows as the
    minimum without a scan): the first record's timestamp."""
    out, err = io.StringIO(), io.StringIO()
    assert main(["inspect", str(root), "--json", "--no-scan", "--topic", topic],
                stdout=out, stderr=err) == 0, err.getvalue()
    [p] = json.loads(out.getvalue())["partitions"]
    return p["first_timestamp"]


def inspect_range(root: Path, topic: str) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    assert main(["inspect", str(root), "--json", "--topic", topic], stdout=out,
                stderr=err) == 0, err.getvalue()
    [p] = json.loads(out.getvalue())["partitions"]
    segs = [(s["min_timestamp"], s["max_timestamp"]) for s in p["segments"]
            if s["min_timestamp"] is not None]
    seg_range = (min(s[0] for s in segs), max(s[1] for s in segs)) if segs else None
    assert seg_range == (p["min_timestamp"], p["max_timestamp"])
    return p["min_timestamp"], p["max_timestamp"]


def report_range(root: Path, topic: str, decode: bool = True) -> tuple:
    ld = LogDirs(str(root))
    [part] = ld.partitions(topic)
    s = partition_stats(ld, part, decode=decode, keys=False, verify=False)
    return s["first_timestamp"], s["max_timestamp"]


def test_a_repartitioned_batch_whose_first_record_is_the_latest(tmp_path):
    """Records of several source partitions interleaved into one batch: the first
    record is 7 minutes later than the earliest (the base timestamp is the latest)."""
    stamps = [T + 7 * MINUTE, T, T + 3 * MINUTE, T + MINUTE, T + 7 * MINUTE - 1]
    table = pa.table({"key": [b"k%d" % i for i in range(5)],
                      "value": [b"v"] * 5,
                      "timestamp": pa.array(stamps, pa.timestamp("ms", tz="UTC"))})
    write_table(str(tmp_path), "re", table)
    want = (min(stamps), max(stamps))
    assert want[1] - want[0] == 7 * MINUTE
    assert inspect_range(tmp_path, "re") == want
    assert inspect_first(tmp_path, "re") == stamps[0]
    assert report_range(tmp_path, "re") == want


def test_log_append_time_batches_use_the_append_time(tmp_path):
    b = LogDirBuilder(tmp_path)
    p = b.partition("lat", 0)
    p.append([rec(b"a", b"1", ts=T - 5 * MINUTE), rec(b"b", b"2", ts=T - 4 * MINUTE)],
             log_append_time=T)
    p.append([rec(b"c", b"3", ts=T - 9 * MINUTE)], compression="gzip",
             log_append_time=T + MINUTE)
    b.write()
    # every record's timestamp is its batch's append time; producer times never show
    assert inspect_range(tmp_path, "lat") == (T, T + MINUTE)
    assert inspect_first(tmp_path, "lat") == T
    assert report_range(tmp_path, "lat") == (T, T + MINUTE)
    assert report_range(tmp_path, "lat", decode=False) == (T, T + MINUTE)


def test_a_delete_horizon_is_not_a_record_time(tmp_path):
    """Compaction writes the delete horizon (now + delete.retention.ms) into the base
    timestamp of a batch holding a kept tombstone; the records keep their own times."""
    b = LogDirBuilder(tmp_path)
    p = b.partition("h", 0)
    p.append([rec(b"a", b"1", ts=T), rec(b"b", None, ts=T + MINUTE)])
    p.append([rec(b"a", b"2", ts=T + 2 * MINUTE)])
    p.roll()
    p.append([rec(b"z", b"active", ts=T + 3 * MINUTE)])
    p.high_watermark = p.log_end_offset
    b.write()
    now = T + 10 * MINUTE
    retention = 24 * 60 * MINUTE
    [r] = compact_topic(str(tmp_path), "h", CompactSettings(
        force=True, delete_retention_ms=retention), now_ms=now)
    assert r.skipped is None
    # left: b's tombstone (T + 1 min, its batch's base timestamp now the horizon),
    # a=2 (T + 2 min), z (T + 3 min)
    want = (T + MINUTE, T + 3 * MINUTE)
    assert inspect_range(tmp_path, "h") == want
    assert inspect_first(tmp_path, "h") == T + MINUTE     # b's tombstone, offset 1
    assert report_range(tmp_path, "h") == want
    # from the headers alone the horizon is not taken for a record time either
    lo, hi = report_range(tmp_path, "h", decode=False)
    assert hi == T + 3 * MINUTE and lo < now + retention


def test_legacy_v1_messages_each_have_their_own(tmp_path):
    b = LogDirBuilder(tmp_path)
    p = b.partition("v1", 0)
    p.append_legacy(1, [rec(b"a", b"1", ts=T + 5 * MINUTE), rec(b"b", b"2", ts=T),
                        rec(b"c", b"3", ts=T + 2 * MINUTE)], compression="gzip")
    p.append_legacy(1, [rec(b"d", b"4", ts=T + 6 * MINUTE)])
    b.write()
    assert inspect_range(tmp_path, "v1") == (T, T + 6 * MINUTE)
    assert report_range(tmp_path, "v1") == (T, T + 6 * MINUTE)
