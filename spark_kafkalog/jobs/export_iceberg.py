#!/usr/bin/env python
"""Export Kafka topics from a log dir into an Apache Iceberg table, incrementally and
exactly once.

    kafkalog job export_iceberg --path /var/lib/kafka/data --topic orders \\
        --warehouse /data/lake --table kafka.orders

Each run appends what the log holds past the offsets the table already has, in ONE
Iceberg commit whose snapshot summary records the offsets it added
(``kafkalog.offsets``, ``{"topic":{"0":[start,end]}}``) and the next offset of every
topic-partition (``kafkalog.next-offsets``): there is no checkpoint beside the table, a
killed run is re-run as it is, and two runs at once export each record once (the loser
says so). Columns: topic, partition, offset, timestamp, timestampType, key, value
(raw bytes), headers; partitioned by day(timestamp) (``--partition-by``), sort order
partition, offset. The catalog: an embedded SQL catalog on SQLite in ``--warehouse``
(``kafkalog-catalog.db``) unless ``--catalog-uri`` names one (REST ``http(s)://``, or an
SQLAlchemy URI); an ``s3://`` warehouse (with a REST or SQL catalog) is reached with the
reader's ``--fs-option s3.*`` settings, which apply to ``--path`` too. Reads read_committed by default (``--isolation-level``) up to the last
stable offset; ``--remote-storage`` adds the remote tier of tiered storage. No Spark: the
log is read and the Parquet written in this process.
With ``--value-schema 'id long, name string'`` (a Spark DDL) the JSON values are parsed
into those columns beside the raw value (a value that is not JSON of the schema, or a
tombstone, gives nulls), as export_parquet's ``--value-schema`` does with Spark.
With ``--value-format avro`` (``--key-format``; ``registry``) the column is the struct the
subject's latest schema decodes to (schemas from the log dir's ``_schemas`` unless
``--schema-registry-url``; ``--option valueSubject=...`` and the other typed read options
pick another), ``--on-decode-error null`` adds ``value_error``; when the subject's latest
schema has gained fields since the table was created, the run adds them to the table
(rows written before read them as null) before it writes; a change the table cannot take
(a type narrowed or changed to no promotion) is refused before anything is written.
``--on-decode-error skip`` / ``null`` read past records that do not decode, and
``--dead-letter DIR`` writes each of them there raw and whole as Parquet (one file per
topic-partition range of the run, ``<topic>-<partition>-<start>-<end>.parquet``, published
before the table's commit); a re-run after a failed or killed run starts at the same
offsets and replaces that run's files, so nothing is there twice.
Offsets deleted by retention before they were exported fail the run
(``--fail-on-data-loss false`` skips them and lists them in the summary).
``--mode upsert`` (a compacted topic) makes the table hold the latest value per key, as
Kafka's log compaction leaves the topic: each run's last record per key replaces the
row of that key (topic, partition, key: the table's identifier fields; with a typed key,
its bytes in ``key_raw``), a tombstone deletes it, a record without a key is skipped and counted; copy-on-write, one commit per
run. A table keeps the mode it was created with (``kafkalog.mode``): the other is refused
before anything is written. ``--target-file-size`` sets the table's
``write.target-file-size-bytes``, which the export's data files aim at (on disk).
"""
from __future__ import annotations

