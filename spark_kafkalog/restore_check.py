"""The restore jobs' retention warning (copy_topic, import_files): restored records older
than the target topic's ``retention.ms`` are deleted by a broker soon after it starts
serving the log (its first retention check, ``log.initial.task.delay.ms`` after start,
then every ``log.retention.check.interval.ms``), so the job says so, one line on stderr
and a ``retention_warnings`` entry in the summary. What would go is decided as the broker
decides it (:func:`spark_kafkalog.log.maintain.retention.expired_on_start`).
"""
from __future__ import annotations

import argparse
import sys
from typing import Iterable, TextIO

from spark_kafkalog._console import human_bytes, iso_ms
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.maintain.retention import DEFAULT_RETENTION_MS, expired_on_start


def add_argument(ap: argparse.ArgumentParser) -> None:
    """``--retention-ms``: the target topic's retention.ms the check assumes."""
    ap.add_argument("--retention-ms", type=int, default=DEFAULT_RETENTION_MS,
                    metavar="MS",
                    help="retention.ms of the topic the restored log will be served as "
                         f"(default {DEFAULT_RETENTION_MS}, Kafka's 7 days; -1: none): "
                         "records older than it are warned about, since a broker deletes "
                         "them soon after it starts")


def expired(path: str, topics: Iterable[str], retention_ms: int, *,
            now_ms: int | None = None) -> list[dict]:
    """Per topic of ``path`` with segments a broker would delete by ``retention_ms``:
    ``{topic, retention_ms, segments, bytes, partitions, newest_timestamp, log_start}``
    (``log_start``: partition -> the log start offset the broker moves to)."""
    if retention_ms < 0:
        return []
    logdirs = LogDirs(path, include_internal=True)
    out = []
    for topic in sorted(set(topics)):
        parts = expired_on_start(logdirs, topic, retention_ms, now_ms=now_ms)
        if not parts:
            continue
        gone = [d for pr in parts for d in pr.deleted]
        out.append({"topic": topic, "retention_ms": retention_ms, "segments": len(gone),
                    "bytes": sum(d["size"] for d in gone), "partitions": len(parts),
                    "newest_timestamp": max(d["largest_timestamp"] for d in gone),
                    "log_start": {pr.partition: pr.new_log_start for pr in parts}})
    return out


def warning_line(job: str, w: dict) -> str:
    return (f"{job}: warning: {w['topic']}: {w['segments']} segment(s) "
            f"({human_bytes(w['bytes'])}, {w['partitions']} partition(s), newest record "
            f"{iso_ms(w['newest_timestamp'])}) hold only records older than retention.ms "
            f"{w['retention_ms']}: a broker serving this log deletes them at its first "
            "retention check after it starts; raise the topic's retention.ms before "
            f"starting it (kafka-configs.sh --alter --entity-type topics --entity-name "
            f"{w['topic']} --add-config retention.ms=-1), or pass --retention-ms with "
            "the topic's value")


def warn(job: str, path: str, topics: Iterable[str], retention_ms: int, summary: dict,
         *, now_ms: int | None = None, stderr: TextIO | None = None) -> list[dict]:
    """Check ``topics`` of the written log dir ``path``: one stderr line per topic with
    expiring records, and ``summary["retention_warnings"]`` (empty when none)."""
    found = expired(path, topics, retention_ms, now_ms=now_ms)
    summary["retention_warnings"] = found
    for w in found:
        print(warning_line(job, w), file=stderr or sys.stderr, flush=True)
    return found
