"""The appender: offsets, segments, indexes and checkpoints as a broker keeps them; every
codec read back by kafka-python and aiokafka with CRCs checked; modes; idempotence."""
from __future__ import annotations

from pathlib import Path
import dataclasses
import os
import re
import random
import shutil
import struct
import subprocess
import sys

import numpy as np
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import (
    BadRowError,
    CommitConflictError,
    CorruptRecordError,
    InvalidOptionError,
    TopicExistsError,
)
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.write import (
    AppendConfig,
    StagingWriter,
    TopicSpec,
    commit_write,
    topic_partitions,
)
from spark_kafkalog.log.files.checkpoint import read_checkpoint
from spark_kafkalog.log.files import index
from spark_kafkalog.log.files.index import IndexBuilder, build_indexes
from tests.log.test_appender_util import (
    R,
    assert_indexes_like_broker,
    expected_segment_indexes,
    kp_encode,
    read_aio,
    read_kp,
    segments,
    stage,
    write,
)

FS = pafs.LocalFileSystem()


def recs(n, *, start=0, key=True, size=100, ts0=1_700_000_000_000):
    rng = random.Random(start)
    out = []
    for i in range(start, start + n):
        k = (b"key-%d" % i) if key and i % 7 else None
        v = None if i % 53 == 5 else bytes(rng.getrandbits(8) for _ in range(size // 4)) * 4
        hdrs = (("h", b"x%d" % i),) if i % 5 == 0 else ()
        out.append(R(k, v, ts0 + (i * 37) % 1000, hdrs))
    return out


def as_rows(records, first_offset):
    return [(first_offset + i, r.key, r.value, r.ts, r.headers) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_reads_back_exactly(tmp_path, codec):
    root = str(tmp_path)
    a, b = recs(300), recs(250, start=300)
    cfg = AppendConfig(segment_bytes=4_000, index_interval_bytes=1000)
    write(FS, root, "batch:1", {0: a}, codec=codec, config=cfg, per_batch=23)
    write(FS, root, "batch:2", {0: b}, codec=codec, config=cfg, per_batch=31, tasks=2)
    d = f"{root}/t-0"
    got = read_kp(d)
    # two tasks: the first task's records (every other one) come first
    expected = as_rows(a, 0) + as_rows(b[0::2] + b[1::2], 300)
    assert got == expected
    assert read_aio(d) == expected
    assert_indexes_like_broker(d, 1000)
    assert len(segments(d)) > 2      # rolled


@pytest.mark.parametrize("interval", [0, 1, 700, 4096, 10**9])
def test_indexes_match_broker_rule_across_commits_and_rolls(tmp_path, interval):
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=30_000, index_interval_bytes=interval)
    rng = random.Random(interval)
    start = 0
    for k in range(6):
        n = rng.randint(1, 200)
        records = recs(n, start=start)
        # timestamps that go up and down, so the time index keeps only strict maxima
        records = [R(r.key, r.value, 1000 + rng.randint(0, 5000)) for r in records]
        write(FS, root, f"batch:{k}", {0: records}, config=cfg,
              per_batch=rng.randint(1, 40))
        start += n
        assert_indexes_like_broker(f"{root}/t-0", interval)
    assert [r[0] for r in read_kp(f"{root}/t-0")] == list(range(start))


def test_index_builder_continuation_equals_one_pass():
    rng = random.Random(7)
    for trial in range(200):
        n = rng.randint(0, 60)
        sizes = [rng.randint(61, 3000) for _ in range(n)]
        positions = list(np.cumsum([0] + sizes[:-1])) if n else []
        lasts = list(np.cumsum([rng.randint(1, 9) for _ in range(n)]) + 99)
        ts = [rng.choice([-1, rng.randint(0, 10_000)]) for _ in range(n)]
        interval = rng.choice([0, 100, 2000, 5000])
        whole = build_indexes(100, interval, positions, lasts, ts)
        cut = rng.randint(0, n)
        idx, tidx = build_indexes(100, interval, positions[:cut], lasts[:cut], ts[:cut])
        b = IndexBuilder.continuing(100, interval, offset_index_tail=idx[-8:],
                                    offset_index_size=len(idx), time_index_tail=tidx[-24:],
                                    time_index_size=len(tidx))
        b.add_batches(positions[cut:], lasts[cut:], ts[cut:])
        kept = tidx[:len(tidx) - b.drop_time_tail_bytes]
        assert (idx + bytes(b.offset_entries),
                kept + bytes(b.time_entries) + b.close_entry()) == whole, trial


def _walk(data):
    pos, out = 0, ([], [], [])
    while pos < len(data):
        off, length = struct.unpack_from(">qi", data, pos)
        magic = data[pos + 16]
        if magic == 2:
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            (ts,) = struct.unpack_from(">q", data, pos + 35)
            last = off + delta
        else:
            last, ts = off, (struct.unpack_from(">q", data, pos + 18)[0] if magic == 1 else -1)
        out[0].append(pos)
        out[1].append(last)
        out[2].append(ts)
        pos += 12 + length
    return out


def test_index_rule_reproduces_real_broker_indexes(real_broker):
    """Every non-empty broker-written (trimmed) index among the fixtures is reproduced
    byte for byte from its segment's batches."""
    checked = 0
    for log in sorted(real_broker.glob("*/*-*/*.log")):
        idx_path, tidx_path = log.with_suffix(".index"), log.with_suffix(".timeindex")
        if not idx_path.exists() or not tidx_path.exists():
            continue
        idx, tidx = idx_path.read_bytes(), tidx_path.read_bytes()
        if not idx and not tidx:
            continue
        positions, lasts, ts = _walk(log.read_bytes())
        assert build_indexes(int(log.stem), 4096, positions, lasts, ts) == (idx, tidx), log
        checked += 1
    assert checked >= 4


def test_retry_and_replay_are_noops(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:x", {0: recs(10)})
    r = write(FS, root, "batch:x", {0: recs(10)})
    assert r.noop and len(read_kp(f"{root}/t-0")) == 10
    q = "q1"
    for batch in (0, 1):
        write(FS, root, jr.stream_write_id(q, batch), {0: recs(5)})
    # a replay of an old batch id (or the last one) changes nothing
    for batch in (0, 1):
        assert write(FS, root, jr.stream_write_id(q, batch), {0: recs(5)}).noop
    assert len(read_kp(f"{root}/t-0")) == 20
    # no staging files left behind, even for no-ops
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_new_topic_creates_every_partition_and_checkpoints(tmp_path):
    root = str(tmp_path)
    r = write(FS, root, "batch:1", {1: recs(30)}, partitions=4)
    assert r.ranges == {"t": {0: (0, 0), 1: (0, 30), 2: (0, 0), 3: (0, 0)}}
    assert topic_partitions(FS, root, "t") == [0, 1, 2, 3]
    for p in range(4):
        assert segments(f"{root}/t-{p}") == [0]
    rp = read_checkpoint(FS, f"{root}/recovery-point-offset-checkpoint")
    hw = read_checkpoint(FS, f"{root}/replication-offset-checkpoint")
    assert rp == hw == {("t", 0): 0, ("t", 1): 30, ("t", 2): 0, ("t", 3): 0}
    # an existing topic keeps its partition count
    write(FS, root, "batch:2", {3: recs(3)}, partitions=9)
    assert topic_partitions(FS, root, "t") == [0, 1, 2, 3]


def test_checkpoints_keep_other_topics_and_never_go_backwards(tmp_path):
    root = str(tmp_path)
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n2\nother 0 5\nt 0 99\n")
    write(FS, root, "batch:1", {0: recs(10)})
    rp = read_checkpoint(FS, f"{root}/recovery-point-offset-checkpoint")
    assert rp == {("other", 0): 5, ("t", 0): 99}


def test_partition_outside_topic_fails_clearly(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(3)}, partitions=2)
    with pytest.raises(BadRowError, match="partition 5 is outside topic 't'"):
        write(FS, root, "batch:2", {5: recs(3)})
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_partition_count_changed_underneath_is_a_conflict(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(3)}, partitions=3)
    sf = stage(FS, root, "batch:2", {0: recs(3)})
    with pytest.raises(CommitConflictError, match="3 partitions but the rows were partitioned "
                                                  "for 2"):
        commit_write(FS, root, "batch:2", [sf], [TopicSpec("t", 2, expected_partitions=2)])


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "../x", "a b", "x" * 250, "ü"])
def test_topic_names_validated_like_kafka(tmp_path, bad):
    with pytest.raises(InvalidOptionError, match="option 'topic'"):
        commit_write(FS, str(tmp_path), "batch:1", [], [TopicSpec(bad)])
    assert not os.listdir(tmp_path)


