#!/usr/bin/env python
"""Stream read throughput of ``readStream.format("kafkalog")`` against the batch read.

A log of ``--records`` records (default 2,000,000) over ``--partitions`` partitions is
generated with ``jobs/make_sample_log.py``. In ONE Spark session three queries are timed
``--repeat`` times each, in rounds (the order rotates round by round, so a drift in
machine load hits all alike), all into the noop sink:

- ``batch``: ``spark.read.format("kafkalog")`` of the log;
- ``stream-1``: ``readStream`` from earliest with ``trigger(availableNow=True)``: one
  micro-batch holding the whole log (a fresh checkpoint each run);
- ``stream-10``: the same with ``maxOffsetsPerTrigger`` = records / 10: ten micro-batches.

- ``floor-1`` / ``floor-10``: the same queries over a Python streaming source that does
  nothing (no rows, no I/O) in 1 and 10 micro-batches: what pyspark's Python-source
  machinery (a source-runner process per query, offset/commit logs, triggers) costs by
  itself. ``batch / (batch + floor)`` is the ratio no Python stream source can beat.

Ratios are batch time / stream time per round (target: >= 0.9 for one micro-batch,
>= 0.75 for ten), reported as the median over rounds. Then the idle poll: the driver-side
cost of one ``latestOffset`` over a ``--poll-partitions``-partition log where nothing
changed (target <= 10 ms), measured without Spark. On a shared machine the numbers are
noisy: trust the round ratios over absolute times.

    python bench/bench_read_stream.py [--records 2000000] [--repeat 3]
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


def idle_poll_ms(work: Path, partitions: int, polls: int = 200) -> tuple[float, float]:
    """(median, p90) ms of an idle ``latestOffset`` over ``partitions`` partitions."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark_kafkalog.jobs.make_sample_log import make_sample_log
    from spark_kafkalog.spark.datasource import KafkaLogDataSource

    logdir = work / "poll-log"
    make_sample_log(logdir, records=partitions * 100, partitions=partitions, topic="idle",
                    codecs=("none",))
    r = KafkaLogDataSource({"path": str(logdir), "subscribe": "idle",
                            "startingOffsets": "earliest"}).streamReader(None)
    end = r.latestOffset(r.initialOffset(), ReadAllAvailable())
    time.sleep(0.2)                 # past the racy window of the files just written
    r.latestOffset(end, ReadAllAvailable())
    times = []
    for _ in range(polls):
        t0 = time.perf_counter()
        same = r.latestOffset(end, ReadAllAvailable())
        times.append((time.perf_counter() - t0) * 1000)
        assert same is end
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


