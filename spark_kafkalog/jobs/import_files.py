#!/usr/bin/env python
"""Import Parquet, JSON, CSV (any Spark file reader) into a topic of a Kafka log dir.

A spark-submit job on the public ``kafkalog`` data source:

    spark-submit jobs/import_files.py --input /data/orders-parquet --path /data/kafka-logs \\
        --topic orders --key order_id --value 'to_json(struct(*))' --codec zstd

Key, value, headers, partition, timestamp (and topic) are each a column name or a SQL
expression over the input's columns; without one, the column of that name is used when
the input has it (``value`` must exist then). A new topic gets ``--partitions`` (by
default the largest partition number written plus one). ``--preserve-offsets`` keeps
each record's offset (and timestamp type) from the ``offset`` (``timestampType``)
columns, as ``export_parquet`` writes them: the job sorts each partition's rows by
offset, and the write fails, writing nothing, if the offsets repeat or fall below the
partition's log end. An export of a topic imported so restores it record for record.
Reading ``export_parquet`` output: its ``topic=``/``date=`` directories become columns
(kept as strings). Prints a one-line summary (rows, partitions, time range, bytes,
rows/s) and, with ``--summary-json``, writes it as JSON; bad input stops the job with a
one-line reason and exit status 2.
"""
from __future__ import annotations

import argparse
import re
import sys
import time

from spark_kafkalog import jobkit

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
#: record fields a column or SQL expression can give
FIELDS = ("key", "value", "headers", "partition", "timestamp", "topic")
_ERROR_RE = re.compile(r"spark_kafkalog\.errors\.(\w+): (.*)")


def parse_args(argv=None) -> argparse.Namespace:
    ap = jobkit.parser(
        "import_files.py", __doc__,
        example="spark-submit jobs/import_files.py --input out/export --format parquet "
                "--path out/restore --preserve-offsets")
    ap.add_argument("--input", required=True, action="append",
                    help="files or directories to read (repeatable; any Spark path)")
    ap.add_argument("--format", default="parquet",
                    help="Spark reader format: parquet (default), json, csv, orc, avro, ...")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="reader option (repeatable), e.g. --option header=true")
    ap.add_argument("--schema", help="reader schema as Spark DDL (json and csv)")
    ap.add_argument("--path", required=True,
                    help="the log dir to write into (local path or pyarrow.fs URI)")
    ap.add_argument("--topic", help="the topic (default: the input's 'topic' column, or "
                                    "--topic-expr)")
    for f in FIELDS:
        what = {"topic": "the topic per row"}.get(f, f"the record's {f}")
        ap.add_argument(f"--{f}" if f != "topic" else "--topic-expr", dest=f"{f}_expr",
                        metavar="EXPR", help=f"column or SQL expression giving {what}")
    ap.add_argument("--codec", default="none", choices=CODECS,
                    help="compression of the written batches (default none)")
    ap.add_argument("--compression-level", type=int, help="codec level")
    ap.add_argument("--batch-size", help="bytes per record batch (default 1m)")
    ap.add_argument("--partitions", type=int,
                    help="partition count of a new topic (default: the largest "
                         "partition written + 1, which costs one more pass over the "
                         "input; 1 without a partition column)")
    ap.add_argument("--preserve-offsets", action="store_true",
                    help="keep each record's 'offset' (and 'timestampType') column")
    ap.add_argument("--offset", dest="offset_expr", metavar="EXPR",
                    help="with --preserve-offsets: column or SQL expression of the offset "
                         "(default: offset)")
    ap.add_argument("--mode", default="append",
                    choices=("append", "overwrite", "errorifexists", "ignore"),
                    help="when the topic exists: append (default), overwrite (replace "
                         "its records), errorifexists, ignore")
    ap.add_argument("--write-option", action="append", default=[], metavar="KEY=VALUE",
                    help="any other kafkalog write option, e.g. segment.bytes=104857600")
    jobkit.add_manifest(ap)
    args = ap.parse_args(argv)
    if args.topic and args.topic_expr:
        raise jobkit.JobInputError("give --topic or --topic-expr, not both")
    if args.offset_expr and not args.preserve_offsets:
        raise jobkit.JobInputError("--offset needs --preserve-offsets")
    if args.partitions is not None and args.partitions < 1:
        raise jobkit.JobInputError(f"--partitions must be >= 1, got {args.partitions}")
    return args


