"""Consumer offsets through Apache Kafka: the CSVs ``jobs/consumer_offsets.py
--translate`` writes are what ``kafka-consumer-groups.sh --reset-offsets --from-file``
takes; the commits the broker then writes to its ``__consumer_offsets`` decode to those
offsets; and ``kafkalog dump --offsets-decoder`` / ``--transaction-log-decoder`` print
what Kafka's DumpLogSegments prints, for the broker's own ``__consumer_offsets`` and
``__transaction_state`` (written by the tier's transactional producers) and for a
segment holding every key type and value version, built by hand (Kafka 4's consumer,
share and streams group records included)."""
from __future__ import annotations

import contextlib
import io
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq

from spark_kafkalog.jobs import consumer_offsets as job
from spark_kafkalog.cli import main as kafkalog
from spark_kafkalog.format import encode
from spark_kafkalog.log import read_group_state
from tests.format import coordinator_builders as cb
from tests.format import group_builders as gb
from tests.kafka.broker import (CLIENT_JVM, JAVA, KAFKA44, Kafka, classpath,
                                dump_log_segments)
from tests.kafka.conftest import wait_for

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def ours(files, decoder: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        kafkalog(["dump", decoder, *map(str, files)])
    return out.getvalue()


def same_dump(files, decoder: str, must_show: str, kafka: Kafka = KAFKA44) -> list[str]:
    """Lines where our dump differs from Kafka's (``kafka``'s version). Where Kafka skips
    a record it cannot decode (``Error at offset N, skipping. <its reason>``) we must skip
    it too, with our own reason. ``must_show``: text Kafka's dump must contain (guards the
    oracle)."""
    text = dump_log_segments(files, decoder, kafka=kafka)
    if must_show not in text:
        return [f"Kafka's dump does not show {must_show!r}"]
    theirs = text.splitlines()
    mine = ours(files, decoder).splitlines()
    diff = []
    if len(theirs) != len(mine):
        return [f"{len(mine)} lines, Kafka printed {len(theirs)}"]
    for a, b in zip(mine, theirs):
        if "key: Error at offset " in b:
            cut = b.index(", skipping. ") + len(", skipping. ")
            if a[:cut] == b[:cut]:
                continue
        if a != b:
            diff.append(f"ours:  {a}\nkafka: {b}")
    return diff


def reset_offsets(broker, group: str, csv) -> None:
    """``kafka-consumer-groups.sh --reset-offsets --from-file CSV --execute`` of the
    broker's Kafka version: commits the CSV's offsets for ``group`` through the broker."""
    out = subprocess.run([JAVA, *CLIENT_JVM, "-cp", classpath(kafka=broker.kafka), GROUP_COMMAND,
                          "--bootstrap-server", broker.bootstrap, "--group", group,
                          "--reset-offsets", "--from-file", str(csv), "--execute"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]


def committed(broker, group: str) -> dict | None:
    """``group``'s commits in the live broker's ``__consumer_offsets`` as we decode them:
    ``{(topic, partition): offset}``, or None while the log is mid-write."""
    try:
        state = read_group_state(str(broker.logdir))
    except Exception:
        return None
    return {(r["topic"], r["partition"]): r["offset"]
            for r in state.commits().to_pylist() if r["group"] == group}


def every_version_segment(tmp_path):
    recs = [(k, v) for k, v, _e in cb.commit_records() + cb.group_records()]
    recs += [(k, v) for k, v, _ek, _ev in gb.modern_records()]
    recs += [(gb.key(5, "cg", "m-1"), None), (gb.key(3, "cg"), gb.v0(b"\x00"))]
    recs += [(cb.commit_key("g-v1-k1", "orders", 1), None), (cb.group_key("grp-v0"), None),
             (cb.commit_key("cut", "orders", 1), cb.commit_value(3, 1, "m", 2)[:-3])]
    segments = []
    for name, pairs in (("__consumer_offsets-0", recs),
                        ("__transaction_state-0",
                         [(k, v) for k, v, _e in cb.txn_records()]
                         + [(cb.txn_key("gone"), None)])):
        d = tmp_path / "generated" / name
        d.mkdir(parents=True)
        t = pa.table({"key": pa.array([k for k, _v in pairs], pa.binary()),
                      "value": pa.array([v for _k, v in pairs], pa.binary()),
                      "timestamp": pa.array([1_700_000_000_000 + i
                                             for i in range(len(pairs))], pa.int64())})
        (d / "00000000000000000000.log").write_bytes(encode(t))
        segments.append(d / "00000000000000000000.log")
    return segments


def test_offsets_through_kafka_consumer_groups_and_dump_log_segments(
        kafka_broker, broker_topics, tmp_path):
    ends = broker_topics.ends["read_uncommitted"]
    topic = next(t for (t, p) in sorted(ends) if (t, 1) in ends and ends[(t, 0)] > 3)
    wanted = {(topic, 0): ends[(topic, 0)] // 2, (topic, 1): ends[(topic, 1)]}
    # an old log whose group "carried" committed these offsets, copied one to one
    old = tmp_path / "old" / "__consumer_offsets-0"
    old.mkdir(parents=True)
    pairs = [(cb.commit_key("carried", t, p), cb.commit_value(3, o, "", 1_700_000_000_000))
             for (t, p), o in sorted(wanted.items())]
    old_t = pa.table({"key": pa.array([k for k, _v in pairs], pa.binary()),
                      "value": pa.array([v for _k, v in pairs], pa.binary())})
    (old / "00000000000000000000.log").write_bytes(encode(old_t))
    rows = [{"topic": t, "partition": p, "offset": o, "new_topic": t, "new_partition": p,
             "new_offset": o} for (t, p) in sorted(wanted) for o in range(ends[(t, p)])]
    (tmp_path / "map").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "map" / "m.parquet")
    assert job.main(["--path", str(tmp_path / "old"), "--translate", str(tmp_path / "map"),
                     "--out", str(tmp_path / "csv"), "--no-progress"]) == 0
    csv = tmp_path / "csv" / "carried.csv"
    assert csv.read_text() == "".join(f"{t},{p},{o}\n" for (t, p), o in sorted(wanted.items()))

    # Kafka's own tool takes the CSV and commits through the broker
    reset_offsets(kafka_broker, "carried", csv)
    wait_for("the broker's __consumer_offsets to hold the reset offsets",
             lambda: committed(kafka_broker, "carried") == wanted)

    problems = {}
    for part, decoder, shown in (
            ("__consumer_offsets-0", "--offsets-decoder",
             f'"data":{{"group":"carried","topic":"{topic}","partition":1}}'),
            ("__transaction_state-0", "--transaction-log-decoder",
             '"transactionalId":"tier-txn"')):
        files = sorted((kafka_broker.logdir / part).glob("*.log"))
        assert files, f"the broker wrote no {part}"
        problems[part] = same_dump(files, decoder, shown)
    for seg, decoder, shown in zip(every_version_segment(tmp_path),
                                   ("--offsets-decoder", "--transaction-log-decoder"),
                                   ('"topicId":"AAECAwQFBgcICQoLDA0ODw"',
                                    '"nextProducerEpoch":0')):
        problems[f"generated {seg.parent.name}"] = same_dump([seg], decoder, shown)
    assert problems == {k: [] for k in problems}
