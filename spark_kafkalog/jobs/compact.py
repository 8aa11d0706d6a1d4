#!/usr/bin/env python
"""Compact topics of a log dir offline, as a broker's log cleaner would.

A spark-submit job over a log dir at rest (a backup, a copy, a restored dir; never one a
running broker holds -- its ``.lock`` is refused): per partition, one Spark task keeps
the latest record of each key at its offset, removes records of aborted transactions,
keeps tombstones until their delete horizon (``delete.retention.ms`` after the first
cleaning that sees them) and removes them after it, regroups the cleaned segments and
rebuilds their indexes. The active segment (and anything from ``--upto`` on) is left
alone; ``min.cleanable.dirty.ratio`` and ``min.compaction.lag.ms`` are honoured, and a
partition whose oldest dirty data is older than ``max.compaction.lag.ms`` is cleaned
whatever its dirty ratio (Kafka's default, 2**63-1 ms, never forces one). Every
partition's new segments land through the topic's journal: a crash at any point leaves
the old log or the new one, and a reader never sees half of it.

Settings use Kafka's topic config names: ``--config-file FILE`` (JSON ``{"topic":
{"name": value}, "*": {...}}``), ``--set delete.retention.ms=3600000`` for every topic
over it, and ``--topic-config TOPIC:NAME=VALUE`` over both. Records without a key are removed, as Kafka's cleaner does (it counts
them as invalid). Local filesystems only (the swap needs atomic rename).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.maintain import (
    Compaction,
    CompactSettings,
    check_compactable,
    compact_partition,
)

#: Kafka's topic config names -> CompactSettings fields
CONFIG_NAMES = {
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
    "segment.bytes": ("segment_bytes", int),
    "segment.index.bytes": ("max_index_bytes", int),
    "index.interval.bytes": ("index_interval_bytes", int),
}


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser(
        "compact", __doc__,
        example="kafkalog job compact --path /backup/kafka-logs --topic orders "
                "--set delete.retention.ms=86400000 --summary-json compact.json")
    ap.add_argument("--path", required=True, help="the log dir, changed in place (local "
                                                  "path)")
    jobkit.add_topics(ap, "compact", required=True)
    ap.add_argument("--partition", dest="partitions", metavar="LIST",
                    help="only these partitions, e.g. 0,2 (default: all)")
    ap.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help=f"a topic config for every topic ({', '.join(CONFIG_NAMES)})")
    jobkit.add_topic_settings(ap, 'JSON {"topic": {"delete.retention.ms": 1000, ...}, "*": '
                                  '{defaults}}', "NAME")
    ap.add_argument("--upto", type=int, metavar="OFFSET",
                    help="clean no segment reaching this offset")
    ap.add_argument("--force", action="store_true",
                    help="clean even when the dirty ratio is below min.cleanable.dirty.ratio")
    ap.add_argument("--now", metavar="TIME",
                    help="the cleaner's clock (epoch ms or ISO time; default: now)")
    ap.add_argument("--dry-run", action="store_true",
                    help="say what would be cleaned; write nothing")
    jobkit.alias(ap, "--partitions", "--partition")
    jobkit.add_manifest(ap)
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def _apply(fields: dict, configs: dict, where: str) -> None:
    for name, raw in configs.items():
        if name not in CONFIG_NAMES:
            raise jobkit.JobInputError(f"{where}: unknown setting {name!r} (known: "
                                       f"{', '.join(CONFIG_NAMES)})")
        field, kind = CONFIG_NAMES[name]
        try:
            fields[field] = kind(raw)
        except (TypeError, ValueError):
            raise jobkit.JobInputError(f"{where}: {name}={raw!r} is not a "
                                       f"{kind.__name__}") from None


def _config_file(path: str, flag: str) -> dict:
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as err:
        raise jobkit.JobInputError(f"{flag} {path}: {err}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise jobkit.JobInputError(f'{flag} {path}: expected {{"topic": {{"name": value}}, '
                                   '...}')
    return doc


def settings_for(args: argparse.Namespace) -> dict[str, CompactSettings]:
    """Each topic's settings: defaults, then ``--config-file`` (``*``, then the topic),
    then ``--set``, then ``--topic-config``."""
    topics = jobkit.topic_list(args.topic)
    per_topic: dict = {}
    if args.config_file:
        per_topic = _config_file(args.config_file, "--config-file")
    items = []
    for item in args.topic_config:
        _topic, sep, kv = item.partition(":")
        if not (sep and "=" in kv) and os.path.isfile(item):
            # the old spelling: --topic-config FILE
            print("compact: note: --topic-config FILE is now --config-file FILE (the old "
                  "spelling still works)", file=sys.stderr, flush=True)
            per_topic = _config_file(item, "--topic-config")
        else:
            items.append(item)
    overrides = jobkit.topic_overrides(items, "NAME")
    jobkit.check_setting_topics(per_topic, overrides, topics, "compacted")
    common = jobkit.parse_kv(args.set, "--set")
    out = {}
    for t in topics:
        fields: dict = {"upto": args.upto, "force": args.force}
        _apply(fields, per_topic.get("*") or {}, "--config-file *")
        _apply(fields, per_topic.get(t) or {}, f"--config-file {t}")
        _apply(fields, common, "--set")
        _apply(fields, overrides.get(t) or {}, f"--topic-config {t}")
        try:
            out[t] = CompactSettings(**fields)
        except ValueError as err:
            raise jobkit.JobInputError(f"topic {t}: {err}") from None
    return out


def _partition_numbers(args: argparse.Namespace) -> list[int] | None:
    try:
        return None if not args.partitions else [int(x) for x in args.partitions.split(",")]
    except ValueError:
        raise jobkit.JobInputError(f"--partition {args.partitions!r}: not numbers") from None


def compact(spark, args: argparse.Namespace) -> dict:
    """Run the compaction of ``args`` on ``spark``; returns the summary."""
    settings = settings_for(args)
    now = jobkit.parse_time_ms(args.now, "--now") if args.now else int(time.time() * 1000)
    root = args.path
    known = set(LogDirs(root).topics())
    for t in settings:
        if t not in known:
            raise jobkit.JobInputError(f"topic {t!r} is not in {root}")
    wanted = _partition_numbers(args)
    t0 = time.monotonic()
    results = []
    sc = spark.sparkContext
    dry = args.dry_run
    for topic, s in settings.items():
        with Compaction(root, topic, dry_run=dry) as c:
            parts = c.partitions()
            if wanted is not None:
                missing = sorted(set(wanted) - set(parts))
                if missing:
                    raise jobkit.JobInputError(f"partitions {missing} of {topic!r} are "
                                               f"not in {root}")
                parts = [q for q in parts if q in wanted]
            c.begin()
            got = sc.parallelize(parts, max(len(parts), 1)).map(
                lambda q, topic=topic, s=s: compact_partition(
                    root, topic, q, s, now_ms=now, dry_run=dry)).collect()
            c.commit(got)
            results.extend(got)
        if args.progress:
            print(f"compact: {topic}: {len(got)} partitions "
                  f"{'examined' if dry else 'done'}", file=sys.stderr, flush=True)
    cleaned = [r for r in results if r.skipped is None]
    return {
        "path": root, "dry_run": dry, "now_ms": now,
        "seconds": round(time.monotonic() - t0, 3),
        "topics": sorted(settings), "partitions": len(results),
        "partitions_cleaned": len(cleaned),
        "records_before": sum(r.records_before for r in cleaned),
        "records_after": sum(r.records_after for r in cleaned),
        "bytes_before": sum(r.bytes_before for r in cleaned),
        "bytes_after": sum(r.bytes_after for r in cleaned),
        "per_partition": [vars(r) for r in results],
    }


def skip_reasons(summary: dict) -> str:
    """Why partitions were skipped: ``topic-P: reason``, the same reason counted once
    with the partitions it applies to."""
    by_reason: dict[str, list[str]] = {}
    for r in summary["per_partition"]:
        if r.get("skipped"):
            by_reason.setdefault(r["skipped"], []).append(f"{r['topic']}-{r['partition']}")
    return "; ".join(f"{', '.join(parts[:5])}{' ...' if len(parts) > 5 else ''}: {reason}"
                     for reason, parts in by_reason.items())


def summary_line(summary: dict) -> str:
    n, k = summary["partitions"], summary["partitions_cleaned"]
    verb = "would clean" if summary["dry_run"] else "cleaned"
    why = skip_reasons(summary)
    return (f"compact: {verb} {k} of {jobkit.plural(n, 'partition')} ({n - k} skipped"
            f"{': ' + why if why else ''}): "
            f"{summary['records_before']:,} -> {summary['records_after']:,} records, "
            f"{jobkit.human_bytes(summary['bytes_before'])} -> "
            f"{jobkit.human_bytes(summary['bytes_after'])} in {summary['seconds']:.1f}s")


def main(argv=None) -> int:
    args = parse_args(argv)
    settings = settings_for(args)       # bad settings fail before Spark starts
    if args.now:
        jobkit.parse_time_ms(args.now, "--now")
    parts = _partition_numbers(args)
    _preflight.compact(args, list(settings), parts)
    if os.path.isdir(args.path):        # legacy (v0/v1) message sets are refused too
        for topic in settings:
            check_compactable(args.path, topic, parts)
    with jobkit.spark_session("kafkalog-compact", verbose=args.verbose) as spark, \
            jobkit.SparkProgress(spark, "compact", enabled=args.progress):
        summary = compact(spark, args)
    jobkit.write_manifest(args.manifest, args.path, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("compact", main))
