"""What every job in ``spark_kafkalog.jobs`` shares: the parser (the same flag means the
same thing in every job; old spellings stay as hidden aliases), quiet Spark logging,
progress on stderr, the summary on stdout (and ``--summary-json``), and the one line and
exit status of a failure (:func:`run`).

A job is written as::

    def main(argv=None) -> int:
        args = jobkit.parser("copy_topic", __doc__, example="...").parse_args(argv)
        with jobkit.spark_session("kafkalog-copy-topic", verbose=args.verbose) as spark, \\
                jobkit.SparkProgress(spark, "copy_topic", enabled=args.progress):
            ...
        jobkit.emit(summary, line, args.summary_json)
        return 0

    if __name__ == "__main__":
        sys.exit(jobkit.run("copy_topic", main))
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
import traceback
from datetime import datetime, timezone
from typing import Callable, Sequence, TextIO

from . import jobsession
from ._console import human_bytes, iso_ms, plural
from .errors import (
    CommitConflictError,
    CorruptRecordError,
    DataLossError,
    InternalError,
    KafkaLogError,
    StorageError,
    TxnIndexError,
    UnsupportedFormatError,
    unwrap,
)
from .jobsession import LOG4J_CONF, SparkProgress, spark_session

__all__ = ["CODECS", "DATA_ERRORS", "EXIT_BAD_INPUT", "EXIT_DATA", "EXIT_FAILED", "EXIT_LOCKED",
           "JobInputError", "LOG4J_CONF", "NOT_FOUND_HINT", "SparkProgress", "add_fs_option",
           "add_isolation_level", "add_log_dirs", "add_manifest", "add_time_window",
           "add_topic_settings", "add_topics", "add_typed_formats", "alias", "check_dead_letter",
           "check_setting_topics",
           "chosen_topics", "emit", "exit_status", "human_bytes", "iso_ms", "parse_kv",
           "parse_time_ms", "parse_time_window", "parser", "plural", "rate", "rate_text", "run",
           "spark_session", "topic_list", "topic_overrides", "write_manifest"]

#: exit statuses of a job (README, "Jobs": the same scheme as the ``kafkalog`` command)
EXIT_OK = 0
#: the data is damaged or gone: corrupt bytes, data loss, verify found errors
EXIT_DATA = 1
#: bad input: arguments, paths, topics, options (argparse's usage errors exit 2 too)
EXIT_BAD_INPUT = 2
#: a lock is held (a running broker, another writer) or a commit lost a race: retry later
EXIT_LOCKED = 3
#: anything else: Spark failed, or a bug (``--verbose`` shows the trace)
EXIT_FAILED = 4
EXIT_INTERRUPTED = 130
#: our errors that say the data is damaged or gone (EXIT_DATA), never a bad argument: a
#: job that wraps input errors in :class:`JobInputError` lets these through as they are
DATA_ERRORS = (CorruptRecordError, DataLossError, UnsupportedFormatError, TxnIndexError)

#: Kafka's compression.type values, as every job that writes batches takes them
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class JobInputError(KafkaLogError, ValueError):
    """A job's arguments or input cannot be used; the message is the one line shown."""


