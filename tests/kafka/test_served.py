"""Logs we write, served by the broker; and the broker's own logs after a clean stop.

The module fixture writes one topic per codec with ``df.write.format("kafkalog")`` (small
segments and batches: several segments and index entries each), creates the same topics
through the admin API (a KRaft broker serves only partitions its metadata knows), stops
the broker cleanly, reads the broker-written topics again (the stopped broker's log dir),
puts our segment files in the topics' partition dirs (the broker's
``partition.metadata`` and ``leader-epoch-checkpoint`` stay), starts the broker and
consumes our topics with the Java consumer (``check.crcs=true``). Kafka's
DumpLogSegments must pass on every file we wrote, and our ``kafkalog dump`` must print
Kafka's lines for them.
"""
from __future__ import annotations

import re
import shutil
from collections import Counter
from types import SimpleNamespace

import pytest

from spark_kafkalog.log import read_table
from tests.kafka.broker import dump_log_segments
from tests.kafka.compare import (compare_dumps, differences, dump_log_segments_findings,
                                 from_arrow)
from tests.kafka.test_broker_written import ISOLATIONS, read_all_tables
from tests.kafka.topics import BASE_TS, CODECS, KEEP_OLD

ROWS = 3000
KEEP = ("partition.metadata", "leader-epoch-checkpoint")


def input_rows():
    rows = []
    for i in range(ROWS):
        headers = None if i % 3 == 0 else [("h", f"x{i}".encode()), ("e", b"")]
        rows.append((None if i % 9 == 4 else f"key-{i}".encode(),
                     None if i % 13 == 6 else (f"value-{i}-" + "y" * (i % 90)).encode(),
                     headers, i % 2, BASE_TS + i * 7))
    return rows


@pytest.fixture(scope="module")
def served(spark, kafka_broker, kafka_tool, broker_topics, tmp_path_factory):
    from pyspark.sql import functions as F
    stage = tmp_path_factory.mktemp("ours")
    df = spark.createDataFrame(
        input_rows(), "key binary, value binary, headers array<struct<key:string,value:binary>>,"
                      " partition int, ts long") \
        .withColumn("timestamp", F.timestamp_millis("ts")).drop("ts").repartition(1)
    topics = [f"ours-{codec}" for codec in CODECS]
    for codec, topic in zip(CODECS, topics):
        (df.write.format("kafkalog").mode("append").option("path", str(stage))
         .option("topic", topic).option("partitions", "2").option("compression", codec)
         .option("segmentBytes", "16384").option("batchSize", "2048").save())
    kafka_tool.create_topics([{"topic": t, "partitions": 2, "configs": KEEP_OLD}
                              for t in topics])
    kafka_broker.stop()
    after_stop = {iso: read_all_tables(kafka_broker.logdir, broker_topics, iso)
                  for iso in ISOLATIONS}
    place(stage, kafka_broker, {t: 2 for t in topics})
    mark = kafka_broker.server_log.stat().st_size
    kafka_broker.start()
    consumed, ends = kafka_tool.consume(topics, "read_uncommitted")
    rdkafka = consume_rdkafka(kafka_broker.bootstrap, ends)
    with open(kafka_broker.server_log, "rb") as fh:
        fh.seek(mark)
        restart_log = fh.read().decode(errors="replace")
    return SimpleNamespace(stage=stage, topics=topics, after_stop=after_stop,
                           consumed=consumed, ends=ends, restart_log=restart_log,
                           rdkafka=rdkafka)


def place(stage, broker, topics: dict[str, int]) -> None:
    """Our partition data of ``topics`` (name -> partition count) in place of the stopped
    broker's; its ``partition.metadata`` and ``leader-epoch-checkpoint`` stay."""
    for topic, count in topics.items():
        for part in range(count):
            ours, theirs = stage / f"{topic}-{part}", broker.partition_dir(topic, part)
            for f in theirs.iterdir():
                if f.name not in KEEP:
                    f.unlink()
            for f in ours.iterdir():
                if f.name not in KEEP:
                    shutil.copy2(f, theirs / f.name)


