"""jobs/copy_topic.py on logs the broker wrote: every broker-written topic (every codec,
idempotent and transactional producers with aborts, a compacted topic, LogAppendTime)
copied with its offsets kept, recompressed and rebatched, must read back exactly as
Kafka's Java consumer read the source under read_committed (the copy holds what a
read_committed consumer sees, as plain batches), and Kafka's DumpLogSegments must find
nothing wrong in the copy's files."""
from __future__ import annotations

import io
import re

from spark_kafkalog.jobs import copy_topic
from spark_kafkalog.cli import main as kafkalog
from spark_kafkalog.log import read_table
from tests.kafka.compare import differences, dump_log_segments_findings, from_arrow


def test_copy_with_offsets_kept_equals_the_java_consumer(spark, kafka_broker, broker_topics,
                                                         tmp_path):
    out = tmp_path / "copy"
    argv = ["--path", str(kafka_broker.logdir), "--output", str(out), "--codec", "lz4",
            "--batch-size", "1000"]
    for topic in broker_topics.topics:
        argv += ["--topic", topic]
    summary = copy_topic.run(spark, copy_topic.parse_args(argv))
    assert summary["topics"] == len(broker_topics.topics)
    found = {}
    for topic in broker_topics.topics:
        ours = from_arrow(read_table(str(out), topic, isolation_level="read_uncommitted"))
        diff = differences(ours, broker_topics.expected(topic, "read_committed"))
        if diff:
            found[topic] = diff
    assert found == {}
    assert summary["rows"] == sum(len(broker_topics.expected(t, "read_committed"))
                                  for t in broker_topics.topics)
    report = io.StringIO()
    assert kafkalog(["verify", "--strict", str(out)], stdout=report,
                    stderr=io.StringIO()) == 0, report.getvalue()
    files = sorted(f for f in out.rglob("*") if f.suffix in (".log", ".index", ".timeindex"))
    # DumpLogSegments lists every gap as "a is followed by b": the copy keeps the source's
    # gaps (compaction, transaction markers, aborted records), so only those may be listed
    gaps = set()
    for topic in broker_topics.topics:
        rows = broker_topics.expected(topic, "read_committed")
        for a, b in zip(rows, rows[1:]):
            if a["partition"] == b["partition"]:
                gaps.add((a["offset"], b["offset"]))
    for finding in dump_log_segments_findings(files):
        assert isinstance(finding, tuple), finding
        for pair in finding[1]:
            m = re.fullmatch(r"\s*(-?\d+) is followed by (\d+)", pair)
            assert m and (int(m[1]), int(m[2])) in gaps | {(-1, int(m[2]))}, finding
