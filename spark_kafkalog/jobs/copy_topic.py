#!/usr/bin/env python
"""Copy topics from one Kafka log dir to another: select, window, rename, recompress,
re-partition. The backup/restore job, on the public ``kafkalog`` data source only.

    kafkalog job copy_topic --path /backup/kafka-logs --output /restore/kafka-logs \\
        --topic orders --from 2024-05-01T00:00:00Z --to 2024-05-02T00:00:00Z

What is copied: the selected topics (``--topic``, repeatable, or ``--topic-pattern``, a
regex matched against whole names like Spark's ``subscribePattern``; internal topics only
by name), partitions (``--partition``), an offset range (``--start-offset``/``--end-offset``
or Kafka's offsets JSON) and a time window ``[--from, --to)``: exactly the records with
``from <= timestamp < to`` (records without a timestamp, -1, are in no window).
Transactions are resolved as a ``read_committed`` consumer sees them (aborted records and
markers are left out, their offsets stay gaps) unless ``--isolation-level
read_uncommitted``; the copy holds plain, non-transactional batches.

Offsets are kept (the default): every record keeps its partition, offset, timestamp,
timestamp type and headers (write option ``offsets=preserve``); a window or range leaves
gaps, and each new partition's log starts at its first copied offset, as a broker's would.
``--partitions N`` (N different from the source's count) re-partitions by key with the Java
client's default partitioner (``toPositive(murmur2(key)) % N``) and assigns new offsets
from 0. A null-keyed record goes to ``source partition % N`` (the Java client's sticky
choice is arbitrary; this one is reproducible and keeps a source partition's null-keyed
records together). In each new partition, records are ordered by their source partition's
running maximum timestamp, then source partition, then offset: each source partition's
records keep their order (so every key's records do, when the key lived in one source
partition, as Kafka's partitioner puts it), and partitions are interleaved by time.

``--rename old=new`` gives a topic a new name; ``--compression-type``/``--compression-level``
/``--batch-size`` recompress and rebatch. ``partition.metadata`` (the topic id) is written
only when asked (``--topic-id``, ``--keep-topic-id``): a broker writes it itself when it
takes the partition, and refuses one naming another id than its cluster's topic. A
destination topic must not exist yet. Each topic lands whole or not at all (the writer's
journal). ``--offset-map DIR`` writes Parquet, one row per copied record (``topic,
partition, offset, new_topic, new_partition, new_offset``, for ``consumer_offsets
--translate``); DIR is replaced.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field

from spark_kafkalog import jobkit, restore_check
from spark_kafkalog.jobs import _preflight, _replace
from spark_kafkalog.log.files.partition_metadata import (
    check_topic_id,
    read_topic_id,
    write_topic_id,
)

MAP_COLUMNS = ("topic", "partition", "offset", "new_topic", "new_partition", "new_offset")


#: a problem with the job's arguments or the log dirs, found before copying (the old
#: name of the jobs' one class, which the one-line error names)
BadInput = jobkit.JobInputError


@dataclass
class TopicPlan:
    """How one source topic is copied."""
    source: str
    target: str
    source_partitions: list          # partition numbers present in the source log dir
    partition_count: int             # of the source topic (highest partition + 1)
    repartition: int | None          # new partition count, None: partitions kept
    ending: dict = field(default_factory=dict)     # partition -> pinned ending offset
    topic_id: str | None = None      # written to partition.metadata, None: not written


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "copy_topic", __doc__,
        example="kafkalog job copy_topic --path sample/kafka-logs --output "
                "out/restored --topic events \\\n      --rename events=events-restored "
                "--from 2024-01-01T00:00:00Z --to 2024-01-02T00:00:00Z "
                "--compression-type lz4")
    jobkit.add_log_dirs(ap, "source log dir(s)")
    ap.add_argument("--output", required=True,
                    help="destination log dir (created if missing; its topics must not "
                         "exist yet)")
    jobkit.add_topics(ap, "copy", default=[])
    ap.add_argument("--topic-pattern", metavar="REGEX",
                    help="copy every non-internal topic whose whole name matches")
    ap.add_argument("--partition", metavar="LIST",
                    help="only these partitions of each topic, e.g. 0,2,5-7")
    ap.add_argument("--start-offset", type=int, metavar="N",
                    help="only records with offset >= N (every selected partition)")
    ap.add_argument("--end-offset", type=int, metavar="N",
                    help="only records with offset < N (every selected partition)")
    # not export_parquet's flags: these take offsets JSON only (no earliest/latest), and
    # the partitions left out of --starting-offsets start at the earliest
    ap.add_argument("--starting-offsets", metavar="JSON",
                    help='Kafka offsets JSON of the first offset per partition, e.g. '
                         '{"orders":{"0":100}}')
    ap.add_argument("--ending-offsets", metavar="JSON",
                    help="Kafka offsets JSON of the offset to stop before, per partition")
    jobkit.add_time_window(ap)
    jobkit.add_isolation_level(ap, "read_committed (default): aborted records and open "
                                   "transactions are not copied")
    ap.add_argument("--rename", action="append", default=[], metavar="OLD=NEW",
                    help="write topic OLD as NEW (repeatable)")
    ap.add_argument("--partitions", type=int, metavar="N",
                    help="re-partition every copied topic to N partitions by key "
                         "(new offsets); a topic that has N partitions already keeps its "
                         "partitions and offsets (the default for all)")
    ap.add_argument("--compression-type", dest="codec", default="none", choices=jobkit.CODECS,
                    help="compression of the copy (default none)")
    ap.add_argument("--compression-level", dest="level", type=int,
                    help="compression level (gzip, lz4, zstd)")
    ap.add_argument("--batch-size", metavar="BYTES",
                    help="record batch size, uncompressed (writer's batch.size; default "
                         "1 MiB)")
    ap.add_argument("--segment-bytes", metavar="BYTES",
                    help="segment size (Kafka's segment.bytes; default 1 GiB)")
    ids = ap.add_mutually_exclusive_group()
    ids.add_argument("--topic-id", metavar="UUID",
                     help="write partition.metadata with this topic id (Kafka's base64 "
                          "form, as kafka-topics.sh --describe shows it) into every "
                          "partition of the copy; one topic only")
    ids.add_argument("--keep-topic-id", action="store_true",
                     help="give each copied topic the topic id of its source's "
                          "partition.metadata (restoring into the same cluster)")
    ap.add_argument("--no-fsync", action="store_true",
                    help="do not fsync the copy before it is committed")
    ap.add_argument("--offset-map", metavar="DIR",
                    help="write the old -> new offset of every copied record to DIR "
                         "(Parquet; replaced)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="any other kafkalog read option (repeatable)")
    for old, new in (("--codec", "--compression-type"), ("--level", "--compression-level")):
        jobkit.alias(ap, old, new)
    restore_check.add_argument(ap)
    jobkit.add_manifest(ap)
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    args = (ap := build_parser()).parse_args(argv)
    if not args.topic and not args.topic_pattern:
        ap.error("give --topic or --topic-pattern")
    if args.topic and args.topic_pattern:
        ap.error("--topic and --topic-pattern are exclusive")
    if args.partitions is not None and args.partitions < 1:
        ap.error("--partitions must be at least 1")
    if args.level is not None and args.codec not in ("gzip", "lz4", "zstd"):
        ap.error("--compression-level needs --compression-type gzip, lz4 or zstd")
    return args


# ---- argument values -----------------------------------------------------------------------
def parse_partition_list(text: str) -> list[int]:
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise BadInput(f"--partition: {part!r} is not a partition number or range "
                           "(e.g. 0,2,5-7)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise BadInput(f"--partition: range {part!r} is empty")
        out.update(range(lo, hi + 1))
    return sorted(out)


def parse_renames(items: list[str]) -> dict[str, str]:
    from spark_kafkalog.spark.write_options import validate_topic_name
    from spark_kafkalog import KafkaLogError

    renames: dict[str, str] = {}
    for item in items:
        old, sep, new = item.partition("=")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise BadInput(f"--rename expects OLD=NEW, got {item!r}")
        if old in renames:
            raise BadInput(f"--rename: topic {old!r} renamed twice")
        try:
            validate_topic_name("--rename", new)
        except KafkaLogError as err:
            raise BadInput(str(err)) from None
        renames[old] = new
    return renames


def _offsets_json(text: str | None, flag: str) -> dict[str, dict[int, int]]:
    if not text:
        return {}
    try:
        raw = json.loads(text)
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise BadInput(f'{flag}: not Kafka offsets JSON (e.g. {{"orders":{{"0":23}}}}): '
                       f"{text!r}") from None


# ---- planning (driver, metadata only) ------------------------------------------------------
def plan_topics(args: argparse.Namespace) -> list[TopicPlan]:
    """Which topics go where, checked against both log dirs before anything is copied."""
    from spark_kafkalog import KafkaLogError
    from spark_kafkalog.log import LogDirs, is_internal_topic, latest_offsets

    try:
        src = LogDirs(args.path, include_internal=True)
        available = src.topics()
    except (KafkaLogError, OSError) as err:
        raise BadInput(f"--path: {err}") from None
    if args.topic_pattern:
        try:
            pattern = re.compile(args.topic_pattern)
        except re.error as err:
            raise BadInput(f"--topic-pattern: {err}") from None
        topics = [t for t in available
                  if not is_internal_topic(t) and pattern.fullmatch(t)]
        if not topics:
            raise BadInput(f"--topic-pattern {args.topic_pattern!r} matches no topic in "
                           f"{args.path}")
    else:
        topics = sorted(jobkit.topic_list(args.topic))
        missing = [t for t in topics if t not in available]
        if missing:
            raise BadInput(f"--topic: {', '.join(missing)} not found in {args.path}")
    jobkit.parse_time_window(args.time_from, args.time_to)
    if None not in (args.start_offset, args.end_offset) and \
            args.start_offset >= args.end_offset:
        raise BadInput(f"--start-offset {args.start_offset} is not below --end-offset "
                       f"{args.end_offset}")
    renames = parse_renames(args.rename)
    unknown = sorted(set(renames) - set(topics))
    if unknown:
        raise BadInput(f"--rename: {', '.join(unknown)} is not among the copied topics")
    targets = [renames.get(t, t) for t in topics]
    dup = sorted({t for t in targets if targets.count(t) > 1})
    if dup:
        raise BadInput(f"--rename: several topics would be written to {', '.join(dup)}")
    existing = _existing_topics(args.output)
    clash = sorted(set(targets) & existing)
    if clash:
        raise BadInput(_preflight.topic_exists(
            "--output", clash[0], args.output, "copy into a new topic with --rename, or "
            "remove it first"))
    wanted = parse_partition_list(args.partition) if args.partition else None
    user_end = _offsets_json(args.ending_offsets, "--ending-offsets")
    for flag, given in (("--starting-offsets",
                         _offsets_json(args.starting_offsets, "--starting-offsets")),
                        ("--ending-offsets", user_end)):
        stray = sorted(set(given) - set(topics))
        if stray:
            raise BadInput(f"{flag} names {', '.join(stray)}, which this copy does not "
                           f"copy (it copies {', '.join(topics)})")
    try:
        latest = latest_offsets(src, topics, isolation_level=args.isolation_level)
    except jobkit.DATA_ERRORS:
        raise                   # damaged or lost data: exit 1, the error as it is
    except KafkaLogError as err:
        raise BadInput(f"--path: {err}") from None
    plans = []
    for topic, target in zip(topics, targets):
        present = [p.partition for p in src.partitions(topic)]
        parts = [p for p in present if wanted is None or p in wanted]
        if not parts:
            raise BadInput(f"--partition {args.partition}: topic {topic!r} has partitions "
                           f"{present} here")
        count = present[-1] + 1
        # pinned: a second read (the offset map) sees exactly the records the copy did
        ending = {p: latest[topic][p] for p in parts}
        for p, off in user_end.get(topic, {}).items():
            if p in ending and off >= 0:
                ending[p] = min(ending[p], off)
        repartition = args.partitions if args.partitions not in (None, count) else None
        plans.append(TopicPlan(topic, target, parts, count, repartition, ending,
                               _topic_id(args, src, topic, target)))
    if args.topic_id and len(plans) > 1:
        raise BadInput("--topic-id names the id of one topic; this copy writes "
                       f"{len(plans)} topics")
    return plans


def _topic_id(args: argparse.Namespace, src, topic: str, target: str) -> str | None:
    """The topic id the copy's partition.metadata gets (see --topic-id/--keep-topic-id)."""
    if args.topic_id:
        return check_topic_id(args.topic_id, "--topic-id")
    if not args.keep_topic_id:
        return None
    if target != topic:
        raise BadInput(f"--keep-topic-id: {topic} is renamed to {target}, which Kafka "
                       "knows as another topic with its own id")
    found = {read_topic_id(src.filesystem, p.path) for p in src.partitions(topic)} - {None}
    if len(found) > 1:
        raise BadInput(f"--keep-topic-id: the partitions of {topic} name several topic ids "
                       f"{sorted(found)}")
    return found.pop() if found else None


