"""Offline compaction against an independent model of Kafka's log cleaner.

Logs are built by tests/log/logbuilder.py (batches from kafka-python / aiokafka) with
random keys, tombstones, null keys, every codec, LogAppendTime, idempotent and
transactional producers (committed and aborted transactions), then compacted in passes
at chosen clock times. The model here works on the builder's ground truth -- each
record's offset, key, value and transaction fate -- and says what a consumer must read
after each pass:

- below the cleaned offset: the latest record of each key among records that are not
  in an aborted transaction; records without a key removed; a tombstone kept by the
  pass that first sees it (it sets the delete horizon) and removed by a pass at or
  after ``delete_retention_ms`` later; every record at its old offset;
- at and above the cleaned offset: unchanged;
- markers: every marker survives the first pass; an ABORT marker gets a delete
  horizon once its transaction's data is gone and is removed after it; a producer's
  last data batch survives (as an empty batch) whatever happens to its records.

Every pass leaves ``kafkalog verify`` clean and batches kafka-python accepts.
"""
from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import pytest

from spark_kafkalog.errors import InvalidOptionError, UnsupportedFormatError
from spark_kafkalog.format import scan_headers
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.diagnose.verify import verify_log_dirs
from spark_kafkalog.log.maintain import CompactSettings, compact_topic
from tests.conftest import REAL_BROKER, require_real_broker
from tests.log.logbuilder import LogDirBuilder, rec

T0 = 1_700_000_000_000
RETENTION = 3_600_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def build(root: Path, seed: int, partition: int = 0, b: LogDirBuilder | None = None):
    """A topic ``c`` with a partition: 5 segments of random appends plus an active
    segment; every transaction decided before the active segment. Written unless ``b``
    (a builder the caller writes) is given."""
    rng = random.Random(seed)
    write = b is None
    b = b or LogDirBuilder(root)
    p = b.partition("c", partition, index_interval_bytes=400)
    keys = [b"key-%d" % i for i in range(15)]
    open_txns = {}
    for seg in range(5):
        for _ in range(rng.randint(6, 12)):
            n = rng.randint(1, 6)
            recs = []
            for _ in range(n):
                key = None if rng.random() < 0.08 else rng.choice(keys)
                value = None if rng.random() < 0.12 else b"v%d-" % rng.randrange(10 ** 6)
                headers = [("h", b"x%d" % rng.randrange(9))] if rng.random() < 0.3 else []
                recs.append(rec(key, value, ts=T0 + p.next_offset * 10, headers=headers))
            kind = rng.random()
            codec = rng.choice(CODECS)
            if kind < 0.25:
                pid = rng.choice([101, 202])
                txn = open_txns.get(pid) or p.begin_txn(pid)
                open_txns[pid] = txn
                p.append(recs, txn=txn, compression=codec)
            elif kind < 0.35:
                p.append(recs, producer_id=303, producer_epoch=0,
                         base_sequence=p.next_offset, compression=codec)
            elif kind < 0.42:
                p.append(recs, compression=codec, log_append_time=T0 + 5_000_000)
            else:
                p.append(recs, compression=codec,
                         encoder="aiokafka" if rng.random() < 0.5 else "kafka-python")
            if open_txns and rng.random() < 0.3:
                pid = rng.choice(sorted(open_txns))
                p.end_txn(open_txns.pop(pid), commit=rng.random() < 0.5)
        if seg == 4:
            for pid in sorted(open_txns):
                p.end_txn(open_txns.pop(pid), commit=rng.random() < 0.5)
            p.append([rec(b"key-0", b"last-of-round", ts=T0)])
        p.roll()
    p.append([rec(b"key-1", b"active", ts=T0)])
    p.high_watermark = p.log_end_offset
    if write:
        b.write()
    return p


def model(p, upto: int, passes: list[int]) -> list[tuple]:
    """(offset, key, value) a read_uncommitted consumer reads after compaction passes
    at clock times ``passes`` (each pass cleans everything below ``upto``)."""
    rows = [r for r in p.rows]
    aborted = {id(t) for t in p.txns if t.committed is False}
    cleaned = [r for r in rows if r.offset < upto and r.key is not None
               and (r.txn is None or id(r.txn) not in aborted)]
    latest = {}
    for r in cleaned:
        latest[r.key] = max(latest.get(r.key, -1), r.offset)
    kept = [r for r in cleaned if r.offset == latest[r.key]]
    horizon_set_at = passes[0]
    if any(t >= horizon_set_at + RETENTION for t in passes[1:]):
        kept = [r for r in kept if r.value is not None]
    out = kept + [r for r in rows if r.offset >= upto]
    return [(r.offset, r.key, r.value) for r in out]


