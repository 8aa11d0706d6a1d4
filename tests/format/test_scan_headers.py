"""scan_headers() and read_batch_header(): batch headers without decoding records,
checked field by field against what the builders wrote (and kafka-python's reader);
torn tails and corrupt batches reported, never raised."""
from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecords

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import (
    BATCH_HEADER_DTYPE,
    BatchHeader,
    HeaderScan,
    ScanProblem,
    read_batch_header,
    scan_header_rows,
    scan_headers,
)
from spark_kafkalog.format.schema import BATCH_HEADER_SCHEMA
from tests.format.builders import (
    client_batch,
    control_batch,
    empty_batch,
    flip,
    legacy_message,
    legacy_set,
    legacy_wrapper,
    patch,
    v2_record,
    v2_simple,
)

TS = 1_700_000_000_000


def _rows(scan: HeaderScan) -> list[dict]:
    return scan.headers.to_pylist()


def test_schema_and_namedtuple_match():
    assert list(BatchHeader._fields) == BATCH_HEADER_SCHEMA.names
    scan = scan_headers(b"")
    assert scan.headers.schema.equals(BATCH_HEADER_SCHEMA)
    assert (scan.headers.num_rows, scan.end, scan.problem) == (0, 0, None)
    assert scan_headers(b"", position_base=77).end == 77


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_v2_fields_from_client_builders(lib, codec):
    recs = [(TS + 5 * i, b"k%d" % i, b"value" * 20, []) for i in range(8)]
    a = client_batch(lib, 2, codec, recs, base_offset=100, producer=(77, 3, 1000),
                     transactional=True)
    b = client_batch(lib, 2, codec, recs[:3], base_offset=108, producer=(-1, -1, -1))
    data = a + b
    scan = scan_headers(data, position_base=5000, verify_crc=True)
    assert scan.problem is None and scan.end == 5000 + len(data)
    got = _rows(scan)
    epoch = struct.unpack_from(">i", a, 12)[0]          # 0 (kafka-python) or -1 (aiokafka)
    assert got == [
        dict(position=5000, size=len(a), magic=2, attributes=codec | wire.ATTR_TRANSACTIONAL,
             codec=codec, base_offset=100, last_offset=107, first_timestamp=TS,
             max_timestamp=TS + 35, producer_id=77, producer_epoch=3, base_sequence=1000,
             record_count=8, partition_leader_epoch=epoch, is_transactional=True,
             is_control=False, crc=struct.unpack_from(">I", a, 17)[0], control_type=-1),
        dict(position=5000 + len(a), size=len(b), magic=2, attributes=codec, codec=codec,
             base_offset=108, last_offset=110, first_timestamp=TS, max_timestamp=TS + 10,
             producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=3,
             partition_leader_epoch=epoch, is_transactional=False, is_control=False,
             crc=struct.unpack_from(">I", b, 17)[0], control_type=-1),
    ]
    # and as kafka-python reads the same headers
    mr = MemoryRecords(data)
    for row in got:
        kb = mr.next_batch()
        assert (row["base_offset"], row["last_offset"], row["crc"], row["producer_id"],
                row["max_timestamp"], row["is_transactional"]) == \
            (kb.base_offset, kb.last_offset, kb.crc, kb.producer_id, kb.max_timestamp,
             kb.is_transactional)


def test_control_types_and_empty_batches():
    data = (control_batch(wire.CONTROL_ABORT, base_offset=0, producer_id=5) +
            control_batch(wire.CONTROL_COMMIT, base_offset=1, producer_id=6, codec=1) +
            control_batch(2, base_offset=2, value=b"\x00\x01") +
            empty_batch(base_offset=3, last_offset_delta=6, max_timestamp=TS,
                        producer_id=9))
    got = _rows(scan_headers(data, verify_crc=True))
    assert [(r["is_control"], r["control_type"], r["is_transactional"], r["producer_id"])
            for r in got] == [(True, 0, True, 5), (True, 1, True, 6), (True, 2, False, -1),
                              (False, -1, False, 9)]
    assert [(r["base_offset"], r["last_offset"], r["record_count"]) for r in got][-1] == \
        (3, 9, 0)


