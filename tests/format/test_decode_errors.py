"""Bad input: every check of the decoder raises our own error, naming the byte position
(position_base + the batch start) and the base offset, and saying what is wrong."""
from __future__ import annotations

import random
import struct

import pytest

from spark_kafkalog.errors import (
    CodecError,
    CorruptRecordError,
    InvalidOptionError,
    KafkaLogError,
    UnsupportedFormatError,
)
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import decode, decode_run
from tests.format.builders import (
    client_batch,
    control_batch,
    flip,
    legacy_message,
    legacy_wrapper,
    patch,
    refresh_crc,
    rows,
    v2_batch,
    v2_record,
    v2_simple,
    varint,
)

TS = 1_700_000_000_000
FIRST = v2_simple([(40, TS, b"k", b"first")], base_offset=40, base_timestamp=TS)


def _err(data, match, exc=CorruptRecordError, **kw) -> KafkaLogError:
    with pytest.raises(exc, match=match) as info:
        decode_run(data, **kw)
    assert isinstance(info.value, KafkaLogError)
    return info.value


# ---- framing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cut", [1, 7, 8, 16, 17, 30, 60, 61, -1])
def test_partial_batch_at_the_end(cut):
    second = v2_simple([(41, TS, b"k", b"second" * 10)], base_offset=41, base_timestamp=TS)
    data = FIRST + (second[:cut] if cut > 0 else second[:cut])
    err = _err(data, "partial batch", position_base=1000)
    assert err.position == 1000 + len(FIRST)
    assert err.offset == (41 if len(data) - len(FIRST) >= 8 else None)
    assert f"position {1000 + len(FIRST)}" in str(err)


@pytest.mark.parametrize("magic", [3, 7, -1, -128])
def test_unknown_magic(magic):
    bad = patch(v2_simple([(41, TS, b"k", b"v")], base_offset=41), wire.MAGIC_POS, ">b",
                magic)
    err = _err(FIRST + bad, f"unknown magic byte {magic}")
    assert (err.position, err.offset) == (len(FIRST), 41)


@pytest.mark.parametrize("magic,length", [(2, 48), (2, 0), (2, -5), (1, 21), (0, 13),
                                          (0, -2147483648)])
def test_impossible_length_for_the_magic(magic, length):
    entry = (v2_simple([(41, TS, b"k", b"v")], base_offset=41) if magic == 2 else
             legacy_message(41, b"k", b"v", magic=magic, timestamp=TS))
    bad = patch(entry, wire.SIZE_POS, ">i", length)
    err = _err(FIRST + bad, f"impossible batch length {length}")
    assert (err.position, err.offset) == (len(FIRST), 41)


def test_garbage_between_batches():
    _err(FIRST + b"\x00" * 40 + FIRST, "impossible batch length 0")


def test_crc32c_mismatch_and_verify_crc_false():
    second = v2_simple([(41, TS, b"k", b"value")], base_offset=41, base_timestamp=TS)
    value_pos = second.index(b"value")
    bad = flip(second, value_pos, 0x20)
    err = _err(FIRST + bad, "CRC-32C mismatch", position_base=7)
    assert (err.position, err.offset) == (7 + len(FIRST), 41)
    assert rows(decode(FIRST + bad, verify_crc=False))[1].value == b"Value"


def test_crc_does_not_cover_base_offset_or_leader_epoch():
    moved = patch(patch(FIRST, 0, ">q", 99), 12, ">i", 5)
    assert rows(decode(moved))[0].offset == 99


def test_negative_count_and_last_offset_delta_in_header():
    _err(refresh_crc(patch(FIRST, wire.V2_RECORD_COUNT_POS, ">i", -1)), "negative record count")
    _err(refresh_crc(patch(FIRST, wire.V2_LAST_OFFSET_DELTA_POS, ">i", -3)),
         "negative lastOffsetDelta")


# ---- records ----------------------------------------------------------------------------------

