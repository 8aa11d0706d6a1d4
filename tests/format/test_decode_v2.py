"""decode() on hand-built v2 batches: what no client builder writes (control and
transactional batches, LogAppendTime, delete horizon, compaction gaps, empty batches)
and the corners of the record format (null vs empty, header values, UTF-8 of header
keys, NO_TIMESTAMP, varint widths)."""
from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from spark_kafkalog.errors import UnsupportedFormatError
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import decode
from spark_kafkalog.format.schema import HEADERS_TYPE, SCHEMA_WITH_HEADERS
from tests.format.builders import (
    Rec,
    control_batch,
    empty_batch,
    kafka_python_rows,
    rows,
    v2_batch,
    v2_record,
    v2_simple,
)

TS = 1_700_000_000_000


def test_schema_is_sparks_exactly():
    data = v2_simple([(0, TS, b"k", b"v", [("h", b"x")])])
    batch = decode(data, topic="t")
    assert batch.schema.equals(SCHEMA_WITH_HEADERS, check_metadata=True)
    assert batch.schema.field("key").type == pa.binary()
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.schema.field("headers").type == HEADERS_TYPE
    assert batch.schema.field("headers").type.value_field.name == "element"
    batch.validate(full=True)


def test_null_and_empty_keys_values_and_headers():
    data = v2_simple([
        (0, TS, None, None),
        (1, TS, b"", b""),
        (2, TS, b"k", None, [("a", None), ("b", b""), ("c", b"v")]),
        (3, TS, None, b"v", [("", b"empty key")]),
    ])
    assert rows(decode(data)) == [
        Rec(0, TS, 0, None, None, None),
        Rec(1, TS, 0, b"", b"", None),
        Rec(2, TS, 0, b"k", None, (("a", None), ("b", b""), ("c", b"v"))),
        Rec(3, TS, 0, None, b"v", (("", b"empty key"),)),
    ]
    batch = decode(data)
    batch.validate(full=True)
    assert batch.column("key").null_count == 2
    assert batch.column("value").null_count == 2
    assert batch.column("headers").null_count == 2


def test_create_time_is_base_plus_delta_and_no_timestamp_is_minus_one_ms():
    """NO_TIMESTAMP (-1) is not null: Spark's Kafka source shows it as -1 ms
    (1969-12-31T23:59:59.999Z), and so do we."""
    recs = [v2_record(0, 0, b"a", b"1"), v2_record(1, 250, b"b", b"2"),
            v2_record(2, -TS - 1, b"c", b"3"),          # base + delta == -1: NO_TIMESTAMP
            v2_record(3, -TS - 20, b"d", b"4")]         # -20: before the epoch, kept
    data = v2_batch(recs, base_offset=10, base_timestamp=TS, max_timestamp=TS + 250)
    got = rows(decode(data))
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in got] == \
        [(10, TS, 0), (11, TS + 250, 0), (12, -1, 0), (13, -20, 0)]
    assert got == kafka_python_rows(data)


def test_log_append_time_gives_every_record_the_max_timestamp():
    recs = [v2_record(i, 1000 * i, b"k%d" % i, b"v") for i in range(4)]
    data = v2_batch(recs, base_offset=0, base_timestamp=TS, max_timestamp=TS + 77_777,
                    log_append_time=True)
    got = rows(decode(data))
    assert {(r.timestamp, r.timestamp_type) for r in got} == {(TS + 77_777, 1)}
    assert got == kafka_python_rows(data)
    # a LogAppendTime batch whose maxTimestamp is NO_TIMESTAMP: -1 ms, still type 1
    data = v2_batch(recs, base_timestamp=TS, max_timestamp=-1, log_append_time=True)
    assert {(r.timestamp, r.timestamp_type) for r in rows(decode(data))} == {(-1, 1)}
    assert decode(data).column("timestamp").cast("int64").to_pylist() == [-1000] * 4


def test_delete_horizon_keeps_base_plus_delta():
    """With attribute bit 6 the baseTimestamp field holds deleteHorizonMs; Kafka still
    computes record timestamps as baseTimestamp + delta."""
    horizon = TS + 86_400_000
    recs = [v2_record(0, -5, b"k", None), v2_record(3, 10, b"k2", b"v")]
    data = v2_batch(recs, base_offset=40, base_timestamp=horizon, max_timestamp=horizon,
                    last_offset_delta=3, delete_horizon=True)
    assert rows(decode(data)) == [Rec(40, horizon - 5, 0, b"k", None),
                                  Rec(43, horizon + 10, 0, b"k2", b"v")]


