"""The writer's partitioner: Kafka's murmur2 placement, byte for byte (no Spark needed)."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format._partition import murmur2, partition_for_keys


def java_murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2, transcribed independently with explicit 32-bit wrapping."""
    mask = 0xFFFFFFFF
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length % 4
    base = length - rest
    if rest >= 3:
        h ^= data[base + 2] << 16
    if rest >= 2:
        h ^= data[base + 1] << 8
    if rest >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, n: int) -> int:
    return (java_murmur2(key) & 0x7FFFFFFF) % n


# Kafka's UtilsTest.testMurmur2 vectors
VECTORS = {b"21": -973932308, b"foobar": -790332482,
           b"a-little-bit-long-string": -985981536,
           b"a-little-bit-longer-string": -1486304829,
           b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
           b"abc": 479470107}


@pytest.mark.parametrize("key,expected", list(VECTORS.items()))
def test_kafka_vectors(key, expected):
    assert murmur2(key) == expected
    assert java_murmur2(key) == expected


def test_ten_thousand_random_keys_match_kafka_placement():
    rng = random.Random(2024)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
            for _ in range(10_000)]
    # the kernel's remainder is a multiply, not a division: every kind of divisor
    for n in (1, 2, 3, 7, 12, 64, 100, 1000, 65537, 2**31 - 1):
        got = partition_for_keys(pa.array(keys, pa.binary()), n)
        assert got.dtype == np.int32
        assert got.tolist() == [java_partition(k, n) for k in keys]
    assert [murmur2(k) for k in keys[:2000]] == [java_murmur2(k) for k in keys[:2000]]


def test_string_keys_hash_their_utf8_bytes_in_every_arrow_layout():
    words = ["", "ä", "日本語のキー", "x" * 33, "foobar"]
    want = [java_partition(w.encode(), 7) for w in words]
    for arr in (pa.array(words), pa.array(words, pa.large_string()),
                pa.array(words, pa.string_view()), pa.array(words).dictionary_encode(),
                pa.array([w.encode() for w in words], pa.large_binary()),
                pa.chunked_array([pa.array(words[:2]), pa.array(words[2:])])):
        assert partition_for_keys(arr, 7).tolist() == want


def test_null_keys_round_robin_from_the_start_partition():
    keys = pa.array([None, b"abc", None, None, None, b"21", None], pa.binary())
    got = partition_for_keys(keys, 3, null_start=2)
    assert got.tolist() == [2, java_partition(b"abc", 3), 0, 1, 2,
                            java_partition(b"21", 3), 0]
    # spread evenly: 10,000 null keys over 7 partitions differ by at most one
    counts = np.bincount(partition_for_keys(pa.nulls(10_000, pa.binary()), 7), minlength=7)
    assert counts.max() - counts.min() <= 1
    # a sliced array honours its offset (validity bits and key offsets)
    assert partition_for_keys(keys.slice(1, 4), 3).tolist() == [
        java_partition(b"abc", 3), 0, 1, 2]


def test_bad_inputs():
    with pytest.raises(ValueError):
        partition_for_keys(pa.array([b"a"]), 0)
    with pytest.raises(InvalidOptionError, match="binary or string"):
        partition_for_keys(pa.array([1, 2]), 3)


def test_group_by_partition_is_a_stable_counting_sort():
    from spark_kafkalog.format._partition import group_by_partition

    rng = np.random.default_rng(5)
    parts = rng.integers(0, 7, 10_000).astype(np.int32)
    order, counts = group_by_partition(parts, 7)
    assert order.tolist() == np.argsort(parts, kind="stable").tolist()
    assert counts.tolist() == np.bincount(parts, minlength=7).tolist()
    assert group_by_partition(np.empty(0, np.int32), 3)[1].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="row 1 has partition 9"):
        group_by_partition(np.array([0, 9], np.int32), 3)
