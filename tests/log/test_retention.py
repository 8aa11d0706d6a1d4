"""Retention: exactly the segments Kafka's log manager would delete, a reader racing it
never fails nor sees part of it, and a SIGKILL at any step leaves the old log or the new.

The oracle (:func:`kafka_deletes`) restates Kafka's ``UnifiedLog.deleteOldSegments`` in
its own shape: three passes (log start, retention.bytes, retention.ms) that each remove a
prefix of the live segments, a segment only when the high watermark is at or past the
next segment's base; the active segment is kept (the issue's rule: offline nothing rolls
a new one). Segment facts of the real logs are read with kafka-python, not this package.
"""
from __future__ import annotations

import os
import random
import shutil
import signal
import time
import traceback

import pyarrow.compute as pc
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import InvalidOptionError, LockError
from spark_kafkalog.log import LogDirs, read_table
from spark_kafkalog.log.diagnose.verify import verify_log_dirs
from spark_kafkalog.errors import LogLayoutError
from spark_kafkalog.log.files.checkpoint import (
    leader_epochs_from_start,
    read_checkpoint,
    read_leader_epoch_checkpoint,
    write_checkpoint,
)
from spark_kafkalog.log.maintain.retention import (
    RetentionConfig,
    SegmentFacts,
    apply_retention,
    deletable_segments,
    plan_retention,
    purge_deleted,
)
from spark_kafkalog.log.write import AppendConfig
from tests.log.killing import FaultCounter, run_killed
from tests.log.test_appender_util import R, write

FS = pafs.LocalFileSystem()
HOUR = 3600 * 1000


def kafka_deletes(segs, *, log_start, hw, ms, nbytes, now):
    """Base offsets Kafka deletes: ``segs`` = [(base, size, largest timestamp)]."""
    live = list(segs)
    gone = []

    def pass_(should):
        doomed = []
        for k in range(len(live) - 1):          # never the active (last) segment
            seg, nxt = live[k], live[k + 1]
            if hw < nxt[0] or not should(seg):
                break
            doomed.append(seg)
        for seg in doomed:
            live.remove(seg)
            gone.append(seg[0])

    pass_(lambda s: live[live.index(s) + 1][0] <= log_start)
    total = sum(s[1] for s in live)
    if nbytes >= 0 and total >= nbytes:
        budget = [total - nbytes]

        def by_size(s):
            if budget[0] < s[1]:
                return False
            budget[0] -= s[1]
            return True
        pass_(by_size)
    if ms >= 0:
        pass_(lambda s: now - s[2] > ms)
    return gone


def decide(segs, **kw):
    facts = [SegmentFacts(b, s, t) for b, s, t in segs]
    chosen = deletable_segments(facts, log_start=kw["log_start"], high_watermark=kw["hw"],
                                retention_ms=kw["ms"], retention_bytes=kw["nbytes"],
                                now_ms=kw["now"])
    return [segs[i][0] for i, _ in chosen]


NOW = 100 * HOUR
S5 = [(0, 100, 10 * HOUR), (10, 100, 20 * HOUR), (20, 100, 30 * HOUR), (30, 100, 40 * HOUR),
      (40, 50, 99 * HOUR)]
# (segments, settings, what Kafka deletes) worked out by hand from Kafka's rules
TABLE = [
    (S5, dict(ms=-1, nbytes=-1), []),
    # older than 65 h: largest timestamps 10 h, 20 h, 30 h (now 100 h)
    (S5, dict(ms=65 * HOUR, nbytes=-1), [0, 10, 20]),
    # exactly retention.ms old is not older than it
    (S5, dict(ms=70 * HOUR, nbytes=-1), [0, 10]),
    # every segment expired: the active one stays
    (S5, dict(ms=0, nbytes=-1), [0, 10, 20, 30]),
    # size 450, limit 250: 450-100=350>=250, 250>=250, 150<250 stops -> two go
    (S5, dict(ms=-1, nbytes=250), [0, 10]),
    (S5, dict(ms=-1, nbytes=251), [0]),
    (S5, dict(ms=-1, nbytes=450), []),        # size == limit: the pass runs, nothing fits
    (S5, dict(ms=-1, nbytes=0), [0, 10, 20, 30]),
    # size first, then time over what is left
    (S5, dict(ms=85 * HOUR, nbytes=350), [0]),
    (S5, dict(ms=75 * HOUR, nbytes=350), [0, 10]),
    (S5, dict(ms=65 * HOUR, nbytes=350), [0, 10, 20]),
    # the time pass stops at the first young segment even if older ones follow
    ([(0, 10, 97 * HOUR), (5, 10, 1 * HOUR), (9, 10, 98 * HOUR)], dict(ms=5 * HOUR, nbytes=-1),
     []),
    # the high watermark (22) is below segment 20's end (30): segments 0, 10 only
    (S5, dict(ms=0, nbytes=-1, hw=22), [0, 10]),
    (S5, dict(ms=0, nbytes=-1, hw=9), []),
    # a log start checkpointed at 25 takes 0 and 10 (next bases 10, 20 <= 25), not 20
    (S5, dict(ms=-1, nbytes=-1, log_start=25), [0, 10]),
    # the size pass counts what the log-start pass left: 250 left, limit 150 -> 20 goes
    (S5, dict(ms=-1, nbytes=150, log_start=20), [0, 10, 20]),
    # a single segment is active: never deleted
    ([(0, 100, 0)], dict(ms=0, nbytes=0), []),
    ([], dict(ms=0, nbytes=0), []),
]