class JobParser(argparse.ArgumentParser):
    """An ArgumentParser that knows hidden deprecated aliases (:func:`alias`), checks
    required flags after them, and resolves ``--progress`` (default: stderr is a
    terminal)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.aliases: dict[str, str] = {}          # old spelling -> flag
        self.required_flags: dict[str, str] = {}   # dest -> flag
        self.value_aliases: dict[str, dict[str, str]] = {}     # dest -> {old: new}

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        self._argv = argv
        ns, rest = super().parse_known_args(argv, namespace)
        for dest, flag in self.required_flags.items():
            if getattr(ns, dest, None) in (None, []):
                self.error(f"the following arguments are required: {flag}")
        for dest, values in self.value_aliases.items():
            value = getattr(ns, dest, None)
            if value in values:
                self._note(f"--{dest.replace('_', '-')} {value} is now {values[value]}")
                setattr(ns, dest, values[value])
        used = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
        for old, new in self.aliases.items():
            if old in used:
                self._note(f"{old} is now {new}")
        if getattr(ns, "progress", False) is None:
            ns.progress = _isatty(sys.stderr)
        return ns, rest

    def format_usage(self) -> str:
        return self._as_required(super().format_usage)

    def format_help(self) -> str:
        return self._as_required(super().format_help)

    def _as_required(self, format_text):
        """Usage and help show a required flag as required (no brackets), though it is
        checked after parsing so that its old spelling can stand in for it."""
        marked = [a for a in self._actions if not a.required
                  and self.required_flags.get(a.dest) in a.option_strings]
        for action in marked:
            action.required = True
        try:
            return format_text()
        finally:
            for action in marked:
                action.required = False

    def error(self, message: str):
        """A usage error is one line too (argparse's own prints the usage first), with a
        "did you mean" for each mistyped flag (also when a missing required flag is what
        argparse reports: the typo is often the missing flag)."""
        hints = self._typo_hints()
        tail = f"; {'; '.join(hints)}" if hints else ""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: UsageError: {message}{tail} (--help "
                                  "shows the flags)\n")

    def _typo_hints(self) -> list[str]:
        flags = [o for a in self._actions if a.help is not argparse.SUPPRESS
                 for o in a.option_strings if o.startswith("--")]
        known = set(self._option_string_actions)
        hints = []
        for arg in getattr(self, "_argv", ()):
            word = arg.split("=", 1)[0]
            if (not word.startswith("--") or word == "--" or word in known
                    or any(f.startswith(word) for f in known)):      # an abbreviation
                continue
            close = difflib.get_close_matches(word, flags, n=2, cutoff=0.6)
            if close:
                hints.append(f"{word}: did you mean {' or '.join(close)}?")
        return hints

    def _note(self, text: str) -> None:
        print(f"{self.prog}: note: {text} (the old spelling still works)",
              file=sys.stderr, flush=True)


def _isatty(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:               # closed
        return False


def parser(prog: str, doc: str | None, example: str) -> JobParser:
    """A job's parser: its description is the first paragraph of ``doc``, its ``--help``
    ends with ``example``; it has ``--summary-json``, ``--progress``/``--no-progress``
    (default: progress when stderr is a terminal) and ``--verbose``."""
    description = (doc or "").strip().split("\n\n")[0]
    ap = JobParser(prog=prog, description=description, epilog=f"Example:\n  {example}",
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summary-json", metavar="FILE",
                    help="also write the summary to this JSON file")
    prog_flags = ap.add_mutually_exclusive_group()
    prog_flags.add_argument("--progress", dest="progress", action="store_true",
                            default=None, help="progress lines on stderr (default: when "
                            "stderr is a terminal)")
    prog_flags.add_argument("--no-progress", dest="progress", action="store_false",
                            help="no progress lines")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="Spark's own logging as configured, and a failure's full trace")
    return ap


def alias(ap: JobParser, old: str, new: str) -> None:
    """``old`` as a hidden, deprecated spelling of the already defined flag ``new``
    (same destination, type and action; the job notes the new name on stderr)."""
    canon = ap._option_string_actions[new]
    kw: dict = {"dest": canon.dest, "help": argparse.SUPPRESS}
    if isinstance(canon, argparse._StoreTrueAction):
        kw["action"] = "store_true"
    elif isinstance(canon, argparse._StoreFalseAction):
        kw["action"] = "store_false"
    else:
        kw.update(action="append" if isinstance(canon, argparse._AppendAction) else "store",
                  type=canon.type, choices=canon.choices, metavar=canon.metavar)
    ap.add_argument(old, **kw)
    ap.aliases[old] = new
    if canon.required:          # either spelling satisfies it: checked after parsing
        canon.required = False
        ap.required_flags[canon.dest] = new


def add_log_dirs(ap: argparse.ArgumentParser, what: str = "log dir(s) to read") -> None:
    """The required ``--path``: one or more log dirs (a broker's ``log.dirs`` entry or a
    copy of it), comma-separated, local paths or pyarrow.fs URIs."""
    ap.add_argument("--path", required=True,
                    help=f"{what}: a broker's log.dirs entry or a copy of it "
                         "(comma-separated; local path or any pyarrow.fs URI)")


def add_topics(ap: argparse._ActionsContainer, what: str, without: str | None = None,
               **kw) -> None:
    """``--topic NAME``: repeatable, each comma-separated (:func:`topic_list` reads it);
    ``what`` is what the job does to a topic, ``without`` what it takes when none is
    given (``kw``: ``required``, ``default``)."""
    ap.add_argument("--topic", action="append", metavar="NAME",
                    help=f"topic to {what} (repeatable, or comma-separated"
                         + (f"; default: {without})" if without else ")"), **kw)


def chosen_topics(items: Sequence[str] | None, present: Sequence[str], path: str,
                  default: Sequence[str]) -> list[str]:
    """The topics ``--topic`` names (:func:`topic_list`), each one of ``present`` (the
    topics in ``path``); ``default`` without ``--topic``."""
    if not items:
        return list(default)
    topics = topic_list(items)
    missing = [t for t in topics if t not in present]
    if missing:
        raise JobInputError(f"--topic: topic {missing[0]!r} is not in {path}")
    return topics


def add_fs_option(ap: argparse.ArgumentParser) -> None:
    """``--fs-option KEY=VALUE`` (repeatable) for the filesystem of ``--path``, read with
    ``parse_kv(args.fs_option, "--fs-option")``."""
    ap.add_argument("--fs-option", action="append", default=[], metavar="KEY=VALUE",
                    help="filesystem option for --path (repeatable), e.g. "
                         "s3.endpoint=..., s3.region=...")


def add_time_window(ap: argparse.ArgumentParser) -> None:
    """``--from TIME`` and ``--to TIME`` (``args.time_from``, ``args.time_to``): the
    window ``[from, to)`` :func:`time_window` cuts a frame to."""
    ap.add_argument("--from", dest="time_from", metavar="TIME",
                    help="only records with timestamp >= TIME (ISO-8601, UTC unless it "
                         "says otherwise, or epoch milliseconds)")
    ap.add_argument("--to", dest="time_to", metavar="TIME",
                    help="only records with timestamp < TIME")


def add_isolation_level(ap: argparse.ArgumentParser, help: str) -> None:
    """``--isolation-level``, Kafka's consumer ``isolation.level`` (default
    read_committed); ``help`` says what read_committed leaves out of the job's output."""
    ap.add_argument("--isolation-level", choices=("read_committed", "read_uncommitted"),
                    default="read_committed", help=help)