def test_compaction_gaps_in_offset_deltas():
    data = v2_simple([(100, TS, b"a", b"1"), (104, TS, b"b", b"2"),
                      (190, TS + 1, b"c", None)], base_offset=100, base_timestamp=TS)
    assert [r.offset for r in rows(decode(data))] == [100, 104, 190]


def test_empty_batches_give_no_rows():
    data = (v2_simple([(0, TS, b"a", b"1")]) +
            empty_batch(base_offset=1, last_offset_delta=4) +
            v2_simple([(6, TS, b"b", b"2")], base_offset=6, base_timestamp=TS))
    assert [r.offset for r in rows(decode(data))] == [0, 6]
    assert decode(empty_batch(base_offset=0, last_offset_delta=0)).num_rows == 0


@pytest.mark.parametrize("ctype", [wire.CONTROL_ABORT, wire.CONTROL_COMMIT, 2, 3, 4, 5, 6,
                                   99])
def test_control_batches_are_never_rows(ctype):
    txn = v2_simple([(0, TS, b"k", b"in txn")], producer_id=4000, producer_epoch=3,
                    base_sequence=0, transactional=True)
    marker = control_batch(ctype, base_offset=1, value=None if ctype < 2 else b"\x00" * 9)
    after = v2_simple([(2, TS, b"k", b"after")], base_offset=2, base_timestamp=TS)
    got = rows(decode(txn + marker + after))
    assert [(r.offset, r.value) for r in got] == [(0, b"in txn"), (2, b"after")]


def test_compressed_control_batch_is_not_a_row():
    marker = control_batch(wire.CONTROL_COMMIT, base_offset=0, codec=wire.CODEC_GZIP)
    assert decode(marker).num_rows == 0


def test_transactional_data_batches_are_rows():
    data = v2_simple([(0, TS, b"k", b"v"), (1, TS, b"k", b"w")], producer_id=9,
                     producer_epoch=1, base_sequence=5, transactional=True)
    assert [r.value for r in rows(decode(data))] == [b"v", b"w"]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_hand_built_compressed_batches(codec):
    recs = [(i, TS + i, b"key%d" % i, b"value" * i, [("h", b"%d" % i)] if i % 2 else [])
            for i in range(30)]
    data = v2_simple(recs, codec=codec)
    got = rows(decode(data))
    assert got == kafka_python_rows(data)
    assert [r.value for r in got] == [b"value" * i for i in range(30)]


def test_invalid_utf8_header_keys_are_replaced_as_java_does():
    bad_keys = [b"ok", b"caf\xc3", b"\xff\xfe", b"a\xed\xa0\x80b", b"\xf0\x9f\x98", b"\xc0\xaf",
                b"\xe2\x82\xac\xf4\x90\x80\x80", "日本".encode()]
    rec = v2_record(0, 0, b"k", b"v", [(k, b"x") for k in bad_keys], header_key_bytes=True)
    batch = decode(v2_batch([rec], base_timestamp=TS))
    batch.validate(full=True)
    got = [k for k, _ in rows(batch)[0].headers]
    assert got == [k.decode("utf-8", "replace") for k in bad_keys]


def test_utf8_repair_hook_matches_python():
    from spark_kafkalog.format._decode import utf8_repair
    samples = [b"", b"plain", b"\x80", b"\xe2\x82", b"\xe2\x82\xac", b"\xed\xbf\xbf",
               b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5", b"\xc1\xbf", b"\xe0\x80\x80",
               b"\xf0\x80\x80\x80", b"a\xf0\x9fb", b"\xf0\x9f\x98\x80" * 3 + b"\xff"]
    for raw in samples:
        valid, fixed = utf8_repair(raw)
        expect_valid = True
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            expect_valid = False
        assert valid == expect_valid, raw
        assert fixed == raw.decode("utf-8", "replace").encode("utf-8"), raw


