#!/usr/bin/env python
"""Export Kafka topics from a log dir to Parquet, partitioned by topic and date.

A spark-submit job that uses only the public ``kafkalog`` data source:

    kafkalog job export_parquet --path /var/lib/kafka/data --topic orders \\
        --output /data/orders-parquet [--value-schema 'id long, amount double']

Reads with Spark's Kafka source options (``--starting-offsets``, ``--ending-offsets``,
``--isolation-level``, read_committed by default, any ``--option key=value``) the
records of ``--topic`` (default: every topic) with ``from <= timestamp < to``, adds a
``date`` column (the record timestamp's UTC day) and writes Parquet under
``<output>/topic=<topic>/date=<yyyy-mm-dd>/``. With ``--value-schema`` (a Spark DDL schema)
the JSON in ``value`` is parsed into top-level columns (records that do not parse get nulls
there; ``--drop-value`` removes the raw bytes); with ``--value-format`` ``avro``,
``protobuf``, ``json`` or ``registry`` (``--key-format``) schema-registry framed values
become a typed struct column, every version of the subject resolved to its latest (the read
options ``valueFormat``, ...); ``--on-decode-error skip`` or ``null`` reads past records that
do not decode, and ``--dead-letter DIR`` writes each of them there raw and whole (topic,
partition, offset, timestamp, key and value bytes, headers, the error, the schema id and
byte position) as Parquet, one file per topic-partition offset range read, named by that
range. The dead letter is written beside DIR while the run goes and takes DIR's place
when the export succeeds (``--mode overwrite``: DIR then holds this run's dead letters
only, so a re-run never duplicates them; other modes add the run's files to DIR, a file
of the same range replaced); a failed or killed run leaves DIR as it was. The run fails
if the records in the dead letter are not exactly the records the read counted as bad.
``--mode overwrite`` (the default) replaces everything under
``<output>``: the new output is written beside it and swapped in when complete, so a failed
or killed run leaves the old one. Records
without a timestamp (Kafka's -1) go under ``date=__HIVE_DEFAULT_PARTITION__`` (a null
date) and are counted in the summary. Prints a one-line summary of what this
run wrote (counted as it was written) and, with ``--summary-json``, writes it as JSON
(rows, topic-partitions, dates, time range, rows/s).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight, _replace

#: where a record without a timestamp (Kafka's -1, every magic 0 message) goes: its
#: ``date`` is null, which Spark writes as ``date=__HIVE_DEFAULT_PARTITION__`` (and reads
#: back as null), not the 1969-12-31 its timestamp column shows
NO_DATE = "__HIVE_DEFAULT_PARTITION__"


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "export_parquet", __doc__,
        example="kafkalog job export_parquet --path sample/kafka-logs "
                "--topic events --output out/export --value-schema "
                "'user_id long, event string, amount double'")
    jobkit.add_log_dirs(ap)
    ap.add_argument("--output", required=True, help="Parquet output directory")
    what = ap.add_mutually_exclusive_group()
    jobkit.add_topics(what, "export", "every topic but internal ones")
    what.add_argument("--topic-pattern", metavar="REGEX",
                      help="every non-internal topic whose whole name matches")
    what.add_argument("--assign", help='JSON topic-partitions, e.g. {"t":[0,1]}')
    # passed to the reader as they are (earliest/latest too), unlike copy_topic's
    ap.add_argument("--starting-offsets", metavar="JSON",
                    help="earliest (default) or Kafka offsets JSON")
    ap.add_argument("--ending-offsets", metavar="JSON",
                    help="latest (default) or Kafka offsets JSON")
    jobkit.add_time_window(ap)
    jobkit.add_isolation_level(ap, "read_committed (default): aborted records and open "
                                   "transactions are not exported")
    ap.add_argument("--include-headers", action="store_true",
                    help="keep record headers (array<struct<key,value>>)")
    ap.add_argument("--value-schema",
                    help="Spark DDL of the JSON values, parsed into columns "
                         "(e.g. 'id long, name string')")
    ap.add_argument("--drop-value", action="store_true",
                    help="with --value-schema: do not keep the raw value bytes")
    jobkit.add_typed_formats(ap)
    jobkit.add_mode(ap, "overwrite", "everything under --output is replaced")
    ap.add_argument("--parquet-compression", dest="compression", default="snappy",
                    metavar="CODEC", help="Parquet compression codec (default snappy)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="any other kafkalog read option (repeatable), e.g. "
                         "--option minPartitions=8")
    for old, new in (("--subscribe", "--topic"), ("--subscribe-pattern", "--topic-pattern"),
                     ("--starting-timestamp", "--from"), ("--ending-timestamp", "--to"),
                     ("--compression", "--parquet-compression")):
        jobkit.alias(ap, old, new)
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def reader_options(args: argparse.Namespace) -> dict[str, str]:
    opts: dict[str, str] = {"path": args.path}
    extra = jobkit.parse_kv(args.option, "--option")
    if args.topic:
        opts["subscribe"] = ",".join(jobkit.topic_list(args.topic))
    elif args.topic_pattern:
        opts["subscribePattern"] = args.topic_pattern
    elif args.assign:
        opts["assign"] = args.assign
    elif not {"subscribe", "subscribePattern", "assign"} & set(extra):
        # every topic: a pattern subscription leaves internal topics out, like Kafka's
        opts["subscribePattern"] = ".*"
    for flag, name in (("starting_offsets", "startingOffsets"),
                       ("ending_offsets", "endingOffsets"),
                       ("isolation_level", "kafka.isolation.level")):
        if getattr(args, flag):
            opts[name] = getattr(args, flag)
    if args.include_headers:
        opts["includeHeaders"] = "true"
    for flag, name in (("value_format", "valueFormat"), ("key_format", "keyFormat"),
                       ("on_decode_error", "onDecodeError"),
                       ("schema_registry_url", "schemaRegistryUrl")):
        if getattr(args, flag, None):
            opts[name] = getattr(args, flag)
    opts.update(extra)
    return opts


def build_frame(spark, args: argparse.Namespace, dead_letter: str | None = None):
    """The frame to write; with ``dead_letter`` (a directory) the read writes the records
    that do not decode there and reads them as null (``--on-decode-error skip`` is then
    applied by :func:`observe_decode_errors`, which counts them first)."""
    from pyspark.sql import functions as F

    opts = reader_options(args)
    if dead_letter is not None:
        opts["onDecodeError"] = "null"
        opts["deadLetterPath"] = dead_letter
    if args.value_schema and args.value_format not in (None, "binary"):
        raise jobkit.JobInputError("--value-schema (JSON values) and --value-format "
                                   f"{args.value_format}: give one")
    df = jobkit.time_window(spark.read.format("kafkalog").options(**opts).load(),
                            args.time_from, args.time_to)
    if args.value_schema:
        from pyspark.sql.types import StructType, _parse_datatype_string

        try:
            schema = _parse_datatype_string(args.value_schema)
        except Exception as err:   # Spark's parser raises its own exception types
            raise jobkit.JobInputError(f"--value-schema is not a Spark DDL schema: "
                             f"{err}") from None
        if not isinstance(schema, StructType):
            raise jobkit.JobInputError("--value-schema must be a struct of fields, "
                             "e.g. 'id long, name string'")
        clash = sorted(set(schema.fieldNames()) & set(df.columns + ["date"]))
        if clash:
            raise jobkit.JobInputError(f"--value-schema fields {clash} clash with the "
                             f"Kafka columns; rename them in the schema")
        parsed = F.from_json(F.col("value").cast("string"), schema,
                             {"mode": "PERMISSIVE"})
        df = df.withColumn("_json", parsed).select(
            *[c for c in df.columns if not (args.drop_value and c == "value")],
            *[F.col("_json").getField(f).alias(f) for f in schema.fieldNames()])
    return df.withColumn("date", F.when(_no_timestamp(), F.lit(None).cast("date"))
                         .otherwise(F.to_date(F.col("timestamp"))))


def _no_timestamp():
    """True for a record without a timestamp: Kafka's -1, which reads as
    1969-12-31T23:59:59.999Z (a broker accepts no other negative timestamp)."""
    from pyspark.sql import functions as F

    return F.unix_millis(F.col("timestamp")) == F.lit(-1)


def _metrics(df):
    """The aggregates of the summary, over ``df`` (the frame being written, or its output
    read back). A row without a date counts as one more date, :data:`NO_DATE`."""
    from pyspark.sql import functions as F

    ts = F.when(~_no_timestamp(), F.unix_micros(F.col("timestamp")))
    return (F.count(F.lit(1)).alias("rows"),
            F.collect_set(F.struct("topic", "partition")).alias("topic_partitions"),
            F.collect_set(F.coalesce(F.col("date").cast("string"), F.lit(NO_DATE)))
            .alias("dates"),
            F.min(ts).alias("first"), F.max(ts).alias("last"),
            F.count_if(_no_timestamp()).alias("no_timestamp"))


def observe(df, fields=()):
    """``df`` with the summary's aggregates computed while it is written (no second pass
    over the log), and the :class:`pyspark.sql.Observation` that holds them afterwards;
    with ``fields`` (``--value-schema``'s), how many rows have each non-null."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    obs = Observation("kafkalog_export")
    filled = [F.count(F.col(f"`{f}`")).alias(f"filled:{f}") for f in fields]
    return df.observe(obs, *_metrics(df), *filled), obs


def observe_decode_errors(df, on_decode_error: str):
    """``df`` (read with onDecodeError=null) with the records that do not decode counted
    while it is written, then left out under ``skip`` (their ``*_error`` columns too);
    and the :class:`pyspark.sql.Observation` holding the count (``decode_errors``)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    errors = [c for c in ("value_error", "key_error") if c in df.columns]
    bad = F.lit(False)
    for c in errors:
        bad = bad | F.col(c).isNotNull()
    obs = Observation("kafkalog_decode_errors")
    df = df.observe(obs, F.count_if(bad).alias("decode_errors"))
    if on_decode_error == "skip":
        df = df.where(~bad).drop(*errors)
    return df, obs


def empty_fields(metrics: dict, fields) -> list[str]:
    """The ``--value-schema`` fields null in every exported row (no JSON value had
    them: a misspelt name, or another case: JSON names are case-sensitive)."""
    if not int(metrics.get("rows") or 0):
        return []
    return [f for f in fields if not int(metrics.get(f"filled:{f}") or 0)]


def _iso_us(micros) -> str | None:
    if micros is None:
        return None
    dt = datetime.fromtimestamp(micros // 1_000_000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{micros % 1_000_000 // 1000:03d}Z"


def summary_of(metrics: dict, output: str, seconds: float) -> dict:
    """The summary from the aggregates of :func:`_metrics` (a Row or a dict)."""
    rows = int(metrics["rows"])
    pairs = {(tp["topic"], tp["partition"]) for tp in metrics["topic_partitions"] or ()}
    dates = sorted(metrics["dates"] or ())
    return {
        "output": output, "rows": rows, "topics": len({t for t, _p in pairs}),
        "partitions": len(pairs), "dates": len(dates),
        "first_date": dates[0] if dates else None,
        "last_date": ([d for d in dates if d != NO_DATE] or [None])[-1],
        "rows_without_timestamp": int(metrics["no_timestamp"] or 0),
        "first_timestamp": _iso_us(metrics["first"]),
        "last_timestamp": _iso_us(metrics["last"]),
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds) if seconds > 0 else None,
    }


def summarize(spark, output: str, seconds: float) -> dict:
    """The summary of what is under ``output`` now, read back from the Parquet."""
    df = spark.read.parquet(output)
    return summary_of(df.agg(*_metrics(df)).collect()[0].asDict(), output, seconds)


def _n(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def summary_line(s: dict) -> str:
    dates = _n(s["dates"], "date")
    if s["dates"]:
        dates += f" {s['first_date']} .. {s['last_date']}" if s["dates"] > 1 else \
            f" {s['first_date']}"
    line = (f"exported {_n(s['rows'], 'row')} from {_n(s['partitions'], 'topic-partition')} "
            f"({_n(s['topics'], 'topic')}, {dates}, {s['first_timestamp']} .. "
            f"{s['last_timestamp']}) to {s['output']} in {s['seconds']:.1f}s"
            + jobkit.rate_text(s["rows"], s["seconds"], "rows"))
    if s["rows_without_timestamp"]:
        line += (f"; {_n(s['rows_without_timestamp'], 'row')} without a timestamp "
                 f"(Kafka's -1) under date={NO_DATE}")
    dead = s.get("dead_letter")
    if dead is not None:
        line += (f"; {_n(dead['records'], 'record')} that did not decode "
                 f"({'skipped' if dead['on_decode_error'] == 'skip' else 'read as null'}) "
                 f"written raw to {dead['path']}")
    return line


def _say(args, line: str) -> None:
    if args.progress:
        print(f"export_parquet: {line}", file=sys.stderr, flush=True)


def _dead_letter_begin(spark, args, run_id: str) -> tuple:
    """(Hadoop files of --dead-letter, the directory this run's tasks write into),
    leftovers of killed runs recovered first."""
    files = _replace.HadoopFiles(spark, args.dead_letter)
    for line in _replace.recover(files, args.dead_letter):
        _say(args, line)
    return files, _replace.sibling(args.dead_letter, _replace.NEW, run_id)


def _dead_letter_publish(files, args, staged: str, run_id: str, decode_errors: int) -> dict:
    """Check the run's dead letter holds exactly the ``decode_errors`` records the read
    counted, then put it in place (module doc); its summary."""
    from spark_kafkalog.errors import InternalError
    from spark_kafkalog.log.read.dead_letter import (
        count_dead_letters,
        open_dead_letter_dir,
        parse_dead_letter_name,
    )

    fs, path = open_dead_letter_dir(staged, option="--dead-letter")
    for rel in files.files_under(staged):
        if parse_dead_letter_name(rel) is None:
            files.delete(f"{staged}/{rel}")     # a killed task attempt's temporary file
    written = count_dead_letters(fs, path)
    if written != decode_errors:
        files.delete(staged)
        raise InternalError(f"--dead-letter: the read counted {decode_errors} records that "
                            f"do not decode but {written} were written to the dead letter; "
                            f"nothing was put in {args.dead_letter}")
    if args.mode == "overwrite":
        _replace.swap_in(files, args.dead_letter, staged, run_id)
    else:
        for rel in files.files_under(staged):
            target = f"{args.dead_letter}/{rel}"
            if files.exists(target):
                files.delete(target)         # the same offset range, read again
            files.move_file(f"{staged}/{rel}", target)
        files.delete(staged)
    return {"path": args.dead_letter, "records": written,
            "on_decode_error": args.on_decode_error}


def main(argv=None) -> int:
    args = parse_args(argv)
    jobkit.check_dead_letter(args)
    if args.dead_letter and "://" not in args.dead_letter:
        # the tasks resolve it too: a relative path would be their working directory's
        args.dead_letter = os.path.abspath(args.dead_letter)
    if _preflight.export(args, reader_options(args)):       # before Spark starts
        summary = summary_of({"rows": 0, "topic_partitions": [], "dates": [], "first": None,
                              "last": None, "no_timestamp": 0}, args.output, 0.0)
        jobkit.emit(summary, f"export_parquet: {args.output} exists (--mode ignore): "
                    "nothing written", args.summary_json)
        return 0
    # Day boundaries in UTC whatever the cluster's default zone (jobkit sets it).
    with jobkit.spark_session("kafkalog-export-parquet", verbose=args.verbose) as spark, \
            jobkit.SparkProgress(spark, "export_parquet", enabled=args.progress):
        files = _replace.HadoopFiles(spark, args.output)
        for line in _replace.recover(files, args.output):     # a killed run's leftovers
            _say(args, line)
        fields = _preflight.value_schema(args.value_schema) if args.value_schema else []
        run_id = _replace.new_run_id()
        dead_files = dead_target = errors_seen = None
        if args.dead_letter:
            dead_files, dead_target = _dead_letter_begin(spark, args, run_id)
            df, errors_seen = observe_decode_errors(
                build_frame(spark, args, dead_target), args.on_decode_error)
        else:
            df = build_frame(spark, args)
        df, observation = observe(df, fields)
        t0 = time.perf_counter()
        target, replacing = args.output, args.mode == "overwrite"
        if replacing:                       # written beside the old output, then swapped
            target = _replace.sibling(args.output, _replace.NEW, run_id)
        try:
            (df.write.mode(args.mode).partitionBy("topic", "date")
             .option("compression", args.compression).parquet(target))
        except Exception:
            if replacing:               # a failed write leaves the old output alone
                files.delete(target)
            if dead_files is not None:
                dead_files.delete(dead_target)
            raise
        dead = None
        if dead_files is not None:
            # checked and put in place before the output: a run killed between the two
            # leaves the new dead letter beside the old output, never the reverse (a
            # re-run replaces both)
            try:
                dead = _dead_letter_publish(dead_files, args, dead_target, run_id,
                                            int(errors_seen.get["decode_errors"] or 0))
            except Exception:
                if replacing:
                    files.delete(target)
                raise
        if replacing:
            _replace.swap_in(files, args.output, target, run_id)
        seconds = time.perf_counter() - t0
        metrics = observation.get
        summary = summary_of(metrics, args.output, seconds)
        if dead is not None:
            summary["dead_letter"] = dead
        absent = empty_fields(metrics, fields)
    if absent:
        summary["value_fields_never_present"] = absent
        print(f"export_parquet: warning: --value-schema field{'s' if len(absent) > 1 else ''}"
              f" {', '.join(repr(f) for f in absent)} not in any exported JSON value (null "
              "in every row; JSON names are case-sensitive)", file=sys.stderr, flush=True)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("export_parquet", main))
