#!/usr/bin/env python
"""Typed Avro values through Spark (issue 38, item 7, the Spark side), in one session.

The records and the schema are bench/bench_avro.py's (a 12-field record: a nested record,
an array, a union with null, a decimal, a timestamp, an enum, a map, primitives), framed
as the schema registry frames them (magic 0, 4-byte id). One log dir holds ``--records``
of them in topic ``events`` (``--partitions`` partitions) and a ``_schemas`` topic with
the schema as subject ``events-value`` version 1, keyed and valued as Confluent's
KafkaStore writes it (tests/typed/registry_records.py); both written by the project's
writer (``log.write.write_table``). Three queries, each to the noop sink, run in rounds
of one of each (the order rotates round by round, so a drift in load hits all alike):

- ``kafkalog``: ``format("kafkalog").option("valueFormat", "avro")``: value a struct
  decoded with the schema the log's ``_schemas`` names;
- ``from_avro``: Spark's own Avro module (spark-avro from Maven Central, ``make
  avro-jars``) over ``format("kafkalog")``'s binary value with the 5-byte frame cut by
  ``substring(value, 6)`` and the schema pinned: what a user does without this project;
- ``arrow-floor``: a trivial Python data source yielding the already-decoded Arrow
  batches of the typed read (our reader's ``read()``, batch for batch, written ahead of
  time to one IPC file per input partition, as bench/bench_read.py's replay source):
  Spark's own cost of taking these typed rows from a Python worker.

A fourth query, ``binary`` (``format("kafkalog")`` with the value left binary), is timed
beside them as a reference, no contender: ``from_avro`` is that read plus Spark's decode.

All three give the same columns; ``kafkalog`` and ``from_avro`` must give the same values
(count and a hash of every value's JSON, checked once before timing). Reported: records/s
of the best run, and per-round ratios (median, range) ``kafkalog / from_avro`` (goal
>= 2) and ``kafkalog / arrow-floor`` (goal >= 0.8). Wall time: Spark's work is spread
over a JVM and Python workers. Run it with ``nice`` on a shared machine:

    make avro-jars && python bench/bench_avro_spark.py [--records 1000000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_avro import SCHEMA, SCHEMA_ID, encode  # noqa: E402

TOPIC = "events"
SUBJECT = f"{TOPIC}-value"
AVRO_JARS = REPO / ".cache" / "spark-avro-jars"
COLUMNS = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def build_log(logdir: Path, records: int, partitions: int) -> None:
    """``_schemas`` (the schema as ``events-value`` v1, id SCHEMA_ID) and ``events``."""
    import numpy as np
    import pyarrow as pa

    from spark_kafkalog.log.write import write_table
    from tests.typed import registry_records as rr

    schema_text = json.dumps(SCHEMA, separators=(",", ":"))
    reg = [(rr.subject_key("CONFIG"), rr.config_value("BACKWARD")),
           (rr.schema_key(SUBJECT, 1), rr.schema_value(SUBJECT, 1, SCHEMA_ID, schema_text))]
    write_table(str(logdir), "_schemas", pa.table({"key": [k for k, _ in reg],
                                                   "value": [v for _, v in reg]}),
                partitions=1, allow_internal_topic=True)
    values = encode(records)
    # contiguous ranges per partition, timestamps increasing with the record number
    part = (np.arange(records, dtype=np.int64) * partitions // records).astype(np.int32)
    ts = 1_704_067_200_000 + np.arange(records, dtype=np.int64)
    write_table(str(logdir), TOPIC, pa.table({"value": values, "timestamp": ts,
                                              "partition": part}),
                partitions=partitions)


def typed_options(logdir: str) -> dict:
    return {"path": logdir, "subscribe": TOPIC, "valueFormat": "avro"}


def build_floor(logdir: str, ipc: Path) -> str:
    """What our reader's ``read()`` yields for the typed read, one IPC file per input
    partition; returns the Spark schema (JSON) those batches carry."""
    import pyarrow as pa

    from spark_kafkalog.spark.datasource import spark_schema
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader
    from spark_kafkalog.spark.typed_read import plan_typed, typed_spark_schema

    opts = parse_read_options(typed_options(logdir))
    typed = plan_typed(opts)
    reader = KafkaLogReader(opts, typed)
    ipc.mkdir()
    for i, part in enumerate(reader.partitions()):
        with pa.OSFile(str(ipc / f"{i:05d}.arrow"), "wb") as sink:
            writer = None
            for batch in reader.read(part):
                if writer is None:
                    writer = pa.ipc.new_file(sink, batch.schema)
                writer.write_batch(batch)
            if writer is not None:
                writer.close()
    return typed_spark_schema(spark_schema(opts.include_headers), typed).json()


def floor_source():
    """The trivial data source (defined here so cloudpickle ships it by value)."""
    from dataclasses import dataclass

    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
    from pyspark.sql.types import StructType

    @dataclass(frozen=True)
    class FilePartition(InputPartition):
        path: str

    class FloorReader(DataSourceReader):
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

    class ArrowFloor(DataSource):
        @classmethod
        def name(cls):
            return "arrowfloor"

        def schema(self):
            return StructType.fromJson(json.loads(self.options["schema"]))

        def reader(self, schema):
            return FloorReader(self.options["path"])

    return ArrowFloor


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", help="keep inputs here (default: a temporary dir)")
    args = ap.parse_args(argv)

    jars = sorted(str(j) for j in AVRO_JARS.glob("*.jar"))
    if not jars:
        sys.exit(f"bench_avro_spark: Spark's Avro module is not in {AVRO_JARS}: run "
                 f"`make avro-jars` (Maven fetches it from Maven Central)")
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
        tmp = tempfile.TemporaryDirectory(prefix="kafkalog-bench-avro-")
        work = Path(tmp.name)
    logdir, ipc = work / "log", work / "ipc"
    t = timed(lambda: build_log(logdir, args.records, args.partitions))
    print(f"log: {args.records:,} records in {args.partitions} partitions in {t:.1f}s",
          flush=True)
    floor_schema = []
    t = timed(lambda: floor_schema.append(build_floor(str(logdir), ipc)))
    print(f"arrow floor: the typed read's batches in {t:.1f}s", flush=True)

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    spark = (SparkSession.builder.master(args.master).appName("kafkalog-bench-avro-spark")
             .config("spark.jars", ",".join(jars))
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(floor_source())
    schema_text = json.dumps(SCHEMA)

    def ours_df():
        return spark.read.format("kafkalog").options(**typed_options(str(logdir))).load()

    def theirs_df():
        raw = spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(logdir))
        return raw.select(*[from_avro(F.expr("substring(value, 6)"), schema_text).alias(c)
                            if c == "value" else c for c in COLUMNS])

    def floor_df():
        return (spark.read.format("arrowfloor").option("path", str(ipc))
                .option("schema", floor_schema[0]).load())

    def binary_df():
        return spark.read.format("kafkalog").option("subscribe", TOPIC).load(str(logdir))

    queries = {"kafkalog": ours_df, "from_avro": theirs_df, "arrow-floor": floor_df,
               "binary": binary_df}
    times = {k: [] for k in queries}
    try:
        def digest(df):
            return df.select(F.count("*"), F.sum(F.hash(F.to_json("value")).cast("long"))).first()

        ours_t = ours_df().schema["value"].dataType.simpleString()
        theirs_t = theirs_df().schema["value"].dataType.simpleString()
        if ours_t != theirs_t:
            print(f"note: value types differ\n  kafkalog  {ours_t}\n  from_avro {theirs_t}")
        a, b = digest(ours_df()), digest(theirs_df())
        n = floor_df().count()
        if a[0] != args.records or tuple(a) != tuple(b) or n != args.records:
            raise SystemExit(f"bench_avro_spark: results differ: kafkalog {tuple(a)}, "
                             f"from_avro {tuple(b)}, floor {n} rows, {args.records} written")
        print(f"checked: kafkalog and from_avro agree on {a[0]:,} values", flush=True)

        def run(name):
            return lambda: queries[name]().write.format("noop").mode("overwrite").save()

        names = list(queries)
        for name in names:                 # warm-up: workers, imports, page cache
            timed(run(name))
        for i in range(args.repeat):       # rotate which goes first
            k = i % len(names)
            for name in names[k:] + names[:k]:
                times[name].append(timed(run(name)))
    finally:
        spark.stop()
        if tmp is not None:
            tmp.cleanup()

    n = args.records
    print()
    print(f"{n:,} records of 12 fields, {args.partitions} partitions, master "
          f"{args.master}, {args.repeat} rounds (order rotating), wall time")
    for name, ts in times.items():
        print(f"  {name:12s} {n / min(ts) / 1e6:6.2f} M records/s (best)  "
              f"{n / statistics.median(ts) / 1e6:6.2f} M/s (median)   "
              f"s: {', '.join(f'{x:.2f}' for x in ts)}")
    for other, goal in (("from_avro", 2.0), ("arrow-floor", 0.8)):
        rounds = sorted(o / k for o, k in zip(times[other], times["kafkalog"]))
        med = statistics.median(rounds)
        best = min(times[other]) / min(times["kafkalog"])
        print(f"  kafkalog / {other}: median round {med:.2f}x "
              f"({rounds[0]:.2f}..{rounds[-1]:.2f}), best-of {best:.2f}x; goal >= {goal}x: "
              f"{'met' if med >= goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