@pytest.mark.parametrize("segs,settings,want", TABLE)
def test_table_hand_computed(segs, settings, want):
    kw = dict(log_start=segs[0][0] if segs else 0, hw=segs[-1][0] + 10 if segs else 0,
              now=NOW)
    kw.update(settings)
    assert kafka_deletes(segs, **kw) == want
    assert decide(segs, **kw) == want


def test_table_generated_against_oracle():
    rng = random.Random(19)
    for _ in range(3000):
        n = rng.randint(1, 8)
        base, segs = rng.randint(0, 5), []
        for _ in range(n):
            segs.append((base, rng.choice([0, 1, 50, 100, 4096]), rng.randint(0, 100) * HOUR))
            base += rng.randint(1, 20)
        leo = base
        kw = dict(log_start=rng.randint(segs[0][0], leo), hw=rng.randint(segs[0][0], leo),
                  ms=rng.choice([-1, 0, 10 * HOUR, 50 * HOUR, 99 * HOUR]),
                  nbytes=rng.choice([-1, 0, 100, 150, 300, 5000]), now=NOW)
        assert decide(segs, **kw) == kafka_deletes(segs, **kw), (segs, kw)


def test_config_validation():
    with pytest.raises(InvalidOptionError, match="retention.ms"):
        RetentionConfig(retention_ms=-2)
    with pytest.raises(InvalidOptionError, match="unknown retention setting 'retention'"):
        RetentionConfig.from_mapping({"retention": 1})
    cfg = RetentionConfig.from_mapping({"retention.bytes": "100"},
                                       RetentionConfig(retention_ms=5))
    assert (cfg.retention_ms, cfg.retention_bytes) == (5, 100)


# ---- the leader epoch cache ------------------------------------------------------------
def kafka_epochs_after(entries, log_start):
    """Kafka's documented rule (LeaderEpochFileCache.truncateFromStart, "exclusive:
    truncateFromStart(6) will retain an entry at offset 6"), restated: the epoch of the
    new first offset (the last epoch starting at or before it) now starts there; epochs
    starting later stay; when no epoch starts at or before it, nothing changes."""
    first = None
    for epoch, start in entries:
        if start <= log_start:
            first = epoch
    if first is None:
        return list(entries)
    return [(first, log_start)] + [(e, s) for e, s in entries if s > log_start]


EPOCHS = [(2, 6), (3, 8), (4, 11)]


@pytest.mark.parametrize("start,want", [
    (0, EPOCHS), (5, EPOCHS),                 # below the first epoch: untouched
    (6, EPOCHS),                              # exactly at it: kept as is
    (7, [(2, 7), (3, 8), (4, 11)]),
    (8, [(3, 8), (4, 11)]),
    (9, [(3, 9), (4, 11)]),
    (11, [(4, 11)]),
    (12, [(4, 12)]),                          # past the last epoch's start: it moves up
    (1000, [(4, 1000)]),
])
def test_leader_epochs_from_start_hand_computed(start, want):
    assert kafka_epochs_after(EPOCHS, start) == want
    assert leader_epochs_from_start(EPOCHS, start) == want


def test_leader_epochs_from_start_against_rule():
    rng = random.Random(7)
    for _ in range(2000):
        entries, e, o = [], rng.randint(0, 3), rng.randint(0, 5)
        for _ in range(rng.randint(0, 6)):
            entries.append((e, o))
            e, o = e + rng.randint(1, 3), o + rng.randint(1, 30)
        start = rng.randint(0, o + 10)
        assert leader_epochs_from_start(entries, start) == kafka_epochs_after(entries, start)
    assert leader_epochs_from_start([], 5) == []
    with pytest.raises(LogLayoutError, match="must both increase"):
        leader_epochs_from_start([(1, 5), (1, 9)], 7, "x/leader-epoch-checkpoint")


