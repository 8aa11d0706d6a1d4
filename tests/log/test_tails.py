"""small_tails(): the log ends of many small partitions found at once, checked against
the one-partition tail scan (state._tail) of the same partitions; any tail that is not
clean (torn, corrupt, offsets out of order, a file renamed or cut after the listing, a
segment larger than a probe) is left to that scan, and topic_states gives the same
states (and the same errors) as partition_state one by one."""
from __future__ import annotations

from pathlib import Path
import os
import warnings

import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.log import LogDirs
from spark_kafkalog.log.read import state as state_mod
from spark_kafkalog.log.read.scan import ReadStats
from spark_kafkalog.log.read.tails import small_tails
from tests.format.builders import v2_simple
from tests.log.logbuilder import LogDirBuilder, flip_byte, rec, sample_records

TS = 1_700_000_000_000
PROBE = state_mod._PROBE


def _build(root):
    b = LogDirBuilder(root)
    p = b.partition("t", 0)                     # clean, two segments
    p.append(sample_records(5, b"a"))
    p.roll()
    p.append(sample_records(7, b"b"), compression="gzip")
    p = b.partition("t", 1)                     # transactions: control batches at the end
    txn = p.begin_txn(producer_id=9)
    p.append([rec(b"k", b"v", ts=TS)] * 3, txn=txn)
    p.end_txn(txn, commit=True)
    p = b.partition("t", 2)                     # legacy messages
    p.append_legacy(1, [rec(b"k", b"v", ts=TS)] * 4)
    p.append_legacy(1, [rec(b"k", b"w", ts=TS + 1)] * 3, compression="gzip")
    p = b.partition("t", 3)                     # an empty active segment
    p.append(sample_records(3, b"c"))
    p.roll()
    for q in (4, 5, 6, 7, 8):                   # to be damaged below
        p = b.partition("t", q)
        p.append(sample_records(4, b"d"))
        p.append(sample_records(4, b"e"))
    p = b.partition("t", 9)                     # larger than one probe
    for i in range(40):
        p.append(sample_records(20, b"f%d" % i))
    b.write()
    return b


def _log(root, q: int) -> str:
    d = root / f"t-{q}"
    return str(d / sorted(n for n in os.listdir(d) if n.endswith(".log"))[-1])


def test_small_tails_match_the_one_partition_scan(tmp_path):
    root = tmp_path / "logs"
    _build(root)
    logdirs = LogDirs(str(root))
    parts = logdirs.partitions("t")
    assert parts[9].segments[-1].size > PROBE
    # damage after the listing, as a concurrent writer or a crash would leave it
    with open(_log(root, 4), "r+b") as f:            # torn tail
        f.truncate(os.path.getsize(_log(root, 4)) - 5)
    flip_byte(root / "t-5" / os.path.basename(_log(root, 5)), 30)     # a CRC mismatch
    path6 = _log(root, 6)                          # renamed away, another file in its place
    data = Path(path6).read_bytes()
    os.rename(path6, path6 + ".deleted")
    with open(path6, "wb") as f:
        f.write(data)
    os.remove(_log(root, 7))                       # gone
    path8 = _log(root, 8)                          # valid batches, offsets going backwards
    with open(path8, "wb") as f:
        f.write(v2_simple([(5, TS, b"k", b"v")], base_offset=5)
                + v2_simple([(2, TS, b"k", b"v")], base_offset=2))
    stats = ReadStats()
    got = small_tails(logdirs.filesystem, parts, PROBE, stats)
    answered = {q for q, t in enumerate(got) if t is not None}
    assert answered == {0, 1, 2, 3}
    assert got[3] == (parts[3].segments[-1].base_offset, None)
    for q in answered:
        assert got[q] == state_mod._tail(logdirs, parts[q], "fail", ReadStats()), q
    assert got[1][1] == TS                         # the markers' timestamps do not count
    assert stats.bytes_read == sum(parts[q].segments[-1].size for q in (0, 1, 2))
    assert stats.batches > 0


def test_topic_states_same_as_one_by_one(tmp_path):
    root = tmp_path / "logs"
    _build(root)
    tear = _log(root, 4)
    with open(tear, "r+b") as f:
        f.truncate(os.path.getsize(tear) - 5)
    logdirs = LogDirs(str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _snap, parts, states = logdirs.topic_states("t", timestamps=False)
        for p in parts:
            alone = state_mod.partition_state(LogDirs(str(root)), p, timestamps=False)
            assert states[p.partition] == alone, p.partition
    assert states[4].log_end_offset == 4           # the torn second batch dropped


def test_corrupt_tail_still_raises_with_file_and_position(tmp_path):
    root = tmp_path / "logs"
    _build(root)
    path = _log(root, 5)
    flip_byte(root / "t-5" / os.path.basename(path), 30)
    with pytest.raises(CorruptRecordError) as err:
        LogDirs(str(root)).topic_states("t", timestamps=False)
    assert path in str(err.value) and "position" in str(err.value)


def test_not_local_or_nothing_to_do(tmp_path):
    import pyarrow.fs as pafs

    root = tmp_path / "logs"
    _build(root)
    parts = LogDirs(str(root)).partitions("t")
    sub = pafs.SubTreeFileSystem(str(root), pafs.LocalFileSystem())
    assert small_tails(sub, parts, PROBE) == [None] * len(parts)
    assert small_tails(pafs.LocalFileSystem(), [], PROBE) == []


def test_chunks_give_the_same_answers(tmp_path, monkeypatch):
    from spark_kafkalog.log.read import tails

    root = tmp_path / "logs"
    _build(root)
    flip_byte(root / "t-5" / os.path.basename(_log(root, 5)), 30)
    parts = LogDirs(str(root)).partitions("t")
    whole = small_tails(LogDirs(str(root)).filesystem, parts, PROBE)
    for chunk in (1, 300, 2000):                # one segment a chunk, and a few
        monkeypatch.setattr(tails, "CHUNK_BYTES", chunk)
        stats = ReadStats()
        assert small_tails(LogDirs(str(root)).filesystem, parts, PROBE, stats) == whole
        assert stats.bytes_read == sum(parts[q].segments[-1].size
                                       for q, t in enumerate(whole) if t is not None)
    assert [q for q, t in enumerate(whole) if t is None] == [5, 9]
