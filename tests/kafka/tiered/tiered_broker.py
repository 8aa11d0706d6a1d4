"""A Kafka broker with tiered storage (KIP-405) for the `kafka` tier: Kafka's
LocalTieredStorage copies closed segments to ``<home>/remote``, and a
``local.retention.ms`` of 1 ms deletes them locally once copied, so all but each
partition's active segment is remote-only. The default metadata manager
(TopicBasedRemoteLogMetadataManager) keeps ``__remote_log_metadata`` in the log dir.

The broker is Kafka 4.3.1, not 4.4.0: Maven Central serves no kafka-storage 4.4.0 test
jar, and the 4.3.1 test jar's LocalTieredStorage does not load in 4.4.0 (it needs
``org.apache.kafka.common.utils.LogContext``, which 4.4 moved to ``...utils.internals``).
Kafka 4.4.0's own DumpLogSegments still reads what this broker writes.
"""
from __future__ import annotations

import time
from pathlib import Path

from tests.kafka.broker import KAFKA4, KAFKA44_JARS, Broker
from tests.kafka.topics import KEEP_OLD, SMALL_BATCHES, chunks, records

#: LocalTieredStorage puts its objects under ``<rsm.config.dir>/kafka-tiered-storage``
REMOTE_ROOT = "kafka-tiered-storage"
RLMM_PARTITIONS = 2
#: every topic: remote storage on, a segment per append, local copies gone once tiered,
#: nothing deleted by time (its records carry topics.BASE_TS times: see topics.KEEP_OLD)
TIERED = {**KEEP_OLD, "remote.storage.enable": "true", "segment.ms": "1",
          "local.retention.ms": "1"}
#: LocalTieredStorage's jar (kept with the 4.4 jars, see the module docstring)
RSM_JAR = KAFKA44_JARS / "kafka-storage-4.3.1-test.jar"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def tiered_broker(home: Path) -> Broker:
    remote = Path(home) / "remote"
    remote.mkdir(parents=True, exist_ok=True)
    return Broker(home, kafka=KAFKA4, extra_jars=(RSM_JAR,), overrides={
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name":
            "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "rsm.config.dir": str(remote),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": str(RLMM_PARTITIONS),
        "remote.log.manager.task.interval.ms": "300",
        "log.retention.check.interval.ms": "300",
        "remote.log.metadata.topic.retention.ms": "-1",
    })


def remote_root(broker: Broker) -> Path:
    return broker.home / "remote" / REMOTE_ROOT


def specs(n: int = 120, steps: int = 8) -> tuple[list[dict], list[dict]]:
    """(topics to create, produce specs): a topic per codec, a transactional topic
    (commits and aborts), a LogAppendTime topic; two partitions each, every record shape
    of ``topics.records`` (null keys/values, headers)."""
    create, produce = [], []
    for codec in CODECS:
        name = f"tiered-{codec}"
        create.append({"topic": name, "partitions": 2, "configs": TIERED})
        props = {**SMALL_BATCHES, "compression.type": codec}
        produce += chunks(name, props, records(n, name), n=steps)
    create.append({"topic": "tiered-txn", "partitions": 2, "configs": TIERED})
    produce.append({"topic": "tiered-txn",
                    "props": {**SMALL_BATCHES, "transactional.id": "tiered-txn",
                              "compression.type": "lz4"},
                    "transactions": [{"abort": k % 2 == 1, "records": records(15, f"t{k}")}
                                     for k in range(6)]})
    create.append({"topic": "tiered-logappend", "partitions": 2,
                   "configs": {**TIERED, "message.timestamp.type": "LogAppendTime"}})
    produce += chunks("tiered-logappend", {**SMALL_BATCHES, "compression.type": "zstd"},
                      records(n, "la"), n=steps)
    return create, produce


def tail_specs(n: int = 10) -> list[dict]:
    """A last round for every topic, produced once the rest is tiered and local retention
    is long (:func:`keep_local`): it stays in the local tier, in segments that rolled (and
    are copied to the remote tier too: both tiers hold them) and the active one."""
    produce = []
    for codec in CODECS:
        name = f"tiered-{codec}"
        produce += chunks(name, {**SMALL_BATCHES, "compression.type": codec},
                          records(n, f"{name}-tail"), n=2)
    produce.append({"topic": "tiered-txn",
                    "props": {**SMALL_BATCHES, "transactional.id": "tiered-txn",
                              "compression.type": "lz4"},
                    "transactions": [{"abort": k == 1, "records": records(4, f"tt{k}")}
                                     for k in range(2)]})
    produce += chunks("tiered-logappend", {**SMALL_BATCHES, "compression.type": "zstd"},
                      records(n, "la-tail"), n=2)
    return produce


def keep_local(broker: Broker, topics: list[str]) -> None:
    """Set ``local.retention.ms`` of ``topics`` to a day (incrementally: the rest of
    their configuration stays), so what is produced next stays local."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource)

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = [ConfigResource("topic", t, incremental_configs=[ConfigEntry(
        "local.retention.ms", str(86_400_000), incremental_operation=AlterConfigOpType.SET)])
        for t in topics]
    for fut in admin.incremental_alter_configs(res).values():
        fut.result(60)


def overlapping(logdir: str, topics: list[str]) -> dict[tuple[str, int], bool]:
    """(topic, partition) -> whether a readable remote segment reaches into the local
    tier (a segment both tiers hold), read from the broker's files."""
    from spark_kafkalog.log import LogDirs
    from spark_kafkalog.log.read.reader import load_remote_metadata

    logdirs = LogDirs(logdir)
    segs = load_remote_metadata(logdirs).segments().to_pylist()
    return {(t, p.partition): any(
                s["topic"] == t and s["partition"] == p.partition and s["readable"]
                and s["end_offset"] >= p.segments[0].base_offset for s in segs)
            for t in topics for p in logdirs.partitions(t)}


def wait_overlap(broker: Broker, topics: list[str], timeout: float = 60.0) -> None:
    """Until each partition of ``topics`` has a segment both tiers hold (the tail's
    rolled segment, copied while local retention keeps it)."""
    from spark_kafkalog.errors import KafkaLogError

    deadline = time.monotonic() + timeout
    while True:
        try:
            late = sorted(k for k, v in overlapping(str(broker.logdir), topics).items()
                          if not v)
        except KafkaLogError as err:          # a file the broker is writing: look again
            late = [str(err)]
        if not late:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no segment in both tiers within {timeout:.0f} s: {late}")
        time.sleep(0.3)


def wait_tiered(broker: Broker, topics: list[str], timeout: float = 120.0) -> None:
    """Until every partition of ``topics`` keeps only its active segment locally (all
    others copied to the remote tier and deleted locally)."""
    deadline = time.monotonic() + timeout
    while True:
        late = []
        for d in broker.logdir.iterdir():
            topic, _, part = d.name.rpartition("-")
            if topic in topics and len(list(d.glob("*.log"))) > 1:
                late.append(d.name)
        if not late:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not tiered within {timeout:.0f} s: {sorted(late)}")
        time.sleep(0.3)