# ---- real logs ----------------------------------------------------------------------------
PARTS = 2
SEG_BYTES = 3000
T0 = 1_700_000_000_000


def build_log(root: str, commits: int = 8, per: int = 25) -> None:
    """``commits`` writes to topic ``t``; commit ``k`` has timestamps ``T0 + k hours``
    (+ i ms) so segments have distinct largest timestamps; small segments roll often."""
    cfg = AppendConfig(segment_bytes=SEG_BYTES, index_interval_bytes=500, fsync=False)
    for k in range(commits):
        parts = {p: [R(b"k%d" % (i % 7), b"%d/%d/%d" % (k, p, i) + b"x" * 40,
                       T0 + k * HOUR + i) for i in range(per + 3 * p)]
                 for p in range(PARTS)}
        write(FS, root, f"batch:b{k}", parts, partitions=PARTS, config=cfg, per_batch=5)
    epochs = [(e, o) for e, o in LEADER_EPOCHS if o < commits * per]
    for p in range(PARTS):            # leaders changed along the way (our writer keeps none)
        with open(f"{root}/t-{p}/leader-epoch-checkpoint", "w") as f:
            f.write(f"0\n{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs))


#: (epoch, start offset) of the test logs: several inside the segments retention deletes
LEADER_EPOCHS = [(0, 0), (2, 30), (3, 61), (5, 95), (6, 130), (9, 190)]


def epochs_of(root, p):
    return read_leader_epoch_checkpoint(FS, f"{root}/t-{p}/leader-epoch-checkpoint")


def segment_facts(directory: str) -> list[tuple[int, int, int]]:
    """(base, size, largest batch max timestamp) of each segment, read by kafka-python."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".log")):
        path = os.path.join(directory, name)
        with open(path, "rb") as f:
            data = f.read()
        recs, best = MemoryRecords(data), -1
        while recs.has_next():
            batch = recs.next_batch()
            best = max(best, batch.max_timestamp)
        out.append((int(name[:-4]), len(data), best))
    return out


def hw_of(root, p):
    return read_checkpoint(FS, f"{root}/replication-offset-checkpoint")[("t", p)]


def spark_table(root):
    """What a Spark batch read does, without a session: plan on the driver, then each
    task reads its slice with its own LogDirs."""
    import pyarrow as pa

    from spark_kafkalog.spark.options import parse_read_options
    from spark_kafkalog.spark.reader import KafkaLogReader

    reader = KafkaLogReader(parse_read_options({"path": root, "subscribe": "t"}))
    return pa.Table.from_batches([b for task in reader.partitions()
                                  for b in reader.read(task)])


def live_records(root, spark: bool = False) -> dict[int, list[bytes]]:
    t = spark_table(root) if spark else read_table(root, "t", include_headers=False)
    return {p: t.filter(pc.equal(t["partition"], p))["value"].to_pylist()
            for p in range(PARTS)}


def assert_verify_clean(root):
    res = verify_log_dirs(LogDirs(root))
    assert res.ok(), [str(f) for f in res.errors()]


@pytest.mark.parametrize("settings", [
    dict(retention_ms=3 * HOUR + 500, retention_bytes=-1),
    dict(retention_ms=-1, retention_bytes=7000),
    dict(retention_ms=5 * HOUR, retention_bytes=9000),
    dict(retention_ms=0, retention_bytes=-1),
])
def test_real_log_deletes_what_kafka_would(tmp_path, settings):
    root = str(tmp_path / "logs")
    build_log(root)
    now = T0 + 8 * HOUR
    before = live_records(root)
    want = {}
    for p in range(PARTS):
        segs = segment_facts(f"{root}/t-{p}")
        assert len(segs) >= 4
        want[p] = kafka_deletes(segs, log_start=segs[0][0], hw=hw_of(root, p),
                                ms=settings["retention_ms"], nbytes=settings["retention_bytes"],
                                now=now)
    cfg = RetentionConfig(file_delete_delay_ms=0, **settings)
    logdirs = LogDirs(root)
    dry = plan_retention(logdirs, "t", cfg, now_ms=now)
    assert {pr.partition: [d["base_offset"] for d in pr.deleted] for pr in dry} == want
    assert any(want.values())
    files_before = sorted(os.listdir(f"{root}/t-0"))
    epochs_before = {p: epochs_of(root, p) for p in range(PARTS)}
    done = apply_retention(logdirs, "t", RetentionConfig(**settings), now_ms=now)
    assert {pr.partition: [d["base_offset"] for d in pr.deleted] for pr in done} == want
    ckpt = read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")
    after = live_records(root)
    for p in range(PARTS):
        segs = segment_facts(f"{root}/t-{p}")
        gone = set(want[p])
        assert [s[0] for s in segs if s[0] in gone] == []
        # the leader epoch cache truncated from the start as Kafka does it
        assert epochs_of(root, p) == kafka_epochs_after(epochs_before[p], segs[0][0])
        assert [list(e) for e in epochs_of(root, p)] == \
            next(pr.leader_epochs for pr in dry if pr.partition == p)
        if want[p]:
            assert ckpt[("t", p)] == segs[0][0]
            assert epochs_of(root, p) != epochs_before[p]
            # the records still there are exactly the kept segments' records, in order
            kept = before[p][len(before[p]) - len(after[p]):]
            assert after[p] == kept
    # renamed, not yet removed (file.delete.delay.ms): still readable by a late reader
    deleted = [n for n in os.listdir(f"{root}/t-0") if n.endswith(".deleted")]
    assert len(deleted) >= len(want[0])
    assert_verify_clean(root)
    files, _, left = purge_deleted(LogDirs(root), "t", delay_ms=0)
    assert files >= len(want[0])
    assert not [n for n in os.listdir(f"{root}/t-0") if n.endswith(".deleted")]
    assert set(os.listdir(f"{root}/t-0")) <= set(files_before)
    assert_verify_clean(root)
    # running again with the same settings and clock deletes nothing more
    again = apply_retention(LogDirs(root), "t", cfg, now_ms=now)
    assert not any(pr.deleted for pr in again)


def test_high_watermark_limits(tmp_path):
    root = str(tmp_path / "logs")
    build_log(root)
    segs = segment_facts(f"{root}/t-0")
    hw = segs[2][0] + 1                   # inside the third segment
    # a broker's log (no kafkalog journal, whose commits would decide the high watermark)
    os.remove(f"{root}/.kafkalog.t.journal")
    path = f"{root}/replication-offset-checkpoint"
    ck = read_checkpoint(FS, path)
    ck[("t", 0)] = hw
    write_checkpoint(FS, path, ck)
    plans = plan_retention(LogDirs(root), "t", RetentionConfig(retention_ms=0),
                           now_ms=T0 + 100 * HOUR)
    assert [d["base_offset"] for d in plans[0].deleted] == [segs[0][0], segs[1][0]]


def test_refuses_a_dir_a_broker_holds(tmp_path):
    import fcntl
    root = str(tmp_path / "logs")
    build_log(root, commits=3)
    fd = os.open(f"{root}/.lock", os.O_RDWR | os.O_CREAT)
    pid = os.fork()
    if pid == 0:                           # the "broker": an exclusive record lock
        fcntl.lockf(os.open(f"{root}/.lock", os.O_RDWR), fcntl.LOCK_EX)
        time.sleep(30)
        os._exit(0)
    try:
        for _ in range(200):               # wait until the child holds it
            try:
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_UN)
                time.sleep(0.01)
            except OSError:
                break
        with pytest.raises(LockError, match="running Kafka broker"):
            apply_retention(LogDirs(root), "t", RetentionConfig(retention_ms=0))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


# ---- a reader racing retention --------------------------------------------------------------
@pytest.mark.parametrize("spark", [False, True], ids=["read_table", "spark"])
def test_reader_racing_retention_sees_whole_suffixes(tmp_path, spark):
    """A process applies retention step by step (each step one segment more, by
    retention.bytes) and purges renamed files after a delay; readers loop meanwhile.
    Every read must succeed and be, per partition, all records from some kept
    segment's start to the log end."""
    root = str(tmp_path / "logs")
    build_log(root, commits=10)
    full = live_records(root)
    sizes = {p: sum(s[1] for s in segment_facts(f"{root}/t-{p}")) for p in range(PARTS)}
    delay_ms = 1500
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for limit in range(max(sizes.values()), 0, -700):
                apply_retention(LogDirs(root), "t",
                                RetentionConfig(retention_ms=-1, retention_bytes=limit,
                                                file_delete_delay_ms=delay_ms))
                purge_deleted(LogDirs(root), "t", delay_ms=delay_ms)
                time.sleep(0.02)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    reads, problems, shrunk = 0, [], set()
    try:
        while os.waitpid(pid, os.WNOHANG)[0] == 0 or reads < 5:
            got = live_records(root, spark)
            reads += 1
            for p in range(PARTS):
                n = len(got[p])
                if got[p] != full[p][len(full[p]) - n:] or n == 0:
                    problems.append((p, n))
                shrunk.add(n)
            if reads > 5000:
                break
    finally:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    assert not problems, problems[:5]
    assert len(shrunk) > 3 and reads > 10
    assert_verify_clean(root)


# ---- SIGKILL at every step ----------------------------------------------------------------
def retain(root, cfg, now, fault):
    """The job's two phases: apply (checkpoint, renames), then purge the renamed files."""
    apply_retention(LogDirs(root), "t", cfg, now_ms=now, fault=fault)
    purge_deleted(LogDirs(root), "t", delay_ms=cfg.file_delete_delay_ms, fault=fault)


KILL_SCENARIOS = {
    "by-time": RetentionConfig(retention_ms=4 * HOUR + 500, retention_bytes=-1,
                               file_delete_delay_ms=0),
    "by-size": RetentionConfig(retention_ms=-1, retention_bytes=6000, file_delete_delay_ms=0),
    "both": RetentionConfig(retention_ms=2 * HOUR + 500, retention_bytes=9000,
                            file_delete_delay_ms=0),
}


@pytest.mark.parametrize("name", sorted(KILL_SCENARIOS))
def test_sigkill_at_every_step(tmp_path, name):
    cfg = KILL_SCENARIOS[name]
    now = T0 + 8 * HOUR
    base = str(tmp_path / "base")
    build_log(base)
    old = live_records(base)
    # the new state, from an uninterrupted run on a copy
    ref = str(tmp_path / "ref")
    shutil.copytree(base, ref)
    counter = FaultCounter()
    retain(ref, cfg, now, counter)
    new = live_records(ref)
    assert new != old
    old_epochs = {p: epochs_of(base, p) for p in range(PARTS)}
    new_epochs = {p: epochs_of(ref, p) for p in range(PARTS)}
    assert new_epochs != old_epochs
    points = counter.points
    assert len(points) >= 6 and any(p.startswith("purged:") for p in points), points
    assert points.index("checkpointed") < points.index("epochs:0") < points.index("renamed")
    kills = 0
    for k in range(1, len(points) + 1):
        root = str(tmp_path / f"kill{k}")
        shutil.copytree(base, root)
        killed = run_killed(lambda fault: retain(root, cfg, now, fault), k)
        assert killed
        kills += 1
        got = live_records(root)
        assert got in (old, new), (points[k - 1], {p: len(v) for p, v in got.items()})
        if k > points.index("checkpointed"):
            assert got == new, points[k - 1]
        # each epoch file is the old one or the new one; once the log start moved, the
        # epochs a broker loads (truncated from the checkpoint, as its log loader does)
        # are the new ones
        starts = read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")
        for p in range(PARTS):
            assert epochs_of(root, p) in (old_epochs[p], new_epochs[p]), points[k - 1]
            if k > points.index("checkpointed"):
                assert kafka_epochs_after(epochs_of(root, p), starts[("t", p)]) == \
                    new_epochs[p], points[k - 1]
        assert_verify_clean(root)
        # a later run finishes the job: the new log, nothing old left listed
        apply_retention(LogDirs(root), "t", cfg, now_ms=now)
        purge_deleted(LogDirs(root), "t", delay_ms=0)
        assert live_records(root) == new
        assert {p: epochs_of(root, p) for p in range(PARTS)} == new_epochs, points[k - 1]
        assert sorted(os.listdir(f"{root}/t-0")) == sorted(os.listdir(f"{ref}/t-0")) or \
            not [n for n in os.listdir(f"{root}/t-0") if n.endswith(".deleted")]
        assert_verify_clean(root)
        shutil.rmtree(root)
    assert kills >= 10


def test_malformed_leader_epochs_refused_before_anything_changes(tmp_path):
    root = str(tmp_path / "logs")
    build_log(root, commits=4)
    path = f"{root}/t-1/leader-epoch-checkpoint"
    with open(path, "w") as f:
        f.write("0\n2\n3 10\n2 40\n")          # epochs going down: not a file Kafka writes
    listing = {p: sorted(os.listdir(f"{root}/t-{p}")) for p in range(PARTS)}
    ckpt = read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")
    with pytest.raises(LogLayoutError, match="leader-epoch-checkpoint.*|must both increase"):
        apply_retention(LogDirs(root), "t", RetentionConfig(retention_ms=0), now_ms=T0)
    assert {p: sorted(os.listdir(f"{root}/t-{p}")) for p in range(PARTS)} == listing
    assert read_checkpoint(FS, f"{root}/log-start-offset-checkpoint") == ckpt
