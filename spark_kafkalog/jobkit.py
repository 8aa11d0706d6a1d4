"""What every spark-submit job in ``jobs/`` shares: its argument parser (with an example),
progress a person can watch on stderr, the summary (one line on stdout and, with
``--summary-json``, a JSON file) and the one-line reason and non-zero exit on bad input.

A job is written as::

    def main(argv=None) -> int:
        args = jobkit.parser("copy_topic.py", __doc__, example="...").parse_args(argv)
        with jobkit.spark_session("kafkalog-copy-topic") as spark, \\
                jobkit.SparkProgress(spark, "copy_topic"):
            ...
        jobkit.emit(summary, line, args.summary_json)
        return 0

    if __name__ == "__main__":
        sys.exit(jobkit.run("copy_topic", main))
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Callable, Iterator, Sequence, TextIO

from ._console import human_bytes, iso_ms, plural
from .errors import KafkaLogError

__all__ = ["JobInputError", "SparkProgress", "add_log_dirs", "add_manifest", "emit",
           "write_manifest", "human_bytes", "iso_ms",
           "parse_kv", "parse_time_ms", "parser", "plural", "rate", "run",
           "spark_session"]

#: exit status of a job stopped by bad input (argparse's own usage errors exit 2 too)
EXIT_BAD_INPUT = 2


class JobInputError(KafkaLogError, ValueError):
    """A job's arguments or input cannot be used; the message is the one line shown."""


def parser(prog: str, doc: str | None, example: str) -> argparse.ArgumentParser:
    """An argument parser whose description is the first paragraph of ``doc`` and whose
    ``--help`` ends with ``example``; it has ``--summary-json`` and ``--no-progress``."""
    description = (doc or "").strip().split("\n\n")[0]
    ap = argparse.ArgumentParser(prog=prog, description=description,
                                 epilog=f"Example:\n  {example}",
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summary-json", metavar="FILE",
                    help="also write the summary to this JSON file")
    ap.add_argument("--no-progress", dest="progress", action="store_false",
                    help="do not print progress lines on stderr")
    return ap


def add_log_dirs(ap: argparse.ArgumentParser, what: str = "log dir(s) to read") -> None:
    """The required ``--path``: one or more log dirs (a broker's ``log.dirs`` entry or a
    copy of it), comma-separated, local paths or pyarrow.fs URIs."""
    ap.add_argument("--path", required=True,
                    help=f"{what}: a broker's log.dirs entry or a copy of it "
                         "(comma-separated; local path or any pyarrow.fs URI)")


def add_manifest(ap: argparse.ArgumentParser) -> None:
    """``--manifest FILE``: a manifest of the log dir the job wrote (``kafkalog verify
    --against FILE`` proves a copy of it whole, or names what the copy lacks)."""
    ap.add_argument("--manifest", metavar="FILE",
                    help="write a manifest of the output log dir to FILE when done (every "
                         "file's size and SHA-256, segments' offsets and records, "
                         "checkpoint entries): `kafkalog verify COPY --against FILE` audits "
                         "a copy")


def write_manifest(file: str | None, path: str, summary: dict) -> None:
    """With ``--manifest FILE``: the manifest of the log dir(s) ``path``, into FILE; the
    summary names it."""
    if not file:
        return
    from .log import LogDirs
    from .log.diagnose.manifest import write_manifest as write

    doc = write(LogDirs(path, include_internal=True), file)
    summary["manifest"] = {"path": file, "files": len(doc["files"])}


def parse_kv(items: Sequence[str] | None, flag: str) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}``; anything else is a JobInputError
    naming ``flag``."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise JobInputError(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def parse_time_ms(text: str, flag: str) -> int:
    """Epoch milliseconds from an integer (epoch ms) or an ISO-8601 time (UTC when it
    names no zone), as the time-window options of the jobs take them."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise JobInputError(f"{flag}: {text!r} is neither epoch milliseconds nor an "
                            f"ISO-8601 time such as 2024-05-01T12:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def rate(count: int, seconds: float) -> int | None:
    """``count`` per second, rounded; None for a zero-length run."""
    return round(count / seconds) if seconds > 0 else None


def emit(summary: dict, line: str, json_path: str | None,
         out: TextIO | None = None) -> None:
    """Print the summary line on stdout and write ``summary`` as JSON to ``json_path``."""
    print(line, file=out if out is not None else sys.stdout, flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(summary, fh, indent=1, default=str)
            fh.write("\n")


@contextlib.contextmanager
def spark_session(app_name: str, conf: dict[str, str] | None = None) -> Iterator:
    """The job's SparkSession (session time zone UTC, so days and windows are the same
    on every cluster), stopped on the way out."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        yield spark
    finally:
        spark.stop()


class SparkProgress:
    """Prints ``<label>: stage N: done/total tasks`` on stderr while Spark jobs run, at
    most every ``interval`` seconds and only when something moved, from a daemon thread
    that reads the status tracker (no listener in the JVM, so nothing to unregister)."""

    def __init__(self, spark, label: str, enabled: bool = True, interval: float = 2.0,
                 stream: TextIO | None = None):
        self._tracker = spark.sparkContext.statusTracker() if enabled else None
        self.label = label
        self.interval = interval
        self.stream = stream if stream is not None else sys.stderr
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: str | None = None

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            line = self.status()
            if line and line != self._last:
                self._last = line
                print(f"{self.label}: {line}", file=self.stream, flush=True)

    def status(self) -> str | None:
        """One line of what runs now (None when nothing does)."""
        tracker = self._tracker
        if tracker is None:
            return None
        parts = []
        try:
            for stage_id in sorted(tracker.getActiveStageIds()):
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    parts.append(f"stage {stage_id}: {info.numCompletedTasks}/"
                                 f"{info.numTasks} tasks")
        except Exception:      # the session is stopping; progress is best effort
            return None
        return ", ".join(parts) or None

    def __enter__(self) -> "SparkProgress":
        if self._tracker is not None:
            self._thread = threading.Thread(target=self._poll, name="kafkalog-progress",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 1)


def _spark_error_message(err: BaseException) -> str | None:
    """The first line of a Spark analysis/parse error (bad column, bad SQL expression,
    missing path), which is bad input to a job, not a crash."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if names & {"AnalysisException", "ParseException", "IllegalArgumentException"}:
        text = str(err).strip().splitlines()
        return text[0] if text else type(err).__name__
    return None


def run(name: str, main: Callable[[], int], err: TextIO | None = None) -> int:
    """Run ``main()`` and turn bad input into ``<name>: <reason>`` on stderr and exit
    status 2: our own errors (a KafkaLogError, which names file, position and offset),
    Spark's analysis errors, and a missing file. Anything else is a bug and keeps its
    traceback."""
    stream = err if err is not None else sys.stderr
    t0 = time.monotonic()
    try:
        return main()
    except (KafkaLogError, FileNotFoundError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    except Exception as exc:
        reason = _spark_error_message(exc)
        if reason is None:
            raise
    print(f"{name}: {reason} (after {time.monotonic() - t0:.1f}s)", file=stream, flush=True)
    return EXIT_BAD_INPUT
