"""The broker-written topics of the `kafka` tier and how they are produced.

Java producer (Kafka's own client): one topic per codec (idempotent, the client's
default; ``java-none`` with idempotence off), a transactional topic with commits and
aborts, a compacted topic the cleaner has cleaned, a LogAppendTime topic. librdkafka
(confluent-kafka): one topic per codec, one transactional. Every topic rolls a segment on
each append (``segment.ms=1``: Kafka 4 refuses a ``segment.bytes`` under 1 MiB), so each
has many segments. Records mix null and present keys, values and headers. On the 3.9
broker, a classic consumer group (``GROUP39``) reads ``GROUP_TOPICS`` after the first
round and commits, then a second round is produced to them: its commits are mid-log.
"""
from __future__ import annotations

import time

from tests.kafka.broker import b64

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: record timestamps given explicitly (CreateTime) for some records, to check they pass
BASE_TS = 1_700_000_000_000
#: topic configs of every tier topic whose records carry BASE_TS times: no deletion by
#: time. BASE_TS (November 2023) is past the broker's default retention.ms (7 days); a
#: segment holding only such records (record 0 alone in the first batch: under load the
#: producer sends it before record 2 is added, and segment.ms=1 gives that batch its own
#: segment) is deleted by the broker's next retention check (every 5 minutes), after
#: Kafka's consumer read it for the oracle: our later reads then miss offset 0.
KEEP_OLD = {"retention.ms": "-1"}
ROLL = {**KEEP_OLD, "segment.ms": "1"}
#: producer settings that make many small batches (and so, with segment.ms=1, segments)
SMALL_BATCHES = {"batch.size": "600", "linger.ms": "0"}
#: the classic group of the 3.9 broker and the topics it commits on
GROUP39 = "classic39"
GROUP_TOPICS = ("java-gzip", "java-zstd")


def records(n: int, tag: str, *, partitions: int = 2, keys: int | None = None,
            tombstones: bool = False) -> list[dict]:
    """``n`` records (the KafkaTool JSON form); deterministic from ``tag``."""
    out = []
    for i in range(n):
        # a compacted topic (``keys`` given) refuses null keys
        key = None if i % 7 == 3 and keys is None \
            else f"{tag}-k{i if keys is None else i % keys}".encode()
        value = None if (tombstones and i % 5 == 4) or (not tombstones and i % 11 == 5) \
            else (f"{tag}-v{i}-" + "x" * (i % 50)).encode()
        headers = []
        if i % 3 == 1:
            headers = [["h1", b64(f"a{i}".encode())]]
        elif i % 3 == 2:
            headers = [["h1", b64(b"")], ["h2", None], ["h1", b64(b"dup")]]
        rec = {"key": b64(key), "value": b64(value), "headers": headers,
               "partition": i % partitions}
        if i % 4 == 0:
            rec["timestamp"] = BASE_TS + i
        out.append(rec)
    return out


def chunks(topic: str, props: dict, recs: list[dict], n: int = 3) -> list[dict]:
    """``recs`` as ``n`` produce steps, each by a fresh producer that waits for its acks:
    at least ``n`` appends, so ``segment.ms=1`` rolls at least ``n - 1`` segments (one
    producer may put everything in one batch when the broker is slow)."""
    size = -(-len(recs) // n)
    return [{"topic": topic, "props": props, "records": recs[i:i + size]}
            for i in range(0, len(recs), size)]


def java_specs() -> tuple[list[dict], list[dict]]:
    """(topics to create, produce specs) of the Java producer's topics."""
    create, produce = [], []
    for codec in CODECS:
        name = f"java-{codec}"
        create.append({"topic": name, "partitions": 2, "configs": ROLL})
        props = {**SMALL_BATCHES, "compression.type": codec}
        if codec == "none":       # the one non-idempotent producer (the default is idempotent)
            props.update({"enable.idempotence": "false", "acks": "1"})
        produce += chunks(name, props, records(120, name))
    create.append({"topic": "java-txn", "partitions": 2, "configs": ROLL})
    produce.append({"topic": "java-txn",
                    "props": {**SMALL_BATCHES, "transactional.id": "tier-txn",
                              "compression.type": "lz4"},
                    "transactions": [{"abort": k % 2 == 1, "records": records(15, f"t{k}")}
                                     for k in range(5)]})
    create.append({"topic": "java-compact", "partitions": 1,
                   "configs": {**ROLL, "cleanup.policy": "compact",
                               "min.cleanable.dirty.ratio": "0.01",
                               "min.compaction.lag.ms": "0"}})
    produce += chunks("java-compact", {**SMALL_BATCHES, "compression.type": "gzip"},
                      records(150, "c", partitions=1, keys=12, tombstones=True), n=5)
    create.append({"topic": "java-logappend", "partitions": 2,
                   "configs": {**ROLL, "message.timestamp.type": "LogAppendTime"}})
    produce += chunks("java-logappend", {**SMALL_BATCHES, "compression.type": "zstd"},
                      records(60, "la"))
    return create, produce


def rdkafka_specs() -> list[dict]:
    create = [{"topic": f"rdk-{codec}", "partitions": 2, "configs": ROLL} for codec in CODECS]
    create.append({"topic": "rdk-txn", "partitions": 2, "configs": ROLL})
    return create


def produce_rdkafka(bootstrap: str) -> None:
    """librdkafka's producer (confluent-kafka): every codec, then transactions."""
    import base64

    from confluent_kafka import Producer

    def send(p, topic, recs):
        for r in recs:
            kwargs = {}
            if "timestamp" in r:
                kwargs["timestamp"] = r["timestamp"]
            headers = [(k, None if v is None else base64.b64decode(v)) for k, v in r["headers"]]
            p.produce(topic, key=None if r["key"] is None else base64.b64decode(r["key"]),
                      value=None if r["value"] is None else base64.b64decode(r["value"]),
                      partition=r["partition"], headers=headers or None, **kwargs)
            p.poll(0)

    for codec in CODECS:
        conf = {"bootstrap.servers": bootstrap, "compression.codec": codec,
                "enable.idempotence": True, "linger.ms": 0, "batch.size": 600}
        p = Producer(conf)
        recs = records(120, f"rdk-{codec}")
        for i in range(0, len(recs), 40):       # three appends at least: three segments
            send(p, f"rdk-{codec}", recs[i:i + 40])
            if p.flush(60) != 0:
                raise AssertionError(f"librdkafka did not deliver everything to rdk-{codec}")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tier-rdk-txn",
                  "compression.codec": "snappy", "linger.ms": 0, "batch.size": 600})
    p.init_transactions(60)
    for k in range(4):
        p.begin_transaction()
        send(p, "rdk-txn", records(12, f"rt{k}"))
        p.flush(60)
        if k % 2:
            p.abort_transaction(60)
        else:
            p.commit_transaction(60)
    p.flush(60)