def test_modes_errorifexists_ignore(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(3)}, mode="errorifexists")
    # bad input (exit 2 in a job), not a conflict a retry resolves (CommitConflictError)
    with pytest.raises(TopicExistsError, match=re.escape(
            f"topic 't' already exists in {root} (saveMode errorifexists)")) as err:
        write(FS, root, "batch:2", {0: recs(3)}, mode="errorifexists")
    assert not isinstance(err.value, CommitConflictError)
    assert write(FS, root, "batch:3", {0: recs(3)}, mode="ignore").noop
    assert len(read_kp(f"{root}/t-0")) == 3
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]
    with pytest.raises(InvalidOptionError, match="save mode"):
        write(FS, root, "batch:4", {0: recs(3)}, mode="upsert")


@pytest.mark.parametrize("no_append", [False, True])
def test_overwrite_replaces_contents_and_keeps_offsets_increasing(tmp_path, no_append):
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=8000, no_append=no_append)
    write(FS, root, "batch:1", {0: recs(100), 1: recs(40)}, partitions=2, config=cfg)
    new = recs(30, start=1000)
    r = write(FS, root, "batch:2", {0: new}, mode="overwrite", config=cfg)
    assert r.ranges["t"] == {0: (100, 130), 1: (40, 40)}
    assert read_kp(f"{root}/t-0") == as_rows(new, 100)
    assert read_kp(f"{root}/t-1") == []
    assert segments(f"{root}/t-0")[0] == 100 and segments(f"{root}/t-1") == [40]
    ls = read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")
    assert ls == {("t", 0): 100, ("t", 1): 40}
    assert_indexes_like_broker(f"{root}/t-0", 4096)
    # and appending after it continues from there
    write(FS, root, "batch:3", {1: recs(5)}, config=cfg)
    assert [r[0] for r in read_kp(f"{root}/t-1")] == list(range(40, 45))


def test_no_append_mode_writes_new_segments_only(tmp_path):
    root = str(tmp_path)
    cfg = AppendConfig(no_append=True, segment_bytes=20_000, index_interval_bytes=500)
    written = []
    for k in range(4):
        before = {n: os.path.getmtime(f"{root}/t-0/{n}") for n in os.listdir(f"{root}/t-0")
                  } if k else {}
        batch = recs(50, start=50 * k)
        write(FS, root, f"batch:{k}", {0: batch}, config=cfg, per_batch=9)
        written += batch
        for name, mtime in before.items():          # nothing existing was rewritten
            assert os.path.getmtime(f"{root}/t-0/{name}") == mtime
    assert read_kp(f"{root}/t-0") == as_rows(written, 0)
    assert segments(f"{root}/t-0")[:4] == [0, 50, 100, 150]
    assert_indexes_like_broker(f"{root}/t-0", 500)


def test_empty_and_failed_tasks(tmp_path):
    root = str(tmp_path)
    w = StagingWriter(FS, root, "batch:1")
    assert w.finish() is None                       # nothing staged, nothing left
    w2 = StagingWriter(FS, root, "batch:1")
    data, table = kp_encode(recs(5))
    w2.add("t", 0, data, table)
    w2.abort()
    assert not os.listdir(root)
    sf = stage(FS, root, "batch:1", {0: recs(4)})
    r = commit_write(FS, root, "batch:1", [None, sf, None], [TopicSpec("t")])
    assert r.ranges == {"t": {0: (0, 4)}}
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_staged_bytes_that_do_not_match_their_table_are_rejected(tmp_path):
    root = str(tmp_path)
    sf = stage(FS, root, "batch:1", {0: recs(20)}, per_batch=5)
    with open(sf.path, "r+b") as f:          # damage the second batch's magic byte
        f.seek(sf.sections[0].position + 16)
        first_len = struct.unpack(">i", Path(sf.path).read_bytes()[8:12])[0]
        f.seek(12 + first_len + 16)
        f.write(b"\x07")
    with pytest.raises(CorruptRecordError, match="not the record batch"):
        commit_write(FS, root, "batch:1", [sf], [TopicSpec("t")])
    # rolled back in place: the partition is empty and a later write starts at offset 0
    assert read_kp(f"{root}/t-0") == [] if os.path.isdir(f"{root}/t-0") else True
    write(FS, root, "batch:2", {0: recs(3)})
    assert [r[0] for r in read_kp(f"{root}/t-0")] == [0, 1, 2]


