"""What each job checks before a Spark session starts or anything is changed: source log
dirs and their topics, option values (offsets JSON, time windows, codecs and levels,
Parquet codecs Spark cannot write), the destination (a file where a directory belongs,
an existing topic or output and what ``--mode`` says of it, a ``.lock`` a running broker
holds) and the first batches of every segment to be read (one small read each; damage
deeper in a segment is found by the job itself, which then changes nothing). Every
problem raises :class:`~spark_kafkalog.jobkit.JobInputError` or the library's own error
(``LockError``, ``CorruptRecordError``), the one line a job prints.
"""
from __future__ import annotations

import json
import os
import re
from typing import NoReturn

import pyarrow.fs as pafs

from spark_kafkalog import jobkit
from spark_kafkalog.errors import InvalidOptionError, KafkaLogError, LockError, LogLayoutError
from spark_kafkalog.log import LogDirs, is_internal_topic, resolve_filesystem
from spark_kafkalog.log.read.scan import check_segment_heads
from spark_kafkalog.log.write import check_broker_lock, remove_dead_staging, topic_partitions

#: Parquet codecs Spark's bundled writer can write (``lzo`` and ``brotli`` are accepted by
#: Spark's option but fail in the write job: no codec class ships with Spark)
PARQUET_CODECS = ("none", "uncompressed", "snappy", "gzip", "lz4", "lz4_raw", "zstd")
_GLOB = re.compile(r"[*?\[{]")


def fail(message: str) -> NoReturn:
    raise jobkit.JobInputError(message)


def _info(path: str, fs_options: dict | None = None) -> pafs.FileInfo | None:
    """What is at ``path`` (None when pyarrow cannot open its scheme, e.g. ``s3a://``:
    the check is then left to the job). pyarrow's ArrowInvalid is a ValueError."""
    try:
        fs, p = resolve_filesystem(path, fs_options)
        return fs.get_file_info(p)
    except (OSError, ValueError, InvalidOptionError):
        return None


def source_log_dirs(path: str, flag: str = "--path", fs_options: dict | None = None,
                    include_internal: bool = True) -> LogDirs:
    """The log dirs of ``path``, each an existing directory."""
    for one in (p.strip() for p in path.split(",") if p.strip()):
        info = _info(one, fs_options)
        if info is not None and info.type == pafs.FileType.NotFound:
            fail(f"{flag}: log directory {one} does not exist")
        if info is not None and info.type != pafs.FileType.Directory:
            fail(f"{flag}: {one} is not a directory")
    try:
        return LogDirs(path, fs_options, include_internal=include_internal)
    except (LogLayoutError, InvalidOptionError, OSError) as err:
        fail(f"{flag}: {err}")


def topics_present(logdirs: LogDirs, topics, flag: str, where: str) -> None:
    present = set(logdirs.topics())
    missing = [t for t in topics if t not in present]
    if missing:
        fail(f"{flag}: topic {', '.join(repr(t) for t in missing)} not found in {where}"
             + (f" (it has {', '.join(sorted(present)[:10])})" if present else
                " (it holds no topic)"))


def check_segments(logdirs: LogDirs, partition_dirs, ranges: dict | None = None) -> int:
    """Probe the first batches of every segment (see the module doc); ``ranges``:
    ``(topic, partition) -> (start, end)``, only the segments holding those offsets."""
    from spark_kafkalog.log.io import map_io

    def one(p) -> int:
        start, end = (ranges or {}).get((p.topic, p.partition), (None, None))
        if start is not None and end is not None and start >= end:
            return 0
        return check_segment_heads(logdirs.filesystem, p, start, end)

    # partitions concurrently on remote filesystems (one small read per segment each)
    return sum(map_io(logdirs.filesystem, one, partition_dirs))


