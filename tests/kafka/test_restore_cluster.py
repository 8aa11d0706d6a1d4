"""README's "Restoring into a cluster", run as written against a Kafka 4.4 broker.

The cluster before the loss: topic ``orders`` (2 partitions, records of the last two
hours) and a KIP-848 group ``billing`` that consumed part of it and committed. The
backup: the broker's log dir, copied while it was stopped. Then the topic is deleted
(the group's offsets go with it) and ``orders-replay`` is created (the topic the cluster
already has). The README's two ``sh`` blocks run line by line: ``kafka-topics.sh`` and
``kafka-consumer-groups.sh`` are Kafka's own TopicCommand and ConsumerGroupCommand,
``kafka-server-stop/start.sh`` stop and start the broker, ``kafkalog job NAME`` runs
the job on the session, ``<id>`` is what ``--describe`` printed; paths, the broker's
address and the window's times are this test's. Kafka's Java consumer then checks what the
broker serves (the backup's records at their offsets; the window's in ``orders-replay``)
and that ``billing`` resumes at the offsets it had committed. A topic written into the
log dir with no topic id (``orphan``) is marked stray, as the README says. And the restore
jobs' retention warning against the broker itself: ``aged`` (records 10 and 8 days old
beside recent ones, one record per batch, small segments) is restored with its cluster
id; the broker (retention checked every second) must delete exactly the segments the
warning said, leaving each partition's log start where the warning put it.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time

from spark_kafkalog.jobs import consumer_offsets, copy_topic
from spark_kafkalog.log import read_table
from spark_kafkalog.log.write import topic_partitions
from spark_kafkalog.log.io import resolve_filesystem
from tests.conftest import REPO
from tests.kafka.broker import CLIENT_JVM, JAVA, b64, classpath
from tests.kafka.conftest import wait_for
from tests.log.logbuilder import LogDirBuilder, rec

GROUP = "billing"
MINUTE = 60_000
#: README's window, replaced by this test's
README_FROM, README_TO = "2024-05-01T10:00:00Z", "2024-05-01T11:00:00Z"
TOOLS = {"kafka-topics.sh": "org.apache.kafka.tools.TopicCommand",
         "kafka-consumer-groups.sh": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"}


def readme_blocks() -> list[list[str]]:
    """The section's ``sh`` blocks as command lines (continuations joined, comments
    dropped)."""
    text = (REPO / "README.md").read_text()
    section = text.split("\n## Restoring into a cluster\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        joined = block.replace("\\\n", " ")
        out.append([line.strip() for line in joined.splitlines()
                    if line.strip() and not line.strip().startswith("#")])
    return out


def kafka_tool(broker, cls: str, args: list[str]) -> str:
    out = subprocess.run([JAVA, *CLIENT_JVM, broker.log_flag, "-cp",
                          classpath(kafka=broker.kafka), cls, *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, (cls, args, out.stderr[-3000:])
    return out.stdout


class Runner:
    """Runs README command lines against this test's broker, session and dirs."""

    def __init__(self, spark, broker, backup, window):
        self.spark, self.broker, self.backup, self.window = spark, broker, backup, window
        self.topic_id = None
        self.summaries = []

    def words(self, line: str) -> list[str]:
        line = (line.replace("broker:9092", self.broker.bootstrap)
                .replace("/var/lib/kafka/data", str(self.broker.logdir))
                .replace("/backup/", f"{self.backup}/")
                .replace(README_FROM, self.window[0]).replace(README_TO, self.window[1]))
        if "<id>" in line:
            assert self.topic_id, line
            line = line.replace("<id>", self.topic_id)
        return shlex.split(line)

    def run(self, line: str) -> None:
        cmd, *args = self.words(line)
        if cmd in TOOLS:
            out = kafka_tool(self.broker, TOOLS[cmd], args)
            m = re.search(r"TopicId: (\S+)", out)
            if "--describe" in args:
                assert m, out
                self.topic_id = m.group(1)
        elif cmd == "kafka-server-stop.sh":
            self.broker.stop()
        elif cmd == "kafka-server-start.sh":
            self.broker.start()
        elif cmd == "rm":
            assert args[0] == "-r"
            for d in args[1:]:
                assert d.startswith(f"{self.broker.logdir}/"), d
                shutil.rmtree(d)
        elif cmd == "kafkalog" and args[0] == "job":
            job, argv = args[1], args[2:]
            if job == "copy_topic":
                self.summaries.append(copy_topic.run(self.spark, copy_topic.parse_args(argv)))
            elif job == "consumer_offsets":
                assert consumer_offsets.main(argv) == 0
            else:
                raise AssertionError(f"unexpected job {job}")
        else:
            raise AssertionError(f"a README line this test does not know: {line}")


def iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + \
        f".{ms % 1000:03d}Z"


def records(n: int, base: int) -> list[dict]:
    """Record i: partition 0 for two of every three, a minute apart."""
    return [{"key": b64(b"k%d" % i), "value": b64(b"v%d" % i), "headers": [],
             "partition": 0 if i % 3 else 1, "timestamp": base + i * MINUTE}
            for i in range(n)]


def describe_id(broker, topic: str) -> str:
    out = kafka_tool(broker, TOOLS["kafka-topics.sh"], ["--bootstrap-server",
                     broker.bootstrap, "--describe", "--topic", topic])
    return re.search(r"TopicId: (\S+)", out).group(1)


