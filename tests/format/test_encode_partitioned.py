"""format.encode_partitioned: every row, in one pass, into its partition's uncompressed
batches. Each partition's section must be exactly the bytes (and batch index) of
encoding that partition's rows on their own (``table.take``), and must read back through
kafka-python's decoder (CRC checked)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_kafkalog.errors import InvalidOptionError
from spark_kafkalog.format.encode import encode_batches, encode_partitioned
from tests.format.test_encode_rows import NOW, _expected, _kafka_python_records, _table

kp_records = pytest.importorskip("kafka.record")
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


def _check(table, parts, nparts, *, base_offset=0, max_batch_bytes=1 << 20,
           decode=True, leader_epoch=-1, compression="none"):
    """Sections == per-partition encodes of the taken rows; partitions in order, only
    those with rows; kafka-python reads each back. Returns the sections."""
    data, sections = encode_partitioned(table, parts, nparts, base_offset=base_offset,
                                        max_batch_bytes=max_batch_bytes, now_ms=NOW,
                                        partition_leader_epoch=leader_epoch,
                                        compression=compression)
    parts = np.asarray(parts)
    present = [p for p in range(nparts) if np.any(parts == p)]
    assert [s[0] for s in sections] == present
    end = 0
    for p, start, stop, index in sections:
        assert start == end                     # partitions back to back, in order
        end = stop
        rows = np.flatnonzero(parts == p)
        want, want_index = encode_batches(table.take(pa.array(rows)), now_ms=NOW,
                                          base_offset=base_offset,
                                          max_batch_bytes=max_batch_bytes,
                                          partition_leader_epoch=leader_epoch, threads=1,
                                          compression=compression)
        got = bytes(memoryview(data)[start:stop])
        assert got == want, f"partition {p}"
        assert index.equals(want_index), f"partition {p}"
        if decode:
            assert _kafka_python_records(got) == _expected(table, rows, base_offset)
    assert end == len(data)
    return sections


@pytest.mark.parametrize("nparts", [1, 2, 4, 7])
@pytest.mark.parametrize("max_batch_bytes", [62, 700, 3000, 1 << 20])
def test_sections_equal_per_partition_encodes(nparts, max_batch_bytes):
    table = _table(600, seed=nparts)
    parts = np.random.default_rng(max_batch_bytes).integers(0, nparts, 600)
    _check(table, parts, nparts, base_offset=1000, max_batch_bytes=max_batch_bytes)


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("max_batch_bytes", [62, 700, 1 << 20])
def test_compressed_sections_equal_per_partition_encodes(compression, max_batch_bytes):
    # random values do not compress: at 700 bytes, batches overflow and are split
    table = pa.Table.from_batches(_table(500, seed=31).to_batches(max_chunksize=45))
    parts = np.random.default_rng(max_batch_bytes).integers(0, 5, 500)
    _check(table, parts, 5, base_offset=77, max_batch_bytes=max_batch_bytes,
           compression=compression, leader_epoch=3)


def test_compressed_many_partitions():
    table = _table(1500, seed=13)
    parts = np.random.default_rng(9).integers(0, 400, 1500)
    sections = _check(table, parts, 400, max_batch_bytes=500, compression="lz4",
                      decode=False)
    assert len(sections) == len(np.unique(parts))


def test_compression_level_checked():
    table = pa.table({"value": [b"a", b"b"]})
    with pytest.raises(InvalidOptionError, match="compression_level"):
        encode_partitioned(table, np.array([0, 1]), 2, compression_level=3)
    with pytest.raises(InvalidOptionError):
        encode_partitioned(table, np.array([0, 1]), 2, compression="zstd",
                           compression_level=99)
    assert encode_partitioned(table, np.array([0, 1]), 2, compression="zstd",
                              compression_level=5)[1][1][0] == 1


def test_chunked_sliced_and_record_batch_inputs():
    table = _table(500, seed=9)
    parts = np.random.default_rng(1).integers(0, 3, 500).astype(np.int32)
    # a table of many record batches, as the Spark writer buffers them
    chunked = pa.Table.from_batches(table.to_batches(max_chunksize=37))
    assert chunked.column("value").num_chunks > 1
    _check(chunked, parts, 3, max_batch_bytes=900)
    # every column with an offset
    _check(table.slice(50, 300), parts[50:350], 3, max_batch_bytes=900)
    _check(table.to_batches()[0], parts, 3, leader_epoch=12)


def test_skewed_and_empty_partitions():
    table = _table(300, seed=4)
    parts = np.zeros(300, np.int64)
    parts[[5, 150, 299]] = 6                             # 1..5 have no rows
    sections = _check(table, parts, 8, max_batch_bytes=1500)
    assert [s[0] for s in sections] == [0, 6]


def test_every_row_in_its_own_batch_and_one_big_batch():
    table = _table(200, seed=6)
    parts = np.arange(200) % 5
    for p, _, _, index in _check(table, parts, 5, max_batch_bytes=62):
        assert index.column("record_count").to_pylist() == [1] * 40
    for p, _, _, index in _check(table, parts, 5):
        assert index.num_rows == 1


def test_parts_kinds():
    table = _table(60, seed=2)
    parts = np.random.default_rng(3).integers(0, 4, 60)
    want, _ = encode_partitioned(table, parts, 4, now_ms=NOW)
    for make in (lambda a: a.astype(np.int32), lambda a: a.astype(np.uint8),
                 lambda a: pa.array(a, pa.int32()), lambda a: pa.array(a, pa.int64()),
                 lambda a: pa.chunked_array([pa.array(a[:7]), pa.array(a[7:])]),
                 lambda a: np.repeat(a, 2)[::2]):
        assert encode_partitioned(table, make(parts), 4, now_ms=NOW)[0] == want


def test_no_rows():
    table = _table(5, seed=1).slice(0, 0)
    assert encode_partitioned(table, np.array([], np.int32), 3) == (b"", [])


@pytest.mark.parametrize("parts,n,match", [
    (np.array([0, 1, 3]), 3, r"parts\[2\] is 3, outside \[0, 3\)"),
    (np.array([0, -1, 1]), 3, r"parts\[1\] is -1"),
    (np.array([0, 1]), 3, "2 entries for 3 rows"),
    (np.array([[0, 1, 2]]), 3, "one-dimensional"),
    (np.array([0.0, 1.0, 2.0]), 3, "integer"),
    (pa.array([0, None, 1]), 3, "null"),
    (np.array([0, 1, 2]), 0, "num_partitions"),
])
def test_bad_partitions_rejected(parts, n, match):
    table = pa.table({"value": [b"a", b"b", b"c"]})
    with pytest.raises(InvalidOptionError, match=match):
        encode_partitioned(table, parts, n)


def test_bad_row_names_the_table_row():
    table = pa.table({"value": [b"a", b"b", b"c"],
                      "timestamp": pa.array([5, 6, -2], pa.int64())})
    with pytest.raises(InvalidOptionError, match=r"timestamp.*-2 ms at row 2\b"):
        encode_partitioned(table, np.array([1, 0, 1]), 2)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(n=st.integers(0, 120), nparts=st.integers(1, 6),
                  max_batch_bytes=st.sampled_from([62, 150, 400, 5000]),
                  seed=st.integers(0, 2 ** 32 - 1), chunk=st.integers(1, 50))
def test_property_equal_per_partition_encodes(n, nparts, max_batch_bytes, seed, chunk):
    table = _table(n, seed=seed)
    if n:
        table = pa.Table.from_batches(table.to_batches(max_chunksize=chunk))
    parts = np.random.default_rng(seed).integers(0, nparts, n)
    _check(table, parts, nparts, base_offset=seed % 1000, max_batch_bytes=max_batch_bytes,
           decode=n < 40)


def test_many_partitions_each_index_is_its_own():
    # thousands of partitions share one index table, sliced per partition
    table = _table(2000, seed=12)
    parts = np.random.default_rng(8).integers(0, 700, 2000)
    sections = _check(table, parts, 700, base_offset=5, max_batch_bytes=400, decode=False)
    assert len(sections) == len(np.unique(parts))
    for p, start, end, index in sections:
        assert index.column("position").to_pylist()[0] == 0
        assert sum(index.column("size").to_pylist()) == end - start
        assert sum(index.column("record_count").to_pylist()) == int(np.sum(parts == p))
