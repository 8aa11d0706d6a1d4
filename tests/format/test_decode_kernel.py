"""The kernel's own primitives, through its test hooks: CRC-32 (slicing by 8, against
zlib), varint strictness beyond the shared boundary table."""
from __future__ import annotations

import random
import zlib

import pytest

from spark_kafkalog.errors import CorruptRecordError
from spark_kafkalog.format._decode import crc32_ieee, decode_varint, decode_varlong


def test_crc32_matches_zlib_for_every_length_and_alignment():
    rng = random.Random(7)
    blob = bytes(rng.randrange(256) for _ in range(4096))
    for start in range(9):
        for length in list(range(0, 70)) + [1000, 4000]:
            chunk = blob[start:start + length]
            assert crc32_ieee(chunk) == zlib.crc32(chunk), (start, length)
    assert crc32_ieee(memoryview(bytearray(blob))[3:]) == zlib.crc32(blob[3:])


@pytest.mark.parametrize("raw", [
    b"\xff\xff\xff\xff\x10",      # 5th byte sets bit 32: overflows int32
    b"\x80\x80\x80\x80\x7f",
])
def test_varint_bits_beyond_32_are_rejected(raw):
    with pytest.raises(CorruptRecordError):
        decode_varint(raw)


def test_varlong_bits_beyond_64_are_rejected():
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 9 + b"\x02")
    assert decode_varlong(b"\xfe" + b"\xff" * 8 + b"\x01") == (2 ** 63 - 1, 10)


def test_varint_fast_paths_agree_with_the_slow_path():
    # 1 and 2 byte varints are decoded by a fast path when 2+ bytes are left, by the
    # bounded loop otherwise: same values either way
    from tests.format.builders import varint
    for v in list(range(-9000, 9000, 7)) + [-(2 ** 31), 2 ** 31 - 1]:
        raw = varint(v)
        assert decode_varint(raw) == (v, len(raw))
        assert decode_varint(raw + b"\x00\x00") == (v, len(raw))
        assert decode_varlong(raw) == (v, len(raw))