def read_input(spark, args: argparse.Namespace):
    """The input files as a DataFrame (partition directories such as ``topic=``/
    ``date=`` become string columns: no type inference)."""
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    reader = spark.read.format(args.format).options(**jobkit.parse_kv(args.option, "--option"))
    if args.schema:
        reader = reader.schema(args.schema)
    return reader.load(args.input if len(args.input) > 1 else args.input[0])


def _field(df, name: str, expr: str | None, required: bool = False):
    """The column giving ``name``: the expression, else the input's column of that name
    (None when absent and not required)."""
    from pyspark.sql import functions as F

    if expr is not None:
        return F.expr(expr)
    if name in df.columns:
        return F.col(f"`{name}`")
    if required:
        raise jobkit.JobInputError(
            f"the input has no '{name}' column (columns: {', '.join(df.columns[:30])}); "
            f"give --{name} COLUMN_OR_SQL_EXPRESSION")
    return None


def build_frame(df, args: argparse.Namespace):
    """The rows to write, in the writer's columns (key, value, headers, partition,
    timestamp, topic, offset, timestampType), types coerced: integers as epoch-ms
    timestamps, strings parsed as timestamps, partition int, offset long."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = {"value": _field(df, "value", args.value_expr, required=True)}
    for name in ("key", "headers", "partition", "timestamp"):
        c = _field(df, name, getattr(args, f"{name}_expr"))
        if c is not None:
            cols[name] = c
    if args.topic is None:
        cols["topic"] = _field(df, "topic", args.topic_expr, required=False)
        if cols["topic"] is None:
            raise jobkit.JobInputError("no topic: give --topic NAME (or --topic-expr, or an "
                                       "input with a 'topic' column)")
    if args.preserve_offsets:
        cols["offset"] = _field(df, "offset", args.offset_expr, required=True)
        tt = _field(df, "timestampType", None)
        if tt is not None:
            cols["timestampType"] = tt
        if "partition" not in cols and (args.partitions or 1) > 1:
            raise jobkit.JobInputError("--preserve-offsets with several partitions needs a "
                                       "'partition' column (or --partition EXPR)")
    out = df.select(*[c.alias(n) for n, c in cols.items()])
    types = {f.name: f.dataType for f in out.schema.fields}
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (T.BinaryType, T.StringType)):
            raise jobkit.JobInputError(
                f"--{name} gives {types[name].simpleString()}; a record's {name} is binary "
                f"or string (e.g. --{name} 'to_json(struct(*))' or 'cast(x as string)')")
    ts = types.get("timestamp")
    if isinstance(ts, (T.IntegerType, T.LongType, T.ShortType)):
        out = out.withColumn("timestamp", F.timestamp_millis(F.col("timestamp")))
    elif isinstance(ts, (T.StringType, T.DateType)):
        out = out.withColumn("timestamp", F.to_timestamp(F.col("timestamp")))
    elif ts is not None and not isinstance(ts, (T.TimestampType, T.TimestampNTZType)):
        raise jobkit.JobInputError(f"--timestamp gives {ts.simpleString()}; expected a "
                                   "timestamp, epoch milliseconds or an ISO-8601 string")
    casts = {"partition": "int", "offset": "long", "timestampType": "int"}
    for name, to in casts.items():
        if name in types:
            out = out.withColumn(name, F.col(name).cast(to))
    if args.preserve_offsets:
        # each topic-partition whole in one task, in offset order: what the writer needs
        keys = [c for c in ("topic", "partition") if c in out.columns]
        out = (out.repartition(*keys) if keys else out.coalesce(1)) \
            .sortWithinPartitions(*keys, "offset")
    return out


def write_options(args: argparse.Namespace, partitions: int | None) -> dict[str, str]:
    opts = {"path": args.path, "compression": args.codec}
    if args.topic:
        opts["topic"] = args.topic
    if args.compression_level is not None:
        opts["compressionLevel"] = str(args.compression_level)
    if args.batch_size:
        opts["batchSize"] = args.batch_size
    if partitions:
        opts["partitions"] = str(partitions)
    if args.preserve_offsets:
        opts["offsets"] = "preserve"
    if args.mode in ("errorifexists", "ignore"):
        opts["saveMode"] = args.mode
    opts.update(jobkit.parse_kv(args.write_option, "--write-option"))
    return opts


def _metrics(df):
    from pyspark.sql import functions as F

    ts = F.unix_millis(F.col("timestamp")) if "timestamp" in df.columns else F.lit(None)
    part = F.col("partition") if "partition" in df.columns else F.lit(None)
    topic = F.col("topic") if "topic" in df.columns else F.lit(None)
    ts = F.when(ts >= 0, ts)          # -1: NO_TIMESTAMP
    return (F.count(F.lit(1)).alias("rows"),
            F.collect_set(F.struct(topic.alias("topic"), part.alias("partition")))
            .alias("topic_partitions"),
            F.min(ts).alias("first"), F.max(ts).alias("last"))


def _input_bytes(df) -> int | None:
    """Bytes of the files the input was read from (None when they cannot be listed)."""
    import pyarrow.fs as pafs

    try:
        total = 0
        for uri in df.inputFiles():
            fs, path = pafs.FileSystem.from_uri(uri)
            total += fs.get_file_info(path).size or 0
        return total
    except Exception:     # a filesystem pyarrow cannot open here: the summary says "?"
        return None


def _reason(err: BaseException) -> str | None:
    """Our error's one line out of a Spark exception that wraps it (a task's or the
    commit's KafkaLogError reaches the driver as Java exception text)."""
    m = _ERROR_RE.search(str(err))
    return f"{m.group(1)}: {m.group(2).strip()}" if m else None