def read_all(root: Path, topic: str, **kw) -> list[tuple]:
    t = read_table(str(root), topic, **kw)
    return list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                    t.column("value").to_pylist()))


def batches(pdir: Path) -> list[dict]:
    out = []
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log"):
            scan = scan_headers((pdir / name).read_bytes(), verify_crc=True)
            assert scan.problem is None, (name, scan.problem)
            out.extend(scan.headers.to_pylist())
    return out


def check_clean(root: Path) -> None:
    findings = verify_log_dirs(LogDirs(str(root)), deep=True).findings
    assert not findings, findings


def kafka_python_reads(pdir: Path) -> list[tuple]:
    """Every record, by kafka-python's own batch reader (CRC checked)."""
    from kafka.record.default_records import DefaultRecordBatch
    out = []
    for name in sorted(os.listdir(pdir)):
        if not name.endswith(".log"):
            continue
        data = (pdir / name).read_bytes()
        pos = 0
        while pos < len(data):
            size = struct.unpack_from(">i", data, pos + 8)[0] + 12
            b = DefaultRecordBatch(bytearray(data[pos:pos + size]))
            assert b.validate_crc()
            if not b.is_control_batch:
                out.extend((r.offset, r.key, r.value) for r in b)
            pos += size
    return out


@pytest.mark.parametrize("seed", range(6))
def test_compaction_equals_the_model(tmp_path, seed):
    p = build(tmp_path, seed)
    upto = p.segments[-1][0]
    pdir = tmp_path / "c-0"
    before = batches(pdir)
    markers = {b["base_offset"]: b for b in before if b["is_control"]}
    now1 = T0 + 10_000_000
    s = CompactSettings(delete_retention_ms=RETENTION)
    [r] = compact_topic(str(tmp_path), "c", s, now_ms=now1)
    assert r.skipped is None and r.cleaned_to == upto
    assert read_all(tmp_path, "c") == model(p, upto, [now1])
    assert sorted(kafka_python_reads(pdir)) == model(p, upto, [now1])
    check_clean(tmp_path)
    after1 = batches(pdir)
    # every marker survives the first pass; tombstone batches carry a delete horizon
    assert {b["base_offset"] for b in after1 if b["is_control"]} == set(markers)
    tomb_offsets = {o for o, k, v in model(p, upto, [now1]) if v is None and o < upto}
    for b in after1:
        if any(b["base_offset"] <= o <= b["last_offset"] for o in tomb_offsets):
            assert b["attributes"] & 0x40 and b["first_timestamp"] == now1 + RETENTION
    # the committed view: the same records but those of aborted transactions
    committed = read_all(tmp_path, "c", isolation_level="read_committed")
    assert committed == [x for x in model(p, upto, [now1])
                         if not any(x[0] == r.offset and r.txn is not None
                                    and r.txn.committed is False for r in p.rows)]
    # second pass after the horizon: tombstones gone; abort markers get their own horizon
    now2 = now1 + RETENTION
    s2 = CompactSettings(delete_retention_ms=RETENTION, force=True)
    compact_topic(str(tmp_path), "c", s2, now_ms=now2)
    assert read_all(tmp_path, "c") == model(p, upto, [now1, now2])
    check_clean(tmp_path)
    after2 = batches(pdir)
    # an aborted transaction holding its producer's last data batch keeps that batch
    # (emptied), so its marker still sees data and keeps its place
    last_data = {}
    for b in before:
        if not b["is_control"] and b["producer_id"] >= 0:
            last_data[b["producer_id"]] = b["last_offset"]
    aborts = [t.marker_offset for t in p.txns if t.committed is False
              and not t.first_offset <= last_data[t.producer_id] < t.marker_offset]
    for b in after2:
        if b["is_control"] and b["base_offset"] in aborts:
            assert b["attributes"] & 0x40 and b["first_timestamp"] == now2 + RETENTION
    # third pass after that horizon: abort markers removed, unless a producer's last
    now3 = now2 + RETENTION
    compact_topic(str(tmp_path), "c", s2, now_ms=now3)
    assert read_all(tmp_path, "c") == model(p, upto, [now1, now2, now3])
    after3 = batches(pdir)
    left = {b["base_offset"] for b in after3 if b["is_control"] and b["record_count"]}
    assert not left & set(aborts)
    # every producer's last data batch is still there (maybe empty): its sequence state
    for pid in (101, 202, 303):
        mine = [b for b in before if b["producer_id"] == pid and not b["is_control"]]
        if mine:
            assert mine[-1]["last_offset"] in {b["last_offset"] for b in after3}
    assert sorted(kafka_python_reads(pdir)) == model(p, upto, [now1, now2, now3])
    check_clean(tmp_path)


