"""Reading built logs back exactly as a consumer would see them."""
import warnings

import pyarrow as pa
import pytest

from spark_kafkalog.errors import (CorruptRecordError, DataLossError, InvalidOptionError,
                                   OffsetOutOfRangeError)
from spark_kafkalog.log import (LogDirs, ReadStats, TornTailWarning, read_partition,
                                read_table, split_points)

from .logbuilder import LogDirBuilder, sample_records as _records
from .logbuilder import build_rich_partition as build_rich

TOPIC = "a.b-c_d"


def assert_same(got: pa.Table, expected: pa.Table):
    assert got.schema == expected.schema
    if not got.equals(expected):
        g, e = got.to_pylist(), expected.to_pylist()
        assert [r["offset"] for r in g] == [r["offset"] for r in e]
        for a, b in zip(g, e):
            assert a == b
        raise AssertionError("tables differ")


@pytest.fixture
def rich(tmp_path):
    return build_rich(tmp_path / "logs")


def test_builder_shape(rich):
    b, p = rich
    assert len(p.segments) == 3
    assert p.txns[0].committed is False and p.txns[1].committed is True
    assert p.txns[3].committed is None


@pytest.mark.parametrize("window", [1, 97, 4096, 16 << 20])
def test_read_uncommitted_matches_consumer_view(rich, window):
    b, p = rich
    t = read_table(str(b.roots[0]), TOPIC, window_bytes=window)
    assert_same(t, p.expected_table("read_uncommitted"))
    assert t.column("offset")[0].as_py() == 11               # log start inside segment 0


@pytest.mark.parametrize("txnindex", [True, False])
@pytest.mark.parametrize("mode", ["auto", "use", "ignore"])
@pytest.mark.parametrize("snapshot", [False, True])
def test_read_committed_matches_consumer_view(tmp_path, txnindex, mode, snapshot):
    b, p = build_rich(tmp_path / "logs", txnindex=txnindex, snapshot=snapshot)
    expected = p.expected_table("read_committed")
    if mode == "use" and not txnindex:
        # told to trust .txnindex files and there are none: nothing is known aborted
        # (what a broker that lost them would serve); the LSO still bounds the read
        expected = p.expected_table("read_uncommitted", end=p.bounds("read_committed")[1])
    t = read_table(str(b.roots[0]), TOPIC, isolation_level="read_committed", txn_index=mode)
    assert_same(t, expected)
    logdirs = LogDirs(str(b.roots[0]))
    s = logdirs.state(logdirs.partition(TOPIC, 0), isolation_level="read_committed")
    lo, hi = p.bounds("read_committed")
    assert (s.log_start_offset, s.last_stable_offset, s.upper_bound) == (lo, hi, hi)
    assert s.last_stable_offset == p.txns[3].first_offset      # the open transaction
    assert s.high_watermark == p.high_watermark and s.log_end_offset == p.log_end_offset


def test_read_committed_drops_aborted_even_in_small_windows(rich):
    b, p = rich
    for window in (1, 200):
        t = read_table(str(b.roots[0]), TOPIC, isolation_level="read_committed",
                       window_bytes=window, txn_index="ignore")
        assert_same(t, p.expected_table("read_committed"))


def test_read_past_high_watermark(rich):
    b, p = rich
    t = read_table(str(b.roots[0]), TOPIC, read_past_high_watermark=True)
    assert_same(t, p.expected_table("read_uncommitted", read_past_high_watermark=True))
    assert t.column("offset")[-1].as_py() == p.log_end_offset - 1


