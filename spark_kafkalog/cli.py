"""The ``kafkalog`` command: look at a Kafka log directory without a broker.

::

    kafkalog inspect PATH...   topics, partitions, offsets, sizes, time ranges, codecs
    kafkalog dump FILE...      what Kafka's DumpLogSegments prints (segments, indexes,
                               producer snapshots, checkpoints); unknown files are skipped
    kafkalog verify PATH...    CRCs, offset order, indexes against the log, checkpoints
    kafkalog cat PATH -t T     a topic's records, like ``kcat -C`` (offset/time, count, -f)
    kafkalog report PATH...    stats, charts (--html) and problems of a whole log dir
    kafkalog schemas PATH ...  a schema registry's subjects, versions, schemas by id,
                               configs, from its ``_schemas`` topic (no registry running)
    kafkalog job NAME ...      run a job (``--list``; ``--file NAME``: its file, for
                               spark-submit; ``--log4j``: the jobs' quiet log4j2 file)

``PATH`` is a broker log dir (a ``log.dirs`` entry) or one partition directory; several
paths are the JBOD dirs of one broker; any ``pyarrow.fs`` URI works, with
``--fs-option KEY=VALUE`` for :func:`spark_kafkalog.log.resolve_filesystem`. ``--json``
prints JSON for scripts (record keys and values as base64); ``-v`` logs what is read.
The byte parsing lives in :mod:`spark_kafkalog.log.diagnose` and :mod:`spark_kafkalog.kcat`;
this module parses arguments and prints.

Exit status: 0 ok; 1 problems found (``dump``: damage, or CRC mismatches with
``--verify-crc``; ``verify``: any error, warnings too with ``--strict``); 2 bad usage,
an unreadable path, or nothing found (no partitions at the paths, no file dump reads);
141 when the reader of stdout went away.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import logging
import os
import posixpath
import re
import sys
import time
import warnings
from typing import Iterable, Iterator, Sequence, TextIO

import pyarrow.fs as pafs

from spark_kafkalog import __version__, cli_cat, cli_dump, cli_schemas, report
from spark_kafkalog._console import (
    Progress,
    format_table,
    human_bytes,
    iso_ms,
    non_negative,
    plain_uri,
    plural,
)
from spark_kafkalog.errors import (
    DataLossError,
    InvalidOptionError,
    KafkaLogError,
    LogLayoutError,
)
from spark_kafkalog.jobkit import parse_kv
from spark_kafkalog.log import (
    LogDirs,
    PartitionDir,
    TornTailWarning,
    parse_partition_dir_name,
    resolve_filesystem,
)
from spark_kafkalog.log.diagnose.inspect import inspect_partitions, partition_summary
from spark_kafkalog.log.io import list_dir
from spark_kafkalog.log.diagnose.verify import ERROR, Finding, verify_log_dirs
from spark_kafkalog.log.diagnose.remote import (
    held_remotely,
    remote_tiers,
    root_finding,
    verify_remote,
)

__all__ = ["main", "Progress", "format_table"]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + 13          # as if killed by SIGPIPE

log = logging.getLogger(__name__)


def _print_lines(lines: Iterable[str], out: TextIO) -> None:
    for line in lines:
        out.write(line + "\n")


def _fs_options(pairs: Sequence[str] | None) -> dict[str, str]:
    return parse_kv(pairs, "--fs-option", InvalidOptionError)


# ---- selecting partitions -------------------------------------------------------------------

def _select(paths: Sequence[str], fs_options: dict, topics: Sequence[str] | None
            ) -> tuple[LogDirs, list[PartitionDir]]:
    """The LogDirs over every PATH's log dir and the partitions the PATHs name.

    A PATH holding partition directories is a log dir; a PATH named ``<topic>-<n>`` that
    holds none is one partition of the log dir above it. Raises LogLayoutError for a
    missing path or a file, InvalidOptionError for bad filesystem options."""
    roots: list[str] = []
    wanted: list[tuple[str, str | None, int | None]] = []
    for raw in paths:
        uri = plain_uri(raw)
        fs, path = resolve_filesystem(uri, fs_options)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise LogLayoutError("no such log directory", path=raw)
        if info.type != pafs.FileType.Directory:
            raise LogLayoutError("not a directory (use `kafkalog dump` for single files)",
                                 path=raw)
        children = list_dir(fs, path)
        is_root = any(c.type == pafs.FileType.Directory
                      and parse_partition_dir_name(c.base_name) is not None for c in children)
        parsed = parse_partition_dir_name(posixpath.basename(path.rstrip("/")))
        if not is_root and parsed is not None:
            parent_uri = uri.rstrip("/").rsplit("/", 1)[0] or "/"
            parent_path = resolve_filesystem(parent_uri, fs_options)[1]
            roots.append(parent_uri)
            wanted.append((parent_path, parsed[0], parsed[1]))
        else:
            roots.append(uri)
            wanted.append((path, None, None))
    logdirs = LogDirs(roots, fs_options, include_internal=True)
    selected: dict[tuple[str, int], PartitionDir] = {}
    for root, topic, partition in wanted:
        if topic is None:           # list only the asked-for topics' partition dirs
            for t in (t for t in logdirs.topics() if not topics or t in topics):
                for p in logdirs.partitions(t):
                    if p.root == root:
                        selected.setdefault((p.topic, p.partition), p)
        else:
            p = logdirs.partition(topic, partition)
            selected.setdefault((p.topic, p.partition), p)
    parts = [selected[k] for k in sorted(selected)]
    if topics:
        parts = [p for p in parts if p.topic in set(topics)]
    log.info("log dirs %s: %s selected", ", ".join(logdirs.roots),
             plural(len(parts), "partition"))
    return logdirs, parts


# ---- inspect ------------------------------------------------------------------------------

def _cmd_inspect(args, out: TextIO, err: TextIO) -> int:
    logdirs, parts = _select(args.paths, _fs_options(args.fs_option), args.topic)
    scan = not args.no_scan
    progress = Progress(sum(p.size_bytes for p in parts) if scan else 0, "inspect",
                        err, enabled=None if args.progress else False)
    try:
        infos = inspect_partitions(logdirs, parts, scan=scan, isolation_level="read_committed",
                                   progress=progress.update)
    finally:
        progress.close()
    summaries = [partition_summary(info, scan) for info in infos]
    storage = cli_cat.remote_storage(args, _fs_options(args.fs_option))
    wrong_root = None
    if storage is not None:
        tiers = remote_tiers(logdirs, storage, parts)
        wrong_root = root_finding(storage, tiers, "--remote-storage")
        for s in summaries:
            tier = tiers[(s["topic"], s["partition"])].to_dict()
            s["remote"] = tier
            s["log_start_offset"] = tier["log_start_offset"]
    if args.json:
        doc = {"roots": list(logdirs.roots), "scanned": scan, "partitions": summaries}
        if wrong_root is not None:
            doc["remote_root_error"] = wrong_root.message
        json.dump(doc, out, indent=2)
        out.write("\n")
        return EXIT_OK if summaries else _nothing_found("inspect", args, err)
    out.write(f"log dirs: {', '.join(logdirs.roots)}\n")
    if not summaries:
        out.write("no partitions found\n")
        return _nothing_found("inspect", args, err)
    headers = ["TOPIC", "PART", "LOG START", "HW", "LSO", "LOG END", "SEGS", "SIZE",
               "RECORDS", "MIN TIMESTAMP", "MAX TIMESTAMP", "CODECS", "PROBLEMS"]
    rows = []
    for s in summaries:
        rows.append([s["topic"], s["partition"], s["log_start_offset"], s["high_watermark"],
                     s["last_stable_offset"], s["log_end_offset"], s["segment_count"],
                     human_bytes(s["size_bytes"]), s["records"],
                     iso_ms(s["min_timestamp"] if s["min_timestamp"] is not None
                            else s["first_timestamp"]), iso_ms(s["max_timestamp"]),
                     ",".join(s["codecs"]) if s["codecs"] is not None else None,
                     len(s["problems"])])
    _print_lines(format_table(headers, rows, right=(1, 2, 3, 4, 5, 6, 7, 8, 12)), out)
    total = sum(s["size_bytes"] for s in summaries)
    out.write(f"\n{plural(len(summaries), 'partition')}, "
              f"{plural(sum(len(s['segments']) for s in summaries), 'segment')}, "
              f"{human_bytes(total)}"
              + (f", {plural(sum(s['records'] for s in summaries), 'record')}" if scan else "")
              + "\n")
    if args.segments:
        for s in summaries:
            out.write(f"\n{s['topic']}-{s['partition']}  {s['path']}\n")
            seg_rows = [[x["base_offset"], human_bytes(x["size_bytes"]), x["batches"],
                         x["records"], x["first_offset"], x["last_offset"],
                         iso_ms(x["min_timestamp"]), iso_ms(x["max_timestamp"]),
                         x["index_entries"], x["timeindex_entries"], x["aborted_txns"],
                         ",".join(x["codecs"]) if x["codecs"] is not None else None,
                         ",".join(map(str, x["magics"])) if x["magics"] is not None else None]
                        for x in s["segments"]]
            _print_lines(format_table(
                ["BASE OFFSET", "SIZE", "BATCHES", "RECORDS", "FIRST", "LAST", "MIN TIMESTAMP",
                 "MAX TIMESTAMP", "INDEX", "TIMEINDEX", "ABORTED", "CODECS", "MAGIC"],
                seg_rows, right=(0, 1, 2, 3, 4, 5, 8, 9, 10), indent="  "), out)
    tiered = [s for s in summaries if s.get("remote")]
    if tiered:
        out.write("\nremote tier:\n")
        if wrong_root is not None:
            # what the metadata lists is not under that root: say so before the listing
            out.write(f"  WRONG ROOT: {wrong_root.message}\n")
        for s in tiered:
            r = s["remote"]
            span = (f"offsets {r['log_start_offset']}..{r['remote_end_offset'] - 1}"
                    if r["remote_segments"] else "nothing")
            gap = f"; GAP {r['gap'][0]}..{r['gap'][1] - 1} in neither tier" if r["gap"] else ""
            out.write(f"  {s['topic']}-{s['partition']}: "
                      f"{plural(r['remote_segments'], 'segment')}, "
                      f"{human_bytes(r['remote_bytes'])}, {span}; local from "
                      f"{r['local_log_start_offset']}{gap}\n")
    problems = [(s, pr) for s in summaries for pr in s["problems"]]
    if problems:
        out.write(f"\n{plural(len(problems), 'problem')} (run `kafkalog verify` for "
                  "severities):\n")
        for s, pr in problems:
            where = [pr["path"]]
            if pr["position"] is not None:
                where.append(f"position {pr['position']}")
            if pr["offset"] is not None:
                where.append(f"offset {pr['offset']}")
            out.write(f"  {s['topic']}-{s['partition']}: {pr['kind']}: {pr['message']} "
                      f"({', '.join(where)})\n")
    return EXIT_OK


# ---- verify -------------------------------------------------------------------------------

def _cmd_verify(args, out: TextIO, err: TextIO) -> int:
    fs_options = _fs_options(args.fs_option)
    started = time.monotonic()
    try:
        logdirs, parts = _select(args.paths, fs_options, args.topic)
    except LogLayoutError as e:
        if "present in two log dirs" not in e.reason:
            raise
        # the same partition in two log dirs: a broker refuses to start — a finding
        finding = Finding(ERROR, "layout", e.path or "", e.position, e.offset, e.reason)
        return _report_verify(args, out, None, [finding])
    factor = 2 if args.deep else 1
    progress = Progress(sum(p.size_bytes for p in parts) * factor, "verify", err,
                        enabled=None if args.progress else False)
    try:
        result = verify_log_dirs(logdirs, parts, verify_crc=not args.no_crc, deep=args.deep,
                                 progress=progress.update)
    finally:
        progress.close()
    storage = cli_cat.remote_storage(args, fs_options)
    if storage is not None:
        result.findings[:] = held_remotely(result.findings, logdirs, storage, parts)
        result.findings.extend(verify_remote(logdirs, storage, parts))
    if args.manifest or args.against:
        from spark_kafkalog.log.diagnose import manifest as mf

        want = mf.read_manifest(args.against) if args.against else None
        doc = mf.build_manifest(logdirs, parts)
        if args.manifest:
            mf.save_manifest(doc, args.manifest)
            log.info("manifest of %s written to %s", plural(len(doc["files"]), "file"),
                     args.manifest)
        if want is not None:
            result.findings.extend(mf.check_manifest(want, doc, list(logdirs.roots),
                                                     args.topic))
    log.info("verified %s in %.1f s", plural(result.partitions, "partition"),
             time.monotonic() - started)
    status = _report_verify(args, out, result, result.findings)
    return status if parts else _nothing_found("verify", args, err)


def _nothing_found(command: str, args, err: TextIO) -> int:
    """Nothing matched the paths (an empty dir, a mistyped path or topic): exit 2."""
    what = f" of topic {', '.join(args.topic)}" if args.topic else ""
    err.write(f"kafkalog {command}: error: no partitions{what} found in "
              f"{', '.join(args.paths)} (a path must be a log dir, i.e. a log.dirs entry "
              "holding <topic>-<partition> dirs, or one such partition dir)\n")
    return EXIT_USAGE


def _report_verify(args, out: TextIO, result, findings: list[Finding]) -> int:
    strict = args.strict
    failing = [f for f in findings if strict or f.severity == ERROR]
    warnings_ = [f for f in findings if not strict and f.severity != ERROR]
    status = EXIT_PROBLEMS if failing else EXIT_OK
    if args.json:
        doc = result.to_dict(strict) if result is not None else {
            "ok": False, "strict": strict, "roots": [], "partitions": 0, "segments": 0,
            "bytes": 0, "batches": 0, "records": 0, "errors": len(failing),
            "warnings": 0, "findings": [f.to_dict() for f in findings]}
        json.dump(doc, out, indent=2)
        out.write("\n")
        return status
    for f in findings:
        severity = "ERROR" if f in failing else "WARNING"
        who = f"{f.topic}-{f.partition}: " if f.topic is not None and f.partition is not None \
            else ""
        out.write(f"{severity:<7}  {who}{f.kind}: {f.message}\n         at {f.where()}\n")
    if result is not None:
        out.write(f"verified {plural(result.partitions, 'partition')}, "
                  f"{plural(result.segments, 'segment')}, "
                  f"{plural(result.batches, 'batch', 'batches')}, "
                  f"{plural(result.records, 'record')}, {human_bytes(result.bytes)}: "
                  f"{plural(len(failing), 'error')}, {plural(len(warnings_), 'warning')}\n")
    else:
        out.write(f"{plural(len(failing), 'error')}\n")
    if warnings_ and not failing:
        out.write("warnings only (a crash's torn tail is recoverable); --strict fails on "
                  "them\n")
    return status


# ---- argument parsing --------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--fs-option", action="append", metavar="KEY=VALUE",
                        help="filesystem option, e.g. s3.endpoint=http://127.0.0.1:9000, "
                             "s3.region=..., s3.access_key=..., s3.secret_key=... "
                             "(repeatable)")
    common.add_argument("--json", action="store_true", help="JSON output for scripts")
    common.add_argument("-v", "--verbose", action="count", default=0,
                        help="log what the reader does (twice: debug)")
    bar = argparse.ArgumentParser(add_help=False)
    bar.add_argument("--no-progress", dest="progress", action="store_false",
                     help="no progress bar (it is drawn only when stderr is a terminal)")
    sel = argparse.ArgumentParser(add_help=False)
    sel.add_argument("paths", nargs="+", metavar="PATH",
                     help="broker log dir(s) (JBOD: several) or partition dir(s); local "
                          "paths or URIs (s3://, gs://, hdfs://, file://)")
    sel.add_argument("--topic", action="append", metavar="TOPIC",
                     help="only this topic (repeatable)")
    remote = argparse.ArgumentParser(add_help=False)
    cli_cat.add_remote_flags(remote, "read and check it with the log dirs, from their "
                                     "__remote_log_metadata")

    parser = _Parser(
        prog="kafkalog", description="Inspect, dump and verify Kafka log directories "
        "without a broker.",
        epilog="exit status: 0 ok; 1 problems found (dump, verify); 2 bad usage, an "
               "unreadable path, or nothing found at it")
    parser.add_argument("--version", action="version",
                        version=f"kafkalog (spark_kafkalog) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", parents=[common, bar, sel, remote],
                       help="topics, partitions, offsets, sizes, time ranges, codecs",
                       description="Per partition: log start offset, high watermark, last "
                                   "stable offset, log end offset, segments, size, records, "
                                   "first and max timestamp, codecs seen.")
    p.add_argument("--segments", action="store_true", help="also list every segment")
    p.add_argument("--no-scan", action="store_true",
                   help="offsets from checkpoints, indexes and the log tail only (fast); "
                        "no record counts or codecs")
    p.set_defaults(func=_cmd_inspect)

    p = cli_dump.add_parser(sub, common, non_negative)
    p.set_defaults(func=lambda a, out, err: cli_dump.run(a, out, err, _fs_options(a.fs_option)))

    p = sub.add_parser("verify", parents=[common, bar, sel, remote],
                       help="check CRCs, offsets, indexes and checkpoints; exit 1 on problems",
                       description="Check every batch's CRC and framing, offsets increasing "
                                   "within and across segments, .index/.timeindex/.txnindex "
                                   "against the log, checkpoint files against the log end, "
                                   "producer snapshots, data loss (records a checkpoint, "
                                   "the journal or a segment's name promises and the "
                                   "segments lack). A torn tail at the end of a "
                                   "partition (what a crash leaves; broker recovery truncates "
                                   "it) is a warning unless --strict.")
    p.add_argument("--strict", action="store_true",
                   help="warnings (torn tails and what they explain) fail too")
    p.add_argument("--deep", action="store_true",
                   help="also decode every record (decompress payloads, inner legacy "
                        "CRCs); reads the log twice")
    p.add_argument("--no-crc", action="store_true", help="skip batch CRC checks (faster)")
    p.add_argument("--manifest", metavar="FILE",
                   help="also write a manifest of the log dir(s) to FILE (JSON: every file's "
                        "size and SHA-256, each segment's offsets, records and times, each "
                        "partition's checkpoint entries) to audit a copy with --against")
    p.add_argument("--against", metavar="FILE",
                   help="also check the log dir(s) against a manifest --manifest wrote: "
                        "every file missing, truncated, altered or extra, every checkpoint "
                        "entry that differs, is an error")
    p.set_defaults(func=_cmd_verify)

    p = cli_cat.add_parser(sub, common._option_string_actions["--fs-option"].help)
    p.set_defaults(func=cli_cat.run)
    cli_schemas.add_parser(sub, common).set_defaults(func=cli_schemas.run)
    parser.commands = sub.choices

    p = sub.add_parser("report", parents=[common, bar, sel], help="stats, charts, problems",
                       description=report.DESCRIPTION)
    report.add_arguments(p)
    p.set_defaults(func=lambda a, out, err: report.run_cli(
        a, *_select(a.paths, _fs_options(a.fs_option), a.topic), out, err))
    # listed for --help only: main() hands `job ...` to _cmd_job before parsing
    sub.add_parser("job", help="run a job: kafkalog job NAME --help; kafkalog job --list; "
                               "kafkalog job --file NAME (for spark-submit)")
    return parser


class _UsageError(Exception):
    def __init__(self, message: str, parser: argparse.ArgumentParser):
        super().__init__(message)
        self.parser = parser


class _Parser(argparse.ArgumentParser):
    """Usage errors raise (main prints the subcommand's usage and a suggestion)."""

    def error(self, message):
        raise _UsageError(message, self)


def _usage(parser: argparse.ArgumentParser, e: _UsageError, argv: list[str],
           err: TextIO) -> int:
    """A usage error like a Unix tool's: the subcommand's usage, the message and a "did
    you mean" for a mistyped flag or command; exit 2."""
    commands = getattr(parser, "commands", {})
    cmd = next((a for a in argv if a in commands), None)
    # argparse reports a subcommand's unknown flags from the top parser: use the sub's
    target = commands[cmd] if cmd is not None and e.parser is parser else e.parser
    message = str(e)
    hint = ""
    unknown = re.search(r"unrecognized arguments: (\S+)", message)
    choice = re.search(r"invalid choice: '([^']*)'", message)
    if unknown:
        word = unknown.group(1).split("=", 1)[0]
        flags = [o for a in target._actions for o in a.option_strings]
        close = difflib.get_close_matches(word, flags, n=3, cutoff=0.6)
        if close:
            hint = f"did you mean {' or '.join(close)}?"
    elif choice and e.parser is parser:
        close = difflib.get_close_matches(choice.group(1), list(commands), n=1, cutoff=0.5)
        if close:
            hint = f"did you mean {close[0]}?"
    err.write(target.format_usage())
    err.write(f"{target.prog}: error: {message}\n")
    if hint:
        err.write(f"{target.prog}: {hint}\n")
    return EXIT_USAGE
def _cmd_job(argv: list[str], out: TextIO, err: TextIO) -> int:
    """``kafkalog job NAME ARGS...`` runs a job in this process (its own exit status);
    ``--list`` names them, ``--file NAME`` prints a job's file for spark-submit,
    ``--log4j`` the quiet log4j2 configuration the jobs use."""
    from spark_kafkalog.jobs import JOBS, job_file, run_job
    from spark_kafkalog.jobkit import LOG4J_CONF

    usage = ("usage: kafkalog job NAME [ARGS...] | --list | --file NAME | --log4j\n"
             f"jobs: {', '.join(JOBS)}\n")
    if not argv or argv[0] in ("-h", "--help"):
        out.write(usage)
        return EXIT_OK if argv else EXIT_USAGE
    if argv == ["--list"]:
        _print_lines(JOBS, out)
        return EXIT_OK
    if argv == ["--log4j"]:
        out.write(f"{LOG4J_CONF}\n")
        return EXIT_OK
    name = argv[1] if argv[0] == "--file" and len(argv) == 2 else argv[0]
    if name not in JOBS:
        err.write(f"kafkalog job: error: no job {name!r}\n{usage}")
        return EXIT_USAGE
    if argv[0] == "--file":
        out.write(f"{job_file(name)}\n")
        return EXIT_OK
    try:
        return run_job(name, argv[1:])
    except SystemExit as e:          # the job's usage error or --help (printed)
        return e.code if isinstance(e.code, int) else EXIT_USAGE


@contextlib.contextmanager
def _command_logging(verbose: int, err: TextIO) -> Iterator[None]:
    """The library's logger for one command, writing to ``err``; put back as it was
    afterwards, since ``main`` may run inside a notebook or a test process."""
    logger = logging.getLogger("spark_kafkalog")
    saved = (logger.level, logger.propagate)
    # The library logs damage as warnings while it reads; the commands report it
    # themselves, so by default only errors of the library itself are shown.
    logger.setLevel(logging.ERROR if verbose == 0 else
                    logging.INFO if verbose == 1 else logging.DEBUG)
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("kafkalog: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run the ``kafkalog`` command with ``argv`` (default ``sys.argv[1:]``); returns the
    exit status (see the module docstring)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["job"]:
        return _cmd_job(argv[1:], out, err)
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(argv)
    except _UsageError as e:
        return _usage(parser, e, argv, err)
    except SystemExit as e:          # --help or --version (printed)
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    try:
        with _command_logging(args.verbose, err), warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            return args.func(args, out, err)
    except DataLossError as e:
        # the log is not whole: a problem found, not bad usage
        err.write(f"kafkalog {args.command}: error: {e}\n")
        return EXIT_PROBLEMS
    except (InvalidOptionError, LogLayoutError) as e:
        err.write(f"kafkalog {args.command}: error: {e}\n")
        return EXIT_USAGE
    except KafkaLogError as e:          # the data: corrupt, unsupported, lost
        err.write(f"kafkalog {args.command}: error: {e}\n")
        return EXIT_PROBLEMS
    except BrokenPipeError:
        # the reader went away (`kafkalog dump ... | head`): stop quietly
        try:
            # Python flushes stdout again at exit: point it at /dev/null so that flush
            # does not fail a second time
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            return EXIT_BROKEN_PIPE          # stdout is not a file descriptor
        return EXIT_BROKEN_PIPE
    except OSError as e:
        # a filesystem that cannot be reached or read (S3 endpoint down, permissions)
        err.write(f"kafkalog {args.command}: error: {e}\n")
        return EXIT_USAGE


if __name__ == "__main__":          # python -m spark_kafkalog.cli
    sys.exit(main())