def test_dirty_ratio_lag_and_upto(tmp_path):
    p = build(tmp_path, 42)
    segs = [base for base, _ in p.segments]
    before = read_all(tmp_path, "c")
    # upto inside the third segment: the first two are cleaned
    [r] = compact_topic(str(tmp_path), "c", CompactSettings(upto=segs[2] + 1), now_ms=T0)
    assert r.cleaned_to == segs[2]
    assert [x for x in read_all(tmp_path, "c") if x[0] >= segs[2]] == \
        [x for x in before if x[0] >= segs[2]]
    # the cleaner checkpoint now says the log is clean up to there: ratio decides
    [r] = compact_topic(str(tmp_path), "c", CompactSettings(upto=segs[2] + 1,
                                                            min_cleanable_dirty_ratio=0.0),
                        now_ms=T0)
    assert r.skipped and "dirty ratio" in r.skipped
    # min.compaction.lag.ms: segments newer than now - lag stay
    files = sorted(os.listdir(tmp_path / "c-0"))
    mid = read_all(tmp_path, "c")
    [r] = compact_topic(str(tmp_path), "c", CompactSettings(min_compaction_lag_ms=10 ** 12),
                        now_ms=T0)
    assert r.skipped and r.groups == []
    assert read_all(tmp_path, "c") == mid and sorted(os.listdir(tmp_path / "c-0")) == files
    # a lag that the first three segments' records are older than: those are cleaned
    seg3_max = max(x.timestamp for x in p.rows if segs[2] <= x.offset < segs[3])
    [r] = compact_topic(str(tmp_path), "c", CompactSettings(
        min_compaction_lag_ms=1000, force=True), now_ms=seg3_max + 1000)
    assert r.cleaned_to == segs[3]


def test_dry_run_changes_nothing(tmp_path):
    build(tmp_path, 7)
    pdir = tmp_path / "c-0"
    snap = {n: (pdir / n).read_bytes() for n in os.listdir(pdir)}
    [r] = compact_topic(str(tmp_path), "c", now_ms=T0, dry_run=True)
    assert r.records_after < r.records_before and r.groups
    assert {n: (pdir / n).read_bytes() for n in os.listdir(pdir)} == snap


def test_reader_planned_before_compaction_reads_old_files(tmp_path):
    """A read that listed the segments before a compaction swapped them reads the old
    files (kept as .deleted), never a mix of old plan and new bytes."""
    from spark_kafkalog.log import read_partition
    build(tmp_path, 3)
    ld = LogDirs(str(tmp_path))
    [part] = ld.partitions("c")
    state = ld.state(part)
    expect = read_all(tmp_path, "c")
    compact_topic(str(tmp_path), "c", now_ms=T0)
    got = []
    for b in read_partition(ld, part, start_offset=state.log_start_offset,
                            end_offset=state.high_watermark):
        got.extend(zip(b.column("offset").to_pylist(), b.column("key").to_pylist(),
                       b.column("value").to_pylist()))
    assert got == expect
    # a fresh read sees the compacted log
    assert len(read_all(tmp_path, "c")) < len(expect)


