"""Many small slices decoded in one kernel call (log/read/packed.py, format.decode_segments)
against read_partition slice by slice, the builder's records (kafka-python and aiokafka
encoded them) and kafka-python's digests of real broker segments; damaged segments make
the run go the general way, and never crash the kernel."""
from __future__ import annotations

import hashlib
import random
import re
import struct

import pyarrow as pa
import pytest

from spark_kafkalog.errors import CorruptRecordError, KafkaLogError
from spark_kafkalog.format import decode_run, decode_segments, scan_header_rows
from spark_kafkalog.log import LogDirs, read_partition
from spark_kafkalog.log.read.packed import read_small, small_range

from .logbuilder import LogDirBuilder, flip_byte, rec, sample_records, tear_tail

SPAN = 1 << 31


def build(root):
    """Small partitions of every kind over two topics; partition 8 has three segments
    (the first ends below the next one's base: a gap)."""
    b = LogDirBuilder(root)
    ps = []
    for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        p = b.partition("t", i)
        for j in range(3):
            p.append(sample_records(7, b"%d-%d" % (i, j), with_headers=True), compression=codec,
                     encoder="aiokafka" if j % 2 else "kafka-python")
        ps.append(p)
    p = b.partition("t", 5)                   # legacy messages, plain and wrapped
    p.append_legacy(0, sample_records(4, b"l0"))
    p.append_legacy(1, sample_records(4, b"l1"))
    p.append_legacy(1, sample_records(5, b"l1z"), compression="gzip")
    p.append_legacy(1, sample_records(3, b"lat"), log_append_time=1_800_000_000_000)
    ps.append(p)
    p = b.partition("t", 6)                   # transactions, markers, gaps, empty batches
    t1 = p.begin_txn(101)
    p.append(sample_records(3, b"t1"), txn=t1)
    p.append(sample_records(2, b"n"))
    p.end_txn(t1, commit=False)
    p.gap(4)
    p.append(sample_records(4, b"g"), offset_deltas=[0, 2, 3, 8])
    p.empty_batch(3)
    t2 = p.begin_txn(202)
    p.append(sample_records(2, b"t2"), txn=t2, compression="lz4")
    p.end_txn(t2, commit=True)
    ps.append(p)
    p = b.partition("t", 7)
    p.append(sample_records(6, b"la"), log_append_time=1_800_000_000_000)
    ps.append(p)
    p = b.partition("t", 8)
    p.append(sample_records(5, b"s0"))
    p.gap(3)
    p.roll()
    p.append(sample_records(5, b"s1"), compression="zstd")
    p.roll()
    p.append(sample_records(5, b"s2"))
    ps.append(p)
    p = b.partition("other-topic", 0)
    p.append([rec(b"k", b"v", headers=[("h", b"1")]), rec(None, None)])
    ps.append(p)
    for p in ps:
        p.high_watermark = p.log_end_offset
    b.write()
    return b, ps


def general(logdirs, p, lo, hi, headers=True, **kw) -> pa.Table:
    from spark_kafkalog.format import record_schema

    return pa.Table.from_batches(
        list(read_partition(logdirs, p, start_offset=lo, end_offset=hi,
                            include_headers=headers, **kw)),
        schema=record_schema(headers))


def ranges(pb) -> list[tuple[int, int]]:
    """Whole partition, each segment's range, and inner pieces."""
    ends = [s for s, _ in pb.segments[1:]] + [pb.log_end_offset]
    out = [(0, pb.log_end_offset)]
    for (base, _), end in zip(pb.segments, ends):
        out += [(base, end), (base + 1, end - 1), (base + 2, base + 3)]
    return [(lo, hi) for lo, hi in dict.fromkeys(out) if lo < hi]