def add_typed_formats(ap: argparse.ArgumentParser) -> None:
    """``--value-format`` / ``--key-format`` (binary, avro, protobuf, json, registry),
    ``--on-decode-error`` and ``--schema-registry-url``: the typed-records read (issue 38)
    of an export job, the read options ``valueFormat``, ``keyFormat``, ``onDecodeError``, ``schemaRegistryUrl``
    (``args.value_format``, ... None when not given)."""
    for col in ("value", "key"):
        ap.add_argument(f"--{col}-format",
                        choices=("binary", "avro", "protobuf", "json", "registry"),
                        help=f"decode {col}s framed by a schema registry into a typed "
                             f"struct column (read option {col}Format); schemas from the "
                             "log dir's _schemas unless --schema-registry-url")
    ap.add_argument("--on-decode-error", choices=("fail", "null", "skip"),
                    help="a record that does not decode: fail (default), null (and a "
                         "value_error column) or skip (counted in the job's log)")
    ap.add_argument("--schema-registry-url", metavar="URL",
                    help="schema registry REST API (read option schemaRegistryUrl)")
    ap.add_argument("--dead-letter", metavar="DIR",
                    help="with --on-decode-error skip or null: write every record that "
                         "does not decode there, raw and whole, as Parquet (one file per "
                         "topic-partition offset range)")


