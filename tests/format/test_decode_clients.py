"""decode() against batches written by two independent clients' own builders
(kafka-python and aiokafka): every magic, every codec each of them writes. The rows must
be exactly the keys, values, offsets, timestamps and headers the builders were given,
and agree with kafka-python's reader."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format import wire
from spark_kafkalog.format.decode import decode, decode_run
from spark_kafkalog.format.schema import record_schema
from tests.format.builders import (
    CLIENT_CODECS,
    Rec,
    client_batch,
    client_expected,
    kafka_python_rows,
    legacy_message,
    legacy_wrapper,
    rows,
    set_offset,
)

TS0 = 1_600_000_000_000


def sample(n: int, *, headers: bool, start: int = 0) -> list[tuple]:
    """(timestamp, key, value, headers): null and empty keys and values, several header
    shapes (null and empty header values, non-ASCII keys), compressible values."""
    out = []
    for i in range(start, start + n):
        key = None if i % 7 == 3 else (b"" if i % 7 == 5 else b"key-%05d" % i)
        value = (None if i % 11 == 4 else
                 b"" if i % 11 == 6 else (b"value %d; " % i) * (1 + i % 9))
        hdrs: list = []
        if headers and i % 3 == 1:
            hdrs = [("trace-id", b"abc%d" % i), ("empty", b""), ("nothing", None)]
        elif headers and i % 5 == 2:
            hdrs = [("ключ", b"\x00\xff\x01"), ("trace-id", b"again")]
        out.append((TS0 + 37 * i, key, value, hdrs))
    return out


CASES = [(lib, magic, codec) for (lib, magic), codecs in CLIENT_CODECS.items()
         for codec in codecs]


def _id(case):
    lib, magic, codec = case
    return f"{lib}-v{magic}-{wire.CODEC_NAMES[codec]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_client_batches_decode_exactly(case):
    lib, magic, codec = case
    recs = sample(60, headers=magic == 2)
    data = client_batch(lib, magic, codec, recs, base_offset=1000)
    expected = client_expected(magic, recs, base_offset=1000)

    batch = decode(data, topic="orders", partition=7)
    assert batch.schema == record_schema(True)
    batch.validate(full=True)
    assert rows(batch) == expected
    assert rows(batch) == kafka_python_rows(data)
    assert batch.column("topic").to_pylist() == ["orders"] * len(expected)
    assert batch.column("partition").to_pylist() == [7] * len(expected)

    slim = decode(data, include_headers=False)
    assert slim.schema == record_schema(False)
    slim.validate(full=True)
    assert [r._replace(headers=None) for r in rows(slim)] == \
        [r._replace(headers=None) for r in expected]


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
def test_many_batches_every_magic_in_one_buffer(lib):
    """A segment written across upgrades: v0 messages, a v0 wrapper, v1 messages, a v1
    wrapper, v2 batches (compressed and not), offsets continuing across them."""
    parts, expected, off = [], [], 0
    layout = [(0, 0, 5), (0, 1, 7), (1, 0, 4), (1, 2, 9), (2, 0, 20), (2, 1, 13),
              (2, 0, 1)]
    for magic, codec, n in layout:
        recs = sample(n, headers=magic == 2, start=off)
        parts.append(client_batch(lib, magic, codec, recs, base_offset=off))
        expected += client_expected(magic, recs, base_offset=off)
        off += n
    data = b"".join(parts)
    batch = decode(data)
    batch.validate(full=True)
    assert rows(batch) == expected
    assert rows(batch) == kafka_python_rows(data)


def test_kafka_python_memory_records_builder():
    from kafka.record.memory_records import MemoryRecordsBuilder
    b = MemoryRecordsBuilder(magic=2, compression_type=wire.CODEC_ZSTD, batch_size=1 << 20,
                             offset=500)
    recs = sample(40, headers=True)
    for ts, key, value, hdrs in recs:
        assert b.append(ts, key, value, hdrs) is not None
    b.close()
    data = bytes(b.buffer())
    assert rows(decode(data)) == client_expected(2, recs, base_offset=500)


def test_v1_client_wrapper_with_log_append_time():
    """A broker with message.timestamp.type=LogAppendTime rewrites the wrapper's
    attributes and timestamp: every inner message takes both."""
    recs = sample(12, headers=False)
    inner = b"".join(legacy_message(i, k, v, magic=1, timestamp=ts)
                     for i, (ts, k, v, _h) in enumerate(recs))
    data = legacy_wrapper(inner, offset=311, magic=1, codec=wire.CODEC_GZIP,
                          timestamp=TS0 + 999_999, log_append_time=True)
    expected = client_expected(1, recs, base_offset=300, log_append_time=TS0 + 999_999)
    assert rows(decode(data)) == expected
    assert rows(decode(data)) == kafka_python_rows(data)


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
def test_v1_wrapper_offset_zero_means_relative_offsets_are_absolute(lib):
    """librdkafka-style produce data: wrapper offset 0, Kafka then takes the inner
    (relative) offsets as they are."""
    recs = sample(5, headers=False)
    data = client_batch(lib, 1, wire.CODEC_GZIP, recs, base_offset=0)
    data = set_offset(data, 0)
    assert [r.offset for r in rows(decode(data))] == [0, 1, 2, 3, 4]


def test_input_buffer_types(tmp_path):
    import mmap
    recs = sample(30, headers=True)
    data = client_batch("aiokafka", 2, wire.CODEC_LZ4, recs, base_offset=3)
    expected = client_expected(2, recs, base_offset=3)
    path = tmp_path / "seg.log"
    path.write_bytes(b"junk" + data)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert rows(decode(memoryview(mm)[4:])) == expected
        assert rows(decode_run(memoryview(mm)[4:], skip_positions=[0])) == []
    for obj in (data, bytearray(data), memoryview(data), pa.py_buffer(data),
                memoryview(b"xx" + data)[2:], memoryview(bytearray(data)).cast("b")):
        assert rows(decode(obj)) == expected
    with pytest.raises(InvalidOptionError, match="contiguous"):
        decode(memoryview(data + data)[::2])
    with pytest.raises(InvalidOptionError, match="bytes-like"):
        decode("not bytes")


def test_result_does_not_reference_the_input():
    recs = sample(20, headers=True)
    buf = bytearray(client_batch("kafka-python", 2, 0, recs))
    batch = decode(buf)
    buf[:] = b"\x00" * len(buf)
    assert rows(batch) == client_expected(2, recs)


def test_empty_input_gives_an_empty_batch_of_the_schema():
    for headers in (True, False):
        batch = decode(b"", include_headers=headers)
        assert batch.num_rows == 0
        assert batch.schema == record_schema(headers)
        batch.validate(full=True)


def test_expected_helper_is_not_vacuous():
    # the comparison helpers see a difference in each field
    base = Rec(1, 2, 0, b"k", b"v", None)
    for changed in (base._replace(offset=2), base._replace(timestamp=None),
                    base._replace(key=None), base._replace(value=b""),
                    base._replace(headers=(("a", None),))):
        assert changed != base
