"""A live log: while Kafka's Java producer appends to the broker (segments rolling), every
``read_table`` of the broker's log dir returns a consistent prefix: offsets 0..n-1 with
the values produced for them, n at a batch boundary of the final log (never a partial
batch) and between the checkpointed high watermarks seen just before and just after the
read (never past the high watermark); and a kafkalog stream over the live log dir delivers
each record exactly once."""
from __future__ import annotations

import re
import subprocess
import time

import pyarrow.compute as pc

from spark_kafkalog.log import read_table
from tests.kafka.broker import dump_log_segments
from tests.kafka.topics import checkpoint

TOPIC = "live"
COUNT = 60_000
MAX_READS = 200


def hw(broker, topic: str = TOPIC) -> int:
    return checkpoint(broker.logdir / "replication-offset-checkpoint").get((topic, 0), 0)


def hold(proc, n: int, broker, topic: str) -> None:
    """Wait until the producer (started with ``n`` among its holds) stopped after ``n``
    acked records and the checkpointed high watermark reached them: the log is live (the
    broker runs, the producer resumes once :func:`release` is called) and holds ``n``."""
    for line in proc.stdout:
        if line.strip() == f"held {n}":
            break
    else:
        raise AssertionError(f"the producer ended before holding at {n}: "
                             + proc.stderr.read()[-3000:])
    deadline = time.monotonic() + 60
    while hw(broker, topic) < n:
        assert time.monotonic() < deadline, f"high watermark checkpoint did not reach {n}"
        time.sleep(0.05)


def release(proc) -> None:
    proc.stdin.write("go\n")
    proc.stdin.flush()


def check_prefix(table) -> int:
    n = table.num_rows
    offsets = table["offset"].to_pylist()
    assert offsets == list(range(n))
    values = table["value"].cast("string")
    assert pc.all(pc.equal(values, pc.binary_join_element_wise(
        "v", pc.cast(table["offset"], "string"), ""))).as_py() in (True, None)
    return n


def test_reads_of_a_live_log_are_consistent_prefixes(kafka_broker, kafka_tool):
    kafka_tool.create_topics([{"topic": TOPIC, "partitions": 1,
                               "configs": {"segment.ms": "300"}}])
    holds = (10_000, 20_000)
    proc = subprocess.Popen(kafka_tool.command("append", kafka_broker.bootstrap, TOPIC,
                                               str(COUNT), "30",
                                               ",".join(map(str, holds))),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        first = proc.stdout.readline()
        assert first.startswith("acked"), first + proc.stderr.read()[-3000:]
        # reads of the live log at known points (the producer held), whatever the load;
        # then reads racing the producer
        for n in holds:
            hold(proc, n, kafka_broker, TOPIC)
            seen.append(check_prefix(read_table(str(kafka_broker.logdir), TOPIC)))
            assert seen[-1] == n, (seen, n)
            release(proc)
        last = -1
        while proc.poll() is None and len(seen) < MAX_READS:
            # read again once the checkpointed high watermark moved (bounded polling of
            # the broker's file): on a loaded machine the producer can stall for longer
            # than MAX_READS back-to-back reads take
            until = time.monotonic() + 10
            while hw(kafka_broker) == last and proc.poll() is None \
                    and time.monotonic() < until:
                time.sleep(0.05)
            before = last = hw(kafka_broker)
            n = check_prefix(read_table(str(kafka_broker.logdir), TOPIC))
            after = hw(kafka_broker)
            assert before <= n <= after, (before, n, after)
            seen.append(n)
        rest, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        assert f"done {COUNT}" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if not pipe.closed:
                pipe.close()
    deadline = time.monotonic() + 60
    while hw(kafka_broker) < COUNT:
        assert time.monotonic() < deadline, "high watermark checkpoint did not reach the end"
        time.sleep(0.2)
    assert check_prefix(read_table(str(kafka_broker.logdir), TOPIC)) == COUNT
    live = sorted({n for n in seen if 0 < n < COUNT})
    assert len(live) >= 2, f"the reads saw no growing log: {seen}"
    # every prefix ends where a batch of the final log ends
    segments = sorted(kafka_broker.partition_dir(TOPIC, 0).glob("*.log"))
    ends = {int(m) + 1 for m in re.findall(r"lastOffset: (\d+)", dump_log_segments(segments))}
    assert [n for n in live if n not in ends] == []


STREAM_TOPIC = "live-stream"
STREAM_COUNT = 30_000
MAX_RUNS = 60


def test_stream_over_a_live_log_delivers_each_record_once(spark, kafka_broker, kafka_tool,
                                                          tmp_path):
    """While the Java producer appends (two partitions, segments rolling), an
    availableNow kafkalog query over the broker's log dir runs again and again on one
    checkpoint (micro-batches of at most 8,000 offsets). It reads up to the checkpointed
    high watermark (no ``readPastHighWatermark``): once the producer is done and the
    checkpoint reached the log end, one more run; the union of all micro-batches is then
    exactly what Kafka's consumer reads, each (partition, offset) once."""
    kafka_tool.create_topics([{"topic": STREAM_TOPIC, "partitions": 2,
                               "configs": {"segment.ms": "300"}}])
    batches = []

    def collect(df, batch_id):
        batches.append((batch_id, [tuple(r) for r in
                                   df.select("partition", "offset", "key", "value").collect()]))

    def run():
        q = (spark.readStream.format("kafkalog").option("path", str(kafka_broker.logdir))
             .option("subscribe", STREAM_TOPIC).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "8000").load()
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None
        return sum(len(rows) for _, rows in batches)

    held = 6_000
    proc = subprocess.Popen(kafka_tool.command("append", kafka_broker.bootstrap, STREAM_TOPIC,
                                               str(STREAM_COUNT), "400", str(held)),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    live = []
    try:
        first = proc.stdout.readline()
        assert first.startswith("acked"), first + proc.stderr.read()[-3000:]
        hold(proc, held, kafka_broker, STREAM_TOPIC)    # one run on a known live prefix
        live.append(run())
        assert live == [held], live
        release(proc)
        while proc.poll() is None and len(live) < MAX_RUNS:
            live.append(run())
        rest, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        assert f"done {STREAM_COUNT}" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if not pipe.closed:
                pipe.close()
    consumed, ends = kafka_tool.consume([STREAM_TOPIC])
    assert sum(ends.values()) == STREAM_COUNT
    marks = checkpoint(kafka_broker.logdir / "replication-offset-checkpoint")
    deadline = time.monotonic() + 60
    while any(marks.get(tp, 0) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, "high watermark checkpoint did not reach the end"
        time.sleep(0.2)
        marks = checkpoint(kafka_broker.logdir / "replication-offset-checkpoint")
    assert run() == STREAM_COUNT
    # the query did run while the log grew: some runs ended on a strict, growing prefix
    assert len({n for n in live if 0 < n < STREAM_COUNT}) >= 1, live
    ids = [b for b, _ in batches]
    assert ids == sorted(set(ids)), f"a micro-batch was delivered twice: {ids}"
    got = [row for _, rows in batches for row in rows]
    assert len(got) == len({(p, o) for p, o, _, _ in got}), "a record was delivered twice"
    for part in (0, 1):
        offsets = sorted(o for p, o, _, _ in got if p == part)
        assert offsets == list(range(ends[(STREAM_TOPIC, part)])), part
    want = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in consumed)
    assert sorted((p, o, bytes(k), bytes(v)) for p, o, k, v in got) == want
