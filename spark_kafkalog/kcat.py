"""``kafkalog cat``: kcat's consume mode (``kcat -C -t T -p N -o OFF -c N -f FMT / -J``) over
log dirs, partition dirs or one segment, through the public log API.

kcat's rules (1.7, ``kcat.c``/``format.c``): :func:`parse_format` turns ``-f`` (or the
default built from ``-D``/``-K``) into a program of tokens and literals, escapes
processed; :func:`parse_offset` reads ``-o``; :func:`cat` writes whole record batches
formatted by the compiled kernel (:mod:`spark_kafkalog.format._text`) to one writer.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from spark_kafkalog.errors import (
    CorruptRecordError,
    InvalidOptionError,
    KafkaLogError,
    TypedRecordError,
)
from spark_kafkalog.format import _text
from spark_kafkalog.log import LogDirs, PartitionDir, read_partition
from spark_kafkalog.log.read.loss import report_losses
from spark_kafkalog.log.read.tiered import over_tiers

#: what cat's DataLossError says to do instead
LOSS_HINT = "run with --ignore-data-loss to print what is there"

__all__ = ["CatOptions", "cat", "parse_delim", "parse_format", "parse_offset", "parse_time",
           "check_pack", "broker_id", "DEFAULT_FORMAT"]

#: kcat's default consumer format: the value and ``-D``'s delimiter (a newline)
DEFAULT_FORMAT = "%s\\n"
#: what ``-Z`` prints for a null (or empty) key or value
NULL_STR = b"NULL"
_TOKENS = {"o": _text.OP_OFFSET, "k": _text.OP_KEY, "K": _text.OP_KEY_LEN,
           "s": _text.OP_PAYLOAD, "S": _text.OP_PAYLOAD_LEN, "R": _text.OP_PAYLOAD_LEN_BINARY,
           "t": _text.OP_TOPIC, "p": _text.OP_PARTITION, "T": _text.OP_TIMESTAMP,
           "h": _text.OP_HEADERS}
_PACK_TOKENS = " <>bBhHiIqQcs$"


def _strtoul(s: bytes, i: int, base: int) -> tuple[int, int]:
    """C's strtoul at ``s[i:]``: (value, index after the digits); base 0 reads 0x.. hex,
    0.. octal, else decimal."""
    if base == 0:
        if s[i:i + 2].lower() == b"0x" and i + 2 < len(s) and chr(s[i + 2]) in "0123456789abcdefABCDEF":
            base, i = 16, i + 2
        elif s[i:i + 1] == b"0":
            base = 8
        else:
            base = 10
    digits = "0123456789abcdef"[:base]
    j = i
    while j < len(s) and chr(s[j]).lower() in digits:
        j += 1
    return (int(s[i:j], base) if j > i else 0), j


def _unescape(lit: bytes) -> bytes:
    """kcat's ``fmt_add``: ``\\t \\n \\r``, ``\\xHH`` and ``\\NNN`` (C's strtoul, the low
    byte kept), any other ``\\c`` is ``c``; the literal ends at a NUL (kcat keeps it as a C
    string, so ``\\x00`` prints nothing)."""
    out = bytearray()
    i = 0
    while i < len(lit):
        c = lit[i]
        if c == 0x5C and i + 1 < len(lit):
            i += 1
            e = lit[i]
            if e in b"tnr":
                out.append({0x74: 9, 0x6E: 10, 0x72: 13}[e])
            else:
                base = 0
                if e == 0x78:                      # \x
                    i += 1
                    base = 16
                if i >= len(lit):
                    out.append(0)                  # "\\x" at the end: the C string ends
                elif 0x30 <= lit[i] <= 0x39:
                    # kcat checks for a decimal digit, then lets strtoul read the rest
                    v, j = _strtoul(lit, i, base)
                    out.append(v & 0xFF)
                    i = j - 1
                else:
                    out.append(lit[i])
        else:
            out.append(c)
        i += 1
    nul = out.find(0)
    return bytes(out if nul < 0 else out[:nul])


def parse_delim(text: bytes) -> bytes:
    """kcat's ``parse_delim`` (``-D``/``-K``): ``\\n``, ``\\t`` and ``\\xHH`` replaced,
    one at a time, first ``\\n`` anywhere, then ``\\t``, then ``\\x``."""
    s = bytearray(text)
    while True:
        for pat, rep in ((b"\\n", 10), (b"\\t", 9)):
            k = s.find(pat)
            if k >= 0:
                s[k:k + 2] = bytes([rep])
                break
        else:
            k = s.find(b"\\x")
            if k < 0:
                return bytes(s)
            v, j = _strtoul(bytes(s), k + 2, 16)
            if j == k + 2:
                raise InvalidOptionError(f"Delimiter {bytes(s[k:]).decode('latin-1')} expects "
                                         "hex number")
            s[k:j] = bytes([v & 0xFF])


def parse_format(fmt: bytes) -> list[tuple[int, bytes]]:
    """kcat's ``fmt_parse``: ``(opcode, literal)`` pairs for the compiled formatter."""
    prog: list[tuple[int, bytes]] = []

    def lit(raw: bytes):
        text = _unescape(raw)
        prog.append((_text.OP_STR, text))

    s = 0
    while s < len(fmt):
        t = fmt.find(b"%", s)
        if t < 0:
            lit(fmt[s:])
            break
        if t > s:
            lit(fmt[s:t])
        if t + 1 >= len(fmt):
            raise InvalidOptionError("-f: Empty formatter (a % ends the format)")
        c = chr(fmt[t + 1])
        if c == "%":
            prog.append((_text.OP_STR, b"%"))
        elif c in _TOKENS:
            prog.append((_TOKENS[c], b""))
        else:
            raise InvalidOptionError(f"-f: Unsupported formatter: %{c} (known: "
                                     f"{' '.join('%' + k for k in _TOKENS)} %%)")
        s = t + 2
    return prog


