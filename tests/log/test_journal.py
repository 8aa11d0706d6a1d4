"""The commit journal: format, damage detection, idempotence rules, read-only bounds,
recovery entry point, locks."""
from __future__ import annotations

from pathlib import Path
import json
import os
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import (
    InvalidOptionError,
    LockError,
    LogLayoutError,
)
from spark_kafkalog.log.write import AppendConfig, recover
from spark_kafkalog.log.files import journal as jr
from spark_kafkalog.log.files.lock import TopicLock, holder_alive, process_start_time
from tests.log.test_appender_util import R, read_kp, write

FS = pafs.LocalFileSystem()


def recs(n, tag=0):
    return [R(b"k%d" % i, b"v%d-%d" % (tag, i), 1000 + i) for i in range(n)]


class Crash(BaseException):
    """Stands in for a kill: not an Exception, so the commit does not undo itself."""


def crash_at(point):
    def fault(name):
        if name == point:
            raise Crash(name)
    return fault


# A journal as the writer before the typed PendingWrite wrote it (every key of the pending
# record, as a dict): it loads, and saves again byte for byte.
_OLD_PENDING = {
    "write_id": "batch:9", "mode": "overwrite", "state": "begun", "coordinator": "a",
    "topics": ["a", "t"], "begun_ms": 1700000000000,
    "partitions": {
        "0": {"start": 5, "end": 9, "active_base": 0, "log_size": 400, "index_size": 8,
              "timeindex_size": 24, "timeindex_tail": "00000000000003e800000004",
              "created_dir": False, "planned_bytes": 300, "segments": [[5, 0, 300]],
              "no_append": False},
        "10": {"start": 0, "end": 2, "active_base": None, "log_size": 0, "index_size": 0,
               "timeindex_size": 0, "timeindex_tail": "", "created_dir": True,
               "planned_bytes": 90, "segments": [[0, 0, 90]], "no_append": True}},
    "log_start": {"0": 5, "10": 0}}


def test_a_journal_written_before_the_typed_record_loads_and_saves_unchanged(tmp_path):
    import crc32c

    root = str(tmp_path)
    doc = {"topic": "t", "pending": _OLD_PENDING, "streams": {"q": 3}, "rolled_back": [],
           "commits": [{"write_id": "batch:1", "mode": "append", "committed_ms": 1,
                        "partitions": {"0": {"start": 0, "end": 5,
                                             "segments": [[0, 0, 400]]}}}]}
    body = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    raw = f"kafkalog-journal 1 {crc32c.crc32c(body):08x} {len(body)}\n".encode() + body
    path = jr.journal_path(root, "t")
    with open(path, "wb") as f:
        f.write(raw)
    st = jr.load(FS, root, "t")
    p = st.pending
    assert (p.write_id, p.mode, p.state, p.coordinator) == ("batch:9", "overwrite", "begun",
                                                            "a")
    assert p.partitions[0].timeindex_tail == bytes.fromhex("00000000000003e800000004")
    assert p.partitions[10].active_base is None and p.partitions[10].created_dir
    assert p.log_start == {0: 5, 10: 0}
    os.unlink(path)
    jr.save(FS, root, st)
    with open(path, "rb") as f:
        assert f.read() == raw


def _body(path):
    with open(path, "rb") as f:
        raw = f.read()
    return raw[raw.index(b"\n") + 1:]


def test_the_history_is_encoded_once_and_saves_the_document_json_would(tmp_path):
    """save() copies each history entry's text (encoded once, or as loaded) instead of
    encoding the history again: the body is still exactly json.dumps of the document,
    after loads, new commits, a pending write and trimming to RETAIN_COMMITS."""
    root = str(tmp_path)
    path = jr.journal_path(root, "t")

    def canonical(st):
        return json.dumps(st.to_json(), separators=(",", ":"), sort_keys=True).encode()

    st = jr.JournalState(topic="t")
    for i in range(jr.RETAIN_COMMITS + 3):
        st.record_commit({"write_id": f"batch:{i}", "mode": "append", "committed_ms": i,
                          "partitions": {"0": {"start": i, "end": i + 1,
                                               "segments": [[0, i, i + 1]]}}})
        if i % 400 == 0 or i > jr.RETAIN_COMMITS:
            jr.save(FS, root, st)
            assert _body(path) == canonical(st)
            st = jr.load(FS, root, "t")
    st.pending = jr.PendingWrite(write_id="batch:x", mode="append", coordinator="t",
                                 topics=["t"], partitions={0: jr.PartitionUndo(5, 9)})
    jr.save(FS, root, st)
    assert _body(path) == canonical(st)
    st.commit_pending()
    jr.save(FS, root, st)
    loaded = jr.load(FS, root, "t")
    assert _body(path) == canonical(st) == canonical(loaded)
    assert loaded.commits[-1]["write_id"] == "batch:x"
    assert len(loaded.commits) == jr.RETAIN_COMMITS