def test_reader_planned_before_two_compactions_reads_the_first_ones_old_files(tmp_path):
    """A compaction's output takes the name of the first segment it replaces, so a second
    compaction within file.delete.delay.ms renames that name again: each keeps its old
    files under a name of its own (a reader finds them by inode), and a read that listed
    the log before both still reads what it listed. A purge with no delay removes them."""
    from spark_kafkalog.log import read_partition
    from spark_kafkalog.log.io import purge_deleted_files
    build(tmp_path, 3)
    ld = LogDirs(str(tmp_path))
    [part] = ld.partitions("c")
    state = ld.state(part)
    expect = read_all(tmp_path, "c")
    for _ in range(2):
        compact_topic(str(tmp_path), "c", CompactSettings(force=True), now_ms=T0)
    first = sorted(n for n in os.listdir(part.path)
                   if n.startswith("00000000000000000000.log.") and n.endswith(".deleted"))
    assert len(first) == 2, first
    got = [o for b in read_partition(ld, part, start_offset=state.log_start_offset,
                                     end_offset=state.high_watermark)
           for o in zip(b.column("offset").to_pylist(), b.column("key").to_pylist(),
                        b.column("value").to_pylist())]
    assert got == expect
    assert purge_deleted_files(ld.filesystem, part.path, 0)[2] == 0
    assert not [n for n in os.listdir(part.path) if n.endswith(".deleted")]


def _offsets_fixtures() -> list[str]:
    """``<log dir>/__consumer_offsets-N`` of the fixtures; one placeholder when they are
    missing, so that the test runs and says so (a skip here, a failure under CI)."""
    found = [f"{d.parent.name}/{d.name}"
             for d in sorted(REAL_BROKER.glob("*/__consumer_offsets-*"))]
    return found or ["<fixtures missing>"]


@pytest.mark.parametrize("name", _offsets_fixtures())
def test_consumer_offsets_latest_state_unchanged(tmp_path, name):
    """A broker's __consumer_offsets partition (copied, then rolled so that everything is
    cleanable): compacting keeps, for every key, the value a reader saw as its latest."""
    src = require_real_broker() / name
    assert src.is_dir(), src
    root = tmp_path / "root"
    root.mkdir()
    dst = root / src.name
    shutil.copytree(src, dst)
    topic = src.name.rsplit("-", 1)[0]
    before = read_all(root, topic)
    leo = max(o for o, _, _ in before) + 1 if before else 0
    (dst / f"{leo:020d}.log").write_bytes(b"")          # a roll: the old active is cleanable
    latest_before = {}
    for o, k, v in before:
        if k is not None:
            latest_before[k] = v
    legacy = any(b["magic"] < 2 for b in batches(dst))
    if legacy:
        with pytest.raises(UnsupportedFormatError, match="legacy"):
            compact_topic(str(root), topic, now_ms=T0)
        return
    [r] = compact_topic(str(root), topic, CompactSettings(force=True), now_ms=T0)
    after = read_all(root, topic)
    latest_after = {k: v for o, k, v in after if k is not None}
    assert latest_after == latest_before
    assert len({k for _, k, _ in after}) == len(after)     # one record per key
    check_clean(root)


# ---- max.compaction.lag.ms -------------------------------------------------------------------
def segment_times(pdir: Path) -> list[tuple[int, int, int, int]]:
    """(base, size, first batch's max timestamp, largest max timestamp) of each segment,
    read by kafka-python."""
    from kafka.record.memory_records import MemoryRecords
    out = []
    for name in sorted(n for n in os.listdir(pdir) if n.endswith(".log")):
        data = (pdir / name).read_bytes()
        recs, stamps = MemoryRecords(data), []
        while recs.has_next():
            stamps.append(recs.next_batch().max_timestamp)
        out.append((int(name[:-4]), len(data), stamps[0] if stamps else -1,
                    max(stamps, default=-1)))
    return out


def kafka_cleans(segs, *, dirty_from, now, ratio, min_lag, max_lag):
    """Kafka's LogCleanerManager on one log (high watermark at the log end, no open
    transaction), restated: the offset cleaning stops at (None: the log is not cleaned).
    The log is cleaned when its cleanable ratio is above ``ratio``, or when it must be
    compacted now -- the earliest positive first-batch timestamp of the dirty segments
    before the active one is older than ``now - max_lag`` -- and has cleanable bytes."""
    active = segs[-1][0]
    dirty = [s for s, nxt in zip(segs, segs[1:]) if nxt[0] > dirty_from]
    stop = active
    if min_lag > 0:
        young = [s[0] for s in dirty if s[3] > now - min_lag]
        stop = min([stop] + young)
    clean_bytes = sum(s[1] for s in segs if s[0] < dirty_from)
    cleanable = sum(s[1] for s in dirty if s[0] < stop)
    total = clean_bytes + cleanable
    firsts = [s[2] for s in dirty if s[2] > 0]
    must = bool(firsts) and min(firsts) < now - max_lag
    if cleanable and (cleanable / total > ratio or must):
        return stop
    return None