import sys

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "export_iceberg", __doc__,
        example="kafkalog job export_iceberg --path sample/kafka-logs --topic events "
                "--warehouse out/lake --table kafka.events")
    jobkit.add_log_dirs(ap)
    ap.add_argument("--fs-option", action="append", default=[], metavar="KEY=VALUE",
                    help="filesystem option (repeatable) for --path and --warehouse, as the "
                         "reader takes them: s3.endpoint=..., s3.region=..., "
                         "s3.access_key=..., s3.secret_key=...")
    jobkit.add_topics(ap, "export", "every topic but internal ones")
    ap.add_argument("--table", required=True, metavar="NAMESPACE.NAME",
                    help="the Iceberg table (created when missing)")
    ap.add_argument("--warehouse", required=True, metavar="DIR",
                    help="where the table's files go (and the embedded catalog's SQLite "
                         "file, without --catalog-uri)")
    ap.add_argument("--catalog-uri", metavar="URI",
                    help="a REST catalog (http(s)://...) or an SQLAlchemy URI "
                         "(default: the embedded SQLite catalog in --warehouse)")
    ap.add_argument("--catalog-name", default="kafkalog", help="the catalog's name "
                    "(default kafkalog)")
    ap.add_argument("--catalog-property", action="append", default=[],
                    metavar="KEY=VALUE", help="a pyiceberg catalog property (repeatable), "
                    "e.g. token=..., s3.endpoint=...")
    ap.add_argument("--partition-by", choices=("day", "day,partition", "none"),
                    help="a new table's partitioning: day(timestamp) (default), also by "
                         "Kafka partition, or none; an existing table must match it")
    ap.add_argument("--mode", default="append", choices=("append", "upsert"),
                    help="append (default): every record, the topic's history; upsert: "
                         "the latest value per key, as log compaction leaves a compacted "
                         "topic (tombstones delete; records without a key are skipped)")
    ap.add_argument("--target-file-size", type=_size, metavar="BYTES",
                    help="the table's write.target-file-size-bytes: data files aim at this "
                         "size on disk (e.g. 134217728, 128m; default: the table's, or "
                         "Iceberg's 512m)")
    ap.add_argument("--starting-offsets", metavar="JSON",
                    help="where topic-partitions the table has no offsets of start: "
                         "earliest (default), latest or Kafka offsets JSON; required for a "
                         "table another tool wrote")
    jobkit.add_isolation_level(ap, "read_committed (default): aborted records and open "
                                   "transactions are not exported")
    ap.add_argument("--fail-on-data-loss", default="true", choices=("true", "false"),
                    help="offsets deleted before they were exported: fail (default) or "
                         "skip them")
    ap.add_argument("--remote-storage", metavar="URI",
                    help="the remote tier's root (tiered storage, KIP-405): export both "
                         "tiers")
    ap.add_argument("--remote-layout", metavar="TEMPLATE",
                    help="with --remote-storage: the remote objects' path template "
                         "(default LocalTieredStorage's)")
    ap.add_argument("--value-schema", metavar="DDL",
                    help="Spark DDL of JSON values, parsed into columns beside the raw "
                         "value (e.g. 'id long, name string')")
    jobkit.add_typed_formats(ap)
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a typed read option (repeatable): "
                         f"{', '.join(TYPED_OPTIONS)}")
    ap.add_argument("--window-records", type=int, default=None, metavar="N",
                    help="offsets read and written per window (memory bound; default "
                         "500000)")
    return ap


#: the typed read options ``--option`` takes: the Spark reader's names -> the library's
#: keywords (``lake.iceberg_typed.typed_records``); True: an integer
TYPED_OPTIONS = {f"{c}{what}": (f"{c}_{kw}", whole) for c in ("value", "key")
                 for what, kw, whole in (("Subject", "subject", False),
                                         ("SchemaVersion", "schema_version", True),
                                         ("SchemaId", "schema_id", True),
                                         ("Schema", "schema", False),
                                         ("Framing", "framing", False))}
TYPED_OPTIONS["schemaRegistryTopic"] = ("schema_registry_topic", False)


def typed_keywords(args) -> dict:
    """The keywords of ``typed_records`` the flags and ``--option``s give."""
    out = {"value_format": args.value_format or "binary",
           "key_format": args.key_format or "binary",
           "on_decode_error": args.on_decode_error,
           "schema_registry_url": args.schema_registry_url}
    for name, text in jobkit.parse_kv(args.option, "--option").items():
        if name not in TYPED_OPTIONS:
            raise jobkit.JobInputError(f"--option {name}: not a typed read option (one of "
                                       f"{', '.join(TYPED_OPTIONS)})")
        keyword, whole = TYPED_OPTIONS[name]
        try:
            out[keyword] = int(text) if whole else text
        except ValueError:
            raise jobkit.JobInputError(f"--option {name}: expected an integer, got "
                                       f"{text!r}") from None
    return out


def _size(text: str) -> int:
    """``134217728``, ``128m``, ``64k``, ``1g`` (powers of 1024) -> bytes."""
    import argparse

    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b").removesuffix("i")
    try:
        n = int(t[:-1]) * units[t[-1]] if t and t[-1] in units else int(t)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"not a positive size in bytes: {text!r} (e.g. "
                                         "134217728 or 128m)")
    return n


def _starting(text: str | None):
    if text is None or text in ("earliest", "latest"):
        return text
    from spark_kafkalog.lake.iceberg_table import parse_offsets_json

    return parse_offsets_json(text, "--starting-offsets")