def register_floor_source(spark) -> None:
    """A streaming source with the same pyspark interfaces as ours that reads nothing:
    ``batches`` micro-batches under AvailableNow, one per trigger, each of ``tasks``
    input partitions that yield no rows (so each trigger runs a Spark job of as many
    Python tasks as ours)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
    from pyspark.sql.streaming.datasource import ReadAllAvailable, SupportsTriggerAvailableNow

    class FloorReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
        def __init__(self, batches, tasks):
            self.batches, self.tasks = batches, tasks

        def initialOffset(self):
            return {"n": 0}

        def prepareForTriggerAvailableNow(self):
            pass

        def getDefaultReadLimit(self):
            return ReadAllAvailable()

        def latestOffset(self, start, limit):
            return {"n": min(start["n"] + 1, self.batches)}

        def partitions(self, start, end):
            return [InputPartition(i) for i in range(self.tasks)]

        def read(self, partition):
            return iter(())

    class FloorSource(DataSource):
        @classmethod
        def name(cls):
            return "kafkalog_bench_floor"

        def schema(self):
            return "value binary"

        def streamReader(self, schema):
            return FloorReader(int(self.options.get("batches", "1")),
                               int(self.options.get("tasks", "1")))

    spark.dataSource.register(FloorSource)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codec", default="none")
    ap.add_argument("--poll-partitions", type=int, default=100)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args(argv)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_CONF_DIR", str(REPO / "conf"))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

    from spark_kafkalog.jobs.make_sample_log import make_sample_log

    tmp = tempfile.TemporaryDirectory(prefix="kafkalog-bench-stream-")
    work = Path(tmp.name)
    med_poll, p90_poll = idle_poll_ms(work, args.poll_partitions)
    logdir = str(work / "log")
    make_sample_log(logdir, records=args.records, partitions=args.partitions, topic="bench",
                    segment_bytes=256 << 20, codecs=(args.codec,))

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("kafkalog-bench-read-stream")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register_floor_source(spark)
    runs = [0]
    in_triggers = {1: [], 10: []}     # seconds inside triggers, per timed run

    def batch():
        spark.read.format("kafkalog").option("subscribe", "bench").load(logdir) \
            .write.format("noop").mode("overwrite").save()

    def stream(micro_batches):
        def go():
            runs[0] += 1
            ckpt = work / f"ckpt-{runs[0]}"
            df = spark.readStream.format("kafkalog").option("subscribe", "bench") \
                .option("startingOffsets", "earliest").option("path", logdir)
            if micro_batches > 1:
                df = df.option("maxOffsetsPerTrigger", str(-(-args.records // micro_batches)))
            q = df.load().writeStream.format("noop").option("checkpointLocation", str(ckpt)) \
                .trigger(availableNow=True).start()
            q.awaitTermination()
            n = sum(p["numInputRows"] for p in q.recentProgress)
            batches = len([p for p in q.recentProgress if p["numInputRows"]])
            in_triggers[micro_batches].append(
                sum(p["durationMs"]["triggerExecution"] for p in q.recentProgress) / 1000)
            shutil.rmtree(ckpt, ignore_errors=True)
            if n != args.records:
                raise SystemExit(f"stream read {n} rows, expected {args.records}")
            return batches
        return go

    def floor(micro_batches):
        def go():
            runs[0] += 1
            ckpt = work / f"ckpt-{runs[0]}"
            q = spark.readStream.format("kafkalog_bench_floor") \
                .option("batches", str(micro_batches)) \
                .option("tasks", str(args.partitions)).load() \
                .writeStream.format("noop").option("checkpointLocation", str(ckpt)) \
                .trigger(availableNow=True).start()
            q.awaitTermination()
            shutil.rmtree(ckpt, ignore_errors=True)
        return go

    def timed(fn) -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    queries = {"batch": batch, "stream-1": stream(1), "stream-10": stream(10),
               "floor-1": floor(1), "floor-10": floor(10)}
    times = {k: [] for k in queries}
    try:
        for fn in queries.values():          # warm-up: workers, imports, page cache
            fn()
        for v in in_triggers.values():
            v.clear()
        names = list(queries)
        for i in range(args.repeat):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                times[name].append(timed(queries[name]))
    finally:
        spark.stop()
        tmp.cleanup()

    print(f"{args.records:,} records ({args.codec}), {args.partitions} partitions, master "
          f"{args.master}, {args.repeat} rounds; numbers on a shared machine are noisy")
    for name, ts in times.items():
        print(f"  {name:10} s: {', '.join(f'{t:.2f}' for t in ts)}  "
              f"({args.records / min(ts):,.0f} rows/s best)")
    for name, target in (("stream-1", 0.9), ("stream-10", 0.75)):
        ratios = [b / s for b, s in zip(times["batch"], times[name])]
        bound = [b / (b + f) for b, f in zip(times["batch"], times[name.replace("stream", "floor")])]
        print(f"  {name} / batch throughput: median {statistics.median(ratios):.2f} "
              f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; target >= {target}); "
              f"bound of any Python stream source batch / (batch + floor): median "
              f"{statistics.median(bound):.2f}")
    # what the query costs before its first trigger (pyspark starts a fresh Python
    # process for the source runner of every query) vs the micro-batches themselves
    for name, mb in (("stream-1", 1), ("stream-10", 10)):
        inside = statistics.median(in_triggers[mb])
        total = statistics.median(times[name])
        print(f"  {name}: {inside:.2f} s inside triggers, {total - inside:.2f} s query start/stop "
              f"(median); batch / inside-trigger throughput "
              f"{statistics.median(times['batch']) / inside:.2f}")
    print(f"idle latestOffset over {args.poll_partitions} partitions: median "
          f"{med_poll:.2f} ms, p90 {p90_poll:.2f} ms (target <= 10 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
