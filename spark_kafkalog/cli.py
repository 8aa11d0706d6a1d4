"""The ``kafkalog`` command: look at a Kafka log directory without a broker.

::

    kafkalog inspect PATH...   topics, partitions, offsets, sizes, time ranges, codecs
    kafkalog dump FILE...      what Kafka's DumpLogSegments prints, for segments, index
                               files, producer snapshots and checkpoint files
    kafkalog verify PATH...    CRCs, offset order, indexes against the log, checkpoints

``PATH`` is a broker log dir (a ``log.dirs`` entry: it holds ``<topic>-<partition>``
directories) or one partition directory; several paths are the JBOD dirs of one broker.
Any ``pyarrow.fs`` URI works (``/local``, ``file://``, ``s3://``, ``gs://``, ``hdfs://``);
filesystem options are given as ``--fs-option KEY=VALUE`` (repeatable), with the keys
of :func:`spark_kafkalog.log.resolve_filesystem`, e.g.
``--fs-option s3.endpoint=http://127.0.0.1:9000 --fs-option s3.region=us-east-1``.

Output is plain aligned text for people; ``--json`` prints JSON for scripts (one
document for inspect and verify, one JSON object per line for dump). A progress bar is
drawn on stderr during long scans, only when stderr is a terminal.

Exit status:

- ``inspect``: 0, or 2 when a path cannot be read or an option is wrong.
- ``dump``: 0; 1 when the file holds damage (bytes that are not batches, an index entry
  pointing at no batch, a malformed checkpoint, and CRC mismatches with
  ``--verify-crc``); 2 as above.
- ``verify``: 0 when nothing is wrong; 1 when anything is (each finding names the file,
  the byte position and the offset); 2 as above. A torn tail at the end of a
  partition's last segment — what a crash leaves and what a broker's recovery
  truncates — is reported as a warning and does not fail the verification unless
  ``--strict`` is given (see :mod:`spark_kafkalog.log.diagnose.verify` for what is a warning).

Everything is read in bounded windows: no segment is ever read into memory whole.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import posixpath
import struct
import sys
import time
import warnings
import zlib
from datetime import datetime, timezone
from typing import Callable, Iterable, Sequence, TextIO

import crc32c
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from spark_kafkalog.errors import InvalidOptionError, KafkaLogError, LogLayoutError
from spark_kafkalog.format import decode_run, decompress
from spark_kafkalog.format.decode import decode_varint, decode_varlong
from spark_kafkalog.format.wire import (
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    CODEC_NAMES,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_TYPE_NAMES,
    HEADER_PEEK,
    LEGACY_MAGIC_POS,
    LEGACY_TIMESTAMP_TYPE,
    LOG_OVERHEAD,
    MAGIC_POS,
    V2_ATTRIBUTES_POS,
    V2_LAST_OFFSET_DELTA_POS,
    V2_RECORDS_POS,
)
from spark_kafkalog.log import (
    LEADER_EPOCH_CHECKPOINT,
    LogDirs,
    PartitionDir,
    ReadStats,
    Segment,
    TornTailWarning,
    inspect_partition,
    parse_partition_dir_name,
    resolve_filesystem,
)
from spark_kafkalog.log.files.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_checkpoint,
    parse_leader_epoch_checkpoint,
)
from spark_kafkalog.log.io import list_dir, read_small_file
from spark_kafkalog.log.files.index import OFFSET_INDEX_ENTRY, TIME_INDEX_ENTRY
from spark_kafkalog.log.read.scan import DEFAULT_WINDOW_BYTES, scan_windows
from spark_kafkalog.log.files.txn import (
    ABORTED_TXN,
    SNAPSHOT_ENTRY,
    SNAPSHOT_HEADER,
    TXN_INDEX_VERSION,
    parse_producer_snapshot,
)
from spark_kafkalog.log.diagnose.verify import ERROR, Finding, verify_log_dirs

__all__ = ["main", "Progress", "format_table"]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 128 + 13          # as if killed by SIGPIPE

_OFFSET_CHECKPOINTS = (REPLICATION_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
                       LOG_START_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT)
_LEFTOVER_SUFFIXES = (".deleted", ".cleaned", ".swap")
_INT32_MAX = 0x7FFFFFFF
#: index entries read per chunk while dumping (bounded memory for 10 MiB index files)
_INDEX_CHUNK_ENTRIES = 1 << 16
#: files read whole by dump (checkpoints, producer snapshots, txn indexes)
_SMALL_FILE_LIMIT = 256 * 1024 * 1024


# ---- presentation helpers -------------------------------------------------------------------

class Progress:
    """A one-line progress bar on ``stream`` (stderr), drawn only when it is a terminal.

    ``update(done)`` is cheap to call often: the line is redrawn at most every
    ``min_interval`` seconds. ``close()`` erases it, so the bar never mixes with output
    or findings."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None,
                 enabled: bool | None = None, min_interval: float = 0.1):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty()) if callable(isatty) else False
        self.enabled = enabled and total > 0
        self.total = max(int(total), 1)
        self.label = label
        self.min_interval = min_interval
        self._last = float("-inf")
        self._width = 0
        self.done = 0

    def update(self, done: int) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < self.min_interval and done < self.total:
            return
        self._last = now
        frac = min(max(done / self.total, 0.0), 1.0)
        bar = "#" * int(frac * 30)
        line = (f"{self.label} [{bar:<30}] {frac * 100:5.1f}% "
                f"{human_bytes(min(done, self.total))} / {human_bytes(self.total)}")
        pad = " " * max(self._width - len(line), 0)
        self.stream.write("\r" + line + pad)
        self.stream.flush()
        self._width = len(line)

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    value = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def iso_ms(ts: int | None) -> str:
    """Epoch milliseconds as an ISO-8601 UTC string (``-`` for none)."""
    if ts is None or ts < 0:
        return "-"
    try:
        dt = datetime.fromtimestamp(ts / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return str(ts)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts % 1000:03d}Z"


