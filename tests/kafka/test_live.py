"""A live log: while Kafka's Java producer appends to the broker (segments rolling), every
``read_table`` of the broker's log dir returns a consistent prefix: offsets 0..n-1 with
the values produced for them, n at a batch boundary of the final log (never a partial
batch) and between the checkpointed high watermarks seen just before and just after the
read (never past the high watermark)."""
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


def hw(broker) -> int:
    return checkpoint(broker.logdir / "replication-offset-checkpoint").get((TOPIC, 0), 0)


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
    proc = subprocess.Popen(kafka_tool.command("append", kafka_broker.bootstrap, TOPIC,
                                               str(COUNT), "30"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        first = proc.stdout.readline()
        assert first.startswith("acked"), first + proc.stderr.read()[-3000:]
        while proc.poll() is None and len(seen) < MAX_READS:
            before = hw(kafka_broker)
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