def test_a_bad_batch_among_many_tasks_small_sections_names_its_staging_file(tmp_path):
    """A partition every task staged a little of is copied through one buffer (planned
    as one gather): a damaged batch is still reported in the file and at the position
    where it was staged."""
    from spark_kafkalog.log.write.plan import Gather, plan_write

    root = str(tmp_path)
    staged = [stage(FS, root, "batch:1", {0: recs(6, start=10 * k)}, per_batch=3,
                    label=f"t{k}") for k in range(3)]
    plan = plan_write(FS, root, staged, {"t": TopicSpec("t")}, {"t": []}, AppendConfig(),
                      no_append=False, overwrite=False)
    assert [type(r) for r in plan.topics["t"][0].runs] == [Gather]
    plan.close_files()
    bad = staged[1]
    second = bad.sections[0].position + 12 + struct.unpack(
        ">i", Path(bad.path).read_bytes()[8:12])[0]
    with open(bad.path, "r+b") as f:            # the magic byte of its second batch
        f.seek(second + 16)
        f.write(b"\x07")
    with pytest.raises(CorruptRecordError, match="not the record batch") as info:
        commit_write(FS, root, "batch:1", staged, [TopicSpec("t")])
    assert (info.value.path, info.value.position) == (bad.path, second)
    write(FS, root, "batch:2", {0: recs(3)})
    assert [r[0] for r in read_kp(f"{root}/t-0")] == [0, 1, 2]


def test_batch_table_validation():
    w = StagingWriter(FS, "/nonexistent-never-written", "batch:1")
    data, table = kp_encode(recs(10), per_batch=3)
    bad = table.copy()
    bad["size"][1] += 1
    with pytest.raises(BadRowError, match="tile"):
        w.add("t", 0, data, bad)


def test_untrimmed_active_segment_indexes_are_rebuilt(tmp_path):
    root = str(tmp_path)
    cfg = AppendConfig(index_interval_bytes=600)
    write(FS, root, "batch:1", {0: recs(80)}, config=cfg, per_batch=4)
    d = tmp_path / "t-0"
    # what a broker killed mid-flight leaves: preallocated, zero-padded index files
    for suffix, pad in ((".index", 8 * 1000), (".timeindex", 12 * 1000)):
        p = d / f"{0:020d}{suffix}"
        p.write_bytes(p.read_bytes() + bytes(pad))
    write(FS, root, "batch:2", {0: recs(40, start=80)}, config=cfg, per_batch=4)
    assert [r[0] for r in read_kp(str(d))] == list(range(120))
    assert_indexes_like_broker(str(d), 600)


def test_torn_tail_in_existing_segment_is_refused(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(10)})
    seg = tmp_path / "t-0" / f"{0:020d}.log"
    intact = seg.read_bytes()
    seg.write_bytes(intact + intact[:100])          # a batch cut short by a crash
    with pytest.raises(CorruptRecordError, match="torn batch.*position %d" % len(intact)):
        write(FS, root, "batch:2", {0: recs(3)})
    seg.write_bytes(intact + bytes(30))             # a zero (preallocated) tail
    with pytest.raises(CorruptRecordError, match="position %d" % len(intact)):
        write(FS, root, "batch:3", {0: recs(3)})
    seg.write_bytes(intact)
    assert not write(FS, root, "batch:4", {0: recs(3)}).noop


def test_appends_to_real_broker_partitions(real_broker, tmp_path):
    """Continue real broker logs (v2 and magic 1): offsets follow the broker's log end,
    the broker's records are untouched, the new indexes continue the broker's."""
    for src_dir, part in [("niloufar-ldi-poc", "__consumer_offsets-6"),
                          ("kafka-0.10-magic1", "foo-0"),
                          ("donaldy-kafka-2.7.1", "__consumer_offsets-39")]:
        root = tmp_path / src_dir
        shutil.copytree(real_broker / src_dir, root)
        for p in root.rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        topic, p = part.rsplit("-", 1)
        d = root / part
        before = {b: (d / f"{b:020d}.log").read_bytes() for b in segments(str(d))}
        last = max(segments(str(d)))
        positions, lasts, _ = _walk((d / f"{last:020d}.log").read_bytes())
        leo = lasts[-1] + 1
        # the broker's partitions all exist in this root: write with their count
        n = len(topic_partitions(FS, str(root), topic))
        records = recs(60)
        data, table = kp_encode(records, per_batch=7)
        w = StagingWriter(FS, str(root), "batch:1")
        w.add(topic, int(p), data, table)
        r = commit_write(FS, str(root), "batch:1", [w.finish()],
                         [TopicSpec(topic, expected_partitions=n)])
        assert r.ranges[topic][int(p)] == (leo, leo + 60)
        for b, content in before.items():
            assert (d / f"{b:020d}.log").read_bytes()[:len(content)] == content
        appended = (d / f"{last:020d}.log").read_bytes()[len(before[last]):]
        from kafka.record.default_records import DefaultRecordBatch
        pos, offsets = 0, []
        while pos < len(appended):
            (length,) = struct.unpack_from(">i", appended, pos + 8)
            batch = DefaultRecordBatch(bytearray(appended[pos:pos + 12 + length]))
            assert batch.validate_crc()
            offsets += [rec.offset for rec in batch]
            pos += 12 + length
        assert offsets == list(range(leo, leo + 60))
        if (d / f"{last:020d}.index").exists() and src_dir == "niloufar-ldi-poc":
            # trimmed broker indexes: the continued files are what recover would write
            assert expected_segment_indexes(str(d / f"{last:020d}.log"), 4096) == (
                (d / f"{last:020d}.index").read_bytes(),
                (d / f"{last:020d}.timeindex").read_bytes())


_HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.lockf(fd, fcntl.LOCK_EX)     # what Java's FileChannel.tryLock does on Linux
print("locked", flush=True)
sys.stdin.read()
"""


def test_refuses_a_log_dir_a_broker_holds(tmp_path):
    root = str(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, f"{root}/.lock"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(CommitConflictError, match="running Kafka broker"):
            write(FS, root, "batch:1", {0: recs(3)})
        assert not os.path.exists(f"{root}/t-0")
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
        proc.stdout.close()
    write(FS, root, "batch:1", {0: recs(3)})          # broker gone: fine
    assert len(read_kp(f"{root}/t-0")) == 3


@pytest.mark.parametrize("small", [0, index.SMALL_BATCH_COUNT])
def test_vectorized_index_builder_equals_batch_by_batch(small, monkeypatch):
    # small=0: every add_batches call takes the vectorized path, however few batches
    monkeypatch.setattr(index, "SMALL_BATCH_COUNT", small)
    rng = random.Random(11)
    for trial in range(300):
        n = rng.randint(0, 80)
        sizes = [rng.choice([61, 100, 700, 5000, rng.randint(61, 9000)]) for _ in range(n)]
        positions = [int(x) for x in np.cumsum([0] + sizes[:-1])] if n else []
        lasts = [int(x) for x in np.cumsum([rng.randint(1, 9) for _ in range(n)]) + 50]
        ts = [rng.choice([-1, rng.randint(0, 10_000)]) for _ in range(n)]
        interval = rng.choice([0, 60, 700, 4096, 20_000])
        cut = rng.randint(0, n)
        one, many = (IndexBuilder.for_new_segment(50, interval) for _ in range(2))
        for b in (one, many):                    # same prefix, then the rest two ways
            for p, last, t in zip(positions[:cut], lasts[:cut], ts[:cut]):
                b.add_batch(p, last, t)
        for p, last, t in zip(positions[cut:], lasts[cut:], ts[cut:]):
            one.add_batch(p, last, t)
        many.add_batches(positions[cut:], lasts[cut:], ts[cut:])
        assert one == many, trial


def test_written_logs_pass_kafkalog_verify(tmp_path):
    """Every kind of write leaves a log `kafkalog verify --strict --deep` accepts (CRCs,
    offsets, .index/.timeindex against the log, checkpoints against the log end)."""
    import io

    from spark_kafkalog.cli import main

    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=50_000, index_interval_bytes=1000)

    def verify():
        out, err = io.StringIO(), io.StringIO()
        assert main(["verify", "--strict", "--deep", "--no-progress", root],
                     stdout=out, stderr=err) == 0, out.getvalue() + err.getvalue()
        assert "0 errors, 0 warnings" in out.getvalue()

    for k, codec in enumerate(["none", "zstd", "lz4", "gzip", "snappy"]):
        write(FS, root, f"batch:{k}", {0: recs(400, start=400 * k), 2: recs(150)},
              partitions=3, config=cfg, per_batch=13, codec=codec, tasks=2)
        verify()
    write(FS, root, "batch:na", {1: recs(100)},
          config=AppendConfig(no_append=True, index_interval_bytes=1000))
    verify()
    write(FS, root, "batch:ov", {2: recs(100)}, config=cfg, mode="overwrite")
    verify()


# ---- per-partition staging files and adopted segments -----------------------------------
def _log_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".log"))


def test_large_staged_sections_are_adopted_as_segments(tmp_path):
    """A section staged in a file of its own, at least adopt_min_bytes long, becomes a new
    segment (linked, not copied): offsets patched, indexes as a broker builds them,
    readable by kafka-python and aiokafka, and it passes `kafkalog verify`."""
    import io

    from spark_kafkalog.cli import main

    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=200_000, index_interval_bytes=700,
                       adopt_min_bytes=5_000)
    base = recs(30)                                   # small: copied into segment 0
    write(FS, root, "batch:0", {0: base}, config=cfg, split=True, per_batch=7)
    assert _log_files(f"{root}/t-0") == [f"{0:020d}.log"]
    big = recs(300, start=1000)
    staged = [stage(FS, root, "batch:1", {0: big[k::2]}, split=True, per_batch=9,
                    label=f"t{k}") for k in range(2)]
    sec_paths = [sf.sections[0].path for sf in staged]
    assert all(p and os.path.getsize(p) >= 5_000 for p in sec_paths)
    inodes = [os.stat(p).st_ino for p in sec_paths]
    r = commit_write(FS, root, "batch:1", staged, [TopicSpec("t")], config=cfg)
    assert r.ranges == {"t": {0: (30, 330)}}
    # each task's file became a segment of its own: same inode, now in the partition dir
    assert segments(f"{root}/t-0") == [0, 30, 180]
    assert [os.stat(f"{root}/t-0/{b:020d}.log").st_ino for b in (30, 180)] == inodes
    expected = as_rows(base, 0) + as_rows(big[0::2] + big[1::2], 30)
    assert read_kp(f"{root}/t-0") == expected
    assert read_aio(f"{root}/t-0") == expected
    assert_indexes_like_broker(f"{root}/t-0", 700)
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]
    # a small write afterwards appends to the adopted (active) segment
    write(FS, root, "batch:2", {0: recs(5, start=5000)}, config=cfg, split=True)
    assert segments(f"{root}/t-0") == [0, 30, 180]
    assert [x[0] for x in read_kp(f"{root}/t-0")] == list(range(335))
    assert_indexes_like_broker(f"{root}/t-0", 700)
    out, err = io.StringIO(), io.StringIO()
    assert main(["verify", "--strict", "--deep", "--no-progress", root],
                stdout=out, stderr=err) == 0, out.getvalue() + err.getvalue()


def test_small_partitions_share_the_task_staging_file(tmp_path):
    """With own_file_min_bytes, a task writing to many partitions makes one staging file
    for the small ones; a partition past the threshold continues in a file of its own
    (its first bytes stay in the shared file, ahead of it), which the commit adopts as a
    segment when large enough. The log is the one a plain staging file gives."""
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=200_000, index_interval_bytes=700,
                       adopt_min_bytes=5_000)
    small = {p: recs(3, start=100 * p) for p in range(1, 40)}
    big = recs(300, start=5000)
    staged = []
    for k in range(2):
        w = StagingWriter(FS, root, "batch:1", f"t{k}", per_partition_files=True,
                          own_file_min_bytes=2_500)
        for chunk in range(0, 150, 10):      # big-0 arrives in pieces, between the others
            data, table = kp_encode(big[k::2][chunk:chunk + 10], per_batch=9)
            w.add("t", 0, data, table)
            for p, rows in small.items():
                if chunk == 0:
                    data, table = kp_encode(rows[k::2] or rows, per_batch=9)
                    w.add("t", p, data, table)
        staged.append(w.finish())
    for sf in staged:
        own = [s for s in sf.sections if s.path is not None]
        assert [(s.topic, s.partition) for s in own] == [("t", 0)]   # only big-0
        shared = [s for s in sf.sections if s.path is None and s.partition == 0]
        assert shared and sum(s.size for s in shared) <= 2_500
        assert own[0].size >= 5_000
    files = [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]
    assert len(files) == 4                   # per task: the shared file and big-0's own
    r = commit_write(FS, root, "batch:1", staged,
                     [TopicSpec("t", partitions_if_new=40)], config=cfg)
    assert r.ranges["t"][0] == (0, 300)
    ordered = big[0::2] + big[1::2]         # task 0's rows, then task 1's
    assert [x[1:] for x in read_kp(f"{root}/t-0")] == [x[1:] for x in as_rows(ordered, 0)]
    assert len(segments(f"{root}/t-0")) == 3        # the shared heads, then two adopted
    for p, rows in small.items():
        expect = (rows[0::2] or rows) + (rows[1::2] or rows)
        assert [x[1:] for x in read_kp(f"{root}/t-{p}")] == \
            [x[1:] for x in as_rows(expect, 0)]
    assert_indexes_like_broker(f"{root}/t-0", 700)
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_flush_behind_syncs_large_staging_files_while_staging(tmp_path, monkeypatch):
    """With flush_behind, a per-partition staging file is fdatasynced in the background
    once it is FLUSH_BEHIND_START long and each time FLUSH_BEHIND_BYTES more are staged,
    and its tail when the task finishes; a file that never reaches the start (it will be
    copied, not adopted) is not; a file gone before its turn (an aborted task) is
    skipped and the flusher keeps going."""
    # private names of the flush module: its tuning knobs and the process's flusher
    from spark_kafkalog.log.write import flush

    synced = []
    real = os.fdatasync

    def recording(fd):
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)

    monkeypatch.setattr(os, "fdatasync", recording)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_BYTES", 1_000)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_START", 4_000)
    root = str(tmp_path)
    big = recs(200, start=0)
    data, table = kp_encode(big, per_batch=20)
    assert len(data) > 4_000
    small_data, small_table = kp_encode(recs(3), per_batch=3)
    assert 200 < len(small_data) < 800

    flush.flusher().submit(f"{root}/gone")          # missing: ignored
    w = StagingWriter(FS, root, "batch:1", "t0", per_partition_files=True,
                      flush_behind=True)
    w.add("t", 0, data, table)
    assert flush.flusher().wait_idle(30)
    assert len(synced) == 1 and synced[0].endswith(".t-0"), synced
    first = synced[0]
    for _ in range(5):      # t-1 grows past FLUSH_BEHIND_BYTES, never to the start
        w.add("t", 1, small_data, small_table)
    w.add("t", 0, small_data, small_table)               # tail, below the threshold
    assert flush.flusher().wait_idle(30)
    assert synced == [first]
    sf = w.finish()                                      # the tail of t-0 only
    assert flush.flusher().wait_idle(30)
    assert synced == [first, first]
    cfg = AppendConfig(adopt_min_bytes=4_000)
    commit_write(FS, root, "batch:1", [sf], [TopicSpec("t", partitions_if_new=2)],
                 config=cfg)
    assert read_kp(f"{root}/t-0") == as_rows(big + recs(3), 0)
    assert read_kp(f"{root}/t-1") == as_rows(recs(3) * 5, 0)

    synced.clear()                                       # off: nothing flushed early
    w = StagingWriter(FS, root, "batch:2", "t0", per_partition_files=True)
    w.add("t", 0, data, table)
    w.finish()
    assert flush.flusher().wait_idle(30)
    assert synced == []


def test_flush_behind_drops_flushed_pages_and_the_commit_reads_headers_back(tmp_path,
                                                                           monkeypatch):
    """A file flushed behind has its flushed whole pages dropped from the page cache
    (after the fdatasync that makes them clean; contiguous ranges covering the file up
    to its last whole page, never a page written after the flush was asked for); the
    commit asks for every batch's header back at once (WILLNEED) before checking and
    patching, and the log reads back exactly."""
    # private names of the flush module: its tuning knobs, fadvise hook and flusher
    from spark_kafkalog.log.write import flush

    calls = []
    real_sync, real_advise = os.fdatasync, os.posix_fadvise

    def sync(fd):
        calls.append(("sync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}")), 0, 0))
        return real_sync(fd)

    def advise(fd, offset, length, advice):
        calls.append((advice, os.path.basename(os.readlink(f"/proc/self/fd/{fd}")),
                      offset, length))
        return real_advise(fd, offset, length, advice)

    monkeypatch.setattr(os, "fdatasync", sync)
    monkeypatch.setattr(flush, "_FADVISE", advise)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_BYTES", 10_000)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_START", 20_000)
    rows = recs(600, start=0)
    chunks = [kp_encode(rows[i:i + 100], per_batch=25) for i in range(0, 600, 100)]
    size = sum(len(d) for d, _ in chunks)
    # batches this large on average are dropped behind (these are ~2.8 KB)
    monkeypatch.setattr(flush, "DROP_MIN_BATCH_BYTES", size // 24)
    root = str(tmp_path)
    w = StagingWriter(FS, root, "batch:1", "t0", per_partition_files=True,
                      flush_behind=True)
    for data, table in chunks:
        w.add("t", 0, data, table)
    sf = w.finish()
    assert flush.flusher().wait_idle(30)
    page = flush._CACHE_PAGE
    drops = [c for c in calls if c[0] == os.POSIX_FADV_DONTNEED]
    assert drops and all(c[1].endswith(".t-0") for c in drops)
    assert [c[2] for c in drops] == [0] + [a + n for _, _, a, n in drops[:-1]]
    assert drops[-1][2] + drops[-1][3] == size - size % page
    assert all(n > 0 and n % page == 0 for *_, n in drops)
    for k, c in enumerate(calls):           # each drop follows a flush of that file
        if c[0] == os.POSIX_FADV_DONTNEED:
            assert calls[k - 1][0] in ("sync", os.POSIX_FADV_DONTNEED)
    calls.clear()
    real_save = jr.save

    def save(*args, **kwargs):
        calls.append(("journal", "", 0, 0))
        return real_save(*args, **kwargs)

    monkeypatch.setattr(jr, "save", save)
    commit_write(FS, root, "batch:1", [sf], [TopicSpec("t", partitions_if_new=1)],
                 config=AppendConfig(adopt_min_bytes=20_000))
    asked = [c[2] for c in calls if c[0] == os.POSIX_FADV_WILLNEED]
    starts = np.concatenate([[0], np.cumsum([len(d) for d, _ in chunks])[:-1]])
    expect = sorted(int(s0 + p) for (_, t), s0 in zip(chunks, starts)
                    for p in t["position"])
    assert len(expect) == 24 and sorted(set(asked)) == expect
    # every header page is asked for at once, before the journal's first save (whose
    # fsync waits for the flush-behind), not window by window after it
    first_save = next(k for k, c in enumerate(calls) if c[0] == "journal")
    assert sorted(c[2] for c in calls[:first_save]
                  if c[0] == os.POSIX_FADV_WILLNEED) == expect
    assert read_kp(f"{root}/t-0") == as_rows(rows, 0)


def test_flush_behind_keeps_the_pages_of_small_batches(tmp_path, monkeypatch):
    """Batches averaging under DROP_MIN_BATCH_BYTES are flushed behind but not dropped:
    every few pages hold a header the commit reads back; a file whose average reaches
    it later is dropped from where it stands then, from its start."""
    # private names of the flush module: its tuning knobs, fadvise hook and flusher
    from spark_kafkalog.log.write import flush

    drops = []
    syncs = []
    real_sync, real_advise = os.fdatasync, os.posix_fadvise

    def sync(fd):
        syncs.append(fd)
        return real_sync(fd)

    def advise(fd, offset, length, advice):
        if advice == os.POSIX_FADV_DONTNEED:
            drops.append((offset, length))
        return real_advise(fd, offset, length, advice)

    monkeypatch.setattr(os, "fdatasync", sync)
    monkeypatch.setattr(flush, "_FADVISE", advise)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_BYTES", 10_000)
    monkeypatch.setattr(flush, "FLUSH_BEHIND_START", 20_000)
    rows = recs(600, start=0)
    chunks = [kp_encode(rows[i:i + 100], per_batch=25) for i in range(0, 600, 100)]
    size = sum(len(d) for d, _ in chunks)
    monkeypatch.setattr(flush, "DROP_MIN_BATCH_BYTES", size // 24 + 1)
    root = str(tmp_path)
    w = StagingWriter(FS, root, "batch:1", "t0", per_partition_files=True,
                      flush_behind=True)
    for data, table in chunks:
        w.add("t", 0, data, table)
    big, big_table = kp_encode(recs(20, start=600, size=20_000), per_batch=20)
    w.add("t", 0, big, big_table)            # one large batch lifts the average
    sf = w.finish()
    assert flush.flusher().wait_idle(30)
    assert syncs
    total = size + len(big)
    page = flush._CACHE_PAGE
    assert drops == [(0, total - total % page)]
    commit_write(FS, root, "batch:1", [sf], [TopicSpec("t", partitions_if_new=1)],
                 config=AppendConfig(adopt_min_bytes=20_000))
    assert read_kp(f"{root}/t-0") == as_rows(rows + recs(20, start=600, size=20_000), 0)


def test_every_new_name_is_fsynced_before_the_commit_point(tmp_path, monkeypatch):
    """With fsync on, every segment and index file the commit writes or adopts, every
    partition directory (the new names in it) and the topic root (a new partition
    directory in it) are fsynced before the journal records the write as committed, the
    directories in the background like the files (see _apply_partition); and the first
    journal save (the pending record) comes before any of them."""
    import threading


    events = []
    main = threading.get_ident()
    real_fsync, real_save = os.fsync, jr.save

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"),
                       threading.get_ident() == main))
        return real_fsync(fd)

    def save(fs, root, state):
        what = state.pending.state if state.pending is not None else None
        events.append(("journal", what, "start"))
        real_save(fs, root, state)
        events.append(("journal", what, "end"))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(jr, "save", save)
    root = str(tmp_path)
    parts = {0: recs(40), 1: recs(30, start=40), 2: recs(20, start=70)}
    cfg = AppendConfig(adopt_min_bytes=1)          # tasks' files adopted, one copied
    write(FS, root, "batch:1", parts, partitions=3, tasks=2, split=True, per_batch=7,
          config=cfg)
    journal = [k for k, e in enumerate(events) if e[0] == "journal"]
    assert [events[k][1:] for k in journal[:4]] == [
        ("begun", "start"), ("begun", "end"), ("committed", "start"), ("committed", "end")]
    begun, committed = journal[1], journal[2]   # after the pending record, before the commit
    synced = {path for kind, path, _ in events[begun:committed] if kind == "fsync"}
    dirs = {f"{root}/t-{p}" for p in parts} | {root}
    assert dirs <= synced
    names = {os.path.join(d, n) for d in dirs - {root} for n in os.listdir(d)
             if n.endswith((".log", ".index", ".timeindex"))}
    assert names and names <= synced
    # no directory fsync ran on the committing thread: none waited for the one before
    assert not [path for kind, path, inline in events[begun:committed]
                if kind == "fsync" and inline and path in dirs]
    for p, rows in parts.items():          # task 0's records (every other one) first
        assert read_kp(f"{root}/t-{p}") == as_rows(rows[0::2] + rows[1::2], 0)


def test_an_append_fsyncs_each_file_it_changes_and_each_new_name_once(tmp_path, monkeypatch):
    """Between the pending record and the commit point: a new topic's partition
    directories and every file in them are fsynced, the log dir once for all of its new
    partition directories; an append to those partitions' active segments (no new name)
    fsyncs each .log and .timeindex it extends (and the .index when it gains entries)
    and no directory; a write that rolls a segment fsyncs that partition's directory."""
    events = []
    real_fsync, real_save = os.fsync, jr.save

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def save(fs, root, state):
        what = state.pending.state if state.pending else None
        events.append(("journal", what))
        real_save(fs, root, state)
        events.append(("saved", what))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(jr, "save", save)
    root = str(tmp_path)
    dirs = {f"{root}/t-{p}" for p in range(4)}

    def synced(parts, wid, **kw):
        events.clear()
        write(FS, root, wid, parts, partitions=4, tasks=2, per_batch=5, **kw)
        begun = events.index(("saved", "begun"))
        committed = events.index(("journal", "committed"))
        return [path for kind, path in events[begun:committed] if kind == "fsync"]

    first = synced({p: recs(30, start=100 * p) for p in range(4)}, "batch:1")
    assert first.count(root) == 1 and dirs <= set(first)
    files = {os.path.join(d, n) for d in dirs for n in os.listdir(d)
             if n.endswith((".log", ".index", ".timeindex"))}
    assert files <= set(first)
    again = synced({p: recs(10, start=100 * p + 30) for p in range(4)}, "batch:2")
    assert not set(again) & (dirs | {root})
    logs = {f"{d}/{0:020d}.log" for d in dirs}
    assert logs | {f"{d}/{0:020d}.timeindex" for d in dirs} <= set(again)
    assert len(again) == len(set(again))         # each file once
    rolled = synced({0: recs(10, start=40)}, "batch:3",
                    config=AppendConfig(segment_bytes=2000))
    assert f"{root}/t-0" in rolled and root not in rolled
    assert read_kp(f"{root}/t-0")[-1][0] == 49