def test_without_checkpoints_reads_to_log_end_from_first_segment(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    p.append(_records(5, b"x"))
    p.high_watermark, p.log_start_offset = 3, 2
    b.write_checkpoints = False
    b.write()
    t = read_table(str(b.roots[0]), TOPIC)
    assert t.column("offset").to_pylist() == [0, 1, 2, 3, 4]


def test_every_start_and_end_offset(rich):
    """Seeking to any offset (through the index) gives exactly the consumer's suffix."""
    b, p = rich
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    full = p.expected_table("read_uncommitted", read_past_high_watermark=True)
    offsets = [r.offset for r in p.rows]       # read_partition does not clamp to log start
    for start in range(0, p.log_end_offset + 1, 3):
        for end in (start + 1, start + 7, p.log_end_offset):
            got = pa.Table.from_batches(
                list(read_partition(logdirs, part, start_offset=start, end_offset=end,
                                    window_bytes=256)), schema=full.schema)
            want = [o for o in offsets if start <= o < end]
            assert got.column("offset").to_pylist() == want, (start, end)


def test_split_points_partition_the_range_exactly(rich):
    b, p = rich
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    s = logdirs.state(part)
    cuts = split_points(logdirs, part, s.log_start_offset, s.upper_bound, 500)
    assert cuts[0][0] == s.log_start_offset and len(cuts) > 3
    assert [c[0] for c in cuts] == sorted({c[0] for c in cuts})
    bounds = [c[0] for c in cuts[1:]] + [s.upper_bound]
    stats = ReadStats()
    pieces = []
    for (start, seg, pos), end in zip(cuts, bounds):
        pieces.extend(read_partition(logdirs, part, start_offset=start, end_offset=end,
                                     start_position=(seg, pos), stats=stats))
    got = pa.Table.from_batches(pieces)
    assert_same(got, p.expected_table("read_uncommitted"))
    assert stats.index_fallbacks == 0


def test_position_hint_that_lies_is_not_trusted(rich):
    b, p = rich
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    seg1 = part.segments[1]
    start = seg1.base_offset + 4
    stats = ReadStats()
    for hint in [(seg1.base_offset, 7), (seg1.base_offset, seg1.size - 100),
                 (seg1.base_offset, p.segment_batches(seg1.base_offset)[-1].position)]:
        got = pa.Table.from_batches(list(read_partition(
            logdirs, part, start_offset=start, end_offset=p.log_end_offset,
            start_position=hint, stats=stats)))
        want = p.expected_table("read_uncommitted", start=start, read_past_high_watermark=True)
        assert got.column("offset").to_pylist() == want.column("offset").to_pylist()
    assert stats.index_fallbacks >= 2


def test_jbod_topic_over_two_roots_and_future_copies(tmp_path):
    b = LogDirBuilder(tmp_path / "d1", tmp_path / "d2")
    parts = []
    for q in range(4):
        p = b.partition(TOPIC, q, root=q % 2)
        p.append(_records(3 + q, b"p%d" % q), compression="gzip")
        p.roll()
        p.append(_records(2, b"q%d" % q))
        p.high_watermark = p.log_end_offset - (q % 2)
        parts.append(p)
    b.write()
    # a -future copy of partition 0 in the other root, holding different data: ignored
    fut = LogDirBuilder(tmp_path / "tmp")
    f = fut.partition(TOPIC, 0)
    f.append(_records(9, b"future"))
    fut.write()
    (tmp_path / "tmp" / f"{TOPIC}-0").rename(
        tmp_path / "d2" / f"{TOPIC}-0.0123456789abcdef0123456789abcdef-future")
    t = read_table(f"{tmp_path / 'd1'},{tmp_path / 'd2'}", TOPIC)
    expected = pa.concat_tables([p.expected_table() for p in parts])
    assert_same(t, expected)
    t2 = read_table([str(tmp_path / "d2"), str(tmp_path / "d1")], TOPIC, partitions=[3, 1],
                    starting_offsets={"1": 2}, ending_offsets={3: 4})
    assert t2.column("partition").to_pylist() == [1] * 3 + [3] * 4
    assert t2.column("offset").to_pylist() == [2, 3, 4, 0, 1, 2, 3]


def test_offset_options(rich):
    b, p = rich
    root = str(b.roots[0])
    with pytest.raises(DataLossError, match="below the log start offset 11"):
        read_table(root, TOPIC, starting_offsets={0: 3})
    t = read_table(root, TOPIC, starting_offsets={0: 3}, fail_on_data_loss=False)
    assert t.column("offset")[0].as_py() == 11
    with pytest.raises(OffsetOutOfRangeError):
        read_table(root, TOPIC, starting_offsets={0: p.log_end_offset + 5})
    assert read_table(root, TOPIC, starting_offsets={0: -1}).num_rows == 0
    t = read_table(root, TOPIC, starting_offsets={0: 20}, ending_offsets={0: 30})
    visible = set(p.expected_table().column("offset").to_pylist())
    assert t.column("offset").to_pylist() == [o for o in range(20, 30) if o in visible]
    for bad in ({0: -3}, {0: "x"}, {"zero": 1}, {7: 1}):
        with pytest.raises(InvalidOptionError):
            read_table(root, TOPIC, starting_offsets=bad)
    with pytest.raises(InvalidOptionError):
        read_table(root, TOPIC, starting_offsets={0: 30}, ending_offsets={0: 20})
    with pytest.raises(InvalidOptionError):
        read_table(root, TOPIC, isolation_level="read_dirty")
    with pytest.raises(InvalidOptionError):
        read_table(root, TOPIC, on_corruption="ignore")
    t = read_table(root, TOPIC, include_headers=False)
    assert "headers" not in t.schema.names


def test_preallocated_zero_padded_active_indexes(tmp_path):
    b, p = build_rich(tmp_path / "logs", preallocate=64 * 1024)
    t = read_table(str(b.roots[0]), TOPIC)
    assert_same(t, p.expected_table())
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    s = logdirs.state(part)
    assert s.log_end_offset == p.log_end_offset
    assert s.max_timestamp == max(bi.max_timestamp for bi in p.batches if not bi.control)


def test_missing_and_lying_indexes(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    d = b.roots[0] / f"{TOPIC}-0"
    for f in d.glob("*.index"):
        if f.name.startswith("00000000000000000000"):
            f.unlink()
    # segment 1's index claims positions that are not batch starts
    seg1 = p.segments[1][0]
    idx = d / f"{seg1:020d}.index"
    data = bytearray(idx.read_bytes())
    for k in range(0, len(data), 8):
        pos = int.from_bytes(data[k + 4:k + 8], "big")
        data[k + 4:k + 8] = (pos + 3).to_bytes(4, "big")
    idx.write_bytes(bytes(data))
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    assert part.segments[0].index_path is None
    stats = ReadStats()
    for start in (11, 15, seg1 + 5, seg1 + 12):
        got = pa.Table.from_batches(list(read_partition(
            logdirs, part, start_offset=start, end_offset=p.log_end_offset, stats=stats)))
        want = p.expected_table(start=start, read_past_high_watermark=True)
        assert got.column("offset").to_pylist() == want.column("offset").to_pylist()
    assert stats.index_fallbacks >= 1


def test_torn_tail_is_end_of_log(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    last = p.batches[-1]
    path = b.roots[0] / f"{TOPIC}-0" / f"{last.segment:020d}.log"
    with open(path, "r+b") as f:
        f.truncate(last.position + last.size - 5)
    # the high watermark past the torn batch is data loss (committed records gone)...
    with pytest.raises(DataLossError, match=f"high watermark is checkpointed at "
                                            f"{p.high_watermark}.*offsets {last.base_offset}"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            read_table(str(b.roots[0]), TOPIC)
    # ...a crash's checkpoints are at or below it: the torn batch was never committed
    _crash_checkpoints(b.roots[0], last.base_offset)
    stats = ReadStats()
    with pytest.warns(TornTailWarning, match="torn batch"):
        logdirs = LogDirs(str(b.roots[0]))
        part = logdirs.partition(TOPIC, 0)
        s = logdirs.state(part)
        got = pa.Table.from_batches(list(read_partition(
            logdirs, part, start_offset=s.log_start_offset, end_offset=1 << 40,
            stats=stats)))
    assert s.log_end_offset == last.base_offset
    want = [r.offset for r in p.rows if 11 <= r.offset < last.base_offset]
    assert got.column("offset").to_pylist() == want
    assert stats.torn_tail == (str(path), last.position, last.size - 5)
    # every policy treats it the same way
    for policy in ("fail", "skip", "stop"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TornTailWarning)
            t = read_table(str(b.roots[0]), TOPIC, on_corruption=policy)
        assert t.column("offset").to_pylist() == want


def _crash_checkpoints(root, at: int) -> None:
    """High watermark and recovery point at ``at``, as a crash that tore the batch there
    leaves them (neither passes what was committed and flushed)."""
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        (root / name).write_text(f"0\n1\n{TOPIC} 0 {at}\n")


def test_zero_filled_tail_is_end_of_log(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    path = b.roots[0] / f"{TOPIC}-0" / f"{p.segments[-1][0]:020d}.log"
    with open(path, "ab") as f:
        f.write(b"\0" * 5000)
    with pytest.warns(TornTailWarning, match="zero-filled"):
        t = read_table(str(b.roots[0]), TOPIC)
    assert_same(t, p.expected_table())


def _flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x5A]))


@pytest.mark.parametrize("which", ["first-segment", "middle-segment", "last-segment"])
def test_flipped_byte_under_each_policy(tmp_path, which):
    b, p = build_rich(tmp_path / "logs")
    seg_base = {"first-segment": p.segments[0][0], "middle-segment": p.segments[1][0],
                "last-segment": p.segments[2][0]}[which]
    batches = [bi for bi in p.segment_batches(seg_base) if not bi.control]
    victim = batches[len(batches) // 2]
    path = b.roots[0] / f"{TOPIC}-0" / f"{seg_base:020d}.log"
    _flip(path, victim.position + victim.size // 2 + 10)
    root = str(b.roots[0])
    with pytest.raises(CorruptRecordError) as e:
        read_table(root, TOPIC, read_past_high_watermark=True)
    assert e.value.path == str(path) and e.value.position == victim.position
    assert f"position {victim.position}" in str(e.value) and str(path) in str(e.value)
    assert e.value.offset == victim.base_offset
    for level in ("read_uncommitted", "read_committed"):
        stats = ReadStats()
        t = read_table(root, TOPIC, on_corruption="skip", isolation_level=level, stats=stats)
        assert_same(t, p.expected_table(level, skip_batches=[victim]))
        assert [(s.path, s.start, s.end) for s in stats.skipped] == [
            (str(path), victim.position, victim.position + victim.size)]
        t = read_table(root, TOPIC, on_corruption="stop", isolation_level=level)
        assert_same(t, p.expected_table(level, stop_at=victim))


def test_garbage_between_batches_is_resynchronised(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    seg_base = p.segments[1][0]
    path = b.roots[0] / f"{TOPIC}-0" / f"{seg_base:020d}.log"
    victim = p.segment_batches(seg_base)[2]
    data = path.read_bytes()
    junk = bytes(range(256)) * 3 + b"\x00\x02" * 50
    path.write_bytes(data[:victim.position] + junk + data[victim.position:])
    for f in path.parent.glob(f"{seg_base:020d}.*index"):
        f.unlink()                                    # positions moved
    root = str(b.roots[0])
    with pytest.raises(CorruptRecordError, match=f"position {victim.position}"):
        read_table(root, TOPIC)
    stats = ReadStats()
    t = read_table(root, TOPIC, on_corruption="skip", stats=stats)
    assert_same(t, p.expected_table())
    assert [(s.start, s.end) for s in stats.skipped] == [
        (victim.position, victim.position + len(junk))]
    t = read_table(root, TOPIC, on_corruption="stop")
    assert_same(t, p.expected_table(stop_at=victim))


def test_offsets_going_backwards(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    for i in range(6):
        p.append(_records(3, b"%d" % i))
    b.write()
    path = b.roots[0] / f"{TOPIC}-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    victim = p.batches[3]
    data[victim.position:victim.position + 8] = (2).to_bytes(8, "big")   # base offset 2
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="backwards"):
        read_table(str(b.roots[0]), TOPIC)
    t = read_table(str(b.roots[0]), TOPIC, on_corruption="skip")
    assert_same(t, p.expected_table(skip_batches=[victim]))


def test_undecodable_batch_with_valid_crc(tmp_path):
    """A batch whose framing and CRC are fine but whose records do not decode goes
    through the policy on its own."""
    import struct
    import crc32c

    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    for i in range(5):
        p.append(_records(4, b"%d" % i), compression="gzip" if i == 2 else "none")
    b.write()
    path = b.roots[0] / f"{TOPIC}-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    victim = p.batches[2]
    start = victim.position
    data[start + 61:start + victim.size] = b"\x00" * (victim.size - 61)   # not gzip
    crc = crc32c.crc32c(bytes(data[start + 21:start + victim.size]))    # a valid CRC
    struct.pack_into(">I", data, start + 17, crc)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError) as e:
        read_table(str(b.roots[0]), TOPIC)
    assert e.value.path == str(path) and e.value.position == start
    stats = ReadStats()
    t = read_table(str(b.roots[0]), TOPIC, on_corruption="skip", stats=stats)
    assert_same(t, p.expected_table(skip_batches=[victim]))
    assert [(s.start, s.end) for s in stats.skipped] == [(start, start + victim.size)]
    t = read_table(str(b.roots[0]), TOPIC, on_corruption="stop", window_bytes=1 << 20)
    assert_same(t, p.expected_table(stop_at=victim))


def test_torn_batch_at_end_of_a_middle_segment_is_corruption(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    seg_base = p.segments[0][0]
    path = b.roots[0] / f"{TOPIC}-0" / f"{seg_base:020d}.log"
    last = p.segment_batches(seg_base)[-1]
    with open(path, "r+b") as f:
        f.truncate(last.position + 20)
    with pytest.raises(CorruptRecordError, match="not the last"):
        read_table(str(b.roots[0]), TOPIC)
    t = read_table(str(b.roots[0]), TOPIC, on_corruption="skip")
    assert_same(t, p.expected_table(skip_batches=[last]))


def test_legacy_messages(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition("legacy", 0, index_interval_bytes=100)
    p.append_legacy(0, _records(5, b"v0"))
    p.append_legacy(0, _records(4, b"v0z"), compression="gzip")
    p.append_legacy(1, _records(5, b"v1"))
    p.append_legacy(1, _records(6, b"v1s"), compression="snappy")
    p.append_legacy(1, _records(3, b"v1l"), compression="lz4", log_append_time=1_600_000_000_000)
    p.roll()
    p.append_legacy(1, _records(3, b"v1x"), log_append_time=1_600_000_000_500)
    p.append(_records(3, b"v2"))
    b.write()
    assert_same(read_table(str(b.roots[0]), "legacy"), p.expected_table())
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition("legacy", 0)
    for start in range(p.log_end_offset):
        got = pa.Table.from_batches(list(read_partition(
            logdirs, part, start_offset=start, end_offset=p.log_end_offset)))
        assert got.column("offset").to_pylist() == list(range(start, p.log_end_offset))


def test_a_range_in_the_middle_of_a_segment_reads_only_its_bytes(tmp_path):
    from .fsutil import CountingFileSystem
    from .logbuilder import write_large_partition

    info = write_large_partition(tmp_path, "mid", 0, total_bytes=8 << 20,
                                 segment_bytes=64 << 20, batch_records=20, value_bytes=100)
    size = info["segments"][0][2]
    counting = CountingFileSystem()
    logdirs = LogDirs(str(tmp_path), filesystem=counting.fs)
    part = logdirs.partition("mid", 0)
    leo = info["log_end_offset"]
    start, end = leo // 2, leo // 2 + leo // 100
    counting.reset()
    got = pa.Table.from_batches(list(read_partition(logdirs, part, start_offset=start,
                                                    end_offset=end)))
    assert got.column("offset").to_pylist() == list(range(start, end))
    # the range is 1% of the segment: its bytes, the index and a batch or two around it
    assert counting.bytes_read < 0.02 * size + 3 * info["batch_size"], counting.bytes_read


@pytest.mark.parametrize("txnindex", [True, False])
def test_marker_at_or_above_the_high_watermark_decides_nothing(tmp_path, txnindex):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    p.append(_records(3, b"a"))
    t = p.begin_txn(7)
    p.append(_records(2, b"t"), txn=t)
    p.append(_records(2, b"plain"))
    u = p.begin_txn(8)
    p.append(_records(2, b"u"), txn=u)
    p.end_txn(u, commit=False)                # decided below the high watermark
    p.append(_records(2, b"more"))
    marker = p.end_txn(t, commit=True)        # committed, but the marker is not replicated
    p.append(_records(2, b"tail"))
    p.high_watermark = marker.base_offset
    p.write_txnindex = txnindex
    b.write()
    root = str(b.roots[0])
    logdirs = LogDirs(root)
    s = logdirs.state(logdirs.partition(TOPIC, 0), isolation_level="read_committed")
    assert s.last_stable_offset == t.first_offset == 3
    assert_same(read_table(root, TOPIC, isolation_level="read_committed"),
                p.expected_table("read_committed"))
    assert read_table(root, TOPIC, isolation_level="read_committed").num_rows == 3
    # reading past the high watermark, the marker decides: t is committed, u aborted
    t2 = read_table(root, TOPIC, isolation_level="read_committed", read_past_high_watermark=True)
    assert_same(t2, p.expected_table("read_committed", read_past_high_watermark=True))
    assert 3 in t2.column("offset").to_pylist() and 7 not in t2.column("offset").to_pylist()


def test_torn_tail_under_read_committed(tmp_path):
    b, p = build_rich(tmp_path / "logs", txnindex=False)
    last = p.batches[-1]
    path = b.roots[0] / f"{TOPIC}-0" / f"{last.segment:020d}.log"
    with open(path, "r+b") as f:
        f.truncate(last.position + 30)
    _crash_checkpoints(b.roots[0], last.base_offset)
    p.high_watermark = None
    p.next_offset = last.base_offset                  # what the log now holds
    expected = p.expected_table("read_committed")
    for policy in ("fail", "skip", "stop"):
        with pytest.warns(TornTailWarning):
            t = read_table(str(b.roots[0]), TOPIC, on_corruption=policy,
                           isolation_level="read_committed")
        assert_same(t, expected)


def test_batches_larger_than_the_window_are_read_whole_up_to_max_batch_bytes(rich):
    b, p = rich
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    biggest = max(bi.size for bi in p.batches)
    got = pa.Table.from_batches(list(read_partition(
        logdirs, part, start_offset=11, end_offset=p.high_watermark, window_bytes=16,
        max_batch_bytes=biggest)))
    assert_same(got, p.expected_table())
    with pytest.raises(CorruptRecordError, match="max_batch_bytes"):
        list(read_partition(logdirs, part, start_offset=11, end_offset=p.high_watermark,
                            window_bytes=16, max_batch_bytes=biggest - 1))
