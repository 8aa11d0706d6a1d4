"""Text output of the ``kafkalog`` command: a progress bar on stderr, aligned tables,
sizes, times and counted nouns; and how its arguments read (counts, paths)."""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from datetime import datetime, timezone
from typing import Iterable, Sequence, TextIO

__all__ = ["Progress", "format_table", "human_bytes", "iso_ms", "json_line", "plain_uri",
           "plural"]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 partition``, ``2 partitions``, ``0 partitions``, ``1,024 records``: every count
    a command or job prints, with thousands separators."""
    return f"{n:,} {noun if n == 1 else (nouns or noun + 's')}"


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


def _json_default(value):
    """Bytes in JSON output (record keys and values): base64, RFC 4648 standard alphabet."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def json_line(obj: dict, out: TextIO) -> None:
    """``obj`` as one line of compact JSON on ``out`` (bytes as base64)."""
    out.write(json.dumps(obj, separators=(",", ":"), default=_json_default) + "\n")


def non_negative(text: str) -> int:
    """An argparse ``type``: a whole number >= 0 (a count, a byte limit)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def plain_uri(uri: str) -> str:
    """A local path made absolute; a URI as given, less a trailing slash."""
    if "://" in uri:
        return uri.rstrip("/") or uri
    return os.path.abspath(os.path.expanduser(uri))
