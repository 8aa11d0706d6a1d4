#!/usr/bin/env python
"""Apply Kafka's delete retention to a log dir at rest: whole segments go by
retention.ms and retention.bytes, as a broker's log manager decides.

    kafkalog job retention --path /backup/kafka-logs --retention-ms 604800000 \\
        [--topic orders,clicks] [--topic-config orders:retention.bytes=1073741824] \\
        [--config-file retention.json] [--dry-run]

Per topic, oldest segment first: segments below the log start offset, then segments
while the log stays at or above retention.bytes without them, then segments whose
largest timestamp is more than retention.ms before now (``--now``); never the active
segment nor past the high watermark; -1 disables a limit. The log-start-offset
checkpoint moves first (each partition's leader-epoch-checkpoint is then truncated from
it, as a broker does), then the segments' files are renamed to ``.deleted`` and removed
``file.delete.delay.ms`` later (the job waits for it unless ``--no-wait``; the next run
removes what is left), so a reader holding the old view finishes it. Runs under the
topic's writer lock and refuses a log dir a running broker holds. ``--config-file``
holds ``{"topic": {"retention.ms": N, "retention.bytes": N}, "*": {...defaults}}``;
``--topic-config TOPIC:KEY=VALUE`` overrides it. Needs no Spark session (it moves files,
it reads no records), so it also runs as a plain Python script.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from spark_kafkalog import jobkit
from spark_kafkalog.jobs import _preflight
from spark_kafkalog.log import LogDirs, is_internal_topic
from spark_kafkalog.log.maintain.retention import (
    DEFAULT_FILE_DELETE_DELAY_MS,
    DEFAULT_RETENTION_MS,
    RetentionConfig,
    apply_retention,
    purge_deleted,
)

EXAMPLE = ("kafkalog job retention --path sample/kafka-logs --retention-ms 86400000 "
           "--topic-config events:retention.bytes=1000000 --dry-run")


def build_parser() -> jobkit.JobParser:
    ap = jobkit.parser("retention", __doc__, example=EXAMPLE)
    jobkit.add_log_dirs(ap, "log dir(s), changed in place")
    jobkit.add_topics(ap, "apply retention to", "every topic but internal ones")
    ap.add_argument("--retention-ms", type=int, default=DEFAULT_RETENTION_MS,
                    help=f"default retention.ms (-1: no time limit; default "
                         f"{DEFAULT_RETENTION_MS}, 7 days)")
    ap.add_argument("--retention-bytes", type=int, default=-1,
                    help="default retention.bytes per partition (-1, the default: none)")
    ap.add_argument("--file-delete-delay-ms", type=int, default=DEFAULT_FILE_DELETE_DELAY_MS,
                    help="how long renamed .deleted files stay for readers (default "
                         f"{DEFAULT_FILE_DELETE_DELAY_MS})")
    jobkit.add_topic_settings(ap, 'per-topic settings: {"topic": {"retention.ms": N, ...}, '
                                  '"*": {defaults}}', "KEY")
    ap.add_argument("--now", metavar="TIME", help="the time retention.ms counts back from (epoch ms or "
                                  "ISO-8601; default: now)")
    ap.add_argument("--dry-run", action="store_true", help="list what would go; change "
                                                           "nothing")
    ap.add_argument("--no-wait", action="store_true",
                    help="do not wait file.delete.delay.ms to remove the .deleted files "
                         "(the next run removes them)")
    ap.add_argument("--lock-timeout", type=float, default=600.0,
                    help="seconds to wait for a writer holding a topic (default 600)")
    jobkit.alias(ap, "--topics", "--topic")
    jobkit.add_manifest(ap)
    return ap


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def topic_configs(args: argparse.Namespace, topics: list[str]) -> dict[str, RetentionConfig]:
    """Each topic's settings: command-line defaults < the file's ``*`` < the file's
    topic entry < ``--topic-config``."""
    try:
        base = RetentionConfig(args.retention_ms, args.retention_bytes,
                               args.file_delete_delay_ms)
    except ValueError as err:
        raise jobkit.JobInputError(str(err)) from None
    doc: dict = {}
    # not compact's _config_file, whose one-liners differ: here an unreadable file fails
    # as the OSError it is, and bad JSON says "not JSON"
    if args.config_file:
        try:
            with open(args.config_file) as f:
                doc = json.load(f)
        except ValueError as err:
            raise jobkit.JobInputError(f"--config-file {args.config_file}: not JSON "
                                       f"({err})") from None
        if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
            raise jobkit.JobInputError(f"--config-file {args.config_file}: expected "
                                       '{"topic": {"retention.ms": N, ...}, ...}')
    overrides = jobkit.topic_overrides(args.topic_config, "KEY")
    jobkit.check_setting_topics(doc, overrides, topics, "retained")
    out = {}
    for t in topics:
        try:
            cfg = RetentionConfig.from_mapping(doc.get("*", {}), base)
            cfg = RetentionConfig.from_mapping(doc.get(t, {}), cfg)
            out[t] = RetentionConfig.from_mapping(overrides.get(t, {}), cfg)
        except ValueError as err:
            raise jobkit.JobInputError(f"topic {t}: {err}") from None
    return out


def summary_line(s: dict) -> str:
    verb = "would delete" if s["dry_run"] else "deleted"
    line = (f"retention {verb} {jobkit.plural(s['segments_deleted'], 'segment')} "
            f"({jobkit.human_bytes(s['bytes_deleted'])}) from "
            f"{jobkit.plural(s['partitions_changed'], 'partition')} of "
            f"{jobkit.plural(s['topics'], 'topic')} in {s['path']} "
            f"({s['segments_kept']} segments kept) in {s['seconds']:.1f}s")
    if s.get("files_waiting"):
        line += f"; {s['files_waiting']} .deleted files left for the next run"
    return line


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()
    now_ms = jobkit.parse_time_ms(args.now, "--now") if args.now else int(time.time() * 1000)
    _preflight.retention(args)
    logdirs = LogDirs(args.path)
    present = logdirs.topics()
    topics = jobkit.chosen_topics(args.topic, present, args.path,
                                  [t for t in present if not is_internal_topic(t)])
    configs = topic_configs(args, topics)
    partitions, renamed_at = [], {}
    for t in topics:
        plans = apply_retention(logdirs, t, configs[t], now_ms=now_ms, dry_run=args.dry_run,
                                lock_timeout=args.lock_timeout)
        n = sum(len(p.deleted) for p in plans)
        if args.progress:
            print(f"retention: {t}: {jobkit.plural(n, 'segment')} "
                  f"{'to delete' if args.dry_run else 'deleted'}", file=sys.stderr, flush=True)
        for p in plans:
            d = p.to_dict()
            d["config"] = {"retention.ms": configs[t].retention_ms,
                           "retention.bytes": configs[t].retention_bytes}
            partitions.append(d)
        if n and not args.dry_run:
            renamed_at[t] = time.monotonic()
    waiting = 0
    if not args.dry_run:
        for t in topics:
            delay = configs[t].file_delete_delay_ms
            if t in renamed_at and not args.no_wait:
                left = delay / 1000 - (time.monotonic() - renamed_at[t])
                if left > 0:        # said even without --progress: a silent wait looks hung
                    print(f"retention: {t}: waiting {left:.0f}s (file.delete.delay.ms) "
                          "before removing the .deleted files (--no-wait leaves them to the "
                          "next run)", file=sys.stderr, flush=True)
                    time.sleep(left)
            waiting += purge_deleted(logdirs, t, delay_ms=delay)[2]
    deleted = [d for p in partitions for d in p["deleted"]]
    summary = {
        "path": args.path, "dry_run": args.dry_run, "now_ms": now_ms,
        "topics": len(topics), "partitions": len(partitions),
        "partitions_changed": sum(1 for p in partitions if p["deleted"]),
        "segments_deleted": len(deleted), "bytes_deleted": sum(d["size"] for d in deleted),
        "segments_kept": sum(p["segments"] - len(p["deleted"]) for p in partitions),
        "files_waiting": waiting, "seconds": round(time.monotonic() - t0, 3),
        "per_partition": partitions,
    }
    if args.dry_run:
        for p in partitions:
            for d in p["deleted"]:
                print(f"{p['topic']}-{p['partition']}: {d['base_offset']:020d}.log "
                      f"({jobkit.human_bytes(d['size'])}, offsets {d['base_offset']}.."
                      f"{d['next_offset'] - 1}, {d['reason']})")
    if not args.dry_run:
        jobkit.write_manifest(args.manifest, args.path, summary)
    jobkit.emit(summary, summary_line(summary), args.summary_json)
    return 0


if __name__ == "__main__":
    sys.exit(jobkit.run("retention", main))
