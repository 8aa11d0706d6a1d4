"""Job throughput: ``jobs/copy_topic.py`` vs ``jobs/export_parquet.py`` on the same log.

    .venv/bin/python bench/bench_jobs.py [--rows 2000000] [--partitions 4] [--repeat 3]
                                         [--master local[2]] [--dir DIR]

The log is written once by ``jobs/make_sample_log.py`` (uncompressed, Kafka producer-sized
16 KiB batches, broker-style indexes and checkpoints; JSON values of about 70 bytes,
``user-<id>`` keys). Both jobs then run on one Spark session, as their ``main`` runs them:
``export_parquet`` with no ``--value-schema`` (no JSON parsing: the records as they are,
partitioned by topic and date, snappy Parquet) and ``copy_topic`` with ``--codec lz4``
(offsets kept: every record decoded, re-encoded into lz4 batches and committed through the
journal, fsync included). Unless ``--no-nofsync``, ``copy_topic --no-fsync`` is timed
too (Parquet fsyncs nothing). Each job runs once to warm up, then ``--repeat``
interleaved rounds run each once; the page cache is synced (untimed) before each run. The
ratio printed is the median over rounds of export's time / copy's time, i.e. copy's
throughput as a fraction of export's (target: >= 0.9).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _tree_bytes(root: Path, pattern: str) -> int:
    return sum(f.stat().st_size for f in root.rglob(pattern) if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4, help="topic partitions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--nofsync", action=argparse.BooleanOptionalAction, default=True,
                    help="also time copy_topic --no-fsync")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()

    from spark_kafkalog.jobs import copy_topic, export_parquet
    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from tests.conftest import spark_env, spark_test_conf

    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_jobs_"))
    scratch.mkdir(parents=True, exist_ok=True)
    src = scratch / "kafka-logs"
    t0 = time.perf_counter()
    make_sample_log(src, records=args.rows, partitions=args.partitions, codecs=("none",),
                    segment_bytes=256 << 20)
    log_bytes = _tree_bytes(src, "*.log")
    print(f"rows={args.rows} topic partitions={args.partitions} source log "
          f"{log_bytes / 1e6:.1f} MB (uncompressed, 16 KiB batches), written in "
          f"{time.perf_counter() - t0:.1f}s; scratch={scratch}", flush=True)

    spark_env()
    from pyspark.sql import SparkSession

    b = SparkSession.builder.master(args.master).appName("bench_jobs")
    for k, v in spark_test_conf().items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.session.timeZone", "UTC")   # as export_parquet's main sets it

    def export(i):
        out = scratch / "parquet"
        ns = export_parquet.parse_args(["--path", str(src), "--subscribe", "events",
                                        "--output", str(out)])
        df, obs = export_parquet.observe(export_parquet.build_frame(spark, ns))
        (df.write.mode(ns.mode).partitionBy("topic", "date")
         .option("compression", ns.compression).parquet(ns.output))
        return int(obs.get["rows"])

    def copy(fsync: bool):
        def run(i):
            out = scratch / f"copy{'' if fsync else '-nofsync'}"
            shutil.rmtree(out, ignore_errors=True)
            argv = ["--path", str(src), "--output", str(out), "--topic", "events",
                    "--codec", "lz4"] + ([] if fsync else ["--no-fsync"])
            return copy_topic.run(spark, copy_topic.parse_args(argv))["rows"]
        return run

    jobs = [("export_parquet", export), ("copy_topic lz4", copy(True))]
    if args.nofsync:
        jobs.append(("copy_topic lz4 nofsync", copy(False)))
    for label, fn in jobs:
        rows = fn(-1)                                      # warm-up
        if rows != args.rows:
            raise SystemExit(f"{label} handled {rows} rows, not {args.rows}")
    times = {label: [] for label, _ in jobs}
    for i in range(args.repeat):
        for label, fn in jobs:
            os.sync()             # untimed: no job pays for an earlier one's dirty pages
            t0 = time.perf_counter()
            fn(i)
            times[label].append(time.perf_counter() - t0)
    for label, ts in times.items():
        med = statistics.median(ts)
        print(f"{label:<24} median {med:7.3f} s  {args.rows / med / 1e6:6.2f} M rows/s  "
              f"(runs: {', '.join(f'{x:.2f}' for x in ts)})")
    print(f"bytes written: parquet {_tree_bytes(scratch / 'parquet', '*.parquet') / 1e6:.1f} "
          f"MB, copy lz4 {_tree_bytes(scratch / 'copy', '*.log') / 1e6:.1f} MB")
    for label, _ in jobs[1:]:
        ratios = [e / c for e, c in zip(times["export_parquet"], times[label])]
        print(f"ratio {label} / export_parquet throughput: median "
              f"{statistics.median(ratios):.2f}x (per round: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.90)")
    spark.stop()
    if not args.dir:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