def _raw(payload: bytes, count: int, **kw) -> bytes:
    return FIRST + v2_batch(payload, count=count, base_offset=41, base_timestamp=TS, **kw)


def _body(*fields: bytes) -> bytes:
    body = b"".join(fields)
    return varint(len(body)) + body


GOOD = v2_record(0, 0, b"k", b"v")


@pytest.mark.parametrize("payload,count,match", [
    (GOOD + GOOD, 1, "bytes left over after the 1 records"),
    (GOOD, 2, "record count 2 is impossible"),
    (GOOD + b"\x00" * 10, 2, "record 1: empty record"),
    (GOOD * 2, 3, "record count 3 is impossible"),
    (b"", 0 + 1, "record count 1 is impossible"),
    (b"\x80" * 20, 1, "length varint is longer than Kafka allows"),
    (varint(-3) + b"\x00" * 10, 1, "negative record length -3"),
    (varint(500) + b"\x00" * 10, 1, "length 500 runs past the end"),
    (_body(b"\x00", b"\xff" * 10 + b"\x01", b"\x00", b"\x00", b"\x00", b"\x00"), 1,
     "timestampDelta varint is longer"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-2), varint(-1), b"\x00"), 1,
     "invalid key length -2"),
    (_body(b"\x00", b"\x00", b"\x00", varint(50), varint(-1), b"\x00"), 1,
     "key length 50 runs past"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-9), b"\x00"), 1,
     "invalid value length -9"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(4), b"ab", b"\x00"), 1,
     "value length 4 runs past"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), varint(-1)), 1,
     "invalid header count -1"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), varint(3), b"\x00\x00"), 1,
     "invalid header count 3"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), varint(1), varint(-1),
           b"\x00"), 1, "header 0 key length -1"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), varint(1), varint(0),
           varint(-4)), 1, "header 0 value length -4"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), varint(1), varint(0),
           varint(5), b"ab"), 1, "header 0 value length 5"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1), varint(-1), b"\x00", b"junk"), 1,
     "its length varint says 10 bytes but its fields take 6"),
    (_body(b"\x00", b"\x00", b"\x00", varint(-1)) + b"\x00\x00", 1,
     "value length varint runs past"),
    (_body(b"\x00", b"\x00", b"\xff\xff\xff\xff\x1f", varint(-1), varint(-1), b"\x00"), 1,
     "offsetDelta varint is longer than Kafka allows or overflows"),
])
def test_bad_records(payload, count, match):
    err = _err(_raw(payload, count), match, position_base=100)
    assert (err.position, err.offset) == (100 + len(FIRST), 41)


def test_record_errors_in_compressed_batches():
    payload = GOOD + GOOD
    err = _err(_raw(payload, 1, codec=wire.CODEC_GZIP), "bytes left over")
    assert (err.position, err.offset) == (len(FIRST), 41)
    _err(_raw(GOOD, 3, codec=wire.CODEC_GZIP), "record count 3 does not match")


def test_empty_batch_with_bytes_after_the_header():
    _err(_raw(GOOD, 0), "bytes left over after the 0 records")


# ---- codecs -----------------------------------------------------------------------------------

def test_payload_that_does_not_decompress():
    bad = v2_batch(b"this is not gzip at all", count=1, base_offset=41)
    bad = refresh_crc(patch(bad, wire.V2_ATTRIBUTES_POS, ">h", wire.CODEC_GZIP))
    err = _err(FIRST + bad, "gzip", CodecError, position_base=5)
    assert (err.position, err.offset) == (5 + len(FIRST), 41)
    assert err.__cause__ is not None


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_id(codec):
    bad = refresh_crc(patch(v2_simple([(41, TS, b"k", b"v")], base_offset=41),
                            wire.V2_ATTRIBUTES_POS, ">h", codec))
    err = _err(FIRST + bad, f"unknown compression codec id {codec}", UnsupportedFormatError)
    assert (err.position, err.offset) == (len(FIRST), 41)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompressed_size_limit(codec):
    data = v2_simple([(i, TS, None, b"\x00" * 10_000) for i in range(20)], codec=codec)
    assert decode(data, max_decompressed_bytes=300_000).num_rows == 20
    name = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}[codec]
    err = _err(data, f"magic 2 {name} batch: {name} payload decompresses to more than "
               "the limit of 100000 bytes", CodecError, max_decompressed_bytes=100_000)
    assert (err.position, err.offset) == (0, 0)


