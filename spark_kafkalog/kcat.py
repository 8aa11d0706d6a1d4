"""Records of one topic for ``kafkalog cat``, as kcat's consumer prints them
(``kcat -C -t TOPIC -p N -o OFFSET -c COUNT -f FORMAT``), read through the public log API.

:func:`iter_records` yields records one by one from bounded windows (it never holds a
partition in memory); :func:`compile_format` turns a kcat format string into a function
from a record to bytes; :func:`record_json` is the ``--json`` form of a record.
"""
from __future__ import annotations

import base64
import re
from datetime import datetime, timezone
from typing import Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.log import LogDirs, read_partition
from spark_kafkalog.log.read.loss import report_losses

#: what cat's DataLossError says to do instead
LOSS_HINT = "run with --ignore-data-loss to print what is there"

__all__ = ["compile_format", "iter_records", "parse_offset", "parse_time", "record_json"]

#: kcat's default consumer format: the value and a newline
DEFAULT_FORMAT = "%s\\n"
_EARLIEST, _LATEST = "earliest", "latest"


def parse_offset(text: str) -> int | str:
    """kcat's ``-o``: ``beginning``/``earliest``, ``end``/``latest``, an absolute offset,
    or ``-N`` (N records before the end of each partition)."""
    t = text.strip().lower()
    if t in ("beginning", "earliest"):
        return _EARLIEST
    if t in ("end", "latest"):
        return _LATEST
    try:
        return int(t)
    except ValueError:
        raise InvalidOptionError(f"--offset {text!r}: expected beginning, end, an offset "
                                 "or -N (N before the end)") from None


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


def iter_records(path, topic: str, *, partitions: Sequence[int] | None = None,
                 offset: int | str = _EARLIEST, from_time: int | None = None,
                 count: int | None = None, isolation_level: str = "read_uncommitted",
                 filesystem_options: Mapping | None = None,
                 fail_on_data_loss: bool = True) -> Iterator[dict]:
    """Up to ``count`` records of ``topic`` (partition by partition, in offset order), as
    dicts with Spark's Kafka columns, ``timestamp`` in epoch milliseconds (-1 for none).

    Each partition starts at ``offset`` (see :func:`parse_offset`; a start below the log
    start is moved up to it, as a consumer with ``auto.offset.reset=earliest`` would) or,
    with ``from_time``, at its first record at or after that time; it ends at the high
    watermark (the last stable offset under read_committed). Records the log's own files
    promise and its segments do not hold raise DataLossError (before any record of the
    partition; a gap between segments when the read reaches it), or with
    ``fail_on_data_loss=False`` are logged as a warning, once per partition."""
    logdirs = path if isinstance(path, LogDirs) else LogDirs(path, filesystem_options)
    parts = logdirs.partitions(topic)
    if partitions is not None:
        parts = [logdirs.partition(topic, int(q)) for q in sorted(set(partitions))]
    left = count
    for p in parts:
        if left is not None and left <= 0:
            return
        state = logdirs.state(p, isolation_level=isolation_level, timestamps=False)
        asked = offset if isinstance(offset, int) and offset >= 0 and from_time is None \
            else None
        report_losses([x for x in state.losses if x.overlaps(asked, None)],
                      fail=fail_on_data_loss, hint=LOSS_HINT)
        lo, hi = state.log_start_offset, state.upper_bound
        if from_time is not None:
            found = logdirs.offset_for_timestamp(p, from_time, upper_bound=hi)
            start = hi if found is None else max(found, lo)
        elif offset == _EARLIEST:
            start = lo
        elif offset == _LATEST:
            start = hi
        elif offset < 0:
            start = max(hi + offset, lo)
        else:
            start = min(max(offset, lo), hi)
        if start >= hi:
            continue
        # to the upper bound, not start + count: compaction gaps and aborted records
        # make offsets outnumber records; the generator stops at the count
        for rb in read_partition(logdirs, p, start_offset=start, end_offset=hi,
                                 isolation_level=isolation_level,
                                 fail_on_data_loss=fail_on_data_loss, loss_hint=LOSS_HINT):
            # microseconds (UTC) to Kafka's epoch milliseconds; null (no timestamp) is -1
            stamps = rb.column("timestamp").cast(pa.int64()).to_pylist()
            for row, ts in zip(rb.to_pylist(), stamps):
                row["timestamp"] = -1 if ts is None else ts // 1000
                yield row
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return


def _headers_text(headers) -> bytes:
    return b",".join(h["key"].encode() + b"=" + (h["value"] or b"") for h in headers or ())


_TOKENS: dict[str, Callable[[dict], bytes]] = {
    "t": lambda r: r["topic"].encode(),
    "p": lambda r: str(r["partition"]).encode(),
    "o": lambda r: str(r["offset"]).encode(),
    "T": lambda r: str(r["timestamp"]).encode(),
    "k": lambda r: r["key"] or b"",
    "s": lambda r: r["value"] or b"",
    "K": lambda r: str(-1 if r["key"] is None else len(r["key"])).encode(),
    "S": lambda r: str(-1 if r["value"] is None else len(r["value"])).encode(),
    "h": lambda r: _headers_text(r.get("headers")),
    "%": lambda r: b"%",
}
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}


def compile_format(fmt: str) -> Callable[[dict], bytes]:
    """A kcat ``-f`` format as a function of a record: ``%t`` topic, ``%p`` partition,
    ``%o`` offset, ``%T`` timestamp (ms), ``%k`` key, ``%s`` value, ``%K``/``%S`` their
    lengths (-1 for null), ``%h`` headers (``k=v,...``), ``%%``; escapes ``\\n \\t \\r
    \\\\ \\0``. Keys and values are written as their raw bytes."""
    parts: list[bytes | Callable[[dict], bytes]] = []
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c in "%\\" and i + 1 < len(fmt):
            nxt = fmt[i + 1]
            table = _TOKENS if c == "%" else _ESCAPES
            if nxt not in table:
                known = ", ".join(c + k for k in table)
                raise InvalidOptionError(f"--format: unknown {c}{nxt} in {fmt!r} "
                                         f"(known: {known})")
            parts.append(table[nxt])
            i += 2
        else:
            parts.append(c.encode())
            i += 1
    return lambda r: b"".join(x if isinstance(x, bytes) else x(r) for x in parts)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_json(row: dict) -> dict:
    """A record for ``--json``: key, value and header values as base64 (RFC 4648)."""
    out = {"topic": row["topic"], "partition": row["partition"], "offset": row["offset"],
           "timestamp": row["timestamp"], "timestampType": row["timestampType"],
           "key": _b64(row["key"]), "value": _b64(row["value"])}
    if "headers" in row:
        out["headers"] = [{"key": h["key"], "value": _b64(h["value"])}
                          for h in row["headers"] or ()]
    return out
