#!/usr/bin/env python
"""Many small topic-partitions: read and planning time as the partition count grows.

The same ``--records`` (default 1,000,000) small records are written (``jobs/
make_sample_log.py``, codec none) as 10, 200 and 2,000 topic-partitions (``--counts``).
With ``--spread`` (default 4), the 200-partition log is also read spread over that many log
dirs (partition dirs dealt round-robin, each dir with its own checkpoints). In ONE Spark
session (local[2]), each is read into the noop sink ``--repeat`` times:

- ``packed``: ``format("kafkalog")`` with its defaults (small slices packed into tasks);
- ``unpacked``: the same with ``packPartitions=false`` (one task per slice at least),
  skipped above ``--unpacked-max`` partitions (it is slow by design);
- ``floor``: the trivial Arrow-replay source of ``bench_read.py`` given the same rows in
  the same number of input partitions as the packed plan (Spark's own cost of taking
  Arrow batches from Python workers).

Planning (``plan()`` on a fresh ``LogDirs``, in this process: listing, checkpoints,
journal, index and tail reads) is timed separately, and at ``--plan-partitions`` (default
10,000) small partitions of several segments each, reported per partition.

Timings on a shared machine are noisy: compare within one run, use the medians.

    python bench/bench_many_partitions.py [--records 1000000] [--counts 10,200,2000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def build_log(root: Path, records: int, partitions: int, segment_bytes: int) -> str:
    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    make_sample_log(root, records=records, partitions=partitions, topic="bench",
                    segment_bytes=segment_bytes, codecs=("none",))
    return str(root)


def spread_log(src: str, roots: list[Path]) -> str:
    """The partition dirs of log dir ``src`` dealt round-robin over ``roots`` (hard links),
    each root with the checkpoints of its own partitions; the comma-joined roots."""
    import os
    import re

    from spark_kafkalog.jobs.make_sample_log import checkpoint_text

    src = Path(src)
    dirs = sorted((d for d in src.iterdir() if d.is_dir()),
                  key=lambda d: int(d.name.rsplit("-", 1)[1]))
    names = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
             "log-start-offset-checkpoint")
    ckpts = {}
    for name in names:
        lines = (src / name).read_text().split("\n")[2:]
        ckpts[name] = {(t, int(p)): int(o) for t, p, o in
                       (re.split(r"\s+", ln.strip()) for ln in lines if ln.strip())}
    for i, root in enumerate(roots):
        root.mkdir(parents=True)
        mine = dirs[i::len(roots)]
        for d in mine:
            (root / d.name).mkdir()
            for f in d.iterdir():
                os.link(f, root / d.name / f.name)
        keys = {("bench", int(d.name.rsplit("-", 1)[1])) for d in mine}
        for name in names:
            (root / name).write_text(checkpoint_text(
                {k: v for k, v in ckpts[name].items() if k in keys}))
        (root / "cleaner-offset-checkpoint").write_text(checkpoint_text({}))
        (root / "meta.properties").write_text((src / "meta.properties").read_text())
    return ",".join(str(r) for r in roots)


def plan_time(logdir: str, repeat: int = 3) -> tuple[float, int]:
    """(median seconds, tasks) of planning a read of the whole topic."""
    from spark_kafkalog.log import LogDirs
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.planning import plan

    opts = parse_read_options({"path": logdir, "subscribe": "bench"})
    times, n = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = len(plan(LogDirs(list(opts.paths)), opts))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), n


def build_floor(logdir: str, ipc: Path) -> int:
    """The packed plan's rows as IPC files, one per task (bench_read's replay input)."""
    import pyarrow as pa

    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader

    reader = KafkaLogReader(parse_read_options({"path": logdir, "subscribe": "bench"}))
    ipc.mkdir(parents=True, exist_ok=True)
    tasks = reader.partitions()
    for i, task in enumerate(tasks):           # batch for batch what read() yields
        with pa.OSFile(str(ipc / f"{i:05d}.arrow"), "wb") as sink:
            writer = None
            for batch in reader.read(task):
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            writer.close()
    return len(tasks)


def _label(n) -> str:
    return f"{n:,}" if isinstance(n, int) else str(n)


def _ipc(work: Path, n) -> Path:
    return work / f"ipc-{_label(n).replace('/', '-')}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--counts", default="10,200,2000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--unpacked-max", type=int, default=200)
    ap.add_argument("--plan-partitions", type=int, default=10_000)
    ap.add_argument("--spread", type=int, default=4,
                    help="also read the 200-partition log spread over this many log dirs "
                         "(0: no)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--skip-spark", action="store_true", help="planning only")
    args = ap.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

    counts = [int(c) for c in args.counts.split(",") if c.strip()]
    tmp = tempfile.TemporaryDirectory(prefix="kafkalog-bench-many-")
    work = Path(tmp.name)
    try:
        logs = {}
        for n in counts:
            t0 = time.perf_counter()
            logs[n] = build_log(work / f"log-{n}", args.records, n, 8 << 20)
            print(f"{n} partitions: {args.records:,} records written in "
                  f"{time.perf_counter() - t0:.1f}s", flush=True)
        if args.spread and 200 in logs:
            label = f"200/{args.spread}dirs"
            logs[label] = spread_log(logs[200], [work / f"spread-{i}"
                                                 for i in range(args.spread)])
            counts.insert(counts.index(200) + 1, label)
        planning = {n: plan_time(logs[n]) for n in counts}
        results = {}
        if not args.skip_spark:
            from bench_read import replay_source
            from pyspark.sql import SparkSession

            floors = {n: build_floor(logs[n], _ipc(work, n)) for n in counts}
            spark = (SparkSession.builder.master(args.master)
                     .appName("kafkalog-bench-many").config("spark.ui.enabled", "false")
                     .config("spark.driver.bindAddress", "127.0.0.1")
                     .config("spark.driver.host", "127.0.0.1").getOrCreate())
            spark.sparkContext.setLogLevel("ERROR")
            spark.dataSource.register(replay_source())

            def run(fmt, path, **opts):
                r = spark.read.format(fmt)
                for k, v in {"subscribe": "bench", **opts}.items():
                    r = r.option(k, v)
                t0 = time.perf_counter()
                r.load(path).write.format("noop").mode("overwrite").save()
                return time.perf_counter() - t0

            def kinds_of(n):
                kinds = {"packed": lambda: run("kafkalog", logs[n]),
                         "floor": lambda: spark.read.format("arrowreplay")
                         .option("path", str(_ipc(work, n))).load()
                         .write.format("noop").mode("overwrite").save()}
                if isinstance(n, int) and n <= args.unpacked_max:
                    kinds["unpacked"] = lambda: run("kafkalog", logs[n],
                                                    packPartitions="false")
                return kinds

            try:
                for n in counts:                # warm-up: the JVM's JIT, Python workers
                    for fn in kinds_of(n).values():
                        fn()
                for n in counts:
                    kinds = kinds_of(n)
                    ts = {name: [] for name in kinds}
                    for _ in range(args.repeat):    # interleaved: each kind sees the
                        for name, fn in kinds.items():   # same machine, round by round
                            t0 = time.perf_counter()
                            fn()
                            ts[name].append(time.perf_counter() - t0)
                    got = {name: statistics.median(t) for name, t in ts.items()}
                    results[n] = (floors[n], got)
                    print(f"{n} partitions: {got}", flush=True)
            finally:
                spark.stop()

        print()
        print(f"{args.records:,} records, master {args.master}, median of {args.repeat}")
        print(f"{'topic-partitions':>16} {'tasks':>6} {'planning':>9} {'packed':>8} "
              f"{'unpacked':>9} {'floor':>7} {'packed/floor':>13}")
        for n in counts:
            pt, tasks = planning[n]
            if n in results:
                _, got = results[n]
                un = got.get("unpacked")
                print(f"{_label(n):>16} {tasks:6} {pt:8.2f}s {got['packed']:7.2f}s "
                      f"{(f'{un:8.2f}s' if un else '        -'):>9} {got['floor']:6.2f}s "
                      f"{got['packed'] / got['floor']:13.2f}")
            else:
                print(f"{_label(n):>16} {tasks:6} {pt:8.2f}s")
        ran = [n for n in counts if n in results and isinstance(n, int)]
        if len(ran) > 1:
            lo, hi = min(ran), max(ran)
            print(f"packed read, {hi:,} vs {lo:,} partitions: "
                  f"{results[hi][1]['packed'] / results[lo][1]['packed']:.2f}x "
                  f"(floor: {results[hi][1]['floor'] / results[lo][1]['floor']:.2f}x)")
        if args.plan_partitions:
            big = args.plan_partitions
            t0 = time.perf_counter()
            # 400 records (~38 KB, three 16 KiB batches) a partition in segments of
            # 4 KiB: a segment per batch, three a partition
            logdir = build_log(work / "plan", big * 400, big, 4096)
            built = time.perf_counter() - t0
            segments = sum(1 for _ in Path(logdir).glob("*/*.log"))
            pt, tasks = plan_time(logdir, repeat=1)
            print(f"\nplanning {big:,} small partitions, {segments / big:.1f} segments each "
                  f"(built in {built:.0f}s): {pt:.2f}s, {pt / big * 1000:.2f} ms per "
                  f"partition, {tasks} tasks")
    finally:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