def test_legacy_wrapper_size_limit():
    inner = b"".join(legacy_message(i, None, b"\x00" * 5000, magic=0) for i in range(20))
    data = legacy_wrapper(inner, offset=19, magic=0, codec=wire.CODEC_GZIP)
    err = _err(data, "magic 0 gzip batch: gzip payload decompresses to more than the "
               "limit of 50000 bytes", CodecError, max_decompressed_bytes=50_000)
    assert (err.position, err.offset) == (0, 19)


def test_a_client_batch_with_a_flipped_payload_bit():
    data = client_batch("kafka-python", 2, wire.CODEC_LZ4,
                        [(TS, b"k", b"v" * 500, [])] * 10, base_offset=3)
    err = _err(flip(data, len(data) - 20), "CRC-32C mismatch")
    assert (err.position, err.offset) == (0, 3)


# ---- arguments -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    {"partition": 2 ** 31}, {"partition": "0"}, {"max_decompressed_bytes": 0},
    {"position_base": -1}, {"start_offset": 1.5}, {"end_offset": 2 ** 63},
    {"skip_positions": [5, 3]}, {"skip_positions": ["a"]}, {"topic": 3},
])
def test_invalid_arguments(kw):
    with pytest.raises(InvalidOptionError):
        decode_run(FIRST, **kw)


def test_errors_pickle_with_their_location():
    import pickle
    err = _err(FIRST + FIRST[:20], "partial batch", position_base=10)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), again.position, again.offset, str(again)) == \
        (type(err), err.position, err.offset, str(err))


# ---- hostile input, a quick sweep (the big fuzz lives elsewhere) ------------------------------

def test_random_damage_raises_only_our_errors():
    rng = random.Random(1234)
    parts = [
        v2_simple([(i, TS + i, b"k%d" % i, b"v" * i, [("h", b"x")] if i % 2 else [])
                   for i in range(6)]),
        v2_simple([(6 + i, TS, b"k", b"z" * 40) for i in range(6)], base_offset=6,
                  base_timestamp=TS, codec=wire.CODEC_GZIP),
        control_batch(1, base_offset=12),
        legacy_message(13, b"k", b"v", magic=1, timestamp=TS),
        legacy_wrapper(b"".join(legacy_message(i, None, b"q" * 30, magic=0)
                                for i in (14, 15)), offset=15, magic=0,
                       codec=wire.CODEC_SNAPPY),
        v2_simple([(16, TS, None, b"w" * 300)], base_offset=16, base_timestamp=TS,
                  codec=wire.CODEC_ZSTD),
        v2_simple([(17, TS, None, b"y" * 300)], base_offset=17, base_timestamp=TS,
                  codec=wire.CODEC_LZ4),
    ]
    data = b"".join(parts)
    assert decode(data).num_rows == 17
    for i in range(3000):
        buf = bytearray(data)
        kind = i % 4
        if kind == 0:
            for _ in range(rng.randint(1, 4)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del buf[rng.randrange(len(buf)):]
        elif kind == 2:
            pos = rng.randrange(len(buf) - 4)
            buf[pos:pos + 4] = struct.pack(">i", rng.choice(
                [-1, 0, 1, 2 ** 31 - 1, -2 ** 31, rng.randrange(-2 ** 31, 2 ** 31)]))
        else:
            pos = rng.randrange(len(buf))
            buf[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 9)))
        for verify in (True, False):
            try:
                batch = decode(bytes(buf), verify_crc=verify)
            except KafkaLogError:
                continue
            batch.validate(full=True)