def _existing_topics(output: str) -> set[str]:
    """The topics already in the destination log dir (none when it does not exist)."""
    import pyarrow.fs as pafs

    from spark_kafkalog import KafkaLogError
    from spark_kafkalog.log import LogDirs, resolve_filesystem

    try:
        fs, root = resolve_filesystem(output)
        info = fs.get_file_info(root)
        if info.type == pafs.FileType.NotFound:
            return set()
        if info.type != pafs.FileType.Directory:
            raise BadInput(f"--output: {output} is not a directory")
        return set(LogDirs(output, include_internal=True).topics())
    except (KafkaLogError, OSError) as err:
        raise BadInput(f"--output: {err}") from None


def reader_options(args: argparse.Namespace, plan: TopicPlan) -> dict[str, str]:
    opts = {"path": args.path, "includeHeaders": "true",
            "kafka.isolation.level": args.isolation_level,
            "assign": json.dumps({plan.source: plan.source_partitions}),
            "endingOffsets": json.dumps({plan.source: {str(p): o for p, o
                                                       in plan.ending.items()}})}
    start = _offsets_json(args.starting_offsets, "--starting-offsets").get(plan.source)
    if start:
        # every copied partition named: the ones the user left out start at the earliest
        opts["startingOffsets"] = json.dumps(
            {plan.source: {str(p): start.get(p, -2) for p in plan.ending}})
    opts.update(jobkit.parse_kv(args.option, "--option"))
    return opts


