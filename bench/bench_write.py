"""Write throughput: format("kafkalog") vs Parquet, same DataFrame, same Spark session.

    .venv/bin/python bench/bench_write.py [--rows 2000000] [--repeat 3] [--partitions 4]
                                          [--codecs none,lz4,zstd] [--master local[2]]

The DataFrame (``key`` string, ``value`` ~120-byte string) is generated, repartitioned to
the number of cores and cached before anything is timed, so both writers read the same
in-memory rows. Each writer runs once to warm up (JIT, Python workers), then ``--repeat``
times; the best run counts. Parquet is written with Spark's defaults (snappy). A
kafkalog write includes the driver's commit: offsets, appending to the segments, indexes,
fsync, checkpoints and the journal — everything until ``save()`` returns.

Output: one line per writer with rows/s, and the kafkalog/Parquet throughput ratio
(>= 1.0 means kafkalog is at least as fast).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4, help="topic partitions")
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()

    from tests.conftest import spark_env, spark_test_conf
    spark_env()
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(args.master).appName("bench_write")
    for k, v in spark_test_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism
    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_write_"))
    scratch.mkdir(parents=True, exist_ok=True)

    df = (spark.range(args.rows, numPartitions=cores)
          .selectExpr("concat('key-', cast(id as string)) as key",
                      "concat(lpad(cast(id as string), 20, '0'), repeat('v', 100)) as value")
          .cache())
    df.count()
    print(f"rows={args.rows} cores={cores} topic partitions={args.partitions} "
          f"value bytes={120} scratch={scratch}")

    def parquet(i):
        df.write.mode("overwrite").parquet(str(scratch / "parquet"))

    def kafkalog(codec):
        def run(i):
            root = scratch / f"kafkalog-{codec}-{i}"
            shutil.rmtree(root, ignore_errors=True)
            df.write.format("kafkalog").option("path", str(root)).option("topic", "bench") \
                .option("partitions", str(args.partitions)).option("compression", codec) \
                .mode("append").save()
        return run

    def best(fn, label):
        fn(-1)                                      # warm-up
        times = []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            fn(i)
            times.append(time.perf_counter() - t0)
        t = min(times)
        print(f"{label:<16} best {t:7.3f} s  {args.rows / t / 1e6:6.2f} M rows/s  "
              f"(runs: {', '.join(f'{x:.2f}' for x in times)})", flush=True)
        return t

    t_parquet = best(parquet, "parquet")
    results = {}
    for codec in [c.strip() for c in args.codecs.split(",") if c.strip()]:
        results[codec] = best(kafkalog(codec), f"kafkalog {codec}")
        size = sum(f.stat().st_size for f in (scratch / f"kafkalog-{codec}-0").rglob("*.log"))
        print(f"{'':<16} log bytes {size / 1e6:8.1f} MB")
    for codec, t in results.items():
        print(f"ratio kafkalog {codec} / parquet throughput: {t_parquet / t:.2f}x")
    if not args.dir:
        shutil.rmtree(scratch, ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