class Produced:
    """What was produced, and what Kafka's consumer read back."""

    def __init__(self, topics, by_isolation, ends, group=None):
        self.topics = topics                  # every topic name
        self.by_isolation = by_isolation      # isolation -> list of records (dicts)
        self.ends = ends                      # isolation -> {(topic, partition): end}
        self.group = group                    # what the group consumer reported, or None

    def expected(self, topic: str, isolation: str) -> list[dict]:
        return [r for r in self.by_isolation[isolation] if r["topic"] == topic]


def produce_all(broker, tool, *, rdkafka: bool = True, group: str | None = None) -> Produced:
    """Produce the Java producer's topics (and librdkafka's with ``rdkafka``); with
    ``group``, a classic consumer group then reads ``GROUP_TOPICS`` to their end and
    commits, and a second round of records follows on them."""
    create, produce = java_specs()
    if rdkafka:
        create = create + rdkafka_specs()
    tool.create_topics(create)
    tool.produce(produce)
    if rdkafka:
        produce_rdkafka(broker.bootstrap)
    told = None
    if group is not None:
        told = tool.group(group, "classic", list(GROUP_TOPICS))
        props = {p["topic"]: p["props"] for p in produce}
        tool.produce([step for t in GROUP_TOPICS
                      for step in chunks(t, props[t], records(40, f"{t}-more"), n=2)])
    names = [t["topic"] for t in create]
    wait_compacted(broker, "java-compact")
    by_isolation, ends = {}, {}
    for isolation in ("read_uncommitted", "read_committed"):
        by_isolation[isolation], ends[isolation] = tool.consume(names, isolation)
    wait_checkpointed(broker, ends["read_uncommitted"])
    return Produced(names, by_isolation, ends, told)


def checkpoint(path) -> dict:
    """An offset checkpoint file as the broker writes it (version line, count line, then
    ``topic partition offset`` lines), read here independently of our reader."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    out = {}
    for line in lines[2:]:
        topic, part, off = line.split()
        out[(topic, int(part))] = int(off)
    return out


def _checkpoint(broker, name):
    return checkpoint(broker.logdir / name)


def wait_compacted(broker, topic: str, timeout: float = 90.0) -> None:
    """Until the cleaner has cleaned ``topic``-0 up to its active segment."""
    part = broker.partition_dir(topic, 0)
    deadline = time.monotonic() + timeout
    while True:
        active = max(int(f.stem) for f in part.glob("*.log"))
        done = _checkpoint(broker, "cleaner-offset-checkpoint") or {}
        if done.get((topic, 0), -1) >= active:
            # the cleaner swaps files in place: wait for its .cleaned/.swap files to go
            if not any(part.glob("*.cleaned")) and not any(part.glob("*.swap")):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"the log cleaner did not clean {topic}-0 within "
                                 f"{timeout:.0f} s (cleaner checkpoint: {done})")
        time.sleep(0.2)


def wait_checkpointed(broker, ends: dict, timeout: float = 60.0) -> None:
    """Until replication-offset-checkpoint holds each partition's high watermark (what
    the Java consumer's read_uncommitted end offsets are)."""
    deadline = time.monotonic() + timeout
    while True:
        hw = _checkpoint(broker, "replication-offset-checkpoint") or {}
        late = {tp: (hw.get(tp), end) for tp, end in ends.items() if hw.get(tp) != end}
        if not late:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"checkpointed high watermarks did not reach the consumer's "
                                 f"end offsets within {timeout:.0f} s: {late}")
        time.sleep(0.2)