def _destination_dir(path: str, flag: str, not_a_dir: str) -> bool | None:
    """Whether the directory a job writes exists: None when ``path`` cannot be looked at
    (:func:`_info`), False when nothing is there; a file there fails with ``flag: path
    not_a_dir``."""
    info = _info(path)
    if info is None:
        return None
    if info.type == pafs.FileType.NotFound:
        return False
    if info.type != pafs.FileType.Directory:
        fail(f"{flag}: {path} {not_a_dir}")
    return True


def log_dir_destination(path: str, flag: str) -> bool:
    """A log dir about to be written: not a file, not held by a running broker. Returns
    whether it exists."""
    exists = _destination_dir(path, flag, "is not a directory")
    if exists:
        fs, root = resolve_filesystem(path)
        check_broker_lock(fs, root)
    return exists is not False


def recover_log_dir(path: str, topics=None) -> list[str]:
    """Roll back (or forward) the write a killed run left in flight in destination log
    dir ``path`` (every topic with a journal, or ``topics``), as the library does on its
    next open, so that a killed run's partition dirs never look like a topic that exists.
    A dead writer's staging files are deleted (:mod:`~spark_kafkalog.log.write.leftovers`).
    Returns the topics whose journal held such a write."""
    from spark_kafkalog.log.write import recover_topic
    from spark_kafkalog.log.files.journal import journal_path

    info = _info(path)
    if info is None or info.type != pafs.FileType.Directory:
        return []
    fs, root = resolve_filesystem(path)
    remove_dead_staging(fs, root)
    names = {i.base_name for i in fs.get_file_info(pafs.FileSelector(root))}
    found = sorted(n[len(".kafkalog."):-len(".journal")] for n in names
                   if n.startswith(".kafkalog.") and n.endswith(".journal"))
    acted = []
    for topic in found:
        if topics is not None and topic not in topics:
            continue
        if journal_path(root, topic).rsplit("/", 1)[1] not in names:
            continue
        try:
            result = recover_topic(fs, root, topic, lock_timeout=0)
        except LockError as err:
            if "another writer" not in str(err):
                raise
            continue                    # a live writer's: not a leftover
        if result.get("rolled_back") or result.get("rolled_forward"):
            acted.append(topic)
    return acted


def topic_exists(flag: str, topic: str, path: str, why: str) -> str:
    """The one wording of every job for a topic it would create that is already there."""
    return f"{flag}: topic {topic!r} already exists in {path} ({why})"


def topic_present(path: str, topic: str) -> bool:
    fs, root = resolve_filesystem(path)
    return bool(topic_partitions(fs, root, topic))


def output_destination(path: str, flag: str, mode: str) -> bool:
    """A directory a Spark job writes (Parquet): ``mode`` error/errorifexists refuses an
    existing one. Returns whether it exists (True when unknown: Spark decides)."""
    exists = _destination_dir(path, flag, "exists and is not a directory")
    if exists and mode in ("error", "errorifexists"):
        fail(f"{flag}: {path} exists (--mode {mode}); choose another output or "
             "--mode overwrite/append")
    return exists is not False


def file_destination(path: str | None, flag: str) -> None:
    """A file the job writes at the end: its directory must exist, it must not be one."""
    if not path:
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        fail(f"{flag}: directory {parent} does not exist")
    if os.path.isdir(path):
        fail(f"{flag}: {path} is a directory")


def inputs_exist(paths, flag: str) -> None:
    for path in paths:
        if _GLOB.search(path):
            continue                               # Spark expands globs itself
        info = _info(path)
        if info is not None and info.type == pafs.FileType.NotFound:
            fail(f"{flag}: {path} does not exist")


def parquet_codec(codec: str, flag: str = "--parquet-compression") -> None:
    if codec.lower() not in PARQUET_CODECS:
        fail(f"{flag}: Parquet codec {codec!r} cannot be written by Spark's Parquet writer "
             f"(choose {', '.join(PARQUET_CODECS)})")


