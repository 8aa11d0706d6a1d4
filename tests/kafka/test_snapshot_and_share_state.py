"""``kafkalog dump`` against Kafka 4.4's ``kafka-dump-log.sh`` on two kinds of broker-written
file the session broker does not write: KRaft snapshots (``__cluster_metadata-0/<end
offset>-<epoch>.checkpoint``) and share-group state (``__share_group_state``, KIP-932).

A broker of its own (Kafka 4.3.1, this module only, so that the session broker and the
tests reading it stay as they are): the controller snapshots after every committed
metadata change (``metadata.log.max.record.bytes.between.snapshots=1``; no no-op records,
``metadata.max.idle.interval.ms=0``, so the snapshots follow the changes below and do not
pile up), the share coordinator's state topic fits one node and snapshots a share
partition every two updates. Kafka's own tools make the changes: a topic, records
(idempotent producer: a producer-id block), a group config, share consumers that accept,
reject and release records (``share.version=1`` is 4.3's default), and the share group's
deletion (tombstones)."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.kafka.broker import CLIENT_JVM, JAVA, KAFKA4, classpath
from tests.kafka.conftest import start_broker, wait_for
from tests.kafka.test_dump_parity import assert_same, kafka_dump

TOPIC, GROUP, RECORDS = "shared", "sg", 10
OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "1",
    "metadata.log.max.snapshot.interval.ms": "0",
    "metadata.max.idle.interval.ms": "0",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "share.coordinator.snapshot.update.records.per.snapshot": "2",
}


def kafka_tool(broker, main_class: str, *args: str, stdin: str | None = None) -> str:
    """One of Kafka 4.3.1's command-line tools against ``broker``; its stdout."""
    out = subprocess.run([JAVA, *CLIENT_JVM, broker.log_flag, "-cp",
                          classpath(kafka=KAFKA4), main_class,
                          "--bootstrap-server", broker.bootstrap, *args],
                         input=stdin, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"{main_class} {' '.join(args)} failed " \
        f"({out.returncode}):\n{out.stderr[-3000:]}"
    return out.stdout


def share_consume(broker, count: int, *how: str, timeout_ms: int = 30000) -> list[str]:
    out = kafka_tool(broker, "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
                     "--topic", TOPIC, "--group", GROUP, "--max-messages", str(count),
                     "--timeout-ms", str(timeout_ms), *how)
    return out.splitlines()


def settled(path, quiet: float = 2.0) -> None:
    """Wait (bounded) until ``path`` exists, is not empty and has not grown for ``quiet``
    seconds."""
    wait_for(f"{path.name} to exist", lambda: path.exists() and path.stat().st_size > 0)
    size, since = -1, time.monotonic()

    def still():
        nonlocal size, since
        now = path.stat().st_size
        if now != size:
            size, since = now, time.monotonic()
        return time.monotonic() - since >= quiet
    wait_for(f"{path.name} to stop growing", still)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The broker's __cluster_metadata-0 snapshots and __share_group_state-0 segment
    (copies, taken once the coordinator stopped writing), and what the share consumers
    received."""
    broker = start_broker(tmp_path_factory, "snapshot-share-broker", KAFKA4, OVERRIDES)
    try:
        kafka_tool(broker, "org.apache.kafka.tools.TopicCommand", "--create", "--topic",
                   TOPIC, "--partitions", "2")
        kafka_tool(broker, "org.apache.kafka.tools.ConsoleProducer", "--topic", TOPIC,
                   stdin="".join(f"m{i}\n" for i in range(RECORDS)))
        # a share group starts at the log end unless told otherwise
        kafka_tool(broker, "kafka.admin.ConfigCommand", "--entity-type", "groups",
                   "--entity-name", GROUP, "--alter", "--add-config",
                   "share.auto.offset.reset=earliest")
        got = share_consume(broker, 6)                      # accepted
        got += share_consume(broker, 2, "--reject")         # archived
        got += share_consume(broker, 1, "--release")        # delivered again
        got += share_consume(broker, RECORDS, timeout_ms=8000)     # the rest, then idle
        kafka_tool(broker, "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
                   "--delete", "--group", GROUP)
        state = broker.logdir / "__share_group_state-0" / f"{0:020d}.log"
        settled(state)
        home = tmp_path_factory.mktemp("snapshot-share-copies")
        (home / "__share_group_state-0").mkdir()
        share_log = shutil.copy(state, home / "__share_group_state-0")
        # a snapshot is written as .checkpoint.part and renamed: a .checkpoint is whole
        meta = broker.home / "metadata" / "__cluster_metadata-0"
        (home / "__cluster_metadata-0").mkdir()
        snapshots = [shutil.copy(f, home / "__cluster_metadata-0")
                     for f in sorted(meta.glob("*.checkpoint"))]
    finally:
        broker.stop()
    return snapshots, [share_log], got


SNAPSHOT_MODES = ([], ["--deep-iteration"], ["--print-data-log"],
                  ["--print-data-log", "--skip-record-metadata"],
                  ["--cluster-metadata-decoder"],
                  ["--cluster-metadata-decoder", "--deep-iteration"],
                  ["--cluster-metadata-decoder", "--skip-record-metadata"])


@pytest.mark.parametrize("mode", SNAPSHOT_MODES, ids=lambda m: " ".join(m) or "shallow")
def test_kraft_snapshots(written, mode):
    snapshots = written[0]
    assert len(snapshots) >= 3, "the controller wrote too few snapshots"
    # <end offset, 20 digits>-<epoch, 10 digits>.checkpoint
    assert all(Path(f).name.endswith("-0000000001.checkpoint") and len(Path(f).name) == 42
               for f in snapshots)
    assert_same(snapshots, *mode)


def test_kraft_snapshots_hold_the_metadata(written):
    """What Kafka's tool decodes of the last snapshot: header and footer, the features,
    the broker, the topic and its partitions, the group config, producer ids."""
    text = kafka_dump(written[0][-1:], "--cluster-metadata-decoder")
    assert "Snapshot end offset: " in text
    for what in ("SnapshotHeader", "SnapshotFooter", '"FEATURE_LEVEL_RECORD"',
                 '"name":"share.version","featureLevel":1', '"REGISTER_BROKER_RECORD"',
                 f'"TOPIC_RECORD","version":0,"data":{{"name":"{TOPIC}"',
                 '"PARTITION_RECORD"', '"CONFIG_RECORD"', "share.auto.offset.reset",
                 '"PRODUCER_IDS_RECORD"'):
        assert what in text, what


SHARE_MODES = ([], ["--print-data-log"], ["--share-group-state-decoder"],
               ["--share-group-state-decoder", "--deep-iteration"],
               ["--share-group-state-decoder", "--skip-record-metadata"])


@pytest.mark.parametrize("mode", SHARE_MODES, ids=lambda m: " ".join(m) or "shallow")
def test_share_group_state(written, mode):
    assert_same(written[1], *mode)


def test_share_group_state_holds_the_groups_state(written):
    """The coordinator wrote what the consumers did: each partition's initial snapshot
    (type 0), updates (type 1) with delivered batches, a snapshot with batches (every two
    updates), and the tombstones of the group's deletion."""
    snapshots, share_log, got = written
    # every record delivered (m8 twice: released once); the rejected ones not again
    assert set(got) == {f"m{i}" for i in range(RECORDS)}
    lines = kafka_dump(share_log, "--share-group-state-decoder").splitlines()
    records = [x for x in lines if x.startswith("| offset: ")]
    key = f'"groupId":"{GROUP}","topicId":'
    assert all(key in x for x in records)
    assert any('key: {"type":"0"' in x and '"stateBatches":[]' in x for x in records)
    assert any('key: {"type":"0"' in x and '"stateBatches":[{"firstOffset"' in x
               for x in records)
    assert any('key: {"type":"1"' in x and '"deliveryState":2' in x for x in records)
    assert sum("payload: <DELETE>" in x for x in records) == 2      # both partitions
