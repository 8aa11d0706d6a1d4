"""The Iceberg export against ``export_parquet`` on the same records, and an incremental run.

    .venv/bin/python bench/bench_iceberg.py [--rows 2000000] [--partitions 4] [--repeat 2]
                                            [--window-records 500000] [--dir DIR]

The log is written by ``jobs/make_sample_log.py`` (uncompressed, 16 KiB batches, JSON
values of about 70 bytes, three days of timestamps). Timed, each ``--repeat`` times
(median shown; the page cache synced, untimed, before each run):

- ``export_iceberg`` full: ``spark_kafkalog.lake.export_topics`` into a new table (fresh
  warehouse each run; embedded SQLite catalog; day(timestamp) partitions; no Spark);
- ``export_parquet``: the job's frame written on a warm ``local[2]`` Spark session (its
  JVM start not counted, which favours it), partitioned by topic and date, snappy;
- ``export_iceberg`` incremental: a table holding the ``--rows`` records, and a log of
  ``1.01 x --rows`` (a second sample log, same topic and partitions: the table's next
  offsets are where its extra 1% begins), so the run exports the 1% past the table.

Ratios printed: full iceberg / export_parquet (issue 39's goal <= 1.15 at 10 M records),
incremental / full iceberg (goal <= 0.05).
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
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--window-records", type=int, default=500_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--parquet", action=argparse.BooleanOptionalAction, default=True,
                    help="also time export_parquet (--no-parquet: Iceberg only, no Spark, "
                         "for sizes where Spark's run would not fit the time)")
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()

    from spark_kafkalog.jobs import export_parquet
    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.lake import export_topics, open_catalog
    from spark_kafkalog.lake.iceberg_table import RawRecords, open_table
    from tests.conftest import spark_env, spark_test_conf

    scratch = Path(args.dir or tempfile.mkdtemp(prefix="bench_iceberg_"))
    scratch.mkdir(parents=True, exist_ok=True)
    src, grown = scratch / "kafka-logs", scratch / "kafka-logs-grown"
    t0 = time.perf_counter()
    make_sample_log(src, records=args.rows, partitions=args.partitions, codecs=("none",),
                    segment_bytes=256 << 20)
    extra = args.rows // 100
    make_sample_log(grown, records=args.rows + extra, partitions=args.partitions,
                    codecs=("none",), segment_bytes=256 << 20)
    print(f"rows={args.rows:,} partitions={args.partitions} log "
          f"{_tree_bytes(src, '*.log') / 1e6:.1f} MB (+ a log of {args.rows + extra:,}), "
          f"written in {time.perf_counter() - t0:.1f}s; scratch={scratch}", flush=True)

    def iceberg(logs: Path, wh: Path) -> tuple[float, int]:
        t = time.perf_counter()
        catalog = open_catalog(str(wh))
        table = open_table(catalog, "bench.events", RawRecords())
        r = export_topics(str(logs), ["events"], catalog, table, "bench.events",
                          window_records=args.window_records)
        return time.perf_counter() - t, r.rows

    spark = None
    if args.parquet:
        spark_env()
        from pyspark.sql import SparkSession

        b = SparkSession.builder.master(args.master).appName("bench_iceberg")
        for k, v in spark_test_conf().items():
            b = b.config(k, v)
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        spark.conf.set("spark.sql.session.timeZone", "UTC")

    def parquet() -> tuple[float, int]:
        out = scratch / "parquet"
        shutil.rmtree(out, ignore_errors=True)
        ns = export_parquet.parse_args(["--path", str(src), "--topic", "events",
                                        "--output", str(out)])
        t = time.perf_counter()
        df, obs = export_parquet.observe(export_parquet.build_frame(spark, ns))
        (df.write.mode(ns.mode).partitionBy("topic", "date")
         .option("compression", ns.compression).parquet(ns.output))
        return time.perf_counter() - t, int(obs.get["rows"])

    if spark is not None:
        parquet()                                       # warm-up: the JVM's JIT, caches
    times: dict[str, list[float]] = {"export_iceberg full": [], "export_parquet": [],
                                     "export_iceberg incremental 1%": []}
    if spark is None:
        del times["export_parquet"]
    for i in range(args.repeat):
        wh = scratch / f"wh{i}"
        shutil.rmtree(wh, ignore_errors=True)
        os.sync()
        sec, rows = iceberg(src, wh)
        assert rows == args.rows, rows
        times["export_iceberg full"].append(sec)
        if spark is not None:
            os.sync()
            sec, rows = parquet()
            assert rows == args.rows, rows
            times["export_parquet"].append(sec)
        os.sync()
        sec, rows = iceberg(grown, wh)                 # the 1% past what wh holds
        assert rows == extra, (rows, extra)
        times["export_iceberg incremental 1%"].append(sec)
    med = {k: statistics.median(v) for k, v in times.items()}
    for label, ts in times.items():
        n = extra if "incremental" in label else args.rows
        print(f"{label:<30} median {med[label]:7.3f} s  {n / med[label] / 1e6:6.2f} M rows/s "
              f" (runs: {', '.join(f'{x:.2f}' for x in ts)})")
    print(f"bytes written: iceberg data {_tree_bytes(scratch / 'wh0', '*.parquet') / 1e6:.1f} MB"
          f" (zstd, pyiceberg's default), parquet "
          f"{_tree_bytes(scratch / 'parquet', '*.parquet') / 1e6:.1f} MB (snappy)")
    if spark is not None:
        print(f"ratio export_iceberg / export_parquet time: "
              f"{med['export_iceberg full'] / med['export_parquet']:.2f}x (goal <= 1.15)")
    print(f"ratio incremental 1% / full export_iceberg time: "
          f"{med['export_iceberg incremental 1%'] / med['export_iceberg full']:.3f} "
          f"(goal <= 0.05)")
    if spark is not None:
        spark.stop()
    if not args.dir:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    main()
