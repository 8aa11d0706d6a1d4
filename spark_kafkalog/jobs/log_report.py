#!/usr/bin/env python
"""Report on a whole Kafka log dir with Spark: per topic and partition records, bytes,
segments, codecs, time range, producers, transactions, distinct keys (estimated),
compaction ratio, and every problem `kafkalog verify` finds.

    kafkalog job log_report --path /backup/kafka-logs --html report.html \\
        [--json report.json] [--topic orders,clicks] [--no-verify] [--no-keys]

One Spark task per partition (``--tasks N`` packs them into N tasks by size), each
computing the library's per-partition statistics
(``spark_kafkalog.log.diagnose.stats.partition_stats``: one scan of the batches, the keys
hashed into a HyperLogLog sketch) and verify's checks; the driver combines them (a
topic's distinct keys from its partitions' merged sketches) and prints the topic table,
writes the JSON and a self-contained HTML page with charts (records and bytes per hour
per topic, bytes by codec, partition skew) that opens offline in any browser. The same
report without Spark: ``kafkalog report PATH --html FILE``. Exit status 1 when verify finds
an error, as ``kafkalog report``.
"""
from __future__ import annotations

import argparse
import sys
import time

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.diagnose.stats import partition_stats
from spark_kafkalog.report import add_scan_flags, build_report, render_text, write_outputs

EXAMPLE = ("kafkalog job log_report --path sample/kafka-logs --html out/report.html "
           "--json out/report.json")


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser("log_report", __doc__, example=EXAMPLE)
    jobkit.add_log_dirs(ap, "log dir(s)")
    jobkit.add_topics(ap, "report on", "every topic, internal ones included")
    ap.add_argument("--html", metavar="FILE", help="write the HTML page here")
    ap.add_argument("--json", metavar="FILE", help="write the JSON report here")
    ap.add_argument("--tasks", type=int, default=None, metavar="N",
                    help="pack the partitions into N Spark tasks (default: one per "
                         "partition)")
    add_scan_flags(ap)
    jobkit.add_fs_option(ap)
    ap.add_argument("--quiet", action="store_true", help="no topic table on stdout")
    jobkit.alias(ap, "--topics", "--topic")
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def pack(parts: list, tasks: int | None) -> list[list]:
    """Partitions grouped into ``tasks`` groups of similar total size (largest first,
    each to the lightest group); one group per partition when ``tasks`` is None."""
    if not tasks or tasks >= len(parts):
        return [[p] for p in parts]
    groups: list[list] = [[] for _ in range(tasks)]
    load = [0] * tasks
    for p in sorted(parts, key=lambda p: -p.size_bytes):
        i = load.index(min(load))
        groups[i].append(p)
        load[i] += p.size_bytes
    return [g for g in groups if g]


def stats_task(logdirs: LogDirs, group: list, decode: bool, verify: bool) -> list[dict]:
    """What one Spark task computes: the statistics of its partitions."""
    return [partition_stats(logdirs, p, decode=decode, keys=decode, verify=verify)
            for p in group]


def select(args: argparse.Namespace) -> tuple[LogDirs, list]:
    """The log dirs and the partitions to report on (checked before Spark starts)."""
    if args.tasks is not None and args.tasks < 1:
        raise jobkit.JobInputError(f"--tasks must be at least 1, not {args.tasks}")
    logdirs = LogDirs(args.path, jobkit.parse_kv(args.fs_option, "--fs-option"),
                      include_internal=True)
    present = logdirs.topics()
    topics = jobkit.chosen_topics(args.topic, present, args.path, present)
    parts = [p for t in topics for p in logdirs.partitions(t)]
    if not parts:
        raise jobkit.JobInputError(f"no partitions found in {args.path}")
    return logdirs, parts


def run_report(spark, args: argparse.Namespace, selected=None) -> dict:
    """The report of ``args.path``, one Spark task per group of partitions."""
    logdirs, parts = selected or select(args)
    groups = pack(parts, args.tasks)
    decode, verify = not args.no_keys, not args.no_verify
    stats = (spark.sparkContext.parallelize([(logdirs, g) for g in groups], len(groups))
             .flatMap(lambda item: stats_task(item[0], item[1], decode, verify))
             .collect())
    return build_report(stats, roots=logdirs.roots)


def summary_of(report: dict, args: argparse.Namespace, seconds: float) -> dict:
    tot = report["totals"]
    return {"path": args.path, **tot, "html": args.html, "json": args.json,
            "seconds": round(seconds, 3),
            "bytes_per_second": jobkit.rate(tot["size_bytes"], seconds)}


def summary_line(s: dict) -> str:
    outputs = " and ".join(x for x in (s["html"], s["json"]) if x)
    return (f"reported {jobkit.plural(s['partitions'], 'partition')} of "
            f"{jobkit.plural(s['topics'], 'topic')} ({s['records']:,} records, "
            f"{jobkit.human_bytes(s['size_bytes'])}, "
            f"{jobkit.plural(s['segments'], 'segment')}) in {s['path']}: "
            f"{jobkit.plural(s['errors'], 'error')}, "
            f"{jobkit.plural(s['warnings'], 'warning')}, in {s['seconds']:.1f}s"
            + (f"; wrote {outputs}" if outputs else ""))


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()
    _preflight.report(args)
    selected = select(args)
    with jobkit.spark_session("kafkalog-log-report", verbose=args.verbose) as spark, \
            jobkit.SparkProgress(spark, "log_report", enabled=args.progress):
        report = run_report(spark, args, selected)
    write_outputs(report, json_path=args.json, html_path=args.html)
    if not args.quiet:
        for line in render_text(report, partitions=False):
            print(line)
    summary = summary_of(report, args, time.monotonic() - t0)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    # as `kafkalog report` (and verify): the data has problems
    return jobkit.EXIT_DATA if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(jobkit.run("log_report", main))