def test_syncer_fsyncs_on_its_threads_closes_every_file_and_reraises(tmp_path, monkeypatch):
    """The commit's fsync threads: at most ``threads`` of them, never the caller's; every
    file handed over is closed, fsynced or not; a failed fsync is raised by ``wait``."""
    import errno
    import threading

    from spark_kafkalog.log.write import flush

    ran, closed = set(), set()
    real_fsync, real_close = os.fsync, os.close

    def fsync(fd):
        ran.add(threading.get_ident())
        if os.readlink(f"/proc/self/fd/{fd}").endswith("bad"):
            raise OSError(errno.EIO, "disk error")
        return real_fsync(fd)

    def close(fd):
        closed.add(fd)
        return real_close(fd)

    fds = []
    for name in [f"f{i}" for i in range(10)] + ["bad"]:
        (tmp_path / name).write_bytes(b"x")
        fds.append(os.open(tmp_path / name, os.O_RDONLY))
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "close", close)
    syncer = flush.Syncer(threads=3)
    for fd, name in zip(fds, [f"f{i}" for i in range(10)] + ["bad"]):
        syncer.fsync_and_close(fd, str(tmp_path / name))
    # our error, naming the file and the errno
    from spark_kafkalog.errors import StorageError
    with pytest.raises(StorageError, match=r"cannot fsync file: EIO .*bad\)") as info:
        syncer.wait()
    assert info.value.errno == errno.EIO
    assert 1 <= len(ran) <= 3 and threading.get_ident() not in ran
    assert set(fds) <= closed