def check_pack(what: str, fmt: str) -> None:
    """kcat's ``pack_check`` of a ``-s`` format."""
    if not fmt:
        raise InvalidOptionError(f"-s: {what} pack-format must not be empty")
    for c in fmt:
        if c not in _PACK_TOKENS:
            raise InvalidOptionError(f"-s: Invalid token '{c}' in {what} pack-format "
                                     f"(tokens: {_PACK_TOKENS.strip()}; avro needs a schema "
                                     "registry, which kafkalog does not use)")


@dataclass(frozen=True)
class OffsetSpec:
    """Where each partition starts: ``kind`` beginning | end | offset | tail | time."""
    kind: str
    value: int = 0


def parse_offset(text: str) -> tuple[OffsetSpec | None, int | None]:
    """kcat's ``-o``: ``(start spec or None, stop timestamp or None)``: ``beginning``,
    ``end``, ``N``, ``-N`` (N before the end), ``s@TS`` (first record at or after TS ms),
    ``e@TS`` (stop a partition at its first record at or after TS ms)."""
    t = text.strip()
    if t in ("beginning", "earliest"):
        return OffsetSpec("beginning"), None
    if t in ("end", "latest"):
        return OffsetSpec("end"), None
    if t == "stored":
        raise InvalidOptionError("-o stored: a log dir has no committed offsets of kcat's "
                                 "consumer (use beginning, end, N, -N, s@TS or e@TS)")
    m = re.fullmatch(r"([se])@(-?\d+)", t)
    if m:
        return (OffsetSpec("time", int(m.group(2))), None) if m.group(1) == "s" \
            else (None, int(m.group(2)))
    if re.fullmatch(r"-?\d+", t):
        n = int(t)
        return (OffsetSpec("tail", -n) if n < 0 else OffsetSpec("offset", n)), None
    raise InvalidOptionError(f"-o {text!r}: expected beginning, end, an offset N, -N (N "
                             "before the end), s@TS or e@TS (TS in epoch ms)")


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 date/time (UTC unless it names a zone)."""
    t = text.strip()
    if re.fullmatch(r"-?\d+", t):
        return int(t)
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOptionError(f"--from-time {text!r}: expected epoch milliseconds or an "
                                 "ISO-8601 time such as 2024-05-01T12:00:00Z") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def broker_id(logdirs: LogDirs) -> int:
    """The ``node.id`` (or ``broker.id``) in a log dir's ``meta.properties``: what kcat's
    ``-J`` shows as ``broker``; -1 when there is none."""
    from spark_kafkalog.log.io import read_small_file
    for root in logdirs.roots:
        try:
            data = read_small_file(logdirs.filesystem, root.rstrip("/") + "/meta.properties",
                                   1 << 20)
        except (OSError, KafkaLogError):
            data = None
        if not data:
            continue
        props = dict(line.split("=", 1) for line in data.decode("utf-8", "replace").splitlines()
                     if "=" in line and not line.lstrip().startswith("#"))
        for key in ("node.id", "broker.id"):
            if props.get(key, "").strip().lstrip("-").isdigit():
                return int(props[key])
    return -1


@dataclass
class CatOptions:
    """What ``kafkalog cat`` prints and where it starts and stops (kcat's flags)."""
    program: list = field(default_factory=lambda: parse_format(DEFAULT_FORMAT.encode()))
    json: bool = False
    json_delimiter: bytes = b"\n"
    null_str: bytes | None = None
    key_pack: bytes | None = None
    value_pack: bytes | None = None
    start: OffsetSpec = OffsetSpec("beginning")
    stop_timestamp: int | None = None
    count: int | None = None
    isolation_level: str = "read_committed"
    exit_on_error: bool = True
    unbuffered: bool = False
    broker: int = -1
    #: records the log's files promise but its segments lack: fail (DataLossError)
    #: unless off (--ignore-data-loss: print what is there, warn once per partition)
    fail_on_data_loss: bool = True
    #: -s key=avro / value=avro: the columns printed as Avro JSON (kcat_avro.py), and
    #: the registry URL of -r (None: each source's own _schemas)
    avro_columns: tuple = ()
    registry_url: str | None = None


@dataclass
class Selection:
    """One source's partitions to print, each with an optional offset range
    (a single segment: its base offset up to the next segment's)."""
    logdirs: LogDirs
    parts: list[tuple[PartitionDir, int | None, int | None]]
    #: the topic's remote tier (tiered storage), read below the local log: its
    #: RemoteStorage and each partition's TierPlan by (topic, partition)
    remote: object = None
    tiers: dict = field(default_factory=dict)


def _start(logdirs: LogDirs, p: PartitionDir, spec: OffsetSpec, lo: int, hi: int) -> int:
    if spec.kind == "beginning":
        return lo
    if spec.kind == "end":
        return hi
    if spec.kind == "tail":
        return max(hi - spec.value, lo)
    if spec.kind == "time":
        found = logdirs.offset_for_timestamp(p, spec.value, upper_bound=hi)
        return hi if found is None else max(found, lo)
    return min(max(spec.value, lo), hi)


def cat(sources: Sequence[Selection], opts: CatOptions, write: Callable[[bytes], None],
        flush: Callable[[], None], note: Callable[[str], None]) -> int:
    """Print the selected partitions' records (partition by partition, in offset order)
    through ``write``; returns how many were printed. ``note`` gets kcat's end-of-partition
    lines. Formatting errors of ``-s`` raise CorruptRecordError with kcat's message (after
    the output up to the failing record), or are noted when ``exit_on_error`` is off."""
    left = opts.count
    printed = 0
    # headers are decoded only when printed (-J, %h)
    headers = opts.json or any(op == _text.OP_HEADERS for op, _ in opts.program)
    todo = [(src, p, a, b) for src in sources for p, a, b in src.parts]
    renders: dict = {}
    for k, (src, p, seg_lo, seg_hi) in enumerate(todo):
        if left is not None and left <= 0:
            break
        logdirs = src.logdirs
        avro = None
        if opts.avro_columns:
            from spark_kafkalog.kcat_avro import open_render
            if id(src) not in renders:
                renders[id(src)] = open_render(logdirs, opts.avro_columns, opts.registry_url)
            avro = renders[id(src)]
        tier = src.tiers.get((p.topic, p.partition))
        state = over_tiers(logdirs.state(p, isolation_level=opts.isolation_level,
                                         timestamps=False), tier)
        asked = opts.start.value if opts.start.kind == "offset" else None
        report_losses([x for x in state.losses if x.overlaps(asked, None)],
                      fail=opts.fail_on_data_loss, hint=LOSS_HINT)
        lo, hi = state.log_start_offset, state.upper_bound
        if seg_lo is not None:
            lo, hi = max(lo, seg_lo), min(hi, seg_hi) if seg_hi is not None else hi
        start = _start(logdirs, p, opts.start, lo, hi)
        topic = p.topic.encode()
        stopped = False
        position = hi
        if start < hi:
            if tier is not None:
                from spark_kafkalog.log.read.tiered import read_tiered
                batches = read_tiered(read_partition, logdirs, src.remote, p, tier,
                                      start_offset=start, end_offset=hi,
                                      isolation_level=opts.isolation_level,
                                      include_headers=headers,
                                      fail_on_data_loss=opts.fail_on_data_loss)
            else:
                batches = read_partition(logdirs, p, start_offset=start, end_offset=hi,
                                         isolation_level=opts.isolation_level,
                                         include_headers=headers,
                                         fail_on_data_loss=opts.fail_on_data_loss,
                                         loss_hint=LOSS_HINT)
            for rb in batches:
                n = rb.num_rows
                if opts.stop_timestamp is not None and n:
                    stamps = rb.column("timestamp").cast(pa.int64()).to_numpy()
                    hit = np.flatnonzero(stamps >= opts.stop_timestamp * 1000)
                    if len(hit):
                        n, stopped = int(hit[0]), True
                        position = int(rb.column("offset")[n].as_py())
                if left is not None and n > left:
                    n = left
                if n < rb.num_rows:
                    rb = rb.slice(0, n)
                printed += _emit(rb, opts, topic, p.partition, write, note, avro)
                if opts.unbuffered:
                    flush()
                if left is not None:
                    left -= n
                    if left <= 0:
                        return printed
                if stopped:
                    break
        last = k == len(todo) - 1
        if stopped:
            note(f"% Reached stop timestamp for topic {p.topic} [{p.partition}] at offset "
                 f"{position}{': exiting' if last else ''}")
        else:
            note(f"% Reached end of topic {p.topic} [{p.partition}] at offset {hi}"
                 f"{': exiting' if last else ''}")
    return printed


def _emit(rb: pa.RecordBatch, opts: CatOptions, topic: bytes, partition: int,
          write: Callable[[bytes], None], note: Callable[[str], None], avro=None) -> int:
    if avro is not None:
        return _emit_avro(rb, opts, topic, partition, write, note, avro)
    if opts.json:
        write(_text.json_records(rb, topic, partition, opts.broker, opts.json_delimiter))
        return rb.num_rows
    data, done, errors = _text.format_records(
        rb, opts.program, topic, partition, null_str=opts.null_str, key_pack=opts.key_pack,
        value_pack=opts.value_pack, stop_on_error=opts.exit_on_error)
    write(data)
    offsets = rb.column("offset")
    for row, message in errors:
        text = (f"Failed to format message in {topic.decode()} [{partition}] at offset "
                f"{offsets[row].as_py()}: {message}")
        if opts.exit_on_error:
            raise CorruptRecordError(text, offset=offsets[row].as_py())
        note(f"% ERROR: {text}")
    return done


def _emit_avro(rb: pa.RecordBatch, opts: CatOptions, topic: bytes, partition: int,
               write: Callable[[bytes], None], note: Callable[[str], None], avro) -> int:
    """``-s avro``: the records up to a bad one printed, then (kcat's KC_ERROR) exit on it,
    or with ``-E`` an error line for each bad record and the others printed (with ``-J``
    the bad ones too, their column null and the error beside it, as kcat's json.c)."""
    raw = rb
    rb, bad = avro.render(rb)
    offsets = rb.column("offset")
    if opts.json:
        from spark_kafkalog.kcat_avro import json_envelopes

        rows = sorted({row for row, _, _ in bad})
        upto = rows[0] if rows and opts.exit_on_error else rb.num_rows
        write(json_envelopes(raw.slice(0, upto), rb.slice(0, upto),
                             [b for b in bad if b[0] < upto], avro.columns, topic, partition,
                             opts.broker, opts.json_delimiter))
        for row, column, reason in bad:
            text = (f"Failed to deserialize {column} in message in {topic.decode()} "
                    f"[{partition}] at offset {offsets[row].as_py()}: {reason}")
            if opts.exit_on_error:
                raise TypedRecordError(text, offset=offsets[row].as_py())
            note(f"% ERROR: {text}")
        return upto
    rows = sorted({row for row, _, _ in bad})
    done = 0
    if rows and opts.exit_on_error:
        done = _emit(rb.slice(0, rows[0]), opts, topic, partition, write, note)
        row, column, reason = bad[0]
        offset = offsets[row].as_py()
        raise TypedRecordError(f"Failed to deserialize {column} in message in "
                               f"{topic.decode()} [{partition}] at offset {offset}: {reason}",
                               offset=offset)
    for row, column, reason in bad:
        note(f"% ERROR: Failed to deserialize {column} in message in {topic.decode()} "
             f"[{partition}] at offset {offsets[row].as_py()}: {reason}")
    if rows:
        keep = np.ones(rb.num_rows, dtype=bool)
        keep[rows] = False
        rb = rb.filter(pa.array(keep))
    return done + _emit(rb, opts, topic, partition, write, note)
