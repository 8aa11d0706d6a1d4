"""State, inspection/verification, swap files."""
import json
import shutil
import struct
import warnings

import pytest

from spark_kafkalog.errors import CorruptRecordError

from spark_kafkalog.log import (LogDirs, TornTailWarning, inspect_log_dirs, inspect_partition,
                                read_table)

from .logbuilder import LogDirBuilder
from .logbuilder import build_rich_partition as build_rich, sample_records as _records
from .test_read import TOPIC, _flip, assert_same


def test_state_of_rich_partition(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    s = logdirs.state(part)
    assert (s.log_start_offset, s.high_watermark, s.log_end_offset) == \
        (11, p.high_watermark, p.log_end_offset)
    assert s.upper_bound == p.high_watermark and not s.last_stable_offset_known
    assert s.size_bytes == sum(len(buf) for _, buf in p.segments) and s.segments == 3
    data = [bi for bi in p.batches if not bi.control]
    assert s.max_timestamp == max(bi.max_timestamp for bi in data)
    first = next(r for r in p.rows if r.offset >= 11)
    first_batch = next(bi for bi in data if bi.last_offset >= 11)
    assert s.first_timestamp <= first.timestamp and s.first_timestamp >= 0
    assert first_batch.base_offset <= 11
    s2 = logdirs.state(part, read_past_high_watermark=True)
    assert s2.upper_bound == p.log_end_offset


def test_inspect_clean_log_has_no_problems(tmp_path):
    b, p = build_rich(tmp_path / "logs", preallocate=4096)
    logdirs = LogDirs(str(b.roots[0]))
    info = inspect_partition(logdirs, logdirs.partition(TOPIC, 0))
    assert info.all_problems == []
    assert [s.base_offset for s in info.segments] == [base for base, _ in p.segments]
    assert sum(s.batches for s in info.segments) == len(p.batches)
    assert sum(s.data_records for s in info.segments) == len(p.rows)
    assert sum(s.control_batches for s in info.segments) == sum(bi.control for bi in p.batches)
    assert info.codecs == ("gzip", "lz4", "none", "snappy", "zstd")
    assert info.magics == (2,)
    assert info.segments[0].empty_batches == 1
    assert info.segments[1].aborted_txns == 1
    assert info.segments[0].index_entries > 0
    assert info.segments[-1].index_file_entries == 4096 // 8 + info.segments[-1].index_entries
    assert info.checkpoints["replication-offset-checkpoint"] == p.high_watermark
    assert info.leader_epochs == [(0, 0), (1, p.epochs[1][1])]
    assert info.state.log_end_offset == p.log_end_offset
    seg = info.segments[0]
    assert seg.first_offset == 0 and seg.min_timestamp is not None
    json.dumps(info.to_dict())                      # --json works


def test_inspect_finds_every_planted_fault(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    d = b.roots[0] / f"{TOPIC}-0"
    seg1 = p.segments[1][0]
    victim = p.segment_batches(seg1)[1]
    _flip(d / f"{seg1:020d}.log", victim.position + 30)               # corrupt batch
    last = p.batches[-1]
    with open(d / f"{last.segment:020d}.log", "r+b") as f:             # torn tail
        f.truncate(last.position + last.size - 3)
    idx = d / "00000000000000000000.index"                           # lying index entry
    data = bytearray(idx.read_bytes())
    struct.pack_into(">i", data, 4, struct.unpack_from(">i", data, 4)[0] + 1)
    idx.write_bytes(bytes(data))
    tidx = d / "00000000000000000000.timeindex"                      # lying time entry
    data = bytearray(tidx.read_bytes())
    struct.pack_into(">q", data, 0, struct.unpack_from(">q", data, 0)[0] + 1)
    tidx.write_bytes(bytes(data))
    ckpt = b.roots[0] / "log-start-offset-checkpoint"                # checkpoint past end
    ckpt.write_text(f"0\n1\n{TOPIC} 0 {p.log_end_offset + 10}\n")
    logdirs = LogDirs(str(b.roots[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", TornTailWarning)    # inspect does not warn: it reports
        info = inspect_partition(logdirs, logdirs.partition(TOPIC, 0))
    kinds = sorted({pr.kind for pr in info.all_problems})
    assert kinds == ["checkpoint", "corrupt", "index", "timeindex", "torn_tail"], \
        [str(x) for x in info.all_problems]
    corrupt = [pr for pr in info.all_problems if pr.kind == "corrupt"]
    assert corrupt[0].position == victim.position and corrupt[0].path.endswith(f"{seg1:020d}.log")
    torn = [pr for pr in info.all_problems if pr.kind == "torn_tail"][0]
    assert torn.position == last.position
    assert str(corrupt[0]).startswith("corrupt: ")


def test_inspect_real_broker_dirs_report_no_problems(real_broker):
    for root in ("donaldy-kafka-2.7.1", "niloufar-ldi-poc", "kafka-0.10-magic1",
                 "seanorth-kafka-server"):
        logdirs = LogDirs(str(real_broker / root))
        infos = inspect_log_dirs(logdirs)
        for info in infos:
            assert info.all_problems == [], (root, [str(x) for x in info.all_problems])
    logdirs = LogDirs(str(real_broker / "kafka-rust-testdata"))
    infos = {i.topic: i for i in inspect_log_dirs(logdirs)}
    bad = infos["fetch2.mytopic.nocompression.invalid_crc.kafka.0900"]
    assert [pr.kind for pr in bad.all_problems] == ["corrupt"]
    gz = infos["fetch1.mytopic.1p.gzip.kafka.0821"].segments[0]
    assert (gz.batches, gz.data_records, gz.codecs, gz.magics) == (1, 42, ("gzip",), (0,))


def test_swap_file_completes_an_interrupted_compaction(tmp_path):
    """Segments 0 and 10 were cleaned into 00..0.log.swap (holding offsets 0..17 with
    gaps); the broker died before renaming. A reader must use the swap, not both."""
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    p.append(_records(10, b"old"))
    p.roll()
    p.append(_records(8, b"old2"))
    p.roll()
    p.append(_records(4, b"active"))
    b.write()
    c = LogDirBuilder(tmp_path / "cleaned")
    q = c.partition(TOPIC, 0)
    q.append(_records(3, b"kept"), offset_deltas=[2, 9, 17])
    c.write()
    d = b.roots[0] / f"{TOPIC}-0"
    shutil.copy(c.roots[0] / f"{TOPIC}-0" / "00000000000000000000.log",
                d / "00000000000000000000.log.swap")
    shutil.copy(c.roots[0] / f"{TOPIC}-0" / "00000000000000000000.index",
                d / "00000000000000000000.index.swap")
    (d / "00000000000000000010.log.deleted").write_bytes(b"x")
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    assert [(s.base_offset, s.swap) for s in part.segments] == [(0, True), (18, False)]
    assert part.segments[0].index_path.endswith(".index.swap")
    t = read_table(logdirs, TOPIC)
    assert t.column("offset").to_pylist() == [2, 9, 17, 18, 19, 20, 21]
    # a swap at or above the smallest .cleaned offset is an unfinished split: ignored
    (d / "00000000000000000000.log.cleaned").write_bytes(b"")
    part = LogDirs(str(b.roots[0])).partition(TOPIC, 0)
    assert [(s.base_offset, s.swap) for s in part.segments] == [(0, False), (10, False),
                                                                  (18, False)]


def test_snapshot_gives_lso_without_scanning_the_whole_log(tmp_path):
    from spark_kafkalog.log import ReadStats
    from spark_kafkalog.log.read.state import partition_state

    results = {}
    for snapshot in (False, True):
        b, p = build_rich(tmp_path / f"logs{snapshot}", snapshot=snapshot)
        logdirs = LogDirs(str(b.roots[0]))
        part = logdirs.partition(TOPIC, 0)
        stats = ReadStats()
        s = partition_state(logdirs, part, isolation_level="read_committed", stats=stats)
        results[snapshot] = (s.last_stable_offset, stats.bytes_read, s.size_bytes)
        assert s.last_stable_offset == p.txns[3].first_offset
    assert results[True][1] < results[False][1]
    # without a snapshot the whole log is read; with one, not
    assert results[False][1] >= results[False][2]


def test_junk_after_a_segments_last_offset_is_reported(tmp_path):
    b = LogDirBuilder(tmp_path / "logs")
    p = b.partition(TOPIC, 0)
    p.append(_records(5, b"a"))
    p.roll()
    p.append(_records(5, b"b"))
    b.write()
    seg0 = b.roots[0] / f"{TOPIC}-0" / "00000000000000000000.log"
    size = seg0.stat().st_size
    with open(seg0, "ab") as f:
        f.write(b"\x01junk" * 20)
    logdirs = LogDirs(str(b.roots[0]))
    info = inspect_partition(logdirs, logdirs.partition(TOPIC, 0))
    assert [(pr.kind, pr.position) for pr in info.all_problems] == [("corrupt", size)]
    assert info.segments[0].valid_bytes == size
    # a reader crosses them: corruption under fail, skipped exactly under skip
    with pytest.raises(CorruptRecordError, match=f"position {size}"):
        read_table(logdirs, TOPIC)
    assert_same(read_table(logdirs, TOPIC, on_corruption="skip"), p.expected_table())


def test_inspect_progress_reaches_the_partition_size(tmp_path):
    b, p = build_rich(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    calls = []
    inspect_partition(logdirs, part, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (part.size_bytes, part.size_bytes)
    assert [c[0] for c in calls] == sorted(c[0] for c in calls)


def test_state_without_timestamps_reads_less(tmp_path):
    from spark_kafkalog.log import ReadStats
    from spark_kafkalog.log.read.state import partition_state

    b, p = build_rich(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    part = logdirs.partition(TOPIC, 0)
    full, lean = ReadStats(), ReadStats()
    a = partition_state(logdirs, part, stats=full)
    z = partition_state(logdirs, part, stats=lean, timestamps=False)
    assert (z.first_timestamp, z.max_timestamp) == (None, None)
    assert a.max_timestamp is not None and lean.bytes_read < full.bytes_read
    assert (a.log_start_offset, a.high_watermark, a.log_end_offset, a.upper_bound) == \
        (z.log_start_offset, z.high_watermark, z.log_end_offset, z.upper_bound)


def _planted_faults(root):
    """A rich partition with a corrupt batch, a torn tail and a time index whose
    entries are not all live (the last goes backwards): every way inspect's own reads
    differ from what the state reads alone."""
    b, p = build_rich(root, preallocate=4096)
    d = b.roots[0] / f"{TOPIC}-0"
    seg1 = p.segments[1][0]
    _flip(d / f"{seg1:020d}.log", p.segment_batches(seg1)[1].position + 30)
    last = p.batches[-1]
    with open(d / f"{last.segment:020d}.log", "r+b") as f:
        f.truncate(last.position + last.size - 3)
    tidx = d / "00000000000000000000.timeindex"
    data = bytearray(tidx.read_bytes())
    # the last entry: the largest timestamp of all, at an offset going backwards (the
    # state reads the entry alone, a whole read drops it)
    rel = struct.unpack_from(">i", data, len(data) - 16)[0]
    struct.pack_into(">qi", data, len(data) - 12, 2 ** 50, rel - 1)
    tidx.write_bytes(bytes(data))
    return b.roots[0]


def test_inspect_state_is_the_state_read_alone(tmp_path, real_broker):
    """inspect hands the partition's state what its own reads found (the log's tail,
    each time index's last entry): the state is the one a fresh read gives."""
    from spark_kafkalog.log.read.state import partition_state
    roots = [build_rich(tmp_path / "clean", preallocate=4096)[0].roots[0],
             _planted_faults(tmp_path / "faults"),
             real_broker / "donaldy-kafka-2.7.1", real_broker / "niloufar-ldi-poc"]
    seen = 0
    for root in roots:
        logdirs = LogDirs(str(root))
        for part in logdirs.all_partitions(None):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TornTailWarning)
                info = inspect_partition(logdirs, part)
                alone = partition_state(LogDirs(str(root)), part, on_corruption="skip")
            assert info.state == alone, (root, part.topic, part.partition)
            seen += 1
    assert seen > 4