def test_adoption_patches_offsets_without_a_writable_mapping(tmp_path, monkeypatch):
    """Adopted files are checked through a read-only mapping and patched by pwrite: pages
    dirtied through a shared mapping made each fsync after them cost ~40 ms on ext4."""
    import mmap as mmap_mod

    from spark_kafkalog.log.write import apply

    accesses = []
    real = mmap_mod.mmap

    def recording(*args, **kwargs):
        accesses.append(kwargs.get("access", mmap_mod.ACCESS_DEFAULT))
        return real(*args, **kwargs)

    monkeypatch.setattr(apply.mmap, "mmap", recording)
    root = str(tmp_path)
    cfg = AppendConfig(adopt_min_bytes=1)
    write(FS, root, "batch:0", {0: recs(40)}, config=cfg, split=True, per_batch=7)
    write(FS, root, "batch:1", {0: recs(50, start=40)}, config=cfg, split=True, per_batch=7)
    assert segments(f"{root}/t-0") == [0, 40]
    assert accesses and set(accesses) == {mmap_mod.ACCESS_READ}
    assert read_kp(f"{root}/t-0") == as_rows(recs(40) + recs(50, start=40), 0)


def test_adoption_respects_segment_limits(tmp_path):
    """A section larger than segment.bytes is copied (and rolled) rather than adopted; an
    empty active segment (its base is the next offset) is appended to, not shadowed."""
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=8_000, index_interval_bytes=700, adopt_min_bytes=1)
    write(FS, root, "batch:0", {0: recs(200)}, config=cfg, split=True, per_batch=9)
    segs = segments(f"{root}/t-0")
    assert len(segs) > 2
    for b in segs:
        assert os.path.getsize(f"{root}/t-0/{b:020d}.log") <= 8_000
    assert read_kp(f"{root}/t-0") == as_rows(recs(200), 0)
    assert_indexes_like_broker(f"{root}/t-0", 700)
    # an existing, empty partition: the first segment exists with size 0
    os.makedirs(f"{root}/u-0")
    for suffix in (".log", ".index", ".timeindex"):
        open(f"{root}/u-0/{0:020d}{suffix}", "wb").close()
    write(FS, root, "batch:1", {0: recs(20)}, topic="u", config=cfg, split=True)
    assert segments(f"{root}/u-0") == [0]
    assert read_kp(f"{root}/u-0") == as_rows(recs(20), 0)


