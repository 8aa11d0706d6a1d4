"""Apache Kafka 3.9 (the last 3.x line; ``kafka39_broker``) with our reader and writer.

What 3.9 writes, we read: ``test_broker_written`` runs its reads against both versions
(``written``); here the 3.9 broker's ``__consumer_offsets`` (a classic group's commits and
group metadata) and ``__transaction_state`` decode as 3.9's own DumpLogSegments prints them,
and our commits table holds what the classic consumer committed.

What we write, 3.9 serves: topics of the 3.9 broker copied by ``jobs/copy_topic.py``
(offsets kept, renamed, recompressed, rebatched into small segments), and a topic our
writer wrote and ``jobs/compact.py`` then compacted, are put in place of topics the 3.9
broker created; after a restart its Java consumer must read exactly our records at their
offsets, and the classic group's commits, translated by ``jobs/consumer_offsets.py`` and
restored with 3.9's ``kafka-consumer-groups --reset-offsets --from-file``, must be where a
3.9 group consumer resumes. 3.9's DumpLogSegments must print our dump's lines for every
segment and index we wrote.
"""
from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from spark_kafkalog.jobs import compact
from spark_kafkalog.jobs import consumer_offsets
from spark_kafkalog.jobs import copy_topic
from spark_kafkalog.log import read_group_state, read_table
from tests.kafka.broker import KAFKA39, dump_log_segments
from tests.kafka.compare import compare_dumps, differences, from_arrow
from tests.kafka.conftest import wait_for
from tests.kafka.test_consumer_offsets import committed, ours, reset_offsets, same_dump
from tests.kafka.test_served import place
from tests.kafka.topics import BASE_TS, GROUP39, GROUP_TOPICS, KEEP_OLD

#: source topic -> its copy's name (the 3.9 broker already has the source names)
COPIED = {t: t.replace("java-", "c39-") for t in (*GROUP_TOPICS, "java-txn", "java-compact")}
COMPACTED = "c39-compacted"
RESTORED = "restored39"
ROWS = 1200


def split(name: str) -> tuple[str, int]:
    topic, _, part = name.rpartition("-")
    return topic, int(part)


def test_classic_group_and_transactions_decode_as_kafka39_prints(kafka39_broker,
                                                                 broker39_topics):
    told = {split(k): v for k, v in broker39_topics.group["assignment"].items()}
    assert {t for t, _p in told} == set(GROUP_TOPICS) and all(told.values())
    wait_for(f"{GROUP39}'s commits in the 3.9 broker's __consumer_offsets",
             lambda: committed(kafka39_broker, GROUP39) == told)
    files = sorted((kafka39_broker.logdir / "__consumer_offsets-0").glob("*.log"))
    assert same_dump(files, "--offsets-decoder", '"protocolType":"consumer"',
                     kafka=KAFKA39) == []
    # our tables (every record, not only the latest per key) hold what 3.9's dump shows
    dumped = dumped_offsets(dump_log_segments(files, "--offsets-decoder", kafka=KAFKA39))
    last = max(off for rows in dumped.values() for off, *_ in rows)
    state = read_group_state(str(kafka39_broker.logdir), latest=False)
    assert tabled(state, last) == dumped
    assert any(r[1] == GROUP39 for r in dumped["groups"]), "no classic group record"
    files = sorted((kafka39_broker.logdir / "__transaction_state-0").glob("*.log"))
    theirs = dump_log_segments(files, "--transaction-log-decoder", kafka=KAFKA39)
    assert same_transactions(ours(files, "--transaction-log-decoder"), theirs) == []


def _parts(items) -> list[tuple]:
    return [(t["topic"], list(t["partitions"])) for t in items or []]


def dumped_offsets(text: str) -> dict[str, list[tuple]]:
    """Kafka's ``--offsets-decoder`` lines as rows: offset commits (key types 0, 1) and
    classic group metadata (key type 2); any other type is a row of ``other``."""
    out = {"commits": [], "groups": [], "other": []}
    for line in text.splitlines():
        if not line.startswith("| offset: "):
            continue
        off = int(line.split()[2])
        key_text, _, value_text = line.split(" key: ", 1)[1].partition(" payload: ")
        key = json.loads(key_text)
        value = json.loads(value_text) if value_text.startswith("{") else None
        k, v = key["data"], value and value["data"]
        head = (off, k["group"], value is None, value and int(value["version"]))
        if key["type"] in ("0", "1"):
            fields = () if v is None else (v["offset"], v["leaderEpoch"], v["metadata"],
                                           v["commitTimestamp"], v.get("expireTimestamp", -1))
            out["commits"].append((*head, k["topic"], k["partition"], *fields))
        elif key["type"] == "2":
            members = [] if v is None else [
                (m["memberId"], m["groupInstanceId"], m["clientId"], m["clientHost"],
                 m["rebalanceTimeout"], m["sessionTimeout"], m["subscription"]["topics"],
                 _parts(m["subscription"]["ownedPartitions"]),
                 _parts(m["assignment"]["assignedPartitions"])) for m in v["members"]]
            fields = () if v is None else (v["protocolType"], v["generation"], v["protocol"],
                                           v["leader"], v["currentStateTimestamp"], members)
            out["groups"].append((*head, *fields))
        else:
            out["other"].append((off, key_text))
    return out