def test_unreadable_control_record_is_a_problem():
    bad_key = v2_record(0, 0, b"\x00", b"")              # key shorter than 4 bytes
    from tests.format.builders import v2_batch
    data = v2_simple([(0, TS, b"k", b"v")]) + v2_batch([bad_key], base_offset=1, control=True)
    scan = scan_headers(data)
    assert scan.headers.num_rows == 1
    assert scan.problem.kind == "corrupt" and scan.problem.offset == 1
    assert "control" in scan.problem.reason


def test_legacy_entries():
    inner0 = legacy_set([(10, None, b"k", b"v"), (11, None, b"k", b"w")], magic=0)
    data = (legacy_set([(8, None, b"k", b"a"), (9, None, None, b"b")], magic=0) +
            legacy_wrapper(inner0, offset=11, magic=0, codec=wire.CODEC_GZIP) +
            legacy_message(12, b"k", b"c", magic=1, timestamp=TS) +
            legacy_wrapper(b"".join(legacy_message(i, None, b"x", magic=1, timestamp=TS + i)
                                    for i in range(3)),
                           offset=15, magic=1, codec=wire.CODEC_SNAPPY, timestamp=TS + 2,
                           log_append_time=True))
    got = _rows(scan_headers(data, verify_crc=True))
    assert [(r["magic"], r["codec"], r["base_offset"], r["last_offset"], r["record_count"],
             r["first_timestamp"], r["max_timestamp"]) for r in got] == [
        (0, 0, 8, 8, 1, -1, -1), (0, 0, 9, 9, 1, -1, -1), (0, 1, 10, 11, -1, -1, -1),
        (1, 0, 12, 12, 1, TS, TS), (1, 2, 13, 15, -1, TS + 2, TS + 2)]
    assert got[-1]["attributes"] == wire.CODEC_SNAPPY | wire.LEGACY_TIMESTAMP_TYPE
    assert all(r["producer_id"] == -1 and r["partition_leader_epoch"] == -1 and
               r["control_type"] == -1 and not r["is_control"] for r in got)
    assert [r["crc"] for r in got][:1] == [struct.unpack_from(">I", data, 12)[0]]


def test_wrapper_base_offset_from_hint():
    w = legacy_wrapper(legacy_set([(0, None, b"k", b"v")] * 3, magic=0), offset=52,
                       magic=0, codec=wire.CODEC_GZIP)
    assert _rows(scan_headers(w))[0]["base_offset"] == 52
    assert _rows(scan_headers(w, first_offset_hint=50))[0]["base_offset"] == 50
    two = _rows(scan_headers(w + legacy_wrapper(
        legacy_set([(0, None, b"k", b"v")] * 2, magic=0), offset=60, magic=0,
        codec=wire.CODEC_GZIP), first_offset_hint=50))
    assert [(r["base_offset"], r["last_offset"]) for r in two] == [(50, 52), (53, 60)]


# ---- problems --------------------------------------------------------------------------------------

FIRST = v2_simple([(0, TS, b"k", b"v")])
SECOND = v2_simple([(1, TS, b"k", b"v" * 100)], base_offset=1, base_timestamp=TS)


@pytest.mark.parametrize("cut", [1, 7, 8, 16, 17, 40, 61, len(SECOND) - 1])
def test_torn_tail(cut):
    data = FIRST + SECOND[:cut]
    scan = scan_headers(data, position_base=100)
    assert scan.headers.num_rows == 1
    assert scan.end == 100 + len(FIRST)
    assert scan.problem == ScanProblem(
        "torn", 100 + len(FIRST), 1 if cut >= 8 else None, scan.problem.reason)
    assert "partial batch" in scan.problem.reason


@pytest.mark.parametrize("damage,reason", [
    (lambda b: patch(b, wire.MAGIC_POS, ">b", 5), "unknown magic byte 5"),
    (lambda b: patch(b, wire.SIZE_POS, ">i", 10), "impossible batch length 10"),
    (lambda b: patch(b, wire.SIZE_POS, ">i", -1), "impossible batch length -1"),
    (lambda b: patch(b, wire.V2_RECORD_COUNT_POS, ">i", -4), "negative record count"),
    (lambda b: patch(b, wire.V2_LAST_OFFSET_DELTA_POS, ">i", -1), "negative lastOffsetDelta"),
])
def test_corrupt_batch(damage, reason):
    data = FIRST + damage(SECOND) + FIRST
    scan = scan_headers(data, position_base=9)
    assert scan.headers.num_rows == 1 and scan.end == 9 + len(FIRST)
    assert (scan.problem.kind, scan.problem.position, scan.problem.offset) == \
        ("corrupt", 9 + len(FIRST), 1)
    assert reason in scan.problem.reason


