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

Settings use Kafka's topic config names: ``--set delete.retention.ms=3600000`` for every
topic, and ``--topic-config FILE`` (JSON ``{"topic": {"name": value}}``) per topic; the
command line wins. Records without a key are removed, as Kafka's cleaner does (it counts
them as invalid). Local filesystems only (the swap needs atomic rename).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from spark_kafkalog import jobkit
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.maintain import Compaction, CompactSettings, compact_partition

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


def parse_args(argv=None) -> argparse.Namespace:
    ap = jobkit.parser(
        "compact.py", __doc__,
        example="spark-submit jobs/compact.py --path /backup/kafka-logs --topic orders "
                "--set delete.retention.ms=86400000 --summary-json compact.json")
    ap.add_argument("--path", required=True, help="the log dir (local path)")
    ap.add_argument("--topic", action="append", required=True,
                    help="topic to compact (repeat, or comma-separated)")
    ap.add_argument("--partitions", help="comma-separated partition numbers (default: all)")
    ap.add_argument("--set", action="append", metavar="NAME=VALUE",
                    help=f"a topic config for every topic ({', '.join(CONFIG_NAMES)})")
    ap.add_argument("--topic-config", metavar="FILE",
                    help='JSON {"topic": {"delete.retention.ms": 1000, ...}}')
    ap.add_argument("--upto", type=int, help="clean no segment reaching this offset")
    ap.add_argument("--force", action="store_true",
                    help="clean even when the dirty ratio is below min.cleanable.dirty.ratio")
    ap.add_argument("--now", help="the cleaner's clock (epoch ms or ISO time; default: now)")
    ap.add_argument("--dry-run", action="store_true",
                    help="say what would be cleaned; write nothing")
    jobkit.add_manifest(ap)
    return ap.parse_args(argv)


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


def settings_for(args: argparse.Namespace) -> dict[str, CompactSettings]:
    """Each topic's settings: defaults, then ``--topic-config``, then ``--set``."""
    topics = [t for item in args.topic for t in item.split(",") if t]
    per_topic: dict = {}
    if args.topic_config:
        try:
            with open(args.topic_config) as fh:
                per_topic = json.load(fh)
        except (OSError, ValueError) as err:
            raise jobkit.JobInputError(f"--topic-config {args.topic_config}: {err}") from None
        if not isinstance(per_topic, dict):
            raise jobkit.JobInputError("--topic-config must hold a JSON object")
    common = jobkit.parse_kv(args.set, "--set")
    out = {}
    for t in topics:
        fields: dict = {"upto": args.upto, "force": args.force}
        _apply(fields, per_topic.get(t) or {}, f"--topic-config {t}")
        _apply(fields, common, "--set")
        try:
            out[t] = CompactSettings(**fields)
        except ValueError as err:
            raise jobkit.JobInputError(f"topic {t}: {err}") from None
    return out


def compact(spark, args: argparse.Namespace) -> dict:
    """Run the compaction of ``args`` on ``spark``; returns the summary."""
    settings = settings_for(args)
    now = jobkit.parse_time_ms(args.now, "--now") if args.now else int(time.time() * 1000)
    root = args.path
    known = set(LogDirs(root).topics())
    for t in settings:
        if t not in known:
            raise jobkit.JobInputError(f"topic {t!r} is not in {root}")
    try:
        wanted = None if not args.partitions else [int(x) for x in args.partitions.split(",")]
    except ValueError:
        raise jobkit.JobInputError(f"--partitions {args.partitions!r}: not numbers") from None
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


def summary_line(summary: dict) -> str:
    n, k = summary["partitions"], summary["partitions_cleaned"]
    verb = "would clean" if summary["dry_run"] else "cleaned"
    return (f"compact: {verb} {k} of {jobkit.plural(n, 'partition')} ({n - k} skipped): "
            f"{summary['records_before']:,} -> {summary['records_after']:,} records, "
            f"{jobkit.human_bytes(summary['bytes_before'])} -> "
            f"{jobkit.human_bytes(summary['bytes_after'])} in {summary['seconds']:.1f}s")


def main(argv=None) -> int:
    args = parse_args(argv)
    settings_for(args)                  # bad settings fail before Spark starts
    with jobkit.spark_session("kafkalog-compact") as spark, \
            jobkit.SparkProgress(spark, "compact", enabled=args.progress):
        summary = compact(spark, args)
    jobkit.write_manifest(args.manifest, args.path, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("compact", main))