def summary_line(s: dict) -> str:
    if s["status"] == "nothing-new":
        return f"export_iceberg: {s['table']}: nothing new past the table's offsets"
    if s["status"] == "already-exported":
        return f"export_iceberg: {s['table']}: {s['notes'][0]}"
    if s["mode"] == "upsert":
        line = (f"upserted {s['records']:,} records into {s['table']}: {s['rows']:,} "
                f"latest rows added, {s['rows_removed']:,} replaced or deleted "
                f"({s['tombstones']:,} tombstones), {s['files_rewritten']} data files "
                f"rewritten, {s['files']} written ({jobkit.human_bytes(s['bytes'])}) in "
                f"{s['seconds']:.1f}s, snapshot {s['snapshot_id']}")
        if s["null_keys"]:
            line += f"; {s['null_keys']:,} records without a key skipped"
        return line
    line = (f"exported {s['rows']:,} rows ({s['files']} data files, "
            f"{jobkit.human_bytes(s['bytes'])}) from {s['topic_partitions']} "
            f"topic-partitions to {s['table']} in {s['seconds']:.1f}s, snapshot "
            f"{s['snapshot_id']}")
    if s["lost"]:
        line += (f"; offsets deleted before export skipped in {len(s['lost'])} "
                 "partitions (see --summary-json)")
    dead = s.get("dead_letter")
    if dead is not None:
        n = dead["records"]
        line += (f"; {n:,} record{'' if n == 1 else 's'} that did not decode written raw "
                 f"to {dead['path']}")
    return line


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    jobkit.check_dead_letter(args)
    if args.window_records is not None and args.window_records < 1:
        raise jobkit.JobInputError("--window-records must be positive")
    fs_options = jobkit.parse_kv(args.fs_option, "--fs-option")
    logdirs = _preflight.source_log_dirs(args.path, fs_options=fs_options or None,
                                         include_internal=False)
    present = _user_topics(logdirs)
    topics = jobkit.chosen_topics(args.topic, present, args.path, present)
    if not topics:
        raise jobkit.JobInputError(f"--path {args.path} holds no topic to export")
    starting = _starting(args.starting_offsets)
    say = (lambda line: print(f"export_iceberg: {line}", file=sys.stderr, flush=True)) \
        if args.progress else None

    from spark_kafkalog.lake import export_topics, open_catalog
    from spark_kafkalog.lake.iceberg import DEFAULT_WINDOW_RECORDS
    from spark_kafkalog.lake.iceberg_table import open_table
    from spark_kafkalog.lake.iceberg_typed import typed_records

    # every check (typed read, catalog, table, schema, offsets) before a file is written;
    # the typed read first: every writer schema resolved before the catalog is touched
    if args.mode == "upsert" and args.isolation_level == "read_uncommitted":
        raise jobkit.JobInputError("--mode upsert holds what compaction leaves, never an "
                                   "aborted record: leave out --isolation-level "
                                   "read_uncommitted")
    shape = _json_shape(args) if args.value_schema is not None else typed_records(
        logdirs, topics, remote_storage=args.remote_storage,
        remote_layout=args.remote_layout, mode=args.mode, **typed_keywords(args))
    catalog = open_catalog(args.warehouse, args.catalog_uri, args.catalog_name,
                           jobkit.parse_kv(args.catalog_property, "--catalog-property"),
                           filesystem_options=fs_options)
    table = open_table(catalog, args.table, shape, partition_by=args.partition_by,
                       target_file_size=args.target_file_size)
    result = export_topics(logdirs, topics, catalog, table, args.table,
                           starting_offsets=starting, isolation_level=args.isolation_level,
                           fail_on_data_loss=args.fail_on_data_loss == "true",
                           window_records=args.window_records or DEFAULT_WINDOW_RECORDS,
                           remote_storage=args.remote_storage,
                           remote_layout=args.remote_layout, shape=shape, progress=say,
                           dead_letter=args.dead_letter)
    summary = result.summary()
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


def _json_shape(args):
    """``--value-schema``: the shaper that parses JSON values by it (checked without a
    JVM by ``jobs._ddl``); refused with a typed format."""
    from spark_kafkalog.jobs._ddl import DDLError, arrow_schema
    from spark_kafkalog.lake.iceberg_json import JsonValueRecords

    typed = [f"--{c}-format {v}" for c, v in (("value", args.value_format),
                                              ("key", args.key_format))
             if v not in (None, "binary")]
    if typed or args.option or args.on_decode_error:
        given = typed[0] if typed else "--option" if args.option else "--on-decode-error"
        raise jobkit.JobInputError(f"--value-schema (JSON values) and {given}: give one")
    try:
        schema = arrow_schema(args.value_schema)
    except DDLError as err:
        raise jobkit.JobInputError(f"--value-schema is not a schema the export takes: "
                                   f"{err} (e.g. 'id long, name string')") from None
    return JsonValueRecords(schema, args.mode)


def _user_topics(logdirs) -> list[str]:
    """The non-internal topics of ``logdirs``."""
    from spark_kafkalog.log import is_internal_topic

    return [t for t in logdirs.topics() if not is_internal_topic(t)]


if __name__ == "__main__":
    sys.exit(jobkit.run("export_iceberg", main))
