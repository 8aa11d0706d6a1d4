"""decode() on hand-built magic 0 / 1 message sets: uncompressed messages, compressed
wrappers (one level, v0 absolute / v1 relative inner offsets, wrapper timestamps), and
the cases Kafka's AbstractLegacyRecordBatch rejects."""
from __future__ import annotations

import pytest

from spark_kafkalog.errors import CorruptRecordError, UnsupportedFormatError
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import decode
from tests.format.builders import (
    Rec,
    kafka_python_rows,
    legacy_message,
    legacy_set,
    legacy_wrapper,
    rows,
    v2_simple,
)

TS = 1_500_000_000_000
LEGACY_CODECS = [wire.CODEC_GZIP, wire.CODEC_SNAPPY, wire.CODEC_LZ4]


def test_v0_messages_have_no_timestamp():
    data = legacy_set([(0, None, b"k", b"v"), (1, None, None, b""), (2, None, b"", None)],
                      magic=0)
    # no timestamp field: -1 ms (NO_TIMESTAMP), type -1, as the Java consumer reports a
    # magic 0 message and Spark's Kafka source shows it (1969-12-31T23:59:59.999Z)
    assert rows(decode(data)) == [Rec(0, -1, -1, b"k", b"v"), Rec(1, -1, -1, None, b""),
                                  Rec(2, -1, -1, b"", None)]
    assert decode(data).column("timestamp").cast("int64").to_pylist() == [-1000] * 3
    assert rows(decode(data)) == kafka_python_rows(data)


def test_v1_messages_timestamps_and_types():
    data = (legacy_message(5, b"a", b"1", magic=1, timestamp=TS) +
            legacy_message(6, b"b", b"2", magic=1, timestamp=-1) +
            legacy_message(7, b"c", b"3", magic=1, timestamp=TS + 9,
                           attributes=wire.LEGACY_TIMESTAMP_TYPE))
    assert rows(decode(data)) == [Rec(5, TS, 0, b"a", b"1"), Rec(6, -1, 0, b"b", b"2"),
                                  Rec(7, TS + 9, 1, b"c", b"3")]


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v0_wrapper_inner_offsets_are_absolute(codec):
    inner = legacy_set([(10, None, b"k%d" % i, b"v%d" % i) for i in range(1)] +
                       [(11 + i, None, None, b"x" * 50) for i in range(5)], magic=0)
    data = legacy_wrapper(inner, offset=15, magic=0, codec=codec)
    got = rows(decode(data))
    assert [r.offset for r in got] == [10, 11, 12, 13, 14, 15]
    assert all(r.timestamp == -1 and r.timestamp_type == -1 for r in got)
    assert got == kafka_python_rows(data)


@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_v1_wrapper_relative_offsets(codec):
    inner = b"".join(legacy_message(i, b"k", b"v%d" % i, magic=1, timestamp=TS + i)
                     for i in range(4))
    data = legacy_wrapper(inner, offset=1003, magic=1, codec=codec, timestamp=TS + 3)
    got = rows(decode(data))
    assert got == [Rec(1000 + i, TS + i, 0, b"k", b"v%d" % i) for i in range(4)]
    assert got == kafka_python_rows(data)


def test_v1_wrapper_relative_offsets_with_gaps():
    """After compaction of a v1 wrapper, inner relative offsets keep their gaps; the
    wrapper offset is that of the last one."""
    inner = b"".join(legacy_message(rel, b"k", b"v", magic=1, timestamp=TS)
                     for rel in (0, 2, 7))
    data = legacy_wrapper(inner, offset=57, magic=1, codec=wire.CODEC_GZIP, timestamp=TS)
    assert [r.offset for r in rows(decode(data))] == [50, 52, 57]


def test_v1_wrapper_log_append_time():
    inner = b"".join(legacy_message(i, None, b"v", magic=1, timestamp=TS + i)
                     for i in range(3))
    data = legacy_wrapper(inner, offset=2, magic=1, codec=wire.CODEC_SNAPPY,
                          timestamp=TS + 500, log_append_time=True)
    assert {(r.timestamp, r.timestamp_type) for r in rows(decode(data))} == {(TS + 500, 1)}


def test_v0_inner_messages_in_v1_wrapper():
    """Kafka's consumer accepts inner magic differing from the wrapper's; v0 inner
    messages have no timestamp whatever the wrapper says."""
    inner = legacy_set([(0, None, b"k", b"a"), (1, None, b"k", b"b")], magic=0)
    data = legacy_wrapper(inner, offset=9, magic=1, codec=wire.CODEC_GZIP, timestamp=TS,
                          log_append_time=True)
    assert rows(decode(data)) == [Rec(8, -1, -1, b"k", b"a"), Rec(9, -1, -1, b"k", b"b")]