def test_adoption_falls_back_to_copying_without_hard_links(tmp_path, monkeypatch):
    import errno

    def no_links(src, dst):
        raise OSError(errno.EPERM, "no hard links here")

    monkeypatch.setattr(os, "link", no_links)
    root = str(tmp_path)
    cfg = AppendConfig(index_interval_bytes=700, adopt_min_bytes=1)
    write(FS, root, "batch:0", {0: recs(10)}, partitions=2, config=cfg, split=True)
    write(FS, root, "batch:1", {0: recs(100, start=10), 1: recs(40)}, partitions=2,
          config=cfg, split=True, tasks=2)
    expected = as_rows(recs(10), 0) + as_rows(recs(100, start=10)[0::2]
                                              + recs(100, start=10)[1::2], 10)
    assert read_kp(f"{root}/t-0") == expected
    assert_indexes_like_broker(f"{root}/t-0", 700)
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_a_changed_staging_file_is_not_adopted(tmp_path):
    root = str(tmp_path)
    cfg = AppendConfig(adopt_min_bytes=1)
    sf = stage(FS, root, "batch:1", {0: recs(20)}, split=True)
    with open(sf.sections[0].path, "ab") as f:
        f.write(b"\0" * 10)
    with pytest.raises(CommitConflictError, match="not the size"):
        commit_write(FS, root, "batch:1", [sf], [TopicSpec("t")], config=cfg)
    write(FS, root, "batch:2", {0: recs(3)}, config=cfg, split=True)
    assert [r[0] for r in read_kp(f"{root}/t-0")] == [0, 1, 2]