def restore_aged(spark, broker, tmp_path, now: int, topic_id: str) -> dict:
    """Not a README step: ``aged`` (created on the cluster: ``topic_id``) restored, while
    the broker is stopped, from a built log whose old records the broker's retention will
    delete; the warning's log start per partition."""
    b = LogDirBuilder(tmp_path / "aged-src")
    p0 = b.partition("aged", 0, base_timestamp=now - 10 * 24 * 3600_000)
    p0.append([rec(b"a%d" % i, b"old") for i in range(3)])
    p0.append([rec(b"b%d" % i, b"new", ts=now - 3600_000) for i in range(2)])
    b.partition("aged", 1, base_timestamp=now - 8 * 24 * 3600_000) \
        .append([rec(b"c%d" % i, b"old") for i in range(2)])
    b.write()
    for p in (0, 1):
        shutil.rmtree(broker.partition_dir("aged", p))
    summary = copy_topic.run(spark, copy_topic.parse_args([
        "--path", str(tmp_path / "aged-src"), "--output", str(broker.logdir), "--topic",
        "aged", "--topic-id", topic_id, "--batch-size", "80", "--segment-bytes", "150"]))
    [warning] = summary["retention_warnings"]
    return warning["log_start"]


def test_readme_restore_into_a_cluster(spark, kafka44_broker, kafka44_tool, tmp_path):
    broker, tool = kafka44_broker, kafka44_tool
    base = (int(time.time() * 1000) - 2 * 3600_000) // MINUTE * MINUTE
    tool.create_topics([{"topic": "orders", "partitions": 2}])
    rows = records(90, base)
    tool.produce([{"topic": "orders", "props": {}, "records": rows[:60]}])
    committed = tool.group(GROUP, "consumer", ["orders"])["assignment"]
    assert committed == {"orders-0": 40, "orders-1": 20}
    tool.produce([{"topic": "orders", "props": {}, "records": rows[60:]}])

    # the backup: the stopped broker's log dir
    backup = tmp_path / "backup"
    broker.stop()
    shutil.copytree(broker.logdir, backup / "kafka-logs")
    broker.start()
    source = read_table(str(backup / "kafka-logs"), "orders")
    assert source.num_rows == 90

    # the loss: orders deleted (with the group's offsets); orders-replay exists
    kafka_tool(broker, TOOLS["kafka-topics.sh"], ["--bootstrap-server", broker.bootstrap,
                                                  "--delete", "--topic", "orders"])
    tool.create_topics([{"topic": "orders-replay", "partitions": 2},
                        {"topic": "aged", "partitions": 2}])
    aged_id = describe_id(broker, "aged")

    # the window: records 30..74 (offsets 20..49 of partition 0, 10..24 of partition 1)
    window = (iso(base + 30 * MINUTE), iso(base + 75 * MINUTE))
    runner = Runner(spark, broker, backup, window)
    new_topic, existing_topic = readme_blocks()
    for line in new_topic:
        if line.startswith("kafka-server-start.sh"):
            # not a README step: a topic written with no topic id, which the broker strays
            spark.createDataFrame([("x",)], "value string").write.format("kafkalog") \
                .option("path", str(broker.logdir)).option("topic", "orphan") \
                .mode("append").save()
            predicted = restore_aged(spark, broker, tmp_path, int(time.time() * 1000),
                                     aged_id)
            mark = broker.server_log.stat().st_size
        runner.run(line)
    for line in existing_topic:
        runner.run(line)
    assert [s["retention_warnings"] for s in runner.summaries] == [[], []]

    with open(broker.server_log, "rb") as fh:
        fh.seek(mark)
        log = fh.read().decode(errors="replace")
    assert re.search(r"Log in \S+/orphan-0 marked stray and renamed to \S+/orphan-0\.\w+-stray",
                     log), log[-3000:]
    assert "orders-0 marked stray" not in log and "orders-replay-0 marked stray" not in log
    fs, root = resolve_filesystem(str(broker.logdir))
    assert topic_partitions(fs, root, "orphan") == []

    # what the broker serves: the backup's records at their offsets, and the window's
    consumed, ends = tool.consume(["orders", "orders-replay"])
    got = {t: sorted((r["partition"], r["offset"], r["key"], r["value"], r["timestamp"])
                     for r in consumed if r["topic"] == t) for t in ("orders", "orders-replay")}
    want = sorted(zip(source["partition"].to_pylist(), source["offset"].to_pylist(),
                      source["key"].to_pylist(), source["value"].to_pylist(),
                      [int(t.timestamp() * 1000) for t in source["timestamp"].to_pylist()]))
    assert got["orders"] == want
    lo, hi = base + 30 * MINUTE, base + 75 * MINUTE
    assert got["orders-replay"] == [r for r in want if lo <= r[4] < hi]
    assert ends == {("orders", 0): 60, ("orders", 1): 30,
                    ("orders-replay", 0): 50, ("orders-replay", 1): 25}

    # the group resumes where it was, on both
    resumed = tool.group(GROUP, "consumer", ["orders", "orders-replay"])
    assert resumed["first"] == {"orders-0": 40, "orders-1": 20,
                                "orders-replay-0": 40, "orders-replay-1": 20}
    assert resumed["assignment"] == {f"{t}-{p}": e for (t, p), e in ends.items()}

    # retention: partition 0 keeps its recent records, partition 1 loses all (the broker
    # rolls its active segment to delete it); the broker's log starts are the predicted
    assert predicted[1] == 2 and 0 < predicted[0] <= 3

    def log_starts():
        found, aged_ends = tool.consume(["aged"])
        firsts = {}
        for r in found:
            firsts.setdefault(r["partition"], r["offset"])
        return {p: firsts.get(p, aged_ends[("aged", p)]) for p in (0, 1)}, found
    wait_for("the broker's retention of aged", lambda: log_starts()[0] == predicted)
    starts, found = log_starts()
    assert [r["value"] for r in found if r["offset"] >= 3] == [b"new", b"new"]
