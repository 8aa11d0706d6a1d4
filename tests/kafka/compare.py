"""Rows of our reads (Arrow tables, Spark rows) in the form the Java consumer's records
take in this tier, and comparisons that say exactly where two record sequences, or our
``kafkalog dump`` and Kafka's DumpLogSegments, differ."""
from __future__ import annotations

import contextlib
import io
import re

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog.cli import main as kafkalog

FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType",
          "headers")


def _headers(hs):
    if hs is None:
        return None
    return [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in hs]


def from_arrow(table: pa.Table) -> list[dict]:
    ms = pc.divide(pc.cast(table["timestamp"], pa.int64()), 1000)
    table = table.set_column(table.schema.get_field_index("timestamp"), "timestamp", ms)
    rows = table.to_pylist()
    for r in rows:
        r["headers"] = _headers(r.get("headers"))
    return [{f: r.get(f) for f in FIELDS} for r in rows]


def from_spark(df) -> list[dict]:
    """Collect ``df`` (Spark's Kafka schema); timestamps as epoch ms, taken in Spark so
    no time zone is involved."""
    rows = df.withColumn("timestamp", df["timestamp"].cast("timestamp")) \
        .selectExpr("*", "unix_millis(timestamp) AS ts_ms").collect()
    out = []
    for row in rows:
        d = row.asDict(recursive=True)
        d["timestamp"] = d.pop("ts_ms")
        d["key"] = None if d["key"] is None else bytes(d["key"])
        d["value"] = None if d["value"] is None else bytes(d["value"])
        d["headers"] = _headers(d.get("headers"))
        out.append({f: d.get(f) for f in FIELDS})
    return sorted(out, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def differences(ours: list[dict], kafka: list[dict], limit: int = 5) -> list[str]:
    """Human-readable differences between two record sequences (empty when equal)."""
    out = []
    if len(ours) != len(kafka):
        out.append(f"{len(ours)} records read by us, {len(kafka)} by Kafka's consumer")
    by_pos_ours = {(r["topic"], r["partition"], r["offset"]): r for r in ours}
    by_pos_kafka = {(r["topic"], r["partition"], r["offset"]): r for r in kafka}
    only_ours = sorted(set(by_pos_ours) - set(by_pos_kafka))
    only_kafka = sorted(set(by_pos_kafka) - set(by_pos_ours))
    if only_ours:
        out.append(f"only we return {len(only_ours)} offsets, first {only_ours[:limit]}")
    if only_kafka:
        out.append(f"only Kafka returns {len(only_kafka)} offsets, first {only_kafka[:limit]}")
    n = 0
    for pos in sorted(set(by_pos_ours) & set(by_pos_kafka)):
        a, b = by_pos_ours[pos], by_pos_kafka[pos]
        for f in FIELDS:
            if a[f] != b[f]:
                n += 1
                if n <= limit:
                    out.append(f"{pos} {f}: ours {a[f]!r}, Kafka {b[f]!r}")
    if n > limit:
        out.append(f"... {n - limit} more field differences")
    order = [(r["topic"], r["partition"], r["offset"]) for r in ours]
    if order != sorted(order):
        out.append("our rows are not in partition, offset order")
    return out


def split_dump(text: str) -> dict[str, list[str]]:
    """Kafka's (or our) dump output, per file: the lines under each ``Dumping FILE``."""
    out, current = {}, None
    for line in text.splitlines():
        if line.startswith("Dumping "):
            current = out.setdefault(line[len("Dumping "):].strip(), [])
        elif current is not None:
            current.append(line)
    return out


def compare_dumps(files, kafka_text: str) -> dict:
    """Per file, where our ``kafkalog dump --records`` and Kafka's deep iteration differ
    in the lines both print (batch and record lines, index and time index entries)."""
    kafka = split_dump(kafka_text)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = kafkalog(["dump", "--records", *map(str, files)])
    assert code == 0, out.getvalue()[-2000:]
    ours = split_dump(out.getvalue())
    assert set(ours) == set(kafka) == {str(f) for f in files}
    keep = re.compile(r"^(baseOffset:|\| offset:|offset: \d+ position:|timestamp: \d+ offset:"
                      r"|Log starting offset:|producerId:|version:)")
    diffs = {}
    for name in kafka:
        a = [line for line in ours[name] if keep.match(line)]
        b = [line for line in kafka[name] if keep.match(line)]
        if name.endswith(".timeindex"):
            # A live broker's active time index is preallocated and zero-filled past its
            # entries; Kafka's dump prints its first zero slot as an entry
            # ("timestamp: 0 offset: <base>"), and so does ours: no entry to compare.
            zero = f"timestamp: 0 offset: {int(name.rsplit('/', 1)[-1].split('.')[0])}"
            a = [line for line in a if line != zero]
            b = [line for line in b if line != zero]
        if a != b:
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs[name] = {"lines (ours, Kafka)": (len(a), len(b)), "first difference":
                           (a[first] if first < len(a) else None,
                            b[first] if first < len(b) else None)}
    return diffs


#: DumpLogSegments' deep iteration reports "-1 is followed by <base>" for every segment
#: whose base offset is not 0 (its "last offset" starts at -1): Kafka says this of the
#: broker's own segments too, so it is no finding.
_FIRST_OFFSET = re.compile(r"^\s*-1 is followed by \d+$")


def dump_log_segments_findings(files) -> list:
    """What Kafka's DumpLogSegments finds wrong in ``files`` (segments and indexes) with
    ``--deep-iteration`` and, for the indexes, ``--index-sanity-check``: empty when every
    file passes."""
    from tests.kafka.broker import dump_log_segments

    text = dump_log_segments(files, "--deep-iteration")
    lines = text.splitlines()
    findings = [line for line in lines
                if re.search(r"(?i)mismatch|invalid|corrupt|exception|isvalid: false|"
                             r"not found|failed", line)]
    # the non-consecutive header line is followed by its pairs; drop Kafka's own quirk
    for i, line in enumerate(lines):
        if line.startswith("Non-consecutive offsets"):
            pairs = []
            for nxt in lines[i + 1:]:
                if not nxt.startswith("  "):
                    break
                pairs.append(nxt)
            if not all(_FIRST_OFFSET.match(p) for p in pairs):
                findings.append((line, pairs))
    index_files = [f for f in files if str(f).endswith((".index", ".timeindex"))]
    sanity = dump_log_segments(index_files, "--index-sanity-check")
    passed = set(re.findall(r"^(\S+) passed sanity check\.$", sanity, re.M))
    # Kafka says "FILE is empty." instead for an index with no entries
    passed |= set(re.findall(r"^(\S+) is empty\.$", sanity, re.M))
    if passed != {str(f) for f in index_files}:
        findings.append(("index sanity check", sanity[-2000:]))
    return findings