def test_per_partition_staging_abort_and_empty(tmp_path):
    root = str(tmp_path)
    w = StagingWriter(FS, root, "batch:1", per_partition_files=True)
    assert w.finish() is None
    w = StagingWriter(FS, root, "batch:1", per_partition_files=True)
    for p in range(3):
        data, table = kp_encode(recs(5, start=p))
        w.add("t", p, data, table)
        w.add("t", p, data, table)          # a second add appends to the same file
    assert len(os.listdir(root)) == 3
    w.abort()
    assert not os.listdir(root)


def test_per_partition_staging_holds_no_descriptor_per_partition(tmp_path):
    """A task writing to many partitions must not keep a file open for each."""
    root = str(tmp_path)
    fds = len(os.listdir("/proc/self/fd"))
    w = StagingWriter(FS, root, "batch:1", per_partition_files=True)
    data, table = kp_encode(recs(3))
    for p in range(300):
        w.add("t", p, data, table)
    assert len(os.listdir("/proc/self/fd")) <= fds + 2
    sf = w.finish()
    assert len(sf.sections) == 300
    r = commit_write(FS, root, "batch:1", [sf], [TopicSpec("t", partitions_if_new=300)])
    assert r.ranges["t"][299] == (0, 3)
    assert [x[0] for x in read_kp(f"{root}/t-299")] == [0, 1, 2]


@pytest.mark.parametrize("keep", [None, 6])
def test_planning_keeps_the_active_files_open_for_the_append_and_closes_every_one(
        tmp_path, monkeypatch, keep):
    """Planning reads each active segment's files through descriptors the append then
    writes with (as many as the process may keep: ``keep`` files, two partitions, forces
    the rest to be opened again); after a commit, a failed append (rolled back) and a
    failed plan, no file is left open, and each log reads back whole."""
    from spark_kafkalog.log.write import plan as plan_mod
    if keep is not None:
        monkeypatch.setattr(plan_mod, "_fds_to_keep", lambda: keep)
    root = str(tmp_path)

    def open_fds():
        return set(os.listdir("/proc/self/fd"))
    parts = {p: recs(30, start=1000 * p) for p in range(5)}
    write(FS, root, "batch:1", parts, partitions=5, tasks=2)
    before = open_fds()
    more = {p: recs(20, start=1000 * p + 500) for p in range(5)}
    opened = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        if str(path).endswith((".log", ".timeindex")):
            opened.append(os.path.basename(os.path.dirname(path)))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, "open", counting_open)
    write(FS, root, "batch:2", more, partitions=5, tasks=2)
    monkeypatch.setattr(os, "open", real_open)
    assert open_fds() == before
    # the .log and .timeindex of each partition: opened once each (read, then appended
    # to), or twice past the files planning may keep
    kept = 5 if keep is None else keep // 3
    assert sorted(opened.count(f"t-{p}") for p in range(5)) == [2] * kept + [4] * (5 - kept)

    class Boom(Exception):
        pass

    def fail_at_segment(point):
        if point == "segment":
            raise Boom(point)
    with pytest.raises(Boom):
        write(FS, root, "batch:3", {p: recs(5) for p in range(5)}, partitions=5,
              fault=fail_at_segment)
    assert open_fds() == before
    with pytest.raises(BadRowError):
        write(FS, root, "batch:4", {p: recs(5) for p in (0, 1, 7)}, partitions=5)
    assert open_fds() == before
    for p in range(5):
        got = [(o, v) for o, _, v, _, _ in read_kp(f"{root}/t-{p}")]
        # each write's two tasks land one after the other
        want = parts[p][0::2] + parts[p][1::2] + more[p][0::2] + more[p][1::2]
        assert got == [(o, r.value) for o, r in enumerate(want)]


@pytest.mark.parametrize("split", [False, True])
def test_add_partitioned_stages_what_add_stages_one_by_one(tmp_path, split):
    """StagingWriter.add_partitioned (one conversion of the batch tables, one write per run
    of shared sections) leaves the same staging files, sections and batch tables as add()
    called per section: with partitions moving to files of their own part-way (split),
    empty partitions, and a damaged table rejected with add()'s error."""
    import pyarrow as pa
    from spark_kafkalog.format.encode import encode_partitioned

    n = 30
    rows = 3000
    keys = [b"k%d" % i for i in range(rows)]
    table = pa.table({"key": keys, "value": [b"v" * (i % 97) for i in range(rows)]})
    # partition 0 gets most rows (it moves to its own file), partition 29 none
    parts = np.asarray([0 if i % 3 == 0 else i % (n - 1) for i in range(rows)], np.int32)
    chunks = [encode_partitioned(table.slice(a, 500), parts[a:a + 500], n,
                                 max_batch_bytes=4096) for a in range(0, rows, 500)]
    staged = {}
    for how in ("one by one", "partitioned"):
        w = StagingWriter(FS, str(tmp_path / how), "batch:1", "t0", per_partition_files=split,
                          own_file_min_bytes=20_000)
        for data, sections in chunks:
            if how == "partitioned":
                w.add_partitioned("t", data, sections)
            else:
                for p, start, end, index in sections:
                    w.add("t", p, memoryview(data)[start:end], index)
        sf = w.finish()
        files = {os.path.basename(f)[len(os.path.basename(sf.path)):]:
                 Path(os.path.join(tmp_path / how, f)).read_bytes()
                 for f in os.listdir(tmp_path / how)}
        sections = [dataclasses.replace(s, path=s.path and s.path[len(sf.path):])
                    for s in sf.sections]
        staged[how] = (sf.table_position, sf.batch_count, sections, files)
    assert staged["partitioned"] == staged["one by one"]
    assert split == any(s.path for s in staged["partitioned"][2])
    data, sections = chunks[0]
    p, start, end, index = sections[3]
    bad = index.set_column(index.schema.get_field_index("size"), "size",
                           pa.array(np.asarray(index["size"]) + 1, index["size"].type))
    w = StagingWriter(FS, str(tmp_path / "bad"), "batch:1", "t0")
    with pytest.raises(BadRowError, match="does not tile"):
        w.add_partitioned("t", data, sections[:3] + [(p, start, end, bad)] + sections[4:])
    w.abort()