def read_options(opts: dict[str, str]):
    """The kafkalog read ``opts`` parsed and planned as the source will (topics,
    partitions, offsets resolved against the log); returns ``(logdirs, ranges)``."""
    from spark_kafkalog.spark.offset_ranges import resolve_ranges
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.planning import select_partitions

    parsed = parse_read_options(opts)
    source_log_dirs(",".join(parsed.paths), "--path",
                    dict(parsed.filesystem_options))
    logdirs = LogDirs(list(parsed.paths), dict(parsed.filesystem_options))
    selected = select_partitions(logdirs, parsed)
    ranges = resolve_ranges(logdirs, parsed, selected, all_parts=selected)
    return logdirs, ranges


def internal_target(source: str, target: str, flag: str) -> None:
    """Writing into an internal topic is a restore of that same topic, or refused."""
    if is_internal_topic(target) and target != source:
        fail(f"{flag}: {target!r} is an internal topic of Kafka (a broker refuses client "
             "writes to it); write into another name")


def partition_counts(items, flag: str = "--partitions") -> tuple[int | None, dict[str, int]]:
    """``N`` (every new topic) and/or ``TOPIC=N`` items -> ``(default, per topic)``."""
    default, per_topic = None, {}
    for item in items or ():
        for part in (p.strip() for p in str(item).split(",") if p.strip()):
            topic, sep, num = part.rpartition("=")
            try:
                n = int(num)
            except ValueError:
                n = 0
            if n < 1:
                fail(f"{flag}: {part!r} is not N or TOPIC=N with N >= 1")
            if sep:
                if not topic:
                    fail(f"{flag}: {part!r} names no topic")
                per_topic[topic] = n
            else:
                default = n
    return default, per_topic




# ---- one entry point per job ----------------------------------------------------------------
def common(args) -> None:
    file_destination(getattr(args, "summary_json", None), "--summary-json")


#: export's flags by the read option each sets (``args`` attribute, flag)
_EXPORT_FLAGS = {"subscribe": ("topic", "--topic"),
                 "subscribePattern": ("topic_pattern", "--topic-pattern"),
                 "assign": ("assign", "--assign"),
                 "startingOffsets": ("starting_offsets", "--starting-offsets"),
                 "endingOffsets": ("ending_offsets", "--ending-offsets")}


def _as_flag(args, err: KafkaLogError) -> KafkaLogError:
    """``err`` from the read options, reworded with the flag the user typed when its
    message starts with the option that flag set (``subscribe: topic x not found`` ->
    ``--topic: topic x not found``); else ``err`` itself."""
    text = err.reason
    for option, (dest, flag) in _EXPORT_FLAGS.items():
        if getattr(args, dest, None) and text.startswith((f"{option}:", f"{option} ")):
            return type(err)(flag + text[len(option):], path=err.path,
                             position=err.position, offset=err.offset)
    return err


def export(args, opts: dict[str, str]) -> bool:
    """export_parquet: returns True when there is nothing to do (``--mode ignore`` and the
    output exists)."""
    common(args)
    parquet_codec(args.compression)
    jobkit.parse_time_window(args.time_from, args.time_to)
    if args.value_schema is not None:
        value_schema(args.value_schema)
    try:
        logdirs, ranges = read_options(opts)
    except (InvalidOptionError, LogLayoutError) as err:
        raise _as_flag(args, err) from None
    check_segments(logdirs, [r.partition_dir for r in ranges],
                   {(r.topic, r.partition): (r.start_offset, r.end_offset) for r in ranges})
    exists = output_destination(args.output, "--output", args.mode)
    return exists and args.mode == "ignore"


