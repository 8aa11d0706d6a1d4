"""The kernel's cache of big output blocks: decoded batches own their memory (a block
is reused only after every Arrow buffer over it is gone), results do not depend on the
cache, and the cache stays within its limit."""
from __future__ import annotations

import gc

import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format import decode, encode
from spark_kafkalog.format import _decode

MiB = 1 << 20


def _table(n: int, seed: int) -> pa.Table:
    keys = [None if i % 11 == 0 else b"k%07d" % (i * seed) for i in range(n)]
    values = [b"%d:" % seed + bytes([(i * seed) % 251]) * (40 + i % 90) for i in range(n)]
    headers = [[{"key": "h", "value": b"%d" % i}] if i % 5 == 0 else None
               for i in range(n)]
    return pa.table({"key": pa.array(keys, pa.binary()),
                     "value": pa.array(values, pa.binary()),
                     "headers": pa.array(headers, decode(b"").schema.field("headers").type)})


@pytest.fixture
def cache_limit():
    """Restore the process's limit after a test changes it."""
    old = _decode.set_block_cache_limit(256 * MiB)
    _decode.set_block_cache_limit(old)
    yield
    _decode.set_block_cache_limit(old)


def _rows(batch):
    return batch.select(["key", "value", "offset", "headers"]).to_pylist()


def test_big_outputs_reuse_blocks_without_aliasing_live_batches(cache_limit):
    a_data = encode(_table(40_000, 3))
    b_data = encode(_table(40_000, 7))
    _decode.set_block_cache_limit(256 * MiB)
    _decode.set_block_cache_limit(0)          # start from an empty cache
    _decode.set_block_cache_limit(256 * MiB)
    a = decode(a_data, topic="t", partition=3)
    a_rows = _rows(a)
    b = decode(b_data, topic="t", partition=3)          # a is alive: no block of a reused
    assert _rows(a) == a_rows
    b_rows = _rows(b)
    del a
    gc.collect()
    count, cached, limit = _decode.block_cache_info()
    assert count >= 1 and 0 < cached <= limit
    c = decode(a_data, topic="t", partition=3)          # reuses a's blocks
    assert _decode.block_cache_info()[0] < count
    assert _rows(c) == a_rows
    assert _rows(b) == b_rows                            # b untouched by c's writes
    # the constant columns come from blocks too
    assert c.column("partition").to_pylist() == [3] * c.num_rows
    assert set(c.column("topic").to_pylist()) == {"t"}
    c.validate(full=True)


def test_results_do_not_depend_on_the_cache(cache_limit):
    data = encode(_table(30_000, 5))
    _decode.set_block_cache_limit(0)
    without = decode(data, topic="topic-x")
    assert _decode.block_cache_info()[:2] == (0, 0)
    _decode.set_block_cache_limit(256 * MiB)
    decode(data)                                         # fills the cache when released
    gc.collect()
    with_cache = decode(data, topic="topic-x")
    assert with_cache.equals(without)
    with_cache.validate(full=True)


def test_cache_respects_its_limit(cache_limit):
    data = encode(_table(30_000, 9))
    _decode.set_block_cache_limit(3 * MiB)
    for _ in range(3):
        decode(data)
        gc.collect()
        count, cached, limit = _decode.block_cache_info()
        assert cached <= 3 * MiB and limit == 3 * MiB
    _decode.set_block_cache_limit(0)
    assert _decode.block_cache_info()[:2] == (0, 0)
    with pytest.raises(InvalidOptionError):
        _decode.set_block_cache_limit(-1)


def test_keys_bigger_than_a_quarter_of_the_payload_grow_their_buffer(cache_limit):
    # the key buffer starts at a quarter of the payload bound: key-heavy data grows it
    n = 20_000
    keys = [bytes([i % 256]) * 200 + b"%d" % i for i in range(n)]
    t = pa.table({"key": pa.array(keys, pa.binary()),
                  "value": pa.array([None] * n, pa.binary())})
    got = decode(encode(t))
    assert got.column("key").to_pylist() == keys
    assert got.column("value").null_count == n


# ---- the record loop's short-copy and ASCII fast paths -------------------------------------

def test_header_keys_of_every_length_with_a_non_ascii_byte_anywhere():
    # the ASCII check reads words with overlapping loads: a byte >= 0x80 at any position
    # of any length must send the key through the UTF-8 check (valid kept, invalid
    # replaced with U+FFFD as Java does)
    from tests.format.builders import v2_batch, v2_record
    recs, expected = [], []
    for n in range(0, 41):
        for pos in range(-1, n):
            for bad in (b"\xe9", b"\xc3\xa9"):          # invalid alone, then valid "é"
                raw = bytearray(b"k" * n)
                if pos >= 0:
                    raw[pos:pos + 1] = bad
                raw = bytes(raw)
                recs.append(v2_record(len(recs), 0, None, b"v",
                                      [(raw, raw), (b"x" * n, None)],
                                      header_key_bytes=True))
                expected.append([(raw.decode("utf-8", "replace"), raw),
                                 ("x" * n, None)])
    got = decode(v2_batch(recs)).column("headers").to_pylist()
    assert [[(h["key"], h["value"]) for h in hs] for hs in got] == expected


def test_keys_and_values_of_every_copy_size():
    # copies up to 256 bytes are inline (fixed-size moves, the last one overlapping);
    # each size must land exactly, next to its neighbours
    from tests.format.builders import v2_batch, v2_record
    sizes = list(range(0, 300)) + [511, 512, 513, 4096]
    recs = [v2_record(i, 0, bytes([i % 251]) * n, bytes([(i + 7) % 253]) * (n + 1))
            for i, n in enumerate(sizes)]
    got = decode(v2_batch(recs))
    assert got.column("key").to_pylist() == [bytes([i % 251]) * n
                                             for i, n in enumerate(sizes)]
    assert got.column("value").to_pylist() == [bytes([(i + 7) % 253]) * (n + 1)
                                               for i, n in enumerate(sizes)]


def test_public_limit_setter_validates_and_returns_the_previous_limit(cache_limit):
    from spark_kafkalog.format.decode import set_block_cache_limit
    old = set_block_cache_limit(5 * MiB)
    assert set_block_cache_limit(old) == 5 * MiB
    for bad in (-1, 1.5, True, "1"):
        with pytest.raises(InvalidOptionError):
            set_block_cache_limit(bad)