def test_a_journal_laid_out_otherwise_loads_as_json_reads_it(tmp_path):
    import crc32c

    root = str(tmp_path)
    doc = {"topic": "t", "pending": None, "streams": {}, "rolled_back": ["batch:0"],
           "commits": [{"write_id": "batch:1", "partitions": {}}]}
    path = jr.journal_path(root, "t")
    for body in (json.dumps(doc), json.dumps(doc, sort_keys=True, indent=1),
                 json.dumps(doc, sort_keys=True, separators=(",", ":")).replace("}]", "} ]")):
        raw = body.encode()
        with open(path, "wb") as f:
            f.write(f"kafkalog-journal 1 {crc32c.crc32c(raw):08x} {len(raw)}\n".encode()
                    + raw)
        st = jr.load(FS, root, "t")
        assert st.to_json() == doc
        jr.save(FS, root, st)
        assert _body(path) == json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def test_round_trip_and_damage_detection(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(3)})
    st = jr.load(FS, root, "t")
    assert st.exists and st.pending is None
    assert st.commits[0]["write_id"] == "batch:1"
    assert st.commits[0]["partitions"]["0"]["start"] == 0
    assert st.commits[0]["partitions"]["0"]["end"] == 3
    path = jr.journal_path(root, "t")
    raw = Path(path).read_bytes()
    with open(path, "wb") as f:                     # flip one body byte
        f.write(raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:])
    with pytest.raises(LogLayoutError, match="checksum"):
        jr.load(FS, root, "t")
    with open(path, "wb") as f:
        f.write(b"garbage\n{}")
    with pytest.raises(LogLayoutError, match="header"):
        jr.load(FS, root, "t")
    assert jr.load(FS, root, "other").exists is False


def test_stream_ids_and_retention():
    st = jr.JournalState(topic="t")
    for b in range(5):
        st.record_commit({"write_id": jr.stream_write_id("q", b), "partitions": {}})
    assert st.is_committed(jr.stream_write_id("q", 3))
    assert not st.is_committed(jr.stream_write_id("q", 5))
    assert not st.is_committed(jr.stream_write_id("other", 0))
    for i in range(jr.RETAIN_COMMITS + 10):
        st.record_commit({"write_id": f"batch:{i}", "partitions": {}})
    assert len(st.commits) == jr.RETAIN_COMMITS
    assert st.is_committed(f"batch:{jr.RETAIN_COMMITS + 9}")
    # stream history survives the bounded commit list
    assert st.is_committed(jr.stream_write_id("q", 4))
    with pytest.raises(InvalidOptionError, match="must not contain"):
        jr.stream_write_id("a:b", 1)


def test_history_of_a_wide_topic_is_bounded_by_partition_ranges():
    """RETAIN_RANGES bounds what each commit loads and saves: the oldest commits go while
    the retained ones list more ranges, the newest is kept however wide it is, and
    commit numbers and stream ids survive the trimming."""
    def entry(write_id, width):
        return {"write_id": write_id, "partitions": {
            str(p): {"start": 0, "end": 1, "segments": [[0, 0, 1]]} for p in range(width)}}

    width = 1000
    keep = jr.RETAIN_RANGES // width
    st = jr.JournalState(topic="t")
    st.record_commit(entry(jr.stream_write_id("q", 0), width))
    for i in range(keep + 5):
        st.record_commit(entry(f"batch:{i}", width))
    assert [c["write_id"] for c in st.commits] == [f"batch:{i}" for i in range(5, keep + 5)]
    assert [c["seq"] for c in st.commits] == list(range(6, keep + 6))
    assert sum(len(c["partitions"]) for c in st.commits) <= jr.RETAIN_RANGES
    assert st.is_committed(jr.stream_write_id("q", 0))      # by the streams record
    assert not st.is_committed("batch:4")
    st.record_commit(entry("huge", jr.RETAIN_RANGES + 1))
    assert [c["write_id"] for c in st.commits] == ["huge"]
    st.record_commit(entry("small", 3))
    assert [c["write_id"] for c in st.commits] == ["small"]


def test_pending_write_bounds_a_read_only_reader_and_recover_undoes_it(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(10), 1: recs(4)}, partitions=2)
    assert jr.committed_end_offsets(FS, root, "t") is None
    with pytest.raises(Crash):
        write(FS, root, "batch:2", {0: recs(5, 2)}, partitions=2, fault=crash_at("synced"))
    # the bytes are in the segment, but not committed
    assert len(read_kp(f"{root}/t-0")) == 15
    assert jr.committed_end_offsets(FS, root, "t") == {0: 10}
    assert jr.committed_bounds(FS, root, "t") == {0: (0, 10)}
    out = recover(FS, root, "t")
    assert out == {"rolled_back": "batch:2", "rolled_forward": None}
    assert len(read_kp(f"{root}/t-0")) == 10
    assert jr.committed_end_offsets(FS, root, "t") is None
    assert jr.load(FS, root, "t").rolled_back == ["batch:2"]
    assert recover(FS, root, "t") == {"rolled_back": None, "rolled_forward": None}


