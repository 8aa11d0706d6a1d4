"""Per-partition report statistics against an independent reading of the same files
(kafka-python's record batches, this test's own walk of the 12-byte batch prefixes), the
key hash and HyperLogLog sketch against exact counts, and the report's problems against
``verify``'s."""
from __future__ import annotations

import os
import struct
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.diagnose.distinct import HyperLogLog, key_hashes
from spark_kafkalog.log.diagnose.stats import HOUR_MS, partition_stats
from spark_kafkalog.log.diagnose.verify import verify_log_dirs
from spark_kafkalog.report import build_report, collect_stats, render_text
from tests.log.logbuilder import LogDirBuilder, build_rich_partition, flip_byte, rec

CODEC = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def oracle(directory: str) -> dict:
    """What the report should say about a partition of v2 batches, from kafka-python."""
    from kafka.record.default_records import DefaultRecordBatch

    out = dict(batches=0, control=0, records=0, codec_bytes=Counter(), hours=Counter(),
               hour_bytes=Counter(), producers=Counter(), aborts=0, commits=0, keys=set(),
               keyed=0, null_keys=0)
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            _, length = struct.unpack_from(">qi", data, pos)
            size = 12 + length
            if pos + size > len(data):
                break
            batch = DefaultRecordBatch(data[pos:pos + size])
            out["batches"] += 1
            if batch.is_control_batch:
                out["control"] += 1
                for r in batch:
                    kind = struct.unpack(">hh", bytes(r.key))[1]
                    out["aborts" if kind == 0 else "commits"] += 1
            else:
                out["codec_bytes"][CODEC[batch.compression_type]] += size
                if batch.max_timestamp >= 0:
                    out["hour_bytes"][batch.max_timestamp // HOUR_MS * HOUR_MS] += size
                if batch.producer_id >= 0:
                    out["producers"][batch.producer_id] += 1
                for r in batch:
                    out["records"] += 1
                    if r.timestamp >= 0:
                        out["hours"][r.timestamp // HOUR_MS * HOUR_MS] += 1
                    if r.key is None:
                        out["null_keys"] += 1
                    else:
                        out["keyed"] += 1
                        out["keys"].add(bytes(r.key))
            pos += size
    return out


def check_against_oracle(s: dict, want: dict) -> None:
    assert s["batches"] == want["batches"]
    assert s["control_batches"] == want["control"]
    assert s["records"] == want["records"]
    assert s["codec_bytes"] == dict(want["codec_bytes"])
    assert {h: r for h, r, _ in s["hours"] if r} == dict(want["hours"])
    assert {h: b for h, _, b in s["hours"] if b} == dict(want["hour_bytes"])
    assert s["producers"] == len(want["producers"])
    assert dict(map(tuple, s["top_producers"])) == dict(want["producers"].most_common(10))
    assert (s["aborted_transactions"], s["committed_transactions"]) == \
        (want["aborts"], want["commits"])
    assert (s["keyed_records"], s["null_key_records"]) == (want["keyed"], want["null_keys"])
    exact = len(want["keys"])
    assert abs(s["distinct_keys"] - exact) <= max(1, 0.03 * exact), (s["distinct_keys"], exact)


def test_rich_partition_matches_kafka_python(tmp_path):
    _, p = build_rich_partition(tmp_path / "logs")
    logdirs = LogDirs(str(tmp_path / "logs"))
    part = logdirs.partitions("a.b-c_d")[0]
    s = partition_stats(logdirs, part)
    want = oracle(part.path)
    assert want["aborts"] == 2 and want["commits"] == 1 and want["null_keys"] >= 0
    check_against_oracle(s, want)
    assert s["errors"] == 0
    assert (s["log_start_offset"], s["high_watermark"]) == (11, p.log_end_offset - 1)
    # headers only: the same batches, bytes and codecs; records from the headers
    h = partition_stats(logdirs, part, decode=False, verify=False)
    assert h["distinct_keys"] is None and h["records"] == s["records"]
    assert h["codec_bytes"] == s["codec_bytes"]


def test_many_keys_hours_and_producers(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    rng = np.random.default_rng(7)
    t0 = 1_700_000_000_000
    for q in range(3):
        p = b.partition("keys", q)
        for k in range(40):
            ids = rng.integers(0, 3000, 100)
            recs = [rec(None if i % 17 == 0 else b"key-%d" % int(x), b"v" * int(x % 50),
                        ts=t0 + int(x) * 7_000 + k * 60_000) for i, x in enumerate(ids)]
            p.append(recs, compression=["none", "gzip", "lz4", "zstd"][k % 4],
                     producer_id=1000 + k % 5 if k % 3 else -1)
            if k % 10 == 9:
                p.roll()
        p.high_watermark = p.log_end_offset
    b.write()
    logdirs = LogDirs(str(tmp_path / "logs"))
    stats = collect_stats(logdirs, logdirs.partitions("keys"), jobs=2)
    union = set()
    for s, part in zip(stats, logdirs.partitions("keys")):
        want = oracle(part.path)
        check_against_oracle(s, want)
        union |= want["keys"]
    report = build_report(stats, roots=logdirs.roots)
    t = report["topics"][0]
    assert t["records"] == sum(s["records"] for s in stats)
    assert abs(t["distinct_keys"] - len(union)) <= 0.03 * len(union)
    # compaction keeps each key's last record per partition: the topic's ratio is the
    # partitions' kept records over its keyed records (kafka-python's reading, exact
    # sets), not the topic's distinct keys over them (the same keys are in every
    # partition here: that ratio would be less than half of this one)
    wants = [oracle(part.path) for part in logdirs.partitions("keys")]
    kept = sum(len(w["keys"]) for w in wants) / sum(w["keyed"] for w in wants)
    assert t["compaction_ratio"] == pytest.approx(kept, rel=0.03)
    assert len(union) / sum(w["keyed"] for w in wants) < kept / 2
    assert min(s["compaction_ratio"] for s in stats) <= t["compaction_ratio"] \
        <= max(s["compaction_ratio"] for s in stats)
    assert t["skew_records"] == pytest.approx(max(s["records"] for s in stats)
                                              / (t["records"] / 3), abs=1e-3)
    assert "hll" not in report["partitions"][0]
    lines = render_text(report)
    assert any(line.startswith("keys ") for line in lines)


def test_problems_are_verify_findings(tmp_path):
    _, p = build_rich_partition(tmp_path / "logs")
    batch = p.batches[3]
    flip_byte(tmp_path / "logs" / "a.b-c_d-0" / f"{batch.segment:020d}.log",
              batch.position + 40)
    logdirs = LogDirs(str(tmp_path / "logs"))
    s = partition_stats(logdirs, logdirs.partitions("a.b-c_d")[0])
    got = {(f["severity"], f["kind"], f["path"], f["position"]) for f in s["problems"]}
    want = {(f.severity, f.kind, f.path, f.position)
            for f in verify_log_dirs(LogDirs(str(tmp_path / "logs"))).findings}
    assert want and want <= got
    assert s["errors"] >= 1
    report = build_report([s])
    assert report["totals"]["errors"] == s["errors"]
    assert any("corrupt" in line for line in render_text(report))


# ---- hashing and the sketch ---------------------------------------------------------------
def test_key_hash_depends_on_bytes_only():
    a = pa.array([b"abc", None, b"", b"abc", b"xyz", b"", b"ab", b"abc\x00"], pa.binary())
    h = key_hashes(a)
    assert len(h) == 7                                        # the null dropped
    assert h[0] == h[2] and h[1] == h[4]                      # equal bytes, equal hash
    assert len({int(x) for x in h}) == 5                      # abc, "", xyz, ab, abc\0
    sliced = key_hashes(a.slice(3, 3))                        # offset into the buffers
    assert list(sliced) == [h[2], h[3], h[4]]
    assert list(key_hashes(pa.array(["abc"]))) == [h[0]]      # strings hash as their bytes
    chunked = pa.chunked_array([a.slice(0, 2), a.slice(2)])
    assert list(key_hashes(chunked)) == list(h)


@pytest.mark.parametrize("n", [1, 100, 5_000, 60_000, 300_000])
def test_sketch_estimate_within_three_percent(n):
    keys = pa.array([b"user-%d" % i for i in range(n)] * 2)
    hashes = key_hashes(keys)
    assert len(np.unique(hashes)) == n                        # no collisions here
    sk = HyperLogLog()
    sk.add_hashes(hashes)
    assert abs(sk.estimate() - n) <= max(1, 0.03 * n)
    back = HyperLogLog.from_text(sk.to_text())
    assert back.estimate() == sk.estimate()


def test_sketches_merge_to_the_union():
    a, b = HyperLogLog(), HyperLogLog()
    a.add_hashes(key_hashes(pa.array([b"k%d" % i for i in range(0, 30_000)])))
    b.add_hashes(key_hashes(pa.array([b"k%d" % i for i in range(20_000, 50_000)])))
    assert abs(a.merge(b).estimate() - 50_000) <= 1_500