def test_long_varints_and_large_fields():
    big_value = bytes(range(256)) * 300                  # 76800 bytes: a 3-byte length
    many_headers = [("h%d" % i, b"v" * i) for i in range(100)]
    recs = [v2_record(70_000, -(2 ** 40), b"k" * 20_000, big_value, many_headers)]
    data = v2_batch(recs, base_offset=5, base_timestamp=TS, last_offset_delta=70_000)
    got = rows(decode(data))[0]
    assert got.offset == 70_005 and got.timestamp == TS - 2 ** 40
    assert got.key == b"k" * 20_000 and got.value == big_value
    assert got.headers == tuple(many_headers)
    assert [got] == kafka_python_rows(data)


def test_timestamp_outside_microsecond_range_is_reported():
    # a producer that wrote nanoseconds: valid for Kafka, not representable as
    # timestamp[us] (Spark's own Kafka source fails on it too)
    data = v2_simple([(0, 1_700_000_000_000_000_000, b"k", b"v")],
                     base_timestamp=1_700_000_000_000_000_000)
    with pytest.raises(UnsupportedFormatError) as info:
        decode(data)
    assert info.value.position == 0 and info.value.offset == 0
    assert "timestamp" in str(info.value)


def test_many_batches_many_rows_grow_the_buffers():
    parts, expected = [], []
    for b in range(300):
        recs = []
        for i in range(b % 17):
            off = b * 20 + i
            key = None if off % 13 == 0 else b"k%d" % off
            hdrs = [("x", b"y" * (off % 5))] if off % 4 == 0 else []
            recs.append((off, TS + off, key, b"v" * (off % 50), hdrs))
            expected.append(Rec(off, TS + off, 0, key, b"v" * (off % 50),
                                tuple(hdrs) if hdrs else None))
        if recs:
            parts.append(v2_simple(recs, base_offset=b * 20, base_timestamp=TS + b * 20))
    data = b"".join(parts)
    batch = decode(data)
    batch.validate(full=True)
    assert rows(batch) == expected


def test_nulls_first_appear_late_in_a_long_run():
    """The validity bitmaps are started at the first null; rows before it stay valid."""
    recs = [(i, TS, b"k%d" % i, b"v", []) for i in range(1000)]
    recs[997] = (997, TS, None, None, [])
    recs[999] = (999, -1 - 0, b"k", None, [])
    data = v2_simple(recs[:500], base_timestamp=TS) + \
        v2_simple(recs[500:], base_offset=500, base_timestamp=TS)
    got = rows(decode(data))
    assert [r.key is None for r in got] == [i == 997 for i in range(1000)]
    assert [r.value is None for r in got] == [i in (997, 999) for i in range(1000)]
    assert [r.timestamp == -1 for r in got] == [i == 999 for i in range(1000)]
    assert decode(data).column("timestamp").null_count == 0     # NO_TIMESTAMP: -1 ms


def test_attribute_bits_kafka_does_not_define_are_ignored():
    data = v2_simple([(0, TS, b"k", b"v")], extra_attributes=0x0100)
    assert rows(decode(data)) == [Rec(0, TS, 0, b"k", b"v")]


def test_partition_leader_epoch_is_not_checksummed():
    data = bytearray(v2_simple([(0, TS, b"k", b"v")]))
    struct.pack_into(">i", data, 12, 12345)
    assert rows(decode(bytes(data))) == [Rec(0, TS, 0, b"k", b"v")]


def test_control_batch_with_an_unreadable_key_is_corrupt_for_decode_and_scan():
    """Kafka parses every control record's key (ControlRecordType.parse); so do decode
    and scan_headers, and they agree."""
    from spark_kafkalog.errors import CorruptRecordError
    from spark_kafkalog.format.decode import scan_headers
    first = v2_simple([(0, TS, b"k", b"v")])
    for key in (b"\x00", None, b"\xff\xff\x00\x01"):          # short, null, version < 0
        bad = v2_batch([v2_record(0, 0, key, b"")], base_offset=1, control=True)
        with pytest.raises(CorruptRecordError, match="control key") as info:
            decode(first + bad)
        assert (info.value.position, info.value.offset) == (len(first), 1)
        scan = scan_headers(first + bad)
        assert (scan.problem.kind, scan.problem.position) == ("corrupt", len(first))
    # an unknown type is fine (Kafka maps it to UNKNOWN)
    assert decode(control_batch(1234, base_offset=0)).num_rows == 0