def import_files(args, write_opts: dict[str, str]) -> bool:
    """import_files: returns True when there is nothing to do (``--mode ignore`` and the
    topic exists)."""
    from spark_kafkalog.spark.write_options import parse_write_options

    common(args)
    inputs_exist(args.input, "--input")
    parse_write_options(write_opts)
    if args.topic and is_internal_topic(args.topic) and not args.preserve_offsets:
        fail(f"--topic: {args.topic!r} is an internal topic of Kafka; only a restore "
             "(--preserve-offsets of an export of it) may write it")
    if not log_dir_destination(args.path, "--path") or not args.topic:
        return False
    recover_log_dir(args.path, [args.topic])
    if topic_present(args.path, args.topic):
        if args.mode == "errorifexists":
            fail(topic_exists("--topic", args.topic, args.path, "--mode errorifexists; "
                              "--mode append adds to it, overwrite replaces it"))
        return args.mode == "ignore"
    return False


def value_schema(ddl: str) -> list[str]:
    """export's ``--value-schema``: a Spark DDL schema (checked without a JVM); its
    field names."""
    from spark_kafkalog.jobs._ddl import DDLError, field_names

    try:
        return field_names(ddl)
    except DDLError as err:
        fail(f"--value-schema is not a Spark DDL schema: {err} (e.g. 'id long, name "
             "string')")


def copy_destination(args) -> None:
    """copy_topic, before its planning: the destination is not held by a broker, and a
    killed earlier copy's write is rolled back (its topic then does not exist)."""
    if log_dir_destination(args.output, "--output"):
        recover_log_dir(args.output)


def copy(args, plans, reader_opts, writer_opts) -> bool | None:
    """copy_topic, after its own planning: the destination, targets, every option as
    the source and sink will parse it, a selection that holds a record, the segments to
    copy. Returns :func:`copy_selects_something`'s answer (None: undecided)."""
    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.write_options import parse_write_options

    common(args)
    log_dir_destination(args.output, "--output")
    for plan in plans:
        internal_target(plan.source, plan.target, "--rename")
        parse_read_options(reader_opts(args, plan))
        parse_write_options(writer_opts(args, plan))
    if args.offset_map:
        output_destination(args.offset_map, "--offset-map", "overwrite")
    logdirs = LogDirs(args.path, include_internal=True)
    starting = copy_starting(args)
    ranges = {(plan.source, q): (max(args.start_offset or 0,
                                     starting.get(plan.source, {}).get(q, 0)),
                                 min(end, args.end_offset if args.end_offset is not None
                                     else end))
              for plan in plans for q, end in plan.ending.items()}
    parts = [p for plan in plans for p in logdirs.partitions(plan.source)
             if p.partition in plan.source_partitions]
    selects = copy_selects_something(args, logdirs, parts, ranges)
    if not (args.time_from or args.time_to):
        # with a window, segments outside it are not read: the read finds damage
        check_segments(logdirs, parts, ranges)
    return selects


def copy_selects_something(args, logdirs: LogDirs, parts, ranges: dict) -> bool | None:
    """copy_topic: refuse a selection that holds no record (an offset range past the
    log, a time window no record falls in), which would otherwise create an empty topic
    that makes the corrected run fail with "already exists". True when it holds one (or
    no window or range was asked for: an empty topic is copied as it is); None when
    undecided: a window is decided by
    :func:`~spark_kafkalog.log.read.seek.window_has_records` (the time index, then a few
    MiB of batches per partition), and the job then asks Spark for one row before it
    writes anything (:func:`spark_kafkalog.jobs.copy_topic.run`)."""
    from spark_kafkalog.log.read.seek import log_start_offset, window_has_records

    lo, hi = jobkit.parse_time_window(args.time_from, args.time_to)
    if lo is None and hi is None and not (
            args.start_offset is not None or args.end_offset is not None
            or args.starting_offsets or args.ending_offsets):
        return True
    spans = {}
    undecided = False
    for p in parts:
        start, end = ranges[(p.topic, p.partition)]
        start = max(start, log_start_offset(logdirs, p))
        spans[(p.topic, p.partition)] = (start, end)
        if start >= end:
            continue
        if lo is None and hi is None:
            return True
        found = window_has_records(logdirs, p, start, end, lo or 0, hi)
        if found:
            return True
        undecided = undecided or found is None
    if undecided:
        return None
    fail(empty_selection(args, sorted({t for t, _ in spans}), spans))


