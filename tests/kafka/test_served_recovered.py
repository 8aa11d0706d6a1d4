"""Logs our writer left after a commit was SIGKILLed mid-way and ``recover`` ran, served
by the broker exactly like clean ones.

Two topics, each: a committed write, a write killed in a forked child at a fault point of
the commit (``rolled-back``: mid-append, after it rolled segments, before the commit
point, so recovery truncates it away; ``rolled-forward``: just past the commit point,
before the checkpoints, so recovery completes it), ``recover_topic``, then one more
committed write that continues the offsets. The partition data goes in place of the
broker's (as in ``test_served``), and the broker is started WITHOUT its clean-shutdown
marker, so its own log recovery (``LogSegment.recover``: every batch's CRC and offsets,
the indexes rebuilt) runs over every segment we wrote: it must truncate nothing and
report nothing. Then the Java consumer (``check.crcs=true``) reads exactly the committed
records, and DumpLogSegments passes on every file.
"""
from __future__ import annotations

import random
import re
from types import SimpleNamespace

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.log import read_table
from spark_kafkalog.log.write import AppendConfig, recover_topic
from spark_kafkalog.log.files import journal as jr
from tests.kafka.compare import differences, dump_log_segments_findings, from_arrow
from tests.kafka.test_served import place
from tests.kafka.topics import BASE_TS, KEEP_OLD
from tests.log.test_appender_util import R, write
from tests.log.killing import FaultCounter, run_killed

FS = pafs.LocalFileSystem()
CFG = AppendConfig(segment_bytes=16384, index_interval_bytes=1024, fsync=False)
TASKS = 2
#: topic -> (codec, kill point: the fault point after which the child is SIGKILLed)
TOPICS = {"recovered-rolled-back": ("none", ("segment", 2)),
          "recovered-rolled-forward": ("gzip", ("committed:recovered-rolled-forward", 1))}


def records(tag: int, n: int) -> list[R]:
    return [R(None if i % 7 == 3 else b"k%d-%d" % (tag, i),
              # incompressible bytes: the compressed topic rolls segments too
              None if i % 11 == 5 else b"v%d-%d-" % (tag, i) + random.Random(i).randbytes(i % 120),
              BASE_TS + tag * 100_000 + i,
              () if i % 3 == 0 else (("h", b"x%d" % i), ("e", b"")))
            for i in range(n)]


def parts(tag: int) -> dict:
    return {0: records(tag, 300 + 100 * tag), 1: records(10 + tag, 150 + 50 * tag)}


def write_tag(root, topic, tag, fault=None):
    return write(FS, root, f"w{tag}", parts(tag), topic=topic, partitions=2,
                 codec=TOPICS[topic][0], config=CFG, tasks=TASKS, fault=fault)


def expected(topic, tags) -> list[dict]:
    """The committed records of ``tags`` as the Java consumer returns them (each write's
    staged tasks land in task order)."""
    out = []
    for p in (0, 1):
        off = 0
        for tag in tags:
            recs = parts(tag)[p]
            for r in [x for k in range(TASKS) for x in recs[k::TASKS]]:
                out.append({"topic": topic, "partition": p, "offset": off, "key": r.key,
                            "value": r.value, "timestamp": r.ts, "timestampType": 0,
                            "headers": list(r.headers) or None})
                off += 1
    return out


def kill_point(scratch, topic) -> int:
    """The index (1-based) of the topic's kill point among the commit's fault points,
    counted on an identical uninterrupted write."""
    root = str(scratch / topic)
    write_tag(root, topic, 1)
    c = FaultCounter()
    write_tag(root, topic, 2, fault=c)
    name, nth = TOPICS[topic][1]
    at = [i for i, p in enumerate(c.points, 1) if p == name][nth - 1]
    assert at < c.points.index(f"done:{topic}") + 1
    return at