def test_wrappers_and_plain_messages_and_v2_mixed():
    data = (legacy_set([(0, None, b"a", b"0")], magic=0) +
            legacy_wrapper(legacy_set([(1, None, b"b", b"1"), (2, None, b"c", b"2")],
                                      magic=0), offset=2, magic=0, codec=wire.CODEC_GZIP) +
            legacy_message(3, b"d", b"3", magic=1, timestamp=TS) +
            legacy_wrapper(b"".join(legacy_message(i, b"e", b"%d" % (4 + i), magic=1,
                                                   timestamp=TS) for i in range(2)),
                           offset=5, magic=1, codec=wire.CODEC_LZ4, timestamp=TS) +
            v2_simple([(6, TS, b"f", b"6"), (7, TS, b"g", b"7")], base_offset=6,
                      base_timestamp=TS))
    got = rows(decode(data))
    assert [(r.offset, r.value) for r in got] == [(i, b"%d" % i) for i in range(8)]
    assert got == kafka_python_rows(data)


# ---- what Kafka rejects ---------------------------------------------------------------------

def _raises(data, match, exc=CorruptRecordError, **kw):
    with pytest.raises(exc, match=match) as info:
        decode(data, **kw)
    return info.value


def test_inner_message_compressed_again_is_rejected():
    inner_wrapper = legacy_wrapper(legacy_set([(0, None, b"k", b"v")], magic=0), offset=0,
                                   magic=0, codec=wire.CODEC_GZIP)
    data = legacy_set([(0, None, b"a", b"b")], magic=0) + \
        legacy_wrapper(inner_wrapper, offset=1, magic=0, codec=wire.CODEC_GZIP)
    err = _raises(data, "itself compressed")
    first = len(legacy_set([(0, None, b"a", b"b")], magic=0))
    assert err.position == first and err.offset == 1


def test_wrapper_without_inner_messages_is_rejected():
    _raises(legacy_wrapper(b"", offset=3, magic=1, codec=wire.CODEC_GZIP, timestamp=TS),
            "no inner messages")


def test_wrapper_with_null_value_is_rejected():
    _raises(legacy_message(0, None, None, magic=1, timestamp=TS,
                           attributes=wire.CODEC_GZIP), "null value")


def test_v1_wrapper_offset_below_last_inner_is_rejected():
    inner = b"".join(legacy_message(i, None, b"v", magic=1, timestamp=TS) for i in range(5))
    _raises(legacy_wrapper(inner, offset=2, magic=1, codec=wire.CODEC_GZIP, timestamp=TS),
            "less than the last inner")


def test_zstd_needs_magic_2():
    _raises(legacy_message(0, None, b"\x28\xb5\x2f\xfd", magic=1, timestamp=TS,
                           attributes=wire.CODEC_ZSTD), "zstd")


def test_unknown_legacy_codec():
    _raises(legacy_message(0, None, b"x", magic=0, attributes=6), "unknown compression",
            UnsupportedFormatError)


def test_partial_inner_message_is_rejected():
    inner = legacy_set([(0, None, b"k", b"value")], magic=0)
    _raises(legacy_wrapper(inner[:-2], offset=0, magic=0, codec=wire.CODEC_GZIP),
            "inner message 0")


def test_outer_and_inner_crc_are_checked():
    good = legacy_message(0, b"k", b"v", magic=0)
    bad = legacy_message(0, b"k", b"v", magic=0, crc=0x58585858)
    err = _raises(good + bad, "CRC-32 mismatch")
    assert err.position == len(good) and err.offset == 0
    assert rows(decode(good + bad, verify_crc=False))[1].value == b"v"

    inner = legacy_message(0, b"k", b"v", magic=1, timestamp=TS, crc=1) + \
        legacy_message(1, b"k", b"w", magic=1, timestamp=TS)
    data = legacy_wrapper(inner, offset=1, magic=1, codec=wire.CODEC_GZIP, timestamp=TS)
    _raises(data, "inner message 0")
    assert [r.value for r in rows(decode(data, verify_crc=False))] == [b"v", b"w"]


@pytest.mark.parametrize("key,value,what", [
    (-2, 0, "invalid key length"),
    (100, 0, "key length 100 runs past"),
    (0, -7, "invalid value length"),
    (0, 100, "value length 100 runs past"),
])
def test_bad_key_value_lengths(key, value, what):
    import struct
    import zlib
    body = bytes([0, 0]) + struct.pack(">i", key) + struct.pack(">i", value)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    data = struct.pack(">qi", 4, len(msg)) + msg
    err = _raises(data, what)
    assert err.offset == 4 and err.position == 0


def test_bytes_left_after_key_and_value():
    import struct
    import zlib
    body = bytes([0, 0]) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"vX"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    _raises(struct.pack(">qi", 0, len(msg)) + msg, "do not fill")