def consume_rdkafka(bootstrap: str, ends: dict) -> list[dict]:
    """librdkafka's consumer (confluent-kafka, CRC checks on) over the same partitions,
    up to the Java consumer's end offsets (bounded in time)."""
    import time

    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tier-rdk",
                  "enable.auto.commit": False, "check.crcs": True,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False})
    c.assign([TopicPartition(t, p, 0) for (t, p) in ends])
    left = {tp: end for tp, end in ends.items() if end > 0}
    out, deadline = [], time.monotonic() + 120
    try:
        while left and time.monotonic() < deadline:
            for m in c.consume(1000, 1.0):
                if m.error():
                    raise AssertionError(f"librdkafka: {m.error()}")
                ts_type, ts = m.timestamp()
                out.append({"topic": m.topic(), "partition": m.partition(),
                            "offset": m.offset(), "key": m.key(), "value": m.value(),
                            "timestamp": ts, "timestampType": ts_type - 1,
                            "headers": [(k, v) for k, v in m.headers()] if m.headers()
                            else None})
                tp = (m.topic(), m.partition())
                if tp in left and m.offset() + 1 >= left[tp]:
                    del left[tp]
    finally:
        c.close()
    assert not left, f"librdkafka did not reach the end of {sorted(left)}"
    return out


def test_broker_logs_after_clean_stop_equal_java_consumer(served):
    assert served.after_stop == {iso: {} for iso in ISOLATIONS}


def test_java_consumer_reads_our_logs(served):
    want = Counter((k, v, tuple(h) if h else None, p, ts) for k, v, h, p, ts in input_rows())
    for topic in served.topics:
        got = [r for r in served.consumed if r["topic"] == topic]
        assert Counter((r["key"], r["value"], tuple(r["headers"]) if r["headers"] else None,
                        r["partition"], r["timestamp"]) for r in got) == want, topic
        assert {r["timestampType"] for r in got} == {0}, topic
        for part in (0, 1):
            offsets = [r["offset"] for r in got if r["partition"] == part]
            assert offsets == list(range(len(offsets))), (topic, part)
            assert served.ends[(topic, part)] == len(offsets), (topic, part)
        # what Kafka serves from our files is exactly what we read from them
        ours = from_arrow(read_table(str(served.stage), topic))
        assert differences(ours, got) == [], topic
        rdk = sorted((r for r in served.rdkafka if r["topic"] == topic),
                     key=lambda r: (r["partition"], r["offset"]))
        assert differences(rdk, got) == [], topic


def test_broker_loaded_our_logs_without_recovery_or_truncation(served):
    log = served.restart_log
    for topic in served.topics:
        lines = [line for line in log.splitlines()
                 if topic in line and re.search(r"(?i)truncat|corrupt|recovering|invalid|"
                                                r"rebuild|\] (WARN|ERROR) ", line)]
        assert lines == [], "\n".join(lines[:10])
        for part in (0, 1):
            # the broker took our log end as its own: it leads from there
            end = served.ends[(topic, part)]
            assert re.search(rf"Leader {topic}-{part} .* from offset {end} ", log), (topic, part)


def our_files(stage, suffixes=(".log", ".index", ".timeindex")):
    return sorted(f for f in stage.glob("ours-*/*") if f.suffix in suffixes)


def test_dump_log_segments_passes_on_every_file_we_wrote(served):
    files = our_files(served.stage)
    assert sum(f.suffix == ".log" for f in files) > 2 * len(served.topics), \
        "each partition should have several segments"
    assert dump_log_segments_findings(files) == []


def test_our_dump_prints_kafkas_lines(served):
    files = our_files(served.stage)
    assert compare_dumps(files, dump_log_segments(files, "--deep-iteration")) == {}