def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(tmp_path):
    """Three partitions whose only dirty segment is their last closed one (the cleaner
    checkpoint says so): a dirty ratio far below 0.5. Which partitions a pass cleans, and
    up to where, for clocks and lags around their first batches' timestamps, equals
    Kafka's rule; what a consumer reads of a cleaned one equals the model."""
    base = tmp_path / "base"
    b = LogDirBuilder(base)
    parts = [build(base, 60 + q, q, b) for q in range(3)]
    b.write()
    segs = {q: segment_times(base / f"c-{q}") for q in range(3)}
    dirty_from = {q: segs[q][-2][0] for q in range(3)}
    (base / "cleaner-offset-checkpoint").write_text(
        "0\n3\n" + "".join(f"c {q} {dirty_from[q]}\n" for q in range(3)))
    firsts = sorted(segs[q][-2][2] for q in range(3))
    assert len(set(firsts)) == 3
    lag = 60_000
    cases = [  # (now, min lag, max lag, ratio)
        (firsts[2] + 10 * lag, 0, 2 ** 63 - 1, 0.5),       # Kafka's default: never forced
        (firsts[0] + lag, 0, lag, 0.5),                      # exactly max lag old: not yet
        (firsts[0] + lag + 1, 0, lag, 0.5),                  # one partition over it
        ((firsts[1] + firsts[2]) // 2 + lag, 0, lag, 0.5),   # two over it
        (firsts[2] + lag + 1, 0, lag, 0.5),                  # all three
        (firsts[2] + lag + 1, 0, lag, 0.0),                  # ratio alone cleans all
        # min lag keeps the dirty segment out of the cleanable range: nothing to force
        (firsts[2] + lag + 1, lag, lag, 0.5),
        (max(s[-2][3] for s in segs.values()) + 2 * lag, lag, lag, 0.5),
    ]
    outcomes = set()
    for k, (now, min_lag, max_lag, ratio) in enumerate(cases):
        root = tmp_path / f"run{k}"
        shutil.copytree(base, root)
        want = {q: kafka_cleans(segs[q], dirty_from=dirty_from[q], now=now, ratio=ratio,
                                min_lag=min_lag, max_lag=max_lag) for q in range(3)}
        settings = CompactSettings(min_cleanable_dirty_ratio=ratio,
                                   min_compaction_lag_ms=min_lag,
                                   max_compaction_lag_ms=max_lag)
        got = compact_topic(str(root), "c", settings, now_ms=now)
        assert {r.partition: (r.cleaned_to if r.skipped is None else None)
                for r in got} == want, (k, [r.skipped for r in got])
        for r in got:
            assert (r.compaction_delay_ms > 0) == (now - max_lag > min(
                s[2] for s in segs[r.partition][-2:-1] if s[2] > 0)), k
            if want[r.partition] is not None:
                assert read_all(root, "c")  # readable
                t = read_table(str(root), "c", partitions=[r.partition])
                rows = list(zip(t.column("offset").to_pylist(), t.column("key").to_pylist(),
                                t.column("value").to_pylist()))
                assert rows == model(parts[r.partition], want[r.partition], [now]), k
        outcomes.add(tuple(want[q] is not None for q in range(3)))
        check_clean(root)
        shutil.rmtree(root)
    # the table reaches none, one, two and all three partitions
    assert {sum(o) for o in outcomes} == {0, 1, 2, 3}


def test_max_compaction_lag_settings():
    assert CompactSettings().max_compaction_lag_ms == 2 ** 63 - 1
    with pytest.raises(InvalidOptionError, match="max_compaction_lag_ms"):
        CompactSettings(max_compaction_lag_ms=0)
    with pytest.raises(InvalidOptionError, match="above max_compaction_lag_ms"):
        CompactSettings(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