@pytest.fixture(scope="module")
def recovered(kafka_broker, kafka_tool, broker_topics, tmp_path_factory):
    stage = tmp_path_factory.mktemp("recovered")
    scratch = tmp_path_factory.mktemp("recovered-count")
    committed = {}
    for topic in TOPICS:
        at = kill_point(scratch, topic)
        write_tag(str(stage), topic, 1)
        assert run_killed(lambda f: write_tag(str(stage), topic, 2, fault=f), at), topic
        # the kill left the commit pending: recovery has work to do
        assert jr.load(FS, str(stage), topic).pending is not None, topic
        recover_topic(FS, str(stage), topic)
        assert jr.load(FS, str(stage), topic).pending is None, topic
        committed[topic] = jr.load(FS, str(stage), topic).is_committed("w2")
        write_tag(str(stage), topic, 3)
    assert committed == {"recovered-rolled-back": False, "recovered-rolled-forward": True}
    kafka_tool.create_topics([{"topic": t, "partitions": 2, "configs": KEEP_OLD}
                              for t in TOPICS])
    kafka_broker.stop()
    place(stage, kafka_broker, {t: 2 for t in TOPICS})
    # an unclean start: the broker recovers every segment past its recovery point (ours
    # from offset 0, as the topics were empty when it stopped)
    (kafka_broker.logdir / ".kafka_cleanshutdown").unlink()
    mark = kafka_broker.server_log.stat().st_size
    kafka_broker.start()
    consumed, ends = kafka_tool.consume(list(TOPICS), "read_uncommitted")
    with open(kafka_broker.server_log, "rb") as fh:
        fh.seek(mark)
        restart_log = fh.read().decode(errors="replace")
    return SimpleNamespace(stage=stage, committed=committed, consumed=consumed, ends=ends,
                           restart_log=restart_log)


def test_java_consumer_reads_exactly_the_committed_records(recovered):
    for topic, committed in recovered.committed.items():
        want = expected(topic, [1, 2, 3] if committed else [1, 3])
        got = [r for r in recovered.consumed if r["topic"] == topic]
        for part in (0, 1):
            # in the consumer's order: each offset once, consecutive from 0
            offsets = [r["offset"] for r in got if r["partition"] == part]
            assert offsets == list(range(len(offsets))), (topic, part)
            assert recovered.ends[(topic, part)] == len(offsets), (topic, part)
        got.sort(key=lambda r: (r["partition"], r["offset"]))
        assert differences(got, want) == [], topic
        # and what Kafka serves is what we read from the recovered files
        assert differences(from_arrow(read_table(str(recovered.stage), topic)), got) == []


def test_broker_recovery_of_our_segments_truncates_and_reports_nothing(recovered):
    log = recovered.restart_log
    for topic in TOPICS:
        # (an unclean load "rebuilds producer state" from the log: INFO, no finding)
        lines = [line for line in log.splitlines()
                 if topic in line and re.search(r"(?i)truncat|corrupt|invalid|rebuilding index|"
                                                r"\] (WARN|ERROR) ", line)]
        assert lines == [], "\n".join(lines[:10])
        for part in (0, 1):
            pdir = recovered.stage / f"{topic}-{part}"
            bases = sorted(int(f.stem) for f in pdir.glob("*.log"))
            assert len(bases) > 2, (topic, part, "several segments expected")
            # the broker did recover each of our segments (the test can see a finding)
            seen = {int(m) for m in re.findall(
                rf"partition={topic}-{part}, [^\]]*\] Recovering unflushed segment (\d+)\.", log)}
            assert seen == set(bases), (topic, part, sorted(seen), bases)
            end = recovered.ends[(topic, part)]
            assert re.search(rf"Leader {topic}-{part} .* from offset {end} ", log), (topic, part)


def test_dump_log_segments_passes_on_every_recovered_file(recovered):
    files = sorted(f for f in recovered.stage.glob("recovered-*/*")
                   if f.suffix in (".log", ".index", ".timeindex"))
    assert dump_log_segments_findings(files) == []