def tabled(state, last: int) -> dict[str, list[tuple]]:
    """Our ``commits`` and ``groups`` tables (records up to offset ``last``) as
    :func:`dumped_offsets` rows."""
    def head(r):
        return (r["record_offset"], r["group"], r["deleted"],
                None if r["deleted"] else r["value_version"])
    commits, groups = [], []
    for r in state.commits().to_pylist():
        fields = () if r["deleted"] else (r["offset"], r["leader_epoch"], r["metadata"],
                                          r["commit_timestamp"], r["expire_timestamp"])
        commits.append((*head(r), r["topic"], r["partition"], *fields))
    for r in state.groups().to_pylist():
        members = [(m["member_id"], m["group_instance_id"], m["client_id"], m["client_host"],
                    m["rebalance_timeout"], m["session_timeout"], m["subscribed_topics"],
                    _parts(m["owned_partitions"]), _parts(m["assigned_partitions"]))
                   for m in r["members"] or []]
        fields = () if r["deleted"] else (r["protocol_type"], r["generation"], r["protocol"],
                                          r["leader"], r["current_state_timestamp"], members)
        groups.append((*head(r), *fields))
    return {"commits": sorted(c for c in commits if c[0] <= last),
            "groups": sorted(g for g in groups if g[0] <= last), "other": []}


THEIRS = re.compile(r"^\| (offset: \d+ .*) key: transaction_metadata::transactionalId=(\S*) "
                    r"payload: producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),"
                    r"partitions=\[(.*)\],txnLastUpdateTimestamp=(-?\d+),"
                    r"txnTimeoutMs=(\d+)$")
OURS = re.compile(r"^\| (offset: \d+ .*) key: (\{.*\}) payload: (\{.*\})$")


def same_transactions(mine: str, theirs: str) -> list[str]:
    """Kafka 3.9's ``--transaction-log-decoder`` prints each transaction's metadata as
    text (``key: transaction_metadata::transactionalId=...  payload: producerId:...``),
    where ours prints Kafka 4's JSON: batch lines must be equal and each record's decoded
    fields (id, producer id and epoch, state, partitions, timestamps) the same."""
    a, b = mine.splitlines(), theirs.splitlines()
    if len(a) != len(b):
        return [f"{len(a)} lines, Kafka 3.9 printed {len(b)}"]
    diff, records = [], 0
    for x, y in zip(a, b):
        m = THEIRS.match(y)
        if m is None:
            if x != y:
                diff.append(f"ours:  {x}\nkafka: {y}")
            continue
        records += 1
        o = OURS.match(x)
        if o is None:
            diff.append(f"ours:  {x}\nkafka: {y}")
            continue
        key, value = json.loads(o[2])["data"], json.loads(o[3])["data"]
        parts = sorted(f"{t['topic']}-{p}" for t in value["transactionPartitions"] or []
                       for p in t["partitionIds"])
        got = (o[1], key["transactionalId"], value["producerId"], value["producerEpoch"],
               value["transactionStatus"], parts,
               value["transactionLastUpdateTimestampMs"], value["transactionTimeoutMs"])
        want = (m[1], m[2], int(m[3]), int(m[4]), m[5], sorted(filter(None, m[6].split(","))),
                int(m[7]), int(m[8]))
        if got != want:
            diff.append(f"ours:  {got}\nkafka: {want}")
    return diff if records else ["Kafka 3.9's dump shows no transaction record"]


def compacted_rows() -> list[tuple]:
    """Keyed records with many versions per key (the compaction removes the older ones)."""
    return [(f"key-{i % 40}".encode(),
             None if i % 17 == 16 else (f"value-{i}-" + "z" * (i % 60)).encode(),
             None if i % 3 else [("h", f"x{i}".encode())], i % 2, BASE_TS + i * 5)
            for i in range(ROWS)]


