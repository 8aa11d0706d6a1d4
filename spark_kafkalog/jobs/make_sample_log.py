#!/usr/bin/env python
"""Generate a sample Kafka log dir: what a broker's ``log.dirs`` entry holds.

Writes one topic (default ``events``) over several partitions, each with its own codec
(none, lz4, zstd, snappy, gzip, ...), rolled into segments of ``--segment-bytes``, with the
``.index`` / ``.timeindex`` files a broker keeps and the root checkpoint files
(replication-offset, log-start-offset, recovery-point). Values are small JSON documents
(``user_id``, ``event``, ``amount``, ``ts``), keys ``user-<id>``, a header on every tenth
record, CreateTime timestamps spread over ``--days`` days (so the export job writes
several date partitions).

Bytes come from the project's own encoder (``spark_kafkalog.format.encode``) and index
builder (``spark_kafkalog.log.files.index``): no Spark, no broker, a few seconds for a few
million records. Deterministic for a given ``--seed``.

    python jobs/make_sample_log.py --output sample/kafka-logs --records 3000000
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalog._console import plural
from spark_kafkalog.format.npview import column as _np

CODECS = ("none", "lz4", "zstd", "snappy", "gzip")
EVENTS = ("view", "click", "add_to_cart", "purchase", "refund", "search")
START_MS = 1_704_067_200_000        # 2024-01-01T00:00:00Z
CHUNK_ROWS = 65_536                  # rows encoded per call (segments roll between chunks)
BATCH_BYTES = 16_384                 # Kafka producer batch.size default
INDEX_INTERVAL = 4_096               # Kafka index.interval.bytes default


def sample_rows(rng: np.random.Generator, first: int, n: int, total: int, days: float
                ) -> pa.Table:
    """``n`` rows for offsets ``first .. first + n - 1`` of a partition holding ``total``."""
    user = rng.integers(0, 50_000, n)
    event = pa.array(np.array(EVENTS, dtype=object)[rng.integers(0, len(EVENTS), n)],
                     pa.string())
    amount = np.round(rng.random(n) * 500, 2)
    # timestamps grow with the offset (with jitter), as a producer's CreateTime does
    span_ms = days * 86_400_000
    ts = (START_MS + (np.arange(first, first + n) * (span_ms / max(total, 1)))
          + rng.integers(0, 2_000, n)).astype(np.int64)
    uid = pc.cast(pa.array(user), pa.string())
    value = pc.binary_join_element_wise(
        '{"user_id":', uid, ',"event":"', event, '","amount":',
        pc.cast(pa.array(amount), pa.string()), ',"ts":', pc.cast(pa.array(ts), pa.string()),
        "}", "")
    key = pc.binary_join_element_wise("user-", uid, "")
    offsets = np.arange(first, first + n)
    has_header = offsets % 10 == 0
    header_type = pa.list_(pa.field("element", pa.struct([("key", pa.string()),
                                                           ("value", pa.binary())])))
    # one header {"source": "sample"} on every tenth record, null (no headers) elsewhere
    counts = has_header.astype(np.int32)
    list_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    n_headers = int(list_offsets[-1])
    items = pa.StructArray.from_arrays(
        [pa.array(["source"] * n_headers, pa.string()),
         pa.array([b"sample"] * n_headers, pa.binary())], names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array(list_offsets), items,
                                       mask=pa.array(~has_header), type=header_type)
    return pa.table({"key": key.cast(pa.binary()), "value": value.cast(pa.binary()),
                     "timestamp": pa.array(ts, pa.int64()), "headers": headers})


def write_partition(pdir: Path, codec: str, records: int, segment_bytes: int,
                    rng: np.random.Generator, days: float) -> dict:
    """Encode ``records`` rows into rolled segments with indexes. Returns stats."""
    from spark_kafkalog.format.encode import encode_batches
    from spark_kafkalog.log.files.index import build_indexes

    pdir.mkdir(parents=True, exist_ok=True)
    segments = 0
    total_bytes = 0
    seg_file = None
    seg_base = 0
    seg_size = 0
    positions: list[np.ndarray] = []
    last_offsets: list[np.ndarray] = []
    max_ts: list[np.ndarray] = []

    def close_segment():
        nonlocal seg_file
        if seg_file is None:
            return
        seg_file.close()
        seg_file = None
        index, timeindex = build_indexes(
            seg_base, INDEX_INTERVAL,
            np.concatenate(positions) if positions else np.zeros(0, np.int64),
            np.concatenate(last_offsets) if last_offsets else np.zeros(0, np.int64),
            np.concatenate(max_ts) if max_ts else np.zeros(0, np.int64))
        (pdir / f"{seg_base:020d}.index").write_bytes(index)
        (pdir / f"{seg_base:020d}.timeindex").write_bytes(timeindex)

    offset = 0
    while offset < records:
        n = min(CHUNK_ROWS, records - offset)
        data, idx = encode_batches(sample_rows(rng, offset, n, records, days),
                                   compression=codec, base_offset=offset,
                                   max_batch_bytes=BATCH_BYTES)
        pos = _np(idx, "position")
        size = _np(idx, "size").astype(np.int64)
        base = _np(idx, "base_offset")
        last = _np(idx, "last_offset")
        mts = _np(idx, "max_timestamp")
        i = 0
        while i < len(pos):
            # Like a broker: roll when the next batch would not fit in the segment.
            if seg_file is not None and seg_size + size[i] > segment_bytes:
                close_segment()
            if seg_file is None:
                seg_base, seg_size = int(base[i]), 0
                positions, last_offsets, max_ts = [], [], []
                seg_file = open(pdir / f"{seg_base:020d}.log", "wb")
                segments += 1
            room = segment_bytes - seg_size
            ends = np.cumsum(size[i:])
            k = max(1, int(np.searchsorted(ends, room, side="right")))
            j = i + k
            start, stop = int(pos[i]), int(pos[j - 1] + size[j - 1])
            seg_file.write(memoryview(data)[start:stop])
            positions.append(pos[i:j] - start + seg_size)
            last_offsets.append(last[i:j])
            max_ts.append(mts[i:j])
            seg_size += stop - start
            total_bytes += stop - start
            i = j
        offset += n
    close_segment()
    if segments == 0:                   # an empty partition still has its active segment
        for suffix in (".log", ".index", ".timeindex"):
            (pdir / f"{0:020d}{suffix}").write_bytes(b"")
        segments = 1
    (pdir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    return {"segments": segments, "bytes": total_bytes, "records": records, "codec": codec}


def checkpoint_text(entries: dict[tuple[str, int], int]) -> str:
    lines = ["0", str(len(entries))] + [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    return "\n".join(lines) + "\n"


def make_sample_log(output: str | os.PathLike, *, records: int = 3_000_000,
                    partitions: int = 6, topic: str = "events",
                    segment_bytes: int = 8 << 20, days: float = 3.0, seed: int = 7,
                    codecs: tuple[str, ...] = CODECS) -> dict:
    """Write the sample log dir at ``output`` (replacing it). Returns a summary dict."""
    root = Path(output)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    per = [records // partitions + (1 if i < records % partitions else 0)
           for i in range(partitions)]
    stats = {}
    for p in range(partitions):
        stats[p] = write_partition(root / f"{topic}-{p}", codecs[p % len(codecs)], per[p],
                                   segment_bytes, rng, days)
    ends = {(topic, p): per[p] for p in range(partitions)}
    (root / "replication-offset-checkpoint").write_text(checkpoint_text(ends))
    (root / "recovery-point-offset-checkpoint").write_text(checkpoint_text(ends))
    (root / "log-start-offset-checkpoint").write_text(
        checkpoint_text({k: 0 for k in ends}))
    (root / "cleaner-offset-checkpoint").write_text(checkpoint_text({}))
    (root / "meta.properties").write_text(
        "#sample log dir written by spark_kafkalog jobs/make_sample_log.py\n"
        "version=0\nbroker.id=0\n")
    summary = {"topic": topic, "records": records, "partitions": partitions,
               "segment_bytes": segment_bytes, "seed": seed, "days": days,
               "per_partition": {str(p): s for p, s in stats.items()}}
    (root / "SAMPLE.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="make_sample_log", description=__doc__.split("\n\n")[0],
        epilog="Example:\n  kafkalog job make_sample_log --output sample/kafka-logs "
               "--records 100000",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output", required=True, help="log dir to (re)create")
    ap.add_argument("--records", type=int, default=3_000_000,
                    help="records in all (default 3,000,000)")
    ap.add_argument("--partitions", type=int, default=6, help="partitions (default 6)")
    ap.add_argument("--topic", default="events", help="topic name (default events)")
    ap.add_argument("--segment-bytes", type=int, default=8 << 20,
                    help="roll a segment before it would exceed this many bytes "
                         "(default 8 MiB, 8388608)")
    ap.add_argument("--days", type=float, default=3.0,
                    help="timestamps span this many days from 2024-01-01T00:00Z "
                         "(default 3)")
    ap.add_argument("--codecs", default=",".join(CODECS),
                    help=f"codec per partition, cycled (default {','.join(CODECS)})")
    ap.add_argument("--seed", type=int, default=7,
                    help="the same seed writes the same bytes (default 7)")
    args = ap.parse_args(argv)
    codecs = tuple(c.strip() for c in args.codecs.split(",") if c.strip())
    bad = [c for c in codecs if c not in CODECS]
    if bad or not codecs:
        ap.error(f"--codecs: unknown codec(s) {bad}; choose from {', '.join(CODECS)}")
    if args.records < 0 or args.partitions < 1 or args.segment_bytes < 1024:
        ap.error("--records >= 0, --partitions >= 1 and --segment-bytes >= 1024 required")
    t0 = time.perf_counter()
    s = make_sample_log(args.output, records=args.records, partitions=args.partitions,
                        topic=args.topic, segment_bytes=args.segment_bytes, days=args.days,
                        seed=args.seed, codecs=codecs)
    secs = time.perf_counter() - t0
    segs = sum(v["segments"] for v in s["per_partition"].values())
    size = sum(v["bytes"] for v in s["per_partition"].values())
    print(f"wrote {plural(s['records'], 'record')} of topic {s['topic']} in "
          f"{plural(s['partitions'], 'partition')}, {plural(segs, 'segment')}, "
          f"{size / 1e6:.1f} MB to {args.output} in {secs:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