def test_crc_checked_only_when_asked():
    bad = flip(SECOND, len(SECOND) - 3)
    data = FIRST + bad
    assert scan_headers(data).problem is None
    scan = scan_headers(data, verify_crc=True)
    assert (scan.problem.kind, scan.problem.position, scan.end) == \
        ("corrupt", len(FIRST), len(FIRST))
    assert "CRC-32C" in scan.problem.reason
    legacy = legacy_message(0, b"k", b"v", magic=1, timestamp=TS, crc=0)
    scan = scan_headers(legacy, verify_crc=True)
    assert scan.problem.kind == "corrupt" and "CRC-32" in scan.problem.reason


def test_many_small_batches():
    data = b"".join(v2_simple([(i, TS + i, None, b"%d" % i)], base_offset=i,
                              base_timestamp=TS + i) for i in range(30_000))
    scan = scan_headers(data, verify_crc=True)
    assert scan.problem is None and scan.end == len(data)
    assert scan.headers.column("base_offset").to_pylist() == list(range(30_000))
    assert scan.headers.column("first_timestamp").to_pylist() == \
        [TS + i for i in range(30_000)]


def test_numpy_rows_are_the_table_rows():
    """scan_header_rows (what the log layer's scans use) gives the rows scan_headers
    gives, field for field, bools included (11 batches: not a whole byte of bits), and
    the same end and problem."""
    assert list(BATCH_HEADER_DTYPE.names) == BATCH_HEADER_SCHEMA.names
    data = (control_batch(wire.CONTROL_ABORT, base_offset=0, producer_id=5) +
            legacy_set([(1, None, b"k", b"a")], magic=0) +
            legacy_message(2, b"k", b"c", magic=1, timestamp=TS) +
            b"".join(client_batch("kafka-python", 2, 0, [(TS + i, b"k", b"v", [])],
                                  base_offset=3 + i, producer=(7, 1, i), transactional=i % 2)
                     for i in range(8)))
    torn = data + data[:30]
    for buf in (data, torn, b""):
        table = scan_headers(buf, position_base=9, verify_crc=True, first_offset_hint=0)
        rows = scan_header_rows(buf, position_base=9, verify_crc=True, first_offset_hint=0)
        assert rows.headers.dtype == BATCH_HEADER_DTYPE
        assert [dict(zip(BATCH_HEADER_DTYPE.names, r)) for r in rows.headers.tolist()] == \
            table.headers.to_pylist()
        assert (rows.end, rows.problem) == (table.end, table.problem)
    assert len(scan_header_rows(data).headers) == 11
    assert scan_header_rows(torn).problem.kind == "torn"


# ---- read_batch_header ---------------------------------------------------------------------------

def test_read_batch_header():
    data = FIRST + SECOND
    h = read_batch_header(data, len(FIRST))
    assert isinstance(h, BatchHeader)
    assert (h.position, h.size, h.magic, h.base_offset, h.last_offset, h.record_count) == \
        (len(FIRST), len(SECOND), 2, 1, 1, 1)
    assert h == BatchHeader(**_rows(scan_headers(data))[1])
    assert read_batch_header(memoryview(data)).base_offset == 0


@pytest.mark.parametrize("data,pos,match", [
    (FIRST + SECOND[:30], len(FIRST), "partial batch"),
    (FIRST, len(FIRST), "no batch at position"),
    (patch(FIRST, wire.MAGIC_POS, ">b", 9), 0, "unknown magic"),
    (b"\x00" * 5, 0, "partial batch"),
])
def test_read_batch_header_raises(data, pos, match):
    with pytest.raises(CorruptRecordError, match=match) as info:
        read_batch_header(data, pos)
    assert info.value.position == pos