def check_dead_letter(args: argparse.Namespace) -> None:
    """``--dead-letter`` only with a typed column and ``--on-decode-error`` skip or null:
    one line, before Spark starts (JobInputError)."""
    if not getattr(args, "dead_letter", None):
        return
    if (args.value_format or "binary") == "binary" and (args.key_format or "binary") == "binary":
        raise JobInputError("--dead-letter: applies to typed columns; give --value-format or "
                            "--key-format")
    if args.on_decode_error in (None, "fail"):
        raise JobInputError("--dead-letter needs --on-decode-error skip or null (with fail, "
                            "the default, the run stops at the first record that does not "
                            "decode)")


def add_topic_settings(ap: argparse.ArgumentParser, file_help: str, key: str) -> None:
    """``--config-file FILE`` (JSON ``{"topic": {KEY: value}, "*": {defaults}}``; the job
    reads it) and ``--topic-config TOPIC:KEY=VALUE`` over it (:func:`topic_overrides`);
    ``key`` is how the job's help names a setting (NAME, KEY)."""
    ap.add_argument("--config-file", metavar="FILE", help=file_help)
    ap.add_argument("--topic-config", action="append", default=[],
                    metavar=f"TOPIC:{key}=VALUE", help="a per-topic setting (repeatable)")


def topic_overrides(items: Sequence[str], key: str) -> dict[str, dict[str, str]]:
    """``--topic-config`` values as ``{topic: {key: value}}`` (a later one wins)."""
    out: dict[str, dict[str, str]] = {}
    for item in items:
        topic, sep, kv = item.partition(":")
        if not sep or not topic:
            raise JobInputError(f"--topic-config expects TOPIC:{key}=VALUE, got {item!r}")
        out.setdefault(topic, {}).update(parse_kv([kv], "--topic-config"))
    return out


def check_setting_topics(config: dict, overrides: dict, topics: Sequence[str],
                         verb: str) -> None:
    """Every topic ``--config-file`` (but ``*``) and ``--topic-config`` name is one of
    ``topics``, those the job ``verb`` (compacted, retained)."""
    unknown = sorted((set(config) - {"*"} | set(overrides)) - set(topics))
    if unknown:
        raise JobInputError(f"settings name topic {unknown[0]!r}, which is not among the "
                            f"topics {verb} ({', '.join(topics)})")


#: the one vocabulary of ``--mode`` (Spark's save modes); ``error`` is an old spelling
MODES = ("overwrite", "append", "errorifexists", "ignore")


def add_mode(ap: JobParser, default: str, overwrite: str) -> None:
    """``--mode`` of a job that writes a destination that may exist; ``overwrite`` says
    what overwriting replaces."""
    ap.add_argument("--mode", default=default, choices=MODES + ("error",),
                    metavar="{" + ",".join(MODES) + "}",
                    help=f"when the destination exists (default {default}): overwrite "
                         f"({overwrite}), append, errorifexists (stop), ignore (do "
                         "nothing)")
    ap.value_aliases["mode"] = {"error": "errorifexists"}


def time_window(df, time_from: str | None, time_to: str | None,
                flags: tuple[str, str] = ("--from", "--to")):
    """``df`` (the read schema) cut to the records with ``from <= timestamp < to``
    (:func:`parse_time_window`). The reader takes the bounds as pushed filters and seeks
    the time index; a record without a timestamp (-1) is in no window."""
    from datetime import timedelta

    from pyspark.sql import functions as F

    lo, hi = parse_time_window(time_from, time_to, flags)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    if hi is not None and lo is None:
        lo = 0
    if lo is not None:
        df = df.where(F.col("timestamp") >= F.lit(epoch + timedelta(milliseconds=max(lo, 0))))
    if hi is not None:
        df = df.where(F.col("timestamp") < F.lit(epoch + timedelta(milliseconds=hi)))
    return df


