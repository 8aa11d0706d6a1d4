"""Commits with ``offsets="preserve"``: staged batches (built by kafka-python, an outside
encoder) keep their offsets, gaps included; the checks against the log end and between
tasks; a new partition starts its log at its first offset; overwrite; and
``write_table`` (encode + commit in one call) read back by kafka-python and our reader."""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from spark_kafkalog.errors import BadRowError
from spark_kafkalog.log import read_table
from spark_kafkalog.log.files.checkpoint import read_checkpoint
from spark_kafkalog.log.write import (
    AppendConfig,
    StagingWriter,
    TopicSpec,
    commit_write,
    write_table,
)
from spark_kafkalog.log.files import journal as jr
from tests.log.test_appender_util import (
    R,
    assert_indexes_like_broker,
    kp_encode,
    read_kp,
    segments,
)

FS = pafs.LocalFileSystem()
CFG = AppendConfig(segment_bytes=4000, index_interval_bytes=500, fsync=False)


def recs(tag: int, n: int) -> list[R]:
    return [R(b"k%d" % i if i % 4 else None, b"%d-%d" % (tag, i) + b"x" * 60,
              1_600_000_000_000 + tag * 100 + i) for i in range(n)]


def gappy(start: int, n: int, every: int = 3) -> list[int]:
    """n strictly increasing offsets from ``start`` with gaps (compaction's holes)."""
    out, o = [], start
    for i in range(n):
        out.append(o)
        o += 1 + (i % every == 0) * (i % 7)
    return out


def commit(root, wid, tasks, *, partitions=1, mode="append", config=CFG, split=False):
    """``tasks``: [{partition: (records, offsets)}] -> one staging file per task."""
    staged = []
    for k, parts in enumerate(tasks):
        w = StagingWriter(FS, root, wid, f"task{k}", per_partition_files=split)
        for p, (rs, offs) in parts.items():
            data, table = kp_encode(rs, offsets=offs, per_batch=7)
            w.add("t", p, data, table)
        staged.append(w.finish())
    return commit_write(FS, root, wid, staged, [TopicSpec("t", partitions_if_new=partitions)],
                        mode=mode, config=config, offsets="preserve")


def offsets_of(directory):
    return [r[0] for r in read_kp(directory, gaps=True)]


@pytest.mark.parametrize("split", [False, True])
def test_new_topic_keeps_offsets_and_starts_at_first(tmp_path, split):
    root = str(tmp_path)
    a, b = gappy(1000, 60), gappy(77, 30)
    res = commit(root, "batch:1", [{0: (recs(1, 60), a), 1: (recs(2, 30), b)}],
                 partitions=3, split=split)
    assert res.ranges["t"][0] == (1000, a[-1] + 1)
    assert res.ranges["t"][1] == (77, b[-1] + 1)
    got = read_kp(f"{root}/t-0", gaps=True)
    assert [r[0] for r in got] == a
    assert [(r[1], r[2], r[3]) for r in got] == [(x.key, x.value, x.ts) for x in recs(1, 60)]
    assert offsets_of(f"{root}/t-1") == b
    assert segments(f"{root}/t-0")[0] == 1000 and len(segments(f"{root}/t-0")) > 1
    assert segments(f"{root}/t-1")[0] == 77
    assert segments(f"{root}/t-2") == [0]
    for p in (0, 1):
        assert_indexes_like_broker(f"{root}/t-{p}", CFG.index_interval_bytes)
    ls = read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")
    assert ls[("t", 0)] == 1000 and ls[("t", 1)] == 77
    hw = read_checkpoint(FS, f"{root}/replication-offset-checkpoint")
    assert hw[("t", 0)] == a[-1] + 1
    # our reader: same offsets, log start at the first offset
    t = read_table(root, "t", partitions=[0])
    assert t.column("offset").to_pylist() == a


def test_tasks_with_disjoint_ranges_in_any_order(tmp_path):
    root = str(tmp_path)
    offs = gappy(10, 80)
    rs = recs(1, 80)
    # task 0 holds the later range: the commit orders sections by offset
    commit(root, "batch:1", [{0: (rs[40:], offs[40:])}, {0: (rs[:40], offs[:40])}])
    assert offsets_of(f"{root}/t-0") == offs


def test_interleaved_tasks_are_refused(tmp_path):
    root = str(tmp_path)
    offs = gappy(10, 40)
    rs = recs(1, 40)
    with pytest.raises(BadRowError, match=r"topic 't' partition 0: offsets must increase "
                                          r"strictly, but offset \d+ comes after offset"):
        commit(root, "batch:1", [{0: (rs[0::2], offs[0::2])}, {0: (rs[1::2], offs[1::2])}])
    assert not os.path.exists(f"{root}/t-0") or not segments(f"{root}/t-0") or \
        not read_kp(f"{root}/t-0")
    assert not [n for n in os.listdir(root) if n.startswith(jr.STAGING_PREFIX)]


