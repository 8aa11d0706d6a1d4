"""Logs we compacted, checked by Kafka's DumpLogSegments (deep iteration, index sanity):
every cleaned segment, index and time index passes, and our ``kafkalog dump`` prints
Kafka's lines for them. The input has every codec, transactions (aborted and committed),
tombstones, keyless records and idempotent producers; it is compacted twice, the second
time past the tombstones' delete horizon (markers then get theirs)."""
from __future__ import annotations

from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from tests.kafka.broker import dump_log_segments
from tests.kafka.compare import compare_dumps, dump_log_segments_findings
from tests.log.test_compact import RETENTION, T0, build


def test_compacted_segments_pass_dump_log_segments(tmp_path):
    p = build(tmp_path, 5)
    s = CompactSettings(delete_retention_ms=RETENTION, segment_bytes=4000, force=True)
    [r1] = compact_topic(str(tmp_path), "c", s, now_ms=T0)
    [r2] = compact_topic(str(tmp_path), "c", s, now_ms=T0 + RETENTION)
    assert r1.groups and r2.records_after < r1.records_after
    files = sorted(f for f in (tmp_path / "c-0").iterdir()
                   if f.suffix in (".log", ".index", ".timeindex"))
    assert len([f for f in files if f.suffix == ".log"]) >= 2
    assert dump_log_segments_findings(files) == []
    logs = [f for f in files if f.suffix == ".log"]
    assert compare_dumps(logs, dump_log_segments(logs, "--deep-iteration")) == {}
    assert p.rows