def format_table(headers: Sequence[str], rows: Iterable[Sequence], *,
                 right: Iterable[int] = (), indent: str = "") -> list[str]:
    """Plain aligned text: one line of headers, one per row; columns in ``right`` are
    right-aligned (numbers). ``None`` shows as ``-``."""
    right = set(right)
    cells = [[str(h) for h in headers]]
    for row in rows:
        cells.append(["-" if v is None else str(v) for v in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for r in cells:
        parts = [c.rjust(w) if i in right else c.ljust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        lines.append((indent + "  ".join(parts)).rstrip())
    return lines


def _print_lines(lines: Iterable[str], out: TextIO) -> None:
    for line in lines:
        out.write(line + "\n")


def _fs_options(pairs: Sequence[str] | None) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"--fs-option expects KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    return options


def _plain_uri(uri: str) -> str:
    """A local path made absolute (URIs are left alone)."""
    if "://" in uri:
        return uri.rstrip("/") or uri
    return os.path.abspath(os.path.expanduser(uri))


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
        uri = _plain_uri(raw)
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
        if topic is None:
            for t in logdirs.topics():
                for p in logdirs.partitions(t):
                    if p.root == root:
                        selected.setdefault((p.topic, p.partition), p)
        else:
            p = logdirs.partition(topic, partition)
            selected.setdefault((p.topic, p.partition), p)
    parts = [selected[k] for k in sorted(selected)]
    if topics:
        keep = set(topics)
        parts = [p for p in parts if p.topic in keep]
    return logdirs, parts


# ---- inspect ------------------------------------------------------------------------------

def _partition_summary(info, scanned: bool) -> dict:
    s = info.state
    segs = info.segments
    first_ts = s.first_timestamp if s is not None else None
    max_ts = s.max_timestamp if s is not None else None
    if scanned:
        mins = [x.min_timestamp for x in segs if x.min_timestamp is not None]
        maxs = [x.max_timestamp for x in segs if x.max_timestamp is not None]
        seg_min = min(mins) if mins else None
        if max_ts is None and maxs:
            max_ts = max(maxs)
    else:
        seg_min = None
    return {
        "topic": info.topic, "partition": info.partition, "root": info.root,
        "path": info.path,
        "log_start_offset": s.log_start_offset if s else None,
        "high_watermark": s.high_watermark if s else None,
        "last_stable_offset": s.last_stable_offset if s else None,
        "log_end_offset": s.log_end_offset if s else None,
        "size_bytes": sum(x.size for x in segs),
        "segment_count": len(segs),
        "batches": sum(x.batches for x in segs) if scanned else None,
        "records": sum(x.data_records for x in segs) if scanned else None,
        "control_batches": sum(x.control_batches for x in segs) if scanned else None,
        "transactional_batches": (sum(x.transactional_batches for x in segs)
                                  if scanned else None),
        "first_timestamp": first_ts,
        "min_timestamp": seg_min,
        "max_timestamp": max_ts,
        "codecs": list(info.codecs) if scanned else None,
        "magics": list(info.magics) if scanned else None,
        "checkpoints": dict(info.checkpoints),
        "leader_epochs": [list(e) for e in info.leader_epochs],
        "snapshots": list(info.snapshots),
        "problems": [{"kind": p.kind, "path": p.path, "position": p.position,
                      "offset": p.offset, "message": p.message} for p in info.all_problems],
        "segments": [{
            "base_offset": x.base_offset, "path": x.path, "size_bytes": x.size,
            "swap": x.swap, "index_path": x.index_path, "timeindex_path": x.timeindex_path,
            "txnindex_path": x.txnindex_path, "index_entries": x.index_entries,
            "timeindex_entries": x.timeindex_entries, "aborted_txns": x.aborted_txns,
            "batches": x.batches if scanned else None,
            "records": x.data_records if scanned else None,
            "control_batches": x.control_batches if scanned else None,
            "empty_batches": x.empty_batches if scanned else None,
            "first_offset": x.first_offset, "last_offset": x.last_offset,
            "min_timestamp": x.min_timestamp, "max_timestamp": x.max_timestamp,
            "codecs": list(x.codecs) if scanned else None,
            "magics": list(x.magics) if scanned else None,
            "valid_bytes": x.valid_bytes,
        } for x in segs],
    }


def _cmd_inspect(args, out: TextIO, err: TextIO) -> int:
    logdirs, parts = _select(args.paths, _fs_options(args.fs_option), args.topic)
    scan = not args.no_scan
    progress = Progress(sum(p.size_bytes for p in parts) if scan else 0, "inspect",
                        err, enabled=None if args.progress else False)
    summaries = []
    done = 0
    try:
        for p in parts:
            base = done
            info = inspect_partition(
                logdirs, p, scan=scan, isolation_level="read_committed",
                progress=lambda n, _t, base=base: progress.update(base + n))
            done += p.size_bytes
            progress.update(done)
            summaries.append(_partition_summary(info, scan))
    finally:
        progress.close()
    if args.json:
        json.dump({"roots": list(logdirs.roots), "scanned": scan, "partitions": summaries},
                  out, indent=2)
        out.write("\n")
        return EXIT_OK
    out.write(f"log dirs: {', '.join(logdirs.roots)}\n")
    if not summaries:
        out.write("no partitions found\n")
        return EXIT_OK
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
    out.write(f"\n{len(summaries)} partitions, {sum(len(s['segments']) for s in summaries)} "
              f"segments, {human_bytes(total)}"
              + (f", {sum(s['records'] for s in summaries)} records" if scan else "")
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
    problems = [(s, pr) for s in summaries for pr in s["problems"]]
    if problems:
        out.write(f"\n{len(problems)} problems (run `kafkalog verify` for severities):\n")
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
    try:
        logdirs, parts = _select(args.paths, fs_options, args.topic)
    except LogLayoutError as e:
        if "present in two log dirs" not in e.reason:
            raise
        # the same partition in two log dirs: a broker refuses to start — a finding
        finding = Finding(ERROR, "layout", e.path or "", e.position, e.offset, e.reason)
        return _report_verify(args, out, None, [finding])
    if not parts:
        err.write(f"kafkalog verify: no partitions found in {', '.join(args.paths)}\n")
    factor = 2 if args.deep else 1
    progress = Progress(sum(p.size_bytes for p in parts) * factor, "verify", err,
                        enabled=None if args.progress else False)
    try:
        result = verify_log_dirs(logdirs, parts, verify_crc=not args.no_crc, deep=args.deep,
                                 progress=progress.update)
    finally:
        progress.close()
    return _report_verify(args, out, result, result.findings)


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
        out.write(f"verified {result.partitions} partitions, {result.segments} segments, "
                  f"{result.batches} batches, {result.records} records, "
                  f"{human_bytes(result.bytes)}: {len(failing)} errors, "
                  f"{len(warnings_)} warnings\n")
    else:
        out.write(f"{len(failing)} errors\n")
    if warnings_ and not failing:
        out.write("warnings only (a crash's torn tail is recoverable); --strict fails on "
                  "them\n")
    return status


# ---- dump: shared ----------------------------------------------------------------------------

class _Dump:
    """Output of one dump run: text lines or JSON lines on ``out``, problems on ``err``
    (text) or in the JSON stream; remembers whether any problem was reported."""

    def __init__(self, out: TextIO, err: TextIO, as_json: bool):
        self.out = out
        self.err = err
        self.json = as_json
        self.problems = 0

    def line(self, text: str, obj: dict) -> None:
        if self.json:
            self.out.write(json.dumps(obj, separators=(",", ":")) + "\n")
        else:
            self.out.write(text + "\n")

    def note(self, text: str, obj: dict | None = None) -> None:
        """Something worth saying that is not damage (Kafka prints these to stderr)."""
        if self.json:
            self.out.write(json.dumps({"type": "note", "message": text, **(obj or {})},
                                      separators=(",", ":")) + "\n")
        else:
            self.err.write(text + "\n")

    def problem(self, path: str, position: int | None, offset: int | None,
                message: str) -> None:
        self.problems += 1
        if self.json:
            self.out.write(json.dumps({"type": "problem", "path": path, "position": position,
                                       "offset": offset, "message": message},
                                      separators=(",", ":")) + "\n")
        else:
            where = [path]
            if position is not None:
                where.append(f"position {position}")
            if offset is not None:
                where.append(f"offset {offset}")
            self.err.write(f"problem: {message} ({', '.join(where)})\n")


def _file_kind(name: str) -> str:
    base = name
    for suffix in _LEFTOVER_SUFFIXES:
        if base.endswith(suffix):
            base = base[:-len(suffix)]
    if base in _OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if base == LEADER_EPOCH_CHECKPOINT:
        return "leader-epoch-checkpoint"
    for ext, kind in ((".log", "log"), (".checkpoint", "log"), (".index", "index"),
                      (".timeindex", "timeindex"), (".txnindex", "txnindex"),
                      (".snapshot", "snapshot")):
        if base.endswith(ext):
            return kind
    raise InvalidOptionError(f"cannot dump {name!r}: expected a .log, .index, .timeindex, "
                             ".txnindex, .snapshot, KRaft .checkpoint or checkpoint file")


def _base_offset(name: str) -> int:
    """The base offset in a segment-style file name (``00000000000000000042.log``); 0
    for names without one (KRaft bootstrap.checkpoint)."""
    digits = name.split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else 0


def _sibling(path: str, name: str) -> str:
    return posixpath.join(posixpath.dirname(path), name)


def _file_size(fs, path: str) -> int | None:
    info = fs.get_file_info(path)
    return None if info.type == pafs.FileType.NotFound else int(info.size or 0)


def _increment_sequence(seq: int, delta: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: sequences wrap at Integer.MAX_VALUE."""
    if seq > _INT32_MAX - delta:
        return delta - (_INT32_MAX - seq) - 1
    return seq + delta


# ---- dump: record batches ----------------------------------------------------------------------

def _timestamp_type(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    bit = ATTR_TIMESTAMP_TYPE if magic == 2 else LEGACY_TIMESTAMP_TYPE
    return "LogAppendTime" if attributes & bit else "CreateTime"


def _batch_valid(view: memoryview, magic: int, stored_crc: int) -> bool:
    """Whether the stored checksum matches: CRC-32C of [attributes, end) for v2, CRC-32
    of [magic, end) for a legacy message."""
    if magic == 2:
        return crc32c.crc32c(view[V2_ATTRIBUTES_POS:]) == stored_crc
    return (zlib.crc32(view[LEGACY_MAGIC_POS:]) & 0xFFFFFFFF) == stored_crc


def _control_records(view: memoryview, codec: int, count: int):
    """Records of a v2 control batch as ``(offset delta, timestamp delta, key, value,
    header keys)``, walked within the batch's bytes (decompressed first if needed).
    Raises KafkaLogError on bytes that do not hold ``count`` records."""
    payload = view[V2_RECORDS_POS:]
    data = bytes(decompress(codec, payload)) if codec else bytes(payload)
    out = []
    q = 0
    for _ in range(max(count, 0)):
        length, q = decode_varint(data, q)
        end = q + length
        if length < 0 or end > len(data):
            raise LogLayoutError(f"control record of {length} bytes runs past its batch")
        q += 1                                               # attributes
        ts_delta, q = decode_varlong(data, q)
        off_delta, q = decode_varint(data, q)
        klen, q = decode_varint(data, q)
        key = data[q:q + klen] if klen >= 0 else None
        q += max(klen, 0)
        vlen, q = decode_varint(data, q)
        value = data[q:q + vlen] if vlen >= 0 else None
        q += max(vlen, 0)
        hcount, q = decode_varint(data, q)
        hkeys = []
        for _h in range(max(hcount, 0)):
            hk, q = decode_varint(data, q)
            hkeys.append(data[q:q + max(hk, 0)].decode("utf-8", "replace"))
            q += max(hk, 0)
            hv, q = decode_varint(data, q)
            q += max(hv, 0)
        if q > end:
            raise LogLayoutError("control record fields run past the record's length")
        out.append((off_delta, ts_delta, key, value, hkeys))
        q = end
    return out


def _describe_control(key: bytes | None, value: bytes | None) -> tuple[str, dict]:
    if key is None or len(key) < 4:
        return " controlType: unreadable", {"controlType": None}
    ctype = struct.unpack_from(">h", key, 2)[0]
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT) and value is not None and len(value) >= 6:
        epoch = struct.unpack_from(">i", value, 2)[0]
        name = CONTROL_TYPE_NAMES[ctype]
        return (f" endTxnMarker: {name} coordinatorEpoch: {epoch}",
                {"endTxnMarker": name, "coordinatorEpoch": epoch})
    name = CONTROL_TYPE_NAMES.get(ctype, "UNKNOWN")
    return f" controlType: {name}({ctype})", {"controlType": name, "controlTypeId": ctype}


def _text(data: bytes | None) -> str:
    return data.decode("utf-8", "replace") if data is not None else ""


def _dump_control_records(d: _Dump, path: str, view: memoryview, h: dict) -> None:
    base, pos = h["base_offset"], h["position"]
    ttype = _timestamp_type(h["magic"], h["attributes"])
    try:
        recs = _control_records(view, h["codec"], h["record_count"])
    except KafkaLogError as e:
        d.problem(path, pos, base, f"control batch records do not decode: {e.reason}")
        return
    for off_delta, ts_delta, key, value, hkeys in recs:
        ts = h["max_timestamp"] if ttype == "LogAppendTime" else h["first_timestamp"] + ts_delta
        seq = -1 if h["base_sequence"] < 0 else _increment_sequence(h["base_sequence"],
                                                                    off_delta)
        text, extra = _describe_control(key, value)
        ksize = -1 if key is None else len(key)
        vsize = -1 if value is None else len(value)
        d.line(f"| offset: {base + off_delta} {ttype}: {ts} keySize: {ksize} "
               f"valueSize: {vsize} sequence: {seq} headerKeys: [{','.join(hkeys)}]" + text,
               {"type": "record", "offset": base + off_delta, "timestampType": ttype,
                "timestamp": ts, "keySize": ksize, "valueSize": vsize, "sequence": seq,
                "headerKeys": hkeys, "control": True, **extra})


class _Rows:
    """Decoded data records of a run of batches, as Python lists (printing is per
    record anyway); ``next`` hands out the rows of one batch after another."""

    def __init__(self, rb: pa.RecordBatch, print_data: bool):
        self.offsets = rb.column("offset").to_pylist()
        self.stamps = rb.column("timestamp").cast(pa.int64()).to_pylist()
        self.key_sizes = pc.binary_length(rb.column("key")).to_pylist()
        self.value_sizes = pc.binary_length(rb.column("value")).to_pylist()
        self.headers = rb.column("headers").to_pylist()
        self.keys = rb.column("key").to_pylist() if print_data else None
        self.values = rb.column("value").to_pylist() if print_data else None
        self.at = 0

    def take(self, last_offset: int) -> range:
        """Indexes of the rows up to ``last_offset`` (the next batch's records)."""
        start = k = self.at
        while k < len(self.offsets) and self.offsets[k] <= last_offset:
            k += 1
        self.at = k
        return range(start, k)


def _decode_rows(view: memoryview, *, verify_crc: bool, position: int, print_data: bool
                 ) -> _Rows:
    return _Rows(decode_run(view, verify_crc=verify_crc, include_headers=True,
                            position_base=position), print_data)


def _print_rows(d: _Dump, h: dict, valid: bool, rows: _Rows, idx: range, args) -> None:
    magic, base = h["magic"], h["base_offset"]
    ttype = _timestamp_type(magic, h["attributes"])
    legacy_crc = magic < 2 and h["codec"] == 0      # the batch is the message itself
    for i in idx:
        off, ts = rows.offsets[i], rows.stamps[i]
        ts_ms = -1 if ts is None else ts // 1000
        ksize = rows.key_sizes[i]
        vsize = rows.value_sizes[i]
        ksize = -1 if ksize is None else ksize
        vsize = -1 if vsize is None else vsize
        obj = {"type": "record", "offset": off, "timestampType": ttype, "timestamp": ts_ms,
               "keySize": ksize, "valueSize": vsize}
        text = f"| offset: {off} {ttype}: {ts_ms} keySize: {ksize} valueSize: {vsize}"
        if magic == 2:
            seq = -1 if h["base_sequence"] < 0 else _increment_sequence(h["base_sequence"],
                                                                        off - base)
            hdrs = rows.headers[i]
            hkeys = [x["key"] for x in hdrs] if hdrs else []
            text += f" sequence: {seq} headerKeys: [{','.join(hkeys)}]"
            obj.update(sequence=seq, headerKeys=hkeys)
        elif legacy_crc:
            text += f" isValid: {str(valid).lower()} crc: {h['crc']}"
            obj.update(isValid=valid, crc=h["crc"])
        if args.print_data:
            key, value = rows.keys[i], rows.values[i]
            if key is not None:
                text += f" key: {_text(key)}"
            if value is not None:
                text += f" payload: {_text(value)}"
            obj.update(key=None if key is None else _text(key),
                       payload=None if value is None else _text(value))
        d.line(text, obj)


def _dump_batch_records(d: _Dump, path: str, view: memoryview, h: dict, valid: bool,
                        args) -> None:
    """Records of one batch on its own (after its group failed to decode as a whole):
    a batch that does not decode is a problem at its position."""
    if h["magic"] == 2 and h["record_count"] == 0:
        return
    try:
        # a mismatch of the batch's own checksum is reported once, by the caller; what
        # is left to check here are the inner messages of a compressed legacy wrapper
        rows = _decode_rows(view, verify_crc=args.verify_crc and valid,
                            position=h["position"], print_data=args.print_data)
    except KafkaLogError as e:
        d.problem(path, e.position if e.position is not None else h["position"],
                  e.offset if e.offset is not None else h["base_offset"],
                  f"records do not decode: {e.reason}")
        return
    _print_rows(d, h, valid, rows, range(len(rows.offsets)), args)


_HEADER_COLUMNS = ("position", "size", "magic", "attributes", "codec", "base_offset",
                   "last_offset", "first_timestamp", "max_timestamp", "producer_id",
                   "producer_epoch", "base_sequence", "record_count",
                   "partition_leader_epoch", "is_transactional", "is_control", "crc")


def _dump_batch_line(d: _Dump, h: dict, valid: bool) -> None:
    magic = h["magic"]
    ttype = _timestamp_type(magic, h["attributes"])
    codec = CODEC_NAMES.get(h["codec"], f"codec-{h['codec']}")
    obj = {"type": "batch", "baseOffset": h["base_offset"], "lastOffset": h["last_offset"],
           "position": h["position"], "timestampType": ttype,
           "maxTimestamp": h["max_timestamp"], "size": h["size"], "magic": magic,
           "compresscodec": codec, "crc": h["crc"], "isvalid": valid}
    if magic == 2:
        last_seq = -1 if h["base_sequence"] < 0 else _increment_sequence(
            h["base_sequence"], h["last_offset"] - h["base_offset"])
        horizon = h["first_timestamp"] if h["attributes"] & ATTR_DELETE_HORIZON else None
        horizon_text = "OptionalLong.empty" if horizon is None else f"OptionalLong[{horizon}]"
        text = (f"baseOffset: {h['base_offset']} lastOffset: {h['last_offset']} "
                f"count: {h['record_count']} baseSequence: {h['base_sequence']} "
                f"lastSequence: {last_seq} producerId: {h['producer_id']} "
                f"producerEpoch: {h['producer_epoch']} "
                f"partitionLeaderEpoch: {h['partition_leader_epoch']} "
                f"isTransactional: {str(h['is_transactional']).lower()} "
                f"isControl: {str(h['is_control']).lower()} deleteHorizonMs: {horizon_text}")
        obj.update(count=h["record_count"], baseSequence=h["base_sequence"],
                   lastSequence=last_seq, producerId=h["producer_id"],
                   producerEpoch=h["producer_epoch"],
                   partitionLeaderEpoch=h["partition_leader_epoch"],
                   isTransactional=h["is_transactional"], isControl=h["is_control"],
                   deleteHorizonMs=horizon)
    else:
        # a legacy entry shows its own offset (a compressed wrapper's is its last inner one)
        text = f"offset: {h['last_offset']}"
    text += (f" position: {h['position']} {ttype}: {h['max_timestamp']} size: {h['size']} "
             f"magic: {magic} compresscodec: {codec} crc: {h['crc']} "
             f"isvalid: {str(valid).lower()}")
    d.line(text, obj)


#: records are decoded for groups of whole batches of about this many bytes at a time
#: (one kernel call per group, not per batch; decoded rows of one group in memory)
_DECODE_GROUP_BYTES = 1 << 20


def _dump_window(d: _Dump, path: str, w, args) -> None:
    cols = {c: w.headers.column(c).to_pylist() for c in _HEADER_COLUMNS}
    n = w.headers.num_rows
    hs = [{c: cols[c][r] for c in _HEADER_COLUMNS} for r in range(n)]
    r = 0
    while r < n:
        end, size = r, 0
        while end < n and (end == r or size < _DECODE_GROUP_BYTES):
            size += hs[end]["size"]
            end += 1
        _dump_group(d, path, w, hs[r:end], args)
        r = end


def _dump_group(d: _Dump, path: str, w, hs: list[dict], args) -> None:
    views, valid = [], []
    for h in hs:
        start = h["position"] - w.position
        view = w.data[start:start + h["size"]]
        views.append(view)
        valid.append(_batch_valid(view, h["magic"], h["crc"]))
    rows = None
    if args.records:
        lo = hs[0]["position"] - w.position
        hi = hs[-1]["position"] + hs[-1]["size"] - w.position
        try:
            rows = _decode_rows(w.data[lo:hi], verify_crc=args.verify_crc and all(valid),
                                position=hs[0]["position"], print_data=args.print_data)
        except KafkaLogError:
            rows = None         # decode batch by batch below, to say which one is bad
    for h, view, ok in zip(hs, views, valid):
        _dump_batch_line(d, h, ok)
        if not ok and args.verify_crc:
            d.problem(path, h["position"], h["base_offset"],
                      f"checksum mismatch: stored {h['crc']}")
        if not args.records:
            continue
        if h["magic"] == 2 and h["is_control"]:
            _dump_control_records(d, path, view, h)
        elif rows is not None:
            _print_rows(d, h, ok, rows, rows.take(h["last_offset"]), args)
        else:
            _dump_batch_records(d, path, view, h, ok, args)


def _dump_log(d: _Dump, fs, path: str, args) -> None:
    name = posixpath.basename(path)
    size = _file_size(fs, path)
    if size is None:
        raise LogLayoutError("no such file", path=path)
    base = _base_offset(name)
    if name.endswith(".checkpoint"):
        # a KRaft snapshot (<end offset>-<epoch>.checkpoint) or bootstrap.checkpoint: its
        # batches are numbered from 0, whatever the name says
        stem = name[:-len(".checkpoint")]
        end, _, epoch = stem.partition("-")
        if end.isdigit() and epoch.isdigit():
            d.line(f"Snapshot end offset: {int(end)}, epoch: {int(epoch)}",
                   {"type": "file", "path": path, "kind": "snapshot",
                    "endOffset": int(end), "epoch": int(epoch)})
        else:
            d.line("KRaft bootstrap snapshot" if stem == "bootstrap" else f"Snapshot {name}",
                   {"type": "file", "path": path, "kind": "snapshot"})
        base = 0
    else:
        d.line(f"Log starting offset: {base}",
               {"type": "file", "path": path, "kind": "log", "baseOffset": base})
    seg = Segment(base, path, size, None, None, None)
    p = PartitionDir("", 0, "", posixpath.dirname(path), (seg,))
    stats = ReadStats()
    reported = 0

    def flush_skipped(before: int | None) -> int:
        k = reported
        while k < len(stats.skipped) and (before is None or stats.skipped[k].start < before):
            s = stats.skipped[k]
            # garbage "claims" an offset too: only show one a batch of this file could have
            offset = s.offset if s.offset is not None and \
                base <= s.offset < base + (1 << 31) else None
            d.problem(path, s.start, offset,
                      f"{s.reason}; skipped {s.end - s.start} bytes up to position {s.end}")
            k += 1
        return k

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornTailWarning)
        # CRCs are not checked by the scan: a batch whose checksum does not match is
        # still shown, with isvalid: false (as DumpLogSegments does)
        for w in scan_windows(fs, p, on_corruption="skip", stats=stats, verify_crc=False,
                              quiet=True, window_bytes=args.window_bytes):
            reported = flush_skipped(w.position)
            _dump_window(d, path, w, args)
    reported = flush_skipped(None)
    if stats.torn_tail is not None:
        _p, where, nbytes = stats.torn_tail
        d.note(f"Found {nbytes} invalid bytes at the end of {name} (position {where}: a torn "
               "batch or zero padding, which broker recovery truncates)",
               {"path": path, "position": where, "bytes": nbytes})


# ---- dump: index files ---------------------------------------------------------------------

def _peek_batch(f, log_size: int, position: int) -> tuple[int, int, int] | None:
    """``(magic, first offset or -1, last offset)`` of the batch the 27 bytes at
    ``position`` describe, or None when no plausible batch starts there."""
    if position < 0 or position + HEADER_PEEK > log_size:
        return None
    raw = f.read_at(min(V2_LAST_OFFSET_DELTA_POS + 4, log_size - position), position)
    if len(raw) < HEADER_PEEK:
        return None
    offset, length = struct.unpack_from(">qi", raw, 0)
    magic = raw[MAGIC_POS]
    if magic > 2 or length < 0 or position + LOG_OVERHEAD + length > log_size:
        return None
    if magic == 2:
        if len(raw) < V2_LAST_OFFSET_DELTA_POS + 4:
            return None
        delta = struct.unpack_from(">i", raw, V2_LAST_OFFSET_DELTA_POS)[0]
        return magic, offset, offset + delta
    return magic, -1, offset


def _iter_entries(fs, path: str, entry: struct.Struct):
    """``(k, fields)`` for each whole entry of an index file, read in bounded chunks."""
    with fs.open_input_file(path) as f:
        size = f.size()
        n = size // entry.size
        k = 0
        while k < n:
            m = min(_INDEX_CHUNK_ENTRIES, n - k)
            chunk = f.read_at(m * entry.size, k * entry.size)
            for j, fields in enumerate(entry.iter_unpack(chunk[:len(chunk) - len(chunk) % entry.size])):
                yield k + j, fields
            k += m


def _dump_offset_index(d: _Dump, fs, path: str, args) -> None:
    name = posixpath.basename(path)
    base = _base_offset(name)
    size = _file_size(fs, path)
    if size is None:
        raise LogLayoutError("no such file", path=path)
    log_path = _sibling(path, f"{name.split('.', 1)[0]}.log")
    log_size = _file_size(fs, log_path)
    if log_size is None:
        d.note(f"no {posixpath.basename(log_path)} next to the index: entries are not "
               "checked against the log")
    if size % OFFSET_INDEX_ENTRY.size:
        d.note(f"{size % OFFSET_INDEX_ENTRY.size} trailing bytes after the last whole entry "
               "(ignored, as Kafka does)")
    logf = fs.open_input_file(log_path) if log_size is not None else None
    count = 0
    mismatches = []
    prev = None
    try:
        for k, (rel, position) in _iter_entries(fs, path, OFFSET_INDEX_ENTRY):
            if k > 0 and rel == 0:
                break               # the zero-filled tail of a preallocated index
            offset = base + rel
            count += 1
            d.line(f"offset: {offset} position: {position}",
                   {"type": "index_entry", "entry": k, "offset": offset, "position": position})
            where = k * OFFSET_INDEX_ENTRY.size
            if prev is not None and (offset <= prev[0] or position <= prev[1]):
                d.problem(path, where, offset, f"entry {k} ({offset}, {position}) does not "
                          f"increase after ({prev[0]}, {prev[1]})")
            prev = (offset, position)
            if logf is None:
                continue
            batch = _peek_batch(logf, log_size, position)
            if batch is None:
                d.problem(path, where, offset,
                          f"entry {k} points to position {position}, where no batch of "
                          f"{posixpath.basename(log_path)} ({log_size} bytes) starts")
            elif batch[1] > offset:
                d.problem(path, where, offset,
                          f"entry {k} maps offset {offset} to a batch starting at offset "
                          f"{batch[1]}: readers seeking {offset} would miss records")
            elif batch[2] != offset:
                mismatches.append((offset, batch[2]))
    finally:
        if logf is not None:
            logf.close()
    if count == 0:
        d.note(f"{path} is empty.")
    if mismatches:
        # what DumpLogSegments lists: an append of several batches (a follower's, or a
        # legacy producer's message set) is indexed with its largest offset, so these
        # are not damage by themselves
        d.note(f"Mismatches in :{path} (index offset vs last offset of the batch there; "
               "normal for multi-batch appends)")
        for idx_off, log_off in mismatches:
            d.note(f"  Index offset: {idx_off}, log offset: {log_off}",
                   {"indexOffset": idx_off, "logOffset": log_off})


def _dump_time_index(d: _Dump, fs, path: str, args) -> None:
    name = posixpath.basename(path)
    base = _base_offset(name)
    size = _file_size(fs, path)
    if size is None:
        raise LogLayoutError("no such file", path=path)
    n_file = size // TIME_INDEX_ENTRY.size
    count = 0
    prev = None
    for k, (ts, rel) in _iter_entries(fs, path, TIME_INDEX_ENTRY):
        if (k > 0 and rel == 0) or (k == 0 and ts == 0 and rel == 0 and n_file > 1):
            break                   # zero-filled tail (an all-zero file has no entries)
        offset = base + rel
        count += 1
        d.line(f"timestamp: {ts} offset: {offset}",
               {"type": "timeindex_entry", "entry": k, "timestamp": ts, "offset": offset})
        where = k * TIME_INDEX_ENTRY.size
        if prev is not None and ts <= prev[0]:
            d.problem(path, where, offset, f"entry {k}: timestamp {ts} is out of order (the "
                      f"previous entry has {prev[0]}; a broker appends only larger ones)")
        if prev is not None and offset < prev[1]:
            d.problem(path, where, offset,
                      f"entry {k}: offset {offset} is below the previous entry's {prev[1]}")
        if ts < 0 or rel < 0:
            d.problem(path, where, offset, f"entry {k} is negative")
        prev = (ts, offset)
    if count == 0:
        d.note(f"{path} is empty.")


def _dump_txn_index(d: _Dump, fs, path: str, args) -> None:
    data = read_small_file(fs, path, _SMALL_FILE_LIMIT)
    if data is None:
        raise LogLayoutError("no such file", path=path)
    n = len(data) // ABORTED_TXN.size
    for k in range(n):
        version, pid, first, last, lso = ABORTED_TXN.unpack_from(data, k * ABORTED_TXN.size)
        d.line(f"version: {version} producerId: {pid} firstOffset: {first} "
               f"lastOffset: {last} lastStableOffset: {lso}",
               {"type": "txnindex_entry", "entry": k, "version": version, "producerId": pid,
                "firstOffset": first, "lastOffset": last, "lastStableOffset": lso})
        where = k * ABORTED_TXN.size
        if version != TXN_INDEX_VERSION:
            d.problem(path, where, last, f"entry {k}: unknown version {version}")
        elif pid < 0 or first < 0 or first > last:
            d.problem(path, where, last, f"entry {k}: impossible aborted transaction "
                      f"(producer {pid}, offsets {first}..{last})")
    if len(data) % ABORTED_TXN.size:
        d.note(f"{len(data) % ABORTED_TXN.size} trailing bytes after the last whole entry "
               "(a crash mid-append; ignored)")
    if n == 0:
        d.note(f"{path} is empty.")


def _dump_snapshot(d: _Dump, fs, path: str, args) -> None:
    data = read_small_file(fs, path, _SMALL_FILE_LIMIT)
    if data is None:
        raise LogLayoutError("no such file", path=path)
    try:
        parse_producer_snapshot(data, _base_offset(posixpath.basename(path)), path)
    except KafkaLogError as e:
        d.problem(path, e.position, e.offset, e.reason)
        return
    _version, _crc, count = SNAPSHOT_HEADER.unpack_from(data, 0)
    for k in range(count):
        (pid, epoch, last_seq, last_offset, delta, ts, coord,
         txn_first) = SNAPSHOT_ENTRY.unpack_from(data, SNAPSHOT_HEADER.size
                                                 + k * SNAPSHOT_ENTRY.size)
        first_seq = -1 if last_seq < 0 else (last_seq - delta if last_seq >= delta
                                              else _INT32_MAX - (delta - last_seq) + 1)
        d.line(f"producerId: {pid} producerEpoch: {epoch} coordinatorEpoch: {coord} "
               f"currentTxnFirstOffset: {txn_first if txn_first >= 0 else 'OptionalLong.empty'}"
               f" lastTimestamp: {ts} firstSequence: {first_seq} lastSequence: {last_seq} "
               f"lastOffset: {last_offset} offsetDelta: {delta} timestamp: {ts}",
               {"type": "snapshot_entry", "producerId": pid, "producerEpoch": epoch,
                "coordinatorEpoch": coord,
                "currentTxnFirstOffset": txn_first if txn_first >= 0 else None,
                "lastTimestamp": ts, "firstSequence": first_seq, "lastSequence": last_seq,
                "lastOffset": last_offset, "offsetDelta": delta})
    if count == 0:
        d.note(f"{path} holds no producer entries.")


def _dump_offset_checkpoint(d: _Dump, fs, path: str, args) -> None:
    data = read_small_file(fs, path, _SMALL_FILE_LIMIT)
    if data is None:
        raise LogLayoutError("no such file", path=path)
    try:
        entries = parse_checkpoint(data, path)
    except KafkaLogError as e:
        d.problem(path, e.position, e.offset, e.reason)
        return
    for (topic, partition), offset in entries.items():
        d.line(f"topic: {topic} partition: {partition} offset: {offset}",
               {"type": "checkpoint_entry", "topic": topic, "partition": partition,
                "offset": offset})
    if not entries:
        d.note(f"{path} holds no entries.")


def _dump_leader_epochs(d: _Dump, fs, path: str, args) -> None:
    data = read_small_file(fs, path, _SMALL_FILE_LIMIT)
    if data is None:
        raise LogLayoutError("no such file", path=path)
    try:
        entries = parse_leader_epoch_checkpoint(data, path)
    except KafkaLogError as e:
        d.problem(path, e.position, e.offset, e.reason)
        return
    for epoch, start in entries:
        d.line(f"epoch: {epoch} startOffset: {start}",
               {"type": "leader_epoch_entry", "epoch": epoch, "startOffset": start})
    if not entries:
        d.note(f"{path} holds no entries.")


_DUMPERS: dict[str, Callable] = {
    "log": _dump_log, "index": _dump_offset_index, "timeindex": _dump_time_index,
    "txnindex": _dump_txn_index, "snapshot": _dump_snapshot,
    "offset-checkpoint": _dump_offset_checkpoint,
    "leader-epoch-checkpoint": _dump_leader_epochs,
}


def _cmd_dump(args, out: TextIO, err: TextIO) -> int:
    fs_options = _fs_options(args.fs_option)
    d = _Dump(out, err, args.json)
    for raw in args.files:
        uri = _plain_uri(raw)
        fs, path = resolve_filesystem(uri, fs_options)
        kind = _file_kind(posixpath.basename(path))
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise LogLayoutError("no such file", path=raw)
        if info.type != pafs.FileType.File:
            raise LogLayoutError("not a file", path=raw)
        if not args.json:
            out.write(f"Dumping {raw}\n")
        _DUMPERS[kind](d, fs, path, args)
    return EXIT_PROBLEMS if d.problems else EXIT_OK


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

    parser = argparse.ArgumentParser(
        prog="kafkalog", description="Inspect, dump and verify Kafka log directories "
        "without a broker.",
        epilog="exit status: 0 ok; 1 problems found (dump, verify); 2 bad usage or "
               "unreadable path")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("inspect", parents=[common, bar, sel],
                       help="topics, partitions, offsets, sizes, time ranges, codecs",
                       description="Per partition: log start offset, high watermark, last "
                                   "stable offset, log end offset, segments, size, records, "
                                   "first and max timestamp, codecs seen.")
    p.add_argument("--segments", action="store_true", help="also list every segment")
    p.add_argument("--no-scan", action="store_true",
                   help="offsets from checkpoints, indexes and the log tail only (fast); "
                        "no record counts or codecs")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("dump", parents=[common],
                       help="print segments, indexes, snapshots, checkpoints like Kafka's "
                            "DumpLogSegments",
                       description="Print .log (and KRaft .checkpoint) batches, .index, "
                                   ".timeindex, .txnindex, producer .snapshot and checkpoint "
                                   "files, in the format of Kafka's DumpLogSegments.")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--records", action="store_true",
                   help="print every record (Kafka's --deep-iteration)")
    p.add_argument("--print-data", action="store_true",
                   help="with --records, also print keys and values as UTF-8")
    p.add_argument("--verify-crc", action="store_true",
                   help="fail (exit 1) on checksum mismatches, inner legacy messages "
                        "included with --records")
    p.add_argument("--window-bytes", type=int, default=DEFAULT_WINDOW_BYTES,
                   help=argparse.SUPPRESS)
    p.set_defaults(func=_cmd_dump)

    p = sub.add_parser("verify", parents=[common, bar, sel],
                       help="check CRCs, offsets, indexes and checkpoints; exit 1 on problems",
                       description="Check every batch's CRC and framing, offsets increasing "
                                   "within and across segments, .index/.timeindex/.txnindex "
                                   "against the log, checkpoint files against the log end, "
                                   "producer snapshots. A torn tail at the end of a "
                                   "partition (what a crash leaves; broker recovery truncates "
                                   "it) is a warning unless --strict.")
    p.add_argument("--strict", action="store_true",
                   help="warnings (torn tails and what they explain) fail too")
    p.add_argument("--deep", action="store_true",
                   help="also decode every record (decompress payloads, inner legacy "
                        "CRCs); reads the log twice")
    p.add_argument("--no-crc", action="store_true", help="skip batch CRC checks (faster)")
    p.set_defaults(func=_cmd_verify)
    return parser


def _setup_logging(verbose: int) -> None:
    logger = logging.getLogger("spark_kafkalog")
    # The library logs damage as warnings while it reads; the commands report it
    # themselves, so by default only errors of the library itself are shown.
    logger.setLevel(logging.ERROR if verbose == 0 else
                    logging.INFO if verbose == 1 else logging.DEBUG)
    if not any(getattr(h, "_kafkalog", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("kafkalog: %(levelname)s: %(message)s"))
        handler._kafkalog = True            # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.propagate = False


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """Run the ``kafkalog`` command with ``argv`` (default ``sys.argv[1:]``); returns the
    exit status (see the module docstring)."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:          # --help, or a usage error argparse already printed
        return int(e.code) if isinstance(e.code, int) else EXIT_USAGE
    _setup_logging(args.verbose)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            return args.func(args, out, err)
    except KafkaLogError as e:
        err.write(f"kafkalog {args.command}: error: {e}\n")
        return EXIT_USAGE
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