def test_append_at_or_past_log_end_and_below_is_refused(tmp_path):
    root = str(tmp_path)
    first = gappy(0, 30)
    commit(root, "batch:1", [{0: (recs(1, 30), first)}])
    leo = first[-1] + 1
    with pytest.raises(BadRowError, match=rf"topic 't' partition 0: offset {leo - 1} is "
                                          rf"below the partition's log end offset {leo}"):
        commit(root, "batch:2", [{0: (recs(2, 5), [leo - 1 + i for i in range(5)])}])
    assert offsets_of(f"{root}/t-0") == first         # the failed write left nothing
    nxt = [leo, leo + 5, leo + 6, 2 ** 31 + leo + 100]   # a gap no segment can span
    rs = recs(3, 4)
    commit(root, "batch:3", [{0: (rs[3:], nxt[3:])}, {0: (rs[:3], nxt[:3])}])
    assert offsets_of(f"{root}/t-0") == first + nxt
    assert segments(f"{root}/t-0")[-1] == 2 ** 31 + leo + 100
    assert_indexes_like_broker(f"{root}/t-0", CFG.index_interval_bytes)
    assert read_checkpoint(FS, f"{root}/replication-offset-checkpoint")[("t", 0)] == \
        nxt[-1] + 1
    # an assigning write continues after the preserved offsets
    w = StagingWriter(FS, root, "batch:4", "x")
    data, table = kp_encode(recs(4, 3))
    w.add("t", 0, data, table)
    commit_write(FS, root, "batch:4", [w.finish()], [TopicSpec("t")], config=CFG)
    assert offsets_of(f"{root}/t-0")[-3:] == [nxt[-1] + 1, nxt[-1] + 2, nxt[-1] + 3]


def test_empty_partition_starts_at_first_offset(tmp_path):
    root = str(tmp_path)
    # a topic whose partition 1 got no row: an empty segment at offset 0
    commit(root, "batch:1", [{0: (recs(1, 3), [0, 1, 2])}], partitions=2)
    assert segments(f"{root}/t-1") == [0]
    commit(root, "batch:2", [{1: (recs(2, 10), gappy(500, 10))}])
    assert segments(f"{root}/t-1")[0] == 500          # the empty segment below is gone
    assert offsets_of(f"{root}/t-1") == gappy(500, 10)
    assert read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")[("t", 1)] == 500
    assert read_table(root, "t", partitions=[1]).column("offset").to_pylist() == \
        gappy(500, 10)


def test_overwrite_moves_log_start_to_first_offset(tmp_path):
    root = str(tmp_path)
    commit(root, "batch:1", [{0: (recs(1, 20), list(range(20)))}])
    commit(root, "batch:2", [{0: (recs(2, 10), gappy(100, 10))}], mode="overwrite")
    assert offsets_of(f"{root}/t-0") == gappy(100, 10)
    assert segments(f"{root}/t-0")[0] == 100
    assert read_checkpoint(FS, f"{root}/log-start-offset-checkpoint")[("t", 0)] == 100


def test_write_table_round_trip(tmp_path):
    """write_table keeps offsets, timestamps, timestamp types, keys, values and headers;
    what our reader returns can be written back to another log dir identically."""
    hdr = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                  pa.field("value", pa.binary())])))
    n = 200
    offs = gappy(3, n)
    table = pa.table({
        "key": pa.array([None if i % 5 == 0 else b"" if i % 5 == 1 else b"k%d" % i
                         for i in range(n)], pa.binary()),
        "value": pa.array([None if i % 9 == 0 else b"" if i % 9 == 1 else b"v" * (i % 50)
                           for i in range(n)], pa.binary()),
        "timestamp": pa.array([1_700_000_000_000 + (i // 10) * 1000 for i in range(n)],
                              pa.timestamp("ms", tz="UTC")),
        "timestampType": pa.array([1 if (i // 10) % 3 == 0 else 0 for i in range(n)],
                                  pa.int32()),
        "headers": pa.array([None if i % 3 else [{"key": "h", "value": b"%d" % i}]
                             for i in range(n)], hdr),
        "partition": pa.array([i % 2 for i in range(n)], pa.int32()),
        "offset": pa.array(offs, pa.int64()),
    })
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        r = str(tmp_path / codec)
        write_table(r, "t", table, offsets="preserve", partitions=2, compression=codec,
                    batch_bytes=900, config=CFG)
        back = read_table(r, "t")
        for p in (0, 1):
            want = table.filter(pa.compute.equal(table.column("partition"), p))
            got = back.filter(pa.compute.equal(back.column("partition"), p))
            assert got.column("offset").to_pylist() == want.column("offset").to_pylist()
            assert got.column("timestampType").to_pylist() == \
                want.column("timestampType").to_pylist()
            assert got.column("timestamp").equals(
                want.column("timestamp").cast(pa.timestamp("us", tz="UTC")))
            for c in ("key", "value"):
                assert got.column(c).to_pylist() == want.column(c).to_pylist(), (codec, c)
            assert [h or None for h in got.column("headers").to_pylist()] == \
                want.column("headers").to_pylist()
            kp = read_kp(f"{r}/t-{p}", gaps=True, ts_type=True)
            assert [x[5] for x in kp] == want.column("timestampType").to_pylist()
            assert [x[3] for x in kp] == [
                int(t.timestamp() * 1000) for t in want.column("timestamp").to_pylist()]
        # what we read back writes back identically
        r2 = str(tmp_path / f"{codec}-again")
        write_table(r2, "t", back, offsets="preserve", partitions=2, compression=codec,
                    config=CFG)
        assert read_table(r2, "t").equals(back)


def test_no_append_writes_new_segments_at_the_kept_offsets(tmp_path):
    """As on an object store: every commit writes new segment files, each named by its
    first kept offset."""
    root = str(tmp_path)
    cfg = AppendConfig(segment_bytes=4000, index_interval_bytes=500, fsync=False,
                       no_append=True)
    a, b = gappy(5, 20), gappy(400, 15)
    commit(root, "batch:1", [{0: (recs(1, 20), a)}], config=cfg)
    commit(root, "batch:2", [{0: (recs(2, 15), b)}], config=cfg)
    assert offsets_of(f"{root}/t-0") == a + b
    assert segments(f"{root}/t-0")[0] == 5 and 400 in segments(f"{root}/t-0")
    assert_indexes_like_broker(f"{root}/t-0", cfg.index_interval_bytes)