def topic_list(items: Sequence[str] | None) -> list[str]:
    """``--topic`` values (repeatable, each comma-separated) as a list, order kept,
    duplicates dropped."""
    out: list[str] = []
    for item in items or ():
        for t in item.split(","):
            if t.strip() and t.strip() not in out:
                out.append(t.strip())
    return out


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


def parse_kv(items: Sequence[str] | None, flag: str,
             error: type[Exception] = JobInputError) -> dict[str, str]:
    """``["a=1", "b=2"]`` -> ``{"a": "1", "b": "2"}`` (keys stripped, values as given);
    anything else raises ``error`` (the kafkalog command's is InvalidOptionError) naming
    ``flag``."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise error(f"{flag} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def parse_time_window(time_from: str | None, time_to: str | None,
                      flags: tuple[str, str] = ("--from", "--to")
                      ) -> tuple[int | None, int | None]:
    """The window ``[from, to)`` in epoch milliseconds, each bound ISO-8601 or epoch ms
    (:func:`parse_time_ms`; None: unbounded); an empty window is a JobInputError."""
    lo = None if time_from is None else parse_time_ms(time_from, flags[0])
    hi = None if time_to is None else parse_time_ms(time_to, flags[1])
    if lo is not None and hi is not None and lo >= hi:
        raise JobInputError(f"{flags[0]} {time_from} is not before {flags[1]} {time_to}: "
                            "the window [from, to) is empty")
    return lo, hi


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


#: a summary line shows a rate only for a run at least this long and this large: the
#: rate of a tiny run measures the start-up, not the work
RATE_MIN_SECONDS, RATE_MIN_COUNT = 1.0, 1000


def rate_text(count: int, seconds: float, noun: str, sep: str = " (", end: str = ")") -> str:
    """`` (12,345 rows/s)`` for a summary line; "" for a run too small to measure."""
    per = rate(count, seconds)
    if per is None or seconds < RATE_MIN_SECONDS or count < RATE_MIN_COUNT:
        return ""
    return f"{sep}{per:,} {noun}/s{end}"


def emit(summary: dict, line: str, json_path: str | None,
         out: TextIO | None = None) -> None:
    """Write ``summary`` as JSON to ``json_path``, then print the summary line on stdout.

    The file is replaced whole (``log.io.write_atomic``: a temporary file beside it,
    fsynced, renamed, as every file a job writes), so a full disk leaves the previous
    summary, never an empty or cut one; and the success line is printed only once it is
    written (a failure is the job's one error line instead, a StorageError: exit 4)."""
    if json_path:
        import pyarrow.fs as pafs

        from .log.io import write_atomic

        text = json.dumps(summary, indent=1, default=str) + "\n"
        write_atomic(pafs.LocalFileSystem(), json_path, text.encode("utf-8"))
    print(line, file=out if out is not None else sys.stdout, flush=True)


#: Spark's exceptions that mean bad input to a job (a bad column, SQL expression, path)
_SPARK_BAD_INPUT = {"AnalysisException", "ParseException", "IllegalArgumentException",
                    "PySparkValueError", "PySparkTypeError"}


def exit_status(exc: BaseException) -> tuple[int, str]:
    """The exit status for ``exc`` and its one line: ``Class: message`` of our error
    behind it (:func:`spark_kafkalog.errors.unwrap`), else of ``exc`` itself."""
    ours = unwrap(exc)
    shown = ours if ours is not None else exc
    text = str(shown).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = f"{type(shown).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    root = _java_root_cause(exc) if ours is None else None
    if root:                  # "An error occurred while calling o87.parquet" says nothing
        line = root
    if ours is None and _source_not_found(f"{text}\n{root or ''}"):
        return EXIT_BAD_INPUT, NOT_FOUND_HINT
    if ours is not None:
        if isinstance(ours, CommitConflictError):
            return EXIT_LOCKED, line
        if isinstance(ours, DATA_ERRORS):
            return EXIT_DATA, line
        if isinstance(ours, (InternalError, StorageError)):
            return EXIT_FAILED, line    # a bug, or the filesystem failed (ENOSPC, EIO)
        return EXIT_BAD_INPUT, line
    if isinstance(exc, OSError):          # a missing or unreadable path (a storage
        return EXIT_BAD_INPUT, line       # failure is a StorageError: unwrap's rule)
    if {c.__name__ for c in type(exc).__mro__} & _SPARK_BAD_INPUT:
        return EXIT_BAD_INPUT, line
    return EXIT_FAILED, line + " (--verbose shows the trace)"


#: the one line for a Spark whose Python workers cannot import this package
NOT_FOUND_HINT = (
    "DATA_SOURCE_NOT_FOUND: Spark's worker Python cannot load the kafkalog data source: "
    "set PYSPARK_PYTHON (and PYSPARK_DRIVER_PYTHON) to the Python spark-kafkalog is "
    "installed in, e.g. export PYSPARK_PYTHON=\"$(which python)\" (README, \"The one "
    "environment variable\")")


def _source_not_found(text: str) -> bool:
    """Whether Spark's failure says it found no ``kafkalog`` data source (its lookup ran
    in a Python without this package)."""
    return (("DATA_SOURCE_NOT_FOUND" in text and "kafkalog" in text)
            or "ClassNotFoundException: kafkalog.DefaultSource" in text
            or ("PYTHON_DATA_SOURCE_ERROR" in text and "No module named" in text))


def _java_root_cause(exc: BaseException) -> str | None:
    """The first line of the innermost JVM exception behind a Py4JJavaError (None when
    ``exc`` carries none or the JVM is gone)."""
    java = getattr(exc, "java_exception", None)
    try:
        for _ in range(16):
            cause = java.getCause() if java is not None else None
            if cause is None:
                break
            java = cause
        text = str(java.toString()).strip() if java is not None else ""
    except Exception:
        return None
    return text.splitlines()[0] if text else None


def run(name: str, main: Callable[[], int], err: TextIO | None = None,
        argv: Sequence[str] | None = None) -> int:
    """Run ``main()``; a failure becomes ONE line on stderr, ``<name>: <Class>:
    <message>`` (our error unwrapped from Spark's), and the exit status of its kind
    (:data:`EXIT_DATA`, :data:`EXIT_BAD_INPUT`, :data:`EXIT_LOCKED`,
    :data:`EXIT_FAILED`). ``--verbose`` in ``argv`` (default ``sys.argv``) also prints
    the trace."""
    stream = err if err is not None else sys.stderr
    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") for a in args)
    jobsession.begin(name)
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=stream, flush=True)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if jobsession.interrupted():     # the failure is Ctrl-C's: Spark's jobs cancelled
            print(f"{name}: interrupted", file=stream, flush=True)
            return EXIT_INTERRUPTED
        status, line = exit_status(exc)
        if verbose:
            traceback.print_exc(file=stream)
        else:
            _quiet_spark()
        print(f"{name}: {line}", file=stream, flush=True)
        return status


def _quiet_spark() -> None:
    """Spark's JVM logs nothing more once a failed job's line is to be printed: a task
    still being killed, a worker's monitor or a shutdown hook would otherwise log (a
    Java stack of tens of lines) after the line a script reads last. Only where this job
    started Spark (pyspark imported and its JVM up); best effort, as the JVM may be
    going."""
    pyspark = sys.modules.get("pyspark")
    if pyspark is None:
        return
    try:
        gateway = pyspark.SparkContext._gateway
        if gateway is None:
            return
        log4j = gateway.jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setAllLevels(
            log4j.LogManager.getRootLogger().getName(), log4j.Level.OFF)
    except Exception:           # noqa: BLE001  (the JVM is gone: nothing will log)
        pass