def writer_options(args: argparse.Namespace, plan: TopicPlan) -> dict[str, str]:
    opts = {"path": args.output, "topic": plan.target, "offsets": "preserve",
            "partitions": str(plan.repartition or plan.partition_count),
            "compression": args.codec, "saveMode": "errorifexists",
            "fsync": "false" if args.no_fsync else "true"}
    if args.level is not None:
        opts["compressionLevel"] = str(args.level)
    if plan.target == plan.source:
        # restoring a broker's internal topic as itself (__consumer_offsets, ...) is
        # deliberate; the writer refuses it otherwise
        opts["allowInternalTopic"] = "true"
    if args.batch_size:
        opts["batch.size"] = args.batch_size
    if args.segment_bytes:
        opts["segment.bytes"] = args.segment_bytes
    return opts


# ---- the frames ----------------------------------------------------------------------------
def source_frame(spark, args: argparse.Namespace, plan: TopicPlan):
    """The selected records of one topic, in the read schema (with headers)."""
    from pyspark.sql import functions as F

    df = spark.read.format("kafkalog").options(**reader_options(args, plan)).load()
    # Pushed down: the reader applies these exactly (a time bound also seeks the time
    # index), so nothing outside the selection is decoded twice.
    if args.start_offset is not None:
        df = df.where(F.col("offset") >= F.lit(args.start_offset))
    if args.end_offset is not None:
        df = df.where(F.col("offset") < F.lit(args.end_offset))
    return jobkit.time_window(df, args.time_from, args.time_to)