def run_import(spark, args: argparse.Namespace) -> dict:
    """Read, write and summarize (the session is the caller's)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    src = read_input(spark, args)
    df = build_frame(src, args)
    partitions = args.partitions
    if partitions is None and "partition" in df.columns:
        top = df.agg(F.max("partition")).collect()[0][0]
        partitions = None if top is None else int(top) + 1
    obs = Observation("kafkalog_import")
    observed = df.observe(obs, *_metrics(df))
    t0 = time.perf_counter()
    try:
        observed.write.format("kafkalog").options(**write_options(args, partitions)) \
            .mode("overwrite" if args.mode == "overwrite" else "append").save()
    except Exception as err:
        reason = _reason(err)
        if reason is None:
            raise
        raise jobkit.JobInputError(reason) from None
    seconds = time.perf_counter() - t0
    m = obs.get
    rows = int(m["rows"])
    pairs = {(tp["topic"] if tp["topic"] is not None else args.topic, tp["partition"])
             for tp in m["topic_partitions"] or ()}
    return {
        "path": args.path, "input": args.input, "rows": rows,
        "topics": len({t for t, _ in pairs}), "partitions": len(pairs),
        "first_timestamp": jobkit.iso_ms(m["first"]) if m["first"] is not None else None,
        "last_timestamp": jobkit.iso_ms(m["last"]) if m["last"] is not None else None,
        "input_bytes": _input_bytes(src),
        "offsets": "preserved" if args.preserve_offsets else "assigned",
        "codec": args.codec, "seconds": round(seconds, 3),
        "rows_per_second": jobkit.rate(rows, seconds),
    }


def summary_line(s: dict) -> str:
    size = jobkit.human_bytes(s["input_bytes"]) if s["input_bytes"] is not None else "?"
    return (f"imported {jobkit.plural(s['rows'], 'row')} into "
            f"{jobkit.plural(s['partitions'], 'topic-partition')} "
            f"({jobkit.plural(s['topics'], 'topic')}, {s['first_timestamp']} .. "
            f"{s['last_timestamp']}, offsets {s['offsets']}, codec {s['codec']}) from "
            f"{size} of input to {s['path']} in {s['seconds']:.1f}s "
            f"({s['rows_per_second'] or 0:,} rows/s)")


def main(argv=None) -> int:
    args = parse_args(argv)
    with jobkit.spark_session("kafkalog-import-files") as spark, \
            jobkit.SparkProgress(spark, "import_files", enabled=args.progress):
        summary = run_import(spark, args)
    jobkit.write_manifest(args.manifest, args.path, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("import_files", main))
