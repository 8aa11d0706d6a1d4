"""A report on a whole log dir: per topic and partition records, bytes, segments, codecs,
time range, producers, transactions, distinct keys and compaction ratio, and every
problem ``kafkalog verify`` finds; as a terminal table, JSON, and a self-contained HTML
page with charts (:mod:`spark_kafkalog.report_html`).

Each partition's numbers come from :func:`spark_kafkalog.log.diagnose.stats.partition_stats`
(one task per partition: ``kafkalog report`` runs them in local processes,
``jobs/log_report.py`` as Spark tasks); :func:`build_report` combines them (a topic's
distinct keys from the merged sketches of its partitions).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import time
from typing import Callable, Iterable, Sequence, TextIO

from spark_kafkalog._console import format_table, human_bytes, iso_ms, plural
from spark_kafkalog.log.diagnose.distinct import HyperLogLog
from spark_kafkalog.log.diagnose.findings import ERROR
from spark_kafkalog.log.diagnose.stats import partition_stats
from spark_kafkalog.log.io import write_local_atomic

__all__ = ["collect_stats", "build_report", "render_text", "write_outputs",
           "add_arguments", "add_scan_flags", "run_cli", "DESCRIPTION"]

DESCRIPTION = ("One pass over the partitions of a log dir (in parallel): per topic and "
               "partition records, bytes, segments, codecs, time range, producers, "
               "transactions, distinct keys (estimated), compaction ratio and every problem "
               "`kafkalog verify` finds; a table, JSON (--json / --output-json) and an HTML "
               "page with charts (--html).")


def _one(args) -> dict:
    logdirs, p, kwargs = args
    return partition_stats(logdirs, p, **kwargs)


def collect_stats(logdirs, partitions: Sequence, *, jobs: int | None = None,
                  progress: Callable[[int, int], None] | None = None, **kwargs) -> list[dict]:
    """:func:`partition_stats` of every partition, in ``jobs`` local processes (default:
    one per CPU; 1: in this process), in the order given. ``progress(done, total)`` is
    called as partitions finish. Keywords go to :func:`partition_stats`."""
    parts = list(partitions)
    jobs = min(jobs or os.cpu_count() or 1, max(len(parts), 1))
    tasks = [(logdirs, p, kwargs) for p in parts]
    out: list[dict] = []
    if jobs <= 1:
        for i, t in enumerate(tasks):
            out.append(_one(t))
            if progress is not None:
                progress(i + 1, len(parts))
        return out
    ctx = multiprocessing.get_context("fork" if os.name == "posix" else "spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        for i, stats in enumerate(pool.map(_one, tasks)):
            out.append(stats)
            if progress is not None:
                progress(i + 1, len(parts))
    return out


def _sum_into(target: dict, items: dict) -> None:
    for k, v in items.items():
        target[k] = target.get(k, 0) + v


def _skew(values: list[int]) -> float | None:
    mean = sum(values) / len(values) if values else 0
    return round(max(values) / mean, 3) if mean else None


def build_report(partitions: Iterable[dict], *, roots: Sequence[str] = (),
                 generated_ms: int | None = None) -> dict:
    """The whole report from per-partition stats: totals, one entry per topic (its
    partitions' sums, hours merged, distinct keys from the merged sketches, partition
    skew as max / mean of records and of bytes), the partitions (without their sketches)
    and every problem."""
    parts = sorted(partitions, key=lambda s: (s["topic"], s["partition"]))
    topics: dict[str, dict] = {}
    sketches: dict[str, HyperLogLog] = {}
    codecs: dict[str, int] = {}
    for s in parts:
        t = topics.setdefault(s["topic"], {
            "topic": s["topic"], "partitions": 0, "segments": 0, "size_bytes": 0,
            "batches": 0, "records": 0, "keyed_records": 0, "null_key_records": 0,
            "first_timestamp": None, "max_timestamp": None, "codec_bytes": {},
            "hours": {}, "producers": 0, "committed_transactions": 0,
            "aborted_transactions": 0, "errors": 0, "warnings": 0,
            "partition_records": {}, "partition_bytes": {}})
        t["partitions"] += 1
        for k in ("segments", "size_bytes", "batches", "records", "producers",
                  "committed_transactions", "aborted_transactions", "errors", "warnings"):
            t[k] += s[k]
        for k in ("keyed_records", "null_key_records"):
            t[k] += s[k] or 0
        for k, pick in (("first_timestamp", min), ("max_timestamp", max)):
            if s[k] is not None:
                t[k] = s[k] if t[k] is None else pick(t[k], s[k])
        _sum_into(t["codec_bytes"], s["codec_bytes"])
        _sum_into(codecs, s["codec_bytes"])
        for hour, recs, nbytes in s["hours"]:
            cur = t["hours"].setdefault(hour, [0, 0])
            cur[0] += recs
            cur[1] += nbytes
        # compaction keeps each key's last record in each partition: what a topic keeps
        # is the sum of its partitions' distinct keys (one key in several partitions is
        # kept in each), not the distinct keys of the whole topic
        if s.get("distinct_keys") is not None:
            t["kept_by_compaction"] = t.get("kept_by_compaction", 0) + min(
                s["distinct_keys"], s["keyed_records"] or 0)
        t["partition_records"][str(s["partition"])] = s["records"]
        t["partition_bytes"][str(s["partition"])] = s["size_bytes"]
        if s.get("hll"):
            sk = HyperLogLog.from_text(s["hll"])
            if s["topic"] in sketches:
                sketches[s["topic"]].merge(sk)
            else:
                sketches[s["topic"]] = sk
    for name, t in topics.items():
        t["hours"] = [[h, r, b] for h, (r, b) in sorted(t["hours"].items())]
        t["codec_bytes"] = dict(sorted(t["codec_bytes"].items()))
        sk = sketches.get(name)
        t["distinct_keys"] = min(sk.estimate(), t["keyed_records"]) if sk else None
        kept = t.pop("kept_by_compaction", None)
        t["compaction_ratio"] = (round(min(1.0, kept / t["keyed_records"]), 4)
                                 if kept is not None and t["keyed_records"] else None)
        t["skew_records"] = _skew(list(t["partition_records"].values()))
        t["skew_bytes"] = _skew(list(t["partition_bytes"].values()))
    problems = [f for s in parts for f in s["problems"]]
    plain = [{k: v for k, v in s.items() if k != "hll"} for s in parts]
    return {
        "generated_at": iso_ms(generated_ms if generated_ms is not None
                               else int(time.time() * 1000)),
        "roots": list(roots),
        "totals": {"topics": len(topics), "partitions": len(parts),
                   "segments": sum(s["segments"] for s in parts),
                   "size_bytes": sum(s["size_bytes"] for s in parts),
                   "batches": sum(s["batches"] for s in parts),
                   "records": sum(s["records"] for s in parts),
                   "errors": sum(1 for f in problems if f["severity"] == ERROR),
                   "warnings": sum(1 for f in problems if f["severity"] != ERROR)},
        "codec_bytes": dict(sorted(codecs.items())),
        "topics": [topics[k] for k in sorted(topics)],
        "partitions": plain,
        "problems": problems,
    }


def _ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def render_text(report: dict, *, partitions: bool = True, max_problems: int = 50) -> list[str]:
    """The report as aligned text lines (topics, then partitions, then problems)."""
    tot = report["totals"]
    lines = [f"{plural(tot['topics'], 'topic')}, {plural(tot['partitions'], 'partition')}, "
             f"{plural(tot['segments'], 'segment')}, {human_bytes(tot['size_bytes'])}, "
             f"{tot['records']:,} records; {plural(tot['errors'], 'error')}, "
             f"{plural(tot['warnings'], 'warning')}", ""]
    lines += format_table(
        ["TOPIC", "PARTS", "SEGMENTS", "SIZE", "RECORDS", "FIRST", "LAST", "CODECS",
         "KEYS~", "COMPACT", "SKEW", "ABORTED", "PROBLEMS"],
        [(t["topic"], t["partitions"], t["segments"], human_bytes(t["size_bytes"]),
          f"{t['records']:,}", iso_ms(t["first_timestamp"]), iso_ms(t["max_timestamp"]),
          ",".join(t["codec_bytes"]) or "-",
          "-" if t["distinct_keys"] is None else f"{t['distinct_keys']:,}",
          _ratio(t["compaction_ratio"]), _ratio(t["skew_records"]),
          t["aborted_transactions"], t["errors"] + t["warnings"])
         for t in report["topics"]], right=(1, 2, 3, 4, 8, 9, 10, 11, 12))
    if partitions:
        lines.append("")
        lines += format_table(
            ["PARTITION", "SEGMENTS", "SIZE", "RECORDS", "START", "END", "PRODUCERS",
             "KEYS~", "COMPACT", "PROBLEMS"],
            [(f"{s['topic']}-{s['partition']}", s["segments"], human_bytes(s["size_bytes"]),
              f"{s['records']:,}", s["log_start_offset"], s["log_end_offset"],
              s["producers"],
              "-" if s["distinct_keys"] is None else f"{s['distinct_keys']:,}",
              _ratio(s["compaction_ratio"]), s["errors"] + s["warnings"])
             for s in report["partitions"]], right=(1, 2, 3, 4, 5, 6, 7, 8, 9))
    if report["problems"]:
        lines.append("")
        for f in report["problems"][:max_problems]:
            where = ", ".join(str(x) for x in (f["path"], f["position"] is not None and
                                                 f"position {f['position']}",
                                                 f["offset"] is not None and
                                                 f"offset {f['offset']}") if x)
            lines.append(f"{f['severity']}: {f['kind']}: {f['message']} ({where})")
        if len(report["problems"]) > max_problems:
            lines.append(f"... and {len(report['problems']) - max_problems} more "
                         "(see the JSON)")
    return lines


def write_outputs(report: dict, *, json_path: str | None = None,
                  html_path: str | None = None) -> None:
    """Write the report as JSON and/or as the HTML page, each whole: through a temporary
    file beside it, fsynced and renamed (``log.io.write_local_atomic``), so an earlier
    report stays until the new one is complete."""
    if json_path:
        _write_whole(json_path, json.dumps(report, indent=1) + "\n")
    if html_path:
        from spark_kafkalog.report_html import render_html

        _write_whole(html_path, render_html(report))


def _write_whole(path: str, text: str) -> None:
    data = text.encode("utf-8")

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(data)
    write_local_atomic(path, write)


# ---- kafkalog report ------------------------------------------------------------------------
def add_scan_flags(p: argparse.ArgumentParser) -> None:
    """``--no-verify`` and ``--no-keys``, how much a report reads (``kafkalog report`` and
    the log_report job): ``verify=not args.no_verify``, ``decode=keys=not args.no_keys``."""
    p.add_argument("--no-verify", action="store_true",
                   help="skip verify's checks (each partition is read once, not twice)")
    p.add_argument("--no-keys", action="store_true",
                   help="batch headers only: no record decoding, no distinct keys (faster)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``kafkalog report``'s own options (paths, --topic, --json come from cli.py)."""
    p.add_argument("--html", metavar="FILE", help="write the HTML page with charts here")
    p.add_argument("--output-json", metavar="FILE", help="write the JSON report here")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="partitions read in parallel (default: one per CPU)")
    add_scan_flags(p)
    p.add_argument("--no-partitions", action="store_true",
                   help="print the topic table only")


def run_cli(args, logdirs, parts: list, out: TextIO, err: TextIO) -> int:
    """Run ``kafkalog report``: 0, or 1 when verify found an error; 2 when nothing was
    found at the paths."""
    from spark_kafkalog._console import Progress

    if not parts:
        err.write("kafkalog report: no partitions found at the given paths\n")
        return 2
    cum = [0]
    for p in parts:
        cum.append(cum[-1] + p.size_bytes)
    bar = Progress(cum[-1], "report", stream=err, enabled=None if args.progress else False)
    stats = collect_stats(logdirs, parts, jobs=args.jobs, decode=not args.no_keys,
                          keys=not args.no_keys, verify=not args.no_verify,
                          progress=lambda done, _total: bar.update(cum[done]))
    bar.close()
    report = build_report(stats, roots=logdirs.roots)
    write_outputs(report, json_path=args.output_json, html_path=args.html)
    if args.json:
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        for line in render_text(report, partitions=not args.no_partitions):
            out.write(line + "\n")
        for what, path in (("HTML", args.html), ("JSON", args.output_json)):
            if path:
                err.write(f"kafkalog report: {what} written to {path}\n")
    return 1 if report["totals"]["errors"] else 0
