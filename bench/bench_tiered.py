"""History replay of a tiered topic (KIP-405): ``format("kafkalog")`` over both tiers against
Spark's ``format("kafka")`` through the broker, same records, noop sink, one Spark session.

Starts the `kafka` tier's tiered-storage broker (LocalTieredStorage, tests/kafka/tiered),
writes N records (default 1,000,000; 100-byte values, 16-byte keys, 2 partitions) with
``df.write.format("kafka")`` into a topic with 1 MiB segments and ``local.retention.ms=1``,
waits until every closed segment is remote-only, writes N/100 more (they stay in the
local active segment), then times, from offset 0 into the noop
sink: ``format("kafka")`` through the broker (which fetches the remote segments), and
``format("kafkalog")`` on the broker's log dir with ``remoteStorage`` (local remote dir).
Then the remote dir is copied to a loopback S3 (moto) behind a counting proxy and
``format("kafkalog")`` reads it from there: requests to the store per GB read.

Prints seconds, records/s, the ratio, the remote-only share and requests/GB. One run; on
a shared machine the numbers are noisy. Usage: ``python bench/bench_tiered.py [--records N]``.
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.kafka.broker import KafkaTool  # noqa: E402
from tests.kafka.spark_side_by_side import session  # noqa: E402
from tests.kafka.tiered.tiered_broker import remote_root, tiered_broker, wait_tiered  # noqa: E402

TOPIC = "replay"


def timed(label, fn):
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    print(f"{label:<52} {dt:8.2f} s", flush=True)
    return dt


def _noop(df):
    df.write.format("noop").mode("overwrite").save()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args(argv)
    n, parts = args.records, args.partitions
    home = Path(tempfile.mkdtemp(prefix="bench-tiered-"))
    broker = tiered_broker(home / "broker")
    broker.heap = "1g"
    broker.start()
    try:
        tool = KafkaTool(broker, home / "tool")
        tool.create_topics([{"topic": TOPIC, "partitions": parts, "configs": {
            "remote.storage.enable": "true", "local.retention.ms": "1",
            "segment.bytes": str(1 << 20)}}])
        spark = session("bench-tiered", {"spark.sql.shuffle.partitions": str(parts)})
        from pyspark.sql import functions as F
        df = (spark.range(n, numPartitions=parts)
              .select(F.format_string("key-%012d", "id").cast("binary").alias("key"),
                      F.expr("cast(repeat(cast(id % 10 as string), 100) as binary)")
                      .alias("value"),
                      (F.col("id") % parts).cast("int").alias("partition")))
        timed(f"write format('kafka') {n:,} records", lambda: (
            df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", TOPIC).option("kafka.acks", "all")
            .option("kafka.linger.ms", "5").option("kafka.batch.size", str(1 << 18)).save()))
        wait_tiered(broker, [TOPIC], timeout=600)
        # a tail that stays local (the active segment): both tiers are read
        tail = max(1, n // 100)
        (spark.range(n, n + tail, numPartitions=parts)
         .select(F.format_string("key-%012d", "id").cast("binary").alias("key"),
                 F.expr("cast(repeat(cast(id % 10 as string), 100) as binary)").alias("value"),
                 (F.col("id") % parts).cast("int").alias("partition"))
         .write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("topic", TOPIC).save())
        n += tail
        remote = str(remote_root(broker))
        local = sum(f.stat().st_size for f in broker.logdir.glob(f"{TOPIC}-*/*.log"))
        remote_bytes = sum(f.stat().st_size for f in Path(remote).glob(f"{TOPIC}-*/*.log"))
        kafka = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", TOPIC).option("startingOffsets", "earliest").load())
        ours = (spark.read.format("kafkalog").option("subscribe", TOPIC)
                .option("remoteStorage", remote).load(str(broker.logdir)))
        assert ours.count() == n, "kafkalog did not read every record"
        remote_only = n - (spark.read.format("kafkalog").option("subscribe", TOPIC)
                           .load(str(broker.logdir)).count())
        print(f"remote-only records: {remote_only:,} of {n:,} ({remote_only / n:.1%}); "
              f"remote .log bytes {remote_bytes / 1e6:.1f} MB, local {local / 1e6:.1f} MB")
        r_kafka = timed("read format('kafka') via broker -> noop", lambda: _noop(kafka))
        r_ours = timed("read format('kafkalog') both tiers -> noop", lambda: _noop(ours))
        print(f"records/s: kafka {n / r_kafka:,.0f}  kafkalog {n / r_ours:,.0f}  "
              f"ratio kafkalog/kafka {r_kafka / r_ours:.2f}x", flush=True)
        _s3_requests(spark, broker, remote, remote_bytes, n)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


def _s3_requests(spark, broker, remote: str, remote_bytes: int, n: int) -> None:
    """The same read with the remote tier on a loopback S3 behind a counting proxy."""
    import pyarrow.fs as pafs
    from moto.server import ThreadedMotoServer

    from tests.log.s3count import CountingProxy

    for k, v in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                 "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1"}.items():
        os.environ.setdefault(k, v)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        fs = pafs.S3FileSystem(endpoint_override=f"{host}:{port}", scheme="http",
                               region="us-east-1", access_key="testing", secret_key="testing",
                               allow_bucket_creation=True)
        fs.create_dir("tiered")
        pafs.copy_files(remote, "tiered/root", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=fs)
        proxy = CountingProxy(f"http://{host}:{port}")
        try:
            df = (spark.read.format("kafkalog").option("subscribe", TOPIC)
                  .option("remoteStorage", "s3://tiered/root")
                  .option("fs.s3.endpoint", proxy.endpoint).option("fs.s3.region", "us-east-1")
                  .option("fs.s3.access_key", "testing").option("fs.s3.secret_key", "testing")
                  .load(str(broker.logdir)))
            proxy.requests.clear()
            dt = timed("read format('kafkalog') remote tier on S3 -> noop", lambda: _noop(df))
            reqs = len(proxy.requests)
            print(f"S3 requests: {reqs} for {remote_bytes / 1e9:.3f} GB of remote segments: "
                  f"{reqs / (remote_bytes / 1e9):,.0f} per GB; listings: "
                  f"{sum('list-type' in q or 'prefix=' in q for _, _, q in proxy.requests)}; "
                  f"{n / dt:,.0f} records/s (moto on loopback)", flush=True)
        finally:
            proxy.close()
    finally:
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
