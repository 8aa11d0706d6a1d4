"""Spark's own Kafka connector against kafkalog, on the same records and one Spark session.

Starts a single-node Apache Kafka broker on 127.0.0.1 (the `kafka` test tier's runner,
jars from ``make kafka-jars``), then, with N records (default 2,000,000; 100-byte values,
16-byte keys, 4 partitions):

* write: ``df.write.format("kafka")`` to the broker (at-least-once, acks=all) against
  ``df.write.format("kafkalog")`` into a fresh log dir (exactly once, journal commit);
* read: ``spark.read.format("kafka")`` from the broker against
  ``spark.read.format("kafkalog")`` on the broker's own log dir (the same bytes), both
  into the noop sink.

Prints seconds, records/s and the kafkalog/Kafka ratios. One run; on a shared machine the
numbers are noisy. Usage: ``python bench/bench_kafka.py [--records N]``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kafka.broker import Broker, KafkaTool  # noqa: E402
from tests.kafka.spark_side_by_side import session  # noqa: E402
from tests.kafka.topics import checkpoint  # noqa: E402


def timed(label, fn):
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"{label:<44} {dt:8.2f} s", flush=True)
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args(argv)
    n, parts = args.records, args.partitions
    home = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    broker = Broker(home / "broker", heap="1g")
    broker.start()
    try:
        tool = KafkaTool(broker, home / "tool")
        tool.create_topics([{"topic": "bench", "partitions": parts}])
        spark = session("bench-kafka", {"spark.sql.shuffle.partitions": str(parts)})
        from pyspark.sql import functions as F
        df = (spark.range(n, numPartitions=parts)
              .select(F.format_string("key-%012d", "id").cast("binary").alias("key"),
                      F.expr("cast(repeat(cast(id % 10 as string), 100) as binary)")
                      .alias("value"),
                      (F.col("id") % parts).cast("int").alias("partition"))
              .cache())
        df.count()
        ourdir = home / "kafkalog"
        w_kafka = timed(f"write format('kafka')    {n:,} records", lambda: (
            df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", "bench").option("kafka.acks", "all")
            .option("kafka.linger.ms", "5").option("kafka.batch.size", str(1 << 20)).save()))
        w_ours = timed(f"write format('kafkalog') {n:,} records", lambda: (
            df.write.format("kafkalog").mode("append").option("path", str(ourdir))
            .option("topic", "bench").option("partitions", str(parts)).save()))
        df.unpersist()
        # the broker's log dir is read once its high watermark checkpoint has everything
        deadline = time.monotonic() + 120
        while sum(v for (t, _), v in checkpoint(broker.logdir / "replication-offset-checkpoint")
                  .items() if t == "bench") < n:
            if time.monotonic() > deadline:
                raise SystemExit("the broker's high watermark checkpoint did not reach N")
            time.sleep(0.2)
        r_kafka = timed("read  format('kafka')    -> noop", lambda: (
            spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", "bench").option("startingOffsets", "earliest")
            .load().write.format("noop").mode("overwrite").save()))
        r_ours = timed("read  format('kafkalog') -> noop", lambda: (
            spark.read.format("kafkalog").option("path", str(broker.logdir))
            .option("subscribe", "bench").load().write.format("noop").mode("overwrite").save()))
        print(f"\nrecords/s  write: kafka {n / w_kafka:,.0f}  kafkalog {n / w_ours:,.0f}  "
              f"ratio kafkalog/kafka {w_kafka / w_ours:.2f}x")
        print(f"records/s  read:  kafka {n / r_kafka:,.0f}  kafkalog {n / r_ours:,.0f}  "
              f"ratio kafkalog/kafka {r_kafka / r_ours:.2f}x")
        print("(one run on a shared 2-core machine: noisy)")
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