@pytest.fixture(scope="module")
def served39(spark, kafka39_broker, kafka39_tool, broker39_topics, tmp_path_factory):
    from pyspark.sql import functions as F
    broker, tool = kafka39_broker, kafka39_tool
    stage = tmp_path_factory.mktemp("ours39")
    work = tmp_path_factory.mktemp("ours39-work")
    argv = ["--path", str(broker.logdir), "--output", str(stage), "--codec", "zstd",
            "--batch-size", "200", "--segment-bytes", "512",
            "--offset-map", str(work / "map")]
    for source, copy in COPIED.items():
        argv += ["--topic", source, "--rename", f"{source}={copy}"]
    copy_topic.run(spark, copy_topic.parse_args(argv))

    df = spark.createDataFrame(
        compacted_rows(), "key binary, value binary, "
        "headers array<struct<key:string,value:binary>>, partition int, ts long") \
        .withColumn("timestamp", F.timestamp_millis("ts")).drop("ts").repartition(1)
    (df.write.format("kafkalog").mode("append").option("path", str(stage))
     .option("topic", COMPACTED).option("partitions", "2").option("compression", "lz4")
     .option("segmentBytes", "4096").option("batchSize", "1024").save())
    summary = compact.compact(spark, compact.parse_args(
        ["--path", str(stage), "--topic", COMPACTED, "--force"]))

    assert consumer_offsets.main(["--path", str(broker.logdir), "--translate",
                                  str(work / "map"), "--out", str(work / "csv"),
                                  "--no-progress"]) == 0
    csv = work / "csv" / f"{GROUP39}.csv"

    counts = {copy: 1 if source == "java-compact" else 2 for source, copy in COPIED.items()}
    counts[COMPACTED] = 2
    tool.create_topics([{"topic": t, "partitions": n, "configs": KEEP_OLD}
                        for t, n in counts.items()])
    broker.stop()
    place(stage, broker, counts)
    mark = broker.server_log.stat().st_size
    broker.start()
    consumed, ends = tool.consume(list(counts), "read_uncommitted")
    reset_offsets(broker, RESTORED, csv)
    resumed = tool.group(RESTORED, "classic", [COPIED[t] for t in GROUP_TOPICS])
    with open(broker.server_log, "rb") as fh:
        fh.seek(mark)
        restart_log = fh.read().decode(errors="replace")
    return SimpleNamespace(stage=stage, csv=csv, consumed=consumed, ends=ends,
                           resumed=resumed, compaction=summary, restart_log=restart_log,
                           topics=list(counts))


def served_records(served, topic) -> list[dict]:
    got = [r for r in served.consumed if r["topic"] == topic]
    return sorted(got, key=lambda r: (r["partition"], r["offset"]))


def test_kafka39_consumer_reads_our_copies_at_their_offsets(served39, broker39_topics):
    found = {}
    for source, copy in COPIED.items():
        got = served_records(served39, copy)
        # the copy holds what a read_committed consumer read of the source, offsets kept
        want = [{**r, "topic": copy} for r in broker39_topics.expected(source, "read_committed")]
        assert want, source
        diff = differences(got, want) + differences(
            from_arrow(read_table(str(served39.stage), copy)), got)
        if diff:
            found[copy] = diff
    assert found == {}


def test_kafka39_consumer_reads_our_compacted_log(served39):
    got = served_records(served39, COMPACTED)
    assert differences(from_arrow(read_table(str(served39.stage), COMPACTED)), got) == []
    # the compaction did remove records: fewer than written, and gaps in the offsets
    assert 0 < len(got) < ROWS
    for part in (0, 1):
        offsets = [r["offset"] for r in got if r["partition"] == part]
        assert offsets != list(range(len(offsets))), part
        assert served39.ends[(COMPACTED, part)] == offsets[-1] + 1, part


def test_kafka39_dump_log_segments_prints_our_lines_for_what_we_wrote(served39):
    files = sorted(f for f in served39.stage.glob("c39-*/*")
                   if f.suffix in (".log", ".index", ".timeindex"))
    text = dump_log_segments(files, "--deep-iteration", kafka=KAFKA39)
    assert compare_dumps(files, text) == {}


def test_restored_group_resumes_where_the_classic_group_committed(served39, broker39_topics):
    told = broker39_topics.group["assignment"]
    restored = {f"{COPIED[t]}-{p}": o for (t, p), o in
                ((split(k), v) for k, v in told.items())}
    lines = served39.csv.read_text().splitlines()
    assert sorted(lines) == sorted(f"{t},{p},{o}" for (t, p), o in
                                   ((split(k), v) for k, v in restored.items()))
    # the consumer's first record per partition is at the restored commit (the second
    # round follows it), and it then read to the end
    assert served39.resumed["first"] == restored
    assert served39.resumed["assignment"] == {
        k: served39.ends[split(k)] for k in restored}


def test_kafka39_loaded_our_logs_without_truncation(served39):
    log = served39.restart_log
    lines = [line for line in log.splitlines() if any(t in line for t in served39.topics)
             and re.search(r"(?i)truncat|corrupt|invalid|\] (WARN|ERROR) ", line)]
    assert lines == [], "\n".join(lines[:10])
    for (topic, part), end in served39.ends.items():
        # several segments of ours per partition, and the broker leads from our log end
        assert len(list((served39.stage / f"{topic}-{part}").glob("*.log"))) > 1, (topic, part)
        assert re.search(rf"Leader {topic}-{part} .* from offset {end} ", log), (topic, part)
