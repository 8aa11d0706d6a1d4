#!/usr/bin/env python
"""Read throughput of ``format("kafkalog")`` against a trivial Arrow-replaying source.

For each codec (default: none and lz4) a log of ``--records`` records (default 2,000,000)
over ``--partitions`` partitions is generated with ``jobs/make_sample_log.py``. The same
rows are also read once, ahead of time, through the reader's own planning and per-slice
read function into Arrow IPC files: one file per input partition, batch for batch what
our ``read()`` yields (same rows, same batch sizes, same number of Spark tasks). Then, in
ONE Spark session (local[2] by default), two queries are timed ``--repeat`` times each,
in rounds of one of each (the order alternates round by round, ABBA, so a drift in
machine load hits both alike):

- ``kafkalog``: ``spark.read.format("kafkalog")...load(logdir)`` to the noop sink;
- ``arrow-replay``: a minimal Python data source whose ``read()`` memory-maps the
  pre-built IPC file of its partition and yields the batches, to the noop sink.

The replay source is the ceiling for any Python data source yielding these rows: Spark's
own cost of taking Arrow batches from a Python worker. The ratio is ``kafkalog
throughput / replay throughput``: per round (the two runs of a round are back to back,
so they share the machine's load), reported as the median and range over rounds, and
from the best run of each (the least disturbed); the target is >= 0.9. On a shared
machine, trust the median of the round ratios over absolute rows/s.

    python bench/bench_read.py [--records 2000000] [--repeat 8] [--codecs none,lz4]
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


def build_inputs(work: Path, codec: str, records: int, partitions: int) -> tuple[str, str]:
    """(log dir, IPC dir) holding the same rows: the IPC files are what our reader's
    planning + ``read()`` produce, one file per input partition, batch for batch."""
    import pyarrow as pa

    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.planning import plan
    from spark_kafkalog.spark.reader import open_logdirs, read_slice

    logdir = work / f"log-{codec}"
    make_sample_log(logdir, records=records, partitions=partitions, topic="bench",
                    segment_bytes=256 << 20, codecs=(codec,))
    ipc = work / f"ipc-{codec}"
    ipc.mkdir()
    opts = parse_read_options({"path": str(logdir), "subscribe": "bench"})
    logdirs = open_logdirs(opts)
    for i, task in enumerate(plan(logdirs, opts)):
        with pa.OSFile(str(ipc / f"{i:05d}.arrow"), "wb") as sink:
            writer = None
            for batch in (b for s in getattr(task, "slices", (task,))
                          for b in read_slice(logdirs, opts, s)):
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            writer.close()
    return str(logdir), str(ipc)


def replay_source():
    """The trivial data source (defined here so cloudpickle ships it by value)."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from spark_kafkalog.format.schema import SPARK_DDL

    @dataclass(frozen=True)
    class FilePartition(InputPartition):
        path: str

    class ReplayReader(DataSourceReader):
        def __init__(self, path):
            self.path = path

        def partitions(self):
            return [FilePartition(os.path.join(self.path, f))
                    for f in sorted(os.listdir(self.path))]

        def read(self, partition):
            import pyarrow as pa
            with pa.memory_map(partition.path) as source:
                reader = pa.ipc.open_file(source)
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    class ArrowReplay(DataSource):
        @classmethod
        def name(cls):
            return "arrowreplay"

        def schema(self):
            return SPARK_DDL

        def reader(self, schema):
            return ReplayReader(self.options["path"])

    return ArrowReplay


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=8)
    ap.add_argument("--codecs", default="none,lz4")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", help="keep inputs here (default: a temporary dir)")
    args = ap.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    # the source tree's pyspark_kafkalog shim for Spark's data source lookup
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="kafkalog-bench-")
        work = Path(tmp.name)
    codecs = [c.strip() for c in args.codecs.split(",") if c.strip()]
    inputs = {}
    for codec in codecs:
        t = timed(lambda: inputs.__setitem__(codec, build_inputs(
            work, codec, args.records, args.partitions)))
        print(f"inputs for codec {codec}: {args.records:,} records in {t:.1f}s", flush=True)

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("kafkalog-bench-read")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(replay_source())

    def ours(logdir):
        return lambda: (spark.read.format("kafkalog").option("subscribe", "bench")
                        .load(logdir).write.format("noop").mode("overwrite").save())

    def replay(ipc):
        return lambda: (spark.read.format("arrowreplay").option("path", ipc).load()
                        .write.format("noop").mode("overwrite").save())

    results = {}
    try:
        for codec in codecs:
            logdir, ipc = inputs[codec]
            n = spark.read.format("kafkalog").option("subscribe", "bench").load(logdir).count()
            m = spark.read.format("arrowreplay").option("path", ipc).load().count()
            if n != args.records or m != args.records:
                raise SystemExit(f"row counts differ: kafkalog {n}, replay {m}, "
                                 f"expected {args.records}")
            timed(ours(logdir))            # warm-up: workers, imports, page cache
            timed(replay(ipc))
            a, b = [], []
            for i in range(args.repeat):   # ABBA: alternate which goes first
                if i % 2 == 0:
                    a.append(timed(ours(logdir)))
                    b.append(timed(replay(ipc)))
                else:
                    b.append(timed(replay(ipc)))
                    a.append(timed(ours(logdir)))
            results[codec] = (a, b)
    finally:
        spark.stop()
        if tmp is not None:
            tmp.cleanup()

    print()
    print(f"{args.records:,} records, {args.partitions} partitions, master {args.master}, "
          f"{args.repeat} rounds (one run of each, order alternating)")
    print(f"{'codec':6} {'kafkalog rows/s':>16} {'replay rows/s':>14} {'best-of':>8}"
          f" {'median round ratio':>19} {'round ratios min..max':>22}")
    worst = None
    for codec, (a, b) in results.items():
        rounds = sorted(tb / ta for ta, tb in zip(a, b))
        best = min(b) / min(a)
        med = statistics.median(rounds)
        worst = med if worst is None else min(worst, med)
        print(f"{codec:6} {args.records / min(a):16,.0f} {args.records / min(b):14,.0f} "
              f"{best:8.2f} {med:19.2f} {rounds[0]:>14.2f}..{rounds[-1]:.2f}")
        print(f"       kafkalog s: {', '.join(f'{x:.2f}' for x in a)}")
        print(f"       replay   s: {', '.join(f'{x:.2f}' for x in b)}")
    print(f"lowest median round ratio {worst:.2f} (target >= 0.9)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
