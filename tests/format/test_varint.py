"""Zig-zag varint / varlong: one boundary table shared by the encode, decode and size
tests, checked against the wire format itself (hand-written bytes for a few rows) and
against kafka-python's independent implementation (kafka.record.util) for every row.

Kafka's record fields use two widths: ``varint`` (int32: record length, offset delta,
key/value/header lengths and count, at most 5 bytes) and ``varlong`` (int64: the
timestamp delta, at most 10 bytes). Both zig-zag the value first, so the byte count
changes where the zig-zagged value crosses a power of 2**7: at +2**(7k-1) and
-2**(7k-1)-1. The table holds both sides of every such boundary.
"""
from __future__ import annotations

import importlib

import pytest
from kafka.record import util as kp_util

from spark_kafkalog.errors import CorruptRecordError, KafkaLogError

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _boundaries(max_bits: int, lo: int, hi: int) -> list[int]:
    """Both sides of every 7-bit boundary of the zig-zagged value, within [lo, hi]."""
    vals = {0, 1, -1, lo, hi, lo + 1, hi - 1}
    for k in range(1, max_bits // 7 + 2):
        edge = 2 ** (7 * k - 1)
        vals.update({edge - 1, edge, -edge, -edge - 1})
    return sorted(v for v in vals if lo <= v <= hi)


VARINT_TABLE = _boundaries(32, INT32_MIN, INT32_MAX)
VARLONG_TABLE = _boundaries(64, INT64_MIN, INT64_MAX)

#: rows whose bytes are written out by hand (from the protobuf/Kafka zig-zag definition),
#: so the table is anchored to the wire format and not only to another implementation
GOLDEN = {
    0: "00", -1: "01", 1: "02", -2: "03", 2: "04",
    63: "7e", -64: "7f", 64: "8001", -65: "8101",
    8191: "fe7f", -8192: "ff7f", 8192: "808001", -8193: "818001",
    2 ** 20 - 1: "feff7f", 2 ** 20: "80808001",
    2 ** 27 - 1: "feffff7f", 2 ** 27: "8080808001",
    INT32_MAX: "feffffff0f", INT32_MIN: "ffffffff0f",
    INT64_MAX: "feffffffffffffffff01", INT64_MIN: "ffffffffffffffffff01",
}


def _expected_size(v: int) -> int:
    z = _zigzag(v) & (2 ** 64 - 1)
    return max(1, (z.bit_length() + 6) // 7)


def _kafka_python_bytes(v: int) -> bytes:
    out = bytearray()
    kp_util.encode_varint(v, out.append)
    return bytes(out)


def test_table_covers_every_size():
    assert sorted({_expected_size(v) for v in VARINT_TABLE}) == [1, 2, 3, 4, 5]
    assert sorted({_expected_size(v) for v in VARLONG_TABLE}) == list(range(1, 11))
    # every size change is seen from both sides, for both signs
    for table in (VARINT_TABLE, VARLONG_TABLE):
        sizes = {}
        for v in table:
            sizes.setdefault(_expected_size(v), set()).add(v > 0)
        assert all(signs == {True, False} for size, signs in sizes.items() if size > 1)


def test_golden_rows_agree_with_kafka_python():
    for v, hexbytes in GOLDEN.items():
        assert _kafka_python_bytes(v).hex() == hexbytes, v
        assert kp_util.decode_varint(bytearray.fromhex(hexbytes), 0) == (v, len(hexbytes) // 2)


# ---- our hooks -----------------------------------------------------------------------------

def _hook(*names):
    """The first of ``names`` ("module:function") that exists: the varint helpers are
    test hooks exposed by the compiled kernels and their Python wrappers."""
    for spec in names:
        mod_name, fn = spec.split(":")
        try:
            mod = importlib.import_module(f"spark_kafkalog.format.{mod_name}")
        except ImportError:
            continue
        if hasattr(mod, fn):
            return getattr(mod, fn)
    pytest.fail(f"none of the varint hooks {names} exists")


class _Hooks:
    """Resolves a hook on first use, so each test needs only its own."""

    def __getitem__(self, name: str):
        module = "decode" if name.startswith("decode") else "encode"
        return _hook(f"{module}:{name}", f"_{module}:{name}")


@pytest.fixture(scope="module")
def hooks():
    return _Hooks()


def _widths():
    return [("varint", VARINT_TABLE), ("varlong", VARLONG_TABLE)]


@pytest.mark.parametrize("width,table", _widths())
def test_encode(hooks, width, table):
    encode = hooks[f"encode_{width}"]
    for v in table:
        got = bytes(encode(v))
        assert got == _kafka_python_bytes(v), (width, v)
        if v in GOLDEN:
            assert got.hex() == GOLDEN[v]


@pytest.mark.parametrize("width,table", _widths())
def test_size(hooks, width, table):
    size = hooks[f"{width}_size"]
    for v in table:
        assert size(v) == _expected_size(v) == len(_kafka_python_bytes(v)), (width, v)
        assert size(v) == kp_util.size_of_varint(v)


@pytest.mark.parametrize("width,table", _widths())
def test_decode(hooks, width, table):
    decode = hooks[f"decode_{width}"]
    for v in table:
        raw = _kafka_python_bytes(v)
        # at the start, and in the middle of a buffer with bytes either side
        assert tuple(decode(raw, 0)) == (v, len(raw)), (width, v)
        buf = b"\xaa\xbb" + raw + b"\xcc"
        assert tuple(decode(buf, 2)) == (v, 2 + len(raw)), (width, v)
        assert tuple(decode(bytearray(buf), 2)) == (v, 2 + len(raw))
        assert tuple(decode(memoryview(buf), 2)) == (v, 2 + len(raw))


@pytest.mark.parametrize("width,table", _widths())
def test_round_trip_through_all_three(hooks, width, table):
    encode, decode, size = (hooks[f"encode_{width}"], hooks[f"decode_{width}"],
                            hooks[f"{width}_size"])
    blob = b"".join(bytes(encode(v)) for v in table)
    assert len(blob) == sum(size(v) for v in table)
    pos = 0
    for v in table:
        got, pos = decode(blob, pos)
        assert got == v
    assert pos == len(blob)


# ---- what must be refused ----------------------------------------------------------------

@pytest.mark.parametrize("width,max_len", [("varint", 5), ("varlong", 10)])
def test_too_long_is_rejected(hooks, width, max_len):
    decode = hooks[f"decode_{width}"]
    # max_len continuation bytes then a terminator: one byte too many
    too_long = b"\x80" * max_len + b"\x00"
    with pytest.raises(CorruptRecordError):
        decode(too_long, 0)
    # an endless run of continuation bytes stops at the limit, not at the buffer end
    with pytest.raises(CorruptRecordError):
        decode(b"\xff" * 64, 0)
    # the longest legal encoding (a zero padded with continuation bytes) is fine
    padded = b"\x80" * (max_len - 1) + b"\x00"
    assert tuple(decode(padded, 0)) == (0, max_len)


@pytest.mark.parametrize("width", ["varint", "varlong"])
def test_truncated_is_rejected(hooks, width):
    decode = hooks[f"decode_{width}"]
    for raw in (b"", b"\x80", b"\xff\xff", bytes.fromhex(GOLDEN[INT32_MIN])[:-1]):
        with pytest.raises(CorruptRecordError):
            decode(raw, 0)
    with pytest.raises(KafkaLogError):
        decode(b"\x02", 1)          # position at the end of the buffer
