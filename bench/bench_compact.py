"""Compaction time vs a plain copy of the same log, in the same Spark session.

    .venv/bin/python bench/bench_compact.py [--records 2000000] [--keys 100000]
                                            [--partitions 4] [--repeat 3] [--master local[2]]

The log (untimed): ``--records`` records of ``bench/_data.py``'s event shape whose keys
are drawn from ``--keys`` distinct keys (one record in 20 a tombstone), spread over
``--partitions`` partitions, written by the library's writer in 8 MiB segments (so all
but each partition's last segment is cleanable), lz4-compressed.

Timed, each on a fresh copy of that log (the copy untimed, page cache synced before):

* ``compact``: ``jobs/compact.py``'s work (one Spark task per partition: headers, the
  offset map, the rewrite, then the journal commit and the swap);
* ``copy``: ``jobs/copy_topic.py`` of the same log to a new log dir, offsets kept,
  lz4 (the issue's yardstick: a read and a write of every record).

Each runs once to warm up, then ``--repeat`` interleaved rounds; medians and the median
of the per-round compact/copy ratios are printed (the issue asks for at most 2.0).
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

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _data import make_table  # noqa: E402

from spark_kafkalog.jobs import compact as compact_job  # noqa: E402
from spark_kafkalog.jobs import copy_topic  # noqa: E402
from spark_kafkalog.format import encode_batches  # noqa: E402
from spark_kafkalog.log.write import (  # noqa: E402
    AppendConfig,
    StagingWriter,
    TopicSpec,
    commit_write,
)

TOPIC = "bench"


def build_log(root: Path, records: int, keys: int, partitions: int) -> None:
    import pyarrow.fs as pafs
    fs = pafs.LocalFileSystem()
    table = make_table(records)
    rng = np.random.default_rng(7)
    key_ids = rng.integers(0, keys, records)
    key_col = pa.array([b"key-%08d" % k for k in range(keys)], pa.binary()).take(
        pa.array(key_ids))
    value = table.column("value").combine_chunks()
    tomb = rng.random(records) < 0.05
    value = pa.array(np.where(tomb, None, value.to_numpy(zero_copy_only=False)),
                     pa.binary())
    table = table.set_column(table.schema.get_field_index("key"), "key", key_col)
    table = table.set_column(table.schema.get_field_index("value"), "value", value)
    part = key_ids % partitions
    w = StagingWriter(fs, str(root), "batch:bench", "task")
    for q in range(partitions):
        rows = np.flatnonzero(part == q)
        data, idx = encode_batches(table, rows=rows, compression="lz4")
        w.add(TOPIC, q, data, idx)
    commit_write(fs, str(root), "batch:bench", [w.finish()],
                 [TopicSpec(TOPIC, partitions_if_new=partitions)],
                 config=AppendConfig(segment_bytes=8 << 20, fsync=False))


def time_compact(spark, root: Path) -> float:
    args = compact_job.parse_args(["--path", str(root), "--topic", TOPIC, "--no-progress"])
    t0 = time.perf_counter()
    summary = compact_job.compact(spark, args)
    dt = time.perf_counter() - t0
    assert summary["partitions_cleaned"] >= 1, summary
    return dt


def time_copy(spark, src: Path, dst: Path, partitions: int) -> float:
    args = copy_topic.parse_args(["--path", str(src), "--output", str(dst), "--topic", TOPIC,
                                  "--codec", "lz4", "--no-progress"])
    t0 = time.perf_counter()
    rows = copy_topic.run(spark, args)["rows"]
    dt = time.perf_counter() - t0
    assert rows > 0
    return dt


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    from pyspark_kafkalog import DefaultSource  # noqa: F401  (registers the short name)
    spark = (SparkSession.builder.master(args.master).appName("bench-compact")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="bench-compact-"))
    try:
        src = work / "log"
        t0 = time.perf_counter()
        build_log(src, args.records, args.keys, args.partitions)
        size = sum(f.stat().st_size for f in src.rglob("*.log"))
        print(f"log: {args.records:,} records, {args.keys:,} keys, {args.partitions} "
              f"partitions, {size / 1e6:.0f} MB (built in {time.perf_counter() - t0:.1f}s)")
        times: dict[str, list[float]] = {"compact": [], "copy": []}
        for rnd in range(args.repeat + 1):
            for name in ("compact", "copy"):
                run = work / f"{name}-{rnd}"
                if name == "compact":
                    shutil.copytree(src, run)
                    os.sync()
                    dt = time_compact(spark, run)
                else:
                    os.sync()
                    dt = time_copy(spark, src, run, args.partitions)
                print(f"  round {rnd} {name}: {dt:.2f}s{'' if rnd else ' (warm-up)'}",
                      flush=True)
                if rnd:
                    times[name].append(dt)
                shutil.rmtree(run, ignore_errors=True)
        ratios = [c / p for c, p in zip(times["compact"], times["copy"])]
        for name, ts in times.items():
            print(f"{name:8s} median {statistics.median(ts):.2f}s  "
                  f"({', '.join(f'{t:.2f}' for t in ts)})")
        print(f"compact/copy median ratio {statistics.median(ratios):.2f} "
              f"(issue bound: <= 2.0; copy = jobs/copy_topic.py, offsets kept, lz4)")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
