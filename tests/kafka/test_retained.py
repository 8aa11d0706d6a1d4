"""A log dir our retention ran on, served by the broker again.

The broker writes a topic over three rounds with a restart between them (each
leadership change a new leader epoch, when the broker makes one), in 1 MiB segments;
stopped cleanly, its log dir gets our retention by ``retention.bytes``. The
``leader-epoch-checkpoint`` must then be the broker's own truncated from the start at the
new log start offset, as Kafka's rule says (restated in tests/log/test_retention.py),
and the restarted broker must load it as it is -- no warning or error about the
partition, its own epoch cache starting with our entries -- and serve exactly the kept
records from the new log start.
"""
from __future__ import annotations

import re

from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.files.checkpoint import read_leader_epoch_checkpoint
from spark_kafkalog.log.maintain.retention import RetentionConfig, apply_retention
from tests.kafka.broker import b64
from tests.kafka.topics import checkpoint
from tests.log.test_retention import FS, kafka_epochs_after

TOPIC = "retained-epochs"
PER_ROUND = 1200
VALUE = 900


def epochs(broker):
    return read_leader_epoch_checkpoint(FS, str(broker.partition_dir(TOPIC, 0) /
                                                "leader-epoch-checkpoint"))


def test_broker_serves_a_retained_log_with_its_truncated_epochs(kafka_broker, kafka_tool):
    kafka_tool.create_topics([{"topic": TOPIC, "partitions": 1,
                               "configs": {"segment.bytes": str(1 << 20),
                                           "retention.ms": "-1"}}])
    for r in range(3):
        kafka_tool.produce([{"topic": TOPIC, "props": {"linger.ms": "5"}, "records": [
            {"partition": 0, "key": b64(b"k%d" % i),
             "value": b64(b"r%d-%05d-" % (r, i) + b"x" * VALUE)}
            for i in range(PER_ROUND)]}])
        kafka_broker.stop()
        if r < 2:
            kafka_broker.start()
    pdir = kafka_broker.partition_dir(TOPIC, 0)
    segs = sorted(int(f.name[:-4]) for f in pdir.glob("*.log"))
    assert len(segs) >= 3, segs
    before = epochs(kafka_broker)
    # e.g. [(0, 0), (2, 1200), (4, 2400)]: each restart a leadership change or two
    assert len(before) >= 2 and before[0][1] == 0, before
    # keep the last two segments: the log start moves to the second-last one's base
    sizes = [(pdir / f"{b:020d}.log").stat().st_size for b in segs]
    keep = sum(sizes[-2:])
    done = apply_retention(LogDirs(str(kafka_broker.logdir)), TOPIC,
                           RetentionConfig(retention_ms=-1, retention_bytes=keep,
                                           file_delete_delay_ms=0))
    [pr] = done
    start = segs[-2]
    assert pr.new_log_start == start and len(pr.deleted) == len(segs) - 2
    assert checkpoint(kafka_broker.logdir / "log-start-offset-checkpoint")[(TOPIC, 0)] == start
    ours = epochs(kafka_broker)
    assert ours == kafka_epochs_after(before, start) and ours[0][1] == start, (before, ours)
    assert ours != before
    mark = kafka_broker.server_log.stat().st_size
    kafka_broker.start()
    consumed, ends = kafka_tool.consume([TOPIC])
    with open(kafka_broker.server_log, "rb") as fh:
        fh.seek(mark)
        log = fh.read().decode(errors="replace")
    problems = [line for line in log.splitlines() if f"{TOPIC}-0" in line and re.search(
        r"(?i)\] (WARN|ERROR) |epoch.*(truncat|conflict|invalid)|corrupt|recovering", line)]
    assert problems == [], "\n".join(problems[:10])
    offsets = [r["offset"] for r in consumed]
    assert offsets == list(range(start, 3 * PER_ROUND)) and ends[(TOPIC, 0)] == 3 * PER_ROUND
    assert [r["value"][:9] for r in consumed[-1:]] == [b"r2-%05d-" % (PER_ROUND - 1)]
    # the broker kept our entries: its cache starts with them (a new leadership may add one)
    after = epochs(kafka_broker)
    assert after[:len(ours)] == ours, (ours, after)
