#!/usr/bin/env python
"""Read throughput of ``format("kafkalog")`` against a trivial Arrow-replaying source.

For each codec (default: none and lz4) a log of ``--records`` records (default 2,000,000)
over ``--partitions`` partitions is generated with ``jobs/make_sample_log.py``. The same
rows are also decoded once, ahead of time, into Arrow IPC files (one per Kafka partition,
batch for batch what our reader yields). Then, in ONE Spark session (local[2] by default),
two queries are timed, alternately, ``--repeat`` times each:

- ``kafkalog``: ``spark.read.format("kafkalog")...load(logdir)`` to the noop sink;
- ``arrow-replay``: a minimal Python data source whose ``read()`` memory-maps the
  pre-built IPC file of its partition and yields the batches, to the noop sink.

The replay source is the ceiling for any Python data source yielding these rows: Spark's
own cost of taking Arrow batches from a Python worker. The ratio reported is
``kafkalog throughput / replay throughput``, from the best run of each (the least
disturbed by other load on the machine) and from the medians; the target is >= 0.9.

    python bench/bench_read.py [--records 2000000] [--repeat 5] [--codecs none,lz4]
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
    """(log dir, IPC dir) holding the same rows."""
    import pyarrow as pa

    from jobs.make_sample_log import make_sample_log
    from spark_kafkalog.log import LogDirs, read_partition

    logdir = work / f"log-{codec}"
    make_sample_log(logdir, records=records, partitions=partitions, topic="bench",
                    segment_bytes=256 << 20, codecs=(codec,))
    ipc = work / f"ipc-{codec}"
    ipc.mkdir()
    logdirs = LogDirs(str(logdir))
    for p in logdirs.partitions("bench"):
        state = logdirs.state(p)
        with pa.OSFile(str(ipc / f"{p.partition}.arrow"), "wb") as sink:
            writer = None
            for batch in read_partition(logdirs, p, start_offset=state.log_start_offset,
                                        end_offset=state.upper_bound, include_headers=False):
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
    ap.add_argument("--repeat", type=int, default=5)
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
            for _ in range(args.repeat):   # alternate so load changes hit both alike
                a.append(timed(ours(logdir)))
                b.append(timed(replay(ipc)))
            results[codec] = (statistics.median(a), statistics.median(b), a, b)
    finally:
        spark.stop()
        if tmp is not None:
            tmp.cleanup()

    print()
    print(f"{args.records:,} records, {args.partitions} partitions, master {args.master}, "
          f"{args.repeat} alternating runs each")
    print(f"{'codec':6} {'kafkalog rows/s':>16} {'replay rows/s':>14} {'ratio':>6}"
          f" {'median ratio':>13}")
    worst = None
    for codec, (ta, tb, a, b) in results.items():
        best = min(b) / min(a)
        worst = best if worst is None else min(worst, best)
        print(f"{codec:6} {args.records / min(a):16,.0f} {args.records / min(b):14,.0f} "
              f"{best:6.2f} {tb / ta:13.2f}   (kafkalog {', '.join(f'{x:.2f}' for x in a)} s;"
              f" replay {', '.join(f'{x:.2f}' for x in b)} s)")
    print(f"worst ratio {worst:.2f} (target >= 0.9)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
