#!/usr/bin/env python
"""Import Parquet, JSON, CSV (any Spark file reader) into a topic of a Kafka log dir.

A spark-submit job on the public ``kafkalog`` data source:

    kafkalog job import_files --input /data/orders-parquet --output /data/kafka-logs \\
        --topic orders --key order_id --value 'to_json(struct(*))' --compression-type zstd

Key, value, headers, partition, timestamp (and topic) are each a column name or a SQL
expression over the input's columns; without one, the column of that name is used when
the input has it (``value`` must exist then). A new topic gets ``--partitions`` (``N``, or
``TOPIC=N`` per topic; by default each topic's largest partition number written plus one). ``--preserve-offsets`` keeps
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
import sys
import time

from spark_kafkalog import jobkit, restore_check
from spark_kafkalog.jobs import _preflight

#: record fields a column or SQL expression can give
FIELDS = ("key", "value", "headers", "partition", "timestamp", "topic")


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "import_files", __doc__,
        example="kafkalog job import_files --input out/export --input-format parquet "
                "--output out/restore --preserve-offsets")
    ap.add_argument("--input", required=True, action="append",
                    help="files or directories to read (repeatable; any Spark path)")
    ap.add_argument("--input-format", dest="format", default="parquet", metavar="FORMAT",
                    help="Spark reader format: parquet (default), json, csv, orc, avro, ...")
    ap.add_argument("--input-option", dest="option", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="reader option (repeatable), e.g. --input-option header=true")
    ap.add_argument("--input-schema", dest="schema", metavar="DDL",
                    help="reader schema as Spark DDL (json and csv)")
    ap.add_argument("--output", dest="path", required=True,
                    help="the log dir to write into (local path or pyarrow.fs URI)")
    ap.add_argument("--topic", help="the topic (default: the input's 'topic' column, or "
                                    "--topic-expr)")
    for f in FIELDS:
        what = {"topic": "the topic per row"}.get(f, f"the record's {f}")
        flag = f"--{f}-expr" if f in ("topic", "partition") else f"--{f}"
        ap.add_argument(flag, dest=f"{f}_expr", metavar="EXPR",
                        help=f"column or SQL expression giving {what}")
    ap.add_argument("--compression-type", dest="codec", default="none",
                    choices=jobkit.CODECS,
                    help="compression of the written batches (default none)")
    ap.add_argument("--compression-level", type=int, help="codec level")
    ap.add_argument("--batch-size", metavar="BYTES",
                    help="bytes per record batch, uncompressed (default 1m)")
    ap.add_argument("--segment-bytes", metavar="BYTES",
                    help="segment size (Kafka's segment.bytes; default 1g)")
    ap.add_argument("--partitions", action="append", metavar="N|TOPIC=N",
                    help="partition count of a new topic: N for every topic, TOPIC=N for "
                         "one (repeatable; default: each topic's largest partition "
                         "written + 1, which costs one more pass over the input; 1 "
                         "without a partition column)")
    ap.add_argument("--preserve-offsets", action="store_true",
                    help="keep each record's 'offset' (and 'timestampType') column")
    ap.add_argument("--offset-expr", dest="offset_expr", metavar="EXPR",
                    help="with --preserve-offsets: column or SQL expression of the offset "
                         "(default: offset)")
    jobkit.add_mode(ap, "append", "replace the topic's records")
    ap.add_argument("--write-option", action="append", default=[], metavar="KEY=VALUE",
                    help="any other kafkalog write option, e.g. segment.bytes=104857600")
    for old, new in (("--path", "--output"), ("--format", "--input-format"),
                     ("--option", "--input-option"), ("--schema", "--input-schema"),
                     ("--partition", "--partition-expr"), ("--offset", "--offset-expr"),
                     ("--codec", "--compression-type")):
        jobkit.alias(ap, old, new)
    restore_check.add_argument(ap)
    jobkit.add_manifest(ap)
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.topic and args.topic_expr:
        raise jobkit.JobInputError("give --topic or --topic-expr, not both")
    if args.offset_expr and not args.preserve_offsets:
        raise jobkit.JobInputError("--offset-expr needs --preserve-offsets")
    args.partitions_default, args.partitions_by_topic = \
        _preflight.partition_counts(args.partitions)
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
            f"give --{name}{'-expr' if name in ('offset', 'partition', 'topic') else ''} "
            "COLUMN_OR_SQL_EXPRESSION")
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
        if "partition" not in cols and max([args.partitions_default or 1,
                                            *args.partitions_by_topic.values()]) > 1:
            raise jobkit.JobInputError("--preserve-offsets with several partitions needs a "
                                       "'partition' column (or --partition-expr EXPR)")
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
    if args.segment_bytes:
        opts["segmentBytes"] = args.segment_bytes
    if partitions:
        opts["partitions"] = str(partitions)
    if args.preserve_offsets:
        opts["offsets"] = "preserve"
        # a restore (of an export, say of __consumer_offsets) is a deliberate write: the
        # preflight refuses an internal topic as the target of anything else
        opts["allowInternalTopic"] = "true"
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


def partition_counts(df, args: argparse.Namespace) -> dict:
    """Each topic written -> the partition count it gets if it is new: ``--partitions
    TOPIC=N``, else ``--partitions N``, else its own largest partition written + 1 (one
    pass over the input), else 1. Keyed by None when ``--topic`` names the one topic."""
    from pyspark.sql import functions as F

    if args.topic:
        topics = [args.topic]
    else:
        topics = sorted(r[0] for r in df.select("topic").distinct().collect()
                        if r[0] is not None)
    given = {t: args.partitions_by_topic.get(t, args.partitions_default) for t in topics}
    top: dict = {}
    if "partition" in df.columns and any(n is None for n in given.values()):
        if args.topic:
            top[args.topic] = df.agg(F.max("partition")).collect()[0][0]
        else:
            top = {r[0]: r[1] for r in df.groupBy("topic").agg(F.max("partition"))
                   .collect()}
    return {t: n if n is not None else (None if top.get(t) is None else int(top[t]) + 1)
            for t, n in given.items()}


def run_import(spark, args: argparse.Namespace) -> dict:
    """Read, write and summarize (the session is the caller's). Several topics are
    written one after the other, each with its own partition count."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    src = read_input(spark, args)
    df = build_frame(src, args)
    counts = partition_counts(df, args)
    unknown = sorted(set(args.partitions_by_topic) - set(counts))
    if unknown:
        raise jobkit.JobInputError(f"--partitions names {', '.join(unknown)}, which the "
                                   "input does not write")
    t0 = time.perf_counter()
    observations = []
    for topic, partitions in counts.items():
        part = df if args.topic else df.where(F.col("topic") == topic).drop("topic")
        obs = Observation(f"kafkalog_import_{len(observations)}")
        observed = part.observe(obs, *_metrics(part))
        opts = write_options(args, partitions)
        opts["topic"] = topic
        observed.write.format("kafkalog").options(**opts) \
            .mode("overwrite" if args.mode == "overwrite" else "append").save()
        observations.append((topic, obs.get))
    seconds = time.perf_counter() - t0
    rows = sum(int(m["rows"]) for _t, m in observations)
    pairs = {(t, tp["partition"]) for t, m in observations
             for tp in m["topic_partitions"] or ()}
    firsts = [m["first"] for _t, m in observations if m["first"] is not None]
    lasts = [m["last"] for _t, m in observations if m["last"] is not None]
    summary = {
        "path": args.path, "input": args.input, "rows": rows,
        "topics": len({t for t, _ in pairs}), "partitions": len(pairs),
        "partition_counts": counts,
        "first_timestamp": jobkit.iso_ms(min(firsts)) if firsts else None,
        "last_timestamp": jobkit.iso_ms(max(lasts)) if lasts else None,
        "input_bytes": _input_bytes(src),
        "offsets": "preserved" if args.preserve_offsets else "assigned",
        "codec": args.codec, "seconds": round(seconds, 3),
        "rows_per_second": jobkit.rate(rows, seconds),
    }
    restore_check.warn("import_files", args.path, {t for t, _ in pairs}, args.retention_ms,
                       summary)
    return summary


def summary_line(s: dict) -> str:
    size = jobkit.human_bytes(s["input_bytes"]) if s["input_bytes"] is not None else "?"
    return (f"imported {jobkit.plural(s['rows'], 'row')} into "
            f"{jobkit.plural(s['partitions'], 'topic-partition')} "
            f"({jobkit.plural(s['topics'], 'topic')}, {s['first_timestamp']} .. "
            f"{s['last_timestamp']}, offsets {s['offsets']}, codec {s['codec']}) from "
            f"{size} of input to {s['path']} in {s['seconds']:.1f}s"
            + jobkit.rate_text(s["rows"], s["seconds"], "rows"))


def main(argv=None) -> int:
    args = parse_args(argv)
    if _preflight.import_files(args, write_options(args, None)):     # before Spark starts
        print(f"import_files: topic {args.topic} exists in {args.path} (--mode ignore): "
              "nothing written", flush=True)
        return 0
    with jobkit.spark_session("kafkalog-import-files", verbose=args.verbose) as spark, \
            jobkit.SparkProgress(spark, "import_files", enabled=args.progress):
        summary = run_import(spark, args)
    jobkit.write_manifest(args.manifest, args.path, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("import_files", main))