@pytest.mark.parametrize("headers", [True, False])
def test_a_run_reads_what_read_partition_reads_slice_by_slice(tmp_path, headers):
    b, builders = build(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    items, want, n_none = [], [], 0
    for pb in builders:
        p = logdirs.partition(pb.topic, pb.partition)
        for lo, hi in ranges(pb):
            item = small_range(p, lo, hi)
            if item is None:
                # only a range running over a segment boundary is not one small range
                assert p.segment_index_for(lo) != p.segment_index_for(hi - 1)
                n_none += 1
                continue
            if item[-1] is not None and read_small(logdirs.filesystem, [item]) is None:
                # the first segment of "t"-8 ends at offset 4 before a gap to 8: a range
                # ending past 5 is read on into the next segment by read_partition
                assert (pb.partition, item[0].base_offset) == (8, 0) and hi > 5
                n_none += 1
                continue
            items.append(item)
            want.append(general(logdirs, p, lo, hi, headers))
    assert n_none and len(items) > 30
    got = read_small(logdirs.filesystem, items, include_headers=headers)
    assert got is not None
    got.validate(full=True)
    expected = pa.concat_tables(want)
    assert pa.Table.from_batches([got]).equals(expected)
    # and the whole partitions as the builder (kafka-python / aiokafka bytes) says
    for pb in builders:
        p = logdirs.partition(pb.topic, pb.partition)
        if len(p.segments) > 1:
            continue
        one = read_small(logdirs.filesystem, [small_range(p, 0, pb.log_end_offset)],
                         include_headers=headers)
        assert pa.Table.from_batches([one]).equals(
            pb.expected_table("read_uncommitted", include_headers=headers))


def test_ranges_a_run_does_not_take(tmp_path):
    b, builders = build(tmp_path / "logs")
    logdirs = LogDirs(str(b.roots[0]))
    p = logdirs.partition("t", 8)
    s0, s1, _ = (s.base_offset for s in p.segments)
    assert small_range(p, 0, s1 + 1) is None                  # over a boundary
    assert small_range(p, 3, 3) is None                       # empty
    assert small_range(p, 0, 4, start_position=(s1, 0)) is None  # a hint elsewhere
    assert small_range(p, 0, 4, max_bytes=10) is None         # too big for the run
    # a range that must end in a segment that is not the last: the segment's last batch
    # (offset 4) is below the range's end (the gap 5..7): read_partition reads on into
    # the next segment, so the run does not take it
    item = small_range(p, 0, s1)
    assert item is not None and item[-1] == s1 - 1
    assert read_small(logdirs.filesystem, [item]) is None
    assert read_small(logdirs.filesystem, [small_range(p, 0, 5)]) is not None


@pytest.mark.parametrize("damage", ["crc", "torn", "zeros", "record", "gone"])
def test_damage_sends_the_run_the_general_way(tmp_path, damage):
    b, builders = build(tmp_path / "logs")
    pb = builders[0]
    path = b.roots[0] / pb.dir_name / "00000000000000000000.log"
    second = pb.batches[1]
    if damage == "crc":
        flip_byte(path, second.position + second.size - 3)
    elif damage == "torn":
        tear_tail(path, 5)
    elif damage == "zeros":
        with open(path, "ab") as f:
            f.write(bytes(100))
    elif damage == "record":
        # a record length that does not fit, under a correct CRC: framing and CRC pass,
        # the records do not decode
        data = bytearray(path.read_bytes())
        at = second.position + 61                       # the first record's length varint
        data[at] = 0x7E
        import crc32c
        crc = crc32c.crc32c(bytes(data[second.position + 21:second.position + second.size]))
        struct.pack_into(">I", data, second.position + 17, crc)
        path.write_bytes(bytes(data))
    logdirs = LogDirs(str(b.roots[0]))
    items = [small_range(logdirs.partition(q.topic, q.partition), 0, q.log_end_offset)
             for q in builders if q.partition != 8]
    if damage == "gone":
        path.unlink()
    assert read_small(logdirs.filesystem, items) is None
    if damage != "gone":
        # the kernel alone: the same answer for these bytes
        seg = items[0][0]
        data = path.read_bytes()[:seg.size]
        if damage == "record":
            with pytest.raises(CorruptRecordError, match="length varint") as err:
                decode_segments([(data, "t", 0, 0, 99, 0, SPAN, None)])
            assert err.value.position == second.position and err.value.offset == 7
        else:
            assert decode_segments([(data, "t", 0, 0, 99, 0, SPAN, None)]) is None


def test_real_broker_segments_in_one_call_match_kafka_python(real_broker):
    """Every real-broker partition's segments decoded together: each partition's rows
    have kafka-python's count and digest (MANIFEST.md); the segment with a bad CRC makes
    the call answer None."""
    text = (real_broker / "MANIFEST.md").read_text()
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(
        r"^\| `([^`]+)` \| (?:\d+) \| (?:\d+) \| [^|]+\| [^|]+\| (\d+) \|", text, re.M)}
    digests = {m.group(1): m.group(2) for m in re.finditer(
        r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|", text, re.M)}
    segments, parts, bad = [], [], 0
    for k, (part, digest) in enumerate(sorted(digests.items())):
        logs = sorted((real_broker / part).glob("*.log"))
        bases = [int(f.name[:-4]) for f in logs]
        one = []
        for f, base, nxt in zip(logs, bases, bases[1:] + [None]):
            one.append((f.read_bytes(), part, k, 0, 1 << 62, base,
                        nxt if nxt is not None else base + SPAN, None))
        if decode_segments(one) is None:
            bad += 1
            assert "invalid_crc" in part
            continue
        segments += one
        parts.append((k, part, digest))
    assert bad == 1 and len(parts) >= 5
    batch = decode_segments(segments)
    batch.validate(full=True)
    for k, part, digest in parts:
        mine = batch.filter(pa.compute.equal(batch.column("partition"), k))
        assert set(mine.column("topic").to_pylist()) <= {part}
        h = hashlib.sha256()
        for row in zip(*(mine.column(c).to_pylist() for c in ("offset", "key", "value"))):
            h.update(repr(row).encode("ascii"))
        assert mine.num_rows == counts[part]
        assert h.hexdigest() == digest


def test_hostile_bytes_never_crash_the_kernel(tmp_path):
    """Truncated, bit-flipped and shuffled segments: decode_segments answers None or
    rows equal to decode_run's of the same bytes, or raises our error; never more."""
    b, builders = build(tmp_path / "logs")
    datas = [(b.roots[0] / q.dir_name / "00000000000000000000.log").read_bytes()
             for q in builders[:8]]
    rnd = random.Random(21)
    taken = 0
    for i in range(400):
        data = bytearray(rnd.choice(datas))
        kind = i % 4
        if kind == 0:
            data = data[:rnd.randrange(len(data))]
        elif kind == 1:
            for _ in range(rnd.randrange(1, 4)):
                data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        elif kind == 2:
            cut = rnd.randrange(len(data))
            data = data[cut:] + data[:cut]
        else:
            data += bytes(rnd.randrange(1, 40))
        data = bytes(data)
        lo, hi = rnd.randrange(0, 5), rnd.randrange(5, 60)
        try:
            got = decode_segments([(data, "t", 1, lo, hi, 0, SPAN, None)])
        except KafkaLogError:
            continue
        scan = scan_header_rows(data, verify_crc=True, first_offset_hint=0)
        if got is None:
            continue
        taken += 1
        assert scan.problem is None and scan.end == len(data)
        assert got.equals(decode_run(data, topic="t", partition=1, start_offset=lo,
                                     end_offset=hi))
    assert taken        # some of them are still whole (the zero-length cuts at least)