def test_committed_but_unfinished_write_is_rolled_forward(tmp_path):
    root = str(tmp_path)
    with pytest.raises(Crash):
        write(FS, root, "batch:1", {0: recs(6)}, fault=crash_at("committed:t"))
    assert jr.committed_end_offsets(FS, root, "t") is None      # committed: visible
    assert not os.path.exists(f"{root}/recovery-point-offset-checkpoint")
    assert recover(FS, root, "t")["rolled_forward"] == "batch:1"
    assert Path(f"{root}/recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 6\n"


def test_overwrite_committed_before_cleanup_bounds_reader_start(tmp_path):
    root = str(tmp_path)
    write(FS, root, "batch:1", {0: recs(8)})
    with pytest.raises(Crash):
        write(FS, root, "batch:2", {0: recs(3, 2)}, mode="overwrite",
              fault=crash_at("committed:t"))
    assert jr.committed_bounds(FS, root, "t") == {0: (8, None)}
    recover(FS, root, "t")
    assert [r[0] for r in read_kp(f"{root}/t-0")] == [8, 9, 10]


def test_multi_topic_write_commits_on_its_coordinator(tmp_path):
    """Killed after the coordinator ('a') committed but before 'b' did: 'b' rolls
    forward, because 'a' decides."""
    from spark_kafkalog.log.write import StagingWriter, TopicSpec, commit_write
    from tests.log.test_appender_util import kp_encode

    root = str(tmp_path)
    w = StagingWriter(FS, root, "batch:1")
    for t in ("b", "a"):
        data, table = kp_encode(recs(4))
        w.add(t, 0, data, table)
    with pytest.raises(Crash):
        commit_write(FS, root, "batch:1", [w.finish()], [TopicSpec("a"), TopicSpec("b")],
                     fault=crash_at("committed:a"))
    assert jr.load(FS, root, "b").pending.state == "begun"
    assert jr.load(FS, root, "b").pending.coordinator == "a"
    assert jr.committed_end_offsets(FS, root, "b") is None   # decided by 'a'
    assert recover(FS, root, "b")["rolled_forward"] == "batch:1"
    assert recover(FS, root, "a")["rolled_forward"] == "batch:1"
    assert len(read_kp(f"{root}/a-0")) == len(read_kp(f"{root}/b-0")) == 4


_HOLDER = """
import sys, time
import pyarrow.fs as pafs
from spark_kafkalog.log.files.lock import TopicLock
lk = TopicLock(pafs.LocalFileSystem(), sys.argv[1], "t", write_id="batch:held").acquire()
print("held", flush=True)
sys.stdin.read()
"""


def test_writer_lock_waits_for_live_holder_and_frees_with_a_dead_one(tmp_path):
    root = str(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, root], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(LockError, match=r"another writer \(host .*pid %d, "
                                            r"write batch:held\)" % proc.pid):
            write(FS, root, "batch:1", {0: recs(2)}, config=AppendConfig(lock_timeout=0.2))
        proc.kill()                                    # the holder dies holding the lock
        proc.wait(timeout=30)
        write(FS, root, "batch:1", {0: recs(2)}, config=AppendConfig(lock_timeout=5))
        assert len(read_kp(f"{root}/t-0")) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()


def test_lock_owner_liveness_and_object_store_lease(tmp_path):
    me = {"host": os.uname().nodename, "pid": os.getpid(),
          "start": process_start_time(os.getpid())}
    assert holder_alive(me) is True
    assert holder_alive(dict(me, start=(me["start"] or 0) + 1)) is False   # pid reused
    assert holder_alive(dict(me, host="elsewhere")) is None
    # lease path (used on object stores) exercised through a SubTreeFileSystem
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    lk = TopicLock(fs, "", "t", timeout=1, lease_s=60).acquire()
    lease = json.loads(Path(tmp_path / ".kafkalog.t.lock").read_text())
    assert lease["pid"] == os.getpid() and lease["expires_ms"] > 0
    with pytest.raises(LockError):
        TopicLock(fs, "", "t", timeout=0.2).acquire()
    with pytest.raises(LockError, match="not reentrant"):
        lk.acquire()
    lk.release()
    assert not (tmp_path / ".kafkalog.t.lock").exists()
    # a lease whose holder is known dead is taken over at once
    dead = dict(me, pid=2**22 + 12345, start=1, token="x", expires_ms=2**62)
    (tmp_path / ".kafkalog.t.lock").write_text(json.dumps(dead))
    TopicLock(fs, "", "t", timeout=1).acquire().release()
