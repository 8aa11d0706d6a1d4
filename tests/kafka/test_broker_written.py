"""Logs the broker writes, read by us: every topic of ``broker_topics`` (Java producer and
librdkafka; every codec, idempotent, transactional with aborts, compacted after the
cleaner ran, LogAppendTime), read from the live broker's log dir with ``read_table`` and
``format("kafkalog")``, must equal what Kafka's Java consumer returned under the same
isolation level: same offsets, keys, values, headers, timestamps and timestamp types.
The same logs after a clean stop are checked in ``test_served.py`` (one restart). The
tests taking ``written`` run against the 4.3.1 broker and the 3.9.1 one (its Java
producer's topics; its own DumpLogSegments as the dump's oracle)."""
from __future__ import annotations

import io
import contextlib

import pytest

from spark_kafkalog.cli import main as kafkalog
from spark_kafkalog.log import read_table
from tests.kafka.broker import dump_log_segments
from tests.kafka.compare import compare_dumps, differences, from_arrow, from_spark

ISOLATIONS = ("read_uncommitted", "read_committed")


def read_all_tables(logdir, produced, isolation) -> dict[str, list[str]]:
    found = {}
    for topic in produced.topics:
        ours = from_arrow(read_table(str(logdir), topic, isolation_level=isolation))
        diff = differences(ours, produced.expected(topic, isolation))
        if diff:
            found[topic] = diff
    return found


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_read_table_equals_java_consumer(written, isolation):
    broker, produced = written
    assert produced.expected("java-txn", isolation), "the producers produced nothing"
    assert read_all_tables(broker.logdir, produced, isolation) == {}


def test_transactions_and_compaction_were_exercised(written):
    """Guards the oracle: aborted records are hidden only under read_committed, and the
    cleaner really removed records from the compacted topic."""
    _broker, broker_topics = written
    for topic in {"java-txn", "rdk-txn"} & set(broker_topics.topics):
        unc = broker_topics.expected(topic, "read_uncommitted")
        com = broker_topics.expected(topic, "read_committed")
        assert 0 < len(com) < len(unc), topic
    compacted = broker_topics.expected("java-compact", "read_uncommitted")
    offsets = [r["offset"] for r in compacted]
    assert len(offsets) < 150 and offsets != list(range(len(offsets)))
    assert {r["timestampType"] for r in broker_topics.expected("java-logappend",
                                                               "read_uncommitted")} == {1}


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_spark_kafkalog_equals_java_consumer(spark, kafka_broker, broker_topics, isolation):
    df = (spark.read.format("kafkalog").option("path", str(kafka_broker.logdir))
          .option("subscribe", ",".join(broker_topics.topics))
          .option("includeHeaders", "true").option("kafka.isolation.level", isolation).load())
    ours = from_spark(df)
    kafka = sorted(broker_topics.by_isolation[isolation],
                   key=lambda r: (r["topic"], r["partition"], r["offset"]))
    assert differences(ours, kafka) == []


def test_verify_passes_on_the_broker_log_dir(written):
    broker, _produced = written
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = kafkalog(["verify", "--no-progress", str(broker.logdir)])
    assert code == 0, out.getvalue()[-3000:]


def _broker_files(broker, topics, suffixes):
    return sorted(f for t in topics for f in broker.logdir.glob(f"{t}-*/*")
                  if f.suffix in suffixes)


def test_our_dump_prints_kafkas_lines_for_broker_files(written):
    """``kafkalog dump --records`` against Kafka's ``--deep-iteration`` (of the broker's
    own version) on every segment, index, time index and transaction index the broker
    wrote (transaction markers, compacted and LogAppendTime batches included)."""
    broker, produced = written
    files = _broker_files(broker, produced.topics, (".log", ".index", ".timeindex", ".txnindex"))
    assert any(f.suffix == ".txnindex" for f in files)
    text = dump_log_segments(files, "--deep-iteration", kafka=broker.kafka)
    assert compare_dumps(files, text) == {}


def test_our_dump_prints_kafkas_lines_for_producer_snapshots(kafka_broker, broker_topics):
    files = _broker_files(kafka_broker, broker_topics.topics, (".snapshot",))
    assert compare_dumps(files, dump_log_segments(files, "--deep-iteration")) == {}