def _partitioner(n: int):
    """An Arrow UDF: the partition of each record among ``n``, by the Java client's default
    partitioner; null keys go to ``source partition % n``."""
    from pyspark.sql.functions import arrow_udf

    @arrow_udf("int")
    def new_partition(key, partition):
        import numpy as np
        import pyarrow as pa

        from spark_kafkalog.format import partition_for_keys

        out = partition_for_keys(key, n)
        if key.null_count:
            nulls = key.is_null().to_numpy(zero_copy_only=False)
            src = partition.to_numpy(zero_copy_only=False)
            out = np.where(nulls, src % n, out)
        return pa.array(out.astype(np.int32), pa.int32())

    return new_partition


def repartitioned_frame(df, n: int):
    """``df`` with ``partition``/``offset`` replaced by the new ones (see the module doc)
    and the source's kept as ``src_partition``/``src_offset``. Each new partition ends up in
    one Spark partition, in new-offset order."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ts = F.coalesce(F.unix_millis(F.col("timestamp")), F.lit(-1).cast("long"))
    running = Window.partitionBy("partition").orderBy("offset") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = (df.withColumn("_running_ts", F.max(ts).over(running))
          .withColumn("_new_partition", _partitioner(n)(F.col("key"), F.col("partition"))))
    order = Window.partitionBy("_new_partition").orderBy("_running_ts", "partition", "offset")
    return (df.withColumn("_new_offset", F.row_number().over(order) - F.lit(1).cast("long"))
            .select("key", "value", "headers", "timestamp", "timestampType",
                    F.col("partition").alias("src_partition"),
                    F.col("offset").alias("src_offset"),
                    F.col("_new_partition").alias("partition"),
                    F.col("_new_offset").alias("offset")))


def copy_frame(spark, args: argparse.Namespace, plan: TopicPlan):
    """What is written for one topic: the read frame (offsets kept) or the re-partitioned
    one; the writer takes key, value, headers, partition, offset, timestamp and
    timestampType and ignores the rest."""
    df = source_frame(spark, args, plan)
    if plan.repartition is None:
        return df
    return repartitioned_frame(df, plan.repartition)


def offset_map_frame(spark, args: argparse.Namespace, plan: TopicPlan):
    """One row per record copied for ``plan``, in :data:`MAP_COLUMNS`; the same records as
    the copy (ending offsets are pinned, the new offsets deterministic)."""
    from pyspark.sql import functions as F

    df = copy_frame(spark, args, plan)
    if plan.repartition is None:
        old_p, old_o = F.col("partition"), F.col("offset")
    else:
        old_p, old_o = F.col("src_partition"), F.col("src_offset")
    return df.select(F.lit(plan.source).alias("topic"), old_p.alias("partition"),
                     old_o.alias("offset"), F.lit(plan.target).alias("new_topic"),
                     F.col("partition").alias("new_partition"),
                     F.col("offset").alias("new_offset"))


# ---- running -------------------------------------------------------------------------------
def _metrics():
    from pyspark.sql import functions as F

    ts = F.unix_millis(F.col("timestamp"))
    ts = F.when(ts >= 0, ts)                    # -1: the record has no timestamp
    return (F.count(F.lit(1)).alias("rows"), F.min(ts).alias("first"),
            F.max(ts).alias("last"),
            F.collect_set(F.col("partition")).alias("partitions"))


def _iso(ms) -> str | None:
    return None if ms is None else jobkit.iso_ms(ms)


def write_partition_metadata(output: str, topic: str, topic_id: str) -> None:
    """``partition.metadata`` with ``topic_id`` in every partition dir of ``topic``."""
    from spark_kafkalog.log import LogDirs

    logdirs = LogDirs(output, include_internal=True)
    for p in logdirs.partitions(topic):
        write_topic_id(logdirs.filesystem, p.path, topic_id)


def _log_bytes(output: str, topic: str) -> int:
    from spark_kafkalog.log import LogDirs

    return sum(p.size_bytes for p in LogDirs(output, include_internal=True).partitions(topic))


def copy_topic(spark, args: argparse.Namespace, plan: TopicPlan) -> dict:
    """Copy one topic; returns its part of the summary."""
    from pyspark.sql import Observation

    obs = Observation(f"copy_{plan.source}")
    df = copy_frame(spark, args, plan).observe(obs, *_metrics())
    df.write.format("kafkalog").options(**writer_options(args, plan)).mode("append").save()
    m = obs.get
    if plan.topic_id:
        write_partition_metadata(args.output, plan.target, plan.topic_id)
    return {"topic": plan.source, "new_topic": plan.target,
            "offsets": "preserved" if plan.repartition is None else "assigned",
            "partitions": plan.repartition or plan.partition_count,
            "rows": int(m["rows"]), "partitions_with_rows": len(m["partitions"] or ()),
            "first": m["first"], "last": m["last"],
            "bytes": _log_bytes(args.output, plan.target)}


def run(spark, args: argparse.Namespace, progress=None, plans=None,
        selects: bool | None = True) -> dict:
    """Copy every topic of ``plans`` (default: :func:`plan_topics`), write the offset
    map; returns the summary. ``selects``: whether the preflight found a record in the
    selection (None: it could not tell; then one row is asked for first, and an empty
    selection is refused before anything is written)."""
    say = progress or (lambda msg: None)
    plans = plan_topics(args) if plans is None else plans
    if selects is None and not any(source_frame(spark, args, plan).limit(1).count()
                                   for plan in plans):
        raise BadInput(_preflight.empty_selection(args, [p.source for p in plans]))
    t0 = time.perf_counter()
    topics = []
    for i, plan in enumerate(plans, 1):
        how = (f"re-partitioned to {plan.repartition}" if plan.repartition
               else "offsets kept")
        say(f"[{i}/{len(plans)}] {plan.source} -> {plan.target} ({how}, {args.codec})")
        topics.append(copy_topic(spark, args, plan))
    if args.offset_map:
        say(f"writing the offset map to {args.offset_map}")
        frames = [offset_map_frame(spark, args, p) for p in plans]
        union = frames[0]
        for f in frames[1:]:
            union = union.unionByName(f)
        # written beside the old map and swapped in whole (see _replace)
        _replace.write_replacing(spark, args.offset_map,
                                 lambda target: union.write.parquet(target))
    seconds = time.perf_counter() - t0
    rows = sum(t["rows"] for t in topics)
    firsts = [t["first"] for t in topics if t["first"] is not None]
    lasts = [t["last"] for t in topics if t["last"] is not None]
    summary = {
        "output": args.output, "rows": rows, "topics": len(topics),
        "partitions": sum(t["partitions_with_rows"] for t in topics),
        "first_timestamp": _iso(min(firsts)) if firsts else None,
        "last_timestamp": _iso(max(lasts)) if lasts else None,
        "bytes": sum(t["bytes"] for t in topics),
        "seconds": round(seconds, 3),
        "rows_per_second": jobkit.rate(rows, seconds),
        "offset_map": args.offset_map,
        "per_topic": [{k: v for k, v in t.items() if k not in ("first", "last")}
                      | {"first_timestamp": _iso(t["first"]),
                         "last_timestamp": _iso(t["last"])} for t in topics],
    }
    restore_check.warn("copy_topic", args.output, [p.target for p in plans],
                       args.retention_ms, summary)
    return summary


def summary_line(s: dict) -> str:
    kept = [t for t in s["per_topic"] if t["offsets"] == "preserved"]
    how = ("offsets kept" if len(kept) == len(s["per_topic"]) else
           "re-partitioned, new offsets" if not kept else "some re-partitioned")
    span = (f"{s['first_timestamp']} .. {s['last_timestamp']}" if s["first_timestamp"]
            else "no timestamps")
    return (f"copied {jobkit.plural(s['rows'], 'row')} from "
            f"{jobkit.plural(s['partitions'], 'partition')} "
            f"({jobkit.plural(s['topics'], 'topic')}, {span}, {how}) to {s['output']}: "
            f"{jobkit.human_bytes(s['bytes'])} in {s['seconds']:.1f}s"
            + jobkit.rate_text(s["rows"], s["seconds"], "rows"))


def main(argv=None) -> int:
    args = parse_args(argv)
    _preflight.copy_destination(args)   # no Spark needed: bad input fails fast
    plans = plan_topics(args)
    selects = _preflight.copy(args, plans, reader_options, writer_options)

    def say(msg):
        if args.progress:
            print(f"copy_topic: {msg}", file=sys.stderr, flush=True)

    with jobkit.spark_session("kafkalog-copy-topic", verbose=args.verbose) as spark, \
            jobkit.SparkProgress(spark, "copy_topic", enabled=args.progress):
        summary = run(spark, args, say, plans, selects)
    jobkit.write_manifest(args.manifest, args.output, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("copy_topic", main))