def empty_selection(args, topics, spans: dict | None = None) -> str:
    """copy_topic's one line for a window or offset range that selects no record of
    ``topics`` (``spans``: ``(topic, partition) -> (start, end)`` when the offsets alone
    are empty)."""
    lo, hi = jobkit.parse_time_window(args.time_from, args.time_to)
    if lo is None and hi is None:
        shown = ", ".join(f"{t}-{q} [{s}, {e})" for (t, q), (s, e) in
                          sorted((spans or {}).items())[:6])
        more = f" and {len(spans) - 6} more" if spans and len(spans) > 6 else ""
        return (f"the offsets selected hold no record of {', '.join(topics)} (offsets to "
                f"copy per partition: {shown}{more}, each empty): nothing to copy, nothing "
                "created")
    window = " ".join(f for f in ((f"--from {args.time_from}" if args.time_from else ""),
                                  (f"--to {args.time_to}" if args.time_to else "")) if f)
    bounds = (jobkit.iso_ms(lo) if lo is not None else "the first record",
              jobkit.iso_ms(hi) if hi is not None else "the last")
    return (f"{window}: no record of {', '.join(topics)} in the offsets selected has a "
            f"timestamp in [{bounds[0]}, {bounds[1]}): nothing to copy, nothing created")


def copy_starting(args) -> dict:
    """copy_topic's --starting-offsets as ``{topic: {partition: offset}}`` ({} when it
    does not parse: copy_topic's planning has said so already)."""
    try:
        raw = json.loads(args.starting_offsets) if args.starting_offsets else {}
        return {t: {int(q): int(o) for q, o in parts.items()} for t, parts in raw.items()}
    except (ValueError, AttributeError, TypeError):
        return {}


def consumer_offsets(args, fs_options: dict, owned) -> None:
    """consumer_offsets: ``owned(name)`` says which names under --output the job wrote."""
    common(args)
    logdirs = source_log_dirs(args.path, "--path", fs_options)
    topics_present(logdirs, ["__consumer_offsets"], "--path", args.path)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        fail(f"--output: {args.out} is not a directory")
    if os.path.isdir(args.out):
        foreign = sorted(n for n in os.listdir(args.out) if not owned(n))
        if foreign:
            fail(f"--output: {args.out} holds {foreign[0]!r}, which consumer_offsets does "
                 "not write, and the job replaces the whole directory; choose a new or "
                 "empty directory")
    if args.translate:
        inputs_exist([args.translate], "--translate")
    check_segments(logdirs, logdirs.partitions("__consumer_offsets"))


def compact(args, topics, partitions) -> None:
    """compact: the log dir (not held by a broker), its topics and partitions, segments."""
    common(args)
    logdirs = source_log_dirs(args.path, "--path")
    fs, root = resolve_filesystem(args.path)
    check_broker_lock(fs, root)
    remove_dead_staging(fs, root)
    topics_present(logdirs, topics, "--topic", args.path)
    parts = []
    for t in topics:
        present = [p for p in logdirs.partitions(t)]
        if partitions is not None:
            missing = sorted(set(partitions) - {p.partition for p in present})
            if missing:
                fail(f"--partition: partitions {missing} of {t!r} are not in {args.path}")
            present = [p for p in present if p.partition in partitions]
        parts.extend(present)
    check_segments(logdirs, parts)


def retention(args) -> None:
    common(args)
    source_log_dirs(args.path, "--path")
    for one in (p.strip() for p in args.path.split(",") if p.strip()):
        fs, root = resolve_filesystem(one)
        check_broker_lock(fs, root)
        remove_dead_staging(fs, root)


def report(args) -> None:
    common(args)
    source_log_dirs(args.path, "--path")
    file_destination(args.html, "--html")
    file_destination(args.json, "--json")
